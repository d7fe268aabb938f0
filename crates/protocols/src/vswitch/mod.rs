//! The virtual-switch pair (docs/virtual-switch.md): [`pair`] decides
//! role and health from peer-link hellos and keepalives, [`macs`] holds
//! the peer's learned addresses, [`link`] runs the peer link, and
//! [`PairRunner`] runs the keepalive over UDP on its separate path, the
//! peer link, enforces the pair's decision on the channels and publishes
//! the state that `show virtual-switch` prints.

pub mod groups;
pub mod link;
pub mod macs;
pub mod neigh;
pub mod pair;
pub mod peer_set;

use config::vswitch::VirtualSwitch;
use link::{LinkIo, PeerLink};
use pair::{node_id, PairConfig, PairState};
use serde_json::{json, Value};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wire::vswitch::{decode, encode, Message, PeerError, HEADER_LEN, MAX_PAYLOAD};

/// LACP actor of a member of multichassis channel `channel` on this node:
/// (system priority, system, key, port number). Both nodes present the
/// pair's system MAC and a key from the channel id, so the partner sees one
/// system; port numbers of the node with the higher keepalive address have
/// the top bit set, so the two nodes' members never share a number.
/// `None` for a channel that is not multichassis.
pub fn mc_actor(
    cfg: &config::Config,
    channel: &str,
    port_index: usize,
) -> Option<(u16, [u8; 6], u16, u16)> {
    let vs = cfg.virtual_switch.as_ref()?;
    let id = vs.channel_id(channel)?;
    let high = vs.keepalive.source > vs.keepalive.peer;
    let port = (port_index as u16 + 1) & 0x7fff | if high { 0x8000 } else { 0 };
    Some((
        vs.system_priority,
        vs.system_mac.octets(),
        0x8000 | id as u16,
        port,
    ))
}

/// Keepalive counters.
#[derive(Debug, Default, Clone)]
pub struct KeepaliveCounters {
    pub tx: u64,
    pub tx_errors: u64,
    pub rx: u64,
    /// From an address other than the configured peer.
    pub rx_wrong_source: u64,
    /// Refused by the decoder, by reason.
    pub rx_bad: Vec<(&'static str, u64)>,
    /// Peer-link hellos sent as keepalives and the reverse.
    pub rx_unexpected: u64,
}

impl KeepaliveCounters {
    fn bad(&mut self, e: PeerError) {
        let k = e.as_str();
        match self.rx_bad.iter_mut().find(|(n, _)| *n == k) {
            Some((_, c)) => *c += 1,
            None => self.rx_bad.push((k, 1)),
        }
    }
}

/// Runs the keepalive and the peer link, and publishes the pair's state.
pub struct PairRunner {
    vs: VirtualSwitch,
    /// Channel name → local member names.
    channels: Vec<(String, u32, Vec<String>)>,
    switch_name: String,
    pair: PairState,
    counters: KeepaliveCounters,
    /// What `show virtual-switch` prints.
    pub info: Arc<Mutex<Value>>,
    stop: Box<dyn Fn() -> bool + Send>,
    bind_error: Option<String>,
    /// The peer link (absent in unit tests of the keepalive alone).
    link: Option<PeerLink>,
    /// Why an aggregated peer link carries no data, while it does not
    /// (see [`PairState::data_down`]).
    no_data_reason: Option<String>,
}

impl PairRunner {
    /// `None` without a `virtual-switch:` section.
    pub fn new(cfg: &config::Config, stop: Box<dyn Fn() -> bool + Send>) -> Option<PairRunner> {
        let vs = cfg.virtual_switch.clone()?;
        let ka = &vs.keepalive;
        let pc = PairConfig {
            domain: vs.domain_id as u16,
            priority: vs.priority,
            node: node_id(ka.source),
            system: vs.system_mac.octets(),
            timeout: Duration::from_millis(ka.timeout_ms as u64),
            delay_restore: Duration::from_secs(vs.delay_restore_s as u64),
        };
        let channels = vs
            .channels
            .iter()
            .map(|c| {
                let members = cfg
                    .port_channels
                    .iter()
                    .find(|p| p.name == c.port_channel)
                    .map(|p| p.members.clone())
                    .unwrap_or_default();
                (c.port_channel.clone(), c.id, members)
            })
            .collect();
        let r = PairRunner {
            pair: PairState::new(pc, Instant::now()),
            vs,
            channels,
            switch_name: cfg.switch.name.clone(),
            counters: KeepaliveCounters::default(),
            info: Arc::new(Mutex::new(Value::Null)),
            stop,
            bind_error: None,
            link: None,
            no_data_reason: None,
        };
        r.publish(Instant::now());
        Some(r)
    }

