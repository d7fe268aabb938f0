//! Transmit: copies into the egress rings or class queues, mirror copies,
//! and one flush per touched port.

use crate::worker::*;
use io::{FrameBatch, Port};
use pipeline::counters::{Dest, TxTally};
use pipeline::services::{EgressVerdict, Services};
use pipeline::{egress, Action, DropReason};
use tables::acl::AclKey;
use tables::{PortSet, Tables};

/// A port's TX ring as the egress scheduler's sink, counting what it
/// takes.
struct CountingSink<'a> {
    port: &'a mut dyn Port,
    sent: TxTally,
}

impl pipeline::qos::TxSink for CountingSink<'_> {
    #[inline]
    fn slot(&mut self) -> Option<&mut [u8]> {
        self.port.tx_slot()
    }

    #[inline]
    fn commit(&mut self, _class: usize, len: usize, dest: Dest) {
        self.port.tx_commit(len);
        self.sent.add(dest, len);
    }
}

impl Worker {
    /// Send a finished frame (already rewritten) out of port `p`; with
    /// `egress`, the port's output services decide (key, IP offset).
    #[inline]
    pub(crate) fn transmit_raw(
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
        let dest = Dest::of(&slot[..n]);
        port.tx_commit(n);
        dirty.insert(p);
        c.ports[p as usize].count_tx(dest, n);
        if let Some(dests) = mirror {
            self.mirror_out(dests, n, dirty);
        }
    }

