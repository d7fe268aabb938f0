//! The spanning tree thread: runs [`crate::stp::Bridge`] for the switch.
//!
//! BPDUs arrive from the workers on `Shared::bpdus`; link state comes
//! from [`Ha`] (the supervisor's view); BPDUs leave through an inject
//! socket per port. Port states go to the data path as one layer-2
//! snapshot per change, written by [`Ha`] (the only writer of the
//! snapshot's port fields); topology changes flush the learner. What
//! `show spanning-tree` prints is kept in `Ha::stp_info`.

use crate::ha::{Changes, Ha};
use crate::stp::{Bridge, BridgeConfig, PortConfig, PortState, Role, Timers};
use config::stp::StpMode;
use config::Config;
use datapath::Shared;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::l2::StpState;

pub struct StpRunner {
    bridge: Bridge,
    /// Bridge port index → switch port id.
    ports: Vec<u16>,
    names: Vec<String>,
    ha: Arc<Ha>,
    shared: Arc<Shared>,
    sockets: Vec<Option<io::InjectSocket>>,
    link: Vec<bool>,
    published: Vec<StpState>,
    roles: Vec<Role>,
    /// Frames to the bridge group address that did not parse.
    bad_rx: Vec<u64>,
    start: Instant,
}

impl StpRunner {
    /// `None` without a `spanning-tree:` section.
    pub fn new(cfg: &Config, ha: Arc<Ha>, shared: Arc<Shared>) -> Option<StpRunner> {
        let st = cfg.spanning_tree.as_ref()?;
        let list = cfg.stp_ports();
        let bridge_cfg = BridgeConfig {
            priority: st.priority as u16,
            mac: crate::ha::system_mac(&cfg.switch.name),
            timers: Timers {
                hello: st.hello_time as u16,
                max_age: st.max_age as u16,
                forward_delay: st.forward_delay as u16,
                tx_hold_count: st.tx_hold_count as u16,
            },
            force_stp: st.mode == StpMode::Stp,
        };
        let port_cfgs: Vec<PortConfig> = list
            .iter()
            .map(|(i, p)| PortConfig {
                number: (*i as u16 + 1) & 0x0fff,
                priority: p.priority as u8,
                path_cost: p.cost,
                admin_edge: p.edge,
                auto_edge: p.auto_edge,
                bpdu_guard: p.bpdu_guard,
                root_guard: p.root_guard,
            })
            .collect();
        let mut bridge = Bridge::new(bridge_cfg, &port_cfgs);
        bridge.guard_recovery = Duration::from_secs(st.bpdu_guard_recovery as u64);
        let n = list.len();
        Some(StpRunner {
            bridge,
            ports: list.iter().map(|(i, _)| *i as u16).collect(),
            names: list.iter().map(|(_, p)| p.name.clone()).collect(),
            ha,
            shared,
            sockets: (0..n).map(|_| None).collect(),
            link: vec![false; n],
            published: vec![StpState::Discarding; n],
            roles: vec![Role::Disabled; n],
            bad_rx: vec![0; n],
            start: Instant::now(),
        })
    }

