//! The FIB manager: the one writer of the forwarding tables.
//!
//! Routes come from three sources and are compiled into what the workers
//! read through `pipeline::l3::L3Tables`: [`Lpm4`] / [`Lpm6`] (prefix →
//! target id) and [`NextHopTable`] (target id → next hop, or
//! `GROUP_BIT | index` → ECMP group).
//!
//! # Precedence
//! Each prefix keeps one slot per source: [`Source::Connected`] (the subnets
//! of routed interfaces, from Lanyard's config) beats [`Source::Static`]
//! (Lanyard's static routes), which beats [`Source::Frr`] (zebra's choice;
//! zebra already picked the best among its own protocols, so all FRR
//! protocols share one slot). The installed route is the best slot that is
//! usable; removing it installs the next one. Every slot keeps its own
//! next-hop references whether it wins or not, so falling back never
//! allocates and cannot fail for lack of room.
//!
//! # Sharing
//! Routes from `set` and from zebra's inline next-hop lists share next hops
//! by content: one id per distinct (port, gateway), refcounted, and one
//! ECMP group per distinct member multiset, refcounted. Weights become
//! repeated members (see [`weights_to_counts`]): divided by their greatest
//! common divisor, and if the total is still over [`MAX_GROUP_MEMBERS`],
//! scaled to 64 slots by largest remainder with every member kept at ≥ 1.
//! One permanent next hop, [`BLACKHOLE_ID`], drops (blackhole, unreachable
//! and prohibit routes).
//!
//! # zebra's next-hop objects (`fpm use-next-hop-groups`)
//! Each object zebra sends gets its *own* FIB entry: a single next hop gets
//! a dedicated next-hop id, a group a dedicated group index whose members
//! are the dedicated ids of its single objects. Routes referencing the
//! object point at that entry. When zebra changes an object, that one
//! entry is rewritten in place (`NextHopTable::set` / `set_group`): every
//! route using it moves at once and no LPM entry is touched, which is what
//! the next-hop indirection is for. (Sharing these entries by content with
//! config routes would make an in-place rewrite move unrelated routes;
//! zebra already deduplicates its objects, so nothing is lost.) Only when
//! an object changes kind (single ↔ group ↔ blackhole) or becomes usable /
//! unusable do the routes using it get re-evaluated, through a reverse index
//! (object → routes), and groups containing a changed object are recomputed
//! (object → parent groups). Objects a route references before zebra sent
//! them leave the route unresolvable until they arrive.
//!
//! Next hops whose ifindex maps to no port are unusable; a group keeps its
//! usable members; a route with no usable next hop is not installed and is
//! counted (`unresolvable`). When ports come and go, call
//! [`Fib::refresh_ports`]. Only table 254 (main) is used.
//!
//! # Resync
//! [`FpmEvent::Connected`] starts a new generation (O(1)); every route and
//! object zebra replays is stamped with it; [`FpmEvent::Settled`] removes
//! FRR routes and objects still carrying an older generation, like
//! [`crate::frr::Rib`] does, through the ordinary incremental removal path.
//!
//! # Failures
//! Errors are values ([`FibError`]), counted in [`FibCounters`]. A refused
//! `set` or route update leaves the previous state intact: new references
//! are taken before the LPM is written and given back if it refuses. Where
//! a previous state cannot be kept safely (an object whose members went
//! away), the result fails safe: an object that cannot get a FIB entry
//! becomes unusable (its routes are withdrawn), a group object with more
//! than 64 distinct usable members keeps the 64 heaviest.
//!
//! # Memory reclamation
//! Freed next-hop ids and group indices are quarantined like LPM nodes, so
//! a worker that read a target id just before a change never resolves it
//! to a recycled entry. [`Fib::maintain`] releases both; see there.

use crate::frr::netlink::RT_TABLE_MAIN;
use crate::frr::{self, FpmEvent, NextHopObject, NextHops, Prefix, RouteUpdate};
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use tables::huge::Backing;
use tables::mpls::{Lfib, LfibSize, NHLFE_BIT, VIA_DEFAULT_BIT};
use tables::{
    Group, Lpm4, Lpm6, LpmError, LpmStats, NextHop, NextHopTable, BLACKHOLE_PORT, GROUP_BIT,
    MAX_GROUP_MEMBERS,
};

/// The next-hop id every drop route points at (port [`BLACKHOLE_PORT`]).
pub const BLACKHOLE_ID: u32 = 0;

/// Capacities, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FibConfig {
    /// Most IPv4 prefixes held (any source). Default 2,000,000.
    pub max_routes_v4: usize,
    /// Most IPv6 prefixes held. Default 1,000,000.
    pub max_routes_v6: usize,
    /// `Lpm4` node pool: distinct /24s holding prefixes longer than /24.
    /// Default 2^18 (256 MiB of address space, touched only as used).
    pub lpm4_nodes: u32,
    /// `Lpm6` node pool. Default 2^20 (1 GiB of address space, touched only
    /// as used): about 600,000 routes of `docs/lpm.md`'s sparse synthetic
    /// mix; real tables cluster and need fewer. In IPv6 the node pool, not
    /// `max_routes_v6`, is usually the limit.
    pub lpm6_nodes: u32,
    /// Next-hop ids (distinct (port, gateway) pairs plus one per zebra
    /// single next-hop object, plus the blackhole). Default 65,536.
    pub next_hops: u32,
    /// ECMP groups (distinct member multisets plus one per zebra group
    /// object). Default 16,384 (4 MiB of group slots).
    pub groups: u32,
    /// The FPM table id this FIB takes zebra's routes from: 254 (main)
    /// for the default VRF, the VRF's table id for a VRF (docs/vrf.md).
    pub table: u32,
    /// Sizes of the label FIB (NHLFEs, pseudowires…).
    pub lfib: LfibSize,
    /// LPM first levels and pools on 2 MB pages committed as touched
    /// (`tables::huge`): true for the default VRF's big table, false for a
    /// VRF's, whose few routes spread over the 2^24-entry first levels
    /// would each commit a 2 MB page instead of 4 KB.
    pub huge_pages: bool,
}

impl FibConfig {
    /// Capacities of a VRF's FIB: `routes` prefixes per family, pools
    /// scaled to them (the LPM code is the default table's; only the
    /// sizes differ), a small label FIB.
    pub fn for_vrf(table: u32, routes: usize) -> FibConfig {
        let r = routes.max(16);
        FibConfig {
            max_routes_v4: r,
            max_routes_v6: r,
            lpm4_nodes: (r as u32 / 4).clamp(64, 1 << 16),
            lpm6_nodes: (r as u32 * 4).clamp(1024, 1 << 18),
            next_hops: (r as u32).clamp(256, 1 << 16),
            groups: (r as u32 / 8).clamp(64, 4096),
            table,
            lfib: LfibSize {
                // A VRF's labelled (imported VPN) routes take their NHLFEs
                // from the default VRF's table (`Fib::set_core`); its own
                // serves only a VRF FIB without one. 16,384 slots here cost
                // 1.5 MiB of touched memory per VRF (docs/vrf.md, "Sizes").
                nhlfes: 256,
                pseudowires: 1,
                acs: 1,
                protections: 1,
            },
            huge_pages: false,
        }
    }
}

impl Default for FibConfig {
    fn default() -> Self {
        FibConfig {
            max_routes_v4: 2_000_000,
            max_routes_v6: 1_000_000,
            lpm4_nodes: 1 << 18,
            lpm6_nodes: 1 << 20,
            next_hops: 65_536,
            groups: 16_384,
            table: RT_TABLE_MAIN,
            lfib: LfibSize::default(),
            huge_pages: true,
        }
    }
}

/// Where a route came from, in decreasing precedence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// A subnet of a routed interface (Lanyard's config).
    Connected,
    /// A static route in Lanyard's config.
    Static,
    /// zebra, via FPM; `protocol` is `rtm_protocol` (see [`protocol_name`]).
    Frr { protocol: u8 },
}

impl Source {
    /// 0 (connected) beats 1 (static) beats 2 (FRR). One slot per rank.
    pub fn rank(self) -> u8 {
        match self {
            Source::Connected => 0,
            Source::Static => 1,
            Source::Frr { .. } => 2,
        }
    }

    /// Index into the per-source counters: 0, 1, 2 + protocol.
    fn key(self) -> usize {
        match self {
            Source::Connected => 0,
            Source::Static => 1,
            Source::Frr { protocol } => 2 + protocol as usize,
        }
    }

    fn from_key(k: usize) -> Source {
        match k {
            0 => Source::Connected,
            1 => Source::Static,
            k => Source::Frr {
                protocol: (k - 2).min(255) as u8,
            },
        }
    }

    /// "connected", "static", or the FRR protocol's name ("bgp", "ospf",
    /// "frr-static", ..., "proto-N" for unknown numbers).
    pub fn name(self) -> String {
        match self {
            Source::Connected => "connected".into(),
            Source::Static => "static".into(),
            Source::Frr { protocol } => match protocol_name(protocol) {
                Some(n) => n.into(),
                None => format!("proto-{protocol}"),
            },
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for Source {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Name of an `rtm_protocol` number as zebra uses them (Linux
/// `rtnetlink.h` and FRR's `zebra/rt_netlink.h`). zebra's own connected
/// and kernel routes carry 2; its static routes (staticd) 196.
pub fn protocol_name(protocol: u8) -> Option<&'static str> {
    Some(match protocol {
        2 => "kernel",
        3 => "boot",
        4 => "kernel-static",
        11 => "zebra",
        42 => "babel",
        186 => "bgp",
        187 => "isis",
        188 => "ospf",
        189 => "rip",
        190 => "ripng",
        191 => "nhrp",
        192 => "eigrp",
        193 => "ldp",
        194 => "sharp",
        195 => "pbr",
        196 => "frr-static",
        197 => "openfabric",
        198 => "srte",
        _ => return None,
    })
}

/// One way out of a route: egress port, gateway (`None`: connected, the
/// destination is the neighbour) and ECMP weight (0 counts as 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Hop {
    pub port: u16,
    pub gateway: Option<IpAddr>,
    pub weight: u16,
}

impl Hop {
    /// Via `gateway` out of `port`, weight 1.
    pub fn via(port: u16, gateway: IpAddr) -> Hop {
        Hop {
            port,
            gateway: Some(gateway),
            weight: 1,
        }
    }

    /// Directly connected on `port`, weight 1.
    pub fn connected(port: u16) -> Hop {
        Hop {
            port,
            gateway: None,
            weight: 1,
        }
    }
}

/// What a route does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// Forward over these next hops (several: ECMP).
    Via(Vec<Hop>),
    /// Drop.
    Blackhole,
}

/// Address family, for [`Fib::routes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

/// Why an update was refused. Nothing changed when one is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FibError {
    /// Prefix length too long for its family.
    BadPrefix,
    /// `RouteKind::Via` with no hops.
    NoHops,
    /// A hop uses [`BLACKHOLE_PORT`] (use a blackhole route instead).
    BadPort,
    /// The family's `max_routes` is reached.
    RouteLimit,
    /// The LPM node pool is exhausted.
    LpmFull,
    /// No next-hop id left.
    NextHopFull,
    /// No ECMP group left.
    GroupFull,
    /// More than [`MAX_GROUP_MEMBERS`] distinct next hops.
    GroupTooLarge,
    /// No NHLFE slot left in the LFIB (labelled routes and label entries).
    NhlfeFull,
    /// A reserved or out-of-range label, or more labels than one push
    /// takes (`tables::mpls::MAX_PUSH`).
    BadLabel,
}

impl fmt::Display for FibError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FibError::BadPrefix => "prefix length out of range",
            FibError::NoHops => "route has no next hop",
            FibError::BadPort => "next hop uses the blackhole port",
            FibError::RouteLimit => "route limit reached",
            FibError::LpmFull => "LPM node pool exhausted",
            FibError::NextHopFull => "next-hop table full",
            FibError::GroupFull => "ECMP group table full",
            FibError::GroupTooLarge => "more than 64 distinct next hops in a group",
            FibError::NhlfeFull => "LFIB NHLFE table full",
            FibError::BadLabel => "reserved or out-of-range label, or too many labels",
        })
    }
}

