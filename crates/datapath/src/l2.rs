//! The layer-2 path: the pipeline over a switched batch, storm control,
//! loop-detection probes and link-layer control frames for the control
//! plane.

use crate::worker::*;
use io::FrameBatch;
use pipeline::copp::CoppClass;
use pipeline::storm::{LoopProbe, StormTable};
use pipeline::{process, Action, DropReason, Verdicts};
use std::sync::atomic::Ordering;
use std::time::Instant;
use tables::PortSet;

impl Worker {
    pub(crate) fn forward(
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
        let mut bpdus = false;
        let mut peer = false;
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
                    None if frame[..6] == pipeline::l2::VSWITCH_PEER_MAC => {
                        // Classified only on a peer-link port.
                        peer |= self.peer_frame(batch.port(i), frame);
                        continue;
                    }
                    None if frame[5] == 0 => {
                        // To the bridge group address: a BPDU.
                        bpdus |= self.control_frame(batch.port(i), frame, now);
                        continue;
                    }
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
                    let services = egress.is_some();
                    if !self.transmit_moved(&tables, p, batch, i, &v, &mut dirty, services) {
                        let frame = batch.frame(i);
                        self.transmit(&tables, p, frame, &v, &mut dirty, to_router, egress);
                    }
                }
                Action::Flood | Action::Snoop { flood: true } => {
                    // A channel member's frames never flood back into the
                    // channel.
                    let ingress = tables.l2.logical(batch.port(i));
                    // Over the peer link: not to channels the peer served.
                    let skip = self.peer_skip(&tables, batch.port(i));
                    for p in tables.l2.vlans[v.vlan as usize].flood.iter() {
                        if p != ingress && !skip.contains(p) {
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
                                    *r.oifs
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
                    let skip = self.peer_skip(&tables, batch.port(i));
                    let mut copies = 0;
                    for p in oifs.iter() {
                        if p != ingress && !skip.contains(p) {
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
        if bpdus {
            self.shared.bpdus.wake();
        }
        if peer {
            self.shared.peer_link.wake();
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

    /// A link-layer control frame for the control plane (policed).
    pub(crate) fn control_frame(&mut self, port: u16, frame: &[u8], now: Instant) -> bool {
        self.sync_copp();
        let c = &*self.counters;
        let class = CoppClass::L2Control;
        if !self.copp.admit(class, self.ns(now)) {
            c.copp.dropped[class as usize].add(1);
            return false;
        }
        c.copp.passed[class as usize].add(1);
        let q = if frame.get(5) == Some(&0) {
            &self.shared.bpdus
        } else {
            &self.shared.l2_control
        };
        if !q.push(port, 0, frame) {
            c.l3.punt_queue_full.add(1);
            return false;
        }
        true
    }

    /// Ports a frame received on `port` must not be copied to: for a
    /// virtual-switch peer-link port, the multichassis channels the peer
    /// reaches by its own members (MC-LAG split horizon); else none.
    #[inline]
    fn peer_skip<'t>(&self, tables: &'t tables::Tables, port: u16) -> &'t PortSet {
        match tables.l2.ports.get(port as usize) {
            Some(e) if e.peer_link => &tables.l2.peer_served,
            _ => &PortSet::EMPTY,
        }
    }

    /// A virtual-switch peer-protocol frame for the pair's thread. Not
    /// policed by CoPP: it arrives only on configured peer-link ports, and
    /// a full copy is a legitimate burst; the queue's bound still holds.
    pub(crate) fn peer_frame(&mut self, port: u16, frame: &[u8]) -> bool {
        if !self.shared.peer_link.push(port, 0, frame) {
            self.counters.l3.punt_queue_full.add(1);
            return false;
        }
        true
    }

    /// Storm control on a received batch: frames over their port's limit
    /// become `Drop(StormControl)`; a port whose action is shutdown is
    /// flagged for the guard thread.
    pub(crate) fn storm_control(
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
    pub(crate) fn own_probe(&mut self, port: u16, vlan: u16, p: &LoopProbe) {
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
}
