//! Route leaking between VRFs (issue 18 item 3, docs/vrf.md "Route
//! leaking"): bgpd's `import vrf` with netns VRFs. Lanyard has VRF CUSTA
//! (port sw1, CE t1 10.1.0.2) and CUSTB (port sw2, CE t2 10.2.0.2, with
//! 198.51.100.7 and 203.0.113.7 on its loopback). FRR (zebra `-n` with
//! both modules, staticd, bgpd): CUSTB routes 198.51.100.0/24 and
//! 203.0.113.0/24 to its CE; its bgpd redistributes only 198.51.100.0/24
//! (and its connected subnet), CUSTA `import vrf CUSTB`; CUSTB imports
//! CUSTA's connected subnet back. zebra resolves a leaked route's next hop
//! in the source VRF, so its interface is the source VRF's twin. Checked:
//!
//! * `show ip route vrf CUSTA` has 198.51.100.0/24 via 10.2.0.2 out of
//!   sw2 (CUSTB's port), and not 203.0.113.0/24;
//! * the CEs' kernels ping across (t1 → 198.51.100.7, replies through the
//!   route leaked back into CUSTB), the first packets resolving CUSTB's
//!   neighbour through CUSTB's twin (the ingress twin's kernel, CUSTA's,
//!   has no such route);
//! * 50 UDP frames from t1 to 198.51.100.7 all reach t2 (its MAC, TTL
//!   63); 20 to 203.0.113.7 (not leaked) reach nothing, and ping fails;
//! * the same for IPv6 (2001:db8:99::/48 leaked, 2001:db8:98::/48 not):
//!   route, ping across, 20 frames with hop limit 63.
//!
//! Fails without the change: the leaked route's interface (CUSTB's twin)
//! was unknown in CUSTA's FIB, the route was not installed.
//!
//! `routes_leak_into_and_out_of_the_default_vrf` does the same between
//! the default VRF and a VRF (`import vrf CUSTA` in the default bgpd
//! instance, `import vrf default` in CUSTA's): see its comment.
//!
//! Needs root, FRR (zebra, staticd, bgpd) and the modules
//! (`scripts/build-zebra-mpls.sh`), else SKIPPED.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::frame::Mac;
use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions, RouterBed};
use testkit::ip::{self, IpInfo};
use testkit::netns::{ip_batch, Netns};
use testkit::{l2, RawPort, Switch};

const FPM_PORT: u16 = 2623;

/// CE 1 on t1 (10.1.0.2, 2001:db8:1::2) and CE 2 on t2 (10.2.0.2,
/// 2001:db8:2::2 and `t2_more`; loopbacks 198.51.100.7, 203.0.113.7,
/// 2001:db8:99::7, 2001:db8:98::7), each routing by default to the switch.
fn customer_edges(bed: &RouterBed, t2_more: &[&str]) {
    let lines = |v: &[&str]| v.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    ip_batch(
        bed.tester(1),
        &lines(&[
            "addr add 10.1.0.2/24 dev t1",
            "route add default via 10.1.0.1",
            "addr add 2001:db8:1::2/64 dev t1 nodad",
            "route add ::/0 via 2001:db8:1::1",
        ]),
    )
    .expect("CE 1 setup");
    let t2 = bed.tester(2);
    // The tester namespaces have IPv6 off but on their veth.
    t2.sysctl("net.ipv6.conf.lo.disable_ipv6", "0")
        .expect("IPv6 on t2's lo");
    let mut l = lines(&[
        "link set lo up",
        "addr add 10.2.0.2/24 dev t2",
        "addr add 198.51.100.7/32 dev lo",
        "addr add 203.0.113.7/32 dev lo",
        "route add default via 10.2.0.1",
        "addr add 2001:db8:2::2/64 dev t2 nodad",
        "addr add 2001:db8:99::7/128 dev lo",
        "addr add 2001:db8:98::7/128 dev lo",
        "route add ::/0 via 2001:db8:2::1",
    ]);
    l.extend(t2_more.iter().map(|a| format!("addr add {a} dev t2 nodad")));
    ip_batch(t2, &l).expect("CE 2 setup");
}

