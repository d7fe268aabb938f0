//! Per-frame label switching in the worker (see the parent module).

use super::*;
use crate::worker::*;
use io::{FrameBatch, BATCH_MAX};
use pipeline::l3::{L3Tables, L3Verdicts};
use pipeline::mpls::{process_labelled, push_ftn, MplsPunt, MplsTables, MplsVerdict};
use pipeline::services::Services;
use tables::acl::AclKey;
use tables::mpls::{LabelStack, Resolved};
use tables::{NeighborState, NextHop, PortSet};
use wire::mpls::Span;

impl crate::Shared {
    /// Packets and bytes received with top label `label`, all workers.
    pub fn label_counts(&self, label: u32) -> (u64, u64) {
        let w = self.mpls_counters.lock().unwrap_or_else(|e| e.into_inner());
        w.iter().fold((0, 0), |(p, b), (c, _)| {
            let (p2, b2) = c.get(label);
            (p + p2, b + b2)
        })
    }

    /// MPLS counters of all workers.
    pub fn mpls_totals(&self) -> MplsTotals {
        let w = self.mpls_counters.lock().unwrap_or_else(|e| e.into_inner());
        let mut t = MplsTotals::default();
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        for (_, s) in w.iter() {
            t.rx += g(&s.rx);
            t.forwarded += g(&s.forwarded);
            t.popped += g(&s.popped);
            t.pushed += g(&s.pushed);
            t.ttl_expired += g(&s.ttl_expired);
            t.router_alert += g(&s.router_alert);
            for (a, c) in t.drops.iter_mut().zip(&s.drops) {
                *a += g(c);
            }
        }
        t
    }
}

#[inline]
fn is_labelled(f: &[u8]) -> bool {
    f.len() >= ETH_LEN && u16::from_be_bytes([f[12], f[13]]) == ETHERTYPE_MPLS
}

impl Worker {
    /// Takes the labelled frames out of a routed batch and switches them:
    /// swapped / PHP'd frames leave at once, frames popped to IP are put
    /// back at the end of the batch for the layer-3 stage. Costs one scan
    /// of the EtherTypes when there are none.
    /// A packet popped from a VPN label and routed in its VRF (`table` of
    /// `PopLookup`) that the layer-3 stage would punt: counted
    /// `unsupported`, dropped.
    pub(crate) fn drop_label_routed_punt(&self) {
        bump(&self.mpls.stats.drops[STAGE_DROPS + MplsLocalDrop::Unsupported as usize]);
    }

    pub(crate) fn switch_labelled(
        &mut self,
        l3: &L3Tables,
        batch: &mut FrameBatch,
        out: &mut L3Verdicts,
    ) {
        let n = batch.len();
        if !(0..n).any(|i| is_labelled(batch.frame(i))) {
            return;
        }
        let Some(plane) = self.shared.mpls.load_full() else {
            // MPLS off: the layer-3 stage treats them as before.
            return;
        };
        let labels = self.mpls.labels.clone();
        let stats = self.mpls.stats.clone();
        let mut buf = std::mem::take(&mut self.mpls.buf);
        let t = MplsTables {
            lfib: &plane.lfib,
            next_hops: &l3.nexthops,
            counters: &labels,
            cfg: &plane.cfg,
        };
        let mut taken = [false; BATCH_MAX];
        // VRF (PopLookup table) of each frame appended to the batch.
        let mut vrf_of = [0u16; BATCH_MAX];
        let mut dirty = PortSet::EMPTY;
        let pws = self.shared.pseudowires.load_full();
        for (i, took) in taken.iter_mut().enumerate().take(n) {
            if !is_labelled(batch.frame(i)) {
                continue;
            }
            *took = true;
            bump(&stats.rx);
            let ingress = batch.port(i);
            let frame = batch.frame(i);
            let local = |d: MplsLocalDrop| bump(&stats.drops[STAGE_DROPS + d as usize]);
            match l3.interface(ingress) {
                Some(ifc) if frame[0..6] == ifc.mac => {}
                _ => {
                    local(MplsLocalDrop::NotForRouter);
                    continue;
                }
            }
            let len = frame.len().min(MAX_FRAME_LEN);
            buf[HEADROOM..HEADROOM + len].copy_from_slice(&frame[..len]);
            let span = Span {
                start: HEADROOM,
                len,
            };
            match process_labelled(&t, &mut buf, span, ETH_LEN, None) {
                MplsVerdict::Forward {
                    span,
                    next_hop_id,
                    port,
                    ..
                } => {
                    let Some(egress) = l3.interface(port).filter(|_| !l3.is_svi(port)) else {
                        local(MplsLocalDrop::Unsupported);
                        continue;
                    };
                    if span.len - ETH_LEN > egress.mtu as usize {
                        local(MplsLocalDrop::Mtu);
                        continue;
                    }
                    let mac = match l3.nexthops.get(next_hop_id) {
                        Some(NextHop {
                            gateway: Some(gw), ..
                        }) => match l3.neighbors.lookup(gw) {
                            Some(nb) if nb.state != NeighborState::Incomplete => Some(nb.mac),
                            _ => None,
                        },
                        _ => None,
                    };
                    let Some(mac) = mac else {
                        local(MplsLocalDrop::NoNeighbor);
                        continue;
                    };
                    let f = &mut buf[span.start..span.start + span.len];
                    f[0..6].copy_from_slice(&mac);
                    f[6..12].copy_from_slice(&egress.mac);
                    bump(&stats.forwarded);
                    self.transmit_raw(
                        port,
                        &buf[span.start..span.start + span.len],
                        &mut dirty,
                        None,
                    );
                }
                MplsVerdict::Route { span, table, .. } => {
                    // table 0: the ingress interface's VRF (the global
                    // table on an uplink); else the VRF a VPN label
                    // names, whatever the ingress interface.
                    if batch.push(ingress, &buf[span.start..span.start + span.len]) {
                        // Its index moves when the taken frames go (below).
                        vrf_of[batch.len() - 1 - n] = table;
                        bump(&stats.popped);
                    } else {
                        local(MplsLocalDrop::BatchFull);
                    }
                }
                MplsVerdict::Pseudowire { inner, ac, .. } => {
                    if !self.pseudowire_egress(pws.as_deref(), &mut buf, inner, ac, &mut dirty) {
                        local(MplsLocalDrop::Pseudowire);
                    }
                }
                MplsVerdict::Punt(MplsPunt::TtlExpired) => {
                    bump(&stats.ttl_expired);
                    self.answer_ttl_expired(l3, ingress, i, batch, &mut dirty);
                }
                MplsVerdict::Punt(MplsPunt::RouterAlert) => bump(&stats.router_alert),
                MplsVerdict::Drop(d) => bump(&stats.drops[stage_index(d)]),
            }
        }
        self.mpls.buf = buf;
        self.flush(dirty);
        let appended = batch.len() - n;
        batch.retain(|i| i >= n || !taken[i]);
        // Every taken frame was before the appended ones.
        let first = batch.len() - appended;
        for (p, &table) in vrf_of.iter().enumerate().take(appended) {
            if table != 0 {
                out.route_in_vrf(first + p, table);
            }
        }
    }

