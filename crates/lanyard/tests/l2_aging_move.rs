//! Acceptance (issue 2): aging removes idle entries, static entries never
//! age, a MAC move updates the port, `clear mac address-table` empties the
//! dynamic entries.

use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::frame::{mac, mac_str, test_frame, Mac, BROADCAST};
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

const LEN: usize = 64;
const Q: Duration = Duration::from_millis(300);
const STATIC: Mac = [0x02, 0x00, 0x00, 0x00, 0x00, 0x99];

fn yaml(aging: u32) -> String {
    let mut y =
        format!("switch:\n  name: l2-aging\n  mac-aging: {aging}\nvlans:\n  - id: 10\nports:\n");
    for i in 1..=3 {
        y += &format!("  - name: sw{i}\n    mode: access\n    vlan: 10\n");
    }
    y += &format!(
        "static-macs:\n  - mac: \"{}\"\n    vlan: 10\n    port: sw3\n",
        mac_str(&STATIC)
    );
    y
}

fn start(prefix: &str, aging: u32) -> (TestBed, Switch, Vec<RawPort>) {
    let bed = TestBed::new(prefix, 3, 9500).expect("create namespaces and veths");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml(aging),
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("open tester sockets");
    (bed, sw, ports)
}

/// The table row for `m` in VLAN 10, if any.
fn entry(sw: &Switch, m: &Mac) -> Option<Value> {
    let s = mac_str(m);
    sw.mac_table(Some(10))
        .into_iter()
        .find(|r| r["mac"].as_str() == Some(s.as_str()))
}

