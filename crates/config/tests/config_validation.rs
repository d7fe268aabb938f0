//! Configuration parser and validator: valid files, every error class with
//! its exact line and field, several errors at once, the shipped examples,
//! and a mutation fuzz that must never panic.

use std::path::{Path, PathBuf};

use config::{
    self, Config, ConfigErrors, MacAddr, Management, NativeVlan, PortConfig, PortMode, StaticMac,
    SwitchSettings, Tpid, VlanConfig, VlanList,
};

/// Parses `text`, expecting failure; returns (line, field, message).
mod common;
use common::errors;

/// Exactly one error, at `line` about `field`, whose message contains `msg`.
#[track_caller]
fn one_error(text: &str, line: usize, field: &str, msg: &str) {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    let (l, f, m) = &errs[0];
    assert_eq!(*l, Some(line), "line of {f}: {m}");
    assert_eq!(f, field, "field for: {m}");
    assert!(m.contains(msg), "message {m:?} should contain {msg:?}");
}

fn ok(text: &str) -> Config {
    config::parse(text, "test.yaml").unwrap_or_else(|e| panic!("unexpected errors:\n{e}"))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const FULL: &str = r#"# full example
switch:
  name: lab1
  workers: 2
  mac-aging: 0
  mac-table-size: 65536
  poll-idle-us: 0
  rx-ring: 2048
  tx-ring: 256
management:
  socket: /tmp/lanyard.sock
vlans:
  - id: 10
    name: users
    mac-limit: 15000
  - id: 20
    learning: false
  - id: 500
ports:
  - name: veth-a
    vlan: 10
    learning: false
    mac-limit: 1000
    mtu: 1500
  - name: veth-b
    mode: trunk
    allowed-vlans: "10,20,30-32"
    native-vlan: none
  - name: veth-c
    mode: trunk
    allowed-vlans: [500, "10"]
    tpid: 0x88a8
  - name: veth-d
    mode: dot1q-tunnel
    vlan: 500
  - name: veth-e
    mode: trunk
    tpid: "802.1q"
    native-vlan: 20
static-macs:
  - mac: "02:00:00:00:00:01"
    vlan: 10
    port: veth-a
  - mac: 02-00-00-00-00-02
    vlan: 500
    port: veth-c
  - mac: 0200.0000.0003
    port: veth-e
"#;

#[test]
fn full_example_parses_to_expected_model() {
    let cfg = ok(FULL);
    let port = |name: &str, mode, vlan| PortConfig {
        mode,
        vlan,
        ..PortConfig::new(name)
    };
    let expected = Config {
        switch: SwitchSettings {
            name: "lab1".into(),
            workers: 2,
            mac_aging: 0,
            mac_table_size: 65536,
            poll_idle_us: 0,
            worker_nice: -10,
            port_backend: config::PortBackend::Auto,
            af_packet_ring: config::AfPacketRing::Dual,
            rx_ring: Some(2048),
            tx_ring: Some(256),
            ..SwitchSettings::default()
        },
        management: Management {
            socket: "/tmp/lanyard.sock".into(),
            ..Management::default()
        },
        vlans: vec![
            VlanConfig {
                id: 10,
                name: Some("users".into()),
                learning: true,
                mac_limit: Some(15000),
                ..VlanConfig::implicit(10)
            },
            VlanConfig {
                id: 20,
                name: None,
                learning: false,
                ..VlanConfig::implicit(20)
            },
            VlanConfig::implicit(500),
        ],
        ports: vec![
            PortConfig {
                learning: false,
                mac_limit: Some(1000),
                mtu: Some(1500),
                ..port("veth-a", PortMode::Access, Some(10))
            },
            PortConfig {
                allowed_vlans: Some(VlanList::from_ids([10, 20, 30, 31, 32])),
                native_vlan: Some(NativeVlan::None),
                ..port("veth-b", PortMode::Trunk, None)
            },
            PortConfig {
                allowed_vlans: Some(VlanList::from_ids([10, 500])),
                tpid: Some(Tpid::Dot1Ad),
                ..port("veth-c", PortMode::Trunk, None)
            },
            port("veth-d", PortMode::Dot1qTunnel, Some(500)),
            PortConfig {
                tpid: Some(Tpid::Dot1Q),
                native_vlan: Some(NativeVlan::Vlan(20)),
                ..port("veth-e", PortMode::Trunk, None)
            },
        ],
        static_macs: vec![
            StaticMac {
                mac: MacAddr([2, 0, 0, 0, 0, 1]),
                vlan: 10,
                port: "veth-a".into(),
            },
            StaticMac {
                mac: MacAddr([2, 0, 0, 0, 0, 2]),
                vlan: 500,
                port: "veth-c".into(),
            },
            StaticMac {
                mac: MacAddr([2, 0, 0, 0, 0, 3]),
                vlan: 1,
                port: "veth-e".into(),
            },
        ],
        routing: Default::default(),
        ..Config::default()
    };
    assert_eq!(cfg, expected);

    // Accessors.
    assert_eq!(cfg.port_index("veth-c"), Some(2));
    assert_eq!(cfg.port_index("nope"), None);
    let sets: Vec<String> = cfg
        .effective_port_vlans()
        .iter()
        .map(|s| s.to_string())
        .collect();
    // veth-b: 30-32 are not configured; native none adds nothing.
    // veth-c: native defaults to 1. veth-e: every VLAN (native 20 included).
    assert_eq!(sets, ["10", "10,20", "1,10,500", "500", "1,10,20,500"]);
    assert_eq!(cfg.ports[1].effective_tpid(), Some(Tpid::Dot1Q));
    assert_eq!(cfg.ports[2].effective_tpid().map(Tpid::value), Some(0x88a8));
    assert_eq!(cfg.ports[0].effective_tpid(), None);
    assert_eq!(
        cfg.ports[2].effective_native_vlan(),
        Some(NativeVlan::Vlan(1))
    );
    assert_eq!(cfg.ports[3].effective_vlan(), Some(500));
    assert!(cfg.vlan_exists(1) && cfg.vlan_exists(500) && !cfg.vlan_exists(30));
    assert!(cfg.vlan_settings(1).unwrap().learning);
    assert!(!cfg.vlan_settings(20).unwrap().learning);
}

#[test]
fn defaults_apply() {
    let cfg = ok("ports:\n  - name: eth0\n");
    assert_eq!(cfg.switch, SwitchSettings::default());
    assert_eq!(cfg.switch.name, "lanyard");
    assert_eq!(cfg.switch.workers, 1);
    assert_eq!(cfg.switch.mac_aging, 300);
    assert_eq!(cfg.switch.mac_table_size, 1_048_576);
    assert_eq!(cfg.switch.poll_idle_us, 50);
    assert_eq!(cfg.switch.worker_nice, -10);
    assert_eq!(
        cfg.management.socket,
        Path::new("/run/lanyard/lanyard.sock")
    );
    let p = &cfg.ports[0];
    assert_eq!(p.mode, PortMode::Access);
    assert_eq!(p.effective_vlan(), Some(1));
    assert!(p.learning);
    assert_eq!(p.effective_mtu(), 9216);
    assert_eq!(cfg.port_vlans(0).as_slice(), &[1]);

    let trunk = ok("vlans: [{id: 7}]\nports:\n  - name: t\n    mode: trunk\n");
    assert_eq!(trunk.port_vlans(0).as_slice(), &[1, 7]);
    assert_eq!(
        trunk.ports[0].effective_native_vlan(),
        Some(NativeVlan::Vlan(1))
    );
}

#[test]
fn docs_example_is_valid() {
    let doc = std::fs::read_to_string(repo_root().join("docs/config.md")).unwrap();
    let start = doc.find("```yaml\n").expect("yaml block in docs/config.md") + 8;
    let len = doc[start..].find("```").unwrap();
    let cfg =
        config::parse(&doc[start..start + len], "docs/config.md").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.ports.len(), 8);
    assert_eq!(cfg.backup_pairs.len(), 1);
    assert_eq!(cfg.port_channels[0].members, ["veth-e", "veth-f"]);
    assert_eq!(cfg.channel_of(6), Some(0));
    assert_eq!(cfg.mirror_sessions.len(), 1);
    assert!(cfg.is_monitor_port(2));
    assert_eq!(cfg.port_vlans(1).as_slice(), &[1, 10]);
    assert_eq!(cfg.routing.static_routes.len(), 3);
}