/// staticd: in `vrf`, CE 2's loopback prefixes (one of each family to be
/// leaked, one not) via CE 2.
fn ce2_statics(vrf: &str) -> String {
    format!(
        "vrf {vrf}\n ip route 198.51.100.0/24 10.2.0.2\n ip route 203.0.113.0/24 10.2.0.2\n \
         ipv6 route 2001:db8:99::/48 2001:db8:2::2\n ipv6 route 2001:db8:98::/48 2001:db8:2::2\n\
         exit-vrf\n"
    )
}

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// (gateway, port) of each next hop of the installed route `prefix`.
fn hops(sw: &Switch, vrf: &str, prefix: &str) -> Vec<(String, String)> {
    let family = if prefix.contains(':') { "ipv6" } else { "ip" };
    let v = sw.show_json(&["show", family, "route", "vrf", vrf]);
    v["routes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["prefix"] == prefix && r["installed"] == true)
        .flat_map(|r| r["nexthops"].as_array().into_iter().flatten())
        .map(|h| {
            let s = |k: &str| h[k].as_str().unwrap_or_default().to_string();
            (s("gateway"), s("interface"))
        })
        .collect()
}

fn ping(ns: &Netns, dst: &str) -> bool {
    ns.exec(&["ping", "-c", "1", "-W", "1", dst]).is_ok()
}

/// Pings until one answer comes, for at most `max`.
fn ping_within(ns: &Netns, dst: &str, max: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < max {
        if ping(ns, dst) {
            return true;
        }
    }
    false
}

/// Every test frame `port` receives until it has been quiet for `quiet`.
fn collect(port: &RawPort, quiet: Duration) -> Vec<IpInfo> {
    let mut out = Vec::new();
    while let Ok(Some(f)) = port.recv_timeout(quiet) {
        if let Some(p) = ip::parse(&f).filter(|p| p.seq.is_some()) {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_route_leaked_from_another_vrf_leaves_by_that_vrfs_interface() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Staticd, Daemon::Bgpd]);
    if !testkit::frr::lanyard_modules_built() {
        return;
    }
    let t0 = Instant::now();
    let bed = RouterBed::new("vrflk", 2, 1500).expect("namespaces");
    let ns_a = Netns::new("lylka").unwrap();
    let ns_b = Netns::new("lylkb").unwrap();
    customer_edges(&bed, &[]);
    let (t1, t2) = (bed.tester(1), bed.tester(2));
    let yaml = format!(
        r#"
switch:
  name: vrf-leak
ports:
  - {{name: sw1, mode: routed, addresses: [10.1.0.1/24, "2001:db8:1::1/64"]}}
  - {{name: sw2, mode: routed, addresses: [10.2.0.1/24, "2001:db8:2::1/64"]}}
vrfs:
  - {{name: CUSTA, interfaces: [sw1], rd: "65000:1", table: 1001, namespace: {}}}
  - {{name: CUSTB, interfaces: [sw2], rd: "65000:2", table: 1002, namespace: {}}}
routing:
  fpm: 127.0.0.1:{FPM_PORT}
"#,
        ns_a.name(),
        ns_b.name()
    );
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let tmp_guard = testkit::TempDir::new("vrf-leak");
    let tmp = tmp_guard.path().to_path_buf();

    let cfg = FrrConfig {
        zebra: format!("fpm address 127.0.0.1 port {FPM_PORT}\nno fpm use-next-hop-groups\n"),
        staticd: ce2_statics("CUSTB"),
        bgpd: "ip prefix-list LEAK seq 5 permit 198.51.100.0/24\n\
               ipv6 prefix-list LEAK6 seq 5 permit 2001:db8:99::/48\n\
               route-map LEAK permit 10\n match ip address prefix-list LEAK\nexit\n\
               route-map LEAK6 permit 10\n match ipv6 address prefix-list LEAK6\nexit\n\
               router bgp 65000\n bgp router-id 10.255.0.1\nexit\n\
               router bgp 65000 vrf CUSTA\n address-family ipv4 unicast\n  \
               redistribute connected\n  import vrf CUSTB\n exit-address-family\n \
               address-family ipv6 unicast\n  redistribute connected\n  import vrf CUSTB\n \
               exit-address-family\nexit\n\
               router bgp 65000 vrf CUSTB\n address-family ipv4 unicast\n  \
               redistribute connected\n  redistribute static route-map LEAK\n  \
               import vrf CUSTA\n exit-address-family\n address-family ipv6 unicast\n  \
               redistribute connected\n  redistribute static route-map LEAK6\n  \
               import vrf CUSTA\n exit-address-family\nexit\n"
            .into(),
        ..FrrConfig::default()
    };
    let opts = FrrOptions::lanyard_pe(
        &tmp.join("pw.sock"),
        [("CUSTA", ns_a.name()), ("CUSTB", ns_b.name())],
    );
    let frr = FrrInstance::start_with(
        bed.dut.name(),
        "vrf-leak",
        &[Daemon::Zebra, Daemon::Staticd, Daemon::Bgpd],
        &cfg,
        &opts,
    )
    .expect("FRR");
    let dump = || {
        format!(
            "Lanyard CUSTA: {}\nLanyard CUSTB: {}\nvrf: {}\nFRR:\n{}\nlog:\n{}",
            sw.show_json(&["show", "ip", "route", "vrf", "CUSTA"]),
            sw.show_json(&["show", "ip", "route", "vrf", "CUSTB"]),
            sw.show_json(&["show", "vrf"]),
            frr.vtysh(&[
                "show ip route vrf all",
                "show ipv6 route vrf all",
                "show bgp vrf all ipv4 unicast",
                "show bgp vrf all summary"
            ]),
            sw.log()
        )
    };

    // 1. The leaked routes, each via its source VRF's interface.
    let want_a = vec![("10.2.0.2".to_string(), "sw2".to_string())];
    let want_b = vec![("".to_string(), "sw1".to_string())];
    let start = Instant::now();
    while (hops(&sw, "CUSTA", "198.51.100.0/24") != want_a
        || hops(&sw, "CUSTB", "10.1.0.0/24") != want_b)
        && start.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(300));
    }
    let (got_a, got_b) = (
        hops(&sw, "CUSTA", "198.51.100.0/24"),
        hops(&sw, "CUSTB", "10.1.0.0/24"),
    );
    if got_a != want_a || got_b != want_b {
        frr.dump_logs();
        panic!(
            "leaked routes: CUSTA 198.51.100.0/24 {got_a:?}, CUSTB 10.1.0.0/24 {got_b:?}\n{}",
            dump()
        );
    }
    eprintln!(
        "  leaked routes in Lanyard {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        hops(&sw, "CUSTA", "203.0.113.0/24").is_empty(),
        "203.0.113.0/24 is not leaked\n{}",
        dump()
    );
    let text = sw
        .cli(&["show", "ip", "route", "vrf", "CUSTA"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        text.lines()
            .any(|l| l.contains("198.51.100.0/24") && l.contains("10.2.0.2") && l.contains("sw2")),
        "show ip route vrf CUSTA:\n{text}"
    );

    // 2. The CEs' kernels ping across: the first packets wait for
    // CUSTB's neighbour, resolved through CUSTB's twin.
    let start = Instant::now();
    while !ping(t1, "198.51.100.7") {
        if start.elapsed() > Duration::from_secs(10) {
            panic!(
                "t1 cannot ping 198.51.100.7 through the leaked route\ncounters: {}\n{}",
                sw.counters(),
                dump()
            );
        }
    }
    eprintln!(
        "  ping across {:.1} s after the routes",
        start.elapsed().as_secs_f64()
    );
    assert!(
        !ping(t1, "203.0.113.7"),
        "203.0.113.7 is not leaked, yet it answers"
    );

    // 3. Test frames: the leaked prefix reaches CUSTB's CE, the other does
    // not leave at all.
    let p1 = bed.open(1).unwrap();
    let p2 = bed.open(2).unwrap();
    let r1 = sw.router_mac("sw1");
    let m1 = t1.mac("t1");
    let m2 = t2.mac("t2");
    p2.drain();
    for seq in 0..50u64 {
        let f = ip::udp(&r1, &m1, a("10.1.0.2"), a("198.51.100.7"), 64, seq, 128);
        p1.send(&f).unwrap();
    }
    for seq in 1_000..1_020u64 {
        let f = ip::udp(&r1, &m1, a("10.1.0.2"), a("203.0.113.7"), 64, seq, 128);
        p1.send(&f).unwrap();
    }
    let got = collect(&p2, Duration::from_millis(500));
    let leaked: Vec<&IpInfo> = got
        .iter()
        .filter(|p| p.seq.is_some_and(|s| s < 50))
        .collect();
    assert_eq!(leaked.len(), 50, "all 50 to the leaked prefix reach t2");
    for p in &leaked {
        assert_eq!(p.dst_mac, m2, "to CUSTB's CE");
        assert_eq!(p.ttl, 63);
        assert!(p.header_ok && p.l4_ok, "checksums");
    }
    assert!(
        !got.iter().any(|p| p.seq.is_some_and(|s| s >= 1_000)),
        "a frame to the prefix that is not leaked reached CUSTB's CE"
    );

    // 4. IPv6: the same leak, 2001:db8:99::/48 only.
    let want6 = vec![("2001:db8:2::2".to_string(), "sw2".to_string())];
    let start = Instant::now();
    while hops(&sw, "CUSTA", "2001:db8:99::/48") != want6
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(
        hops(&sw, "CUSTA", "2001:db8:99::/48"),
        want6,
        "IPv6 leak\n{}",
        dump()
    );
    assert!(hops(&sw, "CUSTA", "2001:db8:98::/48").is_empty());
    assert_eq!(
        hops(&sw, "CUSTB", "2001:db8:1::/64"),
        [("".to_string(), "sw1".to_string())]
    );
    assert!(
        ping_within(t1, "2001:db8:99::7", Duration::from_secs(10)),
        "t1 cannot ping 2001:db8:99::7 through the leaked route\n{}",
        dump()
    );
    assert!(
        !ping(t1, "2001:db8:98::7"),
        "2001:db8:98::7 is not leaked, yet it answers"
    );
    p2.drain();
    for seq in 2_000..2_020u64 {
        let f = ip::udp(
            &r1,
            &m1,
            a("2001:db8:1::2"),
            a("2001:db8:99::7"),
            64,
            seq,
            128,
        );
        p1.send(&f).unwrap();
    }
    let got = collect(&p2, Duration::from_millis(500));
    let n = got
        .iter()
        .filter(|p| p.seq.is_some_and(|s| (2_000..2_020).contains(&s)))
        .filter(|p| p.dst_mac == m2 && p.ttl == 63 && p.l4_ok)
        .count();
    assert_eq!(n, 20, "IPv6 frames to CUSTB's CE (its MAC, hop limit 63)");
    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop(frr);
}

