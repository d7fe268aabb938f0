//! Multicast tables: the data-path multicast forwarding table
//! ([`MrouteTable`]) and the IGMP/MLD snooping state of one VLAN
//! ([`SnoopTable`]), groundwork for issue 6.
//!
//! * [`MrouteTable`] is an immutable snapshot: built once from a list of
//!   entries, then read by workers without locks or allocation. Keys are
//!   exact: `(vlan, group, source)` for (S,G) and `(vlan, group, *)` for
//!   (*,G); [`MrouteTable::lookup`] tries (S,G) then (*,G). VLAN 0 is used
//!   for routed (layer-3, VRF-less) entries, 1..=4095 for snooped layer-2
//!   entries of that VLAN.
//! * [`SnoopTable`] is control-plane state with a single writer (the
//!   snooping thread): per (group, port) an IGMPv3/MLDv2 filter (INCLUDE /
//!   EXCLUDE mode, source list, timers; RFC 3376 6.4 / RFC 3810 7.4,
//!   router-side), router ports, and [`SnoopTable::to_mroutes`] which
//!   compiles it into exact entries so the data path never evaluates
//!   filters.
//!
//! Addresses of both families are stored as `u128` in one table (IPv4 in the
//! low 32 bits) with a family bit in the key: one probe sequence and one
//! comparison routine serve both families, and a 4-byte IPv4 address would
//! not make the entry smaller enough to matter.
//!
//! Port sets are interned, as a hardware multicast expansion table does:
//! an entry holds two 4-byte ids into a table of distinct [`PortSet`]s
//! built with it, so widening `PortSet` (1,024 ports) does not widen
//! 425,000 routes, and many routes with the same outgoing set share one
//! (docs/scale.md).

use crate::portset::PortSet;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `McRoute::iif` meaning "accept from any port" (no RPF check).
pub const ANY_IIF: u16 = u16::MAX;

/// `McRoute::iif` meaning "accept from any port of `McRoute::accept`"
/// (bidirectional-PIM semantics: each port of the set may be the source
/// side; a frame goes out of every outgoing port but the one it came in
/// by).
pub const ACCEPT_SET: u16 = u16::MAX - 1;

/// An IPv4 or IPv6 address (group or source).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum McAddr {
    V4(u32),
    V6(u128),
}

impl McAddr {
    #[inline]
    pub fn is_v6(&self) -> bool {
        matches!(self, McAddr::V6(_))
    }

    /// 224.0.0.0/4 or ff00::/8.
    #[inline]
    pub fn is_multicast(&self) -> bool {
        match *self {
            McAddr::V4(a) => a >> 28 == 0xe,
            McAddr::V6(a) => a >> 120 == 0xff,
        }
    }

    #[inline]
    fn bits(&self) -> u128 {
        match *self {
            McAddr::V4(a) => a as u128,
            McAddr::V6(a) => a,
        }
    }
}

impl From<Ipv4Addr> for McAddr {
    fn from(a: Ipv4Addr) -> Self {
        McAddr::V4(a.into())
    }
}

impl From<Ipv6Addr> for McAddr {
    fn from(a: Ipv6Addr) -> Self {
        McAddr::V6(a.into())
    }
}

impl From<IpAddr> for McAddr {
    fn from(a: IpAddr) -> Self {
        match a {
            IpAddr::V4(a) => a.into(),
            IpAddr::V6(a) => a.into(),
        }
    }
}

impl From<McAddr> for IpAddr {
    fn from(a: McAddr) -> Self {
        match a {
            McAddr::V4(a) => IpAddr::V4(a.into()),
            McAddr::V6(a) => IpAddr::V6(a.into()),
        }
    }
}

/// Key of a multicast forwarding entry. `source: None` is (*,G).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct McKey {
    /// 0 for routed entries, the VLAN id for snooped entries.
    pub vlan: u16,
    pub group: McAddr,
    pub source: Option<McAddr>,
}

/// A multicast forwarding entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct McRoute {
    /// Expected incoming port (RPF); [`ANY_IIF`] accepts any port,
    /// [`ACCEPT_SET`] any port of `accept`.
    pub iif: u16,
    /// Outgoing ports.
    pub oifs: PortSet,
    /// Ports accepted as incoming when `iif` is [`ACCEPT_SET`] (else
    /// empty).
    pub accept: PortSet,
    /// Packets with a TTL / hop limit at or below this are not routed.
    pub ttl_threshold: u8,
    /// Index into the per-route counters.
    pub index: u32,
}

impl McRoute {
    /// Whether a frame that came in by `port` passes the route's RPF
    /// check.
    #[inline]
    pub fn accepts(&self, port: u16) -> bool {
        accepts(self.iif, &self.accept, port)
    }
}

#[inline]
fn accepts(iif: u16, accept: &PortSet, port: u16) -> bool {
    match iif {
        ANY_IIF => true,
        ACCEPT_SET => accept.contains(port),
        iif => iif == port,
    }
}

/// A route as [`MrouteTable`] holds it: its port sets borrowed from the
/// table's shared set table (no copy of a set per lookup).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct McRouteRef<'a> {
    pub iif: u16,
    pub oifs: &'a PortSet,
    pub accept: &'a PortSet,
    pub ttl_threshold: u8,
    pub index: u32,
}

impl McRouteRef<'_> {
    /// As [`McRoute::accepts`].
    #[inline]
    pub fn accepts(&self, port: u16) -> bool {
        accepts(self.iif, self.accept, port)
    }

    /// The route by value (what was built).
    pub fn to_route(&self) -> McRoute {
        McRoute {
            iif: self.iif,
            oifs: *self.oifs,
            accept: *self.accept,
            ttl_threshold: self.ttl_threshold,
            index: self.index,
        }
    }
}

/// Why [`MrouteTable::build`] refused its input.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum McError {
    /// The same key appears twice.
    Duplicate(McKey),
    /// VLAN id above 4095.
    BadVlan(McKey),
    /// The group is not a multicast address.
    NotMulticast(McKey),
    /// The source is of the other family, multicast, or all-zero.
    BadSource(McKey),
    /// `iif` is neither a port id (< `MAX_PORTS`) nor [`ANY_IIF`] nor
    /// [`ACCEPT_SET`]; or an accept set on an (S,G) route, or an empty one.
    BadIif(McKey),
    /// More than `u32::MAX - 1` entries.
    TooMany,
}

impl std::fmt::Display for McError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for McError {}

const META_V6: u32 = 1 << 12;
const META_SRC: u32 = 1 << 13;

/// Key as stored and compared: addresses as 64-bit halves (8-byte
/// alignment keeps the entry at 80 bytes), vlan and flags in `meta`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Packed {
    g: [u64; 2],
    s: [u64; 2],
    meta: u32,
}

#[inline]
fn pack(vlan: u16, group: McAddr, source: Option<McAddr>) -> Packed {
    let g = group.bits();
    let s = source.map_or(0, |s| s.bits());
    let mut meta = (vlan & 0xfff) as u32;
    if group.is_v6() {
        meta |= META_V6;
    }
    if source.is_some() {
        meta |= META_SRC;
    }
    Packed {
        g: [g as u64, (g >> 64) as u64],
        s: [s as u64, (s >> 64) as u64],
        meta,
    }
}

