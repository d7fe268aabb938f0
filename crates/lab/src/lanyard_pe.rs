//! The `lanyard-pe` DUT: two Lanyard provider edges joined by a routed
//! uplink, the metro report's pseudowire bed at software scale. PE1 runs
//! in the DUT namespace with tester port 1 (`sw1`), PE2 in its own
//! namespace (`…-b`) with tester port 2 (`sw2`, moved there), so every
//! frame from t1 to t2 crosses PE1, the uplink and PE2:
//!
//! ```text
//!  t1 ── sw1 [PE1] up  ══ up  [PE2] sw2 ── t2
//!                  up2 ══ up2            (uplinks: 2, the bypass)
//! ```
//!
//! The provider side is a second Lanyard because the kernel here has no
//! MPLS (a Linux P or PE could not label-switch). With `pe-mode:
//! pseudowire` (default) each PE has static-label pseudowires toward the
//! other's loopback `10.255.0.<1|2>` (a static route over `up`): one
//! type-5 pseudowire for the whole tester port (`circuits: port`), or one
//! type-4 pseudowire per VLAN of the test's `vlans: N` (`circuits: vlan`,
//! VLANs 100..100+N-1 on both PEs). `uplinks: 2` adds `up2` and a
//! configured facility backup (`mpls.fast-reroute: protect up, bypass via
//! up2`) on both PEs. `pe-mode: l2` is the baseline on the same bed: the
//! tester ports and the uplink (a trunk) in the same VLANs, plain layer-2
//! switching on both PEs. `pe-mode: l3vpn` is the metro report's table 6
//! with static VPN routes (docs/vrf.md "Static VPN routes"): one VRF per
//! VLAN of the test's `vlans: N`, each on a routed 802.1Q subinterface
//! `sw<i>.<vlan>` with the SAME customer subnets (198.18.<i>.1/24,
//! 2001:2:0:<i>::1/64) in every VRF, a VPN label per VRF and PE, static
//! VPN routes to the far customer subnets over the far PE's loopback;
//! `pe-mode: l3` is its baseline, plain routing in the global table over
//! the uplink (untagged). `services: true` attaches the lab's services
//! (10,000-line ACLs in and out, the QoS policy, flow export) to every
//! port (and L3VPN subinterface) that takes them.
//!
//! The control script (`$LAB_PE` in commands): `cut` takes PE2's end of
//! `up` down (PE1 sees carrier loss, as `mpls_frr.rs` does it), `restore`
//! brings it up again.

use crate::plan::{Circuits, PeMode, FIRST_VLAN};
use crate::routes::{Route4, Route6};

/// The PEs' names in reports (PE1 in the DUT namespace, PE2 in `…-b`).
pub const PES: [&str; 2] = ["pe1", "pe2"];

/// Suffix of PE2's namespace.
pub const PE2_SUFFIX: &str = "b";

/// Pseudowire MTU (customer frame without its 14-byte header): lab
/// frames up to 1518 bytes, and jumbo ones up to 9014.
pub const PW_MTU: u32 = 9000;

/// Uplink MTU: the largest a routed port carries (config's MAX_L3_MTU).
pub const UPLINK_MTU: u32 = 9206;

/// Local label base of PE `side`'s pseudowires (outside ldpd's range).
fn label_base(side: usize) -> u32 {
    [100_000, 200_000][side]
}

/// The VPN label PE `side` pops into the VRF of VLAN `FIRST_VLAN + i`
/// (the other PE pushes it): outside ldpd's range and the pseudowires'.
pub fn vpn_label(side: usize, i: u16) -> u32 {
    [300_000, 400_000][side] + i as u32
}

/// MTU of the customer ports (and subinterfaces) of the routed modes:
/// room for a 9,000-byte packet under the VPN label on the 9,206 uplink.
pub const CUSTOMER_MTU: u32 = 9000;

/// The VRF of VLAN `vid` (`pe-mode: l3vpn`).
pub fn vrf_name(vid: u16) -> String {
    format!("V{vid}")
}

