//! Flow accounting: the per-worker flow cache.
//!
//! Each worker owns one [`FlowCache`] (single-threaded, no locks) and calls
//! [`FlowCache::update`] for every packet it accounts, and
//! [`FlowCache::sweep`] with a small budget once per batch. Expired flows
//! leave as [`FlowRecord`]s, which the worker pushes onto its
//! [`FlowExportQueue`] for the exporter thread (`services::export`).
//!
//! ## Layout
//!
//! Two preallocated arrays, nothing allocated after [`FlowCache::new`],
//! both [`HugeArray`]s on 2 MB pages committed as touched (a random
//! flow's index slot and entry are then not also two 4 KB TLB misses):
//!
//! * **entries**: a dense array of exactly `capacity` 80-byte entries (key,
//!   counters, times). Live flows occupy `entries[..len]`; removal moves the
//!   last entry into the hole, so sweeps only ever look at live flows.
//! * **index**: `2 × capacity` 8-byte slots, open addressing with linear
//!   probing in Robin Hood order, backward-shift deletion (no tombstones).
//!   A slot holds the upper 32 bits of the key's hash (the *tag*; its top
//!   bits are also the home slot) and the entry number + 1 (0 = empty).
//!
//! The index is at most half full (`len <= capacity = slots / 2`), so probe
//! sequences are short; any key is within [`MAX_PROBE`] slots of its home
//! and an insert that would break that bound fails (`update` returns
//! `false`), as does an insert into a cache holding `capacity` flows.
//! Memory: 80 + 2 × 8 = 96 bytes per flow of capacity.
//!
//! ## Hash
//!
//! Folded 64×64→128-bit multiplies (wyhash style) over the key packed into
//! six words, seeded per cache from the standard library's random hasher
//! keys (so remote hosts cannot aim packets at one probe sequence).
//! About 3 ns per key; no SipHash on the packet path.

use crate::huge::{Backing, HugeArray, Zeroable};
use crossbeam_queue::ArrayQueue;
use std::collections::BinaryHeap;

/// What identifies a flow. IPv4 addresses are in the low 32 bits.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub src_ip: u128,
    pub dst_ip: u128,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
    pub tos: u8,
    /// 4 or 6.
    pub family: u8,
    pub in_port: u16,
    pub vlan: u16,
}

/// Why a record left the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowEnd {
    /// Active timeout: the flow lives on, a new record period starts.
    Active,
    /// Idle for the inactive timeout; the flow was removed.
    Inactive,
    /// Removed by [`FlowCache::flush`] (shutdown, configuration change).
    Forced,
}

/// One flow's counters over one record period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRecord {
    pub key: FlowKey,
    pub packets: u64,
    pub bytes: u64,
    /// Caller's clock (ms) at the period's first and last packet.
    pub first_ms: u64,
    pub last_ms: u64,
    /// OR of the TCP flags seen.
    pub tcp_flags: u8,
    /// Port of the last packet's egress (`u16::MAX`: none / dropped).
    pub out_port: u16,
    pub end: FlowEnd,
}

/// Worker → exporter queue of finished records (one per worker).
pub type FlowExportQueue = ArrayQueue<FlowRecord>;

/// Longest distance (in index slots) of a key from its home slot.
pub const MAX_PROBE: usize = 128;

/// Smallest capacity [`FlowCache::new`] gives.
pub const MIN_CAPACITY: usize = 16;

/// The key packed into words: `k[0..4]` addresses, `k[4]` ports, in_port,
/// vlan; `meta & KEY_META` proto, tos, family.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Packed {
    k: [u64; 5],
    m: u64,
}

const KEY_META: u64 = 0xff_ffff;

/// 80 bytes.
#[derive(Clone, Copy)]
#[repr(C)]
struct Entry {
    k: [u64; 5],
    /// proto | tos << 8 | family << 16 | tcp_flags << 24 | out_port << 32.
    meta: u64,
    packets: u64,
    bytes: u64,
    first_ms: u64,
    last_ms: u64,
}

// SAFETY: integers only; all zero is an (unused) entry.
unsafe impl Zeroable for Entry {}

