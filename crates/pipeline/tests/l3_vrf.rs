//! VRFs in the layer-3 stage (docs/vrf.md): the same addresses and
//! prefixes in three tables (VRFs A, B and the default), each frame routed
//! only in its ingress interface's VRF — FIB, next hops, own addresses,
//! uRPF — with the neighbour taken from the egress interface's VRF.

use io::FrameBatch;
use pipeline::l3::{
    process_l3, IcmpKind, L3Counters, L3Drop, L3Tables, L3Verdict, L3Verdicts, Punt,
    RouterInterface, Urpf, VrfTables,
};
use std::net::IpAddr;
use std::sync::Arc;
use tables::{Lpm4, Lpm6, Neighbor, NeighborState, NeighborTable, NextHop, NextHopTable};
use wire::{
    EtherType, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
    MacAddress,
};

const HOST: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 1];

fn rmac(port: u16) -> [u8; 6] {
    [0x02, 0x4c, 0, 0, 0, port as u8]
}
fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}
fn v4(s: &str) -> u32 {
    u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
}
fn v6(s: &str) -> u128 {
    u128::from(s.parse::<std::net::Ipv6Addr>().unwrap())
}
/// Neighbour MACs: VRF in the 5th byte, host in the 6th.
fn nmac(vrf: u8, host: u8) -> [u8; 6] {
    [0x02, 0xbb, 0, 0, vrf, host]
}

fn iface(port: u16, vrf: u16, a4: &str, a6: &str, urpf: Urpf) -> RouterInterface {
    RouterInterface {
        port,
        mac: rmac(port),
        v4: vec![(v4(a4), 24)],
        v6: vec![(v6(a6), 64)],
        mtu: 1500,
        urpf,
        vlan: None,
        vrf,
    }
}

/// One VRF's tables: customer port `cust` (10.1.0.0/24,
/// 2001:db8:1::/64), uplink `up` (10.2.0.0/24, 2001:db8:2::/64) and the
/// same remote prefixes in every VRF (192.0.2.0/24 and 2001:db8:99::/48
/// via .2 on the uplink); `extra` routes only this VRF has.
fn vrf_tables(vrf: u8, cust: u16, up: u16, extra: &[(&str, u8, &str)]) -> VrfTables {
    let fib4 = Lpm4::with_nodes(16);
    let fib6 = Lpm6::with_nodes(64);
    let nh = NextHopTable::new(16, 2);
    let nb = NeighborTable::new(64);
    let hop = |port, gw: Option<&str>| NextHop {
        port,
        gateway: gw.map(ip),
    };
    nh.set(0, hop(cust, None)).unwrap();
    nh.set(1, hop(up, None)).unwrap();
    nh.set(2, hop(up, Some("10.2.0.2"))).unwrap();
    nh.set(3, hop(up, Some("2001:db8:2::2"))).unwrap();
    fib4.insert(v4("10.1.0.0"), 24, 0).unwrap();
    fib4.insert(v4("10.2.0.0"), 24, 1).unwrap();
    fib4.insert(v4("192.0.2.0"), 24, 2).unwrap();
    fib6.insert(v6("2001:db8:1::"), 64, 0).unwrap();
    fib6.insert(v6("2001:db8:2::"), 64, 1).unwrap();
    fib6.insert(v6("2001:db8:99::"), 48, 3).unwrap();
    for (k, (pfx, len, gw)) in extra.iter().enumerate() {
        let id = 4 + k as u32;
        nh.set(id, hop(up, Some(gw))).unwrap();
        fib4.insert(v4(pfx), *len, id).unwrap();
    }
    let reach = |mac, port| Neighbor {
        mac,
        port,
        state: NeighborState::Reachable,
        confirmed: 0,
    };
    nb.upsert(ip("10.2.0.2"), reach(nmac(vrf, 2), up));
    nb.upsert(ip("2001:db8:2::2"), reach(nmac(vrf, 2), up));
    nb.upsert(ip("10.1.0.5"), reach(nmac(vrf, 5), cust));
    VrfTables {
        fib4: Arc::new(fib4),
        fib6: Arc::new(fib6),
        nexthops: Arc::new(nh),
        neighbors: Arc::new(nb),
    }
}

