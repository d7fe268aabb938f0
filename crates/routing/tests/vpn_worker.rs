//! L3VPN ingress PE from FPM to the wire (docs/vrf.md, "L3VPN"): imported
//! VPN routes, as zebra 8.4 sends them (the VRF's table, gateway and oif of
//! the default namespace, the stack in `RTA_ENCAP`), programmed by the FIB
//! manager into two VRFs' FIBs, and customer packets through a real worker
//! on memory ports leaving the uplink with each VRF's label stack.
//!
//! Port 0: uplink, default VRF, 10.0.0.1/24, its neighbour P 10.0.0.2 (the
//! default namespace's ifindex 5). Ports 1 and 2: VRFs A (table 1001) and
//! B (1002), both 10.1.0.1/24 with a CE 10.1.0.2 (ifindex 2 in each VRF's
//! namespace). The default VRF routes 203.0.113.0/24 too (a leak detector).

use datapath::mpls::MplsPlane;
use datapath::{Mailbox, PortCommand, Shared, Worker, WorkerOptions};
use io::{MemoryPeer, MemoryPort};
use pipeline::l3::{L3Tables, RouterInterface, Urpf, VrfTables};
use pipeline::mpls::MplsConfig;
use pipeline::WorkerCounters;
use routing::fib::{Fib, FibConfig, Hop, Source};
use routing::frr::netlink::build::{rtmsg, Msg};
use routing::frr::netlink::*;
use routing::frr::{FpmEvent, Prefix};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tables::{L2Tables, LearnGate, MacTable, Neighbor, NeighborState, NeighborTable, Tables};
use testkit::ip::checksum;

const RMAC: [[u8; 6]; 3] = [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1], [2, 0, 0, 0, 1, 2]];
const P: [u8; 6] = [2, 0, 0, 0, 2, 0];
const CE: [[u8; 6]; 2] = [[2, 0, 0, 0, 3, 1], [2, 0, 0, 0, 3, 2]];
const CORE_IFINDEX: u32 = 5;
const TWIN_IFINDEX: u32 = 2;

fn a4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// An IPv4 route from zebra: `push` empty is a plain route.
fn route(ty: u16, prefix: &str, table: u32, gw: &str, oif: u32, push: &[u32]) -> Vec<u8> {
    let (a, l) = prefix.split_once('/').unwrap();
    let mut m = Msg::new(
        ty,
        NLM_F_REQUEST | NLM_F_REPLACE | 0x400,
        &rtmsg(
            AF_INET,
            l.parse().unwrap(),
            RT_TABLE_UNSPEC,
            186,
            RTN_UNICAST,
        ),
    )
    .attr(RTA_DST, &a4(a).octets())
    .attr_u32(RTA_PRIORITY, 20)
    .attr_u32(RTA_TABLE, table);
    if !push.is_empty() {
        let mut encap = Vec::new();
        encap.extend_from_slice(&((4 + 4 * push.len()) as u16).to_ne_bytes());
        encap.extend_from_slice(&1u16.to_ne_bytes()); // MPLS_IPTUNNEL_DST
        for (i, l) in push.iter().enumerate() {
            let bos = if i + 1 == push.len() { 0x100 } else { 0 };
            encap.extend_from_slice(&(l << 12 | bos).to_be_bytes());
        }
        m = m
            .attr(21, &1u16.to_ne_bytes()) // RTA_ENCAP_TYPE: MPLS
            .attr(22, &encap); // RTA_ENCAP
    }
    m.attr(RTA_GATEWAY, &a4(gw).octets())
        .attr_u32(RTA_OIF, oif)
        .finish()
}

