//! Acceptance (issue 5): access lists, QoS re-marking and policing on real
//! frames through namespaces. Frames are built and checked here with the
//! test's own code (testkit's independent IP dissector for checksums).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

type Mac = [u8; 6];

const M1: Mac = [0x02, 0x5e, 0, 0, 0, 1];
const M2: Mac = [0x02, 0x5e, 0, 0, 0, 2];
const M3: Mac = [0x02, 0x5e, 0, 0, 0, 3];
const QUIET: Duration = Duration::from_millis(600);

/// A TCP or UDP packet in Ethernet II, `len` bytes of frame.
#[allow(clippy::too_many_arguments)]
fn l4_frame(
    dst_mac: Mac,
    src_mac: Mac,
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    sport: u16,
    dport: u16,
    tos: u8,
    len: usize,
) -> Vec<u8> {
    let v6 = src.is_ipv6();
    let iph = if v6 { 40 } else { 20 };
    let l4h = if proto == 6 { 20 } else { 8 };
    let len = len.max(14 + iph + l4h);
    let l4len = len - 14 - iph;
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&(if v6 { 0x86ddu16 } else { 0x0800 }).to_be_bytes());
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[1] = tos;
            h[2..4].copy_from_slice(&((iph + l4len) as u16).to_be_bytes());
            h[8] = 64;
            h[9] = proto;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let mut acc: u32 = h
                .chunks(2)
                .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                .sum();
            while acc >> 16 != 0 {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            h[10..12].copy_from_slice(&(!(acc as u16)).to_be_bytes());
            f.extend_from_slice(&h);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let vtc = 0x6000_0000u32 | (u32::from(tos) << 20);
            f.extend_from_slice(&vtc.to_be_bytes());
            f.extend_from_slice(&(l4len as u16).to_be_bytes());
            f.push(proto);
            f.push(64);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => panic!("mixed families"),
    }
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    if proto == 6 {
        f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        f.extend_from_slice(&(l4len as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
    }
    f.resize(len, 0);
    f
}

/// (family, proto, dport, tos) of a received frame; None if not IP.
fn classify(f: &[u8]) -> Option<(u8, u8, u16, u8)> {
    if f.len() < 14 {
        return None;
    }
    let ip = &f[14..];
    match u16::from_be_bytes([f[12], f[13]]) {
        0x0800 if ip.len() >= 24 => {
            let ihl = usize::from(ip[0] & 0xf) * 4;
            let dport = u16::from_be_bytes([ip[ihl + 2], ip[ihl + 3]]);
            Some((4, ip[9], dport, ip[1]))
        }
        0x86dd if ip.len() >= 44 => {
            let tc = ((u16::from_be_bytes([ip[0], ip[1]]) >> 4) & 0xff) as u8;
            Some((6, ip[6], u16::from_be_bytes([ip[42], ip[43]]), tc))
        }
        _ => None,
    }
}

/// Receive on `port` in the background until quiet after `stop` is
/// reached; returns every frame.
fn collect(port: &RawPort) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
    let p = port.try_clone().expect("clone socket");
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let start = Instant::now();
        // Wait for the first frame up to 20 s, then until quiet.
        let mut quiet = Duration::from_secs(20);
        while let Ok(Some(f)) = p.recv_timeout(quiet) {
            if classify(&f).is_some() {
                out.push(f);
                quiet = QUIET;
            }
            if start.elapsed() > Duration::from_secs(120) {
                break;
            }
        }
        out
    })
}

/// Teach the switch where each tester MAC lives (one broadcast UDP frame
/// from each), then empty every tester socket.
fn teach(ports: &[RawPort], who: &[(usize, Mac)]) {
    for &(p, m) in who {
        let f = l4_frame(
            [0xff; 6],
            m,
            v4(0x0a00_0009),
            v4(0x0a00_0001),
            17,
            1,
            9,
            0,
            64,
        );
        ports[p].send(&f).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    for p in ports {
        p.drain();
    }
}

fn v4(a: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

fn v6(a: u128) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(a))
}

/// The lab's non-sequential deny ports (10,000 distinct TCP ports).
fn deny_ports() -> Vec<u16> {
    lab::dut::services_deny_ports()
}

