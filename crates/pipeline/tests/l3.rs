//! The layer-3 stage against hand-built tables and frames made with the
//! wire crate's Reprs.

use io::FrameBatch;
use pipeline::l3::{
    build_icmp4_error, build_icmp4_time_exceeded, build_icmp6_error, build_icmp6_time_exceeded,
    process_l3, IcmpKind, L3Counters, L3Drop, L3Tables, L3Verdict, L3Verdicts, Punt,
    RouterInterface, Urpf,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use tables::{
    Group, Lpm4, Lpm6, Neighbor, NeighborState, NeighborTable, NextHop, NextHopTable, GROUP_BIT,
};
use wire::{
    checksum, EtherType, EthernetFrame, EthernetRepr, IcmpPacket, IcmpRepr, Icmpv6Packet,
    Icmpv6Repr, IpPair, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, MacAddress,
};

fn rmac(port: u16) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, 0x10 + port as u8]
}
const HOST: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 5];

fn v4(s: &str) -> u32 {
    u32::from(s.parse::<Ipv4Addr>().unwrap())
}
fn v6(s: &str) -> u128 {
    u128::from(s.parse::<Ipv6Addr>().unwrap())
}
fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn iface(port: u16, a4: &str, a6: &[&str], mtu: u16, urpf: Urpf) -> RouterInterface {
    RouterInterface {
        port,
        mac: rmac(port),
        v4: vec![(v4(a4), 24)],
        v6: a6.iter().map(|a| (v6(a), 64)).collect(),
        mtu,
        urpf,
        vlan: None,
        vrf: 0,
    }
}

fn neigh_mac(i: u8) -> [u8; 6] {
    [0x02, 0xbb, 0, 0, 0, i]
}

/// Ports 0 (strict uRPF), 1 (loose), 2 (strict), 3 (MTU 600, off).
/// Routes: connected 10.0.0.0/24 (port 0), 10.0.1.0/24 (port 1),
/// 2001:db8::/64 (port 0), 2001:db8:1::/64 (port 1); 192.168.0.0/16 via
/// 10.0.2.254 (port 2); 172.16.0.0/12 ECMP via 10.0.2.254 (port 2) and
/// 10.0.1.254 (port 1); 198.51.100.0/24 via 10.0.3.254 (port 3);
/// 2001:db8:100::/48 via 2001:db8:2::fe (port 2); 2001:db8:300::/48 via
/// 2001:db8:3::fe (port 3); default via 10.0.2.254 if `default`.
fn tables(default: bool) -> L3Tables {
    let fib4 = Lpm4::with_nodes(256);
    let fib6 = Lpm6::with_nodes(1024);
    let nh = NextHopTable::new(16, 4);
    let nb = NeighborTable::new(64);
    let hop = |port, gw: Option<&str>| NextHop {
        port,
        gateway: gw.map(ip),
    };
    nh.set(0, hop(0, None)).unwrap();
    nh.set(1, hop(1, None)).unwrap();
    nh.set(2, hop(2, Some("10.0.2.254"))).unwrap();
    nh.set(3, hop(3, Some("10.0.3.254"))).unwrap();
    nh.set(4, hop(2, Some("2001:db8:2::fe"))).unwrap();
    nh.set(5, hop(1, Some("10.0.1.254"))).unwrap();
    nh.set(6, hop(3, Some("2001:db8:3::fe"))).unwrap();
    let g = nh
        .set_group(
            0,
            &Group {
                members: vec![2, 5],
            },
        )
        .unwrap();
    assert_eq!(g, GROUP_BIT);
    fib4.insert(v4("10.0.0.0"), 24, 0).unwrap();
    fib4.insert(v4("10.0.1.0"), 24, 1).unwrap();
    fib4.insert(v4("192.168.0.0"), 16, 2).unwrap();
    fib4.insert(v4("172.16.0.0"), 12, g).unwrap();
    fib4.insert(v4("198.51.100.0"), 24, 3).unwrap();
    if default {
        fib4.insert(0, 0, 2).unwrap();
    }
    fib6.insert(v6("2001:db8::"), 64, 0).unwrap();
    fib6.insert(v6("2001:db8:1::"), 64, 1).unwrap();
    fib6.insert(v6("2001:db8:100::"), 48, 4).unwrap();
    fib6.insert(v6("2001:db8:300::"), 48, 6).unwrap();
    let reach = |mac, port| Neighbor {
        mac,
        port,
        state: NeighborState::Reachable,
        confirmed: 0,
    };
    nb.upsert(ip("10.0.0.5"), reach(neigh_mac(1), 0));
    nb.upsert(ip("10.0.1.7"), reach(neigh_mac(2), 1));
    nb.upsert(ip("10.0.2.254"), reach(neigh_mac(3), 2));
    nb.upsert(ip("10.0.1.254"), reach(neigh_mac(4), 1));
    nb.upsert(ip("10.0.3.254"), reach(neigh_mac(5), 3));
    nb.upsert(ip("2001:db8:2::fe"), reach(neigh_mac(6), 2));
    nb.upsert(ip("2001:db8:1::7"), reach(neigh_mac(7), 1));
    nb.upsert(ip("2001:db8:3::fe"), reach(neigh_mac(8), 3));
    nb.upsert(
        ip("10.0.1.8"),
        Neighbor {
            state: NeighborState::Stale,
            ..reach(neigh_mac(9), 1)
        },
    );
    nb.upsert(ip("10.0.0.6"), Neighbor::incomplete(0, 0));
    L3Tables::new(
        Arc::new(fib4),
        Arc::new(fib6),
        Arc::new(nh),
        Arc::new(nb),
        vec![
            iface(
                0,
                "10.0.0.1",
                &["2001:db8::1", "fe80::1"],
                1500,
                Urpf::Strict,
            ),
            iface(
                1,
                "10.0.1.1",
                &["fe80::1", "2001:db8:1::1"],
                1500,
                Urpf::Loose,
            ),
            iface(2, "10.0.2.1", &["2001:db8:2::1"], 1500, Urpf::Strict),
            iface(3, "10.0.3.1", &["2001:db8:3::1"], 600, Urpf::Off),
        ],
    )
}

