//! Multicast routing with FRR's pimd as the control plane (issue 6,
//! F-MC): pimd runs on Lanyard's TAPs, takes the IGMPv3 joins the data
//! path punts to it, installs (S,G) routes in the kernel's multicast
//! forwarding cache, and Lanyard forwards the traffic itself — TTL
//! decremented, one copy per joined port, nothing to the others — with
//! the routes shown by `show ip mroute` (origin: kernel).

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use testkit::frame::mac;
use testkit::igmp::{self, group_mac};
use testkit::ip;
use testkit::l2;
use testkit::pim::{PimConfig, PimRouter};
use testkit::{require_pim, require_root, RawPort, Switch, TestBed};

const RECEIVERS: usize = 4;

fn v4(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}

/// Every test packet sequence number `port` receives until quiet, with
/// the TTLs seen.
fn collect(port: &RawPort, quiet: Duration) -> (Vec<u64>, HashSet<u8>) {
    let mut seqs = Vec::new();
    let mut ttls = HashSet::new();
    while let Ok(Some(f)) = port.recv_timeout(quiet) {
        if let Some(p) = ip::parse(&f) {
            if let Some(s) = p.seq {
                seqs.push(s);
                ttls.insert(p.ttl);
            }
        }
    }
    (seqs, ttls)
}

