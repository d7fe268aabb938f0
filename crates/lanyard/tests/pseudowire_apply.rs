//! A live `config apply` of `pseudowires:` (docs/mpls.md, section 9):
//! pseudowires added, removed and changed (labels, VLAN, port / VLAN mode,
//! attachment port, remote PE) take effect without a restart, and a
//! pseudowire the change does not touch loses nothing:
//!
//! ```text
//!  [ca] ac1..ac4 ── ac1..ac4 [pe-a] up ══ up [pe-b] ac1..ac4 ── ac1..ac4 [cb]
//! ```
//!
//! `keep` (type 5 on ac1) carries a constant-rate stream while both PEs
//! apply a new `pseudowires:` (and again while they roll it back): every
//! frame arrives, and its counters go on from where they were. After the
//! apply, `del` (type 5 on ac3) is gone, `new` (type 4, VLAN 30 of ac3)
//! carries VLAN 30, `chg` moved from VLAN 10 to VLAN 11 with new labels;
//! a second apply moves `chg` to the whole port ac4 (type 5) toward the
//! far PE's second address. `sig`, the first pseudowire signalled by LDP
//! (on pe-a), is added by the first apply: pe-a opens its side channel
//! then (not at start), and an install as the zebra module sends it
//! brings it up. A bad `pseudowires:` is refused with its file:line and
//! changes nothing. Everything removed, then added back. Needs root,
//! else SKIPPED.

use serde_json::Value;
use std::time::{Duration, Instant};
use testkit::frame::{mac, test_frame, test_info, Tag};
use testkit::netns::veth;
use testkit::pseudowire::{pseudowires as pws, row, side_channel, wait_through};
use testkit::{l2, Netns, RawPort, Switch};

const RATE: u64 = 20_000;
const LEN: usize = 128;
const PORTS: [&str; 5] = ["up", "ac1", "ac2", "ac3", "ac4"];

/// One pseudowire line: name, port, VLAN, pw-id, local/remote labels
/// offsets (pe-a pops 7000+x, pe-b 8000+x), neighbour.
struct Pw {
    name: &'static str,
    port: &'static str,
    vlan: Option<u16>,
    label: u32,
    peer_a: &'static str,
    /// Signalled on pe-a (labels from the side channel), static on pe-b.
    signalled: bool,
}

fn config(a_side: bool, pws: &[Pw], sock: &str) -> String {
    let me = if a_side {
        "[10.92.0.1/29]"
    } else {
        "[10.92.0.2/29, 10.92.0.3/29]"
    };
    let mut y = format!(
        "switch:\n  name: pe-{}\nrouting:\n  pseudowire-socket: {sock}\nports:\n  - {{name: up, mode: routed, mtu: 1600, addresses: {me}}}\n  - {{name: ac1}}\n  - {{name: ac2}}\n  - {{name: ac3}}\n  - {{name: ac4}}\npseudowires:\n",
        if a_side { "a" } else { "b" }
    );
    let (local, remote) = if a_side { (7000, 8000) } else { (8000, 7000) };
    for w in pws {
        let peer = if a_side { w.peer_a } else { "10.92.0.1" };
        let labels = if w.signalled && a_side {
            String::new()
        } else {
            format!(
                ", static-labels: {{local: {}, remote: {}}}",
                local + w.label,
                remote + w.label
            )
        };
        y.push_str(&format!(
            "  - {{name: {}, port: {}, {}neighbor: {peer}, pw-id: {}{labels}}}\n",
            w.name,
            w.port,
            w.vlan.map(|v| format!("vlan: {v}, ")).unwrap_or_default(),
            w.label,
        ));
    }
    y
}

const KEEP: Pw = Pw {
    name: "keep",
    port: "ac1",
    vlan: None,
    label: 1,
    peer_a: "10.92.0.2",
    signalled: false,
};

