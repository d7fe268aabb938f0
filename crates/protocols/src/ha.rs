//! Link protection: backup port pairs and port channels (docs/ha.md).
//!
//! [`HaState`] is pure: it holds each port's link state, which member of
//! each backup pair is active and which channel members distribute, and
//! derives the layer-2 snapshot's `up` / `blocked` / `egress` fields from
//! them. [`Ha`] wraps it for the running switch: every change (a link
//! event from the supervisor, LACP, a preemption timer, a keepalive loss)
//! is one call that updates the state and publishes one snapshot. Learned
//! addresses are never rewritten on failover: they keep pointing at the
//! port they were learned on, and the snapshot's egress indirection sends
//! them out of the active member.

use crate::learn::{LearnerInbox, LearnerRequest};
use config::ha::{LacpMode, LacpRate};
use config::Config;
use datapath::Shared;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tables::l2::{Channel, Egress, LoadBalance, StpState, MAX_CHANNEL_MEMBERS};
use tables::{L2Tables, Tables};

/// One backup pair at run time.
#[derive(Clone, Debug)]
pub struct Pair {
    pub primary: u16,
    pub backup: u16,
    pub preempt: bool,
    pub preempt_delay: Duration,
    pub keepalive: Option<Duration>,
    pub mac_move_update: bool,
    /// The member that forwards.
    pub active: u16,
    /// When the primary came back (preemption waits `preempt_delay`).
    pub preempt_at: Option<Instant>,
    /// Failovers so far.
    pub failovers: u64,
    pub last_failover: Option<Instant>,
}

/// One port channel at run time.
#[derive(Clone, Debug)]
pub struct ChannelState {
    pub name: String,
    /// The channel's own port id (what the MAC table learns).
    pub id: u16,
    pub members: Vec<u16>,
    pub lacp: LacpMode,
    pub rate: LacpRate,
    pub hash: LoadBalance,
    pub min_links: usize,
    /// Per member: LACP (or, static, the link) lets it carry traffic.
    pub distributing: Vec<bool>,
}

impl ChannelState {
    fn distributing_members(&self, link_up: &[bool]) -> Vec<u16> {
        self.members
            .iter()
            .zip(&self.distributing)
            .filter(|(m, d)| **d && link_up.get(**m as usize).copied().unwrap_or(false))
            .map(|(m, _)| *m)
            .collect()
    }

    /// Up when at least `min-links` members distribute.
    pub fn is_up(&self, link_up: &[bool]) -> bool {
        self.distributing_members(link_up).len() >= self.min_links
    }
}

/// What a change asks of the rest of the switch.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Ports whose learned addresses go (nothing left to reach them by).
    pub flush: Vec<u16>,
    /// Backup pairs that switched: (pair, from, to).
    pub failovers: Vec<(usize, u16, u16)>,
}

/// Link protection state of a switch (pure; see the module docs).
#[derive(Clone, Debug)]
pub struct HaState {
    pub pairs: Vec<Pair>,
    pub channels: Vec<ChannelState>,
    /// Per port id: link up (as the supervisor saw it), and not declared
    /// down by a keepalive.
    pub link_up: Vec<bool>,
    pub keepalive_down: Vec<bool>,
    /// Per port id: spanning tree's state (`Off` where it does not run),
    /// set by the spanning tree thread (`crate::spanning_tree`).
    pub stp: Vec<StpState>,
    /// Multichassis channels of a virtual-switch pair (`None` without one).
    pub mc: Option<Multichassis>,
}

/// What the virtual-switch pair asks of this node's channels (set by the
/// `protocols::vswitch` thread, applied in [`HaState::derive`]).
#[derive(Clone, Debug, Default)]
pub struct Multichassis {
    /// Peer-link port ids (an aggregated peer link: its members).
    pub peer_link: Vec<u16>,
    /// An aggregated peer link: its port channel (index into
    /// `HaState::channels`). Data crossing is hashed over the members
    /// that distribute, like any channel's; `None`: active/standby ports.
    pub peer_channel: Option<usize>,
    /// Per multichassis channel: (index into `HaState::channels`, id).
    pub channels: Vec<(usize, u16)>,
    /// Per multichassis channel: the peer says its members of the channel
    /// distribute (and the peer link is alive).
    pub peer_serves: Vec<bool>,
    /// Members held out of their channels: a dual-active secondary, or
    /// the delay after a start or a rejoin (LACP out of sync).
    pub hold_down: bool,
}

impl Multichassis {
    /// Whether channel index `c` is multichassis, and its position here.
    pub fn position(&self, c: usize) -> Option<usize> {
        self.channels.iter().position(|(k, _)| *k == c)
    }
}

impl HaState {
    pub fn new(cfg: &Config) -> HaState {
        let id = |n: &str| cfg.port_index(n).unwrap_or(0) as u16;
        let pairs = cfg
            .backup_pairs
            .iter()
            .map(|b| Pair {
                primary: id(&b.primary),
                backup: id(&b.backup),
                preempt: b.preempt,
                preempt_delay: Duration::from_millis(b.preempt_delay_ms as u64),
                keepalive: (b.keepalive_ms > 0)
                    .then(|| Duration::from_millis(b.keepalive_ms as u64)),
                mac_move_update: b.mac_move_update,
                active: id(&b.primary),
                preempt_at: None,
                failovers: 0,
                last_failover: None,
            })
            .collect();
        let channels = cfg
            .port_channels
            .iter()
            .enumerate()
            .map(|(k, c)| ChannelState {
                name: c.name.clone(),
                id: cfg.channel_port_id(k),
                members: c.members.iter().map(|m| id(m)).collect(),
                lacp: c.lacp,
                rate: c.lacp_rate,
                hash: c.load_balance.table(),
                min_links: c.min_links as usize,
                distributing: vec![false; c.members.len()],
            })
            .collect();
        let mut stp = vec![StpState::Off; tables::MAX_PORTS];
        for (i, _) in cfg.stp_ports() {
            stp[i] = StpState::Discarding;
        }
        let mc = cfg.virtual_switch.as_ref().map(|vs| {
            let channels: Vec<(usize, u16)> = vs
                .channels
                .iter()
                .filter_map(|c| {
                    let k = cfg
                        .port_channels
                        .iter()
                        .position(|p| p.name == c.port_channel)?;
                    Some((k, c.id as u16))
                })
                .collect();
            Multichassis {
                peer_link: cfg.peer_link_ports().iter().map(|n| id(n)).collect(),
                peer_channel: cfg.peer_link_channel(),
                peer_serves: vec![false; channels.len()],
                channels,
                // Held until the pair's thread decides (delay-restore).
                hold_down: true,
            }
        });
        HaState {
            pairs,
            channels,
            link_up: vec![false; tables::MAX_PORTS],
            keepalive_down: vec![false; tables::MAX_PORTS],
            stp,
            mc,
        }
    }