impl Packed {
    #[inline(always)]
    fn new(key: &FlowKey) -> Packed {
        Packed {
            k: [
                key.src_ip as u64,
                (key.src_ip >> 64) as u64,
                key.dst_ip as u64,
                (key.dst_ip >> 64) as u64,
                u64::from(key.src_port)
                    | u64::from(key.dst_port) << 16
                    | u64::from(key.in_port) << 32
                    | u64::from(key.vlan) << 48,
            ],
            m: u64::from(key.proto) | u64::from(key.tos) << 8 | u64::from(key.family) << 16,
        }
    }
}

impl Entry {
    #[inline(always)]
    fn matches(&self, p: &Packed) -> bool {
        self.k == p.k && self.meta & KEY_META == p.m
    }

    fn packed(&self) -> Packed {
        Packed {
            k: self.k,
            m: self.meta & KEY_META,
        }
    }

    fn key(&self) -> FlowKey {
        let k = &self.k;
        FlowKey {
            src_ip: u128::from(k[0]) | u128::from(k[1]) << 64,
            dst_ip: u128::from(k[2]) | u128::from(k[3]) << 64,
            src_port: k[4] as u16,
            dst_port: (k[4] >> 16) as u16,
            in_port: (k[4] >> 32) as u16,
            vlan: (k[4] >> 48) as u16,
            proto: self.meta as u8,
            tos: (self.meta >> 8) as u8,
            family: (self.meta >> 16) as u8,
        }
    }

    fn record(&self, end: FlowEnd) -> FlowRecord {
        FlowRecord {
            key: self.key(),
            packets: self.packets,
            bytes: self.bytes,
            first_ms: self.first_ms,
            last_ms: self.last_ms,
            tcp_flags: (self.meta >> 24) as u8,
            out_port: (self.meta >> 32) as u16,
            end,
        }
    }
}

#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a).wrapping_mul(u128::from(b));
    (p as u64) ^ ((p >> 64) as u64)
}

/// Per-packet flow accounting table of one worker. See the module docs.
pub struct FlowCache {
    /// `capacity` entries; the live ones are `entries[..len]`.
    entries: HugeArray<Entry>,
    len: usize,
    /// `tag << 32 | (entry + 1)`; 0 = empty.
    index: HugeArray<u64>,
    mask: usize,
    /// `32 - log2(index.len())`: home = tag >> shift.
    shift: u32,
    seed: [u64; 4],
    /// Next entry the sweep looks at.
    cursor: usize,
}

impl FlowCache {
    /// A cache holding up to `capacity` flows, rounded up to a power of
    /// two (at least [`MIN_CAPACITY`], at most 2^31). All memory is
    /// reserved here.
    pub fn new(capacity: usize) -> FlowCache {
        use std::hash::{BuildHasher, RandomState};
        let cap = capacity.clamp(MIN_CAPACITY, 1 << 31).next_power_of_two();
        let slots = cap * 2;
        let rs = RandomState::new();
        let seed = [
            rs.hash_one(1u64) | 1,
            rs.hash_one(2u64) | 1,
            rs.hash_one(3u64) | 1,
            rs.hash_one(4u64) | 1,
        ];
        FlowCache {
            entries: HugeArray::with_backing(cap, Backing::HugeOnTouch),
            len: 0,
            index: HugeArray::with_backing(slots, Backing::HugeOnTouch),
            mask: slots - 1,
            shift: 32 - slots.trailing_zeros(),
            seed,
            cursor: 0,
        }
    }

    #[inline(always)]
    fn hash(&self, p: &Packed) -> u32 {
        let s = &self.seed;
        let a = fold(p.k[0] ^ s[0], p.k[1] ^ s[1]);
        let b = fold(p.k[2] ^ s[2], p.k[3] ^ s[3]);
        let c = fold(p.k[4] ^ s[1], p.m ^ s[0]);
        let h = fold(a ^ s[3], b ^ c ^ s[2]);
        (h >> 32) as u32
    }

    #[inline(always)]
    fn home(&self, tag: u32) -> usize {
        // shift <= 27 (at least 32 slots).
        (tag >> self.shift) as usize
    }

    #[inline(always)]
    fn dist(&self, pos: usize, slot: u64) -> usize {
        pos.wrapping_sub(self.home((slot >> 32) as u32)) & self.mask
    }

