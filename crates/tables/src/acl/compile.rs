//! Compiling a rule list into tables: normalising rules, choosing tuples
//! (greedy, lazy re-evaluation), bucketing and hashing.

use super::block::{place, Arr, Block, Packer};
use super::{
    ip_mask, ip_width, mac_u64, ClassifierStats, Match, TableStats, Words, BUCKET_CAP, MAX_TABLES,
};
use crate::prefetch;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

// Tuple dimensions: how many leading bits of each field a table hashes.
const SRC: usize = 0;
const DST: usize = 1;
const SPORT: usize = 2;
const DPORT: usize = 3;
const PROTO: usize = 4;
const DSCP: usize = 5;
const DMAC: usize = 6;
const SMAC: usize = 7;
const ETH: usize = 8;
const VLAN: usize = 9;
const NDIM: usize = 10;

/// A table's shape: the family all its rules require (which also fixes
/// the address width) and the leading bits hashed per dimension.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(crate) struct Tuple {
    family: Option<u8>,
    lens: [u8; NDIM],
}

impl Tuple {
    /// Whether a rule of tuple `r` can live in a table of tuple `self`:
    /// same family, and it specifies at least the table's bits everywhere.
    #[inline]
    fn admits(&self, r: &Tuple) -> bool {
        self.family == r.family && self.lens.iter().zip(&r.lens).all(|(t, r)| t <= r)
    }

    /// The coarse version the greedy phase starts from: addresses rounded
    /// down to a multiple of 8 (IPv4) or 16 (IPv6) bits, port and VLAN
    /// range prefixes to a multiple of 4, MACs exact, OUI (24 bits) or
    /// wild.
    fn relaxed(&self) -> Tuple {
        let step = if ip_width(self.family) == 128 { 16 } else { 8 };
        let mut l = self.lens;
        l[SRC] -= l[SRC] % step;
        l[DST] -= l[DST] % step;
        for d in [SPORT, DPORT, VLAN] {
            l[d] -= l[d] % 4;
        }
        for d in [DMAC, SMAC] {
            l[d] = match l[d] {
                48 => 48,
                24..=47 => 24,
                _ => 0,
            };
        }
        Tuple {
            family: self.family,
            lens: l,
        }
    }

    fn masks(&self) -> Masks {
        let w = ip_width(self.family);
        let l = &self.lens;
        let mut m = Masks {
            shape: Shape::Full,
            src: ip_mask(w, l[SRC] as u32),
            dst: ip_mask(w, l[DST] as u32),
            l4: pfx(16, l[SPORT])
                | pfx(16, l[DPORT]) << 16
                | pfx(8, l[PROTO]) << 32
                | pfx(8, l[DSCP]) << 40,
            l2: pfx(48, l[DMAC]) as u128
                | (pfx(48, l[SMAC]) as u128) << 48
                | (pfx(16, l[ETH]) as u128) << 96
                | (pfx(16, l[VLAN]) as u128) << 112,
        };
        m.shape = m.shape();
        m
    }

    fn bits(&self) -> u32 {
        self.lens.iter().map(|&l| l as u32).sum()
    }
}

/// The first `len` of the low `width` bits.
fn pfx(width: u32, len: u8) -> u64 {
    let ones = (1u64 << width) - 1;
    ones & !ones.checked_shr(len as u32).unwrap_or(0)
}

/// A table's hash masks over the key [`Words`].
#[derive(Clone, Copy)]
struct Masks {
    src: u128,
    dst: u128,
    l2: u128,
    l4: u64,
    /// Which hash serves the masks ([`Masks::shape`]).
    shape: Shape,
}

/// How many multiplies a table's hash needs, by what its masks keep.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    /// No L2, addresses within their low 32 bits (every IPv4 table): one.
    Narrow,
    /// No L2, addresses within their top 64 bits (IPv6 tables hashing
    /// /64 or shorter prefixes): two.
    Hi64,
    /// No L2 (other IPv6 tables): three.
    NoL2,
    /// Four.
    Full,
}

/// A rule's full verification form: value/mask per word, and three
/// ranges (`x - lo <= span`, wrapping). Compile-time only; tables store
/// it split into [`Hot`] and [`Cold`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct CRule {
    pub(super) src_v: u128,
    pub(super) src_m: u128,
    pub(super) dst_v: u128,
    pub(super) dst_m: u128,
    pub(super) l2_v: u128,
    pub(super) l2_m: u128,
    pub(super) l4_v: u64,
    pub(super) l4_m: u64,
    pub(super) prio: u32,
    pub(super) sport_lo: u16,
    pub(super) sport_span: u16,
    pub(super) dport_lo: u16,
    pub(super) dport_span: u16,
    pub(super) vlan_lo: u16,
    pub(super) vlan_span: u16,
}

/// A rule as lookup verifies it, one 64-byte cache line: addresses as
/// value and prefix length (the address matches when `addr ^ value` is
/// 0 under the mask of its first `length` bits), the L4 word's
/// value/mask (protocol, DSCP, TCP flags, family), both port ranges and
/// the priority. MACs, EtherType and VLAN, rarely set, live in the
/// table's parallel [`Cold`] array, read only when `cold` is set.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct Hot {
    pub(super) src_v: u128,
    pub(super) dst_v: u128,
    pub(super) l4_v: u64,
    pub(super) l4_m: u64,
    /// Priority; [`LAST`] marks a bucket's last rule.
    pub(super) prio: u32,
    pub(super) sport_lo: u16,
    pub(super) sport_span: u16,
    pub(super) dport_lo: u16,
    pub(super) dport_span: u16,
    pub(super) src_len: u8,
    pub(super) dst_len: u8,
    /// Whether the rule's [`Cold`] fields must be checked.
    pub(super) cold: bool,
}