impl Packed {
    fn unpack(&self) -> McKey {
        let g = (self.g[1] as u128) << 64 | self.g[0] as u128;
        let s = (self.s[1] as u128) << 64 | self.s[0] as u128;
        let v6 = self.meta & META_V6 != 0;
        let mk = |a: u128| {
            if v6 {
                McAddr::V6(a)
            } else {
                McAddr::V4(a as u32)
            }
        };
        McKey {
            vlan: (self.meta & 0xfff) as u16,
            group: mk(g),
            source: (self.meta & META_SRC != 0).then(|| mk(s)),
        }
    }
}

/// Multiply-fold mixing (as in wyhash): two 64x64→128 multiplies per half;
/// a few nanoseconds, no per-byte loop, no SipHash.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline(always)]
fn hash(k: &Packed) -> u64 {
    let a = fold(
        k.g[0] ^ 0x243f_6a88_85a3_08d3,
        k.g[1] ^ 0x1319_8a2e_0370_7344 ^ ((k.meta as u64) << 40),
    );
    let b = fold(
        k.s[0] ^ 0xa409_3822_299f_31d0,
        k.s[1] ^ 0x082e_fa98_ec4e_6c89,
    );
    fold(a ^ 0x4528_21e6_38d0_1377, b ^ 0xbe54_66cf_34e9_0c6c)
}

const EMPTY: u32 = u32::MAX;

/// Index slot: 32 bits of the hash (filters almost every probe without
/// touching the entry) and the entry's position.
#[derive(Clone, Copy)]
struct Slot {
    tag: u32,
    idx: u32,
}

/// A route in the table: the sets are ids into `MrouteTable::sets`.
#[derive(Clone, Copy)]
struct Stored {
    oifs: u32,
    accept: u32,
    index: u32,
    iif: u16,
    ttl_threshold: u8,
}

struct Entry {
    key: Packed,
    route: Stored,
}

/// The multicast forwarding table: an immutable open-addressing hash table
/// (linear probing, load ≤ 1/2, 8-byte slots pointing into a dense entry
/// array sorted by key). Lookups never allocate or lock.
pub struct MrouteTable {
    slots: Box<[Slot]>,
    mask: usize,
    entries: Box<[Entry]>,
    /// The distinct port sets of all entries; `sets[0]` is empty.
    sets: Box<[PortSet]>,
}

impl Default for MrouteTable {
    fn default() -> Self {
        MrouteTable::build(Vec::new()).expect("empty table")
    }
}

impl MrouteTable {
    /// Build a table. Rejects duplicate keys, VLAN > 4095, non-multicast
    /// groups, bad sources (other family, multicast, all-zero) and bad
    /// `iif`. Entries are kept sorted by key (for [`iter`](Self::iter)).
    pub fn build(mut entries: Vec<(McKey, McRoute)>) -> Result<MrouteTable, McError> {
        if entries.len() >= EMPTY as usize {
            return Err(McError::TooMany);
        }
        for (k, r) in &entries {
            if k.vlan > 0xfff {
                return Err(McError::BadVlan(*k));
            }
            if !k.group.is_multicast() {
                return Err(McError::NotMulticast(*k));
            }
            if let Some(s) = k.source {
                if s.is_v6() != k.group.is_v6() || s.is_multicast() || s.bits() == 0 {
                    return Err(McError::BadSource(*k));
                }
            }
            let bad_accept = match r.iif {
                ACCEPT_SET => k.source.is_some() || r.accept.is_empty(),
                _ => !r.accept.is_empty(),
            };
            if bad_accept
                || (r.iif != ANY_IIF
                    && r.iif != ACCEPT_SET
                    && r.iif as usize >= crate::l2::MAX_PORTS)
            {
                return Err(McError::BadIif(*k));
            }
        }
        entries.sort_unstable_by_key(|a| a.0);
        if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(McError::Duplicate(w[0].0));
        }
        let cap = (entries.len() * 2).next_power_of_two().max(2);
        let mask = cap - 1;
        let mut slots = vec![Slot { tag: 0, idx: EMPTY }; cap].into_boxed_slice();
        let mut sets = vec![PortSet::EMPTY];
        let mut ids: std::collections::HashMap<PortSet, u32> =
            std::collections::HashMap::from([(PortSet::EMPTY, 0)]);
        let mut intern = |p: PortSet| -> u32 {
            *ids.entry(p).or_insert_with(|| {
                sets.push(p);
                (sets.len() - 1) as u32
            })
        };
        let entries: Box<[Entry]> = entries
            .into_iter()
            .map(|(k, r)| Entry {
                key: pack(k.vlan, k.group, k.source),
                route: Stored {
                    oifs: intern(r.oifs),
                    accept: intern(r.accept),
                    index: r.index,
                    iif: r.iif,
                    ttl_threshold: r.ttl_threshold,
                },
            })
            .collect();
        for (n, e) in entries.iter().enumerate() {
            let h = hash(&e.key);
            let mut i = h as usize & mask;
            while slots[i].idx != EMPTY {
                i = (i + 1) & mask;
            }
            slots[i] = Slot {
                tag: (h >> 32) as u32,
                idx: n as u32,
            };
        }
        Ok(MrouteTable {
            slots,
            mask,
            entries,
            sets: sets.into(),
        })
    }

    /// The route with its sets resolved (ids are valid by construction;
    /// a bad one would read as the empty set, never panic).
    #[inline]
    fn view(&self, r: &Stored) -> McRouteRef<'_> {
        let set = |i: u32| self.sets.get(i as usize).unwrap_or(&PortSet::EMPTY);
        McRouteRef {
            iif: r.iif,
            oifs: set(r.oifs),
            accept: set(r.accept),
            ttl_threshold: r.ttl_threshold,
            index: r.index,
        }
    }

    #[inline]
    fn find(&self, k: &Packed) -> Option<McRouteRef<'_>> {
        self.find_index(k).and_then(|i| self.route_at(i))
    }

    #[inline]
    fn find_index(&self, k: &Packed) -> Option<u32> {
        self.find_hashed(k, hash(k))
    }

    #[inline]
    fn find_hashed(&self, k: &Packed, h: u64) -> Option<u32> {
        let tag = (h >> 32) as u32;
        let mut i = h as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s.idx == EMPTY {
                return None;
            }
            if s.tag == tag && self.entries[s.idx as usize].key == *k {
                return Some(s.idx);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Exact lookup of one key ((S,G) or (*,G)).
    #[inline]
    pub fn get(&self, key: &McKey) -> Option<McRouteRef<'_>> {
        self.find(&pack(key.vlan, key.group, key.source))
    }

    /// Data-path lookup: (S,G), then (*,G).
    #[inline]
    pub fn lookup(&self, vlan: u16, group: McAddr, source: McAddr) -> Option<McRouteRef<'_>> {
        self.find(&pack(vlan, group, Some(source)))
            .or_else(|| self.find(&pack(vlan, group, None)))
    }

    /// Data-path lookup returning the entry's position (for
    /// [`route_at`](Self::route_at)): (S,G), then (*,G).
    #[inline]
    pub fn lookup_index(&self, vlan: u16, group: McAddr, source: McAddr) -> Option<u32> {
        self.find_index(&pack(vlan, group, Some(source)))
            .or_else(|| self.find_index(&pack(vlan, group, None)))
    }

    /// [`lookup_index`](Self::lookup_index) for a batch:
    /// `out[i] = lookup_index(vlan, keys[i].0, keys[i].1)`. Panics if the
    /// slices' lengths differ.
    ///
    /// At 425,000 routes the table is tens of megabytes, so each probe is
    /// a DRAM access and then another for the entry. Here 16 lookups run
    /// in stages — hash every key and prefetch its slot, then prefetch
    /// every entry those slots name, then compare — so their misses
    /// overlap instead of queueing behind each other (as DPDK's bulk hash
    /// lookup does). Keys missing their (S,G) go through the same stages
    /// for (*,G).
    pub fn lookup_index_batch(
        &self,
        vlan: u16,
        keys: &[(McAddr, McAddr)],
        out: &mut [Option<u32>],
    ) {
        assert_eq!(keys.len(), out.len(), "lookup_index_batch: length mismatch");
        const LANES: usize = 16;
        let zero = pack(0, McAddr::V4(0), None);
        for (k, o) in keys.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let mut p = [zero; LANES];
            let mut lanes = 0u32;
            for (i, &(g, s)) in k.iter().enumerate() {
                p[i] = pack(vlan, g, Some(s));
                lanes |= 1 << i;
            }
            let missed = self.find_staged(&p, lanes, o);
            if missed != 0 {
                for (i, &(g, _)) in k.iter().enumerate() {
                    p[i] = pack(vlan, g, None);
                }
                self.find_staged(&p, missed, o);
            }
        }
    }

    /// The staged probe of [`lookup_index_batch`](Self::lookup_index_batch)
    /// for the lanes set in `lanes`; returns the lanes that found nothing.
    #[inline]
    fn find_staged(&self, p: &[Packed; 16], lanes: u32, out: &mut [Option<u32>]) -> u32 {
        let mut h = [0u64; 16];
        let each = |f: &mut dyn FnMut(usize)| {
            let mut l = lanes;
            while l != 0 {
                f(l.trailing_zeros() as usize);
                l &= l - 1;
            }
        };
        each(&mut |i| {
            h[i] = hash(&p[i]);
            crate::prefetch(&self.slots[h[i] as usize & self.mask]);
        });
        each(&mut |i| {
            let s = self.slots[h[i] as usize & self.mask];
            if let Some(e) = self.entries.get(s.idx as usize) {
                // The route may sit on the key's next line. Its sets are
                // few and shared (hot in cache), so not prefetched.
                crate::prefetch(&e.key);
                crate::prefetch(&e.route);
            }
        });
        let mut missed = 0;
        each(&mut |i| {
            out[i] = self.find_hashed(&p[i], h[i]);
            if out[i].is_none() {
                missed |= 1 << i;
            }
        });
        missed
    }

    /// The entry at a position [`lookup_index`](Self::lookup_index) gave.
    #[inline]
    pub fn route_at(&self, i: u32) -> Option<McRouteRef<'_>> {
        self.entries.get(i as usize).map(|e| self.view(&e.route))
    }

    /// Distinct port sets the entries share (the empty set included).
    pub fn distinct_sets(&self) -> usize {
        self.sets.len()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of the index and the entries.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
            + self.entries.len() * std::mem::size_of::<Entry>()
            + self.sets.len() * std::mem::size_of::<PortSet>()
    }

    /// Entries in key order (for `show`).
    pub fn iter(&self) -> impl Iterator<Item = (McKey, McRouteRef<'_>)> + '_ {
        self.entries
            .iter()
            .map(|e| (e.key.unpack(), self.view(&e.route)))
    }
}

