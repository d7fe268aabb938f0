//! Ethernet pseudowires (RFC 4448): the attachment circuits and the
//! per-pseudowire counters the workers use (`pw_switch` does the work),
//! both directions:
//!
//! * **AC → pseudowire**: frames received on an attachment circuit's port
//!   (a switch port in no VLAN) are taken out of the switched batch right
//!   after receive, before the layer-2 stage ever sees them, matched to
//!   their circuit (the whole port, or port + VLAN in tagged mode),
//!   encapsulated whole (tag included) with the pseudowire label, the
//!   control word and the transport labels toward the remote PE, and sent
//!   out of the uplink the transport resolves to.
//! * **pseudowire → AC**: a labelled frame popped to a pseudowire
//!   (`MplsVerdict::Pseudowire`) leaves by its circuit's port, the VLAN id
//!   rewritten to the local circuit's in tagged mode.
//!
//! Nothing from an attachment circuit reaches bridging, and bridging never
//! floods to one (its port is in no VLAN). Counters per pseudowire, per
//! worker (single writer). No allocation, lock or system call per frame.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tables::{PortSet, MAX_PORTS};

pub(crate) const TPID_8021Q: u16 = 0x8100;
const VLANS: usize = 4096;
const NONE: u32 = 0;
const WHOLE: u32 = 1 << 31;
const PER_VLAN: u32 = 1 << 30;

/// One attachment circuit, by id (= pseudowire id = position in
/// `pseudowires:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttachmentCircuit {
    pub port: u16,
    /// Tagged mode (PW type 4): this VLAN of the port.
    pub vlan: Option<u16>,
    /// Largest customer frame without its Ethernet header.
    pub mtu: u32,
    /// The remote PE (the next hop when it is directly connected).
    pub peer: IpAddr,
}

/// Per-pseudowire counters, in this order per pseudowire.
pub const PW_COUNTERS: usize = 10;
/// Names of the drop counters (indexes 4..).
pub const PW_DROP_NAMES: [&str; 6] = [
    "down",
    "no-path",
    "no-neighbor",
    "mtu",
    "untagged",
    "no-room",
];

/// Why a pseudowire frame went no further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PwDrop {
    /// Not programmed (no labels from LDP yet, or refused).
    Down = 0,
    /// The transport to the remote PE does not resolve (no route / LSP,
    /// or primary down without backup).
    NoPath = 1,
    /// The next hop's MAC is not known.
    NoNeighbor = 2,
    /// Larger than the pseudowire MTU, or the uplink's with the labels.
    Mtu = 3,
    /// An untagged frame out of a tagged-mode pseudowire.
    Untagged = 4,
    /// No room to encapsulate (frame too large for the buffer).
    NoRoom = 5,
}

/// Sums of one pseudowire's counters over all workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PwTotals {
    /// From the attachment circuit into the pseudowire.
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// From the pseudowire out of the attachment circuit.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// By reason, [`PW_DROP_NAMES`] order.
    pub drops: [u64; 6],
}

/// `n` zeroed atomics from `calloc`: untouched pages stay unmapped, so
/// counters sized for every possible pseudowire cost only what is used.
fn zeroed_atomics(n: usize) -> Box<[AtomicU64]> {
    let b: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    let p = Box::into_raw(b) as *mut [AtomicU64];
    // SAFETY: AtomicU64 has the same size, alignment and bit validity as
    // u64, and the pointer comes from a Box of exactly this slice length.
    unsafe { Box::from_raw(p) }
}

/// Per-pseudowire counters of every worker, for pseudowire ids
/// `0..capacity`. Kept by the control plane across configuration
/// changes and shared by every [`PwPlane`] it publishes: a pseudowire a
/// live `config apply` does not touch keeps its id and its counts, and a
/// worker still on the previous plane counts into the same words.
pub struct PwCounters {
    /// Per worker slot: `PW_COUNTERS` per pseudowire id.
    per_worker: Box<[Box<[AtomicU64]>]>,
    /// Per worker slot: frames on an AC port with no circuit (a VLAN
    /// without pseudowire, or untagged on a tagged-mode port).
    unmatched: Box<[AtomicU64]>,
    capacity: usize,
}

impl PwCounters {
    /// Counters for pseudowire ids `0..capacity`, `workers` writers.
    pub fn new(capacity: usize, workers: usize) -> PwCounters {
        // A worker past `workers` shares a slot (`slot`: index modulo).
        let workers = workers.max(1);
        PwCounters {
            per_worker: (0..workers)
                .map(|_| zeroed_atomics(capacity * PW_COUNTERS))
                .collect(),
            unmatched: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            capacity,
        }
    }

    /// Pseudowire ids these counters cover.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Sets pseudowire `pw`'s counters to zero (an id given to a new
    /// pseudowire). Only while no worker counts for `pw`: the control
    /// plane calls it after a grace period with `pw` unprogrammed.
    pub fn zero(&self, pw: u32) {
        let base = pw as usize * PW_COUNTERS;
        for w in self.per_worker.iter() {
            if let Some(c) = w.get(base..base + PW_COUNTERS) {
                c.iter().for_each(|x| x.store(0, Ordering::Relaxed));
            }
        }
    }
}