const _: () = assert!(std::mem::size_of::<Hot>() == 64);

/// [`Hot`] for tables of 32-bit addresses (IPv4 and family-less rules):
/// 32 bytes, two rules a cache line. `l4_v`/`l4_m` are the top half of
/// the L4 word (protocol, DSCP, TCP flags, family; ports are ranges).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
pub(crate) struct Hot4 {
    pub(super) src_v: u32,
    pub(super) dst_v: u32,
    pub(super) l4_v: u32,
    pub(super) l4_m: u32,
    /// Priority; [`LAST`] marks a bucket's last rule.
    pub(super) prio: u32,
    pub(super) sport_lo: u16,
    pub(super) sport_span: u16,
    pub(super) dport_lo: u16,
    pub(super) dport_span: u16,
    pub(super) src_len: u8,
    pub(super) dst_len: u8,
    /// Whether the rule's [`Cold`] fields must be checked.
    pub(super) cold: bool,
}

const _: () = assert!(std::mem::size_of::<Hot4>() == 32);

impl Hot4 {
    fn of(h: &Hot) -> Hot4 {
        debug_assert!(h.src_v >> 32 == 0 && h.dst_v >> 32 == 0 && h.l4_m as u32 == 0);
        Hot4 {
            src_v: h.src_v as u32,
            dst_v: h.dst_v as u32,
            l4_v: (h.l4_v >> 32) as u32,
            l4_m: (h.l4_m >> 32) as u32,
            prio: h.prio,
            sport_lo: h.sport_lo,
            sport_span: h.sport_span,
            dport_lo: h.dport_lo,
            dport_span: h.dport_span,
            src_len: h.src_len,
            dst_len: h.dst_len,
            cold: h.cold,
        }
    }
}

/// What a bucket scan needs of a rule record.
pub(crate) trait Record {
    /// Priority with the [`LAST`] bit.
    fn prio(&self) -> u32;
    /// Whether the [`Cold`] record must be checked too.
    fn cold(&self) -> bool;
    /// Whether `w` matches every field but the cold ones.
    fn matches(&self, w: &Words) -> bool;
}

/// A rule's L2 fields (dst/src MAC, EtherType as value/mask; VLAN range).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cold {
    pub(super) l2_v: u128,
    pub(super) l2_m: u128,
    pub(super) vlan_lo: u16,
    pub(super) vlan_span: u16,
}

impl CRule {
    /// A record no key matches (an L4 value bit outside its mask).
    fn never() -> CRule {
        CRule {
            src_v: 0,
            src_m: 0,
            dst_v: 0,
            dst_m: 0,
            l2_v: 0,
            l2_m: 0,
            l4_v: 1 << 32,
            l4_m: 0,
            prio: u32::MAX,
            sport_lo: 0,
            sport_span: u16::MAX,
            dport_lo: 0,
            dport_span: u16::MAX,
            vlan_lo: 0,
            vlan_span: u16::MAX,
        }
    }

    /// Whether the rule matches every key.
    fn is_catch_all(&self) -> bool {
        self.src_m == 0
            && self.dst_m == 0
            && self.l2_m == 0
            && self.l4_m == 0
            && self.l4_v == 0
            && (self.sport_lo, self.sport_span) == (0, u16::MAX)
            && (self.dport_lo, self.dport_span) == (0, u16::MAX)
            && (self.vlan_lo, self.vlan_span) == (0, u16::MAX)
    }

    /// Whether the rule has L2 conditions (needs its [`Cold`] record).
    fn needs_cold(&self) -> bool {
        self.l2_m != 0 || self.vlan_lo != 0 || self.vlan_span != u16::MAX
    }

    fn split(&self) -> (Hot, Cold) {
        let len = |m: u128| m.count_ones() as u8;
        (
            Hot {
                src_v: self.src_v,
                dst_v: self.dst_v,
                l4_v: self.l4_v,
                l4_m: self.l4_m,
                prio: self.prio,
                sport_lo: self.sport_lo,
                sport_span: self.sport_span,
                dport_lo: self.dport_lo,
                dport_span: self.dport_span,
                src_len: len(self.src_m),
                dst_len: len(self.dst_m),
                cold: self.needs_cold(),
            },
            Cold {
                l2_v: self.l2_v,
                l2_m: self.l2_m,
                vlan_lo: self.vlan_lo,
                vlan_span: self.vlan_span,
            },
        )
    }
}

/// A rule being compiled: its exact tuple, the values its tuple bits
/// hash (a matching key agrees with them under any admitting table's
/// masks), and its verification form.
struct NRule {
    tuple: Tuple,
    hv: Words,
    c: CRule,
}

/// Earlier rules of the same group a rule is checked against for cover.
const SHADOW_CHECKS: usize = 16;

/// Whether every key `b` matches, `a` matches too.
fn covers(a: &CRule, b: &CRule) -> bool {
    let vm = |av: u128, am: u128, bv: u128, bm: u128| am & !bm == 0 && bv & am == av;
    let range = |alo: u16, aspan: u16, blo: u16, bspan: u16| {
        alo <= blo && blo as u32 + bspan as u32 <= alo as u32 + aspan as u32
    };
    vm(a.src_v, a.src_m, b.src_v, b.src_m)
        && vm(a.dst_v, a.dst_m, b.dst_v, b.dst_m)
        && vm(a.l2_v, a.l2_m, b.l2_v, b.l2_m)
        && vm(
            a.l4_v as u128,
            a.l4_m as u128,
            b.l4_v as u128,
            b.l4_m as u128,
        )
        && range(a.sport_lo, a.sport_span, b.sport_lo, b.sport_span)
        && range(a.dport_lo, a.dport_span, b.dport_lo, b.dport_span)
        && range(a.vlan_lo, a.vlan_span, b.vlan_lo, b.vlan_span)
}

