//! Fuzz the `arp` parser: parse, call every accessor, round-trip the Repr
//! (see crates/wire/tests/support/exercise.rs).
#![no_main]

#[path = "../../crates/wire/tests/support/exercise.rs"]
mod exercise;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exercise::arp(data);
});
