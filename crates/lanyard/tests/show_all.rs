//! Issue 14 acceptance: every `show` command that `lanyard help` lists runs
//! against a switch with every feature configured (VLANs, trunk, 802.1ad
//! tunnel, routed port and VLAN interface, static routes, FPM listener,
//! MAC/IPv4/IPv6 access lists, QoS policies, flow export, mirroring,
//! control-plane policing, a backup pair, a port channel, IGMP snooping,
//! a static multicast route, and a configured interface that does not
//! exist). Each command's text has no line wider than 120 columns and no
//! JSON or debug dump; with `--json` it is JSON. Also: start-up logs no
//! fake flap and names the missing interface; a failover is logged with
//! port names; the help lists agree; `lab --help` offers no `--socket`;
//! a switch that cannot be reached names `--socket` and `LANYARD_SOCKET`.
//!
//! `LANYARD_GOLDEN_CAPTURE=DIR` writes each command's JSON answer to
//! `DIR/<view>.json` (the inputs of `crates/mgmt/tests/golden`).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::frame::{mac, parse_mac};
use testkit::{igmp, ip, l2, require_root, Switch, TestBed};

fn lanyard() -> String {
    l2::bin(env!("CARGO_BIN_EXE_lanyard"))
}

fn run(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(lanyard()).args(args).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The `show` synopses `lanyard help` lists (`show ip route [summary | ...]`).
fn show_synopses(help: &str) -> Vec<String> {
    help.lines()
        .filter(|l| l.starts_with("  show "))
        .map(|l| l.trim().split("  ").next().unwrap().trim().to_string())
        // clap's own list of top-level commands has a bare `show`.
        .filter(|s| s != "show")
        .collect()
}

/// Commands to run for one synopsis: the bare command, then each
/// alternative of each bracketed argument, placeholders filled in.
fn variants(synopsis: &str) -> Vec<Vec<String>> {
    let words: Vec<&str> = synopsis.split_whitespace().collect();
    let first_opt = words
        .iter()
        .position(|w| w.starts_with('['))
        .unwrap_or(words.len());
    // Required placeholders (`access-lists interface PORT`) filled too.
    let mut base: Vec<String> = words[1..first_opt].iter().map(|s| s.to_string()).collect();
    for k in 0..base.len() {
        if !base[k].chars().any(|c| c.is_ascii_lowercase()) {
            let before = if k > 0 {
                base[k - 1].clone()
            } else {
                String::new()
            };
            let v = fill(&base, &before, &base[k]);
            base[k] = v;
        }
    }
    let rest = words[first_opt..].join(" ");
    let mut out = vec![base.clone()];
    for group in rest.split(']').filter(|g| !g.trim().is_empty()) {
        let group = group.trim().trim_start_matches('[');
        for alt in group.split('|') {
            let mut v = base.clone();
            let toks: Vec<&str> = alt.split_whitespace().collect();
            for (k, t) in toks.iter().enumerate() {
                let before = if k > 0 { toks[k - 1] } else { "" };
                v.push(fill(&base, before, t));
            }
            out.push(v);
        }
    }
    out
}

/// A value for a placeholder, knowing the command and the keyword before it.
fn fill(base: &[String], before: &str, t: &str) -> String {
    let v6 = base.first().is_some_and(|w| w == "ipv6");
    match t {
        "N" if before == "top" => "5".into(),
        "N" => "10".into(),
        "PORT" if before == "interface" && base[0] == "mac" => "sw2".into(),
        "PORT" => "sw1".into(),
        "RANGE" => "sw1-2".into(),
        "MAC" => "0200.0000.0099".into(),
        // The global table by its name (this switch has no VRFs).
        "NAME" if before == "vrf" => "default".into(),
        "NAME" => "edge4".into(),
        "PREFIX" if v6 => "2001:db8:99::/48".into(),
        "PREFIX" => "198.51.100.0/24".into(),
        "ADDRESS" if v6 => "2001:db8:99::7".into(),
        "ADDRESS" => "198.51.100.7".into(),
        t if t.chars().any(|c| c.is_ascii_lowercase()) => t.into(),
        t => panic!("no value for placeholder {t} (in a `show` synopsis): add one to fill()"),
    }
}

/// A reason `line` looks like JSON or a Rust debug dump, if it does.
fn dump_in(line: &str) -> Option<&'static str> {
    for (pat, why) in [
        ("{", "a brace"),
        ("}", "a brace"),
        ("\"", "a double quote"),
        ("Some(", "Some("),
        ("None", "None"),
        ("\\n", "an escaped newline"),
        (": [", "a JSON list"),
    ] {
        if line.contains(pat) {
            return Some(why);
        }
    }
    None
}

