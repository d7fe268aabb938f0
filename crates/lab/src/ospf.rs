//! Routes learned by OSPF (`routes-from: ospf` on a layer-3 test): real
//! FRR on both sides of the bed instead of static routes.
//!
//! * DUT side: zebra + ospfd in the DUT namespace on the routed ports —
//!   lanyard's TAP twins `ly-swN`, zebra handing the routes to Lanyard
//!   over FPM (`-M dplane_fpm_nl`, Lanyard's `routing.fpm`); linux-router's
//!   `swN`, zebra installing into the namespace's kernel. OSPFv2,
//!   point-to-point, the testkit's timers (hello 1 s, dead 40 s, fast SPF
//!   and LSA throttles). The daemons run in the DUT namespace, so the CPU
//!   plan pins them with the DUT's own processes.
//! * Tester side: one injector router (zebra + ospfd) per receiving port
//!   (each port that is a gateway in [`crate::routes`]) in the tester
//!   namespace. Its interface `tN` gets the emulated host's address and
//!   MAC ([`crate::sig::host_ip`], [`crate::sig::host_mac`]), so the DUT's
//!   OSPF next hop is the host the analyzer counts (the DUT's permanent
//!   neighbour entries already point there). The prefixes are kernel routes
//!   `P dev tN` in the tester namespace, and each injector redistributes
//!   only those out of its own port (`route-map … match interface tN`):
//!   several zebras share the namespace's kernel table, each advertises
//!   exactly what `routes.rs` generated for its port, as type-5 externals.
//! * The tester's kernel stays out of the data frames: an nftables netdev
//!   ingress chain on each addressed port accepts ARP and OSPF and drops
//!   the rest. That hook runs after the AF_PACKET taps, so the analyzer
//!   still sees every frame (the lab's `tc` has no actions in this kernel;
//!   `LAB_OSPF_NO_FILTER=1` leaves the filter out, for measuring it).
//!
//! Everything started here dies with the DUT ([`OspfLab`]'s drop, and the
//! topology kills whatever still runs in its namespaces); the FRR configs
//! and logs are copied next to the DUT's before that (`frr-<role>/`).

use crate::netns::{check_interrupt, run};
use crate::routes::Route4;
use crate::sig::{host_ip, host_mac, mac_str};
use crate::LabError;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};
use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions, OspfRouter};

/// The FPM port Lanyard listens on (inside the DUT namespace's loopback).
pub const FPM_PORT: u16 = 2620;

/// The DUT's OSPF router id.
const DUT_ROUTER_ID: Ipv4Addr = Ipv4Addr::new(10, 255, 255, 1);

/// FRR daemons a `routes-from: ospf` test needs; `Some(why)` when this
/// machine lacks them (root, the `frr` user, zebra, ospfd, vtysh).
pub fn frr_missing() -> Option<String> {
    testkit::frr::frr_missing(&[Daemon::Zebra, Daemon::Ospfd])
}

/// The running routers of one DUT's OSPF setup, and what converging took.
pub struct OspfLab {
    dut: FrrInstance,
    injectors: Vec<FrrInstance>,
    /// Tester ports (0-based) with an injector.
    pub gateways: Vec<usize>,
    /// Seconds from the routers' start to every adjacency Full.
    pub adjacency_s: f64,
    /// Seconds from every adjacency Full to all routes in the DUT's FIB.
    pub converge_s: f64,
    /// Routes to wait for.
    pub routes: usize,
    /// The tester ports' ingress filter is on.
    pub filtered: bool,
}

fn err(m: String) -> LabError {
    LabError::Dut(m)
}

/// `ip ospf mtu-ignore` on `ifaces`: the bed's veths carry 9,216 bytes,
/// routed ports fewer (OSPF's DD exchange compares MTUs).
fn mtu_ignore(ifaces: &[String]) -> String {
    let mut s = String::new();
    for i in ifaces {
        let _ = writeln!(s, "interface {i}\n ip ospf mtu-ignore\n!");
    }
    s
}

/// The nftables ruleset that keeps `ports`' data frames from the tester's
/// kernel (ARP and OSPF pass).
fn tester_filter(ports: &[String]) -> String {
    let mut s = String::from("table netdev lab_ospf {\n");
    for p in ports {
        let _ = write!(
            s,
            "  chain in_{p} {{\n    type filter hook ingress device \"{p}\" priority 0; policy drop;\n    \
             ether type arp accept\n    ip protocol ospf accept\n  }}\n"
        );
    }
    s.push_str("}\n");
    s
}

impl Drop for OspfLab {
    /// Every router's daemons at once: one 0.5 s grace for all, not one
    /// per router in turn (testkit::frr::stop_all).
    fn drop(&mut self) {
        testkit::frr::stop_all([&mut self.dut].into_iter().chain(self.injectors.iter_mut()));
    }
}