struct Pe {
    core: Arc<Mutex<Fib>>,
    vrfs: Vec<Arc<Mutex<Fib>>>,
    shared: Arc<Shared>,
    peers: Vec<MemoryPeer>,
    _mb: Arc<Mailbox>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn neighbors(addr: &str, mac: [u8; 6], port: u16) -> Arc<NeighborTable> {
    let t = Arc::new(NeighborTable::new(64));
    t.upsert(
        IpAddr::V4(a4(addr)),
        Neighbor {
            mac,
            port,
            state: NeighborState::Reachable,
            confirmed: 0,
        },
    );
    t
}

fn iface(port: u16, addr: &str, urpf: Urpf, vrf: u16) -> RouterInterface {
    RouterInterface {
        port,
        mac: RMAC[port as usize],
        v4: vec![(u32::from(a4(addr)), 24)],
        v6: Vec::new(),
        mtu: 1500,
        urpf,
        vlan: None,
        vrf,
    }
}

impl Pe {
    fn new() -> Pe {
        let core = Arc::new(Mutex::new(Fib::new()));
        let core_ports: HashMap<u32, u16> = [(CORE_IFINDEX, 0)].into_iter().collect();
        let net = |s: &str| s.parse::<Prefix>().unwrap();
        core.lock()
            .unwrap()
            .set(
                net("10.0.0.0/24"),
                Source::Connected,
                vec![Hop::connected(0)],
            )
            .unwrap();
        let vrfs: Vec<Arc<Mutex<Fib>>> = [(1001, 1u16), (1002, 2)]
            .into_iter()
            .map(|(table, port)| {
                let mut f = Fib::with_config(FibConfig::for_vrf(table, 64));
                f.set_core(core.clone(), core_ports.clone());
                f.set(
                    net("10.1.0.0/24"),
                    Source::Connected,
                    vec![Hop::connected(port)],
                )
                .unwrap();
                Arc::new(Mutex::new(f))
            })
            .collect();
        let shared = Arc::new(Shared::new(
            Tables {
                l2: L2Tables::new(Vec::new(), &[]),
                mac: Arc::new(MacTable::new(64)),
                learn_gate: Arc::new(LearnGate::default()),
            },
            64,
        ));
        let c = core.lock().unwrap();
        let vrf_tables = vrfs
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let f = f.lock().unwrap();
                VrfTables {
                    fib4: f.fib4(),
                    fib6: f.fib6(),
                    nexthops: f.nexthops(),
                    neighbors: neighbors("10.1.0.2", CE[k], 1 + k as u16),
                }
            })
            .collect();
        shared.l3.store(Some(Arc::new(
            L3Tables::new(
                c.fib4(),
                c.fib6(),
                c.nexthops(),
                neighbors("10.0.0.2", P, 0),
                vec![
                    iface(0, "10.0.0.1", Urpf::Strict, 0),
                    iface(1, "10.1.0.1", Urpf::Off, 1),
                    iface(2, "10.1.0.1", Urpf::Off, 2),
                ],
            )
            .with_vrfs(vrf_tables)
            .with_lfib(c.lfib()),
        )));
        shared.mpls.store(Some(Arc::new(MplsPlane {
            lfib: c.lfib(),
            cfg: MplsConfig::default(),
        })));
        drop(c);
        let mb = Arc::new(Mailbox::default());
        let mut peers = Vec::new();
        for id in 0..3u16 {
            let (port, peer) = MemoryPort::new(&format!("vw{id}"));
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
        Pe {
            core,
            vrfs,
            shared,
            peers,
            _mb: mb,
            thread: Some(std::thread::spawn(move || w.run())),
        }
    }

    /// One FPM frame: the default table's routes to the core FIB, each
    /// VRF table's to that VRF's, each mapping its own namespace's
    /// interface indexes (as `router::dispatch` does).
    fn fpm(&self, msgs: Vec<Vec<u8>>) {
        let mut per: [Vec<_>; 3] = Default::default();
        for m in msgs {
            for u in decode(&m).unwrap() {
                let k = match &u {
                    routing::frr::RouteUpdate::Add { table, .. }
                    | routing::frr::RouteUpdate::Del { table, .. } => *table,
                    routing::frr::RouteUpdate::Label(labelfeed::LabelMsg::RouteAdd(r)) => r.table,
                    _ => 254,
                };
                per[match k {
                    1001 => 1,
                    1002 => 2,
                    _ => 0,
                }]
                .push(u);
            }
        }
        for (k, us) in per.into_iter().enumerate() {
            let ev = FpmEvent::Updates(us);
            if k == 0 {
                let map = |i: u32| (i == CORE_IFINDEX).then_some(0u16);
                self.core.lock().unwrap().apply_frr(&ev, &map);
            } else {
                let map = move |i: u32| (i == TWIN_IFINDEX).then_some(k as u16);
                self.vrfs[k - 1].lock().unwrap().apply_frr(&ev, &map);
            }
        }
    }

    /// What each port sent (waits for `n` frames in all, then 50 ms more).
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
        std::thread::sleep(Duration::from_millis(50));
        for (k, p) in self.peers.iter().enumerate() {
            got[k].extend(p.take_sent());
        }
        got
    }

    /// From VRF `k`'s CE to `dst`: the uplink frame's label stack (label,
    /// S, TTL), or `None` if nothing left by the uplink.
    fn send_from_ce(&self, k: usize, dst: &str) -> Option<Vec<(u32, bool, u8)>> {
        self.peers[1 + k].inject(&eth(RMAC[1 + k], CE[k], &ipv4("10.1.0.2", dst)));
        let out = self.sent(1);
        let f = out[0].first()?;
        assert_eq!(out[0].len(), 1);
        assert_eq!((&f[0..6], &f[6..12]), (&P[..], &RMAC[0][..]), "to P");
        if f[12..14] != [0x88, 0x47] {
            return Some(Vec::new());
        }
        let mut stack = Vec::new();
        let mut off = 14;
        loop {
            let w = u32::from_be_bytes([f[off], f[off + 1], f[off + 2], f[off + 3]]);
            let s = w >> 8 & 1 == 1;
            stack.push((w >> 12, s, w as u8));
            off += 4;
            if s {
                break;
            }
        }
        let ip = &f[off..];
        assert_eq!((ip[0] >> 4, ip[8]), (4, 63), "IPv4, TTL decremented");
        assert_eq!(checksum(&ip[..20]), 0, "IPv4 checksum");
        assert_eq!(&ip[16..20], &a4(dst).octets());
        Some(stack)
    }
}

