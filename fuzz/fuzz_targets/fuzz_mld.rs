//! Fuzz the MLD codec (`wire::mld`): parsing arbitrary bytes must not
//! panic, and whatever parses must survive `emit` → `parse` unchanged.
//! The first 32 octets choose the IPv6 source and destination of the
//! pseudo-header; the rest is the ICMPv6 message, tried as is and with its
//! checksum filled in, to reach the structural checks.
#![no_main]

use std::net::Ipv6Addr;

use wire::checksum;
use wire::ip::{IpPair, IpProtocol};
use wire::mld::MldMessage;

fn round_trip(m: &MldMessage, src: Ipv6Addr, dst: Ipv6Addr) {
    let len = m.buffer_len();
    let mut b = vec![0u8; len];
    assert_eq!(
        m.emit(src, dst, &mut b),
        Ok(len),
        "emit into buffer_len octets"
    );
    assert_eq!(
        MldMessage::parse(&b, src, dst).as_ref(),
        Ok(m),
        "round trip"
    );
    if len > 0 {
        assert!(
            m.emit(src, dst, &mut b[..len - 1]).is_err(),
            "emit into a short buffer"
        );
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((addrs, msg)) = data.split_at_checked(32) else {
        return;
    };
    let mut s = [0u8; 16];
    let mut d = [0u8; 16];
    s.copy_from_slice(&addrs[..16]);
    d.copy_from_slice(&addrs[16..]);
    let (src, dst) = (Ipv6Addr::from(s), Ipv6Addr::from(d));
    if let Ok(m) = MldMessage::parse(msg, src, dst) {
        round_trip(&m, src, dst);
    }
    if msg.len() >= 4 {
        let mut b = msg.to_vec();
        b[2] = 0;
        b[3] = 0;
        let ph = IpPair::V6 { src, dst }.pseudo_header_sum(IpProtocol::Icmpv6, b.len() as u32);
        let c = checksum::finish(checksum::combine(ph, checksum::sum(&b)));
        b[2..4].copy_from_slice(&c.to_be_bytes());
        if let Ok(m) = MldMessage::parse(&b, src, dst) {
            round_trip(&m, src, dst);
        }
    }
});
