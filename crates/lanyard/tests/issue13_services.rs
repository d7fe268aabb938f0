//! Issue 13, items 1 and 2, on real frames through namespaces.
//!
//! Fragments: random IPv4 and IPv6 access lists (in and out, on a port, a
//! VLAN and routed ports) and class-map lines meet datagrams cut into
//! fragments; what arrives, and with which DSCP, must be what testkit's
//! own linear reference (`testkit::acl`, the fragment policy of
//! docs/acl.md) says, fragment by fragment. The issue's own list
//! (`deny udp 203.0.113.0/24 destination-port 0-1023; permit`) is the
//! port's input list: the later fragments of a permitted datagram to port
//! 5000 must pass.
//!
//! Counters: a list and a policy attached to two ports count each port
//! apart (`show access-lists interface`, `show policy-map interface`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use testkit::acl::{self, Packet, Rule};
use testkit::frame::Mac;
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

/// xorshift64*: the test's own seeded randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
}

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const SRC4: [&str; 4] = ["192.0.2.1", "192.0.2.77", "203.0.113.5", "203.0.113.200"];
const DST4: [&str; 3] = ["198.51.100.1", "198.51.100.9", "198.51.100.130"];
const SRC6: [&str; 3] = ["2001:db8:a::1", "2001:db8:a::77", "2001:db8:b::5"];
const DST6: [&str; 3] = ["2001:db8:99::1", "2001:db8:99::9", "2001:db8:99:1::5"];
/// Ranges rules use: many contain port 0, the port a non-initial
/// fragment's key carried before the fix.
const RANGES: [(u16, u16); 8] = [
    (0, 1023),
    (1, 1023),
    (53, 53),
    (5000, 5000),
    (1024, 65535),
    (0, 0),
    (80, 443),
    (0, 5000),
];
const PORTS: [u16; 6] = [53, 80, 443, 5000, 8080, 40000];

fn pools(v6: bool) -> (&'static [&'static str], &'static [&'static str]) {
    if v6 {
        (&SRC6, &DST6)
    } else {
        (&SRC4, &DST4)
    }
}

fn prefix(r: &mut Rng, pool: &[&str], v6: bool) -> Option<(IpAddr, u8)> {
    if !r.chance(40) {
        return None;
    }
    let addr = a(r.pick(pool));
    let len = if v6 {
        r.pick(&[32u8, 48, 64, 128])
    } else {
        r.pick(&[8u8, 24, 32])
    };
    // Zero the host bits (the config refuses them).
    let net = match addr {
        IpAddr::V4(x) => {
            let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            IpAddr::from((u32::from(x) & m).to_be_bytes())
        }
        IpAddr::V6(x) => {
            let m = u128::MAX << (128 - len);
            IpAddr::from((u128::from(x) & m).to_be_bytes())
        }
    };
    Some((net, len))
}

/// A random rule of family `v6`; `line` rules (class-map lines) carry no
/// action.
fn rule(r: &mut Rng, v6: bool) -> Rule {
    let (src, dst) = pools(v6);
    let icmp = if v6 { 58 } else { 1 };
    let mut x = Rule {
        permit: r.chance(55),
        src: prefix(r, src, v6),
        dst: prefix(r, dst, v6),
        ..Rule::default()
    };
    match r.below(100) {
        0..=29 => {}
        30..=64 => x.proto = Some(17),
        65..=84 => x.proto = Some(6),
        _ => x.proto = Some(icmp),
    }
    match x.proto {
        Some(6) | Some(17) => {
            if r.chance(20) {
                x.sport = Some(r.pick(&RANGES));
            }
            if r.chance(60) {
                x.dport = Some(r.pick(&RANGES));
            }
        }
        Some(_) if r.chance(40) => {
            x.icmp_type = Some(r.pick(&if v6 { [128u8, 129] } else { [8u8, 0] }));
        }
        _ => {}
    }
    // `ISSUE13_PLAIN_RULES=1` leaves the (new) `fragments` field out, to
    // run the test against a build that does not know it.
    if !x.tests_l4() && r.chance(10) && std::env::var_os("ISSUE13_PLAIN_RULES").is_none() {
        x.fragments = true;
    }
    if x.src.is_none() && x.dst.is_none() && x.proto.is_none() && !x.fragments {
        // An `any` rule this early would hide the rest of the list.
        x.proto = Some(17);
        x.dport = Some((0, 1023));
    }
    x
}

