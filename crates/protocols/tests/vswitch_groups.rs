//! Snooping memberships over the virtual-switch peer link, without
//! sockets: two multicast control planes and the group sync between
//! them through the wire format. A join snooped on node A's channel
//! becomes a peer membership of B's channel port (and a route of B's
//! data path), a leave withdraws it, a full copy sweeps what the peer no
//! longer has, and the peer link itself never echoes memberships back.

use datapath::Shared;
use protocols::mcast::Multicast;
use protocols::vswitch::groups::{wire_filter, GroupSync, GroupUpdate};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use tables::l2::{PortMode, TPID_8021Q};
use tables::mcast::McAddr;
use tables::{L2Tables, LearnGate, MacTable, PortEntry, Tables};
use wire::vswitch::{
    decode, encode_group_filter, encode_groups, GroupEntry, Message, HEADER_LEN, MAX_PAYLOAD,
};

const CFG: &str = "vlans: [{id: 10}]
ports:
  - {name: pl, mode: trunk}
  - {name: h, vlan: 10}
  - {name: m1, vlan: 10}
port-channels:
  - {name: po1, members: [m1], lacp: static}
multicast:
  igmp-snooping:
    vlans: [10]
    fast-leave: true
";

fn node() -> (Arc<Shared>, Arc<Multicast>, u16) {
    let cfg = config::parse(CFG, "t.yaml").unwrap();
    let ports = (0..8)
        .map(|_| PortEntry::new(PortMode::Access, 10, &[10], TPID_8021Q))
        .collect();
    let shared = Arc::new(Shared::new(
        Tables {
            l2: L2Tables::new(ports, &[(10, true, 0)]),
            mac: Arc::new(MacTable::new(1024)),
            learn_gate: Arc::new(LearnGate::default()),
        },
        1 << 12,
    ));
    let po1 = cfg.channel_port_id(0);
    let m = Arc::new(Multicast::new(&cfg, shared.clone(), Vec::new()));
    (shared, m, po1)
}

const G: Ipv4Addr = Ipv4Addr::new(239, 1, 1, 1);
const G2: Ipv4Addr = Ipv4Addr::new(239, 1, 1, 2);

fn join(m: &Multicast, port: u16, g: Ipv4Addr) {
    let f = testkit::igmp::igmpv2_report(&[2, 0, 0, 0, 0, 9], Ipv4Addr::new(10, 0, 0, 9), g);
    m.handle(port, 10, &f);
}

fn leave(m: &Multicast, port: u16, g: Ipv4Addr) {
    let f = testkit::igmp::igmpv2_leave(&[2, 0, 0, 0, 0, 9], Ipv4Addr::new(10, 0, 0, 9), g);
    m.handle(port, 10, &f);
}

/// Through the wire format, as the peer link carries it: entries, then
/// filters.
fn carry(u: &GroupUpdate, to: &mut GroupSync) {
    let mut buf = [0u8; HEADER_LEN + MAX_PAYLOAD];
    let n = encode_groups(9, &u.entries, &mut buf).unwrap();
    let Ok((9, Message::Groups(list))) = decode(&buf[..n]) else {
        panic!("not a group update")
    };
    list.iter().for_each(|e| to.apply(&e));
    for ((vlan, group, channel), f) in &u.filters {
        let (mode, sources) = wire_filter(f);
        let n = encode_group_filter(9, *group, *vlan, *channel, mode, &sources, &mut buf).unwrap();
        let Ok((9, Message::GroupFilter(f))) = decode(&buf[..n]) else {
            panic!("not a filter")
        };
        to.apply_filter(&f);
    }
}

fn entries(e: Vec<GroupEntry>) -> GroupUpdate {
    GroupUpdate {
        entries: e,
        filters: Vec::new(),
    }
}

fn oifs(shared: &Shared, g: Ipv4Addr) -> Vec<u16> {
    let Some(t) = shared.mcast.load_full() else {
        return Vec::new();
    };
    let key = McAddr::from(IpAddr::V4(g));
    t.routes
        .iter()
        .filter(|(k, _)| k.vlan == 10 && k.group == key && k.source.is_none())
        .flat_map(|(_, r)| r.oifs.iter().collect::<Vec<_>>())
        .collect()
}

