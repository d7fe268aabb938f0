//! Workers: the forwarding loop, and the only place where ports (`io`) meet
//! decisions (`pipeline`).
//!
//! Each worker owns a transmit handle for every port and receives on the
//! ports assigned to it. Per loop it fills one batch from its receive ports
//! (round robin), loads the current table snapshot once, runs the pipeline,
//! writes every copy straight into the egress ports' transmit rings and
//! flushes each touched port once. When nothing arrives for `idle_spin` it
//! sleeps in `poll(2)` on its receive descriptors.
//!
//! The control plane talks to a worker only through [`Shared`]: the snapshot
//! pointer, the learn queue, and a small command mailbox (attach/detach a
//! port) checked once per loop with one relaxed load.
//!
//! Routed ports are received into a second batch that goes through the
//! layer-3 stage instead of the layer-2 one (the port's role is fixed at
//! attach, so the split costs nothing per frame). Punted frames go to the
//! [`punt::PuntQueue`]; ICMP errors are built straight into the ingress
//! port's transmit ring, rate-limited per worker.
//!
//! Services (ACLs, QoS, flow accounting; `pipeline::services`) run after
//! the forwarding decision, on one key extracted per frame, only when a
//! services snapshot is published: without one the loop is unchanged.
//! Expired flows leave through a per-worker queue to the exporter.

pub mod link_alarm;
pub mod punt;

use arc_swap::{ArcSwap, ArcSwapOption};
use io::{FrameBatch, Port};
use pipeline::copp::{self, CoppClass, CoppConfig, CoppPolicer};
use pipeline::l3::{
    build_icmp4_error, build_icmp6_error, process_l3, L3Tables, L3Verdict, L3Verdicts,
};
use pipeline::services::{
    extract_key, ip_len, tos, EgressVerdict, ServiceDrop, ServiceState, Services,
};
use pipeline::storm::{LoopProbe, StormState, StormTable};
use pipeline::{egress, process, Action, DropReason, Verdicts, WorkerCounters};
use punt::PuntQueue;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};
use tables::acl::AclKey;
use tables::flow::FlowExportQueue;
use tables::mcast::McastTables;
use tables::mirror::MirrorTable;
use tables::{LearnQueue, PortSet, Tables, MAX_PORTS};

/// A change to a worker's set of ports.
pub enum PortCommand {
    /// Use `port` for port id `id`; receive on it too if `rx`.
    Attach {
        id: u16,
        port: Box<dyn Port>,
        rx: bool,
        /// A routed port: its frames go through the layer-3 stage.
        routed: bool,
    },
    /// Close port `id` (the interface went away).
    Detach { id: u16 },
    /// Port `id`'s link went down: drop what waits in its transmit ring.
    DiscardTx { id: u16 },
    /// A backup pair failed over from `from` to `to`: frames stranded in
    /// `from`'s transmit ring (its link is gone) leave by `to` instead.
    MoveTx { from: u16, to: u16 },
    /// Report this worker's flow cache: its `n` largest flows.
    DumpFlows {
        n: usize,
        reply: std::sync::mpsc::SyncSender<FlowDump>,
    },
}

/// One worker's flow cache, for `show flow cache`.
#[derive(Clone, Debug, Default)]
pub struct FlowDump {
    pub worker: usize,
    pub flows: usize,
    pub capacity: usize,
    pub memory_bytes: usize,
    /// Packets whose flow found no room.
    pub cache_full: u64,
    /// Records waiting for the exporter.
    pub queued: usize,
    pub top: Vec<tables::flow::FlowRecord>,
}

/// A worker's mailbox: commands plus a flag so the loop checks cheaply.
#[derive(Default)]
pub struct Mailbox {
    pending: AtomicBool,
    cmds: Mutex<Vec<PortCommand>>,
}

impl Mailbox {
    pub fn send(&self, cmd: PortCommand) {
        self.cmds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cmd);
        self.pending.store(true, Ordering::Release);
    }
}

/// State shared by the control plane and the workers.
pub struct Shared {
    pub tables: ArcSwap<Tables>,
    pub learn: Arc<LearnQueue>,
    /// The learner thread, woken when events arrive while it sleeps.
    pub learner: OnceLock<Thread>,
    pub learner_parked: AtomicBool,
    pub stop: AtomicBool,
    /// Start of the switch's coarse clock (MAC ages are seconds since).
    pub epoch: Instant,
    /// Errors reported by ports on receive/transmit, per port id.
    pub port_errors: Box<[AtomicU64]>,
    /// Ports whose link the supervisor should look at now (an error on
    /// receive or transmit: a refused transmit is a lost carrier's first
    /// sign).
    pub link_alarm: link_alarm::LinkAlarm,
    /// The layer-3 tables; `None` until the switch has routed ports.
    pub l3: ArcSwapOption<L3Tables>,
    /// Frames for the control plane (the TAPs).
    pub punts: PuntQueue,
    /// Frames the control plane sends out of a VLAN interface's TAP: the
    /// workers switch them in the VLAN, entering on the SVI's port.
    pub to_vlan: PuntQueue,
    /// Per worker, a counter bumped at the top of every loop: a worker
    /// holds no reference into the tables between two bumps, which is
    /// what [`Shared::quiesce`] waits for.
    worker_seq: Box<[AtomicU64]>,
    workers: AtomicUsize,
    /// ACLs, QoS and flow accounting; `None` when none are configured.
    pub services: ArcSwapOption<Services>,
    /// Per worker (registration order), the queue of expired flows.
    pub flow_queues: Mutex<Vec<Arc<FlowExportQueue>>>,
    /// Port mirroring; `None` without sessions.
    pub mirrors: ArcSwapOption<MirrorTable>,
    /// Control-plane policing rates (on by default).
    pub copp: ArcSwap<CoppConfig>,
    /// Link-layer control frames (LACP) for the control plane.
    pub l2_control: PuntQueue,
    /// Restart in place: workers hand their ports over (see
    /// `io::Port::handover`) and stop for good.
    pub handover: AtomicBool,
    /// What the workers handed over: `worker:port:rx:state` per port.
    pub handed: Mutex<Vec<String>>,
    pub handed_workers: AtomicUsize,
    /// IGMP/MLD snooping and multicast routes; `None` without multicast.
    pub mcast: ArcSwapOption<McastTables>,
    /// IGMP/MLD messages (and PIM hellos) for the snooping thread.
    pub snoop: PuntQueue,
    /// Frames the snooping thread sends (its queries): `port` is the port
    /// to send on, or [`MC_OUT_FLOOD`] for every port of `vlan`. Untagged;
    /// each port's encapsulation is applied on the way out. The guard
    /// thread sends its loop-detect probes this way too.
    pub mc_out: PuntQueue,
    /// Storm control per port; `None` when no port has it.
    pub storm: ArcSwapOption<StormTable>,
    /// Per port: storm-control classes (bit per `StormClass`) that went
    /// over their limit on a port whose action is shutdown; the guard
    /// thread takes (swaps out) the bits and err-disables the port.
    pub storm_tripped: Box<[AtomicU8]>,
    /// Identifies this switch's loop-detect probes (random per start).
    pub switch_id: AtomicU64,
    /// Per receiving port: the last of this switch's own probes seen
    /// there, `(sending port + 1) << 16 | VLAN` (0: none since the guard
    /// last took it).
    pub loop_seen: Box<[AtomicU32]>,
}