    pub fn run(mut self) {
        tracing::info!(
            "spanning tree: bridge {} on {} ports",
            self.bridge.bridge_id(),
            self.ports.len()
        );
        let mut next_info = Instant::now();
        while !self.shared.stop.load(std::sync::atomic::Ordering::Relaxed) {
            let now = Instant::now();
            if self.step(now) || now >= next_info {
                next_info = now + Duration::from_millis(200);
                self.publish_info(now);
            }
            let wait = self
                .bridge
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()))
                .unwrap_or(Duration::from_millis(10))
                .min(Duration::from_millis(10));
            let mut pfd = libc::pollfd {
                fd: self.shared.bpdus.event_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, wait.as_millis().max(1) as i32) };
            self.shared.bpdus.drain_event();
        }
    }

    /// Links, received BPDUs, timers; then send and publish.
    /// Returns whether a port changed role or state.
    fn step(&mut self, now: Instant) -> bool {
        let mut changed = false;
        let ha = self.ha.snapshot();
        for k in 0..self.ports.len() {
            let up = ha.usable(self.ports[k]);
            if up != self.link[k] {
                self.link[k] = up;
                if up {
                    self.bridge.link_up(k, now);
                } else {
                    self.bridge.link_down(k, now);
                }
            }
        }
        while let Some(b) = self.shared.bpdus.pop() {
            if let Some(k) = self.ports.iter().position(|p| *p == b.port) {
                match wire::stp::parse_frame(b.frame()) {
                    Ok(bpdu) => self.bridge.receive(k, &bpdu, now),
                    Err(_) => self.bad_rx[k] += 1,
                }
            }
            self.shared.bpdus.recycle(b);
        }
        for (k, bpdu) in self.bridge.poll(now) {
            let name = &self.names[k];
            let src = io::link::mac(name).unwrap_or(self.bridge.cfg.mac);
            let mut f = [0u8; wire::stp::FRAME_LEN];
            if wire::stp::build_frame(src, &bpdu, &mut f).is_ok() {
                self.send(k, &f);
            }
        }
        let flush: Vec<u16> = self
            .bridge
            .take_flushes()
            .into_iter()
            .map(|k| self.ports[k])
            .collect();
        let states: Vec<StpState> = (0..self.ports.len())
            .map(|k| match self.bridge.state(k) {
                PortState::Discarding => StpState::Discarding,
                PortState::Learning => StpState::Learning,
                PortState::Forwarding => StpState::Forwarding,
            })
            .collect();
        for (k, state) in states.iter().enumerate() {
            let role = self.bridge.ports[k].role;
            if role != self.roles[k] || *state != self.published[k] {
                tracing::info!(
                    "spanning tree: port {} {} {}",
                    self.names[k],
                    role.name(),
                    self.bridge.state(k).name()
                );
                self.roles[k] = role;
                changed = true;
            }
        }
        if states != self.published || !flush.is_empty() {
            let ports = self.ports.clone();
            let st = states.clone();
            self.ha.update(move |h| {
                for (k, p) in ports.iter().enumerate() {
                    if let Some(s) = h.stp.get_mut(*p as usize) {
                        *s = st[k];
                    }
                }
                Changes {
                    flush,
                    ..Changes::default()
                }
            });
            self.published = states;
        }
        changed
    }

    fn send(&mut self, k: usize, frame: &[u8]) {
        if self.sockets[k].is_none() {
            self.sockets[k] = io::InjectSocket::open(&self.names[k]).ok();
        }
        if let Some(s) = &self.sockets[k] {
            if s.send(frame).is_err() {
                // The interface may have been re-created: reopen next time.
                self.sockets[k] = None;
            }
        }
    }

    fn publish_info(&self, now: Instant) {
        let v = info_json(&self.bridge, &self.names, &self.bad_rx, now, self.start);
        *self.ha.stp_info.lock().unwrap_or_else(|e| e.into_inner()) = v;
    }
}

fn secs(t: u16) -> f64 {
    f64::from(t) / 256.0
}

/// The bridge as `show spanning-tree` reads it.
pub fn info_json(
    b: &Bridge,
    names: &[String],
    bad_rx: &[u64],
    now: Instant,
    start: Instant,
) -> Value {
    let t = b.root_times();
    let ports: Vec<Value> = b
        .ports
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let d = b.designated(k);
            let c = p.counters;
            json!({
                "name": names.get(k).cloned().unwrap_or_default(),
                "role": p.role.name(),
                "state": b.state(k).name(),
                "cost": p.cfg.path_cost,
                "priority": p.cfg.priority,
                "port_id": format!("{}.{}", p.cfg.priority, p.cfg.number),
                "designated_bridge": d.bridge.to_string(),
                "designated_port": format!("{}.{}", d.port >> 8 & 0xf0, d.port & 0x0fff),
                "designated_cost": d.cost,
                "edge": p.oper_edge,
                "admin_edge": p.cfg.admin_edge,
                "bpdu_guard": p.cfg.bpdu_guard,
                "root_guard": p.cfg.root_guard,
                "err_disabled": p.guard_until.is_some(),
                "version": if p.send_rstp { "rstp" } else { "stp" },
                "bpdus_rx": c.rx_rst + c.rx_config + c.rx_tcn,
                "bpdus_tx": c.tx_rst + c.tx_config + c.tx_tcn,
                "rst_rx": c.rx_rst, "config_rx": c.rx_config, "tcn_rx": c.rx_tcn,
                "rst_tx": c.tx_rst, "config_tx": c.tx_config, "tcn_tx": c.tx_tcn,
                "tc_rx": c.rx_tc, "tc_tx": c.tx_tc,
                "bad_rx": bad_rx.get(k).copied().unwrap_or(0),
                "ignored_rx": c.rx_ignored,
                "bpdu_guard_trips": c.bpdu_guard_trips,
                "forward_transitions": c.forward_transitions,
            })
        })
        .collect();
    json!({
        "enabled": true,
        "mode": if b.cfg.force_stp { "stp" } else { "rstp" },
        "bridge_id": b.bridge_id().to_string(),
        "root_id": b.root_priority.root.to_string(),
        "is_root": b.is_root(),
        "root_cost": b.root_priority.cost,
        "root_port": b.root_port.and_then(|k| names.get(k).cloned()),
        "hello_time": secs(t.hello),
        "max_age": secs(t.max_age),
        "forward_delay": secs(t.forward_delay),
        "bridge_hello_time": b.cfg.timers.hello,
        "bridge_max_age": b.cfg.timers.max_age,
        "bridge_forward_delay": b.cfg.timers.forward_delay,
        "topology_changes": b.stats.topology_changes,
        "last_topology_change_s": b.stats.last_topology_change.map(|x| now.duration_since(x).as_secs_f64()),
        "uptime_s": now.duration_since(start).as_secs(),
        "ports": ports,
    })
}
