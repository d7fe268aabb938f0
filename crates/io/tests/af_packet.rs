//! AF_PACKET port tests on a veth pair inside a throwaway network namespace.
//! They need root (CAP_NET_ADMIN + CAP_SYS_ADMIN for setns); without it they
//! print a note and pass.

use io::af_packet::RxRing;
use io::{link, AfPacketOptions, AfPacketPort, FrameBatch, Port, PortError, MAX_FRAME_LEN};
use std::time::{Duration, Instant};

mod common;
use common::{wait_oper_up, Netns};

const MARK: [u8; 2] = [0x88, 0xb5]; // IEEE local experimental ethertype
const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// Options `base` with ring version `ring`.
fn with(ring: RxRing, base: AfPacketOptions) -> AfPacketOptions {
    AfPacketOptions {
        rx_ring: ring,
        ..base
    }
}
fn full(ring: RxRing) -> AfPacketOptions {
    with(ring, AfPacketOptions::default())
}
fn rx_only(ring: RxRing) -> AfPacketOptions {
    with(ring, AfPacketOptions::rx_only())
}
fn tx_only(ring: RxRing) -> AfPacketOptions {
    with(ring, AfPacketOptions::tx_only())
}

/// A test run once per ring version: `NAME_v3` and `NAME_v2`.
macro_rules! both_rings {
    ($body:ident: $v3:ident, $v2:ident) => {
        #[test]
        fn $v3() {
            $body(RxRing::V3);
        }
        #[test]
        fn $v2() {
            $body(RxRing::V2);
        }
    };
}

impl Netns {
    /// A namespace with a veth pair `a`/`b`, both up, MTU 9300, no IPv6.
    /// `None` (after printing why) when not root.
    fn with_veth() -> Option<Netns> {
        let ns = Netns::new("lyio")?;
        ns.veth("a", "b", 9300);
        ns.enter(|| {
            wait_oper_up("a");
            wait_oper_up("b");
        });
        Some(ns)
    }
}

/// Write test frame `seq` of length `len` into `buf`.
fn fill(buf: &mut [u8], seq: u32, len: usize) {
    buf[0..6].copy_from_slice(&DST);
    buf[6..12].copy_from_slice(&SRC);
    buf[12..14].copy_from_slice(&MARK);
    buf[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in buf[18..len].iter_mut().enumerate() {
        *b = (seq as usize * 31 + i) as u8;
    }
}

fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill(&mut v, seq, len);
    v
}

fn len_of(seq: u32) -> usize {
    if seq % 97 == 13 {
        9216
    } else {
        60 + (seq as usize * 7919) % (9216 - 60 + 1)
    }
}

fn poll_in(p: &AfPacketPort, ms: i32) {
    let mut pfd = libc::pollfd {
        fd: p.rx_fd().unwrap(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, ms) };
}

/// Receive on `p` until `want` marked frames arrived or `timeout`.
fn recv_marked(p: &mut AfPacketPort, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut b = FrameBatch::new();
    let t = Instant::now();
    while got.len() < want && t.elapsed() < timeout {
        b.clear();
        if p.recv(&mut b, 0).unwrap() == 0 {
            poll_in(p, 5);
        }
        for i in 0..b.len() {
            let f = b.frame(i);
            // Marked at 12 (untagged), 16 (one tag) or 20 (two tags).
            if [12, 16, 20]
                .iter()
                .any(|&o| f.len() >= o + 2 && f[o..o + 2] == MARK)
            {
                got.push(f.to_vec());
            }
        }
    }
    got
}

