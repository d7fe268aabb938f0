//! Bandwidth shared by package inside per-service controllers
//! (`type: bandwidth-share`): the inline engine report's figures 7–10.
//!
//! The lab configures an `inline: engine` DUT with N services (A, B, …),
//! each recognised by a signature on its server's addresses
//! (`20.255.K.0/24`, either end of the flow), a controller per service
//! and direction at the plan's limits, and three subscribers — gold
//! (`100.127.0.1`), silver (`.2`) and bronze (`.3`) — shared across the
//! services, as the report did. Each subscriber sends to each service
//! (up, port 1 → 2) and each service to each subscriber (down, 2 → 1):
//! one stream per subscriber × service × direction, all at the same
//! constant rate (`offered`, above every subscriber's share), so every
//! controller is oversubscribed. The tester counts each stream's
//! received bytes per interval of transmit time; after `settle` seconds
//! the verdict is, per service and direction, each subscriber's share of
//! the received total within 5 % of its weight's share (10:5:1 →
//! 62.5 / 31.25 / 6.25 %) and the total within 2 % of the limit.

use crate::bwspec::{frame_bits, server_ip, service_name, subscriber_ip, SLOTS, SUBSCRIBERS};
use crate::engine::{Limit, Stream, TrialSpec};
use crate::plan::{FrameSize, TestKind};
use crate::procs::Ctx;
use crate::report::{ResultRow, TrialRecord};
use crate::sig::L3;
use crate::LabError;
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::sync::Arc;

/// Tolerance of each subscriber's share against its ideal (relative).
pub const SHARE_TOLERANCE: f64 = 0.05;
/// Tolerance of each service's total against its limit (relative).
pub const TOTAL_TOLERANCE: f64 = 0.02;
/// An interval in which the paced generator fell further behind its
/// schedule than this (held off the CPU) is left out of the verdict: it
/// then sends the frames due at once. Every subscriber offers more than
/// its rate, so its token bucket (20 ms of the rate deep, docs/inline.md)
/// is about empty: a pause up to the depth refills it and the burst
/// after it passes what the pause missed, nothing is lost; a longer
/// pause loses the rest, which is the generator's doing, not the DUT's.
pub const LATE_NS: u64 = 20_000_000;
/// An interval whose service total is this far below the median
/// interval's is a dip, not the steady state ([`Share::dips`]).
pub const DIP: f64 = 0.05;

/// One service × direction of a trial, measured. Subscribers in the
/// order gold, silver, bronze, then the light ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Share {
    /// Service name (A, B, …).
    pub service: String,
    /// `up` or `down`.
    pub dir: &'static str,
    /// The controller's limit, bits/s.
    pub limit_bps: u64,
    /// Each subscriber's mean received rate over the steady intervals
    /// after the settle time, bits/s.
    pub rate_bps: Vec<f64>,
    /// Each one's offered rate, bits/s.
    pub offered_bps: Vec<f64>,
    /// Each one's weighted max-min rate ([`crate::bwspec::max_min`]).
    pub expected_bps: Vec<f64>,
    /// Whether that is its whole offer (it wants less than its share).
    pub satisfied: Vec<bool>,
    /// Each one's share of the total.
    pub share: Vec<f64>,
    /// Each one's expected share (max-min rate / their sum).
    pub ideal: Vec<f64>,
    /// Each one's share / expected share − 1.
    pub share_error: Vec<f64>,
    /// Sum of the rates.
    pub total_bps: f64,
    /// Sum of the subscribers' mean rates over the same intervals.
    pub mean_total_bps: f64,
    /// total / expected total − 1 (the limit, or less when every
    /// subscriber is satisfied).
    pub total_error: f64,
    /// Within both tolerances.
    pub pass: bool,
    /// Intervals (0-based) after the settle time left out because the
    /// generator fell behind ([`LATE_NS`]).
    pub left_out: Vec<usize>,
    /// Intervals left out because their total fell more than [`DIP`]
    /// below the median interval's (at most a third of them).
    pub dips: Vec<usize>,
    /// Rate per interval per subscriber, bits/s (the whole trial).
    pub series_bps: Vec<Vec<f64>>,
}

/// How one trial was cut into intervals.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    /// Seconds per interval.
    pub interval: f64,
    /// Trial seconds.
    pub duration: f64,
    /// Seconds left out at the start.
    pub settle: f64,
    /// Per interval, the generator's lateness (ns; empty: unknown).
    pub late: &'a [u64],
}

