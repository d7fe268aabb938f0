//! The L3VPN data path in the worker, on real frames through memory ports
//! (docs/vrf.md, "L3VPN"): a VRF's VPN label pops and routes the packet in
//! that VRF's FIB, whatever the ingress interface's VRF; a VRF's imported
//! VPN routes push the VPN label under the transport label and leave by
//! the default VRF's uplink, to the uplink neighbour of the default VRF.
//!
//! Port 0: uplink, default VRF, 10.0.0.1/24, strict uRPF; its neighbour
//! P 10.0.0.2. Ports 1 and 2: VRFs 1 and 2, both 10.1.0.1/24, each with
//! its own CE 10.1.0.2 (different MACs). The default VRF routes the
//! customers' 192.0.2.0/24 to the uplink too, so a packet routed in the
//! wrong table would show.

use datapath::mpls::{MplsPlane, DROP_NAMES};
use datapath::{Mailbox, PortCommand, Shared, Worker, WorkerOptions};
use io::{MemoryPeer, MemoryPort};
use pipeline::l3::{L3Drop, L3Tables, Punt, RouterInterface, Urpf, VrfTables};
use pipeline::mpls::MplsConfig;
use pipeline::WorkerCounters;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::mpls::{
    IlmAction, LabelStack, Lfib, LfibSize, Nhlfe, Path, PopAf, NHLFE_BIT, VIA_DEFAULT_BIT,
};
use tables::{
    L2Tables, LearnGate, Lpm4, Lpm6, MacTable, Neighbor, NeighborState, NeighborTable, NextHop,
    NextHopTable, Tables,
};
use testkit::ip::checksum;

const RMAC: [[u8; 6]; 3] = [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1], [2, 0, 0, 0, 1, 2]];
/// P router behind the uplink, and the CEs of VRF 1 and VRF 2.
const P: [u8; 6] = [2, 0, 0, 0, 2, 0];
const CE: [[u8; 6]; 2] = [[2, 0, 0, 0, 3, 1], [2, 0, 0, 0, 3, 2]];
/// Transport label toward the remote PE, and the remote PE's VPN labels.
const TRANSPORT: u32 = 16;
const VPN_A: u32 = 600;
const VPN_B: u32 = 601;
/// A customer address behind the remote PE.
const REMOTE: &str = "10.9.0.2";

fn a4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn ip(s: &str) -> IpAddr {
    IpAddr::V4(a4(s))
}

