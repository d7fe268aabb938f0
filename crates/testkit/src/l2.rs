//! Helpers shared by the layer-2 acceptance tests (`crates/lanyard/tests/l2_*.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::frame::{mac_str, Mac};
use crate::{Netns, RawPort, Switch};

/// Default pacing of bulk sends, frames per second, over all senders.
/// Override with `LANYARD_TEST_RATE`.
pub const DEFAULT_RATE: u64 = 100_000;

/// Pacing rate for bulk sends (`LANYARD_TEST_RATE` or [`DEFAULT_RATE`]).
pub fn rate() -> u64 {
    std::env::var("LANYARD_TEST_RATE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_RATE)
}

/// The binary under test: `LANYARD_BIN` if set (e.g. a release build),
/// else `default` (pass `env!("CARGO_BIN_EXE_lanyard")`).
pub fn bin(default: &str) -> String {
    std::env::var("LANYARD_BIN").unwrap_or_else(|_| default.to_string())
}

/// How long to wait for traffic to settle after bulk sends.
pub const QUIET: Duration = Duration::from_millis(700);

static HEAVY: Mutex<()> = Mutex::new(());

/// Serialises heavy (bulk-traffic) tests within one test binary so that
/// two switches do not compete for the same cores and drop frames.
pub fn heavy() -> MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Splits `total` into `parts` sizes that differ by at most one.
pub fn split(total: u32, parts: u32) -> Vec<u32> {
    (0..parts)
        .map(|i| total / parts + u32::from(i < total % parts))
        .collect()
}

/// Compares per-destination counts with the set of destinations expected
/// exactly once each. `Err` describes missing, duplicated and unexpected
/// addresses (a few examples of each).
pub fn check_exactly_once(
    what: &str,
    got: &HashMap<Mac, u32>,
    expected: impl IntoIterator<Item = Mac>,
) -> Result<(), String> {
    let expected: HashSet<Mac> = expected.into_iter().collect();
    let missing: Vec<&Mac> = expected.iter().filter(|m| !got.contains_key(*m)).collect();
    let dup: Vec<(&Mac, &u32)> = got
        .iter()
        .filter(|(m, n)| **n > 1 && expected.contains(*m))
        .collect();
    let extra: Vec<(&Mac, &u32)> = got.iter().filter(|(m, _)| !expected.contains(*m)).collect();
    if missing.is_empty() && dup.is_empty() && extra.is_empty() {
        return Ok(());
    }
    let total: u64 = got.values().map(|&n| u64::from(n)).sum();
    let ex = |v: Vec<String>| v.into_iter().take(5).collect::<Vec<_>>().join(", ");
    Err(format!(
        "{what}: expected exactly {} frames, one per address; got {total} frames to {} addresses: \
         {} missing (e.g. {}), {} duplicated (e.g. {}), {} unexpected (e.g. {})",
        expected.len(),
        got.len(),
        missing.len(),
        ex(missing.iter().map(|m| mac_str(m)).collect()),
        dup.len(),
        ex(dup
            .iter()
            .map(|(m, n)| format!("{}x{n}", mac_str(m)))
            .collect()),
        extra.len(),
        ex(extra
            .iter()
            .map(|(m, n)| format!("{}x{n}", mac_str(m)))
            .collect()),
    ))
}

/// Sends `frames` from the tester socket `port` (wired to the switch port
/// `sw_port`) and waits until the switch's `rx_frames` on `sw_port` has
/// grown by their number (at most 5 s), so that whatever the switch will
/// forward has been forwarded before the caller looks at the receivers.
/// Frames the kernel drops before the switch (cut-short tags) never count:
/// send those with [`RawPort::send_batch`] instead.
pub fn send_settled<B: AsRef<[u8]>>(sw: &Switch, port: &RawPort, sw_port: &str, frames: &[B]) {
    let rx = || crate::switch::port_counter(&sw.counters(), sw_port, "rx_frames");
    let want = rx() + frames.len() as u64;
    port.send_batch(frames).expect("send frames");
    let deadline = Instant::now() + Duration::from_secs(5);
    while rx() < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(30));
}

/// Kernel interface counters (`ip -s -j link`): (rx packets, rx dropped,
/// tx packets, tx dropped), or `None` if the interface does not exist.
pub fn kernel_stats(ns: &Netns, ifname: &str) -> Option<(u64, u64, u64, u64)> {
    let out =
        crate::netns::ip(&["-n", ns.name(), "-s", "-j", "link", "show", "dev", ifname]).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let s = &v[0]["stats64"];
    let n = |k: &str, f: &str| s[k][f].as_u64().unwrap_or(0);
    Some((
        n("rx", "packets"),
        n("rx", "dropped"),
        n("tx", "packets"),
        n("tx", "dropped"),
    ))
}

/// A per-port summary for failure messages: the switch's own counters
/// (rx/tx frames and non-zero drops) next to the kernel's view of the
/// same interface in the DUT namespace.
pub fn diagnostics(sw: &Switch, dut: &Netns, ports: &[&str]) -> String {
    let c = sw.try_show_json(&["show", "counters"]).unwrap_or_default();
    let mut out = String::new();
    for p in ports {
        let row = c["ports"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == *p))
            .cloned()
            .unwrap_or_default();
        let drops: Vec<String> = row["drops"]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter(|(_, v)| v.as_u64().unwrap_or(0) > 0)
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect()
            })
            .unwrap_or_default();
        let k = kernel_stats(dut, p);
        out += &format!(
            "\n  {p}: lanyard rx_frames={} tx_frames={} drops=[{}]; kernel (rx, rx_dropped, tx, tx_dropped)={k:?}",
            row["rx_frames"],
            row["tx_frames"],
            drops.join(" ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::mac;

    #[test]
    fn split_sums() {
        assert_eq!(split(1_000_000, 3), vec![333_334, 333_333, 333_333]);
        assert_eq!(split(90_000, 3), vec![30_000; 3]);
    }

    #[test]
    fn exactly_once() {
        let mut got = HashMap::new();
        got.insert(mac(1), 1);
        got.insert(mac(2), 1);
        assert!(check_exactly_once("x", &got, [mac(1), mac(2)]).is_ok());
        got.insert(mac(2), 2);
        got.insert(mac(9), 1);
        let e = check_exactly_once("x", &got, [mac(1), mac(2), mac(3)]).unwrap_err();
        assert!(
            e.contains("1 missing") && e.contains("1 duplicated") && e.contains("1 unexpected"),
            "{e}"
        );
    }
}
