//! Control-plane policing (`type: copp`): the top-of-rack report's table 1.
//! Port 1 floods UDP to 224.0.0.1 (all hosts: every IP stack on the link
//! takes it) toward the DUT at the generator's line rate (or `rate`),
//! while the tester's kernel pings the DUT's own address 198.18.1.1 on
//! the same port every `ping-interval-ms`. The control protocol that must
//! survive is the ping: the DUT keeps it when its control plane still
//! answers under the flood. Reported: the flood's offered rate, pings
//! answered with and without the flood, their round-trip time, the flood
//! frames the DUT passed on to port 2 (a bridge floods them), and
//! Lanyard's policing counters per class (`show control-plane`).
//!
//! The ping source is 198.18.1.3 on the tester's `t1` (not the emulated
//! host .2, whose MAC the tester's kernel does not own); the DUT resolves
//! it by ARP. A router has 198.18.1.1 on sw1; a bridge (linux-bridge,
//! ovs) gets it on `br0` for the test, its management address.

use crate::engine::{Limit, Stream, TrialSpec};
use crate::netns::{run, sleep_checked};
use crate::plan::{Driver, FrameSize, Test};
use crate::procs::Ctx;
use crate::report::{ResultRow, TrialRecord};
use crate::sig::{Mac, L3};
use crate::LabError;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::sync::Arc;

/// The DUT's address the tester pings.
pub const DUT_ADDR: &str = "198.18.1.1";
/// The tester kernel's address on `t1` (the ping source).
pub const PING_SRC: &str = "198.18.1.3/24";
/// Ethernet address of 224.0.0.1.
pub const ALL_HOSTS_MAC: Mac = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01];

/// What `ping -q` printed: sent, received, rtt min / avg / max (ms).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ping {
    /// Echo requests sent.
    pub sent: u64,
    /// Replies received.
    pub received: u64,
    /// Round-trip times in ms, when any reply came.
    pub rtt_ms: Option<(f64, f64, f64)>,
}

impl Ping {
    /// Parse `ping -q` output (iputils).
    pub fn parse(out: &str) -> Option<Ping> {
        let line = out.lines().find(|l| l.contains("packets transmitted"))?;
        let num = |key: &str| -> Option<u64> {
            let part = line.split(',').find(|p| p.contains(key))?;
            part.split_whitespace().next()?.parse().ok()
        };
        let sent = num("transmitted")?;
        let received = num("received")?;
        let rtt_ms = out.lines().find(|l| l.starts_with("rtt ")).and_then(|l| {
            let v: Vec<f64> = l
                .split('=')
                .nth(1)?
                .split_whitespace()
                .next()?
                .split('/')
                .filter_map(|x| x.parse().ok())
                .collect();
            (v.len() >= 3).then(|| (v[0], v[1], v[2]))
        });
        Some(Ping {
            sent,
            received,
            rtt_ms,
        })
    }

    /// Lost requests.
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    fn json(&self) -> Value {
        json!({
            "sent": self.sent,
            "received": self.received,
            "lost": self.lost(),
            "rtt_ms": self.rtt_ms.map(|(a, b, c)| json!({"min": a, "avg": b, "max": c})),
        })
    }
}

/// Per class `(passed, dropped)` deltas of two `show control-plane --json`
/// snapshots, classes that changed only.
pub fn class_delta(before: &Value, after: &Value) -> Vec<(String, u64, u64)> {
    let get = |v: &Value, class: &str, k: &str| -> u64 {
        v["classes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["class"] == class)
            .and_then(|c| c[k].as_u64())
            .unwrap_or(0)
    };
    after["classes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c["class"].as_str()?;
            let p = get(after, name, "passed").saturating_sub(get(before, name, "passed"));
            let d = get(after, name, "dropped").saturating_sub(get(before, name, "dropped"));
            (p + d > 0).then(|| (name.to_string(), p, d))
        })
        .collect()
}

/// One line for the reports from a row's `copp` detail.
pub fn line(c: &Value) -> String {
    let p = &c["ping"];
    let mut s = format!(
        "flood {:.0} fps to 224.0.0.1 ({} frames); ping {} of {} answered",
        c["flood_fps"].as_f64().unwrap_or(0.0),
        c["flood_sent"],
        p["received"],
        p["sent"],
    );
    if let Some(avg) = p["rtt_ms"]["avg"].as_f64() {
        s.push_str(&format!(
            " (rtt avg {avg:.2} ms, max {:.2} ms)",
            p["rtt_ms"]["max"].as_f64().unwrap_or(0.0)
        ));
    }
    let b = &c["baseline"];
    if b["sent"].as_u64().is_some() {
        s.push_str(&format!(
            "; without the flood {} of {}",
            b["received"], b["sent"]
        ));
    }
    if let Some(n) = c["flood_out_port2"].as_u64() {
        s.push_str(&format!("; flood frames out of port 2: {n}"));
    }
    if let Some(cl) = c["policing"].as_array() {
        let v: Vec<String> = cl
            .iter()
            .map(|x| {
                format!(
                    "{} passed {} dropped {}",
                    x["class"].as_str().unwrap_or("?"),
                    x["passed"],
                    x["dropped"]
                )
            })
            .collect();
        s.push_str(&format!(
            "; policing: {}",
            if v.is_empty() {
                "nothing punted".into()
            } else {
                v.join(", ")
            }
        ));
    }
    s
}

