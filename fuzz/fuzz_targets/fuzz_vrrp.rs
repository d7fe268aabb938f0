//! Fuzz the VRRPv3 advertisement decoder and the ARP request reader
//! (crates/wire/src/vrrp.rs): never a panic; what parses re-emits to a
//! frame that parses to the same advertisement.
#![no_main]

use std::net::Ipv4Addr;
use wire::vrrp;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = vrrp::arp_request(data);
    let _ = vrrp::vrid_of_mac(data);
    if let Ok(a) = vrrp::parse_frame(data) {
        let addrs: Vec<Ipv4Addr> = a.addresses().take(vrrp::MAX_ADDRESSES).collect();
        let r = vrrp::AdvertRepr {
            src: a.src,
            vrid: a.vrid,
            priority: a.priority,
            interval_cs: a.interval_cs,
            addresses: &addrs,
        };
        let mut buf = [0u8; 256];
        let n = r.emit_frame(&mut buf).expect("fits");
        let b = vrrp::parse_frame(&buf[..n]).expect("re-parses");
        assert_eq!((b.vrid, b.priority, b.interval_cs), (a.vrid, a.priority, a.interval_cs));
        assert!(b.addresses().eq(addrs.iter().copied()));
    }
});