    pub(crate) fn flush(&mut self, dirty: PortSet) {
        for p in dirty.iter() {
            if let Some(port) = self.ports[p as usize].as_mut() {
                if self.queued.contains(p) {
                    // The scheduler fills the ring; what does not fit waits.
                    let mut sink = CountingSink {
                        port: port.as_mut(),
                        sent: TxTally::default(),
                    };
                    self.svc.drain(p, &mut sink);
                    self.counters.ports[p as usize].count_tx_tally(&sink.sent);
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
    pub(crate) fn queue_out(
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
        self.enqueue_scratch(s, p, vlan, class, n, dirty);
    }

    /// Queue the copy in `scratch[..n]` in class `class` of port `p`
    /// (counted, mirrored as sent).
    fn enqueue_scratch(
        &mut self,
        s: &Services,
        p: u16,
        vlan: Option<u16>,
        class: usize,
        n: usize,
        dirty: &mut PortSet,
    ) {
        let c = &*self.counters;
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

    /// A routed subinterface's frame, already tagged, out of its port
    /// `p` (docs/vrf.md, "Subinterfaces"): with `policy` (the services,
    /// the packet's key, the IP header's offset in the tagged frame) the
    /// port's output policy applies — re-marking (its `set-pcp` lands in
    /// the tag) and its class queues, the link's scheduler — but not the
    /// port's output ACLs: those belong to the port's own interface, and
    /// the subinterface's own were applied before it was tagged.
    pub(crate) fn transmit_from_subinterface(
        &mut self,
        p: u16,
        frame: &[u8],
        dirty: &mut PortSet,
        policy: Option<(&Services, &AclKey, usize)>,
    ) {
        let Some((s, k, l3off)) =
            policy.filter(|(s, ..)| matches!(s.policy_out.get(p as usize), Some(Some(_))))
        else {
            self.transmit_raw(p, frame, dirty, None);
            return;
        };
        if self.ports[p as usize].is_none() {
            self.counters.drop_in(p, None, DropReason::PortDown);
            return;
        }
        let n = frame.len().min(self.scratch.len());
        self.scratch[..n].copy_from_slice(&frame[..n]);
        match self
            .svc
            .egress_policy(s, k, &mut self.scratch[..n], l3off, p)
        {
            EgressVerdict::Queue(class) => self.enqueue_scratch(s, p, None, class, n, dirty),
            // No ACL is consulted, so nothing is denied here.
            EgressVerdict::Send | EgressVerdict::Deny => {
                // Taken for the call (no allocation: an empty Vec) and
                // put back.
                let buf = std::mem::take(&mut self.scratch);
                self.transmit_raw(p, &buf[..n], dirty, None);
                self.scratch = buf;
            }
        }
    }

    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn transmit(
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
        let dest = Dest::of(&slot[..n]);
        port.tx_commit(n);
        dirty.insert(p);
        let pc = &c.ports[p as usize];
        pc.count_tx(dest, n);
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

    /// Unicast frame `i` of `batch` out of port `p` without a copy, when
    /// the batch holds it as a chunk of the worker's shared UMEM and `p`
    /// is an AF_XDP port on that UMEM (`io::af_xdp::shared`): its header
    /// rewritten in place (the tag pushed, popped or kept, as
    /// `pipeline::egress::write` would), its descriptor put on `p`'s
    /// transmit ring. False, having changed nothing, when that does not
    /// apply (the caller copies): a channel, output services, a mirror of
    /// what `p` sends.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn transmit_moved(
        &mut self,
        tables: &Tables,
        p: u16,
        batch: &mut FrameBatch,
        i: usize,
        v: &pipeline::Verdict,
        dirty: &mut PortSet,
        services: bool,
    ) -> bool {
        if services {
            return false;
        }
        let Some(u) = batch.umem_of(i) else {
            return false;
        };
        let Some(pe) = tables.l2.ports.get(p as usize) else {
            return false;
        };
        if matches!(pe.egress, tables::l2::Egress::Channel(_)) {
            return false;
        }
        let Some(port) = self.ports[p as usize].as_mut() else {
            return false;
        };
        if !port.umem().is_some_and(|pu| std::sync::Arc::ptr_eq(pu, u)) {
            return false;
        }
        if self
            .mirror
            .as_ref()
            .is_some_and(|m| !m.tx(p, v.vlan).is_empty())
        {
            return false;
        }
        let tag = match pe.encap(v.vlan) {
            tables::Encap::Untagged => None,
            tables::Encap::Tagged { tpid, vid } => {
                let tci = (v.pcp as u16) << 13 | (vid & 0xfff);
                let [a, b] = tpid.to_be_bytes();
                let [c, d] = tci.to_be_bytes();
                Some([a, b, c, d])
            }
        };
        let Some((addr, n)) = batch.rewrite_umem(i, v.inner_off as usize, tag, 60) else {
            return false;
        };
        // From here on the frame is rewritten: it goes, or is dropped.
        let c = &*self.counters;
        let dest = Dest::of(batch.frame(i));
        let mut sent = port.tx_umem(addr, n);
        if !sent {
            // Ring full: hand what is queued to the kernel and retry once.
            if port.flush().is_err() {
                self.shared.count_port_error(p);
            }
            sent = port.tx_umem(addr, n);
        }
        if !sent {
            c.drop_in(p, Some(v.vlan), DropReason::TxRingFull);
            return true;
        }
        batch.take_chunk(i);
        dirty.insert(p);
        let pc = &c.ports[p as usize];
        pc.count_tx(dest, n);
        let vc = &c.vlans[v.vlan as usize];
        vc.tx_frames.add(1);
        vc.tx_bytes.add(n as u64);
        true
    }

    /// Send the copy in `mirror_buf` (`n` bytes) to every port of `dests`.
    pub(crate) fn mirror_out(&mut self, dests: PortSet, n: usize, dirty: &mut PortSet) {
        let buf = std::mem::take(&mut self.mirror_buf);
        for d in dests.iter() {
            self.transmit_raw(d, &buf[..n], dirty, None);
        }
        self.mirror_buf = buf;
    }

    /// Congested ports: let their schedulers refill the rings.
    #[inline]
    pub(crate) fn flush_queued(&mut self) {
        if !self.queued.is_empty() {
            let q = self.queued;
            self.flush(q);
        }
    }
}
