//! Pseudowires whose uplink is a VLAN interface (SVI) on one PE and a
//! routed 802.1Q subinterface on the other (docs/mpls.md, section 9):
//!
//! ```text
//!  [ca] ac5,ac4 ── [pe-a] vlan50 (SVI) on trunk tr ══ tr.50 (subinterface) [pe-b] ── ac5,ac4 [cb]
//! ```
//!
//! pe-a's trunk carries VLAN 50 tagged only (no native VLAN), pe-b's
//! routed port takes only frames tagged 50 for its subinterface: a
//! labelled frame gets across only tagged with VLAN 50, both ways. A
//! type-5 pseudowire (control word) and a type-4 one (VLAN 100 on pe-a ↔
//! 200 on pe-b) carry frames byte for byte (VLAN id rewritten), counted
//! exactly per pseudowire, none dropped `no-path` (what every frame over
//! an SVI was before). Needs root, else SKIPPED.

use serde_json::Value;
use std::time::{Duration, Instant};
use testkit::frame::{mac, test_frame, test_info, Tag};
use testkit::netns::veth;
use testkit::pseudowire::{pseudowires as pws, wait_through};
use testkit::{l2, Netns, RawPort, Switch};

const LEN: usize = 200;
const N: usize = 50;

const PE_A: &str = "switch:\n  name: pe-a\nvlans:\n  - id: 50\n    router: {addresses: [10.93.0.1/29]}\nports:\n  - {name: tr, mode: trunk, allowed-vlans: \"50\", native-vlan: none}\n  - {name: ac5}\n  - {name: ac4}\npseudowires:\n  - {name: p5, port: ac5, neighbor: 10.93.0.2, pw-id: 5, static-labels: {local: 7005, remote: 8005}}\n  - {name: p4, port: ac4, vlan: 100, neighbor: 10.93.0.2, pw-id: 4, control-word: false, static-labels: {local: 7004, remote: 8004}}\n";

const PE_B: &str = "switch:\n  name: pe-b\nports:\n  - name: tr\n    mode: routed\n    subinterfaces:\n      - {vlan: 50, addresses: [10.93.0.2/29]}\n  - {name: ac5}\n  - {name: ac4}\npseudowires:\n  - {name: p5, port: ac5, neighbor: 10.93.0.1, pw-id: 5, static-labels: {local: 8005, remote: 7005}}\n  - {name: p4, port: ac4, vlan: 200, neighbor: 10.93.0.1, pw-id: 4, control-word: false, static-labels: {local: 8004, remote: 7004}}\n";

fn wait_up(sw: &Switch) {
    let end = Instant::now() + Duration::from_secs(15);
    while pws(sw)["up"] != 2 {
        assert!(
            Instant::now() < end,
            "not up: {}\nlog:\n{}",
            pws(sw),
            sw.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What to print when no frame gets through.
fn diag(a: &Switch, b: &Switch) -> String {
    format!("pe-a {}\npe-b {}\nlog a:\n{}", pws(a), pws(b), a.log())
}

fn row<'a>(v: &'a Value, name: &str) -> &'a Value {
    testkit::pseudowire::row(v, name).expect("pseudowire listed")
}

#[test]
fn pseudowires_over_a_vlan_interface_and_a_subinterface() {
    testkit::require_root!();
    let _g = l2::heavy();
    let ca = Netns::new("pwsvca").unwrap();
    let pa = Netns::new("pwsvpa").unwrap();
    let pb = Netns::new("pwsvpb").unwrap();
    let cb = Netns::new("pwsvcb").unwrap();
    veth(&pa, "tr", &pb, "tr", 1600).unwrap();
    for p in ["ac5", "ac4"] {
        veth(&pa, p, &ca, p, 9000).unwrap();
        veth(&pb, p, &cb, p, 9000).unwrap();
    }
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let names = ["tr", "ac5", "ac4"];
    let a = Switch::start(&bin, &pa, PE_A, &names).expect("pe-a");
    let b = Switch::start(&bin, &pb, PE_B, &names).expect("pe-b");
    wait_up(&a);
    wait_up(&b);
    let open = |ns: &Netns, p: &str| RawPort::open(ns.name(), p).unwrap();
    let (a5, a4, b5, b4) = (
        open(&ca, "ac5"),
        open(&ca, "ac4"),
        open(&cb, "ac5"),
        open(&cb, "ac4"),
    );
    wait_through(&a5, &b5, &[], LEN, || diag(&a, &b));
    wait_through(&b5, &a5, &[], LEN, || diag(&a, &b));
    wait_through(&a4, &b4, &[Tag::dot1q(100)], LEN, || diag(&a, &b));
    let (before_a, before_b) = (pws(&a), pws(&b));
    let mut failures = Vec::new();
    let frames = |tags: &[Tag], phase: u32| -> Vec<Vec<u8>> {
        (0..N)
            .map(|k| test_frame(&mac(20), &mac(10), tags, phase, k as u64, LEN + k))
            .collect()
    };
    for (what, from, to, sent, want) in [
        ("p5 a->b", &a5, &b5, frames(&[], 1), frames(&[], 1)),
        (
            "p5 b->a",
            &b5,
            &a5,
            frames(&[Tag::dot1q(7)], 2),
            frames(&[Tag::dot1q(7)], 2),
        ),
        (
            "p4 a->b",
            &a4,
            &b4,
            frames(&[Tag::dot1q(100)], 3),
            frames(&[Tag::dot1q(200)], 3),
        ),
        (
            "p4 b->a",
            &b4,
            &a4,
            frames(&[Tag::dot1q(200)], 4),
            frames(&[Tag::dot1q(100)], 4),
        ),
    ] {
        to.drain();
        for f in &sent {
            from.send(f).unwrap();
        }
        let got: Vec<Vec<u8>> = to
            .recv_test_frames(Duration::from_millis(300))
            .unwrap()
            .into_iter()
            .filter(|f| test_info(f).is_some_and(|i| i.phase != 9))
            .collect();
        if got != want {
            failures.push(format!(
                "{what}: got {} frames, want {} identical (VLAN rewritten)",
                got.len(),
                want.len()
            ));
        }
    }
    let (after_a, after_b) = (pws(&a), pws(&b));
    let d = |b: &Value, a: &Value, n: &str, k: &str| {
        row(a, n)[k].as_u64().unwrap() - row(b, n)[k].as_u64().unwrap()
    };
    for (pe, x, y) in [("pe-a", &before_a, &after_a), ("pe-b", &before_b, &after_b)] {
        for n in ["p5", "p4"] {
            for k in ["tx_packets", "rx_packets"] {
                if d(x, y, n, k) != N as u64 {
                    failures.push(format!("{pe} {n} {k} +{}, want +{N}", d(x, y, n, k)));
                }
            }
            if row(y, n)["drops"]["no-path"] != 0 {
                failures.push(format!("{pe} {n} dropped no-path: {}", row(y, n)));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}\npe-a {after_a}\npe-b {after_b}",
        failures.join("\n")
    );
}
