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

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use testkit::frame::{mac, Mac};
use testkit::netns::veth;
use testkit::{igmp, ip, l2, require_root, vswitch, Netns, RawPort, Switch};

const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);

fn config(name: &str, node: usize, svi: &str) -> String {
    let b_side = node == 1;
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
{}",
        vswitch::section(9, node, &["pl"], 0, true, "")
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
    vswitch::link_nodes(&na, &nb, &["pl"]).unwrap();
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
    let cfg_a = config("dist-a", 0, "10.0.10.1");
    let cfg_b = config("dist-b", 1, "10.0.10.2");
    let a = Switch::start(&bin, &na, &cfg_a, &["pl", "m1", "h"]).unwrap();
    let ports_b = ["pl", "m1", "r", "s"];
    let mut b = Switch::start(&bin, &nb, &cfg_b, &ports_b).unwrap();
    vswitch::wait_paired(&[&a, &b], 10);

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
    // `show virtual-switch` is republished every 100 ms, after the
    // snooping table that `has_peer_group` reads.
    wait_for("the pair's view to count the peer's group", 2, || {
        b.show_json(&["show", "virtual-switch"])["peer_link"]["messages"]["groups"]["from_peer"]
            == 1
    });
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
    vswitch::wait_paired(&[&a, &b], 10);
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

fn gw_config(name: &str, node: usize) -> String {
    let r = if node == 1 {
        "  - {name: r, vlan: 30}\n"
    } else {
        ""
    };
    format!(
        "switch:
  name: {name}
vlans:
  - id: 20
    router:
      addresses: [10.0.20.1/24]
  - id: 30
    router:
      addresses: [10.0.30.1/24]
ports:
  - {{name: pl, mode: trunk}}
  - {{name: m1, vlan: 20}}
{r}port-channels:
  - {{name: po1, members: [m1], lacp: static}}
{}",
        vswitch::section(11, node, &["pl"], 0, true, "  gateways: [20, 30]\n")
    )
}

fn forwarded(sw: &Switch) -> u64 {
    sw.counters()["l3"]["forwarded"].as_u64().unwrap_or(0)
}

/// An ARP request from `port` for `target`: the reply's sender MAC.
fn arp_reply(port: &RawPort, host: [u8; 6], host_ip: [u8; 4], target: [u8; 4]) -> Option<[u8; 6]> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&host);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&host);
    f.extend_from_slice(&host_ip);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target);
    f.resize(60, 0);
    port.send(&f).unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        let Some(r) = port.recv_timeout(Duration::from_millis(200)).unwrap() else {
            continue;
        };
        if r.len() >= 42 && r[12..14] == [0x08, 0x06] && r[20..22] == [0, 2] && r[28..32] == target
        {
            return r[22..28].try_into().ok();
        }
    }
    None
}

/// Issue 19 item 4: VLANs 20 and 30 have the same SVI addresses on both
/// nodes and the pair's system MAC. A host behind the channel (frames sent
/// by hand on either node's member, as the partner's hash would) gets
/// ARP answers from both nodes with that MAC, and each node routes what
/// reaches it to a host behind dist-b's own port in VLAN 30: counters on
/// both nodes, every packet delivered once.
#[test]
fn one_gateway_on_both_nodes() {
    require_root!();
    let _g = l2::heavy();
    let nt = Netns::new("lygwT").unwrap();
    let na = Netns::new("lygwA").unwrap();
    let nb = Netns::new("lygwB").unwrap();
    let nr = Netns::new("lygwR").unwrap();
    vswitch::link_nodes(&na, &nb, &["pl"]).unwrap();
    veth(&na, "m1", &nt, "xa", 1500).unwrap();
    veth(&nb, "m1", &nt, "xb", 1500).unwrap();
    veth(&nb, "r", &nr, "eth0", 1500).unwrap();
    nr.exec(&["ip", "addr", "add", "10.0.30.10/24", "dev", "eth0"])
        .unwrap();
    nr.exec(&["ip", "route", "add", "default", "via", "10.0.30.1"])
        .unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let a = Switch::start(&bin, &na, &gw_config("gw-a", 0), &["pl", "m1"]).unwrap();
    let b = Switch::start(&bin, &nb, &gw_config("gw-b", 1), &["pl", "m1", "r"]).unwrap();
    vswitch::wait_paired(&[&a, &b], 10);
    let system = [2, 0, 0, 0, 0x0b, 0];

    let xa = RawPort::open(nt.name(), "xa").unwrap();
    let xb = RawPort::open(nt.name(), "xb").unwrap();
    let host = mac(0x2020);
    let host_ip = [10, 0, 20, 20];
    // Both nodes answer for the gateway with the pair's MAC.
    assert_eq!(
        arp_reply(&xa, host, host_ip, [10, 0, 20, 1]),
        Some(system),
        "dist-a's answer"
    );
    assert_eq!(
        arp_reply(&xb, host, host_ip, [10, 0, 20, 1]),
        Some(system),
        "dist-b's answer"
    );

    let cap = RawPort::open(nr.name(), "eth0").unwrap();
    let pkt = |i: u64| {
        ip::udp(
            &system,
            &host,
            "10.0.20.20".parse().unwrap(),
            "10.0.30.10".parse().unwrap(),
            64,
            i,
            128,
        )
    };
    // First packets: each node resolves R (dist-a through the reply
    // dist-b takes unsolicited and synchronises).
    xa.send(&pkt(0)).unwrap();
    xb.send(&pkt(1)).unwrap();
    wait_for("R resolved on both nodes", 5, || {
        let mac_r = String::from_utf8(
            nr.exec(&["cat", "/sys/class/net/eth0/address"])
                .unwrap()
                .stdout,
        )
        .unwrap();
        has_neighbor(&a, "10.0.30.10", mac_r.trim()) && has_neighbor(&b, "10.0.30.10", mac_r.trim())
    });
    std::thread::sleep(Duration::from_millis(300));
    while cap
        .recv_timeout(Duration::from_millis(100))
        .unwrap()
        .is_some()
    {}
    let (fa, fb) = (forwarded(&a), forwarded(&b));
    let n = 500u64;
    xa.send_paced(n as usize, 5_000, |i, buf| *buf = pkt(1000 + i as u64))
        .unwrap();
    xb.send_paced(n as usize, 5_000, |i, buf| *buf = pkt(2000 + i as u64))
        .unwrap();
    let mut seen = std::collections::HashMap::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        let Some(f) = cap.recv_timeout(Duration::from_millis(500)).unwrap() else {
            break;
        };
        if let Some(p) = ip::parse(&f) {
            if let (Some(seq), 63) = (p.seq, p.ttl) {
                *seen.entry(seq).or_insert(0u32) += 1;
            }
        }
    }
    let (da, db) = (forwarded(&a) - fa, forwarded(&b) - fb);
    eprintln!(
        "routed: dist-a {da}, dist-b {db}; R received {} distinct",
        seen.len()
    );
    assert_eq!(
        seen.len() as u64,
        2 * n,
        "R received {} of {}",
        seen.len(),
        2 * n
    );
    assert!(seen.values().all(|c| *c == 1), "duplicates at R");
    assert!(da >= n, "dist-a routed {da} of the {n} that reached it");
    assert!(db >= n, "dist-b routed {db} of the {n} that reached it");
    let ip_a = a.show_json(&["show", "ip", "interface"]);
    assert!(ip_a.to_string().contains("02:00:00:00:0b:00"), "{ip_a:#}");
}