    /// The port is usable: link up and keepalives (if any) arriving.
    pub fn usable(&self, port: u16) -> bool {
        let p = port as usize;
        self.link_up.get(p).copied().unwrap_or(false)
            && !self.keepalive_down.get(p).copied().unwrap_or(false)
    }

    fn pair_of(&self, port: u16) -> Option<usize> {
        self.pairs
            .iter()
            .position(|p| p.primary == port || p.backup == port)
    }

    fn channel_of(&self, port: u16) -> Option<(usize, usize)> {
        self.channels
            .iter()
            .enumerate()
            .find_map(|(c, ch)| ch.members.iter().position(|m| *m == port).map(|k| (c, k)))
    }

    /// Whether `port` is a pair or channel member (its own link events
    /// do not flush it).
    pub fn protected(&self, port: u16) -> bool {
        self.pair_of(port).is_some() || self.channel_of(port).is_some()
    }

    /// A port's link went up or down.
    pub fn set_link(&mut self, port: u16, up: bool, now: Instant) -> Changes {
        let was_up: Vec<bool> = self
            .channels
            .iter()
            .map(|c| c.is_up(&self.usable_vec()))
            .collect();
        if let Some(l) = self.link_up.get_mut(port as usize) {
            *l = up;
        }
        let mut ch = Changes::default();
        if let Some(i) = self.pair_of(port) {
            self.reselect(i, now, &mut ch);
        } else if let Some((c, k)) = self.channel_of(port) {
            if self.channels[c].lacp == LacpMode::Static {
                self.channels[c].distributing[k] = up;
            } else if !up {
                // LACP learns of it later; the link is gone now.
                self.channels[c].distributing[k] = false;
            }
            self.channel_flush(c, was_up[c], &mut ch);
        } else if !up {
            ch.flush.push(port);
        }
        ch
    }

    /// LACP says whether a channel member may carry traffic.
    pub fn set_distributing(&mut self, channel: usize, member: usize, on: bool) -> Changes {
        let mut ch = Changes::default();
        let Some(c) = self.channels.get(channel) else {
            return ch;
        };
        let was = c.is_up(&self.usable_vec());
        if let Some(d) = self.channels[channel].distributing.get_mut(member) {
            *d = on;
        }
        self.channel_flush(channel, was, &mut ch);
        ch
    }

    /// A keepalive verdict on a pair member.
    pub fn set_keepalive_down(&mut self, port: u16, down: bool, now: Instant) -> Changes {
        if let Some(k) = self.keepalive_down.get_mut(port as usize) {
            *k = down;
        }
        let mut ch = Changes::default();
        if let Some(i) = self.pair_of(port) {
            self.reselect(i, now, &mut ch);
        }
        ch
    }

    fn usable_vec(&self) -> Vec<bool> {
        (0..self.link_up.len() as u16)
            .map(|p| self.usable(p))
            .collect()
    }

    fn channel_flush(&self, c: usize, was_up: bool, ch: &mut Changes) {
        let ch_state = &self.channels[c];
        if was_up && !ch_state.is_up(&self.usable_vec()) {
            ch.flush.push(ch_state.id);
        }
    }

    /// Decide pair `i`'s active member after a change.
    fn reselect(&mut self, i: usize, now: Instant, ch: &mut Changes) {
        let (pri_ok, bak_ok) = (
            self.usable(self.pairs[i].primary),
            self.usable(self.pairs[i].backup),
        );
        let p = &mut self.pairs[i];
        let from = p.active;
        if p.active == p.primary {
            if !pri_ok && bak_ok {
                p.active = p.backup;
            }
        } else if !bak_ok && pri_ok {
            p.active = p.primary;
        } else if pri_ok && p.preempt {
            if p.preempt_delay.is_zero() {
                p.active = p.primary;
            } else if p.preempt_at.is_none() {
                p.preempt_at = Some(now + p.preempt_delay);
            }
        }
        if !pri_ok {
            p.preempt_at = None;
        }
        if p.active != from {
            p.preempt_at = None;
            p.failovers += 1;
            p.last_failover = Some(now);
            ch.failovers.push((i, from, p.active));
        }
        if !pri_ok && !bak_ok {
            // Nothing reaches what was learned behind the pair.
            ch.flush.extend([p.primary, p.backup]);
        }
    }

    /// Timers: preemption delays that ran out.
    pub fn poll(&mut self, now: Instant) -> Changes {
        let mut ch = Changes::default();
        for i in 0..self.pairs.len() {
            let p = &self.pairs[i];
            if p.preempt_at.is_some_and(|t| t <= now) && p.active != p.primary {
                let pri_ok = self.usable(p.primary);
                let p = &mut self.pairs[i];
                p.preempt_at = None;
                if pri_ok {
                    let from = p.active;
                    p.active = p.primary;
                    p.failovers += 1;
                    p.last_failover = Some(now);
                    ch.failovers.push((i, from, p.active));
                }
            }
        }
        ch
    }

