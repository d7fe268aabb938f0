//! Receive and classify into batches: the switched and routed batches
//! filled fairly from the receive rings, and what the kernel sends out of
//! VLAN interfaces' TAPs.

use crate::worker::*;
use io::FrameBatch;

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
    /// It had none.
    Empty,
}

impl Worker {
    /// Fill the batches from the receive rings, sharing them fairly among
    /// the ports with work: each port takes at most its quota (the batch
    /// divided among the ports feeding it) per turn; a first pass visits
    /// every port from `next`, later passes only the ports that filled
    /// their quota, until the batch is full or nobody has more. The next
    /// call starts at the first port the full batch turned away, so under
    /// overload every busy port gets the same share of the worker,
    /// whatever the idle ports between them (issue 13).
    pub(crate) fn receive(
        &mut self,
        batch: &mut FrameBatch,
        l3batch: &mut FrameBatch,
        next: &mut usize,
    ) {
        let nrx = self.rx.len();
        if nrx == 0 {
            return;
        }
        let quota = |ports: usize| (io::BATCH_MAX / ports.max(1)).max(RX_QUOTA_MIN);
        let q = (quota(self.rx_switched), quota(nrx - self.rx_switched));
        let start = *next % nrx;
        let mut cut = None;
        // Taken and put back so `recv_quota` may borrow `self`; holds at
        // most `nrx` ids, so it stops growing after the first passes.
        let mut busy = std::mem::take(&mut self.rx_busy);
        busy.clear();
        // The rings to visit, from `start` round: all of them (few, or a
        // sweep), else only those not parked.
        let mut order = std::mem::take(&mut self.rx_order);
        order.clear();
        let sweep = self.idle.begin();
        if sweep || !self.idle.any_parked() {
            order.extend((start..nrx).chain(0..start).map(|i| i as u16));
        } else {
            let live = self.idle.live();
            let from = live.partition_point(|&i| (i as usize) < start);
            order.extend_from_slice(&live[from..]);
            order.extend_from_slice(&live[..from]);
        }
        for &i in &order {
            let i = i as usize;
            match self.recv_quota(i, batch, l3batch, q) {
                Turn::Refused => {
                    cut.get_or_insert(i);
                }
                Turn::Quota => {
                    self.idle.busy(i);
                    busy.push(i as u16)
                }
                Turn::Drained => self.idle.busy(i),
                Turn::Empty => {
                    if self.idle.empty(i, nrx) {
                        self.park_ring(i);
                    }
                }
            }
        }
        while !busy.is_empty() {
            let mut still = 0;
            for j in 0..busy.len() {
                let i = busy[j] as usize;
                match self.recv_quota(i, batch, l3batch, q) {
                    Turn::Refused => {
                        cut.get_or_insert(i);
                    }
                    Turn::Quota => {
                        busy[still] = i as u16;
                        still += 1;
                    }
                    Turn::Drained | Turn::Empty => {}
                }
            }
            busy.truncate(still);
        }
        self.rx_busy = busy;
        self.rx_order = order;
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
        } else if got == 0 {
            Turn::Empty
        } else {
            Turn::Drained
        }
    }

    /// Park receive ring `i` (idle for long) on its descriptor, if its
    /// port has one that wakes per frame (`rx_idle.rs`).
    #[cold]
    fn park_ring(&mut self, i: usize) {
        let id = self.rx[i] as usize;
        let fd = match self.ports[id].as_ref() {
            Some(p) if p.rx_ready_per_frame() => p.rx_fd(),
            _ => None,
        };
        if let Some(fd) = fd {
            self.idle.park(i, fd);
        }
    }

    /// What the kernel sends out of VLAN interfaces' TAPs joins the
    /// switched batch; what a VRF's kernel sends to Lanyard's gateway
    /// (`FROM_KERNEL_ROUTE`), the batch routed in the twin's VRF.
    #[inline]
    pub(crate) fn receive_from_vlan_taps(
        &mut self,
        batch: &mut FrameBatch,
        kernel: &mut FrameBatch,
    ) {
        while !batch.is_full() && !kernel.is_full() {
            let Some(b) = self.shared.to_vlan.pop() else {
                break;
            };
            if b.reason == crate::shared::FROM_KERNEL_ROUTE {
                kernel.push(b.port, b.frame());
            } else {
                batch.push(b.port, b.frame());
            }
            self.shared.to_vlan.recycle(b);
        }
    }
}
