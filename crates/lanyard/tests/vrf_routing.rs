//! VRFs end to end on real interfaces (issue 18, docs/vrf.md), without
//! FRR: two VRFs with the same addresses and the same static route,
//! their TAP twins in namespaces of their own (ARP resolved by each VRF's
//! kernel), traffic from each VRF reaching only its own uplink and
//! neighbour; a prefix only one VRF has is unreachable from the other;
//! `show vrf` and `show ip route vrf NAME`.

use std::net::IpAddr;
use std::time::Duration;

use testkit::ip::{self, IpInfo};
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn collect(port: &RawPort, quiet: Duration, max: Duration) -> Vec<IpInfo> {
    port.recv_ip(quiet, max).expect("recv")
}

/// Removes the VRF namespaces Lanyard created (it runs in a mount
/// namespace of its own, so only the files are visible here).
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

#[test]
fn two_vrfs_with_the_same_addresses_stay_apart() {
    require_root!();
    let bed = TestBed::new("vrf", 4, 1500).expect("namespaces");
    let pid = std::process::id();
    let (ns_a, ns_b) = (format!("lyvrfa{pid}"), format!("lyvrfb{pid}"));
    let _cleanup = NsCleanup(vec![ns_a.clone(), ns_b.clone()]);
    // sw1/sw3: VRF CUSTA (customer, uplink); sw2/sw4: VRF CUSTB, with the
    // very same addresses and route. Only CUSTA routes 203.0.113.0/24.
    let yaml = format!(
        r#"
switch:
  name: vrf-test
ports:
  - name: sw1
    mode: routed
    addresses: [10.1.0.1/24]
  - name: sw2
    mode: routed
    addresses: [10.1.0.1/24]
  - name: sw3
    mode: routed
    addresses: [10.2.0.1/24]
  - name: sw4
    mode: routed
    addresses: [10.2.0.1/24]
vrfs:
  - name: CUSTA
    interfaces: [sw1, sw3]
    rd: 65000:1
    namespace: {ns_a}
  - name: CUSTB
    interfaces: [sw2, sw4]
    rd: 65000:2
    namespace: {ns_b}
routing:
  static-routes:
    - prefix: 198.51.100.0/24
      next-hop: 10.2.0.2
      vrf: CUSTA
    - prefix: 198.51.100.0/24
      next-hop: 10.2.0.2
      vrf: CUSTB
    - prefix: 203.0.113.0/24
      next-hop: 10.2.0.2
      vrf: CUSTA
"#
    );
    let t = &bed.tester;
    // The uplink neighbour 10.2.0.2 exists on both uplinks (answering ARP
    // with each interface's own MAC).
    for ifn in ["t3", "t4"] {
        t.exec(&["ip", "addr", "add", "10.2.0.2/24", "dev", ifn])
            .unwrap();
    }
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &["sw1", "sw2", "sw3", "sw4"],
    )
    .expect("start lanyard");
    let mut failures: Vec<String> = Vec::new();

    let (r1, r2) = (sw.router_mac("sw1"), sw.router_mac("sw2"));
    let (r3, r4) = (sw.router_mac("sw3"), sw.router_mac("sw4"));
    let (m1, m2) = (bed.tester_mac("t1"), bed.tester_mac("t2"));
    let (m3, m4) = (bed.tester_mac("t3"), bed.tester_mac("t4"));
    let ports = bed.open_all().unwrap();
    let (p1, p2, p3, p4) = (&ports[0], &ports[1], &ports[2], &ports[3]);

    // Glean 10.2.0.2 in each VRF: the first packets are punted to the VRF's
    // kernel, which resolves the neighbour on its own TAP twin.
    for (name, pin, rin, min, pout) in [("CUSTA", p1, &r1, &m1, p3), ("CUSTB", p2, &r2, &m2, p4)] {
        let mut ok = false;
        for k in 0..10u64 {
            let f = ip::udp(
                rin,
                min,
                a("10.1.0.2"),
                a("198.51.100.7"),
                64,
                90_000 + k,
                128,
            );
            pin.send(&f).unwrap();
            if collect(pout, Duration::from_millis(700), Duration::from_secs(2))
                .iter()
                .any(|p| p.seq.is_some_and(|s| s >= 90_000))
            {
                ok = true;
                break;
            }
        }
        if !ok {
            failures.push(format!("{name}: nothing reached the uplink while gleaning"));
        }
    }
    for p in &ports {
        p.drain();
    }

    // The same destination from both VRFs, interleaved.
    let n = 200u64;
    for k in 0..n {
        p1.send(&ip::udp(
            &r1,
            &m1,
            a("10.1.0.2"),
            a("198.51.100.7"),
            64,
            k,
            128,
        ))
        .unwrap();
        p2.send(&ip::udp(
            &r2,
            &m2,
            a("10.1.0.2"),
            a("198.51.100.7"),
            64,
            10_000 + k,
            128,
        ))
        .unwrap();
    }
    let on3 = collect(p3, Duration::from_millis(500), Duration::from_secs(10));
    let on4 = collect(p4, Duration::from_millis(500), Duration::from_secs(10));
    for (name, got, lo, mac_to, mac_from, other) in [
        ("CUSTA on sw3", &on3, 0u64, m3, r3, 10_000u64),
        ("CUSTB on sw4", &on4, 10_000, m4, r4, 0),
    ] {
        let mine: Vec<&IpInfo> = got
            .iter()
            .filter(|p| p.seq.is_some_and(|s| (lo..lo + n).contains(&s)))
            .collect();
        let foreign = got
            .iter()
            .filter(|p| p.seq.is_some_and(|s| (other..other + n).contains(&s)))
            .count();
        let bad = mine
            .iter()
            .filter(|p| p.ttl != 63 || !p.header_ok || p.dst_mac != mac_to || p.src_mac != mac_from)
            .count();
        if mine.len() as u64 != n || bad != 0 || foreign != 0 {
            failures.push(format!(
                "{name}: {} of {n} own packets ({bad} with wrong MACs/TTL/checksum), {foreign} of the other VRF's",
                mine.len()
            ));
        }
    }

    // Only CUSTA routes 203.0.113.0/24: from CUSTB it is unreachable (ICMP
    // from CUSTB's 10.1.0.1), and nothing leaves either uplink.
    for p in &ports {
        p.drain();
    }
    p2.send(&ip::udp(
        &r2,
        &m2,
        a("10.1.0.2"),
        a("203.0.113.9"),
        64,
        777,
        128,
    ))
    .unwrap();
    let back = collect(p2, Duration::from_millis(500), Duration::from_secs(3));
    if !back
        .iter()
        .any(|p| p.proto == 1 && p.packet.get(20) == Some(&3) && p.src == a("10.1.0.1"))
    {
        failures.push(format!(
            "CUSTB: no ICMP unreachable for 203.0.113.9: {back:?}"
        ));
    }
    let leaked = collect(p3, Duration::from_millis(300), Duration::from_secs(1))
        .into_iter()
        .chain(collect(
            p4,
            Duration::from_millis(300),
            Duration::from_secs(1),
        ))
        .filter(|p| p.seq == Some(777))
        .count();
    if leaked != 0 {
        failures.push(format!(
            "203.0.113.9 from CUSTB left an uplink {leaked} times"
        ));
    }

    // show vrf / show ip route vrf NAME.
    let vrfs = sw.show_json(&["show", "vrf"]);
    let names: Vec<&str> = vrfs
        .as_array()
        .map(|a| a.iter().filter_map(|v| v["name"].as_str()).collect())
        .unwrap_or_default();
    if names != ["default", "CUSTA", "CUSTB"]
        || vrfs[1]["table"] != 1001
        || vrfs[2]["rd"] != "65000:2"
    {
        failures.push(format!("show vrf: {vrfs}"));
    }
    let rb = sw.show_json(&["show", "ip", "route", "vrf", "CUSTB"]);
    let prefixes: Vec<&str> = rb["routes"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["prefix"].as_str()).collect())
        .unwrap_or_default();
    if !prefixes.contains(&"198.51.100.0/24")
        || !prefixes.contains(&"10.1.0.0/24")
        || prefixes.contains(&"203.0.113.0/24")
    {
        failures.push(format!("show ip route vrf CUSTB: {rb}"));
    }
    let text = sw
        .cli(&["show", "ip", "route", "vrf", "CUSTA"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if !text.contains("VRF CUSTA (table 1001)") || !text.contains("203.0.113.0/24") {
        failures.push(format!("show ip route vrf CUSTA (text):\n{text}"));
    }
    if sw
        .try_show_json(&["show", "ip", "route", "vrf", "NOPE"])
        .is_ok()
    {
        failures.push("show ip route vrf NOPE answered".into());
    }

    assert!(
        failures.is_empty(),
        "{}\nlog:\n{}",
        failures.join("\n"),
        sw.log()
    );
}
