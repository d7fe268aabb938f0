//! Issue 22 acceptance at scale (docs/inline.md, "Scale"): subscribers
//! provisioned in bulk through the streamed API, then one UDP frame per
//! flow from the active subscribers through Lanyard inline, every flow
//! held at once, then flows of unknown subscribers and a full table —
//! counted, never a crash.
//!
//! Sizes by environment (CI runs the defaults, about 10 s):
//! `LANYARD_INLINE_SUBSCRIBERS` (default 100,000; the report 1,000,000),
//! `LANYARD_INLINE_ACTIVE` subscribers that send (25,000; the report
//! 250,000), `LANYARD_INLINE_FLOWS` (200,000; the report 8,000,000),
//! `LANYARD_INLINE_RATE` frames/s offered (100,000). The report's scale:
//! `LANYARD_INLINE_SUBSCRIBERS=1000000 LANYARD_INLINE_ACTIVE=250000
//! LANYARD_INLINE_FLOWS=8000000 cargo test --profile ci -p lanyard --test
//! inline_scale -- --nocapture` (prints the load time, memory and RSS).

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::flood::send_each;
use testkit::netns::stdout_ok as ok;
use testkit::netns::{veth, Netns};
use testkit::{l2, require_root, Switch};

/// Subscriber `i` (from 0) has the one address 10.0.0.0 + 1 + i.
fn sub_addr(i: u64) -> Ipv4Addr {
    Ipv4Addr::from(0x0a00_0001u32 + i as u32)
}

/// The network-side end of every flow.
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER_PORT: u16 = 5000;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// An Ethernet + IPv4 + UDP frame `src:sport → SERVER:5000` of `len`
/// bytes (at least 60) into `buf` (UDP checksum 0: none, as IPv4 allows).
fn udp_frame_len(buf: &mut Vec<u8>, src: Ipv4Addr, sport: u16, len: usize) {
    let len = len.max(60);
    buf.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00]);
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&SERVER.octets());
    let c = testkit::ip::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    buf.extend_from_slice(&ip);
    buf.extend_from_slice(&sport.to_be_bytes());
    buf.extend_from_slice(&SERVER_PORT.to_be_bytes());
    buf.extend_from_slice(&((len - 34) as u16).to_be_bytes());
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(b"lanyard scale flow");
    buf.resize(len, 0);
}

/// The 60-byte form (64 on the wire with the FCS).
fn udp_frame(buf: &mut Vec<u8>, src: Ipv4Addr, sport: u16) {
    udp_frame_len(buf, src, sport, 60);
}

/// Simple IMIX by frame count, 7 : 4 : 1 of 64, 570 and 1,518 bytes on
/// the wire (without the FCS here).
fn imix_len(k: u64) -> usize {
    match k % 12 {
        0..=6 => 60,
        7..=10 => 566,
        _ => 1514,
    }
}

