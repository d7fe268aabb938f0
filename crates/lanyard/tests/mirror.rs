//! Port mirroring (issue 7, F-MGMT): eight SPAN sessions at once — by
//! port and by VLAN, rx / tx / both — each delivering exactly the frames
//! of its sources, byte for byte (as received for rx, as sent for tx).

use std::collections::HashMap;
use std::time::Duration;

use testkit::frame::{mac, test_frame, Tag, BROADCAST};
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

const QUIET: Duration = Duration::from_millis(700);

/// Frames as a sorted list, for multiset comparison.
fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

#[test]
fn eight_sessions_copy_exactly_their_sources() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("span", 11, 1500).expect("namespaces");
    let mut yaml = String::from(
        "switch:\n  name: span\n  workers: 2\nvlans:\n  - id: 10\n  - id: 20\nports:\n\
         \x20 - {name: sw1, vlan: 10}\n  - {name: sw2, vlan: 10}\n\
         \x20 - {name: sw3, mode: trunk, allowed-vlans: \"10,20\"}\n",
    );
    for i in 4..=11 {
        yaml.push_str(&format!("  - {{name: sw{i}}}\n"));
    }
    yaml.push_str(
        "mirror-sessions:\n\
         \x20 - {name: rx1, source-ports: [sw1], direction: rx, destination: sw4}\n\
         \x20 - {name: tx1, source-ports: [sw1], direction: tx, destination: sw5}\n\
         \x20 - {name: both2, source-ports: [sw2], destination: sw6}\n\
         \x20 - {name: v10rx, source-vlans: [10], direction: rx, destination: sw7}\n\
         \x20 - {name: v10tx, source-vlans: [10], direction: tx, destination: sw8}\n\
         \x20 - {name: multi, source-ports: [sw1, sw3], direction: both, destination: sw9}\n\
         \x20 - {name: rx3, source-ports: [sw3], direction: rx, destination: sw10}\n\
         \x20 - {name: tx3, source-ports: [sw3], direction: tx, destination: sw11}\n",
    );
    let names: Vec<String> = (1..=11).map(|i| format!("sw{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &refs,
    )
    .expect("start lanyard");
    let ports: Vec<RawPort> = bed.open_all().expect("tester sockets");
    let (m1, m2, m3) = (mac(1), mac(2), mac(3));
    // Learning: one broadcast from each traffic port, then quiet.
    ports[0]
        .send(&test_frame(&BROADCAST, &m1, &[], 1, 0, 64))
        .unwrap();
    ports[1]
        .send(&test_frame(&BROADCAST, &m2, &[], 1, 1, 64))
        .unwrap();
    ports[2]
        .send(&test_frame(&BROADCAST, &m3, &[Tag::dot1q(10)], 1, 2, 68))
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    for p in &ports {
        p.drain();
    }
    // Receivers on every tester port.
    let rx: Vec<_> = ports
        .iter()
        .map(|p| {
            let p = p.try_clone().unwrap();
            std::thread::spawn(move || p.recv_test_frames(QUIET).unwrap())
        })
        .collect();
    let mut sent: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    for k in 0..200u64 {
        sent[0].push(test_frame(&m2, &m1, &[], 2, k, 64 + (k as usize % 7) * 100));
        sent[1].push(test_frame(&m1, &m2, &[], 3, k, 200));
        if k < 100 {
            sent[2].push(test_frame(&m1, &m3, &[Tag::dot1q(10)], 4, k, 300));
        }
    }
    for (i, frames) in sent.iter().enumerate() {
        ports[i]
            .send_paced(frames.len(), 10_000, |k, b| {
                b.clear();
                b.extend_from_slice(&frames[k]);
            })
            .unwrap();
    }
    let got: Vec<Vec<Vec<u8>>> = rx.into_iter().map(|h| h.join().unwrap()).collect();
    // What each traffic port received: the "as sent" side of tx mirrors.
    let (r1, r2, r3) = (got[0].clone(), got[1].clone(), got[2].clone());
    assert_eq!(r1.len(), 300, "t1 receives t2's and t3's frames");
    assert_eq!(r2.len(), 200, "t2 receives t1's frames");
    let cat = |parts: &[&Vec<Vec<u8>>]| -> Vec<Vec<u8>> {
        parts.iter().flat_map(|p| p.iter().cloned()).collect()
    };
    let want: HashMap<usize, Vec<Vec<u8>>> = HashMap::from([
        (3, cat(&[&sent[0]])),                     // rx1: in on sw1
        (4, cat(&[&r1])),                          // tx1: out of sw1
        (5, cat(&[&sent[1], &r2])),                // both2
        (6, cat(&[&sent[0], &sent[1], &sent[2]])), // v10rx
        (7, cat(&[&r1, &r2, &r3])),                // v10tx
        (8, cat(&[&sent[0], &r1, &sent[2], &r3])), // multi
        (9, cat(&[&sent[2]])),                     // rx3
        (10, cat(&[&r3])),                         // tx3
    ]);
    let mut failures = Vec::new();
    for (idx, w) in &want {
        let g = &got[*idx];
        if sorted(g.clone()) != sorted(w.clone()) {
            failures.push(format!(
                "sw{}: {} copies, want {} (first got {:02x?})",
                idx + 1,
                g.len(),
                w.len(),
                g.first().map(|f| &f[..f.len().min(20)])
            ));
        }
    }
    let show = sw.show_json(&["show", "monitor"]);
    let copies: u64 = show
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tx_frames"].as_u64().unwrap_or(0))
        .sum();
    let expected: usize = want.values().map(Vec::len).sum();
    if copies < expected as u64 {
        failures.push(format!(
            "show monitor counts {copies} copies, want ≥ {expected}"
        ));
    }
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), sw.log());
}

