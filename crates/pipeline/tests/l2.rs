//! The layer-2 stage against hand-built frames and tables.

use io::FrameBatch;
use pipeline::egress;
use pipeline::{process, Action, DropReason, Verdicts, WorkerCounters};
use std::sync::Arc;
use tables::l2::{PortMode, TPID_8021AD, TPID_8021Q};
use tables::{
    Encap, L2Tables, LearnGate, LearnQueue, MacEntry, MacKey, MacTable, PortEntry, Tables,
};

fn port(mode: PortMode, pvid: u16, vlans: &[u16], tpid: u16) -> PortEntry {
    PortEntry::new(mode, pvid, vlans, tpid)
}

/// Ports: 0,1 access VLAN 10; 2 access VLAN 20; 3 trunk (native 1, allows
/// 1,10,20,500); 4 tunnel S-VLAN 500; 5 trunk 802.1ad allowing 500.
fn tables() -> Tables {
    let l2 = L2Tables::new(
        vec![
            port(PortMode::Access, 10, &[10], TPID_8021Q),
            port(PortMode::Access, 10, &[10], TPID_8021Q),
            port(PortMode::Access, 20, &[20], TPID_8021Q),
            port(PortMode::Trunk, 1, &[1, 10, 20, 500], TPID_8021Q),
            port(PortMode::Tunnel, 500, &[500], TPID_8021Q),
            port(PortMode::Trunk, 0, &[500], TPID_8021AD),
        ],
        &[(1, true, 0), (10, true, 0), (20, true, 0), (500, true, 0)],
    );
    Tables {
        l2,
        mac: Arc::new(MacTable::new(1024)),
        learn_gate: Arc::new(LearnGate::default()),
    }
}

fn mac(i: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, i]
}

fn frame(dst: [u8; 6], src: [u8; 6], tags: &[(u16, u16)], len: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for (tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&0x88b5u16.to_be_bytes());
    while f.len() < len {
        f.push(f.len() as u8);
    }
    f
}

struct Run {
    t: Tables,
    q: LearnQueue,
    c: WorkerCounters,
    out: Verdicts,
}

impl Run {
    fn new() -> Run {
        Run {
            t: tables(),
            q: LearnQueue::new(1024),
            c: WorkerCounters::default(),
            out: Verdicts::default(),
        }
    }

    fn go(&mut self, frames: &[(u16, Vec<u8>)]) -> Vec<Action> {
        let mut b = FrameBatch::new();
        for (p, f) in frames {
            assert!(b.push(*p, f));
        }
        process(&self.t, &b, 100, &mut self.out, &self.q, &self.c);
        self.out.v[..self.out.len]
            .iter()
            .map(|v| v.action)
            .collect()
    }

    /// Apply queued learning events as the learner would.
    fn learn_all(&self) -> usize {
        let mut n = 0;
        while let Some(ev) = self.q.pop() {
            self.t.mac.upsert(
                ev.key,
                MacEntry {
                    port: ev.port,
                    is_static: false,
                    seen: 100,
                },
            );
            n += 1;
        }
        n
    }
}

#[test]
fn unknown_unicast_floods_then_learned_unicasts() {
    let mut r = Run::new();
    let a = r.go(&[(0, frame(mac(2), mac(1), &[], 60))]);
    assert_eq!(a, vec![Action::Flood]);
    assert_eq!(r.learn_all(), 1);
    assert_eq!(r.t.mac.lookup(MacKey::new(10, mac(1))).unwrap().port, 0);
    // Reply from port 1 to mac(1) is unicast to port 0.
    let a = r.go(&[(1, frame(mac(1), mac(2), &[], 60))]);
    assert_eq!(a, vec![Action::Unicast(0)]);
    assert_eq!(r.c.ports[0].rx_flooded.get(), 1);
    assert_eq!(r.c.vlans[10].rx_frames.get(), 2);
}

