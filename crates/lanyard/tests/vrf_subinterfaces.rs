//! Routed 802.1Q subinterfaces in VRFs, end to end on real interfaces
//! (issue 18, docs/vrf.md "Subinterfaces"): two customer ports with two
//! subinterfaces each, every one in a VRF of its own and all with the same
//! addresses and routes (IPv4 and IPv6); one uplink port with a
//! subinterface per VRF. Each VRF's packets leave only on its own uplink
//! VLAN, forwarded by the data plane to the neighbour its own kernel
//! resolved by ARP or ND over the tagged uplink; nothing crosses
//! VRFs; an ACL on one subinterface drops only there; untagged frames on
//! the same port stay the port's (default VRF); unknown VLANs route
//! nowhere; ICMP errors go back tagged; `show interfaces` counts each
//! subinterface.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::frame::Mac;
use testkit::ip::{self, IpInfo};
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `f` with an 802.1Q tag `vid` after the MAC addresses.
fn tag(f: &[u8], vid: u16) -> Vec<u8> {
    let mut o = f[..12].to_vec();
    o.extend_from_slice(&[0x81, 0x00]);
    o.extend_from_slice(&vid.to_be_bytes());
    o.extend_from_slice(&f[12..]);
    o
}

/// (tag control: 802.1p priority and VLAN, untagged frame); 0 for
/// untagged.
fn untag_tci(f: &[u8]) -> (u16, Vec<u8>) {
    if f.len() >= 18 && f[12..14] == [0x81, 0x00] {
        let tci = u16::from_be_bytes([f[14], f[15]]);
        let mut o = f[..12].to_vec();
        o.extend_from_slice(&f[16..]);
        (tci, o)
    } else {
        (0, f.to_vec())
    }
}

/// The DSCP of an IPv4 or IPv6 packet.
fn dscp(p: &IpInfo) -> u8 {
    if p.dst.is_ipv6() {
        ((p.packet[0] & 0x0f) << 2) | (p.packet[1] >> 6)
    } else {
        p.packet[1] >> 2
    }
}

/// The uplink neighbour 10.2.0.2's MAC in VLAN `vid` (one per VLAN, so
/// each VRF's choice of neighbour shows).
fn neighbour_mac(vid: u16) -> Mac {
    [0x02, 0x4e, 0, 0, (vid >> 8) as u8, vid as u8]
}

/// An ARP reply from 10.2.0.2 to a request for it, in the request's VLAN.
fn arp_reply(vid: u16, req: &[u8]) -> Option<Vec<u8>> {
    if req.len() < 42 || req[12..14] != [0x08, 0x06] || req[20..22] != [0, 1] {
        return None;
    }
    if req[38..42] != [10, 2, 0, 2] {
        return None;
    }
    let me = neighbour_mac(vid);
    let mut r = Vec::with_capacity(60);
    r.extend_from_slice(&req[22..28]); // to the asker
    r.extend_from_slice(&me);
    r.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
    r.extend_from_slice(&me);
    r.extend_from_slice(&[10, 2, 0, 2]);
    r.extend_from_slice(&req[22..32]); // sender MAC + IP become the target
    r.resize(60, 0);
    Some(tag(&r, vid))
}