impl Drop for Pe {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn ipv4(src: &str, dst: &str) -> Vec<u8> {
    let mut p = vec![0u8; 60];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&60u16.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&a4(src).octets());
    p[16..20].copy_from_slice(&a4(dst).octets());
    let c = checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p
}

fn eth(to: [u8; 6], from: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let mut f = to.to_vec();
    f.extend_from_slice(&from);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn imported_vpn_routes_from_fpm_push_each_vrfs_label() {
    let pe = Pe::new();
    pe.fpm(vec![
        // The default VRF's own route to the same prefix.
        route(
            RTM_NEWROUTE,
            "203.0.113.0/24",
            254,
            "10.0.0.2",
            CORE_IFINDEX,
            &[],
        ),
        // Each VRF's CE route (the twin's ifindex in the VRF's namespace).
        route(
            RTM_NEWROUTE,
            "192.0.2.0/24",
            1001,
            "10.1.0.2",
            TWIN_IFINDEX,
            &[],
        ),
        route(
            RTM_NEWROUTE,
            "192.0.2.0/24",
            1002,
            "10.1.0.2",
            TWIN_IFINDEX,
            &[],
        ),
        // Imported: through P with LDP label 16 to PE 2 (VRF A's VPN label
        // 600); VRF B's remote PE is adjacent (implicit null): [601].
        route(
            RTM_NEWROUTE,
            "203.0.113.0/24",
            1001,
            "10.0.0.2",
            CORE_IFINDEX,
            &[16, 600],
        ),
        route(
            RTM_NEWROUTE,
            "203.0.113.0/24",
            1002,
            "10.0.0.2",
            CORE_IFINDEX,
            &[601],
        ),
    ]);
    let a = pe.send_from_ce(0, "203.0.113.9");
    assert_eq!(a, Some(vec![(16, false, 63), (600, true, 63)]), "VRF A");
    let b = pe.send_from_ce(1, "203.0.113.9");
    assert_eq!(b, Some(vec![(601, true, 63)]), "VRF B");
    // The VRF's own route stays local, unlabelled.
    pe.peers[1].inject(&eth(RMAC[1], CE[0], &ipv4("10.1.0.2", "192.0.2.9")));
    let out = pe.sent(1);
    assert_eq!((out[0].len(), out[1].len(), out[2].len()), (0, 1, 0));

    // A new VPN label (delete + add in one frame, FRR 8): the new stack.
    pe.fpm(vec![
        route(
            RTM_DELROUTE,
            "203.0.113.0/24",
            1001,
            "10.0.0.2",
            CORE_IFINDEX,
            &[],
        ),
        route(
            RTM_NEWROUTE,
            "203.0.113.0/24",
            1001,
            "10.0.0.2",
            CORE_IFINDEX,
            &[16, 700],
        ),
    ]);
    let a = pe.send_from_ce(0, "203.0.113.9");
    assert_eq!(
        a,
        Some(vec![(16, false, 63), (700, true, 63)]),
        "VRF A, new label"
    );
    // Withdrawn from VRF A: nothing of A's reaches the core (not even by
    // the default VRF's route to the same prefix); B is untouched.
    pe.fpm(vec![route(
        RTM_DELROUTE,
        "203.0.113.0/24",
        1001,
        "10.0.0.2",
        CORE_IFINDEX,
        &[],
    )]);
    assert_eq!(
        pe.send_from_ce(0, "203.0.113.9"),
        None,
        "VRF A after withdrawal"
    );
    assert_eq!(
        pe.send_from_ce(1, "203.0.113.9"),
        Some(vec![(601, true, 63)])
    );
    let s = pe.core.lock().unwrap().mpls_summary();
    assert_eq!((s.nhlfes, s.quarantined_nhlfes), (1, 2));
    pe.core.lock().unwrap().maintain(&|| true);
    assert_eq!(pe.core.lock().unwrap().mpls_summary().nhlfes, 1);
    assert_eq!(pe.shared.mpls_totals().pushed, 4);
}