const CONFIG: &str = r#"switch:
  name: show-all
  workers: 2
vlans:
  - id: 10
    name: users
    mac-limit: 1000
    acl-in: [macs]
  - id: 20
    name: servers
    router:
      addresses: [10.20.0.1/24, "2001:db8:20::1/64"]
  - id: 30
    name: customer-a
ports:
  - {name: sw1, vlan: 10, acl-in: [edge4, edge6], policy-in: access-in}
  - {name: sw2, vlan: 10, storm-control: {broadcast: 1000pps, multicast: 5%}}
  - {name: sw3, mode: trunk, allowed-vlans: "10,20", acl-out: [edge4], policy-out: uplink-out}
  - {name: sw4, mode: routed, addresses: [10.4.0.1/24, "2001:db8:4::1/64"], urpf: loose, mtu: 1500}
  - {name: sw5}
  - {name: sw6, mode: trunk}
  - {name: sw7, mode: trunk}
  - {name: sw8, vlan: 10}
  - {name: sw9, vlan: 10}
  - {name: sw10, mode: dot1q-tunnel, vlan: 30}
  - {name: nosuch0, vlan: 10}
  - {name: nosuch1}
  - {name: nosuch2}
static-macs:
  - {mac: "02:00:00:00:00:99", vlan: 10, port: sw2}
routing:
  fpm: 127.0.0.1:FPMPORT
  static-routes:
    - {prefix: 198.51.100.0/24, next-hop: 10.4.0.2}
    - {prefix: 203.0.113.0/24, blackhole: true}
    - {prefix: "2001:db8:99::/48", next-hop: "2001:db8:4::2"}
access-lists:
  - name: edge4
    type: ipv4
    rules:
      - {action: deny, protocol: tcp, destination-port: 23, remark: no telnet}
      - {action: deny, source: 198.18.0.0/15}
      - {action: permit}
  - name: edge6
    type: ipv6
    rules:
      - {action: deny, protocol: tcp, destination-port: 23}
      - {action: permit}
  - name: macs
    type: mac
    rules:
      - {action: deny, source-mac: "02:00:00:00:0b:ad"}
      - {action: permit}
class-maps:
  - name: voice
    match:
      - {protocol: udp, destination-port: 16384-32767}
      - {dscp: ef}
  - name: video
    match:
      - {dscp: af41}
policy-maps:
  - name: access-in
    classes:
      - {class: voice, set-dscp: ef, police: {cir: 2M, exceed: drop, violate: drop}}
      - {class: video, set-dscp: af41}
      - {class: class-default, set-dscp: default}
  - name: uplink-out
    classes:
      - {class: voice, queue: {priority: true}}
      - {class: video, queue: {weight: 4}}
      - {class: class-default, queue: {weight: 1}}
flow-export:
  collector: 127.0.0.1:FLOWPORT
  version: ipfix
control-plane-policing:
  unknown: {rate: 200, burst: 50}
loop-detect: {interval: 2, action: shutdown, recovery: 60}
backup-pairs:
  - {primary: sw6, backup: sw7, preempt: true}
port-channels:
  - {name: po1, members: [sw8, sw9], lacp: active, lacp-rate: fast}
mirror-sessions:
  - {name: mon1, source-ports: [sw1], direction: both, destination: sw5}
multicast:
  igmp-snooping:
    vlans: [10]
    querier: true
    querier-address: 10.10.0.2
  static-routes:
    - {group: 232.1.1.1, source: 198.51.100.9, oifs: [sw4]}
service-control:
  inline: [{subscriber-port: nosuch1, network-port: nosuch2}]
  flows: 1024
  classify-slots: 64
  usage-entries: 1024
  services:
    - {name: web, applications: [HTTP, TLS]}
"#;