/// Internet checksum of `parts` (one's complement sum).
fn csum(parts: &[&[u8]]) -> u16 {
    let mut acc: u32 = 0;
    for p in parts {
        for c in p.chunks(2) {
            acc += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// A neighbour advertisement from 2001:db8:2::2 answering a solicitation
/// for it, in the solicitation's VLAN.
fn na_reply(vid: u16, req: &[u8]) -> Option<Vec<u8>> {
    let target: [u8; 16] = "2001:db8:2::2"
        .parse::<std::net::Ipv6Addr>()
        .unwrap()
        .octets();
    if req.len() < 78 || req[12..14] != [0x86, 0xdd] || req[20] != 58 || req[54] != 135 {
        return None;
    }
    if req[62..78] != target {
        return None;
    }
    let me = neighbour_mac(vid);
    let mut icmp = vec![136, 0, 0, 0, 0x60, 0, 0, 0];
    icmp.extend_from_slice(&target);
    icmp.extend_from_slice(&[2, 1]);
    icmp.extend_from_slice(&me);
    let dst = &req[22..38];
    let len = (icmp.len() as u32).to_be_bytes();
    let c = csum(&[&target, dst, &len, &[0, 0, 0, 58], &icmp]);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut r = Vec::new();
    r.extend_from_slice(&req[6..12]);
    r.extend_from_slice(&me);
    r.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    r.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    r.extend_from_slice(&[58, 255]);
    r.extend_from_slice(&target);
    r.extend_from_slice(dst);
    r.extend_from_slice(&icmp);
    Some(tag(&r, vid))
}

/// Receive on `p` until quiet (answering ARP for 10.2.0.2 and ND for
/// 2001:db8:2::2 in any VLAN):
/// the IP packets with their VLAN.
fn pump(p: &RawPort, quiet: Duration, max: Duration) -> Vec<(u16, IpInfo)> {
    pump_tci(p, quiet, max)
        .into_iter()
        .map(|(tci, i)| (tci & 0xfff, i))
        .collect()
}

/// [`pump`] with each packet's whole tag control (priority and VLAN).
fn pump_tci(p: &RawPort, quiet: Duration, max: Duration) -> Vec<(u16, IpInfo)> {
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < max {
        match p.recv_timeout(quiet).expect("recv") {
            Some(f) => {
                let (tci, u) = untag_tci(&f);
                let vid = tci & 0xfff;
                if let Some(r) = arp_reply(vid, &u).or_else(|| na_reply(vid, &u)) {
                    p.send(&r).unwrap();
                } else if let Some(i) = ip::parse(&u) {
                    out.push((tci, i));
                }
            }
            None => break,
        }
    }
    out
}

struct NsCleanup(Vec<String>);

impl Drop for NsCleanup {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", n])
                .output();
            let _ = std::fs::remove_file(format!("/run/netns/{n}"));
        }
    }
}

/// One customer VRF: its customer port (index), customer VLAN, uplink
/// VLAN, and the sequence numbers of its packets.
struct Vrf {
    name: &'static str,
    port: usize,
    vid: u16,
    up: u16,
    seq: u64,
}

#[test]
fn subinterfaces_in_vrfs_with_the_same_addresses_stay_apart() {
    require_root!();
    let bed = TestBed::new("sub", 3, 1500).expect("namespaces");
    let pid = std::process::id();
    let vrfs = [
        Vrf {
            name: "A",
            port: 0,
            vid: 100,
            up: 11,
            seq: 0,
        },
        Vrf {
            name: "B",
            port: 0,
            vid: 200,
            up: 12,
            seq: 10_000,
        },
        Vrf {
            name: "C",
            port: 1,
            vid: 100,
            up: 13,
            seq: 20_000,
        },
        Vrf {
            name: "D",
            port: 1,
            vid: 200,
            up: 14,
            seq: 30_000,
        },
    ];
    let ns: Vec<String> = vrfs
        .iter()
        .map(|v| format!("lysub{}{pid}", v.name.to_lowercase()))
        .collect();
    let _cleanup = NsCleanup(ns.clone());
    let mut yaml = String::from(
        r#"switch:
  name: sub-test
access-lists:
  - name: no66
    type: ipv4
    rules:
      - {action: deny, destination: 198.51.100.66/32}
      - {action: permit}
  - name: no99
    type: ipv4
    rules:
      - {action: deny, destination: 198.51.100.99/32}
      - {action: permit}
policy-maps:
  - name: uplink-mark
    classes:
      - {class: class-default, set-dscp: af21, set-pcp: 3}
ports:
  - name: sw1
    mode: routed
    addresses: [10.9.0.1/24]
    subinterfaces:
      - {vlan: 100, addresses: [10.1.0.1/24, "2001:db8:1::1/64"], acl-in: [no66]}
      - {vlan: 200, addresses: [10.1.0.1/24, "2001:db8:1::1/64"]}
  - name: sw2
    mode: routed
    subinterfaces:
      - {vlan: 100, addresses: [10.1.0.1/24, "2001:db8:1::1/64"]}
      - {vlan: 200, addresses: [10.1.0.1/24, "2001:db8:1::1/64"]}
  - name: sw3
    mode: routed
    acl-out: [no99]
    policy-out: uplink-mark
    subinterfaces:
      - {vlan: 11, addresses: [10.2.0.1/24, "2001:db8:2::1/64"]}
      - {vlan: 12, addresses: [10.2.0.1/24, "2001:db8:2::1/64"]}
      - {vlan: 13, addresses: [10.2.0.1/24, "2001:db8:2::1/64"]}
      - {vlan: 14, addresses: [10.2.0.1/24, "2001:db8:2::1/64"]}
vrfs:
"#,
    );
    for (k, v) in vrfs.iter().enumerate() {
        yaml.push_str(&format!(
            "  - name: {}\n    interfaces: [sw{}.{}, sw3.{}]\n    rd: 65000:{}\n    namespace: {}\n",
            v.name,
            v.port + 1,
            v.vid,
            v.up,
            k + 1,
            ns[k]
        ));
    }
    yaml.push_str("routing:\n  static-routes:\n");
    for v in &vrfs {
        yaml.push_str(&format!(
            "    - {{prefix: 198.51.100.0/24, next-hop: 10.2.0.2, vrf: {0}}}\n    - {{prefix: \"2001:db8:99::/48\", next-hop: \"2001:db8:2::2\", vrf: {0}}}\n",
            v.name
        ));
    }
    yaml.push_str("    - {prefix: 203.0.113.0/24, next-hop: 10.2.0.2, vrf: A}\n");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let mut failures: Vec<String> = Vec::new();
    let ports = bed.open_all().unwrap();
    let tester: Mac = [0x02, 0x7e, 0, 0, 0, 1];
    let rmac: Vec<Mac> = vrfs
        .iter()
        .map(|v| sw.router_mac(&format!("sw{}.{}", v.port + 1, v.vid)))
        .collect();
    let upmac: HashMap<u16, Mac> = vrfs
        .iter()
        .map(|v| (v.up, sw.router_mac(&format!("sw3.{}", v.up))))
        .collect();
    let send = |k: usize, dst: &str, seq: u64| {
        let v = &vrfs[k];
        let src = if dst.contains(':') {
            "2001:db8:1::2"
        } else {
            "10.1.0.2"
        };
        let f = ip::udp(&rmac[k], &tester, a(src), a(dst), 64, seq, 128);
        ports[v.port].send(&tag(&f, v.vid)).unwrap();
    };

    // Glean 10.2.0.2 and 2001:db8:2::2 in each VRF: its kernel ARPs or
    // solicits on its uplink subinterface's twin, tagged; `pump` answers
    // per VLAN.
    for (k, v) in vrfs.iter().enumerate() {
        for (dst, base) in [("198.51.100.7", 90_000u64), ("2001:db8:99::7", 95_000)] {
            let mut ok = false;
            for t in 0..10u64 {
                let seq = base + 100 * k as u64 + t;
                send(k, dst, seq);
                if pump(
                    &ports[2],
                    Duration::from_millis(700),
                    Duration::from_secs(2),
                )
                .iter()
                .any(|(vid, p)| {
                    *vid == v.up && p.seq.is_some_and(|s| s >= base && s < base + 5_000)
                }) {
                    ok = true;
                    break;
                }
            }
            if !ok {
                failures.push(format!(
                    "VRF {}: nothing to {dst} reached uplink VLAN {} while gleaning",
                    v.name, v.up
                ));
            }
        }
    }
    for p in &ports {
        p.drain();
    }

    // The same destination from all four VRFs, interleaved.
    let n = 100u64;
    for s in 0..n {
        for (k, v) in vrfs.iter().enumerate() {
            send(k, "198.51.100.7", v.seq + s);
            send(k, "2001:db8:99::7", v.seq + 5_000 + s);
        }
    }
    let got = pump(
        &ports[2],
        Duration::from_millis(500),
        Duration::from_secs(10),
    );
    for (v, family, off) in vrfs
        .iter()
        .flat_map(|v| [(v, "IPv4", 0u64), (v, "IPv6", 5_000)])
    {
        let own = |p: &IpInfo| {
            p.seq
                .is_some_and(|s| (v.seq + off..v.seq + off + n).contains(&s))
                && p.dst.is_ipv6() == (off != 0)
        };
        let mine = |p: &IpInfo| p.seq.is_some_and(|s| (v.seq..v.seq + 10_000).contains(&s));
        let right = got
            .iter()
            .filter(|(vid, p)| {
                own(p)
                    && *vid == v.up
                    && p.ttl == 63
                    && p.header_ok
                    && p.dst_mac == neighbour_mac(v.up)
                    && Some(&p.src_mac) == upmac.get(&v.up)
            })
            .count() as u64;
        let astray = got.iter().filter(|(vid, p)| own(p) && *vid != v.up).count();
        let into_mine = got
            .iter()
            .filter(|(vid, p)| *vid == v.up && p.seq.is_some_and(|s| s < 90_000) && !mine(p))
            .count();
        if right != n || astray != 0 || into_mine != 0 {
            failures.push(format!(
                "VRF {} {family}: {right} of {n} right on VLAN {}, {astray} on other VLANs, {into_mine} of other VRFs on its VLAN",
                v.name, v.up
            ));
        }
    }

    // The uplink port's output policy marks what leaves its subinterfaces
    // (af21 = 18, 802.1p 3 in their tags); its output ACL (no99) is the
    // port's own interface's and does not see them.
    for p in &ports {
        p.drain();
    }
    for s in 0..20 {
        send(0, "198.51.100.99", 70_000 + s);
        send(2, "2001:db8:99::7", 71_000 + s);
    }
    let got = pump_tci(
        &ports[2],
        Duration::from_millis(500),
        Duration::from_secs(5),
    );
    let marked = |lo: u64, vid: u16| {
        got.iter()
            .filter(|(tci, p)| {
                tci & 0xfff == vid
                    && tci >> 13 == 3
                    && dscp(p) == 18
                    && p.header_ok
                    && p.seq.is_some_and(|s| (lo..lo + 20).contains(&s))
            })
            .count()
    };
    if marked(70_000, 11) != 20 || marked(71_000, 13) != 20 {
        failures.push(format!(
            "sw3's policy-out on its subinterfaces: {} of 20 IPv4 (VRF A, to 198.51.100.99, \
             which sw3's acl-out would deny) and {} of 20 IPv6 (VRF C) left marked af21 / 802.1p 3",
            marked(70_000, 11),
            marked(71_000, 13)
        ));
    }

    // The ACL on sw1.100 (VRF A) drops 198.51.100.66; the same packet from
    // sw1.200 (VRF B, same port) passes.
    for p in &ports {
        p.drain();
    }
    for s in 0..20 {
        send(0, "198.51.100.66", 50_000 + s);
        send(1, "198.51.100.66", 60_000 + s);
    }
    let got = pump(
        &ports[2],
        Duration::from_millis(500),
        Duration::from_secs(5),
    );
    let count = |lo: u64, vid: u16| {
        got.iter()
            .filter(|(v, p)| *v == vid && p.seq.is_some_and(|s| (lo..lo + 20).contains(&s)))
            .count()
    };
    if count(50_000, 11) != 0 || count(60_000, 12) != 20 {
        failures.push(format!(
            "ACL on sw1.100: {} of 20 denied packets passed; {} of 20 from sw1.200 passed",
            count(50_000, 11),
            count(60_000, 12)
        ));
    }

    // Only VRF A routes 203.0.113.0/24: from B (sw1.200) it is unreachable,
    // the ICMP error comes back tagged 200 from B's 10.1.0.1, and nothing
    // leaves the uplink.
    for p in &ports {
        p.drain();
    }
    send(1, "203.0.113.9", 777);
    let back = pump(
        &ports[0],
        Duration::from_millis(500),
        Duration::from_secs(3),
    );
    if !back.iter().any(|(vid, p)| {
        *vid == 200 && p.proto == 1 && p.packet.get(20) == Some(&3) && p.src == a("10.1.0.1")
    }) {
        failures.push(format!(
            "VRF B: no tagged ICMP unreachable for 203.0.113.9: {back:?}"
        ));
    }
    // Untagged on sw1 is the port's own interface (default VRF, no route):
    // unreachable from 10.9.0.1, untagged.
    let f = ip::udp(
        &sw.router_mac("sw1"),
        &tester,
        a("10.9.0.2"),
        a("198.51.100.7"),
        64,
        778,
        128,
    );
    ports[0].send(&f).unwrap();
    // An unconfigured VLAN on sw1 routes nowhere.
    ports[0]
        .send(&tag(
            &ip::udp(
                &rmac[0],
                &tester,
                a("10.1.0.2"),
                a("198.51.100.7"),
                64,
                779,
                128,
            ),
            300,
        ))
        .unwrap();
    let back = pump(
        &ports[0],
        Duration::from_millis(500),
        Duration::from_secs(3),
    );
    if !back.iter().any(|(vid, p)| {
        *vid == 0 && p.proto == 1 && p.packet.get(20) == Some(&3) && p.src == a("10.9.0.1")
    }) {
        failures.push(format!(
            "sw1 untagged: no ICMP unreachable from 10.9.0.1: {back:?}"
        ));
    }
    let leaked: Vec<(u16, Option<u64>)> = pump(
        &ports[2],
        Duration::from_millis(300),
        Duration::from_secs(1),
    )
    .into_iter()
    .chain(pump(
        &ports[1],
        Duration::from_millis(300),
        Duration::from_secs(1),
    ))
    .filter(|(_, p)| matches!(p.seq, Some(777..=779)))
    .map(|(v, p)| (v, p.seq))
    .collect();
    if !leaked.is_empty() {
        failures.push(format!("left the switch though unroutable: {leaked:?}"));
    }

    // show interfaces: a row per subinterface with its own counters.
    let rows = sw.show_json(&["show", "interfaces"]);
    let row = |name: &str| {
        rows.as_array()
            .and_then(|r| r.iter().find(|r| r["name"] == name))
            .cloned()
            .unwrap_or_default()
    };
    let r = row("sw1.100");
    if r["mode"] != "subinterface"
        || r["vlan"] != 100
        || r["rx_frames"].as_u64().unwrap_or(0) < n + 20
    {
        failures.push(format!("show interfaces sw1.100: {r}"));
    }
    let r = row("sw3.14");
    if r["tx_frames"].as_u64().unwrap_or(0) < 2 * n || r["vrf"] != "D" {
        failures.push(format!(
            "show interfaces sw3.14: {r}\nshow vrf: {}\nshow ipv6 route vrf D: {}\ncounters: {}",
            sw.show_json(&["show", "vrf"]),
            sw.show_json(&["show", "ipv6", "route", "vrf", "D"]),
            sw.show_json(&["show", "counters"])
        ));
    }
    let text = sw
        .cli(&["show", "interfaces"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if !text.contains("sw2.200") || !text.contains("routed .200") || !text.contains("3 ports") {
        failures.push(format!("show interfaces (text):\n{text}"));
    }

    assert!(
        failures.is_empty(),
        "{}\nlog:\n{}",
        failures.join("\n"),
        sw.log()
    );
}
