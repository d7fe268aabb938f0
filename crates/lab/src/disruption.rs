//! `type: disruption`: constant-rate traffic from port 1 to port 2 while
//! commands run in the DUT namespace at set times (`commands: [{at, run}]`:
//! `lanyard bypass on`, `off`, a configuration apply, …). Reported per
//! trial: frames lost, the outage they stand for (lost / rate), and how
//! long each command took. Pass = nothing lost and every command
//! succeeded: the hitless operations of the requirements (the inline
//! engine report: moving between bypass and service mode, 0 ms).

use crate::engine::{Limit, TrialSpec};
use crate::plan::{FrameSize, Test};
use crate::procs::Ctx;
use crate::report::{ResultRow, TrialRecord};
use crate::LabError;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// One line for the reports from a row's `disruption` detail.
pub fn line(d: &Value) -> String {
    let trials: Vec<String> = d["trials"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let cmds: Vec<String> = t["commands"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{}@{}s {:.0} ms{}",
                        c["name"].as_str().unwrap_or("?"),
                        c["at"],
                        c["ms"].as_f64().unwrap_or(0.0),
                        if c["ok"] == true { "" } else { " FAILED" }
                    )
                })
                .collect();
            let pair = match &t["pair"] {
                Value::Null => String::new(),
                p if p["design"] == "rstp" => format!(" {}", crate::lanyard_rstp::state_line(p)),
                p => format!(" {}", crate::lanyard_pair::state_line(p)),
            };
            let dup = match t["duplicated"].as_i64() {
                Some(n) if n > 0 => format!(", {n} duplicated"),
                _ => String::new(),
            };
            format!(
                "lost {} of {} ({:.3} ms{dup}) [{}]{pair}",
                t["lost"],
                t["sent"],
                t["outage_ms"].as_f64().unwrap_or(0.0),
                cmds.join(", ")
            )
        })
        .collect();
    format!("per trial: {}", trials.join("; "))
}

/// The command's first word after the binary, for the report
/// (`"$LANYARD" --socket S bypass on` → `bypass on`).
fn short(cmd: &str) -> String {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let start = words
        .iter()
        .position(|w| w.contains("SOCKET"))
        .map(|i| i + 1)
        .unwrap_or(0);
    let s = words[start.min(words.len())..].join(" ");
    if s.len() > 40 {
        format!("{}…", &s[..s.floor_char_boundary(40)])
    } else {
        s
    }
}

impl Ctx<'_> {
    /// Run the trials of a disruption test at frame size `fs`.
    pub(crate) fn disruption(
        &mut self,
        t: &Test,
        fs: &FrameSize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        let rate = t
            .rate
            .ok_or_else(|| LabError::Plan("disruption test without a rate".into()))?;
        let streams = vec![self.stream(t, fs, 0, 1)];
        let mut all_ok = true;
        let mut trials = Vec::new();
        let mut lost_sum = 0i64;
        for k in 0..t.trials {
            self.progress.label(format!(
                "{} {} {} trial {}",
                self.dut.spec.name,
                row.test,
                row.frame_size,
                k + 1
            ));
            // The DUT whole again (a lanyard-pair node a previous trial
            // killed is back and paired), then the test's own preparation.
            self.dut.heal(60.0)?;
            for c in &t.before_trial {
                self.dut.run_command(c)?;
            }
            // The learning phase and pause as every trial has them.
            self.learn_for(t, 2)?;
            let pair0 = self.dut.pair_state();
            let spec = TrialSpec {
                streams: streams.clone(),
                rates: (0..self.tester.ports())
                    .map(|p| (p == 0).then_some(rate))
                    .collect(),
                limit: Limit::Duration(t.trial_duration),
                drain: t.drain,
                burst: t.burst,
            };
            let dut = self.dut;
            let (r, cmds) = self.tester.run_with(&spec, |ctl| {
                let t0 = Instant::now();
                ctl.wait_t0();
                let mut out = Vec::new();
                for c in &t.commands {
                    let due = t0 + Duration::from_secs_f64(c.at);
                    if let Some(w) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(w);
                    }
                    let s = Instant::now();
                    let res = dut.run_command(&c.run);
                    out.push(json!({
                        "at": c.at,
                        "run": c.run,
                        "name": short(&c.run),
                        "ms": s.elapsed().as_secs_f64() * 1e3,
                        "ok": res.is_ok(),
                        "error": res.err().map(|e| e.to_string()),
                    }));
                }
                out
            })?;
            self.progress
                .advance(t.trial_duration + t.drain + t.learn_wait);
            let pair = self.dut.pair_state().map(|after| {
                self.dut
                    .pair_trial(pair0.as_ref().unwrap_or(&Value::Null), &after)
            });
            let cmds_ok = cmds.iter().all(|c| c["ok"] == true);
            let ok = r.lost == 0 && r.sent > 0 && r.tester_rx_drops == 0 && cmds_ok;
            all_ok &= ok;
            lost_sum += r.lost;
            row.trials
                .push(TrialRecord::new("disruption", Some(rate), &r, ok));
            if !cmds_ok {
                for c in cmds.iter().filter(|c| c["ok"] != true) {
                    row.notes.push(format!(
                        "command failed: {}",
                        c["error"].as_str().unwrap_or("?")
                    ));
                }
            }
            trials.push(json!({
                "sent": r.sent,
                "lost": r.lost,
                "outage_ms": if r.offered_fps > 0.0 { r.lost as f64 / r.offered_fps * 1e3 } else { 0.0 },
                "duplicated": r.duplicated,
                "reordered": r.reordered,
                "offered_fps": r.offered_fps,
                "commands": cmds,
                "pair": pair,
            }));
            row.throughput_fps = Some(r.offered_fps);
            row.latency = Some(r.latency);
            row.generator_limited = r.generator_limited;
        }
        let sent: u64 = row.trials.iter().map(|x| x.result.sent).sum();
        row.loss_ratio = Some(if sent > 0 {
            lost_sum.max(0) as f64 / sent as f64
        } else {
            0.0
        });
        row.value = Some(lost_sum as f64);
        row.unit = Some("frames lost".into());
        row.pass = Some(all_ok);
        crate::procs::merge(
            &mut row.detail,
            json!({"disruption": {"rate_fps": rate, "trials": trials}}),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_commands_after_the_socket() {
        assert_eq!(
            short("\"$LANYARD\" --socket \"$LANYARD_SOCKET\" bypass on"),
            "bypass on"
        );
        assert_eq!(short("ip link set sw2 down"), "ip link set sw2 down");
        let d = json!({"trials": [{"sent": 1000, "lost": 0, "outage_ms": 0.0, "duplicated": 0, "commands": [
            {"name": "bypass on", "at": 1.0, "ms": 3.2, "ok": true},
            {"name": "bypass off", "at": 2.5, "ms": 2.9, "ok": false}]}]});
        assert_eq!(
            line(&d),
            "per trial: lost 0 of 1000 (0.000 ms) [bypass on@1.0s 3 ms, bypass off@2.5s 3 ms FAILED]"
        );
        let d = json!({"trials": [{"sent": 1000, "lost": 5, "outage_ms": 1.0, "duplicated": 2,
            "commands": [{"name": "x", "at": 1, "ms": 1.0, "ok": true}]}]});
        assert_eq!(
            line(&d),
            "per trial: lost 5 of 1000 (1.000 ms, 2 duplicated) [x@1s 1 ms]"
        );
    }
}