/// Ports: 0 A customer, 1 B customer (strict uRPF), 2 A uplink, 3 B
/// uplink, 4 default customer, 5 default uplink, 6 names VRF 7 (absent).
/// Only A routes 198.51.100.0/24 (via 10.2.0.2); only B routes
/// 203.0.113.0/24 via 10.2.0.3, a neighbour only A knows.
fn tables() -> L3Tables {
    tables_with(|_| {})
}

/// [`tables`], with `more` adding to VRF A's tables first.
fn tables_with(more: impl FnOnce(&VrfTables)) -> L3Tables {
    tables_with_default(|_| {}, more)
}

/// [`tables`], with `more_d` adding to the default VRF's tables and
/// `more_a` to VRF A's first.
fn tables_with_default(
    more_d: impl FnOnce(&VrfTables),
    more_a: impl FnOnce(&VrfTables),
) -> L3Tables {
    let d = vrf_tables(0, 4, 5, &[]);
    more_d(&d);
    let a = vrf_tables(1, 0, 2, &[("198.51.100.0", 24, "10.2.0.2")]);
    more_a(&a);
    let b = vrf_tables(2, 1, 3, &[("203.0.113.0", 24, "10.2.0.3")]);
    a.neighbors.upsert(
        ip("10.2.0.3"),
        Neighbor {
            mac: nmac(1, 3),
            port: 2,
            state: NeighborState::Reachable,
            confirmed: 0,
        },
    );
    let c = "10.1.0.1";
    let c6 = "2001:db8:1::1";
    let u = "10.2.0.1";
    let u6 = "2001:db8:2::1";
    L3Tables::new(
        d.fib4,
        d.fib6,
        d.nexthops,
        d.neighbors,
        vec![
            iface(0, 1, c, c6, Urpf::Off),
            iface(1, 2, c, c6, Urpf::Strict),
            iface(2, 1, u, u6, Urpf::Off),
            iface(3, 2, u, u6, Urpf::Off),
            iface(4, 0, "10.3.0.1", "2001:db8:3::1", Urpf::Off),
            iface(5, 0, u, u6, Urpf::Off),
            iface(6, 7, "10.7.0.1", "2001:db8:7::1", Urpf::Off),
        ],
    )
    .with_vrfs(vec![a, b])
}

fn frame4(port: u16, src: &str, dst: &str) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 64];
    EthernetRepr {
        src_addr: MacAddress(HOST),
        dst_addr: MacAddress(rmac(port)),
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]))
    .unwrap();
    Ipv4Repr {
        src_addr: src.parse().unwrap(),
        dst_addr: dst.parse().unwrap(),
        protocol: IpProtocol::Udp,
        payload_len: 44,
        ttl: 64,
        dscp: wire::Dscp::from_tos(0),
        ecn: wire::Ecn::from_bits(0),
        ident: 1,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]))
    .unwrap();
    f
}

fn frame6(port: u16, src: &str, dst: &str) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 80];
    EthernetRepr {
        src_addr: MacAddress(HOST),
        dst_addr: MacAddress(rmac(port)),
        ethertype: EtherType::Ipv6,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]))
    .unwrap();
    Ipv6Repr {
        src_addr: src.parse().unwrap(),
        dst_addr: dst.parse().unwrap(),
        next_header: IpProtocol::Udp,
        payload_len: 40,
        hop_limit: 64,
        dscp: wire::Dscp::from_tos(0),
        ecn: wire::Ecn::from_bits(0),
        flow_label: 0,
    }
    .emit(&mut Ipv6Packet::new_unchecked(&mut f[14..]))
    .unwrap();
    f
}

/// Runs one batch; verdicts and the (rewritten) frames.
fn run(t: &L3Tables, frames: &[(u16, Vec<u8>)]) -> (Vec<L3Verdict>, Vec<Vec<u8>>) {
    let mut b = FrameBatch::new();
    for (p, f) in frames {
        assert!(b.push(*p, f));
    }
    let mut out = L3Verdicts::default();
    process_l3(t, &mut b, &mut out, &L3Counters::default());
    (
        out.v[..out.len].to_vec(),
        (0..b.len()).map(|i| b.frame(i).to_vec()).collect(),
    )
}

