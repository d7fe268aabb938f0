//! Virtual-switch state sync beyond MAC addresses (issue 19, item 3):
//! ARP neighbours of the SVIs and IGMP snooping memberships cross the
//! peer link, and a node killed and restarted gets them back in the full
//! copy. Two Lanyards in namespaces, a static multichassis channel with
//! one member on each node, no Open vSwitch. Needs root.
//!
//! * A host behind dist-a's own port resolves dist-a's SVI address:
//!   dist-b holds the neighbour without sending ARP, and routes a host of
//!   its other VLAN to it (the host never sees an ARP request from
//!   dist-b).
//! * An IGMP join heard only by dist-a on the channel makes dist-b
//!   deliver the group to the channel by its own member.
//! * `kill -9` of dist-b and a restart: both come back in the full copy.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use testkit::frame::mac;
use testkit::netns::veth;
use testkit::{igmp, ip, l2, require_root, Netns, RawPort, Switch};

const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);

fn config(name: &str, prio: u16, src: &str, peer: &str, svi: &str, b_side: bool) -> String {
    let (vlan20, ports) = if b_side {
        (
            "  - id: 20\n    router:\n      addresses: [10.0.20.1/24]\n",
            "  - {name: r, vlan: 20}\n  - {name: s, vlan: 10}\n",
        )
    } else {
        ("", "  - {name: h, vlan: 10}\n")
    };
    format!(
        "switch:
  name: {name}
vlans:
  - id: 10
    router:
      addresses: [{svi}/24]
{vlan20}ports:
  - {{name: pl, mode: trunk}}
  - {{name: m1, vlan: 10}}
{ports}port-channels:
  - {{name: po1, members: [m1], lacp: static}}
multicast:
  igmp-snooping:
    vlans: [10]
virtual-switch:
  domain-id: 9
  priority: {prio}
  system-mac: 02:00:00:00:09:00
  peer-link: [pl]
  delay-restore-s: 0
  keepalive: {{source: {src}, peer: {peer}, interval-ms: 100, timeout-ms: 500}}
  channels: [{{port-channel: po1, id: 1}}]
"
    )
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    t0.elapsed()
}

fn has_neighbor(sw: &Switch, ip: &str, mac: &str) -> bool {
    sw.try_show_json(&["show", "arp"]).is_ok_and(|v| {
        v.as_array()
            .or_else(|| v["rows"].as_array())
            .into_iter()
            .flatten()
            .any(|r| {
                r["address"] == ip
                    && r["mac"]
                        .as_str()
                        .is_some_and(|m| m.eq_ignore_ascii_case(mac))
            })
    })
}

fn has_peer_group(sw: &Switch, port: &str) -> bool {
    sw.try_show_json(&["show", "ip", "igmp", "snooping", "groups"])
        .is_ok_and(|v| {
            v["groups"].as_array().into_iter().flatten().any(|g| {
                g["group"] == GROUP.to_string()
                    && g["ports"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|p| p["port"] == port && p["mode"] == "peer")
            })
        })
}

/// Frames `port` receives until quiet: (UDP to the group, ICMP echo
/// requests from `from`, ARP requests from `arp_from`).
fn count(port: &RawPort, from: IpAddr, arp_from: [u8; 4]) -> (u64, u64, u64) {
    let (mut group, mut echo, mut arp) = (0, 0, 0);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        let Some(f) = port.recv_timeout(Duration::from_millis(500)).unwrap() else {
            break;
        };
        if f.len() >= 42
            && f[12..14] == [0x08, 0x06]
            && f[20..22] == [0, 1]
            && f[28..32] == arp_from
        {
            arp += 1;
        }
        if let Some(p) = ip::parse(&f) {
            if p.dst == IpAddr::V4(GROUP) && p.proto == 17 {
                group += 1;
            }
            if p.src == from && p.proto == 1 && p.packet.get(20) == Some(&8) {
                echo += 1;
            }
        }
    }
    (group, echo, arp)
}

