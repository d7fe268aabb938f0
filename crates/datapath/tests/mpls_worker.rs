//! The worker's MPLS room on real frames through memory ports: label
//! switching (swap, PHP, pop and route), FTN push after the IP stage, the
//! MTU with the stack, and drops counted by reason.

use datapath::mpls::{MplsPlane, DROP_NAMES};
use datapath::{Mailbox, PortCommand, Shared, Worker, WorkerOptions};
use io::{MemoryPeer, MemoryPort};
use pipeline::l3::{L3Tables, RouterInterface, Urpf};
use pipeline::mpls::{IcmpTunneling, MplsConfig};
use pipeline::WorkerCounters;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::l2::{PortEntry, PortMode, TPID_8021Q};
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
const N4: [u8; 6] = [2, 0, 0, 0, 2, 4];
const N5: [u8; 6] = [2, 0, 0, 0, 2, 5];
const SVI_MAC: [u8; 6] = [2, 0, 0, 0, 1, 4];

struct Rig {
    shared: Arc<Shared>,
    counters: Arc<WorkerCounters>,
    peers: Vec<MemoryPeer>,
    mb: Arc<Mailbox>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn a4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

impl Rig {
    /// A switch port `id` (memory port, attached) as the only attachment
    /// circuit, of pseudowire 0 toward `remote_pe`.
    fn pseudowire_circuit(&mut self, id: u16, remote_pe: Ipv4Addr) {
        use datapath::mpls::circuits::{AttachmentCircuit, PwPlane};
        let (port, peer) = MemoryPort::new(&format!("mp{id}"));
        self.mb.send(PortCommand::Attach {
            id,
            port: Box::new(port),
            rx: true,
            routed: false,
        });
        self.peers.push(peer);
        self.shared.pseudowires.store(Some(Arc::new(PwPlane::new(
            vec![AttachmentCircuit {
                port: id,
                vlan: None,
                mtu: 1500,
                peer: remote_pe.into(),
            }],
            1,
        ))));
    }

    /// [`Rig::pseudowire_circuit`] on switch port `id` toward the remote
    /// PE 10.99.0.9, routed in the FIB via next hop `via`, programmed as
    /// pseudowire 0 (Ethernet, remote label 500, `control_word`).
    /// Returns the remote PE.
    fn pseudowire_via(&mut self, id: u16, via: u32, control_word: bool) -> Ipv4Addr {
        use tables::mpls::{Pseudowire, PwType};
        let remote_pe = a4("10.99.0.9");
        self.pseudowire_circuit(id, remote_pe);
        let l3 = self.shared.l3.load_full().unwrap();
        l3.fib4.insert(u32::from(remote_pe), 32, via).unwrap();
        let lfib = self.shared.mpls.load_full().unwrap().lfib.clone();
        lfib.set_pseudowire(
            0,
            &Pseudowire {
                ac: 0,
                pw_type: PwType::Ethernet,
                control_word,
                remote_label: 500,
                transport: via,
            },
        )
        .unwrap();
        remote_pe
    }

    /// Routed ports 0, 1, 2 (10.0.k.1/24, MTU 1500). Next hops: id 1 =
    /// 10.0.1.2 on port 1, id 2 = 10.0.2.2 on port 2, id 3 = port 0's
    /// subnet. LFIB: 100 swap → 200 via id 1; 101 PHP via id 2; 102 pop
    /// and route. FIB: 10.0.0.0/24 → id 3; 192.0.2.0/24 → push 300 via
    /// id 2; 198.51.100.0/24 → id 2 plain.
    fn new() -> Rig {
        Rig::build(false)
    }

