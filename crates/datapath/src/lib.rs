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

use arc_swap::ArcSwap;
use io::{FrameBatch, Port};
use pipeline::{egress, process, Action, DropReason, Verdicts, WorkerCounters};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};
use tables::{LearnQueue, PortSet, Tables, MAX_PORTS};

/// A change to a worker's set of ports.
pub enum PortCommand {
    /// Use `port` for port id `id`; receive on it too if `rx`.
    Attach {
        id: u16,
        port: Box<dyn Port>,
        rx: bool,
    },
    /// Close port `id` (the interface went away).
    Detach { id: u16 },
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
}

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
        }
    }

    /// Count a receive/transmit error reported by port `id` (shown in
    /// `show interfaces`; the supervisor handles the port's state).
    #[inline]
    pub fn count_port_error(&self, id: u16) {
        if let Some(c) = self.port_errors.get(id as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Seconds since start: the clock of MAC ages.
    #[inline]
    pub fn now(&self) -> u32 {
        self.epoch.elapsed().as_secs() as u32
    }
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
    pollfds: Vec<libc::pollfd>,
}

impl Worker {
    pub fn new(
        shared: Arc<Shared>,
        mailbox: Arc<Mailbox>,
        counters: Arc<WorkerCounters>,
        opts: WorkerOptions,
    ) -> Worker {
        Worker {
            shared,
            mailbox,
            counters,
            opts,
            ports: (0..MAX_PORTS).map(|_| None).collect(),
            seen_stats: vec![io::PortStats::default(); MAX_PORTS],
            rx: Vec::new(),
            pollfds: Vec::new(),
        }
    }

    fn apply_commands(&mut self) {
        self.mailbox.pending.store(false, Ordering::Release);
        let cmds =
            std::mem::take(&mut *self.mailbox.cmds.lock().unwrap_or_else(|e| e.into_inner()));
        for cmd in cmds {
            match cmd {
                PortCommand::Attach { id, port, rx } => {
                    self.collect_stats(id);
                    self.ports[id as usize] = Some(port);
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
            }
        }
        self.pollfds = self
            .rx
            .iter()
            .filter_map(|id| self.ports[*id as usize].as_ref()?.rx_fd())
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
        let mut verdicts = Verdicts::default();
        let mut rr = 0usize;
        let mut last_rx = Instant::now();
        let mut last_stats = Instant::now();
        loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                return;
            }
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
            let nrx = self.rx.len();
            for k in 0..nrx {
                if batch.is_full() {
                    break;
                }
                let id = self.rx[(rr + k) % nrx];
                if let Some(p) = self.ports[id as usize].as_mut() {
                    if p.recv(&mut batch, id).is_err() {
                        self.shared.count_port_error(id);
                    }
                }
            }
            rr = rr.wrapping_add(1);
            if batch.is_empty() {
                if last_rx.elapsed() >= self.opts.idle_spin {
                    self.sleep();
                }
                continue;
            }
            last_rx = Instant::now();
            self.forward(&batch, &mut verdicts);
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
    }

    fn forward(&mut self, batch: &FrameBatch, verdicts: &mut Verdicts) {
        let tables = self.shared.tables.load();
        let c = &*self.counters;
        c.batches.add(1);
        let outcome = process(
            &tables,
            batch,
            self.shared.now(),
            verdicts,
            &self.shared.learn,
            c,
        );
        let mut dirty = PortSet::EMPTY;
        for i in 0..batch.len() {
            let v = verdicts.v[i];
            let frame = batch.frame(i);
            match v.action {
                Action::Drop(_) => {}
                Action::Unicast(p) => {
                    self.transmit(&tables, p, frame, &v, false, &mut dirty);
                }
                Action::Flood => {
                    let ingress = batch.port(i);
                    for p in tables.l2.vlans[v.vlan as usize].flood.iter() {
                        if p != ingress {
                            self.transmit(&tables, p, frame, &v, true, &mut dirty);
                        }
                    }
                }
            }
        }
        for p in dirty.iter() {
            if let Some(port) = self.ports[p as usize].as_mut() {
                if port.flush().is_err() {
                    self.shared.count_port_error(p);
                }
            }
        }
        if outcome.learned > 0 && self.shared.learner_parked.load(Ordering::Acquire) {
            if let Some(t) = self.shared.learner.get() {
                t.unpark();
            }
        }
    }

    #[inline]
    fn transmit(
        &mut self,
        tables: &Tables,
        p: u16,
        frame: &[u8],
        v: &pipeline::Verdict,
        flooded: bool,
        dirty: &mut PortSet,
    ) {
        let c = &*self.counters;
        let Some(port) = self.ports[p as usize].as_mut() else {
            c.drop_in(p, Some(v.vlan), DropReason::PortDown);
            return;
        };
        let encap = tables.l2.ports[p as usize].encap(v.vlan);
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
    }
}