impl std::error::Error for FibError {}

/// Event counters (monotonic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FibCounters {
    /// Refused: bad prefix, no hops, blackhole port.
    pub bad_input: u64,
    pub route_limit: u64,
    pub lpm_full: u64,
    pub next_hop_full: u64,
    pub group_full: u64,
    /// Groups refused (or, for zebra objects, cut to 64 members).
    pub group_too_large: u64,
    /// FRR routes that arrived or became without a usable next hop.
    pub unresolvable: u64,
    /// zebra next-hop objects whose interface maps to no port.
    pub unusable_objects: u64,
    /// FRR route updates for tables other than 254, ignored.
    pub other_table: u64,
    /// `RouteUpdate::Ignored` seen.
    pub ignored: u64,
    /// FRR routes and objects removed by a resync sweep.
    pub swept: u64,
    /// Updates that found the LPM pool used up by earlier updates and
    /// went through after an immediate reclaim.
    pub inline_reclaims: u64,
    /// Withdrawals the LPM could not carry out even after a reclaim: the
    /// prefix still forwards to its old next hop, which is kept alive.
    pub withdraw_held: u64,
}

/// What [`Fib::maintain`] made reusable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Reclaimed {
    pub lpm4_nodes: usize,
    pub lpm6_nodes: usize,
    pub next_hops: usize,
    pub groups: usize,
    /// Grace periods the wait gave up on (nothing reused after it).
    pub grace_timeouts: usize,
}

/// Sizes of one LPM (a copy of [`LpmStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LpmInfo {
    pub prefixes: usize,
    pub nodes: usize,
    pub quarantined: usize,
    pub lookup_bytes: usize,
    pub control_bytes: usize,
}

impl From<LpmStats> for LpmInfo {
    fn from(s: LpmStats) -> LpmInfo {
        LpmInfo {
            prefixes: s.prefixes,
            nodes: s.nodes,
            quarantined: s.quarantined,
            lookup_bytes: s.lookup_bytes,
            control_bytes: s.control_bytes,
        }
    }
}

/// Routes of one source in one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SourceCount {
    pub source: Source,
    /// Prefixes with a slot from this source.
    pub routes: usize,
    /// Prefixes whose installed route is this source's.
    pub installed: usize,
}

/// One address family of [`FibSummary`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FamilySummary {
    /// Prefixes with at least one slot.
    pub prefixes: usize,
    /// Prefixes in the LPM.
    pub installed: usize,
    /// Slots with no usable next hop right now.
    pub unresolvable: usize,
    pub max_routes: usize,
    /// Non-empty sources, in precedence order (FRR by protocol number).
    pub sources: Vec<SourceCount>,
    pub lpm: LpmInfo,
}

/// `show route summary`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FibSummary {
    pub v4: FamilySummary,
    pub v6: FamilySummary,
    /// Next-hop ids in use (the blackhole included).
    pub next_hops: usize,
    pub next_hop_capacity: u32,
    pub groups: usize,
    pub group_capacity: u32,
    /// Next-hop ids and groups freed but not yet reusable.
    pub quarantined_next_hops: usize,
    pub quarantined_groups: usize,
    /// zebra next-hop objects known.
    pub frr_objects: usize,
    pub counters: FibCounters,
}

/// One route (one source's slot of a prefix), by value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteInfo {
    #[serde(serialize_with = "display")]
    pub prefix: Prefix,
    pub source: Source,
    /// This slot is the one in the LPM.
    pub installed: bool,
    pub blackhole: bool,
    /// No usable next hop (not installable).
    pub unresolvable: bool,
    /// The next hops as programmed; `weight` is the number of group slots.
    pub hops: Vec<Hop>,
    /// The zebra next-hop object the route references, if any.
    pub frr_object: Option<u32>,
    /// The LPM target id (next-hop id or `GROUP_BIT | group`).
    pub target: Option<u32>,
    /// The labels each hop pushes (same order as `hops`), for labelled
    /// routes (FTN, imported or static VPN routes); empty otherwise.
    pub labels: Vec<Vec<u32>>,
    /// A static VPN route: the remote PE and its VPN label.
    pub vpn: Option<VpnRoute>,
}

fn display<T: fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

// ---------------------------------------------------------------------------
// Internals.

/// What a slot asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Spec {
    /// From `set`: concrete hops.
    Hops(Vec<Hop>),
    /// zebra's inline list (ifindex still to map; kept for `refresh_ports`).
    Frr(Vec<frr::NextHop>),
    Drop,
    /// zebra next-hop object id.
    Obj(u32),
    /// zebra's inline list with labels per path (FTN; docs/mpls.md).
    Labelled(Vec<labelfeed::LabelPath>),
    /// A static VPN route (a VRF's, docs/vrf.md "Static VPN routes"):
    /// push `label`, then whatever the default VRF pushes toward `pe`.
    Vpn {
        pe: Ipv4Addr,
        label: u32,
    },
}

/// FIB references a slot holds itself (content-shared, refcounted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owned {
    None,
    Drop,
    Hop(u32),
    Group(u32),
    /// Label resources (`Pool::labelled[key]`) behind target id `target`.
    Labelled {
        key: u32,
        target: u32,
    },
    /// An imported VPN route's label resources, held in the **default
    /// VRF's** pool (`core`) under `key`; `target` is that pool's id.
    Core {
        key: u32,
        target: u32,
    },
}

impl Owned {
    fn id(self) -> Option<u32> {
        match self {
            Owned::None => None,
            Owned::Drop => Some(BLACKHOLE_ID),
            Owned::Hop(id) => Some(id),
            Owned::Group(g) => Some(GROUP_BIT | g),
            Owned::Labelled { target, .. } => Some(target),
            Owned::Core { target, .. } => Some(VIA_DEFAULT_BIT | target),
        }
    }
}

struct Slot {
    source: Source,
    spec: Spec,
    owned: Owned,
    /// Resync generation (FRR slots).
    gen: u32,
    /// Had a target id when last counted.
    usable: bool,
}

#[derive(Default)]
struct Entry {
    /// At most one per rank, sorted by rank.
    slots: Vec<Slot>,
    /// Target id in the LPM and the source it came from.
    installed: Option<(u32, Source)>,
}

/// A zebra next-hop object and its dedicated FIB entry.
struct Obj {
    /// `None`: being deleted.
    obj: Option<NextHopObject>,
    gen: u32,
    fib: ObjFib,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ObjFib {
    /// Unusable.
    None,
    Drop,
    /// Dedicated next-hop id.
    Hop {
        id: u32,
        weight: u64,
    },
    /// Dedicated group; `flat` is the weighted member list before expansion
    /// (what a parent group multiplies through).
    Group {
        index: u32,
        members: Vec<u32>,
        flat: Vec<(u32, u64)>,
    },
}

impl ObjFib {
    fn id(&self) -> Option<u32> {
        match self {
            ObjFib::None => None,
            ObjFib::Drop => Some(BLACKHOLE_ID),
            ObjFib::Hop { id, .. } => Some(*id),
            ObjFib::Group { index, .. } => Some(GROUP_BIT | index),
        }
    }

    /// What this object gives a group containing it.
    fn contrib(&self) -> Vec<(u32, u64)> {
        match self {
            ObjFib::Hop { id, weight } => vec![(*id, *weight)],
            ObjFib::Group { flat, .. } => flat.clone(),
            _ => Vec::new(),
        }
    }

    /// The dedicated table entry it owns: (is group, index).
    fn resource(&self) -> Option<(bool, u32)> {
        match self {
            ObjFib::Hop { id, .. } => Some((false, *id)),
            ObjFib::Group { index, .. } => Some((true, *index)),
            _ => None,
        }
    }
}

/// Ids of one table: fresh ones, a free list, and two quarantine
/// generations (as the LPM nodes).
struct IdAlloc {
    cap: u32,
    next: u32,
    free: Vec<u32>,
    quarantine: Vec<u32>,
    older: Vec<u32>,
    live: usize,
}

impl IdAlloc {
    fn new(first: u32, cap: u32) -> IdAlloc {
        IdAlloc {
            cap,
            next: first,
            free: Vec::new(),
            quarantine: Vec::new(),
            older: Vec::new(),
            live: 0,
        }
    }

    fn alloc(&mut self) -> Option<u32> {
        let id = match self.free.pop() {
            Some(id) => id,
            None if self.next < self.cap => {
                self.next += 1;
                self.next - 1
            }
            None => return None,
        };
        self.live += 1;
        Some(id)
    }

    /// Give back an id no reader ever saw.
    fn unalloc(&mut self, id: u32) {
        self.free.push(id);
        self.live = self.live.saturating_sub(1);
    }

    /// Free an id readers may still hold: reusable after two rotations.
    fn release(&mut self, id: u32) {
        self.quarantine.push(id);
        self.live = self.live.saturating_sub(1);
    }

    /// One grace period passed: returns the ids that became reusable.
    fn rotate(&mut self) -> Vec<u32> {
        let done = std::mem::take(&mut self.older);
        self.older = std::mem::take(&mut self.quarantine);
        self.free.extend_from_slice(&done);
        done
    }

