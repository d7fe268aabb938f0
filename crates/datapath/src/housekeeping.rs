//! The start of every pass and what the worker does besides frames:
//! quiescent point, stop and hand-over, ring counters, the mailbox's
//! commands, sleeping when idle, and the CoPP buckets' refresh.

use crate::shared::*;
use crate::worker::*;

use pipeline::copp::CoppPolicer;
use pipeline::DropReason;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::MAX_PORTS;

/// How often a worker reads its ports' ring counters (a system call each).
const STATS_EVERY: Duration = Duration::from_millis(200);

impl Worker {
    /// The start of every pass: a quiescent point (nothing from the
    /// previous pass is held), stop and hand-over, flow aging, the ports'
    /// ring counters now and then, and the control plane's commands.
    /// Returns false when the worker must stop.
    #[inline]
    pub(crate) fn housekeeping(&mut self, last_stats: &mut Instant) -> bool {
        self.seq = self.seq.wrapping_add(1);
        self.shared.worker_seq[self.index].store(self.seq, Ordering::SeqCst);
        if self.shared.stop.load(Ordering::Relaxed) {
            self.flush_flows();
            return false;
        }
        if self.shared.handover.load(Ordering::Relaxed) {
            self.hand_over();
        }
        self.sweep_flows();
        if last_stats.elapsed() >= STATS_EVERY {
            *last_stats = Instant::now();
            for id in 0..MAX_PORTS as u16 {
                self.collect_stats(id);
            }
            self.idle.publish(&self.counters);
        }
        if self.mailbox.pending.load(Ordering::Acquire) {
            self.apply_commands();
        }
        true
    }

    pub(crate) fn apply_commands(&mut self) {
        self.mailbox.pending.store(false, Ordering::Release);
        let cmds =
            std::mem::take(&mut *self.mailbox.cmds.lock().unwrap_or_else(|e| e.into_inner()));
        // Whether the receive list or a receive socket changed: only then
        // are the parked rings and the wake set rebuilt (a flow dump every
        // event-manager poll must not unpark 200 rings).
        let mut rings_changed = false;
        for cmd in cmds {
            rings_changed |= matches!(
                cmd,
                PortCommand::Attach { .. }
                    | PortCommand::Detach { .. }
                    | PortCommand::DiscardTx { .. }
            );
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
                            let mut moved = pipeline::counters::TxTally::default();
                            a.take_tx(&mut |frame| {
                                if b.send(frame) {
                                    moved.add(pipeline::counters::Dest::of(frame), frame.len());
                                }
                            });
                            let _ = b.flush();
                            self.counters.ports[t].count_tx_tally(&moved);
                        }
                        self.ports[f] = src;
                    }
                }
                PortCommand::Mtu { id, mtu } => {
                    if let Some(p) = self.ports.get_mut(id as usize).and_then(Option::as_mut) {
                        p.set_mtu(mtu);
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
                        d.huge_ranges = c.advised_ranges();
                        c.top(n, &mut d.top);
                    }
                    let _ = reply.try_send(d);
                }
            }
        }
        if !rings_changed {
            return;
        }
        self.idle.reset(self.rx.len());
        self.idle_spin = self
            .rx
            .iter()
            .filter_map(|id| self.ports[*id as usize].as_ref()?.busy_poll_spin())
            .fold(self.opts.idle_spin, Duration::max);
        self.rx_switched = self
            .rx
            .iter()
            .filter(|&&id| !self.routed[id as usize])
            .count();
        let fds: Vec<RawFd> = self
            .rx
            .iter()
            .filter_map(|id| self.ports[*id as usize].as_ref()?.rx_fd())
            .chain(std::iter::once(self.shared.to_vlan.event_fd()))
            .chain(std::iter::once(self.shared.mc_out.event_fd()))
            .collect();
        self.wake.rebuild(fds);
    }

    /// Charge ring-level drops the kernel counted since the last look.
    pub(crate) fn collect_stats(&mut self, id: u16) {
        let Some(p) = self.ports[id as usize].as_mut() else {
            return;
        };
        let now = p.stats();
        let was = std::mem::replace(&mut self.seen_stats[id as usize], now);
        let pc = &self.counters.ports[id as usize];
        pc.drops[DropReason::RxRingFull as usize]
            .add(now.rx_ring_drops.saturating_sub(was.rx_ring_drops));
        pc.drops[DropReason::TxError as usize].add(now.tx_errors.saturating_sub(was.tx_errors));
        pc.rx_csum_completed
            .add(now.rx_csum_completed.saturating_sub(was.rx_csum_completed));
        pc.umem_moved
            .add(now.umem_moved.saturating_sub(was.umem_moved));
        // A gauge kept in a counter: it moves by the difference.
        pc.umem_away.add(now.umem_away.wrapping_sub(was.umem_away));
    }

    /// Restart in place: hand every port to the successor image, then
    /// wait for the `exec` that ends this process (never drop the ports:
    /// that would close what was handed over).
    pub(crate) fn hand_over(&mut self) -> ! {
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

    pub(crate) fn sleep(&mut self) {
        if self.wake.is_empty() {
            std::thread::sleep(self.opts.max_sleep);
            return;
        }
        self.wake.wait(self.opts.max_sleep);
        // The inject queues' eventfds stay readable until read.
        self.shared.to_vlan.drain_event();
        self.shared.mc_out.drain_event();
    }

    /// Rebuild the policing buckets if the rates changed.
    pub(crate) fn sync_copp(&mut self) {
        let cfg = self.shared.copp.load();
        if !Arc::ptr_eq(&cfg, &self.copp_cfg) {
            let workers = self.shared.workers.load(Ordering::Relaxed);
            self.copp = CoppPolicer::new(&cfg, workers);
            self.copp_cfg = Arc::clone(&cfg);
        }
    }
}