fn before() -> Vec<Pw> {
    vec![
        KEEP,
        Pw {
            name: "chg",
            port: "ac2",
            vlan: Some(10),
            label: 2,
            peer_a: "10.92.0.2",
            signalled: false,
        },
        Pw {
            name: "del",
            port: "ac3",
            vlan: None,
            label: 3,
            peer_a: "10.92.0.2",
            signalled: false,
        },
    ]
}

/// Signalled on pe-a: the first such pseudowire opens the side channel.
const SIG: Pw = Pw {
    name: "sig",
    port: "ac3",
    vlan: Some(40),
    label: 5,
    peer_a: "10.92.0.2",
    signalled: true,
};

/// Added by the first apply on VLAN 30 of ac3 (the port `del` had whole).
const NEW: Pw = Pw {
    name: "new",
    port: "ac3",
    vlan: Some(30),
    label: 4,
    peer_a: "10.92.0.2",
    signalled: false,
};

/// `del` removed, `new` added on VLAN 30 of ac3 (the port `del` had
/// whole), `chg` on VLAN 11 with new labels, `sig` added (signalled on
/// pe-a).
fn after() -> Vec<Pw> {
    vec![
        SIG,
        NEW,
        KEEP,
        Pw {
            name: "chg",
            port: "ac2",
            vlan: Some(11),
            label: 12,
            peer_a: "10.92.0.2",
            signalled: false,
        },
    ]
}

/// `chg` becomes the whole port ac4 (type 5) toward pe-b's second
/// address; ac2 is a plain bridge port again.
fn moved() -> Vec<Pw> {
    vec![
        SIG,
        NEW,
        KEEP,
        Pw {
            name: "chg",
            port: "ac4",
            vlan: None,
            label: 13,
            peer_a: "10.92.0.3",
            signalled: false,
        },
    ]
}

struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn count(v: &Value, name: &str, k: &str) -> u64 {
    row(v, name).map_or(0, |r| r[k].as_u64().unwrap_or(0))
}

/// Writes `yaml` beside the switch's socket (same backend and socket, so
/// only `pseudowires:` differs) and returns its path.
fn file(sw: &Switch, tag: &str, yaml: &str) -> std::path::PathBuf {
    let p = sw.socket().with_file_name(format!("{tag}.yaml"));
    std::fs::write(
        &p,
        testkit::switch::with_test_backend(&format!(
            "{}\nmanagement:\n  socket: {}\n",
            yaml.trim_end(),
            sw.socket().display()
        )),
    )
    .unwrap();
    p
}

