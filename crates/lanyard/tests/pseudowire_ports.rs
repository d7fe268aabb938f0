//! 24 port-mode (type 5) pseudowires and VLAN-mode (type 4) ones at once
//! (issue 17's 24 whole-port circuits beside its 3,072 VLAN circuits),
//! between two Lanyard PEs back to back with static labels:
//!
//! ```text
//!  [ca] p0..p23,v0..vN ── [pe-a] up ══ up [pe-b] ── p0..p23,v0..vN [cb]
//! ```
//!
//! Every customer port sends its frames at the same time, both
//! directions: on the type-5 ports untagged, 802.1Q and Q-in-Q frames,
//! half the pseudowires with and half without control word; on the
//! type-4 ports (VLAN 100+k on pe-a ↔ 300+k on pe-b, control word on
//! every other one) each VLAN's frames, one with a customer tag inside.
//! Each far port receives exactly its own frames byte for byte (type 4:
//! its VLAN id rewritten, per VLAN in order) and nothing of the others,
//! and `show mpls pseudowires` counts exactly that many frames into and
//! out of each pseudowire on both PEs.
//!
//! Type 4: `LANYARD_PW_VLANS` pseudowires (default 32, on 2 ports; up to
//! 3,072 = 128 VLANs on each of 24 ports, the report's layout). Needs
//! root, else SKIPPED.
//!
//! `pseudowires_with_the_reports_services_on` runs the same with the
//! report's services on every circuit port of both PEs (the lab's
//! 10,000-line IPv4 and IPv6 access lists, its 500-line QoS policy
//! re-marking to AF11, flow export): the test frames (not IP) still go
//! through exactly; then per type-5 pseudowire and direction an IPv4 UDP
//! packet arrives re-marked AF11 with a valid checksum, a TCP packet to a
//! denied port never arrives and is the port's `acl-deny` drop, and
//! nfcapd beside pe-a lists each permitted flow with its circuit port.

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use testkit::frame::{mac, test_frame, test_info, Tag};
use testkit::netns::veth;
use testkit::pseudowire::pseudowires as pws;
use testkit::switch::port_counter;
use testkit::{l2, Netns, RawPort, Switch};

/// Type-5 pseudowires (whole ports p0..p23).
const PWS: usize = 24;
/// Frames per type-5 pseudowire and direction.
const K: usize = 30;
/// Frames per type-4 pseudowire and direction.
const K4: usize = 2;
const VLANS_PER_PORT: usize = 128;
/// nfcapd's port in pe-a's namespace (services on).
const COLLECTOR_PORT: u16 = 2056;

