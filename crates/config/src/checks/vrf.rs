//! Checks of `vrfs` that need the whole configuration: names, table ids
//! and route distinguishers unique, every listed interface a layer-3
//! interface in at most one VRF, every `vrf:` reference known.

use crate::vrf::{parse_rd, MAX_TABLE, MAX_VRF_NAME};
use std::collections::HashMap;

/// Semantic checks of VRFs.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut tables: HashMap<u32, usize> = HashMap::new();
    let mut rds: HashMap<String, usize> = HashMap::new();
    let mut namespaces: HashMap<&str, usize> = HashMap::new();
    let mut member: HashMap<&str, (usize, usize)> = HashMap::new();
    let l3 = cfg.l3_interface_names();
    for (i, v) in cfg.vrfs.iter().enumerate() {
        let at = format!("vrfs[{i}]");
        let ok_name = !v.name.is_empty()
            && v.name.len() <= MAX_VRF_NAME
            && v.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if !ok_name {
            err(
                format!("{at}.name"),
                format!(
                    "{:?} is not a VRF name (1..{MAX_VRF_NAME} of A-Z a-z 0-9 - _ .)",
                    v.name
                ),
            );
        } else if v.name == "default" {
            err(
                format!("{at}.name"),
                "\"default\" is the global table; interfaces in no VRF are in it".into(),
            );
        } else if let Some(&first) = names.get(v.name.as_str()) {
            err(
                format!("{at}.name"),
                format!("duplicate VRF {:?} (already vrfs[{first}])", v.name),
            );
        } else {
            names.insert(&v.name, i);
        }
        let table = v.table_id(i);
        if !(256..=MAX_TABLE).contains(&table) {
            err(
                format!("{at}.table"),
                format!("{table} is out of range 256..{MAX_TABLE} (0-255 are the kernel's)"),
            );
        } else if let Some(first) = tables.insert(table, i) {
            err(
                if v.table.is_some() {
                    format!("{at}.table")
                } else {
                    format!("{at}.name")
                },
                format!(
                    "table {table} is already VRF {:?}'s (vrfs[{first}])",
                    cfg.vrfs[first].name
                ),
            );
        }
        if let Some(rd) = &v.rd {
            match parse_rd(rd) {
                Err(e) => err(format!("{at}.rd"), e),
                Ok(canon) => {
                    if let Some(first) = rds.insert(canon, i) {
                        err(
                            format!("{at}.rd"),
                            format!(
                                "duplicate route distinguisher {rd} (already VRF {:?}, vrfs[{first}])",
                                cfg.vrfs[first].name
                            ),
                        );
                    }
                }
            }
        }
        let ns = v.netns();
        if ns.is_empty() || ns.len() > 255 || ns.contains('/') || ns == "." || ns == ".." {
            err(
                format!("{at}.namespace"),
                format!("{ns:?} is not a namespace name"),
            );
        } else if let Some(first) = namespaces
            .insert(ns, i)
            .filter(|_| v.namespace.is_some() || names.get(v.name.as_str()) == Some(&i))
        {
            err(
                format!("{at}.namespace"),
                format!(
                    "namespace {ns:?} is already VRF {:?}'s (vrfs[{first}])",
                    cfg.vrfs[first].name
                ),
            );
        }
        for (k, name) in v.interfaces.iter().enumerate() {
            let path = format!("{at}.interfaces[{k}]");
            if !l3.iter().any(|n| n == name) {
                let why = match cfg.port(name) {
                    Some(_) => format!("port {name:?} is not a routed port (mode: routed)"),
                    None => format!(
                        "unknown interface {name:?} (a routed port, vlanN for a VLAN interface with a router, or PORT.VLAN for a routed subinterface)"
                    ),
                };
                err(path, why);
                continue;
            }
            match member.get(name.as_str()) {
                Some(&(vi, _)) if vi == i => {
                    err(path, format!("{name} is listed twice in VRF {:?}", v.name))
                }
                Some(&(vi, vk)) => err(
                    path,
                    format!(
                        "{name} is already in VRF {:?} (vrfs[{vi}].interfaces[{vk}]); an interface belongs to one VRF",
                        cfg.vrfs[vi].name
                    ),
                ),
                None => {
                    member.insert(name, (i, k));
                }
            }
        }
    }
    for (i, s) in cfg.routing.static_routes.iter().enumerate() {
        if let Some(name) = &s.vrf {
            if !cfg.vrfs.iter().any(|v| &v.name == name) {
                err(
                    format!("routing.static-routes[{i}].vrf"),
                    format!("unknown VRF {name:?} (define it under vrfs)"),
                );
            }
        }
    }
    out.extend(check_static_vpn(cfg));
    out
}

