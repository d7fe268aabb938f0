//! Hitless change (issue 7, F-HA): `config apply` and `config rollback`
//! under constant-rate traffic lose nothing on the ports they do not
//! touch; a change that needs a restart is refused and changes nothing;
//! bypass mode turns services off and on without loss; `lanyard restart`
//! comes back in place with its sockets and learned addresses, losing
//! nothing, and reports the pause.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use testkit::frame::{mac, test_frame, BROADCAST};
use testkit::l2;
use testkit::{require_root, RawPort, Switch, TestBed};

const RATE: u64 = 20_000;

fn with_socket(sw: &Switch, yaml: &str) -> std::path::PathBuf {
    let p = sw
        .socket()
        .with_file_name(format!("next-{}.yaml", yaml.len()));
    std::fs::write(
        &p,
        // The same backend as the running switch (LANYARD_TEST_BACKEND):
        // else the diff is a `switch` change that needs a restart.
        testkit::switch::with_test_backend(&format!(
            "{}\nmanagement:\n  socket: {}\n",
            yaml.trim_end(),
            sw.socket().display()
        )),
    )
    .unwrap();
    p
}

fn cli_ok(sw: &Switch, args: &[&str]) -> String {
    let o = sw.cli(args).unwrap();
    assert!(
        o.status.success(),
        "lanyard {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A constant-rate stream from port `from` (source h1) to h2, phase 5;
/// `during` runs in the middle. Returns (sent, received at `to`).
fn stream_around(
    ports: &[RawPort],
    from: usize,
    to: usize,
    secs: f64,
    during: impl FnOnce(),
) -> (u64, u64) {
    let cap = ports[to].start_capture(0, |i, _| i.phase == 5).unwrap();
    let total = (RATE as f64 * secs) as usize;
    let sender = ports[from].try_clone().unwrap();
    let (h1, h2) = (mac(1), mac(2));
    let tx = std::thread::spawn(move || {
        sender
            .send_paced(total, RATE, |i, b| {
                *b = test_frame(&h2, &h1, &[], 5, i as u64, 64)
            })
            .unwrap()
    });
    std::thread::sleep(Duration::from_secs_f64(secs / 3.0));
    during();
    tx.join().unwrap();
    cap.wait_quiet(Duration::from_millis(300), Duration::from_secs(3));
    (total as u64, cap.stop().unwrap().matched)
}

fn learn(ports: &[RawPort]) {
    for (k, p) in ports.iter().enumerate().take(2) {
        p.send(&test_frame(&BROADCAST, &mac(k as u32 + 1), &[], 1, 0, 64))
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    for p in ports {
        p.drain();
    }
}

const BASE: &str = "switch:\n  name: hitless\nvlans:\n  - id: 10\nports:\n  - {name: sw1, vlan: 10}\n  - {name: sw2, vlan: 10}\n  - {name: sw3, vlan: 10}\n  - {name: sw4, vlan: 10}\n";

#[test]
fn apply_and_rollback_under_traffic() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("lyhl", 5, 1500).expect("namespaces");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        BASE,
        &["sw1", "sw2", "sw3", "sw4"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().unwrap();
    learn(&ports);

    // New VLAN 20, sw3 moves to it, sw5 added, a mirror of sw4 to sw5.
    let next = format!(
        "{}  - {{name: sw5}}\nmirror-sessions:\n  - {{name: m, source-ports: [sw4], destination: sw5}}\n",
        BASE.replace("  - id: 10\n", "  - id: 10\n  - id: 20\n")
            .replace("{name: sw3, vlan: 10}", "{name: sw3, vlan: 20}")
    );
    let path = with_socket(&sw, &next);
    let diff = cli_ok(&sw, &["config", "diff", path.to_str().unwrap()]);
    assert!(
        diff.contains("+ port sw5") && diff.contains("applies live"),
        "{diff}"
    );
    let (sent, got) = stream_around(&ports, 0, 1, 1.5, || {
        cli_ok(&sw, &["config", "apply", path.to_str().unwrap()]);
    });
    assert_eq!(got, sent, "frames lost on an unaffected port during apply");
    // It took effect: sw5 is attached, sw3 no longer in VLAN 10.
    let t0 = std::time::Instant::now();
    while testkit::switch::interface_state(&sw.show_json(&["show", "interfaces"]), "sw5").as_deref()
        != Some("up")
    {
        assert!(t0.elapsed() < Duration::from_secs(5), "sw5 never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in &ports {
        p.drain();
    }
    ports[3]
        .send(&test_frame(&BROADCAST, &mac(4), &[], 2, 0, 64))
        .unwrap();
    assert!(ports[2]
        .recv_test_frames(Duration::from_millis(300))
        .unwrap()
        .is_empty());
    assert_eq!(
        ports[4]
            .recv_test_frames(Duration::from_millis(300))
            .unwrap()
            .len(),
        1,
        "mirror copy on the new port"
    );

    // A change that needs a restart is refused and changes nothing.
    let bad = with_socket(
        &sw,
        &BASE.replace("name: hitless", "name: hitless\n  workers: 2"),
    );
    let o = sw.cli(&["config", "apply", bad.to_str().unwrap()]).unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("restart"));

    // Rollback under traffic.
    let (sent, got) = stream_around(&ports, 0, 1, 1.5, || {
        cli_ok(&sw, &["config", "rollback"]);
    });
    assert_eq!(
        got, sent,
        "frames lost on an unaffected port during rollback"
    );
    let ifs = sw.show_json(&["show", "interfaces"]);
    assert!(
        testkit::switch::interface_state(&ifs, "sw5").is_none(),
        "sw5 still configured: {ifs}"
    );
}

#[test]
fn bypass_and_restart() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("lyrs", 3, 1500).expect("namespaces");
    // An ACL that denies frames from h3; h1's traffic is permitted. The
    // ports are AF_PACKET: only its rings are handed to the successor
    // (AF_XDP ports are opened anew after a restart, losing the frames of
    // the gap; docs/io.md).
    let yaml = "switch:\n  name: restart\n  port-backend: af-packet\nports:\n  - {name: sw1, acl-in: [f]}\n  - {name: sw2}\n  - {name: sw3, acl-in: [f]}\n\
                access-lists:\n  - name: f\n    type: mac\n    rules:\n      - {action: deny, source-mac: \"02:4c:00:00:00:03\"}\n      - {action: permit}\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().unwrap();
    learn(&ports);
    let h3 = mac(3);
    let denied = |n: u64| {
        let frames: Vec<Vec<u8>> = (0..n)
            .map(|i| test_frame(&mac(2), &h3, &[], 7, i, 64))
            .collect();
        ports[2].send_batch(&frames).unwrap();
        ports[1]
            .recv_test_frames(Duration::from_millis(300))
            .unwrap()
            .iter()
            .filter(|f| f[6..12] == h3)
            .count()
    };
    assert_eq!(denied(50), 0);
    // Bypass on and off under traffic: h1's stream loses nothing.
    let flips = Arc::new(AtomicBool::new(false));
    let (sent, got) = stream_around(&ports, 0, 1, 1.5, || {
        assert!(cli_ok(&sw, &["bypass", "on"]).contains("on"));
        flips.store(true, Ordering::Relaxed);
    });
    assert!(flips.load(Ordering::Relaxed));
    assert_eq!(got, sent, "lost frames entering bypass");
    assert_eq!(denied(50), 50, "bypass forwards without ACLs");
    let (sent, got) = stream_around(&ports, 0, 1, 1.5, || {
        assert!(cli_ok(&sw, &["bypass", "off"]).contains("off"));
    });
    assert_eq!(got, sent, "lost frames leaving bypass");
    assert_eq!(denied(50), 0, "ACLs are back");

    // Restart in place under traffic: the gap is reported, addresses kept.
    let before = sw.show_json(&["show", "mac", "address-table", "count"]);
    let (sent, got) = stream_around(&ports, 0, 1, 3.0, || {
        let out = cli_ok(&sw, &["restart"]);
        eprintln!("{}", out.trim());
    });
    let log = sw.log();
    let gap = log
        .lines()
        .find(|l| l.contains("forwarding resumed"))
        .unwrap_or("(no gap logged)")
        .to_string();
    eprintln!(
        "restart under {RATE} fps: lost {} of {sent} = {:.1} ms; {gap}",
        sent - got,
        (sent - got) as f64 * 1000.0 / RATE as f64
    );
    assert!(log.contains("addresses restored"), "{log}");
    // The sockets are handed over: frames that arrive during the restart
    // wait in the receive ring, so none is lost (only delayed).
    assert_eq!(got, sent, "frames lost across the restart");
    let after = sw.show_json(&["show", "mac", "address-table", "count"]);
    eprintln!("mac count before {before} after {after}");
    assert_eq!(denied(20), 0, "services after restart");
}

/// `lanyard restart` with AF_XDP ports (the default backend on veth):
/// the sockets, their UMEM and the attached program are handed to the
/// new image, so frames arriving during the restart wait in the receive
/// ring and none is lost; the ports are still AF_XDP afterwards, and
/// their counters start again from the new image.
#[test]
fn restart_hands_af_xdp_sockets_over() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("lyrx", 2, 1500).expect("namespaces");
    let modes = restart_af_xdp(&bed);
    assert!(modes.iter().all(|m| !m.contains("queues")), "{modes:?}");
}

/// The same on veths with four receive queues: every queue's socket is
/// handed over (docs/io.md), and the ports come back with four queues.
#[test]
fn restart_hands_multi_queue_af_xdp_sockets_over() {
    require_root!();
    let _g = l2::heavy();
    let mut bed = TestBed::new("lyrq", 0, 1500).expect("namespaces");
    bed.cable_multi_queue(2, 4).expect("4-queue veths");
    let modes = restart_af_xdp(&bed);
    assert!(modes.iter().all(|m| m.ends_with(" 4 queues")), "{modes:?}");
}

/// Restart under a stream on AF_XDP ports `sw1`/`sw2` of `bed`: nothing
/// lost, the same backends and modes after; returns the modes.
fn restart_af_xdp(bed: &TestBed) -> Vec<String> {
    // Two workers: each receives one port on AF_XDP and sends on the
    // other's AF_PACKET transmit socket; all four are handed over.
    let yaml = "switch:\n  name: restart-xdp\n  port-backend: af-xdp\n  workers: 2\nports:\n  - {name: sw1}\n  - {name: sw2}\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let backends = |sw: &Switch| -> Vec<String> {
        sw.show_json(&["show", "interfaces"])
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r["backend"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let modes = |sw: &Switch| -> Vec<String> {
        sw.show_json(&["show", "interfaces"])
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r["backend_mode"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(backends(&sw), ["af-xdp", "af-xdp"]);
    let modes_before = modes(&sw);
    let ports = bed.open_all().unwrap();
    learn(&ports);
    let (sent, got) = stream_around(&ports, 0, 1, 3.0, || {
        let out = cli_ok(&sw, &["restart"]);
        eprintln!("{}", out.trim());
    });
    let log = sw.log();
    eprintln!(
        "AF_XDP restart under {RATE} fps: lost {} of {sent}; {}",
        sent - got,
        log.lines()
            .find(|l| l.contains("forwarding resumed"))
            .unwrap_or("(no gap logged)")
    );
    assert!(
        log.contains("4 sockets and 0 TAP twins handed over"),
        "{log}"
    );
    assert!(!log.contains("handed-over AF_XDP socket refused"), "{log}");
    assert_eq!(got, sent, "frames lost across the restart");
    assert_eq!(backends(&sw), ["af-xdp", "af-xdp"], "still AF_XDP");
    assert_eq!(modes(&sw), modes_before, "same modes (and queues)");
    // The other direction too: the adopted sockets send and receive.
    let frames: Vec<Vec<u8>> = (0..100)
        .map(|i| test_frame(&mac(1), &mac(2), &[], 6, i, 64))
        .collect();
    ports[1].send_batch(&frames).unwrap();
    let back = ports[0]
        .recv_test_frames(Duration::from_millis(300))
        .unwrap()
        .iter()
        .filter(|f| f[6..12] == mac(2))
        .count();
    assert_eq!(back, 100, "after the restart, sw2 -> sw1");
    modes_before
}
