//! Golden output of every `show` and `clear` renderer: each renders fixed
//! API answers (`tests/golden/<view>.json`, and variants
//! `<view>.<case>.json`) and must match `tests/golden/<view>[.<case>].txt`
//! byte for byte, so a layout change is a visible diff. Every renderer the
//! command tables name must have at least one fixture.
//!
//! The fixtures are answers of a real switch (captured by
//! `LANYARD_GOLDEN_CAPTURE=DIR cargo test -p lanyard --test show_all`),
//! some edited to cover more cases (ECMP, IPv6 flows, a LACP partner).
//! After an intended layout change, bless the new output with
//! `LANYARD_BLESS=1 cargo test -p control --test golden` and review the
//! diff of the `.txt` files.

use mgmt::cli::{CLEAR, SHOW};
use mgmt::show::MAX_WIDTH;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The fixtures of `view`: `view.json` and `view.<case>.json`.
fn fixtures(view: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".json")
                && (name == format!("{view}.json")
                    || (name.starts_with(&format!("{view}.")) && name.matches('.').count() == 2))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn every_renderer_matches_its_golden_output() {
    let bless = std::env::var_os("LANYARD_BLESS").is_some();
    let mut failures = Vec::new();
    let mut checked = 0;
    let all = SHOW
        .iter()
        .map(|c| ("show", c))
        .chain(CLEAR.iter().map(|c| ("clear", c)));
    for (verb, c) in all {
        for (view, render) in c.renderers(verb) {
            let inputs = fixtures(&view);
            if inputs.is_empty() {
                failures.push(format!("{view}: no fixture tests/golden/{view}.json"));
            }
            for input in inputs {
                let json: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&input).unwrap())
                        .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
                let text = render(&json);
                let golden = input.with_extension("txt");
                let name = golden.file_name().unwrap().to_string_lossy().into_owned();
                for line in text.lines() {
                    if line.chars().count() > MAX_WIDTH {
                        failures.push(format!("{name}: wider than {MAX_WIDTH}: {line}"));
                    }
                    if line.contains(['{', '}', '"']) {
                        failures.push(format!("{name}: JSON in the text: {line}"));
                    }
                    if line != line.trim_end() {
                        failures.push(format!("{name}: trailing spaces: {line:?}"));
                    }
                }
                if bless {
                    std::fs::write(&golden, &text).unwrap();
                } else {
                    match std::fs::read_to_string(&golden) {
                        Ok(want) if want == text => {}
                        Ok(want) => failures.push(format!(
                            "{name} differs (LANYARD_BLESS=1 to accept):\n--- want\n{want}--- got\n{text}"
                        )),
                        Err(_) => failures.push(format!(
                            "{name} missing (LANYARD_BLESS=1 writes it):\n{text}"
                        )),
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 30, "only {checked} golden files");
}

/// Robustness: any renderer given any fixture (the wrong command's answer,
/// null, an empty list) prints text, never panics, never JSON.
#[test]
fn renderers_survive_the_wrong_input() {
    let mut inputs: Vec<serde_json::Value> = vec![
        serde_json::Value::Null,
        serde_json::json!([]),
        serde_json::json!({}),
        serde_json::json!([{"name": {"nested": [1, 2]}}]),
    ];
    for e in std::fs::read_dir(dir()).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "json") {
            inputs.push(serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap());
        }
    }
    let all = SHOW
        .iter()
        .map(|c| ("show", c))
        .chain(CLEAR.iter().map(|c| ("clear", c)));
    for (verb, c) in all {
        for (view, render) in c.renderers(verb) {
            for v in &inputs {
                let text = render(v);
                for line in text.lines() {
                    assert!(!line.contains(['{', '}', '"']), "{view}: {line}");
                }
            }
        }
    }
}