fn random_list(r: &mut Rng, v6: bool, n: usize, end_permit: bool) -> Vec<Rule> {
    let mut rules: Vec<Rule> = (0..n).map(|_| rule(r, v6)).collect();
    if end_permit {
        rules.push(Rule {
            permit: true,
            ..Rule::default()
        });
    }
    rules
}

fn list_yaml(name: &str, v6: bool, rules: &[Rule]) -> String {
    let mut s = format!(
        "  - name: {name}\n    type: {}\n    rules:\n",
        if v6 { "ipv6" } else { "ipv4" }
    );
    for x in rules {
        s += &format!("      - {}\n", x.yaml(true));
    }
    s
}

/// The issue's list: `deny udp 203.0.113.0/24 destination-port 0-1023;
/// permit` (IPv6: 2001:db8:b::/48).
fn issue_list(v6: bool) -> Vec<Rule> {
    let net = if v6 {
        (a("2001:db8:b::"), 48)
    } else {
        (a("203.0.113.0"), 24)
    };
    vec![
        Rule {
            permit: false,
            proto: Some(17),
            src: Some(net),
            dport: Some((0, 1023)),
            ..Rule::default()
        },
        Rule {
            permit: true,
            ..Rule::default()
        },
    ]
}

/// One test datagram: its fragments (or one whole frame) and a tag.
struct Datagram {
    frames: Vec<Vec<u8>>,
}

/// `n` random datagrams from `src_mac` to `dst_mac`, two thirds of them in
/// three fragments; tags from `tag0`. The first is the issue's: UDP from
/// 203.0.113.5 (2001:db8:b::5) to port 5000, fragmented.
fn traffic(
    r: &mut Rng,
    v6: bool,
    dst_mac: &Mac,
    src_mac: &Mac,
    n: usize,
    tag0: u32,
) -> Vec<Datagram> {
    let (srcs, dsts) = pools(v6);
    let icmp = if v6 { 58 } else { 1 };
    (0..n)
        .map(|i| {
            let tag = tag0 + i as u32;
            let (src, proto, sport, dport, frag) = if i == 0 {
                (
                    a(if v6 { "2001:db8:b::5" } else { "203.0.113.5" }),
                    17,
                    40000,
                    5000,
                    true,
                )
            } else {
                let proto = r.pick(&[17u8, 17, 17, 6, 6, icmp]);
                let (sp, dp) = if proto == icmp {
                    let t = r.pick(&if v6 { [128u16, 129] } else { [8u16, 0] });
                    (t, 0)
                } else {
                    (r.pick(&PORTS), r.pick(&PORTS))
                };
                (a(r.pick(srcs)), proto, sp, dp, !r.chance(33))
            };
            let dst = a(r.pick(dsts));
            let (len, cut) = if frag { (300, 128) } else { (60, 1000) };
            let payload = acl::l4_payload(proto, sport, dport, len);
            Datagram {
                frames: acl::datagram(dst_mac, src_mac, src, dst, proto, &payload, cut, tag, 0),
            }
        })
        .collect()
}

