//! A VRF's imported VPN routes leaked on to another VRF (issue 18,
//! docs/vrf.md "Route leaking"): the bed of `vpn_frr.rs` (Lanyard's FRR
//! PE, a tester FRR PE over the core port sw2 originating the VPNv4 route
//! 198.51.100.0/24 with RT 65000:1 and label 555), plus VRF CUSTB (port
//! sw3, CE t3) with `import vrf CUSTA`. CUSTA imports the VPN route and
//! redistributes its connected subnet. Checked:
//!
//! * bgpd leaks CUSTA's own route (10.1.0.0/24) into CUSTB, out of sw1,
//!   but **not** the route CUSTA imported from the VPN: FRR 8.4 leaks
//!   between VRFs through its VPN table and never re-exports a route
//!   that came from it (`is_route_injectable_into_vpn`, bgp_mplsvpn.h),
//!   so neither zebra nor Lanyard has it in CUSTB;
//! * what does give CUSTB the remote route: importing the route target
//!   itself (`rt vpn import 65000:1`, `import vpn`): the route reaches
//!   Lanyard's CUSTB through the core neighbour, and a frame from CUSTB's
//!   CE leaves the core port with [555] (S, label TTL 63) over IP TTL 63,
//!   as CUSTA's does.
//!
//! Needs root, FRR (zebra, ospfd, ldpd, bgpd) and the modules
//! (`scripts/build-zebra-mpls.sh`), else SKIPPED.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::frame::Mac;
use testkit::frr::{Daemon, FrrInstance, FrrOptions, RouterBed};
use testkit::ip;
use testkit::netns::Netns;
use testkit::{l2, RawPort, Switch};

const FPM_PORT: u16 = 2625;
const VPN_LABEL: u32 = 555;

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Sends test frames from a CE into `from` until one leaves `core`
/// labelled; that frame.
fn labelled_frame(
    from: &RawPort,
    core: &RawPort,
    (r, m): (&Mac, &Mac),
    src: &str,
) -> Option<Vec<u8>> {
    // The first packets may wait for the core neighbour's ARP.
    for seq in 0..20u64 {
        core.drain();
        let f = ip::udp(r, m, a(src), a("198.51.100.7"), 64, seq, 128);
        from.send(&f).unwrap();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            let Some(f) = core.recv_timeout(Duration::from_millis(100)).expect("recv") else {
                continue;
            };
            if f.len() > 18 && f[12..14] == [0x88, 0x47] {
                return Some(f);
            }
        }
    }
    None
}

