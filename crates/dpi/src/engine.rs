//! The per-worker engine: one call per frame ([`Engine::process`]) that
//! finds the frame's flow, gives a new flow its subscriber, classifies it
//! from its first packets and counts it per service, per application and
//! per subscriber per service.
//!
//! ## Per packet (after [`Engine::new`] nothing is allocated)
//!
//! 1. Parse (Ethernet, VLAN tags, IPv4/IPv6, TCP/UDP/ICMP); not IP →
//!    counted `not_ip`, passed.
//! 2. Flow table lookup or insert ([`FlowTable::track`]); a full table
//!    refuses the flow (counted) and the frame passes unclassified.
//! 3. A new flow: subscriber lookup in the published [`View`] by its
//!    subscriber-side address (the source of a frame from the subscriber
//!    side, the destination of one from the network side); an nDPI slot
//!    from the preallocated [`FlowPool`] (none free: counted
//!    `classify_busy`, signatures still apply) — except an ICMP flow
//!    (nDPI's answer given without it) and a flow opened by a bare SYN
//!    (its slot taken at its second packet, the SYN replayed first): see
//!    [`crate::first_packet`].
//! 4. While the flow is being classified: operator signatures first (the
//!    first match decides), then nDPI. nDPI's answer decides once it wants
//!    no more packets or the TCP flow is closing — but not before `signature_depth` packets when a
//!    payload signature could still match the flow. After
//!    `classify_packets` packets the flow is decided with what nDPI has,
//!    or its guess (ports, address lists) when `guess` is on, or
//!    `unknown`. Work per flow is therefore bounded: at most
//!    `classify_packets` calls into nDPI.
//! 5. On the decision the nDPI slot is freed and the packets and bytes the
//!    flow carried so far are added to its service, application and
//!    subscriber-service counters; later packets are added one by one.
//!
//! 6. Bandwidth control ([`crate::bandwidth`]): a packet of a decided
//!    flow whose service has a controller in its direction takes its
//!    bytes from the token bucket of its subscriber × service entry; a
//!    packet of a flow still being classified takes them from the
//!    subscriber's `classifying` bucket (when that limit is configured).
//!    Then every packet of a subscriber — classified or not — passes its
//!    subscriber's *total* entry ([`crate::service::TOTAL`]): its own cap
//!    and its quota. An empty bucket drops the packet ([`Verdict::Drop`],
//!    counted per service, per subscriber × service, in the subscriber's
//!    total and per direction; a bucket passed before a later one dropped
//!    gets its tokens back). Everything else passes unchanged.

use crate::bandwidth::{BandwidthPolicy, Levels};
use crate::flow::{Flow, FlowTable, State, Timeouts, Track, NONE};
use crate::ndpi::{FlowPool, Ndpi, NdpiError};
use crate::packet::parse_ethernet;
use crate::service::{ServiceMap, Stats, Usage, UsageTable, OTHER, TOTAL, UNKNOWN};
use crate::signature::{Signature, Signatures};
use crate::subscriber::View;
use crate::usage_record::{EndReason, UsageQueue, UsageRecord};
use std::sync::Arc;

/// Service id of a flow still being classified.
pub const PENDING: u16 = u16::MAX;

/// A flow's class while it is classified and has no nDPI slot *yet*: an
/// ICMP flow (named without nDPI, [`crate::first_packet::icmp_app`]) or a
/// TCP flow opened by a bare SYN (its slot taken, and the SYN replayed,
/// at its second packet: [`crate::first_packet::syn_deferrable`]).
const DEFERRED: u32 = NONE - 1;

/// ICMP over IPv4 or ICMPv6 over IPv6: the flows nDPI names by protocol.
#[inline]
fn icmp_family(t: &crate::packet::Tuple) -> bool {
    if t.v6 {
        t.proto == crate::packet::ICMPV6
    } else {
        t.proto == crate::packet::ICMP
    }
}

/// Engine flag bits kept in the flow ([`crate::flow::FlowMut::set_user`]).
const U_OPENER_UP: u8 = 1;
const U_SIG_CANDIDATE: u8 = 2;
/// Bits 2..4: the subscriber's package index + 1 (0 = no subscriber).
const U_PKG_SHIFT: u8 = 2;

/// A new flow's usage entries prefetched (services `0..` this): enough
/// for a typical policy (`unknown`, `other` and a few services) without
/// loading dozens of lines per new flow for a large one.
const PREFETCH_SERVICES: usize = 8;

/// Which side of the bump in the wire a frame came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// From the subscribers' port: upstream traffic.
    Subscriber = 0,
    /// From the network's port: downstream traffic.
    Network = 1,
}

/// What the engine decided for a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Over its bandwidth share or quota: do not forward.
    Drop,
}

/// Sizes and limits of one worker's engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Flow table capacity (rounded up to a power of two).
    pub flows: usize,
    pub timeouts: Timeouts,
    /// Flows that can be in classification at once (nDPI state each).
    pub classify_slots: u32,
    /// Packets after which a flow is decided with what is known.
    pub classify_packets: u16,
    /// Packets a flow that a payload signature may match waits for before
    /// nDPI's answer is taken.
    pub signature_depth: u16,
    /// Take nDPI's guess (ports, address lists) for flows it could not name.
    pub guess: bool,
    /// Per-subscriber per-service counter entries.
    pub usage_entries: usize,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            flows: 1 << 20,
            timeouts: Timeouts::default(),
            classify_slots: 1 << 16,
            classify_packets: 24,
            signature_depth: 6,
            guess: false,
            usage_entries: 1 << 18,
        }
    }
}

impl EngineConfig {
    /// Bytes one engine reserves (flows, nDPI slots, usage table), not
    /// counting nDPI's module (a few MB).
    pub fn memory_bytes(&self, ndpi_slot_bytes: usize) -> usize {
        let flows = self
            .flows
            .clamp(crate::flow::MIN_CAPACITY, 1 << 30)
            .next_power_of_two();
        flows * crate::flow::BYTES_PER_FLOW
            + self.classify_slots as usize * ndpi_slot_bytes
            + self.usage_entries.clamp(16, 1 << 28).next_power_of_two()
                * crate::service::USAGE_ENTRY_BYTES
    }
}

/// An operator signature before its service name is resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureSpec {
    pub signature: Signature,
    pub service: String,
}

/// What the engine applies: services and signatures, with the names of
/// every application id (nDPI's, then the signatures').
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub services: ServiceMap,
    pub signatures: Signatures,
    /// Application id → name; ids `protocols..` are the signatures.
    pub app_names: Vec<String>,
    pub protocols: u16,
    /// Controllers, package weights and caps, quota action.
    pub bandwidth: BandwidthPolicy,
}

impl Policy {
    /// Compiles services (name, nDPI application names) and signatures,
    /// resolving names against `ndpi`. Errors name what is wrong.
    pub fn compile(
        ndpi: &Ndpi,
        services: &[(String, Vec<String>)],
        signatures: Vec<SignatureSpec>,
    ) -> Result<Policy, String> {
        let protocols = ndpi.protocols();
        let mut resolved = Vec::with_capacity(services.len());
        for (name, apps) in services {
            let mut ids = Vec::with_capacity(apps.len());
            for a in apps {
                let id = ndpi
                    .id(a)
                    .ok_or_else(|| format!("service '{name}': '{a}' is not an nDPI application (see `show service-control applications`)"))?;
                ids.push(id);
            }
            resolved.push((name.clone(), ids));
        }
        let services_map = ServiceMap::new(&resolved)?;
        let mut app_names: Vec<String> = (0..protocols).map(|i| ndpi.name(i)).collect();
        let mut sigs = Vec::with_capacity(signatures.len());
        for s in signatures {
            let id = services_map
                .id(&s.service)
                .filter(|&id| id > OTHER)
                .ok_or_else(|| {
                    format!(
                        "signature '{}': no service '{}'",
                        s.signature.name, s.service
                    )
                })?;
            if app_names.contains(&s.signature.name) {
                return Err(format!(
                    "signature '{}': the name is taken by an nDPI application or another signature",
                    s.signature.name
                ));
            }
            app_names.push(s.signature.name.clone());
            sigs.push(Signature {
                service: id,
                ..s.signature
            });
        }
        Ok(Policy {
            services: services_map,
            signatures: Signatures::new(sigs)?,
            app_names,
            protocols,
            bandwidth: BandwidthPolicy::default(),
        })
    }

    /// The service flows of application `app` are counted in (a
    /// signature's own service for signature ids).
    pub fn service_of(&self, app: u16) -> u16 {
        match app.checked_sub(self.protocols) {
            Some(i) => self
                .signatures
                .get(usize::from(i))
                .map_or(OTHER, |s| s.service),
            None => self.services.of(app),
        }
    }

    pub fn app_name(&self, app: u16) -> &str {
        self.app_names
            .get(usize::from(app))
            .map(String::as_str)
            .unwrap_or("Unknown")
    }
}

/// How a flow was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Signature,
    Ndpi,
    Guess,
    Unknown,
}

/// Everything but the flow table (so table callbacks can borrow it).
struct Ctx {
    ndpi: Ndpi,
    pool: FlowPool,
    policy: Arc<Policy>,
    stats: Arc<Stats>,
    /// Controllers' shares per weight unit (shared by every worker).
    levels: Arc<Levels>,
    cfg: EngineConfig,
    /// Where ended flows go as usage records (none: not exported).
    export: Option<Arc<UsageQueue>>,
    /// Interim records of live flows every this long (0: none).
    active_ms: u64,
    /// ICMP named and a bare SYN's nDPI call deferred without nDPI
    /// ([`crate::first_packet`]); off only to compare with.
    shortcuts: bool,
}

