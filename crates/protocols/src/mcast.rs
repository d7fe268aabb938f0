//! The multicast control plane: IGMP/MLD snooping per VLAN, Lanyard's own
//! querier, and the multicast routes (static, and learned from the kernel
//! where FRR's pimd programs them), compiled into the snapshot the
//! workers read (`tables::mcast::McastTables`).
//!
//! One thread owns the state. Workers hand it every IGMP/MLD message (and
//! PIM hello) of a snooping VLAN through `Shared::snoop` (policed as the
//! CoPP class `igmp`) and forward the message themselves — queries to
//! every port, reports and leaves to router ports — so the thread never
//! sits in the forwarding path of a message. What it sends itself (general
//! queries, group-specific queries after a leave) goes out through
//! `Shared::mc_out`.
//!
//! A change is published as a whole new snapshot, at most once per
//! [`PUBLISH_EVERY`]: a join storm costs one rebuild per interval, not one
//! per report. Per-route counters live in the workers, indexed by a slot
//! that stays with a route (its key) for as long as the route exists.

use config::multicast::{Snooping, StaticMroute};
use config::Config;
use datapath::{Shared, MC_OUT_FLOOD};
use pipeline::WorkerCounters;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tables::mcast::{
    McAddr, McKey, McRoute, McVlan, McastTables, MrouteTable, RecordType, SnoopConfig, SnoopTable,
    ACCEPT_SET, ANY_IIF, MAX_MROUTES,
};
use tables::PortSet;
use wire::igmp::{self, IgmpMessage};
use wire::mld::{self, MldMessage};

/// Which sources of a group a membership forwards: one port's IGMPv3/MLDv2
/// filter, several ports' merged (what any of them forwards), or the
/// virtual-switch peer's as it announced it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum SourceFilter {
    /// Every source (IGMPv2/MLDv1, or EXCLUDE with nothing excluded).
    #[default]
    Any,
    /// Only these sources.
    Include(std::collections::BTreeSet<McAddr>),
    /// Every source but these.
    Exclude(std::collections::BTreeSet<McAddr>),
}

impl SourceFilter {
    /// One port's filter: INCLUDE its sources, or EXCLUDE its excluded
    /// list (sources with no timer; the requested list is forwarded).
    pub fn of_port(f: &tables::mcast::PortFilter) -> SourceFilter {
        match f.mode {
            tables::mcast::FilterMode::Include => {
                SourceFilter::Include(f.sources.keys().copied().collect())
            }
            tables::mcast::FilterMode::Exclude => SourceFilter::Exclude(
                f.sources
                    .iter()
                    .filter(|(_, t)| t.is_none())
                    .map(|(s, _)| *s)
                    .collect(),
            ),
        }
        .normal()
    }

    /// EXCLUDE of nothing is every source.
    pub fn normal(self) -> SourceFilter {
        match self {
            SourceFilter::Exclude(x) if x.is_empty() => SourceFilter::Any,
            f => f,
        }
    }

    /// Traffic from `source` (None: a source no filter names) passes.
    pub fn forwards(&self, source: Option<McAddr>) -> bool {
        match (self, source) {
            (SourceFilter::Any, _) => true,
            (SourceFilter::Include(a), Some(s)) => a.contains(&s),
            (SourceFilter::Include(_), None) => false,
            (SourceFilter::Exclude(x), Some(s)) => !x.contains(&s),
            (SourceFilter::Exclude(_), None) => true,
        }
    }

    /// What either filter forwards (ports merged behind one channel id).
    pub fn union(&self, other: &SourceFilter) -> SourceFilter {
        use SourceFilter::*;
        match (self, other) {
            (Any, _) | (_, Any) => Any,
            (Include(a), Include(b)) => Include(a.union(b).copied().collect()),
            (Include(a), Exclude(x)) | (Exclude(x), Include(a)) => {
                Exclude(x.difference(a).copied().collect())
            }
            (Exclude(x), Exclude(y)) => Exclude(x.intersection(y).copied().collect()),
        }
        .normal()
    }

    /// The sources it names (included or excluded).
    pub fn sources(&self) -> impl Iterator<Item = McAddr> + '_ {
        match self {
            SourceFilter::Any => None,
            SourceFilter::Include(a) | SourceFilter::Exclude(a) => Some(a.iter().copied()),
        }
        .into_iter()
        .flatten()
    }
}

/// Longest a change waits before it reaches the data path.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(10);
/// Timer resolution (group and router-port expiry, queries).
const TICK: Duration = Duration::from_millis(100);

/// What snooping does, compiled from `multicast.igmp-snooping`.
#[derive(Clone, Debug)]
struct Settings {
    cfg: SnoopConfig,
    querier: bool,
    querier_v4: Ipv4Addr,
    querier_v6: Ipv6Addr,
    query_interval_ms: u64,
    query_response_ms: u64,
    robustness: u8,
    last_member_ms: u64,
    flood_unregistered: bool,
    static_router_ports: PortSet,
    mac: [u8; 6],
}

impl Settings {
    fn new(s: &Snooping, cfg: &Config) -> Settings {
        let mut static_router_ports = PortSet::EMPTY;
        for name in &s.router_ports {
            if let Some(i) = cfg.ports.iter().position(|p| &p.name == name) {
                static_router_ports.insert(i as u16);
            }
        }
        let mac = switch_mac(cfg);
        Settings {
            cfg: SnoopConfig {
                gmi_ms: s.gmi_ms(),
                lmqt_ms: s.lmqt_ms(),
                // Other querier present interval (RFC 3376 8.5).
                router_timeout_ms: s.robustness as u64 * s.query_interval as u64 * 1000
                    + s.query_response_ms as u64 / 2,
                fast_leave: s.fast_leave,
                max_groups: s.max_groups as usize,
                max_sources_per_record: 1024,
            },
            querier: s.querier,
            querier_v4: match s.querier_address {
                Some(IpAddr::V4(a)) => a,
                _ => Ipv4Addr::UNSPECIFIED,
            },
            querier_v6: link_local(mac),
            query_interval_ms: s.query_interval as u64 * 1000,
            query_response_ms: s.query_response_ms as u64,
            robustness: s.robustness,
            last_member_ms: s.last_member_interval_ms as u64,
            flood_unregistered: s.flood_unregistered,
            static_router_ports,
            mac,
        }
    }
}

/// The source MAC of Lanyard's own queries: stable per switch name.
fn switch_mac(cfg: &Config) -> [u8; 6] {
    let mut h: u32 = 0x811c_9dc5;
    for b in cfg.switch.name.bytes() {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    let h = h.to_be_bytes();
    [0x02, 0x4c, 0x51, h[1], h[2], h[3]]
}

/// fe80:: with the EUI-64 of `mac` (MLD queries come from a link-local
/// address, RFC 3810 5.1.14).
fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        u16::from_be_bytes([mac[0] ^ 2, mac[1]]),
        u16::from_be_bytes([mac[2], 0xff]),
        u16::from_be_bytes([0xfe, mac[3]]),
        u16::from_be_bytes([mac[4], mac[5]]),
    )
}

