//! Issue 13, items 9 and 10: OSPF through Lanyard's control plane.
//!
//! 10. Routed ports with no `mtu:` form OSPFv2 and OSPFv3 adjacencies with
//!     FRR neighbours at the usual 1,500 (the port and its TAP twin are
//!     both 1,500; before, 9,216 and 9,206, and OSPF stuck in ExStart).
//! 9.  A full table advertised at once over OSPFv2 and OSPFv3 together,
//!     with Lanyard's default control-plane policing: every adjacency
//!     stays Full, no routing packet is policed, and Lanyard's FIB is
//!     complete no later than FRR on Linux gets its own in the same run
//!     (same namespaces, same testers, same routes; Linux first).
//!
//! The flood test's size: by default 2 routers advertising 2,000 IPv4 and
//! 1,000 IPv6 externals each (about 10 s); `LANYARD_OSPF_SCALE=full` runs
//! the issue's scale, 8 routers and 240,000 + 118,000 routes (several
//! minutes, 2 cores, ~9 GB). `LANYARD_OSPF_ROUTERS`, `LANYARD_OSPF_V4`,
//! `LANYARD_OSPF_V6` (per router) override it. Needs root and FRR.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use testkit::frr::{link_addrs, Daemon, FrrInstance, FrrOptions, OspfRouter, RouterBed};
use testkit::routes::RouterPrefixes;
use testkit::{l2, Switch};

const FPM_PORT: u16 = 2621;
const SEED: u64 = 0x13_0CF;

/// The flood compares convergence times: the other test's FRR and switch
/// must not share the two cores with it.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn env_usize(key: &str) -> Option<usize> {
    std::env::var(key).ok().and_then(|s| s.parse().ok())
}

/// Routers, IPv4 and IPv6 externals per router.
fn scale() -> (usize, usize, usize) {
    let full = std::env::var("LANYARD_OSPF_SCALE").as_deref() == Ok("full");
    let (r, v4, v6) = if full {
        (8, 30_000, 14_750)
    } else {
        (2, 2_000, 1_000)
    };
    (
        env_usize("LANYARD_OSPF_ROUTERS").unwrap_or(r),
        env_usize("LANYARD_OSPF_V4").unwrap_or(v4),
        env_usize("LANYARD_OSPF_V6").unwrap_or(v6),
    )
}

fn lanyard_config(ports: usize, fpm: bool, mtu: Option<u32>) -> String {
    let mut y = String::from("switch:\n  name: i13-ospf\nports:\n");
    for i in 1..=ports {
        let (v4, v6) = link_addrs(i, true);
        y.push_str(&format!(
            "  - name: sw{i}\n    mode: routed\n    addresses: [{v4}, \"{v6}\"]\n"
        ));
        if let Some(m) = mtu {
            y.push_str(&format!("    mtu: {m}\n"));
        }
    }
    if fpm {
        y.push_str(&format!("routing:\n  fpm: 127.0.0.1:{FPM_PORT}\n"));
    }
    y
}

fn mtu_of(ns: &str, ifname: &str) -> u32 {
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "cat",
            &format!("/sys/class/net/{ifname}/mtu"),
        ])
        .output()
        .expect("read mtu");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