    /// Accounts one packet of `bytes` bytes. Returns `false` when the flow
    /// is new and there is no room for it (cache full, or its probe
    /// sequence too long); the caller counts those packets.
    #[inline]
    pub fn update(
        &mut self,
        key: &FlowKey,
        bytes: u32,
        tcp_flags: u8,
        out_port: u16,
        now_ms: u64,
    ) -> bool {
        let p = Packed::new(key);
        let tag = self.hash(&p);
        let mut pos = self.home(tag);
        let mut d = 0;
        loop {
            let s = self.index[pos];
            if s == 0 {
                break;
            }
            if (s >> 32) as u32 == tag {
                let e = &mut self.entries[(s as u32 - 1) as usize];
                if e.matches(&p) {
                    if e.packets == 0 {
                        e.first_ms = now_ms;
                    }
                    e.packets += 1;
                    e.bytes += u64::from(bytes);
                    e.last_ms = now_ms;
                    e.meta = (e.meta & (KEY_META | 0xff << 24))
                        | u64::from(tcp_flags) << 24
                        | u64::from(out_port) << 32;
                    return true;
                }
            }
            if self.dist(pos, s) < d {
                break; // Robin Hood: the key would have been here.
            }
            d += 1;
            pos = (pos + 1) & self.mask;
            if d > MAX_PROBE {
                return false;
            }
        }
        self.insert(pos, d, tag, p, bytes, tcp_flags, out_port, now_ms)
    }

    /// Inserts a new flow whose Robin Hood position is `pos` at distance
    /// `d` from its home, shifting the run after it by one slot.
    #[allow(clippy::too_many_arguments)]
    #[cold]
    fn insert(
        &mut self,
        pos: usize,
        d: usize,
        tag: u32,
        p: Packed,
        bytes: u32,
        tcp_flags: u8,
        out_port: u16,
        now_ms: u64,
    ) -> bool {
        if self.len == self.entries.len() {
            return false;
        }
        // Find the end of the run; every entry in it moves one slot on.
        let mut end = pos;
        loop {
            let s = self.index[end];
            if s == 0 {
                break;
            }
            if self.dist(end, s) + 1 > MAX_PROBE {
                return false;
            }
            end = (end + 1) & self.mask;
        }
        while end != pos {
            let prev = end.wrapping_sub(1) & self.mask;
            self.index[end] = self.index[prev];
            end = prev;
        }
        debug_assert!(d <= MAX_PROBE);
        let n = self.len;
        self.entries[n] = Entry {
            k: p.k,
            meta: p.m | u64::from(tcp_flags) << 24 | u64::from(out_port) << 32,
            packets: 1,
            bytes: u64::from(bytes),
            first_ms: now_ms,
            last_ms: now_ms,
        };
        self.len = n + 1;
        self.index[pos] = u64::from(tag) << 32 | (n as u64 + 1);
        true
    }

