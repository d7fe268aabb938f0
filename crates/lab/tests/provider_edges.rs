//! Root-only: the `lanyard-pe` DUT (two Lanyard PEs, MPLS between them)
//! end to end, a small version of `plans/reports/metro-t3-t4-pseudowires.yaml`
//! and `metro-t5-pw-failover.yaml` (skipped when not root or when no
//! `lanyard` binary is built). About 40 s.
//!
//! * tagged frames over 8 type-4 pseudowires with a bypass (`pw-frr`), and
//!   over the same two Lanyards switching plain layer 2 (`l2`): nothing
//!   lost at a fixed rate; untagged frames over one type-5 pseudowire
//!   (`pw-port`); the VLAN-circuit DUT reports an untagged test n/a;
//! * the primary uplink cut under traffic, twice: every pseudowire (one
//!   stream per VLAN) carries on over the bypass — each loses far less
//!   than the two seconds after the cut — and the report has the per-DUT
//!   spread with the report's figure, in the text and the HTML.

mod common;
use common::{measuring, root_and_lanyard, run_plan_text};

#[test]
fn pseudowires_carry_tagged_and_port_traffic_and_survive_an_uplink_cut() {
    let Some(bin) = root_and_lanyard() else {
        return;
    };
    let _m = measuring();
    let (s, out) = run_plan_text(
        bin,
        "pe",
        "name: pe
defaults: {drain: 0.5, learn-wait: 0.3}
duts:
  - {name: pw-frr, driver: lanyard-pe, circuits: vlan, uplinks: 2, workers: 1}
  - {name: l2, driver: lanyard-pe, pe-mode: l2, workers: 1}
  - {name: pw-port, driver: lanyard-pe, workers: 1}
tests:
  - {name: tagged, type: latency, vlans: 8, rate: 2000, trial-duration: 1,
     frame-sizes: [68, 1518], duts: [pw-frr, l2]}
  - {name: untagged, type: latency, rate: 2000, trial-duration: 1, frame-sizes: [64],
     duts: [pw-frr, pw-port]}
  - name: cut
    type: disruption
    vlans: 8
    rate: 4000
    trial-duration: 3
    trials: 2
    frame-sizes: [128]
    duts: [pw-frr]
    commands: [{at: 1, run: '\"$LAB_PE\" cut'}]
    reference: {report: metro access, table: '5', figure: 58 ms, scale: 8 pws,
                duts: {pw-frr: 58 ms (100 pws)}}
",
    );
    let text = std::fs::read_to_string(out.join("tables.txt")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    // Both PEs' logs and configurations outlive the DUT.
    for f in [
        "lanyard/lanyard.yaml",
        "pe2/lanyard.yaml",
        "pe2/lanyard.log",
    ] {
        let p = out.join("logs/pw-frr-1").join(f);
        assert!(p.is_file(), "{} not kept\n{text}", p.display());
    }
    let _ = std::fs::remove_dir_all(&out);
    let row = |t: &str, d: &str, fs: &str| {
        s.results
            .iter()
            .find(|r| r.test == t && r.dut == d && r.frame_size == fs)
            .unwrap_or_else(|| panic!("no row {t} {d} {fs}:\n{text}"))
    };
    for (t, d, fs) in [
        ("tagged", "pw-frr", "68"),
        ("tagged", "pw-frr", "1518"),
        ("tagged", "l2", "68"),
        ("tagged", "l2", "1518"),
        ("untagged", "pw-port", "64"),
    ] {
        let r = row(t, d, fs);
        assert_eq!(r.status, "ok", "{t} {d} {fs}: {r:?}\n{text}");
        assert_eq!(r.loss_ratio, Some(0.0), "{t} {d} {fs}: {r:?}\n{text}");
        let tr = &r.trials[0].result;
        assert!(tr.sent >= 1500, "{t} {d} {fs}: sent {}", tr.sent);
        assert_eq!(tr.flooded, 0, "{t} {d} {fs}");
    }
    assert_eq!(row("untagged", "pw-frr", "64").status, "n/a");

    let cut = row("cut", "pw-frr", "128");
    assert_eq!(cut.status, "ok", "{cut:?}\n{text}");
    let d = &cut.detail["disruption"];
    let trials = d["stream_trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2, "{d:#}");
    for t in trials {
        let streams = t.as_array().unwrap();
        assert_eq!(streams.len(), 8, "{t:#}");
        for s in streams {
            let (sent, lost) = (s["sent"].as_i64().unwrap(), s["lost"].as_i64().unwrap());
            // 500 frames/s per pseudowire for 3 s; without the bypass a
            // pseudowire loses the 2 s after the cut (two thirds).
            assert!(sent >= 1000, "{s:#}");
            assert!(lost * 5 < sent, "no bypass? {s:#}");
            assert_eq!(s["duplicated"], 0, "{s:#}");
        }
    }
    // The bypass took over on PE1 in every trial, and every pseudowire
    // stayed up on both PEs.
    for t in d["trials"].as_array().unwrap() {
        let pe = &t["pair"];
        assert_eq!(pe["design"], "pe", "{t:#}");
        assert!(pe["pe1"]["switches"].as_u64() >= Some(1), "{t:#}");
        assert_eq!(pe["pe1"]["up"], 8, "{t:#}");
        assert_eq!(pe["pe2"]["up"], 8, "{t:#}");
    }
    let p = &d["per_stream"];
    assert_eq!(
        (p["streams"].as_u64(), p["trials"].as_u64()),
        (Some(8), Some(2))
    );
    assert!(p["outage_ms"]["max"].as_f64().unwrap() < 400.0, "{p:#}");
    // The per-DUT spread with the report's figure, not a row per stream.
    assert!(text.contains("58 ms (100 pws)"), "{text}");
    assert!(!text.contains("vlan 100  pw-frr"), "{text}");
    assert!(html.contains("data-kind=\"streams\" data-test=\"cut\""));
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    eprintln!("pseudowire outage over 8 x 2: {}", p["outage_ms"]);
}
