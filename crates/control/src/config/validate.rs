//! Semantic checks on a parsed [`Config`]. Every problem is collected,
//! each with the path of the field it is about.

use std::collections::HashMap;

use super::model::{limits, Config, PortMode};
use super::types::{vlan_in_range, MacAddr, NativeVlan};

/// A semantic problem: field path and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// e.g. `ports[2].vlan`
    pub path: String,
    /// What is wrong.
    pub message: String,
}

struct Checker {
    issues: Vec<Issue>,
}

impl Checker {
    fn err(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.issues.push(Issue {
            path: path.into(),
            message: message.into(),
        });
    }
}

const RANGE: &str = "out of range 1..4094";

/// Runs every check; an empty result means the configuration is valid.
pub fn validate(cfg: &Config) -> Vec<Issue> {
    let mut c = Checker { issues: Vec::new() };
    check_switch(cfg, &mut c);
    check_vlans(cfg, &mut c);
    check_ports(cfg, &mut c);
    check_static_macs(cfg, &mut c);
    c.issues
}

fn check_switch(cfg: &Config, c: &mut Checker) {
    let s = &cfg.switch;
    if s.name.trim().is_empty() {
        c.err("switch.name", "must not be empty");
    }
    if !limits::WORKERS.contains(&s.workers) {
        c.err(
            "switch.workers",
            format!("{} is out of range 1..64", s.workers),
        );
    }
    if !limits::MAC_TABLE_SIZE.contains(&s.mac_table_size) {
        c.err(
            "switch.mac-table-size",
            format!("{} is out of range 1..16777216", s.mac_table_size),
        );
    }
    let sock = &cfg.management.socket;
    if sock.as_os_str().is_empty() {
        c.err("management.socket", "must not be empty");
    } else if !sock.is_absolute() {
        c.err(
            "management.socket",
            format!("{:?} must be an absolute path", sock.display().to_string()),
        );
    }
}

fn check_mac_limit(cfg: &Config, c: &mut Checker, path: String, limit: Option<u32>) {
    let Some(limit) = limit else { return };
    if limit == 0 {
        c.err(path, "must be at least 1");
    } else if limit > cfg.switch.mac_table_size
        && limits::MAC_TABLE_SIZE.contains(&cfg.switch.mac_table_size)
    {
        c.err(
            path,
            format!(
                "{limit} exceeds switch.mac-table-size ({})",
                cfg.switch.mac_table_size
            ),
        );
    }
}

fn check_vlans(cfg: &Config, c: &mut Checker) {
    let mut seen: HashMap<u16, usize> = HashMap::new();
    for (i, v) in cfg.vlans.iter().enumerate() {
        let base = format!("vlans[{i}]");
        if !vlan_in_range(v.id) {
            c.err(format!("{base}.id"), format!("VLAN id {} {RANGE}", v.id));
        } else if let Some(first) = seen.get(&v.id) {
            c.err(
                format!("{base}.id"),
                format!(
                    "duplicate VLAN {} (already defined at vlans[{first}])",
                    v.id
                ),
            );
        } else {
            seen.insert(v.id, i);
        }
        check_mac_limit(cfg, c, format!("{base}.mac-limit"), v.mac_limit);
    }
}

/// "VLAN 30 is not configured" unless it exists; checks range first.
fn check_vlan_ref(cfg: &Config, c: &mut Checker, path: &str, id: u16) -> bool {
    if !vlan_in_range(id) {
        c.err(path, format!("VLAN id {id} {RANGE}"));
        false
    } else if !cfg.vlan_exists(id) {
        c.err(
            path,
            format!("VLAN {id} is not configured (add it under vlans)"),
        );
        false
    } else {
        true
    }
}

fn check_port_name(c: &mut Checker, path: &str, name: &str) {
    if name.is_empty() {
        c.err(path, "port name must not be empty");
    } else if name.len() > limits::MAX_PORT_NAME {
        c.err(
            path,
            format!(
                "port name {name:?} is {} bytes long; Linux interface names have at most {}",
                name.len(),
                limits::MAX_PORT_NAME
            ),
        );
    } else if name == "."
        || name == ".."
        || name.contains('/')
        || name.chars().any(|ch| ch.is_whitespace() || ch.is_control())
    {
        c.err(
            path,
            format!("port name {name:?} is not a valid Linux interface name"),
        );
    }
}