/// The VLAN ids of a bed's tagged frames (VLAN 10 when untagged).
fn vlan_ids(bed: &PeBed) -> Vec<u16> {
    if bed.vlans > 0 {
        (FIRST_VLAN..FIRST_VLAN + bed.vlans).collect()
    } else {
        vec![10]
    }
}

/// What a PE's configuration depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeBed {
    /// Pseudowires or plain layer 2.
    pub mode: PeMode,
    /// Attachment circuits (pseudowire mode).
    pub circuits: Circuits,
    /// Routed uplinks (1 or 2).
    pub uplinks: u32,
    /// VLANs of the test's tagged frames (0: untagged).
    pub vlans: u16,
    /// The lab's services on every port that takes them.
    pub services: bool,
}

impl PeBed {
    /// Pseudowires this bed configures per PE.
    pub fn pseudowires(&self) -> usize {
        match (self.mode, self.circuits) {
            (PeMode::L2 | PeMode::L3 | PeMode::L3vpn, _) => 0,
            (PeMode::Pseudowire, Circuits::Port) => 1,
            (PeMode::Pseudowire, Circuits::Vlan) => self.vlans as usize,
        }
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        let how = match (self.mode, self.circuits) {
            (PeMode::L2, _) if self.vlans > 0 => format!(
                "plain layer-2 switching: tester ports and the uplink trunks in VLANs {}..{}",
                FIRST_VLAN,
                FIRST_VLAN + self.vlans - 1
            ),
            (PeMode::L2, _) => {
                "plain layer-2 switching: tester ports access in VLAN 10, the uplink a trunk"
                    .to_string()
            }
            (PeMode::Pseudowire, Circuits::Port) => {
                "one type-5 (port-mode) pseudowire per PE for the whole tester port, control word on"
                    .to_string()
            }
            (PeMode::Pseudowire, Circuits::Vlan) => format!(
                "{} type-4 (VLAN-mode) pseudowires, VLANs {}..{} on the tester port, control word on",
                self.vlans,
                FIRST_VLAN,
                FIRST_VLAN + self.vlans.max(1) - 1
            ),
            (PeMode::L3, _) => {
                "plain IPv4/IPv6 routing in the global table: tester ports routed (untagged), \
                 static routes to the far customer subnet over the uplink, no labels"
                    .to_string()
            }
            (PeMode::L3vpn, _) => format!(
                "static L3VPN: {} VRFs per PE, each on a routed subinterface sw<i>.<vlan> (VLANs \
                 {}..{}) with the same customer subnets (198.18.<i>.1/24, 2001:2:0:<i>::1/64), a \
                 VPN label per VRF, static VPN routes (IPv4 + IPv6) to the far PE's customer \
                 subnets over its loopback",
                self.vlans,
                FIRST_VLAN,
                FIRST_VLAN + self.vlans.max(1) - 1
            ),
        };
        let frr = if self.uplinks > 1 {
            "; uplinks up + up2, fast reroute: up protected by a bypass via up2 on both PEs"
        } else {
            ""
        };
        let svc = if self.services {
            "; services on every port that takes them"
        } else {
            ""
        };
        format!(
            "two Lanyard PEs (PE1 with sw1 in the DUT namespace, PE2 with sw2 in its own; the \
             provider side is a Lanyard: the kernel has no MPLS), routed uplink up (MTU \
             {UPLINK_MTU}), static labels; {how}{frr}{svc}"
        )
    }
}

