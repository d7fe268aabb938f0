//! `vrfs:` — VRFs (virtual routing and forwarding instances,
//! docs/vrf.md): each has its own IPv4/IPv6 routing table and neighbour
//! table, the layer-3 interfaces listed under it, and (for FRR's netns
//! backend) a network namespace holding those interfaces' TAP twins.
//! Interfaces not listed in any VRF are in the default VRF (the global
//! table). Cross-section checks are in `checks::vrf`.

use serde::{Deserialize, Serialize};

/// Table ids of VRFs that give none: `FIRST_AUTO_TABLE + position`.
pub const FIRST_AUTO_TABLE: u32 = 1001;
/// Largest VRF table id (FPM's `RTA_TABLE`, a kernel NSID: non-negative i32).
pub const MAX_TABLE: u32 = i32::MAX as u32;
/// Labels a static VPN label may take (0-15 are reserved).
pub const VPN_LABELS: std::ops::RangeInclusive<u32> = 16..=1_048_575;
/// With FRR feeding labels (`routing.fpm`), the lowest static local VPN
/// label: zebra's label manager hands ldpd and bgpd labels from 16 upward
/// (FRR 8.4 cannot move that range, docs/frr.md "Label ranges"), so a
/// static label below this would sooner or later be one of theirs.
pub const STATIC_LABEL_FLOOR: u32 = 100_000;
/// Longest VRF name: a namespace name Lanyard creates and FRR's VRF name
/// (`VRF_NAMSIZ` 36, minus the terminator).
pub const MAX_VRF_NAME: usize = 35;

/// One entry of `vrfs:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VrfConfig {
    /// The VRF's name (FRR's `vrf NAME`).
    pub name: String,
    /// Layer-3 interfaces in this VRF: routed ports by name, VLAN
    /// interfaces as `vlanN`. An interface belongs to at most one VRF.
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// Routing table id: what zebra's FPM routes of this VRF carry
    /// (docs/vrf.md); 256..2147483647. Default 1001 + position in `vrfs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// Route distinguisher (`ASN:NN` or `IPV4:NN`), unique per VRF; used
    /// for BGP L3VPN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rd: Option<String>,
    /// Network namespace of the VRF's TAP twins (FRR's netns VRF backend
    /// names the VRF after it). Default: the VRF's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Static L3VPN (docs/vrf.md, "Static VPN routes"): the VPN label this
    /// PE pops into this VRF (frames arriving with it as the bottom label
    /// are routed in this VRF's table). The far PEs push it through their
    /// `remote-pe` static routes. 16..1048575, unique across VRFs and
    /// pseudowires' static local labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpn_label: Option<u32>,
}

impl VrfConfig {
    /// The table id of the VRF at position `index` of `vrfs`.
    pub fn table_id(&self, index: usize) -> u32 {
        self.table
            .unwrap_or(FIRST_AUTO_TABLE.saturating_add(index as u32))
    }

    /// The namespace of its TAP twins.
    pub fn netns(&self) -> &str {
        self.namespace.as_deref().unwrap_or(&self.name)
    }
}

/// Parses a route distinguisher: `ASN:NN` (2-byte ASN: 32-bit NN; 4-byte
/// ASN: 16-bit NN) or `A.B.C.D:NN` (16-bit NN), RFC 4364 §4.2. Returns
/// the canonical text.
pub fn parse_rd(s: &str) -> Result<String, String> {
    let bad = || format!("{s:?} is not a route distinguisher (ASN:NN or A.B.C.D:NN)");
    let (admin, num) = s.rsplit_once(':').ok_or_else(bad)?;
    if let Ok(ip) = admin.parse::<std::net::Ipv4Addr>() {
        let n: u16 = num.parse().map_err(|_| bad())?;
        return Ok(format!("{ip}:{n}"));
    }
    let asn: u32 = admin.parse().map_err(|_| bad())?;
    if asn <= u16::MAX as u32 {
        let n: u32 = num.parse().map_err(|_| bad())?;
        Ok(format!("{asn}:{n}"))
    } else {
        let n: u16 = num.parse().map_err(|_| bad())?;
        Ok(format!("{asn}:{n}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_distinguishers() {
        assert_eq!(parse_rd("65000:1").unwrap(), "65000:1");
        assert_eq!(parse_rd("65000:4294967295").unwrap(), "65000:4294967295");
        assert_eq!(parse_rd("4200000000:7").unwrap(), "4200000000:7");
        assert!(parse_rd("4200000000:70000").is_err());
        assert_eq!(parse_rd("10.0.0.1:07").unwrap(), "10.0.0.1:7");
        assert!(parse_rd("10.0.0.1:70000").is_err());
        assert!(parse_rd("x:1").is_err());
        assert!(parse_rd("65000").is_err());
    }
}
