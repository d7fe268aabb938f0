//! DUT drivers: build the topology, start and configure the device under
//! test, tear it all down on drop.

use crate::mcsetup::{KernelMroutes, McPattern};
use crate::netns::{run, run_in, Topology, Wiring};
use crate::plan::{ConvTopology, Driver, DutSpec, EventSide, Failover, Test};
use crate::routes::{Route4, Route6};
use crate::sig::Mac;
pub use crate::sig::{host_ip, host_mac};
use crate::LabError;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a DUT is configured for a test: layer-3 mode (lanyard: routed
/// ports) and the synthetic route tables. The engine restarts a DUT when
/// the next test needs a different setup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Setup {
    /// Routed ports (lanyard); linux-router always routes.
    pub layer3: bool,
    /// IPv4 routes.
    pub routes: u32,
    /// IPv6 routes.
    pub routes6: u32,
    /// The routes are learned by OSPF (`routes-from: ospf`, `crate::ospf`)
    /// instead of installed statically: lanyard and linux-router only.
    pub ospf: bool,
    /// Convergence tests: sw3 backs up sw2 (lanyard `backup-pairs`, the
    /// linux-bridge `failover` mode).
    pub backup_pair: bool,
    /// Multicast tests: IGMP snooping (layer 2) or multicast routing with
    /// static (S,G) routes for this pattern (layer 3).
    pub multicast: Option<McSetup>,
    /// Mirror (SPAN) sessions: session k copies what sw1 receives to
    /// sw(3 + k) (see `mirror.rs`); 0: none.
    pub mirrors: u32,
    /// Where the tester and the DUT run (the plan's, the same for all).
    pub cpus: crate::cpuplan::CpuPlan,
    /// lanyard-pe: the test's tagged VLANs where the PEs' configuration
    /// depends on them (VLAN circuits, the layer-2 baseline); else 0.
    pub vlans: u16,
    /// Inline engine: the test's subscribers (`flows: N`), provisioned
    /// at start beside the lab's two ([`crate::flowset::provisioning`]).
    pub subscribers: u32,
    /// Inline engine, bandwidth-share tests: services, controllers,
    /// package weights and the three subscribers (`crate::bwspec`).
    pub bw_share: Option<crate::bwspec::Controllers>,
    /// Inline engine, subscribers tests: the subscribers the test loads
    /// itself (`crate::subscale`); the engine gets room for them
    /// (`max-subscribers`).
    pub provision: u32,
}

/// What a multicast test needs from the DUT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McSetup {
    /// Layer 2: IGMP snooping in the ports' VLAN / bridge. The pattern is
    /// part of the setup so that a test with other groups or ports starts
    /// on a fresh DUT: memberships left by the previous test would
    /// otherwise send its groups to ports that are sources now.
    Snooping(McPattern),
    /// Layer 3: multicast routing, the pattern's (S,G) routes installed
    /// statically (no PIM daemon in the lab).
    Routes(McPattern),
}

impl Setup {
    /// The DUT's own setup, before any test: its `routes` / `routes6`,
    /// layer 3 on linux-router.
    pub fn of(spec: &DutSpec) -> Setup {
        Setup {
            layer3: spec.driver == Driver::LinuxRouter,
            routes: spec.routes.unwrap_or(0),
            routes6: spec.routes6.unwrap_or(0),
            ospf: false,
            backup_pair: false,
            multicast: None,
            mirrors: 0,
            cpus: Default::default(),
            vlans: 0,
            subscribers: 0,
            bw_share: None,
            provision: 0,
        }
    }

    /// True when the DUT forwards multicast by static routes (IGMP
    /// reports change nothing: no join / leave delay to measure).
    pub fn multicast_static(&self) -> bool {
        matches!(self.multicast, Some(McSetup::Routes(_)))
    }

    /// What `test` needs from `spec`: the test's route counts override the
    /// DUT's; only lanyard switches between layer 2 and layer 3.
    pub fn for_test(spec: &DutSpec, test: &Test) -> Setup {
        let l3 =
            test.layer == Some(3) || (test.layer.is_none() && spec.driver == Driver::LinuxRouter);
        Setup {
            layer3: match spec.driver {
                Driver::LinuxRouter => true,
                // Inline: a bump in the wire, never routed ports.
                Driver::Lanyard => l3 && spec.inline.is_none(),
                _ => false,
            },
            routes: test.routes.or(spec.routes).unwrap_or(0),
            routes6: test.routes6.or(spec.routes6).unwrap_or(0),
            ospf: test.routes_from == crate::plan::RoutesFrom::Ospf
                && match spec.driver {
                    Driver::LinuxRouter => true,
                    Driver::Lanyard => l3 && spec.inline.is_none(),
                    _ => false,
                },
            backup_pair: test
                .convergence
                .as_ref()
                .is_some_and(|c| c.topology == ConvTopology::BackupPair)
                && match spec.driver {
                    Driver::Lanyard => spec.inline.is_none(),
                    Driver::LinuxBridge => spec.failover.is_some(),
                    _ => false,
                },
            multicast: test.multicast.as_ref().map(|m| {
                let routed = match spec.driver {
                    Driver::LinuxRouter => true,
                    Driver::Lanyard => l3,
                    _ => false,
                };
                if routed {
                    McSetup::Routes(McPattern::of(m))
                } else {
                    McSetup::Snooping(McPattern::of(m))
                }
            }),
            mirrors: match spec.driver {
                Driver::LinuxBridge | Driver::Ovs | Driver::Lanyard => test.mirror_sessions,
                _ => 0,
            },
            cpus: Default::default(),
            vlans: match spec.driver {
                Driver::LanyardPe
                    if matches!(
                        spec.pe_mode,
                        Some(crate::plan::PeMode::L2 | crate::plan::PeMode::L3vpn)
                    ) || spec.circuits == Some(crate::plan::Circuits::Vlan) =>
                {
                    test.vlans
                }
                _ => 0,
            },
            subscribers: match (spec.driver, spec.inline) {
                (Driver::Lanyard, Some(crate::plan::InlineMode::Engine)) => test.subscribers,
                _ => 0,
            },
            bw_share: match (spec.driver, spec.inline) {
                (Driver::Lanyard, Some(crate::plan::InlineMode::Engine)) => {
                    test.bw_share.as_ref().map(|b| b.controllers)
                }
                _ => None,
            },
            provision: match (spec.driver, spec.inline, &test.provision) {
                (Driver::Lanyard, Some(crate::plan::InlineMode::Engine), Some(p)) => p.subscribers,
                _ => 0,
            },
        }
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if self.layer3 {
            v.push("layer 3".to_string());
        }
        if self.backup_pair {
            v.push("backup pair sw2/sw3".to_string());
        }
        match self.multicast {
            Some(McSetup::Snooping(p)) => v.push(format!(
                "IGMP snooping, {} sources, {} receivers, {} groups",
                p.sources, p.receivers, p.groups
            )),
            Some(McSetup::Routes(p)) => v.push(format!(
                "multicast routing, {} static (S,G) routes",
                p.sources as u64 * p.groups as u64
            )),
            None => {}
        }
        if self.mirrors > 0 {
            v.push(format!("{} mirror sessions", self.mirrors));
        }
        if self.vlans > 0 {
            v.push(format!("{} VLANs", self.vlans));
        }
        if self.subscribers > 0 {
            v.push(format!("{} subscribers", self.subscribers));
        }
        if self.provision > 0 {
            v.push(format!("room for {} more subscribers", self.provision));
        }
        if let Some(b) = &self.bw_share {
            v.push(format!(
                "{} services with controllers, gold/silver/bronze weights {}/{}/{}",
                b.n, b.weights[0], b.weights[1], b.weights[2]
            ));
        }
        if self.routes + self.routes6 > 0 {
            v.push(format!(
                "{} IPv4 + {} IPv6 routes{}",
                self.routes,
                self.routes6,
                if self.ospf { " by OSPF" } else { "" }
            ));
        }
        if v.is_empty() {
            "default setup".into()
        } else {
            v.join(", ")
        }
    }
}

/// A running DUT with its topology.
pub struct Dut {
    /// Plan entry.
    pub spec: DutSpec,
    /// Configuration it was started with.
    pub setup: Setup,
    /// Notes for the report (version, port type, …).
    pub info: Vec<String>,
    /// MACs of the DUT ports (linux-router, lanyard in layer 3: next-hop
    /// (router) MACs).
    pub port_macs: Vec<Mac>,
    /// lanyard-pe in `l3vpn` mode: per tester port, the router MAC of each
    /// VLAN's subinterface (the gateway of that VLAN's VRF), in VLAN order
    /// from [`crate::plan::FIRST_VLAN`]; empty otherwise.
    pub vlan_macs: Vec<Vec<Mac>>,
    /// IPv4 routes (installed on routing DUTs; the generator sends to
    /// addresses in them on every DUT).
    pub routes4: Arc<Vec<Route4>>,
    /// IPv6 routes, likewise.
    pub routes6: Arc<Vec<Route6>>,
    /// Seconds from spawning the DUT to it being ready (routes included).
    pub start_seconds: f64,
    /// DUT processes; behind a lock so `event: kill` can replace one.
    children: Mutex<Vec<Child>>,
    /// The linux-bridge failover script (its own process group).
    script: Option<Child>,
    ovs_dir: Option<PathBuf>,
    lanyard: Option<(PathBuf, PathBuf)>,
    /// linux-router, multicast: the socket holding the kernel's static
    /// (S,G) routes.
    mroutes: Option<KernelMroutes>,
    /// lanyard-pair, lanyard-rstp: the two nodes.
    pair: Vec<PairNode>,
    /// lanyard-rstp: the second access switch's management socket (the
    /// first is `lanyard`'s).
    access2: Option<PathBuf>,
    /// lanyard-pe: PE2 (PE1 is `lanyard`).
    pe2: Option<PeTwo>,
    /// `routes-from: ospf`: the DUT's FRR and the tester's injectors.
    ospf: Option<crate::ospf::OspfLab>,
    /// Topology (dropped last: namespaces go after the processes).
    pub topo: Topology,
}

impl Drop for Dut {
    fn drop(&mut self) {
        if let Some(o) = self.ospf.take() {
            // Configs and logs beside the DUT's, then the daemons stop.
            o.save_logs(&self.topo.tmp);
            drop(o);
        }
        if let Some(c) = self.script.as_mut() {
            // SAFETY: kill(2) of the process group we created for the script.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
        let ch = self.children.get_mut().unwrap_or_else(|e| e.into_inner());
        for c in ch.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Processes gone, namespaces and files not yet (`topo` drops last).
        keep_logs(&self.spec.name, &self.topo.tmp);
    }
}

thread_local! {
    /// Where a stopping DUT's logs and configurations are copied (the
    /// run's `logs/` directory, [`keep_logs_in`]) and how many DUTs were
    /// kept; `None`: not kept. Per thread: a run's DUTs stop on the thread
    /// that runs the plan, and two plans may run at once (tests).
    static KEEP_LOGS: std::cell::RefCell<Option<(PathBuf, usize)>> =
        const { std::cell::RefCell::new(None) };
}

/// Keep every DUT's logs and configurations under `dir` from now on
/// (`dir/<dut>-<n>/…`, n counting the DUT starts of the run), or no
/// longer (`None`). A DUT's files live in its topology's temporary
/// directory, which goes with it: without this, the log of a node that
/// misbehaved in a trial is gone by the time the report is read.
pub fn keep_logs_in(dir: Option<PathBuf>) {
    KEEP_LOGS.with(|k| *k.borrow_mut() = dir.map(|d| (d, 0)));
}

/// Files worth keeping: logs, configurations, control scripts.
fn kept(name: &str) -> bool {
    [".log", ".yaml", ".conf", ".sh"]
        .iter()
        .any(|x| name.ends_with(x))
}

/// Copies the kept files under `from` to the next `<dut>-<n>` directory.
fn keep_logs(dut: &str, from: &Path) {
    let Some(dest) = KEEP_LOGS.with(|k| {
        let mut g = k.borrow_mut();
        let (root, n) = g.as_mut()?;
        *n += 1;
        Some(root.join(format!("{dut}-{n}")))
    }) else {
        return;
    };
    let mut stack = vec![from.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && kept(&e.file_name().to_string_lossy()) {
                let Ok(rel) = p.strip_prefix(from) else {
                    continue;
                };
                let to = dest.join(rel);
                if let Some(parent) = to.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                let _ = std::fs::copy(&p, &to);
            }
        }
    }
}

/// The DUT's IPv4 address on port `p`: 198.18.<p+1>.1/24.
pub fn dut_ip(p: usize) -> String {
    format!("198.18.{}.1/24", p + 1)
}

/// The DUT's IPv6 address on port `p`: 2001:2:0:<p+1>::1/64 (the hosts
/// are `::2`, see [`crate::sig::host_ip6`]).
pub fn dut_ip6(p: usize) -> String {
    format!("2001:2:0:{:x}::1/64", p + 1)
}

fn host_ip_str(p: usize) -> String {
    Ipv4Addr::from(host_ip(p)).to_string()
}

fn host_ip6_str(p: usize) -> String {
    Ipv6Addr::from(crate::sig::host_ip6(p)).to_string()
}

fn parse_mac(s: &str) -> Option<Mac> {
    let v: Vec<u8> = s
        .split(':')
        .filter_map(|x| u8::from_str_radix(x, 16).ok())
        .collect();
    v.try_into().ok()
}

fn link_mac(ns: &str, ifname: &str) -> Result<Mac, LabError> {
    let out = run("ip", &["-n", ns, "-br", "link", "show", ifname])?;
    out.split_whitespace()
        .find_map(parse_mac)
        .ok_or_else(|| LabError::Other(format!("no MAC for {ifname} in {out:?}")))
}

