//! Root-only: the mirror (SPAN) option of throughput tests, the
//! control-plane policing procedure, the disruption procedure and inline
//! Lanyard DUTs on real namespaces (skipped when not
//! root; the Lanyard parts also when no binary is built). Each run uses
//! its own namespaces; inside this file the tests take turns.

use lab::plan::Plan;
use std::path::PathBuf;
mod common;
use common::{lanyard_bin, measuring, root};

fn run(plan: &str, tag: &str, bin: Option<PathBuf>) -> lab::Summary {
    let plan = Plan::parse(plan).unwrap();
    let out = std::env::temp_dir().join(format!("lab-test-{tag}-{}", std::process::id()));
    let opts = lab::LabOptions {
        lanyard_bin: bin.unwrap_or_else(|| PathBuf::from("/nonexistent")),
        out_dir: Some(out.clone()),
        quiet: true,
    };
    let s = lab::run_plan(&plan, &opts).unwrap();
    // The tables and the HTML carry the detail lines.
    let text = std::fs::read_to_string(out.join("tables.txt")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    // Inline-engine DUTs: the bandwidth series, as CSV and JSON.
    for f in ["bandwidth.csv", "bandwidth.json"] {
        assert_eq!(out.join(f).is_file(), !s.bandwidth.is_empty(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&out);
    for r in s.results.iter().filter(|r| r.status == "ok") {
        // Single words: the text wraps long lines.
        let key = if r.detail.get("mirror").is_some() {
            "copies"
        } else if r.detail.get("copp").is_some() {
            "answered"
        } else {
            continue;
        };
        assert!(text.contains(key), "{key} not in\n{text}");
        assert!(html.contains(key), "{key} not in the HTML");
    }
    s
}

fn row<'a>(s: &'a lab::Summary, test: &str, dut: &str) -> &'a lab::report::ResultRow {
    s.results
        .iter()
        .find(|r| r.test == test && r.dut == dut)
        .unwrap_or_else(|| panic!("no row {test} {dut}"))
}

/// Mirror sessions on the DUTs, at a fixed rate (2 paced trials of a
/// throughput search capped low): every frame forwarded once, and each
/// session's port got a copy of every frame, nothing else; the wire and
/// the router report n/a.
#[test]
fn mirror_sessions_copy_every_forwarded_frame() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let bin = lanyard_bin();
    let lanyard = if bin.is_some() {
        "  - {name: lanyard, driver: lanyard}\n"
    } else {
        eprintln!("lanyard part skipped: no binary (build it, or set LANYARD_BIN)");
        ""
    };
    let s = run(
        &format!(
            "name: span
defaults: {{trial-duration: 0.5, drain: 0.3, learn-wait: 0.1}}
duts:
  - {{name: wire, driver: wire}}
  - {{name: br, driver: linux-bridge}}
{lanyard}tests:
  - {{name: span-3, type: throughput, mirror-sessions: 3, frame-sizes: [128],
     search: {{max-trials: 3, resolution: 0.5}}}}
"
        ),
        "span",
        bin,
    );
    assert_eq!(row(&s, "span-3", "wire").status, "n/a");
    let mut duts = vec!["br"];
    if !lanyard.is_empty() {
        duts.push("lanyard");
    }
    for dut in duts {
        let r = row(&s, "span-3", dut);
        assert_eq!(r.status, "ok", "{dut}: {r:?}");
        let m = &r.detail["mirror"];
        assert_eq!(m["sessions"], 3, "{dut}: {m}");
        let sent = m["sent"].as_u64().unwrap();
        assert!(sent > 1000, "{dut}: {m}");
        // The reported trial is one that passed: nothing lost.
        assert_eq!(m["forwarded"].as_u64(), Some(sent), "{dut}: {m}");
        assert_eq!(m["copies_expected"].as_u64(), Some(3 * sent), "{dut}: {m}");
        assert_eq!(m["mirror_lost"], 0, "{dut}: {m}");
        for c in m["copies_per_session"].as_array().unwrap() {
            assert_eq!(c.as_u64(), Some(sent), "{dut}: {m}");
        }
        assert!(r.throughput_fps.unwrap() > 0.0);
        // Copies went to the destinations only: ports 3..5 each got the
        // stream once, port 1 (the sender) nothing.
        let tr = r.trials.iter().rev().find(|t| t.pass).unwrap();
        let st = &tr.result.streams[0];
        assert_eq!(st.per_port[0], 0, "{dut}: {:?}", st.per_port);
        for p in 1..=4 {
            assert_eq!(st.per_port[p], sent, "{dut}: port {p} {:?}", st.per_port);
        }
    }
}

