//! # lab — Lanyard's test bed
//!
//! Runs RFC 2544 / RFC 2889 tests in network namespaces against devices
//! under test (DUTs) reached only through veth interfaces and their CLIs:
//! `wire` (plain veth, the ceiling), `linux-bridge`, `linux-router`, `ovs`,
//! `lanyard`, and `lossy` (a bridge with a `tbf` limit, for checking the
//! test bed itself). See `docs/lab.md` for plans and what the numbers mean.
//!
//! Entry points: [`run_plan_file`] and [`calibrate`].

pub mod bandwidth;
pub mod bwshare;
pub mod bwspec;
pub mod check;
pub mod compare;
pub mod convergence;
pub mod copp;
pub mod cpuplan;
pub mod disruption;
pub mod dut;
pub mod engine;
pub mod flowset;
pub mod hist;
pub mod html;
pub mod lanyard_pair;
pub mod lanyard_pe;
pub mod lanyard_rstp;
pub mod mcsetup;
pub mod mirror;
pub mod mirror_setup;
pub mod multicast;
pub mod netns;
pub mod ospf;
pub mod pktsock;
pub mod plan;
pub mod procs;
pub mod report;
pub mod routes;
pub mod search;
pub mod sessions;
pub mod sig;
pub mod subscale;
pub mod subspec;
pub mod tables;

use std::fmt;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

pub use plan::Plan;
pub use report::Summary;