/// The configuration of PE `side` (0 = PE1, 1 = PE2): its tester port
/// `sw<side+1>`, the uplink(s), and the pseudowires, VLANs or VRFs.
/// `switch` holds extra `switch:` lines (workers, backend); `services` the
/// services sections and `attach` a port's attachment lines (both empty
/// without services); `vrf_ns(vlan)` names the namespace of a VRF
/// (`pe-mode: l3vpn`); `routes` are the test's synthetic routes (routed
/// modes: see [`routed_config`]).
#[allow(clippy::too_many_arguments)]
pub fn pe_config(
    side: usize,
    bed: &PeBed,
    sock: &std::path::Path,
    switch: &str,
    services: &str,
    attach: &str,
    vrf_ns: &dyn Fn(u16) -> String,
    routes: (&[Route4], &[Route6]),
) -> String {
    let (me, peer) = (side + 1, 2 - side);
    let port = format!("sw{me}");
    let mut c = format!(
        "switch:\n  name: {}\n{switch}management:\n  socket: {}\n",
        PES[side],
        sock.display()
    );
    let vlan_ids = vlan_ids(bed);
    if bed.mode.routed() {
        c.push_str(&routed_config(side, bed, attach, vrf_ns, routes));
        c.push_str(services);
        return c;
    }
    if bed.mode == PeMode::L2 {
        c.push_str("vlans:\n");
        for v in &vlan_ids {
            c.push_str(&format!("  - id: {v}\n"));
        }
    }
    c.push_str("ports:\n");
    match bed.mode {
        PeMode::L2 => {
            if bed.vlans > 0 {
                c.push_str(&format!("  - name: {port}\n    mode: trunk\n{attach}"));
            } else {
                c.push_str(&format!(
                    "  - name: {port}\n    mode: access\n    vlan: 10\n{attach}"
                ));
            }
            c.push_str(&format!("  - name: up\n    mode: trunk\n{attach}"));
        }
        PeMode::L3 | PeMode::L3vpn => unreachable!("routed_config"),
        PeMode::Pseudowire => {
            // The circuit port: no VLAN settings (config refuses them).
            c.push_str(&format!("  - name: {port}\n{attach}"));
            for (k, name) in uplink_names(bed.uplinks).iter().enumerate() {
                let u = k + 1;
                c.push_str(&format!(
                    "  - name: {name}\n    mode: routed\n    mtu: {UPLINK_MTU}\n    addresses: [10.94.{u}.{me}/30]\n{attach}"
                ));
            }
        }
    }
    if bed.mode == PeMode::Pseudowire {
        // The far PE's loopback, routed over `up` only: the pseudowires'
        // transport, which the bypass takes over when `up` goes.
        c.push_str(&format!(
            "routing:\n  static-routes:\n    - {{prefix: 10.255.0.{peer}/32, next-hop: 10.94.1.{peer}}}\n"
        ));
        if bed.uplinks > 1 {
            c.push_str(&format!(
                "mpls:\n  fast-reroute:\n    - {{protect: up, backup: {{port: up2, next-hop: 10.94.2.{peer}}}}}\n"
            ));
        }
        c.push_str("pseudowires:\n");
        let (local, remote) = (label_base(side), label_base(1 - side));
        match bed.circuits {
            Circuits::Port => c.push_str(&format!(
                "  - {{name: pw1, port: {port}, neighbor: 10.255.0.{peer}, pw-id: 1, mtu: {PW_MTU}, static-labels: {{local: {local}, remote: {remote}}}}}\n"
            )),
            Circuits::Vlan => {
                for (i, v) in vlan_ids.iter().enumerate().filter(|_| bed.vlans > 0) {
                    c.push_str(&format!(
                        "  - {{name: v{v}, port: {port}, vlan: {v}, neighbor: 10.255.0.{peer}, pw-id: {}, mtu: {PW_MTU}, static-labels: {{local: {}, remote: {}}}}}\n",
                        1000 + i,
                        local + 1 + i as u32,
                        remote + 1 + i as u32
                    ));
                }
            }
        }
    }
    c.push_str(services);
    c
}

