//! The subscriber table: who owns an address, and on which package.
//!
//! Two halves, as everywhere in Lanyard (docs/architecture.md): the
//! control side's [`SubscriberDb`] (one writer: provisioning, the API, the
//! config) and the immutable [`View`] the workers read through
//! [`Published`] (`arc-swap`: a reader's load is lock-free and wait-free).
//!
//! ## Cheap updates while traffic flows
//!
//! A view's address maps are split into [`SHARDS`] shards, each behind its
//! own `Arc`. An update clones only the shards it touches (copy-on-write
//! through `Arc::make_mut`), so changing one subscriber among 1,000,000
//! copies about 1/256 of the table, and a bulk load of any size clones
//! each shard at most once before its single publish.
//!
//! ## Lookup
//!
//! An address is matched longest prefix first over the prefix lengths
//! present in its family (typically /32 and /128 hosts plus a few
//! delegated IPv6 lengths such as /56 and /64): one hash probe per length
//! present. A shard is an open-addressing table at most half full whose
//! slots hold key and owner together, so a hit is one cache miss (a std
//! `HashMap` took two: control bytes, then the bucket), and a batch can
//! prefetch the slot ([`View::prefetch`]). Addresses and prefixes are unique: a prefix belongs to one
//! subscriber (provisioning refuses a second owner), but a host inside a
//! subscriber's prefix may be provisioned to another (longest match wins).
//!
//! A subscriber's *slot* (u32) numbers its counters; a deleted
//! subscriber's slot is reused with its generation incremented, so
//! counters of flows that outlive their subscriber are not given to the
//! next one.

use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

/// Shards per address family.
pub const SHARDS: usize = 256;

/// Longest subscriber id, bytes.
pub const MAX_ID_LEN: usize = 64;

/// Most addresses/prefixes one subscriber may own.
pub const MAX_PREFIXES: usize = 16;

/// A subscriber's package: its priority weight when bandwidth is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Package {
    Gold = 0,
    Silver = 1,
    Bronze = 2,
}

impl Package {
    pub const ALL: [Package; 3] = [Package::Gold, Package::Silver, Package::Bronze];

    pub fn name(self) -> &'static str {
        match self {
            Package::Gold => "gold",
            Package::Silver => "silver",
            Package::Bronze => "bronze",
        }
    }

    /// Default relative priority (the report's Gold 10, Silver 5, Bronze 1).
    pub fn weight(self) -> u32 {
        match self {
            Package::Gold => 10,
            Package::Silver => 5,
            Package::Bronze => 1,
        }
    }

    pub fn parse(s: &str) -> Option<Package> {
        Package::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
    }
}

/// An IPv4 or IPv6 prefix (host addresses are /32 and /128). IPv4 sits in
/// the low 32 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: u128,
    pub len: u8,
    pub v6: bool,
}

impl Prefix {
    /// Parses `a.b.c.d[/n]` or an IPv6 address `[/n]`. Host bits must be
    /// zero (a typo in the length is an error, not a silent widening).
    pub fn parse(s: &str) -> Result<Prefix, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let ip: std::net::IpAddr = a
            .parse()
            .map_err(|_| format!("'{s}' is not an IP address or prefix"))?;
        let (addr, v6, max) = match ip {
            std::net::IpAddr::V4(v) => (u128::from(u32::from(v)), false, 32u8),
            std::net::IpAddr::V6(v) => (u128::from(v), true, 128u8),
        };
        let len = match l {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("'{s}': prefix length must be 0..={max}")),
            },
        };
        let p = Prefix { addr, len, v6 };
        if p.masked() != addr {
            return Err(format!(
                "'{s}': host bits set (did you mean {}?)",
                Prefix {
                    addr: p.masked(),
                    ..p
                }
            ));
        }
        Ok(p)
    }

    fn masked(&self) -> u128 {
        mask(self.addr, self.len, self.v6)
    }
}

fn mask(addr: u128, len: u8, v6: bool) -> u128 {
    let width = if v6 { 128 } else { 32 };
    if len == 0 {
        0
    } else {
        let keep = u32::from(len).min(width);
        let m = if width == 128 {
            u128::MAX << (128 - keep)
        } else {
            (u128::from(u32::MAX) << (32 - keep)) & u128::from(u32::MAX)
        };
        addr & m
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.v6 {
            write!(f, "{}/{}", std::net::Ipv6Addr::from(self.addr), self.len)
        } else {
            write!(
                f,
                "{}/{}",
                std::net::Ipv4Addr::from(self.addr as u32),
                self.len
            )
        }
    }
}

/// One subscriber as provisioned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscriber {
    pub id: Box<str>,
    pub package: Package,
    /// Bytes (both directions) allowed before the quota action applies.
    pub quota_bytes: Option<u64>,
    pub prefixes: Vec<Prefix>,
    /// Caps and quota action of this subscriber (none by default).
    pub limits: Limits,
}