const ROUTED: &str = r#"ports:
  - name: r1
    mode: routed
    addresses: [10.0.1.1/24, "2001:db8:1::1/64"]
    urpf: strict
  - name: r2
    mode: routed
    addresses: [10.0.2.1/24]
routing:
  fpm: 127.0.0.1:2620
  static-routes:
    - prefix: 198.51.100.0/24
      next-hop: 10.0.2.2
    - prefix: "2001:db8:99::/48"
      next-hop: "fe80::1"
      interface: r1
    - prefix: 203.0.113.0/24
      blackhole: true
"#;

#[test]
fn routed_ports_and_static_routes_parse() {
    let cfg = ok(ROUTED);
    assert_eq!(cfg.ports[0].mode, PortMode::Routed);
    assert_eq!(cfg.ports[0].addresses.len(), 2);
    assert_eq!(cfg.ports[0].urpf, config::UrpfMode::Strict);
    assert!(cfg.port_vlans(0).is_empty(), "a routed port is in no VLAN");
    assert_eq!(cfg.routing.static_routes.len(), 3);
    assert_eq!(cfg.routing.fpm.as_deref(), Some("127.0.0.1:2620"));
    assert_eq!(cfg.routed_ports().count(), 2);
}

#[test]
fn vlan_interfaces_parse_and_validate() {
    let svi = "vlans:\n  - id: 10\n    router:\n      addresses: [10.0.10.1/24]\nports:\n  - name: a\n    vlan: 10\n    mtu: 1500\n  - name: r\n    mode: routed\n    addresses: [10.0.1.1/24]\nrouting:\n  static-routes:\n    - prefix: 198.51.100.0/24\n      next-hop: 10.0.10.9\n      interface: vlan10\n";
    let cfg = ok(svi);
    let ifs = cfg.l3_interfaces();
    assert_eq!(ifs.len(), 2);
    assert_eq!(
        (ifs[1].name.as_str(), ifs[1].port, ifs[1].vlan),
        ("vlan10", 2, Some(10))
    );
    assert_eq!(
        ifs[1].mtu, 1500,
        "SVI MTU defaults to the smallest port MTU in the VLAN"
    );
    one_error(
        &svi.replace("10.0.1.1/24", "10.0.10.5/16"),
        4,
        "vlans[0].router.addresses[0]",
        "overlaps",
    );
    one_error(
        &svi.replace("interface: vlan10", "interface: vlan20"),
        16,
        "routing.static-routes[0].interface",
        "unknown interface",
    );
}

#[test]
fn routed_errors_name_line_and_field() {
    let with = |from: &str, to: &str| ROUTED.replacen(from, to, 1);
    one_error(
        &with("    urpf: strict\n", "    urpf: strict\n    vlan: 10\n"),
        6,
        "ports[0].vlan",
        "not valid on a routed port",
    );
    one_error(
        &with("10.0.2.1/24", "10.0.1.7/16"),
        8,
        "ports[1].addresses[0]",
        "overlaps",
    );
    one_error(
        &with("10.0.2.1/24", "10.0.2.0/24"),
        8,
        "ports[1].addresses[0]",
        "network or broadcast",
    );
    one_error(
        &with("198.51.100.0/24", "198.51.100.1/24"),
        12,
        "routing.static-routes[0].prefix",
        "host bits",
    );
    one_error(
        &with("next-hop: 10.0.2.2", "next-hop: 10.9.9.9"),
        13,
        "routing.static-routes[0].next-hop",
        "not in the subnet of any routed port",
    );
    one_error(
        &with("      interface: r1\n", ""),
        14,
        "routing.static-routes[1].interface",
        "link-local",
    );
    one_error(
        &with("fpm: 127.0.0.1:2620", "fpm: localhost"),
        10,
        "routing.fpm",
        "ADDRESS:PORT",
    );
    one_error(
        &with("addresses: [10.0.2.1/24]", "addresses: [10.0.2.1/33]"),
        8,
        "ports[1].addresses[0]",
        "longer than 32",
    );
    // Addresses on a switched port.
    let errs = errors("ports:\n  - name: a\n    addresses: [10.0.0.1/24]\n");
    assert!(
        errs.iter()
            .any(|(_, f, m)| f == "ports[0].addresses" && m.contains("only valid on routed")),
        "{errs:?}"
    );
}

