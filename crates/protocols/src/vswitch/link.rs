//! The peer link at run time: peer-protocol frames the workers punt from
//! peer-link ports (`Shared::peer_link`) are decoded here, and this
//! node's hellos, channel LACP views and learned addresses leave through
//! an inject socket on the first peer-link port that is up.
//!
//! Addresses cross bound to a multichassis channel id (0: a port of the
//! sender outside any channel); the receiver installs them on its own
//! side of the channel (or on the peer link for id 0) through the
//! learner, the MAC table's only writer. A node whose peer link comes up
//! asks for a full copy; the copy's end sweeps what the peer no longer
//! has (`macs::PeerMacs`). ARP/ND neighbours of the SVIs ([`super::neigh`])
//! and IGMP/MLD snooping memberships ([`super::groups`]) cross the same
//! way and are part of every full copy.

use super::groups::{wire_filter, GroupSync, GroupUpdate};
use super::macs::PeerMacs;
use super::neigh::NeighSync;
use crate::ha::{Changes, Ha};
use crate::learn::{LearnerInbox, LearnerRequest, MacChanges};
use datapath::Shared;
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tables::MacKey;
use wire::vswitch::{
    decode, encode, encode_group_filter, encode_groups, encode_macs, encode_neighbors, Hello,
    LacpState, MacEntry, Message, NeighEntry, PeerError, HEADER_LEN, MAX_GROUP_ENTRIES,
    MAX_MAC_ENTRIES, MAX_NEIGH_ENTRIES, MAX_PAYLOAD,
};

/// Ethernet header plus the largest message.
const FRAME_MAX: usize = 14 + HEADER_LEN + MAX_PAYLOAD;

