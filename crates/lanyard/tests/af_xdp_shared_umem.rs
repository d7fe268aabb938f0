//! Issue 16: one UMEM per worker shared by its AF_XDP ports
//! (`switch.af-xdp-shared-umem: on`, docs/io.md "Shared UMEM"). Three
//! AF_XDP ports on one worker: `show interfaces` says each is on the
//! shared UMEM; broadcasts flood (copies, one of them tagged); unicast
//! between every pair, untagged and across a trunk (the tag pushed and
//! popped in place), arrives byte for byte, and the ports' `umem_moved`
//! counters show the frames went as descriptors; a link flap in the middle
//! loses nothing after it; and once traffic stops every port's receive
//! chunks are back with its socket (`umem_away` 0: no chunk leaked).
//! Without the feature the ports report no shared UMEM and move nothing.
//! A restart in place opens the shared-UMEM ports anew (they are not
//! handed over), on a shared UMEM again, and they forward. No timing is
//! asserted.

use std::time::{Duration, Instant};

use testkit::frame::{mac, test_frame, Tag, BROADCAST};
use testkit::l2;
use testkit::netns::ip;
use testkit::{require_root, RawPort, Switch, TestBed};

const Q: Duration = Duration::from_millis(300);

/// `key` of every port in `show counters --json`, in port order.
fn port_counts(sw: &Switch, key: &str) -> Vec<u64> {
    let c = sw.show_json(&["show", "counters"]);
    ["sw1", "sw2", "sw3"]
        .iter()
        .map(|p| testkit::switch::port_counter(&c, p, key))
        .collect()
}

/// `backend` and `backend_mode` of `port` in `show interfaces --json`.
fn backend(sw: &Switch, port: &str) -> String {
    let v = sw.show_json(&["show", "interfaces"]);
    let r = v
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == port))
        .cloned()
        .unwrap_or_default();
    format!(
        "{} {}",
        r["backend"].as_str().unwrap_or(""),
        r["backend_mode"].as_str().unwrap_or("")
    )
}

/// The frame `len` bytes long as it enters or leaves port `k` (0-based):
/// sw3 is a trunk carrying VLAN 10 tagged, the others are access ports.
fn on_port(k: usize, dst: u32, src: u32, phase: u32, seq: u64, len: usize) -> Vec<u8> {
    if k == 2 {
        test_frame(&mac(dst), &mac(src), &[Tag::dot1q(10)], phase, seq, len + 4)
    } else {
        test_frame(&mac(dst), &mac(src), &[], phase, seq, len)
    }
}

