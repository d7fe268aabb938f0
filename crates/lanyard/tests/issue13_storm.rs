//! Issue 13, item 11: storm control and loop detection on real frames.
//!
//! A loop: two Lanyard ports (`lpa`, `lpb`) joined by a veth pair in the
//! switch's own namespace, beside two tester ports (`sw1`, `sw2`), all in
//! VLAN 10. Without brakes a burst of 1,048 broadcasts circulates for
//! ever (the issue saw 361,000 frames in 4 s). With storm control on the
//! looped ports the loop stays at the configured rate and the storm is
//! logged and shown; with loop detection one port of the loop is
//! err-disabled (the loop is broken) and the event is logged and shown.
//! Storm control's `shutdown` action err-disables a port and brings it
//! back after its recovery time.

use std::time::{Duration, Instant};

use testkit::frame::{test_frame, BROADCAST};
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

const BURST: usize = 1048;

fn bed(prefix: &str) -> TestBed {
    let bed = TestBed::new(prefix, 2, 1500).expect("namespaces");
    testkit::netns::veth(&bed.dut, "lpa", &bed.dut, "lpb", 1500).expect("loop veth pair");
    bed
}

fn start(bed: &TestBed, extra_ports: &str, top: &str) -> Switch {
    let y = format!(
        "switch:\n  name: i13-storm\n{top}vlans:\n  - id: 10\nports:\n  - {{name: sw1, vlan: 10}}\n  - {{name: sw2, vlan: 10}}\n{extra_ports}"
    );
    Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &y,
        &["sw1", "sw2", "lpa", "lpb"],
    )
    .expect("start lanyard")
}

fn broadcasts(port: &RawPort, n: usize, phase: u32) {
    port.send_paced(n, 20_000, |i, b| {
        let f = test_frame(
            &BROADCAST,
            &[0x02, 0x13, 0, 0, 0, 1],
            &[],
            phase,
            i as u64,
            64,
        );
        b.clear();
        b.extend_from_slice(&f);
    })
    .expect("send");
}

/// Test frames of `phase` arriving on `port` within `window`.
fn count(port: &RawPort, phase: u32, window: Duration) -> u64 {
    let end = Instant::now() + window;
    let mut n = 0;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match port.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(Some(f)) => {
                if testkit::frame::test_info(&f).is_some_and(|t| t.phase == phase) {
                    n += 1;
                }
            }
            Ok(None) => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    n
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("timed out waiting for {what}");
    false
}

fn row<'a>(v: &'a serde_json::Value, port: &str) -> &'a serde_json::Value {
    v.as_array()
        .and_then(|a| a.iter().find(|r| r["port"] == port))
        .unwrap_or_else(|| panic!("no {port} in {v}"))
}

