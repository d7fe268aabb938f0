//! The event manager: `event-manager:` policies ("on this event, do these
//! actions") run by one thread of the switch (docs/event-manager.md).
//!
//! Owns: sampling what triggers policies (link state, counters, CPU,
//! flows, table fill, timers, cron, log lines), hysteresis and rate
//! limits, running actions (each run in its own thread, actions in order,
//! a failing action logged and skipped), and the history `show event
//! manager` reads.
//! Must not: read the switch's state except through the management API
//! (the same answers `show` renders), or change the configuration except
//! through the same atomic apply as `config apply`. Nothing here can stop
//! the switch: every error becomes a logged, recorded result.

mod actions;
pub mod cpu;
mod detect;

use config::events::{EventManager as EmConfig, Policy};
use config::Config;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Answers one management API request with its envelope.
pub type Query = dyn Fn(&Value) -> Value + Send + Sync;
/// Applies a configuration atomically (as `config apply`).
pub type Apply = dyn Fn(Config) -> Result<Value, String> + Send + Sync;

/// What the engine works with.
pub struct Env {
    pub query: Arc<Query>,
    pub running: Arc<dyn Fn() -> Arc<Config> + Send + Sync>,
    pub apply: Arc<Apply>,
    pub stop: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// Runs kept for `show event manager history`.
pub const HISTORY: usize = 100;

/// What set a policy off.
#[derive(Clone, Debug)]
pub struct Trigger {
    /// One line for people: `sw1 down`, `cpu host 93% > 90%`.
    pub detail: String,
    /// The measured value, if any.
    pub value: Option<u64>,
    /// Placeholders for actions: `interface`, `source`, `message`.
    pub vars: Vec<(String, String)>,
    pub at: Instant,
}

/// The outcome of one action.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ActionResult {
    pub action: String,
    pub ok: bool,
    /// Output (show, clear, script) or the error.
    pub output: String,
    pub ms: u64,
}

/// One run of a policy.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Run {
    pub policy: String,
    pub trigger: String,
    /// Seconds since the epoch.
    pub time: u64,
    /// From the sample that saw the event to the first action's start.
    pub detect_to_action_us: u64,
    pub results: Vec<ActionResult>,
}

#[derive(Default)]
struct PolicyStatus {
    runs: u64,
    suppressed: u64,
    failures: u64,
    last_run: Option<Instant>,
    last_result: Option<String>,
    running: bool,
}

#[derive(Default)]
struct State {
    status: HashMap<String, PolicyStatus>,
    history: VecDeque<Run>,
    /// The last CPU sample (`show event manager`).
    cpu: Value,
}

/// The running event manager (shared with the API).
pub struct EventManager {
    state: Mutex<State>,
    env: Env,
    started: Instant,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl EventManager {
    /// Start the engine thread; it follows the running configuration (a
    /// `config apply` that changes `event-manager:` takes effect at the
    /// next sample).
    pub fn start(env: Env) -> std::io::Result<(Arc<EventManager>, std::thread::JoinHandle<()>)> {
        let em = Arc::new(EventManager {
            state: Mutex::new(State::default()),
            env,
            started: Instant::now(),
        });
        let e = em.clone();
        let h = std::thread::Builder::new()
            .name("events".into())
            .spawn(move || e.run())?;
        Ok((em, h))
    }

    fn run(self: &Arc<Self>) {
        let mut det = detect::Detector::new();
        let mut current: Option<EmConfig> = None;
        let mut next = Instant::now();
        while !(self.env.stop)() {
            let now = Instant::now();
            if now < next {
                std::thread::sleep((next - now).min(Duration::from_millis(50)));
                continue;
            }
            let cfg = (self.env.running)();
            let em = cfg.event_manager.clone();
            if em != current {
                det.reconfigure(em.as_ref());
                self.reconfigure(em.as_ref());
                if current.is_some() || em.is_some() {
                    tracing::info!(
                        "event manager: {} policies loaded",
                        em.as_ref().map(|e| e.policies.len()).unwrap_or(0)
                    );
                }
                current = em;
            }
            let Some(em) = &current else {
                next =
                    Instant::now() + Duration::from_millis(config::events::DEFAULT_POLL_MS as u64);
                continue;
            };
            next = now + Duration::from_millis(em.poll_interval_ms as u64);
            let fired = det.sample(em, &cfg, &*self.env.query);
            self.state.lock().unwrap_or_else(|e| e.into_inner()).cpu = det.cpu.json();
            for (i, t) in fired {
                if let Some(p) = em.policies.get(i) {
                    self.fire(p, em, t);
                }
            }
        }
    }

    fn reconfigure(&self, em: Option<&EmConfig>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let names: Vec<String> = em
            .map(|e| e.policies.iter().map(|p| p.name.clone()).collect())
            .unwrap_or_default();
        st.status.retain(|k, _| names.contains(k));
        for n in names {
            st.status.entry(n).or_default();
        }
    }

    /// A policy's event happened: run it unless rate-limited.
    fn fire(self: &Arc<Self>, p: &Policy, em: &EmConfig, t: Trigger) {
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let s = st.status.entry(p.name.clone()).or_default();
            let limited = s
                .last_run
                .is_some_and(|l| l.elapsed() < Duration::from_secs(p.min_interval as u64));
            if limited || s.running {
                s.suppressed += 1;
                tracing::debug!("event manager: {} suppressed ({})", p.name, t.detail);
                return;
            }
            s.running = true;
            s.last_run = Some(Instant::now());
        }
        tracing::info!("event manager: policy {} triggered: {}", p.name, t.detail);
        let (me, pc, em) = (self.clone(), p.clone(), em.clone());
        let spawned = std::thread::Builder::new()
            .name("event-run".into())
            .spawn(move || {
                let run = actions::run(&me.env, &em, &pc, &t);
                me.record(run);
            });
        if let Err(e) = spawned {
            tracing::warn!("event manager: cannot start a run: {e}");
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = st.status.get_mut(&p.name) {
                s.running = false;
            }
        }
    }

