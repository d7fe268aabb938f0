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
//! Needs root, FRR (zebra, staticd, bgpd) and the modules
//! (`scripts/build-zebra-mpls.sh`), else SKIPPED.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions, RouterBed};
use testkit::ip::{self, IpInfo};
use testkit::netns::Netns;
use testkit::{l2, RawPort, Switch};

const FPM_MODULE: &str = "/usr/local/lib/lanyard/zebra_lanyard_fpm.so";
const MPLS_MODULE: &str = "/usr/local/lib/lanyard/zebra_lanyard.so";
const FPM_PORT: u16 = 2623;

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
    for m in [FPM_MODULE, MPLS_MODULE] {
        if !Path::new(m).exists() {
            println!("SKIPPED: needs {m} (scripts/build-zebra-mpls.sh)");
            return;
        }
    }
    let t0 = Instant::now();
    let bed = RouterBed::new("vrflk", 2, 1500).expect("namespaces");
    let ns_a = Netns::new("lylka").unwrap();
    let ns_b = Netns::new("lylkb").unwrap();
    let t1 = bed.tester(1);
    let t2 = bed.tester(2);
    for args in [
        &["ip", "addr", "add", "10.1.0.2/24", "dev", "t1"][..],
        &["ip", "route", "add", "default", "via", "10.1.0.1"],
        &[
            "ip",
            "addr",
            "add",
            "2001:db8:1::2/64",
            "dev",
            "t1",
            "nodad",
        ],
        &[
            "ip",
            "-6",
            "route",
            "add",
            "default",
            "via",
            "2001:db8:1::1",
        ],
    ] {
        t1.exec(args).expect("CE A setup");
    }
    // The tester namespaces have IPv6 off but on their veth.
    t2.sysctl("net.ipv6.conf.lo.disable_ipv6", "0")
        .expect("IPv6 on t2's lo");
    for args in [
        &["ip", "link", "set", "lo", "up"][..],
        &["ip", "addr", "add", "10.2.0.2/24", "dev", "t2"],
        &["ip", "addr", "add", "198.51.100.7/32", "dev", "lo"],
        &["ip", "addr", "add", "203.0.113.7/32", "dev", "lo"],
        &["ip", "route", "add", "default", "via", "10.2.0.1"],
        &[
            "ip",
            "addr",
            "add",
            "2001:db8:2::2/64",
            "dev",
            "t2",
            "nodad",
        ],
        &["ip", "addr", "add", "2001:db8:99::7/128", "dev", "lo"],
        &["ip", "addr", "add", "2001:db8:98::7/128", "dev", "lo"],
        &[
            "ip",
            "-6",
            "route",
            "add",
            "default",
            "via",
            "2001:db8:2::1",
        ],
    ] {
        t2.exec(args).expect("CE B setup");
    }
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
        staticd: "vrf CUSTB\n ip route 198.51.100.0/24 10.2.0.2\n \
                  ip route 203.0.113.0/24 10.2.0.2\n \
                  ipv6 route 2001:db8:99::/48 2001:db8:2::2\n \
                  ipv6 route 2001:db8:98::/48 2001:db8:2::2\nexit-vrf\n"
            .into(),
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
    let opts = FrrOptions {
        zebra_args: vec![
            "-n".into(),
            "-M".into(),
            FPM_MODULE.into(),
            "-M".into(),
            format!("{MPLS_MODULE}:{}", tmp.join("pw.sock").display()),
        ],
        netns_vrfs: vec![
            ("CUSTA".into(), ns_a.name().into()),
            ("CUSTB".into(), ns_b.name().into()),
        ],
        ..FrrOptions::default()
    };
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
