//! The learner applied to queued events: exact limits, moves, clear, flush
//! and aging.

use datapath::Shared;
use protocols::learn::{Learner, LearnerInbox, LearnerRequest, LearnerStats, MacChanges};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tables::l2::{PortMode, TPID_8021Q};
use tables::{L2Tables, LearnEvent, LearnGate, MacKey, MacTable, PortEntry, Tables};

struct Rig {
    changes: Arc<MacChanges>,
    shared: Arc<Shared>,
    inbox: Arc<LearnerInbox>,
    stats: Arc<LearnerStats>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Rig {
    /// Ports 0..3 access in VLAN 10 (limit `vlan_limit`); port 3 has a
    /// per-port limit of 3.
    fn new(vlan_limit: u32, aging: u32) -> Rig {
        let ports = (0..4)
            .map(|i| PortEntry {
                mac_limit: if i == 3 { 3 } else { 0 },
                ..PortEntry::new(PortMode::Access, 10, &[10], TPID_8021Q)
            })
            .collect();
        let shared = Arc::new(Shared::new(
            Tables {
                l2: L2Tables::new(ports, &[(10, true, vlan_limit)]),
                mac: Arc::new(MacTable::new(100_000)),
                learn_gate: Arc::new(LearnGate::default()),
            },
            1 << 16,
        ));
        let inbox = Arc::new(LearnerInbox::default());
        let stats = Arc::new(LearnerStats::new());
        let changes = Arc::new(MacChanges::default());
        let l = Learner::new(shared.clone(), inbox.clone(), stats.clone(), aging, 100_000)
            .with_changes(changes.clone());
        let thread = std::thread::spawn(move || l.run());
        let _ = shared.learner.set(thread.thread().clone());
        Rig {
            shared,
            inbox,
            stats,
            changes,
            thread: Some(thread),
        }
    }

    fn push(&self, mac: u32, port: u16) {
        let b = mac.to_be_bytes();
        let key = MacKey::new(10, [2, 0, b[0], b[1], b[2], b[3]]);
        while self.shared.learn.push(LearnEvent { key, port }).is_err() {
            std::thread::yield_now();
        }
        if let Some(t) = self.shared.learner.get() {
            t.unpark();
        }
    }

    fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.shared.learn.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(30));
    }

    fn len(&self) -> usize {
        self.shared.tables.load().mac.len()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[test]
fn vlan_limit_is_exact_and_gate_raised() {
    let r = Rig::new(15_000, 0);
    for i in 0..30_000 {
        r.push(i, (i % 3) as u16);
    }
    r.settle();
    assert_eq!(r.len(), 15_000);
    assert_eq!(r.stats.vlan_counts[10].load(Ordering::Relaxed), 15_000);
    assert_eq!(r.stats.limit_refused.load(Ordering::Relaxed), 15_000);
    assert!(r.shared.tables.load().learn_gate.is_full(10, 0));
    // Clearing reopens the gate.
    let (tx, rx) = mpsc::channel();
    r.inbox.send(
        &r.shared,
        LearnerRequest::Clear {
            vlan: Some(10),
            reply: tx,
        },
    );
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), 15_000);
    assert!(!r.shared.tables.load().learn_gate.is_full(10, 0));
    assert_eq!(r.len(), 0);
}

#[test]
fn port_limit_moves_and_flush() {
    let r = Rig::new(0, 0);
    for i in 0..10 {
        r.push(i, 3);
    }
    r.settle();
    assert_eq!(r.len(), 3, "port 3 limited to 3");
    // Move address 0 from port 3 to port 1: allowed, and frees a place.
    r.push(0, 1);
    r.settle();
    assert_eq!(r.stats.moves.load(Ordering::Relaxed), 1);
    let t = r.shared.tables.load();
    assert_eq!(
        t.mac
            .lookup(MacKey::new(10, [2, 0, 0, 0, 0, 0]))
            .unwrap()
            .port,
        1
    );
    assert_eq!(r.stats.port_counts[3].load(Ordering::Relaxed), 2);
    r.push(100, 3);
    r.settle();
    assert_eq!(r.stats.port_counts[3].load(Ordering::Relaxed), 3);
    r.inbox
        .send(&r.shared, LearnerRequest::FlushPort { port: 3 });
    r.settle();
    assert_eq!(r.len(), 1);
}

#[test]
fn aging_removes_idle_entries() {
    let r = Rig::new(0, 1);
    for i in 0..100 {
        r.push(i, 0);
    }
    r.settle();
    assert_eq!(r.len(), 100);
    let deadline = Instant::now() + Duration::from_secs(6);
    while r.len() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(r.len(), 0);
    assert_eq!(r.stats.aged.load(Ordering::Relaxed), 100);
}