/// (gateway, port) of each next hop of the installed route `prefix` in the
/// default VRF.
fn default_hops(sw: &Switch, prefix: &str) -> Vec<(String, String)> {
    let family = if prefix.contains(':') { "ipv6" } else { "ip" };
    let v = sw.show_json(&["show", family, "route", prefix]);
    v.as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["prefix"] == prefix && r["installed"] == true)
        .flat_map(|r| r["nexthops"].as_array().into_iter().flatten())
        .map(|h| {
            let s = |k: &str| h[k].as_str().unwrap_or_default().to_string();
            (s("gateway"), s("interface"))
        })
        .collect()
}

/// Sends `n` UDP test frames (sequence numbers from `first`) into `from`
/// and returns how many `to` received as routed ones: to `dst_mac`, TTL /
/// hop limit 63, valid checksums.
#[allow(clippy::too_many_arguments)]
fn cross(
    from: &RawPort,
    to: &RawPort,
    (router_mac, src_mac, dst_mac): (&Mac, &Mac, &Mac),
    src: &str,
    dst: &str,
    first: u64,
    n: u64,
) -> (usize, usize) {
    to.drain();
    for seq in first..first + n {
        let f = ip::udp(router_mac, src_mac, a(src), a(dst), 64, seq, 128);
        from.send(&f).unwrap();
    }
    let got = collect(to, Duration::from_millis(500));
    let mine: Vec<&IpInfo> = got
        .iter()
        .filter(|p| p.seq.is_some_and(|s| (first..first + n).contains(&s)))
        .collect();
    let good = mine
        .iter()
        .filter(|p| p.dst_mac == *dst_mac && p.ttl == 63 && p.header_ok && p.l4_ok)
        .count();
    (mine.len(), good)
}