/// A peer link of two ports: one carries data (a broadcast crosses once,
/// no loop between the nodes); cutting it keeps the pair paired and data
/// moves to the other port.
#[test]
fn two_port_peer_link_survives_a_cut() {
    require_root!();
    let _g = l2::heavy();
    let nt = Netns::new("lyplT").unwrap();
    let na = Netns::new("lyplA").unwrap();
    let nb = Netns::new("lyplB").unwrap();
    vswitch::link_nodes(&na, &nb, &["pl1", "pl2"]).unwrap();
    veth(&na, "h", &nt, "ta", 1500).unwrap();
    veth(&nb, "h", &nt, "tb", 1500).unwrap();
    let cfg = |name: &str, node: usize| {
        format!(
            "switch:
  name: {name}
vlans:
  - id: 10
ports:
  - {{name: pl1, mode: trunk}}
  - {{name: pl2, mode: trunk}}
  - {{name: h, vlan: 10}}
{}",
            vswitch::section(13, node, &["pl1", "pl2"], 0, false, "")
        )
    };
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let ports = ["pl1", "pl2", "h"];
    let a = Switch::start(&bin, &na, &cfg("pl-a", 0), &ports).unwrap();
    let b = Switch::start(&bin, &nb, &cfg("pl-b", 1), &ports).unwrap();
    vswitch::wait_paired(&[&a, &b], 10);
    let ta = RawPort::open(nt.name(), "ta").unwrap();
    let tb = RawPort::open(nt.name(), "tb").unwrap();
    let (ha, hb) = (mac(0xa2), mac(0xb2));
    let burst = |n: usize, dst: &Mac, first: u64| {
        ta.send_paced(n, 2_000, |i, buf| {
            *buf = ip::udp(
                dst,
                &ha,
                "10.0.10.1".parse().unwrap(),
                "10.0.10.2".parse().unwrap(),
                64,
                first + i as u64,
                100,
            )
        })
        .unwrap();
        let mut seen: HashMap<u64, u32> = HashMap::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            let Some(f) = tb.recv_timeout(Duration::from_millis(500)).unwrap() else {
                break;
            };
            if let Some(s) = ip::parse(&f).and_then(|p| p.seq) {
                *seen.entry(s).or_insert(0) += 1;
            }
        }
        seen
    };
    // Broadcasts: once each, never twice (two ports), never looping.
    let got = burst(200, &[0xff; 6], 0);
    assert_eq!(
        got.len(),
        200,
        "{} of 200 broadcasts: a {:#} b {:#}",
        got.len(),
        a.counters()["ports"],
        b.counters()["ports"]
    );
    assert!(got.values().all(|c| *c == 1), "a broadcast crossed twice");
    // Cut the port that carries data: still paired, data on the other.
    tb.send(&testkit::frame::test_frame(&[0xff; 6], &hb, &[], 1, 0, 64))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // (A start may count one dual-active event: keepalive before hello.)
    let events = b.show_json(&["show", "virtual-switch"])["dual_active_events"].clone();
    na.exec(&["ip", "link", "set", "pl1", "down"]).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        vswitch::is_paired(&a) && vswitch::is_paired(&b),
        "{:#}",
        b.show_json(&["show", "virtual-switch"])
    );
    let got = burst(200, &hb, 1000);
    assert_eq!(got.len(), 200, "{} of 200 after the cut", got.len());
    assert!(got.values().all(|c| *c == 1), "duplicates after the cut");
    let got = burst(200, &[0xff; 6], 2000);
    assert_eq!(
        got.len(),
        200,
        "{} of 200 broadcasts after the cut",
        got.len()
    );
    assert!(got.values().all(|c| *c == 1));
    let vb = b.show_json(&["show", "virtual-switch"]);
    assert_eq!(
        vb["dual_active_events"], events,
        "the cut split the pair: {vb:#}"
    );
}