    /// The earliest timer, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pairs.iter().filter_map(|p| p.preempt_at).min()
    }

    /// Write the state into a layer-2 snapshot: ports' `up` from their
    /// links, then pairs and channels, then flood sets.
    pub fn derive(&self, l2: &mut L2Tables, nports: usize) {
        for (p, e) in l2.ports.iter_mut().enumerate().take(nports) {
            e.up = self.usable(p as u16);
            e.stp = self.stp.get(p).copied().unwrap_or_default();
        }
        for p in &self.pairs {
            for m in [p.primary, p.backup] {
                if let Some(e) = l2.ports.get_mut(m as usize) {
                    e.blocked = m != p.active;
                    e.egress = if m == p.active {
                        Egress::Direct
                    } else {
                        Egress::Via(p.active)
                    };
                }
            }
        }
        let usable = self.usable_vec();
        let held = |k: usize| {
            self.mc
                .as_ref()
                .is_some_and(|m| m.hold_down && m.position(k).is_some())
        };
        l2.channels = self
            .channels
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let mut ch = Channel::EMPTY;
                ch.hash = c.hash;
                let d = c.distributing_members(&usable);
                if d.len() >= c.min_links && !held(k) {
                    for (k, m) in d.iter().take(MAX_CHANNEL_MEMBERS).enumerate() {
                        ch.members[k] = *m;
                    }
                    ch.active = d.len().min(MAX_CHANNEL_MEMBERS) as u8;
                }
                ch
            })
            .collect();
        for (k, c) in self.channels.iter().enumerate() {
            let up = l2.channels[k].active > 0;
            if let Some(e) = l2.ports.get_mut(c.id as usize) {
                e.up = up;
                e.egress = Egress::Channel(k as u8);
            }
            for (m, d) in c.members.iter().zip(&c.distributing) {
                if let Some(e) = l2.ports.get_mut(*m as usize) {
                    e.logical = c.id;
                    // A member collects while it distributes (coupled
                    // control, 802.1AX 6.4.15).
                    e.blocked = !(*d && usable[*m as usize]) || held(k);
                }
            }
        }
        l2.peer_served = tables::PortSet::EMPTY;
        if let Some(mc) = &self.mc {
            let link = match mc.peer_channel {
                // Aggregated: the channel's port, up while a member
                // distributes; its members are blocked and unblocked by
                // the channel code above, and a flood to the channel's
                // port leaves by one member (the flow's hash).
                Some(k) => {
                    (l2.channels.get(k).is_some_and(|c| c.active > 0)).then(|| self.channels[k].id)
                }
                None => mc.peer_link.iter().copied().find(|p| self.usable(*p)),
            };
            // Active/standby: one peer-link port carries data, the first
            // usable one (the pair's thread sends on the same). The
            // others stand by, blocked, so a flood never crosses twice or
            // loops back over a second port; they still take
            // peer-protocol frames. (Such ports are in no pair, channel
            // or spanning tree: nothing else sets `blocked` on them; the
            // snapshot derived from keeps the last value, so both ways
            // are written.)
            if mc.peer_channel.is_none() {
                for &p in &mc.peer_link {
                    if let Some(e) = l2.ports.get_mut(p as usize) {
                        e.blocked = Some(p) != link;
                    }
                }
            }
            for (j, &(k, _)) in mc.channels.iter().enumerate() {
                if !mc.peer_serves.get(j).copied().unwrap_or(false) {
                    continue;
                }
                let id = self.channels[k].id;
                l2.peer_served.insert(id);
                // No live member here: the channel's addresses are reached
                // across the peer link (unicast only: a flood crosses the
                // link once anyway, and the peer floods to its members).
                if l2.channels[k].active == 0 {
                    if let (Some(pl), Some(e)) = (link, l2.ports.get_mut(id as usize)) {
                        e.egress = Egress::Via(pl);
                    }
                }
            }
        }
        l2.recompute_flood();
    }
}

/// The running switch's link protection: the state, and how changes reach
/// the data path.
pub struct Ha {
    state: Mutex<HaState>,
    shared: Arc<Shared>,
    inbox: Arc<LearnerInbox>,
    /// Configured ports (ids below this have links).
    nports: std::sync::atomic::AtomicUsize,
    on_failover: Mutex<Option<FailoverHook>>,
    /// Per channel and member: LACP details for `show` (from the runner).
    pub lacp_info: Mutex<Vec<Vec<serde_json::Value>>>,
    /// The distributing members' LACP state, as a restart leaves it for
    /// the next image (from the runner; see [`Ha::save_lacp`]).
    /// (channel, member index, our identity, partner).
    lacp_saved: Mutex<Vec<(usize, usize, wire::lacp::LacpInfo, wire::lacp::LacpInfo)>>,
    /// Spanning tree for `show spanning-tree` (from its thread; null
    /// without spanning tree).
    pub stp_info: Mutex<serde_json::Value>,
    /// Port names by id, for log lines.
    names: Mutex<Vec<String>>,
}

/// Called after a pair switched (pair, from, to), outside the state lock.
pub type FailoverHook = Box<dyn Fn(usize, u16, u16) + Send>;

impl Ha {
    pub fn new(cfg: &Config, shared: Arc<Shared>, inbox: Arc<LearnerInbox>) -> Ha {
        Ha {
            state: Mutex::new(HaState::new(cfg)),
            shared,
            inbox,
            nports: std::sync::atomic::AtomicUsize::new(cfg.ports.len()),
            on_failover: Mutex::new(None),
            lacp_info: Mutex::new(Vec::new()),
            lacp_saved: Mutex::new(Vec::new()),
            stp_info: Mutex::new(serde_json::Value::Null),
            names: Mutex::new(cfg.ports.iter().map(|p| p.name.clone()).collect()),
        }
    }

    /// A restarted switch, before its ports attach: the members its
    /// predecessor left distributing (`saved`, [`load_lacp`]) carry
    /// traffic from the first snapshot, their links taken as up until the
    /// supervisor says otherwise, so the frames that waited in the handed-
    /// over rings during the restart are not dropped as arriving on (or
    /// hashed to) a member that is not in the group yet. The LACP thread
    /// then resumes those members with the saved partners
    /// ([`HaRunner::new`]); one that does not resume is taken out by it.
    pub fn resume_lacp(&self, saved: &[crate::lacp::SavedPort]) {
        if saved.is_empty() {
            return;
        }
        let now = Instant::now();
        let ids: Vec<(&str, u16)> = {
            let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
            saved
                .iter()
                .filter_map(|s| {
                    let id = names.iter().position(|n| *n == s.member)?;
                    Some((s.channel.as_str(), id as u16))
                })
                .collect()
        };
        self.update(|st| {
            for (channel, m) in ids {
                let Some(c) = st.channels.iter().position(|c| c.name == channel) else {
                    continue;
                };
                if let Some(k) = st.channels[c].members.iter().position(|&x| x == m) {
                    // Members coming up: nothing to flush.
                    let _ = st.set_link(m, true, now);
                    let _ = st.set_distributing(c, k, true);
                }
            }
            Changes::default()
        });
    }

    /// A virtual-switch node's warm start (the new image of a planned
    /// restart of a paired node, docs/virtual-switch.md): its multichassis
    /// members are not held down in the first snapshot, so the LACP
    /// members resumed with [`Ha::resume_lacp`] stay in sync with the
    /// partner from the start. The pair's thread decides from then on.
    pub fn warm_pair_start(&self) {
        self.update(|st| {
            if let Some(mc) = st.mc.as_mut() {
                mc.hold_down = false;
            }
            Changes::default()
        });
    }

    /// Write the distributing members' LACP state for the next image of
    /// a `lanyard restart` (one line each, [`SavedPort::to_line`]);
    /// returns how many.
    ///
    /// [`SavedPort::to_line`]: crate::lacp::SavedPort::to_line
    pub fn save_lacp(&self, path: &std::path::Path) -> std::io::Result<usize> {
        let saved = self.lacp_saved.lock().unwrap_or_else(|e| e.into_inner());
        let st = self.snapshot();
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        let text: String = saved
            .iter()
            .filter_map(|&(c, k, actor, partner)| {
                let ch = st.channels.get(c)?;
                let member = names.get(*ch.members.get(k)? as usize)?;
                let p = crate::lacp::SavedPort {
                    channel: ch.name.clone(),
                    member: member.clone(),
                    actor,
                    partner,
                };
                Some(p.to_line() + "\n")
            })
            .collect();
        std::fs::write(path, text)?;
        Ok(saved.len())
    }