/// The attachment circuits, published by the control plane in
/// `Shared::pseudowires` (replaced whole on configuration change; the
/// counters are shared between successive planes).
pub struct PwPlane {
    /// Per port: `NONE`, `WHOLE | ac`, or `PER_VLAN | map index`.
    port_map: Box<[u32]>,
    /// Per tagged-mode port: VLAN → ac + 1 (0: none).
    vlan_maps: Vec<Box<[u32]>>,
    /// By circuit id (= pseudowire id); `None`: a free id (a pseudowire
    /// removed by a live apply; ids of the others do not move).
    pub acs: Vec<Option<AttachmentCircuit>>,
    /// The ports of every attachment circuit.
    pub ports: PortSet,
    counters: Arc<PwCounters>,
}

impl PwPlane {
    /// The plane for `acs` (ac id = index), with its own counters for
    /// `workers` workers.
    pub fn new(acs: Vec<AttachmentCircuit>, workers: usize) -> PwPlane {
        let counters = Arc::new(PwCounters::new(acs.len(), workers));
        PwPlane::with_counters(acs.into_iter().map(Some).collect(), counters)
    }

    /// The plane for `acs` (ac id = index, `None`: unused id) counting
    /// into `counters`. Circuits on a port out of range, or with an id
    /// past the counters' capacity, are left out.
    pub fn with_counters(
        acs: Vec<Option<AttachmentCircuit>>,
        counters: Arc<PwCounters>,
    ) -> PwPlane {
        let mut port_map = vec![NONE; MAX_PORTS].into_boxed_slice();
        let mut vlan_maps: Vec<Box<[u32]>> = Vec::new();
        let mut ports = PortSet::EMPTY;
        for (id, ac) in acs.iter().enumerate() {
            let Some(ac) = ac else {
                continue;
            };
            let Some(slot) = port_map.get_mut(ac.port as usize) else {
                continue;
            };
            if id >= counters.capacity {
                continue;
            }
            ports.insert(ac.port);
            match ac.vlan {
                None => *slot = WHOLE | id as u32,
                Some(v) => {
                    if *slot & PER_VLAN == 0 {
                        *slot = PER_VLAN | vlan_maps.len() as u32;
                        vlan_maps.push(vec![0u32; VLANS].into_boxed_slice());
                    }
                    let m = (*slot & !PER_VLAN) as usize;
                    vlan_maps[m][v as usize & (VLANS - 1)] = id as u32 + 1;
                }
            }
        }
        PwPlane {
            port_map,
            vlan_maps,
            acs,
            ports,
            counters,
        }
    }

    /// The circuit with id `ac`, if it exists.
    #[inline]
    pub fn circuit(&self, ac: u32) -> Option<AttachmentCircuit> {
        self.acs.get(ac as usize).copied().flatten()
    }

    /// The circuit frame `f` received on `port` belongs to.
    #[inline]
    pub fn circuit_of(&self, port: u16, f: &[u8]) -> Option<u32> {
        let m = *self.port_map.get(port as usize)?;
        if m & WHOLE != 0 {
            return Some(m & !WHOLE);
        }
        if m & PER_VLAN == 0 || f.len() < 18 || u16::from_be_bytes([f[12], f[13]]) != TPID_8021Q {
            return None;
        }
        let vid = u16::from_be_bytes([f[14], f[15]]) as usize & (VLANS - 1);
        self.vlan_maps[(m & !PER_VLAN) as usize][vid].checked_sub(1)
    }

    #[inline]
    pub(crate) fn slot(&self, worker: usize) -> usize {
        worker % self.counters.per_worker.len()
    }

    #[inline]
    pub(crate) fn add(&self, worker: usize, pw: u32, k: usize, v: u64) {
        if let Some(c) =
            self.counters.per_worker[self.slot(worker)].get(pw as usize * PW_COUNTERS + k)
        {
            c.store(c.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
        }
    }

    /// Counts a frame of pseudowire `pw` dropped for `why` (worker
    /// `worker`'s counters; public for the control plane's tests).
    #[inline]
    pub fn count_drop(&self, worker: usize, pw: u32, why: PwDrop) {
        self.add(worker, pw, 4 + why as usize, 1);
    }

    #[inline]
    pub(crate) fn count_unmatched(&self, worker: usize) {
        let c = &self.counters.unmatched[self.slot(worker)];
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    /// Counters of pseudowire `pw`, all workers.
    pub fn totals(&self, pw: u32) -> PwTotals {
        let mut t = PwTotals::default();
        for w in self.counters.per_worker.iter() {
            let base = pw as usize * PW_COUNTERS;
            let Some(c) = w.get(base..base + PW_COUNTERS) else {
                continue;
            };
            let g = |i: usize| c[i].load(Ordering::Relaxed);
            t.tx_packets += g(0);
            t.tx_bytes += g(1);
            t.rx_packets += g(2);
            t.rx_bytes += g(3);
            for (k, d) in t.drops.iter_mut().enumerate() {
                *d += g(4 + k);
            }
        }
        t
    }

    /// Frames on attachment-circuit ports that matched no circuit.
    pub fn unmatched(&self) -> u64 {
        self.counters
            .unmatched
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}
