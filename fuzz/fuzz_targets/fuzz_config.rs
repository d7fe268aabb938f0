//! The config loader on arbitrary text: errors, never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(e) = config::parse(text, "fuzz.yaml") {
            let _ = e.to_string();
        }
    }
});
