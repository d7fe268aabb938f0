//! Root-only: the convergence procedure on real namespaces (skipped when
//! not root). Each run uses its own namespaces (`lab-<pid>-<n>-*`), so
//! these run beside the other test binaries; inside this file the
//! measuring tests take turns.

use lab::plan::Plan;
use std::path::PathBuf;
mod common;
use common::{measuring, root};

fn run(plan: &str, tag: &str) -> (lab::Summary, PathBuf) {
    let plan = Plan::parse(plan).unwrap();
    let out = std::env::temp_dir().join(format!("lab-test-{tag}-{}", std::process::id()));
    let opts = lab::LabOptions {
        lanyard_bin: PathBuf::from("/nonexistent"),
        out_dir: Some(out.clone()),
        quiet: true,
    };
    (lab::run_plan(&plan, &opts).unwrap(), out)
}

fn trials(row: &lab::report::ResultRow) -> Vec<serde_json::Value> {
    row.detail["trials"].as_array().cloned().unwrap_or_default()
}

/// Linux bridge with the failover script and with the kernel's
/// backup_port, 1,000 MACs, 2 trials each; the wire DUT without an event.
#[test]
fn bridge_failover_script_and_backup_port() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let (s, out) = run(
        "name: conv
defaults: {drain: 0.3, learn-wait: 0.2}
duts:
  - {name: wire, driver: wire}
  - {name: script, driver: linux-bridge, failover: script}
  - {name: backup-port, driver: linux-bridge, failover: backup-port}
tests:
  - {name: baseline, type: convergence, event: none, addresses: 1000, rate: 20000, trials: 2,
     duts: [wire]}
  - {name: failover, type: convergence, addresses: 1000, streams: 8, rate: 20000, trials: 2,
     duts: [script, backup-port]}
",
        "conv",
    );
    let row = |test: &str, dut: &str| {
        s.results
            .iter()
            .find(|r| r.test == test && r.dut == dut)
            .unwrap_or_else(|| panic!("no row {test} {dut}"))
    };
    // Wire, no event: nothing lost, everything on the "primary" port.
    let w = row("baseline", "wire");
    assert_eq!(w.status, "ok", "{w:?}");
    let wt = trials(w);
    assert_eq!(wt.len(), 2);
    for t in &wt {
        assert_eq!(t["lost"], 0, "{t}");
        assert_eq!(t["on_backup"], 0, "{t}");
        assert_eq!(t["convergence_ms"], 0.0, "{t}");
        assert!(t["sent"].as_u64().unwrap() > 50_000, "{t}");
    }
    for tr in w.trials.iter().filter(|t| t.role == "convergence") {
        assert_eq!(tr.result.received, tr.result.sent);
        assert_eq!(tr.result.tester_rx_drops, 0);
    }
    assert_eq!(w.pass, Some(true));
    // Script: frames are lost between sw2 going down and the script
    // setting sw3 forwarding; measured, finite, and after the event.
    let sc = row("failover", "script");
    assert_eq!(sc.status, "ok", "{sc:?}");
    let st = trials(sc);
    assert_eq!(st.len(), 2);
    let mut lost = 0;
    for t in &st {
        let ms = t["convergence_ms"].as_f64().unwrap();
        assert!(ms.is_finite() && (0.0..2000.0).contains(&ms), "{t}");
        lost += t["lost"].as_i64().unwrap();
        // Traffic moved to the backup, and the script did it.
        assert!(t["on_backup"].as_u64().unwrap() > 10_000, "{t}");
        assert!(t["script_ms"].as_f64().is_some(), "{t}");
        assert_eq!(t["per_stream_ms"].as_array().unwrap().len(), 8);
        assert!(t["event_ms"].as_f64().unwrap() > 0.0, "{t}");
    }
    // Frames sent between the link going down and the script's `bridge
    // link set` are lost, unless the generator itself stalled over that
    // window (2 shared cores): then none were sent. Either way the
    // transmit timestamps show the gap: the last frame that reached the
    // primary and the first that reached the backup lie milliseconds
    // apart (the script's fork and exec alone take that long).
    let outage: Vec<f64> = st
        .iter()
        .map(|t| t["outage_ms"].as_f64().unwrap())
        .collect();
    assert!(
        lost > 0 || outage.iter().all(|&o| o > 1.0),
        "the script variant showed no outage: {st:?}"
    );
    let conv = &sc.detail["convergence_ms"];
    assert!(conv["max"].as_f64().unwrap() >= conv["min"].as_f64().unwrap());
    assert_eq!(sc.value, conv["avg"].as_f64());
    // Backup port: measured and finite (the kernel redirects at once, so
    // usually nothing is lost), traffic on the backup afterwards.
    let bp = row("failover", "backup-port");
    assert_eq!(bp.status, "ok", "{bp:?}");
    for t in &trials(bp) {
        let ms = t["convergence_ms"].as_f64().unwrap();
        assert!(ms.is_finite() && (0.0..2000.0).contains(&ms), "{t}");
        assert!(t["on_backup"].as_u64().unwrap() > 10_000, "{t}");
    }
    // The report renders and validates.
    let text = std::fs::read_to_string(out.join("report.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    lab::report::validate_json(&v).unwrap();
    let tables = std::fs::read_to_string(out.join("tables.txt")).unwrap();
    assert!(tables.contains("goal < 1 ms"), "{tables}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Events a DUT cannot do are reported clearly: `kill` on a kernel bridge
/// (no process to kill and restart); a failing `command` fails the row
/// with the command's output; the bridge's namespaces are gone after.
#[test]
fn unsupported_and_failing_events_are_clear() {
    let _serial = measuring();
    if !root() {
        return;
    }
    let (s, out) = run(
        "name: conv-err
defaults: {drain: 0.2, learn-wait: 0.1}
duts:
  - {name: br, driver: linux-bridge}
tests:
  - {name: kill, type: convergence, event: kill, addresses: 100, rate: 5000, trials: 1}
  - {name: cmd, type: convergence, event: command, event-command: 'echo nope >&2; exit 3',
     addresses: 100, rate: 5000, trials: 1}
  - {name: cmd-ok, type: convergence, event: command, event-command: 'ip link show sw2 >/dev/null',
     addresses: 100, rate: 5000, trials: 1}
",
        "conv-err",
    );
    let k = &s.results[0];
    assert_eq!(k.status, "failed");
    let e = k.error.as_deref().unwrap_or("");
    assert!(e.contains("kill") && e.contains("lanyard only"), "{e}");
    let c = &s.results[1];
    assert_eq!(c.status, "failed");
    let e = c.error.as_deref().unwrap_or("");
    assert!(e.contains("nope") && e.contains("command"), "{e}");
    let ok = &s.results[2];
    assert_eq!(ok.status, "ok", "{ok:?}");
    assert_eq!(trials(ok)[0]["lost"], 0);
    let _ = std::fs::remove_dir_all(&out);
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("lab-{}-", std::process::id())))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}
