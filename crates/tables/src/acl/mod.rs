//! ACL packet classifier: first-match over an ordered rule list, compiled
//! into a TupleMerge-style tuple space (Daly & Torng, 2017).
//!
//! Terms: a *rule* is a [`Match`] and its index in the list (its
//! *priority*: lower wins); a *key* ([`AclKey`]) is what the pipeline
//! extracted from a frame; a *tuple* is, for each hashed field, how many
//! leading bits a table hashes (source /24, destination /32, destination
//! port exact, protocol exact, …); a *table* is a hash table whose rules
//! all specify at least their tuple's bits, keyed on those bits; a
//! *bucket* is the rules of one table whose masked fields hash alike.
//!
//! Lookup masks the key with each table's tuple, hashes it, finds the
//! one bucket it can be in (one 64-byte bin of eight bucket tags compared
//! at once) and verifies the (at most [`BUCKET_CAP`], in practice) rules
//! of that bucket, best priority first — the first two without a branch,
//! so the out-of-order core overlaps the tables. Tables are sorted by
//! their best rule, so the scan stops as soon as the best match found
//! beats the next table's best rule; a rule that matches every key (a
//! closing `permit any`) is no table but the answer lookup starts from.
//! Cost is one hash probe per table, whatever the rule count;
//! the compiler's job is to keep the table count low (greedy: the tuple
//! that places the most rules into buckets of at most [`BUCKET_CAP`]
//! first, from coarse candidate tuples) and bounded ([`MAX_TABLES`]).
//! Design, bounds and figures: `docs/acl.md`.
//!
//! The compiled structure is immutable and plain data (`Send + Sync`);
//! [`Classifier::lookup`] does not allocate, lock or make system calls.
//! A changed list is compiled anew and published like any snapshot.

mod block;
mod compile;
mod cut;
#[cfg(test)]
mod tests;

use block::Block;
pub use block::HUGE_MIN_BYTES;
use compile::{Cold, Hot, Hot4, Record, Table};
use cut::Cut;

/// Most rules a bucket holds when the compiler can choose (rules that
/// agree on every hashable bit of the table's tuple may exceed it; see
/// [`ClassifierStats::largest_bucket`]).
pub const BUCKET_CAP: usize = 8;

/// Tables the greedy phase builds; past it, remaining rules join the
/// existing table (of their family) where they lengthen a bucket least,
/// and rules fitting none share one last table per family class.
pub const MAX_TABLES: usize = 32;

/// Tables [`Classifier::lookup_batch`] probes for a group of keys
/// before verifying (tables past it: per key).
const LANES: usize = 16;

/// Below this size the compiled structure stays in cache:
/// [`Classifier::lookup_batch`] looks keys up one by one.
const BATCH_MIN_BYTES: usize = 256 << 10;

/// Keys [`Classifier::lookup_batch`] interleaves.
pub const BATCH: usize = 8;

/// What the classifier looks at, extracted from a frame by the pipeline.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct AclKey {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// EtherType after any VLAN tags.
    pub ethertype: u16,
    /// VLAN the frame is in (0 = none/routed).
    pub vlan: u16,
    /// 0 = not IP, 4 = IPv4, 6 = IPv6.
    pub family: u8,
    /// Addresses; IPv4 in the low 32 bits.
    pub src_ip: u128,
    pub dst_ip: u128,
    pub proto: u8,
    /// TCP/UDP/SCTP ports; ICMP/ICMPv6: type in src_port, code in dst_port; 0 otherwise
    /// (and 0 for non-initial fragments).
    pub src_port: u16,
    pub dst_port: u16,
    pub tcp_flags: u8,
    pub dscp: u8,
    /// A non-initial fragment (IPv4 fragment offset ≠ 0, or an IPv6
    /// Fragment header with offset ≠ 0): it carries no L4 header, so its
    /// ports, ICMP type/code and TCP flags are unknown (left 0). Rules
    /// that test those fields meet it through the fragment policy
    /// ([`fragment_lines`], docs/acl.md "Fragments").
    pub fragment: bool,
}

