//! Root-only: the `lanyard-pe` DUT in `pe-mode: l3vpn` (two Lanyard PEs,
//! static VPN routes between them) and its global-table baseline
//! `pe-mode: l3` end to end, a small version of
//! `plans/reports/metro-t6-l3vpn.yaml` (skipped when not root or when no
//! `lanyard` binary is built). About 15 s.
//!
//! Tagged IPv4 and IPv6 frames both ways over 4 VRFs with the same
//! customer addresses and the same 20 + 20 synthetic prefixes in every
//! VRF (half behind each PE: the frames go to addresses in the far half),
//! one stream per VLAN: every frame of every stream
//! arrives, and only in its own VLAN, to its own customer host's MAC,
//! with TTL / hop limit 62 (two routers) and a valid checksum — the
//! arrival check counts any other frame `malformed` (a frame routed into
//! another VRF leaves in that VRF's VLAN), so per-stream counts equal to
//! the frames sent, and none malformed or elsewhere, mean no VRF leaked.
//! Untagged frames both ways through the global-table baseline arrive
//! with TTL 62 too.

mod common;
use common::{measuring, root_and_lanyard, run_plan_text};

const VLANS: usize = 4;

#[test]
fn l3vpn_frames_reach_their_own_vrf_with_ttl_minus_two() {
    let Some(bin) = root_and_lanyard() else {
        return;
    };
    let _m = measuring();
    let (s, out) = run_plan_text(
        bin,
        "l3vpn",
        "name: l3vpn
defaults: {drain: 0.5, learn-wait: 0.3}
duts:
  - {name: vpn, driver: lanyard-pe, pe-mode: l3vpn, workers: 1, routes: 20, routes6: 20}
  - {name: l3, driver: lanyard-pe, pe-mode: l3, workers: 1, routes: 20, routes6: 20}
tests:
  - {name: v4, type: latency, layer: 3, vlans: 4, bidirectional: true, rate: 2000,
     trial-duration: 1, frame-sizes: [68, 1518]}
  - {name: v6, type: latency, family: ipv6, vlans: 4, bidirectional: true, rate: 2000,
     trial-duration: 1, frame-sizes: [88]}
  - {name: global, type: latency, layer: 3, bidirectional: true, rate: 2000,
     trial-duration: 1, frame-sizes: [64, 1518]}
",
    );
    let text = std::fs::read_to_string(out.join("tables.txt")).unwrap();
    // Both PEs' configurations outlive the DUT: one VRF per VLAN.
    let pe2 = std::fs::read_to_string(out.join("logs/vpn-1/pe2/lanyard.yaml"))
        .unwrap_or_else(|e| panic!("pe2's configuration not kept: {e}\n{text}"));
    assert_eq!(pe2.matches("vpn-label: 4000").count(), VLANS, "{pe2}");
    // PE2 pushes PE1's label of each VRF for the far customer subnet (2)
    // and the 20 synthetic prefixes behind PE1.
    assert_eq!(pe2.matches("vpn-label: 3000").count(), VLANS * 22, "{pe2}");
    let _ = std::fs::remove_dir_all(&out);
    let row = |t: &str, d: &str, fs: &str| {
        s.results
            .iter()
            .find(|r| r.test == t && r.dut == d && r.frame_size == fs)
            .unwrap_or_else(|| panic!("no row {t} {d} {fs}:\n{text}"))
    };
    for (t, d, fs, streams) in [
        ("v4", "vpn", "68", 2 * VLANS),
        ("v4", "vpn", "1518", 2 * VLANS),
        ("v6", "vpn", "88", 2 * VLANS),
        ("global", "l3", "64", 2),
        ("global", "l3", "1518", 2),
    ] {
        let r = row(t, d, fs);
        assert_eq!(r.status, "ok", "{t} {d} {fs}: {r:?}\n{text}");
        let tr = &r.trials[0].result;
        assert_eq!(tr.streams.len(), streams, "{t} {d} {fs}");
        // Per stream (per VRF and direction): every frame in its own VLAN
        // with the right MAC and TTL, none anywhere else.
        for st in &tr.streams {
            assert!(st.sent >= 100, "{t} {d} {fs}: stream {}: {st:?}", st.id);
            assert_eq!(
                (st.received, st.malformed, st.flooded, st.duplicated),
                (st.sent, 0, 0, 0),
                "{t} {d} {fs}: stream {} ({} -> {:?}) {st:?}\n{text}",
                st.id,
                st.tx,
                st.expect
            );
        }
        // Both directions carried their share.
        for port in 0..2 {
            let from: u64 = tr
                .streams
                .iter()
                .filter(|st| st.tx == port)
                .map(|st| st.received)
                .sum();
            assert!(from >= 1000, "{t} {d} {fs}: {from} from port {port}");
        }
        assert_eq!(r.loss_ratio, Some(0.0), "{t} {d} {fs}");
    }
    // Each mode skips the other's tests.
    assert_eq!(row("v4", "l3", "68").status, "n/a");
    assert_eq!(row("global", "vpn", "64").status, "n/a");
    let info = s
        .duts
        .iter()
        .find(|d| d.name == "vpn")
        .map(|d| d.info.join("; "))
        .unwrap_or_default();
    assert!(info.contains("static L3VPN: 4 VRFs per PE"), "{info}");
    assert!(info.contains("(160 routes per PE)"), "{info}");
    // No VRF namespace left behind.
    let ns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    let me = format!("lab-{}-", std::process::id());
    assert!(!ns.contains(&me), "namespaces left: {ns}");
}
