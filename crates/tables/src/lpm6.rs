//! IPv6 longest-prefix match: a poptrie-style compressed multibit trie, one
//! writer, any number of lock-free readers.
//!
//! Shape: a direct 2^24-entry first level (`AtomicU32`: 0 no route, bit 31
//! a link to a node, else next-hop id + 1), then 64-ary nodes resolving 6
//! bits each (24 + 6·k; the last level, bits 126..128, uses 2 of its 6).
//! A node is 24 bytes (in a 32-byte slot): `vec` (bit s set: slot s is a child node),
//! `leafvec` (bit s set: a run of equal leaf values starts at slot s;
//! child slots are skipped, they do not break a run), the index of its
//! packed leaf array and of its packed child array. The child of slot s
//! is `children[popcnt(vec & mask(s)) − 1]`, its leaf
//! `leaves[popcnt(leafvec & mask(s)) − 1]` (Asai & Ohara, "Poptrie",
//! SIGCOMM 2015). Only the slots that differ cost memory, so the sparse
//! /48s under provider /32s that made the uncompressed 8-bit trie
//! (`lpm6_stride`) 772 MiB at 500,000 prefixes take a few tens of MiB here
//! (`docs/lpm.md` has the figures).
//!
//! Updates are copy-on-write: the writer keeps the prefixes in an ordered
//! map, rebuilds the one subtree a prefix changes from that map (the node
//! at the level where the prefix ends, or a new child where the path
//! stopped at a leaf), then copies each node on the path above it into a
//! fresh child/leaf array and publishes the result with one `Release`
//! store of the first-level entry. Readers load that entry with `Acquire`;
//! everything they reach from it was written before the store and is never
//! written again while reachable, so each lookup sees the old or the new
//! table. The replaced arrays wait two [`Lpm6::reclaim`] calls before
//! reuse (the same grace-period contract as `lpm4`). Nodes fold back into
//! a leaf when all their slots hold one value, so the structure after any
//! sequence of updates is the one a fresh build would give.

use crate::huge::{Backing, HugeArray};
use crate::lpm4::{mask128, LpmError, LpmStats, MAX_NEXT_HOP};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Default pool of [`Lpm6::new`]: sized as 2^20 nodes of the old 8-bit
/// trie (see [`Lpm6::with_nodes`]); address space used only as touched.
pub const LPM6_DEFAULT_NODES: u32 = 1 << 20;

const ROOT_BITS: u32 = 24;
const STRIDE: u32 = 6;
const PTR: u32 = 1 << 31;
/// Largest array handed out (a node has 64 slots).
const MAX_ARRAY: usize = 64;
/// Pool elements (nodes, and leaves) kept free for removals: this many,
/// or a quarter of a smaller pool.
pub const RESERVE: usize = 4096;

/// A node as the writer handles it (in the pool: three `AtomicU64`s).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct NodeVal {
    vec: u64,
    leafvec: u64,
    leaf_base: u32,
    child_base: u32,
}

/// What a region of the address space compiles to: one value for all of
/// it, or a node.
enum Content {
    Leaf(u32),
    Node(NodeVal),
}

/// Index range allocator of one pool: exact-size free lists (sizes 1–64),
/// then a bump pointer.
struct Arena {
    cap: u32,
    top: u32,
    free: Vec<Vec<u32>>,
    /// Elements handed out and not yet freed (quarantined ones included).
    used: usize,
}

impl Arena {
    fn new(cap: u32) -> Arena {
        Arena {
            cap,
            top: 0,
            free: vec![Vec::new(); MAX_ARRAY + 1],
            used: 0,
        }
    }

    fn alloc(&mut self, n: usize) -> Option<u32> {
        let i = match self.free[n].pop() {
            Some(i) => i,
            None => {
                if self.top as usize + n > self.cap as usize {
                    return None;
                }
                self.top += n as u32;
                self.top - n as u32
            }
        };
        self.used += n;
        Some(i)
    }

    /// Elements not handed out.
    fn room(&self) -> usize {
        self.cap as usize - self.used
    }

    fn free(&mut self, i: u32, n: usize) {
        self.free[n].push(i);
        self.used -= n;
    }
}

/// An array handed out by one of the pools.
#[derive(Clone, Copy)]
struct Block {
    node: bool,
    at: u32,
    len: u8,
}