/// The Internet checksum of `b` (RFC 1071).
fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[test]
fn every_show_command_reads_like_a_switch() {
    require_root!();
    let _heavy = l2::heavy();
    let bed = TestBed::new("shwall", 10, 1500).expect("namespaces");
    let pid = std::process::id();
    let yaml = CONFIG
        .replace("FPMPORT", &(20_000 + pid % 20_000).to_string())
        .replace("FLOWPORT", &(40_000 + pid % 20_000).to_string());
    let ports: Vec<String> = bed.dut_ports();
    let up: Vec<&str> = ports.iter().map(String::as_str).collect();
    let mut sw = Switch::start(&lanyard(), &bed.dut, &yaml, &up).expect("start");
    // A subscriber for `show subscriber NAME` (NAME is filled as edge4),
    // through the streamed provisioning API.
    let subs = std::env::temp_dir().join(format!("lanyard-showall-subs-{pid}.txt"));
    std::fs::write(
        &subs,
        "add edge4 package=silver addr=198.51.100.7,2001:db8:99::/48 quota=5G\n",
    )
    .unwrap();
    let o = sw
        .cli(&["subscribers", "load", subs.to_str().unwrap()])
        .unwrap();
    let _ = std::fs::remove_file(&subs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));

    // Neighbours on the routed port, hosts in VLAN 10, a flow, ACL and
    // policy hits, an IGMP join.
    let t = &bed.tester;
    t.exec(&["ip", "addr", "add", "10.4.0.2/24", "dev", "t4"])
        .unwrap();
    t.sysctl("net.ipv6.conf.t4.disable_ipv6", "0").unwrap();
    t.exec(&[
        "ip",
        "-6",
        "addr",
        "add",
        "2001:db8:4::2/64",
        "dev",
        "t4",
        "nodad",
    ])
    .unwrap();
    let _ = t.exec(&["ping", "-c", "2", "-i", "0.2", "-W", "1", "10.4.0.1"]);
    let _ = t.exec(&[
        "ping",
        "-6",
        "-c",
        "2",
        "-i",
        "0.2",
        "-W",
        "1",
        "2001:db8:4::1",
    ]);
    let p1 = bed.open(1).unwrap();
    let p2 = bed.open(2).unwrap();
    let (h1, h2) = (mac(0x11), mac(0x12));
    let hello = testkit::frame::test_frame(&[0xff; 6], &h2, &[], 1, 0, 64);
    p2.send(&hello).unwrap();
    for i in 0..20u64 {
        let mut f = ip::udp(
            &h2,
            &h1,
            "10.10.0.1".parse().unwrap(),
            "10.10.0.2".parse().unwrap(),
            64,
            i,
            128,
        );
        // DSCP EF, to the voice class's ports; checksums redone.
        f[15] = 46 << 2;
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f[36..38].copy_from_slice(&16_400u16.to_be_bytes());
        f[40..42].copy_from_slice(&[0, 0]);
        p1.send(&f).unwrap();
    }
    p2.send(&igmp::igmpv2_report(
        &h2,
        "10.10.0.9".parse().unwrap(),
        "239.1.1.1".parse().unwrap(),
    ))
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));

    let (ok, help, err) = run(&["help"]);
    assert!(ok, "{err}");
    let synopses = show_synopses(&help);
    assert!(synopses.len() >= 20, "help lists {synopses:?}");
    // `show --help` lists the same commands.
    let (_, show_help, _) = run(&["show", "--help"]);
    assert_eq!(show_synopses(&show_help), synopses, "{show_help}");

    let capture = std::env::var_os("LANYARD_GOLDEN_CAPTURE").map(std::path::PathBuf::from);
    let mut failures = Vec::new();
    let mut ran = BTreeMap::new();
    for syn in &synopses {
        for words in variants(syn) {
            let shown = words.join(" ");
            let mut args = vec!["show".to_string()];
            args.extend(words.iter().cloned());
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = sw.cli(&argv).unwrap();
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            if !o.status.success() {
                failures.push(format!(
                    "show {shown}: failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
                continue;
            }
            if text.trim().is_empty() {
                failures.push(format!("show {shown}: printed nothing"));
            }
            for line in text.lines() {
                let w = line.chars().count();
                if w > 120 {
                    failures.push(format!("show {shown}: {w} columns: {line}"));
                }
                if let Some(why) = dump_in(line) {
                    failures.push(format!("show {shown}: {why} in: {line}"));
                }
            }
            let mut jargs = argv.clone();
            jargs.push("--json");
            let j = sw.cli(&jargs).unwrap();
            let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&j.stdout);
            match parsed {
                Err(e) => failures.push(format!("show {shown} --json: not JSON ({e})")),
                Ok(v) => {
                    if let (Some(dir), Ok(c)) = (&capture, mgmt::cli::parse_show(&words)) {
                        let f = dir.join(format!("{}.json", c.view));
                        if !f.exists() {
                            std::fs::create_dir_all(dir).unwrap();
                            std::fs::write(&f, serde_json::to_string_pretty(&v).unwrap()).unwrap();
                        }
                    }
                }
            }
            ran.insert(shown, text);
        }
    }
    eprintln!("ran {} show commands", ran.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // What the tables say about this configuration.
    let interfaces = &ran["interfaces"];
    assert!(
        interfaces.contains("13 ports: 10 up, 0 down, 3 missing"),
        "{interfaces}"
    );
    let vlan = &ran["vlan"];
    assert!(
        vlan.contains("nosuch0(missing)") && vlan.contains("sw3(T)"),
        "{vlan}"
    );
    let acl = &ran["access-lists edge4"];
    assert!(
        acl.contains("deny protocol tcp destination-port 23 (0 matches)  ! no telnet"),
        "{acl}"
    );
    assert!(
        !acl.contains(" 10 deny") && !acl.contains(" 20 deny"),
        "no invented sequence numbers: {acl}"
    );
    assert!(
        acl.contains("compiled: ") && acl.contains("hash table"),
        "{acl}"
    );
    let pm = &ran["policy-map interface"];
    assert!(
        pm.contains("set dscp ef") && pm.contains("set dscp af41"),
        "{pm}"
    );
    let flows = &ran["flow cache"];
    assert!(
        flows.contains("Exported: ") && flows.contains("ef"),
        "{flows}"
    );
    let summary = &ran["ip route summary"];
    assert!(
        summary.contains("FPM 127.0.0.1:") && summary.contains("zebra not connected"),
        "{summary}"
    );
    let bp = &ran["backup-pairs"];
    assert!(bp.contains("Active"), "{bp}");
    let pc = &ran["port-channel"];
    assert!(
        pc.contains("LACP rx") && pc.contains("PDUs out") && pc.contains("po1: "),
        "{pc}"
    );

    // Start-up: one line per port, no `down` then `up`, the missing one named.
    let log = sw.log();
    assert!(!log.contains("down (link)"), "a fake flap at start:\n{log}");
    assert!(
        log.contains("port nosuch0: missing: no such interface"),
        "{log}"
    );
    assert!(log.contains("port sw1: up (ifindex"), "{log}");

    // A failover names its ports (the primary preempts once up).
    let active = |sw: &Switch| sw.show_json(&["show", "backup-pairs"])[0]["active"].clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    while active(&sw) != "sw6" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(active(&sw), "sw6");
    let before = sw
        .log()
        .matches("backup pair sw6 / sw7: sw7 now forwards")
        .count();
    t.exec(&["ip", "link", "set", "t6", "down"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let after = |sw: &Switch| {
        sw.log()
            .matches("backup pair sw6 / sw7: sw7 now forwards, sw6 stands by")
            .count()
    };
    while after(&sw) == before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(after(&sw) > before, "{}", sw.log());
    let o = sw.cli(&["show", "backup-pairs"]).unwrap();
    let bp = String::from_utf8_lossy(&o.stdout);
    let row = bp.lines().find(|l| l.starts_with("sw6")).unwrap_or("");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells.get(4), Some(&"sw7"), "Active column: {bp}");

    // `show mac address-table interface PORT` filters.
    let m = sw.show_json(&["show", "mac", "address-table", "interface", "sw2"]);
    let rows = m.as_array().unwrap();
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r["port"] == "sw2"),
        "{m}"
    );
    assert!(rows
        .iter()
        .any(|r| parse_mac(r["mac"].as_str().unwrap()) == Some(h2)));
    drop(sw.stop());
}