/// `n` routed ports `sw1..swN` (`10.<i>.0.1/24`) with multicast routing
/// from the kernel, and zebra + pimd on their TAPs.
fn start_routed(name: &str, n: usize) -> (TestBed, Switch, PimRouter) {
    let bed = TestBed::new(name, n, 1500).expect("namespaces");
    let mut yaml = format!(
        "switch:\n  name: {name}\n  workers: 2\ncontrol-plane-policing:\n  igmp: {{rate: 5000, burst: 1000}}\nports:\n"
    );
    for i in 1..=n {
        yaml.push_str(&format!(
            "  - {{name: sw{i}, mode: routed, addresses: [10.{i}.0.1/24]}}\n"
        ));
    }
    yaml.push_str("multicast:\n  routing: true\n");
    let names: Vec<String> = (1..=n).map(|i| format!("sw{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &yaml,
        &refs,
    )
    .expect("start lanyard");
    let taps: Vec<String> = (1..=n).map(|i| format!("ly-sw{i}")).collect();
    let tap_refs: Vec<&str> = taps.iter().map(String::as_str).collect();
    let router = PimRouter::start(bed.dut.name(), name, &PimConfig::new(&tap_refs)).expect("pimd");
    router
        .wait_interfaces(&tap_refs, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", router.logs()));
    (bed, sw, router)
}

#[test]
fn pimd_ssm_routes_forwarded_by_lanyard() {
    require_root!();
    require_pim!();
    let _g = l2::heavy();
    let n = RECEIVERS + 2; // sw1 source, sw2..sw5 receivers, sw6 joins nothing
    let (bed, sw, router) = start_routed("mcpim", n);

    // Receiver r joins groups 232.1.1.(r..r+2) from the source, by IGMPv3.
    let source = v4(10, 1, 0, 2);
    let groups =
        |r: usize| -> Vec<Ipv4Addr> { (r..r + 3).map(|g| v4(232, 1, 1, g as u8)).collect() };
    let rx: Vec<RawPort> = (2..=n).map(|i| bed.open(i).unwrap()).collect();
    for (r, p) in rx.iter().take(RECEIVERS).enumerate() {
        let recs: Vec<(u8, Ipv4Addr, Vec<Ipv4Addr>)> = groups(r)
            .into_iter()
            .map(|g| (igmp::MODE_IS_INCLUDE, g, vec![source]))
            .collect();
        p.send(&igmp::igmpv3_report(
            &mac(100 + r as u32),
            v4(10, r as u8 + 2, 0, 2),
            &recs,
        ))
        .unwrap();
    }
    // Six groups in all; pimd installs each (S,G) on the join, Lanyard
    // reads it from the kernel.
    let want: usize = (0..RECEIVERS)
        .flat_map(groups)
        .collect::<HashSet<_>>()
        .len();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut routes = serde_json::Value::Null;
    while Instant::now() < deadline {
        routes = sw.show_json(&["show", "ip", "mroute"]);
        if routes["routed"].as_u64() == Some(want as u64) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        routes["routed"].as_u64(),
        Some(want as u64),
        "kernel routes in Lanyard: {routes}\npimd: {}\n{}",
        router.vtysh(&["show ip mroute"]),
        router.logs()
    );
    for r in routes["routes"].as_array().unwrap() {
        assert_eq!(r["origin"], "kernel", "{r}");
        assert_eq!(r["iif"], "sw1", "{r}");
    }
    for p in &rx {
        p.drain();
    }

    // Data: 50 packets to each group, TTL 64.
    let smac = mac(1);
    let all: Vec<Ipv4Addr> = (0..RECEIVERS + 2).map(|g| v4(232, 1, 1, g as u8)).collect();
    let frames: Vec<Vec<u8>> = (0..50u64)
        .flat_map(|k| all.iter().enumerate().map(move |(g, grp)| (k, g, *grp)))
        .map(|(k, g, grp)| {
            ip::udp(
                &group_mac(grp.into()),
                &smac,
                source.into(),
                grp.into(),
                64,
                g as u64 * 1000 + k,
                128,
            )
        })
        .collect();
    let p1 = bed.open(1).unwrap();
    p1.send_paced(frames.len(), 2_000, |k, b| {
        b.clear();
        b.extend_from_slice(&frames[k]);
    })
    .unwrap();
    let mut failures = Vec::new();
    for (r, p) in rx.iter().enumerate() {
        let (seqs, ttls) = collect(p, Duration::from_millis(700));
        let expect: HashSet<u64> = if r < RECEIVERS {
            groups(r)
                .iter()
                .flat_map(|g| {
                    let gi = g.octets()[3] as u64;
                    (0..50).map(move |k| gi * 1000 + k)
                })
                .collect()
        } else {
            HashSet::new()
        };
        let got: HashSet<u64> = seqs.iter().copied().collect();
        if got != expect
            || seqs.len() != expect.len()
            || (!seqs.is_empty() && ttls != HashSet::from([63]))
        {
            failures.push(format!(
                "sw{}: {} packets ({} distinct), want {}; TTLs {ttls:?}",
                r + 2,
                seqs.len(),
                got.len(),
                expect.len()
            ));
        }
    }
    let after = sw.show_json(&["show", "ip", "mroute"]);
    let fast: u64 = after["routes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["packets"].as_u64())
        .sum();
    // Every packet of a joined group went through Lanyard's own routes.
    if fast != 50 * want as u64 {
        failures.push(format!("per-route counters: {fast}, want {}", 50 * want));
    }
    assert!(
        failures.is_empty(),
        "{}\nmroutes: {after}\npimd: {}",
        failures.join("\n"),
        router.vtysh(&["show ip mroute"])
    );

    // Receiver 0 leaves its groups (BLOCK): pimd prunes, the kernel
    // entry loses the oif (or goes), and so does Lanyard's route.
    rx[0]
        .send(&igmp::igmpv3_report(
            &mac(100),
            v4(10, 2, 0, 2),
            &groups(0)
                .into_iter()
                .map(|g| (igmp::BLOCK_OLD_SOURCES, g, vec![source]))
                .collect::<Vec<_>>(),
        ))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let v = sw.show_json(&["show", "ip", "mroute"]);
        let still = v["routes"].as_array().unwrap().iter().any(|r| {
            r["oifs"]
                .as_array()
                .is_some_and(|o| o.iter().any(|x| x == "sw2"))
        });
        if !still {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sw2 still an outgoing port after the leave: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    rx[0].drain();
    let frames: Vec<Vec<u8>> = (0..10u64)
        .map(|k| {
            ip::udp(
                &group_mac(all[0].into()),
                &smac,
                source.into(),
                all[0].into(),
                64,
                5000 + k,
                128,
            )
        })
        .collect();
    p1.send_batch(&frames).unwrap();
    let (seqs, _) = collect(&rx[0], Duration::from_millis(500));
    assert!(seqs.is_empty(), "sw2 left but got {seqs:?}");
}

/// A routed pattern through pimd: `srcs` source ports (source host
/// `10.<port>.0.2 + k` for k < `per_src`), `rx` receiver ports; receiver r
/// joins, by IGMPv3 INCLUDE, group g with the sources of g's source port,
/// for every g with `member(g, r)`. Group g belongs to source port
/// `g % srcs`. Then one packet per (S,G) from every source; every
/// receiver must get exactly its (S,G)s with TTL 63, once.
struct Pattern {
    name: &'static str,
    srcs: usize,
    rx: usize,
    groups: u32,
    per_src: u32,
    member: fn(u32, usize) -> bool,
}

fn run_pattern(pt: &Pattern) {
    let n = pt.srcs + pt.rx;
    let (bed, sw, _router) = start_routed(pt.name, n);
    let group = |g: u32| Ipv4Addr::from(0xe801_0000 + g); // 232.1.0.0 +
    let src_port = |g: u32| (g as usize % pt.srcs) + 1; // 1-based port
    let source = |port: usize, k: u32| v4(10, port as u8, 0, 2 + k as u8);
    let t0 = Instant::now();
    let mut want_routes = 0u64;
    let mut expect: Vec<HashSet<u64>> = vec![HashSet::new(); pt.rx];
    for g in 0..pt.groups {
        let sp = src_port(g);
        let mut any = false;
        for (r, e) in expect.iter_mut().enumerate() {
            if (pt.member)(g, r) {
                any = true;
                for k in 0..pt.per_src {
                    e.insert(g as u64 * 1000 + k as u64 + sp as u64 * 100);
                }
            }
        }
        if any {
            want_routes += pt.per_src as u64;
        }
    }
    for r in 0..pt.rx {
        let port = pt.srcs + 1 + r;
        let p = bed.open(port).unwrap();
        let reports: Vec<Vec<u8>> = (0..pt.groups)
            .filter(|g| (pt.member)(*g, r))
            .map(|g| {
                let sp = src_port(g);
                let srcs: Vec<Ipv4Addr> = (0..pt.per_src).map(|k| source(sp, k)).collect();
                igmp::igmpv3_report(
                    &mac(200 + r as u32),
                    v4(10, port as u8, 0, 2),
                    &[(igmp::MODE_IS_INCLUDE, group(g), srcs)],
                )
            })
            .collect();
        p.send_paced(reports.len(), 500, |k, b| {
            b.clear();
            b.extend_from_slice(&reports[k]);
        })
        .unwrap();
    }
    // Every route with all the ports that joined it.
    let complete = |v: &serde_json::Value| -> u64 {
        v["routes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|r| {
                        let g: Ipv4Addr = r["group"].as_str().unwrap_or("0.0.0.0").parse().unwrap();
                        let g = u32::from(g) - 0xe801_0000;
                        let members = (0..pt.rx).filter(|x| (pt.member)(g, *x)).count();
                        r["oifs"].as_array().is_some_and(|o| o.len() == members)
                    })
                    .count() as u64
            })
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut v = serde_json::Value::Null;
    while Instant::now() < deadline {
        v = sw.show_json(&["show", "ip", "mroute"]);
        if complete(&v) == want_routes {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let joined_in = t0.elapsed();
    assert_eq!(
        complete(&v),
        want_routes,
        "complete routes after {joined_in:?} (of {} routes)",
        v["count"]
    );
    eprintln!(
        "{}: {want_routes} (S,G) from pimd in {joined_in:?}",
        pt.name
    );

    let rx: Vec<RawPort> = (pt.srcs + 1..=n).map(|i| bed.open(i).unwrap()).collect();
    for p in &rx {
        p.drain();
    }
    let threads: Vec<std::thread::JoinHandle<(Vec<u64>, HashSet<u8>)>> = rx
        .into_iter()
        .map(|p| std::thread::spawn(move || collect(&p, Duration::from_secs(3))))
        .collect();
    let senders: Vec<std::thread::JoinHandle<()>> = (1..=pt.srcs)
        .map(|sp| {
            let p = bed.open(sp).unwrap();
            let frames: Vec<Vec<u8>> = (0..pt.groups)
                .filter(|g| src_port(*g) == sp)
                .flat_map(|g| (0..pt.per_src).map(move |k| (g, k)))
                .map(|(g, k)| {
                    ip::udp(
                        &group_mac(group(g).into()),
                        &mac(sp as u32),
                        source(sp, k).into(),
                        group(g).into(),
                        64,
                        g as u64 * 1000 + k as u64 + sp as u64 * 100,
                        128,
                    )
                })
                .collect();
            std::thread::spawn(move || {
                p.send_paced(frames.len(), 2_000, |k, b| {
                    b.clear();
                    b.extend_from_slice(&frames[k]);
                })
                .unwrap();
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let mut failures = Vec::new();
    for (r, t) in threads.into_iter().enumerate() {
        let (seqs, ttls) = t.join().unwrap();
        let got: HashSet<u64> = seqs.iter().copied().collect();
        if got != expect[r]
            || seqs.len() != expect[r].len()
            || (!seqs.is_empty() && ttls != HashSet::from([63]))
        {
            failures.push(format!(
                "receiver sw{}: {} packets ({} distinct), want {}; {} not joined; TTLs {ttls:?}",
                pt.srcs + 1 + r,
                seqs.len(),
                got.len(),
                expect[r].len(),
                got.difference(&expect[r]).count()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The first acceptance pattern, routed through pimd: 1 source port, 24
/// receivers all joining every group (IGMPv3 INCLUDE the sources). At the
/// full 100 groups × 200 sources pimd itself needs minutes to take the
/// 480,000 (port, source) memberships (docs/performance.md); CI runs 10 ×
/// 20; `LANYARD_PIM_SCALE=100,200` runs the full pattern.
#[test]
fn pimd_1_source_24_receivers() {
    require_root!();
    require_pim!();
    let _g = l2::heavy();
    let (groups, per_src) = std::env::var("LANYARD_PIM_SCALE")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once(',')?;
            Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?))
        })
        .unwrap_or((10, 20));
    run_pattern(&Pattern {
        name: "mcp1",
        srcs: 1,
        rx: 24,
        groups,
        per_src,
        member: |_, _| true,
    });
}

/// The second acceptance pattern, routed through pimd: 8 source ports,
/// 800 groups, 3 receiver ports per group (of 12; the kernel has at most
/// 32 multicast interfaces, pimd's register interface included).
#[test]
fn pimd_8_sources_800_groups_3_ports_each() {
    require_root!();
    require_pim!();
    let _g = l2::heavy();
    run_pattern(&Pattern {
        name: "mcp8",
        srcs: 8,
        rx: 12,
        groups: 800,
        per_src: 1,
        member: |g, r| (0..3).any(|k| (3 * g as usize + k) % 12 == r),
    });
}