#[test]
fn every_example_is_valid() {
    let dir = repo_root().join("examples");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let head = std::fs::read_to_string(&path).unwrap();
        assert!(
            head.starts_with("# Acceptance scenario:"),
            "{} needs a header naming its scenario",
            path.display()
        );
        if let Err(e) = config::load(&path) {
            panic!("{e}");
        }
        n += 1;
    }
    assert!(n >= 5, "expected the example configs in {}", dir.display());
}

#[test]
fn example_models() {
    let ex = |name: &str| config::load(&repo_root().join("examples").join(name)).unwrap();
    let cap = ex("l2-capacity.yaml");
    assert_eq!(cap.switch.mac_table_size, 1_048_576);
    let names: Vec<&str> = cap.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["sw1", "sw2", "sw3", "sw4"]);
    assert!(cap.ports.iter().all(|p| p.effective_vlan() == Some(10)));
    assert!(
        !ex("l2-learning-disabled.yaml")
            .vlan_settings(10)
            .unwrap()
            .learning
    );
    assert_eq!(
        ex("l2-mac-limit.yaml").vlan_settings(10).unwrap().mac_limit,
        Some(15000)
    );
    assert_eq!(ex("l2-aging.yaml").switch.mac_aging, 5);
    let v = ex("l2-vlans.yaml");
    let sets: Vec<String> = v
        .effective_port_vlans()
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(sets, ["10", "20", "1,10,20", "500", "500"]);
    assert_eq!(v.ports[3].mode, PortMode::Dot1qTunnel);
    assert_eq!(v.ports[4].effective_tpid(), Some(Tpid::Dot1Ad));
}

// ---------------------------------------------------------------------------
// Semantic errors: exact line and field.
// ---------------------------------------------------------------------------

#[test]
fn ring_sizes_out_of_range() {
    let ports = "ports:\n  - name: veth-a\n    vlan: 1\n";
    one_error(
        &format!("switch:\n  rx-ring: 32\n{ports}"),
        2,
        "switch.rx-ring",
        "32 frames is out of range 64..65536",
    );
    one_error(
        &format!("switch:\n  name: x\n  tx-ring: 8192\n{ports}"),
        3,
        "switch.tx-ring",
        "out of range 16..4096",
    );
    let cfg = ok(&format!(
        "switch:\n  rx-ring: 65536\n  tx-ring: 16\n{ports}"
    ));
    assert_eq!(
        (cfg.switch.rx_ring, cfg.switch.tx_ring),
        (Some(65536), Some(16))
    );
}

#[test]
fn no_ports_is_an_error() {
    let errs = errors("");
    assert_eq!(
        errs,
        [(None, "ports".to_string(), "no ports configured".to_string())]
    );
    one_error(
        "# only a comment\nswitch:\n  workers: 1\nports: []\n",
        4,
        "ports",
        "no ports configured",
    );
}

#[test]
fn vlan_id_range_and_uniqueness() {
    one_error(
        "vlans:\n  - id: 0\nports: [{name: a}]\n",
        2,
        "vlans[0].id",
        "out of range 1..4094",
    );
    one_error(
        "vlans:\n  - id: 4095\nports: [{name: a}]\n",
        2,
        "vlans[0].id",
        "out of range",
    );
    one_error(
        "vlans:\n  - id: 10\n  - id: 20\n  - id: 10\nports: [{name: a}]\n",
        4,
        "vlans[2].id",
        "duplicate VLAN 10",
    );
}

#[test]
fn port_names() {
    one_error(
        "ports:\n  - name: a\n  - name: ''\n",
        3,
        "ports[1].name",
        "must not be empty",
    );
    one_error(
        "ports:\n  - name: a\n  - name: abcdefghijklmnop\n",
        3,
        "ports[1].name",
        "at most 15",
    );
    ok("ports:\n  - name: abcdefghijklmno\n");
    one_error(
        "ports:\n  - name: eth0\n  - name: eth1\n  - name: eth0\n",
        4,
        "ports[2].name",
        "duplicate port name \"eth0\"",
    );
    one_error(
        "ports:\n  - name: a/b\n",
        2,
        "ports[0].name",
        "not a valid Linux interface name",
    );
}

/// 1,024 ports validate and build a snapshot whose per-port tables are as
/// long as the ports configured; the 1,025th is an error at its own line.
#[test]
fn too_many_ports() {
    let mut text = String::from("vlans:\n  - id: 10\nports:\n");
    for i in 0..1025 {
        text.push_str(&format!("  - name: p{i}\n    vlan: 10\n"));
    }
    // Line 4 is ports[0]; each port takes two lines.
    one_error(&text, 4 + 2 * 1024, "ports[1024]", "at most 1024");
    let err = config::parse(&text, "big.yaml").unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("big.yaml:{}:", 4 + 2 * 1024)),
        "{err}"
    );
    let ok_text: String = text
        .lines()
        .take(3 + 2 * 1024)
        .map(|l| format!("{l}\n"))
        .collect();
    let cfg = ok(&ok_text);
    assert_eq!(cfg.ports.len(), 1024);
    let mut t = config::build::initial_tables(&cfg);
    assert_eq!(t.l2.ports.len(), 1024);
    for p in 0..1024u16 {
        t.l2.set_port_up(p, true);
    }
    let flood = &t.l2.vlans[10].flood;
    assert_eq!(flood.len(), 1024);
    assert!(flood.contains(0) && flood.contains(1023));
    assert_eq!(flood.iter().last(), Some(1023));
}

/// VLAN interfaces use port ids after the ports: together they are held
/// to the same limit.
#[test]
fn port_ids_limit_counts_vlan_interfaces() {
    let mut text =
        String::from("vlans:\n  - id: 10\n    router:\n      addresses: [10.0.0.1/24]\nports:\n");
    for i in 0..1024 {
        text.push_str(&format!("  - name: p{i}\n    vlan: 10\n"));
    }
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].1, "vlans");
    assert!(errs[0].2.contains("exceed 1024 port ids"), "{errs:#?}");
}

