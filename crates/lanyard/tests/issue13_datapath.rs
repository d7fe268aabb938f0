//! Issue 13, item 3: ports share a worker fairly under overload.
//!
//! Eight access ports on one worker; three of them are flooded with
//! broadcast frames as fast as three sending threads manage, each frame
//! copied to the seven other ports, far more than one worker forwards.
//! Every busy port's receive ring overflows (`rx-ring-full` grows on
//! each: the overload is real), and the frames the worker takes from each
//! must be within 5 % of the mean — with the busy ports behind a run of
//! idle ones (ports 5, 6, 7) and spread out (1, 4, 7), the issue's two
//! cases. Before the fix the first busy port after idle ones took most
//! of every batch.

use std::time::{Duration, Instant};

use testkit::flood::{FloodSpec, Flooder};
use testkit::frame::{test_frame, BROADCAST};
use testkit::l2;
use testkit::switch::port_counter;
use testkit::{require_root, Switch, TestBed};

const PORTS: usize = 8;

fn counters(sw: &Switch, ports: &[usize]) -> Vec<(u64, u64)> {
    let c = sw.counters();
    ports
        .iter()
        .map(|p| {
            let n = format!("sw{}", p + 1);
            (
                port_counter(&c, &n, "rx_frames"),
                port_counter(&c, &n, "drops.rx-ring-full"),
            )
        })
        .collect()
}