/// Errors of the test bed.
#[derive(Debug)]
pub enum LabError {
    /// The plan is invalid (the message names the field).
    Plan(String),
    /// An external command failed.
    Command(String),
    /// The DUT could not be started or configured.
    Dut(String),
    /// The DUT does not support what the plan asks.
    Unsupported(String),
    /// SIGINT / SIGTERM: the run stopped and cleaned up.
    Interrupted,
    /// Writing results failed.
    Output(String),
    /// Anything else.
    Other(String),
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabError::Plan(m) => write!(f, "plan: {m}"),
            LabError::Command(m) => write!(f, "command failed: {m}"),
            LabError::Dut(m) => write!(f, "DUT: {m}"),
            LabError::Unsupported(m) => write!(f, "unsupported by this DUT: {m}"),
            LabError::Interrupted => write!(f, "interrupted"),
            LabError::Output(m) => write!(f, "output: {m}"),
            LabError::Other(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for LabError {}

/// Options from the command line.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// The `lanyard` binary the `lanyard` DUT driver runs (the CLI passes
    /// its own `current_exe()`).
    pub lanyard_bin: PathBuf,
    /// Where to write `report.json`, `results.csv`, `plot.svg` and
    /// `tables.txt`; default `lab-results/<UTC timestamp>/`.
    pub out_dir: Option<PathBuf>,
    /// No progress line on stderr and no tables on stdout.
    pub quiet: bool,
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn timestamp(t: u64) -> String {
    // SAFETY: gmtime_r writes only into `tm`, which we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let tt = t as libc::time_t;
    // SAFETY: both pointers are valid for the call.
    unsafe { libc::gmtime_r(&tt, &mut tm) };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

fn check_root() -> Result<(), LabError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(LabError::Other(
            "the lab needs root (network namespaces, AF_PACKET sockets)".into(),
        ));
    }
    Ok(())
}

/// Run a plan file: build each DUT's topology in turn, run every test on
/// it, print the comparison tables to stdout (unless `quiet`), and write
/// `report.json` (schema `docs/lab-schema.json`), `results.csv`,
/// `plot.svg` and `tables.txt` to the output directory. A DUT that fails to
/// start or a test that fails is reported as failed with the reason; the
/// other DUTs still run. Needs root. Ctrl-C stops the run, cleans up, and
/// still writes the partial report, then returns [`LabError::Interrupted`].
pub fn run_plan_file(plan: &Path, opts: &LabOptions) -> Result<Summary, LabError> {
    let p = Plan::load(plan)?;
    run_plan(&p, opts)
}

/// Run a plan `n` times (`lab run --repeat N`): run `k` writes its full
/// results to `DIR/run-k/`, then `DIR/repeat.txt` and `DIR/repeat.json`
/// give min / median / max per cell over the runs (printed unless quiet).
/// `DIR` is the output directory (default `lab-results/<UTC time>/`). An
/// interruption stops the runs; the cells of the finished ones are still
/// written.
/// The plan as run `k` (1-based) of a `--repeat` runs it: the DUTs in
/// the plan's order on odd runs and reversed on even ones, so that no DUT
/// always runs first (on this shared VM the first tended to measure
/// higher; docs/performance.md, issue 15's A/B).
pub fn plan_for_run(plan: &Plan, k: usize) -> Plan {
    let mut p = plan.clone();
    if k.is_multiple_of(2) {
        p.duts.reverse();
    }
    p
}

pub fn run_plan_repeated(
    plan: &Plan,
    opts: &LabOptions,
    n: usize,
) -> Result<Vec<Summary>, LabError> {
    if n <= 1 {
        return run_plan(plan, opts).map(|s| vec![s]);
    }
    let dir = opts
        .out_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("lab-results").join(timestamp(now_unix())));
    let mut done = Vec::new();
    let mut outcome = Ok(());
    for k in 1..=n {
        let p = plan_for_run(plan, k);
        if !opts.quiet {
            let order: Vec<&str> = p.duts.iter().map(|d| d.name.as_str()).collect();
            eprintln!("[lab] run {k} of {n}: DUTs in order {}", order.join(", "));
        }
        let o = LabOptions {
            out_dir: Some(dir.join(format!("run-{k}"))),
            ..opts.clone()
        };
        match run_plan(&p, &o) {
            Ok(s) => done.push(s),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    if !done.is_empty() {
        let reports: Vec<serde_json::Value> = done
            .iter()
            .map(|s| serde_json::to_value(s).map_err(|e| LabError::Output(e.to_string())))
            .collect::<Result<_, _>>()?;
        let cells = compare::cells(&reports);
        let text = compare::repeat_table(&cells, done.len());
        std::fs::write(dir.join("repeat.txt"), &text)
            .map_err(|e| LabError::Output(format!("repeat.txt: {e}")))?;
        let json = serde_json::to_string_pretty(&serde_json::json!({
            "plan": plan.name, "runs": done.len(), "cells": cells,
        }))
        .map_err(|e| LabError::Output(e.to_string()))?;
        std::fs::write(dir.join("repeat.json"), json)
            .map_err(|e| LabError::Output(format!("repeat.json: {e}")))?;
        if !opts.quiet {
            println!("{text}\nresults: {}", dir.display());
        }
    }
    outcome.map(|_| done)
}

/// Run an already parsed plan (see [`run_plan_file`]).
pub fn run_plan(plan: &Plan, opts: &LabOptions) -> Result<Summary, LabError> {
    check_root()?;
    netns::install_signal_handlers();
    let swept = netns::sweep_stale();
    if !swept.is_empty() && !opts.quiet {
        eprintln!("[lab] removed stale namespaces: {}", swept.join(", "));
    }
    let started = now_unix();
    let t0 = std::time::Instant::now();
    let load0 = loadavg();
    let tests: Vec<plan::Test> = (0..plan.tests.len())
        .map(|i| plan.test(i))
        .collect::<Result<_, _>>()?;
    let out_dir = opts
        .out_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("lab-results").join(timestamp(started)));
    dut::keep_logs_in(Some(out_dir.join("logs")));
    // Tests, plus starting each DUT (longer with many routes to install).
    let est: f64 = tests
        .iter()
        .map(|t| procs::estimate(t) * t.duts.as_ref().map_or(plan.duts.len(), |d| d.len()) as f64)
        .sum::<f64>()
        + plan
            .duts
            .iter()
            .map(|d| 3.0 + (d.routes.unwrap_or(0) + d.routes6.unwrap_or(0)) as f64 / 30_000.0)
            .sum::<f64>();
    let mut progress = procs::Progress::new(est, opts.quiet);
    let mut summary = Summary {
        schema: report::SCHEMA.into(),
        plan: plan.name.clone(),
        started_unix: started,
        seconds: 0.0,
        out_dir: None,
        testbed: vec![
            format!("cores: {}", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
            "generator: 1 TX thread (sendmmsg, PACKET_QDISC_BYPASS), 1 RX thread (recvmmsg), AF_PACKET".into(),
            "latency: CLOCK_MONOTONIC at send (per burst) and after recvmmsg returns, same machine".into(),
            "frame sizes include the 4-byte FCS (64 B = 60 B handed to the socket)".into(),
            cpuplan::CpuPlan::for_machine(plan.cpu_plan).describe(),
            format!(
                "kernel: Linux {}",
                std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "?".into())
            ),
        ],
        duts: Vec::new(),
        results: Vec::new(),
        plan_text: plan.source.clone(),
        references: plan
            .tests
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let mut r = t.reference.clone()?;
                r.test = tests[i].name.clone();
                Some(r)
            })
            .collect(),
        bandwidth: Vec::new(),
        sessions: Vec::new(),
    };
    let outcome = if plan.interleave {
        run_interleaved(plan, &tests, opts, &mut progress, &mut summary)
    } else {
        run_by_dut(plan, &tests, opts, &mut progress, &mut summary)
    };
    progress.finish();
    summary.testbed.push(format!(
        "load average (1 min) at start {}, at end {} (shared machine)",
        load0.map_or("?".into(), |l| format!("{l:.1}")),
        loadavg().map_or("?".into(), |l| format!("{l:.1}"))
    ));
    summary.seconds = t0.elapsed().as_secs_f64();
    summary.compute_ceiling();
    dut::keep_logs_in(None);
    if out_dir.join("logs").is_dir() {
        summary.testbed.push(format!(
            "DUT logs and configurations: {}/logs/<dut>-<start>/",
            out_dir.display()
        ));
    }
    write_outputs(&mut summary, &out_dir)?;
    if !opts.quiet {
        println!("{}", summary.tables());
        if let Some(d) = &summary.out_dir {
            println!("results: {d}");
        }
    }
    outcome.map(|_| summary)
}