#[test]
fn broadcast_and_multicast_flood() {
    let mut r = Run::new();
    let a = r.go(&[
        (0, frame([0xff; 6], mac(1), &[], 60)),
        (0, frame([0x01, 0, 0x5e, 0, 0, 1], mac(1), &[], 60)),
    ]);
    assert_eq!(a, vec![Action::Flood, Action::Flood]);
}

#[test]
fn same_port_destination_is_filtered() {
    let mut r = Run::new();
    r.go(&[(0, frame(mac(2), mac(1), &[], 60))]);
    r.go(&[(0, frame(mac(9), mac(2), &[], 60))]);
    r.learn_all();
    let a = r.go(&[(0, frame(mac(1), mac(2), &[], 60))]);
    assert_eq!(a, vec![Action::Drop(DropReason::SamePort)]);
    assert_eq!(r.c.ports[0].drops[DropReason::SamePort as usize].get(), 1);
}

#[test]
fn mac_move_is_reported_and_static_never_moves() {
    let mut r = Run::new();
    r.go(&[(0, frame(mac(2), mac(1), &[], 60))]);
    r.learn_all();
    r.go(&[(1, frame(mac(2), mac(1), &[], 60))]);
    assert_eq!(r.learn_all(), 1);
    assert_eq!(r.t.mac.lookup(MacKey::new(10, mac(1))).unwrap().port, 1);
    let k = MacKey::new(10, mac(7));
    r.t.mac.upsert(
        k,
        MacEntry {
            port: 0,
            is_static: true,
            seen: 0,
        },
    );
    r.go(&[(1, frame(mac(2), mac(7), &[], 60))]);
    assert_eq!(r.learn_all(), 0);
    assert_eq!(r.t.mac.lookup(k).unwrap().port, 0);
}

#[test]
fn learning_disabled_and_gate_stop_events() {
    let mut r = Run::new();
    r.t.l2.vlans[10].learning = false;
    r.go(&[(0, frame(mac(2), mac(1), &[], 60))]);
    assert_eq!(r.learn_all(), 0);
    r.t.l2.vlans[10].learning = true;
    r.t.learn_gate.set_vlan_full(10, true);
    r.go(&[(0, frame(mac(2), mac(1), &[], 60))]);
    assert_eq!(r.learn_all(), 0);
    r.t.learn_gate.set_vlan_full(10, false);
    r.t.l2.ports[0].learning = false;
    r.go(&[(0, frame(mac(2), mac(1), &[], 60))]);
    assert_eq!(r.learn_all(), 0);
}

#[test]
fn vlan_isolation_and_ingress_rules() {
    let mut r = Run::new();
    let a = r.go(&[
        // tagged on access port
        (0, frame(mac(2), mac(1), &[(TPID_8021Q, 10)], 64)),
        // priority-tagged on access port: accepted in VLAN 10
        (0, frame(mac(2), mac(3), &[(TPID_8021Q, 5 << 13)], 64)),
        // trunk, VLAN 30 not allowed
        (3, frame(mac(2), mac(4), &[(TPID_8021Q, 30)], 64)),
        // trunk, VLAN 20 tagged
        (3, frame(mac(2), mac(5), &[(TPID_8021Q, 20)], 64)),
        // trunk untagged → native VLAN 1
        (3, frame(mac(2), mac(6), &[], 64)),
        // 802.1ad trunk without native VLAN: untagged dropped
        (5, frame(mac(2), mac(8), &[], 64)),
        // truncated tag
        (
            3,
            vec![
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 9, 0x81, 0x00, 0,
            ],
        ),
        // runt
        (0, vec![0; 13]),
        // multicast source
        (0, frame(mac(2), [0x03, 0, 0, 0, 0, 1], &[], 64)),
        // oversize
        (0, frame(mac(2), mac(10), &[], 9217)),
        // reserved VID 4095
        (3, frame(mac(2), mac(11), &[(TPID_8021Q, 0xfff)], 64)),
    ]);
    use Action::*;
    use DropReason::*;
    assert_eq!(
        a,
        vec![
            Drop(TaggedOnAccess),
            Flood,
            Drop(VlanNotAllowed),
            Flood,
            Flood,
            Drop(UntaggedNotAllowed),
            Drop(Malformed),
            Drop(Malformed),
            Drop(InvalidSource),
            Drop(Oversize),
            Drop(Malformed),
        ]
    );
    assert_eq!(r.out.v[1].vlan, 10);
    assert_eq!(r.out.v[1].pcp, 5);
    assert_eq!(r.out.v[3].vlan, 20);
    assert_eq!(r.out.v[4].vlan, 1);
    assert_eq!(r.c.ports[3].drops[Malformed as usize].get(), 2);
    assert_eq!(r.c.vlans[30].drops[VlanNotAllowed as usize].get(), 1);
}

