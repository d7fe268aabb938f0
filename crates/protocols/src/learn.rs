//! The learner: the MAC table's only writer.
//!
//! It drains the workers' learning events, applies learning limits exactly
//! (per VLAN and per port, counting dynamic entries only), ages idle
//! entries, flushes ports that go down, and serves `clear` requests. Limits
//! are exact because one thread decides every insert.

use datapath::Shared;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tables::{MacEntry, MacKey, MacTable, MacWriteOutcome, Tables, MAX_PORTS, MAX_VLANS};

/// Requests to the learner from other control threads.
pub enum LearnerRequest {
    /// Remove dynamic entries (of one VLAN, or all); replies with the count.
    Clear {
        vlan: Option<u16>,
        reply: mpsc::Sender<usize>,
    },
    /// Remove dynamic entries on a port (link down / detached).
    FlushPort { port: u16 },
    /// Install a static entry.
    AddStatic { key: MacKey, port: u16 },
    /// Learn addresses a previous run of the switch knew (restart).
    Restore { entries: Vec<(MacKey, u16)> },
    /// Learn `key` on `port` even if the port does not learn: a VRRP
    /// master's virtual MAC on its VLAN interface's port (docs/vrrp.md).
    /// A dynamic entry: it moves when the address is heard elsewhere.
    Claim { key: MacKey, port: u16 },
    /// Addresses the virtual-switch peer learned, on the port that
    /// reaches them here (a multichassis channel, or the peer link). They
    /// do not age while the peer has them and are not reported back.
    PeerAdd { entries: Vec<(MacKey, u16)> },
    /// The peer no longer has these: they go unless traffic here
    /// refreshed them since (then they age as learned here).
    PeerRemove { keys: Vec<MacKey> },
    /// The peer is gone for good (after the `PeerRemove` of what it had
    /// behind its own ports): what it still had — channel-bound
    /// addresses this node's members reach — is this node's own now. It
    /// ages by traffic here and goes into the full copy a returning peer
    /// asks for (without this, an address the peer had learned and this
    /// node had not re-claimed yet was left out of that copy, and the
    /// returning node flooded it).
    PeerLost,
    /// Every address learned here (not from the peer), for a full copy.
    LocalTable {
        reply: mpsc::Sender<Vec<(MacKey, u16)>>,
    },
}

/// A change to the addresses learned on this node, for the
/// virtual-switch peer: (address, port, added).
pub type MacChange = (MacKey, u16, bool);

/// Changes to locally learned addresses, drained by the virtual-switch
/// thread (control plane only: the learner pushes, never a worker).
#[derive(Default)]
pub struct MacChanges {
    queue: Mutex<Vec<MacChange>>,
}

impl MacChanges {
    fn push(&self, c: MacChange) {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).push(c);
    }

    /// Everything since the last call.
    pub fn take(&self) -> Vec<MacChange> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Learner statistics for `show`.
#[derive(Default)]
pub struct LearnerStats {
    pub learned: AtomicU64,
    pub moves: AtomicU64,
    pub aged: AtomicU64,
    pub limit_refused: AtomicU64,
    pub table_full: AtomicU64,
    /// Dynamic entries per VLAN (published copy of the learner's counts).
    pub vlan_counts: Box<[AtomicU64]>,
    pub port_counts: Box<[AtomicU64]>,
}

impl LearnerStats {
    pub fn new() -> LearnerStats {
        LearnerStats {
            vlan_counts: (0..MAX_VLANS).map(|_| AtomicU64::new(0)).collect(),
            port_counts: (0..MAX_PORTS).map(|_| AtomicU64::new(0)).collect(),
            ..Default::default()
        }
    }
}

/// Mailbox of the learner.
#[derive(Default)]
pub struct LearnerInbox {
    queue: Mutex<VecDeque<LearnerRequest>>,
}

impl LearnerInbox {
    pub fn send(&self, shared: &Shared, r: LearnerRequest) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(r);
        if let Some(t) = shared.learner.get() {
            t.unpark();
        }
    }

    fn take(&self) -> Option<LearnerRequest> {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
    }
}

/// An address the virtual-switch peer has.
#[derive(Clone, Copy, Debug)]
struct PeerClaim {
    /// We announced it to the peer too (learned here, fresh).
    ours: bool,
    /// When our claim was last absent: traffic after this second (the
    /// entry's `seen` moving past it) makes the address ours again.
    mark: u32,
}

