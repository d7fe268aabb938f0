//! `lanyard test cable-diagnostics PORT` on real interfaces (issue 20
//! item 5). veth has no PHY: the kernel's ethtool netlink answers
//! EOPNOTSUPP and the switch must say so clearly, refuse a port it does
//! not have, and keep forwarding. (The per-pair decoder is unit-tested in
//! `io::cable` with notifications built to the kernel's layout.)

use testkit::frame::{mac, test_frame, BROADCAST};
use testkit::l2;
use testkit::{require_root, Switch, TestBed};

#[test]
fn veth_reports_not_supported_and_unknown_ports_are_refused() {
    require_root!();
    let bed = TestBed::new("cab", 2, 1500).expect("create namespaces and veths");
    let yaml = "switch:\n  name: cable\nvlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2"],
    )
    .expect("start lanyard");

    let out = sw
        .cli(&["test", "cable-diagnostics", "sw1"])
        .expect("run the CLI");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a veth has no cable test: {err}");
    assert!(
        err.contains("sw1: cable diagnostics not supported by this interface's driver"),
        "clear message expected, got: {err}"
    );

    // The raw TDR mode: the same refusal from the kernel, and bad
    // arguments refused before the PHY is asked.
    let out = sw
        .cli(&[
            "test",
            "cable-diagnostics",
            "sw1",
            "--tdr",
            "--to",
            "20",
            "--pair",
            "b",
        ])
        .expect("run the CLI");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a veth has no TDR: {err}");
    assert!(
        err.contains("sw1: cable diagnostics not supported by this interface's driver"),
        "clear message expected, got: {err}"
    );
    for (args, want) in [
        (&["--to", "151"][..], "a distance in metres, 0 to 150"),
        (&["--from", "30", "--to", "10"][..], "from is beyond to"),
        (&["--step", "0"][..], "must be more than 0"),
        (&["--pair", "E"][..], "A, B, C or D"),
    ] {
        let mut a = vec!["test", "cable-diagnostics", "sw1", "--tdr"];
        a.extend_from_slice(args);
        let out = sw.cli(&a).expect("run the CLI");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(want),
            "{args:?}: {err}"
        );
    }

    let out = sw
        .cli(&["test", "cable-diagnostics", "nosuch9"])
        .expect("run the CLI");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("no port \"nosuch9\""), "got: {err}");

    // The switch still forwards, and the port is still up.
    let ports = bed.open_all().expect("open tester sockets");
    let frames: Vec<Vec<u8>> = (0..50)
        .map(|i| test_frame(&BROADCAST, &mac(7), &[], 1, i, 64))
        .collect();
    l2::send_settled(&sw, &ports[0], "sw1", &frames);
    let got = ports[1].recv_test_frames(l2::QUIET).expect("receive on t2");
    assert_eq!(got.len(), 50, "broadcasts from t1 reach t2 after the test");
    assert_eq!(sw.port_state("sw1").as_deref(), Some("up"));
}