/// Peer-link counters (`show virtual-switch`).
#[derive(Debug, Default, Clone)]
pub struct LinkCounters {
    /// Messages sent / not sent (no peer-link port up, socket error).
    pub tx: u64,
    pub tx_errors: u64,
    /// Messages received and decoded.
    pub rx: u64,
    /// Refused by the decoder, by reason.
    pub rx_bad: Vec<(&'static str, u64)>,
    /// Decoded, but for another domain.
    pub rx_wrong_domain: u64,
    /// Decoded, but not a peer-link message (a keepalive) or for a
    /// channel id this node does not have.
    pub rx_unexpected: u64,
    /// Address updates sent and received (entries).
    pub macs_tx: u64,
    pub macs_rx: u64,
    /// Full copies sent to the peer.
    pub copies_tx: u64,
}

impl LinkCounters {
    fn bad(&mut self, e: PeerError) {
        let k = e.as_str();
        match self.rx_bad.iter_mut().find(|(n, _)| *n == k) {
            Some((_, c)) => *c += 1,
            None => self.rx_bad.push((k, 1)),
        }
    }
}

/// One multichassis channel as the peer link sees it.
#[derive(Clone, Debug)]
pub struct McChannel {
    /// The pair-wide id.
    pub id: u16,
    /// This node's port id of the channel (what the MAC table holds).
    pub port: u16,
    /// Index into the HA state's channels.
    pub index: usize,
}

/// The configured peer-link ports (an aggregated peer link: its port
/// channel's members): (port id, name).
pub fn peer_link_ports(cfg: &config::Config) -> Vec<(u16, String)> {
    cfg.peer_link_ports()
        .into_iter()
        .filter_map(|n| Some((cfg.port_index(&n)? as u16, n)))
        .collect()
}

/// The port id of an aggregated peer link's port channel (what the MAC
/// table holds for the peer's own addresses); `None` for active/standby
/// ports.
pub fn peer_link_bundle(cfg: &config::Config) -> Option<u16> {
    cfg.peer_link_channel().map(|k| cfg.channel_port_id(k))
}

/// Why a bundle has no member distributing, from its members' LACP
/// details (`Ha::lacp_info`: `partner.system`, `pdus_rx`) and this node's
/// LACP system id.
pub fn bundle_refusal(members: &[serde_json::Value], own_system: [u8; 6]) -> String {
    let own = config::show_mac(own_system);
    let partner = |m: &serde_json::Value| m["partner"]["system"].as_str().map(String::from);
    if members
        .iter()
        .any(|m| partner(m).as_deref() == Some(own.as_str()))
    {
        format!("LACP hears its own system id {own}: the same switch.name on both nodes")
    } else if !members.is_empty() && members.iter().all(|m| m["pdus_rx"].as_u64() == Some(0)) {
        "no LACPDU received on any member (both ends passive?)".into()
    } else if members.iter().any(|m| partner(m).is_some()) {
        "LACP partner heard, no member in sync (another partner or key per member?)".into()
    } else {
        "no member distributing".into()
    }
}

/// The configured multichassis channels.
pub fn mc_channels(cfg: &config::Config) -> Vec<McChannel> {
    let Some(vs) = &cfg.virtual_switch else {
        return Vec::new();
    };
    vs.channels
        .iter()
        .filter_map(|c| {
            let index = cfg
                .port_channels
                .iter()
                .position(|p| p.name == c.port_channel)?;
            Some(McChannel {
                id: c.id as u16,
                port: cfg.channel_port_id(index),
                index,
            })
        })
        .collect()
}

/// Every SVI (default VRF and VRFs): the neighbours the peer link
/// synchronises.
pub fn svis(cfg: &config::Config) -> Vec<super::neigh::Svi> {
    if cfg.virtual_switch.is_none() {
        return Vec::new();
    }
    cfg.l3_interfaces()
        .into_iter()
        .filter_map(|i| {
            Some(super::neigh::Svi {
                vlan: i.vlan?,
                tap: routing::router::tap_name(&i.name, i.port as usize),
                netns: match i.vrf {
                    0 => None,
                    k => Some(cfg.vrfs.get(k - 1)?.netns().to_string()),
                },
            })
        })
        .collect()
}

/// What the peer link needs from the rest of the switch.
pub struct LinkIo {
    pub shared: Arc<Shared>,
    pub ha: Arc<Ha>,
    pub inbox: Arc<LearnerInbox>,
    pub changes: Arc<MacChanges>,
    /// Peer-link ports: (port id, interface name); an aggregated peer
    /// link's members.
    pub ports: Vec<(u16, String)>,
    /// An aggregated peer link's channel port ([`peer_link_bundle`]).
    pub bundle: Option<u16>,
    pub channels: Vec<McChannel>,
    /// SVIs whose neighbours are synchronised ([`svis`]).
    pub svis: Vec<super::neigh::Svi>,
    /// The multicast thread (snooping memberships), if it runs.
    pub mcast: Option<Arc<crate::mcast::Multicast>>,
}

impl LinkIo {
    /// The channel id announced for an address or membership on `port`
    /// (0: outside any channel); `None` on the peer link (never announced
    /// back).
    fn channel_of_port(&self, port: u16) -> Option<u16> {
        if self.bundle == Some(port) || self.ports.iter().any(|(p, _)| *p == port) {
            return None;
        }
        Some(
            self.channels
                .iter()
                .find(|c| c.port == port)
                .map_or(0, |c| c.id),
        )
    }

