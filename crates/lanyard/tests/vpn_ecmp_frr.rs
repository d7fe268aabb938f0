//! A VPN route over two equal-cost transport paths (issue 18, docs/vrf.md
//! "ECMP transport paths"): Lanyard's core ports sw2 and sw3 both reach the
//! remote PE (t2 and t3, one FRR router in one namespace), OSPF gives two
//! equal-cost routes to its loopback, LDP an implicit-null label on each;
//! the remote PE's VPNv4 route (label 557) resolves through both. Checked:
//! the route in Lanyard's CUSTA with both core neighbours as gateways, each
//! path pushing the VPN label; CE flows to the remote site leaving by both
//! core ports under that label, each flow by one port only; and with sw3's
//! far end down, every flow leaving by sw2. The same for a VPNv6 route
//! (2001:db8:b::/48, label 558, next hop the remote PE's IPv4-mapped
//! loopback) and IPv6 flows.
//!
//! Needs root, FRR (zebra, ospfd, ldpd, bgpd) and the modules
//! (`scripts/build-zebra-mpls.sh`), else SKIPPED.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::frame::{mpls_labels, Mac};
use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions, RouterBed, OSPF_CORE_IF};
use testkit::ip;
use testkit::netns::Netns;
use testkit::{l2, RawPort, Switch};

