//! Per-frame label switching in the worker (see the parent module).

use super::*;
use crate::worker::*;
use io::{FrameBatch, BATCH_MAX};
use pipeline::l3::{L3Tables, L3Verdicts};
use pipeline::mpls::{
    build_ttl_exceeded_lsp, process_labelled, push_ftn, ttl_exceeded_down_lsp, MplsPunt,
    MplsTables, MplsVerdict,
};
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
            t.ttl_icmp_down_lsp += g(&s.ttl_icmp_down_lsp);
            t.router_alert += g(&s.router_alert);
            for (a, c) in t.drops.iter_mut().zip(&s.drops) {
                *a += g(c);
            }
        }
        t
    }
}

/// Where the answer to an expired label TTL goes.
#[derive(Clone, Copy)]
struct TtlAnswer {
    /// The port the frame came in by (its interface's address is the
    /// answer's source).
    ingress: u16,
    /// Down the LSP rather than back (RFC 3032 §2.3.2).
    down_lsp: bool,
}

/// True if `a` has a route in the default FIB.
fn route_in_default(l3: &L3Tables, a: std::net::IpAddr) -> bool {
    match a {
        std::net::IpAddr::V4(v) => l3.fib4.lookup(u32::from(v)).is_some(),
        std::net::IpAddr::V6(v) => l3.fib6.lookup(u128::from(v)).is_some(),
    }
}

#[inline]
fn is_labelled(f: &[u8]) -> bool {
    f.len() >= ETH_LEN && u16::from_be_bytes([f[12], f[13]]) == ETHERTYPE_MPLS
}

impl Worker {
    /// A packet popped from a VPN label and routed in its VRF (`table` of
    /// `PopLookup`) that the layer-3 stage would punt for anything but a
    /// neighbour to resolve (those go to the egress interface's twin):
    /// counted `unsupported`, dropped.
    pub(crate) fn drop_label_routed_punt(&self) {
        bump(&self.mpls.stats.drops[STAGE_DROPS + MplsLocalDrop::Unsupported as usize]);
    }

