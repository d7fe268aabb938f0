//! Acceptance (issue 4): Lanyard at report scale with FRR as its control
//! plane. Eight tester routers (real FRR, one namespace each) form OSPFv2
//! and OSPFv3 adjacencies with the FRR that runs on Lanyard's TAP twins
//! (`ly-sw1..8`) and advertise 30,000 IPv4 and 14,750 IPv6 external routes
//! each (240,000 + 118,000). zebra hands them to Lanyard over FPM. The
//! test checks Lanyard's FIB holds them all (`show ip route summary`),
//! sends test packets to addresses sampled from every part of both tables
//! and checks each arrives at the right tester, with TTL / hop limit
//! decremented and checksums valid (testkit's own dissector, independent
//! of Lanyard's `wire` crate), forwarded by Lanyard's data path (not the
//! kernel's slow path). Then one router withdraws its routes (they stop
//! forwarding), re-advertises them, and its link flaps (reconverges).
//!
//! `LANYARD_OSPF_SCALE` scales the route counts (default 1.0),
//! `LANYARD_OSPF_TIMEOUT` is the per-phase timeout in seconds (default
//! 900). Needs root and FRR, else prints SKIPPED.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use testkit::frame::{parse_mac, Mac};
use testkit::frr::{link_addrs, Daemon, FrrInstance, FrrOptions, OspfRouter, RouterBed};
use testkit::ip;
use testkit::netns::mac_of;
use testkit::routes::RouterPrefixes;
use testkit::{l2, RawPort, Switch};

const PORTS: usize = 8;
const V4_EACH: usize = 30_000;
const V6_EACH: usize = 14_750;
const SEED: u64 = 0x1A7A4D;
const VICTIM: usize = 3;
const FPM_PORT: u16 = 2620;

