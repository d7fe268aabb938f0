//! The services stage: access lists, QoS classification/policing/
//! re-marking and flow accounting, applied to frames the layer-2 and
//! layer-3 stages have decided on.
//!
//! [`Services`] is the compiled, immutable snapshot the control plane
//! publishes (lists and policies shared by reference between the ports and
//! VLANs they are attached to; hit counters per worker inside, each slot
//! with one writer). [`ServiceState`] is a worker's own mutable state:
//! policer buckets and the flow cache. The worker extracts one
//! [`AclKey`] per frame ([`extract_key`]) and reuses it for every check.
//!
//! Order on ingress: port ACL, VLAN ACL, input policy (class, policer,
//! re-mark), flow accounting. On egress, per copy: port ACL, VLAN ACL,
//! output policy re-marking.

use crate::counters::Counter;
use crate::qos::{EgressQueues, QueueSpec, TxSink};
use std::sync::Arc;
use tables::acl::{AclKey, Classifier};
use tables::flow::{FlowCache, FlowKey};
use tables::qos::{Color, TrTcm, TrTcmConfig};
use tables::{MAX_PORTS, MAX_VLANS};

/// Per-worker, single-writer counter slots: `slot(worker, i)`.
pub struct WorkerSlots {
    per_worker: usize,
    c: Box<[Counter]>,
}

impl WorkerSlots {
    pub fn new(workers: usize, per_worker: usize) -> WorkerSlots {
        WorkerSlots {
            per_worker,
            c: (0..workers.max(1) * per_worker)
                .map(|_| Counter::default())
                .collect(),
        }
    }

    #[inline]
    pub fn add(&self, worker: usize, i: usize, n: u64) {
        if let Some(c) = self.c.get(worker * self.per_worker + i) {
            c.add(n);
        }
    }

    /// Sum over workers.
    pub fn total(&self, i: usize) -> u64 {
        self.c
            .iter()
            .skip(i)
            .step_by(self.per_worker.max(1))
            .map(Counter::get)
            .sum()
    }
}

/// Which frames an access list looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclFamily {
    Ipv4,
    Ipv6,
    /// Every frame, layer-2 fields.
    Mac,
}

/// A compiled access list, shared by every port and VLAN it is attached
/// to (each attachment counts its own hits: [`AttachedAcl`]).
pub struct AclList {
    pub name: String,
    pub family: AclFamily,
    /// The rules as classifier lines (`tables::acl::fragment_lines`: a
    /// `permit` that tests L4 fields is two lines).
    pub classifier: Classifier,
    /// Per classifier line: the rule it belongs to.
    pub line_rule: Box<[u32]>,
    /// Per rule: permit?
    pub permit: Box<[bool]>,
    /// Per rule: log matches.
    pub log: Box<[bool]>,
    /// Matches of `log` rules, for the control plane's log writer (full:
    /// the event is dropped, the hit still counted).
    pub log_events: crossbeam_queue::ArrayQueue<AclLogEvent>,
}

impl AclList {
    /// Rules of the list (the implicit deny not included).
    pub fn rules(&self) -> usize {
        self.permit.len()
    }
}

/// Where a list or policy is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachPoint {
    Port(u16),
    Vlan(u16),
}

/// Which way the frames an attachment sees travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// An access list attached to one port or VLAN in one direction, with
/// that attachment's own hit counters (dereferences to the list).
pub struct AttachedAcl {
    pub list: Arc<AclList>,
    pub at: AttachPoint,
    pub dir: Direction,
    /// Per worker: hits of each rule, then the implicit deny.
    pub hits: WorkerSlots,
}

impl std::ops::Deref for AttachedAcl {
    type Target = AclList;
    fn deref(&self) -> &AclList {
        &self.list
    }
}

impl AttachedAcl {
    pub fn new(list: Arc<AclList>, at: AttachPoint, dir: Direction, workers: usize) -> Self {
        let n = list.rules() + 1;
        AttachedAcl {
            list,
            at,
            dir,
            hits: WorkerSlots::new(workers, n),
        }
    }

