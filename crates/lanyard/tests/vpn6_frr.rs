//! VPNv6 with a real remote PE (issue 18, docs/vrf.md "VPNv6"): as
//! `vpn_frr.rs` for VPNv4, Lanyard's FRR (zebra `-n` with both modules,
//! ospfd, ldpd, bgpd) peers over the core port sw2 (default VRF, IPv4
//! core) with a tester FRR PE in t2's namespace. The remote PE originates
//! the VPNv6 route 2001:db8:b::/48 (RD 65000:1, RT 65000:1, VPN label
//! 556); its BGP next hop is its IPv4 loopback, IPv4-mapped
//! (::ffff:10.255.0.2), which zebra resolves over OSPF and LDP (implicit
//! null: P-less). Lanyard's VRF CUSTA imports it and exports its own IPv6
//! subnet with a per-VRF label (`label vpn export auto`). Checked:
//!
//! * the route in `show ipv6 route vrf CUSTA` via the IPv4 core
//!   neighbour 10.0.12.2 with [556] (the IPv4 gateway reaches Lanyard
//!   only through `zebra_lanyard_fpm.so`: stock FRR leaves it out);
//! * an IPv6 frame from the CE (t1, sw1, VRF CUSTA) leaves sw2 to the
//!   remote PE's MAC with [556] (S, label TTL 63) over IPv6 hop limit
//!   63, parsed here and by tshark;
//! * a hand-made frame on the core port carrying CUSTA's IPv6 VPN label
//!   (read from `show mpls table`: a pop into CUSTA) over IPv6 reaches
//!   the CE 2001:db8:1::2 on sw1 (CE resolved through the VRF's twin),
//!   hop limit 63, and nothing else leaves the core port.
//!
//! `vpnv6_over_an_ipv6_core` runs the same over an IPv6-only core:
//! OSPFv3, LDPv6 (session between IPv6 transport addresses), the BGP
//! session over IPv6 and the VPNv6 route's next hop the remote PE's IPv6
//! loopback 2001:db8:ff::2, which Lanyard's CUSTA gets via OSPFv3's
//! link-local next hop on sw2.
//!
//! Needs root, FRR (zebra, ospfd or ospf6d, ldpd, bgpd) and the modules
//! (`scripts/build-zebra-mpls.sh`), else SKIPPED.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions, RouterBed};
use testkit::ip;
use testkit::netns::Netns;
use testkit::{l2, RawPort};

const FPM_PORT: u16 = 2622;
const VPN_LABEL: u32 = 556;
const REMOTE_PREFIX: &str = "2001:db8:b::/48";

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The first frame on `port` within `wait` that `want` accepts.
fn first(port: &RawPort, wait: Duration, want: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if let Ok(Some(f)) = port.recv_timeout(Duration::from_millis(100)) {
            if want(&f) {
                return Some(f);
            }
        }
    }
    None
}

/// The test frame `seq` (IPv6, checksums good) of the UDP flow.
fn is_seq(f: &[u8], seq: u64) -> bool {
    ip::parse(f).is_some_and(|p| p.src.is_ipv6() && p.seq == Some(seq) && p.l4_ok)
}

/// The provider core between the two PEs.
#[derive(Clone, Copy, PartialEq)]
enum Core {
    /// IPv4: OSPFv2, LDP over IPv4, the BGP session and next hop IPv4
    /// (IPv4-mapped in the VPNv6 route).
    V4,
    /// IPv6 only: OSPFv3, LDPv6, the BGP session and the VPNv6 route's
    /// next hop global IPv6 (the remote PE's loopback), resolved through
    /// OSPFv3's link-local next hop.
    V6,
}

#[test]
fn vpnv6_routes_push_the_vpn_label_and_pop_into_the_vrf() {
    run(Core::V4);
}

#[test]
fn vpnv6_over_an_ipv6_core() {
    run(Core::V6);
}