    /// Where the peer's entry for channel `id` goes here (0: the peer
    /// link — an aggregated one's channel port, else the port that
    /// carries data, the first usable one).
    fn port_of_channel(&self, id: u16) -> Option<u16> {
        if id == 0 && self.bundle.is_some() {
            return self.bundle;
        }
        if id == 0 {
            let st = self.ha.snapshot();
            return self
                .ports
                .iter()
                .map(|(p, _)| *p)
                .find(|p| st.usable(*p))
                .or_else(|| self.ports.first().map(|(p, _)| *p));
        }
        self.channels.iter().find(|c| c.id == id).map(|c| c.port)
    }
}

/// Events of one receive pass for the pair's state machine.
#[derive(Default)]
pub struct Received {
    /// Hellos, in order.
    pub hellos: Vec<(u16, Hello)>,
    /// A full copy of the peer's table completed (count agreed).
    pub synced: bool,
}

/// The running peer link.
pub struct PeerLink {
    io: LinkIo,
    domain: u16,
    sockets: Vec<Option<io::InjectSocket>>,
    /// The peer's addresses.
    pub macs: PeerMacs,
    /// Per channel: the peer says its members distribute.
    peer_active: Vec<bool>,
    /// Per channel: the LACP partner (system, key) the peer's members see
    /// (`None`: none yet / static channel).
    peer_partner: Vec<Option<([u8; 6], u16)>>,
    /// LACP views whose partner differs from ours (a second partner
    /// system across the pair: cabling or partner configuration).
    pub partner_mismatch: u64,
    pub counters: LinkCounters,
    generation: u32,
    src: [u8; 6],
    frame: Box<[u8; FRAME_MAX]>,
    /// What was last written into the HA state (hold, peer serves).
    applied: Option<(bool, Vec<bool>)>,
    /// The LACP views last sent (see [`PeerLink::send_changed_views`]).
    sent_views: Vec<LacpState>,
    /// ARP/ND neighbours of the SVIs.
    pub neigh: NeighSync,
    /// Snooping memberships (with multicast).
    pub groups: Option<GroupSync>,
}

impl PeerLink {
    pub fn new(io: LinkIo, domain: u16) -> PeerLink {
        let src = io
            .ports
            .first()
            .and_then(|(_, n)| io::link::mac(n))
            .unwrap_or([0x02, 0x4c, 0x59, 0x56, 0x53, 0x00]);
        let neigh = NeighSync::new(io.svis.clone());
        let groups = io.mcast.clone().map(GroupSync::new);
        PeerLink {
            neigh,
            groups,
            sockets: io.ports.iter().map(|_| None).collect(),
            peer_active: vec![false; io.channels.len()],
            peer_partner: vec![None; io.channels.len()],
            partner_mismatch: 0,
            io,
            domain,
            macs: PeerMacs::default(),
            counters: LinkCounters::default(),
            generation: 0,
            src,
            frame: Box::new([0; FRAME_MAX]),
            applied: None,
            sent_views: Vec::new(),
        }
    }

    /// The event fd the workers signal when peer frames are queued.
    pub fn event_fd(&self) -> std::os::fd::RawFd {
        self.io.shared.peer_link.event_fd()
    }

    /// Per channel: whether the peer's members distribute.
    pub fn peer_active(&self) -> &[bool] {
        &self.peer_active
    }

    pub fn channels(&self) -> &[McChannel] {
        &self.io.channels
    }

    /// An aggregated peer link (a port channel).
    pub fn aggregated(&self) -> bool {
        self.io.bundle.is_some()
    }

    /// An aggregated peer link: whether a member of its bundle distributes
    /// (link up and LACP collecting-distributing, or a static member with
    /// its link up); `None` for active/standby ports.
    pub fn bundle_distributing(&self) -> Option<bool> {
        let id = self.io.bundle?;
        let st = self.io.ha.snapshot();
        let c = st.channels.iter().find(|c| c.id == id)?;
        Some(
            c.members
                .iter()
                .zip(&c.distributing)
                .any(|(m, d)| *d && st.usable(*m)),
        )
    }

    /// Why an aggregated peer link's bundle has no member distributing,
    /// from its members' LACP state (`switch_name`: this node's, whose
    /// LACP system id the peer shows if it has the same name).
    pub fn no_data_reason(&self, switch_name: &str) -> String {
        let own_system = crate::ha::system_mac(switch_name);
        let Some(index) = self.io.bundle.and_then(|id| {
            let st = self.io.ha.snapshot();
            st.channels.iter().position(|c| c.id == id)
        }) else {
            return "no member distributing".into();
        };
        let info = self
            .io
            .ha
            .lacp_info
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(index)
            .cloned()
            .unwrap_or_default();
        bundle_refusal(&info, own_system)
    }

