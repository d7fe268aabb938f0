//! Fuzz the `IFLA_XDP` decoder of the AF_XDP backend
//! (`io::af_xdp::prog::parse_xdp`): arbitrary bytes as an `RTM_NEWLINK`
//! answer (attribute lengths, nesting, truncation). Nothing may panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = io::af_xdp::prog::parse_xdp(data);
});
