//! Issue 16: port backends side by side. One switch with an AF_XDP port,
//! an AF_PACKET port and a TAP port forwards any-to-any (broadcast,
//! learned unicast, jumbo frames between AF_XDP and AF_PACKET); `show
//! interfaces` says which backend and mode each port runs; a forced
//! `af-xdp` port follows a link flap and an interface re-creation; and the
//! steering program is gone from the interface after the switch stops;
//! multi-queue veths get a socket per queue under `auto` and forward, and
//! an interface with more queues than the cap falls back to AF_PACKET.

use std::time::{Duration, Instant};

use io::{FrameBatch, Port, TapPort};
use testkit::frame::{mac, test_frame, BROADCAST};
use testkit::l2;
use testkit::netns::{ip, veth};
use testkit::{require_root, RawPort, Switch, TestBed};

const Q: Duration = Duration::from_millis(300);

/// The backend and mode `show interfaces --json` reports for `port`.
fn backend(sw: &Switch, port: &str) -> (String, String) {
    let v = sw.show_json(&["show", "interfaces"]);
    let r = v
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == port))
        .cloned()
        .unwrap_or_default();
    (
        r["backend"].as_str().unwrap_or("").to_string(),
        r["backend_mode"].as_str().unwrap_or("").to_string(),
    )
}

