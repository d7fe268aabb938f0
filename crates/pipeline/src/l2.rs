//! The layer-2 stage.
//!
//! Reads: the ingress port's mode and VLANs, the VLAN table, the MAC table.
//! Sets: one [`Verdict`] per frame (VLAN, where the payload after the
//! ingress tag starts, priority bits, action).
//! Decides: drop (named reason) / unicast to a port / flood in the VLAN.
//! Emits: learning events (new source addresses and moves) on the queue.
//!
//! Runs in three passes over the batch — classify, learn sources, look up
//! destinations — so each pass walks one table for the whole batch.

use crate::counters::{DropReason, WorkerCounters};
use io::{FrameBatch, BATCH_MAX};
use tables::l2::{PortMode, StpState, TPID_8021AD, TPID_8021Q};
use tables::{LearnEvent, LearnQueue, MacKey, Tables};

/// Jumbo limit for an untagged frame without FCS; one outer tag may add 4.
pub const MAX_UNTAGGED_LEN: usize = 9216;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Action {
    Drop(DropReason),
    Unicast(u16),
    Flood,
    /// A link-layer control frame for Lanyard itself (LACP on a channel
    /// member; a loop-detect probe, classified into its VLAN): handed to
    /// the control plane, never forwarded as such.
    Control,
    /// An IGMP/MLD message in a snooping VLAN (set by `mcast::snoop`):
    /// copied to the snooping thread; forwarded to every port (`flood`:
    /// queries) or to the VLAN's multicast-router ports (reports, leaves).
    Snoop {
        flood: bool,
    },
    /// Multicast data in a snooping VLAN (set by `mcast::snoop`): the
    /// multicast route at this position of the snapshot's table, or
    /// `mcast::UNREGISTERED` (router ports only).
    Mcast(u32),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Verdict {
    pub action: Action,
    /// VLAN the frame was classified into (0 if dropped before that).
    pub vlan: u16,
    /// Offset of what follows the ingress tag (12 if there was none to
    /// remove); egress writes addresses, its own tag, then `frame[inner_off..]`.
    pub inner_off: u16,
    /// 802.1p priority from the ingress tag, kept on egress tags.
    pub pcp: u8,
}

impl Verdict {
    const EMPTY: Verdict = Verdict {
        action: Action::Drop(DropReason::Malformed),
        vlan: 0,
        inner_off: 12,
        pcp: 0,
    };
}

/// One verdict per frame of a batch, same indices.
pub struct Verdicts {
    pub v: [Verdict; BATCH_MAX],
    pub len: usize,
}

impl Default for Verdicts {
    fn default() -> Self {
        Verdicts {
            v: [Verdict::EMPTY; BATCH_MAX],
            len: 0,
        }
    }
}

/// What one call did, for the worker's bookkeeping.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Learning events queued.
    pub learned: u32,
}

#[inline]
fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

