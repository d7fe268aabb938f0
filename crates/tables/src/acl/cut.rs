//! The first level: which tables a key can find its match in, by cuts
//! on four fields (docs/acl.md, "First level").
//!
//! For one family, each of the source address, destination address,
//! destination port and protocol is cut into cells (a window of up to
//! 12 bits of the field; 256 protocols); a cell holds the set of tables
//! (a bit per table) with at least one rule whose range or prefix meets
//! the cell. A key reads one cell per field and ANDs them: a table with
//! a rule the key matches has its bit in all four, so a clear bit proves
//! the table holds no match and lookup skips its probe. The sets only
//! ever over-approximate, so the first match is unchanged; nothing is
//! replicated, and memory is three arrays of at most 2^12 two-byte
//! cells and one of 256 whatever the rules (24.5 KiB a family).

use super::compile::{CRule, Members};
use super::Words;

/// Tables a cell tracks (bit i = table i); the tables past them are
/// always probed.
pub(crate) const CUT_TABLES: usize = 16;

/// Most bits a field's window takes (cells per field: 2^bits). 12 keeps
/// a family's cells (~25 KiB) in L1/L2: the cells are read before any
/// probe, so a miss on them delays every probe. At 16 bits (~400 KiB)
/// the mixed IPv4 set left 2.8 tables a key instead of 3.1 but added an
/// L2 miss a lookup (cachegrind), a wash or worse.
const MAX_BITS: u32 = 12;

/// One field's cells.
pub(crate) struct Dim {
    /// Right shift of the field to its window.
    shift: u32,
    /// Cells - 1 (0: the field filters nothing, one cell of all tables).
    mask: usize,
    cells: Box<[u16]>,
}

impl Dim {
    #[inline]
    fn at(&self, i: usize) -> u16 {
        self.cells[i & self.mask]
    }

    /// One cell holding every tracked table: the field filters nothing.
    fn all(tracked: u16) -> Dim {
        Dim {
            shift: 0,
            mask: 0,
            cells: Box::new([tracked]),
        }
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.cells)
    }
}

/// The cut of one family's tables.
pub(crate) struct Cut {
    v6: bool,
    src: Dim,
    dst: Dim,
    dport: Dim,
    proto: Dim,
    /// Tables probed whatever the cells say: past [`CUT_TABLES`], or of
    /// no family (their addresses read as 32 bits of any key).
    always: u64,
}

impl Cut {
    /// The tables (bit i = table i, in lookup order) that may hold a
    /// rule `w`, of this cut's family, matches.
    #[inline]
    pub(crate) fn tables(&self, w: &Words) -> u64 {
        let (s, d) = if self.v6 {
            (
                (w.src >> self.src.shift) as usize,
                (w.dst >> self.dst.shift) as usize,
            )
        } else {
            // IPv4 tables read the low 32 bits only.
            (
                (w.src as u32 >> self.src.shift) as usize,
                (w.dst as u32 >> self.dst.shift) as usize,
            )
        };
        let dp = ((w.l4 >> 16) as u16 >> self.dport.shift) as usize;
        let p = (w.l4 >> 32) as u8 as usize;
        (self.src.at(s) & self.dst.at(d) & self.dport.at(dp) & self.proto.at(p)) as u64
            | self.always
    }

    pub(crate) fn bytes(&self) -> usize {
        self.src.bytes() + self.dst.bytes() + self.dport.bytes() + self.proto.bytes()
    }

    /// Cells per address and port field (1 when a field filters nothing).
    pub(crate) fn cells(&self) -> [usize; 4] {
        [
            self.src.mask + 1,
            self.dst.mask + 1,
            self.dport.mask + 1,
            self.proto.mask + 1,
        ]
    }
}

/// An inclusive range of cells.
type Span = (usize, usize);

/// Cells of a window of `bits` bits taken `shift` bits up a `width`-bit
/// field met by prefix `v`/`len`.
fn prefix_cells(v: u128, len: u32, width: u32, shift: u32, bits: u32) -> Span {
    // Window bits the prefix fixes: those above `shift + bits - ...`.
    let top = width - shift; // bits of the field above the window's bottom
    let fixed = len.saturating_sub(top - bits).min(bits);
    let free = bits - fixed;
    let idx = ((v >> shift) as usize) & ((1usize << bits) - 1);
    let lo = idx & !((1usize << free) - 1);
    (lo, lo | ((1usize << free) - 1))
}

/// Leading bits two `width`-bit values share.
fn common(a: u128, b: u128, width: u32) -> u32 {
    ((a ^ b) << (128 - width)).leading_zeros().min(width)
}

/// Where a `width`-bit address field's window starts (bits from the
/// top): the bits every rule's prefix agrees on are skipped (IPv6 lists
/// under one /32 would otherwise all fall in one cell).
fn window_start(prefixes: impl Iterator<Item = (u128, u32)>, width: u32, bits: u32) -> u32 {
    let mut first: Option<u128> = None;
    let mut start = width;
    for (v, len) in prefixes.filter(|p| p.1 > 0) {
        let r = *first.get_or_insert(v);
        start = start.min(len).min(common(v, r, width));
    }
    start.min(width - bits)
}

