//! Issue 16: AF_XDP busy polling (`switch.af-xdp-busy-poll: on`) on veth.
//! The kernel gives a veth's AF_XDP socket no NAPI id (docs/io.md "Busy
//! polling"), so busy polling cannot work there: the switch must say so
//! (`show interfaces`, JSON `busy_poll_refused`), leave the devices'
//! `napi_defer_hard_irqs` / `gro_flush_timeout` alone (masking a device
//! nobody polls would hold frames for the watchdog), and forward broadcast
//! and learned unicast both ways as without it; after it stops, nothing
//! is changed. Should a kernel give the id, the values must be the
//! busy-poll ones while it runs and the old ones after. No timing is
//! asserted.

use std::time::Duration;

use testkit::frame::{mac, test_frame, BROADCAST};
use testkit::l2;
use testkit::{require_root, Switch, TestBed};

const Q: Duration = Duration::from_millis(300);

/// `napi_defer_hard_irqs` and `gro_flush_timeout` of `port` in the DUT
/// namespace (`ip netns exec` shows that namespace's /sys).
fn device(bed: &TestBed, port: &str) -> (String, String) {
    let cat = |f: &str| {
        let o = bed
            .dut
            .exec(&["cat", &format!("/sys/class/net/{port}/{f}")])
            .expect("read sysfs");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    (cat("napi_defer_hard_irqs"), cat("gro_flush_timeout"))
}

#[test]
fn busy_polling_ports_forward_and_the_device_settings_come_back() {
    require_root!();
    let bed = TestBed::new("bpl", 2, 1500).expect("namespaces");
    let before: Vec<_> = ["sw1", "sw2"].iter().map(|p| device(&bed, p)).collect();
    let yaml = "switch:\n  name: busypoll\n  af-xdp-busy-poll: on\n  af-xdp-napi-timeout-us: 150\n\
                \x20 af-xdp-busy-poll-budget: 32\nvlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n    backend: af-xdp\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n    backend: af-xdp\n";
    let mut sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");
    let mut f = Vec::new();
    let v = sw.show_json(&["show", "interfaces"]);
    // Per port: whether the kernel gave its socket a NAPI id.
    let mut has_id = Vec::new();
    for r in v.as_array().map(Vec::as_slice).unwrap_or_default() {
        let mode = r["backend_mode"].as_str().unwrap_or("");
        if r["backend"] != "af-xdp" || !mode.ends_with("busy-poll") {
            f.push(format!("{}: backend {} {mode}", r["name"], r["backend"]));
        }
        let refused: Vec<&str> = r["busy_poll_refused"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let no_id = refused.iter().any(|x| x.starts_with("no NAPI id"));
        if refused.len() != usize::from(no_id) {
            f.push(format!("{}: kernel refused {refused:?}", r["name"]));
        }
        has_id.push(!no_id);
    }
    if has_id.len() != 2 {
        f.push(format!("show interfaces: {v}"));
    }
    let text = sw.cli(&["show", "interfaces"]).expect("cli");
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    if !text.contains("af-xdp native/copy busy-poll") {
        f.push(format!("show interfaces lacks busy-poll:\n{text}"));
    }
    for (k, p) in ["sw1", "sw2"].iter().enumerate() {
        let d = device(&bed, p);
        let want = if has_id.get(k) == Some(&true) {
            ("2".to_string(), "150000".to_string())
        } else {
            if !text.contains(&format!("Busy polling on {p} not in effect: no NAPI id")) {
                f.push(format!("show interfaces does not say why on {p}:\n{text}"));
            }
            before[k].clone()
        };
        if d != want {
            f.push(format!(
                "{p} while running: defer/timeout {d:?}, expected {want:?}"
            ));
        }
    }

    let t1 = bed.open(1).expect("t1");
    let t2 = bed.open(2).expect("t2");
    let _ = t1.recv_test_frames(Q);
    let _ = t2.recv_test_frames(Q);
    let ends = [&t1, &t2];
    // Broadcasts teach the switch each end's address; then unicast both
    // ways, several rounds (busy polling starts once a socket has its
    // NAPI id, a ring-counter round after its first frame).
    for (i, from) in ends.iter().enumerate() {
        let frames: Vec<Vec<u8>> = (0..20)
            .map(|s| test_frame(&BROADCAST, &mac(i as u32 + 1), &[], 1, s, 100))
            .collect();
        from.send_batch(&frames).expect("send");
        let n = ends[1 - i].recv_test_frames(Q).expect("recv").len();
        if n != 20 {
            f.push(format!("broadcast from t{}: {n} of 20", i + 1));
        }
    }
    for round in 0..3u32 {
        for (i, from) in ends.iter().enumerate() {
            let frames: Vec<Vec<u8>> = (0..200)
                .map(|s| test_frame(&mac(2 - i as u32), &mac(i as u32 + 1), &[], 2, s, 64))
                .collect();
            from.send_batch(&frames).expect("send");
            let got = ends[1 - i].recv_test_frames(Q).expect("recv");
            if got != frames {
                f.push(format!(
                    "round {round}, unicast t{} -> t{}: {} of 200 (intact, in order: {})",
                    i + 1,
                    2 - i,
                    got.len(),
                    got == frames
                ));
            }
        }
    }

    sw.stop().expect("stop");
    let after: Vec<_> = ["sw1", "sw2"].iter().map(|p| device(&bed, p)).collect();
    if after != before {
        f.push(format!(
            "device settings after stop {after:?}, before start {before:?}"
        ));
    }
    assert!(f.is_empty(), "{}\n{}", f.join("\n"), sw.log());
}