fn wait_entry(sw: &Switch, m: &Mac, present: bool, timeout: Duration) -> (Option<Value>, Duration) {
    let t = Instant::now();
    loop {
        let e = entry(sw, m);
        if e.is_some() == present || t.elapsed() >= timeout {
            return (e, t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn counts(ports: &[RawPort]) -> Vec<usize> {
    ports
        .iter()
        .map(|p| p.recv_test_frames(Q).expect("recv").len())
        .collect()
}

#[test]
fn aging_removes_idle_entries_and_keeps_static() {
    require_root!();
    let t0 = Instant::now();
    let (_bed, sw, ports) = start("age", 2);
    let a = mac(1);
    let mut f = Vec::new();

    let st = entry(&sw, &STATIC);
    match &st {
        Some(r) if r["type"] == "static" && r["port"] == "sw3" => {}
        other => f.push(format!(
            "static entry at start: {other:?}, expected type static on sw3"
        )),
    }
    ports[0]
        .send(&test_frame(&BROADCAST, &a, &[], 1, 0, LEN))
        .unwrap();
    let (e, _) = wait_entry(&sw, &a, true, Duration::from_secs(5));
    match &e {
        Some(r) if r["port"] == "sw1" && r["type"] == "dynamic" => {}
        other => f.push(format!(
            "after a frame from sw1: entry {other:?}, expected dynamic on sw1"
        )),
    }
    let learned_at = Instant::now();
    let (gone, _) = wait_entry(&sw, &a, false, Duration::from_secs(10));
    let idle = learned_at.elapsed();
    if let Some(r) = gone {
        f.push(format!(
            "entry still present after {idle:?} of silence with mac-aging 2: {r}"
        ));
    } else if idle < Duration::from_millis(1500) {
        f.push(format!("entry aged after only {idle:?} with mac-aging 2"));
    }
    eprintln!("dynamic entry aged out after {idle:?} (mac-aging 2 s)");
    // Several aging periods later the static entry is still there and used.
    std::thread::sleep(Duration::from_secs(3));
    match entry(&sw, &STATIC) {
        Some(r) if r["type"] == "static" && r["port"] == "sw3" => {}
        other => f.push(format!(
            "static entry after aging: {other:?}, expected type static on sw3"
        )),
    }
    for p in &ports {
        p.drain();
    }
    let burst: Vec<Vec<u8>> = (0..20)
        .map(|i| test_frame(&STATIC, &mac(2), &[], 2, i, LEN))
        .collect();
    l2::send_settled(&sw, &ports[0], "sw1", &burst);
    let c = counts(&ports);
    if c != vec![0, 0, 20] {
        f.push(format!(
            "20 frames to the static MAC (on sw3): received per port {c:?}, expected [0, 0, 20]"
        ));
    }
    eprintln!("aging test: {:?}", t0.elapsed());
    assert!(f.is_empty(), "{} failure(s):\n{}", f.len(), f.join("\n"));
}

#[test]
fn mac_move_updates_port() {
    require_root!();
    let (_bed, sw, ports) = start("mov", 300);
    let m = mac(1);
    let mut f = Vec::new();

    ports[0]
        .send(&test_frame(&BROADCAST, &m, &[], 1, 0, LEN))
        .unwrap();
    let (e, _) = wait_entry(&sw, &m, true, Duration::from_secs(5));
    if e.as_ref().map(|r| r["port"] != "sw1").unwrap_or(true) {
        f.push(format!("M after a frame from sw1: {e:?}, expected on sw1"));
    }
    // Frames to M go to sw1 only.
    for p in &ports {
        p.drain();
    }
    let to_m: Vec<Vec<u8>> = (0..10)
        .map(|i| test_frame(&m, &mac(3), &[], 2, i, LEN))
        .collect();
    l2::send_settled(&sw, &ports[2], "sw3", &to_m);
    let c = counts(&ports);
    if c != vec![10, 0, 0] {
        f.push(format!(
            "before the move, 10 frames to M: per port {c:?}, expected [10, 0, 0]"
        ));
    }

    // M moves to sw2.
    ports[1]
        .send(&test_frame(&BROADCAST, &m, &[], 3, 0, LEN))
        .unwrap();
    let t = Instant::now();
    let mut last = None;
    while t.elapsed() < Duration::from_secs(5) {
        last = entry(&sw, &m);
        if last.as_ref().map(|r| r["port"] == "sw2").unwrap_or(false) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if last.as_ref().map(|r| r["port"] != "sw2").unwrap_or(true) {
        f.push(format!(
            "M after a frame from sw2: {last:?}, expected on sw2"
        ));
    }
    for p in &ports {
        p.drain();
    }
    let to_m: Vec<Vec<u8>> = (0..10)
        .map(|i| test_frame(&m, &mac(3), &[], 4, i, LEN))
        .collect();
    l2::send_settled(&sw, &ports[2], "sw3", &to_m);
    let c = counts(&ports);
    if c != vec![0, 10, 0] {
        f.push(format!(
            "after the move, 10 frames to M: per port {c:?}, expected [0, 10, 0]"
        ));
    }
    let n = sw.mac_count(Some(10));
    // M, mac(3) and the static entry.
    if n != 3 {
        f.push(format!(
            "count vlan 10 after the move: {n}, expected 3 (M once, sender, static)"
        ));
    }
    assert!(f.is_empty(), "{} failure(s):\n{}", f.len(), f.join("\n"));
}

#[test]
fn clear_mac_table_vlan_empties_dynamic_entries() {
    require_root!();
    let (_bed, sw, ports) = start("clr", 300);
    let mut f = Vec::new();
    let frames: Vec<Vec<u8>> = (0..100)
        .map(|i| test_frame(&BROADCAST, &mac(i), &[], 1, 0, LEN))
        .collect();
    l2::send_settled(&sw, &ports[0], "sw1", &frames);
    let n = sw.wait_mac_count(Some(10), 101, Duration::from_secs(5));
    if n != 101 {
        f.push(format!(
            "count vlan 10 after 100 sources: {n}, expected 101 (100 dynamic + 1 static)"
        ));
    }
    sw.run_cli(&["clear", "mac", "address-table", "vlan", "10"]);
    let v = sw.show_json(&["show", "mac", "address-table", "vlan", "10", "count"]);
    if v["dynamic"] != 0 || v["static"] != 1 || v["total"] != 1 {
        f.push(format!("count after `clear mac address-table vlan 10`: {v}, expected dynamic 0, static 1, total 1"));
    }
    let rows = sw.mac_table(Some(10));
    if rows.len() != 1 || rows[0]["type"] != "static" {
        f.push(format!(
            "table after clear: {rows:?}, expected only the static entry"
        ));
    }
    // Cleared addresses are unknown again: frames to them are flooded.
    for p in &ports {
        p.drain();
    }
    let to: Vec<Vec<u8>> = (0..10)
        .map(|i| test_frame(&mac(i), &mac(500), &[], 2, 0, LEN))
        .collect();
    l2::send_settled(&sw, &ports[1], "sw2", &to);
    let c = counts(&ports);
    if c != vec![10, 0, 10] {
        f.push(format!(
            "10 frames to cleared addresses: per port {c:?}, expected flooded [10, 0, 10]"
        ));
    }
    // And they are learned again.
    l2::send_settled(&sw, &ports[0], "sw1", &frames[..10]);
    let n = sw.wait_mac_count(Some(10), 12, Duration::from_secs(5));
    if n != 12 {
        f.push(format!(
            "count after relearning 10 (+ sender + static): {n}, expected 12"
        ));
    }
    assert!(f.is_empty(), "{} failure(s):\n{}", f.len(), f.join("\n"));
}
