//! Semantic checks on a parsed [`Config`]. Every problem is collected,
//! each with the path of the field it is about.

use std::collections::HashMap;

use super::model::{limits, Config, PortMode, MAX_L3_MTU};
use super::types::{vlan_in_range, IpNet, MacAddr, NativeVlan};
use std::net::IpAddr;

pub use crate::error::Issue;

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
    check_interfaces(cfg, &mut c);
    check_subinterfaces(cfg, &mut c);
    check_routing(cfg, &mut c);
    check_vrrp(cfg, &mut c);
    c.issues.extend(crate::checks::services::check(cfg));
    c.issues.extend(crate::checks::mirror::check(cfg));
    c.issues.extend(crate::checks::ha::check(cfg));
    c.issues.extend(crate::checks::copp::check(cfg));
    c.issues.extend(crate::checks::guard::check(cfg));
    c.issues.extend(crate::checks::multicast::check(cfg));
    c.issues.extend(crate::checks::events::check(cfg));
    c.issues.extend(crate::checks::stp::check(cfg));
    c.issues.extend(crate::checks::vrf::check(cfg));
    c.issues.extend(crate::checks::service_control::check(cfg));
    c.issues.extend(crate::checks::vswitch::check(cfg));
    c.issues.extend(crate::checks::l2vpn::check(cfg));
    c.issues.extend(crate::checks::mpls::check(cfg));
    c.issues
}

