//! The MAC address table: one writer (the control plane's learner), any
//! number of lock-free readers (the workers).
//!
//! Open addressing with linear probing over a power-of-two array of slots,
//! each two 64-bit atomics: the key (VLAN and MAC, with a valid bit) and the
//! value (port, flags, last-seen second). Readers never wait: they load the
//! key, then the value, then the key again, and retry if the slot changed
//! under them. The writer writes the value before the key (release order),
//! so a reader that sees a key sees its value. Deleted slots become
//! tombstones that later inserts reuse; the control plane rebuilds the table
//! when tombstones pile up ([`MacTable::rebuilt`]).
//!
//! Workers may refresh an entry's last-seen second with a compare-and-swap
//! ([`MacTable::touch`]); a concurrent writer update simply wins.
//!
//! Capacity is fixed at creation; the array has at least twice as many slots
//! as entries, so probe chains stay short.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const VALID: u64 = 1 << 63;
const EMPTY: u64 = 0;
const TOMBSTONE: u64 = 1 << 62;

/// VLAN id (12 bits) and MAC address (48 bits) packed in a u64.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct MacKey(pub u64);

impl MacKey {
    #[inline]
    pub fn new(vlan: u16, mac: [u8; 6]) -> MacKey {
        MacKey(((vlan as u64 & 0xfff) << 48) | mac_to_u64(mac))
    }

    /// Build from the 6 bytes at `b[0..6]` (e.g. a frame's address field).
    #[inline]
    pub fn from_slice(vlan: u16, b: &[u8]) -> MacKey {
        MacKey::new(vlan, [b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    #[inline]
    pub fn vlan(self) -> u16 {
        ((self.0 >> 48) & 0xfff) as u16
    }

    #[inline]
    pub fn mac(self) -> [u8; 6] {
        let b = self.0.to_be_bytes();
        [b[2], b[3], b[4], b[5], b[6], b[7]]
    }
}

#[inline]
fn mac_to_u64(m: [u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]])
}

/// A table entry as seen by a reader.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MacEntry {
    pub port: u16,
    pub is_static: bool,
    /// Second (of the switch's coarse clock) the address was last seen.
    pub seen: u32,
}

const F_STATIC: u64 = 1 << 16;

#[inline]
fn encode(e: MacEntry) -> u64 {
    e.port as u64 | if e.is_static { F_STATIC } else { 0 } | (e.seen as u64) << 32
}

#[inline]
fn decode(v: u64) -> MacEntry {
    MacEntry {
        port: v as u16,
        is_static: v & F_STATIC != 0,
        seen: (v >> 32) as u32,
    }
}

#[repr(C, align(16))]
struct Slot {
    key: AtomicU64,
    val: AtomicU64,
}

// SAFETY: atomics only; all zero is an empty slot (key EMPTY).
unsafe impl crate::huge::Zeroable for Slot {}

/// What a write did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MacWriteOutcome {
    /// A new entry.
    Inserted,
    /// The entry existed on another port and now points to the new one.
    Moved { from: u16 },
    /// The entry existed on the same port; only its age was refreshed.
    Refreshed,
    /// No room: the table holds its capacity.
    Full,
}

pub struct MacTable {
    /// 2 MB pages (committed as touched) from 2 MiB of slots on, i.e. a
    /// capacity of 65,536 MACs; smaller tables (tests, small configs) on
    /// 4 KB pages (`tables::huge`).
    slots: crate::huge::HugeArray<Slot>,
    mask: usize,
    capacity: usize,
    /// Writer-side counts (single writer; atomics so readers may look).
    live: AtomicUsize,
    tombstones: AtomicUsize,
}

#[inline]
fn hash(k: u64) -> u64 {
    // Fibonacci hashing spreads sequential MACs (the common test pattern and
    // the common vendor-OUI pattern) over the whole array.
    let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 29)
}

