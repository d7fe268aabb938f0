//! Services after the forwarding decision: ACLs, policing and flow
//! accounting on one key per frame; flow aging and flush to the exporter.

use crate::worker::*;
use io::FrameBatch;
use pipeline::services::{extract_key, ip_len, tos, ServiceDrop, Services};
use pipeline::{Action, DropReason, Verdicts};
use std::time::{Duration, Instant};

/// No `set-pcp` from the input policy (802.1p values are 0..=7): the
/// `pcp` out-parameter of `Services::ingress` before the call.
pub(crate) const NO_PCP: u8 = 0xff;

impl Worker {
    /// Ingress services of a switched batch: keys, ACLs, input policy,
    /// flow accounting. Denied or policed frames become drops.
    pub(crate) fn ingress_services(
        &mut self,
        s: &Services,
        batch: &mut FrameBatch,
        verdicts: &mut Verdicts,
        keys: &mut Keys,
        now: Instant,
        routed: bool,
    ) {
        let c = self.counters.clone();
        let (ns, ms) = (self.ns(now), self.ms(now));
        self.svc.sync(s, ns);
        for i in 0..batch.len() {
            let v = &mut verdicts.v[i];
            keys.on[i] = false;
            if matches!(v.action, Action::Drop(_) | Action::Control) {
                continue;
            }
            let port = batch.port(i);
            let vlan_in = !s.vlan_in[v.vlan as usize & 0xfff].is_empty();
            if !(s.ingress_on(port) || vlan_in || s.any_egress) {
                continue;
            }
            keys.on[i] = true;
            let l3 = extract_key(batch.frame(i), v.inner_off as usize, v.vlan, &mut keys.k[i]);
            keys.l3[i] = l3 as u16;
            let t = tos(batch.frame(i), l3, keys.k[i].family);
            let len = ip_len(batch.frame(i), l3, keys.k[i].family);
            if let Some(d) = self.svc.ingress(
                s,
                &mut keys.k[i],
                batch.frame_mut(i),
                l3,
                port,
                v.vlan,
                &mut v.pcp,
                ns,
            ) {
                let r = drop_reason(d);
                v.action = Action::Drop(r);
                c.drop_in(port, Some(v.vlan), r);
                continue;
            }
            if routed {
                // Routed out of a VLAN interface: the flow was accounted
                // when it entered the router.
                continue;
            }
            let out_port = match v.action {
                Action::Unicast(p) => p,
                _ => u16::MAX,
            };
            self.svc
                .account(s, &keys.k[i], t, port, v.vlan, len, out_port, ms);
        }
    }

    /// Expire flows: a slice of the cache per loop, sized so the whole
    /// cache is visited about once a second.
    pub(crate) fn sweep_flows(&mut self) {
        let Some(cache) = self.svc.flows.as_mut() else {
            return;
        };
        let now = Instant::now();
        let dt = now.saturating_duration_since(self.last_sweep);
        if dt < Duration::from_millis(1) {
            return;
        }
        self.last_sweep = now;
        let (active, inactive) = match self.shared.services.load().as_ref().and_then(|s| s.flows) {
            Some(f) => (f.active_ms, f.inactive_ms),
            None => (0, 0), // accounting turned off: expire everything
        };
        let cap = cache.capacity();
        let budget = ((cap as u128 * dt.as_micros()) / 1_000_000).clamp(64, cap as u128) as usize;
        let ms = now.saturating_duration_since(self.shared.epoch).as_millis() as u64;
        let q = &self.flow_out;
        cache.sweep(ms, active, inactive, budget, &mut |r| q.push(r).is_ok());
    }

    /// At stop: hand every flow to the exporter.
    pub(crate) fn flush_flows(&mut self) {
        if let Some(cache) = self.svc.flows.as_mut() {
            let q = &self.flow_out;
            cache.flush(&mut |r| q.push(r).is_ok());
        }
    }
}

pub(crate) fn drop_reason(d: ServiceDrop) -> DropReason {
    match d {
        ServiceDrop::AclDeny => DropReason::AclDeny,
        ServiceDrop::Policed => DropReason::Policed,
    }
}