/// One worker's engine. See the module docs.
pub struct Engine {
    flows: FlowTable,
    ctx: Ctx,
}

impl Engine {
    /// Builds the engine and reserves all its memory; `policy` must have
    /// been compiled against the same nDPI version (any module).
    pub fn new(cfg: EngineConfig, policy: Arc<Policy>) -> Result<Engine, NdpiError> {
        let ndpi = Ndpi::new()?;
        let apps = usize::from(ndpi.protocols()) + crate::signature::MAX_SIGNATURES;
        Ok(Engine {
            flows: FlowTable::new(cfg.flows, cfg.timeouts),
            ctx: Ctx {
                pool: FlowPool::new(cfg.classify_slots),
                ndpi,
                policy: policy.clone(),
                stats: Arc::new(Stats::new(apps, cfg.usage_entries)),
                levels: Arc::new(Levels::new(&policy.bandwidth)),
                cfg,
                export: None,
                active_ms: 0,
                shortcuts: true,
            },
        })
    }

    /// The counters `show` reads (any thread).
    pub fn stats(&self) -> Arc<Stats> {
        self.ctx.stats.clone()
    }

    pub fn policy(&self) -> &Arc<Policy> {
        &self.ctx.policy
    }

    /// The controllers' levels this engine reads (one set shared by all
    /// workers, written by the control thread).
    pub fn set_levels(&mut self, l: Arc<Levels>) {
        self.ctx.levels = l;
    }

    /// Ended flows go to `q` as usage records from now on.
    pub fn set_usage_export(&mut self, q: Arc<UsageQueue>) {
        self.ctx.export = Some(q);
    }

    /// Live flows also leave an interim usage record every `ms` (0:
    /// only when they end), carrying the traffic since the previous one.
    pub fn set_active_timeout(&mut self, ms: u64) {
        self.ctx.active_ms = ms;
    }

    /// With `false`, every new flow takes its nDPI slot and gives nDPI
    /// its first packet, as before [`crate::first_packet`] (the same
    /// decisions and counters, more nDPI work): for comparisons.
    pub fn set_first_packet_shortcuts(&mut self, on: bool) {
        self.ctx.shortcuts = on;
    }

    /// Whether ended flows are exported.
    pub fn exports(&self) -> bool {
        self.ctx.export.is_some()
    }

    /// A new policy for flows decided from now on.
    pub fn set_policy(&mut self, p: Arc<Policy>) {
        self.ctx.policy = p;
    }

    pub fn flows(&self) -> &FlowTable {
        &self.flows
    }

    /// Bytes this engine reserved (flow table, nDPI slots, usage table).
    pub fn memory_bytes(&self) -> usize {
        self.flows.memory_bytes()
            + self.ctx.pool.memory_bytes()
            + self.ctx.stats.usage.capacity() * crate::service::USAGE_ENTRY_BYTES
    }

    /// The ranges of the engine's big arrays (flow table, usage table)
    /// advised for 2 MB pages, for `tables::huge::huge_bytes_in`.
    pub fn advised_ranges(&self) -> Vec<(usize, usize)> {
        self.flows
            .advised_ranges()
            .chain(self.ctx.stats.usage.advised_range())
            .collect()
    }

    /// Handles one frame from `side` at `now_ms` (see [`Engine::process_us`]).
    #[inline]
    pub fn process(&mut self, frame: &[u8], side: Side, view: &View, now_ms: u64) -> Verdict {
        self.process_us(frame, side, view, now_ms.saturating_mul(1000))
    }

    /// Handles one frame from `side` at `now_us` microseconds (token
    /// buckets need finer time than flow timeouts). See the module docs.
    #[inline]
    pub fn process_us(&mut self, frame: &[u8], side: Side, view: &View, now_us: u64) -> Verdict {
        let now_ms = now_us / 1000;
        let st = &self.ctx.stats.engine;
        st.packets.add(1);
        let Some(p) = parse_ethernet(frame) else {
            st.not_ip.add(1);
            return Verdict::Pass;
        };
        let bytes = frame.len() as u32;
        let sub_addr = if side == Side::Subscriber {
            p.tuple.src
        } else {
            p.tuple.dst
        };
        // A new flow looks its subscriber up next: start that load while
        // the table writes the entry (one cache miss instead of two in a row).
        let absent = || view.prefetch(sub_addr, p.tuple.v6);
        let (idx, new) = match self
            .flows
            .track_or(&p.tuple, p.tcp_flags, bytes, now_ms, absent)
        {
            Track::Full { removed } => {
                if let Some(f) = removed {
                    let why = why_removed(self.flows.timeouts(), &f, now_ms);
                    self.ctx.ended(f, why);
                }
                self.ctx.stats.engine.unclassified_packets.add(1);
                self.sync_table_counters();
                return Verdict::Pass;
            }
            Track::Hit {
                idx, new, removed, ..
            } => {
                if let Some(f) = removed {
                    let why = why_removed(self.flows.timeouts(), &f, now_ms);
                    self.ctx.ended(f, why);
                    self.sync_table_counters();
                }
                (idx, new)
            }
        };
        if new {
            let defer = self.ctx.shortcuts
                && (icmp_family(&p.tuple)
                    || crate::first_packet::syn_deferrable(&p.tuple, p.tcp_flags, p.payload_len));
            self.ctx
                .start(&mut self.flows, idx, &p.tuple, side, view, defer);
        }
        let dir = side as usize;
        let f = self.flows.at(idx);
        let (service, total) = (f.service(), f.total());
        let pass = if service == PENDING {
            let payload = frame
                .get(p.payload..p.payload + p.payload_len)
                .unwrap_or(&[]);
            self.ctx.classify(
                &mut self.flows,
                idx,
                &p.tuple,
                payload,
                &frame[p.l3..],
                now_ms,
            );
            // Its service is not known yet (this frame is counted in it
            // when the flow is decided): the classifying limit and the
            // subscriber's own cap and quota.
            self.ctx.police_classifying(total, dir, bytes, now_us)
        } else {
            let s = &self.ctx.stats;
            let pass = self
                .ctx
                .police(service, f.class(), total, f.user(), dir, bytes, now_us);
            let count = if pass { count } else { count_drop };
            count(&s.services[usize::from(service)], dir, bytes);
            if let Some(a) = s.apps.get(usize::from(f.app())) {
                count(a, dir, bytes);
            }
            if f.class() != NONE {
                count(s.usage.at(f.class()), dir, bytes);
            }
            pass
        };
        if total != NONE {
            let c = if pass { count } else { count_drop };
            c(self.ctx.stats.usage.at(total), dir, bytes);
        }
        if pass {
            Verdict::Pass
        } else {
            Verdict::Drop
        }
    }

    /// Prefetch for a batch: call with the batch's frames and the sides
    /// they came from (in any order), and the view `process_us` will
    /// get, before [`Engine::process_us`] on each. Three passes over the
    /// frames (each parses the headers again, ~10 ns): the first starts
    /// loading every frame's index slot, the second — those slots now
    /// cached — every frame's flow entry, the third every decided flow's
    /// usage entry and, for a frame whose flow is not in the table yet,
    /// the subscriber slot its lookup reads first; the packets' cache
    /// misses then overlap instead of following one another. Changes
    /// nothing; frames that do not parse are skipped.
    pub fn prefetch<'a>(
        &self,
        frames: impl Iterator<Item = (&'a [u8], Side)> + Clone,
        view: &View,
    ) {
        for (f, _) in frames.clone() {
            if let Some(p) = parse_ethernet(f) {
                self.flows.prefetch_index(&p.tuple);
            }
        }
        for (f, _) in frames.clone() {
            if let Some(p) = parse_ethernet(f) {
                self.flows.prefetch_entry(&p.tuple);
            }
        }
        for (f, side) in frames {
            let Some(p) = parse_ethernet(f) else { continue };
            match self.flows.class_of(&p.tuple) {
                // A decided flow's class is its usage entry (while it is
                // classified, an nDPI slot: nothing to fetch).
                Some((c, s)) => {
                    if s != PENDING && c != NONE {
                        self.ctx.stats.usage.prefetch(c);
                    }
                }
                None => {
                    let t = &p.tuple;
                    let addr = if side == Side::Subscriber {
                        t.src
                    } else {
                        t.dst
                    };
                    view.prefetch(addr, t.v6);
                }
            }
        }
    }

    /// Expires idle flows: looks at up to `budget` flows. Call once per
    /// batch (or per idle poll).
    pub fn sweep(&mut self, now_ms: u64, budget: usize) -> usize {
        let ctx = &mut self.ctx;
        let active_ms = match (&ctx.export, ctx.active_ms) {
            (Some(_), ms) if ms > 0 => ms,
            _ => u64::MAX,
        };
        let export = ctx.export.clone();
        let stats = ctx.stats.clone();
        let policy = ctx.policy.clone();
        let n = self.flows.sweep_active(
            now_ms,
            budget,
            active_ms,
            &mut |f| ctx.ended(f, ended_by_timeout(&f)),
            &mut |f| {
                // A flow still being classified waits for its decision
                // (a few packets); an empty interval only restarts.
                // A closing TCP flow ends within seconds: one final
                // record rather than an interim one and an empty end.
                if f.service == PENDING || matches!(f.state, State::TimeWait | State::Closed) {
                    return false;
                }
                if f.packets == [0; 2] {
                    return true;
                }
                let Some(q) = &export else { return false };
                let r = usage_record(&f, f.app, f.service, EndReason::ActiveTimeout);
                // A full queue: keep counting, try again next round.
                let ok = q.push(r).is_ok();
                if ok {
                    stats.engine.interim_records.add(1);
                }
                ok
            },
            &mut |f| {
                // Ending `f` soon: start loading the usage entries
                // `ended` reads (a flow still classified is attributed
                // then, usually to its nDPI answer's service or unknown).
                let u = &stats.usage;
                if f.service == PENDING {
                    if f.sub != NONE {
                        let s = policy.services.of(f.app);
                        u.prefetch_key(UsageTable::key(f.sub, f.sub_gen, s));
                    }
                } else if f.class != NONE {
                    u.prefetch(f.class);
                }
                if f.total != NONE {
                    u.prefetch(f.total);
                }
            },
        );
        self.sync_table_counters();
        n
    }