fn applicable(spec: &plan::DutSpec, t: &plan::Test) -> Option<&'static str> {
    use plan::{Driver, TestKind};
    let driver = spec.driver;
    let needs_switch = matches!(
        t.kind,
        TestKind::AddressCapacity
            | TestKind::LearningRate
            | TestKind::LearningCheck
            | TestKind::Holb
    ) || (t.kind == TestKind::FullMesh);
    if matches!(driver, Driver::LanyardPair | Driver::LanyardRstp) {
        // Ports 1 and 2 through the pair, layer 2 only.
        let ok = t.kind.is_port_pair_rate()
            && t.layer != Some(3)
            && t.routes.is_none()
            && t.routes6.is_none()
            && t.mirror_sessions == 0;
        if !ok {
            return Some("lanyard-pair runs layer-2 rate, latency and disruption tests between ports 1 and 2 (disruption also by tiers)");
        }
    }
    if driver == Driver::LanyardPe {
        // Port 1 on PE1, port 2 on PE2.
        let mode = spec.pe_mode.unwrap_or(plan::PeMode::Pseudowire);
        let ok = t.kind.is_port_pair_rate() && t.mirror_sessions == 0 && t.tiers == 0;
        if !ok {
            return Some(
                "lanyard-pe runs rate, latency and disruption tests between ports 1 and 2",
            );
        }
        if !mode.routed() && (t.routes.is_some() || t.routes6.is_some()) {
            return Some("routes: N on lanyard-pe: only pe-mode l3 and l3vpn route");
        }
        match mode {
            plan::PeMode::Pseudowire | plan::PeMode::L2 if t.layer == Some(3) => {
                return Some(
                    "pseudowire and l2 PEs carry layer-2 tests (pe-mode: l3 / l3vpn route)",
                )
            }
            plan::PeMode::L3 | plan::PeMode::L3vpn if t.layer != Some(3) => {
                return Some("pe-mode: l3 / l3vpn route layer-3 tests only (layer: 3 or family)")
            }
            plan::PeMode::L3 | plan::PeMode::L3vpn if t.kind == TestKind::Disruption => {
                return Some("disruption tests run on pseudowire and l2 PEs (the bypass is theirs)")
            }
            plan::PeMode::L3 if t.vlans > 0 => {
                return Some("pe-mode: l3 routes untagged frames (one routed port per PE)")
            }
            plan::PeMode::L3vpn if t.vlans == 0 => {
                return Some("an L3VPN PE has one VRF per VLAN: the test needs vlans: N")
            }
            _ => {}
        }
        if t.vlans == 0 && spec.circuits == Some(plan::Circuits::Vlan) {
            return Some("VLAN-mode circuits carry tagged frames only: the test needs vlans: N");
        }
    }
    if t.vlans > 0 && driver == Driver::LinuxRouter {
        return Some("tagged layer-3 frames: the kernel here has no 802.1Q (a Linux router cannot route them)");
    }
    if t.vlans > 0
        && matches!(
            driver,
            Driver::Lanyard | Driver::LanyardPair | Driver::LanyardRstp
        )
    {
        return Some("tagged frames (vlans: N): this driver's ports are access ports of one VLAN");
    }
    if driver == Driver::Wire && needs_switch {
        return Some("needs a switching DUT (wire is a plain veth pair)");
    }
    if let Some(c) = &t.convergence {
        if driver == Driver::LinuxRouter {
            return Some("layer-2 failover test on a router");
        }
        if driver == Driver::Wire && c.event != plan::Event::None {
            return Some("wire runs convergence only with event: none (the baseline)");
        }
    }
    if t.mirror_sessions > 0
        && !matches!(driver, Driver::LinuxBridge | Driver::Ovs | Driver::Lanyard)
    {
        return Some("mirror sessions are set up on linux-bridge, ovs and lanyard only");
    }
    if matches!(t.kind, TestKind::BandwidthShare | TestKind::Subscribers)
        && spec.inline != Some(plan::InlineMode::Engine)
    {
        return Some("needs an inline-engine DUT (driver: lanyard, inline: engine)");
    }
    if t.kind == TestKind::Copp && matches!(driver, Driver::Wire | Driver::Lossy) {
        return Some("needs a DUT with an address of its own to ping");
    }
    if t.kind == TestKind::Multicast {
        let l3 = t.layer == Some(3) || (t.layer.is_none() && driver == Driver::LinuxRouter);
        match (driver, l3) {
            (Driver::Wire | Driver::Lossy, _) => {
                return Some("needs a multicast-capable DUT (snooping switch or multicast router)")
            }
            (Driver::LinuxRouter, false) => {
                return Some("layer-2 multicast (IGMP snooping) on a router")
            }
            (Driver::LinuxBridge | Driver::Ovs, true) => {
                return Some("not supported by this driver: layer-3 multicast needs a router")
            }
            _ => {}
        }
    }
    if driver == Driver::LinuxRouter
        && matches!(
            t.kind,
            TestKind::AddressCapacity | TestKind::LearningRate | TestKind::LearningCheck
        )
    {
        return Some("layer-2 address test on a router");
    }
    None
}

/// What a DUT does with the current test.
enum Mode {
    /// Run it.
    Run,
    /// Rows are `n/a` for this reason.
    Skip(&'static str),
    /// Rows fail: the DUT could not be started for the test's setup.
    Failed(String),
}

/// One DUT through the plan: started for the first test that runs on it,
/// and started again (fresh topology) when a test needs another setup —
/// lanyard switching between layer 2 and routed ports, other route counts.
struct DutRun<'a> {
    spec: &'a plan::DutSpec,
    /// Index of its record in `Summary::duts`.
    idx: usize,
    running: Option<(dut::Dut, engine::Tester)>,
    failed_setup: Option<(dut::Setup, String)>,
    started_once: bool,
    salt: u8,
    mode: Mode,
    /// The run's CPU plan, the same for every DUT.
    cpus: cpuplan::CpuPlan,
}

impl<'a> DutRun<'a> {
    fn new(spec: &'a plan::DutSpec, cpus: cpuplan::CpuPlan, summary: &mut Summary) -> Self {
        summary.duts.push(report::DutRecord {
            name: spec.name.clone(),
            driver: spec.driver.as_str().into(),
            status: "ok".into(),
            error: None,
            info: Vec::new(),
        });
        DutRun {
            spec,
            cpus,
            idx: summary.duts.len() - 1,
            running: None,
            failed_setup: None,
            started_once: false,
            salt: 0,
            mode: Mode::Run,
        }
    }