fn acl_yaml(name: &str, kind: &str, ports: &[u16]) -> String {
    let mut s = format!("  - name: {name}\n    type: {kind}\n    rules:\n");
    for p in ports {
        s.push_str(&format!(
            "      - {{action: deny, protocol: tcp, destination-port: {p}}}\n"
        ));
    }
    s.push_str("      - {action: permit}\n");
    s
}

fn hits(sw: &Switch, list: &str, seq_index: usize) -> u64 {
    let v = sw.show_json(&["show", "access-lists", list, "all"]);
    v[0]["entries"]
        .as_array()
        .and_then(|e| e.get(seq_index))
        .and_then(|e| e["hits"].as_u64())
        .unwrap_or(0)
}

#[test]
fn acl_10k_denies_never_leak_and_pass_the_rest() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("acl", 2, 1500).expect("namespaces");
    let deny = deny_ports();
    assert_eq!(deny.len(), 10_000);
    let denied: std::collections::HashSet<u16> = deny.iter().copied().collect();
    let last = deny[9_999];
    let first = deny[0];
    let mut yaml = String::from("switch:\n  name: svc-acl\n  workers: 2\naccess-lists:\n");
    yaml.push_str(&acl_yaml("deny4", "ipv4", &deny));
    yaml.push_str(&acl_yaml("deny6", "ipv6", &deny));
    // On sw2's way out IPv4 meets `out-only` instead (one list per type and
    // direction): UDP to 7777 never leaves there.
    yaml.push_str(
        "  - name: out-only\n    type: ipv4\n    rules:\n      - {action: deny, protocol: udp, destination-port: 7777, log: true}\n      - {action: permit}\n",
    );
    yaml.push_str(
        "ports:\n  - name: sw1\n    acl-in: [deny4, deny6]\n    acl-out: [deny4, deny6]\n\
         \x20 - name: sw2\n    acl-in: [deny4, deny6]\n    acl-out: [out-only, deny6]\n",
    );
    let t0 = Instant::now();
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    eprintln!("switch with 2 x 10,001-line lists up in {:?}", t0.elapsed());
    let ports = bed.open_all().expect("tester sockets");
    teach(&ports, &[(1, M2)]);

    let clean_ports: Vec<u16> = (1024u16..65535)
        .filter(|p| !denied.contains(p) && *p != 7777)
        .step_by(97)
        .take(200)
        .collect();
    let mut failures = Vec::new();
    for run in 0..3u32 {
        // Every run: different sources and source ports (different flows).
        let mut frames = Vec::new();
        let mut want: HashMap<&str, usize> = HashMap::new();
        for fam in [4u8, 6] {
            let addr = |i: u32| -> (IpAddr, IpAddr) {
                if fam == 4 {
                    (v4(0x0a10_0000 + run * 4096 + i), v4(0x0a20_0000 + (i % 50)))
                } else {
                    (
                        v6((0x2001_0db8_0010u128 << 80) + ((run as u128) << 32) + i as u128),
                        v6((0x2001_0db8_0020u128 << 80) + (i % 50) as u128),
                    )
                }
            };
            for i in 0..1000u32 {
                let (s, d) = addr(i);
                let sport = 10_000 + ((i * 31 + run * 1000) % 50_000) as u16;
                // Clean TCP: ports no rule denies.
                let p = clean_ports[i as usize % clean_ports.len()];
                frames.push(l4_frame(M2, M1, s, d, 6, sport, p, 0, 80));
                // The 10,000th deny, and the first.
                frames.push(l4_frame(M2, M1, s, d, 6, sport, last, 0, 80));
                if i % 4 == 0 {
                    frames.push(l4_frame(M2, M1, s, d, 6, sport, first, 0, 80));
                }
                // UDP to the denied port: the rules are TCP only.
                frames.push(l4_frame(M2, M1, s, d, 17, sport, last, 0, 80));
                // UDP 7777: dropped on sw2's way out (IPv4 only).
                if i % 4 == 1 {
                    frames.push(l4_frame(M2, M1, s, d, 17, sport, 7777, 0, 80));
                }
            }
            *want.entry("clean").or_default() += 1000;
            *want.entry("udp").or_default() += 1000;
            if fam == 6 {
                *want.entry("udp7777-v6").or_default() += 250;
            }
        }
        let rx = collect(&ports[1]);
        ports[0]
            .send_paced(frames.len(), 20_000, |i, b| {
                b.clear();
                b.extend_from_slice(&frames[i]);
            })
            .expect("send");
        let got = rx.join().expect("receiver");
        let mut count: HashMap<String, usize> = HashMap::new();
        for f in &got {
            let Some((fam, proto, dport, _)) = classify(f) else {
                continue;
            };
            let k = match (proto, dport) {
                (6, p) if p == last => format!("LEAK tcp {last} v{fam}"),
                (6, p) if p == first => format!("LEAK tcp {first} v{fam}"),
                (6, _) => "clean".into(),
                (17, p) if p == last => "udp".into(),
                (17, 7777) if fam == 4 => "LEAK udp 7777 v4".into(),
                (17, 7777) => "udp7777-v6".into(),
                _ => format!("other {proto}/{dport}"),
            };
            *count.entry(k).or_default() += 1;
        }
        for (k, n) in &want {
            let g = count.get(*k).copied().unwrap_or(0);
            if g != *n {
                failures.push(format!("run {run}: {k}: received {g} of {n}"));
            }
        }
        for (k, n) in &count {
            if k.starts_with("LEAK") || k.starts_with("other") {
                failures.push(format!("run {run}: {k}: {n} frames"));
            }
        }
    }
    // Hit counters: the 10,000th rule of each list saw 3 x 1,000 frames
    // on sw1's way in; the implicit deny none.
    let h4 = hits(&sw, "deny4", 9_999);
    let h6 = hits(&sw, "deny6", 9_999);
    if h4 != 3000 || h6 != 3000 {
        failures.push(format!(
            "hits of rule 10,000: deny4 {h4}, deny6 {h6}, want 3000 each"
        ));
    }
    let o = hits(&sw, "out-only", 0);
    if o != 750 {
        failures.push(format!("out-only rule 1 hits {o}, want 750"));
    }
    let c = sw.counters();
    let acl_drops = testkit::switch::port_counter(&c, "sw1", "drops.acl-deny");
    // Per run: 1,000 + 250 TCP denies per family on sw1's way in.
    if acl_drops != 3 * 2 * 1250 {
        failures.push(format!("sw1 acl-deny drops {acl_drops}, want 7500"));
    }
    let text = sw
        .cli(&["show", "access-lists", "out-only"])
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    eprintln!("{text}");
    // Matches of the `log` rule reach the switch's log (a pass a second).
    std::thread::sleep(Duration::from_millis(1300));
    if !sw
        .log()
        .contains("acl: list out-only rule 1 denied proto 17")
    {
        failures.push("no log line for out-only's logging rule".into());
    }
    if !text.contains("(750 matches)") {
        failures.push(format!("show access-lists out-only:\n{text}"));
    }
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), sw.log());
}