/// Per VLAN, what the data path needs of snooping.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct McVlan {
    /// The VLAN snoops: its multicast follows the table, not flooding.
    pub snooping: bool,
    /// Unregistered groups go to every port instead of router ports only.
    pub flood_unregistered: bool,
    /// Multicast-router ports (learned from queries, or configured).
    pub router_ports: PortSet,
}

/// The multicast snapshot the workers read: routes of every snooping VLAN
/// and the routed ones (VLAN 0), plus the per-VLAN settings. Published as
/// a whole by the snooping thread; never changed in place.
#[derive(Default)]
pub struct McastTables {
    pub routes: MrouteTable,
    /// Indexed by VLAN id; VLANs past the end do not snoop.
    pub vlans: Box<[McVlan]>,
    /// Routed ports whose multicast follows the routes (VLAN 0) instead
    /// of going to the kernel.
    pub routing: bool,
}

impl McastTables {
    /// The VLAN's settings if it snoops.
    #[inline]
    pub fn snooping(&self, vlan: u16) -> Option<&McVlan> {
        self.vlans.get(vlan as usize).filter(|v| v.snooping)
    }
}

/// Per-route counter slots a switch has (425,000 routes fit).
pub const MAX_MROUTES: usize = 1 << 19;

// ---------------------------------------------------------------------------
// Snooping state.

/// IGMPv3 / MLDv2 group record types.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RecordType {
    IsIn,
    IsEx,
    ToIn,
    ToEx,
    Allow,
    Block,
}

/// Filter mode of one (port, group).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FilterMode {
    Include,
    Exclude,
}

/// Per-VLAN snooping parameters (times in ms).
#[derive(Clone, Copy, Debug)]
pub struct SnoopConfig {
    /// Group membership interval (robustness × query interval + response).
    pub gmi_ms: u64,
    /// Last member query time (count × interval).
    pub lmqt_ms: u64,
    /// Lifetime of a dynamically learned router port.
    pub router_timeout_ms: u64,
    /// Leaves and blocks take effect immediately (one host per port).
    pub fast_leave: bool,
    /// Most groups in the VLAN; reports for new groups beyond are refused.
    pub max_groups: usize,
    /// Most sources in one record; longer records are refused.
    pub max_sources_per_record: usize,
}

impl Default for SnoopConfig {
    fn default() -> Self {
        SnoopConfig {
            gmi_ms: 260_000,
            lmqt_ms: 2_000,
            router_timeout_ms: 255_000,
            fast_leave: false,
            max_groups: 32_768,
            max_sources_per_record: 64,
        }
    }
}

/// Why a report was not applied.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SnoopRefusal {
    /// The VLAN already has `max_groups` groups.
    GroupLimit,
    /// The record names more than `max_sources_per_record` sources.
    TooManySources,
    /// Group not multicast, source of the other family / multicast /
    /// all-zero, or port ≥ `MAX_PORTS`.
    Invalid,
}

/// Refusal counters.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct SnoopCounters {
    pub refused_group_limit: u64,
    pub refused_too_many_sources: u64,
    pub refused_invalid: u64,
}

/// Router-side filter state of one port for one group. In INCLUDE mode
/// every source has a timer (`Some(deadline)`); in EXCLUDE mode sources
/// with a timer are the "requested" list X and those with `None` the
/// exclude list Y.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PortFilter {
    pub mode: FilterMode,
    /// Group timer deadline (meaningful in EXCLUDE mode).
    pub group_deadline: u64,
    pub sources: BTreeMap<McAddr, Option<u64>>,
}

impl PortFilter {
    /// Whether traffic from `source` (None: a source named nowhere) is
    /// forwarded to this port.
    pub fn forwards(&self, source: Option<McAddr>) -> bool {
        let listed = source.and_then(|s| self.sources.get(&s));
        match self.mode {
            FilterMode::Include => listed.is_some(),
            FilterMode::Exclude => !matches!(listed, Some(None)),
        }
    }
}

