//! Port mirroring (SPAN) in the lab: a throughput test with
//! `mirror-sessions: N` runs with N sessions on the DUT, session k
//! (1..N) copying every frame port 1 receives to port 2 + k, and passes a
//! trial only when every forwarded frame (port 2) *and* every copy (ports
//! 3..2+N) arrived: the zero-loss rate is the rate with zero mirror loss.
//! The top-of-rack report's figure: 8 SPAN sessions at the test bed's
//! ceiling, no copy lost.
//!
//! How each DUT mirrors:
//! - lanyard: `mirror-sessions` (docs/mirroring.md), `direction: rx`;
//! - ovs: one `Mirror` row per session (`select-src-port`, `output-port`);
//! - linux-bridge: `tc` on `sw1`'s ingress, one match-all `u32` filter
//!   (this kernel has no `matchall` classifier) with N
//!   `mirred egress mirror` actions; the destinations are not bridge
//!   ports (a bridge port would also get flooded frames).

use crate::engine::Stream;
use crate::netns::run;
use crate::plan::{FrameSize, Test};
use crate::procs::Ctx;
use crate::report::ResultRow;
use crate::LabError;
use serde_json::json;

/// Most sessions a plan may ask for (Lanyard's limit, docs/mirroring.md).
pub const MAX_SESSIONS: u32 = 16;

/// DUT port name (`swK`) of session `k`'s destination, k = 0..N.
pub fn destination(k: u32) -> String {
    format!("sw{}", k + 3)
}

/// True when `sw` (a DUT port name) is one of `n` sessions' destinations.
pub fn is_destination(sw: &str, n: u32) -> bool {
    (0..n).any(|k| destination(k) == sw)
}

/// Lanyard's `mirror-sessions` section for `n` sessions.
pub fn lanyard_yaml(n: u32) -> String {
    if n == 0 {
        return String::new();
    }
    let mut c = String::from("mirror-sessions:\n");
    for k in 0..n {
        c.push_str(&format!(
            "  - {{name: lab{}, source-ports: [sw1], direction: rx, destination: {}}}\n",
            k + 1,
            destination(k)
        ));
    }
    c
}

/// The `tc` filter on `sw1`'s ingress that copies every frame to the `n`
/// destinations (arguments after `tc -n NS`).
pub fn tc_filter_args(n: u32) -> Vec<String> {
    let mut a: Vec<String> = "filter add dev sw1 ingress protocol all u32 match u32 0 0"
        .split(' ')
        .map(String::from)
        .collect();
    for k in 0..n {
        for w in ["action", "mirred", "egress", "mirror", "dev"] {
            a.push(w.into());
        }
        a.push(destination(k));
    }
    a
}

/// linux-bridge: `n` sessions with tc (the destinations were left out of
/// the bridge by `start_bridge`).
pub fn bridge_setup(ns: &str, n: u32) -> Result<String, LabError> {
    run("tc", &["-n", ns, "qdisc", "add", "dev", "sw1", "clsact"])?;
    let mut args = vec!["-n".to_string(), ns.to_string()];
    args.extend(tc_filter_args(n));
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    run("tc", &refs)?;
    Ok(format!(
        "{n} mirror sessions: tc u32 match-all on sw1 ingress, mirred egress mirror to sw3..sw{} (not bridge ports)",
        n + 2
    ))
}

/// ovs: `n` Mirror rows on `br0` (arguments for `ovs-vsctl DB ...`).
pub fn ovs_args(n: u32) -> Vec<String> {
    let mut a = vec!["--timeout=20".to_string()];
    let mut ids = Vec::new();
    a.extend(
        ["--", "--id=@src", "get", "port", "sw1"]
            .iter()
            .map(|s| s.to_string()),
    );
    for k in 0..n {
        let d = destination(k);
        a.extend([
            "--".into(),
            format!("--id=@o{k}"),
            "get".into(),
            "port".into(),
            d,
            "--".into(),
            format!("--id=@m{k}"),
            "create".into(),
            "mirror".into(),
            format!("name=lab{}", k + 1),
            "select-src-port=@src".into(),
            format!("output-port=@o{k}"),
        ]);
        ids.push(format!("@m{k}"));
    }
    a.extend([
        "--".into(),
        "set".into(),
        "bridge".into(),
        "br0".into(),
        format!("mirrors=[{}]", ids.join(",")),
    ]);
    a
}

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
    fn lanyard_sessions_copy_sw1_to_one_destination_each() {
        let y = lanyard_yaml(8);
        assert_eq!(y.lines().count(), 9);
        assert!(y.contains("{name: lab1, source-ports: [sw1], direction: rx, destination: sw3}"));
        assert!(y.contains("{name: lab8, source-ports: [sw1], direction: rx, destination: sw10}"));
        assert_eq!(lanyard_yaml(0), "");
        assert!(is_destination("sw10", 8) && !is_destination("sw11", 8));
        assert!(!is_destination("sw1", 8) && !is_destination("sw2", 8));
    }

    #[test]
    fn lanyard_accepts_sixteen_sessions_and_the_inline_pair() {
        // The shape the lanyard driver writes: access ports in VLAN 10.
        let ports = |n: usize| -> String {
            (1..=n)
                .map(|i| format!("  - name: sw{i}\n    mode: access\n    vlan: 10\n"))
                .collect()
        };
        let base = "switch:\n  name: lab\nvlans:\n  - id: 10\nports:\n";
        let y = format!("{base}{}{}", ports(18), lanyard_yaml(MAX_SESSIONS));
        let cfg = config::parse(&y, "mirror.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"));
        assert_eq!(cfg.mirror_sessions.len(), 16);
        // One session more than Lanyard takes is refused by Lanyard too.
        let mut y17 = format!("{base}{}{}", ports(19), lanyard_yaml(MAX_SESSIONS));
        y17.push_str("  - {name: lab17, source-ports: [sw1], direction: rx, destination: sw19}\n");
        assert!(config::parse(&y17, "mirror.yaml").is_err());
        let inline = format!(
            "{base}  - name: sw1\n  - name: sw2\n  - name: sw3\n    mode: access\n    vlan: 10\n{}",
            crate::dut::INLINE_YAML
        );
        config::parse(&inline, "inline.yaml").unwrap_or_else(|e| panic!("{e}\n{inline}"));
    }

    #[test]
    fn tc_and_ovs_name_every_destination_once() {
        let tc = tc_filter_args(3).join(" ");
        assert_eq!(
            tc,
            "filter add dev sw1 ingress protocol all u32 match u32 0 0 action mirred egress mirror dev sw3 \
             action mirred egress mirror dev sw4 action mirred egress mirror dev sw5"
        );
        let ovs = ovs_args(2).join(" ");
        assert!(
            ovs.contains("--id=@m0 create mirror name=lab1 select-src-port=@src output-port=@o0")
        );
        assert!(ovs.contains("--id=@o1 get port sw4"));
        assert!(ovs.ends_with("set bridge br0 mirrors=[@m0,@m1]"));
    }

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
