//! `lanyard restart` with routed ports under FRR (docs/ha.md, "Hitless
//! change"): the TAP twins are handed to the new image, so the interfaces
//! FRR runs on never go away or lose carrier, and its OSPFv2 and OSPFv3
//! adjacencies stay Full through the restart. Before, a restart with a
//! routed port did not come back at all (a close-on-exec-less duplicate
//! of each twin's descriptor outlived the `exec` and held the TAP, so the
//! new image could not make it again); and with that fixed alone, the
//! twins would have been made anew, every adjacency reset.
//!
//! Two tester routers on sw1/sw2, FRR on Lanyard's twins. Needs root and
//! FRR (zebra, ospfd, ospf6d), else SKIPPED.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use testkit::frr::{link_addrs, Daemon, FrrOptions, OspfRouter, RouterBed};
use testkit::routes::RouterPrefixes;

/// External routes each tester router advertises, per family.
const ROUTES: usize = 200;
use testkit::{l2, Switch};

fn config() -> String {
    let mut y =
        String::from("switch:\n  name: restart-routing\nrouting:\n  fpm: 127.0.0.1:2631\nports:\n");
    for i in 1..=2 {
        let (v4, v6) = link_addrs(i, true);
        y.push_str(&format!(
            "  - name: sw{i}\n    mode: routed\n    addresses: [{v4}, \"{v6}\"]\n"
        ));
    }
    y
}

