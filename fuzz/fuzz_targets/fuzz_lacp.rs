//! Fuzz the LACPDU codec (`wire::lacp`) and feed what parses to the LACP
//! state machine (`protocols::lacp`).
//!
//! The input is read both as a whole Ethernet frame (`parse_frame`) and as
//! a PDU starting at the subtype (`Lacpdu::parse`). Nothing may panic, and
//! whatever parses must survive `emit` → `parse` unchanged. Parsed PDUs are
//! then received by an active and a passive port on simulated time: the
//! state machine must not panic either, must answer within the transmit
//! limit, and must never distribute on a port that is not collecting.
//! The input's text lines are also read as restart state lines
//! (`SavedPort`): round trip, and a port resumed with one stays sane.
#![no_main]

use std::time::{Duration, Instant};

use protocols::lacp::{ActorConfig, LacpMode, LacpPort, LacpRate, SavedPort, TX_LIMIT};
use wire::lacp::{build_frame, parse_frame, Lacpdu, FRAME_LEN, LACPDU_LEN};

fn round_trip(pdu: &Lacpdu) {
    let mut b = [0u8; LACPDU_LEN];
    pdu.emit(&mut b).expect("emit into a full-size buffer");
    assert_eq!(Lacpdu::parse(&b).as_ref(), Ok(pdu), "PDU round trip");
    let mut f = [0u8; FRAME_LEN];
    let n = build_frame([0x02, 0, 0, 0, 0, 1], pdu, &mut f).expect("build");
    assert_eq!(parse_frame(&f[..n]).as_ref(), Ok(pdu), "frame round trip");
}

fn port(mode: LacpMode, rate: LacpRate) -> LacpPort {
    LacpPort::new(ActorConfig {
        system_priority: 32768,
        system: [0x02, 0, 0, 0, 0, 0x0a],
        key: 1,
        port_priority: 32768,
        port: 1,
        mode,
        rate,
    })
}

fn drive(pdus: &[Lacpdu]) {
    let t0 = Instant::now();
    for (mode, rate) in [
        (LacpMode::Active, LacpRate::Fast),
        (LacpMode::Passive, LacpRate::Slow),
    ] {
        let mut port = port(mode, rate);
        port.link_up(t0);
        let mut sent = Vec::new();
        let mut now = t0;
        // One PDU every 300 ms, the list twice; every deadline in between
        // is served (a deadline that poll does not serve would loop).
        for (k, pdu) in pdus.iter().chain(pdus).enumerate() {
            let at = t0 + Duration::from_millis(300 * k as u64);
            let mut wakeups = 0;
            while let Some(d) = port.next_deadline() {
                if d > at {
                    break;
                }
                now = now.max(d);
                while let Some(out) = port.poll(now) {
                    sent.push(now);
                    round_trip(&out);
                }
                wakeups += 1;
                assert!(wakeups < 1000, "deadline never served");
            }
            now = now.max(at);
            port.receive(pdu, now);
            while let Some(out) = port.poll(now) {
                sent.push(now);
                round_trip(&out);
            }
            assert!(!port.distributing() || port.collecting());
            assert!(!port.collecting() || port.selected());
        }
        for w in sent.windows(TX_LIMIT + 1) {
            assert!(
                w[TX_LIMIT] - w[0] >= Duration::from_secs(1),
                "transmit limit"
            );
        }
        port.link_down();
        assert!(!port.collecting() && !port.distributing());
        assert_eq!(port.poll(t0 + Duration::from_secs(3600)), None);
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut parsed = Vec::new();
    if let Ok(pdu) = parse_frame(data) {
        round_trip(&pdu);
        parsed.push(pdu);
    }
    if let Ok(pdu) = Lacpdu::parse(data) {
        round_trip(&pdu);
        parsed.push(pdu);
    }
    let _ = wire::lacp::is_lacp_frame(data);
    // The restart state file's lines: whatever parses prints back the same,
    // and a port resumed with it keeps the state machine's invariants.
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines() {
            if let Some(saved) = SavedPort::parse_line(line) {
                assert_eq!(SavedPort::parse_line(&saved.to_line()), Some(saved.clone()));
                let mut port = port(LacpMode::Active, LacpRate::Fast);
                let t0 = Instant::now();
                port.resume(saved.partner, t0);
                assert!(!port.distributing() || port.collecting());
                assert!(port.poll(t0).is_some(), "a resumed port speaks at once");
            }
        }
    }
    if !parsed.is_empty() {
        drive(&parsed);
    }
});
