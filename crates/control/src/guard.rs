//! The guard thread: storm control's and loop detection's control plane
//! (docs/storm-control.md).
//!
//! - Publishes the storm-control table the workers police with
//!   (`Shared::storm`), from the running configuration and each port's
//!   link speed (for limits in percent).
//! - Logs a storm once when it starts (the first drop) and once when it
//!   ends (no drop for [`STORM_QUIET`]), with what it dropped.
//! - Err-disables a port — administratively down, so the link partner
//!   sees it go — when storm control's action is `shutdown` and a limit
//!   was exceeded, or when loop detection finds a loop; brings it back
//!   after the recovery time or on `lanyard clear errdisable`.
//! - Sends loop-detect probes on every switched port and VLAN each
//!   interval (through the workers, `Shared::mc_out`) and reads which of
//!   them came back where (`Shared::loop_seen`).
//!
//! The thread never touches a frame on the data path: workers count and
//! flag, this thread decides and logs.

use crate::apply::Applier;
use config::guard::{parse_level, Level, LoopAction, StormAction};
use config::{Config, PortMode};
use datapath::Shared;
use pipeline::storm::{
    LoopProbe, PortStorm, StormClass, StormLimit, StormTable, StormUnit, STORM_CLASSES,
};
use pipeline::WorkerCounters;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the thread looks at counters and flags.
const TICK: Duration = Duration::from_millis(50);
/// A storm has ended when nothing was dropped for this long.
pub const STORM_QUIET: Duration = Duration::from_secs(2);
/// Link speeds are read again this often (limits in percent follow them).
const SPEED_EVERY: Duration = Duration::from_secs(5);
/// Speed assumed for a port whose driver reports none, Mbit/s.
pub const DEFAULT_SPEED_MBPS: u32 = 10_000;
/// Most VLANs a trunk port is probed in per interval.
const PROBE_VLANS: usize = 64;
/// A loop that is only logged is logged again after this long.
const LOOP_RELOG: Duration = Duration::from_secs(60);

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// The storm-control table of `cfg`; `speed(port)` gives a port's link
/// speed in Mbit/s for limits in percent. `None` when no port has storm
/// control.
pub fn storm_table(cfg: &Config, speed: &dyn Fn(usize) -> u32) -> Option<StormTable> {
    let mut t = StormTable::new(GENERATION.fetch_add(1, Ordering::Relaxed), cfg.ports.len());
    let mut any = false;
    for (i, p) in cfg.ports.iter().enumerate() {
        let Some(sc) = &p.storm_control else { continue };
        if p.mode == PortMode::Routed || i >= t.ports.len() {
            continue;
        }
        let mut ps = PortStorm {
            shutdown: sc.action == StormAction::Shutdown,
            ..PortStorm::default()
        };
        for (k, (_, level)) in sc.levels().iter().enumerate() {
            let Some(l) = level.as_deref().and_then(|l| parse_level(l).ok()) else {
                continue;
            };
            ps.limits[k] = Some(match l {
                Level::Pps(n) => StormLimit {
                    rate: n,
                    unit: StormUnit::Packets,
                },
                Level::Bps(b) => StormLimit {
                    rate: b / 8,
                    unit: StormUnit::Bytes,
                },
                Level::Percent(pct) => StormLimit {
                    rate: (f64::from(speed(i)) * 1e6 / 8.0 * pct / 100.0) as u64,
                    unit: StormUnit::Bytes,
                },
            });
        }
        t.ports[i] = Some(ps);
        any = true;
    }
    any.then_some(t)
}

/// Why a port is err-disabled.
#[derive(Clone, Debug)]
struct ErrDisabled {
    cause: String,
    since: Instant,
    /// When it comes back by itself (`None`: manual).
    until: Option<Instant>,
}

/// An ongoing storm on one port and class.
#[derive(Clone, Copy, Debug)]
struct Storm {
    since: Instant,
    /// Drops counted when it started.
    base: u64,
    last_drop: Instant,
}

