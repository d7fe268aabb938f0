//! `lanyard run`: start the switch in the foreground and run until SIGINT
//! or SIGTERM.
//!
//! Startup order: validate the whole config (nothing starts on a bad
//! file), build the first snapshot, install static entries, start workers,
//! the learner and the supervisor, attach ports, open the API, then print
//! `ready`. Shutdown stops every thread, closes every socket and removes the
//! API socket file.

use crate::api::{self, ApiState};
use crate::ports::{PortState, Supervisor};
use config::build;
use config::{self, Config};
use datapath::{Mailbox, Shared, Worker, WorkerOptions};
use pipeline::WorkerCounters;
use protocols::learn::{Learner, LearnerInbox, LearnerStats};
use services::export::{ExportConfig, ExportVersion, FlowExporter};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tables::{MacEntry, MacKey};

/// Learning events the queue holds before workers start dropping them.
const LEARN_QUEUE: usize = 1 << 16;

/// Environment of a restarted switch: when its predecessor stopped
/// forwarding (CLOCK_MONOTONIC, ns).
const RESTART_ENV: &str = "LANYARD_RESTARTED_AT_NS";
/// Sockets handed over by the predecessor (`worker:port:rx:state;…`).
const HANDOVER_ENV: &str = "LANYARD_HANDOVER";
/// Set by a restarting virtual-switch node that was paired with its
/// multichassis members up: the new image starts warm (keeps carrying).
const VSWITCH_WARM_ENV: &str = "LANYARD_VSWITCH_WARM";

fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime writes into a valid timespec.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Installs the process's log subscriber from `management.logging` (at
/// start; a changed filter or syslog destination takes effect at the
/// next start or restart).
pub fn start_logging(l: &config::Logging) -> Result<(), String> {
    let syslog = match &l.syslog {
        Some(s) => Some(s.settings()?),
        None => None,
    };
    logging::init(&logging::LogSettings {
        filter: l.filter.clone(),
        syslog,
    })
    .map(|_| ())
}

/// The highest soft limit on open files asked for: the kernel's default
/// `fs.nr_open` (a hard limit of "unlimited" cannot be the soft limit).
const OPEN_FILES_CAP: u64 = 1 << 20;

/// About how many descriptors the switch holds for `cfg`: per port its
/// receiving socket, a transmit socket on every other worker and, on
/// AF_XDP, the XDP program, its map and link and the UMEM; per routed
/// interface its TAP twin, the twin's carrier handle and the socket that
/// injects what the kernel sends; and a margin for the rest (API, FPM,
/// netlink, logs, epoll sets). 410 AF_XDP routed ports on two workers
/// held 3,715 at start (9 a port).
pub fn open_files_needed(cfg: &Config) -> u64 {
    let ports = cfg.ports.len() as u64;
    let routed = cfg.l3_interfaces().len() as u64;
    ports * (u64::from(cfg.switch.workers.max(1)) + 4) + routed * 3 + 256
}

/// Raises the soft limit on open files to the hard limit (at most
/// [`OPEN_FILES_CAP`]); returns the soft limit before and after. A
/// switch holds several descriptors per port ([`open_files_needed`]): 410
/// routed ports took 3,715 on two workers, far over the 1,024 most shells
/// and service managers give by default. Nothing in Lanyard uses select(2), so a high
/// limit costs nothing.
pub fn raise_open_files_limit() -> std::io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the rlimit passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = r.rlim_cur;
    let target = r.rlim_max.min(OPEN_FILES_CAP);
    if before >= target {
        return Ok((before, before));
    }
    r.rlim_cur = target;
    // SAFETY: setrlimit reads the rlimit passed; the soft limit is not
    // above the hard one.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((before, target))
}