/// A subscriber's own limits (provisioning `cap-up=`, `cap-down=`,
/// `quota-exceeded=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// [up, down] cap on all the subscriber's traffic, bits/s (0 = none).
    pub cap_bps: [u64; 2],
    /// Rate left when its quota is used up, bits/s (0 = drop; `None`: the
    /// configured `quota-exceeded`).
    pub quota_rate_bps: Option<u64>,
    /// Seconds after which the quota account starts again (`None`: only
    /// `subscribers reset-usage` does).
    pub quota_period_s: Option<u64>,
}

/// Largest cap a [`Link`] carries (kbit/s in a u32: about 4.3 Tbit/s).
pub const MAX_CAP_BPS: u64 = u32::MAX as u64 * 1000;

/// What a data-path lookup returns: 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub slot: u32,
    pub gen: u16,
    pub package: Package,
    /// The subscriber's [up, down] cap, kbit/s rounded up (0 = none).
    pub cap_kbps: [u32; 2],
    /// It has a cap or a quota: its frames need its total entry.
    pub limited: bool,
}

impl Link {
    fn of(slot: u32, gen: u16, s: &Subscriber) -> Link {
        let k = |bps: u64| bps.div_ceil(1000).min(u64::from(u32::MAX)) as u32;
        Link {
            slot,
            gen,
            package: s.package,
            cap_kbps: [k(s.limits.cap_bps[0]), k(s.limits.cap_bps[1])],
            limited: s.quota_bytes.is_some() || s.limits.cap_bps != [0, 0],
        }
    }

    /// The cap in direction `dir`, bytes/s (0 = none).
    #[inline]
    pub fn cap_bytes(&self, dir: usize) -> u64 {
        u64::from(self.cap_kbps[dir]) * 125
    }
}

/// A seeded multiply-fold hasher (the table's keys are the operator's, the
/// probes an attacker's, so the seed only spreads; no SipHash on the path).
#[derive(Clone, Copy)]
pub struct FoldHash(u64);

impl Default for FoldHash {
    fn default() -> Self {
        FoldHash(0x9e37_79b9_7f4a_7c15)
    }
}

pub struct Folder(u64);

impl Hasher for Folder {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, v: u64) {
        let p = u128::from(self.0 ^ v).wrapping_mul(0x2d35_8dcc_aa6c_78a5_u128 | 1);
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
    fn write_u128(&mut self, v: u128) {
        self.write_u64(v as u64);
        self.write_u64((v >> 64) as u64);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v) | 0x100);
    }
}

impl BuildHasher for FoldHash {
    type Hasher = Folder;
    fn build_hasher(&self) -> Folder {
        Folder(self.0)
    }
}

/// The hash of a (masked address, prefix length) key: its top byte picks
/// the shard, its low bits the slot inside it.
#[inline]
fn key_hash(addr: u128, len: u8) -> u64 {
    let mut h = FoldHash::default().build_hasher();
    h.write_u128(addr);
    h.write_u8(len);
    h.finish()
}

/// One shard: (masked address, prefix length) → owner, open addressing
/// with linear probing at most half full. A hit reads one 48-byte slot
/// (a std `HashMap` read its control bytes, then the bucket: two cache
/// misses per new flow among a million subscribers).
#[derive(Clone, Default)]
struct Shard {
    slots: Vec<HostSlot>,
    len: usize,
}

#[derive(Clone, Copy)]
struct HostSlot {
    addr: u128,
    /// Prefix length; [`EMPTY`]: a free slot.
    len: u8,
    link: Link,
}

const EMPTY: u8 = u8::MAX;

