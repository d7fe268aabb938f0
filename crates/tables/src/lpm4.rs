//! IPv4 longest-prefix match (the FIB's lookup structure): DIR-24-8, one
//! writer (the control plane's route programmer), any number of lock-free
//! readers (the workers).
//!
//! Terms: a *prefix* is an address and a length (`10.1.0.0/16`); its *value*
//! is a next-hop id (a [`crate::nexthop`] id or ECMP group id, at most
//! [`MAX_NEXT_HOP`]); a *node* (DPDK's "tbl8 group") is a 256-entry array
//! that resolves the last 8 bits of the addresses of one /24.
//!
//! Lookup is one load from a 2^24-entry first-level array indexed by the top
//! 24 bits of the address; if that entry points to a node, one more load
//! from the node indexed by the low 8 bits. Each entry is an `AtomicU32`:
//! 0 is "no route", bit 31 set is a node index, anything else is
//! next-hop id + 1. Why DIR-24-8 over a compressed trie (poptrie): two
//! dependent loads worst case, no popcount arithmetic, in-place updates
//! of single words; the price is 64 MiB for the first level, which at
//! 1,000,000 prefixes is less than any compact structure saves in lookup
//! time (figures in `docs/lpm.md`).
//!
//! # Updates are incremental
//! The writer keeps the prefixes as the control plane gave them (one hash
//! map per length) and, beside every lookup entry, the length + 1 of the
//! prefix that wrote it (0: none). Inserting a prefix rewrites only the
//! entries it covers whose current prefix is not longer; removing one
//! rewrites the entries it wrote with its longest covering prefix (found in
//! the maps). A /25../32 first turns its /24 entry into a node (filled with
//! the old value, then published), and a node whose entries all come from
//! prefixes of length ≤ 24 again is folded back into its /24 entry. Nothing
//! is ever rebuilt; an insert writes at most 2^(24-len) entries (the /0
//! default route writes 16 M once).
//!
//! # Why readers are safe without locks
//! Every entry is read and written as one aligned atomic word, so a reader
//! sees, for each address, either the entry before or after a store — the
//! old or the new answer, never a torn one. A new node is completely filled
//! before the store (`Release`) that links it; readers load first-level
//! entries with `Acquire`, so a reader that sees the link sees the filled
//! node. Node entries themselves are plain values, loaded `Relaxed`. On
//! x86-64 both orderings compile to plain `mov`s, so correctness costs
//! nothing.
//!
//! A node unlinked by folding is *quarantined*, not reused: a reader that
//! loaded the link just before may still read it (and finds the folded
//! value in every entry, which is right). Nodes become reusable two
//! [`Lpm4::reclaim`] calls after they were unlinked; the caller lets every
//! worker pass a quiescent point (finish the batch it was in) between two
//! calls — the same grace period as for a replaced snapshot — so no reader
//! can still hold a link to a node when it is reused.
//!
//! Nodes come from a pool of fixed capacity, allocated zeroed up front so
//! untouched pages cost no memory (the first level and the pool are
//! [`HugeArray`]s: 2 MB pages committed as touched, so a random lookup is
//! not also a 4 KB TLB miss; `docs/lpm.md`); an insert that would need a node when
//! none is free fails with [`LpmError::Full`] and changes nothing.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::huge::{Backing, HugeArray};

/// Largest value (next-hop or group id) an LPM table stores. Bit 31 of an
/// entry marks a node link and 0 means "no route", so values are stored as
/// id + 1 below 2^31.
pub const MAX_NEXT_HOP: u32 = 0x7FFF_FFFE;

/// Bit 31 of an entry: the rest is a node index.
pub(crate) const PTR_BIT: u32 = 1 << 31;

/// Default node pool of [`Lpm4::new`]: 131,072 nodes (128 MiB of address
/// space, used only as touched), room for 131,072 distinct /24s holding
/// prefixes longer than /24.
pub const LPM4_DEFAULT_NODES: u32 = 1 << 17;

/// Why an update was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LpmError {
    /// Prefix length over 32 (IPv4) or 128 (IPv6).
    BadLength,
    /// Value over [`MAX_NEXT_HOP`].
    BadNextHop,
    /// The node pool is exhausted (nothing was changed).
    Full,
}

