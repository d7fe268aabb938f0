//! Ethernet pseudowires (RFC 4448) end to end between two Lanyard PEs
//! back to back, labels from the configuration (`static-labels`; the same
//! data path LDP-signalled pseudowires use):
//!
//! ```text
//!  [ca] c4,c5,c6 ── ac4,ac5,ac6 [pe-a] up ══ up [pe-b] ac4,ac5,ac6 ── c4,c5,c6 [cb]
//! ```
//!
//! * two type-5 pseudowires (whole ports ac5 with control word, ac6
//!   without): untagged, 802.1Q-tagged and Q-in-Q customer frames arrive
//!   byte for byte at the far port, both directions, nowhere else;
//! * type-4 pseudowires, one per VLAN of ac4 (VLAN 100+i on pe-a, 200+i
//!   on pe-b: the far PE rewrites the VLAN id), control word on every
//!   other one: each VLAN's frame arrives once, on its own VLAN only;
//!   untagged frames and VLANs without a circuit go nowhere (counted);
//! * frames larger than the pseudowire MTU are dropped and counted;
//! * `show mpls pseudowires` counts every frame per pseudowire, on both
//!   PEs (`show l2vpn` text checked too).
//!
//! Plain bridging (ports l2 and core, VLAN 1) runs beside them: nothing
//! crosses between bridging and the circuits either way.
//! `LANYARD_PW_RATE=1` adds a one-run throughput comparison (64-byte
//! frames, 2 s each): type-5 pseudowire vs plain L2 across both switches.
//! Default: 24 type-4 + 2 type-5; `LANYARD_PW_VLANS=N` sets the number of
//! type-4 pseudowires (up to 3,072: 128 VLANs per port over as many ports
//! as needed). Needs root, else SKIPPED.

use serde_json::Value;
use std::time::{Duration, Instant};
use testkit::frame::{mac, test_frame, test_info, Tag};
use testkit::netns::veth;
use testkit::pseudowire::{pseudowires as pws, side_channel};
use testkit::{l2, Netns, RawPort, Switch};

const Q: Duration = Duration::from_millis(300);
const LEN: usize = 200;
const VLANS_PER_PORT: usize = 128;

fn type4_count() -> usize {
    std::env::var("LANYARD_PW_VLANS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
        .clamp(1, 3072)
}

/// (port name, VLAN on pe-a, VLAN on pe-b) of type-4 pseudowire `i`.
fn type4(i: usize) -> (String, u16, u16) {
    let p = i / VLANS_PER_PORT;
    let v = (i % VLANS_PER_PORT) as u16;
    (
        format!(
            "ac4{}",
            if p == 0 {
                String::new()
            } else {
                format!("x{p}")
            }
        ),
        100 + v,
        300 + v,
    )
}

fn type4_ports(n: usize) -> Vec<String> {
    (0..n.div_ceil(VLANS_PER_PORT))
        .map(|i| type4(i * VLANS_PER_PORT).0)
        .collect()
}

fn config(name: &str, me: &str, peer: &str, a_side: bool, n4: usize, sock: &str) -> String {
    let mut y = format!("switch:\n  name: {name}\nrouting:\n  pseudowire-socket: {sock}\nports:\n  - {{name: up, mode: routed, mtu: 1600, addresses: [{me}/30]}}\n  - {{name: ac5}}\n  - {{name: ac6}}\n  - {{name: l2}}\n  - {{name: core}}\n");
    for p in type4_ports(n4) {
        y.push_str(&format!("  - {{name: {p}}}\n"));
    }
    // Labels: pe-a pops 5000+x, pe-b pops 6000+x.
    let (local, remote) = if a_side { (5000, 6000) } else { (6000, 5000) };
    y.push_str("pseudowires:\n");
    y.push_str(&format!("  - {{name: t5cw, port: ac5, neighbor: {peer}, pw-id: 5, static-labels: {{local: {}, remote: {}}}}}\n", local + 5, remote + 5));
    y.push_str(&format!("  - {{name: t5, port: ac6, neighbor: {peer}, pw-id: 6, control-word: false, static-labels: {{local: {}, remote: {}}}}}\n", local + 6, remote + 6));
    // VLAN 4000 of ac4: signalled on pe-a (through the side channel, as
    // zebra would), static on pe-b.
    if a_side {
        y.push_str(&format!(
            "  - {{name: sig, port: ac4, vlan: 4000, neighbor: {peer}, pw-id: 4000}}\n"
        ));
    } else {
        y.push_str(&format!("  - {{name: sig, port: ac4, vlan: 4000, neighbor: {peer}, pw-id: 4000, static-labels: {{local: 900001, remote: 900000}}}}\n"));
    }
    for i in 0..n4 {
        let (p, va, vb) = type4(i);
        y.push_str(&format!(
            "  - {{name: v{i}, port: {p}, vlan: {}, neighbor: {peer}, pw-id: {}, control-word: {}, static-labels: {{local: {}, remote: {}}}}}\n",
            if a_side { va } else { vb },
            100_000 + i,
            i % 2 == 0,
            local + 100 + i,
            remote + 100 + i,
        ));
    }
    y
}

struct Bed {
    a: Switch,
    b: Switch,
    ca: Netns,
    cb: Netns,
    _pa: Netns,
    _pb: Netns,
    sock: std::path::PathBuf,
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.sock);
    }
}

