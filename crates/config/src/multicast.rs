//! `multicast:` — IGMP/MLD snooping per VLAN and multicast routing.
//!
//! Snooping keeps, per VLAN, which ports want which groups (and, with
//! IGMPv3/MLDv2, which sources), and which ports lead to multicast
//! routers; the data path then sends a group's traffic only there.
//! Routing takes (S,G)/(*,G) routes from the configuration
//! (`static-routes`) and, with `routing: true`, from the kernel's
//! multicast forwarding cache that FRR's pimd fills (see docs/pim.md).

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// Defaults of RFC 3376 section 8 / RFC 3810 section 9.
pub const DEFAULT_QUERY_INTERVAL_S: u32 = 125;
pub const DEFAULT_QUERY_RESPONSE_MS: u32 = 10_000;
pub const DEFAULT_ROBUSTNESS: u8 = 2;
pub const DEFAULT_LAST_MEMBER_INTERVAL_MS: u32 = 1_000;
/// Snooped groups per VLAN (the acceptance asks for 32,767).
pub const DEFAULT_MAX_GROUPS: u32 = 32_768;
pub const MAX_GROUPS_LIMIT: u32 = 262_144;
/// Static multicast routes the configuration may hold (the data path's
/// table holds 524,288 in all, kernel routes included).
pub const MAX_STATIC_ROUTES: usize = 1 << 19;

/// The `multicast:` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct MulticastConfig {
    /// IGMP and MLD snooping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub igmp_snooping: Option<Snooping>,
    /// Learn multicast routes from the kernel (FRR pimd on the TAPs).
    pub routing: bool,
    /// Routes configured by hand.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub static_routes: Vec<StaticMroute>,
}

/// `multicast.igmp-snooping:` (IGMP for IPv4, MLD for IPv6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Snooping {
    /// VLANs that snoop.
    pub vlans: Vec<u16>,
    /// Send general queries when no other querier is heard (the lowest
    /// address wins the election, RFC 3376 6.6.2).
    pub querier: bool,
    /// Source of Lanyard's IGMP queries (default 0.0.0.0, as a snooping
    /// switch without an address in the VLAN does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub querier_address: Option<IpAddr>,
    /// Seconds between general queries.
    pub query_interval: u32,
    /// Max response time of general queries, ms.
    pub query_response_ms: u32,
    pub robustness: u8,
    /// Group-specific query interval after a leave, ms.
    pub last_member_interval_ms: u32,
    /// A leave removes the port at once (one host per port).
    pub fast_leave: bool,
    /// Unregistered multicast to every port of the VLAN instead of only to
    /// multicast-router ports.
    pub flood_unregistered: bool,
    /// Ports that always count as multicast-router ports.
    pub router_ports: Vec<String>,
    /// Groups per VLAN; reports beyond are refused and counted.
    pub max_groups: u32,
}

impl Default for Snooping {
    fn default() -> Self {
        Snooping {
            vlans: Vec::new(),
            querier: false,
            querier_address: None,
            query_interval: DEFAULT_QUERY_INTERVAL_S,
            query_response_ms: DEFAULT_QUERY_RESPONSE_MS,
            robustness: DEFAULT_ROBUSTNESS,
            last_member_interval_ms: DEFAULT_LAST_MEMBER_INTERVAL_MS,
            fast_leave: false,
            flood_unregistered: false,
            router_ports: Vec::new(),
            max_groups: DEFAULT_MAX_GROUPS,
        }
    }
}

impl Snooping {
    /// Group membership interval (RFC 3376 8.4): robustness × query
    /// interval + query response interval.
    pub fn gmi_ms(&self) -> u64 {
        self.robustness as u64 * self.query_interval as u64 * 1000 + self.query_response_ms as u64
    }

    /// Last member query time (RFC 3376 8.14).
    pub fn lmqt_ms(&self) -> u64 {
        self.robustness as u64 * self.last_member_interval_ms as u64
    }
}

/// One entry of `multicast.static-routes:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StaticMroute {
    pub group: IpAddr,
    /// Absent: (*,G).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<IpAddr>,
    /// Incoming routed port (RPF); absent (and no `accept`): any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iif: Option<String>,
    /// Bidirectional (*,G) (BIDIR-PIM semantics): frames are accepted
    /// from any of these routed ports and go out of every outgoing port
    /// but the one they came in by. Instead of `iif`; (*,G) only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept: Vec<String>,
    /// Outgoing routed ports.
    pub oifs: Vec<String>,
    /// Packets whose TTL is at or below this are not routed.
    #[serde(default)]
    pub ttl_threshold: u8,
}

pub(crate) fn is_mc(a: &IpAddr) -> bool {
    a.is_multicast()
}
