//! Pseudowire frames in the worker (see `circuits` for the state).

use super::circuits::*;
use super::*;
use crate::worker::*;
use io::FrameBatch;
use pipeline::mpls::{class_of_customer_frame, encap_pseudowire, MplsTables};
use pipeline::services::{extract_key, ip_len, tos};
use tables::acl::AclKey;
use tables::{NeighborState, PortSet};
use wire::mpls::{OuterHeader, Span};

/// A cheap flow hash of the customer frame's MAC addresses (ECMP choice
/// among transport next hops; one flow stays on one path).
#[inline]
fn mac_hash(f: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in &f[..12.min(f.len())] {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    h
}

impl Worker {
    /// Takes the attachment circuits' frames out of the switched batch
    /// and sends them into their pseudowires (see the module docs).
    ///
    /// A transport out of a VLAN interface (SVI): the labelled frame
    /// (next hop's MAC, the SVI's MAC) goes into `from_router`, which the
    /// layer-2 stage forwards in the VLAN like routed traffic leaving the
    /// SVI — tagged on trunk ports, to the port the next hop's MAC was
    /// learned on, flooded in the VLAN while it is not known.
    pub(crate) fn pseudowire_ingress(
        &mut self,
        batch: &mut FrameBatch,
        from_router: &mut FrameBatch,
    ) {
        if batch.is_empty() {
            return;
        }
        let Some(pws) = self.shared.pseudowires.load_full() else {
            return;
        };
        let n = batch.len();
        if !(0..n).any(|i| pws.ports.contains(batch.port(i))) {
            return;
        }
        let mut port_of = [0u16; io::BATCH_MAX];
        for (i, p) in port_of.iter_mut().enumerate().take(n) {
            *p = batch.port(i);
        }
        let me = self.index;
        let (Some(plane), Some(l3)) = (self.shared.mpls.load_full(), self.shared.l3.load_full())
        else {
            // No label plane: every circuit is down.
            for i in 0..n {
                if let Some(ac) = pws.circuit_of(batch.port(i), batch.frame(i)) {
                    pws.count_drop(me, ac, PwDrop::Down);
                }
            }
            batch.retain(|i| i >= n || !pws.ports.contains(port_of[i]));
            return;
        };
        let labels = self.mpls.labels.clone();
        let t = MplsTables {
            lfib: &plane.lfib,
            next_hops: &l3.nexthops,
            counters: &labels,
            cfg: &plane.cfg,
        };
        // The attachment ports' input services (ACLs, policy, flow
        // accounting) see the customer frame as it arrived, before it is
        // encapsulated: the report's circuits run with them on.
        let svc = self.shared.services.load_full();
        let now = std::time::Instant::now();
        let (now_ns, now_ms) = (self.ns(now), self.ms(now));
        if let Some(s) = &svc {
            self.svc.sync(s, now_ns);
        }
        let mut key = AclKey::default();
        let mut buf = std::mem::take(&mut self.mpls.buf);
        // The transport toward the remote PE is looked up in the FIB here,
        // within the batch, not taken from the pseudowire slot: the slot's
        // copy is the control plane's, refreshed every 50 ms, and the FIB
        // frees and reuses target ids after a grace period that counts
        // only the workers, so a copy held across batches could name a
        // reused id. One lookup per run of frames toward the same remote
        // PE: the circuits of a port's VLANs usually share one, and frames
        // cycling through 128 of them would otherwise look it up per frame.
        let mut last: Option<(std::net::IpAddr, Option<u32>)> = None;
        let mut keep = [true; io::BATCH_MAX];
        let mut dirty = PortSet::EMPTY;
        for (i, k) in keep.iter_mut().enumerate().take(n) {
            let port = batch.port(i);
            if !pws.ports.contains(port) {
                continue;
            }
            *k = false;
            if let Some(pc) = self.counters.ports.get(port as usize) {
                pc.count_rx(batch.frame(i));
            }
            let Some(ac) = pws.circuit_of(port, batch.frame(i)) else {
                pws.count_unmatched(me);
                continue;
            };
            let Some(circuit) = pws.circuit(ac) else {
                pws.count_unmatched(me);
                continue;
            };
            // Input services: a denied or policed frame is the port's
            // drop; a re-marked one goes on re-marked.
            let mut pcp_set = None;
            let mut account = None;
            if let Some(s) = svc.as_deref().filter(|s| s.ingress_on(port)) {
                let vlan = circuit.vlan.unwrap_or(0);
                let l3off = extract_key(batch.frame(i), 12, vlan, &mut key);
                let mut pcp = crate::services::NO_PCP;
                // The circuit's VLAN is the customer's, not a switch
                // VLAN: no VLAN lists (VLAN 0 has none).
                if let Some(d) = self.svc.ingress(
                    s,
                    &mut key,
                    batch.frame_mut(i),
                    l3off,
                    port,
                    0,
                    &mut pcp,
                    now_ns,
                ) {
                    let r = crate::services::drop_reason(d);
                    self.counters.drop_in(port, None, r);
                    continue;
                }
                pcp_set = (pcp != crate::services::NO_PCP).then_some(pcp);
                let f = batch.frame(i);
                let (t, len) = (tos(f, l3off, key.family), ip_len(f, l3off, key.family));
                account = Some((s, t, len, vlan));
            }
            let frame = batch.frame(i);
            let Some(pw) = plane.lfib.pseudowire_of_ac(ac) else {
                pws.count_drop(me, ac, PwDrop::Down);
                continue;
            };
            let len = frame.len();
            if len < ETH_LEN || (len - ETH_LEN) as u64 > circuit.mtu as u64 {
                pws.count_drop(me, ac, PwDrop::Mtu);
                continue;
            }
            if len > MAX_FRAME_LEN {
                pws.count_drop(me, ac, PwDrop::NoRoom);
                continue;
            }
            let Some(p) = t.lfib.pseudowire(pw) else {
                pws.count_drop(me, ac, PwDrop::Down);
                continue;
            };
            let target = match last {
                Some((peer, target)) if peer == circuit.peer => target,
                _ => {
                    let target = match circuit.peer {
                        std::net::IpAddr::V4(a) => l3.fib4.lookup(u32::from(a)),
                        std::net::IpAddr::V6(a) => l3.fib6.lookup(u128::from(a)),
                    };
                    last = Some((circuit.peer, target));
                    target
                }
            };
            let Some(r) = target.and_then(|tg| t.lfib.resolve(t.next_hops, tg, mac_hash(frame)))
            else {
                pws.count_drop(me, ac, PwDrop::NoPath);
                continue;
            };
            let out_port = r.next_hop.port;
            // Over a routed subinterface: tagged on its port; over a VLAN
            // interface: through the layer-2 stage (`from_router`).
            let sub = l3.subinterface(out_port);
            let svi = l3.is_svi(out_port);
            let Some(egress) = l3.interface(out_port) else {
                pws.count_drop(me, ac, PwDrop::NoPath);
                continue;
            };
            let gw = r.next_hop.gateway.unwrap_or(circuit.peer);
            let mac = match l3.neighbors.lookup(gw) {
                Some(nb) if nb.state != NeighborState::Incomplete => nb.mac,
                _ => {
                    pws.count_drop(me, ac, PwDrop::NoNeighbor);
                    continue;
                }
            };
            buf[HEADROOM..HEADROOM + len].copy_from_slice(frame);
            let outer = OuterHeader {
                dst: mac,
                src: egress.mac,
                vlan_tci: sub.map(|(_, tag)| tag & 0x0fff),
            };
            let span = Span {
                start: HEADROOM,
                len,
            };
            let class = class_of_customer_frame(frame, pcp_set);
            match encap_pseudowire(&plane.cfg, &mut buf, span, &outer, &p, &r, class) {
                Ok(s) if s.len - outer.len() > egress.mtu as usize => {
                    pws.count_drop(me, ac, PwDrop::Mtu)
                }
                Ok(s) if svi => {
                    if from_router.push(out_port, &buf[s.start..s.start + s.len]) {
                        pws.add(me, ac, 0, 1);
                        pws.add(me, ac, 1, len as u64);
                        if let Some((svc, t, bytes, vlan)) = account {
                            self.svc
                                .account(svc, &key, t, port, vlan, bytes, out_port, now_ms);
                        }
                    } else {
                        pws.count_drop(me, ac, PwDrop::NoRoom);
                    }
                }
                Ok(s) => {
                    pws.add(me, ac, 0, 1);
                    pws.add(me, ac, 1, len as u64);
                    if let Some((svc, t, bytes, vlan)) = account {
                        self.svc
                            .account(svc, &key, t, port, vlan, bytes, out_port, now_ms);
                    }
                    let f = &buf[s.start..s.start + s.len];
                    match sub {
                        Some((parent, _)) => {
                            if let Some(pc) = self.counters.ports.get(out_port as usize) {
                                pc.tx_frames.add(1);
                                pc.tx_bytes.add(s.len as u64 - 4);
                            }
                            // The port's output policy, as for IP out of
                            // a subinterface: its class for a frame with
                            // no IP key (the customer frame inside is not
                            // the port's), `set-pcp` in the tag, queues.
                            let no_ip = AclKey::default();
                            let policy = svc.as_deref().map(|sv| (sv, &no_ip, f.len()));
                            self.transmit_from_subinterface(parent, f, &mut dirty, policy);
                        }
                        None => self.transmit_raw(out_port, f, &mut dirty, None),
                    }
                }
                Err(_) => pws.count_drop(me, ac, PwDrop::NoRoom),
            }
        }
        self.mpls.buf = buf;
        self.flush(dirty);
        batch.retain(|i| i >= n || keep[i]);
    }

    /// Sends the customer frame `inner` (in `buf`) of a pseudowire out
    /// of attachment circuit `ac` (`pws`: the circuits, loaded once per
    /// batch by the caller): in tagged mode the frame must carry a tag,
    /// whose VLAN id becomes the local circuit's. False: no such circuit.
    pub(crate) fn pseudowire_egress(
        &mut self,
        pws: Option<&PwPlane>,
        buf: &mut [u8],
        inner: Span,
        ac: u32,
        dirty: &mut PortSet,
    ) -> bool {
        let Some(pws) = pws else {
            return false;
        };
        let Some(circuit) = pws.circuit(ac) else {
            return false;
        };
        let me = self.index;
        let Some(f) = buf.get_mut(inner.start..inner.start + inner.len) else {
            pws.count_drop(me, ac, PwDrop::NoRoom);
            return true;
        };
        if f.len() < ETH_LEN || (f.len() - ETH_LEN) as u64 > circuit.mtu as u64 {
            pws.count_drop(me, ac, PwDrop::Mtu);
            return true;
        }
        if let Some(v) = circuit.vlan {
            if f.len() < 18 || u16::from_be_bytes([f[12], f[13]]) != TPID_8021Q {
                pws.count_drop(me, ac, PwDrop::Untagged);
                return true;
            }
            let tci = u16::from_be_bytes([f[14], f[15]]) & 0xf000 | v;
            f[14..16].copy_from_slice(&tci.to_be_bytes());
        }
        pws.add(me, ac, 2, 1);
        pws.add(me, ac, 3, f.len() as u64);
        self.transmit_raw(circuit.port, f, dirty, None);
        true
    }
}