    /// The name of port `id` (`port N` if unknown).
    fn port_name(&self, id: u16) -> String {
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| format!("port {id}"))
    }

    pub fn set_failover_hook(&self, hook: FailoverHook) {
        *self.on_failover.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Run `f` on the state, publish the snapshot it implies, then act on
    /// its changes (flushes, failover hooks).
    pub fn update(&self, f: impl FnOnce(&mut HaState) -> Changes) -> Changes {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ch = f(&mut st);
        let nports = self.nports.load(std::sync::atomic::Ordering::Relaxed);
        self.shared.tables.rcu(|cur| {
            let mut l2 = cur.l2.clone();
            st.derive(&mut l2, nports);
            Tables {
                l2,
                mac: cur.mac.clone(),
                learn_gate: cur.learn_gate.clone(),
            }
        });
        let members: Vec<(u16, u16)> = st.pairs.iter().map(|p| (p.primary, p.backup)).collect();
        drop(st);
        for &port in &ch.flush {
            self.inbox
                .send(&self.shared, LearnerRequest::FlushPort { port });
        }
        for &(pair, from, to) in &ch.failovers {
            let (primary, backup) = members.get(pair).copied().unwrap_or((from, to));
            tracing::info!(
                "backup pair {} / {}: {} now forwards, {} stands by",
                self.port_name(primary),
                self.port_name(backup),
                self.port_name(to),
                self.port_name(from)
            );
            if let Some(h) = self
                .on_failover
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
            {
                h(pair, from, to);
            }
        }
        ch
    }

    /// Publish new layer-2 tables (a configuration change) with the
    /// current link, pair and channel state written in; the MAC table
    /// stays.
    /// Port names by id after a configuration change (ports keep their ids).
    pub fn set_port_names(&self, names: Vec<String>) {
        *self.names.lock().unwrap_or_else(|e| e.into_inner()) = names;
    }

    pub fn replace_l2(&self, mut l2: L2Tables, nports: usize) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.nports
            .store(nports, std::sync::atomic::Ordering::Relaxed);
        st.derive(&mut l2, nports);
        self.shared.tables.rcu(|cur| Tables {
            l2: l2.clone(),
            mac: cur.mac.clone(),
            learn_gate: cur.learn_gate.clone(),
        });
    }

    /// A port's link changed (from the supervisor).
    pub fn set_link(&self, port: u16, up: bool) {
        let now = Instant::now();
        self.update(|st| st.set_link(port, up, now));
    }

    /// For a port-channel member whose link just went: a member still
    /// distributing, to take the frames stranded in its transmit ring.
    pub fn channel_takeover(&self, port: u16) -> Option<u16> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (c, _) = st.channel_of(port)?;
        let ch = &st.channels[c];
        ch.members
            .iter()
            .zip(&ch.distributing)
            .find(|(m, d)| **m != port && **d && st.usable(**m))
            .map(|(m, _)| *m)
    }

    /// A copy of the state (for `show`).
    pub fn snapshot(&self) -> HaState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl HaState {
    fn port_state(&self, port: u16, active: bool) -> &'static str {
        match (
            self.link_up.get(port as usize).copied().unwrap_or(false),
            active,
        ) {
            (false, _) => "down",
            _ if self
                .keepalive_down
                .get(port as usize)
                .copied()
                .unwrap_or(false) =>
            {
                "keepalive-lost"
            }
            (true, true) => "forwarding",
            (true, false) => "standby",
        }
    }

    /// `show backup-pairs` (docs/api.md).
    pub fn pairs_json(&self, names: &[String], now: Instant) -> serde_json::Value {
        let name = |p: u16| names.get(p as usize).cloned().unwrap_or_default();
        serde_json::Value::Array(
            self.pairs
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "primary": name(p.primary),
                        "primary_state": self.port_state(p.primary, p.active == p.primary),
                        "backup": name(p.backup),
                        "backup_state": self.port_state(p.backup, p.active == p.backup),
                        "active": name(p.active),
                        "preempt": p.preempt,
                        "preempt_delay_ms": p.preempt_delay.as_millis() as u64,
                        "keepalive_ms": p.keepalive.map(|k| k.as_millis() as u64),
                        "mac_move_update": p.mac_move_update,
                        "failovers": p.failovers,
                        "last_failover_ms_ago": p.last_failover.map(|t| now.duration_since(t).as_millis() as u64),
                    })
                })
                .collect(),
        )
    }

    /// `show port-channel` without LACP details (docs/api.md).
    pub fn channels_json(&self, names: &[String]) -> Vec<serde_json::Value> {
        let usable = self.usable_vec();
        self.channels
            .iter()
            .map(|c| {
                let members: Vec<serde_json::Value> = c
                    .members
                    .iter()
                    .zip(&c.distributing)
                    .map(|(m, d)| {
                        serde_json::json!({
                            "port": names.get(*m as usize).cloned().unwrap_or_default(),
                            "link": if self.link_up[*m as usize] { "up" } else { "down" },
                            "distributing": *d && usable[*m as usize],
                        })
                    })
                    .collect();
                serde_json::json!({
                    "name": c.name,
                    "up": c.is_up(&usable),
                    "lacp": format!("{:?}", c.lacp).to_lowercase(),
                    "rate": format!("{:?}", c.rate).to_lowercase(),
                    "load_balance": match c.hash {
                        LoadBalance::L2 => "l2",
                        LoadBalance::L3 => "l3",
                        LoadBalance::L3L4 => "l3l4",
                    },
                    "min_links": c.min_links,
                    "members": members,
                })
            })
            .collect()
    }
}

/// Frames of a MAC-move update: one per address learned behind other
/// ports, in every VLAN `port` carries, sent out of `port` with the
/// address as source so upstream switches learn it there.
pub fn mac_move_frames(
    t: &Tables,
    port: u16,
    pair: (u16, u16),
    mut out: impl FnMut(&[u8]),
) -> usize {
    let Some(pe) = t.l2.ports.get(port as usize) else {
        return 0;
    };
    let mut n = 0;
    let mut f = [0u8; 64];
    t.mac.for_each(|key, e| {
        let vlan = key.vlan();
        if e.port == pair.0 || e.port == pair.1 || !pe.vlans.contains(vlan) {
            return;
        }
        // Only addresses of real ports (not a VLAN interface's own MAC).
        if t.l2.ports.get(e.port as usize).is_none_or(|p| !p.learning) && e.is_static {
            return;
        }
        f.fill(0);
        f[0..6].copy_from_slice(&pipeline::l2::MAC_MOVE_MAC);
        f[6..12].copy_from_slice(&key.mac());
        let mut o = 12;
        if let tables::Encap::Tagged { tpid, vid } = pe.encap(vlan) {
            f[12..14].copy_from_slice(&tpid.to_be_bytes());
            f[14..16].copy_from_slice(&vid.to_be_bytes());
            o = 16;
        }
        f[o..o + 2].copy_from_slice(&pipeline::l2::ETHERTYPE_LANYARD.to_be_bytes());
        f[o + 2..o + 10].copy_from_slice(b"LY-MMU\0\0");
        out(&f[..60]);
        n += 1;
    });
    n
}