/// The interfaces of the installed route `prefix` in `vrf`.
fn interfaces(sw: &Switch, vrf: &str, prefix: &str) -> Vec<String> {
    let v = sw.show_json(&["show", "ip", "route", "vrf", vrf]);
    v["routes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["prefix"] == prefix && r["installed"] == true)
        .flat_map(|r| r["nexthops"].as_array().into_iter().flatten())
        .filter_map(|h| h["interface"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn imported_vpn_routes_are_not_leaked_on_their_route_target_imports_them() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd]);
    if !testkit::frr::lanyard_modules_built() {
        return;
    }
    let t0 = Instant::now();
    let bed = RouterBed::new("vpnlk", 3, 1500).expect("namespaces");
    let ns_a = Netns::new("lyvla").unwrap();
    let ns_b = Netns::new("lyvlb").unwrap();
    let t1 = bed.tester(1);
    let t2 = bed.tester(2);
    let t3 = bed.tester(3);
    for args in [
        &["ip", "addr", "add", "10.1.0.2/24", "dev", "t1"][..],
        &["ip", "route", "add", "default", "via", "10.1.0.1"],
    ] {
        t1.exec(args).expect("CE setup");
    }
    for args in [
        &["ip", "addr", "add", "10.3.0.2/24", "dev", "t3"][..],
        &["ip", "route", "add", "default", "via", "10.3.0.1"],
    ] {
        t3.exec(args).expect("CE B setup");
    }
    testkit::frr::address_remote_pe(t2).expect("remote PE setup");
    let sw = testkit::frr::start_vpn_lanyard(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed,
        "vpn-leak",
        &[
            ("sw1", "10.1.0.1/24"),
            ("sw2", "10.0.12.1/24"),
            ("sw3", "10.3.0.1/24"),
        ],
        &[("CUSTA", "sw1", ns_a.name()), ("CUSTB", "sw3", ns_b.name())],
        FPM_PORT,
    )
    .expect("start lanyard");
    let tmp_guard = testkit::TempDir::new("vpn-leak");
    let tmp = tmp_guard.path().to_path_buf();

    // Lanyard's PE (LDP and BGP from the core port's address).
    let pe_cfg = testkit::frr::lanyard_vpn_pe_config(
        FPM_PORT,
        "ipv4",
        "router bgp 65000 vrf CUSTA\n address-family ipv4 unicast\n  \
               redistribute connected\n  \
               label vpn export auto\n  rd vpn export 65000:1\n  rt vpn both 65000:1\n  \
               export vpn\n  import vpn\n exit-address-family\nexit\n\
               router bgp 65000 vrf CUSTB\n address-family ipv4 unicast\n  \
               redistribute connected\n  import vrf CUSTA\n exit-address-family\nexit\n",
    );
    let pe_opts = FrrOptions::lanyard_pe(
        &tmp.join("pe-pw.sock"),
        [("CUSTA", ns_a.name()), ("CUSTB", ns_b.name())],
    );
    let pe = FrrInstance::start_with(
        bed.dut.name(),
        "vpn-leak-pe",
        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd],
        &pe_cfg,
        &pe_opts,
    )
    .expect("Lanyard's FRR");
    // The remote PE: a VPNv4 route of its own with a fixed label and the
    // route target CUSTA imports.
    let remote = testkit::frr::remote_vpn_pe(
        t2,
        "vpn-leak-remote",
        &tmp,
        "ipv4",
        "198.51.100.0/24",
        VPN_LABEL,
    )
    .expect("remote PE FRR");

    testkit::frr::wait_vpn_route(&sw, &pe, &remote, "CUSTA", "198.51.100.0/24", "10.0.12.2");
    eprintln!(
        "  VPN route in Lanyard's CUSTA {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );

    // 1. import vrf CUSTA: CUSTA's own route comes over, its VPN route
    // does not. The connected route is leaked once bgpd ran its leak
    // pass, which also covers the VPN route: wait for the one, then look
    // for the other in FRR and in Lanyard.
    let start = Instant::now();
    while interfaces(&sw, "CUSTB", "10.1.0.0/24") != ["sw1"]
        && start.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(300));
    }
    let frr_b = pe.vtysh(&["show ip route vrf CUSTB", "show bgp vrf CUSTB ipv4 unicast"]);
    let lanyard_b = sw.show_json(&["show", "ip", "route", "vrf", "CUSTB"]);
    assert_eq!(
        interfaces(&sw, "CUSTB", "10.1.0.0/24"),
        ["sw1"],
        "CUSTA's own route leaked into CUSTB, out of CUSTA's port\n{lanyard_b}\nFRR:\n{frr_b}\nlog:\n{}",
        sw.log()
    );
    std::thread::sleep(Duration::from_secs(2));
    let frr_b = pe.vtysh(&["show ip route vrf CUSTB", "show bgp vrf CUSTB ipv4 unicast"]);
    eprintln!("  after import vrf CUSTA:\n{frr_b}");
    assert!(
        !frr_b.contains("198.51.100.0/24"),
        "FRR leaked CUSTA's imported VPN route into CUSTB (docs/vrf.md says it does not)\n{frr_b}"
    );
    assert!(
        interfaces(&sw, "CUSTB", "198.51.100.0/24").is_empty(),
        "Lanyard's CUSTB has the VPN route FRR did not leak"
    );

    // 2. Importing the route target: the remote route reaches CUSTB with
    // its label, and CUSTB's CE's frames leave with it.
    pe.configure(&[
        "router bgp 65000 vrf CUSTB",
        "address-family ipv4 unicast",
        "no import vrf CUSTA",
        "rd vpn export 65000:2",
        "rt vpn import 65000:1",
        "import vpn",
    ])
    .expect("CUSTB imports RT 65000:1");
    let start = Instant::now();
    while sw.vrf_route_gateways("CUSTB", "198.51.100.0/24") != ["10.0.12.2"]
        && start.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(
        sw.vrf_route_gateways("CUSTB", "198.51.100.0/24"),
        ["10.0.12.2"],
        "CUSTB imports the remote route by its RT\n{}\nFRR:\n{}",
        sw.show_json(&["show", "ip", "route", "vrf", "CUSTB"]),
        pe.vtysh(&["show ip route vrf CUSTB", "show bgp vrf CUSTB ipv4 unicast"])
    );
    eprintln!(
        "  VPN route in CUSTB by its RT {:.1} s after the change",
        start.elapsed().as_secs_f64()
    );
    let p2 = bed.open(2).unwrap();
    let p3 = bed.open(3).unwrap();
    let (r3, m3) = (sw.router_mac("sw3"), t3.mac("t3"));
    let Some(f) = labelled_frame(&p3, &p2, (&r3, &m3), "10.3.0.2") else {
        panic!(
            "no labelled frame on the core from CUSTB\nmpls: {}\nlog:\n{}",
            sw.show_json(&["show", "mpls", "forwarding"]),
            sw.log()
        );
    };
    let w = u32::from_be_bytes([f[14], f[15], f[16], f[17]]);
    assert_eq!(
        (w >> 12, w >> 8 & 1, w & 0xff),
        (VPN_LABEL, 1, 63),
        "one entry: the VPN label (P-less: transport implicit null), S, TTL"
    );
    let inner = &f[18..];
    assert_eq!(inner[0] >> 4, 4, "IPv4 under the label");
    assert_eq!(inner[8], 63, "IP TTL");
    assert_eq!(&inner[12..16], &[10, 3, 0, 2], "CUSTB's CE's packet");
    assert_eq!(&inner[16..20], &[198, 51, 100, 7]);
    // CUSTA still sends its own.
    let p1 = bed.open(1).unwrap();
    let (r1, m1) = (sw.router_mac("sw1"), t1.mac("t1"));
    let f = labelled_frame(&p1, &p2, (&r1, &m1), "10.1.0.2").expect("CUSTA's frame labelled");
    assert_eq!(
        u32::from_be_bytes([f[14], f[15], f[16], f[17]]) >> 12,
        VPN_LABEL
    );
    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop(remote);
    drop(pe);
}