/// Snooping state of one VLAN. Single writer; not read by the data path
/// (which reads the [`MrouteTable`] built from [`to_mroutes`](Self::to_mroutes)).
pub struct SnoopTable {
    vlan: u16,
    cfg: SnoopConfig,
    groups: BTreeMap<McAddr, BTreeMap<u16, PortFilter>>,
    /// Dynamic router ports: deadline.
    router_ports: BTreeMap<u16, u64>,
    static_router_ports: PortSet,
    counters: SnoopCounters,
}

fn lower(t: &mut Option<u64>, to: u64) {
    if let Some(d) = t {
        *d = (*d).min(to);
    }
}

impl SnoopTable {
    pub fn new(vlan: u16, cfg: SnoopConfig) -> SnoopTable {
        SnoopTable {
            vlan,
            cfg,
            groups: BTreeMap::new(),
            router_ports: BTreeMap::new(),
            static_router_ports: PortSet::EMPTY,
            counters: SnoopCounters::default(),
        }
    }

    pub fn vlan(&self) -> u16 {
        self.vlan
    }

    /// New timers and limits; existing state keeps its deadlines.
    pub fn set_config(&mut self, cfg: SnoopConfig) {
        self.cfg = cfg;
    }

    pub fn config(&self) -> &SnoopConfig {
        &self.cfg
    }

    pub fn counters(&self) -> SnoopCounters {
        self.counters
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// The filter of one (port, group), if the port is a member.
    pub fn filter(&self, group: McAddr, port: u16) -> Option<&PortFilter> {
        self.groups.get(&group)?.get(&port)
    }

    /// Groups and their member ports (for `show`).
    pub fn groups(&self) -> impl Iterator<Item = (McAddr, &BTreeMap<u16, PortFilter>)> + '_ {
        self.groups.iter().map(|(g, p)| (*g, p))
    }

    /// A query or PIM hello was seen on `port`.
    pub fn router_port_seen(&mut self, port: u16, now: u64) {
        if (port as usize) < crate::l2::MAX_PORTS {
            self.router_ports
                .insert(port, now + self.cfg.router_timeout_ms);
        }
    }

    /// A configured router port (never expires).
    pub fn set_static_router_port(&mut self, port: u16, on: bool) {
        if on {
            self.static_router_ports.insert(port);
        } else {
            self.static_router_ports.remove(port);
        }
    }

    /// The configured router ports, all at once.
    pub fn set_static_router_ports(&mut self, ports: PortSet) {
        self.static_router_ports = ports;
    }

    pub fn router_ports(&self) -> PortSet {
        let mut s = self.static_router_ports;
        for p in self.router_ports.keys() {
            s.insert(*p);
        }
        s
    }

    /// IGMPv1/v2 report or MLDv1 report: IS_EX({}).
    pub fn join(&mut self, port: u16, group: McAddr, now: u64) -> Result<(), SnoopRefusal> {
        self.report(port, group, RecordType::IsEx, &[], now)
    }

    /// IGMPv2 leave or MLDv1 done: TO_IN({}). With fast leave the port
    /// leaves at once, otherwise after the last member query time.
    pub fn leave(&mut self, port: u16, group: McAddr, now: u64) -> Result<(), SnoopRefusal> {
        self.report(port, group, RecordType::ToIn, &[], now)
    }

    fn refuse(&mut self, r: SnoopRefusal) -> Result<(), SnoopRefusal> {
        match r {
            SnoopRefusal::GroupLimit => self.counters.refused_group_limit += 1,
            SnoopRefusal::TooManySources => self.counters.refused_too_many_sources += 1,
            SnoopRefusal::Invalid => self.counters.refused_invalid += 1,
        }
        Err(r)
    }

    /// Apply one IGMPv3 / MLDv2 group record received on `port`
    /// (RFC 3376 6.4.1 / 6.4.2, router side, per port).
    pub fn report(
        &mut self,
        port: u16,
        group: McAddr,
        rtype: RecordType,
        sources: &[McAddr],
        now: u64,
    ) -> Result<(), SnoopRefusal> {
        if !group.is_multicast()
            || port as usize >= crate::l2::MAX_PORTS
            || sources
                .iter()
                .any(|s| s.is_v6() != group.is_v6() || s.is_multicast() || s.bits() == 0)
        {
            return self.refuse(SnoopRefusal::Invalid);
        }
        if sources.len() > self.cfg.max_sources_per_record {
            return self.refuse(SnoopRefusal::TooManySources);
        }
        let creates = matches!(rtype, RecordType::IsEx | RecordType::ToEx) || !sources.is_empty();
        if !self.groups.contains_key(&group) {
            if !creates {
                return Ok(());
            }
            if self.groups.len() >= self.cfg.max_groups {
                return self.refuse(SnoopRefusal::GroupLimit);
            }
        }
        let cfg = self.cfg;
        let ports = self.groups.entry(group).or_default();
        let f = ports.entry(port).or_insert_with(|| PortFilter {
            mode: FilterMode::Include,
            group_deadline: 0,
            sources: BTreeMap::new(),
        });
        apply(f, rtype, sources, now, &cfg);
        if f.mode == FilterMode::Include && f.sources.is_empty() {
            ports.remove(&port);
        }
        if ports.is_empty() {
            self.groups.remove(&group);
        }
        Ok(())
    }

    /// Run timers up to `now`: source and group timers, router ports.
    /// True if forwarding changed (something expired).
    pub fn expire(&mut self, now: u64) -> bool {
        let mut changed = false;
        let before = self.router_ports.len();
        self.router_ports.retain(|_, d| *d > now);
        changed |= self.router_ports.len() != before;
        self.groups.retain(|_, ports| {
            ports.retain(|_, f| {
                match f.mode {
                    FilterMode::Include => {
                        let n = f.sources.len();
                        f.sources.retain(|_, t| t.is_some_and(|d| d > now));
                        changed |= f.sources.len() != n;
                    }
                    FilterMode::Exclude if f.group_deadline <= now => {
                        // Group timer expired: back to INCLUDE with the
                        // sources that still have running timers.
                        f.mode = FilterMode::Include;
                        f.sources.retain(|_, t| t.is_some_and(|d| d > now));
                        changed = true;
                    }
                    FilterMode::Exclude => {
                        for t in f.sources.values_mut() {
                            if t.is_some_and(|d| d <= now) {
                                *t = None; // X → Y: no longer forwarded
                                changed = true;
                            }
                        }
                    }
                }
                f.mode == FilterMode::Exclude || !f.sources.is_empty()
            });
            !ports.is_empty()
        });
        changed
    }

    /// Ports that receive traffic of `group` from `source` (None: a source
    /// that no record names): members whose filter passes it, plus router
    /// ports. Unknown groups go to router ports only.
    pub fn ports_for(&self, group: McAddr, source: Option<McAddr>) -> PortSet {
        let mut s = self.router_ports();
        if let Some(ports) = self.groups.get(&group) {
            for (p, f) in ports {
                if f.forwards(source) {
                    s.insert(*p);
                }
            }
        }
        s
    }