/// Where a restarting switch leaves its LACP state: next to the API
/// socket, as the learned addresses.
pub fn lacp_state_path(socket: &std::path::Path) -> std::path::PathBuf {
    socket.with_extension("lacp")
}

/// Read what [`Ha::save_lacp`] wrote and remove the file; lines that do
/// not parse are skipped (those members join afresh).
pub fn load_lacp(path: &std::path::Path) -> Vec<crate::lacp::SavedPort> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let _ = std::fs::remove_file(path);
    text.lines()
        .filter_map(crate::lacp::SavedPort::parse_line)
        .collect()
}

/// How long after start a restarted switch still resumes a member whose
/// link it has not yet seen up (the supervisor reports links within
/// milliseconds; LACP's short timeout is 3 s).
const RESUME_WINDOW: Duration = Duration::from_secs(1);

/// The LACP system id: a locally administered MAC derived from the
/// switch name (stable across restarts, so partners keep the aggregate).
pub fn system_mac(name: &str) -> [u8; 6] {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    let b = h.to_be_bytes();
    [0x02, 0x4c, b[0], b[1], b[2], b[3]]
}

/// The thread behind link protection: keepalives, preemption timers,
/// LACP, MAC-move updates. Link events themselves come from the
/// supervisor straight into [`Ha::set_link`].
pub struct HaRunner {
    ha: Arc<Ha>,
    shared: Arc<Shared>,
    counters: Vec<Arc<pipeline::WorkerCounters>>,
    names: Vec<String>,
    sockets: Vec<Option<io::InjectSocket>>,
    /// Keepalives: per pair member, the last rx count and when it moved.
    rx_seen: Vec<(u64, Instant)>,
    next_keepalive: Instant,
    /// LACP, per channel (`None` for static channels).
    lacp: Vec<Option<crate::lacp::Aggregator>>,
    /// Per channel and member: the link state LACP was last told.
    lacp_link: Vec<Vec<bool>>,
    /// Per channel and member: the partner a predecessor image recorded,
    /// resumed when the link is first seen up (until `resume_until`).
    resume: Vec<Vec<Option<wire::lacp::LacpInfo>>>,
    resume_until: Instant,
    /// Channel and member names, for the saved state and log lines.
    channel_names: Vec<String>,
    member_names: Vec<Vec<String>>,
}

