//! Issue 19: an aggregated peer link. Two Lanyards whose peer link is a
//! port channel of two ports with LACP between the nodes: data crossing
//! is hashed over both members (per-port counters), a flood crosses
//! once and never comes back, and a member cut under traffic moves its
//! flows to the other member within the link-down event while the pair
//! stays paired. Needs root; about 10 s.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::frame::{mac, Mac, BROADCAST};
use testkit::netns::veth;
use testkit::{ip, l2, require_root, vswitch, Netns, RawPort, Switch};

fn config(name: &str, node: usize) -> String {
    format!(
        "switch:
  name: {name}
vlans:
  - id: 10
ports:
  - {{name: pl1, mode: trunk}}
  - {{name: pl2, mode: trunk}}
  - {{name: h, vlan: 10}}
port-channels:
  - {{name: pl, members: [pl1, pl2], lacp: active, lacp-rate: fast, load-balance: l3l4}}
{}",
        vswitch::section(14, node, &["pl"], 0, false, "")
    )
}

/// Flow `i % FLOWS` of frame `i`: flows differ by source address, so the
/// bundle hashes them over its members.
const FLOWS: u64 = 64;

fn frame(dst: &Mac, src: &Mac, i: u64) -> Vec<u8> {
    let f = i % FLOWS;
    let s: IpAddr = format!("10.0.10.{}", 10 + f).parse().unwrap();
    ip::udp(dst, src, s, "10.0.10.2".parse().unwrap(), 64, i, 100)
}

