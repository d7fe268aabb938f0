//! IGMP/MLD snooping state over the peer link.
//!
//! Every hello interval this node compares the memberships its snooping
//! learned (`Multicast::local_memberships`) with what it last announced
//! and sends the difference, bound to the multichassis channel id (0: a
//! port outside any channel; memberships snooped on the peer link are
//! never announced back). The receiver hands the peer's memberships to
//! its multicast thread on its own side of the channel (or on the peer
//! link for id 0), kept apart from what it snooped itself
//! (`Multicast::set_peer_groups`): a join heard by one node makes both
//! deliver the group to the channel, and a leave or expiry on the node
//! that heard it withdraws it from both.
//!
//! The peer's source filters are not carried: its member ports get every
//! source of the group (more than IGMPv3/MLDv2 include mode asks for,
//! never less). When the peer is lost for good, channel-bound
//! memberships stay for one group membership interval (the hosts'
//! reports reach this node's members by then); the rest go at once.

use super::peer_set::PeerSet;
use crate::mcast::Multicast;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::mcast::McAddr;
use wire::vswitch::GroupEntry;

/// Group-sync counters (`show virtual-switch`).
#[derive(Debug, Default, Clone)]
pub struct GroupCounters {
    pub tx: u64,
    pub rx: u64,
}

pub struct GroupSync {
    mcast: Arc<Multicast>,
    /// What the peer knows of ours: (VLAN, group, channel id).
    sent: BTreeSet<(u16, IpAddr, u16)>,
    peer: PeerSet<(u16, IpAddr, u16), ()>,
    /// The peer's memberships expire then (after it was lost).
    expire_at: Option<Instant>,
    changed: bool,
    pub counters: GroupCounters,
}

impl GroupSync {
    pub fn new(mcast: Arc<Multicast>) -> GroupSync {
        GroupSync {
            mcast,
            sent: BTreeSet::new(),
            peer: PeerSet::default(),
            expire_at: None,
            changed: false,
            counters: GroupCounters::default(),
        }
    }

    pub fn peer_len(&self) -> usize {
        self.peer.len()
    }

    /// This node's memberships by channel id (`channel_of`: port → id,
    /// `None` for the peer link).
    fn local(&self, channel_of: &dyn Fn(u16) -> Option<u16>) -> BTreeSet<(u16, IpAddr, u16)> {
        self.mcast
            .local_memberships()
            .into_iter()
            .filter_map(|(v, g, p)| Some((v, IpAddr::from(g), channel_of(p)?)))
            .collect()
    }

    /// Changes since the last call, to send.
    pub fn changes(&mut self, channel_of: &dyn Fn(u16) -> Option<u16>) -> Vec<GroupEntry> {
        let now = self.local(channel_of);
        let mut out: Vec<GroupEntry> = now
            .difference(&self.sent)
            .map(|k| entry(*k, true))
            .collect();
        out.extend(self.sent.difference(&now).map(|k| entry(*k, false)));
        self.sent = now;
        self.counters.tx += out.len() as u64;
        out
    }

    /// Every membership (a full copy); also what the peer now knows.
    pub fn full(&mut self, channel_of: &dyn Fn(u16) -> Option<u16>) -> Vec<GroupEntry> {
        self.sent = self.local(channel_of);
        self.sent.iter().map(|k| entry(*k, true)).collect()
    }

    /// One entry from the peer.
    pub fn apply(&mut self, e: &GroupEntry) {
        self.counters.rx += 1;
        let k = (e.vlan, e.group, e.channel);
        if e.add {
            self.changed |= self.peer.insert(k, ()).is_none();
        } else {
            self.changed |= self.peer.remove(&k).is_some();
        }
        self.expire_at = None;
    }

    pub fn sync_start(&mut self, generation: u32) {
        self.peer.sync_start(generation);
    }

    pub fn sync_end(&mut self, generation: u32) {
        let mut any = false;
        self.peer.sync_end(generation, |_, _| any = true);
        self.changed |= any;
    }

    /// The peer is gone for good.
    pub fn peer_lost(&mut self) {
        let mut any = false;
        self.peer
            .retain(|(_, _, ch), _| *ch != 0, |_, _| any = true);
        self.changed |= any;
        let gmi = self
            .mcast
            .membership_interval()
            .unwrap_or(Duration::from_secs(260));
        self.expire_at = Some(Instant::now() + gmi);
        // Announce everything again when a peer comes back.
        self.sent.clear();
    }

    /// Expiry after peer loss, and the peer's memberships into the
    /// multicast thread when they changed (`port_of`: channel id → port).
    pub fn apply_to_multicast(&mut self, port_of: &dyn Fn(u16) -> Option<u16>) {
        if self.expire_at.is_some_and(|t| Instant::now() >= t) {
            self.expire_at = None;
            let mut any = false;
            self.peer.retain(|_, _| false, |_, _| any = true);
            self.changed |= any;
        }
        if !std::mem::take(&mut self.changed) {
            return;
        }
        let set: BTreeSet<(u16, McAddr, u16)> = self
            .peer
            .iter()
            .filter_map(|((v, g, ch), _)| Some((*v, McAddr::from(*g), port_of(*ch)?)))
            .collect();
        self.mcast.set_peer_groups(set);
    }
}

fn entry(k: (u16, IpAddr, u16), add: bool) -> GroupEntry {
    GroupEntry {
        group: k.1,
        vlan: k.0,
        channel: k.2,
        add,
    }
}