fn check_ports(cfg: &Config, c: &mut Checker) {
    if cfg.ports.is_empty() {
        c.err("ports", "no ports configured");
    } else if cfg.ports.len() > limits::MAX_PORTS {
        c.err(
            "ports",
            format!(
                "{} ports configured; at most {} are supported",
                cfg.ports.len(),
                limits::MAX_PORTS
            ),
        );
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        let base = format!("ports[{i}]");
        check_port_name(c, &format!("{base}.name"), &p.name);
        if !p.name.is_empty() {
            if let Some(first) = names.get(p.name.as_str()) {
                c.err(
                    format!("{base}.name"),
                    format!(
                        "duplicate port name {:?} (already used by ports[{first}])",
                        p.name
                    ),
                );
            } else {
                names.insert(&p.name, i);
            }
        }
        match p.mode {
            PortMode::Access | PortMode::Dot1qTunnel => {
                if let Some(id) = p.vlan {
                    check_vlan_ref(cfg, c, &format!("{base}.vlan"), id);
                }
                for (given, key) in [
                    (p.allowed_vlans.is_some(), "allowed-vlans"),
                    (p.native_vlan.is_some(), "native-vlan"),
                    (p.tpid.is_some(), "tpid"),
                ] {
                    if given {
                        c.err(
                            format!("{base}.{key}"),
                            format!(
                                "{key} is only valid on trunk ports (this port is {})",
                                p.mode
                            ),
                        );
                    }
                }
            }
            PortMode::Trunk => {
                if p.vlan.is_some() {
                    c.err(
                        format!("{base}.vlan"),
                        "vlan is only valid on access and dot1q-tunnel ports (trunks use allowed-vlans and native-vlan)",
                    );
                }
                if let Some(list) = &p.allowed_vlans {
                    let bad: Vec<String> = list
                        .iter()
                        .filter(|id| !vlan_in_range(*id))
                        .map(|id| id.to_string())
                        .collect();
                    if !bad.is_empty() {
                        c.err(
                            format!("{base}.allowed-vlans"),
                            format!("VLAN id {} {RANGE}", bad.join(", ")),
                        );
                    }
                }
                if let Some(NativeVlan::Vlan(id)) = p.native_vlan {
                    check_vlan_ref(cfg, c, &format!("{base}.native-vlan"), id);
                }
            }
        }
        if !limits::MTU.contains(&p.mtu) {
            c.err(
                format!("{base}.mtu"),
                format!("{} is out of range 68..9216", p.mtu),
            );
        }
        check_mac_limit(cfg, c, format!("{base}.mac-limit"), p.mac_limit);
    }
}

fn check_static_macs(cfg: &Config, c: &mut Checker) {
    let mut seen: HashMap<(MacAddr, u16), usize> = HashMap::new();
    let size = cfg.switch.mac_table_size as usize;
    if cfg.static_macs.len() > size && limits::MAC_TABLE_SIZE.contains(&cfg.switch.mac_table_size) {
        c.err(
            "static-macs",
            format!(
                "{} static entries do not fit in switch.mac-table-size ({size})",
                cfg.static_macs.len()
            ),
        );
    }
    for (i, s) in cfg.static_macs.iter().enumerate() {
        let base = format!("static-macs[{i}]");
        if s.mac.is_broadcast() {
            c.err(
                format!("{base}.mac"),
                "the broadcast address cannot be a static entry",
            );
        } else if s.mac.is_multicast() {
            c.err(
                format!("{base}.mac"),
                format!(
                    "{} is a multicast address; static entries must be unicast",
                    s.mac
                ),
            );
        } else if s.mac.is_zero() {
            c.err(
                format!("{base}.mac"),
                "the all-zero address cannot be a static entry",
            );
        }
        let vlan_ok = check_vlan_ref(cfg, c, &format!("{base}.vlan"), s.vlan);
        match cfg.port_index(&s.port) {
            None => c.err(format!("{base}.port"), format!("unknown port {:?}", s.port)),
            Some(pi) => {
                if vlan_ok && !cfg.port_vlans(pi).contains(s.vlan) {
                    c.err(
                        format!("{base}.vlan"),
                        format!("port {:?} does not carry VLAN {}", s.port, s.vlan),
                    );
                }
            }
        }
        if let Some(first) = seen.get(&(s.mac, s.vlan)) {
            c.err(
                format!("{base}.mac"),
                format!(
                    "duplicate static entry {} in VLAN {} (already at static-macs[{first}])",
                    s.mac, s.vlan
                ),
            );
        } else {
            seen.insert((s.mac, s.vlan), i);
        }
    }
}