    /// The peer link's ports for `show`: name, link up, and what the
    /// port does for data (`data`: carries it — an aggregated link's
    /// distributing members, or active/standby's first usable port;
    /// `standby`; `down`).
    pub fn ports_json(&self) -> Vec<serde_json::Value> {
        let st = self.io.ha.snapshot();
        let bundle = self
            .io
            .bundle
            .and_then(|id| st.channels.iter().find(|c| c.id == id));
        let first = self
            .io
            .ports
            .iter()
            .find(|(p, _)| st.usable(*p))
            .map(|(p, _)| *p);
        self.io
            .ports
            .iter()
            .map(|(p, name)| {
                let up = st.usable(*p);
                let data = match bundle {
                    Some(c) => c
                        .members
                        .iter()
                        .zip(&c.distributing)
                        .any(|(m, d)| m == p && *d),
                    None => first == Some(*p),
                };
                serde_json::json!({
                    "name": name,
                    "up": up,
                    "state": match (up, data) {
                        (false, _) => "down",
                        (true, true) => "data",
                        (true, false) => "standby",
                    },
                })
            })
            .collect()
    }

    /// Index of the peer-link port to send on: the first whose link is up.
    fn tx_port(&self) -> Option<usize> {
        let st = self.io.ha.snapshot();
        self.io.ports.iter().position(|(p, _)| st.usable(*p))
    }

    /// Sends the message in `self.frame[14..14 + len]` on port `k`.
    fn send_frame(&mut self, k: Option<usize>, len: usize) -> bool {
        let Some(k) = k else {
            self.counters.tx_errors += 1;
            return false;
        };
        let f = &mut self.frame[..];
        f[0..6].copy_from_slice(&pipeline::l2::VSWITCH_PEER_MAC);
        f[6..12].copy_from_slice(&self.src);
        f[12..14].copy_from_slice(&pipeline::l2::ETHERTYPE_LANYARD.to_be_bytes());
        let mut n = 14 + len;
        if n < 60 {
            f[n..60].fill(0);
            n = 60;
        }
        if self.sockets[k].is_none() {
            self.sockets[k] = io::InjectSocket::open(&self.io.ports[k].1).ok();
        }
        let ok = match &self.sockets[k] {
            Some(s) => s.send(&self.frame[..n]).is_ok(),
            None => false,
        };
        if ok {
            self.counters.tx += 1;
        } else {
            // The interface may have been re-created: reopen next time.
            self.sockets[k] = None;
            self.counters.tx_errors += 1;
        }
        ok
    }

    fn send(&mut self, k: Option<usize>, msg: &Message<'_>) -> bool {
        match encode(self.domain, msg, &mut self.frame[14..]) {
            Ok(n) => self.send_frame(k, n),
            Err(_) => {
                self.counters.tx_errors += 1;
                false
            }
        }
    }

    fn send_macs(&mut self, k: Option<usize>, entries: &[MacEntry]) -> u64 {
        let mut sent = 0;
        for (i, chunk) in entries.chunks(MAX_MAC_ENTRIES).enumerate() {
            if i % 64 == 63 {
                // Let the peer's worker drain its ring during a big copy.
                std::thread::sleep(Duration::from_micros(500));
            }
            match encode_macs(self.domain, chunk, &mut self.frame[14..]) {
                Ok(n) => {
                    if self.send_frame(k, n) {
                        sent += chunk.len() as u64;
                    }
                }
                Err(_) => self.counters.tx_errors += 1,
            }
        }
        self.counters.macs_tx += sent;
        sent
    }

    fn send_neighbors(&mut self, k: Option<usize>, entries: &[NeighEntry]) -> u64 {
        let mut sent = 0;
        for chunk in entries.chunks(MAX_NEIGH_ENTRIES) {
            match encode_neighbors(self.domain, chunk, &mut self.frame[14..]) {
                Ok(n) => {
                    if self.send_frame(k, n) {
                        sent += chunk.len() as u64;
                    }
                }
                Err(_) => self.counters.tx_errors += 1,
            }
        }
        sent
    }

