//! L3VPN end to end across a P router (issue 18 item 3, docs/vrf.md
//! "L3VPN"): two Lanyard PEs and a Lanyard P, each with its own FRR.
//!
//! ```text
//!  ce1a ─ ca ┐                                  ┌ ca ─ ce2a
//!            [pe1] up ═ br1 ═ w [p] e ═ br2 ═ up [pe2]
//!  ce1b ─ cb ┘ up2 ══ br3 ══ w2 ┘               └ cb ─ ce2b
//! ```
//!
//! * PE: Lanyard with VRFs CUSTA (`ca`) and CUSTB (`cb`), both with the
//!   same customer addresses; FRR zebra `-n` with both modules, ospfd and
//!   ldpd in the default VRF (the loopback a /32 on the uplink), bgpd with
//!   VPNv4 and VPNv6 to the other PE (RT 65000:1 / 65000:2, `label vpn
//!   export auto`, `redistribute connected`; VPNv6's next hop set to the
//!   IPv4-mapped loopback by a route map: FRR 8.4 sends the uplink's
//!   link-local address otherwise). ldpd advertises explicit null for the
//!   PE's own addresses, so both core links carry two labels.
//! * P: Lanyard with two routed ports, FRR zebra, ospfd and ldpd only: it
//!   swaps the transport label (to explicit null toward the far PE).
//! * CEs: plain namespaces, 10.K.0.2/24 and 2001:db8:K::2/64 behind PE K
//!   in both customers.
//! * pe1 has a second link to the P (`up2`–`w2`, OSPF cost 100): the
//!   backup path.
//! * The core links run through bridges in a namespace of their own
//!   (`br1`–`br3`), where raw sockets see every frame on the wire whatever
//!   port backend the switches use.
//!
//! Checked: the VPN routes in both PEs' VRFs via the P; the kernel CEs
//! ping across both ways (each customer), and each far PE's own address
//! in their VRF (answered through its catch-all route); UDP test frames from each CE
//! reach its own customer's far CE only (TTL, checksum), carrying
//! [transport, VPN] on PE→P (the P's label for the far PE's loopback, then
//! the far PE's VPN label of that VRF) and [explicit null, VPN] on P→PE,
//! parsed from the bridge captures and by tshark; Lanyard's P counted the
//! packets on its swap entries. VPNv6 between the two Lanyard PEs: the
//! IPv6 routes in both PEs' VRFs via the P's IPv4 address, the CEs ping
//! across over IPv6 (each customer, both ways), pe1's echo requests
//! carry [transport, a VPN label pe2 pops into a VRF] over IPv6. Then pe1's link to the P is cut: zebra
//! re-resolves the VPN routes through the backup link, Lanyard's VRFs
//! follow, and the customers' frames leave by it with [transport, VPN].
//! Fails without Lanyard punting a VPN-popped packet whose CE is not yet
//! resolved to the VRF's twin: nothing resolves a static CE, no ping.
//! About 30 s (2 cores shared, load 6–10: 30–39 s).
//!
//! Needs root, FRR (zebra, ospfd, ldpd, bgpd) and the modules
//! (`scripts/build-zebra-mpls.sh`), else SKIPPED.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::frame::mpls_labels;
use testkit::frame::Mac;
use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions};
use testkit::netns::{veth, Netns};
use testkit::{ip, l2, RawPort, Switch};

