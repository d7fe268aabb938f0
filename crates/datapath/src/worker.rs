//! A worker's state and its loop ([`Worker::run`]): the sequence of the
//! steps the sibling modules implement.

use crate::shared::*;
use io::{FrameBatch, Port};
use pipeline::copp::{CoppConfig, CoppPolicer};
use pipeline::l3::L3Verdicts;
use pipeline::services::ServiceState;
use pipeline::storm::StormState;
use pipeline::{Verdicts, WorkerCounters};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::acl::AclKey;
use tables::flow::FlowExportQueue;
use tables::mcast::McAddr;
use tables::mirror::MirrorTable;
use tables::{PortSet, MAX_PORTS};

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
    pub(crate) shared: Arc<Shared>,
    pub(crate) mailbox: Arc<Mailbox>,
    pub(crate) counters: Arc<WorkerCounters>,
    pub(crate) opts: WorkerOptions,
    /// How long to keep polling after the last frame: `opts.idle_spin`,
    /// or longer while a receive port busy polls (until the kernel gives
    /// its device's NAPI back: `io::Port::busy_poll_spin`).
    pub(crate) idle_spin: Duration,
    pub(crate) ports: Vec<Option<Box<dyn Port>>>,
    /// Ring counters already charged, per port (ports report totals).
    pub(crate) seen_stats: Vec<io::PortStats>,
    pub(crate) rx: Vec<u16>,
    /// Receive ports that are switched (not routed): they share `batch`.
    pub(crate) rx_switched: usize,
    /// Receive ports left with frames after their quota (reused by
    /// `receive`: no per-pass array as long as `MAX_PORTS`).
    pub(crate) rx_busy: Vec<u16>,
    /// The order of this pass's receive turns (reused likewise).
    pub(crate) rx_order: Vec<u16>,
    /// Receive rings parked while idle (`rx_idle.rs`).
    pub(crate) idle: crate::rx_idle::IdleRings,
    /// What an idle worker sleeps on (`wake_set.rs`).
    pub(crate) wake: crate::wake_set::WakeSet,
    /// Ports whose frames go through the layer-3 stage.
    pub(crate) routed: Vec<bool>,
    /// Index in `Shared::worker_seq`.
    pub(crate) index: usize,
    pub(crate) seq: u64,
    /// Control-plane policing buckets, and the rates they were built from.
    pub(crate) copp: CoppPolicer,
    pub(crate) copp_cfg: Arc<CoppConfig>,
    /// One frame's worth of room (SVI egress, ICMP errors into a VLAN).
    pub(crate) scratch: Box<[u8]>,
    /// A frame leaving a routed subinterface, room for its tag (`l3.rs`).
    pub(crate) tag_buf: Box<[u8]>,
    /// Policers and the flow cache.
    pub(crate) svc: ServiceState,
    /// Storm-control buckets of the ports this worker receives.
    pub(crate) storm: StormState,
    pub(crate) flow_out: Arc<FlowExportQueue>,
    pub(crate) last_sweep: Instant,
    /// Ports with frames waiting in their egress class queues.
    pub(crate) queued: PortSet,
    /// The mirror table for this batch (loaded once per batch).
    pub(crate) mirror: Option<Arc<MirrorTable>>,
    /// A copy of a frame as it left, for its mirror copies.
    pub(crate) mirror_buf: Box<[u8]>,
    /// Label switching state (`mpls.rs`).
    pub(crate) mpls: crate::mpls::MplsWorker,
    /// Inline service control (`inline.rs`).
    pub(crate) inline: InlineWorker,
}

/// This worker's inline service-control state (`inline.rs`).
pub(crate) struct InlineWorker {
    pub(crate) generation: u64,
    pub(crate) engine: Option<dpi::engine::Engine>,
    pub(crate) last_sweep_ms: u64,
}

impl InlineWorker {
    pub(crate) fn new() -> InlineWorker {
        InlineWorker {
            generation: 0,
            engine: None,
            last_sweep_ms: 0,
        }
    }
}