impl MacTable {
    /// A table that holds `capacity` entries.
    pub fn new(capacity: usize) -> MacTable {
        let capacity = capacity.max(1);
        let n = (capacity * 2).next_power_of_two().max(64);
        // Zeroed: every key EMPTY.
        let slots = crate::huge::HugeArray::with_backing(n, crate::huge::Backing::HugeOnTouch);
        MacTable {
            slots,
            mask: n - 1,
            capacity,
            live: AtomicUsize::new(0),
            tombstones: AtomicUsize::new(0),
        }
    }

    /// Bytes of the slot array, and of it on huge pages now (reads
    /// `/proc/self/smaps`: not for the packet path).
    pub fn memory(&self) -> (usize, Option<usize>) {
        (self.slots.bytes(), self.slots.huge_backed_bytes())
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn tombstones(&self) -> usize {
        self.tombstones.load(Ordering::Relaxed)
    }

    /// Whether a rebuild would pay off (tombstones make misses probe long).
    pub fn needs_rebuild(&self) -> bool {
        self.tombstones() > self.slots.len() / 8
    }

    /// Hint the CPU to load the slot where `key` starts its probe, so a
    /// batch can overlap its cache misses (issue for every frame first,
    /// then look up).
    #[inline]
    pub fn prefetch(&self, key: MacKey) {
        let i = hash(key.0) as usize & self.mask;
        if let Some(s) = self.slots.get(i) {
            crate::prefetch(s);
        }
    }

    /// Look up `key` (reader side, lock-free, wait-free unless a writer
    /// keeps changing the very slot being read).
    #[inline]
    pub fn lookup(&self, key: MacKey) -> Option<MacEntry> {
        self.find(key).map(|(_, v)| decode(v))
    }

    #[inline]
    fn find(&self, key: MacKey) -> Option<(usize, u64)> {
        let want = key.0 | VALID;
        let mut i = hash(key.0) as usize & self.mask;
        for _ in 0..=self.mask {
            let slot = &self.slots[i];
            let k = slot.key.load(Ordering::Acquire);
            if k == want {
                let v = slot.val.load(Ordering::Acquire);
                if slot.key.load(Ordering::Acquire) == want {
                    return Some((i, v));
                }
                // The slot changed while we read it: look again from here.
                continue;
            }
            if k == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// Refresh an entry's last-seen second if it still maps to `port`
    /// (reader side; one compare-and-swap, at most once a second per entry).
    /// Returns false if the entry is gone or points elsewhere.
    #[inline]
    pub fn touch(&self, key: MacKey, port: u16, now: u32) -> bool {
        let Some((i, v)) = self.find(key) else {
            return false;
        };
        let e = decode(v);
        if e.port != port {
            return false;
        }
        if e.seen != now && !e.is_static {
            let nv = encode(MacEntry { seen: now, ..e });
            let _ = self.slots[i]
                .val
                .compare_exchange(v, nv, Ordering::AcqRel, Ordering::Relaxed);
        }
        true
    }

    /// Insert or update (writer side only: one thread at a time).
    pub fn upsert(&self, key: MacKey, entry: MacEntry) -> MacWriteOutcome {
        if let Some((i, v)) = self.find(key) {
            let old = decode(v);
            self.slots[i].val.store(encode(entry), Ordering::Release);
            return if old.port == entry.port {
                MacWriteOutcome::Refreshed
            } else {
                MacWriteOutcome::Moved { from: old.port }
            };
        }
        if self.len() >= self.capacity {
            return MacWriteOutcome::Full;
        }
        let want = key.0 | VALID;
        let mut i = hash(key.0) as usize & self.mask;
        loop {
            let k = self.slots[i].key.load(Ordering::Relaxed);
            if k == EMPTY || k == TOMBSTONE {
                self.slots[i].val.store(encode(entry), Ordering::Release);
                self.slots[i].key.store(want, Ordering::Release);
                if k == TOMBSTONE {
                    self.tombstones.fetch_sub(1, Ordering::Relaxed);
                }
                self.live.fetch_add(1, Ordering::Relaxed);
                return MacWriteOutcome::Inserted;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Remove `key` (writer side). Returns the removed entry.
    pub fn remove(&self, key: MacKey) -> Option<MacEntry> {
        let (i, v) = self.find(key)?;
        self.slots[i].key.store(TOMBSTONE, Ordering::Release);
        self.live.fetch_sub(1, Ordering::Relaxed);
        self.tombstones.fetch_add(1, Ordering::Relaxed);
        Some(decode(v))
    }

    /// Remove every entry for which `pred` is true (writer side); calls
    /// `removed` for each. Used by aging and `clear mac address-table`.
    pub fn remove_where(
        &self,
        mut pred: impl FnMut(MacKey, MacEntry) -> bool,
        mut removed: impl FnMut(MacKey, MacEntry),
    ) -> usize {
        let mut n = 0;
        for slot in self.slots.iter() {
            let k = slot.key.load(Ordering::Acquire);
            if k & VALID == 0 {
                continue;
            }
            let key = MacKey(k & !VALID);
            let e = decode(slot.val.load(Ordering::Acquire));
            if pred(key, e) {
                slot.key.store(TOMBSTONE, Ordering::Release);
                self.live.fetch_sub(1, Ordering::Relaxed);
                self.tombstones.fetch_add(1, Ordering::Relaxed);
                removed(key, e);
                n += 1;
            }
        }
        n
    }

    /// Visit every entry (any thread; a snapshot that may miss concurrent
    /// writes, like `show` on any switch).
    pub fn for_each(&self, mut f: impl FnMut(MacKey, MacEntry)) {
        for slot in self.slots.iter() {
            let k = slot.key.load(Ordering::Acquire);
            if k & VALID != 0 {
                f(MacKey(k & !VALID), decode(slot.val.load(Ordering::Acquire)));
            }
        }
    }

    /// A copy without tombstones (writer side), to be published in place of
    /// this one.
    pub fn rebuilt(&self, capacity: usize) -> MacTable {
        let t = MacTable::new(capacity);
        self.for_each(|k, e| {
            t.upsert(k, e);
        });
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metro table (90,000 MACs: 262,144 slots, 4 MiB) is advised for
    /// 2 MB pages and 2 MB-aligned, and works; a small one (1,024 MACs,
    /// 64 KiB) is not advised.
    #[test]
    fn big_table_on_huge_pages() {
        let big = MacTable::new(90_000);
        assert_eq!(big.memory().0, 262_144 * 16);
        assert!(big.slots.advised());
        assert_eq!(big.slots.as_ptr() as usize % crate::huge::HUGE_PAGE, 0);
        for i in 0..1000u64 {
            let e = MacEntry {
                port: (i % 7) as u16,
                is_static: false,
                seen: 1,
            };
            assert_eq!(
                big.upsert(MacKey(0x0200_0000_0000 | i), e),
                MacWriteOutcome::Inserted
            );
        }
        assert_eq!(big.len(), 1000);
        let got = big.lookup(MacKey(0x0200_0000_0000 | 999));
        assert_eq!(got.map(|e| e.port), Some(999 % 7));
        let small = MacTable::new(1024);
        assert!(!small.slots.advised());
        assert_eq!(small.memory().1, Some(0));
    }
    use std::collections::HashMap;

    fn mac(i: u32) -> [u8; 6] {
        let b = i.to_be_bytes();
        [0x02, 0, b[0], b[1], b[2], b[3]]
    }

    fn e(port: u16) -> MacEntry {
        MacEntry {
            port,
            is_static: false,
            seen: 0,
        }
    }

    #[test]
    fn key_round_trip() {
        let k = MacKey::new(4094, [0xde, 0xad, 0xbe, 0xef, 0x01, 0x02]);
        assert_eq!(k.vlan(), 4094);
        assert_eq!(k.mac(), [0xde, 0xad, 0xbe, 0xef, 0x01, 0x02]);
    }

    #[test]
    fn insert_move_refresh_full() {
        let t = MacTable::new(2);
        let a = MacKey::new(10, mac(1));
        assert_eq!(t.upsert(a, e(1)), MacWriteOutcome::Inserted);
        assert_eq!(t.upsert(a, e(1)), MacWriteOutcome::Refreshed);
        assert_eq!(t.upsert(a, e(2)), MacWriteOutcome::Moved { from: 1 });
        assert_eq!(t.lookup(a).unwrap().port, 2);
        // Same MAC in another VLAN is another entry.
        assert_eq!(
            t.upsert(MacKey::new(20, mac(1)), e(3)),
            MacWriteOutcome::Inserted
        );
        assert_eq!(
            t.upsert(MacKey::new(30, mac(1)), e(3)),
            MacWriteOutcome::Full
        );
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn touch_refreshes_only_matching_port() {
        let t = MacTable::new(8);
        let a = MacKey::new(1, mac(9));
        t.upsert(a, e(4));
        assert!(t.touch(a, 4, 77));
        assert_eq!(t.lookup(a).unwrap().seen, 77);
        assert!(!t.touch(a, 5, 78));
        assert_eq!(t.lookup(a).unwrap().seen, 77);
        assert!(!t.touch(MacKey::new(1, mac(10)), 4, 1));
    }

    /// Random operations against a HashMap reference model.
    #[test]
    fn matches_reference_model() {
        let t = MacTable::new(5000);
        let mut model: HashMap<MacKey, u16> = HashMap::new();
        let mut x: u64 = 0x1234_5678;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = MacKey::new((x % 3) as u16 + 1, mac((x >> 8) as u32 % 6000));
            let port = (x >> 40) as u16 % 8;
            match x % 5 {
                0..=2 => {
                    let r = t.upsert(k, e(port));
                    if r != MacWriteOutcome::Full {
                        model.insert(k, port);
                    } else {
                        assert!(model.len() >= 5000 && !model.contains_key(&k));
                    }
                }
                3 => assert_eq!(t.remove(k).map(|e| e.port), model.remove(&k)),
                _ => assert_eq!(t.lookup(k).map(|e| e.port), model.get(&k).copied()),
            }
            if step % 50_000 == 0 {
                let mut n = 0;
                t.for_each(|k, e| {
                    assert_eq!(model.get(&k), Some(&e.port));
                    n += 1;
                });
                assert_eq!(n, model.len());
            }
        }
        assert_eq!(t.len(), model.len());
        let r = t.rebuilt(5000);
        assert_eq!(r.tombstones(), 0);
        for (k, p) in &model {
            assert_eq!(r.lookup(*k).unwrap().port, *p);
        }
    }

    #[test]
    fn remove_where_counts() {
        let t = MacTable::new(100);
        for i in 0..50 {
            t.upsert(MacKey::new(if i % 2 == 0 { 10 } else { 20 }, mac(i)), e(1));
        }
        let mut seen = 0;
        let n = t.remove_where(|k, _| k.vlan() == 10, |_, _| seen += 1);
        assert_eq!((n, seen, t.len()), (25, 25, 25));
    }

    /// Readers running beside a writer never see a key with another key's
    /// value, and never miss a key that is present throughout.
    #[test]
    fn concurrent_readers_see_consistent_entries() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let t = Arc::new(MacTable::new(4096));
        let stable = MacKey::new(1, mac(0xffff));
        t.upsert(stable, e(7));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (t, stop) = (t.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut checks = 0u64;
                    // At least one full pass, however the threads are scheduled.
                    while checks == 0 || !stop.load(Ordering::Relaxed) {
                        assert_eq!(t.lookup(stable).unwrap().port, 7);
                        for i in 0..64u32 {
                            // The port written is always i % 251: any other
                            // value would be a torn read.
                            if let Some(en) = t.lookup(MacKey::new(2, mac(i))) {
                                assert_eq!(en.port, (i % 251) as u16);
                            }
                        }
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        for round in 0..2000u32 {
            for i in 0..64u32 {
                let k = MacKey::new(2, mac(i));
                if (i + round) % 3 == 0 {
                    t.remove(k);
                } else {
                    t.upsert(k, e((i % 251) as u16));
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    }
}