#[test]
fn qos_remarks_every_frame_and_polices_to_rate() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("qos", 3, 1500).expect("namespaces");
    let yaml = "switch:\n  name: svc-qos\n  workers: 2\n\
class-maps:\n  - name: voice\n    match:\n      - {protocol: udp, destination-port: 5004}\n\
\x20 - name: bulk-v6\n    match:\n      - {source: \"2001:db8:66::/48\", protocol: tcp}\n\
policy-maps:\n  - name: edge\n    classes:\n      - {class: voice, set-dscp: ef}\n      - {class: bulk-v6, set-dscp: cs1}\n      - {class: class-default, set-dscp: af11}\n\
\x20 - name: limit\n    classes:\n      - class: class-default\n        police: {cir: 8M, cbs: 48k, pbs: 48k, exceed: drop, violate: drop}\n\
ports:\n  - name: sw1\n    policy-in: edge\n  - name: sw2\n  - name: sw3\n    policy-in: limit\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("tester sockets");
    teach(&ports, &[(1, M2), (0, M1)]);
    let mut failures = Vec::new();

    // Re-marking: every frame received carries its class's DSCP, ECN kept,
    // IPv4 header checksum valid.
    let mut frames = Vec::new();
    let mut expect = Vec::new();
    for i in 0..2000u32 {
        let ecn = (i % 4) as u8;
        let tos_in = (((i % 64) as u8) << 2) | ecn;
        let (s4, d4) = (v4(0x0a01_0000 + i), v4(0x0a02_0000 + i % 7));
        let (s6, d6) = (
            v6((0x2001_0db8_0066u128 << 80) + i as u128),
            v6((0x2001_0db8_0077u128 << 80) + (i % 7) as u128),
        );
        let (s6o, _) = (v6((0x2001_0db8_0055u128 << 80) + i as u128), ());
        let cases: [(IpAddr, IpAddr, u8, u16, u8); 5] = [
            (s4, d4, 17, 5004, 46),
            (s4, d4, 17, 6000, 10),
            (s6, d6, 17, 5004, 46),
            (s6, d6, 6, 443, 8),
            (s6o, d6, 6, 443, 10),
        ];
        for (s, d, proto, dport, dscp) in cases {
            frames.push(l4_frame(M2, M1, s, d, proto, 40_000, dport, tos_in, 100));
            expect.push((dscp << 2) | ecn);
        }
    }
    let rx = collect(&ports[1]);
    ports[0]
        .send_paced(frames.len(), 20_000, |i, b| {
            b.clear();
            b.extend_from_slice(&frames[i]);
        })
        .expect("send");
    let got = rx.join().expect("receiver");
    if got.len() != frames.len() {
        failures.push(format!(
            "remark: received {} of {}",
            got.len(),
            frames.len()
        ));
    }
    let mut wrong = 0;
    for (k, f) in got.iter().enumerate() {
        let (_, _, _, tos) = classify(f).expect("ip");
        let info = testkit::ip::parse(f).expect("parses");
        // Frames of one sender arrive in order (one port, one worker).
        let want = expect.get(k).copied().unwrap_or(0xff);
        if tos != want || !info.header_ok {
            wrong += 1;
            if wrong <= 5 {
                failures.push(format!(
                    "frame {k}: tos {tos:#04x} want {want:#04x}, header ok {}",
                    info.header_ok
                ));
            }
        }
    }
    if wrong > 0 {
        failures.push(format!(
            "{wrong} frames with the wrong DSCP/ECN or checksum"
        ));
    }

    // Policing: 16 Mbit/s offered into an 8 Mbit/s policer for 4 s.
    let len = 1000usize;
    let rate = 2000u64; // frames/s = 16 Mbit/s
    let secs = 4u64;
    let frame = l4_frame(M1, M3, v4(0x0a03_0001), v4(0x0a00_0001), 17, 1, 2, 0, len);
    let rx = collect(&ports[0]);
    let took = ports[2]
        .send_paced((rate * secs) as usize, rate, |_, b| {
            b.clear();
            b.extend_from_slice(&frame);
        })
        .expect("send");
    let got = rx.join().expect("receiver");
    let bytes: usize = got
        .iter()
        .filter(|f| f.len() == len && f[6..12] == M3)
        .map(Vec::len)
        .sum();
    let burst = 48_000.0; // cbs: the buckets start full
    let passed_bps = (bytes as f64 - burst) * 8.0 / took.as_secs_f64();
    let err = (passed_bps / 8e6 - 1.0).abs();
    eprintln!(
        "policer: {bytes} bytes in {:.3} s → {:.3} Mbit/s (configured 8), error {:.2}%",
        took.as_secs_f64(),
        passed_bps / 1e6,
        err * 100.0
    );
    if err > 0.02 {
        failures.push(format!(
            "policer passed {:.3} Mbit/s, configured 8 (error {:.2}%)",
            passed_bps / 1e6,
            err * 100.0
        ));
    }
    let pm = sw.show_json(&["show", "policy-map", "interface", "sw3"]);
    let dropped = pm[0]["classes"][0]["police"]["dropped"]
        .as_u64()
        .unwrap_or(0);
    let conform = pm[0]["classes"][0]["police"]["conform"]
        .as_u64()
        .unwrap_or(0);
    if conform as usize != bytes / len || dropped + conform != rate * secs {
        failures.push(format!(
            "policer counters: conform {conform} (received {}), dropped {dropped}, offered {}",
            bytes / len,
            rate * secs
        ));
    }
    let pm1 = sw.show_json(&["show", "policy-map", "interface", "sw1"]);
    let voice = pm1[0]["classes"][0]["packets"].as_u64().unwrap_or(0);
    if voice != 4000 {
        failures.push(format!("class voice counted {voice} packets, want 4000"));
    }
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), sw.log());
}