/// Per frame of a batch: its services key, where its IP header starts,
/// and whether the key was filled.
pub(crate) struct Keys {
    pub(crate) k: [AclKey; io::BATCH_MAX],
    pub(crate) l3: [u16; io::BATCH_MAX],
    pub(crate) on: [bool; io::BATCH_MAX],
    /// Routed multicast data frames of the batch: their (group, source),
    /// looked up together ([`tables::mcast::MrouteTable::lookup_index_batch`]).
    pub(crate) mc_keys: [(McAddr, McAddr); io::BATCH_MAX],
    pub(crate) mc_found: [Option<u32>; io::BATCH_MAX],
    /// Per frame: the route position found for it (valid for the frames
    /// whose (group, source) went into `mc_keys`).
    pub(crate) mc_route: [Option<u32>; io::BATCH_MAX],
}

impl Keys {
    pub(crate) fn new() -> Box<Keys> {
        Box::new(Keys {
            k: [AclKey::default(); io::BATCH_MAX],
            l3: [0; io::BATCH_MAX],
            on: [false; io::BATCH_MAX],
            mc_keys: [(McAddr::V4(0), McAddr::V4(0)); io::BATCH_MAX],
            mc_found: [None; io::BATCH_MAX],
            mc_route: [None; io::BATCH_MAX],
        })
    }
}

/// The frames of one pass of the loop and their decisions, reused from
/// pass to pass.
pub(crate) struct Batches {
    /// Switched ports' frames, and what the kernel sends out of VLAN
    /// interfaces' TAPs.
    pub(crate) l2: FrameBatch,
    /// Routed ports' frames.
    pub(crate) l3: FrameBatch,
    /// Frames switched to a VLAN interface (into the layer-3 stage).
    pub(crate) to_router: FrameBatch,
    /// Frames routed out of a VLAN interface (into the layer-2 stage).
    pub(crate) from_router: FrameBatch,
    /// Frames a VRF's kernel sent to Lanyard's gateway, to route in the
    /// twin's VRF (`l3.rs`, `route_from_kernel`).
    pub(crate) kernel: FrameBatch,
    pub(crate) verdicts: Verdicts,
    pub(crate) l3verdicts: Box<L3Verdicts>,
    pub(crate) keys: Box<Keys>,
}

impl Batches {
    fn new() -> Batches {
        Batches {
            l2: FrameBatch::new(),
            l3: FrameBatch::new(),
            to_router: FrameBatch::new(),
            from_router: FrameBatch::new(),
            kernel: FrameBatch::new(),
            verdicts: Verdicts::default(),
            l3verdicts: Box::<L3Verdicts>::default(),
            keys: Keys::new(),
        }
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
        let mpls = crate::mpls::MplsWorker::new(&shared.mpls_counters);
        Worker {
            shared,
            mailbox,
            counters,
            opts,
            idle_spin: opts.idle_spin,
            ports: (0..MAX_PORTS).map(|_| None).collect(),
            seen_stats: vec![io::PortStats::default(); MAX_PORTS],
            rx: Vec::new(),
            rx_switched: 0,
            rx_busy: Vec::new(),
            rx_order: Vec::new(),
            idle: crate::rx_idle::IdleRings::new(),
            wake: crate::wake_set::WakeSet::new(),
            routed: vec![false; MAX_PORTS],
            index,
            seq: 0,
            copp: CoppPolicer::new(&CoppConfig::default(), 1),
            copp_cfg: Arc::new(CoppConfig::default()),
            scratch: vec![0u8; io::MAX_FRAME_LEN].into_boxed_slice(),
            tag_buf: vec![0u8; io::MAX_FRAME_LEN + 4].into_boxed_slice(),
            svc: ServiceState::new(index),
            storm: StormState::default(),
            flow_out,
            last_sweep: Instant::now(),
            queued: PortSet::EMPTY,
            mirror: None,
            mirror_buf: vec![0u8; io::MAX_FRAME_LEN].into_boxed_slice(),
            mpls,
            inline: InlineWorker::new(),
        }
    }

