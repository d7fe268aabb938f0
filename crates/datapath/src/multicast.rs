//! Multicast: routed multicast replication, snooped control frames to the
//! multicast control plane and its own frames (queries) out.

use crate::shared::*;
use crate::worker::*;
use io::FrameBatch;
use pipeline::copp::CoppClass;
use pipeline::l3::L3Tables;
use pipeline::{Action, DropReason, WorkerCounters};
use std::time::Instant;
use tables::mcast::McastTables;
use tables::PortSet;

impl Worker {
    /// Routed multicast: frame `i` of `batch` (a routed port's) by the
    /// multicast routes. False if no route matches (the kernel — pimd —
    /// gets it, as before). Each outgoing port gets one copy with its own
    /// source MAC; TTL / hop limit decremented once. `found`: the route's
    /// position, looked up for the whole batch beforehand.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn route_multicast(
        &mut self,
        mc: &McastTables,
        l3: &L3Tables,
        c: &WorkerCounters,
        batch: &mut FrameBatch,
        i: usize,
        found: Option<u32>,
        dirty: &mut PortSet,
        from_router: &mut FrameBatch,
    ) -> bool {
        use pipeline::mcast::{inspect, McPacket};
        let McPacket::Data { ttl, ttl_off, .. } = inspect(batch.frame(i), 12) else {
            return false;
        };
        let Some(r) = found.and_then(|e| mc.routes.route_at(e)) else {
            return false;
        };
        let ingress = batch.port(i);
        if !r.accepts(ingress) {
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

    /// An IGMP/MLD message for the snooping thread (policed as `igmp`).
    pub(crate) fn snoop_frame(&mut self, port: u16, vlan: u16, frame: &[u8], now: Instant) -> bool {
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
    pub(crate) fn send_snooper_frames(&mut self, scratch: &mut FrameBatch) {
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
}