/// A test end: a tester veth socket or the TAP's file descriptor.
enum End<'a> {
    Raw(&'a RawPort),
    Tap(&'a std::cell::RefCell<TapPort>),
}

impl End<'_> {
    fn send(&self, frames: &[Vec<u8>]) {
        match self {
            End::Raw(r) => r.send_batch(frames).expect("send"),
            End::Tap(t) => {
                let mut t = t.borrow_mut();
                for f in frames {
                    assert!(t.send(f), "tap tx");
                }
                t.flush().expect("tap flush");
            }
        }
    }

    /// Test frames received until quiet for `Q`.
    fn recv(&self) -> Vec<Vec<u8>> {
        match self {
            End::Raw(r) => r.recv_test_frames(Q).expect("recv"),
            End::Tap(t) => {
                let mut t = t.borrow_mut();
                let mut out = Vec::new();
                let mut b = FrameBatch::new();
                let mut quiet = Instant::now();
                while quiet.elapsed() < Q {
                    b.clear();
                    if t.recv(&mut b, 0).expect("tap recv") > 0 {
                        quiet = Instant::now();
                    } else {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    for i in 0..b.len() {
                        let f = b.frame(i);
                        if f.len() >= 14 && f[12..14] == [0x88, 0xb5] {
                            out.push(f.to_vec());
                        }
                    }
                }
                out
            }
        }
    }

    fn drain(&self) {
        let _ = self.recv();
    }
}

#[test]
fn af_xdp_af_packet_and_tap_ports_forward_any_to_any() {
    require_root!();
    let bed = TestBed::new("pbk", 2, 9500).expect("namespaces");
    ip(&[
        "-n",
        bed.dut.name(),
        "tuntap",
        "add",
        "dev",
        "sw3",
        "mode",
        "tap",
    ])
    .expect("tuntap add");
    ip(&["-n", bed.dut.name(), "link", "set", "dev", "sw3", "up"]).expect("tap up");
    // The TAP's other end: a descriptor opened in the DUT namespace (its
    // carrier is up while one is open).
    let tap = bed
        .dut
        .run(|| TapPort::attach("sw3"))
        .expect("run in ns")
        .expect("open tap");
    let tap = std::cell::RefCell::new(tap);
    // Configured ring sizes (docs/scale.md): AF_XDP rounds down to a
    // power of two; the jumbo frames below still cross.
    let yaml =
        "switch:\n  name: backends\n  rx-ring: 1000\n  tx-ring: 100\nvlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n    backend: af-xdp\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n    backend: af-packet\n\
                \x20 - name: sw3\n    mode: access\n    vlan: 10\n    mtu: 1500\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let mut f = Vec::new();
    let b1 = backend(&sw, "sw1");
    if b1.0 != "af-xdp" || !b1.1.starts_with("native/") {
        f.push(format!("sw1 backend {b1:?}, expected af-xdp native/…"));
    }
    for p in ["sw2", "sw3"] {
        let b = backend(&sw, p);
        if b.0 != "af-packet" {
            f.push(format!("{p} backend {b:?}, expected af-packet"));
        }
    }
    let v = sw.show_json(&["show", "interfaces"]);
    for r in v.as_array().map(Vec::as_slice).unwrap_or_default() {
        let rings = (r["rx_ring"].as_u64(), r["tx_ring"].as_u64());
        let want = match r["backend"].as_str() {
            Some("af-xdp") => (Some(512), Some(64)),
            _ => (Some(1000), Some(100)),
        };
        if rings != want {
            f.push(format!(
                "{}: rings {rings:?}, configured {want:?}",
                r["name"]
            ));
        }
    }
    let text = sw.cli(&["show", "interfaces"]).expect("cli");
    let text = String::from_utf8_lossy(&text.stdout);
    if !text.contains("af-xdp native/copy") {
        f.push(format!("show interfaces lacks the backend column:\n{text}"));
    }

    let t1 = bed.open(1).expect("t1");
    let t2 = bed.open(2).expect("t2");
    let ends = [End::Raw(&t1), End::Raw(&t2), End::Tap(&tap)];
    let names = ["t1 (af-xdp)", "t2 (af-packet)", "tap"];
    for e in &ends {
        e.drain();
    }
    // Broadcasts from each end reach both others (and teach the switch
    // each end's address).
    for (i, from) in ends.iter().enumerate() {
        let frames: Vec<Vec<u8>> = (0..20)
            .map(|s| test_frame(&BROADCAST, &mac(i as u32 + 1), &[], 1, s, 100))
            .collect();
        from.send(&frames);
        for (j, to) in ends.iter().enumerate() {
            if j == i {
                continue;
            }
            let n = to.recv().len();
            if n != 20 {
                f.push(format!("broadcast {} -> {}: {n} of 20", names[i], names[j]));
            }
        }
    }
    // Learned unicast between every pair, delivered to that end only.
    for (i, from) in ends.iter().enumerate() {
        for (j, to) in ends.iter().enumerate() {
            if i == j {
                continue;
            }
            let frames: Vec<Vec<u8>> = (0..50)
                .map(|s| test_frame(&mac(j as u32 + 1), &mac(i as u32 + 1), &[], 2, s, 64))
                .collect();
            from.send(&frames);
            let got = to.recv();
            if got != frames {
                f.push(format!(
                    "unicast {} -> {}: {} of 50 (in order and intact: {})",
                    names[i],
                    names[j],
                    got.len(),
                    got == frames
                ));
            }
            let k = 3 - i - j;
            let stray = ends[k].recv().len();
            if stray != 0 {
                f.push(format!(
                    "unicast {} -> {} also reached {}: {stray}",
                    names[i], names[j], names[k]
                ));
            }
        }
    }
    // Jumbo frames between the AF_XDP and the AF_PACKET port (multi-buffer
    // XDP on the AF_XDP side).
    for (i, j) in [(0usize, 1usize), (1, 0)] {
        let frames: Vec<Vec<u8>> = [1500usize, 4000, 9000, 9216]
            .iter()
            .enumerate()
            .map(|(s, &len)| {
                test_frame(
                    &mac(j as u32 + 1),
                    &mac(i as u32 + 1),
                    &[],
                    3,
                    s as u64,
                    len,
                )
            })
            .collect();
        ends[i].send(&frames);
        let got = ends[j].recv();
        if got != frames {
            f.push(format!(
                "jumbo {} -> {}: lengths {:?}, expected [1500, 4000, 9000, 9216]",
                names[i],
                names[j],
                got.iter().map(|g| g.len()).collect::<Vec<_>>()
            ));
        }
    }
    assert!(f.is_empty(), "{} failure(s):\n{}", f.len(), f.join("\n"));
}

/// Whether any XDP program is attached to `dev` in namespace `ns`.
fn xdp_attached(ns: &str, dev: &str) -> bool {
    let o = ip(&["-n", ns, "link", "show", "dev", dev]).expect("ip link show");
    let s = String::from_utf8_lossy(&o.stdout);
    s.contains("xdp") || s.contains("prog/xdp")
}

#[test]
fn forced_af_xdp_port_follows_flap_and_recreation_and_leaves_nothing() {
    require_root!();
    let bed = TestBed::new("pbf", 2, 9500).expect("namespaces");
    let yaml =
        "switch:\n  name: backends-flap\n  port-backend: af-xdp\nvlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n";
    let mut sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let dut = bed.dut.name().to_string();
    let mut f = Vec::new();
    for p in ["sw1", "sw2"] {
        if backend(&sw, p).0 != "af-xdp" {
            f.push(format!("{p}: backend {:?}", backend(&sw, p)));
        }
        if !xdp_attached(&dut, p) {
            f.push(format!("{p}: no XDP program attached"));
        }
    }
    let t1 = bed.open(1).expect("t1");
    let mut t2 = bed.open(2).expect("t2");
    let pass = |from: &RawPort, to: &RawPort, phase: u32| -> usize {
        let t = Instant::now();
        loop {
            to.drain();
            let frames: Vec<Vec<u8>> = (0..10)
                .map(|s| test_frame(&BROADCAST, &mac(9), &[], phase, s, 64))
                .collect();
            from.send_batch(&frames).expect("send");
            let n = to.recv_test_frames(Q).expect("recv").len();
            if n == 10 || t.elapsed() > Duration::from_secs(5) {
                return n;
            }
        }
    };
    let n = pass(&t1, &t2, 1);
    if n != 10 {
        f.push(format!("baseline: {n} of 10"));
    }
    // Link flap.
    ip(&["-n", &dut, "link", "set", "dev", "sw2", "down"]).unwrap();
    sw.wait_port_state("sw2", "down", Duration::from_secs(10));
    ip(&["-n", &dut, "link", "set", "dev", "sw2", "up"]).unwrap();
    if sw
        .wait_port_state("sw2", "up", Duration::from_secs(20))
        .as_deref()
        != Some("up")
    {
        f.push("sw2 not up after the flap".into());
    }
    for (a, b, ph, what) in [(&t1, &t2, 2, "t1->t2"), (&t2, &t1, 3, "t2->t1")] {
        let n = pass(a, b, ph);
        if n != 10 {
            f.push(format!("after flap {what}: {n} of 10"));
        }
    }
    // Interface deleted and re-created.
    ip(&["-n", &dut, "link", "del", "dev", "sw2"]).unwrap();
    sw.wait_port_state("sw2", "missing", Duration::from_secs(10));
    veth(&bed.tester, "t2", &bed.dut, "sw2", 9500).unwrap();
    if sw
        .wait_port_state("sw2", "up", Duration::from_secs(20))
        .as_deref()
        != Some("up")
    {
        f.push("sw2 not up after re-creation".into());
    }
    if backend(&sw, "sw2").0 != "af-xdp" || !xdp_attached(&dut, "sw2") {
        f.push(format!(
            "re-created sw2: backend {:?}, program attached {}",
            backend(&sw, "sw2"),
            xdp_attached(&dut, "sw2")
        ));
    }
    t2 = bed.open(2).expect("t2 again");
    for (a, b, ph, what) in [(&t1, &t2, 4, "t1->t2"), (&t2, &t1, 5, "t2->t1")] {
        let n = pass(a, b, ph);
        if n != 10 {
            f.push(format!("after re-creation {what}: {n} of 10"));
        }
    }
    sw.stop().expect("stop");
    for p in ["sw1", "sw2"] {
        if xdp_attached(&dut, p) {
            f.push(format!("{p}: XDP program left after the switch stopped"));
        }
    }
    assert!(f.is_empty(), "{} failure(s):\n{}", f.len(), f.join("\n"));
}

#[test]
fn auto_falls_back_to_af_packet_with_a_log_line_and_af_xdp_says_why() {
    require_root!();
    // Two ports on veths with 17 receive queues each: the AF_XDP backend
    // binds a socket per queue, at most 16 (`io::af_xdp::MAX_QUEUES`), and
    // refuses such an interface, so `auto` falls back (logged) and
    // `af-xdp` reports the reason.
    let tester = testkit::Netns::new("pbq-t").expect("ns");
    let dut = testkit::Netns::new("pbq-d").expect("ns");
    for i in 1..=2 {
        ip(&[
            "-n",
            dut.name(),
            "link",
            "add",
            "name",
            &format!("sw{i}"),
            "mtu",
            "9216",
            "numrxqueues",
            "17",
            "numtxqueues",
            "17",
            "type",
            "veth",
            "peer",
            "name",
            &format!("t{i}"),
            "mtu",
            "9216",
            "netns",
            tester.name(),
        ])
        .expect("veth with 17 queues");
        dut.link_up(&format!("sw{i}"), None).unwrap();
        tester.link_up(&format!("t{i}"), None).unwrap();
    }
    let yaml = "switch:\n  name: backends-fallback\nvlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n    backend: auto\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n    backend: af-xdp\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &dut,
        yaml,
        &["sw1"],
    )
    .expect("start lanyard");
    let mut f = Vec::new();
    let b = backend(&sw, "sw1");
    if b.0 != "af-packet" {
        f.push(format!(
            "sw1 (auto, 17 queues): backend {b:?}, expected af-packet"
        ));
    }
    let log = sw.log();
    if !log.contains("port sw1: AF_XDP did not attach") || !log.contains("receive queues") {
        f.push(format!("no fallback line for sw1 in the log:\n{log}"));
    }
    let v = sw.show_json(&["show", "interfaces"]);
    let sw2 = v
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == "sw2"))
        .cloned()
        .unwrap_or_default();
    let err = sw2["error"].as_str().unwrap_or("");
    if sw2["state"] != "missing" || !err.contains("AF_XDP") || !err.contains("receive queues") {
        f.push(format!("sw2 (af-xdp, 17 queues): {sw2}"));
    }
    // The fallen-back port forwards: sw1 floods to nobody else that is up,
    // so check its receive counter instead.
    let t1 = RawPort::open(tester.name(), "t1").expect("t1");
    let frames: Vec<Vec<u8>> = (0..10)
        .map(|s| test_frame(&BROADCAST, &mac(1), &[], 1, s, 64))
        .collect();
    t1.send_batch(&frames).expect("send");
    let t = Instant::now();
    let mut rx = 0;
    while t.elapsed() < Duration::from_secs(3) {
        rx = testkit::switch::port_counter(&sw.counters(), "sw1", "rx_frames");
        if rx >= 10 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if rx < 10 {
        f.push(format!("sw1 on AF_PACKET received {rx} of 10"));
    }
    assert!(f.is_empty(), "{} failure(s):\n{}", f.len(), f.join("\n"));
}