    /// With `vlans`, also: switch port 3 (trunk, VLAN 10 tagged), VLAN
    /// interface 10 (internal port 4, 10.0.4.1/24, neighbour 10.0.4.2 =
    /// next hop 4) and routed subinterface 5 = port 1 tag 30
    /// (10.0.5.1/24, neighbour 10.0.5.2 = next hop 5). LFIB: 110 swap →
    /// 210 via 4, 111 swap → 211 via 5. FIB: 100.64.4.0/24 → push 304
    /// via 4, 100.64.5.0/24 → push 305 via 5.
    fn build(vlans: bool) -> Rig {
        let l2 = if vlans {
            let routed = PortEntry::new(PortMode::Access, 1, &[], TPID_8021Q);
            let mut svi = PortEntry::new(PortMode::Access, 10, &[10], TPID_8021Q);
            svi.learning = false;
            let trunk = PortEntry::new(PortMode::Trunk, 1, &[1, 10], TPID_8021Q);
            let ports = vec![routed.clone(), routed.clone(), routed, trunk, svi];
            L2Tables::new(ports, &[(1, true, 0), (10, true, 0)])
        } else {
            L2Tables::new(Vec::new(), &[])
        };
        let shared = Arc::new(Shared::new(
            Tables {
                l2,
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
        // Port 0's subnet (the test packets' source) is routed.
        nht.set(
            3,
            NextHop {
                port: 0,
                gateway: None,
            },
        )
        .unwrap();
        let fib4 = Arc::new(Lpm4::new());
        let mut subs = Vec::new();
        let mut extra = Vec::new();
        if vlans {
            for (id, port, gw, mac, label, push, net) in [
                (4, 4u16, "10.0.4.2", N4, 210, 304, "100.64.4.0"),
                (5, 5u16, "10.0.5.2", N5, 211, 305, "100.64.5.0"),
            ] {
                let gw: IpAddr = a4(gw).into();
                nht.set(
                    id,
                    NextHop {
                        port,
                        gateway: Some(gw),
                    },
                )
                .unwrap();
                neigh.upsert(
                    gw,
                    Neighbor {
                        mac,
                        port,
                        state: NeighborState::Reachable,
                        confirmed: 0,
                    },
                );
                let swap = lfib.set_nhlfe(id, &nh(id, &[label])).unwrap();
                lfib.set_ilm(label - 100, IlmAction::Forward { target: swap })
                    .unwrap();
                let ftn = lfib.set_nhlfe(id + 4, &nh(id, &[push])).unwrap();
                fib4.insert(u32::from(a4(net)), 24, ftn).unwrap();
            }
            subs.push((5u16, 1u16, 30u16));
            extra.push(RouterInterface {
                port: 4,
                mac: SVI_MAC,
                v4: vec![(u32::from(a4("10.0.4.1")), 24)],
                v6: Vec::new(),
                mtu: 1500,
                urpf: Urpf::Off,
                vlan: Some(10),
                vrf: 0,
            });
            extra.push(RouterInterface {
                port: 5,
                mac: RMAC[1],
                v4: vec![(u32::from(a4("10.0.5.1")), 24)],
                v6: Vec::new(),
                mtu: 1500,
                urpf: Urpf::Off,
                vlan: None,
                vrf: 0,
            });
        }
        fib4.insert(u32::from(a4("10.0.0.0")), 24, 3).unwrap();
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
            .chain(extra)
            .collect();
        shared.l3.store(Some(Arc::new(
            L3Tables::new(fib4, Arc::new(Lpm6::new()), nht, neigh, ifaces)
                .with_subinterfaces(&subs)
                .with_lfib(lfib.clone()),
        )));
        shared.mpls.store(Some(Arc::new(MplsPlane {
            lfib,
            cfg: MplsConfig::default(),
        })));
        let mb = Arc::new(Mailbox::default());
        let mut peers = Vec::new();
        for id in 0..if vlans { 4 } else { 3 } {
            let (port, peer) = MemoryPort::new(&format!("mp{id}"));
            mb.send(PortCommand::Attach {
                id,
                port: Box::new(port),
                rx: true,
                routed: id < 3,
            });
            peers.push(peer);
        }
        let counters = Arc::new(WorkerCounters::default());
        let w = Worker::new(
            shared.clone(),
            mb.clone(),
            counters.clone(),
            WorkerOptions {
                idle_spin: Duration::from_micros(10),
                max_sleep: Duration::from_millis(1),
            },
        );
        Rig {
            shared,
            counters,
            peers,
            mb,
            thread: Some(std::thread::spawn(move || w.run())),
        }
    }

    /// Replaces the MPLS settings (same LFIB).
    fn set_cfg(&self, cfg: MplsConfig) {
        let lfib = self.shared.mpls.load_full().unwrap().lfib.clone();
        self.shared
            .mpls
            .store(Some(Arc::new(MplsPlane { lfib, cfg })));
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

/// IPv4/UDP packet (no Ethernet) from 10.0.0.2, `len` bytes in all, DF
/// clear.
fn ipv4(dst: &str, ttl: u8, len: usize) -> Vec<u8> {
    ipv4_from("10.0.0.2", dst, ttl, len)
}

fn ipv4_from(src: &str, dst: &str, ttl: u8, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = ttl;
    p[9] = 17;
    p[12..16].copy_from_slice(&a4(src).octets());
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
    // Back to the previous LSR whatever the stack (auto would send this
    // two-label one down the LSP: see the next test).
    rig.set_cfg(MplsConfig {
        icmp_tunneling: IcmpTunneling::Never,
        ..MplsConfig::default()
    });
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

/// Checks an IPv4 ICMP time exceeded at `ip` (IP header first): from
/// port 0's address to `to`, valid checksums, `inner` quoted, and the
/// received stack `stack` in its RFC 4950 object.
fn check_icmp(ip: &[u8], to: &str, inner: &[u8], stack: &[(u32, bool, u8)]) {
    check_icmp_from(ip, "10.0.0.1", to, stack);
    assert_eq!(&ip[28..28 + inner.len()], inner);
}

/// The same, from `from`, the quote unchecked.
fn check_icmp_from(ip: &[u8], from: &str, to: &str, stack: &[(u32, bool, u8)]) {
    assert!(ip_ok(ip));
    assert_eq!(&ip[12..16], &a4(from).octets());
    assert_eq!(&ip[16..20], &a4(to).octets());
    let icmp = &ip[20..];
    assert_eq!((icmp[0], icmp[1]), (11, 0), "time exceeded");
    assert_eq!(checksum(icmp), 0);
    let ext = &icmp[8 + 128..];
    assert_eq!(ext.len(), 8 + 4 * stack.len());
    for (k, e) in stack.iter().enumerate() {
        assert_eq!(lse(ext, 8 + 4 * k), *e, "object entry {k}");
    }
}

/// RFC 3032 §2.3.2: the answer to an expired label TTL goes down the LSP,
/// under the received stack (TTLs 255), forwarded as the frame would have
/// been — when the expired label has a label below it (a service label:
/// the source is in a table this LSR cannot see), or the source has no
/// route here; otherwise (and always with `never`) back out of the
/// ingress port.
#[test]
fn ttl_expiry_answers_down_the_lsp() {
    let rig = Rig::new();
    let down = || rig.shared.mpls_totals().ttl_icmp_down_lsp;

    // One label, routed source: back to the previous LSR (port 0).
    let inner = ipv4("203.0.113.9", 40, 60);
    rig.peers[0].inject(&labelled(&[(100, 1)], &inner));
    let f = &rig.sent(0, 1)[0];
    assert_eq!((&f[0..6], &f[12..14]), (&PEER0[..], &[0x08, 0x00][..]));
    check_icmp(&f[14..], "10.0.0.2", &inner, &[(100, true, 1)]);
    assert_eq!(down(), 0);

    // One label, a source with no route here: down the LSP, label 100
    // swapped to 200 toward 10.0.1.2 (port 1), TTL 255 − 1.
    let inner = ipv4_from("172.16.0.5", "203.0.113.9", 40, 60);
    rig.peers[0].inject(&labelled(&[(100, 1)], &inner));
    let out = rig.sent(1, 1);
    assert_eq!(out.len(), 1, "down the LSP, out of port 1");
    let f = &out[0];
    assert_eq!(
        (&f[0..6], &f[6..12], &f[12..14]),
        (&N1[..], &RMAC[1][..], &[0x88, 0x47][..])
    );
    assert_eq!(lse(f, 14), (200, true, 254));
    check_icmp(&f[18..], "172.16.0.5", &inner, &[(100, true, 1)]);
    assert!(rig.sent(0, 0).is_empty(), "nothing back to port 0");
    assert_eq!(down(), 1);

    // Two labels (a VPN label below), routed-looking source: down the
    // LSP with the service label kept under the swapped one.
    let inner = ipv4("203.0.113.9", 40, 60);
    rig.peers[0].inject(&labelled(&[(100, 1), (777, 5)], &inner));
    let f = &rig.sent(1, 1)[0];
    assert_eq!(
        (lse(f, 14), lse(f, 18)),
        ((200, false, 254), (777, true, 255))
    );
    check_icmp(
        &f[22..],
        "10.0.0.2",
        &inner,
        &[(100, false, 1), (777, true, 5)],
    );
    assert_eq!(down(), 2);

    // Explicit null on top, then a PHP label (101 toward 10.0.2.2): the
    // answer is popped like the frame would have been and leaves port 2
    // as plain IPv4, TTL untouched (min(64, 254)).
    let inner = ipv4_from("172.16.0.5", "203.0.113.9", 40, 60);
    rig.peers[0].inject(&labelled(&[(0, 9), (101, 1)], &inner));
    let f = &rig.sent(2, 1)[0];
    assert_eq!((&f[0..6], &f[12..14]), (&N2[..], &[0x08, 0x00][..]));
    assert_eq!(f[14 + 8], 64);
    check_icmp(
        &f[14..],
        "172.16.0.5",
        &inner,
        &[(0, false, 9), (101, true, 1)],
    );
    assert_eq!(down(), 3);

    // `always`: a single label with a routed source goes down the LSP;
    // `never`: an unrouted one comes back.
    rig.set_cfg(MplsConfig {
        icmp_tunneling: IcmpTunneling::Always,
        ..MplsConfig::default()
    });
    rig.peers[0].inject(&labelled(&[(100, 1)], &ipv4("203.0.113.9", 40, 60)));
    assert_eq!(lse(&rig.sent(1, 1)[0], 14), (200, true, 254));
    rig.set_cfg(MplsConfig {
        icmp_tunneling: IcmpTunneling::Never,
        ..MplsConfig::default()
    });
    let inner = ipv4_from("172.16.0.5", "203.0.113.9", 40, 60);
    rig.peers[0].inject(&labelled(&[(100, 1)], &inner));
    let f = &rig.sent(0, 1)[0];
    check_icmp(&f[14..], "172.16.0.5", &inner, &[(100, true, 1)]);
    assert!(rig.sent(1, 0).is_empty());
    let t = rig.shared.mpls_totals();
    assert_eq!((t.ttl_expired, t.ttl_icmp_down_lsp, t.forwarded), (6, 4, 0));
}

/// FTN pushes take the TC of the packet's QoS class: the class selector
/// of its DSCP, through `tc_of_class`; with an input policy, the DSCP it
/// re-marked or the 802.1p value it set.
#[test]
fn ftn_push_takes_the_tc_of_the_class() {
    let rig = Rig::new();
    let with_dscp = |dscp: u8| {
        let mut p = ipv4("192.0.2.9", 64, 60);
        p[1] = dscp << 2;
        p[10..12].fill(0);
        let c = checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        eth(0x0800, &p)
    };
    let tc = |f: &[u8]| (f[16] >> 1) & 7;
    rig.peers[0].inject(&with_dscp(46)); // EF: class 5
    let f = &rig.sent(2, 1)[0];
    assert_eq!((lse(f, 14).0, tc(f)), (300, 5));
    rig.peers[0].inject(&with_dscp(0));
    assert_eq!(tc(&rig.sent(2, 1)[0]), 0);
    let mut cfg = MplsConfig::default();
    cfg.tc_of_class[3] = 6;
    rig.set_cfg(cfg);
    rig.peers[0].inject(&with_dscp(26)); // AF31: class 3 → TC 6
    assert_eq!(tc(&rig.sent(2, 1)[0]), 6);
    rig.set_cfg(MplsConfig::default());

    // An input policy on port 0: the class it gives decides — its
    // re-marked DSCP (EF: TC 5), then its `set-pcp` (2: TC 2).
    for (set_dscp, set_pcp, want) in [(Some(46), None, 5), (Some(46), Some(2), 2)] {
        rig.shared
            .services
            .store(Some(Arc::new(input_policy(set_dscp, set_pcp))));
        rig.peers[0].inject(&with_dscp(0));
        let f = &rig.sent(2, 1)[0];
        assert_eq!(
            (tc(f), f[18 + 1] >> 2),
            (want, 46),
            "{set_dscp:?} {set_pcp:?}"
        );
        assert!(ip_ok(&f[18..]));
    }
}

/// Services with one input policy on port 0: class-default re-marks.
fn input_policy(set_dscp: Option<u8>, set_pcp: Option<u8>) -> pipeline::services::Services {
    use pipeline::services::{AttachedPolicy, ClassSpec, Direction, Policy, Services};
    let policy = Policy {
        name: "mark".into(),
        classifier: tables::acl::Classifier::compile(&[]),
        line_class: Box::new([]),
        classes: Box::new([ClassSpec {
            name: "class-default".into(),
            set_dscp,
            set_pcp,
            police: None,
        }]),
        queues: None,
    };
    let mut s = Services::empty(1, 8);
    s.policy_in[0] = Some(Arc::new(AttachedPolicy::new(
        Arc::new(policy),
        0,
        Direction::In,
        1,
    )));
    s.generation = 1 + u64::from(set_pcp.is_some());
    s.finish();
    s
}

/// A pseudowire follows the FIB's current route to its remote PE within
/// the batch, not the transport id the control plane copied into its slot
/// (refreshed only every 50 ms, while the FIB may free and reuse that id
/// after a grace period that counts only the workers).
#[test]
fn pseudowire_transport_follows_the_fib_not_the_cached_id() {
    let mut rig = Rig::new();
    let l3 = rig.shared.l3.load_full().unwrap();
    // The remote PE via next hop 1 (port 1); the slot copies that id.
    let remote_pe = rig.pseudowire_via(3, 1, false);
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

/// Labelled traffic out of a VLAN interface leaves the trunk tagged with
/// its VLAN, and out of a routed subinterface tagged on its port; the
/// stack inside the tag. Swaps and FTN pushes alike.
#[test]
fn labelled_out_of_vlan_interfaces_is_tagged() {
    let rig = Rig::build(true);
    let inner = ipv4("203.0.113.9", 40, 60);
    // (what comes in, port out, dst MAC, src MAC, VLAN, label); TTL 63.
    let ftn4 = eth(0x0800, &ipv4("100.64.4.9", 64, 60));
    let ftn5 = eth(0x0800, &ipv4("100.64.5.9", 64, 60));
    let cases = [
        (labelled(&[(110, 64)], &inner), 3, N4, SVI_MAC, 10, 210),
        (labelled(&[(111, 64)], &inner), 1, N5, RMAC[1], 30, 211),
        (ftn4, 3, N4, SVI_MAC, 10, 304),
        (ftn5, 1, N5, RMAC[1], 30, 305),
    ];
    for (k, (frame, port, dst, src, vlan, label)) in cases.iter().enumerate() {
        rig.peers[0].inject(frame);
        let out = rig.sent(*port, 1);
        assert_eq!(out.len(), 1, "case {k}: one frame out of port {port}");
        let f = &out[0];
        assert_eq!((&f[0..6], &f[6..12]), (&dst[..], &src[..]), "case {k}");
        assert_eq!(&f[12..14], &[0x81, 0x00], "case {k}: tagged");
        assert_eq!(
            u16::from_be_bytes([f[14], f[15]]) & 0xfff,
            *vlan,
            "case {k}"
        );
        assert_eq!(
            &f[16..18],
            &[0x88, 0x47],
            "case {k}: the stack inside the tag"
        );
        assert_eq!(lse(f, 18), (*label, true, 63), "case {k}");
        assert!(ip_ok(&f[22..]));
        assert_eq!(f.len(), 18 + 4 + 60, "case {k}");
    }
    let t = rig.shared.mpls_totals();
    let unsupported = DROP_NAMES.iter().position(|n| *n == "unsupported").unwrap();
    assert_eq!((t.forwarded, t.pushed, t.drops[unsupported]), (2, 2, 0));

    // TTL expiry answered down an LSP that leaves by the VLAN interface
    // (source not routed here): tagged like the traffic.
    let inner = ipv4_from("172.16.0.5", "203.0.113.9", 40, 60);
    rig.peers[0].inject(&labelled(&[(110, 1)], &inner));
    let f = &rig.sent(3, 1)[0];
    assert_eq!(
        (&f[12..14], &f[16..18]),
        (&[0x81, 0x00][..], &[0x88, 0x47][..])
    );
    assert_eq!(lse(f, 18), (210, true, 254));
    check_icmp(&f[22..], "172.16.0.5", &inner, &[(110, true, 1)]);
    // … and back out of the subinterface it came in by, tagged 30.
    let mut tagged = labelled(&[(111, 1)], &ipv4("203.0.113.9", 40, 60));
    tagged[0..6].copy_from_slice(&RMAC[1]);
    tagged.splice(12..12, [0x81, 0x00, 0x00, 30]);
    rig.peers[1].inject(&tagged);
    let f = &rig.sent(1, 1)[0];
    assert_eq!((&f[0..6], &f[6..12]), (&PEER0[..], &RMAC[1][..]));
    assert_eq!(
        (&f[12..16], &f[16..18]),
        (&[0x81, 0x00, 0, 30][..], &[0x08, 0x00][..])
    );
    check_icmp_from(&f[18..], "10.0.5.1", "10.0.0.2", &[(111, true, 1)]);
}

/// A pseudowire whose remote PE is reached over a routed subinterface:
/// encapsulated with the subinterface's tag on its port.
#[test]
fn pseudowire_over_a_subinterface_is_tagged() {
    let mut rig = Rig::build(true);
    rig.pseudowire_via(6, 5, false);
    let mut customer = vec![0u8; 100];
    customer[..6].copy_from_slice(&[2, 0, 0, 0, 9, 1]);
    customer[6..12].copy_from_slice(&[2, 0, 0, 0, 9, 2]);
    customer[12..14].copy_from_slice(&[0x08, 0x00]);
    rig.peers[4].inject(&customer);
    let out = rig.sent(1, 1);
    assert_eq!(out.len(), 1, "out of the subinterface's port");
    let f = &out[0];
    assert_eq!((&f[0..6], &f[6..12]), (&N5[..], &RMAC[1][..]));
    assert_eq!(&f[12..18], &[0x81, 0x00, 0, 30, 0x88, 0x47]);
    assert_eq!(lse(f, 18), (500, true, 255));
    assert_eq!(&f[22..], &customer[..]);
}

/// A pseudowire whose remote PE is reached over a VLAN interface (SVI):
/// the labelled frame goes through the layer-2 stage and leaves tagged
/// with the VLAN on the trunk member port; a labelled frame received
/// tagged on that port for the SVI is popped to the circuit. (Before:
/// dropped `no-path`.)
#[test]
fn pseudowire_over_a_vlan_interface_is_tagged() {
    use datapath::mpls::circuits::PW_DROP_NAMES;
    let mut rig = Rig::build(true);
    let lfib = rig.shared.mpls.load_full().unwrap().lfib.clone();
    // The remote PE through next hop 4 (10.0.4.2 on the SVI of VLAN 10).
    rig.pseudowire_via(6, 4, true);
    lfib.set_ilm(600, IlmAction::PopToPseudowire { pw: 0 })
        .unwrap();
    let mut customer = vec![0u8; 100];
    customer[..6].copy_from_slice(&[2, 0, 0, 0, 9, 1]);
    customer[6..12].copy_from_slice(&[2, 0, 0, 0, 9, 2]);
    customer[12..14].copy_from_slice(&[0x08, 0x00]);
    customer[14] = 0x45;
    rig.peers[4].inject(&customer);
    let out = rig.sent(3, 1);
    assert_eq!(out.len(), 1, "out of the VLAN's trunk port");
    let f = &out[0];
    assert_eq!((&f[0..6], &f[6..12]), (&N4[..], &SVI_MAC[..]));
    assert_eq!(
        &f[12..18],
        &[0x81, 0x00, 0, 10, 0x88, 0x47],
        "tagged VLAN 10"
    );
    assert_eq!(lse(f, 18), (500, true, 255));
    assert_eq!(&f[22..26], &[0, 0, 0, 0], "control word");
    assert_eq!(&f[26..], &customer[..]);
    let pws = rig.shared.pseudowires.load_full().unwrap();
    let t = pws.totals(0);
    assert_eq!(t.tx_packets, 1);
    let no_path = PW_DROP_NAMES.iter().position(|n| *n == "no-path").unwrap();
    assert_eq!(t.drops[no_path], 0);

    // Back: tagged VLAN 10 on the trunk, to the SVI's MAC, label 600 +
    // control word: the customer frame out of the circuit's port.
    let mut back = Vec::new();
    back.extend_from_slice(&SVI_MAC);
    back.extend_from_slice(&N4);
    back.extend_from_slice(&[0x81, 0x00, 0, 10, 0x88, 0x47]);
    back.extend_from_slice(&((600u32 << 12) | 0x100 | 64).to_be_bytes());
    back.extend_from_slice(&[0, 0, 0, 0]);
    back.extend_from_slice(&customer);
    rig.peers[3].inject(&back);
    let out = rig.sent(4, 1);
    assert_eq!(out.len(), 1, "out of the circuit (port 6)");
    assert_eq!(&out[0][..], &customer[..]);
    assert_eq!(pws.totals(0).rx_packets, 1);
}

/// A routed subinterface's packets, plain or labelled, leave through its
/// port's output policy — re-marking (DSCP, and `set-pcp` into the
/// subinterface's tag) and the port's class queues — but not through the
/// port's output ACL,
/// which filters the port's own interface (docs/vrf.md, "Subinterfaces").
/// Label-switched and pseudowire frames too: the policy's class for a
/// frame with no IP key, its `set-pcp` in the tag, nothing under the
/// labels re-marked. (Before: the port's policy was skipped, the frames
/// left unmarked and beside its queues.)
#[test]
fn subinterface_traffic_takes_its_ports_output_policy_not_its_acl() {
    use pipeline::qos::QueueSpec;
    use pipeline::services::{
        class_counter, AclFamily, AclList, AclSet, AttachPoint, AttachedAcl, AttachedPolicy,
        ClassSpec, Direction, Policy, Services,
    };
    use tables::acl::{Classifier, Match};
    let mut rig = Rig::build(true);
    let l3 = rig.shared.l3.load_full().unwrap();
    // A pseudowire from circuit port 6 whose remote PE is behind the
    // subinterface.
    rig.pseudowire_via(6, 5, false);
    // Behind the subinterface (5 = port 1, tag 30), and behind port 1's
    // own interface.
    l3.fib4.insert(u32::from(a4("100.64.9.0")), 24, 5).unwrap();
    l3.fib4.insert(u32::from(a4("100.64.1.0")), 24, 1).unwrap();
    // Port 1: an output ACL that denies all IPv4, and an output policy
    // marking EF and 802.1p 5, with or without class queues.
    let deny = Arc::new(AclList {
        name: "deny-all".into(),
        family: AclFamily::Ipv4,
        classifier: Classifier::compile(&[Match {
            family: Some(4),
            ..Match::default()
        }]),
        log: vec![false].into(),
        log_events: crossbeam_queue::ArrayQueue::new(4),
        line_rule: vec![0].into(),
        permit: vec![false].into(),
    });
    let services = |queues: bool, generation: u64| {
        let policy = Arc::new(Policy {
            name: "mark".into(),
            classifier: Classifier::compile(&[]),
            line_class: Box::new([]),
            classes: Box::new([ClassSpec {
                name: "class-default".into(),
                set_dscp: Some(46),
                set_pcp: Some(5),
                police: None,
            }]),
            queues: queues.then(|| {
                vec![QueueSpec {
                    priority: false,
                    weight: 1,
                    depth: 64,
                }]
                .into()
            }),
        });
        let attached = Arc::new(AttachedPolicy::new(policy, 1, Direction::Out, 1));
        let mut s = Services::empty(1, 8);
        s.port_out[1] = AclSet {
            v4: Some(Arc::new(AttachedAcl::new(
                deny.clone(),
                AttachPoint::Port(1),
                Direction::Out,
                1,
            ))),
            ..AclSet::default()
        };
        s.policy_out[1] = Some(attached.clone());
        s.generation = generation;
        s.finish();
        (s, attached)
    };
    for (queues, generation) in [(false, 1), (true, 2)] {
        let (s, policy) = services(queues, generation);
        rig.shared.services.store(Some(Arc::new(s)));
        rig.peers[0].inject(&eth(0x0800, &ipv4("100.64.9.9", 64, 60)));
        let out = rig.sent(1, 1);
        assert_eq!(out.len(), 1, "queues {queues}: out of port 1, tagged");
        let f = &out[0];
        assert_eq!((&f[0..6], &f[6..12]), (&N5[..], &RMAC[1][..]));
        assert_eq!((&f[12..14], f[15]), (&[0x81, 0x00][..], 30));
        assert_eq!(
            f[14] >> 5,
            5,
            "queues {queues}: the port's set-pcp in the tag"
        );
        assert_eq!(f[18 + 1] >> 2, 46, "queues {queues}: the port's set-dscp");
        assert!(ip_ok(&f[18..]) && f[18 + 8] == 63);
        assert_eq!(policy.counter(0, class_counter::PACKETS), 1);
        // Labelled out of the subinterface (FTN push 305): the same.
        rig.peers[0].inject(&eth(0x0800, &ipv4("100.64.5.9", 64, 60)));
        let out = rig.sent(1, 1);
        assert_eq!(out.len(), 1, "queues {queues}: labelled out of port 1");
        let f = &out[0];
        assert_eq!(
            &f[12..18],
            &[0x81, 0x00, 0xa0, 30, 0x88, 0x47],
            "PCP 5, tag 30, MPLS"
        );
        assert_eq!(lse(f, 18).0, 305);
        assert_eq!(
            f[22 + 1] >> 2,
            46,
            "queues {queues}: the port's set-dscp inside"
        );
        assert_eq!(policy.counter(0, class_counter::PACKETS), 2);
        // Label-switched out of the subinterface (111 → 211 via 5): PCP 5
        // in the tag; the packet under the labels untouched.
        let inner = ipv4("203.0.113.9", 40, 60);
        rig.peers[0].inject(&labelled(&[(111, 64)], &inner));
        let out = rig.sent(1, 1);
        assert_eq!(out.len(), 1, "queues {queues}: swapped out of port 1");
        let f = &out[0];
        assert_eq!(&f[12..18], &[0x81, 0x00, 0xa0, 30, 0x88, 0x47]);
        assert_eq!(lse(f, 18), (211, true, 63));
        assert_eq!(&f[22..], &inner[..], "queues {queues}: not re-marked");
        assert_eq!(policy.counter(0, class_counter::PACKETS), 3);
        // A pseudowire over the subinterface: the same.
        let mut customer = vec![0u8; 100];
        customer[..6].copy_from_slice(&[2, 0, 0, 0, 9, 1]);
        customer[6..12].copy_from_slice(&[2, 0, 0, 0, 9, 2]);
        customer[12..14].copy_from_slice(&[0x88, 0xb5]);
        rig.peers[4].inject(&customer);
        let out = rig.sent(1, 1);
        assert_eq!(out.len(), 1, "queues {queues}: pseudowire out of port 1");
        let f = &out[0];
        assert_eq!(&f[12..18], &[0x81, 0x00, 0xa0, 30, 0x88, 0x47]);
        assert_eq!(lse(f, 18), (500, true, 255));
        assert_eq!(&f[22..], &customer[..]);
        assert_eq!(policy.counter(0, class_counter::PACKETS), 4);
        // The port's own interface: its ACL denies.
        rig.peers[0].inject(&eth(0x0800, &ipv4("100.64.1.9", 64, 60)));
        assert!(
            rig.sent(1, 1).is_empty(),
            "queues {queues}: denied on port 1"
        );
    }
}

/// TC (3 bits) of the label stack entry at `off`.
fn tc(f: &[u8], off: usize) -> u8 {
    (f[off + 2] >> 1) & 7
}

/// An attachment circuit's port runs its input services on the customer
/// frame before it enters the pseudowire — the report's circuits carry
/// the 10,000-line ACL, QoS re-marking and NetFlow: a denied packet is
/// the port's `acl-deny` drop and never encapsulated, a re-marked one
/// goes in re-marked with the labels' TC from its class (`set-pcp`, else
/// the customer's 802.1p, else its DSCP's precedence), and the flow is
/// accounted with the circuit's port in and the uplink out. (Before: no
/// service ran on circuit frames, every label left with TC 0.)
#[test]
fn pseudowire_circuit_takes_its_ports_input_services() {
    use pipeline::services::{
        class_counter, AclFamily, AclList, AclSet, AttachPoint, AttachedAcl, AttachedPolicy,
        ClassSpec, Direction, FlowSettings, Policy, Services,
    };
    use pipeline::DropReason;
    use tables::acl::{Classifier, Match};
    let mut rig = Rig::new();
    rig.pseudowire_via(3, 1, false);
    // Port 3 (the circuit): deny IPv4 to 203.0.113.66, permit the rest;
    // a policy that re-marks everything AF11 (and 802.1p `pcp`); flows.
    let acl = Arc::new(AclList {
        name: "ac-in".into(),
        family: AclFamily::Ipv4,
        classifier: Classifier::compile(&[
            Match {
                family: Some(4),
                dst_ip: Some((u128::from(u32::from(a4("203.0.113.66"))), 32)),
                ..Match::default()
            },
            Match {
                family: Some(4),
                ..Match::default()
            },
        ]),
        log: vec![false, false].into(),
        log_events: crossbeam_queue::ArrayQueue::new(4),
        line_rule: vec![0, 1].into(),
        permit: vec![false, true].into(),
    });
    let services = |pcp: Option<u8>, generation: u64| {
        let policy = Arc::new(Policy {
            name: "mark".into(),
            classifier: Classifier::compile(&[]),
            line_class: Box::new([]),
            classes: Box::new([ClassSpec {
                name: "class-default".into(),
                set_dscp: Some(10),
                set_pcp: pcp,
                police: None,
            }]),
            queues: None,
        });
        let attached = Arc::new(AttachedPolicy::new(policy, 1, Direction::In, 3));
        let mut s = Services::empty(1, 8);
        s.port_in[3] = AclSet {
            v4: Some(Arc::new(AttachedAcl::new(
                acl.clone(),
                AttachPoint::Port(3),
                Direction::In,
                1,
            ))),
            ..AclSet::default()
        };
        s.policy_in[3] = Some(attached.clone());
        s.flows = Some(FlowSettings {
            sampling: 1,
            active_ms: 60_000,
            inactive_ms: 1,
            cache_size: 64,
        });
        s.generation = generation;
        s.finish();
        (s, attached)
    };
    let (s, policy) = services(None, 1);
    rig.shared.services.store(Some(Arc::new(s)));
    let customer = eth(0x0800, &ipv4("198.51.100.7", 64, 60));
    rig.peers[3].inject(&customer);
    let out = rig.sent(1, 1);
    assert_eq!(out.len(), 1, "permitted: into the pseudowire");
    let f = &out[0];
    assert_eq!(lse(f, 14), (500, true, 255));
    assert_eq!(tc(f, 14), 1, "TC from the re-marked DSCP (AF11: class 1)");
    let inner = &f[18..];
    assert_eq!(inner.len(), customer.len());
    assert_eq!(inner[14 + 1] >> 2, 10, "the customer packet re-marked AF11");
    assert!(ip_ok(&inner[14..]), "its checksum updated");
    assert_eq!(policy.counter(0, class_counter::PACKETS), 1);
    // Denied: dropped on the circuit's port, not encapsulated.
    rig.peers[3].inject(&eth(0x0800, &ipv4("203.0.113.66", 64, 60)));
    assert!(rig.sent(1, 0).is_empty(), "denied: nothing out");
    let denied = rig.counters.ports[3].drops[DropReason::AclDeny as usize].get();
    assert_eq!(denied, 1, "counted as the port's acl-deny");
    let pws = rig.shared.pseudowires.load_full().unwrap();
    assert_eq!(pws.totals(0).tx_packets, 1);
    // The permitted flow, accounted: circuit port in, uplink out.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut records = Vec::new();
    while records.is_empty() && Instant::now() < deadline {
        for q in rig.shared.flow_queues() {
            while let Some(r) = q.pop() {
                records.push(r);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(records.len(), 1, "one flow: {records:?}");
    let r = &records[0];
    assert_eq!((r.key.in_port, r.out_port, r.packets), (3, 1, 1));
    assert_eq!(r.key.dst_ip, u128::from(u32::from(a4("198.51.100.7"))));

    // `set-pcp 4`: the labels' TC is 4 whatever the packet's DSCP.
    let (s, _) = services(Some(4), 2);
    rig.shared.services.store(Some(Arc::new(s)));
    rig.peers[3].inject(&customer);
    let f = &rig.sent(1, 1)[0];
    assert_eq!(tc(f, 14), 4, "the policy's set-pcp");
    // No services: a tagged customer frame's own 802.1p (6) becomes the
    // TC; an untagged packet's DSCP precedence (EF: 5).
    rig.shared.services.store(None);
    let mut tagged = customer.clone();
    tagged.splice(12..12, [0x81, 0x00, 6 << 5, 100]);
    rig.peers[3].inject(&tagged);
    let f = &rig.sent(1, 1)[0];
    assert_eq!(tc(f, 14), 6, "the customer's 802.1p");
    assert_eq!(&f[18..], &tagged[..], "carried unchanged");
    let mut ef = customer.clone();
    ef[15] = 46 << 2;
    rig.peers[3].inject(&ef);
    let f = &rig.sent(1, 1)[0];
    assert_eq!(tc(f, 14), 5, "EF's precedence");
}