fn ten_thousand_mixed_frames_arrive_exactly(ring: RxRing) {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        let mut a = AfPacketPort::open("a", &full(ring)).unwrap();
        let mut b = AfPacketPort::open("b", &rx_only(ring)).unwrap();
        assert!(b.rx_fd().is_some());
        const N: u32 = 10_000;
        let (mut next, mut got, mut others) = (0u32, 0u32, 0u32);
        let mut batch = FrameBatch::new();
        let t = Instant::now();
        while got < N && t.elapsed() < Duration::from_secs(60) {
            for _ in 0..32 {
                if next == N {
                    break;
                }
                let len = len_of(next);
                let Some(slot) = a.tx_slot() else { break };
                fill(slot, next, len);
                a.tx_commit(len);
                next += 1;
            }
            a.flush().unwrap();
            batch.clear();
            if b.recv(&mut batch, 1).unwrap() == 0 {
                poll_in(&b, 1);
            }
            for i in 0..batch.len() {
                assert_eq!(batch.port(i), 1);
                let f = batch.frame(i);
                if f[12..14] != MARK {
                    others += 1;
                    continue;
                }
                let seq = u32::from_be_bytes(f[14..18].try_into().unwrap());
                assert_eq!(seq, got, "frames in order, none lost");
                assert_eq!(f.len(), len_of(seq), "length of frame {seq}");
                assert!(f == &frame(seq, len_of(seq))[..], "bytes of frame {seq}");
                got += 1;
            }
        }
        assert_eq!(got, N, "received all frames ({others} unrelated)");
        let sb = b.stats();
        assert_eq!(sb.rx_ring_drops, 0);
        assert_eq!(sb.rx_truncated, 0);
        let sa = a.stats();
        assert_eq!(sa.tx_errors, 0);
        // PACKET_IGNORE_OUTGOING: a does not see its own transmissions.
        let echo = recv_marked(&mut a, 1, Duration::from_millis(50));
        assert!(echo.is_empty(), "sender received its own frames");
        eprintln!(
            "10k mixed frames: ok in {:?}, tx_ring_full {}",
            t.elapsed(),
            sa.tx_ring_full
        );
    });
}
both_rings!(ten_thousand_mixed_frames_arrive_exactly: ten_thousand_mixed_frames_arrive_exactly_v3, ten_thousand_mixed_frames_arrive_exactly_v2);

fn vlan_tags_are_put_back_exactly(ring: RxRing) {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        let mut a = AfPacketPort::open("a", &tx_only(ring)).unwrap();
        let mut b = AfPacketPort::open("b", &rx_only(ring)).unwrap();
        assert!(a.rx_fd().is_none());
        let mk = |tags: &[[u8; 4]], len: usize| {
            let mut f = Vec::new();
            f.extend_from_slice(&DST);
            f.extend_from_slice(&SRC);
            for t in tags {
                f.extend_from_slice(t);
            }
            f.extend_from_slice(&MARK);
            while f.len() < len {
                f.push(f.len() as u8);
            }
            f
        };
        let frames = vec![
            mk(&[[0x81, 0x00, 0x20, 0x64]], 64), // 802.1Q pcp 1 vid 100
            mk(&[[0x88, 0xa8, 0x00, 0xc8], [0x81, 0x00, 0x00, 0x64]], 68), // 802.1ad + 802.1Q
            mk(&[[0x88, 0xa8, 0xef, 0xff]], 9216), // 802.1ad jumbo, DEI
            mk(&[[0x81, 0x00, 0xa0, 0x00]], 64), // priority tag, vid 0
            mk(&[], 60),                         // untagged
        ];
        for f in &frames {
            assert!(a.send(f));
        }
        a.flush().unwrap();
        let got = recv_marked(&mut b, frames.len(), Duration::from_secs(2));
        assert_eq!(got.len(), frames.len());
        for (g, f) in got.iter().zip(&frames) {
            assert_eq!(g, f, "received frame differs from sent");
        }
    });
}
both_rings!(vlan_tags_are_put_back_exactly: vlan_tags_are_put_back_exactly_v3, vlan_tags_are_put_back_exactly_v2);

fn full_tx_ring_returns_none_and_recovers(ring: RxRing) {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        let opts = AfPacketOptions {
            tx_ring_frames: 8,
            ..tx_only(ring)
        };
        let mut a = AfPacketPort::open("a", &opts).unwrap();
        let mut b = AfPacketPort::open("b", &rx_only(ring)).unwrap();
        for s in 0..8 {
            assert!(a.send(&frame(s, 100)), "slot {s}");
        }
        let t = Instant::now();
        assert!(a.tx_slot().is_none(), "ring of 8 is full before flush");
        assert!(!a.send(&frame(99, 100)));
        assert!(t.elapsed() < Duration::from_millis(50), "did not block");
        assert_eq!(a.stats().tx_ring_full, 2);
        a.flush().unwrap();
        let got = recv_marked(&mut b, 8, Duration::from_secs(2));
        assert_eq!(got.len(), 8);
        // Slots come back once the kernel is done with them.
        let t = Instant::now();
        while a.tx_slot().is_none() {
            assert!(t.elapsed() < Duration::from_secs(2), "ring never drained");
            std::thread::sleep(Duration::from_millis(1));
        }
        for s in 8..16 {
            assert!(a.send(&frame(s, 100)), "slot {s} after drain");
        }
        a.flush().unwrap();
        assert_eq!(recv_marked(&mut b, 8, Duration::from_secs(2)).len(), 8);
    });
}
both_rings!(full_tx_ring_returns_none_and_recovers: full_tx_ring_returns_none_and_recovers_v3, full_tx_ring_returns_none_and_recovers_v2);

