//! Fuzz the decoders of what zebra (with the zebra_lanyard module) sends:
//! the FPM stream split into frames and netlink messages, each decoded as
//! a label entry / labelled route; and the pseudowire side-channel line.
//! Nothing may panic.
#![no_main]

use labelfeed::{decode_route, fpm_frames, netlink_messages, PwMessage};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = decode_route(data);
    if let Ok(n) = netlink_messages(data) {
        for m in n {
            let _ = decode_route(m);
        }
    }
    if let Ok((frames, used)) = fpm_frames(data) {
        assert!(used <= data.len());
        for f in frames {
            if let Ok(n) = netlink_messages(f) {
                for m in n {
                    let _ = decode_route(m);
                }
            }
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = PwMessage::parse(s);
    }
});
