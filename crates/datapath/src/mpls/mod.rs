//! The MPLS room: labelled frames (EtherType 0x8847) received on routed
//! ports go through `pipeline::mpls::process_labelled` (swap / PHP / pop
//! to IP), and IP packets the layer-3 stage routed to a labelled target
//! (FTN) get their stack pushed (`push_ftn`). See docs/mpls.md.
//!
//! Per frame: one copy into the worker's own buffer (the batch has no
//! headroom to grow a frame), no allocation, no lock, no system call.

//
//! This module holds the state (shared by `Shared` and `Worker`, so it
//! imports neither); `switch` the per-frame work.

pub mod circuits;
mod pw_switch;
mod switch;

use io::MAX_FRAME_LEN;
use pipeline::mpls::{MplsConfig, MplsDrop};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tables::mpls::{LabelCounters, Lfib};

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
    /// A next hop on no router interface; a packet popped from a VPN
    /// label that the layer-3 stage would punt.
    Unsupported,
    /// A pseudowire's label whose attachment circuit is not configured.
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
    ttl_icmp_down_lsp: AtomicU64,
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
    /// Label TTL expired (not forwarded; answered with ICMP time
    /// exceeded, RFC 4950, as CoPP allows).
    pub ttl_expired: u64,
    /// Of those, answers sent down the LSP (RFC 3032 §2.3.2) rather
    /// than back to the previous LSR.
    pub ttl_icmp_down_lsp: u64,
    /// Router-alert label on top (dropped).
    pub router_alert: u64,
    /// By reason, [`DROP_NAMES`] order.
    pub drops: [u64; STAGE_DROPS + LOCAL_DROPS],
}

/// Every worker's label and MPLS counters.
pub type MplsRegistry = Mutex<Vec<(Arc<LabelCounters>, Arc<MplsStats>)>>;

/// A worker's MPLS state.
pub(crate) struct MplsWorker {
    pub(crate) labels: Arc<LabelCounters>,
    pub(crate) stats: Arc<MplsStats>,
    buf: Box<[u8]>,
}

impl MplsWorker {
    /// Registers the worker's counters in `registry` (`Shared::mpls_counters`)
    /// for `show`.
    pub(crate) fn new(registry: &MplsRegistry) -> MplsWorker {
        let labels = Arc::new(LabelCounters::default());
        let stats = Arc::new(MplsStats::default());
        registry
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
