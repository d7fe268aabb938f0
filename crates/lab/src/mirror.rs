//! Port mirroring (SPAN) in the lab: a throughput test with
//! `mirror-sessions: N` runs with N sessions on the DUT, session k
//! (1..N) copying every frame port 1 receives to port 2 + k, and passes a
//! trial only when every forwarded frame (port 2) *and* every copy (ports
//! 3..2+N) arrived: the zero-loss rate is the rate with zero mirror loss.
//! The top-of-rack report's figure: 8 SPAN sessions at the test bed's
//! ceiling, no copy lost.
//!
//! How each DUT mirrors: `mirror_setup.rs`.

use crate::engine::Stream;
use crate::plan::{FrameSize, Test};
use crate::procs::Ctx;
use crate::report::ResultRow;
use crate::LabError;
use serde_json::json;

/// Forwarded frames and copies of one trial's single stream: (sent,
/// received on port 2, copies received per session).
pub fn counts(r: &crate::engine::TrialResult) -> Option<(u64, u64, Vec<u64>)> {
    let s = r.streams.first()?;
    let rc = s.receivers.as_ref()?;
    let (fwd, copies) = rc.split_first()?;
    Some((
        s.sent,
        fwd.received,
        copies.iter().map(|c| c.received).collect(),
    ))
}

/// The mirror summary of a row (detail `mirror`) from its reported trial.
pub fn summary(n: u32, r: &crate::engine::TrialResult) -> serde_json::Value {
    let Some((sent, fwd, copies)) = counts(r) else {
        return json!({"sessions": n});
    };
    let got: u64 = copies.iter().sum();
    let want = sent * n as u64;
    json!({
        "sessions": n,
        "sent": sent,
        "forwarded": fwd,
        "forwarded_lost": sent as i64 - fwd as i64,
        "copies_expected": want,
        "copies": got,
        "mirror_lost": want as i64 - got as i64,
        "copies_per_session": copies,
        "rate_fps": if r.intended_fps > 0.0 { r.intended_fps } else { r.offered_fps },
    })
}

/// One line for the text and HTML reports.
pub fn line(m: &serde_json::Value) -> String {
    let n = m["sessions"].as_u64().unwrap_or(0);
    let Some(sent) = m["sent"].as_u64() else {
        return format!("{n} mirror sessions: no trial to report");
    };
    let per: Vec<u64> = m["copies_per_session"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_u64()).collect())
        .unwrap_or_default();
    let (lo, hi) = (
        per.iter().min().copied().unwrap_or(0),
        per.iter().max().copied().unwrap_or(0),
    );
    format!(
        "{n} sessions at {:.0} fps: forwarded {} of {sent}, copies {} of {} (per session {lo}..{hi}), mirror loss {}",
        m["rate_fps"].as_f64().unwrap_or(0.0),
        m["forwarded"],
        m["copies"],
        m["copies_expected"],
        m["mirror_lost"],
    )
}

impl Ctx<'_> {
    /// Throughput with `t.mirror_sessions` sessions: one stream from port
    /// 1 whose receivers are port 2 (forwarded) and every destination;
    /// loss counts forwarded frames and copies alike.
    pub(crate) fn mirror_throughput(
        &mut self,
        t: &Test,
        fs: &FrameSize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        let n = t.mirror_sessions;
        let mut s: Stream = self.stream(t, fs, 0, 1);
        s.expect = None;
        s.receivers = Some((1..=1 + n as usize).collect::<Vec<_>>().into());
        self.throughput(t, &[s], 2 + n as usize, row)?;
        let reported = row
            .trials
            .iter()
            .rev()
            .find(|r| r.pass)
            .or(row.trials.first());
        if let Some(rec) = reported {
            let m = summary(n, &rec.result);
            if m["mirror_lost"].as_i64().is_some_and(|l| l > 0) {
                row.notes.push(format!(
                    "copies lost at every rate tried; the reported trial lost {} of {}",
                    m["mirror_lost"], m["copies_expected"]
                ));
            }
            crate::procs::merge(&mut row.detail, json!({ "mirror": m }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_lost_copies() {
        use crate::engine::{ReceiverCount, StreamResult, TrialResult};
        let rc = |port, received| ReceiverCount {
            port,
            received,
            duplicated: 0,
            malformed: 0,
            first_rx: 0,
            last_rx: 0,
        };
        let s = StreamResult {
            id: 0,
            tx: 0,
            expect: None,
            sent: 100,
            received: 0,
            lost: 0,
            duplicated: 0,
            reordered: 0,
            per_port: vec![],
            flooded: 0,
            malformed: 0,
            latency: Default::default(),
            received_also: None,
            bins: None,
            mark: None,
            receivers: Some(vec![rc(1, 100), rc(2, 100), rc(3, 97)]),
        };
        let r = TrialResult {
            intended_fps: 5000.0,
            streams: vec![s],
            ..Default::default()
        };
        let m = summary(2, &r);
        assert_eq!(m["forwarded"], 100);
        assert_eq!(m["copies"], 197);
        assert_eq!(m["mirror_lost"], 3);
        assert_eq!(
            line(&m),
            "2 sessions at 5000 fps: forwarded 100 of 100, copies 197 of 200 (per session 97..100), mirror loss 3"
        );
    }
}
