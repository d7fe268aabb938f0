//! The previous IPv6 FIB structure, kept as the baseline the benchmark
//! compares [`crate::lpm6::Lpm6`] against (`cargo bench -p tables --bench
//! lpm`): a multibit trie with a 16-bit first level and uncompressed 8-bit
//! nodes (256 entries, 1 KiB each) below it.
//!
//! It is the same structure as [`crate::lpm4::Lpm4`] (DPDK's `rte_lpm6`
//! shape) with more levels, and shares its code: entries are `AtomicU32`s
//! (0 no route, bit 31 a node link, else next-hop id + 1); an insert
//! rewrites only the entries its prefix covers whose current prefix is not
//! longer; a removal rewrites the entries it wrote with the longest covering
//! prefix, and folds nodes that no longer hold anything longer than their
//! parent entry. Readers load links with `Acquire` (a plain `mov` on
//! x86-64) so a node is always seen filled; every entry changes by a
//! single atomic store, so each lookup returns the old or the new answer.
//! Folded nodes wait two [`Lpm6Stride::reclaim`] calls before reuse, as in
//! `lpm4` (see there for the grace-period contract).
//!
//! Why not binary search on prefix lengths over hash tables (Waldvogel):
//! its markers carry a precomputed best-matching prefix that an insert must
//! update under every covered marker, and a lock-free hash table with
//! 129-bit keys needs a seqlock per slot; lookups still cost ~5 hash probes
//! (one cache miss each) against 3–6 dependent node loads here for the /32–
//! /64 prefixes that make up the table. Figures in `docs/lpm.md`.
//!
//! A /48 below a new /40 costs 4 nodes (4 KiB) in the worst case; the pool
//! is fixed at creation and allocated zeroed, so untouched nodes cost no
//! memory.

use crate::lpm4::{LpmError, LpmStats, StrideTrie, PTR_BIT};
use std::sync::atomic::Ordering;

/// Default node pool of [`Lpm6Stride::new`]: 2^20 nodes, 1 GiB of address
/// space, used only as touched.
const LPM6_DEFAULT_NODES: u32 = 1 << 20;

/// The IPv6 FIB lookup structure. Share it (`Arc`) between the writer and
/// the workers: lookups never lock; updates serialize on an internal mutex
/// the workers never touch.
pub struct Lpm6Stride {
    t: StrideTrie,
}

impl Default for Lpm6Stride {
    fn default() -> Self {
        Lpm6Stride::new()
    }
}

impl Lpm6Stride {
    /// An empty table with the default node pool ([`LPM6_DEFAULT_NODES`]).
    pub fn new() -> Lpm6Stride {
        Lpm6Stride::with_nodes(LPM6_DEFAULT_NODES)
    }

    /// An empty table whose pool holds `nodes` 8-bit nodes (1 KiB each).
    pub fn with_nodes(nodes: u32) -> Lpm6Stride {
        Lpm6Stride {
            t: StrideTrie::new(16, 128, nodes, crate::huge::Backing::Small),
        }
    }

    /// Install or replace `addr/len → nh` (writer side). Bits of `addr`
    /// past `len` are ignored. Returns the value it replaced.
    pub fn insert(&self, addr: u128, len: u8, nh: u32) -> Result<Option<u32>, LpmError> {
        self.t.insert(addr, len as u32, nh)
    }

    /// Remove `addr/len` (writer side). Returns its value.
    pub fn remove(&self, addr: u128, len: u8) -> Option<u32> {
        self.t.remove(addr, len as u32)
    }

    /// The value installed for exactly `addr/len` (writer-side state).
    pub fn get(&self, addr: u128, len: u8) -> Option<u32> {
        self.t.get(addr, len as u32)
    }

