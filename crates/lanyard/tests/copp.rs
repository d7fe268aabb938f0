//! Control-plane policing (issue 7, F-MGMT): a flood of multicast to
//! 224.0.0.1 on a routed port is policed in its class (`unknown`) before
//! it reaches the kernel, while ping to the switch (class `icmp`) keeps
//! working; counters per class in `show control-plane`.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use testkit::l2;
use testkit::{require_root, Switch, TestBed};

#[test]
fn multicast_flood_is_policed_and_ping_survives() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("copp", 1, 1500).expect("namespaces");
    bed.tester
        .exec(&["ip", "addr", "add", "10.1.0.2/24", "dev", "t1"])
        .unwrap();
    let yaml = "switch:\n  name: copp\nports:\n  - name: sw1\n    mode: routed\n    addresses: [10.1.0.1/24]\n\
control-plane-policing:\n  unknown: {rate: 200, burst: 20}\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1"],
    )
    .expect("start lanyard");
    let port = bed.open(1).expect("tester socket");
    // UDP to 224.0.0.1 (all hosts): punted as multicast, class unknown.
    let dst_mac = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01];
    let frame = testkit::ip::udp(
        &dst_mac,
        &[0x02, 0, 0, 0, 0, 0x11],
        IpAddr::V4(Ipv4Addr::new(10, 1, 0, 2)),
        IpAddr::V4(Ipv4Addr::new(224, 0, 0, 1)),
        1,
        0,
        100,
    );
    let before = sw.show_json(&["show", "control-plane"]);
    let ns = bed.tester.name().to_string();
    let pinger = std::thread::spawn(move || {
        std::process::Command::new("ip")
            .args([
                "netns", "exec", &ns, "ping", "-c", "5", "-i", "0.3", "-W", "2", "10.1.0.1",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    });
    let flood = 20_000usize;
    let took = port
        .send_paced(flood, 10_000, |_, b| {
            b.clear();
            b.extend_from_slice(&frame);
        })
        .expect("flood");
    let ping = pinger.join().unwrap().unwrap_or_default();
    std::thread::sleep(Duration::from_millis(300));
    let after = sw.show_json(&["show", "control-plane"]);
    let class = |v: &serde_json::Value, name: &str, k: &str| -> u64 {
        v["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["class"] == name)
            .and_then(|c| c[k].as_u64())
            .unwrap_or(0)
    };
    let passed = class(&after, "unknown", "passed") - class(&before, "unknown", "passed");
    let dropped = class(&after, "unknown", "dropped") - class(&before, "unknown", "dropped");
    let icmp = class(&after, "icmp", "passed");
    let secs = took.as_secs_f64();
    // 200/s for the flood's duration plus the burst, ± a little timing.
    let want = 200.0 * secs + 20.0;
    eprintln!(
        "flood {flood} in {secs:.2} s: passed {passed} (≈ {want:.0}), dropped {dropped}; icmp passed {icmp}\n{ping}"
    );
    assert_eq!(
        passed + dropped,
        flood as u64,
        "every flood frame classified"
    );
    assert!(
        (passed as f64) < want * 1.15 + 5.0 && (passed as f64) > want * 0.85 - 5.0,
        "unknown passed {passed}, want about {want:.0}"
    );
    assert!(
        ping.contains(" 0% packet loss"),
        "ping during the flood: {ping}"
    );
    assert!(icmp >= 5, "echo requests counted in class icmp: {icmp}");
    let text = sw
        .cli(&["show", "control-plane"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(text.contains("unknown") && text.contains("200"), "{text}");
}
