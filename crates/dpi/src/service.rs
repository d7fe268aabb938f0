//! Services (named groups of applications) and the counters the engine
//! keeps for them.
//!
//! Service ids: 0 is `unknown` (nothing recognised the flow), 1 is `other`
//! (recognised, but no configured service lists the application), 2.. are
//! the configured services in order. An application is an nDPI protocol
//! id, or `protocols + i` for operator signature `i`.
//!
//! Counters are written by one worker and read by `show` from any thread
//! ([`Counter`]: a relaxed load + store, no locked instruction). Each
//! worker's engine has its own [`Stats`]; `show` sums them.

pub use crate::counter::Counter;
use crate::huge::{HugeArray, Zeroable};
use std::sync::atomic::{AtomicU64, Ordering};

pub const UNKNOWN: u16 = 0;
pub const OTHER: u16 = 1;
/// The service id of a subscriber's *total* usage entry in
/// [`UsageTable`] keys: every frame of the subscriber, whatever its
/// service and whether its flow is classified yet (caps, quota).
pub const TOTAL: u16 = u16::MAX;

/// Most services (including `unknown` and `other`).
pub const MAX_SERVICES: usize = 64;

/// Which applications make up which service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceMap {
    names: Vec<String>,
    /// Application id → service id (apps past the end: `other`).
    by_app: Vec<u16>,
}

impl ServiceMap {
    /// `services`: (name, application ids) in order; ids become 2...
    pub fn new(services: &[(String, Vec<u16>)]) -> Result<ServiceMap, String> {
        if services.len() + 2 > MAX_SERVICES {
            return Err(format!(
                "{} services; at most {}",
                services.len(),
                MAX_SERVICES - 2
            ));
        }
        let mut names = vec!["unknown".to_string(), "other".to_string()];
        let mut by_app: Vec<u16> = Vec::new();
        for (i, (name, apps)) in services.iter().enumerate() {
            if names.iter().any(|n| n == name) {
                return Err(format!("service '{name}' defined twice (or reserved)"));
            }
            let id = (i + 2) as u16;
            for &a in apps {
                let a = usize::from(a);
                if by_app.len() <= a {
                    by_app.resize(a + 1, OTHER);
                }
                if by_app[a] != OTHER {
                    return Err(format!(
                        "application {a} is in services '{}' and '{name}'",
                        names[usize::from(by_app[a])]
                    ));
                }
                by_app[a] = id;
            }
            names.push(name.clone());
        }
        Ok(ServiceMap { names, by_app })
    }

    #[inline]
    pub fn of(&self, app: u16) -> u16 {
        if app == crate::ndpi::UNKNOWN {
            return UNKNOWN;
        }
        self.by_app.get(usize::from(app)).copied().unwrap_or(OTHER)
    }

    pub fn name(&self, id: u16) -> &str {
        self.names
            .get(usize::from(id))
            .map(String::as_str)
            .unwrap_or("?")
    }

