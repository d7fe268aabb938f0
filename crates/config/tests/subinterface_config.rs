//! Routed 802.1Q subinterfaces in the configuration (docs/vrf.md
//! "Subinterfaces"): names, port ids, VRF membership and attachments, and
//! the refusals with file:line — a subinterface on a switched port (an
//! access port or a trunk carrying its VLAN), a VLAN used twice on one
//! port, a tag out of range, an unknown interface or VRF, overlapping
//! subnets in one VRF, queues on a subinterface.

mod common;
use common::{errors, one_error};

const GOOD: &str = r#"vlans:
  - id: 10
    router:
      addresses: [10.8.0.1/24]
access-lists:
  - name: a
    rules:
      - {action: permit}
port-channels:
  - name: po1
    members: [m1]
ports:
  - name: c1
    mode: routed
    addresses: [10.9.0.1/24]
    subinterfaces:
      - vlan: 100
        addresses: [10.1.0.1/24]
        acl-in: [a]
      - vlan: 200
        addresses: [10.1.0.1/24]
        mtu: 1400
  - name: m1
    mode: trunk
vrfs:
  - name: A
    interfaces: [c1.100]
    rd: 65000:1
  - name: B
    interfaces: [c1.200]
    rd: 65000:2
routing:
  static-routes:
    - {prefix: 192.0.2.0/24, next-hop: 10.1.0.2, vrf: A}
    - {prefix: 192.0.2.0/24, interface: c1.200, vrf: B}
"#;

#[test]
fn subinterfaces_are_layer3_interfaces_with_port_ids_after_the_channels() {
    let cfg = config::parse(GOOD, "lanyard.yaml").expect("valid");
    let ifs = cfg.l3_interfaces();
    let names: Vec<&str> = ifs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["c1", "vlan10", "c1.100", "c1.200"]);
    // 2 ports, 1 SVI, 1 port channel, then the subinterfaces.
    assert_eq!((ifs[2].port, ifs[3].port), (4, 5));
    assert_eq!(ifs[2].subinterface, Some((0, 100)));
    assert_eq!((ifs[2].vrf, ifs[3].vrf, ifs[0].vrf), (1, 2, 0));
    assert_eq!((ifs[2].mtu, ifs[3].mtu), (1500, 1400));
    assert_eq!(cfg.port_ids(), 6);
    assert_eq!(cfg.port_label(5), "c1.200");
    assert_eq!(cfg.channel_port_id(0), 3);
}

#[test]
fn a_subinterface_needs_a_routed_port() {
    // An access port, and a trunk that carries the very VLAN.
    for mode in ["access", "trunk"] {
        let text = format!(
            "vlans:\n  - id: 100\nports:\n  - name: c1\n    mode: {mode}\n    subinterfaces:\n      - vlan: 100\n        addresses: [10.1.0.1/24]\n"
        );
        one_error(
            &text,
            6,
            "ports[0].subinterfaces",
            "subinterfaces need `mode: routed`",
        );
    }
}

#[test]
fn a_vlan_twice_on_one_port_is_refused_at_the_second() {
    let text = "ports:\n  - name: c1\n    mode: routed\n    subinterfaces:\n      - vlan: 100\n        addresses: [10.1.0.1/24]\n      - vlan: 100\n        addresses: [10.2.0.1/24]\n  - name: c2\n    mode: routed\n    subinterfaces:\n      - vlan: 100\n        addresses: [10.3.0.1/24]\n";
    one_error(
        text,
        7,
        "ports[0].subinterfaces[1].vlan",
        "VLAN 100 is already ports[0].subinterfaces[0] on c1",
    );
}

#[test]
fn a_tag_out_of_range_is_refused() {
    let text = "ports:\n  - name: c1\n    mode: routed\n    subinterfaces:\n      - vlan: 4095\n";
    one_error(
        text,
        5,
        "ports[0].subinterfaces[0].vlan",
        "out of range 1..4094",
    );
}

#[test]
fn unknown_subinterface_in_a_vrf_and_unknown_vrf_are_refused() {
    let text = "ports:\n  - name: c1\n    mode: routed\n    subinterfaces:\n      - vlan: 100\n        addresses: [10.1.0.1/24]\nvrfs:\n  - name: A\n    interfaces: [c1.300]\n    rd: 65000:1\n";
    one_error(
        text,
        9,
        "vrfs[0].interfaces[0]",
        "unknown interface \"c1.300\"",
    );
    let text = "ports:\n  - name: c1\n    mode: routed\n    subinterfaces:\n      - vlan: 100\n        addresses: [10.1.0.1/24]\nrouting:\n  static-routes:\n    - {prefix: 192.0.2.0/24, interface: c1.100, vrf: NOPE}\n";
    let errs = errors(text);
    assert!(
        errs.iter()
            .any(|(l, f, m)| *l == Some(9) && f.contains("vrf") && m.contains("NOPE")),
        "{errs:#?}"
    );
}

#[test]
fn the_same_subnet_twice_in_one_vrf_is_refused() {
    // Both subinterfaces in the default VRF with one subnet.
    let text = "ports:\n  - name: c1\n    mode: routed\n    subinterfaces:\n      - vlan: 100\n        addresses: [10.1.0.1/24]\n      - vlan: 200\n        addresses: [10.1.0.9/24]\n";
    one_error(
        text,
        8,
        "ports[0].subinterfaces[1].addresses[0]",
        "overlaps 10.1.0.1/24 on c1.100",
    );
}

#[test]
fn queues_on_a_subinterface_are_refused() {
    let text = "class-maps:\n  - name: all\n    match:\n      - {}\npolicy-maps:\n  - name: q\n    classes:\n      - {class: all, queue: {priority: true}}\nports:\n  - name: c1\n    mode: routed\n    subinterfaces:\n      - vlan: 100\n        addresses: [10.1.0.1/24]\n        policy-out: q\n";
    let errs = errors(text);
    assert!(
        errs.iter().any(|(l, f, m)| *l == Some(15)
            && f == "ports[0].subinterfaces[0].policy-out"
            && m.contains("queues belong to the physical port")),
        "{errs:#?}"
    );
}