/// An IPv4/UDP frame `src` → `dst` from UDP port `sport`, carrying `seq`:
/// the tester's flow hash picks the veth queue, so ports spread frames
/// over the switch port's receive queues.
fn udp_frame(dst: &[u8; 6], src: &[u8; 6], seq: u32, sport: u16) -> Vec<u8> {
    let mut v = vec![0u8; 64];
    v[0..6].copy_from_slice(dst);
    v[6..12].copy_from_slice(src);
    v[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut v[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&50u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 9, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 9, 0, 2]);
    let mut sum = 0u32;
    for w in ip.chunks(2) {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    v[34..36].copy_from_slice(&sport.to_be_bytes());
    v[36..38].copy_from_slice(&9999u16.to_be_bytes());
    v[38..40].copy_from_slice(&30u16.to_be_bytes());
    v[42..46].copy_from_slice(&seq.to_be_bytes());
    v
}

/// Sequence numbers of the UDP test frames `r` receives until quiet.
fn recv_udp(r: &RawPort) -> std::collections::BTreeSet<u32> {
    let mut seen = std::collections::BTreeSet::new();
    while let Ok(Some(f)) = r.recv_timeout(Q) {
        if f.len() >= 46 && f[12..14] == [0x08, 0x00] && f[36..38] == [0x27, 0x0f] {
            seen.insert(u32::from_be_bytes([f[42], f[43], f[44], f[45]]));
        }
    }
    seen
}

/// Frames the veth `dev` in `ns` received per queue through XDP
/// (`ethtool -S`: `rx_queue_N_xdp_packets`).
fn xdp_queue_packets(ns: &str, dev: &str) -> Vec<u64> {
    let o = ip(&["netns", "exec", ns, "ethtool", "-S", dev]).map(|o| o.stdout);
    let text = String::from_utf8_lossy(o.as_deref().unwrap_or_default()).to_string();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            (k.starts_with("rx_queue_") && k.ends_with("_xdp_packets"))
                .then(|| v.trim().parse().ok())?
        })
        .collect()
}

