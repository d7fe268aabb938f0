//! 24 port-mode (type 5) pseudowires at once (issue 17's 24 whole-port
//! circuits), between two Lanyard PEs back to back with static labels:
//!
//! ```text
//!  [ca] p0..p23 ── p0..p23 [pe-a] up ══ up [pe-b] p0..p23 ── p0..p23 [cb]
//! ```
//!
//! Every customer port sends its frames at the same time (untagged,
//! 802.1Q and Q-in-Q, half with and half without control word), both
//! directions: each far port receives exactly its own frames byte for
//! byte and nothing of the others, and `show mpls pseudowires` counts
//! exactly that many frames into and out of each pseudowire on both PEs.
//! Needs root, else SKIPPED.

use serde_json::Value;
use std::time::{Duration, Instant};
use testkit::frame::{mac, test_frame, test_info, Tag};
use testkit::netns::veth;
use testkit::pseudowire::pseudowires as pws;
use testkit::{l2, Netns, RawPort, Switch};

const PWS: usize = 24;
/// Frames per pseudowire and direction.
const K: usize = 30;

fn config(a_side: bool) -> String {
    let (me, peer, local, remote) = if a_side {
        ("10.94.0.1", "10.94.0.2", 7000, 8000)
    } else {
        ("10.94.0.2", "10.94.0.1", 8000, 7000)
    };
    let mut y = format!(
        "switch:\n  name: pe-{}\nports:\n  - {{name: up, mode: routed, mtu: 1600, addresses: [{me}/30]}}\n",
        if a_side { "a" } else { "b" }
    );
    for i in 0..PWS {
        y.push_str(&format!("  - {{name: p{i}}}\n"));
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
    y
}

fn row(v: &Value, i: usize) -> &Value {
    v["pseudowires"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == format!("w{i}"))
        .unwrap()
}

/// Frame `k` of pseudowire `i` in direction `dir`: the source MAC names
/// the pseudowire, the sequence the frame; tags vary.
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

#[test]
fn twenty_four_port_mode_pseudowires_at_once() {
    testkit::require_root!();
    let _g = l2::heavy();
    let t0 = Instant::now();
    let ca = Netns::new("pwptca").unwrap();
    let pa = Netns::new("pwptpa").unwrap();
    let pb = Netns::new("pwptpb").unwrap();
    let cb = Netns::new("pwptcb").unwrap();
    veth(&pa, "up", &pb, "up", 1600).unwrap();
    let ports: Vec<String> = (0..PWS).map(|i| format!("p{i}")).collect();
    for p in &ports {
        veth(&pa, p, &ca, p, 9000).unwrap();
        veth(&pb, p, &cb, p, 9000).unwrap();
    }
    let mut names: Vec<&str> = vec!["up"];
    names.extend(ports.iter().map(String::as_str));
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let a = Switch::start(&bin, &pa, &config(true), &names).expect("pe-a");
    let b = Switch::start(&bin, &pb, &config(false), &names).expect("pe-b");
    let end = Instant::now() + Duration::from_secs(20);
    while pws(&a)["up"] != PWS || pws(&b)["up"] != PWS {
        assert!(
            Instant::now() < end,
            "not all up: pe-a {}\npe-b {}",
            pws(&a),
            pws(&b)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let open = |ns: &Netns| -> Vec<RawPort> {
        ports
            .iter()
            .map(|p| RawPort::open(ns.name(), p).unwrap())
            .collect()
    };
    let (ra, rb) = (open(&ca), open(&cb));
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
    for p in ra.iter().chain(&rb) {
        p.drain();
    }
    let (before_a, before_b) = (pws(&a), pws(&b));
    let mut failures = Vec::new();
    for dir in 0..2u32 {
        let (src, dst) = if dir == 0 { (&ra, &rb) } else { (&rb, &ra) };
        // All 24 at once: frame k of every pseudowire, then k + 1.
        for k in 0..K {
            for (i, p) in src.iter().enumerate() {
                p.send(&frame(i, dir, k)).unwrap();
            }
        }
        for (i, p) in dst.iter().enumerate() {
            let got: Vec<Vec<u8>> = p
                .recv_test_frames(Duration::from_millis(if i == 0 { 400 } else { 50 }))
                .unwrap()
                .into_iter()
                .filter(|f| test_info(f).is_some_and(|t| t.phase == 1 + dir))
                .collect();
            let want: Vec<Vec<u8>> = (0..K).map(|k| frame(i, dir, k)).collect();
            if got != want {
                let foreign = got
                    .iter()
                    .filter(|f| test_info(f).is_some_and(|t| t.src != mac(1000 + i as u32)))
                    .count();
                failures.push(format!(
                    "dir {dir} w{i}: {} frames at the far port ({foreign} of another pseudowire), want its {K} in order",
                    got.len()
                ));
            }
        }
    }
    let (after_a, after_b) = (pws(&a), pws(&b));
    let d = |x: &Value, y: &Value, i: usize, k: &str| {
        row(y, i)[k].as_u64().unwrap() - row(x, i)[k].as_u64().unwrap()
    };
    for (pe, x, y) in [("pe-a", &before_a, &after_a), ("pe-b", &before_b, &after_b)] {
        for i in 0..PWS {
            for k in ["tx_packets", "rx_packets"] {
                if d(x, y, i, k) != K as u64 {
                    failures.push(format!("{pe} w{i} {k} +{}, want +{K}", d(x, y, i, k)));
                }
            }
        }
    }
    eprintln!(
        "{PWS} type-5 pseudowires, {K} frames each way each, whole test {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