#[test]
fn access_and_tunnel_vlan_must_exist() {
    one_error(
        "vlans:\n  - id: 10\nports:\n  - name: a\n    vlan: 30\n",
        5,
        "ports[0].vlan",
        "VLAN 30 is not configured",
    );
    one_error(
        "ports:\n  - name: a\n    mode: dot1q-tunnel\n    vlan: 500\n",
        4,
        "ports[0].vlan",
        "VLAN 500 is not configured",
    );
    one_error(
        "ports:\n  - name: a\n    vlan: 0\n",
        3,
        "ports[0].vlan",
        "out of range",
    );
    // VLAN 1 always exists.
    ok("ports:\n  - name: a\n    vlan: 1\n");
}

#[test]
fn trunk_checks() {
    one_error(
        "ports:\n  - name: t\n    mode: trunk\n    allowed-vlans: 1-4095\n",
        4,
        "ports[0].allowed-vlans",
        "VLAN id 4095 out of range",
    );
    one_error(
        "ports:\n  - name: t\n    mode: trunk\n    allowed-vlans: [0, 10]\n",
        4,
        "ports[0].allowed-vlans",
        "VLAN id 0 out of range",
    );
    one_error(
        "ports:\n  - name: t\n    mode: trunk\n    native-vlan: 99\n",
        4,
        "ports[0].native-vlan",
        "VLAN 99 is not configured",
    );
    // Allowed VLANs need not be configured (e.g. "1-4094").
    ok("ports:\n  - name: t\n    mode: trunk\n    allowed-vlans: 1-4094\n    native-vlan: none\n");
}

#[test]
fn keys_of_other_modes() {
    one_error(
        "ports:\n  - name: a\n    allowed-vlans: 10\n",
        3,
        "ports[0].allowed-vlans",
        "allowed-vlans is only valid on trunk ports",
    );
    one_error(
        "ports:\n  - name: a\n    mode: dot1q-tunnel\n    native-vlan: 1\n",
        4,
        "ports[0].native-vlan",
        "native-vlan is only valid on trunk ports",
    );
    one_error(
        "ports:\n  - name: a\n    tpid: 0x88a8\n",
        3,
        "ports[0].tpid",
        "tpid is only valid on trunk ports",
    );
    one_error(
        "ports:\n  - name: a\n    mode: trunk\n    vlan: 1\n",
        4,
        "ports[0].vlan",
        "vlan is only valid on access and dot1q-tunnel ports",
    );
}

#[test]
fn numeric_ranges() {
    one_error(
        "ports:\n  - name: a\n    mtu: 67\n",
        3,
        "ports[0].mtu",
        "out of range 68..9216",
    );
    one_error(
        "ports:\n  - name: a\n    mtu: 9217\n",
        3,
        "ports[0].mtu",
        "out of range",
    );
    ok("ports:\n  - name: a\n    mtu: 68\n");
    one_error(
        "switch:\n  workers: 0\nports: [{name: a}]\n",
        2,
        "switch.workers",
        "out of range 1..64",
    );
    one_error(
        "switch:\n  workers: 65\nports: [{name: a}]\n",
        2,
        "switch.workers",
        "out of range",
    );
    one_error(
        "switch:\n  mac-table-size: 0\nports: [{name: a}]\n",
        2,
        "switch.mac-table-size",
        "out of range",
    );
    one_error(
        "switch:\n  mac-table-size: 16777217\nports: [{name: a}]\n",
        2,
        "switch.mac-table-size",
        "out of range",
    );
    ok("switch:\n  mac-table-size: 16777216\nports: [{name: a}]\n");
    one_error(
        "switch:\n  worker-nice: -21\nports: [{name: a}]\n",
        2,
        "switch.worker-nice",
        "out of range -20..19",
    );
    one_error(
        "switch:\n  worker-nice: 20\nports: [{name: a}]\n",
        2,
        "switch.worker-nice",
        "out of range",
    );
    assert_eq!(
        ok("switch:\n  worker-nice: 0\nports: [{name: a}]\n")
            .switch
            .worker_nice,
        0
    );
}

#[test]
fn mac_limits() {
    one_error(
        "vlans:\n  - id: 10\n    mac-limit: 0\nports: [{name: a}]\n",
        3,
        "vlans[0].mac-limit",
        "at least 1",
    );
    one_error(
        "switch:\n  mac-table-size: 100\nports:\n  - name: a\n    mac-limit: 101\n",
        5,
        "ports[0].mac-limit",
        "exceeds switch.mac-table-size (100)",
    );
    ok("switch:\n  mac-table-size: 100\nports:\n  - name: a\n    mac-limit: 100\n");
}

#[test]
fn management_socket() {
    one_error(
        "management:\n  socket: run/l.sock\nports: [{name: a}]\n",
        2,
        "management.socket",
        "absolute",
    );
    one_error(
        "management:\n  socket: ''\nports: [{name: a}]\n",
        2,
        "management.socket",
        "must not be empty",
    );
}

#[test]
fn management_logging() {
    let c = ok("ports: [{name: a}]\n");
    assert_eq!(c.management.logging.filter, "info");
    assert!(c.management.logging.syslog.is_none());
    let c = ok("management:\n  logging:\n    filter: warn,routing=debug\n    syslog: {server: 127.0.0.1, local: true, facility: local5}\nports: [{name: a}]\n");
    let sl = c.management.logging.syslog.as_ref().unwrap();
    let s = sl.settings().unwrap();
    assert_eq!(s.server, Some("127.0.0.1:514".parse().unwrap()));
    assert_eq!(s.local.as_deref(), Some(Path::new("/dev/log")));
    assert_eq!(s.facility, logging::Facility::Local5);
    assert_eq!(
        ok("management:\n  logging:\n    syslog: {server: '[::1]:6514'}\nports: [{name: a}]\n")
            .management
            .logging
            .syslog
            .unwrap()
            .settings()
            .unwrap()
            .server,
        Some("[::1]:6514".parse().unwrap())
    );
    one_error(
        "management:\n  logging:\n    filter: routing=loud\nports: [{name: a}]\n",
        3,
        "management.logging.filter",
        "bad log filter",
    );
    one_error(
        "management:\n  logging:\n    syslog: {server: loghost:514}\nports: [{name: a}]\n",
        3,
        "management.logging.syslog.server",
        "not an address",
    );
    one_error(
        "management:\n  logging:\n    syslog: {local: true, facility: local9}\nports: [{name: a}]\n",
        3,
        "management.logging.syslog.facility",
        "unknown syslog facility",
    );
    one_error(
        "management:\n  logging:\n    syslog: {facility: daemon}\nports: [{name: a}]\n",
        3,
        "management.logging.syslog",
        "no destination",
    );
}

