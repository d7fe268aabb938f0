//! Root-only: the multicast procedure against the Linux bridge with IGMP
//! snooping (skipped when not root). Each run uses its own namespaces
//! (`lab-<pid>-<n>-*`, removed by the run's drop guards), so this runs
//! beside the other test binaries.

use lab::plan::Plan;
use std::path::PathBuf;
mod common;
use common::root;

/// 1 source, 4 receivers, 4 groups joined by 2 receivers each: with the
/// bridge's querier every receiver gets exactly its groups (nothing
/// leaked, nothing lost at a low rate), the join delay is short and
/// fast leave stops the traffic at once; without any querier the bridge
/// floods, and the leaked count shows it.
#[test]
fn bridge_snooping_forwards_only_to_joined_ports() {
    if !root() {
        return;
    }
    let plan = Plan::parse(
        "name: mc
defaults: {trial-duration: 1, drain: 0.3, learn-wait: 0.5}
duts:
  - {name: snoop, driver: linux-bridge, fast-leave: true}
  - {name: no-querier, driver: linux-bridge, igmp-querier: false}
  - {name: wire, driver: wire}
tests:
  - {name: mc, type: multicast, layer: 2, sources: 1, receivers: 4, groups: 4, replication: 2,
     rate: 5000, frame-sizes: [64, 1518], join-leave: true, delay-rate: 5000, leave-wait: 1}
",
    )
    .unwrap();
    let out = std::env::temp_dir().join(format!("lab-test-mc-{}", std::process::id()));
    let opts = lab::LabOptions {
        lanyard_bin: PathBuf::from("/nonexistent"),
        out_dir: Some(out.clone()),
        quiet: true,
    };
    let s = lab::run_plan(&plan, &opts).unwrap();
    let row = |dut: &str, size: &str| {
        s.results
            .iter()
            .find(|r| r.dut == dut && r.frame_size == size)
            .unwrap()
    };
    for size in ["64", "1518"] {
        let r = row("snoop", size);
        assert_eq!(r.status, "ok", "{:?}", r.error);
        let d = &r.detail;
        assert_eq!(r.pass, Some(true), "{:?}", r.notes);
        assert_eq!(d["summary"]["leaked"], 0, "{d}");
        assert_eq!(d["summary"]["leaked_to_sources"], 0, "{d}");
        assert_eq!(d["summary"]["lost"], 0, "{d}");
        assert_eq!(d["summary"]["duplicated"], 0, "{d}");
        let rs = d["receivers"].as_array().unwrap();
        assert_eq!(rs.len(), 4);
        for rc in rs {
            // 2 of the 4 groups each, 5,000 frames/s over 4 groups, 1 s.
            assert_eq!(rc["streams"], 2, "{rc}");
            assert_eq!(rc["expected"], rc["received"], "{rc}");
            assert!(rc["expected"].as_u64().unwrap() > 2000, "{rc}");
            assert!(rc["latency"]["samples"].as_u64().unwrap() > 0, "{rc}");
        }
        // Joins take effect within a few ms (the bridge learns from the
        // report itself); fast leave stops the group at once.
        let j = &d["join_delay_ms"];
        assert!(j["min"].as_f64().unwrap() >= 0.0, "{j}");
        assert!(j["max"].as_f64().unwrap() < 200.0, "{j}");
        assert!(d["leave_delay_ms"]["max"].as_f64().unwrap() < 200.0, "{d}");
        assert_eq!(d["never_joined"], 0);
        assert_eq!(d["never_left"], 0);
        // Without a querier the snooping bridge floods everything.
        let r = row("no-querier", size);
        assert_eq!(r.status, "ok", "{:?}", r.error);
        assert_eq!(r.pass, Some(false));
        assert!(r.detail["summary"]["leaked"].as_u64().unwrap() > 1000);
        // The wire DUT cannot do multicast.
        assert_eq!(row("wire", size).status, "n/a");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    lab::report::validate_json(&v).unwrap();
    let tables = std::fs::read_to_string(out.join("tables.txt")).unwrap();
    assert!(
        tables.contains("% LR") && tables.contains("join delay"),
        "{tables}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