    /// Decide one frame; counts the hit. True = permitted.
    #[inline]
    fn check(&self, k: &AclKey, worker: usize, port: u16) -> bool {
        let l = &*self.list;
        match l.classifier.lookup(k) {
            Some(line) => {
                let r = l.line_rule.get(line as usize).map_or(0, |&r| r as usize);
                self.hits.add(worker, r, 1);
                let permitted = l.permit.get(r).copied().unwrap_or(false);
                if l.log.get(r).copied().unwrap_or(false) {
                    let _ = l.log_events.push(AclLogEvent {
                        rule: r as u32,
                        permitted,
                        port,
                        key: *k,
                    });
                }
                permitted
            }
            None => {
                self.hits.add(worker, l.rules(), 1);
                false
            }
        }
    }
}

/// One match of a rule with `log: true`.
#[derive(Clone, Copy, Debug)]
pub struct AclLogEvent {
    pub rule: u32,
    pub permitted: bool,
    pub port: u16,
    pub key: AclKey,
}

/// Log events a list buffers between two passes of the log writer.
pub const ACL_LOG_QUEUE: usize = 256;

/// The lists attached to one port or VLAN in one direction (one per type).
#[derive(Clone, Default)]
pub struct AclSet {
    pub v4: Option<Arc<AttachedAcl>>,
    pub v6: Option<Arc<AttachedAcl>>,
    pub mac: Option<Arc<AttachedAcl>>,
}

impl AclSet {
    pub fn is_empty(&self) -> bool {
        self.v4.is_none() && self.v6.is_none() && self.mac.is_none()
    }

    /// True if the frame may pass.
    #[inline]
    pub fn permits(&self, k: &AclKey, worker: usize, port: u16) -> bool {
        if let Some(l) = &self.mac {
            if !l.check(k, worker, port) {
                return false;
            }
        }
        let l = match k.family {
            4 => &self.v4,
            6 => &self.v6,
            _ => return true,
        };
        match l {
            Some(l) => l.check(k, worker, port),
            None => true,
        }
    }

    pub fn lists(&self) -> impl Iterator<Item = &Arc<AttachedAcl>> {
        [&self.mac, &self.v4, &self.v6].into_iter().flatten()
    }
}

/// What a policer does to a frame of one colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorAction {
    Transmit,
    Drop,
    SetDscp(u8),
}

#[derive(Clone, Copy, Debug)]
pub struct PoliceSpec {
    pub rates: TrTcmConfig,
    pub conform: ColorAction,
    pub exceed: ColorAction,
    pub violate: ColorAction,
}

/// One class of a policy.
#[derive(Clone, Debug)]
pub struct ClassSpec {
    pub name: String,
    pub set_dscp: Option<u8>,
    pub set_pcp: Option<u8>,
    pub police: Option<PoliceSpec>,
}

/// Per class counters (indices into [`AttachedPolicy::counters`]).
pub mod class_counter {
    pub const PACKETS: usize = 0;
    pub const BYTES: usize = 1;
    pub const GREEN: usize = 2;
    pub const YELLOW: usize = 3;
    pub const RED: usize = 4;
    pub const DROPPED: usize = 5;
    /// Tail drops of the class's egress queue.
    pub const QUEUE_DROPS: usize = 6;
    pub const N: usize = 7;
}

/// A compiled policy map, shared by the ports it is attached to (each
/// attachment counts its own: [`AttachedPolicy`]).
pub struct Policy {
    pub name: String,
    /// Match lines of all classes, in class order (a line that tests L4
    /// fields does not match non-initial fragments).
    pub classifier: Classifier,
    /// Class of each match line.
    pub line_class: Box<[u16]>,
    /// Classes; the last is `class-default`.
    pub classes: Box<[ClassSpec]>,
    /// Egress queues, one per class (output policies with `queue:`).
    pub queues: Option<Box<[QueueSpec]>>,
}

impl Policy {
    #[inline]
    pub fn classify(&self, k: &AclKey) -> usize {
        match self.classifier.lookup(k) {
            Some(l) => self.line_class[l as usize] as usize,
            None => self.classes.len() - 1,
        }
    }
}

