//! OSPF at scale with real FRR and Linux as the device under test.
//!
//! Eight tester routers (one namespace each, cabled `t<i>` ↔ `sw<i>` to
//! the DUT namespace) form OSPFv2 and OSPFv3 adjacencies with the DUT's
//! FRR and advertise 30,000 IPv4 and 14,750 IPv6 external routes each
//! (240,000 + 118,000). The test waits until the DUT's zebra has installed
//! all of them, checks with `ip route get` that sample addresses from
//! every part of both tables leave through the right `sw<i>`, then
//! withdraws one router's routes twice (its link goes down; it stops
//! redistributing) and checks they go away and come back. Timings and
//! daemon CPU/memory are printed.
//!
//! By default the routers first form their adjacencies and then start
//! advertising, so the routes reach the DUT by flooding (twice as fast
//! as the database exchange here, see `LANYARD_OSPF_INJECT=start`).
//!
//! Environment: `LANYARD_LINUX_OSPF_SCALE` (or `LANYARD_OSPF_SCALE`)
//! scales the route counts (default 0.1 — a 12 s run; 1.0 is the full
//! table, measured in docs/performance.md); `LANYARD_OSPF_TIMEOUT` is the per-phase timeout in seconds
//! (default 900); `LANYARD_OSPF_INJECT=start` advertises from the start;
//! `LANYARD_OSPF_NETWORK`, `_HELLO`, `_DEAD`, `_RXMT` override the link
//! settings (see [`tune`]) and `LANYARD_OSPF_MTU` the veth MTU (1500). Needs root and FRR (`apt-get install frr`),
//! else prints SKIPPED. Takes about 4 minutes, 2 cores and 9 GB of RAM at
//! full scale.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use testkit::frr::{
    route_get_dev, Daemon, FrrInstance, FrrOptions, OspfNetwork, OspfRouter, RouterBed,
};
use testkit::routes::RouterPrefixes;

const PORTS: usize = 8;
const V4_EACH: usize = 30_000;
const V6_EACH: usize = 14_750;
const SEED: u64 = 0x5CA1E;
/// The router whose routes are withdrawn and restored (1-based).
const VICTIM: usize = 3;