#[test]
fn memberships_follow_the_peer() {
    let (_sa, ma, po1) = node();
    let (sb, mb, po1_b) = node();
    assert_eq!(po1, po1_b);
    let (pl, h) = (0u16, 1u16);
    // Channel ids as the peer link announces them: po1 is channel 1,
    // the peer link is never announced, anything else is 0.
    let channel_of = |p: u16| match p {
        0 => None,
        p if p == po1 => Some(1),
        _ => Some(0),
    };
    let port_of = |c: u16| match c {
        0 => Some(pl),
        1 => Some(po1),
        _ => None,
    };
    let mut a = GroupSync::new(ma.clone());
    let mut b = GroupSync::new(mb.clone());

    // A hears a join on the channel and one on its own host port, and
    // one on the peer link (a report that crossed as data).
    join(&ma, po1, G);
    join(&ma, h, G2);
    join(&ma, pl, Ipv4Addr::new(239, 1, 1, 3));
    let sent = a.changes(&channel_of);
    assert_eq!(sent.entries.len(), 2, "{sent:?}");
    assert!(sent.filters.is_empty(), "IGMPv2: every source");
    carry(&sent, &mut b);
    b.apply_to_multicast(&port_of);
    mb.publish();
    // B delivers G to its side of the channel, G2 over the peer link.
    assert_eq!(oifs(&sb, G), vec![po1]);
    assert_eq!(oifs(&sb, G2), vec![pl]);
    // B heard nothing itself, so it announces nothing back.
    assert!(b.changes(&channel_of).is_empty());
    assert!(mb.local_memberships().is_empty());
    // Nothing changed on A: nothing is sent again.
    assert!(a.changes(&channel_of).is_empty());

    // The host leaves on A: withdrawn on B too.
    leave(&ma, po1, G);
    let sent = a.changes(&channel_of);
    assert_eq!(sent.entries.len(), 1);
    assert!(!sent.entries[0].add);
    carry(&sent, &mut b);
    b.apply_to_multicast(&port_of);
    mb.publish();
    assert!(oifs(&sb, G).is_empty());
    assert_eq!(b.peer_len(), 1);

    // A full copy from a node that lost G2 meanwhile: swept on B.
    let mut a2 = GroupSync::new(node().1);
    b.sync_start(7);
    carry(&a2.full(&channel_of), &mut b);
    b.sync_end(7);
    b.apply_to_multicast(&port_of);
    mb.publish();
    assert_eq!(b.peer_len(), 0);
    assert!(oifs(&sb, G2).is_empty());

    // Peer lost: channel-bound memberships stay (one membership
    // interval), the others go at once.
    carry(
        &entries(vec![
            GroupEntry {
                group: IpAddr::V4(G),
                vlan: 10,
                channel: 1,
                add: true,
            },
            GroupEntry {
                group: IpAddr::V4(G2),
                vlan: 10,
                channel: 0,
                add: true,
            },
        ]),
        &mut b,
    );
    b.peer_lost();
    b.apply_to_multicast(&port_of);
    mb.publish();
    assert_eq!(oifs(&sb, G), vec![po1]);
    assert!(oifs(&sb, G2).is_empty());
}

fn v3(m: &Multicast, port: u16, host: u8, rtype: u8, g: Ipv4Addr, srcs: &[Ipv4Addr]) {
    let f = testkit::igmp::igmpv3_report(
        &[2, 0, 0, 0, 0, host],
        Ipv4Addr::new(10, 0, 0, host),
        &[(rtype, g, srcs.to_vec())],
    );
    m.handle(port, 10, &f);
}

/// Ports of the route a packet from `src` to `g` takes on `shared`:
/// its (S, G) route, else the (*, G) one.
fn ports_for(shared: &Shared, g: Ipv4Addr, src: Ipv4Addr) -> Vec<u16> {
    let Some(t) = shared.mcast.load_full() else {
        return Vec::new();
    };
    let (key, s) = (McAddr::from(IpAddr::V4(g)), McAddr::from(IpAddr::V4(src)));
    let route = |source| {
        t.routes
            .iter()
            .find(|(k, _)| k.vlan == 10 && k.group == key && k.source == source)
            .map(|(_, r)| r.oifs.iter().collect::<Vec<_>>())
    };
    route(Some(s)).or_else(|| route(None)).unwrap_or_default()
}