    pub fn id(&self, name: &str) -> Option<u16> {
        self.names.iter().position(|n| n == name).map(|i| i as u16)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Counters of one service (or one subscriber's use of one service).
/// Directions: 0 = upstream (from the subscriber side), 1 = downstream.
#[derive(Default, Debug)]
#[repr(C)]
pub struct Usage {
    pub flows: Counter,
    /// Live flows now.
    pub active: Counter,
    /// Passed (delivered) packets and bytes.
    pub packets: [Counter; 2],
    pub bytes: [Counter; 2],
    /// Dropped by bandwidth control or a used-up quota.
    pub dropped_packets: [Counter; 2],
    pub dropped_bytes: [Counter; 2],
}

// SAFETY: counters only (atomics), valid as zero.
unsafe impl Zeroable for Usage {}

/// The engine's own events and how flows were decided.
#[derive(Default, Debug)]
pub struct EngineCounters {
    pub packets: Counter,
    pub not_ip: Counter,
    pub flows_created: Counter,
    pub flows_ended: Counter,
    pub expired: Counter,
    pub evicted_idle: Counter,
    /// New flows refused by a full flow table (packets passed unclassified).
    pub refused_full: Counter,
    /// Packets of refused flows.
    pub unclassified_packets: Counter,
    /// New flows whose subscriber-side address belongs to no subscriber.
    pub no_subscriber: Counter,
    /// New flows that found every nDPI slot busy (signatures only).
    pub classify_busy: Counter,
    pub by_signature: Counter,
    pub by_ndpi: Counter,
    pub by_guess: Counter,
    pub unknown: Counter,
    /// Packets handed to nDPI.
    pub ndpi_packets: Counter,
    /// Per-subscriber usage entries that found the table full.
    pub usage_full: Counter,
    /// Packets dropped because their subscriber's quota is used up.
    pub quota_dropped: Counter,
    /// Packets dropped by their subscriber's own cap (`cap-up`/`cap-down`).
    pub cap_dropped: Counter,
    /// Packets of flows being classified dropped by the `classifying`
    /// limit (per subscriber and direction).
    pub classifying_dropped: Counter,
    /// Packets of a controlled service, or of a flow being classified
    /// under a `classifying` limit, that have no subscriber entry (no
    /// subscriber, or the usage table full): passed uncontrolled.
    pub uncontrolled_packets: Counter,
    /// Usage records lost because the export queue was full.
    pub export_lost: Counter,
    /// Interim usage records of live flows (active timeout).
    pub interim_records: Counter,
    /// Live flows and flows being classified now.
    pub flows_live: Counter,
    pub classifying: Counter,
}

/// One worker's counters.
pub struct Stats {
    pub engine: EngineCounters,
    pub services: Box<[Usage]>,
    /// Per application: flows and packets/bytes (both directions).
    pub apps: Box<[Usage]>,
    pub usage: UsageTable,
}

impl Stats {
    pub fn new(apps: usize, usage_entries: usize) -> Stats {
        Stats {
            engine: EngineCounters::default(),
            services: (0..MAX_SERVICES).map(|_| Usage::default()).collect(),
            apps: (0..apps).map(|_| Usage::default()).collect(),
            usage: UsageTable::new(usage_entries),
        }
    }
}

/// Per subscriber per service counters: open addressing over a fixed
/// array (single writer inserts; readers probe). A key is
/// `slot << 32 | generation << 16 | service`, stored + 1 (0 = empty).
/// Entries are never removed while the engine runs (a deleted
/// subscriber's are left behind under its old generation), so a reader
/// never sees a key move. Full: counted (`usage_full`), the flow is still
/// counted per service.
pub struct UsageTable {
    slots: HugeArray<Slot>,
    mask: usize,
    len: Counter,
}

/// One usage entry: its key, counters and bandwidth state together, so
/// a packet's counter update and bucket check share one 128-byte pair of
/// cache lines (the key, `packets`/`bytes` in the first line, the
/// bucket's `quota_out`, `rate` and `package` in the second) and one page.
#[repr(C, align(64))]
struct Slot {
    key: AtomicU64,
    usage: Usage,
    /// Bandwidth control state ([`crate::bandwidth`]).
    bucket: crate::bucket::Bucket,
}

// SAFETY: atomics only, valid as zero.
unsafe impl Zeroable for Slot {}

/// Bytes per usage entry: key, counters, bandwidth state (224, aligned
/// to 256).
pub const USAGE_ENTRY_BYTES: usize = std::mem::size_of::<Slot>();

const _: () = assert!(USAGE_ENTRY_BYTES == 256);

/// Longest probe before the table counts as full for a key.
const USAGE_PROBE: usize = 64;

impl UsageTable {
    pub fn new(entries: usize) -> UsageTable {
        let n = entries.clamp(16, 1 << 28).next_power_of_two();
        UsageTable {
            slots: HugeArray::zeroed(n),
            mask: n - 1,
            len: Counter::default(),
        }
    }

    /// The array's range advised for 2 MB pages (see
    /// [`HugeArray::advised_range`]).
    pub fn advised_range(&self) -> Option<(usize, usize)> {
        self.slots.advised_range()
    }

    pub fn key(slot: u32, gen: u16, service: u16) -> u64 {
        (u64::from(slot) << 32 | u64::from(gen) << 16 | u64::from(service)) + 1
    }

    /// The subscriber (slot, generation) of a key.
    pub fn subscriber_of(key: u64) -> (u32, u16) {
        let k = key - 1;
        ((k >> 32) as u32, (k >> 16) as u16)
    }

    /// The service of a key.
    pub fn service_of(key: u64) -> u16 {
        (key - 1) as u16
    }

    /// The key stored at entry `i` (0: empty; any thread).
    #[inline]
    pub fn key_at(&self, i: u32) -> u64 {
        self.slots
            .get(i as usize)
            .map_or(0, |s| s.key.load(Ordering::Acquire))
    }

    #[inline]
    pub fn bucket(&self, i: u32) -> &crate::bucket::Bucket {
        &self.slots[i as usize].bucket
    }

    fn home(&self, k: u64) -> usize {
        let p = u128::from(k).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((p as u64) ^ ((p >> 64) as u64)) as usize & self.mask
    }

    /// The entry of `key`, inserted if new (owner thread only).
    pub fn entry(&self, key: u64) -> Option<u32> {
        let mut pos = self.home(key);
        for _ in 0..USAGE_PROBE {
            let k = self.slots[pos].key.load(Ordering::Relaxed);
            if k == key {
                return Some(pos as u32);
            }
            if k == 0 {
                // Counters of a fresh slot are zero (never used before).
                self.slots[pos].key.store(key, Ordering::Release);
                self.len.add(1);
                return Some(pos as u32);
            }
            pos = (pos + 1) & self.mask;
        }
        None
    }

    /// The entry of `key` if present (any thread).
    pub fn find(&self, key: u64) -> Option<&Usage> {
        let mut pos = self.home(key);
        for _ in 0..USAGE_PROBE {
            let k = self.slots[pos].key.load(Ordering::Acquire);
            if k == key {
                return Some(&self.slots[pos].usage);
            }
            if k == 0 {
                return None;
            }
            pos = (pos + 1) & self.mask;
        }
        None
    }

    /// The bandwidth state of `key` if present (any thread).
    pub fn find_bucket(&self, key: u64) -> Option<&crate::bucket::Bucket> {
        let mut pos = self.home(key);
        for _ in 0..USAGE_PROBE {
            let k = self.slots[pos].key.load(Ordering::Acquire);
            if k == key {
                return Some(&self.slots[pos].bucket);
            }
            if k == 0 {
                return None;
            }
            pos = (pos + 1) & self.mask;
        }
        None
    }

    /// Starts loading the entry where `key` is looked up first (a hint:
    /// usually `key`'s entry, or where it will be inserted).
    #[inline]
    pub fn prefetch_key(&self, key: u64) {
        self.prefetch(self.home(key) as u32);
    }

    /// Starts loading entry `i`'s counters and bucket (a hint).
    #[inline]
    pub fn prefetch(&self, i: u32) {
        if let Some(s) = self.slots.get(i as usize) {
            let p = s as *const Slot as *const u8;
            crate::flow::prefetch(p);
            crate::flow::prefetch(p.wrapping_add(64));
        }
    }

    #[inline]
    pub fn at(&self, i: u32) -> &Usage {
        &self.slots[i as usize].usage
    }

    pub fn len(&self) -> u64 {
        self.len.get()
    }

    pub fn is_empty(&self) -> bool {
        self.len.get() == 0
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_group_applications() {
        let m = ServiceMap::new(&[("web".into(), vec![7, 91]), ("dns".into(), vec![5])]).unwrap();
        assert_eq!(m.of(7), 2);
        assert_eq!(m.of(91), 2);
        assert_eq!(m.of(5), 3);
        assert_eq!(m.of(92), OTHER);
        assert_eq!(m.of(60000), OTHER);
        assert_eq!(m.of(0), UNKNOWN);
        assert_eq!(m.name(3), "dns");
        assert_eq!(m.id("web"), Some(2));
        assert!(
            ServiceMap::new(&[("a".into(), vec![7]), ("b".into(), vec![7])])
                .unwrap_err()
                .contains("'a' and 'b'")
        );
        assert!(ServiceMap::new(&[("unknown".into(), vec![])]).is_err());
    }

    #[test]
    fn usage_table_inserts_finds_and_fills() {
        let t = UsageTable::new(16);
        let k1 = UsageTable::key(1, 0, 2);
        let i = t.entry(k1).unwrap();
        t.at(i).packets[0].add(3);
        assert_eq!(t.entry(k1), Some(i));
        assert_eq!(t.find(k1).unwrap().packets[0].get(), 3);
        assert!(t.find(UsageTable::key(1, 1, 2)).is_none());
        for s in 2..17 {
            assert!(t.entry(UsageTable::key(s, 0, 2)).is_some());
        }
        assert!(t.entry(UsageTable::key(99, 0, 2)).is_none());
        assert_eq!(t.len(), 16);
    }
}