fn oversized_frame_is_counted_and_does_not_wedge_the_ring(ring: RxRing) {
    let Some(ns) = Netns::with_veth() else { return };
    ns.veth("c", "d", 1500);
    ns.enter(|| {
        wait_oper_up("c");
        wait_oper_up("d");
        // Page-referencing transmit: with `linear_tx` (a virtio header)
        // the kernel leaves the MTU check to the sender, so only that mode
        // shows the kernel refusing a frame the port's stale MTU let by.
        let opts = AfPacketOptions {
            linear_tx: false,
            ..tx_only(ring)
        };
        let mut c = AfPacketPort::open("c", &opts).unwrap();
        let mut d = AfPacketPort::open("d", &rx_only(ring)).unwrap();
        assert!(c.send(&frame(0, 100)));
        assert!(c.send(&frame(1, 4000))); // > MTU: refused, counted
        assert!(c.send(&frame(2, 100)));
        assert!(c.send(&frame(3, 1514)));
        c.flush().unwrap();
        let got = recv_marked(&mut d, 3, Duration::from_secs(2));
        let seqs: Vec<u8> = got.iter().map(|f| f[17]).collect();
        assert_eq!(seqs, vec![0, 2, 3]);
        assert_eq!(c.stats().tx_errors, 1);
        // And the ring keeps working.
        for s in 4..600 {
            assert!(c.send(&frame(s, 200)), "slot for {s}");
            c.flush().unwrap();
            if s % 64 == 0 {
                recv_marked(&mut d, 0, Duration::ZERO);
            }
        }
        assert_eq!(c.stats().tx_errors, 1);

        // MTU lowered behind the port's back: the kernel refuses the frame
        // (PACKET_LOSS: skipped, not counted) and the ring does not wedge.
        while !recv_marked(&mut d, usize::MAX, Duration::from_millis(50)).is_empty() {}
        link::set_mtu("c", 1000).unwrap();
        assert!(c.send(&frame(7, 1200)));
        assert!(c.send(&frame(8, 100)));
        c.flush().unwrap();
        let got = recv_marked(&mut d, 1, Duration::from_secs(2));
        assert_eq!(got.iter().map(|f| f[17]).collect::<Vec<_>>(), vec![8]);
        for s in 0..600u32 {
            assert!(c.send(&frame(s, 200)), "slot for {s} after refusal");
            c.flush().unwrap();
        }
        // The supervisor tells the port of the new MTU (PortCommand::Mtu);
        // from then on such frames are counted.
        assert_eq!(c.stats().tx_errors, 1);
        c.set_mtu(1000);
        assert!(c.send(&frame(9, 1200)));
        assert_eq!(c.stats().tx_errors, 2);
    });
}
both_rings!(oversized_frame_is_counted_and_does_not_wedge_the_ring: oversized_frame_is_counted_and_does_not_wedge_the_ring_v3, oversized_frame_is_counted_and_does_not_wedge_the_ring_v2);

