//! Static VPN routes in a VRF's FIB (docs/vrf.md, "Static VPN routes"):
//! the L3 analogue of static-label pseudowires. A route names a remote PE
//! and that PE's VPN label of the VRF; it is installed like an imported
//! VPN route (`VIA_DEFAULT_BIT | target`, the NHLFE in the default VRF's
//! pool) pushing [transport…, VPN], where the transport is whatever the
//! default VRF's FIB does toward the remote PE: a plain next hop (a
//! connected PE or a static route: [VPN] alone), an LDP LSP ([transport,
//! VPN]) or an ECMP group of them.
//!
//! A route whose remote PE the default VRF does not reach stays in the
//! FIB unresolvable (shown inactive, not installed). The default VRF's
//! routes change under it (FRR, `config apply`), so [`Fib::refresh_vpn`]
//! resolves every remote PE again and re-programs the routes of a PE whose
//! transport changed, as a replace (the LPM moves before anything is
//! released). It costs one LPM lookup per remote PE, not per route.

use super::*;

/// One way to a remote PE as the default VRF forwards to it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Transport {
    pub port: u16,
    /// The neighbour the labelled frame goes to (the PE itself when it is
    /// directly connected).
    #[serde(serialize_with = "display")]
    pub gateway: IpAddr,
    /// The transport labels (empty: the neighbour is the PE, or it
    /// advertised implicit null).
    pub labels: Vec<u32>,
}

/// What a static VPN route asks for, for `show ip route vrf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct VpnRoute {
    pub remote_pe: Ipv4Addr,
    pub label: u32,
}

#[derive(Default)]
pub(super) struct VpnState {
    /// Remote PE → the static VPN routes behind it.
    by_pe: BTreeMap<Ipv4Addr, BTreeSet<Prefix>>,
    /// Remote PE → the transport its routes were last resolved with
    /// (empty: unreachable).
    resolved: HashMap<Ipv4Addr, Vec<Transport>>,
}

impl VpnState {
    pub(super) fn note(&mut self, pe: Ipv4Addr, p: Prefix) {
        self.by_pe.entry(pe).or_default().insert(p);
    }

    pub(super) fn forget(&mut self, pe: Ipv4Addr, p: Prefix) {
        if let Some(s) = self.by_pe.get_mut(&pe) {
            s.remove(&p);
            if s.is_empty() {
                self.by_pe.remove(&pe);
                self.resolved.remove(&pe);
            }
        }
    }
}

impl Fib {
    /// Install or replace a static VPN route of this (a VRF's) FIB:
    /// `prefix` behind remote PE `pe`, which pops `label` into its copy
    /// of the VRF. Source [`Source::Static`]. Unresolvable (kept, not
    /// installed) while the default VRF does not reach `pe`.
    pub fn set_vpn(&mut self, prefix: Prefix, pe: Ipv4Addr, label: u32) -> Result<(), FibError> {
        if !(tables::mpls::FIRST_UNRESERVED..=tables::mpls::MAX_LABEL).contains(&label) {
            return Err(self.note(FibError::BadLabel));
        }
        let r = self.set_slot(
            prefix,
            Source::Static,
            Spec::Vpn { pe, label },
            &|_| None,
            false,
        );
        self.flush_core();
        r
    }

