//! Fuzz the IGMP codec (`wire::igmp`): parsing arbitrary bytes must not
//! panic, and whatever parses must survive `emit` → `parse` unchanged.
//! The checksum would reject almost every input, so each input is also
//! tried with its checksum field filled in, to reach the structural checks.
#![no_main]

use wire::checksum;
use wire::igmp::IgmpMessage;

fn round_trip(m: &IgmpMessage) {
    let len = m.buffer_len();
    let mut b = vec![0u8; len];
    assert_eq!(m.emit(&mut b), Ok(len), "emit into buffer_len octets");
    assert_eq!(IgmpMessage::parse(&b).as_ref(), Ok(m), "round trip");
    if len > 0 {
        assert!(
            m.emit(&mut b[..len - 1]).is_err(),
            "emit into a short buffer"
        );
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(m) = IgmpMessage::parse(data) {
        round_trip(&m);
    }
    if data.len() >= 4 {
        let mut b = data.to_vec();
        b[2] = 0;
        b[3] = 0;
        let c = checksum::finish(checksum::sum(&b));
        b[2..4].copy_from_slice(&c.to_be_bytes());
        if let Ok(m) = IgmpMessage::parse(&b) {
            round_trip(&m);
        }
    }
});