/// `show service-control` once the engine has taken every frame it will
/// (its packet count unchanged over two reads 300 ms apart, twice: a
/// worker on a busy shared machine may wait that long for a core).
fn settled(sw: &Switch) -> Value {
    let (mut last, mut same) = (u64::MAX, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = sw.show_json(&["show", "service-control"]);
        let p = v["packets"].as_u64().unwrap();
        same = if p == last { same + 1 } else { 0 };
        if same == 2 || Instant::now() > deadline {
            return v;
        }
        last = p;
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn subscribers_in_bulk_and_every_flow_held_then_unknown_and_table_full_counted() {
    require_root!();
    let _g = l2::heavy();
    let subs = env_or("LANYARD_INLINE_SUBSCRIBERS", 100_000).max(1);
    let active = env_or("LANYARD_INLINE_ACTIVE", 25_000).clamp(1, subs);
    let flows = env_or("LANYARD_INLINE_FLOWS", 200_000).max(1);
    let rate = env_or("LANYARD_INLINE_RATE", 100_000);
    assert!(
        flows / active < 60_000,
        "too many flows per subscriber for one port range"
    );
    let capacity = flows.next_power_of_two();
    // A subscriber × service entry and a total per active subscriber.
    let usage = (2 * active + 1024).next_power_of_two();

    let dut = Netns::new("iscd").unwrap();
    let cli = Netns::new("iscc").unwrap();
    let srv = Netns::new("iscs").unwrap();
    veth(&cli, "c0", &dut, "sw1", 1500).unwrap();
    veth(&dut, "sw2", &srv, "s0", 1500).unwrap();
    // Every flow is decided by a signature on its first frame (the
    // report's flows are classified; nDPI's state is not held for them).
    let yaml = format!(
        "switch:\n  name: iscale\n  workers: 1\nports:\n  - {{name: sw1}}\n  - {{name: sw2}}\n\
         service-control:\n  inline: [{{subscriber-port: sw1, network-port: sw2}}]\n\
         \x20 flows: {capacity}\n  usage-entries: {usage}\n  max-subscribers: {subs}\n\
         \x20 classify-slots: 4096\n\
         \x20 timeouts: {{udp-unreplied: 3600}}\n\
         \x20 services:\n    - {{name: bulk}}\n\
         \x20 signatures:\n    - {{name: bulk-udp, service: bulk, protocol: udp, ports: \"{SERVER_PORT}\"}}\n"
    );
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &dut,
        &yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let pid = sw.pid().expect("pid");
    let rss0 = rss_kib(pid);

    // 1. Provisioning: one streamed load of every subscriber.
    let dir_guard = testkit::TempDir::new("iscale");
    let dir = dir_guard.path().to_path_buf();
    let file = dir.join("subscribers.txt");
    let mut text = String::with_capacity(subs as usize * 44);
    const PKG: [&str; 3] = ["gold", "silver", "bronze"];
    for i in 0..subs {
        text += &format!(
            "add s{i} package={} addr={}\n",
            PKG[(i % 3) as usize],
            sub_addr(i)
        );
    }
    std::fs::write(&file, text).unwrap();
    let t = Instant::now();
    let out = ok(
        sw.cli(&["subscribers", "load", file.to_str().unwrap()]),
        "subscribers load",
    );
    let load = t.elapsed();
    assert!(out.contains(&format!("{subs} added")), "{out}");
    let v = sw.show_json(&["show", "service-control"]);
    assert_eq!(v["subscribers"]["total"], subs, "{v:#}");
    assert_eq!(v["subscribers"]["gold"], subs.div_ceil(3), "{v:#}");
    let rss_subs = rss_kib(pid);
    println!(
        "{subs} subscribers loaded in {:.2} s ({:.0}/s); RSS {} -> {} MiB",
        load.as_secs_f64(),
        subs as f64 / load.as_secs_f64(),
        rss0 / 1024,
        rss_subs / 1024
    );

    // 2. One frame per flow: flow k is subscriber k % active, source port
    // 1024 + k / active. Frames the rings dropped (a busy shared machine)
    // leave gaps: a second and third pass send everything again, which
    // creates only the missing flows.
    let frame = |k: u64, b: &mut Vec<u8>| {
        udp_frame(b, sub_addr(k % active), 1024 + (k / active) as u16);
    };
    let mut passes = 0;
    let t = Instant::now();
    let mut v;
    loop {
        passes += 1;
        let r = send_each(cli.name(), "c0", flows, rate, frame).expect("send");
        v = settled(&sw);
        println!(
            "pass {passes}: {} frames at {:.0}/s, {} flows live",
            r.sent,
            r.pps(),
            v["flows"]["live"]
        );
        if v["flows"]["live"].as_u64() == Some(flows) || passes == 3 {
            break;
        }
    }
    let took = t.elapsed();
    let f = &v["flows"];
    assert_eq!(f["live"], flows, "every flow held at once: {v:#}");
    assert_eq!(f["created"], flows, "{v:#}");
    assert_eq!(f["capacity"], capacity, "{v:#}");
    assert_eq!(f["refused-full"], 0, "{v:#}");
    assert_eq!(f["evicted-idle"], 0, "{v:#}");
    assert_eq!(v["subscribers"]["no-subscriber-flows"], 0, "{v:#}");
    let bulk = v["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "bulk")
        .unwrap_or_else(|| panic!("no service bulk: {v:#}"));
    assert_eq!(bulk["active"], flows, "{bulk:#}");
    // Subscriber 0 opened flows 0, active, 2 × active, …
    let s0 = sw.show_json(&["show", "subscriber", "s0"]);
    let row = s0["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "bulk")
        .unwrap_or_else(|| panic!("s0 has no bulk row: {s0:#}"));
    assert_eq!(row["active"], flows.div_ceil(active), "{s0:#}");
    let rss_flows = rss_kib(pid);
    println!(
        "{flows} flows of {active} subscribers held after {passes} pass(es), {:.1} s; \
         flow table {} MiB ({} B per flow); RSS {} MiB",
        took.as_secs_f64(),
        f["memory-bytes"].as_u64().unwrap() >> 20,
        f["bytes-per-flow"],
        rss_flows / 1024
    );

    // 2b. Optional benchmark (`LANYARD_INLINE_THROUGHPUT=SECS`): the held
    // flows' frames offered as fast as the tester can, with the engine and
    // in bypass (Lanyard without it), 64 bytes and IMIX; delivered rate
    // from the switch's own counters (docs/performance.md).
    if let Some(secs) = std::env::var("LANYARD_INLINE_THROUGHPUT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        for (label, imix) in [("64 B", false), ("IMIX", true)] {
            let mut rates = Vec::new();
            for mode in ["off", "on", "off", "on"] {
                ok(sw.cli(&["bypass", mode]), "bypass");
                let tx0 = testkit::switch::port_counter(&sw.counters(), "sw2", "tx_frames");
                // Enough frames for SECS at a rate above the bed's ceiling;
                // stopped by its count, so the duration is measured.
                let n = secs * 600_000;
                let t = Instant::now();
                let r = send_each(cli.name(), "c0", n, 0, |k, b| {
                    let f = k % flows;
                    let len = if imix { imix_len(k) } else { 60 };
                    udp_frame_len(b, sub_addr(f % active), 1024 + (f / active) as u16, len)
                })
                .expect("send");
                let el = t.elapsed().as_secs_f64();
                std::thread::sleep(Duration::from_millis(500));
                let tx1 = testkit::switch::port_counter(&sw.counters(), "sw2", "tx_frames");
                let rx = (tx1 - tx0) as f64 / el;
                println!(
                    "throughput {label}, {} flows, bypass {mode}: offered {:.0}/s, delivered {:.0}/s",
                    flows,
                    r.pps(),
                    rx
                );
                rates.push(rx);
            }
            ok(sw.cli(&["bypass", "off"]), "bypass");
            println!(
                "throughput {label}: engine / bypass = {:.3} ({:.0} vs {:.0} frames/s, mean of 2 each)",
                (rates[0] + rates[2]) / (rates[1] + rates[3]),
                (rates[0] + rates[2]) / 2.0,
                (rates[1] + rates[3]) / 2.0
            );
        }
        let v = settled(&sw);
        assert_eq!(
            v["flows"]["live"], flows,
            "no flow lost by the benchmark: {v:#}"
        );
    }

    // 3. New flows of addresses no subscriber has: passed and counted.
    let unknown = 1000u64;
    send_each(cli.name(), "c0", unknown, 20_000, |k, b| {
        udp_frame(b, Ipv4Addr::from(0x0b00_0001u32 + k as u32), 4000)
    })
    .expect("send");
    let v = settled(&sw);
    let nosub = v["subscribers"]["no-subscriber-flows"].as_u64().unwrap();
    assert!(
        nosub > 0 && nosub <= unknown,
        "flows of unknown subscribers counted: {v:#}"
    );
    let live = v["flows"]["live"].as_u64().unwrap();
    assert_eq!(live, flows + nosub, "{v:#}");

    // 4. More new flows than the table has room for: the idle ones are
    // evicted (counted), or a new one refused (counted), never silently.
    // Rounds of fresh flows (a frame lost on the way leaves room) until
    // the table is full and something had to leave.
    let mut v = v;
    let mut next_port = 1024 + (flows / active) as u16 + 1;
    for _ in 0..4 {
        let f = &v["flows"];
        let (live, out) = (
            f["live"].as_u64().unwrap(),
            f["evicted-idle"].as_u64().unwrap() + f["refused-full"].as_u64().unwrap(),
        );
        if live == capacity && out > 0 {
            break;
        }
        let extra = capacity - live + 5_000;
        let base = next_port;
        send_each(cli.name(), "c0", extra, rate, |k, b| {
            udp_frame(b, sub_addr(k % active), base + (k / active) as u16)
        })
        .expect("send");
        next_port += (extra / active) as u16 + 1;
        v = settled(&sw);
    }
    let f = &v["flows"];
    let n = |k: &str| f[k].as_u64().unwrap();
    assert_eq!(n("live"), capacity, "the table is full: {v:#}");
    assert!(n("evicted-idle") + n("refused-full") > 0, "{v:#}");
    assert_eq!(
        n("created") - n("ended"),
        n("live"),
        "every flow that left the table is counted: {v:#}"
    );
    assert_eq!(
        n("ended"),
        n("expired") + n("evicted-idle"),
        "nothing ended but by expiry or eviction: {v:#}"
    );
    println!(
        "table full: {} evicted idle, {} refused, {} live",
        n("evicted-idle"),
        n("refused-full"),
        n("live")
    );
    // Still forwarding and answering.
    let c = sw.counters();
    assert!(
        testkit::switch::port_counter(&c, "sw2", "tx_frames") >= flows,
        "{c:#}"
    );
    let mut sw = sw;
    let t = Instant::now();
    let st = sw.stop().expect("stop");
    println!("stopped in {:.2} s ({st})", t.elapsed().as_secs_f64());
}