/// Run the switch described by the file at `path` until a signal arrives.
///
/// `lanyard restart` (e.g. after installing a new binary) stops the
/// workers, leaves the learned addresses in a file beside the API socket
/// and re-executes the binary in place (same PID, same arguments); the
/// new image reads the configuration again, restores the addresses and
/// reports how long forwarding was interrupted.
///
/// `socket` (from `--socket` or `LANYARD_SOCKET`) replaces the file's
/// `management.socket`.
pub fn run(path: &Path, socket: Option<&Path>) -> Result<(), String> {
    let cfg = config::load(path).map_err(|e| e.to_string())?;
    start_logging(&cfg.management.logging)?;
    let need = open_files_needed(&cfg);
    match raise_open_files_limit() {
        Ok((before, after)) => {
            if after > before {
                tracing::info!("open files limit raised from {before} to {after}");
            }
            if after < need {
                tracing::warn!(
                    "{} ports may need about {need} open files but the limit is {after}: \
                     raise the hard limit (LimitNOFILE= in the service, ulimit -Hn)",
                    cfg.ports.len()
                );
            }
        }
        Err(e) => tracing::warn!("open files limit: {e}"),
    }
    let opts = StartOptions {
        socket: socket.map(Path::to_path_buf),
    };
    // Forked before the switch's threads and sockets exist, so it holds
    // none of them (the instance lock above all).
    let guardian = crate::guardian::Plan::of(&cfg).and_then(|plan| {
        match crate::guardian::Guardian::spawn(&plan) {
            Ok(g) => {
                tracing::info!(
                    "virtual-switch: guardian pid {} takes [{}] down if this process ends without a hand-over",
                    g.pid(),
                    plan.ports.join(", ")
                );
                Some(g)
            }
            Err(e) => {
                tracing::warn!("virtual-switch: no guardian ({e}): a crash is seen at the LACP timeout");
                None
            }
        }
    });
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, term.clone()).map_err(|e| format!("signal: {e}"))?;
    }
    let sw = Switch::start_with(cfg, opts)?;
    let macs = crate::apply::mac_state_path(&sw.socket);
    if let Some(t0) = std::env::var(RESTART_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        tracing::info!(
            "restart: forwarding resumed {:.1} ms after it stopped",
            monotonic_ns().saturating_sub(t0) as f64 / 1e6
        );
    }
    while !term.load(Ordering::Relaxed) {
        if crate::api::restart_requested() {
            return restart(sw, &macs, guardian);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    tracing::info!("shutting down");
    sw.stop();
    // A stopped node forwards nothing: the guardian (if any) takes its
    // links down as this process exits, so neighbours fail over at once.
    drop(guardian);
    Ok(())
}

/// Stop forwarding, hand the ports and the learned addresses over, exec.
fn restart(
    sw: Switch,
    macs: &Path,
    guardian: Option<crate::guardian::Guardian>,
) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    // Workers hand their sockets over at the top of their loop (the
    // rings keep receiving meanwhile) and stop for good.
    let t0 = monotonic_ns();
    sw.shared.handover.store(true, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    while sw.shared.handed_workers.load(Ordering::SeqCst) < sw.workers
        && std::time::Instant::now() < deadline
    {
        std::thread::yield_now();
    }
    let handed = sw
        .shared
        .handed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .join(";");
    let n = crate::apply::save_macs(&sw.shared.tables.load(), macs).unwrap_or(0);
    // zebra's routes stay installed until it reconnects and replays.
    let fpm_journal = sw.socket.with_extension("fpm");
    let routes = sw
        .router
        .as_ref()
        .and_then(|r| r.save_fpm_journal(&fpm_journal).ok())
        .unwrap_or(0);
    // zebra never re-installs its pseudowires after a restart (it does
    // not notice one): their labels go with us.
    let pw_journal = sw.socket.with_extension("pw");
    let pws = sw
        .router
        .as_ref()
        .and_then(|r| r.pseudowires.as_ref())
        .and_then(|m| m.save(&pw_journal).ok())
        .unwrap_or(0);
    if pws > 0 {
        tracing::info!("restart: {pws} pseudowires signalled by LDP saved");
    }
    // The routed interfaces' twins stay: FRR sees no interface change.
    let taps = sw
        .router
        .as_ref()
        .map(|r| r.hand_over_taps())
        .unwrap_or_default();
    // LACP goes on from where it stands: partners keep every member.
    let lacp = sw
        .ha
        .save_lacp(&protocols::ha::lacp_state_path(&sw.socket))
        .unwrap_or(0);
    // The workers have stopped: their last bytes are counted and the
    // quota accounts written for the new image.
    sw.inline.final_quota_save(false);
    let exe = std::env::args_os()
        .next()
        .filter(|a| a.to_string_lossy().contains('/'))
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .ok_or("restart: cannot find the binary")?;
    tracing::info!(
        "restart: {n} addresses, {lacp} LACP members and {routes} routes from zebra saved, {} sockets and {} TAP twins handed over, executing {}",
        handed.split(';').filter(|x| !x.is_empty()).count(),
        taps.split(';').filter(|x| !x.is_empty()).count(),
        exe.display()
    );
    let _ = std::fs::remove_file(&sw.socket);
    // The lock goes with us through exec: no other switch can claim the
    // socket while it is gone.
    let lock_fd = sw.lock.keep_across_exec();
    // A planned restart keeps every link up; the new image forks its own.
    if let Some(g) = guardian {
        g.handover();
    }
    let warm = protocols::vswitch::PairRunner::restart_warm(
        &sw.vswitch.lock().unwrap_or_else(|e| e.into_inner()),
    );
    if warm {
        tracing::info!(
            "restart: paired with the multichassis members up: the new image starts warm"
        );
    }
    let err = std::process::Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(RESTART_ENV, t0.to_string())
        .env(
            routing::router::NETNS_MADE_ENV,
            sw.router
                .as_ref()
                .map(|r| r.namespaces_made().join(","))
                .unwrap_or_default(),
        )
        .env(HANDOVER_ENV, handed)
        .env(routing::router::TAP_HANDOVER_ENV, taps)
        .env(routing::router::FPM_JOURNAL_ENV, &fpm_journal)
        .env(routing::pseudowire::PW_JOURNAL_ENV, &pw_journal)
        .env(VSWITCH_WARM_ENV, if warm { "1" } else { "" })
        .env(crate::instance::LOCK_FD_ENV, lock_fd.to_string())
        .exec();
    Err(format!("restart: exec {}: {err}", exe.display()))
}

/// A running switch.
pub struct Switch {
    shared: Arc<Shared>,
    /// The flow exporter, stopped after the workers (which hand it their
    /// caches' flows as they stop).
    exporter: Arc<Mutex<Option<FlowExporter>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    socket: std::path::PathBuf,
    /// True once the API socket is bound: only then is it ours to remove.
    bound: bool,
    workers: usize,
    /// The claim on the management socket; released last.
    lock: crate::instance::InstanceLock,
    /// Inline service control: its quota accounts are saved at the end.
    inline: Arc<crate::inline::InlineControl>,
    /// The router: at stop, the VRF namespaces it made go.
    router: Option<Arc<routing::router::Router>>,
    /// Link protection and LACP: a restart leaves the members' LACP state.
    ha: Arc<protocols::ha::Ha>,
    /// The virtual-switch pair's published state (`Null` without one): a
    /// restart of a paired node starts its successor warm.
    vswitch: Arc<Mutex<serde_json::Value>>,
    /// VRRP groups: at stop, masters resign (priority 0) first.
    vrrp: Option<protocols::vrrp::VrrpHandle>,
}

/// The quota state file unless `service-control.state-file` says: beside
/// the management socket, as the learned addresses of a restart, but
/// kept (a plain stop and start needs it too).
pub fn quota_state_path(socket: &Path) -> std::path::PathBuf {
    socket.with_extension("quota")
}

/// How [`Switch::start_with`] differs from the configuration file.
#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// Management socket instead of `management.socket` (`lanyard run
    /// --socket`, `LANYARD_SOCKET`).
    pub socket: Option<std::path::PathBuf>,
}

