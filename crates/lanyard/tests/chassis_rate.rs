//! Benchmark (issue 21): does configuring more ports cost forwarding rate?
//!
//! One bed of 410 veth pairs (`LANYARD_CHASSIS_PORTS`). The same traffic —
//! known unicast at full speed t1→t2 and t3→t4 for 3 s
//! (`LANYARD_RATE_SECS`) — runs through a switch with 8 ports configured
//! and through one with all 410 configured and attached (the other 402
//! idle, in VLANs of their own), alternating, two rounds each. Prints the
//! received rates and the 410/8 ratio (docs/performance.md). Ignored by
//! default (minutes, and timing on a shared machine says little).
//! `LANYARD_CHASSIS_RX_RING=N` configures `switch.rx-ring` on both
//! switches, to separate the cost of the smaller rings from the rest:
//! `cargo test --profile ci -p lanyard --test chassis_rate -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use testkit::flood::{FloodSpec, Flooder, RxCounter};
use testkit::frame::{mac, test_frame, test_info, BROADCAST};
use testkit::netns::Netns;
use testkit::rawport::RawPort;
use testkit::{l2, require_root, Switch};

fn config(n: usize) -> String {
    let mut y = String::from("switch:\n  name: rate\n  workers: 2\n  mac-aging: 600\n");
    if let Ok(r) = std::env::var("LANYARD_CHASSIS_RX_RING") {
        y += &format!("  rx-ring: {r}\n");
    }
    y += "vlans:\n  - id: 10\n  - id: 20\nports:\n";
    for i in 1..=n {
        // The measured ports in VLAN 10, the idle ones in VLAN 20.
        let v = if i <= 8 { 10 } else { 20 };
        y += &format!("  - name: sw{i}\n    mode: access\n    vlan: {v}\n");
    }
    y
}

/// Frames per second received over both flows with `n` ports configured.
fn run(tester: &Netns, dut: &Netns, n: usize, secs: u64) -> f64 {
    let t0 = Instant::now();
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        dut,
        &config(n),
        &[],
    )
    .expect("start lanyard");
    let deadline = Instant::now() + Duration::from_secs(120);
    while sw
        .try_show_json(&["show", "interfaces", "up"])
        .ok()
        .and_then(|v| v.as_array().map(Vec::len))
        != Some(n)
    {
        assert!(Instant::now() < deadline, "ports not up");
        std::thread::sleep(Duration::from_millis(100));
    }
    let attach = t0.elapsed();
    // Learn the four addresses.
    for i in 1..=4 {
        let p = RawPort::open(tester.name(), &format!("t{i}")).expect("socket");
        p.send(&test_frame(&BROADCAST, &mac(i), &[], 1, 0, 64))
            .expect("send");
    }
    sw.wait_mac_count(None, 4, Duration::from_secs(10));
    let flows = [(1u32, 2u32), (3, 4)];
    let counters: Vec<RxCounter> = flows
        .iter()
        .map(|&(_, d)| {
            RxCounter::start(tester.name(), &format!("t{d}"), move |f| {
                test_info(f).is_some_and(|t| t.dst == mac(d) && t.phase == 2)
            })
            .expect("counter")
        })
        .collect();
    let flooders: Vec<Flooder> = flows
        .iter()
        .map(|&(s, d)| {
            let frames = (0..64)
                .map(|k| test_frame(&mac(d), &mac(s), &[], 2, k, 64))
                .collect();
            Flooder::start(
                tester.name(),
                &format!("t{s}"),
                frames,
                FloodSpec {
                    duration: Some(Duration::from_secs(secs)),
                    ..FloodSpec::default()
                },
            )
            .expect("flooder")
        })
        .collect();
    let sent: u64 = flooders
        .into_iter()
        .map(|f| f.wait().expect("flood").sent)
        .sum();
    std::thread::sleep(Duration::from_millis(200));
    let got: Vec<_> = counters
        .into_iter()
        .map(|c| c.stop().expect("count"))
        .collect();
    let received: u64 = got.iter().map(|r| r.matched).sum();
    let rate = received as f64 / secs as f64;
    eprintln!(
        "{n:>4} ports configured (attached in {attach:?}): sent {sent}, received {received} \
         ({:.0} frames/s, {:.1} % of offered)",
        rate,
        100.0 * received as f64 / sent.max(1) as f64
    );
    assert!(received > 0, "nothing forwarded with {n} ports");
    assert!(received <= sent, "more received than sent");
    rate
}

#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn forwarding_rate_8_vs_410_ports() {
    require_root!();
    let _heavy = l2::heavy();
    let n: usize = std::env::var("LANYARD_CHASSIS_PORTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(410);
    let secs: u64 = std::env::var("LANYARD_RATE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let tester = Netns::new("chr-t").expect("tester namespace");
    let dut = Netns::new("chr-d").expect("dut namespace");
    testkit::netns::veth_batch(&tester, "t", &dut, "sw", n, 1500).expect("veth pairs");
    let mut small = Vec::new();
    let mut big = Vec::new();
    for _ in 0..2 {
        small.push(run(&tester, &dut, 8, secs));
        big.push(run(&tester, &dut, n, secs));
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    eprintln!(
        "known unicast, 2 flows, 64-byte frames, 2 workers on 2 shared cores: \
         8 ports {:.0} frames/s, {n} ports {:.0} frames/s, ratio {n}/8 = {:.2}",
        mean(&small),
        mean(&big),
        mean(&big) / mean(&small)
    );
}