    /// Ends every flow (counted as ended; classification slots freed).
    pub fn clear(&mut self, now_ms: u64) {
        let ctx = &mut self.ctx;
        let _ = now_ms;
        self.flows.clear(&mut |f| ctx.ended(f, EndReason::Forced));
        self.sync_table_counters();
    }

    fn sync_table_counters(&self) {
        let c = self.flows.counters();
        let st = &self.ctx.stats.engine;
        st.expired.set(c.expired);
        st.evicted_idle.set(c.evicted_idle);
        st.refused_full.set(c.refused_full);
    }

    /// nDPI state slots in use / reserved, and bytes per slot.
    pub fn classify_slots(&self) -> (usize, usize, usize) {
        (
            self.ctx.pool.in_use(),
            self.ctx.pool.capacity(),
            self.ctx.pool.slot_bytes(),
        )
    }
}

#[inline]
fn count(u: &Usage, dir: usize, bytes: u32) {
    u.packets[dir].add(1);
    u.bytes[dir].add(u64::from(bytes));
}

#[inline]
fn count_drop(u: &Usage, dir: usize, bytes: u32) {
    u.dropped_packets[dir].add(1);
    u.dropped_bytes[dir].add(u64::from(bytes));
}

impl Ctx {
    /// Bandwidth control of one packet of a decided flow (`usage`: its
    /// subscriber × service entry, `total`: its subscriber's total entry).
    /// True: it may pass.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn police(
        &self,
        service: u16,
        usage: u32,
        total: u32,
        user: u8,
        dir: usize,
        bytes: u32,
        now_us: u64,
    ) -> bool {
        let bw = &self.policy.bandwidth;
        let limit = bw.limit_bytes(service, dir);
        if usage == NONE {
            if limit != 0 {
                self.stats.engine.uncontrolled_packets.add(1);
            }
            return total == NONE || self.police_total(total, dir, bytes, now_us);
        }
        let b = self.stats.usage.bucket(usage);
        // Without a total entry (usage table full) the quota falls back to
        // the service entry's flag, at the policy's rate.
        let quota_out = total == NONE && b.quota_out.get() != 0;
        if limit == 0 && !quota_out {
            return total == NONE || self.police_total(total, dir, bytes, now_us);
        }
        let rate = if quota_out {
            bw.quota_rate / 8
        } else {
            match b.rate[dir].get() {
                0 => {
                    // Not rated yet: its weight's share of the level.
                    let pkg = usize::from((user >> U_PKG_SHIFT) & 3).saturating_sub(1);
                    let w = u64::from(bw.weights.get(pkg).copied().unwrap_or(1).max(1));
                    self.levels.get(service, dir).saturating_mul(w).min(limit)
                }
                r => r,
            }
        };
        if !b.admit(dir, rate, bytes, now_us) {
            if quota_out {
                self.stats.engine.quota_dropped.add(1);
            }
            return false;
        }
        if total != NONE && !self.police_total(total, dir, bytes, now_us) {
            b.refund(dir, bytes);
            return false;
        }
        true
    }

    /// A packet of a flow still being classified: the `classifying` limit
    /// of its subscriber, then the subscriber's cap and quota.
    #[inline]
    fn police_classifying(&self, total: u32, dir: usize, bytes: u32, now_us: u64) -> bool {
        let limit = self.policy.bandwidth.classifying[dir] / 8;
        if total == NONE {
            if limit != 0 {
                self.stats.engine.uncontrolled_packets.add(1);
            }
            return true;
        }
        let b = self.stats.usage.bucket(total);
        if limit != 0 && !b.classifying.admit(dir, limit, bytes, now_us) {
            self.stats.engine.classifying_dropped.add(1);
            return false;
        }
        if !self.police_total(total, dir, bytes, now_us) {
            if limit != 0 {
                b.classifying.refund(dir, bytes);
            }
            return false;
        }
        true
    }

    /// The subscriber's own cap and its quota (its total entry `total`).
    #[inline]
    fn police_total(&self, total: u32, dir: usize, bytes: u32, now_us: u64) -> bool {
        let b = self.stats.usage.bucket(total);
        let out = b.quota_out.get() != 0;
        let cap = b.cap[dir].get();
        let limit = match (out, cap) {
            (false, 0) => return true,
            (false, c) => c,
            (true, c) => {
                let q = b.quota_rate.get();
                if q == 0 {
                    self.stats.engine.quota_dropped.add(1);
                    return false;
                }
                if c == 0 {
                    q
                } else {
                    q.min(c)
                }
            }
        };
        // The control thread's share for this worker, or the whole limit
        // before it has seen the subscriber here.
        let rate = match b.rate[dir].get() {
            0 => limit,
            r => r.min(limit),
        };
        if b.admit(dir, rate, bytes, now_us) {
            return true;
        }
        let c = if out {
            &self.stats.engine.quota_dropped
        } else {
            &self.stats.engine.cap_dropped
        };
        c.add(1);
        false
    }

    /// A new flow: subscriber, nDPI slot (or [`DEFERRED`] with `defer`),
    /// engine bits.
    fn start(
        &mut self,
        flows: &mut FlowTable,
        idx: usize,
        t: &crate::packet::Tuple,
        side: Side,
        view: &View,
        defer: bool,
    ) {
        let st = &self.stats.engine;
        st.flows_created.add(1);
        st.flows_live.add(1);
        st.classifying.add(1);
        let addr = if side == Side::Subscriber {
            t.src
        } else {
            t.dst
        };
        let mut f = flows.at(idx);
        let mut bits = 0;
        match view.lookup(addr, t.v6) {
            Some(l) => {
                // Its subscriber × service entry is read when it is
                // decided — often on this packet, right after nDPI's
                // half microsecond: start loading each service's entry
                // now, so that cache miss overlaps nDPI's work.
                let n = self.policy.services.len().min(PREFETCH_SERVICES);
                for s in 0..n as u16 {
                    self.stats
                        .usage
                        .prefetch_key(UsageTable::key(l.slot, l.gen, s));
                }
                f.set_sub(l.slot, l.gen);
                bits |= (l.package as u8 + 1) << U_PKG_SHIFT;
                // The subscriber's total entry: every frame of this flow
                // from the first passes its cap and quota there. Only
                // where something can act on it: a subscriber without a
                // cap or quota, with no classifying limit, costs nothing.
                let needed = l.limited || self.policy.bandwidth.classifying != [0, 0];
                let key = UsageTable::key(l.slot, l.gen, TOTAL);
                match needed.then(|| self.stats.usage.entry(key)) {
                    None => f.set_total(NONE),
                    Some(Some(i)) => {
                        let u = self.stats.usage.at(i);
                        u.flows.add(1);
                        u.active.add(1);
                        let b = self.stats.usage.bucket(i);
                        for d in 0..2 {
                            // A `set` may have changed the cap since.
                            if b.cap[d].get() != l.cap_bytes(d) {
                                b.cap[d].set(l.cap_bytes(d));
                            }
                        }
                        let pkg = l.package as u64 + 1;
                        if b.package.get() != pkg {
                            b.package.set(pkg);
                        }
                        f.set_total(i);
                    }
                    Some(None) => {
                        st.usage_full.add(1);
                        f.set_total(NONE);
                    }
                }
            }
            None => {
                f.set_sub(NONE, 0);
                f.set_total(NONE);
                st.no_subscriber.add(1);
            }
        }
        if side == Side::Subscriber {
            bits |= U_OPENER_UP;
        }
        if self.policy.signatures.payload_candidate(t) {
            bits |= U_SIG_CANDIDATE;
        }
        f.set_user(bits);
        f.set_app(crate::ndpi::UNKNOWN, PENDING);
        if defer {
            f.set_class(DEFERRED);
            return;
        }
        match self.pool.alloc() {
            Some(slot) => f.set_class(slot),
            None => {
                f.set_class(NONE);
                st.classify_busy.add(1);
            }
        }
    }

    /// The nDPI slot of a [`DEFERRED`] flow, taken now (none free:
    /// [`NONE`], counted `classify_busy`). A TCP flow's slot is first fed
    /// the SYN nDPI did not get (rebuilt from the opener tuple, at the
    /// flow's first time), so nDPI sees the flow's packets as before.
    fn take_slot(&mut self, opener: &crate::packet::Tuple, first_ms: u64) -> u32 {
        let Some(slot) = self.pool.alloc() else {
            self.stats.engine.classify_busy.add(1);
            return NONE;
        };
        if opener.proto == crate::packet::TCP {
            let mut buf = [0u8; 60];
            let syn = crate::first_packet::synthetic_syn(opener, &mut buf);
            self.stats.engine.ndpi_packets.add(1);
            // nDPI names nothing from it (`syn_deferrable`).
            let _ = self.ndpi.process(&mut self.pool, slot, syn, first_ms);
        }
        slot
    }

    /// One packet of a flow being classified.
    fn classify(
        &mut self,
        flows: &mut FlowTable,
        idx: usize,
        t: &crate::packet::Tuple,
        payload: &[u8],
        ip: &[u8],
        now_ms: u64,
    ) {
        // No `Arc` clone of the policy here: that is two locked
        // instructions per packet being classified.
        let policy = &self.policy;
        if let Some(i) = policy.signatures.find(t, payload) {
            let service = policy.signatures.get(i).map(|s| s.service).unwrap_or(OTHER);
            let app = policy.protocols + i as u16;
            self.decide(flows, idx, app, service, Source::Signature);
            return;
        }
        let mut f = flows.at(idx);
        let seen = f.packets()[0] + f.packets()[1];
        let candidate = f.user() & U_SIG_CANDIDATE != 0;
        let mut slot = f.class();
        let mut app = f.app();
        // A closing TCP flow gets no more packets worth waiting for.
        let closing = matches!(f.state(), State::FinWait | State::TimeWait | State::Closed);
        if slot == DEFERRED {
            if icmp_family(t) {
                // nDPI's answer without nDPI (or the one it gave before:
                // a named flow keeps its name there too).
                let named = if app != crate::ndpi::UNKNOWN {
                    Some(app)
                } else {
                    crate::first_packet::icmp_app(ip, t)
                };
                match named {
                    Some(id) => {
                        app = id;
                        f.set_app(app, PENDING);
                        // nDPI wants no more of an ICMP flow.
                        if !(candidate && seen < u64::from(self.cfg.signature_depth)) {
                            let service = self.policy.services.of(app);
                            self.decide(flows, idx, app, service, Source::Ndpi);
                            return;
                        }
                    }
                    None => {
                        slot = self.take_slot(&f.opener(), f.first_ms());
                        f.set_class(slot);
                    }
                }
            } else if seen > 1 {
                // The second packet of a flow opened by a bare SYN.
                slot = self.take_slot(&f.opener(), f.first_ms());
                f.set_class(slot);
            }
        }
        if slot != NONE && slot != DEFERRED {
            self.stats.engine.ndpi_packets.add(1);
            let p = self.ndpi.process(&mut self.pool, slot, ip, now_ms);
            if p.id() != crate::ndpi::UNKNOWN {
                app = p.id();
                flows.at(idx).set_app(app, PENDING);
            }
            let sig_wait = candidate && seen < u64::from(self.cfg.signature_depth);
            if app != crate::ndpi::UNKNOWN
                && !sig_wait
                && (closing || !self.ndpi.wants_more(&mut self.pool, slot))
            {
                let service = self.policy.services.of(app);
                self.decide(flows, idx, app, service, Source::Ndpi);
                return;
            }
        }
        if seen >= u64::from(self.cfg.classify_packets) {
            let f = flows.at(idx);
            let (opener, first_ms) = (f.opener(), f.first_ms());
            let (app, source, slot) = self.final_answer(slot, app, &opener, first_ms);
            flows.at(idx).set_class(slot);
            let service = self.policy.services.of(app);
            self.decide(flows, idx, app, service, source);
        }
    }

    /// What a flow is when classification must end now; and its nDPI
    /// slot then (a [`DEFERRED`] flow takes one for nDPI's guess).
    fn final_answer(
        &mut self,
        mut slot: u32,
        app: u16,
        opener: &crate::packet::Tuple,
        first_ms: u64,
    ) -> (u16, Source, u32) {
        if app != crate::ndpi::UNKNOWN {
            return (app, Source::Ndpi, slot);
        }
        if slot == DEFERRED && self.cfg.guess {
            slot = self.take_slot(opener, first_ms);
        }
        if slot != NONE && slot != DEFERRED && self.cfg.guess {
            let (p, _) = self.ndpi.give_up(&mut self.pool, slot, true);
            if p.id() != crate::ndpi::UNKNOWN {
                return (p.id(), Source::Guess, slot);
            }
        }
        (crate::ndpi::UNKNOWN, Source::Unknown, slot)
    }

    /// Records the decision in the flow and the counters.
    fn decide(
        &mut self,
        flows: &mut FlowTable,
        idx: usize,
        app: u16,
        service: u16,
        source: Source,
    ) {
        let mut f = flows.at(idx);
        if f.class() != NONE && f.class() != DEFERRED {
            self.pool.release(f.class());
        }
        self.stats.engine.classifying.sub(1);
        let (sub, gen) = f.sub();
        let usage = self.attribute(
            app,
            service,
            source,
            sub,
            gen,
            f.user(),
            f.packets(),
            f.bytes(),
        );
        f.set_app(app, service);
        f.set_class(usage);
    }

    /// Adds a decided flow to its service, application and subscriber
    /// counters; returns its usage entry ([`NONE`]: none).
    #[allow(clippy::too_many_arguments)]
    fn attribute(
        &self,
        app: u16,
        service: u16,
        source: Source,
        sub: u32,
        gen: u16,
        user: u8,
        packets: [u64; 2],
        bytes: [u64; 2],
    ) -> u32 {
        let st = &self.stats;
        match source {
            Source::Signature => st.engine.by_signature.add(1),
            Source::Ndpi => st.engine.by_ndpi.add(1),
            Source::Guess => st.engine.by_guess.add(1),
            Source::Unknown => st.engine.unknown.add(1),
        }
        // Original direction is upstream when the opener is a subscriber.
        let (up, down) = if user & U_OPENER_UP != 0 {
            (0, 1)
        } else {
            (1, 0)
        };
        let add = |u: &Usage| {
            u.flows.add(1);
            u.active.add(1);
            u.packets[0].add(packets[up]);
            u.packets[1].add(packets[down]);
            u.bytes[0].add(bytes[up]);
            u.bytes[1].add(bytes[down]);
        };
        add(&st.services[usize::from(service)]);
        if let Some(a) = st.apps.get(usize::from(app)) {
            add(a);
        }
        if sub == NONE {
            return NONE;
        }
        match st.usage.entry(UsageTable::key(sub, gen, service)) {
            Some(i) => {
                add(st.usage.at(i));
                let pkg = u64::from((user >> U_PKG_SHIFT) & 3);
                let b = st.usage.bucket(i);
                if b.package.get() != pkg {
                    b.package.set(pkg);
                }
                i
            }
            None => {
                st.engine.usage_full.add(1);
                NONE
            }
        }
    }

    /// A flow left the table (expired, evicted, cleared).
    fn ended(&mut self, f: Flow, why: EndReason) {
        // `self.stats` borrowed, not cloned: an `Arc` clone per ended
        // flow is two locked instructions.
        let (service, usage, app) = if f.service == PENDING {
            // Decide with what is known, then end it.
            let (app, source, slot) = self.final_answer(f.class, f.app, &f.opener, f.first_ms);
            if slot != NONE && slot != DEFERRED {
                self.pool.release(slot);
            }
            self.stats.engine.classifying.sub(1);
            let service = if app == crate::ndpi::UNKNOWN {
                UNKNOWN
            } else {
                self.policy.services.of(app)
            };
            let usage = self.attribute(
                app, service, source, f.sub, f.sub_gen, f.user, f.packets, f.bytes,
            );
            (service, usage, app)
        } else {
            (f.service, f.class, f.app)
        };
        let st = &*self.stats;
        st.engine.flows_live.sub(1);
        st.engine.flows_ended.add(1);
        if let Some(a) = st.apps.get(usize::from(app)) {
            a.active.sub(1);
        }
        st.services[usize::from(service)].active.sub(1);
        if usage != NONE {
            st.usage.at(usage).active.sub(1);
        }
        if f.total != NONE {
            st.usage.at(f.total).active.sub(1);
        }
        if let Some(q) = &self.export {
            let r = usage_record(&f, app, service, why);
            if q.push(r).is_err() {
                st.engine.export_lost.add(1);
            }
        }
    }
}