    /// Takes the labelled frames out of a routed batch and switches them:
    /// swapped / PHP'd frames leave at once, frames popped to IP are put
    /// back at the end of the batch for the layer-3 stage. Costs one scan
    /// of the EtherTypes when there are none.
    pub(crate) fn switch_labelled(
        &mut self,
        l3: &L3Tables,
        batch: &mut FrameBatch,
        out: &mut L3Verdicts,
        from_router: &mut FrameBatch,
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
        // VRF (PopLookup table) of each frame appended to the batch, and
        // of each popped in place (by its index before the retain).
        let mut vrf_of = [0u16; BATCH_MAX];
        let mut vrf_at = [0u16; BATCH_MAX];
        let mut dirty = PortSet::EMPTY;
        let pws = self.shared.pseudowires.load_full();
        // Swapped frames out of a routed subinterface take its port's
        // output policy (below, `send_switched`).
        let svc = if l3.has_subinterfaces() {
            self.shared.services.load_full()
        } else {
            None
        };
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
                } => match self.send_switched(
                    l3,
                    &mut buf,
                    span,
                    next_hop_id,
                    port,
                    &mut dirty,
                    from_router,
                    svc.as_deref(),
                ) {
                    Ok(()) => bump(&stats.forwarded),
                    Err(d) => local(d),
                },
                MplsVerdict::Route { span, table, .. } => {
                    // table 0: the ingress interface's VRF (the global
                    // table on an uplink); else the VRF a VPN label
                    // names, whatever the ingress interface.
                    // In place of its labelled frame (popping shortens
                    // it): a batch full of labelled frames, as an egress
                    // PE under load receives, had no room to append to,
                    // and lost every popped packet as `batch-full`.
                    let popped = &buf[span.start..span.start + span.len];
                    if batch.replace(i, popped) {
                        *took = false;
                        vrf_at[i] = table;
                        bump(&stats.popped);
                    } else if batch.push(ingress, popped) {
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
                    let frame = batch.frame(i);
                    let down = ttl_exceeded_down_lsp(plane.cfg.icmp_tunneling, frame, |a| {
                        route_in_default(l3, a)
                    });
                    let a = TtlAnswer {
                        ingress,
                        down_lsp: down,
                    };
                    self.answer_ttl_expired(l3, &t, &mut buf, a, frame, &mut dirty, from_router);
                }
                MplsVerdict::Punt(MplsPunt::RouterAlert) => bump(&stats.router_alert),
                MplsVerdict::Drop(d) => bump(&stats.drops[stage_index(d)]),
            }
        }
        self.mpls.buf = buf;
        self.flush(dirty);
        let appended = batch.len() - n;
        batch.retain(|i| i >= n || !taken[i]);
        // Popped in place: their index after the retain.
        let mut w = 0;
        for i in 0..n {
            if taken[i] {
                continue;
            }
            if vrf_at[i] != 0 {
                out.route_in_vrf(w, vrf_at[i]);
            }
            w += 1;
        }
        // Every taken frame was before the appended ones.
        let first = batch.len() - appended;
        for (p, &table) in vrf_of.iter().enumerate().take(appended) {
            if table != 0 {
                out.route_in_vrf(first + p, table);
            }
        }
    }

    /// Sends a label-switched frame (`buf[span]`, its new stack on) to
    /// next hop `next_hop_id` out of `port`: MTU with the stack, the next
    /// hop's MAC; out of a routed subinterface tagged with its VLAN on
    /// its port, out of a VLAN interface into the layer-2 stage (which
    /// tags it where the VLAN is tagged), the stack inside the tag —
    /// through the port's output policy with `svc` (the labelled frame has
    /// no IP key: the policy's class for it, its `set-pcp` in the tag and
    /// its queue; nothing under the labels is re-marked).
    #[allow(clippy::too_many_arguments)]
    fn send_switched(
        &mut self,
        l3: &L3Tables,
        buf: &mut [u8],
        span: Span,
        next_hop_id: u32,
        port: u16,
        dirty: &mut PortSet,
        from_router: &mut FrameBatch,
        svc: Option<&Services>,
    ) -> Result<(), MplsLocalDrop> {
        let Some(egress) = l3.interface(port) else {
            return Err(MplsLocalDrop::Unsupported);
        };
        if span.len - ETH_LEN > egress.mtu as usize {
            return Err(MplsLocalDrop::Mtu);
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
            return Err(MplsLocalDrop::NoNeighbor);
        };
        let f = &mut buf[span.start..span.start + span.len];
        f[0..6].copy_from_slice(&mac);
        f[6..12].copy_from_slice(&egress.mac);
        let no_ip = AclKey::default();
        let policy = svc.map(|s| (s, &no_ip, f.len()));
        self.send_from_router(l3, port, f, dirty, from_router, policy);
        Ok(())
    }

    /// Sends a finished labelled frame (MACs written, untagged) out of
    /// router interface `port`: a routed port as it is, a routed
    /// subinterface tagged on its parent port (through the port's output
    /// policy with `policy`: services, key, the IP header's offset in the
    /// untagged frame), a VLAN interface through the layer-2 stage.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_from_router(
        &mut self,
        l3: &L3Tables,
        port: u16,
        f: &[u8],
        dirty: &mut PortSet,
        from_router: &mut FrameBatch,
        policy: Option<(&Services, &AclKey, usize)>,
    ) {
        if let Some((parent, tag)) = l3.subinterface(port) {
            let n = f.len().min(self.tag_buf.len() - 4);
            self.tag_buf[4..4 + n].copy_from_slice(&f[..n]);
            // The tag moves the IP header 4 bytes on.
            let policy = policy.map(|(s, k, l3off)| (s, k, l3off + 4));
            self.send_tagged(port, parent, tag, n, dirty, policy);
        } else if l3.is_svi(port) {
            if !from_router.push(port, f) {
                self.counters
                    .drop_in(port, None, pipeline::DropReason::TxRingFull);
            }
        } else {
            self.transmit_raw(port, f, dirty, None);
        }
    }

    /// ICMP time exceeded with the label stack (RFC 4950) for `frame`,
    /// whose label TTL expired: policed as the `ttl-expired` CoPP class;
    /// sent back out of the port it came in by, or down the LSP (RFC 3032
    /// §2.3.2: the stack as received, forwarded like the frame would have
    /// been, counted `ttl_icmp_down_lsp`); counted with the layer-3
    /// stage's ICMP errors (`icmp-sent` / `icmp-suppressed`).
    #[allow(clippy::too_many_arguments)]
    fn answer_ttl_expired(
        &mut self,
        l3: &L3Tables,
        t: &MplsTables<'_>,
        buf: &mut [u8],
        a: TtlAnswer,
        frame: &[u8],
        dirty: &mut PortSet,
        from_router: &mut FrameBatch,
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
        let Some(ifc) = l3.interface(a.ingress) else {
            c.l3.icmp_suppressed.add(1);
            return;
        };
        if a.down_lsp {
            let room = &mut buf[HEADROOM..];
            let n = build_ttl_exceeded_lsp(frame, ifc, room);
            let span = Span {
                start: HEADROOM,
                len: n,
            };
            let sent = n > 0
                && match process_labelled(t, buf, span, ETH_LEN, None) {
                    MplsVerdict::Forward {
                        span,
                        next_hop_id,
                        port,
                        ..
                    } => self
                        .send_switched(l3, buf, span, next_hop_id, port, dirty, from_router, None)
                        .is_ok(),
                    _ => false,
                };
            if sent {
                bump(&self.mpls.stats.ttl_icmp_down_lsp);
                c.l3.icmp_sent.add(1);
            } else {
                c.l3.icmp_suppressed.add(1);
            }
            return;
        }
        let mut out = std::mem::take(&mut self.scratch);
        let n = pipeline::mpls::build_ttl_exceeded(frame, ifc, &mut out);
        if n == 0 {
            c.l3.icmp_suppressed.add(1);
        } else {
            // Back to the previous LSR, by the way the frame came in.
            let ingress = a.ingress;
            self.send_from_router(l3, ingress, &out[..n], dirty, from_router, None);
            c.l3.icmp_sent.add(1);
        }
        self.scratch = out;
    }

    /// Sends an IP packet the layer-3 stage routed (MACs rewritten, TTL
    /// decremented) to a labelled target: pushes `stack` (TTL from the IP
    /// header in uniform mode, TC `tc_of_class[class]`) and transmits it
    /// out of `port` — a routed port through the egress services when
    /// `egress` says so (the key's MACs are refreshed and its layer-3
    /// offset moved past the stack); a routed subinterface tagged on its
    /// port (its output ACLs first); a VLAN interface through the layer-2
    /// stage, tagged where its VLAN is.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_labelled(
        &mut self,
        l3: &L3Tables,
        port: u16,
        frame: &[u8],
        stack: LabelStack,
        class: u8,
        egress: Option<(&Services, &mut AclKey, usize)>,
        dirty: &mut PortSet,
        from_router: &mut FrameBatch,
    ) {
        let stats = self.mpls.stats.clone();
        let Some(plane) = self.shared.mpls.load_full() else {
            bump(&stats.drops[stage_index(MplsDrop::NoPath)]);
            return;
        };
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
        match push_ftn(&plane.cfg, &mut buf, span, ETH_LEN, &r, class) {
            Ok(s) => {
                let out = &mut buf[s.start..s.start + s.len];
                let egress = egress.map(|(svc, k, l3off)| {
                    k.dst_mac.copy_from_slice(&out[0..6]);
                    k.src_mac.copy_from_slice(&out[6..12]);
                    (svc, &*k, l3off + 4 * stack.len())
                });
                let routed_port = l3.subinterface(port).is_none() && !l3.is_svi(port);
                if routed_port {
                    bump(&stats.pushed);
                    self.transmit_raw(port, out, dirty, egress);
                } else {
                    if let (Some((svc, k, l3off)), Some(_)) = (egress, l3.subinterface(port)) {
                        // The subinterface's output ACLs, as for IP.
                        if self.svc.egress(svc, k, out, l3off, port, 0)
                            == pipeline::services::EgressVerdict::Deny
                        {
                            self.counters
                                .drop_in(port, None, pipeline::DropReason::AclDeny);
                            self.mpls.buf = buf;
                            return;
                        }
                    }
                    bump(&stats.pushed);
                    // Then the port's output policy, as for IP.
                    self.send_from_router(l3, port, out, dirty, from_router, egress);
                }
            }
            Err(d) => bump(&stats.drops[stage_index(d)]),
        }
        self.mpls.buf = buf;
    }
}