    /// Number of prefixes installed.
    pub fn len(&self) -> usize {
        self.t.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Visit every prefix as `(addr, len, nh)`, in no particular order
    /// (takes the writer lock).
    pub fn for_each(&self, mut f: impl FnMut(u128, u8, u32)) {
        self.t.for_each(|k, len, v| f(k, len as u8, v));
    }

    /// Make nodes unlinked before the previous call reusable; returns how
    /// many. Between two calls every reader must have passed a quiescent
    /// point.
    pub fn reclaim(&self) -> usize {
        self.t.reclaim()
    }

    pub fn stats(&self) -> LpmStats {
        self.t.stats()
    }

    /// Longest-prefix match of `addr` (reader side: lock-free, wait-free).
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let root = &self.t.root;
        let i = (addr >> 112) as usize;
        debug_assert!(i < root.len());
        // SAFETY: the first level has 2^16 entries and `addr >> 112 < 2^16`.
        let mut e = unsafe { root.get_unchecked(i) }.load(Ordering::Acquire);
        let mut shift = 104u32;
        while e & PTR_BIT != 0 {
            let j = (((e & !PTR_BIT) as usize) << 8) | ((addr >> shift) as usize & 0xff);
            debug_assert!(j < self.t.nodes.len());
            // SAFETY: the writer only links node indices below the pool
            // capacity, so `j < nodes.len()`.
            e = unsafe { self.t.nodes.get_unchecked(j) }.load(Ordering::Acquire);
            // Nodes at the last level (bits 120..128) hold no links, so the
            // loop ends before the shift could wrap.
            shift = shift.wrapping_sub(8);
        }
        e.checked_sub(1)
    }