    /// Get ready for test `t`: decide whether it runs here and (re)start
    /// the DUT if its setup differs. Only an interruption is an error.
    fn prepare(
        &mut self,
        t: &plan::Test,
        ports: usize,
        opts: &LabOptions,
        progress: &mut procs::Progress,
        summary: &mut Summary,
    ) -> Result<(), LabError> {
        let spec = self.spec;
        if t.duts.as_ref().is_some_and(|d| !d.contains(&spec.name)) {
            self.mode = Mode::Skip("not run on this DUT (the test's duts list)");
            return Ok(());
        }
        if let Some(why) = applicable(spec, t) {
            self.mode = Mode::Skip(why);
            return Ok(());
        }
        let mut setup = dut::Setup::for_test(spec, t);
        setup.cpus = self.cpus;
        self.mode = Mode::Run;
        if self.running.as_ref().is_some_and(|(d, _)| d.setup == setup) {
            return Ok(());
        }
        // Tester sockets first, then the DUT and its namespaces.
        if let Some((d, tester)) = self.running.take() {
            drop(tester);
            drop(d);
        }
        if let Some((s, why)) = &self.failed_setup {
            if *s == setup {
                self.mode = Mode::Failed(why.clone());
                return Ok(());
            }
        }
        progress.label(format!("starting {} ({})", spec.name, setup.describe()));
        let rec = &mut summary.duts[self.idx];
        match start_dut(spec, ports, opts, setup) {
            Ok((d, tester)) => {
                if self.started_once {
                    rec.info
                        .push(format!("restarted for {} ({})", t.name, setup.describe()));
                }
                for i in &d.info {
                    if !rec.info.contains(i) {
                        rec.info.push(i.clone());
                    }
                }
                self.started_once = true;
                self.running = Some((d, tester));
            }
            Err(LabError::Interrupted) => return Err(LabError::Interrupted),
            Err(e) => {
                let why = e.to_string();
                rec.error = Some(why.clone());
                self.failed_setup = Some((setup, why.clone()));
                self.mode = Mode::Failed(why);
            }
        }
        Ok(())
    }

