//! `virtual-switch:`: defaults and every error with its line and field.

mod common;
use common::errors;

const BASE: &str = "vlans:
  - id: 10
  - id: 20
ports:
  - name: pl1
    mode: trunk
  - name: pl2
    mode: trunk
  - name: m1
    mode: trunk
    allowed-vlans: [10]
  - name: m2
    mode: trunk
    allowed-vlans: [10]
  - name: ka
    mode: routed
    addresses: [192.0.2.1/30]
  - name: a
    mode: access
    vlan: 20
port-channels:
  - name: po1
    members: [m1, m2]
";

const VS: &str = "virtual-switch:
  domain-id: 7
  system-mac: 02:00:00:00:07:00
  peer-link: [pl1, pl2]
  keepalive:
    source: 192.0.2.1
    peer: 192.0.2.2
  channels:
    - port-channel: po1
      id: 1
";

#[test]
fn defaults() {
    let cfg = config::parse(&format!("{BASE}{VS}"), "t.yaml").unwrap();
    let vs = cfg.virtual_switch.as_ref().unwrap();
    assert_eq!(vs.domain_id, 7);
    assert_eq!((vs.priority, vs.system_priority), (32768, 32768));
    assert_eq!(vs.system_mac.to_string(), "02:00:00:00:07:00");
    assert_eq!(vs.keepalive.port, config::vswitch::DEFAULT_KEEPALIVE_PORT);
    assert_eq!(
        (vs.keepalive.interval_ms, vs.keepalive.timeout_ms),
        (200, 1000)
    );
    assert_eq!(vs.delay_restore_s, 2);
    assert_eq!(vs.channel_id("po1"), Some(1));
    assert_eq!(vs.channel_id("po2"), None);
    // Without the section: standalone.
    assert!(config::parse(BASE, "t.yaml")
        .unwrap()
        .virtual_switch
        .is_none());
}

#[test]
fn errors_with_lines() {
    let text = format!(
        "{BASE}virtual-switch:
  domain-id: 1001
  system-mac: 01:00:5e:00:00:01
  peer-link: [pl1, a, nope, pl1]
  keepalive:
    source: 192.0.2.1
    peer: 192.0.2.1
    interval-ms: 100
    timeout-ms: 200
  channels:
    - port-channel: po9
      id: 5000
    - port-channel: po1
      id: 5000
"
    );
    let e = errors(&text);
    let base = BASE.lines().count();
    let want = [
        (2, "virtual-switch.domain-id", "out of range 1..1000"),
        (3, "virtual-switch.system-mac", "not a unicast"),
        (4, "virtual-switch.peer-link[1]", "carries other VLANs"),
        (4, "virtual-switch.peer-link[2]", "not configured"),
        (4, "virtual-switch.peer-link[3]", "listed twice"),
        (7, "virtual-switch.keepalive.peer", "own source address"),
        (9, "virtual-switch.keepalive.timeout-ms", "three intervals"),
        (
            11,
            "virtual-switch.channels[0].port-channel",
            "not configured",
        ),
        (12, "virtual-switch.channels[0].id", "out of range 1..4096"),
        (14, "virtual-switch.channels[1].id", "used twice"),
        (14, "virtual-switch.channels[1].id", "out of range"),
    ];
    for (line, field, msg) in want {
        assert!(
            e.iter()
                .any(|(l, f, m)| *l == Some(base + line) && f == field && m.contains(msg)),
            "missing {line} {field} {msg}: {e:#?}"
        );
    }
    assert_eq!(e.len(), want.len(), "{e:#?}");
}

#[test]
fn peer_link_and_keepalive_paths() {
    // A channel member, a routed port, a spanning-tree port.
    let e = errors(&format!(
        "{BASE}spanning-tree: {{}}
virtual-switch:
  domain-id: 7
  system-mac: 02:00:00:00:07:00
  peer-link: [m1, ka, pl1]
  keepalive: {{source: 192.0.2.1, peer: 192.0.2.2}}
"
    ));
    let msgs: Vec<&str> = e.iter().map(|(_, _, m)| m.as_str()).collect();
    assert!(
        msgs.iter().any(|m| m.contains("member of port channel")),
        "{e:#?}"
    );
    assert!(msgs.iter().any(|m| m.contains("is routed")), "{e:#?}");
    assert!(
        msgs.iter().any(|m| m.contains("runs spanning tree")),
        "{e:#?}"
    );

    // Keepalive on an SVI the peer link carries; peer link lacks a
    // channel VLAN.
    let e = errors(
        "vlans:
  - id: 10
  - id: 20
    router:
      addresses: [198.51.100.1/24]
ports:
  - name: pl1
    mode: trunk
    allowed-vlans: [20]
  - name: m1
    mode: access
    vlan: 10
port-channels:
  - name: po1
    members: [m1]
virtual-switch:
  domain-id: 7
  system-mac: 02:00:00:00:07:00
  peer-link: [pl1]
  keepalive: {source: 198.51.100.1, peer: 198.51.100.2}
  channels: [{port-channel: po1, id: 1}]
",
    );
    assert!(
        e.iter().any(|(l, f, m)| *l == Some(20)
            && f == "virtual-switch.keepalive.source"
            && m.contains("separate path")),
        "{e:#?}"
    );
    assert!(
        e.iter().any(|(l, f, m)| *l == Some(21)
            && f == "virtual-switch.channels[0].port-channel"
            && m.contains("[10]")),
        "{e:#?}"
    );
    // Unknown keys are refused.
    let e = errors(&format!("{BASE}{VS}  bogus: 1\n"));
    assert!(e[0].2.contains("bogus"), "{e:#?}");
}

