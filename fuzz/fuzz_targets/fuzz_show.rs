//! Operator words and API answers, arbitrary: `show`/`clear` parsing
//! errors, never panics; every renderer prints text for any JSON, never
//! panics and never echoes JSON.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The first line as command words, the rest as an API answer.
    let (line, rest) = text.split_once('\n').unwrap_or((text, ""));
    let words: Vec<String> = line.split_whitespace().map(String::from).collect();
    let _ = mgmt::cli::parse_show(&words);
    let _ = mgmt::cli::parse_clear(&words);
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(rest) {
        for c in mgmt::cli::SHOW.iter().chain(mgmt::cli::CLEAR) {
            for (_, render) in c.renderers("show") {
                let out = render(&v);
                assert!(!out.contains('{') && !out.contains('"'), "{out}");
            }
        }
    }
});
