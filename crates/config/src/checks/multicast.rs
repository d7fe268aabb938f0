//! Checks of `multicast` that need the whole configuration.

use crate::multicast::*;

/// Semantic checks of `multicast`.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
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
                Some(pc) if pc.mode == crate::PortMode::Routed => err(
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
    let routed = |name: &str| cfg.port(name).map(|p| p.mode == crate::PortMode::Routed);
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
        if !r.accept.is_empty() {
            if r.iif.is_some() {
                err(
                    format!("{p}.accept"),
                    "give either iif (one incoming port) or accept (a bidirectional route), not both"
                        .into(),
                );
            }
            if r.source.is_some() {
                err(
                    format!("{p}.accept"),
                    "an accept set makes a bidirectional (*,G) route: drop the source".into(),
                );
            }
        }
        for (what, name) in r
            .iif
            .iter()
            .map(|n| ("iif".to_string(), n))
            .chain(
                r.accept
                    .iter()
                    .enumerate()
                    .map(|(k, n)| (format!("accept[{k}]"), n)),
            )
            .chain(
                r.oifs
                    .iter()
                    .enumerate()
                    .map(|(k, n)| (format!("oifs[{k}]"), n)),
            )
        {
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