#[test]
fn source_filters_follow_the_peer() {
    let (_sa, ma, po1) = node();
    let (sb, mb, _) = node();
    let (pl, h) = (0u16, 1u16);
    let channel_of = |p: u16| match p {
        0 => None,
        p if p == po1 => Some(1),
        _ => Some(0),
    };
    let port_of = |c: u16| match c {
        0 => Some(pl),
        1 => Some(po1),
        _ => None,
    };
    let mut a = GroupSync::new(ma.clone());
    let mut b = GroupSync::new(mb.clone());
    let (s1, s2, s3) = (
        Ipv4Addr::new(10, 1, 0, 1),
        Ipv4Addr::new(10, 1, 0, 2),
        Ipv4Addr::new(10, 1, 0, 3),
    );
    let step = |a: &mut GroupSync, b: &mut GroupSync| {
        let u = a.changes(&channel_of);
        carry(&u, b);
        b.apply_to_multicast(&port_of);
        mb.publish();
        u
    };

    // A host behind the channel on A wants G from S1 only (IGMPv3
    // INCLUDE): B sends S1's traffic to its side of the channel, and
    // nothing else of G (before: every source).
    v3(&ma, po1, 9, 1, G, &[s1]);
    let u = step(&mut a, &mut b);
    assert_eq!((u.entries.len(), u.filters.len()), (1, 1), "{u:?}");
    assert_eq!(ports_for(&sb, G, s1), vec![po1]);
    assert!(ports_for(&sb, G, s2).is_empty());
    assert!(ports_for(&sb, G, s3).is_empty());

    // It allows S3 too: only the filter crosses.
    v3(&ma, po1, 9, 5, G, &[s3]);
    let u = step(&mut a, &mut b);
    assert_eq!((u.entries.len(), u.filters.len()), (0, 1), "{u:?}");
    assert_eq!(ports_for(&sb, G, s3), vec![po1]);
    assert!(ports_for(&sb, G, s2).is_empty());

    // A second host on A's own port wants every source but S2 (EXCLUDE):
    // B's peer link gets every source of G but S2.
    v3(&ma, h, 8, 4, G, &[s2]);
    let u = step(&mut a, &mut b);
    assert_eq!((u.entries.len(), u.filters.len()), (1, 1), "{u:?}");
    assert_eq!(ports_for(&sb, G, s1), vec![pl, po1]);
    assert_eq!(ports_for(&sb, G, s2), Vec::<u16>::new());
    assert_eq!(ports_for(&sb, G, Ipv4Addr::new(10, 1, 0, 99)), vec![pl]);
    assert_eq!(
        b.peer_filter(&(10, IpAddr::V4(G), 0)),
        Some(protocols::mcast::SourceFilter::Exclude(
            [McAddr::from(IpAddr::V4(s2))].into()
        ))
    );

    // A full copy carries the filters; a plain entry (an older peer)
    // means every source.
    let mut c = GroupSync::new(node().1);
    let (sc, mc) = {
        let (s, m, _) = node();
        (s, m)
    };
    let mut bc = GroupSync::new(mc.clone());
    bc.sync_start(3);
    let full = a.full(&channel_of);
    assert_eq!((full.entries.len(), full.filters.len()), (2, 2));
    carry(&full, &mut bc);
    bc.sync_end(3);
    bc.apply_to_multicast(&port_of);
    mc.publish();
    assert_eq!(ports_for(&sc, G, s1), vec![pl, po1]);
    assert!(ports_for(&sc, G, s2).is_empty());
    carry(&entries(full.entries.clone()), &mut bc);
    bc.apply_to_multicast(&port_of);
    mc.publish();
    assert_eq!(ports_for(&sc, G, s2), vec![pl, po1]);
    assert!(c.changes(&channel_of).is_empty());

    // The channel's host leaves (INCLUDE of nothing): withdrawn on B,
    // its filter with it.
    v3(&ma, po1, 9, 3, G, &[]);
    let u = step(&mut a, &mut b);
    assert!(u.entries.iter().any(|e| !e.add && e.channel == 1), "{u:?}");
    assert_eq!(b.peer_filter(&(10, IpAddr::V4(G), 1)), None);
    assert_eq!(ports_for(&sb, G, s1), vec![pl]);
}