/// Common leading bits of an inclusive range.
fn range_len(lo: u16, hi: u16) -> u8 {
    (lo ^ hi).leading_zeros() as u8
}

/// Normalise rule `prio`; `None` when nothing can match it.
fn normalise(prio: u32, m: &Match) -> Option<NRule> {
    let fam = m.family;
    let width = ip_width(fam);
    let mut lens = [0u8; NDIM];
    let (mut sv, mut sm, mut dv, mut dm) = (0u128, 0u128, 0u128, 0u128);
    if let Some((p, l)) = m.src_ip {
        let l = (l as u32).min(width);
        sm = ip_mask(width, l);
        sv = p & sm;
        lens[SRC] = l as u8;
    }
    if let Some((p, l)) = m.dst_ip {
        let l = (l as u32).min(width);
        dm = ip_mask(width, l);
        dv = p & dm;
        lens[DST] = l as u8;
    }
    let range = |r: Option<(u16, u16)>, dim: usize, lens: &mut [u8; NDIM]| match r {
        None => Some((0u16, u16::MAX)),
        Some((lo, hi)) if lo <= hi => {
            lens[dim] = range_len(lo, hi);
            Some((lo, hi - lo))
        }
        Some(_) => None,
    };
    let (sport_lo, sport_span) = range(m.src_port, SPORT, &mut lens)?;
    let (dport_lo, dport_span) = range(m.dst_port, DPORT, &mut lens)?;
    let (vlan_lo, vlan_span) = range(m.vlan, VLAN, &mut lens)?;

    let (mut l4_v, mut l4_m) = (0u64, 0u64);
    if let Some(p) = m.proto {
        l4_v |= (p as u64) << 32;
        l4_m |= 0xff << 32;
        lens[PROTO] = 8;
    }
    if let Some(d) = m.dscp {
        l4_v |= (d as u64) << 40;
        l4_m |= 0xff << 40;
        lens[DSCP] = 8;
    }
    if let Some((v, mask)) = m.tcp_flags {
        if v & !mask != 0 {
            return None;
        }
        l4_v |= (v as u64) << 48;
        l4_m |= (mask as u64) << 48;
    }
    if let Some(f) = fam {
        // Bit 63 is the fragment flag; the table checks the whole family.
        l4_v |= ((f & 0x7f) as u64) << 56;
        l4_m |= 0x7f << 56;
    }
    if let Some(f) = m.fragment {
        l4_v |= (f as u64) << 63;
        l4_m |= 1 << 63;
    }

    let (mut l2_v, mut l2_m) = (0u128, 0u128);
    let mut mac = |f: Option<([u8; 6], [u8; 6])>, shift: u32, dim: usize| {
        if let Some((v, mask)) = f {
            let mask = mac_u64(mask);
            l2_m |= (mask as u128) << shift;
            l2_v |= ((mac_u64(v) & mask) as u128) << shift;
            lens[dim] = ((mask << 16).leading_ones()).min(48) as u8;
        }
    };
    mac(m.dst_mac, 0, DMAC);
    mac(m.src_mac, 48, SMAC);
    if let Some(e) = m.ethertype {
        l2_v |= (e as u128) << 96;
        l2_m |= 0xffff << 96;
        lens[ETH] = 16;
    }

    let hv = Words {
        src: sv,
        dst: dv,
        l4: sport_lo as u64 | (dport_lo as u64) << 16 | l4_v & (0xffff << 32),
        l2: l2_v | (vlan_lo as u128) << 112,
    };
    Some(NRule {
        tuple: Tuple { family: fam, lens },
        hv,
        c: CRule {
            src_v: sv,
            src_m: sm,
            dst_v: dv,
            dst_m: dm,
            l2_v,
            l2_m,
            l4_v,
            l4_m,
            prio,
            sport_lo,
            sport_span,
            dport_lo,
            dport_span,
            vlan_lo,
            vlan_span,
        },
    })
}

#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = a as u128 * b as u128;
    p as u64 ^ (p >> 64) as u64
}

const K: [u64; 8] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377,
    0xbe54_66cf_34e9_0c6c,
    0xc0ac_29b7_c97c_50dd,
    0x3f84_d5b5_b547_0917,
];

/// Hash of masked key words (the same function at compile and lookup).
#[inline]
fn hash(src: u128, dst: u128, l2: u128, l4: u64) -> u64 {
    let a = fold(src as u64 ^ K[0], dst as u64 ^ K[1]);
    let b = fold((src >> 64) as u64 ^ K[2], (dst >> 64) as u64 ^ K[3]);
    let c = fold(l2 as u64 ^ K[4], (l2 >> 64) as u64 ^ K[5]);
    fold(a ^ l4 ^ K[6], b ^ c ^ K[7])
}

impl Masks {
    /// The 32 bits buckets are formed by and slots indexed with.
    fn tag(&self, w: &Words) -> u32 {
        (self.hash(w) >> 32) as u32
    }

    /// The cheapest hash that covers every bit the masks keep: a table
    /// that hashes nothing of L2 and at most the low 32 bits of each
    /// address (every IPv4 table) packs both into one word, one multiply
    /// with the L4 word; one that hashes only the top 64 bits of each
    /// address (IPv6 tables of /64 and shorter) needs two; other tables
    /// without L2 three; the rest four.
    fn shape(&self) -> Shape {
        const LO: u128 = u64::MAX as u128;
        if self.l2 != 0 {
            Shape::Full
        } else if self.src >> 32 == 0 && self.dst >> 32 == 0 {
            Shape::Narrow
        } else if self.src & LO == 0 && self.dst & LO == 0 {
            Shape::Hi64
        } else {
            Shape::NoL2
        }
    }