/// Leaking into and out of the default VRF (docs/vrf.md "Route leaking"):
/// Lanyard's port sw1 is in the default VRF (CE t1 10.1.0.2), sw2 in VRF
/// CUSTA (CE t2 10.2.0.2, 198.51.100.7, 203.0.113.7 and their IPv6
/// twins on its loopback). staticd routes both prefixes in CUSTA to t2;
/// CUSTA's bgpd redistributes only 198.51.100.0/24 (2001:db8:99::/48) and
/// its connected subnet, and `import vrf default`; the default instance
/// redistributes its connected subnet and `import vrf CUSTA`. Checked:
///
/// * `show ip route` (default) has 198.51.100.0/24 via 10.2.0.2 out of
///   sw2, CUSTA's port, and not 203.0.113.0/24; `show ip route vrf
///   CUSTA` has 10.1.0.0/24 out of sw1, the default VRF's port;
/// * t1 pings 198.51.100.7, and t2's second addresses 10.2.0.3 and
///   2001:db8:2::3 (hosts of CUSTA's connected subnets, leaked): their
///   neighbours, unknown before, are resolved through CUSTA's twin (the
///   default namespace's kernel has no usable copy of the routes) and
///   appear in CUSTA's kernel; t2 pings t1 back;
/// * 50 UDP frames from t1 reach t2 (its MAC, TTL 63), 50 from t2 reach
///   t1; 20 to 203.0.113.7 reach nothing and its ping fails;
/// * the same for IPv6 (2001:db8:99::/48 leaked, 2001:db8:98::/48 not).
///
/// Fails without the change: the default VRF's FIB did not map CUSTA's
/// twin, so the route leaked into it was not installed.
#[test]
fn routes_leak_into_and_out_of_the_default_vrf() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Staticd, Daemon::Bgpd]);
    if !testkit::frr::lanyard_modules_built() {
        return;
    }
    let t0 = Instant::now();
    let bed = RouterBed::new("vrfld", 2, 1500).expect("namespaces");
    let ns_a = Netns::new("lylda").unwrap();
    customer_edges(&bed, &["10.2.0.3/24", "2001:db8:2::3/64"]);
    let (t1, t2) = (bed.tester(1), bed.tester(2));
    let yaml = format!(
        r#"
switch:
  name: vrf-leak-default
ports:
  - {{name: sw1, mode: routed, addresses: [10.1.0.1/24, "2001:db8:1::1/64"]}}
  - {{name: sw2, mode: routed, addresses: [10.2.0.1/24, "2001:db8:2::1/64"]}}
vrfs:
  - {{name: CUSTA, interfaces: [sw2], rd: "65000:1", table: 1001, namespace: {}}}
routing:
  fpm: 127.0.0.1:{FPM_PORT}
"#,
        ns_a.name(),
    );
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let tmp_guard = testkit::TempDir::new("vrf-leak-default");
    let tmp = tmp_guard.path().to_path_buf();

    let cfg = FrrConfig {
        zebra: format!("fpm address 127.0.0.1 port {FPM_PORT}\nno fpm use-next-hop-groups\n"),
        staticd: ce2_statics("CUSTA"),
        bgpd: "ip prefix-list LEAK seq 5 permit 198.51.100.0/24\n\
               ipv6 prefix-list LEAK6 seq 5 permit 2001:db8:99::/48\n\
               route-map LEAK permit 10\n match ip address prefix-list LEAK\nexit\n\
               route-map LEAK6 permit 10\n match ipv6 address prefix-list LEAK6\nexit\n\
               router bgp 65000\n bgp router-id 10.255.0.1\n \
               address-family ipv4 unicast\n  redistribute connected\n  import vrf CUSTA\n \
               exit-address-family\n address-family ipv6 unicast\n  redistribute connected\n  \
               import vrf CUSTA\n exit-address-family\nexit\n\
               router bgp 65000 vrf CUSTA\n address-family ipv4 unicast\n  \
               redistribute connected\n  redistribute static route-map LEAK\n  \
               import vrf default\n exit-address-family\n address-family ipv6 unicast\n  \
               redistribute connected\n  redistribute static route-map LEAK6\n  \
               import vrf default\n exit-address-family\nexit\n"
            .into(),
        ..FrrConfig::default()
    };
    let opts = FrrOptions::lanyard_pe(&tmp.join("pw.sock"), [("CUSTA", ns_a.name())]);
    let frr = FrrInstance::start_with(
        bed.dut.name(),
        "vrf-leak-default",
        &[Daemon::Zebra, Daemon::Staticd, Daemon::Bgpd],
        &cfg,
        &opts,
    )
    .expect("FRR");
    let dump = || {
        format!(
            "Lanyard default: {}\nLanyard default v6: {}\nLanyard CUSTA: {}\nFRR:\n{}\nlog:\n{}",
            sw.show_json(&["show", "ip", "route"]),
            sw.show_json(&["show", "ipv6", "route"]),
            sw.show_json(&["show", "ip", "route", "vrf", "CUSTA"]),
            frr.vtysh(&[
                "show ip route vrf all",
                "show ipv6 route vrf all",
                "show bgp vrf all ipv4 unicast",
                "show bgp vrf all ipv6 unicast",
            ]),
            sw.log()
        )
    };

    // 1. The leaked routes, each via its source VRF's interface.
    let want_d = vec![("10.2.0.2".to_string(), "sw2".to_string())];
    let want_a = vec![("".to_string(), "sw1".to_string())];
    let want_d6 = vec![("2001:db8:2::2".to_string(), "sw2".to_string())];
    let want_a6 = vec![("".to_string(), "sw1".to_string())];
    let ready = || {
        default_hops(&sw, "198.51.100.0/24") == want_d
            && hops(&sw, "CUSTA", "10.1.0.0/24") == want_a
            && default_hops(&sw, "2001:db8:99::/48") == want_d6
            && hops(&sw, "CUSTA", "2001:db8:1::/64") == want_a6
    };
    let start = Instant::now();
    while !ready() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(300));
    }
    if !ready() {
        frr.dump_logs();
        panic!(
            "leaked routes: default 198.51.100.0/24 {:?} 2001:db8:99::/48 {:?}, \
             CUSTA 10.1.0.0/24 {:?} 2001:db8:1::/64 {:?}\n{}",
            default_hops(&sw, "198.51.100.0/24"),
            default_hops(&sw, "2001:db8:99::/48"),
            hops(&sw, "CUSTA", "10.1.0.0/24"),
            hops(&sw, "CUSTA", "2001:db8:1::/64"),
            dump()
        );
    }
    eprintln!(
        "  leaked routes in Lanyard {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        default_hops(&sw, "203.0.113.0/24").is_empty()
            && default_hops(&sw, "2001:db8:98::/48").is_empty(),
        "203.0.113.0/24 and 2001:db8:98::/48 are not leaked\n{}",
        dump()
    );
    let text = sw
        .cli(&["show", "ip", "route"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        text.lines()
            .any(|l| l.contains("198.51.100.0/24") && l.contains("10.2.0.2") && l.contains("sw2")),
        "show ip route:\n{text}"
    );
    let vtysh = frr.vtysh(&["show ip route 198.51.100.0/24"]);
    assert!(
        vtysh.contains("CUSTA"),
        "zebra's default table: the route's next hop in CUSTA\n{vtysh}"
    );

    // 2. Pings across. 10.2.0.3 (t2's second address) is reached by
    // CUSTA's connected subnet leaked into the default table: no route
    // names it as a gateway (so it is no managed neighbour), and the first
    // packet waits for its MAC, which only CUSTA's twin can resolve (the
    // default namespace's kernel failed to install the leaked routes:
    // their interface is in CUSTA's namespace). The punt goes to the
    // egress VRF's twin.
    let start = Instant::now();
    while !ping(t1, "198.51.100.7") {
        if start.elapsed() > Duration::from_secs(10) {
            panic!(
                "t1 (default VRF) cannot ping 198.51.100.7 (CUSTA)\ncounters: {}\n{}",
                sw.counters(),
                dump()
            );
        }
    }
    eprintln!(
        "  ping default → CUSTA {:.1} s after the routes",
        start.elapsed().as_secs_f64()
    );
    for (dst, family) in [("10.2.0.3", "-4"), ("2001:db8:2::3", "-6")] {
        let seen = |ns: &Netns| {
            ns.exec(&["ip", family, "neigh", "show", dst])
                .map(|o| String::from_utf8_lossy(&o.stdout).contains("lladdr"))
                .unwrap_or(false)
        };
        assert!(!seen(&ns_a), "{dst} unknown in CUSTA before the ping");
        assert!(
            ping_within(t1, dst, Duration::from_secs(10)),
            "t1 (default VRF) cannot ping {dst}, a host of CUSTA's leaked subnet\ncounters: {}\n{}",
            sw.counters(),
            dump()
        );
        assert!(
            seen(&ns_a),
            "{dst} resolved by CUSTA's kernel (the egress VRF's twin)"
        );
    }
    assert!(
        ping_within(t2, "10.1.0.2", Duration::from_secs(10)),
        "t2 (CUSTA) cannot ping t1 (default VRF)\n{}",
        dump()
    );
    assert!(
        !ping(t1, "203.0.113.7"),
        "203.0.113.7 is not leaked, yet it answers"
    );

    // 3. Test frames both ways; the prefix not leaked leaves nowhere.
    let p1 = bed.open(1).unwrap();
    let p2 = bed.open(2).unwrap();
    let (r1, r2) = (sw.router_mac("sw1"), sw.router_mac("sw2"));
    let (m1, m2) = (t1.mac("t1"), t2.mac("t2"));
    let to_a = (&r1, &m1, &m2);
    let to_d = (&r2, &m2, &m1);
    assert_eq!(
        cross(&p1, &p2, to_a, "10.1.0.2", "198.51.100.7", 0, 50),
        (50, 50),
        "default → CUSTA: frames seen at t2, of them routed right (t2's MAC, TTL 63)"
    );
    assert_eq!(
        cross(&p2, &p1, to_d, "198.51.100.7", "10.1.0.2", 100, 50),
        (50, 50),
        "CUSTA → default: frames seen at t1, of them routed right"
    );
    assert_eq!(
        cross(&p1, &p2, to_a, "10.1.0.2", "203.0.113.7", 1_000, 20),
        (0, 0),
        "a frame to the prefix that is not leaked reached t2"
    );

    // 4. IPv6: the same both ways.
    assert!(
        ping_within(t1, "2001:db8:99::7", Duration::from_secs(10)),
        "t1 cannot ping 2001:db8:99::7 through the leaked route\n{}",
        dump()
    );
    assert!(
        ping_within(t2, "2001:db8:1::2", Duration::from_secs(10)),
        "t2 cannot ping 2001:db8:1::2 through the route leaked from the default VRF\n{}",
        dump()
    );
    assert!(
        !ping(t1, "2001:db8:98::7"),
        "2001:db8:98::7 is not leaked, yet it answers"
    );
    assert_eq!(
        cross(&p1, &p2, to_a, "2001:db8:1::2", "2001:db8:99::7", 2_000, 50),
        (50, 50),
        "IPv6 default → CUSTA"
    );
    assert_eq!(
        cross(&p2, &p1, to_d, "2001:db8:99::7", "2001:db8:1::2", 2_100, 50),
        (50, 50),
        "IPv6 CUSTA → default"
    );
    assert_eq!(
        cross(&p1, &p2, to_a, "2001:db8:1::2", "2001:db8:98::7", 3_000, 20),
        (0, 0),
        "an IPv6 frame to the prefix that is not leaked reached t2"
    );
    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop(frr);
}
