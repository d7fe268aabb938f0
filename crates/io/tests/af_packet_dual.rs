//! The two-ring AF_PACKET port (`io::af_packet::AfPacketDualPort`) on a
//! veth pair in a throwaway namespace: frames take the per-frame V2 ring
//! while it has room, a burst the V2 ring cannot hold rolls over to the
//! V3 ring without loss, the port never receives its own transmissions,
//! and the rings survive a hand-over. Needs root, else passes with a note.

use io::af_packet::{AfPacketDualPort, FAST_RING_FRAMES};
use io::{AfPacketOptions, AfPacketPort, FrameBatch, Port};
use std::time::{Duration, Instant};

mod common;
use common::{wait_oper_up, Netns};

const MARK: [u8; 2] = [0x88, 0xb6];

fn with_veth() -> Option<Netns> {
    let ns = Netns::new("lyiod")?;
    ns.veth("a", "b", 1500);
    ns.enter(|| {
        wait_oper_up("a");
        wait_oper_up("b");
    });
    Some(ns)
}

fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&MARK);
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    f
}

fn bulk() -> AfPacketOptions {
    AfPacketOptions {
        rx_block_size: 16 * 1024,
        rx_blocks: 1024,
        ..AfPacketOptions::default()
    }
}

/// Send frames `from..to` on `tx` (a plain port), as fast as its ring takes them.
fn send(tx: &mut AfPacketPort, from: u32, to: u32) {
    let mut next = from;
    while next < to {
        // 60-159 bytes: the burst below (20,480 frames) fits the V3 ring.
        let f = frame(next, 60 + (next as usize % 100));
        if tx.send(&f) {
            next += 1;
        } else {
            tx.flush().unwrap();
        }
    }
    tx.flush().unwrap();
}

/// Sequence numbers of the marked frames received on `p` until `want`
/// arrived or `timeout` passed; sleeps in poll(2) when nothing is ready.
fn receive(p: &mut impl Port, want: usize, timeout: Duration) -> Vec<u32> {
    receive_with(p, want, timeout, true)
}

/// Like [`receive`], but never calls poll(2), as a busy worker does not.
fn receive_busy(p: &mut impl Port, want: usize, timeout: Duration) -> Vec<u32> {
    receive_with(p, want, timeout, false)
}

fn receive_with(p: &mut impl Port, want: usize, timeout: Duration, sleep: bool) -> Vec<u32> {
    let mut got = Vec::new();
    let mut b = FrameBatch::new();
    let t = Instant::now();
    while got.len() < want && t.elapsed() < timeout {
        b.clear();
        if p.recv(&mut b, 0).unwrap() == 0 && sleep {
            let mut pfd = libc::pollfd {
                fd: p.rx_fd().unwrap(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 5) };
        }
        for i in 0..b.len() {
            let f = b.frame(i);
            if f.len() >= 18 && f[12..14] == MARK {
                got.push(u32::from_be_bytes(f[14..18].try_into().unwrap()));
            }
        }
    }
    got
}

#[test]
fn frames_take_the_v2_ring_and_a_burst_rolls_over_without_loss() {
    let Some(ns) = with_veth() else { return };
    ns.enter(|| {
        let mut a = AfPacketPort::open("a", &AfPacketOptions::tx_only()).unwrap();
        let mut b = AfPacketDualPort::open("b", 1500, &bulk()).unwrap();
        // Paced: each frame read before the next is sent. All of them
        // through the V2 ring, none rolled over, in order.
        for seq in 0..200 {
            send(&mut a, seq, seq + 1);
            assert_eq!(receive(&mut b, 1, Duration::from_secs(2)), vec![seq]);
        }
        assert_eq!(
            b.received_by_ring(),
            (200, 0),
            "paced frames: all from the V2 ring"
        );
        assert_eq!(b.rolled_over(), 0);

        // A burst of 5 V2 rings' worth, not read while it is sent: the V2
        // ring fills and the rest rolls over to the V3 ring. Nothing lost.
        let n = 5 * FAST_RING_FRAMES as u32;
        send(&mut a, 1000, 1000 + n);
        let mut got = receive(&mut b, n as usize, Duration::from_secs(20));
        let (v2, v3) = b.received_by_ring();
        assert!(v3 > 0, "the burst reached the V3 ring ({v2} V2, {v3} V3)");
        assert!(
            b.rolled_over() >= v3,
            "rolled over {} < {v3}",
            b.rolled_over()
        );
        let s = b.stats();
        let (len, rolled) = (got.len(), b.rolled_over());
        got.sort_unstable();
        got.dedup();
        let missing = (1000..1000 + n)
            .filter(|x| got.binary_search(x).is_err())
            .count();
        assert!(
            len == n as usize && missing == 0,
            "{len} received, {} distinct, {missing} missing of {n}; rings {:?}, rolled {rolled}, \
             drops {}, truncated {}",
            got.len(),
            (v2, v3),
            s.rx_ring_drops,
            s.rx_truncated
        );
    });
}