    fn pending(&self) -> usize {
        self.quarantine.len() + self.older.len()
    }
}

/// Next hops and groups: the `NextHopTable` plus who uses what.
struct Pool {
    nht: Arc<NextHopTable>,
    hop_ids: IdAlloc,
    group_ids: IdAlloc,
    /// Content of every live next-hop id (shared and dedicated).
    hop_info: Vec<Option<NextHop>>,
    /// Content-shared next hops: content → (id, refs).
    shared_hops: HashMap<NextHop, (u32, u32)>,
    /// Members of every live group (sorted).
    group_info: Vec<Option<Vec<u32>>>,
    /// Content-shared groups: members → (index, refs).
    shared_groups: HashMap<Vec<u32>, (u32, u32)>,
    /// The label FIB (NHLFEs written here; ILM by `Fib`).
    lfib: Arc<Lfib>,
    nhlfe_ids: IdAlloc,
    /// Content-shared NHLFEs: (next-hop id, label stack) → (id, refs).
    /// Imported VPN routes push the same [transport, VPN] toward the same
    /// neighbour, 1,200 routes per VRF: one NHLFE each would use up the
    /// table at 131,072 routes (docs/vrf.md, "Scale").
    shared_nhlfes: HashMap<(u32, tables::mpls::LabelStack), (u32, u32)>,
    /// The key of every live shared NHLFE id.
    nhlfe_keys: HashMap<u32, (u32, tables::mpls::LabelStack)>,
    /// What each labelled target holds (see `mpls.rs`).
    labelled: HashMap<u32, mpls::LabelRes>,
    next_key: u32,
    /// `Owned::Core` keys released here, to give back to the default
    /// VRF's pool ([`Fib::flush_core`]).
    core_release: Vec<u32>,
    /// Bumped whenever a next hop is made, rewritten or freed (the
    /// managed neighbours follow it: [`Fib::gateways`]).
    hops_changed: u64,
}

impl Pool {
    fn info(&self, id: u32) -> Option<NextHop> {
        self.hop_info.get(id as usize).copied().flatten()
    }

    fn acquire_hop(&mut self, nh: NextHop) -> Result<u32, FibError> {
        if let Some(e) = self.shared_hops.get_mut(&nh) {
            e.1 += 1;
            return Ok(e.0);
        }
        let id = self.alloc_hop(nh)?;
        self.shared_hops.insert(nh, (id, 1));
        Ok(id)
    }

    fn release_hop(&mut self, id: u32) {
        let Some(nh) = self.info(id) else { return };
        let Some(e) = self.shared_hops.get_mut(&nh) else {
            return;
        };
        if e.0 != id {
            return;
        }
        e.1 = e.1.saturating_sub(1);
        if e.1 == 0 {
            self.shared_hops.remove(&nh);
            self.free_hop(id);
        }
    }

    fn alloc_hop(&mut self, nh: NextHop) -> Result<u32, FibError> {
        let id = self.hop_ids.alloc().ok_or(FibError::NextHopFull)?;
        if self.nht.set(id, nh).is_err() {
            self.hop_ids.unalloc(id);
            return Err(FibError::NextHopFull);
        }
        if let Some(s) = self.hop_info.get_mut(id as usize) {
            *s = Some(nh);
        }
        self.hops_changed += 1;
        Ok(id)
    }

    /// Rewrite a dedicated next hop in place.
    fn rewrite_hop(&mut self, id: u32, nh: NextHop) {
        if self.info(id) != Some(nh) && self.nht.set(id, nh).is_ok() {
            if let Some(s) = self.hop_info.get_mut(id as usize) {
                *s = Some(nh);
            }
            self.hops_changed += 1;
        }
    }

    fn free_hop(&mut self, id: u32) {
        if let Some(s) = self.hop_info.get_mut(id as usize) {
            *s = None;
        }
        self.hops_changed += 1;
        // The slot keeps its content until reused: in-flight readers still
        // forward the old way. `maintain` clears it.
        self.hop_ids.release(id);
    }

    fn alloc_group(&mut self, members: Vec<u32>) -> Result<u32, FibError> {
        let index = self.group_ids.alloc().ok_or(FibError::GroupFull)?;
        if self.nht.set_group(index, &Group { members }).is_err() {
            self.group_ids.unalloc(index);
            return Err(FibError::GroupTooLarge);
        }
        Ok(index)
    }

    fn free_group(&mut self, index: u32) {
        if let Some(s) = self.group_info.get_mut(index as usize) {
            *s = None;
        }
        self.group_ids.release(index);
    }

    /// Take references for a content-shared target: one hop, or a group of
    /// `hops` weighted. Takes nothing on error.
    fn acquire(&mut self, hops: &[(NextHop, u64)]) -> Result<Owned, FibError> {
        let mut merged: Vec<(NextHop, u64)> = Vec::with_capacity(hops.len());
        for &(nh, w) in hops {
            match merged.iter_mut().find(|m| m.0 == nh) {
                Some(m) => m.1 = m.1.saturating_add(w.max(1)),
                None => merged.push((nh, w.max(1))),
            }
        }
        match merged.len() {
            0 => return Ok(Owned::None),
            1 => return self.acquire_hop(merged[0].0).map(Owned::Hop),
            _ => {}
        }
        let weights: Vec<u64> = merged.iter().map(|m| m.1).collect();
        let counts = weights_to_counts(&weights)?;
        let mut ids = Vec::with_capacity(merged.len());
        for &(nh, _) in &merged {
            match self.acquire_hop(nh) {
                Ok(id) => ids.push(id),
                Err(e) => {
                    ids.iter().for_each(|&id| self.release_hop(id));
                    return Err(e);
                }
            }
        }
        let mut members = Vec::with_capacity(counts.iter().sum::<u32>() as usize);
        for (&id, &c) in ids.iter().zip(&counts) {
            members.extend(std::iter::repeat_n(id, c as usize));
        }
        members.sort_unstable();
        if let Some(g) = self.shared_groups.get_mut(&members) {
            // The group already holds one reference per member.
            g.1 += 1;
            let index = g.0;
            ids.iter().for_each(|&id| self.release_hop(id));
            return Ok(Owned::Group(index));
        }
        match self.alloc_group(members.clone()) {
            Ok(index) => {
                if let Some(s) = self.group_info.get_mut(index as usize) {
                    *s = Some(members.clone());
                }
                self.shared_groups.insert(members, (index, 1));
                Ok(Owned::Group(index))
            }
            Err(e) => {
                ids.iter().for_each(|&id| self.release_hop(id));
                Err(e)
            }
        }
    }

    fn release(&mut self, o: Owned) {
        match o {
            Owned::None | Owned::Drop => {}
            Owned::Labelled { key, .. } => self.release_labelled(key),
            // The LPM already moved away; the default VRF's pool
            // quarantines the ids when the key reaches it.
            Owned::Core { key, .. } => self.core_release.push(key),
            Owned::Hop(id) => self.release_hop(id),
            Owned::Group(index) => {
                let Some(Some(members)) = self.group_info.get(index as usize).cloned() else {
                    return;
                };
                let Some(g) = self.shared_groups.get_mut(&members) else {
                    return;
                };
                g.1 = g.1.saturating_sub(1);
                if g.1 == 0 {
                    self.shared_groups.remove(&members);
                    self.free_group(index);
                    let mut last = None;
                    for &id in &members {
                        if last != Some(id) {
                            self.release_hop(id);
                            last = Some(id);
                        }
                    }
                }
            }
        }
    }

    /// The next hops behind a target id, with group slot counts as weights.
    fn describe(&self, target: u32) -> (Vec<Hop>, bool) {
        if target == BLACKHOLE_ID {
            return (Vec::new(), true);
        }
        let hop = |id: u32, weight: u16| {
            self.info(self.hop_of(id)).map(|nh| Hop {
                port: nh.port,
                gateway: nh.gateway,
                weight,
            })
        };
        if target & GROUP_BIT == 0 {
            // A plain next hop, or an NHLFE (its primary next hop).
            return (hop(target, 1).into_iter().collect(), false);
        }
        let Some(Some(members)) = self.group_info.get((target & !GROUP_BIT) as usize) else {
            return (Vec::new(), false);
        };
        let mut out: Vec<Hop> = Vec::new();
        let mut i = 0;
        while i < members.len() {
            let id = members[i];
            let n = members[i..].iter().take_while(|&&m| m == id).count();
            out.extend(hop(id, n as u16));
            i += n;
        }
        (out, false)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Member counts for ECMP weights (0 counts as 1): reduced by their
/// greatest common divisor; if the total is over [`MAX_GROUP_MEMBERS`],
/// scaled to 64 slots in proportion (largest remainder), each kept ≥ 1.
/// More than 64 weights cannot keep every member: `GroupTooLarge`.
pub fn weights_to_counts(weights: &[u64]) -> Result<Vec<u32>, FibError> {
    let n = weights.len();
    if n > MAX_GROUP_MEMBERS {
        return Err(FibError::GroupTooLarge);
    }
    let mut w: Vec<u64> = weights.iter().map(|&x| x.max(1)).collect();
    let g = w.iter().fold(0, |g, &x| gcd(g, x)).max(1);
    w.iter_mut().for_each(|x| *x /= g);
    let total: u128 = w.iter().map(|&x| x as u128).sum();
    let cap = MAX_GROUP_MEMBERS as u128;
    if total <= cap {
        return Ok(w.iter().map(|&x| x as u32).collect());
    }
    let mut counts: Vec<u32> = w
        .iter()
        .map(|&x| ((x as u128 * cap / total) as u32).max(1))
        .collect();
    let mut sum: u32 = counts.iter().sum();
    // Raising small members to 1 may overshoot: take from the largest.
    while sum > MAX_GROUP_MEMBERS as u32 {
        let Some(i) = (0..n).filter(|&i| counts[i] > 1).max_by_key(|&i| counts[i]) else {
            break;
        };
        counts[i] -= 1;
        sum -= 1;
    }
    if sum < MAX_GROUP_MEMBERS as u32 {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(w[i] as u128 * cap % total));
        for &i in order.iter().take((MAX_GROUP_MEMBERS as u32 - sum) as usize) {
            counts[i] += 1;
        }
    }
    let g = counts.iter().fold(0, |g, &x| gcd(g, x as u64)).max(1) as u32;
    Ok(counts.iter().map(|&c| c / g).collect())
}

/// Per-family counts, kept incrementally (so `summary` scans nothing).
#[derive(Clone)]
struct Counts {
    prefixes: usize,
    installed: usize,
    unresolvable: usize,
    /// By source key: slots present, and installed winners.
    routes: Vec<usize>,
    winners: Vec<usize>,
}

impl Counts {
    fn new() -> Counts {
        Counts {
            prefixes: 0,
            installed: 0,
            unresolvable: 0,
            routes: vec![0; 258],
            winners: vec![0; 258],
        }
    }

