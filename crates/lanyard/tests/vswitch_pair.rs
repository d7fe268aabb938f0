//! Two Lanyards as one virtual switch (issue 19), end to end: a peer
//! link between them, a keepalive on its own veth, and an Open vSwitch
//! bond (LACP active, fast, balance-tcp) with two members on each node.
//!
//! ```text
//!            ta ── h [dist-a] m1,m2 ══ o1,o2 ┐
//!                      │ pl   ka              [OVS bond0] o5 ── tp
//!                      │ pl   ka              │
//!            tb ── h [dist-b] m1,m2 ══ o3,o4 ┘
//! ```
//!
//! (a) all four members collect and distribute, traffic in both
//! directions uses members on both nodes, 20,000 numbered frames arrive
//! exactly once; (b) `kill -9` of one node under constant traffic: the
//! survivor carries every stream, nothing is duplicated, the outage per
//! stream is printed; (c) the peer link cut: dual-active, the secondary's
//! members leave the bond, nothing is delivered twice, and the pair is
//! back to paired with all four members when the link returns.
//! Needs root and Open vSwitch, else SKIPPED.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::frame::{mac, Mac, BROADCAST};
use testkit::netns::veth;
use testkit::ovs::Ovs;
use testkit::seqrx::SeqReceiver;
use testkit::{ip, l2, require_root, vswitch, Netns, RawPort, Switch};

const FLOWS: u32 = 64;
/// Frames per second offered (OVS's userspace datapath on 2 shared cores;
/// at 10,000 a CI run once lost 1 % of a burst before it reached the
/// members).
const RATE: u64 = 5_000;

fn config(name: &str, node: usize) -> String {
    format!(
        "switch:
  name: {name}
vlans:
  - id: 10
ports:
  - {{name: pl, mode: trunk}}
  - {{name: m1, vlan: 10}}
  - {{name: m2, vlan: 10}}
  - {{name: h, vlan: 10}}
port-channels:
  - {{name: po1, members: [m1, m2], lacp: active, lacp-rate: fast, load-balance: l3l4}}
{}",
        vswitch::section(7, node, &["pl"], 1, true, "")
    )
}

struct Bed {
    // Dropped in field order: switches and OVS before their namespaces.
    a: Switch,
    b: Switch,
    ovs: Ovs,
    tmp: PathBuf,
    na: Netns,
    nb: Netns,
    no: Netns,
    nt: Netns,
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

fn wait(secs: f64, mut ok: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn vs(sw: &Switch) -> Value {
    sw.try_show_json(&["show", "virtual-switch"])
        .unwrap_or_default()
}

fn distributing(sw: &Switch) -> Vec<bool> {
    sw.channel_distributing()
}

fn ovs_enabled(ovs: &Ovs) -> usize {
    ovs.appctl(&["bond/show", "bond0"])
        .matches("may_enable: true")
        .count()
}

fn counter(sw: &Switch, port: &str, key: &str) -> u64 {
    testkit::switch::port_counter(&sw.counters(), port, key)
}

fn members(sw: &Switch, key: &str) -> [u64; 2] {
    let c = sw.counters();
    [
        testkit::switch::port_counter(&c, "m1", key),
        testkit::switch::port_counter(&c, "m2", key),
    ]
}

impl Bed {
    fn new(prefix: &str) -> Option<Bed> {
        Bed::with(prefix, config)
    }

    /// The bed with each node's configuration from `config(name, node)`
    /// (ports pl, m1, m2, h).
    fn with(prefix: &str, config: fn(&str, usize) -> String) -> Option<Bed> {
        if !testkit::ovs::available() {
            eprintln!("SKIPPED: Open vSwitch is not installed");
            return None;
        }
        let nt = Netns::new(&format!("{prefix}t")).unwrap();
        let na = Netns::new(&format!("{prefix}a")).unwrap();
        let nb = Netns::new(&format!("{prefix}b")).unwrap();
        let no = Netns::new(&format!("{prefix}o")).unwrap();
        vswitch::link_nodes(&na, &nb, &["pl"]).unwrap();
        veth(&na, "m1", &no, "o1", 1500).unwrap();
        veth(&na, "m2", &no, "o2", 1500).unwrap();
        veth(&nb, "m1", &no, "o3", 1500).unwrap();
        veth(&nb, "m2", &no, "o4", 1500).unwrap();
        veth(&no, "o5", &nt, "tp", 1500).unwrap();
        veth(&na, "h", &nt, "ta", 1500).unwrap();
        veth(&nb, "h", &nt, "tb", 1500).unwrap();
        let tmp = std::env::temp_dir().join(format!("{prefix}-ovs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let ovs = Ovs::start(&no, &tmp).expect("start OVS");
        ovs.add_userspace_bridge("br0", &[]).unwrap();
        ovs.vsctl(&[
            "add-bond",
            "br0",
            "bond0",
            "o1",
            "o2",
            "o3",
            "o4",
            "lacp=active",
            "bond_mode=balance-tcp",
            "other_config:lacp-time=fast",
            // Hash buckets go to the first enabled member and move by
            // load at each rebalance: every second, so warm-up traffic
            // spreads them over all four.
            "other_config:bond-rebalance-interval=1000",
        ])
        .unwrap();
        ovs.vsctl(&["add-port", "br0", "o5"]).unwrap();
        let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
        let ports = ["pl", "m1", "m2", "h"];
        let a = Switch::start(&bin, &na, &config("dist-a", 0), &ports).expect("start dist-a");
        let b = Switch::start(&bin, &nb, &config("dist-b", 1), &ports).expect("start dist-b");
        Some(Bed {
            a,
            b,
            ovs,
            tmp,
            na,
            nb,
            no,
            nt,
        })
    }

    /// Paired, both nodes' members up, all four distributing on both
    /// ends of the bond.
    fn wait_paired(&self, secs: f64) {
        let ok = wait(secs, || {
            [&self.a, &self.b].iter().all(|s| {
                let v = vs(s);
                v["status"] == "paired" && v["multichassis_members"] == "up"
            }) && distributing(&self.a) == [true, true]
                && distributing(&self.b) == [true, true]
                && ovs_enabled(&self.ovs) == 4
        });
        assert!(
            ok,
            "not paired with 4 members in {secs} s\na: {:#}\nb: {:#}\npo a: {:?} b: {:?}\novs: {}\n{}",
            vs(&self.a),
            vs(&self.b),
            distributing(&self.a),
            distributing(&self.b),
            self.ovs.appctl(&["bond/show", "bond0"]),
            self.ovs.appctl(&["lacp/show", "bond0"]),
        );
    }

    fn port(&self, name: &str) -> RawPort {
        RawPort::open(self.nt.name(), name).unwrap()
    }
}

const HP: u32 = 0xd1;
const HA: u32 = 0xa1;
const HB: u32 = 0xb1;

/// Paced UDP over FLOWS flows both ways at once: the partner's host
/// (`tp`, MAC `h.0`) to dist-b's (`tb`, `h.1`) and back, `n` frames each
/// at `rate`; the senders' threads (each returns how long it took).
fn both_ways(
    tp: &RawPort,
    tb: &RawPort,
    h: (Mac, Mac),
    n: usize,
    rate: u64,
) -> (
    std::thread::JoinHandle<Duration>,
    std::thread::JoinHandle<Duration>,
) {
    let send = |port: &RawPort, src: Mac, dst: Mac| {
        let port = port.try_clone().unwrap();
        std::thread::spawn(move || {
            port.send_paced(n, rate, |i, b| {
                *b = ip::udp(
                    &dst,
                    &src,
                    flow_ip(i as u32 % FLOWS),
                    dst_ip(),
                    64,
                    i as u64,
                    128,
                )
            })
            .unwrap()
        })
    };
    (send(tp, h.0, h.1), send(tb, h.1, h.0))
}

fn flow_ip(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8))
}

fn dst_ip() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1))
}

