//! The FIB manager against the tables the workers read: every check that
//! matters goes through `Lpm4::lookup` / `Lpm6::lookup` and
//! `NextHopTable::resolve`, as the data path does.

use routing::fib::{Family, Fib, FibConfig, FibError, Hop, RouteKind, Source, BLACKHOLE_ID};
use routing::frr::netlink::{build, decode, RTM_DELROUTE, RTM_NEWNEXTHOP, RTM_NEWROUTE};
use routing::frr::{FpmEvent, NextHop as FrrHop, NextHopObject, NextHops, Prefix, RouteUpdate};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;
use tables::{NextHop, BLACKHOLE_PORT, GROUP_BIT};

fn p(s: &str) -> Prefix {
    s.parse().unwrap()
}
fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Small pools: most tests need few nodes.
fn small() -> Fib {
    Fib::with_config(FibConfig {
        lpm4_nodes: 4096,
        lpm6_nodes: 1 << 16,
        next_hops: 4096,
        groups: 1024,
        ..FibConfig::default()
    })
}

/// Ports are ifindex − 100 for ifindex 101..=108; anything else is not ours.
fn ports(ifindex: u32) -> Option<u16> {
    (101..=108)
        .contains(&ifindex)
        .then(|| (ifindex - 100) as u16)
}

fn target(fib: &Fib, a: IpAddr) -> Option<u32> {
    match a {
        IpAddr::V4(a) => fib.fib4().lookup(u32::from(a)),
        IpAddr::V6(a) => fib.fib6().lookup(u128::from(a)),
    }
}

/// The next hops the data path may pick for `a` (every group member).
fn hops_at(fib: &Fib, a: &str) -> BTreeSet<(u16, Option<IpAddr>)> {
    let Some(t) = target(fib, ip(a)) else {
        return BTreeSet::new();
    };
    let nht = fib.nexthops();
    let ids = if t & GROUP_BIT != 0 {
        nht.group(t & !GROUP_BIT).expect("group installed").members
    } else {
        vec![t]
    };
    ids.iter()
        .map(|&id| {
            let nh = nht.get(id).expect("next hop installed");
            (nh.port, nh.gateway)
        })
        .collect()
}

fn set_of(v: &[(u16, Option<&str>)]) -> BTreeSet<(u16, Option<IpAddr>)> {
    v.iter().map(|&(port, g)| (port, g.map(ip))).collect()
}

fn via(port: u16, gw: &str) -> Hop {
    Hop::via(port, ip(gw))
}

fn frr_nh(gw: &str, ifindex: u32, weight: u16) -> FrrHop {
    FrrHop {
        gateway: Some(ip(gw)),
        ifindex,
        weight,
    }
}

fn add(prefix: &str, protocol: u8, nexthops: NextHops) -> RouteUpdate {
    RouteUpdate::Add {
        prefix: p(prefix),
        table: 254,
        protocol,
        metric: 20,
        nexthops,
        replace: true,
    }
}

fn nh_add(id: u32, nexthop: NextHopObject) -> RouteUpdate {
    RouteUpdate::NextHopAdd {
        id,
        family: 2,
        protocol: 11,
        nexthop,
    }
}

fn single(gw: &str, ifindex: u32) -> NextHopObject {
    NextHopObject::Single(frr_nh(gw, ifindex, 1))
}

fn ev(us: Vec<RouteUpdate>) -> FpmEvent {
    FpmEvent::Updates(us)
}

fn connected_ev() -> FpmEvent {
    FpmEvent::Connected {
        peer: "127.0.0.1:1".parse().unwrap(),
    }
}

#[test]
fn fib_can_move_to_the_control_thread() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Fib>();
}

#[test]
fn precedence_connected_static_frr_and_fallback() {
    let mut fib = small();
    let pre = p("10.1.0.0/16");
    fib.apply_frr(
        &ev(vec![add(
            "10.1.0.0/16",
            186,
            NextHops::List(vec![frr_nh("192.0.2.9", 103, 1)]),
        )]),
        &ports,
    );
    assert_eq!(hops_at(&fib, "10.1.2.3"), set_of(&[(3, Some("192.0.2.9"))]));
    fib.set(pre, Source::Static, vec![via(2, "192.0.2.1")])
        .unwrap();
    assert_eq!(hops_at(&fib, "10.1.2.3"), set_of(&[(2, Some("192.0.2.1"))]));
    fib.set(pre, Source::Connected, vec![Hop::connected(1)])
        .unwrap();
    assert_eq!(hops_at(&fib, "10.1.2.3"), set_of(&[(1, None)]));
    // A lower source changing under a winner changes nothing visible.
    fib.set(pre, Source::Static, vec![via(2, "192.0.2.7")])
        .unwrap();
    assert_eq!(hops_at(&fib, "10.1.2.3"), set_of(&[(1, None)]));

    let info = fib.route(&pre);
    assert_eq!(info.len(), 3);
    assert_eq!(
        info.iter()
            .map(|r| (r.source, r.installed))
            .collect::<Vec<_>>(),
        vec![
            (Source::Connected, true),
            (Source::Static, false),
            (Source::Frr { protocol: 186 }, false)
        ]
    );
    let s = fib.summary();
    assert_eq!((s.v4.prefixes, s.v4.installed), (1, 1));
    let names: Vec<(String, usize, usize)> =
        s.v4.sources
            .iter()
            .map(|c| (c.source.name(), c.routes, c.installed))
            .collect();
    assert_eq!(
        names,
        vec![
            ("connected".into(), 1, 1),
            ("static".into(), 1, 0),
            ("bgp".into(), 1, 0)
        ]
    );

    assert!(fib.remove(pre, Source::Connected));
    assert_eq!(hops_at(&fib, "10.1.2.3"), set_of(&[(2, Some("192.0.2.7"))]));
    assert!(fib.remove(pre, Source::Static));
    assert_eq!(hops_at(&fib, "10.1.2.3"), set_of(&[(3, Some("192.0.2.9"))]));
    // Removing FRR's route by any protocol number (zebra's deletes carry it,
    // but the slot is FRR's).
    assert!(fib.remove(pre, Source::Frr { protocol: 0 }));
    assert!(!fib.remove(pre, Source::Frr { protocol: 0 }));
    assert_eq!(target(&fib, ip("10.1.2.3")), None);
    assert!(fib.route(&pre).is_empty());
    let s = fib.summary();
    assert_eq!((s.v4.prefixes, s.v4.installed, s.next_hops), (0, 0, 1));
}

#[test]
fn one_gateway_one_id_refcounted() {
    let mut fib = small();
    let hop = vec![via(4, "192.0.2.1")];
    for i in 0..1000u32 {
        let pre = Prefix::new(IpAddr::from((0x0a00_0000 | i << 8).to_be_bytes()), 24).unwrap();
        fib.set(pre, Source::Static, hop.clone()).unwrap();
    }
    // One next hop plus the blackhole.
    assert_eq!(fib.summary().next_hops, 2);
    let mut ids = BTreeSet::new();
    fib.fib4().for_each(|_, _, id| {
        ids.insert(id);
    });
    assert_eq!(ids.len(), 1);
    let id = *ids.iter().next().unwrap();
    assert_eq!(
        fib.nexthops().resolve(id, 0).unwrap().1,
        NextHop {
            port: 4,
            gateway: Some(ip("192.0.2.1"))
        }
    );
    for i in 0..999u32 {
        let pre = Prefix::new(IpAddr::from((0x0a00_0000 | i << 8).to_be_bytes()), 24).unwrap();
        assert!(fib.remove(pre, Source::Static));
    }
    assert_eq!(fib.summary().next_hops, 2);
    assert!(fib.remove(p("10.3.231.0/24"), Source::Static));
    let s = fib.summary();
    assert_eq!((s.next_hops, s.quarantined_next_hops), (1, 1));
    assert!(fib.fib4().is_empty());
    // A wait that gives up (a worker stuck past the timeout) reuses
    // nothing: a reader may still hold the id.
    let r = fib.maintain(&|| false);
    assert_eq!((r.next_hops, r.grace_timeouts), (0, 1));
    assert!(fib.nexthops().get(id).is_some() && fib.needs_maintenance());
    // Two grace periods later the id is reusable and its slot cleared.
    let waits = std::cell::Cell::new(0);
    let r = fib.maintain(&|| {
        waits.set(waits.get() + 1);
        true
    });
    assert_eq!((r.next_hops, waits.get()), (1, 2));
    assert_eq!(fib.nexthops().get(id), None);
    assert!(!fib.needs_maintenance());
    assert_eq!(fib.maintain(&|| panic!("nothing to wait for")).next_hops, 0);
}