/// Writer-side state, behind the mutex.
struct Writer {
    /// Every prefix, keyed (masked address, length), value = next hop.
    prefixes: BTreeMap<(u128, u8), u32>,
    /// Prefixes per length, to skip absent lengths when looking for the
    /// longest covering prefix.
    per_len: [u32; 129],
    nodes: Arena,
    leaves: Arena,
    /// Allocated by the update in progress (freed again if it fails).
    fresh: Vec<Block>,
    /// Unlinked by the update in progress (quarantined if it succeeds).
    retire: Vec<Block>,
    /// Unlinked since the last `reclaim`, and before it.
    q_new: Vec<Block>,
    q_old: Vec<Block>,
    /// Node structs linked into the lookup structure.
    live_nodes: usize,
}

/// The IPv6 FIB lookup structure. Share it (`Arc`) between the writer and
/// the workers: lookups never lock; updates serialize on an internal mutex
/// the workers never touch.
pub struct Lpm6 {
    root: HugeArray<AtomicU32>,
    /// Four words per node from `node0` on, 32-byte aligned so that no
    /// node straddles two cache lines: `vec`, `leafvec`,
    /// `leaf_base | child_base << 32`, unused.
    nodes: HugeArray<AtomicU64>,
    node0: usize,
    leaves: HugeArray<AtomicU32>,
    w: Mutex<Writer>,
}

impl Default for Lpm6 {
    fn default() -> Self {
        Lpm6::new()
    }
}

#[inline]
fn slot(key: u128, depth: u32) -> usize {
    ((key << depth) >> (128 - STRIDE)) as usize
}

/// Mask of slots 0..=s.
#[inline]
fn upto(s: usize) -> u64 {
    (2u64 << s).wrapping_sub(1)
}

impl Lpm6 {
    /// An empty table with the default pool ([`LPM6_DEFAULT_NODES`]).
    pub fn new() -> Lpm6 {
        Lpm6::with_nodes(LPM6_DEFAULT_NODES)
    }

    /// An empty table whose pool is sized like `nodes` 1-KiB nodes of an
    /// uncompressed 8-bit trie: room for 4·`nodes` + 1024 compressed nodes
    /// (24 bytes each) and 8·`nodes` + 2048 leaves (4 bytes each), which
    /// includes the arrays replaced by updates and waiting for
    /// [`Lpm6::reclaim`]. The first level and the pools are on 2 MB pages
    /// committed as touched ([`Backing::HugeOnTouch`]).
    pub fn with_nodes(nodes: u32) -> Lpm6 {
        Lpm6::with_backing(nodes, Backing::HugeOnTouch)
    }

    /// [`Lpm6::with_nodes`] with the arrays backed as `backing` says
    /// ([`Backing::Small`] for a small table: a few routes spread over the
    /// first level would otherwise commit a 2 MB page each).
    pub fn with_backing(nodes: u32, backing: Backing) -> Lpm6 {
        let ncap = (nodes as u64 * 4 + 1024).min(1 << 28) as u32;
        let lcap = (nodes as u64 * 8 + 2048).min(1 << 29) as u32;
        let mut t = Lpm6 {
            root: HugeArray::with_backing(1 << ROOT_BITS, backing),
            nodes: HugeArray::with_backing(ncap as usize * 4 + 8, backing),
            node0: 0,
            leaves: HugeArray::with_backing(lcap as usize, backing),
            w: Mutex::new(Writer {
                prefixes: BTreeMap::new(),
                per_len: [0; 129],
                nodes: Arena::new(ncap),
                leaves: Arena::new(lcap),
                fresh: Vec::new(),
                retire: Vec::new(),
                q_new: Vec::new(),
                q_old: Vec::new(),
                live_nodes: 0,
            }),
        };
        t.node0 = (t.nodes.as_ptr() as usize).wrapping_neg() % 32 / 8;
        t
    }