/// A policy attached to one port in one direction, with that
/// attachment's counters (dereferences to the policy).
pub struct AttachedPolicy {
    pub policy: Arc<Policy>,
    pub port: u16,
    pub dir: Direction,
    /// Per worker, per class × [`class_counter::N`].
    pub counters: WorkerSlots,
}

impl std::ops::Deref for AttachedPolicy {
    type Target = Policy;
    fn deref(&self) -> &Policy {
        &self.policy
    }
}

impl AttachedPolicy {
    pub fn new(policy: Arc<Policy>, port: u16, dir: Direction, workers: usize) -> Self {
        let n = policy.classes.len() * class_counter::N;
        AttachedPolicy {
            policy,
            port,
            dir,
            counters: WorkerSlots::new(workers, n),
        }
    }

    /// Counter `which` of class `class`, summed over workers.
    pub fn counter(&self, class: usize, which: usize) -> u64 {
        self.counters.total(class * class_counter::N + which)
    }
}

/// Flow accounting settings.
#[derive(Clone, Copy, Debug)]
pub struct FlowSettings {
    /// Account one packet in `sampling`.
    pub sampling: u32,
    pub active_ms: u64,
    pub inactive_ms: u64,
    /// Entries of each worker's cache.
    pub cache_size: usize,
}

/// The services snapshot.
pub struct Services {
    /// Per port id.
    pub port_in: Box<[AclSet]>,
    pub port_out: Box<[AclSet]>,
    /// Per VLAN id.
    pub vlan_in: Box<[AclSet]>,
    pub vlan_out: Box<[AclSet]>,
    pub policy_in: Box<[Option<Arc<AttachedPolicy>>]>,
    pub policy_out: Box<[Option<Arc<AttachedPolicy>>]>,
    pub flows: Option<FlowSettings>,
    /// Workers the counters were sized for.
    pub workers: usize,
    /// Some port or VLAN has an egress list or output policy.
    pub any_egress: bool,
    /// Bumped by every compile: workers rebuild their state on a change.
    pub generation: u64,
}

impl Services {
    /// Nothing attached, for `workers` workers and port ids `0..ports`
    /// (sized by the configuration; a port id beyond has nothing).
    pub fn empty(workers: usize, ports: usize) -> Services {
        let ports = ports.min(MAX_PORTS);
        Services {
            port_in: vec![AclSet::default(); ports].into(),
            port_out: vec![AclSet::default(); ports].into(),
            vlan_in: vec![AclSet::default(); MAX_VLANS].into(),
            vlan_out: vec![AclSet::default(); MAX_VLANS].into(),
            policy_in: vec![None; ports].into(),
            policy_out: vec![None; ports].into(),
            flows: None,
            workers,
            any_egress: false,
            generation: 0,
        }
    }

    /// Every list attached somewhere, once each.
    pub fn lists(&self) -> Vec<Arc<AclList>> {
        let mut out: Vec<Arc<AclList>> = Vec::new();
        for a in self.attachments() {
            if !out.iter().any(|o| Arc::ptr_eq(o, &a.list)) {
                out.push(a.list.clone());
            }
        }
        out
    }

    /// Every attachment of a list: ports in, ports out, VLANs in, VLANs
    /// out, each by id.
    pub fn attachments(&self) -> impl Iterator<Item = &Arc<AttachedAcl>> {
        self.port_in
            .iter()
            .chain(self.port_out.iter())
            .chain(self.vlan_in.iter())
            .chain(self.vlan_out.iter())
            .flat_map(AclSet::lists)
    }

    /// Recompute the summary flags after filling the tables.
    pub fn finish(&mut self) {
        self.any_egress = self.port_out.iter().any(|s| !s.is_empty())
            || self.vlan_out.iter().any(|s| !s.is_empty())
            || self.policy_out.iter().any(Option::is_some);
    }

    /// True if ingress work exists for frames of `port` (in any VLAN).
    #[inline]
    pub fn ingress_on(&self, port: u16) -> bool {
        let p = port as usize;
        self.flows.is_some()
            || self.port_in.get(p).is_some_and(|s| !s.is_empty())
            || self.policy_in.get(p).is_some_and(Option::is_some)
    }
}