#[test]
fn own_transmissions_are_not_received_and_the_peer_gets_them() {
    let Some(ns) = with_veth() else { return };
    ns.enter(|| {
        let mut a = AfPacketDualPort::open("a", 1500, &bulk()).unwrap();
        let mut b = AfPacketPort::open("b", &AfPacketOptions::rx_only()).unwrap();
        for seq in 0..500 {
            assert!(a.send(&frame(seq, 100)));
            if seq % 32 == 31 {
                a.flush().unwrap();
            }
        }
        a.flush().unwrap();
        let got = receive(&mut b, 500, Duration::from_secs(5));
        assert_eq!(got, (0..500).collect::<Vec<_>>());
        let echo = receive(&mut a, 1, Duration::from_millis(100));
        assert!(echo.is_empty(), "the dual port received its own frames");
    });
}

#[test]
fn a_handed_over_dual_port_keeps_its_rings_and_backlog() {
    let Some(ns) = with_veth() else { return };
    ns.enter(|| {
        let mut a = AfPacketPort::open("a", &AfPacketOptions::tx_only()).unwrap();
        let mut b = AfPacketDualPort::open("b", 1500, &bulk()).unwrap();
        assert!(b.fits_mtu(1500) && !b.fits_mtu(9000));
        send(&mut a, 0, 100);
        let state = b.handover_state().expect("handover state");
        assert!(io::af_packet::is_dual_state(&state));
        // The predecessor must neither use nor close its sockets.
        std::mem::forget(b);
        let mut c = AfPacketDualPort::adopt("b", &state).unwrap();
        send(&mut a, 100, 200);
        let mut got = receive(&mut c, 200, Duration::from_secs(5));
        got.sort_unstable();
        assert_eq!(got, (0..200).collect::<Vec<_>>(), "backlog and new frames");
        assert!(AfPacketDualPort::adopt("b", "dual|1,2").is_err());
        assert!(AfPacketDualPort::adopt("b", "3,4,5").is_err());
    });
}

/// The kernel stops rolling frames over to a ring it once found three
/// quarters full ("pressure") until poll(2) or recvmsg clears the flag;
/// the port clears it after draining, so a later burst is absorbed again.
#[test]
fn after_the_v3_ring_overflowed_a_later_burst_still_rolls_over() {
    let Some(ns) = with_veth() else { return };
    ns.enter(|| {
        let mut a = AfPacketPort::open("a", &AfPacketOptions::tx_only()).unwrap();
        // A 1 MiB V3 ring (about 5,000 of these frames).
        let small = AfPacketOptions {
            rx_blocks: 64,
            ..bulk()
        };
        let mut b = AfPacketDualPort::open("b", 1500, &small).unwrap();
        let first = 4 * FAST_RING_FRAMES as u32 + 20_000;
        send(&mut a, 0, first);
        let got = receive_busy(&mut b, first as usize, Duration::from_secs(3));
        let dropped = b.stats().rx_ring_drops;
        assert!(dropped > 0, "the first burst overflowed both rings");
        assert_eq!(got.len() as u64 + dropped, first as u64);
        // Drained. A burst the two rings hold together arrives whole.
        let second = FAST_RING_FRAMES as u32 + 2_000;
        send(&mut a, 100_000, 100_000 + second);
        let mut got = receive_busy(&mut b, second as usize, Duration::from_secs(10));
        let s = b.stats();
        got.sort_unstable();
        got.dedup();
        assert_eq!(
            (got.len(), s.rx_ring_drops - dropped),
            (second as usize, 0),
            "second burst: received, dropped (rings {:?})",
            b.received_by_ring()
        );
    });
}
