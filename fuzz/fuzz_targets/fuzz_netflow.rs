//! Fuzz the NetFlow v9 / IPFIX decoder (used by tests and tools to read
//! exports): arbitrary bytes with no templates, and with Lanyard's own
//! templates known. Nothing may panic.
#![no_main]

use wire::netflow::{Decoder, Version};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = Decoder::new().decode(data);
    for v in [Version::V9, Version::Ipfix] {
        let mut d = Decoder::with_lanyard_templates(v, 0);
        let _ = d.decode(data);
        // A second message after the first: template state carries over.
        let _ = d.decode(data);
    }
});
