//! The worker's MPLS room on real frames through memory ports: label
//! switching (swap, PHP, pop and route), FTN push after the IP stage, the
//! MTU with the stack, and drops counted by reason.

use datapath::mpls::{MplsPlane, DROP_NAMES};
use datapath::{Mailbox, PortCommand, Shared, Worker, WorkerOptions};
use io::{MemoryPeer, MemoryPort};
use pipeline::l3::{L3Tables, RouterInterface, Urpf};
use pipeline::mpls::MplsConfig;
use pipeline::WorkerCounters;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::mpls::{IlmAction, LabelStack, Lfib, LfibSize, Nhlfe, Path, PopAf, NHLFE_BIT};
use tables::{
    L2Tables, LearnGate, Lpm4, Lpm6, MacTable, Neighbor, NeighborState, NeighborTable, NextHop,
    NextHopTable, Tables,
};
use testkit::ip::checksum;

const RMAC: [[u8; 6]; 3] = [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1], [2, 0, 0, 0, 1, 2]];
const N1: [u8; 6] = [2, 0, 0, 0, 2, 1];
const N2: [u8; 6] = [2, 0, 0, 0, 2, 2];
const PEER0: [u8; 6] = [2, 0, 0, 0, 2, 0];

struct Rig {
    shared: Arc<Shared>,
    peers: Vec<MemoryPeer>,
    mb: Arc<Mailbox>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn a4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

impl Rig {
    /// Routed ports 0, 1, 2 (10.0.k.1/24, MTU 1500). Next hops: id 1 =
    /// 10.0.1.2 on port 1, id 2 = 10.0.2.2 on port 2. LFIB: 100 swap →
    /// 200 via id 1; 101 PHP via id 2; 102 pop and route. FIB:
    /// 192.0.2.0/24 → push 300 via id 2; 198.51.100.0/24 → id 2 plain.
    fn new() -> Rig {
        let shared = Arc::new(Shared::new(
            Tables {
                l2: L2Tables::new(Vec::new(), &[]),
                mac: Arc::new(MacTable::new(64)),
                learn_gate: Arc::new(LearnGate::default()),
            },
            64,
        ));
        let nht = Arc::new(NextHopTable::new(16, 4));
        let gw1: IpAddr = a4("10.0.1.2").into();
        let gw2: IpAddr = a4("10.0.2.2").into();
        nht.set(
            1,
            NextHop {
                port: 1,
                gateway: Some(gw1),
            },
        )
        .unwrap();
        nht.set(
            2,
            NextHop {
                port: 2,
                gateway: Some(gw2),
            },
        )
        .unwrap();
        let neigh = Arc::new(NeighborTable::new(64));
        for (ip, mac, port) in [(gw1, N1, 1), (gw2, N2, 2)] {
            neigh.upsert(
                ip,
                Neighbor {
                    mac,
                    port,
                    state: NeighborState::Reachable,
                    confirmed: 0,
                },
            );
        }
        let lfib = Arc::new(Lfib::new(LfibSize {
            nhlfes: 16,
            pseudowires: 4,
            acs: 4,
            protections: 4,
        }));
        let nh = |hop, labels: &[u32]| Nhlfe {
            primary: Path {
                next_hop: hop,
                labels: LabelStack::new(labels).unwrap(),
            },
            backup: None,
            protection: None,
        };
        let swap = lfib.set_nhlfe(0, &nh(1, &[200])).unwrap();
        let ftn = lfib.set_nhlfe(1, &nh(2, &[300])).unwrap();
        lfib.set_ilm(100, IlmAction::Forward { target: swap })
            .unwrap();
        lfib.set_ilm(101, IlmAction::Forward { target: 2 }).unwrap();
        lfib.set_ilm(
            102,
            IlmAction::PopLookup {
                af: PopAf::Any,
                table: 0,
            },
        )
        .unwrap();
        let fib4 = Arc::new(Lpm4::new());
        fib4.insert(u32::from(a4("192.0.2.0")), 24, ftn).unwrap();
        fib4.insert(u32::from(a4("198.51.100.0")), 24, 2).unwrap();
        assert_eq!(ftn, NHLFE_BIT | 1);
        let ifaces = (0..3u16)
            .map(|k| RouterInterface {
                port: k,
                mac: RMAC[k as usize],
                v4: vec![(u32::from(Ipv4Addr::new(10, 0, k as u8, 1)), 24)],
                v6: Vec::new(),
                mtu: 1500,
                urpf: Urpf::Off,
                vlan: None,
                vrf: 0,
            })
            .collect();
        shared.l3.store(Some(Arc::new(
            L3Tables::new(fib4, Arc::new(Lpm6::new()), nht, neigh, ifaces).with_lfib(lfib.clone()),
        )));
        shared.mpls.store(Some(Arc::new(MplsPlane {
            lfib,
            cfg: MplsConfig::default(),
        })));
        let mb = Arc::new(Mailbox::default());
        let mut peers = Vec::new();
        for id in 0..3u16 {
            let (port, peer) = MemoryPort::new(&format!("mp{id}"));
            mb.send(PortCommand::Attach {
                id,
                port: Box::new(port),
                rx: true,
                routed: true,
            });
            peers.push(peer);
        }
        let w = Worker::new(
            shared.clone(),
            mb.clone(),
            Arc::new(WorkerCounters::default()),
            WorkerOptions {
                idle_spin: Duration::from_micros(10),
                max_sleep: Duration::from_millis(1),
            },
        );
        Rig {
            shared,
            peers,
            mb,
            thread: Some(std::thread::spawn(move || w.run())),
        }
    }

