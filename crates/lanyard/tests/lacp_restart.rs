//! `lanyard restart` keeps its port channels (docs/ha.md, "Port channels
//! and LACP"): the image before the `exec` leaves each distributing
//! member's LACP state beside the API socket, the new image resumes those
//! members with it, and they carry traffic from its first snapshot. The
//! partner, another Lanyard here, never sees a member leave, and no frame
//! is lost either way. Before, the new image joined afresh: its first
//! LACPDUs said "out of sync", the partner stopped using every member and
//! the frames queued in the handed-over rings were dropped as arriving on
//! members not yet in the group.
//!
//! ```text
//!  tester t1 ── a1 [Lanyard A] a2,a3 ══ b2,b3 [Lanyard B] b1 ── t6 tester
//! ```
//! A is restarted under 20,000 frames/s each way. Needs root.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use testkit::frame::{mac, test_frame, Mac, BROADCAST};
use testkit::netns::veth;
use testkit::seqrx::SeqReceiver;
use testkit::{ip, l2, require_root, Netns, RawPort, Switch};

const RATE: u64 = 20_000;
const FLOWS: u32 = 64;

fn config(name: &str, p: &str) -> String {
    format!(
        "switch:\n  name: {name}\nports:\n  - {{name: {p}1}}\n  - {{name: {p}2}}\n  - {{name: {p}3}}\n\
         port-channels:\n  - {{name: po1, members: [{p}2, {p}3], lacp: active, lacp-rate: fast, load-balance: l3l4}}\n"
    )
}

fn distributing(sw: &Switch) -> Vec<bool> {
    sw.channel_distributing()
}

fn wait(secs: f64, mut ok: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// "from-to" ranges of the sequence numbers below `total` not in `seen`
/// (where a failure lost its frames).
fn missing(seen: &[u64], total: u64) -> String {
    let seen: std::collections::HashSet<u64> = seen.iter().copied().collect();
    let mut out = Vec::new();
    let mut start = None;
    for i in 0..=total {
        let gone = i < total && !seen.contains(&i);
        match (gone, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(format!("{s}-{}", i - 1));
                start = None;
            }
            _ => {}
        }
    }
    out.join(", ")
}

#[test]
fn restart_keeps_the_channel_and_loses_nothing() {
    require_root!();
    let _g = l2::heavy();
    let tester = Netns::new("lylrs-t").unwrap();
    let na = Netns::new("lylrs-a").unwrap();
    let nb = Netns::new("lylrs-b").unwrap();
    veth(&tester, "t1", &na, "a1", 1500).unwrap();
    for k in 2..=3 {
        veth(&na, &format!("a{k}"), &nb, &format!("b{k}"), 1500).unwrap();
    }
    veth(&nb, "b1", &tester, "t6", 1500).unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let a = Switch::start(&bin, &na, &config("lacp-a", "a"), &["a1", "a2", "a3"]).expect("A");
    let b = Switch::start(&bin, &nb, &config("lacp-b", "b"), &["b1", "b2", "b3"]).expect("B");
    assert!(
        wait(20.0, || distributing(&a) == [true; 2]
            && distributing(&b) == [true; 2]),
        "LACP did not form: A {:?}, B {:?}",
        distributing(&a),
        distributing(&b)
    );

    let p1 = RawPort::open(tester.name(), "t1").unwrap();
    let p6 = RawPort::open(tester.name(), "t6").unwrap();
    let (ha, hb) = (mac(0xa1), mac(0xb6));
    p6.send(&test_frame(&BROADCAST, &hb, &[], 1, 0, 64))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    p1.send(&test_frame(&BROADCAST, &ha, &[], 1, 0, 64))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let to_b = SeqReceiver::start(p6.try_clone().unwrap(), ha);
    let to_a = SeqReceiver::start(p1.try_clone().unwrap(), hb);

    let total = (RATE * 3) as usize;
    let stream = |from: &RawPort, src: Mac, to: Mac, host: u8| {
        let sender = from.try_clone().unwrap();
        std::thread::spawn(move || {
            sender
                .send_paced(total, RATE, |i, f| {
                    let s = IpAddr::V4(Ipv4Addr::new(10, 1, 0, (i as u32 % FLOWS) as u8));
                    let d = IpAddr::V4(Ipv4Addr::new(10, 2, 0, host));
                    *f = ip::udp(&to, &src, s, d, 64, i as u64, 128)
                })
                .unwrap()
        })
    };
    let ab = stream(&p1, ha, hb, 6);
    let ba = stream(&p6, hb, ha, 1);
    // B's view of its members, sampled until the streams end.
    let done = AtomicBool::new(false);
    let (b_always, out) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut always = true;
            while !done.load(Ordering::Relaxed) {
                always &= distributing(&b) == [true; 2];
                std::thread::sleep(Duration::from_millis(20));
            }
            always
        });
        std::thread::sleep(Duration::from_millis(1000));
        let out = a.cli(&["restart"]).expect("lanyard restart");
        ab.join().unwrap();
        ba.join().unwrap();
        done.store(true, Ordering::Relaxed);
        (sampler.join().unwrap(), out)
    });
    assert!(out.status.success(), "{out:?}");
    let got_b = to_b.wait_quiet(Duration::from_millis(300));
    let got_a = to_a.wait_quiet(Duration::from_millis(300));
    let log = a.log();
    let restart_lines: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("restart") || l.contains("LACP resumed") || l.contains("distributing")
        })
        .collect();
    eprintln!(
        "A restarted under {RATE} fps each way: a->b lost {} [{}], b->a lost {} [{}] of {total}; \
         B's members distributing throughout: {b_always}\n{}",
        total as u64 - got_b,
        missing(&to_b.seqs(), total as u64),
        total as u64 - got_a,
        missing(&to_a.seqs(), total as u64),
        restart_lines.join("\n")
    );
    assert!(log.contains("2 LACP members and"), "{log}");
    assert_eq!(
        log.matches("LACP resumed from before the restart").count(),
        2,
        "{log}"
    );
    assert!(b_always, "the partner took a member out during the restart");
    assert_eq!(
        got_b, total as u64,
        "frames into the channel lost across the restart"
    );
    assert_eq!(
        got_a, total as u64,
        "frames from the channel lost across the restart"
    );
    assert_eq!(to_a.dups() + to_b.dups(), 0);
    assert_eq!(distributing(&a), [true; 2]);
    assert_eq!(distributing(&b), [true; 2]);
}