    /// Run (or report as n/a / failed) test `t` at its frame size `fi`,
    /// adding one result row.
    fn run_size(
        &mut self,
        t: &plan::Test,
        fi: usize,
        progress: &mut procs::Progress,
        summary: &mut Summary,
    ) -> Result<(), LabError> {
        let spec = self.spec;
        let sizes = sizes_of(t);
        let (label, avg) = &sizes[fi];
        let mut row = report::ResultRow::new(&t.name, t.kind, &spec.name, label, *avg);
        let running = match (&self.mode, self.running.as_mut()) {
            (Mode::Run, Some(r)) => r,
            (mode, _) => {
                (row.status, row.error) = match mode {
                    Mode::Skip(why) => ("n/a".into(), Some(why.to_string())),
                    Mode::Failed(why) => ("failed".into(), Some(why.clone())),
                    Mode::Run => ("failed".into(), Some("DUT not running".into())),
                };
                summary.results.push(row);
                progress.advance(procs::estimate(t) / sizes.len() as f64);
                return Ok(());
            }
        };
        let (d, tester) = (&running.0, &mut running.1);
        progress.label(format!("{} {} {}", spec.name, t.name, label));
        let fs = if matches!(
            t.kind,
            plan::TestKind::AddressCapacity
                | plan::TestKind::LearningRate
                | plan::TestKind::LearningCheck
        ) {
            t.frame_sizes[0].clone()
        } else {
            t.frame_sizes[fi].clone()
        };
        let before = d.l3_counters();
        let ct_before = d.conntrack_entries();
        let ct_stats_before = d.conntrack_stats();
        tester.new_flows = t.new_flows;
        // `flows: N`: trials go on through the flow list where the last
        // one (of any frame size) stopped.
        if t.flows == 0 {
            tester.l3_offset = None;
        } else if fi == 0 || tester.l3_offset.is_none() {
            tester.l3_offset = Some(0);
        }
        let mut ctx = procs::Ctx {
            dut: d,
            tester,
            progress,
            salt: self.salt,
        };
        let engine = spec.inline == Some(plan::InlineMode::Engine);
        // New flows: the engine's flows created over the test (beside
        // Linux conntrack's `conntrack_added`).
        let created = |d: &dut::Dut| {
            d.lanyard_show(&["service-control"])
                .ok()
                .and_then(|v| v["flows"]["created"].as_u64())
        };
        let created_before = if engine && t.new_flows.on() {
            created(d)
        } else {
            None
        };
        let primed = if fi == 0 && t.flows > 0 && engine {
            ctx.prime_flows(t, &fs).map(|note| row.notes.push(note))
        } else {
            Ok(())
        };
        let res = primed.and_then(|()| ctx.run_test(t, &fs, &mut row));
        self.salt = ctx.salt;
        // What Lanyard's data path did during the test (forwarded,
        // punted to the kernel, drops by reason and port): where frames
        // were lost, or that the slow path carried them.
        if let (Some(b), Some(a)) = (before, d.l3_counters()) {
            let delta = dut::counter_delta(&b, &a);
            let punted = delta["l3"]["punted"].as_i64().unwrap_or(0);
            let mut drops: Vec<String> = Vec::new();
            if let Some(x) = delta["l3"].get("drops") {
                drops.push(format!("l3 {x}"));
            }
            for (port, c) in delta["ports"].as_object().into_iter().flatten() {
                if let Some(x) = c.get("drops") {
                    drops.push(format!("{port} {x}"));
                }
            }
            if punted > 0 || !drops.is_empty() {
                row.notes.push(format!(
                    "lanyard punted {punted} frames; drops: {}",
                    if drops.is_empty() {
                        "none".into()
                    } else {
                        drops.join(", ")
                    }
                ));
            }
            detail_insert(&mut row.detail, "lanyard", delta);
        }
        // Routes learned by OSPF: how long they took to arrive.
        if let Some(o) = d.ospf() {
            detail_insert(
                &mut row.detail,
                "ospf",
                serde_json::json!({"routes": o.routes, "adjacency_s": o.adjacency_s,
                                   "converge_s": o.converge_s, "tester_filter": o.filtered}),
            );
            if fi == 0 {
                row.notes.push(format!(
                    "{} routes by OSPF: adjacencies Full {:.1} s after start, all routes in the FIB {:.1} s later",
                    o.routes, o.adjacency_s, o.converge_s
                ));
            }
        }
        // Linux conntrack: connections created during the test (the
        // table's growth; entries outlive a test).
        if let (Some(b), Some(a)) = (ct_before, d.conntrack_entries()) {
            detail_insert(
                &mut row.detail,
                "conntrack_added",
                a.saturating_sub(b).into(),
            );
        }
        if let (Some(b), Some(a)) = (created_before, created(d)) {
            detail_insert(
                &mut row.detail,
                "inline_flows_created",
                a.saturating_sub(b).into(),
            );
        }
        // And what it did when full: unreplied entries evicted for new
        // ones (early drops), new ones dropped, packets it could not track.
        if let (Some(b), Some(a)) = (ct_stats_before, d.conntrack_stats()) {
            for ((k, x), (_, y)) in a.iter().zip(b.iter()) {
                detail_insert(
                    &mut row.detail,
                    &format!("conntrack_{k}"),
                    x.saturating_sub(*y).into(),
                );
            }
        }
        // Flows at scale: what the engine held (and what it refused).
        if t.flows > 0 && engine {
            if let Ok(v) = d.lanyard_show(&["service-control"]) {
                let f = &v["flows"];
                let n = |k: &str| f[k].as_u64().unwrap_or(0);
                row.notes.push(format!(
                    "engine: {} flows live of {} ({} MiB), {} evicted idle, {} refused (table full)",
                    n("live"),
                    n("capacity"),
                    n("memory-bytes") >> 20,
                    n("evicted-idle"),
                    n("refused-full")
                ));
                detail_insert(&mut row.detail, "inline_flows", f.clone());
            }
        }
        if let Some(l) = loadavg() {
            detail_insert(&mut row.detail, "loadavg_1min", l.into());
        }
        let interrupted = matches!(res, Err(LabError::Interrupted));
        if let Err(e) = res {
            row.status = "failed".into();
            row.error = Some(if interrupted {
                "interrupted".into()
            } else {
                e.to_string()
            });
        }
        summary.results.push(row);
        // Inline engine: the per-subscriber, per-service bandwidth history
        // so far (each interval kept once; a failed read is a note).
        if spec.inline == Some(plan::InlineMode::Engine) {
            for (id, _) in bandwidth::SUBSCRIBERS {
                match d.lanyard_show(&["subscriber", id]) {
                    Ok(v) => {
                        bandwidth::merge(&mut summary.bandwidth, &spec.name, &t.name, id, &v);
                    }
                    Err(e) => {
                        if let Some(r) = summary.results.last_mut() {
                            r.notes.push(format!("bandwidth history of {id}: {e}"));
                        }
                    }
                }
            }
            // And the concurrent sessions per service.
            match d.lanyard_show(&["service-control", "history"]) {
                Ok(v) => {
                    sessions::merge(&mut summary.sessions, &spec.name, &t.name, &v);
                }
                Err(e) => {
                    if let Some(r) = summary.results.last_mut() {
                        r.notes.push(format!("service history: {e}"));
                    }
                }
            }
        }
        if interrupted {
            return Err(LabError::Interrupted);
        }
        Ok(())
    }

    /// Stop the DUT; its record is `failed` if it never started.
    fn finish(mut self, summary: &mut Summary) {
        if let Some((d, tester)) = self.running.take() {
            drop(tester);
            drop(d);
        }
        let rec = &mut summary.duts[self.idx];
        if !self.started_once && rec.error.is_some() {
            rec.status = "failed".into();
        }
    }
}

fn detail_insert(detail: &mut serde_json::Value, key: &str, v: serde_json::Value) {
    match detail.as_object_mut() {
        Some(o) => {
            o.insert(key.into(), v);
        }
        None => *detail = serde_json::json!({ key: v }),
    }
}

/// The plan's DUTs one after the other, each through all tests.
fn run_by_dut(
    plan: &Plan,
    tests: &[plan::Test],
    opts: &LabOptions,
    progress: &mut procs::Progress,
    summary: &mut Summary,
) -> Result<(), LabError> {
    let ports = plan.ports_needed();
    for spec in &plan.duts {
        let mut r = DutRun::new(spec, cpuplan::CpuPlan::for_machine(plan.cpu_plan), summary);
        let res = (|| {
            for t in tests {
                progress.begin_test(&format!("{} on {}", t.name, spec.name), procs::estimate(t));
                r.prepare(t, ports, opts, progress, summary)?;
                for fi in 0..sizes_of(t).len() {
                    r.run_size(t, fi, progress, summary)?;
                }
            }
            Ok(())
        })();
        r.finish(summary);
        res?;
    }
    Ok(())
}