const FPM_MODULE: &str = "/usr/local/lib/lanyard/zebra_lanyard_fpm.so";
const MPLS_MODULE: &str = "/usr/local/lib/lanyard/zebra_lanyard.so";
const FPM_PORT: u16 = 2620;
const CUSTS: [&str; 2] = ["CUSTA", "CUSTB"];

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(x) = f() {
            return Some(x);
        }
        if Instant::now() >= end {
            eprintln!("  timed out waiting for {what}");
            return None;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The loopback of router `k` (1 = pe1, 2 = pe2, 3 = p).
fn lo(k: u8) -> String {
    format!("10.255.0.{k}")
}

const OSPF_IF: &str = " ip ospf network point-to-point\n ip ospf hello-interval 1\n \
                       ip ospf dead-interval 4\n";

/// PE `k`'s Lanyard: the customer ports in their VRFs (same addresses in
/// both), the uplink with the loopback.
fn pe_yaml(k: u8, vrf_ns: &[&Netns; 2]) -> String {
    format!(
        r#"
switch:
  name: pe{k}
ports:
  - {{name: ca, mode: routed, addresses: [10.{k}.0.1/24, "2001:db8:{k}::1/64"]}}
  - {{name: cb, mode: routed, addresses: [10.{k}.0.1/24, "2001:db8:{k}::1/64"]}}
  - {{name: up, mode: routed, addresses: [10.0.{k}.{me}/30, {lo}/32]}}
{backup}vrfs:
  - {{name: CUSTA, interfaces: [ca], rd: "65000:{k}1", table: 1001, namespace: {na}}}
  - {{name: CUSTB, interfaces: [cb], rd: "65000:{k}2", table: 1002, namespace: {nb}}}
routing:
  fpm: 127.0.0.1:{FPM_PORT}
"#,
        // pe1 is .1 on 10.0.1.0/30, pe2 .2 on 10.0.2.0/30 (the P the other).
        me = if k == 1 { 1 } else { 2 },
        // pe1's second, backup link to the P.
        backup = if k == 1 {
            "  - {name: up2, mode: routed, addresses: [10.0.4.1/30]}\n"
        } else {
            ""
        },
        lo = lo(k),
        na = vrf_ns[0].name(),
        nb = vrf_ns[1].name(),
    )
}

/// The core interfaces of PE `k`'s FRR.
fn pe_ifs(k: u8) -> &'static [&'static str] {
    if k == 1 {
        &["ly-up", "ly-up2"]
    } else {
        &["ly-up"]
    }
}

fn p_yaml() -> String {
    format!(
        r#"
switch:
  name: p
ports:
  - {{name: w, mode: routed, addresses: [10.0.1.2/30, {lo}/32]}}
  - {{name: e, mode: routed, addresses: [10.0.2.1/30]}}
  - {{name: w2, mode: routed, addresses: [10.0.4.2/30]}}
routing:
  fpm: 127.0.0.1:{FPM_PORT}
"#,
        lo = lo(3)
    )
}

fn ospfd(k: u8, ifs: &[&str]) -> String {
    let mut s = String::new();
    for i in ifs {
        // pe1's second link to the P is the backup path.
        let cost = if i.ends_with("2") {
            " ip ospf cost 100\n"
        } else {
            ""
        };
        s.push_str(&format!("interface {i}\n{OSPF_IF}{cost}exit\n"));
    }
    s.push_str(&format!(
        "router ospf\n ospf router-id {}\n network 10.0.0.0/16 area 0\n redistribute connected\nexit\n",
        lo(k)
    ));
    s
}

fn ldpd(k: u8, ifs: &[&str], explicit_null: bool) -> String {
    let mut s = format!(
        "mpls ldp\n router-id {lo}\n address-family ipv4\n  discovery transport-address {lo}\n",
        lo = lo(k)
    );
    if explicit_null {
        s.push_str("  label local advertise explicit-null\n");
    }
    for i in ifs {
        s.push_str(&format!("  interface {i}\n"));
    }
    s.push_str(" exit-address-family\nexit\n");
    s
}

