//! Acceptance (issue 21, item 1): a chassis-size switch.
//!
//! 410 access ports (`LANYARD_CHASSIS_PORTS`, default 410) in groups of 48
//! (`LANYARD_CHASSIS_GROUP`), one VLAN per group, as the chassis report's
//! full mesh. The veth pairs are made with one `ip -batch` per namespace;
//! the test reports how long that and the switch's attach of every port
//! take. Then, with real frames:
//! 1. every port sends one broadcast from its own address: each port
//!    receives exactly one from every other port of its group and nothing
//!    from other groups, and the switch learns every address;
//! 2. every port sends one frame to every other port of its group (learned
//!    unicast, the full mesh): each port receives exactly one frame from
//!    each group peer, all addressed to it, nothing else;
//!    Both phases start after most rings were parked while idle (checked),
//!    so each frame must wake its parked ring.
//! 3. `show interfaces` at that size: the summary line, a range
//!    (`sw1-48`), the VLAN and state filters, and a port taken down shown
//!    in the summary's "Ports down" line.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::frame::{mac, test_frame, test_info, BROADCAST};
use testkit::netns::Netns;
use testkit::rawport::RawPort;
use testkit::{l2, require_root, Switch};

const PHASE_FLOOD: u32 = 1;
const PHASE_MESH: u32 = 2;