impl Switch {
    /// Start the switch `cfg` describes (see the module documentation).
    pub fn start(cfg: Config) -> Result<Switch, String> {
        Switch::start_with(cfg, StartOptions::default())
    }

    pub fn start_with(mut cfg: Config, start: StartOptions) -> Result<Switch, String> {
        let t_start = std::time::Instant::now();
        if let Some(s) = &start.socket {
            cfg.management.socket = s.clone();
        }
        // Before anything else: a switch already running with this socket
        // keeps its socket, ports and TAPs untouched.
        let lock = crate::instance::claim(&cfg.management.socket)?;
        let tables = build::initial_tables(&cfg);
        // Static entries go in before any thread runs: the learner is not
        // yet the table's writer.
        for s in &cfg.static_macs {
            let port = cfg
                .port_index(&s.port)
                .ok_or("static mac on unknown port")? as u16;
            tables.mac.upsert(
                MacKey::new(s.vlan, s.mac.octets()),
                MacEntry {
                    port,
                    is_static: true,
                    seen: 0,
                },
            );
        }
        // A VLAN interface's MAC lives on its port to the router, so frames
        // to it are switched there, never flooded.
        for ifc in cfg.l3_interfaces() {
            if let Some(vlan) = ifc.vlan {
                tables.mac.upsert(
                    MacKey::new(vlan, routing::router::router_mac(&cfg, &ifc)),
                    MacEntry {
                        port: ifc.port,
                        is_static: true,
                        seen: 0,
                    },
                );
            }
        }
        let shared = Arc::new(Shared::new(tables, LEARN_QUEUE));
        let restored =
            crate::apply::load_macs(&crate::apply::mac_state_path(&cfg.management.socket));
        shared
            .copp
            .store(Arc::new(cfg.control_plane_policing.to_config()));
        if let Some(m) = build::mirror_table(&cfg) {
            shared.mirrors.store(Some(Arc::new(m)));
        }
        let nworkers = cfg.switch.workers.max(1) as usize;
        // Services are compiled before any worker runs: the first frame
        // already meets its ACLs.
        if services::configured(&cfg) {
            let t0 = std::time::Instant::now();
            let s = services::compile(&cfg, nworkers)?;
            tracing::info!("services compiled in {} ms", t0.elapsed().as_millis());
            shared.services.store(Some(Arc::new(s)));
        }
        // Inline engines too: the first frame on a bump-in-the-wire port
        // already meets its engine.
        let inline = Arc::new(crate::inline::InlineControl::new(
            shared.clone(),
            nworkers,
            quota_state_path(&cfg.management.socket),
        ));
        inline.commit(inline.prepare(&cfg, false)?);
        // After the subscribers file, before the first frame: quota
        // accounts as the previous run (or image) left them.
        inline.load_quota_state();
        let mut threads = Vec::new();
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|e| format!("spawn: {e}"))
        };

        let inbox = Arc::new(LearnerInbox::default());
        let stats = Arc::new(LearnerStats::new());
        // Addresses learned here, for the virtual-switch peer.
        let mac_changes = Arc::new(protocols::learn::MacChanges::default());
        let mut learner = Learner::new(
            shared.clone(),
            inbox.clone(),
            stats.clone(),
            cfg.switch.mac_aging,
            cfg.switch.mac_table_size as usize,
        );
        if cfg.virtual_switch.is_some() {
            learner = learner.with_changes(mac_changes.clone());
        }
        let nice = cfg.switch.worker_nice;
        let h = spawn(
            "learner".into(),
            Box::new(move || {
                set_nice(nice, "learner");
                learner.run()
            }),
        )?;
        let _ = shared.learner.set(h.thread().clone());
        threads.push(h);
        if !restored.is_empty() {
            // A restart: the predecessor's addresses, learned again (limits
            // apply) before the first frame is forwarded.
            tracing::info!("restart: {} addresses restored", restored.len());
            inbox.send(
                &shared,
                protocols::learn::LearnerRequest::Restore { entries: restored },
            );
        }

        let mut mailboxes = Vec::new();
        let mut counters = Vec::new();
        let opts = WorkerOptions {
            idle_spin: Duration::from_micros(cfg.switch.poll_idle_us as u64),
            ..WorkerOptions::default()
        };
        for w in 0..nworkers {
            let mb = Arc::new(Mailbox::default());
            let c = Arc::new(WorkerCounters::default());
            let worker = Worker::new(shared.clone(), mb.clone(), c.clone(), opts);
            threads.push(spawn(
                format!("worker{w}"),
                Box::new(move || {
                    set_nice(nice, "workers");
                    worker.run()
                }),
            )?);
            mailboxes.push(mb);
            counters.push(c);
        }

        // Rules with `log: true`: their matches are written once a second.
        if cfg
            .access_lists
            .iter()
            .any(|l| l.rules.iter().any(|r| r.log))
        {
            let (sh, c) = (shared.clone(), cfg.clone());
            threads.push(spawn(
                "acl-log".into(),
                Box::new(move || {
                    let mut ticks = 0u32;
                    while !sh.stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(100));
                        ticks += 1;
                        if !ticks.is_multiple_of(10) {
                            continue;
                        }
                        if let Some(s) = sh.services.load_full() {
                            for line in services::acl_log_pass(&c, &s) {
                                tracing::info!("{}", line);
                            }
                        }
                    }
                }),
            )?);
        }

        // Flow export: the workers' queues exist now.
        let exporter = Arc::new(Mutex::new(None));
        if let Some(fe) = &cfg.flow_export {
            match start_exporter(fe, &shared) {
                Ok(x) => *exporter.lock().unwrap_or_else(|e| e.into_inner()) = Some(x),
                Err(e) => return Err(abort(&shared, threads, e)),
            }
        }

        // Routed interfaces (TAPs, addresses, FIB) before the ports attach,
        // so the first routed frame finds its tables.
        let mut router = match routing::router::Router::start(&cfg, &shared, &mut threads) {
            Ok(r) => r,
            Err(e) => return Err(abort(&shared, threads, e)),
        };

        let worker_mailboxes = mailboxes.clone();
        let ha = Arc::new(protocols::ha::Ha::new(&cfg, shared.clone(), inbox.clone()));
        {
            // After a failover, tell upstream switches where the addresses
            // behind this switch now are.
            let names: Vec<String> = cfg.ports.iter().map(|p| p.name.clone()).collect();
            let pairs: Vec<(u16, u16, bool)> = ha
                .snapshot()
                .pairs
                .iter()
                .map(|p| (p.primary, p.backup, p.mac_move_update))
                .collect();
            let sh = shared.clone();
            let mbs = mailboxes.clone();
            ha.set_failover_hook(Box::new(move |pair, from, to| {
                // Frames already queued on the port that failed leave by
                // the one that took over.
                for m in &mbs {
                    m.send(datapath::PortCommand::MoveTx { from, to });
                }
                if let Some(&(p, b, true)) = pairs.get(pair) {
                    let name = names[to as usize].clone();
                    protocols::ha::spawn_mac_move_update(&sh, name, to, (p, b));
                }
            }));
        }
        // After a restart: the members' LACP state the predecessor left,
        // so its partners see nothing change; in the first snapshot, before
        // the supervisor attaches the handed-over ports.
        // Only across a restart: a file left by a restart that failed must
        // not resume partners hours later.
        let lacp_file = protocols::ha::lacp_state_path(&cfg.management.socket);
        let resume = if std::env::var_os(RESTART_ENV).is_some() {
            protocols::ha::load_lacp(&lacp_file)
        } else {
            let _ = std::fs::remove_file(&lacp_file);
            Vec::new()
        };
        ha.resume_lacp(&resume);
        // Read once: a later restart decides afresh.
        let warm_pair =
            std::env::var(VSWITCH_WARM_ENV).is_ok_and(|v| v == "1") && cfg.virtual_switch.is_some();
        std::env::remove_var(VSWITCH_WARM_ENV);
        if warm_pair {
            ha.warm_pair_start();
        }
        if protocols::ha::HaRunner::needed(&cfg) {
            let r = protocols::ha::HaRunner::new(
                &cfg,
                ha.clone(),
                shared.clone(),
                counters.clone(),
                &resume,
            );
            threads.push(spawn("ha".into(), Box::new(move || r.run()))?);
        }
        if let Some(r) = protocols::spanning_tree::StpRunner::new(&cfg, ha.clone(), shared.clone())
        {
            threads.push(spawn("stp".into(), Box::new(move || r.run()))?);
        }
        let mcast = Arc::new(protocols::mcast::Multicast::new(
            &cfg,
            shared.clone(),
            counters.clone(),
        ));
        // The virtual-switch pair (keepalive and peer link); the API
        // reads the state it publishes.
        let vswitch_info = {
            let sh = shared.clone();
            let stop = Box::new(move || sh.stop.load(std::sync::atomic::Ordering::Relaxed));
            match protocols::vswitch::PairRunner::new(&cfg, stop) {
                Some(r) => {
                    let r = if warm_pair { r.warm_start() } else { r };
                    let r = r.with_peer_link(protocols::vswitch::link::LinkIo {
                        shared: shared.clone(),
                        ha: ha.clone(),
                        inbox: inbox.clone(),
                        changes: mac_changes.clone(),
                        ports: protocols::vswitch::link::peer_link_ports(&cfg),
                        bundle: protocols::vswitch::link::peer_link_bundle(&cfg),
                        channels: protocols::vswitch::link::mc_channels(&cfg),
                        svis: protocols::vswitch::link::svis(&cfg),
                        mcast: protocols::mcast::Multicast::configured(&cfg).then(|| mcast.clone()),
                    });
                    let info = r.info.clone();
                    threads.push(spawn("vs-pair".into(), Box::new(move || r.run()))?);
                    info
                }
                None => Arc::new(Mutex::new(serde_json::Value::Null)),
            }
        };
        let mut sup = Supervisor::new(&cfg, shared.clone(), mailboxes, ha.clone());
        if let Ok(h) = std::env::var(HANDOVER_ENV) {
            // Read once: a later restart hands over afresh.
            std::env::remove_var(HANDOVER_ENV);
            sup.set_handover(&h);
        }
        let (ports_tx, ports_rx) = std::sync::mpsc::channel();
        sup.set_config_channel(ports_rx);
        let applier = Arc::new(crate::apply::Applier::new(
            cfg.clone(),
            shared.clone(),
            ha.clone(),
            inbox.clone(),
            ports_tx,
            nworkers,
            inline.clone(),
        ));
        if let Some(s) = start.socket {
            applier.set_socket_override(s);
        }
        applier.set_multicast(mcast.clone());
        if let Some(m) = router.as_ref().and_then(|r| r.pseudowires.clone()) {
            applier.set_pseudowires(m);
        }
        // Storm control is in place before the ports attach.
        let (g, guard) =
            crate::guard::Guard::new(shared.clone(), applier.clone(), counters.clone());
        threads.push(spawn("guard".into(), Box::new(move || g.run()))?);
        {
            // Bandwidth control and quota accounting (docs/inline.md).
            let (sh, il) = (shared.clone(), inline.clone());
            threads.push(spawn(
                "bandwidth".into(),
                Box::new(move || il.run_control(&|| sh.stop.load(Ordering::Relaxed))),
            )?);
            // Usage records of ended flows to the IPFIX collector.
            let (sh, il) = (shared.clone(), inline.clone());
            threads.push(spawn(
                "usage-export".into(),
                Box::new(move || {
                    crate::usage_export::run(&il, sh.epoch, &|| sh.stop.load(Ordering::Relaxed))
                }),
            )?);
        }
        if cfg.multicast.routing {
            // pimd's routes, read from the kernel's MFC of the TAPs.
            let by_ifindex: std::collections::HashMap<u32, u16> = router
                .as_ref()
                .map(|r| r.ports().iter().map(|p| (p.tap_ifindex, p.port)).collect())
                .unwrap_or_default();
            let m = mcast.clone();
            threads.push(spawn(
                "mfc".into(),
                Box::new(move || m.follow_kernel(by_ifindex)),
            )?);
        }
        if let Some(c) = router.as_mut().and_then(|r| r.carrier.take()) {
            sup.set_link_hook(Box::new(move |port, up| c.set(port, up)));
        }
        // `config apply` changes VRFs and subinterfaces through it; the
        // switch removes the VRF namespaces it made when it stops.
        let router = router.map(Arc::new);
        if let Some(r) = &router {
            applier.set_router(r.clone());
        }
        // VRRP groups (docs/vrrp.md): on the twins of the default VRF.
        let vrrp = router.as_ref().and_then(|r| {
            let twins: Vec<(u16, String, u32, [u8; 6])> = r
                .ports()
                .iter()
                .filter(|p| p.vrf == 0)
                .map(|p| (p.port, p.tap.clone(), p.tap_ifindex, p.mac))
                .collect();
            let sh = shared.clone();
            let stop = Box::new(move || sh.stop.load(Ordering::Relaxed));
            protocols::vrrp::VrrpRunner::new(&cfg, &twins, r.vrrp.clone(), stop)
                .map(|v| v.with_learner(inbox.clone(), shared.clone()))
        });
        let vrrp = match vrrp {
            Some(v) => {
                let h = v.handle();
                threads.push(spawn("vrrp".into(), Box::new(move || v.run()))?);
                Some(h)
            }
            None => None,
        };
        let router_at_stop = router.clone();
        let t_attach = std::time::Instant::now();
        sup.poll();
        let t_attached = t_attach.elapsed();
        let status = sup.status();
        // Links just brought up take a moment to report carrier: wait up to
        // a second so `ready` means "forwarding on every present port".
        for _ in 0..20 {
            let waiting = status
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|s| s.state == PortState::Down);
            if !waiting {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            sup.poll();
        }
        sup.close_unadopted();
        {
            // After the ports are up: the startup queries reach them.
            let m = mcast.clone();
            m.restart_querier();
            threads.push(spawn("mcast".into(), Box::new(move || m.run()))?);
        }
        let st = status.lock().unwrap_or_else(|e| e.into_inner()).clone();
        threads.push(spawn("supervisor".into(), Box::new(move || sup.run()))?);

        let socket = cfg.management.socket.clone();
        let api_state = Arc::new(ApiState {
            applier,
            shared: shared.clone(),
            counters,
            ports: status,
            learner: inbox,
            learn_stats: stats,
            router,
            mailboxes: worker_mailboxes,
            ha: ha.clone(),
            mcast,
            guard,
            events: std::sync::OnceLock::new(),
            vswitch: vswitch_info.clone(),
            vrrp: vrrp.as_ref().map_or_else(
                || Arc::new(Mutex::new(serde_json::Value::Null)),
                |h| h.info.clone(),
            ),
            flow_export: cfg.flow_export.as_ref().map(|_| {
                let x = exporter.clone();
                Box::new(move || {
                    let g = x.lock().unwrap_or_else(|e| e.into_inner());
                    match g.as_ref().map(FlowExporter::stats) {
                        Some(st) => serde_json::json!({
                            "records": st.records, "datagrams": st.packets, "bytes": st.bytes,
                            "send-errors": st.send_errors, "records-lost": st.records_lost,
                            "templates": st.templates,
                        }),
                        None => serde_json::Value::Null,
                    }
                }) as Box<dyn Fn() -> serde_json::Value + Send + Sync>
            }),
        });
        // The event manager runs whether or not policies are configured
        // now: a `config apply` may add them. It holds the API weakly (the
        // API holds it).
        {
            let w = Arc::downgrade(&api_state);
            let (w2, w3, sh) = (w.clone(), w.clone(), shared.clone());
            let running_now = cfg.clone();
            let env = events::Env {
                query: Arc::new(move |req| match w.upgrade() {
                    Some(a) => a.handle(req),
                    None => serde_json::json!({"ok": false, "error": "switch stopped"}),
                }),
                running: Arc::new(move || match w2.upgrade() {
                    Some(a) => a.applier.running(),
                    None => Arc::new(running_now.clone()),
                }),
                apply: Arc::new(move |c| match w3.upgrade() {
                    Some(a) => a.applier.apply(c),
                    None => Err("switch stopped".into()),
                }),
                stop: Arc::new(move || sh.stop.load(Ordering::Relaxed)),
            };
            match events::EventManager::start(env) {
                Ok((em, h)) => {
                    let _ = api_state.events.set(em);
                    threads.push(h);
                }
                Err(e) => tracing::warn!("event manager not started: {e}"),
            }
        }
        let sw = Switch {
            ha: ha.clone(),
            vswitch: vswitch_info,
            vrrp,
            router: router_at_stop,
            exporter,
            shared: shared.clone(),
            threads,
            socket: socket.clone(),
            bound: false,
            workers: nworkers,
            lock,
            inline: inline.clone(),
        };
        let metrics = match &cfg.management.metrics {
            Some(m) => {
                let st = api_state.clone();
                let q: Arc<metrics::Query> = Arc::new(move |req| st.handle(req));
                match m.listen_addr().and_then(|a| {
                    let sh = shared.clone();
                    metrics::serve(a, q, move || sh.stop.load(Ordering::Relaxed))
                        .map_err(|e| format!("management.metrics.listen {a}: {e}"))
                }) {
                    Ok(srv) => {
                        tracing::info!("metrics: http://{}/metrics", srv.local);
                        Some(srv.thread)
                    }
                    Err(e) => {
                        sw.stop();
                        return Err(e);
                    }
                }
            }
            None => None,
        };
        // After metrics: a subagent that cannot reach snmpd keeps retrying
        // (snmpd may start after the switch), so it never fails the start.
        let snmp = cfg.management.snmp.as_ref().and_then(|s| {
            let st = api_state.clone();
            let q: Arc<snmp::Query> = Arc::new(move |req| st.handle(req));
            let sh = shared.clone();
            match snmp::serve(s.agentx_socket.clone(), q, move || {
                sh.stop.load(Ordering::Relaxed)
            }) {
                Ok(a) => {
                    tracing::info!("snmp: AgentX subagent for {}", s.agentx_socket.display());
                    Some(a.thread)
                }
                Err(e) => {
                    tracing::warn!("snmp: subagent not started: {e}");
                    None
                }
            }
        });
        match api::serve(&socket, api_state) {
            Ok(h) => {
                let mut sw = sw;
                sw.bound = true;
                sw.threads.push(h);
                sw.threads.extend(metrics);
                sw.threads.extend(snmp);
                let up = st.iter().filter(|s| s.state == PortState::Up).count();
                tracing::info!(
                    "ready: {} ports ({} up), {} worker(s), api {} (in {} ms; ports attached in {} ms)",
                    st.len(),
                    up,
                    nworkers,
                    socket.display(),
                    t_start.elapsed().as_millis(),
                    t_attached.as_millis()
                );
                Ok(sw)
            }
            Err(e) => {
                sw.stop();
                Err(format!("management socket {}: {e}", socket.display()))
            }
        }
    }

    pub fn stop(self) {
        // VRRP masters resign before anything stops (the punt thread
        // still sends their priority-0 advertisements): the backups take
        // over after Skew_Time, not Master_Down_Interval.
        if let Some(v) = &self.vrrp {
            v.shutdown(Duration::from_millis(500));
        }
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.shared.learner.get() {
            t.unpark();
        }
        let t0 = std::time::Instant::now();
        for t in self.threads {
            let (t1, name) = (
                std::time::Instant::now(),
                t.thread().name().map(String::from),
            );
            let _ = t.join();
            // A thread that does not see `stop` soon holds the whole stop.
            if t1.elapsed() > Duration::from_millis(300) {
                tracing::info!(
                    "stopping: thread {} took {} ms",
                    name.as_deref().unwrap_or("?"),
                    t1.elapsed().as_millis()
                );
            }
        }
        // After the punt thread: the VRF namespaces Lanyard made would
        // otherwise outlive it, then the twins are closed (docs/vrf.md).
        if let Some(r) = &self.router {
            let t1 = std::time::Instant::now();
            let gone = r.remove_namespaces();
            tracing::info!(
                "stopped: threads in {} ms, twins and {} VRF namespaces removed in {} ms",
                (t1 - t0).as_millis(),
                gone.len(),
                t1.elapsed().as_millis()
            );
        }
        self.inline.final_quota_save(true);
        let x = self
            .exporter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(x) = x {
            let st = x.stop();
            tracing::info!(
                "flow export: {} records in {} datagrams, {} lost",
                st.records,
                st.packets,
                st.records_lost
            );
        }
        // Never someone else's: only a socket this switch bound.
        if self.bound {
            let _ = std::fs::remove_file(&self.socket);
        }
        drop(self.lock);
    }
}