/// One rule's match; `None` = any. A rule matches when every present field
/// matches.
///
/// Semantics of [`Match::matches`] (the reference the classifier is tested
/// against):
/// - MACs: `(key & mask) == (value & mask)`.
/// - Ranges (`vlan`, ports): inclusive; `lo > hi` matches nothing.
/// - IP prefixes are read in the width of `family`: 128 bits for
///   `Some(6)`, 32 bits (the low 32 of the `u128`) otherwise. Lengths past
///   the width are clamped to it; bits of the prefix past its length (host
///   bits, and bits above the width) are ignored.
/// - `tcp_flags` `(value, mask)`: `(flags & mask) == value` (a value with
///   bits outside the mask matches nothing).
/// - `family: None` means any family, even when IP or port fields are set
///   (callers set it whenever they set those, see the field). Families
///   are 0..=127 (0, 4 and 6 in practice; the top bit of the key's family
///   byte carries [`AclKey::fragment`]).
/// - `fragment`: `Some(f)` matches keys whose `fragment` is `f`.
///
/// `matches` itself applies no fragment policy: a non-initial fragment's
/// ports read as 0. [`fragment_lines`] turns a rule into the lines that
/// give it the policy; [`Match::matches_under_policy`] is the reference.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    /// (value, mask)
    pub src_mac: Option<([u8; 6], [u8; 6])>,
    /// (value, mask)
    pub dst_mac: Option<([u8; 6], [u8; 6])>,
    pub ethertype: Option<u16>,
    /// Inclusive range.
    pub vlan: Option<(u16, u16)>,
    /// Required family (4 or 6). Set whenever src_ip/dst_ip/proto/ports/tcp_flags/dscp are set.
    pub family: Option<u8>,
    /// (prefix, length in bits of the family: 0..=32 or 0..=128)
    pub src_ip: Option<(u128, u8)>,
    pub dst_ip: Option<(u128, u8)>,
    pub proto: Option<u8>,
    /// Inclusive range.
    pub src_port: Option<(u16, u16)>,
    pub dst_port: Option<(u16, u16)>,
    /// (value, mask): (flags & mask) == value
    pub tcp_flags: Option<(u8, u8)>,
    pub dscp: Option<u8>,
    /// `Some(true)`: only non-initial fragments ([`AclKey::fragment`]);
    /// `Some(false)`: only frames that are not; `None`: either.
    pub fragment: Option<bool>,
}

/// Width in bits of the IP addresses of a rule of family `family`.
#[inline]
pub(crate) fn ip_width(family: Option<u8>) -> u32 {
    if family == Some(6) {
        128
    } else {
        32
    }
}

/// Mask of the first `len` bits of a `width`-bit address held in the low
/// bits of a `u128` (`len` clamped to `width`).
#[inline]
pub(crate) fn ip_mask(width: u32, len: u32) -> u128 {
    let ones = if width >= 128 {
        !0u128
    } else {
        (1u128 << width) - 1
    };
    ones & !ones.checked_shr(len.min(width)).unwrap_or(0)
}

#[inline]
pub(crate) fn mac_u64(m: [u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]])
}

impl Match {
    /// Whether `k` matches every present field (reference semantics, see
    /// the type).
    pub fn matches(&self, k: &AclKey) -> bool {
        let mac = |f: Option<([u8; 6], [u8; 6])>, x: [u8; 6]| match f {
            None => true,
            Some((v, m)) => mac_u64(x) & mac_u64(m) == mac_u64(v) & mac_u64(m),
        };
        let range = |f: Option<(u16, u16)>, x: u16| match f {
            None => true,
            Some((lo, hi)) => lo <= x && x <= hi,
        };
        let width = ip_width(self.family);
        let ip = |f: Option<(u128, u8)>, x: u128| match f {
            None => true,
            Some((p, l)) => {
                let m = ip_mask(width, l as u32);
                x & m == p & m
            }
        };
        mac(self.src_mac, k.src_mac)
            && mac(self.dst_mac, k.dst_mac)
            && self.ethertype.is_none_or(|e| e == k.ethertype)
            && range(self.vlan, k.vlan)
            && self.family.is_none_or(|f| f == k.family)
            && ip(self.src_ip, k.src_ip)
            && ip(self.dst_ip, k.dst_ip)
            && self.proto.is_none_or(|p| p == k.proto)
            && range(self.src_port, k.src_port)
            && range(self.dst_port, k.dst_port)
            && self.tcp_flags.is_none_or(|(v, m)| k.tcp_flags & m == v)
            && self.dscp.is_none_or(|d| d == k.dscp)
            && self.fragment.is_none_or(|f| f == k.fragment)
    }