struct Rig {
    shared: Arc<Shared>,
    counters: Arc<WorkerCounters>,
    peers: Vec<MemoryPeer>,
    _mb: Arc<Mailbox>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn neighbor(t: &NeighborTable, addr: &str, mac: [u8; 6], port: u16) {
    t.upsert(
        ip(addr),
        Neighbor {
            mac,
            port,
            state: NeighborState::Reachable,
            confirmed: 0,
        },
    );
}

fn hop(port: u16, gw: &str) -> NextHop {
    NextHop {
        port,
        gateway: Some(ip(gw)),
    }
}

impl Rig {
    fn new() -> Rig {
        let shared = Arc::new(Shared::new(
            Tables {
                l2: L2Tables::new(Vec::new(), &[]),
                mac: Arc::new(MacTable::new(64)),
                learn_gate: Arc::new(LearnGate::default()),
            },
            64,
        ));
        // Default VRF: the uplink neighbour; 192.0.2.0/24 also routed
        // there (a leak detector).
        let nht = Arc::new(NextHopTable::new(16, 4));
        nht.set(1, hop(0, "10.0.0.2")).unwrap();
        nht.set(
            2,
            NextHop {
                port: 0,
                gateway: None,
            },
        )
        .unwrap();
        let neigh = Arc::new(NeighborTable::new(64));
        neighbor(&neigh, "10.0.0.2", P, 0);
        let fib4 = Arc::new(Lpm4::new());
        fib4.insert(u32::from(a4("192.0.2.0")), 24, 1).unwrap();
        fib4.insert(u32::from(a4("10.0.0.0")), 24, 2).unwrap();

        let lfib = Arc::new(Lfib::new(LfibSize {
            nhlfes: 16,
            pseudowires: 4,
            acs: 4,
            protections: 4,
        }));
        let nhlfe = |labels: &[u32]| Nhlfe {
            primary: Path {
                next_hop: 1,
                labels: LabelStack::new(labels).unwrap(),
            },
            backup: None,
            protection: None,
        };
        // VRF 1's VPN routes: transport + VPN label; VRF 2's: the remote
        // PE is adjacent (implicit null), the VPN label alone.
        let to_a = lfib.set_nhlfe(0, &nhlfe(&[TRANSPORT, VPN_A])).unwrap();
        let to_b = lfib.set_nhlfe(1, &nhlfe(&[VPN_B])).unwrap();
        assert_eq!((to_a, to_b), (NHLFE_BIT, NHLFE_BIT | 1));
        // A VPN route toward a core neighbour not yet resolved.
        nht.set(3, hop(0, "10.0.0.9")).unwrap();
        let unresolved = Nhlfe {
            primary: Path {
                next_hop: 3,
                labels: LabelStack::new(&[VPN_A]).unwrap(),
            },
            backup: None,
            protection: None,
        };
        let to_unresolved = lfib.set_nhlfe(2, &unresolved).unwrap();
        // Our own VPN labels: 500 → VRF 1, 501 → VRF 2; 502 names a VRF
        // the tables do not have.
        for (label, table) in [(500, 1), (501, 2), (502, 7)] {
            lfib.set_ilm(
                label,
                IlmAction::PopLookup {
                    af: PopAf::Any,
                    table,
                },
            )
            .unwrap();
        }

        let vrf = |k: usize, vpn_target: u32| {
            let nh = Arc::new(NextHopTable::new(16, 4));
            nh.set(1, hop(1 + k as u16, "10.1.0.2")).unwrap();
            // An unresolved CE: what the layer-3 stage would punt.
            nh.set(2, hop(1 + k as u16, "10.1.0.9")).unwrap();
            let n = Arc::new(NeighborTable::new(64));
            neighbor(&n, "10.1.0.2", CE[k], 1 + k as u16);
            let f4 = Arc::new(Lpm4::new());
            f4.insert(u32::from(a4("192.0.2.0")), 24, 1).unwrap();
            f4.insert(u32::from(a4("198.51.100.0")), 24, 2).unwrap();
            f4.insert(
                u32::from(a4("203.0.113.0")),
                24,
                VIA_DEFAULT_BIT | vpn_target,
            )
            .unwrap();
            if k == 0 {
                // Routes VRF 2 leaked into VRF 1 (import vrf): out of VRF
                // 2's port, via its CE (known there) or an unknown host.
                nh.set(3, hop(2, "10.1.0.2")).unwrap();
                nh.set(4, hop(2, "10.1.0.9")).unwrap();
                f4.insert(u32::from(a4("198.18.0.0")), 16, 3).unwrap();
                f4.insert(u32::from(a4("198.19.0.0")), 16, 4).unwrap();
                f4.insert(
                    u32::from(a4("203.0.114.0")),
                    24,
                    VIA_DEFAULT_BIT | to_unresolved,
                )
                .unwrap();
            }
            VrfTables {
                fib4: f4,
                fib6: Arc::new(Lpm6::new()),
                nexthops: nh,
                neighbors: n,
            }
        };
        let vrfs = vec![vrf(0, to_a), vrf(1, to_b)];
        let ifaces = vec![
            RouterInterface {
                port: 0,
                mac: RMAC[0],
                v4: vec![(u32::from(a4("10.0.0.1")), 24)],
                v6: Vec::new(),
                mtu: 1500,
                urpf: Urpf::Strict,
                vlan: None,
                vrf: 0,
            },
            RouterInterface {
                port: 1,
                mac: RMAC[1],
                v4: vec![(u32::from(a4("10.1.0.1")), 24)],
                v6: Vec::new(),
                mtu: 1500,
                urpf: Urpf::Off,
                vlan: None,
                vrf: 1,
            },
            RouterInterface {
                port: 2,
                mac: RMAC[2],
                v4: vec![(u32::from(a4("10.1.0.1")), 24)],
                v6: Vec::new(),
                mtu: 1500,
                urpf: Urpf::Off,
                vlan: None,
                vrf: 2,
            },
        ];
        shared.l3.store(Some(Arc::new(
            L3Tables::new(fib4, Arc::new(Lpm6::new()), nht, neigh, ifaces)
                .with_vrfs(vrfs)
                .with_lfib(lfib.clone()),
        )));
        shared.mpls.store(Some(Arc::new(MplsPlane {
            lfib,
            cfg: MplsConfig::default(),
        })));
        let mb = Arc::new(Mailbox::default());
        let mut peers = Vec::new();
        for id in 0..3u16 {
            let (port, peer) = MemoryPort::new(&format!("vp{id}"));
            mb.send(PortCommand::Attach {
                id,
                port: Box::new(port),
                rx: true,
                routed: true,
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
            _mb: mb,
            thread: Some(std::thread::spawn(move || w.run())),
        }
    }

    /// What each port sent within a short while (waits for `n` frames in
    /// all, then 100 ms more).
    fn sent(&self, n: usize) -> Vec<Vec<Vec<u8>>> {
        let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); self.peers.len()];
        let deadline = Instant::now() + Duration::from_secs(3);
        let count = |g: &Vec<Vec<Vec<u8>>>| g.iter().map(Vec::len).sum::<usize>();
        while count(&got) < n && Instant::now() < deadline {
            for (k, p) in self.peers.iter().enumerate() {
                got[k].extend(p.take_sent());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(100));
        for (k, p) in self.peers.iter().enumerate() {
            got[k].extend(p.take_sent());
        }
        got
    }

    fn mpls_drop(&self, name: &str) -> u64 {
        let i = DROP_NAMES.iter().position(|n| *n == name).unwrap();
        self.shared.mpls_totals().drops[i]
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

/// IPv4/UDP packet from `src` to `dst` (no Ethernet), 60 bytes.
fn ipv4(src: &str, dst: &str, ttl: u8) -> Vec<u8> {
    let len = 60;
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

fn eth(to: [u8; 6], from: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = to.to_vec();
    f.extend_from_slice(&from);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// From P to the uplink's MAC, with `labels` (label, TTL) over `payload`.
fn labelled(labels: &[(u32, u8)], payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    for (i, (l, ttl)) in labels.iter().enumerate() {
        let s = u32::from(i + 1 == labels.len());
        p.extend_from_slice(&(l << 12 | s << 8 | *ttl as u32).to_be_bytes());
    }
    p.extend_from_slice(payload);
    eth(RMAC[0], P, 0x8847, &p)
}

/// (label, S, TTL) of the entry at `off`.
fn lse(f: &[u8], off: usize) -> (u32, bool, u8) {
    let w = u32::from_be_bytes([f[off], f[off + 1], f[off + 2], f[off + 3]]);
    (w >> 12, w >> 8 & 1 == 1, w as u8)
}

/// Egress PE: each VPN label routes its packet in its own VRF, to that
/// VRF's CE, never by the ingress interface's (default) table.
#[test]
fn vpn_label_pops_and_routes_in_its_vrf() {
    let rig = Rig::new();
    let up = &rig.peers[0];
    for (k, label) in [(0usize, 500u32), (1, 501)] {
        up.inject(&labelled(&[(label, 20)], &ipv4(REMOTE, "192.0.2.9", 64)));
        let out = rig.sent(1);
        assert_eq!(
            out.iter().map(Vec::len).collect::<Vec<_>>(),
            [usize::from(false), usize::from(k == 0), usize::from(k == 1)],
            "label {label}: one frame, out of VRF {}'s port only",
            k + 1
        );
        let f = &out[1 + k][0];
        assert_eq!(
            (&f[0..6], &f[6..12], &f[12..14]),
            (&CE[k][..], &RMAC[1 + k][..], &[0x08, 0x00][..]),
            "label {label}"
        );
        // Uniform TTL: min(IP 64, label 20), then the routing hop.
        assert_eq!(f[14 + 8], 19);
        assert_eq!(checksum(&f[14..34]), 0, "IPv4 checksum");
        assert_eq!(&f[14 + 12..14 + 20], &ipv4(REMOTE, "192.0.2.9", 64)[12..20]);
    }
    // Strict uRPF on the uplink did not apply (the remote customer's
    // address is in no table here).
    assert_eq!(
        rig.counters.l3.drops[L3Drop::Urpf as usize].get(),
        0,
        "uRPF dropped VPN packets"
    );

    // Under a transport label popped here first (ultimate hop, explicit
    // null 0 above it): the same.
    up.inject(&labelled(
        &[(0, 20), (501, 20)],
        &ipv4(REMOTE, "192.0.2.9", 64),
    ));
    let out = rig.sent(1);
    assert_eq!((out[0].len(), out[1].len(), out[2].len()), (0, 0, 1));
    assert_eq!(&out[2][0][0..6], &CE[1][..]);

    // A label naming a VRF the tables do not have: routed nowhere.
    let nrp = rig.counters.l3.drops[L3Drop::NotRoutedPort as usize].get();
    up.inject(&labelled(&[(502, 20)], &ipv4(REMOTE, "192.0.2.9", 64)));
    let out = rig.sent(0);
    assert!(out.iter().all(Vec::is_empty), "VRF 7: {out:?}");
    assert_eq!(
        rig.counters.l3.drops[L3Drop::NotRoutedPort as usize].get(),
        nrp + 1
    );

    // The CE's neighbour unknown: the layer-3 stage would punt it to the
    // ingress port's kernel, which is the default VRF's. It goes to the
    // egress interface's twin instead (VRF 2's port 2, whose kernel
    // resolves the CE and forwards it), addressed to that twin's MAC.
    let unsupported = rig.mpls_drop("unsupported");
    let packet = ipv4(REMOTE, "198.51.100.7", 64);
    up.inject(&labelled(&[(501, 20)], &packet));
    // TTL expiring in the VRF: no ICMP error back into the default VRF.
    let suppressed = rig.counters.l3.icmp_suppressed.get();
    up.inject(&labelled(&[(500, 1)], &ipv4(REMOTE, "192.0.2.9", 1)));
    let out = rig.sent(0);
    assert!(out.iter().all(Vec::is_empty), "{out:?}");
    assert_eq!(rig.mpls_drop("unsupported"), unsupported);
    let b = rig.shared.punts.pop().expect("punted for resolution");
    assert_eq!(b.port, 2, "to VRF 2's interface, not the uplink");
    assert_eq!(b.reason, Punt::NeedsResolution as u8);
    let f = b.frame();
    assert_eq!((&f[0..6], &f[12..14]), (&RMAC[2][..], &[0x08, 0x00][..]));
    // Popped in uniform mode: the IP TTL is the label's (20), not yet
    // decremented (the kernel does that); the header checksum fixed.
    assert_eq!(f[14 + 8], 20, "IP TTL");
    assert_eq!(checksum(&f[14..34]), 0, "IP header checksum");
    assert_eq!(&f[14 + 12..], &packet[12..], "addresses and payload");
    assert!(rig.shared.punts.pop().is_none(), "one punt");
    assert_eq!(rig.counters.l3.icmp_suppressed.get(), suppressed + 1);

    // Plain IP on the uplink still uses the default table (the leak
    // detector route): no VRF state stuck to the batch slots.
    up.inject(&eth(RMAC[0], P, 0x0800, &ipv4("10.0.0.2", "192.0.2.9", 64)));
    let out = rig.sent(1);
    assert_eq!((out[0].len(), out[1].len(), out[2].len()), (1, 0, 0));
    let t = rig.shared.mpls_totals();
    assert_eq!(t.popped, 6);
}

/// Ingress PE: a VRF's VPN route pushes [transport, VPN label] and leaves
/// by the default VRF's uplink, to the default VRF's neighbour; the same
/// prefix in the other VRF pushes its own VPN label.
#[test]
fn vpn_route_pushes_the_vpn_label_under_the_transport_label() {
    let rig = Rig::new();
    for (k, want) in [
        (0usize, vec![(TRANSPORT, false, 63), (VPN_A, true, 63)]),
        (1, vec![(VPN_B, true, 63)]),
    ] {
        rig.peers[1 + k].inject(&eth(
            RMAC[1 + k],
            CE[k],
            0x0800,
            &ipv4("10.1.0.2", "203.0.113.9", 64),
        ));
        let out = rig.sent(1);
        assert_eq!(
            (out[0].len(), out[1].len(), out[2].len()),
            (1, 0, 0),
            "VRF {}: one frame, out of the uplink",
            k + 1
        );
        let f = &out[0][0];
        assert_eq!(
            (&f[0..6], &f[6..12], &f[12..14]),
            (&P[..], &RMAC[0][..], &[0x88, 0x47][..]),
            "VRF {}",
            k + 1
        );
        let got: Vec<(u32, bool, u8)> = (0..want.len()).map(|i| lse(f, 14 + 4 * i)).collect();
        assert_eq!(got, want, "VRF {} label stack", k + 1);
        let ip = &f[14 + 4 * want.len()..];
        assert_eq!(ip[8], 63, "IP TTL");
        assert_eq!(checksum(&ip[..20]), 0, "IPv4 checksum");
        assert_eq!(&ip[16..20], &a4("203.0.113.9").octets());
    }
    // The VRFs' own routes stay plain: 192.0.2.9 from VRF 1 goes to its
    // CE, unlabelled (not to the default VRF's uplink route).
    rig.peers[1].inject(&eth(
        RMAC[1],
        CE[0],
        0x0800,
        &ipv4("10.1.0.2", "192.0.2.9", 64),
    ));
    let out = rig.sent(1);
    assert_eq!((out[0].len(), out[1].len(), out[2].len()), (0, 1, 0));
    assert_eq!(&out[1][0][12..14], &[0x08, 0x00]);
    assert_eq!(rig.shared.mpls_totals().pushed, 2);
}

/// A route leaked from VRF 2 into VRF 1 (`import vrf`): out of VRF 2's
/// port to VRF 2's neighbour; with that neighbour unknown, the packet is
/// punted to VRF 2's twin (whose kernel can resolve it), not to the
/// ingress port's (VRF 1's kernel has no such route).
#[test]
fn leaked_route_leaves_by_the_source_vrf_and_resolves_there() {
    let rig = Rig::new();
    rig.peers[1].inject(&eth(
        RMAC[1],
        CE[0],
        0x0800,
        &ipv4("10.1.0.2", "198.18.0.7", 64),
    ));
    let out = rig.sent(1);
    assert_eq!((out[0].len(), out[1].len(), out[2].len()), (0, 0, 1));
    assert_eq!(
        (&out[2][0][0..6], &out[2][0][6..12]),
        (&CE[1][..], &RMAC[2][..]),
        "VRF 2's 10.1.0.2, not VRF 1's"
    );
    let packet = ipv4("10.1.0.2", "198.19.0.7", 64);
    rig.peers[1].inject(&eth(RMAC[1], CE[0], 0x0800, &packet));
    let out = rig.sent(0);
    assert!(out.iter().all(Vec::is_empty), "{out:?}");
    let b = rig.shared.punts.pop().expect("punted for resolution");
    assert_eq!(b.port, 2, "to VRF 2's interface, not the ingress port");
    assert_eq!(b.reason, Punt::NeedsResolution as u8);
    assert_eq!(&b.frame()[0..6], &RMAC[2][..], "addressed to that twin");
    assert!(rig.shared.punts.pop().is_none(), "one punt");
    // A VPN route whose core neighbour is unknown: the punt stays with the
    // ingress port (VRF 1's kernel); the default VRF's kernel would route
    // the customer's packet by the global table, unlabelled.
    rig.peers[1].inject(&eth(
        RMAC[1],
        CE[0],
        0x0800,
        &ipv4("10.1.0.2", "203.0.114.7", 64),
    ));
    let out = rig.sent(0);
    assert!(out.iter().all(Vec::is_empty), "{out:?}");
    let b = rig.shared.punts.pop().expect("punted");
    assert_eq!(b.port, 1, "the ingress port, not the core's twin");
    assert!(rig.shared.punts.pop().is_none(), "one punt");
}

/// Egress PE under load: receive batches full of labelled frames (as a
/// busy uplink gives) still route every popped packet. The popped packet
/// used to be appended to the batch before the labelled frames left it,
/// so a full batch had no room and lost it (`batch-full`: 85 % of a
/// 64-byte flood between two PEs, `lanyard/tests/static_vpn.rs`).
#[test]
fn full_batches_of_vpn_frames_lose_nothing() {
    let rig = Rig::new();
    let up = &rig.peers[0];
    let n = 3000;
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|k| {
            labelled(
                &[(500 + (k % 2) as u32, 20)],
                &ipv4(REMOTE, "192.0.2.9", 64),
            )
        })
        .collect();
    for f in &frames {
        up.inject(f);
    }
    let out = rig.sent(n);
    assert_eq!(rig.mpls_drop("batch-full"), 0);
    assert_eq!(
        (out[0].len(), out[1].len(), out[2].len()),
        (0, n / 2, n / 2),
        "each VRF's CE gets its own, nothing goes back up"
    );
    assert!(out[1].iter().all(|f| f[0..6] == CE[0] && f[14 + 8] == 19));
    assert!(out[2].iter().all(|f| f[0..6] == CE[1]));
}

/// The far PE's own VRF address over its VPN label (docs/vrf.md,
/// "Traffic of a VRF's own kernel"): delivered to the twin holding the
/// address in the label's VRF, not dropped; what that VRF's kernel then
/// sends to Lanyard's gateway (the `to_vlan` queue, `FROM_KERNEL_ROUTE`)
/// is routed in the twin's VRF — VPN routes labelled — and what has no
/// route, or no TTL left, is counted and dropped, with no ICMP error.
#[test]
fn own_vrf_address_by_label_is_delivered_and_the_kernels_answer_routed() {
    let rig = Rig::new();
    let up = &rig.peers[0];
    let unsupported = rig.mpls_drop("unsupported");
    let echo = ipv4(REMOTE, "10.1.0.1", 64);
    up.inject(&labelled(&[(501, 20)], &echo));
    let out = rig.sent(0);
    assert!(out.iter().all(Vec::is_empty), "{out:?}");
    assert_eq!(rig.mpls_drop("unsupported"), unsupported);
    let b = rig.shared.punts.pop().expect("delivered");
    assert_eq!(b.port, 2, "VRF 2's 10.1.0.1, not VRF 1's");
    assert_eq!(b.reason, Punt::OwnAddress as u8);
    assert_eq!(&b.frame()[0..6], &RMAC[2][..], "to the twin's MAC");
    assert_eq!(&b.frame()[14 + 12..], &echo[12..]);
    assert!(rig.shared.punts.pop().is_none(), "one punt");

    // VRF 1's kernel answers toward a VPN destination via its catch-all.
    let from_kernel = |dst: &str, ttl: u8| {
        let f = eth(RMAC[1], RMAC[1], 0x0800, &ipv4("10.1.0.1", dst, ttl));
        assert!(rig.shared.to_vlan.push(1, datapath::FROM_KERNEL_ROUTE, &f));
        rig.shared.to_vlan.kick();
    };
    from_kernel("203.0.113.9", 64);
    let out = rig.sent(1);
    assert_eq!((out[0].len(), out[1].len(), out[2].len()), (1, 0, 0));
    let f = &out[0][0];
    assert_eq!((&f[0..6], &f[6..12]), (&P[..], &RMAC[0][..]));
    assert_eq!(
        [lse(f, 14), lse(f, 18)],
        [(TRANSPORT, false, 63), (VPN_A, true, 63)]
    );
    assert_eq!(f[22 + 8], 63, "IP TTL");
    assert_eq!(checksum(&f[22..42]), 0, "IPv4 checksum");
    assert_eq!(rig.counters.l3.kernel_routed.get(), 1);

    // No route in VRF 1 (the default VRF's 10.0.0.0/24 is not its), and
    // no TTL left: counted, nothing sent, no ICMP error to the kernel.
    from_kernel("10.0.0.7", 64);
    from_kernel("203.0.113.9", 1);
    let out = rig.sent(0);
    assert!(out.iter().all(Vec::is_empty), "{out:?}");
    assert!(rig.shared.punts.pop().is_none());
    assert_eq!(rig.counters.l3.kernel_unrouted.get(), 2);
    assert_eq!(rig.counters.l3.icmp_sent.get(), 0);
}