#[test]
fn same_prefix_goes_to_each_vrfs_own_uplink_and_neighbour() {
    let t = tables();
    assert_eq!(t.vrf_count(), 3);
    let (v, f) = run(
        &t,
        &[
            (0, frame4(0, "10.1.0.5", "192.0.2.9")),
            (1, frame4(1, "10.1.0.5", "192.0.2.9")),
            (4, frame4(4, "10.3.0.5", "192.0.2.9")),
        ],
    );
    // The default VRF has 192.0.2.0/24 too (via 10.2.0.2 on port 5).
    assert_eq!(
        v,
        [
            L3Verdict::Forward { port: 2 },
            L3Verdict::Forward { port: 3 },
            L3Verdict::Forward { port: 5 },
        ]
    );
    assert_eq!(f[0][0..6], nmac(1, 2), "VRF A's 10.2.0.2");
    assert_eq!(f[1][0..6], nmac(2, 2), "VRF B's 10.2.0.2");
    assert_eq!(f[2][0..6], nmac(0, 2), "the default VRF's 10.2.0.2");
    assert_eq!(f[0][6..12], rmac(2));
    assert_eq!(f[1][6..12], rmac(3));
}

#[test]
fn interleaved_ipv6_batch_is_looked_up_per_vrf() {
    let t = tables();
    // Alternating VRFs, and a prefix only A has between them.
    let mut frames = Vec::new();
    for k in 0..12u16 {
        let port = [0u16, 1, 4][k as usize % 3];
        frames.push((port, frame6(port, "2001:db8:1::5", "2001:db8:99::9")));
    }
    frames.push((0, frame4(0, "10.1.0.5", "198.51.100.1")));
    frames.push((1, frame4(1, "10.1.0.5", "198.51.100.1")));
    let (v, f) = run(&t, &frames);
    for k in 0..12 {
        let (port, vrf) = [(2, 1), (3, 2), (5, 0)][k % 3];
        assert_eq!(v[k], L3Verdict::Forward { port }, "frame {k}");
        assert_eq!(f[k][0..6], nmac(vrf, 2), "frame {k}");
    }
    assert_eq!(
        v[12],
        L3Verdict::Forward { port: 2 },
        "A routes 198.51.100/24"
    );
    assert_eq!(
        v[13],
        L3Verdict::IcmpError(IcmpKind::Unreachable),
        "B has no 198.51.100/24: unreachable, not A's route"
    );
}

#[test]
fn own_addresses_are_per_vrf() {
    let t = tables();
    let (v, _) = run(
        &t,
        &[
            (0, frame4(0, "10.1.0.5", "10.1.0.1")),
            (1, frame4(1, "10.1.0.5", "10.1.0.1")),
            // 10.1.0.1 is A's and B's, not the default VRF's: routed
            // there (its 10.1.0.0/24 is on port 4; the host is not
            // resolved yet), not taken as the router's own.
            (4, frame4(4, "10.3.0.5", "10.1.0.1")),
            (4, frame6(4, "2001:db8:3::5", "2001:db8:1::1")),
        ],
    );
    assert_eq!(v[0], L3Verdict::Punt(Punt::OwnAddress));
    assert_eq!(v[1], L3Verdict::Punt(Punt::OwnAddress));
    assert_eq!(v[2], L3Verdict::Punt(Punt::NeedsResolution));
    assert_eq!(v[3], L3Verdict::Punt(Punt::NeedsResolution));
}

#[test]
fn urpf_checks_the_source_in_the_ingress_vrf() {
    let t = tables();
    let (v, _) = run(
        &t,
        &[
            // Connected in B on port 1: passes strict uRPF.
            (1, frame4(1, "10.1.0.5", "192.0.2.9")),
            // 198.51.100.7 is routed in A only: B has no route to it.
            (1, frame4(1, "198.51.100.7", "192.0.2.9")),
            // In B, 192.0.2.0/24 leaves by port 3, not 1.
            (1, frame4(1, "192.0.2.7", "10.2.0.9")),
        ],
    );
    assert_eq!(v[0], L3Verdict::Forward { port: 3 });
    assert_eq!(v[1], L3Verdict::Drop(L3Drop::Urpf));
    assert_eq!(v[2], L3Verdict::Drop(L3Drop::Urpf));
}