/// Each host announces itself (broadcast), so every switch learns it.
fn announce(ports: &[(&RawPort, Mac)]) {
    for (p, m) in ports {
        p.send(&testkit::frame::test_frame(&BROADCAST, m, &[], 1, 0, 64))
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(400));
}

/// `n` numbered frames from `src` to `dst` over `FLOWS` flows.
fn send(p: &RawPort, n: usize, rate: u64, src: Mac, dst: Mac, first: u64) {
    p.send_paced(n, rate, |i, b| {
        *b = ip::udp(
            &dst,
            &src,
            flow_ip(i as u32 % FLOWS),
            dst_ip(),
            64,
            first + i as u64,
            128,
        )
    })
    .unwrap();
}

/// Traffic from the partner until OVS's rebalancing has put flows on
/// every member (at most 8 s).
fn warm_up(bed: &Bed, tp: &RawPort, src: Mac, dst: Mac) {
    let t0 = Instant::now();
    let used = |sw: &Switch| members(sw, "rx_frames");
    while t0.elapsed() < Duration::from_secs(8) {
        let (a0, b0) = (used(&bed.a), used(&bed.b));
        send(tp, 2_000, 10_000, src, dst, 1 << 40);
        let (a1, b1) = (used(&bed.a), used(&bed.b));
        let per = [a1[0] - a0[0], a1[1] - a0[1], b1[0] - b0[0], b1[1] - b0[1]];
        if per.iter().all(|c| *c > 100) {
            eprintln!(
                "warm-up: OVS uses all four members after {:?}",
                t0.elapsed()
            );
            return;
        }
    }
    eprintln!(
        "warm-up: OVS did not spread flows in 8 s\n{}",
        bed.ovs.appctl(&["bond/show", "bond0"])
    );
}

