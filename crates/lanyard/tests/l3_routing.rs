//! Acceptance (issue 4), on real interfaces without FRR: routed ports with
//! connected and static routes; ARP/ND resolved by the kernel on the TAPs
//! and mirrored; punt/inject (ping to the router); IPv4 and IPv6
//! forwarding with TTL/hop limit decremented and checksums valid (checked
//! by testkit's own dissector); ICMP time exceeded and unreachable; strict
//! uRPF; blackhole routes; `show ip route`, `show arp`.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::frame::Mac;
use testkit::ip::{self, IpInfo};
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

const YAML: &str = r#"
switch:
  name: l3-routing
ports:
  - name: sw1
    mode: routed
    addresses: [10.1.0.1/24, 2001:db8:1::1/64]
  - name: sw2
    mode: routed
    urpf: strict
    addresses: [10.2.0.1/24, 2001:db8:2::1/64]
  - name: sw3
    mode: routed
    addresses: [10.3.0.1/24]
routing:
  static-routes:
    - prefix: 198.51.100.0/24
      next-hop: 10.2.0.2
    - prefix: 2001:db8:99::/48
      next-hop: 2001:db8:2::2
    - prefix: 203.0.113.0/24
      blackhole: true
"#;

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Every IP frame `port` receives until it has been quiet for `quiet`.
fn collect(port: &RawPort, quiet: Duration, max: Duration) -> Vec<IpInfo> {
    port.recv_ip(quiet, max).expect("recv")
}

fn send(port: &RawPort, frames: &[Vec<u8>]) {
    port.send_paced(frames.len(), 20_000, |k, b| {
        b.clear();
        b.extend_from_slice(&frames[k]);
    })
    .expect("send");
}

fn l3(sw: &Switch) -> serde_json::Value {
    sw.counters()["l3"].clone()
}