#[test]
fn neighbours_come_from_the_egress_vrf_only() {
    let t = tables();
    // B routes 203.0.113.0/24 via 10.2.0.3; only A knows 10.2.0.3.
    let (v, f) = run(&t, &[(1, frame4(1, "10.1.0.5", "203.0.113.4"))]);
    assert_eq!(v[0], L3Verdict::Punt(Punt::NeedsResolution));
    assert_eq!(f[0][0..6], rmac(1), "punted unchanged");
}

#[test]
fn leaked_routes_use_the_egress_vrfs_neighbour_and_resolve_there() {
    // VRF A has two routes leaked from B (import vrf): out of B's uplink
    // (port 3) via 10.2.0.2, which B knows, and via 10.2.0.9, which
    // nobody knows yet.
    let t = tables_with(|a| {
        for (id, gw, pfx) in [
            (10, "10.2.0.2", "198.18.0.0"),
            (11, "10.2.0.9", "198.19.0.0"),
        ] {
            let hop = NextHop {
                port: 3,
                gateway: Some(ip(gw)),
            };
            a.nexthops.set(id, hop).unwrap();
            a.fib4.insert(v4(pfx), 16, id).unwrap();
        }
    });
    let mut b = FrameBatch::new();
    for (port, dst) in [(0, "198.18.0.7"), (0, "198.19.0.7"), (1, "203.0.113.4")] {
        assert!(b.push(port, &frame4(port, "10.1.0.5", dst)));
    }
    let mut out = L3Verdicts::default();
    process_l3(&t, &mut b, &mut out, &L3Counters::default());
    assert_eq!(out.v[0], L3Verdict::Forward { port: 3 });
    assert_eq!(b.frame(0)[0..6], nmac(2, 2), "B's 10.2.0.2, not A's");
    assert_eq!(out.v[1], L3Verdict::Punt(Punt::NeedsResolution));
    // The ingress twin's kernel (A's) cannot resolve B's neighbour: the
    // punt names B's interface.
    assert_eq!(out.resolution_in_other_vrf(1, &t), Some(3));
    // B's own unresolved neighbour (same VRF): the ingress twin, as ever.
    assert_eq!(out.v[2], L3Verdict::Punt(Punt::NeedsResolution));
    assert_eq!(out.resolution_in_other_vrf(2, &t), None);
    assert_eq!(out.resolution_in_other_vrf(0, &t), None, "not a punt");
}

