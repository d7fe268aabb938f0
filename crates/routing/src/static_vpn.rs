//! Static L3VPN in the control plane (docs/vrf.md, "Static VPN routes"):
//! the VRFs' configured VPN labels, and the pass that keeps the static
//! VPN routes on the default VRF's current way to each remote PE.
//!
//! The routes themselves are ordinary configured routes of their VRF's
//! FIB ([`Fib::set_vpn`], programmed with the VRF's other static routes);
//! this module only (a) turns `vrfs[].vpn-label` into pop entries of the
//! default VRF's LFIB, and (b) runs [`Fib::refresh_vpn`] on every VRF
//! FIB after FRR's updates and every 200 ms, and has the transport's
//! next hop resolved: nothing else sends to a remote PE that only static
//! routes use, so its MAC would never be learnt (the same poke as static
//! pseudowires: one datagram, at most once a second, makes the kernel
//! behind the TAP twin ask).

use crate::fib::Fib;
use config::Config;
use datapath::Shared;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tables::NeighborState;

/// The VRFs' static VPN labels: label → data-plane VRF index (1-based).
/// `slot_of` gives a configured VRF's index by name (`None`: not running).
pub fn labels(cfg: &Config, slot_of: &dyn Fn(&str) -> Option<usize>) -> BTreeMap<u32, u16> {
    cfg.vrfs
        .iter()
        .filter_map(|v| {
            let l = v.vpn_label?;
            let k = u16::try_from(slot_of(&v.name)?).ok()?;
            Some((l, k))
        })
        .collect()
}

/// The static VPN routes' upkeep: follows the default VRF's routes and
/// has the transport next hops resolved.
#[derive(Default)]
pub struct Upkeep {
    /// When each next hop was last asked for.
    poked: HashMap<IpAddr, Instant>,
}

impl Upkeep {
    /// One pass over the VRFs' FIBs (`vrf_fibs`, not the default's).
    pub fn pass<'a>(&mut self, vrf_fibs: impl Iterator<Item = &'a Mutex<Fib>>, shared: &Shared) {
        let mut gateways = Vec::new();
        for f in vrf_fibs {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            let n = f.refresh_vpn();
            if n > 0 {
                tracing::debug!(
                    table = f.table(),
                    routes = n,
                    "static VPN routes re-resolved"
                );
            }
            gateways.extend(f.vpn_gateways());
        }
        if gateways.is_empty() {
            return;
        }
        gateways.sort();
        gateways.dedup();
        let l3 = shared.l3.load();
        let Some(l3) = l3.as_ref() else { return };
        for gw in gateways {
            let known = l3
                .neighbors
                .lookup(gw)
                .is_some_and(|n| n.state != NeighborState::Incomplete);
            if known
                || self
                    .poked
                    .get(&gw)
                    .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
            {
                continue;
            }
            self.poked.insert(gw, Instant::now());
            poke(gw);
        }
        self.poked
            .retain(|_, t| t.elapsed() < Duration::from_secs(10));
    }
}

/// One datagram to `gw`'s discard port from Lanyard's namespace (the
/// default VRF's kernel): the kernel resolves it on the TAP twin, and the
/// neighbour mirror brings the MAC to the data path.
fn poke(gw: IpAddr) {
    let any: IpAddr = if gw.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    if let Ok(sock) = std::net::UdpSocket::bind((any, 0)) {
        let _ = sock.send_to(&[0], (gw, 9));
    }
}