    fn record(&self, run: Run) {
        let failed = run.results.iter().filter(|r| !r.ok).count();
        tracing::info!(
            "event manager: policy {} ran: {} actions, {} failed",
            run.policy,
            run.results.len(),
            failed
        );
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let s = st.status.entry(run.policy.clone()).or_default();
        s.running = false;
        s.runs += 1;
        if failed > 0 {
            s.failures += 1;
        }
        s.last_result = Some(if failed == 0 {
            "ok".into()
        } else {
            format!("{failed} of {} actions failed", run.results.len())
        });
        if st.history.len() == HISTORY {
            st.history.pop_front();
        }
        st.history.push_back(run);
    }

    /// `show event manager`: the policies with their counts and last
    /// result, and the history (newest first).
    pub fn json(&self) -> Value {
        let cfg = (self.env.running)();
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let policies: Vec<Value> = cfg
            .event_manager
            .iter()
            .flat_map(|e| e.policies.iter())
            .map(|p| {
                let s = st.status.get(&p.name);
                json!({
                    "name": p.name,
                    "event": describe(p),
                    "actions": p.actions.iter().map(|a| a.kinds().join("")).collect::<Vec<_>>(),
                    "enabled": p.enabled,
                    "min-interval": p.min_interval,
                    "runs": s.map(|s| s.runs).unwrap_or(0),
                    "suppressed": s.map(|s| s.suppressed).unwrap_or(0),
                    "failures": s.map(|s| s.failures).unwrap_or(0),
                    "last-run-s-ago": s.and_then(|s| s.last_run).map(|l| l.elapsed().as_secs()),
                    "last-result": s.and_then(|s| s.last_result.clone()),
                })
            })
            .collect();
        let history: Vec<Value> = st
            .history
            .iter()
            .rev()
            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
            .collect();
        json!({
            "uptime": self.started.elapsed().as_secs(),
            "policies": policies,
            "history": history,
            "cpu": st.cpu,
        })
    }
}

/// One line for the event of a policy.
pub fn describe(p: &Policy) -> String {
    let e = &p.on;
    let thr = |what: String| match (e.above, e.rearm_below) {
        (Some(a), Some(r)) => format!("{what} > {a} (re-arm <= {r})"),
        (Some(a), None) => format!("{what} > {a}"),
        _ => what,
    };
    if let Some(i) = &e.interface {
        format!("interface {i} {}", e.state.as_deref().unwrap_or("change"))
    } else if let Some(c) = &e.counter {
        thr(if e.rate {
            format!("rate of {c}/s")
        } else {
            c.clone()
        })
    } else if let Some(c) = &e.cpu {
        thr(format!("cpu {c} %"))
    } else if let Some(f) = &e.flows {
        thr(format!("flows {f}"))
    } else if let Some(t) = &e.table {
        thr(format!("table {t} %"))
    } else if let Some(t) = e.timer {
        format!("every {t} s")
    } else if let Some(c) = &e.cron {
        format!("cron {c}")
    } else if let Some(l) = &e.log {
        format!("log /{l}/")
    } else {
        "none".into()
    }
}

#[doc(hidden)]
pub fn unix_time() -> u64 {
    unix_now()
}