/// Frames sent by `sw` on `port` so far.
fn tx(sw: &Switch, port: &str) -> u64 {
    sw.counters()["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == port)
        .map_or(0, |x| x["tx_frames"].as_u64().unwrap_or(0))
}

/// Whether both members of the peer-link bundle distribute on `sw`.
fn bundle_up(sw: &Switch) -> bool {
    sw.try_show_json(&["show", "port-channel"])
        .ok()
        .and_then(|v| {
            let ch = v.as_array()?.iter().find(|c| c["name"] == "pl")?.clone();
            let ms = ch["members"].as_array()?.clone();
            Some(ms.len() == 2 && ms.iter().all(|m| m["distributing"] == true))
        })
        .unwrap_or(false)
}

/// Sequence numbers `port` receives until quiet for `quiet`, with counts.
fn receive(port: &RawPort, quiet: Duration) -> HashMap<u64, u32> {
    let mut seen = HashMap::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(15) {
        let Some(f) = port.recv_timeout(quiet).unwrap() else {
            break;
        };
        if let Some(seq) = ip::parse(&f).and_then(|p| p.seq) {
            *seen.entry(seq).or_insert(0) += 1;
        }
    }
    seen
}

#[test]
fn aggregated_peer_link_hashes_floods_once_and_survives_a_member_cut() {
    require_root!();
    let _g = l2::heavy();
    let nt = Netns::new("lyagT").unwrap();
    let na = Netns::new("lyagA").unwrap();
    let nb = Netns::new("lyagB").unwrap();
    vswitch::link_nodes(&na, &nb, &["pl1", "pl2"]).unwrap();
    veth(&na, "h", &nt, "ta", 1500).unwrap();
    veth(&nb, "h", &nt, "tb", 1500).unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let ports = ["pl1", "pl2", "h"];
    let a = Switch::start(&bin, &na, &config("ag-a", 0), &ports).unwrap();
    let b = Switch::start(&bin, &nb, &config("ag-b", 1), &ports).unwrap();
    vswitch::wait_paired(&[&a, &b], 10);
    let t0 = Instant::now();
    while !(bundle_up(&a) && bundle_up(&b)) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "peer-link bundle: {:#}",
            a.show_json(&["show", "port-channel"])
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "both members distributing on both nodes {:?} after the pair formed",
        t0.elapsed()
    );
    let vs = a.show_json(&["show", "virtual-switch"]);
    assert_eq!(vs["peer_link"]["mode"], "aggregate", "{vs:#}");

    let ta = RawPort::open(nt.name(), "ta").unwrap();
    let tb = RawPort::open(nt.name(), "tb").unwrap();
    let (ha, hb) = (mac(0xa3), mac(0xb3));
    // hb behind dist-b's own port: synced to dist-a onto the bundle.
    tb.send(&testkit::frame::test_frame(&BROADCAST, &hb, &[], 1, 0, 64))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    ta.drain();
    tb.drain();
    let row = a
        .mac_table(Some(10))
        .into_iter()
        .find(|r| r["mac"] == "02:4c:00:00:00:b3")
        .unwrap_or_default();
    assert_eq!(row["port"], "pl", "hb on dist-a: on the bundle {row:#}");

    // Unicast across: every frame once, hashed over both members.
    let n = 2_000u64;
    let before = [tx(&a, "pl1"), tx(&a, "pl2")];
    ta.send_paced(n as usize, 5_000, |i, buf| *buf = frame(&hb, &ha, i as u64))
        .unwrap();
    let got = receive(&tb, Duration::from_millis(500));
    let spread = [tx(&a, "pl1") - before[0], tx(&a, "pl2") - before[1]];
    eprintln!("unicast {}/{n}, over pl1/pl2 {spread:?}", got.len());
    assert_eq!(got.len() as u64, n, "unicast: {} of {n}", got.len());
    assert!(got.values().all(|c| *c == 1), "unicast duplicated");
    assert!(
        spread.iter().all(|s| *s >= n / 5),
        "both peer-link members carry data: {spread:?}"
    );

    // Broadcasts: each crosses once (one member), none comes back.
    let nf = 400u64;
    let before = [tx(&a, "pl1"), tx(&a, "pl2")];
    ta.send_paced(nf as usize, 2_000, |i, buf| {
        *buf = frame(&BROADCAST, &ha, 10_000 + i as u64)
    })
    .unwrap();
    let got = receive(&tb, Duration::from_millis(500));
    let back = receive(&ta, Duration::from_millis(100));
    let spread = [tx(&a, "pl1") - before[0], tx(&a, "pl2") - before[1]];
    eprintln!("broadcast {}/{nf}, over pl1/pl2 {spread:?}", got.len());
    assert_eq!(got.len() as u64, nf, "broadcasts: {} of {nf}", got.len());
    assert!(got.values().all(|c| *c == 1), "a broadcast crossed twice");
    assert!(back.is_empty(), "{} broadcasts looped back", back.len());
    // (Peer-protocol messages leave by their own socket: not counted.)
    assert_eq!(spread[0] + spread[1], nf, "floods on the peer link");
    assert!(spread.iter().all(|s| *s > 0), "{spread:?}");

    // A member cut under traffic: the flows it carried move to the other
    // member at the link-down event; the pair stays paired.
    let events = b.show_json(&["show", "virtual-switch"])["dual_active_events"].clone();
    let rx_before = b.show_json(&["show", "virtual-switch"])["peer_link"]["messages"]["rx"]
        .as_u64()
        .unwrap_or(0);
    let rate = 4_000u64;
    let total = 3 * rate;
    let started = Arc::new(AtomicBool::new(false));
    let sender = {
        let ns = nt.name().to_string();
        let started = started.clone();
        std::thread::spawn(move || {
            let p = RawPort::open(&ns, "ta").unwrap();
            started.store(true, Ordering::Release);
            p.send_paced(total as usize, rate, |i, buf| {
                *buf = frame(&hb, &ha, 100_000 + i as u64)
            })
            .unwrap()
        })
    };
    let cutter = {
        let ns = na.name().to_string();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1000));
            testkit::netns::ip(&["-n", &ns, "link", "set", "pl1", "down"]).unwrap();
        })
    };
    let got = receive(&tb, Duration::from_millis(1000));
    let took = sender.join().unwrap();
    cutter.join().unwrap();
    assert!(started.load(Ordering::Acquire));
    let dups = got.values().filter(|c| **c > 1).count();
    let mut lost_per_flow = vec![0u64; FLOWS as usize];
    for i in 0..total {
        if !got.contains_key(&(100_000 + i)) {
            lost_per_flow[(i % FLOWS) as usize] += 1;
        }
    }
    let lost: u64 = lost_per_flow.iter().sum();
    let per_flow_rate = rate as f64 / FLOWS as f64;
    let worst_ms = *lost_per_flow.iter().max().unwrap() as f64 / per_flow_rate * 1000.0;
    let hit = lost_per_flow.iter().filter(|l| **l > 0).count();
    eprintln!(
        "member cut at 4,000 frames/s ({FLOWS} flows, sent in {took:?}): {lost} lost, \
         {hit} flows hit, worst flow {worst_ms:.1} ms, {dups} duplicated"
    );
    assert_eq!(dups, 0, "duplicates after the cut");
    assert!(
        worst_ms <= 25.0,
        "a flow lost {worst_ms:.1} ms at the member cut ({lost} frames)"
    );
    let vb = b.show_json(&["show", "virtual-switch"]);
    assert!(
        vswitch::is_paired(&a) && vswitch::paired(&vb),
        "the cut unpaired: {vb:#}"
    );
    assert_eq!(
        vb["dual_active_events"], events,
        "the cut split the pair: {vb:#}"
    );
    assert!(
        vb["peer_link"]["messages"]["rx"].as_u64().unwrap_or(0) > rx_before + 10,
        "pair messages stopped after the cut: {vb:#}"
    );
    let members = &a.show_json(&["show", "virtual-switch"])["peer_link"]["members"];
    assert_eq!(members[0]["state"], "down", "{members:#}");
    assert_eq!(members[1]["state"], "data", "{members:#}");
}