/// Start the exporter of `flow-export:` on the workers' queues.
fn start_exporter(
    fe: &config::services::FlowExport,
    shared: &Shared,
) -> Result<FlowExporter, String> {
    use std::net::ToSocketAddrs;
    let collector = fe
        .collector
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("flow-export.collector {:?}: not HOST:PORT", fe.collector))?;
    let version = match fe.version {
        config::services::FlowVersion::NetflowV9 => ExportVersion::V9,
        config::services::FlowVersion::Ipfix => ExportVersion::Ipfix,
    };
    let mut cfg = ExportConfig::new(collector, version);
    cfg.template_refresh = Duration::from_secs(fe.template_refresh as u64);
    cfg.domain_id = fe.domain_id;
    cfg.rate_limit = fe.rate_limit;
    FlowExporter::start(cfg, shared.flow_queues(), shared.epoch)
        .map_err(|e| format!("flow export to {collector}: {e}"))
}

/// Give the calling thread nice value `nice` (`switch.worker-nice`).
/// Forwarding threads run ahead of ordinary processes: under overload the
/// kernel's own forwarding (softirq) wins the CPU over the processes that
/// offer the traffic, and so must Lanyard's, or its rings overflow while
/// the senders keep the CPU (docs/performance.md, issue 13). Without
/// CAP_SYS_NICE the thread keeps its priority (said once per kind).
fn set_nice(nice: i32, what: &str) {
    if nice == 0 {
        return;
    }
    // SAFETY: plain syscalls on the calling thread (its tid).
    let r = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice)
    };
    if r != 0 {
        static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        if !said.iter().any(|w| w == what) {
            said.push(what.to_string());
            tracing::info!(
                "{what}: nice {nice} refused ({}); running at normal priority",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// A start-up step failed: stop the threads already running, pass the
/// error on.
fn abort(shared: &Shared, threads: Vec<std::thread::JoinHandle<()>>, e: String) -> String {
    shared.stop.store(true, Ordering::Relaxed);
    if let Some(t) = shared.learner.get() {
        t.unpark();
    }
    for t in threads {
        let _ = t.join();
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_files_soft_limit_rises_to_the_hard_limit() {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit on valid rlimit values of our own.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
        let saved = r;
        let hard = r.rlim_max.min(OPEN_FILES_CAP);
        // Well above what the tests running beside this one hold open.
        let low = 512;
        if hard <= low {
            return; // nothing to raise to
        }
        r.rlim_cur = low;
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) }, 0);
        assert_eq!(raise_open_files_limit().unwrap(), (low, hard));
        // Already there: unchanged.
        assert_eq!(raise_open_files_limit().unwrap(), (hard, hard));
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &saved) };
    }

    #[test]
    fn open_files_needed_grows_with_ports_workers_and_routed_interfaces() {
        let yaml = |workers: u32, mode: &str| {
            let mut y = format!("switch:\n  workers: {workers}\nports:\n");
            for i in 1..=410 {
                y += &format!("  - name: sw{i}\n    mode: {mode}\n");
                if mode == "routed" {
                    y += &format!(
                        "    addresses: [10.64.{}.{}/30]\n",
                        i / 64,
                        (i % 64) * 4 + 1
                    );
                }
            }
            config::parse(&y, "t.yaml").unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(open_files_needed(&yaml(1, "access")), 410 * 5 + 256);
        assert_eq!(open_files_needed(&yaml(2, "access")), 410 * 6 + 256);
        // Measured: 3,715 at start with 410 routed ports on two workers.
        assert_eq!(open_files_needed(&yaml(2, "routed")), 410 * 9 + 256);
    }
}
