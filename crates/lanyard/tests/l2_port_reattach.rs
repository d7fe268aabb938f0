//! Acceptance (issue 2): a port that disappears or goes down is reported
//! (`missing` / `down`) and re-attached when it returns, without restarting
//! the switch.

use std::time::{Duration, Instant};

use testkit::frame::{mac, test_frame, BROADCAST};
use testkit::l2;
use testkit::netns::{ip, veth};
use testkit::switch::port_counter;
use testkit::{require_root, RawPort, Switch, TestBed};

const Q: Duration = Duration::from_millis(300);

/// Sends 10 broadcasts from `from` and returns how many reached `to`.
fn forwarded(from: &RawPort, to: &RawPort, phase: u32) -> usize {
    to.drain();
    let frames: Vec<Vec<u8>> = (0..10)
        .map(|i| test_frame(&BROADCAST, &mac(1), &[], phase, i, 64))
        .collect();
    from.send_batch(&frames).expect("send");
    to.recv_test_frames(Q).expect("recv").len()
}

/// Polls `forwarded` until all 10 arrive (the port may need a moment after
/// being reported up); returns the last count.
fn forwarded_eventually(from: &RawPort, to: &RawPort, phase: u32, timeout: Duration) -> usize {
    let t = Instant::now();
    loop {
        let n = forwarded(from, to, phase);
        if n == 10 || t.elapsed() >= timeout {
            return n;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn sw2_counters(sw: &Switch) -> String {
    let c = sw.counters();
    c["ports"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "sw2"))
        .map(|p| p.to_string())
        .unwrap_or_else(|| c.to_string())
}

#[test]
fn port_delete_recreate_and_link_down_up() {
    require_root!();
    let t0 = Instant::now();
    let bed = TestBed::new("rea", 2, 9500).expect("create namespaces and veths");
    let yaml = "switch:\n  name: l2-reattach\nvlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let t1 = bed.open(1).expect("open t1");
    let mut t2 = bed.open(2).expect("open t2");
    let mut f = Vec::new();

    let n = forwarded(&t1, &t2, 1);
    if n != 10 {
        f.push(format!("baseline: {n} of 10 broadcasts forwarded t1 → t2"));
    }

    // Delete sw2 (and its peer t2) while the switch runs.
    ip(&["-n", bed.dut.name(), "link", "del", "dev", "sw2"]).expect("ip link del sw2");
    let st = sw.wait_port_state("sw2", "missing", Duration::from_secs(10));
    if st.as_deref() != Some("missing") {
        f.push(format!(
            "after `ip link del sw2`: state {st:?}, expected missing"
        ));
    }
    if sw.port_state("sw1").as_deref() != Some("up") {
        f.push(format!(
            "sw1 state {:?} while sw2 is missing, expected up",
            sw.port_state("sw1")
        ));
    }

    // Re-create it with the same name.
    veth(&bed.tester, "t2", &bed.dut, "sw2", 9500).expect("re-create veth t2/sw2");
    let st = sw.wait_port_state("sw2", "up", Duration::from_secs(20));
    if st.as_deref() != Some("up") {
        f.push(format!("after re-creating sw2: state {st:?}, expected up"));
    }
    t2 = bed.open(2).expect("re-open t2");
    let n = forwarded_eventually(&t1, &t2, 2, Duration::from_secs(5));
    if n != 10 {
        f.push(format!(
            "after re-attach: {n} of 10 broadcasts forwarded t1 → t2"
        ));
    }
    let n = forwarded_eventually(&t2, &t1, 3, Duration::from_secs(5));
    if n != 10 {
        f.push(format!(
            "after re-attach: {n} of 10 broadcasts forwarded t2 → t1"
        ));
    }

    // Administrative down / up.
    ip(&["-n", bed.dut.name(), "link", "set", "dev", "sw2", "down"]).expect("ip link set down");
    let st = sw.wait_port_state("sw2", "down", Duration::from_secs(10));
    if st.as_deref() != Some("down") {
        f.push(format!(
            "after `ip link set sw2 down`: state {st:?}, expected down"
        ));
    }
    let tx_before = port_counter(&sw.counters(), "sw2", "tx_frames");
    let n = forwarded(&t1, &t2, 4);
    if n != 0 {
        f.push(format!(
            "while sw2 is down: {n} frames reached t2, expected 0"
        ));
    }
    let tx_after = port_counter(&sw.counters(), "sw2", "tx_frames");
    if tx_after != tx_before {
        f.push(format!(
            "while sw2 is down: its tx_frames grew by {} for 10 broadcasts (a down port \
             transmits nothing; expected 0, the frames dropped as port-down or not flooded there)",
            tx_after - tx_before
        ));
    }
    ip(&["-n", bed.dut.name(), "link", "set", "dev", "sw2", "up"]).expect("ip link set up");
    let st = sw.wait_port_state("sw2", "up", Duration::from_secs(20));
    if st.as_deref() != Some("up") {
        f.push(format!(
            "after `ip link set sw2 up`: state {st:?}, expected up"
        ));
    }
    let n = forwarded_eventually(&t1, &t2, 5, Duration::from_secs(5));
    if n != 10 {
        // Cross-check with a freshly opened tester socket, so a stale
        // tester socket cannot be mistaken for a switch fault.
        let fresh = bed.open(2).expect("re-open t2");
        let n2 = forwarded(&t1, &fresh, 7);
        let kstats = ip(&["-n", bed.dut.name(), "-s", "link", "show", "dev", "sw2"])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        eprintln!("kernel view of sw2 after link up:\n{kstats}");
        f.push(format!(
            "after link up: {n} of 10 broadcasts forwarded t1 → t2 ({n2} of 10 with a freshly opened \
             tester socket on t2; sw2 counters: {})",
            sw2_counters(&sw)
        ));
    }
    let n = forwarded_eventually(&t2, &t1, 6, Duration::from_secs(5));
    if n != 10 {
        f.push(format!(
            "after link up: {n} of 10 broadcasts forwarded t2 → t1 (sw2 counters: {})",
            sw2_counters(&sw)
        ));
    }
    eprintln!("reattach test: {:?}", t0.elapsed());
    assert!(f.is_empty(), "{} failure(s):\n{}", f.len(), f.join("\n"));
}