/// What egress services decided for one copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EgressVerdict {
    Deny,
    /// Send straight to the port.
    Send,
    /// Queue in the port's class queue `class`.
    Queue(usize),
}

/// Why the services stage dropped a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceDrop {
    AclDeny,
    Policed,
}

/// A worker's own state for the services stage.
pub struct ServiceState {
    pub worker: usize,
    /// Generation of the snapshot the policers were built for.
    built_for: u64,
    /// Per port: the input policy's policers, per class.
    policers: Vec<Vec<Option<TrTcm>>>,
    pub flows: Option<FlowCache>,
    /// Per port with a queueing output policy: its class queues.
    queues: Vec<Option<EgressQueues>>,
    sample: u32,
    /// Flows the cache could not take.
    pub flow_cache_full: u64,
}

impl ServiceState {
    pub fn new(worker: usize) -> ServiceState {
        ServiceState {
            worker,
            built_for: u64::MAX,
            policers: Vec::new(),
            flows: None,
            queues: Vec::new(),
            sample: 0,
            flow_cache_full: 0,
        }
    }

    /// Rebuild policers (and size the flow cache) when the snapshot
    /// changed. Allocates, but only on a configuration change.
    pub fn sync(&mut self, s: &Services, now_ns: u64) {
        if self.built_for == s.generation {
            return;
        }
        self.built_for = s.generation;
        self.policers = s
            .policy_in
            .iter()
            .map(|p| match p {
                Some(p) => p
                    .classes
                    .iter()
                    .map(|c| c.police.map(|ps| TrTcm::new(ps.rates, now_ns)))
                    .collect(),
                None => Vec::new(),
            })
            .collect();
        // Queues survive a change that keeps their shape; otherwise what
        // they hold is dropped with them.
        let mut old = std::mem::take(&mut self.queues);
        self.queues = s
            .policy_out
            .iter()
            .enumerate()
            .map(|(p, pol)| {
                let specs = pol.as_ref()?.queues.as_ref()?;
                match old.get_mut(p).and_then(Option::take) {
                    Some(q) if q.specs() == &specs[..] => Some(q),
                    _ => Some(EgressQueues::new(specs, io::MAX_FRAME_LEN)),
                }
            })
            .collect();
        // A cache left over when accounting is turned off is drained by
        // the worker's sweep (timeouts of zero).
        if let Some(f) = s.flows {
            if self
                .flows
                .as_ref()
                .is_none_or(|c| c.capacity() < f.cache_size)
            {
                self.flows = Some(FlowCache::new(f.cache_size));
            }
        }
    }

