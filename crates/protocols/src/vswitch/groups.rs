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
//! IGMPv3/MLDv2 source filters cross too: each membership's filter,
//! merged over the sender's ports behind the same channel id (what any of
//! them forwards), follows its entry as a filter message (type 11) when
//! it is not "every source", and again whenever it changes. The receiver
//! installs the peer's ports on the (S, G) routes of the sources the
//! filter passes, and on the (*, G) route only when it passes unnamed
//! sources (EXCLUDE mode). A membership entry resets the filter to every
//! source (an older peer sends no filters: its ports get every source,
//! as before); a filter longer than a message holds is sent as every
//! source (INCLUDE) or cut short (EXCLUDE): more than asked, never less.
//! When the peer is lost for good, channel-bound
//! memberships stay for one group membership interval (the hosts'
//! reports reach this node's members by then); the rest go at once.

use super::peer_set::PeerSet;
use crate::mcast::{Multicast, SourceFilter};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::mcast::McAddr;
use wire::vswitch::{GroupEntry, GroupFilter, SourceMode, MAX_FILTER_SOURCES};

/// (VLAN, group, channel id).
type Key = (u16, IpAddr, u16);

/// What to send: membership entries first, then the filters of those
/// (and of memberships whose filter changed) that do not pass every
/// source.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GroupUpdate {
    pub entries: Vec<GroupEntry>,
    pub filters: Vec<(Key, SourceFilter)>,
}

impl GroupUpdate {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.filters.is_empty()
    }
}

/// A filter as one message carries it: mode and at most
/// [`MAX_FILTER_SOURCES`] sources (longer: see the module docs).
pub fn wire_filter(f: &SourceFilter) -> (SourceMode, Vec<IpAddr>) {
    match f {
        SourceFilter::Include(a) if a.len() <= MAX_FILTER_SOURCES => (
            SourceMode::Include,
            a.iter().map(|s| IpAddr::from(*s)).collect(),
        ),
        SourceFilter::Exclude(x) => (
            SourceMode::Exclude,
            x.iter()
                .take(MAX_FILTER_SOURCES)
                .map(|s| IpAddr::from(*s))
                .collect(),
        ),
        _ => (SourceMode::Any, Vec::new()),
    }
}

/// Group-sync counters (`show virtual-switch`).
#[derive(Debug, Default, Clone)]
pub struct GroupCounters {
    pub tx: u64,
    pub rx: u64,
}

pub struct GroupSync {
    mcast: Arc<Multicast>,
    /// What the peer knows of ours, with the filters sent.
    sent: BTreeMap<Key, SourceFilter>,
    peer: PeerSet<Key, ()>,
    /// The peer's filters that do not pass every source.
    filters: HashMap<Key, SourceFilter>,
    /// The peer's memberships expire then (after it was lost).
    expire_at: Option<Instant>,
    changed: bool,
    pub counters: GroupCounters,
}

impl GroupSync {
    pub fn new(mcast: Arc<Multicast>) -> GroupSync {
        GroupSync {
            mcast,
            sent: BTreeMap::new(),
            peer: PeerSet::default(),
            filters: HashMap::new(),
            expire_at: None,
            changed: false,
            counters: GroupCounters::default(),
        }
    }

    pub fn peer_len(&self) -> usize {
        self.peer.len()
    }

    /// This node's memberships by channel id (`channel_of`: port → id,
    /// `None` for the peer link), filters merged over the ports behind
    /// one id.
    fn local(&self, channel_of: &dyn Fn(u16) -> Option<u16>) -> BTreeMap<Key, SourceFilter> {
        let mut out: BTreeMap<Key, SourceFilter> = BTreeMap::new();
        for (v, g, p, f) in self.mcast.local_memberships() {
            let Some(ch) = channel_of(p) else {
                continue;
            };
            out.entry((v, IpAddr::from(g), ch))
                .and_modify(|m| *m = m.union(&f))
                .or_insert(f);
        }
        out
    }