fn check_switch(cfg: &Config, c: &mut Checker) {
    let s = &cfg.switch;
    if s.name.trim().is_empty() {
        c.err("switch.name", "must not be empty");
    }
    if !(-20..=19).contains(&s.worker_nice) {
        c.err(
            "switch.worker-nice",
            format!("{} is out of range -20..19", s.worker_nice),
        );
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
    if let Some(n) = s.rx_ring.filter(|n| !limits::RX_RING.contains(n)) {
        c.err(
            "switch.rx-ring",
            format!("{n} frames is out of range 64..65536"),
        );
    }
    if let Some(n) = s.tx_ring.filter(|n| !limits::TX_RING.contains(n)) {
        c.err(
            "switch.tx-ring",
            format!("{n} frames is out of range 16..4096"),
        );
    }
    for (key, v, r, unit) in [
        (
            "switch.af-xdp-busy-poll-budget",
            s.af_xdp_busy_poll_budget,
            limits::BUSY_POLL_BUDGET,
            "frames",
        ),
        (
            "switch.af-xdp-busy-poll-us",
            s.af_xdp_busy_poll_us,
            limits::BUSY_POLL_US,
            "µs",
        ),
        (
            "switch.af-xdp-napi-timeout-us",
            s.af_xdp_napi_timeout_us,
            limits::NAPI_TIMEOUT_US,
            "µs",
        ),
    ] {
        if !r.contains(&v) {
            c.err(
                key,
                format!("{v} {unit} is out of range {}..{}", r.start(), r.end()),
            );
        }
    }
    // Busy polling asked of a port that will not be on AF_XDP.
    for (i, p) in cfg.ports.iter().enumerate() {
        if p.af_xdp_busy_poll == Some(crate::BusyPollMode::On)
            && cfg.backend_of(i) == crate::PortBackend::AfPacket
        {
            c.err(
                format!("ports[{i}].af-xdp-busy-poll"),
                format!(
                    "port {}: busy polling needs an AF_XDP port, and its backend is af-packet",
                    p.name
                ),
            );
        }
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
    if let Some(m) = &cfg.management.metrics {
        if let Err(e) = m.listen_addr() {
            c.err("management.metrics.listen", e);
        }
    }
    if let Some(s) = &cfg.management.snmp {
        if !s.agentx_socket.is_absolute() {
            c.err(
                "management.snmp.agentx-socket",
                format!(
                    "{:?} must be an absolute path (snmpd's agentXSocket)",
                    s.agentx_socket.display().to_string()
                ),
            );
        }
    }
    let log = &cfg.management.logging;
    if let Err(e) = logging::check_filter(&log.filter) {
        c.err("management.logging.filter", e);
    }
    if let Some(sl) = &log.syslog {
        if let Err(e) = sl.server_addr() {
            c.err("management.logging.syslog.server", e);
        }
        if let Err(e) = logging::Facility::parse(&sl.facility) {
            c.err("management.logging.syslog.facility", e);
        }
        if sl.server.is_none() && !sl.local {
            c.err(
                "management.logging.syslog",
                "names no destination (set server, local: true, or both)",
            );
        }
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
        // At the first port over the limit, so the error has its line.
        c.err(
            format!("ports[{}]", limits::MAX_PORTS),
            format!(
                "{} ports configured; at most {} are supported (this is port {})",
                cfg.ports.len(),
                limits::MAX_PORTS,
                limits::MAX_PORTS + 1
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
            PortMode::Routed => {
                for (given, key) in [
                    (p.vlan.is_some(), "vlan"),
                    (p.allowed_vlans.is_some(), "allowed-vlans"),
                    (p.native_vlan.is_some(), "native-vlan"),
                    (p.tpid.is_some(), "tpid"),
                    (p.mac_limit.is_some(), "mac-limit"),
                ] {
                    if given {
                        c.err(
                            format!("{base}.{key}"),
                            format!("{key} is not valid on a routed port (it is in no VLAN)"),
                        );
                    }
                }
                if let Some(m) = p.router_mac {
                    if !m.is_unicast() {
                        c.err(
                            format!("{base}.router-mac"),
                            format!("{m} is not a unicast address"),
                        );
                    }
                }
            }
        }
        if p.mode != PortMode::Routed {
            for (given, key) in [
                (!p.addresses.is_empty(), "addresses"),
                (p.urpf != Default::default(), "urpf"),
                (p.router_mac.is_some(), "router-mac"),
            ] {
                if given {
                    c.err(
                        format!("{base}.{key}"),
                        format!(
                            "{key} is only valid on routed ports (this port is {})",
                            p.mode
                        ),
                    );
                }
            }
        }
        if let Some(mtu) = p.mtu {
            if !limits::MTU.contains(&mtu) {
                c.err(
                    format!("{base}.mtu"),
                    format!("{mtu} is out of range 68..9216"),
                );
            } else if p.mode == PortMode::Routed && mtu > MAX_L3_MTU {
                c.err(
                    format!("{base}.mtu"),
                    format!(
                        "{mtu} is larger than a routed port carries: at most {} (its TAP \
                         twin, which has the same MTU, holds no larger packet)",
                        MAX_L3_MTU
                    ),
                );
            }
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

/// A usable interface address: unicast, not loopback/unspecified, and for
/// IPv4 not the network or broadcast address of a /30 or shorter.
fn address_problem(a: &IpNet) -> Option<String> {
    match a.addr {
        IpAddr::V4(v4) => {
            if a.len == 0 {
                return Some("a /0 interface address makes no sense".into());
            }
            if v4.is_unspecified() || v4.is_loopback() || v4.is_multicast() || v4.is_broadcast() {
                return Some(format!("{} is not a unicast host address", a.addr));
            }
            if a.len <= 30 {
                let host = u32::from(v4) & !(u32::MAX << (32 - a.len));
                if host == 0 || host == !(u32::MAX << (32 - a.len)) {
                    return Some(format!(
                        "{a} is the network or broadcast address of its subnet"
                    ));
                }
            }
            None
        }
        IpAddr::V6(v6) => {
            if a.len == 0 {
                return Some("a /0 interface address makes no sense".into());
            }
            if v6.is_unspecified() || v6.is_loopback() || v6.is_multicast() {
                return Some(format!("{} is not a unicast host address", a.addr));
            }
            None
        }
    }
}

/// Field path of an interface of `cfg.l3_interfaces()`.
fn iface_path(cfg: &Config, ifc: &super::model::L3Interface) -> String {
    if ifc.subinterface.is_some() {
        if let Some(s) = cfg.subinterfaces().find(|s| s.id == ifc.port) {
            return s.path();
        }
    }
    let port = ifc.port;
    match ifc.vlan {
        None => format!("ports[{port}]"),
        Some(id) => {
            let i = cfg.vlans.iter().position(|v| v.id == id).unwrap_or(0);
            format!("vlans[{i}].router")
        }
    }
}

fn check_interfaces(cfg: &Config, c: &mut Checker) {
    let ifs = cfg.l3_interfaces();
    let svis = ifs.iter().filter(|i| i.vlan.is_some()).count();
    let channels = cfg.port_channels.len();
    let subs = cfg.subinterfaces().count();
    if cfg.ports.len() <= limits::MAX_PORTS && cfg.port_ids() > limits::MAX_PORTS {
        c.err(
            if svis > 0 { "vlans" } else { "port-channels" },
            format!(
                "{} ports, {svis} VLAN interfaces, {channels} port channels and {subs} subinterfaces \
                 exceed {} port ids (each of them uses a port id)",
                cfg.ports.len(),
                limits::MAX_PORTS
            ),
        );
    }
    for (x, ifc) in ifs.iter().enumerate() {
        let base = iface_path(cfg, ifc);
        let own = ifc.vlan.is_some() || ifc.subinterface.is_some();
        if let (true, Some(m)) = (own, ifc.router_mac) {
            if !m.is_unicast() {
                c.err(
                    format!("{base}.router-mac"),
                    format!("{m} is not a unicast address"),
                );
            }
        }
        if own && !(68..=MAX_L3_MTU).contains(&ifc.mtu) {
            c.err(
                format!("{base}.mtu"),
                format!("{} is out of range 68..{}", ifc.mtu, MAX_L3_MTU),
            );
        }
        for (k, a) in ifc.addresses.iter().enumerate() {
            let path = format!("{base}.addresses[{k}]");
            if let Some(m) = address_problem(a) {
                c.err(&path, m);
                continue;
            }
            // Subnets of different interfaces must not overlap (a connected
            // route has one egress). IPv6 link-local is per link: exempt.
            let link_local =
                matches!(a.addr, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
            for (y, other) in ifs.iter().enumerate() {
                // Each VRF is its own address space (overlaps across VRFs
                // are what VRFs are for).
                if other.vrf != ifc.vrf {
                    continue;
                }
                for (m, b) in other.addresses.iter().enumerate() {
                    if (y, m) >= (x, k) || address_problem(b).is_some() {
                        continue;
                    }
                    if a.addr == b.addr {
                        c.err(
                            &path,
                            format!(
                                "{} is already {}.addresses[{m}]",
                                a.addr,
                                iface_path(cfg, other)
                            ),
                        );
                    } else if y != x && !link_local {
                        let shorter = if a.len <= b.len { a } else { b };
                        let longer = if a.len <= b.len { b } else { a };
                        if shorter.contains(longer.addr) {
                            c.err(
                                &path,
                                format!(
                                    "subnet {a} overlaps {b} on {}; a connected subnet belongs to one interface",
                                    other.name
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Routed subinterfaces (docs/vrf.md "Subinterfaces"): only on routed
/// ports, one per VLAN tag of a port, tags 1..4094.
fn check_subinterfaces(cfg: &Config, c: &mut Checker) {
    let mut seen: HashMap<(usize, u16), usize> = HashMap::new();
    for s in cfg.subinterfaces() {
        let path = s.path();
        if s.parent.mode != PortMode::Routed {
            c.err(
                format!("ports[{}].subinterfaces", s.port),
                format!(
                    "port {} is {}: subinterfaces need `mode: routed` (to route a VLAN of a \
                     switched port, give the VLAN a router interface, vlans[].router)",
                    s.parent.name, s.parent.mode
                ),
            );
        }
        if !vlan_in_range(s.sub.vlan) {
            c.err(format!("{path}.vlan"), format!("{} is {RANGE}", s.sub.vlan));
            continue;
        }
        if let Some(first) = seen.insert((s.port, s.sub.vlan), s.index) {
            c.err(
                format!("{path}.vlan"),
                format!(
                    "VLAN {} is already ports[{}].subinterfaces[{first}] on {}",
                    s.sub.vlan, s.port, s.parent.name
                ),
            );
        }
    }
}

fn check_routing(cfg: &Config, c: &mut Checker) {
    let r = &cfg.routing;
    if let Some(fpm) = &r.fpm {
        if fpm.parse::<std::net::SocketAddr>().is_err() {
            c.err(
                "routing.fpm",
                format!("{fpm:?} is not ADDRESS:PORT (e.g. 127.0.0.1:2620)"),
            );
        }
    }
    let mut seen: HashMap<(usize, IpNet), usize> = HashMap::new();
    let all = cfg.l3_interfaces();
    for (i, s) in r.static_routes.iter().enumerate() {
        let base = format!("routing.static-routes[{i}]");
        // An unknown VRF is reported by checks::vrf.
        let Some(vrf) = cfg.vrf_index(s.vrf.as_deref()) else {
            continue;
        };
        let ifs: Vec<&super::model::L3Interface> = all.iter().filter(|i| i.vrf == vrf).collect();
        let net = IpNet {
            addr: s.prefix.network(),
            len: s.prefix.len,
        };
        if net.addr != s.prefix.addr {
            c.err(
                format!("{base}.prefix"),
                format!("{} has host bits set (did you mean {net}?)", s.prefix),
            );
        }
        if let Some(first) = seen.get(&(vrf, net)) {
            c.err(
                format!("{base}.prefix"),
                format!("duplicate route for {net} (already routing.static-routes[{first}])"),
            );
        } else {
            seen.insert((vrf, net), i);
        }
        if s.remote_pe.is_some() || s.vpn_label.is_some() {
            // A static VPN route: checked by checks::vrf.
            continue;
        }
        let port = match &s.interface {
            None => None,
            Some(name) => match ifs.iter().find(|i| &i.name == name) {
                Some(i) => Some(*i),
                None => {
                    let why = match cfg.port(name) {
                        _ if all.iter().any(|i| &i.name == name) => format!(
                            "{name} is in another VRF than the route ({})",
                            s.vrf.as_deref().unwrap_or("default")
                        ),
                        Some(_) => format!("port {name:?} is not a routed port"),
                        None => format!(
                            "unknown interface {name:?} (a routed port, or vlanN for a VLAN interface)"
                        ),
                    };
                    c.err(format!("{base}.interface"), why);
                    continue;
                }
            },
        };
        if s.blackhole {
            if s.interface.is_some() || s.next_hop.is_some() {
                c.err(
                    format!("{base}.blackhole"),
                    "a blackhole route has no next-hop or interface",
                );
            }
            continue;
        }
        match s.next_hop {
            None if port.is_none() => c.err(
                &base,
                "give next-hop (a gateway), interface (a directly attached prefix), or blackhole: true",
            ),
            None => {}
            Some(gw) => {
                if gw.is_ipv4() != s.prefix.addr.is_ipv4() {
                    c.err(
                        format!("{base}.next-hop"),
                        format!("{gw} is not of the same address family as {}", s.prefix),
                    );
                    continue;
                }
                let link_local = matches!(gw, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
                let on_link = |i: &super::model::L3Interface| {
                    i.addresses.iter().any(|a| a.len < a.max_len() && a.contains(gw))
                };
                match port {
                    Some(p) if !link_local && !on_link(p) => c.err(
                        format!("{base}.next-hop"),
                        format!("{gw} is not in a subnet of port {:?}", p.name),
                    ),
                    None if link_local => c.err(
                        format!("{base}.interface"),
                        format!("{gw} is link-local: say which interface"),
                    ),
                    None if !ifs.iter().any(|i| on_link(i)) => c.err(
                        format!("{base}.next-hop"),
                        format!(
                            "{gw} is not in the subnet of any routed port (recursive static routes are not supported)"
                        ),
                    ),
                    _ => {}
                }
            }
        }
    }
}

/// VRRP groups (docs/vrrp.md): on routed ports and VLAN interfaces of
/// the default VRF.
fn check_vrrp(cfg: &Config, c: &mut Checker) {
    for (i, p) in cfg.ports.iter().enumerate() {
        let at = format!("ports[{i}]");
        for (path, m) in crate::vrrp::check(&at, &p.vrrp, &p.addresses, p.mode == PortMode::Routed)
        {
            c.err(path, m);
        }
        if !p.vrrp.is_empty() && cfg.vrf_of_interface(&p.name) != 0 {
            c.err(
                format!("{at}.vrrp"),
                "VRRP runs on interfaces of the default VRF only",
            );
        }
    }
    for (i, v) in cfg.vlans.iter().enumerate() {
        let Some(r) = &v.router else { continue };
        let at = format!("vlans[{i}].router");
        for (path, m) in crate::vrrp::check(&at, &r.vrrp, &r.addresses, true) {
            c.err(path, m);
        }
        if !r.vrrp.is_empty() && cfg.vrf_of_interface(&format!("vlan{}", v.id)) != 0 {
            c.err(
                format!("{at}.vrrp"),
                "VRRP runs on interfaces of the default VRF only",
            );
        }
    }
}
