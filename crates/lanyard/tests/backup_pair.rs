//! Backup port pairs (issue 7, F-HA): a primary and a standby uplink.
//! While the primary is up the backup neither forwards nor receives; when
//! the primary's link goes (carrier off from the far end), every address
//! learned on it leaves by the backup at once — unicast, not flooded —
//! and a MAC-move update carries the addresses behind the switch out of
//! the backup. Without preemption the backup stays active when the primary
//! returns; losing the backup goes back to the primary. A keepalive
//! declares a silent primary down even with its link up.

use std::time::{Duration, Instant};

use testkit::frame::{mac, mac_in, test_frame, test_info, Mac, BROADCAST};
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

const UPSTREAM: u32 = 1000;
const RATE: u64 = 20_000;
const MAC_MOVE: Mac = [0x03, 0x4c, 0x59, 0x4d, 0x4d, 0x55];

fn config(extra: &str) -> String {
    format!(
        "switch:\n  name: bpair\nvlans:\n  - id: 10\nports:\n\
         \x20 - {{name: sw1, vlan: 10}}\n  - {{name: sw2, vlan: 10}}\n\
         \x20 - {{name: sw3, vlan: 10}}\n  - {{name: sw4, vlan: 10}}\n\
         backup-pairs:\n  - {{primary: sw2, backup: sw3{extra}}}\n"
    )
}

fn upstream(i: u32) -> Mac {
    mac_in(7, i)
}

fn pair_state(sw: &Switch) -> serde_json::Value {
    sw.try_show_json(&["show", "backup-pairs"])
        .expect("show backup-pairs")[0]
        .clone()
}

fn wait_active(sw: &Switch, port: &str) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let p = pair_state(sw);
        if p["active"] == port || t0.elapsed() > Duration::from_secs(5) {
            return p;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Teach the switch the upstream addresses on `port` (frames to nowhere),
/// and wait until the learner has them all: a frame counted as received is
/// learned a moment later, and a stream started in that moment floods.
fn learn_upstream(sw: &Switch, port: &RawPort, sw_port: &str) {
    let before = sw.mac_count(None);
    let frames: Vec<Vec<u8>> = (0..UPSTREAM)
        .map(|i| test_frame(&BROADCAST, &upstream(i), &[], 1, i as u64, 64))
        .collect();
    l2::send_settled(sw, port, sw_port, &frames);
    let want = before + UPSTREAM as u64;
    let got = sw.wait_mac_count(None, want, Duration::from_secs(5));
    assert_eq!(got, want, "upstream addresses learned");
}

#[test]
fn failover_redirects_learned_addresses_at_once() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("lybp", 4, 1500).expect("namespaces");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &config(""),
        &["sw1", "sw2", "sw3", "sw4"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("tester sockets");
    let (h1, h4) = (mac(1), mac(4));

    // The standby receives nothing and forwards nothing.
    ports[0]
        .send(&test_frame(&BROADCAST, &h1, &[], 2, 0, 64))
        .unwrap();
    ports[3]
        .send(&test_frame(&BROADCAST, &h4, &[], 2, 1, 64))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let p = pair_state(&sw);
    assert_eq!(p["active"], "sw2");
    assert_eq!(p["backup_state"], "standby");
    let got3 = ports[2]
        .recv_test_frames(Duration::from_millis(300))
        .unwrap();
    assert!(
        got3.is_empty(),
        "the standby port sent {} frames",
        got3.len()
    );
    for p in &ports {
        p.drain();
    }
    ports[2]
        .send(&test_frame(&BROADCAST, &mac(3), &[], 2, 2, 64))
        .unwrap();
    let got1 = ports[0]
        .recv_test_frames(Duration::from_millis(300))
        .unwrap();
    assert!(got1.is_empty(), "a frame from the standby was forwarded");

    learn_upstream(&sw, &ports[1], "sw2");
    for p in &ports {
        p.drain();
    }

    // Constant-rate stream from h1 to the upstream addresses; the primary's
    // far end goes down in the middle.
    // Port 4 keeps what it gets: a flood says when it happened.
    let caps: Vec<_> = ports
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let keep = if k == 3 { 64 } else { 0 };
            p.start_capture(keep, |i, _| i.phase == 5).unwrap()
        })
        .collect();
    let mmu = bed.open(3).unwrap();
    let total = (RATE * 3 / 2) as usize;
    let sender = ports[0].try_clone().unwrap();
    let tx = std::thread::spawn(move || {
        sender
            .send_paced(total, RATE, |i, b| {
                *b = test_frame(&upstream(i as u32 % UPSTREAM), &h1, &[], 5, i as u64, 64)
            })
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(500));
    bed.tester
        .exec(&["ip", "link", "set", "t2", "down"])
        .unwrap();
    let took = tx.join().unwrap();
    let results: Vec<_> = caps
        .into_iter()
        .map(|c| {
            c.wait_quiet(Duration::from_millis(300), Duration::from_secs(3));
            c.stop().unwrap()
        })
        .collect();
    let counts: Vec<u64> = results.iter().map(|r| r.matched).collect();
    let flooded: Vec<u64> = results[3]
        .kept
        .iter()
        .filter_map(|f| test_info(f).map(|i| i.seq))
        .collect();
    let rate = total as f64 / took.as_secs_f64();
    let lost = total as u64 - counts[1] - counts[2];
    eprintln!(
        "sent {total} in {took:?}: primary {} backup {} flooded-to-sw4 {} lost {lost} ({:.2} ms at {rate:.0} fps)",
        counts[1],
        counts[2],
        counts[3],
        lost as f64 * 1000.0 / rate
    );
    assert!(counts[1] > 0 && counts[2] > 0, "{counts:?}");
    assert_eq!(
        counts[3],
        0,
        "after failover the addresses must be unicast, not flooded (sequence numbers \
         {flooded:?}; the failover came after frame {})",
        RATE / 2
    );
    assert_eq!(counts[0], 0);
    // Generous: the lab measures convergence; this catches a 100 ms poll.
    assert!(
        (lost as f64) < rate * 0.05,
        "lost {lost} frames: more than 50 ms of traffic"
    );
    let p = wait_active(&sw, "sw3");
    assert_eq!(p["primary_state"], "down");
    assert_eq!(p["failovers"], 1);

    // The MAC-move update: h1 and h4 (behind the switch) from the backup,
    // never the upstream addresses.
    let mut srcs = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        match mmu.recv_timeout(Duration::from_millis(300)).unwrap() {
            Some(f) if f[0..6] == MAC_MOVE => srcs.push(<Mac>::try_from(&f[6..12]).unwrap()),
            Some(_) => {}
            None => break,
        }
    }
    srcs.sort();
    assert_eq!(srcs, vec![h1, h4], "MAC-move update sources");

    // The primary returns: no preemption, it stays standby.
    bed.tester.exec(&["ip", "link", "set", "t2", "up"]).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let p = pair_state(&sw);
    assert_eq!(p["active"], "sw3");
    assert_eq!(p["primary_state"], "standby");
    for p in &ports {
        p.drain();
    }
    let frames: Vec<Vec<u8>> = (0..100)
        .map(|i| test_frame(&upstream(i), &h1, &[], 6, i as u64, 64))
        .collect();
    ports[0].send_batch(&frames).unwrap();
    assert_eq!(
        ports[2]
            .recv_test_frames(Duration::from_millis(300))
            .unwrap()
            .len(),
        100
    );
    assert!(ports[1]
        .recv_test_frames(Duration::from_millis(100))
        .unwrap()
        .is_empty());

    // The backup fails: back to the primary, addresses still unicast.
    bed.tester
        .exec(&["ip", "link", "set", "t3", "down"])
        .unwrap();
    let p = wait_active(&sw, "sw2");
    assert_eq!(p["active"], "sw2");
    assert_eq!(p["failovers"], 2);
    ports[0].send_batch(&frames).unwrap();
    assert_eq!(
        ports[1]
            .recv_test_frames(Duration::from_millis(300))
            .unwrap()
            .len(),
        100
    );
    assert!(ports[3]
        .recv_test_frames(Duration::from_millis(100))
        .unwrap()
        .is_empty());
}

