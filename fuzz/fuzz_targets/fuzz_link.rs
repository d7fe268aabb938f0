//! Fuzz the rtnetlink `RTM_GETLINK` answer decoder and the link-event
//! reader (`io::link`): arbitrary bytes as a datagram. Nothing may panic, and a decoded link is up only
//! with carrier and admin up.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let seq = data.get(8..12).map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    for s in [seq, 0, 1] {
        if let Some(Some(l)) = io::link::parse_getlink(data, s) {
            assert!(!l.oper_up || (l.carrier && l.admin_up));
        }
    }
    let mut changed = Vec::new();
    let _ = io::link::parse_link_events(data, &mut changed);
});