#[test]
fn static_mac_checks() {
    let base = "vlans: [{id: 10}, {id: 20}]\nports:\n  - name: a\n    vlan: 10\n  - name: t\n    mode: trunk\n    allowed-vlans: 20\nstatic-macs:\n";
    // Line numbers below: static-macs entries start at line 9.
    one_error(
        &format!("{base}  - mac: 02:00:00:00:00:01\n    vlan: 10\n    port: b\n"),
        11,
        "static-macs[0].port",
        "unknown port \"b\"",
    );
    one_error(
        &format!("{base}  - mac: 02:00:00:00:00:01\n    vlan: 30\n    port: a\n"),
        10,
        "static-macs[0].vlan",
        "VLAN 30 is not configured",
    );
    one_error(
        &format!("{base}  - mac: 02:00:00:00:00:01\n    vlan: 20\n    port: a\n"),
        10,
        "static-macs[0].vlan",
        "port \"a\" does not carry VLAN 20",
    );
    // Trunk carries 20 and native 1, not 10.
    ok(&format!("{base}  - {{mac: 02:00:00:00:00:01, vlan: 20, port: t}}\n  - {{mac: 02:00:00:00:00:01, vlan: 1, port: t}}\n"));
    one_error(
        &format!("{base}  - {{mac: 02:00:00:00:00:01, vlan: 10, port: t}}\n"),
        9,
        "static-macs[0].vlan",
        "does not carry VLAN 10",
    );
    one_error(
        &format!("{base}  - mac: 01:00:5e:00:00:01\n    vlan: 10\n    port: a\n"),
        9,
        "static-macs[0].mac",
        "multicast",
    );
    one_error(
        &format!("{base}  - mac: ff:ff:ff:ff:ff:ff\n    vlan: 10\n    port: a\n"),
        9,
        "static-macs[0].mac",
        "broadcast",
    );
    one_error(
        &format!("{base}  - mac: 02:00:00:00:00:01\n    vlan: 10\n    port: a\n  - mac: 0200.0000.0001\n    vlan: 10\n    port: a\n"),
        12,
        "static-macs[1].mac",
        "duplicate static entry 02:00:00:00:00:01 in VLAN 10",
    );
    // Missing vlan defaults to 1, which port a (VLAN 10) does not carry:
    // reported at the entry.
    one_error(
        &format!("{base}  - mac: 02:00:00:00:00:01\n    port: a\n"),
        9,
        "static-macs[0].vlan",
        "does not carry VLAN 1",
    );
}

#[test]
fn several_errors_are_all_reported_in_file_order() {
    let text = "\
switch:
  workers: 0
vlans:
  - id: 5000
ports:
  - name: a
    vlan: 30
    mtu: 10
  - name: a
    mode: trunk
    tpid: 0x88a8
    vlan: 4
static-macs:
  - mac: 03:00:00:00:00:01
    port: zz
";
    let errs = config::parse(text, "lab.yaml").unwrap_err();
    let got: Vec<(Option<usize>, &str)> = errs.iter().map(|e| (e.line, e.field.as_str())).collect();
    assert_eq!(
        got,
        [
            (Some(2), "switch.workers"),
            (Some(4), "vlans[0].id"),
            (Some(7), "ports[0].vlan"),
            (Some(8), "ports[0].mtu"),
            (Some(9), "ports[1].name"),
            (Some(12), "ports[1].vlan"),
            (Some(14), "static-macs[0].mac"),
            (Some(15), "static-macs[0].port"),
        ],
        "{errs}"
    );
    // gcc style, one per line.
    let shown = errs.to_string();
    assert_eq!(shown.lines().count(), 8);
    assert_eq!(
        shown.lines().next().unwrap(),
        "lab.yaml:2:12: switch.workers: 0 is out of range 1..64"
    );
    assert!(shown.contains("lab.yaml:7:11: ports[0].vlan: VLAN 30 is not configured"));
}

// ---------------------------------------------------------------------------
// Structural errors (serde / YAML).
// ---------------------------------------------------------------------------

#[test]
fn unknown_key_reported_with_line() {
    one_error(
        "ports:\n  - name: a\n    vlna: 10\n",
        3,
        "ports[0].vlna",
        "unknown field `vlna`",
    );
    one_error(
        "switch:\n  name: x\nport:\n  - name: a\n",
        3,
        "port",
        "unknown field `port`",
    );
    let e = config::parse("ports:\n  - name: a\n    vlna: 10\n", "f.yaml").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("f.yaml:3:5: ports[0].vlna: unknown field `vlna`, expected one of"),
        "{e}"
    );
}

#[test]
fn yaml_syntax_error_reported_with_line() {
    let errs = errors("switch:\n  name: x\nports:\n  - name: a\n   mode: trunk\n");
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].0, Some(5), "{errs:?}");
    assert!(
        !errs[0].2.contains(" at line "),
        "position is not repeated: {errs:?}"
    );
    let errs = errors("ports: [a, b\n\nswitch: {}\n");
    assert_eq!(errs.len(), 1);
    assert!(errs[0].0.is_some(), "{errs:?}");
}

