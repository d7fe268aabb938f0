//! Fuzz the multicast stage's look into frames (`pipeline::mcast`):
//! classifying arbitrary bytes at either EtherType offset must not panic
//! or read out of bounds, and a TTL decrement where it points must keep a
//! valid IPv4 header checksum valid.
#![no_main]

use pipeline::mcast::{decrement_ttl, inspect, McPacket};
use wire::checksum;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for off in [12usize, 16] {
        if let McPacket::Data { ttl, ttl_off, .. } = inspect(data, off) {
            assert_eq!(data.get(ttl_off), Some(&ttl));
            let mut f = data.to_vec();
            let ip = ttl_off - 8;
            let v4 = f[ip] >> 4 == 4;
            let ihl = (f[ip] & 0x0f) as usize * 4;
            let ok_before = v4 && checksum::fold(checksum::sum(&f[ip..ip + ihl])) == 0xffff;
            decrement_ttl(&mut f, ttl_off);
            if ttl > 0 {
                assert_eq!(f[ttl_off], ttl - 1);
            }
            if ok_before {
                assert_eq!(
                    checksum::fold(checksum::sum(&f[ip..ip + ihl])),
                    0xffff,
                    "checksum kept valid"
                );
            }
        }
    }
});
