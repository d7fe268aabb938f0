//! Snooping memberships over the virtual-switch peer link, without
//! sockets: two multicast control planes and the group sync between
//! them through the wire format. A join snooped on node A's channel
//! becomes a peer membership of B's channel port (and a route of B's
//! data path), a leave withdraws it, a full copy sweeps what the peer no
//! longer has, and the peer link itself never echoes memberships back.

use datapath::Shared;
use protocols::mcast::Multicast;
use protocols::vswitch::groups::GroupSync;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use tables::l2::{PortMode, TPID_8021Q};
use tables::mcast::McAddr;
use tables::{L2Tables, LearnGate, MacTable, PortEntry, Tables};
use wire::vswitch::{decode, encode_groups, GroupEntry, Message, HEADER_LEN, MAX_PAYLOAD};

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

/// Through the wire format, as the peer link carries it.
fn carry(entries: &[GroupEntry], to: &mut GroupSync) {
    let mut buf = [0u8; HEADER_LEN + MAX_PAYLOAD];
    let n = encode_groups(9, entries, &mut buf).unwrap();
    let Ok((9, Message::Groups(list))) = decode(&buf[..n]) else {
        panic!("not a group update")
    };
    list.iter().for_each(|e| to.apply(&e));
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
    assert_eq!(sent.len(), 2, "{sent:?}");
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
    assert_eq!(sent.len(), 1);
    assert!(!sent[0].add);
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
        &[
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
        ],
        &mut b,
    );
    b.peer_lost();
    b.apply_to_multicast(&port_of);
    mb.publish();
    assert_eq!(oifs(&sb, G), vec![po1]);
    assert!(oifs(&sb, G2).is_empty());
}