pub struct Learner {
    shared: Arc<Shared>,
    inbox: Arc<LearnerInbox>,
    stats: Arc<LearnerStats>,
    aging: u32,
    capacity: usize,
    vlan_count: Vec<u32>,
    port_count: Vec<u32>,
    /// Addresses the virtual-switch peer has (it announced them and has
    /// not withdrawn them). An entry stays while the peer has it or
    /// traffic here keeps it fresh ("ours").
    peer: std::collections::HashMap<MacKey, PeerClaim>,
    /// Where local changes go (a virtual-switch pair only).
    changes: Option<Arc<MacChanges>>,
}

impl Learner {
    /// Report changes of locally learned addresses to `to` (the
    /// virtual-switch thread).
    pub fn with_changes(mut self, to: Arc<MacChanges>) -> Learner {
        self.changes = Some(to);
        self
    }

    fn report(&self, key: MacKey, port: u16, add: bool) {
        if let Some(c) = &self.changes {
            c.push((key, port, add));
        }
    }

    pub fn new(
        shared: Arc<Shared>,
        inbox: Arc<LearnerInbox>,
        stats: Arc<LearnerStats>,
        aging: u32,
        capacity: usize,
    ) -> Learner {
        Learner {
            shared,
            inbox,
            stats,
            aging,
            capacity,
            vlan_count: vec![0; MAX_VLANS],
            port_count: vec![0; MAX_PORTS],
            peer: std::collections::HashMap::new(),
            changes: None,
        }
    }

    /// Run until `shared.stop`.
    pub fn run(mut self) {
        let mut last_age = Instant::now();
        while !self.shared.stop.load(Ordering::Relaxed) {
            let mut did = 0usize;
            let tables = self.shared.tables.load_full();
            while let Some(ev) = self.shared.learn.pop() {
                self.learn(&tables, ev.key, ev.port);
                did += 1;
                if did.is_multiple_of(4096) {
                    break; // let requests and aging run under a flood
                }
            }
            while let Some(r) = self.inbox.take() {
                self.request(&tables, r);
                did += 1;
            }
            if last_age.elapsed() >= Duration::from_secs(1) {
                last_age = Instant::now();
                self.age(&tables);
                self.maybe_rebuild(&tables);
            }
            if did == 0 {
                self.shared.learner_parked.store(true, Ordering::SeqCst);
                if self.shared.learn.is_empty() {
                    std::thread::park_timeout(Duration::from_millis(5));
                }
                self.shared.learner_parked.store(false, Ordering::SeqCst);
            }
        }
    }

    fn publish_counts(&self, vlan: u16, port: u16) {
        self.stats.vlan_counts[vlan as usize]
            .store(self.vlan_count[vlan as usize] as u64, Ordering::Relaxed);
        if let Some(c) = self.stats.port_counts.get(port as usize) {
            c.store(self.port_count[port as usize] as u64, Ordering::Relaxed);
        }
    }

    fn update_gate(&self, t: &Tables, vlan: u16, port: u16) {
        let vl = t.l2.vlans[vlan as usize].mac_limit;
        if vl != 0 {
            t.learn_gate
                .set_vlan_full(vlan, self.vlan_count[vlan as usize] >= vl);
        }
        if let Some(p) = t.l2.ports.get(port as usize) {
            if p.mac_limit != 0 {
                t.learn_gate
                    .set_port_full(port, self.port_count[port as usize] >= p.mac_limit);
            }
        }
        self.publish_counts(vlan, port);
    }

    fn learn(&mut self, t: &Tables, key: MacKey, port: u16) {
        self.learn_on(t, key, port, false);
    }

