//! Acceptance (issue 2): learning disabled on the VLAN.
//!
//! VLAN 10 has `learning: false`. The same traffic as the capacity test
//! (90,000 source addresses on ports 1-3, then one frame to each, sent from
//! the next group's port) must be flooded: every port of the VLAN receives
//! exactly the frames it did not send itself, and nothing is learned.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use testkit::frame::{mac, write_test_frame, Mac, BROADCAST};
use testkit::l2::{self, check_exactly_once, split, QUIET};
use testkit::{require_root, Switch, TestBed};

const PHASE_LEARN: u32 = 1;
const PHASE_TEST: u32 = 2;
const TOTAL: u32 = 90_000;

#[test]
fn learning_disabled_floods_everything() {
    require_root!();
    let _heavy = l2::heavy();
    let t0 = Instant::now();
    let rate = l2::rate();
    let bed = TestBed::new("lnd", 4, 9500).expect("create namespaces and veths");
    let mut yaml = String::from(
        "switch:\n  name: l2-learning-disabled\nvlans:\n  - id: 10\n    learning: false\nports:\n",
    );
    for i in 1..=4 {
        yaml += &format!("  - name: sw{i}\n    mode: access\n    vlan: 10\n");
    }
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &["sw1", "sw2", "sw3", "sw4"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("open tester sockets");
    let caps: Vec<_> = ports
        .iter()
        .map(|p| p.start_capture(0, |_, _| true).expect("start capture"))
        .collect();
    let sizes = split(TOTAL, 3);
    let base = [0, sizes[0], sizes[0] + sizes[1]];

    for g in 0..3 {
        ports[g]
            .send_paced(sizes[g] as usize, rate, |i, b| {
                write_test_frame(
                    b,
                    &BROADCAST,
                    &mac(base[g] + i as u32),
                    &[],
                    PHASE_LEARN,
                    i as u64,
                    64,
                )
            })
            .expect("send learning frames");
    }
    // Sender p sends to group (p+2)%3; every other port gets each frame.
    let sent_by: Vec<u32> = (0..4)
        .map(|p| if p < 3 { sizes[(p + 2) % 3] } else { 0 })
        .collect();
    let dsts_of = |p: usize| -> Vec<Mac> {
        if p >= 3 {
            return Vec::new();
        }
        let tg = (p + 2) % 3;
        (base[tg]..base[tg] + sizes[tg]).map(mac).collect()
    };
    for p in 0..3 {
        let tg = (p + 2) % 3;
        let src = mac(base[p]);
        ports[p]
            .send_paced(sizes[tg] as usize, rate, |i, b| {
                write_test_frame(
                    b,
                    &mac(base[tg] + i as u32),
                    &src,
                    &[],
                    PHASE_TEST,
                    i as u64,
                    64,
                )
            })
            .expect("send test frames");
    }
    for (p, c) in caps.iter().enumerate() {
        let learn = u64::from(TOTAL) - sizes.get(p).map_or(0, |&s| u64::from(s));
        let test = u64::from(TOTAL - sent_by[p]);
        c.wait_for(learn + test, Duration::from_secs(30), QUIET);
    }
    let results: Vec<_> = caps
        .into_iter()
        .map(|c| c.stop().expect("capture"))
        .collect();

    let mut failures = Vec::new();
    let learned = sw.mac_count(None);
    if learned != 0 {
        failures.push(format!(
            "`show mac address-table count` total {learned}, expected 0"
        ));
    }
    for (p, r) in results.iter().enumerate() {
        let want = u64::from(TOTAL) - sizes.get(p).map_or(0, |&s| u64::from(s));
        let got = r.phase_count(PHASE_LEARN);
        if got != want {
            failures.push(format!(
                "t{}: learning-phase broadcasts {got}, expected {want}",
                p + 1
            ));
        }
        let expected: Vec<Mac> = (0..3).filter(|&q| q != p).flat_map(dsts_of).collect();
        let got: HashMap<Mac, u32> = r.dsts(PHASE_TEST);
        if let Err(e) = check_exactly_once(&format!("t{} flooded unicast", p + 1), &got, expected) {
            failures.push(e);
        }
    }
    eprintln!("learning disabled, {TOTAL} addresses: {:?}", t0.elapsed());
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}\nper port:{}",
        failures.len(),
        failures.join("\n"),
        l2::diagnostics(&sw, &bed.dut, &["sw1", "sw2", "sw3", "sw4"])
    );
}