impl fmt::Display for LpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LpmError::BadLength => "prefix length out of range",
            LpmError::BadNextHop => "next-hop id out of range",
            LpmError::Full => "LPM node pool exhausted",
        })
    }
}

impl std::error::Error for LpmError {}

/// Sizes of a table, for `show ... route summary` and the benchmarks.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct LpmStats {
    /// Prefixes installed.
    pub prefixes: usize,
    /// Nodes linked into the lookup structure.
    pub nodes: usize,
    /// Nodes unlinked and waiting for [`Lpm4::reclaim`] (both generations).
    pub quarantined: usize,
    /// Bytes of lookup structure the workers read (first level plus every
    /// node ever handed out).
    pub lookup_bytes: usize,
    /// Approximate bytes of writer-side state (prefix maps and lengths).
    pub control_bytes: usize,
}

/// A fast hasher for the writer's prefix maps (keys are masked addresses:
/// the final mix spreads their trailing zeros over every bit).
#[derive(Default, Clone, Copy)]
pub(crate) struct PrefixHasher(u64);

impl Hasher for PrefixHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u128(&mut self, x: u128) {
        self.write_u64(x as u64);
        self.write_u64((x >> 64) as u64);
    }
    fn finish(&self) -> u64 {
        // murmur3 fmix64
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

type PrefixMap = HashMap<u128, u32, BuildHasherDefault<PrefixHasher>>;

/// `n` zeroed atomics, allocated with `calloc` so untouched pages stay
/// unmapped (the label FIB's small arrays; the tries use [`HugeArray`]).
pub(crate) fn zeroed_atomics(n: usize) -> Box<[AtomicU32]> {
    let b: Box<[u32]> = vec![0u32; n].into_boxed_slice();
    let p = Box::into_raw(b) as *mut [AtomicU32];
    // SAFETY: AtomicU32 has the same size, alignment and bit validity as
    // u32, and the pointer comes from a Box of exactly this slice length.
    unsafe { Box::from_raw(p) }
}

#[inline]
pub(crate) fn mask128(len: u32) -> u128 {
    if len == 0 {
        0
    } else {
        !0u128 << (128 - len)
    }
}

/// Where an entry lives: the first level or a node (global entry index).
#[derive(Clone, Copy)]
enum Slot {
    Root(usize),
    Node(usize),
}

#[derive(Clone, Copy)]
enum Op {
    /// Insert: write `val` where the current prefix length+1 ≤ `dep`.
    Fill { dep: u8, val: u32 },
    /// Remove: where the entry was written by length+1 `dep`, write the
    /// covering prefix's `pval` (length+1 `pdep`; 0/0 for none).
    Unfill { dep: u8, pdep: u8, pval: u32 },
}

struct Writer {
    root_depth: Vec<u8>,
    node_depth: Vec<u8>,
    /// Nodes handed out so far (never-used nodes are `fresh..cap`).
    fresh: u32,
    free: Vec<u32>,
    /// Unlinked since the last [`StrideTrie::reclaim`].
    quarantine: Vec<u32>,
    /// Unlinked before the last reclaim: free at the next one.
    older: Vec<u32>,
    live_nodes: usize,
    /// Installed prefixes by length, keys left-aligned and masked.
    prefixes: Vec<PrefixMap>,
    count: usize,
}

/// A multibit trie over left-aligned 128-bit keys: a first level of
/// 2^`root_bits` entries, then 8-bit nodes. [`Lpm4`] is it with 24 bits over
/// 32-bit keys (DIR-24-8), [`crate::lpm6::Lpm6`] with 16 bits over 128.
pub(crate) struct StrideTrie {
    root_bits: u32,
    width: u32,
    pub(crate) root: HugeArray<AtomicU32>,
    pub(crate) nodes: HugeArray<AtomicU32>,
    cap: u32,
    w: Mutex<Writer>,
}

impl StrideTrie {
    pub(crate) fn new(root_bits: u32, width: u32, cap: u32, backing: Backing) -> StrideTrie {
        assert!(cap < PTR_BIT, "node pool larger than 2^31");
        StrideTrie {
            root_bits,
            width,
            root: HugeArray::with_backing(1 << root_bits, backing),
            nodes: HugeArray::with_backing(cap as usize * 256, backing),
            cap,
            w: Mutex::new(Writer {
                root_depth: vec![0u8; 1 << root_bits],
                node_depth: Vec::new(),
                fresh: 0,
                free: Vec::new(),
                quarantine: Vec::new(),
                older: Vec::new(),
                live_nodes: 0,
                prefixes: (0..=width).map(|_| PrefixMap::default()).collect(),
                count: 0,
            }),
        }
    }

    pub(crate) fn huge_backed_bytes(&self) -> Option<usize> {
        let ranges: Vec<_> = [self.root.advised_range(), self.nodes.advised_range()]
            .into_iter()
            .flatten()
            .collect();
        crate::huge::huge_bytes_in(&ranges)
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, Writer> {
        // A panic inside an update leaves a table that still answers
        // lookups; keep serving rather than poisoning every later update.
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    fn atom(&self, s: Slot) -> &AtomicU32 {
        match s {
            Slot::Root(i) => &self.root[i],
            Slot::Node(i) => &self.nodes[i],
        }
    }

    fn check(&self, len: u32, nh: u32) -> Result<(), LpmError> {
        if len > self.width {
            return Err(LpmError::BadLength);
        }
        if nh > MAX_NEXT_HOP {
            return Err(LpmError::BadNextHop);
        }
        Ok(())
    }

    pub(crate) fn insert(&self, key: u128, len: u32, nh: u32) -> Result<Option<u32>, LpmError> {
        self.check(len, nh)?;
        let key = key & mask128(len);
        let mut w = self.writer();
        let old = w.prefixes[len as usize].get(&key).copied();
        if old == Some(nh) {
            return Ok(old);
        }
        if len > self.root_bits {
            // Worst case every level below the first needs a new node.
            let need = (len - self.root_bits).div_ceil(8);
            let avail = (self.cap - w.fresh) as usize + w.free.len();
            if avail < need as usize && !self.path_exists(key, len) {
                return Err(LpmError::Full);
            }
        }
        w.prefixes[len as usize].insert(key, nh);
        if old.is_none() {
            w.count += 1;
        }
        let op = Op::Fill {
            dep: len as u8 + 1,
            val: nh + 1,
        };
        self.update(&mut w, key, len, op);
        Ok(old)
    }

    /// Whether every node on the way to `key/len` already exists.
    fn path_exists(&self, key: u128, len: u32) -> bool {
        let mut e = self.root[(key >> (128 - self.root_bits)) as usize].load(Ordering::Relaxed);
        let mut base = self.root_bits;
        loop {
            if e & PTR_BIT == 0 {
                return false;
            }
            if len <= base + 8 {
                return true;
            }
            let bits = ((key << base) >> 120) as usize;
            e = self.nodes[(((e & !PTR_BIT) as usize) << 8) | bits].load(Ordering::Relaxed);
            base += 8;
        }
    }

    pub(crate) fn remove(&self, key: u128, len: u32) -> Option<u32> {
        if len > self.width {
            return None;
        }
        let key = key & mask128(len);
        let mut w = self.writer();
        let old = w.prefixes[len as usize].remove(&key)?;
        w.count -= 1;
        let (mut pdep, mut pval) = (0u8, 0u32);
        for l in (0..len).rev() {
            let m = &w.prefixes[l as usize];
            if m.is_empty() {
                continue;
            }
            if let Some(&v) = m.get(&(key & mask128(l))) {
                (pdep, pval) = (l as u8 + 1, v + 1);
                break;
            }
        }
        let op = Op::Unfill {
            dep: len as u8 + 1,
            pdep,
            pval,
        };
        self.update(&mut w, key, len, op);
        Some(old)
    }

    pub(crate) fn get(&self, key: u128, len: u32) -> Option<u32> {
        if len > self.width {
            return None;
        }
        self.writer().prefixes[len as usize]
            .get(&(key & mask128(len)))
            .copied()
    }

    pub(crate) fn for_each(&self, mut f: impl FnMut(u128, u32, u32)) {
        let w = self.writer();
        for (len, m) in w.prefixes.iter().enumerate() {
            for (&k, &v) in m {
                f(k, len as u32, v);
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.writer().count
    }

    pub(crate) fn reclaim(&self) -> usize {
        let mut w = self.writer();
        let older = std::mem::take(&mut w.older);
        let n = older.len();
        w.free.extend(older);
        w.older = std::mem::take(&mut w.quarantine);
        n
    }

    pub(crate) fn stats(&self) -> LpmStats {
        let w = self.writer();
        let map_bytes: usize = w
            .prefixes
            .iter()
            .map(|m| m.capacity() * (std::mem::size_of::<(u128, u32)>() + 1))
            .sum();
        LpmStats {
            prefixes: w.count,
            nodes: w.live_nodes,
            quarantined: w.quarantine.len() + w.older.len(),
            lookup_bytes: self.root.len() * 4 + w.fresh as usize * 1024,
            control_bytes: map_bytes + w.root_depth.len() + w.node_depth.len(),
        }
    }

    fn depth(&self, w: &Writer, s: Slot) -> u8 {
        match s {
            Slot::Root(i) => w.root_depth[i],
            Slot::Node(i) => w.node_depth[i],
        }
    }

    fn set(&self, w: &mut Writer, s: Slot, dep: u8, val: u32) {
        match s {
            Slot::Root(i) => w.root_depth[i] = dep,
            Slot::Node(i) => w.node_depth[i] = dep,
        }
        let a = self.atom(s);
        if a.load(Ordering::Relaxed) != val {
            // A value store: readers need no ordering for it.
            a.store(val, Ordering::Relaxed);
        }
    }

    /// Apply `op` to the entry at `s` and, if it links a node, to every
    /// entry below it.
    fn apply(&self, w: &mut Writer, s: Slot, op: Op) {
        let e = self.atom(s).load(Ordering::Relaxed);
        if e & PTR_BIT != 0 {
            let base = ((e & !PTR_BIT) as usize) << 8;
            for j in 0..256 {
                self.apply(w, Slot::Node(base + j), op);
            }
            return;
        }
        let d = self.depth(w, s);
        match op {
            Op::Fill { dep, val } if d <= dep => self.set(w, s, dep, val),
            Op::Unfill { dep, pdep, pval } if d == dep => self.set(w, s, pdep, pval),
            _ => {}
        }
    }

    fn alloc(&self, w: &mut Writer) -> u32 {
        w.live_nodes += 1;
        if let Some(n) = w.free.pop() {
            return n;
        }
        assert!(w.fresh < self.cap, "node pool checked before update");
        let n = w.fresh;
        w.fresh += 1;
        w.node_depth.resize(w.fresh as usize * 256, 0);
        n
    }

    /// Turn the value entry at `s` into a link to a new node holding the
    /// same value in all 256 entries.
    fn expand(&self, w: &mut Writer, s: Slot) -> u32 {
        let n = self.alloc(w);
        let (val, dep) = (self.atom(s).load(Ordering::Relaxed), self.depth(w, s));
        let base = (n as usize) << 8;
        for j in 0..256 {
            self.nodes[base + j].store(val, Ordering::Relaxed);
        }
        w.node_depth[base..base + 256].fill(dep);
        // Release: a reader that sees the link sees the filled node.
        self.atom(s).store(PTR_BIT | n, Ordering::Release);
        n
    }

    /// If the node linked at `s` (covering length `base`) holds only
    /// entries written by prefixes of length ≤ `base`, they are all equal:
    /// put that value back into `s` and quarantine the node.
    fn try_fold(&self, w: &mut Writer, s: Slot, base: u32) -> bool {
        let e = self.atom(s).load(Ordering::Relaxed);
        let n = (e & !PTR_BIT) as usize;
        let r = n << 8..(n + 1) << 8;
        let limit = base as u8 + 1;
        if w.node_depth[r.clone()].iter().any(|&d| d > limit)
            || self.nodes[r.clone()]
                .iter()
                .any(|x| x.load(Ordering::Relaxed) & PTR_BIT != 0)
        {
            return false;
        }
        let (val, dep) = (
            self.nodes[r.start].load(Ordering::Relaxed),
            w.node_depth[r.start],
        );
        self.set(w, s, dep, val);
        w.quarantine.push(n as u32);
        w.live_nodes -= 1;
        true
    }

    fn update(&self, w: &mut Writer, key: u128, len: u32, op: Op) {
        let r = self.root_bits;
        let top = (key >> (128 - r)) as usize;
        if len <= r {
            let count = 1usize << (r - len);
            for i in top..top + count {
                if self.root[i].load(Ordering::Relaxed) & PTR_BIT != 0 {
                    self.apply(w, Slot::Root(i), op);
                    continue;
                }
                let d = w.root_depth[i];
                match op {
                    Op::Fill { dep, val } if d <= dep => self.set(w, Slot::Root(i), dep, val),
                    Op::Unfill { dep, pdep, pval } if d == dep => {
                        self.set(w, Slot::Root(i), pdep, pval)
                    }
                    _ => {}
                }
            }
            return;
        }
        // Slots linking the nodes on the way down, with their lengths.
        let mut path: [(Slot, u32); 16] = [(Slot::Root(0), 0); 16];
        let mut depth = 0;
        let mut slot = Slot::Root(top);
        let mut base = r;
        loop {
            let e = self.atom(slot).load(Ordering::Relaxed);
            let node = if e & PTR_BIT != 0 {
                e & !PTR_BIT
            } else {
                match op {
                    Op::Fill { .. } => self.expand(w, slot),
                    // Removing a prefix whose node is gone: it was never
                    // below this entry (cannot happen; nothing to undo).
                    Op::Unfill { .. } => return,
                }
            };
            path[depth] = (slot, base);
            depth += 1;
            let bits = ((key << base) >> 120) as usize;
            let nb = (node as usize) << 8;
            if len <= base + 8 {
                let count = 1usize << (base + 8 - len);
                for j in bits..bits + count {
                    self.apply(w, Slot::Node(nb + j), op);
                }
                break;
            }
            slot = Slot::Node(nb + bits);
            base += 8;
        }
        if let Op::Unfill { .. } = op {
            for &(s, b) in path[..depth].iter().rev() {
                if !self.try_fold(w, s, b) {
                    break;
                }
            }
        }
    }
}

/// The IPv4 FIB lookup structure. Share it (`Arc`) between the writer and
/// the workers: lookups never lock; updates serialize on an internal mutex
/// the workers never touch.
pub struct Lpm4 {
    t: StrideTrie,
}

impl Default for Lpm4 {
    fn default() -> Self {
        Lpm4::new()
    }
}

impl Lpm4 {
    /// An empty table with the default node pool ([`LPM4_DEFAULT_NODES`]).
    pub fn new() -> Lpm4 {
        Lpm4::with_nodes(LPM4_DEFAULT_NODES)
    }

    /// An empty table whose pool holds `nodes` nodes (1 KiB each): the
    /// number of distinct /24s that may hold prefixes longer than /24.
    /// First level and pool on 2 MB pages committed as touched
    /// ([`Backing::HugeOnTouch`]).
    pub fn with_nodes(nodes: u32) -> Lpm4 {
        Lpm4::with_backing(nodes, Backing::HugeOnTouch)
    }

    /// [`Lpm4::with_nodes`] with the arrays backed as `backing` says
    /// ([`Backing::Small`] for a small table: a few routes spread over the
    /// first level would otherwise commit a 2 MB page each).
    pub fn with_backing(nodes: u32, backing: Backing) -> Lpm4 {
        Lpm4 {
            t: StrideTrie::new(24, 32, nodes, backing),
        }
    }

    /// Bytes of the lookup arrays on huge pages now (see
    /// [`HugeArray::huge_backed_bytes`]; reads `/proc/self/smaps`).
    pub fn huge_backed_bytes(&self) -> Option<usize> {
        self.t.huge_backed_bytes()
    }

    /// Install or replace `addr/len → nh` (writer side). Bits of `addr`
    /// past `len` are ignored. Returns the value it replaced.
    pub fn insert(&self, addr: u32, len: u8, nh: u32) -> Result<Option<u32>, LpmError> {
        self.t.insert((addr as u128) << 96, len as u32, nh)
    }

    /// Remove `addr/len` (writer side). Returns its value.
    pub fn remove(&self, addr: u32, len: u8) -> Option<u32> {
        self.t.remove((addr as u128) << 96, len as u32)
    }

    /// The value installed for exactly `addr/len` (writer-side state).
    pub fn get(&self, addr: u32, len: u8) -> Option<u32> {
        self.t.get((addr as u128) << 96, len as u32)
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
    pub fn for_each(&self, mut f: impl FnMut(u32, u8, u32)) {
        self.t
            .for_each(|k, len, v| f((k >> 96) as u32, len as u8, v));
    }

    /// Make nodes unlinked before the previous call reusable; returns how
    /// many. Between two calls every reader must have passed a quiescent
    /// point (finished the lookups it had started before the earlier call).
    pub fn reclaim(&self) -> usize {
        self.t.reclaim()
    }

    pub fn stats(&self) -> LpmStats {
        self.t.stats()
    }

    /// Longest-prefix match of `addr` (reader side: lock-free, wait-free,
    /// at most two memory loads).
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let root = &self.t.root;
        let i = (addr >> 8) as usize;
        debug_assert!(i < root.len());
        // SAFETY: the first level has 2^24 entries and `addr >> 8 < 2^24`.
        let mut e = unsafe { root.get_unchecked(i) }.load(Ordering::Acquire);
        if e & PTR_BIT != 0 {
            let j = (((e & !PTR_BIT) as usize) << 8) | (addr & 0xff) as usize;
            debug_assert!(j < self.t.nodes.len());
            // SAFETY: the writer only links node indices below the pool
            // capacity, so `j < nodes.len()`.
            e = unsafe { self.t.nodes.get_unchecked(j) }.load(Ordering::Relaxed);
        }
        e.checked_sub(1)
    }

    /// Look up a batch: `out[i] = lookup(addrs[i])`. Panics if the
    /// slices' lengths differ.
    ///
    /// A plain loop: the lookups are independent, so the CPU already
    /// overlaps their cache misses. Software prefetch 8 ahead and a
    /// two-phase 16-lane variant were both measured slower (`docs/lpm.md`).
    #[inline]
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [Option<u32>]) {
        assert_eq!(addrs.len(), out.len(), "lookup_batch: length mismatch");
        for (&a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// The first level is advised for 2 MB pages and 2 MB-aligned (a small
    /// table's is not advised); a default route writes all of it, and the
    /// huge-page backing is read back (reported: the kernel may refuse).
    #[test]
    fn first_level_on_huge_pages_unless_small() {
        use crate::huge::HUGE_PAGE;
        let t = Lpm4::with_nodes(4096);
        assert!(t.t.root.advised() && t.t.nodes.advised());
        assert_eq!(t.t.root.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(t.huge_backed_bytes(), Some(0), "nothing touched yet");
        t.insert(0, 0, 1).unwrap();
        assert_eq!(t.lookup(0x0a00_0001), Some(1));
        let h = t.huge_backed_bytes().unwrap();
        assert!(h <= 64 << 20 && h.is_multiple_of(HUGE_PAGE), "{h}");
        eprintln!("default route: {} MiB of 64 on 2 MB pages", h >> 20);
        let s = Lpm4::with_backing(4096, Backing::Small);
        assert!(!s.t.root.advised() && !s.t.nodes.advised());
        s.insert(0, 0, 1).unwrap();
        assert_eq!(s.huge_backed_bytes(), Some(0));
        assert_eq!(s.lookup(0x0a00_0001), Some(1));
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn m(len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            !0u32 << (32 - len)
        }
    }

    /// The reference: a list of prefixes, longest match by linear scan.
    #[derive(Default)]
    struct Model(Vec<(u32, u8, u32)>);
    impl Model {
        fn insert(&mut self, a: u32, l: u8, nh: u32) -> Option<u32> {
            let a = a & m(l);
            for p in &mut self.0 {
                if p.0 == a && p.1 == l {
                    return Some(std::mem::replace(&mut p.2, nh));
                }
            }
            self.0.push((a, l, nh));
            None
        }
        fn remove(&mut self, a: u32, l: u8) -> Option<u32> {
            let a = a & m(l);
            let i = self.0.iter().position(|p| p.0 == a && p.1 == l)?;
            Some(self.0.swap_remove(i).2)
        }
        fn lookup(&self, x: u32) -> Option<u32> {
            self.0
                .iter()
                .filter(|p| x & m(p.1) == p.0)
                .max_by_key(|p| p.1)
                .map(|p| p.2)
        }
    }

    fn boundaries(a: u32, l: u8) -> [u32; 6] {
        let first = a & m(l);
        let last = first | !m(l);
        [
            first,
            last,
            first.wrapping_sub(1),
            last.wrapping_add(1),
            first.wrapping_add(1),
            last.wrapping_sub(1),
        ]
    }

    #[test]
    fn basics_default_host_and_fallback() {
        let t = Lpm4::with_nodes(16);
        assert_eq!(t.lookup(0x0a00_0001), None);
        t.insert(0, 0, 1).unwrap();
        t.insert(0x0a00_0000, 8, 2).unwrap();
        t.insert(0x0a01_0203, 32, 3).unwrap();
        t.insert(0x0a01_0200, 25, 4).unwrap();
        assert_eq!(t.lookup(0x0b00_0000), Some(1));
        assert_eq!(t.lookup(0x0a00_0000), Some(2));
        assert_eq!(t.lookup(0x0a01_0203), Some(3));
        assert_eq!(t.lookup(0x0a01_0204), Some(4));
        assert_eq!(t.lookup(0x0a01_0280), Some(2));
        assert_eq!(t.stats().nodes, 1);
        assert_eq!(t.remove(0x0a01_0203, 32), Some(3));
        assert_eq!(t.lookup(0x0a01_0203), Some(4));
        assert_eq!(t.remove(0x0a01_0200, 25), Some(4));
        // The node folded back into its /24 entry.
        assert_eq!(t.stats().nodes, 0);
        assert_eq!(t.stats().quarantined, 1);
        assert_eq!(t.lookup(0x0a01_0203), Some(2));
        assert_eq!(t.remove(0x0a00_0000, 8), Some(2));
        assert_eq!(t.lookup(0x0a01_0203), Some(1));
        assert_eq!(t.remove(0, 0), Some(1));
        assert_eq!(t.lookup(0x0a01_0203), None);
        assert!(t.is_empty());
        assert_eq!(t.reclaim(), 0);
        assert_eq!(t.reclaim(), 1);
        assert_eq!(t.stats().quarantined, 0);
    }

    #[test]
    fn rejects_bad_input_and_full_pool_changes_nothing() {
        let t = Lpm4::with_nodes(1);
        assert_eq!(t.insert(0, 33, 1), Err(LpmError::BadLength));
        assert_eq!(t.insert(0, 8, MAX_NEXT_HOP + 1), Err(LpmError::BadNextHop));
        t.insert(0x0a00_0000, 8, MAX_NEXT_HOP).unwrap();
        assert_eq!(t.lookup(0x0a00_0000), Some(MAX_NEXT_HOP));
        t.insert(0x0a00_0080, 25, 1).unwrap();
        // Same /24: no new node needed.
        t.insert(0x0a00_00ff, 32, 2).unwrap();
        assert_eq!(t.insert(0x0a00_0180, 25, 3), Err(LpmError::Full));
        assert_eq!(t.get(0x0a00_0180, 25), None);
        assert_eq!(t.lookup(0x0a00_0180), Some(MAX_NEXT_HOP));
        assert_eq!(t.len(), 3);
        // Free the node, reclaim, and the pool serves again.
        t.remove(0x0a00_0080, 25);
        t.remove(0x0a00_00ff, 32);
        assert_eq!(t.insert(0x0a00_0180, 25, 3), Err(LpmError::Full));
        assert_eq!(t.reclaim(), 0);
        assert_eq!(t.insert(0x0a00_0180, 25, 3), Err(LpmError::Full));
        assert_eq!(t.reclaim(), 1);
        t.insert(0x0a00_0180, 25, 3).unwrap();
        assert_eq!(t.lookup(0x0a00_0181), Some(3));
        assert_eq!(t.lookup(0x0a00_0081), Some(MAX_NEXT_HOP));
    }

    fn random_prefix(r: &mut Rng) -> (u32, u8) {
        let x = r.next();
        // Few top bytes and few values per byte so prefixes nest often.
        let a = ((x as u32 & 0x0303_0307) | 0x0a00_0000) ^ ((x >> 32) as u32 & 0x0000_0ff0);
        // Short prefixes rewrite up to 2^24 entries: keep them rare so the
        // unoptimized test build stays quick (the default route is toggled
        // separately).
        let len = match (x >> 40) % 64 {
            0 => 1 + (x >> 48) as u8 % 8,
            1..=6 => 9 + (x >> 48) as u8 % 7,
            7..=30 => 16 + (x >> 48) as u8 % 9,
            _ => 24 + (x >> 48) as u8 % 9,
        };
        (a, len)
    }

    /// Random inserts and removes of nested prefixes of every length,
    /// checked against the linear model at every prefix's boundaries.
    #[test]
    fn matches_reference_model() {
        let t = Lpm4::with_nodes(4096);
        let mut model = Model::default();
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        for step in 0..20_000u32 {
            let (a, l) = if step % 3001 == 1000 {
                (r.next() as u32, 0)
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
            let x = r.next() as u32;
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
        // Batch lookup agrees with single lookups (257: exercises the tail).
        let addrs: Vec<u32> = (0..257).map(|_| random_prefix(&mut r).0).collect();
        let mut out = vec![None; addrs.len()];
        t.lookup_batch(&addrs, &mut out);
        for (a, o) in addrs.iter().zip(&out) {
            assert_eq!(*o, model.lookup(*a));
        }
        // Remove everything: no route anywhere, no node left.
        let all: Vec<_> = model.0.clone();
        for p in all {
            assert_eq!(t.remove(p.0, p.1), Some(p.2));
        }
        assert!(t.is_empty());
        assert_eq!(t.stats().nodes, 0);
        assert_eq!(t.lookup(0x0a00_0000), None);
    }

    /// Readers looking up a stable prefix while the writer churns nested
    /// prefixes around and inside it only ever see the stable answer, and
    /// for churned addresses only answers some prefix could give. The
    /// writer recycles nodes with the documented grace period.
    #[test]
    fn concurrent_readers_see_old_or_new() {
        use std::sync::atomic::AtomicU64;
        let t = Arc::new(Lpm4::with_nodes(4096));
        // Stable: 10.1.2.0/24 → 7, and 10.1.2.77/32 → 8 inside it.
        t.insert(0x0a01_0200, 24, 7).unwrap();
        t.insert(0x0a01_024d, 32, 8).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let passes: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let readers: Vec<_> = (0..2)
            .map(|id| {
                let (t, stop, passes) = (t.clone(), stop.clone(), passes.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    // At least one full pass, however the threads are scheduled.
                    while n == 0 || !stop.load(Ordering::Relaxed) {
                        for x in 0x0a01_0200..0x0a01_0300u32 {
                            let want = if x == 0x0a01_024d { 8 } else { 7 };
                            assert_eq!(t.lookup(x), Some(want));
                        }
                        // Churned region: 10.2.0.0/16 with values 100..=103
                        // or the 10/8 route 1, or nothing.
                        for k in 0..64u32 {
                            let x =
                                0x0a02_0000 | ((n as u32).wrapping_mul(2654435761) ^ k) & 0xffff;
                            let v = t.lookup(x);
                            assert!(matches!(v, None | Some(1) | Some(100..=103)), "{v:?}");
                        }
                        n += 1;
                        // Quiescent point: no lookup in flight.
                        passes[id].store(n, Ordering::Release);
                        // Two cores, three threads: let the writer run.
                        std::thread::yield_now();
                    }
                    n
                })
            })
            .collect();
        let mut r = Rng(42);
        let mut grace = [0u64; 2];
        for round in 0..30_000u32 {
            let x = r.next();
            let len = [8u8, 16, 20, 24, 25, 28, 32][(x >> 32) as usize % 7];
            let a = if len == 8 {
                0x0a00_0000
            } else {
                0x0a02_0000 | (x as u32 & 0xffff)
            };
            let nh = if len == 8 {
                1
            } else {
                100 + (x >> 40) as u32 % 4
            };
            if round % 3 == 0 {
                t.remove(a, len);
            } else {
                t.insert(a, len, nh).unwrap();
            }
            // Churn around and inside the stable prefixes without changing
            // their answers: a shorter prefix, a same-value /25 inside.
            if round % 7 == 0 {
                t.insert(0x0a01_0000, 16, 100).unwrap();
                t.insert(0x0a01_0280, 25, 7).unwrap();
                t.remove(0x0a01_0280, 25);
                t.remove(0x0a01_0000, 16);
            }
            // Reclaim once every reader has passed a quiescent point since
            // the previous reclaim.
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
