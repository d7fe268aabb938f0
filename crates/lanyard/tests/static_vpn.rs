//! Static L3VPN end to end (docs/vrf.md, "Static VPN routes"): two
//! Lanyard PEs, one uplink between them, no FRR — the L3 analogue of the
//! static-label pseudowires, and the `lanyard-pe` lab DUT's layout.
//!
//! ```text
//!  ce1a ─ ca ┐                            ┌ ca ─ ce2a
//!            [pe1] up ══ br (core) ══ up [pe2]
//!  ce1b ─ cb ┘                            └ cb ─ ce2b
//! ```
//!
//! * Each PE: VRFs CUSTA (`ca`) and CUSTB (`cb`) with the SAME customer
//!   addresses (10.K.0.1/24, 2001:db8:K::1/64), a local VPN label per VRF
//!   (`vrfs[].vpn-label`: pe K pops 9000K1 into CUSTA, 9000K2 into
//!   CUSTB), static VPN routes to the far customer subnets (`remote-pe`:
//!   the far PE's loopback, its VPN label of that VRF) and a static route
//!   to the far loopback over the uplink.
//! * CEs: plain namespaces with the kernel's stack.
//! * The uplink runs through a bridge in a namespace of its own, where a
//!   raw socket sees every frame whatever port backend the PEs use.
//!
//! Checked: `show ip route vrf` (the VPN routes with remote PE, label and
//! transport; one whose remote PE nothing routes shown inactive) and
//! `show mpls table` (the static labels popping into their VRFs); UDP
//! test frames, IPv4 and IPv6, both directions, interleaved between the
//! customers: each reaches only its own customer's far CE (TTL / hop
//! limit 62: two routers; the CE's MAC, the egress PE's MAC; checksums)
//! and carries exactly [far PE's VPN label of its VRF] (S, label TTL 63)
//! on the wire; then a live `config apply` on both PEs moves CUSTB to a
//! new label and CUSTA's frames keep flowing. Fails without static VPN
//! routes (the configuration is refused). About 9 s. Needs root, else
//! SKIPPED. `LANYARD_SVPN_RATE=1` adds a one-run rate: 64-byte frames
//! from CUSTA's CE across both PEs for 2 s.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::frame::mpls_labels;
use testkit::frame::Mac;
use testkit::netns::{veth, Netns};
use testkit::{ip, l2, RawPort, Switch};

const CUSTS: [&str; 2] = ["CUSTA", "CUSTB"];
const PORTS: [&str; 2] = ["ca", "cb"];
const N: u64 = 50;

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The VPN label PE `k` pops into customer `i` (the far PE pushes it);
/// `gen` moves CUSTB to another label in the live change.
fn label(k: u8, i: usize, gen: u32) -> u32 {
    900_000 + 10 * k as u32 + 1 + i as u32 + if i == 1 { 100 * gen } else { 0 }
}

fn pe_yaml(k: u8, vrf_ns: &[Netns; 2], gen: u32) -> String {
    let far = 3 - k;
    let mut y = format!(
        r#"
switch:
  name: pe{k}
ports:
  - {{name: ca, mode: routed, addresses: [10.{k}.0.1/24, "2001:db8:{k}::1/64"]}}
  - {{name: cb, mode: routed, addresses: [10.{k}.0.1/24, "2001:db8:{k}::1/64"]}}
  - {{name: up, mode: routed, addresses: [10.91.0.{k}/30, 10.255.0.{k}/32]}}
vrfs:
"#
    );
    for i in 0..2 {
        y.push_str(&format!(
            "  - {{name: {}, interfaces: [{}], namespace: {}, vpn-label: {}}}\n",
            CUSTS[i],
            PORTS[i],
            vrf_ns[i].name(),
            label(k, i, gen)
        ));
    }
    y.push_str(&format!(
        "routing:\n  static-routes:\n    - {{prefix: 10.255.0.{far}/32, next-hop: 10.91.0.{far}}}\n"
    ));
    for (i, cust) in CUSTS.iter().enumerate() {
        for prefix in [
            format!("10.{far}.0.0/24"),
            format!("\"2001:db8:{far}::/64\""),
        ] {
            y.push_str(&format!(
                "    - {{prefix: {prefix}, vrf: {cust}, remote-pe: 10.255.0.{far}, vpn-label: {}}}\n",
                label(far, i, gen)
            ));
        }
    }
    // A PE nothing routes to: the route is kept, inactive.
    y.push_str(
        "    - {prefix: 198.51.100.0/24, vrf: CUSTA, remote-pe: 10.255.9.9, vpn-label: 900099}\n",
    );
    y
}

