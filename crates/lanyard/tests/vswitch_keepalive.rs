//! Virtual-switch pair (issue 19): two Lanyards in their own namespaces
//! with a keepalive over a separate veth (kernel addresses, not switch
//! ports). With the peer link cut and the keepalive alive, both report
//! dual-active: the secondary holds its multichassis members down, the
//! primary keeps them; malformed keepalives are counted and dropped;
//! after kill -9 of the primary the secondary is alone, primary, and its
//! members are up. `show virtual-switch` answers on both nodes.

use std::time::{Duration, Instant};

use testkit::netns::in_netns;
use testkit::{l2, require_root, vswitch, Switch, TestBed};

fn config(name: &str, node: usize) -> String {
    format!(
        "switch:
  name: {name}
vlans:
  - id: 10
ports:
  - {{name: sw1, mode: trunk}}
  - {{name: sw2, vlan: 10}}
port-channels:
  - {{name: po1, members: [sw2], lacp: static}}
{}",
        vswitch::section(7, node, &["sw1"], 0, true, "")
    )
}

fn vs(sw: &Switch) -> serde_json::Value {
    sw.try_show_json(&["show", "virtual-switch"])
        .expect("show virtual-switch")
}

fn wait(sw: &Switch, what: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let v = vs(sw);
        if what(&v) {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out: {v:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn dual_active_and_node_loss_over_the_keepalive() {
    require_root!();
    let _g = l2::heavy();
    let a = TestBed::new("lyvsa", 2, 1500).expect("namespaces");
    let b = TestBed::new("lyvsb", 2, 1500).expect("namespaces");
    // The peer link is the beds' sw1 pair; only the keepalive link here.
    vswitch::link_nodes(&a.dut, &b.dut, &[]).expect("keepalive veth");
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let mut sa =
        Switch::start(&bin, &a.dut, &config("dist-a", 0), &["sw1", "sw2"]).expect("start node a");
    let sb =
        Switch::start(&bin, &b.dut, &config("dist-b", 1), &["sw1", "sw2"]).expect("start node b");

    let vb = wait(&sb, |v| v["status"] == "dual-active");
    assert_eq!(vb["role"], "secondary", "{vb:#}");
    assert_eq!(vb["multichassis_members"], "down: dual-active, secondary");
    assert_eq!(vb["channels"][0]["served_by"], "peer");
    assert_eq!(vb["peer"]["role"], "primary");
    assert_eq!(vb["system_mac"], "02:00:00:00:07:00");
    let va = wait(&sa, |v| v["status"] == "dual-active");
    assert_eq!(va["role"], "primary", "{va:#}");
    assert_eq!(va["multichassis_members"], "up");
    assert_eq!(va["channels"][0]["served_by"], "this node");
    assert!(va["dual_active_events"].as_u64().unwrap() >= 1);
    let text = String::from_utf8(sb.cli(&["show", "virtual-switch"]).unwrap().stdout).unwrap();
    assert!(
        text.contains("Virtual-switch domain 7, status dual-active"),
        "{text}"
    );
    assert!(text.contains("dist-b: secondary"), "{text}");

    // Malformed keepalives from the peer's address: counted, dropped.
    in_netns(a.dut.name(), || {
        let s = std::net::UdpSocket::bind("192.0.2.1:0").unwrap();
        for _ in 0..3 {
            s.send_to(b"LV\x09garbage", "192.0.2.2:3784").unwrap();
        }
    })
    .unwrap();
    let vb = wait(&sb, |v| v["keepalive"]["rx_bad"]["bad_version"] == 3);
    assert_eq!(vb["status"], "dual-active");

    // The primary dies without warning: the secondary is alone.
    sa.kill9().expect("kill -9 node a");
    let t0 = Instant::now();
    let vb = wait(&sb, |v| v["status"] == "peer-down");
    let took = t0.elapsed();
    assert_eq!(vb["role"], "primary", "{vb:#}");
    assert_eq!(vb["multichassis_members"], "up");
    assert_eq!(vb["channels"][0]["served_by"], "this node");
    assert_eq!(vb["keepalive"]["state"], "down");
    eprintln!(
        "peer loss detected after {} ms (timeout 500 ms)",
        took.as_millis()
    );
}