#[test]
fn shared_umem_moves_unicast_copies_floods_and_leaks_no_chunk() {
    require_root!();
    let bed = TestBed::new("sum", 3, 1500).expect("namespaces");
    let yaml = "switch:\n  name: shared-umem\n  workers: 1\n  af-xdp-shared-umem: on\n\
                vlans:\n  - id: 10\nports:\n\
                \x20 - name: sw1\n    mode: access\n    vlan: 10\n    backend: af-xdp\n\
                \x20 - name: sw2\n    mode: access\n    vlan: 10\n    backend: af-xdp\n\
                \x20 - name: sw3\n    mode: trunk\n    allowed-vlans: [10]\n    backend: af-xdp\n";
    let mut sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");
    let mut f = Vec::new();
    for p in ["sw1", "sw2", "sw3"] {
        let b = backend(&sw, p);
        if !b.starts_with("af-xdp ") || !b.ends_with(" shared-umem") {
            f.push(format!("{p}: backend {b:?}, expected af-xdp … shared-umem"));
        }
    }
    let text = sw.cli(&["show", "interfaces"]).expect("cli");
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    if !text.contains("shared-umem") {
        f.push(format!("show interfaces does not say shared-umem:\n{text}"));
    }

    let t: Vec<RawPort> = (1..=3).map(|i| bed.open(i).expect("tester")).collect();
    for e in &t {
        let _ = e.recv_test_frames(Q);
    }
    // Broadcasts: each end's address learned; every copy intact (the
    // trunk's tagged, the access ports' not).
    for (i, from) in t.iter().enumerate() {
        let frames: Vec<Vec<u8>> = (0..20)
            .map(|s| {
                let mut fr = on_port(i, 0, i as u32 + 1, 1, s, 100);
                fr[..6].copy_from_slice(&BROADCAST);
                fr
            })
            .collect();
        from.send_batch(&frames).expect("send");
        for (k, to) in t.iter().enumerate().filter(|(k, _)| *k != i) {
            let want: Vec<Vec<u8>> = (0..20)
                .map(|s| {
                    let mut fr = on_port(k, 0, i as u32 + 1, 1, s, 100);
                    fr[..6].copy_from_slice(&BROADCAST);
                    fr
                })
                .collect();
            let got = to.recv_test_frames(Q).expect("recv");
            if got != want {
                f.push(format!(
                    "broadcast t{} -> t{}: {} of 20 (intact: {})",
                    i + 1,
                    k + 1,
                    got.len(),
                    got == want
                ));
            }
        }
    }
    let moved0: u64 = port_counts(&sw, "umem_moved").iter().sum();

    // Unicast between every pair, both ways, in three rounds (60-, 64-
    // and 1,514-byte frames, 4 more on the trunk), with a flap of sw2
    // after the first round.
    let mut sent = 0u64;
    for round in 0..3u32 {
        if round == 1 {
            ip(&["-n", bed.dut.name(), "link", "set", "dev", "sw2", "down"]).unwrap();
            sw.wait_port_state("sw2", "down", Duration::from_secs(10));
            ip(&["-n", bed.dut.name(), "link", "set", "dev", "sw2", "up"]).unwrap();
            if sw
                .wait_port_state("sw2", "up", Duration::from_secs(20))
                .as_deref()
                != Some("up")
            {
                f.push("sw2 not up after the flap".into());
            }
            // The flap flushed sw2's addresses: learn them again.
            let b: Vec<Vec<u8>> = (0..5)
                .map(|s| {
                    let mut fr = on_port(1, 0, 2, 2, s, 100);
                    fr[..6].copy_from_slice(&BROADCAST);
                    fr
                })
                .collect();
            t[1].send_batch(&b).expect("send");
            for e in &t {
                let _ = e.recv_test_frames(Q);
            }
        }
        for i in 0..3 {
            for k in (0..3).filter(|&k| k != i) {
                let phase = 10 + round * 10 + (i * 3 + k) as u32;
                let lens = |s: u64| match s % 4 {
                    3 => 1514,
                    1 => 60,
                    _ => 64,
                };
                let frames: Vec<Vec<u8>> = (0..200)
                    .map(|s| on_port(i, k as u32 + 1, i as u32 + 1, phase, s, lens(s)))
                    .collect();
                // A 64-byte tagged frame leaves the trunk as a 60-byte
                // untagged one, and the other way round.
                let want: Vec<Vec<u8>> = (0..200)
                    .map(|s| on_port(k, k as u32 + 1, i as u32 + 1, phase, s, lens(s)))
                    .collect();
                t[i].send_batch(&frames).expect("send");
                sent += 200;
                let got = t[k].recv_test_frames(Q).expect("recv");
                if got != want {
                    let bad = got
                        .iter()
                        .zip(&want)
                        .position(|(a, b)| a != b)
                        .map(|j| format!("first difference at frame {j}: {:02x?}", &got[j]))
                        .unwrap_or_default();
                    f.push(format!(
                        "round {round}, unicast t{} -> t{}: {} of 200 intact, in order: {} {bad}",
                        i + 1,
                        k + 1,
                        got.iter().zip(&want).filter(|(a, b)| a == b).count(),
                        got == want
                    ));
                }
            }
        }
    }
    // The worker counts what moved every 200 ms.
    std::thread::sleep(Duration::from_millis(600));
    let moved: u64 = port_counts(&sw, "umem_moved").iter().sum::<u64>() - moved0;
    if moved < sent {
        f.push(format!(
            "{moved} of {sent} unicast frames moved as descriptors (umem_moved)"
        ));
    }
    // No chunk leaked: each port's receive chunks all back with its
    // socket once traffic stops.
    let t0 = Instant::now();
    let mut away = port_counts(&sw, "umem_away");
    while away.iter().any(|&a| a != 0) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(200));
        away = port_counts(&sw, "umem_away");
    }
    if away.iter().any(|&a| a != 0) {
        f.push(format!("receive chunks away after traffic: {away:?}"));
    }
    sw.stop().expect("stop");
    assert!(f.is_empty(), "{}\n{}", f.join("\n"), sw.log());
}

