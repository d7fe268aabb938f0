//! Checks of `ha` that need the whole configuration.

use crate::ha::*;

/// The VLAN-relevant settings of a port, for "identical settings" checks.
fn vlan_settings(p: &crate::PortConfig) -> impl PartialEq + '_ {
    (
        p.mode,
        p.effective_vlan(),
        p.allowed_vlans.as_ref(),
        p.effective_native_vlan(),
        p.effective_tpid(),
        p.effective_mtu(),
    )
}

/// Semantic checks of `backup-pairs` and `port-channels`.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    // Every port belongs to at most one pair or channel.
    let mut used: Vec<(String, String)> = Vec::new();
    let mut claim = |name: &str, by: String, path: String, err: &mut dyn FnMut(String, String)| {
        if let Some((_, other)) = used.iter().find(|(n, _)| n == name) {
            err(path, format!("port {name:?} already belongs to {other}"));
        } else {
            used.push((name.to_string(), by));
        }
    };
    let monitor = |name: &str| cfg.mirror_sessions.iter().any(|s| s.destination == name);
    let port_ok = |name: &str, path: &str, err: &mut dyn FnMut(String, String)| match cfg.port(name)
    {
        None => {
            err(
                path.to_string(),
                format!("port {name:?} is not configured (see ports)"),
            );
            None
        }
        Some(p) if p.mode == crate::PortMode::Routed => {
            err(
                path.to_string(),
                format!("port {name:?} is routed: only switch ports can be paired or bundled"),
            );
            None
        }
        Some(_) if monitor(name) => {
            err(path.to_string(), format!("port {name:?} is a monitor port"));
            None
        }
        Some(p) => Some(p),
    };
    for (i, b) in cfg.backup_pairs.iter().enumerate() {
        let p = format!("backup-pairs[{i}]");
        let by = format!("backup pair {i}");
        let pri = port_ok(&b.primary, &format!("{p}.primary"), &mut err);
        let bak = port_ok(&b.backup, &format!("{p}.backup"), &mut err);
        if b.primary == b.backup {
            err(
                format!("{p}.backup"),
                "backup and primary are the same port".into(),
            );
            continue;
        }
        claim(&b.primary, by.clone(), format!("{p}.primary"), &mut err);
        claim(&b.backup, by, format!("{p}.backup"), &mut err);
        if let (Some(a), Some(c)) = (pri, bak) {
            if vlan_settings(a) != vlan_settings(c) {
                err(
                    p.clone(),
                    format!(
                        "{:?} and {:?} must have the same mode, VLANs, TPID and MTU",
                        b.primary, b.backup
                    ),
                );
            }
        }
        if b.keepalive_ms != 0 && b.keepalive_ms < 3 {
            err(
                format!("{p}.keepalive-ms"),
                "at least 3 ms (or 0 for off)".into(),
            );
        }
    }
    if cfg.port_channels.len() > MAX_CHANNELS {
        err(
            "port-channels".into(),
            format!(
                "{} channels; at most {MAX_CHANNELS}",
                cfg.port_channels.len()
            ),
        );
    }
    for (i, c) in cfg.port_channels.iter().enumerate() {
        let p = format!("port-channels[{i}]");
        if c.name.is_empty() || c.name.len() > crate::limits::MAX_PORT_NAME {
            err(format!("{p}.name"), "1 to 15 characters".into());
        }
        if cfg.port_channels[..i].iter().any(|o| o.name == c.name) || cfg.port(&c.name).is_some() {
            err(
                format!("{p}.name"),
                format!("{:?} is already a port or channel name", c.name),
            );
        }
        if c.members.is_empty() || c.members.len() > tables::l2::MAX_CHANNEL_MEMBERS {
            err(
                format!("{p}.members"),
                format!("1 to {} members", tables::l2::MAX_CHANNEL_MEMBERS),
            );
        }
        if c.min_links == 0 || c.min_links as usize > c.members.len().max(1) {
            err(
                format!("{p}.min-links"),
                "between 1 and the number of members".into(),
            );
        }
        let mut first: Option<&crate::PortConfig> = None;
        for (k, m) in c.members.iter().enumerate() {
            let path = format!("{p}.members[{k}]");
            let Some(port) = port_ok(m, &path, &mut err) else {
                continue;
            };
            claim(
                m,
                format!("port channel {:?}", c.name),
                path.clone(),
                &mut err,
            );
            match first {
                None => first = Some(port),
                Some(f) if vlan_settings(f) != vlan_settings(port) => err(
                    path,
                    format!(
                        "{m:?} must have the same mode, VLANs, TPID and MTU as {:?}",
                        f.name
                    ),
                ),
                Some(_) => {}
            }
        }
    }
    for (i, s) in cfg.mirror_sessions.iter().enumerate() {
        for (k, sp) in s.source_ports.iter().enumerate() {
            if cfg.port_channels.iter().any(|c| c.name == *sp) {
                err(
                    format!("mirror-sessions[{i}].source-ports[{k}]"),
                    format!("{sp:?} is a port channel: mirror its members"),
                );
            }
        }
    }
    out
}