#[test]
fn issue13_busy_ports_share_one_worker_fairly() {
    require_root!();
    let _heavy = l2::heavy();
    let bed = TestBed::new("i13fa", PORTS, 1500).expect("namespaces");
    let mut y =
        String::from("switch:\n  name: i13-fair\n  workers: 1\nvlans:\n  - id: 10\nports:\n");
    for i in 1..=PORTS {
        y += &format!("  - {{name: sw{i}, vlan: 10}}\n");
    }
    let names = bed.dut_ports();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &y,
        &names,
    )
    .expect("start lanyard");
    let window = Duration::from_millis(
        std::env::var("ISSUE13_FAIR_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2000),
    );
    let mut failures = Vec::new();
    for busy in [[4usize, 5, 6], [0, 3, 6]] {
        let floods: Vec<Flooder> = busy
            .iter()
            .map(|&p| {
                let src = [0x02, 0x13, 0, 0, 0, p as u8 + 1];
                let f = test_frame(&BROADCAST, &src, &[], 9, p as u64, 64);
                Flooder::start(
                    bed.tester.name(),
                    &format!("t{}", p + 1),
                    vec![f],
                    FloodSpec::default(),
                )
                .expect("start flood")
            })
            .collect();
        // Let every busy ring fill (each port counts `rx-ring-full`; on a
        // loaded machine the senders take longer): then the worker, not
        // the senders, decides who gets served.
        let start = counters(&sw, &busy);
        let deadline = Instant::now() + Duration::from_secs(15);
        std::thread::sleep(Duration::from_millis(1500));
        while Instant::now() < deadline
            && counters(&sw, &busy)
                .iter()
                .zip(&start)
                .any(|(now, s)| now.1 == s.1)
        {
            std::thread::sleep(Duration::from_millis(200));
        }
        let before = counters(&sw, &busy);
        let t0 = Instant::now();
        std::thread::sleep(window);
        let after = counters(&sw, &busy);
        let dt = t0.elapsed().as_secs_f64();
        let sent: Vec<u64> = floods
            .into_iter()
            .map(|f| f.stop().map(|r| r.sent).unwrap_or(0))
            .collect();
        let got: Vec<u64> = before.iter().zip(&after).map(|(b, a)| a.0 - b.0).collect();
        let ring_full: Vec<u64> = before.iter().zip(&after).map(|(b, a)| a.1 - b.1).collect();
        let mean = got.iter().sum::<u64>() as f64 / got.len() as f64;
        let worst = got
            .iter()
            .map(|&g| (g as f64 - mean).abs() / mean.max(1.0))
            .fold(0.0, f64::max);
        eprintln!(
            "busy ports {:?}: received {got:?} in {dt:.2} s ({:.0} frames/s in all), \
             rx-ring-full {ring_full:?}, offered {sent:?}; worst share {:.1} % off the mean",
            busy.map(|p| p + 1),
            got.iter().sum::<u64>() as f64 / dt,
            worst * 100.0
        );
        if ring_full.contains(&0) {
            failures.push(format!(
                "ports {:?}: not every busy port was overloaded (rx-ring-full {ring_full:?}): \
                 the test proves nothing; a faster machine needs more senders",
                busy.map(|p| p + 1)
            ));
        } else if worst > 0.05 {
            failures.push(format!(
                "ports {:?}: shares {got:?} differ from their mean by up to {:.1} % (> 5 %)",
                busy.map(|p| p + 1),
                worst * 100.0
            ));
        }
        // Drain before the next case.
        std::thread::sleep(Duration::from_millis(1500));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const PHASE_LEARN: u32 = 1;
const PHASE_TEST: u32 = 2;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Issue 13, item 6: address capacity with learning under flood load.
/// Three learning ports (t1..t3) each announce a third of the addresses
/// at the same time, `ISSUE13_RATE` frames/s each (default 40,000; every
/// frame is flooded to six ports); then three test ports (t4..t6) send
/// one frame to each address, and the monitor port (t7) must see none of
/// them. `ISSUE13_ADDRESSES` (default 300,000; the issue's check used
/// 1,000,000); `ISSUE13_DUT=bridge` runs the same frames through the
/// Linux bridge (docs/performance.md, "Learning under flood load").
// Issue 13 item 6 is still open: at the senders' full rate one AF_PACKET
// worker overflows its receive rings (docs/performance.md, "Learning under
// flood load"). Run with `--ignored` to measure; it asserts the issue's bar.
#[test]
#[ignore = "issue 13 item 6 open: learning under flood load at 40,000 fps per port"]
fn issue13_capacity_learning_under_flood_load() {
    use testkit::frame::{mac, write_test_frame};
    use testkit::l2::{check_exactly_once, split, QUIET};
    require_root!();
    let _heavy = l2::heavy();
    let total = env_u64("ISSUE13_ADDRESSES", 300_000) as u32;
    let rate = env_u64("ISSUE13_RATE", 40_000);
    let bed = TestBed::new("i13cp", 7, 1500).expect("namespaces");
    let workers = env_u64("ISSUE13_WORKERS", 1);
    let mut y = format!(
        "switch:\n  name: i13-capacity\n  mac-table-size: 1048576\n  workers: {workers}\nvlans:\n  - id: 10\nports:\n",
    );
    for i in 1..=7 {
        y += &format!("  - {{name: sw{i}, vlan: 10}}\n");
    }
    let names = bed.dut_ports();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // `ISSUE13_DUT=bridge`: the same check against the Linux bridge.
    let bridge = std::env::var("ISSUE13_DUT").is_ok_and(|d| d == "bridge");
    let sw = if bridge {
        let d = &bed.dut;
        d.exec(&[
            "ip",
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "ageing_time",
            "30000",
        ])
        .expect("bridge");
        for n in &names {
            d.exec(&["ip", "link", "set", n, "master", "br0", "up"])
                .expect("enslave");
        }
        d.exec(&["ip", "link", "set", "br0", "up"])
            .expect("bridge up");
        std::thread::sleep(Duration::from_millis(500));
        None
    } else {
        Some(
            Switch::start(
                &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
                &bed.dut,
                &y,
                &names,
            )
            .expect("start lanyard"),
        )
    };
    let ports = bed.open_all().expect("tester sockets");
    let caps: Vec<_> = ports
        .iter()
        .map(|p| p.start_capture(0, |_, _| true).expect("capture"))
        .collect();
    // The test and monitor ports' own addresses first.
    let own = |p: usize| [0x02, 0x13, 0xcc, 0, 0, p as u8];
    for (p, port) in ports.iter().enumerate().skip(3) {
        let f = test_frame(&BROADCAST, &own(p), &[], 0, 0, 64);
        port.send(&f).expect("announce");
    }
    std::thread::sleep(Duration::from_millis(300));
    let sizes = split(total, 3);
    let base = [0, sizes[0], sizes[0] + sizes[1]];
    let t_learn = Instant::now();
    std::thread::scope(|s| {
        for g in 0..3 {
            let port = &ports[g];
            let (b, n) = (base[g], sizes[g] as usize);
            s.spawn(move || {
                port.send_paced(n, rate, |i, buf| {
                    write_test_frame(
                        buf,
                        &BROADCAST,
                        &mac(b + i as u32),
                        &[],
                        PHASE_LEARN,
                        i as u64,
                        64,
                    )
                })
                .expect("send learning frames")
            });
        }
    });
    let learn_time = t_learn.elapsed();
    let learned = match &sw {
        Some(sw) => sw.wait_mac_count(None, u64::from(total) + 4, Duration::from_secs(30)),
        None => u64::from(total) + 4,
    };
    // Flooded: each learning port sees the other two groups, the others all.
    let flood_expect = |p: usize| u64::from(total) - if p < 3 { u64::from(sizes[p]) } else { 0 };
    for (p, c) in caps.iter().enumerate() {
        c.wait_for(flood_expect(p), Duration::from_secs(30), QUIET);
    }
    let c_learn = sw.as_ref().map(Switch::counters);
    std::thread::scope(|s| {
        for g in 0..3 {
            let port = &ports[3 + g];
            let (b, n, src) = (base[g], sizes[g] as usize, own(3 + g));
            s.spawn(move || {
                port.send_paced(n, rate, |i, buf| {
                    write_test_frame(buf, &mac(b + i as u32), &src, &[], PHASE_TEST, i as u64, 64)
                })
                .expect("send test frames")
            });
        }
    });
    for g in 0..3 {
        caps[g].wait_for(
            flood_expect(g) + u64::from(sizes[g]),
            Duration::from_secs(30),
            QUIET,
        );
    }
    let results: Vec<_> = caps
        .into_iter()
        .map(|c| c.stop().expect("capture"))
        .collect();
    let mut failures = Vec::new();
    let ring_full: Vec<u64> = (1..=3)
        .map(|i| {
            c_learn.as_ref().map_or(0, |c| {
                port_counter(c, &format!("sw{i}"), "drops.rx-ring-full")
            })
        })
        .collect();
    // What the senders achieved: a veth sender pays the Linux bridge's
    // forwarding in its own system call, so against the bridge the
    // offered rate falls when the bridge cannot keep up; against Lanyard
    // it does not (its receive rings absorb or drop). Compare DUTs at the
    // rate each one actually received.
    let achieved = f64::from(total) / learn_time.as_secs_f64() / 3.0;
    eprintln!(
        "{total} addresses at {rate} frames/s per port: learning phase {learn_time:?} \
         ({achieved:.0} frames/s per port achieved), {learned} learned (+4 own), \
         rx-ring-full on the learning ports {ring_full:?}"
    );
    if learned != u64::from(total) + 4 {
        failures.push(format!("{learned} addresses learned, want {}", total + 4));
    }
    for (p, r) in results.iter().enumerate() {
        let got = r.phase_count(PHASE_LEARN);
        if got != flood_expect(p) {
            failures.push(format!(
                "t{}: {got} learning-phase broadcasts, want {}",
                p + 1,
                flood_expect(p)
            ));
        }
    }
    for g in 0..3 {
        let group = (base[g]..base[g] + sizes[g]).map(mac);
        if let Err(e) =
            check_exactly_once(&format!("t{}", g + 1), &results[g].dsts(PHASE_TEST), group)
        {
            failures.push(e);
        }
    }
    for (p, r) in results.iter().enumerate().skip(3) {
        let leaked = r.phase_count(PHASE_TEST);
        if leaked != 0 {
            failures.push(format!(
                "t{}: {leaked} test-phase frames flooded here, want 0",
                p + 1
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\nper port:{}",
        failures.join("\n"),
        sw.as_ref()
            .map(|sw| l2::diagnostics(sw, &bed.dut, &names))
            .unwrap_or_default()
    );
}