impl HaRunner {
    /// `resume`: what the image before a `lanyard restart` left
    /// ([`load_lacp`]; empty on a normal start).
    pub fn new(
        cfg: &Config,
        ha: Arc<Ha>,
        shared: Arc<Shared>,
        counters: Vec<Arc<pipeline::WorkerCounters>>,
        resume: &[crate::lacp::SavedPort],
    ) -> HaRunner {
        let names: Vec<String> = cfg.ports.iter().map(|p| p.name.clone()).collect();
        let now = Instant::now();
        let system = system_mac(&cfg.switch.name);
        let lacp: Vec<Option<crate::lacp::Aggregator>> = cfg
            .port_channels
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let mode = match c.lacp {
                    LacpMode::Static => return None,
                    LacpMode::Active => crate::lacp::LacpMode::Active,
                    LacpMode::Passive => crate::lacp::LacpMode::Passive,
                };
                let rate = match c.lacp_rate {
                    LacpRate::Fast => crate::lacp::LacpRate::Fast,
                    LacpRate::Slow => crate::lacp::LacpRate::Slow,
                };
                let ports = c
                    .members
                    .iter()
                    .map(|m| {
                        let index = cfg.port_index(m).unwrap_or(0);
                        // A multichassis channel speaks as the pair.
                        let (system_priority, system, key, port) = crate::vswitch::mc_actor(
                            cfg, &c.name, index,
                        )
                        .unwrap_or((c.system_priority, system, k as u16 + 1, index as u16 + 1));
                        crate::lacp::LacpPort::new(crate::lacp::ActorConfig {
                            system_priority,
                            system,
                            key,
                            port_priority: 32768,
                            port,
                            mode,
                            rate,
                        })
                    })
                    .collect();
                Some(crate::lacp::Aggregator::new(ports))
            })
            .collect();
        // A member resumes only under the same channel and member names
        // and with the same identity as before (a changed configuration
        // joins afresh).
        let resume = cfg
            .port_channels
            .iter()
            .zip(&lacp)
            .map(|(c, agg)| {
                c.members
                    .iter()
                    .enumerate()
                    .map(|(k, m)| {
                        let actor = agg.as_ref()?.port(k)?.actor();
                        resume
                            .iter()
                            .find(|s| {
                                s.channel == c.name
                                    && &s.member == m
                                    && crate::lacp::same_identity(&s.actor, &actor)
                            })
                            .map(|s| s.partner)
                    })
                    .collect()
            })
            .collect();
        HaRunner {
            resume,
            resume_until: now + RESUME_WINDOW,
            channel_names: cfg.port_channels.iter().map(|c| c.name.clone()).collect(),
            member_names: cfg
                .port_channels
                .iter()
                .map(|c| c.members.clone())
                .collect(),
            ha,
            shared,
            counters,
            sockets: names.iter().map(|_| None).collect(),
            rx_seen: vec![(0, now); names.len()],
            names,
            next_keepalive: now,
            lacp_link: cfg
                .port_channels
                .iter()
                .map(|c| vec![false; c.members.len()])
                .collect(),
            lacp,
        }
    }

    /// LACP: link changes, received PDUs, timers; members whose
    /// distributing state changed go to the snapshot.
    fn lacp(&mut self, now: Instant) {
        if self.lacp.iter().all(Option::is_none) {
            while let Some(b) = self.shared.l2_control.pop() {
                self.shared.l2_control.recycle(b);
            }
            return;
        }
        let st = self.ha.snapshot();
        for (c, agg) in self.lacp.iter_mut().enumerate() {
            let Some(agg) = agg else { continue };
            if let Some(mc) = &st.mc {
                agg.hold(mc.hold_down && mc.position(c).is_some(), now);
            }
            for (k, m) in st.channels[c].members.iter().enumerate() {
                let up = st.link_up[*m as usize];
                if up != self.lacp_link[c][k] {
                    self.lacp_link[c][k] = up;
                    let resumed = self.resume[c][k].take().filter(|_| now < self.resume_until);
                    if let (true, Some(partner)) = (up, resumed) {
                        agg.resume(k, partner, now);
                        tracing::info!(
                            "port-channel {}: member {} LACP resumed from before the restart",
                            self.channel_names[c],
                            self.member_names[c][k]
                        );
                    } else if up {
                        agg.link_up(k, now);
                    } else {
                        agg.link_down(k, now);
                    }
                }
            }
        }
        while let Some(b) = self.shared.l2_control.pop() {
            let port = b.port;
            let found = st
                .channels
                .iter()
                .enumerate()
                .find_map(|(c, ch)| ch.members.iter().position(|m| *m == port).map(|k| (c, k)));
            if let Some((c, k)) = found {
                if let Some(agg) = self.lacp[c].as_mut() {
                    let _ = agg.receive_frame(k, b.frame(), now);
                }
            }
            self.shared.l2_control.recycle(b);
        }
        let mut out = Vec::new();
        let mut changes = Vec::new();
        for (c, agg) in self.lacp.iter_mut().enumerate() {
            let Some(agg) = agg else { continue };
            for (k, pdu) in agg.poll(now) {
                out.push((st.channels[c].members[k], pdu));
            }
            let dist = agg.distributing_ports();
            for k in 0..st.channels[c].members.len() {
                let on = dist.contains(&k);
                if on != st.channels[c].distributing[k] {
                    changes.push((c, k, on));
                }
            }
        }
        for (m, pdu) in out {
            let src = io::link::mac(&self.names[m as usize]).unwrap_or([2, 0, 0, 0, 0, 1]);
            let mut f = [0u8; 128];
            if let Ok(n) = wire::lacp::build_frame(src, &pdu, &mut f) {
                self.send(m, &f[..n]);
            }
        }
        for (c, k, on) in changes {
            tracing::info!(
                "port-channel {}: member {} {}",
                st.channels[c].name,
                self.names[st.channels[c].members[k] as usize],
                if on {
                    "distributing"
                } else {
                    "stopped distributing"
                }
            );
            self.ha.update(|s| s.set_distributing(c, k, on));
        }
        let info: Vec<Vec<serde_json::Value>> = self
            .lacp
            .iter()
            .map(|a| match a {
                None => Vec::new(),
                Some(a) => a
                    .ports()
                    .iter()
                    .map(|p| {
                        let c = p.counters();
                        // State flags as lists of names (802.1AX 6.4.2.3).
                        let flags = |st: wire::lacp::LacpState| -> Vec<String> {
                            st.to_string()
                                .split(' ')
                                .filter(|f| *f != "none")
                                .map(String::from)
                                .collect()
                        };
                        serde_json::json!({
                            "actor_state": flags(p.actor_state()),
                            "partner": p.partner().map(|x| serde_json::json!({
                                "system": config::show_mac(x.system),
                                "system_priority": x.system_priority,
                                "key": x.key,
                                "port": x.port,
                                "port_priority": x.port_priority,
                                "state": flags(x.state),
                            })),
                            "rx_state": p.rx_state().name(),
                            "mux_state": p.mux_state().name(),
                            "pdus_rx": c.pdus_rx,
                            "pdus_tx": c.pdus_tx,
                            "bad_rx": c.bad_rx,
                            "timeouts": c.timeouts,
                        })
                    })
                    .collect(),
            })
            .collect();
        *self.ha.lacp_info.lock().unwrap_or_else(|e| e.into_inner()) = info;
        // Every turn (2 ms), so no strings here: the names are put in when
        // a restart writes the state.
        let mut saved = self.ha.lacp_saved.lock().unwrap_or_else(|e| e.into_inner());
        saved.clear();
        for (c, agg) in self.lacp.iter().enumerate() {
            let Some(agg) = agg else { continue };
            for (k, p) in agg.ports().iter().enumerate() {
                if let Some(partner) = p.partner().filter(|_| p.distributing()) {
                    saved.push((c, k, p.actor(), partner));
                }
            }
        }
    }

    /// Whether the switch needs this thread at all.
    pub fn needed(cfg: &Config) -> bool {
        !cfg.backup_pairs.is_empty() || !cfg.port_channels.is_empty()
    }

    fn send(&mut self, port: u16, frame: &[u8]) {
        let i = port as usize;
        if i >= self.sockets.len() {
            return;
        }
        if self.sockets[i].is_none() {
            self.sockets[i] = io::InjectSocket::open(&self.names[i]).ok();
        }
        if let Some(s) = &self.sockets[i] {
            if s.send(frame).is_err() {
                // The interface may have been re-created: reopen next time.
                self.sockets[i] = None;
            }
        }
    }

    fn rx_frames(&self, port: u16) -> u64 {
        self.counters
            .iter()
            .map(|c| c.ports[port as usize].rx_frames.get())
            .sum()
    }

    /// Send keepalives and judge their absence.
    fn keepalives(&mut self, now: Instant) {
        let st = self.ha.snapshot();
        let mut verdicts = Vec::new();
        let mut period = Duration::from_secs(1);
        for p in st.pairs.iter() {
            let Some(ka) = p.keepalive else { continue };
            period = period.min(ka / 3);
            for m in [p.primary, p.backup] {
                let rx = self.rx_frames(m);
                let seen = &mut self.rx_seen[m as usize];
                if rx != seen.0 || !st.link_up[m as usize] {
                    *seen = (rx, now);
                }
                let lost = st.link_up[m as usize] && now.duration_since(seen.1) >= ka;
                if lost != st.keepalive_down[m as usize] {
                    verdicts.push((m, lost));
                }
            }
        }
        for (m, lost) in verdicts {
            tracing::info!(
                "port {}: keepalive {} (rx {})",
                self.names[m as usize],
                if lost { "lost" } else { "back" },
                self.rx_frames(m)
            );
            self.ha.update(|st| st.set_keepalive_down(m, lost, now));
        }
        if now >= self.next_keepalive {
            self.next_keepalive = now + period;
            for p in st.pairs.iter().filter(|p| p.keepalive.is_some()) {
                for m in [p.primary, p.backup] {
                    let mut f = [0u8; 60];
                    f[0..6].copy_from_slice(&pipeline::l2::KEEPALIVE_MAC);
                    f[6..12].copy_from_slice(&[0x02, 0x4c, 0x59, 0x4b, (m >> 8) as u8, m as u8]);
                    f[12..14].copy_from_slice(&pipeline::l2::ETHERTYPE_LANYARD.to_be_bytes());
                    f[14..20].copy_from_slice(b"LY-KA\0");
                    self.send(m, &f);
                }
            }
        }
    }

    pub fn run(mut self) {
        while !self.shared.stop.load(std::sync::atomic::Ordering::Relaxed) {
            let now = Instant::now();
            self.keepalives(now);
            if self.ha.snapshot().next_deadline().is_some_and(|t| t <= now) {
                self.ha.update(|st| st.poll(now));
            }
            self.lacp(now);
            // Sleep until a control frame arrives, or 2 ms (timers).
            let mut pfd = libc::pollfd {
                fd: self.shared.l2_control.event_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 2) };
            self.shared.l2_control.drain_event();
        }
    }
}