#[derive(Clone, Debug, Default)]
struct PortGuard {
    errdisabled: Option<ErrDisabled>,
    /// Per class: drops seen at the last look, and the storm if one is on.
    drops: [u64; STORM_CLASSES],
    storms: [Option<Storm>; STORM_CLASSES],
    storm_events: u64,
    /// Times this port was err-disabled, and the last reason.
    errdisables: u64,
    last_cause: Option<String>,
    /// Loop detect: the last loop seen here (port it was sent on, VLAN,
    /// when), and when it was last logged.
    last_loop: Option<(u16, u16, Instant)>,
    loop_logged: Option<Instant>,
    loops: u64,
}

/// What the guard knows, for `show storm-control` and `show loop-detect`.
#[derive(Default)]
struct State {
    ports: Vec<PortGuard>,
    probes_sent: u64,
    speeds: Vec<u32>,
}

/// Requests from the API.
pub enum GuardRequest {
    /// Bring err-disabled ports back now (`None`: all).
    Clear {
        port: Option<usize>,
        reply: mpsc::Sender<Result<Vec<String>, String>>,
    },
}

/// The API's handle on the guard.
pub struct GuardHandle {
    state: Arc<Mutex<State>>,
    requests: Mutex<mpsc::Sender<GuardRequest>>,
    started: Instant,
}

pub struct Guard {
    shared: Arc<Shared>,
    applier: Arc<Applier>,
    counters: Vec<Arc<WorkerCounters>>,
    state: Arc<Mutex<State>>,
    requests: mpsc::Receiver<GuardRequest>,
    cfg: Option<Arc<Config>>,
    seq: u32,
    last_probe: Option<Instant>,
    last_speed: Option<Instant>,
}

fn random_id() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let id = if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        // No entropy call: time and pid are unique enough per switch.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ u64::from(std::process::id()) << 32
    };
    id.max(1)
}

