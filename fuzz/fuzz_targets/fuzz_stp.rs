//! Fuzz the BPDU codec (`wire::stp`) and feed what parses to the RSTP
//! bridge (`protocols::stp`).
//!
//! The input is read as a whole frame (`parse_frame`) and as a BPDU from
//! its protocol identifier (`Bpdu::parse`). Nothing may panic; whatever
//! parses must survive `build_frame` → `parse_frame` unchanged. Parsed
//! BPDUs are then received on both ports of a two-port bridge (one with
//! BPDU guard, root guard on the other) on simulated time, deadlines
//! served: the bridge must not panic, must never forward on an alternate,
//! backup or disabled port, and must keep within TxHoldCount.
#![no_main]

use std::time::{Duration, Instant};

use protocols::stp::{Bridge, BridgeConfig, PortConfig, PortState, Role, Timers};
use wire::stp::{build_frame, parse_frame, Bpdu, FRAME_LEN};

fn round_trip(b: &Bpdu) {
    let mut f = [0u8; FRAME_LEN];
    let n = build_frame([0x02, 0, 0, 0, 0, 1], b, &mut f).expect("build");
    assert_eq!(parse_frame(&f[..n]).as_ref(), Ok(b), "frame round trip");
}

fn drive(bpdus: &[Bpdu]) {
    let t0 = Instant::now();
    let mut br = Bridge::new(
        BridgeConfig {
            priority: 32768,
            mac: [0x02, 0, 0, 0, 0, 0x0a],
            timers: Timers::default(),
            force_stp: false,
        },
        &[
            PortConfig {
                root_guard: true,
                ..PortConfig::new(1)
            },
            PortConfig::new(2),
            PortConfig {
                bpdu_guard: true,
                admin_edge: true,
                ..PortConfig::new(3)
            },
        ],
    );
    for i in 0..3 {
        br.link_up(i, t0);
    }
    let mut sent: Vec<Vec<Instant>> = vec![Vec::new(); 3];
    let mut now = t0;
    for (k, b) in bpdus.iter().chain(bpdus).enumerate() {
        let at = t0 + Duration::from_millis(700 * k as u64);
        let mut wakeups = 0;
        while let Some(d) = br.next_deadline().filter(|d| *d <= at) {
            now = now.max(d);
            for (p, _) in br.poll(now) {
                sent[p].push(now);
            }
            wakeups += 1;
            assert!(wakeups < 10_000, "deadline never served");
        }
        now = now.max(at);
        br.receive(k % 3, b, now);
        for (p, _) in br.poll(now) {
            sent[p].push(now);
        }
        for p in 0..3 {
            if matches!(br.ports[p].role, Role::Alternate | Role::Backup | Role::Disabled) {
                assert_eq!(br.state(p), PortState::Discarding, "port {p}");
            }
        }
        if k % 3 == 0 {
            assert!(br.ports[0].role != Role::Root, "root guard");
        }
    }
    for s in &sent {
        for w in s.windows(7) {
            assert!(w[6] - w[0] >= Duration::from_secs(1), "tx hold count");
        }
    }
    let _ = br.take_flushes();
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut parsed = Vec::new();
    if let Ok(b) = parse_frame(data) {
        round_trip(&b);
        parsed.push(b);
    }
    if let Ok(b) = Bpdu::parse(data) {
        round_trip(&b);
        parsed.push(b);
    }
    let _ = wire::stp::is_bpdu_frame(data);
    // Longer inputs: a sequence of BPDUs, 36 octets each.
    for c in data.chunks(36).skip(1) {
        if let Ok(b) = Bpdu::parse(c) {
            parsed.push(b);
        }
    }
    if !parsed.is_empty() {
        drive(&parsed);
    }
});