/// Static L3VPN: the VRFs' local VPN labels (in range, unique, clear of
/// the pseudowires' static labels and, with FRR, of zebra's dynamic
/// labels) and the `remote-pe` routes (in a VRF, both keys, nothing else
/// of a next hop). A remote PE the default VRF cannot reach is not an
/// error: the route stays inactive until it can (docs/vrf.md).
fn check_static_vpn(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    use crate::vrf::{STATIC_LABEL_FLOOR, VPN_LABELS};
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    let pw_labels: HashMap<u32, usize> = cfg
        .pseudowires
        .iter()
        .enumerate()
        .filter_map(|(j, w)| Some((w.static_labels?.local, j)))
        .collect();
    let mut labels: HashMap<u32, usize> = HashMap::new();
    for (i, v) in cfg.vrfs.iter().enumerate() {
        let Some(l) = v.vpn_label else { continue };
        let at = format!("vrfs[{i}].vpn-label");
        if !VPN_LABELS.contains(&l) {
            err(at, format!("label {l} is out of range 16..1048575"));
        } else if let Some(first) = labels.insert(l, i) {
            err(
                at,
                format!(
                    "label {l} is already VRF {:?}'s (vrfs[{first}].vpn-label)",
                    cfg.vrfs[first].name
                ),
            );
        } else if let Some(j) = pw_labels.get(&l) {
            err(
                at,
                format!("label {l} is already the local label of pseudowires[{j}] (static-labels.local)"),
            );
        } else if cfg.routing.fpm.is_some() && l < STATIC_LABEL_FLOOR {
            err(
                at,
                format!(
                    "label {l} is in the range zebra hands ldpd and bgpd (16 upward) and routing.fpm is set: \
                     use {STATIC_LABEL_FLOOR}..1048575"
                ),
            );
        }
    }
    for (i, s) in cfg.routing.static_routes.iter().enumerate() {
        if s.remote_pe.is_none() && s.vpn_label.is_none() {
            continue;
        }
        let at = format!("routing.static-routes[{i}]");
        match (s.remote_pe, s.vpn_label) {
            (None, _) => err(
                format!("{at}.vpn-label"),
                "a VPN route needs remote-pe too (the PE the prefix is behind)".into(),
            ),
            (_, None) => err(
                format!("{at}.remote-pe"),
                "a VPN route needs vpn-label too (the remote PE's label of the VRF)".into(),
            ),
            (Some(pe), Some(l)) => {
                if pe.is_unspecified() || pe.is_multicast() || pe.is_broadcast() || pe.is_loopback()
                {
                    err(
                        format!("{at}.remote-pe"),
                        format!("{pe} is not a PE address"),
                    );
                }
                if !VPN_LABELS.contains(&l) {
                    err(
                        format!("{at}.vpn-label"),
                        format!("label {l} is out of range 16..1048575"),
                    );
                }
            }
        }
        if s.vrf.is_none() {
            err(
                format!("{at}.remote-pe"),
                "a VPN route belongs to a VRF (give vrf:); the default VRF reaches the remote PE itself".into(),
            );
        }
        if s.next_hop.is_some() || s.interface.is_some() || s.blackhole {
            let key = if s.next_hop.is_some() {
                "next-hop"
            } else if s.interface.is_some() {
                "interface"
            } else {
                "blackhole"
            };
            err(
                format!("{at}.{key}"),
                "a VPN route's next hop is its remote-pe (through the default VRF): no next-hop, interface or blackhole".into(),
            );
        }
    }
    out
}