    #[inline]
    fn hash(&self, w: &Words) -> u64 {
        // IPv4 first, on its own test (a `match` of four compiles to a
        // jump table: an indirect branch every probe).
        if self.shape == Shape::Narrow {
            let a = (w.src & self.src) as u64 | ((w.dst & self.dst) as u64) << 32;
            return fold(
                a ^ 0x9e37_79b9_7f4a_7c15,
                w.l4 & self.l4 ^ 0xc2b2_ae3d_27d4_eb4f,
            );
        }
        let (s, d, l4) = (w.src & self.src, w.dst & self.dst, w.l4 & self.l4);
        match self.shape {
            Shape::Narrow | Shape::Hi64 => {
                let b = fold((s >> 64) as u64 ^ K[2], (d >> 64) as u64 ^ K[3]);
                fold(l4 ^ K[6], b ^ K[7])
            }
            Shape::NoL2 => {
                let a = fold(s as u64 ^ K[0], d as u64 ^ K[1]);
                let b = fold((s >> 64) as u64 ^ K[2], (d >> 64) as u64 ^ K[3]);
                fold(a ^ l4 ^ K[6], b ^ K[7])
            }
            Shape::Full => hash(s, d, w.l2 & self.l2, l4),
        }
    }
}

/// Bucket starts one [`Bin`] holds.
const BIN_LANES: usize = 8;

/// One cache line of a table's bucket index: the 32-bit hashes (tags)
/// of up to 8 buckets and where their rules start. Lookup compares all 8
/// tags at once (no probe loop, no branch on which lane): a table is
/// sized for about 3 buckets a bin, so a full bin is rare, and a bucket
/// whose home bin is full goes to the next bin with room, the full bins
/// on the way flagged ([`OVERFLOW`] in `starts[0]`). Free lanes hold tag
/// 0 and start [`DUMMY`]: a key whose tag is 0 may "find" one, and
/// verifies the never-matching record. Buckets are formed by the same
/// 32-bit hash, so a matching tag is the key's only possible bucket in
/// the table (lanes fill from 0, so a real bucket wins over free lanes).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bin {
    tags: [u32; BIN_LANES],
    starts: [u32; BIN_LANES],
}

const _: () = assert!(std::mem::size_of::<Bin>() == 64);

/// Flag in a bin's `starts[0]`: some bucket whose home is this bin (or
/// an earlier full one) lives in a later bin.
const OVERFLOW: u32 = 1 << 31;

/// Record index of the never-matching record every table's rules begin
/// with (the start of "no bucket").
pub(crate) const DUMMY: u32 = 0;

/// Buckets per bin a table is sized for.
const BIN_LOAD: usize = 3;

#[cfg(test)]
thread_local! {
    /// [`BIN_LOAD`] for this thread's compiles: tests raise it to fill
    /// bins and take the overflow path.
    pub(crate) static TEST_BIN_LOAD: std::cell::Cell<usize> = const { std::cell::Cell::new(BIN_LOAD) };
}

fn bin_load() -> usize {
    #[cfg(test)]
    return TEST_BIN_LOAD.with(|c| c.get());
    #[cfg(not(test))]
    BIN_LOAD
}

/// Bit of [`Hot::prio`] marking the last rule of a bucket.
pub(crate) const LAST: u32 = 1 << 31;

/// The lanes of `tags` equal to `h`, as a bit mask whose first set bit
/// [`lane_of`] reads: on x86_64 two SSE2 compares and a byte move-mask
/// (two bits a lane), elsewhere a bit a lane.
#[inline(always)]
fn lanes_eq(tags: &[u32; BIN_LANES], h: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        // SAFETY: SSE2 is baseline on x86_64; the two unaligned loads
        // read the 32 bytes of `tags`.
        unsafe {
            let k = _mm_set1_epi32(h as i32);
            let a = _mm_loadu_si128(tags.as_ptr() as *const __m128i);
            let b = _mm_loadu_si128(tags.as_ptr().add(4) as *const __m128i);
            let e = _mm_packs_epi32(_mm_cmpeq_epi32(a, k), _mm_cmpeq_epi32(b, k));
            _mm_movemask_epi8(e) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u32;
        for (j, &t) in tags.iter().enumerate() {
            m |= ((t == h) as u32) << j;
        }
        m
    }
}

/// The first lane set in a [`lanes_eq`] mask (0 if none).
#[inline(always)]
fn lane_of(m: u32) -> usize {
    #[cfg(target_arch = "x86_64")]
    let j = m.trailing_zeros() as usize / 2;
    #[cfg(not(target_arch = "x86_64"))]
    let j = m.trailing_zeros() as usize;
    j & (BIN_LANES - 1)
}

/// A compiled table, as lookup reads it.
pub(crate) struct Table {
    /// Priority of the table's best rule.
    pub(super) best: u32,
    /// Whether the table's rules require `family` (else they take any).
    pub(super) family_check: bool,
    pub(super) family: u8,
    /// Address width 128 (IPv6 rules), else 32.
    pub(super) v6: bool,
    masks: Masks,
    bin_mask: usize,
    /// The arrays below live in the classifier's [`Block`] (one
    /// allocation for every table, docs/acl.md "One block").
    bins: Arr<Bin>,
    /// The [`DUMMY`] record, then bucket after bucket (each in priority
    /// order): IPv6 tables' rules in `rules`, the others' in `rules4`
    /// (the other one is empty).
    rules: Arr<Hot>,
    rules4: Arr<Hot4>,
    /// Parallel to the rules; empty when no rule of the table has L2
    /// fields.
    cold: Arr<Cold>,
}

