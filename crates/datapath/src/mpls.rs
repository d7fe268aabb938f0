//! The MPLS room: labelled frames (EtherType 0x8847) received on routed
//! ports go through `pipeline::mpls::process_labelled` (swap / PHP / pop
//! to IP), and IP packets the layer-3 stage routed to a labelled target
//! (FTN) get their stack pushed (`push_ftn`). See docs/mpls.md.
//!
//! Per frame: one copy into the worker's own buffer (the batch has no
//! headroom to grow a frame), no allocation, no lock, no system call.

use crate::worker::*;
use io::{FrameBatch, BATCH_MAX, MAX_FRAME_LEN};
use pipeline::l3::L3Tables;
use pipeline::mpls::{
    process_labelled, push_ftn, MplsConfig, MplsDrop, MplsPunt, MplsTables, MplsVerdict,
};
use pipeline::services::Services;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tables::acl::AclKey;
use tables::mpls::{LabelCounters, LabelStack, Lfib, Resolved};
use tables::{NeighborState, NextHop, PortSet};
use wire::mpls::Span;

/// EtherType of MPLS unicast.
pub const ETHERTYPE_MPLS: u16 = 0x8847;
/// Room in front of a frame for the labels pushed on it.
const HEADROOM: usize = 64;
const ETH_LEN: usize = 14;

/// What the workers need to switch labels: the LFIB (written by the FIB
/// manager) and the TTL/TC settings. Published in `Shared::mpls`.
pub struct MplsPlane {
    pub lfib: Arc<Lfib>,
    pub cfg: MplsConfig,
}

/// Why a labelled frame, or an IP packet to be labelled, went no further
/// in the worker (beyond the stage's own [`MplsDrop`] reasons).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MplsLocalDrop {
    /// Not addressed to the router's MAC.
    NotForRouter,
    /// Next hop's MAC not known (ARP/ND not resolved yet).
    NoNeighbor,
    /// Larger than the egress MTU with its stack.
    Mtu,
    /// Pop into a VRF table, or labelled out of a VLAN interface: not
    /// supported.
    Unsupported,
    /// A pseudowire's label: pseudowires are not wired into the worker.
    Pseudowire,
    /// The popped packet did not fit back into the batch.
    BatchFull,
}

const STAGE_DROPS: usize = 6;
const LOCAL_DROPS: usize = 6;

fn stage_index(d: MplsDrop) -> usize {
    match d {
        MplsDrop::Malformed => 0,
        MplsDrop::UnknownLabel => 1,
        MplsDrop::NoPath => 2,
        MplsDrop::ReservedLabel => 3,
        MplsDrop::ControlWord => 4,
        MplsDrop::NoRoom => 5,
    }
}

/// Names of the drop counters, in [`MplsTotals::drops`] order.
pub const DROP_NAMES: [&str; STAGE_DROPS + LOCAL_DROPS] = [
    "malformed",
    "unknown-label",
    "no-path",
    "reserved-label",
    "control-word",
    "no-room",
    "not-for-router",
    "no-neighbor",
    "mtu",
    "unsupported",
    "pseudowire",
    "batch-full",
];

/// One worker's MPLS counters (single writer: load + store, no RMW).
#[derive(Default)]
pub struct MplsStats {
    rx: AtomicU64,
    forwarded: AtomicU64,
    popped: AtomicU64,
    pushed: AtomicU64,
    ttl_expired: AtomicU64,
    router_alert: AtomicU64,
    drops: [AtomicU64; STAGE_DROPS + LOCAL_DROPS],
}

#[inline]
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// All workers' MPLS counters summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MplsTotals {
    /// Labelled frames received on routed ports.
    pub rx: u64,
    /// Label-switched out (swap, PHP, explicit null).
    pub forwarded: u64,
    /// Popped to IP and routed.
    pub popped: u64,
    /// IP packets sent with an FTN stack pushed.
    pub pushed: u64,
    /// Label TTL expired (dropped: the RFC 4950 ICMP answer is not
    /// generated).
    pub ttl_expired: u64,
    /// Router-alert label on top (dropped).
    pub router_alert: u64,
    /// By reason, [`DROP_NAMES`] order.
    pub drops: [u64; STAGE_DROPS + LOCAL_DROPS],
}

