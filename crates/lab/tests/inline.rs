//! An inline-engine DUT end to end through the lab: a short layer-3
//! latency test through the bump in the wire, then the run's files —
//! bandwidth per subscriber per service (`bandwidth.csv`) and concurrent
//! sessions per service (`sessions.csv`) — as the inline engine report
//! plots them (root; skipped without a `lanyard` binary).

mod common;
use common::{measuring, root, root_and_lanyard, run_plan_text};

#[test]
fn inline_engine_run_writes_sessions_and_bandwidth_per_service() {
    let _serial = measuring();
    let Some(bin) = root_and_lanyard() else {
        return;
    };
    // 600 routes, gateways alternating over the two ports: the stream from
    // the subscriber port samples the 300 behind the network port, one
    // flow each, all of the `lab` service (its signature is the test
    // frames' UDP port), for 3.5 s: at least two closed 1 s history
    // intervals with every flow live.
    let (routes, flows) = (600, 300);
    let (s, out) = run_plan_text(
        bin,
        "inline",
        &format!(
            "name: inline-sessions
duts: [{{name: engine, driver: lanyard, workers: 1, inline: engine}}]
tests:
  - {{name: through-engine, type: latency, layer: 3, routes: {routes}, rate: 3000,
     frame-sizes: [128], trial-duration: 3.5, drain: 0.3, learn-wait: 0.2}}
  - {{name: new-flows, type: latency, layer: 3, routes: {routes}, rate: 3000, new-flows: true,
     frame-sizes: [128], trial-duration: 3.5, drain: 0.3, learn-wait: 0.2}}
"
        ),
    );
    let r = &s.results[0];
    assert_eq!(r.status, "ok", "{r:?}");
    let res = &r.trials[0].result;
    assert!(res.sent > 9000, "{res:?}");
    assert_eq!(res.received, res.sent, "{res:?}");

    // Sessions: the `lab` service held every flow in at least one
    // interval; nothing else had sessions.
    let lab: Vec<_> = s
        .sessions
        .iter()
        .filter(|r| r.service == "lab" && r.test == "through-engine")
        .collect();
    assert!(!lab.is_empty(), "no sessions: {:?}", s.sessions);
    let most = lab.iter().map(|r| r.sessions_max).max().unwrap();
    assert_eq!(most, flows, "{lab:?}");
    assert!(lab.iter().all(|r| r.dut == "engine"), "{lab:?}");
    assert!(lab.iter().any(|r| r.up_bps > 0.0), "{lab:?}");
    assert!(
        s.sessions
            .iter()
            .all(|r| r.service == "lab" || r.sessions_max == 0),
        "{:?}",
        s.sessions
    );

    // `new-flows: true`: the same addresses, but every frame a new flow
    // (UDP source port per frame): the live sessions grow by one a frame
    // (UDP flows outlive the trial). Most of the trial's frames are in
    // closed intervals when the lab reads the history.
    let r2 = &s.results[1];
    assert_eq!(r2.status, "ok", "{r2:?}");
    let sent = r2.trials[0].result.sent;
    assert_eq!(r2.trials[0].result.received, sent, "{r2:?}");
    let most2 = s
        .sessions
        .iter()
        .filter(|r| r.service == "lab" && r.test == "new-flows")
        .map(|r| r.sessions_max)
        .max()
        .unwrap_or(0);
    assert!(
        most2 >= flows + sent / 2 && most2 <= flows + sent,
        "{most2} sessions after {sent} new flows: {:?}",
        s.sessions
    );

    let csv = std::fs::read_to_string(out.join("sessions.csv")).unwrap();
    assert!(csv.starts_with(lab::sessions::CSV_HEADER), "{csv}");
    assert_eq!(csv.lines().count(), s.sessions.len() + 1, "{csv}");
    assert!(csv.contains(",lab,"), "{csv}");

    // Bandwidth per subscriber: the generator's frames leave the
    // subscriber port from lab-b's half of the addresses.
    let bw = std::fs::read_to_string(out.join("bandwidth.csv")).unwrap();
    assert!(
        bw.lines()
            .any(|l| l.starts_with("engine,through-engine,lab-b,lab,")),
        "{bw}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("data-plot=\"sessions\""));
    assert!(html.contains("data-plot=\"bandwidth\""));
    let text = std::fs::read_to_string(out.join("tables.txt")).unwrap();
    assert!(text.contains("concurrent sessions per service"), "{text}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Linux conntrack as a lab DUT (`linux-router` with `conntrack: true`):
/// every forwarded packet goes through connection tracking, and the run
/// reports the connections created per test. The same 300 flows again
/// and again create 300; with `new-flows: true` every frame is one.
#[test]
fn linux_conntrack_counts_one_connection_per_new_flow() {
    let _serial = measuring();
    if !root() {
        return;
    }
    if std::process::Command::new("nft")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no nft (apt-get install nftables; scripts/setup.sh does)");
        return;
    }
    let (s, out) = run_plan_text(
        std::path::PathBuf::from("/nonexistent"),
        "conntrack",
        "name: conntrack
duts: [{name: ct, driver: linux-router, conntrack: true}]
tests:
  - {name: same-flows, type: latency, layer: 3, routes: 600, rate: 3000,
     frame-sizes: [128], trial-duration: 1.5, drain: 0.3, learn-wait: 0.2}
  - {name: new-flows, type: latency, layer: 3, routes: 600, rate: 3000, new-flows: true,
     frame-sizes: [128], trial-duration: 1.5, drain: 0.3, learn-wait: 0.2}
",
    );
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        s.duts[0]
            .info
            .iter()
            .any(|i| i.contains("conntrack on every forwarded packet")),
        "{:?}",
        s.duts[0]
    );
    let created = |i: usize| {
        let r = &s.results[i];
        assert_eq!(r.status, "ok", "{r:?}");
        let res = &r.trials[0].result;
        assert_eq!(res.received, res.sent, "{res:?}");
        (
            r.detail["conntrack_added"].as_u64().unwrap_or(u64::MAX),
            res.sent,
        )
    };
    let (same, _) = created(0);
    assert_eq!(same, 300, "{:?}", s.results[0].detail);
    let (new, sent) = created(1);
    assert!(
        new >= sent && new <= sent + 300,
        "{new} connections for {sent} new-flow frames: {:?}",
        s.results[1].detail
    );
}