/// The test frame under a label stack, parsed as if it came unlabelled.
fn inner(ipp: &[u8]) -> Option<ip::IpInfo> {
    let mut f = vec![0u8; 12];
    let et: [u8; 2] = if ipp.first()? >> 4 == 6 {
        [0x86, 0xdd]
    } else {
        [0x08, 0x00]
    };
    f.extend_from_slice(&et);
    f.extend_from_slice(ipp);
    ip::parse(&f)
}

fn collect(port: &RawPort, quiet: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Ok(Some(f)) = port.recv_timeout(quiet) {
        out.push(f);
    }
    out
}

struct Side<'a> {
    /// The PE's router MACs of `ca` and `cb`.
    pe_macs: [Mac; 2],
    /// The CEs' raw ports and MACs, per customer.
    ces: &'a [RawPort],
    macs: &'a [Mac],
    /// Customer subnet (10.K.0) and IPv6 prefix (2001:db8:K).
    k: u8,
}

/// Sends `N` test frames per customer from `from`'s CEs to `to`'s CE
/// address (`v6`: IPv6), interleaved; sequence numbers are 10,000 ×
/// customer + `base` + n. Checks what `to`'s CEs receive: each customer's
/// own, all of them, hop limit 62, the CE's MAC from the egress PE's port
/// MAC, checksums; nothing of the other customer's.
fn flow(from: &Side, to: &Side, v6: bool, base: u64, custs: &[usize]) -> Result<(), String> {
    let (src, dst) = if v6 {
        (
            a(&format!("2001:db8:{}::2", from.k)),
            a(&format!("2001:db8:{}::2", to.k)),
        )
    } else {
        (
            a(&format!("10.{}.0.2", from.k)),
            a(&format!("10.{}.0.2", to.k)),
        )
    };
    to.ces.iter().for_each(|c| {
        c.drain();
    });
    for n in 0..N {
        for &i in custs {
            let f = ip::udp(
                &from.pe_macs[i],
                &from.macs[i],
                src,
                dst,
                64,
                i as u64 * 10_000 + base + n,
                200,
            );
            from.ces[i].send(&f).unwrap();
        }
    }
    for (i, ce) in to.ces.iter().enumerate() {
        let got: Vec<ip::IpInfo> = collect(ce, Duration::from_millis(300))
            .iter()
            .filter_map(|f| ip::parse(f))
            .filter(|p| p.seq.is_some())
            .collect();
        let lo = i as u64 * 10_000 + base;
        let want = if custs.contains(&i) { N } else { 0 };
        let pe_mac = to.pe_macs[i];
        let ok = got
            .iter()
            .filter(|p| p.seq.is_some_and(|s| (lo..lo + N).contains(&s)))
            .filter(|p| {
                p.ttl == 62
                    && p.header_ok
                    && p.l4_ok
                    && p.dst == dst
                    && p.src == src
                    && p.dst_mac == to.macs[i]
                    && p.src_mac == pe_mac
            })
            .count() as u64;
        let other = got.len() as u64 - ok;
        if ok != want || other != 0 {
            return Err(format!(
                "{} IPv{} pe{}→pe{}: {ok}/{want} right, {other} wrong or another customer's: {got:?}",
                CUSTS[i],
                if v6 { 6 } else { 4 },
                from.k,
                to.k
            ));
        }
    }
    Ok(())
}

/// The labelled test frames among `frames`: per customer (by sequence
/// number), every stack must be exactly [vpn[customer]] (S, TTL 63) over
/// a packet with TTL 63. Returns how many per customer.
fn check_wire(frames: &[Vec<u8>], vpn: &[u32; 2], what: &str) -> Result<[u64; 2], String> {
    let mut per = [0u64; 2];
    for f in frames {
        let Some((stack, ipp)) = mpls_labels(f) else {
            continue;
        };
        let Some(p) = inner(ipp) else { continue };
        let Some(seq) = p.seq else { continue };
        let i = (seq / 10_000) as usize;
        if stack != [(vpn[i], true, 63)] || p.ttl != 63 || !p.header_ok {
            return Err(format!(
                "{what} {}: stack {stack:?} (want [{}]), IP TTL {}",
                CUSTS[i], vpn[i], p.ttl
            ));
        }
        per[i] += 1;
    }
    Ok(per)
}