    /// Add (or take away) what `e` contributes, with its stored flags.
    fn tally(&mut self, e: &Entry, add: bool) {
        fn step(x: &mut usize, add: bool) {
            *x = if add {
                x.saturating_add(1)
            } else {
                x.saturating_sub(1)
            };
        }
        step(&mut self.prefixes, add);
        for s in &e.slots {
            step(&mut self.routes[s.source.key()], add);
            if !s.usable {
                step(&mut self.unresolvable, add);
            }
        }
        if let Some((_, src)) = e.installed {
            step(&mut self.installed, add);
            step(&mut self.winners[src.key()], add);
        }
    }
}

struct Lpms {
    v4: Arc<Lpm4>,
    v6: Arc<Lpm6>,
}

impl Lpms {
    fn insert(&self, p: &Prefix, id: u32) -> Result<(), LpmError> {
        match p.addr {
            IpAddr::V4(a) => self.v4.insert(u32::from(a), p.len, id).map(|_| ()),
            IpAddr::V6(a) => self.v6.insert(u128::from(a), p.len, id).map(|_| ()),
        }
    }

    /// `Err(Full)`: the compressed IPv6 trie had no room to rewrite the
    /// path; the prefix is still installed.
    fn remove(&self, p: &Prefix) -> Result<(), LpmError> {
        match p.addr {
            IpAddr::V4(a) => {
                self.v4.remove(u32::from(a), p.len);
            }
            IpAddr::V6(a) => {
                self.v6.try_remove(u128::from(a), p.len)?;
            }
        }
        Ok(())
    }
}

/// Waits until every reader of the tables has passed a quiescent point;
/// false if it gave up (see [`Fib::maintain`]).
pub type QuiesceFn = Arc<dyn Fn() -> bool + Send + Sync>;

/// Make everything freed before the call reusable: two rounds, each
/// after a grace period. A wait that gives up stops it before anything
/// a reader might still hold is reused (`grace_timeouts`).
fn reclaim(lpms: &Lpms, pool: &mut Pool, wait_quiescent: &dyn Fn() -> bool) -> Reclaimed {
    let mut r = Reclaimed::default();
    for _ in 0..2 {
        if !wait_quiescent() {
            r.grace_timeouts += 1;
            break;
        }
        r.lpm4_nodes += lpms.v4.reclaim();
        r.lpm6_nodes += lpms.v6.reclaim();
        for id in pool.hop_ids.rotate() {
            pool.nht.clear(id);
            r.next_hops += 1;
        }
        for g in pool.group_ids.rotate() {
            pool.nht.clear_group(g);
            r.groups += 1;
        }
        for n in pool.nhlfe_ids.rotate() {
            pool.lfib.clear_nhlfe(n);
        }
    }
    r
}

/// [`install`], and when the LPM is out of room, reclaim what earlier
/// updates freed (after grace periods, if the FIB knows how to wait for
/// its readers) and try once more. A burst of withdrawals or re-pointed
/// routes between two maintenance rounds must not be lost: each one
/// rewrites a path of the IPv6 trie into fresh arrays.
fn install_or_reclaim(
    lpms: &Lpms,
    objs: &HashMap<u32, Obj>,
    pool: &mut Pool,
    quiesce: Option<&QuiesceFn>,
    counters: &mut FibCounters,
    p: &Prefix,
    e: &mut Entry,
) -> Result<(), LpmError> {
    match (install(lpms, objs, p, e), quiesce) {
        (Err(LpmError::Full), Some(q)) => {
            reclaim(lpms, pool, &**q);
            counters.inline_reclaims += 1;
            install(lpms, objs, p, e)
        }
        (r, _) => r,
    }
}

/// [`Lpms::remove`] with the same reclaim-and-retry.
fn remove_or_reclaim(
    lpms: &Lpms,
    pool: &mut Pool,
    quiesce: Option<&QuiesceFn>,
    counters: &mut FibCounters,
    p: &Prefix,
) -> Result<(), LpmError> {
    match (lpms.remove(p), quiesce) {
        (Err(LpmError::Full), Some(q)) => {
            reclaim(lpms, pool, &**q);
            counters.inline_reclaims += 1;
            lpms.remove(p)
        }
        (r, _) => r,
    }
}

fn fam(p: &Prefix) -> usize {
    usize::from(!p.is_ipv4())
}

fn slot_id(objs: &HashMap<u32, Obj>, s: &Slot) -> Option<u32> {
    match s.spec {
        Spec::Obj(z) => objs.get(&z).and_then(|o| o.fib.id()),
        _ => s.owned.id(),
    }
}

fn refresh_flags(objs: &HashMap<u32, Obj>, e: &mut Entry) {
    for s in &mut e.slots {
        s.usable = slot_id(objs, s).is_some();
    }
}

/// Make the LPM hold the best usable slot's target. On error the LPM is
/// unchanged (a refused insert changes nothing) and so is `e.installed`.
fn install(
    lpms: &Lpms,
    objs: &HashMap<u32, Obj>,
    p: &Prefix,
    e: &mut Entry,
) -> Result<(), LpmError> {
    let best = e
        .slots
        .iter()
        .find_map(|s| slot_id(objs, s).map(|id| (id, s.source)));
    match (best, e.installed) {
        (Some((id, _)), Some((cur, _))) if id == cur => {}
        (Some((id, _)), _) => lpms.insert(p, id)?,
        (None, Some(_)) => lpms.remove(p)?,
        (None, None) => {}
    }
    e.installed = best;
    Ok(())
}

const PREFIX_MIN: Prefix = Prefix {
    addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    len: 0,
};
const PREFIX_MAX: Prefix = Prefix {
    addr: IpAddr::V6(Ipv6Addr::new(
        0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff,
    )),
    len: u8::MAX,
};
const V6_START: Prefix = Prefix {
    addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    len: 0,
};

/// The FIB manager. Owns the tables the workers read (hand them out with
/// [`Fib::fib4`], [`Fib::fib6`], [`Fib::nexthops`]) and is their only
/// writer. Not thread-safe by itself: one control thread owns it (or a
/// `Mutex` around it, for `show`).
pub struct Fib {
    lpms: Lpms,
    pool: Pool,
    routes: BTreeMap<Prefix, Entry>,
    objs: HashMap<u32, Obj>,
    /// zebra object id → routes referencing it (present or not).
    obj_routes: BTreeSet<(u32, Prefix)>,
    /// zebra object id → group objects listing it.
    obj_parents: HashMap<u32, BTreeSet<u32>>,
    counts: [Counts; 2],
    counters: FibCounters,
    max_routes: [usize; 2],
    /// The FPM table id whose routes this FIB takes (others: counted
    /// `other_table`).
    table: u32,
    /// Resync generation, bumped on every zebra connection.
    gen: u32,
    sweep_pending: bool,
    /// Label entries from zebra (the ILM side of the LFIB).
    labels: mpls::LabelState,
    /// How to wait for the workers, so that an update refused for lack
    /// of LPM room can reclaim and retry at once ([`Fib::set_quiesce`]).
    quiesce: Option<QuiesceFn>,
    /// A VRF's link to the default VRF (L3VPN): its labelled routes are
    /// imported VPN routes resolved there ([`Fib::set_core`]).
    core: Option<CoreLink>,
    /// Static VPN routes by remote PE, and the transport they were last
    /// resolved with ([`Fib::refresh_vpn`]).
    vpn: vpn::VpnState,
    /// The other VRFs' twin interface indexes → ports, for the unlabelled
    /// routes bgpd leaks into this FIB's VRF (`import vrf`,
    /// [`Fib::set_leaked_ports`]).
    leaked_ports: HashMap<u32, u16>,
}

/// The default VRF as a VRF's FIB sees it.
struct CoreLink {
    fib: Arc<Mutex<Fib>>,
    /// The default namespace's interface indexes → ports.
    ports: HashMap<u32, u16>,
}

impl Default for Fib {
    fn default() -> Self {
        Fib::new()
    }
}

impl Fib {
    /// Empty tables with the default capacities ([`FibConfig::default`]).
    pub fn new() -> Fib {
        Fib::with_config(FibConfig::default())
    }

    /// Empty tables of the given capacities, clamped to what the tables
    /// can address (at least 2 next-hop ids: the blackhole takes id 0; at
    /// most 2^30 ids and groups, 2^31 − 1 LPM nodes). The pools are
    /// allocated zeroed up front and cost memory only as they are used.
    pub fn with_config(cfg: FibConfig) -> Fib {
        let hops = cfg.next_hops.clamp(2, GROUP_BIT);
        let groups = cfg.groups.min(GROUP_BIT);
        let max_nodes = (1u32 << 31) - 1;
        let backing = if cfg.huge_pages {
            Backing::HugeOnTouch
        } else {
            Backing::Small
        };
        let nht = Arc::new(NextHopTable::new(hops as usize, groups as usize));
        // Id 0 is within capacity (≥ 2), so this cannot fail.
        let _ = nht.set(
            BLACKHOLE_ID,
            NextHop {
                port: BLACKHOLE_PORT,
                gateway: None,
            },
        );
        let mut hop_info = vec![None; hops as usize];
        hop_info[BLACKHOLE_ID as usize] = Some(NextHop {
            port: BLACKHOLE_PORT,
            gateway: None,
        });
        Fib {
            lpms: Lpms {
                v4: Arc::new(Lpm4::with_backing(cfg.lpm4_nodes.min(max_nodes), backing)),
                v6: Arc::new(Lpm6::with_backing(cfg.lpm6_nodes.min(max_nodes), backing)),
            },
            pool: Pool {
                nht,
                hop_ids: IdAlloc::new(BLACKHOLE_ID + 1, hops),
                group_ids: IdAlloc::new(0, groups),
                hop_info,
                shared_hops: HashMap::new(),
                group_info: vec![None; groups as usize],
                shared_groups: HashMap::new(),
                lfib: Arc::new(Lfib::new(cfg.lfib)),
                nhlfe_ids: IdAlloc::new(0, cfg.lfib.nhlfes as u32),
                shared_nhlfes: HashMap::new(),
                nhlfe_keys: HashMap::new(),
                labelled: HashMap::new(),
                next_key: 0,
                core_release: Vec::new(),
                hops_changed: 0,
            },
            routes: BTreeMap::new(),
            objs: HashMap::new(),
            obj_routes: BTreeSet::new(),
            obj_parents: HashMap::new(),
            counts: [Counts::new(), Counts::new()],
            counters: FibCounters::default(),
            max_routes: [cfg.max_routes_v4, cfg.max_routes_v6],
            table: cfg.table,
            gen: 0,
            sweep_pending: false,
            labels: mpls::LabelState::default(),
            quiesce: None,
            core: None,
            vpn: vpn::VpnState::default(),
            leaked_ports: HashMap::new(),
        }
    }

