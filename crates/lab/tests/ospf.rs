//! Root-only: a layer-3 throughput test whose routes the DUT learns by
//! OSPF (`routes-from: ospf`): FRR on Lanyard's TAP twins with FPM to
//! Lanyard, and on linux-router's ports, injector routers on the tester
//! ports advertising the 200 prefixes `routes.rs` generated. Skipped
//! without root, the lanyard binary or FRR.

use std::path::{Path, PathBuf};
mod common;
use common::{measuring, root_and_lanyard, run_plan_text};

/// Every file under `dir` (recursively).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The kept file of DUT `dut` whose path ends with `tail`.
fn kept(all: &[PathBuf], dut: &str, tail: &str) -> String {
    let p = all
        .iter()
        .find(|p| {
            let s = p.to_string_lossy();
            s.contains(&format!("/logs/{dut}-")) && s.ends_with(tail)
        })
        .unwrap_or_else(|| panic!("no kept {tail} of {dut} in {all:?}"));
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn routes_learned_by_ospf_forward_to_the_emulated_host() {
    let _serial = measuring();
    let Some(bin) = root_and_lanyard() else {
        return;
    };
    testkit::require_frr!(&[testkit::frr::Daemon::Zebra, testkit::frr::Daemon::Ospfd]);
    let (s, out) = run_plan_text(
        bin,
        "ospf",
        "name: ospf
duts:
  - {name: ly, driver: lanyard}
  - {name: lr, driver: linux-router}
defaults: {trial-duration: 0.5, drain: 0.3, learn-wait: 0.1}
tests:
  - {name: l3-ospf, type: throughput, layer: 3, routes: 200, routes-from: ospf,
     frame-sizes: [128], search: {max-trials: 6, loss-tolerance: 0.01}}
",
    );
    for d in &s.duts {
        assert_eq!(d.status, "ok", "{d:?}");
        let line = d
            .info
            .iter()
            .find(|i| i.starts_with("200 IPv4 routes learned by OSPF"))
            .unwrap_or_else(|| panic!("{}: no OSPF line in {:?}", d.name, d.info));
        eprintln!("{}: {line}", d.name);
        // Routes round-robin over both ports' hosts: one injector each.
        assert!(line.contains("2 injector router(s)"), "{line}");
        assert!(line.contains("on t1, t2"), "{line}");
    }
    assert_eq!(s.results.len(), 2);
    for row in &s.results {
        let at = format!("{} {}", row.dut, row.test);
        assert_eq!(row.status, "ok", "{at}: {row:?}");
        assert!(row.throughput_fps.unwrap_or(0.0) > 0.0, "{at}: {row:?}");
        eprintln!("{at}: {:.0} fps", row.throughput_fps.unwrap_or(0.0));
        assert_eq!(row.detail["ospf"]["routes"], 200, "{at}: {}", row.detail);
        assert!(
            row.notes
                .iter()
                .any(|n| n.starts_with("200 routes by OSPF")),
            "{at}: {:?}",
            row.notes
        );
        for t in &row.trials {
            let r = &t.result;
            assert!(r.received > 0, "{at}: {r:?}");
            assert_eq!(r.malformed, 0, "{at}: {r:?}");
            assert_eq!(r.flooded, 0, "{at}: {r:?}");
            // t1 sends, the injector's port t2 (the emulated host) receives.
            assert_eq!(r.per_port_rx[0], 0, "{at}: {r:?}");
            assert_eq!(r.per_port_rx[1], r.received, "{at}: {r:?}");
        }
    }
    // Lanyard forwarded the frames in its data path.
    let ly = s.results.iter().find(|r| r.dut == "ly").unwrap();
    let fwd = ly.detail["lanyard"]["l3"]["forwarded"]
        .as_i64()
        .unwrap_or(0);
    assert!(fwd > 0, "lanyard l3 counters: {}", ly.detail["lanyard"]);

    // Not static: Lanyard had no static routes and an FPM feed; FRR's
    // configs and logs are kept with each DUT's.
    let all = files(&out.join("logs"));
    let cfg = kept(&all, "ly", "lanyard/lanyard.yaml");
    assert!(cfg.contains("fpm: 127.0.0.1:2620"), "{cfg}");
    assert!(!cfg.contains("static-routes"), "{cfg}");
    let zebra = kept(&all, "ly", "frr-dut/zebra.conf");
    assert!(zebra.contains("fpm address 127.0.0.1 port 2620"), "{zebra}");
    for dut in ["ly", "lr"] {
        let log = kept(&all, dut, "frr-dut/ospfd.log");
        assert!(log.contains("Full"), "{dut}: no adjacency in {log}");
        let inj = kept(&all, dut, "frr-injector-t2/ospfd.conf");
        assert!(inj.contains("match interface t2"), "{inj}");
    }
    let _ = std::fs::remove_dir_all(&out);

    // Nothing left running: namespaces and daemons went with the DUTs.
    let me = std::process::id();
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("lab-{me}-")))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    let daemons: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("lanyard-frr-") && c.contains(&format!("-{me}-")))
        .collect();
    assert!(daemons.is_empty(), "FRR daemons left: {daemons:?}");
}