/// `PuntBuf::port` of an `mc_out` frame for every port of its VLAN.
pub const MC_OUT_FLOOD: u16 = u16::MAX;
/// IGMP/MLD messages buffered for the snooping thread.
pub const SNOOP_QUEUE_DEPTH: usize = 2048;

/// Expired flow records a worker may have waiting for the exporter.
pub const FLOW_QUEUE_DEPTH: usize = 16_384;

/// Most workers (matches the configuration limit).
pub const MAX_WORKERS: usize = 64;
/// Punted frames buffered for the control plane: a deep normal lane of
/// small buffers (a routing table flooded by several neighbours at once
/// arrives in bursts of thousands of packets), a few jumbo buffers, and a
/// priority lane for protocol keepalives (`punt` module, issue 13).
pub const PUNT_QUEUE_DEPTH: punt::PuntDepth = punt::PuntDepth {
    small: 8192,
    large: 256,
    priority: 512,
};
/// Frames a VLAN interface's TAP sends, buffered for the workers.
pub const TO_VLAN_QUEUE_DEPTH: usize = 1024;
/// Link-layer control frames (LACPDUs) buffered for the control plane.
pub const L2_CONTROL_QUEUE_DEPTH: usize = 256;

impl Shared {
    pub fn new(tables: Tables, learn_queue: usize) -> Shared {
        Shared {
            tables: ArcSwap::from_pointee(tables),
            learn: Arc::new(LearnQueue::new(learn_queue)),
            learner: OnceLock::new(),
            learner_parked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            epoch: Instant::now(),
            port_errors: (0..MAX_PORTS).map(|_| AtomicU64::new(0)).collect(),
            link_alarm: link_alarm::LinkAlarm::new().expect("eventfd for link alarms"),
            l3: ArcSwapOption::empty(),
            punts: PuntQueue::with_depth(PUNT_QUEUE_DEPTH).expect("eventfd for the punt queue"),
            to_vlan: PuntQueue::new(TO_VLAN_QUEUE_DEPTH).expect("eventfd for the inject queue"),
            worker_seq: (0..MAX_WORKERS).map(|_| AtomicU64::new(0)).collect(),
            workers: AtomicUsize::new(0),
            services: ArcSwapOption::empty(),
            flow_queues: Mutex::new(Vec::new()),
            mirrors: ArcSwapOption::empty(),
            copp: ArcSwap::from_pointee(CoppConfig::default()),
            l2_control: PuntQueue::new(L2_CONTROL_QUEUE_DEPTH)
                .expect("eventfd for the l2 control queue"),
            handover: AtomicBool::new(false),
            handed: Mutex::new(Vec::new()),
            handed_workers: AtomicUsize::new(0),
            mcast: ArcSwapOption::empty(),
            snoop: PuntQueue::new(SNOOP_QUEUE_DEPTH).expect("eventfd for the snooping queue"),
            mc_out: PuntQueue::new(256).expect("eventfd for the snooping output queue"),
            storm: ArcSwapOption::empty(),
            storm_tripped: (0..MAX_PORTS).map(|_| AtomicU8::new(0)).collect(),
            switch_id: AtomicU64::new(0),
            loop_seen: (0..MAX_PORTS).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn register_worker(&self) -> usize {
        self.workers.fetch_add(1, Ordering::AcqRel)
    }

    /// Wait until every worker has passed the top of its loop at least once
    /// since the call began (a grace period: lookups begun before the call
    /// have finished), or `timeout` passed, or the switch is stopping.
    /// Returns true if the grace period completed. Used before the FIB
    /// manager reuses LPM nodes it unlinked (`Lpm4::reclaim`).
    pub fn quiesce(&self, timeout: Duration) -> bool {
        let n = self.workers.load(Ordering::Acquire).min(MAX_WORKERS);
        let seen: Vec<u64> = (0..n)
            .map(|k| self.worker_seq[k].load(Ordering::SeqCst))
            .collect();
        let start = Instant::now();
        loop {
            if (0..n).all(|k| self.worker_seq[k].load(Ordering::SeqCst) != seen[k]) {
                return true;
            }
            if self.stop.load(Ordering::Relaxed) || start.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Count a receive/transmit error reported by port `id` (shown in
    /// `show interfaces`) and have the supervisor look at the port's link
    /// at once ([`link_alarm`]).
    #[inline]
    pub fn count_port_error(&self, id: u16) {
        if let Some(c) = self.port_errors.get(id as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.link_alarm.raise(id);
    }

    /// The queues of expired flows, one per worker.
    pub fn flow_queues(&self) -> Vec<Arc<FlowExportQueue>> {
        self.flow_queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Seconds since start: the clock of MAC ages.
    #[inline]
    pub fn now(&self) -> u32 {
        self.epoch.elapsed().as_secs() as u32
    }
}

/// Smallest per-port receive quota (frames per turn), so that many ports
/// on one worker do not make a batch cost many passes.
const RX_QUOTA_MIN: usize = 16;

/// How a receive port's turn ended.
enum Turn {
    /// Its batch was already full: it waits for the next batch.
    Refused,
    /// It took its whole quota: it may have more.
    Quota,
    /// It had fewer frames than its quota (or its batch filled).
    Drained,
}

/// How often a worker reads its ports' ring counters (a system call each).
const STATS_EVERY: Duration = Duration::from_millis(200);

/// Tuning of one worker.
#[derive(Clone, Copy, Debug)]
pub struct WorkerOptions {
    /// Keep polling rings this long after the last frame before sleeping.
    pub idle_spin: Duration,
    /// Longest sleep in poll(2), so commands and stop are seen promptly.
    pub max_sleep: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            idle_spin: Duration::from_micros(50),
            max_sleep: Duration::from_millis(10),
        }
    }
}

pub struct Worker {
    shared: Arc<Shared>,
    mailbox: Arc<Mailbox>,
    counters: Arc<WorkerCounters>,
    opts: WorkerOptions,
    ports: Vec<Option<Box<dyn Port>>>,
    /// Ring counters already charged, per port (ports report totals).
    seen_stats: Vec<io::PortStats>,
    rx: Vec<u16>,
    /// Receive ports that are switched (not routed): they share `batch`.
    rx_switched: usize,
    pollfds: Vec<libc::pollfd>,
    /// Ports whose frames go through the layer-3 stage.
    routed: Vec<bool>,
    /// Index in `Shared::worker_seq`.
    index: usize,
    seq: u64,
    /// Control-plane policing buckets, and the rates they were built from.
    copp: CoppPolicer,
    copp_cfg: Arc<CoppConfig>,
    /// One frame's worth of room (SVI egress, ICMP errors into a VLAN).
    scratch: Box<[u8]>,
    /// Policers and the flow cache.
    svc: ServiceState,
    /// Storm-control buckets of the ports this worker receives.
    storm: StormState,
    flow_out: Arc<FlowExportQueue>,
    last_sweep: Instant,
    /// Ports with frames waiting in their egress class queues.
    queued: PortSet,
    /// The mirror table for this batch (loaded once per batch).
    mirror: Option<Arc<MirrorTable>>,
    /// A copy of a frame as it left, for its mirror copies.
    mirror_buf: Box<[u8]>,
}

/// A port's TX ring as the egress scheduler's sink, counting what it
/// takes.
struct CountingSink<'a> {
    port: &'a mut dyn Port,
    frames: u64,
    bytes: u64,
}

impl pipeline::qos::TxSink for CountingSink<'_> {
    #[inline]
    fn slot(&mut self) -> Option<&mut [u8]> {
        self.port.tx_slot()
    }

    #[inline]
    fn commit(&mut self, _class: usize, len: usize) {
        self.port.tx_commit(len);
        self.frames += 1;
        self.bytes += len as u64;
    }
}

/// Per frame of a batch: its services key, where its IP header starts,
/// and whether the key was filled.
struct Keys {
    k: [AclKey; io::BATCH_MAX],
    l3: [u16; io::BATCH_MAX],
    on: [bool; io::BATCH_MAX],
}

impl Keys {
    fn new() -> Box<Keys> {
        Box::new(Keys {
            k: [AclKey::default(); io::BATCH_MAX],
            l3: [0; io::BATCH_MAX],
            on: [false; io::BATCH_MAX],
        })
    }
}

impl Worker {
    pub fn new(
        shared: Arc<Shared>,
        mailbox: Arc<Mailbox>,
        counters: Arc<WorkerCounters>,
        opts: WorkerOptions,
    ) -> Worker {
        let index = shared.register_worker().min(MAX_WORKERS - 1);
        let flow_out = Arc::new(FlowExportQueue::new(FLOW_QUEUE_DEPTH));
        shared
            .flow_queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(flow_out.clone());
        Worker {
            shared,
            mailbox,
            counters,
            opts,
            ports: (0..MAX_PORTS).map(|_| None).collect(),
            seen_stats: vec![io::PortStats::default(); MAX_PORTS],
            rx: Vec::new(),
            rx_switched: 0,
            pollfds: Vec::new(),
            routed: vec![false; MAX_PORTS],
            index,
            seq: 0,
            copp: CoppPolicer::new(&CoppConfig::default(), 1),
            copp_cfg: Arc::new(CoppConfig::default()),
            scratch: vec![0u8; io::MAX_FRAME_LEN].into_boxed_slice(),
            svc: ServiceState::new(index),
            storm: StormState::default(),
            flow_out,
            last_sweep: Instant::now(),
            queued: PortSet::EMPTY,
            mirror: None,
            mirror_buf: vec![0u8; io::MAX_FRAME_LEN].into_boxed_slice(),
        }
    }

    fn apply_commands(&mut self) {
        self.mailbox.pending.store(false, Ordering::Release);
        let cmds =
            std::mem::take(&mut *self.mailbox.cmds.lock().unwrap_or_else(|e| e.into_inner()));
        for cmd in cmds {
            match cmd {
                PortCommand::Attach {
                    id,
                    port,
                    rx,
                    routed,
                } => {
                    self.collect_stats(id);
                    self.ports[id as usize] = Some(port);
                    self.routed[id as usize] = routed;
                    self.seen_stats[id as usize] = io::PortStats::default();
                    self.rx.retain(|p| *p != id);
                    if rx {
                        self.rx.push(id);
                    }
                }
                PortCommand::Detach { id } => {
                    self.collect_stats(id);
                    self.ports[id as usize] = None;
                    self.rx.retain(|p| *p != id);
                }
                PortCommand::MoveTx { from, to } => {
                    let (f, t) = (from as usize, to as usize);
                    if f != t && f < MAX_PORTS && t < MAX_PORTS {
                        let mut src = self.ports[f].take();
                        if let (Some(a), Some(b)) = (src.as_mut(), self.ports[t].as_mut()) {
                            let (mut moved, mut bytes) = (0u64, 0u64);
                            a.take_tx(&mut |frame| {
                                if b.send(frame) {
                                    moved += 1;
                                    bytes += frame.len() as u64;
                                }
                            });
                            let _ = b.flush();
                            let pc = &self.counters.ports[t];
                            pc.tx_frames.add(moved);
                            pc.tx_bytes.add(bytes);
                        }
                        self.ports[f] = src;
                    }
                }
                PortCommand::DiscardTx { id } => {
                    if let Some(p) = self.ports[id as usize].as_mut() {
                        p.discard_tx();
                    }
                    self.queued.remove(id);
                }
                PortCommand::DumpFlows { n, reply } => {
                    let mut d = FlowDump {
                        worker: self.index,
                        cache_full: self.svc.flow_cache_full,
                        queued: self.flow_out.len(),
                        ..FlowDump::default()
                    };
                    if let Some(c) = &self.svc.flows {
                        d.flows = c.len();
                        d.capacity = c.capacity();
                        d.memory_bytes = c.memory_bytes();
                        c.top(n, &mut d.top);
                    }
                    let _ = reply.try_send(d);
                }
            }
        }
        self.rx_switched = self
            .rx
            .iter()
            .filter(|&&id| !self.routed[id as usize])
            .count();
        self.pollfds = self
            .rx
            .iter()
            .filter_map(|id| self.ports[*id as usize].as_ref()?.rx_fd())
            .chain(std::iter::once(self.shared.to_vlan.event_fd()))
            .chain(std::iter::once(self.shared.mc_out.event_fd()))
            .map(|fd: RawFd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
    }

    /// Charge ring-level drops the kernel counted since the last look.
    fn collect_stats(&mut self, id: u16) {
        let Some(p) = self.ports[id as usize].as_mut() else {
            return;
        };
        let now = p.stats();
        let was = std::mem::replace(&mut self.seen_stats[id as usize], now);
        let pc = &self.counters.ports[id as usize];
        pc.drops[DropReason::RxRingFull as usize]
            .add(now.rx_ring_drops.saturating_sub(was.rx_ring_drops));
        pc.drops[DropReason::TxError as usize].add(now.tx_errors.saturating_sub(was.tx_errors));
    }

    /// Run until `shared.stop` is set.
    pub fn run(mut self) {
        let mut batch = FrameBatch::new();
        let mut l3batch = FrameBatch::new();
        let mut verdicts = Verdicts::default();
        let mut l3verdicts = Box::<L3Verdicts>::default();
        // Frames switched to a VLAN interface (into the layer-3 stage), and
        // frames routed out of one (into the layer-2 stage).
        let mut to_router = FrameBatch::new();
        let mut from_router = FrameBatch::new();
        let mut keys = Keys::new();
        let mut rr = 0usize;
        let mut last_rx = Instant::now();
        let mut last_stats = Instant::now();
        loop {
            // A quiescent point: nothing from the previous pass is held.
            self.seq = self.seq.wrapping_add(1);
            self.shared.worker_seq[self.index].store(self.seq, Ordering::SeqCst);
            if self.shared.stop.load(Ordering::Relaxed) {
                self.flush_flows();
                return;
            }
            if self.shared.handover.load(Ordering::Relaxed) {
                self.hand_over();
            }
            self.sweep_flows();
            if last_stats.elapsed() >= STATS_EVERY {
                last_stats = Instant::now();
                for id in 0..MAX_PORTS as u16 {
                    self.collect_stats(id);
                }
            }
            if self.mailbox.pending.load(Ordering::Acquire) {
                self.apply_commands();
            }
            batch.clear();
            l3batch.clear();
            self.receive(&mut batch, &mut l3batch, &mut rr);
            if !self.shared.mc_out.is_empty() {
                // Copies for a VLAN interface would go to the router: the
                // kernel has no use for the snooping querier's queries.
                self.send_snooper_frames(&mut to_router);
                to_router.clear();
            }
            // What the kernel sends out of VLAN interfaces' TAPs.
            while !batch.is_full() {
                let Some(b) = self.shared.to_vlan.pop() else {
                    break;
                };
                batch.push(b.port, b.frame());
                self.shared.to_vlan.recycle(b);
            }
            if !self.queued.is_empty() {
                // Congested ports: let their schedulers refill the rings.
                let q = self.queued;
                self.flush(q);
            }
            if batch.is_empty() && l3batch.is_empty() {
                if self.queued.is_empty() && last_rx.elapsed() >= self.opts.idle_spin {
                    self.sleep();
                }
                continue;
            }
            last_rx = Instant::now();
            to_router.clear();
            from_router.clear();
            if !batch.is_empty() {
                self.forward(
                    &mut batch,
                    &mut verdicts,
                    &mut to_router,
                    &mut keys,
                    last_rx,
                    false,
                );
            }
            if !l3batch.is_empty() {
                self.route(
                    &mut l3batch,
                    &mut l3verdicts,
                    last_rx,
                    &mut from_router,
                    &mut keys,
                );
            }
            if !to_router.is_empty() {
                self.route(
                    &mut to_router,
                    &mut l3verdicts,
                    last_rx,
                    &mut from_router,
                    &mut keys,
                );
            }
            if !from_router.is_empty() {
                // Frames from the router never go back to it (they enter on
                // the VLAN's only router port, which flooding and the same-
                // port filter exclude), so `to_router` stays empty here.
                to_router.clear();
                self.forward(
                    &mut from_router,
                    &mut verdicts,
                    &mut to_router,
                    &mut keys,
                    last_rx,
                    true,
                );
            }
        }
    }

    /// Fill the batches from the receive rings, sharing them fairly among
    /// the ports with work: each port takes at most its quota (the batch
    /// divided among the ports feeding it) per turn; a first pass visits
    /// every port from `next`, later passes only the ports that filled
    /// their quota, until the batch is full or nobody has more. The next
    /// call starts at the first port the full batch turned away, so under
    /// overload every busy port gets the same share of the worker,
    /// whatever the idle ports between them (issue 13).
    fn receive(&mut self, batch: &mut FrameBatch, l3batch: &mut FrameBatch, next: &mut usize) {
        let nrx = self.rx.len();
        if nrx == 0 {
            return;
        }
        let quota = |ports: usize| (io::BATCH_MAX / ports.max(1)).max(RX_QUOTA_MIN);
        let q = (quota(self.rx_switched), quota(nrx - self.rx_switched));
        let start = *next % nrx;
        let mut cut = None;
        let mut busy = [0u16; MAX_PORTS];
        let mut nbusy = 0;
        for k in 0..nrx {
            let i = (start + k) % nrx;
            match self.recv_quota(i, batch, l3batch, q) {
                Turn::Refused => {
                    cut.get_or_insert(i);
                }
                Turn::Quota => {
                    busy[nbusy] = i as u16;
                    nbusy += 1;
                }
                Turn::Drained => {}
            }
        }
        while nbusy > 0 {
            let mut still = 0;
            for j in 0..nbusy {
                let i = busy[j] as usize;
                match self.recv_quota(i, batch, l3batch, q) {
                    Turn::Refused => {
                        cut.get_or_insert(i);
                    }
                    Turn::Quota => {
                        busy[still] = i as u16;
                        still += 1;
                    }
                    Turn::Drained => {}
                }
            }
            nbusy = still;
        }
        *next = cut.unwrap_or(start + 1);
    }

    /// One turn of receive port `self.rx[i]`: up to its quota (`q`: for
    /// switched, routed ports) into the batch its role feeds.
    #[inline]
    fn recv_quota(
        &mut self,
        i: usize,
        batch: &mut FrameBatch,
        l3batch: &mut FrameBatch,
        q: (usize, usize),
    ) -> Turn {
        let id = self.rx[i];
        let (into, q) = if self.routed[id as usize] {
            (l3batch, q.1)
        } else {
            (batch, q.0)
        };
        if into.is_full() {
            return Turn::Refused;
        }
        let Some(p) = self.ports[id as usize].as_mut() else {
            return Turn::Drained;
        };
        into.set_quota(Some(q));
        let got = match p.recv(into, id) {
            Ok(n) => n,
            Err(_) => {
                self.shared.count_port_error(id);
                0
            }
        };
        into.set_quota(None);
        if got >= q {
            Turn::Quota
        } else {
            Turn::Drained
        }
    }

    /// Restart in place: hand every port to the successor image, then
    /// wait for the `exec` that ends this process (never drop the ports:
    /// that would close what was handed over).
    fn hand_over(&mut self) -> ! {
        let mut out = Vec::new();
        for id in 0..MAX_PORTS {
            if let Some(p) = self.ports[id].as_mut() {
                if let Some(state) = p.handover() {
                    let rx = self.rx.contains(&(id as u16));
                    out.push(format!("{}:{}:{}:{state}", self.index, p.name(), rx as u8));
                }
            }
        }
        self.shared
            .handed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(out);
        self.shared.handed_workers.fetch_add(1, Ordering::SeqCst);
        loop {
            std::thread::park();
        }
    }

    /// The layer-3 path: routed ports' frames.
    fn route(
        &mut self,
        batch: &mut FrameBatch,
        out: &mut L3Verdicts,
        now: Instant,
        from_router: &mut FrameBatch,
        keys: &mut Keys,
    ) {
        let c = self.counters.clone();
        c.batches.add(1);
        for i in 0..batch.len() {
            let pc = &c.ports[batch.port(i) as usize];
            pc.rx_frames.add(1);
            pc.rx_bytes.add(batch.frame(i).len() as u64);
        }
        let Some(l3) = self.shared.l3.load_full() else {
            // Routed ports before the tables exist (start-up): nothing to
            // route with yet.
            c.l3.drops[pipeline::l3::L3Drop::NotRoutedPort as usize].add(batch.len() as u64);
            return;
        };
        // The batch's clock, in the units the policers and flows use.
        let (now_ns, now_ms) = (self.ns(now), self.ms(now));
        self.sync_copp();
        // Received-frame mirrors see the frames before routing rewrites them.
        self.mirror = self.shared.mirrors.load_full();
        if self.mirror.is_some() {
            let mut dirty = PortSet::EMPTY;
            for i in 0..batch.len() {
                let dests = self.mirror.as_ref().map(|m| m.rx(batch.port(i), 0));
                for d in dests.iter().flat_map(PortSet::iter) {
                    self.transmit_raw(d, batch.frame(i), &mut dirty, None);
                }
            }
            self.flush(dirty);
        }
        // Services keys come from the frames as received (routing
        // rewrites addresses and TTL).
        let svc = self.shared.services.load_full();
        if let Some(s) = &svc {
            self.svc.sync(s, now_ns);
            for i in 0..batch.len() {
                let port = batch.port(i);
                keys.on[i] = s.ingress_on(port) || s.any_egress;
                if keys.on[i] {
                    keys.l3[i] = extract_key(batch.frame(i), 12, 0, &mut keys.k[i]) as u16;
                }
            }
        }
        process_l3(&l3, batch, out, &c.l3);
        let mc = self.shared.mcast.load_full();
        let mut dirty = PortSet::EMPTY;
        let mut punted = false;
        for i in 0..batch.len() {
            if let (Some(s), true) = (&svc, keys.on[i]) {
                if matches!(out.v[i], L3Verdict::Forward { .. } | L3Verdict::Punt(_)) {
                    let port = batch.port(i);
                    let l3off = keys.l3[i] as usize;
                    let mut pcp = 0;
                    let t = tos(batch.frame(i), l3off, keys.k[i].family);
                    let len = ip_len(batch.frame(i), l3off, keys.k[i].family);
                    if let Some(d) = self.svc.ingress(
                        s,
                        &mut keys.k[i],
                        batch.frame_mut(i),
                        l3off,
                        port,
                        0,
                        &mut pcp,
                        now_ns,
                    ) {
                        c.drop_in(port, None, drop_reason(d));
                        continue;
                    }
                    if let L3Verdict::Forward { port: out_port } = out.v[i] {
                        self.svc
                            .account(s, &keys.k[i], t, port, 0, len, out_port, now_ms);
                    }
                }
            }
            match out.v[i] {
                L3Verdict::Forward { port } => {
                    if l3.is_svi(port) {
                        // Out of a VLAN interface: switched in its VLAN.
                        if !from_router.push(port, batch.frame(i)) {
                            c.drop_in(port, None, DropReason::TxRingFull);
                        }
                    } else {
                        let egress = match &svc {
                            Some(s) if keys.on[i] && s.any_egress => {
                                // Match the addresses the copy leaves with.
                                let f = batch.frame(i);
                                keys.k[i].dst_mac.copy_from_slice(&f[0..6]);
                                keys.k[i].src_mac.copy_from_slice(&f[6..12]);
                                Some((&**s, &keys.k[i], keys.l3[i] as usize))
                            }
                            _ => None,
                        };
                        self.transmit_raw(port, batch.frame(i), &mut dirty, egress);
                    }
                }
                L3Verdict::Punt(reason) => {
                    if reason == pipeline::l3::Punt::Multicast {
                        if let Some(mc) = mc.as_deref().filter(|m| m.routing) {
                            if self.route_multicast(mc, &l3, &c, batch, i, &mut dirty, from_router)
                            {
                                continue;
                            }
                        }
                    }
                    let class = copp::classify(batch.frame(i), reason);
                    if !self.copp.admit(class, now_ns) {
                        c.copp.dropped[class as usize].add(1);
                        continue;
                    }
                    c.copp.passed[class as usize].add(1);
                    let q = &self.shared.punts;
                    let (port, frame) = (batch.port(i), batch.frame(i));
                    // Keepalives jump the queue (their own lane).
                    let queued = if class == CoppClass::RoutingHello {
                        q.push_priority(port, reason as u8, frame)
                    } else {
                        q.push(port, reason as u8, frame)
                    };
                    if queued {
                        c.l3.punted.add(1);
                        punted = true;
                    } else {
                        c.l3.punt_queue_full.add(1);
                    }
                }
                L3Verdict::IcmpError(kind) => {
                    let ingress = batch.port(i);
                    let class = CoppClass::TtlExpired;
                    if !self.copp.admit(class, now_ns) {
                        c.copp.dropped[class as usize].add(1);
                        c.l3.icmp_suppressed.add(1);
                        continue;
                    }
                    c.copp.passed[class as usize].add(1);
                    let Some(ifc) = l3.interface(ingress) else {
                        continue;
                    };
                    if ifc.vlan.is_some() {
                        // Back into the VLAN through the layer-2 stage.
                        let frame = batch.frame(i);
                        let n = if frame.get(12..14) == Some(&[0x86, 0xdd]) {
                            build_icmp6_error(frame, ifc, kind, &mut self.scratch)
                        } else {
                            build_icmp4_error(frame, ifc, kind, &mut self.scratch)
                        };
                        if n > 0 && from_router.push(ingress, &self.scratch[..n]) {
                            c.l3.icmp_sent.add(1);
                        } else {
                            c.l3.icmp_suppressed.add(1);
                        }
                        continue;
                    }
                    let Some(port) = self.ports[ingress as usize].as_mut() else {
                        continue;
                    };
                    let Some(slot) = port.tx_slot() else {
                        c.drop_in(ingress, None, DropReason::TxRingFull);
                        continue;
                    };
                    let frame = batch.frame(i);
                    let n = if frame.get(12..14) == Some(&[0x86, 0xdd]) {
                        build_icmp6_error(frame, ifc, kind, slot)
                    } else {
                        build_icmp4_error(frame, ifc, kind, slot)
                    };
                    if n == 0 {
                        c.l3.icmp_suppressed.add(1);
                        continue;
                    }
                    port.tx_commit(n);
                    dirty.insert(ingress);
                    c.l3.icmp_sent.add(1);
                    let pc = &c.ports[ingress as usize];
                    pc.tx_frames.add(1);
                    pc.tx_bytes.add(n as u64);
                }
                L3Verdict::Drop(_) => {}
            }
        }
        self.flush(dirty);
        if punted {
            self.shared.punts.wake();
        }
    }

    /// Routed multicast: frame `i` of `batch` (a routed port's) by the
    /// multicast routes. False if no route matches (the kernel — pimd —
    /// gets it, as before). Each outgoing port gets one copy with its own
    /// source MAC; TTL / hop limit decremented once.
    #[allow(clippy::too_many_arguments)]
    fn route_multicast(
        &mut self,
        mc: &McastTables,
        l3: &L3Tables,
        c: &WorkerCounters,
        batch: &mut FrameBatch,
        i: usize,
        dirty: &mut PortSet,
        from_router: &mut FrameBatch,
    ) -> bool {
        use pipeline::mcast::{inspect, McPacket};
        let McPacket::Data {
            group,
            source,
            ttl,
            ttl_off,
        } = inspect(batch.frame(i), 12)
        else {
            return false;
        };
        let Some(r) = mc
            .routes
            .lookup_index(0, group, source)
            .and_then(|e| mc.routes.route_at(e))
            .copied()
        else {
            return false;
        };
        let ingress = batch.port(i);
        if r.iif != tables::mcast::ANY_IIF && r.iif != ingress {
            c.mcast.rpf_fail.add(1);
            return true;
        }
        if ttl <= 1 || ttl <= r.ttl_threshold {
            c.mcast.ttl_threshold.add(1);
            return true;
        }
        c.mroutes.add(r.index, batch.frame(i).len() as u64);
        pipeline::mcast::decrement_ttl(batch.frame_mut(i), ttl_off);
        let mut copies = 0;
        for p in r.oifs.iter() {
            if p == ingress {
                continue;
            }
            let Some(ifc) = l3.interface(p) else {
                continue;
            };
            if batch.frame(i).len() - 14 > ifc.mtu as usize {
                // No fragmenting (IPv6 never; IPv4 multicast rarely sets
                // DF, but one copy is not worth a fragmenter): counted.
                c.l3.drops[pipeline::l3::L3Drop::Mtu as usize].add(1);
                continue;
            }
            batch.frame_mut(i)[6..12].copy_from_slice(&ifc.mac);
            if ifc.vlan.is_some() {
                // A VLAN interface: switched (and snooped) in its VLAN.
                if !from_router.push(p, batch.frame(i)) {
                    c.drop_in(p, None, DropReason::TxRingFull);
                    continue;
                }
            } else {
                self.transmit_raw(p, batch.frame(i), dirty, None);
            }
            copies += 1;
        }
        c.mcast.replicated.add(copies);
        true
    }

    /// Rebuild the policing buckets if the rates changed.
    fn sync_copp(&mut self) {
        let cfg = self.shared.copp.load();
        if !Arc::ptr_eq(&cfg, &self.copp_cfg) {
            let workers = self.shared.workers.load(Ordering::Relaxed);
            self.copp = CoppPolicer::new(&cfg, workers);
            self.copp_cfg = Arc::clone(&cfg);
        }
    }

    /// A link-layer control frame for the control plane (policed).
    fn control_frame(&mut self, port: u16, frame: &[u8], now: Instant) -> bool {
        self.sync_copp();
        let c = &*self.counters;
        let class = CoppClass::L2Control;
        if !self.copp.admit(class, self.ns(now)) {
            c.copp.dropped[class as usize].add(1);
            return false;
        }
        c.copp.passed[class as usize].add(1);
        if !self.shared.l2_control.push(port, 0, frame) {
            c.l3.punt_queue_full.add(1);
            return false;
        }
        true
    }

    /// Storm control on a received batch: frames over their port's limit
    /// become `Drop(StormControl)`; a port whose action is shutdown is
    /// flagged for the guard thread.
    fn storm_control(
        &mut self,
        st: &StormTable,
        batch: &FrameBatch,
        verdicts: &mut Verdicts,
        now: Instant,
    ) {
        let ns = self.ns(now);
        self.storm.sync(st, ns);
        let c = &*self.counters;
        for i in 0..batch.len() {
            let port = batch.port(i);
            let v = &mut verdicts.v[i];
            let Some(class) =
                pipeline::storm::check(&mut self.storm, st, port, batch.frame(i), v, ns)
            else {
                continue;
            };
            v.action = Action::Drop(DropReason::StormControl);
            c.drop_in(port, Some(v.vlan), DropReason::StormControl);
            if let Some(pc) = c.ports.get(port as usize) {
                pc.storm_drops[class as usize].add(1);
            }
            if st
                .ports
                .get(port as usize)
                .and_then(|p| p.as_ref())
                .is_some_and(|p| p.shutdown)
            {
                self.shared.storm_tripped[port as usize]
                    .fetch_or(1 << class as u8, Ordering::Relaxed);
            }
        }
    }

    /// One of this switch's own loop-detect probes came back on `port`
    /// in `vlan`: a loop, if it left in the same VLAN. Recorded for the
    /// guard thread, which decides what to do.
    fn own_probe(&mut self, port: u16, vlan: u16, p: &LoopProbe) {
        if let Some(pc) = self.counters.ports.get(port as usize) {
            pc.loop_probes.add(1);
        }
        if p.vlan != vlan {
            // Two VLANs joined by a cable: not a loop in either.
            return;
        }
        if let Some(seen) = self.shared.loop_seen.get(port as usize) {
            seen.store(
                (u32::from(p.port) + 1) << 16 | u32::from(vlan),
                Ordering::Relaxed,
            );
        }
    }

    /// An IGMP/MLD message for the snooping thread (policed as `igmp`).
    fn snoop_frame(&mut self, port: u16, vlan: u16, frame: &[u8], now: Instant) -> bool {
        self.sync_copp();
        let c = &*self.counters;
        let class = CoppClass::Igmp;
        if !self.copp.admit(class, self.ns(now)) {
            c.copp.dropped[class as usize].add(1);
            return false;
        }
        c.copp.passed[class as usize].add(1);
        if !self.shared.snoop.push_in_vlan(port, vlan, 0, frame) {
            c.mcast.snoop_queue_full.add(1);
            return false;
        }
        c.mcast.snooped.add(1);
        true
    }

    /// Frames the snooping thread sends (queries): out of one port or
    /// every port of their VLAN, each with that port's encapsulation.
    fn send_snooper_frames(&mut self, scratch: &mut FrameBatch) {
        let tables = self.shared.tables.load();
        let mut dirty = PortSet::EMPTY;
        while let Some(b) = self.shared.mc_out.pop() {
            let v = pipeline::Verdict {
                action: Action::Flood,
                vlan: b.vlan & 0xfff,
                inner_off: 12,
                pcp: 0,
            };
            let frame = b.frame();
            if frame.len() >= 14 {
                let members = tables.l2.vlans[v.vlan as usize].flood;
                if b.port == MC_OUT_FLOOD {
                    for p in members.iter() {
                        self.transmit(&tables, p, frame, &v, &mut dirty, scratch, None);
                    }
                } else if members.contains(b.port) {
                    self.transmit(&tables, b.port, frame, &v, &mut dirty, scratch, None);
                }
            }
            self.shared.mc_out.recycle(b);
        }
        self.flush(dirty);
    }

    /// Send a finished frame (already rewritten) out of port `p`; with
    /// `egress`, the port's output services decide (key, IP offset).
    #[inline]
    fn transmit_raw(
        &mut self,
        p: u16,
        frame: &[u8],
        dirty: &mut PortSet,
        egress: Option<(&Services, &AclKey, usize)>,
    ) {
        let c = &*self.counters;
        if self.ports[p as usize].is_none() {
            c.drop_in(p, None, DropReason::PortDown);
            return;
        }
        if let Some((s, k, l3off)) = egress {
            if self.svc.queues_on(p) {
                let n = frame.len().min(self.scratch.len());
                self.scratch[..n].copy_from_slice(&frame[..n]);
                self.queue_out(s, k, l3off, p, None, n, dirty);
                return;
            }
        }
        let Some(port) = self.ports[p as usize].as_mut() else {
            return;
        };
        let mut slot = port.tx_slot();
        if slot.is_none() {
            if port.flush().is_err() {
                self.shared.count_port_error(p);
            }
            slot = port.tx_slot();
        }
        let Some(slot) = slot else {
            c.drop_in(p, None, DropReason::TxRingFull);
            return;
        };
        let n = frame.len().min(slot.len());
        slot[..n].copy_from_slice(&frame[..n]);
        if let Some((s, k, l3off)) = egress {
            if self.svc.egress(s, k, &mut slot[..n], l3off, p, 0) == EgressVerdict::Deny {
                c.drop_in(p, None, DropReason::AclDeny);
                return;
            }
        }
        // Sources are never monitor ports, so copies are not mirrored again.
        let mirror = self.mirror.as_ref().map(|m| m.tx(p, 0));
        let mirror = mirror.filter(|d| !d.is_empty());
        if mirror.is_some() {
            self.mirror_buf[..n].copy_from_slice(&slot[..n]);
        }
        port.tx_commit(n);
        dirty.insert(p);
        let pc = &c.ports[p as usize];
        pc.tx_frames.add(1);
        pc.tx_bytes.add(n as u64);
        if let Some(dests) = mirror {
            self.mirror_out(dests, n, dirty);
        }
    }

    fn flush(&mut self, dirty: PortSet) {
        for p in dirty.iter() {
            if let Some(port) = self.ports[p as usize].as_mut() {
                if self.queued.contains(p) {
                    // The scheduler fills the ring; what does not fit waits.
                    let mut sink = CountingSink {
                        port: port.as_mut(),
                        frames: 0,
                        bytes: 0,
                    };
                    self.svc.drain(p, &mut sink);
                    let pc = &self.counters.ports[p as usize];
                    pc.tx_frames.add(sink.frames);
                    pc.tx_bytes.add(sink.bytes);
                    if self.svc.queued(p) == 0 {
                        self.queued.remove(p);
                    }
                }
                if port.flush().is_err() {
                    self.shared.count_port_error(p);
                }
            } else {
                self.queued.remove(p);
            }
        }
    }

    /// Output through port `p`'s class queues: the copy is in `scratch`
    /// (`n` bytes, IP header at `l3off`); egress services pick its class.
    #[allow(clippy::too_many_arguments)]
    fn queue_out(
        &mut self,
        s: &Services,
        k: &AclKey,
        l3off: usize,
        p: u16,
        vlan: Option<u16>,
        n: usize,
        dirty: &mut PortSet,
    ) {
        let c = &*self.counters;
        let class = match self
            .svc
            .egress(s, k, &mut self.scratch[..n], l3off, p, vlan.unwrap_or(0))
        {
            EgressVerdict::Deny => {
                c.drop_in(p, vlan, DropReason::AclDeny);
                return;
            }
            EgressVerdict::Queue(class) => class,
            EgressVerdict::Send => 0,
        };
        if !self.svc.enqueue(p, class, &self.scratch[..n]) {
            self.svc.count_queue_drop(s, p, class);
            c.drop_in(p, vlan, DropReason::QueueFull);
            return;
        }
        self.queued.insert(p);
        dirty.insert(p);
        if let Some(v) = vlan {
            let vc = &c.vlans[v as usize];
            vc.tx_frames.add(1);
            vc.tx_bytes.add(n as u64);
        }
        // Sent-frame mirrors of a queueing port copy at enqueue time.
        let mirror = self.mirror.as_ref().map(|m| m.tx(p, vlan.unwrap_or(0)));
        if let Some(dests) = mirror.filter(|d| !d.is_empty()) {
            self.mirror_buf[..n].copy_from_slice(&self.scratch[..n]);
            self.mirror_out(dests, n, dirty);
        }
    }

    fn sleep(&mut self) {
        let ms = self.opts.max_sleep.as_millis().max(1) as i32;
        if self.pollfds.is_empty() {
            std::thread::sleep(self.opts.max_sleep);
            return;
        }
        // SAFETY: pollfds is a valid, exclusively borrowed array of pollfd
        // whose length is passed alongside.
        unsafe {
            libc::poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                ms,
            );
        }
        // The inject queues' eventfds stay readable until read.
        self.shared.to_vlan.drain_event();
        self.shared.mc_out.drain_event();
    }

    fn forward(
        &mut self,
        batch: &mut FrameBatch,
        verdicts: &mut Verdicts,
        to_router: &mut FrameBatch,
        keys: &mut Keys,
        now: Instant,
        routed: bool,
    ) {
        let tables = self.shared.tables.load();
        let c = self.counters.clone();
        c.batches.add(1);
        let outcome = process(
            &tables,
            batch,
            self.shared.now(),
            verdicts,
            &self.shared.learn,
            &c,
        );
        let mc = self.shared.mcast.load_full();
        if let Some(mc) = &mc {
            pipeline::mcast::snoop(mc, batch, verdicts, &c);
        }
        if !routed {
            if let Some(st) = self.shared.storm.load_full() {
                self.storm_control(&st, batch, verdicts, now);
            }
        }
        let mut dirty = PortSet::EMPTY;
        self.mirror = self.shared.mirrors.load_full();
        if self.mirror.is_some() {
            // As received: before services re-mark anything.
            for i in 0..batch.len() {
                let vlan = verdicts.v[i].vlan;
                let dests = self.mirror.as_ref().map(|m| m.rx(batch.port(i), vlan));
                for d in dests.iter().flat_map(PortSet::iter) {
                    self.transmit_raw(d, batch.frame(i), &mut dirty, None);
                }
            }
        }
        let svc = self.shared.services.load_full();
        if let Some(s) = &svc {
            self.ingress_services(s, batch, verdicts, keys, now, routed);
        }
        let mut control = false;
        let mut snooped = false;
        for i in 0..batch.len() {
            let mut v = verdicts.v[i];
            let frame = batch.frame(i);
            if v.action == Action::Control {
                match LoopProbe::parse(frame, v.inner_off as usize) {
                    Some(p)
                        if p.switch_id != 0
                            && p.switch_id == self.shared.switch_id.load(Ordering::Relaxed) =>
                    {
                        self.own_probe(batch.port(i), v.vlan, &p);
                        continue;
                    }
                    // Another switch's probe: flooded like any multicast.
                    Some(_) => v.action = Action::Flood,
                    None => {
                        control |= self.control_frame(batch.port(i), frame, now);
                        continue;
                    }
                }
            }
            if matches!(v.action, Action::Snoop { .. }) {
                snooped |= self.snoop_frame(batch.port(i), v.vlan, frame, now);
            }
            let egress = match &svc {
                Some(s) if keys.on[i] && s.any_egress => {
                    // IP header offset relative to the inner part.
                    Some((
                        &**s,
                        &keys.k[i],
                        (keys.l3[i] as usize).saturating_sub(v.inner_off as usize),
                    ))
                }
                _ => None,
            };
            match v.action {
                Action::Drop(_) | Action::Control => {}
                Action::Unicast(p) => {
                    self.transmit(&tables, p, frame, &v, &mut dirty, to_router, egress);
                }
                Action::Flood | Action::Snoop { flood: true } => {
                    // A channel member's frames never flood back into the
                    // channel.
                    let ingress = tables.l2.logical(batch.port(i));
                    for p in tables.l2.vlans[v.vlan as usize].flood.iter() {
                        if p != ingress {
                            self.transmit(&tables, p, frame, &v, &mut dirty, to_router, egress);
                        }
                    }
                }
                Action::Snoop { flood: false } | Action::Mcast(_) => {
                    let Some(mc) = &mc else { continue };
                    let vl = mc.snooping(v.vlan).copied().unwrap_or_default();
                    let oifs = match v.action {
                        Action::Mcast(e) if e != pipeline::mcast::UNREGISTERED => {
                            match mc.routes.route_at(e) {
                                Some(r) => {
                                    c.mroutes.add(r.index, frame.len() as u64);
                                    r.oifs
                                }
                                None => vl.router_ports,
                            }
                        }
                        _ => vl.router_ports,
                    };
                    // Only ports that forward in the VLAN now (down,
                    // blocked or removed ports drop out here).
                    let oifs = oifs.and(&tables.l2.vlans[v.vlan as usize].flood);
                    let ingress = tables.l2.logical(batch.port(i));
                    let mut copies = 0;
                    for p in oifs.iter() {
                        if p != ingress {
                            self.transmit(&tables, p, frame, &v, &mut dirty, to_router, egress);
                            copies += 1;
                        }
                    }
                    c.mcast.replicated.add(copies);
                }
            }
        }
        self.flush(dirty);
        if control {
            self.shared.l2_control.wake();
        }
        if snooped {
            self.shared.snoop.wake();
        }
        if outcome.learned > 0 && self.shared.learner_parked.load(Ordering::Acquire) {
            if let Some(t) = self.shared.learner.get() {
                t.unpark();
            }
        }
    }

    /// Ingress services of a switched batch: keys, ACLs, input policy,
    /// flow accounting. Denied or policed frames become drops.
    fn ingress_services(
        &mut self,
        s: &Services,
        batch: &mut FrameBatch,
        verdicts: &mut Verdicts,
        keys: &mut Keys,
        now: Instant,
        routed: bool,
    ) {
        let c = self.counters.clone();
        let (ns, ms) = (self.ns(now), self.ms(now));
        self.svc.sync(s, ns);
        for i in 0..batch.len() {
            let v = &mut verdicts.v[i];
            keys.on[i] = false;
            if matches!(v.action, Action::Drop(_) | Action::Control) {
                continue;
            }
            let port = batch.port(i);
            let vlan_in = !s.vlan_in[v.vlan as usize & 0xfff].is_empty();
            if !(s.ingress_on(port) || vlan_in || s.any_egress) {
                continue;
            }
            keys.on[i] = true;
            let l3 = extract_key(batch.frame(i), v.inner_off as usize, v.vlan, &mut keys.k[i]);
            keys.l3[i] = l3 as u16;
            let t = tos(batch.frame(i), l3, keys.k[i].family);
            let len = ip_len(batch.frame(i), l3, keys.k[i].family);
            if let Some(d) = self.svc.ingress(
                s,
                &mut keys.k[i],
                batch.frame_mut(i),
                l3,
                port,
                v.vlan,
                &mut v.pcp,
                ns,
            ) {
                let r = drop_reason(d);
                v.action = Action::Drop(r);
                c.drop_in(port, Some(v.vlan), r);
                continue;
            }
            if routed {
                // Routed out of a VLAN interface: the flow was accounted
                // when it entered the router.
                continue;
            }
            let out_port = match v.action {
                Action::Unicast(p) => p,
                _ => u16::MAX,
            };
            self.svc
                .account(s, &keys.k[i], t, port, v.vlan, len, out_port, ms);
        }
    }

    #[inline]
    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.shared.epoch).as_nanos() as u64
    }

    #[inline]
    fn ms(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.shared.epoch).as_millis() as u64
    }