/// Every test frame `port` receives (tag range `tags`) until quiet.
fn collect(port: &RawPort, tags: std::ops::Range<u32>, want: usize) -> Vec<Packet> {
    let mut out = Vec::new();
    let start = Instant::now();
    let mut quiet = Duration::from_secs(5);
    while start.elapsed() < Duration::from_secs(30) {
        match port.recv_timeout(quiet).expect("recv") {
            Some(f) => {
                if let Some(p) = acl::dissect(&f) {
                    if tags.contains(&p.tag) {
                        out.push(p);
                        quiet = if out.len() >= want {
                            Duration::from_millis(300)
                        } else {
                            Duration::from_millis(1500)
                        };
                    }
                }
            }
            None => break,
        }
    }
    out
}

fn send(port: &RawPort, dgrams: &[Datagram]) {
    let frames: Vec<&Vec<u8>> = dgrams.iter().flat_map(|d| d.frames.iter()).collect();
    port.send_paced(frames.len(), 20_000, |k, b| {
        b.clear();
        b.extend_from_slice(frames[k]);
    })
    .expect("send");
}

type FragId = (u32, u16);

/// Compare what arrived (tag, offset → DSCP) with what the reference
/// says; describe every difference (a few examples).
fn compare(
    what: &str,
    sent: &[Datagram],
    got: &[Packet],
    expect: impl Fn(&Packet) -> Option<u8>,
) -> Vec<String> {
    let mut want: BTreeMap<FragId, (Packet, u8)> = BTreeMap::new();
    for d in sent {
        for f in &d.frames {
            let p = acl::dissect(f).expect("own frame");
            if let Some(dscp) = expect(&p) {
                want.insert((p.tag, p.offset), (p, dscp));
            }
        }
    }
    let have: BTreeMap<FragId, &Packet> = got.iter().map(|p| ((p.tag, p.offset), p)).collect();
    let mut errs = Vec::new();
    let missing: Vec<&Packet> = want
        .iter()
        .filter(|(k, _)| !have.contains_key(k))
        .map(|(_, (p, _))| p)
        .collect();
    let extra: Vec<&&Packet> = have
        .iter()
        .filter(|(k, _)| !want.contains_key(k))
        .map(|(_, p)| p)
        .collect();
    let remarked: Vec<(&Packet, u8)> = have
        .iter()
        .filter_map(|(k, p)| {
            want.get(k)
                .filter(|(_, d)| *d != p.dscp)
                .map(|(_, d)| (*p, *d))
        })
        .collect();
    if !missing.is_empty() {
        errs.push(format!(
            "{what}: {} frames missing (the reference passes them), e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(3)]
        ));
    }
    if !extra.is_empty() {
        errs.push(format!(
            "{what}: {} frames passed that the reference denies, e.g. {:?}",
            extra.len(),
            &extra[..extra.len().min(3)]
        ));
    }
    if !remarked.is_empty() {
        errs.push(format!(
            "{what}: {} frames with the wrong DSCP (got, want), e.g. {:?}",
            remarked.len(),
            &remarked[..remarked.len().min(3)]
        ));
    }
    let later = want.values().filter(|(p, _)| p.later_fragment).count();
    eprintln!(
        "{what}: {} frames sent, {} expected ({later} of them non-initial fragments), {} arrived",
        sent.iter().map(|d| d.frames.len()).sum::<usize>(),
        want.len(),
        got.len()
    );
    let distinct: BTreeSet<FragId> = got.iter().map(|p| (p.tag, p.offset)).collect();
    if distinct.len() != got.len() {
        errs.push(format!("{what}: duplicated frames"));
    }
    errs
}

/// Class lines of a two-class input policy: (class, lines, DSCP set).
fn classes(r: &mut Rng) -> Vec<(String, Vec<Rule>, u8)> {
    (0..2)
        .map(|c| {
            let lines: Vec<Rule> = (0..3)
                .map(|k| {
                    let mut x = rule(r, k == 2);
                    x.permit = false;
                    if k == 0 {
                        // The issue's class shape: a 0-based port range.
                        x.proto = Some(17);
                        x.dport = Some((0, 1023));
                        x.fragments = false;
                    }
                    x
                })
                .collect();
            (format!("c{c}"), lines, [8u8, 16][c])
        })
        .collect()
}