#[test]
fn type_errors_reported_with_line_and_field() {
    one_error(
        "ports:\n  - name: a\n    mode: trunkk\n",
        3,
        "ports[0].mode",
        "unknown variant `trunkk`",
    );
    one_error(
        "ports:\n  - name: a\n    vlan: ten\n",
        3,
        "ports[0].vlan",
        "invalid type",
    );
    one_error(
        "ports:\n  - name: a\n    mode: trunk\n    tpid: 0x9100\n",
        4,
        "ports[0].tpid",
        "unsupported tpid",
    );
    one_error(
        "ports:\n  - name: a\n    mode: trunk\n    allowed-vlans: 10,x\n",
        4,
        "ports[0].allowed-vlans",
        "invalid VLAN list",
    );
    one_error(
        "ports:\n  - name: a\n    mode: trunk\n    native-vlan: nada\n",
        4,
        "ports[0].native-vlan",
        "invalid native-vlan",
    );
    one_error(
        "ports: [{name: a}]\nstatic-macs:\n  - mac: 02:00:00:00:01\n    port: a\n",
        3,
        "static-macs[0].mac",
        "invalid MAC address",
    );
    one_error(
        "ports:\n  - mode: trunk\n",
        2,
        "ports[0]",
        "missing field `name`",
    );
    one_error(
        "ports:\n  - name: a\n    name: b\n",
        3,
        "ports[0].name",
        "duplicate key `name`",
    );
}

#[test]
fn tpid_and_list_spellings() {
    for (spelling, want) in [
        ("0x8100", Tpid::Dot1Q),
        ("33024", Tpid::Dot1Q),
        ("\"0x8100\"", Tpid::Dot1Q),
        ("802.1q", Tpid::Dot1Q),
        ("0x88a8", Tpid::Dot1Ad),
        ("\"0x88A8\"", Tpid::Dot1Ad),
        ("802.1ad", Tpid::Dot1Ad),
    ] {
        let cfg = ok(&format!(
            "ports:\n  - name: t\n    mode: trunk\n    tpid: {spelling}\n"
        ));
        assert_eq!(cfg.ports[0].tpid, Some(want), "{spelling}");
    }
    for (spelling, want) in [
        ("10", "10"),
        ("\"10,20,30-33\"", "10,20,30-33"),
        ("10,20", "10,20"),
        ("[10, 20, \"30-32\"]", "10,20,30-32"),
        ("[]", ""),
    ] {
        let cfg = ok(&format!(
            "ports:\n  - name: t\n    mode: trunk\n    allowed-vlans: {spelling}\n"
        ));
        assert_eq!(
            cfg.ports[0].allowed_vlans.as_ref().unwrap().to_string(),
            want,
            "{spelling}"
        );
    }
}

#[test]
fn load_reports_unreadable_file() {
    let e: ConfigErrors = config::load(Path::new("/nonexistent/lanyard.yaml")).unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(
        e.to_string()
            .starts_with("/nonexistent/lanyard.yaml: cannot read configuration"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------
// Fuzz-style robustness: random mutations never panic.
// ---------------------------------------------------------------------------

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut XorShift, src: &[char]) -> String {
    const TOKENS: &[&str] = &[
        ":",
        "-",
        " ",
        "  ",
        "\n",
        "[",
        "]",
        "{",
        "}",
        ",",
        "#",
        "&a",
        "*a",
        "!!str",
        "|",
        ">",
        "'",
        "\"",
        "0x8100",
        "0x88a8",
        "none",
        "4094",
        "0",
        "-1",
        "99999999999999999999",
        "trunk",
        "dot1q-tunnel",
        "vlan",
        "ports",
        "\t",
        "é",
        "~",
        "null",
        "1-4094",
        "- name: x\n",
        "ffff.ffff.ffff",
        "? ",
        "---\n",
        "%YAML 1.2\n",
    ];
    let mut text: Vec<char> = src.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = text.len();
        match rng.below(6) {
            0 => {
                let at = rng.below(len);
                let n = rng.below(8).min(len - at);
                text.drain(at..at + n);
            }
            1 | 2 => {
                let at = rng.below(len + 1);
                let tok = TOKENS[rng.below(TOKENS.len())];
                text.splice(at..at, tok.chars());
            }
            3 => {
                if len > 0 {
                    let at = rng.below(len);
                    text[at] = char::from(b' ' + rng.below(95) as u8);
                }
            }
            4 => {
                // Duplicate a random slice elsewhere.
                let a = rng.below(len);
                let b = (a + rng.below(40)).min(len);
                let piece: Vec<char> = text[a..b].to_vec();
                let at = rng.below(len + 1);
                text.splice(at..at, piece);
            }
            _ => {
                // Truncate.
                let at = rng.below(len + 1);
                text.truncate(at);
            }
        }
        if text.is_empty() {
            break;
        }
    }
    text.into_iter().collect()
}

#[test]
fn random_mutations_never_panic() {
    let sources: Vec<Vec<char>> = [FULL.to_string()]
        .into_iter()
        .chain(
            std::fs::read_dir(repo_root().join("examples"))
                .unwrap()
                .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok()),
        )
        .map(|s| s.chars().collect())
        .collect();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let (mut valid, mut invalid) = (0, 0);
    for i in 0..5000 {
        let src = &sources[i % sources.len()];
        let text = mutate(&mut rng, src);
        match config::parse(&text, "fuzz.yaml") {
            Ok(_) => valid += 1,
            Err(e) => {
                invalid += 1;
                assert!(!e.is_empty(), "empty error list for {text:?}");
                for err in &e {
                    if let Some(line) = err.line {
                        assert!(
                            line >= 1 && line <= text.lines().count() + 1,
                            "line {line} out of file: {err} for {text:?}"
                        );
                    }
                }
                let _ = e.to_string();
            }
        }
    }
    assert!(valid > 0 && invalid > 0, "valid {valid}, invalid {invalid}");
}