#[test]
fn routes_between_ports_with_ttl_icmp_urpf_and_blackhole() {
    require_root!();
    let bed = TestBed::new("l3rt", 3, 9000).expect("namespaces");
    let t = &bed.tester;
    for (i, v4, v6) in [
        (1, "10.1.0.2/24", Some("2001:db8:1::2/64")),
        (2, "10.2.0.2/24", Some("2001:db8:2::2/64")),
        (3, "10.3.0.2/24", None),
    ] {
        let ifn = format!("t{i}");
        t.exec(&["ip", "addr", "add", v4, "dev", &ifn]).unwrap();
        if let Some(v6) = v6 {
            t.sysctl(&format!("net.ipv6.conf.{ifn}.disable_ipv6"), "0")
                .unwrap();
            t.exec(&["ip", "addr", "add", v6, "dev", &ifn, "nodad"])
                .unwrap();
        }
    }
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        YAML,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let mut failures: Vec<String> = Vec::new();

    // Punt and inject: the tester pings the router's own address (ARP for
    // it and the echo both go through the TAP and back).
    let ping = t
        .exec(&[
            "ping", "-c", "3", "-i", "0.2", "-W", "2", "-I", "t1", "10.1.0.1",
        ])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if !ping.as_ref().is_ok_and(|s| s.contains(" 0% packet loss")) {
        failures.push(format!("ping 10.1.0.1 from t1: {ping:?}"));
    }

    let r1 = sw.router_mac("sw1");
    let r2 = sw.router_mac("sw2");
    let m1 = bed.tester_mac("t1");
    let m2 = bed.tester_mac("t2");
    let p1 = bed.open(1).unwrap();
    let p2 = bed.open(2).unwrap();
    let p3 = bed.open(3).unwrap();
    p1.drain();
    p2.drain();

    // IPv4 via the static route and IPv6 to a connected host and via a
    // static route. The first packet towards an unresolved next hop is
    // gleaned: punted to the kernel, which resolves the neighbour and sends
    // the packet on (a real switch's glean path; packets beyond the
    // kernel's unresolved queue may be dropped, so the burst waits for it).
    for (name, src, dst, n) in [
        ("ipv4 static", "10.1.0.2", "198.51.100.7", 300u64),
        ("ipv6 connected", "2001:db8:1::2", "2001:db8:2::2", 300),
        ("ipv6 static", "2001:db8:1::2", "2001:db8:99::5", 300),
    ] {
        let mut gleaned = false;
        for attempt in 0..5u64 {
            let f = ip::udp(&r1, &m1, a(src), a(dst), 64, 90_000 + attempt, 128);
            p1.send(&f).unwrap();
            let got = collect(&p2, Duration::from_secs(2), Duration::from_secs(3));
            if got
                .iter()
                .any(|p| p.dst == a(dst) && p.seq.is_some_and(|s| s >= 90_000) && p.ttl == 63)
            {
                gleaned = true;
                break;
            }
        }
        if !gleaned {
            failures.push(format!(
                "{name}: the gleaned first packet never arrived on t2"
            ));
        }
        p2.drain();
        let frames: Vec<Vec<u8>> = (0..n)
            .map(|k| ip::udp(&r1, &m1, a(src), a(dst), 64, k, 128))
            .collect();
        send(&p1, &frames);
        let got: Vec<IpInfo> = collect(&p2, Duration::from_millis(500), Duration::from_secs(10))
            .into_iter()
            .filter(|p| p.seq.is_some_and(|s| s < n) && p.dst == a(dst))
            .collect();
        let bad: Vec<&IpInfo> = got
            .iter()
            .filter(|p| {
                p.ttl != 63 || !p.header_ok || !p.l4_ok || p.dst_mac != m2 || p.src_mac != r2
            })
            .collect();
        let mut seqs: Vec<u64> = got.iter().filter_map(|p| p.seq).collect();
        seqs.sort_unstable();
        seqs.dedup();
        if seqs.len() as u64 != n || !bad.is_empty() {
            failures.push(format!(
                "{name}: {} of {n} distinct packets arrived on t2; {} malformed, e.g. {:?}",
                seqs.len(),
                bad.len(),
                bad.first()
            ));
        }
    }
    // The static routes' next hops are managed neighbours, resolved before
    // the first packet (docs/routing.md), and 2001:db8:2::2 is one: glean
    // towards a connected host that is not a next hop.
    let glean0 = l3(&sw)["punts"]["needs-resolution"].as_u64().unwrap_or(0);
    p3.drain();
    let mut gleaned = false;
    for attempt in 0..5u64 {
        let f = ip::udp(
            &r1,
            &m1,
            a("10.1.0.2"),
            a("10.3.0.2"),
            64,
            95_000 + attempt,
            128,
        );
        p1.send(&f).unwrap();
        let got = collect(&p3, Duration::from_secs(2), Duration::from_secs(3));
        if got.iter().any(|p| p.dst == a("10.3.0.2") && p.ttl == 63) {
            gleaned = true;
            break;
        }
    }
    let glean1 = l3(&sw)["punts"]["needs-resolution"].as_u64().unwrap_or(0);
    if !gleaned || glean1 == glean0 {
        failures.push(format!(
            "connected host 10.3.0.2: arrived {gleaned}, punted for resolution {}",
            glean1 - glean0
        ));
    }
    // The neighbours are resolved: every packet takes the fast path, none
    // is punted.
    let before = l3(&sw);
    let frames: Vec<Vec<u8>> = (0..300u64)
        .map(|k| {
            ip::udp(
                &r1,
                &m1,
                a("10.1.0.2"),
                a("198.51.100.8"),
                64,
                50_000 + k,
                256,
            )
        })
        .collect();
    send(&p1, &frames);
    let got = collect(&p2, Duration::from_millis(500), Duration::from_secs(10))
        .into_iter()
        .filter(|p| p.seq.is_some_and(|s| s >= 50_000) && p.ttl == 63 && p.l4_ok)
        .count();
    let after = l3(&sw);
    let fwd = after["forwarded"].as_u64().unwrap_or(0) - before["forwarded"].as_u64().unwrap_or(0);
    // Neighbour upkeep (ARP/ND probes) may be punted meanwhile; data must not.
    let punted = after["punts"]["needs-resolution"].as_u64().unwrap_or(0)
        - before["punts"]["needs-resolution"].as_u64().unwrap_or(0);
    if got != 300 || fwd != 300 || punted != 0 {
        failures.push(format!(
            "resolved neighbour: {got} of 300 delivered, {fwd} forwarded by the data path, {punted} punted (want 300/300/0)"
        ));
    }

    // TTL 1: ICMP time exceeded from the ingress interface's address.
    p1.drain();
    let f = ip::udp(&r1, &m1, a("10.1.0.2"), a("198.51.100.7"), 1, 9001, 128);
    p1.send(&f).unwrap();
    let back = collect(&p1, Duration::from_millis(500), Duration::from_secs(3));
    let te = back
        .iter()
        .find(|p| p.proto == 1 && p.packet.get(20) == Some(&11));
    match te {
        Some(p) if p.src == a("10.1.0.1") && p.dst == a("10.1.0.2") && p.header_ok && p.l4_ok => {}
        other => failures.push(format!("no valid ICMP time exceeded on t1: {other:?}")),
    }
    // No route: ICMP destination unreachable.
    let f = ip::udp(&r1, &m1, a("10.1.0.2"), a("192.0.2.1"), 64, 9002, 128);
    p1.send(&f).unwrap();
    let back = collect(&p1, Duration::from_millis(500), Duration::from_secs(3));
    if !back
        .iter()
        .any(|p| p.proto == 1 && p.packet.get(20) == Some(&3) && p.l4_ok)
    {
        failures.push("no ICMP unreachable for an unrouted destination".into());
    }

    // Strict uRPF on sw2: a source routed via sw3 arriving on sw2 is
    // dropped and counted; the legitimate source passes.
    let before = l3(&sw)["drops"]["urpf"].as_u64().unwrap_or(0);
    p1.drain();
    let spoofed: Vec<Vec<u8>> = (0..50)
        .map(|k| ip::udp(&r2, &m2, a("10.3.0.50"), a("10.1.0.2"), 64, 20_000 + k, 128))
        .collect();
    p2.send_batch(&spoofed).unwrap();
    let good: Vec<Vec<u8>> = (0..50)
        .map(|k| ip::udp(&r2, &m2, a("10.2.0.2"), a("10.1.0.2"), 64, 30_000 + k, 128))
        .collect();
    send(&p2, &good);
    let got = collect(&p1, Duration::from_millis(500), Duration::from_secs(5));
    let spoof_seen = got
        .iter()
        .filter(|p| p.seq.is_some_and(|s| (20_000..20_050).contains(&s)))
        .count();
    let good_seen = got
        .iter()
        .filter(|p| p.seq.is_some_and(|s| (30_000..30_050).contains(&s)))
        .count();
    let urpf = l3(&sw)["drops"]["urpf"].as_u64().unwrap_or(0) - before;
    if spoof_seen != 0 || urpf != 50 || good_seen != 50 {
        failures.push(format!(
            "uRPF: spoofed delivered {spoof_seen} (want 0), counted {urpf} (want 50), legitimate delivered {good_seen} (want 50)"
        ));
    }

    // Blackhole.
    let before = l3(&sw)["drops"]["blackhole"].as_u64().unwrap_or(0);
    let bh: Vec<Vec<u8>> = (0..20)
        .map(|k| {
            ip::udp(
                &r1,
                &m1,
                a("10.1.0.2"),
                a("203.0.113.5"),
                64,
                40_000 + k,
                128,
            )
        })
        .collect();
    p1.send_batch(&bh).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let n = l3(&sw)["drops"]["blackhole"].as_u64().unwrap_or(0) - before;
    if n != 20
        || p3
            .recv_test_frames(Duration::from_millis(100))
            .is_ok_and(|v| !v.is_empty())
    {
        failures.push(format!("blackhole: counted {n} of 20"));
    }

    // Show commands.
    let routes = sw.show_json(&["show", "ip", "route"]);
    let text = routes.to_string();
    for want in ["198.51.100.0/24", "10.2.0.0/24", "203.0.113.0/24"] {
        if !text.contains(want) {
            failures.push(format!("show ip route lacks {want}: {text}"));
        }
    }
    let arp = sw.show_json(&["show", "arp"]).to_string();
    if !arp.contains("10.2.0.2") {
        failures.push(format!("show arp lacks 10.2.0.2: {arp}"));
    }
    let nd = sw.show_json(&["show", "ipv6", "neighbors"]).to_string();
    if !nd.contains("2001:db8:2::2") {
        failures.push(format!("show ipv6 neighbors lacks 2001:db8:2::2: {nd}"));
    }
    let lookup = sw
        .show_json(&["show", "ip", "route", "198.51.100.77"])
        .to_string();
    if !lookup.contains("198.51.100.0/24") || !lookup.contains("10.2.0.2") {
        failures.push(format!("show ip route 198.51.100.77: {lookup}"));
    }

    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}\ncounters: {}\nlog:\n{}",
        failures.len(),
        failures.join("\n"),
        sw.counters(),
        sw.log()
    );
}