fn cli(sw: &Switch, args: &[&str]) -> (bool, String) {
    let o = sw.cli(args).unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn wait_up(sw: &Switch, names: &[&str], what: &str) {
    let end = Instant::now() + Duration::from_secs(15);
    loop {
        let v = pws(sw);
        if names
            .iter()
            .all(|n| row(&v, n).is_some_and(|r| r["up"] == true))
        {
            return;
        }
        assert!(
            Instant::now() < end,
            "{what}: not up: {v}\nlog:\n{}",
            sw.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The test frames `to` receives for `frames` sent on `from` (VLAN id of
/// each, none when untagged).
fn cross(from: &RawPort, to: &RawPort, frames: &[Vec<u8>]) -> Vec<Option<u16>> {
    to.drain();
    for f in frames {
        from.send(f).unwrap();
    }
    to.recv_test_frames(Duration::from_millis(300))
        .unwrap()
        .iter()
        .filter(|f| test_info(f).is_some_and(|i| i.phase == 3))
        .map(|f| {
            (u16::from_be_bytes([f[12], f[13]]) == 0x8100)
                .then(|| u16::from_be_bytes([f[14], f[15]]) & 0xfff)
        })
        .collect()
}

fn tagged(v: u16) -> Vec<u8> {
    test_frame(&mac(5), &mac(6), &[Tag::dot1q(v)], 3, v as u64, LEN)
}

fn untagged() -> Vec<u8> {
    test_frame(&mac(5), &mac(6), &[], 3, 0, LEN)
}

/// A constant-rate stream ca:ac1 → cb:ac1 (pseudowire `keep`), phase 5,
/// with `during` in the middle. (sent, received).
fn stream_around(a1: &RawPort, b1: &RawPort, during: impl FnOnce()) -> (u64, u64) {
    let cap = b1.start_capture(0, |i, _| i.phase == 5).unwrap();
    let total = (RATE as f64 * 1.5) as usize;
    let sender = a1.try_clone().unwrap();
    let tx = std::thread::spawn(move || {
        sender
            .send_paced(total, RATE, |i, b| {
                *b = test_frame(&mac(20), &mac(10), &[], 5, i as u64, 64)
            })
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(400));
    during();
    tx.join().unwrap();
    cap.wait_quiet(Duration::from_millis(300), Duration::from_secs(3));
    (total as u64, cap.stop().unwrap().matched)
}

#[test]
fn pseudowires_change_live_without_disturbing_the_others() {
    testkit::require_root!();
    let _g = l2::heavy();
    let ca = Netns::new("pwapca").unwrap();
    let pa = Netns::new("pwappa").unwrap();
    let pb = Netns::new("pwappb").unwrap();
    let cb = Netns::new("pwapcb").unwrap();
    veth(&pa, "up", &pb, "up", 1600).unwrap();
    for p in &PORTS[1..] {
        veth(&pa, p, &ca, p, 9000).unwrap();
        veth(&pb, p, &cb, p, 9000).unwrap();
    }
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let sock = std::env::temp_dir().join(format!("pwap-a-{}.sock", std::process::id()));
    let sock_b = std::env::temp_dir().join(format!("pwap-b-{}.sock", std::process::id()));
    let (sa, sb) = (sock.display().to_string(), sock_b.display().to_string());
    let _rm = RemoveOnDrop(sock.clone());
    let a = Switch::start(&bin, &pa, &config(true, &before(), &sa), &PORTS).expect("pe-a");
    let b = Switch::start(&bin, &pb, &config(false, &before(), &sb), &PORTS).expect("pe-b");
    assert!(
        !sock.exists(),
        "side channel open with no signalled pseudowire"
    );
    for sw in [&a, &b] {
        wait_up(sw, &["keep", "chg", "del"], "at start");
    }
    let open = |ns: &Netns, p: &str| RawPort::open(ns.name(), p).unwrap();
    let (a1, a2, a3, a4) = (
        open(&ca, "ac1"),
        open(&ca, "ac2"),
        open(&ca, "ac3"),
        open(&ca, "ac4"),
    );
    let (b1, b2, b3, b4) = (
        open(&cb, "ac1"),
        open(&cb, "ac2"),
        open(&cb, "ac3"),
        open(&cb, "ac4"),
    );
    wait_through(&a1, &b1, &[], LEN, || "keep".into());
    wait_through(&a2, &b2, &[Tag::dot1q(10)], LEN, || "chg".into());
    wait_through(&a3, &b3, &[], LEN, || "del".into());
    let mut failures = Vec::new();

    // The diff names each pseudowire and says it applies live.
    let next_a = file(&a, "after-a", &config(true, &after(), &sa));
    let next_b = file(&b, "after-b", &config(false, &after(), &sb));
    let (ok, diff) = cli(&a, &["config", "diff", next_a.to_str().unwrap()]);
    for want in [
        "+ pseudowire new",
        "- pseudowire del",
        "~ pseudowire chg",
        "applies live",
    ] {
        if !ok || !diff.contains(want) {
            failures.push(format!("config diff lacks {want:?}: {diff}"));
        }
    }

    // Apply on both PEs under traffic on `keep`: nothing lost, counters
    // carried on.
    let before_a = pws(&a);
    let t = Instant::now();
    let (sent, got) = stream_around(&a1, &b1, || {
        for (sw, f) in [(&a, &next_a), (&b, &next_b)] {
            let (ok, out) = cli(sw, &["config", "apply", f.to_str().unwrap()]);
            assert!(ok, "apply: {out}\nlog:\n{}", sw.log());
            eprintln!("apply: {}", out.trim_end());
        }
    });
    eprintln!(
        "apply on both PEs under {RATE} frames/s on keep: {got} of {sent} delivered ({:.1} s)",
        t.elapsed().as_secs_f64()
    );
    if got != sent {
        failures.push(format!(
            "keep lost {} of {sent} frames during apply",
            sent - got
        ));
    }
    let after_a = pws(&a);
    let tx = count(&after_a, "keep", "tx_packets") - count(&before_a, "keep", "tx_packets");
    if tx != sent {
        failures.push(format!(
            "pe-a keep tx_packets +{tx} over the apply, want +{sent}"
        ));
    }
    if row(&after_a, "del").is_some() {
        failures.push(format!("del still shown after the apply: {after_a}"));
    }
    for sw in [&a, &b] {
        wait_up(sw, &["keep", "chg", "new"], "after apply");
    }
    let v = pws(&a);
    if row(&v, "chg").map(|r| (r["vlan"].clone(), r["local_label"].clone()))
        != Some((11.into(), 7012.into()))
    {
        failures.push(format!("chg not on VLAN 11 with label 7012: {v}"));
    }
    // `new` carries VLAN 30 of ac3; ac3 untagged (`del`) goes nowhere.
    wait_through(&a3, &b3, &[Tag::dot1q(30)], LEN, || "new".into());
    let got = cross(&a3, &b3, &[tagged(30), untagged()]);
    if got != vec![Some(30)] {
        failures.push(format!(
            "ac3 after apply: far side got VLANs {got:?}, want [30]"
        ));
    }
    // `chg` carries VLAN 11, not VLAN 10 any more.
    let got = cross(&a2, &b2, &[tagged(10), tagged(11)]);
    if got != vec![Some(11)] {
        failures.push(format!(
            "ac2 after apply: far side got VLANs {got:?}, want [11]"
        ));
    }
    let got = cross(&b2, &a2, &[tagged(11)]);
    if got != vec![Some(11)] {
        failures.push(format!("ac2 b->a after apply: got {got:?}, want [11]"));
    }
    // `sig` opened pe-a's side channel: an install as the zebra module
    // sends it programs it, and it carries VLAN 40.
    let r = side_channel(&sock, "v=1 op=pw-install ifname=mpw5 vrf=0 type=4 local=7005 remote=8005 cw=1 status=1 peer=10.92.0.2 pwid=5 lsr=10.92.0.2 vpn=sig nh=10.92.0.2@2/3\n").unwrap_or_else(|e| e);
    if r != "ok" {
        failures.push(format!("install of sig after the apply answered {r:?}"));
    }
    wait_up(&a, &["sig"], "sig installed");
    wait_through(&a3, &b3, &[Tag::dot1q(40)], LEN, || "sig".into());
    let got = cross(&b3, &a3, &[tagged(40)]);
    if got != vec![Some(40)] {
        failures.push(format!("sig b->a: got {got:?}, want [40]"));
    }
    // `new` counts from zero (its id may be `del`'s).
    let v = pws(&b);
    if count(&v, "new", "rx_packets") > 3 {
        failures.push(format!("pe-b new counts frames it never carried: {v}"));
    }

    // A bad pseudowire (VLAN 30 of ac3 twice) is refused with its line;
    // nothing changes.
    let mut bad_pws = after();
    bad_pws.push(Pw {
        name: "dup",
        port: "ac3",
        vlan: Some(30),
        label: 9,
        peer_a: "10.92.0.2",
        signalled: false,
    });
    let bad = file(&a, "bad-a", &config(true, &bad_pws, &sa));
    let (ok, out) = cli(&a, &["config", "apply", bad.to_str().unwrap()]);
    if ok || !out.contains("bad-a.yaml:") || !out.contains("VLAN 30") {
        failures.push(format!("bad pseudowire config: ok={ok}, answer {out:?}"));
    }
    if row(&pws(&a), "dup").is_some() {
        failures.push("the refused pseudowire appeared".into());
    }

    // Second apply, under traffic: `chg` to the whole port ac4 (type 5)
    // toward pe-b's second address; ac2 back to bridging.
    let m_a = file(&a, "moved-a", &config(true, &moved(), &sa));
    let m_b = file(&b, "moved-b", &config(false, &moved(), &sb));
    let (sent, got) = stream_around(&a1, &b1, || {
        for (sw, f) in [(&a, &m_a), (&b, &m_b)] {
            let (ok, out) = cli(sw, &["config", "apply", f.to_str().unwrap()]);
            assert!(ok, "apply: {out}\nlog:\n{}", sw.log());
        }
    });
    if got != sent {
        failures.push(format!(
            "keep lost {} of {sent} frames during the second apply",
            sent - got
        ));
    }
    for sw in [&a, &b] {
        wait_up(sw, &["keep", "chg", "new"], "after the move");
    }
    let v = pws(&a);
    if row(&v, "chg").map(|r| (r["port"].clone(), r["type"].clone(), r["neighbor"].clone()))
        != Some(("ac4".into(), 5.into(), "10.92.0.3".into()))
    {
        failures.push(format!("chg not moved to ac4, type 5, neighbour .3: {v}"));
    }
    wait_through(&a4, &b4, &[], LEN, || "chg on ac4".into());
    let got = cross(&a4, &b4, &[untagged(), tagged(77)]);
    if got != vec![None, Some(77)] {
        failures.push(format!(
            "ac4 after the move: far side got {got:?}, want [None, 77]"
        ));
    }
    let got = cross(&a2, &b2, &[tagged(11)]);
    if !got.is_empty() {
        failures.push(format!("ac2 still carried by a pseudowire: {got:?}"));
    }

    // Rollback (to the first apply's configuration) under traffic.
    let (sent, got) = stream_around(&a1, &b1, || {
        for sw in [&a, &b] {
            let (ok, out) = cli(sw, &["config", "rollback"]);
            assert!(ok, "rollback: {out}");
        }
    });
    if got != sent {
        failures.push(format!(
            "keep lost {} of {sent} frames during rollback",
            sent - got
        ));
    }
    for sw in [&a, &b] {
        wait_up(sw, &["keep", "chg", "new"], "after rollback");
    }
    wait_through(&a2, &b2, &[Tag::dot1q(11)], LEN, || {
        "chg back on ac2".into()
    });
    let got = cross(&a4, &b4, &[untagged()]);
    if !got.is_empty() {
        failures.push(format!("ac4 still a circuit after rollback: {got:?}"));
    }

    // Everything removed, then back: the data path stops and restarts.
    let empty_a = file(&a, "empty-a", &config(true, &[], &sa));
    let (ok, out) = cli(&a, &["config", "apply", empty_a.to_str().unwrap()]);
    if !ok || pws(&a)["count"] != 0 {
        failures.push(format!("removing every pseudowire: {ok} {out} {}", pws(&a)));
    }
    let got = cross(&a1, &b1, &[untagged()]);
    if !got.is_empty() {
        failures.push(format!("keep still carried after removal: {got:?}"));
    }
    let (ok, out) = cli(&a, &["config", "apply", next_a.to_str().unwrap()]);
    assert!(ok, "{out}");
    wait_up(&a, &["keep", "chg", "new"], "after re-adding");
    wait_through(&a1, &b1, &[], LEN, || "keep re-added".into());

    assert!(
        failures.is_empty(),
        "{}\npe-a log:\n{}",
        failures.join("\n"),
        a.log()
    );
}
