//! Link aggregation against a real LACP peer (issue 7, F-HA): Lanyard's
//! port channel of four members, LACP active / fast, facing an Open
//! vSwitch bond (`lacp=active`, `bond_mode=balance-tcp`, fast LACP) on
//! OVS's userspace datapath in its own namespace. Checks: all four
//! members negotiate and distribute (on both ends), every member carries
//! traffic, nothing is lost or duplicated, and when one member's link goes
//! its flows move to the others within a few milliseconds (the lab gives
//! the figure; here a generous bound).
//!
//! ```text
//!  tester t1 ── sw1 [Lanyard] sw2..sw5 ══ o2..o5 [OVS bond0] o6 ── t6 tester
//! ```
//! Needs root and Open vSwitch (ovsdb-server, ovs-vswitchd), else SKIPPED.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use testkit::frame::{mac, Mac, BROADCAST};
use testkit::netns::veth;
use testkit::ovs::Ovs;
use testkit::seqrx::SeqReceiver;
use testkit::{ip, l2, require_root, Netns, RawPort, Switch};

const FLOWS: u32 = 256;
const RATE: u64 = 20_000;

fn wait(secs: f64, mut ok: impl FnMut() -> bool) -> Option<()> {
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        if ok() {
            return Some(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn flow_src(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8))
}

fn distributing(sw: &Switch) -> Vec<bool> {
    sw.try_show_json(&["show", "port-channel"])
        .ok()
        .and_then(|v| {
            v[0]["members"]
                .as_array()
                .map(|ms| ms.iter().map(|m| m["distributing"] == true).collect())
        })
        .unwrap_or_default()
}

fn member_tx(sw: &Switch) -> Vec<u64> {
    let c = sw.counters();
    (2..=5)
        .map(|i| testkit::switch::port_counter(&c, &format!("sw{i}"), "tx_frames"))
        .collect()
}

#[test]
fn four_member_bundle_with_open_vswitch() {
    require_root!();
    if !testkit::ovs::available() {
        eprintln!("SKIPPED: Open vSwitch is not installed");
        return;
    }
    let _g = l2::heavy();
    let tester = Netns::new("lyla-t").unwrap();
    let dut = Netns::new("lyla-d").unwrap();
    let ovsns = Netns::new("lyla-o").unwrap();
    veth(&tester, "t1", &dut, "sw1", 1500).unwrap();
    for i in 2..=5 {
        veth(&dut, &format!("sw{i}"), &ovsns, &format!("o{i}"), 1500).unwrap();
    }
    veth(&ovsns, "o6", &tester, "t6", 1500).unwrap();

    let tmp = std::env::temp_dir().join(format!("lyla-ovs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let ovs = Ovs::start(&ovsns, &tmp).expect("start OVS");
    ovs.add_userspace_bridge("br0", &[]).unwrap();
    ovs.vsctl(&[
        "add-bond",
        "br0",
        "bond0",
        "o2",
        "o3",
        "o4",
        "o5",
        "lacp=active",
        "bond_mode=balance-tcp",
        "other_config:lacp-time=fast",
    ])
    .unwrap();
    ovs.vsctl(&["add-port", "br0", "o6"]).unwrap();

    let yaml = "switch:\n  name: lacp-dut\nports:\n  - {name: sw1}\n  - {name: sw2}\n  - {name: sw3}\n  - {name: sw4}\n  - {name: sw5}\n\
                port-channels:\n  - {name: po1, members: [sw2, sw3, sw4, sw5], lacp: active, lacp-rate: fast, load-balance: l3l4}\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &dut,
        yaml,
        &["sw1", "sw2", "sw3", "sw4", "sw5"],
    )
    .expect("start lanyard");

    // Negotiation: all four distribute on Lanyard's side and OVS's.
    let t0 = Instant::now();
    let up = wait(20.0, || distributing(&sw) == vec![true; 4]);
    let pc = sw
        .try_show_json(&["show", "port-channel"])
        .unwrap_or_default();
    let bond = ovs.appctl(&["bond/show", "bond0"]);
    assert!(
        up.is_some(),
        "LACP did not bring all members up in 20 s\nlanyard: {pc:#}\novs: {bond}\n{}",
        ovs.appctl(&["lacp/show", "bond0"])
    );
    eprintln!("all 4 members distributing after {:?}", t0.elapsed());
    let ovs_ok = wait(10.0, || {
        ovs.appctl(&["bond/show", "bond0"])
            .matches("may_enable: true")
            .count()
            == 4
            || ovs
                .appctl(&["bond/show", "bond0"])
                .matches(": enabled")
                .count()
                >= 4
    });
    assert!(
        ovs_ok.is_some(),
        "OVS members: {}",
        ovs.appctl(&["bond/show", "bond0"])
    );
    assert!(pc[0]["members"][0]["partner"].is_object(), "{pc:#}");

    let p1 = RawPort::open(tester.name(), "t1").unwrap();
    let p6 = RawPort::open(tester.name(), "t6").unwrap();
    let (ha, hb) = (mac(0xa1), mac(0xb6));
    // Each host announces itself so both switches learn it.
    let hello = |p: &RawPort, src: &Mac| {
        let f = testkit::frame::test_frame(&BROADCAST, src, &[], 1, 0, 64);
        p.send(&f).unwrap();
    };
    hello(&p6, &hb);
    std::thread::sleep(Duration::from_millis(200));
    hello(&p1, &ha);
    std::thread::sleep(Duration::from_millis(300));
    let rx = SeqReceiver::start(p6.try_clone().unwrap(), ha);

    // Every member carries traffic; nothing lost or duplicated.
    let before = member_tx(&sw);
    let n = 20_000usize;
    let dst = IpAddr::V4(Ipv4Addr::new(10, 2, 0, 6));
    p1.send_paced(n, RATE, |i, b| {
        *b = ip::udp(&hb, &ha, flow_src(i as u32 % FLOWS), dst, 64, i as u64, 128)
    })
    .unwrap();
    let got = rx.wait_quiet(Duration::from_millis(300));
    let per: Vec<u64> = member_tx(&sw)
        .iter()
        .zip(&before)
        .map(|(a, b)| a - b)
        .collect();
    eprintln!("sent {n}, received {got}, per member {per:?}");
    assert_eq!(got, n as u64, "loss through the bundle");
    assert_eq!(rx.dups(), 0);
    for (k, c) in per.iter().enumerate() {
        assert!(
            *c as usize > n / 10,
            "member sw{} carried only {c} of {n}",
            k + 2
        );
    }

    // A member fails under a constant-rate stream: its flows move.
    rx.reset();
    let total = (RATE * 3 / 2) as usize;
    let sender = p1.try_clone().unwrap();
    let tx = std::thread::spawn(move || {
        sender
            .send_paced(total, RATE, |i, b| {
                *b = ip::udp(&hb, &ha, flow_src(i as u32 % FLOWS), dst, 64, i as u64, 128)
            })
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(500));
    ovsns.exec(&["ip", "link", "set", "o3", "down"]).unwrap();
    let took = tx.join().unwrap();
    let got = rx.wait_quiet(Duration::from_millis(300));
    let rate = total as f64 / took.as_secs_f64();
    let lost = total as u64 - got;
    eprintln!(
        "member down: sent {total} at {rate:.0} fps, received {got}, lost {lost} = {:.2} ms",
        lost as f64 * 1000.0 / rate
    );
    assert_eq!(rx.dups(), 0);
    assert!(
        (lost as f64) < rate * 0.05,
        "lost {lost} frames: more than 50 ms of traffic"
    );
    assert_eq!(distributing(&sw), vec![true, false, true, true]);
    // And back: the member rejoins by LACP.
    ovsns.exec(&["ip", "link", "set", "o3", "up"]).unwrap();
    let back = wait(15.0, || distributing(&sw) == vec![true; 4]);
    assert!(
        back.is_some(),
        "{:#}",
        sw.try_show_json(&["show", "port-channel"])
            .unwrap_or_default()
    );
    drop(rx);
    drop(sw);
    drop(ovs);
    let _ = std::fs::remove_dir_all(&tmp);
}