#[test]
fn jumbo_limit_is_exact() {
    let mut r = Run::new();
    let a = r.go(&[
        (0, frame(mac(2), mac(1), &[], 9216)),
        (3, frame(mac(2), mac(3), &[(TPID_8021Q, 10)], 9220)),
        (3, frame(mac(2), mac(3), &[(TPID_8021Q, 10)], 9221)),
    ]);
    assert_eq!(
        a,
        vec![
            Action::Flood,
            Action::Flood,
            Action::Drop(DropReason::Oversize)
        ]
    );
}

#[test]
fn egress_tags_untags_and_pads() {
    let mut r = Run::new();
    let access = frame(mac(2), mac(1), &[], 60);
    let tagged = frame(mac(2), mac(1), &[(TPID_8021Q, 3 << 13 | 20)], 64);
    r.go(&[(0, access.clone()), (3, tagged.clone())]);
    let (v0, v1) = (r.out.v[0], r.out.v[1]);
    let mut out = vec![0u8; 10_000];
    // access → trunk: tag pushed
    let n = egress::write(&access, &v0, r.t.l2.ports[3].encap(10), &mut out);
    assert_eq!(n, 64);
    assert_eq!(&out[12..16], &[0x81, 0x00, 0x00, 10]);
    assert_eq!(&out[16..n], &access[12..]);
    // trunk → access: tag removed, padded back to 60
    let n = egress::write(&tagged, &v1, r.t.l2.ports[2].encap(20), &mut out);
    assert_eq!(n, 60);
    assert_eq!(&out[..12], &tagged[..12]);
    assert_eq!(&out[12..14], &[0x88, 0xb5]);
    // trunk → trunk keeps priority bits
    let n = egress::write(
        &tagged,
        &v1,
        Encap::Tagged {
            tpid: TPID_8021Q,
            vid: 20,
        },
        &mut out,
    );
    assert_eq!(&out[..n], &tagged[..]);
}

#[test]
fn qinq_tunnel_carries_customer_tag() {
    let mut r = Run::new();
    let cust = frame(mac(2), mac(1), &[(TPID_8021Q, 100)], 64);
    let a = r.go(&[(4, cust.clone())]);
    assert_eq!(a, vec![Action::Flood]);
    let v = r.out.v[0];
    assert_eq!(v.vlan, 500);
    let mut out = vec![0u8; 10_000];
    let n = egress::write(&cust, &v, r.t.l2.ports[5].encap(500), &mut out);
    assert_eq!(&out[12..16], &[0x88, 0xa8, 0x01, 0xf4]);
    assert_eq!(&out[16..n], &cust[12..]);
    // and back: the 802.1ad trunk strips only the S-tag
    let provider = out[..n].to_vec();
    r.go(&[(5, provider.clone())]);
    let v = r.out.v[0];
    assert_eq!(v.vlan, 500);
    let n = egress::write(&provider, &v, r.t.l2.ports[4].encap(500), &mut out);
    assert_eq!(&out[..n], &cust[..]);
}

