//! `vrrp:` on a routed port or a VLAN interface (`vlans[].router`):
//! VRRP version 3 groups (RFC 5798, IPv4), docs/vrrp.md.
//!
//! ```yaml
//! ports:
//!   - name: sw1
//!     mode: routed
//!     addresses: [192.0.2.2/24]
//!     vrrp:
//!       - {vrid: 7, addresses: [192.0.2.254], priority: 200}
//! ```

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

use crate::types::IpNet;

/// Priority of an address owner (the virtual address is the interface's).
pub const OWNER_PRIORITY: u8 = 255;
/// Default priority (RFC 5798).
pub const DEFAULT_PRIORITY: u8 = 100;
/// Advertisement interval bounds, milliseconds (10 ms steps: the field is
/// in centiseconds, 12 bits).
pub const ADVERT_INTERVAL_MS: std::ops::RangeInclusive<u32> = 10..=40_950;
/// Most virtual addresses per group.
pub const MAX_ADDRESSES: usize = 32;
/// Most groups per interface.
pub const MAX_GROUPS: usize = 16;

/// One virtual router on an interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VrrpGroup {
    /// Virtual router id, 1..255; the virtual MAC is 00:00:5e:00:01:VRID.
    pub vrid: u16,
    /// Virtual IPv4 addresses (no prefix length), in the interface's
    /// subnets.
    pub addresses: Vec<IpAddr>,
    /// 1..254, default 100; 255 only for the address owner (a virtual
    /// address is one of the interface's own), and then it must be 255.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u16>,
    /// Advertisement interval, 10..40950 ms in steps of 10, default 1000.
    #[serde(default = "default_interval")]
    pub advert_interval_ms: u32,
    /// A higher-priority backup takes over from a lower master. Default
    /// true.
    #[serde(default = "default_true")]
    pub preempt: bool,
    /// The master accepts packets to the virtual addresses (ping). Default
    /// false (the owner always accepts).
    #[serde(default)]
    pub accept_mode: bool,
}

fn default_interval() -> u32 {
    1000
}

fn default_true() -> bool {
    true
}

impl VrrpGroup {
    /// The priority in effect: configured, else 255 for an owner, else 100.
    pub fn effective_priority(&self, own: &[IpNet]) -> u8 {
        match self.priority {
            Some(p) => p.min(255) as u8,
            None if self.is_owner(own) => OWNER_PRIORITY,
            None => DEFAULT_PRIORITY,
        }
    }

    /// True if a virtual address is one of the interface's addresses.
    pub fn is_owner(&self, own: &[IpNet]) -> bool {
        self.addresses
            .iter()
            .any(|a| own.iter().any(|n| n.addr == *a))
    }
}

/// Checks of one interface's groups: (path, message) per problem.
pub(crate) fn check(
    at: &str,
    groups: &[VrrpGroup],
    own: &[IpNet],
    routed: bool,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if groups.is_empty() {
        return out;
    }
    if !routed {
        out.push((
            format!("{at}.vrrp"),
            "vrrp is only valid on routed ports and VLAN interfaces".into(),
        ));
        return out;
    }
    if groups.len() > MAX_GROUPS {
        out.push((
            format!("{at}.vrrp"),
            format!(
                "{} groups: at most {MAX_GROUPS} per interface",
                groups.len()
            ),
        ));
    }
    let has_v4 = own.iter().any(|n| n.addr.is_ipv4());
    for (k, g) in groups.iter().enumerate() {
        let p = format!("{at}.vrrp[{k}]");
        if !(1..=255).contains(&g.vrid) {
            out.push((
                format!("{p}.vrid"),
                format!("{} is out of range 1..255", g.vrid),
            ));
        }
        if groups[..k].iter().any(|o| o.vrid == g.vrid) {
            out.push((
                format!("{p}.vrid"),
                format!("VRID {} is configured twice on this interface", g.vrid),
            ));
        }
        let owner = g.is_owner(own);
        match g.priority {
            Some(255) if !owner => out.push((
                format!("{p}.priority"),
                "255 is the address owner's priority: one of the virtual addresses must be \
                 an address of the interface"
                    .into(),
            )),
            Some(v) if owner && v != 255 => out.push((
                format!("{p}.priority"),
                format!(
                    "{v}: a virtual address is the interface's own address, so this router \
                     owns it and its priority is 255 (leave priority out)"
                ),
            )),
            Some(v) if !(1..=255).contains(&v) => out.push((
                format!("{p}.priority"),
                format!("{v} is out of range 1..254 (255: address owner)"),
            )),
            _ => {}
        }
        let ms = g.advert_interval_ms;
        if !ADVERT_INTERVAL_MS.contains(&ms) || ms % 10 != 0 {
            out.push((
                format!("{p}.advert-interval-ms"),
                format!("{ms} is not a multiple of 10 in 10..40950"),
            ));
        }
        if g.addresses.is_empty() {
            out.push((
                format!("{p}.addresses"),
                "at least one virtual address".into(),
            ));
        }
        if g.addresses.len() > MAX_ADDRESSES {
            out.push((
                format!("{p}.addresses"),
                format!("{} addresses: at most {MAX_ADDRESSES}", g.addresses.len()),
            ));
        }
        if !has_v4 {
            out.push((
                p.clone(),
                "the interface has no IPv4 address (VRRP advertisements are sent from it)".into(),
            ));
        }
        for (j, a) in g.addresses.iter().enumerate() {
            let ap = format!("{p}.addresses[{j}]");
            match a {
                IpAddr::V6(_) => out.push((
                    ap,
                    format!("{a}: IPv6 virtual addresses are not supported yet (IPv4 only)"),
                )),
                IpAddr::V4(v4) if v4.is_multicast() || v4.is_broadcast() || v4.is_unspecified() => {
                    out.push((ap, format!("{a} is not a unicast address")))
                }
                _ if !own.iter().any(|n| n.contains(*a)) => out.push((
                    ap,
                    format!("{a} is not in the subnet of any address of the interface"),
                )),
                _ if g.addresses[..j].contains(a) => out.push((ap, format!("{a} is listed twice"))),
                _ => {}
            }
            for (m, o) in groups.iter().enumerate().filter(|(m, _)| *m < k) {
                if o.addresses.contains(a) {
                    out.push((
                        format!("{p}.addresses[{j}]"),
                        format!(
                            "{a} is already a virtual address of vrrp[{m}] (VRID {})",
                            o.vrid
                        ),
                    ));
                }
            }
        }
    }
    out
}