    /// Compile into exact data-path entries: per known group a (*,G) entry
    /// (ports for sources no record names: EXCLUDE members and router
    /// ports) and an (S,G) entry for each named source whose port set
    /// differs from the (*,G) one. `lookup(S,G)` then `(*,G)` on the result
    /// equals [`ports_for`](Self::ports_for) for every source. Counter
    /// indices are assigned in order from 0; `iif` is [`ANY_IIF`].
    pub fn to_mroutes(&self) -> Vec<(McKey, McRoute)> {
        let routers = self.router_ports();
        let mut out = Vec::new();
        let mut named: Vec<McAddr> = Vec::new();
        for (g, ports) in &self.groups {
            let mut star = routers;
            named.clear();
            for (p, f) in ports {
                if f.mode == FilterMode::Exclude {
                    star.insert(*p);
                }
                named.extend(f.sources.keys().copied());
            }
            named.sort_unstable();
            named.dedup();
            let mut push = |source: Option<McAddr>, oifs: PortSet| {
                let index = out.len() as u32;
                out.push((
                    McKey {
                        vlan: self.vlan,
                        group: *g,
                        source,
                    },
                    McRoute {
                        accept: PortSet::EMPTY,
                        iif: ANY_IIF,
                        oifs,
                        ttl_threshold: 0,
                        index,
                    },
                ));
            };
            push(None, star);
            for s in &named {
                let mut oifs = routers;
                for (p, f) in ports {
                    if f.forwards(Some(*s)) {
                        oifs.insert(*p);
                    }
                }
                if oifs != star {
                    push(Some(*s), oifs);
                }
            }
        }
        out
    }
}

