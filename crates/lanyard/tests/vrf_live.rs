//! A VRF added and deleted at run time with `lanyard config apply` (issue
//! 18, docs/vrf.md "VRFs at run time"), without FRR, under traffic in
//! another VRF:
//!
//! * the switch starts with VRF CUSTA (sw1 → sw3, a static route) and two
//!   routed ports of the default VRF, sw2 (no address) and sw4;
//! * `config apply` adds VRF CUSTB: a new subinterface `sw2.100` (customer
//!   side, CUSTA's very addresses), sw4 moved from the default VRF into it,
//!   a new routed port sw5 (added at the end of `ports`) and two static
//!   routes of its own. Its namespace (Lanyard makes it) and twins appear,
//!   `show vrf` lists it, and its tagged customer frames leave sw4 to sw4's
//!   neighbour (TTL − 1, sw4's MAC), none by sw3, and sw5 to sw5's;
//! * `config apply` of the first file deletes it: `show vrf` and `show ip
//!   route vrf CUSTB` no longer know it, its namespace is gone (in
//!   Lanyard's mount namespace too: `ip netns list`), its frames go
//!   nowhere, sw4 is back in the default VRF;
//! * CUSTA's stream (a frame every 2 ms) lost no frame through both
//!   applies;
//! * added again, then the switch stopped: the namespace Lanyard made goes
//!   with it.
//!
//! Before this work `config apply` refused any `vrfs` change ("needs
//! `lanyard restart`"), and the namespaces outlived the switch.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use testkit::ip::{self, IpInfo};
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `f` with an 802.1Q tag `vid` after the MAC addresses.
fn tag(f: &[u8], vid: u16) -> Vec<u8> {
    let mut o = f[..12].to_vec();
    o.extend_from_slice(&[0x81, 0x00]);
    o.extend_from_slice(&vid.to_be_bytes());
    o.extend_from_slice(&f[12..]);
    o
}

fn collect(port: &RawPort, quiet: Duration, max: Duration) -> Vec<IpInfo> {
    port.recv_ip(quiet, max).expect("recv")
}

/// Removes what Lanyard may leave if the test fails half-way (the file
/// of a namespace it made in its own mount namespace).
struct NsCleanup(String);

impl Drop for NsCleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(format!("/run/netns/{}", self.0));
    }
}

/// The VRFs of `show vrf`: name → interfaces.
fn vrfs(sw: &Switch) -> Vec<(String, Vec<String>)> {
    let v = sw.show_json(&["show", "vrf"]);
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let ifs = r["interfaces"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            (r["name"].as_str().unwrap_or("").to_string(), ifs)
        })
        .collect()
}