impl Shard {
    #[inline]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    #[inline]
    fn get(&self, addr: u128, len: u8, h: u64) -> Option<&Link> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = h as usize & mask;
        loop {
            let s = &self.slots[i];
            if s.len == EMPTY {
                return None;
            }
            if s.len == len && s.addr == addr {
                return Some(&s.link);
            }
            i = (i + 1) & mask;
        }
    }

    /// Where `(addr, len)` would be looked up first (for a prefetch).
    #[inline]
    fn home_slot(&self, h: u64) -> Option<&HostSlot> {
        self.slots.get(h as usize & self.mask())
    }

    /// Inserts or replaces; returns the old link.
    fn insert(&mut self, addr: u128, len: u8, link: Link) -> Option<Link> {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = key_hash(addr, len) as usize & mask;
        loop {
            let s = &mut self.slots[i];
            if s.len == EMPTY {
                *s = HostSlot { addr, len, link };
                self.len += 1;
                return None;
            }
            if s.len == len && s.addr == addr {
                return Some(std::mem::replace(&mut s.link, link));
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(16);
        let empty = HostSlot {
            addr: 0,
            len: EMPTY,
            link: Link {
                slot: 0,
                gen: 0,
                package: Package::Bronze,
                cap_kbps: [0; 2],
                limited: false,
            },
        };
        let old = std::mem::replace(&mut self.slots, vec![empty; n]);
        self.len = 0;
        for s in old.into_iter().filter(|s| s.len != EMPTY) {
            self.insert(s.addr, s.len, s.link);
        }
    }

    /// Removes `(addr, len)`; later slots of its run shift back.
    fn remove(&mut self, addr: u128, len: u8) -> Option<Link> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = key_hash(addr, len) as usize & mask;
        loop {
            let s = self.slots[i];
            if s.len == EMPTY {
                return None;
            }
            if s.len == len && s.addr == addr {
                break;
            }
            i = (i + 1) & mask;
        }
        let gone = self.slots[i].link;
        self.slots[i].len = EMPTY;
        self.len -= 1;
        // Backward shift: a later entry moves into the hole unless its
        // home lies between the hole and it.
        let mut j = (i + 1) & mask;
        loop {
            let s = self.slots[j];
            if s.len == EMPTY {
                break;
            }
            let home = key_hash(s.addr, s.len) as usize & mask;
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.slots[i] = s;
                self.slots[j].len = EMPTY;
                i = j;
            }
            j = (j + 1) & mask;
        }
        Some(gone)
    }
}

#[derive(Clone, Default)]
struct Family {
    shards: Vec<Arc<Shard>>,
    /// Entries per prefix length (index = length).
    per_len: Vec<u32>,
    /// Lengths present, longest first (rebuilt from `per_len` on change).
    lens: Vec<u8>,
}

impl Family {
    fn new(width: usize) -> Family {
        Family {
            shards: (0..SHARDS).map(|_| Arc::new(Shard::default())).collect(),
            per_len: vec![0; width + 1],
            lens: Vec::new(),
        }
    }

    #[inline]
    fn shard_of(h: u64) -> usize {
        (h >> 56) as usize % SHARDS
    }

    #[inline]
    fn lookup(&self, addr: u128, v6: bool) -> Option<Link> {
        for &len in &self.lens {
            let m = mask(addr, len, v6);
            let h = key_hash(m, len);
            if let Some(l) = self.shards[Family::shard_of(h)].get(m, len, h) {
                return Some(*l);
            }
        }
        None
    }

    /// Starts loading the slot where `addr`'s longest prefix is looked
    /// up first (a hint for a batch of new flows).
    #[inline]
    fn prefetch(&self, addr: u128, v6: bool) {
        if let Some(&len) = self.lens.first() {
            let m = mask(addr, len, v6);
            let h = key_hash(m, len);
            if let Some(s) = self.shards[Family::shard_of(h)].home_slot(h) {
                crate::flow::prefetch(s);
            }
        }
    }

    fn get(&self, p: &Prefix) -> Option<Link> {
        let h = key_hash(p.addr, p.len);
        self.shards[Family::shard_of(h)]
            .get(p.addr, p.len, h)
            .copied()
    }

    fn insert(&mut self, p: &Prefix, l: Link) {
        let h = key_hash(p.addr, p.len);
        let s = Arc::make_mut(&mut self.shards[Family::shard_of(h)]);
        if s.insert(p.addr, p.len, l).is_none() {
            self.per_len[usize::from(p.len)] += 1;
            if self.per_len[usize::from(p.len)] == 1 {
                self.relen();
            }
        }
    }

    fn remove(&mut self, p: &Prefix) {
        let h = key_hash(p.addr, p.len);
        let s = Arc::make_mut(&mut self.shards[Family::shard_of(h)]);
        if s.remove(p.addr, p.len).is_some() {
            self.per_len[usize::from(p.len)] -= 1;
            if self.per_len[usize::from(p.len)] == 0 {
                self.relen();
            }
        }
    }

    fn relen(&mut self) {
        self.lens = (0..self.per_len.len())
            .rev()
            .filter(|&l| self.per_len[l] > 0)
            .map(|l| l as u8)
            .collect();
    }
}

/// An immutable snapshot of the address → subscriber maps.
#[derive(Clone)]
pub struct View {
    v4: Family,
    v6: Family,
    /// Increases with every publish.
    pub generation: u64,
    pub subscribers: usize,
}

impl View {
    fn empty() -> View {
        View {
            v4: Family::new(32),
            v6: Family::new(128),
            generation: 0,
            subscribers: 0,
        }
    }

    /// Starts loading where [`View::lookup`] of `addr` looks first.
    #[inline]
    pub fn prefetch(&self, addr: u128, v6: bool) {
        if v6 {
            self.v6.prefetch(addr, true)
        } else {
            self.v4.prefetch(addr, false)
        }
    }

    /// The subscriber owning `addr` (longest prefix), if any. No locks, no
    /// allocation.
    #[inline]
    pub fn lookup(&self, addr: u128, v6: bool) -> Option<Link> {
        if v6 {
            self.v6.lookup(addr, true)
        } else {
            self.v4.lookup(addr, false)
        }
    }
}