    /// Whether the rule tests fields of the L4 header (ports, ICMP type
    /// and code, TCP flags): what a non-initial fragment does not carry.
    /// The protocol is an IP header field, not one of them.
    pub fn tests_l4(&self) -> bool {
        self.src_port.is_some() || self.dst_port.is_some() || self.tcp_flags.is_some()
    }

    /// The rule with its L4 fields removed.
    pub fn without_l4(&self) -> Match {
        Match {
            src_port: None,
            dst_port: None,
            tcp_flags: None,
            ..self.clone()
        }
    }

    /// Whether `k` matches the rule under the fragment policy `l4` (the
    /// linear reference of what [`fragment_lines`] compiles): a
    /// non-initial fragment meets a rule that tests L4 fields (and does
    /// not say `fragment` itself) as `l4` says; everything else as
    /// [`Match::matches`].
    pub fn matches_under_policy(&self, k: &AclKey, l4: L4OnFragments) -> bool {
        if k.fragment && self.fragment.is_none() && self.tests_l4() {
            match l4 {
                L4OnFragments::MatchL3 => self.without_l4().matches(k),
                L4OnFragments::NoMatch => false,
            }
        } else {
            self.matches(k)
        }
    }
}

/// How a rule that tests L4 fields meets a non-initial fragment, which
/// has none (docs/acl.md, "Fragments"; the policy of Cisco IOS ACLs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4OnFragments {
    /// The rule matches the fragment on its other fields, L4 ignored: a
    /// `permit` lets the later fragments of the datagrams it permits
    /// through (their first fragment was checked in full).
    MatchL3,
    /// The rule does not match the fragment, which goes on to the next
    /// rule: a `deny`, and a QoS class line.
    NoMatch,
}

/// The classifier lines that give `rule` the fragment policy `l4`, in
/// priority order: one line, or for `MatchL3` on a rule with L4 fields
/// two — the rule for everything but non-initial fragments, then the
/// rule without its L4 fields for them. A rule that says `fragment`
/// itself is taken as it is. The lines of one rule never both match a
/// key, so first match over all lines is first match over the rules.
pub fn fragment_lines(rule: &Match, l4: L4OnFragments) -> impl Iterator<Item = Match> {
    let (a, b) = if rule.fragment.is_some() || !rule.tests_l4() {
        (rule.clone(), None)
    } else {
        let whole = Match {
            fragment: Some(false),
            ..rule.clone()
        };
        let frag = match l4 {
            L4OnFragments::MatchL3 => Some(Match {
                fragment: Some(true),
                ..rule.without_l4()
            }),
            L4OnFragments::NoMatch => None,
        };
        (whole, frag)
    };
    std::iter::once(a).chain(b)
}

/// The key as the classifier's words: what tables mask and hash and rules
/// compare. Layout (bit 0 = least significant):
/// - `l4`: src_port 0..16, dst_port 16..32, proto 32..40, dscp 40..48,
///   tcp_flags 48..56, family 56..63, fragment 63;
/// - `l2`: dst_mac 0..48, src_mac 48..96, ethertype 96..112, vlan 112..128.
#[derive(Clone, Copy)]
pub(crate) struct Words {
    pub src: u128,
    pub dst: u128,
    pub l2: u128,
    pub l4: u64,
}

impl Words {
    const ZERO: Words = Words {
        src: 0,
        dst: 0,
        l2: 0,
        l4: 0,
    };

