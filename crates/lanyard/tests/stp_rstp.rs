//! Rapid Spanning Tree on real interfaces (issue 19 item 6, docs/stp.md).
//!
//! * `two_lanyards_pick_the_root_by_priority`: two Lanyards joined by two
//!   cables (a loop): the one with the lower priority is root, the other's
//!   second cable is alternate/discarding, and a broadcast from a host
//!   arrives exactly once.
//! * `ring_with_open_vswitch`: three Open vSwitch bridges (RSTP, userspace
//!   datapath) and two Lanyards in a ring of five links:
//!
//!   ```text
//!     t1 ── L1 ──── O1 ── O2
//!            │             │
//!     t2 ── L2 ─────────── O3
//!   ```
//!   exactly one port of the ring is discarding (alternate); broadcast
//!   test traffic t1 → t2 is delivered exactly once; when the link L1–L2
//!   fails the tree reconverges and traffic flows again, once, across the
//!   three OVS bridges.
//!
//! Needs root (and Open vSwitch for the ring, else that test is SKIPPED).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::frame::{mac, Mac, BROADCAST};
use testkit::netns::veth;
use testkit::ovs::Ovs;
use testkit::seqrx::SeqReceiver;
use testkit::{ip, l2, require_root, Netns, RawPort, Switch};