    /// Membership entries, then filters (one message each); returns the
    /// entries sent (what a full copy's end counts: filters are not
    /// counted, so a peer that does not know them agrees on the count).
    fn send_groups(&mut self, k: Option<usize>, u: &GroupUpdate) -> u64 {
        let mut sent = 0;
        for chunk in u.entries.chunks(MAX_GROUP_ENTRIES) {
            match encode_groups(self.domain, chunk, &mut self.frame[14..]) {
                Ok(n) => {
                    if self.send_frame(k, n) {
                        sent += chunk.len() as u64;
                    }
                }
                Err(_) => self.counters.tx_errors += 1,
            }
        }
        for ((vlan, group, channel), f) in &u.filters {
            let (mode, sources) = wire_filter(f);
            match encode_group_filter(
                self.domain,
                *group,
                *vlan,
                *channel,
                mode,
                &sources,
                &mut self.frame[14..],
            ) {
                Ok(n) => {
                    self.send_frame(k, n);
                }
                Err(_) => self.counters.tx_errors += 1,
            }
        }
        sent
    }

    /// The descriptors of the neighbour monitors (one per VRF with SVIs).
    pub fn neigh_fds(&self) -> impl Iterator<Item = i32> + '_ {
        self.neigh.fds()
    }

    /// The LACP partner (system, key) this node's members of channel
    /// `index` see: the first member that has one (`None`: no LACPDU
    /// heard, or a static channel).
    pub fn local_partner(&self, index: usize) -> Option<([u8; 6], u16)> {
        let info = self
            .io
            .ha
            .lacp_info
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        info.get(index)?.iter().find_map(|m| {
            let p = &m["partner"];
            let sys = p["system"].as_str()?;
            let mut mac = [0u8; 6];
            let mut parts = sys.split(':');
            for b in mac.iter_mut() {
                *b = u8::from_str_radix(parts.next()?, 16).ok()?;
            }
            Some((mac, p["key"].as_u64()? as u16))
        })
    }

    /// Per channel: the partner the peer's members see.
    pub fn peer_partner(&self) -> &[Option<([u8; 6], u16)>] {
        &self.peer_partner
    }

    /// Our hello and each channel's LACP view.
    pub fn send_hello(&mut self, hello: Hello) {
        let k = self.tx_port();
        self.send(k, &Message::Hello(hello));
        let views = self.views();
        for l in &views {
            self.send(k, &Message::Lacp(*l));
        }
        self.sent_views = views;
    }

    /// Sends at once the LACP views that changed since last sent (called
    /// every turn of the pair's thread, ≤ 10 ms): the peer's flood and
    /// `peer-served` filters follow a member joining or leaving within
    /// milliseconds, not a hello interval later (a flood delivered by both
    /// nodes, or by neither, in between).
    pub fn send_changed_views(&mut self) {
        let views = self.views();
        if views == self.sent_views {
            return;
        }
        let k = self.tx_port();
        for (i, l) in views.iter().enumerate() {
            if self.sent_views.get(i) != Some(l) {
                self.send(k, &Message::Lacp(*l));
            }
        }
        self.sent_views = views;
    }

    /// Each channel's LACP view as the data path has it now.
    fn views(&self) -> Vec<LacpState> {
        let st = self.io.ha.snapshot();
        let hold = st.mc.as_ref().is_some_and(|m| m.hold_down);
        (0..self.io.channels.len())
            .map(|j| {
                let c = &st.channels[self.io.channels[j].index];
                let up = c.members.iter().filter(|m| st.usable(**m)).count();
                let active = if hold {
                    0
                } else {
                    c.members
                        .iter()
                        .zip(&c.distributing)
                        .filter(|(m, d)| **d && st.usable(**m))
                        .count()
                };
                let (partner_system, partner_key) = self
                    .local_partner(self.io.channels[j].index)
                    .unwrap_or(([0; 6], 0));
                LacpState {
                    channel: self.io.channels[j].id,
                    partner_system,
                    partner_key,
                    members_up: up.min(255) as u8,
                    members_active: active.min(255) as u8,
                }
            })
            .collect()
    }