/// Group frames `port` receives until quiet, by source address.
fn group_by_source(port: &RawPort) -> HashMap<IpAddr, u64> {
    let mut seen = HashMap::new();
    while let Some(f) = port.recv_timeout(Duration::from_millis(500)).unwrap() {
        if let Some(p) = ip::parse(&f).filter(|p| p.dst == IpAddr::V4(GROUP) && p.proto == 17) {
            *seen.entry(p.src).or_insert(0) += 1;
        }
    }
    seen
}

#[test]
fn source_filters_cross_the_peer_link() {
    require_root!();
    let _g = l2::heavy();
    let nt = Netns::new("lysfT").unwrap();
    let na = Netns::new("lysfA").unwrap();
    let nb = Netns::new("lysfB").unwrap();
    vswitch::link_nodes(&na, &nb, &["pl"]).unwrap();
    veth(&na, "m1", &nt, "xa", 1500).unwrap();
    veth(&nb, "m1", &nt, "xb", 1500).unwrap();
    veth(&nb, "s", &nt, "ts", 1500).unwrap();
    veth(&na, "h", &nt, "th", 1500).unwrap();
    veth(&nb, "r", &nt, "tr", 1500).unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let a = Switch::start(
        &bin,
        &na,
        &config("sf-a", 0, "10.0.10.1"),
        &["pl", "m1", "h"],
    )
    .unwrap();
    let b = Switch::start(
        &bin,
        &nb,
        &config("sf-b", 1, "10.0.10.2"),
        &["pl", "m1", "r", "s"],
    )
    .unwrap();
    vswitch::wait_paired(&[&a, &b], 10);
    let (xa, xb, ts) = (
        RawPort::open(nt.name(), "xa").unwrap(),
        RawPort::open(nt.name(), "xb").unwrap(),
        RawPort::open(nt.name(), "ts").unwrap(),
    );
    let (s1, s2) = (Ipv4Addr::new(10, 0, 10, 61), Ipv4Addr::new(10, 0, 10, 62));
    // A host behind the channel wants the group from S1 only (IGMPv3
    // MODE_IS_INCLUDE {S1}), heard by dist-a alone.
    xa.send(&igmp::igmpv3_report(
        &mac(0x5353),
        Ipv4Addr::new(10, 0, 10, 50),
        &[(1, GROUP, vec![s1])],
    ))
    .unwrap();
    let filter_on_b = || {
        b.try_show_json(&["show", "ip", "igmp", "snooping", "groups"])
            .is_ok_and(|v| {
                v["groups"].as_array().into_iter().flatten().any(|g| {
                    g["ports"].as_array().into_iter().flatten().any(|p| {
                        p["port"] == "po1"
                            && p["mode"] == "peer"
                            && p["filter"] == "include"
                            && p["sources"][0] == s1.to_string()
                    })
                })
            })
    };
    let took = wait_for("the peer's filter on dist-b", 5, filter_on_b);
    eprintln!("filter on dist-b {took:?} after the report");
    std::thread::sleep(Duration::from_millis(100));
    // Sources S1 and S2 on dist-b's own port: dist-b's member delivers
    // S1 only (before: both).
    let src = mac(0x5454);
    let n = 100usize;
    ts.send_paced(2 * n, 2_000, |i, buf| {
        let s = if i % 2 == 0 { s1 } else { s2 };
        *buf = ip::udp(
            &igmp::group_mac(IpAddr::V4(GROUP)),
            &src,
            IpAddr::V4(s),
            IpAddr::V4(GROUP),
            8,
            i as u64,
            128,
        )
    })
    .unwrap();
    let on_b = group_by_source(&xb);
    let on_a = group_by_source(&xa);
    eprintln!("by dist-b's member {on_b:?}, by dist-a's {on_a:?}");
    assert_eq!(
        on_b.get(&IpAddr::V4(s1)).copied(),
        Some(n as u64),
        "{on_b:?}"
    );
    assert_eq!(
        on_b.get(&IpAddr::V4(s2)),
        None,
        "S2 was not asked for: {on_b:?}"
    );
    assert!(on_a.is_empty(), "dist-a delivered: {on_a:?}");
}