fn env_f64(key: &str, default: f64) -> f64 {
    std::env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Waits until `done(v4, v6)` holds for the DUT's OSPF routes in its FIB,
/// printing progress every 5 s; returns when each family first reached its
/// own target and when both did.
fn wait_routes(
    dut: &FrrInstance,
    what: &str,
    timeout: Duration,
    v4_target: u64,
    v6_target: u64,
) -> (Duration, Duration, Duration) {
    let t0 = Instant::now();
    let mut last_print = Instant::now();
    let (mut t4, mut t6) = (None, None);
    loop {
        let v4 = dut.fib_routes(false, "ospf");
        let v6 = dut.fib_routes(true, "ospf6");
        if t4.is_none() && v4 == v4_target {
            t4 = Some(t0.elapsed());
        }
        if t6.is_none() && v6 == v6_target {
            t6 = Some(t0.elapsed());
        }
        if let (Some(a), Some(b)) = (t4, t6) {
            // Both at target together: settled (a family can pass its
            // target on the way only if the count is non-monotonic).
            if v4 == v4_target && v6 == v6_target {
                return (a, b, t0.elapsed());
            }
        }
        if last_print.elapsed() >= Duration::from_secs(5) {
            eprintln!(
                "  [{what}] {:>6.1}s  DUT FIB: ospf {v4}/{v4_target}  ospf6 {v6}/{v6_target}  \
                 (kernel: {} / {})",
                t0.elapsed().as_secs_f64(),
                kernel_ospf_routes(dut.ns(), false),
                kernel_ospf_routes(dut.ns(), true),
            );
            last_print = Instant::now();
        }
        assert!(
            t0.elapsed() < timeout,
            "{what}: DUT FIB has ospf {v4}/{v4_target}, ospf6 {v6}/{v6_target} after {timeout:?}"
        );
        // Each poll runs vtysh twice; the daemons are busy enough.
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits until the DUT has all its OSPFv2 and OSPFv3 neighbours Full,
/// printing their states every 5 s; returns how long it took.
fn wait_adjacencies(dut: &FrrInstance, timeout: Duration) -> Duration {
    let t0 = Instant::now();
    let mut last_print = Instant::now();
    loop {
        let (a, b) = (dut.ospf_full_neighbors(), dut.ospf6_full_neighbors());
        if a == PORTS && b == PORTS {
            return t0.elapsed();
        }
        if last_print.elapsed() >= Duration::from_secs(5) {
            eprintln!(
                "  [adjacency] {:>6.1}s  Full: OSPFv2 {a}/{PORTS}  OSPFv3 {b}/{PORTS}  \
                 DUT FIB: ospf {}  ospf6 {}",
                t0.elapsed().as_secs_f64(),
                dut.fib_routes(false, "ospf"),
                dut.fib_routes(true, "ospf6")
            );
            last_print = Instant::now();
        }
        assert!(
            t0.elapsed() < timeout,
            "adjacencies: OSPFv2 {a}/{PORTS}, OSPFv3 {b}/{PORTS} Full after {timeout:?}"
        );
        // Each poll runs vtysh twice; the daemons are busy enough.
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Routes with protocol ospf in the kernel of namespace `ns`.
fn kernel_ospf_routes(ns: &str, v6: bool) -> usize {
    let fam = if v6 { "-6" } else { "-4" };
    let out = std::process::Command::new("ip")
        .args(["-n", ns, fam, "route", "show", "proto", "ospf"])
        .output()
        .expect("ip route show");
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// Checks, with one `ip route get` per sample in the DUT namespace, that
/// every v4/v6 sample address leaves through `sw<owner+1>`, except
/// samples of router `gone` (1-based) which must have no route.
fn check_samples(
    bed: &RouterBed,
    s4: &[(Ipv4Addr, usize, (u32, u8))],
    s6: &[(std::net::Ipv6Addr, usize, (u128, u8))],
    gone: Option<usize>,
) -> Duration {
    let t0 = Instant::now();
    let mut addrs: Vec<String> = s4.iter().map(|x| x.0.to_string()).collect();
    addrs.extend(s6.iter().map(|x| x.0.to_string()));
    let owners: Vec<usize> = s4
        .iter()
        .map(|x| x.1)
        .chain(s6.iter().map(|x| x.1))
        .collect();
    let devs = route_get_dev(bed.dut.name(), &addrs).expect("ip route get");
    let mut bad = Vec::new();
    for ((a, k), dev) in addrs.iter().zip(&owners).zip(&devs) {
        let want = if gone == Some(k + 1) {
            None
        } else {
            Some(format!("sw{}", k + 1))
        };
        if *dev != want {
            bad.push(format!("{a}: got {dev:?}, want {want:?}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} samples wrong: {:#?}",
        bad.len(),
        addrs.len(),
        &bad[..bad.len().min(40)]
    );
    t0.elapsed()
}

fn print_usage(label: &str, insts: &[&FrrInstance]) {
    let mut by_daemon: std::collections::BTreeMap<Daemon, (f64, u64, u64)> = Default::default();
    for inst in insts {
        for u in inst.usage() {
            let e = by_daemon.entry(u.daemon).or_default();
            e.0 += u.cpu.as_secs_f64();
            e.1 = e.1.max(u.peak_rss_kb);
            e.2 += u.rss_kb;
        }
    }
    for (d, (cpu, peak, rss)) in by_daemon {
        eprintln!(
            "  {label:<8} {:<7} cpu {cpu:>7.1}s  max peak RSS {:>5} MiB  sum RSS now {:>5} MiB",
            d.name(),
            peak / 1024,
            rss / 1024
        );
    }
}

/// Applies experiment knobs from the environment to `r`:
/// `LANYARD_OSPF_NETWORK` (p2p|broadcast), `LANYARD_OSPF_HELLO`,
/// `LANYARD_OSPF_DEAD`, `LANYARD_OSPF_RXMT` (seconds).
fn tune(r: &mut OspfRouter) {
    match std::env::var("LANYARD_OSPF_NETWORK").as_deref() {
        Ok("broadcast") => r.network = OspfNetwork::Broadcast,
        Ok("p2p") => r.network = OspfNetwork::PointToPoint,
        _ => {}
    }
    r.hello = env_f64("LANYARD_OSPF_HELLO", r.hello.into()) as u16;
    r.dead = env_f64("LANYARD_OSPF_DEAD", r.dead.into()) as u16;
    r.retransmit = env_f64("LANYARD_OSPF_RXMT", r.retransmit.into()) as u16;
}

/// Applies `lines` in `configure terminal` on `inst`, panicking on error.
fn configure(inst: &FrrInstance, lines: &[String]) {
    let lines: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    if let Err(e) = inst.configure(&lines) {
        panic!("{e}");
    }
}

#[test]
fn ospf_scale_with_linux_dut() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ospf6d]);
    // A tenth by default: this is the harness's own test and the Linux
    // baseline; Lanyard's acceptance (crates/lanyard/tests/l3_ospf.rs)
    // runs the full 240k + 118k. LANYARD_OSPF_SCALE=1 for the full table.
    let scale = env_f64(
        "LANYARD_LINUX_OSPF_SCALE",
        env_f64("LANYARD_OSPF_SCALE", 0.1),
    );
    let timeout = Duration::from_secs_f64(env_f64("LANYARD_OSPF_TIMEOUT", 900.0));
    let v4_each = ((V4_EACH as f64 * scale).round() as usize).max(1);
    let v6_each = ((V6_EACH as f64 * scale).round() as usize).max(1);
    let (v4_total, v6_total) = ((v4_each * PORTS) as u64, (v6_each * PORTS) as u64);
    // Default: adjacencies first, then the routes arrive by flooding;
    // "start": advertised from the start, so they go through the
    // database exchange.
    let at_start = std::env::var("LANYARD_OSPF_INJECT").as_deref() == Ok("start");
    eprintln!(
        "OSPF scale {scale}: {PORTS} routers x ({v4_each} v4 + {v6_each} v6) = \
         {v4_total} + {v6_total}"
    );

    let t_setup = Instant::now();
    let sets = RouterPrefixes::new(PORTS, v4_each, v6_each, SEED);
    let mtu = env_f64("LANYARD_OSPF_MTU", 1500.0) as u32;
    let bed = RouterBed::new("ospfsc", PORTS, mtu).expect("namespaces");
    bed.address_testers().expect("tester addresses");
    bed.address_dut().expect("DUT addresses");
    let opts = FrrOptions::default();

    let ports: Vec<String> = (1..=PORTS).map(|i| format!("sw{i}")).collect();
    let port_refs: Vec<&str> = ports.iter().map(|s| s.as_str()).collect();
    let mut dut_cfg = OspfRouter::dut(Ipv4Addr::new(10, 255, 255, 1), &port_refs);
    tune(&mut dut_cfg);
    eprintln!(
        "  links {:?} MTU {mtu}, hello {} dead {} retransmit {}, routes advertised {}",
        dut_cfg.network,
        dut_cfg.hello,
        dut_cfg.dead,
        dut_cfg.retransmit,
        if at_start {
            "from the start"
        } else {
            "once Full"
        }
    );
    let dut = dut_cfg
        .start(bed.dut.name(), "dut", &opts)
        .expect("DUT FRR");
    let injectors: Vec<OspfRouter> = (1..=PORTS)
        .map(|i| {
            let mut r = OspfRouter::injector(
                Ipv4Addr::new(10, 255, 0, i as u8),
                &[&format!("t{i}")],
                sets.v4[i - 1].clone(),
                sets.v6[i - 1].clone(),
            );
            tune(&mut r);
            r.advertise = at_start;
            r
        })
        .collect();
    let setup = t_setup.elapsed();

    // In parallel: each start loads 45k kernel routes and waits for its
    // zebra to come up.
    let t_start = Instant::now();
    let testers = bed.start_routers(&injectors, &opts);
    let start_testers = t_start.elapsed();

    // With routes advertised from the start a neighbour is Full only
    // once the databases are in sync, so this includes the exchange.
    let adj = wait_adjacencies(&dut, timeout);
    eprintln!("  all {PORTS} OSPFv2 + OSPFv3 adjacencies Full after {adj:.1?}");
    let t_adv = Instant::now();
    if !at_start {
        // In parallel: vtysh returns only once ospfd/ospf6d have
        // originated all of that router's LSAs (seconds each).
        std::thread::scope(|s| {
            for (r, inst) in injectors.iter().zip(&testers) {
                s.spawn(move || configure(inst, &r.advertise_cmds(true)));
            }
        });
    }
    let advertise = t_adv.elapsed();
    let (full4, full6, _) = wait_routes(&dut, "converge", timeout, v4_total, v6_total);
    let converge = t_adv.elapsed();
    let total = t_start.elapsed();

    // The kernel agrees with zebra.
    let dut_ns = bed.dut.name();
    assert_eq!(kernel_ospf_routes(dut_ns, false), v4_total as usize, "v4");
    assert_eq!(kernel_ospf_routes(dut_ns, true), v6_total as usize, "v6");
    let s4 = sets.sample_v4(40, 7);
    let s6 = sets.sample_v6(40, 7);
    let lookups = check_samples(&bed, &s4, &s6, None);
    eprintln!(
        "  converged; {} v4 + {} v6 samples route to the right port ({lookups:.1?})",
        s4.len(),
        s6.len()
    );
    print_usage("DUT", &[&dut]);
    print_usage("testers", &testers.iter().collect::<Vec<_>>());

    // Withdraw 1: the victim's link goes down (carrier loss on sw<k>),
    // then comes back (a new adjacency and database exchange).
    let (w4, w6) = (v4_total - v4_each as u64, v6_total - v6_each as u64);
    bed.set_tester_link(VICTIM, false).expect("link down");
    let (_, _, link_down) = wait_routes(&dut, "link down", timeout, w4, w6);
    check_samples(&bed, &s4, &s6, Some(VICTIM));
    bed.set_tester_link(VICTIM, true).expect("link up");
    let (_, _, link_up) = wait_routes(&dut, "link up", timeout, v4_total, v6_total);
    check_samples(&bed, &s4, &s6, None);

    // Withdraw 2: the victim stops redistributing, which flushes its LSAs
    // (MaxAge) through the DUT to the other seven routers; then it
    // originates them again.
    let victim = &testers[VICTIM - 1];
    configure(victim, &injectors[VICTIM - 1].advertise_cmds(false));
    let (_, _, flush) = wait_routes(&dut, "flush", timeout, w4, w6);
    check_samples(&bed, &s4, &s6, Some(VICTIM));
    configure(victim, &injectors[VICTIM - 1].advertise_cmds(true));
    let (_, _, readvertise) = wait_routes(&dut, "re-advertise", timeout, v4_total, v6_total);
    check_samples(&bed, &s4, &s6, None);

    let secs = |d: Duration| d.as_secs_f64();
    eprintln!("OSPF scale {scale} timings ({PORTS} routers, {v4_total} v4 + {v6_total} v6):");
    eprintln!(
        "  namespaces + DUT FRR                    {:>7.1}s",
        secs(setup)
    );
    eprintln!(
        "  testers started (kernel routes, FRR)    {:>7.1}s",
        secs(start_testers)
    );
    eprintln!(
        "  all adjacencies Full                    {:>7.1}s",
        secs(adj)
    );
    if !at_start {
        eprintln!(
            "  advertising configured (8 in parallel)  {:>7.1}s",
            secs(advertise)
        );
    }
    eprintln!(
        "  all routes in DUT FIB                   {:>7.1}s  (v4 {:.1}s, v6 {:.1}s)",
        secs(converge),
        secs(full4),
        secs(full6)
    );
    eprintln!(
        "  total, testers start -> all routes      {:>7.1}s",
        secs(total)
    );
    eprintln!(
        "  link down -> routes gone                {:>7.1}s",
        secs(link_down)
    );
    eprintln!(
        "  link up -> routes back                  {:>7.1}s",
        secs(link_up)
    );
    eprintln!(
        "  stop redistributing -> routes gone      {:>7.1}s",
        secs(flush)
    );
    eprintln!(
        "  redistribute again -> routes back       {:>7.1}s",
        secs(readvertise)
    );
    print_usage("DUT", &[&dut]);
    print_usage("testers", &testers.iter().collect::<Vec<_>>());
    println!(
        "ospf scale {scale}: adjacency {:.1}s, converge {:.1}s, total {:.1}s, link-down {:.1}s, \
         link-up {:.1}s, flush {:.1}s, re-advertise {:.1}s",
        secs(adj),
        secs(converge),
        secs(total),
        secs(link_down),
        secs(link_up),
        secs(flush),
        secs(readvertise)
    );

    // Daemons before namespaces (reverse declaration order would do the
    // same; explicit because it matters); all routers at once.
    let mut testers = testers;
    let mut dut = dut;
    testkit::frr::stop_all(testers.iter_mut().chain([&mut dut]));
    drop(testers);
    drop(dut);
    drop(bed);
}