/// Why the sweep removed `f`: a closed TCP flow ended, anything else idled.
fn ended_by_timeout(f: &Flow) -> EndReason {
    match f.state {
        State::TimeWait | State::Closed => EndReason::EndOfFlow,
        _ => EndReason::Idle,
    }
}

/// Why the table-full path removed `f` at `now_ms`: timed out, or evicted
/// for room.
fn why_removed(t: &Timeouts, f: &Flow, now_ms: u64) -> EndReason {
    if now_ms.saturating_sub(f.last_ms) >= t.of(f.state) {
        ended_by_timeout(f)
    } else {
        EndReason::LackOfResources
    }
}

/// `f` oriented subscriber ↔ network, with its final application.
fn usage_record(f: &Flow, app: u16, service: u16, end: EndReason) -> UsageRecord {
    let o = &f.opener;
    let opener_up = f.user & U_OPENER_UP != 0;
    let (up, down) = if opener_up { (0, 1) } else { (1, 0) };
    let (sa, sp, na, np) = if opener_up {
        (o.src, o.sport, o.dst, o.dport)
    } else {
        (o.dst, o.dport, o.src, o.sport)
    };
    UsageRecord {
        subscriber_addr: sa,
        network_addr: na,
        subscriber_port: sp,
        network_port: np,
        proto: o.proto,
        v6: o.v6,
        app,
        service,
        sub: f.sub,
        sub_gen: f.sub_gen,
        packets: [f.packets[up], f.packets[down]],
        bytes: [f.bytes[up], f.bytes[down]],
        first_ms: f.first_ms,
        last_ms: f.last_ms,
        end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ndpi::ids;
    use crate::packet::{build, ACK, FIN, RST, SYN, TCP, UDP};
    use crate::signature::Pattern;
    use crate::subscriber::{Package, Prefix, Subscriber, SubscriberDb};

    const SUB: [u8; 4] = [10, 0, 0, 1];
    const SRV: [u8; 4] = [192, 0, 2, 10];

    /// The test policy plus service "custom": the UDP/7000 signature
    /// "probe"; and that service's id.
    fn probe_policy() -> (Policy, u16) {
        let sig = Signature {
            name: "probe".into(),
            service: 0,
            protocol: Some(UDP),
            ports: Some((7000, 7000)),
            addresses: None,
            payload: None,
        };
        let pol = (*policy(vec![SignatureSpec {
            signature: sig,
            service: "custom".into(),
        }]))
        .clone();
        let custom = pol.services.id("custom").unwrap();
        (pol, custom)
    }

    fn policy(sigs: Vec<SignatureSpec>) -> Arc<Policy> {
        let n = Ndpi::new().unwrap();
        let services = vec![
            ("web".to_string(), vec!["HTTP".to_string()]),
            ("secure-web".to_string(), vec!["TLS".to_string()]),
            ("dns".to_string(), vec!["DNS".to_string()]),
            ("custom".to_string(), vec![]),
        ];
        Arc::new(Policy::compile(&n, &services, sigs).unwrap())
    }

    fn db() -> SubscriberDb {
        let mut db = SubscriberDb::new(10);
        db.upsert(
            Subscriber {
                id: "alice".into(),
                package: Package::Gold,
                quota_bytes: None,
                prefixes: vec![Prefix::parse("10.0.0.1").unwrap()],
                limits: Default::default(),
            },
            false,
        )
        .unwrap();
        db.publish();
        db
    }

    /// A TCP connection: handshake, request, response, close.
    fn tcp_session(
        e: &mut Engine,
        v: &View,
        sport: u16,
        dport: u16,
        req: &[u8],
        resp: &[u8],
        t0: u64,
    ) {
        let up = |flags, pl: &[u8]| build::v4(TCP, SUB, SRV, sport, dport, flags, pl);
        let down = |flags, pl: &[u8]| build::v4(TCP, SRV, SUB, dport, sport, flags, pl);
        e.process(&up(SYN, b""), Side::Subscriber, v, t0);
        e.process(&down(SYN | ACK, b""), Side::Network, v, t0 + 1);
        e.process(&up(ACK, b""), Side::Subscriber, v, t0 + 2);
        e.process(&up(ACK, req), Side::Subscriber, v, t0 + 3);
        e.process(&down(ACK, resp), Side::Network, v, t0 + 4);
        e.process(&up(FIN | ACK, b""), Side::Subscriber, v, t0 + 5);
        e.process(&down(FIN | ACK, b""), Side::Network, v, t0 + 6);
    }

    const GET: &[u8] =
        b"GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";
    const OK: &[u8] =
        b"HTTP/1.1 200 OK\r\nServer: SimpleHTTP/0.6 Python/3.11\r\nContent-Length: 2\r\n\r\nhi";

    /// A TCP segment with real sequence numbers (`build` leaves them 0).
    #[allow(clippy::too_many_arguments)]
    fn seg(
        v6: bool,
        src: [u8; 4],
        dst: [u8; 4],
        sp: u16,
        dp: u16,
        flags: u8,
        seq: u32,
        ack: u32,
        pl: &[u8],
    ) -> Vec<u8> {
        let (mut f, tcp) = if v6 {
            let a = |x: [u8; 4]| 0x2001_0db8u128 << 96 | u128::from(u32::from_be_bytes(x));
            (build::v6(TCP, a(src), a(dst), sp, dp, flags, pl), 54)
        } else {
            (build::v4(TCP, src, dst, sp, dp, flags, pl), 34)
        };
        f[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        f[tcp + 8..tcp + 12].copy_from_slice(&ack.to_be_bytes());
        f
    }

    /// A TCP connection from `client` to `server` (the subscriber is
    /// `SUB`, on either end): handshake, `msgs` (from the client?,
    /// payload) with the sequence numbers a real stack would use, and
    /// FINs both ways when `close`.
    #[allow(clippy::too_many_arguments)]
    fn conn(
        e: &mut Engine,
        v: &View,
        v6: bool,
        sub_is_client: bool,
        sp: u16,
        dp: u16,
        msgs: &[(bool, &[u8])],
        close: bool,
        t0: u64,
    ) {
        let (c, s) = if sub_is_client {
            (SUB, SRV)
        } else {
            (SRV, SUB)
        };
        let side = |from_client: bool| {
            if from_client == sub_is_client {
                Side::Subscriber
            } else {
                Side::Network
            }
        };
        let (mut cs, mut ss) = (1_000u32, 7_000_000u32);
        let mut t = t0;
        let mut send = |e: &mut Engine,
                        from_client: bool,
                        flags: u8,
                        pl: &[u8],
                        cs: &mut u32,
                        ss: &mut u32| {
            let f = if from_client {
                seg(
                    v6,
                    c,
                    s,
                    sp,
                    dp,
                    flags,
                    *cs,
                    if flags & ACK != 0 { *ss } else { 0 },
                    pl,
                )
            } else {
                seg(v6, s, c, dp, sp, flags, *ss, *cs, pl)
            };
            let n = pl.len() as u32 + u32::from(flags & (SYN | FIN) != 0);
            if from_client {
                *cs = cs.wrapping_add(n);
            } else {
                *ss = ss.wrapping_add(n);
            }
            e.process(&f, side(from_client), v, t);
            t += 1;
        };
        send(e, true, SYN, b"", &mut cs, &mut ss);
        send(e, false, SYN | ACK, b"", &mut cs, &mut ss);
        send(e, true, ACK, b"", &mut cs, &mut ss);
        for (from_client, pl) in msgs {
            send(e, *from_client, ACK, pl, &mut cs, &mut ss);
        }
        if close {
            send(e, true, FIN | ACK, b"", &mut cs, &mut ss);
            send(e, false, FIN | ACK, b"", &mut cs, &mut ss);
        }
    }

    /// A TLS 1.2 record carrying a ClientHello for `sni`.
    fn client_hello(sni: &str) -> Vec<u8> {
        let name = sni.as_bytes();
        let mut sni_ext = vec![0, 0];
        let list = 3 + name.len();
        sni_ext.extend_from_slice(&((list + 2) as u16).to_be_bytes());
        sni_ext.extend_from_slice(&(list as u16).to_be_bytes());
        sni_ext.push(0);
        sni_ext.extend_from_slice(&(name.len() as u16).to_be_bytes());
        sni_ext.extend_from_slice(name);
        let mut body = vec![3, 3];
        body.extend_from_slice(&[0x42; 32]);
        body.push(0);
        body.extend_from_slice(&[0, 4, 0x13, 0x01, 0xc0, 0x2f]);
        body.extend_from_slice(&[1, 0]);
        body.extend_from_slice(&(sni_ext.len() as u16).to_be_bytes());
        body.extend_from_slice(&sni_ext);
        let mut hs = vec![1];
        hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&body);
        let mut rec = vec![0x16, 3, 1];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    /// ICMP over IPv4 (`build::v4` puts type and code where the ports
    /// go) with an echo identifier.
    fn icmp(src: [u8; 4], dst: [u8; 4], ty: u8, id: u16) -> Vec<u8> {
        let mut f = build::v4(
            crate::packet::ICMP,
            src,
            dst,
            u16::from(ty) << 8,
            0,
            0,
            &[7; 24],
        );
        f[38..40].copy_from_slice(&id.to_be_bytes());
        f
    }

    /// Everything the engine counted (apps by name, services, engine
    /// counters but nDPI's packets, the subscriber's entries) and the
    /// usage records of the flows it ended.
    fn everything(e: &Engine, q: &UsageQueue, db: &SubscriberDb) -> Vec<String> {
        let s = e.stats();
        let p = e.policy();
        let mut out = Vec::new();
        let g = |c: &crate::counter::Counter| c.get();
        let u = |u: &Usage| {
            format!(
                "flows {} active {} packets {:?} bytes {:?} dropped {:?}",
                g(&u.flows),
                g(&u.active),
                [g(&u.packets[0]), g(&u.packets[1])],
                [g(&u.bytes[0]), g(&u.bytes[1])],
                [g(&u.dropped_packets[0]), g(&u.dropped_packets[1])]
            )
        };
        for (i, a) in s.apps.iter().enumerate() {
            if g(&a.flows) != 0 || g(&a.packets[0]) + g(&a.packets[1]) != 0 {
                out.push(format!("app {}: {}", p.app_name(i as u16), u(a)));
            }
        }
        for i in 0..p.services.len() {
            out.push(format!("service {i}: {}", u(&s.services[i])));
        }
        let c = &s.engine;
        out.push(format!(
            "packets {} created {} ended {} live {} classifying {} busy {} sig {} ndpi {} guess {} unknown {} no-sub {} usage-full {}",
            g(&c.packets),
            g(&c.flows_created),
            g(&c.flows_ended),
            g(&c.flows_live),
            g(&c.classifying),
            g(&c.classify_busy),
            g(&c.by_signature),
            g(&c.by_ndpi),
            g(&c.by_guess),
            g(&c.unknown),
            g(&c.no_subscriber),
            g(&c.usage_full)
        ));
        let (_, link) = db.get("alice").unwrap();
        for sv in 0..p.services.len() as u16 {
            if let Some(x) = s.usage.find(UsageTable::key(link.slot, link.gen, sv)) {
                out.push(format!("alice service {sv}: {}", u(x)));
            }
        }
        let mut recs: Vec<String> = std::iter::from_fn(|| q.pop())
            .map(|r| {
                format!(
                    "record {} {}:{} {} app {} service {} packets {:?} bytes {:?} {:?}",
                    r.proto,
                    r.network_addr,
                    r.network_port,
                    r.subscriber_port,
                    p.app_name(r.app),
                    r.service,
                    r.packets,
                    r.bytes,
                    r.end
                )
            })
            .collect();
        recs.sort();
        out.extend(recs);
        out
    }

    /// The first-packet shortcuts ([`crate::first_packet`]: ICMP named
    /// without nDPI, a bare SYN's nDPI call deferred to the flow's second
    /// packet) change nothing but nDPI's work: the same traffic with them
    /// and without gives the same applications, services, counters and
    /// usage records — HTTP, TLS, SSH (the server speaks first),
    /// BitTorrent, over IPv4 and IPv6, opened from either side; SYNs
    /// never answered, retransmitted, reset or to a port nDPI names from
    /// the SYN; ICMP echo, unreachable and a later fragment — with
    /// nDPI's guess off and on. With them nDPI gets fewer packets and an
    /// unanswered SYN holds no nDPI slot.
    #[test]
    fn first_packet_shortcuts_change_nothing_but_ndpi_work() {
        let p = policy(vec![]);
        let db = db();
        let v = db.published().load_full();
        let bt = {
            let mut h = b"\x13BitTorrent protocol".to_vec();
            h.extend_from_slice(&[0; 8]);
            h.extend_from_slice(&[0x11; 20]);
            h.extend_from_slice(b"-TR3000-abcdefghijkl");
            h
        };
        let hello = client_hello("www.example.org");
        let run = |shortcuts: bool, guess: bool| {
            let mut e = Engine::new(
                EngineConfig {
                    flows: 256,
                    classify_slots: 64,
                    usage_entries: 256,
                    guess,
                    ..EngineConfig::default()
                },
                p.clone(),
            )
            .unwrap();
            e.set_first_packet_shortcuts(shortcuts);
            let q = Arc::new(UsageQueue::new(256));
            e.set_usage_export(q.clone());
            for v6 in [false, true] {
                let o = if v6 { 100 } else { 0 };
                conn(
                    &mut e,
                    &v,
                    v6,
                    true,
                    40000 + o,
                    8080,
                    &[(true, GET), (false, OK)],
                    true,
                    10,
                );
                conn(
                    &mut e,
                    &v,
                    v6,
                    true,
                    40001 + o,
                    443,
                    &[(true, &hello)],
                    true,
                    20,
                );
                conn(
                    &mut e,
                    &v,
                    v6,
                    true,
                    40002 + o,
                    22,
                    &[
                        (false, b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"),
                        (true, b"SSH-2.0-OpenSSH_9.2p1\r\n"),
                    ],
                    false,
                    30,
                );
                conn(
                    &mut e,
                    &v,
                    v6,
                    true,
                    40003 + o,
                    51413,
                    &[(true, &bt), (false, &bt)],
                    false,
                    40,
                );
                // The subscriber is the server.
                conn(
                    &mut e,
                    &v,
                    v6,
                    false,
                    40004 + o,
                    80,
                    &[(true, GET), (false, OK)],
                    true,
                    50,
                );
                // An unanswered SYN, one sent three times, one to a port
                // nDPI names from the SYN (Targus Getdata, 5201), one reset.
                let syn = |sp, dp| seg(v6, SUB, SRV, sp, dp, SYN, 1, 0, b"");
                e.process(&syn(40005 + o, 80), Side::Subscriber, &v, 60);
                for t in 0..3 {
                    e.process(&syn(40006 + o, 8080), Side::Subscriber, &v, 61 + t);
                }
                e.process(&syn(40007 + o, 5201), Side::Subscriber, &v, 65);
                e.process(&syn(40008 + o, 443), Side::Subscriber, &v, 66);
                e.process(
                    &seg(v6, SRV, SUB, 443, 40008 + o, RST | ACK, 0, 2, b""),
                    Side::Network,
                    &v,
                    67,
                );
            }
            // ICMP: an echo exchange, an unreachable, a later fragment.
            e.process(&icmp(SUB, SRV, 8, 77), Side::Subscriber, &v, 70);
            e.process(&icmp(SRV, SUB, 0, 77), Side::Network, &v, 71);
            e.process(&icmp(SRV, SUB, 3, 0), Side::Network, &v, 72);
            let mut frag = icmp(SUB, [192, 0, 2, 11], 8, 78);
            frag[20] = 0;
            frag[21] = 0x40;
            e.process(&frag, Side::Subscriber, &v, 73);
            let ndpi_live = e.classify_slots().0;
            // End every flow (still classified ones are decided now).
            e.sweep(10_000_000, 1024);
            let ndpi = e.stats().engine.ndpi_packets.get();
            (everything(&e, &q, &db), ndpi, ndpi_live)
        };
        for guess in [false, true] {
            let (with, ndpi_with, live_with) = run(true, guess);
            let (without, ndpi_without, live_without) = run(false, guess);
            assert_eq!(with, without, "guess {guess}");
            assert!(
                ndpi_with < ndpi_without,
                "guess {guess}: nDPI got {ndpi_with} packets with the shortcuts, {ndpi_without} without"
            );
            assert!(live_with < live_without, "{live_with} vs {live_without}");
            let has = |what: &str, n: usize| {
                let k = with
                    .iter()
                    .filter(|l| l.starts_with("record") && l.contains(what))
                    .count();
                assert_eq!(k, n, "{what} in {with:#?}");
            };
            // Named as before deferring the SYN (both address families).
            if !guess {
                has("app HTTP ", 4);
                has("app TLS ", 2);
                has("app SSH ", 2);
                has("app BitTorrent ", 2);
                // nDPI's Targus rule is IPv4 only.
                has("app TargusDataspeed ", 1);
                has("app ICMP ", 2);
                has("app Unknown ", 8);
            }
        }
    }

    /// The batch prefetch is only a hint: the same frames with and
    /// without it give the same flows and counters (decided flows, flows
    /// being classified, unknown flows and garbage in one batch).
    #[test]
    fn batch_prefetch_changes_nothing() {
        let p = policy(vec![]);
        let cfg = EngineConfig {
            flows: 64,
            classify_slots: 4,
            usage_entries: 64,
            classify_packets: 2,
            ..EngineConfig::default()
        };
        let db = db();
        let v = db.published().load_full();
        let mut frames: Vec<Vec<u8>> = (0..6u16)
            .map(|i| build::v4(UDP, SUB, SRV, 4000 + i, 53, 0, b"x"))
            .collect();
        frames.push(build::v4(UDP, [10, 9, 9, 9], SRV, 1, 2, 0, b"y"));
        frames.push(vec![0u8; 7]);
        let run = |prefetch: bool| {
            let mut e = Engine::new(cfg, p.clone()).unwrap();
            for round in 0..4 {
                if prefetch {
                    e.prefetch(frames.iter().map(|f| (f.as_slice(), Side::Subscriber)), &v);
                }
                for f in &frames {
                    e.process(f, Side::Subscriber, &v, round);
                }
            }
            let s = e.stats();
            let u = &s.services[usize::from(UNKNOWN)];
            (
                e.flows().len(),
                s.engine.flows_created.get(),
                s.engine.unknown.get(),
                s.engine.not_ip.get(),
                u.packets[0].get(),
                s.usage.len(),
            )
        };
        let with = run(true);
        assert_eq!(with, run(false));
        assert_eq!(with.0, 7);
        assert!(with.2 > 0 && with.4 > 0, "{with:?}");
    }

    #[test]
    fn http_flow_is_counted_per_service_and_subscriber() {
        let p = policy(vec![]);
        let mut e = Engine::new(
            EngineConfig {
                flows: 64,
                classify_slots: 4,
                usage_entries: 64,
                ..EngineConfig::default()
            },
            p.clone(),
        )
        .unwrap();
        let db = db();
        let v = db.published().load_full();
        tcp_session(&mut e, &v, 40000, 8080, GET, OK, 0);
        let s = e.stats();
        let web = p.services.id("web").unwrap();
        let u = &s.services[usize::from(web)];
        assert_eq!(u.flows.get(), 1);
        assert_eq!(u.active.get(), 1);
        assert_eq!(u.packets[0].get() + u.packets[1].get(), 7);
        assert_eq!(u.packets[0].get(), 4, "upstream = from the subscriber");
        assert_eq!(s.engine.by_ndpi.get(), 1);
        assert_eq!(e.classify_slots().0, 0, "nDPI slot freed on decision");
        let (_, link) = db.get("alice").unwrap();
        let su = s
            .usage
            .find(UsageTable::key(link.slot, link.gen, web))
            .unwrap();
        assert_eq!(su.flows.get(), 1);
        assert_eq!(su.packets[1].get(), 3);
        assert_eq!(s.apps[usize::from(ids::HTTP)].flows.get(), 1);
        // Expiry ends the flow: active drops, totals stay.
        e.sweep(10_000_000, 100);
        assert_eq!(u.active.get(), 0);
        assert_eq!(su.active.get(), 0);
        assert_eq!(u.flows.get(), 1);
        assert_eq!(s.engine.flows_live.get(), 0);
    }

    #[test]
    fn ended_flows_become_usage_records_oriented_to_the_subscriber() {
        let p = policy(vec![]);
        let cfg = EngineConfig {
            flows: 16,
            classify_slots: 4,
            usage_entries: 64,
            ..EngineConfig::default()
        };
        let mut e = Engine::new(cfg, p.clone()).unwrap();
        let q = Arc::new(UsageQueue::new(2));
        e.set_usage_export(q.clone());
        let db = db();
        let v = db.published().load_full();
        // Opened by the subscriber, closed by both FINs.
        tcp_session(&mut e, &v, 40000, 8080, GET, OK, 1000);
        // Opened from the network side (the subscriber is the server).
        let down = build::v4(UDP, SRV, SUB, 53, 5353, 0, b"xxxxxxxxxxxx");
        let up = build::v4(UDP, SUB, SRV, 5353, 53, 0, b"yy");
        e.process(&down, Side::Network, &v, 2000);
        e.process(&up, Side::Subscriber, &v, 2001);
        e.process(&up, Side::Subscriber, &v, 2002);
        assert!(q.is_empty(), "nothing ends while live");
        e.sweep(10_000_000, 100);
        let mut recs: Vec<UsageRecord> = std::iter::from_fn(|| q.pop()).collect();
        recs.sort_by_key(|r| r.proto);
        assert_eq!(recs.len(), 2);
        let (link_slot, link_gen) = {
            let (_, l) = db.get("alice").unwrap();
            (l.slot, l.gen)
        };
        let http = recs[0];
        assert_eq!(http.proto, TCP);
        assert_eq!(http.subscriber_addr, u128::from(u32::from_be_bytes(SUB)));
        assert_eq!(http.network_addr, u128::from(u32::from_be_bytes(SRV)));
        assert_eq!((http.subscriber_port, http.network_port), (40000, 8080));
        assert_eq!(http.packets, [4, 3]);
        assert_eq!(http.app, ids::HTTP);
        assert_eq!(http.service, p.services.id("web").unwrap());
        assert_eq!((http.sub, http.sub_gen), (link_slot, link_gen));
        assert_eq!(http.end, EndReason::EndOfFlow);
        assert_eq!((http.first_ms, http.last_ms), (1000, 1006));
        let dns = recs[1];
        assert_eq!((dns.subscriber_port, dns.network_port), (5353, 53));
        assert_eq!(
            dns.packets,
            [2, 1],
            "up = from the subscriber, though the network opened it"
        );
        assert!(dns.bytes[1] > dns.bytes[0] / 2);
        assert_eq!(dns.end, EndReason::Idle);
        // A full queue loses records and counts them; the engine goes on.
        for sport in 0..3u16 {
            let f = build::v4(UDP, SUB, SRV, 6000 + sport, 9, 0, b"z");
            e.process(&f, Side::Subscriber, &v, 20_000_000);
        }
        e.clear(20_000_001);
        assert_eq!(q.len(), 2);
        assert_eq!(e.stats().engine.export_lost.get(), 1);
        assert!(std::iter::from_fn(|| q.pop()).all(|r| r.end == EndReason::Forced));
    }

    #[test]
    fn long_flows_leave_interim_records_at_the_active_timeout() {
        let p = policy(vec![]);
        let cfg = EngineConfig {
            flows: 16,
            classify_slots: 4,
            usage_entries: 64,
            ..EngineConfig::default()
        };
        let mut e = Engine::new(cfg, p.clone()).unwrap();
        let q = Arc::new(UsageQueue::new(64));
        e.set_usage_export(q.clone());
        e.set_active_timeout(1000);
        let v = db().published().load_full();
        let q1 = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
        let up = build::v4(UDP, SUB, SRV, 5353, 53, 0, q1);
        let down = build::v4(UDP, SRV, SUB, 53, 5353, 0, q1);
        // 3.5 s of a DNS-looking flow: a query and an answer every 100 ms.
        for i in 0..35u64 {
            e.process(&up, Side::Subscriber, &v, 1000 + i * 100);
            e.process(&down, Side::Network, &v, 1000 + i * 100 + 1);
            e.sweep(1000 + i * 100 + 2, 16);
        }
        let interim: Vec<UsageRecord> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(interim.len(), 3, "{interim:?}");
        assert!(interim.iter().all(|r| r.end == EndReason::ActiveTimeout));
        assert_eq!(e.stats().engine.interim_records.get(), 3);
        // Back to back: each starts where the last one was cut.
        assert_eq!(interim[0].first_ms, 1000);
        assert_eq!(interim[1].first_ms, interim[0].last_ms + 1);
        assert_eq!(interim[0].app, ids::DNS);
        e.sweep(10_000_000, 16);
        let last = q.pop().unwrap();
        assert_eq!(last.end, EndReason::Idle);
        let all: Vec<UsageRecord> = interim.iter().copied().chain([last]).collect();
        let sum = |d: usize| all.iter().map(|r| r.packets[d]).sum::<u64>();
        assert_eq!(
            (sum(0), sum(1)),
            (35, 35),
            "every packet in exactly one record"
        );
        let bytes: u64 = all.iter().map(|r| r.bytes[0] + r.bytes[1]).sum();
        assert_eq!(bytes, 35 * (up.len() + down.len()) as u64);
        // Without export, no interim records and counters never restart.
        let mut e = Engine::new(cfg, p).unwrap();
        e.set_active_timeout(1000);
        for i in 0..30u64 {
            e.process(&up, Side::Subscriber, &v, 1000 + i * 100);
            e.sweep(1000 + i * 100 + 2, 16);
        }
        assert_eq!(e.stats().engine.interim_records.get(), 0);
        e.flows().for_each(&mut |f| assert_eq!(f.packets[0], 30));
    }

    #[test]
    fn signature_overrides_ndpi_and_unknown_is_unknown() {
        let sig = Signature {
            name: "ly-probe".into(),
            service: 0,
            protocol: Some(TCP),
            ports: Some((8080, 8080)),
            addresses: None,
            payload: Some(Pattern {
                offset: 0,
                bytes: b"HTTP/1.1 200".to_vec(),
            }),
        };
        let p = policy(vec![SignatureSpec {
            signature: sig,
            service: "custom".into(),
        }]);
        let mut e = Engine::new(
            EngineConfig {
                flows: 64,
                classify_slots: 4,
                classify_packets: 6,
                ..EngineConfig::default()
            },
            p.clone(),
        )
        .unwrap();
        let v = db().published().load_full();
        // nDPI names HTTP on the request; the signature matches the
        // response (packet 5), within the signature depth: it wins.
        tcp_session(&mut e, &v, 40001, 8080, GET, OK, 0);
        let s = e.stats();
        assert_eq!(
            s.services[usize::from(p.services.id("custom").unwrap())]
                .flows
                .get(),
            1
        );
        assert_eq!(
            s.services[usize::from(p.services.id("web").unwrap())]
                .flows
                .get(),
            0
        );
        assert_eq!(s.engine.by_signature.get(), 1);
        assert_eq!(p.app_name(p.protocols), "ly-probe");
        assert_eq!(p.service_of(p.protocols), p.services.id("custom").unwrap());
        assert_eq!(p.service_of(ids::HTTP), p.services.id("web").unwrap());
        // Random bytes on a high port: unknown after the budget.
        for i in 0..8u8 {
            let junk = [i.wrapping_mul(77), 0x13, 0x37, i, 0xfe, 0xed, 0x99, 0x42];
            e.process(
                &build::v4(UDP, SUB, SRV, 33333, 44444, 0, &junk),
                Side::Subscriber,
                &v,
                100 + u64::from(i),
            );
        }
        assert_eq!(s.services[usize::from(UNKNOWN)].flows.get(), 1);
        assert_eq!(s.engine.unknown.get(), 1);
        assert_eq!(s.services[usize::from(UNKNOWN)].packets[0].get(), 8);
    }

    #[test]
    fn flows_ending_while_classifying_are_decided_and_unknown_subscribers_counted() {
        let p = policy(vec![]);
        let mut e = Engine::new(
            EngineConfig {
                flows: 64,
                classify_slots: 1,
                ..EngineConfig::default()
            },
            p.clone(),
        )
        .unwrap();
        let v = db().published().load_full();
        let q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
        // From a host that is no subscriber.
        e.process(
            &build::v4(UDP, [10, 9, 9, 9], SRV, 5555, 53, 0, q),
            Side::Subscriber,
            &v,
            0,
        );
        // Second flow: the only nDPI slot is taken (DNS wants the answer).
        e.process(
            &build::v4(UDP, SUB, SRV, 5556, 53, 0, q),
            Side::Subscriber,
            &v,
            0,
        );
        let s = e.stats();
        assert_eq!(s.engine.no_subscriber.get(), 1);
        assert_eq!(s.engine.classify_busy.get(), 1);
        e.clear(1);
        let dns = usize::from(p.services.id("dns").unwrap());
        assert_eq!(
            s.services[dns].flows.get(),
            1,
            "tentative nDPI answer kept at the end"
        );
        assert_eq!(s.services[usize::from(UNKNOWN)].flows.get(), 1);
        assert_eq!(s.services[dns].active.get() + s.services[0].active.get(), 0);
        assert_eq!(e.classify_slots().0, 0);
        assert_eq!(s.engine.classifying.get(), 0);
    }

    #[test]
    fn controlled_service_drops_over_rate_and_quota_blocks() {
        let (mut pol, custom) = probe_policy();
        pol.bandwidth.limits[usize::from(custom)] = [80_000, 0]; // 10 kB/s up
        let mut e = Engine::new(
            EngineConfig {
                flows: 64,
                classify_slots: 4,
                usage_entries: 64,
                ..EngineConfig::default()
            },
            Arc::new(pol),
        )
        .unwrap();
        // (A quota, so that its frames pass its total entry.)
        let db = capped_db(Default::default(), Some(1 << 40));
        let v = db.published().load_full();
        let f = build::v4(UDP, SUB, SRV, 4000, 7000, 0, &[0u8; 100]);
        let len = f.len() as u64;
        let mut passed = 0;
        // 200 packets 1 ms apart: 0.2 s of far more than 10 kB/s.
        for i in 0..200u64 {
            if e.process_us(&f, Side::Subscriber, &v, 1_000 + i * 1000) == Verdict::Pass {
                passed += len;
            }
        }
        // Not rated yet by a control thread: gold's weight × the initial
        // level (a tenth of the limit per weight unit) = the limit.
        assert!(passed <= 10_000 / 5 + 3_028 + 2 * len, "{passed}");
        assert!(passed >= 10_000 / 5, "{passed}");
        let s = e.stats();
        let u = &s.services[usize::from(custom)];
        assert_eq!(u.bytes[0].get(), passed);
        assert_eq!(u.packets[0].get() + u.dropped_packets[0].get(), 200);
        // Downstream has no controller: passes.
        let back = build::v4(UDP, SRV, SUB, 7000, 4000, 0, &[0u8; 100]);
        for i in 0..50u64 {
            assert_eq!(
                e.process_us(&back, Side::Network, &v, 300_000 + i),
                Verdict::Pass
            );
        }
        // Quota used up (drop): everything of the subscriber is dropped,
        // the uncontrolled direction too.
        let (_, link) = db.get("alice").unwrap();
        let i = s
            .usage
            .entry(UsageTable::key(link.slot, link.gen, TOTAL))
            .unwrap();
        s.usage.bucket(i).quota_out.set(1);
        assert_eq!(
            e.process_us(&back, Side::Network, &v, 400_000),
            Verdict::Drop
        );
        assert_eq!(
            e.process_us(&f, Side::Subscriber, &v, 10_000_000),
            Verdict::Drop
        );
        assert_eq!(s.engine.quota_dropped.get(), 2);
        // A subscriber without an entry (no subscriber) is passed and counted.
        let other = build::v4(UDP, [10, 9, 9, 9], SRV, 4000, 7000, 0, &[0u8; 100]);
        for i in 0..100u64 {
            assert_eq!(
                e.process_us(&other, Side::Subscriber, &v, 20_000_000 + i),
                Verdict::Pass
            );
        }
        assert_eq!(s.engine.uncontrolled_packets.get(), 99);
    }

    /// Runs `frame_of(i)` from the subscriber side every `gap_us` for
    /// `secs` with a control thread ticking every 20 ms; returns the
    /// bytes/s passed in the second half.
    fn drive(
        e: &mut Engine,
        db: &mut SubscriberDb,
        secs: u64,
        gap_us: u64,
        frame_of: &dyn Fn(u64) -> Vec<u8>,
    ) -> f64 {
        struct Book<'a>(&'a mut SubscriberDb);
        impl crate::bandwidth::QuotaBook for Book<'_> {
            fn add_used(
                &mut self,
                slot: u32,
                gen: u16,
                bytes: u64,
            ) -> Option<crate::bandwidth::QuotaState> {
                let out = self.0.add_used(slot, gen, bytes)?;
                Some(crate::bandwidth::QuotaState {
                    out,
                    rate_bps: self.0.by_slot(slot, gen)?.limits.quota_rate_bps,
                })
            }
        }
        let stats = vec![e.stats()];
        let levels = Arc::new(crate::bandwidth::Levels::new(&e.policy().bandwidth));
        e.set_levels(levels.clone());
        let mut c = crate::bandwidth::Controller::new(e.policy().bandwidth.clone(), &stats);
        let v = db.published().load_full();
        let end = secs * 1_000_000;
        let (mut t, mut i, mut passed) = (1_000u64, 0u64, 0u64);
        let mut next_tick = 20_000;
        while t < end {
            let f = frame_of(i);
            if e.process_us(&f, Side::Subscriber, &v, t) == Verdict::Pass && t >= end / 2 {
                passed += f.len() as u64;
            }
            if t >= next_tick {
                c.tick(&stats, &levels, 20_000, &mut Book(db));
                e.sweep(t / 1000, 64);
                next_tick += 20_000;
            }
            t += gap_us;
            i += 1;
        }
        passed as f64 / (secs as f64 / 2.0)
    }

    fn capped_db(limits: crate::subscriber::Limits, quota: Option<u64>) -> SubscriberDb {
        let mut db = SubscriberDb::new(10);
        db.upsert(
            Subscriber {
                id: "alice".into(),
                package: Package::Gold,
                quota_bytes: quota,
                prefixes: vec![Prefix::parse("10.0.0.1").unwrap()],
                limits,
            },
            false,
        )
        .unwrap();
        db.publish();
        db
    }

    #[test]
    fn flows_that_never_classify_are_held_to_the_classifying_limit_and_the_cap() {
        // A new flow every 4 frames (never decided: each stays pending),
        // 1,000 frames of 142 bytes per second: 142 kB/s offered.
        let junk = |i: u64| {
            let mut pl = [0u8; 100];
            // (A first byte of 0x13: not RTP's version 2, which nDPI
            // would name.)
            pl[..8].copy_from_slice(&[
                0x13,
                0x37,
                (i * 77) as u8,
                (i >> 3) as u8,
                0xfe,
                0xed,
                0x99,
                0x42,
            ]);
            build::v4(UDP, SUB, SRV, 20_000 + (i / 4) as u16, 44_444, 0, &pl)
        };
        let cfg = EngineConfig {
            flows: 1 << 12,
            classify_slots: 1 << 12,
            usage_entries: 64,
            ..EngineConfig::default()
        };
        // The subscriber's own cap: 400 kbit/s = 50 kB/s.
        let mut db = capped_db(
            crate::subscriber::Limits {
                cap_bps: [400_000, 0],
                quota_rate_bps: None,
                quota_period_s: None,
            },
            None,
        );
        let mut e = Engine::new(cfg, policy(vec![])).unwrap();
        let r = drive(&mut e, &mut db, 4, 1000, &junk);
        assert!((r - 50_000.0).abs() < 0.03 * 50_000.0, "{r}");
        let s = e.stats();
        assert!(s.engine.cap_dropped.get() > 1000);
        assert_eq!(
            s.engine.by_ndpi.get() + s.engine.unknown.get(),
            0,
            "never decided"
        );
        let (_, l) = db.get("alice").unwrap();
        let t = s.usage.find(UsageTable::key(l.slot, l.gen, TOTAL)).unwrap();
        assert_eq!(t.packets[0].get() + t.dropped_packets[0].get(), 4000 - 1);
        // No cap, a classifying limit of 240 kbit/s = 30 kB/s instead.
        let mut p = (*policy(vec![])).clone();
        p.bandwidth.classifying = [240_000, 0];
        let mut db = capped_db(Default::default(), None);
        let mut e = Engine::new(cfg, Arc::new(p)).unwrap();
        let r = drive(&mut e, &mut db, 4, 1000, &junk);
        assert!((r - 30_000.0).abs() < 0.03 * 30_000.0, "{r}");
        assert!(e.stats().engine.classifying_dropped.get() > 1000);
        assert_eq!(e.stats().engine.cap_dropped.get(), 0);
    }

    #[test]
    fn a_subscriber_cap_holds_in_a_controlled_service_and_quota_throttles() {
        let (mut pol, custom) = probe_policy();
        pol.bandwidth.limits[usize::from(custom)] = [8_000_000, 0]; // 1 MB/s
        let pol = Arc::new(pol);
        let cfg = EngineConfig {
            flows: 64,
            classify_slots: 4,
            usage_entries: 64,
            ..EngineConfig::default()
        };
        let f = build::v4(UDP, SUB, SRV, 4000, 7000, 0, &[0u8; 958]);
        assert_eq!(f.len(), 1000);
        // 2 MB/s offered; gold alone would get the whole 1 MB/s, its own
        // cap of 2.4 Mbit/s holds it to 300 kB/s.
        let mut db = capped_db(
            crate::subscriber::Limits {
                cap_bps: [2_400_000, 0],
                quota_rate_bps: Some(800_000),
                quota_period_s: None,
            },
            None,
        );
        let mut e = Engine::new(cfg, pol.clone()).unwrap();
        let r = drive(&mut e, &mut db, 4, 500, &|_| f.clone());
        assert!((r - 300_000.0).abs() < 0.03 * 300_000.0, "{r}");
        assert!(e.stats().engine.cap_dropped.get() > 1000);
        // The same with a quota used up after 0.5 MB: throttled to its own
        // quota-exceeded rate, 800 kbit/s = 100 kB/s.
        let mut db = capped_db(
            crate::subscriber::Limits {
                cap_bps: [2_400_000, 0],
                quota_rate_bps: Some(800_000),
                quota_period_s: None,
            },
            Some(500_000),
        );
        let mut e = Engine::new(cfg, pol).unwrap();
        let r = drive(&mut e, &mut db, 4, 500, &|_| f.clone());
        assert!((r - 100_000.0).abs() < 0.03 * 100_000.0, "{r}");
        assert!(e.stats().engine.quota_dropped.get() > 1000);
    }

    #[test]
    fn full_table_refuses_counts_and_passes() {
        let p = policy(vec![]);
        let mut e = Engine::new(
            EngineConfig {
                flows: 16,
                classify_slots: 16,
                ..EngineConfig::default()
            },
            p,
        )
        .unwrap();
        let v = db().published().load_full();
        for port in 0..20u16 {
            let f = build::v4(UDP, SUB, SRV, 1000 + port, 9, 0, b"x");
            assert_eq!(e.process(&f, Side::Subscriber, &v, 0), Verdict::Pass);
        }
        let s = e.stats();
        assert_eq!(s.engine.refused_full.get(), 4);
        assert_eq!(s.engine.unclassified_packets.get(), 4);
        assert_eq!(s.engine.flows_live.get(), 16);
        e.process(&[0u8; 10], Side::Network, &v, 0);
        assert_eq!(s.engine.not_ip.get(), 1);
    }
}