/// The ports, VRFs and routes of PE `side` in `pe-mode: l3` / `l3vpn`.
/// The customer port carries 198.18.<me>.1/24 and 2001:2:0:<me>::1/64
/// (the lab's routed-port addresses), on the port itself (`l3`) or on
/// each VLAN's subinterface in that VLAN's VRF (`l3vpn`, the same
/// addresses in every VRF). The synthetic `routes` (`routes: N`, gateways
/// the tester hosts of both ports) go into the global table (`l3`) or
/// into every VRF (`l3vpn`, the same prefixes in every VRF): those whose
/// gateway is this PE's tester host via that host, the others via the
/// far PE (over the uplink, or as VPN routes with the VRF's label there).
fn routed_config(
    side: usize,
    bed: &PeBed,
    attach: &str,
    vrf_ns: &dyn Fn(u16) -> String,
    (routes4, routes6): (&[Route4], &[Route6]),
) -> String {
    use std::fmt::Write as _;
    let (me, peer) = (side + 1, 2 - side);
    let port = format!("sw{me}");
    let subnet = format!("[198.18.{me}.1/24, \"2001:2:0:{me}::1/64\"]");
    let far = [
        format!("198.18.{peer}.0/24"),
        format!("\"2001:2:0:{peer}::/64\""),
    ];
    let vlans = vlan_ids(bed);
    let n = routes4.len() + routes6.len();
    let mut c = String::with_capacity(1024 + 256 * vlans.len() + 96 * n * vlans.len());
    c.push_str("ports:\n");
    let _ = writeln!(
        c,
        "  - name: {port}\n    mode: routed\n    mtu: {CUSTOMER_MTU}"
    );
    // (prefix, the local host as next hop) of each synthetic route that
    // the tester host of this side is the gateway of, or None for one
    // behind the far PE.
    let synthetic: Vec<(String, Option<String>)> = routes4
        .iter()
        .map(|r| {
            let local = (r.port == side).then(|| format!("198.18.{me}.2"));
            (format!("{}/{}", r.addr, r.len), local)
        })
        .chain(routes6.iter().map(|r| {
            let local = (r.port == side).then(|| format!("\"2001:2:0:{me}::2\""));
            (format!("\"{}/{}\"", r.addr, r.len), local)
        }))
        .collect();
    if bed.mode == PeMode::L3 {
        let _ = writeln!(c, "    addresses: {subnet}");
        c.push_str(attach);
    } else {
        // Each subinterface takes the services (its own ACLs and input
        // policy: the customer's interface).
        let sub_attach: String = attach.lines().map(|l| format!("    {l}\n")).collect();
        c.push_str("    subinterfaces:\n");
        for v in &vlans {
            let _ = writeln!(c, "      - vlan: {v}\n        addresses: {subnet}");
            c.push_str(&sub_attach);
        }
    }
    // The core is IPv4 (static VPN routes resolve their PE there); the
    // global-table baseline routes IPv6 over the uplink too.
    let v6 = if bed.mode == PeMode::L3 {
        format!(", \"fd00:94:1::{me}/64\"")
    } else {
        String::new()
    };
    let _ = writeln!(
        c,
        "  - name: up\n    mode: routed\n    mtu: {UPLINK_MTU}\n    addresses: [10.94.1.{me}/30{v6}]"
    );
    c.push_str(attach);
    if bed.mode == PeMode::L3vpn {
        c.push_str("vrfs:\n");
        for (i, v) in vlans.iter().enumerate() {
            let _ = writeln!(
                c,
                "  - {{name: {}, interfaces: [{port}.{v}], namespace: {}, vpn-label: {}}}",
                vrf_name(*v),
                vrf_ns(*v),
                vpn_label(side, i as u16)
            );
        }
    }
    c.push_str("routing:\n  static-routes:\n");
    if bed.mode == PeMode::L3 {
        let _ = writeln!(c, "    - {{prefix: {}, next-hop: 10.94.1.{peer}}}", far[0]);
        let _ = writeln!(
            c,
            "    - {{prefix: {}, next-hop: \"fd00:94:1::{peer}\"}}",
            far[1]
        );
        for (k, (prefix, local)) in synthetic.iter().enumerate() {
            let via = match local {
                Some(h) => h.clone(),
                None if k < routes4.len() => format!("10.94.1.{peer}"),
                None => format!("\"fd00:94:1::{peer}\""),
            };
            let _ = writeln!(c, "    - {{prefix: {prefix}, next-hop: {via}}}");
        }
        return c;
    }
    // The far PE's loopback over the uplink: the VPN routes' transport
    // (directly connected: [VPN label] only, no transport label).
    let _ = writeln!(
        c,
        "    - {{prefix: 10.255.0.{peer}/32, next-hop: 10.94.1.{peer}}}"
    );
    for (i, v) in vlans.iter().enumerate() {
        let (vrf, label) = (vrf_name(*v), vpn_label(1 - side, i as u16));
        for p in &far {
            let _ = writeln!(
                c,
                "    - {{prefix: {p}, vrf: {vrf}, remote-pe: 10.255.0.{peer}, vpn-label: {label}}}"
            );
        }
        for (prefix, local) in &synthetic {
            let _ = match local {
                Some(h) => writeln!(c, "    - {{prefix: {prefix}, vrf: {vrf}, next-hop: {h}}}"),
                None => writeln!(
                    c,
                    "    - {{prefix: {prefix}, vrf: {vrf}, remote-pe: 10.255.0.{peer}, vpn-label: {label}}}"
                ),
            };
        }
    }
    c
}

