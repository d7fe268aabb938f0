//! L3VPN ingress PE with a real remote PE (issue 18, docs/vrf.md
//! "L3VPN"): Lanyard's FRR (zebra `-n` with both modules, ospfd, ldpd,
//! bgpd) peers over the core port sw2 (default VRF) with a tester FRR PE
//! (ospfd, ldpd, bgpd) in t2's namespace. The remote PE originates the
//! VPNv4 route 198.51.100.0/24 (RD 65000:1, RT 65000:1, VPN label 555,
//! next hop its loopback 10.255.0.2, reached over OSPF with an LDP
//! implicit-null label); Lanyard's VRF CUSTA imports it. Checked: the route
//! in Lanyard's CUSTA FIB via the core neighbour, and a CE packet (t1,
//! sw1, VRF CUSTA) leaving sw2 with [555], S set, label TTL 63, IP TTL 63,
//! parsed from the captured frame.
//!
//! Needs root, FRR (zebra, ospfd, ldpd, bgpd) and the modules
//! (`scripts/build-zebra-mpls.sh`), else SKIPPED.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::frr::{Daemon, FrrInstance, FrrOptions, RouterBed};
use testkit::ip;
use testkit::l2;
use testkit::netns::Netns;

const FPM_PORT: u16 = 2621;
const VPN_LABEL: u32 = 555;

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn remote_pe_vpn_route_leaves_the_core_with_its_vpn_label() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd]);
    if !testkit::frr::lanyard_modules_built() {
        return;
    }
    let t0 = Instant::now();
    let bed = RouterBed::new("vpnfr", 2, 1500).expect("namespaces");
    let ns_a = Netns::new("lyvpa").unwrap();
    let t1 = bed.tester(1);
    let t2 = bed.tester(2);
    for args in [
        &["ip", "addr", "add", "10.1.0.2/24", "dev", "t1"][..],
        &["ip", "route", "add", "default", "via", "10.1.0.1"],
    ] {
        t1.exec(args).expect("CE setup");
    }
    testkit::frr::address_remote_pe(t2).expect("remote PE setup");
    let sw = testkit::frr::start_vpn_lanyard(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed,
        "vpn-frr",
        &[("sw1", "10.1.0.1/24"), ("sw2", "10.0.12.1/24")],
        &[("CUSTA", "sw1", ns_a.name())],
        FPM_PORT,
    )
    .expect("start lanyard");
    let tmp_guard = testkit::TempDir::new("vpn-frr");
    let tmp = tmp_guard.path().to_path_buf();

    // Lanyard's PE (LDP and BGP from the core port's address).
    let pe_cfg = testkit::frr::lanyard_vpn_pe_config(
        FPM_PORT,
        "ipv4",
        "router bgp 65000 vrf CUSTA\n address-family ipv4 unicast\n  \
               label vpn export auto\n  rd vpn export 65000:1\n  rt vpn both 65000:1\n  \
               export vpn\n  import vpn\n exit-address-family\nexit\n",
    );
    let pe_opts = FrrOptions::lanyard_pe(&tmp.join("pe-pw.sock"), [("CUSTA", ns_a.name())]);
    let pe = FrrInstance::start_with(
        bed.dut.name(),
        "vpn-pe",
        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd],
        &pe_cfg,
        &pe_opts,
    )
    .expect("Lanyard's FRR");
    // The remote PE: a VPNv4 route of its own with a fixed label and the
    // route target CUSTA imports.
    let remote =
        testkit::frr::remote_vpn_pe(t2, "vpn-remote", &tmp, "ipv4", "198.51.100.0/24", VPN_LABEL)
            .expect("remote PE FRR");

    testkit::frr::wait_vpn_route(&sw, &pe, &remote, "CUSTA", "198.51.100.0/24", "10.0.12.2");
    eprintln!(
        "  VPN route in Lanyard's CUSTA {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );

    let p1 = bed.open(1).unwrap();
    let p2 = bed.open(2).unwrap();
    let r1 = sw.router_mac("sw1");
    let m1 = t1.mac("t1");
    let mut got = None;
    // The first packets may wait for the core neighbour's ARP.
    for seq in 0..20u64 {
        p2.drain();
        let f = ip::udp(&r1, &m1, a("10.1.0.2"), a("198.51.100.7"), 64, seq, 128);
        p1.send(&f).unwrap();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            let Some(f) = p2.recv_timeout(Duration::from_millis(100)).expect("recv") else {
                continue;
            };
            if f.len() > 18 && f[12..14] == [0x88, 0x47] {
                got = Some(f);
                break;
            }
        }
        if got.is_some() {
            break;
        }
    }
    let Some(f) = got else {
        panic!(
            "no labelled frame on the core\nmpls: {}\nlog:\n{}",
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
    assert_eq!(&inner[16..20], &[198, 51, 100, 7]);
    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop(remote);
    drop(pe);
}
