//! `type: disruption`: constant-rate traffic from port 1 to port 2 while
//! commands run in the DUT namespace at set times (`commands: [{at, run}]`:
//! `lanyard bypass on`, `off`, a configuration apply, …). Reported per
//! trial: frames lost, the outage they stand for (lost / rate), and how
//! long each command took. Pass = nothing lost and every command
//! succeeded: the hitless operations of the requirements (the inline
//! engine report: moving between bypass and service mode, 0 ms).
//!
//! With `tiers: N` (the virtual-switch report's failover test) the
//! tester has N access ports (1, 3, ...) and N core ports (2, 4, ...),
//! each sending at `rate`; every access port sends to every core port and
//! back, one stream each way, and each stream's outage is its own lost
//! frames over its own offered rate, reported min/avg/max over the trials
//! beside the report's figure for the design (`tables::stream_table`).

use crate::convergence::{convergence_ms, MinAvgMax};
use crate::engine::{Limit, TrialResult, TrialSpec};
use crate::plan::{FrameSize, Test};
use crate::procs::Ctx;
use crate::report::{ResultRow, TrialRecord};
use crate::LabError;
use serde::Serialize;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A tester port's name in a tiers test (index from 0): the even indices
/// (ports 1, 3, ...) are the access tier, the odd ones the core tier.
pub fn tier_port(p: usize) -> String {
    let tier = if p.is_multiple_of(2) { "acc" } else { "core" };
    format!("{tier}{}", p / 2 + 1)
}

/// The (transmit, receive) ports of a tiers test with `tiers` ports per
/// tier: every access port to every core port, then every core port to
/// every access port.
pub fn tier_pairs(tiers: usize) -> Vec<(usize, usize)> {
    let (acc, core): (Vec<usize>, Vec<usize>) = (0..2 * tiers).partition(|p| p.is_multiple_of(2));
    let up = acc.iter().flat_map(|&a| core.iter().map(move |&c| (a, c)));
    let down = core.iter().flat_map(|&c| acc.iter().map(move |&a| (c, a)));
    up.chain(down).collect()
}

/// One stream of one trial.
#[derive(Debug, Clone, Serialize)]
pub struct StreamTrial {
    /// `acc1 > core2`.
    pub stream: String,
    /// Frames sent.
    pub sent: u64,
    /// Frames lost (sent − received once, after the drain).
    pub lost: i64,
    /// `lost / (sent / seconds)`, ms.
    pub outage_ms: f64,
    /// Frames delivered twice.
    pub duplicated: u64,
}

/// Each stream of trial `r` (`names` in stream order).
pub fn stream_trials(r: &TrialResult, names: &[String]) -> Vec<StreamTrial> {
    r.streams
        .iter()
        .zip(names)
        .map(|(s, n)| StreamTrial {
            stream: n.clone(),
            sent: s.sent,
            lost: s.lost,
            outage_ms: convergence_ms(s.lost, s.sent, r.tx_seconds),
            duplicated: s.duplicated,
        })
        .collect()
}

/// One stream over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct StreamSummary {
    /// `acc1 > core2`.
    pub stream: String,
    /// Trials it ran in.
    pub trials: usize,
    /// Min/avg/max of its outage over the trials, ms.
    pub outage_ms: MinAvgMax,
    /// Frames lost, all trials.
    pub lost: i64,
    /// Frames delivered twice, all trials.
    pub duplicated: u64,
}

/// Per stream (in the order streams first appear), its outage min/avg/max
/// over `trials` (each trial's [`stream_trials`]) and its lost and
/// duplicated frames summed.
pub fn summarise(trials: &[Vec<StreamTrial>]) -> Vec<StreamSummary> {
    let mut names: Vec<&str> = Vec::new();
    for s in trials.iter().flatten() {
        if !names.contains(&s.stream.as_str()) {
            names.push(&s.stream);
        }
    }
    names
        .into_iter()
        .map(|n| {
            let of: Vec<&StreamTrial> = trials.iter().flatten().filter(|s| s.stream == n).collect();
            let ms: Vec<f64> = of.iter().map(|s| s.outage_ms).collect();
            StreamSummary {
                stream: n.to_string(),
                trials: of.len(),
                outage_ms: MinAvgMax::of(&ms).unwrap_or_default(),
                lost: of.iter().map(|s| s.lost.max(0)).sum(),
                duplicated: of.iter().map(|s| s.duplicated).sum(),
            }
        })
        .collect()
}