/// `LANYARD_SVPN_RATE=1`: frames per second CUSTA's CE on pe1 gets
/// across to its CE on pe2 (64-byte IPv4 UDP, 2 s, as fast as the
/// sender can; one run).
fn rate(from: &Netns, to: &Netns, pe_mac: &Mac, ce_mac: &Mac) {
    use testkit::flood::{FloodSpec, Flooder, RxCounter};
    let frames: Vec<Vec<u8>> = (0..64u64)
        .map(|k| {
            ip::udp(
                pe_mac,
                ce_mac,
                a("10.1.0.2"),
                a("10.2.0.2"),
                64,
                700_000 + k,
                std::env::var("LANYARD_SVPN_RATE")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(64),
            )
        })
        .collect();
    // By the bytes: `ip::parse` finds no sequence number in a frame this
    // short (its signature and number end 6 bytes before the frame).
    let rx = RxCounter::start(to.name(), "c", |f| {
        f.len() >= 58
            && f[12..14] == [0x08, 0x00]
            && f[42..50] == *b"LYROUTE1"
            && (700_000..700_064).contains(&u64::from_be_bytes(f[50..58].try_into().unwrap()))
    })
    .unwrap();
    let tx = Flooder::start(
        from.name(),
        "c",
        frames,
        FloodSpec {
            duration: Some(Duration::from_secs(2)),
            ..FloodSpec::default()
        },
    )
    .unwrap();
    let sent = tx.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let got = rx.stop().unwrap();
    eprintln!(
        "  L3VPN rate (one run, 2 shared cores): sent {} ({:.0}/s), delivered {} ({:.0}/s)",
        sent.sent,
        sent.pps(),
        got.matched,
        got.matched as f64 / sent.elapsed.as_secs_f64()
    );
}

fn route<'a>(v: &'a Value, prefix: &str) -> Option<&'a Value> {
    v["routes"]
        .as_array()?
        .iter()
        .find(|r| r["prefix"] == prefix && r["source"] == "static")
}