    /// Tell the FIB how to wait until every reader of its tables has
    /// passed a quiescent point (the same contract as the argument of
    /// [`Fib::maintain`]). With it, an insert, re-point or withdrawal
    /// that finds the LPM pool exhausted by earlier updates reclaims and
    /// retries instead of failing (counted `inline_reclaims`). Without
    /// it such an update fails (counted `lpm_full`).
    pub fn set_quiesce(&mut self, wait: QuiesceFn) {
        self.quiesce = Some(wait);
    }

    /// The FPM table id this FIB takes routes from.
    pub fn table(&self) -> u32 {
        self.table
    }

    /// The IPv4 LPM, for `L3Tables::fib4`.
    pub fn fib4(&self) -> Arc<Lpm4> {
        self.lpms.v4.clone()
    }

    /// The IPv6 LPM, for `L3Tables::fib6`.
    pub fn fib6(&self) -> Arc<Lpm6> {
        self.lpms.v6.clone()
    }

    /// Next hops and groups, for `L3Tables::nexthops`.
    pub fn nexthops(&self) -> Arc<NextHopTable> {
        self.pool.nht.clone()
    }

    /// Changes whenever a next hop is made, rewritten or freed: a caller
    /// that saw the same value last time has the same [`gateways`](Self::gateways).
    pub fn next_hop_generation(&self) -> u64 {
        self.pool.hops_changed
    }

    /// Every (port, gateway) a live next hop of this FIB forwards to,
    /// into `out` (cleared first; no particular order, no repeats): what
    /// Lanyard keeps resolved as managed neighbours. Blackholes and
    /// next hops without a gateway (connected routes) are left out; so
    /// are a VRF's imported VPN routes, whose next hops live in the
    /// default VRF's FIB. O(next-hop ids ever used).
    pub fn gateways(&self, out: &mut Vec<(u16, IpAddr)>) {
        out.clear();
        let used = (self.pool.hop_ids.next as usize).min(self.pool.hop_info.len());
        for nh in self.pool.hop_info[..used].iter().flatten() {
            if let (Some(gw), true) = (nh.gateway, nh.port != BLACKHOLE_PORT) {
                out.push((nh.port, gw));
            }
        }
        // Content-shared hops are distinct, but a zebra object's dedicated
        // hop may repeat one.
        out.sort_unstable();
        out.dedup();
    }

    // ---- configured routes ------------------------------------------------

    /// Install or replace `source`'s route for `prefix` via `hops` (several:
    /// ECMP, weighted). Host bits of the prefix are ignored.
    pub fn set(&mut self, prefix: Prefix, source: Source, hops: Vec<Hop>) -> Result<(), FibError> {
        self.set_route(prefix, source, RouteKind::Via(hops))
    }

    /// Install or replace `source`'s route for `prefix` as a drop.
    pub fn set_blackhole(&mut self, prefix: Prefix, source: Source) -> Result<(), FibError> {
        self.set_route(prefix, source, RouteKind::Blackhole)
    }

    /// Install or replace `source`'s route for `prefix`. A hop without a
    /// gateway is connected (the destination is the neighbour). On error
    /// nothing changed.
    pub fn set_route(
        &mut self,
        prefix: Prefix,
        source: Source,
        kind: RouteKind,
    ) -> Result<(), FibError> {
        let spec = match kind {
            RouteKind::Blackhole => Spec::Drop,
            RouteKind::Via(hops) => {
                if hops.is_empty() {
                    return Err(self.note(FibError::NoHops));
                }
                if hops.iter().any(|h| h.port == BLACKHOLE_PORT) {
                    return Err(self.note(FibError::BadPort));
                }
                Spec::Hops(hops)
            }
        };
        self.set_slot(prefix, source, spec, &|_| None, false)
    }

    /// Remove `source`'s route for `prefix` (any FRR protocol for
    /// `Source::Frr`); the next best source's route, if any, takes over.
    /// Returns whether there was one.
    pub fn remove(&mut self, prefix: Prefix, source: Source) -> bool {
        let r = match Prefix::new(prefix.addr, prefix.len) {
            Some(p) => self.remove_slot(p, source.rank()),
            None => false,
        };
        // A VPN route's NHLFE goes back to the default VRF's pool.
        self.flush_core();
        r
    }

    // ---- FRR ----------------------------------------------------------------

    /// Make this (a VRF's) FIB an L3VPN PE's: its labelled routes from
    /// zebra are imported VPN routes whose paths (gateway, interface,
    /// [transport, VPN] stack) belong to the default VRF. They resolve in
    /// `core`'s pool (`ports`: the default namespace's interface indexes)
    /// and are installed as `VIA_DEFAULT_BIT | target` (docs/vrf.md).
    /// Lock order: this FIB, then `core`; never the reverse.
    pub fn set_core(&mut self, core: Arc<Mutex<Fib>>, ports: HashMap<u32, u16>) {
        self.core = Some(CoreLink { fib: core, ports });
    }

    /// The interfaces of the **other** VRFs (their twins' indexes → ports)
    /// a route leaked into this FIB's VRF may leave by: bgpd's `import
    /// vrf` keeps the next hop in the source VRF, where zebra resolves it,
    /// so the route's interface is one of the source VRF's twins
    /// (docs/vrf.md, "Route leaking"). They resolve the next hops of
    /// **unlabelled FRR routes only**, after the FPM map: never label
    /// entries (the LFIB is the default namespace's, whose ports alone a
    /// label path names), next-hop objects, nor a VRF's imported VPN
    /// routes (resolved with the core's map, [`Fib::set_core`]). The
    /// caller re-maps the routes with [`Fib::refresh_ports`] when it
    /// changes this at run time.
    pub fn set_leaked_ports(&mut self, ports: HashMap<u32, u16>) {
        self.leaked_ports = ports;
    }

    /// Give what withdrawn or replaced VPN routes held back to the
    /// default VRF's pool (quarantined there like its own ids).
    fn flush_core(&mut self) {
        if self.pool.core_release.is_empty() {
            return;
        }
        let keys = std::mem::take(&mut self.pool.core_release);
        match &self.core {
            Some(c) => {
                let mut core = c.fib.lock().unwrap_or_else(|e| e.into_inner());
                keys.into_iter().for_each(|k| core.pool.release_labelled(k));
            }
            None => self.pool.core_release = keys,
        }
    }

    /// Apply one event from the FPM server. `ifindex_to_port` maps zebra's
    /// interface indices to Lanyard ports (`None`: not a port of ours).
    pub fn apply_frr(&mut self, ev: &FpmEvent, ifindex_to_port: &dyn Fn(u32) -> Option<u16>) {
        self.apply_frr_event(ev, ifindex_to_port);
        self.flush_core();
    }

    fn apply_frr_event(&mut self, ev: &FpmEvent, ifindex_to_port: &dyn Fn(u32) -> Option<u16>) {
        match ev {
            FpmEvent::Connected { .. } => self.frr_connected(),
            FpmEvent::Updates(us) => {
                for (i, u) in us.iter().enumerate() {
                    // zebra without route-replace (FRR < 9) changes a route
                    // as a delete and an add in one frame: apply the add as
                    // a replace, so the prefix never leaves the LPM and no
                    // packet in between is dropped as unroutable.
                    if let (
                        RouteUpdate::Del { prefix, table, .. },
                        Some(RouteUpdate::Add {
                            prefix: p2,
                            table: t2,
                            ..
                        }),
                    ) = (u, us.get(i + 1))
                    {
                        if prefix == p2 && table == t2 {
                            continue;
                        }
                    }
                    if let (
                        RouteUpdate::Del { prefix, table, .. },
                        Some(RouteUpdate::Label(labelfeed::LabelMsg::RouteAdd(r))),
                    ) = (u, us.get(i + 1))
                    {
                        if Prefix::new(r.prefix, r.prefix_len) == Some(*prefix) && r.table == *table
                        {
                            continue;
                        }
                    }
                    // Errors are counted; the stream goes on.
                    let _ = self.apply_one(u, ifindex_to_port);
                }
            }
            FpmEvent::Settled => {
                self.frr_settled(ifindex_to_port);
            }
            // Keep forwarding on what we have; the replay after the
            // reconnect refreshes it.
            FpmEvent::Disconnected { .. } => {}
        }
    }

    /// Apply one decoded update.
    pub fn apply_update(
        &mut self,
        u: &RouteUpdate,
        ifindex_to_port: &dyn Fn(u32) -> Option<u16>,
    ) -> Result<(), FibError> {
        let r = self.apply_one(u, ifindex_to_port);
        self.flush_core();
        r
    }

    fn apply_one(
        &mut self,
        u: &RouteUpdate,
        ifindex_to_port: &dyn Fn(u32) -> Option<u16>,
    ) -> Result<(), FibError> {
        match u {
            RouteUpdate::Add {
                prefix,
                table,
                protocol,
                nexthops,
                ..
            } => {
                if *table != self.table {
                    self.counters.other_table += 1;
                    return Ok(());
                }
                let spec = match nexthops {
                    NextHops::List(l) => Spec::Frr(l.clone()),
                    NextHops::Id(z) => Spec::Obj(*z),
                    NextHops::Blackhole | NextHops::Unreachable | NextHops::Prohibit => Spec::Drop,
                    NextHops::None => Spec::Frr(Vec::new()),
                };
                let source = Source::Frr {
                    protocol: *protocol,
                };
                self.set_slot(*prefix, source, spec, ifindex_to_port, false)
            }
            RouteUpdate::Del { prefix, table, .. } => {
                if *table != self.table {
                    self.counters.other_table += 1;
                } else {
                    self.remove(*prefix, Source::Frr { protocol: 0 });
                }
                Ok(())
            }
            RouteUpdate::NextHopAdd { id, nexthop, .. } => {
                self.obj_set(*id, Some(nexthop.clone()), ifindex_to_port);
                Ok(())
            }
            RouteUpdate::NextHopDel { id } => {
                self.obj_set(*id, None, ifindex_to_port);
                Ok(())
            }
            RouteUpdate::Ignored { .. } => {
                self.counters.ignored += 1;
                Ok(())
            }
            RouteUpdate::Label(m) => self.apply_label(m, ifindex_to_port),
        }
    }

    /// zebra (re)connected and will replay everything: what it does not
    /// replay before [`Fib::frr_settled`] goes then.
    pub fn frr_connected(&mut self) {
        self.gen = self.gen.wrapping_add(1);
        self.sweep_pending = true;
    }