    /// The key's words; the L2 word only when `l2` (else 0: for
    /// classifiers none of whose tables reads it, most IP ACLs).
    #[inline]
    pub(crate) fn of(k: &AclKey, l2: bool) -> Words {
        Words {
            src: k.src_ip,
            dst: k.dst_ip,
            l2: if l2 {
                mac_u64(k.dst_mac) as u128
                    | (mac_u64(k.src_mac) as u128) << 48
                    | (k.ethertype as u128) << 96
                    | (k.vlan as u128) << 112
            } else {
                0
            },
            l4: k.src_port as u64
                | (k.dst_port as u64) << 16
                | (k.proto as u64) << 32
                | (k.dscp as u64) << 40
                | (k.tcp_flags as u64) << 48
                | ((k.family & 0x7f) as u64) << 56
                | (k.fragment as u64) << 63,
        }
    }
}

/// One table's shape, for `show access-lists`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableStats {
    /// Family every rule of the table requires (`None`: rules of any
    /// family, IP fields read as IPv4).
    pub family: Option<u8>,
    /// Leading bits hashed per field: source and destination address,
    /// source and destination port (16 = exact), protocol (0 or 8), DSCP
    /// (0 or 8), destination and source MAC (0..=48), EtherType (0 or 16),
    /// VLAN (0..=16).
    pub src_ip: u8,
    pub dst_ip: u8,
    pub src_port: u8,
    pub dst_port: u8,
    pub proto: u8,
    pub dscp: u8,
    pub dst_mac: u8,
    pub src_mac: u8,
    pub ethertype: u8,
    pub vlan: u8,
    /// Rules in the table.
    pub rules: usize,
    /// Non-empty buckets.
    pub buckets: usize,
    /// Rules in the longest bucket.
    pub largest_bucket: usize,
    /// Index of the table's best (lowest) rule.
    pub best_rule: u32,
}

/// Shape of a compiled classifier.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ClassifierStats {
    /// Rules in the list compiled.
    pub rules: usize,
    /// Rules left out because nothing can match them (an empty range, or
    /// TCP flag value bits outside the mask).
    pub unmatchable: usize,
    /// Rules left out because an earlier rule of the same shape and
    /// hashed values matches everything they match (repeated rules).
    pub shadowed: usize,
    /// The first rule that matches every key (a closing `permit any`),
    /// if any: lookup's answer when no earlier rule matches, kept in no
    /// table; the rules after it count as shadowed.
    pub default_rule: Option<u32>,
    /// Hash tables, i.e. hash probes of a lookup that matches nothing.
    pub tables: usize,
    /// Non-empty buckets over all tables.
    pub buckets: usize,
    /// Rules in the longest bucket (what one probe verifies at most).
    pub largest_bucket: usize,
    /// Rules the greedy phase could not place within [`MAX_TABLES`] tables
    /// and [`BUCKET_CAP`] rules per bucket.
    pub overflow_rules: usize,
    /// Heap bytes of the compiled structure (the first level included).
    pub memory_bytes: usize,
    /// The first level, per family it is built for (4, 6): cells of the
    /// source address, destination address, destination port and
    /// protocol cuts (1: the field filters nothing). Empty: every key
    /// probes every table of its family.
    pub cuts: Vec<(u8, [usize; 4])>,
    /// Per table, in lookup order (best rule first).
    pub per_table: Vec<TableStats>,
}

/// A compiled, immutable ACL: first match over the rule list.
pub struct Classifier {
    tables: Box<[Table]>,
    /// The first level for IPv4 and IPv6 keys (docs/acl.md): which
    /// tables a key can match in. `None`: probe them all.
    cuts: [Option<Cut>; 2],
    /// [`ClassifierStats::default_rule`], `u32::MAX` if none: where every
    /// lookup starts.
    default: u32,
    rules: usize,
    stats: ClassifierStats,
    /// Every table's bins and records (the tables point into it): one
    /// allocation, on 2 MB pages from [`HUGE_MIN_BYTES`]. Declared after
    /// `tables`, so dropped after them.
    block: Block,
    /// Whether some table reads the key's L2 word ([`Words::of`]).
    l2: bool,
    /// Whether the structure outgrows the cache ([`BATCH_MIN_BYTES`]):
    /// then `lookup_batch` interleaves keys.
    big: bool,
}