/// Eight sessions copying one busy port at once (each copy a full TX
/// write): at 20,000 frames/s of mixed sizes the worker writes 180,000
/// frames/s; every destination must get every frame sw1 received, byte for
/// byte, and the same as every other destination.
#[test]
fn eight_sessions_under_load_lose_no_copy() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("spanl", 10, 1500).expect("namespaces");
    let mut yaml = String::from("switch:\n  name: spanl\nports:\n");
    for i in 1..=10 {
        yaml.push_str(&format!("  - {{name: sw{i}}}\n"));
    }
    yaml.push_str("mirror-sessions:\n");
    for d in 3..=10 {
        yaml.push_str(&format!(
            "  - {{name: s{d}, source-ports: [sw1], direction: rx, destination: sw{d}}}\n"
        ));
    }
    let names: Vec<String> = (1..=10).map(|i| format!("sw{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let _sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &refs,
    )
    .expect("start lanyard");
    let ports: Vec<RawPort> = bed.open_all().expect("tester sockets");
    let (m1, m2) = (mac(1), mac(2));
    ports[1]
        .send(&test_frame(&BROADCAST, &m2, &[], 1, 0, 64))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for p in &ports {
        p.drain();
    }
    const N: usize = 20_000;
    let caps: Vec<_> = ports[1..]
        .iter()
        .map(|p| p.start_capture(N, |i, _| i.phase == 8).unwrap())
        .collect();
    let frames: Vec<Vec<u8>> = (0..N)
        .map(|k| test_frame(&m2, &m1, &[], 8, k as u64, 64 + (k * 37) % 1400))
        .collect();
    ports[0]
        .send_paced(N, 20_000, |k, b| {
            b.clear();
            b.extend_from_slice(&frames[k]);
        })
        .unwrap();
    let got: Vec<Vec<Vec<u8>>> = caps
        .into_iter()
        .map(|c| {
            c.wait_for(
                N as u64,
                Duration::from_secs(10),
                Duration::from_millis(300),
            );
            sorted(c.stop().unwrap().kept)
        })
        .collect();
    let want = sorted(frames);
    let counts: Vec<usize> = got.iter().map(Vec::len).collect();
    eprintln!("copies per port (sw2 forwarded, sw3..sw10 mirrors): {counts:?}");
    for (k, g) in got.iter().enumerate() {
        assert!(
            *g == want,
            "sw{}: {} frames, want {} byte-identical",
            k + 2,
            g.len(),
            want.len()
        );
    }
}