    /// Ingress services for one frame. `frame` may be re-marked in place
    /// (DSCP at `l3_off`); `pcp` receives a new 802.1p priority.
    /// Returns the drop reason, if dropped.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn ingress(
        &mut self,
        s: &Services,
        key: &mut AclKey,
        frame: &mut [u8],
        l3_off: usize,
        port: u16,
        vlan: u16,
        pcp: &mut u8,
        now_ns: u64,
    ) -> Option<ServiceDrop> {
        let w = self.worker;
        let p = port as usize;
        if let Some(set) = s.port_in.get(p) {
            if !set.permits(key, w, port) {
                return Some(ServiceDrop::AclDeny);
            }
        }
        if let Some(set) = s.vlan_in.get(vlan as usize) {
            if !set.permits(key, w, port) {
                return Some(ServiceDrop::AclDeny);
            }
        }
        if let Some(Some(pol)) = s.policy_in.get(p) {
            let class = pol.classify(key);
            let base = class * class_counter::N;
            pol.counters.add(w, base + class_counter::PACKETS, 1);
            pol.counters
                .add(w, base + class_counter::BYTES, frame.len() as u64);
            let spec = &pol.classes[class];
            let mut dscp = spec.set_dscp;
            if let Some(ps) = &spec.police {
                let meter = self
                    .policers
                    .get_mut(p)
                    .and_then(|v| v.get_mut(class))
                    .and_then(Option::as_mut);
                if let Some(m) = meter {
                    let color = m.color_blind(frame.len() as u32, now_ns);
                    let (which, act) = match color {
                        Color::Green => (class_counter::GREEN, ps.conform),
                        Color::Yellow => (class_counter::YELLOW, ps.exceed),
                        Color::Red => (class_counter::RED, ps.violate),
                    };
                    pol.counters.add(w, base + which, 1);
                    match act {
                        ColorAction::Transmit => {}
                        ColorAction::Drop => {
                            pol.counters.add(w, base + class_counter::DROPPED, 1);
                            return Some(ServiceDrop::Policed);
                        }
                        ColorAction::SetDscp(d) => dscp = Some(d),
                    }
                }
            }
            if let Some(d) = dscp {
                if key.family != 0 && crate::qos::set_dscp(frame, l3_off, d) {
                    key.dscp = d;
                }
            }
            if let Some(v) = spec.set_pcp {
                *pcp = v;
            }
        }
        None
    }

    /// Account a frame in the flow cache (IP frames only; sampled).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn account(
        &mut self,
        s: &Services,
        key: &AclKey,
        tos: u8,
        port: u16,
        vlan: u16,
        bytes: u32,
        out_port: u16,
        now_ms: u64,
    ) {
        let (Some(f), Some(cache)) = (&s.flows, self.flows.as_mut()) else {
            return;
        };
        if key.family == 0 {
            return;
        }
        if f.sampling > 1 {
            self.sample += 1;
            if self.sample < f.sampling {
                return;
            }
            self.sample = 0;
        }
        let fk = FlowKey {
            src_ip: key.src_ip,
            dst_ip: key.dst_ip,
            src_port: key.src_port,
            dst_port: key.dst_port,
            proto: key.proto,
            tos,
            family: key.family,
            in_port: port,
            vlan,
        };
        if !cache.update(&fk, bytes, key.tcp_flags, out_port, now_ms) {
            self.flow_cache_full += 1;
        }
    }

    /// True if port `p` queues its output (a policy with `queue:`).
    #[inline]
    pub fn queues_on(&self, p: u16) -> bool {
        matches!(self.queues.get(p as usize), Some(Some(_)))
    }

    /// Queue a copy for port `p`'s class `class`; false = tail drop.
    #[inline]
    pub fn enqueue(&mut self, p: u16, class: usize, frame: &[u8]) -> bool {
        match self.queues.get_mut(p as usize) {
            Some(Some(q)) => q.enqueue(class, frame),
            _ => false,
        }
    }

    /// Frames waiting in port `p`'s queues.
    #[inline]
    pub fn queued(&self, p: u16) -> usize {
        match self.queues.get(p as usize) {
            Some(Some(q)) => q.total_len(),
            _ => 0,
        }
    }

    /// Move what port `p`'s scheduler allows into `sink` (its TX ring).
    #[inline]
    pub fn drain<S: TxSink + ?Sized>(&mut self, p: u16, sink: &mut S) -> usize {
        match self.queues.get_mut(p as usize) {
            Some(Some(q)) => q.drain(sink),
            _ => 0,
        }
    }

    /// Egress services for one copy already written to `out` (its IP
    /// header at `l3_off`): ACLs, re-marking, and the class queue.
    #[inline]
    pub fn egress(
        &self,
        s: &Services,
        key: &AclKey,
        out: &mut [u8],
        l3_off: usize,
        port: u16,
        vlan: u16,
    ) -> EgressVerdict {
        let w = self.worker;
        let p = port as usize;
        if let Some(set) = s.port_out.get(p) {
            if !set.permits(key, w, port) {
                return EgressVerdict::Deny;
            }
        }
        if let Some(set) = s.vlan_out.get(vlan as usize) {
            if !set.permits(key, w, port) {
                return EgressVerdict::Deny;
            }
        }
        self.egress_policy(s, key, out, l3_off, port)
    }

    /// The output policy of `port` alone (re-marking and the class queue,
    /// no ACLs), for one copy already written to `out`. A routed
    /// subinterface's frames take it on their way out of the subinterface's
    /// port: the port's scheduler and marking are the link's, while its
    /// output ACLs are the port's own interface's (the subinterface has its
    /// own), as on routers with 802.1Q subinterfaces.
    #[inline]
    pub fn egress_policy(
        &self,
        s: &Services,
        key: &AclKey,
        out: &mut [u8],
        l3_off: usize,
        port: u16,
    ) -> EgressVerdict {
        let w = self.worker;
        let p = port as usize;
        if let Some(Some(pol)) = s.policy_out.get(p) {
            let class = pol.classify(key);
            let base = class * class_counter::N;
            pol.counters.add(w, base + class_counter::PACKETS, 1);
            pol.counters
                .add(w, base + class_counter::BYTES, out.len() as u64);
            let spec = &pol.classes[class];
            if let Some(d) = spec.set_dscp {
                if key.family != 0 {
                    crate::qos::set_dscp(out, l3_off, d);
                }
            }
            if let Some(v) = spec.set_pcp {
                // The tag egress wrote, if any.
                if out.len() >= 16 && l3_off >= 18 {
                    out[14] = (out[14] & 0x1f) | (v << 5);
                }
            }
            if pol.queues.is_some() && self.queues_on(port) {
                return EgressVerdict::Queue(class);
            }
        }
        EgressVerdict::Send
    }

    /// Count a tail drop in class `class` of port `p`'s output policy.
    pub fn count_queue_drop(&self, s: &Services, p: u16, class: usize) {
        if let Some(Some(pol)) = s.policy_out.get(p as usize) {
            pol.counters.add(
                self.worker,
                class * class_counter::N + class_counter::QUEUE_DROPS,
                1,
            );
        }
    }
}