/// A pair node with the aggregated peer link, a multichassis LACP
/// channel `po1` (one member, `m1`, to the access switch) and a host port.
fn split_config(name: &str, node: usize) -> String {
    format!(
        "switch:
  name: {name}
vlans:
  - id: 10
ports:
  - {{name: pl1, mode: trunk}}
  - {{name: pl2, mode: trunk}}
  - {{name: m1, vlan: 10}}
  - {{name: h, vlan: 10}}
port-channels:
  - {{name: pl, members: [pl1, pl2], lacp: active, lacp-rate: fast, load-balance: l3l4}}
  - {{name: po1, members: [m1], lacp: active, lacp-rate: fast}}
{}",
        vswitch::section(15, node, &["pl"], 1, true, "")
    )
}

/// The access switch: one LACP channel, a member to each pair node.
const ACCESS: &str = "switch:
  name: access
vlans:
  - id: 10
ports:
  - {name: c1, vlan: 10}
  - {name: c2, vlan: 10}
  - {name: hc, vlan: 10}
port-channels:
  - {name: po1, members: [c1, c2], lacp: active, lacp-rate: fast, load-balance: l3l4}
";

/// Which members of the access switch's channel distribute.
fn access_members(sw: &Switch) -> Vec<bool> {
    sw.channel_distributing()
}

/// `n` frames over [`FLOWS`] flows from `from` (MAC `src`) to `dst`,
/// received on `to`: how many arrived, and whether any twice.
fn deliver(from: &RawPort, to: &RawPort, dst: &Mac, src: &Mac, n: u64) -> (u64, bool) {
    to.drain();
    from.send_paced(n as usize, 5_000, |i, buf| *buf = frame(dst, src, i as u64))
        .unwrap();
    let got = receive(to, Duration::from_millis(500));
    (got.len() as u64, got.values().any(|c| *c > 1))
}