#[test]
fn ecmp_groups_dedupe_weights_and_limits() {
    let mut fib = small();
    let (a, b, c) = (
        via(1, "192.0.2.1"),
        via(2, "192.0.2.2"),
        via(3, "192.0.2.3"),
    );
    fib.set(p("10.1.0.0/16"), Source::Static, vec![a, b])
        .unwrap();
    // Same multiset in another order, and with proportional weights.
    fib.set(p("10.2.0.0/16"), Source::Static, vec![b, a])
        .unwrap();
    let (a5, b5) = (Hop { weight: 5, ..a }, Hop { weight: 5, ..b });
    fib.set(p("10.3.0.0/16"), Source::Static, vec![a5, b5])
        .unwrap();
    let t1 = target(&fib, ip("10.1.0.1")).unwrap();
    assert!(t1 & GROUP_BIT != 0);
    assert_eq!(target(&fib, ip("10.2.0.1")), Some(t1));
    assert_eq!(target(&fib, ip("10.3.0.1")), Some(t1));
    assert_eq!(fib.summary().groups, 1);
    // Duplicated hops merge their weights: a,a,b = 2:1.
    fib.set(p("10.4.0.0/16"), Source::Static, vec![a, a, b])
        .unwrap();
    let t4 = target(&fib, ip("10.4.0.1")).unwrap();
    let g = fib.nexthops().group(t4 & !GROUP_BIT).unwrap();
    assert_eq!(g.members.len(), 3);
    // Weights 1:3 → 4 members; 1:1000 → scaled into 64 slots, both kept.
    fib.set(
        p("10.5.0.0/16"),
        Source::Static,
        vec![a, Hop { weight: 3, ..c }],
    )
    .unwrap();
    let r = &fib.route(&p("10.5.0.0/16"))[0];
    assert_eq!(
        r.hops
            .iter()
            .map(|h| (h.port, h.weight))
            .collect::<Vec<_>>(),
        vec![(1, 1), (3, 3)]
    );
    fib.set(
        p("10.6.0.0/16"),
        Source::Static,
        vec![a, Hop { weight: 1000, ..c }],
    )
    .unwrap();
    let t6 = target(&fib, ip("10.6.0.1")).unwrap();
    let g = fib.nexthops().group(t6 & !GROUP_BIT).unwrap();
    assert_eq!(g.members.len(), 64);
    let r = &fib.route(&p("10.6.0.0/16"))[0];
    assert_eq!(
        r.hops.iter().map(|h| h.weight).collect::<Vec<_>>(),
        vec![1, 63]
    );
    assert_eq!(fib.summary().groups, 4);

    // 65 distinct next hops cannot all be kept: refused, old route stays.
    let many: Vec<Hop> = (0..65u16)
        .map(|i| via(1, &format!("198.51.100.{}", i + 1)))
        .collect();
    let before = fib.summary().next_hops;
    assert_eq!(
        fib.set(p("10.1.0.0/16"), Source::Static, many),
        Err(FibError::GroupTooLarge)
    );
    assert_eq!(target(&fib, ip("10.1.0.1")), Some(t1));
    assert_eq!(fib.summary().next_hops, before);
    assert_eq!(fib.counters().group_too_large, 1);

    // Dropping references: the shared group lives while one route uses it.
    fib.remove(p("10.1.0.0/16"), Source::Static);
    fib.remove(p("10.2.0.0/16"), Source::Static);
    assert_eq!(target(&fib, ip("10.3.0.1")), Some(t1));
    fib.remove(p("10.3.0.0/16"), Source::Static);
    assert_eq!(fib.summary().groups, 3);
    for s in ["10.4.0.0/16", "10.5.0.0/16", "10.6.0.0/16"] {
        fib.remove(p(s), Source::Static);
    }
    let s = fib.summary();
    assert_eq!((s.groups, s.next_hops), (0, 1));
}

#[test]
fn blackholes_share_one_id() {
    let mut fib = small();
    fib.set_blackhole(p("10.0.0.0/8"), Source::Static).unwrap();
    fib.set_route(p("2001:db8::/32"), Source::Static, RouteKind::Blackhole)
        .unwrap();
    fib.apply_frr(
        &ev(vec![
            add("192.168.0.0/16", 196, NextHops::Unreachable),
            add("172.16.0.0/12", 196, NextHops::Prohibit),
        ]),
        &ports,
    );
    for a in ["10.1.1.1", "2001:db8::1", "192.168.1.1", "172.16.0.1"] {
        assert_eq!(target(&fib, ip(a)), Some(BLACKHOLE_ID), "{a}");
        assert_eq!(hops_at(&fib, a), set_of(&[(BLACKHOLE_PORT, None)]));
    }
    assert!(fib.lookup(ip("10.1.1.1")).unwrap().blackhole);
    assert_eq!(fib.summary().next_hops, 1);
}

#[test]
fn bad_input_is_refused_and_counted() {
    let mut fib = small();
    assert_eq!(
        fib.set(p("10.0.0.0/8"), Source::Static, vec![]),
        Err(FibError::NoHops)
    );
    assert_eq!(
        fib.set(
            p("10.0.0.0/8"),
            Source::Static,
            vec![Hop::connected(BLACKHOLE_PORT)]
        ),
        Err(FibError::BadPort)
    );
    let bad = Prefix {
        addr: ip("10.0.0.0"),
        len: 40,
    };
    assert_eq!(
        fib.set(bad, Source::Static, vec![Hop::connected(1)]),
        Err(FibError::BadPrefix)
    );
    assert!(!fib.remove(bad, Source::Static));
    assert_eq!(fib.counters().bad_input, 3);
    // Host bits are masked.
    let unmasked = Prefix {
        addr: ip("10.1.2.3"),
        len: 8,
    };
    fib.set(unmasked, Source::Static, vec![Hop::connected(1)])
        .unwrap();
    assert_eq!(fib.route(&p("10.0.0.0/8")).len(), 1);
}