fn wait(secs: f64, mut ok: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn stp(sw: &Switch) -> Value {
    sw.try_show_json(&["show", "spanning-tree"])
        .unwrap_or(Value::Null)
}

/// (role, state) of `port` in `show spanning-tree`.
fn port_state(v: &Value, port: &str) -> (String, String) {
    v["ports"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == port))
        .map(|p| {
            (
                p["role"].as_str().unwrap_or("").to_string(),
                p["state"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

/// Send `n` broadcast UDP packets numbered from `first` (broadcast: every
/// loop in the topology would multiply them).
fn burst(p: &RawPort, src: &Mac, first: u64, n: usize) {
    let dst = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2));
    let s = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1));
    p.send_paced(n, 2000, |i, b| {
        *b = ip::udp(&BROADCAST, src, s, dst, 64, first + i as u64, 128)
    })
    .unwrap();
}

fn lanyard_yaml(name: &str, ports: &[&str], priority: u32, edge: Option<&str>) -> String {
    let mut y = format!("switch:\n  name: {name}\nports:\n");
    for p in ports {
        y += &format!("  - {{name: {p}}}\n");
    }
    y += &format!("spanning-tree:\n  priority: {priority}\n");
    if let Some(e) = edge {
        y += &format!("  ports:\n    - {{name: {e}, edge: true}}\n");
    }
    y
}

#[test]
fn two_lanyards_pick_the_root_by_priority() {
    require_root!();
    let _g = l2::heavy();
    let t = Netns::new("lyst-t").unwrap();
    let a = Netns::new("lyst-a").unwrap();
    let b = Netns::new("lyst-b").unwrap();
    veth(&t, "t1", &a, "ah", 1500).unwrap();
    veth(&t, "t2", &b, "bh", 1500).unwrap();
    veth(&a, "a1", &b, "b1", 1500).unwrap();
    veth(&a, "a2", &b, "b2", 1500).unwrap();
    let pid = std::process::id();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    // B has the lower priority: B is root although A starts first.
    let sa = Switch::start(
        &bin,
        &a,
        &lanyard_yaml(
            &format!("lyst-a-{pid}"),
            &["ah", "a1", "a2"],
            32768,
            Some("ah"),
        ),
        &["ah", "a1", "a2"],
    )
    .expect("start A");
    let sb = Switch::start(
        &bin,
        &b,
        &lanyard_yaml(
            &format!("lyst-b-{pid}"),
            &["bh", "b1", "b2"],
            8192,
            Some("bh"),
        ),
        &["bh", "b1", "b2"],
    )
    .expect("start B");
    let converged = wait(10.0, || {
        let (va, vb) = (stp(&sa), stp(&sb));
        vb["is_root"] == true
            && port_state(&va, "a1") == ("root".into(), "forwarding".into())
            && port_state(&va, "a2") == ("alternate".into(), "discarding".into())
            && port_state(&vb, "b1").1 == "forwarding"
            && port_state(&vb, "b2").1 == "forwarding"
            && port_state(&va, "ah").1 == "forwarding"
    });
    let (va, vb) = (stp(&sa), stp(&sb));
    assert!(converged, "A: {va:#}\nB: {vb:#}");
    assert_eq!(va["root_id"], vb["bridge_id"]);
    assert_eq!(va["root_port"], "a1");
    assert_eq!(va["root_cost"], 20000);
    assert!(va["ports"][1]["bpdus_rx"].as_u64().unwrap() > 0);
    // The text view reads like a switch's.
    let text =
        String::from_utf8_lossy(&sa.cli(&["show", "spanning-tree"]).unwrap().stdout).into_owned();
    assert!(text.contains("root port a1"), "{text}");
    assert!(
        text.contains("alternate") && text.contains("discarding"),
        "{text}"
    );

    let p1 = RawPort::open(t.name(), "t1").unwrap();
    let p2 = RawPort::open(t.name(), "t2").unwrap();
    let src = mac(0xa1);
    let rx = SeqReceiver::start(p2.try_clone().unwrap(), src);
    burst(&p1, &src, 0, 500);
    assert_eq!(
        rx.wait_quiet(Duration::from_millis(400)),
        500,
        "every broadcast arrives"
    );
    assert_eq!(rx.dups(), 0, "and only once (no loop)");

    // The root port's cable fails: the alternate takes over at once.
    a.exec(&["ip", "link", "set", "a1", "down"]).unwrap();
    let t0 = Instant::now();
    let moved = wait(5.0, || {
        port_state(&stp(&sa), "a2") == ("root".into(), "forwarding".into())
    });
    assert!(moved, "{:#}", stp(&sa));
    eprintln!(
        "alternate forwarding {:?} after the root port failed",
        t0.elapsed()
    );
    rx.reset();
    burst(&p1, &src, 1000, 500);
    assert_eq!(rx.wait_quiet(Duration::from_millis(400)), 500);
    assert_eq!(rx.dups(), 0);
    drop(rx);
    drop(sa);
    drop(sb);
}

/// (port, role, state) of every OVS port with RSTP status, lower case.
fn rstp(ovs: &Ovs) -> Vec<(String, String, String)> {
    let Ok(out) = ovs.vsctl(&[
        "--format=json",
        "--columns=name,rstp_status",
        "list",
        "Port",
    ]) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    let mut r = Vec::new();
    for row in v["data"].as_array().into_iter().flatten() {
        let name = row[0].as_str().unwrap_or("").to_string();
        let mut role = String::new();
        let mut state = String::new();
        for kv in row[1][1].as_array().into_iter().flatten() {
            let val = kv[1].as_str().unwrap_or("").to_lowercase();
            match kv[0].as_str() {
                Some("rstp_port_role") => role = val,
                Some("rstp_port_state") => state = val,
                _ => {}
            }
        }
        r.push((name, role, state));
    }
    r
}

/// The ring's ports: Lanyard (switch, port) and OVS port names.
const L1_RING: [&str; 2] = ["l1o", "l1l"];
const L2_RING: [&str; 2] = ["l2l", "l2o"];
const OVS_RING: [&str; 6] = ["o1l", "o12", "o21", "o23", "o32", "o3l"];

/// Ports of the ring that do not forward: (name, role, state).
fn blocked(l1: &Switch, l2s: &Switch, ovs: &Ovs) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (sw, ports) in [(l1, L1_RING), (l2s, L2_RING)] {
        let v = stp(sw);
        for p in ports {
            let (role, state) = port_state(&v, p);
            if state != "forwarding" {
                out.push((p.to_string(), role, state));
            }
        }
    }
    let o = rstp(ovs);
    for p in OVS_RING {
        match o.iter().find(|(n, _, _)| n == p) {
            Some((n, r, s)) if s != "forwarding" => out.push((n.clone(), r.clone(), s.clone())),
            Some(_) => {}
            None => out.push((p.to_string(), "?".into(), "no rstp status".into())),
        }
    }
    out
}