#[test]
fn node_loss_links() {
    use config::vswitch::NodeLossLinks;
    let get = |extra: &str| {
        config::parse(&format!("{BASE}{VS}{extra}"), "t.yaml")
            .unwrap()
            .virtual_switch
            .unwrap()
            .node_loss_links
    };
    assert_eq!(get(""), NodeLossLinks::ChannelMembers);
    assert_eq!(get("  node-loss-links: all\n"), NodeLossLinks::All);
    assert_eq!(get("  node-loss-links: none\n"), NodeLossLinks::None);
    let text = format!("{BASE}{VS}  node-loss-links: some\n");
    let e = errors(&text);
    assert!(
        e.iter()
            .any(|(l, _, m)| *l == Some(text.lines().count()) && m.contains("channel-members")),
        "{e:#?}"
    );
}

#[test]
fn gateways() {
    // VLAN 10 has an SVI; 20 has none; 30 is not configured; 10 twice.
    let base = BASE.replace(
        "  - id: 10\n",
        "  - id: 10\n    router:\n      addresses: [10.0.10.1/24]\n",
    );
    let ok = config::parse(&format!("{base}{VS}  gateways: [10]\n"), "t.yaml").unwrap();
    assert_eq!(ok.virtual_switch.unwrap().gateways, vec![10]);
    // An SVI of a VRF serves as gateway too (twins in the VRF's namespace,
    // docs/virtual-switch.md "One gateway"); refused before.
    let vrf =
        format!("{base}vrfs:\n  - {{name: red, interfaces: [vlan10]}}\n{VS}  gateways: [10]\n");
    let ok = config::parse(&vrf, "t.yaml").unwrap();
    assert_eq!(ok.vrf_of_interface("vlan10"), 1);
    assert_eq!(ok.virtual_switch.unwrap().gateways, vec![10]);
    let text = format!("{base}{VS}  gateways: [10, 20, 30, 10]\n");
    let e = errors(&text);
    let line = text.lines().count();
    for (field, msg) in [
        ("virtual-switch.gateways[1]", "no router section"),
        ("virtual-switch.gateways[2]", "not configured"),
        ("virtual-switch.gateways[3]", "listed twice"),
    ] {
        assert!(
            e.iter()
                .any(|(l, f, m)| *l == Some(line) && f == field && m.contains(msg)),
            "missing {field} {msg}: {e:#?}"
        );
    }
    assert_eq!(e.len(), 3, "{e:#?}");
}

#[test]
fn aggregated_peer_link() {
    // A port channel named alone is an aggregated peer link.
    let text = format!(
        "{BASE}  - name: pl
    members: [pl1, pl2]
    lacp: active
    lacp-rate: fast
{}",
        VS.replace("peer-link: [pl1, pl2]", "peer-link: [pl]")
    );
    // LACP between two nodes of the default name would be a loop.
    let e = errors(&text);
    assert!(
        e.len() == 1 && e[0].1 == "virtual-switch.peer-link[0]" && e[0].2.contains("switch.name"),
        "{e:#?}"
    );
    let text = format!("switch: {{name: dist-a}}\n{text}");
    let cfg = config::parse(&text, "t.yaml").unwrap();
    assert_eq!(cfg.peer_link_channel(), Some(1));
    assert_eq!(cfg.peer_link_ports(), vec!["pl1", "pl2"]);
    let l2 = config::build::l2_tables(&cfg);
    let pl = cfg.channel_port_id(1) as usize;
    assert!(l2.ports[pl].peer_link && !l2.ports[pl].learning);
    assert!(l2.ports[0].peer_link && l2.ports[1].peer_link);
    assert!(!l2.ports[2].peer_link);
    // Listed ports stay active/standby.
    let cfg = config::parse(&format!("{BASE}{VS}"), "t.yaml").unwrap();
    assert_eq!(cfg.peer_link_channel(), None);
    assert_eq!(cfg.peer_link_ports(), vec!["pl1", "pl2"]);

    // With other ports, and a multichassis channel as the peer link.
    let e = errors(&format!(
        "{BASE}  - name: pl
    members: [pl1]
    lacp: static
virtual-switch:
  domain-id: 7
  system-mac: 02:00:00:00:07:00
  peer-link: [pl2, pl]
  keepalive: {{source: 192.0.2.1, peer: 192.0.2.2}}
"
    ));
    let base = BASE.lines().count() + 3;
    assert!(
        e.iter().any(|(l, f, m)| *l == Some(base + 4)
            && f == "virtual-switch.peer-link[1]"
            && m.contains("name it alone")),
        "{e:#?}"
    );
    assert_eq!(e.len(), 1, "{e:#?}");
    let e = errors(&format!(
        "{BASE}virtual-switch:
  domain-id: 7
  system-mac: 02:00:00:00:07:00
  peer-link: [po1]
  keepalive: {{source: 192.0.2.1, peer: 192.0.2.2}}
  channels: [{{port-channel: po1, id: 1}}]
"
    ));
    let base = BASE.lines().count();
    assert!(
        e.iter().any(|(l, f, m)| *l == Some(base + 4)
            && f == "virtual-switch.peer-link[0]"
            && m.contains("is a multichassis channel")),
        "{e:#?}"
    );
}
