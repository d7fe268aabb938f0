//! Acceptance (issue 2): learning limits.
//!
//! Port 1 offers more source addresses than the limit allows; port 2 then
//! sends one frame to each offered address; port 3 is the monitor. Learned
//! addresses must be delivered to port 1 only, the others flooded (to ports
//! 1 and 3) and never learned: the monitor sees exactly the addresses that
//! are *not* in the table.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use testkit::frame::{mac, mac_in, parse_mac, write_test_frame, Mac, BROADCAST};
use testkit::l2::{self, check_exactly_once, QUIET};
use testkit::{require_root, Switch, TestBed};

const PHASE_LEARN: u32 = 1;
const PHASE_TEST: u32 = 2;

struct Case {
    prefix: &'static str,
    yaml: String,
    /// Addresses offered on sw1.
    offered: u32,
    /// Of which the switch must learn exactly this many.
    limit: u64,
    /// Extra addresses offered on sw2 (not limited), all to be learned.
    extra_on_sw2: u32,
}

fn ports_yaml(sw1_extra: &str) -> String {
    let mut y = format!("  - name: sw1\n    mode: access\n    vlan: 10\n{sw1_extra}");
    for i in 2..=3 {
        y += &format!("  - name: sw{i}\n    mode: access\n    vlan: 10\n");
    }
    y
}

fn run(case: Case) {
    let _heavy = l2::heavy();
    let t0 = Instant::now();
    let rate = l2::rate();
    let bed = TestBed::new(case.prefix, 3, 9500).expect("create namespaces and veths");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &case.yaml,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("open tester sockets");
    let caps: Vec<_> = ports
        .iter()
        .map(|p| p.start_capture(0, |_, _| true).expect("start capture"))
        .collect();
    let n = case.offered;
    let extra = case.extra_on_sw2;

    ports[0]
        .send_paced(n as usize, rate, |i, b| {
            write_test_frame(
                b,
                &BROADCAST,
                &mac(i as u32),
                &[],
                PHASE_LEARN,
                i as u64,
                64,
            )
        })
        .expect("send learning frames");
    // With a VLAN limit, sw2 learns nothing: the VLAN is full before its
    // test-phase source appears, which must then not be learned either.
    ports[1]
        .send_paced(extra as usize, rate, |i, b| {
            write_test_frame(
                b,
                &BROADCAST,
                &mac_in(0x4e, i as u32),
                &[],
                PHASE_LEARN,
                i as u64,
                64,
            )
        })
        .expect("send sw2 learning frames");
    let sw2_sources = u64::from(extra);
    caps[1].wait_for(u64::from(n), Duration::from_secs(30), QUIET);
    caps[2].wait_for(u64::from(n) + sw2_sources, Duration::from_secs(30), QUIET);
    let total_want = case.limit + sw2_sources;
    let learned_total = sw.wait_mac_count(None, total_want, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    let learned_total_later = sw.mac_count(None);

    let table = sw.mac_table(Some(10));
    let on_sw1: HashSet<Mac> = table
        .iter()
        .filter(|r| r["port"] == "sw1")
        .map(|r| parse_mac(r["mac"].as_str().unwrap_or("")).expect("mac in table"))
        .collect();
    let offered: HashSet<Mac> = (0..n).map(mac).collect();
    let mut failures = Vec::new();
    if learned_total != total_want || learned_total_later != total_want {
        failures.push(format!(
            "`show mac address-table count` total {learned_total} (then {learned_total_later}), expected {total_want} \
             ({} on sw1 + {sw2_sources} on sw2)",
            case.limit
        ));
    }
    if on_sw1.len() as u64 != case.limit {
        failures.push(format!(
            "table has {} addresses on sw1, expected {}",
            on_sw1.len(),
            case.limit
        ));
    }
    if !on_sw1.is_subset(&offered) {
        failures.push("table has addresses on sw1 that were never offered there".into());
    }

    // Every offered address gets one frame from sw2.
    let src = mac_in(0x4e, 0);
    ports[1]
        .send_paced(n as usize, rate, |i, b| {
            write_test_frame(b, &mac(i as u32), &src, &[], PHASE_TEST, i as u64, 64)
        })
        .expect("send test frames");
    let unlearned: Vec<Mac> = offered.difference(&on_sw1).copied().collect();
    caps[0].wait_for(
        u64::from(n) + sw2_sources + u64::from(n),
        Duration::from_secs(30),
        QUIET,
    );
    caps[2].wait_quiet(QUIET, Duration::from_secs(30));
    let results: Vec<_> = caps
        .into_iter()
        .map(|c| c.stop().expect("capture"))
        .collect();

    if let Err(e) = check_exactly_once(
        "t1 (learning port)",
        &results[0].dsts(PHASE_TEST),
        offered.iter().copied(),
    ) {
        failures.push(e);
    }
    if let Err(e) = check_exactly_once(
        "t3 (monitor, flooded)",
        &results[2].dsts(PHASE_TEST),
        unlearned.iter().copied(),
    ) {
        failures.push(e);
    }
    let after = sw.mac_count(None);
    if after != total_want {
        failures.push(format!(
            "count after test phase {after}, expected {total_want}"
        ));
    }
    eprintln!(
        "{}: offered {n}, learned on sw1 {}, monitor got {}; {:?}",
        case.prefix,
        on_sw1.len(),
        results[2].phase_count(PHASE_TEST),
        t0.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}\nper port:{}",
        failures.len(),
        failures.join("\n"),
        l2::diagnostics(&sw, &bed.dut, &["sw1", "sw2", "sw3"])
    );
}

#[test]
fn vlan_mac_limit_15000_of_30000() {
    require_root!();
    run(Case {
        prefix: "lim",
        yaml: format!(
            "switch:\n  name: l2-mac-limit\nvlans:\n  - id: 10\n    mac-limit: 15000\nports:\n{}",
            ports_yaml("")
        ),
        offered: 30_000,
        limit: 15_000,
        extra_on_sw2: 0,
    });
}

#[test]
fn port_mac_limit_1000_of_2000() {
    require_root!();
    run(Case {
        prefix: "limp",
        yaml: format!(
            "switch:\n  name: l2-port-limit\nvlans:\n  - id: 10\nports:\n{}",
            ports_yaml("    mac-limit: 1000\n")
        ),
        offered: 2_000,
        limit: 1_000,
        extra_on_sw2: 500,
    });
}