/// (src, dst, proto, sport, dport, tos, frame length, packets).
type TestFlow = (IpAddr, IpAddr, u8, u16, u16, u8, usize, usize);

/// Flows through the switch, exported to nfcapd in the switch's
/// namespace: nfdump lists each with exactly the packets and bytes sent.
fn flow_export_to_nfcapd(version: &str, tag: &str) {
    let bed = TestBed::new(tag, 2, 1500).expect("namespaces");
    let mut collector = testkit::nfdump::Collector::start_in(tag, Some((bed.dut.name(), 2055)));
    let yaml = format!(
        "switch:\n  name: svc-flow\n  workers: 2\n\
         flow-export:\n  collector: 127.0.0.1:2055\n  version: {version}\n  inactive-timeout: 1\n  cache-size: 65536\n\
         ports:\n  - name: sw1\n  - name: sw2\n"
    );
    let mut sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("tester sockets");
    teach(&ports, &[(1, M2)]);
    let flows: Vec<TestFlow> = vec![
        (v4(0xc000_0201), v4(0xc633_6401), 17, 1111, 2222, 0, 100, 10),
        (v4(0xc000_0202), v4(0xc633_6401), 6, 3333, 80, 0, 200, 25),
        (
            v4(0xc000_0203),
            v4(0xc633_6402),
            17,
            4444,
            53,
            0xb8,
            1400,
            40,
        ),
        (
            v6(0x2001_0db8_0000_0000_0000_0000_0000_0001),
            v6(0x2001_0db8_0000_0000_0000_0000_0000_0002),
            17,
            5555,
            6666,
            0,
            300,
            15,
        ),
        (
            v6(0x2001_0db8_0000_0000_0000_0000_0000_0003),
            v6(0x2001_0db8_0000_0000_0000_0000_0000_0002),
            6,
            7777,
            443,
            0,
            1000,
            33,
        ),
    ];
    let mut frames = Vec::new();
    for &(s, d, proto, sp, dp, tos, len, n) in &flows {
        for _ in 0..n {
            frames.push(l4_frame(M2, M1, s, d, proto, sp, dp, tos, len));
        }
    }
    let rx = collect(&ports[1]);
    ports[0].send_batch(&frames).expect("send");
    let got = rx.join().expect("receiver");
    assert_eq!(got.len(), frames.len(), "every frame forwarded");
    // Inactive timeout 1 s, the sweep visits the cache about once a
    // second, the exporter sends within 100 ms.
    let cache = sw.show_json(&["show", "flow", "cache"]);
    // The test's flows plus the frame that taught the switch M2.
    assert_eq!(
        cache["flows"].as_u64(),
        Some(flows.len() as u64 + 1),
        "{cache}"
    );
    std::thread::sleep(Duration::from_millis(3500));
    let stats = sw.show_json(&["show", "flow", "cache"]);
    let _ = sw.stop();
    let rows = collector.flows();
    let mut failures = Vec::new();
    for &(s, d, proto, sp, dp, _, len, n) in &flows {
        let iplen = len - 14;
        let row = rows.iter().find(|r| {
            r.get("sa").map(String::as_str) == Some(&s.to_string())
                && r.get("da").map(String::as_str) == Some(&d.to_string())
                && r.get("sp").map(String::as_str) == Some(&sp.to_string())
                && r.get("dp").map(String::as_str) == Some(&dp.to_string())
        });
        let Some(row) = row else {
            failures.push(format!("flow {s}:{sp} -> {d}:{dp} not in nfdump output"));
            continue;
        };
        let pkts: u64 = row.get("ipkt").and_then(|v| v.parse().ok()).unwrap_or(0);
        let bytes: u64 = row.get("ibyt").and_then(|v| v.parse().ok()).unwrap_or(0);
        let pr = row.get("pr").cloned().unwrap_or_default();
        if pkts != n as u64 || bytes != (n * iplen) as u64 {
            failures.push(format!(
                "flow {s}:{sp} -> {d}:{dp}/{proto}: nfdump {pkts} packets {bytes} bytes (pr {pr}), sent {n} x {iplen}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{version}: {}\nnfdump rows: {rows:?}\nshow flow cache: {stats}\nlog: {}",
        failures.join("\n"),
        sw.log()
    );
}

#[test]
fn flow_export_netflow_v9_to_nfcapd() {
    require_root!();
    testkit::require_nfdump!();
    let _g = l2::heavy();
    flow_export_to_nfcapd("netflow-v9", "fv9");
}

#[test]
fn flow_export_ipfix_to_nfcapd() {
    require_root!();
    testkit::require_nfdump!();
    let _g = l2::heavy();
    flow_export_to_nfcapd("ipfix", "fix");
}

/// Services on routed ports: an ingress list on sw1, an egress list on
/// sw2 and re-marking in — routed frames (TTL decremented) obey all three.
#[test]
fn routed_ports_filter_and_remark() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("svr", 2, 1500).expect("namespaces");
    for (i, addr) in [(1, "10.1.0.2/24"), (2, "10.2.0.2/24")] {
        bed.tester
            .exec(&["ip", "addr", "add", addr, "dev", &format!("t{i}")])
            .unwrap();
    }
    let yaml = "switch:\n  name: svc-routed\n\
access-lists:\n  - name: in7\n    rules:\n      - {action: deny, protocol: udp, destination-port: 7}\n      - {action: permit}\n\
\x20 - name: out8\n    rules:\n      - {action: deny, protocol: udp, destination-port: 8}\n      - {action: permit}\n\
policy-maps:\n  - name: mark\n    classes:\n      - {class: class-default, set-dscp: cs5}\n\
ports:\n  - name: sw1\n    mode: routed\n    addresses: [10.1.0.1/24]\n    acl-in: [in7]\n    policy-in: mark\n\
\x20 - name: sw2\n    mode: routed\n    addresses: [10.2.0.1/24]\n    acl-out: [out8]\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let mac_of = |name: &str| -> Mac {
        let v = sw.show_json(&["show", "ip", "interface"]);
        let m = v
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r["mac"].as_str())
            .expect("router MAC")
            .to_string();
        testkit::frame::parse_mac(&m).unwrap()
    };
    let r1 = mac_of("sw1");
    let ports = bed.open_all().expect("tester sockets");
    let src = v4(0x0a01_0002);
    let dst = v4(0x0a02_0002);
    let frame = |dport: u16| l4_frame(r1, M1, src, dst, 17, 5000, dport, 0, 100);
    // Warm up: the kernel resolves 10.2.0.2 on the first packets.
    for _ in 0..5 {
        ports[0].send(&frame(9)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    ports[1].drain();
    let mut frames = Vec::new();
    for k in 0..300 {
        frames.push(frame([7, 8, 9][k % 3]));
    }
    let rx = collect(&ports[1]);
    ports[0]
        .send_paced(frames.len(), 20_000, |i, b| {
            b.clear();
            b.extend_from_slice(&frames[i]);
        })
        .expect("send");
    let got = rx.join().expect("receiver");
    let mut by_port: HashMap<u16, usize> = HashMap::new();
    let mut bad = 0;
    for f in &got {
        let (_, proto, dport, tos) = classify(f).unwrap();
        let info = testkit::ip::parse(f).expect("ip");
        if proto != 17 {
            continue;
        }
        *by_port.entry(dport).or_default() += 1;
        if tos != 40 << 2 || info.ttl != 63 || !info.header_ok || info.src_mac != mac_of("sw2") {
            bad += 1;
        }
    }
    let c = sw.counters();
    let in_drops = testkit::switch::port_counter(&c, "sw1", "drops.acl-deny");
    let out_drops = testkit::switch::port_counter(&c, "sw2", "drops.acl-deny");
    assert!(
        by_port.get(&9) == Some(&100)
            && !by_port.contains_key(&7)
            && !by_port.contains_key(&8)
            && bad == 0
            && in_drops == 100
            && out_drops == 100,
        "received by port {by_port:?}, {bad} not remarked/routed; acl-deny sw1 {in_drops} sw2 {out_drops}\n{}",
        sw.log()
    );
}