/// The IEEE 802.1D/Q reserved group addresses 01:80:c2:00:00:00–0f: no
/// bridge forwards them (STP, LACP, LLDP, 802.1X …).
#[inline]
fn is_reserved_group(dst: &[u8]) -> bool {
    dst[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && dst[5] <= 0x0f
}

/// Slow protocols (IEEE 802.3 Annex 57A): LACP, marker.
pub const ETHERTYPE_SLOW: u16 = 0x8809;

/// Destination of a backup pair's keepalives (locally administered
/// multicast, "LYKA"): seen by the receiving Lanyard, never forwarded.
pub const KEEPALIVE_MAC: [u8; 6] = [0x03, 0x4c, 0x59, 0x4b, 0x41, 0x00];
/// Destination of MAC-move update frames ("LYMMU"): forwarded like any
/// multicast, so every upstream switch sees their sources.
pub const MAC_MOVE_MAC: [u8; 6] = [0x03, 0x4c, 0x59, 0x4d, 0x4d, 0x55];
/// EtherType of keepalive and MAC-move frames (IEEE local experimental).
pub const ETHERTYPE_LANYARD: u16 = 0x88b5;

/// Destination of virtual-switch peer-protocol frames ("LYVS", locally
/// administered multicast, EtherType [`ETHERTYPE_LANYARD`]): taken off a
/// peer-link port for the control plane, dropped anywhere else.
pub const VSWITCH_PEER_MAC: [u8; 6] = [0x03, 0x4c, 0x59, 0x56, 0x53, 0x01];

/// Destination of loop-detect probes ("LYLD", locally administered
/// multicast): flooded like any multicast by other switches, taken off
/// the wire by every Lanyard.
pub const LOOP_PROBE_MAC: [u8; 6] = [0x03, 0x4c, 0x59, 0x4c, 0x44, 0x00];

/// Ingress classification of one frame: VLAN, inner offset, priority.
#[inline]
fn classify(t: &Tables, frame: &[u8], port: u16) -> Verdict {
    let mut v = Verdict::EMPTY;
    if frame.len() < 14 {
        return v;
    }
    let Some(p) = t.l2.ports.get(port as usize) else {
        return v;
    };
    let etype = be16(frame, 12);
    if frame[0] & 1 != 0 && frame[..6] == KEEPALIVE_MAC {
        // Counted as received (that is what keepalives are for), then gone.
        v.action = Action::Drop(DropReason::L2Control);
        return v;
    }
    if frame[0] & 1 != 0 && frame[..6] == VSWITCH_PEER_MAC {
        // The peer protocol: only a peer-link port takes it (the worker
        // punts it to the virtual-switch thread); never forwarded.
        v.action = if p.peer_link && etype == ETHERTYPE_LANYARD {
            Action::Control
        } else {
            Action::Drop(DropReason::L2Control)
        };
        return v;
    }
    if frame[0] & 1 != 0 && is_reserved_group(frame) && p.mode != PortMode::Tunnel {
        // LACP reaches the control plane from channel members, collecting
        // or not; other link-local control frames stop here. (802.1ad
        // customer ports carry their customers' control frames.)
        v.action = if (etype == ETHERTYPE_SLOW && p.logical != port)
            || (p.stp.on() && frame[5] == 0 && etype <= 1500)
        {
            // LACPDUs of channel members; BPDUs (802.3 length field, to
            // 01:80:c2:00:00:00) of spanning tree ports.
            Action::Control
        } else {
            Action::Drop(DropReason::L2Control)
        };
        return v;
    }
    if p.blocked || p.stp == StpState::Discarding {
        v.action = Action::Drop(DropReason::Blocked);
        return v;
    }
    let is_tag = match p.mode {
        // Access ports understand only 802.1Q tags (priority tags).
        PortMode::Access => etype == TPID_8021Q,
        PortMode::Trunk => etype == p.tpid,
        PortMode::Tunnel => false,
    };
    let limit = MAX_UNTAGGED_LEN
        + if etype == TPID_8021Q || etype == TPID_8021AD {
            4
        } else {
            0
        };
    if frame.len() > limit {
        v.action = Action::Drop(DropReason::Oversize);
        return v;
    }
    let (vlan, inner_off) = if is_tag {
        if frame.len() < 18 {
            return v; // tag cut short: malformed
        }
        let tci = be16(frame, 14);
        v.pcp = (tci >> 13) as u8;
        let vid = tci & 0xfff;
        match (p.mode, vid) {
            (_, 0xfff) => return v, // VID 4095 is reserved (802.1Q 9.6)
            (PortMode::Access, 0) => (p.pvid, 16),
            (PortMode::Access, _) => {
                v.action = Action::Drop(DropReason::TaggedOnAccess);
                return v;
            }
            (_, 0) if p.pvid == 0 => {
                v.action = Action::Drop(DropReason::UntaggedNotAllowed);
                return v;
            }
            (_, 0) => (p.pvid, 16),
            (_, vid) => (vid, 16),
        }
    } else {
        if p.mode == PortMode::Trunk && p.pvid == 0 {
            v.action = Action::Drop(DropReason::UntaggedNotAllowed);
            return v;
        }
        (p.pvid, 12)
    };
    v.vlan = vlan;
    v.inner_off = inner_off;
    if !p.vlans.contains(vlan) {
        v.action = Action::Drop(DropReason::VlanNotAllowed);
    } else if !t.l2.vlans[vlan as usize].configured {
        v.action = Action::Drop(DropReason::UnknownVlan);
    } else if frame[0] & 1 != 0 && frame[..6] == LOOP_PROBE_MAC {
        // A loop-detect probe: the worker reads it (one of this switch's
        // own: a loop) or floods it on (another switch's).
        v.action = Action::Control;
    } else {
        v.action = Action::Flood; // provisional: decided by the lookup pass
    }
    v
}

/// Decide every frame of `batch`. `now` is the switch's coarse clock in
/// seconds (for aging). Learning events go to `learn`.
pub fn process(
    t: &Tables,
    batch: &FrameBatch,
    now: u32,
    out: &mut Verdicts,
    learn: &LearnQueue,
    c: &WorkerCounters,
) -> Outcome {
    let n = batch.len();
    out.len = n;
    let mut outcome = Outcome::default();

    // Pass 1: classify and count ingress.
    for i in 0..n {
        let frame = batch.frame(i);
        let port = batch.port(i);
        let v = classify(t, frame, port);
        out.v[i] = v;
        let len = frame.len() as u64;
        if let Some(pc) = c.ports.get(port as usize) {
            pc.count_rx(frame);
        }
        match v.action {
            Action::Drop(r) => {
                let vlan = (v.vlan != 0).then_some(v.vlan);
                c.drop_in(port, vlan, r);
            }
            Action::Control => {}
            _ => {
                let vc = &c.vlans[v.vlan as usize];
                vc.rx_frames.add(1);
                vc.rx_bytes.add(len);
            }
        }
    }

    // Overlap the MAC table's cache misses for the whole batch.
    for i in 0..n {
        if !matches!(out.v[i].action, Action::Drop(_) | Action::Control) {
            let frame = batch.frame(i);
            let vlan = out.v[i].vlan;
            t.mac.prefetch(MacKey::from_slice(vlan, &frame[6..12]));
            t.mac.prefetch(MacKey::from_slice(vlan, &frame[0..6]));
        }
    }

    // Pass 2: source addresses — validate, refresh, learn. A channel
    // member's frames are learned on the channel.
    for i in 0..n {
        if matches!(out.v[i].action, Action::Drop(_) | Action::Control) {
            continue;
        }
        let frame = batch.frame(i);
        let port = t.l2.logical(batch.port(i));
        let vlan = out.v[i].vlan;
        if frame[6] & 1 != 0 {
            out.v[i].action = Action::Drop(DropReason::InvalidSource);
            c.drop_in(port, Some(vlan), DropReason::InvalidSource);
            continue;
        }
        let key = MacKey::from_slice(vlan, &frame[6..12]);
        let may_learn = t.l2.vlans[vlan as usize].learning && t.l2.ports[port as usize].learning;
        match t.mac.lookup(key) {
            Some(e) if e.port == port => {
                if e.seen != now && !e.is_static {
                    t.mac.touch(key, port, now);
                }
            }
            Some(e) if e.is_static => {} // a static entry never moves
            Some(_) => {
                // A move: always reported (limits count addresses, not moves).
                if may_learn {
                    outcome.learned += queue(learn, key, port, c);
                }
            }
            None => {
                if may_learn && !t.learn_gate.is_full(vlan, port) {
                    outcome.learned += queue(learn, key, port, c);
                }
            }
        }
    }

    // Pass 3: destinations.
    for i in 0..n {
        let v = &mut out.v[i];
        if matches!(v.action, Action::Drop(_) | Action::Control) {
            continue;
        }
        let frame = batch.frame(i);
        let in_port = batch.port(i);
        if t.l2.ports[in_port as usize].stp == StpState::Learning {
            // Learned above, forwarded nowhere.
            v.action = Action::Drop(DropReason::Blocked);
            c.drop_in(in_port, Some(v.vlan), DropReason::Blocked);
            continue;
        }
        let port = t.l2.logical(in_port);
        if frame[0] & 1 == 0 {
            if let Some(e) = t.mac.lookup(MacKey::from_slice(v.vlan, &frame[0..6])) {
                if t.l2.ports[in_port as usize].peer_link && t.l2.peer_served.contains(e.port) {
                    // From the virtual-switch peer, for a channel the peer
                    // reaches by its own members: it delivered it already.
                    v.action = Action::Drop(DropReason::PeerServed);
                    c.drop_in(in_port, Some(v.vlan), DropReason::PeerServed);
                    continue;
                }
                // A backup pair's addresses leave by its active member.
                let to = t.l2.redirect(e.port);
                if to == port {
                    v.action = Action::Drop(DropReason::SamePort);
                    c.drop_in(in_port, Some(v.vlan), DropReason::SamePort);
                    continue;
                }
                let fwd = t.l2.ports.get(to as usize).is_some_and(|p| p.forwarding());
                if fwd && t.l2.vlans[v.vlan as usize].members.contains(to) {
                    v.action = Action::Unicast(to);
                    continue;
                }
                // Stale entry (port down or left the VLAN): flood instead.
            }
        }
        v.action = Action::Flood;
        c.ports[in_port as usize].rx_flooded.add(1);
        c.vlans[v.vlan as usize].flooded.add(1);
    }
    outcome
}

#[inline]
fn queue(learn: &LearnQueue, key: MacKey, port: u16, c: &WorkerCounters) -> u32 {
    if learn.push(LearnEvent { key, port }).is_ok() {
        1
    } else {
        c.learn_queue_full.add(1);
        0
    }
}