    /// Asks the peer for a full copy of its addresses.
    pub fn request_copy(&mut self) {
        let k = self.tx_port();
        self.send(k, &Message::SyncRequest);
    }

    fn channel_of_port(&self, port: u16) -> Option<u16> {
        self.io.channel_of_port(port)
    }

    fn port_of_channel(&self, id: u16) -> Option<u16> {
        self.io.port_of_channel(id)
    }

    /// A full copy of what this node learned, to the peer.
    fn send_copy(&mut self) {
        let (tx, rx) = mpsc::channel();
        self.io
            .inbox
            .send(&self.io.shared, LearnerRequest::LocalTable { reply: tx });
        let Ok(table) = rx.recv_timeout(Duration::from_secs(5)) else {
            tracing::warn!("virtual-switch: the learner did not answer a full-copy request");
            return;
        };
        let entries: Vec<MacEntry> = table
            .into_iter()
            .filter_map(|(key, port)| {
                Some(MacEntry {
                    mac: key.mac(),
                    vlan: key.vlan(),
                    channel: self.channel_of_port(port)?,
                    add: true,
                })
            })
            .collect();
        self.generation = self.generation.wrapping_add(1).max(1);
        let generation = self.generation;
        let k = self.tx_port();
        self.send(k, &Message::SyncStart { generation });
        let mut sent = self.send_macs(k, &entries);
        let neighbors = self.neigh.local_entries();
        sent += self.send_neighbors(k, &neighbors);
        let io = &self.io;
        let channel_of = |p: u16| io.channel_of_port(p);
        let groups = self.groups.as_mut().map(|g| g.full(&channel_of));
        if let Some(groups) = groups {
            sent += self.send_groups(k, &groups);
        }
        self.send(
            k,
            &Message::SyncEnd {
                generation,
                entries: sent as u32,
            },
        );
        self.counters.copies_tx += 1;
    }

    /// Local address changes since the last call, to the peer (dropped
    /// while the peer link is down: the peer asks for a copy on rejoin).
    pub fn send_changes(&mut self, link_alive: bool) {
        self.neigh.poll_local();
        let neighbors = self.neigh.take_pending();
        if link_alive && !neighbors.is_empty() {
            let k = self.tx_port();
            self.send_neighbors(k, &neighbors);
        }
        let changes = self.io.changes.take();
        if changes.is_empty() || !link_alive {
            return;
        }
        let entries: Vec<MacEntry> = changes
            .into_iter()
            .filter_map(|(key, port, add)| {
                Some(MacEntry {
                    mac: key.mac(),
                    vlan: key.vlan(),
                    channel: self.channel_of_port(port)?,
                    add,
                })
            })
            .collect();
        let k = self.tx_port();
        self.send_macs(k, &entries);
    }