#[inline]
fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

/// Fill `k` from `frame`: `etype_off` is where the EtherType after the
/// ingress tag sits (one further 802.1Q/802.1ad tag is skipped). Returns
/// the offset of the IP header (or of the payload for non-IP frames).
/// Never panics: short or malformed headers leave the fields they would
/// have filled at zero (and `family` 0 for a broken IP header).
#[inline]
pub fn extract_key(frame: &[u8], etype_off: usize, vlan: u16, k: &mut AclKey) -> usize {
    *k = AclKey::default();
    if frame.len() < 14 || etype_off + 2 > frame.len() {
        return frame.len();
    }
    k.dst_mac.copy_from_slice(&frame[0..6]);
    k.src_mac.copy_from_slice(&frame[6..12]);
    k.vlan = vlan;
    let mut off = etype_off;
    let mut et = be16(frame, off);
    if (et == 0x8100 || et == 0x88a8) && off + 6 <= frame.len() {
        off += 4;
        et = be16(frame, off);
    }
    k.ethertype = et;
    let l3 = off + 2;
    let b = &frame[l3.min(frame.len())..];
    match et {
        0x0800 => {
            if b.len() < 20 || b[0] >> 4 != 4 {
                return l3;
            }
            let ihl = (b[0] & 0x0f) as usize * 4;
            if ihl < 20 || b.len() < ihl {
                return l3;
            }
            k.family = 4;
            k.dscp = b[1] >> 2;
            k.proto = b[9];
            k.src_ip = u32::from_be_bytes([b[12], b[13], b[14], b[15]]) as u128;
            k.dst_ip = u32::from_be_bytes([b[16], b[17], b[18], b[19]]) as u128;
            // A non-initial fragment carries no L4 header: flag it (ports
            // stay 0; the fragment policy decides how rules meet it).
            if be16(b, 6) & 0x1fff == 0 {
                l4(&b[ihl..], k);
            } else {
                k.fragment = true;
            }
        }
        0x86dd => {
            if b.len() < 40 || b[0] >> 4 != 6 {
                return l3;
            }
            k.family = 6;
            k.dscp = ((be16(b, 0) >> 6) & 0x3f) as u8;
            let mut nh = b[6];
            k.src_ip = u128::from_be_bytes(b[8..24].try_into().unwrap_or([0; 16]));
            k.dst_ip = u128::from_be_bytes(b[24..40].try_into().unwrap_or([0; 16]));
            let mut o = 40usize;
            // A few extension headers; a non-initial fragment has no L4
            // header (flagged, ports 0).
            for _ in 0..4 {
                match nh {
                    0 | 43 | 60 => {
                        if b.len() < o + 8 {
                            break;
                        }
                        nh = b[o];
                        o += (b[o + 1] as usize + 1) * 8;
                    }
                    44 => {
                        if b.len() < o + 8 {
                            break;
                        }
                        let first = be16(b, o + 2) & 0xfff8 == 0;
                        nh = b[o];
                        o += 8;
                        if !first {
                            k.proto = nh;
                            k.fragment = true;
                            return l3;
                        }
                    }
                    _ => break,
                }
            }
            k.proto = nh;
            if o <= b.len() {
                l4(&b[o..], k);
            }
        }
        _ => {}
    }
    l3
}

