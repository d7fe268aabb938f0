//! Acceptance (issue 2): jumbo frames up to 9,216 bytes are forwarded
//! intact (byte-identical), across access ports and through a trunk; an
//! MTU lowered on a running port's interface takes effect on it alone.

use std::time::{Duration, Instant};

use testkit::frame::{hex, mac, test_frame, Tag, BROADCAST};
use testkit::l2;
use testkit::switch::port_counter;
use testkit::{require_root, Switch, TestBed};

const Q: Duration = Duration::from_millis(300);
const JUMBO: usize = 9216;

#[test]
fn jumbo_frames_forwarded_intact() {
    require_root!();
    let t0 = Instant::now();
    let bed = TestBed::new("jmb", 3, 9500).expect("create namespaces and veths");
    let yaml = "switch:\n  name: l2-jumbo\nvlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n\
                \x20 - name: sw3\n    mode: trunk\n    allowed-vlans: \"10\"\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("open tester sockets");
    let mut f = Vec::new();
    let check = |f: &mut Vec<String>, what: &str, got: Vec<Vec<u8>>, want: &[Vec<u8>]| {
        if got.len() != want.len() {
            f.push(format!(
                "{what}: received {} frames, expected {}",
                got.len(),
                want.len()
            ));
            return;
        }
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            if g != w {
                let first = g.iter().zip(w).position(|(a, b)| a != b);
                f.push(format!(
                    "{what}: frame {k} differs (got {} bytes, want {}, first difference at {first:?}): {}",
                    g.len(),
                    w.len(),
                    hex(g, 24)
                ));
                return;
            }
        }
    };
    let sizes = [JUMBO, JUMBO - 1, 9000, 1518, 64];
    let (a, b) = (mac(1), mac(2));

    // Broadcast (flooded) jumbo frames from the access port.
    let sent: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| test_frame(&BROADCAST, &a, &[], 1, i as u64, n))
        .collect();
    l2::send_settled(&sw, &ports[0], "sw1", &sent);
    check(
        &mut f,
        "t1 → t2 (access, flooded)",
        ports[1].recv_test_frames(Q).unwrap(),
        &sent,
    );
    let tagged: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| test_frame(&BROADCAST, &a, &[Tag::dot1q(10)], 1, i as u64, n + 4))
        .collect();
    check(
        &mut f,
        "t1 → t3 (trunk, tagged +4 bytes)",
        ports[2].recv_test_frames(Q).unwrap(),
        &tagged,
    );

    // Known unicast jumbo frames from the trunk (tagged, 9220 bytes) to a.
    let from_trunk: Vec<Vec<u8>> = (0..10)
        .map(|i| test_frame(&a, &b, &[Tag::dot1q(10)], 2, i, JUMBO + 4))
        .collect();
    l2::send_settled(&sw, &ports[2], "sw3", &from_trunk);
    let want: Vec<Vec<u8>> = (0..10)
        .map(|i| test_frame(&a, &b, &[], 2, i, JUMBO))
        .collect();
    check(
        &mut f,
        "t3 → t1 (trunk tagged → access untagged, known unicast)",
        ports[0].recv_test_frames(Q).unwrap(),
        &want,
    );
    let leaked = ports[1].recv_test_frames(Q).unwrap();
    if !leaked.is_empty() {
        f.push(format!(
            "known unicast to t1 also reached t2 {} times",
            leaked.len()
        ));
    }

    // Known unicast 9216-byte frames access → access, to b (learned on sw3).
    let to_b: Vec<Vec<u8>> = (0..10)
        .map(|i| test_frame(&b, &a, &[], 3, i, JUMBO))
        .collect();
    l2::send_settled(&sw, &ports[0], "sw1", &to_b);
    let want_b: Vec<Vec<u8>> = (0..10)
        .map(|i| test_frame(&b, &a, &[Tag::dot1q(10)], 3, i, JUMBO + 4))
        .collect();
    check(
        &mut f,
        "t1 → t3 (known unicast 9216 → tagged 9220)",
        ports[2].recv_test_frames(Q).unwrap(),
        &want_b,
    );

    // The MTU of sw2's interface lowered while the switch runs: the
    // supervisor sees the change and tells the workers, which refuse
    // (and count) what no longer fits there; the trunk still takes all.
    bed.dut
        .exec(&["ip", "link", "set", "sw2", "mtu", "1500"])
        .expect("ip link set mtu");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sw
        .show_json(&["show", "interfaces"])
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "sw2"))
        .and_then(|p| p["mtu"].as_u64())
        != Some(1500)
    {
        assert!(Instant::now() < deadline, "sw2's MTU change not seen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = port_counter(
        &sw.show_json(&["show", "counters"]),
        "sw2",
        "drops.tx-error",
    );
    let sent: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| test_frame(&BROADCAST, &a, &[], 4, i as u64, n))
        .collect();
    l2::send_settled(&sw, &ports[0], "sw1", &sent);
    let fits: Vec<Vec<u8>> = sent
        .iter()
        .filter(|f| f.len() <= 1500 + 14)
        .cloned()
        .collect();
    check(
        &mut f,
        "t1 → t2 after sw2's MTU fell to 1500",
        ports[1].recv_test_frames(Q).unwrap(),
        &fits,
    );
    let tagged: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| test_frame(&BROADCAST, &a, &[Tag::dot1q(10)], 4, i as u64, n + 4))
        .collect();
    check(
        &mut f,
        "t1 → t3 (trunk MTU unchanged)",
        ports[2].recv_test_frames(Q).unwrap(),
        &tagged,
    );
    let too_long = (sent.len() - fits.len()) as u64;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut refused = 0;
    while Instant::now() < deadline {
        refused = port_counter(
            &sw.show_json(&["show", "counters"]),
            "sw2",
            "drops.tx-error",
        ) - before;
        if refused >= too_long {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if refused != too_long {
        f.push(format!(
            "sw2 counted {refused} frames refused for its MTU, expected {too_long}"
        ));
    }
    eprintln!("jumbo test: {:?}", t0.elapsed());
    assert!(f.is_empty(), "{} failure(s):\n{}", f.len(), f.join("\n"));
}