    /// The replay is over: remove FRR routes and objects it did not
    /// refresh. Returns how many went. Does nothing unless a connection
    /// came since the last sweep.
    pub fn frr_settled(&mut self, ifindex_to_port: &dyn Fn(u32) -> Option<u16>) -> usize {
        if !self.sweep_pending {
            return 0;
        }
        self.sweep_pending = false;
        let gen = self.gen;
        let stale: Vec<Prefix> = self
            .routes
            .iter()
            .filter(|(_, e)| e.slots.iter().any(|s| s.source.rank() == 2 && s.gen != gen))
            .map(|(p, _)| *p)
            .collect();
        for p in &stale {
            self.remove_slot(*p, 2);
        }
        let mut objs: Vec<u32> = self
            .objs
            .iter()
            .filter(|(_, o)| o.gen != gen)
            .map(|(z, _)| *z)
            .collect();
        objs.sort_unstable();
        for z in &objs {
            self.obj_set(*z, None, ifindex_to_port);
        }
        let n = stale.len() + objs.len() + self.sweep_labels();
        self.counters.swept += n as u64;
        n
    }

    /// Re-map every FRR next hop after ports came or went (their ifindex
    /// mapping changed). Walks every zebra object and every FRR route with
    /// an inline list; objects still update their entries in place.
    pub fn refresh_ports(&mut self, ifindex_to_port: &dyn Fn(u32) -> Option<u16>) {
        // Singles first, so groups see their members' new state.
        let mut ids: Vec<(bool, u32)> = self
            .objs
            .iter()
            .map(|(z, o)| (matches!(o.obj, Some(NextHopObject::Group(_))), *z))
            .collect();
        ids.sort_unstable();
        self.propagate(ids.into_iter().map(|x| x.1).collect(), ifindex_to_port);
        let inline: Vec<(Prefix, Source, Spec)> = self
            .routes
            .iter()
            .filter_map(|(p, e)| {
                let s = e
                    .slots
                    .iter()
                    .find(|s| matches!(s.spec, Spec::Frr(_) | Spec::Labelled(_)))?;
                Some((*p, s.source, s.spec.clone()))
            })
            .collect();
        for (p, source, spec) in inline {
            let gen = self.gen_of(&p);
            let _ = self.set_slot(p, source, spec, ifindex_to_port, true);
            // A refresh is not a replay: keep the slot's generation.
            if let (Some(g), Some(e)) = (gen, self.routes.get_mut(&p)) {
                if let Some(s) = e.slots.iter_mut().find(|s| s.source.rank() == 2) {
                    s.gen = g;
                }
            }
        }
        self.refresh_labels(ifindex_to_port);
        self.flush_core();
    }

    /// Re-map the unlabelled FRR routes with a next hop through one of
    /// `ifindexes` after [`Fib::set_leaked_ports`] changed those (a VRF
    /// added, deleted or its interfaces moved): the only routes the
    /// leaked ports resolve. Unlike [`Fib::refresh_ports`] it leaves every
    /// other route alone, so a big default table is not re-programmed
    /// for each VRF change. Returns how many routes were re-mapped.
    pub fn refresh_leaked(
        &mut self,
        ifindexes: &HashSet<u32>,
        ifindex_to_port: &dyn Fn(u32) -> Option<u16>,
    ) -> usize {
        if ifindexes.is_empty() {
            return 0;
        }
        let touched: Vec<(Prefix, Source, Spec)> = self
            .routes
            .iter()
            .filter_map(|(p, e)| {
                let s = e.slots.iter().find(|s| match &s.spec {
                    Spec::Frr(l) => l.iter().any(|h| ifindexes.contains(&h.ifindex)),
                    _ => false,
                })?;
                Some((*p, s.source, s.spec.clone()))
            })
            .collect();
        let n = touched.len();
        for (p, source, spec) in touched {
            let gen = self.gen_of(&p);
            let _ = self.set_slot(p, source, spec, ifindex_to_port, true);
            // A refresh is not a replay: keep the slot's generation.
            if let (Some(g), Some(e)) = (gen, self.routes.get_mut(&p)) {
                if let Some(s) = e.slots.iter_mut().find(|s| s.source.rank() == 2) {
                    s.gen = g;
                }
            }
        }
        self.flush_core();
        n
    }

    fn gen_of(&self, p: &Prefix) -> Option<u32> {
        let e = self.routes.get(p)?;
        e.slots.iter().find(|s| s.source.rank() == 2).map(|s| s.gen)
    }

    // ---- maintenance ----------------------------------------------------------

    /// Whether anything waits for [`Fib::maintain`]: LPM nodes, next-hop
    /// ids or groups freed and quarantined.
    pub fn needs_maintenance(&self) -> bool {
        self.lpms.v4.stats().quarantined > 0
            || self.lpms.v6.stats().quarantined > 0
            || self.pool.hop_ids.pending() > 0
            || self.pool.group_ids.pending() > 0
            || self.pool.nhlfe_ids.pending() > 0
    }

    /// Make freed LPM nodes, next-hop ids and groups reusable.
    /// `wait_quiescent` must return true only once every worker has passed a
    /// quiescent point (finished the batch it was processing when called),
    /// e.g. by waiting for each worker's batch counter to move or the
    /// worker to be idle. It is called before each of the two reclaim
    /// rounds, so two reclaims — in this call or across calls — are always
    /// separated by a grace period, and everything freed before the call is
    /// reusable after it. When it returns false (it gave up waiting), the
    /// rest of the reclaim is left for the next call.
    ///
    /// The daemon calls it from the thread that owns the `Fib`, about once
    /// a second when [`Fib::needs_maintenance`] (it returns at once
    /// otherwise), and before giving up on an insert refused as full.
    pub fn maintain(&mut self, wait_quiescent: &dyn Fn() -> bool) -> Reclaimed {
        if !self.needs_maintenance() {
            return Reclaimed::default();
        }
        reclaim(&self.lpms, &mut self.pool, wait_quiescent)
    }

    // ---- queries --------------------------------------------------------------

    pub fn counters(&self) -> FibCounters {
        self.counters
    }

    /// Route and label updates refused for lack of room or bad input
    /// (route limit, LPM, next hops, groups, NHLFEs, bad labels): `show
    /// vrf` shows it per VRF, where such refusals were otherwise silent.
    pub fn refused(&self) -> u64 {
        let c = &self.counters;
        let l = &self.labels.counters;
        c.bad_input
            + c.route_limit
            + c.lpm_full
            + c.next_hop_full
            + c.group_full
            + c.group_too_large
            + l.nhlfe_full
            + l.bad_label
    }

    pub fn summary(&self) -> FibSummary {
        let fam_summary = |f: usize, lpm: LpmStats| {
            let c = &self.counts[f];
            let sources = (0..c.routes.len())
                .filter(|&k| c.routes[k] > 0 || c.winners[k] > 0)
                .map(|k| SourceCount {
                    source: Source::from_key(k),
                    routes: c.routes[k],
                    installed: c.winners[k],
                })
                .collect();
            FamilySummary {
                prefixes: c.prefixes,
                installed: c.installed,
                unresolvable: c.unresolvable,
                max_routes: self.max_routes[f],
                sources,
                lpm: lpm.into(),
            }
        };
        FibSummary {
            v4: fam_summary(0, self.lpms.v4.stats()),
            v6: fam_summary(1, self.lpms.v6.stats()),
            next_hops: self.pool.hop_ids.live + 1,
            next_hop_capacity: self.pool.hop_ids.cap,
            groups: self.pool.group_ids.live,
            group_capacity: self.pool.group_ids.cap,
            quarantined_next_hops: self.pool.hop_ids.pending(),
            quarantined_groups: self.pool.group_ids.pending(),
            frr_objects: self.objs.len(),
            counters: self.counters,
        }
    }

    /// Every source's route for exactly `prefix`, best first.
    pub fn route(&self, prefix: &Prefix) -> Vec<RouteInfo> {
        let Some(p) = Prefix::new(prefix.addr, prefix.len) else {
            return Vec::new();
        };
        match self.routes.get(&p) {
            Some(e) => e.slots.iter().map(|s| self.info(&p, e, s)).collect(),
            None => Vec::new(),
        }
    }

    /// The installed route the workers use for `addr` (longest match).
    pub fn lookup(&self, addr: IpAddr) -> Option<RouteInfo> {
        let (hit, max) = match addr {
            IpAddr::V4(a) => (self.lpms.v4.lookup(u32::from(a)), 32),
            IpAddr::V6(a) => (self.lpms.v6.lookup(u128::from(a)), 128),
        };
        hit?;
        // The LPM holds ids only: find the prefix in the route map.
        for len in (0..=max).rev() {
            let p = Prefix::new(addr, len)?;
            if let Some(e) = self.routes.get(&p) {
                if let Some((_, src)) = e.installed {
                    let s = e.slots.iter().find(|s| s.source == src)?;
                    return Some(self.info(&p, e, s));
                }
            }
        }
        None
    }

    /// Every route of a family (all sources), sorted by prefix then
    /// precedence.
    pub fn routes(&self, family: Family) -> Vec<RouteInfo> {
        let mut out = Vec::new();
        let mut push = |(p, e): (&Prefix, &Entry)| {
            out.extend(e.slots.iter().map(|s| self.info(p, e, s)));
        };
        match family {
            Family::V4 => self.routes.range(..V6_START).for_each(&mut push),
            Family::V6 => self.routes.range(V6_START..).for_each(&mut push),
        }
        out
    }

    fn info(&self, p: &Prefix, e: &Entry, s: &Slot) -> RouteInfo {
        let target = slot_id(&self.objs, s);
        let labelled = |pool: &Pool, t: u32| {
            if t & NHLFE_BIT == 0 && t & GROUP_BIT == 0 {
                return Vec::new();
            }
            let l: Vec<Vec<u32>> = pool
                .label_hops(t)
                .into_iter()
                .map(|h| h.out_labels)
                .collect();
            if l.iter().all(Vec::is_empty) {
                Vec::new()
            } else {
                l
            }
        };
        let (hops, blackhole, labels) = match (target, &self.core) {
            (Some(t), Some(c)) if t & VIA_DEFAULT_BIT != 0 => {
                let core = c.fib.lock().unwrap_or_else(|e| e.into_inner());
                let t = t & !VIA_DEFAULT_BIT;
                let (h, b) = core.pool.describe(t);
                (h, b, labelled(&core.pool, t))
            }
            (Some(t), _) => {
                let (h, b) = self.pool.describe(t);
                (h, b, labelled(&self.pool, t))
            }
            (None, _) => (Vec::new(), false, Vec::new()),
        };
        RouteInfo {
            prefix: *p,
            source: s.source,
            installed: e.installed.is_some_and(|(_, src)| src == s.source),
            blackhole,
            unresolvable: target.is_none(),
            hops,
            frr_object: match s.spec {
                Spec::Obj(z) => Some(z),
                _ => None,
            },
            target,
            labels,
            vpn: match s.spec {
                Spec::Vpn { pe, label } => Some(VpnRoute {
                    remote_pe: pe,
                    label,
                }),
                _ => None,
            },
        }
    }

