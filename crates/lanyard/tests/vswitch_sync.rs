//! Virtual-switch MAC sync at scale (issue 19): two Lanyards paired over
//! a peer link; a host port of dist-a learns `LANYARD_VS_MACS` source
//! addresses (default 20,000; 100,000 for the figure in
//! docs/performance.md). Reported: time until dist-b holds all of them
//! from incremental updates, and after a `kill -9` and restart of dist-b
//! the time from its start to a complete full copy. Needs root.

use std::time::{Duration, Instant};

use testkit::frame::{mac, BROADCAST};
use testkit::netns::veth;
use testkit::{l2, require_root, vswitch, Netns, RawPort, Switch};

fn config(name: &str, node: usize) -> String {
    format!(
        "switch:
  name: {name}
vlans:
  - id: 10
ports:
  - {{name: pl, mode: trunk}}
  - {{name: m1, vlan: 10}}
  - {{name: h, vlan: 10}}
port-channels:
  - {{name: po1, members: [m1], lacp: static}}
{}",
        vswitch::section(7, node, &["pl"], 0, true, "")
    )
}

fn synced(sw: &Switch) -> u64 {
    sw.try_show_json(&["show", "virtual-switch"])
        .ok()
        .and_then(|v| v["peer_link"]["messages"]["synced_macs"].as_u64())
        .unwrap_or(0)
}

fn wait_synced(sw: &Switch, want: u64, secs: u64) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if synced(sw) >= want {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn peer_link_syncs_learned_addresses_and_full_copy() {
    require_root!();
    let _g = l2::heavy();
    let n: u64 = std::env::var("LANYARD_VS_MACS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let nt = Netns::new("lyvst").unwrap();
    let na = Netns::new("lyvsa").unwrap();
    let nb = Netns::new("lyvsb").unwrap();
    vswitch::link_nodes(&na, &nb, &["pl"]).unwrap();
    veth(&na, "m1", &nt, "xa", 1500).unwrap();
    veth(&nb, "m1", &nt, "xb", 1500).unwrap();
    veth(&na, "h", &nt, "ta", 1500).unwrap();
    veth(&nb, "h", &nt, "tb", 1500).unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let ports = ["pl", "m1", "h"];
    let a = Switch::start(&bin, &na, &config("dist-a", 0), &ports).unwrap();
    let cfg_b = config("dist-b", 1);
    let mut b = Switch::start(&bin, &nb, &cfg_b, &ports).unwrap();
    vswitch::wait_paired(&[&a, &b], 10);

    // A host on dist-a's port, then n stations behind it (frames to that
    // host: learned, then filtered as same-port).
    let ta = RawPort::open(nt.name(), "ta").unwrap();
    let hx = mac(0xfff_fff);
    ta.send(&testkit::frame::test_frame(&BROADCAST, &hx, &[], 1, 0, 64))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    ta.send_paced(n as usize, 50_000, |i, buf| {
        *buf = testkit::frame::test_frame(&hx, &mac(i as u32 + 1), &[], 1, i as u64, 64)
    })
    .unwrap();
    let learned = a.wait_mac_count(Some(10), n + 1, Duration::from_secs(30));
    let t_learn = t0.elapsed();
    assert_eq!(learned, n + 1, "dist-a learned {learned} of {}", n + 1);
    let took = wait_synced(&b, n + 1, 60).map(|_| t0.elapsed());
    let vb = b.show_json(&["show", "virtual-switch"]);
    let took = took.unwrap_or_else(|| panic!("dist-b never held all {} addresses: {vb:#}", n + 1));
    assert_eq!(b.mac_count(Some(10)), n + 1, "dist-b's MAC table");
    eprintln!(
        "incremental: {} addresses learned on dist-a in {t_learn:?}, all on dist-b {took:?} after the first frame",
        n + 1
    );
    // Bound to dist-a's port outside any channel: on dist-b's peer link.
    let row = b
        .mac_table(Some(10))
        .into_iter()
        .find(|r| {
            r["mac"]
                == format!(
                    "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    hx[0], hx[1], hx[2], hx[3], hx[4], hx[5]
                )
        })
        .expect("hx on dist-b");
    assert_eq!(row["port"], "pl", "{row:#}");

    // dist-b dies and comes back: a full copy of n + 1 addresses.
    b.kill9().unwrap();
    drop(b);
    let t1 = Instant::now();
    let b = Switch::start(&bin, &nb, &cfg_b, &ports).unwrap();
    let started = t1.elapsed();
    let took = wait_synced(&b, n + 1, 60).unwrap_or_else(|| {
        panic!(
            "no full copy: {:#}",
            b.show_json(&["show", "virtual-switch"])
        )
    });
    let vb = b.show_json(&["show", "virtual-switch"]);
    eprintln!(
        "full copy: dist-b started in {started:?}, then held all {} addresses after {took:?} (copies received {}, incomplete {})",
        n + 1,
        vb["peer_link"]["messages"]["copies_rx"],
        vb["peer_link"]["messages"]["copy_mismatch"]
    );
    assert_eq!(vb["peer_link"]["messages"]["copy_mismatch"], 0, "{vb:#}");
    assert_eq!(b.mac_count(Some(10)), n + 1);
}