#[test]
fn backup_pairs_and_port_channels_validate() {
    let base = "vlans: [{id: 10}]\nports:\n  - {name: a, vlan: 10}\n  - {name: b, vlan: 10}\n  - {name: c, mode: trunk}\n  - {name: r, mode: routed, addresses: [10.0.0.1/24]}\n";
    let cfg = ok(&format!(
        "{base}backup-pairs: [{{primary: a, backup: b, preempt: true}}]\n"
    ));
    assert!(cfg.backup_pairs[0].mac_move_update, "default on");
    let e = |extra: &str| -> Vec<String> {
        errors(&format!("{base}{extra}"))
            .into_iter()
            .map(|(_, f, m)| format!("{f}: {m}"))
            .collect()
    };
    let v = e("backup-pairs: [{primary: a, backup: c}]\n");
    assert!(v.iter().any(|m| m.contains("same mode, VLANs")), "{v:?}");
    let v = e("backup-pairs: [{primary: a, backup: r}]\n");
    assert!(v.iter().any(|m| m.contains("routed")), "{v:?}");
    let v = e("backup-pairs: [{primary: a, backup: a}]\n");
    assert!(v.iter().any(|m| m.contains("same port")), "{v:?}");
    let v = e("port-channels: [{name: po1, members: [a, b]}, {name: po2, members: [b]}]\n");
    assert!(v.iter().any(|m| m.contains("already belongs")), "{v:?}");
    let v = e("port-channels: [{name: po1, members: [a, c]}]\n");
    assert!(v.iter().any(|m| m.contains("same mode, VLANs")), "{v:?}");
    let v = e("port-channels: [{name: po1, members: [a, b], min-links: 3}]\n");
    assert!(v.iter().any(|m| m.contains("min-links")), "{v:?}");
    let v = e("port-channels: [{name: po1, members: [a], lacp: sometimes}]\n");
    assert!(!v.is_empty());
    let v = e("port-channels: [{name: a, members: [b]}]\n");
    assert!(v.iter().any(|m| m.contains("already a port")), "{v:?}");
}

#[test]
fn multicast_section_checks() {
    let ok = "ports:\n  - {name: a}\n  - {name: r, mode: routed, addresses: [10.0.0.1/24]}\n  - {name: s, mode: routed, addresses: [10.0.1.1/24]}\n\
              multicast:\n  igmp-snooping: {vlans: [1], router-ports: [a], querier: true}\n  routing: true\n  static-routes:\n    - {group: 232.1.1.1, source: 10.0.0.2, iif: r, oifs: [s]}\n";
    let c = config::parse(ok, "t.yaml").unwrap_or_else(|e| panic!("{e}"));
    let s = c.multicast.igmp_snooping.as_ref().unwrap();
    assert_eq!(
        (s.query_interval, s.robustness, s.max_groups),
        (125, 2, 32_768)
    );
    assert_eq!(s.gmi_ms(), 260_000, "RFC 3376 group membership interval");
    for (bad, want) in [
        ("multicast:\n  igmp-snooping: {vlans: [30]}\n", "multicast.igmp-snooping.vlans[0]"),
        ("multicast:\n  igmp-snooping: {vlans: [1], router-ports: [nope]}\n", "router-ports[0]"),
        ("multicast:\n  igmp-snooping: {vlans: [1], robustness: 0}\n", "robustness"),
        ("multicast:\n  igmp-snooping: {vlans: [1], query-interval: 5, query-response-ms: 6000}\n", "query-response-ms"),
        ("multicast:\n  igmp-snooping: {vlans: [1], querier-address: \"2001:db8::1\"}\n", "querier-address"),
        ("multicast:\n  routing: true\n", "needs routed ports"),
        ("multicast:\n  static-routes: [{group: 10.1.1.1, oifs: [a]}]\n", "not a multicast address"),
        ("multicast:\n  static-routes: [{group: 232.1.1.1, source: 232.0.0.1, oifs: [a]}]\n", "source"),
        ("multicast:\n  igmp-snooping: {vlans: [1], bogus: 1}\n", "bogus"),
    ] {
        let y = format!("ports:\n  - {{name: a}}\n{bad}");
        let e = config::parse(&y, "t.yaml").expect_err(bad).to_string();
        assert!(e.contains(want), "{bad:?}: {e}");
    }
}