    /// Changes since the last call, to send.
    pub fn changes(&mut self, channel_of: &dyn Fn(u16) -> Option<u16>) -> GroupUpdate {
        let now = self.local(channel_of);
        let mut out = GroupUpdate::default();
        for (k, f) in &now {
            match self.sent.get(k) {
                None => {
                    out.entries.push(entry(*k, true));
                    if *f != SourceFilter::Any {
                        out.filters.push((*k, f.clone()));
                    }
                }
                Some(old) if old != f => out.filters.push((*k, f.clone())),
                Some(_) => {}
            }
        }
        for k in self.sent.keys().filter(|k| !now.contains_key(*k)) {
            out.entries.push(entry(*k, false));
        }
        self.sent = now;
        self.counters.tx += (out.entries.len() + out.filters.len()) as u64;
        out
    }

    /// Every membership (a full copy); also what the peer now knows.
    pub fn full(&mut self, channel_of: &dyn Fn(u16) -> Option<u16>) -> GroupUpdate {
        self.sent = self.local(channel_of);
        GroupUpdate {
            entries: self.sent.keys().map(|k| entry(*k, true)).collect(),
            filters: self
                .sent
                .iter()
                .filter(|(_, f)| **f != SourceFilter::Any)
                .map(|(k, f)| (*k, f.clone()))
                .collect(),
        }
    }

    /// One entry from the peer. An added (or refreshed) membership passes
    /// every source until its filter follows.
    pub fn apply(&mut self, e: &GroupEntry) {
        self.counters.rx += 1;
        let k = (e.vlan, e.group, e.channel);
        if e.add {
            self.changed |= self.peer.insert(k, ()).is_none();
        } else {
            self.changed |= self.peer.remove(&k).is_some();
        }
        self.changed |= self.filters.remove(&k).is_some();
        self.expire_at = None;
    }

    /// The source filter of one of the peer's memberships (a filter
    /// implies the membership).
    pub fn apply_filter(&mut self, f: &GroupFilter<'_>) {
        self.counters.rx += 1;
        let k = (f.vlan, f.group, f.channel);
        self.changed |= self.peer.insert(k, ()).is_none();
        let sources = || f.sources().map(tables::mcast::McAddr::from).collect();
        let filter = match f.mode {
            SourceMode::Any => SourceFilter::Any,
            SourceMode::Include => SourceFilter::Include(sources()),
            SourceMode::Exclude => SourceFilter::Exclude(sources()).normal(),
        };
        if filter == SourceFilter::Any {
            self.changed |= self.filters.remove(&k).is_some();
        } else if self.filters.get(&k) != Some(&filter) {
            self.filters.insert(k, filter);
            self.changed = true;
        }
        self.expire_at = None;
    }

    /// The peer's filter of a membership (every source if none came).
    pub fn peer_filter(&self, k: &Key) -> Option<SourceFilter> {
        self.peer.get(k)?;
        Some(self.filters.get(k).cloned().unwrap_or_default())
    }

    /// Filters of memberships that are gone go with them.
    fn prune(&mut self) {
        let peer = &self.peer;
        self.filters.retain(|k, _| peer.get(k).is_some());
    }

    pub fn sync_start(&mut self, generation: u32) {
        self.peer.sync_start(generation);
    }

    pub fn sync_end(&mut self, generation: u32) {
        let mut any = false;
        self.peer.sync_end(generation, |_, _| any = true);
        self.changed |= any;
        self.prune();
    }

    /// The peer is gone for good.
    pub fn peer_lost(&mut self) {
        let mut any = false;
        self.peer
            .retain(|(_, _, ch), _| *ch != 0, |_, _| any = true);
        self.changed |= any;
        self.prune();
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
            self.prune();
        }
        if !std::mem::take(&mut self.changed) {
            return;
        }
        let mut set: BTreeMap<(u16, McAddr, u16), SourceFilter> = BTreeMap::new();
        for (k, _) in self.peer.iter() {
            let (v, g, ch) = *k;
            let Some(port) = port_of(ch) else {
                continue;
            };
            let f = self.filters.get(k).cloned().unwrap_or_default();
            set.entry((v, McAddr::from(g), port))
                .and_modify(|m| *m = m.union(&f))
                .or_insert(f);
        }
        self.mcast.set_peer_groups(set);
    }
}

fn entry(k: Key, add: bool) -> GroupEntry {
    GroupEntry {
        group: k.1,
        vlan: k.0,
        channel: k.2,
        add,
    }
}