impl Guard {
    pub fn new(
        shared: Arc<Shared>,
        applier: Arc<Applier>,
        counters: Vec<Arc<WorkerCounters>>,
    ) -> (Guard, Arc<GuardHandle>) {
        shared.switch_id.store(random_id(), Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let state = Arc::new(Mutex::new(State::default()));
        let g = Guard {
            shared,
            applier,
            counters,
            state: state.clone(),
            requests: rx,
            cfg: None,
            seq: 0,
            last_probe: None,
            last_speed: None,
        };
        let h = Arc::new(GuardHandle {
            state,
            requests: Mutex::new(tx),
            started: Instant::now(),
        });
        g.publish_first();
        (g, h)
    }

    /// The first table before any worker forwards (speeds as known now).
    fn publish_first(&self) {
        let cfg = self.applier.running();
        let speeds = speeds(&cfg);
        let t = storm_table(&cfg, &|i| speeds[i]);
        self.shared.storm.store(t.map(Arc::new));
    }

    pub fn run(mut self) {
        while !self.shared.stop.load(Ordering::Relaxed) {
            self.pass(Instant::now());
            match self.requests.recv_timeout(TICK) {
                Ok(r) => self.request(r),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(TICK),
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pass(&mut self, now: Instant) {
        let cfg = self.applier.running();
        let changed = self.cfg.as_ref().is_none_or(|c| !Arc::ptr_eq(c, &cfg));
        let n = cfg.ports.len();
        {
            let mut st = self.lock();
            if st.ports.len() != n {
                st.ports.resize_with(n, PortGuard::default);
            }
        }
        if changed || self.last_speed.is_none_or(|t| now - t >= SPEED_EVERY) {
            self.last_speed = Some(now);
            let sp = speeds(&cfg);
            let mut st = self.lock();
            if changed || st.speeds != sp {
                let t = storm_table(&cfg, &|i| sp[i]);
                self.shared.storm.store(t.map(Arc::new));
                st.speeds = sp;
            }
        }
        self.cfg = Some(cfg.clone());
        self.storms(&cfg, now);
        if let Some(ld) = &cfg.loop_detect {
            let due = self
                .last_probe
                .is_none_or(|t| now - t >= Duration::from_secs(u64::from(ld.interval)));
            self.loops(&cfg, ld, now);
            if due {
                self.last_probe = Some(now);
                self.probe(&cfg);
            }
        } else {
            for s in self.shared.loop_seen.iter() {
                s.store(0, Ordering::Relaxed);
            }
        }
        self.recover(&cfg, now);
    }

    /// Storm start / end logging, and shutdown on a tripped limit.
    fn storms(&mut self, cfg: &Config, now: Instant) {
        for (i, p) in cfg.ports.iter().enumerate() {
            let tripped = self
                .shared
                .storm_tripped
                .get(i)
                .map_or(0, |t| t.swap(0, Ordering::Relaxed));
            let Some(sc) = &p.storm_control else { continue };
            for class in StormClass::ALL {
                let k = class as usize;
                let drops: u64 = self
                    .counters
                    .iter()
                    .map(|c| c.ports[i].storm_drops[k].get())
                    .sum();
                let level = sc.levels()[k].1.clone().unwrap_or_default();
                let mut st = self.lock();
                let g = &mut st.ports[i];
                let before = std::mem::replace(&mut g.drops[k], drops);
                match g.storms[k] {
                    None if drops > before => {
                        g.storms[k] = Some(Storm {
                            since: now,
                            base: before,
                            last_drop: now,
                        });
                        g.storm_events += 1;
                        tracing::warn!(
                            "storm-control: {} storm on {} (limit {level}): dropping the excess",
                            class.name(),
                            p.name
                        );
                    }
                    Some(ref mut s) if drops > before => s.last_drop = now,
                    Some(s) if now - s.last_drop >= STORM_QUIET => {
                        g.storms[k] = None;
                        tracing::info!(
                            "storm-control: {} storm on {} ended after {:.1} s: {} frames dropped",
                            class.name(),
                            p.name,
                            (s.last_drop - s.since).as_secs_f64(),
                            drops - s.base
                        );
                    }
                    _ => {}
                }
                drop(st);
                if tripped & (1 << k) != 0 && sc.action == StormAction::Shutdown {
                    self.errdisable(
                        cfg,
                        i,
                        format!("storm-control: {} over {level}", class.name()),
                        sc.recovery(),
                        now,
                    );
                }
            }
        }
    }

    /// Probes on every switched, forwarding port that takes part, in each
    /// of its VLANs (trunks: the first [`PROBE_VLANS`]).
    fn probe(&mut self, cfg: &Config) {
        let tables = self.shared.tables.load();
        let id = self.shared.switch_id.load(Ordering::Relaxed);
        let src = {
            let b = id.to_be_bytes();
            [0x02, 0x4c, 0x59, b[5], b[6], b[7]]
        };
        let mut sent = 0;
        for (i, p) in cfg.ports.iter().enumerate() {
            if p.mode == PortMode::Routed || !p.loop_detect {
                continue;
            }
            let Some(e) = tables.l2.ports.get(i) else {
                continue;
            };
            if !e.forwarding() || e.logical != i as u16 {
                continue;
            }
            let vlans = (1..4095u16)
                .filter(|v| e.vlans.contains(*v) && tables.l2.vlans[*v as usize].configured)
                .take(PROBE_VLANS);
            for vlan in vlans {
                self.seq = self.seq.wrapping_add(1);
                let f = LoopProbe {
                    switch_id: id,
                    port: i as u16,
                    vlan,
                    seq: self.seq,
                }
                .frame(src);
                if self.shared.mc_out.push_in_vlan(i as u16, vlan, 0, &f) {
                    sent += 1;
                }
            }
        }
        if sent > 0 {
            self.shared.mc_out.wake();
        }
        self.lock().probes_sent += sent;
    }

    /// Probes that came back: a loop between the port they left by and
    /// the port they came back on.
    fn loops(&mut self, cfg: &Config, ld: &config::guard::LoopDetect, now: Instant) {
        for rx in 0..cfg.ports.len() {
            let seen = self.shared.loop_seen[rx].swap(0, Ordering::Relaxed);
            if seen == 0 {
                continue;
            }
            let (tx, vlan) = ((seen >> 16) as usize - 1, (seen & 0xffff) as u16);
            let Some(txp) = cfg.ports.get(tx) else {
                continue;
            };
            let rxp = &cfg.ports[rx];
            let what = if tx == rx {
                format!(
                    "probe sent on {} in VLAN {vlan} came back on the same port",
                    rxp.name
                )
            } else {
                format!(
                    "probe sent on {} in VLAN {vlan} came back on {}",
                    txp.name, rxp.name
                )
            };
            let log_now = {
                let mut st = self.lock();
                let g = &mut st.ports[rx];
                g.last_loop = Some((tx as u16, vlan, now));
                let again = g.loop_logged.is_none_or(|t| now - t >= LOOP_RELOG);
                if again {
                    g.loop_logged = Some(now);
                    g.loops += 1;
                }
                again
            };
            match ld.action {
                LoopAction::Log => {
                    if log_now {
                        tracing::warn!("loop-detect: loop: {what}");
                    }
                }
                LoopAction::Shutdown => {
                    // One port of the two breaks the loop: the higher id.
                    let victim = tx.max(rx);
                    self.errdisable(
                        cfg,
                        victim,
                        format!("loop-detect: {what}"),
                        ld.recovery,
                        now,
                    );
                }
            }
        }
    }

    /// Take port `i` down (once) and say why and for how long.
    fn errdisable(&mut self, cfg: &Config, i: usize, cause: String, recovery: u32, now: Instant) {
        let name = &cfg.ports[i].name;
        {
            let mut st = self.lock();
            let g = &mut st.ports[i];
            if g.errdisabled.is_some() {
                return;
            }
            g.errdisabled = Some(ErrDisabled {
                cause: cause.clone(),
                since: now,
                until: (recovery > 0).then(|| now + Duration::from_secs(u64::from(recovery))),
            });
            g.errdisables += 1;
            g.last_cause = Some(cause.clone());
            g.storms = [None; STORM_CLASSES];
        }
        let when = if recovery > 0 {
            format!("recovery in {recovery} s")
        } else {
            format!("until `lanyard clear errdisable {name}`")
        };
        match io::link::set_down(name) {
            Ok(()) => tracing::warn!("port {name}: err-disabled ({cause}); {when}"),
            Err(e) => tracing::warn!(
                "port {name}: err-disable ({cause}) failed to take the link down: {e}"
            ),
        }
    }

    /// Ports whose recovery time has come.
    fn recover(&mut self, cfg: &Config, now: Instant) {
        let due: Vec<usize> = {
            let st = self.lock();
            st.ports
                .iter()
                .enumerate()
                .filter(|(_, g)| {
                    g.errdisabled
                        .as_ref()
                        .is_some_and(|e| e.until.is_some_and(|u| u <= now))
                })
                .map(|(i, _)| i)
                .collect()
        };
        for i in due {
            self.enable(cfg, i, "recovery time over");
        }
    }

    fn enable(&mut self, cfg: &Config, i: usize, why: &str) -> Option<String> {
        let name = cfg.ports.get(i)?.name.clone();
        self.lock().ports.get_mut(i)?.errdisabled.take()?;
        // Stale flags from before the shutdown must not trip it again.
        self.shared.storm_tripped[i].store(0, Ordering::Relaxed);
        self.shared.loop_seen[i].store(0, Ordering::Relaxed);
        match io::link::set_up(&name) {
            Ok(()) => tracing::info!("port {name}: err-disable cleared ({why})"),
            Err(e) => tracing::warn!("port {name}: err-disable cleared, set up failed: {e}"),
        }
        Some(name)
    }

    fn request(&mut self, r: GuardRequest) {
        match r {
            GuardRequest::Clear { port, reply } => {
                let cfg = self.applier.running();
                let ids: Vec<usize> = match port {
                    Some(p) => vec![p],
                    None => (0..cfg.ports.len()).collect(),
                };
                let done: Vec<String> = ids
                    .into_iter()
                    .filter_map(|i| self.enable(&cfg, i, "cleared by command"))
                    .collect();
                let _ = reply.send(Ok(done));
            }
        }
    }
}

/// Link speed of every port (Mbit/s; [`DEFAULT_SPEED_MBPS`] if unknown).
fn speeds(cfg: &Config) -> Vec<u32> {
    cfg.ports
        .iter()
        .map(|p| {
            if p.storm_control.is_some() {
                io::link::speed_mbps(&p.name).unwrap_or(DEFAULT_SPEED_MBPS)
            } else {
                0
            }
        })
        .collect()
}

impl GuardHandle {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn errdisabled_json(g: &PortGuard, now: Instant) -> Value {
        match &g.errdisabled {
            Some(e) => json!({
                "cause": e.cause,
                "for-s": (now - e.since).as_secs(),
                "recovery-in-s": e.until.map(|u| u.saturating_duration_since(now).as_secs()),
            }),
            None => Value::Null,
        }
    }

    /// `show storm-control`: every port with storm control.
    pub fn storm_json(&self, cfg: &Config, counters: &[Arc<WorkerCounters>]) -> Value {
        let st = self.lock();
        let now = Instant::now();
        let mut out = Vec::new();
        for (i, p) in cfg.ports.iter().enumerate() {
            let Some(sc) = &p.storm_control else { continue };
            let g = st.ports.get(i).cloned().unwrap_or_default();
            let mut row = json!({
                "port": p.name,
                "action": match sc.action { StormAction::Drop => "drop", StormAction::Shutdown => "shutdown" },
                "recovery-s": sc.recovery(),
                "speed-mbps": st.speeds.get(i).copied().unwrap_or(0),
                "storms": g.storm_events,
                "errdisabled": Self::errdisabled_json(&g, now),
                "errdisables": g.errdisables,
                "last-cause": g.last_cause,
            });
            for (k, (name, level)) in sc.levels().iter().enumerate() {
                let drops: u64 = counters
                    .iter()
                    .map(|c| c.ports[i].storm_drops[k].get())
                    .sum();
                row[*name] = json!({
                    "level": level,
                    "drops": drops,
                    "storm": g.storms[k].is_some(),
                });
            }
            out.push(row);
        }
        Value::Array(out)
    }

    /// `show loop-detect`.
    pub fn loop_json(&self, cfg: &Config, counters: &[Arc<WorkerCounters>]) -> Value {
        let st = self.lock();
        let now = Instant::now();
        let Some(ld) = &cfg.loop_detect else {
            return json!({"enabled": false});
        };
        let ports: Vec<Value> = cfg
            .ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.mode != PortMode::Routed)
            .map(|(i, p)| {
                let g = st.ports.get(i).cloned().unwrap_or_default();
                json!({
                    "port": p.name,
                    "probing": p.loop_detect,
                    "own-probes-received": counters.iter().map(|c| c.ports[i].loop_probes.get()).sum::<u64>(),
                    "loops": g.loops,
                    "last-loop": g.last_loop.map(|(tx, vlan, t)| json!({
                        "sent-on": cfg.ports.get(tx as usize).map(|x| x.name.clone()),
                        "vlan": vlan,
                        "ago-s": (now - t).as_secs(),
                    })),
                    "errdisabled": Self::errdisabled_json(&g, now),
                    "errdisables": g.errdisables,
                })
            })
            .collect();
        json!({
            "enabled": true,
            "interval-s": ld.interval,
            "action": match ld.action { LoopAction::Shutdown => "shutdown", LoopAction::Log => "log" },
            "recovery-s": ld.recovery,
            "probes-sent": st.probes_sent,
            "uptime-s": self.started.elapsed().as_secs(),
            "ports": ports,
        })
    }

    /// `clear errdisable [PORT]`.
    pub fn clear(&self, cfg: &Config, port: Option<&str>) -> Result<Value, String> {
        let id = match port {
            Some(p) => Some(cfg.port_index(p).ok_or_else(|| format!("no port {p:?}"))?),
            None => None,
        };
        let (tx, rx) = mpsc::channel();
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(GuardRequest::Clear {
                port: id,
                reply: tx,
            })
            .map_err(|_| "the guard thread is not running".to_string())?;
        let done = rx
            .recv_timeout(Duration::from_secs(2))
            .map_err(|_| "no answer from the guard thread".to_string())??;
        Ok(json!({"cleared": done}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_from_config() {
        let y = "ports:\n  - name: a\n    storm-control: {broadcast: 1000pps, multicast: 10M, unknown-unicast: 1%, action: shutdown}\n  - name: b\n  - name: c\n    storm-control: {broadcast: 2kpps}\n";
        let cfg = config::parse(y, "t").unwrap_or_else(|e| panic!("{e}"));
        let t = storm_table(&cfg, &|_| 10_000).unwrap();
        let a = t.ports[0].unwrap();
        assert!(a.shutdown);
        assert_eq!(
            a.limits,
            [
                Some(StormLimit {
                    rate: 1000,
                    unit: StormUnit::Packets
                }),
                Some(StormLimit {
                    rate: 1_250_000,
                    unit: StormUnit::Bytes
                }),
                // 1 % of 10 Gbit/s in bytes/s.
                Some(StormLimit {
                    rate: 12_500_000,
                    unit: StormUnit::Bytes
                }),
            ]
        );
        assert!(t.ports[1].is_none());
        let c = t.ports[2].unwrap();
        assert!(!c.shutdown && c.limits[0].unwrap().rate == 2000 && c.limits[1].is_none());
        let none = config::parse("ports:\n  - name: a\n", "t").unwrap();
        assert!(storm_table(&none, &|_| 0).is_none());
    }

    #[test]
    fn config_errors_name_the_field() {
        for (y, field) in [
            (
                "ports:\n  - name: a\n    storm-control: {broadcast: 10}\n",
                "ports[0].storm-control.broadcast",
            ),
            (
                "ports:\n  - name: a\n    storm-control: {}\n",
                "ports[0].storm-control",
            ),
            (
                "ports:\n  - name: a\n    storm-control: {multicast: 5%, recovery: 100000}\n",
                "ports[0].storm-control.recovery",
            ),
            (
                "ports:\n  - name: a\n    storm-control: {broadcast: 1kpps, action: explode}\n",
                "ports[0].storm-control.action",
            ),
            (
                "loop-detect: {interval: 0}\nports:\n  - name: a\n",
                "loop-detect.interval",
            ),
            (
                "loop-detect: {intervall: 2}\nports:\n  - name: a\n",
                "loop-detect",
            ),
        ] {
            let e = config::parse(y, "t.yaml").expect_err(y);
            assert!(
                e.errors
                    .iter()
                    .any(|x| x.field.starts_with(field) && x.line.is_some()),
                "{y}: want {field}, got {e}"
            );
        }
        let routed = "ports:\n  - name: r\n    mode: routed\n    addresses: [10.0.0.1/24]\n    storm-control: {broadcast: 1kpps}\n";
        let e = config::parse(routed, "t.yaml").expect_err("routed");
        assert!(e.to_string().contains("storm-control"), "{e}");
    }
}