    /// Expire flows: a slice of the cache per loop, sized so the whole
    /// cache is visited about once a second.
    fn sweep_flows(&mut self) {
        let Some(cache) = self.svc.flows.as_mut() else {
            return;
        };
        let now = Instant::now();
        let dt = now.saturating_duration_since(self.last_sweep);
        if dt < Duration::from_millis(1) {
            return;
        }
        self.last_sweep = now;
        let (active, inactive) = match self.shared.services.load().as_ref().and_then(|s| s.flows) {
            Some(f) => (f.active_ms, f.inactive_ms),
            None => (0, 0), // accounting turned off: expire everything
        };
        let cap = cache.capacity();
        let budget = ((cap as u128 * dt.as_micros()) / 1_000_000).clamp(64, cap as u128) as usize;
        let ms = now.saturating_duration_since(self.shared.epoch).as_millis() as u64;
        let q = &self.flow_out;
        cache.sweep(ms, active, inactive, budget, &mut |r| q.push(r).is_ok());
    }

    /// At stop: hand every flow to the exporter.
    fn flush_flows(&mut self) {
        if let Some(cache) = self.svc.flows.as_mut() {
            let q = &self.flow_out;
            cache.flush(&mut |r| q.push(r).is_ok());
        }
    }

    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn transmit(
        &mut self,
        tables: &Tables,
        p: u16,
        frame: &[u8],
        v: &pipeline::Verdict,
        dirty: &mut PortSet,
        to_router: &mut FrameBatch,
        egress: Option<(&Services, &AclKey, usize)>,
    ) {
        let flooded = v.action == Action::Flood;
        let c = &*self.counters;
        // A port channel: one member, chosen by the flow's hash.
        let p = match tables.l2.ports.get(p as usize).map(|e| e.egress) {
            Some(tables::l2::Egress::Channel(n)) => {
                let ch = &tables.l2.channels[n as usize];
                let h = pipeline::channel::flow_hash(frame, v.inner_off as usize, ch.hash);
                match ch.pick(h) {
                    Some(m) => m,
                    None => {
                        c.drop_in(p, Some(v.vlan), DropReason::PortDown);
                        return;
                    }
                }
            }
            _ => p,
        };
        if self.ports[p as usize].is_none() {
            // No interface: a VLAN interface's port (to the router), or a
            // port that is down.
            let svi = self
                .shared
                .l3
                .load()
                .as_ref()
                .is_some_and(|l3| l3.is_svi(p));
            if svi {
                let n = egress::write(frame, v, tables::Encap::Untagged, &mut self.scratch);
                if !to_router.push(p, &self.scratch[..n]) {
                    c.drop_in(p, Some(v.vlan), DropReason::TxRingFull);
                }
                return;
            }
            c.drop_in(p, Some(v.vlan), DropReason::PortDown);
            return;
        }
        let encap = tables.l2.ports[p as usize].encap(v.vlan);
        let hdr = if matches!(encap, tables::Encap::Tagged { .. }) {
            16
        } else {
            12
        };
        if let Some((s, k, rel)) = egress {
            if self.svc.queues_on(p) {
                let n = egress::write(frame, v, encap, &mut self.scratch);
                self.queue_out(s, k, hdr + rel, p, Some(v.vlan), n, dirty);
                return;
            }
        }
        let Some(port) = self.ports[p as usize].as_mut() else {
            return;
        };
        let mut slot = port.tx_slot();
        if slot.is_none() {
            // Ring full: hand what is queued to the kernel and retry once.
            if port.flush().is_err() {
                self.shared.count_port_error(p);
            }
            slot = port.tx_slot();
        }
        let Some(slot) = slot else {
            c.drop_in(p, Some(v.vlan), DropReason::TxRingFull);
            return;
        };
        let n = egress::write(frame, v, encap, slot);
        if let Some((s, k, rel)) = egress {
            if self.svc.egress(s, k, &mut slot[..n], hdr + rel, p, v.vlan) == EgressVerdict::Deny {
                c.drop_in(p, Some(v.vlan), DropReason::AclDeny);
                return;
            }
        }
        let mirror = self.mirror.as_ref().map(|m| m.tx(p, v.vlan));
        let mirror = mirror.filter(|d| !d.is_empty());
        if mirror.is_some() {
            self.mirror_buf[..n].copy_from_slice(&slot[..n]);
        }
        port.tx_commit(n);
        dirty.insert(p);
        let pc = &c.ports[p as usize];
        pc.tx_frames.add(1);
        pc.tx_bytes.add(n as u64);
        if flooded {
            pc.tx_flooded.add(1);
        }
        let vc = &c.vlans[v.vlan as usize];
        vc.tx_frames.add(1);
        vc.tx_bytes.add(n as u64);
        if let Some(dests) = mirror {
            self.mirror_out(dests, n, dirty);
        }
    }

    /// Send the copy in `mirror_buf` (`n` bytes) to every port of `dests`.
    fn mirror_out(&mut self, dests: PortSet, n: usize, dirty: &mut PortSet) {
        let buf = std::mem::take(&mut self.mirror_buf);
        for d in dests.iter() {
            self.transmit_raw(d, &buf[..n], dirty, None);
        }
        self.mirror_buf = buf;
    }
}

fn drop_reason(d: ServiceDrop) -> DropReason {
    match d {
        ServiceDrop::AclDeny => DropReason::AclDeny,
        ServiceDrop::Policed => DropReason::Policed,
    }
}