    // ---- route slots ------------------------------------------------------------

    fn note(&mut self, e: FibError) -> FibError {
        let c = &mut self.counters;
        match e {
            FibError::BadPrefix | FibError::NoHops | FibError::BadPort => c.bad_input += 1,
            FibError::RouteLimit => c.route_limit += 1,
            FibError::LpmFull => c.lpm_full += 1,
            FibError::NextHopFull => c.next_hop_full += 1,
            FibError::GroupFull => c.group_full += 1,
            FibError::GroupTooLarge => c.group_too_large += 1,
            FibError::NhlfeFull => self.labels.counters.nhlfe_full += 1,
            FibError::BadLabel => self.labels.counters.bad_label += 1,
        }
        e
    }

    fn acquire_spec(
        &mut self,
        spec: &Spec,
        map: &dyn Fn(u32) -> Option<u16>,
    ) -> Result<Owned, FibError> {
        match spec {
            Spec::Drop => Ok(Owned::Drop),
            Spec::Obj(_) => Ok(Owned::None),
            Spec::Hops(hs) => {
                let l: Vec<(NextHop, u64)> = hs
                    .iter()
                    .map(|h| {
                        let nh = NextHop {
                            port: h.port,
                            gateway: h.gateway,
                        };
                        (nh, h.weight as u64)
                    })
                    .collect();
                self.pool.acquire(&l)
            }
            Spec::Labelled(paths) => match &self.core {
                Some(c) => {
                    // A labelled route in a VRF's table is an imported
                    // VPN route: zebra resolved the BGP next hop in the
                    // default VRF, so gateway, interface and the stack
                    // ([transport, VPN] or [VPN]) are the core's.
                    let ports = &c.ports;
                    let mut core = c.fib.lock().unwrap_or_else(|e| e.into_inner());
                    match core
                        .pool
                        .acquire_labelled(paths, &|i| ports.get(&i).copied())?
                    {
                        Owned::Labelled { key, target } => Ok(Owned::Core { key, target }),
                        o => Ok(o),
                    }
                }
                None => self.pool.acquire_labelled(paths, map),
            },
            Spec::Vpn { pe, label } => self.acquire_vpn(*pe, *label),
            Spec::Frr(list) => {
                // An interface of another VRF: a leaked route's.
                let leaked = |i: u32| self.leaked_ports.get(&i).copied();
                let l: Vec<(NextHop, u64)> = list
                    .iter()
                    .filter_map(|nh| {
                        let port =
                            map_port(map, nh.ifindex).or_else(|| map_port(&leaked, nh.ifindex))?;
                        let hop = NextHop {
                            port,
                            gateway: nh.gateway,
                        };
                        Some((hop, nh.weight as u64))
                    })
                    .collect();
                self.pool.acquire(&l)
            }
        }
    }

    /// Put a slot in place and install the winner; on error everything is
    /// as before. `force`: re-resolve even if the request is unchanged.
    fn set_slot(
        &mut self,
        prefix: Prefix,
        source: Source,
        spec: Spec,
        map: &dyn Fn(u32) -> Option<u16>,
        force: bool,
    ) -> Result<(), FibError> {
        let Some(p) = Prefix::new(prefix.addr, prefix.len) else {
            return Err(self.note(FibError::BadPrefix));
        };
        let f = fam(&p);
        let rank = source.rank();
        match self.routes.get_mut(&p) {
            Some(e) => {
                if let Some(s) = e.slots.iter_mut().find(|s| s.source.rank() == rank) {
                    if !force && s.source == source && s.spec == spec {
                        // A replay of what we have: only refresh it.
                        s.gen = self.gen;
                        return Ok(());
                    }
                }
            }
            None if self.counts[f].prefixes >= self.max_routes[f] => {
                return Err(self.note(FibError::RouteLimit));
            }
            None => {}
        }
        let owned = self.acquire_spec(&spec, map).map_err(|e| self.note(e))?;
        let obj = match spec {
            Spec::Obj(z) => Some(z),
            _ => None,
        };
        let vpn_pe = match spec {
            Spec::Vpn { pe, .. } => Some(pe),
            _ => None,
        };
        let slot = Slot {
            source,
            spec,
            owned,
            gen: self.gen,
            usable: false,
        };
        let e = self.routes.entry(p).or_default();
        if !e.slots.is_empty() {
            self.counts[f].tally(e, false);
        }
        let pos = e.slots.iter().position(|s| s.source.rank() >= rank);
        let old = match pos {
            Some(i) if e.slots[i].source.rank() == rank => {
                Some(std::mem::replace(&mut e.slots[i], slot))
            }
            Some(i) => {
                e.slots.insert(i, slot);
                None
            }
            None => {
                e.slots.push(slot);
                None
            }
        };
        let i = pos.unwrap_or(e.slots.len() - 1);
        match install_or_reclaim(
            &self.lpms,
            &self.objs,
            &mut self.pool,
            self.quiesce.as_ref(),
            &mut self.counters,
            &p,
            e,
        ) {
            Ok(()) => {
                refresh_flags(&self.objs, e);
                self.counts[f].tally(e, true);
                if rank == 2 && !e.slots[i].usable {
                    self.counters.unresolvable += 1;
                }
                if let Some(Spec::Obj(z)) = old.as_ref().map(|o| &o.spec) {
                    self.obj_routes.remove(&(*z, p));
                }
                if let Some(z) = obj {
                    self.obj_routes.insert((z, p));
                }
                if let Some(Spec::Vpn { pe, .. }) = old.as_ref().map(|o| &o.spec) {
                    self.vpn.forget(*pe, p);
                }
                if let Some(pe) = vpn_pe {
                    self.vpn.note(pe, p);
                }
                if let Some(o) = old {
                    // After the LPM moved away from it.
                    self.pool.release(o.owned);
                }
                Ok(())
            }
            Err(err) => {
                let new = match old {
                    Some(o) => std::mem::replace(&mut e.slots[i], o),
                    None => e.slots.remove(i),
                };
                if e.slots.is_empty() {
                    self.routes.remove(&p);
                } else {
                    refresh_flags(&self.objs, e);
                    self.counts[f].tally(e, true);
                }
                self.pool.release(new.owned);
                Err(self.note(match err {
                    LpmError::Full => FibError::LpmFull,
                    LpmError::BadLength | LpmError::BadNextHop => FibError::BadPrefix,
                }))
            }
        }
    }

    fn remove_slot(&mut self, p: Prefix, rank: u8) -> bool {
        let f = fam(&p);
        let Some(e) = self.routes.get_mut(&p) else {
            return false;
        };
        let Some(i) = e.slots.iter().position(|s| s.source.rank() == rank) else {
            return false;
        };
        self.counts[f].tally(e, false);
        let old = e.slots.remove(i);
        let q = self.quiesce.as_ref();
        let mut held = false;
        if install_or_reclaim(
            &self.lpms,
            &self.objs,
            &mut self.pool,
            q,
            &mut self.counters,
            &p,
            e,
        )
        .is_err()
        {
            // The fallback could not be installed: leave the prefix out.
            held =
                remove_or_reclaim(&self.lpms, &mut self.pool, q, &mut self.counters, &p).is_err();
            e.installed = None;
            self.counters.lpm_full += 1;
        }
        if e.slots.is_empty() {
            self.routes.remove(&p);
        } else {
            refresh_flags(&self.objs, e);
            self.counts[f].tally(e, true);
        }
        if let Spec::Obj(z) = old.spec {
            self.obj_routes.remove(&(z, p));
        }
        if let Spec::Vpn { pe, .. } = old.spec {
            self.vpn.forget(pe, p);
        }
        if held {
            // The LPM still points at the old target: never reuse its id.
            self.counters.withdraw_held += 1;
        } else {
            self.pool.release(old.owned);
        }
        true
    }

    /// Re-evaluate a prefix after objects it uses changed.
    fn reinstall(&mut self, p: &Prefix) {
        let f = fam(p);
        let Some(e) = self.routes.get_mut(p) else {
            return;
        };
        self.counts[f].tally(e, false);
        let was: Vec<bool> = e.slots.iter().map(|s| s.usable).collect();
        let q = self.quiesce.as_ref();
        if install_or_reclaim(
            &self.lpms,
            &self.objs,
            &mut self.pool,
            q,
            &mut self.counters,
            p,
            e,
        )
        .is_err()
        {
            if remove_or_reclaim(&self.lpms, &mut self.pool, q, &mut self.counters, p).is_err() {
                self.counters.withdraw_held += 1;
            }
            e.installed = None;
            self.counters.lpm_full += 1;
        }
        refresh_flags(&self.objs, e);
        self.counts[f].tally(e, true);
        for (s, was) in e.slots.iter().zip(was) {
            if was && !s.usable && s.source.rank() == 2 {
                self.counters.unresolvable += 1;
            }
        }
    }

    // ---- zebra next-hop objects -------------------------------------------------

    /// Create, change (`Some`) or delete (`None`) object `z`.
    fn obj_set(&mut self, z: u32, obj: Option<NextHopObject>, map: &dyn Fn(u32) -> Option<u16>) {
        let gen = self.gen;
        let old = match self.objs.get_mut(&z) {
            Some(o) if o.obj == obj => {
                o.gen = gen;
                return;
            }
            Some(o) => {
                o.gen = gen;
                std::mem::replace(&mut o.obj, obj.clone())
            }
            None if obj.is_none() => return,
            None => {
                self.objs.insert(
                    z,
                    Obj {
                        obj: obj.clone(),
                        gen,
                        fib: ObjFib::None,
                    },
                );
                None
            }
        };
        self.link_parents(z, &old, false);
        self.link_parents(z, &obj, true);
        self.propagate(vec![z], map);
        if obj.is_none() {
            self.objs.remove(&z);
        }
    }

    fn link_parents(&mut self, z: u32, obj: &Option<NextHopObject>, add: bool) {
        let Some(NextHopObject::Group(members)) = obj else {
            return;
        };
        for &(m, _) in members {
            if add {
                self.obj_parents.entry(m).or_default().insert(z);
            } else if let Some(s) = self.obj_parents.get_mut(&m) {
                s.remove(&z);
                if s.is_empty() {
                    self.obj_parents.remove(&m);
                }
            }
        }
    }