    /// Bytes of the lookup arrays on huge pages now (see
    /// [`HugeArray::huge_backed_bytes`]; reads `/proc/self/smaps`).
    pub fn huge_backed_bytes(&self) -> Option<usize> {
        let ranges: Vec<_> = [
            self.root.advised_range(),
            self.nodes.advised_range(),
            self.leaves.advised_range(),
        ]
        .into_iter()
        .flatten()
        .collect();
        crate::huge::huge_bytes_in(&ranges)
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, Writer> {
        // A panic while holding the lock cannot leave readers a broken
        // table (nothing is published until the final store).
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Install or replace `addr/len → nh` (writer side). Bits of `addr`
    /// past `len` are ignored. Returns the value it replaced.
    pub fn insert(&self, addr: u128, len: u8, nh: u32) -> Result<Option<u32>, LpmError> {
        if len > 128 {
            return Err(LpmError::BadLength);
        }
        if nh > MAX_NEXT_HOP {
            return Err(LpmError::BadNextHop);
        }
        let a = addr & mask128(len as u32);
        let mut w = self.writer();
        if w.nodes.room() < RESERVE.min(w.nodes.cap as usize / 4)
            || w.leaves.room() < RESERVE.min(w.leaves.cap as usize / 4)
        {
            return Err(LpmError::Full);
        }
        let old = w.prefixes.insert((a, len), nh);
        if old == Some(nh) {
            return Ok(old);
        }
        if old.is_none() {
            w.per_len[len as usize] += 1;
        }
        if let Err(e) = self.update(&mut w, a, len as u32) {
            match old {
                Some(v) => {
                    w.prefixes.insert((a, len), v);
                }
                None => {
                    w.prefixes.remove(&(a, len));
                    w.per_len[len as usize] -= 1;
                }
            }
            return Err(e);
        }
        Ok(old)
    }

    /// Remove `addr/len` (writer side). Returns its value.
    ///
    /// A removal rewrites the path above the prefix into fresh arrays.
    /// Inserts stop ([`LpmError::Full`]) while fewer than a reserve of
    /// [`RESERVE`] nodes and leaves are free, so a removal finds room; if
    /// even that runs out, the prefix stays installed and `None` is
    /// returned: reclaim and retry ([`Lpm6::try_remove`] says which).
    pub fn remove(&self, addr: u128, len: u8) -> Option<u32> {
        self.try_remove(addr, len).ok().flatten()
    }

    /// Remove `addr/len`, telling "not installed" (`Ok(None)`) apart from
    /// "no room to rewrite the path" (`Err(Full)`, the prefix stays):
    /// a writer that must not lose a withdrawal reclaims after a grace
    /// period and retries (`routing::Fib` does).
    pub fn try_remove(&self, addr: u128, len: u8) -> Result<Option<u32>, LpmError> {
        if len > 128 {
            return Err(LpmError::BadLength);
        }
        let a = addr & mask128(len as u32);
        let mut w = self.writer();
        let Some(old) = w.prefixes.remove(&(a, len)) else {
            return Ok(None);
        };
        w.per_len[len as usize] -= 1;
        if let Err(e) = self.update(&mut w, a, len as u32) {
            w.prefixes.insert((a, len), old);
            w.per_len[len as usize] += 1;
            return Err(e);
        }
        Ok(Some(old))
    }

    /// The value installed for exactly `addr/len` (writer-side state).
    pub fn get(&self, addr: u128, len: u8) -> Option<u32> {
        if len > 128 {
            return None;
        }
        let a = addr & mask128(len as u32);
        self.writer().prefixes.get(&(a, len)).copied()
    }

    /// Number of prefixes installed.
    pub fn len(&self) -> usize {
        self.writer().prefixes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Visit every prefix as `(addr, len, nh)`, in address order (takes
    /// the writer lock).
    pub fn for_each(&self, mut f: impl FnMut(u128, u8, u32)) {
        for (&(a, l), &v) in &self.writer().prefixes {
            f(a, l, v);
        }
    }

    /// Make arrays unlinked before the previous call reusable; returns how
    /// many node structs that freed. Between two calls every reader must
    /// have passed a quiescent point.
    pub fn reclaim(&self) -> usize {
        let mut w = self.writer();
        let w = &mut *w;
        let mut n = 0;
        for b in w.q_old.drain(..) {
            if b.node {
                w.nodes.free(b.at, b.len as usize);
                n += b.len as usize;
            } else {
                w.leaves.free(b.at, b.len as usize);
            }
        }
        std::mem::swap(&mut w.q_old, &mut w.q_new);
        n
    }

    pub fn stats(&self) -> LpmStats {
        let w = self.writer();
        let quarantined = w
            .q_new
            .iter()
            .chain(&w.q_old)
            .filter(|b| b.node)
            .map(|b| b.len as usize)
            .sum();
        LpmStats {
            prefixes: w.prefixes.len(),
            nodes: w.live_nodes,
            quarantined,
            lookup_bytes: (1 << ROOT_BITS) * 4
                + w.nodes.top as usize * 32
                + w.leaves.top as usize * 4,
            // BTreeMap: key + value + ~1/3 of a node's overhead per entry.
            control_bytes: w.prefixes.len() * 48,
        }
    }

    #[inline]
    fn node(&self, i: usize) -> NodeVal {
        let w = &self.nodes[self.node0 + i * 4..self.node0 + i * 4 + 3];
        let b = w[2].load(Ordering::Relaxed);
        NodeVal {
            vec: w[0].load(Ordering::Relaxed),
            leafvec: w[1].load(Ordering::Relaxed),
            leaf_base: b as u32,
            child_base: (b >> 32) as u32,
        }
    }

    fn set_node(&self, i: usize, n: NodeVal) {
        let w = &self.nodes[self.node0 + i * 4..self.node0 + i * 4 + 3];
        w[0].store(n.vec, Ordering::Relaxed);
        w[1].store(n.leafvec, Ordering::Relaxed);
        w[2].store(
            n.leaf_base as u64 | (n.child_base as u64) << 32,
            Ordering::Relaxed,
        );
    }

    /// Longest-prefix match of `addr` (reader side: lock-free, wait-free).
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let e = self.root[(addr >> (128 - ROOT_BITS)) as usize].load(Ordering::Acquire);
        if e & PTR == 0 {
            return e.checked_sub(1);
        }
        let mut n = (e & !PTR) as usize;
        let mut key = addr << ROOT_BITS;
        loop {
            let nd = &self.nodes[self.node0 + n * 4..self.node0 + n * 4 + 3];
            let vec = nd[0].load(Ordering::Relaxed);
            let s = (key >> (128 - STRIDE)) as usize;
            let m = upto(s);
            let b = nd[2].load(Ordering::Relaxed);
            if vec & (1 << s) != 0 {
                n = (b >> 32) as usize + (vec & m).count_ones() as usize - 1;
                key <<= STRIDE;
                continue;
            }
            let lv = nd[1].load(Ordering::Relaxed);
            let i = (b as u32) as usize + (lv & m).count_ones() as usize - 1;
            return self.leaves[i].load(Ordering::Relaxed).checked_sub(1);
        }
    }

    /// Look up a batch: `out[i] = lookup(addrs[i])`. Panics if the slices'
    /// lengths differ.
    ///
    /// Lookups run 16 at a time in lockstep, one trie level per pass, so
    /// the cache misses of 16 independent lookups overlap instead of
    /// queueing behind each other's dependent loads.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<u32>]) {
        assert_eq!(addrs.len(), out.len(), "lookup_batch: length mismatch");
        const LANES: usize = 16;
        for (a, o) in addrs.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let mut node = [0usize; LANES];
            let mut key = [0u128; LANES];
            let mut val = [0u32; LANES];
            let mut active = 0u32;
            for (i, &x) in a.iter().enumerate() {
                let e = self.root[(x >> (128 - ROOT_BITS)) as usize].load(Ordering::Acquire);
                if e & PTR == 0 {
                    val[i] = e;
                } else {
                    node[i] = (e & !PTR) as usize;
                    key[i] = x << ROOT_BITS;
                    active |= 1 << i;
                }
            }
            while active != 0 {
                let mut left = active;
                while left != 0 {
                    let i = left.trailing_zeros() as usize;
                    left &= left - 1;
                    let n = node[i];
                    let nd = &self.nodes[self.node0 + n * 4..self.node0 + n * 4 + 3];
                    let vec = nd[0].load(Ordering::Relaxed);
                    let s = (key[i] >> (128 - STRIDE)) as usize;
                    let m = upto(s);
                    let b = nd[2].load(Ordering::Relaxed);
                    if vec & (1 << s) != 0 {
                        node[i] = (b >> 32) as usize + (vec & m).count_ones() as usize - 1;
                        key[i] <<= STRIDE;
                    } else {
                        let lv = nd[1].load(Ordering::Relaxed);
                        let j = (b as u32) as usize + (lv & m).count_ones() as usize - 1;
                        val[i] = self.leaves[j].load(Ordering::Relaxed);
                        active &= !(1 << i);
                    }
                }
            }
            for (o, v) in o.iter_mut().zip(val) {
                *o = v.checked_sub(1);
            }
        }
    }

    // ---- writer side ----

    fn alloc(&self, w: &mut Writer, node: bool, n: usize) -> Result<u32, LpmError> {
        let a = if node { &mut w.nodes } else { &mut w.leaves };
        let at = a.alloc(n).ok_or(LpmError::Full)?;
        w.fresh.push(Block {
            node,
            at,
            len: n as u8,
        });
        if node {
            w.live_nodes += n;
        }
        Ok(at)
    }

    fn retire_block(w: &mut Writer, node: bool, at: u32, n: usize) {
        if n > 0 {
            w.retire.push(Block {
                node,
                at,
                len: n as u8,
            });
        }
    }

    /// Unlink `n`'s own arrays (not the subtrees below its children).
    fn retire_arrays(&self, w: &mut Writer, n: NodeVal) {
        Self::retire_block(w, true, n.child_base, n.vec.count_ones() as usize);
        Self::retire_block(w, false, n.leaf_base, n.leafvec.count_ones() as usize);
    }

    /// Unlink `n` and everything below it.
    fn retire_tree(&self, w: &mut Writer, n: NodeVal) {
        for k in 0..n.vec.count_ones() as usize {
            let c = self.node(n.child_base as usize + k);
            self.retire_tree(w, c);
        }
        self.retire_arrays(w, n);
    }

    /// The 64 slots of `n`: leaf values, and the children by slot.
    fn decode(&self, n: NodeVal) -> ([u32; 64], Vec<(usize, NodeVal)>) {
        let mut slots = [0u32; 64];
        let mut kids = Vec::with_capacity(n.vec.count_ones() as usize);
        for (s, v) in slots.iter_mut().enumerate() {
            let m = upto(s);
            if n.vec & (1 << s) != 0 {
                let c = n.child_base as usize + (n.vec & m).count_ones() as usize - 1;
                kids.push((s, self.node(c)));
            } else {
                let l = n.leaf_base as usize + (n.leafvec & m).count_ones() as usize - 1;
                *v = self.leaves[l].load(Ordering::Relaxed);
            }
        }
        (slots, kids)
    }

    /// Packs slots and children (sorted by slot) into fresh arrays; a node
    /// with no children and one value folds into a leaf.
    fn encode(
        &self,
        w: &mut Writer,
        slots: &[u32; 64],
        kids: &[(usize, NodeVal)],
    ) -> Result<Content, LpmError> {
        if kids.is_empty() && slots.iter().all(|&v| v == slots[0]) {
            return Ok(Content::Leaf(slots[0]));
        }
        let mut n = NodeVal::default();
        for &(s, _) in kids {
            n.vec |= 1 << s;
        }
        if !kids.is_empty() {
            n.child_base = self.alloc(w, true, kids.len())?;
            for (k, &(_, c)) in kids.iter().enumerate() {
                self.set_node(n.child_base as usize + k, c);
            }
        }
        let mut runs = [0u32; 64];
        let mut nruns = 0;
        for (s, &v) in slots.iter().enumerate() {
            if n.vec & (1 << s) == 0 && (nruns == 0 || runs[nruns - 1] != v) {
                n.leafvec |= 1 << s;
                runs[nruns] = v;
                nruns += 1;
            }
        }
        if nruns > 0 {
            n.leaf_base = self.alloc(w, false, nruns)?;
            for (k, &v) in runs[..nruns].iter().enumerate() {
                self.leaves[n.leaf_base as usize + k].store(v, Ordering::Relaxed);
            }
        }
        Ok(Content::Node(n))
    }

    /// Compiles the region of `depth` bits around `base` from `pfx`
    /// (sorted by address; entries not longer than `depth` are ignored);
    /// `def` is the value of its longest covering prefix, + 1.
    fn build(
        &self,
        w: &mut Writer,
        depth: u32,
        def: u32,
        pfx: &[(u128, u8, u32)],
    ) -> Result<Content, LpmError> {
        let mut short: Vec<(u8, usize, u32)> = pfx
            .iter()
            .filter(|p| p.1 as u32 > depth && p.1 as u32 <= depth + STRIDE)
            .map(|p| (p.1, slot(p.0, depth), p.2))
            .collect();
        let has_long = pfx.iter().any(|p| p.1 as u32 > depth + STRIDE);
        if short.is_empty() && !has_long {
            return Ok(Content::Leaf(def));
        }
        short.sort_unstable_by_key(|p| p.0);
        let mut slots = [def; 64];
        for (len, s, v) in short {
            let n = 1usize << (depth + STRIDE - len as u32);
            slots[s..s + n].fill(v);
        }
        let mut kids = Vec::new();
        if has_long {
            // Prefixes are sorted by address, so each slot's are contiguous.
            let mut i = 0;
            while i < pfx.len() {
                let s = slot(pfx[i].0, depth);
                let mut j = i;
                let mut long = false;
                while j < pfx.len() && slot(pfx[j].0, depth) == s {
                    long |= pfx[j].1 as u32 > depth + STRIDE;
                    j += 1;
                }
                if long {
                    match self.build(w, depth + STRIDE, slots[s], &pfx[i..j])? {
                        Content::Leaf(v) => slots[s] = v,
                        Content::Node(c) => kids.push((s, c)),
                    }
                }
                i = j;
            }
        }
        self.encode(w, &slots, &kids)
    }

    /// The prefixes inside `addr/depth` (value + 1), in address order.
    fn region(w: &Writer, addr: u128, depth: u32) -> Vec<(u128, u8, u32)> {
        let lo = addr & mask128(depth);
        let hi = lo | !mask128(depth);
        w.prefixes
            .range((lo, 0)..=(hi, 128))
            .map(|(&(a, l), &v)| (a, l, v + 1))
            .collect()
    }

    /// Value + 1 of the longest prefix of at most `depth` bits covering
    /// `addr`, 0 if none.
    fn covering(w: &Writer, addr: u128, depth: u32) -> u32 {
        for l in (0..=depth).rev() {
            if w.per_len[l as usize] > 0 {
                if let Some(v) = w.prefixes.get(&(addr & mask128(l), l as u8)) {
                    return v + 1;
                }
            }
        }
        0
    }

    /// Recompiles what `addr/len` changed (the writer's map already holds
    /// the new state) and publishes it.
    fn update(&self, w: &mut Writer, addr: u128, len: u32) -> Result<(), LpmError> {
        w.fresh.clear();
        w.retire.clear();
        let r = match self.update_inner(w, addr, len) {
            Ok(()) => {
                let retire = std::mem::take(&mut w.retire);
                for b in &retire {
                    if b.node {
                        w.live_nodes -= b.len as usize;
                    }
                }
                w.q_new.extend(retire);
                Ok(())
            }
            Err(e) => {
                // Nothing was published: give the new arrays back.
                for b in std::mem::take(&mut w.fresh) {
                    if b.node {
                        w.nodes.free(b.at, b.len as usize);
                        w.live_nodes -= b.len as usize;
                    } else {
                        w.leaves.free(b.at, b.len as usize);
                    }
                }
                Err(e)
            }
        };
        w.fresh.clear();
        w.retire.clear();
        r
    }

    fn update_inner(&self, w: &mut Writer, addr: u128, len: u32) -> Result<(), LpmError> {
        let ri = (addr >> (128 - ROOT_BITS)) as usize;
        if len <= ROOT_BITS {
            // Every first-level entry the prefix covers is recompiled: the
            // ones without longer prefixes below get the painted value of
            // the shortest-first prefixes ≤ ROOT_BITS, the others a node
            // each. All are built before any is published, so a failure
            // leaves the table as it was.
            let n = 1usize << (ROOT_BITS - len);
            let base = addr & mask128(len);
            let pfx = Self::region(w, base, len);
            let mut paint = vec![Self::covering(w, base, len); n];
            let mut short: Vec<&(u128, u8, u32)> = pfx
                .iter()
                .filter(|p| p.1 as u32 > len && p.1 as u32 <= ROOT_BITS)
                .collect();
            short.sort_unstable_by_key(|p| p.1);
            for p in short {
                let off = ((p.0 - base) >> (128 - ROOT_BITS)) as usize;
                paint[off..off + (1 << (ROOT_BITS - p.1 as u32))].fill(p.2);
            }
            let mut nodes: Vec<(usize, u32)> = Vec::new();
            let mut i = 0;
            while i < pfx.len() {
                let off = ((pfx[i].0 - base) >> (128 - ROOT_BITS)) as usize;
                let mut j = i;
                let mut long = false;
                while j < pfx.len() && ((pfx[j].0 - base) >> (128 - ROOT_BITS)) as usize == off {
                    long |= pfx[j].1 as u32 > ROOT_BITS;
                    j += 1;
                }
                if long {
                    let c = self.build(w, ROOT_BITS, paint[off], &pfx[i..j])?;
                    nodes.push((off, self.root_entry(w, c)?));
                }
                i = j;
            }
            for (off, e) in nodes {
                paint[off] = e;
            }
            for (off, &e) in paint.iter().enumerate() {
                let old = self.root[ri + off].load(Ordering::Relaxed);
                if old & PTR != 0 {
                    self.retire_tree(w, self.node((old & !PTR) as usize));
                }
                if old != e {
                    self.publish_root(w, ri + off, e);
                }
            }
            return Ok(());
        }
        let e = self.root[ri].load(Ordering::Relaxed);
        let mut cur;
        let mut path: Vec<(NodeVal, usize)> = Vec::new();
        if e & PTR == 0 {
            let pfx = Self::region(w, addr, ROOT_BITS);
            cur = self.build(w, ROOT_BITS, e, &pfx)?;
        } else {
            let mut n = self.node((e & !PTR) as usize);
            let mut depth = ROOT_BITS;
            loop {
                if len <= depth + STRIDE {
                    // The prefix ends in this node: recompile it.
                    let def = Self::covering(w, addr, depth);
                    let pfx = Self::region(w, addr, depth);
                    cur = self.build(w, depth, def, &pfx)?;
                    self.retire_tree(w, n);
                    break;
                }
                let s = slot(addr, depth);
                let m = upto(s);
                if n.vec & (1 << s) != 0 {
                    path.push((n, s));
                    let c = n.child_base as usize + (n.vec & m).count_ones() as usize - 1;
                    n = self.node(c);
                    depth += STRIDE;
                } else {
                    // The path ends at a leaf: build the slot's subtree.
                    let l = n.leaf_base as usize + (n.leafvec & m).count_ones() as usize - 1;
                    let def = self.leaves[l].load(Ordering::Relaxed);
                    let pfx = Self::region(w, addr, depth + STRIDE);
                    cur = self.build(w, depth + STRIDE, def, &pfx)?;
                    path.push((n, s));
                    break;
                }
            }
        }
        // Copy the path above, bottom up.
        while let Some((n, s)) = path.pop() {
            let (mut slots, mut kids) = self.decode(n);
            kids.retain(|k| k.0 != s);
            match cur {
                Content::Leaf(v) => slots[s] = v,
                Content::Node(c) => {
                    let at = kids.partition_point(|k| k.0 < s);
                    kids.insert(at, (s, c));
                }
            }
            cur = self.encode(w, &slots, &kids)?;
            self.retire_arrays(w, n);
        }
        let e = self.root_entry(w, cur)?;
        self.publish_root(w, ri, e);
        Ok(())
    }

    /// The first-level entry for `c` (a node gets a one-node array).
    fn root_entry(&self, w: &mut Writer, c: Content) -> Result<u32, LpmError> {
        Ok(match c {
            Content::Leaf(v) => v,
            Content::Node(n) => {
                let at = self.alloc(w, true, 1)?;
                self.set_node(at as usize, n);
                PTR | at
            }
        })
    }

    /// Stores first-level entry `i`; the caller retired what the old
    /// entry's node held, this retires the node's own one-node array.
    fn publish_root(&self, w: &mut Writer, i: usize, e: u32) {
        let old = self.root[i].load(Ordering::Relaxed);
        // Release: the arrays reachable from `e` were written before.
        self.root[i].store(e, Ordering::Release);
        if old & PTR != 0 {
            Self::retire_block(w, true, old & !PTR, 1);
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpm4::mask128;
    use crate::lpm6_check::*;

    #[test]
    fn basics_default_host_and_fallback() {
        crate::lpm6_check::basics_default_host_and_fallback(&Lpm6::with_nodes(64));
    }

    #[test]
    fn matches_reference_model() {
        crate::lpm6_check::matches_reference_model(&Lpm6::with_nodes(1 << 16), 50);
    }

    #[test]
    fn concurrent_readers_see_old_or_new() {
        crate::lpm6_check::concurrent_readers_see_old_or_new(Lpm6::with_nodes(1 << 17), 16, true);
    }

    /// First level and pools advised for 2 MB pages and 2 MB-aligned, and
    /// the nodes still 32-byte aligned from `node0`; a small table's not
    /// advised. Huge backing is reported, not required.
    #[test]
    fn arrays_on_huge_pages_unless_small() {
        use crate::huge::HUGE_PAGE;
        let t = Lpm6::with_nodes(1 << 16);
        assert!(t.root.advised() && t.nodes.advised() && t.leaves.advised());
        assert_eq!(t.root.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!((t.nodes.as_ptr() as usize + t.node0 * 8) % 32, 0);
        for i in 0..2000u128 {
            t.insert(0x2001_0db8_0000_0000_0000_0000_0000_0000 | i << 80, 48, 1)
                .unwrap();
        }
        t.reclaim();
        t.reclaim();
        assert_eq!(t.lookup(0x2001_0db8_0000_0001_0000_0000_0000_0001), Some(1));
        let h = t.huge_backed_bytes().unwrap();
        assert_eq!(h % HUGE_PAGE, 0);
        eprintln!("2,000 /48s: {} MiB on 2 MB pages", h >> 20);
        let s = Lpm6::with_backing(1 << 16, Backing::Small);
        assert!(!s.root.advised() && !s.nodes.advised() && !s.leaves.advised());
        assert_eq!(s.huge_backed_bytes(), Some(0));
    }

    #[test]
    fn full_pool_changes_nothing() {
        // 5,120 nodes, a quarter kept for removals; sparse /128s need ~18
        // nodes each plus the copied paths until a reclaim.
        let t = Lpm6::with_nodes(1024);
        let mut r = Rng(3);
        let mut model = Model::default();
        let refused = loop {
            let a = DOC ^ r.next128() >> 32;
            match t.insert(a, 128, 9) {
                Ok(_) => {
                    model.insert(a, 128, 9);
                }
                Err(e) => break (a, e),
            }
            assert!(model.0.len() < 10_000, "the pool never filled");
        };
        assert_eq!(refused.1, LpmError::Full);
        assert_eq!(t.len(), model.0.len());
        assert_eq!(t.lookup(refused.0), None);
        for p in &model.0 {
            assert_eq!(t.lookup(p.0), Some(9));
        }
        // Removals still find room in the reserve, and free the pool after
        // two reclaims.
        let half: Vec<_> = model.0.drain(..model.0.len() / 2).collect();
        for (i, p) in half.iter().enumerate() {
            assert_eq!(t.remove(p.0, 128), Some(9));
            if i % 10 == 9 {
                t.reclaim();
                t.reclaim();
            }
        }
        t.reclaim();
        t.reclaim();
        t.insert(refused.0, 128, 4).unwrap();
        assert_eq!(t.lookup(refused.0), Some(4));
        for p in &model.0 {
            assert_eq!(t.lookup(p.0), Some(9));
        }
        for p in &half {
            assert_eq!(t.lookup(p.0), None);
        }
    }

    #[test]
    fn removal_without_room_says_full_and_keeps_the_prefix() {
        // Fill the pool, then remove without reclaiming until even the
        // reserve is used up by copied paths: the failing removal must be
        // told apart from "not installed", leave the prefix matching, and
        // succeed once reclaims have run.
        let t = Lpm6::with_nodes(1024);
        let mut r = Rng(5);
        let mut live = Vec::new();
        while live.len() < 10_000 {
            let a = DOC ^ r.next128() >> 32;
            if t.insert(a, 128, 7).is_err() {
                break;
            }
            live.push(a);
        }
        let mut full_at = None;
        for (i, &a) in live.iter().enumerate() {
            match t.try_remove(a, 128) {
                Ok(Some(7)) => assert_eq!(t.lookup(a), None),
                Err(LpmError::Full) => {
                    full_at = Some(i);
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        let i = full_at.expect("removals never ran out of room");
        let a = live[i];
        assert_eq!(t.lookup(a), Some(7), "a refused removal changed the table");
        assert_eq!(t.get(a, 128), Some(7));
        assert_eq!(t.try_remove(DOC | 0xdead, 128), Ok(None));
        assert_eq!(t.try_remove(a, 129), Err(LpmError::BadLength));
        t.reclaim();
        t.reclaim();
        assert_eq!(t.try_remove(a, 128), Ok(Some(7)));
        assert_eq!(t.lookup(a), None);
        for &b in &live[i + 1..] {
            assert_eq!(t.lookup(b), Some(7));
        }
    }

    /// Differential test against the 8-bit trie it replaced, on the
    /// benchmark's kind of prefix set (provider /32s with /40–/64 and /128
    /// more-specifics, a few short prefixes), through churn: removals,
    /// re-inserts with other values, and reclaims.
    #[test]
    fn agrees_with_stride_trie_under_churn() {
        let prefixes = testkit::routes::v6_prefixes(20_000, 0x5eed, 0x2000_0000);
        let t = Lpm6::with_nodes(1 << 16);
        let old = crate::Lpm6Stride::with_nodes(1 << 16);
        for (i, &(a, l)) in prefixes.iter().enumerate() {
            t.insert(a, l, i as u32 % 97).unwrap();
            old.insert(a, l, i as u32 % 97).unwrap();
            if i % 512 == 0 {
                t.reclaim();
            }
        }
        let mut r = Rng(0x1234_5678);
        let check = |r: &mut Rng, n: usize| {
            for _ in 0..n {
                let (a, l) = prefixes[(r.next() % prefixes.len() as u64) as usize];
                let host = r.next128() & if l == 128 { 0 } else { !0u128 >> l };
                for x in [a | host, a, a.wrapping_sub(1), a | !mask128(l as u32)] {
                    assert_eq!(t.lookup(x), old.lookup(x), "{x:#x}");
                }
            }
        };
        check(&mut r, 20_000);
        for round in 0..6u32 {
            for k in 0..1500usize {
                let (a, l) = prefixes[(r.next() % prefixes.len() as u64) as usize];
                if (k + round as usize).is_multiple_of(3) {
                    assert_eq!(t.remove(a, l), old.remove(a, l));
                } else {
                    let v = 100 + r.next() as u32 % 5;
                    assert_eq!(t.insert(a, l, v).unwrap(), old.insert(a, l, v).unwrap());
                }
                if k % 256 == 0 {
                    t.reclaim();
                }
            }
            if round == 3 {
                // A default route and a short prefix over everything.
                t.insert(0, 0, 1).unwrap();
                old.insert(0, 0, 1).unwrap();
                t.insert(0x2000 << 112, 3, 2).unwrap();
                old.insert(0x2000 << 112, 3, 2).unwrap();
            }
            check(&mut r, 5_000);
            let addrs: Vec<u128> = (0..1000)
                .map(|_| r.next128() >> 3 | 0x2000 << 112)
                .collect();
            let mut out = vec![None; addrs.len()];
            t.lookup_batch(&addrs, &mut out);
            for (a, o) in addrs.iter().zip(&out) {
                assert_eq!(*o, old.lookup(*a));
            }
        }
        assert_eq!(t.len(), old.len());
    }
}
