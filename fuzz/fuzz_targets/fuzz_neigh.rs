//! Fuzz the kernel neighbour decoder: arbitrary bytes as one message and as
//! a datagram of several. Nothing may panic, and a decoded event must be
//! consistent (usable implies a MAC, a deletion is never usable).
#![no_main]

use routing::kernel::neigh::{decode_all, decode_neigh, NeighborEvent};

fn check(e: &NeighborEvent) {
    assert!(!e.usable() || (e.mac.is_some() && !e.deleted));
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(Some(e)) = decode_neigh(data) {
        check(&e);
    }
    for e in decode_all(data).iter().flatten() {
        check(e);
    }
});
