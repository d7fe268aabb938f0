//! Checks of `mirror` that need the whole configuration.

use crate::mirror::*;

/// Semantic checks of `mirror-sessions`.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    if cfg.mirror_sessions.len() > MAX_SESSIONS {
        err(
            "mirror-sessions".into(),
            format!(
                "{} sessions; at most {MAX_SESSIONS}",
                cfg.mirror_sessions.len()
            ),
        );
    }
    let dests: Vec<&str> = cfg
        .mirror_sessions
        .iter()
        .map(|s| s.destination.as_str())
        .collect();
    for (i, s) in cfg.mirror_sessions.iter().enumerate() {
        let p = format!("mirror-sessions[{i}]");
        if cfg.mirror_sessions[..i].iter().any(|o| o.name == s.name) {
            err(
                format!("{p}.name"),
                format!("session {:?} is defined twice", s.name),
            );
        }
        match cfg.port(&s.destination) {
            None => err(
                format!("{p}.destination"),
                format!("port {:?} is not configured (see ports)", s.destination),
            ),
            Some(d) if d.mode == crate::PortMode::Routed => err(
                format!("{p}.destination"),
                "a routed port cannot be a monitor port".into(),
            ),
            Some(_) => {}
        }
        if dests[..i].contains(&s.destination.as_str()) {
            err(
                format!("{p}.destination"),
                format!(
                    "{:?} is already another session's destination",
                    s.destination
                ),
            );
        }
        if s.source_ports.is_empty() && s.source_vlans.is_empty() {
            err(p.clone(), "needs source-ports or source-vlans".into());
        }
        for (k, sp) in s.source_ports.iter().enumerate() {
            if cfg.port(sp).is_none() {
                err(
                    format!("{p}.source-ports[{k}]"),
                    format!("port {sp:?} is not configured (see ports)"),
                );
            } else if dests.contains(&sp.as_str()) {
                err(
                    format!("{p}.source-ports[{k}]"),
                    format!("{sp:?} is a monitor port (a session's destination)"),
                );
            }
        }
        for (k, v) in s.source_vlans.iter().enumerate() {
            if !cfg.vlan_exists(*v) {
                err(
                    format!("{p}.source-vlans[{k}]"),
                    format!("VLAN {v} is not configured (add it under vlans)"),
                );
            }
        }
    }
    out
}
