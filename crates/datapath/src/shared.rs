//! What the control plane and the workers share: the snapshot pointers,
//! queues, counters of the quiescent points, and each worker's mailbox.

use crate::link_alarm;
use crate::punt::{self, PuntQueue};
use arc_swap::{ArcSwap, ArcSwapOption};
use io::Port;

use pipeline::copp::CoppConfig;
use pipeline::l3::L3Tables;
use pipeline::services::Services;
use pipeline::storm::StormTable;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};
use tables::flow::FlowExportQueue;
use tables::mcast::McastTables;
use tables::mirror::MirrorTable;
use tables::{LearnQueue, Tables, MAX_PORTS};

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
    /// Port `id`'s interface has a new MTU.
    Mtu { id: u16, mtu: u32 },
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
    /// The cache's arrays advised for 2 MB pages (start, bytes): the
    /// control thread reads their backing from /proc (a worker must not).
    pub huge_ranges: Vec<(usize, usize)>,
    /// Packets whose flow found no room.
    pub cache_full: u64,
    /// Records waiting for the exporter.
    pub queued: usize,
    pub top: Vec<tables::flow::FlowRecord>,
}

/// A worker's mailbox: commands plus a flag so the loop checks cheaply.
#[derive(Default)]
pub struct Mailbox {
    pub(crate) pending: AtomicBool,
    pub(crate) cmds: Mutex<Vec<PortCommand>>,
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
    /// workers switch them in the VLAN, entering on the SVI's port. Also,
    /// with reason [`FROM_KERNEL_ROUTE`], frames a VRF's kernel sent to
    /// Lanyard's gateway: the workers route them in the twin's VRF.
    pub to_vlan: PuntQueue,
    /// Per worker, a counter bumped at the top of every loop: a worker
    /// holds no reference into the tables between two bumps, which is
    /// what [`Shared::quiesce`] waits for.
    pub(crate) worker_seq: Box<[AtomicU64]>,
    pub(crate) workers: AtomicUsize,
    /// ACLs, QoS and flow accounting; `None` when none are configured.
    pub services: ArcSwapOption<Services>,
    /// Inline service control (bump-in-the-wire pairs and their engines);
    /// `None` when not configured.
    pub inline: ArcSwapOption<dpi::inline::InlinePlan>,
    /// Per worker (registration order), the queue of expired flows.
    pub flow_queues: Mutex<Vec<Arc<FlowExportQueue>>>,
    /// Port mirroring; `None` without sessions.
    pub mirrors: ArcSwapOption<MirrorTable>,
    /// Control-plane policing rates (on by default).
    pub copp: ArcSwap<CoppConfig>,
    /// Link-layer control frames (LACP) for the control plane.
    pub l2_control: PuntQueue,
    /// BPDUs (to 01:80:c2:00:00:00) of spanning tree ports, for the
    /// spanning tree thread.
    pub bpdus: PuntQueue,
    /// Virtual-switch peer-protocol frames from peer-link ports, for the
    /// virtual-switch thread (`protocols::vswitch`).
    pub peer_link: PuntQueue,
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
    /// The label plane (LFIB + MPLS settings); `None`: MPLS off.
    pub mpls: ArcSwapOption<crate::mpls::MplsPlane>,
    /// Every worker's label and MPLS counters, for `show mpls`.
    pub mpls_counters: crate::mpls::MplsRegistry,
    /// Attachment circuits of Ethernet pseudowires; `None`: none.
    pub pseudowires: ArcSwapOption<crate::mpls::circuits::PwPlane>,
}

/// `PuntBuf::reason` of a `to_vlan` frame a VRF namespace's kernel sent
/// to Lanyard's gateway (its catch-all route, docs/vrf.md "Traffic of a
/// VRF's own kernel"): routed in the VRF of the twin (`port`), not
/// switched.
pub const FROM_KERNEL_ROUTE: u8 = 1;

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
/// Peer-protocol frames queued for the virtual-switch thread: a full copy
/// of a large MAC table arrives as a burst of up to ~900 frames per
/// 100,000 addresses.
pub const PEER_LINK_QUEUE_DEPTH: usize = 4096;

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
            inline: ArcSwapOption::empty(),
            flow_queues: Mutex::new(Vec::new()),
            mirrors: ArcSwapOption::empty(),
            copp: ArcSwap::from_pointee(CoppConfig::default()),
            l2_control: PuntQueue::new(L2_CONTROL_QUEUE_DEPTH)
                .expect("eventfd for the l2 control queue"),
            bpdus: PuntQueue::new(L2_CONTROL_QUEUE_DEPTH).expect("eventfd for the BPDU queue"),
            peer_link: PuntQueue::new(PEER_LINK_QUEUE_DEPTH)
                .expect("eventfd for the peer-link queue"),
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
            mpls: ArcSwapOption::empty(),
            mpls_counters: Mutex::new(Vec::new()),
            pseudowires: ArcSwapOption::empty(),
        }
    }

    pub(crate) fn register_worker(&self) -> usize {
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