/// Flows and subscribers at scale (`flows: N`, `subscribers: M`): the
/// inline engine gets the test's subscribers at start and every flow
/// before the first trial, so a trial shorter than the flow list still
/// finds all of them live; both directions of a flow are one entry.
#[test]
fn flows_at_scale_are_created_first_and_held() {
    let _serial = measuring();
    let Some(bin) = root_and_lanyard() else {
        return;
    };
    // 1,000 frames/s for 2 s (a latency test sends from the subscriber
    // side only) visit 2,000 of the 6,000 flows: the other 4,000 are live
    // only because they were created first.
    let (flows, subscribers) = (6000u64, 2000u64);
    let (s, out) = run_plan_text(
        bin,
        "inline-scale",
        &format!(
            "name: inline-scale
duts: [{{name: engine, driver: lanyard, workers: 1, inline: engine}}]
tests:
  - {{name: held, type: latency, layer: 3, flows: {flows}, subscribers: {subscribers}, rate: 1000,
     frame-sizes: [128], trial-duration: 2, drain: 0.3, learn-wait: 0.2}}
"
        ),
    );
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        s.duts[0]
            .info
            .iter()
            .any(|i| i.contains(&format!("{subscribers} subscribers provisioned"))),
        "{:?}",
        s.duts[0]
    );
    let r = &s.results[0];
    assert_eq!(r.status, "ok", "{r:?}");
    let res = &r.trials[0].result;
    assert!(res.sent >= 1900 && res.sent < 3000, "{res:?}");
    assert_eq!(res.received, res.sent, "{res:?}");
    assert!(
        r.notes.iter().any(|n| n.starts_with(&format!(
            "{flows} flows of {subscribers} subscribers created first"
        ))),
        "{:?}",
        r.notes
    );
    let live = r.detail["inline_flows"]["live"].as_u64().unwrap_or(0);
    assert!(
        (flows..flows + 10).contains(&live),
        "{live} live flows: {:?}",
        r.detail["inline_flows"]
    );
    assert_eq!(r.detail["inline_flows"]["refused-full"].as_u64(), Some(0));
    let most = s
        .sessions
        .iter()
        .filter(|x| x.service == "lab")
        .map(|x| x.sessions_max)
        .max()
        .unwrap_or(0);
    assert_eq!(most, flows, "{:?}", s.sessions);
}

