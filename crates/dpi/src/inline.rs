//! What the control plane publishes to the workers for inline mode: the
//! port pairs, one prebuilt [`Engine`] per worker, their counters, the
//! subscriber view and the bypass switch.
//!
//! Engines are built by the control plane (nDPI's module takes ~40 ms and
//! the flow table its memory) and *taken* by each worker the first time it
//! sees a new plan's generation: one lock per worker per configuration
//! change, none per frame.

use crate::bandwidth::Levels;
use crate::engine::{Engine, Policy, Side};
use crate::service::Stats;
use crate::subscriber::Published;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Port-indexed pair table entry: none.
const NO_PAIR: u16 = u16::MAX;

/// One configuration's inline plan (see the module docs).
pub struct InlinePlan {
    /// Changes with every new plan (workers compare it once per batch).
    pub generation: u64,
    /// Per port id: the pair's other port and this port's side.
    pairs: Vec<(u16, Side)>,
    engines: Mutex<Vec<Option<Engine>>>,
    /// Per worker, the counters `show` sums.
    pub stats: Vec<Arc<Stats>>,
    pub subscribers: Published,
    pub policy: Arc<Policy>,
    /// Bandwidth controllers' shares per weight unit, read by every
    /// engine, written by the control thread.
    pub levels: Arc<Levels>,
    /// Bypass: frames still pass between the pair, the engine is skipped.
    pub bypass: AtomicBool,
    /// Bytes each engine reserved, and its flow capacity.
    pub engine_memory: usize,
    /// Every engine's arrays advised for 2 MB pages (start, bytes), for
    /// `show service-control`'s huge-page figure (read from /proc by the
    /// control thread; the memory lives as long as the engines).
    pub huge_ranges: Vec<(usize, usize)>,
    pub flow_capacity: usize,
    pub classify_slots: usize,
    /// Per worker, ended flows for the usage exporter (empty: no export).
    pub usage_queues: Vec<Arc<crate::usage_record::UsageQueue>>,
}

impl InlinePlan {
    /// `pairs`: (subscriber port id, network port id); `engines`: one per
    /// worker, in worker registration order.
    pub fn new(
        generation: u64,
        pairs: &[(u16, u16)],
        mut engines: Vec<Engine>,
        subscribers: Published,
        policy: Arc<Policy>,
    ) -> InlinePlan {
        let levels = Arc::new(Levels::new(&policy.bandwidth));
        for e in &mut engines {
            e.set_levels(levels.clone());
        }
        let max = pairs
            .iter()
            .map(|&(a, b)| a.max(b) as usize + 1)
            .max()
            .unwrap_or(0);
        let mut table = vec![(NO_PAIR, Side::Subscriber); max];
        for &(s, n) in pairs {
            table[s as usize] = (n, Side::Subscriber);
            table[n as usize] = (s, Side::Network);
        }
        let stats = engines.iter().map(|e| e.stats()).collect();
        let engine_memory = engines.first().map(|e| e.memory_bytes()).unwrap_or(0);
        let huge_ranges = engines.iter().flat_map(|e| e.advised_ranges()).collect();
        let flow_capacity = engines.first().map(|e| e.flows().capacity()).unwrap_or(0);
        let classify_slots = engines.first().map(|e| e.classify_slots().1).unwrap_or(0);
        InlinePlan {
            generation,
            pairs: table,
            engines: Mutex::new(engines.into_iter().map(Some).collect()),
            stats,
            subscribers,
            policy,
            levels,
            bypass: AtomicBool::new(false),
            engine_memory,
            huge_ranges,
            flow_capacity,
            classify_slots,
            usage_queues: Vec::new(),
        }
    }

    /// The pair's other port and the side of `port`, if it is inline.
    #[inline]
    pub fn pair(&self, port: u16) -> Option<(u16, Side)> {
        match self.pairs.get(port as usize) {
            Some(&(peer, side)) if peer != NO_PAIR => Some((peer, side)),
            _ => None,
        }
    }

    /// Worker `index` takes its engine (once per plan).
    pub fn take_engine(&self, index: usize) -> Option<Engine> {
        self.engines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(index)
            .and_then(Option::take)
    }

    pub fn bypassed(&self) -> bool {
        self.bypass.load(Ordering::Relaxed)
    }

    pub fn set_bypass(&self, on: bool) {
        self.bypass.store(on, Ordering::Relaxed);
    }
}