/// Lanyard's PE over an IPv6-only core (see [`Core::V6`]): its FRR's
/// config, beside `lanyard_vpn_pe_config` for the IPv4 core.
fn v6_core_pe_config(vrfs: &str) -> FrrConfig {
    FrrConfig {
        zebra: format!("fpm address 127.0.0.1 port {FPM_PORT}\nno fpm use-next-hop-groups\n"),
        ospf6d: format!(
            "interface ly-sw2\n{OSPF6_IF}exit\nrouter ospf6\n ospf6 router-id 10.255.0.1\nexit\n"
        ),
        ldpd: "mpls ldp\n router-id 10.255.0.1\n address-family ipv6\n  \
               discovery transport-address 2001:db8:12::1\n  interface ly-sw2\n \
               exit-address-family\n"
            .into(),
        bgpd: format!(
            "router bgp 65000\n bgp router-id 10.255.0.1\n no bgp default ipv4-unicast\n \
             neighbor 2001:db8:ff::2 remote-as 65000\n \
             neighbor 2001:db8:ff::2 update-source 2001:db8:12::1\n \
             neighbor 2001:db8:ff::2 timers connect 1\n address-family ipv6 vpn\n  \
             neighbor 2001:db8:ff::2 activate\n exit-address-family\nexit\n{vrfs}"
        ),
        ..FrrConfig::default()
    }
}

/// The remote PE over the IPv6-only core: loopback 2001:db8:ff::2 (the
/// BGP next hop), announcing `REMOTE_PREFIX` with `VPN_LABEL`.
fn v6_core_remote_config() -> FrrConfig {
    FrrConfig {
        ospf6d: format!(
            "interface t2\n{OSPF6_IF}exit\ninterface lo\n ipv6 ospf6 area 0\nexit\n\
             router ospf6\n ospf6 router-id 10.255.0.2\nexit\n"
        ),
        ldpd: "mpls ldp\n router-id 10.255.0.2\n address-family ipv6\n  \
               discovery transport-address 2001:db8:ff::2\n  interface t2\n \
               exit-address-family\n"
            .into(),
        bgpd: format!(
            "route-map RT permit 10\n set extcommunity rt 65000:1\nexit\n\
             router bgp 65000\n bgp router-id 10.255.0.2\n no bgp default ipv4-unicast\n \
             neighbor 2001:db8:12::1 remote-as 65000\n \
             neighbor 2001:db8:12::1 update-source 2001:db8:ff::2\n \
             neighbor 2001:db8:12::1 timers connect 1\n address-family ipv6 vpn\n  \
             neighbor 2001:db8:12::1 activate\n  \
             network {REMOTE_PREFIX} rd 65000:1 label {VPN_LABEL} route-map RT\n \
             exit-address-family\nexit\n"
        ),
        ..FrrConfig::default()
    }
}

const OSPF6_IF: &str = " ipv6 ospf6 area 0\n ipv6 ospf6 network point-to-point\n \
                        ipv6 ospf6 hello-interval 1\n ipv6 ospf6 dead-interval 4\n";