    /// Index slot pointing at entry `i`.
    fn slot_of(&self, i: usize) -> usize {
        let tag = self.hash(&self.entries[i].packed());
        let want = u64::from(tag) << 32 | (i as u64 + 1);
        let mut pos = self.home(tag);
        loop {
            if self.index[pos] == want {
                return pos;
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Removes entry `i`: backward-shift deletion in the index, then the
    /// last entry moves into the hole.
    fn remove(&mut self, i: usize) {
        let mut pos = self.slot_of(i);
        loop {
            let next = (pos + 1) & self.mask;
            let s = self.index[next];
            if s == 0 || self.dist(next, s) == 0 {
                self.index[pos] = 0;
                break;
            }
            self.index[pos] = s;
            pos = next;
        }
        let last = self.len - 1;
        if i != last {
            let slot = self.slot_of(last);
            self.index[slot] = (self.index[slot] & !0xffff_ffff) | (i as u64 + 1);
            self.entries.swap(i, last);
        }
        self.len = last;
    }

    /// Incremental expiry: looks at up to `budget` flows from where the
    /// previous call stopped (wrapping around). A flow idle for at least
    /// `inactive_ms` is emitted with [`FlowEnd::Inactive`] and removed; a
    /// flow whose record period began at least `active_ms` ago is emitted
    /// with [`FlowEnd::Active`] and stays, its counts reset to zero (the
    /// next packet starts a new period; a flow with no packets since is
    /// removed silently once idle). When `emit` returns `false` (queue
    /// full) the flow is kept as it was and the sweep stops there; the next
    /// sweep starts with it. Returns the number of flows looked at.
    pub fn sweep(
        &mut self,
        now_ms: u64,
        active_ms: u64,
        inactive_ms: u64,
        budget: usize,
        emit: &mut dyn FnMut(FlowRecord) -> bool,
    ) -> usize {
        let mut examined = 0;
        while examined < budget && self.len > 0 {
            if self.cursor >= self.len {
                self.cursor = 0;
            }
            let i = self.cursor;
            examined += 1;
            let e = &self.entries[i];
            if now_ms.saturating_sub(e.last_ms) >= inactive_ms {
                if e.packets != 0 && !emit(e.record(FlowEnd::Inactive)) {
                    break;
                }
                // The last entry moves to `i`: look at `i` again.
                self.remove(i);
                continue;
            }
            if e.packets != 0 && now_ms.saturating_sub(e.first_ms) >= active_ms {
                if !emit(e.record(FlowEnd::Active)) {
                    break;
                }
                let e = &mut self.entries[i];
                e.packets = 0;
                e.bytes = 0;
                e.meta &= !(0xff << 24);
            }
            self.cursor = i + 1;
        }
        examined
    }

    /// Emits every flow with packets in its current period
    /// ([`FlowEnd::Forced`]) and empties the cache. Records `emit` refuses
    /// are dropped (the caller counts them).
    pub fn flush(&mut self, emit: &mut dyn FnMut(FlowRecord) -> bool) {
        for e in &self.entries[..self.len] {
            if e.packets != 0 {
                emit(e.record(FlowEnd::Forced));
            }
        }
        self.len = 0;
        self.index.fill(0);
        self.cursor = 0;
    }

    /// Flows held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most flows the cache holds.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Bytes reserved (entries and index).
    pub fn memory_bytes(&self) -> usize {
        self.entries.bytes() + self.index.bytes() + std::mem::size_of::<FlowCache>()
    }

    /// Bytes of the entries and index on huge pages now (see
    /// [`HugeArray::huge_backed_bytes`]; reads `/proc/self/smaps`, so for
    /// `show`, not per packet).
    pub fn huge_backed_bytes(&self) -> Option<usize> {
        crate::huge::huge_bytes_in(&self.advised_ranges())
    }

    /// The arrays' ranges advised for huge pages, for
    /// [`crate::huge::huge_bytes_in`] on a thread that may read `/proc`.
    pub fn advised_ranges(&self) -> Vec<(usize, usize)> {
        [self.entries.advised_range(), self.index.advised_range()]
            .into_iter()
            .flatten()
            .collect()
    }

    /// The `n` flows with the most bytes in their current period, largest
    /// first, into `out` (cleared first). Scans the whole cache.
    pub fn top(&self, n: usize, out: &mut Vec<FlowRecord>) {
        out.clear();
        if n == 0 {
            return;
        }
        let mut heap = BinaryHeap::with_capacity(n + 1);
        for (i, e) in self.entries[..self.len].iter().enumerate() {
            let item = std::cmp::Reverse((e.bytes, e.packets, usize::MAX - i));
            if heap.len() < n {
                heap.push(item);
            } else if heap.peek().is_some_and(|m| item < *m) {
                heap.pop();
                heap.push(item);
            }
        }
        let mut v = heap.into_vec();
        v.sort_unstable();
        out.extend(
            v.iter()
                .map(|r| self.entries[usize::MAX - r.0 .2].record(FlowEnd::Forced)),
        );
    }

    /// Longest distance of any flow from its home slot (tests, docs).
    pub fn max_probe(&self) -> usize {
        let mut m = 0;
        for (pos, &s) in self.index.iter().enumerate() {
            if s != 0 {
                m = m.max(self.dist(pos, s));
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> FlowKey {
        FlowKey {
            src_ip: u128::from(0x0a00_0000 | i),
            dst_ip: 0xc0a8_0001,
            src_port: 1024 + (i % 50_000) as u16,
            dst_port: 80,
            proto: 6,
            tos: 0,
            family: 4,
            in_port: 1,
            vlan: 10,
        }
    }

    fn collect(v: &mut Vec<FlowRecord>) -> impl FnMut(FlowRecord) -> bool + '_ {
        move |r| {
            v.push(r);
            true
        }
    }

    /// A big cache's arrays are advised for 2 MB pages and 2 MB-aligned;
    /// one of under 2 MB is not. Huge backing is reported, not required.
    #[test]
    fn big_cache_on_huge_pages() {
        let mut c = FlowCache::new(1 << 16);
        // Entries 5 MiB (advised), index 1 MiB (not).
        let r = c.advised_ranges();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0 % crate::huge::HUGE_PAGE, 0);
        assert_eq!(r[0].1, 6 << 20);
        for i in 0..60_000 {
            assert!(c.update(&key(i), 64, 0, 0, 0));
        }
        let h = c.huge_backed_bytes().unwrap();
        assert!(h <= 6 << 20, "{h}");
        eprintln!("60,000 flows: {} MiB on 2 MB pages", h >> 20);
        assert!(FlowCache::new(1000).advised_ranges().is_empty());
    }

    #[test]
    fn entry_is_80_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 80);
        let c = FlowCache::new(1000);
        assert_eq!(c.capacity(), 1024);
        assert!(c.memory_bytes() < 1024 * 97);
    }

    #[test]
    fn key_round_trips() {
        let k = FlowKey {
            src_ip: 0x2001_0db8_0000_0000_0000_0000_0000_0001,
            dst_ip: u128::MAX - 5,
            src_port: 65535,
            dst_port: 1,
            proto: 17,
            tos: 0xb8,
            family: 6,
            in_port: 4000,
            vlan: 4094,
        };
        let mut c = FlowCache::new(16);
        assert!(c.update(&k, 100, 0, 7, 5));
        let mut v = Vec::new();
        c.top(1, &mut v);
        assert_eq!(v[0].key, k);
        assert_eq!(v[0].out_port, 7);
    }

    #[test]
    fn insert_and_update() {
        let mut c = FlowCache::new(64);
        assert!(c.is_empty());
        assert!(c.update(&key(1), 100, 0x02, 3, 1000));
        assert!(c.update(&key(1), 200, 0x10, 4, 1500));
        assert!(c.update(&key(2), 60, 0x02, 3, 1600));
        // Differs only in tos / vlan / in_port: distinct flows.
        assert!(c.update(&FlowKey { tos: 4, ..key(1) }, 1, 0, 3, 1600));
        assert!(c.update(&FlowKey { vlan: 11, ..key(1) }, 1, 0, 3, 1600));
        assert!(c.update(
            &FlowKey {
                in_port: 2,
                ..key(1)
            },
            1,
            0,
            3,
            1600
        ));
        assert_eq!(c.len(), 5);
        let mut v = Vec::new();
        c.top(10, &mut v);
        assert_eq!(v.len(), 5);
        let r = v[0];
        assert_eq!(r.key, key(1));
        assert_eq!((r.packets, r.bytes), (2, 300));
        assert_eq!((r.first_ms, r.last_ms), (1000, 1500));
        assert_eq!(r.tcp_flags, 0x12);
        assert_eq!(r.out_port, 4);
        assert_eq!(v[1].key, key(2));
    }

    #[test]
    fn inactive_expiry_removes() {
        let mut c = FlowCache::new(64);
        c.update(&key(1), 100, 0, 0, 1000);
        c.update(&key(2), 100, 0, 0, 5000);
        let mut out = Vec::new();
        // At 15,999 nothing is idle for 15 s yet.
        c.sweep(15_999, 60_000, 15_000, 100, &mut collect(&mut out));
        assert!(out.is_empty());
        c.sweep(16_000, 60_000, 15_000, 100, &mut collect(&mut out));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].key, key(1));
        assert_eq!(out[0].end, FlowEnd::Inactive);
        assert_eq!(c.len(), 1);
        c.sweep(20_000, 60_000, 15_000, 100, &mut collect(&mut out));
        assert_eq!(out.len(), 2);
        assert!(c.is_empty());
        // Gone: the next packet starts a new flow.
        assert!(c.update(&key(1), 7, 0, 0, 30_000));
        c.top(1, &mut out);
        assert_eq!(
            (out[0].packets, out[0].bytes, out[0].first_ms),
            (1, 7, 30_000)
        );
    }

