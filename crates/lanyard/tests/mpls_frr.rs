//! Fast reroute end to end (issue 17 item 4): two Lanyard PEs joined by
//! two core links, 100 type-4 pseudowires (static labels) whose transport
//! leaves through c1, and a configured facility backup on each PE
//! (`mpls.fast-reroute`: protect c1, bypass via c2 to the same PE):
//!
//! ```text
//!  [ca] ac ── ac [pe-a] c1 ══ c1 [pe-b] ac ── ac [cb]
//!                       c2 ══ c2
//! ```
//!
//! Under constant traffic (VLAN 100+i on pe-a ↔ 300+i on pe-b, one frame
//! per VLAN in turn), pe-b's end of c1 is set down (carrier loss on
//! pe-a's c1). Every pseudowire must move to c2 — frames flow again for
//! all 100 — without any route or pseudowire change, and back when c1
//! returns. The outage per pseudowire (frames lost / its rate) is
//! printed; no timing is asserted (shared CI cores).
//! `LANYARD_FRR_RATE=N` sets the total rate (frames/s, default 20,000,
//! about 200 per pseudowire: 4–6 ms resolution). Needs root, else SKIPPED.

use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::flood::{FloodSpec, Flooder, RxCounter};
use testkit::frame::{mac, test_frame, test_info, Tag};
use testkit::netns::veth;
use testkit::{l2, Netns, RawPort, Switch};

const PWS: usize = 100;
const LEN: usize = 96;

