//! Fuzz the MPLS label-stack code: stack walk, control word, in-place
//! push / swap / pop with headroom, Ethernet-over-MPLS encap / decap
//! (see crates/wire/tests/support/exercise.rs).
#![no_main]

#[path = "../../crates/wire/tests/support/exercise.rs"]
mod exercise;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exercise::mpls(data);
});