fn gw6_config(name: &str, node: usize) -> String {
    let r = if node == 1 {
        "  - {name: r, vlan: 30}\n"
    } else {
        ""
    };
    format!(
        "switch:
  name: {name}
vlans:
  - id: 20
    router:
      addresses: [2001:db8:20::1/64]
  - id: 30
    router:
      addresses: [2001:db8:30::1/64]
ports:
  - {{name: pl, mode: trunk}}
  - {{name: m1, vlan: 20}}
{r}port-channels:
  - {{name: po1, members: [m1], lacp: static}}
{}",
        vswitch::section(16, node, &["pl"], 0, true, "  gateways: [20, 30]\n")
    )
}

fn has_neighbor6(sw: &Switch, ip: &str, mac: &str) -> bool {
    sw.try_show_json(&["show", "ipv6", "neighbors"])
        .is_ok_and(|v| {
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

/// A neighbour solicitation from `port` (host `host` at `host_ip`) for
/// `target`: the answering advertisement's (Ethernet source, target
/// link-layer address option, router flag).
fn nd_answer(
    port: &RawPort,
    host: [u8; 6],
    host_ip: std::net::Ipv6Addr,
    target: std::net::Ipv6Addr,
) -> Option<([u8; 6], [u8; 6], bool)> {
    let t = target.octets();
    let group: std::net::Ipv6Addr = [
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | t[13] as u16,
        u16::from_be_bytes([t[14], t[15]]),
    ]
    .into();
    // ICMPv6 NS with a source link-layer address option.
    let mut icmp = vec![135, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&t);
    icmp.extend_from_slice(&[1, 1]);
    icmp.extend_from_slice(&host);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&host_ip.octets());
    pseudo.extend_from_slice(&group.octets());
    pseudo.extend_from_slice(&(icmp.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    pseudo.extend_from_slice(&icmp);
    let c = ip::checksum(&pseudo);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![0x33, 0x33, 0xff, t[13], t[14], t[15]];
    f.extend_from_slice(&host);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    f.extend_from_slice(&[58, 255]);
    f.extend_from_slice(&host_ip.octets());
    f.extend_from_slice(&group.octets());
    f.extend_from_slice(&icmp);
    port.drain();
    port.send(&f).unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        let Some(r) = port.recv_timeout(Duration::from_millis(200)).unwrap() else {
            continue;
        };
        let Some(p) = ip::parse(&r) else { continue };
        let icmp = &p.packet[40..];
        // An NA for the target, checksum verified by `parse`.
        if p.proto == 58 && p.l4_ok && icmp.len() >= 24 && icmp[0] == 136 && icmp[8..24] == t {
            let tlla = icmp[24..]
                .chunks(8)
                .find(|o| o.len() == 8 && o[0] == 2 && o[1] == 1)
                .map(|o| <[u8; 6]>::try_from(&o[2..8]).unwrap())?;
            return Some((p.src_mac, tlla, icmp[4] & 0x80 != 0));
        }
    }
    None
}

/// Issue 19 item 4 with IPv6: VLANs 20 and 30 have the same SVI addresses
/// on both nodes and the pair's system MAC. A host behind the channel
/// (frames put on either node's member by hand, as a partner's hash
/// would) solicits the gateway and gets an advertisement from each node
/// with the system MAC (router flag set); each node routes what reaches
/// it to R behind dist-b's own port in VLAN 30 (dist-a resolves R through
/// R's advertisement that dist-b takes unsolicited and synchronises):
/// counters on both nodes, hop limit decremented, every packet once.
#[test]
fn one_ipv6_gateway_on_both_nodes() {
    require_root!();
    let _g = l2::heavy();
    let nt = Netns::new("lyg6T").unwrap();
    let na = Netns::new("lyg6A").unwrap();
    let nb = Netns::new("lyg6B").unwrap();
    let nr = Netns::new("lyg6R").unwrap();
    vswitch::link_nodes(&na, &nb, &["pl"]).unwrap();
    veth(&na, "m1", &nt, "xa", 1500).unwrap();
    veth(&nb, "m1", &nt, "xb", 1500).unwrap();
    veth(&nb, "r", &nr, "eth0", 1500).unwrap();
    nr.exec(&["sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=0"])
        .unwrap();
    nr.exec(&[
        "ip",
        "addr",
        "add",
        "2001:db8:30::10/64",
        "dev",
        "eth0",
        "nodad",
    ])
    .unwrap();
    nr.exec(&[
        "ip",
        "-6",
        "route",
        "add",
        "default",
        "via",
        "2001:db8:30::1",
    ])
    .unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let a = Switch::start(&bin, &na, &gw6_config("g6-a", 0), &["pl", "m1"]).unwrap();
    let b = Switch::start(&bin, &nb, &gw6_config("g6-b", 1), &["pl", "m1", "r"]).unwrap();
    vswitch::wait_paired(&[&a, &b], 10);
    let system = [2, 0, 0, 0, 0x10, 0];

    let xa = RawPort::open(nt.name(), "xa").unwrap();
    let xb = RawPort::open(nt.name(), "xb").unwrap();
    let host = mac(0x2066);
    let host_ip: std::net::Ipv6Addr = "2001:db8:20::20".parse().unwrap();
    let gw: std::net::Ipv6Addr = "2001:db8:20::1".parse().unwrap();
    // Both nodes answer ND for the gateway with the pair's MAC, as a router.
    for (p, who) in [(&xa, "dist-a"), (&xb, "dist-b")] {
        let mut answer = None;
        // The TAP's address may still be settling right after the start.
        let t0 = Instant::now();
        while answer.is_none() && t0.elapsed() < Duration::from_secs(5) {
            answer = nd_answer(p, host, host_ip, gw);
        }
        assert_eq!(answer, Some((system, system, true)), "{who}'s answer");
    }

    let cap = RawPort::open(nr.name(), "eth0").unwrap();
    let pkt = |i: u64| {
        ip::udp(
            &system,
            &host,
            host_ip.into(),
            "2001:db8:30::10".parse().unwrap(),
            64,
            i,
            128,
        )
    };
    // First packets: each node resolves R (dist-a through R's answer,
    // which reaches dist-b, taken unsolicited and synchronised).
    let mac_r = String::from_utf8(
        nr.exec(&["cat", "/sys/class/net/eth0/address"])
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    let t0 = Instant::now();
    let mut i = 0;
    while !(has_neighbor6(&a, "2001:db8:30::10", &mac_r)
        && has_neighbor6(&b, "2001:db8:30::10", &mac_r))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "R not resolved on both nodes: dist-a {:#}, dist-b {:#}",
            a.show_json(&["show", "ipv6", "neighbors"]),
            b.show_json(&["show", "ipv6", "neighbors"])
        );
        xa.send(&pkt(i)).unwrap();
        xb.send(&pkt(i + 1)).unwrap();
        i += 2;
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "R resolved on both nodes {:?} after the first packets",
        t0.elapsed()
    );
    std::thread::sleep(Duration::from_millis(300));
    cap.drain();
    let (fa, fb) = (forwarded(&a), forwarded(&b));
    let n = 500u64;
    xa.send_paced(n as usize, 5_000, |i, buf| *buf = pkt(1000 + i as u64))
        .unwrap();
    xb.send_paced(n as usize, 5_000, |i, buf| *buf = pkt(2000 + i as u64))
        .unwrap();
    let mut seen = std::collections::HashMap::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        let Some(f) = cap.recv_timeout(Duration::from_millis(500)).unwrap() else {
            break;
        };
        if let Some(p) = ip::parse(&f) {
            if let (Some(seq), 63, true) = (p.seq, p.ttl, p.l4_ok) {
                *seen.entry(seq).or_insert(0u32) += 1;
            }
        }
    }
    let (da, db) = (forwarded(&a) - fa, forwarded(&b) - fb);
    eprintln!(
        "routed: dist-a {da}, dist-b {db}; R received {} distinct",
        seen.len()
    );
    assert_eq!(
        seen.len() as u64,
        2 * n,
        "R received {} of {}",
        seen.len(),
        2 * n
    );
    assert!(seen.values().all(|c| *c == 1), "duplicates at R");
    assert!(da >= n, "dist-a routed {da} of the {n} that reached it");
    assert!(db >= n, "dist-b routed {db} of the {n} that reached it");
    // dist-a holds R from the peer: it never reached R itself.
    let vs = a.show_json(&["show", "virtual-switch"]);
    assert!(
        vs["peer_link"]["messages"]["neighbors"]["from_peer"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{vs:#}"
    );
}

/// Removes the VRF namespaces the switches created (they run in a mount
/// namespace of their own, so only the files are visible here).
struct VrfNsCleanup(Vec<String>);

impl Drop for VrfNsCleanup {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", n])
                .output();
            let _ = std::fs::remove_file(format!("/run/netns/{n}"));
        }
    }
}

fn vrf_config(name: &str, node: usize, svi: &str, netns: &str) -> String {
    let (vlan20, ports, ifs) = if node == 1 {
        (
            "  - id: 20\n    router:\n      addresses: [10.0.20.1/24]\n",
            "  - {name: r, vlan: 20}\n",
            "vlan10, vlan20",
        )
    } else {
        ("", "  - {name: h, vlan: 10}\n", "vlan10")
    };
    format!(
        "switch:
  name: {name}
vlans:
  - id: 10
    router:
      addresses: [{svi}/24]
{vlan20}vrfs:
  - {{name: red, interfaces: [{ifs}], rd: '65000:1', namespace: {netns}}}
ports:
  - {{name: pl, mode: trunk}}
{ports}{}",
        vswitch::section(17, node, &["pl"], 0, false, "")
    )
}

/// Neighbour sync beyond the default VRF: VLANs 10 and 20 are SVIs of
/// VRF `red` (TAP twins in the VRF's namespace). H, behind dist-a's own
/// port, resolves dist-a's SVI address; dist-b installs H in its VRF's
/// kernel and routes R (VLAN 20, behind dist-b only) to H without ARP.
/// Before, only the default VRF's SVIs were followed: dist-b asked for H
/// itself.
#[test]
fn neighbors_of_vrf_svis_cross_the_peer_link() {
    require_root!();
    let _g = l2::heavy();
    let na = Netns::new("lyvnA").unwrap();
    let nb = Netns::new("lyvnB").unwrap();
    let nh = Netns::new("lyvnH").unwrap();
    let nr = Netns::new("lyvnR").unwrap();
    let (vrf_a, vrf_b) = ("lyvnA-red", "lyvnB-red");
    let _vrf_ns = VrfNsCleanup(vec![vrf_a.into(), vrf_b.into()]);
    vswitch::link_nodes(&na, &nb, &["pl"]).unwrap();
    veth(&na, "h", &nh, "eth0", 1500).unwrap();
    veth(&nb, "r", &nr, "eth0", 1500).unwrap();
    for (ns, addr, gw) in [
        (&nh, "10.0.10.10/24", "10.0.10.1"),
        (&nr, "10.0.20.10/24", "10.0.20.1"),
    ] {
        ns.exec(&["ip", "addr", "add", addr, "dev", "eth0"])
            .unwrap();
        ns.exec(&["ip", "route", "add", "default", "via", gw])
            .unwrap();
    }
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let a = Switch::start(
        &bin,
        &na,
        &vrf_config("vn-a", 0, "10.0.10.1", vrf_a),
        &["pl", "h"],
    )
    .unwrap();
    let b = Switch::start(
        &bin,
        &nb,
        &vrf_config("vn-b", 1, "10.0.10.2", vrf_b),
        &["pl", "r"],
    )
    .unwrap();
    vswitch::wait_paired(&[&a, &b], 10);

    // H resolves dist-a's SVI address: dist-a's VRF kernel learns H, and
    // the entry reaches dist-b's VRF kernel.
    let out = nh
        .exec(&["ping", "-c", "1", "-W", "2", "10.0.10.1"])
        .unwrap();
    assert!(out.status.success(), "H cannot reach dist-a's SVI: {out:?}");
    let neighbors = |sw: &Switch| {
        sw.show_json(&["show", "virtual-switch"])["peer_link"]["messages"]["neighbors"].clone()
    };
    let took = wait_for("H's neighbour installed on dist-b", 5, || {
        neighbors(&b)["installed"].as_u64().unwrap_or(0) >= 1
    });
    eprintln!("installed on dist-b {took:?} after H's ping");
    // `show virtual-switch` is published every 100 ms: dist-a's view may
    // lag dist-b's install (CI saw all zeros right after it).
    wait_for("dist-a counts H as its own", 2, || {
        neighbors(&a)["local"].as_u64().unwrap_or(0) >= 1
    });
    let (na_, nb_) = (neighbors(&a), neighbors(&b));
    assert!(na_["tx"].as_u64().unwrap_or(0) >= 1, "dist-a: {na_:#}");
    assert_eq!(nb_["install_errors"], 0, "dist-b: {nb_:#}");
    assert_eq!(nb_["no_svi"], 0, "dist-b: {nb_:#}");

    // R pings H: dist-b routes in VRF red to H's MAC across the peer
    // link, without ARP.
    let cap = RawPort::open(nh.name(), "eth0").unwrap();
    let _ = nr.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "1", "10.0.10.10"]);
    let (_, echo, arp) = count(&cap, "10.0.20.10".parse().unwrap(), [10, 0, 10, 2]);
    eprintln!("H: {echo} echo requests from R, {arp} ARP requests from dist-b");
    assert!(
        echo >= 3,
        "H got {echo} of 3 echo requests routed by dist-b"
    );
    assert_eq!(arp, 0, "dist-b sent ARP for a neighbour the peer resolved");
}