#[inline]
fn l4(b: &[u8], k: &mut AclKey) {
    match k.proto {
        6 | 17 | 132 if b.len() >= 4 => {
            k.src_port = be16(b, 0);
            k.dst_port = be16(b, 2);
            if k.proto == 6 && b.len() >= 14 {
                k.tcp_flags = b[13];
            }
        }
        1 | 58 if b.len() >= 2 => {
            k.src_port = b[0] as u16;
            k.dst_port = b[1] as u16;
        }
        _ => {}
    }
}

/// Length of the IP packet at `l3_off` from its header (what NetFlow
/// counts as bytes: no Ethernet header, no padding); 0 for non-IP.
#[inline]
pub fn ip_len(frame: &[u8], l3_off: usize, family: u8) -> u32 {
    let at = |o: usize| -> u32 {
        match frame.get(l3_off + o..l3_off + o + 2) {
            Some(b) => u32::from(u16::from_be_bytes([b[0], b[1]])),
            None => 0,
        }
    };
    match family {
        4 => at(2),
        6 => at(4) + 40,
        _ => 0,
    }
}

/// ToS byte of the IP header at `l3_off` (0 for non-IP).
#[inline]
pub fn tos(frame: &[u8], l3_off: usize, family: u8) -> u8 {
    match family {
        4 => frame.get(l3_off + 1).copied().unwrap_or(0),
        6 if frame.len() >= l3_off + 2 => {
            ((u16::from_be_bytes([frame[l3_off], frame[l3_off + 1]]) >> 4) & 0xff) as u8
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4(sport: u16, dport: u16, dscp: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 18];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[15] = dscp << 2;
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn extracts_ipv4_udp() {
        let f = udp4(1000, 2000, 46);
        let mut k = AclKey::default();
        let l3 = extract_key(&f, 12, 10, &mut k);
        assert_eq!(l3, 14);
        assert_eq!(k.family, 4);
        assert_eq!(k.proto, 17);
        assert_eq!((k.src_port, k.dst_port), (1000, 2000));
        assert_eq!(k.dscp, 46);
        assert_eq!(k.src_ip, 0x0a00_0001);
        assert_eq!(k.vlan, 10);
        assert_eq!(tos(&f, l3, 4), 46 << 2);
        assert_eq!(ip_len(&f, l3, 4), 0);
        assert_eq!(ip_len(&f, l3, 6), 40);
    }

    #[test]
    fn non_first_fragment_has_no_ports() {
        let mut f = udp4(1000, 2000, 0);
        f[20] = 0x00;
        f[21] = 0x10; // offset 16*8
        let mut k = AclKey::default();
        extract_key(&f, 12, 1, &mut k);
        assert_eq!(k.family, 4);
        assert_eq!((k.src_port, k.dst_port), (0, 0));
        assert!(k.fragment);
        // The first fragment (offset 0, more fragments) has its ports.
        f[20] = 0x20;
        f[21] = 0x00;
        extract_key(&f, 12, 1, &mut k);
        assert_eq!((k.src_port, k.dst_port, k.fragment), (1000, 2000, false));
    }

    /// IPv6 with a Fragment header: the first fragment is parsed through
    /// it, a later one is flagged with the upper-layer protocol.
    #[test]
    fn ipv6_fragment_header() {
        let mut f = vec![0u8; 14 + 40 + 8 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[20] = 44; // next header: Fragment
        f[21] = 64;
        f[54] = 17; // Fragment header: next header UDP
        f[58..62].copy_from_slice(&[0, 0, 0, 7]); // id
        f[62..64].copy_from_slice(&4000u16.to_be_bytes());
        f[64..66].copy_from_slice(&53u16.to_be_bytes());
        f[56] = 0x00;
        f[57] = 0x01; // offset 0, M
        let mut k = AclKey::default();
        extract_key(&f, 12, 1, &mut k);
        assert_eq!(
            (k.family, k.proto, k.src_port, k.dst_port),
            (6, 17, 4000, 53)
        );
        assert!(!k.fragment);
        f[56] = 0x05;
        f[57] = 0x38; // offset 167 × 8
        extract_key(&f, 12, 1, &mut k);
        assert_eq!((k.proto, k.src_port, k.dst_port), (17, 0, 0));
        assert!(k.fragment);
    }

    #[test]
    fn never_panics_on_short_or_garbage() {
        let mut k = AclKey::default();
        let mut x: u32 = 7;
        for len in 0..120 {
            for _ in 0..50 {
                let f: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        x as u8
                    })
                    .collect();
                let mut g = f.clone();
                if g.len() > 14 {
                    g[12] = if x & 1 == 0 { 0x08 } else { 0x86 };
                    g[13] = if x & 1 == 0 { 0x00 } else { 0xdd };
                    g[14] = if x & 1 == 0 { 0x45 } else { 0x60 };
                }
                for (frame, off) in [(&f, 12), (&g, 12), (&g, 16)] {
                    extract_key(frame, off, 1, &mut k);
                    if k.fragment {
                        // No L4 header in a non-initial fragment.
                        assert_eq!((k.src_port, k.dst_port, k.tcp_flags), (0, 0, 0));
                    }
                }
                let _ = tos(&g, 14, 6);
            }
        }
    }
}

#[cfg(test)]
mod state_tests {
    use super::*;

    fn services_with_flows(sampling: u32) -> Services {
        let mut s = Services::empty(1, 8);
        s.flows = Some(FlowSettings {
            sampling,
            active_ms: 60_000,
            inactive_ms: 15_000,
            cache_size: 1024,
        });
        s.generation = 1;
        s.finish();
        s
    }

    fn key(sport: u16) -> AclKey {
        AclKey {
            family: 4,
            proto: 17,
            src_ip: 0x0a00_0001,
            dst_ip: 0x0a00_0002,
            src_port: sport,
            dst_port: 53,
            ..AclKey::default()
        }
    }

    #[test]
    fn accounts_every_packet_or_one_in_n() {
        for (sampling, want) in [(1u32, 1000u64), (4, 250)] {
            let s = services_with_flows(sampling);
            let mut st = ServiceState::new(0);
            st.sync(&s, 0);
            for i in 0..1000u64 {
                st.account(&s, &key(1000), 0, 0, 1, 100, 1, i);
            }
            let mut top = Vec::new();
            st.flows.as_ref().unwrap().top(10, &mut top);
            assert_eq!(top.len(), 1);
            assert_eq!(top[0].packets, want, "sampling 1:{sampling}");
            assert_eq!(top[0].bytes, want * 100);
        }
    }

    #[test]
    fn non_ip_is_not_accounted_and_full_cache_is_counted() {
        let s = services_with_flows(1);
        let mut st = ServiceState::new(0);
        st.sync(&s, 0);
        st.account(&s, &AclKey::default(), 0, 0, 1, 60, 1, 0);
        assert!(st.flows.as_ref().unwrap().is_empty());
        let cap = st.flows.as_ref().unwrap().capacity();
        for p in 0..(cap as u32 + 100) {
            st.account(&s, &key(p as u16), 0, (p >> 16) as u16, 1, 60, 1, 0);
        }
        assert!(st.flow_cache_full > 0);
        assert_eq!(st.flows.as_ref().unwrap().len(), cap);
    }
}