/// A table's arrays as compiled, before they are packed into the block.
pub(crate) struct Parts {
    bins: Vec<Bin>,
    rules: Vec<Hot>,
    rules4: Vec<Hot4>,
    cold: Vec<Cold>,
}

/// Copy every table's arrays into one block: all the bins first (every
/// lookup probes a bin in each table it is left), then the rule records,
/// then the cold L2 records (rarely read).
pub(crate) fn pack(tables: &mut [(Table, Parts)]) -> Block {
    let mut p = Packer::new();
    let bins: Vec<usize> = tables.iter().map(|(_, x)| p.reserve(&x.bins)).collect();
    let rules: Vec<(usize, usize)> = tables
        .iter()
        .map(|(_, x)| (p.reserve(&x.rules), p.reserve(&x.rules4)))
        .collect();
    let cold: Vec<usize> = tables.iter().map(|(_, x)| p.reserve(&x.cold)).collect();
    let mut block = p.block();
    for (i, (t, x)) in tables.iter_mut().enumerate() {
        t.bins = place(&mut block, bins[i], &x.bins);
        t.rules = place(&mut block, rules[i].0, &x.rules);
        t.rules4 = place(&mut block, rules[i].1, &x.rules4);
        t.cold = place(&mut block, cold[i], &x.cold);
    }
    block
}

impl Table {
    /// The bucket hash of `w` and its home bin.
    #[inline]
    pub(super) fn home(&self, w: &Words) -> (u32, usize) {
        let h = (self.masks.hash(w) >> 32) as u32;
        (h, h as usize & self.bin_mask)
    }

    /// Hint the cache to fetch home bin `i`.
    #[inline]
    pub(super) fn prefetch_slot(&self, i: usize) {
        prefetch(&self.bins[i]);
    }

    /// Hint the cache to fetch the first rule at `start`.
    #[inline]
    pub(super) fn prefetch_rule(&self, start: u32) {
        if self.v6 {
            if let Some(r) = self.rules.get(start as usize) {
                prefetch(r);
            }
        } else if let Some(r) = self.rules4.get(start as usize) {
            prefetch(r);
        }
    }

    /// Where the rules of bucket `h` (home bin `i`) start; [`DUMMY`] if
    /// the table has no such bucket. No branch unless the home bin
    /// overflowed and does not hold the bucket.
    #[inline]
    pub(super) fn find(&self, h: u32, i: usize) -> u32 {
        let b = &self.bins[i];
        let m = lanes_eq(&b.tags, h);
        // `&`, not `&&`: no branch on whether the key has a bucket here.
        if (m == 0) & (b.starts[0] & OVERFLOW != 0) {
            return self.find_overflow(h, i);
        }
        let s = b.starts[lane_of(m)] & !OVERFLOW;
        if m != 0 {
            s
        } else {
            DUMMY
        }
    }

    /// Bins flagged [`OVERFLOW`].
    #[cfg(test)]
    pub(super) fn overflowed_bins(&self) -> usize {
        self.bins
            .iter()
            .filter(|b| b.starts[0] & OVERFLOW != 0)
            .count()
    }

    /// [`find`](Self::find) past a full home bin.
    #[cold]
    fn find_overflow(&self, h: u32, mut i: usize) -> u32 {
        loop {
            i = (i + 1) & self.bin_mask;
            let b = &self.bins[i];
            let m = lanes_eq(&b.tags, h);
            if m != 0 {
                return b.starts[lane_of(m)] & !OVERFLOW;
            }
            if b.starts[0] & OVERFLOW == 0 {
                return DUMMY;
            }
        }
    }

    /// The first match better than `best` in the bucket starting at
    /// `start` ([`DUMMY`]: none), else `best`.
    #[inline(always)]
    pub(super) fn scan(&self, start: u32, w: &Words, best: u32) -> u32 {
        if !self.cold.is_empty() {
            return self.scan_cold(start, w, best);
        }
        if self.v6 {
            scan_l3(&self.rules, start, w, best)
        } else {
            scan_l3(&self.rules4, start, w, best)
        }
    }

    /// [`scan`](Self::scan) for tables with L2 rules (rare): out of
    /// line, so that the common scan inlines into lookup.
    #[inline(never)]
    fn scan_cold(&self, start: u32, w: &Words, best: u32) -> u32 {
        if self.v6 {
            scan_records(&self.rules, &self.cold, start, w, best)
        } else {
            scan_records(&self.rules4, &self.cold, start, w, best)
        }
    }
}

/// [`scan_records`] for tables without L2 fields (most): one branch per
/// record, taken at a match, the bucket's end or a rule that cannot beat
/// `best`, and the answer chosen without one (cachegrind, mixed IPv4 at
/// 32,292 rules: 6 % fewer instructions and a fifth fewer mispredicts a
/// lookup than the general scan).
#[inline(always)]
fn scan_l3<R: Record>(rules: &[R], start: u32, w: &Words, best: u32) -> u32 {
    for r in &rules[start as usize..] {
        let p = r.prio() & !LAST;
        let hit = (p < best) & r.matches(w);
        if hit | (r.prio() & LAST != 0) | (p >= best) {
            return if hit { p } else { best };
        }
    }
    best
}