/// The published view: workers `load()` it once per batch.
pub type Published = Arc<ArcSwap<View>>;

/// Why a change was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DbError {
    BadId(String),
    Exists(Box<str>),
    NotFound(Box<str>),
    Taken { prefix: Prefix, owner: Box<str> },
    TooManyPrefixes(usize),
    NoPrefixes,
    Full(usize),
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbError::BadId(why) => write!(f, "bad subscriber id: {why}"),
            DbError::Exists(id) => write!(
                f,
                "subscriber '{id}' already exists (use 'set' to replace it)"
            ),
            DbError::NotFound(id) => write!(f, "no subscriber '{id}'"),
            DbError::Taken { prefix, owner } => {
                write!(f, "{prefix} already belongs to subscriber '{owner}'")
            }
            DbError::TooManyPrefixes(n) => {
                write!(f, "{n} addresses; at most {MAX_PREFIXES} per subscriber")
            }
            DbError::NoPrefixes => write!(f, "a subscriber needs at least one address or prefix"),
            DbError::Full(max) => write!(f, "subscriber table full ({max} subscribers)"),
        }
    }
}

/// Checks an id: 1..=64 bytes of letters, digits and `._:-@`.
pub fn check_id(id: &str) -> Result<(), DbError> {
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return Err(DbError::BadId(format!(
            "'{id}' must be 1..={MAX_ID_LEN} characters"
        )));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._:-@".contains(*c)))
    {
        return Err(DbError::BadId(format!(
            "'{id}' contains '{c}' (allowed: letters, digits, . _ : - @)"
        )));
    }
    Ok(())
}

/// Subscribers per package.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PackageCounts(pub [u64; 3]);

/// The control side of the table: the only writer. See the module docs.
pub struct SubscriberDb {
    by_id: HashMap<Box<str>, u32>,
    slots: Vec<Option<Subscriber>>,
    gens: Vec<u16>,
    free: Vec<u32>,
    work: View,
    published: Published,
    max: usize,
    per_package: PackageCounts,
    /// Bytes passed per slot toward its quota, with the generation they
    /// belong to (a reused slot starts from zero). Not part of
    /// checkpoints: usage is traffic, not provisioning.
    used: Vec<Account>,
    /// Restored accounts of ids not provisioned (yet): a subscriber added
    /// later in this run takes its account when published (e.g. one
    /// provisioned through the API after a restart). Never written back
    /// to the state file.
    pending: HashMap<Box<str>, (u64, u64)>,
}

/// One subscriber's quota account as the quota state file keeps it
/// ([`crate::quota_state`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaAccount {
    pub id: Box<str>,
    /// Bytes counted toward the quota in the current period.
    pub used: u64,
    /// Start of the current period, Unix seconds (above 0).
    pub start_s: u64,
}

/// What [`SubscriberDb::restore_accounts`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Accounts given to their subscribers.
    pub restored: usize,
    /// Accounts of ids not in the table: kept until such a subscriber is
    /// added (this run only).
    pub unknown: usize,
}

/// A subscriber's quota account: generation, bytes, start of the period
/// (Unix seconds; 0 = not started).
#[derive(Clone, Copy, Default)]
struct Account {
    gen: u16,
    bytes: u64,
    start_s: u64,
}

impl SubscriberDb {
    /// An empty table of at most `max` subscribers, already published.
    pub fn new(max: usize) -> SubscriberDb {
        let work = View::empty();
        SubscriberDb {
            by_id: HashMap::new(),
            slots: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            published: Arc::new(ArcSwap::from_pointee(work.clone())),
            work,
            max,
            per_package: PackageCounts::default(),
            used: Vec::new(),
            pending: HashMap::new(),
        }
    }

    /// The handle workers read.
    pub fn published(&self) -> Published {
        self.published.clone()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// A new limit (existing subscribers stay even if over it; new ones
    /// are refused until below it).
    pub fn set_max(&mut self, max: usize) {
        self.max = max;
    }

    pub fn per_package(&self) -> PackageCounts {
        self.per_package
    }

    pub fn get(&self, id: &str) -> Option<(&Subscriber, Link)> {
        let slot = *self.by_id.get(id)?;
        let s = self.slots[slot as usize].as_ref()?;
        Some((s, Link::of(slot, self.gens[slot as usize], s)))
    }

    /// The subscriber in `slot` if its generation is still `gen`.
    pub fn by_slot(&self, slot: u32, gen: u16) -> Option<&Subscriber> {
        if self.gens.get(slot as usize) != Some(&gen) {
            return None;
        }
        self.slots.get(slot as usize)?.as_ref()
    }

    /// Bytes subscriber (`slot`, `gen`) has passed toward its quota.
    pub fn used(&self, slot: u32, gen: u16) -> u64 {
        match self.used.get(slot as usize) {
            Some(a) if a.gen == gen => a.bytes,
            _ => 0,
        }
    }

    /// When the subscriber's current quota period started (Unix seconds;
    /// `None`: no traffic counted yet).
    pub fn period_start(&self, slot: u32, gen: u16) -> Option<u64> {
        match self.used.get(slot as usize) {
            Some(a) if a.gen == gen && a.start_s != 0 => Some(a.start_s),
            _ => None,
        }
    }

    /// Adds passed bytes to a subscriber's account; whether its quota is
    /// now used up (`None`: no such subscriber any more).
    pub fn add_used(&mut self, slot: u32, gen: u16, bytes: u64) -> Option<bool> {
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs().max(1));
        self.add_used_at(slot, gen, bytes, now_s)
    }

