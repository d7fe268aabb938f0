//! The lab's outputs from real runs (root, namespaces): the text tables
//! fit 100 columns, the HTML report renders in headless Chromium with
//! every table and plot, `--repeat` gives min / median / max per cell and
//! `compare` gives a ratio for every cell.

use lab::plan::Plan;
use std::path::PathBuf;
mod common;
use common::root;

/// Short trials: this checks the reports, not the figures.
const PLAN: &str = "name: reports-check
defaults: {trial-duration: 0.3, drain: 0.1, learn-wait: 0.1,
           search: {resolution: 0.2, max-trials: 3}}
duts:
  - {name: ceiling, driver: wire}
  - {name: linux-bridge-with-a-long-name, driver: linux-bridge}
tests:
  - name: l2-throughput
    type: throughput
    frame-sizes: [64, 1518]
    reference: {report: top-of-rack switch, table: table 2, figure: line rate, scale: veth}
  - {name: capacity, type: address-capacity, addresses: 256, learn-rate: 20000}
";

#[test]
fn real_runs_report_render_and_compare() {
    if !root() {
        return;
    }
    let plan = Plan::parse(PLAN).unwrap();
    let base = std::env::temp_dir().join(format!("lab-reports-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let opts = |d: &str| lab::LabOptions {
        lanyard_bin: PathBuf::from("/nonexistent"),
        out_dir: Some(base.join(d)),
        quiet: true,
    };
    let a = lab::run_plan_repeated(&plan, &opts("a"), 2).unwrap();
    assert_eq!(a.len(), 2);
    let b = lab::run_plan_repeated(&plan, &opts("b"), 1).unwrap();

    // Text: every line within 100 columns, the reference printed.
    let text = std::fs::read_to_string(base.join("b/tables.txt")).unwrap();
    assert!(
        text.lines()
            .all(|l| l.chars().count() <= lab::tables::WIDTH),
        "{text}"
    );
    assert!(
        text.contains("report: top-of-rack switch table 2: line rate"),
        "{text}"
    );
    assert!(text.contains("needs a switching DUT"), "{text}");

    // HTML: rendered by Chromium, the tables and plots are laid out.
    let html = std::fs::read_to_string(base.join("b/report.html")).unwrap();
    let v = lab::html::render_in_chromium(&html, &base.join("chromium")).unwrap();
    let tables = v["tables"].as_array().unwrap();
    for (kind, test) in [
        ("results", "l2-throughput"),
        ("ratios", "l2-throughput"),
        ("results", "capacity"),
    ] {
        let t = tables
            .iter()
            .find(|t| t["kind"] == kind && t["test"] == test)
            .unwrap_or_else(|| panic!("no {kind} table for {test}: {v}"));
        assert_eq!(t["visible"], true);
        assert!(t["box"][1].as_u64().unwrap() > 0);
    }
    for plot in ["throughput", "latency"] {
        let p = v["plots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["plot"] == plot && p["test"] == "l2-throughput")
            .unwrap_or_else(|| panic!("no {plot} plot: {v}"));
        // Both DUTs at both sizes.
        assert_eq!(p["marks"], 4, "{plot}: {p}");
    }
    let page = v["text"].as_str().unwrap();
    assert!(page.contains("kernel: Linux") && page.contains("reports-check"));
    assert!(v["details"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["open"] == false));

    // --repeat: min / median / max of each cell over the two runs.
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.join("a/repeat.json")).unwrap())
            .unwrap();
    let cells = rep["cells"].as_array().unwrap();
    assert_eq!(rep["runs"], 2);
    let c = cells
        .iter()
        .find(|c| c["dut"] == "ceiling" && c["frame_size"] == "64")
        .unwrap();
    assert_eq!(c["value"]["values"].as_array().unwrap().len(), 2);
    // The ceiling's 64-byte row of each run, found by name: `--repeat`
    // reverses the DUT order on even runs, so it is not always first.
    let fps: Vec<f64> = a
        .iter()
        .map(|s| {
            let r = s
                .results
                .iter()
                .find(|r| r.test == "l2-throughput" && r.dut == "ceiling" && r.frame_size == "64")
                .expect("the ceiling's 64-byte row");
            r.throughput_fps.unwrap() / 1e3
        })
        .collect();
    // Through JSON and back: equal to the last bit or two.
    let min = c["value"]["min"].as_f64().unwrap();
    assert!(
        (min - fps[0].min(fps[1])).abs() <= 1e-9 * min,
        "{min} vs {fps:?}"
    );

    // compare: a ratio for every cell with a figure in both.
    let cmp =
        lab::compare::compare_and_write(&base.join("a"), &base.join("b"), &base.join("c")).unwrap();
    let with_figure = b[0]
        .results
        .iter()
        .filter(|r| r.status == "ok" && (r.throughput_fps.is_some() || r.value.is_some()))
        .count();
    assert_eq!(cmp.pairs.len(), with_figure);
    assert!(
        cmp.pairs.iter().all(|p| p.ratio.is_some()),
        "{}",
        cmp.text()
    );
    assert!(base.join("c/compare.json").is_file());
    let _ = std::fs::remove_dir_all(&base);
}

/// The outputs of a run made elsewhere, e.g. CI's quick-plan run:
/// `LAB_REPORT_DIR=DIR cargo test -p lab --test reports given_run`. Every
/// line of `tables.txt` within 100 columns, and `report.html` rendered in
/// headless Chromium with a visible results table per test, a ratio table
/// and both plots for every throughput test with figures. Without the
/// variable there is nothing to check.
#[test]
fn given_run_reports_fit_and_render() {
    let Some(dir) = std::env::var_os("LAB_REPORT_DIR").map(PathBuf::from) else {
        eprintln!("skipped: LAB_REPORT_DIR not set");
        return;
    };
    let text = std::fs::read_to_string(dir.join("tables.txt")).unwrap();
    for l in text.lines() {
        assert!(l.chars().count() <= lab::tables::WIDTH, "too wide: {l}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let scratch = std::env::temp_dir().join(format!("lab-given-run-{}", std::process::id()));
    let v = lab::html::render_in_chromium(&html, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    let v = v.unwrap();
    let rows = report["results"].as_array().unwrap();
    let mut tests: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        let t = (r["test"].as_str().unwrap(), r["kind"].as_str().unwrap());
        if !tests.contains(&t) {
            tests.push(t);
        }
    }
    for (test, kind) in tests {
        let t = v["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["kind"] == "results" && t["test"] == test)
            .unwrap_or_else(|| panic!("no results table for {test}"));
        let n = rows.iter().filter(|r| r["test"] == test).count();
        assert_eq!(t["rows"].as_u64().unwrap() as usize, n + 1, "{test}");
        assert_eq!(t["visible"], true, "{test}");
        let with_fps: Vec<&serde_json::Value> = rows
            .iter()
            .filter(|r| r["test"] == test && r["status"] == "ok" && r["throughput_fps"].is_number())
            .collect();
        if kind == "throughput" && !with_fps.is_empty() {
            let p = v["plots"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["plot"] == "throughput" && p["test"] == test)
                .unwrap_or_else(|| panic!("no throughput plot for {test}"));
            assert_eq!(
                p["marks"].as_u64().unwrap() as usize,
                with_fps.len(),
                "{test}"
            );
            assert!(
                v["plots"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["plot"] == "latency" && p["test"] == test),
                "no latency plot for {test}"
            );
        }
    }
}