/// Both nodes with the same `switch.name`: LACP on the peer-link bundle
/// hears its own system id and refuses every member, while the pair's
/// messages cross on them. Before, the pair stayed `paired` with no data
/// path across, both nodes' channel members up: the access switch hashed
/// half its flows onto dist-b, which could not reach dist-a's host (half
/// the frames lost). Now the bundle not distributing is the peer link
/// down for data: dual-active, the secondary's channel member leaves the
/// access switch's bundle, every frame arrives by dist-a; `show
/// virtual-switch` says `no-data` and why. dist-b restarted with its own
/// name: paired, the bundle distributes, frames cross again.
#[test]
fn bundle_refused_by_lacp_is_a_split_not_a_silent_pair() {
    require_root!();
    let _g = l2::heavy();
    let nt = Netns::new("lyagsT").unwrap();
    let na = Netns::new("lyagsA").unwrap();
    let nb = Netns::new("lyagsB").unwrap();
    let nc = Netns::new("lyagsC").unwrap();
    vswitch::link_nodes(&na, &nb, &["pl1", "pl2"]).unwrap();
    veth(&na, "m1", &nc, "c1", 1500).unwrap();
    veth(&nb, "m1", &nc, "c2", 1500).unwrap();
    veth(&na, "h", &nt, "ta", 1500).unwrap();
    veth(&nb, "h", &nt, "tb", 1500).unwrap();
    veth(&nc, "hc", &nt, "tc", 1500).unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let ports = ["pl1", "pl2", "m1", "h"];
    let a = Switch::start(&bin, &na, &split_config("twin", 0), &ports).unwrap();
    let mut b = Switch::start(&bin, &nb, &split_config("twin", 1), &ports).unwrap();
    let c = Switch::start(&bin, &nc, ACCESS, &["c1", "c2", "hc"]).unwrap();

    // Grace (3 s) + timeout (0.5 s) after the hellos came: a split.
    let t0 = Instant::now();
    let no_data = |sw: &Switch| {
        sw.try_show_json(&["show", "virtual-switch"])
            .is_ok_and(|v| v["status"] == "dual-active" && v["peer_link"]["state"] == "no-data")
    };
    while !(no_data(&a) && no_data(&b)) {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "no split: {:#}",
            b.show_json(&["show", "virtual-switch"])
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "dual-active (peer link carries no data) {:?} after start",
        t0.elapsed()
    );
    let vb = b.show_json(&["show", "virtual-switch"]);
    assert_eq!(vb["role"], "secondary", "{vb:#}");
    assert_eq!(vb["multichassis_members"], "down: dual-active, secondary");
    let why = vb["peer_link"]["no_data_reason"].as_str().unwrap_or("");
    assert!(why.contains("same switch.name"), "{vb:#}");
    assert!(
        vb["peer_link"]["members"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["state"] == "standby"),
        "{vb:#}"
    );
    assert!(vb["peer_link"]["messages"]["rx"].as_u64().unwrap_or(0) > 10);
    let text =
        String::from_utf8_lossy(&b.cli(&["show", "virtual-switch"]).unwrap().stdout).to_string();
    assert!(text.contains("Peer link  no-data (pl)"), "{text}");
    assert!(
        text.contains("no data across: LACP hears its own system id"),
        "{text}"
    );
    let va = a.show_json(&["show", "virtual-switch"]);
    assert_eq!(
        (va["role"].as_str(), va["multichassis_members"].as_str()),
        (Some("primary"), Some("up"))
    );

    // The access switch keeps dist-a's member only.
    let t1 = Instant::now();
    while access_members(&c) != [true, false] {
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "access members {:?}",
            access_members(&c)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (ta, tb, tc) = (
        RawPort::open(nt.name(), "ta").unwrap(),
        RawPort::open(nt.name(), "tb").unwrap(),
        RawPort::open(nt.name(), "tc").unwrap(),
    );
    let (ha, hb, hc) = (mac(0xa5), mac(0xb5), mac(0xc5));
    for (p, m) in [(&ta, ha), (&tb, hb), (&tc, hc)] {
        p.send(&testkit::frame::test_frame(&BROADCAST, &m, &[], 1, 0, 64))
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let n = 1_000;
    let (got, dup) = deliver(&tc, &ta, &ha, &hc, n);
    eprintln!("split: access -> dist-a's host {got}/{n}");
    assert_eq!(
        (got, dup),
        (n, false),
        "access -> dist-a's host during the split"
    );

    // dist-b with a name of its own: LACP bundles, the pair forms again.
    drop(b.kill9());
    drop(b);
    let b = Switch::start(&bin, &nb, &split_config("twin-b", 1), &ports).unwrap();
    let t2 = Instant::now();
    while !(bundle_up(&a)
        && bundle_up(&b)
        && [&a, &b].iter().all(|s| {
            s.try_show_json(&["show", "virtual-switch"])
                .is_ok_and(|v| vswitch::paired_with_members(&v) && v["peer_link"]["state"] == "up")
        })
        && access_members(&c) == [true, true])
    {
        assert!(
            t2.elapsed() < Duration::from_secs(15),
            "not back: {:#}",
            b.show_json(&["show", "virtual-switch"])
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("paired again {:?} after dist-b's restart", t2.elapsed());
    tb.send(&testkit::frame::test_frame(&BROADCAST, &hb, &[], 2, 0, 64))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for (to, dst, what) in [(&ta, &ha, "dist-a's host"), (&tb, &hb, "dist-b's host")] {
        let (got, dup) = deliver(&tc, to, dst, &hc, n);
        eprintln!("paired: access -> {what} {got}/{n}");
        assert_eq!((got, dup), (n, false), "access -> {what} once paired");
    }
    let (got, dup) = deliver(&ta, &tb, &hb, &ha, n);
    assert_eq!((got, dup), (n, false), "across the peer link once paired");
}
