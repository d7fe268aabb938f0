//! `type: bandwidth-share` end to end (root; skipped without a `lanyard`
//! binary): an inline-engine DUT with two services under controllers and
//! three subscribers (gold, silver, bronze) offering more than their
//! shares; the lab's received rates must split 10:5:1 within 5 % and
//! total each limit within 2 %. The same load with equal weights splits
//! 1:1:1 — so the verdict would fail if the engine ignored priorities.

mod common;
use common::{measuring, root_and_lanyard, run_plan_text};

fn shares(r: &lab::report::ResultRow) -> Vec<serde_json::Value> {
    r.detail["bandwidth_share"]["shares"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn shares_follow_package_weights_inside_each_controller() {
    let _serial = measuring();
    let Some(bin) = root_and_lanyard() else {
        return;
    };
    let (s, out) = run_plan_text(
        bin,
        "bwshare",
        "name: bandwidth-share
duts: [{name: engine, driver: lanyard, workers: 1, inline: engine}]
defaults: {trial-duration: 6, drain: 0.3, learn-wait: 0.2}
tests:
  - {name: weighted, type: bandwidth-share, settle: 2,
     services: [{up: 1M, down: 1.5M}, {up: 2M}]}
  - {name: equal, type: bandwidth-share, settle: 2, weights: [1, 1, 1],
     services: [{up: 1M, down: 1.5M}, {up: 2M}]}
",
    );
    let print = || {
        for r in &s.results {
            for sh in shares(r) {
                eprintln!("{} {sh}", r.test);
            }
        }
    };
    let w = &s.results[0];
    assert_eq!(w.status, "ok", "{w:?}");
    let sw = shares(w);
    assert_eq!(sw.len(), 3, "A up, A down, B up: {sw:?}");
    for sh in &sw {
        let share = |j: usize| sh["share"][j].as_f64().unwrap();
        let want = [10.0 / 16.0, 5.0 / 16.0, 1.0 / 16.0];
        for (j, w) in want.iter().enumerate() {
            assert!(
                (share(j) / w - 1.0).abs() <= 0.05,
                "{sh}: subscriber {j} {} vs {w}",
                share(j)
            );
        }
        let err = sh["total_error"].as_f64().unwrap();
        if err.abs() > 0.02 {
            print();
        }
        assert!(err.abs() <= 0.02, "{sh}");
        assert_eq!(sh["pass"], true, "{sh}");
        // A series per subscriber, one point per interval.
        assert_eq!(sh["series_bps"][2].as_array().unwrap().len(), 6, "{sh}");
    }
    assert_eq!(w.pass, Some(true), "{:?}", w.notes);

    // Equal weights: each gets a third; gold's share falls from 62.5 %.
    let e = &s.results[1];
    assert_eq!(e.status, "ok", "{e:?}");
    for (a, b) in sw.iter().zip(shares(e)) {
        let g = b["share"][0].as_f64().unwrap();
        assert!((g - 1.0 / 3.0).abs() < 0.05, "{b}");
        assert!(a["share"][0].as_f64().unwrap() - g > 0.2, "{a} vs {b}");
    }
    assert_eq!(e.pass, Some(true), "{:?}", e.notes);

    // The run's files: the series as CSV, the table and the plots.
    let csv = std::fs::read_to_string(out.join("bandwidth-share.csv")).unwrap();
    assert!(csv.starts_with(lab::bwshare::CSV_HEADER), "{csv}");
    // 2 tests × 3 service-directions × 3 subscribers × 6 intervals.
    assert_eq!(csv.lines().count(), 1 + 2 * 3 * 3 * 6, "{csv}");
    assert!(csv.contains("engine,weighted,1,A,down,bronze,1,"), "{csv}");
    let tables = std::fs::read_to_string(out.join("tables.txt")).unwrap();
    assert!(tables.contains("B up"), "{tables}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(
        html.matches("data-plot=\"bandwidth-share\"").count(),
        6,
        "a plot per test × service × direction"
    );
    let _ = std::fs::remove_dir_all(&out);
}
