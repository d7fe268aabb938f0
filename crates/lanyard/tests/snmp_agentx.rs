//! Acceptance (issue 20): Debian `snmpd` with a private config and AgentX
//! socket, Lanyard as its AgentX subagent (`management.snmp`), and
//! `snmpwalk` listing every Lanyard port in IF-MIB `ifTable`/`ifXTable`
//! with the counters `show interfaces --json` gives, after known frames.
//!
//! Lanyard starts before snmpd (the subagent keeps retrying), and snmpd's
//! own IF-MIB stays loaded: Lanyard's registration must win on priority.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use testkit::frame::{mac, test_frame, Tag, BROADCAST};
use testkit::{l2, require_root, Netns, Switch, TestBed};

const YAML: &str = "vlans:\n  - id: 10\nports:\n  - name: sw1\n    mode: access\n    vlan: 10\n  - name: sw2\n    mode: access\n    vlan: 10\n";
const IF_TABLE: &str = ".1.3.6.1.2.1.2.2.1";
const IF_XTABLE: &str = ".1.3.6.1.2.1.31.1.1.1";

fn which(name: &str) -> Option<String> {
    ["/usr/bin", "/usr/sbin", "/usr/local/bin"]
        .iter()
        .map(|d| format!("{d}/{name}"))
        .find(|p| std::path::Path::new(p).exists())
}

/// `snmpwalk` of `oid` in `ns`: numeric OID (without `oid`'s prefix and
/// the leading dot) → value as printed (`-Oq`: no type, strings bare).
fn walk(ns: &Netns, port: u16, oid: &str) -> HashMap<String, String> {
    let out = ns
        .exec(&[
            "snmpwalk",
            "-v2c",
            "-c",
            "lanyardtest",
            "-On",
            "-Oq",
            "-Oe",
            "-t",
            "2",
            "-r",
            "1",
            &format!("udp:127.0.0.1:{port}"),
            oid,
        ])
        .expect("run snmpwalk");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            let k = k.strip_prefix(oid)?.trim_start_matches('.');
            Some((k.to_string(), v.trim().trim_matches('"').to_string()))
        })
        .collect()
}