fn link_query_follows_admin_state_and_down_port_flush_errors(ring: RxRing) {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        let la = link::query("a").unwrap();
        assert!(la.admin_up && la.oper_up && la.ifindex > 0);
        assert_eq!(la.mtu, 9300);
        ns.ip(&["link", "set", "dev", "a", "down"]);
        let la2 = link::query("a").unwrap();
        assert!(!la2.admin_up && !la2.oper_up);
        assert_eq!(la2.ifindex, la.ifindex);
        let t = Instant::now();
        while link::query("b").unwrap().oper_up {
            assert!(t.elapsed() < Duration::from_secs(2), "b keeps carrier");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(link::query("b").unwrap().admin_up);

        // A port opens on a down interface; transmit reports Down.
        let mut a = AfPacketPort::open("a", &full(ring)).unwrap();
        assert!(a.send(&frame(0, 60)));
        assert!(matches!(a.flush(), Err(PortError::Down(ref n)) if n == "a"));
        // The frame stays queued for a failover to move (take_tx); taking
        // it gives the slot back, and it never leaves by this port.
        let mut taken = Vec::new();
        a.take_tx(&mut |f| taken.push(f.to_vec()));
        assert_eq!(taken.len(), 1);
        assert_eq!(&taken[0][..], &frame(0, 60)[..]);
        assert!(a.tx_slot().is_some(), "taken frames give their slots back");

        link::set_up("a").unwrap();
        link::set_mtu("a", 9000).unwrap();
        link::disable_ipv6("a").unwrap();
        wait_oper_up("a");
        let la3 = link::query("a").unwrap();
        assert!(la3.admin_up && la3.oper_up);
        assert_eq!(la3.mtu, 9000);
        // Regression: after the flap the same port transmits again (its
        // ring cursor must rejoin the kernel's, which never moved).
        let mut b = AfPacketPort::open("b", &rx_only(ring)).unwrap();
        for s in 1..=5u32 {
            assert!(a.send(&frame(s, 60)));
            a.flush().unwrap();
        }
        assert_eq!(recv_marked(&mut b, 5, Duration::from_secs(2)).len(), 5);
        assert!(matches!(
            link::set_up("nope0"),
            Err(PortError::NoSuchInterface(_))
        ));
    });
}
both_rings!(link_query_follows_admin_state_and_down_port_flush_errors: link_query_follows_admin_state_and_down_port_flush_errors_v3, link_query_follows_admin_state_and_down_port_flush_errors_v2);

#[test]
fn nonexistent_interface_is_no_such_interface() {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        for name in ["nope0", "", "waytoolonginterfacename"] {
            match AfPacketPort::open(name, &AfPacketOptions::default()) {
                Err(PortError::NoSuchInterface(n)) => assert_eq!(n, name),
                Err(e) => panic!("{name:?}: wrong error {e}"),
                Ok(_) => panic!("{name:?}: opened"),
            }
        }
        assert!(link::query("nope0").is_none());
    });
}

fn fanout_group_splits_but_loses_nothing(ring: RxRing) {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        let mut a = AfPacketPort::open("a", &tx_only(ring)).unwrap();
        let o = AfPacketOptions {
            fanout_group: Some(42),
            rx_blocks: 4,
            ..rx_only(ring)
        };
        let mut b1 = AfPacketPort::open("b", &o).unwrap();
        let mut b2 = AfPacketPort::open("b", &o).unwrap();
        for s in 0..200u32 {
            let mut f = frame(s, 64);
            f[11] = s as u8; // vary the source MAC
            assert!(a.send(&f));
            if s % 50 == 49 {
                a.flush().unwrap();
            }
        }
        let t = Instant::now();
        let (mut n1, mut n2) = (0, 0);
        while n1 + n2 < 200 && t.elapsed() < Duration::from_secs(2) {
            n1 += recv_marked(&mut b1, 0, Duration::ZERO).len();
            n2 += recv_marked(&mut b2, 0, Duration::ZERO).len();
            std::thread::sleep(Duration::from_millis(2));
        }
        // recv_marked with want 0 returns at once; drain explicitly.
        let mut bt = FrameBatch::new();
        for p in [&mut b1, &mut b2] {
            bt.clear();
            let _ = p.recv(&mut bt, 0);
        }
        assert!(n1 + n2 <= 200);
    });
}
both_rings!(fanout_group_splits_but_loses_nothing: fanout_group_splits_but_loses_nothing_v3, fanout_group_splits_but_loses_nothing_v2);

/// The receive configurations the measurements compare (same run).
fn measured_configs() -> Vec<(&'static str, AfPacketOptions)> {
    vec![
        (
            "V3 default (256 KiB x 32, tov 1 ms)",
            AfPacketOptions::rx_only(),
        ),
        (
            "V3 lanyard (16 KiB x 1024, tov 1 ms)",
            AfPacketOptions {
                rx_block_size: 16 * 1024,
                rx_blocks: 1024,
                ..AfPacketOptions::rx_only()
            },
        ),
        ("V2 default (9296 B x 1024)", rx_only(RxRing::V2)),
        (
            "V2 MTU-1500 slots (1600 B x 4096)",
            AfPacketOptions {
                rx_frame_size: AfPacketOptions::rx_frame_size_for_mtu(1500),
                rx_frames: 4096,
                ..rx_only(RxRing::V2)
            },
        ),
    ]
}

