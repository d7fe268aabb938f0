//! Checks of `pseudowires:` that need the whole configuration.

use crate::l2vpn::*;
use std::collections::{HashMap, HashSet};

/// Semantic checks of `pseudowires:`.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    if cfg.pseudowires.len() > MAX_PSEUDOWIRES {
        err(
            "pseudowires".into(),
            format!(
                "{} pseudowires; at most {MAX_PSEUDOWIRES}",
                cfg.pseudowires.len()
            ),
        );
    }
    if !cfg.pseudowires.is_empty() && cfg.l3_interfaces().is_empty() {
        err(
            "pseudowires".into(),
            "pseudowires need a routed uplink toward the remote PEs (no routed port or VLAN interface)".into(),
        );
    }
    let mut names = HashSet::new();
    let mut ids: HashMap<(std::net::Ipv4Addr, u32), usize> = HashMap::new();
    let mut ifnames = HashSet::new();
    let mut labels = HashSet::new();
    // Per port: whole-port use, and the VLANs taken.
    let mut whole: HashMap<&str, usize> = HashMap::new();
    let mut vlans: HashMap<(&str, u16), usize> = HashMap::new();
    for (i, w) in cfg.pseudowires.iter().enumerate() {
        let at = format!("pseudowires[{i}]");
        if w.name.trim().is_empty() || w.name.contains(char::is_whitespace) {
            err(
                format!("{at}.name"),
                format!("{:?} is not a name (no spaces; FRR's l2vpn NAME)", w.name),
            );
        } else if !names.insert(w.name.as_str()) {
            err(
                format!("{at}.name"),
                format!("l2vpn {:?} is configured twice", w.name),
            );
        }
        match cfg.port_index(&w.port) {
            None => err(
                format!("{at}.port"),
                format!("port {:?} is not configured (see ports)", w.port),
            ),
            Some(ix) => {
                let p = &cfg.ports[ix];
                if p.mode == crate::PortMode::Routed {
                    err(
                        format!("{at}.port"),
                        format!(
                            "port {:?} is routed: an attachment circuit is a switch port in no VLAN",
                            w.port
                        ),
                    );
                }
                if p.vlan.is_some() || p.allowed_vlans.is_some() || p.native_vlan.is_some() {
                    err(
                        format!("{at}.port"),
                        format!(
                            "port {:?} has VLAN settings: an attachment circuit's port is in no bridge VLAN (remove vlan/allowed-vlans/native-vlan)",
                            w.port
                        ),
                    );
                }
                if cfg
                    .port_channels
                    .iter()
                    .any(|c| c.members.contains(&w.port))
                    || cfg
                        .backup_pairs
                        .iter()
                        .any(|b| b.primary == w.port || b.backup == w.port)
                    || cfg.is_monitor_port(ix)
                    || cfg.is_inline_port(ix)
                {
                    err(
                        format!("{at}.port"),
                        format!(
                            "port {:?} is already used (port channel, backup pair, mirror destination or inline pair)",
                            w.port
                        ),
                    );
                }
            }
        }
        match w.vlan {
            None => {
                if let Some(j) = whole.insert(w.port.as_str(), i) {
                    err(
                        format!("{at}.port"),
                        format!("port {:?} is already the whole-port attachment circuit of pseudowires[{j}]", w.port),
                    );
                } else if let Some((_, j)) = vlans.iter().find(|((p, _), _)| *p == w.port) {
                    err(
                        format!("{at}.port"),
                        format!("port {:?} already carries VLAN attachment circuits (pseudowires[{j}]): a port is either whole (type 5) or per VLAN (type 4)", w.port),
                    );
                }
            }
            Some(v) => {
                if !crate::vlan_in_range(v) {
                    err(format!("{at}.vlan"), format!("{v} is out of range 1..4094"));
                } else if let Some(j) = vlans.insert((w.port.as_str(), v), i) {
                    err(
                        format!("{at}.vlan"),
                        format!("VLAN {v} of port {:?} is already the attachment circuit of pseudowires[{j}]", w.port),
                    );
                }
                if let Some(j) = whole.get(w.port.as_str()) {
                    err(
                        format!("{at}.vlan"),
                        format!(
                            "port {:?} is the whole-port attachment circuit of pseudowires[{j}]",
                            w.port
                        ),
                    );
                }
            }
        }
        if w.pw_id == 0 {
            err(
                format!("{at}.pw-id"),
                "0 is not a pseudowire id (1..2^32-1)".into(),
            );
        } else if let Some(j) = ids.insert((w.neighbor, w.pw_id), i) {
            err(
                format!("{at}.pw-id"),
                format!(
                    "pw-id {} to {} is already used by pseudowires[{j}]",
                    w.pw_id, w.neighbor
                ),
            );
        }
        if w.neighbor.is_unspecified() || w.neighbor.is_multicast() || w.neighbor.is_broadcast() {
            err(
                format!("{at}.neighbor"),
                format!("{} is not a PE address", w.neighbor),
            );
        }
        if !PW_MTU.contains(&w.mtu) {
            err(
                format!("{at}.mtu"),
                format!("{} is out of range 64..9190", w.mtu),
            );
        }
        let ifname = w.ifname();
        if ifname.is_empty() || ifname.len() > crate::limits::MAX_PORT_NAME {
            err(
                format!("{at}.ifname"),
                format!("{ifname:?} is not an interface name (1..15 bytes)"),
            );
        } else if !ifnames.insert(ifname.clone()) {
            err(
                format!("{at}.ifname"),
                format!("pseudowire interface {ifname:?} is used twice"),
            );
        }
        if let Some(l) = w.static_labels {
            for (k, v) in [("local", l.local), ("remote", l.remote)] {
                if !(16..=1_048_575).contains(&v) {
                    err(
                        format!("{at}.static-labels.{k}"),
                        format!("label {v} is out of range 16..1048575"),
                    );
                }
            }
            if !labels.insert(l.local) {
                err(
                    format!("{at}.static-labels.local"),
                    format!("label {} is already a pseudowire's local label", l.local),
                );
            }
        }
    }
    out
}