fn env_usize(k: &str, default: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rows(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn names(v: &Value) -> Vec<String> {
    rows(v)
        .iter()
        .map(|r| r["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn text(sw: &Switch, args: &[&str]) -> String {
    let out = sw.cli(args).expect("run CLI");
    assert!(
        out.status.success(),
        "`lanyard {}`: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every test frame of `phase` queued on `p`, as (source index, dest MAC,
/// seq); waits `first` for the first frame, then until `quiet` passes
/// without one.
fn collect(p: &RawPort, phase: u32, first: Duration, quiet: Duration) -> Vec<(u32, [u8; 6], u64)> {
    let mut out = Vec::new();
    let mut wait = first;
    while let Some(f) = p.recv_timeout(wait).expect("receive") {
        wait = quiet;
        if let Some(t) = test_info(&f).filter(|t| t.phase == phase) {
            let src = u32::from_be_bytes([t.src[2], t.src[3], t.src[4], t.src[5]]);
            out.push((src, t.dst, t.seq));
        }
    }
    out
}

#[test]
fn chassis_410_ports_full_mesh_in_groups() {
    require_root!();
    let _heavy = l2::heavy();
    let n = env_usize("LANYARD_CHASSIS_PORTS", 410).clamp(2, 1024);
    let group = env_usize("LANYARD_CHASSIS_GROUP", 48).clamp(2, n);
    let groups = n.div_ceil(group);
    let group_of = |i: usize| i / group;
    let members = |g: usize| (g * group)..((g + 1) * group).min(n);
    // A group of one port would have no peer: fold it into the previous.
    assert!(members(groups - 1).len() >= 2, "last group has one port");
    let vlan_of = |g: usize| 100 + g as u16;
    // mac(i) ends in i's 32 bits: the source index is read back from it.
    let addr = |i: usize| mac(i as u32 + 1);

    // Namespaces and veth pairs, in batch.
    let t0 = Instant::now();
    let tester = Netns::new("chp-t").expect("tester namespace");
    let dut = Netns::new("chp-d").expect("dut namespace");
    testkit::netns::veth_batch(&tester, "t", &dut, "sw", n, 1500).expect("veth pairs");
    let veth_time = t0.elapsed();

    let mut y = String::from(
        "switch:\n  name: chassis\n  workers: 2\n  mac-aging: 600\n  mac-table-size: 65536\nvlans:\n",
    );
    for g in 0..groups {
        y += &format!("  - id: {}\n    name: mesh{g}\n", vlan_of(g));
    }
    y += "ports:\n";
    for i in 0..n {
        y += &format!(
            "  - name: sw{}\n    mode: access\n    vlan: {}\n",
            i + 1,
            vlan_of(group_of(i))
        );
    }
    let t_attach = Instant::now();
    // Ports are checked below (Switch::start's own wait is for small
    // switches): here it returns once the switch logs `ready`.
    let mut sw = Switch::start(&l2::bin(env!("CARGO_BIN_EXE_lanyard")), &dut, &y, &[])
        .expect("start lanyard");
    let mut up = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let v = sw.show_json(&["show", "interfaces", "up"]);
        up = rows(&v).len();
        if up == n {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let attach_time = t_attach.elapsed();
    assert_eq!(up, n, "ports up after {attach_time:?}");
    // Idle rings are parked on their descriptors (datapath `rx_idle`), so
    // the phases below receive on parked rings: each must wake its ring.
    let parked = |sw: &Switch| sw.show_json(&["show", "counters"])["rx_rings_parked"].as_u64();
    let deadline = Instant::now() + Duration::from_secs(20);
    while parked(&sw).unwrap_or(0) < n as u64 / 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let parked_before = parked(&sw).unwrap_or(0);
    assert!(
        parked_before >= n as u64 / 2,
        "idle rings parked: {parked_before} of {n}"
    );
    let all = sw.show_json(&["show", "interfaces"]);
    let mut backends: BTreeMap<String, usize> = BTreeMap::new();
    for r in rows(&all) {
        *backends
            .entry(r["backend"].as_str().unwrap_or("-").to_string())
            .or_default() += 1;
    }
    eprintln!(
        "{n} veth pairs in {veth_time:?}; switch started and {n} ports attached and up in \
         {attach_time:?} ({backends:?}; 2 cores, shared machine)"
    );

    let ports: Vec<RawPort> = (1..=n)
        .map(|i| RawPort::open(tester.name(), &format!("t{i}")).expect("tester socket"))
        .collect();
    for p in &ports {
        p.drain();
    }

    // 1. Flooding: one broadcast from every port, group by group.
    let t_flood = Instant::now();
    for (i, p) in ports.iter().enumerate() {
        p.send(&test_frame(
            &BROADCAST,
            &addr(i),
            &[],
            PHASE_FLOOD,
            i as u64,
            64,
        ))
        .expect("send broadcast");
        if i % group == group - 1 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let learned = sw.wait_mac_count(None, n as u64, Duration::from_secs(30));
    let mut failures = Vec::new();
    for (j, p) in ports.iter().enumerate() {
        let got = collect(
            p,
            PHASE_FLOOD,
            Duration::from_millis(500),
            Duration::from_millis(10),
        );
        let mut from: Vec<u32> = got.iter().map(|(s, _, _)| s - 1).collect();
        from.sort_unstable();
        let want: Vec<u32> = members(group_of(j))
            .filter(|k| *k != j)
            .map(|k| k as u32)
            .collect();
        if from != want || got.iter().any(|(_, d, _)| *d != BROADCAST) {
            failures.push(format!(
                "t{}: broadcasts from {:?}, expected from {:?}",
                j + 1,
                from,
                want
            ));
        }
    }
    eprintln!("flood phase checked in {:?}", t_flood.elapsed());
    assert_eq!(learned, n as u64, "addresses learned");
    assert!(failures.is_empty(), "flooding:\n{}", failures.join("\n"));

    // 2. Full mesh of learned unicast in every group.
    let t_mesh = Instant::now();
    let mut sent = 0u64;
    for (i, p) in ports.iter().enumerate() {
        let frames: Vec<Vec<u8>> = members(group_of(i))
            .filter(|k| *k != i)
            .map(|k| test_frame(&addr(k), &addr(i), &[], PHASE_MESH, i as u64, 64))
            .collect();
        sent += frames.len() as u64;
        p.send_batch(&frames).expect("send mesh");
        if i % 8 == 7 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let send_time = t_mesh.elapsed();
    let mut received = 0u64;
    for (j, p) in ports.iter().enumerate() {
        let got = collect(
            p,
            PHASE_MESH,
            Duration::from_millis(500),
            Duration::from_millis(10),
        );
        received += got.len() as u64;
        let mut from: Vec<u32> = got.iter().map(|(_, _, seq)| *seq as u32).collect();
        from.sort_unstable();
        let want: Vec<u32> = members(group_of(j))
            .filter(|k| *k != j)
            .map(|k| k as u32)
            .collect();
        let misaddressed = got.iter().filter(|(_, d, _)| *d != addr(j)).count();
        if from != want || misaddressed > 0 {
            failures.push(format!(
                "t{}: {} frames ({} not addressed to it) from {:?}, expected one from each of {:?}",
                j + 1,
                got.len(),
                misaddressed,
                from,
                want
            ));
        }
    }
    eprintln!(
        "full mesh: {sent} frames sent in {send_time:?}, {received} received, checked in {:?}",
        t_mesh.elapsed()
    );
    assert!(
        failures.is_empty(),
        "full mesh ({} ports wrong):\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Every unicast was switched, not flooded: no port saw a flood.
    let c = sw.counters();
    let flooded: u64 = rows(&c["ports"])
        .iter()
        .map(|p| p["rx_flooded"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(flooded, n as u64, "frames flooded: only the broadcasts");

    // 3. show interfaces at this size.
    let summary = text(&sw, &["show", "interfaces", "summary"]);
    assert!(
        summary.starts_with(&format!("{n} ports: {n} up, 0 down")),
        "{summary}"
    );
    assert!(summary.contains(&format!("{}", vlan_of(0))), "{summary}");
    let first = sw.show_json(&["show", "interfaces", &format!("sw1-{group}")]);
    assert_eq!(
        names(&first),
        (1..=group).map(|i| format!("sw{i}")).collect::<Vec<_>>()
    );
    let pick = sw.show_json(&["show", "interfaces", "sw3,sw10-sw12,sw400"]);
    let mut want_pick = vec!["sw3", "sw10", "sw11", "sw12"];
    if n >= 400 {
        want_pick.push("sw400");
    }
    assert_eq!(names(&pick), want_pick);
    let in_vlan = sw.show_json(&["show", "interfaces", "vlan", &vlan_of(1).to_string()]);
    assert_eq!(rows(&in_vlan).len(), members(1).len());
    assert!(sw
        .try_show_json(&["show", "interfaces", "nosuch1-4"])
        .is_err_and(|e| e.contains("no port")));
    assert!(rows(&sw.show_json(&["show", "interfaces", "down"])).is_empty());
    tester
        .exec(&["ip", "link", "set", "t7", "down"])
        .expect("t7 down");
    tester
        .exec(&["ip", "link", "set", "t8", "down"])
        .expect("t8 down");
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut down = Vec::new();
    while Instant::now() < deadline {
        down = names(&sw.show_json(&["show", "interfaces", "down"]));
        if down.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(down, ["sw7", "sw8"]);
    let summary = text(&sw, &["show", "interfaces", "summary"]);
    assert!(
        summary.starts_with(&format!("{n} ports: {} up, 2 down", n - 2))
            && summary.contains("Ports down: sw7-8"),
        "{summary}"
    );
    eprintln!("{summary}");

    // A switch of this size stops promptly: its AF_XDP sockets close
    // together (each close waits for an RCU grace period; 410 in a row
    // took 11 s), within `Switch::stop`'s 5 s before it kills.
    let t_stop = Instant::now();
    let st = sw.stop().expect("stop lanyard");
    eprintln!("stopped in {:?}", t_stop.elapsed());
    assert!(
        st.success(),
        "lanyard did not exit by itself on SIGTERM: {st}"
    );
}