#[test]
fn ovs_bond_across_the_pair_delivers_exactly_once() {
    require_root!();
    let _g = l2::heavy();
    let Some(bed) = Bed::new("lyvp1") else {
        return;
    };
    let t0 = Instant::now();
    bed.wait_paired(30.0);
    eprintln!("paired, 4 members distributing after {:?}", t0.elapsed());
    let va = vs(&bed.a);
    assert_eq!(va["role"], "primary", "{va:#}");
    assert_eq!(vs(&bed.b)["role"], "secondary");
    // One partner system on all four members (the pair's system MAC).
    let lacp = bed.ovs.appctl(&["lacp/show", "bond0"]);
    assert_eq!(
        lacp.matches("partner sys_id: 02:00:00:00:07:00").count(),
        4,
        "{lacp}"
    );
    // Both nodes see that one partner (OVS's system and key) on their
    // own members and in the peer's LACP view.
    assert!(
        wait(3.0, || [&bed.a, &bed.b].iter().all(|sw| {
            let c = &vs(sw)["channels"][0];
            !c["partner"].is_null() && c["partner"] == c["peer_partner"]
        })),
        "partner views: a {:#} b {:#}",
        vs(&bed.a)["channels"],
        vs(&bed.b)["channels"]
    );
    let text = String::from_utf8_lossy(&bed.a.cli(&["show", "virtual-switch"]).unwrap().stdout)
        .to_string();
    assert!(text.contains("LACP partner (peer)"), "{text}");
    assert_eq!(vs(&bed.a)["peer_link"]["messages"]["partner_mismatch"], 0);

    let (tp, ta, tb) = (bed.port("tp"), bed.port("ta"), bed.port("tb"));
    let (hp, ha, hb) = (mac(HP), mac(HA), mac(HB));
    announce(&[(&tp, hp), (&ta, ha), (&tb, hb)]);
    // Addresses cross the peer link bound to the channel or the peer's port.
    assert!(
        wait(5.0, || vs(&bed.a)["peer_link"]["messages"]["synced_macs"]
            .as_u64()
            .unwrap_or(0)
            >= 1
            && vs(&bed.b)["peer_link"]["messages"]["synced_macs"]
                .as_u64()
                .unwrap_or(0)
                >= 1),
        "a: {:#}\nb: {:#}",
        vs(&bed.a),
        vs(&bed.b)
    );

    // Partner → node hosts: OVS spreads the flows over all four members
    // (after a warm-up lets its rebalancing move hash buckets); what
    // enters dist-b for ha crosses the peer link once.
    let rx_a = SeqReceiver::start(bed.port("ta"), hp);
    warm_up(&bed, &tp, hp, ha);
    rx_a.reset();
    let (ra, rb) = (members(&bed.a, "rx_frames"), members(&bed.b, "rx_frames"));
    send(&tp, 10_000, RATE, hp, ha, 0);
    let got = rx_a.wait_quiet(Duration::from_millis(300));
    let ra2 = members(&bed.a, "rx_frames");
    let rb2 = members(&bed.b, "rx_frames");
    let per = [
        ra2[0] - ra[0],
        ra2[1] - ra[1],
        rb2[0] - rb[0],
        rb2[1] - rb[1],
    ];
    eprintln!("partner -> ha: 10000 sent, {got} received, {} dups, per member rx (a.m1 a.m2 b.m1 b.m2) {per:?}", rx_a.dups());
    assert_eq!(rx_a.dups(), 0, "a frame delivered twice");
    assert_eq!(
        got,
        10_000,
        "partner -> ha; node a:{}\nnode b:{}",
        l2::diagnostics(&bed.a, &bed.na, &["m1", "m2", "pl", "h"]),
        l2::diagnostics(&bed.b, &bed.nb, &["m1", "m2", "pl", "h"])
    );
    for (k, c) in per.iter().enumerate() {
        assert!(
            *c > 10_000 / 20,
            "member {k} carried only {c}\n{}",
            bed.ovs.appctl(&["bond/show", "bond0"])
        );
    }

    // Node hosts → partner: each node leaves by its own members.
    // One receiver at a time: two raw sockets reading every frame of the
    // port would compete for the 2 shared cores.
    let (ta0, tb0) = (members(&bed.a, "tx_frames"), members(&bed.b, "tx_frames"));
    let pl_b = counter(&bed.b, "pl", "tx_frames");
    // (A clone shares its socket: each receiver opens its own.)
    drop(rx_a);
    let rx_p_a = SeqReceiver::start(bed.port("tp"), ha);
    send(&ta, 5_000, RATE, ha, hp, 0);
    let got_a = rx_p_a.wait_quiet(Duration::from_millis(300));
    let dups_a = rx_p_a.dups();
    drop(rx_p_a);
    let rx_p_b = SeqReceiver::start(bed.port("tp"), hb);
    send(&tb, 5_000, RATE, hb, hp, 0);
    let got_b = rx_p_b.wait_quiet(Duration::from_millis(300));
    let (ta1, tb1) = (members(&bed.a, "tx_frames"), members(&bed.b, "tx_frames"));
    let crossed = counter(&bed.b, "pl", "tx_frames") - pl_b;
    eprintln!(
        "ha -> partner {got_a}/5000, hb -> partner {got_b}/5000; member tx a {:?} b {:?}; dist-b peer-link tx {crossed} (hellos and sync included)",
        [ta1[0] - ta0[0], ta1[1] - ta0[1]],
        [tb1[0] - tb0[0], tb1[1] - tb0[1]]
    );
    assert_eq!((dups_a, rx_p_b.dups()), (0, 0), "a frame delivered twice");
    if (got_a, got_b) != (5_000, 5_000) {
        for o in ["o1", "o2", "o3", "o4", "o5"] {
            eprintln!("{o}: {:?}", l2::kernel_stats(&bed.no, o));
        }
        eprintln!(
            "{}\n{}\n{}",
            bed.ovs.appctl(&["bond/show", "bond0"]),
            bed.ovs.appctl(&["dpctl/dump-flows"]),
            bed.ovs.appctl(&["fdb/show", "br0"])
        );
        let log = std::fs::read_to_string(bed.ovs.dir().join("vswitchd.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        eprintln!("{}", bed.ovs.appctl(&["dpif/show"]));
    }
    assert_eq!((got_a, got_b), (5_000, 5_000));
    assert!(
        ta1[0] + ta1[1] - ta0[0] - ta0[1] >= 5_000,
        "dist-a did not use its members"
    );
    assert!(
        tb1[0] + tb1[1] - tb0[0] - tb0[1] >= 5_000,
        "dist-b did not use its members"
    );
    // Local preference: dist-b's own traffic did not cross the peer link.
    assert!(
        crossed < 1_000,
        "dist-b sent {crossed} frames over the peer link"
    );
    let text = String::from_utf8(bed.a.cli(&["show", "virtual-switch"]).unwrap().stdout).unwrap();
    eprintln!("{text}");
    assert!(text.contains("status paired"), "{text}");
    assert!(text.contains("synced MACs"), "{text}");
    let _ = (&bed.na, &bed.nb, &bed.no);
}

/// Longest per-stream outage accepted when a node is killed (ms).
const MAX_OUTAGE_MS: f64 = 200.0;

/// Whether `port` in `ns` is administratively up.
fn admin_up(ns: &Netns, port: &str) -> bool {
    ns.exec(&["ip", "-o", "link", "show", port])
        .map(|o| {
            let s = String::from_utf8_lossy(&o.stdout).to_string();
            s.split(['<', '>'])
                .nth(1)
                .is_some_and(|f| f.split(',').any(|x| x == "UP"))
        })
        .unwrap_or(false)
}

/// Whether OVS's end `port` has carrier.
fn carrier(ns: &Netns, port: &str) -> bool {
    ns.exec(&["ip", "-o", "link", "show", port])
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("LOWER_UP"))
        .unwrap_or(false)
}

/// Received count per stream (`seq % FLOWS`) among `seqs` below `n`.
fn per_stream(seqs: &[u64], n: u64) -> Vec<u64> {
    let mut c = vec![0u64; FLOWS as usize];
    for s in seqs.iter().filter(|s| **s < n) {
        c[(*s % FLOWS as u64) as usize] += 1;
    }
    c
}

#[test]
fn node_killed_under_traffic_survivor_carries_every_stream() {
    require_root!();
    let _g = l2::heavy();
    let Some(mut bed) = Bed::new("lyvp2") else {
        return;
    };
    bed.wait_paired(30.0);
    let (tp, tb) = (bed.port("tp"), bed.port("tb"));
    let (hp, hb) = (mac(HP), mac(HB));
    announce(&[(&tp, hp), (&tb, hb)]);
    warm_up(&bed, &tp, hp, hb);

    // Constant traffic both ways between the partner's host and dist-b's;
    // dist-a (the primary) is killed a second in.
    const RATE_EACH: u64 = 4_000;
    let n = (RATE_EACH * 6) as usize;
    let rx_b = SeqReceiver::start(bed.port("tb"), hp);
    let rx_p = SeqReceiver::start(bed.port("tp"), hb);
    let (fwd, rev) = both_ways(&tp, &tb, (hp, hb), n, RATE_EACH);
    std::thread::sleep(Duration::from_secs(1));
    let killed = Instant::now();
    bed.a.kill9().expect("kill -9 dist-a");
    // dist-a's guardian: its members go dark and dist-b hears a goodbye.
    let alone = wait(3.0, || vs(&bed.b)["status"] == "peer-down").then(|| killed.elapsed());
    let dark = wait(3.0, || {
        !admin_up(&bed.na, "m1") && !admin_up(&bed.na, "m2") && ovs_enabled(&bed.ovs) == 2
    })
    .then(|| killed.elapsed());
    eprintln!("after the kill: dist-b alone after {alone:?}, dist-a's members dark and out of the bond after {dark:?}");
    let took_f = fwd.join().unwrap();
    let took_r = rev.join().unwrap();
    rx_b.wait_quiet(Duration::from_millis(300));
    rx_p.wait_quiet(Duration::from_millis(300));
    let vb = vs(&bed.b);
    eprintln!(
        "dist-a killed; dist-b now {} / {} / members {} ({:?} after the kill)",
        vb["status"],
        vb["role"],
        vb["multichassis_members"],
        killed.elapsed()
    );
    assert_eq!(vb["status"], "peer-down", "{vb:#}");
    assert_eq!(vb["role"], "primary");
    assert_eq!(vb["multichassis_members"], "up");
    assert_eq!(
        vb["goodbyes"], 1,
        "no goodbye from dist-a's guardian: {vb:#}"
    );
    // Without the guardian dist-b waits for its keepalive timeout (500 ms)
    // and OVS for its LACP timeout (3 s).
    assert!(
        alone.is_some_and(|t| t < Duration::from_millis(400)),
        "dist-b alone after {alone:?}"
    );
    assert!(dark.is_some(), "dist-a's members still up or in OVS's bond");
    assert_eq!(
        (rx_b.dups(), rx_p.dups()),
        (0, 0),
        "a frame delivered twice"
    );

    let sent_per = n as u64 / FLOWS as u64;
    for (name, rx, took) in [
        ("partner -> hb", &rx_b, took_f),
        ("hb -> partner", &rx_p, took_r),
    ] {
        let seqs = rx.seqs();
        let got = per_stream(&seqs, n as u64);
        let rate = sent_per as f64 / took.as_secs_f64();
        let outage: Vec<f64> = got
            .iter()
            .map(|g| (sent_per - g) as f64 * 1000.0 / rate)
            .collect();
        let max = outage.iter().cloned().fold(0.0, f64::max);
        let avg = outage.iter().sum::<f64>() / outage.len() as f64;
        let hit = outage.iter().filter(|o| **o > 0.0).count();
        eprintln!(
            "{name}: {} of {n} delivered; per-stream outage over {FLOWS} streams: max {max:.0} ms, avg {avg:.0} ms, {hit} streams hit; {outage:.0?}",
            seqs.len()
        );
        // Carrier loss, not the LACP timeout (2.5 s before the guardian):
        // the goal is 50 ms; the bound leaves room for a loaded machine.
        assert!(
            max < MAX_OUTAGE_MS,
            "{name}: a stream lost {max:.0} ms (bound {MAX_OUTAGE_MS} ms)"
        );
        // Every stream survives: its last second arrived in full.
        let tail_from = n as u64 - RATE_EACH;
        let tail = seqs.iter().filter(|s| **s >= tail_from).count() as u64;
        assert_eq!(
            tail, RATE_EACH,
            "{name}: the survivor did not carry every stream in the last second"
        );
    }
    let _ = (&bed.na, &bed.nb, &bed.no);
}

#[test]
fn peer_link_cut_dual_active_no_duplicates_and_back() {
    require_root!();
    let _g = l2::heavy();
    let Some(bed) = Bed::new("lyvp3") else {
        return;
    };
    bed.wait_paired(30.0);
    let (tp, ta, tb) = (bed.port("tp"), bed.port("ta"), bed.port("tb"));
    let (hp, ha, hb) = (mac(HP), mac(HA), mac(HB));
    announce(&[(&tp, hp), (&ta, ha), (&tb, hb)]);
    warm_up(&bed, &tp, hp, ha);

    // Cut the peer link (both ends lose carrier).
    bed.na.exec(&["ip", "link", "set", "pl", "down"]).unwrap();
    let t0 = Instant::now();
    let split = wait(10.0, || {
        let (a, b) = (vs(&bed.a), vs(&bed.b));
        a["status"] == "dual-active"
            && b["status"] == "dual-active"
            && b["multichassis_members"] == "down: dual-active, secondary"
            && distributing(&bed.b) == [false, false]
            && distributing(&bed.a) == [true, true]
            && ovs_enabled(&bed.ovs) == 2
    });
    assert!(
        split,
        "a: {:#}\nb: {:#}\novs: {}",
        vs(&bed.a),
        vs(&bed.b),
        bed.ovs.appctl(&["bond/show", "bond0"])
    );
    eprintln!(
        "peer link cut: dual-active, dist-b's members out of the bond after {:?}",
        t0.elapsed()
    );
    assert_eq!(vs(&bed.b)["role"], "secondary");

    // Split: unicast and flooded (unknown destination) frames from the
    // partner arrive once.
    let unknown = mac(0xee);
    let check = |what: &str, dst: Mac, to: &[(&str, bool)]| {
        let rxs: Vec<(String, SeqReceiver)> = to
            .iter()
            .filter(|(_, want)| *want)
            .map(|(p, _)| (p.to_string(), SeqReceiver::start(bed.port(p), hp)))
            .collect();
        // A copy sent back into the bond comes out at the partner's host.
        let echo = SeqReceiver::start(bed.port("tp"), hp);
        send(&tp, 5_000, RATE, hp, dst, 0);
        let back = echo.wait_quiet(Duration::from_millis(300));
        assert_eq!(
            back, 0,
            "{what}: {back} frames came back into the bond (a loop)"
        );
        for (p, rx) in &rxs {
            let got = rx.wait_quiet(Duration::from_millis(300));
            eprintln!("{what}: {p} received {got} of 5000, {} twice", rx.dups());
            assert_eq!(rx.dups(), 0, "{what}: a frame delivered twice at {p}");
            assert_eq!(got, 5_000, "{what}: loss at {p}");
        }
    };
    check("split, unicast to ha", ha, &[("ta", true)]);
    check("split, flooded", unknown, &[("ta", true)]);

    // The link returns: paired, dist-b resyncs and rejoins after its
    // restore delay; nothing loops.
    bed.na.exec(&["ip", "link", "set", "pl", "up"]).unwrap();
    let t1 = Instant::now();
    bed.wait_paired(20.0);
    eprintln!(
        "peer link back: paired with 4 members after {:?}",
        t1.elapsed()
    );
    let vb = vs(&bed.b);
    assert!(
        vb["peer_link"]["messages"]["copies_rx"]
            .as_u64()
            .unwrap_or(0)
            >= 2,
        "no second full copy after the rejoin: {vb:#}"
    );
    // Flooding after the rejoin reaches both nodes' hosts once each (no
    // copy back across the peer link into the bond).
    warm_up(&bed, &tp, hp, ha);
    check("rejoined, flooded", unknown, &[("ta", true), ("tb", true)]);
    check("rejoined, unicast to hb", hb, &[("tb", true)]);
    let _ = (&bed.nb, &bed.no);
}

/// A planned restart (`lanyard restart`) keeps the node's links up (its
/// guardian stands down and the new image forks its own); a clean stop
/// takes its channel members down at once, so the partner fails over at
/// carrier loss instead of its LACP timeout.
#[test]
fn planned_restart_keeps_links_stop_takes_members_down() {
    require_root!();
    let _g = l2::heavy();
    let Some(mut bed) = Bed::new("lyvp4") else {
        return;
    };
    bed.wait_paired(30.0);
    let guards = |ns: &Netns| -> usize {
        std::process::Command::new("ip")
            .args(["netns", "pids", ns.name()])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .filter(|p| {
                        std::fs::read_to_string(format!("/proc/{p}/comm"))
                            .is_ok_and(|c| c.trim() == "lanyard-guard")
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    assert_eq!(guards(&bed.na), 1, "dist-a has no guardian");

    // Restart under traffic both ways and a carrier watch: OVS's ends of
    // dist-a's members never lose carrier, and OVS never takes them out of
    // the bond (the new image starts warm and resumes LACP: before, its
    // members left the bond for the peer's copy and the restore delay).
    let (tp, tb) = (bed.port("tp"), bed.port("tb"));
    let (hp, hb) = (mac(HP), mac(HB));
    announce(&[(&tp, hp), (&tb, hb)]);
    warm_up(&bed, &tp, hp, hb);
    const RATE_EACH: u64 = 4_000;
    let n = (RATE_EACH * 4) as usize;
    let rx_b = SeqReceiver::start(bed.port("tb"), hp);
    let rx_p = SeqReceiver::start(bed.port("tp"), hb);
    let (fwd, rev) = both_ways(&tp, &tb, (hp, hb), n, RATE_EACH);
    std::thread::sleep(Duration::from_millis(500));
    let out = bed.a.cli(&["restart"]).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t0 = Instant::now();
    let (mut dropped, mut fewest) = (0, 4);
    while t0.elapsed() < Duration::from_secs(3) {
        if !carrier(&bed.no, "o1") || !carrier(&bed.no, "o2") {
            dropped += 1;
        }
        fewest = fewest.min(ovs_enabled(&bed.ovs));
        std::thread::sleep(Duration::from_millis(10));
    }
    fwd.join().unwrap();
    rev.join().unwrap();
    rx_b.wait_quiet(Duration::from_millis(300));
    rx_p.wait_quiet(Duration::from_millis(300));
    let mut report = String::new();
    for (name, rx) in [("partner -> hb", &rx_b), ("hb -> partner", &rx_p)] {
        let got = rx.seqs().iter().filter(|s| **s < n as u64).count() as u64;
        report += &format!(
            "{name}: lost {} of {n}, {} twice; ",
            n as u64 - got,
            rx.dups()
        );
    }
    let log = bed.a.log();
    eprintln!(
        "planned restart of dist-a under {RATE_EACH} frames/s each way: {report}OVS kept {fewest} of 4 members"
    );
    assert_eq!(
        dropped, 0,
        "dist-a's members lost carrier during a planned restart"
    );
    assert!(log.contains("the new image starts warm"), "{log}");
    assert!(log.contains("warm start after a restart"), "{log}");
    assert_eq!(
        fewest, 4,
        "OVS took dist-a's members out during a planned restart"
    );
    assert_eq!((rx_b.dups(), rx_p.dups()), (0, 0), "{report}");
    for rx in [&rx_b, &rx_p] {
        let got = rx.seqs().iter().filter(|s| **s < n as u64).count() as u64;
        // OVS's userspace datapath drops bursts of its own on this
        // machine: a few frames, not the members' absence.
        assert!(n as u64 - got <= RATE_EACH / 25, "{report}");
    }
    bed.wait_paired(20.0);
    assert_eq!(guards(&bed.na), 1, "one guardian after the restart");
    assert!(
        bed.a.log().contains("guardian pid"),
        "the new image forked no guardian:\n{}",
        bed.a.log()
    );

    // Clean stop: dist-a's members go dark, OVS keeps dist-b's two, dist-b
    // is alone at once (goodbye), and the guardian is gone.
    bed.a.stop().unwrap();
    let t1 = Instant::now();
    let dark = wait(3.0, || !carrier(&bed.no, "o1") && !carrier(&bed.no, "o2"));
    let took = t1.elapsed();
    assert!(dark, "dist-a's members still have carrier after a stop");
    assert!(carrier(&bed.no, "o3") && carrier(&bed.no, "o4"));
    assert!(
        wait(3.0, || ovs_enabled(&bed.ovs) == 2),
        "OVS still uses dist-a's members"
    );
    assert!(wait(3.0, || vs(&bed.b)["status"] == "peer-down"));
    assert_eq!(vs(&bed.b)["goodbyes"], 1);
    assert!(
        wait(2.0, || guards(&bed.na) == 0),
        "the guardian outlived its work"
    );
    eprintln!("clean stop: dist-a's members dark {took:?} after the stop returned");
    let _ = (&bed.nb, &bed.nt);
}

/// A killed node comes back under constant traffic: the survivor keeps
/// its members (it carries everything) while the returning node, though
/// primary, waits for the survivor's full copy and its restore delay; its
/// members then join OVS's bond. Nothing may be lost beyond the bond's
/// rehash, nothing delivered twice.
#[test]
fn node_rejoins_under_traffic_without_loss_or_duplicates() {
    require_root!();
    let _g = l2::heavy();
    let Some(mut bed) = Bed::new("lyvp5") else {
        return;
    };
    bed.wait_paired(30.0);
    let (tp, tb) = (bed.port("tp"), bed.port("tb"));
    let (hp, hb) = (mac(HP), mac(HB));
    announce(&[(&tp, hp), (&tb, hb)]);
    warm_up(&bed, &tp, hp, hb);
    bed.a.kill9().expect("kill -9 dist-a");
    // LANYARD_VS_POWER=1: as the lab's power-off, every link of dist-a
    // down while it is off, up again just before it starts.
    let power = std::env::var("LANYARD_VS_POWER").is_ok_and(|v| v == "1");
    let links = |state: &str| {
        for p in ["pl", "ka", "m1", "m2", "h"] {
            bed.na
                .exec(&["ip", "link", "set", "dev", p, state])
                .unwrap();
        }
    };
    if power {
        links("down");
    }
    assert!(
        wait(5.0, || vs(&bed.b)["status"] == "peer-down"
            && ovs_enabled(&bed.ovs) == 2),
        "dist-b not alone with two members"
    );

    const RATE_EACH: u64 = 4_000;
    let n = (RATE_EACH * 5) as usize;
    let rx_b = SeqReceiver::start(bed.port("tb"), hp);
    let rx_p = SeqReceiver::start(bed.port("tp"), hb);
    let (fwd, rev) = both_ways(&tp, &tb, (hp, hb), n, RATE_EACH);
    std::thread::sleep(Duration::from_millis(300));
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    if power {
        links("up");
    }
    let t0 = Instant::now();
    bed.a = Switch::start(
        &bin,
        &bed.na,
        &config("dist-a", 0),
        &["pl", "m1", "m2", "h"],
    )
    .expect("restart dist-a");
    // dist-b never takes its members down for the returning primary.
    let mut b_dropped = None;
    let back = wait(4.0, || {
        let d = distributing(&bed.b);
        if d.len() == 2 && d != [true, true] && b_dropped.is_none() {
            b_dropped = Some((d, vs(&bed.b)));
        }
        ovs_enabled(&bed.ovs) == 4 && distributing(&bed.a) == [true, true]
    });
    eprintln!(
        "dist-a restarted: its members in the bond after {:?}",
        t0.elapsed()
    );
    fwd.join().unwrap();
    rev.join().unwrap();
    rx_b.wait_quiet(Duration::from_millis(300));
    rx_p.wait_quiet(Duration::from_millis(300));
    assert!(
        back,
        "dist-a's members did not join the bond: a {:#}",
        vs(&bed.a)
    );
    let mut report = String::new();
    for (name, rx) in [("partner -> hb", &rx_b), ("hb -> partner", &rx_p)] {
        let got = rx.seqs().iter().filter(|s| **s < n as u64).count() as u64;
        let lost = n as u64 - got.min(n as u64);
        report += &format!(
            "{name}: lost {lost} of {n} ({:.1} ms), {} twice; ",
            lost as f64 * 1000.0 / RATE_EACH as f64,
            rx.dups()
        );
    }
    for (name, sw) in [("dist-a", &bed.a), ("dist-b", &bed.b)] {
        let c = sw.counters();
        let pc = |p: &str, k: &str| testkit::switch::port_counter(&c, p, k);
        report += &format!(
            "\n  {name}: pl rx {} tx {} (flooded {}), m1+m2 rx {} tx {}, h tx {} (flooded {}), vlan 10 flooded {}",
            pc("pl", "rx_frames"),
            pc("pl", "tx_frames"),
            pc("pl", "tx_flooded"),
            pc("m1", "rx_frames") + pc("m2", "rx_frames"),
            pc("m1", "tx_frames") + pc("m2", "tx_frames"),
            pc("h", "tx_frames"),
            pc("h", "tx_flooded"),
            testkit::switch::vlan_counter(&c, 10, "flooded"),
        );
    }
    eprintln!("rejoin under {RATE_EACH} frames/s each way: {report}");
    assert!(
        b_dropped.is_none(),
        "dist-b took its members down for the returning node: {b_dropped:#?}"
    );
    assert_eq!((rx_b.dups(), rx_p.dups()), (0, 0), "{report}");
    for rx in [&rx_b, &rx_p] {
        let got = rx.seqs().iter().filter(|s| **s < n as u64).count() as u64;
        // A bond rehash may lose what is in flight on a member; 40 ms at
        // this rate is far below the half second lost before the fix.
        assert!(n as u64 - got <= RATE_EACH / 25, "{report}");
    }
    let _ = (&bed.nb, &bed.no, &bed.nt);
}

/// VLAN 10 (the bond) and 30 (each node's host port `h`) routed, the same
/// IPv6 addresses on both nodes, both served as one gateway.
fn gw6_config(name: &str, node: usize) -> String {
    format!(
        "switch:
  name: {name}
vlans:
  - id: 10
    router:
      addresses: [2001:db8:10::1/64]
  - id: 30
    router:
      addresses: [2001:db8:30::1/64]
ports:
  - {{name: pl, mode: trunk}}
  - {{name: m1, vlan: 10}}
  - {{name: m2, vlan: 10}}
  - {{name: h, vlan: 30}}
port-channels:
  - {{name: po1, members: [m1, m2], lacp: active, lacp-rate: fast, load-balance: l3l4}}
{}",
        vswitch::section(7, node, &["pl"], 1, true, "  gateways: [10, 30]\n")
    )
}

/// An IPv6 UDP test frame of flow `flow` (its source port).
fn udp6(dst: &Mac, src: &Mac, from: &str, to: &str, flow: u32, seq: u64) -> Vec<u8> {
    let (s, d): (IpAddr, IpAddr) = (from.parse().unwrap(), to.parse().unwrap());
    let mut f = ip::udp(dst, src, s, d, 64, seq, 128);
    let u = 14 + 40;
    f[u..u + 2].copy_from_slice(&(40_000 + flow as u16).to_be_bytes());
    f[u + 6..u + 8].fill(0);
    let mut pseudo = Vec::with_capacity(40 + f.len() - u);
    pseudo.extend_from_slice(&f[14 + 8..14 + 40]);
    pseudo.extend_from_slice(&((f.len() - u) as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(&f[u..]);
    let c = match ip::checksum(&pseudo) {
        0 => 0xffff,
        c => c,
    };
    f[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
    f
}

/// Numbered test frames `port` receives until quiet, with counts; only
/// those routed once (hop limit 63) and intact.
fn routed(port: &RawPort) -> std::collections::HashMap<u64, u32> {
    let mut seen = std::collections::HashMap::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        let Some(f) = port.recv_timeout(Duration::from_millis(500)).unwrap() else {
            break;
        };
        if let Some(p) = ip::parse(&f) {
            if let (Some(seq), 63, true) = (p.seq, p.ttl, p.l4_ok) {
                *seen.entry(seq).or_insert(0) += 1;
            }
        }
    }
    seen
}

fn if_mac(ns: &Netns, dev: &str) -> Mac {
    let out = ns
        .exec(&["cat", &format!("/sys/class/net/{dev}/address")])
        .unwrap();
    testkit::frame::parse_mac(String::from_utf8_lossy(&out.stdout).trim()).unwrap()
}

/// Issue 19 item 4, IPv6, with an Open vSwitch bond as the partner: P
/// (a kernel host behind OVS, VLAN 10) and Q / R (kernel hosts behind
/// dist-a's / dist-b's own port, VLAN 30) use the pair's shared SVI
/// addresses as their gateway. P's kernel resolves the gateway by ND
/// (answered by whichever node OVS hashes the solicitation to, with the
/// system MAC) and pings Q and R; then 64 flows from P, hashed by OVS
/// over all four members, are routed by both nodes (each its share,
/// hop limit 63) and reach Q and R exactly once, and 64 flows from Q and
/// from R reach P exactly once.
#[test]
fn ipv6_gateway_behind_an_ovs_bond() {
    require_root!();
    let _g = l2::heavy();
    let Some(bed) = Bed::with("lyvp6", gw6_config) else {
        return;
    };
    bed.wait_paired(30.0);
    // Each host in its own namespace (the bed has them in one).
    let np = Netns::new("lyvp6p").unwrap();
    let nq = Netns::new("lyvp6q").unwrap();
    let nr = Netns::new("lyvp6r").unwrap();
    for (dev, ns, addr) in [
        ("tp", &np, "2001:db8:10::50/64"),
        ("ta", &nq, "2001:db8:30::11/64"),
        ("tb", &nr, "2001:db8:30::10/64"),
    ] {
        bed.nt
            .exec(&["ip", "link", "set", dev, "netns", ns.name()])
            .unwrap();
        for cmd in [
            vec!["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0"],
            vec!["ip", "link", "set", dev, "up"],
            vec!["ip", "addr", "add", addr, "dev", dev, "nodad"],
        ] {
            let out = ns.exec(&cmd).unwrap();
            assert!(out.status.success(), "{cmd:?}: {out:?}");
        }
        let gw = if dev == "tp" {
            "2001:db8:10::1"
        } else {
            "2001:db8:30::1"
        };
        ns.exec(&["ip", "-6", "route", "add", "default", "via", gw])
            .unwrap();
        // Unreachable ports of the test flows: no ICMPv6 errors back.
        ns.exec(&["sysctl", "-qw", "net.ipv6.icmp.ratelimit=60000"])
            .unwrap();
    }
    let system = [2, 0, 0, 0, 7, 0];
    // Kernel to kernel: ND for the gateway, routed both ways.
    for (to, what) in [("2001:db8:30::11", "Q"), ("2001:db8:30::10", "R")] {
        let out = np
            .exec(&["ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", to])
            .unwrap();
        assert!(
            out.status.success(),
            "P cannot ping {what}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let neigh = String::from_utf8_lossy(
        &np.exec(&["ip", "-6", "neigh", "show", "2001:db8:10::1"])
            .unwrap()
            .stdout,
    )
    .to_string();
    assert!(
        neigh.contains("lladdr 02:00:00:00:07:00") && neigh.contains("router"),
        "P's gateway: {neigh}"
    );
    let (mp, mq, mr) = (if_mac(&np, "tp"), if_mac(&nq, "ta"), if_mac(&nr, "tb"));
    let tp = RawPort::open(np.name(), "tp").unwrap();
    let tq = RawPort::open(nq.name(), "ta").unwrap();
    let tr = RawPort::open(nr.name(), "tb").unwrap();
    let to_r = |i: usize| {
        udp6(
            &system,
            &mp,
            "2001:db8:10::50",
            "2001:db8:30::10",
            i as u32 % FLOWS,
            i as u64,
        )
    };
    // OVS moves hash buckets at each rebalance (1 s): traffic until it
    // uses all four members.
    let t0 = Instant::now();
    loop {
        let (a0, b0) = (members(&bed.a, "rx_frames"), members(&bed.b, "rx_frames"));
        tp.send_paced(2_000, 10_000, |i, b| *b = to_r(i + (1 << 30)))
            .unwrap();
        let (a1, b1) = (members(&bed.a, "rx_frames"), members(&bed.b, "rx_frames"));
        let per = [a1[0] - a0[0], a1[1] - a0[1], b1[0] - b0[0], b1[1] - b0[1]];
        if per.iter().all(|c| *c > 100) || t0.elapsed() > Duration::from_secs(8) {
            eprintln!("warm-up {:?}: per member {per:?}", t0.elapsed());
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    tr.drain();
    let n = 2_000usize;
    let (fa, fb) = (
        bed.a.counters()["l3"]["forwarded"].as_u64().unwrap_or(0),
        bed.b.counters()["l3"]["forwarded"].as_u64().unwrap_or(0),
    );
    tp.send_paced(n, RATE, |i, b| *b = to_r(i)).unwrap();
    let got_r = routed(&tr);
    tp.send_paced(n, RATE, |i, b| {
        *b = udp6(
            &system,
            &mp,
            "2001:db8:10::50",
            "2001:db8:30::11",
            i as u32 % FLOWS,
            i as u64,
        )
    })
    .unwrap();
    let got_q = routed(&tq);
    let (da, db) = (
        bed.a.counters()["l3"]["forwarded"].as_u64().unwrap_or(0) - fa,
        bed.b.counters()["l3"]["forwarded"].as_u64().unwrap_or(0) - fb,
    );
    tp.drain();
    tq.send_paced(n, RATE, |i, b| {
        *b = udp6(
            &system,
            &mq,
            "2001:db8:30::11",
            "2001:db8:10::50",
            i as u32 % FLOWS,
            i as u64,
        )
    })
    .unwrap();
    tr.send_paced(n, RATE, |i, b| {
        *b = udp6(
            &system,
            &mr,
            "2001:db8:30::10",
            "2001:db8:10::50",
            i as u32 % FLOWS,
            (n + i) as u64,
        )
    })
    .unwrap();
    let got_p = routed(&tp);
    eprintln!(
        "P -> R {}/{n}, P -> Q {}/{n} (routed by dist-a {da}, dist-b {db}); Q, R -> P {}/{}",
        got_r.len(),
        got_q.len(),
        got_p.len(),
        2 * n
    );
    for (what, got, want) in [
        ("P -> R", &got_r, n),
        ("P -> Q", &got_q, n),
        ("Q, R -> P", &got_p, 2 * n),
    ] {
        assert_eq!(got.len(), want, "{what}: {} of {want}", got.len());
        assert!(got.values().all(|c| *c == 1), "{what}: duplicates");
    }
    // OVS hashed P's flows over both nodes: each routed its share.
    assert!(
        da >= n as u64 / 8 && db >= n as u64 / 8,
        "routed by dist-a {da}, dist-b {db}"
    );
}