/// Issue 13 item 1: fragments through port, VLAN and routed lists in and
/// out, IPv4 and IPv6, and through class-map lines, against the
/// reference.
#[test]
fn issue13_fragments_follow_the_policy_on_real_frames() {
    require_root!();
    let seed: u64 = std::env::var("ISSUE13_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(13);
    let mut r = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
    let bed = TestBed::new("i13fr", 4, 1500).expect("namespaces");
    let t = &bed.tester;
    for (i, v4, v6) in [
        (3, "10.3.0.2/24", "2001:db8:3::2/64"),
        (4, "10.4.0.2/24", "2001:db8:4::2/64"),
    ] {
        let ifn = format!("t{i}");
        t.exec(&["ip", "addr", "add", v4, "dev", &ifn]).unwrap();
        t.sysctl(&format!("net.ipv6.conf.{ifn}.disable_ipv6"), "0")
            .unwrap();
        t.exec(&["ip", "addr", "add", v6, "dev", &ifn, "nodad"])
            .unwrap();
    }
    // Lists: the issue's on sw1 in; random ones on VLAN 10 out and on the
    // routed ports in (sw3) and out (sw4).
    let pin = [issue_list(false), issue_list(true)];
    let vout = [
        random_list(&mut r, false, 8, true),
        random_list(&mut r, true, 8, true),
    ];
    let (end4, end6) = (r.chance(50), r.chance(50));
    let rin = [
        random_list(&mut r, false, 10, end4),
        random_list(&mut r, true, 10, true),
    ];
    let rout = [
        random_list(&mut r, false, 10, true),
        random_list(&mut r, true, 10, end6),
    ];
    let cls = classes(&mut r);
    let mut y = String::from("switch:\n  name: i13-frag\naccess-lists:\n");
    for (fam, v6) in [(0, false), (1, true)] {
        let sfx = if v6 { "6" } else { "4" };
        y += &list_yaml(&format!("pin{sfx}"), v6, &pin[fam]);
        y += &list_yaml(&format!("vout{sfx}"), v6, &vout[fam]);
        y += &list_yaml(&format!("rin{sfx}"), v6, &rin[fam]);
        y += &list_yaml(&format!("rout{sfx}"), v6, &rout[fam]);
    }
    y += "class-maps:\n";
    for (name, lines, _) in &cls {
        y += &format!("  - name: {name}\n    match:\n");
        for l in lines {
            y += &format!("      - {}\n", l.yaml(false));
        }
    }
    y += "policy-maps:\n  - name: mark\n    classes:\n";
    for (name, _, dscp) in &cls {
        y += &format!("      - {{class: {name}, set-dscp: {dscp}}}\n");
    }
    y += r#"vlans:
  - id: 10
    acl-out: [vout4, vout6]
ports:
  - {name: sw1, vlan: 10, acl-in: [pin4, pin6]}
  - {name: sw2, vlan: 10, policy-in: mark}
  - name: sw3
    mode: routed
    addresses: [10.3.0.1/24, 2001:db8:3::1/64]
    acl-in: [rin4, rin6]
  - name: sw4
    mode: routed
    addresses: [10.4.0.1/24, 2001:db8:4::1/64]
    acl-out: [rout4, rout6]
routing:
  static-routes:
    - {prefix: 198.51.100.0/24, next-hop: 10.4.0.2}
    - {prefix: "2001:db8:99::/48", next-hop: "2001:db8:4::2"}
"#;
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &y,
        &["sw1", "sw2", "sw3", "sw4"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("tester sockets");
    let (m1, m2, m3) = (
        bed.tester_mac("t1"),
        bed.tester_mac("t2"),
        bed.tester_mac("t3"),
    );
    let r3 = sw.router_mac("sw3");
    // The router resolves t4 (the next hop of both static routes): t4
    // pings it, which teaches the router's kernel t4's address.
    for dst in ["10.4.0.1", "2001:db8:4::1"] {
        let _ = t.exec(&["ping", "-c", "2", "-i", "0.2", "-W", "2", "-I", "t4", dst]);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let arp = sw.show_json(&["show", "arp"]).to_string();
        let nd = sw.show_json(&["show", "ipv6", "neighbors"]).to_string();
        if arp.contains("10.4.0.2") && nd.contains("2001:db8:4::2") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for p in &ports {
        p.drain();
    }
    let mut failures = Vec::new();
    for (fam, v6) in [(0usize, false), (1, true)] {
        let family = if v6 { 6 } else { 4 };
        let base = 1000 + fam as u32 * 10_000;
        // Switched, t1 → t2: the port's input list, then the VLAN's output list.
        let d12 = traffic(&mut r, v6, &m2, &m1, 120, base);
        // Switched, t2 → t1 through the input policy: the VLAN's output list decides, the class the DSCP.
        let d21 = traffic(&mut r, v6, &m1, &m2, 120, base + 1000);
        // Routed, t3 → t4: routed input and output lists.
        let d34 = traffic(&mut r, v6, &r3, &m3, 120, base + 2000);
        let n = |d: &[Datagram]| d.iter().map(|x| x.frames.len()).sum::<usize>();

        send(&ports[0], &d12);
        let got = collect(&ports[1], base..base + 1000, n(&d12));
        let pass =
            |p: &Packet| acl::decide(&pin[fam], family, p) && acl::decide(&vout[fam], family, p);
        failures.extend(compare(
            &format!("IPv{family} switched t1→t2 (sw1 in, vlan 10 out)"),
            &d12,
            &got,
            |p| pass(p).then_some(0),
        ));
        // The issue's datagram: UDP to port 5000 from the denied network,
        // every fragment through sw1's list.
        let first: Vec<&Packet> = got.iter().filter(|p| p.tag == base).collect();
        let vout_ok = d12[0]
            .frames
            .iter()
            .all(|f| acl::decide(&vout[fam], family, &acl::dissect(f).unwrap()));
        if vout_ok && first.len() != d12[0].frames.len() {
            failures.push(format!(
                "IPv{family}: {} of the {} fragments of the issue's UDP datagram to port 5000 arrived",
                first.len(),
                d12[0].frames.len()
            ));
        }

        send(&ports[1], &d21);
        let got = collect(&ports[0], base + 1000..base + 2000, n(&d21));
        failures.extend(compare(
            &format!("IPv{family} switched t2→t1 (sw2 policy in, vlan 10 out)"),
            &d21,
            &got,
            |p| {
                acl::decide(&vout[fam], family, p).then(|| {
                    cls.iter()
                        .find(|(_, lines, _)| lines.iter().any(|l| acl::class_line_matches(l, p)))
                        .map_or(0, |c| c.2)
                })
            },
        ));

        send(&ports[2], &d34);
        let got = collect(&ports[3], base + 2000..base + 3000, n(&d34));
        failures.extend(compare(
            &format!("IPv{family} routed t3→t4 (sw3 in, sw4 out)"),
            &d34,
            &got,
            |p| {
                (acl::decide(&rin[fam], family, p) && acl::decide(&rout[fam], family, p))
                    .then_some(0)
            },
        ));
    }
    if !failures.is_empty() {
        eprintln!("seed {seed}; config:\n{y}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn port_acl(sw: &Switch, port: &str, list: &str) -> serde_json::Value {
    let v = sw.show_json(&["show", "access-lists", "interface", port, "all"]);
    v.as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == list).cloned())
        .unwrap_or_else(|| panic!("no list {list} on {port}: {v}"))
}

/// Issue 13 item 2: a list and a policy on two ports count per port: 10
/// frames into sw1 show under sw1 only, 4 into sw2 under sw2 only, and
/// `show access-lists` sums them.
#[test]
fn issue13_counters_per_port_and_direction() {
    require_root!();
    let bed = TestBed::new("i13ct", 3, 1500).expect("namespaces");
    let y = r#"switch:
  name: i13-count
access-lists:
  - name: web
    rules:
      - {action: deny, protocol: udp, destination-port: 9}
      - {action: permit}
class-maps:
  - name: dns
    match: [{protocol: udp, destination-port: 53}]
policy-maps:
  - name: edge
    classes:
      - {class: dns, set-dscp: af21}
ports:
  - {name: sw1, vlan: 10, acl-in: [web], policy-in: edge}
  - {name: sw2, vlan: 10, acl-in: [web], policy-in: edge}
  - {name: sw3, vlan: 10, acl-out: [web]}
vlans:
  - id: 10
"#;
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        y,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("tester sockets");
    let m3 = bed.tester_mac("t3");
    let udp = |src: &Mac, dport: u16, tag: u32| {
        let pl = acl::l4_payload(17, 1000, dport, 40);
        acl::datagram(
            &m3,
            src,
            a("192.0.2.1"),
            a("192.0.2.3"),
            17,
            &pl,
            1000,
            tag,
            0,
        )
        .remove(0)
    };
    let (m1, m2) = (bed.tester_mac("t1"), bed.tester_mac("t2"));
    for k in 0..10 {
        ports[0].send(&udp(&m1, 53, k)).unwrap();
    }
    for k in 0..4 {
        ports[1].send(&udp(&m2, 53, 100 + k)).unwrap();
        ports[1].send(&udp(&m2, 9, 200 + k)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(800));
    let pm = sw.show_json(&["show", "policy-map", "interface"]);
    let class_pkts = |port: &str| {
        pm.as_array()
            .and_then(|a| {
                a.iter()
                    .find(|x| x["port"] == port && x["direction"] == "in")
            })
            .map(|x| x["classes"][0]["packets"].as_u64().unwrap_or(0))
            .unwrap_or_else(|| panic!("no policy on {port}: {pm}"))
    };
    let mut failures = Vec::new();
    if (class_pkts("sw1"), class_pkts("sw2")) != (10, 4) {
        failures.push(format!(
            "policy-map class dns: sw1 {} sw2 {}, want 10 and 4",
            class_pkts("sw1"),
            class_pkts("sw2")
        ));
    }
    let hits = |v: &serde_json::Value, seq: usize| v["entries"][seq]["hits"].as_u64().unwrap_or(0);
    let (a1, a2, a3) = (
        port_acl(&sw, "sw1", "web"),
        port_acl(&sw, "sw2", "web"),
        port_acl(&sw, "sw3", "web"),
    );
    let got = [
        (hits(&a1, 0), hits(&a1, 1)),
        (hits(&a2, 0), hits(&a2, 1)),
        (hits(&a3, 0), hits(&a3, 1)),
    ];
    // sw3 out sees the 14 permitted copies (unicast to t3's MAC after it
    // is known, else flooded: sw3 gets each exactly once either way).
    if got != [(0, 10), (4, 4), (0, 14)] || a3["direction"] != "out" {
        failures.push(format!(
            "per-port hits (deny, permit): {got:?}, want [(0, 10), (4, 4), (0, 14)]"
        ));
    }
    let total = sw.show_json(&["show", "access-lists", "web", "all"]);
    if (hits(&total[0], 0), hits(&total[0], 1)) != (4, 28) {
        failures.push(format!("show access-lists web: {total}"));
    }
    let text = sw
        .cli(&["show", "access-lists", "interface", "sw2"])
        .expect("cli");
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    if !text.contains("sw2 in") || !text.contains("(4 matches)") {
        failures.push(format!("show access-lists interface sw2:\n{text}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