    /// [`SubscriberDb::add_used`] at `now_s` (Unix seconds): a quota with a
    /// period starts again once the period has passed (periods follow one
    /// another from the first counted traffic).
    pub fn add_used_at(&mut self, slot: u32, gen: u16, bytes: u64, now_s: u64) -> Option<bool> {
        let limits = self.by_slot(slot, gen)?;
        let (quota, period) = (limits.quota_bytes, limits.limits.quota_period_s);
        let i = slot as usize;
        if self.used.len() <= i {
            self.used.resize(i + 1, Account::default());
        }
        let a = &mut self.used[i];
        if a.gen != gen {
            *a = Account {
                gen,
                ..Account::default()
            };
        }
        if a.start_s == 0 {
            a.start_s = now_s;
        }
        if let Some(p) = period.filter(|&p| p > 0) {
            let elapsed = now_s.saturating_sub(a.start_s);
            if elapsed >= p {
                a.start_s += elapsed / p * p;
                a.bytes = 0;
            }
        }
        a.bytes = a.bytes.saturating_add(bytes);
        Some(quota.is_some_and(|q| a.bytes >= q))
    }

    /// Starts a subscriber's quota account again (a new billing period).
    pub fn reset_used(&mut self, id: &str) -> Result<(), DbError> {
        let (_, l) = self.get(id).ok_or_else(|| DbError::NotFound(id.into()))?;
        if let Some(u) = self.used.get_mut(l.slot as usize) {
            *u = Account {
                gen: l.gen,
                ..Account::default()
            };
        }
        Ok(())
    }

    /// The quota accounts worth keeping across a restart: those of
    /// subscribers with a quota whose account has started, in slot order.
    pub fn quota_accounts(&self) -> Vec<QuotaAccount> {
        self.iter()
            .filter(|(s, _)| s.quota_bytes.is_some())
            .filter_map(|(s, l)| {
                let a = self.used.get(l.slot as usize)?;
                (a.gen == l.gen && a.start_s != 0).then(|| QuotaAccount {
                    id: s.id.clone(),
                    used: a.bytes,
                    start_s: a.start_s,
                })
            })
            .collect()
    }

    /// Gives restored accounts (the quota state file's) to their
    /// subscribers; accounts of unknown ids wait for a subscriber of that
    /// id to be added (see `pending`).
    pub fn restore_accounts(&mut self, accounts: Vec<QuotaAccount>) -> Restored {
        let mut r = Restored::default();
        self.pending.clear();
        for a in accounts {
            match self.by_id.get(&a.id).copied() {
                Some(slot) => {
                    self.set_account(slot, a.used, a.start_s);
                    r.restored += 1;
                }
                None => {
                    self.pending.insert(a.id, (a.used, a.start_s));
                    r.unknown += 1;
                }
            }
        }
        r
    }

    fn set_account(&mut self, slot: u32, bytes: u64, start_s: u64) {
        let i = slot as usize;
        if self.used.len() <= i {
            self.used.resize(i + 1, Account::default());
        }
        self.used[i] = Account {
            gen: self.gens[i],
            bytes,
            start_s,
        };
    }

    fn family(&mut self, v6: bool) -> &mut Family {
        if v6 {
            &mut self.work.v6
        } else {
            &mut self.work.v4
        }
    }