/// Node `node` of the VRF gateway bed: VLANs 20 and 30 are SVIs of VRF
/// `red` (namespace `netns`) on both nodes, dual-stack, both in
/// `gateways`; the channel po1 (m1) in VLAN 20; dist-a has H on `h`
/// (VLAN 20), dist-b has R on `r` (VLAN 30) and S on `s` (VLAN 20).
fn gw_vrf_config(name: &str, node: usize, netns: &str) -> String {
    let ports = if node == 0 {
        "  - {name: h, vlan: 20}\n"
    } else {
        "  - {name: r, vlan: 30}\n  - {name: s, vlan: 20}\n"
    };
    format!(
        "switch:
  name: {name}
vlans:
  - id: 20
    router:
      addresses: [10.0.20.1/24, 2001:db8:20::1/64]
  - id: 30
    router:
      addresses: [10.0.30.1/24, 2001:db8:30::1/64]
vrfs:
  - {{name: red, interfaces: [vlan20, vlan30], rd: '65000:1', namespace: {netns}}}
ports:
  - {{name: pl, mode: trunk}}
  - {{name: m1, vlan: 20}}
{ports}port-channels:
  - {{name: po1, members: [m1], lacp: static}}
{}",
        vswitch::section(18, node, &["pl"], 0, true, "  gateways: [20, 30]\n")
    )
}