/// Measures one service × direction from its subscribers' byte bins
/// (`bins[j]`: subscriber j, offering `offered[j]` bits/s with package
/// weight `weights[j]`), leaving out the first `settle` seconds, the last
/// (partial) interval and intervals where the generator was late. The
/// verdict: each subscriber's share of the total within
/// [`SHARE_TOLERANCE`] of its weighted max-min share, the total within
/// [`TOTAL_TOLERANCE`] of the max-min total, and each satisfied
/// subscriber's rate within [`TOTAL_TOLERANCE`] of its offer.
pub fn measure(
    service: String,
    dir: &'static str,
    limit_bps: u64,
    weights: &[f64],
    offered: &[f64],
    bins: &[&[u64]],
    w: Window,
) -> Share {
    let Window {
        interval,
        duration,
        settle,
        late,
    } = w;
    let full = (duration / interval + 1e-9).floor() as usize;
    let first = (settle / interval - 1e-9).ceil().max(0.0) as usize;
    let left_out: Vec<usize> = (first..full)
        .filter(|&k| late.get(k).is_some_and(|&l| l > LATE_NS))
        .collect();
    let n = bins.len();
    let expected_bps = crate::bwspec::max_min(limit_bps as f64, weights, offered);
    let satisfied: Vec<bool> = (0..n)
        .map(|j| expected_bps[j] >= offered[j] * (1.0 - 1e-9))
        .collect();
    let expected_total: f64 = expected_bps.iter().sum();
    let ideal: Vec<f64> = expected_bps
        .iter()
        .map(|e| e / expected_total.max(1e-9))
        .collect();
    let series_bps: Vec<Vec<f64>> = bins
        .iter()
        .map(|b| {
            let mut v: Vec<f64> = b
                .iter()
                .take(full)
                .map(|&x| x as f64 * 8.0 / interval)
                .collect();
            v.resize(full, 0.0);
            v
        })
        .collect();
    let kept: Vec<usize> = (first..full).filter(|k| !left_out.contains(k)).collect();
    let total_at = |k: usize| -> f64 { series_bps.iter().map(|s| s[k]).sum() };
    let mean_over = |ks: &[usize], s: &Vec<f64>| -> f64 {
        ks.iter().map(|&k| s[k]).sum::<f64>() / ks.len().max(1) as f64
    };
    let mean_total_bps: f64 = series_bps.iter().map(|s| mean_over(&kept, s)).sum();
    // A second whose total fell more than DIP below the median second's:
    // the shared machine held the DUT off the CPU there (its buckets are
    // 20 ms deep); not the steady state the controller holds. Left out
    // and listed; the mean with them is kept beside.
    let mut totals: Vec<f64> = kept.iter().map(|&k| total_at(k)).collect();
    totals.sort_by(f64::total_cmp);
    let median = totals.get(totals.len() / 2).copied().unwrap_or(0.0);
    let dips: Vec<usize> = kept
        .iter()
        .copied()
        .filter(|&k| total_at(k) < (1.0 - DIP) * median)
        .collect();
    let steady: Vec<usize> = kept.iter().copied().filter(|k| !dips.contains(k)).collect();
    let rate_bps: Vec<f64> = (0..n).map(|j| mean_over(&steady, &series_bps[j])).collect();
    let total_bps: f64 = rate_bps.iter().sum();
    let share: Vec<f64> = rate_bps
        .iter()
        .map(|r| if total_bps > 0.0 { r / total_bps } else { 0.0 })
        .collect();
    let share_error: Vec<f64> = (0..n).map(|j| share[j] / ideal[j] - 1.0).collect();
    let total_error = total_bps / expected_total - 1.0;
    // Most of the trial must be steady for a verdict.
    let pass = !steady.is_empty()
        && dips.len() * 3 <= kept.len()
        && share_error.iter().all(|e| e.abs() <= SHARE_TOLERANCE)
        && total_error.abs() <= TOTAL_TOLERANCE
        && (0..n)
            .filter(|&j| satisfied[j])
            .all(|j| (rate_bps[j] / offered[j] - 1.0).abs() <= TOTAL_TOLERANCE);
    Share {
        service,
        dir,
        limit_bps,
        rate_bps,
        offered_bps: offered.to_vec(),
        expected_bps,
        satisfied,
        share,
        ideal,
        share_error,
        total_bps,
        mean_total_bps,
        total_error,
        pass,
        left_out,
        dips,
        series_bps,
    }
}