/// `lanyard restart` with the shared UMEM on: its ports are not handed
/// over (docs/io.md "Shared UMEM", "Restart") but opened anew by the
/// successor, on a shared UMEM again, and forward both ways afterwards.
#[test]
fn restart_reopens_shared_umem_ports() {
    require_root!();
    let bed = TestBed::new("sur", 2, 1500).expect("namespaces");
    let yaml = "switch:\n  name: shared-umem-restart\n  workers: 1\n  af-xdp-shared-umem: on\n\
                vlans:\n  - id: 10\nports:\n\
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
    let pid = sw.pid();
    let o = sw.cli(&["restart"]).expect("cli");
    if !o.status.success() {
        f.push(format!(
            "restart: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    // The successor (same process) answers once its ports are up again.
    let t0 = Instant::now();
    let on_shared = |sw: &Switch| {
        ["sw1", "sw2"].iter().all(|p| {
            sw.port_state(p).as_deref() == Some("up") && backend(sw, p).ends_with(" shared-umem")
        })
    };
    while !on_shared(&sw) && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
    }
    if !on_shared(&sw) {
        f.push(format!(
            "after restart: {} / {}",
            backend(&sw, "sw1"),
            backend(&sw, "sw2")
        ));
    }
    if sw.pid() != pid {
        f.push("restart is in place: same process".into());
    }
    let t: Vec<RawPort> = (1..=2).map(|i| bed.open(i).expect("tester")).collect();
    for e in &t {
        let _ = e.recv_test_frames(Q);
    }
    for (i, from) in t.iter().enumerate() {
        let mut b = on_port(i, 0, i as u32 + 1, 1, 0, 64);
        b[..6].copy_from_slice(&BROADCAST);
        from.send_batch(&[b]).expect("send");
        let _ = t[1 - i].recv_test_frames(Q);
    }
    for (i, from) in t.iter().enumerate() {
        let frames: Vec<Vec<u8>> = (0..200)
            .map(|s| on_port(i, 2 - i as u32, i as u32 + 1, 2, s, 64))
            .collect();
        from.send_batch(&frames).expect("send");
        let got = t[1 - i].recv_test_frames(Q).expect("recv");
        if got != frames {
            f.push(format!(
                "after restart t{} -> t{}: {} of 200 (intact, in order: {})",
                i + 1,
                2 - i,
                got.len(),
                got == frames
            ));
        }
    }
    std::thread::sleep(Duration::from_millis(600));
    let moved = port_counts2(&sw, "umem_moved");
    if moved < 400 {
        f.push(format!("{moved} of 400 frames moved after the restart"));
    }
    sw.stop().expect("stop");
    assert!(f.is_empty(), "{}\n{}", f.join("\n"), sw.log());
}

/// `key` summed over sw1 and sw2.
fn port_counts2(sw: &Switch, key: &str) -> u64 {
    let c = sw.show_json(&["show", "counters"]);
    ["sw1", "sw2"]
        .iter()
        .map(|p| testkit::switch::port_counter(&c, p, key))
        .sum()
}
