//! TAP port tests inside a throwaway network namespace: the kernel stack on
//! one side of the TAP, the port on the other. They need root and
//! `/dev/net/tun`; without either they print a note and pass.

use io::tap::TAP_MAX_MTU;
use io::{link, FrameBatch, Port, PortError, TapOptions, TapPort};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

mod common;
use common::{wait_oper_up, Netns};

const TAP_MAC: [u8; 6] = [0x02, 0x4c, 0x59, 0, 0, 0x01];
const PEER_MAC: [u8; 6] = [0x02, 0x4c, 0x59, 0, 0, 0x02];
const BCAST: [u8; 6] = [0xff; 6];
const TAP_IP: [u8; 4] = [10, 9, 0, 1];
/// Not in the neighbour table: the kernel must ARP for it.
const UNKNOWN_IP: [u8; 4] = [10, 9, 0, 2];
/// In the neighbour table as `PEER_MAC`.
const PEER_IP: [u8; 4] = [10, 9, 0, 3];

impl Netns {
    /// An empty namespace (IPv6 off) for TAP tests; `None` (after printing
    /// why) when not root or without `/dev/net/tun`.
    fn with_tun() -> Option<Netns> {
        if !std::path::Path::new("/dev/net/tun").exists() {
            eprintln!("skipped: /dev/net/tun is missing");
            return None;
        }
        Netns::new("lytap")
    }

    /// Create TAP `tap` (MAC `TAP_MAC`, up) with `TAP_IP/24` and a static
    /// neighbour `PEER_IP` → `PEER_MAC`. Must run inside `enter`.
    fn tap_with_address(&self, tap: &str) -> TapPort {
        let opts = TapOptions {
            mac: Some(TAP_MAC),
            mtu: Some(9000),
            ..TapOptions::default()
        };
        let p = TapPort::create(tap, &opts).unwrap();
        assert_eq!(p.name(), tap);
        wait_oper_up(tap);
        self.ip(&["addr", "add", "10.9.0.1/24", "dev", tap]);
        self.ip(&[
            "neigh",
            "add",
            "10.9.0.3",
            "lladdr",
            "02:4c:59:00:00:02",
            "dev",
            tap,
        ]);
        p
    }
}

/// Wait (up to 2 s) for an interface to disappear. Not always immediate: a
/// child forked concurrently by another test (`ip`, before its exec closes
/// the CLOEXEC descriptors) briefly holds the tun descriptor too.
fn gone(name: &str) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        if link::query(name).is_none() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn poll_in(p: &TapPort, ms: i32) {
    let mut pfd = libc::pollfd {
        fd: p.rx_fd().unwrap(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, ms) };
}

/// Receive until a frame satisfies `want` (others are skipped) or 2 s pass.
fn recv_match(p: &mut TapPort, want: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    let mut b = FrameBatch::new();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        b.clear();
        if p.recv(&mut b, 5).unwrap() == 0 {
            poll_in(p, 10);
        }
        for i in 0..b.len() {
            assert_eq!(b.port(i), 5);
            if want(b.frame(i)) {
                return Some(b.frame(i).to_vec());
            }
        }
    }
    None
}

fn ethertype(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[12], f[13]])
}

/// Internet checksum (RFC 1071) of `data`.
fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        s += w as u32;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn eth(dst: [u8; 6], src: [u8; 6], ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f.resize(f.len().max(60), 0);
    f
}

fn arp(op: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut a = vec![0, 1, 0x08, 0x00, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&sha);
    a.extend_from_slice(&spa);
    a.extend_from_slice(&tha);
    a.extend_from_slice(&tpa);
    a
}

fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn icmp_echo(ty: u8, id: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut m = vec![ty, 0, 0, 0];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(data);
    let c = csum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

fn is_arp_op(f: &[u8], op: u16) -> bool {
    f.len() >= 42 && ethertype(f) == 0x0806 && f[20..22] == op.to_be_bytes()
}

#[test]
fn kernel_frames_arrive_on_the_port() {
    let Some(ns) = Netns::with_tun() else { return };
    ns.enter(|| {
        let mut p = ns.tap_with_address("lyt-k2p");
        assert_eq!(p.mac().unwrap(), TAP_MAC);
        assert_eq!(link::query("lyt-k2p").unwrap().mtu, 9000);
        assert_eq!(p.ifindex(), link::query("lyt-k2p").unwrap().ifindex);

        let sock = UdpSocket::bind((Ipv4Addr::from(TAP_IP), 0)).unwrap();

        // No neighbour entry: the kernel asks with a broadcast ARP request.
        sock.send_to(b"who", (Ipv4Addr::from(UNKNOWN_IP), 9999))
            .unwrap();
        let f = recv_match(&mut p, |f| is_arp_op(f, 1)).expect("ARP request from the kernel");
        assert_eq!(f[0..6], BCAST);
        assert_eq!(f[6..12], TAP_MAC);
        assert_eq!(f[22..28], TAP_MAC, "sender hardware address");
        assert_eq!(f[28..32], TAP_IP, "sender protocol address");
        assert_eq!(f[38..42], UNKNOWN_IP, "target protocol address");

        // Neighbour known: the datagram itself comes out, addressed to it.
        sock.send_to(b"lanyard", (Ipv4Addr::from(PEER_IP), 9999))
            .unwrap();
        let f = recv_match(&mut p, |f| ethertype(f) == 0x0800 && f[23] == 17)
            .expect("UDP datagram from the kernel");
        assert_eq!(f[0..6], PEER_MAC);
        assert_eq!(f[6..12], TAP_MAC);
        assert_eq!(f[26..30], TAP_IP);
        assert_eq!(f[30..34], PEER_IP);
        assert_eq!(csum(&f[14..34]), 0, "IPv4 header checksum");
        assert_eq!(f[36..38], 9999u16.to_be_bytes(), "UDP destination port");
        assert_eq!(&f[42..49], b"lanyard");
        assert_eq!(f.len(), 49, "no padding on a frame read from a TAP");

        let st = p.stats();
        assert_eq!((st.rx_truncated, st.tx_errors), (0, 0));

        // MTU raised behind the port's back: a frame longer than a batch
        // slot is dropped and counted, the next one arrives.
        ns.ip(&["link", "set", "dev", "lyt-k2p", "mtu", "9500"]);
        sock.send_to(&[0u8; 9400], (Ipv4Addr::from(PEER_IP), 9999))
            .unwrap();
        sock.send_to(b"after", (Ipv4Addr::from(PEER_IP), 9999))
            .unwrap();
        let f = recv_match(&mut p, |f| ethertype(f) == 0x0800 && f[23] == 17)
            .expect("datagram after the oversized one");
        assert_eq!(&f[42..], b"after");
        assert_eq!(p.stats().rx_truncated, 1);
    });
}

#[test]
fn injected_frames_reach_the_kernel_which_answers() {
    let Some(ns) = Netns::with_tun() else { return };
    ns.enter(|| {
        let mut p = ns.tap_with_address("lyt-p2k");

        // ARP request for the TAP's own address → ARP reply.
        let req = eth(
            BCAST,
            PEER_MAC,
            0x0806,
            &arp(1, PEER_MAC, UNKNOWN_IP, [0; 6], TAP_IP),
        );
        let slot = p.tx_slot().expect("free slot");
        slot[..req.len()].copy_from_slice(&req);
        p.tx_commit(req.len());
        assert_eq!(p.tx_queued(), 1);
        p.flush().unwrap();
        assert_eq!(p.tx_queued(), 0);
        let f = recv_match(&mut p, |f| is_arp_op(f, 2)).expect("ARP reply from the kernel");
        assert_eq!(f[0..6], PEER_MAC);
        assert_eq!(f[6..12], TAP_MAC);
        assert_eq!(f[22..28], TAP_MAC, "sender hardware address");
        assert_eq!(f[28..32], TAP_IP, "sender protocol address");
        assert_eq!(f[32..38], PEER_MAC, "target hardware address");
        assert_eq!(f[38..42], UNKNOWN_IP, "target protocol address");

        // ICMP echo request to the TAP's address → echo reply.
        let data: Vec<u8> = (0..48u8).collect();
        let echo = eth(
            TAP_MAC,
            PEER_MAC,
            0x0800,
            &ipv4(PEER_IP, TAP_IP, 1, &icmp_echo(8, 0x4c59, 7, &data)),
        );
        assert!(p.send(&echo));
        p.flush().unwrap();
        let f = recv_match(&mut p, |f| {
            ethertype(f) == 0x0800 && f[23] == 1 && f[34] == 0 && f[30..34] == PEER_IP
        })
        .expect("ICMP echo reply from the kernel");
        assert_eq!(f[0..6], PEER_MAC);
        assert_eq!(f[6..12], TAP_MAC);
        assert_eq!(f[26..30], TAP_IP);
        assert_eq!(csum(&f[14..34]), 0, "IPv4 header checksum");
        assert_eq!(csum(&f[34..]), 0, "ICMP checksum");
        assert_eq!(f[38..40], 0x4c59u16.to_be_bytes(), "identifier");
        assert_eq!(f[40..42], 7u16.to_be_bytes(), "sequence");
        assert_eq!(&f[42..], &data[..]);

        let st = p.stats();
        assert_eq!((st.tx_errors, st.tx_ring_full), (0, 0));
    });
}

#[test]
fn dropping_the_port_removes_the_interface_unless_persistent() {
    let Some(ns) = Netns::with_tun() else { return };
    ns.enter(|| {
        let p = TapPort::create("lyt-drop", &TapOptions::default()).unwrap();
        assert!(link::query("lyt-drop").is_some_and(|l| l.admin_up));
        // The name is taken: creating it again fails, attaching is refused
        // (not persistent, already open).
        match TapPort::create("lyt-drop", &TapOptions::default()) {
            Err(PortError::Os { op, .. }) => assert!(op.starts_with("TUNSETIFF"), "{op}"),
            Err(e) => panic!("wrong error {e}"),
            Ok(_) => panic!("created twice"),
        }
        assert!(TapPort::attach("lyt-drop").is_err());
        drop(p);
        assert!(gone("lyt-drop"), "interface outlived port");

        // A template name: the kernel picks the number.
        let down = TapOptions {
            up: false,
            ..TapOptions::default()
        };
        let t = TapPort::create("lyt%d", &down).unwrap();
        assert!(t.name().starts_with("lyt") && !t.name().contains('%'));
        let l = link::query(t.name()).expect("templated interface exists");
        assert!(!l.admin_up);
        let tname = t.name().to_string();
        drop(t);
        assert!(gone(&tname), "templated interface outlived port");

        // Persistent: survives the port, can be attached again.
        let o = TapOptions {
            persist: true,
            mac: Some(TAP_MAC),
            ..TapOptions::default()
        };
        drop(TapPort::create("lyt-pers", &o).unwrap());
        assert!(link::query("lyt-pers").is_some(), "persistent TAP vanished");
        // EBUSY while a concurrently forked child still holds the old
        // descriptor (see `gone`): retry briefly.
        let t = Instant::now();
        let a = loop {
            match TapPort::attach("lyt-pers") {
                Ok(a) => break a,
                Err(e) if t.elapsed() > Duration::from_secs(2) => panic!("attach: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        assert_eq!(a.name(), "lyt-pers");
        assert_eq!(a.mac().unwrap(), TAP_MAC);
        drop(a);
        assert!(link::query("lyt-pers").is_some());
        ns.ip(&["link", "del", "lyt-pers"]);

        assert!(matches!(
            TapPort::attach("lyt-none"),
            Err(PortError::NoSuchInterface(ref n)) if n == "lyt-none"
        ));
        // The name belongs to an interface that is not a TAP.
        assert!(TapPort::create("lo", &TapOptions::default()).is_err());
        match TapPort::attach("lo") {
            Err(PortError::Os { op, .. }) => assert!(op.starts_with("TUNSETIFF"), "{op}"),
            Err(e) => panic!("wrong error {e}"),
            Ok(_) => panic!("attached to lo"),
        }
    });
}

#[test]
fn full_tx_queue_returns_none_and_bad_lengths_count_errors() {
    let Some(ns) = Netns::with_tun() else { return };
    ns.enter(|| {
        let o = TapOptions {
            tx_slots: 4,
            mac: Some(TAP_MAC),
            mtu: Some(TAP_MAX_MTU),
            ..TapOptions::default()
        };
        let mut p = TapPort::create("lyt-full", &o).unwrap();
        assert_eq!(link::query("lyt-full").unwrap().mtu, TAP_MAX_MTU);
        let f = eth(BCAST, PEER_MAC, 0x88b5, &[1, 2, 3]);
        for i in 0..4 {
            assert!(p.send(&f), "slot {i}");
        }
        let t = Instant::now();
        assert!(p.tx_slot().is_none(), "queue of 4 is full");
        assert!(!p.send(&f));
        assert!(t.elapsed() < Duration::from_millis(50), "did not block");
        assert_eq!(p.stats().tx_ring_full, 2);
        p.flush().unwrap();
        assert_eq!(p.tx_queued(), 0);
        // Runt frame: refused at commit, slot not used.
        assert!(p.tx_slot().is_some());
        p.tx_commit(10);
        assert_eq!(p.tx_queued(), 0);
        assert_eq!(p.stats().tx_errors, 1);
        // Wrap around the queue a few times; a jumbo frame fits a slot.
        let jumbo = eth(BCAST, PEER_MAC, 0x88b5, &vec![7u8; TAP_MAX_MTU as usize]);
        for _ in 0..5 {
            assert!(p.send(&f));
            assert!(p.send(&jumbo));
            assert!(p.send(&f));
            p.flush().unwrap();
        }
        assert_eq!(p.stats().tx_errors, 1);
        // Nothing is waiting: recv returns 0 without blocking.
        let mut b = FrameBatch::new();
        let t = Instant::now();
        assert_eq!(p.recv(&mut b, 0).unwrap(), 0);
        assert!(t.elapsed() < Duration::from_millis(50));

        // Administratively down: the kernel refuses what is written.
        ns.ip(&["link", "set", "dev", "lyt-full", "down"]);
        assert!(p.send(&f));
        assert!(p.send(&f));
        match p.flush() {
            Err(PortError::Down(n)) => assert_eq!(n, "lyt-full"),
            other => panic!("flush on a down TAP: {other:?}"),
        }
        assert_eq!(p.tx_queued(), 0, "frames of a down TAP are dropped");
        assert_eq!(p.stats().tx_errors, 3);
        assert_eq!(p.recv(&mut b, 0).unwrap(), 0);
    });
}

/// A restart in place hands the TAP over: `keep_across_exec` clears
/// close-on-exec, the new image `adopt`s the descriptor by name and the
/// interface never goes away (same ifindex, addresses and frames still
/// flow). A descriptor of another TAP, or a wrong name, is refused.
#[test]
fn a_tap_handed_over_is_adopted_and_never_goes_away() {
    let Some(ns) = Netns::with_tun() else { return };
    ns.enter(|| {
        let p = ns.tap_with_address("lyt-hand");
        let before = link::query("lyt-hand").unwrap().ifindex;
        let fd = p.keep_across_exec().unwrap();
        // SAFETY: plain F_GETFD on our descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, 0, "survives exec");
        // The old image's port is forgotten, not closed (exec closes
        // nothing it marked to keep).
        std::mem::forget(p);

        // A copy under the wrong name is refused (and closed).
        // SAFETY: dup of our descriptor, handed to adopt which owns it.
        let wrong = unsafe { TapPort::adopt(libc::dup(fd), "lyt-other", 8) };
        assert!(wrong.is_err());
        // SAFETY: `fd` is ours and nothing else uses it from here.
        let mut q = unsafe { TapPort::adopt(fd, "lyt-hand", 8) }.expect("adopted");
        assert_eq!(q.name(), "lyt-hand");
        assert_eq!(q.ifindex(), before, "the same interface");
        // SAFETY: plain F_GETFD.
        let flags = unsafe { libc::fcntl(q.rx_fd().unwrap(), libc::F_GETFD) };
        assert_ne!(flags & libc::FD_CLOEXEC, 0, "close-on-exec again");
        // The kernel's frames still arrive on the adopted port.
        let sock = UdpSocket::bind((Ipv4Addr::from(TAP_IP), 0)).unwrap();
        sock.send_to(b"adopted", (Ipv4Addr::from(PEER_IP), 9999))
            .unwrap();
        let f = recv_match(&mut q, |f| ethertype(f) == 0x0800 && f[23] == 17)
            .expect("UDP datagram through the adopted TAP");
        assert_eq!(&f[42..49], b"adopted");
        drop(q);
        assert!(
            gone("lyt-hand"),
            "the last descriptor takes the TAP with it"
        );
    });
}