/// The RFC 3376 6.4 state transitions for one (port, group).
fn apply(f: &mut PortFilter, rtype: RecordType, b: &[McAddr], now: u64, cfg: &SnoopConfig) {
    use FilterMode::*;
    use RecordType::*;
    let gmi = now + cfg.gmi_ms;
    let lmq = now + cfg.lmqt_ms;
    let in_b = |s: &McAddr| b.contains(s);
    match (f.mode, rtype) {
        // INCLUDE(A)
        (Include, IsIn | Allow) => {
            for s in b {
                f.sources.insert(*s, Some(gmi));
            }
        }
        (Include, Block) => {
            // Q(G, A*B)
            if cfg.fast_leave {
                f.sources.retain(|s, _| !in_b(s));
            } else {
                for s in b {
                    if let Some(t) = f.sources.get_mut(s) {
                        lower(t, lmq);
                    }
                }
            }
        }
        (Include, ToIn) => {
            // A+B, (B)=GMI, Q(G, A-B)
            if cfg.fast_leave {
                f.sources.retain(|s, _| in_b(s));
            } else {
                for t in f.sources.values_mut() {
                    lower(t, lmq);
                }
            }
            for s in b {
                f.sources.insert(*s, Some(gmi));
            }
        }
        (Include, IsEx | ToEx) => {
            // EXCLUDE(A*B, B-A), (B-A)=0, delete (A-B), GT=GMI;
            // TO_EX also Q(G, A*B).
            f.sources.retain(|s, _| in_b(s));
            if rtype == ToEx {
                for t in f.sources.values_mut() {
                    lower(t, lmq);
                }
            }
            for s in b {
                f.sources.entry(*s).or_insert(None);
            }
            f.mode = Exclude;
            f.group_deadline = gmi;
        }
        // EXCLUDE(X, Y)
        (Exclude, IsIn | Allow) => {
            // X+B, Y-B, (B)=GMI
            for s in b {
                f.sources.insert(*s, Some(gmi));
            }
        }
        (Exclude, Block) => {
            // X+(B-Y), (B-X-Y)=GT, Q(G, B-Y)
            for s in b {
                let gt = f.group_deadline;
                let t = f.sources.entry(*s).or_insert(Some(gt));
                if cfg.fast_leave {
                    *t = None;
                } else {
                    lower(t, lmq);
                }
            }
        }
        (Exclude, ToIn) => {
            // X+B, Y-B, (B)=GMI, Q(G, X-Y), Q(G)
            if cfg.fast_leave {
                f.mode = Include;
                f.sources.clear();
            } else {
                for t in f.sources.values_mut() {
                    lower(t, lmq);
                }
                f.group_deadline = f.group_deadline.min(lmq);
            }
            for s in b {
                f.sources.insert(*s, Some(gmi));
            }
        }
        (Exclude, IsEx | ToEx) => {
            // EXCLUDE(A-Y, Y*A), delete (X-A), delete (Y-A), GT=GMI;
            // IS_EX: (A-X-Y)=GMI; TO_EX: (A-X-Y)=GT, Q(G, A-Y).
            let gt = f.group_deadline;
            f.sources.retain(|s, _| in_b(s));
            let new = if rtype == IsEx { gmi } else { gt };
            for s in b {
                let t = f.sources.entry(*s).or_insert(Some(new));
                if rtype == ToEx {
                    lower(t, lmq);
                }
            }
            f.group_deadline = gmi;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> McAddr {
        McAddr::V4(s.parse::<Ipv4Addr>().unwrap().into())
    }
    fn v6(s: &str) -> McAddr {
        McAddr::V6(s.parse::<Ipv6Addr>().unwrap().into())
    }
    fn ports(p: &[u16]) -> PortSet {
        let mut s = PortSet::EMPTY;
        for x in p {
            s.insert(*x);
        }
        s
    }
    fn route(p: &[u16], index: u32) -> McRoute {
        McRoute {
            accept: PortSet::EMPTY,
            iif: ANY_IIF,
            oifs: ports(p),
            ttl_threshold: 1,
            index,
        }
    }
    fn key(vlan: u16, g: McAddr, s: Option<McAddr>) -> McKey {
        McKey {
            vlan,
            group: g,
            source: s,
        }
    }

    /// Routes hold ids of shared sets: 20,000 routes over 410 ports with 9
    /// distinct outgoing sets keep 10 sets (the empty one too), an entry
    /// stays as small as the key plus 16 bytes whatever `MAX_PORTS` is,
    /// and high port ids (past 256) come back intact.
    #[test]
    fn mroute_sets_are_interned() {
        let groups: Vec<Vec<u16>> = (0..9u16)
            .map(|k| (k * 45..k * 45 + 48).filter(|p| *p < 410).collect())
            .collect();
        let entries: Vec<(McKey, McRoute)> = (0..20_000u32)
            .map(|i| {
                let g = McAddr::V4(0xe100_0000 + i);
                let mut r = route(&groups[i as usize % 9], i);
                if i % 2 == 0 {
                    r.iif = ACCEPT_SET;
                    r.accept = r.oifs;
                }
                (key(0, g, None), r)
            })
            .collect();
        let t = MrouteTable::build(entries.clone()).unwrap();
        assert_eq!(t.distinct_sets(), 10);
        assert!(std::mem::size_of::<Entry>() <= std::mem::size_of::<Packed>() + 16);
        for (k, r) in &entries {
            let got = t.get(k).unwrap();
            assert_eq!(got.to_route(), *r);
            let last = *groups[r.index as usize % 9].last().unwrap();
            assert!(got.oifs.contains(last));
            assert!(got.accepts(last));
        }
        assert!(t.get(&entries[1].0).unwrap().accepts(1000));
        assert!(!t.get(&entries[0].0).unwrap().accepts(1000));
        let per_route = t.memory_bytes() as f64 / entries.len() as f64;
        assert!(per_route < 128.0, "{per_route} bytes per route");
    }

    #[test]
    fn mroute_sg_beats_star_g() {
        let g = v4("239.1.1.1");
        let s = v4("10.0.0.1");
        let t = MrouteTable::build(vec![
            (key(0, g, None), route(&[1, 2], 0)),
            (key(0, g, Some(s)), route(&[3], 1)),
        ])
        .unwrap();
        assert_eq!(t.lookup(0, g, s).unwrap().index, 1);
        assert_eq!(t.lookup(0, g, v4("10.0.0.2")).unwrap().index, 0);
        assert!(t.lookup(0, v4("239.1.1.2"), s).is_none());
        assert_eq!(*t.get(&key(0, g, None)).unwrap().oifs, ports(&[1, 2]));
        assert_eq!(t.len(), 2);
        assert!(t.memory_bytes() > 0);
        let shown: Vec<_> = t.iter().map(|(k, r)| (k, r.index)).collect();
        assert_eq!(shown, vec![(key(0, g, None), 0), (key(0, g, Some(s)), 1)]);
    }

    #[test]
    fn mroute_families_and_vlans_distinct() {
        // 239.1.1.1 and ::ef01:0101 share the same low bits.
        let g4 = v4("239.1.1.1");
        let g6 = McAddr::V6(0xff00_0000_0000_0000_0000_0000_ef01_0101);
        let g6low = McAddr::V6(0xef01_0101);
        let s4 = v4("10.0.0.1");
        let s6 = v6("2001:db8::1");
        let t = MrouteTable::build(vec![
            (key(0, g4, Some(s4)), route(&[1], 0)),
            (key(0, g6, Some(s6)), route(&[2], 1)),
            (key(10, g4, None), route(&[3], 2)),
            (key(20, g4, None), route(&[4], 3)),
        ])
        .unwrap();
        assert_eq!(t.lookup(0, g4, s4).unwrap().index, 0);
        assert_eq!(t.lookup(0, g6, s6).unwrap().index, 1);
        assert!(t.lookup(0, g6, McAddr::V6(0x0a00_0001)).is_none());
        assert!(t.lookup(0, g6low, s6).is_none());
        assert_eq!(t.lookup(10, g4, s4).unwrap().index, 2);
        assert_eq!(t.lookup(20, g4, s4).unwrap().index, 3);
        assert!(t.lookup(30, g4, s4).is_none());
        // Round trip through iter.
        let back: Vec<_> = t.iter().map(|(k, r)| (k, r.to_route())).collect();
        let t2 = MrouteTable::build(back).unwrap();
        for (k, r) in t.iter() {
            assert_eq!(t2.get(&k), Some(r));
        }
    }

    #[test]
    fn mroute_build_rejects() {
        let g = v4("239.1.1.1");
        let s = v4("10.0.0.1");
        let dup = key(5, g, Some(s));
        assert_eq!(
            MrouteTable::build(vec![(dup, route(&[1], 0)), (dup, route(&[2], 1))]).err(),
            Some(McError::Duplicate(dup))
        );
        let k = key(0, v4("10.1.1.1"), None);
        assert_eq!(
            MrouteTable::build(vec![(k, route(&[1], 0))]).err(),
            Some(McError::NotMulticast(k))
        );
        let k = key(0, g, Some(v6("2001:db8::1")));
        assert_eq!(
            MrouteTable::build(vec![(k, route(&[1], 0))]).err(),
            Some(McError::BadSource(k))
        );
        let k = key(4096, g, None);
        assert_eq!(
            MrouteTable::build(vec![(k, route(&[1], 0))]).err(),
            Some(McError::BadVlan(k))
        );
        let k = key(0, g, None);
        let mut r = route(&[1], 0);
        r.iif = 1024;
        assert_eq!(
            MrouteTable::build(vec![(k, r)]).err(),
            Some(McError::BadIif(k))
        );
        let empty = MrouteTable::default();
        assert!(empty.is_empty() && empty.lookup(0, g, s).is_none());
    }

    #[test]
    fn mroute_many_random() {
        let mut r = testkit::routes::Rng(0x5eed);
        let mut entries = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while entries.len() < 50_000 {
            let g = McAddr::V4(0xe000_0000 | (r.next() as u32 & 0x0fff_ffff));
            let s = (!r.next().is_multiple_of(4))
                .then(|| McAddr::V4(0x0a00_0000 | (r.next() as u32 & 0xffff)));
            let k = key((r.next() % 3) as u16, g, s);
            if seen.insert(k) {
                let n = entries.len() as u32;
                entries.push((k, route(&[(n % 256) as u16], n)));
            }
        }
        let t = MrouteTable::build(entries.clone()).unwrap();
        for (k, rt) in &entries {
            assert_eq!(t.get(k).map(|r| r.to_route()), Some(*rt));
        }
        for _ in 0..10_000 {
            let k = key(7, McAddr::V4(0xe000_0000 | r.next() as u32 & 0xfff), None);
            assert!(t.get(&k).is_none());
        }
    }

    #[test]
    fn mroute_accept_sets() {
        let g = v4("239.2.2.2");
        let mut bidir = route(&[1, 2, 3], 0);
        bidir.iif = ACCEPT_SET;
        bidir.accept = ports(&[1, 2, 5]);
        let t = MrouteTable::build(vec![(key(0, g, None), bidir)]).unwrap();
        let r = t.lookup(0, g, v4("10.0.0.9")).unwrap();
        assert!(r.accepts(1) && r.accepts(2) && r.accepts(5));
        assert!(!r.accepts(3) && !r.accepts(4), "outgoing is not accepting");
        let mut one = route(&[2], 1);
        one.iif = 7;
        assert!(one.accepts(7) && !one.accepts(2));
        assert!(route(&[2], 1).accepts(200), "any");
        // An accept set only on (*,G), never empty, never without the
        // sentinel.
        let sg = key(0, g, Some(v4("10.0.0.1")));
        assert_eq!(
            MrouteTable::build(vec![(sg, bidir)]).err(),
            Some(McError::BadIif(sg))
        );
        let k = key(0, g, None);
        let mut empty = bidir;
        empty.accept = PortSet::EMPTY;
        assert_eq!(
            MrouteTable::build(vec![(k, empty)]).err(),
            Some(McError::BadIif(k))
        );
        let mut stray = route(&[1], 0);
        stray.accept = ports(&[1]);
        assert_eq!(
            MrouteTable::build(vec![(k, stray)]).err(),
            Some(McError::BadIif(k))
        );
    }

    #[test]
    fn mroute_batch_lookup_equals_one_by_one() {
        // (S,G) hits, (*,G) fallbacks, misses, both families, other VLANs
        // and batch lengths that are not a multiple of the 16 lanes.
        let mut r = testkit::routes::Rng(0xba7c);
        let mut entries = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut probes = Vec::new();
        while entries.len() < 20_000 {
            let v6 = r.next().is_multiple_of(5);
            let (g, s) = if v6 {
                (
                    McAddr::V6((0xff3e << 112) | (r.next() % 512) as u128),
                    McAddr::V6((0x2001_0db8 << 96) | ((r.next() % 64) as u128 + 1)),
                )
            } else {
                (
                    McAddr::V4(0xe800_0000 | (r.next() % 512) as u32),
                    McAddr::V4(0x0a00_0001 + (r.next() % 64) as u32),
                )
            };
            let vlan = (r.next() % 2) as u16;
            let src = (!r.next().is_multiple_of(3)).then_some(s);
            probes.push((vlan, g, s));
            let k = key(vlan, g, src);
            if seen.insert(k) {
                let n = entries.len() as u32;
                entries.push((k, route(&[(n % 256) as u16], n)));
            }
        }
        let t = MrouteTable::build(entries).unwrap();
        for vlan in [0u16, 1, 9] {
            let keys: Vec<(McAddr, McAddr)> = probes
                .iter()
                .map(|&(_, g, s)| (g, s))
                .chain((0..100).map(|i| (McAddr::V4(0xe900_0000 | i), McAddr::V4(0x0a00_0001))))
                .collect();
            for len in [0, 1, 15, 16, 17, 1000, keys.len()] {
                let mut out = vec![Some(u32::MAX); len];
                t.lookup_index_batch(vlan, &keys[..len], &mut out);
                for ((g, s), got) in keys[..len].iter().zip(&out) {
                    assert_eq!(*got, t.lookup_index(vlan, *g, *s), "{vlan} {g:?} {s:?}");
                }
            }
        }
        let hits = probes
            .iter()
            .filter(|&&(v, g, s)| t.lookup_index(v, g, s).is_some())
            .count();
        assert!(hits > probes.len() / 2, "the probes mostly hit: {hits}");
    }

    fn cfg(fast_leave: bool) -> SnoopConfig {
        SnoopConfig {
            gmi_ms: 260_000,
            lmqt_ms: 2_000,
            router_timeout_ms: 255_000,
            fast_leave,
            max_groups: 30_000,
            max_sources_per_record: 8,
        }
    }

    #[test]
    fn v2_join_leave() {
        let g = v4("239.1.1.1");
        let mut t = SnoopTable::new(10, cfg(false));
        t.join(1, g, 0).unwrap();
        t.join(2, g, 0).unwrap();
        assert_eq!(t.ports_for(g, None), ports(&[1, 2]));
        assert_eq!(t.ports_for(g, Some(v4("10.0.0.1"))), ports(&[1, 2]));
        t.leave(1, g, 1_000).unwrap();
        // Still a member until the last member query time passes.
        assert!(!t.expire(2_999), "nothing expired yet");
        assert_eq!(t.ports_for(g, None), ports(&[1, 2]));
        assert!(t.expire(3_000), "port 1 left: a change");
        assert_eq!(t.ports_for(g, None), ports(&[2]));
        // A report during the last member query keeps the port.
        t.leave(2, g, 4_000).unwrap();
        t.join(2, g, 5_000).unwrap();
        t.expire(7_000);
        assert_eq!(t.ports_for(g, None), ports(&[2]));
        // Group membership interval timeout.
        assert!(t.expire(5_000 + 260_000));
        assert_eq!(t.group_count(), 0);
        assert!(t.ports_for(g, None).is_empty());
        // Leave for an unknown group creates nothing.
        t.leave(3, g, 0).unwrap();
        assert_eq!(t.group_count(), 0);
    }

    #[test]
    fn fast_leave() {
        let g = v6("ff3e::1234");
        let mut t = SnoopTable::new(10, cfg(true));
        t.join(1, g, 0).unwrap();
        t.join(2, g, 0).unwrap();
        t.leave(1, g, 10).unwrap();
        assert_eq!(t.ports_for(g, None), ports(&[2]));
        t.leave(2, g, 10).unwrap();
        assert_eq!(t.group_count(), 0);
    }

    #[test]
    fn v3_include_exclude() {
        use RecordType::*;
        let g = v4("232.1.1.1");
        let (s1, s2, s3) = (v4("10.0.0.1"), v4("10.0.0.2"), v4("10.0.0.3"));
        let mut t = SnoopTable::new(10, cfg(false));
        // INCLUDE {s1, s2} on port 1.
        t.report(1, g, IsIn, &[s1, s2], 0).unwrap();
        assert_eq!(t.ports_for(g, Some(s1)), ports(&[1]));
        assert!(t.ports_for(g, Some(s3)).is_empty());
        assert!(t.ports_for(g, None).is_empty());
        // ALLOW s3.
        t.report(1, g, Allow, &[s3], 0).unwrap();
        assert_eq!(t.ports_for(g, Some(s3)), ports(&[1]));
        // BLOCK s1: gone after LMQT.
        t.report(1, g, Block, &[s1], 1_000).unwrap();
        t.expire(2_999);
        assert_eq!(t.ports_for(g, Some(s1)), ports(&[1]));
        t.expire(3_000);
        assert!(t.ports_for(g, Some(s1)).is_empty());
        assert_eq!(t.ports_for(g, Some(s2)), ports(&[1]));
        // TO_EX {s2}: EXCLUDE(A*B={s2} with lowered timer, B-A={}).
        t.report(1, g, ToEx, &[s2], 4_000).unwrap();
        let f = t.filter(g, 1).unwrap();
        assert_eq!(f.mode, FilterMode::Exclude);
        assert_eq!(f.sources.get(&s2), Some(&Some(6_000)));
        assert_eq!(f.sources.get(&s3), None);
        assert_eq!(t.ports_for(g, Some(s2)), ports(&[1]));
        assert_eq!(t.ports_for(g, Some(s3)), ports(&[1]));
        // s2's timer runs out: it moves to the exclude list.
        t.expire(6_000);
        assert!(t.ports_for(g, Some(s2)).is_empty());
        assert_eq!(t.ports_for(g, None), ports(&[1]));
        // IS_EX {s3}: EXCLUDE(A-Y={s3} GMI, Y*A={}).
        t.report(1, g, IsEx, &[s3], 7_000).unwrap();
        assert_eq!(t.ports_for(g, Some(s2)), ports(&[1]));
        assert_eq!(t.ports_for(g, Some(s3)), ports(&[1]));
        // Exclude list via IS_EX on port 2: EXCLUDE({}, {s1}).
        t.report(2, g, IsEx, &[s1], 7_000).unwrap();
        assert_eq!(t.ports_for(g, Some(s1)), ports(&[1]));
        // ALLOW s1 on port 2 takes it out of Y.
        t.report(2, g, Allow, &[s1], 8_000).unwrap();
        assert_eq!(t.ports_for(g, Some(s1)), ports(&[1, 2]));
        // BLOCK s1 on port 2 in EXCLUDE mode: excluded after LMQT.
        t.report(2, g, Block, &[s1], 9_000).unwrap();
        t.expire(11_000);
        assert_eq!(t.ports_for(g, Some(s1)), ports(&[1]));
        // TO_IN {s2} on port 1: INCLUDE {s2} once the group timer (lowered
        // to LMQT) expires.
        t.report(1, g, ToIn, &[s2], 20_000).unwrap();
        t.expire(22_000);
        let f = t.filter(g, 1).unwrap();
        assert_eq!(f.mode, FilterMode::Include);
        assert_eq!(f.sources.keys().copied().collect::<Vec<_>>(), vec![s2]);
        assert!(!t.ports_for(g, Some(s3)).contains(1));
        assert!(t.ports_for(g, Some(s2)).contains(1));
        // Source timer expiry in INCLUDE mode drops the port.
        t.expire(20_000 + 260_000);
        assert!(t.filter(g, 1).is_none());
    }

    #[test]
    fn router_ports_always_included() {
        let g = v4("239.2.2.2");
        let s = v4("10.0.0.9");
        let mut t = SnoopTable::new(10, cfg(false));
        t.set_static_router_port(7, true);
        t.router_port_seen(8, 0);
        assert_eq!(t.ports_for(g, Some(s)), ports(&[7, 8]));
        t.report(1, g, RecordType::IsIn, &[v4("10.0.0.1")], 0)
            .unwrap();
        assert_eq!(t.ports_for(g, Some(s)), ports(&[7, 8]));
        let tbl = MrouteTable::build(t.to_mroutes()).unwrap();
        assert_eq!(*tbl.lookup(10, g, s).unwrap().oifs, ports(&[7, 8]));
        assert_eq!(
            *tbl.lookup(10, g, v4("10.0.0.1")).unwrap().oifs,
            ports(&[1, 7, 8])
        );
        t.expire(255_000);
        assert_eq!(t.router_ports(), ports(&[7]));
    }

    #[test]
    fn caps_and_invalid_counted() {
        let mut c = cfg(false);
        c.max_groups = 2;
        let mut t = SnoopTable::new(1, c);
        t.join(1, v4("239.0.0.1"), 0).unwrap();
        t.join(1, v4("239.0.0.2"), 0).unwrap();
        assert_eq!(t.join(1, v4("239.0.0.3"), 0), Err(SnoopRefusal::GroupLimit));
        t.join(2, v4("239.0.0.2"), 0).unwrap(); // existing group: fine
        let many: Vec<_> = (1..=9).map(|i| McAddr::V4(0x0a00_0000 + i)).collect();
        assert_eq!(
            t.report(1, v4("239.0.0.1"), RecordType::Allow, &many, 0),
            Err(SnoopRefusal::TooManySources)
        );
        assert_eq!(t.join(1, v4("10.0.0.1"), 0), Err(SnoopRefusal::Invalid));
        assert_eq!(
            t.report(
                1,
                v4("239.0.0.1"),
                RecordType::Allow,
                &[v6("2001:db8::1")],
                0
            ),
            Err(SnoopRefusal::Invalid)
        );
        assert_eq!(
            t.counters(),
            SnoopCounters {
                refused_group_limit: 1,
                refused_too_many_sources: 1,
                refused_invalid: 2
            }
        );
    }

    #[test]
    fn many_groups_one_vlan() {
        let mut t = SnoopTable::new(100, cfg(false));
        for i in 0..28_000u32 {
            t.join(
                (i % 48) as u16,
                McAddr::V4(0xef00_0000 + i),
                (i / 1000) as u64,
            )
            .unwrap();
        }
        assert_eq!(t.group_count(), 28_000);
        let tbl = MrouteTable::build(t.to_mroutes()).unwrap();
        assert_eq!(tbl.len(), 28_000);
        for i in (0..28_000u32).step_by(997) {
            let r = tbl
                .lookup(100, McAddr::V4(0xef00_0000 + i), McAddr::V4(0x0a00_0001))
                .unwrap();
            assert_eq!(*r.oifs, ports(&[(i % 48) as u16]));
        }
        t.expire(260_000 + 27);
        assert_eq!(t.group_count(), 0);
    }

    /// Naive model of the compiled table: for every group and source of a
    /// small universe (and a source no record names), `lookup` on the table
    /// built from `to_mroutes` must equal `ports_for`, a direct evaluation
    /// of every port's filter. Random records, leaves, router ports and
    /// timer runs.
    #[test]
    fn to_mroutes_matches_model_randomized() {
        use RecordType::*;
        let mut r = testkit::routes::Rng(0xfeed_beef);
        for fast in [false, true] {
            let mut t = SnoopTable::new(42, cfg(fast));
            let groups = [
                v4("239.1.1.1"),
                v4("239.1.1.2"),
                v6("ff3e::1"),
                v6("ff3e::2"),
            ];
            let src4: Vec<_> = (1..=5).map(|i| McAddr::V4(0x0a00_0000 + i)).collect();
            let src6: Vec<_> = (1..=5).map(|i| McAddr::V6(0x2001_0db8 << 96 | i)).collect();
            let unnamed4 = McAddr::V4(0x0a00_00ff);
            let unnamed6 = McAddr::V6(0x2001_0db8 << 96 | 0xff);
            let mut now = 0u64;
            let (mut sg_seen, mut excl_seen) = (0, 0);
            for step in 0..3_000 {
                now += r.next() % 1_500;
                let g = groups[(r.next() % 4) as usize];
                let pool = if g.is_v6() { &src6 } else { &src4 };
                let n = (r.next() % 4) as usize;
                let srcs: Vec<_> = (0..n).map(|_| pool[(r.next() % 5) as usize]).collect();
                let port = (r.next() % 6) as u16;
                match r.next() % 10 {
                    0 => t.report(port, g, IsIn, &srcs, now).unwrap(),
                    1 => t.report(port, g, IsEx, &srcs, now).unwrap(),
                    2 => t.report(port, g, ToIn, &srcs, now).unwrap(),
                    3 => t.report(port, g, ToEx, &srcs, now).unwrap(),
                    4 => t.report(port, g, Allow, &srcs, now).unwrap(),
                    5 => t.report(port, g, Block, &srcs, now).unwrap(),
                    6 => t.join(port, g, now).unwrap(),
                    7 => t.leave(port, g, now).unwrap(),
                    8 => t.router_port_seen(200 + port, now),
                    _ => {
                        now += r.next() % 200_000;
                        t.expire(now);
                    }
                }
                if step % 7 != 0 {
                    continue;
                }
                // Invariants: INCLUDE records are never empty and have timers.
                for (_, ps) in t.groups() {
                    assert!(!ps.is_empty());
                    for f in ps.values() {
                        if f.mode == FilterMode::Include {
                            assert!(!f.sources.is_empty());
                            assert!(f.sources.values().all(|x| x.is_some()));
                        }
                    }
                }
                let routes = t.to_mroutes();
                sg_seen += routes.iter().filter(|(k, _)| k.source.is_some()).count();
                excl_seen += t
                    .groups()
                    .flat_map(|(_, ps)| ps.values())
                    .filter(|f| f.sources.values().any(|x| x.is_none()))
                    .count();
                for (i, (_, rt)) in routes.iter().enumerate() {
                    assert_eq!(rt.index, i as u32);
                }
                let tbl = MrouteTable::build(routes).unwrap();
                for g in groups {
                    let (pool, un) = if g.is_v6() {
                        (&src6, unnamed6)
                    } else {
                        (&src4, unnamed4)
                    };
                    for s in pool.iter().copied().chain([un]) {
                        let want = t.ports_for(g, Some(s));
                        match tbl.lookup(42, g, s) {
                            Some(rt) => assert_eq!(*rt.oifs, want, "{g:?} {s:?} step {step}"),
                            None => {
                                assert!(t.filter(g, 0).is_none());
                                assert!(t.groups().all(|(x, _)| x != g));
                                assert_eq!(want, t.router_ports());
                            }
                        }
                    }
                    assert!(tbl.lookup(43, g, un).is_none());
                }
            }
            // The walk reached (S,G) entries and exclude lists.
            assert!(sg_seen > 100 && excl_seen > 20, "{sg_seen} {excl_seen}");
        }
    }
}