fn wait_for(what: &str, secs: f64, mut ok: impl FnMut() -> bool) -> Result<(), LabError> {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    loop {
        if ok() {
            return Ok(());
        }
        crate::netns::check_interrupt()?;
        if Instant::now() > end {
            return Err(LabError::Dut(format!("timed out waiting for {what}")));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(8)..].join(" | ")
}

impl Dut {
    /// How the tester ports are wired for this driver.
    pub fn wiring(driver: Driver) -> Wiring {
        match driver {
            Driver::Wire => Wiring::Loop,
            _ => Wiring::ToDut,
        }
    }

    /// True for drivers without a device (plain veth pairs).
    pub fn is_wire(&self) -> bool {
        self.spec.driver == Driver::Wire
    }

    /// True if the DUT routes test frames (decrements the TTL, rewrites
    /// the MACs): linux-router, and lanyard with routed ports.
    pub fn routes_packets(&self) -> bool {
        self.routers() > 0
    }

    /// Routers a routed test frame crosses (each decrements its TTL):
    /// two on a `lanyard-pe` in `l3` or `l3vpn` mode (ingress and egress
    /// PE), one on a router, none on a switch or the wire.
    pub fn routers(&self) -> u8 {
        match self.spec.driver {
            Driver::LinuxRouter => 1,
            Driver::Lanyard => self.setup.layer3 as u8,
            Driver::LanyardPe if self.spec.pe_mode.is_some_and(|m| m.routed()) => 2,
            _ => 0,
        }
    }

    /// Create the topology with `ports` ports and start the DUT with its
    /// own setup ([`Setup::of`]).
    pub fn start(spec: &DutSpec, ports: usize, lanyard_bin: &Path) -> Result<Dut, LabError> {
        Self::start_with(spec, ports, lanyard_bin, Setup::of(spec))
    }

    /// Create the topology with `ports` ports and start the DUT configured
    /// as `setup` says.
    pub fn start_with(
        spec: &DutSpec,
        ports: usize,
        lanyard_bin: &Path,
        setup: Setup,
    ) -> Result<Dut, LabError> {
        let ports = if spec.driver == Driver::Wire {
            ports.div_ceil(2) * 2
        } else {
            ports
        };
        let topo = Topology::create(
            ports,
            Self::wiring(spec.driver),
            spec.driver == Driver::LinuxRouter,
        )?;
        let mut d = Dut {
            spec: spec.clone(),
            setup,
            info: Vec::new(),
            port_macs: Vec::new(),
            vlan_macs: Vec::new(),
            routes4: Arc::new(crate::routes::v4(setup.routes, ports)),
            routes6: Arc::new(crate::routes::v6(setup.routes6, ports)),
            start_seconds: 0.0,
            children: Mutex::new(Vec::new()),
            script: None,
            ovs_dir: None,
            lanyard: None,
            mroutes: None,
            pair: Vec::new(),
            access2: None,
            pe2: None,
            ospf: None,
            topo,
        };
        let t0 = Instant::now();
        match spec.driver {
            Driver::Wire => d.info.push("veth pair t(2k-1) <-> t(2k)".into()),
            Driver::LinuxBridge => d.start_bridge(None)?,
            Driver::Lossy => d.start_bridge(spec.rate_kbit)?,
            Driver::LinuxRouter => d.start_router()?,
            Driver::Ovs => d.start_ovs()?,
            Driver::Lanyard => {
                let bin = spec
                    .binary
                    .clone()
                    .unwrap_or_else(|| lanyard_bin.to_path_buf());
                d.start_lanyard(&bin)?
            }
            Driver::LanyardPair => {
                let bin = spec
                    .binary
                    .clone()
                    .unwrap_or_else(|| lanyard_bin.to_path_buf());
                d.start_pair(&bin)?
            }
            Driver::LanyardRstp => {
                let bin = spec
                    .binary
                    .clone()
                    .unwrap_or_else(|| lanyard_bin.to_path_buf());
                d.start_rstp(&bin)?
            }
            Driver::LanyardPe => {
                let bin = spec
                    .binary
                    .clone()
                    .unwrap_or_else(|| lanyard_bin.to_path_buf());
                d.start_pe(&bin)?
            }
        }
        d.start_seconds = t0.elapsed().as_secs_f64();
        d.apply_cpu_plan()?;
        if setup.routes + setup.routes6 > 0 {
            let how = if d.ospf.is_some() {
                format!(
                    "learned by OSPF; all in the FIB {:.1} s after start",
                    d.start_seconds
                )
            } else if d.routes_packets() {
                format!("installed; ready {:.1} s after start", d.start_seconds)
            } else {
                "not installed (the DUT does not route in this setup); destinations sampled from them"
                    .into()
            };
            d.info.push(format!(
                "{} IPv4 + {} IPv6 routes {how}",
                setup.routes, setup.routes6
            ));
        }
        Ok(d)
    }

    /// Put the tester's and the DUT's work where the CPU plan says: receive
    /// work of the tester ports on the tester CPUs and of the DUT ports on
    /// the DUT CPUs (RPS), NAPI threads likewise where the ports have NAPI,
    /// and every DUT process thread on the DUT CPUs.
    fn apply_cpu_plan(&mut self) -> Result<(), LabError> {
        let crate::cpuplan::CpuPlan::Split { tester, dut } = self.setup.cpus else {
            return Ok(());
        };
        use crate::cpuplan::{
            pin_namespace_processes, pin_napi_threads, steer_receive, threaded_napi,
        };
        steer_receive(&self.topo.tester, &self.topo.tester_ports(), tester)?;
        if self.is_wire() {
            return Ok(());
        }
        let mut sw = self.sw();
        if let Some(pe2) = &self.pe2 {
            // lanyard-pe: sw2 and PE2's uplink ends are in PE2's namespace;
            // both PEs get the DUT CPUs (the same share as any DUT).
            sw.retain(|p| p != "sw2");
            let mut theirs = vec!["sw2".to_string()];
            theirs.extend(crate::lanyard_pe::uplink_names(pe2.bed.uplinks));
            steer_receive(&pe2.ns, &theirs, dut)?;
            sw.extend(crate::lanyard_pe::uplink_names(pe2.bed.uplinks));
            pin_namespace_processes(&pe2.ns, dut);
        }
        steer_receive(&self.topo.dut, &sw, dut)?;
        let napi = threaded_napi(&self.topo.dut, &sw);
        let threads = pin_napi_threads("sw", dut);
        let _ = pin_napi_threads("t", tester);
        // lanyard-pair: the partner only. Three Lanyards on one DUT core
        // starve each other (keepalives and LACPDUs late, throughput a
        // tenth): the nodes run wherever the scheduler puts them.
        let procs = pin_namespace_processes(&self.topo.dut, dut);
        let mut how = vec![format!("RPS on sw1..sw{}", sw.len())];
        if !napi.is_empty() {
            how.push(format!(
                "threaded NAPI on {} port(s), {threads} thread(s) pinned",
                napi.len()
            ));
        }
        if procs > 0 {
            how.push(format!("{procs} process thread(s) pinned"));
        }
        if !self.pair.is_empty() {
            how.push("pair nodes not pinned".into());
        }
        if self.pe2.is_some() {
            how.push("both PEs' threads pinned".into());
        }
        self.info.push(format!(
            "CPU plan: DUT on CPU {} ({}), tester on CPU {}",
            dut.list(),
            how.join(", "),
            tester.list()
        ));
        Ok(())
    }

    /// Re-pin the DUT's processes after one was replaced (`event: kill`).
    fn repin_processes(&self) {
        if let Some(set) = self.setup.cpus.dut() {
            crate::cpuplan::pin_namespace_processes(&self.topo.dut, set);
            if let Some(pe2) = &self.pe2 {
                crate::cpuplan::pin_namespace_processes(&pe2.ns, set);
            }
        }
    }

    /// Add the synthetic routes to the kernel of the DUT namespace, with
    /// `ip -batch` (one process for all of them).
    fn kernel_routes(&self) -> Result<(), LabError> {
        if self.routes4.is_empty() && self.routes6.is_empty() {
            return Ok(());
        }
        let mut b = crate::routes::ip_batch(&self.routes4, host_ip_str);
        b.push_str(&crate::routes::ip_batch(&self.routes6, host_ip6_str));
        let f = self.topo.tmp.join("routes.batch");
        std::fs::write(&f, b).map_err(|e| LabError::Dut(format!("write {}: {e}", f.display())))?;
        run(
            "ip",
            &["-n", &self.topo.dut, "-batch", &f.to_string_lossy()],
        )?;
        Ok(())
    }

    /// Permanent neighbour entries for the emulated hosts (IPv4 and IPv6)
    /// on `dev(i)` (the port, or lanyard's TAP twin), in one `ip -batch`.
    fn static_neighbours(&self, dev: impl Fn(usize) -> String) -> Result<(), LabError> {
        let mut b = String::new();
        for i in 0..self.topo.ports {
            let mac = crate::sig::mac_str(&host_mac(i));
            for ip in [host_ip_str(i), host_ip6_str(i)] {
                b.push_str(&format!(
                    "neigh replace {ip} lladdr {mac} dev {} nud permanent\n",
                    dev(i)
                ));
            }
        }
        let f = self.topo.tmp.join("neigh.batch");
        std::fs::write(&f, b).map_err(|e| LabError::Dut(format!("write {}: {e}", f.display())))?;
        run(
            "ip",
            &["-n", &self.topo.dut, "-batch", &f.to_string_lossy()],
        )?;
        Ok(())
    }

    /// The OSPF setup (`routes-from: ospf`) and its convergence times.
    pub fn ospf(&self) -> Option<&crate::ospf::OspfLab> {
        self.ospf.as_ref()
    }

    /// `routes-from: ospf`: FRR on the DUT's routed interfaces `ifaces`
    /// (lanyard's TAP twins with FPM to Lanyard on `fpm`, or linux-router's
    /// ports), the injectors on the receiving tester ports, then a wait
    /// for every adjacency and every route in the DUT's FIB (Lanyard's
    /// `show ip route summary`, the kernel's `ip route` on Linux).
    fn start_ospf(&mut self, ifaces: &[String], fpm: Option<u16>) -> Result<(), LabError> {
        let o = crate::ospf::OspfLab::start(
            &self.topo.tester,
            &self.topo.dut,
            &self.topo.tmp,
            &self.routes4,
            ifaces,
            fpm,
            // Lanyard's routed ports carry 9,206 (lanyard_config_l3).
            fpm.map(|_| 9206),
        )?;
        o.pin(self.setup.cpus);
        self.ospf = Some(o);
        // Per phase: a minute, plus a second per 400 routes (docs/lab.md
        // "Routes learned by OSPF" has measured times).
        let timeout = Duration::from_secs_f64(60.0 + self.routes4.len() as f64 / 400.0);
        let ns = self.topo.dut.clone();
        let lanyard = fpm.is_some();
        let mut o = self.ospf.take().expect("just set");
        let res = o.converge(timeout, || {
            if lanyard {
                self.lanyard_show(&["ip", "route", "summary"])
                    .map(|v| crate::ospf::lanyard_ospf_routes(&v))
                    .unwrap_or(0)
            } else {
                crate::ospf::kernel_ospf_routes(&ns)
            }
        });
        let fib = if lanyard {
            format!(
                "on the TAP twins {}..{}, routes to Lanyard over FPM",
                ifaces.first().map_or("", |s| s.as_str()),
                ifaces.last().map_or("", |s| s.as_str())
            )
        } else {
            format!(
                "on {}..{}, routes into the kernel",
                ifaces.first().map_or("", |s| s.as_str()),
                ifaces.last().map_or("", |s| s.as_str())
            )
        };
        if res.is_ok() {
            self.info.push(o.describe(&fib));
        }
        self.ospf = Some(o);
        res
    }

    fn sw(&self) -> Vec<String> {
        (1..=self.topo.ports).map(|i| format!("sw{i}")).collect()
    }

    fn start_bridge(&mut self, tbf_kbit: Option<u64>) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        if self.spec.mac_limit.is_some() {
            return Err(LabError::Unsupported(
                "mac-limit (iproute2 here cannot set the bridge's fdb_max_learned)".into(),
            ));
        }
        let mut args = vec!["-n", &ns, "link", "add", "br0", "type", "bridge"];
        let ageing;
        if let Some(a) = self.spec.mac_aging {
            ageing = (a as u64 * 100).to_string();
            args.extend_from_slice(&["ageing_time", &ageing]);
        }
        run("ip", &args)?;
        for p in self.sw() {
            if crate::mirror_setup::is_destination(&p, self.setup.mirrors) {
                continue;
            }
            run("ip", &["-n", &ns, "link", "set", &p, "master", "br0"])?;
            if self.spec.learning == Some(false) {
                run(
                    "bridge",
                    &["-n", &ns, "link", "set", "dev", &p, "learning", "off"],
                )?;
            }
            if let Some(k) = tbf_kbit {
                let rate = format!("{k}kbit");
                let limit = tbf_limit_bytes(k).to_string();
                run(
                    "tc",
                    &[
                        "-n", &ns, "qdisc", "add", "dev", &p, "root", "tbf", "rate", &rate,
                        "burst", "6000", "limit", &limit,
                    ],
                )?;
            }
        }
        if self.setup.multicast.is_some() {
            self.bridge_snooping()?;
        }
        run("ip", &["-n", &ns, "link", "set", "br0", "up"])?;
        if self.setup.mirrors > 0 {
            let how = crate::mirror_setup::bridge_setup(&ns, self.setup.mirrors)?;
            self.info.push(how);
        }
        if self.setup.multicast.is_some() && self.spec.igmp_querier != Some(false) {
            // Past the querier delay (see bridge_snooping).
            crate::netns::sleep_checked(1.5)?;
        }
        let kv = run("uname", &["-r"]).unwrap_or_default();
        self.info
            .push(format!("Linux bridge, kernel {}", kv.trim()));
        if self.setup.backup_pair {
            self.start_failover()?;
        }
        if let Some(k) = tbf_kbit {
            self.info.push(format!(
                "tbf rate {k} kbit/s, burst 6000 B, limit {} B on each sw port",
                tbf_limit_bytes(k)
            ));
        }
        Ok(())
    }

    /// Multicast, linux-bridge: IGMP snooping (IGMPv3, so source lists and
    /// BLOCK records count), with the bridge's own querier unless
    /// `igmp-querier: false`. The bridge forwards a group only to joined
    /// ports while it knows a querier exists (its own, or one heard on a
    /// port); with none it floods every multicast frame, snooping or not.
    fn bridge_snooping(&mut self) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        let querier = self.spec.igmp_querier.unwrap_or(true);
        let set = |kv: &[&str]| -> Result<String, LabError> {
            let mut a = vec!["-n", ns.as_str(), "link", "set", "br0", "type", "bridge"];
            a.extend_from_slice(kv);
            run("ip", &a)
        };
        set(&["mcast_snooping", "1", "mcast_igmp_version", "3"])?;
        // Enabling the querier arms a "querier delay" of one query
        // response interval (default 10 s) during which the bridge still
        // floods: shorten the interval (centiseconds) first, in its own
        // command, so the delay is 1 s.
        set(&["mcast_query_response_interval", "100"])?;
        set(&["mcast_querier", if querier { "1" } else { "0" }])?;
        let fast = self.spec.fast_leave.unwrap_or(false);
        if fast {
            for p in self.sw() {
                run(
                    "bridge",
                    &["-n", &ns, "link", "set", "dev", &p, "fastleave", "on"],
                )?;
            }
        }
        self.info.push(format!(
            "IGMP snooping on (IGMPv3), querier {}, fast leave {}",
            if querier {
                "on (the bridge's own)"
            } else {
                "off"
            },
            if fast { "on" } else { "off" }
        ));
        Ok(())
    }

    /// Convergence, linux-bridge: make sw3 back up sw2 as `failover` says.
    fn start_failover(&mut self) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        if self.topo.ports < 3 {
            return Err(LabError::Dut("a backup pair needs sw1..sw3".into()));
        }
        match self.spec.failover {
            None => {}
            Some(Failover::BackupPort) => {
                run(
                    "bridge",
                    &["-n", &ns, "link", "set", "dev", "sw2", "backup_port", "sw3"],
                )
                .map_err(|e| {
                    LabError::Unsupported(format!(
                        "failover: backup-port (bridge link set dev sw2 backup_port sw3): {e}"
                    ))
                })?;
                self.info.push(
                    "failover: backup-port — bridge link set dev sw2 backup_port sw3 (the kernel \
                     sends known unicast for sw2 out of sw3 while sw2 has no carrier, and keeps \
                     sw2's FDB entries; sw3 is an ordinary forwarding port)"
                        .into(),
                );
            }
            Some(Failover::Script) => {
                let script = self.topo.tmp.join("failover.sh");
                let log = self.topo.tmp.join("failover.log");
                std::fs::write(&script, FAILOVER_SCRIPT)
                    .map_err(|e| LabError::Dut(format!("write {}: {e}", script.display())))?;
                let _ = std::fs::remove_file(&log);
                let child = Command::new("ip")
                    .args(["netns", "exec", &ns, "sh"])
                    .arg(&script)
                    .arg(&log)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .process_group(0)
                    .spawn()
                    .map_err(|e| LabError::Dut(format!("spawn failover script: {e}")))?;
                self.script = Some(child);
                wait_for("the failover script to disable sw3", 5.0, || {
                    self.bridge_port_state("sw3").as_deref() == Some("disabled")
                })?;
                // Let `ip monitor` subscribe before anything happens.
                std::thread::sleep(Duration::from_millis(300));
                self.info.push(
                    "failover: script — sw3 `state 0` (disabled: nothing in or out); a shell loop \
                     on `ip -o monitor link` runs `bridge link set dev sw3 state 3` when sw2 goes \
                     down and `state 0` when it comes back"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// A bridge port's STP state (`forwarding`, `disabled`, …).
    pub fn bridge_port_state(&self, port: &str) -> Option<String> {
        let out = run(
            "bridge",
            &["-n", &self.topo.dut, "-j", "link", "show", "dev", port],
        )
        .ok()?;
        let v: serde_json::Value = serde_json::from_str(&out).ok()?;
        v[0]["state"].as_str().map(String::from)
    }

    /// Namespace and interface of the primary link's end on `side`
    /// (convergence: `sw2` in the DUT namespace, or the tester's `t2`).
    pub fn primary_link(&self, side: EventSide) -> Result<(String, String), LabError> {
        match side {
            EventSide::Tester => Ok((self.topo.tester.clone(), "t2".into())),
            EventSide::Dut if self.is_wire() => Err(LabError::Unsupported(
                "link-down on the DUT side: the wire DUT has no DUT namespace (use event-side: tester)"
                    .into(),
            )),
            EventSide::Dut => Ok((self.topo.dut.clone(), "sw2".into())),
        }
    }

    /// A `link-down` event made ready ahead of time: `ip -n NS -batch -`
    /// already running (namespace entered, netlink socket open), waiting
    /// for its command on stdin, so the event's moment is not spent
    /// starting a process. [`LinkDown::fire`] sends `link set dev IF down`.
    pub fn prepare_link_down(&self, side: EventSide) -> Result<LinkDown, LabError> {
        let (ns, ifname) = self.primary_link(side)?;
        let child = Command::new("ip")
            .args(["-n", &ns, "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LabError::Command(format!("ip -n {ns} -batch -: {e}")))?;
        // Give it time to start and reach its read.
        std::thread::sleep(Duration::from_millis(20));
        Ok(LinkDown { child, ifname })
    }

    /// `ip -n NS link set IF up|down`.
    pub fn set_link(&self, ns: &str, ifname: &str, up: bool) -> Result<(), LabError> {
        run(
            "ip",
            &[
                "-n",
                ns,
                "link",
                "set",
                ifname,
                if up { "up" } else { "down" },
            ],
        )
        .map(|_| ())
    }

    /// Wait until `ifname` in `ns` is operationally up (carrier on both ends).
    pub fn wait_oper_up(&self, ns: &str, ifname: &str, secs: f64) -> Result<(), LabError> {
        wait_for(&format!("{ifname} to come up"), secs, || {
            run("ip", &["-n", ns, "-j", "link", "show", "dev", ifname])
                .ok()
                .and_then(|o| serde_json::from_str::<serde_json::Value>(&o).ok())
                .is_some_and(|v| v[0]["operstate"] == "UP")
        })
    }

    /// After the primary link is back: return the DUT to "primary active,
    /// backup standby" where it does not do so by itself. Script failover:
    /// wait for the script to disable sw3 again. Lanyard with `preempt:
    /// false`: take the (active) backup down and up, so the pair fails
    /// back to the primary and the backup returns as standby.
    pub fn fail_back(&self, secs: f64) -> Result<(), LabError> {
        if !self.setup.backup_pair {
            return Ok(());
        }
        match self.spec.driver {
            Driver::LinuxBridge if self.spec.failover == Some(Failover::Script) => {
                wait_for("the failover script to disable sw3 again", secs, || {
                    self.bridge_port_state("sw3").as_deref() == Some("disabled")
                })
            }
            Driver::Lanyard if self.spec.preempt != Some(true) => {
                let ns = self.topo.dut.clone();
                self.set_link(&ns, "sw3", false)?;
                std::thread::sleep(Duration::from_millis(100));
                self.set_link(&ns, "sw3", true)?;
                self.wait_oper_up(&ns, "sw3", secs)
            }
            _ => Ok(()),
        }
    }

    /// When the failover script first switched to `what` (`backup` or
    /// `primary`) at or after `since` (`CLOCK_REALTIME` seconds), from its log.
    pub fn script_switched(&self, what: &str, since: f64) -> Option<f64> {
        let log = std::fs::read_to_string(self.topo.tmp.join("failover.log")).ok()?;
        log.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            let t: f64 = it.next()?.parse().ok()?;
            (it.next()? == what && t >= since).then_some(t)
        })
    }

    /// Environment for `event-command` / `restore-command`: `LAB_DUT_NS`,
    /// `LAB_TESTER_NS`, `LAB_TMP`; for lanyard also `LANYARD` (binary),
    /// `LANYARD_SOCKET`, `LANYARD_CONFIG` (the config the lab wrote).
    pub fn command_env(&self) -> Vec<(String, String)> {
        let mut v = vec![
            ("LAB_DUT_NS".to_string(), self.topo.dut.clone()),
            ("LAB_TESTER_NS".to_string(), self.topo.tester.clone()),
            ("LAB_TMP".to_string(), self.topo.tmp.display().to_string()),
        ];
        if let Some((bin, sock)) = &self.lanyard {
            v.push(("LANYARD".into(), bin.display().to_string()));
            v.push(("LANYARD_SOCKET".into(), sock.display().to_string()));
            v.push((
                "LANYARD_CONFIG".into(),
                self.topo
                    .tmp
                    .join("lanyard/lanyard.yaml")
                    .display()
                    .to_string(),
            ));
        }
        if let Some(pe2) = &self.pe2 {
            v.push(("LAB_PE".into(), pe2.script.display().to_string()));
            v.push(("LAB_PE2_NS".into(), pe2.ns.clone()));
            v.push(("LAB_PE2_SOCKET".into(), pe2.sock.display().to_string()));
        }
        for n in &self.pair {
            let k = n.name.to_uppercase();
            v.push((format!("LAB_NODE_{k}"), n.script.display().to_string()));
            v.push((format!("LAB_NODE_{k}_NS"), n.ns.clone()));
            v.push((format!("LAB_NODE_{k}_SOCKET"), n.sock.display().to_string()));
        }
        v
    }

    /// `sh -c CMD` in the DUT namespace (the wire DUT: the tester's), with
    /// [`Dut::command_env`]; error with its output if it fails.
    pub fn run_command(&self, cmd: &str) -> Result<String, LabError> {
        let ns = if self.is_wire() {
            &self.topo.tester
        } else {
            &self.topo.dut
        };
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "sh", "-c", cmd])
            .envs(self.command_env())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| LabError::Command(format!("sh -c {cmd:?}: {e}")))?;
        if !out.status.success() {
            return Err(LabError::Command(format!(
                "sh -c {cmd:?} ({}): {} {}",
                out.status,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `event: kill`: SIGKILL the DUT's process and, as its supervisor,
    /// start it again at once with the same configuration (log appended).
    /// Returns when the new process is spawned; [`Dut::wait_ready`] waits
    /// until it answers. Only lanyard has a process the lab supervises.
    pub fn kill_and_restart(&self) -> Result<(), LabError> {
        let Some((bin, _)) = &self.lanyard else {
            return Err(LabError::Unsupported(format!(
                "event: kill: the {} driver has no DUT process the lab supervises (lanyard only)",
                self.spec.driver.as_str()
            )));
        };
        let dir = self.topo.tmp.join("lanyard");
        let mut ch = self.children.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = ch.last_mut() else {
            return Err(LabError::Dut("lanyard is not running".into()));
        };
        let _ = c.kill();
        let _ = c.wait();
        *c = spawn_lanyard(
            &self.topo.dut,
            bin,
            &dir.join("lanyard.yaml"),
            &dir.join("lanyard.log"),
            true,
        )?;
        Ok(())
    }

    /// True when [`Dut::kill_and_restart`] is supported.
    pub fn can_restart(&self) -> bool {
        self.lanyard.is_some()
    }

    /// Wait until the DUT answers again (lanyard: its management socket);
    /// immediate for the others.
    pub fn wait_ready(&self, secs: f64) -> Result<(), LabError> {
        let Some((bin, sock)) = &self.lanyard else {
            return Ok(());
        };
        let log = self.topo.tmp.join("lanyard/lanyard.log");
        wait_for("lanyard management socket after the restart", secs, || {
            Command::new(bin)
                .arg("--socket")
                .arg(sock)
                .args(["show", "interfaces", "--json"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        })
        .map_err(|e| LabError::Dut(format!("{e}; log: {}", tail(&log))))?;
        self.repin_processes();
        Ok(())
    }

    fn start_router(&mut self) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        run_in(&ns, "sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
        run_in(&ns, "sysctl", &["-qw", "net.ipv4.conf.all.rp_filter=0"])?;
        run_in(&ns, "sysctl", &["-qw", "net.ipv6.conf.all.forwarding=1"])?;
        for (i, p) in self.sw().iter().enumerate() {
            run("ip", &["-n", &ns, "addr", "add", &dut_ip(i), "dev", p])?;
            run(
                "ip",
                &["-n", &ns, "addr", "add", &dut_ip6(i), "dev", p, "nodad"],
            )?;
            self.port_macs.push(link_mac(&ns, p)?);
        }
        let dynamic = self.spec.static_neighbours == Some(false);
        if !dynamic {
            self.static_neighbours(|i| format!("sw{}", i + 1))?;
        }
        if self.setup.ospf {
            let ifaces = self.sw();
            self.start_ospf(&ifaces, None)?;
        } else {
            self.kernel_routes()?;
        }
        if let Some(McSetup::Routes(p)) = self.setup.multicast {
            // VIFs for the test's ports only: the kernel has at most 32.
            let names: Vec<String> = (1..=p.sources + p.receivers)
                .map(|i| format!("sw{i}"))
                .collect();
            let m = crate::netns::in_netns(&ns, move || KernelMroutes::install(&names, &p))?
                .map_err(|e| LabError::Unsupported(format!("kernel multicast routing: {e}")))?;
            self.info.push(format!(
                "kernel multicast routing: one VIF per port, {} static (S,G) MFC entries (no PIM daemon)",
                m.routes
            ));
            self.mroutes = Some(m);
        }
        self.info.push(if dynamic {
            "Linux IPv4 + IPv6 forwarding, neighbours by ARP / ND (answered by the emulated hosts)"
                .into()
        } else {
            "Linux IPv4 + IPv6 forwarding, static neighbours".into()
        });
        if self.spec.conntrack == Some(true) {
            let f = self.topo.tmp.join("conntrack.nft");
            std::fs::write(&f, CONNTRACK_NFT)
                .map_err(|e| LabError::Dut(format!("{}: {e}", f.display())))?;
            run_in(&ns, "nft", &["-f", &f.to_string_lossy()]).map_err(|e| {
                LabError::Unsupported(format!(
                    "conntrack needs nftables (apt-get install nftables): {e}"
                ))
            })?;
            let max = std::fs::read_to_string("/proc/sys/net/netfilter/nf_conntrack_max")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            self.info.push(format!(
                "conntrack on every forwarded packet (an nftables forward chain); \
                 nf_conntrack_max {max} (host-wide), unreplied entries dropped early when full"
            ));
        }
        Ok(())
    }

    /// linux-router with `conntrack: true`: the connections in the DUT's
    /// conntrack table (`nf_conntrack_count` of its namespace). Across a
    /// test the growth is the connections it created: UDP entries live
    /// 30 s, and the rule's `ct state new` counter counts packets, not
    /// connections (an unreplied UDP flow stays `new`).
    pub fn conntrack_entries(&self) -> Option<u64> {
        if self.spec.conntrack != Some(true) {
            return None;
        }
        run_in(
            &self.topo.dut,
            "cat",
            &["/proc/sys/net/netfilter/nf_conntrack_count"],
        )
        .ok()?
        .trim()
        .parse()
        .ok()
    }

    /// A conntrack DUT's connection-tracking statistics: `early_drop`
    /// (unreplied entries dropped to make room for a new connection in a
    /// full table), `drop` (new connections dropped: no room) and
    /// `invalid` (packets it could not track), summed over CPUs; None for
    /// other DUTs. The table's growth ([`Dut::conntrack_entries`]) stops
    /// at `nf_conntrack_max`; early drops go on. (The `insert` column
    /// stays 0 on this kernel.)
    pub fn conntrack_stats(&self) -> Option<[(&'static str, u64); 3]> {
        if self.spec.conntrack != Some(true) {
            return None;
        }
        let text = run_in(&self.topo.dut, "cat", &["/proc/net/stat/nf_conntrack"]).ok()?;
        parse_conntrack_stats(&text)
    }

    fn start_ovs(&mut self) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        let dir = self.topo.tmp.join("ovs");
        std::fs::create_dir_all(&dir).map_err(|e| LabError::Dut(format!("mkdir: {e}")))?;
        let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
        run(
            "ovsdb-tool",
            &[
                "create",
                &p("conf.db"),
                "/usr/share/openvswitch/vswitch.ovsschema",
            ],
        )?;
        // Under the split CPU plan OVS starts on the DUT CPUs only, and its
        // PMD threads are placed there (pmd-cpu-mask below): pinned after
        // start instead, the PMD threads it sized for every CPU would share
        // one core and starve each other.
        let taskset: Vec<String> = match self.setup.cpus.dut() {
            Some(set) => vec!["taskset".into(), "-c".into(), set.list()],
            None => Vec::new(),
        };
        let spawn = |args: Vec<String>| -> Result<Child, LabError> {
            Command::new("ip")
                .args(["netns", "exec", &ns])
                .args(&taskset)
                .args(&args)
                .env("OVS_RUNDIR", &dir)
                .env("OVS_LOGDIR", &dir)
                .env("OVS_DBDIR", &dir)
                .env("OVS_SYSCONFDIR", &dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| LabError::Dut(format!("spawn {}: {e}", args[0])))
        };
        self.children.get_mut().unwrap().push(spawn(vec![
            "ovsdb-server".into(),
            p("conf.db"),
            format!("--remote=punix:{}", p("db.sock")),
            format!("--unixctl={}", p("ovsdb.ctl")),
            format!("--pidfile={}", p("ovsdb.pid")),
            format!("--log-file={}", p("ovsdb.log")),
        ])?);
        let db = format!("--db=unix:{}", p("db.sock"));
        wait_for("ovsdb-server socket", 10.0, || dir.join("db.sock").exists())?;
        run("ovs-vsctl", &[&db, "--no-wait", "init"])?;
        if let Some(set) = self.setup.cpus.dut() {
            let mask = format!("other_config:pmd-cpu-mask=0x{}", set.hex());
            run(
                "ovs-vsctl",
                &[&db, "--no-wait", "set", "Open_vSwitch", ".", &mask],
            )?;
        }
        self.children.get_mut().unwrap().push(spawn(vec![
            "ovs-vswitchd".into(),
            format!("unix:{}", p("db.sock")),
            format!("--unixctl={}", p("vswitchd.ctl")),
            format!("--pidfile={}", p("vswitchd.pid")),
            format!("--log-file={}", p("vswitchd.log")),
        ])?);
        wait_for("ovs-vswitchd control socket", 10.0, || {
            dir.join("vswitchd.ctl").exists()
        })?;
        if self.spec.learning == Some(false) {
            return Err(LabError::Unsupported(
                "learning: false (OVS NORMAL action always learns)".into(),
            ));
        }
        let mut br = vec![
            db.clone(),
            "--timeout=20".into(),
            "add-br".into(),
            "br0".into(),
            "--".into(),
            "set".into(),
            "bridge".into(),
            "br0".into(),
            "datapath_type=netdev".into(),
        ];
        if let Some(a) = self.spec.mac_aging {
            br.push(format!("other_config:mac-aging-time={a}"));
        }
        if let Some(s) = self.spec.mac_limit.or(self.spec.mac_table_size) {
            br.push(format!("other_config:mac-table-size={s}"));
        }
        if self.setup.multicast.is_some() {
            // Snooping with unregistered multicast not flooded: OVS then
            // forwards a group only to ports that joined it.
            br.push("mcast_snooping_enable=true".into());
            br.push("other_config:mcast-snooping-disable-flood-unregistered=true".into());
        }
        let brr: Vec<&str> = br.iter().map(|s| s.as_str()).collect();
        run("ovs-vsctl", &brr)?;
        if self.setup.multicast.is_some() {
            self.info
                .push("IGMP snooping on (mcast_snooping_enable, unregistered not flooded)".into());
        }
        let want = self.spec.port_type.clone().unwrap_or_else(|| "auto".into());
        let mut used = String::new();
        for t in ["afxdp", "af-packet"] {
            if want != "auto" && want != t {
                continue;
            }
            let mut ok = true;
            for sw in self.sw() {
                let _ = run(
                    "ovs-vsctl",
                    &[&db, "--timeout=20", "--if-exists", "del-port", "br0", &sw],
                );
                let mut a = vec![db.as_str(), "--timeout=20", "add-port", "br0", &sw];
                if t == "afxdp" {
                    a.extend_from_slice(&["--", "set", "interface", &sw, "type=afxdp"]);
                }
                if run("ovs-vsctl", &a).is_err() {
                    ok = false;
                    break;
                }
                let ofport =
                    run("ovs-vsctl", &[&db, "get", "interface", &sw, "ofport"]).unwrap_or_default();
                if ofport.trim() == "-1" || ofport.trim().is_empty() {
                    ok = false;
                    break;
                }
            }
            if ok {
                used = t.to_string();
                break;
            }
        }
        if used.is_empty() {
            return Err(LabError::Dut(format!(
                "ovs: could not add ports ({want}); log: {}",
                tail(&dir.join("vswitchd.log"))
            )));
        }
        if self.setup.mirrors > 0 {
            let mut a = vec![db.clone()];
            a.extend(crate::mirror_setup::ovs_args(self.setup.mirrors));
            let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
            run("ovs-vsctl", &refs)?;
            self.info.push(format!(
                "{} mirrors on br0: select-src-port sw1, output-port sw3..sw{}",
                self.setup.mirrors,
                self.setup.mirrors + 2
            ));
        }
        let ver = run("ovs-vswitchd", &["--version"]).unwrap_or_default();
        self.info.push(format!(
            "{}, userspace datapath, {used} ports",
            ver.lines().next().unwrap_or("ovs").trim()
        ));
        self.ovs_dir = Some(dir);
        Ok(())
    }

    fn start_lanyard(&mut self, bin: &Path) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        let dir = self.topo.tmp.join("lanyard");
        std::fs::create_dir_all(&dir).map_err(|e| LabError::Dut(format!("mkdir: {e}")))?;
        let sock = dir.join("lanyard.sock");
        let cfg = dir.join("lanyard.yaml");
        std::fs::write(&cfg, self.lanyard_config(&sock))
            .map_err(|e| LabError::Dut(format!("write config: {e}")))?;
        let log = dir.join("lanyard.log");
        let child = spawn_lanyard(&ns, bin, &cfg, &log, false)?;
        self.children.get_mut().unwrap().push(child);
        let mut exited = None;
        // Static routes are installed (FIB and kernel) before the socket
        // answers: allow for them.
        let secs = 10.0 + (self.setup.routes + self.setup.routes6) as f64 / 4000.0;
        let res = wait_for("lanyard management socket", secs, || {
            if let Some(c) = self.children.get_mut().unwrap().last_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    exited = Some(st);
                    return true;
                }
            }
            Command::new(bin)
                .arg("--socket")
                .arg(&sock)
                .args(["show", "interfaces", "--json"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        });
        if let Some(st) = exited {
            return Err(LabError::Dut(format!(
                "lanyard exited ({st}): {}",
                tail(&log)
            )));
        }
        res.map_err(|e| LabError::Dut(format!("{e}; log: {}", tail(&log))))?;
        self.info.push(lanyard_version(bin));
        match self.setup.multicast {
            Some(McSetup::Snooping(_)) => self.info.push(format!(
                "multicast.igmp-snooping in VLAN {}: querier {}, fast-leave {}, flood-unregistered false",
                self.spec.vlan.unwrap_or(10),
                self.spec.igmp_querier.unwrap_or(true),
                self.spec.fast_leave.unwrap_or(false)
            )),
            Some(McSetup::Routes(p)) => self.info.push(format!(
                "multicast.routing with {} static (S,G) routes",
                p.sources as u64 * p.groups as u64
            )),
            None => {}
        }
        if self.spec.services == Some(true) {
            // The switch logs how long compiling its services took.
            let log_text = std::fs::read_to_string(&log).unwrap_or_default();
            let took = log_text
                .lines()
                .find_map(|l| l.split("services compiled in ").nth(1))
                .unwrap_or("? ms");
            self.info.push(format!(
                "services on every port: 10,000-line IPv4 + IPv6 ACLs in and out, 500-line QoS policy re-marking every packet, IPFIX flow export (compiled in {took})"
            ));
        }
        if let Some(m) = self.spec.inline {
            // The lab's subscribers: the engine keeps their bandwidth per
            // service over time, which the lab reads after every trial.
            let f = self.topo.tmp.join("subscribers.txt");
            let mut records = crate::bandwidth::provisioning();
            records.push_str(&crate::flowset::provisioning(self.setup.subscribers));
            if let Some(c) = &self.setup.bw_share {
                records.push_str(&c.provisioning());
            }
            std::fs::write(&f, records)
                .map_err(|e| LabError::Dut(format!("{}: {e}", f.display())))?;
            let t0 = Instant::now();
            run_in(
                &ns,
                &bin.to_string_lossy(),
                &[
                    "--socket",
                    &sock.to_string_lossy(),
                    "subscribers",
                    "load",
                    &f.to_string_lossy(),
                ],
            )?;
            if self.setup.subscribers > 0 {
                self.info.push(format!(
                    "{} subscribers provisioned in {:.2} s (lanyard subscribers load)",
                    self.setup.subscribers,
                    t0.elapsed().as_secs_f64()
                ));
            }
            if m == crate::plan::InlineMode::Bypass {
                run_in(
                    &ns,
                    &bin.to_string_lossy(),
                    &["--socket", &sock.to_string_lossy(), "bypass", "on"],
                )?;
            }
            self.info.push(format!(
                "inline pair sw1 (subscriber) <-> sw2 (network), service-control {}",
                if m == crate::plan::InlineMode::Bypass {
                    "in bypass (lanyard bypass on)"
                } else {
                    "engine on: flows, nDPI classification, per-service accounting"
                }
            ));
        }
        self.lanyard = Some((bin.to_path_buf(), sock));
        if self.setup.layer3 {
            self.lanyard_layer3(&log)?;
        }
        Ok(())
    }

    /// `lanyard show WORDS --json` against the running instance (the
    /// lanyard-pair's partner).
    /// The DUT's scratch directory (removed with the topology).
    pub fn tmp_dir(&self) -> &Path {
        &self.topo.tmp
    }

    /// `lanyard --socket SOCK ARGS…` against the running instance; its
    /// standard output, or an error with its output.
    pub fn lanyard_cli(&self, args: &[&str]) -> Result<String, LabError> {
        let Some((bin, sock)) = &self.lanyard else {
            return Err(LabError::Dut("lanyard is not running".into()));
        };
        let out = Command::new(bin)
            .arg("--socket")
            .arg(sock)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| LabError::Dut(format!("lanyard {}: {e}", args.join(" "))))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(LabError::Dut(format!(
                "lanyard {}: {} {}",
                args.join(" "),
                text.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(text)
    }

    /// Resident memory of the lanyard process (KiB, `VmRSS`), if it runs.
    pub fn lanyard_rss_kib(&self) -> Option<u64> {
        self.lanyard.as_ref()?;
        let ch = self.children.lock().unwrap_or_else(|e| e.into_inner());
        let pid = ch.last()?.id();
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    }

    pub fn lanyard_show(&self, words: &[&str]) -> Result<serde_json::Value, LabError> {
        let Some((_, sock)) = &self.lanyard else {
            return Err(LabError::Dut("lanyard is not running".into()));
        };
        self.lanyard_show_at(sock, words)
    }

    /// Lanyard's counters when it runs with routed ports (None otherwise):
    /// `{"l3": …, "ports": {"sw1": {rx_frames, tx_frames, drops}, …}}`
    /// from `show counters` (ports keyed by name, so snapshots subtract).
    pub fn l3_counters(&self) -> Option<serde_json::Value> {
        if self.spec.driver != Driver::Lanyard || !self.setup.layer3 {
            return None;
        }
        let v = self.lanyard_show(&["counters"]).ok()?;
        let mut ports = serde_json::Map::new();
        for p in v["ports"].as_array().into_iter().flatten() {
            if let Some(n) = p["name"].as_str() {
                ports.insert(
                    n.into(),
                    serde_json::json!({"rx_frames": p["rx_frames"], "tx_frames": p["tx_frames"],
                                       "drops": p["drops"]}),
                );
            }
        }
        Some(serde_json::json!({"l3": v["l3"], "ports": ports}))
    }

    /// Routed ports: next-hop MACs from `show ip interface` (the router
    /// MAC is not the port's kernel MAC), the emulated hosts as permanent
    /// neighbours on the TAP twins (Lanyard mirrors the kernel's table),
    /// and a check that the FIB holds every route.
    fn lanyard_layer3(&mut self, log: &Path) -> Result<(), LabError> {
        let ifs = self.lanyard_show(&["ip", "interface"])?;
        let mut taps = Vec::new();
        for p in self.sw() {
            let r = ifs
                .as_array()
                .and_then(|a| a.iter().find(|r| r["name"] == p.as_str()));
            let (Some(mac), Some(tap)) = (
                r.and_then(|r| r["mac"].as_str()).and_then(parse_mac),
                r.and_then(|r| r["tap"].as_str()),
            ) else {
                return Err(LabError::Dut(format!(
                    "no router MAC / TAP for {p} in {ifs}"
                )));
            };
            self.port_macs.push(mac);
            taps.push(tap.to_string());
        }
        if self.spec.static_neighbours != Some(false) {
            self.static_neighbours(|i| taps[i].clone())?;
            let want = self.topo.ports;
            let mut seen = (0, 0);
            let res = wait_for("lanyard to mirror the static neighbours", 10.0, || {
                let n = |w: &[&str]| {
                    self.lanyard_show(w)
                        .ok()
                        .and_then(|v| v.as_array().map(|a| a.len()))
                        .unwrap_or(0)
                };
                seen = (n(&["arp"]), n(&["ipv6", "neighbors"]));
                seen.0 >= want && seen.1 >= want
            });
            res.map_err(|e| {
                LabError::Dut(format!(
                    "{e}: {} ARP / {} ND entries of {want}; log: {}",
                    seen.0,
                    seen.1,
                    tail(log)
                ))
            })?;
        }
        if self.setup.ospf {
            self.start_ospf(&taps, Some(crate::ospf::FPM_PORT))?;
        }
        let mut fib = Vec::new();
        for (fam, want) in [("ip", self.routes4.len()), ("ipv6", self.routes6.len())] {
            let v = self.lanyard_show(&[fam, "route", "summary"])?;
            let installed = v["installed"].as_u64().unwrap_or(0) as usize;
            // Connected subnets are in the FIB too.
            if installed < want {
                return Err(LabError::Dut(format!(
                    "lanyard installed {installed} {fam} routes, expected at least {want}: {v}"
                )));
            }
            fib.push(installed);
        }
        self.info.push(format!(
            "routed ports sw1..sw{} (198.18.<i>.1/24, 2001:2:0:<i>::1/64), FIB {} IPv4 / {} IPv6 installed",
            self.topo.ports, fib[0], fib[1]
        ));
        Ok(())
    }

    /// The Lanyard configuration this driver writes (docs/config.md).
    pub fn lanyard_config(&self, sock: &Path) -> String {
        let mut c = self.lanyard_config_base(sock);
        if self.spec.services == Some(true) {
            c.push_str(&services_yaml());
        }
        c
    }

    /// A port's service attachments when the DUT runs with services.
    fn services_attach(&self) -> &'static str {
        if self.spec.services == Some(true) {
            "    acl-in: [lab-v4, lab-v6]\n    acl-out: [lab-v4, lab-v6]\n    policy-in: lab-qos\n"
        } else {
            ""
        }
    }

    fn lanyard_config_base(&self, sock: &Path) -> String {
        if self.setup.layer3 {
            return self.lanyard_config_l3(sock);
        }
        let s = &self.spec;
        let vlan = s.vlan.unwrap_or(10);
        let mut c = String::new();
        c.push_str("switch:\n  name: lab\n");
        c.push_str(&format!("  workers: {}\n", s.workers.unwrap_or(1)));
        if let Some(b) = &s.port_type {
            c.push_str(&lanyard_backend(b));
        }
        if let Some(a) = s.mac_aging {
            c.push_str(&format!("  mac-aging: {a}\n"));
        }
        if let Some(t) = s.mac_table_size {
            c.push_str(&format!("  mac-table-size: {t}\n"));
        }
        c.push_str(&format!("management:\n  socket: {}\n", sock.display()));
        c.push_str(&format!("vlans:\n  - id: {vlan}\n"));
        if let Some(l) = s.learning {
            c.push_str(&format!("    learning: {l}\n"));
        }
        if let Some(m) = s.mac_limit {
            c.push_str(&format!("    mac-limit: {m}\n"));
        }
        c.push_str("ports:\n");
        for p in self.sw() {
            if s.inline.is_some() && (p == "sw1" || p == "sw2") {
                // The inline pair: in no VLAN (docs/inline.md).
                c.push_str(&format!("  - name: {p}\n"));
                continue;
            }
            c.push_str(&format!(
                "  - name: {p}\n    mode: access\n    vlan: {vlan}\n"
            ));
            c.push_str(self.services_attach());
        }
        if self.setup.backup_pair {
            c.push_str(&self.backup_pairs_yaml());
        }
        if matches!(self.setup.multicast, Some(McSetup::Snooping(_))) {
            c.push_str(&self.igmp_snooping_yaml(vlan));
        }
        c.push_str(&crate::mirror_setup::lanyard_yaml(self.setup.mirrors));
        if s.inline.is_some() {
            let mut y = inline_yaml(s.inline_flows);
            if self.setup.provision > 0 {
                // The lab's own subscribers beside the test's.
                y = y.replacen(
                    "service-control:\n",
                    &format!(
                        "service-control:\n  max-subscribers: {}\n",
                        self.setup.provision + 1024
                    ),
                    1,
                );
            }
            match &self.setup.bw_share {
                Some(b) => c.push_str(&b.splice(&y)),
                None => c.push_str(&y),
            }
        }
        c
    }

    /// Multicast, layer 2: IGMP snooping in the ports' VLAN.
    pub fn igmp_snooping_yaml(&self, vlan: u16) -> String {
        format!(
            "multicast:\n  igmp-snooping:\n    vlans: [{vlan}]\n    querier: {}\n    fast-leave: {}\n    flood-unregistered: false\n",
            self.spec.igmp_querier.unwrap_or(true),
            self.spec.fast_leave.unwrap_or(false)
        )
    }

    /// Multicast, layer 3: routing on, the pattern's (S,G) routes static.
    pub fn mroutes_yaml(&self, p: &McPattern) -> String {
        use std::fmt::Write as _;
        let mut c = String::from("multicast:\n  routing: true\n  static-routes:\n");
        for (s, g, oifs) in p.routes() {
            let oifs: Vec<String> = oifs.iter().map(|o| format!("sw{}", o + 1)).collect();
            let _ = writeln!(
                c,
                "    - {{group: {}, source: {}, iif: sw{}, oifs: [{}]}}",
                Ipv4Addr::from(g),
                Ipv4Addr::from(host_ip(s)),
                s + 1,
                oifs.join(", ")
            );
        }
        c
    }

    /// Convergence: sw3 backs up sw2 (same VLAN settings: every port is
    /// an access port in `vlan`).
    pub fn backup_pairs_yaml(&self) -> String {
        format!(
            "backup-pairs:\n  - primary: sw2\n    backup: sw3\n    preempt: {}\n    mac-move-update: {}\n",
            self.spec.preempt.unwrap_or(false),
            self.spec.mac_move_update.unwrap_or(true)
        )
    }

    /// Layer 3: routed ports with the linux-router's addressing and the
    /// synthetic routes as `routing.static-routes`.
    fn lanyard_config_l3(&self, sock: &Path) -> String {
        use std::fmt::Write as _;
        let mut c = String::with_capacity(64 * (self.routes4.len() + self.routes6.len()) + 512);
        c.push_str("switch:\n  name: lab\n");
        let _ = writeln!(c, "  workers: {}", self.spec.workers.unwrap_or(1));
        if let Some(b) = &self.spec.port_type {
            c.push_str(&lanyard_backend(b));
        }
        let _ = writeln!(c, "management:\n  socket: {}", sock.display());
        c.push_str("ports:\n");
        for (i, p) in self.sw().iter().enumerate() {
            // Jumbo: the test bed's links are 9,216 and the plans route
            // 9,216-byte frames (routed ports default to 1,500; 9,206 is
            // the most a routed port carries, docs/config.md "MTU").
            let _ = writeln!(
                c,
                "  - name: {p}\n    mode: routed\n    mtu: 9206\n    addresses: [{}, \"{}\"]",
                dut_ip(i),
                dut_ip6(i)
            );
            c.push_str(self.services_attach());
        }
        if self.setup.ospf {
            // The routes come from FRR's zebra (crate::ospf).
            let _ = writeln!(c, "routing:\n  fpm: 127.0.0.1:{}", crate::ospf::FPM_PORT);
        } else if !self.routes4.is_empty() || !self.routes6.is_empty() {
            c.push_str("routing:\n  static-routes:\n");
            for r in self.routes4.iter() {
                let _ = writeln!(
                    c,
                    "    - {{prefix: {}/{}, next-hop: {}}}",
                    r.addr,
                    r.len,
                    host_ip_str(r.port)
                );
            }
            for r in self.routes6.iter() {
                let _ = writeln!(
                    c,
                    "    - {{prefix: \"{}/{}\", next-hop: \"{}\"}}",
                    r.addr,
                    r.len,
                    host_ip6_str(r.port)
                );
            }
        }
        if let Some(McSetup::Routes(p)) = self.setup.multicast {
            c.push_str(&self.mroutes_yaml(&p));
        }
        c
    }

    /// Forget learned addresses, where the DUT can (best effort).
    pub fn flush_macs(&self) {
        match self.spec.driver {
            Driver::LinuxBridge | Driver::Lossy => {
                let _ = run(
                    "bridge",
                    &[
                        "-n",
                        &self.topo.dut,
                        "fdb",
                        "flush",
                        "dev",
                        "br0",
                        "dynamic",
                    ],
                );
            }
            Driver::Ovs => {
                if let Some(d) = &self.ovs_dir {
                    let ctl = d.join("vswitchd.ctl");
                    let _ = run(
                        "ovs-appctl",
                        &["-t", &ctl.to_string_lossy(), "fdb/flush", "br0"],
                    );
                }
            }
            Driver::Lanyard | Driver::LanyardPair | Driver::LanyardRstp | Driver::LanyardPe => {
                if let Some((bin, sock)) = &self.lanyard {
                    let socks = std::iter::once(sock)
                        .chain(self.access2.iter())
                        .chain(self.pe2.iter().map(|p| &p.sock))
                        .chain(self.pair.iter().map(|n| &n.sock));
                    for sock in socks {
                        let _ = Command::new(bin)
                            .arg("--socket")
                            .arg(sock)
                            .args(["clear", "mac", "address-table"])
                            .stdout(Stdio::null())
                            .stderr(Stdio::null())
                            .status();
                    }
                }
            }
            _ => {}
        }
    }

    /// Addresses the DUT is configured to learn at most (None: no limit),
    /// `Some(0)` when learning is off.
    pub fn learn_limit(&self) -> Option<u32> {
        if self.spec.learning == Some(false) {
            return Some(0);
        }
        self.spec.mac_limit
    }
}

/// PE2 of a `lanyard-pe` DUT.
struct PeTwo {
    /// Its namespace.
    ns: String,
    /// Its management socket.
    sock: PathBuf,
    /// The bed's control script (`cut`, `restore`).
    script: PathBuf,
    /// What both PEs run.
    bed: crate::lanyard_pe::PeBed,
}

/// One node of a `lanyard-pair` DUT.
struct PairNode {
    /// `a` or `b`.
    name: &'static str,
    /// Its namespace.
    ns: String,
    /// Its management socket.
    sock: PathBuf,
    /// Its control script (`kill`, `power-off`, `start`).
    script: PathBuf,
}

impl Dut {
    /// Starts a Lanyard in namespace `ns` with its files in the run's
    /// directory `dir` (`lanyard.yaml` from `config(socket)`, `lanyard.log`,
    /// `lanyard.sock`); returns its management socket.
    fn start_instance(
        &mut self,
        dir: &str,
        ns: &str,
        bin: &Path,
        config: impl FnOnce(&Path) -> String,
    ) -> Result<PathBuf, LabError> {
        let dir = self.topo.tmp.join(dir);
        std::fs::create_dir_all(&dir).map_err(|e| LabError::Dut(format!("mkdir: {e}")))?;
        let (sock, cfg, log) = (
            dir.join("lanyard.sock"),
            dir.join("lanyard.yaml"),
            dir.join("lanyard.log"),
        );
        std::fs::write(&cfg, config(&sock))
            .map_err(|e| LabError::Dut(format!("write config: {e}")))?;
        let child = spawn_lanyard(ns, bin, &cfg, &log, false)?;
        self.children.get_mut().unwrap().push(child);
        Ok(sock)
    }

    /// Starts node `name` of a two-node DUT in `ns` (directory
    /// `node-<name>`) with its control script (`kill`, `power-off` of
    /// `ports`, `start`).
    fn start_node(
        &mut self,
        name: &'static str,
        ns: &str,
        bin: &Path,
        ports: &[&str],
        config: impl FnOnce(&Path) -> String,
    ) -> Result<PairNode, LabError> {
        let sub = format!("node-{name}");
        let sock = self.start_instance(&sub, ns, bin, config)?;
        let dir = self.topo.tmp.join(&sub);
        let script = dir.join("control.sh");
        let body = crate::lanyard_pair::control_script(
            ns,
            bin,
            &dir.join("lanyard.yaml"),
            &dir.join("lanyard.log"),
            ports,
        );
        std::fs::write(&script, body).map_err(|e| LabError::Dut(format!("write script: {e}")))?;
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| LabError::Dut(format!("chmod: {e}")))?;
        Ok(PairNode {
            name,
            ns: ns.to_string(),
            sock,
            script,
        })
    }

    /// The two nodes of a `lanyard-pair` or `lanyard-rstp` DUT (`what`):
    /// their namespaces (`…-a`, `…-b`), the wiring (`wire(dut, a, b)`),
    /// each node started with `config(node, socket, switch lines)` and its
    /// control script for `ports`. Returns the `switch:` lines every
    /// instance of the DUT gets (workers, backend).
    fn start_nodes(
        &mut self,
        what: &str,
        bin: &Path,
        wire: fn(&str, &str, &str) -> Result<(), LabError>,
        ports: &[&str],
        config: impl Fn(usize, &Path, &str) -> String,
    ) -> Result<String, LabError> {
        if self.topo.ports < 2 {
            return Err(LabError::Dut(format!("{what} needs tester ports 1 and 2")));
        }
        let mut extra = format!("  workers: {}\n", self.spec.workers.unwrap_or(1));
        if let Some(b) = &self.spec.port_type {
            extra.push_str(&lanyard_backend(b));
        }
        use crate::lanyard_pair::NODES;
        let mut nss = Vec::new();
        for n in NODES {
            nss.push(self.topo.add_namespace(n)?);
        }
        wire(&self.topo.dut, &nss[0], &nss[1])?;
        for (k, n) in NODES.into_iter().enumerate() {
            let node = self.start_node(n, &nss[k], bin, ports, |s| config(k, s, &extra))?;
            self.pair.push(node);
        }
        Ok(extra)
    }

    /// lanyard-pair: the node namespaces, the wiring, the nodes and the
    /// partner started, and every channel member distributing on both
    /// ends (see `lanyard_pair.rs`).
    fn start_pair(&mut self, bin: &Path) -> Result<(), LabError> {
        use crate::lanyard_pair as lp;
        let extra =
            self.start_nodes("lanyard-pair", bin, lp::wire, &lp::NODE_PORTS, |k, s, x| {
                lp::node_config(k, s, x)
            })?;
        // The partner last: `lanyard` (socket, LANYARD_CONFIG) is the partner.
        let dut = self.topo.dut.clone();
        let ports = self.topo.ports;
        let sock = self.start_instance("lanyard", &dut, bin, |s| {
            lp::partner_config(s, &extra, ports)
        })?;
        self.lanyard = Some((bin.to_path_buf(), sock));
        let t0 = Instant::now();
        self.wait_pair(30.0)?;
        self.info.push(lanyard_version(bin));
        self.info.push(format!(
            "virtual-switch pair: nodes A and B (own namespaces, domain {}, aggregated peer link pl = pl1 + pl2 with LACP, keepalive 100/500 ms, delay-restore 1 s) behind a Lanyard LACP partner for the tiers: access {} + po1 (a1..a4) in VLAN 10, core {} + po2 (c1..c4) in VLAN 20, two members of each channel on each node, LACP fast, load-balance l2; paired, all 8 partner members and both peer-link members distributing {:.1} s after start",
            lp::DOMAIN,
            crate::lanyard_rstp::tester_ports(0, ports).join(" "),
            crate::lanyard_rstp::tester_ports(1, ports).join(" "),
            t0.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// lanyard-rstp: the node namespaces, the wiring, the two distribution
    /// nodes and the two access switches started, and the tree settled
    /// (see `lanyard_rstp.rs`).
    fn start_rstp(&mut self, bin: &Path) -> Result<(), LabError> {
        use crate::lanyard_rstp as lr;
        let extra =
            self.start_nodes("lanyard-rstp", bin, lr::wire, &lr::NODE_PORTS, |k, s, x| {
                lr::node_config(k, s, x)
            })?;
        // The access switches in the DUT namespace; the first is `lanyard`
        // (its socket is LANYARD_SOCKET in commands).
        let dut = self.topo.dut.clone();
        let ports = self.topo.ports;
        let acc1 = self.start_instance("lanyard", &dut, bin, |s| {
            lr::access_config(0, s, &extra, ports)
        })?;
        let acc2 = self.start_instance("access-2", &dut, bin, |s| {
            lr::access_config(1, s, &extra, ports)
        })?;
        self.access2 = Some(acc2);
        self.lanyard = Some((bin.to_path_buf(), acc1));
        let t0 = Instant::now();
        self.wait_tree(60.0)?;
        self.info.push(lanyard_version(bin));
        self.info.push(format!(
            "RSTP design: distribution nodes A (root, priority 4096) and B (8192) in their own namespaces joined by ab; access switches acc1 (access tier {}, uplinks u1 to A, u2 to B) and acc2 (core tier {}, v1, v2), all Lanyards in VLAN 10, RSTP with default timers (hello 2 s), tester ports edge; the uplinks to B alternate; layer 2 only (no routed uplinks, no gateway protocol); tree settled {:.1} s after start",
            lr::tester_ports(0, ports).join(" "),
            lr::tester_ports(1, ports).join(" "),
            t0.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// lanyard-pe: PE2's namespace with tester port 2 and the uplinks, both
    /// PEs started (PE2 first: PE1 is `lanyard`), and the bed ready (see
    /// [`Dut::wait_pe`]).
    fn start_pe(&mut self, bin: &Path) -> Result<(), LabError> {
        use crate::lanyard_pe as lp;
        if self.topo.ports < 2 {
            return Err(LabError::Dut(
                "lanyard-pe needs tester ports 1 and 2".into(),
            ));
        }
        let bed = lp::PeBed {
            mode: self.spec.pe_mode.unwrap_or(crate::plan::PeMode::Pseudowire),
            circuits: self.spec.circuits.unwrap_or(crate::plan::Circuits::Port),
            uplinks: self.spec.uplinks.unwrap_or(1),
            vlans: self.setup.vlans,
            services: self.spec.services == Some(true),
        };
        if bed.mode == crate::plan::PeMode::Pseudowire
            && bed.circuits == crate::plan::Circuits::Vlan
            && bed.vlans == 0
        {
            return Err(LabError::Unsupported(
                "VLAN-mode circuits need a test with vlans: N".into(),
            ));
        }
        if bed.mode == crate::plan::PeMode::L3vpn && bed.vlans == 0 {
            return Err(LabError::Unsupported(
                "an L3VPN PE has one VRF per VLAN: the test needs vlans: N".into(),
            ));
        }
        // L3VPN: each VRF's namespace, made here (IPv6 on, visible to the
        // lab for the static neighbours and removed with the topology:
        // one Lanyard makes inside `ip netns exec` would be in its own
        // mount namespace only); Lanyard readies the namespaces it finds.
        let vrf_suffix = |side: usize, v: u16| format!("{}v{v}", side + 1);
        if bed.mode == crate::plan::PeMode::L3vpn {
            let suffixes: Vec<String> = (0..2)
                .flat_map(|side| {
                    (0..bed.vlans).map(move |i| vrf_suffix(side, crate::plan::FIRST_VLAN + i))
                })
                .collect();
            self.topo.add_plain_namespaces(&suffixes)?;
        }
        let id = self.topo.id.clone();
        let vrf_ns = |side: usize| {
            let id = id.clone();
            move |v: u16| format!("{id}-{}", vrf_suffix(side, v))
        };
        let dut = self.topo.dut.clone();
        let pe2 = self.topo.add_namespace(lp::PE2_SUFFIX)?;
        run("ip", &["-n", &dut, "link", "set", "sw2", "netns", &pe2])?;
        run("ip", &["-n", &pe2, "link", "set", "sw2", "up"])?;
        for u in lp::uplink_names(bed.uplinks) {
            run(
                "ip",
                // `name` and `dev` spelt out: `up` is also a keyword.
                &[
                    "link", "add", "name", &u, "netns", &dut, "mtu", "9216", "type", "veth",
                    "peer", "name", &u, "netns", &pe2, "mtu", "9216",
                ],
            )?;
            run("ip", &["-n", &dut, "link", "set", "dev", &u, "up"])?;
            run("ip", &["-n", &pe2, "link", "set", "dev", &u, "up"])?;
        }
        let mut extra = format!("  workers: {}\n", self.spec.workers.unwrap_or(1));
        if let Some(b) = &self.spec.port_type {
            extra.push_str(&lanyard_backend(b));
        }
        let (svc, attach) = if bed.services {
            (services_yaml(), self.services_attach())
        } else {
            (String::new(), "")
        };
        let routes = (self.routes4.clone(), self.routes6.clone());
        let routes = (&routes.0[..], &routes.1[..]);
        let sock2 = self.start_instance("pe2", &pe2, bin, |s| {
            lp::pe_config(1, &bed, s, &extra, &svc, attach, &vrf_ns(1), routes)
        })?;
        let sock1 = self.start_instance("lanyard", &dut, bin, |s| {
            lp::pe_config(0, &bed, s, &extra, &svc, attach, &vrf_ns(0), routes)
        })?;
        self.lanyard = Some((bin.to_path_buf(), sock1));
        let script = self.topo.tmp.join("pe-control.sh");
        std::fs::write(&script, lp::control_script(&pe2))
            .map_err(|e| LabError::Dut(format!("write script: {e}")))?;
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| LabError::Dut(format!("chmod: {e}")))?;
        self.pe2 = Some(PeTwo {
            ns: pe2,
            sock: sock2,
            script,
            bed,
        });
        let t0 = Instant::now();
        // Services compile a 10,000-line ACL per PE first.
        // As the lanyard driver: a second per 4,000 routes (in every VRF).
        let n = (self.routes4.len() + self.routes6.len()) * bed.vlans.max(1) as usize;
        let secs =
            (if bed.services { 90.0 } else { 30.0 }) + bed.vlans as f64 * 0.1 + n as f64 / 4000.0;
        if bed.mode.routed() {
            self.pe_routed(secs, &|side, v| vrf_ns(side)(v))?;
        }
        self.wait_pe(secs)?;
        self.info.push(lanyard_version(bin));
        self.info.push(format!(
            "{}; ready {:.1} s after start",
            bed.describe(),
            t0.elapsed().as_secs_f64()
        ));
        let n = self.routes4.len() + self.routes6.len();
        if bed.mode == crate::plan::PeMode::L3vpn && n > 0 {
            let far = self.routes4.iter().filter(|r| r.port == 1).count()
                + self.routes6.iter().filter(|r| r.port == 1).count();
            self.info.push(format!(
                "the same {} IPv4 + {} IPv6 prefixes in every VRF of both PEs ({} routes per PE): on PE1 {far} are VPN routes to PE2, {} via the local customer host (PE2 the other way)",
                self.routes4.len(),
                self.routes6.len(),
                n * bed.vlans as usize,
                n - far
            ));
        }
        Ok(())
    }

    /// lanyard-pe in `l3` / `l3vpn` mode, once both PEs run: the gateway
    /// MACs for the generator from `show ip interface` (per tester port,
    /// or per VLAN's subinterface), and as permanent neighbours on the TAP
    /// twins (Lanyard mirrors each namespace's table, as for the lanyard
    /// driver's hosts): the tester's hosts — per VLAN in that VLAN's VRF
    /// namespace (`vrf_ns(side, vlan)`), each with its own MAC — and each
    /// PE's uplink neighbour (the other PE's router MAC on `up`).
    fn pe_routed(
        &mut self,
        secs: f64,
        vrf_ns: &dyn Fn(usize, u16) -> String,
    ) -> Result<(), LabError> {
        use crate::lanyard_pe as lp;
        use crate::plan::{PeMode, FIRST_VLAN};
        use crate::sig::{mac_str, vlan_host_mac};
        let (Some(pe2), Some((_, sock1))) = (&self.pe2, &self.lanyard) else {
            return Ok(());
        };
        let bed = pe2.bed;
        let socks = [sock1.clone(), pe2.sock.clone()];
        let nss = [self.topo.dut.clone(), pe2.ns.clone()];
        let names = |side: usize| -> Vec<String> {
            let mut v = vec!["up".to_string()];
            match bed.mode {
                PeMode::L3vpn => {
                    v.extend((0..bed.vlans).map(|i| format!("sw{}.{}", side + 1, FIRST_VLAN + i)))
                }
                _ => v.push(format!("sw{}", side + 1)),
            }
            v
        };
        // (MAC, TAP) of each routed interface in `names(side)` order, once
        // every one is up in Lanyard (the twins exist).
        let mut ifs: [Vec<(Mac, String)>; 2] = [Vec::new(), Vec::new()];
        let mut last = String::new();
        let res = wait_for("the PEs' routed interfaces", secs, || {
            for side in 0..2 {
                let Ok(v) = self.lanyard_show_at(&socks[side], &["ip", "interface"]) else {
                    last = format!("{} not answering", lp::PES[side]);
                    return false;
                };
                let rows = v.as_array().cloned().unwrap_or_default();
                let mut got = Vec::new();
                for n in names(side) {
                    let r = rows.iter().find(|r| r["name"] == n.as_str());
                    match (
                        r.and_then(|r| r["mac"].as_str()).and_then(parse_mac),
                        r.and_then(|r| r["tap"].as_str()),
                    ) {
                        (Some(m), Some(t)) => got.push((m, t.to_string())),
                        _ => {
                            last = format!("{}: no {n} in show ip interface", lp::PES[side]);
                            return false;
                        }
                    }
                }
                ifs[side] = got;
            }
            true
        });
        res.map_err(|e| LabError::Dut(format!("{e}: {last}")))?;
        self.port_macs = ifs.iter().map(|v| v[1].0).collect();
        if bed.mode == PeMode::L3vpn {
            self.vlan_macs = ifs
                .iter()
                .map(|v| v[1..].iter().map(|x| x.0).collect())
                .collect();
        }
        // (namespace, batch name, batch): retried below until every twin
        // is in its namespace (Lanyard moves them there as it starts).
        let mut jobs: Vec<(String, String, String)> = Vec::new();
        for side in 0..2 {
            let peer = 1 - side;
            let (me, up_tap) = (side + 1, &ifs[side][0].1);
            // The uplink neighbour, in the PE's own namespace.
            let peer_up = mac_str(&ifs[peer][0].0);
            let mut b = format!(
                "neigh replace 10.94.1.{} lladdr {peer_up} dev {up_tap} nud permanent\n",
                peer + 1
            );
            if bed.mode == PeMode::L3 {
                b.push_str(&format!(
                    "neigh replace fd00:94:1::{} lladdr {peer_up} dev {up_tap} nud permanent\n",
                    peer + 1
                ));
                let host = mac_str(&host_mac(side));
                for ip in [host_ip_str(side), host_ip6_str(side)] {
                    b.push_str(&format!(
                        "neigh replace {ip} lladdr {host} dev {} nud permanent\n",
                        ifs[side][1].1
                    ));
                }
            }
            jobs.push((nss[side].clone(), format!("neigh-{me}"), b));
            if bed.mode == PeMode::L3vpn {
                for i in 0..bed.vlans {
                    let v = FIRST_VLAN + i;
                    let host = mac_str(&vlan_host_mac(side, v));
                    let tap = &ifs[side][1 + i as usize].1;
                    let b: String = [host_ip_str(side), host_ip6_str(side)]
                        .iter()
                        .map(|ip| {
                            format!("neigh replace {ip} lladdr {host} dev {tap} nud permanent\n")
                        })
                        .collect();
                    jobs.push((vrf_ns(side, v), format!("neigh-{me}-{v}"), b));
                }
            }
        }
        let mut err = String::new();
        let res = wait_for("the PEs' twins for the static neighbours", secs, || {
            jobs.retain(|(ns, name, b)| match self.ip_batch(ns, name, b) {
                Ok(()) => false,
                Err(e) => {
                    err = format!("{ns}: {e}");
                    true
                }
            });
            jobs.is_empty()
        });
        res.map_err(|e| LabError::Dut(format!("{e}: {} left, last: {err}", jobs.len())))
    }

    /// lanyard-pe in a routed mode: whether PE `side` (socket `sock`) has
    /// its neighbours (the uplink's, the tester's hosts: in every VRF
    /// with `l3vpn`) and its routes to the far customer subnet installed
    /// (with `l3vpn`, the VPN routes of the first and the last VRF, both
    /// families: they resolve through the same far PE), and a line saying
    /// what is missing.
    fn pe_routes_ready(
        &self,
        side: usize,
        sock: &Path,
        bed: &crate::lanyard_pe::PeBed,
    ) -> (bool, String) {
        use crate::lanyard_pe::{arp_has, vrf_name};
        use crate::plan::{PeMode, FIRST_VLAN};
        let peer = 2 - side;
        let show = |w: &[&str]| self.lanyard_show_at(sock, w).unwrap_or_default();
        let arp = show(&["arp"]);
        let uplink = arp_has(&arp, &format!("10.94.1.{peer}"));
        let (n4, n6) = (self.routes4.len() as u64, self.routes6.len() as u64);
        if bed.mode == PeMode::L3 {
            let nd = show(&["ipv6", "neighbors"]);
            let hosts = arp_has(&arp, &host_ip_str(side)) && arp_has(&nd, &host_ip6_str(side));
            let up6 = arp_has(&nd, &format!("fd00:94:1::{peer}"));
            // The synthetic routes and the far subnet (connected ones too).
            let fib = |fam: &str| {
                show(&[fam, "route", "summary"])["installed"]
                    .as_u64()
                    .unwrap_or(0)
            };
            let (f4, f6) = (fib("ip"), fib("ipv6"));
            return (
                uplink && up6 && hosts && f4 > n4 && f6 > n6,
                format!(
                    "uplink neighbours {uplink}/{up6}, tester host neighbours {hosts}, FIB {f4}/{} IPv4 {f6}/{} IPv6",
                    n4 + 1,
                    n6 + 1
                ),
            );
        }
        let vrfs = show(&["vrf"]);
        let with_hosts = vrfs
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["name"].as_str().is_some_and(|n| n != "default"))
            .filter(|v| v["neighbors"].as_u64() >= Some(2))
            // Its connected subnet, the far one and the synthetic routes.
            .filter(|v| v["routes_v4"].as_u64() >= Some(n4 + 2))
            .filter(|v| v["routes_v6"].as_u64() >= Some(n6 + 2))
            .count();
        let installed = |fam: &str, vid: u16, prefix: &str| {
            show(&[fam, "route", "vrf", &vrf_name(vid)])["routes"]
                .as_array()
                .is_some_and(|rs| {
                    rs.iter()
                        .any(|r| r["prefix"] == prefix && r["installed"] == true)
                })
        };
        let ends = [FIRST_VLAN, FIRST_VLAN + bed.vlans - 1];
        let vpn = ends.iter().all(|&v| {
            installed("ip", v, &format!("198.18.{peer}.0/24"))
                && installed("ipv6", v, &format!("2001:2:0:{peer}::/64"))
        });
        (
            uplink && vpn && with_hosts == bed.vlans as usize,
            format!(
                "uplink neighbour {uplink}, {with_hosts}/{} VRFs with their host and {} + {} routes, VPN routes of the first and last VRF installed {vpn}",
                bed.vlans,
                n4 + 2,
                n6 + 2
            ),
        )
    }

    /// `ip -n NS -batch` of `body` (kept as `<name>.batch` in the run's
    /// directory).
    fn ip_batch(&self, ns: &str, name: &str, body: &str) -> Result<(), LabError> {
        let f = self.topo.tmp.join(format!("{name}.batch"));
        std::fs::write(&f, body)
            .map_err(|e| LabError::Dut(format!("write {}: {e}", f.display())))?;
        run("ip", &["-n", ns, "-batch", &f.to_string_lossy()])?;
        Ok(())
    }

    /// lanyard-pe: both PEs answer; in pseudowire mode every pseudowire is
    /// up on both, each PE knows the other's uplink MAC(s), and with a
    /// bypass both PEs have it resolved with `up` on its primary.
    fn wait_pe(&self, secs: f64) -> Result<(), LabError> {
        use crate::lanyard_pe as lp;
        let (Some(pe2), Some((_, sock1))) = (&self.pe2, &self.lanyard) else {
            return Ok(());
        };
        let socks = [sock1.clone(), pe2.sock.clone()];
        let bed = pe2.bed;
        let want = bed.pseudowires();
        let mut last = String::new();
        let res = wait_for("the PEs", secs, || {
            let mut state = Vec::new();
            let mut ok = true;
            for (side, sock) in socks.iter().enumerate() {
                let peer = 2 - side;
                let Ok(_) = self.lanyard_show_at(sock, &["interfaces"]) else {
                    state.push(format!("{} not answering", lp::PES[side]));
                    ok = false;
                    continue;
                };
                if bed.mode == crate::plan::PeMode::L2 {
                    continue;
                }
                if bed.mode.routed() {
                    let (ready, line) = self.pe_routes_ready(side, sock, &bed);
                    ok &= ready;
                    state.push(format!("{}: {line}", lp::PES[side]));
                    continue;
                }
                let up = self
                    .lanyard_show_at(sock, &["mpls", "pseudowires"])
                    .map(|v| lp::pseudowires_up(&v))
                    .unwrap_or(0);
                let arp = self.lanyard_show_at(sock, &["arp"]).unwrap_or_default();
                let macs = (1..=bed.uplinks)
                    .filter(|u| lp::arp_has(&arp, &format!("10.94.{u}.{peer}")))
                    .count();
                let bypass = bed.uplinks < 2
                    || self
                        .lanyard_show_at(sock, &["mpls", "fast-reroute"])
                        .is_ok_and(|v| lp::bypass_ready(&v));
                ok &= up == want && macs == bed.uplinks as usize && bypass;
                state.push(format!(
                    "{}: {up}/{want} pseudowires up, {macs}/{} uplink neighbours, bypass {}",
                    lp::PES[side],
                    bed.uplinks,
                    if bypass { "ready" } else { "not ready" }
                ));
            }
            last = state.join("; ");
            ok
        });
        res.map_err(|e| {
            LabError::Dut(format!(
                "{e}: {last}; PE1 log: {}; PE2 log: {}",
                tail(&self.topo.tmp.join("lanyard/lanyard.log")),
                tail(&self.topo.tmp.join("pe2/lanyard.log"))
            ))
        })?;
        self.repin_processes();
        Ok(())
    }

    /// lanyard-rstp: `show spanning-tree` of the access switches and the
    /// nodes (Null for one that does not answer).
    fn trees(&self) -> ([serde_json::Value; 2], [serde_json::Value; 2]) {
        let show = |s: Option<&PathBuf>| {
            s.and_then(|s| self.lanyard_show_at(s, &["spanning-tree"]).ok())
                .unwrap_or_default()
        };
        let acc1 = self.lanyard.as_ref().map(|(_, s)| s);
        (
            [show(acc1), show(self.access2.as_ref())],
            [
                show(self.pair.first().map(|n| &n.sock)),
                show(self.pair.get(1).map(|n| &n.sock)),
            ],
        )
    }

    /// lanyard-rstp: wait until the tree is the intended one, settled.
    fn wait_tree(&self, secs: f64) -> Result<(), LabError> {
        let mut last = String::new();
        let res = wait_for("the spanning tree to settle", secs, || {
            let (acc, nodes) = self.trees();
            last = crate::lanyard_rstp::tree_line(&acc, &nodes);
            crate::lanyard_rstp::converged(&acc, &nodes)
        });
        res.map_err(|e| LabError::Dut(format!("{e}: {last}")))
    }

    /// What a trial did to a two-node DUT, from its [`Dut::pair_state`]
    /// before and after the trial.
    pub fn pair_trial(
        &self,
        before: &serde_json::Value,
        after: &serde_json::Value,
    ) -> serde_json::Value {
        if self.spec.driver == Driver::LanyardRstp {
            crate::lanyard_rstp::trial_state(before, after)
        } else if self.spec.driver == Driver::LanyardPe {
            crate::lanyard_pe::trial_state(before, after)
        } else {
            crate::lanyard_pair::trial_state(before, after)
        }
    }

    /// lanyard-rstp: the tree now and the frames each node received on its
    /// access-facing ports so far (`{"tree", "rx": [a, b]}`).
    fn tree_state(&self) -> serde_json::Value {
        let (acc, nodes) = self.trees();
        let rx: Vec<u64> = self
            .pair
            .iter()
            .map(|n| {
                self.lanyard_show_at(&n.sock, &["counters"])
                    .ok()
                    .and_then(|v| v["ports"].as_array().cloned())
                    .unwrap_or_default()
                    .iter()
                    .filter(|p| p["name"] == "m1" || p["name"] == "n1")
                    .filter_map(|p| p["rx_frames"].as_u64())
                    .sum()
            })
            .collect();
        serde_json::json!({
            "tree": crate::lanyard_rstp::tree_line(&acc, &nodes),
            "rx": rx,
        })
    }

    /// lanyard-pair: wait until both nodes are paired with their members
    /// up and every member of the partner's two channels distributes.
    fn wait_pair(&self, secs: f64) -> Result<(), LabError> {
        let mut last = String::new();
        let res = wait_for("the virtual-switch pair to form", secs, || {
            let nodes: Vec<serde_json::Value> = self
                .pair
                .iter()
                .map(|n| {
                    self.lanyard_show_at(&n.sock, &["virtual-switch"])
                        .unwrap_or_default()
                })
                .collect();
            let po = self
                .lanyard_show(&["port-channel"])
                .map(|v| crate::lanyard_pair::distributing(&v))
                .unwrap_or_default();
            last = format!(
                "nodes: {:?}, partner members distributing: {po:?}",
                nodes
                    .iter()
                    .map(|v| (v["status"].clone(), v["multichassis_members"].clone()))
                    .collect::<Vec<_>>()
            );
            // The aggregated peer link: both members bundled on each node.
            let pl: Vec<usize> = self
                .pair
                .iter()
                .map(|n| {
                    self.lanyard_show_at(&n.sock, &["port-channel"])
                        .map_or(0, |v| crate::lanyard_pair::channel_distributing(&v, "pl"))
                })
                .collect();
            last.push_str(&format!(", peer-link members distributing: {pl:?}"));
            nodes.iter().all(testkit::vswitch::paired_with_members) && po == [4, 4] && pl == [2, 2]
        });
        res.map_err(|e| LabError::Dut(format!("{e}: {last}")))
    }

    /// Before a trial: make the DUT whole again after a test took part of
    /// it away (lanyard-pair: start a node that is not running or whose
    /// links are down, and wait for the pair and every member).
    pub fn heal(&self, secs: f64) -> Result<(), LabError> {
        if let Some(pe2) = &self.pe2 {
            // lanyard-pe: the primary uplink back (a trial cut it) and the
            // bed ready again.
            run(&pe2.script.to_string_lossy(), &["restore"])?;
            return self.wait_pe(secs);
        }
        if self.pair.is_empty() {
            return Ok(());
        }
        for n in &self.pair {
            let pids = run("ip", &["netns", "pids", &n.ns]).unwrap_or_default();
            if pids.trim().is_empty() {
                run(&n.script.to_string_lossy(), &["start"])?;
            }
        }
        if self.spec.driver == Driver::LanyardRstp {
            self.wait_tree(secs)?;
        } else {
            self.wait_pair(secs)?;
        }
        self.repin_processes();
        Ok(())
    }

    /// lanyard-pair: each node's state and the frames its channel
    /// members received so far (`{"a": {"status", "members", "rx"}, …,
    /// "partner_distributing": [po1, po2]}`); None for other DUTs.
    pub fn pair_state(&self) -> Option<serde_json::Value> {
        if let (Some(pe2), Some((_, sock1))) = (&self.pe2, &self.lanyard) {
            // lanyard-pe: each PE's protection switches and pseudowires.
            let mut o = serde_json::Map::new();
            for (pe, sock) in crate::lanyard_pe::PES.iter().zip([sock1, &pe2.sock]) {
                let show = |w: &[&str]| self.lanyard_show_at(sock, w).unwrap_or_default();
                o.insert(
                    pe.to_string(),
                    crate::lanyard_pe::pe_state(
                        &show(&["mpls", "fast-reroute"]),
                        &show(&["mpls", "pseudowires"]),
                    ),
                );
            }
            return Some(serde_json::Value::Object(o));
        }
        if self.pair.is_empty() {
            return None;
        }
        if self.spec.driver == Driver::LanyardRstp {
            return Some(self.tree_state());
        }
        let mut o = serde_json::Map::new();
        for n in &self.pair {
            let vs = self
                .lanyard_show_at(&n.sock, &["virtual-switch"])
                .unwrap_or_default();
            let counters = self.lanyard_show_at(&n.sock, &["counters"]).ok();
            let ports = counters
                .as_ref()
                .and_then(|v| v["ports"].as_array().cloned())
                .unwrap_or_default();
            let rx: u64 = ports
                .iter()
                .filter(|p| ["m1", "m2", "n1", "n2"].iter().any(|m| p["name"] == *m))
                .filter_map(|p| p["rx_frames"].as_u64())
                .sum();
            // Floods and peer-link traffic: what a rejoin costs besides loss.
            let flooded: u64 = counters
                .as_ref()
                .and_then(|v| v["vlans"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|v| v["flooded"].as_u64())
                .sum();
            let pl_tx: u64 = ports
                .iter()
                .filter(|p| {
                    crate::lanyard_pair::PEER_LINK
                        .iter()
                        .any(|m| p["name"] == *m)
                })
                .filter_map(|p| p["tx_frames"].as_u64())
                .sum();
            o.insert(
                n.name.into(),
                serde_json::json!({
                    "status": if vs.is_null() { "down".into() } else { vs["status"].clone() },
                    "members": vs["multichassis_members"],
                    "rx": rx,
                    "flooded": flooded,
                    "pl_tx": pl_tx,
                }),
            );
        }
        o.insert(
            "partner_distributing".into(),
            self.lanyard_show(&["port-channel"])
                .map(|v| crate::lanyard_pair::distributing(&v))
                .unwrap_or_default()
                .into(),
        );
        Some(serde_json::Value::Object(o))
    }

    /// `lanyard show WORDS --json` against the instance at `sock`.
    fn lanyard_show_at(&self, sock: &Path, words: &[&str]) -> Result<serde_json::Value, LabError> {
        let Some((bin, _)) = &self.lanyard else {
            return Err(LabError::Dut("lanyard is not running".into()));
        };
        let out = Command::new(bin)
            .arg("--socket")
            .arg(sock)
            .arg("show")
            .args(words)
            .arg("--json")
            .output()
            .map_err(|e| LabError::Dut(format!("lanyard show: {e}")))?;
        if !out.status.success() {
            return Err(LabError::Dut(format!(
                "lanyard show {}: {}",
                words.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        serde_json::from_slice(&out.stdout)
            .map_err(|e| LabError::Dut(format!("lanyard show {}: {e}", words.join(" "))))
    }
}

/// A prepared `ip link set IF down` (see [`Dut::prepare_link_down`]).
pub struct LinkDown {
    child: Child,
    ifname: String,
}

impl LinkDown {
    /// Take the link down now; returns when `ip` has done it and exited.
    pub fn fire(mut self) -> Result<(), LabError> {
        use std::io::Write as _;
        let line = format!("link set dev {} down\n", self.ifname);
        let mut stdin = self
            .child
            .stdin
            .take()
            .ok_or_else(|| LabError::Command("ip -batch: no stdin".into()))?;
        let w = stdin.write_all(line.as_bytes());
        drop(stdin);
        let status = self
            .child
            .wait()
            .map_err(|e| LabError::Command(format!("ip -batch: {e}")))?;
        w.map_err(|e| LabError::Command(format!("ip -batch: {e}")))?;
        if !status.success() {
            let mut err = String::new();
            if let Some(mut e) = self.child.stderr.take() {
                use std::io::Read as _;
                let _ = e.read_to_string(&mut err);
            }
            return Err(LabError::Command(format!(
                "ip link set dev {} down: {}",
                self.ifname,
                err.trim()
            )));
        }
        Ok(())
    }
}

impl Drop for LinkDown {
    fn drop(&mut self) {
        // Not fired (the trial failed first): ip exits on EOF, doing nothing.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Start `bin run --config CFG` in namespace `ns`, output to `log`
/// (appended when `append`).
/// `lanyard VERSION (PATH)` for a DUT's info lines.
fn lanyard_version(bin: &Path) -> String {
    let ver = Command::new(bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!("lanyard {ver} ({})", bin.display())
}

fn spawn_lanyard(
    ns: &str,
    bin: &Path,
    cfg: &Path,
    log: &Path,
    append: bool,
) -> Result<Child, LabError> {
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(log)
        .map_err(|e| LabError::Dut(format!("log: {e}")))?;
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(bin)
        .arg("run")
        .arg("--config")
        .arg(cfg)
        .stdin(Stdio::null())
        .stdout(logf.try_clone().map_err(|e| LabError::Dut(e.to_string()))?)
        .stderr(logf)
        .spawn()
        .map_err(|e| LabError::Dut(format!("spawn {}: {e}", bin.display())))
}

/// The linux-bridge `failover: script` (argument: a log file): what an
/// operator would write for Flexlink on Linux. sw3 is disabled (STP state
/// 0: nothing in or out; state 4 "blocking" would not hold, since the
/// kernel makes every designated port forwarding whenever another port
/// changes state); on `ip monitor` news of sw2 losing its link, sw3 is set
/// forwarding; when sw2 is up again, sw3 is disabled again (preemption).
/// Each switch is logged with its `CLOCK_REALTIME` time (taken after the
/// `bridge` command, off the critical path).
pub const FAILOVER_SCRIPT: &str = r#"#!/bin/sh
# Flexlink-style failover on a Linux bridge: sw3 backs up sw2.
P=sw2 B=sw3 LOG="$1"
bridge link set dev $B state 0 || exit 1
active=primary
ip -o monitor link | while read -r line; do
  case "$line" in
    *": $P@"*|*": $P:"*) ;;
    *) continue ;;
  esac
  case "$line" in
    *NO-CARRIER*) up=0 ;;
    *"state UP "*) up=1 ;;
    *) up=0 ;;
  esac
  if [ $up = 0 ] && [ $active = primary ]; then
    bridge link set dev $B state 3
    active=backup
    echo "$(date +%s.%N) backup" >> "$LOG"
  elif [ $up = 1 ] && [ $active = backup ]; then
    bridge link set dev $B state 0
    active=primary
    echo "$(date +%s.%N) primary" >> "$LOG"
  fi
done
"#;

/// Lanyard's `service-control` section for an inline DUT: sw1 / sw2 a
/// pair, flow table and classification sized for the lab's streams, two
/// services (the test frames are UDP or TCP to port 0x4C59, or ICMP echo
/// requests whose data starts with the signature's magic "LY": `lab` by
/// signature, whatever their addresses).
/// History per second (`bandwidth::INTERVAL_S`): trials last seconds.
/// UDP flows idle for 10 minutes, not 30 / 120 s: `flows: N` at scale
/// revisits each flow only every few trials (a full table still evicts
/// flows idle ≥ 1 s first, as new-flow tests need).
pub const INLINE_YAML: &str = "service-control:
  inline: [{subscriber-port: sw1, network-port: sw2}]
  flows: 65536
  classify-slots: 4096
  report-interval-s: 1
  timeouts: {udp-unreplied: 600, udp-replied: 600}
  services:
    - {name: web, applications: [HTTP, TLS]}
    - {name: lab}
  signatures:
    - {name: lab-udp, service: lab, protocol: udp, ports: \"19545\"}
    - {name: lab-tcp, service: lab, protocol: tcp, ports: \"19545\"}
    - {name: lab-icmp, service: lab, protocol: \"1\", payload: LY}
    - {name: lab-icmpv6, service: lab, protocol: \"58\", payload: LY}
";

/// A linux-router DUT's connection tracking (`conntrack: true`): every
/// forwarded packet goes through conntrack (a `ct` rule in the forward
/// hook is what makes the namespace track connections).
pub const CONNTRACK_NFT: &str = "table inet lab {
  chain forward_ct {
    type filter hook forward priority filter; policy accept;
    ct state new counter
  }
}
";

/// `early_drop`, `drop` and `invalid` of `/proc/net/stat/nf_conntrack`
/// (a header line, then one line of hex counters per CPU), summed; None
/// if a column is missing.
pub fn parse_conntrack_stats(text: &str) -> Option<[(&'static str, u64); 3]> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next()?.split_whitespace().collect();
    let mut out = [("early_drop", 0), ("drop", 0), ("invalid", 0)];
    let cols: Vec<usize> = out
        .iter()
        .map(|(k, _)| head.iter().position(|h| h == k))
        .collect::<Option<_>>()?;
    for l in lines {
        let v: Vec<&str> = l.split_whitespace().collect();
        for (o, &c) in out.iter_mut().zip(&cols) {
            o.1 += u64::from_str_radix(v.get(c)?, 16).ok()?;
        }
    }
    Some(out)
}

/// [`INLINE_YAML`] with a flow-table capacity of `flows` (the DUT's
/// `inline-flows`; None: the default 65,536).
pub fn inline_yaml(flows: Option<u32>) -> String {
    match flows {
        Some(n) => INLINE_YAML.replace("flows: 65536", &format!("flows: {n}")),
        None => INLINE_YAML.to_string(),
    }
}

/// `after − before` for every numeric leaf of two counter snapshots,
/// keeping only the ones that changed (nested objects as in the input).
pub fn counter_delta(before: &serde_json::Value, after: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut o = serde_json::Map::new();
            for (k, av) in a {
                let d = counter_delta(b.get(k).unwrap_or(&Value::Null), av);
                let keep = match &d {
                    Value::Object(m) => !m.is_empty(),
                    Value::Number(n) => n.as_i64() != Some(0),
                    _ => false,
                };
                if keep {
                    o.insert(k.clone(), d);
                }
            }
            Value::Object(o)
        }
        (b, Value::Number(a)) => {
            let a = a.as_i64().unwrap_or(0);
            Value::from(a - b.as_i64().unwrap_or(0))
        }
        _ => Value::Null,
    }
}

/// Queue of the `lossy` DUT's shaper: 20 ms at its rate. Pacing jitter of
/// the generator (worse on a loaded machine) is absorbed, while a trial 2 %
/// above the rate for 1 s overflows it and shows loss, so bisection finds
/// the limit rather than the jitter.
fn tbf_limit_bytes(kbit: u64) -> u64 {
    (kbit * 1000 / 8 / 50).max(6000)
}

/// TCP destination ports the services ACL denies: 10,000 distinct,
/// non-sequential, none of them the lab's UDP port (the rules are TCP).
pub fn services_deny_ports() -> Vec<u16> {
    (0..10_000u32)
        .map(|i| (1024 + (i * 7_919) % 60_000) as u16)
        .collect()
}

/// The services a `services: true` Lanyard DUT runs with, on every port:
/// the reports' setup. An IPv4 and an IPv6 access list of 10,000 TCP
/// denies (non-sequential ports) and a final permit, in and out; an input
/// policy whose 8 classes hold 500 match lines, with `class-default`
/// re-marking every other packet to AF11; flow accounting on every packet,
/// exported as IPFIX to a collector address in the DUT's namespace.
/// Port attachments: `Dut::services_attach`.
pub fn services_yaml() -> String {
    use std::fmt::Write as _;
    let deny = services_deny_ports();
    let mut c = String::with_capacity(deny.len() * 2 * 64 + 40_000);
    c.push_str("access-lists:\n");
    for (name, kind) in [("lab-v4", "ipv4"), ("lab-v6", "ipv6")] {
        let _ = writeln!(c, "  - name: {name}\n    type: {kind}\n    rules:");
        for p in &deny {
            let _ = writeln!(
                c,
                "      - {{action: deny, protocol: tcp, destination-port: {p}}}"
            );
        }
        c.push_str("      - {action: permit}\n");
    }
    // 8 classes, 500 lines: TCP/UDP ports the lab never sends to.
    c.push_str("class-maps:\n");
    let mut line = 0u32;
    for k in 0..8u32 {
        let _ = writeln!(c, "  - name: lab-class{k}\n    match:");
        let n = if k < 4 { 63 } else { 62 };
        for _ in 0..n {
            let proto = if line.is_multiple_of(2) { "tcp" } else { "udp" };
            let _ = writeln!(
                c,
                "      - {{protocol: {proto}, destination-port: {}}}",
                2_000 + line * 3
            );
            line += 1;
        }
    }
    c.push_str("policy-maps:\n  - name: lab-qos\n    classes:\n");
    for k in 0..8u32 {
        let _ = writeln!(c, "      - {{class: lab-class{k}, set-dscp: cs{}}}", k % 8);
    }
    c.push_str("      - {class: class-default, set-dscp: af11}\n");
    c.push_str(
        "flow-export:\n  collector: 127.0.0.1:9995\n  version: ipfix\n  active-timeout: 60\n  inactive-timeout: 15\n",
    );
    c
}

/// `switch:` lines for a Lanyard DUT's `port-type`: a backend,
/// `af-packet-block` (AF_PACKET with the block ring alone, no V2 ring in
/// front: the 1 ms block timer shows in latency), or `af-xdp-shared-umem`
/// (AF_XDP, the worker's ports on one UMEM: docs/io.md "Shared UMEM").
fn lanyard_backend(port_type: &str) -> String {
    match port_type {
        "af-packet-block" => "  port-backend: af-packet\n  af-packet-ring: block\n".into(),
        "af-xdp-shared-umem" => "  port-backend: af-xdp\n  af-xdp-shared-umem: on\n".into(),
        b => format!("  port-backend: {b}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conntrack_statistics_sum_over_cpus() {
        let text = "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
00000010  00000000 00000000 00000000 00000003 00000000 00000000 00000000 000000ff 00000000 00000001 00000010 00000000  00000000 00000000 00000000 00000000
00000000  00000000 00000000 00000000 00000001 00000000 00000000 00000000 00000101 00000000 00000000 00000002 00000000  00000000 00000000 00000000 00000000
";
        assert_eq!(
            parse_conntrack_stats(text),
            Some([("early_drop", 0x12), ("drop", 1), ("invalid", 4)])
        );
        assert_eq!(parse_conntrack_stats("entries insert\n0 1\n"), None);
        assert_eq!(
            parse_conntrack_stats("early_drop drop invalid\n0 1 zz\n"),
            None
        );
        assert_eq!(parse_conntrack_stats(""), None);
    }

    #[test]
    fn lanyard_accepts_the_inline_pair() {
        let base = "switch:\n  name: lab\nvlans:\n  - id: 10\nports:\n";
        let inline = format!(
            "{base}  - name: sw1\n  - name: sw2\n  - name: sw3\n    mode: access\n    vlan: 10\n{}",
            INLINE_YAML
        );
        config::parse(&inline, "inline.yaml").unwrap_or_else(|e| panic!("{e}\n{inline}"));
        let big = format!(
            "{base}  - name: sw1\n  - name: sw2\n{}",
            inline_yaml(Some(2_097_152))
        );
        let c = config::parse(&big, "inline.yaml").unwrap_or_else(|e| panic!("{e}\n{big}"));
        assert!(big.contains("flows: 2097152\n"), "{big}");
        assert_eq!(inline_yaml(None), INLINE_YAML);
        drop(c);
    }

    #[test]
    fn services_attach_to_every_pe_port() {
        use crate::plan::{Circuits, PeMode};
        let b = crate::lanyard_pe::PeBed {
            services: true,
            ..crate::lanyard_pe::PeBed {
                mode: PeMode::Pseudowire,
                circuits: Circuits::Port,
                uplinks: 2,
                vlans: 0,
                services: false,
            }
        };
        let attach =
            "    acl-in: [lab-v4, lab-v6]\n    acl-out: [lab-v4, lab-v6]\n    policy-in: lab-qos\n";
        // PE `k`'s configuration of `bed`, checked by Lanyard's parser.
        let parsed = |k: usize, bed: &crate::lanyard_pe::PeBed| -> String {
            let c = crate::lanyard_pe::pe_config(
                k,
                bed,
                Path::new("/tmp/x.sock"),
                "",
                &services_yaml(),
                attach,
                &|v| format!("ns{v}"),
                (&[], &[]),
            );
            config::parse(&c, "pe.yaml").unwrap_or_else(|e| panic!("{e}\n{c}"));
            c
        };
        let c = parsed(0, &b);
        assert_eq!(c.matches("policy-in: lab-qos").count(), 3);
        let l2 = crate::lanyard_pe::PeBed {
            mode: PeMode::L2,
            ..b
        };
        parsed(1, &l2);
        // Routed modes: the customer interfaces (every L3VPN subinterface)
        // and the uplink.
        for (mode, vlans, n) in [(PeMode::L3, 0, 2), (PeMode::L3vpn, 4, 5)] {
            let r = crate::lanyard_pe::PeBed {
                mode,
                vlans,
                uplinks: 1,
                ..b
            };
            let c = parsed(0, &r);
            assert_eq!(c.matches("policy-in: lab-qos").count(), n, "{c}");
        }
    }
}