struct P4 {
    dst_mac: [u8; 6],
    src: &'static str,
    dst: &'static str,
    ttl: u8,
    proto: u8,
    len: usize,
    df: bool,
    sport: u16,
}

impl Default for P4 {
    fn default() -> Self {
        P4 {
            dst_mac: rmac(0),
            src: "10.0.0.5",
            dst: "10.0.1.7",
            ttl: 64,
            proto: 17,
            len: 64,
            df: true,
            sport: 1000,
        }
    }
}

fn ports_payload(payload: &mut [u8], sport: u16) {
    for (k, b) in payload.iter_mut().enumerate() {
        *b = k as u8 ^ 0x5a;
    }
    if payload.len() >= 4 {
        payload[0..2].copy_from_slice(&sport.to_be_bytes());
        payload[2..4].copy_from_slice(&53u16.to_be_bytes());
    }
}

/// An Ethernet + IPv4 frame of `len` bytes (header + payload), from HOST.
fn frame4(p: &P4) -> Vec<u8> {
    let mut f = vec![0u8; 14 + p.len];
    EthernetRepr {
        src_addr: MacAddress(HOST),
        dst_addr: MacAddress(p.dst_mac),
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]))
    .unwrap();
    Ipv4Repr {
        src_addr: p.src.parse().unwrap(),
        dst_addr: p.dst.parse().unwrap(),
        protocol: IpProtocol::from(p.proto),
        payload_len: p.len - 20,
        ttl: p.ttl,
        dscp: wire::Dscp::from_tos(0),
        ecn: wire::Ecn::from_bits(0),
        ident: 0x1234,
        dont_frag: p.df,
        more_frags: false,
        frag_offset: 0,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]))
    .unwrap();
    ports_payload(&mut f[34..], p.sport);
    f
}

struct P6 {
    dst_mac: [u8; 6],
    src: &'static str,
    dst: &'static str,
    hops: u8,
    nh: u8,
    len: usize,
    sport: u16,
}

impl Default for P6 {
    fn default() -> Self {
        P6 {
            dst_mac: rmac(0),
            src: "2001:db8::5",
            dst: "2001:db8:100::9",
            hops: 64,
            nh: 17,
            len: 80,
            sport: 1000,
        }
    }
}

fn frame6(p: &P6) -> Vec<u8> {
    let mut f = vec![0u8; 14 + p.len];
    EthernetRepr {
        src_addr: MacAddress(HOST),
        dst_addr: MacAddress(p.dst_mac),
        ethertype: EtherType::Ipv6,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]))
    .unwrap();
    Ipv6Repr {
        src_addr: p.src.parse().unwrap(),
        dst_addr: p.dst.parse().unwrap(),
        next_header: IpProtocol::from(p.nh),
        payload_len: p.len - 40,
        hop_limit: p.hops,
        dscp: wire::Dscp::from_tos(0),
        ecn: wire::Ecn::from_bits(0),
        flow_label: 7,
    }
    .emit(&mut Ipv6Packet::new_unchecked(&mut f[14..]))
    .unwrap();
    ports_payload(&mut f[54..], p.sport);
    f
}

/// Run the stage over `(port, frame)` pairs; verdicts and rewritten frames.
fn run_with(
    t: &L3Tables,
    c: &L3Counters,
    frames: &[(u16, Vec<u8>)],
) -> (Vec<L3Verdict>, Vec<Vec<u8>>) {
    let mut b = FrameBatch::new();
    for (p, f) in frames {
        assert!(b.push(*p, f));
    }
    let mut out = L3Verdicts::default();
    process_l3(t, &mut b, &mut out, c);
    assert_eq!(out.len, frames.len());
    (
        out.v[..out.len].to_vec(),
        (0..b.len()).map(|i| b.frame(i).to_vec()).collect(),
    )
}

fn one(t: &L3Tables, port: u16, f: Vec<u8>) -> (L3Verdict, Vec<u8>) {
    let c = L3Counters::default();
    let (v, mut f) = run_with(t, &c, &[(port, f)]);
    (v[0], f.pop().unwrap())
}

fn verdict(t: &L3Tables, port: u16, f: Vec<u8>) -> L3Verdict {
    one(t, port, f).0
}

fn full_checksum(hdr: &[u8]) -> u16 {
    let mut h = hdr.to_vec();
    h[10] = 0;
    h[11] = 0;
    checksum::finish(checksum::sum(&h))
}

