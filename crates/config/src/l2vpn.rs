//! `pseudowires:` — Ethernet pseudowires (RFC 4448) to other PEs over
//! MPLS (docs/mpls.md, "Pseudowires").
//!
//! Each entry is one attachment circuit and its pseudowire, named like
//! FRR ldpd's `l2vpn NAME type vpls` so the operator writes both sides
//! with the same names: a whole port (`vlan` absent: RFC 4448 raw mode,
//! PW type 5) or one VLAN of a port (`vlan` set: tagged mode, PW type 4).
//! Labels come from ldpd's targeted LDP through the zebra module's side
//! channel (`routing.pseudowire-socket`), or, with `static-labels`, from
//! the configuration itself (no signalling; both PEs configured mirrored).

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// Where the zebra module (`zebra_lanyard.so:PATH`) sends pseudowire
/// installs by default.
pub const DEFAULT_PSEUDOWIRE_SOCKET: &str = "/run/lanyard/zebra-pw.sock";
/// Most pseudowires (the LFIB's pseudowire slots).
pub const MAX_PSEUDOWIRES: usize = 16_384;
/// Pseudowire MTU bounds (the customer frame without its Ethernet header,
/// as LDP signals it, RFC 4447 §5.3.2.1).
pub const PW_MTU: std::ops::RangeInclusive<u32> = 64..=9190;
/// FRR ldpd's default l2vpn MTU.
pub const DEFAULT_PW_MTU: u32 = 1500;

/// One entry of `pseudowires:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PseudowireConfig {
    /// The l2vpn name (FRR: `l2vpn NAME type vpls`; zebra's `vpn=`).
    pub name: String,
    /// The attachment circuit's port (a port in no VLAN, not routed).
    pub port: String,
    /// Tagged mode (PW type 4): only this VLAN of the port, the tag
    /// carried in the pseudowire. Absent: the whole port (type 5), every
    /// frame carried as received, tagged or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// The remote PE (its LSR id / loopback; FRR: `neighbor lsr-id`).
    pub neighbor: Ipv4Addr,
    /// Pseudowire id, the same on both PEs (FRR: `pw-id`).
    pub pw_id: u32,
    /// Control word (RFC 4448 §4.6). Default on, as ldpd (`control-word
    /// exclude` turns it off there).
    #[serde(default = "yes")]
    pub control_word: bool,
    /// Largest customer frame without its 14-byte Ethernet header (tag
    /// included in tagged mode); larger frames are dropped and counted.
    /// Default 1500 (ldpd's default; both PEs must agree).
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// The pseudowire interface name zebra reports (`ifname=`; FRR:
    /// `member pseudowire IFNAME`). Default `mpw<pw-id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifname: Option<String>,
    /// Static labels instead of LDP: `local` is popped to this AC, `remote`
    /// is pushed toward the neighbour (the neighbour's `local`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_labels: Option<StaticLabels>,
}

/// `pseudowires[].static-labels`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StaticLabels {
    pub local: u32,
    pub remote: u32,
}

fn yes() -> bool {
    true
}
fn default_mtu() -> u32 {
    DEFAULT_PW_MTU
}

impl PseudowireConfig {
    /// RFC 4446 PW type: 4 (Ethernet tagged) with a VLAN, else 5.
    pub fn pw_type(&self) -> u8 {
        if self.vlan.is_some() {
            4
        } else {
            5
        }
    }

    /// The pseudowire interface name (`ifname`, default `mpw<pw-id>`).
    pub fn ifname(&self) -> String {
        self.ifname
            .clone()
            .unwrap_or_else(|| format!("mpw{}", self.pw_id))
    }
}

/// The FRR ldpd configuration of the signalled (non-static) pseudowires
/// of `pws`, to paste into frr.conf (docs/frr.md).
pub fn ldpd_config(pws: &[PseudowireConfig]) -> String {
    let mut s = String::new();
    for w in pws.iter().filter(|w| w.static_labels.is_none()) {
        // ldpd has only `type vpls`; one pseudowire makes it point to
        // point.
        s.push_str(&format!("l2vpn {} type vpls\n", w.name));
        if w.vlan.is_some() {
            s.push_str(" vc type ethernet-tagged\n");
        } else {
            // The port is an interface of Lanyard's namespace.
            s.push_str(&format!(" member interface {}\n", w.port));
        }
        if w.mtu != DEFAULT_PW_MTU {
            s.push_str(&format!(" mtu {}\n", w.mtu));
        }
        s.push_str(&format!(" member pseudowire {}\n", w.ifname()));
        s.push_str(&format!("  neighbor lsr-id {}\n", w.neighbor));
        s.push_str(&format!("  pw-id {}\n", w.pw_id));
        if !w.control_word {
            s.push_str("  control-word exclude\n");
        }
        s.push_str(" exit\n!\n");
    }
    s
}

#[cfg(test)]
mod tests {
    const BASE: &str = "ports:\n  - {name: up, mode: routed, addresses: [10.0.0.1/30]}\n  - {name: ac1}\n  - {name: ac2}\n  - {name: r2, mode: routed, addresses: [10.0.1.1/30]}\n  - {name: tr, mode: trunk}\npseudowires:\n";