/// `ping` (or `ping -6`) from `ns` to `dst`: the replies received of `n`.
fn ping(ns: &Netns, dst: &str, n: u32) -> u32 {
    let out = ns
        .exec(&["ping", "-c", &n.to_string(), "-i", "0.2", "-W", "2", dst])
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(", ")
        .find_map(|p| p.strip_suffix(" received")?.parse().ok())
        .unwrap_or(0)
}

/// Packets R receives until quiet, by sequence number (TTL/hop limit 63,
/// checksums good).
fn received_at(cap: &RawPort) -> HashMap<u64, u32> {
    let mut seen = HashMap::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        let Some(f) = cap.recv_timeout(Duration::from_millis(500)).unwrap() else {
            break;
        };
        if let Some(p) = ip::parse(&f) {
            if let (Some(seq), 63, true) = (p.seq, p.ttl, p.l4_ok) {
                *seen.entry(seq).or_insert(0u32) += 1;
            }
        }
    }
    seen
}

/// Issue 19 item 4 in a VRF: both nodes serve VLANs 20 and 30 of VRF
/// `red` (TAP twins in each node's VRF namespace) as one gateway, IPv4
/// and IPv6. P, behind the channel (frames put by hand on either node's
/// member, as a partner's hash would), gets ARP and ND answers for the
/// gateway from both nodes with the system MAC; kernel hosts H (behind
/// dist-a) and R (behind dist-b) reach each other through it (dist-a
/// resolves R through R's answer, which reaches dist-b and comes back by
/// neighbour sync: the gateway set-up inside the VRF's namespace); P's
/// packets are routed in the VRF by whichever node gets them. dist-a is
/// killed: P's packets on dist-b's member and S ↔ R behind dist-b are
/// still routed, by dist-b. Before, the configuration refused a VRF's SVI
/// in `gateways` (and a VRF's SVI kept its own router MAC).
#[test]
fn one_gateway_in_a_vrf_on_both_nodes() {
    require_root!();
    let _g = l2::heavy();
    let nt = Netns::new("lygvT").unwrap();
    let na = Netns::new("lygvA").unwrap();
    let nb = Netns::new("lygvB").unwrap();
    let nh = Netns::new("lygvH").unwrap();
    let nr = Netns::new("lygvR").unwrap();
    let ns = Netns::new("lygvS").unwrap();
    let (vrf_a, vrf_b) = ("lygvA-red", "lygvB-red");
    let _vrf_ns = VrfNsCleanup(vec![vrf_a.into(), vrf_b.into()]);
    vswitch::link_nodes(&na, &nb, &["pl"]).unwrap();
    veth(&na, "m1", &nt, "xa", 1500).unwrap();
    veth(&nb, "m1", &nt, "xb", 1500).unwrap();
    veth(&na, "h", &nh, "eth0", 1500).unwrap();
    veth(&nb, "r", &nr, "eth0", 1500).unwrap();
    veth(&nb, "s", &ns, "eth0", 1500).unwrap();
    for (host, v4, v6) in [
        (&nh, "10.0.20.10", "2001:db8:20::10"),
        (&nr, "10.0.30.10", "2001:db8:30::10"),
        (&ns, "10.0.20.11", "2001:db8:20::11"),
    ] {
        let net = if v4.starts_with("10.0.20.") { 20 } else { 30 };
        host.exec(&["sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=0"])
            .unwrap();
        let (a4, a6) = (format!("{v4}/24"), format!("{v6}/64"));
        let (g4, g6) = (format!("10.0.{net}.1"), format!("2001:db8:{net}::1"));
        for cmd in [
            vec!["ip", "addr", "add", a4.as_str(), "dev", "eth0"],
            vec!["ip", "addr", "add", a6.as_str(), "dev", "eth0", "nodad"],
            vec!["ip", "route", "add", "default", "via", g4.as_str()],
            vec!["ip", "-6", "route", "add", "default", "via", g6.as_str()],
        ] {
            let out = host.exec(&cmd).unwrap();
            assert!(out.status.success(), "{cmd:?}: {out:?}");
        }
    }
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let mut a = Switch::start(
        &bin,
        &na,
        &gw_vrf_config("gv-a", 0, vrf_a),
        &["pl", "m1", "h"],
    )
    .unwrap();
    let b = Switch::start(
        &bin,
        &nb,
        &gw_vrf_config("gv-b", 1, vrf_b),
        &["pl", "m1", "r", "s"],
    )
    .unwrap();
    vswitch::wait_paired(&[&a, &b], 10);
    let system = [2, 0, 0, 0, 0x12, 0];
    let system_text = "02:00:00:00:12:00";

    // P, behind the channel: both nodes answer ARP and ND for the gateway
    // with the pair's MAC (IPv6: as a router).
    let xa = RawPort::open(nt.name(), "xa").unwrap();
    let xb = RawPort::open(nt.name(), "xb").unwrap();
    let p_mac = mac(0x2077);
    let (p4, p6): (IpAddr, IpAddr) = (
        "10.0.20.20".parse().unwrap(),
        "2001:db8:20::20".parse().unwrap(),
    );
    let IpAddr::V6(p6_addr) = p6 else {
        unreachable!()
    };
    for (port, who) in [(&xa, "dist-a"), (&xb, "dist-b")] {
        let mut answer = None;
        let t0 = Instant::now();
        // The twin's addresses may still be settling right after the start.
        while answer.is_none() && t0.elapsed() < Duration::from_secs(5) {
            answer = arp_reply(port, p_mac, [10, 0, 20, 20], [10, 0, 20, 1]);
        }
        assert_eq!(answer, Some(system), "{who}'s ARP answer");
        let mut answer = None;
        while answer.is_none() && t0.elapsed() < Duration::from_secs(5) {
            answer = nd_answer(port, p_mac, p6_addr, "2001:db8:20::1".parse().unwrap());
        }
        assert_eq!(answer, Some((system, system, true)), "{who}'s ND answer");
    }

    // H (behind dist-a) and R (behind dist-b) through the gateway: each
    // node routes what its host sends; dist-a reaches R through R's
    // answer, taken by dist-b's VRF kernel and synchronised.
    let t0 = Instant::now();
    for dst in ["10.0.30.10", "2001:db8:30::10"] {
        let got = ping(&nh, dst, 3);
        assert!(
            got >= 2,
            "H → R {dst}: {got} of 3 replies; dist-a {:#}\ndist-b {:#}",
            a.show_json(&["show", "virtual-switch"])["peer_link"]["messages"]["neighbors"],
            b.show_json(&["show", "virtual-switch"])["peer_link"]["messages"]["neighbors"]
        );
    }
    eprintln!("H ↔ R over both nodes, IPv4 and IPv6: {:?}", t0.elapsed());
    for (host, gw) in [
        (&nh, "10.0.20.1"),
        (&nh, "2001:db8:20::1"),
        (&nr, "10.0.30.1"),
    ] {
        let out = host.exec(&["ip", "neigh", "show", gw]).unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(text.contains(system_text), "{gw} on a host: {text}");
    }
    let from_peer = |sw: &Switch| {
        sw.show_json(&["show", "virtual-switch"])["peer_link"]["messages"]["neighbors"]["installed"]
            .as_u64()
            .unwrap_or(0)
    };
    assert!(from_peer(&a) >= 1, "dist-a installed nothing from dist-b");

    // P's packets to R, IPv4 and IPv6, put on each node's member: routed
    // in the VRF by the node that got them, each delivered once.
    let cap = RawPort::open(nr.name(), "eth0").unwrap();
    let r4: IpAddr = "10.0.30.10".parse().unwrap();
    let r6: IpAddr = "2001:db8:30::10".parse().unwrap();
    let pkt = |i: u64| {
        // Even sequence numbers IPv4, odd IPv6.
        let (src, dst) = if i.is_multiple_of(2) {
            (p4, r4)
        } else {
            (p6, r6)
        };
        ip::udp(&system, &p_mac, src, dst, 64, i, 128)
    };
    // The first of each family may wait for R's resolution on dist-a.
    let t0 = Instant::now();
    loop {
        for (port, base) in [(&xa, 10u64), (&xb, 20)] {
            port.send(&pkt(base)).unwrap();
            port.send(&pkt(base + 1)).unwrap();
        }
        let seen = received_at(&cap);
        if [10, 11, 20, 21].iter().all(|s| seen.contains_key(s)) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "P → R not routed by both nodes: {seen:?}"
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    cap.drain();
    let n = 400u64;
    let (fa, fb) = (forwarded(&a), forwarded(&b));
    xa.send_paced(n as usize, 5_000, |i, buf| *buf = pkt(1000 + i as u64))
        .unwrap();
    xb.send_paced(n as usize, 5_000, |i, buf| *buf = pkt(2000 + i as u64))
        .unwrap();
    let seen = received_at(&cap);
    let (da, db) = (forwarded(&a) - fa, forwarded(&b) - fb);
    eprintln!(
        "P → R: routed by dist-a {da}, dist-b {db}; R received {} distinct",
        seen.len()
    );
    assert_eq!(
        seen.len() as u64,
        2 * n,
        "R received {} of {}",
        seen.len(),
        2 * n
    );
    assert!(seen.values().all(|c| *c == 1), "duplicates at R");
    assert!(da >= n, "dist-a routed {da} of the {n} that reached it");
    assert!(db >= n, "dist-b routed {db} of the {n} that reached it");

    // dist-a dies: what reaches dist-b (P, now on dist-b's member, with
    // the gateway MAC it had; S and R behind dist-b) is still routed.
    a.kill9().unwrap();
    let t0 = Instant::now();
    let alone = wait_for("dist-b alone", 5, || {
        b.try_show_json(&["show", "virtual-switch"])
            .is_ok_and(|v| v["status"] == "peer-down")
    });
    eprintln!("dist-b peer-down {alone:?} after the kill");
    let fb = forwarded(&b);
    xb.send_paced(n as usize, 5_000, |i, buf| *buf = pkt(3000 + i as u64))
        .unwrap();
    let seen = received_at(&cap);
    let db = forwarded(&b) - fb;
    eprintln!(
        "dist-a killed: dist-b routed {db}, R received {} distinct",
        seen.len()
    );
    assert_eq!(
        seen.len() as u64,
        n,
        "after dist-a's death R received {} of {n}",
        seen.len()
    );
    assert!(seen.values().all(|c| *c == 1), "duplicates at R");
    assert!(db >= n, "dist-b routed {db} of {n}");
    for (from, dst) in [
        (&ns, "10.0.30.10"),
        (&ns, "2001:db8:30::10"),
        (&nr, "10.0.20.11"),
        (&nr, "2001:db8:20::11"),
    ] {
        let got = ping(from, dst, 3);
        assert!(got >= 2, "{dst} after dist-a's death: {got} of 3 replies");
    }
    eprintln!("behind dist-b, routed without dist-a: {:?}", t0.elapsed());
    drop(a);
}
