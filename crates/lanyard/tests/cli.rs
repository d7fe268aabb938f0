//! The operator's view: `config check` messages, `show` tables, a clean
//! SIGTERM shutdown, and layer-2 protocol frames (BPDU, LACP) carried
//! through an 802.1ad tunnel untouched.

use std::process::Command;
use std::time::Duration;

use testkit::frame::{mac, parse_mac};
use testkit::l2;
use testkit::{require_root, Switch, TestBed};

fn lanyard() -> String {
    l2::bin(env!("CARGO_BIN_EXE_lanyard"))
}

#[test]
fn config_check_names_file_line_and_field() {
    let dir = std::env::temp_dir().join(format!("lanyard-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "vlans:\n  - id: 10\nports:\n  - name: sw1\n    vlan: 99\n  - name: sw2\n    mtu: 20\n",
    )
    .unwrap();
    let out = Command::new(lanyard())
        .args(["config", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let path = bad.display().to_string();
    assert!(
        err.contains(&format!("{path}:5:")) && err.contains("ports[0].vlan"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{path}:7:")) && err.contains("ports[1].mtu"),
        "{err}"
    );

    let good = dir.join("good.yaml");
    std::fs::write(
        &good,
        "vlans:\n  - id: 10\nports:\n  - name: sw1\n    vlan: 10\n",
    )
    .unwrap();
    let out = Command::new(lanyard())
        .args(["config", "check"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // VLAN 1 exists without being configured: one VLAN, not two (issue 14).
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.contains("ok: 1 port, 1 VLAN (and the default VLAN 1), 0 static MACs"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn show_tables_and_clean_shutdown() {
    require_root!();
    let bed = TestBed::new("cli", 3, 1500).expect("namespaces");
    let yaml = "vlans:\n  - id: 10\n    name: users\n    mac-limit: 100\nports:\n\
                \x20 - name: sw1\n    vlan: 10\n\
                \x20 - name: sw2\n    vlan: 10\n\
                \x20 - name: sw3\n    mode: trunk\n    allowed-vlans: \"10\"\n\
                static-macs:\n  - mac: \"02:00:00:00:00:99\"\n    vlan: 10\n    port: sw2\n";
    let mut sw = Switch::start(&lanyard(), &bed.dut, yaml, &["sw1", "sw2", "sw3"]).expect("start");
    let text = |args: &[&str]| {
        let o = sw.cli(args).unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let t = text(&["show", "interfaces"]);
    assert!(
        t.starts_with("3 ports: 3 up, 0 down") && t.contains("sw1") && t.contains("trunk"),
        "{t}"
    );
    let t = text(&["show", "interfaces", "trunk"]);
    assert!(t.contains("sw3") && t.contains("1, 10"), "{t}");
    let t = text(&["show", "vlan"]);
    assert!(
        t.contains("users") && t.contains("sw3(T)") && t.contains("100"),
        "{t}"
    );
    let t = text(&["show", "mac", "address-table", "vlan", "10"]);
    assert!(
        t.contains("0200.0000.0099") && t.contains("STATIC") && t.contains("sw2"),
        "{t}"
    );
    assert!(
        t.contains("Total Mac Addresses for this criterion: 1"),
        "{t}"
    );
    let t = text(&["show", "mac", "address-table", "count"]);
    assert!(
        t.contains("Total Mac Addresses: 1 (0 dynamic, 1 static)"),
        "{t}"
    );
    let t = text(&["show", "counters"]);
    assert!(t.contains("RX frames") && t.contains("sw3"), "{t}");
    let bad = sw
        .cli(&["show", "mac", "address-table", "vlan", "5000"])
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("bad VLAN id"));
    let status = sw.stop().expect("stop");
    assert!(status.success(), "exit status {status}: {}", sw.log());
    assert!(!sw.socket().exists(), "API socket removed on shutdown");
}

/// A BPDU and an LACPDU entering a dot1q-tunnel port leave the far tunnel
/// port byte-identical (Lanyard runs no STP/LACP, so such frames are the
/// customer's payload inside the S-VLAN), and never leak to another VLAN.
#[test]
fn l2_protocol_frames_cross_the_tunnel_intact() {
    require_root!();
    let bed = TestBed::new("l2pt", 3, 1500).expect("namespaces");
    let yaml = "vlans:\n  - id: 500\n  - id: 600\nports:\n\
                \x20 - name: sw1\n    mode: dot1q-tunnel\n    vlan: 500\n\
                \x20 - name: sw2\n    mode: dot1q-tunnel\n    vlan: 500\n\
                \x20 - name: sw3\n    mode: dot1q-tunnel\n    vlan: 600\n";
    let _sw = Switch::start(&lanyard(), &bed.dut, yaml, &["sw1", "sw2", "sw3"]).expect("start");
    let ports = bed.open_all().expect("sockets");
    let stp = parse_mac("01:80:c2:00:00:00").unwrap();
    let slow = parse_mac("01:80:c2:00:00:02").unwrap();
    // 802.3 frame with LLC 42-42-03 (STP config BPDU), and a slow-protocols
    // LACPDU (EtherType 0x8809, subtype 1).
    let mut bpdu = Vec::new();
    bpdu.extend_from_slice(&stp);
    bpdu.extend_from_slice(&mac(1));
    bpdu.extend_from_slice(&[0x00, 0x26, 0x42, 0x42, 0x03, 0, 0, 0, 0]);
    bpdu.resize(60, 0);
    let mut lacp = Vec::new();
    lacp.extend_from_slice(&slow);
    lacp.extend_from_slice(&mac(1));
    lacp.extend_from_slice(&[0x88, 0x09, 0x01, 0x01]);
    lacp.resize(124, 0);
    for f in [&bpdu, &lacp] {
        ports[1].drain();
        ports[2].drain();
        ports[0].send(f).unwrap();
        let mut got = None;
        while let Some(g) = ports[1].recv_timeout(Duration::from_secs(2)).unwrap() {
            if g[0..6] == f[0..6] {
                got = Some(g);
                break;
            }
        }
        assert_eq!(got.as_deref(), Some(&f[..]), "frame to {:02x?}", &f[0..6]);
        let leak = ports[2].recv_timeout(Duration::from_millis(300)).unwrap();
        assert!(
            leak.is_none_or(|g| g[0..6] != f[0..6]),
            "leaked into VLAN 600"
        );
    }
}

/// With two workers, ports 1 and 2 are received by different workers: a
/// frame crosses from one worker's port to the other's, both ways, and a
/// learned address is used by the worker that did not learn it.
#[test]
fn two_workers_forward_across_each_other() {
    require_root!();
    let bed = TestBed::new("wk2", 2, 1500).expect("namespaces");
    let yaml = "switch:\n  workers: 2\nvlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    vlan: 10\n\
                \x20 - name: sw2\n    vlan: 10\n";
    let sw = Switch::start(&lanyard(), &bed.dut, yaml, &["sw1", "sw2"]).expect("start");
    let ports = bed.open_all().expect("sockets");
    let (a, b) = (mac(0xa), mac(0xb));
    let recv_from = |p: &testkit::RawPort, src: &[u8; 6]| loop {
        match p.recv_timeout(Duration::from_secs(2)).unwrap() {
            Some(g) if g[6..12] == src[..] => return Some(g),
            Some(_) => continue,
            None => return None,
        }
    };
    // Broadcast each way: learns A on sw1 (worker 0) and B on sw2 (worker 1).
    ports[0]
        .send(&testkit::frame::test_frame(
            &testkit::frame::BROADCAST,
            &a,
            &[],
            1,
            1,
            64,
        ))
        .unwrap();
    assert!(recv_from(&ports[1], &a).is_some(), "sw1 -> sw2");
    ports[1]
        .send(&testkit::frame::test_frame(
            &testkit::frame::BROADCAST,
            &b,
            &[],
            1,
            2,
            64,
        ))
        .unwrap();
    assert!(recv_from(&ports[0], &b).is_some(), "sw2 -> sw1");
    assert_eq!(sw.wait_mac_count(Some(10), 2, Duration::from_secs(5)), 2);
    // Unicast both ways, decided by the other worker's lookups.
    ports[0]
        .send(&testkit::frame::test_frame(&b, &a, &[], 1, 3, 64))
        .unwrap();
    assert!(recv_from(&ports[1], &a).is_some(), "unicast sw1 -> sw2");
    ports[1]
        .send(&testkit::frame::test_frame(&a, &b, &[], 1, 4, 64))
        .unwrap();
    assert!(recv_from(&ports[0], &b).is_some(), "unicast sw2 -> sw1");
    let c = sw.counters();
    assert_eq!(testkit::switch::port_counter(&c, "sw1", "rx_flooded"), 1);
    assert_eq!(testkit::switch::port_counter(&c, "sw1", "tx_frames"), 2);
}
