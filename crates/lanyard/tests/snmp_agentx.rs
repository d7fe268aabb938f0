//! Acceptance (issue 20): Debian `snmpd` with a private config and AgentX
//! socket, Lanyard as its AgentX subagent (`management.snmp`), and
//! `snmpwalk` listing every Lanyard port in IF-MIB `ifTable`/`ifXTable`
//! with the counters `show interfaces --json` gives, after known frames.
//!
//! Lanyard starts before snmpd (the subagent keeps retrying), and snmpd's
//! own IF-MIB stays loaded: Lanyard's registration must win on priority.
//!
//! Then a port's link goes down and up (on the veth peer): a private
//! `snmptrapd`, snmpd's trap sink, must receive linkDown and linkUp
//! (RFC 2863) for that port's ifIndex, and ifLastChange must move to
//! snmpd's sysUpTime at the change. ifPhysAddress is the port's MAC.

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
            "-Ot",
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

const SNMP_TRAP_OID: &str = ".1.3.6.1.6.3.1.1.4.1.0";
const LINK_DOWN: &str = ".1.3.6.1.6.3.1.1.5.3";
const LINK_UP: &str = ".1.3.6.1.6.3.1.1.5.4";

/// `snmpwalk -Ox` of `oid`: index → octets in hex (`02 AB ...`).
fn walk_hex(ns: &Netns, port: u16, oid: &str) -> HashMap<String, String> {
    let out = ns
        .exec(&[
            "snmpwalk",
            "-v2c",
            "-c",
            "lanyardtest",
            "-m",
            "",
            "-On",
            "-Ox",
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
            let (k, v) = l.split_once(" = ")?;
            let k = k.strip_prefix(oid)?.trim_start_matches('.');
            let v = v.strip_prefix("Hex-STRING: ").unwrap_or(v);
            Some((k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// snmpd's sysUpTime.0 in 1/100 s.
fn uptime(ns: &Netns, port: u16) -> u64 {
    let out = ns
        .exec(&[
            "snmpget",
            "-v2c",
            "-c",
            "lanyardtest",
            "-m",
            "",
            "-On",
            "-Oq",
            "-Ot",
            &format!("udp:127.0.0.1:{port}"),
            ".1.3.6.1.2.1.1.3.0",
        ])
        .expect("run snmpget");
    let s = String::from_utf8_lossy(&out.stdout);
    s.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("sysUpTime: {s}"))
}

fn kernel_mac(ns: &Netns, name: &str) -> String {
    let out = ns
        .exec(&["cat", &format!("/sys/class/net/{name}/address")])
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The notifications snmptrapd logged (`-F 'TRAP %v'`): each a map of
/// numeric OID → value (without its type).
fn read_traps(log: &std::path::Path) -> Vec<HashMap<String, String>> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("TRAP "))
        .map(|l| {
            l.split('\t')
                .filter_map(|vb| {
                    let (k, v) = vb.split_once(" = ")?;
                    let v = v.split_once(": ").map_or(v, |(_, v)| v);
                    Some((k.trim().to_string(), v.trim().to_string()))
                })
                .collect()
        })
        .collect()
}

/// Waits (10 s) for the notification `trap` naming ifIndex `idx`.
fn wait_trap(log: &std::path::Path, trap: &str, idx: u64, sw: &Switch) -> HashMap<String, String> {
    let t = Instant::now();
    loop {
        let all = read_traps(log);
        if let Some(found) = all.iter().find(|v| {
            v.get(SNMP_TRAP_OID).map(String::as_str) == Some(trap)
                && v.get(&format!("{IF_TABLE}.1.{idx}")) == Some(&idx.to_string())
        }) {
            return found.clone();
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no {trap} for ifIndex {idx}: {all:?}\nlanyard: {}",
            sw.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn snmpwalk_lists_every_port_with_the_counters_show_gives() {
    require_root!();
    let (Some(snmpd), Some(_), Some(snmptrapd)) =
        (which("snmpd"), which("snmpwalk"), which("snmptrapd"))
    else {
        panic!("Debian `snmpd`/`snmp`/`snmptrapd` are not installed (scripts/setup.sh)");
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
    // And 11 to a group address, 7 to an unknown unicast one (flooded):
    // IF-MIB counts the three kinds apart.
    let group: Vec<Vec<u8>> = (0..11)
        .map(|i| test_frame(&[0x01, 0, 0x5e, 0, 0, 9], &mac(1), &[], 3, i, 100))
        .collect();
    let unicast: Vec<Vec<u8>> = (0..7)
        .map(|i| test_frame(&mac(0x77), &mac(1), &[], 4, i, 100))
        .collect();
    l2::send_settled(&sw, &t1, "sw1", &group);
    l2::send_settled(&sw, &t1, "sw1", &unicast);

    let port = 16100 + (std::process::id() % 800) as u16;
    let trap_port = port + 1000;
    // The trap receiver first, so it hears everything snmpd sends.
    let trapd_conf = dir.join("snmptrapd.conf");
    std::fs::write(&trapd_conf, "disableAuthorization yes\n").unwrap();
    let traps = dir.join("traps.log");
    let trapd = bed
        .dut
        .spawn(
            &[
                &snmptrapd,
                "-f",
                "-C",
                "-c",
                trapd_conf.to_str().unwrap(),
                "-m",
                "",
                "-On",
                "-Lf",
                traps.to_str().unwrap(),
                "-F",
                "TRAP %v\n",
                "-p",
                dir.join("snmptrapd.pid").to_str().unwrap(),
                &format!("udp:127.0.0.1:{trap_port}"),
            ],
            Stdio::null(),
            Stdio::null(),
        )
        .expect("start snmptrapd");
    let conf = dir.join("snmpd.conf");
    std::fs::write(
        &conf,
        format!(
            "agentAddress udp:127.0.0.1:{port}\nmaster agentx\nagentXSocket {}\nrwcommunity lanyardtest 127.0.0.1\ntrap2sink 127.0.0.1:{trap_port} lanyardtest\n",
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
    let phys = walk_hex(&bed.dut, port, &format!("{IF_TABLE}.6"));
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
        // No change since the subagent started.
        assert_eq!(col(&table, 9), "0", "ifLastChange {name}");
        assert_eq!(col(&xtable, 14), "1", "ifLinkUpDownTrapEnable {name}");
        // The MAC as six octets, the same as the kernel's.
        let mac = p["mac"].as_str().unwrap().to_string();
        assert_eq!(mac, kernel_mac(&bed.dut, name), "show interfaces mac");
        assert_eq!(
            phys.get(&idx).map(|h| h.to_lowercase()),
            Some(mac.replace(':', " ")),
            "ifPhysAddress {name}: {phys:?}"
        );
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
        let num = |k: &str| p[k].as_u64().unwrap();
        let ucast = |d: &str| {
            num(&format!("{d}_frames"))
                - num(&format!("{d}_multicast"))
                - num(&format!("{d}_broadcast"))
        };
        assert_eq!(col(&xtable, 6), n("rx_bytes"), "ifHCInOctets {name}");
        assert_eq!(
            col(&xtable, 7),
            ucast("rx").to_string(),
            "ifHCInUcastPkts {name}"
        );
        assert_eq!(
            col(&xtable, 8),
            n("rx_multicast"),
            "ifHCInMulticastPkts {name}"
        );
        assert_eq!(
            col(&xtable, 9),
            n("rx_broadcast"),
            "ifHCInBroadcastPkts {name}"
        );
        assert_eq!(col(&xtable, 10), n("tx_bytes"), "ifHCOutOctets {name}");
        assert_eq!(
            col(&xtable, 11),
            ucast("tx").to_string(),
            "ifHCOutUcastPkts {name}"
        );
        assert_eq!(
            col(&xtable, 12),
            n("tx_multicast"),
            "ifHCOutMulticastPkts {name}"
        );
        assert_eq!(
            col(&xtable, 13),
            n("tx_broadcast"),
            "ifHCOutBroadcastPkts {name}"
        );
        assert_eq!(
            col(&table, 11),
            ucast("rx").to_string(),
            "ifInUcastPkts {name}"
        );
        assert_eq!(
            col(&xtable, 2),
            n("rx_multicast"),
            "ifInMulticastPkts {name}"
        );
        assert_eq!(
            col(&xtable, 3),
            n("rx_broadcast"),
            "ifInBroadcastPkts {name}"
        );
        // What the test sent: sw1 received 42 broadcasts (5 of them
        // dropped as tagged on an access port), 11 multicasts and 7
        // unicasts; sw2 sent what was forwarded. The kernel may add its own.
        let (dir, bcast) = if name == "sw1" {
            ("rx", 42)
        } else {
            ("tx", 37)
        };
        assert!(
            num(&format!("{dir}_broadcast")) >= bcast,
            "{name} broadcasts: {p}"
        );
        assert!(
            num(&format!("{dir}_multicast")) >= 11,
            "{name} multicasts: {p}"
        );
        assert!(ucast(dir) >= 7, "{name} unicasts: {p}");
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

    // Link down, then up, on sw2's peer: one linkDown and one linkUp for
    // sw2's ifIndex, none for sw1; ifLastChange follows.
    let sw2_idx = ports.iter().find(|p| p["name"] == "sw2").unwrap()["id"]
        .as_u64()
        .unwrap()
        + 1;
    let before = uptime(&bed.dut, port);
    bed.tester
        .exec(&["ip", "link", "set", "t2", "down"])
        .unwrap();
    let down = wait_trap(&traps, LINK_DOWN, sw2_idx, &sw);
    assert_eq!(
        down.get(&format!("{IF_TABLE}.8.{sw2_idx}"))
            .map(String::as_str),
        Some("2"),
        "{down:?}"
    );
    assert_eq!(
        down.get(&format!("{IF_TABLE}.7.{sw2_idx}"))
            .map(String::as_str),
        Some("1"),
        "{down:?}"
    );
    let table = walk(&bed.dut, port, IF_TABLE);
    assert_eq!(
        table[&format!("8.{sw2_idx}")],
        "2",
        "ifOperStatus after down"
    );
    let changed: u64 = table[&format!("9.{sw2_idx}")].parse().unwrap();
    let after = uptime(&bed.dut, port);
    // In snmpd's clock: between the uptime read before the change and
    // after it (with the one-second poll and 1/100 s rounding).
    assert!(
        changed + 2 >= before && changed <= after + 2,
        "ifLastChange {changed} not within sysUpTime {before}..{after}"
    );
    assert_eq!(table[&format!("9.{sw1_idx}")], "0", "sw1 did not change");
    eprintln!("ifLastChange of sw2 at linkDown: {changed} (sysUpTime {before}..{after}); linkDown: {down:?}");
    std::thread::sleep(Duration::from_millis(1100));
    bed.tester.exec(&["ip", "link", "set", "t2", "up"]).unwrap();
    let up = wait_trap(&traps, LINK_UP, sw2_idx, &sw);
    assert_eq!(
        up.get(&format!("{IF_TABLE}.8.{sw2_idx}"))
            .map(String::as_str),
        Some("1"),
        "{up:?}"
    );
    let table = walk(&bed.dut, port, IF_TABLE);
    assert_eq!(table[&format!("8.{sw2_idx}")], "1", "ifOperStatus after up");
    let changed_up: u64 = table[&format!("9.{sw2_idx}")].parse().unwrap();
    assert!(
        changed_up >= changed + 100,
        "ifLastChange {changed} -> {changed_up}"
    );
    let all = read_traps(&traps);
    let link_traps: Vec<_> = all
        .iter()
        .filter(|t| {
            [LINK_DOWN, LINK_UP]
                .iter()
                .any(|o| t.get(SNMP_TRAP_OID).map(String::as_str) == Some(*o))
        })
        .collect();
    assert_eq!(link_traps.len(), 2, "exactly linkDown and linkUp: {all:?}");

    for p in [pid, trapd] {
        let _ = bed.dut.exec(&["kill", &p.to_string()]);
        let _ = bed.dut.wait_child(p, Duration::from_secs(5));
    }
    drop(sw);
    let _ = std::fs::remove_dir_all(&dir);
}
