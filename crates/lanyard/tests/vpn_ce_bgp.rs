//! A customer's own BGP across the VPN (issue 18, docs/vrf.md "Customer
//! routes by BGP"): the CE (FRR bgpd in t1's namespace, AS 65100) peers by
//! eBGP with Lanyard's FRR in VRF CUSTA over Lanyard's routed port sw1
//! (its TAP twin lives in CUSTA's namespace), and Lanyard's FRR exports
//! what the CE announces as VPNv4 to a remote PE (t2's namespace, the bed
//! of `vpn_frr.rs`) and hands the remote PE's VPN route to the CE.
//! Checked: the CE's 203.0.113.0/24 in Lanyard's CUSTA via the CE; the
//! remote PE holding it as a VPN route from Lanyard with a label; the
//! remote PE's 198.51.100.0/24 in CUSTA via the core and in the CE's
//! kernel via Lanyard; a packet under that label on the core port popped
//! into CUSTA and delivered to the CE; a CE packet to the remote prefix
//! leaving the core under the remote PE's VPN label.
//!
//! Needs root, FRR (zebra, ospfd, ldpd, bgpd) and the modules
//! (`scripts/build-zebra-mpls.sh`), else SKIPPED.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::frame::mpls_labels;
use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions, RouterBed};
use testkit::ip;
use testkit::l2;
use testkit::netns::Netns;