fn mbps(v: f64) -> String {
    format!("{:.3}", v / 1e6)
}

/// One line per service × direction (the terminal table's detail).
pub fn line(v: &Value) -> String {
    let mut parts = Vec::new();
    let names: Vec<String> = v["subscribers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| n.as_str().unwrap_or("?").to_string())
        .collect();
    for s in v["shares"].as_array().into_iter().flatten() {
        let r = |j: usize| s["rate_bps"][j].as_f64().unwrap_or(0.0);
        let sh = |j: usize| s["share"][j].as_f64().unwrap_or(0.0) * 100.0;
        let n = s["rate_bps"].as_array().map_or(0, |a| a.len());
        let who = |j: usize| names.get(j).cloned().unwrap_or_else(|| format!("#{j}"));
        parts.push(format!(
            "{} {}: {} of {} Mbit/s ({:+.1} %), {} {} = {} % {}",
            s["service"].as_str().unwrap_or("?"),
            s["dir"].as_str().unwrap_or("?"),
            mbps(s["total_bps"].as_f64().unwrap_or(0.0)),
            mbps(s["limit_bps"].as_f64().unwrap_or(0.0)),
            s["total_error"].as_f64().unwrap_or(0.0) * 100.0,
            (0..n).map(who).collect::<Vec<_>>().join("/"),
            (0..n).map(|j| mbps(r(j))).collect::<Vec<_>>().join("/"),
            (0..n)
                .map(|j| format!("{:.1}", sh(j)))
                .collect::<Vec<_>>()
                .join("/"),
            if s["pass"].as_bool() == Some(true) {
                "ok"
            } else {
                "FAIL"
            }
        ));
    }
    parts.join("; ")
}

/// CSV header of `bandwidth-share.csv` (units in the names).
pub const CSV_HEADER: &str =
    "dut,test,trial,service,direction,subscriber,weight,interval_start_s,interval_s,rate_bps";

/// Every interval of every bandwidth-share row as CSV (header first).
pub fn csv(rows: &[ResultRow]) -> String {
    let mut o = format!("{CSV_HEADER}\n");
    for r in rows.iter().filter(|r| r.kind == TestKind::BandwidthShare) {
        let v = &r.detail["bandwidth_share"];
        let iv = v["interval_s"].as_f64().unwrap_or(1.0);
        // Runs before light subscribers name only the three.
        let names: Vec<String> = match v["subscribers"].as_array() {
            Some(a) => a
                .iter()
                .map(|n| n.as_str().unwrap_or("?").to_string())
                .collect(),
            None => SUBSCRIBERS.iter().map(|s| s.to_string()).collect(),
        };
        for (k, tr) in v["trials"].as_array().into_iter().flatten().enumerate() {
            for s in tr["shares"].as_array().into_iter().flatten() {
                for (j, sub) in names.iter().enumerate() {
                    let w = v["subscriber_weights"][j]
                        .as_f64()
                        .or(v["weights"][j].as_f64())
                        .unwrap_or(0.0);
                    for (n, x) in s["series_bps"][j]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .enumerate()
                    {
                        let _ = writeln!(
                            o,
                            "{},{},{},{},{},{sub},{w},{},{iv},{:.0}",
                            crate::bandwidth::field(&r.dut),
                            crate::bandwidth::field(&r.test),
                            k + 1,
                            s["service"].as_str().unwrap_or(""),
                            s["dir"].as_str().unwrap_or(""),
                            n as f64 * iv,
                            x.as_f64().unwrap_or(0.0)
                        );
                    }
                }
            }
        }
    }
    o
}

impl Ctx<'_> {
    /// The bandwidth-share procedure at frame size `fs` (module comment).
    pub(crate) fn bandwidth_share(
        &mut self,
        t: &crate::plan::Test,
        fs: &FrameSize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        let b = t
            .bw_share
            .as_ref()
            .ok_or_else(|| LabError::Other("bandwidth-share without parameters".into()))?;
        let c = &b.controllers;
        let size = fs.sizes[0];
        let names = c.names();
        let weights = c.all_weights();
        let nsub = names.len();
        // Copies of each subscriber's stream: the generator sends a port's
        // streams round-robin at one rate, so a light subscriber's offer
        // is fewer copies ([`SLOTS`] per heavy one; one each without
        // light subscribers).
        let heavy = if b.light_slots.is_empty() { 1 } else { SLOTS };
        let slots: Vec<u32> = (0..3)
            .map(|_| heavy)
            .chain(b.light_slots.iter().copied())
            .collect();
        let unit = b.offered_bps as f64 / f64::from(heavy);
        let offered: Vec<f64> = slots.iter().map(|&n| f64::from(n) * unit).collect();
        let mut keys = Vec::new();
        for k in 0..c.n {
            for (dir, limit) in [("up", c.up[k]), ("down", c.down[k])] {
                if limit > 0 {
                    keys.push((k, dir, limit));
                }
            }
        }
        // Stream order: copy, then (service, direction, subscriber), so
        // each subscriber's frames are spread evenly over the round (its
        // copies back to back would come in bursts its 20 ms bucket
        // cannot hold); `owner`: each stream's (service × direction,
        // subscriber).
        let mut owner = Vec::new();
        let mut streams = Vec::new();
        for copy in 0..heavy {
            for (si, &(k, dir, _)) in keys.iter().enumerate() {
                for (j, _) in slots.iter().enumerate().filter(|(_, &n)| n > copy) {
                    let (tx, rx, src, dst) = if dir == "up" {
                        (0, 1, subscriber_ip(j), server_ip(k))
                    } else {
                        (1, 0, server_ip(k), subscriber_ip(j))
                    };
                    owner.push((si, j));
                    streams.push(Stream {
                        tx,
                        expect: Some(rx),
                        also: None,
                        src: crate::dut::host_mac(tx),
                        src_count: 1,
                        dst: crate::dut::host_mac(rx),
                        dst_count: 1,
                        sizes: vec![size],
                        l3: Some(Arc::new([L3::V4 { src, dst }])),
                        arrival: None,
                        receivers: None,
                        vlan: None,
                    });
                }
            }
        }
        let per_port = |p: usize| {
            let n = streams.iter().filter(|s| s.tx == p).count();
            (n > 0).then(|| n as f64 * unit / frame_bits(size))
        };
        let spec = TrialSpec {
            rates: (0..self.tester.ports()).map(per_port).collect(),
            streams,
            limit: Limit::Duration(t.trial_duration),
            drain: t.drain,
            burst: t.burst,
        };
        let mut all_ok = true;
        let mut trials = Vec::new();
        for k in 0..t.trials {
            self.progress.label(format!(
                "{} {} {} trial {}",
                self.dut.spec.name,
                row.test,
                row.frame_size,
                k + 1
            ));
            crate::netns::sleep_checked(t.learn_wait)?;
            self.tester.bin_ns = Some((b.interval * 1e9) as u64);
            let r = self.tester.run(&spec);
            self.tester.bin_ns = None;
            let r = r?;
            self.progress
                .advance(t.trial_duration + t.drain + t.learn_wait);
            // Each subscriber's bytes per interval: its copies summed.
            let mut sums = vec![vec![Vec::<u64>::new(); nsub]; keys.len()];
            for (st, &(si, j)) in r.streams.iter().zip(&owner) {
                let acc = &mut sums[si][j];
                for (x, &y) in st.bins.as_deref().unwrap_or(&[]).iter().enumerate() {
                    if acc.len() <= x {
                        acc.resize(x + 1, 0);
                    }
                    acc[x] += y;
                }
            }
            let mut shares = Vec::new();
            for (si, &(svc, dir, limit)) in keys.iter().enumerate() {
                let empty: &[u64] = &[];
                let bins: Vec<&[u64]> = sums[si].iter().map(|v| v.as_slice()).collect();
                let w = Window {
                    interval: b.interval,
                    duration: t.trial_duration,
                    settle: b.settle,
                    late: r.tx_late_ns.as_deref().unwrap_or(empty),
                };
                shares.push(measure(
                    service_name(svc),
                    dir,
                    limit,
                    &weights,
                    &offered,
                    &bins,
                    w,
                ));
            }
            let ok = shares.iter().all(|s| s.pass) && r.tester_rx_drops == 0;
            if let Some(s) = shares.iter().find(|s| !s.dips.is_empty()) {
                row.notes.push(format!(
                    "trial {}: service {} {}: interval(s) {:?} left out, their total more than \
                     {:.0} % below the median interval's (mean total with them: {:+.1} % of the limit)",
                    k + 1,
                    s.service,
                    s.dir,
                    s.dips,
                    DIP * 100.0,
                    (s.mean_total_bps / s.limit_bps as f64 - 1.0) * 100.0
                ));
            }
            if let Some(s) = shares.iter().find(|s| !s.left_out.is_empty()) {
                row.notes.push(format!(
                    "trial {}: interval(s) {:?} left out: the generator fell more than {} ms \
                     behind (held off the CPU)",
                    k + 1,
                    s.left_out,
                    LATE_NS / 1_000_000
                ));
            }
            if r.tester_rx_drops > 0 {
                row.notes.push(format!(
                    "trial {}: the tester dropped {} frames on receive (rates undercounted)",
                    k + 1,
                    r.tester_rx_drops
                ));
            }
            if r.generator_limited {
                row.generator_limited = true;
            }
            let pct = |v: &[f64]| {
                v.iter()
                    .map(|x| format!("{:.1}", x * 100.0))
                    .collect::<Vec<_>>()
                    .join("/")
            };
            for s in shares.iter().filter(|s| !s.pass) {
                row.notes.push(format!(
                    "trial {}: service {} {}: shares {} % (max-min {}), total {:+.1} % of {:.3} Mbit/s; \
                     satisfied subscribers' rate / offer {}",
                    k + 1,
                    s.service,
                    s.dir,
                    pct(&s.share),
                    pct(&s.ideal),
                    s.total_error * 100.0,
                    s.expected_bps.iter().sum::<f64>() / 1e6,
                    (0..s.rate_bps.len())
                        .filter(|&j| s.satisfied[j])
                        .map(|j| format!("{:.3}", s.rate_bps[j] / s.offered_bps[j]))
                        .collect::<Vec<_>>()
                        .join("/")
                ));
            }
            all_ok &= ok;
            row.trials
                .push(TrialRecord::new("bandwidth-share", None, &r, ok));
            row.throughput_fps = Some(r.offered_fps);
            row.loss_ratio = Some(r.loss_ratio);
            trials.push(json!({ "shares": shares, "offered_fps": r.offered_fps }));
        }
        let last = trials.last().cloned().unwrap_or(Value::Null);
        crate::procs::merge(
            &mut row.detail,
            json!({ "bandwidth_share": {
                "interval_s": b.interval,
                "settle_s": b.settle,
                "offered_bps": b.offered_bps,
                "weights": c.weights,
                "ideal": c.ideal(),
                "subscribers": names,
                "subscriber_weights": weights,
                "subscriber_offered_bps": offered,
                "shares": last["shares"],
                "trials": trials,
            }}),
        );
        row.pass = Some(all_ok);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bwspec::Controllers;
    use crate::plan::Plan;

    fn plan(tests: &str) -> Result<Plan, LabError> {
        Plan::parse(&format!(
            "name: p\nduts:\n  - {{name: e, driver: lanyard, inline: engine}}\ntests:\n{tests}"
        ))
    }

    #[test]
    fn parses_limits_defaults_and_the_offered_load() {
        let p = plan(
            "  - {type: bandwidth-share, trial-duration: 8, services: [{up: 500k, down: 700k}, {up: 1.8M}]}\n",
        )
        .unwrap();
        let t = p.test(0).unwrap();
        assert_eq!((t.layer, t.ports), (Some(3), 2));
        assert_eq!(t.frame_sizes[0].sizes, vec![512]);
        let b = t.bw_share.unwrap();
        let c = b.controllers;
        assert_eq!(
            (c.n, c.up[0], c.down[0], c.up[1], c.down[1]),
            (2, 500_000, 700_000, 1_800_000, 0)
        );
        assert_eq!(c.weights, [10, 5, 1]);
        // 1.25 × gold's 10/16 of the largest limit.
        assert_eq!(b.offered_bps, 1_406_250);
        assert_eq!((b.settle, b.interval), (3.0, 1.0));
    }

    #[test]
    fn bad_plans_name_the_field() {
        for (tests, want) in [
            ("[{type: bandwidth-share}]", "tests[0].services: list 1..8"),
            ("[{type: bandwidth-share, services: [{}]}]", "tests[0].services[0]: give a limit"),
            (
                "[{type: bandwidth-share, services: [{up: 10k}]}]",
                "tests[0].services[0].up: 10000 bits/s is outside",
            ),
            (
                "[{type: bandwidth-share, services: [{up: 1G}]}]",
                "tests[0].services[0].up: 1000000000 bits/s is outside",
            ),
            ("[{type: bandwidth-share, services: [{up: fast}]}]", "tests[0].services[0].up"),
            (
                "[{type: bandwidth-share, services: [{up: 1M}], offered: 600k}]",
                "tests[0].offered: 600000 bits/s is below",
            ),
            (
                "[{type: bandwidth-share, services: [{up: 1M}], weights: [10, 5]}]",
                "tests[0].weights",
            ),
            (
                "[{type: bandwidth-share, services: [{up: 1M}], frame-sizes: [imix]}]",
                "tests[0].frame-sizes: one fixed",
            ),
            (
                "[{type: bandwidth-share, services: [{up: 100M}], frame-sizes: [64], trial-duration: 8}]",
                "tests[0].offered: needs",
            ),
            (
                "[{type: bandwidth-share, services: [{up: 1M}], trial-duration: 4}]",
                "tests[0].settle",
            ),
            (
                "[{type: bandwidth-share, services: [{up: 1M}], routes: 10}]",
                "tests[0].routes: not a bandwidth-share option",
            ),
            ("[{type: throughput, services: [{up: 1M}]}]", "tests[0].services: only bandwidth-share"),
            ("[{type: latency, offered: 1M}]", "tests[0].offered: only bandwidth-share"),
        ] {
            let e = plan(&format!("  - {}\n", tests.trim_start_matches('[').trim_end_matches(']')))
                .map(|p| p.test(0).map(|_| ()))
                .and_then(|r| r)
                .expect_err(tests)
                .to_string();
            assert!(e.contains(want), "{tests}: {e}");
        }
    }

    #[test]
    fn refused_on_duts_without_an_inline_engine() {
        let text = "name: p\nduts:\n  - {name: e, driver: lanyard, inline: engine}\n  - {name: b, driver: lanyard, inline: bypass}\n  - {name: w, driver: wire}\ntests:\n  - {type: bandwidth-share, trial-duration: 8, services: [{up: 1M}]}\n";
        let e = Plan::parse(text)
            .map(|p| p.test(0).map(|_| ()))
            .and_then(|r| r);
        let e = e.expect_err("bypass DUT").to_string();
        assert!(
            e.contains("DUT \"b\" (lanyard) has no inline engine"),
            "{e}"
        );
        let ok = text.replace("services:", "duts: [e], services:");
        assert!(Plan::parse(&ok).unwrap().test(0).is_ok());
    }

    #[test]
    fn the_dut_section_names_services_signatures_and_controllers() {
        let mut c = Controllers {
            n: 2,
            weights: [10, 5, 1],
            ..Default::default()
        };
        c.up[0] = 500_000;
        c.down[0] = 700_000;
        c.down[1] = 1_000_000;
        let y = c.splice(crate::dut::INLINE_YAML);
        let text = format!("switch:\n  name: lab\nports:\n  - name: sw1\n  - name: sw2\n{y}");
        let cfg = config::parse(&text, "inline.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let sc = cfg.service_control.expect("service-control");
        assert_eq!(sc.controllers.len(), 2);
        let first = y.find("name: bw-A").unwrap();
        assert!(first < y.find("name: lab-udp").unwrap(), "{y}");
        assert!(
            y.contains("- {service: svc-A, up: 500000, down: 700000}"),
            "{y}"
        );
        assert!(y.contains("- {service: svc-B, down: 1000000}"), "{y}");
        assert_eq!(
            c.provisioning(),
            "add bw-gold package=gold addr=100.127.0.1\nadd bw-silver package=silver addr=100.127.0.2\n\
             add bw-bronze package=bronze addr=100.127.0.3\n"
        );
    }

    #[test]
    fn measure_splits_after_settling_and_judges_both_tolerances() {
        // Weights 10:5:1, each offering 2 Mbit/s: the split is the weights'.
        let (wt, off) = ([10.0, 5.0, 1.0], [2e6; 3]);
        // 4 s in 1 s bins (+ a partial one), first second ramping: 1 Mbit/s split 10:5:1.
        let g = [10_000u64, 78_125, 78_125, 78_125, 999];
        let s = [90_000u64, 39_062, 39_063, 39_062, 999];
        let b = [90_000u64, 7_813, 7_812, 7_813, 999];
        let w = |settle: f64| Window {
            interval: 1.0,
            duration: 4.0,
            settle,
            late: &[],
        };
        let m = measure(
            "A".into(),
            "up",
            1_000_000,
            &wt,
            &off,
            &[&g, &s, &b],
            w(1.0),
        );
        assert!(m.pass, "{m:?}");
        assert_eq!(m.series_bps[0].len(), 4);
        assert!((m.total_bps - 1_000_000.0).abs() < 10.0, "{m:?}");
        assert!(m.share_error.iter().all(|e| e.abs() < 1e-3), "{m:?}");
        // Without the settle time the ramp is one interval of four, 13 %
        // above the rest: it is no dip, so the split fails.
        let m = measure(
            "A".into(),
            "up",
            1_000_000,
            &wt,
            &off,
            &[&g, &s, &b],
            w(0.0),
        );
        assert!(
            !m.pass && (m.mean_total_bps - 1_130_000.0).abs() < 1.0,
            "{m:?}"
        );
        // A stall of the DUT in one interval of three: a dip, left out.
        let mut stall = [g, s, b];
        for d in &mut stall {
            d[3] = d[3] * 8 / 10;
        }
        let m = measure(
            "A".into(),
            "up",
            1_000_000,
            &wt,
            &off,
            &[&stall[0], &stall[1], &stall[2]],
            w(1.0),
        );
        assert!(m.pass && m.dips == [3], "{m:?}");
        // A ramp over most of the trial fails the split.
        let g2 = [10_000u64, 10_000, 10_000, 78_125, 999];
        let b2 = [90_000u64, 90_000, 90_000, 7_813, 999];
        assert!(
            !measure(
                "A".into(),
                "up",
                1_000_000,
                &wt,
                &off,
                &[&g2, &s, &b2],
                w(0.0)
            )
            .pass
        );
        // Equal rates (priorities ignored) fail; so does a total 3 % off.
        let e = [41_667u64; 4];
        assert!(
            !measure(
                "A".into(),
                "up",
                1_000_000,
                &wt,
                &off,
                &[&e, &e, &e],
                w(1.0)
            )
            .pass
        );
        let lo = [
            g.map(|x| x * 97 / 100),
            s.map(|x| x * 97 / 100),
            b.map(|x| x * 97 / 100),
        ];
        let m = measure(
            "A".into(),
            "up",
            1_000_000,
            &wt,
            &off,
            &[&lo[0], &lo[1], &lo[2]],
            w(1.0),
        );
        assert!(!m.pass && (m.total_error + 0.03).abs() < 1e-3, "{m:?}");
        // A generator 50 ms late in interval 2: its burst is left out.
        let mut dip = [g, s, b];
        for d in &mut dip {
            d[2] /= 2;
        }
        let late = [0, 0, 50_000_000, 0];
        let m = measure(
            "A".into(),
            "up",
            1_000_000,
            &wt,
            &off,
            &[&dip[0], &dip[1], &dip[2]],
            Window {
                late: &late,
                ..w(1.0)
            },
        );
        assert!(m.pass && m.left_out == [2], "{m:?}");
        // Every interval late: nothing to judge.
        let m = measure(
            "A".into(),
            "up",
            1_000_000,
            &wt,
            &off,
            &[&g, &s, &b],
            Window {
                late: &[1 << 30; 5],
                ..w(1.0)
            },
        );
        assert!(!m.pass && m.left_out == [1, 2, 3], "{m:?}");
    }

    #[test]
    fn max_min_serves_the_light_fully_and_shares_the_rest_by_weight() {
        let w = [10.0, 5.0, 1.0, 10.0];
        // A light gold wanting 100k of 1M (its share by weight: 385k).
        let e = crate::bwspec::max_min(1e6, &w, &[2e6, 2e6, 2e6, 1e5]);
        let want = [562_500.0, 281_250.0, 56_250.0, 100_000.0];
        for (a, b) in e.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{e:?}");
        }
        // Nobody light: the weights' split.
        let e = crate::bwspec::max_min(1.6e6, &[10.0, 5.0, 1.0], &[2e6; 3]);
        assert_eq!(e, vec![1e6, 5e5, 1e5]);
        // A satisfied bronze frees capacity that gold and silver share
        // 10:5; everyone satisfied: everyone its demand.
        let e = crate::bwspec::max_min(1.6e6, &[10.0, 5.0, 1.0], &[2e6, 2e6, 4e4]);
        assert!(
            (e[0] - 1_040_000.0).abs() < 1e-6 && (e[1] - 520_000.0).abs() < 1e-6,
            "{e:?}"
        );
        assert_eq!(
            crate::bwspec::max_min(1e6, &[10.0, 1.0], &[1e5, 2e5]),
            vec![1e5, 2e5]
        );
    }

    #[test]
    fn a_light_subscriber_must_get_all_it_offers_and_the_rest_go_by_weight() {
        let (wt, off) = ([10.0, 5.0, 1.0, 10.0], [2e6, 2e6, 2e6, 1e5]);
        let w = Window {
            interval: 1.0,
            duration: 4.0,
            settle: 1.0,
            late: &[],
        };
        // Bytes per second for rates in bits/s, 4 intervals + a partial one.
        let bins = |r: [f64; 4]| r.map(|x| [(x / 8.0) as u64; 5]);
        let ok = bins([562_500.0, 281_250.0, 56_250.0, 100_000.0]);
        let b: Vec<&[u64]> = ok.iter().map(|x| &x[..]).collect();
        let m = measure("A".into(), "up", 1_000_000, &wt, &off, &b, w);
        assert!(m.pass, "{m:?}");
        assert_eq!(m.satisfied, vec![false, false, false, true]);
        assert!((m.ideal[3] - 0.1).abs() < 1e-9, "{m:?}");
        // Static shares by weight (no redistribution of what the light
        // one leaves): the heavy three stay at 10/26, 5/26, 1/26 and the
        // controller runs 28 % under its limit.
        let st = bins([384_615.0, 192_308.0, 38_462.0, 100_000.0]);
        let b: Vec<&[u64]> = st.iter().map(|x| &x[..]).collect();
        let m = measure("A".into(), "up", 1_000_000, &wt, &off, &b, w);
        assert!(!m.pass && m.total_error < -0.25, "{m:?}");
        // The light one held to 90 % of its offer, the rest given to the
        // others by weight (total at the limit): its share is 10 % off.
        let short = bins([568_125.0, 284_062.0, 56_813.0, 90_000.0]);
        let b: Vec<&[u64]> = short.iter().map(|x| &x[..]).collect();
        let m = measure("A".into(), "up", 1_000_000, &wt, &off, &b, w);
        assert!(!m.pass && m.total_error.abs() < 0.01, "{m:?}");
        // What the light one leaves shared equally, not by weight.
        let eq = bins([400_000.0, 400_000.0, 100_000.0, 100_000.0]);
        let b: Vec<&[u64]> = eq.iter().map(|x| &x[..]).collect();
        assert!(!measure("A".into(), "up", 1_000_000, &wt, &off, &b, w).pass);
    }

    #[test]
    fn light_subscribers_parse_round_to_slots_and_must_be_under_their_share() {
        let t = |light: &str| {
            plan(&format!(
                "  - {{type: bandwidth-share, trial-duration: 8, offered: 1.6M, \
                 services: [{{up: 1M, down: 2M}}], light: [{light}]}}\n"
            ))
            .and_then(|p| p.test(0))
        };
        // 1/32 of 1.6M: 50k each; 190k rounds to 4.
        let b = t("{package: gold, offered: 190k}, {package: silver, offered: 100k}")
            .unwrap()
            .bw_share
            .unwrap();
        assert_eq!(b.light_slots, vec![4, 2]);
        let c = b.controllers;
        assert_eq!(
            c.names(),
            ["gold", "silver", "bronze", "gold-light", "silver-light"]
        );
        assert_eq!(c.all_weights(), vec![10.0, 5.0, 1.0, 10.0, 5.0]);
        assert!(
            c.provisioning()
                .ends_with("add bw-silver-light package=silver addr=100.127.0.5\n"),
            "{}",
            c.provisioning()
        );
        for (light, want) in [
            ("{package: platinum, offered: 100k}", "light[0].package: \"platinum\""),
            (
                "{package: gold, offered: 100k}, {package: gold, offered: 200k}",
                "light[1].package: one light subscriber per package",
            ),
            ("{package: gold, offered: 10k}", "light[0].offered: 10000 bits/s: between 1/32"),
            ("{package: gold, offered: 1.6M}", "light[0].offered: 1600000 bits/s: between 1/32"),
            // Bronze's share of 1M is 1/17: 59k; 100k is not below it.
            ("{package: bronze, offered: 100k}", "light[0].offered: 100000 bits/s (2/32 of offered) is not below its share of service A up"),
        ] {
            let e = t(light).map(|_| ()).expect_err(light).to_string();
            assert!(e.contains(want), "{light}: {e}");
        }
        let e = plan("  - {type: throughput, light: [{package: gold, offered: 1M}]}\n")
            .and_then(|p| p.test(0))
            .map(|_| ())
            .expect_err("light on throughput")
            .to_string();
        assert!(e.contains("tests[0].light: only bandwidth-share"), "{e}");
    }
}