/// Querier state of one VLAN and family.
#[derive(Clone, Debug, Default)]
struct Querier {
    /// Another querier with a better claim was heard until then (ms).
    other_until: u64,
    other: Option<IpAddr>,
    next_query: u64,
    /// Startup queries still to send (RFC 3376 8.7).
    startup_left: u8,
    sent: u64,
}

struct VlanSnoop {
    table: SnoopTable,
    q4: Querier,
    q6: Querier,
}

/// A group-specific query still to send after a leave.
struct PendingQuery {
    due: u64,
    vlan: u16,
    port: u16,
    group: McAddr,
    left: u8,
}

/// Counters of the snooping thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnoopStats {
    pub igmp: u64,
    pub mld: u64,
    pub pim_hellos: u64,
    /// Messages that did not parse (bad checksum, truncated, unknown).
    pub malformed: u64,
    pub queries_sent: u64,
    pub publishes: u64,
    /// Route slots exhausted (more routes than `MAX_MROUTES`).
    pub slots_exhausted: u64,
    pub build_errors: u64,
    /// Entries in the kernel's multicast forwarding cache (pimd's).
    pub kernel_entries: u64,
}

struct State {
    settings: Option<Settings>,
    vlans: BTreeMap<u16, VlanSnoop>,
    routing: bool,
    static_routes: Vec<(McKey, McRoute)>,
    /// The keys of `static_routes` (hundreds of thousands of bidirectional
    /// routes: no linear searches).
    static_keys: HashSet<McKey>,
    kernel_routes: Vec<(McKey, McRoute)>,
    /// Counter slot of every route key, and the pass that last saw it.
    slots: HashMap<McKey, (u32, u64)>,
    free: Vec<u32>,
    next_slot: u32,
    generation: u64,
    /// Counter values when a slot was (re)assigned: shown as zero then.
    base: Vec<(u64, u64)>,
    pending: Vec<PendingQuery>,
    dirty: bool,
    stats: SnoopStats,
    port_names: Vec<String>,
    /// Memberships the virtual-switch peer reported, installed on this
    /// node's side of their channel (or on the peer link): (VLAN, group,
    /// port). Kept apart from snooping so they never count as learned
    /// here (and are never reported back to the peer).
    peer_groups: BTreeMap<(u16, McAddr, u16), SourceFilter>,
}

/// The multicast control plane (see the module documentation).
pub struct Multicast {
    shared: Arc<Shared>,
    counters: Vec<Arc<WorkerCounters>>,
    state: Mutex<State>,
    epoch: Instant,
}

impl Multicast {
    /// Whether `cfg` asks for any multicast processing.
    pub fn configured(cfg: &Config) -> bool {
        let m = &cfg.multicast;
        m.igmp_snooping
            .as_ref()
            .is_some_and(|s| !s.vlans.is_empty())
            || m.routing
            || !m.static_routes.is_empty()
    }