    /// The new image of a planned restart of a node that was paired with
    /// its multichassis members up: keep carrying (see
    /// [`PairState::warm_start`]); the peer's copy still comes when the
    /// link is heard again.
    pub fn warm_start(mut self) -> PairRunner {
        self.pair.warm_start();
        tracing::info!(
            "virtual-switch: warm start after a restart: multichassis members stay up,              asking the peer for a full copy"
        );
        self.publish(Instant::now());
        self
    }

    /// Whether this node should restart warm: paired, its members up (from
    /// the published `show virtual-switch` state).
    pub fn restart_warm(info: &Value) -> bool {
        info["status"] == "paired"
            && info["channels"]
                .as_array()
                .is_some_and(|c| c.iter().all(|c| c["local_members_enabled"] == true))
    }

    /// Runs the peer link too (the daemon; see [`link`]).
    pub fn with_peer_link(mut self, io: LinkIo) -> PairRunner {
        self.link = Some(PeerLink::new(io, self.vs.domain_id as u16));
        self.publish(Instant::now());
        self
    }

    fn bind(&mut self) -> Option<UdpSocket> {
        let ka = &self.vs.keepalive;
        let at = SocketAddr::new(ka.source, ka.port);
        match UdpSocket::bind(at) {
            Ok(s) => {
                // Polled with the peer-link queue; reads never block.
                let _ = s.set_nonblocking(true);
                self.bind_error = None;
                Some(s)
            }
            Err(e) => {
                let msg = format!("cannot bind {at}: {e}");
                if self.bind_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!("virtual-switch keepalive: {msg}");
                }
                self.bind_error = Some(msg);
                None
            }
        }
    }