/// The first match better than `best` in the bucket of `rules` starting
/// at `start`, else `best`.
#[inline]
fn scan_records<R: Record>(rules: &[R], cold: &[Cold], start: u32, w: &Words, best: u32) -> u32 {
    let start = start as usize;
    // One branch per rule, taken at the bucket's end or a match: the
    // rules are in priority order, so once `p >= best` none can win and
    // only the end remains to find.
    for (i, r) in rules[start..].iter().enumerate() {
        let p = r.prio() & !LAST;
        let hit = (p < best) & r.matches(w);
        let end = (r.prio() & LAST != 0) | (p >= best);
        if hit | end {
            if hit && (!r.cold() || cold[start + i].matches(w)) {
                return p;
            }
            if end {
                break;
            }
        }
    }
    best
}

/// A table being filled: buckets by 32-bit hash, rule ids in priority
/// order.
struct Builder {
    tuple: Tuple,
    masks: Masks,
    buckets: HashMap<u32, Vec<u32>>,
}

impl Builder {
    fn new(tuple: Tuple) -> Builder {
        Builder {
            tuple,
            masks: tuple.masks(),
            buckets: HashMap::new(),
        }
    }

    fn finish(self, rules: &[NRule]) -> (Table, Parts, TableStats) {
        let mut buckets: Vec<(u32, Vec<u32>)> = self.buckets.into_iter().collect();
        for b in &mut buckets {
            b.1.sort_unstable();
        }
        // Best bucket first: deterministic layout.
        buckets.sort_unstable_by_key(|b| b.1[0]);
        // About 3 buckets a bin: a full bin (8) is rare. At least one
        // free lane in all: the overflow walk ends at a bin not flagged.
        let n_bins = buckets
            .len()
            .div_ceil(bin_load())
            .max((buckets.len() + 1).div_ceil(BIN_LANES))
            .next_power_of_two();
        let mut bins = vec![
            Bin {
                tags: [0; BIN_LANES],
                starts: [DUMMY; BIN_LANES],
            };
            n_bins
        ];
        let mut used = vec![0u8; n_bins];
        let n_rules: usize = buckets.iter().map(|b| b.1.len()).sum();
        let v6 = ip_width(self.tuple.family) == 128;
        // The dummy first: never matches (an L4 value bit outside its
        // mask), last of its one-record "bucket".
        let (mut dummy, dummy_cold) = CRule::never().split();
        dummy.prio = LAST | !LAST;
        let mut crules: Vec<Hot> = Vec::with_capacity(n_rules + 1);
        let mut colds: Vec<Cold> = Vec::with_capacity(n_rules + 1);
        crules.push(dummy);
        colds.push(dummy_cold);
        let mut best = u32::MAX;
        let mut largest = 0;
        for (h, ids) in &buckets {
            let mut i = *h as usize & (n_bins - 1);
            while used[i] as usize == BIN_LANES {
                bins[i].starts[0] |= OVERFLOW;
                i = (i + 1) & (n_bins - 1);
            }
            let lane = used[i] as usize;
            used[i] += 1;
            bins[i].tags[lane] = *h;
            bins[i].starts[lane] = crules.len() as u32 | (bins[i].starts[lane] & OVERFLOW);
            largest = largest.max(ids.len());
            for &id in ids {
                best = best.min(rules[id as usize].c.prio);
                let (h, c) = rules[id as usize].c.split();
                crules.push(h);
                colds.push(c);
            }
            crules.last_mut().expect("buckets are not empty").prio |= LAST;
        }
        let crules_need_cold = crules.iter().any(|r| r.cold);
        let l = self.tuple.lens;
        let stats = TableStats {
            family: self.tuple.family,
            src_ip: l[SRC],
            dst_ip: l[DST],
            src_port: l[SPORT],
            dst_port: l[DPORT],
            proto: l[PROTO],
            dscp: l[DSCP],
            dst_mac: l[DMAC],
            src_mac: l[SMAC],
            ethertype: l[ETH],
            vlan: l[VLAN],
            rules: n_rules,
            buckets: buckets.len(),
            largest_bucket: largest,
            best_rule: best,
        };
        let table = Table {
            best,
            family_check: self.tuple.family.is_some(),
            family: self.tuple.family.unwrap_or(0),
            masks: self.masks,
            bin_mask: n_bins - 1,
            v6,
            bins: Arr::empty(),
            rules: Arr::empty(),
            rules4: Arr::empty(),
            cold: Arr::empty(),
        };
        let parts = Parts {
            bins,
            rules4: if v6 {
                Vec::new()
            } else {
                crules.iter().map(Hot4::of).collect()
            },
            rules: if v6 { crules } else { Vec::new() },
            cold: if crules_need_cold { colds } else { Vec::new() },
        };
        (table, parts, stats)
    }
}

/// How many of `ids` (priority order) a table of `tuple` would take with
/// at most [`BUCKET_CAP`] per bucket; which (`pick`), and which admitted
/// rules would be left over, with their bucket (`left`).
fn take(
    tuple: &Tuple,
    rules: &[NRule],
    ids: &[u32],
    mut pick: Option<&mut Vec<u32>>,
    mut left: Option<&mut Vec<(u32, u32)>>,
) -> usize {
    let masks = tuple.masks();
    let mut counts: HashMap<u32, usize> = HashMap::new();
    let mut n = 0;
    for &id in ids {
        let r = &rules[id as usize];
        if !tuple.admits(&r.tuple) {
            continue;
        }
        let tag = masks.tag(&r.hv);
        let c = counts.entry(tag).or_insert(0);
        if *c < BUCKET_CAP {
            *c += 1;
            n += 1;
            if let Some(p) = pick.as_deref_mut() {
                p.push(id);
            }
        } else if let Some(l) = left.as_deref_mut() {
            l.push((tag, id));
        }
    }
    n
}