fn key(i: u32) -> MacKey {
    let b = i.to_be_bytes();
    MacKey::new(10, [2, 0, b[0], b[1], b[2], b[3]])
}

/// Virtual-switch sync: local learning is reported, peer addresses are
/// installed without being reported back, survive ageing while the peer
/// has them, go when it withdraws them, and a full copy lists only ours.
#[test]
fn peer_addresses_and_local_changes() {
    let r = Rig::new(0, 1);
    r.push(1, 0);
    r.settle();
    assert_eq!(r.changes.take(), vec![(key(1), 0, true)]);
    r.inbox.send(
        &r.shared,
        LearnerRequest::PeerAdd {
            entries: vec![(key(2), 1), (key(3), 2)],
        },
    );
    r.settle();
    assert_eq!(r.len(), 3);
    assert!(r.changes.take().is_empty(), "peer addresses reported back");
    let (tx, rx) = mpsc::channel();
    r.inbox
        .send(&r.shared, LearnerRequest::LocalTable { reply: tx });
    let mine = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(mine, vec![(key(1), 0)]);
    // Ageing (1 s): our idle address goes and the peer hears of it; the
    // peer's stay.
    let deadline = Instant::now() + Duration::from_secs(6);
    while r.len() > 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    // Two more ageing passes: the peer's addresses are still there.
    std::thread::sleep(Duration::from_millis(2_100));
    assert_eq!(r.len(), 2);
    assert_eq!(r.changes.take(), vec![(key(1), 0, false)]);
    // The peer withdraws one: gone here, not reported back.
    r.inbox
        .send(&r.shared, LearnerRequest::PeerRemove { keys: vec![key(2)] });
    r.settle();
    assert_eq!(r.len(), 1);
    assert!(r.shared.tables.load().mac.lookup(key(3)).is_some());
    assert!(r.changes.take().is_empty());
    // The peer is lost: what it had is ours, in the copy a returning peer
    // gets (not reported: nobody to tell).
    let local = || {
        let (tx, rx) = mpsc::channel();
        r.inbox
            .send(&r.shared, LearnerRequest::LocalTable { reply: tx });
        rx.recv_timeout(Duration::from_secs(5)).unwrap()
    };
    assert!(local().is_empty());
    r.inbox.send(&r.shared, LearnerRequest::PeerLost);
    r.settle();
    assert_eq!(local(), vec![(key(3), 2)]);
    assert!(r.changes.take().is_empty());
}

/// VRRP on a VLAN interface (docs/vrrp.md): a master claims its virtual
/// MAC on the VLAN's port to the router, which does not learn, moving it
/// from the port towards the old master; it moves back when heard there.
#[test]
fn a_claim_places_an_address_on_a_port_that_does_not_learn() {
    let ports = (0..3)
        .map(|i| PortEntry {
            learning: i != 2,
            ..PortEntry::new(PortMode::Access, 10, &[10], TPID_8021Q)
        })
        .collect();
    let shared = Arc::new(Shared::new(
        Tables {
            l2: L2Tables::new(ports, &[(10, true, 0)]),
            mac: Arc::new(MacTable::new(1024)),
            learn_gate: Arc::new(LearnGate::default()),
        },
        1 << 10,
    ));
    let inbox = Arc::new(LearnerInbox::default());
    let l = Learner::new(
        shared.clone(),
        inbox.clone(),
        Arc::new(LearnerStats::new()),
        300,
        1024,
    );
    let thread = std::thread::spawn(move || l.run());
    let _ = shared.learner.set(thread.thread().clone());
    let vmac = MacKey::new(10, wire::vrrp::virtual_mac(7));
    let port_of = |k| {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut last = None;
        while Instant::now() < deadline {
            last = shared.tables.load().mac.lookup(k).map(|e| e.port);
            if last.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        last
    };
    let push = |port| {
        while shared.learn.push(LearnEvent { key: vmac, port }).is_err() {
            std::thread::yield_now();
        }
        if let Some(t) = shared.learner.get() {
            t.unpark();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Learned events on the non-learning port change nothing.
    push(2);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(shared.tables.load().mac.lookup(vmac).map(|e| e.port), None);
    // Heard from the old master on port 0, then claimed on port 2.
    push(0);
    assert_eq!(port_of(vmac), Some(0));
    inbox.send(&shared, LearnerRequest::Claim { key: vmac, port: 2 });
    let deadline = Instant::now() + Duration::from_secs(5);
    while port_of(vmac) != Some(2) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(port_of(vmac), Some(2));
    // Another master's advertisement on port 1 moves it there.
    push(1);
    assert_eq!(port_of(vmac), Some(1));
    shared.stop.store(true, Ordering::Relaxed);
    thread.thread().unpark();
    let _ = thread.join();
}