    #[test]
    fn active_expiry_starts_new_period() {
        let mut c = FlowCache::new(64);
        for t in 0..=60 {
            c.update(&key(1), 10, 0, 0, t * 1000);
        }
        let mut out = Vec::new();
        c.sweep(60_000, 60_000, 15_000, 100, &mut collect(&mut out));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].end, FlowEnd::Active);
        assert_eq!((out[0].packets, out[0].bytes), (61, 610));
        assert_eq!((out[0].first_ms, out[0].last_ms), (0, 60_000));
        assert_eq!(c.len(), 1);
        // Nothing more to report until packets arrive.
        c.sweep(61_000, 60_000, 15_000, 100, &mut collect(&mut out));
        assert_eq!(out.len(), 1);
        c.update(&key(1), 5, 0, 0, 62_000);
        c.sweep(122_000, 60_000, 100_000, 100, &mut collect(&mut out));
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].end, FlowEnd::Active);
        assert_eq!((out[1].packets, out[1].bytes), (1, 5));
        assert_eq!(out[1].first_ms, 62_000);
        // Idle with an empty period: removed without a record.
        c.sweep(300_000, 60_000, 15_000, 100, &mut collect(&mut out));
        assert_eq!(out.len(), 2);
        assert!(c.is_empty());
    }

    #[test]
    fn full_queue_keeps_flow() {
        let mut c = FlowCache::new(64);
        c.update(&key(1), 100, 0, 0, 0);
        c.update(&key(2), 100, 0, 0, 0);
        let mut n = 0;
        let examined = c.sweep(100_000, 60_000, 15_000, 100, &mut |_| {
            n += 1;
            false
        });
        assert_eq!((n, examined), (1, 1));
        assert_eq!(c.len(), 2);
        let mut out = Vec::new();
        c.sweep(100_000, 60_000, 15_000, 100, &mut collect(&mut out));
        assert_eq!(out.len(), 2);
        assert!(c.is_empty());
    }

    #[test]
    fn full_cache_refuses_new_flows() {
        let mut c = FlowCache::new(16);
        for i in 0..16 {
            assert!(c.update(&key(i), 1, 0, 0, 0), "flow {i}");
        }
        assert!(!c.update(&key(100), 1, 0, 0, 0));
        assert_eq!(c.len(), 16);
        // Known flows still count.
        assert!(c.update(&key(3), 1, 0, 0, 1));
        // Room again after expiry.
        let mut out = Vec::new();
        c.update(&key(5), 1, 0, 0, 20_000);
        c.sweep(20_000, 60_000, 15_000, 100, &mut collect(&mut out));
        assert_eq!(out.len(), 15);
        assert!(c.update(&key(100), 1, 0, 0, 20_000));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn sweep_resumes_where_it_stopped() {
        let mut c = FlowCache::new(1024);
        for i in 0..100 {
            c.update(&key(i), 1, 0, 0, 0);
        }
        let mut out = Vec::new();
        // Nothing expires: budgets walk the cache in order.
        let mut seen = 0;
        for _ in 0..10 {
            seen += c.sweep(1, 60_000, 15_000, 30, &mut collect(&mut out));
        }
        assert_eq!(seen, 300);
        assert_eq!(c.cursor % c.len(), 0);
        // Everything idle: 10 per call, each call new flows.
        for n in 1..=10 {
            assert_eq!(
                c.sweep(50_000, 60_000, 15_000, 10, &mut collect(&mut out)),
                10
            );
            assert_eq!(out.len(), 10 * n);
            assert_eq!(c.len(), 100 - 10 * n);
        }
        let mut keys: Vec<_> = out.iter().map(|r| r.key.src_ip).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 100);
        assert_eq!(
            c.sweep(50_000, 60_000, 15_000, 10, &mut collect(&mut out)),
            0
        );
    }

    #[test]
    fn sweep_mixed_keeps_the_rest_findable() {
        let mut c = FlowCache::new(4096);
        for i in 0..3000 {
            c.update(&key(i), i, 0, 0, u64::from(i % 2) * 100_000);
        }
        let mut out = Vec::new();
        // Even flows (last seen at 0) expire.
        c.sweep(100_000, 1_000_000, 50_000, 2000, &mut collect(&mut out));
        c.sweep(100_000, 1_000_000, 50_000, 2000, &mut collect(&mut out));
        assert_eq!(out.len(), 1500);
        assert!(out.iter().all(|r| r.key.src_ip % 2 == 0));
        assert_eq!(c.len(), 1500);
        for i in (1..3000).step_by(2) {
            let before = c.len();
            c.update(&key(i), 1, 0, 0, 100_001);
            assert_eq!(c.len(), before, "odd flow {i} lost");
        }
        let mut top = Vec::new();
        c.top(1, &mut top);
        assert_eq!(top[0].key, key(2999));
        assert_eq!(top[0].packets, 2);
    }

    #[test]
    fn flush_emits_everything() {
        let mut c = FlowCache::new(256);
        for i in 0..200 {
            c.update(&key(i), 1, 0, 0, 0);
        }
        let mut out = Vec::new();
        c.flush(&mut collect(&mut out));
        assert_eq!(out.len(), 200);
        assert!(out.iter().all(|r| r.end == FlowEnd::Forced));
        assert!(c.is_empty());
        assert!(c.update(&key(1), 1, 0, 0, 0));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn top_n() {
        let mut c = FlowCache::new(1024);
        for i in 0..500 {
            c.update(&key(i), (i * 7919) % 1000 + 1, 0, 0, 0);
        }
        let mut all = Vec::new();
        c.top(1000, &mut all);
        assert_eq!(all.len(), 500);
        let mut out = vec![all[0]; 3];
        c.top(10, &mut out);
        assert_eq!(out.len(), 10);
        assert!(out.windows(2).all(|w| w[0].bytes >= w[1].bytes));
        assert_eq!(&out[..], &all[..10]);
        let mut bytes: Vec<_> = all.iter().map(|r| r.bytes).collect();
        bytes.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(out[0].bytes, bytes[0]);
        assert_eq!(out[9].bytes, bytes[9]);
        c.top(0, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn random_churn_matches_model() {
        use std::collections::HashMap;
        let mut c = FlowCache::new(2048);
        let mut model: HashMap<FlowKey, (u64, u64)> = HashMap::new();
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut out = Vec::new();
        for step in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = key((x % 3000) as u32);
            if c.update(&k, 10, 0, 0, step) {
                let m = model.entry(k).or_default();
                m.0 += 1;
                m.1 = step;
            } else {
                assert!(!model.contains_key(&k) && c.len() == c.capacity());
            }
            if step % 64 == 0 {
                out.clear();
                c.sweep(step, u64::MAX, 3000, 50, &mut collect(&mut out));
                for r in &out {
                    let m = model.remove(&r.key).expect("emitted unknown flow");
                    assert_eq!(m.0, r.packets);
                    assert_eq!(m.1, r.last_ms);
                    assert!(step - r.last_ms >= 3000);
                }
            }
            assert_eq!(c.len(), model.len());
        }
        assert!(c.max_probe() <= MAX_PROBE);
    }

    /// 1,000,000 distinct flows at once (release builds; takes ~1 s).
    #[test]
    #[cfg_attr(debug_assertions, ignore = "release only")]
    fn one_million_flows() {
        let mut c = FlowCache::new(1_000_000);
        assert_eq!(c.capacity(), 1 << 20);
        for i in 0..1_000_000u32 {
            let k = FlowKey {
                src_ip: u128::from(0x0a00_0000 + i),
                dst_port: (i % 7) as u16,
                ..key(0)
            };
            assert!(c.update(&k, 64, 0, 0, 0), "flow {i}");
        }
        assert_eq!(c.len(), 1_000_000);
        assert!(c.max_probe() <= MAX_PROBE, "probe {}", c.max_probe());
        eprintln!(
            "1M flows: max probe {}, memory {:.1} MiB",
            c.max_probe(),
            c.memory_bytes() as f64 / 1048576.0
        );
        for i in (0..1_000_000u32).step_by(997) {
            let k = FlowKey {
                src_ip: u128::from(0x0a00_0000 + i),
                dst_port: (i % 7) as u16,
                ..key(0)
            };
            c.update(&k, 64, 0, 0, 1);
        }
        assert_eq!(c.len(), 1_000_000);
        let mut n = 0;
        while !c.is_empty() {
            c.sweep(100_000, 1_000_000, 15_000, 65_536, &mut |r| {
                assert!(r.packets == 1 || r.packets == 2);
                n += 1;
                true
            });
        }
        assert_eq!(n, 1_000_000);
    }
}
