//! Static L3VPN configuration (docs/vrf.md, "Static VPN routes"): a VRF's
//! local VPN label and `remote-pe` routes, and their refusals with
//! file:line — duplicate labels, labels of pseudowires or of FRR's
//! dynamic range, an unknown VRF, a VPN route without a VRF or with a
//! next hop of its own.

mod common;
use common::{errors, one_error};

const PE: &str = r#"ports:
  - name: up
    mode: routed
    addresses: [10.91.0.1/30]
  - name: ca
    mode: routed
    addresses: [10.1.0.1/24, "2001:db8:1::1/64"]
  - name: cb
    mode: routed
    addresses: [10.1.0.1/24, "2001:db8:1::1/64"]
  - name: ac
vrfs:
  - name: CUSTA
    interfaces: [ca]
    vpn-label: 900001
  - name: CUSTB
    interfaces: [cb]
    vpn-label: 900002
routing:
  static-routes:
    - prefix: 10.2.0.0/24
      vrf: CUSTA
      remote-pe: 10.91.0.2
      vpn-label: 900011
    - prefix: 10.2.0.0/24
      vrf: CUSTB
      remote-pe: 10.91.0.2
      vpn-label: 900012
    - prefix: "2001:db8:2::/64"
      vrf: CUSTA
      remote-pe: 10.91.0.2
      vpn-label: 900011
"#;

#[test]
fn vpn_labels_and_remote_pe_routes_parse() {
    let cfg = config::parse(PE, "pe.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.vrfs[0].vpn_label, Some(900_001));
    assert_eq!(cfg.vrfs[1].vpn_label, Some(900_002));
    let r = &cfg.routing.static_routes;
    assert_eq!(r[0].vpn(), Some(("10.91.0.2".parse().unwrap(), 900_011)));
    assert_eq!(r[2].vpn(), Some(("10.91.0.2".parse().unwrap(), 900_011)));
    assert_eq!(r[0].next_hop, None);
    // The same prefix in two VRFs is no duplicate; round trip.
    let text = serde_yaml_ng::to_string(&cfg).unwrap();
    assert_eq!(config::parse(&text, "again.yaml").unwrap(), cfg);
}

#[test]
fn a_vpn_label_used_twice_is_refused_at_the_second() {
    one_error(
        &PE.replace("vpn-label: 900002", "vpn-label: 900001"),
        18,
        "vrfs[1].vpn-label",
        "label 900001 is already VRF \"CUSTA\"'s (vrfs[0].vpn-label)",
    );
}

#[test]
fn a_vpn_label_out_of_range_is_refused() {
    one_error(
        &PE.replace("vpn-label: 900002", "vpn-label: 15"),
        18,
        "vrfs[1].vpn-label",
        "label 15 is out of range 16..1048575",
    );
    one_error(
        &PE.replace("vpn-label: 900012", "vpn-label: 1048576"),
        28,
        "routing.static-routes[1].vpn-label",
        "out of range 16..1048575",
    );
}

#[test]
fn a_vpn_label_that_is_a_pseudowires_local_label_is_refused() {
    let text = format!(
        "{PE}pseudowires:\n  - {{name: pw1, port: ac, neighbor: 10.91.0.2, pw-id: 1, \
         static-labels: {{local: 900002, remote: 900003}}}}\n"
    );
    one_error(
        &text,
        18,
        "vrfs[1].vpn-label",
        "label 900002 is already the local label of pseudowires[0]",
    );
}

#[test]
fn with_frr_a_vpn_label_in_zebras_range_is_refused() {
    let text = PE
        .replace("vpn-label: 900001", "vpn-label: 5000")
        .replace("routing:\n", "routing:\n  fpm: 127.0.0.1:2620\n");
    one_error(
        &text,
        15,
        "vrfs[0].vpn-label",
        "label 5000 is in the range zebra hands ldpd and bgpd",
    );
    // Without FRR the same label is fine.
    let text = PE.replace("vpn-label: 900001", "vpn-label: 5000");
    config::parse(&text, "pe.yaml").unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_vpn_route_in_an_unknown_vrf_is_refused() {
    one_error(
        &PE.replace("      vrf: CUSTB\n", "      vrf: CUSTC\n"),
        26,
        "routing.static-routes[1].vrf",
        "unknown VRF \"CUSTC\"",
    );
}

#[test]
fn a_vpn_route_needs_a_vrf_both_keys_and_no_next_hop() {
    let errs = errors(&PE.replace("      vrf: CUSTB\n", ""));
    assert!(
        errs.iter().any(|(l, f, m)| *l == Some(26)
            && f == "routing.static-routes[1].remote-pe"
            && m.contains("a VPN route belongs to a VRF")),
        "{errs:#?}"
    );
    one_error(
        &PE.replace("      vpn-label: 900012\n", ""),
        27,
        "routing.static-routes[1].remote-pe",
        "needs vpn-label too",
    );
    one_error(
        &PE.replace(
            "      remote-pe: 10.91.0.2\n      vpn-label: 900012\n",
            "      vpn-label: 900012\n",
        ),
        27,
        "routing.static-routes[1].vpn-label",
        "needs remote-pe too",
    );
    one_error(
        &PE.replace(
            "      vpn-label: 900012\n",
            "      vpn-label: 900012\n      next-hop: 10.1.0.2\n",
        ),
        29,
        "routing.static-routes[1].next-hop",
        "a VPN route's next hop is its remote-pe",
    );
    one_error(
        &PE.replace(
            "remote-pe: 10.91.0.2\n      vpn-label: 900012",
            "remote-pe: 224.0.0.5\n      vpn-label: 900012",
        ),
        27,
        "routing.static-routes[1].remote-pe",
        "224.0.0.5 is not a PE address",
    );
}

#[test]
fn a_remote_pe_nothing_routes_is_not_an_error() {
    // The route is inactive until the default VRF reaches the PE.
    let text = PE.replace(
        "remote-pe: 10.91.0.2\n      vpn-label: 900012",
        "remote-pe: 192.0.2.77\n      vpn-label: 900012",
    );
    config::parse(&text, "pe.yaml").unwrap_or_else(|e| panic!("{e}"));
}