    /// Drains the punted frames; returns what the pair must hear of.
    pub fn receive(&mut self) -> Received {
        let mut out = Received::default();
        let mut add: Vec<(MacKey, u16)> = Vec::new();
        let mut remove: Vec<MacKey> = Vec::new();
        let mut copy_requested = false;
        // Before popping, so a frame queued meanwhile wakes the next poll.
        self.io.shared.peer_link.drain_event();
        while let Some(b) = self.io.shared.peer_link.pop() {
            let f = b.frame();
            // Untagged as sent; tolerate one VLAN tag.
            let off = match f.get(12..14) {
                Some([0x81, 0x00]) | Some([0x88, 0xa8]) => 18,
                _ => 14,
            };
            match f.get(off..).map(decode) {
                None => self.counters.bad(PeerError::Truncated),
                Some(Err(e)) => self.counters.bad(e),
                Some(Ok((d, _))) if d != self.domain => self.counters.rx_wrong_domain += 1,
                Some(Ok((d, m))) => {
                    self.counters.rx += 1;
                    match m {
                        Message::Hello(h) => out.hellos.push((d, h)),
                        // The guardian's goodbye comes by the keepalive path only.
                        Message::Keepalive(_) | Message::Goodbye(_) => {
                            self.counters.rx_unexpected += 1
                        }
                        Message::Macs(list) => {
                            for e in list.iter() {
                                self.counters.macs_rx += 1;
                                let Some(port) = self.port_of_channel(e.channel) else {
                                    self.counters.rx_unexpected += 1;
                                    continue;
                                };
                                self.macs.apply(&e);
                                let key = MacKey::new(e.vlan, e.mac);
                                if e.add {
                                    add.push((key, port));
                                } else {
                                    remove.push(key);
                                }
                            }
                        }
                        Message::Lacp(l) => {
                            match self.io.channels.iter().position(|c| c.id == l.channel) {
                                Some(j) => {
                                    self.peer_active[j] = l.members_active > 0;
                                    let theirs = (l.partner_system != [0; 6])
                                        .then_some((l.partner_system, l.partner_key));
                                    let ours = self.local_partner(self.io.channels[j].index);
                                    if self.peer_partner[j] != theirs {
                                        if let (Some(a), Some(b)) = (ours, theirs) {
                                            if a != b {
                                                self.partner_mismatch += 1;
                                                tracing::warn!(
                                                    "virtual-switch: channel {} sees another LACP partner on the peer ({}, key {})",
                                                    l.channel,
                                                    config::show_mac(b.0),
                                                    b.1
                                                );
                                            }
                                        }
                                    }
                                    self.peer_partner[j] = theirs;
                                }
                                None => self.counters.rx_unexpected += 1,
                            }
                        }
                        Message::Neighbors(list) => {
                            if self.macs.copying() {
                                self.macs
                                    .count_in_copy(list.iter().filter(|e| e.add).count());
                            }
                            list.iter().for_each(|e| self.neigh.apply(&e));
                        }
                        Message::Groups(list) => {
                            if self.macs.copying() {
                                self.macs
                                    .count_in_copy(list.iter().filter(|e| e.add).count());
                            }
                            match self.groups.as_mut() {
                                Some(g) => list.iter().for_each(|e| g.apply(&e)),
                                None => self.counters.rx_unexpected += list.len() as u64,
                            }
                        }
                        Message::GroupFilter(f) => match self.groups.as_mut() {
                            Some(g) => g.apply_filter(&f),
                            None => self.counters.rx_unexpected += 1,
                        },
                        Message::SyncRequest => copy_requested = true,
                        Message::SyncStart { generation } => {
                            self.flush_learner(&mut add, &mut remove);
                            self.macs.sync_start(generation);
                            self.neigh.sync_start(generation);
                            if let Some(g) = self.groups.as_mut() {
                                g.sync_start(generation);
                            }
                        }
                        Message::SyncEnd {
                            generation,
                            entries,
                        } => {
                            self.flush_learner(&mut add, &mut remove);
                            let mut swept = Vec::new();
                            let ok = self.macs.sync_end(generation, entries, |mac, vlan| {
                                swept.push(MacKey::new(vlan, mac))
                            });
                            remove.extend(swept);
                            self.neigh.sync_end(generation);
                            if let Some(g) = self.groups.as_mut() {
                                g.sync_end(generation);
                            }
                            if ok {
                                out.synced = true;
                            } else {
                                tracing::warn!(
                                    "virtual-switch: full copy {generation} incomplete ({entries} sent)"
                                );
                            }
                        }
                    }
                }
            }
            self.io.shared.peer_link.recycle(b);
        }
        self.flush_learner(&mut add, &mut remove);
        if copy_requested {
            self.send_copy();
        }
        out
    }