/// New candidates to split overflowing buckets with: per bucket, the
/// tuple all its left-over rules admit, and the left-over rules' own
/// tuples (at most [`REFINE`] in all).
fn refinements(rules: &[NRule], left: &mut [(u32, u32)]) -> Vec<Tuple> {
    left.sort_unstable();
    let mut out: Vec<Tuple> = Vec::new();
    for bucket in left.chunk_by(|a, b| a.0 == b.0) {
        let mut meet = rules[bucket[0].1 as usize].tuple;
        for &(_, id) in bucket {
            let t = rules[id as usize].tuple;
            for d in 0..NDIM {
                meet.lens[d] = meet.lens[d].min(t.lens[d]);
            }
        }
        out.push(meet);
    }
    out.extend(left.iter().map(|&(_, id)| rules[id as usize].tuple));
    out.sort_unstable();
    out.dedup();
    out.truncate(REFINE);
    out
}

/// Most candidates one refinement adds.
const REFINE: usize = 32;

/// Compile `list` into tables in lookup order, with their statistics.
pub(crate) fn build(list: &[Match]) -> (Vec<Table>, Block, Vec<Members>, ClassifierStats) {
    let mut rules: Vec<NRule> = Vec::with_capacity(list.len());
    let mut unmatchable = 0;
    let mut shadowed = 0;
    // Rules with the same tuple and hashed values, kept so far: a rule
    // covered by one of (the first few of) them can never be the first
    // match, so it is left out. Catches repeated rules cheaply.
    type Group = (Tuple, u128, u128, u128, u64);
    let mut groups: HashMap<Group, Vec<u32>> = HashMap::new();
    // The first rule that matches every key (`permit any` closing a
    // list): no table, it is lookup's starting answer, and the rules
    // after it can never be the first match.
    let mut default_rule = None;
    for (i, m) in list.iter().enumerate() {
        let Some(r) = normalise(i as u32, m) else {
            unmatchable += 1;
            continue;
        };
        if r.c.is_catch_all() {
            default_rule = Some(i as u32);
            shadowed += list.len() - i - 1;
            break;
        }
        let g = groups
            .entry((r.tuple, r.hv.src, r.hv.dst, r.hv.l2, r.hv.l4))
            .or_default();
        if g.iter().any(|&k| covers(&rules[k as usize].c, &r.c)) {
            shadowed += 1;
            continue;
        }
        if g.len() < SHADOW_CHECKS {
            g.push(rules.len() as u32);
        }
        rules.push(r);
    }
    drop(groups);

    // Candidate tuples: the relaxed tuple of every rule.
    let mut cands: Vec<Tuple> = rules.iter().map(|r| r.tuple.relaxed()).collect();
    cands.sort_unstable();
    cands.dedup();
    let mut known: std::collections::HashSet<Tuple> = cands.iter().copied().collect();

    // Lazy greedy: a candidate's score (rules it would take) only falls as
    // rules are placed, so a re-evaluated top that still beats the next
    // stale score is the true best.
    let mut remaining: Vec<u32> = (0..rules.len() as u32).collect();
    let mut heap: BinaryHeap<(usize, u32, Reverse<usize>)> = cands
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (
                take(t, &rules, &remaining, None, None),
                t.bits(),
                Reverse(i),
            )
        })
        .filter(|c| c.0 > 0)
        .collect();
    let mut builders: Vec<Builder> = Vec::new();
    let mut placed = vec![false; rules.len()];
    while !remaining.is_empty() && builders.len() < MAX_TABLES {
        let Some((_, bits, Reverse(ci))) = heap.pop() else {
            break;
        };
        let score = take(&cands[ci], &rules, &remaining, None, None);
        if score == 0 {
            continue;
        }
        if heap
            .peek()
            .is_some_and(|top| (score, bits) < (top.0, top.1))
        {
            heap.push((score, bits, Reverse(ci)));
            continue;
        }
        let mut ids = Vec::with_capacity(score);
        let mut left = Vec::new();
        take(
            &cands[ci],
            &rules,
            &remaining,
            Some(&mut ids),
            Some(&mut left),
        );
        // Buckets overflow: offer more specific tuples for the rules left
        // over before settling (TupleMerge's bucket split, done ahead).
        let mut added = false;
        for t in refinements(&rules, &mut left) {
            if known.insert(t) {
                let sc = take(&t, &rules, &remaining, None, None);
                cands.push(t);
                heap.push((sc, t.bits(), Reverse(cands.len() - 1)));
                added = true;
            }
        }
        if added {
            heap.push((score, bits, Reverse(ci)));
            continue;
        }
        let mut b = Builder::new(cands[ci]);
        for &id in &ids {
            placed[id as usize] = true;
            b.buckets
                .entry(b.masks.tag(&rules[id as usize].hv))
                .or_default()
                .push(id);
        }
        builders.push(b);
        remaining.retain(|&id| !placed[id as usize]);
        heap.push((score, bits, Reverse(ci)));
    }

    // Past the table bound: each remaining rule joins the admitting table
    // where its bucket is shortest; rules no table admits share one table
    // per family with the tuple every one of them admits.
    let overflow_rules = remaining.len();
    let mut orphans: Vec<u32> = Vec::new();
    for &id in &remaining {
        let r = &rules[id as usize];
        let best = builders
            .iter_mut()
            .filter(|b| b.tuple.admits(&r.tuple))
            .map(|b| {
                let h = b.masks.tag(&r.hv);
                let n = b.buckets.get(&h).map_or(0, |v| v.len());
                (n, b, h)
            })
            .min_by_key(|x| x.0);
        match best {
            Some((_, b, h)) => b.buckets.entry(h).or_default().push(id),
            None => orphans.push(id),
        }
    }
    let mut meets: Vec<Tuple> = Vec::new();
    for &id in &orphans {
        let t = rules[id as usize].tuple;
        match meets.iter_mut().find(|m| m.family == t.family) {
            Some(m) => {
                for d in 0..NDIM {
                    m.lens[d] = m.lens[d].min(t.lens[d]);
                }
            }
            None => meets.push(t),
        }
    }
    for m in meets {
        let mut b = Builder::new(m);
        for &id in &orphans {
            if rules[id as usize].tuple.family == m.family {
                b.buckets
                    .entry(b.masks.tag(&rules[id as usize].hv))
                    .or_default()
                    .push(id);
            }
        }
        builders.push(b);
    }

    let mut done: Vec<((Table, Parts), TableStats, Vec<u32>)> = builders
        .into_iter()
        .map(|b| {
            let ids: Vec<u32> = b.buckets.values().flatten().copied().collect();
            let (t, x, s) = b.finish(&rules);
            ((t, x), s, ids)
        })
        .collect();
    done.sort_by_key(|t| t.0 .0.best);
    // What the first level is built from (`cut::build`, docs/acl.md).
    let members: Vec<Members> = done
        .iter()
        .map(|(_, s, ids)| (s.family, ids.iter().map(|&i| rules[i as usize].c).collect()))
        .collect();
    let mut stats = ClassifierStats {
        unmatchable,
        shadowed,
        default_rule,
        overflow_rules,
        tables: done.len(),
        ..Default::default()
    };
    let mut tables = Vec::with_capacity(done.len());
    for (t, s, _) in done {
        stats.buckets += s.buckets;
        stats.largest_bucket = stats.largest_bucket.max(s.largest_bucket);
        stats.per_table.push(s);
        tables.push(t);
    }
    let block = pack(&mut tables);
    let tables = tables.into_iter().map(|(t, _)| t).collect();
    (tables, block, members, stats)
}