fn wait_full(dut: &FrrInstance, want: usize, timeout: Duration) -> Result<Duration, String> {
    let t0 = Instant::now();
    loop {
        let (a, b) = (dut.ospf_full_neighbors(), dut.ospf6_full_neighbors());
        if a == want && b == want {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > timeout {
            return Err(format!(
                "OSPFv2 {a}/{want}, OSPFv3 {b}/{want} Full after {timeout:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Item 10: no `mtu:` on the routed ports; the testers' veths are 1,500.
#[test]
fn issue13_routed_ports_default_to_an_mtu_ospf_neighbours_share() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ospf6d]);
    let _turn = one_at_a_time();
    let ports = 2;
    let bed = RouterBed::new("i13mt", ports, 1500).expect("namespaces");
    bed.address_testers().expect("tester addresses");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &lanyard_config(ports, false, None),
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    for i in 1..=ports {
        let (port, tap) = (format!("sw{i}"), format!("ly-sw{i}"));
        assert_eq!(mtu_of(bed.dut.name(), &port), 1500, "{port}");
        assert_eq!(
            mtu_of(bed.dut.name(), &tap),
            1500,
            "{tap} agrees with {port}"
        );
    }
    let ifs = sw.show_json(&["show", "ip", "interface"]);
    assert!(
        ifs.as_array().unwrap().iter().all(|r| r["mtu"] == 1500),
        "{ifs}"
    );
    let taps = ["ly-sw1", "ly-sw2"];
    let dut = OspfRouter::dut(Ipv4Addr::new(10, 255, 255, 13), &taps)
        .start(bed.dut.name(), "lanyard-frr", &FrrOptions::default())
        .expect("Lanyard's FRR");
    let testers: Vec<OspfRouter> = (1..=ports)
        .map(|i| OspfRouter::dut(Ipv4Addr::new(10, 255, 13, i as u8), &[&format!("t{i}")]))
        .collect();
    let testers = bed.start_routers(&testers, &FrrOptions::default());
    if let Err(e) = wait_full(&dut, ports, Duration::from_secs(30)) {
        dut.dump_logs();
        panic!("{e}: {}", dut.vtysh(&["show ip ospf neighbor"]));
    }
    // All routers at once (one 0.5 s grace, not one per router).
    let (mut testers, mut dut) = (testers, dut);
    testkit::frr::stop_all(testers.iter_mut().chain([&mut dut]));
    drop(testers);
    drop(dut);
}

/// Packets the kernel dropped on raw sockets (ospfd's and ospf6d's) in
/// namespace `ns`: the `drops` column of /proc/net/raw and raw6.
fn raw_socket_drops(ns: &str) -> u64 {
    let mut n = 0;
    for f in ["/proc/net/raw", "/proc/net/raw6"] {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", ns, "cat", f])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        n += out
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    n
}

/// What one device under test did while the table was flooded to it.
#[derive(Debug, Default)]
struct Flood {
    /// From the first `redistribute` until the FIB held every route.
    converge: Duration,
    /// Until the DUT's zebra had them all (same as `converge` on Linux).
    zebra: Duration,
    /// Raw-socket drops in the DUT namespace during the flood.
    socket_drops: u64,
    /// Fewest Full adjacencies seen (OSPFv2, OSPFv3), sampled every second
    /// and at the end.
    min_full: (usize, usize),
    /// `AdjChg` lines leaving Full in the DUT's ospfd/ospf6d logs.
    adj_lost: Vec<String>,
}

/// Adjacency-change lines that leave Full, written after byte `from` of
/// each log.
fn lost_adjacencies(dut: &FrrInstance, from: &[(String, u64)]) -> Vec<String> {
    let mut out = Vec::new();
    for (f, off) in from {
        let text = std::fs::read(dut.dir().join(f)).unwrap_or_default();
        let text = String::from_utf8_lossy(&text[(*off as usize).min(text.len())..]).into_owned();
        out.extend(
            text.lines()
                .filter(|l| l.contains("AdjChg") && l.contains("Full ->"))
                .map(str::to_string),
        );
    }
    out
}

fn log_offsets(dut: &FrrInstance) -> Vec<(String, u64)> {
    ["ospfd.log", "ospf6d.log"]
        .iter()
        .map(|f| {
            let n = std::fs::metadata(dut.dir().join(f))
                .map(|m| m.len())
                .unwrap_or(0);
            (f.to_string(), n)
        })
        .collect()
}

/// Starts `injectors` in the bed, waits for the adjacencies, then has
/// every router advertise at once and waits until `fib()` reaches `want`
/// (`zebra_is_fib`: `fib()` is the DUT zebra's own count).
fn flood(
    label: &str,
    bed: &RouterBed,
    dut: &FrrInstance,
    injectors: &[OspfRouter],
    want: (u64, u64),
    fib: &(dyn Fn() -> (u64, u64) + Sync),
    zebra_is_fib: bool,
) -> (Flood, Vec<FrrInstance>) {
    let ports = injectors.len();
    let timeout = Duration::from_secs(if ports > 2 { 1200 } else { 120 });
    let testers = bed.start_routers(injectors, &FrrOptions::default());
    if let Err(e) = wait_full(dut, ports, Duration::from_secs(120)) {
        dut.dump_logs();
        panic!("{label}: before the flood: {e}");
    }
    let offsets = log_offsets(dut);
    let drops0 = raw_socket_drops(bed.dut.name());
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for (r, inst) in injectors.iter().zip(&testers) {
            s.spawn(move || {
                let cmds = r.advertise_cmds(true);
                inst.configure(&cmds.iter().map(String::as_str).collect::<Vec<_>>())
                    .expect("redistribute")
            });
        }
    });
    let mut out = Flood {
        min_full: (ports, ports),
        ..Flood::default()
    };
    // Three samplers of their own, so that a slow `vtysh` on a loaded
    // machine delays only its own clock: the FIB (what is timed), the DUT's
    // zebra and, once a second, the adjacencies.
    let done = AtomicBool::new(false);
    let (converge, zebra, min_full) = std::thread::scope(|s| {
        let zebra = s.spawn(|| {
            while !zebra_is_fib && !done.load(Ordering::Relaxed) {
                if (dut.fib_routes(false, "ospf"), dut.fib_routes(true, "ospf6")) == want {
                    return Some(t0.elapsed());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            None
        });
        let adjacencies = s.spawn(|| {
            let mut min_full = (ports, ports);
            while !done.load(Ordering::Relaxed) {
                let full = (dut.ospf_full_neighbors(), dut.ospf6_full_neighbors());
                min_full = (min_full.0.min(full.0), min_full.1.min(full.1));
                std::thread::sleep(Duration::from_secs(1));
            }
            min_full
        });
        let mut last = Instant::now();
        let converge = loop {
            let got = fib();
            if got == want {
                break t0.elapsed();
            }
            if last.elapsed() > Duration::from_secs(10) {
                eprintln!(
                    "  [{label}] {:>6.1}s FIB {got:?} of {want:?}",
                    t0.elapsed().as_secs_f64()
                );
                last = Instant::now();
            }
            if t0.elapsed() > timeout {
                done.store(true, Ordering::Relaxed);
                dut.dump_logs();
                panic!("{label}: FIB {got:?} of {want:?} after {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        done.store(true, Ordering::Relaxed);
        let zebra = zebra.join().expect("zebra sampler").unwrap_or(converge);
        (
            converge,
            zebra,
            adjacencies.join().expect("adjacency sampler"),
        )
    });
    out.converge = converge;
    out.zebra = zebra;
    out.min_full = min_full;
    let full = (dut.ospf_full_neighbors(), dut.ospf6_full_neighbors());
    out.min_full = (out.min_full.0.min(full.0), out.min_full.1.min(full.1));
    out.adj_lost = lost_adjacencies(dut, &offsets);
    out.socket_drops = raw_socket_drops(bed.dut.name()) - drops0;
    (out, testers)
}

/// One CoPP class's (passed, dropped).
fn copp_class(sw: &Switch, class: &str) -> (u64, u64) {
    let v = sw.show_json(&["show", "control-plane"]);
    v["classes"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["class"] == class))
        .map(|c| {
            (
                c["passed"].as_u64().unwrap_or(0),
                c["dropped"].as_u64().unwrap_or(0),
            )
        })
        .unwrap_or((0, 0))
}

/// Lanyard's OSPF routes (zebra labels both versions `ospf`).
fn lanyard_fib(sw: &Switch) -> (u64, u64) {
    (sw.fib_routes("ip", "ospf"), sw.fib_routes("ipv6", "ospf"))
}

/// Item 9: see the module documentation.
#[test]
fn issue13_ospf_full_table_flood_keeps_adjacencies_under_default_copp() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ospf6d]);
    let _turn = one_at_a_time();
    let (ports, v4_each, v6_each) = scale();
    let want = ((v4_each * ports) as u64, (v6_each * ports) as u64);
    eprintln!("OSPF flood: {ports} routers x ({v4_each} v4 + {v6_each} v6), v4 and v6 at once");
    let sets = RouterPrefixes::new(ports, v4_each, v6_each, SEED);
    let injectors: Vec<OspfRouter> = (1..=ports)
        .map(|i| {
            let mut r = OspfRouter::injector(
                Ipv4Addr::new(10, 255, 13, i as u8),
                &[&format!("t{i}")],
                sets.v4[i - 1].clone(),
                sets.v6[i - 1].clone(),
            );
            r.advertise = false;
            r
        })
        .collect();
    let names: Vec<String> = (1..=ports).map(|i| format!("sw{i}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();

    // FRR on Linux: the kernel's own path.
    let linux = {
        let bed = RouterBed::new("i13lx", ports, 1500).expect("namespaces");
        bed.address_testers().expect("tester addresses");
        bed.address_dut().expect("DUT addresses");
        let dut = OspfRouter::dut(Ipv4Addr::new(10, 255, 255, 13), &name_refs)
            .start(bed.dut.name(), "linux-dut", &FrrOptions::default())
            .expect("Linux DUT FRR");
        let fib = || (dut.fib_routes(false, "ospf"), dut.fib_routes(true, "ospf6"));
        let (f, testers) = flood("linux", &bed, &dut, &injectors, want, &fib, true);
        // All routers at once (one 0.5 s grace, not one per router).
        let (mut testers, mut dut) = (testers, dut);
        testkit::frr::stop_all(testers.iter_mut().chain([&mut dut]));
        drop(testers);
        drop(dut);
        f
    };
    eprintln!("  FRR on Linux: {linux:?}");

    // Lanyard with its default control-plane policing.
    let bed = RouterBed::new("i13ly", ports, 1500).expect("namespaces");
    bed.address_testers().expect("tester addresses");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &lanyard_config(ports, true, Some(1500)),
        &name_refs,
    )
    .expect("start lanyard");
    let taps: Vec<String> = (1..=ports).map(|i| format!("ly-sw{i}")).collect();
    let tap_refs: Vec<&str> = taps.iter().map(String::as_str).collect();
    let dut = OspfRouter::dut(Ipv4Addr::new(10, 255, 255, 13), &tap_refs)
        .with_fpm(FPM_PORT)
        .start(
            bed.dut.name(),
            "lanyard-frr",
            &FrrOptions {
                zebra_args: vec!["-M".into(), "dplane_fpm_nl".into()],
                ..FrrOptions::default()
            },
        )
        .expect("Lanyard's FRR");
    let before: Vec<(u64, u64)> = ["routing", "routing-hello"]
        .iter()
        .map(|c| copp_class(&sw, c))
        .collect();
    // The busiest second of `routing` punts, for the record (what a
    // default rate must let through).
    let done = std::sync::atomic::AtomicBool::new(false);
    let (ly, testers, peak) = std::thread::scope(|s| {
        let peak = s.spawn(|| {
            let mut peak = 0u64;
            let mut last = copp_class(&sw, "routing");
            let mut t = Instant::now();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(1));
                let now = copp_class(&sw, "routing");
                let dt = t.elapsed().as_secs_f64();
                t = Instant::now();
                let n = (now.0 + now.1).saturating_sub(last.0 + last.1);
                peak = peak.max((n as f64 / dt) as u64);
                last = now;
            }
            peak
        });
        let (ly, testers) = flood(
            "lanyard",
            &bed,
            &dut,
            &injectors,
            want,
            &|| lanyard_fib(&sw),
            false,
        );
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (ly, testers, peak.join().unwrap())
    });
    let after: Vec<(u64, u64)> = ["routing", "routing-hello"]
        .iter()
        .map(|c| copp_class(&sw, c))
        .collect();
    let l3 = sw.counters()["l3"].clone();
    let tap_drops: u64 = taps
        .iter()
        .map(|t| {
            let f = format!("/sys/class/net/{t}/statistics/tx_dropped");
            let out = std::process::Command::new("ip")
                .args(["netns", "exec", bed.dut.name(), "cat", &f])
                .output()
                .expect("read TAP stats");
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u64>()
                .unwrap_or(0)
        })
        .sum();
    eprintln!(
        "  Lanyard: {ly:?}\n  CoPP routing passed/dropped {:?} -> {:?}, routing-hello {:?} -> {:?}; \
         punted {} punt-queue-full {} punt-errors {} injected {} inject-errors {} TAP tx-dropped {tap_drops}; busiest second of routing punts {peak}/s",
        before[0], after[0], before[1], after[1],
        l3["punted"], l3["punt_queue_full"], l3["punt_errors"], l3["injected"], l3["inject_errors"]
    );
    eprintln!(
        "OSPF flood {ports} x ({v4_each} + {v6_each}): FIB complete after {:.2} s on Lanyard, {:.2} s on Linux ({:.2}x)",
        ly.converge.as_secs_f64(),
        linux.converge.as_secs_f64(),
        ly.converge.as_secs_f64() / linux.converge.as_secs_f64().max(1e-3)
    );
    assert!(
        ly.adj_lost.is_empty() && ly.min_full == (ports, ports),
        "adjacencies left Full during the flood: min {:?} of {ports}; {:#?}",
        ly.min_full,
        ly.adj_lost
    );
    assert_eq!(
        after[0].1, before[0].1,
        "routing packets policed during the flood"
    );
    assert_eq!(after[1].1, before[1].1, "hellos policed during the flood");
    // No slower than Linux, within the noise of a shared 2-core machine
    // (polled every 100 ms; Lanyard's FIB is zebra's plus the FPM hop).
    let slack = linux.converge.mul_f64(1.25) + Duration::from_millis(750);
    assert!(
        ly.converge <= slack,
        "Lanyard's FIB complete after {:?}, FRR on Linux after {:?}",
        ly.converge,
        linux.converge
    );
    // All routers at once (one 0.5 s grace, not one per router).
    let (mut testers, mut dut) = (testers, dut);
    testkit::frr::stop_all(testers.iter_mut().chain([&mut dut]));
    drop(testers);
    drop(dut);
}
