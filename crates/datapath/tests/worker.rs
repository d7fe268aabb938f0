//! A worker on memory ports: frames in, copies out, with egress tagging,
//! flooding, learning round trip and ring-full accounting.

use datapath::{Mailbox, PortCommand, Shared, Worker, WorkerOptions};
use io::{MemoryPeer, MemoryPort};
use pipeline::{DropReason, WorkerCounters};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::l2::{PortMode, TPID_8021Q};
use tables::{L2Tables, LearnGate, MacEntry, MacTable, PortEntry, Tables};

fn entry(mode: PortMode, pvid: u16, vlans: &[u16]) -> PortEntry {
    PortEntry::new(mode, pvid, vlans, TPID_8021Q)
}

struct Rig {
    shared: Arc<Shared>,
    peers: Vec<MemoryPeer>,
    counters: Arc<WorkerCounters>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Rig {
    /// Ports 0,1 access VLAN 10; port 2 trunk carrying 10 (native 1).
    fn new() -> Rig {
        let l2 = L2Tables::new(
            vec![
                entry(PortMode::Access, 10, &[10]),
                entry(PortMode::Access, 10, &[10]),
                entry(PortMode::Trunk, 1, &[1, 10]),
            ],
            &[(1, true, 0), (10, true, 0)],
        );
        let shared = Arc::new(Shared::new(
            Tables {
                l2,
                mac: Arc::new(MacTable::new(1024)),
                learn_gate: Arc::new(LearnGate::default()),
            },
            1024,
        ));
        let mb = Arc::new(Mailbox::default());
        let mut peers = Vec::new();
        for id in 0..3u16 {
            let (port, peer) = MemoryPort::new(&format!("m{id}"));
            mb.send(PortCommand::Attach {
                id,
                port: Box::new(port),
                rx: true,
                routed: false,
            });
            peers.push(peer);
        }
        let counters = Arc::new(WorkerCounters::default());
        let w = Worker::new(
            shared.clone(),
            mb,
            counters.clone(),
            WorkerOptions {
                idle_spin: Duration::from_micros(10),
                max_sleep: Duration::from_millis(1),
            },
        );
        let thread = Some(std::thread::spawn(move || w.run()));
        Rig {
            shared,
            peers,
            counters,
            thread,
        }
    }

    /// Wait until `n` frames in total were sent on the given ports.
    fn collect(&self, ports: &[usize], n: usize) -> Vec<Vec<Vec<u8>>> {
        let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); self.peers.len()];
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            for (g, peer) in got.iter_mut().zip(&self.peers) {
                g.extend(peer.take_sent());
            }
            if ports.iter().map(|p| got[*p].len()).sum::<usize>() >= n {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(20));
        for (g, peer) in got.iter_mut().zip(&self.peers) {
            g.extend(peer.take_sent());
        }
        got
    }

    /// Apply learning events as the control plane's learner would.
    fn learn(&self) {
        let t = self.shared.tables.load();
        while let Some(ev) = self.shared.learn.pop() {
            t.mac.upsert(
                ev.key,
                MacEntry {
                    port: ev.port,
                    is_static: false,
                    seen: 0,
                },
            );
        }
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

fn frame(dst: [u8; 6], src: [u8; 6], tag: Option<u16>) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some(v) = tag {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&[0x88, 0xb5]);
    f.resize(if tag.is_some() { 64 } else { 60 }, 0xee);
    f
}

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

#[test]
fn floods_with_egress_encapsulation_then_unicasts() {
    let rig = Rig::new();
    rig.peers[0].inject(&frame([0xff; 6], A, None));
    let got = rig.collect(&[1, 2], 2);
    assert!(got[0].is_empty(), "never back out of the ingress port");
    assert_eq!(got[1], vec![frame([0xff; 6], A, None)]);
    assert_eq!(
        got[2],
        vec![frame([0xff; 6], A, Some(10))],
        "trunk copy tagged"
    );
    rig.learn();
    // Tagged reply from the trunk goes only to port 0, untagged.
    rig.peers[2].inject(&frame(A, B, Some(10)));
    let got = rig.collect(&[0], 1);
    assert_eq!(got[0], vec![frame(A, B, None)]);
    assert!(got[1].is_empty());
    assert_eq!(rig.counters.ports[0].tx_frames.get(), 1);
    assert_eq!(rig.counters.ports[0].rx_flooded.get(), 1);
    assert_eq!(rig.counters.ports[2].tx_flooded.get(), 1);
}

#[test]
fn many_frames_in_order_across_batches() {
    let rig = Rig::new();
    let n = 1000usize;
    for i in 0..n {
        let mut f = frame([0xff; 6], A, None);
        f[20..24].copy_from_slice(&(i as u32).to_be_bytes());
        rig.peers[0].inject(&f);
    }
    let got = rig.collect(&[1], n);
    assert_eq!(got[1].len(), n);
    for (i, f) in got[1].iter().enumerate() {
        assert_eq!(u32::from_be_bytes([f[20], f[21], f[22], f[23]]), i as u32);
    }
}

#[test]
fn full_tx_ring_counts_drops_and_keeps_going() {
    let rig = Rig::new();
    rig.peers[1].set_tx_capacity(Some(0));
    for _ in 0..10 {
        rig.peers[0].inject(&frame([0xff; 6], A, None));
    }
    let got = rig.collect(&[2], 10);
    assert_eq!(got[2].len(), 10, "the other port still gets every copy");
    let drops = rig.counters.ports[1].drops[DropReason::TxRingFull as usize].get();
    assert_eq!(drops, 10);
}

#[test]
fn detached_port_counts_port_down() {
    let rig = Rig::new();
    // Detach port 1 through a second mailbox is not possible; mark it down
    // in the snapshot instead, as the supervisor does.
    rig.shared.tables.rcu(|cur| {
        let mut l2 = cur.l2.clone();
        l2.set_port_up(1, false);
        Tables {
            l2,
            mac: cur.mac.clone(),
            learn_gate: cur.learn_gate.clone(),
        }
    });
    rig.peers[0].inject(&frame([0xff; 6], A, None));
    let got = rig.collect(&[2], 1);
    assert_eq!(got[2].len(), 1);
    assert!(got[1].is_empty(), "a down port is out of the flood set");
}

#[test]
fn quiesce_waits_for_every_worker_to_pass_a_loop() {
    let rig = Rig::new();
    // An idle worker still passes the top of its loop every max_sleep.
    assert!(rig.shared.quiesce(Duration::from_secs(2)));
    // A stopped worker never does: quiesce gives up at the timeout.
    rig.shared.stop.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(20));
    let t = Instant::now();
    assert!(!rig.shared.quiesce(Duration::from_millis(50)));
    assert!(t.elapsed() < Duration::from_secs(1));
}
