//! Fuzz the services stage's frame parser and re-marker: arbitrary frames
//! at arbitrary EtherType offsets. Nothing may panic; a re-marked IPv4
//! header keeps a valid checksum if it had one.
#![no_main]

use pipeline::services::{extract_key, ip_len, tos};
use tables::acl::AclKey;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let off = 12 + (data[0] as usize % 8);
    let frame = &data[1..];
    let mut k = AclKey::default();
    let l3 = extract_key(frame, off, 1, &mut k);
    let _ = tos(frame, l3, k.family);
    let _ = ip_len(frame, l3, k.family);
    let mut f = frame.to_vec();
    let _ = pipeline::qos::set_dscp(&mut f, l3, data[0] & 63);
    let _ = pipeline::qos::dscp(&f, l3);
});
