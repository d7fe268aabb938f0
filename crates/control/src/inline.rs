//! Inline service control on the control side (docs/inline.md): builds
//! the workers' engines from `service-control:`, owns the subscriber
//! table (the only writer), answers `show service-control` and
//! `show subscriber`, and takes bulk provisioning streams.

use config::service_control::{ServiceControl, UsageExport};
use config::Config;
use datapath::Shared;
use dpi::bandwidth::{Controller, NoQuotas, QuotaBook, QuotaState};
use dpi::engine::Engine;
use dpi::inline::InlinePlan;
use dpi::provision::{self, Mode};
use dpi::service::{Usage, UsageTable};
use dpi::subscriber::{Published, SubscriberDb};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Intervals of service history kept (an hour at the default 10 s).
const HISTORY_KEEP: usize = 360;

/// How often the control thread writes the quota state file (besides at
/// stop and restart): what a crash can lose.
const STATE_SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// The control side of inline service control.
pub struct InlineControl {
    shared: Arc<Shared>,
    workers: usize,
    db: Mutex<SubscriberDb>,
    published: Published,
    generation: AtomicU64,
    /// The section the running plan was built from, and its port names.
    running: Mutex<Option<Running>>,
    /// Bandwidth control and quota accounting of the running plan
    /// (generation, state); only the control thread and `show` take it.
    bandwidth: Mutex<Option<(u64, Controller)>>,
    /// Service history of the running plan (generation, ring), sampled by
    /// the control thread.
    history: Mutex<Option<(u64, dpi::report::History)>>,
    /// The usage exporter's counters (`usage_export.rs`).
    usage_export: Arc<dpi::usage_record::UsageExportCounters>,
    /// The quota state file when `service-control.state-file` is absent.
    default_state_file: std::path::PathBuf,
    /// One save at a time (the control thread's and a stop's).
    saving: Mutex<()>,
}

/// Quotas kept in the subscriber table.
struct DbBook<'a>(&'a mut SubscriberDb);

impl QuotaBook for DbBook<'_> {
    fn add_used(&mut self, slot: u32, gen: u16, bytes: u64) -> Option<QuotaState> {
        let out = self.0.add_used(slot, gen, bytes)?;
        Some(QuotaState {
            out,
            rate_bps: self
                .0
                .by_slot(slot, gen)
                .and_then(|s| s.limits.quota_rate_bps),
        })
    }
}

/// The running section and its pairs' port names (subscriber, network).
type Running = (ServiceControl, Vec<(String, String)>);

/// A plan built but not yet published (see [`InlineControl::prepare`]).
pub struct Prepared(Option<Option<Arc<InlinePlan>>>);

impl InlineControl {
    /// `default_state_file`: where quota accounts are kept unless the
    /// configuration says (see [`InlineControl::state_file`]).
    pub fn new(
        shared: Arc<Shared>,
        workers: usize,
        default_state_file: std::path::PathBuf,
    ) -> InlineControl {
        let db = SubscriberDb::new(1_000_000);
        let published = db.published();
        InlineControl {
            shared,
            workers,
            db: Mutex::new(db),
            published,
            generation: AtomicU64::new(0),
            running: Mutex::new(None),
            bandwidth: Mutex::new(None),
            usage_export: Arc::default(),
            history: Mutex::new(None),
            default_state_file,
            saving: Mutex::new(()),
        }
    }

    /// The quota state file of the running section (`None`: inline
    /// service control is off).
    pub fn state_file(&self) -> Option<std::path::PathBuf> {
        let r = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let (sc, _) = r.as_ref()?;
        Some(
            sc.state_file
                .clone()
                .unwrap_or_else(|| self.default_state_file.clone()),
        )
    }