    /// Adds (`replace = false`) or adds-or-replaces a subscriber in the
    /// working copy (visible to workers at the next [`SubscriberDb::publish`]).
    /// All checks happen before any change: an error changes nothing.
    pub fn upsert(&mut self, s: Subscriber, replace: bool) -> Result<Link, DbError> {
        check_id(&s.id)?;
        if s.prefixes.is_empty() {
            return Err(DbError::NoPrefixes);
        }
        if s.prefixes.len() > MAX_PREFIXES {
            return Err(DbError::TooManyPrefixes(s.prefixes.len()));
        }
        let existing = self.by_id.get(&s.id).copied();
        if existing.is_some() && !replace {
            return Err(DbError::Exists(s.id));
        }
        for p in &s.prefixes {
            let fam = if p.v6 { &self.work.v6 } else { &self.work.v4 };
            if let Some(owner) = fam.get(p) {
                if Some(owner.slot) != existing {
                    let name = self.slots[owner.slot as usize]
                        .as_ref()
                        .map(|o| o.id.clone())
                        .unwrap_or_default();
                    return Err(DbError::Taken {
                        prefix: *p,
                        owner: name,
                    });
                }
            }
        }
        if existing.is_none() && self.by_id.len() >= self.max {
            return Err(DbError::Full(self.max));
        }
        let slot = match existing {
            Some(slot) => {
                let old = self.slots[slot as usize].take().expect("slot of a live id");
                self.per_package.0[old.package as usize] -= 1;
                for p in &old.prefixes {
                    self.family(p.v6).remove(p);
                }
                slot
            }
            None => match self.free.pop() {
                Some(slot) => slot,
                None => {
                    self.slots.push(None);
                    self.gens.push(0);
                    (self.slots.len() - 1) as u32
                }
            },
        };
        let link = Link::of(slot, self.gens[slot as usize], &s);
        for p in &s.prefixes {
            self.family(p.v6).insert(p, link);
        }
        self.per_package.0[s.package as usize] += 1;
        self.by_id.insert(s.id.clone(), slot);
        self.slots[slot as usize] = Some(s);
        Ok(link)
    }

    /// Removes a subscriber from the working copy.
    pub fn remove(&mut self, id: &str) -> Result<(), DbError> {
        let slot = self
            .by_id
            .remove(id)
            .ok_or_else(|| DbError::NotFound(id.into()))?;
        let old = self.slots[slot as usize].take().expect("slot of a live id");
        for p in &old.prefixes {
            self.family(p.v6).remove(p);
        }
        self.per_package.0[old.package as usize] -= 1;
        self.gens[slot as usize] = self.gens[slot as usize].wrapping_add(1);
        self.free.push(slot);
        Ok(())
    }

    /// Makes the working copy the workers' view (one pointer store).
    pub fn publish(&mut self) {
        // Restored accounts go to subscribers added since, at publish: a
        // load that is rolled back never took them.
        if !self.pending.is_empty() {
            let found: Vec<(u32, Box<str>)> = self
                .pending
                .keys()
                .filter_map(|id| Some((*self.by_id.get(id)?, id.clone())))
                .collect();
            for (slot, id) in found {
                if let Some((bytes, start_s)) = self.pending.remove(&id) {
                    self.set_account(slot, bytes, start_s);
                }
            }
        }
        self.work.generation += 1;
        self.work.subscribers = self.by_id.len();
        self.published.store(Arc::new(self.work.clone()));
    }

    /// Throws away unpublished changes (an all-or-nothing load that failed).
    pub fn rollback(&mut self) {
        let view = self.published.load_full();
        // Rebuild the control maps from the published view's owners: the
        // simplest correct route is to keep a copy of them; see `Checkpoint`.
        self.work = (*view).clone();
    }

    /// A restorable copy of the control side (for all-or-nothing loads).
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            by_id: self.by_id.clone(),
            slots: self.slots.clone(),
            gens: self.gens.clone(),
            free: self.free.clone(),
            per_package: self.per_package,
        }
    }

    /// Restores a checkpoint and the published view (undoes everything
    /// since the checkpoint, provided nothing was published in between).
    pub fn restore(&mut self, c: Checkpoint) {
        self.by_id = c.by_id;
        self.slots = c.slots;
        self.gens = c.gens;
        self.free = c.free;
        self.per_package = c.per_package;
        self.rollback();
    }

    /// Every subscriber, in slot order (for export; not for the data path).
    pub fn iter(&self) -> impl Iterator<Item = (&Subscriber, Link)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (s, Link::of(i as u32, self.gens[i], s))))
    }
}

/// See [`SubscriberDb::checkpoint`].
pub struct Checkpoint {
    by_id: HashMap<Box<str>, u32>,
    slots: Vec<Option<Subscriber>>,
    gens: Vec<u16>,
    free: Vec<u32>,
    per_package: PackageCounts,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The open-addressing shard against a `HashMap`: inserts, replaces
    /// and removals (backward shift across the table's wrap) in a small
    /// table where runs are long, every key checked after each step.
    #[test]
    fn shard_matches_a_hash_map() {
        let link = |n: u32| Link {
            slot: n,
            gen: 1,
            package: Package::Gold,
            cap_kbps: [0; 2],
            limited: false,
        };
        let mut sh = Shard::default();
        let mut model: HashMap<(u128, u8), u32> = HashMap::new();
        let mut r = 0x2545_f491_u32;
        for step in 0..4000u32 {
            r ^= r << 13;
            r ^= r >> 17;
            r ^= r << 5;
            let key = (u128::from(r % 97), (r % 3) as u8 + 30);
            if r % 5 < 3 {
                assert_eq!(
                    sh.insert(key.0, key.1, link(step)).map(|l| l.slot),
                    model.insert(key, step)
                );
            } else {
                assert_eq!(sh.remove(key.0, key.1).map(|l| l.slot), model.remove(&key));
            }
            assert_eq!(sh.len, model.len());
            for a in 0..97u128 {
                for l in 30..33u8 {
                    let h = key_hash(a, l);
                    assert_eq!(
                        sh.get(a, l, h).map(|l| l.slot),
                        model.get(&(a, l)).copied(),
                        "step {step} key {a}/{l}"
                    );
                }
            }
        }
    }