    fn flush_learner(&self, add: &mut Vec<(MacKey, u16)>, remove: &mut Vec<MacKey>) {
        if !add.is_empty() {
            let entries = std::mem::take(add);
            self.io
                .inbox
                .send(&self.io.shared, LearnerRequest::PeerAdd { entries });
        }
        if !remove.is_empty() {
            let keys = std::mem::take(remove);
            self.io
                .inbox
                .send(&self.io.shared, LearnerRequest::PeerRemove { keys });
        }
    }

    /// The peer is gone for good: addresses behind its own ports go,
    /// channel-bound ones stay (our members reach them).
    pub fn peer_lost(&mut self) {
        let keys: Vec<MacKey> = self
            .macs
            .peer_lost()
            .into_iter()
            .map(|(mac, vlan)| MacKey::new(vlan, mac))
            .collect();
        let mut none = Vec::new();
        let mut keys = keys;
        self.flush_learner(&mut none, &mut keys);
        self.io
            .inbox
            .send(&self.io.shared, LearnerRequest::PeerLost);
        self.peer_active.iter_mut().for_each(|a| *a = false);
        self.neigh.peer_lost();
        if let Some(g) = self.groups.as_mut() {
            g.peer_lost();
        }
    }

    /// Timers of the neighbour and group sync (every hello interval):
    /// local memberships out, peer entries not installed yet retried, the
    /// peer's memberships into the multicast thread.
    pub fn sync_tick(&mut self, link_alive: bool) {
        self.neigh.retry();
        if self.groups.is_none() {
            return;
        }
        let io = &self.io;
        let channel_of = |p: u16| io.channel_of_port(p);
        let port_of = |c: u16| io.port_of_channel(c);
        let Some(g) = self.groups.as_mut() else {
            return;
        };
        let changes = if link_alive {
            g.changes(&channel_of)
        } else {
            GroupUpdate::default()
        };
        g.apply_to_multicast(&port_of);
        if !changes.is_empty() {
            let k = self.tx_port();
            self.send_groups(k, &changes);
        }
    }

    /// Writes the pair's decision into the data path: members held out
    /// (`hold`), and the channels the peer serves (only while the peer
    /// link is alive).
    pub fn apply(&mut self, hold: bool, link_alive: bool) {
        let serves: Vec<bool> = self.peer_active.iter().map(|a| *a && link_alive).collect();
        let want = (hold, serves);
        if self.applied.as_ref() == Some(&want) {
            return;
        }
        let (hold, serves) = want.clone();
        self.io.ha.update(|st| {
            if let Some(mc) = st.mc.as_mut() {
                mc.hold_down = hold;
                mc.peer_serves = serves;
            }
            Changes::default()
        });
        self.applied = Some(want);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reasons `show virtual-switch` gives for a bundle that never
    /// distributes, from the members' LACP details as `Ha::lacp_info`
    /// holds them.
    #[test]
    fn bundle_refusal_names_the_cause() {
        let own = [2, 0xa1, 0x3c, 0x5e, 0, 0x11];
        let member = |partner: Option<&str>, rx: u64| {
            json!({
                "partner": partner.map(|p| json!({"system": p, "key": 1})),
                "pdus_rx": rx,
                "mux_state": "detached",
            })
        };
        // The same switch name on both nodes: the peer's system is ours.
        let same = [member(Some("02:a1:3c:5e:00:11"), 9), member(None, 0)];
        assert!(bundle_refusal(&same, own).contains("same switch.name"));
        // Both ends passive: nothing ever heard.
        let passive = [member(None, 0), member(None, 0)];
        assert!(bundle_refusal(&passive, own).contains("both ends passive"));
        // Heard, but another partner: not in sync.
        let other = [member(Some("02:00:00:00:00:99"), 4), member(None, 3)];
        assert!(bundle_refusal(&other, own).contains("no member in sync"));
        assert_eq!(bundle_refusal(&[], own), "no member distributing");
    }
}