const FPM_PORT: u16 = 2627;
const VPN_LABEL: u32 = 556;
const CE_PREFIX: &str = "203.0.113.0/24";
const REMOTE_PREFIX: &str = "198.51.100.0/24";

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The label the remote PE pushes for `prefix` (its `show bgp ipv4 vpn`
/// for the prefix, received from Lanyard), once it has one.
fn remote_out_label(remote: &FrrInstance, prefix: &str) -> Option<u32> {
    let out = remote.vtysh(&[&format!("show bgp ipv4 vpn {prefix} json")]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).ok()?;
    let mut found = None;
    // {"65000:1": {"prefix": …, "paths": [{"remoteLabel": N, …}]}} keyed
    // by route distinguisher.
    for (_, rd) in v.as_object()?.iter() {
        for p in rd["paths"].as_array().into_iter().flatten() {
            if let Some(l) = p["remoteLabel"].as_u64() {
                found = Some(l as u32);
            }
        }
    }
    found
}

#[test]
fn customer_bgp_routes_cross_the_vpn_both_ways() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd]);
    if !testkit::frr::lanyard_modules_built() {
        return;
    }
    let t0 = Instant::now();
    let bed = RouterBed::new("vpnce", 2, 1500).expect("namespaces");
    let ns_a = Netns::new("lyvce").unwrap();
    let (t1, t2) = (bed.tester(1), bed.tester(2));
    for args in [
        &["ip", "link", "set", "lo", "up"][..],
        &["ip", "addr", "add", "10.1.0.2/24", "dev", "t1"],
        // The customer's site network, announced by the CE.
        &["ip", "addr", "add", "203.0.113.1/24", "dev", "lo"],
    ] {
        t1.exec(args).expect("CE setup");
    }
    testkit::frr::address_remote_pe(t2).expect("remote PE setup");
    let sw = testkit::frr::start_vpn_lanyard(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed,
        "vpn-ce-bgp",
        &[("sw1", "10.1.0.1/24"), ("sw2", "10.0.12.1/24")],
        &[("CUSTA", "sw1", ns_a.name())],
        FPM_PORT,
    )
    .expect("start lanyard");
    let tmp_guard = testkit::TempDir::new("vpn-ce-bgp");
    let tmp = tmp_guard.path().to_path_buf();

    // Lanyard's PE: VRF CUSTA has an eBGP session to the CE beside its
    // VPN import and export.
    let pe_cfg = testkit::frr::lanyard_vpn_pe_config(
        FPM_PORT,
        "ipv4",
        "router bgp 65000 vrf CUSTA\n no bgp ebgp-requires-policy\n \
         neighbor 10.1.0.2 remote-as 65100\n neighbor 10.1.0.2 timers connect 1\n \
         address-family ipv4 unicast\n  label vpn export auto\n  rd vpn export 65000:1\n  \
         rt vpn both 65000:1\n  export vpn\n  import vpn\n exit-address-family\nexit\n",
    );
    let pe = FrrInstance::start_with(
        bed.dut.name(),
        "vpn-ce-pe",
        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd],
        &pe_cfg,
        &FrrOptions::lanyard_pe(&tmp.join("pe-pw.sock"), [("CUSTA", ns_a.name())]),
    )
    .expect("Lanyard's FRR");
    let remote =
        testkit::frr::remote_vpn_pe(t2, "vpn-ce-remote", &tmp, "ipv4", REMOTE_PREFIX, VPN_LABEL)
            .expect("remote PE FRR");
    // The CE: a plain FRR router in t1's namespace (its zebra installs what
    // it learns into that namespace's kernel).
    let ce_cfg = FrrConfig {
        bgpd: "router bgp 65100\n bgp router-id 10.1.0.2\n no bgp ebgp-requires-policy\n \
               neighbor 10.1.0.1 remote-as 65000\n neighbor 10.1.0.1 timers connect 1\n \
               address-family ipv4 unicast\n  network 203.0.113.0/24\n \
               exit-address-family\nexit\n"
            .into(),
        ..FrrConfig::default()
    };
    let ce = FrrInstance::start_with(
        t1.name(),
        "vpn-ce-ce",
        &[Daemon::Zebra, Daemon::Bgpd],
        &ce_cfg,
        &FrrOptions::default(),
    )
    .expect("CE FRR");

    // 1. Both routes in Lanyard's CUSTA: the CE's by eBGP, the remote
    // PE's by the VPN.
    testkit::frr::wait_vpn_route(&sw, &pe, &remote, "CUSTA", REMOTE_PREFIX, "10.0.12.2");
    let ce_wait = testkit::frr::wait_vpn_route(&sw, &pe, &ce, "CUSTA", CE_PREFIX, "10.1.0.2");
    eprintln!(
        "  CE route in Lanyard's CUSTA {:.1} s after start ({ce_wait:.1?} after the VPN route)",
        t0.elapsed().as_secs_f64()
    );

    // 2. The CE learned the remote site through Lanyard.
    let deadline = Instant::now() + Duration::from_secs(30);
    let ce_route = || {
        let out = t1
            .exec(&["ip", "-4", "route", "show", REMOTE_PREFIX])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        out.contains("via 10.1.0.1").then_some(out)
    };
    while ce_route().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        ce_route().is_some(),
        "the CE has no route to {REMOTE_PREFIX} via Lanyard\nCE:\n{}\nLanyard's FRR:\n{}",
        ce.vtysh(&["show bgp summary", "show ip bgp", "show ip route"]),
        pe.vtysh(&[
            "show bgp vrf CUSTA summary",
            "show bgp vrf CUSTA ipv4 unicast"
        ])
    );

    // 3. The remote PE holds the CE's route as a VPN route with a label.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut label = remote_out_label(&remote, CE_PREFIX);
    while label.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        label = remote_out_label(&remote, CE_PREFIX);
    }
    let Some(label) = label else {
        panic!(
            "the remote PE has no labelled VPN route to {CE_PREFIX}\nremote:\n{}\nLanyard's FRR:\n{}",
            remote.vtysh(&[
                "show bgp summary",
                "show bgp ipv4 vpn",
                &format!("show bgp ipv4 vpn {CE_PREFIX} json")
            ]),
            pe.vtysh(&["show bgp ipv4 vpn", "show mpls table"])
        );
    };
    eprintln!("  remote PE pushes label {label} toward {CE_PREFIX}");

    // 4. A packet under that label on the core port: popped into CUSTA,
    // routed to the CE.
    let p1 = bed.open(1).unwrap();
    let p2 = bed.open(2).unwrap();
    let (r1, r2) = (sw.router_mac("sw1"), sw.router_mac("sw2"));
    let (m1, m2) = (t1.mac("t1"), t2.mac("t2"));
    let mut delivered = None;
    // The first packet may wait for the CE's ARP.
    for seq in 0..20u64 {
        p1.drain();
        let inner = ip::udp(&r2, &m2, a("10.0.12.2"), a("203.0.113.9"), 64, seq, 128);
        let mut f = inner[..12].to_vec();
        f.extend_from_slice(&[0x88, 0x47]);
        f.extend_from_slice(&(label << 12 | 0x100 | 64).to_be_bytes());
        f.extend_from_slice(&inner[14..]);
        p2.send(&f).unwrap();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until && delivered.is_none() {
            let Some(g) = p1.recv_timeout(Duration::from_millis(100)).expect("recv") else {
                continue;
            };
            if g.len() > 34 && g[12..14] == [0x08, 0x00] && g[30..34] == [203, 0, 113, 9] {
                delivered = Some(g);
            }
        }
        if delivered.is_some() {
            break;
        }
    }
    let Some(g) = delivered else {
        panic!(
            "nothing under label {label} reached the CE\nmpls: {}\nroutes: {}\nlog:\n{}",
            sw.show_json(&["show", "mpls", "table"]),
            sw.show_json(&["show", "ip", "route", "vrf", "CUSTA"]),
            sw.log()
        );
    };
    assert_eq!(&g[0..6], &m1[..], "to the CE's MAC");
    assert_eq!(&g[6..12], &r1[..], "from Lanyard's sw1");
    assert_eq!(g[22], 63, "IP TTL after one hop");

    // 5. And the other way: the CE's packet to the remote site leaves the
    // core under the remote PE's VPN label.
    let mut labelled = None;
    for seq in 0..20u64 {
        p2.drain();
        let f = ip::udp(
            &r1,
            &m1,
            a("203.0.113.1"),
            a("198.51.100.7"),
            64,
            100 + seq,
            128,
        );
        p1.send(&f).unwrap();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until && labelled.is_none() {
            let Some(g) = p2.recv_timeout(Duration::from_millis(100)).expect("recv") else {
                continue;
            };
            if let Some((lses, _)) = mpls_labels(&g) {
                labelled = Some(lses);
            }
        }
        if labelled.is_some() {
            break;
        }
    }
    let lses = labelled.expect("no labelled frame from the CE on the core");
    assert_eq!(
        lses.iter().map(|l| l.0).collect::<Vec<_>>(),
        [VPN_LABEL],
        "the remote PE's VPN label alone (P-less: transport implicit null)"
    );
    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop(ce);
    drop(remote);
    drop(pe);
}