/// All DUTs up at once (each in its own namespaces); every test and frame
/// size runs on each DUT in turn, the order reversed every other size, so
/// a shared machine's changing load hits all DUTs alike.
fn run_interleaved(
    plan: &Plan,
    tests: &[plan::Test],
    opts: &LabOptions,
    progress: &mut procs::Progress,
    summary: &mut Summary,
) -> Result<(), LabError> {
    let ports = plan.ports_needed();
    let mut runs: Vec<DutRun> = plan
        .duts
        .iter()
        .map(|s| DutRun::new(s, cpuplan::CpuPlan::for_machine(plan.cpu_plan), summary))
        .collect();
    let res = (|| {
        for t in tests {
            let n = t.duts.as_ref().map_or(runs.len(), |d| d.len());
            progress.begin_test(&t.name, procs::estimate(t) * n as f64);
            for r in runs.iter_mut() {
                r.prepare(t, ports, opts, progress, summary)?;
            }
            for fi in 0..sizes_of(t).len() {
                let n = runs.len();
                for k in 0..n {
                    let i = if fi % 2 == 0 { k } else { n - 1 - k };
                    runs[i].run_size(t, fi, progress, summary)?;
                }
            }
        }
        Ok(())
    })();
    for r in runs {
        r.finish(summary);
    }
    res
}

/// The machine's 1-minute load average (it is shared: results measured
/// under load are not comparable).
fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn start_dut(
    spec: &plan::DutSpec,
    ports: usize,
    opts: &LabOptions,
    setup: dut::Setup,
) -> Result<(dut::Dut, engine::Tester), LabError> {
    let d = dut::Dut::start_with(spec, ports, &opts.lanyard_bin, setup)?;
    let names = d.topo.tester_ports();
    let mut t = engine::Tester::open(&d.topo.tester, &names)?;
    t.pin = setup.cpus.tester();
    Ok((d, t))
}

fn sizes_of(t: &plan::Test) -> Vec<(String, f64)> {
    use plan::TestKind;
    match t.kind {
        TestKind::AddressCapacity | TestKind::LearningRate | TestKind::LearningCheck => {
            vec![("-".into(), t.frame_sizes[0].average())]
        }
        _ => t
            .frame_sizes
            .iter()
            .map(|f| (f.label.clone(), f.average()))
            .collect(),
    }
}

fn write_outputs(summary: &mut Summary, dir: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| LabError::Output(format!("{}: {e}", dir.display())))?;
    summary.out_dir = Some(dir.display().to_string());
    let w = |name: &str, body: String| -> Result<(), LabError> {
        std::fs::write(dir.join(name), body).map_err(|e| LabError::Output(format!("{name}: {e}")))
    };
    let json =
        serde_json::to_string_pretty(summary).map_err(|e| LabError::Output(e.to_string()))?;
    w("report.json", json)?;
    w("results.csv", summary.csv())?;
    w("plot.svg", summary.svg())?;
    w("tables.txt", summary.tables())?;
    if !summary.bandwidth.is_empty() {
        w("bandwidth.csv", bandwidth::csv(&summary.bandwidth))?;
        let json = serde_json::to_string_pretty(&summary.bandwidth)
            .map_err(|e| LabError::Output(e.to_string()))?;
        w("bandwidth.json", json)?;
    }
    if summary
        .results
        .iter()
        .any(|r| r.kind == plan::TestKind::BandwidthShare)
    {
        w("bandwidth-share.csv", bwshare::csv(&summary.results))?;
    }
    if !summary.sessions.is_empty() {
        w("sessions.csv", sessions::csv(&summary.sessions))?;
        let json = serde_json::to_string_pretty(&summary.sessions)
            .map_err(|e| LabError::Output(e.to_string()))?;
        w("sessions.json", json)?;
    }
    w("report.html", summary.html())?;
    Ok(())
}

/// Result of [`calibrate`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct Calibration {
    /// Frame size, unpaced generator rate through a plain veth (frames/s),
    /// `trafgen` rate on the same veth (frames/s, if installed), ratio.
    pub rows: Vec<CalibrationRow>,
}

/// One frame size of a calibration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CalibrationRow {
    /// Frame size with FCS.
    pub frame_size: u16,
    /// Our generator alone (no receive sockets), frames/s sent unpaced.
    pub generator_fps: f64,
    /// Our generator unpaced while the analyzer receives on the far end.
    pub generator_with_rx_fps: f64,
    /// Frames/s received unique on the other end.
    pub received_fps: f64,
    /// Zero-loss throughput on the plain veth (frames/s).
    pub ceiling_fps: f64,
    /// `trafgen` on the same veth, frames/s (None if not installed).
    pub trafgen_fps: Option<f64>,
    /// `io::af_packet` transmit ring on the same veth, frames/s (unpaced).
    pub io_ring_fps: Option<f64>,
}

fn link_tx_packets(ns: &str, ifname: &str) -> Result<u64, LabError> {
    let out = netns::run("ip", &["-n", ns, "-s", "-j", "link", "show", ifname])?;
    let v: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| LabError::Other(e.to_string()))?;
    v[0]["stats64"]["tx"]["packets"]
        .as_u64()
        .ok_or_else(|| LabError::Other("no tx counter".into()))
}