#[test]
fn forwards_v4_connected_with_exact_rewrite() {
    let t = tables(true);
    let orig = frame4(&P4::default());
    let (v, f) = one(&t, 0, orig.clone());
    assert_eq!(v, L3Verdict::Forward { port: 1 });
    assert_eq!(f[0..6], neigh_mac(2));
    assert_eq!(f[6..12], rmac(1));
    assert_eq!(f[12..14], orig[12..14]);
    assert_eq!(f[14 + 8], 63);
    let p = Ipv4Packet::new_checked(&f[14..]).unwrap();
    assert!(p.verify_checksum());
    assert_eq!(p.checksum(), full_checksum(&f[14..34]));
    assert_ne!(
        p.checksum(),
        Ipv4Packet::new_checked(&orig[14..]).unwrap().checksum()
    );
    // Nothing else changed.
    assert_eq!(f[14..22], orig[14..22]);
    assert_eq!(f[26..], orig[26..]);
    assert_eq!(f.len(), orig.len());
}

#[test]
fn forwards_v4_via_gateway_and_default_and_stale() {
    let t = tables(true);
    let f = frame4(&P4 {
        dst: "192.168.5.5",
        ..P4::default()
    });
    let (v, out) = one(&t, 0, f);
    assert_eq!(v, L3Verdict::Forward { port: 2 });
    assert_eq!(out[0..6], neigh_mac(3));
    assert_eq!(out[6..12], rmac(2));
    // Default route.
    let f = frame4(&P4 {
        dst: "8.8.8.8",
        ..P4::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Forward { port: 2 });
    // A stale neighbour is still used.
    let f = frame4(&P4 {
        dst: "10.0.1.8",
        ..P4::default()
    });
    let (v, out) = one(&t, 0, f);
    assert_eq!(v, L3Verdict::Forward { port: 1 });
    assert_eq!(out[0..6], neigh_mac(9));
}

#[test]
fn ttl_decrement_checksum_holds_for_many_headers() {
    let t = tables(true);
    for ttl in [2u8, 3, 64, 128, 255] {
        for sport in [0u16, 1, 0xffff, 0x8000] {
            let f = frame4(&P4 {
                ttl,
                sport,
                len: 20 + 8 + (sport as usize % 7),
                ..P4::default()
            });
            let (v, out) = one(&t, 0, f);
            assert_eq!(v, L3Verdict::Forward { port: 1 });
            assert_eq!(out[22], ttl - 1);
            let p = Ipv4Packet::new_checked(&out[14..]).unwrap();
            assert!(p.verify_checksum());
            assert_eq!(p.checksum(), full_checksum(&out[14..34]));
        }
    }
}

#[test]
fn forwards_v6_with_hop_limit_decrement() {
    let t = tables(true);
    let orig = frame6(&P6::default());
    let (v, f) = one(&t, 0, orig.clone());
    assert_eq!(v, L3Verdict::Forward { port: 2 });
    assert_eq!(f[0..6], neigh_mac(6));
    assert_eq!(f[6..12], rmac(2));
    assert_eq!(f[14 + 7], 63);
    assert_eq!(f[14..21], orig[14..21]);
    assert_eq!(f[22..], orig[22..]);
    // Connected /64: the destination itself is the neighbour.
    let f = frame6(&P6 {
        dst: "2001:db8:1::7",
        ..P6::default()
    });
    let (v, out) = one(&t, 0, f);
    assert_eq!(v, L3Verdict::Forward { port: 1 });
    assert_eq!(out[0..6], neigh_mac(7));
}

#[test]
fn not_for_router_and_not_routed() {
    let t = tables(true);
    let f = frame4(&P4 {
        dst_mac: [0x02, 9, 9, 9, 9, 9],
        ..P4::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Drop(L3Drop::NotForRouter));
    // Port 1's MAC on port 0 is not port 0's.
    let f = frame4(&P4 {
        dst_mac: rmac(1),
        ..P4::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Drop(L3Drop::NotForRouter));
    let f = frame4(&P4::default());
    assert_eq!(verdict(&t, 7, f), L3Verdict::Drop(L3Drop::NotRoutedPort));
    // Unicast IP in a broadcast frame is not forwarded.
    let f = frame4(&P4 {
        dst_mac: [0xff; 6],
        ..P4::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Drop(L3Drop::LinkBroadcast));
}

#[test]
fn punts() {
    let t = tables(true);
    // ARP request (broadcast).
    let mut arp = vec![0xffu8; 6];
    arp.extend_from_slice(&HOST);
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.resize(60, 0);
    assert_eq!(verdict(&t, 0, arp), L3Verdict::Punt(Punt::Arp));
    let cases4 = [
        (rmac(0), "10.0.0.1", 1u8, Punt::OwnAddress),
        (rmac(0), "10.0.3.1", 6, Punt::OwnAddress), // another interface's
        (
            [1, 0, 0x5e, 0, 0, 5],
            "224.0.0.5",
            89,
            Punt::RoutingProtocol,
        ),
        (rmac(0), "10.0.1.7", 89, Punt::RoutingProtocol),
        ([1, 0, 0x5e, 0, 0, 1], "224.0.0.1", 2, Punt::Multicast),
        ([0xff; 6], "255.255.255.255", 17, Punt::Multicast),
    ];
    for (mac, dst, proto, want) in cases4 {
        let f = frame4(&P4 {
            dst_mac: mac,
            dst,
            proto,
            ..P4::default()
        });
        assert_eq!(verdict(&t, 0, f), L3Verdict::Punt(want), "{dst} {proto}");
    }
    let mut ns = frame6(&P6 {
        dst_mac: [0x33, 0x33, 0xff, 0, 0, 1],
        dst: "ff02::1:ff00:1",
        nh: 58,
        hops: 255,
        ..P6::default()
    });
    ns[54] = 135;
    assert_eq!(verdict(&t, 0, ns.clone()), L3Verdict::Punt(Punt::Nd));
    // Unicast NS to the router's own address is ND too.
    let mut ns2 = frame6(&P6 {
        dst: "2001:db8::1",
        nh: 58,
        ..P6::default()
    });
    ns2[54] = 135;
    assert_eq!(verdict(&t, 0, ns2), L3Verdict::Punt(Punt::Nd));
    let cases6 = [
        (rmac(0), "2001:db8::1", 6u8, Punt::OwnAddress),
        (rmac(0), "fe80::1", 58, Punt::OwnAddress),
        (
            [0x33, 0x33, 0, 0, 0, 5],
            "ff02::5",
            89,
            Punt::RoutingProtocol,
        ),
        ([0x33, 0x33, 0, 0, 0, 1], "ff02::1", 17, Punt::Multicast),
        ([0x33, 0x33, 0, 0, 0, 1], "ff0e::1", 17, Punt::Multicast),
    ];
    for (mac, dst, nh, want) in cases6 {
        let mut f = frame6(&P6 {
            dst_mac: mac,
            dst,
            nh,
            ..P6::default()
        });
        f[54] = 128; // echo request if ICMPv6
        assert_eq!(verdict(&t, 0, f), L3Verdict::Punt(want), "{dst} {nh}");
    }
}

#[test]
fn own_address_punt_comes_before_ttl() {
    let t = tables(true);
    let f = frame4(&P4 {
        dst: "10.0.0.1",
        ttl: 1,
        ..P4::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Punt(Punt::OwnAddress));
}

/// 410 routed interfaces given in no particular order (the stage keeps
/// its own addresses sorted, to look one up in log time instead of
/// scanning them all per packet): each interface's address is punted as
/// the router's own, from any port, and the address next to it is not.
#[test]
fn own_addresses_of_410_interfaces() {
    let n: u16 = 410;
    let v4_of = |k: u16| {
        u32::from(Ipv4Addr::new(
            10,
            64 + (k / 64) as u8,
            (k % 64) as u8 * 4,
            1,
        ))
    };
    let v6_of = |k: u16| (0x2001_0db8_ffffu128 << 80) | (u128::from(k) << 64) | 1;
    let mac_of = |k: u16| [0x02, 0x01, 0, 0, (k >> 8) as u8, k as u8];
    let interfaces: Vec<RouterInterface> = (0..n)
        .map(|j| (j * 7 + 3) % n) // every port once, scrambled
        .map(|k| RouterInterface {
            port: k,
            mac: mac_of(k),
            v4: vec![(v4_of(k), 30)],
            v6: vec![(v6_of(k), 64)],
            mtu: 1500,
            urpf: Urpf::Off,
            vlan: None,
            vrf: 0,
        })
        .collect();
    let t = L3Tables::new(
        Arc::new(Lpm4::with_nodes(16)),
        Arc::new(Lpm6::with_nodes(16)),
        Arc::new(NextHopTable::new(4, 2)),
        Arc::new(NeighborTable::new(4)),
        interfaces,
    );
    let addr4 = |a: u32| Ipv4Addr::from(a).to_string().leak() as &'static str;
    let addr6 = |a: u128| Ipv6Addr::from(a).to_string().leak() as &'static str;
    for k in [0, 1, 63, 64, 204, 205, 408, 409] {
        let own = frame4(&P4 {
            dst_mac: mac_of(0),
            dst: addr4(v4_of(k)),
            ..P4::default()
        });
        assert_eq!(
            verdict(&t, 0, own),
            L3Verdict::Punt(Punt::OwnAddress),
            "{k}"
        );
        let other = frame4(&P4 {
            dst_mac: mac_of(0),
            dst: addr4(v4_of(k) + 1),
            ..P4::default()
        });
        assert_ne!(
            verdict(&t, 0, other),
            L3Verdict::Punt(Punt::OwnAddress),
            "{k}+1"
        );
        let own6 = frame6(&P6 {
            dst_mac: mac_of(0),
            dst: addr6(v6_of(k)),
            ..P6::default()
        });
        assert_eq!(
            verdict(&t, 0, own6),
            L3Verdict::Punt(Punt::OwnAddress),
            "v6 {k}"
        );
        let other6 = frame6(&P6 {
            dst_mac: mac_of(0),
            dst: addr6(v6_of(k) + 1),
            ..P6::default()
        });
        assert_ne!(
            verdict(&t, 0, other6),
            L3Verdict::Punt(Punt::OwnAddress),
            "v6 {k}+1"
        );
    }
}

#[test]
fn malformed() {
    let t = tables(true);
    let good = frame4(&P4::default());
    let mut cases: Vec<Vec<u8>> = Vec::new();
    let mut f = good.clone();
    f[14] = 0x65; // version 6 in an IPv4 ethertype
    cases.push(f);
    let mut f = good.clone();
    f[14] = 0x44; // IHL 4
    cases.push(f);
    let mut f = good.clone();
    f[16..18].copy_from_slice(&200u16.to_be_bytes()); // longer than the frame
    cases.push(f);
    let mut f = good.clone();
    f[24] ^= 0x01; // checksum
    cases.push(f);
    cases.push(good[..30].to_vec()); // truncated header
    cases.push(good[..10].to_vec()); // shorter than Ethernet
    let mut f = good.clone();
    f[12..14].copy_from_slice(&[0x88, 0xb5]); // not IP
    cases.push(f);
    let g6 = frame6(&P6::default());
    cases.push(g6[..50].to_vec());
    let mut f = g6.clone();
    f[18..20].copy_from_slice(&1000u16.to_be_bytes()); // payload length
    cases.push(f);
    let mut f = g6;
    f[14] = 0x45;
    cases.push(f);
    for (k, f) in cases.into_iter().enumerate() {
        assert_eq!(
            verdict(&t, 0, f),
            L3Verdict::Drop(L3Drop::Malformed),
            "case {k}"
        );
    }
}

#[test]
fn ttl_expiry_asks_for_time_exceeded_and_leaves_frame() {
    let t = tables(true);
    for ttl in [0, 1] {
        let f = frame4(&P4 {
            ttl,
            ..P4::default()
        });
        let (v, out) = one(&t, 0, f.clone());
        assert_eq!(v, L3Verdict::IcmpError(IcmpKind::TimeExceeded));
        assert_eq!(out, f);
    }
    let f = frame6(&P6 {
        hops: 1,
        ..P6::default()
    });
    let (v, out) = one(&t, 0, f.clone());
    assert_eq!(v, L3Verdict::IcmpError(IcmpKind::TimeExceeded));
    assert_eq!(out, f);
}

#[test]
fn urpf_strict_and_loose() {
    let t = tables(true);
    // Strict on port 0: 192.168/16 is reached via port 2 — spoofed.
    let f = frame4(&P4 {
        src: "192.168.1.1",
        ..P4::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Drop(L3Drop::Urpf));
    // …and is fine arriving on port 2 (strict too).
    let f = frame4(&P4 {
        dst_mac: rmac(2),
        src: "192.168.1.1",
        ..P4::default()
    });
    assert_eq!(verdict(&t, 2, f), L3Verdict::Forward { port: 1 });
    // Strict with an ECMP route to the source: any member's port passes.
    let f = frame4(&P4 {
        dst_mac: rmac(2),
        src: "172.16.3.3",
        ..P4::default()
    });
    assert_eq!(verdict(&t, 2, f), L3Verdict::Forward { port: 1 });
    let f = frame4(&P4 {
        src: "172.16.3.3",
        ..P4::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Drop(L3Drop::Urpf));
    // Loose on port 1: the default route covers every IPv4 source…
    let f = frame4(&P4 {
        dst_mac: rmac(1),
        src: "203.0.113.9",
        dst: "10.0.0.5",
        ..P4::default()
    });
    assert_eq!(verdict(&t, 1, f), L3Verdict::Forward { port: 0 });
    // …but there is no IPv6 route to 2001:db8:999::1.
    let f = frame6(&P6 {
        dst_mac: rmac(1),
        src: "2001:db8:999::1",
        ..P6::default()
    });
    assert_eq!(verdict(&t, 1, f), L3Verdict::Drop(L3Drop::Urpf));
    let f = frame6(&P6 {
        dst_mac: rmac(1),
        src: "2001:db8:300::1",
        ..P6::default()
    });
    assert_eq!(verdict(&t, 1, f), L3Verdict::Forward { port: 2 });
    // uRPF comes before the TTL check: no ICMP to a spoofed source.
    let f = frame4(&P4 {
        src: "192.168.1.1",
        ttl: 1,
        ..P4::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Drop(L3Drop::Urpf));
    // Off on port 3: anything goes.
    let f = frame4(&P4 {
        dst_mac: rmac(3),
        src: "192.168.1.1",
        ..P4::default()
    });
    assert_eq!(verdict(&t, 3, f), L3Verdict::Forward { port: 1 });
}

#[test]
fn no_route_asks_for_unreachable() {
    let t = tables(false);
    let f = frame4(&P4 {
        dst: "8.8.8.8",
        ..P4::default()
    });
    assert_eq!(
        verdict(&t, 0, f),
        L3Verdict::IcmpError(IcmpKind::Unreachable)
    );
    let f = frame6(&P6 {
        dst: "2001:db8:5555::1",
        ..P6::default()
    });
    assert_eq!(
        verdict(&t, 0, f),
        L3Verdict::IcmpError(IcmpKind::Unreachable)
    );
}

#[test]
fn link_local_is_not_forwarded() {
    let t = tables(true);
    let f = frame6(&P6 {
        dst: "fe80::99",
        ..P6::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Drop(L3Drop::LinkLocal));
}

#[test]
fn unresolved_neighbour_is_punted_unchanged() {
    let t = tables(true);
    for dst in ["10.0.0.6", "10.0.0.99"] {
        let f = frame4(&P4 {
            dst_mac: rmac(1),
            src: "10.0.1.7",
            dst,
            ..P4::default()
        });
        let (v, out) = one(&t, 1, f.clone());
        assert_eq!(v, L3Verdict::Punt(Punt::NeedsResolution), "{dst}");
        assert_eq!(out, f);
    }
    let f = frame6(&P6 {
        dst: "2001:db8:1::99",
        ..P6::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Punt(Punt::NeedsResolution));
}

#[test]
fn mtu() {
    let t = tables(true);
    let big = |df| {
        frame4(&P4 {
            dst: "198.51.100.1",
            len: 601,
            df,
            ..P4::default()
        })
    };
    assert_eq!(
        verdict(&t, 0, big(true)),
        L3Verdict::IcmpError(IcmpKind::FragNeeded { mtu: 600 })
    );
    assert_eq!(verdict(&t, 0, big(false)), L3Verdict::Drop(L3Drop::Mtu));
    let fits = frame4(&P4 {
        dst: "198.51.100.1",
        len: 600,
        ..P4::default()
    });
    assert_eq!(verdict(&t, 0, fits), L3Verdict::Forward { port: 3 });
    let f = frame6(&P6 {
        dst: "2001:db8:300::1",
        len: 601,
        ..P6::default()
    });
    assert_eq!(
        verdict(&t, 0, f),
        L3Verdict::IcmpError(IcmpKind::PacketTooBig { mtu: 600 })
    );
    let f = frame6(&P6 {
        dst: "2001:db8:300::1",
        len: 600,
        ..P6::default()
    });
    assert_eq!(verdict(&t, 0, f), L3Verdict::Forward { port: 3 });
}

#[test]
fn ecmp_spreads_flows_and_keeps_each_flow() {
    let t = tables(true);
    let c = L3Counters::default();
    let flows: Vec<(u16, Vec<u8>)> = (0..256u16)
        .map(|s| {
            (
                0,
                frame4(&P4 {
                    dst: "172.16.9.9",
                    sport: 1024 + s,
                    ..P4::default()
                }),
            )
        })
        .collect();
    let (v, out) = run_with(&t, &c, &flows);
    let on1 = v
        .iter()
        .filter(|&&x| x == L3Verdict::Forward { port: 1 })
        .count();
    let on2 = v
        .iter()
        .filter(|&&x| x == L3Verdict::Forward { port: 2 })
        .count();
    assert_eq!(on1 + on2, 256);
    assert!(on1 > 80 && on2 > 80, "{on1} / {on2}");
    for (k, x) in v.iter().enumerate() {
        let mac = if *x == (L3Verdict::Forward { port: 1 }) {
            neigh_mac(4)
        } else {
            neigh_mac(3)
        };
        assert_eq!(out[k][0..6], mac);
    }
    // The same flow always picks the same member.
    for s in [1024u16, 1100, 1279] {
        let f = frame4(&P4 {
            dst: "172.16.9.9",
            sport: s,
            ..P4::default()
        });
        let batch: Vec<_> = (0..64).map(|_| (0u16, f.clone())).collect();
        let (v, _) = run_with(&t, &c, &batch);
        assert!(v.iter().all(|&x| x == v[0]));
        assert_eq!(v[0], run_with(&t, &c, &[(0, f)]).0[0]);
    }
}

#[test]
fn mixed_batch_and_counters() {
    let t = tables(true);
    let c = L3Counters::default();
    let frames = vec![
        (0, frame4(&P4::default())),
        (
            0,
            frame4(&P4 {
                ttl: 1,
                ..P4::default()
            }),
        ),
        (
            0,
            frame4(&P4 {
                src: "192.168.1.1",
                ..P4::default()
            }),
        ),
        (
            0,
            frame4(&P4 {
                dst: "10.0.0.1",
                ..P4::default()
            }),
        ),
        (0, frame6(&P6::default())),
        (5, frame6(&P6::default())),
    ];
    let (v, _) = run_with(&t, &c, &frames);
    assert_eq!(
        v,
        vec![
            L3Verdict::Forward { port: 1 },
            L3Verdict::IcmpError(IcmpKind::TimeExceeded),
            L3Verdict::Drop(L3Drop::Urpf),
            L3Verdict::Punt(Punt::OwnAddress),
            L3Verdict::Forward { port: 2 },
            L3Verdict::Drop(L3Drop::NotRoutedPort),
        ]
    );
    assert_eq!(c.rx_frames.get(), 6);
    assert_eq!(c.forwarded.get(), 2);
    assert_eq!(c.icmp[0].get(), 1);
    assert_eq!(c.drops[L3Drop::Urpf as usize].get(), 1);
    assert_eq!(c.drops[L3Drop::NotRoutedPort as usize].get(), 1);
    assert_eq!(c.punts[Punt::OwnAddress as usize].get(), 1);
    assert_eq!(L3Drop::Urpf.name(), "urpf");
    assert_eq!(Punt::NeedsResolution.name(), "needs-resolution");
}

#[test]
fn icmp4_time_exceeded_frame() {
    let t = tables(true);
    let orig = frame4(&P4 {
        ttl: 1,
        len: 100,
        ..P4::default()
    });
    let ifc = &t.interfaces()[0];
    let mut out = [0u8; 1600];
    let n = build_icmp4_time_exceeded(&orig, ifc, &mut out);
    assert_eq!(n, 14 + 20 + 8 + 28);
    let f = &out[..n];
    let eth = EthernetFrame::new_checked(f).unwrap();
    assert_eq!(eth.dst_addr(), MacAddress(HOST));
    assert_eq!(eth.src_addr(), MacAddress(rmac(0)));
    assert_eq!(eth.ethertype(), EtherType::Ipv4);
    let p = Ipv4Packet::new_checked(&f[14..]).unwrap();
    let r = Ipv4Repr::parse(&p).unwrap(); // verifies the header checksum
    assert_eq!(r.src_addr, "10.0.0.1".parse::<Ipv4Addr>().unwrap());
    assert_eq!(r.dst_addr, "10.0.0.5".parse::<Ipv4Addr>().unwrap());
    assert_eq!(r.protocol, IpProtocol::Icmp);
    assert_eq!(r.payload_len, 36);
    assert!(r.ttl > 1);
    let ip_bytes = &f[14..];
    let icmp = IcmpPacket::new_checked(&ip_bytes[20..]).unwrap();
    match IcmpRepr::parse(&icmp).unwrap() {
        IcmpRepr::Other {
            msg_type,
            code,
            rest,
            data,
        } => {
            assert_eq!(u8::from(msg_type), 11);
            assert_eq!(code, 0);
            assert_eq!(rest, 0);
            assert_eq!(data, &orig[14..14 + 28]);
        }
        other => panic!("{other:?}"),
    }
    // Frag needed carries the MTU; unreachable is 3/0.
    let n = build_icmp4_error(&orig, ifc, IcmpKind::FragNeeded { mtu: 600 }, &mut out);
    let icmp = IcmpPacket::new_checked(&out[34..n]).unwrap();
    assert!(icmp.verify_checksum());
    assert_eq!((u8::from(icmp.msg_type()), icmp.code()), (3, 4));
    assert_eq!(icmp.rest_of_header(), 600);
    let n = build_icmp4_error(&orig, ifc, IcmpKind::Unreachable, &mut out);
    let icmp = IcmpPacket::new_checked(&out[34..n]).unwrap();
    assert_eq!((u8::from(icmp.msg_type()), icmp.code()), (3, 0));
    // Short original: quotes what there is.
    let short = frame4(&P4 {
        len: 24,
        ..P4::default()
    });
    assert_eq!(
        build_icmp4_time_exceeded(&short, ifc, &mut out),
        14 + 20 + 8 + 24
    );
    // Output too small.
    assert_eq!(build_icmp4_time_exceeded(&orig, ifc, &mut out[..60]), 0);
}

#[test]
fn icmp4_never_answers_errors_or_broadcast_sources() {
    let t = tables(true);
    let ifc = &t.interfaces()[0];
    let mut out = [0u8; 1600];
    let mut err = frame4(&P4 {
        proto: 1,
        ..P4::default()
    });
    err[34] = 3; // an ICMP destination unreachable
    assert_eq!(build_icmp4_time_exceeded(&err, ifc, &mut out), 0);
    err[34] = 8; // an echo request is fine
    assert!(build_icmp4_time_exceeded(&err, ifc, &mut out) > 0);
    let bcast = frame4(&P4 {
        src: "255.255.255.255",
        ..P4::default()
    });
    assert_eq!(build_icmp4_time_exceeded(&bcast, ifc, &mut out), 0);
    let v6 = frame6(&P6::default());
    assert_eq!(build_icmp4_time_exceeded(&v6, ifc, &mut out), 0);
}

#[test]
fn icmp6_time_exceeded_and_packet_too_big_frames() {
    let t = tables(true);
    let ifc = &t.interfaces()[0];
    let mut out = vec![0u8; 9300];
    for (len, kind, ty, rest) in [
        (80usize, IcmpKind::TimeExceeded, 3u8, 0u32),
        (1500, IcmpKind::PacketTooBig { mtu: 1400 }, 2, 1400),
        (1232, IcmpKind::Unreachable, 1, 0),
        (9000, IcmpKind::TimeExceeded, 3, 0),
    ] {
        let orig = frame6(&P6 {
            hops: 1,
            len,
            ..P6::default()
        });
        let n = if kind == IcmpKind::TimeExceeded {
            build_icmp6_time_exceeded(&orig, ifc, &mut out)
        } else {
            build_icmp6_error(&orig, ifc, kind, &mut out)
        };
        let quoted = len.min(1232);
        assert_eq!(n, 14 + 40 + 8 + quoted, "{len}");
        assert!(n - 14 <= 1280);
        let f = &out[..n];
        let eth = EthernetFrame::new_checked(f).unwrap();
        assert_eq!(eth.dst_addr(), MacAddress(HOST));
        assert_eq!(eth.src_addr(), MacAddress(rmac(0)));
        let p = Ipv6Packet::new_checked(&f[14..]).unwrap();
        let r = Ipv6Repr::parse(&p).unwrap();
        // The global address, not fe80::1.
        assert_eq!(r.src_addr, "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(r.dst_addr, "2001:db8::5".parse::<Ipv6Addr>().unwrap());
        assert_eq!(r.next_header, IpProtocol::Icmpv6);
        assert_eq!(r.payload_len, 8 + quoted);
        let ips = IpPair::V6 {
            src: r.src_addr,
            dst: r.dst_addr,
        };
        let icmp = Icmpv6Packet::new_checked(&f[54..]).unwrap();
        match Icmpv6Repr::parse(&icmp, &ips).unwrap() {
            Icmpv6Repr::Other {
                msg_type,
                code,
                rest: r,
                data,
            } => {
                assert_eq!(u8::from(msg_type), ty);
                assert_eq!(code, 0);
                assert_eq!(r, rest);
                assert_eq!(data, &orig[14..14 + quoted]);
            }
            other => panic!("{other:?}"),
        }
    }
    // Never about an ICMPv6 error, nor to a multicast/unspecified source.
    let mut err = frame6(&P6 {
        nh: 58,
        ..P6::default()
    });
    err[54] = 1;
    assert_eq!(build_icmp6_time_exceeded(&err, ifc, &mut out), 0);
    let m = frame6(&P6 {
        src: "ff02::1",
        ..P6::default()
    });
    assert_eq!(build_icmp6_time_exceeded(&m, ifc, &mut out), 0);
    let u = frame6(&P6 {
        src: "::",
        ..P6::default()
    });
    assert_eq!(build_icmp6_time_exceeded(&u, ifc, &mut out), 0);
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_and_mutated_frames_never_panic() {
    let t = tables(true);
    let c = L3Counters::default();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let seeds = [
        frame4(&P4::default()),
        frame4(&P4 {
            dst: "172.16.1.1",
            ..P4::default()
        }),
        frame6(&P6::default()),
        frame6(&P6 {
            nh: 58,
            ..P6::default()
        }),
    ];
    let mut icmp_out = vec![0u8; 2000];
    for round in 0..200 {
        let mut frames = Vec::new();
        for _ in 0..64 {
            let port = (rng.next() % 6) as u16;
            let f = if rng.next().is_multiple_of(3) {
                let len = (rng.next() % 200) as usize;
                let mut f: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                if len >= 14 && rng.next().is_multiple_of(2) {
                    f[0..6].copy_from_slice(&rmac(port));
                    let et = if rng.next().is_multiple_of(2) {
                        0x0800u16
                    } else {
                        0x86dd
                    };
                    f[12..14].copy_from_slice(&et.to_be_bytes());
                    if len > 14 {
                        f[14] = if et == 0x0800 { 0x45 } else { 0x60 };
                    }
                }
                f
            } else {
                let mut f = seeds[(rng.next() % 4) as usize].clone();
                f[0..6].copy_from_slice(&rmac(port));
                for _ in 0..(rng.next() % 4) {
                    let k = 14 + (rng.next() as usize % (f.len() - 14));
                    f[k] = rng.next() as u8;
                }
                let cut = rng.next() as usize % (f.len() + 1);
                if rng.next().is_multiple_of(4) {
                    f.truncate(cut);
                }
                f
            };
            for kind in [
                IcmpKind::TimeExceeded,
                IcmpKind::Unreachable,
                IcmpKind::FragNeeded { mtu: 1 },
                IcmpKind::PacketTooBig { mtu: 1280 },
            ] {
                let ifc = &t.interfaces()[round % 4];
                let n = build_icmp4_error(&f, ifc, kind, &mut icmp_out);
                assert!(n <= icmp_out.len());
                let n = build_icmp6_error(&f, ifc, kind, &mut icmp_out[..(round * 7) % 2000]);
                assert!(n <= 1280 + 14);
            }
            frames.push((port, f));
        }
        let (v, out) = run_with(&t, &c, &frames);
        for (k, x) in v.iter().enumerate() {
            if let L3Verdict::Forward { .. } = x {
                // Whatever was forwarded still has a valid IPv4 checksum.
                if out[k][12..14] == [0x08, 0x00] {
                    assert!(Ipv4Packet::new_checked(&out[k][14..])
                        .unwrap()
                        .verify_checksum());
                }
            }
        }
    }
    assert_eq!(c.rx_frames.get(), 200 * 64);
}

#[test]
fn a_vrrp_master_routes_frames_to_its_virtual_mac() {
    let v = std::sync::Arc::new(tables::vrrp::VirtualRouters::default());
    let t = tables(true).with_virtual_routers(Some(v.clone()));
    let to_vmac = |vrid| {
        frame4(&P4 {
            dst_mac: wire::vrrp::virtual_mac(vrid),
            ..P4::default()
        })
    };
    // Backup (or no group): not for this router.
    assert_eq!(
        verdict(&t, 0, to_vmac(7)),
        L3Verdict::Drop(L3Drop::NotForRouter)
    );
    v.set_master(0, 7, true);
    let verd = verdict(&t, 0, to_vmac(7));
    assert!(matches!(verd, L3Verdict::Forward { .. }), "{verd:?}");
    // Another VRID, or the same VRID on another interface: not ours.
    assert_eq!(
        verdict(&t, 0, to_vmac(8)),
        L3Verdict::Drop(L3Drop::NotForRouter)
    );
    assert_eq!(
        verdict(&t, 1, to_vmac(7)),
        L3Verdict::Drop(L3Drop::NotForRouter)
    );
    v.set_master(0, 7, false);
    assert_eq!(
        verdict(&t, 0, to_vmac(7)),
        L3Verdict::Drop(L3Drop::NotForRouter)
    );
}