    /// Look up a batch: `out[i] = lookup(addrs[i])`. Panics if the slices'
    /// lengths differ.
    ///
    /// Lookups run 16 at a time in lockstep, one trie level per pass, so
    /// the cache misses of 16 independent lookups overlap instead of
    /// queueing behind each other's dependent loads (the benchmark shows
    /// the gain over calling [`Lpm6Stride::lookup`] in a loop).
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<u32>]) {
        assert_eq!(addrs.len(), out.len(), "lookup_batch: length mismatch");
        const LANES: usize = 16;
        for (a, o) in addrs.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let mut e = [0u32; LANES];
            for (e, &x) in e.iter_mut().zip(a) {
                *e = self.t.root[(x >> 112) as usize].load(Ordering::Acquire);
            }
            let mut shift = 104u32;
            loop {
                let mut more = false;
                for (e, &x) in e.iter_mut().zip(a) {
                    if *e & PTR_BIT != 0 {
                        let j = (((*e & !PTR_BIT) as usize) << 8) | ((x >> shift) as usize & 0xff);
                        *e = self.t.nodes[j].load(Ordering::Acquire);
                        more = true;
                    }
                }
                if !more {
                    break;
                }
                // Lanes at the last level hold no links: the loop ends
                // before the shift could wrap.
                shift = shift.wrapping_sub(8);
            }
            for (o, e) in o.iter_mut().zip(e) {
                *o = e.checked_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpm4::{mask128, MAX_NEXT_HOP};
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::sync::Arc;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn next128(&mut self) -> u128 {
            (self.next() as u128) << 64 | self.next() as u128
        }
    }

    /// The reference: a list of prefixes, longest match by linear scan.
    #[derive(Default)]
    struct Model(Vec<(u128, u8, u32)>);
    impl Model {
        fn insert(&mut self, a: u128, l: u8, nh: u32) -> Option<u32> {
            let a = a & mask128(l as u32);
            for p in &mut self.0 {
                if p.0 == a && p.1 == l {
                    return Some(std::mem::replace(&mut p.2, nh));
                }
            }
            self.0.push((a, l, nh));
            None
        }
        fn remove(&mut self, a: u128, l: u8) -> Option<u32> {
            let a = a & mask128(l as u32);
            let i = self.0.iter().position(|p| p.0 == a && p.1 == l)?;
            Some(self.0.swap_remove(i).2)
        }
        fn lookup(&self, x: u128) -> Option<u32> {
            self.0
                .iter()
                .filter(|p| x & mask128(p.1 as u32) == p.0)
                .max_by_key(|p| p.1)
                .map(|p| p.2)
        }
    }

    fn boundaries(a: u128, l: u8) -> [u128; 6] {
        let m = mask128(l as u32);
        let first = a & m;
        let last = first | !m;
        [
            first,
            last,
            first.wrapping_sub(1),
            last.wrapping_add(1),
            first.wrapping_add(1),
            last.wrapping_sub(1),
        ]
    }

    const DOC: u128 = 0x2001_0db8 << 96;

    #[test]
    fn basics_default_host_and_fallback() {
        let t = Lpm6Stride::with_nodes(64);
        assert_eq!(t.lookup(DOC), None);
        t.insert(0, 0, 1).unwrap();
        t.insert(DOC, 32, 2).unwrap();
        t.insert(DOC | 1, 128, 3).unwrap();
        t.insert(DOC | 0x1_0000 << 64, 48, 4).unwrap();
        t.insert(DOC | 0x1_0001 << 64, 64, 5).unwrap();
        assert_eq!(t.lookup(0x3000 << 112), Some(1));
        assert_eq!(t.lookup(DOC | 2), Some(2));
        assert_eq!(t.lookup(DOC | 1), Some(3));
        assert_eq!(t.lookup(DOC | 0x1_0000 << 64 | 9), Some(4));
        assert_eq!(t.lookup(DOC | 0x1_0001 << 64 | 9), Some(5));
        assert_eq!(t.get(DOC | 0xff, 32), Some(2));
        assert_eq!(t.remove(DOC | 1, 128), Some(3));
        assert_eq!(t.lookup(DOC | 1), Some(2));
        assert_eq!(t.remove(DOC, 32), Some(2));
        assert_eq!(t.lookup(DOC | 1), Some(1));
        assert_eq!(t.lookup(DOC | 0x1_0000 << 64), Some(4));
        t.remove(DOC | 0x1_0000 << 64, 48);
        t.remove(DOC | 0x1_0001 << 64, 64);
        // Every node folded away.
        assert_eq!(t.stats().nodes, 0);
        assert_eq!(t.remove(0, 0), Some(1));
        assert_eq!(t.lookup(DOC), None);
        assert!(t.is_empty());
        assert_eq!(t.insert(0, 129, 1), Err(LpmError::BadLength));
        assert_eq!(t.insert(0, 1, MAX_NEXT_HOP + 1), Err(LpmError::BadNextHop));
    }

    #[test]
    fn full_pool_changes_nothing() {
        // A /128 needs 14 nodes below the first level.
        let t = Lpm6Stride::with_nodes(14);
        t.insert(DOC | 5, 128, 1).unwrap();
        t.insert(DOC | 6, 128, 2).unwrap();
        assert_eq!(t.insert(DOC | 1 << 64, 128, 3), Err(LpmError::Full));
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup(DOC | 1 << 64), None);
        assert_eq!(t.lookup(DOC | 6), Some(2));
    }

    fn random_prefix(r: &mut Rng) -> (u128, u8) {
        let x = r.next();
        // Few values in each region so prefixes nest often.
        let a = DOC ^ (r.next128() & 0x0003_0000_0301_0000_0300_0000_0000_0103);
        let len = match x % 32 {
            0 => 1 + (x >> 8) as u8 % 15,
            1..=3 => 16 + (x >> 8) as u8 % 16,
            4..=20 => 32 + (x >> 8) as u8 % 33,
            _ => 65 + (x >> 8) as u8 % 64,
        };
        (a, len)
    }

    /// Random inserts and removes of nested prefixes of every length,
    /// checked against the linear model at every prefix's boundaries.
    #[test]
    fn matches_reference_model() {
        let t = Lpm6Stride::with_nodes(1 << 14);
        let mut model = Model::default();
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        for step in 0..20_000u32 {
            let (a, l) = if step % 3001 == 1000 {
                (r.next128(), 0)
            } else {
                random_prefix(&mut r)
            };
            let nh = (r.next() % 1000) as u32;
            if r.next() % 5 < 3 {
                assert_eq!(t.insert(a, l, nh).unwrap(), model.insert(a, l, nh));
            } else {
                assert_eq!(t.remove(a, l), model.remove(a, l));
            }
            for x in boundaries(a, l) {
                assert_eq!(t.lookup(x), model.lookup(x), "step {step} addr {x:#x}");
            }
            let x = random_prefix(&mut r).0 ^ r.next() as u128;
            assert_eq!(t.lookup(x), model.lookup(x));
            if step % 2000 == 0 {
                for p in &model.0 {
                    for x in boundaries(p.0, p.1) {
                        assert_eq!(t.lookup(x), model.lookup(x), "full check {x:#x}");
                    }
                }
                assert_eq!(t.len(), model.0.len());
                t.reclaim();
            }
        }
        let addrs: Vec<u128> = (0..257).map(|_| random_prefix(&mut r).0).collect();
        let mut out = vec![None; addrs.len()];
        t.lookup_batch(&addrs, &mut out);
        for (a, o) in addrs.iter().zip(&out) {
            assert_eq!(*o, model.lookup(*a));
        }
        let all: Vec<_> = model.0.clone();
        for p in all {
            assert_eq!(t.remove(p.0, p.1), Some(p.2));
        }
        assert!(t.is_empty());
        assert_eq!(t.stats().nodes, 0);
    }

    /// Readers see only the stable answer for a stable /48 and its /128
    /// while the writer churns prefixes around and inside it, and recycles
    /// nodes with the grace period.
    #[test]
    fn concurrent_readers_see_old_or_new() {
        let t = Arc::new(Lpm6Stride::with_nodes(1 << 14));
        let stable = DOC | 0x0001_0002 << 64;
        t.insert(stable, 48, 7).unwrap();
        t.insert(stable | 0x77, 128, 8).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let passes: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let readers: Vec<_> = (0..2)
            .map(|id| {
                let (t, stop, passes) = (t.clone(), stop.clone(), passes.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    // At least one full pass, however the threads are scheduled.
                    while n == 0 || !stop.load(Ordering::Relaxed) {
                        for k in 0..256u128 {
                            let x = stable | k | ((k >> 7) << 70);
                            let want = if x == stable | 0x77 { 8 } else { 7 };
                            assert_eq!(t.lookup(x), Some(want));
                        }
                        for k in 0..64u128 {
                            let x = DOC | 0x9_0000 << 64 | (k * 0x1234_5678_9abc_def1) << 8;
                            let v = t.lookup(x);
                            assert!(matches!(v, None | Some(1) | Some(100..=103)), "{v:?}");
                        }
                        n += 1;
                        passes[id].store(n, Ordering::Release);
                        // Two cores, three threads: let the writer run.
                        std::thread::yield_now();
                    }
                    n
                })
            })
            .collect();
        let mut r = Rng(7);
        let mut grace = [0u64; 2];
        for round in 0..6_000u32 {
            let x = r.next();
            let len = [44u8, 48, 52, 56, 64, 100, 128][(x >> 32) as usize % 7];
            let len = if len == 44 && round % 10 != 0 {
                48
            } else {
                len
            };
            let a = if len == 44 {
                DOC | 0x9_0000 << 64
            } else {
                DOC | 0x9_0000 << 64 | (r.next128() & (0xf0_ff00 << 64 | 0xff))
            };
            let nh = if len == 32 {
                1
            } else {
                100 + (x >> 40) as u32 % 4
            };
            if round % 3 == 0 {
                t.remove(a, len);
            } else {
                t.insert(a, len, nh).unwrap();
            }
            if round % 7 == 0 {
                t.insert(stable, 40, 100).unwrap();
                t.insert(stable | 0x80, 121, 7).unwrap();
                t.remove(stable | 0x80, 121);
                t.remove(stable, 40);
            }
            if round % 64 == 0 && (0..2).all(|i| passes[i].load(Ordering::Acquire) > grace[i]) {
                t.reclaim();
                for (i, g) in grace.iter_mut().enumerate() {
                    *g = passes[i].load(Ordering::Acquire);
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for h in readers {
            assert!(h.join().unwrap() > 0);
        }
    }
}
