//! `vrrp:` groups on routed ports and VLAN interfaces (docs/vrrp.md):
//! defaults, and each validation error with its field.

mod common;
use common::errors;

const BASE: &str = r#"switch: {name: r1}
ports:
  - name: sw1
    mode: routed
    addresses: [192.0.2.2/24]
    vrrp:
"#;

fn with(groups: &str) -> String {
    format!("{BASE}{groups}")
}

#[test]
fn defaults_and_owner_priority() {
    let cfg = config::parse(
        &with("      - {vrid: 7, addresses: [192.0.2.254]}\n      - {vrid: 8, addresses: [192.0.2.2], advert-interval-ms: 100, preempt: false}\n"),
        "t.yaml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let p = &cfg.ports[0];
    let g = &p.vrrp[0];
    assert_eq!(g.effective_priority(&p.addresses), 100);
    assert_eq!(
        (g.advert_interval_ms, g.preempt, g.accept_mode),
        (1000, true, false)
    );
    // A virtual address that is the interface's own: the owner, 255.
    assert_eq!(p.vrrp[1].effective_priority(&p.addresses), 255);
    let l3 = cfg.l3_interfaces();
    assert_eq!(l3[0].vrrp.len(), 2);
    let svi = config::parse(
        "switch: {name: r1}\nports: [{name: a, vlan: 10}]\nvlans:\n  - id: 10\n    router:\n      addresses: [10.0.0.2/24]\n      vrrp: [{vrid: 1, addresses: [10.0.0.1], priority: 150}]\n",
        "t.yaml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(svi.l3_interfaces()[0].vrrp[0].priority, Some(150));
}

#[track_caller]
fn refused(groups: &str, field: &str, msg: &str) {
    let errs = errors(&with(groups));
    assert!(
        errs.iter().any(|(_, f, m)| f == field && m.contains(msg)),
        "expected {field}: {msg} in {errs:#?}"
    );
}

#[test]
fn bad_groups_are_refused_with_their_field() {
    refused(
        "      - {vrid: 0, addresses: [192.0.2.254]}\n",
        "ports[0].vrrp[0].vrid",
        "out of range 1..255",
    );
    refused(
        "      - {vrid: 256, addresses: [192.0.2.254]}\n",
        "ports[0].vrrp[0].vrid",
        "out of range 1..255",
    );
    refused(
        "      - {vrid: 1, addresses: [192.0.2.254], priority: 0}\n",
        "ports[0].vrrp[0].priority",
        "out of range 1..254",
    );
    refused(
        "      - {vrid: 1, addresses: [192.0.2.254], priority: 255}\n",
        "ports[0].vrrp[0].priority",
        "address owner",
    );
    refused(
        "      - {vrid: 1, addresses: [192.0.2.2], priority: 100}\n",
        "ports[0].vrrp[0].priority",
        "owns it",
    );
    refused(
        "      - {vrid: 1, addresses: [198.51.100.1]}\n",
        "ports[0].vrrp[0].addresses[0]",
        "not in the subnet",
    );
    refused(
        "      - {vrid: 1, addresses: [\"2001:db8::1\"]}\n",
        "ports[0].vrrp[0].addresses[0]",
        "IPv6",
    );
    refused(
        "      - {vrid: 1, addresses: []}\n",
        "ports[0].vrrp[0].addresses",
        "at least one",
    );
    refused(
        "      - {vrid: 1, addresses: [192.0.2.254], advert-interval-ms: 15}\n",
        "ports[0].vrrp[0].advert-interval-ms",
        "multiple of 10",
    );
    refused(
        "      - {vrid: 1, addresses: [192.0.2.254]}\n      - {vrid: 1, addresses: [192.0.2.253]}\n",
        "ports[0].vrrp[1].vrid",
        "twice",
    );
    refused(
        "      - {vrid: 1, addresses: [192.0.2.254]}\n      - {vrid: 2, addresses: [192.0.2.254]}\n",
        "ports[0].vrrp[1].addresses[0]",
        "already a virtual address",
    );
    let errs = errors("switch: {name: r1}\nports:\n  - name: a\n    vrrp: [{vrid: 1, addresses: [192.0.2.254]}]\n");
    assert!(
        errs.iter()
            .any(|(_, f, m)| f == "ports[0].vrrp" && m.contains("only valid on routed")),
        "{errs:#?}"
    );
}