const FPM_PORT: u16 = 2628;
const VPN_LABEL: u32 = 557;
const REMOTE_PREFIX: &str = "198.51.100.0/24";
/// The remote PE's VPNv6 route and its label.
const VPN6_LABEL: u32 = 558;
const REMOTE_PREFIX6: &str = "2001:db8:b::/48";
const FLOWS: u16 = 64;

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The gateways of CUSTA's route to `prefix`, each with the labels it
/// pushes.
fn paths(sw: &Switch, prefix: &str) -> Vec<(String, Vec<u64>)> {
    let fam = if prefix.contains(':') { "ipv6" } else { "ip" };
    let v = sw.show_json(&["show", fam, "route", "vrf", "CUSTA"]);
    v["routes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["prefix"] == prefix && r["installed"] == true)
        .flat_map(|r| r["nexthops"].as_array().into_iter().flatten())
        .map(|h| {
            let labels = h["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| l.as_u64())
                .collect();
            (h["gateway"].as_str().unwrap_or("").to_string(), labels)
        })
        .collect()
}

/// One address family's flows: CE source, remote destination, the VPN
/// label they must carry.
struct Family {
    src: &'static str,
    dst: &'static str,
    label: u32,
}

const V4: Family = Family {
    src: "10.1.0.2",
    dst: "198.51.100.7",
    label: VPN_LABEL,
};
const V6: Family = Family {
    src: "2001:db8:1::2",
    dst: "2001:db8:b::7",
    label: VPN6_LABEL,
};

/// Sends one frame of each of `FLOWS` flows (UDP source ports) from the CE
/// and counts, per flow, the VPN-labelled frames on each core port.
fn send_flows(
    sw: &Switch,
    (ce, m1): (&RawPort, Mac),
    core: [&RawPort; 2],
    seq0: u64,
    fam: &Family,
) -> HashMap<u16, [u32; 2]> {
    for c in core {
        c.drain();
    }
    let r1 = sw.router_mac("sw1");
    let dst = a(fam.dst);
    // Where the destination address and the UDP source port sit in the IP
    // packet.
    let (dst_at, sport_at) = if dst.is_ipv6() {
        (24..40, 40)
    } else {
        (16..20, 20)
    };
    let dst_bytes = match dst {
        IpAddr::V4(d) => d.octets().to_vec(),
        IpAddr::V6(d) => d.octets().to_vec(),
    };
    for k in 0..FLOWS {
        let mut f = ip::udp(&r1, &m1, a(fam.src), dst, 64, seq0 + k as u64, 128);
        // UDP source port: the flow.
        f[14 + sport_at..16 + sport_at].copy_from_slice(&(20_000 + k).to_be_bytes());
        ce.send(&f).unwrap();
    }
    let mut seen: HashMap<u16, [u32; 2]> = HashMap::new();
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let mut any = false;
        for (i, c) in core.iter().enumerate() {
            while let Ok(Some(g)) = c.recv_timeout(Duration::from_millis(20)) {
                any = true;
                let Some((lses, inner)) = mpls_labels(&g) else {
                    continue;
                };
                if lses.len() != 1 || lses[0].0 != fam.label || inner.len() < sport_at + 2 {
                    continue;
                }
                if inner[dst_at.clone()] != dst_bytes[..] {
                    continue;
                }
                let sport = u16::from_be_bytes([inner[sport_at], inner[sport_at + 1]]);
                if (20_000..20_000 + FLOWS).contains(&sport) {
                    seen.entry(sport - 20_000).or_default()[i] += 1;
                }
            }
        }
        let done: u32 = seen.values().map(|c| c[0] + c[1]).sum();
        if done >= FLOWS as u32 && !any {
            break;
        }
    }
    seen
}

#[test]
fn vpn_route_over_two_transport_paths() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd]);
    if !testkit::frr::lanyard_modules_built() {
        return;
    }
    let t0 = Instant::now();
    let bed = RouterBed::new("vpnecm", 3, 1500).expect("namespaces");
    let ns_a = Netns::new("lyvem").unwrap();
    let (t1, t2, t3) = (bed.tester(1), bed.tester(2), bed.tester(3));
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
        t1.exec(args).expect("CE setup");
    }
    // The remote PE has both core links: t3 joins t2's namespace.
    t3.exec(&["ip", "link", "set", "t3", "netns", t2.name()])
        .expect("move t3");
    for args in [
        &["ip", "link", "set", "lo", "up"][..],
        &["ip", "addr", "add", "10.255.0.2/32", "dev", "lo"],
        &["ip", "addr", "add", "10.0.12.2/24", "dev", "t2"],
        &["ip", "addr", "add", "10.0.13.2/24", "dev", "t3"],
        &["ip", "link", "set", "t3", "up"],
    ] {
        t2.exec(args).expect("remote PE setup");
    }
    let sw = testkit::frr::start_vpn_lanyard(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed,
        "vpn-ecmp",
        &[
            ("sw1", "10.1.0.1/24, \"2001:db8:1::1/64\""),
            ("sw2", "10.0.12.1/24"),
            ("sw3", "10.0.13.1/24"),
        ],
        &[("CUSTA", "sw1", ns_a.name())],
        FPM_PORT,
    )
    .expect("start lanyard");
    let tmp_guard = testkit::TempDir::new("vpn-ecmp");
    let tmp = tmp_guard.path().to_path_buf();

    // Lanyard's PE: OSPF and LDP on both core twins; BGP to the remote
    // PE's loopback from sw2's address.
    let pe_cfg = FrrConfig {
        zebra: format!("fpm address 127.0.0.1 port {FPM_PORT}\nno fpm use-next-hop-groups\n"),
        ospfd: format!(
            "interface ly-sw2\n{OSPF_CORE_IF}exit\ninterface ly-sw3\n{OSPF_CORE_IF}exit\n\
             router ospf\n ospf router-id 10.255.0.1\n maximum-paths 8\nexit\n"
        ),
        ldpd: "mpls ldp\n router-id 10.255.0.1\n address-family ipv4\n  \
               discovery transport-address 10.0.12.1\n  \
               interface ly-sw2\n  interface ly-sw3\n exit-address-family\n"
            .into(),
        bgpd: "router bgp 65000\n bgp router-id 10.255.0.1\n no bgp default ipv4-unicast\n \
               neighbor 10.255.0.2 remote-as 65000\n neighbor 10.255.0.2 update-source 10.0.12.1\n \
               neighbor 10.255.0.2 timers connect 1\n address-family ipv4 vpn\n  \
               neighbor 10.255.0.2 activate\n exit-address-family\n address-family ipv6 vpn\n  \
               neighbor 10.255.0.2 activate\n exit-address-family\nexit\n\
               router bgp 65000 vrf CUSTA\n address-family ipv4 unicast\n  \
               label vpn export auto\n  rd vpn export 65000:1\n  rt vpn both 65000:1\n  \
               export vpn\n  import vpn\n exit-address-family\n address-family ipv6 unicast\n  \
               label vpn export auto\n  rd vpn export 65000:1\n  rt vpn both 65000:1\n  \
               export vpn\n  import vpn\n exit-address-family\nexit\n"
            .into(),
        ..FrrConfig::default()
    };
    let pe = FrrInstance::start_with(
        bed.dut.name(),
        "vpn-ecmp-pe",
        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd],
        &pe_cfg,
        &FrrOptions::lanyard_pe(&tmp.join("pe-pw.sock"), [("CUSTA", ns_a.name())]),
    )
    .expect("Lanyard's FRR");
    let remote_cfg = FrrConfig {
        ospfd: format!(
            "interface t2\n{OSPF_CORE_IF}exit\ninterface t3\n{OSPF_CORE_IF}exit\n\
             interface lo\n ip ospf area 0\nexit\n\
             router ospf\n ospf router-id 10.255.0.2\nexit\n"
        ),
        ldpd: "mpls ldp\n router-id 10.255.0.2\n address-family ipv4\n  \
               discovery transport-address 10.255.0.2\n  \
               interface t2\n  interface t3\n exit-address-family\n"
            .into(),
        bgpd: format!(
            "route-map RT permit 10\n set extcommunity rt 65000:1\nexit\n\
             router bgp 65000\n bgp router-id 10.255.0.2\n no bgp default ipv4-unicast\n \
             neighbor 10.0.12.1 remote-as 65000\n neighbor 10.0.12.1 update-source 10.255.0.2\n \
             neighbor 10.0.12.1 timers connect 1\n address-family ipv4 vpn\n  \
             neighbor 10.0.12.1 activate\n  \
             network {REMOTE_PREFIX} rd 65000:1 label {VPN_LABEL} route-map RT\n \
             exit-address-family\n address-family ipv6 vpn\n  neighbor 10.0.12.1 activate\n  \
             neighbor 10.0.12.1 route-map NH6 out\n  \
             network {REMOTE_PREFIX6} rd 65000:1 label {VPN6_LABEL} route-map RT\n \
             exit-address-family\nexit\n\
             route-map NH6 permit 10\n set ipv6 next-hop global ::ffff:10.255.0.2\nexit\n"
        ),
        ..FrrConfig::default()
    };
    let remote = FrrInstance::start_with(
        t2.name(),
        "vpn-ecmp-remote",
        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd],
        &remote_cfg,
        &FrrOptions::lanyard_mpls(&tmp.join("r-pw.sock")),
    )
    .expect("remote PE FRR");

    // 1. Both paths in CUSTA, each pushing the VPN label: the VPNv4 and
    // the VPNv6 route (its next hop the remote PE's IPv4-mapped loopback).
    for (prefix, label) in [(REMOTE_PREFIX, VPN_LABEL), (REMOTE_PREFIX6, VPN6_LABEL)] {
        let want: HashSet<(String, Vec<u64>)> = [
            ("10.0.12.2".to_string(), vec![label as u64]),
            ("10.0.13.2".to_string(), vec![label as u64]),
        ]
        .into();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got: HashSet<_> = paths(&sw, prefix).into_iter().collect();
        while got != want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(300));
            got = paths(&sw, prefix).into_iter().collect();
        }
        assert_eq!(
            got,
            want,
            "CUSTA's {prefix}: {}\nLanyard's FRR:\n{}\nremote:\n{}\nlog:\n{}",
            sw.show_json(&["show", "ip", "route", "vrf", "CUSTA"]),
            pe.vtysh(&[
                "show ip ospf neighbor",
                "show mpls ldp neighbor",
                "show ip route",
                "show ip route vrf CUSTA",
                "show ipv6 route vrf CUSTA",
                "show bgp ipv4 vpn",
                "show bgp ipv6 vpn",
                "show mpls table"
            ]),
            remote.vtysh(&["show bgp summary", "show mpls table"]),
            sw.log()
        );
        eprintln!(
            "  {prefix}: two transport paths in CUSTA {:.1} s after start",
            t0.elapsed().as_secs_f64()
        );
    }

    // 2. Flows spread over both core ports, each flow on one, per family.
    let ce = bed.open(1).unwrap();
    let m1 = t1.mac("t1");
    let core2 = bed.open(2).unwrap();
    let core3 = RawPort::open(t2.name(), "t3").unwrap();
    for fam in [&V4, &V6] {
        // The first packets may wait for the core neighbours' ARP.
        let _ = send_flows(&sw, (&ce, m1), [&core2, &core3], 0, fam);
        std::thread::sleep(Duration::from_millis(500));
        let seen = send_flows(&sw, (&ce, m1), [&core2, &core3], 1_000, fam);
        let per_port = seen
            .values()
            .fold([0u32; 2], |s, c| [s[0] + c[0], s[1] + c[1]]);
        let split: Vec<u16> = seen
            .iter()
            .filter(|(_, c)| c[0] > 0 && c[1] > 0)
            .map(|(k, _)| *k)
            .collect();
        eprintln!(
            "  {FLOWS} flows to {}: {} by sw2, {} by sw3",
            fam.dst, per_port[0], per_port[1]
        );
        assert_eq!(
            seen.len(),
            FLOWS as usize,
            "{} flows delivered: {seen:?}",
            fam.dst
        );
        assert!(split.is_empty(), "flows on both ports: {split:?}");
        assert!(
            per_port[0] >= FLOWS as u32 / 8 && per_port[1] >= FLOWS as u32 / 8,
            "both transport paths carry flows to {}: {per_port:?}",
            fam.dst
        );
    }

    // 3. sw3's far end down: every flow by sw2, both families.
    t2.exec(&["ip", "link", "set", "t3", "down"])
        .expect("t3 down");
    for fam in [&V4, &V6] {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut per_port = [0u32; 2];
        while Instant::now() < deadline {
            let seen = send_flows(&sw, (&ce, m1), [&core2, &core3], 2_000, fam);
            per_port = seen
                .values()
                .fold([0u32; 2], |s, c| [s[0] + c[0], s[1] + c[1]]);
            if per_port == [FLOWS as u32, 0] {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        assert_eq!(
            per_port,
            [FLOWS as u32, 0],
            "to {} with sw3 down: {}",
            fam.dst,
            sw.show_json(&["show", "ip", "route", "vrf", "CUSTA"])
        );
    }
    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop(remote);
    drop(pe);
}