    pub fn new(cfg: &Config, shared: Arc<Shared>, counters: Vec<Arc<WorkerCounters>>) -> Self {
        let m = Multicast {
            shared,
            counters,
            state: Mutex::new(State {
                settings: None,
                vlans: BTreeMap::new(),
                routing: false,
                static_routes: Vec::new(),
                static_keys: HashSet::new(),
                kernel_routes: Vec::new(),
                slots: HashMap::new(),
                free: Vec::new(),
                next_slot: 0,
                generation: 0,
                base: Vec::new(),
                pending: Vec::new(),
                dirty: true,
                stats: SnoopStats::default(),
                port_names: Vec::new(),
                peer_groups: Default::default(),
            }),
            epoch: Instant::now(),
        };
        m.reconfigure(cfg);
        m.publish();
        m
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take a new configuration: snooping VLANs keep their members when
    /// they stay; static routes are replaced.
    pub fn reconfigure(&self, cfg: &Config) {
        let now = self.now();
        let mut st = self.lock();
        // Ports, VLAN interfaces and port channels by id (a channel is a
        // member of its group, not its physical members).
        let ids = cfg.channel_port_id(cfg.port_channels.len());
        st.port_names = (0..ids).map(|i| cfg.port_label(i)).collect();
        let snooping = cfg.multicast.igmp_snooping.as_ref();
        st.settings = snooping.map(|s| Settings::new(s, cfg));
        let vlans: Vec<u16> = snooping.map(|s| s.vlans.clone()).unwrap_or_default();
        st.vlans.retain(|v, _| vlans.contains(v));
        if let Some(set) = st.settings.clone() {
            for v in vlans {
                let vs = st.vlans.entry(v).or_insert_with(|| VlanSnoop {
                    table: SnoopTable::new(v, set.cfg),
                    q4: Querier::default(),
                    q6: Querier::default(),
                });
                vs.table.set_config(set.cfg);
                vs.table.set_static_router_ports(set.static_router_ports);
                if set.querier && vs.q4.sent == 0 {
                    // Startup: the first query at once, then robustness − 1
                    // more a quarter interval apart.
                    for q in [&mut vs.q4, &mut vs.q6] {
                        q.next_query = now;
                        q.startup_left = set.robustness;
                    }
                }
            }
        }
        st.routing = cfg.multicast.routing;
        st.static_routes = static_routes(cfg, &cfg.multicast.static_routes);
        st.static_keys = st.static_routes.iter().map(|(k, _)| *k).collect();
        st.dirty = true;
    }

    /// Begin the startup queries now (at start, once the ports are up).
    pub fn restart_querier(&self) {
        let now = self.now();
        let mut st = self.lock();
        let r = st.settings.as_ref().map_or(0, |s| s.robustness);
        for vs in st.vlans.values_mut() {
            for q in [&mut vs.q4, &mut vs.q6] {
                q.next_query = now;
                q.startup_left = r;
            }
        }
    }

    /// Memberships snooped on this node: (VLAN, group, port, the port's
    /// source filter) (the virtual-switch peer link sends them to the
    /// peer).
    pub fn local_memberships(&self) -> Vec<(u16, McAddr, u16, SourceFilter)> {
        let st = self.lock();
        let mut out = Vec::new();
        for (v, vs) in &st.vlans {
            for (g, ports) in vs.table.groups() {
                for (p, f) in ports {
                    let wants =
                        f.mode == tables::mcast::FilterMode::Exclude || !f.sources.is_empty();
                    if wants {
                        out.push((*v, g, *p, SourceFilter::of_port(f)));
                    }
                }
            }
        }
        out
    }

    /// Replaces the peer's memberships (see `State::peer_groups`); only
    /// snooping VLANs take them.
    pub fn set_peer_groups(&self, groups: BTreeMap<(u16, McAddr, u16), SourceFilter>) {
        let mut st = self.lock();
        if st.peer_groups != groups {
            st.peer_groups = groups;
            st.dirty = true;
            drop(st);
            // The thread may sleep a whole tick: publish now.
            self.shared.snoop.wake();
        }
    }

    /// Group membership interval of the snooping configuration (how long
    /// a membership lives without a report), if snooping is on.
    pub fn membership_interval(&self) -> Option<Duration> {
        let st = self.lock();
        st.settings
            .as_ref()
            .map(|s| Duration::from_millis(s.cfg.gmi_ms))
    }

    /// Routes learned from the kernel (pimd), replacing the previous set.
    pub fn set_kernel_routes(&self, routes: Vec<(McKey, McRoute)>) {
        let mut st = self.lock();
        st.kernel_routes = routes;
        st.dirty = true;
    }

    /// The thread: messages, timers, publishing. Returns at stop.
    pub fn run(&self) {
        let mut last_publish = Instant::now();
        let mut last_tick = Instant::now();
        let q = &self.shared.snoop;
        while !self.shared.stop.load(Ordering::Relaxed) {
            let mut n = 0;
            while let Some(b) = q.pop() {
                self.handle(b.port, b.vlan, b.frame());
                q.recycle(b);
                n += 1;
                if n >= 1024 {
                    break;
                }
            }
            if last_tick.elapsed() >= TICK {
                last_tick = Instant::now();
                self.tick();
            }
            let dirty = self.lock().dirty;
            if dirty && last_publish.elapsed() >= PUBLISH_EVERY {
                self.publish();
                last_publish = Instant::now();
            }
            if !q.is_empty() {
                continue;
            }
            let wait = if dirty { PUBLISH_EVERY } else { TICK };
            if q.prepare_sleep() {
                let mut pfd = libc::pollfd {
                    fd: q.event_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, length 1.
                unsafe { libc::poll(&mut pfd, 1, wait.as_millis() as i32) };
                q.clear_wake();
            }
        }
    }

    /// One message from a worker: `port` it entered on, `vlan` it was
    /// switched in, the frame as received.
    pub fn handle(&self, port: u16, vlan: u16, frame: &[u8]) {
        let now = self.now();
        let port = self.shared.tables.load().l2.logical(port);
        let mut st = self.lock();
        let State {
            settings,
            vlans,
            stats,
            pending,
            dirty,
            ..
        } = &mut *st;
        let (Some(set), Some(vs)) = (settings.as_ref(), vlans.get_mut(&vlan)) else {
            return;
        };
        let Some(m) = parse(frame) else {
            stats.malformed += 1;
            return;
        };
        match &m {
            Message::PimHello => stats.pim_hellos += 1,
            Message::Query(IpAddr::V6(_)) => stats.mld += 1,
            Message::Join(g) | Message::Leave(g) if g.is_v6() => stats.mld += 1,
            Message::Records(r) if r.first().is_some_and(|(_, g, _)| g.is_v6()) => stats.mld += 1,
            _ => stats.igmp += 1,
        }
        *dirty |= snoop_message(set, vs, port, m, now, pending);
    }

    /// Timers: expiry, queries.
    fn tick(&self) {
        let now = self.now();
        let mut out: Vec<(u16, u16, Vec<u8>)> = Vec::new();
        {
            let mut st = self.lock();
            let State {
                settings,
                vlans,
                pending,
                dirty,
                stats,
                ..
            } = &mut *st;
            let Some(set) = settings.as_ref() else {
                return;
            };
            for (vlan, vs) in vlans.iter_mut() {
                *dirty |= vs.table.expire(now);
                if !set.querier {
                    continue;
                }
                for v6 in [false, true] {
                    let q = if v6 { &mut vs.q6 } else { &mut vs.q4 };
                    if now < q.other_until || now < q.next_query {
                        continue;
                    }
                    let interval = if q.startup_left > 1 {
                        q.startup_left -= 1;
                        set.query_interval_ms / 4
                    } else {
                        q.startup_left = 0;
                        set.query_interval_ms
                    };
                    q.next_query = now + interval;
                    q.sent += 1;
                    stats.queries_sent += 1;
                    out.push((*vlan, MC_OUT_FLOOD, query_frame(set, v6, None)));
                }
            }
            // Group-specific queries after leaves (when we are the querier).
            pending.retain_mut(|p| {
                if p.due > now {
                    return true;
                }
                let v6 = p.group.is_v6();
                out.push((p.vlan, p.port, query_frame(set, v6, Some(p.group))));
                stats.queries_sent += 1;
                p.left -= 1;
                p.due = now + set.last_member_ms;
                p.left > 0
            });
        }
        for (vlan, port, f) in out {
            if self.shared.mc_out.push_in_vlan(port, vlan, 0, &f) {
                self.shared.mc_out.kick();
            }
        }
    }

    /// Compile the state into a snapshot and publish it.
    pub fn publish(&self) {
        let mut st = self.lock();
        st.dirty = false;
        st.generation += 1;
        let gen = st.generation;
        let mut entries: Vec<(McKey, McRoute)> = Vec::new();
        for vs in st.vlans.values() {
            entries.extend(vs.table.to_mroutes());
        }
        add_peer_groups(&mut entries, &st);
        if st.routing {
            entries.extend(st.kernel_routes.iter().copied());
        }
        // Configured routes win over learned ones with the same key.
        if !st.static_keys.is_empty() {
            entries.retain(|(k, _)| !st.static_keys.contains(k));
        }
        entries.extend(st.static_routes.iter().copied());
        let mut kept = Vec::with_capacity(entries.len());
        for (k, mut r) in entries {
            match st.slot(k, gen, &self.counters) {
                Some(s) => {
                    r.index = s;
                    kept.push((k, r));
                }
                None => st.stats.slots_exhausted += 1,
            }
        }
        // Free the slots of routes that are gone.
        let State { slots, free, .. } = &mut *st;
        slots.retain(|_, (s, g)| {
            if *g != gen {
                free.push(*s);
                false
            } else {
                true
            }
        });
        let routes = match MrouteTable::build(kept) {
            Ok(t) => t,
            Err(e) => {
                st.stats.build_errors += 1;
                tracing::warn!("multicast routes not published: {e}");
                return;
            }
        };
        let top = st.vlans.keys().next_back().copied().unwrap_or(0) as usize;
        let mut vlans = vec![McVlan::default(); if st.vlans.is_empty() { 0 } else { top + 1 }];
        if let Some(set) = &st.settings {
            for (v, vs) in &st.vlans {
                vlans[*v as usize] = McVlan {
                    snooping: true,
                    flood_unregistered: set.flood_unregistered,
                    router_ports: vs.table.router_ports(),
                };
            }
        }
        st.stats.publishes += 1;
        let routing = st.routing || !st.static_routes.is_empty();
        if vlans.is_empty() && !routing {
            // Nothing to do: the workers skip the multicast pass entirely.
            self.shared.mcast.store(None);
            return;
        }
        self.shared.mcast.store(Some(Arc::new(McastTables {
            routes,
            vlans: vlans.into_boxed_slice(),
            routing,
        })));
    }

    fn route_counters(&self, slot: u32) -> (u64, u64) {
        sum_counters(&self.counters, slot)
    }

    /// `show ip igmp snooping groups` / `show ipv6 mld snooping groups`.
    pub fn show_groups(&self, v6: bool, vlan: Option<u16>, count: bool) -> Value {
        let st = self.lock();
        let name = |p: u16| {
            st.port_names
                .get(p as usize)
                .cloned()
                .unwrap_or_else(|| format!("port{p}"))
        };
        let mut rows = Vec::new();
        let mut per_vlan = Vec::new();
        for (v, vs) in &st.vlans {
            if vlan.is_some_and(|x| x != *v) {
                continue;
            }
            let mut n = 0;
            for (g, ports) in vs.table.groups() {
                if g.is_v6() != v6 {
                    continue;
                }
                n += 1;
                if count {
                    continue;
                }
                let mut members: Vec<Value> = ports
                    .iter()
                    .map(|(p, f)| {
                        json!({
                            "port": name(*p),
                            "mode": match f.mode {
                                tables::mcast::FilterMode::Include => "include",
                                tables::mcast::FilterMode::Exclude => "exclude",
                            },
                            "sources": f.sources.keys().map(|s| IpAddr::from(*s).to_string()).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                // The virtual-switch peer's memberships of this group.
                members.extend(
                    st.peer_groups
                        .range((*v, g, 0)..=(*v, g, u16::MAX))
                        .map(|((_, _, p), f)| peer_member(name(*p), f)),
                );
                rows.push(
                    json!({"vlan": v, "group": IpAddr::from(g).to_string(), "ports": members}),
                );
            }
            // Groups only the peer has members of.
            let mut last = None;
            for (&(_, g, p), f) in st
                .peer_groups
                .range((*v, McAddr::V4(0), 0)..=(*v, McAddr::V6(u128::MAX), u16::MAX))
            {
                if g.is_v6() != v6 || vs.table.groups().any(|(x, _)| x == g) {
                    continue;
                }
                if last != Some(g) {
                    n += 1;
                    last = Some(g);
                    if !count {
                        rows.push(
                            json!({"vlan": v, "group": IpAddr::from(g).to_string(), "ports": []}),
                        );
                    }
                }
                if let Some(r) = rows.last_mut().filter(|_| !count) {
                    if let Some(a) = r["ports"].as_array_mut() {
                        a.push(peer_member(name(p), f));
                    }
                }
            }
            let q = if v6 { &vs.q6 } else { &vs.q4 };
            let c = vs.table.counters();
            per_vlan.push(json!({
                "vlan": v,
                "groups": n,
                "router-ports": vs.table.router_ports().iter().map(name).collect::<Vec<_>>(),
                "querier": match (st.settings.as_ref(), q.other) {
                    (_, Some(a)) if self.now() < q.other_until => json!(a.to_string()),
                    (Some(s), _) if s.querier => json!(if v6 { s.querier_v6.to_string() } else { s.querier_v4.to_string() } + " (this switch)"),
                    _ => Value::Null,
                },
                "queries-sent": q.sent,
                "refused": {
                    "group-limit": c.refused_group_limit,
                    "too-many-sources": c.refused_too_many_sources,
                    "invalid": c.refused_invalid,
                },
            }));
        }
        let s = st.stats;
        let stats = json!({
            "igmp": s.igmp, "mld": s.mld, "pim-hellos": s.pim_hellos,
            "malformed": s.malformed, "queries-sent": s.queries_sent,
            "publishes": s.publishes, "kernel-entries": s.kernel_entries,
        });
        if count {
            json!({"vlans": per_vlan, "messages": stats})
        } else {
            json!({"vlans": per_vlan, "groups": rows, "messages": stats})
        }
    }

    /// `show ip mroute [summary]` (both families with `all`).
    pub fn show_mroute(&self, v6: bool, summary: bool) -> Value {
        let Some(mc) = self.shared.mcast.load_full() else {
            return json!({"routes": [], "count": 0});
        };
        let st = self.lock();
        let name = |p: u16| {
            st.port_names
                .get(p as usize)
                .cloned()
                .unwrap_or_else(|| format!("port{p}"))
        };
        let mut rows = Vec::new();
        let (mut sg, mut starg, mut l2, mut l3) = (0u64, 0u64, 0u64, 0u64);
        for (k, r) in mc.routes.iter() {
            if k.group.is_v6() != v6 {
                continue;
            }
            if k.source.is_some() {
                sg += 1;
            } else {
                starg += 1;
            }
            if k.vlan == 0 {
                l3 += 1;
            } else {
                l2 += 1;
            }
            if summary {
                continue;
            }
            let (p, b) = self.route_counters(r.index);
            let (bp, bb) = st.base.get(r.index as usize).copied().unwrap_or((0, 0));
            rows.push(json!({
                "vlan": if k.vlan == 0 { Value::Null } else { json!(k.vlan) },
                "source": k.source.map(|s| IpAddr::from(s).to_string()).unwrap_or_else(|| "*".into()),
                "group": IpAddr::from(k.group).to_string(),
                "iif": match r.iif {
                    ANY_IIF => json!("any"),
                    ACCEPT_SET => json!("bidir"),
                    p => json!(name(p)),
                },
                "accept": r.accept.iter().map(name).collect::<Vec<_>>(),
                "oifs": r.oifs.iter().map(name).collect::<Vec<_>>(),
                "ttl-threshold": r.ttl_threshold,
                "origin": if k.vlan != 0 { "snooping" } else if st.static_keys.contains(&k) { "static" } else { "kernel" },
                "packets": p.wrapping_sub(bp),
                "bytes": b.wrapping_sub(bb),
            }));
        }
        let c = |f: fn(&pipeline::counters::McastCounters) -> u64| -> u64 {
            self.counters.iter().map(|w| f(&w.mcast)).sum()
        };
        let mut v = json!({
            "count": sg + starg,
            "s-g": sg,
            "star-g": starg,
            "snooped": l2,
            "routed": l3,
            "memory-bytes": mc.routes.memory_bytes(),
            "data-path": {
                "registered": c(|m| m.registered.get()),
                "unregistered": c(|m| m.unregistered.get()),
                "replicated": c(|m| m.replicated.get()),
                "snooped": c(|m| m.snooped.get()),
                "snoop-queue-full": c(|m| m.snoop_queue_full.get()),
                "rpf-fail": c(|m| m.rpf_fail.get()),
                "ttl-threshold": c(|m| m.ttl_threshold.get()),
            },
        });
        if !summary {
            v["routes"] = Value::Array(rows);
        }
        v
    }

    /// Snooping thread counters.
    pub fn stats(&self) -> SnoopStats {
        self.lock().stats
    }
}

impl Multicast {
    /// Follow the kernel's multicast forwarding cache (what pimd installs
    /// on the TAPs) until stop: every change becomes the new set of
    /// kernel routes. `by_ifindex` maps a TAP's ifindex to its port.
    /// Entries naming an interface that is not a TAP (pimd's `pimreg`:
    /// pimd wants the packets itself) are left to the kernel.
    pub fn follow_kernel(&self, by_ifindex: HashMap<u32, u16>) {
        use routing::kernel::mfc::{is_overrun, MfcEvent, MfcMonitor};
        let mut entries: HashMap<(IpAddr, IpAddr), routing::kernel::mfc::MfcEntry> = HashMap::new();
        let mut mon = match MfcMonitor::open() {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("multicast routing: kernel MFC: {e}");
                return;
            }
        };
        let mut resync = true;
        while !self.shared.stop.load(Ordering::Relaxed) {
            let mut changed = false;
            if resync {
                match mon.dump() {
                    Ok(all) => {
                        entries = all.into_iter().map(|e| (e.key(), e)).collect();
                        changed = true;
                        resync = false;
                    }
                    Err(e) => {
                        tracing::warn!("multicast routing: MFC dump: {e}");
                        std::thread::sleep(Duration::from_secs(1));
                        continue;
                    }
                }
            }
            match mon.poll(Duration::from_millis(200)) {
                Ok(evs) => {
                    for ev in evs {
                        changed = true;
                        match ev {
                            MfcEvent::Add(e) => {
                                entries.insert(e.key(), e);
                            }
                            MfcEvent::Del { source, group } => {
                                entries.remove(&(source, group));
                            }
                        }
                    }
                }
                Err(e) if is_overrun(&e) => resync = true,
                Err(e) => {
                    tracing::warn!("multicast routing: MFC: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            if changed {
                let routes = entries
                    .values()
                    .filter_map(|e| kernel_route(e, &by_ifindex))
                    .collect();
                self.set_kernel_routes(routes);
                self.lock().stats.kernel_entries = entries.len() as u64;
            }
        }
    }
}

/// One MFC entry as a Lanyard route, if every interface it names is one
/// of Lanyard's TAPs.
fn kernel_route(
    e: &routing::kernel::mfc::MfcEntry,
    by_ifindex: &HashMap<u32, u16>,
) -> Option<(McKey, McRoute)> {
    let iif = *by_ifindex.get(&e.iif)?;
    let mut oifs = PortSet::EMPTY;
    let mut ttl = u8::MAX;
    for (ifindex, t) in &e.oifs {
        oifs.insert(*by_ifindex.get(ifindex)?);
        ttl = ttl.min(*t);
    }
    if oifs.is_empty() || !e.group.is_multicast() {
        return None;
    }
    let source = (!e.source.is_unspecified()).then(|| McAddr::from(e.source));
    Some((
        McKey {
            vlan: 0,
            group: e.group.into(),
            source,
        },
        McRoute {
            iif,
            oifs,
            accept: PortSet::EMPTY,
            // The kernel forwards when TTL > threshold; so does Lanyard.
            ttl_threshold: ttl.min(254),
            index: 0,
        },
    ))
}

/// The virtual-switch peer's memberships into the snooped routes, with
/// their source filters: per (VLAN, group) the peer's ports join the
/// (*, G) route when their filter passes sources no filter names, and
/// each (S, G) route whose source they pass. A source the peer names that
/// has no (S, G) route here gets one, starting from this node's (*, G)
/// ports (what its own filters give a source they do not name); a group
/// only the peer has gets a (*, G) route with the VLAN's router ports.
fn add_peer_groups(entries: &mut Vec<(McKey, McRoute)>, st: &State) {
    if st.peer_groups.is_empty() {
        return;
    }
    let mut by_group: BTreeMap<(u16, McAddr), Vec<(u16, &SourceFilter)>> = BTreeMap::new();
    for (&(vlan, group, port), f) in &st.peer_groups {
        if (port as usize) < tables::MAX_PORTS && st.vlans.contains_key(&vlan) {
            by_group.entry((vlan, group)).or_default().push((port, f));
        }
    }
    // Routes by (VLAN, group): index of the (*, G) one and the sources.
    let mut index: HashMap<(u16, McAddr), Vec<usize>> = HashMap::new();
    for (i, (k, _)) in entries.iter().enumerate() {
        if by_group.contains_key(&(k.vlan, k.group)) {
            index.entry((k.vlan, k.group)).or_default().push(i);
        }
    }
    for ((vlan, group), peers) in by_group {
        let Some(vs) = st.vlans.get(&vlan) else {
            continue;
        };
        let routes = index.entry((vlan, group)).or_default();
        let star = match routes.iter().find(|i| entries[**i].0.source.is_none()) {
            Some(i) => entries[*i].1,
            None => {
                let r = McRoute {
                    iif: ANY_IIF,
                    oifs: vs.table.router_ports(),
                    accept: PortSet::EMPTY,
                    ttl_threshold: 0,
                    index: 0,
                };
                entries.push((
                    McKey {
                        vlan,
                        group,
                        source: None,
                    },
                    r,
                ));
                routes.push(entries.len() - 1);
                r
            }
        };
        for s in peers.iter().flat_map(|(_, f)| f.sources()) {
            if !routes.iter().any(|i| entries[*i].0.source == Some(s)) {
                entries.push((
                    McKey {
                        vlan,
                        group,
                        source: Some(s),
                    },
                    star,
                ));
                routes.push(entries.len() - 1);
            }
        }
        for &i in routes.iter() {
            let (k, r) = &mut entries[i];
            for (port, f) in &peers {
                if f.forwards(k.source) {
                    r.oifs.insert(*port);
                }
            }
        }
    }
}

/// One of the peer's memberships in `show ip igmp snooping groups`:
/// mode `peer`, its filter (`any`, `include`, `exclude`) and sources.
fn peer_member(port: String, f: &SourceFilter) -> Value {
    json!({
        "port": port,
        "mode": "peer",
        "filter": match f {
            SourceFilter::Any => "any",
            SourceFilter::Include(_) => "include",
            SourceFilter::Exclude(_) => "exclude",
        },
        "sources": f.sources().map(|s| IpAddr::from(s).to_string()).collect::<Vec<_>>(),
    })
}

fn sum_counters(counters: &[Arc<WorkerCounters>], slot: u32) -> (u64, u64) {
    counters.iter().fold((0, 0), |(p, b), c| {
        let (x, y) = c.mroutes.get(slot);
        (p.wrapping_add(x), b.wrapping_add(y))
    })
}

impl State {
    /// The counter slot of `k`, assigning one to a new route.
    fn slot(&mut self, k: McKey, gen: u64, counters: &[Arc<WorkerCounters>]) -> Option<u32> {
        if let Some(e) = self.slots.get_mut(&k) {
            e.1 = gen;
            return Some(e.0);
        }
        let s = match self.free.pop() {
            Some(s) => s,
            None if (self.next_slot as usize) < MAX_MROUTES => {
                self.next_slot += 1;
                self.next_slot - 1
            }
            None => return None,
        };
        if self.base.len() <= s as usize {
            self.base.resize(s as usize + 1, (0, 0));
        }
        self.base[s as usize] = sum_counters(counters, s);
        self.slots.insert(k, (s, gen));
        Some(s)
    }
}

fn static_routes(cfg: &Config, routes: &[StaticMroute]) -> Vec<(McKey, McRoute)> {
    let port = |n: &str| cfg.ports.iter().position(|p| p.name == n).map(|i| i as u16);
    routes
        .iter()
        .map(|r| {
            let set = |names: &[String]| {
                let mut s = PortSet::EMPTY;
                for p in names.iter().filter_map(|n| port(n)) {
                    s.insert(p);
                }
                s
            };
            let (oifs, accept) = (set(&r.oifs), set(&r.accept));
            (
                McKey {
                    vlan: 0,
                    group: r.group.into(),
                    source: r.source.map(McAddr::from),
                },
                McRoute {
                    iif: match r.iif.as_deref() {
                        _ if !accept.is_empty() => ACCEPT_SET,
                        Some(n) => port(n).unwrap_or(ANY_IIF),
                        None => ANY_IIF,
                    },
                    oifs,
                    accept,
                    ttl_threshold: r.ttl_threshold,
                    index: 0,
                },
            )
        })
        .collect()
}

/// An IGMP or MLD message in family-neutral form (the snooping rules are
/// the same for both: RFC 4541).
#[derive(Debug)]
enum Message {
    /// A query from this address (any version, general or specific).
    Query(IpAddr),
    /// IGMPv1/v2 report, MLDv1 report: EXCLUDE {} for the group.
    Join(McAddr),
    /// IGMPv2 leave, MLDv1 done: TO_IN {}.
    Leave(McAddr),
    /// IGMPv3 / MLDv2 records (unknown record types already dropped).
    Records(Vec<(RecordType, McAddr, Vec<McAddr>)>),
    PimHello,
}

/// IGMPv3 / MLDv2 records, unknown record types dropped.
fn records_message<A: Into<McAddr>>(records: Vec<wire::igmp::Record<A>>) -> Message {
    Message::Records(
        records
            .into_iter()
            .filter_map(|r| {
                let srcs = r.sources.into_iter().map(Into::into).collect();
                Some((rtype(r.record_type)?, r.group.into(), srcs))
            })
            .collect(),
    )
}

fn from_igmp(src: Ipv4Addr, m: IgmpMessage) -> Message {
    let g = |a: Ipv4Addr| McAddr::V4(a.into());
    match m {
        IgmpMessage::Query(_) => Message::Query(IpAddr::V4(src)),
        IgmpMessage::ReportV1 { group } | IgmpMessage::ReportV2 { group } => {
            Message::Join(g(group))
        }
        IgmpMessage::Leave { group } => Message::Leave(g(group)),
        IgmpMessage::ReportV3(records) => records_message(records),
    }
}

fn from_mld(src: Ipv6Addr, m: MldMessage) -> Message {
    let g = |a: Ipv6Addr| McAddr::V6(a.into());
    match m {
        MldMessage::Query(_) => Message::Query(IpAddr::V6(src)),
        MldMessage::ReportV1 { group } => Message::Join(g(group)),
        MldMessage::Done { group } => Message::Leave(g(group)),
        MldMessage::ReportV2(records) => records_message(records),
    }
}

/// The IGMP/MLD message (or PIM hello) in a frame as a worker received it
/// (at most one VLAN tag). None if anything does not check out.
fn parse(frame: &[u8]) -> Option<Message> {
    let mut off = 12;
    let mut et = u16::from_be_bytes(frame.get(off..off + 2)?.try_into().ok()?);
    if matches!(et, 0x8100 | 0x88a8 | 0x9100) {
        off += 4;
        et = u16::from_be_bytes(frame.get(off..off + 2)?.try_into().ok()?);
    }
    let ip = frame.get(off + 2..)?;
    match et {
        0x0800 => {
            let ihl = (*ip.first()? & 0x0f) as usize * 4;
            let total = u16::from_be_bytes(ip.get(2..4)?.try_into().ok()?) as usize;
            if ip[0] >> 4 != 4 || ihl < 20 || total < ihl || total > ip.len() {
                return None;
            }
            if wire::checksum::fold(wire::checksum::sum(&ip[..ihl])) != 0xffff {
                return None;
            }
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            match ip[9] {
                2 => IgmpMessage::parse(&ip[ihl..total])
                    .ok()
                    .map(|m| from_igmp(src, m)),
                103 if ip.get(ihl).is_some_and(|b| b & 0x0f == 0) => Some(Message::PimHello),
                _ => None,
            }
        }
        0x86dd => {
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return None;
            }
            let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            let end = (40 + plen).min(ip.len());
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).ok()?);
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).ok()?);
            let (mut nh, mut at) = (ip[6], 40);
            if nh == 0 {
                nh = *ip.get(at)?;
                at += (*ip.get(at + 1)? as usize + 1) * 8;
            }
            match nh {
                58 => MldMessage::parse(ip.get(at..end)?, src, dst)
                    .ok()
                    .map(|m| from_mld(src, m)),
                103 if ip.get(at).is_some_and(|b| b & 0x0f == 0) => Some(Message::PimHello),
                _ => None,
            }
        }
        _ => None,
    }
}

fn rtype(t: igmp::RecordType) -> Option<RecordType> {
    use igmp::RecordType as W;
    Some(match t {
        W::ModeIsInclude => RecordType::IsIn,
        W::ModeIsExclude => RecordType::IsEx,
        W::ChangeToInclude => RecordType::ToIn,
        W::ChangeToExclude => RecordType::ToEx,
        W::AllowNewSources => RecordType::Allow,
        W::BlockOldSources => RecordType::Block,
        W::Unknown(_) => return None, // ignored (RFC 3376 4.2.12)
    })
}

/// Link-local groups are always flooded: no state for them (RFC 4541 2.1.2).
fn is_link_local(g: McAddr) -> bool {
    match g {
        McAddr::V4(a) => a >> 8 == 0xe0_0000,
        McAddr::V6(a) => (a >> 112) & 0xf <= 2,
    }
}

/// A query from `src` heard on `port`: router port, querier election.
fn heard_query(set: &Settings, vs: &mut VlanSnoop, port: u16, src: IpAddr, now: u64) -> bool {
    let had = vs.table.router_ports().contains(port);
    let (q, ours) = match src {
        IpAddr::V4(_) => (&mut vs.q4, IpAddr::V4(set.querier_v4)),
        IpAddr::V6(_) => (&mut vs.q6, IpAddr::V6(set.querier_v6)),
    };
    if !src.is_unspecified() {
        vs.table.router_port_seen(port, now);
        // The lowest address wins (RFC 3376 6.6.2); an unaddressed
        // snooping querier defers to any real one.
        if !set.querier || ours.is_unspecified() || src < ours {
            q.other_until = now + set.cfg.router_timeout_ms;
            q.other = Some(src);
        }
    }
    !had && !src.is_unspecified()
}

fn leave_query(
    set: &Settings,
    vs: &VlanSnoop,
    port: u16,
    group: McAddr,
    now: u64,
    pending: &mut Vec<PendingQuery>,
) {
    let q = if group.is_v6() { &vs.q6 } else { &vs.q4 };
    if set.querier && !set.cfg.fast_leave && now >= q.other_until {
        pending.retain(|p| !(p.vlan == vs.table.vlan() && p.port == port && p.group == group));
        pending.push(PendingQuery {
            due: now,
            vlan: vs.table.vlan(),
            port,
            group,
            left: set.robustness.max(1),
        });
    }
}

/// Apply one message heard on `port`; true if forwarding changed.
fn snoop_message(
    set: &Settings,
    vs: &mut VlanSnoop,
    port: u16,
    m: Message,
    now: u64,
    pending: &mut Vec<PendingQuery>,
) -> bool {
    match m {
        Message::Query(src) => heard_query(set, vs, port, src, now),
        Message::Join(g) => !is_link_local(g) && vs.table.join(port, g, now).is_ok(),
        Message::Leave(g) => {
            if is_link_local(g) {
                return false;
            }
            leave_query(set, vs, port, g, now, pending);
            vs.table.leave(port, g, now).is_ok()
        }
        Message::Records(records) => {
            let mut changed = false;
            for (t, g, srcs) in records {
                if is_link_local(g) {
                    continue;
                }
                if matches!(t, RecordType::ToIn | RecordType::Block) {
                    leave_query(set, vs, port, g, now, pending);
                }
                changed |= vs.table.report(port, g, t, &srcs, now).is_ok();
            }
            changed
        }
        Message::PimHello => {
            let had = vs.table.router_ports().contains(port);
            vs.table.router_port_seen(port, now);
            !had
        }
    }
}

/// A general query (`group` None) or a group-specific one, as an
/// untagged frame: IGMPv3 / MLDv2, with the router alert option.
fn query_frame(set: &Settings, v6: bool, group: Option<McAddr>) -> Vec<u8> {
    let mut f = Vec::with_capacity(96);
    if !v6 {
        let g = match group {
            Some(McAddr::V4(a)) => Ipv4Addr::from(a),
            _ => Ipv4Addr::UNSPECIFIED,
        };
        let dst = if group.is_some() {
            g
        } else {
            Ipv4Addr::new(224, 0, 0, 1)
        };
        let d = dst.octets();
        f.extend_from_slice(&[0x01, 0x00, 0x5e, d[1] & 0x7f, d[2], d[3]]);
        f.extend_from_slice(&set.mac);
        f.extend_from_slice(&[0x08, 0x00]);
        let resp = if group.is_some() {
            set.last_member_ms
        } else {
            set.query_response_ms
        };
        let msg = IgmpMessage::Query(igmp::Query {
            max_resp_code: igmp::encode_code((resp / 100).min(31_744) as u32),
            group: g,
            v3: Some(igmp::QueryV3 {
                suppress_router_processing: false,
                qrv: set.robustness.min(7),
                qqic: igmp::encode_code((set.query_interval_ms / 1000) as u32),
                sources: Vec::new(),
            }),
        });
        let mut body = vec![0u8; msg.buffer_len()];
        let n = msg.emit(&mut body).unwrap_or(0);
        let total = (24 + n) as u16;
        let mut ip = [0u8; 24];
        ip[0] = 0x46; // version 4, IHL 6 (router alert)
        ip[1] = 0xc0; // DSCP CS6 (RFC 3376 4: internetwork control)
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[8] = 1; // TTL 1
        ip[9] = 2; // IGMP
        ip[12..16].copy_from_slice(&set.querier_v4.octets());
        ip[16..20].copy_from_slice(&d);
        ip[20..24].copy_from_slice(&[0x94, 0x04, 0x00, 0x00]);
        let c = !wire::checksum::fold(wire::checksum::sum(&ip));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&body[..n]);
    } else {
        let g = match group {
            Some(McAddr::V6(a)) => Ipv6Addr::from(a),
            _ => Ipv6Addr::UNSPECIFIED,
        };
        let dst = if group.is_some() {
            g
        } else {
            Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)
        };
        let d = dst.octets();
        f.extend_from_slice(&[0x33, 0x33, d[12], d[13], d[14], d[15]]);
        f.extend_from_slice(&set.mac);
        f.extend_from_slice(&[0x86, 0xdd]);
        let resp = if group.is_some() {
            set.last_member_ms
        } else {
            set.query_response_ms
        };
        let msg = MldMessage::Query(mld::Query {
            max_resp_code: mld::encode_max_resp_code(resp.min(8_387_584) as u32),
            group: g,
            v2: Some(mld::QueryV2 {
                suppress_router_processing: false,
                qrv: set.robustness.min(7),
                qqic: igmp::encode_code((set.query_interval_ms / 1000) as u32),
                sources: Vec::new(),
            }),
        });
        let mut body = vec![0u8; msg.buffer_len()];
        let n = msg.emit(set.querier_v6, dst, &mut body).unwrap_or(0);
        let plen = (8 + n) as u16;
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&plen.to_be_bytes());
        f.extend_from_slice(&[0, 1]); // hop-by-hop next, hop limit 1
        f.extend_from_slice(&set.querier_v6.octets());
        f.extend_from_slice(&d);
        // Hop-by-hop: next ICMPv6, router alert (MLD), PadN.
        f.extend_from_slice(&[58, 0, 5, 2, 0, 0, 1, 0]);
        f.extend_from_slice(&body[..n]);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        let cfg: Config = config::parse(
            "ports: [{name: a}, {name: b}]\nmulticast:\n  igmp-snooping: {vlans: [1], querier: true, querier-address: 10.0.0.9}\n",
            "t.yaml",
        )
        .expect("config");
        Settings::new(cfg.multicast.igmp_snooping.as_ref().unwrap(), &cfg)
    }

    #[test]
    fn queries_parse_back() {
        let set = settings();
        for (v6, g) in [
            (false, None),
            (false, Some(McAddr::V4(0xef01_0101))),
            (true, None),
            (true, Some(McAddr::V6(0xff05 << 112 | 7))),
        ] {
            let f = query_frame(&set, v6, g);
            match parse(&f) {
                Some(Message::Query(IpAddr::V4(src))) => {
                    assert!(!v6);
                    assert_eq!(src, Ipv4Addr::new(10, 0, 0, 9));
                }
                Some(Message::Query(IpAddr::V6(src))) => {
                    assert!(v6);
                    assert_eq!(src, set.querier_v6);
                }
                m => panic!("query frame does not parse back (v6 {v6}, {g:?}): {m:?}"),
            }
            // General or group-specific, with the configured interval.
            if v6 {
                let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&f[38..54]).unwrap());
                let Ok(MldMessage::Query(q)) = MldMessage::parse(&f[62..], set.querier_v6, dst)
                else {
                    panic!("MLD query");
                };
                assert_eq!((q.is_general(), q.version()), (g.is_none(), 2));
                assert_eq!(q.query_interval(), Some(Duration::from_secs(125)));
            } else {
                let Ok(IgmpMessage::Query(q)) = IgmpMessage::parse(&f[38..]) else {
                    panic!("IGMP query");
                };
                assert_eq!(q.is_general(), g.is_none());
                assert_eq!(q.query_interval(), Some(Duration::from_secs(125)));
            }
            // The data path sees it as a query too (flooded).
            assert_eq!(
                pipeline::mcast::inspect(&f, 12),
                pipeline::mcast::McPacket::Control { flood: true }
            );
        }
    }

    #[test]
    fn parse_refuses_garbage_and_bad_checksums() {
        let set = settings();
        let mut f = query_frame(&set, false, None);
        f[14 + 10] ^= 0xff; // IP header checksum
        assert!(parse(&f).is_none());
        let mut r = testkit::routes::Rng(0x9e37_79b9);
        for len in 0..140 {
            for _ in 0..40 {
                let mut g: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
                if g.len() > 14 {
                    g[12] = 0x08;
                    g[13] = 0x00;
                }
                let _ = parse(&g);
            }
        }
    }

    #[test]
    fn election_lowest_address_wins() {
        let set = settings();
        let mut vs = VlanSnoop {
            table: SnoopTable::new(1, set.cfg),
            q4: Querier::default(),
            q6: Querier::default(),
        };
        // Higher address: we stay querier, but the port leads to a router.
        assert!(heard_query(
            &set,
            &mut vs,
            1,
            "10.0.0.20".parse().unwrap(),
            0
        ));
        assert_eq!(vs.q4.other_until, 0);
        assert!(vs.table.router_ports().contains(1));
        // Lower address: it wins.
        heard_query(&set, &mut vs, 0, "10.0.0.1".parse().unwrap(), 5);
        assert!(vs.q4.other_until > 5);
        // A 0.0.0.0 query (another snooping switch) marks nothing.
        assert!(!heard_query(
            &set,
            &mut vs,
            1,
            "0.0.0.0".parse().unwrap(),
            6
        ));
    }

    #[test]
    fn kernel_entries_become_routes_only_over_taps() {
        use routing::kernel::mfc::MfcEntry;
        let taps: HashMap<u32, u16> = [(10, 0), (11, 1), (12, 2)].into_iter().collect();
        let e = |iif, oifs: Vec<(u32, u8)>, source: &str| MfcEntry {
            source: source.parse().unwrap(),
            group: "232.1.1.1".parse().unwrap(),
            iif,
            oifs,
            packets: 0,
            bytes: 0,
            wrong_if: 0,
        };
        let (k, r) = kernel_route(&e(10, vec![(11, 1), (12, 1)], "10.0.0.2"), &taps).unwrap();
        assert_eq!(k.vlan, 0);
        assert_eq!(k.source, Some(McAddr::V4(0x0a00_0002)));
        assert_eq!((r.iif, r.ttl_threshold), (0, 1));
        assert!(r.oifs.contains(1) && r.oifs.contains(2) && !r.oifs.contains(0));
        // (*,G): no source.
        let (k, _) = kernel_route(&e(10, vec![(11, 1)], "0.0.0.0"), &taps).unwrap();
        assert_eq!(k.source, None);
        // pimreg (not a TAP) among the oifs, an unknown iif, no oifs: the
        // kernel keeps those.
        assert!(kernel_route(&e(10, vec![(11, 1), (99, 1)], "10.0.0.2"), &taps).is_none());
        assert!(kernel_route(&e(99, vec![(11, 1)], "10.0.0.2"), &taps).is_none());
        assert!(kernel_route(&e(10, vec![], "10.0.0.2"), &taps).is_none());
    }

    #[test]
    fn link_local_groups_keep_no_state() {
        assert!(is_link_local(McAddr::V4(0xe000_00fb)));
        assert!(!is_link_local(McAddr::V4(0xe000_0100)));
        assert!(is_link_local(McAddr::V6(0xff02 << 112 | 0xfb)));
        assert!(!is_link_local(McAddr::V6(0xff05 << 112 | 1)));
    }

    #[test]
    fn source_filters_merge_to_what_any_forwards() {
        use SourceFilter::*;
        let set = |v: &[u32]| v.iter().map(|x| McAddr::V4(*x)).collect();
        let (a, x) = (Include(set(&[1, 2])), Exclude(set(&[2, 3])));
        assert_eq!(a.union(&Include(set(&[3]))), Include(set(&[1, 2, 3])));
        // INCLUDE {1,2} + EXCLUDE {2,3}: every source but 3.
        assert_eq!(a.union(&x), Exclude(set(&[3])));
        assert_eq!(x.union(&a), Exclude(set(&[3])));
        assert_eq!(x.union(&Exclude(set(&[4]))), Any);
        assert_eq!(a.union(&Any), Any);
        let u = a.union(&x);
        for s in 0..6 {
            let src = Some(McAddr::V4(s));
            assert_eq!(
                u.forwards(src),
                a.forwards(src) || x.forwards(src),
                "source {s}"
            );
        }
        assert!(!a.forwards(None) && x.forwards(None) && Any.forwards(None));
    }
}