fn run(core: Core) {
    let (ospf, prefix, ns) = match core {
        Core::V4 => (Daemon::Ospfd, "vpn6f", "lyv6a"),
        Core::V6 => (Daemon::Ospf6d, "vpn6c", "lyv6c"),
    };
    testkit::require_frr!(&[Daemon::Zebra, ospf, Daemon::Ldpd, Daemon::Bgpd]);
    if !testkit::frr::lanyard_modules_built() {
        return;
    }
    let t0 = Instant::now();
    let bed = RouterBed::new(prefix, 2, 1500).expect("namespaces");
    let ns_a = Netns::new(ns).unwrap();
    let t1 = bed.tester(1);
    let t2 = bed.tester(2);
    for args in [
        &["ip", "addr", "add", "10.1.0.2/24", "dev", "t1"][..],
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
    match core {
        Core::V4 => testkit::frr::address_remote_pe(t2).expect("remote PE setup"),
        Core::V6 => {
            t2.sysctl("net.ipv6.conf.lo.disable_ipv6", "0")
                .expect("IPv6 on the remote PE's loopback");
            for args in [
                &["ip", "link", "set", "lo", "up"][..],
                &["ip", "addr", "add", "2001:db8:ff::2/128", "dev", "lo"],
                &[
                    "ip",
                    "addr",
                    "add",
                    "2001:db8:12::2/64",
                    "dev",
                    "t2",
                    "nodad",
                ],
            ] {
                t2.exec(args).expect("remote PE setup");
            }
        }
    }
    let core_address = match core {
        Core::V4 => "10.0.12.1/24",
        Core::V6 => "\"2001:db8:12::1/64\"",
    };
    let sw = testkit::frr::start_vpn_lanyard(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed,
        "vpn6-frr",
        &[
            ("sw1", r#"10.1.0.1/24, "2001:db8:1::1/64""#),
            ("sw2", core_address),
        ],
        &[("CUSTA", "sw1", ns_a.name())],
        FPM_PORT,
    )
    .expect("start lanyard");
    // Its own per core: the two tests run at once in one process.
    let tmp_guard = testkit::TempDir::new(prefix);
    let tmp = tmp_guard.path().to_path_buf();

    // Lanyard's PE: IPv6 VPN over IPv4 sessions; CUSTA imports the remote
    // route and exports its connected IPv6 subnet with a per-VRF label.
    let vrfs = "router bgp 65000 vrf CUSTA\n address-family ipv6 unicast\n  \
                redistribute connected\n  label vpn export auto\n  rd vpn export 65000:1\n  \
                rt vpn both 65000:1\n  export vpn\n  import vpn\n exit-address-family\nexit\n";
    let pe_cfg = match core {
        Core::V4 => testkit::frr::lanyard_vpn_pe_config(FPM_PORT, "ipv6", vrfs),
        Core::V6 => v6_core_pe_config(vrfs),
    };
    let pe_opts = FrrOptions::lanyard_pe(&tmp.join("pe-pw.sock"), [("CUSTA", ns_a.name())]);
    let pe = FrrInstance::start_with(
        bed.dut.name(),
        "vpn6-pe",
        &[Daemon::Zebra, ospf, Daemon::Ldpd, Daemon::Bgpd],
        &pe_cfg,
        &pe_opts,
    )
    .expect("Lanyard's FRR");
    let remote = match core {
        Core::V4 => {
            testkit::frr::remote_vpn_pe(t2, "vpn6-remote", &tmp, "ipv6", REMOTE_PREFIX, VPN_LABEL)
        }
        Core::V6 => FrrInstance::start_with(
            t2.name(),
            "vpn6-remote",
            &[Daemon::Zebra, ospf, Daemon::Ldpd, Daemon::Bgpd],
            &v6_core_remote_config(),
            &FrrOptions::lanyard_mpls(&tmp.join("r-pw.sock")),
        ),
    }
    .expect("remote PE FRR");
    // The remote PE as Lanyard's next hop: its core address, or for the
    // IPv6 core OSPFv3's next hop, its link-local address.
    let gateway = match core {
        Core::V4 => "10.0.12.2".to_string(),
        Core::V6 => {
            let out = t2
                .exec(&[
                    "ip", "-6", "-o", "addr", "show", "dev", "t2", "scope", "link",
                ])
                .expect("t2's link-local address");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.split_whitespace()
                .skip_while(|w| *w != "inet6")
                .nth(1)
                .and_then(|a| a.split('/').next())
                .unwrap_or_else(|| panic!("no link-local address on t2: {text}"))
                .to_string()
        }
    };

    let dump = || {
        let d = pe.vtysh(&[
            "show ip ospf neighbor",
            "show ipv6 ospf6 neighbor",
            "show mpls ldp neighbor",
            "show bgp summary",
            "show bgp ipv6 vpn",
            "show ipv6 route vrf CUSTA",
            "show mpls table",
        ]);
        let r = remote.vtysh(&["show bgp summary", "show bgp ipv6 vpn", "show mpls table"]);
        format!(
            "{}\n{}\nLanyard's FRR:\n{d}\nremote PE:\n{r}\nlog:\n{}",
            sw.show_json(&["show", "ipv6", "route", "vrf", "CUSTA"]),
            sw.show_json(&["show", "mpls", "table"]),
            sw.log()
        )
    };

    // 1. The imported VPNv6 route: via the IPv4 core neighbour.
    testkit::frr::wait_vpn_route(&sw, &pe, &remote, "CUSTA", REMOTE_PREFIX, &gateway);
    eprintln!(
        "  VPNv6 route in Lanyard's CUSTA {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );
    if core == Core::V6 {
        // The transport is LDPv6's: a session between IPv6 transport
        // addresses, and its (implicit-null) label for the loopback.
        let ldp = pe.vtysh(&["show mpls ldp neighbor", "show mpls ldp binding"]);
        assert!(
            ldp.contains("ipv6")
                && ldp.contains("OPERATIONAL")
                && ldp.contains("2001:db8:ff::2/128"),
            "no LDPv6 session and binding for the remote loopback:\n{ldp}"
        );
    }
    let text = sw
        .cli(&["show", "ipv6", "route", "vrf", "CUSTA"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let line = text.lines().find(|l| l.contains(REMOTE_PREFIX));
    assert!(
        line.is_some_and(|l| l.contains(&gateway) && l.contains("sw2")),
        "show ipv6 route vrf CUSTA:\n{text}"
    );
    // Never in the default VRF's table.
    let global = sw.show_json(&["show", "ipv6", "route"]);
    assert!(
        !global.to_string().contains("2001:db8:b::"),
        "the VPN route leaked into the default table: {global}"
    );

    // 2. CE → core: [556] over IPv6.
    let p1 = bed.open(1).unwrap();
    let p2 = bed.open(2).unwrap();
    let r1 = sw.router_mac("sw1");
    let r2 = sw.router_mac("sw2");
    let m1 = t1.mac("t1");
    let m2 = t2.mac("t2");
    let mut got = None;
    for seq in 0..20u64 {
        p2.drain();
        let f = ip::udp(
            &r1,
            &m1,
            a("2001:db8:1::2"),
            a("2001:db8:b::7"),
            64,
            seq,
            128,
        );
        p1.send(&f).unwrap();
        got = first(&p2, Duration::from_millis(300), |f| {
            f.len() > 18 && f[12..14] == [0x88, 0x47]
        });
        if got.is_some() {
            break;
        }
    }
    let Some(f) = got else {
        panic!(
            "no labelled frame on the core\nmpls: {}\n{}",
            sw.show_json(&["show", "mpls", "forwarding"]),
            dump()
        );
    };
    assert_eq!(&f[0..6], &m2, "to the remote PE's MAC");
    assert_eq!(&f[6..12], &r2, "from sw2's MAC");
    let w = u32::from_be_bytes([f[14], f[15], f[16], f[17]]);
    assert_eq!(
        (w >> 12, w >> 8 & 1, w & 0xff),
        (VPN_LABEL, 1, 63),
        "one entry: the VPN label (P-less: transport implicit null), S, TTL"
    );
    let inner = &f[18..];
    assert_eq!(inner[0] >> 4, 6, "IPv6 under the label");
    assert_eq!(inner[7], 63, "hop limit");
    assert_eq!(
        &inner[24..40],
        &"2001:db8:b::7"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()
    );
    match testkit::tshark::fields(
        &f,
        &[
            "mpls.label",
            "mpls.bottom",
            "mpls.ttl",
            "ipv6.dst",
            "ipv6.hlim",
        ],
        &[],
    ) {
        Ok(fs) => assert_eq!(
            fs,
            [&*VPN_LABEL.to_string(), "1", "63", "2001:db8:b::7", "63"],
            "tshark's reading"
        ),
        Err(e) if !testkit::tshark::available() => eprintln!("  tshark not run: {e}"),
        Err(e) => panic!("tshark: {e}"),
    }

    // 3. Core → CE: CUSTA's IPv6 VPN label, popped and routed in CUSTA.
    let vpn6_label = {
        let t = sw.show_json(&["show", "mpls", "table"]);
        t["labels"].as_array().and_then(|l| {
            l.iter()
                .find(|e| e["action"] == "pop-lookup" && e["vrf"] == "CUSTA")?["in_label"]
                .as_u64()
        })
    };
    let Some(vpn6_label) = vpn6_label else {
        panic!("no pop into CUSTA in Lanyard's label table\n{}", dump());
    };
    let mut arrived = None;
    for seq in 100..120u64 {
        p1.drain();
        p2.drain();
        let inner = ip::udp(
            &r2,
            &m2,
            a("2001:db8:b::7"),
            a("2001:db8:1::2"),
            64,
            seq,
            128,
        );
        let mut f = inner[..12].to_vec();
        f.extend_from_slice(&[0x88, 0x47]);
        f.extend_from_slice(&((vpn6_label as u32) << 12 | 0x100 | 64).to_be_bytes());
        f.extend_from_slice(&inner[14..]);
        p2.send(&f).unwrap();
        // The first ones may wait for the CE's neighbour entry (resolved
        // through CUSTA's twin).
        arrived = first(&p1, Duration::from_millis(300), |g| is_seq(g, seq));
        if arrived.is_some() {
            break;
        }
    }
    let Some(g) = arrived else {
        panic!(
            "nothing reached the CE over label {vpn6_label}\nmpls: {}\n{}",
            sw.show_json(&["show", "mpls", "forwarding"]),
            dump()
        );
    };
    assert_eq!(&g[0..6], &m1, "to the CE's MAC");
    assert_eq!(&g[6..12], &r1, "from sw1's MAC");
    assert_eq!(g[14 + 7], 63, "hop limit: from the label's TTL, minus one");
    assert_eq!(
        &g[14 + 24..14 + 40],
        &"2001:db8:1::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()
    );
    match testkit::tshark::fields(&g, &["ipv6.dst", "ipv6.hlim", "udp.dstport"], &[]) {
        Ok(fs) => assert_eq!(
            fs,
            ["2001:db8:1::2", "63", &*ip::TEST_DPORT.to_string()],
            "tshark's reading"
        ),
        Err(e) if !testkit::tshark::available() => eprintln!("  tshark not run: {e}"),
        Err(e) => panic!("tshark: {e}"),
    }
    // Once resolved, the next labelled frames go straight to the CE and
    // nothing goes back out of the core port.
    p2.drain();
    for seq in 200..210u64 {
        let inner = ip::udp(
            &r2,
            &m2,
            a("2001:db8:b::7"),
            a("2001:db8:1::2"),
            64,
            seq,
            128,
        );
        let mut f = inner[..12].to_vec();
        f.extend_from_slice(&[0x88, 0x47]);
        f.extend_from_slice(&((vpn6_label as u32) << 12 | 0x100 | 64).to_be_bytes());
        f.extend_from_slice(&inner[14..]);
        p2.send(&f).unwrap();
        assert!(
            first(&p1, Duration::from_millis(500), |g| is_seq(g, seq)).is_some(),
            "labelled frame {seq} did not reach the CE"
        );
    }
    assert!(
        first(&p2, Duration::from_millis(200), |f| {
            ip::parse(f).is_some_and(|p| p.seq.is_some_and(|s| s >= 200))
        })
        .is_none(),
        "a popped frame went back out of the core port"
    );
    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop(remote);
    drop(pe);
}
