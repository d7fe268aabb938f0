//! The layer-3 path: routed ports' frames and frames switched into a VLAN
//! interface, through the layer-3 stage; punts and ICMP errors.

use crate::services::{drop_reason, NO_PCP};
use crate::worker::*;
use io::FrameBatch;
use pipeline::copp::{self, CoppClass};
use pipeline::l3::{build_icmp4_error, build_icmp6_error, process_l3, L3Verdict, L3Verdicts, Punt};
use pipeline::services::{extract_key, ip_len, tos};
use pipeline::DropReason;
use std::time::Instant;
use tables::mcast::McastTables;
use tables::PortSet;

/// The IP header's offset in a routed frame (untagged by then).
const ETH_L3: usize = 14;

impl Worker {
    /// The layer-3 path: routed ports' frames.
    pub(crate) fn route(
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
            c.ports[batch.port(i) as usize].count_rx(batch.frame(i));
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
        // Frames tagged for a routed subinterface become its frames
        // (after the port's mirrors, which copy them as received).
        if l3.has_subinterfaces() {
            self.demux_subinterfaces(&l3, batch);
        }
        // Labelled frames: switched here, or popped and put back as IP.
        self.switch_labelled(&l3, batch, out, from_router);
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
        if let Some(m) = mc.as_deref().filter(|m| m.routing) {
            lookup_multicast(m, batch, out, keys);
        }
        let mut dirty = PortSet::EMPTY;
        let mut punted = false;
        for i in 0..batch.len() {
            // The 802.1p class the input policy set, if any (labels take it).
            let mut pcp_set = None;
            if let (Some(s), true) = (&svc, keys.on[i]) {
                if matches!(out.v[i], L3Verdict::Forward { .. } | L3Verdict::Punt(_)) {
                    let port = batch.port(i);
                    let l3off = keys.l3[i] as usize;
                    let mut pcp = NO_PCP;
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
                    pcp_set = (pcp != NO_PCP).then_some(pcp);
                    if let L3Verdict::Forward { port: out_port } = out.v[i] {
                        self.svc
                            .account(s, &keys.k[i], t, port, 0, len, out_port, now_ms);
                    }
                }
            }
            match out.v[i] {
                L3Verdict::Forward { port } if !out.labels[i].is_empty() => {
                    // A labelled target (FTN): push the stack and send.
                    let egress = match &svc {
                        Some(s) if keys.on[i] && s.any_egress => {
                            Some((&**s, &mut keys.k[i], keys.l3[i] as usize))
                        }
                        _ => None,
                    };
                    // TC from the class the QoS stage gave it: its
                    // `set-pcp`, else the (re-marked) DSCP's precedence.
                    let f = batch.frame(i);
                    let class = pipeline::mpls::class_of_ip(f, ETH_L3, pcp_set);
                    self.send_labelled(
                        &l3,
                        port,
                        f,
                        out.labels[i],
                        class,
                        egress,
                        &mut dirty,
                        from_router,
                    );
                }
                L3Verdict::Forward { port } => {
                    if let Some((parent, tag)) = l3.subinterface(port) {
                        // The subinterface's output services see the
                        // packet untagged, as routed; then it is tagged.
                        if let (Some(s), true) = (&svc, keys.on[i]) {
                            if s.any_egress {
                                let f = batch.frame_mut(i);
                                keys.k[i].dst_mac.copy_from_slice(&f[0..6]);
                                keys.k[i].src_mac.copy_from_slice(&f[6..12]);
                                let l3off = keys.l3[i] as usize;
                                if self.svc.egress(s, &keys.k[i], f, l3off, port, 0)
                                    == pipeline::services::EgressVerdict::Deny
                                {
                                    c.drop_in(port, None, DropReason::AclDeny);
                                    continue;
                                }
                            }
                        }
                        let f = batch.frame(i);
                        let n = f.len().min(self.tag_buf.len() - 4);
                        self.tag_buf[4..4 + n].copy_from_slice(&f[..n]);
                        // Then the port's output policy (not its ACLs),
                        // on the tagged frame: the IP header 4 bytes on.
                        let policy = match &svc {
                            Some(s) if keys.on[i] && s.any_egress => {
                                Some((&**s, &keys.k[i], keys.l3[i] as usize + 4))
                            }
                            _ => None,
                        };
                        self.send_tagged(port, parent, tag, n, &mut dirty, policy);
                    } else if l3.is_svi(port) {
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
                L3Verdict::Punt(reason)
                    if out.routed_by_label(i) || out.resolution_in_other_vrf(i, &l3).is_some() =>
                {
                    // Popped from a VPN label, or leaked from another
                    // VRF's route: the ingress port's kernel is another
                    // VRF's. A packet waiting for its neighbour goes to
                    // the egress interface's twin (in the label's or the
                    // leak's source VRF), whose kernel resolves it and
                    // sends the packet on; one to the VRF's own address
                    // to the twin of the interface holding it (an echo
                    // over the L3VPN, BGP to the PE-CE address); the rest
                    // is dropped (docs/vrf.md).
                    let to = out.resolution_port(i).or_else(|| out.own_address_port(i));
                    let Some(egress) = to else {
                        self.drop_label_routed_punt();
                        continue;
                    };
                    if self.punt_to_twin(&l3, egress, batch.frame(i), reason, now_ns) {
                        punted = true;
                    }
                }
                L3Verdict::Punt(reason) => {
                    if reason == pipeline::l3::Punt::Multicast {
                        if let Some(mc) = mc.as_deref().filter(|m| m.routing) {
                            let found = keys.mc_route[i];
                            if self.route_multicast(
                                mc,
                                &l3,
                                &c,
                                batch,
                                i,
                                found,
                                &mut dirty,
                                from_router,
                            ) {
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
                L3Verdict::IcmpError(_) if out.routed_by_label(i) => {
                    // Its source is in the VRF, reachable only through a
                    // labelled route; not answered (docs/vrf.md).
                    c.l3.icmp_suppressed.add(1);
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
                    if let Some((parent, tag)) = l3.subinterface(ingress) {
                        // Back out of the subinterface, tagged.
                        let frame = batch.frame(i);
                        let room = &mut self.tag_buf[4..];
                        let n = if frame.get(12..14) == Some(&[0x86, 0xdd]) {
                            build_icmp6_error(frame, ifc, kind, room)
                        } else {
                            build_icmp4_error(frame, ifc, kind, room)
                        };
                        if n == 0 {
                            c.l3.icmp_suppressed.add(1);
                            continue;
                        }
                        self.send_tagged(ingress, parent, tag, n, &mut dirty, None);
                        c.l3.icmp_sent.add(1);
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
                    // ICMP errors go to the sender's unicast address.
                    c.ports[ingress as usize].count_tx(pipeline::counters::Dest::Unicast, n);
                }
                L3Verdict::Drop(_) => {}
            }
        }
        self.flush(dirty);
        if punted {
            self.shared.punts.wake();
        }
    }
}

impl Worker {
    /// Frames a VRF namespace's kernel sent out of a twin to Lanyard's
    /// gateway (its catch-all route: what FRR and the connected routes in
    /// that kernel do not cover, e.g. the reply to a CE across the L3VPN):
    /// routed in the twin's VRF like a received packet — label push for
    /// VPN routes, rewrite, TTL — but with no uRPF, ingress services or
    /// receive counts (it was not received), and no ICMP error (its source
    /// is the kernel itself, which takes no packet from its own address):
    /// what cannot be forwarded is counted `kernel_unrouted` and dropped.
    pub(crate) fn route_from_kernel(
        &mut self,
        batch: &mut FrameBatch,
        out: &mut L3Verdicts,
        from_router: &mut FrameBatch,
    ) {
        let c = self.counters.clone();
        let Some(l3) = self.shared.l3.load_full() else {
            c.l3.kernel_unrouted.add(batch.len() as u64);
            return;
        };
        for i in 0..batch.len() {
            // The twin's VRF, as if popped from its VPN label: routed in
            // that VRF's FIB whatever the interface's uRPF says.
            // (A port with no interface is dropped `not-routed-port`.)
            if let Some(ifc) = l3.interface(batch.port(i)) {
                out.route_in_vrf(i, ifc.vrf);
            }
        }
        process_l3(&l3, batch, out, &c.l3);
        let now_ns = self.ns(Instant::now());
        let mut dirty = PortSet::EMPTY;
        let mut punted = false;
        for i in 0..batch.len() {
            match out.v[i] {
                L3Verdict::Forward { port } if !out.labels[i].is_empty() => {
                    let f = batch.frame(i);
                    let class = pipeline::mpls::class_of_ip(f, ETH_L3, None);
                    let labels = out.labels[i];
                    self.send_labelled(&l3, port, f, labels, class, None, &mut dirty, from_router);
                    c.l3.kernel_routed.add(1);
                }
                L3Verdict::Forward { port } => {
                    self.send_from_router(&l3, port, batch.frame(i), &mut dirty, from_router, None);
                    c.l3.kernel_routed.add(1);
                }
                L3Verdict::Punt(reason) => {
                    // A neighbour to resolve out of another VRF's
                    // interface (a leaked route): that VRF's twin, whose
                    // kernel resolves it. Anything else would go back to
                    // the kernel it came from.
                    match out.resolution_in_other_vrf(i, &l3) {
                        Some(egress) => {
                            punted |=
                                self.punt_to_twin(&l3, egress, batch.frame(i), reason, now_ns);
                            c.l3.kernel_routed.add(1);
                        }
                        None => c.l3.kernel_unrouted.add(1),
                    }
                }
                L3Verdict::IcmpError(_) | L3Verdict::Drop(_) => c.l3.kernel_unrouted.add(1),
            }
        }
        self.flush(dirty);
        if punted {
            self.shared.punts.wake();
        }
    }

    /// Punt `frame` to the twin of router interface `egress` (another
    /// interface than the one it came in by, possibly in another VRF),
    /// addressed to the twin so its kernel takes it: policed in the CoPP
    /// class of `reason`, counted as any punt. True if queued.
    pub(crate) fn punt_to_twin(
        &mut self,
        l3: &pipeline::l3::L3Tables,
        egress: u16,
        frame: &[u8],
        reason: Punt,
        now_ns: u64,
    ) -> bool {
        let c = &*self.counters;
        let Some(ifc) = l3.interface(egress) else {
            self.drop_label_routed_punt();
            return false;
        };
        let class = copp::classify(frame, reason);
        if !self.copp.admit(class, now_ns) {
            c.copp.dropped[class as usize].add(1);
            return false;
        }
        c.copp.passed[class as usize].add(1);
        let n = frame.len().min(self.scratch.len());
        self.scratch[..n].copy_from_slice(&frame[..n]);
        self.scratch[0..6].copy_from_slice(&ifc.mac);
        if self
            .shared
            .punts
            .push(egress, reason as u8, &self.scratch[..n])
        {
            c.l3.punted.add(1);
            true
        } else {
            c.l3.punt_queue_full.add(1);
            false
        }
    }

    /// Frames tagged with a routed subinterface's VLAN on its port: the
    /// tag comes off and the frame is the subinterface's (its port id).
    /// Other frames stay the port's. Counted as received on both.
    #[inline]
    fn demux_subinterfaces(&self, l3: &pipeline::l3::L3Tables, batch: &mut FrameBatch) {
        let c = &*self.counters;
        for i in 0..batch.len() {
            let f = batch.frame(i);
            if f.len() < 18 || f[12..14] != [0x81, 0x00] {
                continue;
            }
            let tag = u16::from_be_bytes([f[14], f[15]]) & 0x0fff;
            let Some(sub) = l3.subinterface_of(batch.port(i), tag) else {
                continue;
            };
            let len = f.len() - 4;
            batch.pop_vlan_tag(i, sub);
            if let Some(pc) = c.ports.get(sub as usize) {
                pc.rx_frames.add(1);
                pc.rx_bytes.add(len as u64);
            }
        }
    }

    /// Send the untagged frame in `tag_buf[4..4 + n]` out of subinterface
    /// `sub`: tagged `tag` on its port `parent`, through the port's output
    /// policy when `policy` is given ([`Worker::transmit_from_subinterface`]).
    #[inline]
    pub(crate) fn send_tagged(
        &mut self,
        sub: u16,
        parent: u16,
        tag: u16,
        n: usize,
        dirty: &mut PortSet,
        policy: Option<(&pipeline::services::Services, &tables::acl::AclKey, usize)>,
    ) {
        if n < 14 {
            return;
        }
        let mut buf = std::mem::take(&mut self.tag_buf);
        buf.copy_within(4..16, 0);
        buf[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        buf[14..16].copy_from_slice(&(tag & 0x0fff).to_be_bytes());
        if let Some(pc) = self.counters.ports.get(sub as usize) {
            pc.tx_frames.add(1);
            pc.tx_bytes.add(n as u64);
        }
        self.transmit_from_subinterface(parent, &buf[..n + 4], dirty, policy);
        self.tag_buf = buf;
    }
}

/// Look up the (S,G) / (*,G) routes of every routed multicast data frame
/// of the batch in one staged pass (their cache misses overlap: at
/// hundreds of thousands of routes each probe is a DRAM access). The
/// answers land in `keys.mc_route`, by frame.
fn lookup_multicast(mc: &McastTables, batch: &FrameBatch, out: &L3Verdicts, keys: &mut Keys) {
    use pipeline::mcast::{inspect, McPacket};
    let mut n = 0;
    let mut at = [0u16; io::BATCH_MAX];
    for i in 0..batch.len() {
        if out.v[i] != L3Verdict::Punt(pipeline::l3::Punt::Multicast) {
            continue;
        }
        if let McPacket::Data { group, source, .. } = inspect(batch.frame(i), 12) {
            keys.mc_keys[n] = (group, source);
            at[n] = i as u16;
            n += 1;
        }
    }
    if n == 0 {
        return;
    }
    mc.routes
        .lookup_index_batch(0, &keys.mc_keys[..n], &mut keys.mc_found[..n]);
    for (&i, &found) in at[..n].iter().zip(&keys.mc_found[..n]) {
        keys.mc_route[i as usize] = found;
    }
}