const SVI_YAML: &str = r#"
switch:
  name: l3-svi
vlans:
  - id: 10
    router:
      addresses: [10.10.0.1/24]
  - id: 20
    router:
      addresses: [10.20.0.1/24]
ports:
  - name: sw1
    mode: trunk
    allowed-vlans: "10,20"
    native-vlan: none
  - name: sw2
    vlan: 10
  - name: sw3
    mode: routed
    addresses: [10.3.0.1/24]
  - name: sw4
    vlan: 20
"#;

fn svi_mac(sw: &Switch, vlan: u16) -> Mac {
    sw.router_mac(&format!("vlan{vlan}"))
}

/// VLAN interfaces (SVIs): routing between a VLAN and a routed port, and
/// between two VLANs; the router answers ARP and ping in a VLAN; routed
/// frames leave a trunk tagged with the egress VLAN.
#[test]
fn routes_through_vlan_interfaces() {
    require_root!();
    let bed = TestBed::new("l3svi", 4, 9000).expect("namespaces");
    let t = &bed.tester;
    for (ifn, addr) in [
        ("t2", "10.10.0.2/24"),
        ("t3", "10.3.0.2/24"),
        ("t4", "10.20.0.2/24"),
    ] {
        t.exec(&["ip", "addr", "add", addr, "dev", ifn]).unwrap();
    }
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        SVI_YAML,
        &["sw1", "sw2", "sw3", "sw4"],
    )
    .expect("start lanyard");
    let mut failures: Vec<String> = Vec::new();

    // The router in VLAN 10 answers ARP and ping (through the VLAN, its
    // port to the router, the TAP ly-vlan10 and back).
    let ping = t
        .exec(&[
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "2",
            "-I",
            "t2",
            "10.10.0.1",
        ])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if !ping.as_ref().is_ok_and(|s| s.contains(" 0% packet loss")) {
        failures.push(format!("ping 10.10.0.1 from t2 (VLAN 10): {ping:?}"));
    }

    let s10 = svi_mac(&sw, 10);
    let s20 = svi_mac(&sw, 20);
    let r3 = sw.router_mac("sw3");
    let m2 = bed.tester_mac("t2");
    let m3 = bed.tester_mac("t3");
    let m4 = bed.tester_mac("t4");
    let p1 = bed.open(1).unwrap();
    let p2 = bed.open(2).unwrap();
    let p3 = bed.open(3).unwrap();
    let p4 = bed.open(4).unwrap();

    // (name, sender, its frames' dst/src MACs, src, dst, receiver, the
    // dst/src MACs it must see)
    type Case<'a> = (
        &'a str,
        &'a RawPort,
        Mac,
        Mac,
        &'a str,
        &'a str,
        &'a RawPort,
        Mac,
        Mac,
    );
    let cases: [Case; 3] = [
        (
            "vlan10 -> routed",
            &p2,
            s10,
            m2,
            "10.10.0.2",
            "10.3.0.2",
            &p3,
            m3,
            r3,
        ),
        (
            "routed -> vlan10",
            &p3,
            r3,
            m3,
            "10.3.0.2",
            "10.10.0.2",
            &p2,
            m2,
            s10,
        ),
        (
            "vlan10 -> vlan20",
            &p2,
            s10,
            m2,
            "10.10.0.2",
            "10.20.0.2",
            &p4,
            m4,
            s20,
        ),
    ];
    for (k, (name, from, dmac, smac, src, dst, to, want_dst, want_src)) in
        cases.into_iter().enumerate()
    {
        let base = 100_000 * (k as u64 + 1);
        let frames: Vec<Vec<u8>> = (0..200u64)
            .map(|i| ip::udp(&dmac, &smac, a(src), a(dst), 64, base + i, 128))
            .collect();
        to.drain();
        send(from, &frames);
        let got: Vec<IpInfo> = collect(to, Duration::from_millis(500), Duration::from_secs(10))
            .into_iter()
            .filter(|p| p.seq.is_some_and(|s| s >= base && s < base + 200))
            .collect();
        let ok = got
            .iter()
            .filter(|p| {
                p.ttl == 63
                    && p.header_ok
                    && p.l4_ok
                    && p.dst_mac == want_dst
                    && p.src_mac == want_src
            })
            .count();
        if ok != 200 {
            failures.push(format!(
                "{name}: {ok} of 200 arrived intact (ttl 63, MACs rewritten); {} seen, e.g. {:?}",
                got.len(),
                got.first()
            ));
        }
    }

    // A VLAN-10 host reachable only over the trunk: routed frames to it
    // leave sw1 tagged with VLAN 10 (flooded: its MAC is not learned yet).
    let host: Mac = [0x02, 0, 0, 0, 0x0a, 0x32];
    bed.dut
        .exec(&[
            "ip",
            "neigh",
            "replace",
            "10.10.0.50",
            "lladdr",
            "02:00:00:00:0a:32",
            "dev",
            "ly-vlan10",
            "nud",
            "permanent",
        ])
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    p1.drain();
    let f = ip::udp(&r3, &m3, a("10.3.0.2"), a("10.10.0.50"), 64, 7, 128);
    p3.send(&f).unwrap();
    let mut tagged = None;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        match p1.recv_timeout(Duration::from_millis(500)).unwrap() {
            Some(fr) if fr.len() > 18 && fr[12..14] == [0x81, 0x00] && fr[0..6] == host => {
                tagged = Some(fr);
                break;
            }
            Some(_) => {}
            None => break,
        }
    }
    match tagged {
        Some(fr) if u16::from_be_bytes([fr[14], fr[15]]) & 0xfff == 10 => {
            let mut untagged = fr[..12].to_vec();
            untagged.extend_from_slice(&fr[16..]);
            match ip::parse(&untagged) {
                Some(p) if p.ttl == 63 && p.l4_ok && p.src_mac == s10 => {}
                other => failures.push(format!("trunk egress frame wrong: {other:?}")),
            }
        }
        other => failures.push(format!(
            "no VLAN-10-tagged routed frame on the trunk: {:?}",
            other.map(|f| testkit::frame::hex(&f, 32))
        )),
    }

    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}\ncounters: {}\nlog:\n{}",
        failures.len(),
        failures.join("\n"),
        sw.counters(),
        sw.log()
    );
}
