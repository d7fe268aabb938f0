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
    use crate::lpm6_check::*;

    #[test]
    fn basics_default_host_and_fallback() {
        crate::lpm6_check::basics_default_host_and_fallback(&Lpm6Stride::with_nodes(64));
    }

    #[test]
    fn matches_reference_model() {
        crate::lpm6_check::matches_reference_model(&Lpm6Stride::with_nodes(1 << 14), 2000);
    }

    #[test]
    fn concurrent_readers_see_old_or_new() {
        crate::lpm6_check::concurrent_readers_see_old_or_new(
            Lpm6Stride::with_nodes(1 << 14),
            64,
            false,
        );
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
}
