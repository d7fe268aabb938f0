//! VRF configuration (docs/vrf.md): overlapping addresses across VRFs,
//! per-VRF static routes, and the refusals with file:line — a port in
//! two VRFs, an unknown VRF, duplicate route distinguishers and tables.

mod common;
use common::{errors, one_error};

const TWO_VRFS: &str = r#"vlans:
  - id: 10
    router:
      addresses: [10.1.0.1/24]
ports:
  - name: a1
    mode: routed
    addresses: [10.1.0.1/24, "2001:db8:1::1/64"]
  - name: b1
    mode: routed
    addresses: [10.1.0.1/24, "2001:db8:1::1/64"]
  - name: g1
    mode: routed
    addresses: [10.9.0.1/24]
  - name: t
    vlan: 10
vrfs:
  - name: CUSTA
    interfaces: [a1]
    rd: 65000:1
  - name: CUSTB
    interfaces: [b1]
    rd: 65000:2
    table: 2002
routing:
  static-routes:
    - prefix: 192.0.2.0/24
      next-hop: 10.1.0.2
      vrf: CUSTA
    - prefix: 192.0.2.0/24
      next-hop: 10.1.0.3
      vrf: CUSTB
    - prefix: 192.0.2.0/24
      next-hop: 10.9.0.2
"#;

#[test]
fn overlapping_addresses_and_routes_across_vrfs_are_valid() {
    let cfg = config::parse(TWO_VRFS, "lanyard.yaml").unwrap_or_else(|e| panic!("{e}"));
    let ifs = cfg.l3_interfaces();
    let vrf_of = |n: &str| ifs.iter().find(|i| i.name == n).unwrap().vrf;
    assert_eq!(
        (vrf_of("a1"), vrf_of("b1"), vrf_of("g1"), vrf_of("vlan10")),
        (1, 2, 0, 0)
    );
    assert_eq!(cfg.vrfs[0].table_id(0), 1001, "default table id");
    assert_eq!(cfg.vrfs[1].table_id(1), 2002);
    assert_eq!(cfg.vrfs[0].netns(), "CUSTA");
    assert_eq!(cfg.vrf_index(Some("CUSTB")), Some(2));
    assert_eq!(cfg.vrf_index(None), Some(0));
}

#[test]
fn same_subnet_in_the_default_vrf_is_still_refused() {
    // vlan10 (default VRF) and a1 moved to the default VRF overlap.
    let text = TWO_VRFS.replace("    interfaces: [a1]\n", "    interfaces: []\n");
    let errs = errors(&text);
    assert!(
        errs.iter().any(|(l, f, m)| *l == Some(4)
            && f == "vlans[0].router.addresses[0]"
            && m.contains("10.1.0.1 is already ports[0].addresses[0]")),
        "{errs:#?}"
    );
}

#[test]
fn a_port_in_two_vrfs_is_refused_at_the_second_listing() {
    one_error(
        &TWO_VRFS.replace("interfaces: [b1]", "interfaces: [b1, a1]"),
        22,
        "vrfs[1].interfaces[1]",
        "a1 is already in VRF \"CUSTA\" (vrfs[0].interfaces[0]); an interface belongs to one VRF",
    );
}

#[test]
fn unknown_vrf_and_unknown_or_switched_interfaces_are_refused() {
    one_error(
        &TWO_VRFS.replace("vrf: CUSTB", "vrf: CUSTC"),
        32,
        "routing.static-routes[1].vrf",
        "unknown VRF \"CUSTC\"",
    );
    one_error(
        &TWO_VRFS.replace("interfaces: [b1]", "interfaces: [b1, zz]"),
        22,
        "vrfs[1].interfaces[1]",
        "unknown interface \"zz\"",
    );
    one_error(
        &TWO_VRFS.replace("interfaces: [b1]", "interfaces: [b1, t]"),
        22,
        "vrfs[1].interfaces[1]",
        "port \"t\" is not a routed port",
    );
}

#[test]
fn duplicate_rd_table_and_name_are_refused() {
    one_error(
        &TWO_VRFS.replace("rd: 65000:2", "rd: 65000:01"),
        23,
        "vrfs[1].rd",
        "duplicate route distinguisher 65000:01 (already VRF \"CUSTA\", vrfs[0])",
    );
    one_error(
        &TWO_VRFS.replace("table: 2002", "table: 1001"),
        24,
        "vrfs[1].table",
        "table 1001 is already VRF \"CUSTA\"'s",
    );
    one_error(
        &TWO_VRFS.replace("table: 2002", "table: 254"),
        24,
        "vrfs[1].table",
        "out of range 256..",
    );
    let errs = errors(&TWO_VRFS.replace("name: CUSTB", "name: CUSTA"));
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_eq!(errs[0].0, Some(21));
    assert_eq!(errs[0].1, "vrfs[1].name");
    assert!(errs[0]
        .2
        .contains("duplicate VRF \"CUSTA\" (already vrfs[0])"));
    assert_eq!(errs[1].1, "routing.static-routes[1].vrf", "CUSTB is gone");
    one_error(
        &TWO_VRFS.replace("rd: 65000:2", "rd: banana"),
        23,
        "vrfs[1].rd",
        "not a route distinguisher",
    );
}

#[test]
fn static_route_next_hops_are_checked_in_their_vrf() {
    // 10.9.0.2 is on g1, in the default VRF, not in CUSTA.
    one_error(
        &TWO_VRFS.replace("next-hop: 10.1.0.2", "next-hop: 10.9.0.2"),
        28,
        "routing.static-routes[0].next-hop",
        "not in the subnet of any routed port",
    );
    let text = TWO_VRFS.replace(
        "      next-hop: 10.1.0.3\n      vrf: CUSTB",
        "      next-hop: 10.1.0.3\n      interface: a1\n      vrf: CUSTB",
    );
    one_error(
        &text,
        32,
        "routing.static-routes[1].interface",
        "a1 is in another VRF than the route (CUSTB)",
    );
}