fn by_name<'a>(v: &'a Value, name: &str) -> &'a Value {
    testkit::pseudowire::row(v, name).expect("pseudowire listed")
}

fn open(ns: &Netns, ifname: &str) -> RawPort {
    RawPort::open(ns.name(), ifname).unwrap()
}

fn start(prefix: &str, n4: usize) -> Bed {
    let ca = Netns::new(&format!("{prefix}ca")).unwrap();
    let pa = Netns::new(&format!("{prefix}pa")).unwrap();
    let pb = Netns::new(&format!("{prefix}pb")).unwrap();
    let cb = Netns::new(&format!("{prefix}cb")).unwrap();
    veth(&pa, "up", &pb, "up", 1600).unwrap();
    // Plain bridging beside the pseudowires: l2 (customer) and core
    // (PE to PE), both in VLAN 1.
    veth(&pa, "core", &pb, "core", 9000).unwrap();
    veth(&pa, "l2", &ca, "l2", 9000).unwrap();
    veth(&pb, "l2", &cb, "l2", 9000).unwrap();
    let mut ports = vec!["ac5".to_string(), "ac6".to_string()];
    ports.extend(type4_ports(n4));
    for p in &ports {
        veth(&pa, p, &ca, p, 9000).unwrap();
        veth(&pb, p, &cb, p, 9000).unwrap();
    }
    let mut names: Vec<&str> = vec!["up", "l2", "core"];
    names.extend(ports.iter().map(String::as_str));
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let sock = std::env::temp_dir().join(format!("{prefix}-pw-{}.sock", std::process::id()));
    let sock_b = std::env::temp_dir().join(format!("{prefix}-pwb-{}.sock", std::process::id()));
    let a = Switch::start(
        &bin,
        &pa,
        &config(
            "pe-a",
            "10.91.0.1",
            "10.91.0.2",
            true,
            n4,
            &sock.display().to_string(),
        ),
        &names,
    )
    .expect("start pe-a");
    let b = Switch::start(
        &bin,
        &pb,
        &config(
            "pe-b",
            "10.91.0.2",
            "10.91.0.1",
            false,
            n4,
            &sock_b.display().to_string(),
        ),
        &names,
    )
    .expect("start pe-b");
    Bed {
        a,
        b,
        ca,
        cb,
        _pa: pa,
        _pb: pb,
        sock,
    }
}

/// Sends `frames` on `from` and returns the test frames each of `to`
/// received until quiet (the first receiver waited on `Q`; by then a
/// leaked frame has reached the others too, which are drained briefly).
fn exchange(from: &RawPort, frames: &[Vec<u8>], to: &[&RawPort]) -> Vec<Vec<Vec<u8>>> {
    for f in frames {
        from.send(f).unwrap();
    }
    to.iter()
        .enumerate()
        .map(|(k, p)| {
            p.recv_test_frames(if k == 0 { Q } else { Duration::from_millis(30) })
                .unwrap()
        })
        .collect()
}

/// Frames per second delivered from ca:`port` to cb:`port` while ca
/// sends 64-byte untagged frames as fast as it can for 2 s (the access
/// port l2 takes untagged frames only).
fn throughput(bed: &Bed, port: &str) -> f64 {
    use testkit::flood::{FloodSpec, Flooder, RxCounter};
    let frames: Vec<Vec<u8>> = (0..64u64)
        .map(|k| test_frame(&mac(500), &mac(600 + k as u32), &[], 8, k, 64))
        .collect();
    let rx = RxCounter::start(bed.cb.name(), port, |f| {
        test_info(f).is_some_and(|i| i.phase == 8)
    })
    .unwrap();
    let tx = Flooder::start(
        bed.ca.name(),
        port,
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
        "{port}: sent {} ({:.0}/s), delivered {}",
        sent.sent,
        sent.pps(),
        got.matched
    );
    got.matched as f64 / sent.elapsed.as_secs_f64()
}

