//! Checks of `virtual-switch` that need the whole configuration.

use crate::vswitch::*;

/// Semantic checks of `virtual-switch:`.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    let Some(vs) = &cfg.virtual_switch else {
        return out;
    };
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    let at = "virtual-switch";
    if !DOMAIN_ID.contains(&vs.domain_id) {
        err(
            format!("{at}.domain-id"),
            format!("{} is out of range 1..1000", vs.domain_id),
        );
    }
    if !vs.system_mac.is_unicast() {
        err(
            format!("{at}.system-mac"),
            format!("{} is not a unicast address", vs.system_mac),
        );
    }
    if vs.delay_restore_s > MAX_DELAY_RESTORE_S {
        err(
            format!("{at}.delay-restore-s"),
            format!("{} is out of range 0..3600", vs.delay_restore_s),
        );
    }

    // Peer link: switch ports of one kind, in nothing else.
    if vs.peer_link.is_empty() {
        err(
            format!("{at}.peer-link"),
            "names no port (one or more ports to the peer node)".into(),
        );
    } else if vs.peer_link.len() > MAX_PEER_LINK_PORTS {
        err(
            format!("{at}.peer-link"),
            format!(
                "{} ports; at most {MAX_PEER_LINK_PORTS}",
                vs.peer_link.len()
            ),
        );
    }
    let mut peer_vlans: Option<crate::VlanList> = None;
    // An aggregated peer link: one port channel (its members are checked
    // with port-channels; the channel carries its first member's VLANs).
    let bundled = |name: &str| cfg.port_channels.iter().find(|c| c.name == name);
    if let Some(pc) = vs.peer_link.iter().find_map(|n| bundled(n)) {
        let i = vs.peer_link.iter().position(|n| *n == pc.name).unwrap_or(0);
        let p = format!("{at}.peer-link[{i}]");
        if vs.peer_link.len() > 1 {
            err(
                p.clone(),
                format!(
                    "port channel {:?} is the whole peer link: name it alone, or list ports (active/standby)",
                    pc.name
                ),
            );
        }
        if vs.channel_id(&pc.name).is_some() {
            err(
                p.clone(),
                format!(
                    "port channel {:?} is a multichassis channel: the peer link is a channel of its own",
                    pc.name
                ),
            );
        }
        // LACP between the nodes takes a partner with this node's own
        // system id (from switch.name) for a loop: the bundle would
        // never carry data. Two nodes left at the default name would.
        if pc.lacp != crate::ha::LacpMode::Static && cfg.switch.name == crate::DEFAULT_SWITCH_NAME {
            err(
                p.clone(),
                format!(
                    "port channel {:?} runs LACP between the two nodes: give each node its own switch.name (the LACP system id comes from it)",
                    pc.name
                ),
            );
        }
        if let Some(m) = pc.members.first().and_then(|m| cfg.port_index(m)) {
            if cfg.ports[m].mode != crate::PortMode::Routed {
                peer_vlans = Some(cfg.port_vlans(m));
            }
        }
    }
    for (i, name) in vs.peer_link.iter().enumerate() {
        let p = format!("{at}.peer-link[{i}]");
        if bundled(name).is_some() {
            continue;
        }
        let Some(index) = cfg.port_index(name) else {
            err(
                p,
                format!("port {name:?} is not configured (see ports and port-channels)"),
            );
            continue;
        };
        let port = &cfg.ports[index];
        if vs.peer_link[..i].contains(name) {
            err(p.clone(), format!("port {name:?} is listed twice"));
        }
        if port.mode == crate::PortMode::Routed {
            err(
                p.clone(),
                format!("port {name:?} is routed: the peer link is made of switch ports"),
            );
            continue;
        }
        if let Some(c) = cfg.port_channels.iter().find(|c| c.members.contains(name)) {
            err(
                p.clone(),
                format!(
                    "port {name:?} is a member of port channel {:?}: name the port channel alone (an aggregated peer link)",
                    c.name
                ),
            );
        }
        if cfg
            .backup_pairs
            .iter()
            .any(|b| &b.primary == name || &b.backup == name)
        {
            err(p.clone(), format!("port {name:?} is a backup-pair member"));
        }
        if cfg.is_monitor_port(index) {
            err(p.clone(), format!("port {name:?} is a monitor port"));
        }
        let stp_on = cfg.spanning_tree.as_ref().is_some_and(|st| {
            st.ports
                .iter()
                .find(|s| &s.name == name)
                .is_none_or(|s| s.enabled)
        });
        if stp_on {
            err(
                p.clone(),
                format!(
                    "port {name:?} runs spanning tree: take it out (spanning-tree.ports: enabled: false)"
                ),
            );
        }
        let vlans = cfg.port_vlans(index);
        match &peer_vlans {
            None => peer_vlans = Some(vlans),
            Some(v) if *v != vlans => err(
                p,
                format!(
                    "port {name:?} carries other VLANs than {:?}: peer-link ports carry the same VLANs",
                    vs.peer_link[0]
                ),
            ),
            Some(_) => {}
        }
    }

    // Keepalive: a separate path, not over the peer link.
    let ka = &vs.keepalive;
    let kp = format!("{at}.keepalive");
    if ka.source == ka.peer {
        err(
            format!("{kp}.peer"),
            format!("{} is this node's own source address", ka.peer),
        );
    }
    if ka.source.is_ipv4() != ka.peer.is_ipv4() {
        err(
            format!("{kp}.peer"),
            "source and peer are of different address families".into(),
        );
    }
    for (f, a) in [("source", ka.source), ("peer", ka.peer)] {
        if a.is_unspecified() || a.is_multicast() {
            err(
                format!("{kp}.{f}"),
                format!("{a} is not a unicast host address"),
            );
        }
    }
    if ka.port == 0 {
        err(format!("{kp}.port"), "must be 1..65535".into());
    }
    let iv = &KEEPALIVE_INTERVAL_MS;
    if !iv.contains(&ka.interval_ms) {
        err(
            format!("{kp}.interval-ms"),
            format!(
                "{} is out of range {}..{}",
                ka.interval_ms,
                iv.start(),
                iv.end()
            ),
        );
    } else if ka.timeout_ms < 3 * ka.interval_ms || ka.timeout_ms > MAX_KEEPALIVE_TIMEOUT_MS {
        err(
            format!("{kp}.timeout-ms"),
            format!(
                "{} must be between three intervals ({}) and {MAX_KEEPALIVE_TIMEOUT_MS}",
                ka.timeout_ms,
                3 * ka.interval_ms
            ),
        );
    }
    if let Some(pv) = &peer_vlans {
        for (v, r) in cfg.svis() {
            if pv.contains(v.id) && r.addresses.iter().any(|n| n.addr == ka.source) {
                err(
                    format!("{kp}.source"),
                    format!(
                        "{} is on vlan{}, which the peer link carries: the keepalive must take a separate path",
                        ka.source, v.id
                    ),
                );
            }
        }
    }

    // Multichassis channels.
    for (i, c) in vs.channels.iter().enumerate() {
        let p = format!("{at}.channels[{i}]");
        if !CHANNEL_ID.contains(&c.id) {
            err(
                format!("{p}.id"),
                format!("{} is out of range 1..4096", c.id),
            );
        }
        if vs.channels[..i].iter().any(|d| d.id == c.id) {
            err(format!("{p}.id"), format!("id {} is used twice", c.id));
        }
        if vs.channels[..i]
            .iter()
            .any(|d| d.port_channel == c.port_channel)
        {
            err(
                format!("{p}.port-channel"),
                format!("port channel {:?} is listed twice", c.port_channel),
            );
        }
        let Some(pc) = cfg
            .port_channels
            .iter()
            .find(|pc| pc.name == c.port_channel)
        else {
            err(
                format!("{p}.port-channel"),
                format!(
                    "port channel {:?} is not configured (see port-channels)",
                    c.port_channel
                ),
            );
            continue;
        };
        // Frames for the channel cross the peer link when this node's
        // members are down: it must carry the channel's VLANs.
        if let (Some(pv), Some(m)) = (&peer_vlans, pc.members.first()) {
            if let Some(mi) = cfg.port_index(m) {
                let missing: Vec<u16> = cfg
                    .port_vlans(mi)
                    .iter()
                    .filter(|v| !pv.contains(*v))
                    .collect();
                if !missing.is_empty() {
                    err(
                        format!("{p}.port-channel"),
                        format!(
                            "the peer link does not carry VLAN(s) {missing:?} of port channel {:?}",
                            c.port_channel
                        ),
                    );
                }
            }
        }
    }
    for (i, v) in vs.gateways.iter().enumerate() {
        let p = format!("virtual-switch.gateways[{i}]");
        if vs.gateways[..i].contains(v) {
            err(p, format!("VLAN {v} is listed twice"));
            continue;
        }
        match cfg.vlans.iter().find(|x| x.id == *v) {
            None => err(p, format!("VLAN {v} is not configured (see vlans)")),
            Some(x) if x.router.is_none() => err(
                p,
                format!("VLAN {v} has no router section (an SVI) to serve as gateway"),
            ),
            Some(_) => {
                if peer_vlans.as_ref().is_some_and(|pv| !pv.contains(*v)) {
                    err(p, format!("the peer link does not carry VLAN {v}"));
                }
            }
        }
    }
    out
}