    /// Recompute objects `start` and, transitively, the groups containing
    /// them; then re-evaluate the routes whose target id changed; then free
    /// what is no longer used (after nothing points at it).
    fn propagate(&mut self, start: Vec<u32>, map: &dyn Fn(u32) -> Option<u16>) {
        let mut queue: VecDeque<u32> = start.into();
        let mut queued: HashSet<u32> = queue.iter().copied().collect();
        // Bounds the work on cyclic groups (which zebra never sends).
        let mut visits: HashMap<u32, u8> = HashMap::new();
        let mut affected: BTreeSet<Prefix> = BTreeSet::new();
        let mut to_free: Vec<(bool, u32)> = Vec::new();
        while let Some(x) = queue.pop_front() {
            queued.remove(&x);
            let v = visits.entry(x).or_insert(0);
            if *v >= 8 {
                continue;
            }
            *v += 1;
            let Some(o) = self.objs.get(&x) else { continue };
            let old = o.fib.clone();
            let new = self.compute(x, &old, map);
            if new.contrib() != old.contrib() {
                for &parent in self.obj_parents.get(&x).into_iter().flatten() {
                    if queued.insert(parent) {
                        queue.push_back(parent);
                    }
                }
            }
            if new.id() != old.id() {
                affected.extend(
                    self.obj_routes
                        .range((x, PREFIX_MIN)..=(x, PREFIX_MAX))
                        .map(|(_, p)| *p),
                );
            }
            if let Some(r) = old.resource() {
                if new.resource() != Some(r) {
                    to_free.push(r);
                }
            }
            if let Some(o) = self.objs.get_mut(&x) {
                o.fib = new;
            }
        }
        for p in &affected {
            self.reinstall(p);
        }
        for (group, id) in to_free {
            if group {
                self.pool.free_group(id);
            } else {
                self.pool.free_hop(id);
            }
        }
    }

    /// The FIB entry object `x` should have now, rewriting its current one
    /// in place when the kind stays the same.
    fn compute(&mut self, x: u32, old: &ObjFib, map: &dyn Fn(u32) -> Option<u16>) -> ObjFib {
        let obj = self.objs.get(&x).and_then(|o| o.obj.clone());
        match obj {
            None => ObjFib::None,
            Some(NextHopObject::Blackhole) => ObjFib::Drop,
            Some(NextHopObject::Single(nh)) => {
                let Some(port) = map_port(map, nh.ifindex) else {
                    self.counters.unusable_objects += 1;
                    return ObjFib::None;
                };
                let hop = NextHop {
                    port,
                    gateway: nh.gateway,
                };
                let weight = nh.weight.max(1) as u64;
                if let ObjFib::Hop { id, .. } = *old {
                    self.pool.rewrite_hop(id, hop);
                    return ObjFib::Hop { id, weight };
                }
                match self.pool.alloc_hop(hop) {
                    Ok(id) => ObjFib::Hop { id, weight },
                    Err(e) => {
                        self.note(e);
                        ObjFib::None
                    }
                }
            }
            Some(NextHopObject::Group(list)) => {
                let mut flat: Vec<(u32, u64)> = Vec::new();
                for &(m, w) in &list {
                    let Some(mo) = self.objs.get(&m).filter(|_| m != x) else {
                        continue;
                    };
                    for (id, fw) in mo.fib.contrib() {
                        let w = fw.saturating_mul(w.max(1) as u64);
                        match flat.iter_mut().find(|f| f.0 == id) {
                            Some(f) => f.1 = f.1.saturating_add(w),
                            None => flat.push((id, w)),
                        }
                    }
                }
                if flat.is_empty() {
                    return ObjFib::None;
                }
                flat.sort_unstable();
                let mut used = flat.clone();
                if used.len() > MAX_GROUP_MEMBERS {
                    // Keeping the old group could leave it pointing at
                    // members that just went away: keep the 64 heaviest.
                    self.note(FibError::GroupTooLarge);
                    used.sort_by_key(|&(id, w)| (std::cmp::Reverse(w), id));
                    used.truncate(MAX_GROUP_MEMBERS);
                    used.sort_unstable();
                }
                let weights: Vec<u64> = used.iter().map(|u| u.1).collect();
                let Ok(counts) = weights_to_counts(&weights) else {
                    return ObjFib::None;
                };
                let mut members = Vec::new();
                for (&(id, _), &c) in used.iter().zip(&counts) {
                    members.extend(std::iter::repeat_n(id, c as usize));
                }
                if let ObjFib::Group {
                    index,
                    members: ref om,
                    ..
                } = *old
                {
                    if *om != members {
                        let g = Group {
                            members: members.clone(),
                        };
                        if self.pool.nht.set_group(index, &g).is_err() {
                            return ObjFib::None;
                        }
                        if let Some(s) = self.pool.group_info.get_mut(index as usize) {
                            *s = Some(members.clone());
                        }
                    }
                    return ObjFib::Group {
                        index,
                        members,
                        flat,
                    };
                }
                match self.pool.alloc_group(members.clone()) {
                    Ok(index) => {
                        if let Some(s) = self.pool.group_info.get_mut(index as usize) {
                            *s = Some(members.clone());
                        }
                        ObjFib::Group {
                            index,
                            members,
                            flat,
                        }
                    }
                    Err(e) => {
                        self.note(e);
                        ObjFib::None
                    }
                }
            }
        }
    }
}

#[path = "fib_mpls.rs"]
mod mpls;
pub use mpls::{FtnInfo, LabelHop, LabelInfo, MplsFibCounters, MplsFibSummary};
#[path = "fib_vpn.rs"]
mod vpn;
pub use vpn::{Transport, VpnRoute};

/// A usable port for a zebra ifindex.
fn map_port(map: &dyn Fn(u32) -> Option<u16>, ifindex: u32) -> Option<u16> {
    if ifindex == 0 {
        return None;
    }
    map(ifindex).filter(|&p| p != BLACKHOLE_PORT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_scale_proportionally_and_keep_every_member() {
        assert_eq!(weights_to_counts(&[1, 1]).unwrap(), vec![1, 1]);
        assert_eq!(weights_to_counts(&[5, 5, 10]).unwrap(), vec![1, 1, 2]);
        assert_eq!(weights_to_counts(&[0, 3]).unwrap(), vec![1, 3]);
        assert_eq!(weights_to_counts(&[100, 200]).unwrap(), vec![1, 2]);
        let c = weights_to_counts(&[1, 1000]).unwrap();
        assert_eq!(c, vec![1, 63]);
        let c = weights_to_counts(&[3, 97]).unwrap();
        assert_eq!(c.iter().sum::<u32>(), 32);
        assert_eq!(c, vec![1, 31]);
        // 64 members with one heavy: all kept, total exactly 64.
        let mut w = vec![1u64; 63];
        w.push(1000);
        let c = weights_to_counts(&w).unwrap();
        assert!(c.iter().all(|&x| x >= 1));
        assert_eq!(c.iter().sum::<u32>(), 64);
        // Huge weights do not overflow.
        let c = weights_to_counts(&[u64::MAX, u64::MAX - 1, 7]).unwrap();
        assert!(c.iter().sum::<u32>() <= 64 && c.iter().all(|&x| x >= 1));
        assert_eq!(
            weights_to_counts(&[1; 65]).unwrap_err(),
            FibError::GroupTooLarge
        );
        assert_eq!(weights_to_counts(&[]).unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn id_alloc_quarantines_for_two_rotations() {
        let mut a = IdAlloc::new(1, 3);
        assert_eq!(a.alloc(), Some(1));
        assert_eq!(a.alloc(), Some(2));
        assert_eq!(a.alloc(), None);
        a.release(1);
        assert_eq!(a.alloc(), None);
        assert!(a.rotate().is_empty());
        assert_eq!(a.alloc(), None);
        assert_eq!(a.rotate(), vec![1]);
        assert_eq!(a.alloc(), Some(1));
        assert_eq!(a.live, 2);
    }

    #[test]
    fn gateways_follow_the_next_hops_in_use() {
        let mut f = Fib::with_config(FibConfig::for_vrf(254, 64));
        let p = |s: &str| {
            let (a, l) = s.split_once('/').unwrap();
            Prefix::new(a.parse().unwrap(), l.parse().unwrap()).unwrap()
        };
        let gw = |s: &str| -> IpAddr { s.parse().unwrap() };
        let mut out = vec![(9, gw("10.9.9.9"))];
        f.gateways(&mut out);
        assert!(out.is_empty(), "blackhole only: {out:?}");
        let g0 = f.next_hop_generation();
        f.set(p("10.1.0.0/24"), Source::Connected, vec![Hop::connected(1)])
            .unwrap();
        f.set(
            p("198.51.100.0/24"),
            Source::Static,
            vec![Hop::via(2, gw("10.2.0.2"))],
        )
        .unwrap();
        // The same gateway twice (shared), and an ECMP pair.
        f.set(
            p("198.51.101.0/24"),
            Source::Static,
            vec![Hop::via(2, gw("10.2.0.2"))],
        )
        .unwrap();
        f.set(
            p("2001:db8:99::/48"),
            Source::Static,
            vec![Hop::via(3, gw("fe80::2")), Hop::via(2, gw("2001:db8:2::2"))],
        )
        .unwrap();
        f.set_blackhole(p("203.0.113.0/24"), Source::Static)
            .unwrap();
        let g1 = f.next_hop_generation();
        assert_ne!(g0, g1);
        f.gateways(&mut out);
        assert_eq!(
            out,
            vec![
                (2, gw("10.2.0.2")),
                (2, gw("2001:db8:2::2")),
                (3, gw("fe80::2"))
            ]
        );
        // Unchanged next hops: the same generation.
        f.remove(p("198.51.101.0/24"), Source::Static);
        assert_eq!(f.next_hop_generation(), g1);
        f.remove(p("198.51.100.0/24"), Source::Static);
        assert_ne!(f.next_hop_generation(), g1);
        f.gateways(&mut out);
        assert_eq!(out, vec![(2, gw("2001:db8:2::2")), (3, gw("fe80::2"))]);
    }

    #[test]
    fn source_names_and_order() {
        assert!(Source::Connected.rank() < Source::Static.rank());
        assert!(Source::Static.rank() < Source::Frr { protocol: 186 }.rank());
        assert_eq!(Source::Frr { protocol: 186 }.name(), "bgp");
        assert_eq!(Source::Frr { protocol: 188 }.name(), "ospf");
        assert_eq!(Source::Frr { protocol: 196 }.name(), "frr-static");
        assert_eq!(Source::Frr { protocol: 77 }.name(), "proto-77");
        for k in 0..258 {
            assert_eq!(Source::from_key(k).key(), k);
        }
    }
}