#[test]
fn routes_leaked_into_and_out_of_the_default_vrf_resolve_in_the_egress_vrf() {
    // The default VRF has routes leaked from A (import vrf CUSTA in the
    // default instance): out of A's uplink (port 2) via 10.2.0.2, which A
    // knows, and via 10.2.0.9, which nobody knows yet; A has routes
    // leaked from the default VRF (import vrf default): out of the
    // default uplink (port 5), the same two ways.
    let hop = |port, gw: &str| NextHop {
        port,
        gateway: Some(ip(gw)),
    };
    let t = tables_with_default(
        |d| {
            d.nexthops.set(10, hop(2, "10.2.0.2")).unwrap();
            d.nexthops.set(11, hop(2, "10.2.0.9")).unwrap();
            d.nexthops.set(12, hop(2, "2001:db8:2::2")).unwrap();
            d.fib4.insert(v4("198.18.0.0"), 16, 10).unwrap();
            d.fib4.insert(v4("198.19.0.0"), 16, 11).unwrap();
            d.fib6.insert(v6("2001:db8:aa::"), 48, 12).unwrap();
        },
        |a| {
            a.nexthops.set(10, hop(5, "10.2.0.2")).unwrap();
            a.nexthops.set(11, hop(5, "10.2.0.9")).unwrap();
            a.fib4.insert(v4("198.20.0.0"), 16, 10).unwrap();
            a.fib4.insert(v4("198.21.0.0"), 16, 11).unwrap();
        },
    );
    let mut b = FrameBatch::new();
    for (port, dst) in [
        (4, "198.18.0.7"),
        (4, "198.19.0.7"),
        (0, "198.20.0.7"),
        (0, "198.21.0.7"),
        (4, "192.0.2.7"),
    ] {
        assert!(b.push(port, &frame4(port, "10.3.0.5", dst)));
    }
    assert!(b.push(4, &frame6(4, "2001:db8:3::5", "2001:db8:aa::7")));
    let mut out = L3Verdicts::default();
    process_l3(&t, &mut b, &mut out, &L3Counters::default());
    // Default → A: A's neighbour, A's port.
    assert_eq!(out.v[0], L3Verdict::Forward { port: 2 });
    assert_eq!(
        b.frame(0)[0..6],
        nmac(1, 2),
        "A's 10.2.0.2, not the default's"
    );
    assert_eq!(b.frame(0)[6..12], rmac(2));
    assert_eq!(out.v[5], L3Verdict::Forward { port: 2 });
    assert_eq!(b.frame(5)[0..6], nmac(1, 2), "IPv6: A's neighbour");
    // Unknown in A: resolved by A's twin, not the default VRF's kernel.
    assert_eq!(out.v[1], L3Verdict::Punt(Punt::NeedsResolution));
    assert_eq!(out.resolution_in_other_vrf(1, &t), Some(2));
    // A → default: the default VRF's neighbour, its twin to resolve.
    assert_eq!(out.v[2], L3Verdict::Forward { port: 5 });
    assert_eq!(
        b.frame(2)[0..6],
        nmac(0, 2),
        "the default's 10.2.0.2, not A's"
    );
    assert_eq!(out.v[3], L3Verdict::Punt(Punt::NeedsResolution));
    assert_eq!(out.resolution_in_other_vrf(3, &t), Some(5));
    // The default VRF's own route: its own uplink and neighbour.
    assert_eq!(out.v[4], L3Verdict::Forward { port: 5 });
    assert_eq!(b.frame(4)[0..6], nmac(0, 2));
}

#[test]
fn an_interface_in_a_missing_vrf_routes_nothing() {
    let t = tables();
    let (v, _) = run(
        &t,
        &[
            (6, frame4(6, "10.7.0.5", "192.0.2.9")),
            (6, frame4(6, "10.7.0.5", "10.7.0.1")),
        ],
    );
    assert_eq!(v, [L3Verdict::Drop(L3Drop::NotRoutedPort); 2]);
}

#[test]
fn a_packet_popped_into_a_vrf_for_its_own_address_names_the_interface_holding_it() {
    // Popped from a VPN label on the default VRF's uplink (port 5):
    // routed in A, where 10.1.0.1 is port 0's and 10.2.0.1 port 2's
    // (the same addresses are B's on ports 1 and 3, and the default
    // VRF's 10.2.0.1 on port 5).
    let t = tables();
    let mut b = FrameBatch::new();
    for (dst, v6) in [
        ("10.1.0.1", false),
        ("10.2.0.1", false),
        ("2001:db8:1::1", true),
        ("192.0.2.9", false),
    ] {
        let f = if v6 {
            frame6(5, "2001:db8:99::5", dst)
        } else {
            frame4(5, "198.51.100.5", dst)
        };
        assert!(b.push(5, &f));
    }
    b.push(5, &frame4(5, "198.51.100.5", "10.2.0.1"));
    let mut out = L3Verdicts::default();
    for i in 0..4 {
        out.route_in_vrf(i, 1);
    }
    process_l3(&t, &mut b, &mut out, &L3Counters::default());
    assert_eq!(out.v[0], L3Verdict::Punt(Punt::OwnAddress));
    assert!(out.routed_by_label(0));
    assert_eq!(out.own_address_port(0), Some(0), "A's 10.1.0.1, not B's");
    assert_eq!(
        out.own_address_port(1),
        Some(2),
        "A's 10.2.0.1, not the uplink's"
    );
    assert_eq!(out.own_address_port(2), Some(0), "IPv6 too");
    assert_eq!(out.v[3], L3Verdict::Forward { port: 2 });
    assert_eq!(out.own_address_port(3), None, "not a punt");
    // Not by label: the ingress VRF's own address, its own interface.
    assert!(!out.routed_by_label(4));
    assert_eq!(out.own_address_port(4), Some(5));
}