impl Classifier {
    /// Compile; rule i has priority i (lower index wins: first match wins).
    pub fn compile(rules: &[Match]) -> Classifier {
        assert!(
            rules.len() < compile::LAST as usize,
            "ACL longer than 2^31 - 1 rules"
        );
        let (tables, block, members, mut stats) = compile::build(rules);
        let l2 = tables.iter().any(Table::uses_l2);
        // The first level, for the two IP families (docs/acl.md).
        let cuts = [cut::build(4, &members), cut::build(6, &members)];
        drop(members);
        stats.rules = rules.len();
        stats.memory_bytes = compile::heap_bytes(&tables, &block)
            + cuts.iter().flatten().map(Cut::bytes).sum::<usize>();
        stats.cuts = [4, 6]
            .into_iter()
            .zip(&cuts)
            .filter_map(|(f, c)| Some((f, c.as_ref()?.cells())))
            .collect();
        Classifier {
            tables: tables.into_boxed_slice(),
            cuts,
            default: stats.default_rule.unwrap_or(u32::MAX),
            rules: rules.len(),
            big: stats.memory_bytes >= BATCH_MIN_BYTES,
            l2,
            stats,
            block,
        }
    }

    /// Index of the first rule that matches, or None.
    #[inline]
    pub fn lookup(&self, k: &AclKey) -> Option<u32> {
        let w = Words::of(k, self.l2);
        let best = match self.cut(k.family) {
            Some(c) => self.lookup_in(&w, self.default, c.tables(&w)),
            None => self.lookup_from(&w, k.family, self.default, 0),
        };
        (best != u32::MAX).then_some(best)
    }

    /// The first level for keys of `family`, if built.
    #[inline]
    fn cut(&self, family: u8) -> Option<&Cut> {
        match family {
            4 => self.cuts[0].as_ref(),
            6 => self.cuts[1].as_ref(),
            _ => None,
        }
    }

    /// The best of `best` and the first match in the tables of `set`
    /// (bit i = table i; at most 64 tables, as [`cut::build`] ensures;
    /// the cut's sets hold no table of another family).
    #[inline]
    fn lookup_in(&self, w: &Words, mut best: u32, mut set: u64) -> u32 {
        // As `lookup_from`, over the tables of the set only: up to LANES
        // probes without a branch on their outcome, then the buckets in
        // table order.
        while set != 0 {
            let mut found = [compile::DUMMY; LANES];
            let mut index = [0u8; LANES];
            let mut n = 0;
            while set != 0 && n < LANES {
                let i = set.trailing_zeros() as usize;
                set &= set - 1;
                let t = &self.tables[i];
                let (h, b) = t.home(w);
                found[n] = t.find(h, b);
                index[n] = i as u8;
                if self.big {
                    t.prefetch_rule(found[n]);
                }
                n += 1;
            }
            for (&start, &i) in found[..n].iter().zip(&index[..n]) {
                let t = &self.tables[i as usize];
                if t.best >= best {
                    // Tables are in order of their best rule.
                    return best;
                }
                best = t.scan(start, w, best);
            }
        }
        best
    }