    fn errors(extra: &str) -> Vec<String> {
        match crate::parse(&format!("{BASE}{extra}"), "pw.yaml") {
            Ok(_) => Vec::new(),
            Err(e) => e.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_valid_section_parses_with_defaults_and_ldpd_config() {
        let cfg = crate::parse(
            &format!("{BASE}  - {{name: CUST1, port: ac1, neighbor: 10.255.0.2, pw-id: 100}}\n  - {{name: V10, port: ac2, vlan: 10, neighbor: 10.255.0.2, pw-id: 10, control-word: false, mtu: 9000}}\n  - {{name: V11, port: ac2, vlan: 11, neighbor: 10.255.0.2, pw-id: 11, static-labels: {{local: 100, remote: 200}}}}\n"),
            "pw.yaml",
        )
        .unwrap();
        let w = &cfg.pseudowires[0];
        assert_eq!((w.pw_type(), w.control_word, w.mtu), (5, true, 1500));
        assert_eq!(w.ifname(), "mpw100");
        assert_eq!(cfg.pseudowires[1].pw_type(), 4);
        assert!(cfg.is_pseudowire_port(1) && cfg.is_pseudowire_port(2));
        assert!(!cfg.is_pseudowire_port(0) && !cfg.is_pseudowire_port(4));
        // Circuit ports are in no VLAN: bridging never floods to them.
        let l2 = crate::build::l2_tables(&cfg);
        assert!(!l2.vlans[1].members.contains(1) && !l2.vlans[1].members.contains(2));
        assert!(l2.vlans[1].members.contains(4), "the trunk stays in VLAN 1");
        let frr = super::ldpd_config(&cfg.pseudowires);
        assert!(frr.contains("l2vpn CUST1 type vpls\n member interface ac1\n member pseudowire mpw100\n  neighbor lsr-id 10.255.0.2\n  pw-id 100\n"));
        assert!(frr.contains("l2vpn V10 type vpls\n vc type ethernet-tagged\n mtu 9000\n"));
        assert!(frr.contains("  control-word exclude\n"));
        // Static pseudowires need nothing from ldpd.
        assert!(!frr.contains("V11"));
        // Spanning tree leaves circuit ports alone (the customer's BPDUs
        // cross the pseudowire).
        let mut stp = cfg.clone();
        stp.spanning_tree = Some(
            crate::parse("ports: [{name: x}]\nspanning-tree: {}\n", "s.yaml")
                .unwrap()
                .spanning_tree
                .unwrap(),
        );
        let ports: Vec<usize> = stp.stp_ports().iter().map(|(i, _)| *i).collect();
        assert_eq!(ports, vec![4], "only the trunk runs STP");
    }

    #[test]
    fn conflicts_are_reported_with_their_line() {
        let cases: &[(&str, &str)] = &[
            ("  - {name: A, port: nope, neighbor: 10.0.0.2, pw-id: 1}\n", "is not configured"),
            ("  - {name: A, port: up, neighbor: 10.0.0.2, pw-id: 1}\n", "is routed"),
            ("  - {name: A, port: tr, neighbor: 10.0.0.2, pw-id: 1}\n  - {name: B, port: ac1, neighbor: 10.0.0.2, pw-id: 1}\n", "already used by pseudowires[0]"),
            ("  - {name: A, port: ac1, neighbor: 10.0.0.2, pw-id: 1}\n  - {name: B, port: ac1, neighbor: 10.0.0.2, pw-id: 2}\n", "already the whole-port"),
            ("  - {name: A, port: ac1, vlan: 5, neighbor: 10.0.0.2, pw-id: 1}\n  - {name: B, port: ac1, vlan: 5, neighbor: 10.0.0.2, pw-id: 2}\n", "VLAN 5 of port \"ac1\" is already"),
            ("  - {name: A, port: ac1, vlan: 5, neighbor: 10.0.0.2, pw-id: 1}\n  - {name: B, port: ac1, neighbor: 10.0.0.2, pw-id: 2}\n", "either whole"),
            ("  - {name: A, port: ac1, neighbor: 10.0.0.2, pw-id: 1}\n  - {name: A, port: ac2, neighbor: 10.0.0.2, pw-id: 2}\n", "configured twice"),
            ("  - {name: A, port: ac1, vlan: 4095, neighbor: 10.0.0.2, pw-id: 1}\n", "out of range"),
            ("  - {name: A, port: ac1, neighbor: 10.0.0.2, pw-id: 1, mtu: 20}\n", "out of range 64..9190"),
            ("  - {name: A, port: ac1, neighbor: 0.0.0.0, pw-id: 1}\n", "not a PE address"),
            ("  - {name: A, port: ac1, neighbor: 10.0.0.2, pw-id: 1, static-labels: {local: 3, remote: 20}}\n", "out of range 16..1048575"),
            ("  - {name: A, port: ac1, neighbor: 10.0.0.2, pw-id: 1, static-labels: {local: 30, remote: 20}}\n  - {name: B, port: ac2, neighbor: 10.0.0.2, pw-id: 2, static-labels: {local: 30, remote: 21}}\n", "already a pseudowire's local label"),
        ];
        for (yaml, want) in cases {
            let e = errors(yaml);
            assert!(
                e.iter()
                    .any(|m| m.contains(want) && m.starts_with("pw.yaml:")),
                "{yaml}: want {want:?} in {e:?}"
            );
        }
        // The trunk case: a port in a bridge VLAN is refused too.
        let e = errors("  - {name: A, port: ac1, neighbor: 10.0.0.2, pw-id: 1}\n");
        assert!(e.is_empty(), "{e:?}");
        let e = crate::parse(
            "ports:\n  - {name: ac1, vlan: 1}\n  - {name: up, mode: routed, addresses: [10.0.0.1/30]}\npseudowires:\n  - {name: A, port: ac1, neighbor: 10.0.0.2, pw-id: 1}\n",
            "pw.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("has VLAN settings"), "{e}");
        let e = crate::parse(
            "ports:\n  - {name: ac1}\npseudowires:\n  - {name: A, port: ac1, neighbor: 10.0.0.2, pw-id: 1}\n",
            "pw.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("need a routed uplink"), "{e}");
    }
}