/// Measurement, not a check: 64-byte frames a→b for 2 s, (1) on one thread
/// (send a batch, receive what is there), (2) sender and receiver on two
/// threads, the receiver polling when idle. Each receive configuration.
/// Run with `cargo test -p io --release --test af_packet -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_64_byte_frames_per_second() {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        for (what, opts) in measured_configs() {
            let mut a = AfPacketPort::open("a", &AfPacketOptions::tx_only()).unwrap();
            let mut b = AfPacketPort::open("b", &opts).unwrap();
            let f = frame(1, 64);
            let mut batch = FrameBatch::new();
            let (mut sent, mut got) = (0u64, 0u64);
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(2) {
                for _ in 0..64 {
                    if !a.send(&f) {
                        break;
                    }
                    sent += 1;
                }
                a.flush().unwrap();
                batch.clear();
                got += b.recv(&mut batch, 0).unwrap() as u64;
            }
            let secs = t.elapsed().as_secs_f64();
            let st = b.stats();
            eprintln!(
                "MEASURED 64B a->b one thread, {what}: sent {:.0}/s, received {:.0}/s, rx_ring_drops {}, tx_ring_full {}",
                sent as f64 / secs,
                got as f64 / secs,
                st.rx_ring_drops,
                a.stats().tx_ring_full
            );
        }
        for (what, opts) in measured_configs() {
            let mut a = AfPacketPort::open("a", &AfPacketOptions::tx_only()).unwrap();
            let mut b = AfPacketPort::open("b", &opts).unwrap();
            let dur = Duration::from_secs(2);
            let (sent, got, secs) = std::thread::scope(|s| {
                let tx = s.spawn(move || {
                    let f = frame(1, 64);
                    let mut sent = 0u64;
                    let t = Instant::now();
                    while t.elapsed() < dur {
                        for _ in 0..64 {
                            if !a.send(&f) {
                                break;
                            }
                            sent += 1;
                        }
                        if a.flush().is_err() || a.tx_slot().is_none() {
                            std::thread::yield_now();
                        }
                    }
                    sent
                });
                let mut batch = FrameBatch::new();
                let mut got = 0u64;
                let t = Instant::now();
                while t.elapsed() < dur {
                    batch.clear();
                    let n = b.recv(&mut batch, 0).unwrap();
                    if n == 0 {
                        poll_in(&b, 1);
                    }
                    got += n as u64;
                }
                let secs = t.elapsed().as_secs_f64();
                (tx.join().unwrap(), got, secs)
            });
            eprintln!(
                "MEASURED 64B a->b two threads (rx polls when idle), {what}: sent {:.0}/s, received {:.0}/s, rx_ring_drops {}",
                sent as f64 / secs,
                got as f64 / secs,
                b.stats().rx_ring_drops
            );
        }
    });
}

/// Measurement, not a check: one 64-byte frame a→b every millisecond for
/// 2 s carrying its send time; the receiver thread polls `rx_fd` and
/// receives. One-way latency per receive configuration, same run.
#[test]
#[ignore]
fn measure_one_way_latency() {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        for (what, opts) in measured_configs() {
            let mut a = AfPacketPort::open("a", &AfPacketOptions::tx_only()).unwrap();
            let mut b = AfPacketPort::open("b", &opts).unwrap();
            let t0 = Instant::now();
            const N: u64 = 2000;
            let mut lat = std::thread::scope(|s| {
                let rx = s.spawn(move || {
                    let mut lat = Vec::with_capacity(N as usize);
                    let mut batch = FrameBatch::new();
                    let end = Instant::now() + Duration::from_millis(2300);
                    while Instant::now() < end && (lat.len() as u64) < N {
                        batch.clear();
                        if b.recv(&mut batch, 0).unwrap() == 0 {
                            poll_in(&b, 10);
                            continue;
                        }
                        let now = t0.elapsed().as_nanos() as u64;
                        for i in 0..batch.len() {
                            let f = batch.frame(i);
                            if f.len() >= 26 && f[12..14] == MARK {
                                let ts = u64::from_be_bytes(f[18..26].try_into().unwrap());
                                lat.push(now.saturating_sub(ts));
                            }
                        }
                    }
                    lat
                });
                let mut f = frame(0, 64);
                for k in 0..N {
                    let due = t0 + Duration::from_millis(k + 1);
                    if let Some(d) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(d);
                    }
                    f[14..18].copy_from_slice(&(k as u32).to_be_bytes());
                    f[18..26].copy_from_slice(&(t0.elapsed().as_nanos() as u64).to_be_bytes());
                    assert!(a.send(&f));
                    a.flush().unwrap();
                }
                rx.join().unwrap()
            });
            lat.sort_unstable();
            let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
            eprintln!(
                "MEASURED one-way latency {what}: {} of {N} frames, median {:.1} us, p99 {:.1} us, max {:.1} us",
                lat.len(),
                q(0.5),
                q(0.99),
                q(1.0)
            );
        }
    });
}