/// TCP and ICMP new flows (`new-flows: tcp | icmp | mix`): every frame a
/// TCP SYN from a new source port or an ICMP echo request with a new
/// identifier. The analyzer counts them all (no frame lost), the inline
/// engine creates one flow per frame and Linux conntrack one connection.
#[test]
fn tcp_and_icmp_new_flows_are_one_flow_and_one_connection_each() {
    let _serial = measuring();
    let Some(bin) = root_and_lanyard() else {
        return;
    };
    if std::process::Command::new("nft")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no nft (apt-get install nftables; scripts/setup.sh does)");
        return;
    }
    let (s, out) = run_plan_text(
        bin,
        "new-flows-tcp-icmp",
        "name: new-flows-tcp-icmp
defaults: {trial-duration: 1.2, drain: 0.3, learn-wait: 0.2}
duts:
  - {name: engine, driver: lanyard, workers: 1, inline: engine}
  - {name: ct, driver: linux-router, conntrack: true}
tests:
  - {name: tcp, type: latency, layer: 3, routes: 600, rate: 2000, new-flows: tcp, frame-sizes: [64]}
  - {name: icmp, type: latency, layer: 3, routes: 600, rate: 2000, new-flows: icmp, frame-sizes: [64]}
  - {name: mix6, type: latency, family: ipv6, rate: 2000, new-flows: mix, frame-sizes: [84]}
",
    );
    let _ = std::fs::remove_dir_all(&out);
    let mut seen = 0;
    for r in &s.results {
        assert_eq!(r.status, "ok", "{r:?}");
        let res = &r.trials[0].result;
        assert!(res.sent > 2000, "{}/{}: {res:?}", r.dut, r.test);
        assert_eq!(res.received, res.sent, "{}/{}: {res:?}", r.dut, r.test);
        assert_eq!(res.malformed, 0, "{}/{}: {res:?}", r.dut, r.test);
        let key = match r.dut.as_str() {
            "engine" => "inline_flows_created",
            _ => "conntrack_added",
        };
        let n = r.detail[key].as_u64().unwrap_or(u64::MAX);
        // A few more for neighbour discovery (ICMPv6 flows / entries).
        assert!(
            n >= res.sent && n <= res.sent + 10,
            "{}/{}: {key} {n} for {} new-flow frames: {:?}",
            r.dut,
            r.test,
            res.sent,
            r.detail
        );
        if r.dut == "ct" {
            // Room for all, and every frame a connection it could track.
            for k in [
                "conntrack_early_drop",
                "conntrack_drop",
                "conntrack_invalid",
            ] {
                assert_eq!(r.detail[k].as_u64(), Some(0), "{k}: {:?}", r.detail);
            }
        }
        seen += 1;
    }
    assert_eq!(seen, 6);
    // Every engine flow of the three tests is the `lab` service's (its
    // signatures: the TCP port, the ICMP data's magic).
    let engine: Vec<_> = s.sessions.iter().filter(|x| x.dut == "engine").collect();
    assert!(
        engine
            .iter()
            .all(|x| x.service == "lab" || x.sessions_max == 0),
        "{engine:?}"
    );
}

/// `type: subscribers` (the inline engine report's 1,000,000 subscribers
/// provisioned through an API, CI-sized): 20,000 subscribers in one
/// streamed bulk load, the per-package counts read back, the daemon's
/// memory, then 20 subscribers spread over the table each send and
/// receive 100 frames and their own counters must say exactly that.
#[test]
fn subscribers_are_loaded_in_bulk_and_sampled_ones_count_their_traffic() {
    let _serial = measuring();
    let Some(bin) = root_and_lanyard() else {
        return;
    };
    let (s, out) = run_plan_text(
        bin,
        "inline-subscribers",
        include_str!("../../../plans/inline-subscribers-quick.yaml"),
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    let r = &s.results[0];
    assert_eq!(r.status, "ok", "{r:?}");
    let v = &r.detail["subscribers"];
    assert_eq!(r.pass, Some(true), "{v} {:?}", r.notes);
    assert_eq!(v["added"].as_u64(), Some(20_000), "{v}");
    assert_eq!(v["packages"], serde_json::json!([6667, 6667, 6666]), "{v}");
    assert_eq!(
        v["total_after"].as_u64(),
        v["total_before"].as_u64().map(|b| b + 20_000),
        "{v}"
    );
    // 2,000 frames/s for 1 s over 20 subscribers, each way.
    assert_eq!(v["frames"].as_u64(), Some(100), "{v}");
    assert_eq!(v["matched"].as_u64(), Some(20), "{v}");
    assert_eq!(
        v["sampled_first_last"],
        serde_json::json!(["sub-0", "sub-19999"]),
        "{v}"
    );
    let res = &r.trials[0].result;
    assert_eq!((res.sent, res.received), (4000, 4000), "{res:?}");
    // The table holds them: the daemon grew.
    let (a, b) = (
        v["rss_before_kib"].as_u64().unwrap_or(0),
        v["rss_after_kib"].as_u64().unwrap_or(0),
    );
    assert!(a > 0 && b > a, "{v}");
    assert!(v["load_s"].as_f64().unwrap_or(0.0) > 0.0, "{v}");
    let text = s.tables();
    assert!(
        text.contains("sampled") && text.contains("20/20") && text.contains("6667"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(
        html.contains("sampled") && html.contains("20/20"),
        "no table in the HTML"
    );
}