    fn sub(id: &str, pkg: Package, p: &[&str]) -> Subscriber {
        Subscriber {
            id: id.into(),
            package: pkg,
            quota_bytes: None,
            prefixes: p.iter().map(|s| Prefix::parse(s).unwrap()).collect(),
            limits: Limits::default(),
        }
    }

    fn v4(s: &str) -> u128 {
        u128::from(u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    fn v6(s: &str) -> u128 {
        u128::from(s.parse::<std::net::Ipv6Addr>().unwrap())
    }

    #[test]
    fn prefixes_parse_and_reject_host_bits() {
        assert_eq!(Prefix::parse("10.0.0.1").unwrap().len, 32);
        assert_eq!(Prefix::parse("2001:db8::/56").unwrap().len, 56);
        assert!(Prefix::parse("10.0.0.1/24")
            .unwrap_err()
            .contains("10.0.0.0/24"));
        assert!(Prefix::parse("10.0.0.0/33").is_err());
        assert!(Prefix::parse("nonsense").is_err());
    }

    #[test]
    fn lookups_are_longest_match_and_invisible_until_published() {
        let mut db = SubscriberDb::new(10);
        let pubd = db.published();
        db.upsert(
            sub("a", Package::Gold, &["10.1.0.0/16", "2001:db8:1::/48"]),
            false,
        )
        .unwrap();
        db.upsert(sub("b", Package::Bronze, &["10.1.2.3"]), false)
            .unwrap();
        assert!(pubd.load().lookup(v4("10.1.2.3"), false).is_none());
        db.publish();
        let v = pubd.load();
        let a = v.lookup(v4("10.1.9.9"), false).unwrap();
        let b = v.lookup(v4("10.1.2.3"), false).unwrap();
        assert_eq!(a.package, Package::Gold);
        assert_eq!(b.package, Package::Bronze);
        assert_ne!(a.slot, b.slot);
        assert_eq!(v.lookup(v6("2001:db8:1:ff::1"), true).unwrap().slot, a.slot);
        assert!(v.lookup(v6("2001:db8:2::1"), true).is_none());
        assert!(v.lookup(v4("10.2.0.1"), false).is_none());
        assert_eq!(db.per_package().0, [1, 0, 1]);
    }

    #[test]
    fn conflicts_are_refused_without_change() {
        let mut db = SubscriberDb::new(10);
        db.upsert(sub("a", Package::Gold, &["10.0.0.1"]), false)
            .unwrap();
        let e = db
            .upsert(sub("b", Package::Gold, &["10.0.0.2", "10.0.0.1"]), false)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "10.0.0.1/32 already belongs to subscriber 'a'"
        );
        assert!(db.get("b").is_none());
        db.publish();
        assert!(db
            .published()
            .load()
            .lookup(v4("10.0.0.2"), false)
            .is_none());
        assert!(matches!(
            db.upsert(sub("a", Package::Gold, &["10.0.0.3"]), false),
            Err(DbError::Exists(_))
        ));
        assert!(matches!(
            db.upsert(sub("bad id", Package::Gold, &["10.0.0.3"]), false),
            Err(DbError::BadId(_))
        ));
    }

    #[test]
    fn replace_and_remove_reuse_slots_with_new_generation() {
        let mut db = SubscriberDb::new(2);
        let l1 = db
            .upsert(sub("a", Package::Gold, &["10.0.0.1"]), false)
            .unwrap();
        let l2 = db
            .upsert(sub("a", Package::Silver, &["10.0.0.9"]), true)
            .unwrap();
        assert_eq!(l1.slot, l2.slot);
        db.publish();
        let v = db.published().load_full();
        assert!(v.lookup(v4("10.0.0.1"), false).is_none());
        assert_eq!(
            v.lookup(v4("10.0.0.9"), false).unwrap().package,
            Package::Silver
        );
        db.upsert(sub("b", Package::Gold, &["10.0.0.2"]), false)
            .unwrap();
        assert!(matches!(
            db.upsert(sub("c", Package::Gold, &["10.0.0.3"]), false),
            Err(DbError::Full(2))
        ));
        db.remove("a").unwrap();
        let l3 = db
            .upsert(sub("c", Package::Gold, &["10.0.0.3"]), false)
            .unwrap();
        assert_eq!(l3.slot, l1.slot);
        assert_ne!(l3.gen, l1.gen);
        assert!(db.by_slot(l1.slot, l1.gen).is_none());
        assert_eq!(&*db.by_slot(l3.slot, l3.gen).unwrap().id, "c");
    }

    #[test]
    fn checkpoint_restore_undoes_unpublished_work() {
        let mut db = SubscriberDb::new(10);
        db.upsert(sub("a", Package::Gold, &["10.0.0.1"]), false)
            .unwrap();
        db.publish();
        let c = db.checkpoint();
        db.upsert(sub("b", Package::Gold, &["10.0.0.2"]), false)
            .unwrap();
        db.remove("a").unwrap();
        db.restore(c);
        assert!(db.get("a").is_some() && db.get("b").is_none());
        db.upsert(sub("b", Package::Gold, &["10.0.0.2"]), false)
            .unwrap();
        db.publish();
        let v = db.published().load_full();
        assert!(v.lookup(v4("10.0.0.1"), false).is_some());
        assert!(v.lookup(v4("10.0.0.2"), false).is_some());
    }

    fn quota_sub(id: &str, addr: &str, quota: u64, period: Option<u64>) -> Subscriber {
        let mut s = sub(id, Package::Gold, &[addr]);
        s.quota_bytes = Some(quota);
        s.limits.quota_period_s = period;
        s
    }

    #[test]
    fn quota_accounts_survive_the_state_file() {
        let mut db = SubscriberDb::new(10);
        let a = db
            .upsert(quota_sub("a", "10.0.0.1", 1000, Some(3600)), false)
            .unwrap();
        let b = db
            .upsert(quota_sub("b", "10.0.0.2", 1000, None), false)
            .unwrap();
        let c = db
            .upsert(sub("c", Package::Gold, &["10.0.0.3"]), false)
            .unwrap();
        db.upsert(quota_sub("idle", "10.0.0.4", 1000, None), false)
            .unwrap();
        db.publish();
        let t0 = 1_764_000_000;
        assert_eq!(db.add_used_at(a.slot, a.gen, 600, t0), Some(false));
        assert_eq!(db.add_used_at(b.slot, b.gen, 1500, t0 + 5), Some(true));
        db.add_used_at(c.slot, c.gen, 99, t0);
        // Only quota subscribers with traffic: `c` has no quota, `idle`
        // no account yet.
        let text = crate::quota_state::format(&db.quota_accounts());
        assert_eq!(
            text,
            format!(
                "lanyard-quota-state 1\na 600 {t0}\nb 1500 {}\nend 2\n",
                t0 + 5
            )
        );

        // A new table (another process): other slots, one id unknown.
        let mut db2 = SubscriberDb::new(10);
        db2.upsert(sub("x", Package::Gold, &["10.0.0.9"]), false)
            .unwrap();
        let b2 = db2
            .upsert(quota_sub("b", "10.0.0.2", 1000, None), false)
            .unwrap();
        db2.publish();
        let accounts = crate::quota_state::parse(text.as_bytes()).unwrap();
        let r = db2.restore_accounts(accounts);
        assert_eq!((r.restored, r.unknown), (1, 1));
        assert_eq!(db2.used(b2.slot, b2.gen), 1500);
        assert_eq!(db2.period_start(b2.slot, b2.gen), Some(t0 + 5));
        // Still over quota with the next bytes.
        assert_eq!(db2.add_used_at(b2.slot, b2.gen, 1, t0 + 60), Some(true));

        // `a` added by a load that is rolled back: the account waits…
        let cp = db2.checkpoint();
        let a2 = db2
            .upsert(quota_sub("a", "10.0.0.1", 1000, Some(3600)), false)
            .unwrap();
        db2.restore(cp);
        let y = db2
            .upsert(sub("y", Package::Gold, &["10.0.0.8"]), false)
            .unwrap();
        db2.publish();
        assert_eq!((y.slot, db2.used(y.slot, y.gen)), (a2.slot, 0));
        // …for the load that publishes it.
        let a2 = db2
            .upsert(quota_sub("a", "10.0.0.1", 1000, Some(3600)), false)
            .unwrap();
        assert_eq!(db2.used(a2.slot, a2.gen), 0);
        db2.publish();
        assert_eq!(db2.used(a2.slot, a2.gen), 600);
        assert_eq!(db2.period_start(a2.slot, a2.gen), Some(t0));
        // The period still runs from the restored start: past it, the
        // account starts again, aligned to the old periods.
        assert_eq!(db2.add_used_at(a2.slot, a2.gen, 10, t0 + 7300), Some(false));
        assert_eq!(db2.used(a2.slot, a2.gen), 10);
        assert_eq!(db2.period_start(a2.slot, a2.gen), Some(t0 + 7200));
    }
}
