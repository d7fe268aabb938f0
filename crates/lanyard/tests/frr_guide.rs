//! Issue 14: docs/frr-guide.md, followed step by step in fresh network
//! namespaces. The Lanyard configuration, the FRR `daemons` settings, the
//! `frr.conf` and the verification commands are read from the guide's
//! `<!-- guide: NAME -->` blocks, so the guide cannot drift from what
//! works: two OSPF neighbours (FRR, one namespace each) advertise IPv4 and
//! IPv6 externals to the FRR the guide configures on Lanyard's TAPs; the
//! test checks what the guide says to check (adjacencies, zebra connected
//! over FPM, every route in Lanyard's FIB and in the kernel's copy, the
//! TAP's MTU, no control-plane policing drops, the `kernel` summary row)
//! and runs every command of its "Verify" step.
//!
//! Needs root and FRR (skips otherwise). About a minute.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions, OspfRouter, RouterBed};
use testkit::{l2, Switch};

const V4_EACH: u32 = 300;
const V6_EACH: u32 = 150;

fn lanyard() -> String {
    l2::bin(env!("CARGO_BIN_EXE_lanyard"))
}

fn guide() -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/frr-guide.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The fenced block after `<!-- guide: NAME -->`.
fn block(doc: &str, name: &str) -> String {
    let marker = format!("<!-- guide: {name} -->");
    let start = doc
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/frr-guide.md has no {marker}"));
    let mut lines = doc[start + marker.len()..]
        .lines()
        .skip_while(|l| !l.starts_with("```"));
    lines.next();
    let body: Vec<&str> = lines.take_while(|l| !l.starts_with("```")).collect();
    assert!(!body.is_empty(), "empty block {name}");
    body.join("\n") + "\n"
}

/// Daemons set to `yes` in the guide's `daemons` file, and zebra's
/// options there.
fn daemons(text: &str) -> (Vec<Daemon>, Vec<String>) {
    let mut ds = Vec::new();
    let mut zebra = Vec::new();
    for l in text.lines() {
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"');
        match (k.trim(), v) {
            ("zebra", "yes") => ds.push(Daemon::Zebra),
            ("staticd", "yes") => ds.push(Daemon::Staticd),
            ("ospfd", "yes") => ds.push(Daemon::Ospfd),
            ("ospf6d", "yes") => ds.push(Daemon::Ospf6d),
            ("zebra_options", o) => zebra = o.split_whitespace().map(String::from).collect(),
            (d, "yes") if d != "vtysh_enable" => panic!("the guide enables {d}: teach this test"),
            _ => {}
        }
    }
    (ds, zebra)
}

fn external_v4(i: u32) -> Vec<(u32, u8)> {
    (0..V4_EACH)
        .map(|k| ((10 << 24) | (16 * i) << 16 | k << 8, 24))
        .collect()
}

fn external_v6(i: u32) -> Vec<(u128, u8)> {
    (0..V6_EACH)
        .map(|k| {
            let base = u128::from(Ipv6Addr::new(
                0x2001,
                0xdb8,
                0x2000 + i as u16,
                0,
                0,
                0,
                0,
                0,
            ));
            (base | (k as u128) << 64, 64)
        })
        .collect()
}

