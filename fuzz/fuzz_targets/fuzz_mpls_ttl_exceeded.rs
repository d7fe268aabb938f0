//! Fuzz the RFC 4950 answer builders: arbitrary frames (labelled or not,
//! truncated anywhere) into `build_ttl_exceeded` and
//! `build_ttl_exceeded_lsp` (and the down-the-LSP decision) on an interface with
//! IPv4 and IPv6 addresses, into output buffers of every size byte 0
//! picks. Nothing may panic, and a non-zero length fits the buffer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline::l3::{RouterInterface, Urpf};
use pipeline::mpls::{
    build_ttl_exceeded, build_ttl_exceeded_lsp, ttl_exceeded_down_lsp, IcmpTunneling,
};

fuzz_target!(|data: &[u8]| {
    let Some((&size, frame)) = data.split_first() else {
        return;
    };
    let iface = RouterInterface {
        port: 0,
        mac: [2, 0, 0, 0, 0, 1],
        v4: vec![(0x0a00_0001, 24)],
        v6: vec![(0x2001_0db8 << 96 | 1, 64)],
        mtu: 1500,
        urpf: Urpf::Off,
        vlan: None,
        vrf: 0,
    };
    let mut out = vec![0u8; size as usize * 2];
    let n = build_ttl_exceeded(frame, &iface, &mut out);
    assert!(n <= out.len());
    let m = build_ttl_exceeded_lsp(frame, &iface, &mut out);
    assert!(m <= out.len());
    let _ = ttl_exceeded_down_lsp(IcmpTunneling::Auto, frame, |a| a.is_ipv4());
});
