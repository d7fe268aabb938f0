//! Issue 19 item 2/3 with a Lanyard as the LACP partner: a third Lanyard
//! with a 4-member port channel, two members to each node of a
//! virtual-switch pair. It sees one partner system (the pair's system
//! MAC) with one key on all four members, all four distribute, and
//! frames between its host and hosts on each pair node arrive exactly
//! once. Needs root; about 10 s.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::frame::{mac, Mac, BROADCAST};
use testkit::netns::veth;
use testkit::{ip, l2, require_root, vswitch, Netns, RawPort, Switch};

fn pair_config(name: &str, node: usize) -> String {
    format!(
        "switch:
  name: {name}
vlans:
  - id: 10
ports:
  - {{name: pl, mode: trunk}}
  - {{name: m1, vlan: 10}}
  - {{name: m2, vlan: 10}}
  - {{name: h, vlan: 10}}
port-channels:
  - {{name: po1, members: [m1, m2], lacp: active, lacp-rate: fast, load-balance: l3l4}}
{}",
        vswitch::section(12, node, &["pl"], 1, true, "")
    )
}

const ACCESS: &str = "switch:
  name: access
vlans:
  - id: 10
ports:
  - {name: c1, vlan: 10}
  - {name: c2, vlan: 10}
  - {name: c3, vlan: 10}
  - {name: c4, vlan: 10}
  - {name: hc, vlan: 10}
port-channels:
  - {name: po1, members: [c1, c2, c3, c4], lacp: active, lacp-rate: fast, load-balance: l3l4}
";

/// Per member of the access switch's channel: (distributing, partner system, key).
fn members(sw: &Switch) -> Vec<(bool, String, u64)> {
    sw.try_show_json(&["show", "port-channel"])
        .ok()
        .and_then(|v| {
            v[0]["members"].as_array().map(|ms| {
                ms.iter()
                    .map(|m| {
                        (
                            m["distributing"] == true,
                            m["partner"]["system"].as_str().unwrap_or("").to_string(),
                            m["partner"]["key"].as_u64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
        })
        .unwrap_or_default()
}

fn frame(dst: &Mac, src: &Mac, i: u64) -> Vec<u8> {
    // Flows differ by source address: the channel hashes them over all
    // members.
    let s: IpAddr = format!("10.9.{}.{}", (i >> 8) & 0xff, i & 0xff)
        .parse()
        .unwrap();
    ip::udp(dst, src, s, "10.9.255.1".parse().unwrap(), 64, i, 100)
}

/// Sequence numbers `port` receives until quiet, with counts.
fn receive(port: &RawPort) -> HashMap<u64, u32> {
    let mut seen = HashMap::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        let Some(f) = port.recv_timeout(Duration::from_millis(500)).unwrap() else {
            break;
        };
        if let Some(seq) = ip::parse(&f).and_then(|p| p.seq) {
            *seen.entry(seq).or_insert(0) += 1;
        }
    }
    seen
}

#[test]
fn lanyard_port_channel_sees_one_partner_across_the_pair() {
    require_root!();
    let _g = l2::heavy();
    let nt = Netns::new("lylpT").unwrap();
    let na = Netns::new("lylpA").unwrap();
    let nb = Netns::new("lylpB").unwrap();
    let nc = Netns::new("lylpC").unwrap();
    vswitch::link_nodes(&na, &nb, &["pl"]).unwrap();
    veth(&na, "m1", &nc, "c1", 1500).unwrap();
    veth(&na, "m2", &nc, "c2", 1500).unwrap();
    veth(&nb, "m1", &nc, "c3", 1500).unwrap();
    veth(&nb, "m2", &nc, "c4", 1500).unwrap();
    veth(&na, "h", &nt, "ta", 1500).unwrap();
    veth(&nb, "h", &nt, "tb", 1500).unwrap();
    veth(&nc, "hc", &nt, "tc", 1500).unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let ports = ["pl", "m1", "m2", "h"];
    let a = Switch::start(&bin, &na, &pair_config("dist-a", 0), &ports).unwrap();
    let b = Switch::start(&bin, &nb, &pair_config("dist-b", 1), &ports).unwrap();
    let c = Switch::start(&bin, &nc, ACCESS, &["c1", "c2", "c3", "c4", "hc"]).unwrap();

    let t0 = Instant::now();
    loop {
        let m = members(&c);
        if m.len() == 4 && m.iter().all(|(d, s, _)| *d && s == "02:00:00:00:0c:00") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "access switch members: {m:?}; pair: {:#}",
            a.show_json(&["show", "virtual-switch"])
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "all 4 members distributing to one partner after {:?}",
        t0.elapsed()
    );
    let m = members(&c);
    assert!(
        m.iter().all(|(_, _, k)| *k == m[0].2),
        "one key on all members: {m:?}"
    );
    // Both pair nodes see the access switch as the partner, here and in
    // the peer's view.
    for sw in [&a, &b] {
        let ch = &sw.show_json(&["show", "virtual-switch"])["channels"][0];
        assert_eq!(ch["partner"], ch["peer_partner"], "{ch:#}");
        assert!(!ch["partner"].is_null(), "{ch:#}");
    }

    let (ta, tb, tc) = (
        RawPort::open(nt.name(), "ta").unwrap(),
        RawPort::open(nt.name(), "tb").unwrap(),
        RawPort::open(nt.name(), "tc").unwrap(),
    );
    let (ha, hb, hc) = (mac(0xa1), mac(0xb1), mac(0xc1));
    for (p, m) in [(&ta, ha), (&tb, hb), (&tc, hc)] {
        p.send(&testkit::frame::test_frame(&BROADCAST, &m, &[], 1, 0, 64))
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    for p in [&ta, &tb, &tc] {
        while p.recv_timeout(Duration::from_millis(50)).unwrap().is_some() {}
    }
    let n = 2_000u64;
    // Access host → each pair node's host: hashed over all four members.
    tc.send_paced(n as usize, 5_000, |i, buf| *buf = frame(&ha, &hc, i as u64))
        .unwrap();
    let got_a = receive(&ta);
    tc.send_paced(n as usize, 5_000, |i, buf| *buf = frame(&hb, &hc, i as u64))
        .unwrap();
    let got_b = receive(&tb);
    // And back.
    ta.send_paced(n as usize, 5_000, |i, buf| *buf = frame(&hc, &ha, i as u64))
        .unwrap();
    let got_c = receive(&tc);
    let rx: Vec<u64> = ["c1", "c2", "c3", "c4"]
        .iter()
        .map(|p| {
            c.counters()["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == *p)
                .map_or(0, |x| x["tx_frames"].as_u64().unwrap_or(0))
        })
        .collect();
    eprintln!(
        "access -> a {}/{n}, access -> b {}/{n}, a -> access {}/{n}; access member tx {rx:?}",
        got_a.len(),
        got_b.len(),
        got_c.len()
    );
    for (what, got) in [
        ("access -> a", &got_a),
        ("access -> b", &got_b),
        ("a -> access", &got_c),
    ] {
        assert_eq!(got.len() as u64, n, "{what}: {} of {n}", got.len());
        assert!(got.values().all(|c| *c == 1), "{what}: duplicates");
    }
    assert!(
        rx.iter().all(|t| *t > 0),
        "every member carries traffic: {rx:?}"
    );
}