impl Ctx<'_> {
    /// The CoPP procedure at frame size `fs` (see the module comment).
    /// Pass = every ping answered under the flood, in every trial.
    pub(crate) fn copp(
        &mut self,
        t: &Test,
        fs: &FrameSize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        let dns = self.dut.topo.dut.clone();
        let tns = self.dut.topo.tester.clone();
        let bridge = matches!(self.dut.spec.driver, Driver::LinuxBridge | Driver::Ovs);
        let addr = format!("{DUT_ADDR}/24");
        if bridge {
            run("ip", &["-n", &dns, "addr", "replace", &addr, "dev", "br0"])?;
            run("ip", &["-n", &dns, "link", "set", "br0", "up"])?;
        }
        run(
            "ip",
            &["-n", &tns, "addr", "replace", PING_SRC, "dev", "t1"],
        )?;
        let res = self.copp_trials(t, fs, row, &tns);
        let _ = run("ip", &["-n", &tns, "addr", "del", PING_SRC, "dev", "t1"]);
        if bridge {
            let _ = run("ip", &["-n", &dns, "addr", "del", &addr, "dev", "br0"]);
        }
        res
    }

    fn copp_trials(
        &mut self,
        t: &Test,
        fs: &FrameSize,
        row: &mut ResultRow,
        tns: &str,
    ) -> Result<(), LabError> {
        let iv = t.ping_interval_ms as f64 / 1000.0;
        let count = ((t.trial_duration - 0.3).max(iv) / iv).floor().max(1.0) as u64;
        // Without the flood first: the address answers at all (ARP done).
        let base = ping(tns, 20.min(count), iv)?;
        if base.received == 0 {
            return Err(LabError::Dut(format!(
                "{DUT_ADDR} does not answer ping from the tester even without the flood"
            )));
        }
        let flood = Stream {
            tx: 0,
            expect: None,
            also: None,
            src: crate::dut::host_mac(0),
            src_count: 1,
            dst: ALL_HOSTS_MAC,
            dst_count: 1,
            sizes: fs.sizes.clone(),
            l3: Some(Arc::new([L3::V4 {
                src: crate::dut::host_ip(0),
                dst: [224, 0, 0, 1],
            }])),
            arrival: None,
            vlan: None,
            receivers: None,
        };
        let spec = TrialSpec {
            streams: vec![flood],
            rates: (0..self.tester.ports())
                .map(|p| if p == 0 { t.rate } else { None })
                .collect(),
            limit: Limit::Duration(t.trial_duration),
            drain: t.drain,
            burst: t.burst,
        };
        let mut all_ok = true;
        for k in 0..t.trials {
            self.progress.label(format!(
                "{} {} {} trial {}",
                self.dut.spec.name,
                row.test,
                row.frame_size,
                k + 1
            ));
            sleep_checked(t.learn_wait)?;
            let before = self.dut.lanyard_show(&["control-plane"]).ok();
            let (r, child) = self.tester.run_with(&spec, |ctl| {
                ctl.wait_t0();
                ping_child(tns, count, iv)
            })?;
            let out = child?
                .wait_with_output()
                .map_err(|e| LabError::Command(format!("ping: {e}")))?;
            let p = Ping::parse(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| {
                LabError::Command(format!(
                    "ping printed no summary: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            })?;
            let after = self.dut.lanyard_show(&["control-plane"]).ok();
            self.progress
                .advance(t.trial_duration + t.drain + t.learn_wait + 1.0);
            let ok = p.sent > 0 && p.lost() == 0 && r.tester_rx_drops == 0;
            all_ok &= ok;
            row.trials.push(TrialRecord::new("copp", t.rate, &r, ok));
            let mut c = json!({
                "flood_fps": r.offered_fps,
                "flood_sent": r.sent,
                "ping": p.json(),
                "baseline": base.json(),
                "ping_interval_ms": t.ping_interval_ms,
                "flood_out_port2": r.per_port_rx.get(1).copied().unwrap_or(0),
            });
            if let (Some(b), Some(a)) = (&before, &after) {
                c["policing"] = class_delta(b, a)
                    .into_iter()
                    .map(|(class, passed, dropped)| {
                        json!({"class": class, "passed": passed, "dropped": dropped})
                    })
                    .collect::<Vec<_>>()
                    .into();
            }
            // The row shows the last trial; every trial is in the log.
            row.throughput_fps = Some(r.offered_fps);
            // Unpaced is the procedure (the flood at the generator's
            // maximum), not a limit of the measurement: no `*`.
            row.generator_limited = false;
            row.loss_ratio = Some(if p.sent > 0 {
                p.lost() as f64 / p.sent as f64
            } else {
                1.0
            });
            if !ok {
                row.notes.push(format!(
                    "trial {}: {} of {} pings lost under the flood",
                    k + 1,
                    p.lost(),
                    p.sent
                ));
            }
            crate::procs::merge(&mut row.detail, json!({ "copp": c }));
        }
        row.pass = Some(all_ok);
        Ok(())
    }
}

fn ping_args(ns: &str, count: u64, iv: f64) -> Vec<String> {
    ["netns", "exec", ns, "ping", "-n", "-q", "-W", "1", "-i"]
        .iter()
        .map(|s| s.to_string())
        .chain([
            format!("{iv:.3}"),
            "-c".into(),
            count.to_string(),
            DUT_ADDR.into(),
        ])
        .collect()
}

fn ping_child(ns: &str, count: u64, iv: f64) -> Result<std::process::Child, LabError> {
    Command::new("ip")
        .args(ping_args(ns, count, iv))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LabError::Command(format!("ping: {e}")))
}

fn ping(ns: &str, count: u64, iv: f64) -> Result<Ping, LabError> {
    let out = ping_child(ns, count, iv)?
        .wait_with_output()
        .map_err(|e| LabError::Command(format!("ping: {e}")))?;
    Ping::parse(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| LabError::Command("ping printed no summary".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_iputils_summary() {
        let out = "PING 198.18.1.1 (198.18.1.1) 56(84) bytes of data.\n\n\
                   --- 198.18.1.1 ping statistics ---\n\
                   200 packets transmitted, 197 received, 1.5% packet loss, time 2010ms\n\
                   rtt min/avg/max/mdev = 0.031/0.250/4.100/0.400 ms\n";
        let p = Ping::parse(out).unwrap();
        assert_eq!((p.sent, p.received, p.lost()), (200, 197, 3));
        assert_eq!(p.rtt_ms, Some((0.031, 0.25, 4.1)));
        let none = "5 packets transmitted, 0 received, 100% packet loss, time 40ms\n";
        let p = Ping::parse(none).unwrap();
        assert_eq!((p.sent, p.received, p.rtt_ms), (5, 0, None));
        assert_eq!(Ping::parse("ping: connect: Network is unreachable"), None);
        let with_errors =
            "10 packets transmitted, 4 received, +6 errors, 60% packet loss, time 90ms\n";
        assert_eq!(Ping::parse(with_errors).unwrap().received, 4);
    }

    #[test]
    fn policing_delta_keeps_changed_classes() {
        let b = json!({"classes": [
            {"class": "unknown", "passed": 10, "dropped": 0},
            {"class": "icmp", "passed": 5, "dropped": 0}]});
        let a = json!({"classes": [
            {"class": "unknown", "passed": 210, "dropped": 99_000},
            {"class": "icmp", "passed": 5, "dropped": 0}]});
        assert_eq!(class_delta(&b, &a), vec![("unknown".into(), 200, 99_000)]);
        let c = json!({"flood_fps": 500000.0, "flood_sent": 1_000_000,
            "ping": {"sent": 200, "received": 200, "rtt_ms": {"min": 0.1, "avg": 0.2, "max": 0.9}},
            "baseline": {"sent": 20, "received": 20},
            "flood_out_port2": 0,
            "policing": [{"class": "unknown", "passed": 200, "dropped": 99_000}]});
        assert_eq!(
            line(&c),
            "flood 500000 fps to 224.0.0.1 (1000000 frames); ping 200 of 200 answered \
             (rtt avg 0.20 ms, max 0.90 ms); without the flood 20 of 20; \
             flood frames out of port 2: 0; policing: unknown passed 200 dropped 99000"
        );
    }

    #[test]
    fn ping_runs_in_the_tester_namespace() {
        assert_eq!(
            ping_args("lab-1-0-t", 200, 0.01).join(" "),
            "netns exec lab-1-0-t ping -n -q -W 1 -i 0.010 -c 200 198.18.1.1"
        );
    }
}