    /// What port `p` sent within a short while (waits for `n` frames).
    fn sent(&self, p: usize, n: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(3);
        while got.len() < n && Instant::now() < deadline {
            got.extend(self.peers[p].take_sent());
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(30));
        got.extend(self.peers[p].take_sent());
        got
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// IPv4/UDP packet (no Ethernet), `len` bytes in all, DF clear.
fn ipv4(dst: &str, ttl: u8, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = ttl;
    p[9] = 17;
    p[12..16].copy_from_slice(&a4("10.0.0.2").octets());
    p[16..20].copy_from_slice(&a4(dst).octets());
    let c = checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&1234u16.to_be_bytes());
    p[22..24].copy_from_slice(&5678u16.to_be_bytes());
    p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    p
}

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = RMAC[0].to_vec();
    f.extend_from_slice(&PEER0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn labelled(labels: &[(u32, u8)], payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    for (i, (l, ttl)) in labels.iter().enumerate() {
        let s = if i + 1 == labels.len() { 1 } else { 0 };
        p.extend_from_slice(&(l << 12 | s << 8 | *ttl as u32).to_be_bytes());
    }
    p.extend_from_slice(payload);
    eth(0x8847, &p)
}

/// (label, S, TTL) of the entry at `off`.
fn lse(f: &[u8], off: usize) -> (u32, bool, u8) {
    let w = u32::from_be_bytes([f[off], f[off + 1], f[off + 2], f[off + 3]]);
    (w >> 12, w >> 8 & 1 == 1, w as u8)
}

fn ip_ok(ip: &[u8]) -> bool {
    checksum(&ip[..20]) == 0
}

#[test]
fn swap_php_pop_and_ftn_on_real_frames() {
    let rig = Rig::new();
    let inj = &rig.peers[0];
    // Swap 100 → 200 toward 10.0.1.2: TTL − 1, S kept, MACs rewritten.
    inj.inject(&labelled(&[(100, 64)], &ipv4("203.0.113.9", 40, 60)));
    let out = rig.sent(1, 1);
    assert_eq!(out.len(), 1, "swapped frame out of port 1");
    let f = &out[0];
    assert_eq!(
        (&f[0..6], &f[6..12], &f[12..14]),
        (&N1[..], &RMAC[1][..], &[0x88, 0x47][..])
    );
    assert_eq!(lse(f, 14), (200, true, 63));
    assert_eq!(
        &f[18..],
        &ipv4("203.0.113.9", 40, 60)[..],
        "payload untouched"
    );

    // Two labels, the top one swapped: the S bit stays on the bottom one.
    inj.inject(&labelled(
        &[(100, 9), (777, 33)],
        &ipv4("203.0.113.9", 40, 60),
    ));
    let f = &rig.sent(1, 1)[0];
    assert_eq!((lse(f, 14), lse(f, 18)), ((200, false, 8), (777, true, 33)));

    // PHP (101): IPv4 out of port 2, TTL = min(IP, label − 1), checksum.
    inj.inject(&labelled(&[(101, 10)], &ipv4("203.0.113.9", 64, 60)));
    let f = &rig.sent(2, 1)[0];
    assert_eq!((&f[0..6], &f[12..14]), (&N2[..], &[0x08, 0x00][..]));
    assert_eq!(f[14 + 8], 9);
    assert!(ip_ok(&f[14..]));

    // Pop and route (102): the IP stage routes 198.51.100.7 via port 2 and
    // decrements the TTL it got from the label (uniform: min(64, 20)).
    inj.inject(&labelled(&[(102, 20)], &ipv4("198.51.100.7", 64, 60)));
    let f = &rig.sent(2, 1)[0];
    assert_eq!(
        (&f[0..6], &f[6..12], &f[12..14]),
        (&N2[..], &RMAC[2][..], &[0x08, 0x00][..])
    );
    assert_eq!(f[14 + 8], 19);
    assert!(ip_ok(&f[14..]));

    // FTN: IP to 192.0.2.9 leaves port 2 with label 300, S set, label TTL
    // = the decremented IP TTL; the IP header after the stack is intact.
    inj.inject(&eth(0x0800, &ipv4("192.0.2.9", 64, 60)));
    let f = &rig.sent(2, 1)[0];
    assert_eq!(
        (&f[0..6], &f[6..12], &f[12..14]),
        (&N2[..], &RMAC[2][..], &[0x88, 0x47][..])
    );
    assert_eq!(lse(f, 14), (300, true, 63));
    assert_eq!(f[18 + 8], 63);
    assert!(ip_ok(&f[18..]));
    assert_eq!(f.len(), 14 + 4 + 60);

    // MTU with the stack: 1500 bytes of IP + 4 do not fit a 1500 MTU.
    inj.inject(&eth(0x0800, &ipv4("192.0.2.9", 64, 1500)));
    // Unknown label, and label TTL 1: dropped and counted.
    inj.inject(&labelled(&[(999, 64)], &ipv4("203.0.113.9", 40, 60)));
    inj.inject(&labelled(&[(100, 1)], &ipv4("203.0.113.9", 40, 60)));
    std::thread::sleep(Duration::from_millis(100));
    assert!(rig.peers[2].take_sent().is_empty(), "too big for the MTU");
    assert!(rig.peers[1].take_sent().is_empty());
    let t = rig.shared.mpls_totals();
    let unknown = DROP_NAMES
        .iter()
        .position(|n| *n == "unknown-label")
        .unwrap();
    assert_eq!(t.drops[unknown], 1);
    assert_eq!(t.ttl_expired, 1);
    assert_eq!((t.rx, t.forwarded, t.popped, t.pushed), (6, 3, 1, 1));
    // Per-label counters: label 100 saw three frames.
    assert_eq!(rig.shared.label_counts(100).0, 3);
    assert_eq!(rig.shared.label_counts(102).0, 1);
}

/// A label TTL that expires at this LSR: ICMP time exceeded back out of
/// the ingress port to the sender, to the IP source under the stack,
/// with the stack as received in an RFC 4950 extension object.
#[test]
fn ttl_expiry_answers_icmp_with_the_label_stack() {
    let rig = Rig::new();
    let inner = ipv4("203.0.113.9", 40, 60);
    rig.peers[0].inject(&labelled(&[(100, 1), (777, 5)], &inner));
    let out = rig.sent(0, 1);
    assert_eq!(out.len(), 1, "one answer out of the ingress port");
    let f = &out[0];
    assert_eq!(
        (&f[0..6], &f[6..12], &f[12..14]),
        (&PEER0[..], &RMAC[0][..], &[0x08, 0x00][..])
    );
    let ip = &f[14..];
    assert!(ip_ok(ip));
    assert_eq!(
        &ip[12..16],
        &a4("10.0.0.1").octets(),
        "from port 0's address"
    );
    assert_eq!(&ip[16..20], &a4("10.0.0.2").octets(), "to the inner source");
    let icmp = &ip[20..];
    assert_eq!(
        (icmp[0], icmp[1], icmp[5]),
        (11, 0, 32),
        "time exceeded, 128-byte quote"
    );
    assert_eq!(checksum(icmp), 0, "ICMP checksum over the extension too");
    assert_eq!(&icmp[8..8 + 60], &inner[..], "the original datagram");
    assert!(
        icmp[8 + 60..8 + 128].iter().all(|&b| b == 0),
        "zero padding"
    );
    let ext = &icmp[8 + 128..];
    assert_eq!(ext[0] >> 4, 2, "extension version 2");
    assert_eq!(checksum(ext), 0, "extension checksum");
    assert_eq!(
        (u16::from_be_bytes([ext[4], ext[5]]), ext[6], ext[7]),
        (12, 1, 1),
        "MPLS label stack object, incoming stack"
    );
    assert_eq!(
        (lse(ext, 8), lse(ext, 12)),
        ((100, false, 1), (777, true, 5))
    );
    assert_eq!(ext.len(), 16);
    assert_eq!(rig.shared.mpls_totals().ttl_expired, 1);
    assert!(rig.peers[1].take_sent().is_empty(), "nothing forwarded");
}

/// A pseudowire follows the FIB's current route to its remote PE within
/// the batch, not the transport id the control plane copied into its slot
/// (refreshed only every 50 ms, while the FIB may free and reuse that id
/// after a grace period that counts only the workers).
#[test]
fn pseudowire_transport_follows_the_fib_not_the_cached_id() {
    use datapath::mpls::circuits::{AttachmentCircuit, PwPlane};
    use tables::mpls::{Pseudowire, PwType};
    let mut rig = Rig::new();
    let (port, peer) = MemoryPort::new("mp3");
    rig.mb.send(PortCommand::Attach {
        id: 3,
        port: Box::new(port),
        rx: true,
        routed: false,
    });
    rig.peers.push(peer);
    let remote_pe = a4("10.99.0.9");
    rig.shared.pseudowires.store(Some(Arc::new(PwPlane::new(
        vec![AttachmentCircuit {
            port: 3,
            vlan: None,
            mtu: 1500,
            peer: remote_pe.into(),
        }],
        1,
    ))));
    let l3 = rig.shared.l3.load_full().unwrap();
    let lfib = rig.shared.mpls.load_full().unwrap().lfib.clone();
    // The remote PE via next hop 1 (port 1); the slot copies that id.
    l3.fib4.insert(u32::from(remote_pe), 32, 1).unwrap();
    lfib.set_pseudowire(
        0,
        &Pseudowire {
            ac: 0,
            pw_type: PwType::Ethernet,
            control_word: false,
            remote_label: 500,
            transport: 1,
        },
    )
    .unwrap();
    let customer = {
        let mut f = vec![0u8; 100];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 9, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 9, 2]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f
    };
    rig.peers[3].inject(&customer);
    let out = rig.sent(1, 1);
    assert_eq!(out.len(), 1, "encapsulated out of port 1");
    assert_eq!(&out[0][..6], &N1);
    assert_eq!(lse(&out[0], 14), (500, true, 255));
    assert_eq!(&out[0][18..], &customer[..]);
    // The FIB moves the remote PE to next hop 2 (port 2); the slot still
    // names 1 (the control plane has not caught up, or 1 was reused).
    l3.fib4.insert(u32::from(remote_pe), 32, 2).unwrap();
    rig.peers[3].inject(&customer);
    let out2 = rig.sent(2, 1);
    assert_eq!(out2.len(), 1, "follows the FIB to port 2");
    assert_eq!(&out2[0][..6], &N2);
    assert!(
        rig.sent(1, 0).is_empty(),
        "nothing left by the old next hop"
    );
    // No route at all: dropped and counted (no-path), not sent.
    l3.fib4.remove(u32::from(remote_pe), 32);
    rig.peers[3].inject(&customer);
    assert!(rig.sent(1, 0).is_empty() && rig.sent(2, 0).is_empty());
    let pws = rig.shared.pseudowires.load_full().unwrap();
    assert_eq!(pws.totals(0).tx_packets, 2);
}