#[test]
fn static_vpn_routes_between_two_lanyard_pes() {
    testkit::require_root!();
    let t0 = Instant::now();
    let ns = |p: &str| Netns::new(p).expect("namespace");
    let (pe1, pe2, core) = (ns("svpe1"), ns("svpe2"), ns("svcore"));
    let ce1 = [ns("svc1a"), ns("svc1b")];
    let ce2 = [ns("svc2a"), ns("svc2b")];
    let vrf1 = [ns("svv1a"), ns("svv1b")];
    let vrf2 = [ns("svv2a"), ns("svv2b")];
    testkit::netns::bridged_segment(&core, &[(&pe1, "up", "x"), (&pe2, "up", "y")], 1600)
        .expect("core segment");
    for (pe, ces, k) in [(&pe1, &ce1, 1u8), (&pe2, &ce2, 2u8)] {
        for (ce, port) in ces.iter().zip(PORTS) {
            veth(pe, port, ce, "c", 1500).unwrap();
            ce.exec(&["ip", "addr", "add", &format!("10.{k}.0.2/24"), "dev", "c"])
                .unwrap();
            ce.sysctl("net.ipv6.conf.c.disable_ipv6", "0").unwrap();
            ce.exec(&[
                "ip",
                "addr",
                "add",
                &format!("2001:db8:{k}::2/64"),
                "dev",
                "c",
                "nodad",
            ])
            .unwrap();
        }
    }
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let ports = ["ca", "cb", "up"];
    let (sw1, sw2) = std::thread::scope(|s| {
        let a = s.spawn(|| Switch::start(&bin, &pe1, &pe_yaml(1, &vrf1, 0), &ports));
        let b = s.spawn(|| Switch::start(&bin, &pe2, &pe_yaml(2, &vrf2, 0), &ports));
        (
            a.join().unwrap().expect("start pe1"),
            b.join().unwrap().expect("start pe2"),
        )
    });
    eprintln!(
        "  PEs started {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );
    let dump = |why: &str| -> String {
        let mut s = format!("{why}\n");
        for (name, sw) in [("pe1", &sw1), ("pe2", &sw2)] {
            let text =
                |args: &[&str]| String::from_utf8_lossy(&sw.cli(args).unwrap().stdout).to_string();
            s.push_str(&format!(
                "--- {name}:\n{}{}",
                text(&["show", "mpls", "table"]),
                text(&["show", "vrf"])
            ));
            for v in CUSTS {
                s.push_str(&text(&["show", "ip", "route", "vrf", v]));
                s.push_str(&text(&["show", "ipv6", "route", "vrf", v]));
            }
            s.push_str(&text(&["show", "ip", "arp"]));
        }
        s
    };

    // 1. The routes and labels, as `show` tells them.
    for (sw, k) in [(&sw1, 1u8), (&sw2, 2u8)] {
        let far = 3 - k;
        for (i, v) in CUSTS.iter().enumerate() {
            let want = label(far, i, 0);
            let ok = (0..40).any(|_| {
                let r = sw.show_json(&["show", "ip", "route", "vrf", v]);
                let hit = route(&r, &format!("10.{far}.0.0/24")).is_some_and(|r| {
                    r["installed"] == true
                        && r["vpn"]["label"] == want
                        && r["vpn"]["remote_pe"] == format!("10.255.0.{far}")
                        && r["nexthops"][0]["gateway"] == format!("10.91.0.{far}")
                        && r["nexthops"][0]["interface"] == "up"
                        && r["nexthops"][0]["labels"] == serde_json::json!([want])
                });
                if !hit {
                    std::thread::sleep(Duration::from_millis(100));
                }
                hit
            });
            assert!(
                ok,
                "{}",
                dump(&format!("pe{k} {v}: no VPN route to 10.{far}.0.0/24"))
            );
            let r6 = sw.show_json(&["show", "ipv6", "route", "vrf", v]);
            let r6 = route(&r6, &format!("2001:db8:{far}::/64")).expect("IPv6 VPN route");
            assert_eq!(r6["installed"], true, "{r6}");
            assert_eq!(
                r6["nexthops"][0]["labels"],
                serde_json::json!([want]),
                "{r6}"
            );
        }
        // The route to a PE nothing routes: kept, inactive, said so.
        let r = sw.show_json(&["show", "ip", "route", "vrf", "CUSTA"]);
        let dead = route(&r, "198.51.100.0/24").expect("the unreachable PE's route");
        assert_eq!(
            (&dead["installed"], &dead["unresolvable"]),
            (&Value::from(false), &Value::from(true))
        );
        let text = String::from_utf8_lossy(
            &sw.cli(&["show", "ip", "route", "vrf", "CUSTA"])
                .unwrap()
                .stdout,
        )
        .to_string();
        assert!(
            text.contains("VPN to 10.255.9.9 label 900099: inactive, remote PE unreachable")
                && text.contains(&format!("VPN to 10.255.0.{far} label {}", label(far, 0, 0)))
                && text.contains(&format!("label {}", label(far, 0, 0))),
            "{text}"
        );
        // The local labels pop into their VRFs.
        let t = sw.show_json(&["show", "mpls", "table"]);
        for (i, v) in CUSTS.iter().enumerate() {
            let l = label(k, i, 0);
            let e = t["labels"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["in_label"] == l)
                .unwrap_or_else(|| panic!("pe{k}: label {l} in {t}"));
            assert_eq!(
                (&e["action"], &e["vrf"], &e["protocol"], &e["installed"]),
                (
                    &Value::from("pop-lookup"),
                    &Value::from(*v),
                    &Value::from("static"),
                    &Value::from(true)
                ),
                "{e}"
            );
        }
        let text = String::from_utf8_lossy(&sw.cli(&["show", "mpls", "table"]).unwrap().stdout)
            .to_string();
        assert!(
            text.contains("(IP lookup, VRF CUSTB)") && text.contains("static"),
            "{text}"
        );
        // `show mpls forwarding` lists each VRF's label-pushing routes:
        // the two installed ones (the unreachable PE's is not).
        let f = sw.show_json(&["show", "mpls", "forwarding"]);
        for (i, v) in CUSTS.iter().enumerate() {
            let e = f["vpn"]
                .as_array()
                .and_then(|a| a.iter().find(|e| e["vrf"] == *v))
                .unwrap_or_else(|| panic!("pe{k}: {v} in {f}"));
            assert_eq!(e["routes"], 2, "{e}");
            let r = e["ftn"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["prefix"] == format!("10.{far}.0.0/24"))
                .unwrap_or_else(|| panic!("{e}"));
            assert_eq!(
                r["hops"][0]["out_labels"],
                serde_json::json!([label(far, i, 0)]),
                "{r}"
            );
        }
    }

    let open = |n: &Netns, i: &str| RawPort::open(n.name(), i).unwrap();
    let c1: Vec<RawPort> = ce1.iter().map(|n| open(n, "c")).collect();
    let c2: Vec<RawPort> = ce2.iter().map(|n| open(n, "c")).collect();
    let m1: Vec<Mac> = ce1.iter().map(|n| n.mac("c")).collect();
    let m2: Vec<Mac> = ce2.iter().map(|n| n.mac("c")).collect();
    let wire = [open(&core, "x"), open(&core, "y")];
    let s1 = Side {
        pe_macs: [sw1.router_mac("ca"), sw1.router_mac("cb")],
        ces: &c1,
        macs: &m1,
        k: 1,
    };
    let s2 = Side {
        pe_macs: [sw2.router_mac("ca"), sw2.router_mac("cb")],
        ces: &c2,
        macs: &m2,
        k: 2,
    };

    // 2. Glean: the first frames resolve the far CE (punted to the egress
    // VRF's twin) and the far PE's uplink address (asked for by Lanyard).
    let glean = |from: &Side, to: &Side, v6: bool| -> Result<f64, String> {
        let t = Instant::now();
        loop {
            match flow(from, to, v6, 90_000, &[0, 1]) {
                Ok(()) => return Ok(t.elapsed().as_secs_f64()),
                Err(e) if t.elapsed() > Duration::from_secs(8) => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    };
    for (from, to, v6) in [
        (&s1, &s2, false),
        (&s2, &s1, false),
        (&s1, &s2, true),
        (&s2, &s1, true),
    ] {
        let what = format!("pe{}→pe{} IPv{}", from.k, to.k, if v6 { 6 } else { 4 });
        match glean(from, to, v6) {
            Ok(secs) => eprintln!("  {what}: every frame crossed after {secs:.2} s"),
            Err(e) => panic!("{}", dump(&format!("{what}: not all frames crossed: {e}"))),
        }
    }
    eprintln!(
        "  both ways resolved {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );

    // 3. The measured frames: each customer's reach its own far CE only,
    // with exactly the far PE's VPN label of that VRF on the wire.
    for (from, to, cap, v6) in [
        (&s1, &s2, &wire[0], false),
        (&s2, &s1, &wire[1], false),
        (&s1, &s2, &wire[0], true),
        (&s2, &s1, &wire[1], true),
    ] {
        cap.drain();
        if let Err(e) = flow(from, to, v6, 0, &[0, 1]) {
            panic!("{e}\n{}", dump("traffic"));
        }
        let vpn = [label(to.k, 0, 0), label(to.k, 1, 0)];
        let what = format!("pe{}→pe{} IPv{}", from.k, to.k, if v6 { 6 } else { 4 });
        let per = check_wire(&collect(cap, Duration::from_millis(100)), &vpn, &what)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            per,
            [N, N],
            "{what}: labelled test frames per customer on the wire"
        );
        eprintln!("  {what}: {N} + {N} frames, labels {vpn:?}, TTL 62 at the CEs");
    }

    // 4. Live: CUSTB moves to new labels on both PEs (`config apply`);
    // the routes follow and CUSTB's frames carry the new label.
    for (sw, k, vrfs) in [(&sw2, 2u8, &vrf2), (&sw1, 1u8, &vrf1)] {
        let out = sw
            .apply_config(&format!("pe{k}-b"), &pe_yaml(k, vrfs, 1))
            .unwrap_or_else(|e| panic!("config apply on pe{k}: {e}"));
        assert!(out.contains("applied: 2 change(s)"), "{out}");
    }
    let t = sw2.show_json(&["show", "mpls", "table"]);
    let has = |l: u32| {
        t["labels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["in_label"] == l)
    };
    assert!(
        has(label(2, 1, 1)) && !has(label(2, 1, 0)) && has(label(2, 0, 1)),
        "{t}"
    );
    wire[0].drain();
    if let Err(e) = flow(&s1, &s2, false, 500, &[0, 1]) {
        panic!("after the apply: {e}\n{}", dump("traffic after the apply"));
    }
    let per = check_wire(
        &collect(&wire[0], Duration::from_millis(100)),
        &[label(2, 0, 1), label(2, 1, 1)],
        "after the apply",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(per, [N, N]);
    if std::env::var_os("LANYARD_SVPN_RATE").is_some() {
        rate(&ce1[0], &ce2[0], &s1.pe_macs[0], &m1[0]);
        // Where frames went (one line each): the egress PE's MPLS drops.
        for (name, sw) in [("pe1", &sw1), ("pe2", &sw2)] {
            let f = sw.show_json(&["show", "mpls", "forwarding"]);
            eprintln!("  {name}: data path {}", f["data_path"]);
        }
    }
    eprintln!(
        "  live label change applied; whole test {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
