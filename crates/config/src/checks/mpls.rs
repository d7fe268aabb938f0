//! Checks of `mpls:` that need the whole configuration.

use crate::mpls::*;
use std::collections::HashMap;

/// Semantic checks of `mpls.fast-reroute`.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    for (name, map) in [
        ("tc-of-class", &cfg.mpls.tc_of_class),
        ("class-of-tc", &cfg.mpls.class_of_tc),
    ] {
        let Some(m) = map else { continue };
        if m.len() != 8 {
            err(
                format!("mpls.{name}"),
                format!(
                    "{} values; it maps each of the 8 values 0..7, so list 8",
                    m.len()
                ),
            );
        }
        if let Some(v) = m.iter().find(|v| **v > 7) {
            err(format!("mpls.{name}"), format!("{v} is out of range 0..7"));
        }
    }
    let frr = &cfg.mpls.fast_reroute;
    if frr.len() > MAX_FAST_REROUTE {
        err(
            "mpls.fast-reroute".into(),
            format!("{} protected ports; at most {MAX_FAST_REROUTE}", frr.len()),
        );
    }
    let ifcs = cfg.l3_interfaces();
    // A routed port of the default VRF (not a VLAN interface).
    let routed = |name: &str| {
        ifcs.iter()
            .find(|i| i.name == name && i.vlan.is_none() && i.vrf == 0)
    };
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, f) in frr.iter().enumerate() {
        let at = format!("mpls.fast-reroute[{i}]");
        match routed(&f.protect) {
            None => err(
                format!("{at}.protect"),
                format!(
                    "{:?} is not a routed port of the default VRF (a protected link is a routed port)",
                    f.protect
                ),
            ),
            Some(_) => {
                if let Some(j) = seen.insert(f.protect.as_str(), i) {
                    err(
                        format!("{at}.protect"),
                        format!(
                            "port {:?} is already protected by mpls.fast-reroute[{j}]",
                            f.protect
                        ),
                    );
                }
            }
        }
        let b = &f.backup;
        match routed(&b.port) {
            None => err(
                format!("{at}.backup.port"),
                format!("{:?} is not a routed port of the default VRF", b.port),
            ),
            Some(_) if b.port == f.protect => err(
                format!("{at}.backup.port"),
                format!(
                    "the backup leaves through the protected port {:?} itself",
                    b.port
                ),
            ),
            Some(ifc) => {
                if !ifc
                    .addresses
                    .iter()
                    .any(|a| a.len < a.max_len() && a.contains(b.next_hop) && a.addr != b.next_hop)
                {
                    err(
                        format!("{at}.backup.next-hop"),
                        format!(
                            "{} is not a neighbour on a subnet of port {:?}",
                            b.next_hop, b.port
                        ),
                    );
                }
            }
        }
        if b.labels.len() > MAX_BYPASS_LABELS {
            err(
                format!("{at}.backup.labels"),
                format!(
                    "{} labels; a bypass pushes at most {MAX_BYPASS_LABELS}",
                    b.labels.len()
                ),
            );
        }
        for (k, &l) in b.labels.iter().enumerate() {
            if !(16..=0xF_FFFF).contains(&l) {
                err(
                    format!("{at}.backup.labels[{k}]"),
                    format!("label {l} is out of range 16..1048575"),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::mpls::{tc_map, IcmpTunneling, TtlPropagation};
    const BASE: &str = "ports:\n  - {name: c1, mode: routed, addresses: [10.0.1.1/30]}\n  - {name: c2, mode: routed, addresses: [10.0.2.1/30]}\n  - {name: sw}\nmpls:\n  fast-reroute:\n";

    fn errors(extra: &str) -> Vec<String> {
        match crate::parse(&format!("{BASE}{extra}"), "frr.yaml") {
            Ok(_) => Vec::new(),
            Err(e) => e.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_valid_section_parses() {
        let cfg = crate::parse(
            &format!("{BASE}    - {{protect: c1, backup: {{port: c2, next-hop: 10.0.2.2, labels: [900]}}}}\n    - {{protect: c2, backup: {{port: c1, next-hop: 10.0.1.2}}}}\n"),
            "frr.yaml",
        )
        .unwrap();
        let f = &cfg.mpls.fast_reroute;
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].backup.labels, vec![900]);
        assert!(f[1].backup.labels.is_empty());
        assert_eq!(cfg.mpls.icmp_tunneling, IcmpTunneling::Auto);
        for (v, want) in [
            ("auto", IcmpTunneling::Auto),
            ("always", IcmpTunneling::Always),
            ("never", IcmpTunneling::Never),
        ] {
            let cfg = crate::parse(
                &format!("{BASE}    []\n  icmp-tunneling: {v}\n"),
                "frr.yaml",
            )
            .unwrap();
            assert_eq!(cfg.mpls.icmp_tunneling, want);
            assert_eq!(cfg.mpls.is_empty(), v == "auto");
        }
        assert_eq!(cfg.mpls.ttl_propagation, TtlPropagation::Uniform);
        assert_eq!(tc_map(&cfg.mpls.tc_of_class), [0, 1, 2, 3, 4, 5, 6, 7]);
        let cfg = crate::parse(
            &format!("{BASE}    []\n  ttl-propagation: pipe\n  tc-remark: true\n  tc-of-class: [0, 0, 1, 1, 2, 5, 6, 7]\n  class-of-tc: [7, 6, 5, 4, 3, 2, 1, 0]\n"),
            "frr.yaml",
        )
        .unwrap();
        let m = &cfg.mpls;
        assert_eq!(m.ttl_propagation, TtlPropagation::Pipe);
        assert!(m.tc_remark && !m.is_empty());
        assert_eq!(tc_map(&m.tc_of_class), [0, 0, 1, 1, 2, 5, 6, 7]);
        assert_eq!(tc_map(&m.class_of_tc), [7, 6, 5, 4, 3, 2, 1, 0]);
    }

    #[test]
    fn mistakes_are_reported_with_their_line() {
        let cases: &[(&str, &str, usize)] = &[
            ("    - {protect: nope, backup: {port: c2, next-hop: 10.0.2.2}}\n", "is not a routed port", 7),
            ("    - {protect: sw, backup: {port: c2, next-hop: 10.0.2.2}}\n", "is not a routed port", 7),
            ("    - {protect: c1, backup: {port: c1, next-hop: 10.0.1.2}}\n", "protected port", 7),
            ("    - {protect: c1, backup: {port: c2, next-hop: 10.0.9.2}}\n", "not a neighbour", 7),
            ("    - {protect: c1, backup: {port: c2, next-hop: 10.0.2.1}}\n", "not a neighbour", 7),
            ("    - {protect: c1, backup: {port: c2, next-hop: 10.0.2.2}}\n    - {protect: c1, backup: {port: c2, next-hop: 10.0.2.2}}\n", "already protected", 8),
            ("    - {protect: c1, backup: {port: c2, next-hop: 10.0.2.2, labels: [5]}}\n", "out of range 16..1048575", 7),
            ("    - {protect: c1, backup: {port: c2, next-hop: 10.0.2.2, labels: [16, 17, 18]}}\n", "at most 2", 7),
            ("    - {protect: c1, backup: {port: c2, nexthop: 10.0.2.2}}\n", "unknown field", 7),
            ("    []\n  icmp-tunneling: sometimes\n", "unknown variant", 8),
            ("    []\n  ttl-propagation: short-pipe\n", "unknown variant", 8),
            ("    []\n  tc-of-class: [0, 1, 2]\n", "3 values", 8),
            ("    []\n  class-of-tc: [0, 1, 2, 3, 4, 5, 6, 9]\n", "9 is out of range 0..7", 8),
            ("    []\n  tc-remark: maybe\n", "tc-remark", 8),
        ];
        for (yaml, want, line) in cases {
            let e = errors(yaml);
            let prefix = format!("frr.yaml:{line}");
            assert!(
                e.iter().any(|m| m.contains(want) && m.starts_with(&prefix)),
                "{yaml}: want {want:?} at {prefix} in {e:?}"
            );
        }
    }
}