fn pe_bgpd(k: u8) -> String {
    let peer = lo(3 - k);
    let mut s = format!(
        "router bgp 65000\n bgp router-id {me}\n no bgp default ipv4-unicast\n \
         neighbor {peer} remote-as 65000\n neighbor {peer} update-source {me}\n \
         neighbor {peer} timers connect 1\n neighbor {peer} advertisement-interval 0\n \
         address-family ipv4 vpn\n  neighbor {peer} activate\n exit-address-family\n \
         address-family ipv6 vpn\n  neighbor {peer} activate\n  neighbor {peer} route-map NH6 out\n \
         exit-address-family\nexit\n",
        me = lo(k)
    );
    // FRR 8.4 has no 6VPE next hop (RFC 4659 §3.2.1.2, FRR ≥ 10): over
    // an IPv4 session it sends the uplink twin's IPv6 link-local address,
    // which the far PE cannot reach. The route map sets the IPv4-mapped
    // loopback, which zebra resolves over the IPv4 core (docs/vrf.md).
    s.insert_str(
        0,
        &format!(
            "route-map NH6 permit 10\n set ipv6 next-hop global ::ffff:{}\nexit\n",
            lo(k)
        ),
    );
    // VPNv4 and VPNv6 per VRF, over the IPv4 core (the VPNv6 next hop
    // is the far PE's IPv4 loopback, IPv4-mapped).
    for (i, v) in CUSTS.iter().enumerate() {
        s.push_str(&format!("router bgp 65000 vrf {v}\n"));
        for af in ["ipv4", "ipv6"] {
            s.push_str(&format!(
                " address-family {af} unicast\n  redistribute connected\n  \
                 label vpn export auto\n  rd vpn export 65000:{k}{n}\n  rt vpn both 65000:{n}\n  \
                 export vpn\n  import vpn\n exit-address-family\n",
                n = i + 1
            ));
        }
        s.push_str("exit\n");
    }
    s
}

/// The VPN label Lanyard pops into `vrf` (bgpd's per-VRF label).
fn vpn_label(sw: &Switch, vrf: &str) -> Option<u32> {
    let v = sw.show_json(&["show", "mpls", "table"]);
    v["labels"]
        .as_array()?
        .iter()
        .find(|e| e["action"] == "pop-lookup" && e["vrf"] == vrf && e["installed"] == true)
        .and_then(|e| e["in_label"].as_u64())
        .map(|l| l as u32)
}