/// Name of the stream of VLAN `v` (a pseudowire on a VLAN-circuit PE).
pub fn vlan_stream(v: u16) -> String {
    format!("vlan {v}")
}

/// Outage over every stream of every trial: min/avg/max over all
/// (stream, trial) outages, the worst stream and trial, and per trial
/// min/avg/max over its streams.
#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    /// Streams per trial.
    pub streams: usize,
    /// Trials.
    pub trials: usize,
    /// Over every (stream, trial), ms.
    pub outage_ms: MinAvgMax,
    /// Stream with the largest outage, and its trial (from 1).
    pub worst: (String, usize),
    /// Per trial, over its streams, ms.
    pub per_trial_ms: Vec<MinAvgMax>,
    /// Frames lost, all streams and trials.
    pub lost: i64,
    /// Frames delivered twice, all streams and trials.
    pub duplicated: u64,
}

/// The [`Spread`] of a per-stream disruption test (`per_trial[k]`: trial
/// k's streams); None without streams.
pub fn spread(per_trial: &[Vec<StreamTrial>]) -> Option<Spread> {
    let all: Vec<(usize, &StreamTrial)> = per_trial
        .iter()
        .enumerate()
        .flat_map(|(k, st)| st.iter().map(move |s| (k, s)))
        .collect();
    let ms: Vec<f64> = all.iter().map(|(_, s)| s.outage_ms).collect();
    let outage_ms = MinAvgMax::of(&ms)?;
    let (wk, w) = all
        .iter()
        .max_by(|a, b| a.1.outage_ms.total_cmp(&b.1.outage_ms))?;
    Some(Spread {
        streams: per_trial.iter().map(|t| t.len()).max().unwrap_or(0),
        trials: per_trial.len(),
        outage_ms,
        worst: (w.stream.clone(), wk + 1),
        per_trial_ms: per_trial
            .iter()
            .filter_map(|st| MinAvgMax::of(&st.iter().map(|s| s.outage_ms).collect::<Vec<_>>()))
            .collect(),
        lost: all.iter().map(|(_, s)| s.lost.max(0)).sum(),
        duplicated: all.iter().map(|(_, s)| s.duplicated).sum(),
    })
}

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
                p if p["design"] == "pe" => format!(" {}", crate::lanyard_pe::state_line(p)),
                p => format!(" {}", crate::lanyard_pair::state_line(p)),
            };
            let dup = match t["duplicated"].as_i64() {
                Some(n) if n > 0 => format!(", {n} duplicated"),
                _ => String::new(),
            };
            let worst = match (
                t["worst_stream"]["stream"].as_str(),
                t["worst_stream"]["outage_ms"].as_f64(),
            ) {
                (Some(s), Some(ms)) => format!(", worst stream {s} {ms:.1} ms"),
                _ => String::new(),
            };
            format!(
                "lost {} of {} ({:.3} ms{dup}{worst}) [{}]{pair}",
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
        let pairs = if t.tiers > 0 {
            tier_pairs(t.tiers)
        } else {
            vec![(0, 1)]
        };
        let (streams, names): (Vec<_>, Vec<String>) = if t.vlans > 0 {
            // One stream per VLAN (per pseudowire on a VLAN-circuit PE),
            // port 1 to 2, each with its own sequence numbers and outage.
            (0..t.vlans)
                .map(|i| {
                    (
                        self.vlan_stream(t, fs, 0, 1, i),
                        vlan_stream(crate::plan::FIRST_VLAN + i),
                    )
                })
                .unzip()
        } else {
            pairs
                .iter()
                .map(|&(tx, rx)| {
                    (
                        self.stream(t, fs, tx, rx),
                        format!("{} > {}", tier_port(tx), tier_port(rx)),
                    )
                })
                .unzip()
        };
        let per_stream_detail = t.tiers > 0 || t.vlans > 0;
        let senders: Vec<usize> = pairs.iter().map(|p| p.0).collect();
        let mut per_stream: Vec<Vec<StreamTrial>> = Vec::new();
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
            self.learn_for(t, t.ports)?;
            let pair0 = self.dut.pair_state();
            let spec = TrialSpec {
                streams: streams.clone(),
                rates: (0..self.tester.ports())
                    .map(|p| senders.contains(&p).then_some(rate))
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
            let st = stream_trials(&r, &names);
            let worst = st
                .iter()
                .max_by(|a, b| a.outage_ms.total_cmp(&b.outage_ms))
                .filter(|_| per_stream_detail)
                .map(|w| json!({"stream": w.stream, "outage_ms": w.outage_ms}));
            trials.push(json!({
                "worst_stream": worst,
                "sent": r.sent,
                "lost": r.lost,
                "outage_ms": if r.offered_fps > 0.0 { r.lost as f64 / r.offered_fps * 1e3 } else { 0.0 },
                "duplicated": r.duplicated,
                "reordered": r.reordered,
                "offered_fps": r.offered_fps,
                "commands": cmds,
                "pair": pair,
            }));
            if per_stream_detail {
                per_stream.push(st);
            }
            row.throughput_fps = Some(r.offered_fps);
            row.latency = Some(r.latency);
            if r.generator_limited && !row.generator_limited {
                row.notes.push(format!(
                    "trial {}: offered {:.0} of {:.0} frames/s intended (machine busy); outages use each stream's offered rate",
                    k + 1,
                    r.offered_fps,
                    r.intended_fps
                ));
            }
            row.generator_limited |= r.generator_limited;
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
        let mut d = json!({"rate_fps": rate, "trials": trials});
        if t.tiers > 0 {
            d["tiers"] = t.tiers.into();
        }
        if t.vlans > 0 {
            d["vlans"] = t.vlans.into();
            d["per_stream"] = json!(spread(&per_stream));
        }
        if per_stream_detail {
            d["streams"] = json!(summarise(&per_stream));
            d["stream_trials"] = json!(per_stream);
        }
        crate::procs::merge(&mut row.detail, json!({ "disruption": d }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::StreamResult;
    use crate::hist::LatencyStats;
    use crate::plan::Reference;

    #[test]
    fn tiers_send_every_access_port_to_every_core_port_and_back() {
        assert_eq!(tier_pairs(1), [(0, 1), (1, 0)]);
        let p = tier_pairs(2);
        assert_eq!(
            p,
            [
                (0, 1),
                (0, 3),
                (2, 1),
                (2, 3),
                (1, 0),
                (1, 2),
                (3, 0),
                (3, 2)
            ]
        );
        let names: Vec<String> = p
            .iter()
            .map(|&(a, b)| format!("{} > {}", tier_port(a), tier_port(b)))
            .collect();
        assert_eq!(names[1], "acc1 > core2");
        assert_eq!(names[7], "core2 > acc2");
    }

    fn sr(id: usize, sent: u64, lost: i64, dup: u64) -> StreamResult {
        StreamResult {
            id,
            tx: 0,
            expect: Some(1),
            sent,
            received: (sent as i64 - lost) as u64,
            lost,
            duplicated: dup,
            reordered: 0,
            per_port: vec![],
            flooded: 0,
            malformed: 0,
            latency: LatencyStats::default(),
            received_also: None,
            bins: None,
            mark: None,
            receivers: None,
        }
    }

    fn trial(streams: Vec<StreamResult>) -> TrialResult {
        TrialResult {
            nonce: 1,
            intended_fps: 0.0,
            offered_fps: 0.0,
            tx_seconds: 5.0,
            sent: 0,
            received: 0,
            lost: 0,
            loss_ratio: 0.0,
            duplicated: 0,
            reordered: 0,
            flooded: 0,
            malformed: 0,
            per_port_rx: vec![],
            per_port_tx: vec![],
            tester_rx_drops: 0,
            generator_limited: false,
            tx_refused: 0,
            tx_usage: Default::default(),
            tx_late_ns: None,
            latency: LatencyStats::default(),
            streams,
            mark_ns: None,
            tx_stall: None,
            per_port_latency: None,
        }
    }

    /// Outage per stream = its lost frames / its own rate; min/avg/max
    /// over the trials, lost and duplicated summed.
    #[test]
    fn outage_per_stream_over_trials() {
        let names = vec!["acc1 > core1".to_string(), "core1 > acc1".to_string()];
        // 5 s at 1,000 frames/s each: a lost frame is 1 ms.
        let t1 = stream_trials(
            &trial(vec![sr(0, 5000, 300, 0), sr(1, 5000, 20, 2)]),
            &names,
        );
        assert!((t1[0].outage_ms - 300.0).abs() < 1e-9);
        assert!((t1[1].outage_ms - 20.0).abs() < 1e-9);
        // Second trial: the second stream ran at 500 frames/s (2 ms a frame).
        let t2 = stream_trials(
            &trial(vec![sr(0, 5000, 100, 0), sr(1, 2500, 40, 1)]),
            &names,
        );
        assert!((t2[1].outage_ms - 80.0).abs() < 1e-9);
        let s = summarise(&[t1, t2]);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].stream, "acc1 > core1");
        assert_eq!(s[0].trials, 2);
        assert_eq!(
            (s[0].outage_ms.min, s[0].outage_ms.avg, s[0].outage_ms.max),
            (100.0, 200.0, 300.0)
        );
        assert_eq!((s[0].lost, s[0].duplicated), (400, 0));
        assert_eq!((s[1].outage_ms.min, s[1].outage_ms.max), (20.0, 80.0));
        assert_eq!((s[1].lost, s[1].duplicated), (60, 3));
        assert!(summarise(&[]).is_empty());
    }

    /// The report's table: a row per stream and design, the report's
    /// figure for the design beside it, within 100 columns.
    #[test]
    fn stream_table_in_the_reports_form() {
        let names = vec!["acc1 > core2".to_string(), "core2 > acc1".to_string()];
        let row = |dut: &str, lost: [i64; 2]| {
            let t = stream_trials(
                &trial(vec![sr(0, 5000, lost[0], 0), sr(1, 5000, lost[1], 1)]),
                &names,
            );
            let mut r = ResultRow::new(
                "tiers-power-off",
                crate::plan::TestKind::Disruption,
                dut,
                "64",
                64.0,
            );
            r.detail = json!({"disruption": {"streams": summarise(&[t])}});
            r
        };
        let (a, b) = (row("vs-pair", [12, 7]), row("rstp", [6400, 6391]));
        let reference = Reference {
            duts: [
                ("vs-pair".to_string(), "322 ms".to_string()),
                ("rstp".to_string(), "6.883 s (RSTP + HSRP)".to_string()),
            ]
            .into(),
            ..Reference::default()
        };
        let (t, legend) = crate::tables::stream_table(&[&a, &b], Some(&reference)).unwrap();
        let text = t.render();
        assert!(
            legend.contains("lost frames / its offered rate"),
            "{legend}"
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "stream        design   trials  min ms  avg ms  max ms  dup  report",
                "------------  -------  ------  ------  ------  ------  ---  ---------------------",
                "acc1 > core2  vs-pair       1    12.0    12.0    12.0    0  322 ms",
                "acc1 > core2  rstp          1  6400.0  6400.0  6400.0    0  6.883 s (RSTP + HSRP)",
                "core2 > acc1  vs-pair       1     7.0     7.0     7.0    1  322 ms",
                "core2 > acc1  rstp          1  6391.0  6391.0  6391.0    1  6.883 s (RSTP + HSRP)",
            ]
        );
        assert!(
            text.lines()
                .all(|l| l.chars().count() <= crate::tables::WIDTH),
            "{text}"
        );
        // In the whole report: the text within 100 columns with the
        // reference above the table, and the HTML with its own table.
        let mut sum = crate::tables::tests::five_duts();
        sum.results.extend([a.clone(), b.clone()]);
        sum.references.push(Reference {
            test: "tiers-power-off".into(),
            report: "virtual switch".into(),
            table: "chassis failover".into(),
            figure: "322 ms (RSTP + HSRP design - 6.883 s)".into(),
            scale: "2 access and 2 core tester ports".into(),
            ..reference.clone()
        });
        let text = crate::tables::render(&sum);
        let part = &text[text.find("== tiers-power-off").unwrap()..];
        assert!(
            part.contains("report: virtual switch chassis failover: 322 ms"),
            "{part}"
        );
        assert!(
            part.contains("core2 > acc1  rstp          1  6391.0"),
            "{part}"
        );
        assert!(
            text.lines()
                .all(|l| l.chars().count() <= crate::tables::WIDTH),
            "{text}"
        );
        let html = sum.html();
        let t = &html[html
            .find("data-kind=\"streams\" data-test=\"tiers-power-off\"")
            .unwrap()..];
        let t = &t[..t.find("</table>").unwrap()];
        assert_eq!(t.matches("<tr>").count(), 5, "{t}");
        assert!(t.contains("<td>6.883 s (RSTP + HSRP)</td>"), "{t}");
        // No streams (a test without tiers): no table.
        let mut plain = ResultRow::new("x", crate::plan::TestKind::Disruption, "d", "64", 64.0);
        plain.detail = json!({"disruption": {"trials": []}});
        assert!(crate::tables::stream_table(&[&plain], None).is_none());
    }

    /// A pseudowire failover: one stream per VLAN, the spread over every
    /// stream of every trial, and its table (one row per DUT, the
    /// report's figure beside it) in the text and HTML reports.
    #[test]
    fn spread_over_vlan_streams_and_its_table() {
        let names: Vec<String> = (100..103).map(vlan_stream).collect();
        assert_eq!(names[2], "vlan 102");
        // 5 s at 1,000 frames/s per stream: a lost frame is 1 ms.
        let t1 = stream_trials(
            &trial(vec![
                sr(0, 5000, 2, 0),
                sr(1, 5000, 4, 0),
                sr(2, 5000, 3, 0),
            ]),
            &names,
        );
        let t2 = stream_trials(
            &trial(vec![
                sr(0, 5000, 1, 0),
                sr(1, 5000, 9, 1),
                sr(2, 5000, 5, 0),
            ]),
            &names,
        );
        let sp = spread(&[t1.clone(), t2.clone()]).unwrap();
        assert_eq!(
            (sp.streams, sp.trials, sp.lost, sp.duplicated),
            (3, 2, 24, 1)
        );
        assert_eq!(
            (sp.outage_ms.min, sp.outage_ms.avg, sp.outage_ms.max),
            (1.0, 4.0, 9.0)
        );
        assert_eq!(sp.worst, ("vlan 101".to_string(), 2));
        assert_eq!(sp.per_trial_ms[0].avg, 3.0);
        assert_eq!(sp.per_trial_ms[1].max, 9.0);
        assert!(spread(&[]).is_none());
        let mut r = ResultRow::new(
            "t5-pw-failover",
            crate::plan::TestKind::Disruption,
            "pw-frr",
            "128",
            128.0,
        );
        r.detail = json!({"disruption": {"vlans": 3, "per_stream": sp,
            "streams": summarise(&[t1, t2])}});
        let reference = Reference {
            duts: [("pw-frr".to_string(), "58 ms (100 pws)".to_string())].into(),
            ..Reference::default()
        };
        let (t, legend) = crate::tables::spread_table(&[&r], Some(&reference)).unwrap();
        assert!(legend.contains("a pseudowire each"), "{legend}");
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "design  streams  trials  min ms  avg ms  max ms  worst        dup  report",
                "------  -------  ------  ------  ------  ------  -----------  ---  ---------------",
                "pw-frr        3       2     1.0     4.0     9.0  vlan 101 t2    1  58 ms (100 pws)",
            ]
        );
        let mut sum = crate::tables::tests::five_duts();
        sum.results.push(r.clone());
        sum.references.push(Reference {
            test: "t5-pw-failover".into(),
            report: "metro access".into(),
            table: "5".into(),
            figure: "100 pseudowires moved in 58 ms".into(),
            scale: "3 pseudowires".into(),
            ..reference.clone()
        });
        let text = crate::tables::render(&sum);
        let part = &text[text.find("== t5-pw-failover").unwrap()..];
        assert!(part.contains("pw-frr        3       2     1.0"), "{part}");
        // Not the 100-row per-stream table.
        assert!(!part.contains("vlan 100  pw-frr"), "{part}");
        assert!(
            text.lines()
                .all(|l| l.chars().count() <= crate::tables::WIDTH),
            "{text}"
        );
        let html = sum.html();
        let t = &html[html
            .find("data-kind=\"streams\" data-test=\"t5-pw-failover\"")
            .unwrap()..];
        let t = &t[..t.find("</table>").unwrap()];
        assert_eq!(t.matches("<tr>").count(), 2, "{t}");
        assert!(t.contains("<td>58 ms (100 pws)</td>"), "{t}");
    }

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