#[test]
fn help_and_errors_point_the_way() {
    // `lab` talks to no switch: no --socket there.
    let (ok, lab, _) = run(&["lab", "--help"]);
    assert!(ok && !lab.contains("--socket"), "{lab}");
    let (_, labrun, _) = run(&["lab", "run", "--help"]);
    assert!(
        labrun.contains("-q, --quiet") && labrun.contains("Print nothing"),
        "{labrun}"
    );
    let (_, runh, _) = run(&["run", "--help"]);
    assert!(runh.contains("Configuration file"), "{runh}");
    // Every help screen fits in 120 columns.
    for args in [
        vec!["help"],
        vec!["show", "--help"],
        vec!["clear", "--help"],
        vec!["config", "--help"],
        vec!["lab", "run", "--help"],
    ] {
        let (_, out, _) = run(&args);
        for l in out.lines() {
            assert!(l.chars().count() <= 120, "{args:?}: {l}");
        }
    }
    // A switch that is not there: say how to point at another one.
    let (ok, _, err) = run(&["--socket", "/nonexistent/x.sock", "show", "version"]);
    assert!(
        !ok && err.contains("--socket") && err.contains("LANYARD_SOCKET"),
        "{err}"
    );
    let (ok, _, err) = run(&["show", "version", "--socket", "/nonexistent/y.sock"]);
    assert!(!ok && err.contains("/nonexistent/y.sock"), "{err}");
    // The README and docs/cli.md list every command `lanyard help` lists.
    let (_, help, _) = run(&["help"]);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for doc in ["README.md", "docs/cli.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for syn in show_synopses(&help) {
            assert!(text.contains(&syn), "{doc} does not list `{syn}`");
        }
    }
    // Unknown commands suggest the close ones.
    let (ok, _, err) = run(&["show", "ip", "bogus"]);
    assert!(!ok && err.contains("show ip route"), "{err}");
}