    /// ICMP time exceeded with the label stack (RFC 4950) for frame `i`,
    /// whose label TTL expired: policed as the `ttl-expired` CoPP class,
    /// sent back out of the port it came in by; counted with the
    /// layer-3 stage's ICMP errors (`icmp-sent` / `icmp-suppressed`).
    fn answer_ttl_expired(
        &mut self,
        l3: &L3Tables,
        ingress: u16,
        i: usize,
        batch: &FrameBatch,
        dirty: &mut PortSet,
    ) {
        let c = self.counters.clone();
        let class = pipeline::copp::CoppClass::TtlExpired;
        let now = self.ns(std::time::Instant::now());
        if !self.copp.admit(class, now) {
            c.copp.dropped[class as usize].add(1);
            c.l3.icmp_suppressed.add(1);
            return;
        }
        c.copp.passed[class as usize].add(1);
        let Some(ifc) = l3.interface(ingress).filter(|f| f.vlan.is_none()) else {
            c.l3.icmp_suppressed.add(1);
            return;
        };
        let mut out = std::mem::take(&mut self.scratch);
        let n = pipeline::mpls::build_ttl_exceeded(batch.frame(i), ifc, &mut out);
        if n == 0 {
            c.l3.icmp_suppressed.add(1);
        } else {
            self.transmit_raw(ingress, &out[..n], dirty, None);
            c.l3.icmp_sent.add(1);
        }
        self.scratch = out;
    }

    /// Sends an IP packet the layer-3 stage routed (MACs rewritten, TTL
    /// decremented) to a labelled target: pushes `stack` (TTL from the IP
    /// header in uniform mode, TC from class 0) and transmits it, through
    /// the egress services when `egress` says so (the key's MACs are
    /// refreshed and its layer-3 offset moved past the stack).
    pub(crate) fn send_labelled(
        &mut self,
        port: u16,
        svi: bool,
        frame: &[u8],
        stack: LabelStack,
        egress: Option<(&Services, &mut AclKey, usize)>,
        dirty: &mut PortSet,
    ) {
        let stats = self.mpls.stats.clone();
        let Some(plane) = self.shared.mpls.load_full() else {
            bump(&stats.drops[stage_index(MplsDrop::NoPath)]);
            return;
        };
        if svi {
            // Labelled out of a VLAN interface: not supported.
            bump(&stats.drops[STAGE_DROPS + MplsLocalDrop::Unsupported as usize]);
            return;
        }
        let len = frame.len();
        if len > MAX_FRAME_LEN {
            bump(&stats.drops[stage_index(MplsDrop::NoRoom)]);
            return;
        }
        let mut buf = std::mem::take(&mut self.mpls.buf);
        buf[HEADROOM..HEADROOM + len].copy_from_slice(frame);
        let r = Resolved {
            next_hop_id: 0,
            next_hop: NextHop {
                port,
                gateway: None,
            },
            labels: stack,
            on_backup: false,
        };
        let span = Span {
            start: HEADROOM,
            len,
        };
        match push_ftn(&plane.cfg, &mut buf, span, ETH_LEN, &r, 0) {
            Ok(s) => {
                bump(&stats.pushed);
                let out = &buf[s.start..s.start + s.len];
                let egress = egress.map(|(svc, k, l3off)| {
                    k.dst_mac.copy_from_slice(&out[0..6]);
                    k.src_mac.copy_from_slice(&out[6..12]);
                    (svc, &*k, l3off + 4 * stack.len())
                });
                self.transmit_raw(port, out, dirty, egress);
            }
            Err(d) => bump(&stats.drops[stage_index(d)]),
        }
        self.mpls.buf = buf;
    }
}