#[test]
fn full_tables_leave_previous_state() {
    // One LPM node, 3 next-hop ids (blackhole + 2), one group, 5 prefixes.
    let mut fib = Fib::with_config(FibConfig {
        lpm4_nodes: 1,
        lpm6_nodes: 16,
        next_hops: 3,
        groups: 1,
        max_routes_v4: 5,
        ..FibConfig::default()
    });
    let (a, b, c) = (
        via(1, "192.0.2.1"),
        via(2, "192.0.2.2"),
        via(3, "192.0.2.3"),
    );
    fib.set(p("10.0.0.128/25"), Source::Static, vec![a])
        .unwrap();
    // A second /24 with a longer prefix needs a second node.
    assert_eq!(
        fib.set(p("10.0.1.128/25"), Source::Static, vec![a]),
        Err(FibError::LpmFull)
    );
    assert!(fib.route(&p("10.0.1.128/25")).is_empty());
    assert_eq!(fib.summary().v4.prefixes, 1);
    assert_eq!(fib.summary().next_hops, 2);
    // Replacing in place needs no node; a's id is freed but quarantined
    // until `maintain`, so a third next hop does not fit yet.
    fib.set(p("10.0.0.128/25"), Source::Static, vec![b])
        .unwrap();
    assert_eq!(
        fib.set(p("10.9.0.0/16"), Source::Static, vec![c]),
        Err(FibError::NextHopFull)
    );
    assert!(fib.needs_maintenance());
    fib.maintain(&|| true);
    fib.set(p("10.9.0.0/16"), Source::Static, vec![a]).unwrap();
    assert_eq!(
        fib.set(p("10.8.0.0/16"), Source::Static, vec![c]),
        Err(FibError::NextHopFull)
    );
    assert_eq!(
        hops_at(&fib, "10.0.0.200"),
        set_of(&[(2, Some("192.0.2.2"))])
    );
    assert_eq!(hops_at(&fib, "10.9.0.1"), set_of(&[(1, Some("192.0.2.1"))]));
    // One group fits, a second does not (a,b vs a,b weighted 1:2).
    fib.set(p("10.7.0.0/16"), Source::Static, vec![a, b])
        .unwrap();
    let wb = Hop { weight: 2, ..b };
    assert_eq!(
        fib.set(p("10.9.0.0/16"), Source::Static, vec![a, wb]),
        Err(FibError::GroupFull)
    );
    assert_eq!(hops_at(&fib, "10.9.0.1"), set_of(&[(1, Some("192.0.2.1"))]));
    fib.set(p("10.6.0.0/16"), Source::Static, vec![a]).unwrap();
    fib.set(p("10.5.0.0/16"), Source::Static, vec![a]).unwrap();
    assert_eq!(
        fib.set(p("10.4.0.0/16"), Source::Static, vec![a]),
        Err(FibError::RouteLimit)
    );
    let c = fib.counters();
    assert_eq!(
        (c.lpm_full, c.next_hop_full, c.group_full, c.route_limit),
        (1, 2, 1, 1)
    );
    let s = fib.summary();
    assert_eq!((s.v4.prefixes, s.next_hops, s.groups), (5, 3, 1));
    // Nothing leaked by the refusals: removing everything frees all.
    for pre in [
        "10.0.0.128/25",
        "10.9.0.0/16",
        "10.7.0.0/16",
        "10.6.0.0/16",
        "10.5.0.0/16",
    ] {
        assert!(fib.remove(p(pre), Source::Static));
    }
    let s = fib.summary();
    assert_eq!((s.v4.prefixes, s.next_hops, s.groups), (0, 1, 0));
}