/// A batch of 257 frames is not possible (max 256); 256 exercises the full
/// batch and mixed outcomes keep their indices.
#[test]
fn full_batch_keeps_order() {
    let mut r = Run::new();
    let frames: Vec<(u16, Vec<u8>)> = (0..256)
        .map(|i| {
            if i % 3 == 0 {
                (0, vec![0; 10])
            } else {
                (1, frame([0xff; 6], mac(i as u8), &[], 60))
            }
        })
        .collect();
    let a = r.go(&frames);
    for (i, act) in a.iter().enumerate() {
        let want = if i % 3 == 0 {
            Action::Drop(DropReason::Malformed)
        } else {
            Action::Flood
        };
        assert_eq!(*act, want, "frame {i}");
    }
}

/// Random and mutated frames on every port mode: the stage never panics,
/// every frame gets a verdict, and rx counters add up.
#[test]
fn random_frames_never_panic() {
    let mut r = Run::new();
    let mut x: u64 = 0xdead_beef;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut total = 0u64;
    for round in 0..2000 {
        let mut frames = Vec::new();
        // 40 frames always fit one batch arena, jumbo or not.
        for _ in 0..40 {
            let len = match next() % 4 {
                0 => (next() % 20) as usize,
                1 => 14 + (next() % 10) as usize,
                2 => (next() % 1600) as usize,
                _ => 9200 + (next() % 25) as usize, // up to MAX_FRAME_LEN
            };
            let mut f: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if len >= 18 && next() % 2 == 0 {
                let tpid = [0x8100u16, 0x88a8][(next() % 2) as usize];
                f[12..14].copy_from_slice(&tpid.to_be_bytes());
            }
            if len >= 12 && next() % 2 == 0 {
                f[6] &= 0xfe; // valid unicast source half the time
            }
            frames.push(((next() % 7) as u16, f)); // port 6 does not exist
        }
        let acts = r.go(&frames);
        assert_eq!(acts.len(), frames.len());
        total += frames.iter().filter(|(p, _)| *p < 6).count() as u64;
        if round % 50 == 0 {
            r.learn_all();
        }
    }
    let rx: u64 = (0..6).map(|p| r.c.ports[p].rx_frames.get()).sum();
    assert_eq!(rx, total);
}

/// Ports 0 and 1 (access VLAN 10) as members of a channel whose own port
/// id is 6; port 2 stays what it was.
fn with_channel(r: &mut Run, distributing: &[u16]) {
    let mut ch = r.t.l2.ports[0].clone();
    ch.egress = tables::l2::Egress::Channel(0);
    ch.logical = tables::l2::SELF;
    r.t.l2.ports.push(ch);
    for m in [0, 1] {
        r.t.l2.ports[m].logical = 6;
        r.t.l2.ports[m].blocked = !distributing.contains(&(m as u16));
    }
    let mut c = tables::l2::Channel::EMPTY;
    for (k, m) in distributing.iter().enumerate() {
        c.members[k] = *m;
    }
    c.active = distributing.len() as u8;
    r.t.l2.channels = vec![c];
    r.t.l2.recompute_members();
}

#[test]
fn channel_members_learn_and_filter_as_the_channel() {
    let mut r = Run::new();
    with_channel(&mut r, &[0, 1]);
    // Flood sets hold the channel, not its members.
    assert!(r.t.l2.vlans[10].flood.contains(6));
    assert!(!r.t.l2.vlans[10].flood.contains(0) && !r.t.l2.vlans[10].flood.contains(1));
    // Learned on member 0: the entry is the channel's.
    r.go(&[(0, frame(mac(2), mac(1), &[], 60))]);
    r.learn_all();
    assert_eq!(r.t.mac.lookup(MacKey::new(10, mac(1))).unwrap().port, 6);
    // From member 1 to it: same port (the channel), filtered.
    let a = r.go(&[(1, frame(mac(1), mac(3), &[], 60))]);
    assert_eq!(a, vec![Action::Drop(DropReason::SamePort)]);
}