/// CoPP on Linux routing (and Lanyard when built): a 64-byte flood to
/// 224.0.0.1 at the generator's maximum on port 1 while the tester pings
/// 198.18.1.1 on the same port; the ping is answered without the flood,
/// every row reports the flood's rate and the ping counts, and Lanyard's
/// `unknown` class dropped most of the flood.
#[test]
fn copp_floods_224_0_0_1_and_pings_the_dut() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let bin = lanyard_bin();
    let lanyard = if bin.is_some() {
        "  - {name: lanyard, driver: lanyard}\n"
    } else {
        ""
    };
    let s = run(
        &format!(
            "name: copp
defaults: {{drain: 0.3, learn-wait: 0.2}}
duts:
  - {{name: wire, driver: wire}}
  - {{name: router, driver: linux-router}}
  - {{name: br, driver: linux-bridge}}
{lanyard}tests:
  - {{name: copp, type: copp, frame-sizes: [64], trial-duration: 2, ping-interval-ms: 20}}
"
        ),
        "copp",
        bin,
    );
    assert_eq!(row(&s, "copp", "wire").status, "n/a");
    let mut duts = vec!["router", "br"];
    if !lanyard.is_empty() {
        duts.push("lanyard");
    }
    for dut in duts {
        let r = row(&s, "copp", dut);
        assert_eq!(r.status, "ok", "{dut}: {r:?}");
        let c = &r.detail["copp"];
        assert_eq!(c["baseline"]["lost"], 0, "{dut}: {c}");
        assert!(c["flood_sent"].as_u64().unwrap() > 10_000, "{dut}: {c}");
        assert!(c["flood_fps"].as_f64().unwrap() > 5_000.0, "{dut}: {c}");
        let sent = c["ping"]["sent"].as_u64().unwrap();
        assert!((80..=100).contains(&sent), "{dut}: {c}");
        assert_eq!(r.pass, Some(c["ping"]["lost"] == 0), "{dut}: {c}");
        if dut == "br" {
            // A bridge floods the all-hosts group out of its other port.
            assert!(c["flood_out_port2"].as_u64().unwrap() > 0, "{c}");
        }
        if dut == "lanyard" {
            let p = c["policing"].as_array().unwrap();
            let unknown = p
                .iter()
                .find(|x| x["class"] == "unknown")
                .expect("unknown class");
            let dropped = unknown["dropped"].as_u64().unwrap();
            assert!(dropped > c["flood_sent"].as_u64().unwrap() / 2, "{c}");
        }
    }
}