/// A worker's MPLS state.
pub(crate) struct MplsWorker {
    pub(crate) labels: Arc<LabelCounters>,
    pub(crate) stats: Arc<MplsStats>,
    buf: Box<[u8]>,
}

impl MplsWorker {
    /// Registers the worker's counters in `shared` for `show`.
    pub(crate) fn new(shared: &crate::Shared) -> MplsWorker {
        let labels = Arc::new(LabelCounters::default());
        let stats = Arc::new(MplsStats::default());
        shared
            .mpls_counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((labels.clone(), stats.clone()));
        MplsWorker {
            labels,
            stats,
            buf: vec![0u8; HEADROOM + MAX_FRAME_LEN].into_boxed_slice(),
        }
    }
}

impl crate::Shared {
    /// Packets and bytes received with top label `label`, all workers.
    pub fn label_counts(&self, label: u32) -> (u64, u64) {
        let w = self.mpls_counters.lock().unwrap_or_else(|e| e.into_inner());
        w.iter().fold((0, 0), |(p, b), (c, _)| {
            let (p2, b2) = c.get(label);
            (p + p2, b + b2)
        })
    }

    /// MPLS counters of all workers.
    pub fn mpls_totals(&self) -> MplsTotals {
        let w = self.mpls_counters.lock().unwrap_or_else(|e| e.into_inner());
        let mut t = MplsTotals::default();
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        for (_, s) in w.iter() {
            t.rx += g(&s.rx);
            t.forwarded += g(&s.forwarded);
            t.popped += g(&s.popped);
            t.pushed += g(&s.pushed);
            t.ttl_expired += g(&s.ttl_expired);
            t.router_alert += g(&s.router_alert);
            for (a, c) in t.drops.iter_mut().zip(&s.drops) {
                *a += g(c);
            }
        }
        t
    }
}

#[inline]
fn is_labelled(f: &[u8]) -> bool {
    f.len() >= ETH_LEN && u16::from_be_bytes([f[12], f[13]]) == ETHERTYPE_MPLS
}

impl Worker {
    /// Takes the labelled frames out of a routed batch and switches them:
    /// swapped / PHP'd frames leave at once, frames popped to IP are put
    /// back at the end of the batch for the layer-3 stage. Costs one scan
    /// of the EtherTypes when there are none.
    pub(crate) fn switch_labelled(&mut self, l3: &L3Tables, batch: &mut FrameBatch) {
        let n = batch.len();
        if !(0..n).any(|i| is_labelled(batch.frame(i))) {
            return;
        }
        let Some(plane) = self.shared.mpls.load_full() else {
            // MPLS off: the layer-3 stage treats them as before.
            return;
        };
        let labels = self.mpls.labels.clone();
        let stats = self.mpls.stats.clone();
        let mut buf = std::mem::take(&mut self.mpls.buf);
        let t = MplsTables {
            lfib: &plane.lfib,
            next_hops: &l3.nexthops,
            counters: &labels,
            cfg: &plane.cfg,
        };
        let mut taken = [false; BATCH_MAX];
        let mut dirty = PortSet::EMPTY;
        for (i, took) in taken.iter_mut().enumerate().take(n) {
            if !is_labelled(batch.frame(i)) {
                continue;
            }
            *took = true;
            bump(&stats.rx);
            let ingress = batch.port(i);
            let frame = batch.frame(i);
            let local = |d: MplsLocalDrop| bump(&stats.drops[STAGE_DROPS + d as usize]);
            match l3.interface(ingress) {
                Some(ifc) if frame[0..6] == ifc.mac => {}
                _ => {
                    local(MplsLocalDrop::NotForRouter);
                    continue;
                }
            }
            let len = frame.len().min(MAX_FRAME_LEN);
            buf[HEADROOM..HEADROOM + len].copy_from_slice(&frame[..len]);
            let span = Span {
                start: HEADROOM,
                len,
            };
            match process_labelled(&t, &mut buf, span, ETH_LEN, None) {
                MplsVerdict::Forward {
                    span,
                    next_hop_id,
                    port,
                    ..
                } => {
                    let Some(egress) = l3.interface(port).filter(|_| !l3.is_svi(port)) else {
                        local(MplsLocalDrop::Unsupported);
                        continue;
                    };
                    if span.len - ETH_LEN > egress.mtu as usize {
                        local(MplsLocalDrop::Mtu);
                        continue;
                    }
                    let mac = match l3.nexthops.get(next_hop_id) {
                        Some(NextHop {
                            gateway: Some(gw), ..
                        }) => match l3.neighbors.lookup(gw) {
                            Some(nb) if nb.state != NeighborState::Incomplete => Some(nb.mac),
                            _ => None,
                        },
                        _ => None,
                    };
                    let Some(mac) = mac else {
                        local(MplsLocalDrop::NoNeighbor);
                        continue;
                    };
                    let f = &mut buf[span.start..span.start + span.len];
                    f[0..6].copy_from_slice(&mac);
                    f[6..12].copy_from_slice(&egress.mac);
                    bump(&stats.forwarded);
                    self.transmit_raw(
                        port,
                        &buf[span.start..span.start + span.len],
                        &mut dirty,
                        None,
                    );
                }
                MplsVerdict::Route { span, table, .. } => {
                    if table != 0 {
                        local(MplsLocalDrop::Unsupported);
                    } else if batch.push(ingress, &buf[span.start..span.start + span.len]) {
                        bump(&stats.popped);
                    } else {
                        local(MplsLocalDrop::BatchFull);
                    }
                }
                MplsVerdict::Pseudowire { .. } => local(MplsLocalDrop::Pseudowire),
                MplsVerdict::Punt(MplsPunt::TtlExpired) => bump(&stats.ttl_expired),
                MplsVerdict::Punt(MplsPunt::RouterAlert) => bump(&stats.router_alert),
                MplsVerdict::Drop(d) => bump(&stats.drops[stage_index(d)]),
            }
        }
        self.mpls.buf = buf;
        self.flush(dirty);
        batch.retain(|i| i >= n || !taken[i]);
    }