/// Send the MAC-move update of a failover to `to` (a thread of its own:
/// 1,000,000 addresses take a while, and nothing waits for them).
pub fn spawn_mac_move_update(shared: &Arc<Shared>, name: String, to: u16, pair: (u16, u16)) {
    let shared = shared.clone();
    let _ = std::thread::Builder::new()
        .name("mac-move".into())
        .spawn(move || {
            // Spawned from the (real-time) supervisor: back to normal
            // scheduling, this is bulk work.
            let prio = libc::sched_param { sched_priority: 0 };
            // SAFETY: plain syscall on the calling thread.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &prio) };
            let Ok(sock) = io::InjectSocket::open(&name) else {
                return;
            };
            let t0 = Instant::now();
            let t = shared.tables.load_full();
            let mut errors = 0u64;
            let n = mac_move_frames(&t, to, pair, |f| {
                if sock.send(f).is_err() {
                    errors += 1;
                }
            });
            tracing::info!(
                "port {name}: mac-move update, {n} addresses in {} ms ({errors} send errors)",
                t0.elapsed().as_millis()
            );
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use config::build;
    use config::parse;

    fn cfg(extra: &str) -> Config {
        parse(&format!(
            "vlans: [{{id: 10}}]\nports:\n  - {{name: a, vlan: 10}}\n  - {{name: p, vlan: 10}}\n  - {{name: b, vlan: 10}}\n  - {{name: m1, vlan: 10}}\n  - {{name: m2, vlan: 10}}\n{extra}"
            ),
            "test.yaml",
        )
        .unwrap()
    }

    fn tables(cfg: &Config, st: &HaState) -> L2Tables {
        let mut l2 = build::l2_tables(cfg);
        st.derive(&mut l2, cfg.ports.len());
        l2
    }

    #[test]
    fn backup_pair_fails_over_and_back() {
        let c = cfg("backup-pairs: [{primary: p, backup: b}]\n");
        let mut st = HaState::new(&c);
        let t0 = Instant::now();
        for p in 0..3 {
            st.set_link(p, true, t0);
        }
        let l2 = tables(&c, &st);
        assert!(l2.ports[2].blocked, "backup is standby");
        assert_eq!(l2.redirect(2), 1);
        assert_eq!(l2.vlans[10].flood.iter().collect::<Vec<_>>(), vec![0, 1]);

        let ch = st.set_link(1, false, t0);
        assert_eq!(ch.failovers, vec![(0, 1, 2)]);
        assert!(ch.flush.is_empty(), "addresses are redirected, not flushed");
        let l2 = tables(&c, &st);
        assert_eq!(l2.redirect(1), 2, "primary's addresses leave by the backup");
        assert!(!l2.ports[2].blocked);
        assert_eq!(l2.vlans[10].flood.iter().collect::<Vec<_>>(), vec![0, 2]);

        // No preemption: the primary returns as standby.
        let ch = st.set_link(1, true, t0);
        assert!(ch.failovers.is_empty());
        let l2 = tables(&c, &st);
        assert!(l2.ports[1].blocked);
        assert_eq!(l2.redirect(1), 2);

        // The backup fails: back to the primary.
        let ch = st.set_link(2, false, t0);
        assert_eq!(ch.failovers, vec![(0, 2, 1)]);
        // Both down: flushed.
        let ch = st.set_link(1, false, t0);
        assert_eq!(ch.flush, vec![1, 2]);
    }

    #[test]
    fn preemption_waits_its_delay() {
        let c =
            cfg("backup-pairs: [{primary: p, backup: b, preempt: true, preempt-delay-ms: 500}]\n");
        let mut st = HaState::new(&c);
        let t0 = Instant::now();
        for p in 0..3 {
            st.set_link(p, true, t0);
        }
        st.set_link(1, false, t0);
        assert_eq!(st.pairs[0].active, 2);
        assert!(st.set_link(1, true, t0).failovers.is_empty());
        assert!(st
            .poll(t0 + Duration::from_millis(100))
            .failovers
            .is_empty());
        assert_eq!(st.next_deadline(), Some(t0 + Duration::from_millis(500)));
        assert_eq!(
            st.poll(t0 + Duration::from_millis(600)).failovers,
            vec![(0, 2, 1)]
        );
        assert_eq!(st.pairs[0].failovers, 2);
    }

    #[test]
    fn keepalive_loss_fails_over() {
        let c = cfg("backup-pairs: [{primary: p, backup: b, keepalive-ms: 30}]\n");
        let mut st = HaState::new(&c);
        let t0 = Instant::now();
        for p in 0..3 {
            st.set_link(p, true, t0);
        }
        assert_eq!(
            st.set_keepalive_down(1, true, t0).failovers,
            vec![(0, 1, 2)]
        );
        let l2 = tables(&c, &st);
        assert!(!l2.ports[1].up);
    }

    #[test]
    fn static_channel_members_carry_and_fail() {
        let c = cfg("port-channels: [{name: po1, members: [m1, m2], lacp: static}]\n");
        let mut st = HaState::new(&c);
        let t0 = Instant::now();
        for p in 0..5 {
            st.set_link(p, true, t0);
        }
        let l2 = tables(&c, &st);
        let po = c.channel_port_id(0);
        assert_eq!(l2.logical(3), po);
        assert_eq!(l2.logical(4), po);
        assert_eq!(l2.ports[po as usize].egress, Egress::Channel(0));
        assert_eq!(l2.channels[0].active, 2);
        // Members are not flooded to; the channel is.
        assert_eq!(
            l2.vlans[10].flood.iter().collect::<Vec<_>>(),
            vec![0, 1, 2, po]
        );
        let ch = st.set_link(3, false, t0);
        assert!(ch.flush.is_empty());
        let l2 = tables(&c, &st);
        assert_eq!(l2.channels[0].active, 1);
        assert_eq!(l2.channels[0].pick(7), Some(4));
        assert!(l2.ports[3].blocked);
        let ch = st.set_link(4, false, t0);
        assert_eq!(ch.flush, vec![po], "channel down: its addresses go");
        let l2 = tables(&c, &st);
        assert!(!l2.ports[po as usize].up);
        assert!(!l2.vlans[10].flood.contains(po));
    }

    #[test]
    fn lacp_channel_waits_for_distributing() {
        let c = cfg("port-channels: [{name: po1, members: [m1, m2], min-links: 2}]\n");
        let mut st = HaState::new(&c);
        let t0 = Instant::now();
        for p in 0..5 {
            st.set_link(p, true, t0);
        }
        let po = c.channel_port_id(0);
        assert!(!tables(&c, &st).ports[po as usize].up, "no LACP yet");
        st.set_distributing(0, 0, true);
        assert!(!tables(&c, &st).ports[po as usize].up, "min-links 2");
        st.set_distributing(0, 1, true);
        let l2 = tables(&c, &st);
        assert!(l2.ports[po as usize].up);
        assert!(!l2.ports[3].blocked && !l2.ports[4].blocked);
        // A member's link goes: it stops at once, and the channel is
        // below min-links.
        let ch = st.set_link(4, false, t0);
        assert_eq!(ch.flush, vec![po]);
    }

    /// A virtual-switch pair: held members are blocked and the channel is
    /// down; a channel the peer serves is in `peer_served`, and with no
    /// live member here its addresses are reached over the peer link.
    #[test]
    fn multichassis_hold_and_peer_link_egress() {
        let cfg = config::parse(
            "vlans: [{id: 10}]
ports:
  - {name: pl, mode: trunk}
  - {name: m1, vlan: 10}
port-channels: [{name: po1, members: [m1], lacp: static}]
virtual-switch:
  domain-id: 7
  system-mac: 02:00:00:00:07:00
  peer-link: [pl]
  keepalive: {source: 192.0.2.1, peer: 192.0.2.2}
  channels: [{port-channel: po1, id: 1}]
",
            "t.yaml",
        )
        .unwrap();
        let now = Instant::now();
        let mut st = HaState::new(&cfg);
        st.set_link(0, true, now);
        st.set_link(1, true, now);
        let po = cfg.channel_port_id(0);
        // Held at start.
        let t = tables(&cfg, &st);
        assert!(t.ports[1].blocked);
        assert!(!t.ports[po as usize].up);
        assert!(t.ports[0].peer_link && !t.ports[0].learning);
        // Released: the member carries the channel.
        st.mc.as_mut().unwrap().hold_down = false;
        let t = tables(&cfg, &st);
        assert!(!t.ports[1].blocked && t.ports[po as usize].up);
        assert!(t.peer_served.is_empty());
        // The peer serves it too: frames from the link never go there.
        st.mc.as_mut().unwrap().peer_serves = vec![true];
        let t = tables(&cfg, &st);
        assert!(t.peer_served.contains(po));
        assert_eq!(t.ports[po as usize].egress, Egress::Channel(0));
        // Our member down: the peer link reaches the channel's addresses,
        // and the channel is not flooded to (the link's copy is enough).
        st.set_link(1, false, now);
        let t = tables(&cfg, &st);
        assert_eq!(t.ports[po as usize].egress, Egress::Via(0));
        assert_eq!(t.redirect(po), 0);
        assert!(!t.vlans[10].flood.contains(po));
    }

    /// A peer link that is a port channel: data hashed over its members,
    /// floods to the bundle once, a member cut moves its flows and
    /// flushes nothing.
    #[test]
    fn aggregated_peer_link_hashes_over_its_members() {
        let cfg = config::parse(
            "vlans: [{id: 10}]
ports:
  - {name: pl1, mode: trunk}
  - {name: pl2, mode: trunk}
  - {name: m1, vlan: 10}
  - {name: h, vlan: 10}
port-channels:
  - {name: po1, members: [m1], lacp: static}
  - {name: pl, members: [pl1, pl2], lacp: static}
virtual-switch:
  domain-id: 7
  system-mac: 02:00:00:00:07:00
  peer-link: [pl]
  keepalive: {source: 192.0.2.1, peer: 192.0.2.2}
  channels: [{port-channel: po1, id: 1}]
",
            "t.yaml",
        )
        .unwrap();
        let now = Instant::now();
        let mut st = HaState::new(&cfg);
        for p in 0..4 {
            st.set_link(p, true, now);
        }
        let (po, pl) = (cfg.channel_port_id(0), cfg.channel_port_id(1));
        st.mc.as_mut().unwrap().hold_down = false;
        let t = tables(&cfg, &st);
        // Both members carry data, entering as the bundle (no learning);
        // the VLAN floods to the bundle once, never to a member.
        assert_eq!(t.channels[1].active, 2);
        for m in [0, 1] {
            assert!(!t.ports[m].blocked && t.ports[m].peer_link && !t.ports[m].learning);
            assert_eq!(t.logical(m as u16), pl);
            assert!(!t.vlans[10].flood.contains(m as u16));
        }
        assert!(t.vlans[10].flood.contains(pl) && t.ports[pl as usize].peer_link);
        assert_eq!(t.ports[pl as usize].egress, Egress::Channel(1));
        assert_eq!(
            (0..64)
                .map(|h| t.channels[1].pick(h).unwrap())
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            2
        );
        // A channel the peer serves, our member down: across the bundle.
        st.mc.as_mut().unwrap().peer_serves = vec![true];
        st.set_link(2, false, now);
        let t = tables(&cfg, &st);
        assert_eq!(t.redirect(po), pl);
        // A member cut: its flows go to the other at once, nothing is
        // flushed (the bundle stays up), the pair still reaches the peer.
        let ch = st.set_link(0, false, now);
        assert!(ch.flush.is_empty(), "{ch:?}");
        let t = tables(&cfg, &st);
        assert_eq!(t.channels[1].active, 1);
        assert!((0..64).all(|h| t.channels[1].pick(h) == Some(1)));
        assert!(t.vlans[10].flood.contains(pl));
        // Both cut: the bundle is down and its addresses go.
        let ch = st.set_link(1, false, now);
        assert_eq!(ch.flush, vec![pl]);
        assert!(!tables(&cfg, &st).vlans[10].flood.contains(pl));
    }

    /// Several peer-link ports: one carries data, the others stand by
    /// (never both in a flood set: no loop between the nodes); a cut of
    /// the active one moves data to the next.
    #[test]
    fn one_peer_link_port_carries_data() {
        let cfg = config::parse(
            "vlans: [{id: 10}]
ports:
  - {name: pl1, mode: trunk}
  - {name: pl2, mode: trunk}
  - {name: h, vlan: 10}
virtual-switch:
  domain-id: 7
  system-mac: 02:00:00:00:07:00
  peer-link: [pl1, pl2]
  keepalive: {source: 192.0.2.1, peer: 192.0.2.2}
",
            "t.yaml",
        )
        .unwrap();
        let now = Instant::now();
        let mut st = HaState::new(&cfg);
        for p in 0..3 {
            st.set_link(p, true, now);
        }
        let t = tables(&cfg, &st);
        assert!(t.vlans[10].flood.contains(0) && !t.vlans[10].flood.contains(1));
        assert!(t.ports[1].blocked && t.ports[1].peer_link);
        st.set_link(0, false, now);
        let t = tables(&cfg, &st);
        assert!(!t.vlans[10].flood.contains(0) && t.vlans[10].flood.contains(1));
        assert!(!t.ports[1].blocked);
        // Derived from the previous snapshot (as `Ha::update` does): the
        // port that comes back is released again.
        let mut l2 = t.clone();
        st.set_link(0, true, now);
        st.derive(&mut l2, 3);
        assert!(!l2.ports[0].blocked && l2.ports[1].blocked);
        assert!(l2.vlans[10].flood.contains(0) && !l2.vlans[10].flood.contains(1));
    }
}