/// Bidirectional (*,G) routes: an accept set of routed ports instead of
/// one incoming port; never with a source or an `iif`.
#[test]
fn multicast_bidirectional_accept_sets() {
    let ports = "ports:\n  - {name: a}\n  - {name: r, mode: routed, addresses: [10.0.0.1/24]}\n  - {name: s, mode: routed, addresses: [10.0.1.1/24]}\n";
    let c = config::parse(
        &format!("{ports}multicast:\n  static-routes:\n    - {{group: 239.1.1.1, accept: [r, s], oifs: [r, s]}}\n"),
        "t.yaml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.multicast.static_routes[0].accept, ["r", "s"]);
    for (bad, field, want) in [
        (
            "{group: 239.1.1.1, accept: [r], iif: s, oifs: [s]}",
            "static-routes[0].accept",
            "not both",
        ),
        (
            "{group: 239.1.1.1, source: 10.0.0.2, accept: [r], oifs: [s]}",
            "static-routes[0].accept",
            "drop the source",
        ),
        (
            "{group: 239.1.1.1, accept: [r, nope], oifs: [s]}",
            "static-routes[0].accept[1]",
            "not configured",
        ),
        (
            "{group: 239.1.1.1, accept: [a], oifs: [s]}",
            "static-routes[0].accept[0]",
            "not a routed port",
        ),
    ] {
        let y = format!("{ports}multicast:\n  static-routes:\n    - {bad}\n");
        let errs = common::errors(&y);
        assert!(
            errs.iter()
                .any(|(line, f, m)| *line == Some(7) && f.ends_with(field) && m.contains(want)),
            "{bad}: {errs:?}"
        );
    }
}

/// Issue 13, item 10: routed ports and SVIs default to 1,500 (layer-2
/// ports keep 9,216), and a routed port's MTU never exceeds what its TAP
/// twin carries, so the two always agree.
#[test]
fn issue13_routed_ports_and_svis_default_to_1500() {
    let cfg = ok("vlans:\n  - id: 10\n    router:\n      addresses: [10.0.10.1/24]\n\
                  ports:\n  - name: a\n    vlan: 10\n  - name: r\n    mode: routed\n    addresses: [10.0.1.1/24]\n");
    assert_eq!(cfg.ports[0].effective_mtu(), 9216, "layer-2 port: jumbo");
    assert_eq!(cfg.ports[1].effective_mtu(), 1500, "routed port");
    let ifs = cfg.l3_interfaces();
    assert_eq!((ifs[0].name.as_str(), ifs[0].mtu), ("r", 1500));
    assert_eq!(
        (ifs[1].name.as_str(), ifs[1].mtu),
        ("vlan10", 1500),
        "SVI over jumbo ports"
    );
    // A smaller port in the VLAN lowers the SVI's default.
    let cfg = ok(
        "vlans:\n  - id: 10\n    router:\n      addresses: [10.0.10.1/24]\n\
                  ports:\n  - name: a\n    vlan: 10\n    mtu: 1400\n",
    );
    assert_eq!(cfg.l3_interfaces()[0].mtu, 1400);
    // Explicit MTUs: up to the TAP's limit.
    let r = "ports:\n  - name: r\n    mode: routed\n    addresses: [10.0.1.1/24]\n    mtu: 9206\n";
    assert_eq!(ok(r).ports[0].effective_mtu(), 9206);
    one_error(
        &r.replace("9206", "9216"),
        5,
        "ports[0].mtu",
        "at most 9206",
    );
    one_error(
        "vlans:\n  - id: 10\n    router:\n      addresses: [10.0.10.1/24]\n      mtu: 9216\nports:\n  - name: a\n    vlan: 10\n",
        5,
        "vlans[0].router.mtu",
        "out of range 68..9206",
    );
}

#[test]
fn af_packet_ring_defaults_to_dual_and_rejects_unknown_with_line() {
    let cfg = config::parse("ports:\n  - name: a\n", "t.yaml").unwrap();
    assert_eq!(cfg.switch.af_packet_ring, config::AfPacketRing::Dual);
    let cfg = config::parse(
        "switch:\n  af-packet-ring: block\nports:\n  - name: a\n",
        "t.yaml",
    )
    .unwrap();
    assert_eq!(cfg.switch.af_packet_ring, config::AfPacketRing::Block);
    one_error(
        "switch:\n  af-packet-ring: v2\n",
        2,
        "switch.af-packet-ring",
        "unknown variant `v2`",
    );
}

#[test]
fn af_xdp_busy_poll_parses_inherits_and_rejects_bad_values_with_line() {
    let cfg = ok("ports:\n  - name: a\n");
    assert_eq!(cfg.switch.af_xdp_busy_poll, config::BusyPollMode::Off);
    assert_eq!(cfg.switch.af_xdp_busy_poll_budget, 64);
    assert_eq!(cfg.switch.af_xdp_busy_poll_us, 20);
    assert_eq!(cfg.switch.af_xdp_napi_timeout_us, 200);
    let cfg = ok(
        "switch:\n  af-xdp-busy-poll: on\n  af-xdp-busy-poll-budget: 16\n  \
         af-xdp-napi-timeout-us: 50\nports:\n  - name: a\n  - name: b\n    \
         af-xdp-busy-poll: off\n  - name: c\n    backend: af-packet\n",
    );
    assert_eq!(cfg.switch.af_xdp_busy_poll_budget, 16);
    assert_eq!(cfg.switch.af_xdp_napi_timeout_us, 50);
    assert_eq!(cfg.busy_poll_of(0), config::BusyPollMode::On);
    assert_eq!(cfg.busy_poll_of(1), config::BusyPollMode::Off);
    // Inherited by an AF_PACKET port: nothing to do there, not an error.
    assert_eq!(cfg.busy_poll_of(2), config::BusyPollMode::On);
    // Written back only where it differs from the default.
    let text = serde_yaml_ng::to_string(&cfg).unwrap();
    assert!(text.contains("af-xdp-busy-poll: on"), "{text}");
    assert!(!text.contains("af-xdp-busy-poll-us"), "{text}");
    one_error(
        "switch:\n  af-xdp-busy-poll: yes\n",
        2,
        "switch.af-xdp-busy-poll",
        "unknown variant `yes`",
    );
    one_error(
        "switch:\n  af-xdp-busy-poll: true\n",
        2,
        "switch.af-xdp-busy-poll",
        "expected",
    );
    one_error(
        "switch:\n  af-xdp-busy-poll-budget: 0\nports:\n  - name: a\n",
        2,
        "switch.af-xdp-busy-poll-budget",
        "0 frames is out of range 1..1024",
    );
    one_error(
        "switch:\n  af-xdp-busy-poll-us: 5000\nports:\n  - name: a\n",
        2,
        "switch.af-xdp-busy-poll-us",
        "out of range 1..1000",
    );
    one_error(
        "switch:\n  af-xdp-napi-timeout-us: 5\nports:\n  - name: a\n",
        2,
        "switch.af-xdp-napi-timeout-us",
        "5 µs is out of range 10..10000",
    );
    // Asked of a port that will be on AF_PACKET (its own backend or the
    // switch's).
    one_error(
        "ports:\n  - name: a\n    backend: af-packet\n    af-xdp-busy-poll: on\n",
        4,
        "ports[0].af-xdp-busy-poll",
        "needs an AF_XDP port",
    );
    one_error(
        "switch:\n  port-backend: af-packet\nports:\n  - name: a\n  - name: b\n    \
         af-xdp-busy-poll: on\n",
        6,
        "ports[1].af-xdp-busy-poll",
        "port b: busy polling needs an AF_XDP port",
    );
}

#[test]
fn port_backend_parses_inherits_and_rejects_unknown_with_line() {
    let cfg = config::parse(
        "switch:\n  port-backend: af-packet\nports:\n  - name: a\n    backend: af-xdp\n  - name: b\n  - name: c\n    backend: auto\n",
        "t.yaml",
    )
    .unwrap();
    use config::PortBackend::*;
    assert_eq!(
        (cfg.backend_of(0), cfg.backend_of(1), cfg.backend_of(2)),
        (AfXdp, AfPacket, Auto)
    );
    let cfg = config::parse("ports:\n  - name: a\n", "t.yaml").unwrap();
    assert_eq!(cfg.backend_of(0), Auto, "default: auto");
    one_error(
        "ports:\n  - name: a\n    backend: xdp\n",
        3,
        "ports[0].backend",
        "unknown variant `xdp`",
    );
    one_error(
        "switch:\n  port-backend: dpdk\n",
        2,
        "switch.port-backend",
        "unknown variant `dpdk`",
    );
}