fn rate() -> u64 {
    std::env::var("LANYARD_FRR_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
        .clamp(1_000, 1_000_000)
}

fn config(name: &str, me: u8, peer: u8, a_side: bool) -> String {
    let mut y = format!(
        "switch:\n  name: {name}\nports:\n  - {{name: c1, mode: routed, mtu: 1600, addresses: [10.93.1.{me}/30]}}\n  - {{name: c2, mode: routed, mtu: 1600, addresses: [10.93.2.{me}/30]}}\n  - {{name: ac}}\n"
    );
    // The remote PE's loopback (its LSR id), routed over c1 only.
    y.push_str(&format!(
        "routing:\n  static-routes:\n    - {{prefix: 10.255.0.{peer}/32, next-hop: 10.93.1.{peer}}}\n"
    ));
    y.push_str(&format!(
        "mpls:\n  fast-reroute:\n    - {{protect: c1, backup: {{port: c2, next-hop: 10.93.2.{peer}}}}}\n"
    ));
    let (local, remote) = if a_side { (7000, 8000) } else { (8000, 7000) };
    y.push_str("pseudowires:\n");
    for i in 0..PWS {
        y.push_str(&format!(
            "  - {{name: v{i}, port: ac, vlan: {}, neighbor: 10.255.0.{peer}, pw-id: {}, control-word: {}, static-labels: {{local: {}, remote: {}}}}}\n",
            if a_side { 100 + i } else { 300 + i },
            1000 + i,
            i % 2 == 0,
            local + i,
            remote + i,
        ));
    }
    y
}

fn up_count(sw: &Switch) -> u64 {
    sw.show_json(&["show", "mpls", "pseudowires"])["up"]
        .as_u64()
        .unwrap_or(0)
}

fn frr(sw: &Switch) -> Value {
    sw.show_json(&["show", "mpls", "fast-reroute"])
}

fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// VLAN id of a tagged frame.
fn vid(f: &[u8]) -> Option<u16> {
    (f.len() >= 18 && f[12..14] == [0x81, 0x00]).then(|| u16::from_be_bytes([f[14], f[15]]) & 0xfff)
}

/// One frame per VLAN of pe-a's circuits (phase `phase`); `seq`: the
/// given one, or (None) the pseudowire's index, which identifies it where
/// the receiver sees no tag (AF_PACKET moves it to metadata).
fn frames(phase: u32, seq: Option<u64>) -> Vec<Vec<u8>> {
    (0..PWS)
        .map(|i| {
            test_frame(
                &mac(700),
                &mac(800 + i as u32),
                &[Tag::dot1q(100 + i as u16)],
                phase,
                seq.unwrap_or(i as u64),
                LEN,
            )
        })
        .collect()
}

/// Sends one frame per pseudowire until every one has arrived on its
/// far VLAN (or `secs` pass); returns how many pseudowires delivered.
fn probe_all(tx: &RawPort, rx: &RawPort, phase: u32, secs: u64) -> usize {
    let mut got = [false; PWS];
    let end = Instant::now() + Duration::from_secs(secs);
    let mut seq = 0;
    while got.iter().any(|g| !g) && Instant::now() < end {
        for (i, f) in frames(phase, Some(seq)).iter().enumerate() {
            if !got[i] {
                tx.send(f).unwrap();
            }
        }
        seq += 1;
        for f in rx.recv_test_frames(Duration::from_millis(200)).unwrap() {
            if test_info(&f).is_some_and(|t| t.phase == phase) {
                if let Some(v) = vid(&f).filter(|v| (300..300 + PWS as u16).contains(v)) {
                    got[(v - 300) as usize] = true;
                }
            }
        }
    }
    got.iter().filter(|g| **g).count()
}

#[test]
fn link_down_moves_every_pseudowire_to_the_backup() {
    testkit::require_root!();
    let ca = Netns::new("frrca").unwrap();
    let pa = Netns::new("frrpa").unwrap();
    let pb = Netns::new("frrpb").unwrap();
    let cb = Netns::new("frrcb").unwrap();
    veth(&pa, "c1", &pb, "c1", 1600).unwrap();
    veth(&pa, "c2", &pb, "c2", 1600).unwrap();
    veth(&pa, "ac", &ca, "ac", 9000).unwrap();
    veth(&pb, "ac", &cb, "ac", 9000).unwrap();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let names = ["c1", "c2", "ac"];
    let a = Switch::start(&bin, &pa, &config("pe-a", 1, 2, true), &names).expect("start pe-a");
    let b = Switch::start(&bin, &pb, &config("pe-b", 2, 1, false), &names).expect("start pe-b");
    wait_for("100 pseudowires up on both PEs", 30, || {
        up_count(&a) == PWS as u64 && up_count(&b) == PWS as u64
    });
    // The bypass is installed and its next hop resolved before the failure.
    wait_for("pe-a's bypass installed and resolved", 15, || {
        let v = frr(&a);
        v["protected"][0]["installed"] == true && v["protected"][0]["backup_resolved"] == true
    });
    let text = String::from_utf8_lossy(&a.cli(&["show", "mpls", "fast-reroute"]).unwrap().stdout)
        .into_owned();
    eprintln!("{text}");
    assert!(text.contains("c1") && text.contains("10.93.2.2") && text.contains("primary"));
    let (tx, rx) = (
        RawPort::open(ca.name(), "ac").unwrap(),
        RawPort::open(cb.name(), "ac").unwrap(),
    );
    assert_eq!(
        probe_all(&tx, &rx, 1, 15),
        PWS,
        "not every pseudowire carries frames over c1"
    );
    drop((tx, rx));

    // Constant traffic, then the far end of c1 goes down.
    let rate = rate();
    let per_pw = rate as f64 / PWS as f64;
    // Frames delivered per pseudowire.
    let counts: Arc<Vec<AtomicU64>> = Arc::new((0..PWS).map(|_| AtomicU64::new(0)).collect());
    let c2 = counts.clone();
    let counter = RxCounter::start(cb.name(), "ac", move |f| match test_info(f) {
        Some(t) if t.phase == 2 && t.seq < PWS as u64 => {
            c2[t.seq as usize].fetch_add(1, Ordering::Relaxed);
            true
        }
        _ => false,
    })
    .unwrap();
    let flood = Flooder::start(
        ca.name(),
        "ac",
        frames(2, None),
        FloodSpec {
            rate,
            duration: Some(Duration::from_secs(3)),
            ..FloodSpec::default()
        },
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let before = counter.matched();
    pb.exec(&["ip", "link", "set", "c1", "down"]).unwrap();
    let sent = flood.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let got = counter.stop().unwrap();
    // Outage = lost frames / rate: over all pseudowires (each carries
    // about 1/100 of the rate, so this is also the mean per pseudowire).
    let lost_total = sent.sent.saturating_sub(got.matched);
    // Per pseudowire, lost / its rate. The flooder sends a ring of
    // `BATCH` messages over the 100 frames (message k = frame k % 100),
    // so pseudowire i gets a known share; exact while nothing was
    // refused by the sender.
    let share = |i: usize, upto: usize| (0..upto).filter(|k| k % PWS == i).count() as u64;
    let b = testkit::flood::BATCH;
    let n: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let mut lost_ms: Vec<f64> = (0..PWS)
        .map(|i| {
            let cycle = share(i, b);
            let expected = sent.sent / b as u64 * cycle + share(i, (sent.sent % b as u64) as usize);
            let rate_i = rate as f64 * cycle as f64 / b as f64;
            expected.saturating_sub(n[i]) as f64 / rate_i * 1000.0
        })
        .collect();
    lost_ms.sort_by(|x, y| x.total_cmp(y));
    eprintln!(
        "failover per pseudowire (lost / its rate): min {:.1} ms, median {:.1} ms, max {:.1} ms",
        lost_ms[0],
        lost_ms[PWS / 2],
        lost_ms[PWS - 1]
    );
    eprintln!(
        "failover: {PWS} pseudowires at {per_pw:.0} frames/s each ({} sent, {} refused by the sender, {} delivered, {before} before the cut, {lost_total} lost): mean outage per pseudowire (lost / rate) {:.2} ms",
        sent.sent,
        sent.refused,
        got.matched,
        lost_total as f64 / rate as f64 * 1000.0,
    );
    // Every pseudowire is on the bypass, with one switch, by one store.
    let v = frr(&a);
    eprintln!("{v}");
    assert_eq!(v["protected"][0]["active"], "backup", "{v}");
    assert_eq!(v["protected"][0]["switches"], 1, "{v}");
    assert_eq!(v["pseudowires_on_backup"], PWS, "{v}");
    assert_eq!(
        up_count(&a),
        PWS as u64,
        "no pseudowire was reprogrammed down"
    );
    // Frames flow again on every pseudowire (c1 is down: over c2).
    let (tx, rx) = (
        RawPort::open(ca.name(), "ac").unwrap(),
        RawPort::open(cb.name(), "ac").unwrap(),
    );
    assert_eq!(
        probe_all(&tx, &rx, 3, 10),
        PWS,
        "not every pseudowire moved to the backup"
    );
    for (i, c) in counts.iter().enumerate() {
        assert!(
            c.load(Ordering::Relaxed) > 0,
            "pseudowire v{i} delivered nothing under traffic"
        );
    }
    // c1 back: the primary again.
    pb.exec(&["ip", "link", "set", "c1", "up"]).unwrap();
    wait_for("pe-a back on the primary", 10, || {
        frr(&a)["protected"][0]["active"] == "primary"
    });
    assert_eq!(
        probe_all(&tx, &rx, 4, 15),
        PWS,
        "not every pseudowire came back"
    );
    assert_eq!(frr(&a)["pseudowires_on_backup"], 0);
}
