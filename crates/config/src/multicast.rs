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
/// Static multicast routes the configuration may hold.
pub const MAX_STATIC_ROUTES: usize = 65_536;

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
    /// Incoming routed port (RPF); absent: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iif: Option<String>,
    /// Outgoing routed ports.
    pub oifs: Vec<String>,
    /// Packets whose TTL is at or below this are not routed.
    #[serde(default)]
    pub ttl_threshold: u8,
}

fn is_mc(a: &IpAddr) -> bool {
    a.is_multicast()
}

/// Semantic checks of `multicast`.
pub(super) fn check(cfg: &super::Config) -> Vec<super::Issue> {
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(super::Issue { path, message });
    let m = &cfg.multicast;
    if let Some(s) = &m.igmp_snooping {
        let p = "multicast.igmp-snooping";
        for (i, v) in s.vlans.iter().enumerate() {
            if !cfg.vlan_exists(*v) {
                err(
                    format!("{p}.vlans[{i}]"),
                    format!("VLAN {v} is not configured (add it under vlans)"),
                );
            }
            if s.vlans[..i].contains(v) {
                err(
                    format!("{p}.vlans[{i}]"),
                    format!("VLAN {v} is listed twice"),
                );
            }
        }
        if !(1..=3600).contains(&s.query_interval) {
            err(
                format!("{p}.query-interval"),
                format!("{} s; 1..=3600", s.query_interval),
            );
        }
        let qi_ms = s.query_interval as u64 * 1000;
        if !(100..=3_174_400).contains(&s.query_response_ms) || s.query_response_ms as u64 >= qi_ms
        {
            err(
                format!("{p}.query-response-ms"),
                format!(
                    "{} ms; 100..=3174400 and below the query interval",
                    s.query_response_ms
                ),
            );
        }
        if !(1..=7).contains(&s.robustness) {
            err(
                format!("{p}.robustness"),
                format!("{}; 1..=7", s.robustness),
            );
        }
        if !(100..=25_500).contains(&s.last_member_interval_ms) {
            err(
                format!("{p}.last-member-interval-ms"),
                format!("{} ms; 100..=25500", s.last_member_interval_ms),
            );
        }
        if !(1..=MAX_GROUPS_LIMIT).contains(&s.max_groups) {
            err(
                format!("{p}.max-groups"),
                format!("{}; 1..={MAX_GROUPS_LIMIT}", s.max_groups),
            );
        }
        if let Some(a) = s.querier_address {
            if a.is_multicast() || !a.is_ipv4() {
                err(
                    format!("{p}.querier-address"),
                    format!("{a}: an IPv4 unicast address (or leave it out)"),
                );
            }
        }
        for (i, rp) in s.router_ports.iter().enumerate() {
            match cfg.port(rp) {
                None => err(
                    format!("{p}.router-ports[{i}]"),
                    format!("port {rp:?} is not configured (see ports)"),
                ),
                Some(pc) if pc.mode == super::PortMode::Routed => err(
                    format!("{p}.router-ports[{i}]"),
                    format!("{rp:?} is a routed port; router ports are switch ports"),
                ),
                Some(_) => {}
            }
        }
    }
    if (m.routing || !m.static_routes.is_empty()) && cfg.l3_interfaces().is_empty() {
        err(
            "multicast".into(),
            "multicast routing needs routed ports or VLAN interfaces".into(),
        );
    }
    if m.static_routes.len() > MAX_STATIC_ROUTES {
        err(
            "multicast.static-routes".into(),
            format!(
                "{} routes; at most {MAX_STATIC_ROUTES}",
                m.static_routes.len()
            ),
        );
    }
    let routed = |name: &str| cfg.port(name).map(|p| p.mode == super::PortMode::Routed);
    let mut seen = std::collections::HashSet::new();
    for (i, r) in m.static_routes.iter().enumerate() {
        let p = format!("multicast.static-routes[{i}]");
        if !is_mc(&r.group) {
            err(
                format!("{p}.group"),
                format!("{} is not a multicast address", r.group),
            );
        }
        if let Some(s) = r.source {
            if s.is_multicast() || s.is_unspecified() || s.is_ipv4() != r.group.is_ipv4() {
                err(
                    format!("{p}.source"),
                    format!("{s}: a unicast address of the group's family"),
                );
            }
        }
        if !seen.insert((r.group, r.source)) {
            err(p.clone(), "the same (source, group) is listed twice".into());
        }
        for (what, name) in r.iif.iter().map(|n| ("iif".to_string(), n)).chain(
            r.oifs
                .iter()
                .enumerate()
                .map(|(k, n)| (format!("oifs[{k}]"), n)),
        ) {
            match routed(name) {
                None => err(
                    format!("{p}.{what}"),
                    format!("port {name:?} is not configured (see ports)"),
                ),
                Some(false) => err(
                    format!("{p}.{what}"),
                    format!("{name:?} is not a routed port"),
                ),
                Some(true) => {}
            }
        }
        if r.oifs.is_empty() {
            err(
                format!("{p}.oifs"),
                "needs at least one outgoing port".into(),
            );
        }
    }
    out
}