#[test]
fn neighbors_and_snooping_groups_cross_the_peer_link() {
    require_root!();
    let _g = l2::heavy();
    let nt = Netns::new("lyssT").unwrap();
    let na = Netns::new("lyssA").unwrap();
    let nb = Netns::new("lyssB").unwrap();
    let nh = Netns::new("lyssH").unwrap();
    let nr = Netns::new("lyssR").unwrap();
    veth(&na, "pl", &nb, "pl", 1500).unwrap();
    veth(&na, "ka", &nb, "ka", 1500).unwrap();
    na.exec(&["ip", "addr", "add", "192.0.2.1/30", "dev", "ka"])
        .unwrap();
    nb.exec(&["ip", "addr", "add", "192.0.2.2/30", "dev", "ka"])
        .unwrap();
    veth(&na, "m1", &nt, "xa", 1500).unwrap();
    veth(&nb, "m1", &nt, "xb", 1500).unwrap();
    veth(&nb, "s", &nt, "ts", 1500).unwrap();
    veth(&na, "h", &nh, "eth0", 1500).unwrap();
    veth(&nb, "r", &nr, "eth0", 1500).unwrap();
    nh.exec(&["ip", "addr", "add", "10.0.10.10/24", "dev", "eth0"])
        .unwrap();
    nr.exec(&["ip", "addr", "add", "10.0.20.10/24", "dev", "eth0"])
        .unwrap();
    nr.exec(&["ip", "route", "add", "default", "via", "10.0.20.1"])
        .unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let cfg_a = config("dist-a", 100, "192.0.2.1", "192.0.2.2", "10.0.10.1", false);
    let cfg_b = config("dist-b", 200, "192.0.2.2", "192.0.2.1", "10.0.10.2", true);
    let a = Switch::start(&bin, &na, &cfg_a, &["pl", "m1", "h"]).unwrap();
    let ports_b = ["pl", "m1", "r", "s"];
    let mut b = Switch::start(&bin, &nb, &cfg_b, &ports_b).unwrap();
    let paired = |sw: &Switch| {
        sw.try_show_json(&["show", "virtual-switch"])
            .is_ok_and(|v| v["status"] == "paired")
    };
    wait_for("paired", 10, || paired(&a) && paired(&b));

    // H resolves dist-a's SVI address: dist-a's kernel learns H.
    let h_mac = String::from_utf8(
        nh.exec(&["cat", "/sys/class/net/eth0/address"])
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    nh.exec(&["ping", "-c", "1", "-W", "2", "10.0.10.1"])
        .unwrap();
    assert!(
        has_neighbor(&a, "10.0.10.10", &h_mac),
        "dist-a never resolved H"
    );
    let took = wait_for("H's neighbour on dist-b", 5, || {
        has_neighbor(&b, "10.0.10.10", &h_mac)
    });
    eprintln!("neighbour on dist-b {took:?} after dist-a had it");
    let kernel = String::from_utf8(
        nb.exec(&["ip", "neigh", "show", "10.0.10.10"])
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        kernel.contains("extern_learn") && kernel.contains("NOARP"),
        "dist-b's kernel: {kernel}"
    );

    // R (VLAN 20, behind dist-b only) pings H: dist-b routes to H's MAC
    // across the peer link without ARP.
    let cap = RawPort::open(nh.name(), "eth0").unwrap();
    let _ = nr.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "1", "10.0.10.10"]);
    let (_, echo, arp) = count(&cap, "10.0.20.10".parse().unwrap(), [10, 0, 10, 2]);
    assert!(
        echo >= 3,
        "H got {echo} of 3 echo requests routed by dist-b"
    );
    assert_eq!(arp, 0, "dist-b sent ARP for a neighbour the peer resolved");

    // An IGMP join heard only by dist-a, on the channel's member there.
    let xa = RawPort::open(nt.name(), "xa").unwrap();
    let xb = RawPort::open(nt.name(), "xb").unwrap();
    let ts = RawPort::open(nt.name(), "ts").unwrap();
    let host = mac(0x5151);
    xa.send(&igmp::igmpv2_report(
        &host,
        Ipv4Addr::new(10, 0, 10, 50),
        GROUP,
    ))
    .unwrap();
    let t0 = Instant::now();
    while !has_peer_group(&b, "po1") {
        if t0.elapsed() > Duration::from_secs(5) {
            panic!(
                "the join never reached dist-b: dist-a {:#}\n{:#}\ndist-b {:#}\n{:#}",
                a.show_json(&["show", "ip", "igmp", "snooping", "groups"]),
                a.show_json(&["show", "virtual-switch"]),
                b.show_json(&["show", "ip", "igmp", "snooping", "groups"]),
                b.show_json(&["show", "virtual-switch"])
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = t0.elapsed();
    eprintln!("membership on dist-b {took:?} after the join");
    let sb = b.show_json(&["show", "virtual-switch"]);
    assert_eq!(
        sb["peer_link"]["messages"]["groups"]["from_peer"], 1,
        "{sb:#}"
    );
    let igmp_b =
        b.show_json(&["show", "ip", "igmp", "snooping", "groups"])["messages"]["igmp"].clone();
    assert_eq!(igmp_b, 0, "dist-b must not have heard the join itself");

    // A source on dist-b's own port: dist-b delivers to the channel by
    // its member (xb), and the group is not flooded elsewhere.
    // Published to the data path within `PUBLISH_EVERY` (10 ms).
    std::thread::sleep(Duration::from_millis(100));
    let src = mac(0x5252);
    let n = 200;
    let send_group = |n: usize| {
        ts.send_paced(n, 2_000, |i, buf| {
            *buf = ip::udp(
                &igmp::group_mac(IpAddr::V4(GROUP)),
                &src,
                "10.0.10.60".parse().unwrap(),
                IpAddr::V4(GROUP),
                8,
                i as u64,
                128,
            )
        })
        .unwrap()
    };
    send_group(n);
    let (on_b, _, _) = count(&xb, "0.0.0.0".parse().unwrap(), [0; 4]);
    let (on_a, _, _) = count(&xa, "0.0.0.0".parse().unwrap(), [0; 4]);
    eprintln!("group frames: {on_b} by dist-b's member, {on_a} by dist-a's");
    assert_eq!(
        on_b,
        n as u64,
        "dist-b's member delivered {on_b} of {n}: {:#}",
        b.counters()
    );
    assert_eq!(on_a, 0, "dist-a delivered frames dist-b already delivered");

    // dist-b dies and comes back: the full copy brings both back.
    b.kill9().unwrap();
    drop(b);
    let t1 = Instant::now();
    let b = Switch::start(&bin, &nb, &cfg_b, &ports_b).unwrap();
    wait_for("paired again", 10, || paired(&a) && paired(&b));
    wait_for("H's neighbour after the restart", 5, || {
        has_neighbor(&b, "10.0.10.10", &h_mac)
    });
    wait_for("the membership after the restart", 5, || {
        has_peer_group(&b, "po1")
    });
    std::thread::sleep(Duration::from_millis(100));
    eprintln!(
        "dist-b restarted: neighbour and membership back {:?} after the start",
        t1.elapsed()
    );
    let sb = b.show_json(&["show", "virtual-switch"]);
    assert_eq!(sb["peer_link"]["messages"]["copy_mismatch"], 0, "{sb:#}");
    send_group(n);
    let (on_b, _, _) = count(&xb, "0.0.0.0".parse().unwrap(), [0; 4]);
    assert_eq!(
        on_b, n as u64,
        "after the restart dist-b's member delivered {on_b} of {n}"
    );
    let _ = nr.exec(&["ping", "-c", "2", "-i", "0.2", "-W", "1", "10.0.10.10"]);
    let (_, echo, arp) = count(&cap, "10.0.20.10".parse().unwrap(), [10, 0, 10, 2]);
    assert!(
        echo >= 2,
        "after the restart H got {echo} of 2 echo requests"
    );
    assert_eq!(arp, 0, "the restarted dist-b sent ARP for H");
    drop(a);
}