/// The interface index of `dev` in namespace `ns` (0 if absent).
fn ifindex(ns: &str, dev: &str) -> u32 {
    std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "cat",
            &format!("/sys/class/net/{dev}/ifindex"),
        ])
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn restart_keeps_the_twins_and_ospf_adjacencies() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ospf6d]);
    let _g = l2::heavy();
    let bed = RouterBed::new("lyrsr", 2, 1500).expect("namespaces");
    bed.address_testers().expect("tester addresses");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &config(),
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let taps = ["ly-sw1", "ly-sw2"];
    let dut = OspfRouter::dut(Ipv4Addr::new(10, 255, 255, 21), &taps)
        .with_fpm(2631)
        .start(
            bed.dut.name(),
            "lanyard-frr",
            &FrrOptions {
                zebra_args: vec!["-M".into(), "dplane_fpm_nl".into()],
                ..FrrOptions::default()
            },
        )
        .expect("Lanyard's FRR");
    let sets = RouterPrefixes::new(2, ROUTES, ROUTES, 0x5eed);
    let routers: Vec<OspfRouter> = (1..=2)
        .map(|i| {
            OspfRouter::injector(
                Ipv4Addr::new(10, 255, 21, i as u8),
                &[&format!("t{i}")],
                sets.v4[i - 1].clone(),
                sets.v6[i - 1].clone(),
            )
        })
        .collect();
    let testers = bed.start_routers(&routers, &FrrOptions::default());
    let full = || (dut.ospf_full_neighbors(), dut.ospf6_full_neighbors());
    let t0 = Instant::now();
    while full() != (2, 2) {
        if t0.elapsed() > Duration::from_secs(40) {
            dut.dump_logs();
            panic!("adjacencies not Full: {:?}", full());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let want = (2 * ROUTES as u64, 2 * ROUTES as u64);
    let fib = || (sw.fib_routes("ip", "ospf"), sw.fib_routes("ipv6", "ospf"));
    while fib() != want {
        if t0.elapsed() > Duration::from_secs(60) {
            panic!("FIB {:?} of {want:?}", fib());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let before: Vec<u32> = taps.iter().map(|t| ifindex(bed.dut.name(), t)).collect();

    let out = sw.cli(&["restart"]).expect("lanyard restart");
    assert!(
        out.status.success(),
        "restart failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        sw.log()
    );
    // The adjacencies, sampled through and after the restart: never
    // anything but Full (a twin made anew resets them all, and the dead
    // interval does not matter: a deleted interface resets them at once).
    let mut fewest = (2, 2);
    let mut fib_samples = Vec::new();
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_secs(8) {
        let f = full();
        fewest = (fewest.0.min(f.0), fewest.1.min(f.1));
        fib_samples.push((t1.elapsed().as_millis(), fib()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let short: Vec<_> = fib_samples.iter().filter(|(_, f)| *f != want).collect();
    let after: Vec<u32> = taps.iter().map(|t| ifindex(bed.dut.name(), t)).collect();
    let log = sw.log();
    eprintln!(
        "restart with OSPF on the twins: ifindex {before:?} -> {after:?}, fewest Full (v2, v3) {fewest:?}, FIB short in {} of {} samples; {}",
        short.len(),
        fib_samples.len(),
        log.lines()
            .find(|l| l.contains("TAP twins handed over"))
            .unwrap_or("(no hand-over line)")
    );
    assert!(log.contains("2 TAP twins handed over"), "{log}");
    assert!(
        log.contains("from zebra restored until it reconnects"),
        "{log}"
    );
    // zebra reconnects about 3 s after the restart and replays; until then
    // the routes restored from the image before carry the traffic.
    assert!(
        short.is_empty(),
        "the FIB lacked OSPF routes after the restart (ms, (v4, v6)): {short:?}"
    );
    assert!(log.contains("forwarding resumed"), "{log}");
    assert_eq!(before, after, "the twins were made anew");
    assert!(before.iter().all(|i| *i > 0));
    assert_eq!(fewest, (2, 2), "an adjacency left Full during the restart");
    // The interfaces still route: Lanyard answers on its addresses.
    let (v4, _) = link_addrs(1, true);
    let addr = v4.split('/').next().unwrap().to_string();
    let ping = bed.testers[0].exec(&["ping", "-c", "3", "-i", "0.2", "-W", "1", &addr]);
    assert!(
        ping.as_ref().is_ok_and(|o| o.status.success()),
        "ping {addr} after the restart: {ping:?}"
    );

    // Routes withdrawn just after a restart, while zebra has not yet
    // reconnected (its deletes reach no one): the restored copies stand in
    // until zebra's replay, then its quiet point sweeps them; the other
    // router's routes stay throughout.
    let out = sw.cli(&["restart"]).expect("second restart");
    assert!(out.status.success(), "{out:?}");
    let stop: Vec<String> = routers[0].advertise_cmds(false);
    testers[0]
        .configure(&stop.iter().map(String::as_str).collect::<Vec<_>>())
        .expect("stop advertising");
    let half = (ROUTES as u64, ROUTES as u64);
    let t2 = Instant::now();
    let mut below = Vec::new();
    let swept = loop {
        let f = fib();
        if f.0 < half.0 || f.1 < half.1 {
            below.push((t2.elapsed().as_millis(), f));
        }
        if f == half {
            break Some(t2.elapsed());
        }
        if t2.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("withdrawn across a restart: swept after {swept:?}");
    assert!(
        swept.is_some(),
        "stale routes still in the FIB: {:?}",
        fib()
    );
    assert!(
        below.is_empty(),
        "the other router's routes went missing: {below:?}"
    );
    drop(testers);
    drop(dut);
}

/// A VRF's twin lives in the VRF's namespace: adopted there, not moved
/// again, its address and the namespace's catch-all route (docs/vrf.md,
/// "Traffic of a VRF's own kernel") still in place, and it answers pings
/// in its VRF after the restart.
#[test]
fn restart_keeps_a_vrf_twin_in_its_namespace() {
    testkit::require_root!();
    let _g = l2::heavy();
    let bed = testkit::TestBed::new("lyrsv", 2, 1500).expect("namespaces");
    // The VRF's namespace, made here so `ip netns exec` reaches it.
    let vrf = testkit::Netns::new("lyrsv-v").expect("VRF namespace");
    let vrf_ns = vrf.name().to_string();
    let yaml = format!(
        "switch:\n  name: restart-vrf\nports:\n  - {{name: sw1, mode: routed, addresses: [10.61.0.1/24]}}\n  \
         - {{name: sw2, mode: routed, addresses: [10.62.0.1/24]}}\n\
         vrfs:\n  - {{name: CUST, interfaces: [sw2], rd: \"65000:7\", namespace: {vrf_ns}}}\n"
    );
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let before = (
        ifindex(bed.dut.name(), "ly-sw1"),
        ifindex(&vrf_ns, "ly-sw2"),
    );
    let out = sw.cli(&["restart"]).expect("lanyard restart");
    assert!(out.status.success(), "{out:?}\n{}", sw.log());
    let t0 = Instant::now();
    while !sw.log().contains("forwarding resumed") && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = (
        ifindex(bed.dut.name(), "ly-sw1"),
        ifindex(&vrf_ns, "ly-sw2"),
    );
    let log = sw.log();
    assert!(log.contains("2 TAP twins handed over"), "{log}");
    assert!(before.0 > 0 && before.1 > 0, "{before:?}");
    assert_eq!(before, after, "twins made anew\n{log}");
    let addr = std::process::Command::new("ip")
        .args(["-n", &vrf_ns, "-o", "addr", "show", "dev", "ly-sw2"])
        .output()
        .expect("ip addr");
    assert!(
        String::from_utf8_lossy(&addr.stdout).contains("10.62.0.1/24"),
        "{addr:?}"
    );
    let routes = std::process::Command::new("ip")
        .args(["-n", &vrf_ns, "route", "show", "default"])
        .output()
        .expect("ip route");
    assert!(
        String::from_utf8_lossy(&routes.stdout).contains("via 169.254.255.254"),
        "the VRF's catch-all route: {routes:?}"
    );
    // The VRF's port still routes to its twin: the tester on sw2 pings it.
    bed.tester
        .exec(&["ip", "addr", "add", "10.62.0.2/24", "dev", "t2"])
        .expect("tester address");
    let ping = bed.tester.exec(&[
        "ping",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "1",
        "-I",
        "t2",
        "10.62.0.1",
    ]);
    assert!(
        ping.as_ref().is_ok_and(|o| o.status.success()),
        "ping in the VRF after the restart: {ping:?}\n{log}"
    );
    drop(sw);
    drop(vrf);
}