/// Disruption on a Linux bridge: a command that takes the egress port
/// down for 300 ms loses about 300 ms of frames (counted, outage within
/// reason), one that does nothing loses none, a failing command fails the
/// trial; and, when Lanyard is built, the inline pair in engine and bypass
/// mode passes layer-3 frames unchanged (TTL not decremented) with bypass
/// switched on and off under traffic by `lanyard bypass`.
#[test]
fn disruption_counts_lost_frames_and_inline_passes_frames() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let bin = lanyard_bin();
    let inline = if bin.is_some() {
        "  - {name: engine, driver: lanyard, inline: engine}
  - {name: bypass, driver: lanyard, inline: bypass}
"
    } else {
        eprintln!("inline part skipped: no binary (build it, or set LANYARD_BIN)");
        ""
    };
    let s = run(
        &format!(
            "name: disrupt
defaults: {{drain: 0.3, learn-wait: 0.2}}
duts:
  - {{name: br, driver: linux-bridge}}
{inline}tests:
  - {{name: flap, type: disruption, rate: 20000, trial-duration: 2, frame-sizes: [64], duts: [br],
     commands: [{{at: 0.5, run: 'ip link set sw2 down; sleep 0.3; ip link set sw2 up'}}]}}
  - {{name: noop, type: disruption, rate: 20000, trial-duration: 1.5, trials: 2, frame-sizes: [64],
     duts: [br], commands: [{{at: 0.5, run: 'true'}}]}}
  - {{name: broken, type: disruption, rate: 20000, trial-duration: 1, frame-sizes: [64], duts: [br],
     commands: [{{at: 0.2, run: 'exit 3'}}]}}
  - {{name: through, type: latency, layer: 3, routes: 100, rate: 20000, trial-duration: 1,
     frame-sizes: [64, 1518]}}
  - {{name: toggle, type: disruption, layer: 3, rate: 20000, trial-duration: 3, frame-sizes: [64],
     commands: [{{at: 1, run: '\"$LANYARD\" --socket \"$LANYARD_SOCKET\" bypass on'}},
                {{at: 2, run: '\"$LANYARD\" --socket \"$LANYARD_SOCKET\" bypass off'}}]}}
"
        ),
        "disrupt",
        bin,
    );
    let d =
        |r: &lab::report::ResultRow| r.detail["disruption"]["trials"].as_array().unwrap().clone();
    let flap = row(&s, "flap", "br");
    assert_eq!(flap.status, "ok", "{flap:?}");
    assert_eq!(flap.pass, Some(false));
    let t = &d(flap)[0];
    let ms = t["outage_ms"].as_f64().unwrap();
    assert!((250.0..2000.0).contains(&ms), "{t}");
    assert_eq!(flap.value, Some(t["lost"].as_f64().unwrap()));
    let noop = row(&s, "noop", "br");
    assert_eq!(noop.pass, Some(true), "{noop:?}");
    assert_eq!(noop.value, Some(0.0));
    assert_eq!(d(noop).len(), 2);
    let broken = row(&s, "broken", "br");
    assert_eq!(broken.pass, Some(false));
    assert!(
        broken.notes.iter().any(|n| n.contains("command failed")),
        "{:?}",
        broken.notes
    );
    if inline.is_empty() {
        return;
    }
    for dut in ["engine", "bypass"] {
        let r = row(&s, "through", dut);
        assert_eq!(r.status, "ok", "{dut}: {r:?}");
        for tr in &r.trials {
            // Arrival check: TTL 64 (not routed), the host's MAC.
            assert_eq!(tr.result.malformed, 0, "{dut}");
            assert_eq!(tr.result.received, tr.result.sent, "{dut}");
            assert!(tr.result.sent > 10_000, "{dut}");
        }
        let t = row(&s, "toggle", dut);
        assert_eq!(t.status, "ok", "{dut}: {t:?}");
        for tr in d(t) {
            for c in tr["commands"].as_array().unwrap() {
                assert_eq!(c["ok"], true, "{dut}: {c}");
            }
            assert!(tr["sent"].as_u64().unwrap() > 40_000, "{dut}: {tr}");
        }
    }
    // The engine's bandwidth per subscriber per service, read after each
    // trial: the test frames (service `lab`) passed at some rate; the
    // bypassed DUT's engine saw nothing.
    let lab: Vec<_> = s
        .bandwidth
        .iter()
        .filter(|r| r.dut == "engine" && r.service == "lab")
        .collect();
    assert!(
        lab.iter().any(|r| r.up_bps + r.down_bps > 1e6),
        "{:?}",
        s.bandwidth
    );
    assert!(
        s.bandwidth
            .iter()
            .all(|r| r.dut == "engine" || r.up_bps + r.down_bps == 0.0),
        "{:?}",
        s.bandwidth
    );
    assert!(s.html().contains("data-plot=\"bandwidth\""));
}