/// Type-4 pseudowires: `LANYARD_PW_VLANS`, default 32.
fn type4_count() -> usize {
    std::env::var("LANYARD_PW_VLANS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32)
        .clamp(1, 24 * VLANS_PER_PORT)
}

/// Ports the type-4 pseudowires spread over (at least 2, at most 128
/// VLANs each) and VLANs per port.
fn type4_layout(n4: usize) -> (usize, usize) {
    let ports = n4.div_ceil(VLANS_PER_PORT).max(2).min(n4);
    (ports, n4.div_ceil(ports))
}

/// (port index, VLAN on pe-a, VLAN on pe-b) of type-4 pseudowire `i`.
fn type4(n4: usize, i: usize) -> (usize, u16, u16) {
    let (_, per) = type4_layout(n4);
    let v = (i % per) as u16;
    (i / per, 100 + v, 300 + v)
}

fn config(a_side: bool, n4: usize, services: bool) -> String {
    let (me, peer, local, remote) = if a_side {
        ("10.94.0.1", "10.94.0.2", 7000, 8000)
    } else {
        ("10.94.0.2", "10.94.0.1", 8000, 7000)
    };
    let mut y = format!(
        "switch:\n  name: pe-{}\nports:\n  - {{name: up, mode: routed, mtu: 1600, addresses: [{me}/30]}}\n",
        if a_side { "a" } else { "b" }
    );
    // The report's services on the circuit ports' input (`services_yaml`
    // defines them; flows time out after 1 s here, not 15).
    let attach = if services {
        ", acl-in: [lab-v4, lab-v6], policy-in: lab-qos"
    } else {
        ""
    };
    for i in 0..PWS {
        y.push_str(&format!("  - {{name: p{i}{attach}}}\n"));
    }
    for i in 0..type4_layout(n4).0 {
        y.push_str(&format!("  - {{name: v{i}{attach}}}\n"));
    }
    if services {
        y.push_str(
            &lab::dut::services_yaml()
                .replace("inactive-timeout: 15", "inactive-timeout: 1")
                .replace("127.0.0.1:9995", &format!("127.0.0.1:{COLLECTOR_PORT}")),
        );
    }
    y.push_str("pseudowires:\n");
    for i in 0..PWS {
        y.push_str(&format!(
            "  - {{name: w{i}, port: p{i}, neighbor: {peer}, pw-id: {}, control-word: {}, static-labels: {{local: {}, remote: {}}}}}\n",
            i + 1,
            i % 2 == 0,
            local + i,
            remote + i
        ));
    }
    // Type 4: labels 100,000+ (pe-a pops 100,000+i, pe-b 200,000+i).
    let (l4, r4) = if a_side {
        (100_000, 200_000)
    } else {
        (200_000, 100_000)
    };
    for i in 0..n4 {
        let (port, va, vb) = type4(n4, i);
        y.push_str(&format!(
            "  - {{name: t{i}, port: v{port}, vlan: {}, neighbor: {peer}, pw-id: {}, control-word: {}, static-labels: {{local: {}, remote: {}}}}}\n",
            if a_side { va } else { vb },
            1000 + i,
            i % 2 == 1,
            l4 + i,
            r4 + i
        ));
    }
    y
}

/// Counter `k` of pseudowire `name` (0 when absent).
fn counter(v: &Value, name: &str, k: &str) -> u64 {
    testkit::pseudowire::row(v, name).map_or(0, |r| r[k].as_u64().unwrap_or(0))
}

/// Frame `k` of type-5 pseudowire `i` in direction `dir`: the source MAC
/// names the pseudowire, the sequence the frame; tags vary.
fn frame(i: usize, dir: u32, k: usize) -> Vec<u8> {
    let tags = match k % 3 {
        0 => vec![],
        1 => vec![Tag::dot1q(10 + i as u16)],
        _ => vec![Tag::dot1ad(20), Tag::dot1q(30 + i as u16)],
    };
    test_frame(
        &mac(900),
        &mac(1000 + i as u32),
        &tags,
        1 + dir,
        k as u64,
        100 + k,
    )
}

/// Frame `k` of type-4 pseudowire `i` in direction `dir`, tagged `vlan`
/// (the sender's VLAN, or the receiver's for what should arrive): the
/// second one carries a customer tag inside.
fn frame4(i: usize, dir: u32, k: usize, vlan: u16) -> Vec<u8> {
    let mut tags = vec![Tag::dot1q(vlan)];
    if k % 2 == 1 {
        tags.push(Tag::dot1q(7));
    }
    test_frame(
        &mac(901),
        &mac(5000 + i as u32),
        &tags,
        3 + dir,
        k as u64,
        96 + k,
    )
}

/// The outer VLAN id of a tagged frame.
fn vlan_of(f: &[u8]) -> Option<u16> {
    (f.len() >= 16 && f[12..14] == [0x81, 0x00]).then(|| u16::from_be_bytes([f[14], f[15]]) & 0xfff)
}

#[test]
fn port_and_vlan_mode_pseudowires_at_once() {
    run("pwpt", false);
}

#[test]
fn pseudowires_with_the_reports_services_on() {
    run("pwps", true);
}

/// The bed, under namespace names starting with `tag`.
fn run(tag: &str, services: bool) {
    testkit::require_root!();
    if services {
        if let Some(why) = testkit::nfdump::nfdump_missing() {
            eprintln!("SKIPPED: {why}");
            return;
        }
    }
    let _g = l2::heavy();
    let t0 = Instant::now();
    let n4 = type4_count();
    let (n4_ports, per) = type4_layout(n4);
    let ca = Netns::new(&format!("{tag}ca")).unwrap();
    let pa = Netns::new(&format!("{tag}pa")).unwrap();
    let pb = Netns::new(&format!("{tag}pb")).unwrap();
    let cb = Netns::new(&format!("{tag}cb")).unwrap();
    veth(&pa, "up", &pb, "up", 1600).unwrap();
    let ports: Vec<String> = (0..PWS).map(|i| format!("p{i}")).collect();
    let vports: Vec<String> = (0..n4_ports).map(|i| format!("v{i}")).collect();
    for p in ports.iter().chain(&vports) {
        veth(&pa, p, &ca, p, 9000).unwrap();
        veth(&pb, p, &cb, p, 9000).unwrap();
    }
    let mut names: Vec<&str> = vec!["up"];
    names.extend(ports.iter().chain(&vports).map(String::as_str));
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let mut collector = services.then(|| {
        testkit::nfdump::Collector::start_in(
            &format!("{tag}-flows"),
            Some((pa.name(), COLLECTOR_PORT)),
        )
    });
    let mut a = Switch::start(&bin, &pa, &config(true, n4, services), &names).expect("pe-a");
    let b = Switch::start(&bin, &pb, &config(false, n4, services), &names).expect("pe-b");
    let total = PWS + n4;
    let end = Instant::now() + Duration::from_secs(60);
    while pws(&a)["up"] != total || pws(&b)["up"] != total {
        assert!(
            Instant::now() < end,
            "not all up: pe-a {}\npe-b {}",
            pws(&a)["up"],
            pws(&b)["up"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "{PWS} type-5 + {n4} type-4 pseudowires up on both PEs {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );
    let open = |ns: &Netns, ps: &[String]| -> Vec<RawPort> {
        ps.iter()
            .map(|p| RawPort::open(ns.name(), p).unwrap())
            .collect()
    };
    let (ra, rb) = (open(&ca, &ports), open(&cb, &ports));
    let (va, vb) = (open(&ca, &vports), open(&cb, &vports));
    // The PEs resolve each other's MAC on the first frames: probe one
    // pseudowire each way until it carries.
    let probe = test_frame(&mac(1), &mac(2), &[], 9, 0, 100);
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        ra[0].send(&probe).unwrap();
        rb[0].send(&probe).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        if !ra[0]
            .recv_test_frames(Duration::from_millis(50))
            .unwrap()
            .is_empty()
            && !rb[0]
                .recv_test_frames(Duration::from_millis(50))
                .unwrap()
                .is_empty()
        {
            break;
        }
        assert!(Instant::now() < end, "no frame through w0");
    }
    std::thread::sleep(Duration::from_millis(200));
    for p in ra.iter().chain(&rb).chain(&va).chain(&vb) {
        p.drain();
    }
    let (before_a, before_b) = (pws(&a), pws(&b));
    let mut failures = Vec::new();
    for dir in 0..2u32 {
        let (src, dst) = if dir == 0 { (&ra, &rb) } else { (&rb, &ra) };
        let (src4, dst4) = if dir == 0 { (&va, &vb) } else { (&vb, &va) };
        let sent_at = Instant::now();
        // All at once, interleaved: frame k of every type-5 pseudowire and
        // of every type-4 one, then k + 1. Paced (a short pause every 64
        // frames) so that the burst does not overrun the veths' backlog
        // in front of the PE: the test is about where frames go.
        let mut n = 0usize;
        let mut pace = || {
            n += 1;
            if n.is_multiple_of(64) {
                std::thread::sleep(Duration::from_micros(1500));
            }
        };
        for k in 0..K.max(K4) {
            if k < K {
                for (i, p) in src.iter().enumerate() {
                    p.send(&frame(i, dir, k)).unwrap();
                    pace();
                }
            }
            if k < K4 {
                for i in 0..n4 {
                    let (port, x, y) = type4(n4, i);
                    let v = if dir == 0 { x } else { y };
                    src4[port].send(&frame4(i, dir, k, v)).unwrap();
                    pace();
                }
            }
        }
        let sent = n;
        let send_time = sent_at.elapsed();
        for (i, p) in dst.iter().enumerate() {
            let got = p
                .recv_test_frames(Duration::from_millis(if i == 0 { 400 } else { 50 }))
                .unwrap();
            // Every test frame counts: a type-4 one here is a leak.
            let want: Vec<Vec<u8>> = (0..K).map(|k| frame(i, dir, k)).collect();
            if got != want {
                let foreign = got
                    .iter()
                    .filter(|f| {
                        test_info(f)
                            .is_some_and(|t| t.src != mac(1000 + i as u32) || t.phase != 1 + dir)
                    })
                    .count();
                failures.push(format!(
                    "dir {dir} w{i}: {} frames at the far port ({foreign} of another pseudowire), want its {K} in order",
                    got.len()
                ));
            }
        }
        for (pi, p) in dst4.iter().enumerate() {
            let got = p.recv_test_frames(Duration::from_millis(50)).unwrap();
            // Per far VLAN, in order.
            let mut by_vlan: BTreeMap<u16, Vec<Vec<u8>>> = BTreeMap::new();
            let mut other = 0;
            for f in got {
                match (test_info(&f), vlan_of(&f)) {
                    (Some(t), Some(v)) if t.phase == 3 + dir => {
                        by_vlan.entry(v).or_default().push(f)
                    }
                    _ => other += 1,
                }
            }
            let ids: Vec<usize> = (0..n4).filter(|&i| i / per == pi).collect();
            let mut bad = 0;
            for &i in &ids {
                let (_, x, y) = type4(n4, i);
                let v = if dir == 0 { y } else { x };
                let want: Vec<Vec<u8>> = (0..K4).map(|k| frame4(i, dir, k, v)).collect();
                if by_vlan.remove(&v).unwrap_or_default() != want {
                    bad += 1;
                }
            }
            if bad > 0 || !by_vlan.is_empty() || other > 0 {
                failures.push(format!(
                    "dir {dir} v{pi}: {bad} of {} VLANs not exactly their {K4} frames; {} unexpected VLANs, {other} other frames",
                    ids.len(),
                    by_vlan.len()
                ));
            }
        }
        eprintln!(
            "dir {dir}: {sent} frames sent on {} ports in {:.2} s",
            PWS + n4_ports,
            send_time.as_secs_f64()
        );
    }
    let (after_a, after_b) = (pws(&a), pws(&b));
    for (pe, x, y) in [("pe-a", &before_a, &after_a), ("pe-b", &before_b, &after_b)] {
        let mut bad = Vec::new();
        let names = (0..PWS)
            .map(|i| (format!("w{i}"), K))
            .chain((0..n4).map(|i| (format!("t{i}"), K4)));
        for (name, want) in names {
            for k in ["tx_packets", "rx_packets"] {
                let d = counter(y, &name, k) - counter(x, &name, k);
                if d != want as u64 {
                    bad.push(format!("{name} {k} +{d}, want +{want}"));
                }
            }
        }
        if !bad.is_empty() {
            failures.push(format!(
                "{pe}: {} counters off, e.g. {:?}",
                bad.len(),
                &bad[..bad.len().min(5)]
            ));
        }
    }
    if let Some(collector) = collector.as_mut() {
        failures.extend(services_phase(&a, &b, &ra, &rb, collector));
        let _ = a.stop();
    }
    eprintln!(
        "{PWS} type-5 ({K} frames each way each) + {n4} type-4 ({K4} each way each) pseudowires{}, whole test {:.1} s",
        if services { ", services on" } else { "" },
        t0.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// IPv4 UDP packet of type-5 pseudowire `i` in direction `dir` (permitted
/// by the lists, `class-default` of the policy: re-marked AF11).
fn udp_packet(i: usize, dir: u32) -> Vec<u8> {
    testkit::ip::udp(
        &mac(900),
        &mac(1000 + i as u32),
        IpAddr::V4(Ipv4Addr::new(10, 200 + dir as u8, 0, i as u8)),
        IpAddr::V4(Ipv4Addr::new(10, 210 + dir as u8, 0, i as u8)),
        64,
        i as u64,
        120,
    )
}

/// TCP packet of pseudowire `i` to a port the lists deny.
fn denied_packet(i: usize, dir: u32) -> Vec<u8> {
    let port = lab::dut::services_deny_ports()[i];
    let payload = testkit::acl::l4_payload(6, 30_000, port, 40);
    let src = IpAddr::V4(Ipv4Addr::new(10, 220 + dir as u8, 0, i as u8));
    let dst = IpAddr::V4(Ipv4Addr::new(10, 230 + dir as u8, 0, i as u8));
    testkit::acl::datagram(
        &mac(900),
        &mac(1000 + i as u32),
        src,
        dst,
        6,
        &payload,
        1500,
        0,
        0,
    )
    .remove(0)
}

/// Services on: per type-5 pseudowire and direction, the permitted UDP
/// packet arrives re-marked and the denied TCP packet does not (counted
/// on the ingress port); pe-a's flows reach nfcapd with their circuit.
fn services_phase(
    a: &Switch,
    b: &Switch,
    ra: &[RawPort],
    rb: &[RawPort],
    collector: &mut testkit::nfdump::Collector,
) -> Vec<String> {
    let mut failures = Vec::new();
    let deny_before = |sw: &Switch| {
        let c = sw.counters();
        (0..PWS)
            .map(|i| port_counter(&c, &format!("p{i}"), "drops.acl-deny"))
            .sum::<u64>()
    };
    let (da0, db0) = (deny_before(a), deny_before(b));
    for dir in 0..2u32 {
        let (src, dst) = if dir == 0 { (ra, rb) } else { (rb, ra) };
        for (i, p) in src.iter().enumerate() {
            p.send(&denied_packet(i, dir)).unwrap();
            p.send(&udp_packet(i, dir)).unwrap();
        }
        for (i, p) in dst.iter().enumerate() {
            let mut ip = Vec::new();
            while let Ok(Some(f)) =
                p.recv_timeout(Duration::from_millis(if i == 0 { 300 } else { 30 }))
            {
                if f.len() > 14 && f[12..14] == [0x08, 0x00] {
                    ip.push(f);
                }
            }
            let sent = udp_packet(i, dir);
            let ok = match ip.as_slice() {
                [f] => {
                    let info = testkit::ip::parse(f);
                    let mut want = sent.clone();
                    want[15] = 10 << 2; // AF11
                    want[24..26].copy_from_slice(&f[24..26]); // the checksum
                    info.is_some_and(|x| x.header_ok) && *f == want
                }
                _ => false,
            };
            if !ok {
                failures.push(format!(
                    "services, dir {dir} w{i}: {} IP frames at the far port, want the UDP packet re-marked AF11 (checksum valid) and not the denied TCP one",
                    ip.len()
                ));
            }
        }
    }
    let (da, db) = (deny_before(a) - da0, deny_before(b) - db0);
    if (da, db) != (PWS as u64, PWS as u64) {
        failures.push(format!(
            "acl-deny on the circuit ports: pe-a +{da}, pe-b +{db}, want +{PWS} each"
        ));
    }
    // Inactive timeout 1 s; the sweep visits the cache about once a
    // second; the exporter sends within 100 ms.
    std::thread::sleep(Duration::from_millis(3500));
    let rows = collector.flows();
    for i in 0..PWS {
        let dst = Ipv4Addr::new(10, 210, 0, i as u8).to_string();
        let n = rows
            .iter()
            .filter(|r| r.get("da") == Some(&dst) && r.get("ipkt").map(String::as_str) == Some("1"))
            .count();
        if n != 1 {
            failures.push(format!(
                "nfcapd: {n} flows to {dst} of one packet, want 1 (w{i})"
            ));
        }
    }
    failures
}