fn summary_row(v: &serde_json::Value, source: &str) -> (u64, u64) {
    v["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["source"] == source)
        .map(|s| {
            (
                s["routes"].as_u64().unwrap_or(0),
                s["installed"].as_u64().unwrap_or(0),
            )
        })
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

#[test]
fn the_frr_guide_works_as_written() {
    testkit::require_frr!(&[
        Daemon::Zebra,
        Daemon::Staticd,
        Daemon::Ospfd,
        Daemon::Ospf6d
    ]);
    let doc = guide();

    // Step 1: Lanyard with the guide's configuration.
    let yaml = block(&doc, "lanyard.yaml");
    let cfg = config::parse(&yaml, "frr-guide.md").unwrap_or_else(|e| panic!("{e}"));
    let ports: Vec<String> = cfg.ports.iter().map(|p| p.name.clone()).collect();
    for (k, p) in ports.iter().enumerate() {
        assert_eq!(*p, format!("sw{}", k + 1), "the guide's ports are sw1..swN");
    }
    let mtu = cfg.ports[0].effective_mtu();
    let bed = RouterBed::new("frrgd", ports.len(), mtu).expect("namespaces");
    bed.address_testers().unwrap();
    // The neighbours: FRR's default timers, point-to-point, as the guide
    // configures its side.
    let routers: Vec<OspfRouter> = (1..=ports.len() as u32)
        .map(|i| {
            let mut r = OspfRouter::injector(
                Ipv4Addr::new(10, 255, 0, 10 + i as u8),
                &[&format!("t{i}")],
                external_v4(i),
                external_v6(i),
            );
            r.hello = 10;
            r.dead = 40;
            r
        })
        .collect();
    let _testers = bed.start_routers(&routers, &FrrOptions::default());
    let names: Vec<&str> = ports.iter().map(String::as_str).collect();
    let mut sw = Switch::start(&lanyard(), &bed.dut, &yaml, &names).expect("lanyard");

    // Step 2: the daemons and zebra's options.
    let (ds, zopts) = daemons(&block(&doc, "daemons"));
    assert!(ds.contains(&Daemon::Zebra), "{ds:?}");
    let mut opts = FrrOptions::default();
    let mut it = zopts.iter();
    while let Some(o) = it.next() {
        match o.as_str() {
            "-M" => opts
                .zebra_args
                .extend(["-M".to_string(), it.next().unwrap().clone()]),
            "-s" => opts.nl_bufsize = it.next().and_then(|n| n.parse().ok()),
            // -A: testkit binds the vty to 127.0.0.1 already.
            "-A" => {
                it.next();
            }
            other => panic!("zebra option {other} in the guide: teach this test"),
        }
    }
    assert!(
        opts.zebra_args.iter().any(|a| a == "dplane_fpm_nl"),
        "the guide loads the FPM module: {zopts:?}"
    );
    let frr = FrrInstance::start_with(bed.dut.name(), "edge1", &ds, &FrrConfig::default(), &opts)
        .expect("FRR on Lanyard");

    // Step 3: frr.conf, loaded as `systemctl restart frr` does (vtysh -b).
    let conf = frr.dir().join("frr.conf");
    std::fs::write(&conf, block(&doc, "frr.conf")).unwrap();
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", bed.dut.name(), "vtysh", "--vty_socket"])
        .arg(frr.dir())
        .arg("--config_dir")
        .arg(frr.dir())
        .arg("-b")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !said.contains("% Unknown") && !said.contains("error"),
        "vtysh -b with the guide's frr.conf: {said}"
    );

    // The adjacencies, then every route in Lanyard's FIB.
    let n = ports.len();
    frr.wait_for(
        |f| f.ospf_full_neighbors() == n && f.ospf6_full_neighbors() == n,
        Duration::from_secs(120),
    )
    .unwrap_or_else(|e| {
        panic!(
            "{e}: {}",
            frr.vtysh(&["show ip ospf neighbor", "show ipv6 ospf6 neighbor"])
        )
    });
    let want4 = V4_EACH as u64 * n as u64;
    let want6 = V6_EACH as u64 * n as u64;
    let t0 = Instant::now();
    let (mut s4, mut s6);
    loop {
        s4 = sw.show_json(&["show", "ip", "route", "summary"]);
        s6 = sw.show_json(&["show", "ipv6", "route", "summary"]);
        if summary_row(&s4, "ospf") == (want4, want4) && summary_row(&s6, "ospf") == (want6, want6)
        {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "Lanyard's FIB: v4 {s4}\nv6 {s6}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(s4["fpm"]["connected"], true, "{s4}");
    // FRR's static route (frr.conf) arrives too.
    let r = sw.show_json(&["show", "ip", "route", "192.0.2.0/24"]);
    assert!(
        r[0]["source"] == "frr-static" && r[0]["blackhole"] == true,
        "{r}"
    );

    // What the guide says about the `kernel (FRR)` row: the TAPs' own
    // subnets, counted but not installed (Lanyard's connected route wins).
    let (k_routes, k_fib) = summary_row(&s4, "kernel");
    if k_routes > 0 {
        assert_eq!(k_fib, 0, "{s4}");
        let r = sw.show_json(&["show", "ip", "route", "10.100.1.0/24"]);
        let sources: Vec<&str> = r
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| x["source"].as_str())
            .collect();
        assert!(sources.contains(&"connected"), "{r}");
    }

    // The kernel's copy (the guide's memory note): zebra installed the
    // OSPF routes there as well.
    let kroutes = bed
        .dut
        .exec(&["ip", "route", "show", "proto", "ospf"])
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().count() as u64)
        .unwrap_or(0);
    assert_eq!(kroutes, want4, "OSPF routes in the kernel's table");
    // The TAP carries the port's MTU (what OSPF checks).
    let link = bed.dut.exec(&["ip", "link", "show", "ly-sw1"]).unwrap();
    assert!(
        String::from_utf8_lossy(&link.stdout).contains(&format!("mtu {mtu} ")),
        "{}",
        String::from_utf8_lossy(&link.stdout)
    );
    // Control-plane policing sized as the guide says: nothing dropped.
    let copp = sw.show_json(&["show", "control-plane"]);
    let routing = copp["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["class"] == "routing")
        .unwrap();
    assert_eq!(routing["dropped"], 0, "{copp}");
    assert!(routing["passed"].as_u64().unwrap() > 0, "{copp}");

    // Step 5: every verification command runs and says what the guide
    // tells the reader to look for.
    let verify = block(&doc, "verify");
    let mut outputs = Vec::new();
    for line in verify.lines().filter(|l| !l.trim().is_empty()) {
        let out = if let Some(rest) = line.strip_prefix("lanyard ") {
            let args: Vec<&str> = rest.split_whitespace().collect();
            let o = sw.cli(&args).unwrap();
            assert!(
                o.status.success(),
                "{line}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8_lossy(&o.stdout).into_owned()
        } else if let Some(rest) = line.strip_prefix("vtysh -c ") {
            let cmd = rest.trim().trim_matches('\'');
            let o = frr.vtysh(&[cmd]);
            assert!(
                !o.contains("% Unknown") && !o.trim().is_empty(),
                "{line}: {o}"
            );
            o
        } else {
            panic!("verify line {line:?}: neither lanyard nor vtysh -c");
        };
        outputs.push((line.to_string(), out));
    }
    let get = |cmd: &str| -> &str {
        &outputs
            .iter()
            .find(|(l, _)| l.contains(cmd))
            .unwrap_or_else(|| panic!("the guide no longer runs {cmd}"))
            .1
    };
    let summary = get("lanyard show ip route summary");
    assert!(
        summary.contains("zebra connected") && summary.contains("ospf (FRR)"),
        "{summary}"
    );
    let ifs = get("lanyard show ip interface");
    assert!(ifs.contains("ly-sw1") && ifs.contains("up"), "{ifs}");
    let route = get("lanyard show ip route 192.0.2.0/24");
    assert!(route.contains("[frr-static] blackhole"), "{route}");
    let fpm = get("show fpm counters");
    assert!(fpm.to_lowercase().contains("connection"), "{fpm}");
    eprintln!("{summary}\n{fpm}");
    drop(sw.stop());
}