/// `ip netns list` in the switch's mount namespace (where it made them).
fn netns_seen_by_switch(sw: &Switch) -> String {
    let pid = sw.pid().expect("switch runs");
    let o = std::process::Command::new("nsenter")
        .args([
            &format!("--mount=/proc/{pid}/ns/mnt"),
            "ip",
            "netns",
            "list",
        ])
        .output()
        .expect("nsenter");
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[test]
fn vrf_added_and_deleted_live_other_vrf_loses_nothing() {
    require_root!();
    let t0 = Instant::now();
    let bed = TestBed::new("vrl", 5, 1500).expect("namespaces");
    let pid = std::process::id();
    let (ns_a, ns_b) = (format!("lyvla{pid}"), format!("lyvlb{pid}"));
    let _cleanup = (NsCleanup(ns_a.clone()), NsCleanup(ns_b.clone()));
    // Lanyard runs in a mount namespace of its own: pre-made namespaces
    // (CUSTA's) are visible to it; the one it makes (CUSTB's) is a file
    // here and a namespace there.
    assert!(std::process::Command::new("ip")
        .args(["netns", "add", &ns_a])
        .status()
        .unwrap()
        .success());
    struct DelNs(String);
    impl Drop for DelNs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &self.0])
                .output();
        }
    }
    let _del_a = DelNs(ns_a.clone());
    let base = format!(
        r#"
switch:
  name: vrf-live
ports:
  - name: sw1
    mode: routed
    addresses: [10.1.0.1/24]
  - name: sw2
    mode: routed
SUBS
  - name: sw3
    mode: routed
    addresses: [10.2.0.1/24]
  - name: sw4
    mode: routed
    addresses: [10.2.0.1/24]
PORT5
vrfs:
  - name: CUSTA
    interfaces: [sw1, sw3]
    table: 1001
    namespace: {ns_a}
VRFB
routing:
  static-routes:
    - prefix: 198.51.100.0/24
      next-hop: 10.2.0.2
      vrf: CUSTA
ROUTEB
"#
    );
    let without_b = base
        .replace("PORT5\n", "")
        .replace("SUBS\n", "")
        .replace("VRFB\n", "")
        .replace("ROUTEB\n", "");
    let with_b = base
        .replace(
            "PORT5\n",
            "  - name: sw5\n    mode: routed\n    addresses: [10.5.0.1/24]\n",
        )
        .replace(
            "SUBS\n",
            "    subinterfaces:\n      - vlan: 100\n        addresses: [10.1.0.1/24]\n",
        )
        .replace(
            "VRFB\n",
            &format!(
                "  - name: CUSTB\n    interfaces: [sw2.100, sw4, sw5]\n    table: 1002\n    \
                 namespace: {ns_b}\n"
            ),
        )
        .replace(
            "ROUTEB\n",
            "    - prefix: 198.51.100.0/24\n      next-hop: 10.2.0.2\n      vrf: CUSTB\n\
             \x20   - prefix: 203.0.113.0/24\n      next-hop: 10.5.0.2\n      vrf: CUSTB\n",
        );
    let t = &bed.tester;
    for ifn in ["t3", "t4"] {
        t.exec(&["ip", "addr", "add", "10.2.0.2/24", "dev", ifn])
            .unwrap();
    }
    t.exec(&["ip", "addr", "add", "10.5.0.2/24", "dev", "t5"])
        .unwrap();
    let mut sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &without_b,
        &["sw1", "sw2", "sw3", "sw4"],
    )
    .expect("start lanyard");
    let ns_b_file = Path::new("/run/netns").join(&ns_b);
    assert!(!ns_b_file.exists());

    let r1 = sw.router_mac("sw1");
    let r3 = sw.router_mac("sw3");
    let (m1, m2) = (bed.tester_mac("t1"), bed.tester_mac("t2"));
    let (m3, m4) = (bed.tester_mac("t3"), bed.tester_mac("t4"));
    let m5 = bed.tester_mac("t5");
    let ports = bed.open_all().unwrap();
    let (p1, p2, p3, p4, p5) = (&ports[0], &ports[1], &ports[2], &ports[3], &ports[4]);

    // Glean CUSTA's uplink neighbour.
    let glean = |pin: &RawPort, f: &dyn Fn(u64) -> Vec<u8>, pout: &RawPort| -> bool {
        for k in 0..15u64 {
            pin.send(&f(900_000 + k)).unwrap();
            if collect(pout, Duration::from_millis(400), Duration::from_secs(2))
                .iter()
                .any(|p| p.seq.is_some_and(|s| s >= 900_000))
            {
                return true;
            }
        }
        false
    };
    let a_frame = |seq: u64| ip::udp(&r1, &m1, a("10.1.0.2"), a("198.51.100.7"), 64, seq, 128);
    assert!(glean(p1, &a_frame, p3), "CUSTA: nothing reached sw3");
    for p in &ports {
        p.drain();
    }

    let stop = AtomicBool::new(false);
    let sent = Mutex::new(0u64);
    let got = Mutex::new(BTreeSet::<u64>::new());
    let a_wrong = AtomicU64::new(0);
    let mut failures: Vec<String> = Vec::new();
    std::thread::scope(|s| {
        // CUSTA's stream: one frame every 2 ms until told to stop.
        s.spawn(|| {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                p1.send(&a_frame(n)).unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            *sent.lock().unwrap() = n;
        });
        s.spawn(|| {
            let mut quiet = 0;
            while quiet < 3 {
                match p3.recv_timeout(Duration::from_millis(300)) {
                    Ok(Some(f)) => {
                        quiet = 0;
                        let Some(i) = ip::parse(&f) else { continue };
                        if let Some(seq) = i.seq {
                            got.lock().unwrap().insert(seq);
                            if i.ttl != 63 || i.src_mac != r3 || i.dst_mac != m3 {
                                a_wrong.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    _ if stop.load(Ordering::Relaxed) => quiet += 1,
                    _ => {}
                }
            }
        });
        std::thread::sleep(Duration::from_millis(300));

        // Add CUSTB.
        let t_add = Instant::now();
        if let Err(e) = sw.apply_config("with_b", &with_b) {
            stop.store(true, Ordering::Relaxed);
            panic!("config apply adding CUSTB: {e}");
        }
        let add_ms = t_add.elapsed().as_millis();
        let vs = vrfs(&sw);
        let b = vs.iter().find(|v| v.0 == "CUSTB");
        let want: Vec<String> = ["sw4", "sw5", "sw2.100"].map(String::from).into();
        if b.map(|b| &b.1) != Some(&want) {
            failures.push(format!("show vrf after the add: {vs:?}"));
        }
        if vs
            .iter()
            .any(|v| v.0 == "default" && v.1.contains(&"sw4".into()))
        {
            failures.push(format!("sw4 still in the default VRF: {vs:?}"));
        }
        if !ns_b_file.exists() || !netns_seen_by_switch(&sw).contains(&ns_b) {
            failures.push(format!("CUSTB's namespace {ns_b} not made"));
        }
        let gws = sw.vrf_route_gateways("CUSTB", "198.51.100.0/24");
        if gws != vec!["10.2.0.2".to_string()] {
            failures.push(format!("CUSTB's static route: {gws:?}"));
        }
        // CUSTB forwards: tagged customer frames out of sw4.
        let r2 = sw.router_mac("sw2.100");
        let r4 = sw.router_mac("sw4");
        let b_frame = |seq: u64| {
            tag(
                &ip::udp(&r2, &m2, a("10.1.0.2"), a("198.51.100.7"), 64, seq, 128),
                100,
            )
        };
        if !glean(p2, &b_frame, p4) {
            failures.push("CUSTB: nothing reached sw4".into());
        }
        p4.drain();
        let n = 100u64;
        for k in 0..n {
            p2.send(&b_frame(500_000 + k)).unwrap();
        }
        let on4 = collect(p4, Duration::from_millis(500), Duration::from_secs(5));
        let mine: Vec<&IpInfo> = on4
            .iter()
            .filter(|p| p.seq.is_some_and(|s| (500_000..500_000 + n).contains(&s)))
            .collect();
        let bad = mine
            .iter()
            .filter(|p| p.ttl != 63 || p.dst_mac != m4 || p.src_mac != r4 || !p.header_ok)
            .count();
        if mine.len() as u64 != n || bad > 0 {
            failures.push(format!(
                "CUSTB: {} of {n} frames on sw4, {bad} wrong",
                mine.len()
            ));
        }
        // The routed port added with it: attached, and CUSTB routes to it.
        if sw
            .wait_port_state("sw5", "up", Duration::from_secs(5))
            .as_deref()
            != Some("up")
        {
            failures.push("sw5 not up after the add".into());
        }
        let r5 = sw.router_mac("sw5");
        let c_frame = |seq: u64| {
            tag(
                &ip::udp(&r2, &m2, a("10.1.0.2"), a("203.0.113.9"), 64, seq, 128),
                100,
            )
        };
        if !glean(p2, &c_frame, p5) {
            failures.push("CUSTB: nothing reached sw5".into());
        }
        p5.drain();
        for k in 0..20 {
            p2.send(&c_frame(700_000 + k)).unwrap();
        }
        let on5 = collect(p5, Duration::from_millis(500), Duration::from_secs(3));
        let ok5 = on5
            .iter()
            .filter(|p| p.seq.is_some_and(|s| (700_000..700_020).contains(&s)))
            .filter(|p| p.ttl == 63 && p.dst_mac == m5 && p.src_mac == r5)
            .count();
        if ok5 != 20 {
            failures.push(format!("CUSTB: {ok5} of 20 frames right on sw5"));
        }
        std::thread::sleep(Duration::from_millis(300));

        // Delete CUSTB.
        let t_del = Instant::now();
        if let Err(e) = sw.apply_config("without_b", &without_b) {
            failures.push(format!("config apply deleting CUSTB: {e}"));
        }
        let del_ms = t_del.elapsed().as_millis();
        let vs = vrfs(&sw);
        if vs.iter().any(|v| v.0 == "CUSTB")
            || !vs
                .iter()
                .any(|v| v.0 == "default" && v.1.contains(&"sw4".into()))
        {
            failures.push(format!("show vrf after the delete: {vs:?}"));
        }
        if sw
            .try_show_json(&["show", "ip", "route", "vrf", "CUSTB"])
            .is_ok()
        {
            failures.push("show ip route vrf CUSTB still answers".into());
        }
        if ns_b_file.exists() || netns_seen_by_switch(&sw).contains(&ns_b) {
            failures.push(format!("CUSTB's namespace {ns_b} left behind"));
        }
        p4.drain();
        for k in 0..20 {
            p2.send(&b_frame(600_000 + k)).unwrap();
        }
        let after = collect(p4, Duration::from_millis(500), Duration::from_secs(2));
        if after.iter().any(|p| p.seq.is_some_and(|s| s >= 600_000)) {
            failures.push("CUSTB's frames still forwarded after the delete".into());
        }
        eprintln!("apply: add {add_ms} ms, delete {del_ms} ms");
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
    });
    let sent = *sent.lock().unwrap();
    let got = got.into_inner().unwrap();
    let lost = (0..sent).filter(|k| !got.contains(k)).count();
    eprintln!("CUSTA: {sent} frames sent, {lost} lost");
    if got.iter().any(|s| (500_000..900_000).contains(s)) {
        failures.push("CUSTB frames on CUSTA's uplink".into());
    }
    let wrong = a_wrong.load(Ordering::Relaxed);
    if sent < 500 || lost > 0 || wrong > 0 {
        failures.push(format!(
            "CUSTA lost {lost} of {sent} frames across the two applies ({wrong} wrong)"
        ));
    }

    // Added again, then the switch stops: the namespace it made goes.
    if let Err(e) = sw.apply_config("with_b", &with_b) {
        failures.push(format!("config apply re-adding CUSTB: {e}"));
    }
    if !ns_b_file.exists() {
        failures.push("CUSTB's namespace not made again".into());
    }
    let t_stop = Instant::now();
    let st = sw.stop().expect("stop");
    eprintln!("stopped in {} ms ({st})", t_stop.elapsed().as_millis());
    if ns_b_file.exists() {
        failures.push(format!("{ns_b} left after the switch stopped"));
    }
    if !Path::new("/run/netns").join(&ns_a).exists() {
        failures.push(format!("{ns_a} (not Lanyard's) removed at stop"));
    }
    eprintln!("vrf_live: {:.1} s", t0.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "{failures:#?}");
}