/// Fill a field's cells: `spans(t)` lists the cell spans of table `t`'s
/// rules. A field whose every cell holds every tracked table collapses
/// to [`Dim::all`].
fn fill(
    tracked: u16,
    n: usize,
    cells: usize,
    shift: u32,
    spans: impl Fn(usize) -> Vec<Span>,
) -> Dim {
    let mut out = vec![0u16; cells];
    let mut diff = vec![0i32; cells + 1];
    for t in 0..n {
        if tracked & (1 << t) == 0 {
            continue;
        }
        diff.iter_mut().for_each(|d| *d = 0);
        for (lo, hi) in spans(t) {
            diff[lo] += 1;
            diff[hi + 1] -= 1;
        }
        let mut run = 0;
        for (o, d) in out.iter_mut().zip(&diff) {
            run += d;
            if run > 0 {
                *o |= 1 << t;
            }
        }
    }
    if out.iter().all(|&c| c == tracked) {
        return Dim::all(tracked);
    }
    Dim {
        shift,
        mask: cells - 1,
        cells: out.into_boxed_slice(),
    }
}

/// The cut for `family`'s keys over tables (in lookup order) of the
/// given families and rules; `None` when it would filter nothing (no
/// table of the family among the first [`CUT_TABLES`], or more than 64
/// tables in all).
pub(crate) fn build(family: u8, tables: &[Members]) -> Option<Cut> {
    if tables.len() > 64 {
        return None;
    }
    let n = tables.len().min(CUT_TABLES);
    let mut tracked = 0u16;
    let mut always = 0u64;
    for (i, (f, _)) in tables.iter().enumerate() {
        match *f {
            Some(f) if f == family && i < CUT_TABLES => tracked |= 1 << i,
            Some(f) if f == family => always |= 1 << i,
            Some(_) => {}
            None => always |= 1 << i,
        }
    }
    if tracked == 0 {
        return None;
    }
    let rules = || {
        tables[..n]
            .iter()
            .enumerate()
            .filter(move |(i, _)| tracked & (1 << i) != 0)
            .flat_map(|(_, t)| t.1.iter())
    };
    // Two to four cells per rule, up to 2^MAX_BITS.
    let count = rules().count().max(1);
    let bits = (usize::BITS - count.leading_zeros() + 1).clamp(4, MAX_BITS);
    let cells = 1usize << bits;
    let v6 = family == 6;
    let width = if v6 { 128 } else { 32 };
    let len = |m: u128| m.count_ones();

    // Each address field's window: from the first bit the rules do not
    // all share, then every 8 bits down; the one that leaves the rules'
    // own cells the fewest tables (keys come from the rules' space).
    let addr_dim = |field: fn(&CRule) -> (u128, u128)| -> Dim {
        let first = window_start(rules().map(|r| (field(r).0, len(field(r).1))), width, bits);
        let mut best: Option<(usize, Dim)> = None;
        for start in (first..=width - bits).step_by(8) {
            let shift = width - start - bits;
            let dim = fill(tracked, n, cells, shift, |t| {
                tables[t]
                    .1
                    .iter()
                    .map(|r| prefix_cells(field(r).0, len(field(r).1), width, shift, bits))
                    .collect()
            });
            let score: usize = rules()
                .map(|r| dim.at((field(r).0 >> shift) as usize).count_ones() as usize)
                .sum();
            if best.as_ref().is_none_or(|b| score < b.0) {
                best = Some((score, dim));
            }
            if best.as_ref().is_some_and(|b| b.1.mask == 0) {
                // Filters nothing from here down either.
                break;
            }
        }
        best.map_or(Dim::all(tracked), |b| b.1)
    };
    let src = addr_dim(|r| (r.src_v, r.src_m));
    let dst = addr_dim(|r| (r.dst_v, r.dst_m));
    let pshift = 16 - bits;
    let dport = fill(tracked, n, cells, pshift, |t| {
        tables[t]
            .1
            .iter()
            .map(|r| {
                let hi = r.dport_lo as u32 + r.dport_span as u32;
                (
                    (r.dport_lo >> pshift) as usize,
                    (hi.min(u16::MAX as u32) >> pshift) as usize,
                )
            })
            .collect()
    });
    let proto = fill(tracked, n, 256, 0, |t| {
        tables[t]
            .1
            .iter()
            .map(|r| {
                if (r.l4_m >> 32) as u8 == 0xff {
                    let p = (r.l4_v >> 32) as u8 as usize;
                    (p, p)
                } else {
                    (0, 255)
                }
            })
            .collect()
    });
    let cut = Cut {
        v6,
        src,
        dst,
        dport,
        proto,
        always,
    };
    // Worth its reads only if it leaves the rules' own keys (bits of
    // their values) clearly fewer tables than there are.
    let left: usize = rules()
        .map(|r| {
            let w = Words {
                src: r.src_v,
                dst: r.dst_v,
                l2: 0,
                l4: (r.dport_lo as u64) << 16 | r.l4_v & (0xff << 32),
            };
            (cut.tables(&w) & tracked as u64).count_ones() as usize
        })
        .sum();
    (left * 4 < count * 3 * tracked.count_ones() as usize).then_some(cut)
}