/// The control script of the bed (`$LAB_PE cut | restore`): PE2's end of
/// the primary uplink down or up (carrier loss on PE1's `up`).
pub fn control_script(pe2_ns: &str) -> String {
    format!(
        r#"#!/bin/sh
# Uplink control for the lab's lanyard-pe DUT: cut | restore.
case "$1" in
  cut) ip -n {pe2_ns} link set dev up down ;;
  restore) ip -n {pe2_ns} link set dev up up ;;
  *) echo "usage: $0 cut|restore" >&2; exit 2 ;;
esac
"#
    )
}

/// The uplinks' interface names: `up`, `up2`.
pub fn uplink_names(uplinks: u32) -> Vec<String> {
    (1..=uplinks)
        .map(|u| {
            if u == 1 {
                "up".into()
            } else {
                format!("up{u}")
            }
        })
        .collect()
}

/// Pseudowires up in a `show mpls pseudowires --json` answer.
pub fn pseudowires_up(v: &serde_json::Value) -> usize {
    v["up"].as_u64().unwrap_or(0) as usize
}

/// True when a `show arp --json` answer has an entry for `addr` (a PE
/// knows the other's uplink MAC: the pseudowires' frames can leave).
pub fn arp_has(v: &serde_json::Value, addr: &str) -> bool {
    v.as_array().is_some_and(|a| {
        a.iter()
            .any(|e| e["address"] == addr && e["mac"].is_string())
    })
}

/// `show mpls fast-reroute --json`: every protected port's bypass next
/// hop resolved and the port on its primary (nothing active on a bypass).
pub fn bypass_ready(v: &serde_json::Value) -> bool {
    v["protected"].as_array().is_some_and(|rows| {
        !rows.is_empty()
            && rows
                .iter()
                .all(|r| r["backup_resolved"] == true && r["active"] == "primary")
    })
}

/// One PE's state for a trial record, from its `show mpls fast-reroute`
/// and `show mpls pseudowires` answers: protection switches so far,
/// pseudowires on a bypass now, pseudowires up.
pub fn pe_state(frr: &serde_json::Value, pws: &serde_json::Value) -> serde_json::Value {
    let switches: u64 = frr["protected"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["switches"].as_u64())
        .sum();
    serde_json::json!({
        "switches": switches,
        "on_backup": frr["pseudowires_on_backup"].as_u64().unwrap_or(0),
        "up": pseudowires_up(pws),
    })
}

/// What a trial did to the PEs, from their [`pe_state`]s before and after
/// it (`{"pe1": …, "pe2": …}`): switches to the bypass during the trial,
/// pseudowires on a bypass and up at its end.
pub fn trial_state(before: &serde_json::Value, after: &serde_json::Value) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    o.insert("design".into(), "pe".into());
    for pe in PES {
        let (b, a) = (&before[pe], &after[pe]);
        let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
        o.insert(
            pe.into(),
            serde_json::json!({
                "switches": n(a, "switches").saturating_sub(n(b, "switches")),
                "on_backup": n(a, "on_backup"),
                "up": n(a, "up"),
            }),
        );
    }
    serde_json::Value::Object(o)
}