#[test]
fn pseudowires_carry_customer_frames_intact() {
    testkit::require_root!();
    let n4 = type4_count();
    let t0 = Instant::now();
    let bed = start("pws", n4);
    let total = (n4 + 3) as u64;
    // Every pseudowire up on both PEs: labels configured, circuit port
    // up, transport resolved (the peer is on the uplink's subnet).
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let (ua, ub) = (pws(&bed.a)["up"].as_u64(), pws(&bed.b)["up"].as_u64());
        // pe-a's signalled one waits for its install.
        if ua == Some(total - 1) && ub == Some(total) {
            break;
        }
        assert!(
            Instant::now() < end,
            "pseudowires not up: pe-a {}\npe-b {}",
            pws(&bed.a),
            pws(&bed.b)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "{} pseudowires ({} type 4 + 2 type 5) up on both PEs {:.1} s after start",
        total,
        n4 + 1,
        t0.elapsed().as_secs_f64()
    );
    let (a5, a6) = (open(&bed.ca, "ac5"), open(&bed.ca, "ac6"));
    let (b5, b6) = (open(&bed.cb, "ac5"), open(&bed.cb, "ac6"));
    let (al2, bl2) = (open(&bed.ca, "l2"), open(&bed.cb, "l2"));
    let p4: Vec<String> = type4_ports(n4);
    let a4: Vec<RawPort> = p4.iter().map(|p| open(&bed.ca, p)).collect();
    let b4: Vec<RawPort> = p4.iter().map(|p| open(&bed.cb, p)).collect();
    // The neighbour (ARP) is resolved by the PE itself; wait until a
    // frame gets through each way before counting.
    let probe = test_frame(&mac(1), &mac(2), &[], 9, 0, LEN);
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        a5.send(&probe).unwrap();
        b5.send(&probe).unwrap();
        let got_b = b5
            .recv_test_frames(Q)
            .unwrap()
            .iter()
            .any(|f| test_info(f).is_some_and(|i| i.phase == 9));
        let got_a = a5
            .recv_test_frames(Q)
            .unwrap()
            .iter()
            .any(|f| test_info(f).is_some_and(|i| i.phase == 9));
        if got_a && got_b {
            break;
        }
        assert!(
            Instant::now() < end,
            "no frame through t5cw: pe-a {}\npe-b {}\nlog a:\n{}",
            pws(&bed.a),
            pws(&bed.b),
            bed.a.log()
        );
    }
    let before_a = pws(&bed.a);
    let before_b = pws(&bed.b);
    let mut failures = Vec::new();

    // Type 5: every frame as is, both directions, nothing elsewhere.
    let kinds: Vec<Vec<Tag>> = vec![
        vec![],
        vec![Tag::dot1q(77)],
        vec![Tag::dot1ad(10), Tag::dot1q(20)],
    ];
    for (name, (src, dst, other)) in [
        ("t5cw a->b", (&a5, &b5, &b6)),
        ("t5cw b->a", (&b5, &a5, &a6)),
        ("t5 a->b", (&a6, &b6, &b5)),
        ("t5 b->a", (&b6, &a6, &a5)),
    ] {
        let frames: Vec<Vec<u8>> = kinds
            .iter()
            .enumerate()
            .map(|(k, tags)| {
                test_frame(
                    &mac(10 + k as u32),
                    &mac(20),
                    tags,
                    1,
                    k as u64,
                    LEN + 7 * k,
                )
            })
            .collect();
        let mut to: Vec<&RawPort> = vec![dst, other, &al2, &bl2];
        to.extend(b4.iter());
        to.extend(a4.iter());
        let got = exchange(src, &frames, &to);
        if got[0] != frames {
            failures.push(format!(
                "{name}: far port got {} frames, want {} identical",
                got[0].len(),
                frames.len()
            ));
        }
        for (k, g) in got.iter().enumerate().skip(1) {
            if !g.is_empty() {
                failures.push(format!("{name}: leaked {} frames to receiver {k}", g.len()));
            }
        }
    }

    // Bridging never reaches a circuit: a broadcast and a tagged frame in
    // VLAN 1 cross the core to the far l2 port and nowhere else.
    let flood = vec![
        test_frame(&[0xff; 6], &mac(30), &[], 6, 1, LEN),
        test_frame(&mac(31), &mac(30), &[], 6, 2, LEN),
    ];
    let mut to: Vec<&RawPort> = vec![&bl2, &a5, &a6, &b5, &b6];
    to.extend(a4.iter().chain(b4.iter()));
    let got = exchange(&al2, &flood, &to);
    if got[0] != flood {
        failures.push(format!(
            "bridged frames: far l2 port got {} of 2",
            got[0].len()
        ));
    }
    for (k, g) in got.iter().enumerate().skip(1) {
        if !g.is_empty() {
            failures.push(format!("bridged frames leaked to circuit receiver {k}"));
        }
    }

    // Type 4: one frame per VLAN each way; arrives on the far VLAN only.
    for dir in 0..2 {
        let (src, dst) = if dir == 0 { (&a4, &b4) } else { (&b4, &a4) };
        for (pi, port) in src.iter().enumerate() {
            let ids: Vec<usize> = (0..n4).filter(|&i| i / VLANS_PER_PORT == pi).collect();
            let frames: Vec<Vec<u8>> = ids
                .iter()
                .map(|&i| {
                    let (_, va, vb) = type4(i);
                    let v = if dir == 0 { va } else { vb };
                    test_frame(
                        &mac(100),
                        &mac(200 + i as u32),
                        &[Tag::dot1q(v)],
                        2,
                        i as u64,
                        LEN,
                    )
                })
                .collect();
            // The far port of the same index first, then every other
            // circuit port.
            let mut to: Vec<&RawPort> = vec![&dst[pi]];
            to.extend(
                dst.iter()
                    .enumerate()
                    .filter(|(k, _)| *k != pi)
                    .map(|(_, p)| p),
            );
            to.extend([&b5, &b6, &a5, &a6, &al2, &bl2]);
            let got = exchange(port, &frames, &to);
            for (k, g) in got.iter().enumerate() {
                let want: Vec<Vec<u8>> = if k == 0 {
                    ids.iter()
                        .map(|&i| {
                            let (_, va, vb) = type4(i);
                            let v = if dir == 0 { vb } else { va };
                            test_frame(
                                &mac(100),
                                &mac(200 + i as u32),
                                &[Tag::dot1q(v)],
                                2,
                                i as u64,
                                LEN,
                            )
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let mut g = g.clone();
                g.sort();
                let mut w = want.clone();
                w.sort();
                if g != w {
                    failures.push(format!(
                        "type 4 dir {dir} port {pi} -> receiver {k}: got {} frames, want {} (VLAN rewritten, otherwise identical)",
                        g.len(),
                        w.len()
                    ));
                }
            }
        }
    }

    // Untagged, a VLAN without circuit, and an oversized frame: nowhere.
    let stray = vec![
        test_frame(&mac(1), &mac(3), &[], 3, 1, LEN),
        test_frame(&mac(1), &mac(3), &[Tag::dot1q(99)], 3, 2, LEN),
    ];
    let mut to: Vec<&RawPort> = b4.iter().collect();
    to.extend([&b5, &b6]);
    let got = exchange(&a4[0], &stray, &to);
    if got.iter().any(|g| !g.is_empty()) {
        failures.push("untagged / unknown-VLAN frames on a type-4 port leaked".into());
    }
    let big = test_frame(&mac(1), &mac(4), &[], 4, 1, 1600);
    let got = exchange(&a5, &[big], &[&b5]);
    if !got[0].is_empty() {
        failures.push("a frame above the pseudowire MTU went through".into());
    }

    // Counters: every frame counted on its pseudowire, both PEs.
    let after_a = pws(&bed.a);
    let after_b = pws(&bed.b);
    let delta = |b: &Value, a: &Value, name: &str, k: &str| {
        by_name(a, name)[k].as_u64().unwrap() - by_name(b, name)[k].as_u64().unwrap()
    };
    for (name, want) in [("t5cw", 3), ("t5", 3)] {
        for (which, b, a) in [("pe-a", &before_a, &after_a), ("pe-b", &before_b, &after_b)] {
            for k in ["tx_packets", "rx_packets"] {
                let d = delta(b, a, name, k);
                if d != want {
                    failures.push(format!("{which} {name} {k} +{d}, want +{want}"));
                }
            }
        }
    }
    for i in [0, n4 - 1] {
        let d = delta(&before_a, &after_a, &format!("v{i}"), "tx_packets");
        if d != 1 {
            failures.push(format!("pe-a v{i} tx_packets +{d}, want +1"));
        }
    }
    let m = by_name(&after_a, "t5cw")["drops"]["mtu"].as_u64().unwrap();
    if m < 1 {
        failures.push("pe-a t5cw: oversized frame not counted as an mtu drop".into());
    }
    if after_a["unmatched"].as_u64().unwrap() < 2 {
        failures.push(format!("pe-a unmatched {} < 2", after_a["unmatched"]));
    }
    // The zebra module's side channel: refusals carry a reason (ldpd
    // shows the pseudowire down), an install programs the data path, an
    // uninstall removes it.
    let line = |vpn: &str, ty: u8, op: &str| {
        format!("v=1 op={op} ifname=mpw4000 vrf=0 type={ty} local=900000 remote=900001 cw=1 status=1 peer=10.91.0.2 pwid=4000 lsr=10.91.0.2 vpn={vpn} nh=10.91.0.2@2/3\n")
    };
    let r = side_channel(&bed.sock, &line("NOPE", 4, "pw-install")).expect("side channel");
    if !r.starts_with("err no attachment circuit") {
        failures.push(format!("install without a circuit answered {r:?}"));
    }
    let r = side_channel(&bed.sock, &line("sig", 5, "pw-install")).expect("side channel");
    if !r.starts_with("err type 5") {
        failures.push(format!("type mismatch answered {r:?}"));
    }
    let r = side_channel(&bed.sock, "v=1 op=pw-install garbage").expect("side channel");
    if !r.starts_with("err malformed") {
        failures.push(format!("a malformed line answered {r:?}"));
    }
    let sig_frame = |seq: u64| test_frame(&mac(7), &mac(8), &[Tag::dot1q(4000)], 5, seq, LEN);
    let got = exchange(&a4[0], &[sig_frame(1)], &[&b4[0]]);
    if !got[0].is_empty() {
        failures.push("the signalled pseudowire forwarded before its install".into());
    }
    let r = side_channel(&bed.sock, &line("sig", 4, "pw-install")).expect("side channel");
    if r != "ok" {
        failures.push(format!("install answered {r:?}: {}", pws(&bed.a)));
    }
    let sig = by_name(&pws(&bed.a), "sig").clone();
    if sig["up"] != true || sig["local_label"] != 900000 || sig["remote_label"] != 900001 {
        failures.push(format!("after install: {sig}"));
    }
    let got = exchange(&a4[0], &[sig_frame(2)], &[&b4[0]]);
    if got[0] != [sig_frame(2)] {
        failures.push(format!(
            "signalled pseudowire a->b: {} frames",
            got[0].len()
        ));
    }
    let got = exchange(&b4[0], &[sig_frame(3)], &[&a4[0]]);
    if got[0] != [sig_frame(3)] {
        failures.push(format!(
            "signalled pseudowire b->a: {} frames",
            got[0].len()
        ));
    }
    let r = side_channel(&bed.sock, &line("sig", 4, "pw-uninstall")).expect("side channel");
    let got = exchange(&a4[0], &[sig_frame(4)], &[&b4[0]]);
    if r != "ok" || !got[0].is_empty() || by_name(&pws(&bed.a), "sig")["up"] != false {
        failures.push(format!(
            "uninstall answered {r:?}, then {} frames went through",
            got[0].len()
        ));
    }

    if std::env::var_os("LANYARD_PW_RATE").is_some() {
        let (pw, l2) = (throughput(&bed, "ac6"), throughput(&bed, "l2"));
        eprintln!(
            "throughput (2 cores, shared; one run): pseudowire type 5 {pw:.0} frames/s, plain L2 across both switches {l2:.0} frames/s, ratio {:.2}",
            pw / l2.max(1.0)
        );
        if pw == 0.0 || l2 == 0.0 {
            failures.push(format!(
                "throughput run delivered nothing: pw {pw}, l2 {l2}"
            ));
        }
    }

    // The text view reads like a PE's.
    let text = bed.a.cli(&["show", "l2vpn"]).unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    if !text.contains("t5cw") || !text.contains("ac4.100") || !text.contains("eth-vlan") {
        failures.push(format!("show l2vpn text unexpected:\n{text}"));
    }
    eprintln!("{text}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