fn env_f64(key: &str, default: f64) -> f64 {
    std::env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn config() -> String {
    let mut y = String::from("switch:\n  name: ospf-dut\nports:\n");
    for i in 1..=PORTS {
        let (v4, v6) = link_addrs(i, true);
        y.push_str(&format!(
            "  - name: sw{i}\n    mode: routed\n    mtu: 1500\n    addresses: [{v4}, \"{v6}\"]\n"
        ));
    }
    y.push_str(&format!("routing:\n  fpm: 127.0.0.1:{FPM_PORT}\n"));
    y
}

/// Routes from OSPF in Lanyard's FIB: (IPv4, IPv6) — zebra labels both
/// OSPF versions with protocol 188.
fn lanyard_ospf_routes(sw: &Switch) -> (u64, u64) {
    (sw.fib_routes("ip", "ospf"), sw.fib_routes("ipv6", "ospf"))
}

fn wait_lanyard(sw: &Switch, what: &str, want: (u64, u64), timeout: Duration) -> Duration {
    let t0 = Instant::now();
    let mut last = Instant::now();
    loop {
        let got = lanyard_ospf_routes(sw);
        if got == want {
            return t0.elapsed();
        }
        if last.elapsed() >= Duration::from_secs(10) {
            eprintln!(
                "  [{what}] {:>6.1}s  Lanyard FIB ospf v4 {}/{}  v6 {}/{}",
                t0.elapsed().as_secs_f64(),
                got.0,
                want.0,
                got.1,
                want.1
            );
            last = Instant::now();
        }
        assert!(
            t0.elapsed() < timeout,
            "{what}: Lanyard has ospf {got:?}, want {want:?} after {timeout:?}; summary: {}",
            sw.try_show_json(&["show", "ip", "route", "summary"])
                .map(|v| v.to_string())
                .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn wait_adjacencies(dut: &FrrInstance, want: usize, timeout: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let (a, b) = (dut.ospf_full_neighbors(), dut.ospf6_full_neighbors());
        if a == want && b == want {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < timeout,
            "adjacencies: OSPFv2 {a}/{want}, OSPFv3 {b}/{want} Full after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

struct Sample {
    dst: IpAddr,
    /// 0-based owning router: the packet must leave by sw<owner+1>.
    owner: usize,
}

/// Sends one packet per sample (from t1, or from t2 for router 1's own
/// prefixes) and returns, per sample index, the 1-based tester port it
/// arrived on with a valid, TTL-decremented header (None: lost or bad),
/// plus a description of every bad arrival.
fn send_samples(
    ports: &[RawPort],
    rmacs: &[Mac],
    tmacs: &[Mac],
    samples: &[Sample],
    seq_base: u64,
) -> (Vec<Option<usize>>, Vec<String>) {
    for p in ports {
        p.drain();
    }
    for (k, s) in samples.iter().enumerate() {
        let from = if s.owner == 0 { 1 } else { 0 };
        let (src, _) = link_addrs(from + 1, false);
        let src: IpAddr = if s.dst.is_ipv4() {
            src.split('/').next().unwrap().parse().unwrap()
        } else {
            link_addrs(from + 1, false)
                .1
                .split('/')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let f = ip::udp(
            &rmacs[from],
            &tmacs[from],
            src,
            s.dst,
            64,
            seq_base + k as u64,
            128,
        );
        ports[from].send(&f).expect("send");
        if k % 64 == 63 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let mut arrived: Vec<Option<usize>> = vec![None; samples.len()];
    let mut bad = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    for (i, p) in ports.iter().enumerate() {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let wait = left
                .min(Duration::from_millis(300))
                .max(Duration::from_millis(50));
            let Some(f) = p.recv_timeout(wait).expect("recv") else {
                break;
            };
            let Some(info) = ip::parse(&f) else { continue };
            let Some(seq) = info.seq else { continue };
            if seq < seq_base || seq >= seq_base + samples.len() as u64 {
                continue;
            }
            let k = (seq - seq_base) as usize;
            let ok = info.ttl == 63
                && info.header_ok
                && info.l4_ok
                && info.dst == samples[k].dst
                && info.dst_mac == tmacs[i]
                && info.src_mac == rmacs[i];
            if ok {
                arrived[k] = Some(i + 1);
            } else {
                bad.push(format!("sample {k} on t{}: {info:?}", i + 1));
            }
        }
    }
    (arrived, bad)
}

fn l3_counter(sw: &Switch, key: &str) -> u64 {
    sw.counters()["l3"][key].as_u64().unwrap_or(0)
}

#[test]
fn ospf_240k_v4_118k_v6_through_lanyard() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ospf6d]);
    let scale = env_f64("LANYARD_OSPF_SCALE", 1.0);
    let timeout = Duration::from_secs_f64(env_f64("LANYARD_OSPF_TIMEOUT", 900.0));
    let v4_each = ((V4_EACH as f64 * scale).round() as usize).max(1);
    let v6_each = ((V6_EACH as f64 * scale).round() as usize).max(1);
    let total = ((v4_each * PORTS) as u64, (v6_each * PORTS) as u64);
    eprintln!("OSPF through Lanyard: {PORTS} routers x ({v4_each} v4 + {v6_each} v6)");

    let t_start = Instant::now();
    let sets = RouterPrefixes::new(PORTS, v4_each, v6_each, SEED);
    let bed = RouterBed::new("lyospf", PORTS, 1500).expect("namespaces");
    bed.address_testers().expect("tester addresses");
    let names: Vec<String> = (1..=PORTS).map(|i| format!("sw{i}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &config(),
        &name_refs,
    )
    .expect("start lanyard");

    // Lanyard's FRR: OSPF on the TAP twins, routes to Lanyard over FPM.
    let taps: Vec<String> = (1..=PORTS).map(|i| format!("ly-sw{i}")).collect();
    let tap_refs: Vec<&str> = taps.iter().map(String::as_str).collect();
    let opts = FrrOptions {
        zebra_args: vec!["-M".into(), "dplane_fpm_nl".into()],
        ..FrrOptions::default()
    };
    let dut = OspfRouter::dut(Ipv4Addr::new(10, 255, 255, 1), &tap_refs)
        .with_fpm(FPM_PORT)
        .start(bed.dut.name(), "lanyard-frr", &opts)
        .expect("Lanyard's FRR");
    let injectors: Vec<OspfRouter> = (1..=PORTS)
        .map(|i| {
            OspfRouter::injector(
                Ipv4Addr::new(10, 255, 0, i as u8),
                &[&format!("t{i}")],
                sets.v4[i - 1].clone(),
                sets.v6[i - 1].clone(),
            )
        })
        .collect();
    let testers = bed.start_routers(&injectors, &FrrOptions::default());
    let t0 = Instant::now();
    let adj = wait_adjacencies(&dut, PORTS, timeout);
    eprintln!("  {PORTS} OSPFv2 + OSPFv3 adjacencies Full over Lanyard after {adj:.1?}");
    let conv = wait_lanyard(&sw, "converge", total, timeout);
    let converge = t0.elapsed();
    eprintln!(
        "  Lanyard FIB holds {total:?} OSPF routes {conv:.1?} later ({converge:.1?} from start)"
    );

    // Every sample, from every part of both tables.
    let mut samples: Vec<Sample> = Vec::new();
    for (a, k, _) in sets.sample_v4(40, 11) {
        samples.push(Sample {
            dst: IpAddr::V4(a),
            owner: k,
        });
    }
    for (a, k, _) in sets.sample_v6(40, 11) {
        samples.push(Sample {
            dst: IpAddr::V6(a),
            owner: k,
        });
    }
    let ports: Vec<RawPort> = (1..=PORTS)
        .map(|i| bed.open(i).expect("raw port"))
        .collect();
    let tmacs: Vec<Mac> = (1..=PORTS)
        .map(|i| mac_of(bed.tester(i).name(), &format!("t{i}")))
        .collect();
    let ifs = sw.show_json(&["show", "ip", "interface"]);
    let rmacs: Vec<Mac> = (1..=PORTS)
        .map(|i| {
            let m = ifs
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == format!("sw{i}").as_str())
                .and_then(|r| r["mac"].as_str())
                .expect("router MAC");
            parse_mac(m).unwrap()
        })
        .collect();

    // Warm-up: the first packet to each next hop is resolved by the kernel
    // (slow path); after it, Lanyard's data path forwards everything.
    let _ = send_samples(&ports, &rmacs, &tmacs, &samples, 0);
    std::thread::sleep(Duration::from_millis(500));
    let fwd0 = l3_counter(&sw, "forwarded");
    let (arrived, bad) = send_samples(&ports, &rmacs, &tmacs, &samples, 1_000_000);
    let fwd = l3_counter(&sw, "forwarded") - fwd0;
    let wrong: Vec<String> = samples
        .iter()
        .zip(&arrived)
        .filter(|(s, a)| **a != Some(s.owner + 1))
        .map(|(s, a)| format!("{} (router {}): arrived {a:?}", s.dst, s.owner + 1))
        .collect();
    assert!(
        wrong.is_empty() && bad.is_empty(),
        "{} of {} samples misrouted or lost: {:#?}\nbad frames: {:#?}",
        wrong.len(),
        samples.len(),
        &wrong[..wrong.len().min(30)],
        &bad[..bad.len().min(10)]
    );
    assert_eq!(
        fwd,
        samples.len() as u64,
        "every sample forwarded by Lanyard's data path"
    );
    eprintln!(
        "  {} samples (v4 + v6, every router, every prefix length) delivered to the right port",
        samples.len()
    );

    // Withdrawal: the victim stops advertising; its prefixes stop forwarding.
    let (w4, w6) = (total.0 - v4_each as u64, total.1 - v6_each as u64);
    let victim = &testers[VICTIM - 1];
    let cmds = |on: bool| injectors[VICTIM - 1].advertise_cmds(on);
    let stop = cmds(false);
    victim
        .configure(&stop.iter().map(String::as_str).collect::<Vec<_>>())
        .expect("stop redistributing");
    let withdraw = wait_lanyard(&sw, "withdraw", (w4, w6), timeout);
    let (arrived, _) = send_samples(&ports, &rmacs, &tmacs, &samples, 2_000_000);
    let leaked: Vec<String> = samples
        .iter()
        .zip(&arrived)
        .filter(|(s, a)| (s.owner + 1 == VICTIM) != a.is_none())
        .map(|(s, a)| format!("{} (router {}): {a:?}", s.dst, s.owner + 1))
        .collect();
    assert!(
        leaked.is_empty(),
        "after withdrawal: {:#?}",
        &leaked[..leaked.len().min(30)]
    );
    let again = cmds(true);
    victim
        .configure(&again.iter().map(String::as_str).collect::<Vec<_>>())
        .expect("redistribute again");
    let readvertise = wait_lanyard(&sw, "re-advertise", total, timeout);

    // Flap: the victim's link goes down (Lanyard drops the TAP's carrier,
    // OSPF drops the adjacency at once) and comes back.
    bed.set_tester_link(VICTIM, false).expect("link down");
    let down = wait_lanyard(&sw, "link down", (w4, w6), timeout);
    bed.set_tester_link(VICTIM, true).expect("link up");
    let up = wait_lanyard(&sw, "link up", total, timeout);
    let _ = send_samples(&ports, &rmacs, &tmacs, &samples, 3_000_000);
    std::thread::sleep(Duration::from_millis(500));
    let (arrived, _) = send_samples(&ports, &rmacs, &tmacs, &samples, 4_000_000);
    let missing: Vec<String> = samples
        .iter()
        .zip(&arrived)
        .filter(|(s, a)| **a != Some(s.owner + 1))
        .map(|(s, a)| format!("{} (router {}): {a:?}", s.dst, s.owner + 1))
        .collect();
    assert!(
        missing.is_empty(),
        "after the flap: {:#?}",
        &missing[..missing.len().min(30)]
    );

    let summary = sw.show_json(&["show", "ip", "route", "summary"]);
    eprintln!(
        "OSPF through Lanyard ({} v4 + {} v6): adjacency {:.1}s, FIB complete {:.1}s, \
         withdraw {:.1}s, re-advertise {:.1}s, link down {:.1}s, link up {:.1}s, total {:.1}s",
        total.0,
        total.1,
        adj.as_secs_f64(),
        converge.as_secs_f64(),
        withdraw.as_secs_f64(),
        readvertise.as_secs_f64(),
        down.as_secs_f64(),
        up.as_secs_f64(),
        t_start.elapsed().as_secs_f64()
    );
    eprintln!("  Lanyard FIB: {summary}");
    // All routers at once (one 0.5 s grace, not nine in turn).
    let (mut testers, mut dut) = (testers, dut);
    testkit::frr::stop_all(testers.iter_mut().chain([&mut dut]));
    drop(testers);
    drop(dut);
}