    /// Run until `shared.stop` is set. One pass of the loop is the
    /// sequence of the worker's steps, each in its own module:
    /// housekeeping (`housekeeping.rs`), receive and classify into batches
    /// (`rx.rs`), the multicast control plane's own frames
    /// (`multicast.rs`), congested egress queues (`tx.rs`), then the
    /// layer-2 path (`l2.rs`) and the layer-3 path (`l3.rs`), each ending
    /// in services (`services.rs`) and transmit (`tx.rs`).
    pub fn run(mut self) {
        let mut b = Batches::new();
        let mut rr = 0usize;
        let mut last_rx = Instant::now();
        let mut last_stats = Instant::now();
        loop {
            // Before housekeeping: the batches give the shared-UMEM chunks
            // they hold back first, so that a port reset there (a link
            // going down) finds all of its own (`io::af_xdp::shared`).
            b.l2.clear();
            b.l3.clear();
            if !self.housekeeping(&mut last_stats) {
                drop(b);
                io::close_all(self.ports.iter_mut().filter_map(Option::take).collect());
                return;
            }
            b.from_router.clear();
            self.receive(&mut b.l2, &mut b.l3, &mut rr);
            if self.inline_pass(&mut b.l2) {
                last_rx = Instant::now();
            }
            // Pseudowire frames whose transport leaves by a VLAN interface
            // wait in `from_router` for the layer-2 stage.
            self.pseudowire_ingress(&mut b.l2, &mut b.from_router);
            if !self.shared.mc_out.is_empty() {
                // Copies for a VLAN interface would go to the router: the
                // kernel has no use for the snooping querier's queries.
                self.send_snooper_frames(&mut b.to_router);
                b.to_router.clear();
            }
            b.kernel.clear();
            self.receive_from_vlan_taps(&mut b.l2, &mut b.kernel);
            self.flush_queued();
            if b.l2.is_empty() && b.l3.is_empty() && b.from_router.is_empty() && b.kernel.is_empty()
            {
                if self.queued.is_empty() && last_rx.elapsed() >= self.idle_spin {
                    self.sleep();
                }
                continue;
            }
            last_rx = Instant::now();
            self.forward_batches(&mut b, last_rx);
        }
    }

    /// The received batches through their paths: switched frames through
    /// layer 2 (some into a VLAN interface), routed frames and those
    /// through layer 3 (some out of a VLAN interface), and those back
    /// through layer 2.
    #[inline]
    fn forward_batches(&mut self, b: &mut Batches, now: Instant) {
        // `from_router` may already hold pseudowire frames for a VLAN
        // interface (cleared at the top of the loop).
        b.to_router.clear();
        if !b.l2.is_empty() {
            self.forward(
                &mut b.l2,
                &mut b.verdicts,
                &mut b.to_router,
                &mut b.keys,
                now,
                false,
            );
        }
        if !b.l3.is_empty() {
            self.route(
                &mut b.l3,
                &mut b.l3verdicts,
                now,
                &mut b.from_router,
                &mut b.keys,
            );
        }
        if !b.kernel.is_empty() {
            self.route_from_kernel(&mut b.kernel, &mut b.l3verdicts, &mut b.from_router);
        }
        if !b.to_router.is_empty() {
            self.route(
                &mut b.to_router,
                &mut b.l3verdicts,
                now,
                &mut b.from_router,
                &mut b.keys,
            );
        }
        if !b.from_router.is_empty() {
            // Frames from the router never go back to it (they enter on
            // the VLAN's only router port, which flooding and the same-
            // port filter exclude), so `to_router` stays empty here.
            b.to_router.clear();
            self.forward(
                &mut b.from_router,
                &mut b.verdicts,
                &mut b.to_router,
                &mut b.keys,
                now,
                true,
            );
        }
    }

    #[inline]
    pub(crate) fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.shared.epoch).as_nanos() as u64
    }

    #[inline]
    pub(crate) fn ms(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.shared.epoch).as_millis() as u64
    }
}