#[test]
fn snmpwalk_lists_every_port_with_the_counters_show_gives() {
    require_root!();
    let (Some(snmpd), Some(_)) = (which("snmpd"), which("snmpwalk")) else {
        panic!("Debian `snmpd`/`snmp` are not installed (scripts/setup.sh)");
    };
    let bed = TestBed::new("snm", 2, 1500).expect("test bed");
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let dir = std::env::temp_dir().join(format!("lanyard-snmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("agentx.sock");
    let mgmt = format!("  snmp:\n    agentx-socket: {}\n", sock.display());
    let sw = Switch::start_managed(&bin, &bed.dut, YAML, &mgmt, &["sw1", "sw2"]).expect("start");

    // Known frames: 37 broadcasts forwarded sw1 -> sw2, 5 tagged frames the
    // access port drops (an ingress discard).
    let t1 = bed.open(1).expect("t1");
    let good: Vec<Vec<u8>> = (0..37)
        .map(|i| test_frame(&BROADCAST, &mac(1), &[], 1, i, 100))
        .collect();
    let bad: Vec<Vec<u8>> = (0..5)
        .map(|i| test_frame(&BROADCAST, &mac(1), &[Tag::dot1q(10)], 2, i, 100))
        .collect();
    l2::send_settled(&sw, &t1, "sw1", &good);
    l2::send_settled(&sw, &t1, "sw1", &bad);

    let port = 16100 + (std::process::id() % 800) as u16;
    let conf = dir.join("snmpd.conf");
    std::fs::write(
        &conf,
        format!(
            "agentAddress udp:127.0.0.1:{port}\nmaster agentx\nagentXSocket {}\nrwcommunity lanyardtest 127.0.0.1\n",
            sock.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("snmpd.log")).unwrap();
    let pid = bed
        .dut
        .spawn(
            &[
                "env",
                &format!("SNMP_PERSISTENT_DIR={}", dir.join("state").display()),
                &snmpd,
                "-f",
                "-C",
                "-c",
                conf.to_str().unwrap(),
                "-Le",
                "-p",
                dir.join("snmpd.pid").to_str().unwrap(),
            ],
            Stdio::null(),
            Stdio::from(log),
        )
        .expect("start snmpd");

    // The subagent reconnects within a second or two of snmpd starting.
    let t = Instant::now();
    let names = loop {
        let n = walk(&bed.dut, port, &format!("{IF_XTABLE}.1"));
        if n.values().any(|v| v == "sw1") && n.values().any(|v| v == "sw2") {
            break n;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "ifName never listed Lanyard's ports: {n:?}\nsnmpd: {}\nlanyard: {}",
            std::fs::read_to_string(dir.join("snmpd.log")).unwrap_or_default(),
            sw.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // Only Lanyard's ports: snmpd's own view of the host is shadowed.
    assert_eq!(names.len(), 2, "{names:?}");

    let show = sw.show_json(&["show", "interfaces"]);
    let counters = sw.counters();
    let table = walk(&bed.dut, port, IF_TABLE);
    let xtable = walk(&bed.dut, port, IF_XTABLE);
    let number = walk(&bed.dut, port, ".1.3.6.1.2.1.2.1");
    assert_eq!(number.get("0").map(String::as_str), Some("2"), "{number:?}");
    let ports = show.as_array().expect("show interfaces is a list");
    assert_eq!(ports.len(), 2);
    for p in ports {
        let name = p["name"].as_str().unwrap();
        let idx = (p["id"].as_u64().unwrap() + 1).to_string();
        let col = |t: &HashMap<String, String>, c: u32| {
            t.get(&format!("{c}.{idx}"))
                .cloned()
                .unwrap_or_else(|| panic!("column {c} of {name} (ifIndex {idx}) missing: {t:?}"))
        };
        let n = |k: &str| p[k].as_u64().unwrap().to_string();
        assert_eq!(col(&xtable, 1), name, "ifName");
        assert_eq!(col(&table, 2), name, "ifDescr");
        assert_eq!(col(&table, 1), idx, "ifIndex");
        assert_eq!(col(&table, 7), "1", "ifAdminStatus up");
        assert_eq!(col(&table, 8), "1", "ifOperStatus up");
        assert_eq!(col(&table, 4), n("mtu"), "ifMtu");
        // veth reports 10,000 Mbit/s through ethtool: ifSpeed at its
        // 32-bit ceiling, ifHighSpeed the real figure.
        let mbps = p["speed_mbps"].as_u64().unwrap_or(0);
        assert!(mbps > 0, "speed of {name}: {p}");
        assert_eq!(col(&xtable, 15), mbps.to_string(), "ifHighSpeed {name}");
        assert_eq!(
            col(&table, 5),
            (mbps * 1_000_000).min(u64::from(u32::MAX)).to_string(),
            "ifSpeed {name}"
        );
        assert_eq!(col(&xtable, 6), n("rx_bytes"), "ifHCInOctets {name}");
        assert_eq!(col(&xtable, 7), n("rx_frames"), "ifHCInUcastPkts {name}");
        assert_eq!(col(&xtable, 10), n("tx_bytes"), "ifHCOutOctets {name}");
        assert_eq!(col(&xtable, 11), n("tx_frames"), "ifHCOutUcastPkts {name}");
        assert_eq!(col(&table, 10), n("rx_bytes"), "ifInOctets {name}");
        assert_eq!(col(&table, 16), n("tx_bytes"), "ifOutOctets {name}");
        // Every drop `show interfaces` counts is in exactly one IF-MIB
        // drop column; socket errors are ifOutErrors.
        let sum: u64 = [13, 14, 15, 19, 20]
            .iter()
            .map(|c| col(&table, *c).parse::<u64>().unwrap())
            .sum();
        assert_eq!(
            sum,
            p["drops"].as_u64().unwrap() + p["port_errors"].as_u64().unwrap(),
            "drop columns of {name}"
        );
    }
    // The known frames, so the comparison above is not 0 == 0.
    let sw1 = &ports.iter().find(|p| p["name"] == "sw1").unwrap();
    assert!(sw1["rx_frames"].as_u64().unwrap() >= 42);
    assert!(sw1["rx_bytes"].as_u64().unwrap() >= 42 * 100);
    let sw1_idx = sw1["id"].as_u64().unwrap() + 1;
    assert_eq!(
        table.get(&format!("13.{sw1_idx}")).map(String::as_str),
        Some(
            counters["ports"][sw1["id"].as_u64().unwrap() as usize]["drops"]["tagged-on-access"]
                .as_u64()
                .unwrap()
                .to_string()
                .as_str()
        ),
        "tagged-on-access drops are ifInDiscards"
    );

    // Read-only: the community may write, so the set reaches the
    // subagent, which refuses it (notWritable).
    let set = bed.dut.exec(&[
        "snmpset",
        "-v2c",
        "-c",
        "lanyardtest",
        &format!("udp:127.0.0.1:{port}"),
        &format!("{IF_XTABLE}.18.1"),
        "s",
        "x",
    ]);
    match set {
        Ok(o) => panic!(
            "snmpset succeeded on a read-only MIB: {}",
            String::from_utf8_lossy(&o.stdout)
        ),
        Err(e) => assert!(e.to_string().contains("notWritable"), "{e}"),
    }

    let _ = bed.dut.exec(&["kill", &pid.to_string()]);
    let _ = bed.dut.wait_child(pid, Duration::from_secs(5));
    drop(sw);
    let _ = std::fs::remove_dir_all(&dir);
}