fn trafgen_fps(ns: &str, size: u16, secs: f64) -> Result<Option<f64>, LabError> {
    if netns::run("sh", &["-c", "command -v trafgen"]).is_err() {
        return Ok(None);
    }
    let mut buf = vec![0u8; 9216];
    let (len, _) = sig::build_headers(&mut buf, size, dut::host_mac(1), dut::host_mac(0), None);
    let bytes: Vec<String> = buf[..len].iter().map(|b| format!("0x{b:02x}")).collect();
    let cfg = std::env::temp_dir().join(format!("lab-trafgen-{}.cfg", std::process::id()));
    std::fs::write(&cfg, format!("{{ {} }}\n", bytes.join(", ")))
        .map_err(|e| LabError::Other(e.to_string()))?;
    let before = link_tx_packets(ns, "t1")?;
    let t0 = std::time::Instant::now();
    // trafgen insists on writing /proc/sys/net/core/{r,w}mem_*; where /proc/sys
    // is read-only (containers) shadow those files in a private mount namespace.
    let script = "d=$(mktemp -d); for f in wmem_default rmem_max rmem_default wmem_max; do \
        cat /proc/sys/net/core/$f > $d/$f; [ -w /proc/sys/net/core/$f ] || mount --bind $d/$f /proc/sys/net/core/$f; done; \
        exec trafgen --dev t1 --cpus 1 --conf \"$0\"";
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "unshare", "-m", "sh", "-c", script])
        .arg(&cfg)
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| LabError::Other(format!("trafgen: {e}")))?;
    let r = netns::sleep_checked(secs);
    let after = link_tx_packets(ns, "t1")?;
    let el = t0.elapsed().as_secs_f64();
    // SAFETY: kill(2) of our own child's process group, then reaped.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let _ = child.wait();
    let _ = std::fs::remove_file(&cfg);
    r?;
    Ok(Some((after - before) as f64 / el))
}

/// Unpaced transmit rate of `io::af_packet` (TPACKET_V3 transmit ring, one
/// flush per 64 frames) on `t1` of `ns`, from the interface counter.
fn io_tx_fps(ns: &str, size: u16, secs: f64) -> Result<f64, LabError> {
    use io::Port as _;
    let before = link_tx_packets(ns, "t1")?;
    let t0 = std::time::Instant::now();
    netns::in_netns(ns, move || -> Result<(), LabError> {
        let mut port =
            io::af_packet::AfPacketPort::open("t1", &io::af_packet::AfPacketOptions::tx_only())
                .map_err(|e| LabError::Other(format!("io::af_packet: {e}")))?;
        let mut buf = vec![0u8; 9216];
        let (len, off) =
            sig::build_headers(&mut buf, size, dut::host_mac(1), dut::host_mac(0), None);
        let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
        let mut seq = 0u32;
        while std::time::Instant::now() < end {
            let ts = sig::mono_ns();
            for _ in 0..64 {
                sig::Signature {
                    nonce: 1,
                    stream: 0,
                    seq,
                    ts,
                }
                .encode(&mut buf[off..]);
                if port.send(&buf[..len]) {
                    seq = seq.wrapping_add(1);
                }
            }
            port.flush()
                .map_err(|e| LabError::Other(format!("io::af_packet: {e}")))?;
        }
        Ok(())
    })??;
    let after = link_tx_packets(ns, "t1")?;
    Ok((after - before) as f64 / t0.elapsed().as_secs_f64())
}

