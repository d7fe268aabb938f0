//! Acceptance (issue 2): VLAN isolation, trunk tagging and native VLAN on
//! the wire, 802.1ad (Q-in-Q) tunnelling with customer tags intact.
//!
//! Every check compares whole frames byte for byte with what the tester
//! expects; tagging is also checked independently with tcpdump + tshark
//! when both are installed.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use testkit::frame::{hex, mac, mac_in, test_frame, Mac, Tag, BROADCAST};
use testkit::l2;
use testkit::switch::port_counter;
use testkit::{require_root, Netns, RawPort, Switch, TestBed};

const LEN: usize = 100;
const Q: Duration = Duration::from_millis(300);

fn start(prefix: &str, yaml: &str, n: usize) -> (TestBed, Switch, Vec<RawPort>) {
    let bed = TestBed::new(prefix, n, 9500).expect("create namespaces and veths");
    let names = bed.dut_ports();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &names,
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("open tester sockets");
    (bed, sw, ports)
}

/// Sends `frames` from port index `from` and returns, per port, the test
/// frames received until the wires are quiet.
fn exchange(sw: &Switch, ports: &[RawPort], from: usize, frames: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
    l2::send_settled(sw, &ports[from], &format!("sw{}", from + 1), frames);
    ports
        .iter()
        .map(|p| p.recv_test_frames(Q).expect("recv"))
        .collect()
}

/// Checks that port `t<i+1>` received exactly `want` (in order), and every
/// other port in `silent` nothing. Collects failures.
fn expect(
    failures: &mut Vec<String>,
    step: &str,
    got: &[Vec<Vec<u8>>],
    port: usize,
    want: &[Vec<u8>],
) {
    let g = &got[port];
    if g.len() != want.len() {
        failures.push(format!(
            "{step}: t{} received {} frames, expected {}{}",
            port + 1,
            g.len(),
            want.len(),
            g.first()
                .map(|f| format!("; first: {}", hex(f, 24)))
                .unwrap_or_default()
        ));
        return;
    }
    for (k, (a, b)) in g.iter().zip(want).enumerate() {
        if a != b {
            failures.push(format!(
                "{step}: t{} frame {k} differs:\n  got  {}\n  want {}",
                port + 1,
                hex(a, 24),
                hex(b, 24)
            ));
            return;
        }
    }
}

fn expect_none(failures: &mut Vec<String>, step: &str, got: &[Vec<Vec<u8>>], ports: &[usize]) {
    for &p in ports {
        if !got[p].is_empty() {
            failures.push(format!(
                "{step}: t{} received {} frames, expected none; first: {}",
                p + 1,
                got[p].len(),
                hex(&got[p][0], 24)
            ));
        }
    }
}

fn frames(dsts: &[Mac], src: &Mac, tags: &[Tag], phase: u32, len: usize) -> Vec<Vec<u8>> {
    dsts.iter()
        .enumerate()
        .map(|(i, d)| test_frame(d, src, tags, phase, i as u64, len))
        .collect()
}