    /// [`lookup`](Self::lookup) of every key: `out[i]` is the answer for
    /// `keys[i]`, for `i` below the shorter length. Past a few hundred KiB
    /// of tables, works on groups of [`BATCH`] keys, first hashing every key for every table and
    /// prefetching the bins, then finding the buckets and prefetching
    /// their first rules, then verifying: the cache misses of different
    /// keys overlap instead of following one another. Same answers as
    /// `lookup`; no allocation.
    pub fn lookup_batch(&self, keys: &[AclKey], out: &mut [Option<u32>]) {
        if !self.big {
            // Cache-resident: nothing to overlap, per-key is cheaper.
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.lookup(k);
            }
            return;
        }
        self.lookup_interleaved(keys, out);
    }

    /// [`lookup_batch`](Self::lookup_batch)'s interleaved path, whatever
    /// the size.
    fn lookup_interleaved(&self, keys: &[AclKey], out: &mut [Option<u32>]) {
        let n = self.tables.len().min(LANES);
        let head = &self.tables[..n];
        // Tables past 64 have no bit: only without a cut (`!0`), which
        // probes them all anyway.
        let skip = |i: usize, t: &Table, k: &AclKey, set: u64| {
            (t.family_check && t.family != k.family) | (set >> i & 1 == 0)
        };
        for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let mut ws = [Words::ZERO; BATCH];
            let mut sets = [!0u64; BATCH];
            let mut home = [[(0u32, 0usize); LANES]; BATCH];
            for (((k, w), hs), set) in ks
                .iter()
                .zip(ws.iter_mut())
                .zip(home.iter_mut())
                .zip(sets.iter_mut())
            {
                *w = Words::of(k, self.l2);
                if let Some(c) = self.cut(k.family) {
                    *set = c.tables(w);
                }
                for (i, (t, h)) in head.iter().zip(hs.iter_mut()).enumerate() {
                    if !skip(i, t, k, *set) {
                        *h = t.home(w);
                        t.prefetch_slot(h.1);
                    }
                }
            }
            let mut found = [[compile::DUMMY; LANES]; BATCH];
            for (((k, hs), fs), &set) in ks
                .iter()
                .zip(home.iter())
                .zip(found.iter_mut())
                .zip(sets.iter())
            {
                for (j, ((t, &(h, i)), f)) in
                    head.iter().zip(hs.iter()).zip(fs.iter_mut()).enumerate()
                {
                    if skip(j, t, k, set) {
                        continue;
                    }
                    *f = t.find(h, i);
                    t.prefetch_rule(*f);
                }
            }
            for ((((k, w), fs), o), &set) in ks
                .iter()
                .zip(ws.iter())
                .zip(found.iter())
                .zip(os.iter_mut())
                .zip(sets.iter())
            {
                let mut best = self.default;
                for (t, &start) in head.iter().zip(fs.iter()) {
                    if t.best >= best {
                        break;
                    }
                    best = t.scan(start, w, best);
                }
                if n < self.tables.len() {
                    best = match self.cut(k.family) {
                        Some(_) => self.lookup_in(w, best, set & !0u64 << n),
                        None => self.lookup_from(w, k.family, best, n),
                    };
                }
                *o = (best != u32::MAX).then_some(best);
            }
        }
    }

    /// The best of `best` and the first match in tables `from..`.
    #[inline]
    fn lookup_from(&self, w: &Words, family: u8, mut best: u32, from: usize) -> u32 {
        // Two passes over up to LANES tables: first every probe (hash,
        // bin), without a branch on whether a bucket is found, so the
        // probes' cache misses overlap; then the buckets in table order,
        // stopping once the best match beats the next table's best rule.
        for chunk in self.tables[from..].chunks(LANES) {
            if chunk[0].best >= best {
                break;
            }
            let mut found = [compile::DUMMY; LANES];
            for (t, f) in chunk.iter().zip(found.iter_mut()) {
                if t.family_check && t.family != family {
                    continue;
                }
                let (h, i) = t.home(w);
                *f = t.find(h, i);
                if self.big {
                    t.prefetch_rule(*f);
                }
            }
            for (t, &start) in chunk.iter().zip(found.iter()) {
                if t.best >= best {
                    break;
                }
                best = t.scan(start, w, best);
            }
        }
        best
    }

    /// Tables the first level leaves `k` to probe (all of its family's
    /// without a cut; lookup may stop earlier, once its match beats the
    /// next table's best rule): what the cut saves, for tests and the
    /// bench.
    pub fn tables_for(&self, k: &AclKey) -> usize {
        let set = self
            .cut(k.family)
            .map_or(!0, |c| c.tables(&Words::of(k, self.l2)));
        self.tables
            .iter()
            .enumerate()
            .filter(|(i, t)| {
                (*i >= 64 || set >> i & 1 == 1) && !(t.family_check && t.family != k.family)
            })
            .count()
    }

    /// Rules in the list compiled (including unmatchable ones).
    pub fn len(&self) -> usize {
        self.rules
    }

    pub fn is_empty(&self) -> bool {
        self.rules == 0
    }

    /// Heap bytes used by the compiled structure.
    pub fn memory_bytes(&self) -> usize {
        self.stats.memory_bytes
    }

    /// The range of the tables' block advised for 2 MB pages (a block of
    /// [`HUGE_MIN_BYTES`] or more), for [`crate::huge::huge_bytes_in`].
    pub fn advised_range(&self) -> Option<(usize, usize)> {
        self.block.advised_range()
    }

    /// Bytes of the tables' block the kernel backs with 2 MB pages now:
    /// `Some(0)` for a small classifier (heap), `None` when
    /// `/proc/self/smaps` cannot be read. Reads smaps: for `show` and
    /// tests, never the packet path.
    pub fn huge_backed_bytes(&self) -> Option<usize> {
        crate::huge::huge_bytes_in(self.advised_range().as_slice())
    }

    /// The block's address range and every table's arrays (tests).
    #[cfg(test)]
    fn layout(&self) -> ((usize, usize), Vec<(usize, usize)>) {
        (
            self.block.range(),
            self.tables.iter().flat_map(|t| t.ranges()).collect(),
        )
    }

    /// Shape of the compiled structure, for `show access-lists`.
    pub fn stats(&self) -> ClassifierStats {
        self.stats.clone()
    }
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("rules", &self.rules)
            .field("tables", &self.tables.len())
            .field("default_rule", &self.stats.default_rule)
            .field("memory_bytes", &self.stats.memory_bytes)
            .finish()
    }
}