/// Calibrate the test bed on a plain veth pair: the generator's unpaced
/// transmit rate alone (best of 3), `trafgen`'s rate on the same veth with
/// the same frame when it is installed, `io::af_packet`'s transmit-ring
/// rate, and the generator + analyzer zero-loss ceiling, at 64 and 1518
/// bytes. Prints a table unless `quiet` and writes `calibration.json` to
/// the output directory (default `lab-results/<UTC time>-calibrate/`).
/// Needs root.
pub fn calibrate(opts: &LabOptions) -> Result<Calibration, LabError> {
    check_root()?;
    netns::install_signal_handlers();
    netns::sweep_stale();
    let spec = plan::DutSpec::new("ceiling", plan::Driver::Wire);
    let d = dut::Dut::start(&spec, 2, &opts.lanyard_bin)?;
    let mut rows = Vec::new();
    // Generator alone (no receive sockets) vs trafgen, same veth, same frame.
    let mut solo = Vec::new();
    {
        let mut txonly = engine::Tester::open_opts(&d.topo.tester, &d.topo.tester_ports(), false)?;
        for size in [64u16, 1518] {
            let spec = engine::TrialSpec {
                streams: vec![engine::Stream {
                    tx: 0,
                    expect: Some(1),
                    also: None,
                    src: dut::host_mac(0),
                    src_count: 1,
                    dst: dut::host_mac(1),
                    dst_count: 1,
                    sizes: vec![size],
                    l3: None,
                    arrival: None,
                    vlan: None,
                    receivers: None,
                }],
                rates: vec![None, None],
                limit: engine::Limit::Duration(2.0),
                drain: 0.01,
                burst: None,
            };
            // Best of 3 interleaved 2-second runs each: the machine is shared.
            let (mut g, mut tg, mut iofps) = (0.0f64, None::<f64>, None::<f64>);
            for _ in 0..3 {
                g = g.max(txonly.run(&spec)?.offered_fps);
                if let Some(t) = trafgen_fps(&d.topo.tester, size, 2.0)? {
                    tg = Some(tg.unwrap_or(0.0).max(t));
                }
                if let Ok(t) = io_tx_fps(&d.topo.tester, size, 2.0) {
                    iofps = Some(iofps.unwrap_or(0.0).max(t));
                }
            }
            solo.push((g, tg, iofps));
        }
    }
    let mut tester = engine::Tester::open(&d.topo.tester, &d.topo.tester_ports())?;
    let plan_text = "name: cal\nduts: [{name: c, driver: wire}]\ntests: [{type: throughput, trial-duration: 2, drain: 0.5, learn-wait: 0.1, search: {resolution: 0.02, max-trials: 8}}]";
    let p = Plan::parse(plan_text)?;
    let test = p.test(0)?;
    let mut progress = procs::Progress::new(60.0, opts.quiet);
    for size in [64u16, 1518] {
        let fs = plan::FrameSize {
            label: size.to_string(),
            sizes: vec![size],
        };
        let mut row = report::ResultRow::new(
            "cal",
            plan::TestKind::Throughput,
            "ceiling",
            &fs.label,
            size as f64,
        );
        let mut ctx = procs::Ctx {
            dut: &d,
            tester: &mut tester,
            progress: &mut progress,
            salt: 0,
        };
        ctx.run_test(&test, &fs, &mut row)?;
        let max = &row.trials[0].result;
        let (gen_solo, tg, iofps) = solo[rows.len()];
        rows.push(CalibrationRow {
            frame_size: size,
            generator_fps: gen_solo,
            generator_with_rx_fps: max.offered_fps,
            received_fps: max.received as f64 / max.tx_seconds,
            ceiling_fps: row.throughput_fps.unwrap_or(0.0),
            trafgen_fps: tg,
            io_ring_fps: iofps,
        });
    }
    progress.finish();
    if !opts.quiet {
        println!("frame | generator kfps (tx only) | trafgen kfps | gen/trafgen | io::af_packet ring kfps | generator+analyzer kfps | received kfps | zero-loss kfps");
        for r in &rows {
            println!(
                "{:>5} | {:>24.1} | {:>12} | {:>11} | {:>23} | {:>23.1} | {:>13.1} | {:>14.1}",
                r.frame_size,
                r.generator_fps / 1e3,
                r.trafgen_fps
                    .map(|t| format!("{:.1}", t / 1e3))
                    .unwrap_or("-".into()),
                r.trafgen_fps
                    .map(|t| format!("{:.2}", r.generator_fps / t))
                    .unwrap_or("-".into()),
                r.io_ring_fps
                    .map(|t| format!("{:.1}", t / 1e3))
                    .unwrap_or("-".into()),
                r.generator_with_rx_fps / 1e3,
                r.received_fps / 1e3,
                r.ceiling_fps / 1e3,
            );
        }
    }
    let cal = Calibration { rows };
    let dir = opts.out_dir.clone().unwrap_or_else(|| {
        PathBuf::from("lab-results").join(format!("{}-calibrate", timestamp(now_unix())))
    });
    std::fs::create_dir_all(&dir)
        .map_err(|e| LabError::Output(format!("{}: {e}", dir.display())))?;
    let json = serde_json::to_string_pretty(&cal).map_err(|e| LabError::Output(e.to_string()))?;
    std::fs::write(dir.join("calibration.json"), json)
        .map_err(|e| LabError::Output(format!("calibration.json: {e}")))?;
    if !opts.quiet {
        println!("results: {}", dir.display());
    }
    Ok(cal)
}

#[cfg(test)]
mod tests {
    use super::{plan_for_run, Plan};

    #[test]
    fn repeats_alternate_the_dut_order() {
        let p = Plan::parse(
            "name: t\nduts: [{name: a, driver: wire}, {name: b, driver: linux-bridge}, {name: c, driver: lanyard}]\ntests: [{type: throughput}]",
        )
        .unwrap();
        let names = |k| -> Vec<String> {
            plan_for_run(&p, k)
                .duts
                .iter()
                .map(|d| d.name.clone())
                .collect()
        };
        assert_eq!(names(1), ["a", "b", "c"]);
        assert_eq!(names(2), ["c", "b", "a"]);
        assert_eq!(names(3), ["a", "b", "c"]);
    }
    #[test]
    fn timestamp_format() {
        assert_eq!(super::timestamp(0), "19700101-000000");
    }

    #[test]
    fn provider_edge_modes_take_their_own_tests() {
        let p = crate::plan::Plan::parse(
            "
name: pe
duts:
  - {name: vpn, driver: lanyard-pe, pe-mode: l3vpn}
  - {name: l3, driver: lanyard-pe, pe-mode: l3}
  - {name: pw, driver: lanyard-pe}
  - {name: ceiling, driver: wire}
  - {name: router, driver: linux-router}
tests:
  - {type: throughput, layer: 3, vlans: 8, frame-sizes: [68]}
  - {type: throughput, layer: 3, frame-sizes: [64]}
  - {type: throughput, vlans: 8, frame-sizes: [68]}
  - {type: disruption, layer: 3, vlans: 8, rate: 100, frame-sizes: [68], commands: [{at: 1, run: 'true'}]}
",
        )
        .unwrap();
        let na = |d: usize, t: usize| super::applicable(&p.duts[d], &p.test(t).unwrap());
        // Tagged layer 3: the L3VPN PEs and the wire (the ceiling).
        assert_eq!((na(0, 0), na(3, 0)), (None, None));
        assert!(na(1, 0).unwrap().contains("untagged"));
        assert!(na(2, 0).unwrap().contains("layer-2 tests"));
        assert!(na(4, 0).unwrap().contains("no 802.1Q"));
        // Untagged layer 3: the global-table baseline.
        assert_eq!(na(1, 1), None);
        assert!(na(0, 1).unwrap().contains("vlans: N"));
        // Layer 2 stays the pseudowires'.
        assert_eq!(na(2, 2), None);
        assert!(na(0, 2).unwrap().contains("layer-3 tests only"));
        assert!(na(0, 3).unwrap().contains("disruption"));
    }
}