fn finish(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Destinations covering broadcast, unknown unicast, IPv4 and IPv6
/// multicast, plus `extra`.
fn mixed_dsts(extra: &[Mac]) -> Vec<Mac> {
    let mut v = Vec::new();
    for i in 0..5u8 {
        v.push(BROADCAST);
        v.push(mac_in(0x55, u32::from(i)));
        v.push([0x01, 0x00, 0x5e, 0x00, 0x00, i + 1]);
        v.push([0x33, 0x33, 0x00, 0x00, 0x00, i + 1]);
    }
    v.extend_from_slice(extra);
    v
}

#[test]
fn vlan_isolation() {
    require_root!();
    let t0 = Instant::now();
    let yaml = "switch:\n  name: l2-isolation\nvlans:\n  - id: 10\n  - id: 20\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n\
                \x20 - name: sw3\n    mode: access\n    vlan: 20\n\
                \x20 - name: sw4\n    mode: access\n    vlan: 20\n\
                \x20 - name: sw5\n    mode: trunk\n    allowed-vlans: \"10\"\n    native-vlan: none\n";
    let (_bed, sw, ports) = start("iso", yaml, 5);
    let mut f = Vec::new();
    let (m10, m20) = (mac(10), mac(20));

    // A: learn m20 on sw3 (VLAN 20).
    let a = frames(&[BROADCAST], &m20, &[], 20, LEN);
    let got = exchange(&sw, &ports, 2, &a);
    expect(&mut f, "A: broadcast in VLAN 20", &got, 3, &a);
    expect_none(&mut f, "A: broadcast in VLAN 20", &got, &[0, 1, 4]);

    // B: VLAN 10 traffic of every kind, including to m20 (known only in VLAN 20).
    let b = frames(&mixed_dsts(&[m20, m20]), &m10, &[], 10, LEN);
    let got = exchange(&sw, &ports, 0, &b);
    expect(&mut f, "B: VLAN 10 flood", &got, 1, &b);
    let b_tagged = frames(
        &mixed_dsts(&[m20, m20]),
        &m10,
        &[Tag::dot1q(10)],
        10,
        LEN + 4,
    );
    expect(&mut f, "B: VLAN 10 on trunk", &got, 4, &b_tagged);
    expect_none(&mut f, "B: VLAN 10 traffic", &got, &[2, 3]);

    // C: VLAN 20 traffic, including to m10 (known only in VLAN 10).
    let c = frames(&mixed_dsts(&[m10, m10]), &mac(21), &[], 20, LEN);
    let got = exchange(&sw, &ports, 3, &c);
    expect(&mut f, "C: VLAN 20 flood", &got, 2, &c);
    expect_none(
        &mut f,
        "C: VLAN 20 traffic (trunk allows only 10)",
        &got,
        &[0, 1, 4],
    );

    // D: tagged VLAN 10 from the trunk reaches only VLAN 10 access ports.
    let d = frames(
        &[BROADCAST, BROADCAST, m10],
        &mac(30),
        &[Tag::dot1q(10)],
        11,
        LEN + 4,
    );
    let got = exchange(&sw, &ports, 4, &d);
    let d_untagged = frames(&[BROADCAST, BROADCAST, m10], &mac(30), &[], 11, LEN);
    expect(&mut f, "D: trunk VLAN 10 → sw1", &got, 0, &d_untagged);
    expect(&mut f, "D: trunk VLAN 10 → sw2", &got, 1, &d_untagged[..2]);
    expect_none(&mut f, "D: trunk VLAN 10", &got, &[2, 3]);

    eprintln!("vlan_isolation: {:?}", t0.elapsed());
    finish(f);
}

/// A running `tcpdump -w` in a namespace.
struct Tcpdump {
    pid: u32,
    file: PathBuf,
    log: PathBuf,
}

fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Starts tcpdump on `ifname` in `ns`, for `count` frames; waits until it
/// listens. `None` if tcpdump or tshark is missing.
fn tcpdump_start(ns: &Netns, ifname: &str, count: usize) -> Option<Tcpdump> {
    if !have("tcpdump") || !have("tshark") {
        eprintln!("tcpdump/tshark not installed: skipping the independent tag check");
        return None;
    }
    let dir = std::env::temp_dir();
    let file = dir.join(format!(
        "lanyard-{}-{}-{ifname}.pcap",
        ns.name(),
        std::process::id()
    ));
    let log = dir.join(format!(
        "lanyard-{}-{}-{ifname}.tcpdump",
        ns.name(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&file);
    let logf = std::fs::File::create(&log).ok()?;
    let pid = ns
        .spawn(
            &[
                "tcpdump",
                "-i",
                ifname,
                "-n",
                "-U",
                "-Z",
                "root",
                "-c",
                &count.to_string(),
                "-w",
                file.to_str()?,
                "ether proto 0x88b5 or vlan or ether proto 0x88a8",
            ],
            Stdio::null(),
            Stdio::from(logf),
        )
        .expect("spawn tcpdump");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("listening on")
        {
            std::thread::sleep(Duration::from_millis(200));
            return Some(Tcpdump { pid, file, log });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "tcpdump did not start: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// Waits for tcpdump to finish and returns `tshark -T fields` lines
/// `eth.type|ieee8021ad.id|vlan.id|vlan.etype` for each captured frame.
fn tcpdump_fields(ns: &Netns, t: Tcpdump) -> Vec<String> {
    let st = ns
        .wait_child(t.pid, Duration::from_secs(5))
        .expect("wait tcpdump");
    assert!(
        st.is_some(),
        "tcpdump did not capture the expected number of frames: {}",
        std::fs::read_to_string(&t.log).unwrap_or_default()
    );
    let out = std::process::Command::new("tshark")
        .args([
            "-r",
            t.file.to_str().unwrap(),
            "-T",
            "fields",
            "-E",
            "separator=|",
        ])
        .args([
            "-e",
            "eth.type",
            "-e",
            "ieee8021ad.id",
            "-e",
            "vlan.id",
            "-e",
            "vlan.etype",
        ])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(&t.file);
    let _ = std::fs::remove_file(&t.log);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn trunk_tagging_and_native_vlan() {
    require_root!();
    let t0 = Instant::now();
    let yaml = "switch:\n  name: l2-trunk\nvlans:\n  - id: 10\n  - id: 20\n  - id: 30\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 20\n\
                \x20 - name: sw3\n    mode: trunk\n    allowed-vlans: \"1,10,20\"\n    native-vlan: 1\n\
                \x20 - name: sw4\n    mode: access\n    vlan: 1\n\
                \x20 - name: sw5\n    mode: access\n    vlan: 30\n";
    let (bed, sw, ports) = start("trk", yaml, 5);
    let mut f = Vec::new();
    let m1 = mac(1);

    let dump = tcpdump_start(&bed.tester, "t3", 2);

    // a: access VLAN 10 → trunk tagged 0x8100 VID 10.
    let a = frames(&[BROADCAST], &m1, &[], 1, LEN);
    let got = exchange(&sw, &ports, 0, &a);
    expect(
        &mut f,
        "a: access 10 → trunk",
        &got,
        2,
        &frames(&[BROADCAST], &m1, &[Tag::dot1q(10)], 1, LEN + 4),
    );
    expect_none(&mut f, "a: access 10 broadcast", &got, &[1, 3, 4]);

    // b: native VLAN 1 → trunk untagged.
    let b = frames(&[BROADCAST], &mac(4), &[], 2, LEN);
    let got = exchange(&sw, &ports, 3, &b);
    expect(&mut f, "b: native VLAN → trunk untagged", &got, 2, &b);
    expect_none(&mut f, "b: native VLAN broadcast", &got, &[0, 1, 4]);

    if let Some(t) = dump {
        let lines = tcpdump_fields(&bed.tester, t);
        let want = vec!["0x8100||10|0x88b5".to_string(), "0x88b5|||".to_string()];
        if lines != want {
            f.push(format!(
                "tshark on t3: got {lines:?}, expected {want:?} (eth.type|ieee8021ad.id|vlan.id|vlan.etype)"
            ));
        }
    }

    // c: tagged VID 20 into the trunk → access VLAN 20 untagged.
    let c = frames(&[BROADCAST], &mac(3), &[Tag::dot1q(20)], 3, LEN + 4);
    let got = exchange(&sw, &ports, 2, &c);
    expect(
        &mut f,
        "c: trunk VID 20 → access 20",
        &got,
        1,
        &frames(&[BROADCAST], &mac(3), &[], 3, LEN),
    );
    expect_none(&mut f, "c: trunk VID 20", &got, &[0, 3, 4]);

    // d: untagged into the trunk → native VLAN 1.
    let d = frames(&[BROADCAST], &mac(5), &[], 4, LEN);
    let got = exchange(&sw, &ports, 2, &d);
    expect(&mut f, "d: trunk untagged → VLAN 1", &got, 3, &d);
    expect_none(&mut f, "d: trunk untagged", &got, &[0, 1, 4]);

    // e: VID 30 is configured but not allowed on the trunk → dropped.
    let before = port_counter(&sw.counters(), "sw3", "drops.vlan-not-allowed");
    let e = frames(&[BROADCAST; 7], &mac(6), &[Tag::dot1q(30)], 5, LEN + 4);
    let got = exchange(&sw, &ports, 2, &e);
    expect_none(&mut f, "e: trunk VID 30 (not allowed)", &got, &[0, 1, 3, 4]);
    let after = port_counter(&sw.counters(), "sw3", "drops.vlan-not-allowed");
    if after - before != 7 {
        f.push(format!(
            "e: sw3 drops.vlan-not-allowed grew by {}, expected 7",
            after - before
        ));
    }

    // f: tagged VID 10 unicast to m1 (learned on sw1 in step a) → sw1 only.
    let uf = frames(&[m1, m1, m1], &mac(7), &[Tag::dot1q(10)], 6, LEN + 4);
    let got = exchange(&sw, &ports, 2, &uf);
    expect(
        &mut f,
        "f: trunk VID 10 → known m1",
        &got,
        0,
        &frames(&[m1, m1, m1], &mac(7), &[], 6, LEN),
    );
    expect_none(&mut f, "f: known unicast", &got, &[1, 3, 4]);

    eprintln!("trunk_tagging_and_native_vlan: {:?}", t0.elapsed());
    finish(f);
}

#[test]
fn qinq_tunnel_keeps_customer_tags() {
    require_root!();
    let t0 = Instant::now();
    let yaml = "switch:\n  name: l2-qinq\nvlans:\n  - id: 500\n  - id: 600\nports:\n\
                \x20 - name: sw1\n    mode: dot1q-tunnel\n    vlan: 500\n\
                \x20 - name: sw2\n    mode: trunk\n    tpid: 0x88a8\n    allowed-vlans: [500]\n    native-vlan: none\n\
                \x20 - name: sw3\n    mode: dot1q-tunnel\n    vlan: 500\n";
    let (bed, sw, ports) = start("qnq", yaml, 3);
    let mut f = Vec::new();
    let m1 = mac(1);
    let c100 = Tag::dot1q(100);
    let s500 = Tag::dot1ad(500);

    let dump = tcpdump_start(&bed.tester, "t2", 1);
    // a: C-tagged customer frame → 802.1ad trunk: S-tag pushed in front.
    let a = frames(&[BROADCAST], &m1, &[c100], 1, LEN + 4);
    let got = exchange(&sw, &ports, 0, &a);
    expect(
        &mut f,
        "a: C-tag 100 → 88a8 trunk",
        &got,
        1,
        &frames(&[BROADCAST], &m1, &[s500, c100], 1, LEN + 8),
    );
    expect(&mut f, "a: C-tag 100 → other tunnel port", &got, 2, &a);
    if let Some(t) = dump {
        let lines = tcpdump_fields(&bed.tester, t);
        let want = vec!["0x88a8|500|100|0x88b5".to_string()];
        if lines != want {
            f.push(format!(
                "tshark on t2: got {lines:?}, expected {want:?} (eth.type|ieee8021ad.id|vlan.id|vlan.etype)"
            ));
        }
    }

    // b: untagged customer frame → only the S-tag.
    let b = frames(&[BROADCAST], &m1, &[], 2, LEN);
    let got = exchange(&sw, &ports, 0, &b);
    expect(
        &mut f,
        "b: untagged → 88a8 trunk",
        &got,
        1,
        &frames(&[BROADCAST], &m1, &[s500], 2, LEN + 4),
    );
    expect(&mut f, "b: untagged → other tunnel port", &got, 2, &b);

    // c: reverse direction, to m1 (learned on sw1): only the S-tag is removed.
    let c = frames(&[m1, m1], &mac(2), &[s500, c100], 3, LEN + 8);
    let got = exchange(&sw, &ports, 1, &c);
    expect(
        &mut f,
        "c: 88a8/500+8100/100 → tunnel port",
        &got,
        0,
        &frames(&[m1, m1], &mac(2), &[c100], 3, LEN + 4),
    );
    expect_none(&mut f, "c: known unicast", &got, &[2]);

    // d: S-VID 600 is not allowed on the trunk; e: untagged with native none.
    let cn = sw.counters();
    let (na0, un0) = (
        port_counter(&cn, "sw2", "drops.vlan-not-allowed"),
        port_counter(&cn, "sw2", "drops.untagged-not-allowed"),
    );
    let d = frames(
        &[BROADCAST; 3],
        &mac(3),
        &[Tag::dot1ad(600), c100],
        4,
        LEN + 8,
    );
    let got = exchange(&sw, &ports, 1, &d);
    expect_none(&mut f, "d: S-VID 600", &got, &[0, 2]);
    let e = frames(&[BROADCAST; 4], &mac(3), &[], 5, LEN);
    let got = exchange(&sw, &ports, 1, &e);
    expect_none(&mut f, "e: untagged on native-none trunk", &got, &[0, 2]);
    let cn = sw.counters();
    let (na1, un1) = (
        port_counter(&cn, "sw2", "drops.vlan-not-allowed"),
        port_counter(&cn, "sw2", "drops.untagged-not-allowed"),
    );
    if na1 - na0 != 3 {
        f.push(format!(
            "d: sw2 drops.vlan-not-allowed grew by {}, expected 3",
            na1 - na0
        ));
    }
    if un1 - un0 != 4 {
        f.push(format!(
            "e: sw2 drops.untagged-not-allowed grew by {}, expected 4",
            un1 - un0
        ));
    }
    eprintln!("qinq_tunnel_keeps_customer_tags: {:?}", t0.elapsed());
    finish(f);
}