    /// Until `stop`.
    pub fn run(mut self) {
        let ka = self.vs.keepalive.clone();
        let peer = SocketAddr::new(ka.peer, ka.port);
        let interval = Duration::from_millis(ka.interval_ms as u64);
        let domain = self.vs.domain_id as u16;
        let mut sock: Option<UdpSocket> = None;
        let mut next_tx = Instant::now();
        let mut next_hello = Instant::now();
        let mut next_bind = Instant::now();
        let mut next_publish = Instant::now();
        let mut seq = 0u32;
        let mut buf = [0u8; HEADER_LEN + MAX_PAYLOAD];
        let mut last_status = self.pair.status(Instant::now());
        let mut link_was_alive = false;
        let mut data_was_down = false;
        let mut fds: Vec<libc::pollfd> = Vec::new();
        while !(self.stop)() {
            let now = Instant::now();
            if sock.is_none() && now >= next_bind {
                sock = self.bind();
                next_bind = now + Duration::from_secs(1);
            }
            if let Some(s) = &sock {
                if now >= next_tx {
                    seq = seq.wrapping_add(1);
                    let msg = Message::Keepalive(self.pair.hello(now, seq));
                    match encode(domain, &msg, &mut buf) {
                        Ok(n) if s.send_to(&buf[..n], peer).is_ok() => self.counters.tx += 1,
                        _ => self.counters.tx_errors += 1,
                    }
                    next_tx = now + interval;
                }
            }
            if let Some(l) = self.link.as_mut() {
                let now = Instant::now();
                let rx = l.receive();
                for (d, h) in rx.hellos {
                    self.pair.peer_link_hello(now, d, h);
                }
                if rx.synced {
                    self.pair.synced(now);
                }
                if let Some(d) = l.bundle_distributing() {
                    self.pair.peer_link_data(now, d);
                }
                let alive = self.pair.link_alive(now);
                let no_data = self.pair.data_down(now);
                if no_data && !data_was_down {
                    let why = l.no_data_reason(&self.switch_name);
                    tracing::warn!(
                        "virtual-switch: peer link {} down for data: hellos cross but no member has \
                         distributed for {} ms ({why}); dual-active, the secondary holds its \
                         multichassis members down",
                        self.vs.peer_link.join(","),
                        (pair::BUNDLE_GRACE.as_millis() as u64) + ka.timeout_ms as u64
                    );
                    self.no_data_reason = Some(why);
                } else if !no_data && data_was_down {
                    self.no_data_reason = None;
                }
                data_was_down = no_data;
                if alive && !link_was_alive {
                    // (Re)joined: ask for everything the peer knows.
                    tracing::info!("virtual-switch: peer link up, asking for a full copy");
                    l.request_copy();
                } else if !alive && link_was_alive && !no_data {
                    tracing::warn!(
                        "virtual-switch: peer link down (no hello in {} ms)",
                        ka.timeout_ms
                    );
                }
                link_was_alive = alive;
                if now >= next_hello {
                    seq = seq.wrapping_add(1);
                    l.send_hello(self.pair.hello(now, seq));
                    l.sync_tick(alive);
                    next_hello = now + interval;
                }
                l.send_changes(alive);
                if alive {
                    l.send_changed_views();
                }
            }
            // Wait for a keepalive, a peer frame or a neighbour change
            // (one monitor per VRF with SVIs), 10 ms at most (timers).
            let pollfd = |fd: i32| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            fds.clear();
            fds.push(pollfd(sock.as_ref().map_or(-1, |s| s.as_raw_fd())));
            fds.push(pollfd(self.link.as_ref().map_or(-1, |l| l.event_fd())));
            if let Some(l) = &self.link {
                fds.extend(l.neigh_fds().map(pollfd));
            }
            // SAFETY: valid pollfds, as many as given (a negative fd is ignored).
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 10) };
            if let Some(s) = &sock {
                // Until WouldBlock (nothing more) or an error such as
                // ECONNREFUSED after an ICMP unreachable: next turn.
                while let Ok((n, from)) = s.recv_from(&mut buf) {
                    let now = Instant::now();
                    if from.ip() != ka.peer {
                        self.counters.rx_wrong_source += 1;
                        continue;
                    }
                    match decode(&buf[..n]) {
                        Ok((d, Message::Keepalive(h))) => {
                            self.counters.rx += 1;
                            self.pair.keepalive(now, d, h);
                        }
                        Ok((d, Message::Goodbye(h))) => {
                            self.counters.rx += 1;
                            let before = self.pair.goodbyes;
                            self.pair.goodbye(now, d, h);
                            if self.pair.goodbyes != before {
                                tracing::warn!(
                                    "virtual-switch: the peer's guardian says it stopped without a hand-over"
                                );
                            }
                        }
                        Ok(_) => self.counters.rx_unexpected += 1,
                        Err(e) => self.counters.bad(e),
                    }
                }
            }
            self.tick(Instant::now(), &mut next_publish, &mut last_status);
        }
    }

    fn tick(&mut self, now: Instant, next_publish: &mut Instant, last: &mut pair::PairStatus) {
        let st = self.pair.update(now);
        if let Some(l) = self.link.as_mut() {
            if st == pair::PairStatus::PeerDown && *last != pair::PairStatus::PeerDown {
                l.peer_lost();
            }
            l.apply(!self.pair.members_enabled(now), self.pair.link_alive(now));
        }
        if st != *last {
            tracing::warn!(
                "virtual-switch domain {}: {} -> {} (role {}, multichassis members {})",
                self.vs.domain_id,
                last.as_str(),
                st.as_str(),
                self.pair.role(now).as_str(),
                self.pair.members_reason(now)
            );
            *last = st;
        }
        if now >= *next_publish {
            self.publish(now);
            *next_publish = now + Duration::from_millis(100);
        }
    }

    /// The JSON of `show virtual-switch`.
    pub fn json(&self, now: Instant) -> Value {
        let vs = &self.vs;
        let ka = &vs.keepalive;
        let p = &self.pair;
        let role = p.role(now);
        let peer = p.peer().map(|(at, h)| {
            json!({
                "priority": h.priority,
                "role": if h.primary { "primary" } else { "secondary" },
                "synced": h.synced,
                "sees_peer_link": h.peer_link_up,
                "last_heard_ms": now.saturating_duration_since(at).as_millis() as u64,
            })
        });
        let members_up = p.members_enabled(now);
        let link_alive = p.link_alive(now);
        let channels: Vec<Value> = self
            .channels
            .iter()
            .map(|(name, id, members)| {
                // With the peer link running: what the peer says of its
                // members; without it: the pair's decision alone.
                let peer_serves = match &self.link {
                    Some(l) if link_alive => l
                        .channels()
                        .iter()
                        .position(|c| c.id as u32 == *id)
                        .is_some_and(|j| l.peer_active()[j]),
                    // Split: the primary's members carry the channel.
                    _ => {
                        p.status(now) == pair::PairStatus::DualActive
                            && p.role(now) == pair::Role::Secondary
                    }
                };
                // LACP partner (system, key) seen here and on the peer.
                let (partner, peer_partner) = match &self.link {
                    Some(l) => {
                        let j = l.channels().iter().position(|c| c.id as u32 == *id);
                        (
                            j.and_then(|j| l.local_partner(l.channels()[j].index)),
                            j.and_then(|j| l.peer_partner()[j]),
                        )
                    }
                    None => (None, None),
                };
                let show = |p: Option<([u8; 6], u16)>| {
                    p.map(|(s, k)| json!({"system": config::show_mac(s), "key": k}))
                };
                json!({
                    "name": name,
                    "id": id,
                    "partner": show(partner),
                    "peer_partner": show(peer_partner),
                    "partner_match": match (partner, peer_partner) {
                        (Some(a), Some(b)) => json!(a == b),
                        _ => Value::Null,
                    },
                    "local_members": members,
                    "local_members_enabled": members_up,
                    "served_by": match (members_up, peer_serves) {
                        (true, true) => "both",
                        (true, false) => "this node",
                        (false, true) => "peer",
                        (false, false) => "none",
                    },
                })
            })
            .collect();
        let link = self.link.as_ref().map(|l| {
            let c = &l.counters;
            let mut bad = serde_json::Map::new();
            for (k, v) in &c.rx_bad {
                bad.insert((*k).into(), json!(v));
            }
            json!({
                "tx": c.tx,
                "tx_errors": c.tx_errors,
                "rx": c.rx,
                "rx_bad": bad,
                "rx_wrong_domain": c.rx_wrong_domain,
                "rx_unexpected": c.rx_unexpected,
                "macs_tx": c.macs_tx,
                "macs_rx": c.macs_rx,
                "synced_macs": l.macs.len(),
                "copies_tx": c.copies_tx,
                "copies_rx": l.macs.copies,
                "copy_mismatch": l.macs.copy_mismatch,
                "synced": p.is_synced(),
                "partner_mismatch": l.partner_mismatch,
                "neighbors": {
                    "local": l.neigh.local_len(),
                    "from_peer": l.neigh.peer_len(),
                    "tx": l.neigh.counters.tx,
                    "rx": l.neigh.counters.rx,
                    "installed": l.neigh.counters.installed,
                    "removed": l.neigh.counters.removed,
                    "install_errors": l.neigh.counters.install_errors,
                    "no_svi": l.neigh.counters.no_svi,
                },
                "groups": l.groups.as_ref().map(|g| json!({
                    "from_peer": g.peer_len(),
                    "tx": g.counters.tx,
                    "rx": g.counters.rx,
                })),
            })
        });
        let c = &self.counters;
        let mut bad = serde_json::Map::new();
        for (k, v) in &c.rx_bad {
            bad.insert((*k).into(), json!(v));
        }
        json!({
            "enabled": true,
            "domain_id": vs.domain_id,
            "node": self.switch_name,
            "system_mac": vs.system_mac.to_string(),
            "system_priority": vs.system_priority,
            "priority": vs.priority,
            "role": role.as_str(),
            "status": p.status(now).as_str(),
            "multichassis_members": p.members_reason(now),
            "dual_active_events": p.dual_active_events,
            "goodbyes": p.goodbyes,
            "peer_link": {
                "ports": vs.peer_link,
                "mode": if self.link.as_ref().is_some_and(|l| l.aggregated()) {
                    "aggregate"
                } else {
                    "active-standby"
                },
                "members": self.link.as_ref().map(|l| l.ports_json()),
                // `no-data`: hellos cross, the bundle has no member
                // distributing (a split, see `no_data_reason`).
                "state": if p.link_alive(now) {
                    "up"
                } else if p.data_down(now) {
                    "no-data"
                } else {
                    "down"
                },
                "no_data_reason": self.no_data_reason.as_ref().filter(|_| p.data_down(now)),
                "messages": link,
            },
            "keepalive": {
                "source": ka.source.to_string(),
                "peer": ka.peer.to_string(),
                "port": ka.port,
                "interval_ms": ka.interval_ms,
                "timeout_ms": ka.timeout_ms,
                "state": if p.keepalive_alive(now) { "up" } else { "down" },
                "error": self.bind_error,
                "tx": c.tx,
                "tx_errors": c.tx_errors,
                "rx": c.rx,
                "rx_wrong_source": c.rx_wrong_source,
                "rx_wrong_domain": p.wrong_domain,
                "rx_system_mac_mismatch": p.system_mismatch,
                "rx_unexpected": c.rx_unexpected,
                "rx_bad": bad,
            },
            "peer": peer,
            "channels": channels,
        })
    }

    fn publish(&self, now: Instant) {
        let v = self.json(now);
        *self.info.lock().unwrap_or_else(|e| e.into_inner()) = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn flag(s: &Arc<AtomicBool>) -> Box<dyn Fn() -> bool + Send> {
        let s = s.clone();
        Box::new(move || s.load(Ordering::Relaxed))
    }

    fn cfg(prio: u16, src: &str, peer: &str, port: u16) -> config::Config {
        config::parse(
            &format!(
                "ports:
  - {{name: pl, mode: trunk}}
  - {{name: m1, mode: access}}
port-channels: [{{name: po1, members: [m1]}}]
virtual-switch:
  domain-id: 7
  priority: {prio}
  system-mac: 02:00:00:00:07:00
  peer-link: [pl]
  delay-restore-s: 0
  keepalive: {{source: {src}, peer: {peer}, port: {port}, interval-ms: 50, timeout-ms: 300}}
  channels: [{{port-channel: po1, id: 1}}]
"
            ),
            "t.yaml",
        )
        .unwrap()
    }

    fn wait(info: &Arc<Mutex<Value>>, what: impl Fn(&Value) -> bool) -> Value {
        let t0 = Instant::now();
        loop {
            let v = info.lock().unwrap().clone();
            if what(&v) {
                return v;
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "timed out: {v:#}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn both_nodes_present_one_lacp_system() {
        let a = cfg(100, "127.0.0.1", "127.0.0.2", 1);
        let b = cfg(200, "127.0.0.2", "127.0.0.1", 1);
        let (pa, sa, ka, na) = mc_actor(&a, "po1", 1).unwrap();
        let (pb, sb, kb, nb) = mc_actor(&b, "po1", 1).unwrap();
        assert_eq!((pa, sa, ka), (pb, sb, kb));
        assert_eq!(sa, [2, 0, 0, 0, 7, 0]);
        assert_eq!(ka, 0x8001);
        assert_ne!(na, nb);
        assert_eq!(mc_actor(&a, "po9", 1), None);
    }

    /// Two nodes over loopback addresses: keepalive only (no peer link)
    /// is dual-active, so the secondary holds its members down; when the
    /// primary stops, the secondary carries everything.
    #[test]
    fn keepalive_decides_dual_active_and_peer_loss() {
        let port = 20_000 + (std::process::id() % 20_000) as u16;
        let stop_a = Arc::new(AtomicBool::new(false));
        let stop_b = Arc::new(AtomicBool::new(false));
        let a = PairRunner::new(&cfg(100, "127.0.0.1", "127.0.0.2", port), flag(&stop_a)).unwrap();
        let b = PairRunner::new(&cfg(200, "127.0.0.2", "127.0.0.1", port), flag(&stop_b)).unwrap();
        let (ia, ib) = (a.info.clone(), b.info.clone());
        let ta = std::thread::spawn(move || a.run());
        let tb = std::thread::spawn(move || b.run());
        let vb = wait(&ib, |v| v["status"] == "dual-active");
        assert_eq!(vb["role"], "secondary", "{vb:#}");
        assert_eq!(vb["multichassis_members"], "down: dual-active, secondary");
        assert_eq!(vb["channels"][0]["served_by"], "peer");
        assert_eq!(vb["peer"]["role"], "primary");
        let va = wait(&ia, |v| v["status"] == "dual-active");
        assert_eq!(va["role"], "primary");
        assert_eq!(va["multichassis_members"], "up");
        assert_eq!(va["channels"][0]["served_by"], "this node");

        // Garbage from the peer's address is counted and dropped.
        let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
        junk.send_to(b"not a keepalive", ("127.0.0.2", port))
            .unwrap();
        let vb = wait(&ib, |v| v["keepalive"]["rx_bad"]["bad_magic"] == 1);
        assert_eq!(vb["status"], "dual-active");

        // The primary goes: the secondary takes over.
        stop_a.store(true, Ordering::Relaxed);
        ta.join().unwrap();
        let vb = wait(&ib, |v| v["status"] == "peer-down");
        assert_eq!(vb["role"], "primary");
        assert_eq!(vb["multichassis_members"], "up");
        assert_eq!(vb["keepalive"]["state"], "down");
        stop_b.store(true, Ordering::Relaxed);
        tb.join().unwrap();
    }
}