#[test]
fn ring_with_open_vswitch() {
    require_root!();
    if !testkit::ovs::available() {
        eprintln!("SKIPPED: Open vSwitch is not installed");
        return;
    }
    let _g = l2::heavy();
    let t = Netns::new("lyst-t").unwrap();
    let n1 = Netns::new("lyst-l1").unwrap();
    let n2 = Netns::new("lyst-l2").unwrap();
    let no = Netns::new("lyst-o").unwrap();
    veth(&t, "t1", &n1, "l1h", 1500).unwrap();
    veth(&n1, "l1o", &no, "o1l", 1500).unwrap();
    veth(&no, "o12", &no, "o21", 1500).unwrap();
    veth(&no, "o23", &no, "o32", 1500).unwrap();
    veth(&no, "o3l", &n2, "l2o", 1500).unwrap();
    veth(&n2, "l2l", &n1, "l1l", 1500).unwrap();
    veth(&n2, "l2h", &t, "t2", 1500).unwrap();

    let tmp = std::env::temp_dir().join(format!("lyst-ovs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let ovs = Ovs::start(&no, &tmp).expect("start OVS");
    for (k, ports) in [
        (1, vec!["o1l", "o12"]),
        (2, vec!["o21", "o23"]),
        (3, vec!["o32", "o3l"]),
    ] {
        let br = format!("br{k}");
        ovs.add_userspace_bridge(
            &br,
            &[
                "rstp_enable=true",
                &format!("other_config:rstp-address=aa:bb:cc:00:00:0{k}"),
                "other_config:rstp-priority=32768",
            ],
        )
        .unwrap();
        for p in ports {
            ovs.vsctl(&["add-port", &br, p]).unwrap();
        }
    }
    let pid = std::process::id();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    // L1 is the root (priority 4096); L2 the default.
    let l1 = Switch::start(
        &bin,
        &n1,
        &lanyard_yaml(
            &format!("lyst-l1-{pid}"),
            &["l1h", "l1o", "l1l"],
            4096,
            Some("l1h"),
        ),
        &["l1h", "l1o", "l1l"],
    )
    .expect("start L1");
    let l2s = Switch::start(
        &bin,
        &n2,
        &lanyard_yaml(
            &format!("lyst-l2-{pid}"),
            &["l2h", "l2l", "l2o"],
            32768,
            Some("l2h"),
        ),
        &["l2h", "l2l", "l2o"],
    )
    .expect("start L2");

    let t0 = Instant::now();
    let one = wait(30.0, || {
        let b = blocked(&l1, &l2s, &ovs);
        b.len() == 1 && b[0].1 == "alternate" && b[0].2 == "discarding"
    });
    let b = blocked(&l1, &l2s, &ovs);
    assert!(
        one,
        "not exactly one alternate/discarding port: {b:?}\nL1 {:#}\nL2 {:#}\nOVS {}",
        stp(&l1),
        stp(&l2s),
        ovs.appctl(&["rstp/show"])
    );
    eprintln!("ring converged in {:?}; blocked: {b:?}", t0.elapsed());
    // Every bridge agrees L1 is the root.
    let root = stp(&l1)["bridge_id"].clone();
    assert_eq!(stp(&l1)["is_root"], true);
    assert_eq!(stp(&l2s)["root_id"], root);

    let p1 = RawPort::open(t.name(), "t1").unwrap();
    let p2 = RawPort::open(t.name(), "t2").unwrap();
    let src = mac(0xa1);
    let rx = SeqReceiver::start(p2.try_clone().unwrap(), src);
    burst(&p1, &src, 0, 1000);
    let got = rx.wait_quiet(Duration::from_millis(400));
    assert_eq!(got, 1000, "every broadcast arrives");
    assert_eq!(rx.dups(), 0, "exactly once: no loop");

    // The link L1–L2 fails: the blocked port takes over and traffic
    // crosses the three OVS bridges.
    n1.exec(&["ip", "link", "set", "l1l", "down"]).unwrap();
    let t0 = Instant::now();
    rx.reset();
    let mut seq = 10_000;
    let flows = wait(20.0, || {
        burst(&p1, &src, seq, 1);
        seq += 1;
        rx.unique() > 0
    });
    let took = t0.elapsed();
    assert!(
        flows,
        "no traffic after the failure: {:?}\nL1 {:#}\nL2 {:#}",
        blocked(&l1, &l2s, &ovs),
        stp(&l1),
        stp(&l2s)
    );
    eprintln!("traffic flows again {took:?} after the link failed");
    // Now a line: nothing blocked but the failed link's ends.
    let still = blocked(&l1, &l2s, &ovs);
    assert!(
        still.iter().all(|(n, _, _)| n == "l1l" || n == "l2l"),
        "{still:?}"
    );
    rx.reset();
    burst(&p1, &src, 20_000, 1000);
    assert_eq!(rx.wait_quiet(Duration::from_millis(400)), 1000);
    assert_eq!(rx.dups(), 0);
    drop(rx);
    drop(l1);
    drop(l2s);
    drop(ovs);
    let _ = std::fs::remove_dir_all(&tmp);
}