/// The in-label of Lanyard's swap entry whose (single) path pushes
/// `out`, and its packet count.
fn swap_to(sw: &Switch, out: u32) -> Vec<(u32, u64)> {
    let v = sw.show_json(&["show", "mpls", "table"]);
    v["labels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["hops"].as_array().is_some_and(|h| {
                h.len() == 1 && h[0]["out_labels"].as_array() == Some(&vec![Value::from(out)])
            })
        })
        .map(|e| {
            (
                e["in_label"].as_u64().unwrap_or(0) as u32,
                e["packets"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Test-frame sequence number of an IPv4 packet (no Ethernet header).
fn seq_of(ipp: &[u8]) -> Option<u64> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(ipp);
    ip::parse(&f)?.seq
}

/// tshark's view of one frame: each field's values (comma-joined).
fn tshark(frame: &[u8], fields: &[&str]) -> Option<Vec<String>> {
    testkit::tshark::fields(frame, fields, &[]).ok()
}

/// Every frame `port` receives until it has been quiet for `quiet`.
fn collect(port: &RawPort, quiet: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Ok(Some(f)) = port.recv_timeout(quiet) {
        out.push(f);
    }
    out
}

const N: u64 = 50;

/// One direction of customer traffic: CE `i` of `from` (customer i) to
/// the CE `i` of `to`, through PE `pe`.
struct Flow<'a> {
    name: &'a str,
    from: &'a [RawPort],
    to: &'a [RawPort],
    ce_macs: &'a [Mac],
    pe: &'a Switch,
    src: &'a str,
    dst: &'a str,
}

impl Flow<'_> {
    /// Sends N UDP test frames per customer (sequence numbers
    /// 10,000 × customer + `base` + k), interleaved; each must reach its
    /// own customer's far CE only, with IP TTL `ttl` and good checksums.
    fn send(&self, base: u64, ttl: u8) -> Result<(), String> {
        self.to.iter().for_each(|c| {
            c.drain();
        });
        for k in 0..N {
            for i in 0..2 {
                let f = ip::udp(
                    &self.pe.router_mac(["ca", "cb"][i]),
                    &self.ce_macs[i],
                    a(self.src),
                    a(self.dst),
                    64,
                    i as u64 * 10_000 + base + k,
                    200,
                );
                self.from[i].send(&f).unwrap();
            }
        }
        for (i, to) in self.to.iter().enumerate() {
            let got: Vec<_> = collect(to, Duration::from_millis(300))
                .iter()
                .filter_map(|f| ip::parse(f))
                .filter(|p| p.seq.is_some())
                .collect();
            let lo = i as u64 * 10_000 + base;
            let ok = got
                .iter()
                .filter(|p| p.seq.is_some_and(|s| (lo..lo + N).contains(&s)))
                .filter(|p| p.ttl == ttl && p.header_ok && p.l4_ok && p.dst == a(self.dst))
                .count() as u64;
            let foreign = got.len() as u64 - ok;
            if ok != N || foreign != 0 {
                return Err(format!(
                    "{} {}: {ok}/{N} right (TTL {ttl}), {foreign} other: {got:?}",
                    self.name, CUSTS[i]
                ));
            }
        }
        Ok(())
    }
}

/// Checks the test frames among `frames` (captured on a core link):
/// two labels each, the bottom one `vpn[customer]` (S set), the top one
/// `top` when given; N per customer. Returns the top labels seen.
fn check_stacks(frames: &[Vec<u8>], vpn: &[u32], top: Option<u32>, what: &str) -> Vec<u32> {
    let mut per = [0u64; 2];
    let mut tops = Vec::new();
    for f in frames {
        let Some((stack, ipp)) = mpls_labels(f) else {
            continue;
        };
        let Some(seq) = seq_of(ipp) else { continue };
        let i = (seq / 10_000) as usize;
        assert_eq!(stack.len(), 2, "{what}: {stack:?}");
        let (t, ts, _) = stack[0];
        let (v, vs, _) = stack[1];
        assert!(!ts && vs, "{what}: S bits {stack:?}");
        assert_eq!(v, vpn[i], "{what} {}: VPN label", CUSTS[i]);
        if let Some(t0) = top {
            assert_eq!(t, t0, "{what}: top label");
        }
        tops.push(t);
        per[i] += 1;
    }
    assert_eq!(per, [N, N], "{what}: labelled test frames per VRF");
    tops.dedup();
    let first = frames.iter().find_map(|f| mpls_labels(f)).map(|l| l.0);
    eprintln!("  {what}: {N} + {N} frames with [{tops:?}, VPN {vpn:?}], e.g. {first:?}");
    tops
}

#[test]
fn ce_to_ce_across_two_lanyard_pes_and_a_lanyard_p() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd]);
    for m in [FPM_MODULE, MPLS_MODULE] {
        if !Path::new(m).exists() {
            println!("SKIPPED: needs {m} (scripts/build-zebra-mpls.sh)");
            return;
        }
    }
    let t0 = Instant::now();
    let ns = |p: &str| Netns::new(p).expect("namespace");
    let (pe1, p, pe2, core) = (ns("vppe1"), ns("vppp"), ns("vppe2"), ns("vppcore"));
    let ce1 = [ns("vppc1a"), ns("vppc1b")];
    let ce2 = [ns("vppc2a"), ns("vppc2b")];
    let vrf1 = [ns("vppv1a"), ns("vppv1b")];
    let vrf2 = [ns("vppv2a"), ns("vppv2b")];
    // The core links through bridges: x = the side toward pe1 / the P's
    // east port, y = the other.
    for br in ["br1", "br2", "br3"] {
        core.exec(&["ip", "link", "add", br, "type", "bridge", "stp_state", "0"])
            .expect("bridge");
    }
    veth(&pe1, "up", &core, "x1", 1600).unwrap();
    veth(&p, "w", &core, "y1", 1600).unwrap();
    veth(&p, "e", &core, "x2", 1600).unwrap();
    veth(&pe2, "up", &core, "y2", 1600).unwrap();
    veth(&pe1, "up2", &core, "x3", 1600).unwrap();
    veth(&p, "w2", &core, "y3", 1600).unwrap();
    for (br, ports) in [
        ("br1", ["x1", "y1"]),
        ("br2", ["x2", "y2"]),
        ("br3", ["x3", "y3"]),
    ] {
        for port in ports {
            core.exec(&["ip", "link", "set", port, "master", br])
                .expect("bridge port");
        }
        core.exec(&["ip", "link", "set", br, "up"]).unwrap();
    }
    for (pe, ces, k) in [(&pe1, &ce1, 1u8), (&pe2, &ce2, 2u8)] {
        for (ce, port) in ces.iter().zip(["ca", "cb"]) {
            veth(pe, port, ce, "c", 1500).unwrap();
            let addr = format!("10.{k}.0.2/24");
            let gw = format!("10.{k}.0.1");
            ce.exec(&["ip", "addr", "add", &addr, "dev", "c"]).unwrap();
            ce.exec(&["ip", "route", "add", "default", "via", &gw])
                .unwrap();
            testkit::frr::enable_ipv6(ce, "c").unwrap();
            let addr6 = format!("2001:db8:{k}::2/64");
            let gw6 = format!("2001:db8:{k}::1");
            ce.exec(&["ip", "addr", "add", &addr6, "dev", "c", "nodad"])
                .unwrap();
            ce.exec(&["ip", "-6", "route", "add", "default", "via", &gw6])
                .unwrap();
        }
    }
    // Strict reverse-path filtering, as many hosts set it and new
    // namespaces inherit it: Lanyard must turn it off in its VRFs (the
    // CE resolution path depends on it).
    for v in vrf1.iter().chain(&vrf2) {
        v.sysctl("net.ipv4.conf.all.rp_filter", "1").unwrap();
    }
    let tmp_guard = testkit::TempDir::new("vpn-ppe");
    let tmp = tmp_guard.path().to_path_buf();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));

    // The three routers, started in parallel (each: Lanyard, then FRR).
    let pe_daemons = [Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd];
    let p_daemons = [Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd];
    let start = |k: u8, dut: &Netns, vrfs: Option<&[Netns; 2]>| {
        let sock = tmp.join(format!("pw{k}.sock"));
        let module = format!("{MPLS_MODULE}:{}", sock.display());
        let zebra = format!("fpm address 127.0.0.1 port {FPM_PORT}\nno fpm use-next-hop-groups\n");
        let (yaml, ports, cfg, opts): (String, Vec<&str>, FrrConfig, FrrOptions) = match vrfs {
            Some(v) => (
                pe_yaml(k, &[&v[0], &v[1]]),
                [&["ca", "cb", "up"][..], if k == 1 { &["up2"] } else { &[] }].concat(),
                FrrConfig {
                    zebra,
                    ospfd: ospfd(k, pe_ifs(k)),
                    ldpd: ldpd(k, pe_ifs(k), true),
                    bgpd: pe_bgpd(k),
                    ..FrrConfig::default()
                },
                FrrOptions {
                    zebra_args: vec![
                        "-n".into(),
                        "-M".into(),
                        FPM_MODULE.into(),
                        "-M".into(),
                        module,
                    ],
                    netns_vrfs: CUSTS
                        .iter()
                        .zip(v)
                        .map(|(c, n)| (c.to_string(), n.name().to_string()))
                        .collect(),
                    ..FrrOptions::default()
                },
            ),
            None => (
                p_yaml(),
                vec!["w", "e", "w2"],
                FrrConfig {
                    zebra,
                    ospfd: ospfd(k, &["ly-w", "ly-e", "ly-w2"]),
                    ldpd: ldpd(k, &["ly-w", "ly-e", "ly-w2"], false),
                    ..FrrConfig::default()
                },
                FrrOptions {
                    zebra_args: vec!["-M".into(), "dplane_fpm_nl".into(), "-M".into(), module],
                    ..FrrOptions::default()
                },
            ),
        };
        let sw = Switch::start(&bin, dut, &yaml, &ports).expect("start lanyard");
        let daemons: &[Daemon] = if vrfs.is_some() {
            &pe_daemons
        } else {
            &p_daemons
        };
        let frr = FrrInstance::start_with(dut.name(), &format!("vpp{k}"), daemons, &cfg, &opts)
            .expect("FRR");
        (sw, frr)
    };
    let ((sw1, f1), (swp, fp), (sw2, f2)) = std::thread::scope(|s| {
        let a = s.spawn(|| start(1, &pe1, Some(&vrf1)));
        let b = s.spawn(|| start(3, &p, None));
        let c = s.spawn(|| start(2, &pe2, Some(&vrf2)));
        (a.join().unwrap(), b.join().unwrap(), c.join().unwrap())
    });
    eprintln!(
        "  routers started {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );

    let dump = |why: &str| -> String {
        let mut s = format!("{why}\n");
        for (name, f) in [("pe1", &f1), ("p", &fp), ("pe2", &f2)] {
            s.push_str(&format!(
                "--- {name} FRR:\n{}\n",
                f.vtysh(&[
                    "show ip ospf neighbor",
                    "show mpls ldp neighbor",
                    "show mpls ldp binding",
                    "show bgp summary",
                    "show bgp ipv4 vpn",
                    "show ip route",
                    "show ip route vrf all",
                    "show bgp ipv6 vpn",
                    "show ipv6 route vrf all",
                    "show mpls table",
                ])
            ));
        }
        for (name, sw) in [("pe1", &sw1), ("p", &swp), ("pe2", &sw2)] {
            s.push_str(&format!(
                "--- {name} Lanyard:\n{}\n{}\n{}\n",
                String::from_utf8_lossy(&sw.cli(&["show", "mpls", "table"]).unwrap().stdout),
                String::from_utf8_lossy(&sw.cli(&["show", "mpls", "forwarding"]).unwrap().stdout),
                String::from_utf8_lossy(&sw.cli(&["show", "vrf"]).unwrap().stdout),
            ));
            for v in CUSTS {
                for fam in ["ip", "ipv6"] {
                    s.push_str(&String::from_utf8_lossy(
                        &sw.cli(&["show", fam, "route", "vrf", v]).unwrap().stdout,
                    ));
                }
            }
        }
        s
    };

    // 1. The VPN routes: each PE's VRFs route the far CE subnet via the P.
    let want = |sw: &Switch, remote: &str, gw: &str| {
        CUSTS
            .iter()
            .all(|v| sw.vrf_route_gateways(v, remote) == [gw.to_string()])
    };
    if wait_for(
        "the VPN routes in both PEs",
        Duration::from_secs(45),
        || {
            (want(&sw1, "10.2.0.0/24", "10.0.1.2") && want(&sw2, "10.1.0.0/24", "10.0.2.1"))
                .then_some(())
        },
    )
    .is_none()
    {
        panic!("{}", dump("VPN routes missing"));
    }
    eprintln!(
        "  VPN routes in both PEs {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );

    // 2. The kernel CEs ping each other across, each customer.
    for (i, v) in CUSTS.iter().enumerate() {
        for (from, to) in [(&ce1[i], "10.2.0.2"), (&ce2[i], "10.1.0.2")] {
            let ok = wait_for(
                &format!("{v} ping to {to}"),
                Duration::from_secs(10),
                || from.exec(&["ping", "-c", "1", "-W", "1", to]).ok(),
            );
            if ok.is_none() {
                panic!("{}", dump(&format!("{v}: no ping to {to}")));
            }
        }
    }
    eprintln!(
        "  CEs ping across {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );
    // And the far PE's own address in their VRF (routes from bgpd): the
    // far PE's VRF kernel answers through its catch-all route, routed and
    // labelled by Lanyard (docs/vrf.md, "Traffic of a VRF's own kernel").
    for (i, v) in CUSTS.iter().enumerate() {
        for (from, to) in [(&ce1[i], "10.2.0.1"), (&ce2[i], "10.1.0.1")] {
            let ok = wait_for(
                &format!("{v} ping to the far PE's {to}"),
                Duration::from_secs(10),
                || {
                    from.exec(&["ping", "-c", "1", "-W", "1", to])
                        .ok()
                        .filter(|o| o.status.success())
                },
            );
            if ok.is_none() {
                panic!("{}", dump(&format!("{v}: no ping to the far PE's {to}")));
            }
        }
    }

    // 3. UDP test frames from each CE: its own customer's far CE only,
    // [transport, VPN] on PE→P, [explicit null, VPN] on P→PE.
    let vpn1: Vec<u32> = CUSTS.iter().map(|v| vpn_label(&sw1, v).unwrap()).collect();
    let vpn2: Vec<u32> = CUSTS.iter().map(|v| vpn_label(&sw2, v).unwrap()).collect();
    let open = |n: &Netns, i: &str| RawPort::open(n.name(), i).unwrap();
    let cap: Vec<RawPort> = ["x1", "y1", "x2", "y2", "x3"]
        .iter()
        .map(|i| open(&core, i))
        .collect();
    let c1: Vec<RawPort> = ce1.iter().map(|n| open(n, "c")).collect();
    let c2: Vec<RawPort> = ce2.iter().map(|n| open(n, "c")).collect();
    let m1: Vec<Mac> = ce1.iter().map(|n| n.mac("c")).collect();
    let m2: Vec<Mac> = ce2.iter().map(|n| n.mac("c")).collect();
    let east = Flow {
        name: "pe1→pe2",
        from: &c1,
        to: &c2,
        ce_macs: &m1,
        pe: &sw1,
        src: "10.1.0.2",
        dst: "10.2.0.2",
    };
    let west = Flow {
        name: "pe2→pe1",
        from: &c2,
        to: &c1,
        ce_macs: &m2,
        pe: &sw2,
        src: "10.2.0.2",
        dst: "10.1.0.2",
    };
    let mut east_top = 0;
    for (flow, far_vpn, cap_in, cap_out) in [
        (&east, &vpn2, &cap[0], &cap[2]),
        (&west, &vpn1, &cap[3], &cap[1]),
    ] {
        cap.iter().for_each(|c| {
            c.drain();
        });
        if let Err(e) = flow.send(0, 61) {
            panic!("{e}\n{}", dump("traffic"));
        }
        let dir = flow.name;
        for (hop, c, top) in [("PE→P", cap_in, None), ("P→PE", cap_out, Some(0u32))] {
            let frames = collect(c, Duration::from_millis(100));
            let tops = check_stacks(&frames, far_vpn, top, &format!("{dir} {hop}"));
            if top.is_none() {
                // The P switched them: its swap of that label counted them.
                let t = tops[0];
                if dir == east.name {
                    east_top = t;
                }
                assert_eq!(tops, [t], "{dir}: one transport label");
                assert!(t >= 16, "{dir}: transport label {t}");
                let swaps = swap_to(&swp, 0);
                assert!(
                    swaps.iter().any(|&(l, n)| l == t && n >= 2 * N),
                    "{dir}: P's swap {t} → 0: {swaps:?}"
                );
                // An independent dissector agrees on one frame.
                if let Some(f) = frames.iter().find(|f| mpls_labels(f).is_some()) {
                    if let Some(fs) = tshark(
                        f,
                        &["mpls.label", "mpls.bottom", "ip.dst", "ip.checksum.status"],
                    ) {
                        assert_eq!(
                            fs[0],
                            format!("{t},{}", mpls_labels(f).unwrap().0[1].0),
                            "{fs:?}"
                        );
                        assert_eq!(fs[1], "0,1", "{fs:?}");
                        assert_eq!(fs[2], flow.dst, "{fs:?}");
                        assert_eq!(fs[3], "1", "checksum good: {fs:?}");
                    }
                }
            }
        }
    }

    // 4. VPNv6 between the two Lanyard PEs (over the IPv4 core): each
    // VRF routes the far CE's IPv6 subnet via the P's IPv4 address, and
    // the kernel CEs ping each other across, each customer, both ways:
    // pushed by one Lanyard, swapped by the P, popped into the VRF's IPv6
    // table by the other.
    if wait_for(
        "the VPNv6 routes in both PEs",
        Duration::from_secs(30),
        || {
            (want(&sw1, "2001:db8:2::/64", "10.0.1.2") && want(&sw2, "2001:db8:1::/64", "10.0.2.1"))
                .then_some(())
        },
    )
    .is_none()
    {
        panic!("{}", dump("VPNv6 routes missing"));
    }
    cap.iter().for_each(|c| {
        c.drain();
    });
    for (i, v) in CUSTS.iter().enumerate() {
        for (from, to) in [(&ce1[i], "2001:db8:2::2"), (&ce2[i], "2001:db8:1::2")] {
            let ok = wait_for(
                &format!("{v} IPv6 ping to {to}"),
                Duration::from_secs(10),
                || {
                    from.exec(&["ping", "-6", "-c", "1", "-W", "1", to])
                        .ok()
                        .filter(|o| o.status.success())
                },
            );
            if ok.is_none() {
                panic!("{}", dump(&format!("{v}: no IPv6 ping to {to}")));
            }
        }
    }
    // pe1's echo requests toward the P: [transport, VPN] over IPv6,
    // the VPN label one pe2 pops into that customer's VRF.
    let pops = |sw: &Switch, vrf: &str| -> Vec<u32> {
        sw.show_json(&["show", "mpls", "table"])["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["action"] == "pop-lookup" && e["vrf"] == vrf)
            .filter_map(|e| e["in_label"].as_u64().map(|l| l as u32))
            .collect()
    };
    let v6_frames: Vec<Vec<(u32, bool, u8)>> = collect(&cap[0], Duration::from_millis(100))
        .iter()
        .filter_map(|f| mpls_labels(f))
        .filter(|(_, ipp)| ipp.first().is_some_and(|b| b >> 4 == 6))
        .map(|(stack, _)| stack)
        .collect();
    assert!(
        !v6_frames.is_empty(),
        "no labelled IPv6 frame from pe1 to the P"
    );
    let far: Vec<Vec<u32>> = CUSTS.iter().map(|v| pops(&sw2, v)).collect();
    for stack in &v6_frames {
        assert_eq!(stack.len(), 2, "{stack:?}");
        assert_eq!(stack[0].0, east_top, "transport label: {stack:?}");
        assert!(
            far.iter().any(|ls| ls.contains(&stack[1].0)),
            "VPN label {stack:?} is not one pe2 pops into a VRF: {far:?}"
        );
    }
    eprintln!(
        "  VPNv6 between the PEs: both customers ping across; {} labelled IPv6 frames from pe1 to the P, e.g. {:?}",
        v6_frames.len(),
        v6_frames[0]
    );

    // 5. The transport LSP moves: pe1's link to the P goes down, OSPF
    // moves pe2's loopback to pe1's second link to the P (cost 100; the
    // same LDP session, so the same label); zebra re-resolves the VPN
    // routes and Lanyard's VRFs follow: [transport, VPN] on that link.
    let cut = Instant::now();
    core.exec(&["ip", "link", "set", "x1", "down"]).unwrap();
    if wait_for(
        "the VPN routes via the backup link",
        Duration::from_secs(20),
        || want(&sw1, "10.2.0.0/24", "10.0.4.2").then_some(()),
    )
    .is_none()
    {
        panic!("{}", dump("VPN routes did not move"));
    }
    eprintln!(
        "  pe1's VPN routes via the backup link {:.1} s after the cut",
        cut.elapsed().as_secs_f64()
    );
    cap.iter().for_each(|c| {
        c.drain();
    });
    if let Err(e) = east.send(500, 61) {
        panic!("{e}\n{}", dump("traffic after the cut"));
    }
    let frames = collect(&cap[4], Duration::from_millis(100));
    check_stacks(&frames, &vpn2, Some(east_top), "pe1→pe2 backup link");

    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop((f1, fp, f2));
}