/// A table's family and rules, in lookup order: what the first level is
/// built from.
pub(crate) type Members = (Option<u8>, Vec<CRule>);

/// Heap bytes of compiled tables: their headers and their block.
pub(crate) fn heap_bytes(tables: &[Table], block: &Block) -> usize {
    std::mem::size_of_val(tables) + block.bytes()
}

impl Table {
    /// Whether lookup in this table reads the key's L2 word (hashes MAC,
    /// EtherType or VLAN bits, or has rules with L2 conditions).
    pub(super) fn uses_l2(&self) -> bool {
        self.masks.l2 != 0 || !self.cold.is_empty()
    }

    /// The address ranges of the table's arrays (tests: they must lie in
    /// the block).
    #[cfg(test)]
    pub(super) fn ranges(&self) -> [(usize, usize); 4] {
        [
            self.bins.range(),
            self.rules.range(),
            self.rules4.range(),
            self.cold.range(),
        ]
    }
}

#[cfg(test)]
mod hash_tests {
    use super::*;

    fn tuple(family: Option<u8>, lens: [u8; NDIM]) -> Tuple {
        Tuple { family, lens }
    }

    /// Each table gets the cheapest hash that still reads every bit its
    /// masks keep: flipping any kept bit of a key changes the tag (up to
    /// a 2^-32 collision, not met by these seeds), flipping a bit the
    /// masks drop never does. A hash shape that skipped a word the table
    /// hashes (Hi64 for a /96 table, say) fails the first half.
    #[test]
    fn hash_shapes_cover_the_kept_bits() {
        let mut l = [0u8; NDIM];
        let cases = [
            (
                tuple(Some(4), {
                    l[SRC] = 24;
                    l[DST] = 32;
                    l[DPORT] = 16;
                    l[PROTO] = 8;
                    l
                }),
                Shape::Narrow,
            ),
            (
                tuple(Some(6), {
                    l = [0; NDIM];
                    l[SRC] = 48;
                    l[DST] = 64;
                    l[PROTO] = 8;
                    l
                }),
                Shape::Hi64,
            ),
            (
                tuple(Some(6), {
                    l = [0; NDIM];
                    l[DST] = 96;
                    l[SPORT] = 16;
                    l
                }),
                Shape::NoL2,
            ),
            (
                tuple(Some(6), {
                    l = [0; NDIM];
                    l[SRC] = 128;
                    l
                }),
                Shape::NoL2,
            ),
            (
                tuple(None, {
                    l = [0; NDIM];
                    l[DMAC] = 48;
                    l[SRC] = 8;
                    l
                }),
                Shape::Full,
            ),
            (
                tuple(Some(4), {
                    l = [0; NDIM];
                    l[VLAN] = 12;
                    l
                }),
                Shape::Full,
            ),
        ];
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for (t, shape) in cases {
            let m = t.masks();
            assert_eq!(m.shape, shape, "{t:?}");
            for _ in 0..20 {
                let w = Words {
                    src: (next() as u128) << 64 | next() as u128,
                    dst: (next() as u128) << 64 | next() as u128,
                    l2: (next() as u128) << 64 | next() as u128,
                    l4: next(),
                };
                let tag = m.tag(&w);
                let words = [(0, m.src), (1, m.dst), (2, m.l2), (3, m.l4 as u128)];
                for (which, mask) in words {
                    for bit in 0..128 {
                        let mut v = w;
                        let x = 1u128 << bit;
                        match which {
                            0 => v.src ^= x,
                            1 => v.dst ^= x,
                            2 => v.l2 ^= x,
                            _ if bit < 64 => v.l4 ^= x as u64,
                            _ => continue,
                        }
                        let kept = mask & x != 0;
                        assert_eq!(m.tag(&v) != tag, kept, "{t:?} word {which} bit {bit}");
                    }
                }
            }
        }
    }
}