// Compiled rules are verified with these words; keep the key layout and
// the rule layout in one place.
/// `PREFIX128[len]`: the first `len` of 128 bits (`len` past 128: all).
static PREFIX128: [u128; 256] = {
    let mut t = [!0u128; 256];
    let mut i = 0;
    while i < 128 {
        t[i] = if i == 0 { 0 } else { !0u128 << (128 - i) };
        i += 1;
    }
    t
};

/// `PREFIX32[len]`: the first `len` of 32 bits (`len` past 32: all).
static PREFIX32: [u32; 256] = {
    let mut t = [!0u32; 256];
    let mut i = 0;
    while i < 32 {
        t[i] = if i == 0 { 0 } else { !0u32 << (32 - i) };
        i += 1;
    }
    t
};

// An address matches when its first `len` bits agree with the rule's:
// the XOR is 0 under the prefix mask of `len` (a table lookup, cheaper
// than a variable shift or a leading-zero count of a u128).
impl Record for Hot {
    #[inline]
    fn prio(&self) -> u32 {
        self.prio
    }

    #[inline]
    fn cold(&self) -> bool {
        self.cold
    }

    /// Addresses in 128 bits.
    #[inline]
    fn matches(&self, w: &Words) -> bool {
        let sp = w.l4 as u16;
        let dp = (w.l4 >> 16) as u16;
        let m = |len: u8| PREFIX128[len as usize];
        ((w.src ^ self.src_v) & m(self.src_len) == 0)
            & ((w.dst ^ self.dst_v) & m(self.dst_len) == 0)
            & ((w.l4 & self.l4_m) == self.l4_v)
            & (sp.wrapping_sub(self.sport_lo) <= self.sport_span)
            & (dp.wrapping_sub(self.dport_lo) <= self.dport_span)
    }
}

impl Record for Hot4 {
    #[inline]
    fn prio(&self) -> u32 {
        self.prio
    }

    #[inline]
    fn cold(&self) -> bool {
        self.cold
    }

    /// Addresses in the low 32 bits.
    #[inline]
    fn matches(&self, w: &Words) -> bool {
        let sp = w.l4 as u16;
        let dp = (w.l4 >> 16) as u16;
        let m = |len: u8| PREFIX32[len as usize];
        ((w.src as u32 ^ self.src_v) & m(self.src_len) == 0)
            & ((w.dst as u32 ^ self.dst_v) & m(self.dst_len) == 0)
            & (((w.l4 >> 32) as u32 & self.l4_m) == self.l4_v)
            & (sp.wrapping_sub(self.sport_lo) <= self.sport_span)
            & (dp.wrapping_sub(self.dport_lo) <= self.dport_span)
    }
}

impl Cold {
    #[inline]
    fn matches(&self, w: &Words) -> bool {
        let vlan = (w.l2 >> 112) as u16;
        ((w.l2 & self.l2_m) == self.l2_v) & (vlan.wrapping_sub(self.vlan_lo) <= self.vlan_span)
    }
}