    /// Restores the quota accounts the previous run left (at start, after
    /// the subscribers file). A missing file is a first start; a bad one
    /// is logged and ignored: every account starts again, nothing panics.
    pub fn load_quota_state(&self) {
        let Some(path) = self.state_file() else {
            return;
        };
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                tracing::warn!(
                    "quota state {}: {e}; quota accounts start again",
                    path.display()
                );
                return;
            }
        };
        match dpi::quota_state::parse(&data) {
            Ok(accounts) => {
                let mut db = self.db.lock().unwrap_or_else(|e| e.into_inner());
                let r = db.restore_accounts(accounts);
                tracing::info!(
                    "quota state {}: {} accounts restored, {} of subscribers not provisioned (kept until they are)",
                    path.display(),
                    r.restored,
                    r.unknown
                );
            }
            Err(e) => tracing::warn!(
                "quota state {}: {e}; ignored, quota accounts start again",
                path.display()
            ),
        }
    }

    /// Writes the quota accounts to the state file: a temporary file
    /// renamed over it, so a crash mid-write leaves the previous one.
    /// `wait`: take the subscriber table even if a bulk load holds it
    /// (stop, restart); otherwise a busy table skips this save. `sync`:
    /// to the disk before the rename (not for a restart's hand-over: the
    /// machine stays up, and forwarding waits for it).
    pub fn save_quota_state(&self, wait: bool, sync: bool) -> Result<usize, String> {
        let Some(path) = self.state_file() else {
            return Ok(0);
        };
        let _one = self.saving.lock().unwrap_or_else(|e| e.into_inner());
        let accounts = {
            let db = match self.db.try_lock() {
                Ok(db) => db,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) if !wait => return Ok(0),
                Err(std::sync::TryLockError::WouldBlock) => {
                    self.db.lock().unwrap_or_else(|e| e.into_inner())
                }
            };
            db.quota_accounts()
        };
        if accounts.is_empty() && !path.exists() {
            // No quota in use: no file to leave behind.
            return Ok(0);
        }
        let text = dpi::quota_state::format(&accounts);
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            if sync {
                f.sync_data()?;
            }
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("quota state {}: {e}", path.display())
        })?;
        Ok(accounts.len())
    }

    /// Counts the last bytes the workers passed (they have stopped) and
    /// saves the quota accounts: the end of a run, stop or restart
    /// (`sync`: see [`InlineControl::save_quota_state`]).
    pub fn final_quota_save(&self, sync: bool) {
        if self.shared.inline.load_full().is_none() {
            return;
        }
        let t0 = std::time::Instant::now();
        {
            // The table before the controller, as `show` takes them (the
            // control thread only tries the table).
            let mut db = self.db.lock().unwrap_or_else(|e| e.into_inner());
            let mut bw = self.bandwidth.lock().unwrap_or_else(|e| e.into_inner());
            if let (Some(plan), Some((g, c))) = (self.shared.inline.load_full(), bw.as_mut()) {
                if *g == plan.generation {
                    c.tick(&plan.stats, &plan.levels, 1000, &mut DbBook(&mut db));
                }
            }
        }
        match self.save_quota_state(true, sync) {
            Ok(n) => tracing::info!(
                "quota state: {n} accounts saved in {:.1} ms",
                t0.elapsed().as_secs_f64() * 1e3
            ),
            Err(e) => tracing::warn!("{e}"),
        }
    }

    /// The bandwidth control thread's body: one interval of
    /// [`Controller::tick`] per period until `stop` (docs/inline.md,
    /// "Bandwidth control"). No lock a worker takes; the subscriber table
    /// only with `try_lock` (a bulk load in progress delays quota
    /// accounting, never the sharing).
    pub fn run_control(&self, stop: &dyn Fn() -> bool) {
        let mut last = std::time::Instant::now();
        let mut saved = last;
        let mut save_failed = false;
        while !stop() {
            let now = std::time::Instant::now();
            let period = self.control_tick(now.duration_since(last).as_micros() as u64);
            last = now;
            if now.duration_since(saved) >= STATE_SAVE_EVERY {
                saved = now;
                // Logged once per failure streak, not every 10 s.
                match self.save_quota_state(false, true) {
                    Ok(_) => save_failed = false,
                    Err(e) if !save_failed => {
                        save_failed = true;
                        tracing::warn!("{e}");
                    }
                    Err(_) => {}
                }
            }
            std::thread::sleep(period);
        }
    }

    /// One control interval of `dt_us`; returns the time to the next.
    pub fn control_tick(&self, dt_us: u64) -> std::time::Duration {
        let mut bw = self.bandwidth.lock().unwrap_or_else(|e| e.into_inner());
        let Some(plan) = self.shared.inline.load_full() else {
            *bw = None;
            return std::time::Duration::from_millis(100);
        };
        if bw.as_ref().map(|(g, _)| *g) != Some(plan.generation) {
            *bw = Some((
                plan.generation,
                Controller::new(plan.policy.bandwidth.clone(), &plan.stats),
            ));
        }
        let Some((_, c)) = bw.as_mut() else {
            return std::time::Duration::from_millis(100);
        };
        let t0 = std::time::Instant::now();
        match self.db.try_lock() {
            Ok(mut db) => c.tick(&plan.stats, &plan.levels, dt_us, &mut DbBook(&mut db)),
            Err(_) => c.tick(&plan.stats, &plan.levels, dt_us, &mut NoQuotas),
        }
        // A huge usage table must not eat a core: at most a fifth of the
        // time goes to the scan.
        drop(bw);
        self.sample_history(&plan);
        let took = t0.elapsed();
        std::time::Duration::from_millis(plan.policy.bandwidth.interval_ms).max(took * 4)
    }

    /// The usage exporter's counters.
    pub fn usage_export_counters(&self) -> Arc<dpi::usage_record::UsageExportCounters> {
        self.usage_export.clone()
    }

    /// The running plan and its `usage-export` settings.
    pub fn usage_export_view(&self) -> (Option<Arc<InlinePlan>>, Option<UsageExport>) {
        let cfg = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|(sc, _)| sc.usage_export.clone());
        (self.shared.inline.load_full(), cfg)
    }

    /// Subscriber ids of (slot, generation) pairs, under one lock of the
    /// subscriber table (`None`: no subscriber, or deleted since).
    pub fn subscriber_ids(&self, keys: impl Iterator<Item = (u32, u16)>) -> Vec<Option<String>> {
        let db = self.db.lock().unwrap_or_else(|e| e.into_inner());
        keys.map(|(slot, gen)| {
            if slot == dpi::flow::NONE {
                None
            } else {
                db.by_slot(slot, gen).map(|s| s.id.to_string())
            }
        })
        .collect()
    }

    /// One sample of the service history (a new plan starts a new one).
    fn sample_history(&self, plan: &InlinePlan) {
        let interval_ms = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(10_000, |(sc, _)| u64::from(sc.report_interval_s) * 1000);
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        if h.as_ref().map(|(g, h)| (*g, h.interval_ms())) != Some((plan.generation, interval_ms)) {
            *h = Some((
                plan.generation,
                dpi::report::History::new(interval_ms, HISTORY_KEEP),
            ));
        }
        if let Some((_, h)) = h.as_mut() {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis() as u64;
            h.sample(now_ms, &plan.stats, plan.policy.services.len());
        }
    }

    /// `show service-control history`: the closed intervals, oldest first.
    pub fn history(&self) -> Result<Value, String> {
        let Some(plan) = self.shared.inline.load_full() else {
            return Ok(json!({"mode": "off", "intervals": []}));
        };
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, h)) = h.as_ref().filter(|(g, _)| *g == plan.generation) else {
            return Ok(json!({"interval-s": 0, "keep": HISTORY_KEEP, "intervals": []}));
        };
        let names = &plan.policy.services;
        let rows: Vec<Value> = h
            .rows()
            .map(|r| {
                json!({
                    "start-ms": r.start_ms,
                    "length-ms": r.len_ms,
                    "samples": r.samples,
                    "services": r.services.iter().enumerate().map(|(i, s)| json!({
                        "name": names.name(i as u16),
                        "sessions-min": s.sessions_min,
                        "sessions-avg": (s.sessions_avg * 10.0).round() / 10.0,
                        "sessions-max": s.sessions_max,
                        "up-bps": s.bps[0],
                        "down-bps": s.bps[1],
                        "dropped-up-bps": s.dropped_bps[0],
                        "dropped-down-bps": s.dropped_bps[1],
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        Ok(json!({
            "interval-s": h.interval_ms() / 1000,
            "keep": HISTORY_KEEP,
            "intervals": rows,
        }))
    }

    /// Starts a subscriber's quota account again (`subscriber-reset-usage`).
    pub fn reset_usage(&self, id: &str) -> Result<Value, String> {
        let mut db = self.db.lock().unwrap_or_else(|e| e.into_inner());
        db.reset_used(id).map_err(|e| e.to_string())?;
        Ok(json!({"id": id, "used-bytes": 0}))
    }

    /// Builds what `cfg` asks for without publishing it: an error leaves
    /// the switch untouched. Unchanged section: nothing to do (flows and
    /// counters live on).
    pub fn prepare(&self, cfg: &Config, bypass: bool) -> Result<Prepared, String> {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let Some(sc) = &cfg.service_control else {
            return Ok(Prepared(if running.is_some() { Some(None) } else { None }));
        };
        if running.as_ref().is_some_and(|(r, _)| r == sc) {
            return Ok(Prepared(None));
        }
        drop(running);
        let t0 = std::time::Instant::now();
        let ndpi = dpi::ndpi::Ndpi::new().map_err(|e| format!("service-control: {e}"))?;
        let policy = Arc::new(
            sc.policy(&ndpi)
                .map_err(|e| format!("service-control: {e}"))?,
        );
        drop(ndpi);
        let mut pairs = Vec::new();
        for p in &sc.inline {
            let s = cfg
                .port_index(&p.subscriber_port)
                .ok_or("service-control: unknown port")?;
            let n = cfg
                .port_index(&p.network_port)
                .ok_or("service-control: unknown port")?;
            pairs.push((s as u16, n as u16));
        }
        {
            let mut db = self.db.lock().unwrap_or_else(|e| e.into_inner());
            db.set_max(sc.max_subscribers as usize);
            if let Some(path) = &sc.subscribers_file {
                let f = std::fs::File::open(path).map_err(|e| {
                    format!("service-control.subscribers-file {}: {e}", path.display())
                })?;
                let r = provision::load(&mut db, std::io::BufReader::new(f), Mode::Atomic);
                if !r.applied {
                    return Err(format!(
                        "service-control.subscribers-file {}: {}",
                        path.display(),
                        r.render().trim_end()
                    ));
                }
                tracing::info!(
                    "subscribers: {} loaded from {}",
                    r.subscribers,
                    path.display()
                );
            }
        }
        let ecfg = sc.engine_config();
        let mut engines = Vec::with_capacity(self.workers);
        for _ in 0..self.workers {
            engines.push(
                Engine::new(ecfg, policy.clone()).map_err(|e| format!("service-control: {e}"))?,
            );
        }
        let mut queues = Vec::new();
        if let Some(u) = &sc.usage_export {
            for e in &mut engines {
                let q = Arc::new(dpi::usage_record::UsageQueue::new(u.queue as usize));
                e.set_usage_export(q.clone());
                e.set_active_timeout(u64::from(u.active_timeout) * 1000);
                queues.push(q);
            }
        }
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let mut plan = InlinePlan::new(generation, &pairs, engines, self.published.clone(), policy);
        plan.usage_queues = queues;
        plan.set_bypass(bypass);
        tracing::info!(
            "service-control: {} engine(s) of {} flows built in {} ms ({} MB each)",
            self.workers,
            plan.flow_capacity,
            t0.elapsed().as_millis(),
            plan.engine_memory >> 20
        );
        let names = sc
            .inline
            .iter()
            .map(|p| (p.subscriber_port.clone(), p.network_port.clone()))
            .collect();
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = Some((sc.clone(), names));
        Ok(Prepared(Some(Some(Arc::new(plan)))))
    }

    /// Publishes a prepared plan (one pointer store).
    pub fn commit(&self, p: Prepared) {
        match p.0 {
            None => {}
            Some(None) => {
                *self.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
                self.shared.inline.store(None);
            }
            Some(Some(plan)) => self.shared.inline.store(Some(plan)),
        }
    }

    /// Bypass: frames pass between the pairs without the engine.
    pub fn set_bypass(&self, on: bool) {
        if let Some(p) = self.shared.inline.load_full() {
            p.set_bypass(on);
        }
    }

    /// Loads a provisioning stream (the API's streamed request, a file).
    pub fn provision(&self, input: impl std::io::BufRead, mode: Mode) -> Value {
        let mut db = self.db.lock().unwrap_or_else(|e| e.into_inner());
        let t0 = std::time::Instant::now();
        let r = provision::load(&mut db, input, mode);
        json!({
            "lines": r.lines, "added": r.added, "replaced": r.replaced, "removed": r.removed,
            "errors": r.error_count, "messages": r.errors, "applied": r.applied,
            "subscribers": r.subscribers, "ms": t0.elapsed().as_millis() as u64,
        })
    }

    fn usage_json(name: &str, u: &[&Usage]) -> Value {
        let s = |f: &dyn Fn(&Usage) -> u64| -> u64 { u.iter().map(|x| f(x)).sum() };
        json!({
            "name": name,
            "flows": s(&|x| x.flows.get()),
            "active": s(&|x| x.active.get()),
            "packets-up": s(&|x| x.packets[0].get()),
            "packets-down": s(&|x| x.packets[1].get()),
            "bytes-up": s(&|x| x.bytes[0].get()),
            "bytes-down": s(&|x| x.bytes[1].get()),
            "dropped-up": s(&|x| x.dropped_packets[0].get()),
            "dropped-down": s(&|x| x.dropped_packets[1].get()),
        })
    }

    /// `show service-control [applications]`.
    pub fn show(&self, applications: bool) -> Result<Value, String> {
        let Some(plan) = self.shared.inline.load_full() else {
            return Ok(json!({"mode": "off", "applications": [], "services": []}));
        };
        let st = &plan.stats;
        let e = |f: &dyn Fn(&dpi::service::EngineCounters) -> u64| -> u64 {
            st.iter().map(|s| f(&s.engine)).sum()
        };
        let policy = &plan.policy;
        if applications {
            let mut rows = Vec::new();
            for app in 0..st.first().map(|s| s.apps.len()).unwrap_or(0) {
                let us: Vec<&Usage> = st.iter().map(|s| &s.apps[app]).collect();
                if us.iter().all(|u| u.flows.get() == 0) {
                    continue;
                }
                let mut v = Self::usage_json(policy.app_name(app as u16), &us);
                v["service"] = json!(policy.services.name(policy.service_of(app as u16)));
                rows.push(v);
            }
            return Ok(json!({"applications": rows}));
        }
        let services: Vec<Value> = (0..policy.services.len())
            .map(|i| {
                let us: Vec<&Usage> = st.iter().map(|s| &s.services[i]).collect();
                Self::usage_json(policy.services.name(i as u16), &us)
            })
            .collect();
        let db = self.db.lock().unwrap_or_else(|e| e.into_inner());
        let per = db.per_package().0;
        let pairs: Vec<Value> = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(_, names)| {
                names
                    .iter()
                    .map(|(s, n)| json!({"subscriber-port": s, "network-port": n}))
                    .collect()
            })
            .unwrap_or_default();
        Ok(json!({
            "mode": if plan.bypassed() { "bypass" } else { "inline" },
            "pairs": pairs,
            "workers": st.len(),
            "ndpi": dpi::ndpi::revision(),
            "packets": e(&|c| c.packets.get()),
            "not-ip": e(&|c| c.not_ip.get()),
            "flows": {
                "live": e(&|c| c.flows_live.get()),
                "capacity": plan.flow_capacity * st.len(),
                "created": e(&|c| c.flows_created.get()),
                "ended": e(&|c| c.flows_ended.get()),
                "expired": e(&|c| c.expired.get()),
                "evicted-idle": e(&|c| c.evicted_idle.get()),
                "refused-full": e(&|c| c.refused_full.get()),
                "unclassified-packets": e(&|c| c.unclassified_packets.get()),
                "bytes-per-flow": dpi::flow::BYTES_PER_FLOW,
                "memory-bytes": plan.engine_memory * st.len(),
                "huge-bytes": tables::huge::huge_bytes_in(&plan.huge_ranges),
            },
            "classification": {
                "classifying": e(&|c| c.classifying.get()),
                "slots": plan.classify_slots * st.len(),
                "slot-bytes": dpi::ndpi::flow_state_bytes(),
                "busy": e(&|c| c.classify_busy.get()),
                "by-signature": e(&|c| c.by_signature.get()),
                "by-ndpi": e(&|c| c.by_ndpi.get()),
                "by-guess": e(&|c| c.by_guess.get()),
                "unknown": e(&|c| c.unknown.get()),
                "ndpi-packets": e(&|c| c.ndpi_packets.get()),
            },
            "subscribers": {
                "total": db.len(), "max": db.max(),
                "gold": per[0], "silver": per[1], "bronze": per[2],
                "no-subscriber-flows": e(&|c| c.no_subscriber.get()),
                "usage-full": e(&|c| c.usage_full.get()),
            },
            "packages": dpi::subscriber::Package::ALL.iter().map(|p| {
                let i = *p as usize;
                json!({
                    "name": p.name(),
                    "weight": policy.bandwidth.weights[i],
                    "cap-up-bps": policy.bandwidth.caps[i][0],
                    "cap-down-bps": policy.bandwidth.caps[i][1],
                })
            }).collect::<Vec<_>>(),
            "services": services,
            "controllers": self.controllers_json(&plan),
            "quota-dropped-packets": e(&|c| c.quota_dropped.get()),
            "cap-dropped-packets": e(&|c| c.cap_dropped.get()),
            "classifying-dropped-packets": e(&|c| c.classifying_dropped.get()),
            "classifying-limit-bps": {
                "up": policy.bandwidth.classifying[0],
                "down": policy.bandwidth.classifying[1],
            },
            "uncontrolled-packets": e(&|c| c.uncontrolled_packets.get()),
            "usage-export": self.usage_export_json(
                e(&|c| c.export_lost.get()),
                e(&|c| c.interim_records.get()),
            ),
        }))
    }

    /// The usage exporter's state (`null` when not configured).
    fn usage_export_json(&self, lost: u64, interim: u64) -> Value {
        let (_, cfg) = self.usage_export_view();
        let Some(u) = cfg else {
            return Value::Null;
        };
        let c = &self.usage_export;
        json!({
            "collector": u.collector,
            "domain-id": u.domain_id,
            "flows": c.flows.load(Ordering::Relaxed),
            "records": c.records.load(Ordering::Relaxed),
            "messages": c.messages.load(Ordering::Relaxed),
            "send-errors": c.send_errors.load(Ordering::Relaxed),
            "lost": lost,
            "active-timeout-s": u.active_timeout,
            "interim-records": interim,
        })
    }

    /// Each bandwidth controller as of the last control interval.
    fn controllers_json(&self, plan: &InlinePlan) -> Vec<Value> {
        let bw = self.bandwidth.lock().unwrap_or_else(|e| e.into_inner());
        let status = match bw.as_ref() {
            Some((g, c)) if *g == plan.generation => c.status().to_vec(),
            _ => Vec::new(),
        };
        let policy = &plan.policy;
        let mut rows = Vec::new();
        for s in 0..policy.services.len() as u16 {
            for dir in 0..2 {
                let limit = policy.bandwidth.limit_bytes(s, dir) * 8;
                if limit == 0 {
                    continue;
                }
                let st = status
                    .iter()
                    .find(|c| c.service == s && c.dir == dir)
                    .cloned()
                    .unwrap_or_default();
                rows.push(json!({
                    "service": policy.services.name(s),
                    "direction": if dir == 0 { "up" } else { "down" },
                    "limit-bps": limit,
                    "rate-bps": st.rate_bps,
                    "offered-bps": st.offered_bps,
                    "share-per-weight-bps": st.level_bps,
                    "dropped-packets": st.dropped_packets,
                    "dropped-bytes": st.dropped_bytes,
                    "active": {"gold": st.active[0], "silver": st.active[1], "bronze": st.active[2]},
                }));
            }
        }
        rows
    }

    /// `show subscriber ID`.
    pub fn subscriber(&self, id: &str) -> Result<Value, String> {
        let db = self.db.lock().unwrap_or_else(|e| e.into_inner());
        let (s, link) = db.get(id).ok_or_else(|| format!("no subscriber '{id}'"))?;
        let mut services = Vec::new();
        let mut history = Vec::new();
        let mut total = Value::Null;
        let mut rate = [0u64; 2];
        let mut quota_rate = s.limits.quota_rate_bps;
        if let Some(plan) = self.shared.inline.load_full() {
            let policy = &plan.policy;
            quota_rate = quota_rate.or(Some(policy.bandwidth.quota_rate));
            // The total entry: every frame, classified or not.
            let key = UsageTable::key(link.slot, link.gen, dpi::service::TOTAL);
            let mut us = Vec::new();
            for st in plan.stats.iter() {
                if let Some(u) = st.usage.find(key) {
                    us.push(u);
                }
                if let Some(b) = st.usage.find_bucket(key) {
                    // Every worker's entry holds the subscriber's sum.
                    for (d, r) in rate.iter_mut().enumerate() {
                        *r = (*r).max(b.passed_rate[d].get() * 8);
                    }
                }
            }
            if !us.is_empty() {
                total = Self::usage_json("(all)", &us);
            }
            history = self.subscriber_history(&plan, link.slot, link.gen);
            for svc in 0..policy.services.len() as u16 {
                let key = UsageTable::key(link.slot, link.gen, svc);
                let us: Vec<&Usage> = plan
                    .stats
                    .iter()
                    .filter_map(|st| st.usage.find(key))
                    .collect();
                if !us.is_empty() {
                    services.push(Self::usage_json(policy.services.name(svc), &us));
                }
            }
        }
        let used = db.used(link.slot, link.gen);
        let weight = self
            .shared
            .inline
            .load_full()
            .map_or(s.package.weight(), |p| {
                p.policy.bandwidth.weights[s.package as usize]
            });
        Ok(json!({
            "id": &*s.id,
            "package": s.package.name(),
            "weight": weight,
            "quota-bytes": s.quota_bytes,
            "used-bytes": used,
            "remaining-bytes": s.quota_bytes.map(|q| q.saturating_sub(used)),
            "quota-exceeded": s.quota_bytes.is_some_and(|q| used >= q),
            "quota-exceeded-rate-bps": quota_rate,
            "quota-period-s": s.limits.quota_period_s,
            // Unix seconds; kept across restarts (none before traffic).
            "quota-period-start-s": db.period_start(link.slot, link.gen),
            // Seconds until the next period (none before traffic counts).
            "quota-next-period-in-s": s.limits.quota_period_s.zip(db.period_start(link.slot, link.gen)).map(|(p, start)| {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                p - now.saturating_sub(start) % p
            }),
            "cap-up-bps": s.limits.cap_bps[0],
            "cap-down-bps": s.limits.cap_bps[1],
            "rate-up-bps": rate[0],
            "rate-down-bps": rate[1],
            "addresses": s.prefixes.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            "services": services,
            "total": total,
            "history": history,
        }))
    }

    /// The subscriber's bandwidth per service per closed interval of the
    /// service history (the newest [`dpi::report::SUBSCRIBER_KEEP`]).
    fn subscriber_history(&self, plan: &InlinePlan, slot: u32, gen: u16) -> Vec<Value> {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, h)) = h.as_ref().filter(|(g, _)| *g == plan.generation) else {
            return Vec::new();
        };
        let names = &plan.policy.services;
        h.rows()
            .filter_map(|r| {
                let i = r
                    .subscribers
                    .partition_point(|x| (x.slot, x.gen) < (slot, gen));
                let mine: Vec<Value> = r.subscribers[i..]
                    .iter()
                    .take_while(|x| (x.slot, x.gen) == (slot, gen))
                    .map(|x| {
                        let name = if x.service == dpi::service::TOTAL {
                            "(all)"
                        } else {
                            names.name(x.service)
                        };
                        json!({
                            "name": name,
                            "up-bps": x.bps[0],
                            "down-bps": x.bps[1],
                            "dropped-up-bps": x.dropped_bps[0],
                            "dropped-down-bps": x.dropped_bps[1],
                        })
                    })
                    .collect();
                (!mine.is_empty()).then(
                    || json!({"start-ms": r.start_ms, "length-ms": r.len_ms, "services": mine}),
                )
            })
            .collect()
    }
}