impl OspfLab {
    /// Sets up the tester ports that are gateways of `routes`, starts the
    /// DUT's FRR on `dut_ifaces` (with FPM to `fpm` if set; `mtu`: theirs,
    /// if not the bed's 9,216) and one injector per gateway port. Files go
    /// under `tmp`.
    pub fn start(
        tester_ns: &str,
        dut_ns: &str,
        tmp: &Path,
        routes: &[Route4],
        dut_ifaces: &[String],
        fpm: Option<u16>,
        mtu: Option<u32>,
    ) -> Result<OspfLab, LabError> {
        if let Some(why) = frr_missing() {
            return Err(LabError::Unsupported(format!("routes-from: ospf {why}")));
        }
        let gateways: Vec<usize> = routes
            .iter()
            .map(|r| r.port)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let tport = |p: usize| format!("t{}", p + 1);
        // The emulated hosts' addresses and MACs on the receiving ports,
        // and the DUT interfaces' MTU: ospfd fills its DD and LS Update
        // packets up to the interface MTU, and a 9,216-byte one is more
        // than Lanyard's 9,206-byte routed port passes to its TAP twin (at
        // 52,000 routes the exchange then never finishes), while a veth
        // drops what exceeds the receiver's MTU (linux-router's ports keep
        // the bed's 9,216). The lab's largest frame (9,216 bytes with FCS)
        // is a 9,198-byte packet.
        let mut b = String::new();
        for &p in &gateways {
            if let Some(mtu) = mtu {
                let _ = writeln!(b, "link set {} mtu {mtu}", tport(p));
            }
            let _ = writeln!(b, "link set {} address {}", tport(p), mac_str(&host_mac(p)));
            let _ = writeln!(
                b,
                "addr add {}/24 dev {}",
                Ipv4Addr::from(host_ip(p)),
                tport(p)
            );
        }
        // The prefixes, each out of its gateway's port.
        for r in routes {
            let _ = writeln!(b, "route add {}/{} dev {}", r.addr, r.len, tport(r.port));
        }
        let f = tmp.join("ospf-tester.batch");
        std::fs::write(&f, b).map_err(|e| err(format!("write {}: {e}", f.display())))?;
        run("ip", &["-n", tester_ns, "-batch", &f.to_string_lossy()])?;
        let filtered = std::env::var_os("LAB_OSPF_NO_FILTER").is_none();
        if filtered {
            let names: Vec<String> = gateways.iter().map(|&p| tport(p)).collect();
            let f = tmp.join("ospf-tester-filter.conf");
            std::fs::write(&f, tester_filter(&names))
                .map_err(|e| err(format!("write {}: {e}", f.display())))?;
            crate::netns::run_in(tester_ns, "nft", &["-f", &f.to_string_lossy()]).map_err(|e| {
                LabError::Unsupported(format!(
                    "routes-from: ospf keeps data frames from the tester's kernel with nftables (apt-get install nftables): {e}"
                ))
            })?;
        }

        let opts = FrrOptions::default();
        let mut dut_router = OspfRouter::dut(
            DUT_ROUTER_ID,
            &dut_ifaces.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        dut_router.v3 = false;
        dut_router.extra.ospfd = mtu_ignore(dut_ifaces);
        let dut_opts = if let Some(port) = fpm {
            dut_router = dut_router.with_fpm(port);
            FrrOptions {
                zebra_args: vec!["-M".into(), "dplane_fpm_nl".into()],
                ..FrrOptions::default()
            }
        } else {
            opts.clone()
        };
        let dut = dut_router
            .start(dut_ns, "dut", &dut_opts)
            .map_err(|e| err(format!("the DUT's FRR (zebra, ospfd): {e}")))?;
        let mut injectors = Vec::new();
        for &p in &gateways {
            let t = tport(p);
            let mut r = OspfRouter::injector(
                Ipv4Addr::new(10, 255, 0, (p + 1) as u8),
                &[&t],
                Vec::new(),
                Vec::new(),
            );
            r.v3 = false;
            r.advertise = false;
            r.extra = FrrConfig {
                ospfd: format!(
                    "{}route-map LAB-PORT permit 10\n match interface {t}\n!\n\
                     router ospf\n redistribute kernel route-map LAB-PORT\n!\n",
                    mtu_ignore(std::slice::from_ref(&t))
                ),
                ..FrrConfig::default()
            };
            let inst = r
                .start(tester_ns, &format!("injector-{t}"), &opts)
                .map_err(|e| err(format!("the OSPF injector on {t}: {e}")))?;
            injectors.push(inst);
        }
        Ok(OspfLab {
            dut,
            injectors,
            gateways,
            adjacency_s: 0.0,
            converge_s: 0.0,
            routes: routes.len(),
            filtered,
        })
    }

    /// Pins the DUT's daemons to `dut` and the injectors to `tester` (the
    /// CPU plan's sets, if split).
    pub fn pin(&self, cpus: crate::cpuplan::CpuPlan) {
        let pin = |inst: &FrrInstance, set: crate::cpuplan::CpuSet| {
            for (_, pid) in inst.pids() {
                pin_process(pid, set);
            }
        };
        if let Some(set) = cpus.dut() {
            pin(&self.dut, set);
        }
        if let Some(set) = cpus.tester() {
            for i in &self.injectors {
                pin(i, set);
            }
        }
    }

    /// Waits for every adjacency Full, then for `installed()` to reach the
    /// route count; `timeout` per phase. Records both times.
    pub fn converge(
        &mut self,
        timeout: Duration,
        mut installed: impl FnMut() -> u64,
    ) -> Result<(), LabError> {
        let t0 = Instant::now();
        let want = self.gateways.len();
        loop {
            let full = self.dut.ospf_full_neighbors();
            if full >= want {
                break;
            }
            check_interrupt()?;
            if t0.elapsed() > timeout {
                return Err(err(format!(
                    "OSPF: {full} of {want} adjacencies Full after {:.0} s (FRR logs kept with the DUT's, frr-dut/ospfd.log)",
                    timeout.as_secs_f64()
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        self.adjacency_s = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let want = self.routes as u64;
        let mut got = 0;
        loop {
            got = installed().max(got);
            if got >= want {
                break;
            }
            check_interrupt()?;
            if t1.elapsed() > timeout {
                return Err(err(format!(
                    "OSPF: {got} of {want} routes in the DUT's FIB {:.0} s after the adjacencies came up (zebra: {:?}; FRR logs kept with the DUT's)",
                    timeout.as_secs_f64(),
                    self.dut.route_summary(false).unwrap_or_default()
                )));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        self.converge_s = t1.elapsed().as_secs_f64();
        Ok(())
    }

    /// One line for the DUT's notes.
    pub fn describe(&self, fib: &str) -> String {
        let ports: Vec<String> = self
            .gateways
            .iter()
            .map(|p| format!("t{}", p + 1))
            .collect();
        format!(
            "{} IPv4 routes learned by OSPF ({}: {} injector router(s) in the tester namespace on {} \
             with the emulated hosts' addresses, type-5 externals; the DUT's zebra + ospfd {fib}, point-to-point, hello 1 s): \
             adjacencies Full {:.1} s after start, all routes in the FIB {:.1} s later{}",
            self.routes,
            version(),
            self.injectors.len(),
            ports.join(", "),
            self.adjacency_s,
            self.converge_s,
            if self.filtered {
                "; tester ports drop all but ARP / OSPF at ingress (nftables netdev, after the AF_PACKET taps)"
            } else {
                "; tester ports unfiltered (LAB_OSPF_NO_FILTER)"
            }
        )
    }

    /// Copies every router's config and log to `dir/frr-<role>/` (kept
    /// with the DUT's logs).
    pub fn save_logs(&self, dir: &Path) {
        for inst in std::iter::once(&self.dut).chain(&self.injectors) {
            let to = dir.join(format!("frr-{}", inst.name()));
            let _ = std::fs::create_dir_all(&to);
            let Ok(rd) = std::fs::read_dir(inst.dir()) else {
                continue;
            };
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.ends_with(".conf") || n.ends_with(".log") {
                    let _ = std::fs::copy(e.path(), to.join(&n));
                } else if n.ends_with(".out") {
                    let _ = std::fs::copy(e.path(), to.join(format!("{n}.log")));
                }
            }
        }
    }
}

/// Pins every thread of `pid` to `set` (best effort: a thread may exit).
fn pin_process(pid: u32, set: crate::cpuplan::CpuSet) {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for e in rd.flatten() {
        if let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
            let _ = set.pin(tid);
        }
    }
}

/// FRR's version, e.g. "FRR 8.4.4" (zebra prints "zebra version 8.4.4").
fn version() -> String {
    std::process::Command::new(Daemon::Zebra.binary())
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().replace("zebra version", "FRR"))
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "FRR".into())
}

/// Lanyard's OSPF routes installed, from `show ip route summary --json`.
pub fn lanyard_ospf_routes(summary: &serde_json::Value) -> u64 {
    summary["sources"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["source"] == "ospf")
                .map(|s| s["installed"].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

/// OSPF routes in namespace `ns`'s kernel table (linux-router).
pub fn kernel_ospf_routes(ns: &str) -> u64 {
    run("ip", &["-n", ns, "-4", "route", "show", "proto", "ospf"])
        .map(|s| s.lines().filter(|l| !l.starts_with(' ')).count() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_accepts_arp_and_ospf_only() {
        let f = tester_filter(&["t2".into()]);
        assert!(f.contains("device \"t2\""), "{f}");
        assert!(f.contains("policy drop") && f.contains("ether type arp accept"));
        assert!(f.contains("ip protocol ospf accept"));
    }

    #[test]
    fn lanyard_summary_counts_ospf_only() {
        let v = serde_json::json!({"sources": [
            {"source": "connected", "installed": 2},
            {"source": "ospf", "installed": 200},
            {"source": "static", "installed": 7}]});
        assert_eq!(lanyard_ospf_routes(&v), 200);
        assert_eq!(lanyard_ospf_routes(&serde_json::json!({})), 0);
    }
}