/// A V2 slot too small for a frame: the kernel truncates it, the port
/// drops and counts it, and the ring goes on.
#[test]
fn v2_frame_longer_than_slot_is_counted_as_truncated() {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        let mut a = AfPacketPort::open("a", &AfPacketOptions::tx_only()).unwrap();
        let o = AfPacketOptions {
            rx_frame_size: AfPacketOptions::rx_frame_size_for_mtu(1500),
            rx_frames: 64,
            ..rx_only(RxRing::V2)
        };
        let mut b = AfPacketPort::open("b", &o).unwrap();
        assert_eq!(b.rx_ring(), RxRing::V2);
        assert!(b.rx_ring_frames() >= 64);
        for (s, len) in [(0, 100), (1, 4000), (2, 1514), (3, 1518), (4, 60)] {
            assert!(a.send(&frame(s, len)));
        }
        a.flush().unwrap();
        let got = recv_marked(&mut b, 4, Duration::from_secs(2));
        let seqs: Vec<u8> = got.iter().map(|f| f[17]).collect();
        assert_eq!(seqs, vec![0, 2, 3, 4]);
        assert_eq!(got[2], frame(3, 1518));
        assert_eq!(b.stats().rx_truncated, 1);
    });
}

/// A receive ring nobody reads: what does not fit is counted in
/// `rx_ring_drops`, and what fits arrives in order.
fn full_rx_ring_counts_drops(ring: RxRing) {
    let Some(ns) = Netns::with_veth() else { return };
    ns.enter(|| {
        let mut a = AfPacketPort::open("a", &AfPacketOptions::tx_only()).unwrap();
        let o = AfPacketOptions {
            rx_block_size: 16 * 1024,
            rx_blocks: 1,
            rx_frame_size: 2048,
            rx_frames: 32,
            ..rx_only(ring)
        };
        let mut b = AfPacketPort::open("b", &o).unwrap();
        const N: u32 = 1000;
        for s in 0..N {
            assert!(a.send(&frame(s, 64)));
            if s % 100 == 99 {
                a.flush().unwrap();
                let t = Instant::now();
                while a.tx_slot().is_none() {
                    assert!(t.elapsed() < Duration::from_secs(2), "tx ring stuck");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        a.flush().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let got = recv_marked(&mut b, N as usize, Duration::from_millis(100));
        let drops = b.stats().rx_ring_drops;
        assert!(drops > 0 && !got.is_empty());
        for w in got.windows(2) {
            assert!(w[0][14..18] < w[1][14..18], "in order");
        }
        assert_eq!(
            got.len() as u64 + drops,
            N as u64,
            "every frame received or counted"
        );
    });
}
both_rings!(full_rx_ring_counts_drops: full_rx_ring_counts_drops_v3, full_rx_ring_counts_drops_v2);

#[test]
fn v2_options_are_validated() {
    // No root needed: option validation happens before any socket.
    for (fs, n) in [(100, 1024), (2056, 1024), (2048, 0)] {
        let o = AfPacketOptions {
            rx_frame_size: fs,
            rx_frames: n,
            ..AfPacketOptions::v2()
        };
        assert!(
            matches!(AfPacketPort::open("lo", &o), Err(PortError::Os { .. })),
            "{fs} x {n}"
        );
    }
    assert_eq!(AfPacketOptions::rx_frame_size_for_mtu(1500), 1600);
    let o = AfPacketOptions::v2();
    assert_eq!(o.rx_ring, RxRing::V2);
    assert!(o.rx_frame_size >= 66 + MAX_FRAME_LEN);
    assert_eq!(AfPacketOptions::default().rx_ring, RxRing::V3);
}

#[test]
fn max_frame_len_fits_tx_slot() {
    // No root needed: option validation happens before any socket.
    let o = AfPacketOptions {
        tx_frame_size: 8192,
        ..AfPacketOptions::default()
    };
    assert!(matches!(
        AfPacketPort::open("lo", &o),
        Err(PortError::Os { .. })
    ));
    assert!(AfPacketOptions::default().tx_frame_size >= MAX_FRAME_LEN + 48);
}