/// `{PE1 bypass switches 1, 100 pws on it, 100 up; PE2 …}` for the
/// disruption detail line.
pub fn state_line(t: &serde_json::Value) -> String {
    let one = |pe: &str| {
        let p = &t[pe];
        format!(
            "{} bypass switches {}, {} pws on it, {} up",
            pe.to_uppercase(),
            p["switches"],
            p["on_backup"],
            p["up"]
        )
    };
    format!("{{{}; {}}}", one(PES[0]), one(PES[1]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn bed(mode: PeMode, circuits: Circuits, uplinks: u32, vlans: u16) -> PeBed {
        PeBed {
            mode,
            circuits,
            uplinks,
            vlans,
            services: false,
        }
    }

    const NONE: (&[Route4], &[Route6]) = (&[], &[]);

    fn ns(v: u16) -> String {
        format!("lab-1-0-v{v}")
    }

    fn parse(c: &str) -> config::Config {
        config::parse(c, "pe.yaml").unwrap_or_else(|e| panic!("{e}\n{c}"))
    }

    #[test]
    fn lanyard_accepts_every_pe_configuration() {
        let sock = Path::new("/tmp/x.sock");
        let beds = [
            bed(PeMode::Pseudowire, Circuits::Port, 1, 0),
            bed(PeMode::Pseudowire, Circuits::Port, 2, 8),
            bed(PeMode::Pseudowire, Circuits::Vlan, 2, 100),
            bed(PeMode::Pseudowire, Circuits::Vlan, 1, 128),
            bed(PeMode::L2, Circuits::Port, 1, 0),
            bed(PeMode::L2, Circuits::Port, 1, 128),
            bed(PeMode::L3, Circuits::Port, 1, 0),
            bed(PeMode::L3vpn, Circuits::Port, 1, 3),
            bed(PeMode::L3vpn, Circuits::Port, 1, 192),
        ];
        for b in beds {
            for side in 0..2 {
                let c = pe_config(side, &b, sock, "  workers: 1\n", "", "", &ns, NONE);
                parse(&c);
                assert_eq!(c.matches("static-labels").count(), b.pseudowires(), "{c}");
                assert_eq!(
                    c.contains("fast-reroute"),
                    b.uplinks > 1 && b.mode == PeMode::Pseudowire
                );
            }
        }
    }

    #[test]
    fn pes_mirror_each_others_labels_and_circuits() {
        let b = bed(PeMode::Pseudowire, Circuits::Vlan, 2, 3);
        let sock = Path::new("/tmp/x.sock");
        let (a, z) = (
            pe_config(0, &b, sock, "", "", "", &ns, NONE),
            pe_config(1, &b, sock, "", "", "", &ns, NONE),
        );
        assert!(a.contains(
            "{name: v101, port: sw1, vlan: 101, neighbor: 10.255.0.2, pw-id: 1001, mtu: 9000, static-labels: {local: 100002, remote: 200002}}"
        ), "{a}");
        assert!(z.contains(
            "{name: v101, port: sw2, vlan: 101, neighbor: 10.255.0.1, pw-id: 1001, mtu: 9000, static-labels: {local: 200002, remote: 100002}}"
        ), "{z}");
        assert!(a.contains("{prefix: 10.255.0.2/32, next-hop: 10.94.1.2}"));
        assert!(a.contains("{protect: up, backup: {port: up2, next-hop: 10.94.2.2}}"));
        assert!(z.contains("addresses: [10.94.2.2/30]"));
    }

    #[test]
    fn l3vpn_pes_have_a_vrf_per_vlan_with_the_same_subnets_and_mirrored_labels() {
        let b = bed(PeMode::L3vpn, Circuits::Port, 1, 3);
        let sock = Path::new("/tmp/x.sock");
        let attach = "    acl-in: [lab-v4, lab-v6]\n    policy-in: lab-qos\n";
        let svc = crate::dut::services_yaml();
        let (a, z) = (
            pe_config(0, &b, sock, "", &svc, attach, &ns, NONE),
            pe_config(1, &b, sock, "", &svc, attach, &ns, NONE),
        );
        let (ca, cz) = (parse(&a), parse(&z));
        assert_eq!((ca.vrfs.len(), cz.vrfs.len()), (3, 3));
        for (i, v) in [100u16, 101, 102].into_iter().enumerate() {
            // The same customer subnet on every subinterface (its own VRF).
            assert!(
                a.contains(&format!(
                    "      - vlan: {v}\n        addresses: [198.18.1.1/24, \"2001:2:0:1::1/64\"]\n        acl-in: [lab-v4, lab-v6]\n"
                )),
                "{a}"
            );
            assert!(a.contains(&format!(
                "  - {{name: V{v}, interfaces: [sw1.{v}], namespace: lab-1-0-v{v}, vpn-label: {}}}",
                300_000 + i
            )));
            // PE1 pushes the label PE2 pops into the same VRF, both families.
            for p in ["198.18.2.0/24", "\"2001:2:0:2::/64\""] {
                assert!(
                    a.contains(&format!(
                        "    - {{prefix: {p}, vrf: V{v}, remote-pe: 10.255.0.2, vpn-label: {}}}",
                        400_000 + i
                    )),
                    "{a}"
                );
            }
            assert!(z.contains(&format!(
                "  - {{name: V{v}, interfaces: [sw2.{v}], namespace: lab-1-0-v{v}, vpn-label: {}}}",
                400_000 + i
            )));
            assert!(z.contains(&format!(
                "    - {{prefix: 198.18.1.0/24, vrf: V{v}, remote-pe: 10.255.0.1, vpn-label: {}}}",
                300_000 + i
            )));
        }
        assert!(a.contains("{prefix: 10.255.0.2/32, next-hop: 10.94.1.2}"));
        assert!(!a.contains("pseudowires:"));
        let d = b.describe();
        assert!(
            d.contains("3 VRFs per PE") && d.contains("VLANs 100..102"),
            "{d}"
        );
        // The global-table baseline: the far subnet over the uplink.
        let l3 = pe_config(
            1,
            &bed(PeMode::L3, Circuits::Port, 1, 0),
            sock,
            "",
            "",
            "",
            &ns,
            NONE,
        );
        parse(&l3);
        assert!(
            l3.contains("{prefix: 198.18.1.0/24, next-hop: 10.94.1.1}"),
            "{l3}"
        );
        assert!(l3.contains("{prefix: \"2001:2:0:1::/64\", next-hop: \"fd00:94:1::1\"}"));
        assert!(!l3.contains("vrfs:") && !l3.contains("subinterfaces"));
    }

    #[test]
    fn synthetic_routes_go_into_every_vrf_via_the_host_or_the_far_pe() {
        let (r4, r6) = (crate::routes::v4(10, 2), crate::routes::v6(4, 2));
        let sock = Path::new("/tmp/x.sock");
        for side in 0..2 {
            let me = side + 1;
            let vpn = bed(PeMode::L3vpn, Circuits::Port, 1, 3);
            let c = pe_config(side, &vpn, sock, "", "", "", &ns, (&r4, &r6));
            let cfg = parse(&c);
            drop(cfg);
            for v in [100u16, 101, 102] {
                let label = vpn_label(1 - side, v - 100);
                for r in &r4 {
                    let line = if r.port == side {
                        format!(
                            "{{prefix: {}/{}, vrf: V{v}, next-hop: 198.18.{me}.2}}",
                            r.addr, r.len
                        )
                    } else {
                        format!(
                            "{{prefix: {}/{}, vrf: V{v}, remote-pe: 10.255.0.{}, vpn-label: {label}}}",
                            r.addr,
                            r.len,
                            3 - me
                        )
                    };
                    assert!(c.contains(&line), "{line}\n{c}");
                }
                for r in r6.iter().filter(|r| r.port == side) {
                    let line = format!(
                        "{{prefix: \"{}/{}\", vrf: V{v}, next-hop: \"2001:2:0:{me}::2\"}}",
                        r.addr, r.len
                    );
                    assert!(c.contains(&line), "{line}\n{c}");
                }
            }
            // 14 synthetic routes + 2 far subnets per VRF, + the far loopback.
            assert_eq!(c.matches("    - {prefix: ").count(), 3 * 16 + 1, "{c}");
            let l3 = pe_config(
                side,
                &bed(PeMode::L3, Circuits::Port, 1, 0),
                sock,
                "",
                "",
                "",
                &ns,
                (&r4, &r6),
            );
            parse(&l3);
            for r in &r4 {
                let via = if r.port == side {
                    format!("198.18.{me}.2")
                } else {
                    format!("10.94.1.{}", 3 - me)
                };
                assert!(l3.contains(&format!(
                    "{{prefix: {}/{}, next-hop: {via}}}",
                    r.addr, r.len
                )));
            }
        }
    }

    #[test]
    fn trial_state_counts_the_switches_of_the_trial() {
        // The API's shapes (crates/mgmt/tests/golden/mpls-fast-reroute.json,
        // mpls-pseudowires.json).
        let frr = |switches: u64, on: u64| {
            serde_json::json!({"count": 1, "on_backup": 1, "pseudowires_on_backup": on,
                "protected": [{"active": "backup", "backup_port": "up2", "backup_resolved": true,
                "installed": true, "labels": [], "next_hop": "10.94.2.2", "protect": "up",
                "switches": switches}]})
        };
        let pws = serde_json::json!({"count": 100, "up": 100, "pseudowires": []});
        let state = |s1, s2, on| serde_json::json!({"pe1": pe_state(&frr(s1, on), &pws), "pe2": pe_state(&frr(s2, on), &pws)});
        let t = trial_state(&state(3, 3, 0), &state(4, 4, 100));
        assert_eq!(t["design"], "pe");
        assert_eq!(
            (
                &t["pe1"]["switches"],
                &t["pe1"]["on_backup"],
                &t["pe2"]["up"]
            ),
            (&1.into(), &100.into(), &100.into())
        );
        assert_eq!(
            state_line(&t),
            "{PE1 bypass switches 1, 100 pws on it, 100 up; PE2 bypass switches 1, 100 pws on it, 100 up}"
        );
    }

    #[test]
    fn the_report_line_says_what_runs() {
        let d = bed(PeMode::Pseudowire, Circuits::Vlan, 2, 100).describe();
        assert!(
            d.contains("100 type-4 (VLAN-mode) pseudowires, VLANs 100..199"),
            "{d}"
        );
        assert!(d.contains("the kernel has no MPLS"), "{d}");
        assert!(d.contains("fast reroute"), "{d}");
        let d = bed(PeMode::L2, Circuits::Port, 1, 0).describe();
        assert!(d.contains("plain layer-2 switching"), "{d}");
    }

    #[test]
    fn bypass_readiness() {
        // The API's shape (crates/mgmt/tests/golden/mpls-fast-reroute.json).
        let row = |resolved: bool, active: &str| {
            serde_json::json!({"count": 1, "protected": [{"active": active, "backup_port": "up2",
                "backup_resolved": resolved, "installed": true, "labels": [],
                "next_hop": "10.94.2.2", "protect": "up", "switches": 0}]})
        };
        assert!(bypass_ready(&row(true, "primary")));
        assert!(!bypass_ready(&row(true, "backup")));
        assert!(!bypass_ready(&row(false, "primary")));
        assert!(!bypass_ready(
            &serde_json::json!({"count": 0, "protected": []})
        ));
        let arp = serde_json::json!([{"address": "10.94.1.2", "age": 3, "interface": "up",
            "mac": "e2:f7:a5:e4:61:7e", "state": "reachable"}]);
        assert!(arp_has(&arp, "10.94.1.2") && !arp_has(&arp, "10.94.2.2"));
        let s = control_script("lab-1-0-b");
        assert!(s.contains("cut) ip -n lab-1-0-b link set dev up down"));
    }
}