/// zebra with `fpm use-next-hop-groups`, through the real decoder.
#[test]
fn frr_next_hop_group_mode() {
    let mut fib = small();
    let mut bytes = Vec::new();
    bytes.extend(build::nexthop(
        RTM_NEWNEXTHOP,
        1,
        2,
        &single("192.0.2.1", 101),
    ));
    bytes.extend(build::nexthop(
        RTM_NEWNEXTHOP,
        2,
        2,
        &single("192.0.2.2", 102),
    ));
    bytes.extend(build::nexthop(
        RTM_NEWNEXTHOP,
        3,
        0,
        &NextHopObject::Group(vec![(1, 1), (2, 3)]),
    ));
    bytes.extend(build::nexthop(
        RTM_NEWNEXTHOP,
        4,
        0,
        &NextHopObject::Blackhole,
    ));
    bytes.extend(build::route(
        RTM_NEWROUTE,
        p("10.1.0.0/16"),
        254,
        188,
        20,
        &NextHops::Id(1),
    ));
    bytes.extend(build::route(
        RTM_NEWROUTE,
        p("10.2.0.0/16"),
        254,
        186,
        20,
        &NextHops::Id(3),
    ));
    bytes.extend(build::route(
        RTM_NEWROUTE,
        p("10.3.0.0/16"),
        254,
        186,
        20,
        &NextHops::Id(4),
    ));
    bytes.extend(build::route(
        RTM_NEWROUTE,
        p("10.4.0.0/16"),
        10,
        186,
        20,
        &NextHops::Id(1),
    ));
    let us = decode(&bytes).unwrap();
    fib.apply_frr(&FpmEvent::Updates(us), &ports);

    assert_eq!(hops_at(&fib, "10.1.0.1"), set_of(&[(1, Some("192.0.2.1"))]));
    assert_eq!(
        hops_at(&fib, "10.2.0.1"),
        set_of(&[(1, Some("192.0.2.1")), (2, Some("192.0.2.2"))])
    );
    let g = target(&fib, ip("10.2.0.1")).unwrap();
    assert_eq!(
        fib.nexthops().group(g & !GROUP_BIT).unwrap().members.len(),
        4
    );
    assert_eq!(target(&fib, ip("10.3.0.1")), Some(BLACKHOLE_ID));
    // Table 10 is not ours.
    assert_eq!(target(&fib, ip("10.4.0.1")), None);
    assert_eq!(fib.counters().other_table, 1);

    let r = fib.lookup(ip("10.2.0.1")).unwrap();
    assert_eq!(r.prefix, p("10.2.0.0/16"));
    assert_eq!(r.source.name(), "bgp");
    assert_eq!(r.frr_object, Some(3));
    assert_eq!(
        r.hops.iter().map(|h| h.weight).collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert_eq!(fib.summary().frr_objects, 4);

    // Delete by the real encoder.
    let del = build::route(RTM_DELROUTE, p("10.1.0.0/16"), 254, 188, 0, &NextHops::None);
    fib.apply_frr(&FpmEvent::Updates(decode(&del).unwrap()), &ports);
    assert_eq!(target(&fib, ip("10.1.0.1")), None);
}

/// zebra with `no fpm use-next-hop-groups`: next hops inline.
#[test]
fn frr_inline_mode() {
    let mut fib = small();
    let mut bytes = Vec::new();
    let one = NextHops::List(vec![frr_nh("192.0.2.1", 101, 1)]);
    let two = NextHops::List(vec![frr_nh("fe80::1", 101, 1), frr_nh("fe80::2", 102, 2)]);
    bytes.extend(build::route(
        RTM_NEWROUTE,
        p("10.1.0.0/16"),
        254,
        196,
        20,
        &one,
    ));
    bytes.extend(build::route(
        RTM_NEWROUTE,
        p("10.2.0.0/16"),
        254,
        196,
        20,
        &one,
    ));
    bytes.extend(build::route(
        RTM_NEWROUTE,
        p("2001:db8:1::/48"),
        254,
        188,
        20,
        &two,
    ));
    bytes.extend(build::route(
        RTM_NEWROUTE,
        p("2001:db8:2::/48"),
        254,
        188,
        20,
        &two,
    ));
    fib.apply_frr(&FpmEvent::Updates(decode(&bytes).unwrap()), &ports);
    assert_eq!(hops_at(&fib, "10.2.3.4"), set_of(&[(1, Some("192.0.2.1"))]));
    assert_eq!(
        target(&fib, ip("10.1.0.1")),
        target(&fib, ip("10.2.0.1")),
        "same content shares one id"
    );
    assert_eq!(
        hops_at(&fib, "2001:db8:1::1"),
        set_of(&[(1, Some("fe80::1")), (2, Some("fe80::2"))])
    );
    let r = &fib.route(&p("2001:db8:1::/48"))[0];
    assert_eq!(
        r.hops.iter().map(|h| h.weight).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        target(&fib, ip("2001:db8:1::1")),
        target(&fib, ip("2001:db8:2::1"))
    );
    let s = fib.summary();
    assert_eq!((s.next_hops, s.groups), (4, 1));
    assert_eq!(s.v6.sources[0].source.name(), "ospf");
    assert_eq!(s.v4.sources[0].source.name(), "frr-static");
    // A replace with another gateway moves only that route.
    fib.apply_frr(
        &ev(vec![add(
            "10.1.0.0/16",
            196,
            NextHops::List(vec![frr_nh("192.0.2.5", 103, 1)]),
        )]),
        &ports,
    );
    assert_eq!(hops_at(&fib, "10.1.0.1"), set_of(&[(3, Some("192.0.2.5"))]));
    assert_eq!(hops_at(&fib, "10.2.0.1"), set_of(&[(1, Some("192.0.2.1"))]));
}

/// One object update moves every route using it, without touching the
/// LPM: the routes' target ids stay, the entry behind them changes.
#[test]
fn next_hop_object_change_moves_all_routes_at_once() {
    let mut fib = small();
    let mut us = vec![
        nh_add(10, single("192.0.2.1", 101)),
        nh_add(11, single("192.0.2.2", 102)),
        nh_add(20, NextHopObject::Group(vec![(10, 1), (11, 1)])),
    ];
    let pre = |i: u32| {
        let a = IpAddr::from((0x0a00_0000 | i << 8).to_be_bytes());
        Prefix::new(a, 24).unwrap()
    };
    for i in 0..1000u32 {
        let id = if i % 2 == 0 { 10 } else { 20 };
        us.push(RouteUpdate::Add {
            prefix: pre(i),
            table: 254,
            protocol: 186,
            metric: 0,
            nexthops: NextHops::Id(id),
            replace: true,
        });
    }
    fib.apply_frr(&ev(us), &ports);
    let mut before = BTreeMap::new();
    fib.fib4().for_each(|a, l, id| {
        before.insert((a, l), id);
    });
    assert_eq!(before.len(), 1000);
    assert_eq!(hops_at(&fib, "10.0.0.1"), set_of(&[(1, Some("192.0.2.1"))]));

    // Object 10 moves to another gateway on another port.
    fib.apply_frr(&ev(vec![nh_add(10, single("192.0.2.9", 105))]), &ports);
    let mut after = BTreeMap::new();
    fib.fib4().for_each(|a, l, id| {
        after.insert((a, l), id);
    });
    assert_eq!(before, after, "no LPM entry rewritten");
    for i in 0..1000u32 {
        let a = format!("10.{}.{}.7", i >> 8, i & 0xff);
        let want = if i % 2 == 0 {
            set_of(&[(5, Some("192.0.2.9"))])
        } else {
            // The group follows its member too.
            set_of(&[(5, Some("192.0.2.9")), (2, Some("192.0.2.2"))])
        };
        assert_eq!(hops_at(&fib, &a), want, "{a}");
    }

    // The group loses a member: still in place.
    fib.apply_frr(
        &ev(vec![nh_add(20, NextHopObject::Group(vec![(11, 1)]))]),
        &ports,
    );
    assert_eq!(hops_at(&fib, "10.0.1.1"), set_of(&[(2, Some("192.0.2.2"))]));
    let mut after = BTreeMap::new();
    fib.fib4().for_each(|a, l, id| {
        after.insert((a, l), id);
    });
    assert_eq!(before, after);

    // Object 10 becomes a blackhole (a change of kind): its routes are
    // re-pointed, the group's are not.
    fib.apply_frr(&ev(vec![nh_add(10, NextHopObject::Blackhole)]), &ports);
    assert_eq!(target(&fib, ip("10.0.0.1")), Some(BLACKHOLE_ID));
    assert_eq!(hops_at(&fib, "10.0.1.1"), set_of(&[(2, Some("192.0.2.2"))]));

    // Object 11 deleted: the group has no member left, its routes go.
    fib.apply_frr(&ev(vec![RouteUpdate::NextHopDel { id: 11 }]), &ports);
    assert_eq!(target(&fib, ip("10.0.1.1")), None);
    let s = fib.summary();
    assert_eq!(s.v4.unresolvable, 500);
    assert_eq!(s.v4.installed, 500);
    // It comes back: the routes come back.
    fib.apply_frr(&ev(vec![nh_add(11, single("192.0.2.3", 103))]), &ports);
    assert_eq!(hops_at(&fib, "10.0.1.1"), set_of(&[(3, Some("192.0.2.3"))]));
    assert_eq!(fib.summary().v4.installed, 1000);
}

#[test]
fn routes_before_their_object_and_unknown_ifindex() {
    let mut fib = small();
    // A route referencing an object zebra has not sent (yet).
    fib.apply_frr(&ev(vec![add("10.1.0.0/16", 186, NextHops::Id(7))]), &ports);
    assert_eq!(target(&fib, ip("10.1.0.1")), None);
    assert!(fib.route(&p("10.1.0.0/16"))[0].unresolvable);
    assert_eq!(fib.counters().unresolvable, 1);
    // Its object names an interface that is not one of our ports.
    fib.apply_frr(&ev(vec![nh_add(7, single("192.0.2.1", 55))]), &ports);
    assert_eq!(target(&fib, ip("10.1.0.1")), None);
    assert_eq!(fib.counters().unusable_objects, 1);
    // Inline: one unusable hop of two is left out; none usable: not installed.
    fib.apply_frr(
        &ev(vec![
            add(
                "10.2.0.0/16",
                186,
                NextHops::List(vec![
                    frr_nh("192.0.2.1", 55, 1),
                    frr_nh("192.0.2.2", 102, 1),
                ]),
            ),
            add(
                "10.3.0.0/16",
                186,
                NextHops::List(vec![frr_nh("192.0.2.1", 55, 1)]),
            ),
            add("10.4.0.0/16", 186, NextHops::None),
        ]),
        &ports,
    );
    assert_eq!(hops_at(&fib, "10.2.0.1"), set_of(&[(2, Some("192.0.2.2"))]));
    assert_eq!(target(&fib, ip("10.3.0.1")), None);
    assert_eq!(target(&fib, ip("10.4.0.1")), None);
    let s = fib.summary();
    assert_eq!(
        (s.v4.prefixes, s.v4.installed, s.v4.unresolvable),
        (4, 1, 3)
    );
    assert_eq!(s.counters.unresolvable, 3);
    // A covering static route serves the unresolvable prefixes.
    fib.set(p("10.0.0.0/8"), Source::Static, vec![via(8, "192.0.2.8")])
        .unwrap();
    assert_eq!(hops_at(&fib, "10.3.0.1"), set_of(&[(8, Some("192.0.2.8"))]));

    // Interface 55 becomes port 6.
    let more = |i: u32| if i == 55 { Some(6) } else { ports(i) };
    fib.refresh_ports(&more);
    assert_eq!(hops_at(&fib, "10.1.0.1"), set_of(&[(6, Some("192.0.2.1"))]));
    assert_eq!(
        hops_at(&fib, "10.2.0.1"),
        set_of(&[(6, Some("192.0.2.1")), (2, Some("192.0.2.2"))])
    );
    assert_eq!(hops_at(&fib, "10.3.0.1"), set_of(&[(6, Some("192.0.2.1"))]));
    assert_eq!(fib.summary().v4.unresolvable, 1);
    // And goes away again.
    fib.refresh_ports(&ports);
    assert_eq!(hops_at(&fib, "10.1.0.1"), set_of(&[(8, Some("192.0.2.8"))]));
    assert_eq!(hops_at(&fib, "10.2.0.1"), set_of(&[(2, Some("192.0.2.2"))]));
    assert_eq!(fib.summary().v4.unresolvable, 3);
}

#[test]
fn resync_sweeps_what_was_not_replayed() {
    let mut fib = small();
    fib.set(p("10.2.0.0/16"), Source::Static, vec![via(8, "192.0.2.8")])
        .unwrap();
    fib.apply_frr(&connected_ev(), &ports);
    fib.apply_frr(
        &ev(vec![
            nh_add(1, single("192.0.2.1", 101)),
            nh_add(2, single("192.0.2.2", 102)),
            add("10.1.0.0/16", 186, NextHops::Id(1)),
            add("10.2.0.0/16", 186, NextHops::Id(2)),
            add("10.3.0.0/16", 186, NextHops::Id(2)),
            add(
                "10.4.0.0/16",
                186,
                NextHops::List(vec![frr_nh("192.0.2.4", 104, 1)]),
            ),
        ]),
        &ports,
    );
    fib.apply_frr(&FpmEvent::Settled, &ports);
    assert_eq!(fib.summary().v4.prefixes, 4);
    fib.apply_frr(
        &FpmEvent::Disconnected {
            reason: "test".into(),
        },
        &ports,
    );
    // Still forwarding while zebra is away.
    assert_eq!(hops_at(&fib, "10.1.0.1"), set_of(&[(1, Some("192.0.2.1"))]));

    // Reconnect; zebra replays object 1 and 10.1/16 only (10.4/16 changed).
    fib.apply_frr(&connected_ev(), &ports);
    fib.apply_frr(
        &ev(vec![
            nh_add(1, single("192.0.2.1", 101)),
            add("10.1.0.0/16", 186, NextHops::Id(1)),
            add(
                "10.4.0.0/16",
                186,
                NextHops::List(vec![frr_nh("192.0.2.5", 105, 1)]),
            ),
        ]),
        &ports,
    );
    // Nothing goes before the replay is over.
    assert_eq!(hops_at(&fib, "10.3.0.1"), set_of(&[(2, Some("192.0.2.2"))]));
    fib.apply_frr(&FpmEvent::Settled, &ports);
    assert_eq!(hops_at(&fib, "10.1.0.1"), set_of(&[(1, Some("192.0.2.1"))]));
    assert_eq!(hops_at(&fib, "10.4.0.1"), set_of(&[(5, Some("192.0.2.5"))]));
    assert_eq!(target(&fib, ip("10.3.0.1")), None);
    // The static route under the swept FRR one is back in charge.
    assert_eq!(hops_at(&fib, "10.2.0.1"), set_of(&[(8, Some("192.0.2.8"))]));
    let s = fib.summary();
    assert_eq!(s.frr_objects, 1);
    // Two routes and one object swept.
    assert_eq!(s.counters.swept, 3);
    assert_eq!(s.next_hops, 4); // blackhole, static's, object 1, 10.4's
                                // A second Settled without a reconnect sweeps nothing.
    assert_eq!(fib.frr_settled(&ports), 0);
}

#[test]
fn queries_sorted_and_by_value() {
    let mut fib = small();
    fib.set(p("10.0.0.0/8"), Source::Static, vec![via(1, "192.0.2.1")])
        .unwrap();
    fib.set(p("10.1.0.0/16"), Source::Connected, vec![Hop::connected(2)])
        .unwrap();
    fib.set(p("2001:db8::/32"), Source::Static, vec![via(3, "fe80::1")])
        .unwrap();
    fib.set(p("9.0.0.0/8"), Source::Static, vec![via(1, "192.0.2.1")])
        .unwrap();
    let v4: Vec<String> = fib
        .routes(Family::V4)
        .iter()
        .map(|r| r.prefix.to_string())
        .collect();
    assert_eq!(v4, vec!["9.0.0.0/8", "10.0.0.0/8", "10.1.0.0/16"]);
    let v6 = fib.routes(Family::V6);
    assert_eq!(v6.len(), 1);
    assert_eq!(v6[0].hops, vec![via(3, "fe80::1")]);
    let r = fib.lookup(ip("10.1.2.3")).unwrap();
    assert_eq!((r.prefix, r.source), (p("10.1.0.0/16"), Source::Connected));
    assert_eq!(fib.lookup(ip("10.2.0.0")).unwrap().prefix, p("10.0.0.0/8"));
    assert!(fib.lookup(ip("11.0.0.0")).is_none());
    assert!(fib.lookup(ip("2001:db9::")).is_none());
    let json = serde_json::to_string(&fib.route(&p("10.0.0.0/8"))).unwrap();
    assert!(json.contains("\"prefix\":\"10.0.0.0/8\""), "{json}");
    assert!(json.contains("\"source\":\"static\""), "{json}");
    let json = serde_json::to_string(&fib.summary()).unwrap();
    assert!(json.contains("\"connected\""), "{json}");
}

// ---- randomized against a reference model --------------------------------

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the model expects a slot to forward to.
#[derive(Clone, Debug)]
enum Want {
    Drop,
    Hops(BTreeSet<(u16, Option<IpAddr>)>),
    Nothing,
}

fn random_prefix(r: &mut Rng) -> Prefix {
    if r.below(4) == 0 {
        // Nested IPv6 prefixes under 2001:db8::/32.
        let len = 32 + r.below(33) as u8;
        let a = 0x2001_0db8u128 << 96 | ((r.next() as u128 & 0x0303_0307) << 64);
        Prefix::new(IpAddr::from(a.to_be_bytes()), len).unwrap()
    } else {
        let len = [8u8, 12, 16, 20, 23, 24, 25, 28, 30, 32][r.below(10) as usize];
        let a = 0x0a00_0000u32 | (r.next() as u32 & 0x0003_0307);
        Prefix::new(IpAddr::from(a.to_be_bytes()), len).unwrap()
    }
}

fn random_addr_in(r: &mut Rng, pre: &Prefix) -> IpAddr {
    match pre.addr {
        IpAddr::V4(a) => {
            let host = if pre.len == 32 {
                0
            } else {
                (r.next() as u32) & (u32::MAX >> pre.len)
            };
            IpAddr::from((u32::from(a) | host).to_be_bytes())
        }
        IpAddr::V6(a) => {
            let x = (r.next() as u128) << 64 | r.next() as u128;
            let host = if pre.len == 128 {
                0
            } else {
                x & (u128::MAX >> pre.len)
            };
            IpAddr::from((u128::from(a) | host).to_be_bytes())
        }
    }
}

fn model_lookup(m: &BTreeMap<Prefix, [Option<Want>; 3]>, a: IpAddr) -> Option<Want> {
    let max = if a.is_ipv4() { 32 } else { 128 };
    for len in (0..=max).rev() {
        if let Some(slots) = m.get(&Prefix::new(a, len).unwrap()) {
            for w in slots.iter().flatten() {
                if !matches!(w, Want::Nothing) {
                    return Some(w.clone());
                }
            }
        }
    }
    None
}

fn check(fib: &Fib, m: &BTreeMap<Prefix, [Option<Want>; 3]>, a: IpAddr, step: usize) {
    let got = hops_at(fib, &a.to_string());
    match model_lookup(m, a) {
        None => assert!(got.is_empty(), "step {step} {a}: {got:?}"),
        Some(Want::Drop) => {
            assert_eq!(target(fib, a), Some(BLACKHOLE_ID), "step {step} {a}");
        }
        Some(Want::Hops(h)) => assert_eq!(got, h, "step {step} {a}"),
        Some(Want::Nothing) => unreachable!(),
    }
}

#[test]
fn random_ops_match_reference_model() {
    let mut fib = small();
    let mut model: BTreeMap<Prefix, [Option<Want>; 3]> = BTreeMap::new();
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    let gws = ["192.0.2.1", "192.0.2.2", "192.0.2.3", "fe80::1", "fe80::2"];
    // Port = ifindex − 100 for 101..=103; 104 is not ours.
    let map = |i: u32| (101..=103).contains(&i).then(|| (i - 100) as u16);
    for step in 0..4000 {
        let pre = random_prefix(&mut r);
        let rank = r.below(3) as usize;
        let source = [
            Source::Connected,
            Source::Static,
            Source::Frr {
                protocol: [186u8, 188, 196][r.below(3) as usize],
            },
        ][rank];
        if r.below(10) < 6 {
            let n = 1 + r.below(3) as usize;
            let picks: Vec<(u16, &str, u16)> = (0..n)
                .map(|_| {
                    let port = 1 + r.below(4) as u16;
                    let gw = gws[r.below(gws.len() as u64) as usize];
                    (port, gw, 1 + r.below(4) as u16)
                })
                .collect();
            let blackhole = r.below(10) == 0;
            let want = if blackhole {
                Want::Drop
            } else if rank < 2 {
                Want::Hops(
                    picks
                        .iter()
                        .map(|&(port, g, _)| (port, Some(ip(g))))
                        .collect(),
                )
            } else {
                let usable: BTreeSet<_> = picks
                    .iter()
                    .filter(|&&(port, _, _)| port <= 3)
                    .map(|&(port, g, _)| (port, Some(ip(g))))
                    .collect();
                if usable.is_empty() {
                    Want::Nothing
                } else {
                    Want::Hops(usable)
                }
            };
            if rank < 2 {
                let kind = if blackhole {
                    RouteKind::Blackhole
                } else {
                    RouteKind::Via(
                        picks
                            .iter()
                            .map(|&(port, g, weight)| Hop {
                                port,
                                gateway: Some(ip(g)),
                                weight,
                            })
                            .collect(),
                    )
                };
                fib.set_route(pre, source, kind).unwrap();
            } else {
                let nhs = if blackhole {
                    NextHops::Blackhole
                } else {
                    NextHops::List(
                        picks
                            .iter()
                            .map(|&(port, g, w)| frr_nh(g, 100 + port as u32, w))
                            .collect(),
                    )
                };
                let Source::Frr { protocol } = source else {
                    unreachable!()
                };
                fib.apply_update(
                    &RouteUpdate::Add {
                        prefix: pre,
                        table: 254,
                        protocol,
                        metric: 0,
                        nexthops: nhs,
                        replace: true,
                    },
                    &map,
                )
                .unwrap();
            }
            model.entry(pre).or_default()[rank] = Some(want);
        } else {
            let had = model.get_mut(&pre).and_then(|s| s[rank].take()).is_some();
            if model
                .get(&pre)
                .is_some_and(|s| s.iter().all(Option::is_none))
            {
                model.remove(&pre);
            }
            assert_eq!(fib.remove(pre, source), had, "step {step}");
        }
        // The prefix touched, inside and just outside, and random addresses.
        let mut addrs = vec![pre.addr, random_addr_in(&mut r, &pre)];
        for _ in 0..4 {
            let q = random_prefix(&mut r);
            addrs.push(random_addr_in(&mut r, &q));
        }
        for a in addrs {
            check(&fib, &model, a, step);
        }
        if step % 500 == 0 {
            let s = fib.summary();
            assert_eq!(s.v4.prefixes + s.v6.prefixes, model.len());
            fib.maintain(&|| true);
        }
    }
    // Every installed prefix agrees.
    for pre in model.keys().copied().collect::<Vec<_>>() {
        check(&fib, &model, pre.addr, usize::MAX);
    }
    // Remove everything: all references given back.
    for (pre, slots) in std::mem::take(&mut model) {
        for (rank, w) in slots.iter().enumerate() {
            if w.is_some() {
                let s = [
                    Source::Connected,
                    Source::Static,
                    Source::Frr { protocol: 0 },
                ][rank];
                assert!(fib.remove(pre, s));
            }
        }
    }
    let s = fib.summary();
    assert_eq!(
        (s.v4.prefixes, s.v6.prefixes, s.next_hops, s.groups),
        (0, 0, 1, 0)
    );
    assert_eq!(
        (s.v4.unresolvable, s.v4.installed, s.v6.installed),
        (0, 0, 0)
    );
    assert!(fib.fib4().is_empty() && fib.fib6().is_empty());
    fib.maintain(&|| true);
    let s = fib.summary();
    assert_eq!((s.v4.lpm.nodes, s.v4.lpm.quarantined), (0, 0));
    assert_eq!((s.v6.lpm.nodes, s.v6.lpm.quarantined), (0, 0));
    assert_eq!((s.quarantined_next_hops, s.quarantined_groups), (0, 0));
}

/// The model's view of a route: drop, or the set of next hops.
#[derive(Clone, Debug, PartialEq)]
enum Res {
    Drop,
    Hops(BTreeSet<(u16, Option<IpAddr>)>),
}

/// What object `z` forwards to, resolved from the `Rib` mirror: unusable
/// singles and missing members are left out, a group without members is
/// unusable, a blackhole member adds nothing.
fn model_obj(rib: &routing::frr::Rib, z: u32, map: &dyn Fn(u32) -> Option<u16>) -> Option<Res> {
    match rib.nexthop(z)? {
        NextHopObject::Blackhole => Some(Res::Drop),
        NextHopObject::Single(nh) => {
            let port = map(nh.ifindex)?;
            Some(Res::Hops([(port, nh.gateway)].into_iter().collect()))
        }
        NextHopObject::Group(members) => {
            let mut out = BTreeSet::new();
            for &(m, _) in members {
                if m == z {
                    continue;
                }
                if let Some(Res::Hops(h)) = model_obj(rib, m, map) {
                    out.extend(h);
                }
            }
            (!out.is_empty()).then_some(Res::Hops(out))
        }
    }
}

fn model_route(
    rib: &routing::frr::Rib,
    nhs: &NextHops,
    map: &dyn Fn(u32) -> Option<u16>,
) -> Option<Res> {
    match nhs {
        NextHops::Id(z) => model_obj(rib, *z, map),
        NextHops::List(l) => {
            let h: BTreeSet<_> = l
                .iter()
                .filter_map(|nh| Some((map(nh.ifindex)?, nh.gateway)))
                .collect();
            (!h.is_empty()).then_some(Res::Hops(h))
        }
        NextHops::Blackhole | NextHops::Unreachable | NextHops::Prohibit => Some(Res::Drop),
        NextHops::None => None,
    }
}

fn check_frr(
    fib: &Fib,
    rib: &routing::frr::Rib,
    map: &dyn Fn(u32) -> Option<u16>,
    a: IpAddr,
    step: usize,
) {
    let max = if a.is_ipv4() { 32 } else { 128 };
    let want = (0..=max).rev().find_map(|len| {
        let r = rib.get(254, &Prefix::new(a, len).unwrap())?;
        model_route(rib, &r.nexthops, map)
    });
    match want {
        None => assert_eq!(target(fib, a), None, "step {step} {a}"),
        Some(Res::Drop) => assert_eq!(target(fib, a), Some(BLACKHOLE_ID), "step {step} {a}"),
        Some(Res::Hops(h)) => assert_eq!(hops_at(fib, &a.to_string()), h, "step {step} {a}"),
    }
}

/// zebra's next-hop objects at random — singles (some on interfaces that
/// are not ports), a single that turns into a group and back, groups of
/// singles and of lower-numbered groups, blackholes, deletes, routes by
/// object id (also ids never sent) and inline, other tables, reconnects
/// with partial replays, an interface coming and going — checked against
/// `frr::Rib` fed the same updates, resolved directly.
#[test]
fn random_frr_objects_match_rib_model() {
    use routing::frr::Rib;
    use std::cell::Cell;
    let mut fib = small();
    let mut rib = Rib::new();
    let mut r = Rng(0x51ed_2701_f3a5_c3b9);
    // Whether interface 104 is port 4 right now (105 never is).
    let extra = Cell::new(false);
    let map = |i: u32| match i {
        101..=103 => Some((i - 100) as u16),
        104 if extra.get() => Some(4),
        _ => None,
    };
    let gws = ["192.0.2.1", "192.0.2.2", "192.0.2.3", "fe80::1"];
    let mut prefixes: Vec<Prefix> = Vec::new();
    for step in 0..6000usize {
        let mut us = Vec::new();
        let mut touched = None;
        let single = |r: &mut Rng| {
            let gw = gws[r.below(gws.len() as u64) as usize];
            NextHopObject::Single(frr_nh(gw, 101 + r.below(5) as u32, 1))
        };
        match r.below(100) {
            0..=29 => {
                let pre = random_prefix(&mut r);
                let nexthops = match r.below(20) {
                    0..=11 => {
                        let ids = [1u32, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 20];
                        NextHops::Id(ids[r.below(ids.len() as u64) as usize])
                    }
                    12..=16 => NextHops::List(
                        (0..1 + r.below(2))
                            .map(|_| {
                                let gw = gws[r.below(gws.len() as u64) as usize];
                                frr_nh(gw, 101 + r.below(5) as u32, 1 + r.below(3) as u16)
                            })
                            .collect(),
                    ),
                    17 => NextHops::Blackhole,
                    18 => NextHops::Unreachable,
                    _ => NextHops::None,
                };
                let table = if r.below(20) == 0 { 10 } else { 254 };
                us.push(RouteUpdate::Add {
                    prefix: pre,
                    table,
                    protocol: [186u8, 188, 196][r.below(3) as usize],
                    metric: 0,
                    nexthops,
                    replace: true,
                });
                prefixes.push(pre);
                touched = Some(pre);
            }
            30..=44 if !prefixes.is_empty() => {
                let pre = prefixes[r.below(prefixes.len() as u64) as usize];
                us.push(RouteUpdate::Del {
                    prefix: pre,
                    table: 254,
                    protocol: 0,
                    metric: 0,
                });
                touched = Some(pre);
            }
            45..=66 => {
                let id = 1 + r.below(6) as u32;
                let o = if r.below(10) == 0 {
                    NextHopObject::Blackhole
                } else {
                    single(&mut r)
                };
                us.push(nh_add(id, o));
            }
            67..=74 => {
                // Object 7 changes kind between a single and a group.
                let o = if r.below(2) == 0 {
                    single(&mut r)
                } else {
                    NextHopObject::Group(
                        (0..1 + r.below(3))
                            .map(|_| (1 + r.below(6) as u32, 1 + r.below(3) as u16))
                            .collect(),
                    )
                };
                us.push(nh_add(7, o));
            }
            75..=86 => {
                // Groups 10..=13 contain singles, 7 and lower groups only:
                // no cycles.
                let g = 10 + r.below(4) as u32;
                let o = if r.below(12) == 0 {
                    NextHopObject::Blackhole
                } else {
                    let pool: Vec<u32> = (1..=7).chain(10..g).collect();
                    NextHopObject::Group(
                        (0..1 + r.below(4))
                            .map(|_| {
                                let m = pool[r.below(pool.len() as u64) as usize];
                                (m, 1 + r.below(3) as u16)
                            })
                            .collect(),
                    )
                };
                us.push(nh_add(g, o));
            }
            87..=92 => {
                let ids = [1u32, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13];
                let id = ids[r.below(ids.len() as u64) as usize];
                us.push(RouteUpdate::NextHopDel { id });
            }
            93..=96 => {
                extra.set(!extra.get());
                fib.refresh_ports(&map);
            }
            _ => {
                // zebra reconnects and replays most of its state.
                fib.apply_frr(&connected_ev(), &map);
                rib.handle(&connected_ev());
                let mut replay = Vec::new();
                for id in (1..=7).chain(10..=13) {
                    if let Some(o) = rib.nexthop(id) {
                        if r.below(10) < 8 {
                            replay.push(nh_add(id, o.clone()));
                        }
                    }
                }
                let routes: Vec<_> = rib.routes().map(|(t, p, rt)| (t, *p, rt.clone())).collect();
                for (table, prefix, rt) in routes {
                    if r.below(10) < 8 {
                        replay.push(RouteUpdate::Add {
                            prefix,
                            table,
                            protocol: rt.protocol,
                            metric: rt.metric,
                            nexthops: rt.nexthops,
                            replace: true,
                        });
                    }
                }
                for u in &replay {
                    rib.apply(u);
                }
                fib.apply_frr(&FpmEvent::Updates(replay), &map);
                fib.apply_frr(&FpmEvent::Settled, &map);
                rib.handle(&FpmEvent::Settled);
            }
        }
        for u in &us {
            rib.apply(u);
            fib.apply_update(u, &map).unwrap();
        }
        let mut addrs = Vec::new();
        if let Some(pre) = touched {
            addrs.push(pre.addr);
            addrs.push(random_addr_in(&mut r, &pre));
        }
        for _ in 0..6 {
            if prefixes.is_empty() {
                break;
            }
            let pre = prefixes[r.below(prefixes.len() as u64) as usize];
            addrs.push(random_addr_in(&mut r, &pre));
        }
        for a in addrs {
            check_frr(&fib, &rib, &map, a, step);
        }
        if step % 250 == 0 {
            for (t, pre, _) in rib.routes() {
                if t == 254 {
                    check_frr(&fib, &rib, &map, pre.addr, step);
                }
            }
            let s = fib.summary();
            let in_main = rib.routes().filter(|(t, _, _)| *t == 254).count();
            assert_eq!(s.v4.prefixes + s.v6.prefixes, in_main, "step {step}");
            let usable = rib
                .routes()
                .filter(|(t, _, rt)| *t == 254 && model_route(&rib, &rt.nexthops, &map).is_some())
                .count();
            assert_eq!(s.v4.installed + s.v6.installed, usable, "step {step}");
            assert_eq!(
                s.v4.unresolvable + s.v6.unresolvable,
                in_main - usable,
                "step {step}"
            );
            fib.maintain(&|| true);
        }
    }
    // Take everything away: nothing may leak.
    let mut dels: Vec<RouteUpdate> = rib
        .routes()
        .map(|(table, prefix, _)| RouteUpdate::Del {
            prefix: *prefix,
            table,
            protocol: 0,
            metric: 0,
        })
        .collect();
    dels.extend((1..=20).map(|id| RouteUpdate::NextHopDel { id }));
    fib.apply_frr(&FpmEvent::Updates(dels), &map);
    let s = fib.summary();
    assert_eq!(
        (
            s.v4.prefixes,
            s.v6.prefixes,
            s.frr_objects,
            s.next_hops,
            s.groups
        ),
        (0, 0, 0, 1, 0)
    );
    fib.maintain(&|| true);
    let s = fib.summary();
    assert_eq!((s.quarantined_next_hops, s.quarantined_groups), (0, 0));
    assert_eq!((s.v4.lpm.nodes, s.v6.lpm.nodes), (0, 0));
}

// ---- scale ---------------------------------------------------------------

/// 240,000 IPv4 routes (the mix of docs/lpm.md) via 64 gateways, 10 % ECMP:
/// insert, then remove, timed and printed (not asserted: shared machine).
#[test]
fn insert_240k_routes_timing() {
    let mut fib = Fib::new();
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut prefixes = BTreeSet::new();
    while prefixes.len() < 240_000 {
        let x = r.next();
        let len = match x % 100 {
            0..=57 => 24,
            58..=89 => 16 + (x >> 8) as u8 % 8,
            90..=97 => 25 + (x >> 8) as u8 % 8,
            _ => 8 + (x >> 8) as u8 % 8,
        };
        let a = 0x0100_0000 + ((x >> 16) as u32 % 0xdf00_0000);
        prefixes.insert(Prefix::new(IpAddr::from(a.to_be_bytes()), len).unwrap());
    }
    let prefixes: Vec<Prefix> = prefixes.into_iter().collect();
    let gw = |i: u64| {
        let i = i % 64;
        via(1 + (i % 8) as u16, &format!("192.0.2.{}", i + 1))
    };
    let hops: Vec<Vec<Hop>> = (0..prefixes.len())
        .map(|_| {
            let h = r.next();
            if h.is_multiple_of(10) {
                vec![gw(h >> 8), gw((h >> 8) + 1)]
            } else {
                vec![gw(h >> 8)]
            }
        })
        .collect();
    let t = Instant::now();
    for (pre, h) in prefixes.iter().zip(&hops) {
        fib.set(*pre, Source::Static, h.clone()).unwrap();
    }
    let insert = t.elapsed();
    let s = fib.summary();
    assert_eq!(s.v4.installed, prefixes.len());
    assert_eq!(s.next_hops, 65);
    assert_eq!(s.groups, 64);
    println!(
        "240k insert: {:.3} s, {:.0} routes/s; {} LPM nodes, {:.1} MiB lookup, {:.1} MiB LPM writer",
        insert.as_secs_f64(),
        prefixes.len() as f64 / insert.as_secs_f64(),
        s.v4.lpm.nodes,
        s.v4.lpm.lookup_bytes as f64 / (1 << 20) as f64,
        s.v4.lpm.control_bytes as f64 / (1 << 20) as f64,
    );
    // Spot-check through the data path's view.
    for (pre, h) in prefixes.iter().zip(&hops).step_by(997) {
        let want: BTreeSet<_> = h.iter().map(|h| (h.port, h.gateway)).collect();
        // The longest match of the prefix's first address may be a longer
        // prefix: check the exact route instead.
        let info = &fib.route(pre)[0];
        let got: BTreeSet<_> = info.hops.iter().map(|h| (h.port, h.gateway)).collect();
        assert_eq!(got, want);
        assert!(info.installed);
        let _ = hops_at(&fib, &pre.addr.to_string());
    }
    // The same table from zebra in next-hop-group mode (a replay).
    let mut frr = Fib::new();
    let mut us: Vec<RouteUpdate> = (0..64u32)
        .map(|i| nh_add(1000 + i, single(&format!("192.0.2.{}", i + 1), 101 + i % 8)))
        .collect();
    us.extend(
        prefixes
            .iter()
            .enumerate()
            .map(|(i, pre)| RouteUpdate::Add {
                prefix: *pre,
                table: 254,
                protocol: 186,
                metric: 20,
                nexthops: NextHops::Id(1000 + (i % 64) as u32),
                replace: true,
            }),
    );
    let t = Instant::now();
    frr.apply_frr(&FpmEvent::Updates(us), &ports);
    let frr_insert = t.elapsed();
    assert_eq!(frr.summary().v4.installed, prefixes.len());
    println!(
        "240k FRR (nhg mode) apply: {:.3} s, {:.0} routes/s",
        frr_insert.as_secs_f64(),
        prefixes.len() as f64 / frr_insert.as_secs_f64()
    );
    let t = Instant::now();
    for pre in &prefixes {
        fib.remove(*pre, Source::Static);
    }
    let remove = t.elapsed();
    println!(
        "240k remove: {:.3} s, {:.0} routes/s",
        remove.as_secs_f64(),
        prefixes.len() as f64 / remove.as_secs_f64()
    );
    let s = fib.summary();
    assert_eq!((s.v4.prefixes, s.next_hops, s.groups), (0, 1, 0));
}

/// zebra 8 changes a route as RTM_DELROUTE + RTM_NEWROUTE in one frame:
/// applied as a replace, the prefix never leaves the LPM (a /28 would
/// free a node on removal; none is quarantined).
#[test]
fn delete_then_add_in_one_frame_is_a_replace() {
    let mut fib = small();
    let a = NextHops::List(vec![frr_nh("192.0.2.1", 101, 1)]);
    let b = NextHops::List(vec![frr_nh("192.0.2.2", 102, 1)]);
    let add = |nh: &NextHops| build::route(RTM_NEWROUTE, p("10.9.9.16/28"), 254, 188, 20, nh);
    fib.apply_frr(&FpmEvent::Updates(decode(&add(&a)).unwrap()), &ports);
    assert_eq!(
        hops_at(&fib, "10.9.9.17"),
        set_of(&[(1, Some("192.0.2.1"))])
    );
    let mut frame = build::route(
        RTM_DELROUTE,
        p("10.9.9.16/28"),
        254,
        188,
        20,
        &NextHops::None,
    );
    frame.extend(add(&b));
    fib.apply_frr(&FpmEvent::Updates(decode(&frame).unwrap()), &ports);
    assert_eq!(
        hops_at(&fib, "10.9.9.17"),
        set_of(&[(2, Some("192.0.2.2"))])
    );
    assert_eq!(
        fib.summary().v4.lpm.quarantined,
        0,
        "the /28's node was never unlinked"
    );
    // A delete on its own still deletes.
    let del = build::route(
        RTM_DELROUTE,
        p("10.9.9.16/28"),
        254,
        188,
        20,
        &NextHops::None,
    );
    fib.apply_frr(&FpmEvent::Updates(decode(&del).unwrap()), &ports);
    assert!(target(&fib, ip("10.9.9.17")).is_none());
}

/// A withdrawal burst: tens of thousands of IPv6 routes removed (and as
/// many re-pointed) with no maintenance in between, as one FPM read of a
/// peer going away delivers them. Every removed prefix must stop matching
/// in the table the workers read, and every re-pointed one must resolve to
/// its new next hop: an update the LPM could not make must not be lost.
#[test]
fn ipv6_withdrawal_burst_without_maintenance_loses_nothing() {
    let mut fib = Fib::with_config(FibConfig::for_vrf(254, 50_000));
    // No workers read these tables: every grace period is over at once.
    // The daemon passes a wait on its workers (routing::router).
    let waits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let w = waits.clone();
    fib.set_quiesce(Arc::new(move || {
        w.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        true
    }));
    let pre = |i: u32| {
        let a = 0x2001_0db8_0000_0000_0000_0000_0000_0000u128
            | (u128::from(i.wrapping_mul(2_654_435_761)) << 64);
        Prefix::new(IpAddr::from(a.to_be_bytes()), 64).unwrap()
    };
    let host = |i: u32| {
        let Prefix { addr, .. } = pre(i);
        let IpAddr::V6(a) = addr else { unreachable!() };
        IpAddr::V6((u128::from(a) | 1).into())
    };
    const N: u32 = 40_000;
    for i in 0..N {
        fib.set(pre(i), Source::Static, vec![via(1, "2001:db8::1")])
            .unwrap();
        if i % 1024 == 0 {
            fib.maintain(&|| true);
        }
    }
    fib.maintain(&|| true);
    // The burst: even prefixes removed, odd ones moved to port 2.
    for i in 0..N {
        if i % 2 == 0 {
            assert!(fib.remove(pre(i), Source::Static));
        } else {
            let _ = fib.set(pre(i), Source::Static, vec![via(2, "2001:db8::2")]);
        }
    }
    let mut wrong = Vec::new();
    for i in 0..N {
        let want = (i % 2 == 1).then_some(2u16);
        let got = target(&fib, host(i))
            .and_then(|t| fib.nexthops().resolve(t, 0))
            .map(|(_, nh)| nh.port);
        if got != want {
            wrong.push((i, want, got));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {N} prefixes wrong after the burst, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    let c = fib.counters();
    assert_eq!((c.lpm_full, c.withdraw_held), (0, 0), "{c:?}");
    // Whether the pool ran dry depends on the trie; when it did, the FIB
    // waited for its readers before reusing anything.
    assert!(waits.load(std::sync::atomic::Ordering::Relaxed) >= 2 * c.inline_reclaims as usize);
    eprintln!("inline reclaims during the burst: {}", c.inline_reclaims);
}
