//! Operations benchmarks (issue 20), on a real switch in namespaces
//! (root):
//!
//! 1. `/metrics` scrape time with 256 ports (2 on veth, 254 configured
//!    whose interfaces do not exist: `missing`, still listed with every
//!    counter) and a 10,000-rule ACL on a port, against 2 ports and no
//!    ACL in the same run.
//! 2. Forwarding with 100 event-manager policies polled every 100 ms
//!    (the shortest interval) against none: one flood at full speed
//!    through two access ports, phases alternated (none, 100, none, ...)
//!    by `config apply`, frames received per second per phase.
//!
//! `cargo bench -p lanyard --bench ops`; `OPS_BENCH_ROUNDS` (default 3)
//! rounds of phase pairs, `OPS_BENCH_SECS` (default 3) per phase.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use testkit::flood::{FloodSpec, Flooder, RxCounter};
use testkit::frame::{mac, test_frame, test_info, BROADCAST};
use testkit::{l2, Netns, Switch, TestBed};

fn scrape(ns: &Netns, port: u16) -> Option<(Duration, usize)> {
    ns.run(move || {
        let t0 = Instant::now();
        let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        let el = t0.elapsed();
        let (head, body) = out.split_once("\r\n\r\n")?;
        head.starts_with("HTTP/1.1 200")
            .then(|| (el, body.lines().count()))
    })
    .ok()
    .flatten()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn scrape_config(ports: usize, acl_rules: usize) -> String {
    let mut y = String::from("vlans:\n  - id: 10\n");
    if acl_rules > 0 {
        y.push_str("access-lists:\n  - name: big\n    rules:\n");
        for k in 0..acl_rules {
            let _ = writeln!(
                y,
                "      - {{action: deny, protocol: udp, source: 10.{}.{}.0/24, destination-port: {}}}",
                k / 250 % 250,
                k % 250,
                1 + k % 60000
            );
        }
        y.push_str("      - {action: permit}\n");
    }
    y.push_str("ports:\n");
    for p in 1..=ports {
        let name = if p <= 2 {
            format!("sw{p}")
        } else {
            format!("px{p}")
        };
        let _ = writeln!(y, "  - name: {name}\n    mode: access\n    vlan: 10");
        if p == 1 && acl_rules > 0 {
            y.push_str("    acl-in: [big]\n");
        }
    }
    y
}

fn bench_scrape(bin: &str) {
    let mut rows = Vec::new();
    for (ports, rules) in [(2usize, 0usize), (256, 10_000)] {
        let bed = TestBed::new("opsm", 2, 1500).expect("namespaces");
        let sw = Switch::start_managed(
            bin,
            &bed.dut,
            &scrape_config(ports, rules),
            "  metrics:\n    listen: 127.0.0.1:9419\n",
            &["sw1", "sw2"],
        )
        .expect("start");
        let mut times = Vec::new();
        let mut lines = 0;
        // The first scrape warms caches; then 20 timed.
        let _ = scrape(&bed.dut, 9419);
        for _ in 0..20 {
            let (t, n) = scrape(&bed.dut, 9419).expect("scrape");
            times.push(t.as_secs_f64() * 1e3);
            lines = n;
        }
        let m = median(&mut times);
        let max = times.iter().cloned().fold(0.0, f64::max);
        rows.push((ports, rules, m, max, lines));
        drop(sw);
    }
    println!("/metrics scrape (20 scrapes each, median / max):");
    for (p, r, m, max, lines) in &rows {
        println!(
            "  {p:>3} ports, {r:>5} ACL rules: {m:.1} ms / {max:.1} ms, {lines} lines ({:.2}x the small switch)",
            m / rows[0].2
        );
    }
}

fn policies(n: usize, poll_ms: u32) -> String {
    let mut y = format!("event-manager:\n  poll-interval-ms: {poll_ms}\n  policies:\n");
    let kinds = [
        "{counter: interface sw1 rx_frames, above: 1000000000000}",
        "{counter: interface sw2 drops unknown-vlan, rate: true, above: 1000000000}",
        "{counter: vlan 10 rx_frames, rate: true, above: 1000000000}",
        "{cpu: lanyard, above: 100000}",
        "{table: mac, above: 99}",
        "{interface: any, state: down}",
        "{log: \"no such line [0-9]+\"}",
    ];
    // OPS_BENCH_KINDS=0,3: only those kinds (to find a costly one).
    let pick: Vec<usize> = std::env::var("OPS_BENCH_KINDS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| (0..kinds.len()).collect());
    for k in 0..n {
        let _ = writeln!(
            y,
            "    - name: p{k}\n      on: {}\n      actions: [{{log: \"p{k} {{event}}\"}}]",
            kinds[pick[k % pick.len()]]
        );
    }
    y
}

fn bench_forwarding(bin: &str) {
    let rounds: usize = std::env::var("OPS_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let secs: u64 = std::env::var("OPS_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let base = "vlans:\n  - id: 10\nports:\n  - name: sw1\n    mode: access\n    vlan: 10\n  - name: sw2\n    mode: access\n    vlan: 10\n";
    let bed = TestBed::new("opsf", 2, 1500).expect("namespaces");
    let sw = Switch::start(bin, &bed.dut, base, &["sw1", "sw2"]).expect("start");
    let dir = std::env::temp_dir().join(format!("lanyard-opsbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let none = dir.join("none.yaml");
    let many = dir.join("many.yaml");
    // The file the switch started from (it has the management section
    // the harness added), with and without the policies.
    let running = std::fs::read_to_string(sw.socket().parent().unwrap().join("config.yaml"))
        .expect("the switch's config file");
    std::fs::write(&none, &running).unwrap();
    let poll: u32 = std::env::var("OPS_BENCH_POLL_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    std::fs::write(&many, format!("{running}\n{}", policies(100, poll))).unwrap();
    // Learn the destination first: the flood is unicast to t2's test MAC.
    let (a, b) = (mac(0x0b_0001), mac(0x0b_0002));
    let p2 = bed.open(2).unwrap();
    p2.send(&test_frame(&BROADCAST, &b, &[], 0, 0, 64)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let frame = test_frame(&b, &a, &[], 1, 0, 64);
    let mut with = Vec::new();
    let mut without = Vec::new();
    let mut events_cpu = Vec::new();
    for r in 0..rounds * 2 {
        let on = r % 2 == 1;
        let f = if on { &many } else { &none };
        let o = sw
            .cli(&["config", "apply", f.to_str().unwrap()])
            .expect("apply");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::thread::sleep(Duration::from_millis(500));
        let rx = RxCounter::start(bed.tester.name(), "t2", |f| {
            test_info(f).is_some_and(|i| i.phase == 1)
        })
        .expect("rx");
        let fl = Flooder::start(
            bed.tester.name(),
            "t1",
            vec![frame.clone()],
            FloodSpec {
                rate: 0,
                duration: Some(Duration::from_secs(secs)),
                ..FloodSpec::default()
            },
        )
        .expect("flood");
        let rep = fl.wait().expect("flood");
        std::thread::sleep(Duration::from_millis(200));
        let got = rx.stop().expect("rx").matched;
        let pps = got as f64 / rep.elapsed.as_secs_f64();
        if on {
            // What the event manager's own thread used meanwhile.
            let v = sw.show_json(&["show", "event-manager"]);
            let ev = v["cpu"]["threads"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| t["name"] == "events")
                .filter_map(|t| t["pct"].as_u64())
                .sum::<u64>();
            events_cpu.push(ev);
            if std::env::var_os("OPS_BENCH_VERBOSE").is_some() {
                eprintln!("{}", v["cpu"]);
            }
            with.push(pps);
        } else {
            without.push(pps);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (mw, mo) = (median(&mut with.clone()), median(&mut without.clone()));
    println!(
        "forwarding, 64-byte frames sw1 -> sw2, {rounds} rounds of {secs} s per phase, policies polled every {poll} ms:"
    );
    println!("  no policies:  {without:.0?} frames/s (median {mo:.0})");
    println!("  100 policies: {with:.0?} frames/s (median {mw:.0})");
    println!("  ratio 100 policies / none: {:.3}", mw / mo);
    println!(
        "  the event manager thread at the end of each policy phase: {events_cpu:?} % of a core"
    );
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("ops bench: needs root (namespaces); skipped");
        return;
    }
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let _g = l2::heavy();
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if only.as_deref().is_none_or(|o| "scrape".contains(o)) {
        bench_scrape(&bin);
    }
    if only.as_deref().is_none_or(|o| "forwarding".contains(o)) {
        bench_forwarding(&bin);
    }
}