/// `auto` picks AF_XDP on veths with four receive queues (a socket on
/// each), and frames of many flows, spread over the queues, cross both
/// ways.
#[test]
fn auto_picks_af_xdp_on_multi_queue_veths_and_forwards_both_ways() {
    require_root!();
    let mut bed = TestBed::new("pbm", 0, 1500).expect("namespaces");
    bed.cable_multi_queue(2, 4).expect("4-queue veths");
    // `auto` named: this test is about what it picks, also when the
    // suite runs on another backend (LANYARD_TEST_BACKEND).
    let yaml = "switch:\n  name: backends-mq\n  port-backend: auto\nvlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let mut f = Vec::new();
    for p in ["sw1", "sw2"] {
        let b = backend(&sw, p);
        if b.0 != "af-xdp" || !b.1.ends_with(" 4 queues") {
            f.push(format!("{p} backend {b:?}, expected af-xdp …/… 4 queues"));
        }
    }
    let text = sw.cli(&["show", "interfaces"]).expect("cli");
    let text = String::from_utf8_lossy(&text.stdout);
    if !text.contains("af-xdp native/copy 4 queues") {
        f.push(format!("show interfaces does not say the queues:\n{text}"));
    }
    let t = [bed.open(1).expect("t1"), bed.open(2).expect("t2")];
    for r in &t {
        r.drain();
    }
    for (i, j) in [(0usize, 1usize), (1, 0)] {
        let before = xdp_queue_packets(bed.dut.name(), &format!("sw{}", i + 1));
        let frames: Vec<Vec<u8>> = (0..200u32)
            .map(|s| udp_frame(&mac(j as u32 + 1), &mac(i as u32 + 1), s, 2000 + s as u16))
            .collect();
        t[i].send_batch(&frames).expect("send");
        let got = recv_udp(&t[j]);
        if got.len() != frames.len() {
            f.push(format!("t{} -> t{}: {} of 200", i + 1, j + 1, got.len()));
        }
        let after = xdp_queue_packets(bed.dut.name(), &format!("sw{}", i + 1));
        let used = after
            .iter()
            .zip(before.iter().chain(std::iter::repeat(&0)))
            .filter(|(a, b)| a > b)
            .count();
        if used < 2 {
            f.push(format!(
                "sw{}: frames on one receive queue only (XDP per queue {before:?} -> {after:?})",
                i + 1
            ));
        }
    }
    assert!(f.is_empty(), "{} failure(s):\n{}", f.len(), f.join("\n"));
}