#[test]
fn blocked_ports_and_link_local_control_frames() {
    let mut r = Run::new();
    with_channel(&mut r, &[0]);
    let lacp = {
        let mut f = frame([0x01, 0x80, 0xc2, 0, 0, 2], mac(1), &[], 124);
        f[12..14].copy_from_slice(&0x8809u16.to_be_bytes());
        f
    };
    let stp = frame([0x01, 0x80, 0xc2, 0, 0, 0], mac(1), &[], 60);
    let keepalive = frame(pipeline::l2::KEEPALIVE_MAC, mac(1), &[], 60);
    let a = r.go(&[
        // LACP from a member that is not collecting still reaches control.
        (1, lacp.clone()),
        // Data on it does not.
        (1, frame(mac(2), mac(4), &[], 60)),
        // LACP on a port outside any channel, STP anywhere: never forwarded.
        (2, lacp),
        (2, stp.clone()),
        (2, keepalive),
        // An 802.1ad customer port carries its customer's STP.
        (4, stp),
    ]);
    assert_eq!(
        a,
        vec![
            Action::Control,
            Action::Drop(DropReason::Blocked),
            Action::Drop(DropReason::L2Control),
            Action::Drop(DropReason::L2Control),
            Action::Drop(DropReason::L2Control),
            Action::Flood,
        ]
    );
}

#[test]
fn backup_pair_redirects_addresses_to_the_active_member() {
    let mut r = Run::new();
    // Port 1 fails over to port 0: addresses on 1 leave by 0; 1 is down.
    r.go(&[(1, frame(mac(9), mac(5), &[], 60))]);
    r.learn_all();
    r.t.l2.ports[1].egress = tables::l2::Egress::Via(0);
    r.t.l2.set_port_up(1, false);
    let a = r.go(&[(3, frame(mac(5), mac(6), &[(TPID_8021Q, 10)], 64))]);
    assert_eq!(a, vec![Action::Unicast(0)]);
    // From the active member itself: filtered as the same port.
    let a = r.go(&[(0, frame(mac(5), mac(7), &[], 60))]);
    assert_eq!(a, vec![Action::Drop(DropReason::SamePort)]);
}

/// Virtual-switch peer link (port 3, a trunk): peer-protocol frames are
/// punted only there; unicast that came over it for a channel the peer
/// serves is dropped as `peer-served`, from anywhere else it is delivered.
#[test]
fn peer_link_punts_its_protocol_and_filters_peer_served_channels() {
    let mut r = Run::new();
    r.t.l2.ports[3].peer_link = true;
    let station = MacKey::new(10, mac(7));
    r.t.mac.upsert(
        station,
        MacEntry {
            port: 0,
            is_static: false,
            seen: 100,
        },
    );
    let peer_msg = frame(pipeline::l2::VSWITCH_PEER_MAC, mac(9), &[], 60);
    let a = r.go(&[(3, peer_msg.clone()), (1, peer_msg)]);
    assert_eq!(
        a,
        vec![Action::Control, Action::Drop(DropReason::L2Control)]
    );

    // Port 0 stands for a channel the peer serves.
    r.t.l2.peer_served.insert(0);
    let tagged = frame(mac(7), mac(8), &[(TPID_8021Q, 10)], 60);
    let a = r.go(&[(3, tagged.clone()), (1, frame(mac(7), mac(8), &[], 60))]);
    assert_eq!(
        a,
        vec![Action::Drop(DropReason::PeerServed), Action::Unicast(0)]
    );
    assert_eq!(r.c.ports[3].drops[DropReason::PeerServed as usize].get(), 1);
    // The peer's members went down: the channel is served here again.
    r.t.l2.peer_served.remove(0);
    assert_eq!(r.go(&[(3, tagged)]), vec![Action::Unicast(0)]);
}