    /// [`Self::learn`]; `claim`: even on a port that does not learn.
    fn learn_on(&mut self, t: &Tables, key: MacKey, port: u16, claim: bool) {
        let vlan = key.vlan();
        let Some(pe) = t.l2.ports.get(port as usize) else {
            return;
        };
        let ve = &t.l2.vlans[vlan as usize];
        if !ve.configured || !ve.learning || !(pe.learning || claim) {
            return;
        }
        let now = self.shared.now();
        let entry = MacEntry {
            port,
            is_static: false,
            seen: now,
        };
        match t.mac.lookup(key) {
            Some(e) if e.is_static => {}
            Some(e) if e.port == port => {
                t.mac.touch(key, port, now);
            }
            Some(e) => {
                if pe.mac_limit != 0 && self.port_count[port as usize] >= pe.mac_limit {
                    self.stats.limit_refused.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                if let MacWriteOutcome::Moved { from } = t.mac.upsert(key, entry) {
                    self.port_count[from as usize] -= 1;
                    self.port_count[port as usize] += 1;
                    self.stats.moves.fetch_add(1, Ordering::Relaxed);
                    self.update_gate(t, vlan, from);
                    self.update_gate(t, vlan, port);
                    // Moved here: ours now, whatever the peer said.
                    self.peer.remove(&key);
                    self.report(key, port, true);
                }
                let _ = e;
            }
            None => {
                if (ve.mac_limit != 0 && self.vlan_count[vlan as usize] >= ve.mac_limit)
                    || (pe.mac_limit != 0 && self.port_count[port as usize] >= pe.mac_limit)
                {
                    self.stats.limit_refused.fetch_add(1, Ordering::Relaxed);
                    self.update_gate(t, vlan, port);
                    return;
                }
                match t.mac.upsert(key, entry) {
                    MacWriteOutcome::Inserted => {
                        self.vlan_count[vlan as usize] += 1;
                        self.port_count[port as usize] += 1;
                        self.stats.learned.fetch_add(1, Ordering::Relaxed);
                        self.update_gate(t, vlan, port);
                        self.report(key, port, true);
                    }
                    MacWriteOutcome::Full => {
                        self.stats.table_full.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
            }
        }
    }

    fn forget(&mut self, t: &Tables, pred: impl Fn(MacKey, MacEntry) -> bool) -> usize {
        let mut gone: Vec<(MacKey, u16)> = Vec::new();
        let n = t.mac.remove_where(
            |k, e| !e.is_static && pred(k, e),
            |k, e| gone.push((k, e.port)),
        );
        for (key, port) in gone {
            let vlan = key.vlan();
            self.vlan_count[vlan as usize] -= 1;
            self.port_count[port as usize] -= 1;
            self.update_gate(t, vlan, port);
            // The peer hears of removals of what we announced only.
            if self.peer.remove(&key).is_none_or(|c| c.ours) {
                self.report(key, port, false);
            }
        }
        n
    }

    /// Whether the address is announced by this node (not the peer's alone).
    fn ours(&self, key: MacKey) -> bool {
        self.peer.get(&key).is_none_or(|c| c.ours)
    }

    /// Ageing of addresses the peer has: they stay, but our own claim
    /// follows traffic here (withdrawn when stale, announced when fresh).
    fn age_peer_claims(&mut self, t: &Tables, now: u32, aging: u32) {
        let mut out = Vec::new();
        for (key, c) in self.peer.iter_mut() {
            let Some(e) = t.mac.lookup(*key) else {
                continue;
            };
            if c.ours && now.wrapping_sub(e.seen) > aging {
                c.ours = false;
                c.mark = e.seen;
                out.push((*key, e.port, false));
            } else if !c.ours && e.seen > c.mark && now.wrapping_sub(e.seen) <= aging {
                c.ours = true;
                out.push((*key, e.port, true));
            }
        }
        for (key, port, add) in out {
            self.report(key, port, add);
        }
    }

    fn age(&mut self, t: &Tables) {
        if self.aging == 0 {
            return;
        }
        let now = self.shared.now();
        let aging = self.aging;
        // Strictly greater: the clock counts whole seconds, so an address
        // stays at least `aging` seconds (and under `aging` + 2).
        // The peer's addresses stay while the peer has them.
        let peer = std::mem::take(&mut self.peer);
        let n = self.forget(t, |k, e| {
            now.wrapping_sub(e.seen) > aging && !peer.contains_key(&k)
        });
        self.peer = peer;
        self.age_peer_claims(t, now, aging);
        self.stats.aged.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn request(&mut self, t: &Tables, r: LearnerRequest) {
        match r {
            LearnerRequest::Clear { vlan, reply } => {
                let n = self.forget(t, |k, _| vlan.is_none_or(|v| k.vlan() == v));
                let _ = reply.send(n);
            }
            LearnerRequest::FlushPort { port } => {
                self.forget(t, |_, e| e.port == port);
            }
            LearnerRequest::Restore { entries } => {
                for (key, port) in entries {
                    self.learn(t, key, port);
                }
            }
            LearnerRequest::Claim { key, port } => self.learn_on(t, key, port, true),
            LearnerRequest::PeerAdd { entries } => {
                for (key, port) in entries {
                    self.peer_add(t, key, port);
                }
            }
            LearnerRequest::PeerRemove { keys } => {
                for key in keys {
                    let Some(c) = self.peer.get(&key).copied() else {
                        continue;
                    };
                    match t.mac.lookup(key) {
                        Some(e) if !e.is_static && !c.ours && e.seen <= c.mark => {
                            // The peer's alone: gone (not reported back).
                            self.forget(t, |k, _| k == key);
                        }
                        Some(e) if !e.is_static => {
                            // Fresh here: ours alone now (announced again
                            // if the peer did not know it was ours).
                            self.peer.remove(&key);
                            if !c.ours {
                                self.report(key, e.port, true);
                            }
                        }
                        _ => {
                            self.peer.remove(&key);
                        }
                    }
                }
            }
            LearnerRequest::PeerLost => {
                // A full ageing period from now (peer-learned addresses
                // stay valid after the loss); not reported: no peer to tell.
                let now = self.shared.now();
                for (key, _) in self.peer.drain() {
                    if let Some(e) = t.mac.lookup(key) {
                        if !e.is_static {
                            t.mac.touch(key, e.port, now);
                        }
                    }
                }
            }
            LearnerRequest::LocalTable { reply } => {
                let mut out = Vec::new();
                t.mac.for_each(|k, e| {
                    if !e.is_static && self.ours(k) {
                        out.push((k, e.port));
                    }
                });
                let _ = reply.send(out);
            }
            LearnerRequest::AddStatic { key, port } => {
                // A static entry replaces a dynamic one for the same key.
                if let Some(old) = t.mac.lookup(key) {
                    if !old.is_static {
                        t.mac.remove(key);
                        self.vlan_count[key.vlan() as usize] -= 1;
                        self.port_count[old.port as usize] -= 1;
                        self.update_gate(t, key.vlan(), old.port);
                    }
                }
                t.mac.upsert(
                    key,
                    MacEntry {
                        port,
                        is_static: true,
                        seen: 0,
                    },
                );
            }
        }
    }

    /// Install an address the peer learned; no learning limits (the
    /// peer applied its own), a static entry stays.
    fn peer_add(&mut self, t: &Tables, key: MacKey, port: u16) {
        let vlan = key.vlan();
        if t.l2.ports.get(port as usize).is_none() || !t.l2.vlans[vlan as usize].configured {
            return;
        }
        let now = self.shared.now();
        let entry = MacEntry {
            port,
            is_static: false,
            seen: now,
        };
        // Already learned here on the same port: ours too.
        let mut ours = false;
        match t.mac.lookup(key) {
            Some(e) if e.is_static => return,
            Some(e) if e.port == port => {
                ours = self.ours(key);
                t.mac.touch(key, port, now);
            }
            Some(_) => {
                if let MacWriteOutcome::Moved { from } = t.mac.upsert(key, entry) {
                    self.port_count[from as usize] -= 1;
                    self.port_count[port as usize] += 1;
                    self.stats.moves.fetch_add(1, Ordering::Relaxed);
                    self.update_gate(t, vlan, from);
                    self.update_gate(t, vlan, port);
                }
            }
            None => match t.mac.upsert(key, entry) {
                MacWriteOutcome::Inserted => {
                    self.vlan_count[vlan as usize] += 1;
                    self.port_count[port as usize] += 1;
                    self.update_gate(t, vlan, port);
                }
                MacWriteOutcome::Full => {
                    self.stats.table_full.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                _ => {}
            },
        }
        let ours = ours || self.peer.get(&key).is_some_and(|c| c.ours);
        self.peer.insert(key, PeerClaim { ours, mark: now });
    }

    /// Replace the MAC table by a tombstone-free copy when misses would
    /// otherwise probe long chains.
    fn maybe_rebuild(&mut self, t: &Tables) {
        if !t.mac.needs_rebuild() {
            return;
        }
        let fresh: Arc<MacTable> = Arc::new(t.mac.rebuilt(self.capacity));
        self.shared.tables.rcu(|cur| Tables {
            l2: cur.l2.clone(),
            mac: fresh.clone(),
            learn_gate: cur.learn_gate.clone(),
        });
    }
}