#[test]
fn preemption_and_keepalive() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("lybk", 4, 1500).expect("namespaces");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &config(", preempt: true, preempt-delay-ms: 300, keepalive-ms: 150"),
        &["sw1", "sw2", "sw3", "sw4"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("tester sockets");
    // The peers' keepalives: anything received counts.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let silent2 = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let peer = {
        let (p2, p3) = (ports[1].try_clone().unwrap(), ports[2].try_clone().unwrap());
        let (stop, silent2) = (stop.clone(), silent2.clone());
        std::thread::spawn(move || {
            use std::sync::atomic::Ordering::Relaxed;
            let ka = test_frame(&mac_in(9, 1), &mac_in(9, 2), &[], 9, 0, 64);
            while !stop.load(Relaxed) {
                if !silent2.load(Relaxed) {
                    let _ = p2.send(&ka);
                }
                let _ = p3.send(&ka);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // Until the peers are heard both members count as silent (as a BFD
    // session starts down): wait for the primary to be back in charge.
    let p = wait_active(&sw, "sw2");
    std::thread::sleep(Duration::from_millis(400));
    let p0 = pair_state(&sw);
    assert_eq!(p0["active"], "sw2", "{p}");
    assert_eq!(p0["primary_state"], "forwarding");
    let base = p0["failovers"].as_u64().unwrap();

    // The primary goes silent with its link up: the keepalive fails over.
    silent2.store(true, std::sync::atomic::Ordering::Relaxed);
    let t0 = Instant::now();
    let p = wait_active(&sw, "sw3");
    eprintln!("keepalive failover after {:?}", t0.elapsed());
    assert_eq!(p["active"], "sw3");
    assert_eq!(p["primary_state"], "keepalive-lost");

    // It speaks again: preemption after its delay.
    silent2.store(false, std::sync::atomic::Ordering::Relaxed);
    let t0 = Instant::now();
    let p = wait_active(&sw, "sw2");
    let took = t0.elapsed();
    eprintln!("preempted after {took:?}");
    assert_eq!(p["active"], "sw2");
    assert!(
        took >= Duration::from_millis(250),
        "preempt delay not honoured: {took:?}"
    );
    assert_eq!(p["failovers"].as_u64().unwrap(), base + 2);
    // Lanyard's own keepalives reach the peers.
    let ka: Vec<u8> = loop {
        match ports[2].recv_timeout(Duration::from_secs(1)).unwrap() {
            Some(f) if f[0..6] == [0x03, 0x4c, 0x59, 0x4b, 0x41, 0x00] => break f,
            Some(_) => continue,
            None => panic!("no keepalive from Lanyard on the backup"),
        }
    };
    assert_eq!(&ka[12..14], &[0x88, 0xb5]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    peer.join().unwrap();
}