    /// The ways this (the default VRF's) FIB forwards to `pe`: sorted,
    /// empty when it does not route it (or drops it).
    pub fn transport_to(&self, pe: Ipv4Addr) -> Vec<Transport> {
        let Some(t) = self.lpms.v4.lookup(u32::from(pe)) else {
            return Vec::new();
        };
        if t == BLACKHOLE_ID || t & VIA_DEFAULT_BIT != 0 {
            return Vec::new();
        }
        let mut out: Vec<Transport> = self
            .pool
            .label_hops(t)
            .into_iter()
            .filter(|h| h.port != BLACKHOLE_PORT)
            .map(|h| Transport {
                port: h.port,
                gateway: h.gateway.unwrap_or(IpAddr::V4(pe)),
                labels: h.out_labels,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The default VRF's resources for VPN route `pe`/`label` (see
    /// [`Fib::set_vpn`]): one NHLFE per transport path pushing
    /// [transport…, label], in the default VRF's pool.
    pub(super) fn acquire_vpn(&mut self, pe: Ipv4Addr, label: u32) -> Result<Owned, FibError> {
        let Some(c) = &self.core else {
            // Not linked to the default VRF yet: resolved by the first
            // `refresh_vpn` after `set_core`.
            return Ok(Owned::None);
        };
        let mut core = c.fib.lock().unwrap_or_else(|e| e.into_inner());
        let ts = core.transport_to(pe);
        // A PE seen the first time: what its routes are resolved with now.
        // (Otherwise `refresh_vpn` owns the record, so that a route added
        // between a transport change and the next refresh cannot hide the
        // change from the routes resolved before it.)
        self.vpn.resolved.entry(pe).or_insert_with(|| ts.clone());
        // Ports are given as such (`oif` = port + 1: index 0 is "none").
        let paths: Vec<labelfeed::LabelPath> = ts
            .iter()
            .map(|t| {
                let mut labels = t.labels.clone();
                labels.push(label);
                labelfeed::LabelPath {
                    via: Some(t.gateway),
                    oif: Some(u32::from(t.port) + 1),
                    labels,
                }
            })
            .collect();
        let port_of = |i: u32| u16::try_from(i.checked_sub(1)?).ok();
        match core.pool.acquire_labelled(&paths, &port_of)? {
            Owned::Labelled { key, target } => Ok(Owned::Core { key, target }),
            o => Ok(o),
        }
    }

    /// Resolve every static VPN route's remote PE again in the default
    /// VRF and re-program the routes of each PE whose transport changed
    /// (a replace: the LPM moves before the old NHLFE is released).
    /// Returns how many routes were re-programmed. Cheap when nothing
    /// changed: one lookup per remote PE.
    pub fn refresh_vpn(&mut self) -> usize {
        if self.vpn.by_pe.is_empty() {
            return 0;
        }
        let Some(c) = &self.core else {
            return 0;
        };
        let now: Vec<(Ipv4Addr, Vec<Transport>)> = {
            let core = c.fib.lock().unwrap_or_else(|e| e.into_inner());
            self.vpn
                .by_pe
                .keys()
                .map(|&pe| (pe, core.transport_to(pe)))
                .collect()
        };
        let mut n = 0;
        for (pe, ts) in now {
            if self.vpn.resolved.get(&pe) == Some(&ts) {
                continue;
            }
            self.vpn.resolved.insert(pe, ts);
            let prefixes: Vec<Prefix> = self
                .vpn
                .by_pe
                .get(&pe)
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            for p in prefixes {
                let spec = self.routes.get(&p).and_then(|e| {
                    e.slots
                        .iter()
                        .find(|s| matches!(s.spec, Spec::Vpn { .. }))
                        .map(|s| s.spec.clone())
                });
                if let Some(spec) = spec {
                    // Refused (no NHLFE left): the previous state stays,
                    // counted in `refused`.
                    let _ = self.set_slot(p, Source::Static, spec, &|_| None, true);
                    n += 1;
                }
            }
        }
        self.flush_core();
        n
    }

    /// The neighbours the static VPN routes send to (every transport's
    /// gateway), so that the control plane can have them resolved.
    pub fn vpn_gateways(&self) -> Vec<IpAddr> {
        let mut g: Vec<IpAddr> = self
            .vpn
            .resolved
            .values()
            .flatten()
            .map(|t| t.gateway)
            .collect();
        g.sort();
        g.dedup();
        g
    }

    /// Remote PE → its transport as last resolved, for `show`.
    pub fn vpn_transports(&self) -> Vec<(Ipv4Addr, Vec<Transport>)> {
        let mut v: Vec<_> = self
            .vpn
            .by_pe
            .keys()
            .map(|pe| (*pe, self.vpn.resolved.get(pe).cloned().unwrap_or_default()))
            .collect();
        v.sort();
        v
    }
}