    /// Sends an IP packet the layer-3 stage routed (MACs rewritten, TTL
    /// decremented) to a labelled target: pushes `stack` (TTL from the IP
    /// header in uniform mode, TC from class 0) and transmits it, through
    /// the egress services when `egress` says so (the key's MACs are
    /// refreshed and its layer-3 offset moved past the stack).
    pub(crate) fn send_labelled(
        &mut self,
        port: u16,
        svi: bool,
        frame: &[u8],
        stack: LabelStack,
        egress: Option<(&Services, &mut AclKey, usize)>,
        dirty: &mut PortSet,
    ) {
        let stats = self.mpls.stats.clone();
        let Some(plane) = self.shared.mpls.load_full() else {
            bump(&stats.drops[stage_index(MplsDrop::NoPath)]);
            return;
        };
        if svi {
            // Labelled out of a VLAN interface: not supported.
            bump(&stats.drops[STAGE_DROPS + MplsLocalDrop::Unsupported as usize]);
            return;
        }
        let len = frame.len();
        if len > MAX_FRAME_LEN {
            bump(&stats.drops[stage_index(MplsDrop::NoRoom)]);
            return;
        }
        let mut buf = std::mem::take(&mut self.mpls.buf);
        buf[HEADROOM..HEADROOM + len].copy_from_slice(frame);
        let r = Resolved {
            next_hop_id: 0,
            next_hop: NextHop {
                port,
                gateway: None,
            },
            labels: stack,
            on_backup: false,
        };
        let span = Span {
            start: HEADROOM,
            len,
        };
        match push_ftn(&plane.cfg, &mut buf, span, ETH_LEN, &r, 0) {
            Ok(s) => {
                bump(&stats.pushed);
                let out = &buf[s.start..s.start + s.len];
                let egress = egress.map(|(svc, k, l3off)| {
                    k.dst_mac.copy_from_slice(&out[0..6]);
                    k.src_mac.copy_from_slice(&out[6..12]);
                    (svc, &*k, l3off + 4 * stack.len())
                });
                self.transmit_raw(port, out, dirty, egress);
            }
            Err(d) => bump(&stats.drops[stage_index(d)]),
        }
        self.mpls.buf = buf;
    }
}