/// Storm control on the looped ports: the loop carries at most the
/// configured broadcast rate, the storm is logged and counted.
#[test]
fn issue13_storm_control_bounds_a_loop() {
    require_root!();
    let _heavy = l2::heavy();
    let bed = bed("i13sc");
    let sw = start(
        &bed,
        "  - {name: lpa, vlan: 10, storm-control: {broadcast: 1000pps}}\n  - {name: lpb, vlan: 10, storm-control: {broadcast: 1000pps}}\n",
        "",
    );
    let t1 = bed.open(1).unwrap();
    let t2 = bed.open(2).unwrap();
    t2.drain();
    broadcasts(&t1, BURST, 7);
    let got = count(&t2, 7, Duration::from_secs(4));
    // Each looped port lets through 1,000 broadcasts/s (plus a 100-frame
    // burst): t2 sees the original burst and at most what the two looped
    // ports pass in 4 s and the ~50 ms of sending, with margin.
    let bound = BURST as u64 + 2 * (4_500 + 100);
    let st = sw.show_json(&["show", "storm-control"]);
    let drops = |p: &str| row(&st, p)["broadcast"]["drops"].as_u64().unwrap_or(0);
    eprintln!(
        "looped with storm control: t2 received {got} in 4 s (bound {bound}); drops lpa {} lpb {}",
        drops("lpa"),
        drops("lpb")
    );
    let mut failures = Vec::new();
    if got > bound || got < BURST as u64 {
        failures.push(format!("t2 received {got} frames, want {BURST}..={bound}"));
    }
    if drops("lpa") + drops("lpb") == 0 {
        failures.push(format!("no storm-control drops shown: {st}"));
    }
    let c = sw.counters();
    let dropped = testkit::switch::port_counter(&c, "lpa", "drops.storm-control")
        + testkit::switch::port_counter(&c, "lpb", "drops.storm-control");
    if dropped == 0 {
        failures.push("show counters: no storm-control drops".into());
    }
    if !sw.log().contains("storm-control: broadcast storm on lp") {
        failures.push(format!("no storm logged; log:\n{}", sw.log()));
    }
    let text = sw.cli(&["show", "storm-control"]).expect("cli").stdout;
    let text = String::from_utf8_lossy(&text);
    if !text.contains("lpa") || !text.contains("1000pps") {
        failures.push(format!("show storm-control:\n{text}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Loop detection: the switch's probes come back, the higher-numbered
/// port of the loop is err-disabled, broadcasts no longer circulate;
/// `clear errdisable` brings it back and the loop is found again.
#[test]
fn issue13_loop_detect_breaks_a_loop() {
    require_root!();
    let _heavy = l2::heavy();
    let bed = bed("i13ld");
    let sw = start(
        &bed,
        "  - {name: lpa, vlan: 10}\n  - {name: lpb, vlan: 10}\n",
        "loop-detect: {interval: 1, action: shutdown, recovery: 0}\n",
    );
    let t1 = bed.open(1).unwrap();
    let t2 = bed.open(2).unwrap();
    let errdisabled = |p: &str| {
        let v = sw.show_json(&["show", "loop-detect"]);
        !row(&v["ports"], p)["errdisabled"].is_null()
    };
    let mut failures = Vec::new();
    let t0 = Instant::now();
    if !wait_for("lpb err-disabled", Duration::from_secs(5), || {
        errdisabled("lpb")
    }) {
        failures.push(format!(
            "lpb not err-disabled: {}",
            sw.show_json(&["show", "loop-detect"])
        ));
    }
    eprintln!("loop found and broken in {:?}", t0.elapsed());
    if errdisabled("lpa") {
        failures.push("lpa err-disabled too: one port breaks the loop".into());
    }
    // Both ends of the veth are down now: lpb administratively, lpa for
    // lack of carrier.
    wait_for("lpa down", Duration::from_secs(3), || {
        sw.port_state("lpa").as_deref() == Some("down")
    });
    t2.drain();
    broadcasts(&t1, BURST, 8);
    let got = count(&t2, 8, Duration::from_secs(2));
    if got != BURST as u64 {
        failures.push(format!(
            "after the loop was broken t2 received {got} of {BURST} broadcasts"
        ));
    }
    let log = sw.log();
    // Each port's probe comes back on the other; whichever is seen first
    // is logged, and lpb goes down either way.
    if !log.contains("port lpb: err-disabled (loop-detect: probe sent on lp")
        || !log.contains(" in VLAN 10 came back on lp")
    {
        failures.push(format!("loop not logged; log:\n{log}"));
    }
    let text = String::from_utf8_lossy(&sw.cli(&["show", "loop-detect"]).expect("cli").stdout)
        .into_owned();
    if !text.contains("err-disabled (loop-detect") {
        failures.push(format!("show loop-detect:\n{text}"));
    }
    // Manual recovery: the loop is still there, so it is found again.
    let out = sw.cli(&["clear", "errdisable", "lpb"]).expect("cli").stdout;
    let out = String::from_utf8_lossy(&out);
    if !out.contains("Err-disable cleared on lpb") {
        failures.push(format!("clear errdisable lpb said: {out}"));
    }
    let times = || {
        let v = sw.show_json(&["show", "loop-detect"]);
        row(&v["ports"], "lpb")["errdisables"].as_u64().unwrap_or(0)
    };
    if !wait_for("lpb err-disabled again", Duration::from_secs(8), || {
        times() == 2 && errdisabled("lpb")
    }) {
        failures.push(format!(
            "the loop was not found again after clear errdisable: {}",
            sw.show_json(&["show", "loop-detect"])
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Storm control with `action: shutdown` err-disables the port on the
/// first excess (its link partner loses carrier) and brings it back after
/// `recovery` seconds.
#[test]
fn issue13_storm_control_shutdown_and_recovery() {
    require_root!();
    let _heavy = l2::heavy();
    let bed = TestBed::new("i13ss", 2, 1500).expect("namespaces");
    let y = "switch:\n  name: i13-shut\nvlans:\n  - id: 10\nports:\n  - {name: sw1, vlan: 10, storm-control: {broadcast: 500pps, action: shutdown, recovery: 3}}\n  - {name: sw2, vlan: 10}\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        y,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let t1 = bed.open(1).unwrap();
    let t2 = bed.open(2).unwrap();
    let mut failures = Vec::new();
    t2.drain();
    broadcasts(&t1, 2_000, 9);
    let got = count(&t2, 9, Duration::from_millis(1500));
    let st = sw.show_json(&["show", "storm-control"]);
    let r = row(&st, "sw1");
    if r["errdisabled"].is_null() {
        failures.push(format!("sw1 not err-disabled: {st}"));
    }
    // The 50-frame burst passes, then the first excess shuts the port.
    if got > 200 {
        failures.push(format!(
            "t2 received {got} broadcasts before the shutdown took hold"
        ));
    }
    let t1_up = || {
        bed.tester
            .exec(&["ip", "-o", "link", "show", "t1"])
            .map(|o| !String::from_utf8_lossy(&o.stdout).contains("NO-CARRIER"))
            .unwrap_or(false)
    };
    if t1_up() {
        failures.push("t1 still has carrier while sw1 is err-disabled".into());
    }
    if !sw
        .log()
        .contains("port sw1: err-disabled (storm-control: broadcast over 500pps); recovery in 3 s")
    {
        failures.push(format!("err-disable not logged; log:\n{}", sw.log()));
    }
    if !wait_for("sw1 recovered", Duration::from_secs(8), || {
        row(&sw.show_json(&["show", "storm-control"]), "sw1")["errdisabled"].is_null()
            && sw.port_state("sw1").as_deref() == Some("up")
    }) {
        failures.push("sw1 did not recover".into());
    }
    t2.drain();
    broadcasts(&t1, 20, 10);
    let got = count(&t2, 10, Duration::from_millis(800));
    if got != 20 {
        failures.push(format!("after recovery t2 received {got} of 20"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
