//! LDP-signalled Ethernet pseudowires across a P router, and a live
//! `config apply` of signalled pseudowires with real ldpd/zebra (issue 17,
//! docs/mpls.md section 9):
//!
//! ```text
//!  [ca] ac1,ac2,ac3 ── [pe-a] up ═ br1 ═ w [p] e ═ br2 ═ up [pe-b] ── ac1,ac2,ac3 [cb]
//! ```
//!
//! Three Lanyards, each with its own FRR in its namespace (zebra with
//! `dplane_fpm_nl` and `zebra_lanyard.so`, ospfd, ldpd). The PEs' ldpd
//! advertise explicit null for their own loopbacks, so the P *swaps* the
//! transport label (its label for the far PE's loopback → 0) rather than
//! popping it. The core links run through bridges in a namespace of their
//! own, where raw sockets see every frame on the wire whatever port
//! backend the switches use. (A Linux P cannot label-switch here: the
//! kernel has no MPLS.)
//!
//! 1. `KEEP` (type 5 on ac1, control word) and `VL` (type 4, VLAN 100 on
//!    pe-a ↔ 200 on pe-b, no control word) and `DEL` (type 5 on ac3) come
//!    up in ldpd on both PEs and in Lanyard with mirrored labels; frames
//!    cross both ways and arrive intact at the far circuit only; on the
//!    wire, PE→P carries [P's transport label, the far PE's PW label] and
//!    P→PE [explicit null, the same PW label], the control word (when on)
//!    and the customer frame byte for byte the same on both hops; the P's
//!    swap entry counted them; tshark reads the same two labels.
//! 2. Under a constant-rate stream on `KEEP`, both PEs change their
//!    pseudowires live — `NEW` (type 4, VLAN 101 ↔ 201) added, `DEL`
//!    removed: pe-b's Lanyard first (`config apply`; zebra is told DEL is
//!    down, and ldpd on both PEs shows it down), then ldpd on both PEs
//!    (`vtysh`: NEW's stanza as `lanyard config ldpd` prints it, `no l2vpn
//!    DEL`), pe-a's Lanyard last, after pe-a's zebra had its install of
//!    NEW refused: `KEEP` loses no frame throughout; `NEW` comes up
//!    through ldpd on both PEs well before zebra's 30 s retry (labels
//!    exchanged, zebra's `show mpls pseudowires` and Lanyard agree) and
//!    carries frames both ways; `DEL` is gone from ldpd, zebra and Lanyard
//!    (its label out of the LFIB), and frames on its old port cross
//!    nothing; `KEEP` and `VL` stay up.
//!
//! `LANYARD_PW_LDP_VLANS=N` adds N type-4 pseudowires (128 VLANs per
//! extra port) signalled the same way, all waited for UP and carrying one
//! frame per VLAN each way (3,072 converge in about a minute: docs/mpls.md
//! "What remains").
//!
//! Needs root, FRR (zebra, ospfd, ldpd) and the module
//! (`scripts/build-zebra-mpls.sh`), else SKIPPED. About 25 s
//! (2 cores shared, load 4–6).

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use testkit::frame::{mac, test_frame, test_info, Tag};
use testkit::frame::{mpls_labels, Lse};
use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions};
use testkit::netns::veth;
use testkit::pseudowire::{pseudowires as pws, row, wait_through};
use testkit::{l2, Netns, RawPort, Switch};

const MODULE: &str = "/usr/local/lib/lanyard/zebra_lanyard.so";
const FPM_PORT: u16 = 2620;
const LEN: usize = 180;
const AC_PORTS: [&str; 3] = ["ac1", "ac2", "ac3"];
/// Frames per second on `KEEP` while the PEs change their pseudowires.
const RATE: u64 = 4_000;

/// One pseudowire: name, port, VLAN on pe-a / pe-b, pw-id, control word.
struct Pw {
    name: &'static str,
    port: &'static str,
    vlans: Option<(u16, u16)>,
    id: u32,
    cw: bool,
}

const KEEP: Pw = Pw {
    name: "KEEP",
    port: "ac1",
    vlans: None,
    id: 1,
    cw: true,
};
const VL: Pw = Pw {
    name: "VL",
    port: "ac2",
    vlans: Some((100, 200)),
    id: 100,
    cw: false,
};
const DEL: Pw = Pw {
    name: "DEL",
    port: "ac3",
    vlans: None,
    id: 3,
    cw: true,
};
const NEW: Pw = Pw {
    name: "NEW",
    port: "ac2",
    vlans: Some((101, 201)),
    id: 101,
    cw: true,
};

/// Loopback (LSR id) of router `k`: 1 = pe-a, 2 = pe-b, 3 = the P.
fn lo(k: u8) -> String {
    format!("10.255.94.{k}")
}

/// Extra type-4 pseudowires signalled by ldpd (`LANYARD_PW_LDP_VLANS`,
/// default none; up to 3,072: 128 VLANs on each of 24 ports s0..s23).
fn extra_count() -> usize {
    std::env::var("LANYARD_PW_LDP_VLANS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .min(24 * VLANS_PER_PORT)
}

const VLANS_PER_PORT: usize = 128;

/// (port, VLAN on pe-a, VLAN on pe-b) of extra pseudowire `i` (`X<i>`,
/// pw-id 10,000 + i, control word on every other one).
fn extra(i: usize) -> (String, u16, u16) {
    let v = (i % VLANS_PER_PORT) as u16;
    (format!("s{}", i / VLANS_PER_PORT), 100 + v, 300 + v)
}

fn extra_ports() -> Vec<String> {
    (0..extra_count().div_ceil(VLANS_PER_PORT))
        .map(|p| format!("s{p}"))
        .collect()
}

fn pe_yaml(me: u8, sock: &Path, set: &[&Pw]) -> String {
    let mut y = format!(
        "switch:\n  name: pe-{me}\nrouting:\n  fpm: 127.0.0.1:{FPM_PORT}\n  pseudowire-socket: {}\n\
         ports:\n  - {{name: up, mode: routed, mtu: 1600, addresses: [10.94.{me}.{me}/30, {}/32]}}\n",
        sock.display(),
        lo(me)
    );
    for p in AC_PORTS.iter().map(|p| p.to_string()).chain(extra_ports()) {
        y.push_str(&format!("  - {{name: {p}}}\n"));
    }
    y.push_str("pseudowires:\n");
    for i in 0..extra_count() {
        let (port, va, vb) = extra(i);
        y.push_str(&format!(
            "  - {{name: X{i}, port: {port}, vlan: {}, neighbor: {}, pw-id: {}, control-word: {}}}\n",
            if me == 1 { va } else { vb },
            lo(3 - me),
            10_000 + i,
            i % 2 == 0
        ));
    }
    for w in set {
        let vlan = w.vlans.map(|(a, b)| if me == 1 { a } else { b });
        y.push_str(&format!(
            "  - {{name: {}, port: {}, neighbor: {}, pw-id: {}, control-word: {}{}}}\n",
            w.name,
            w.port,
            lo(3 - me),
            w.id,
            w.cw,
            vlan.map(|v| format!(", vlan: {v}")).unwrap_or_default()
        ));
    }
    y
}

/// pe-1 is .1 on 10.94.1.0/30, pe-2 .2 on 10.94.2.0/30; the P the other.
fn p_yaml() -> String {
    format!(
        "switch:\n  name: p\nrouting:\n  fpm: 127.0.0.1:{FPM_PORT}\nports:\n  \
         - {{name: w, mode: routed, mtu: 1600, addresses: [10.94.1.2/30, {}/32]}}\n  \
         - {{name: e, mode: routed, mtu: 1600, addresses: [10.94.2.1/30]}}\n",
        lo(3)
    )
}

/// ldpd's l2vpn stanzas for `yaml`, as `lanyard config ldpd` prints them.
fn ldpd_stanzas(yaml: &str, dir: &Path, tag: &str) -> String {
    let f = dir.join(format!("{tag}.yaml"));
    std::fs::write(&f, yaml).unwrap();
    let out = Command::new(l2::bin(env!("CARGO_BIN_EXE_lanyard")))
        .arg("config")
        .arg("ldpd")
        .arg(&f)
        .output()
        .expect("lanyard config ldpd");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The lines of the stanza `l2vpn NAME …` in `stanzas` (no `!`).
fn stanza<'a>(stanzas: &'a str, name: &str) -> Vec<&'a str> {
    let head = format!("l2vpn {name} ");
    stanzas
        .split("!\n")
        .find(|s| s.starts_with(&head))
        .unwrap_or_else(|| panic!("no stanza {name}: {stanzas}"))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect()
}

fn frr_config(k: u8, ifs: &[&str], explicit_null: bool, stanzas: &str) -> FrrConfig {
    let mut ospfd = String::new();
    let mut ldpd = format!(
        "mpls ldp\n router-id {lo}\n address-family ipv4\n  discovery transport-address {lo}\n",
        lo = lo(k)
    );
    if explicit_null {
        ldpd.push_str("  label local advertise explicit-null\n");
    }
    for i in ifs {
        ospfd.push_str(&format!(
            "interface {i}\n ip ospf network point-to-point\n ip ospf hello-interval 1\n \
             ip ospf dead-interval 4\nexit\n"
        ));
        ldpd.push_str(&format!("  interface {i}\n"));
    }
    ospfd.push_str(&format!(
        "router ospf\n ospf router-id {}\n network 10.94.0.0/16 area 0\n redistribute connected\nexit\n",
        lo(k)
    ));
    ldpd.push_str(" exit-address-family\nexit\n!\n");
    ldpd.push_str(stanzas);
    FrrConfig {
        zebra: format!("fpm address 127.0.0.1 port {FPM_PORT}\nno fpm use-next-hop-groups\n"),
        ospfd,
        ldpd,
        ..FrrConfig::default()
    }
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(x) = f() {
            return Some(x);
        }
        if Instant::now() >= end {
            eprintln!("  timed out waiting for {what}");
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// ldpd's state of pseudowire interface `ifname` ("UP", "DOWN"), if it
/// lists it.
fn vc_state(frr: &FrrInstance, ifname: &str) -> Option<String> {
    frr.vtysh(&["show l2vpn atom vc"])
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&ifname))
        .and_then(|w| w.last().map(|s| s.to_string()))
}

fn ifname(w: &Pw) -> String {
    format!("mpw{}", w.id)
}

/// (local, remote) labels of `name` in Lanyard when it is up.
fn labels_up(sw: &Switch, name: &str) -> Option<(u64, u64)> {
    let v = pws(sw);
    let r = row(&v, name)?;
    (r["up"] == true).then_some(())?;
    Some((r["local_label"].as_u64()?, r["remote_label"].as_u64()?))
}

/// The pseudowire `w` up in ldpd on both PEs and in both Lanyards with
/// mirrored labels; pe-a's (local, remote).
fn signalled_up(
    fa: &FrrInstance,
    fb: &FrrInstance,
    a: &Switch,
    b: &Switch,
    w: &Pw,
) -> Option<(u64, u64)> {
    let i = ifname(w);
    (vc_state(fa, &i).as_deref() == Some("UP") && vc_state(fb, &i).as_deref() == Some("UP"))
        .then_some(())?;
    let (la, ra) = labels_up(a, w.name)?;
    let (lb, rb) = labels_up(b, w.name)?;
    (la == rb && ra == lb && la >= 16 && ra >= 16).then_some((la, ra))
}

/// The labelled frames on a core port carrying a test frame of `phase`:
/// (label stack, payload after the stack).
fn pw_frames(port: &RawPort, phase: u32) -> Vec<(Vec<Lse>, Vec<u8>)> {
    let mut out = Vec::new();
    while let Ok(Some(f)) = port.recv_timeout(Duration::from_millis(150)) {
        let Some((stack, payload)) = mpls_labels(&f) else {
            continue;
        };
        // The customer frame: after the control word, or at once.
        let inner = [payload.get(4..), Some(payload)]
            .into_iter()
            .flatten()
            .find(|p| test_info(p).is_some_and(|i| i.phase == phase));
        if inner.is_some() {
            out.push((stack, payload.to_vec()));
        }
    }
    out
}

/// The in-label and packet count of the P's swap entries whose one path
/// pushes `out`.
fn swap_to(sw: &Switch, out: u32) -> Vec<(u32, u64)> {
    let v = sw.show_json(&["show", "mpls", "table"]);
    v["labels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["hops"].as_array().is_some_and(|h| {
                h.len() == 1 && h[0]["out_labels"].as_array() == Some(&vec![Value::from(out)])
            })
        })
        .map(|e| {
            (
                e["in_label"].as_u64().unwrap_or(0) as u32,
                e["packets"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Whether Lanyard's LFIB has an installed entry for `label`.
fn lfib_has(sw: &Switch, label: u64) -> bool {
    let v = sw.show_json(&["show", "mpls", "table"]);
    v["labels"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["in_label"].as_u64() == Some(label))
}

#[test]
fn signalled_pseudowires_across_a_lanyard_p_and_changed_live() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd]);
    let module = std::env::var("LANYARD_ZEBRA_MODULE").unwrap_or_else(|_| MODULE.into());
    if !Path::new(&module).exists() {
        println!("SKIPPED: needs {module} (scripts/build-zebra-mpls.sh)");
        return;
    }
    let t0 = Instant::now();
    let ns = |p: &str| Netns::new(p).expect("namespace");
    let (ca, pa, p, pb, cb, core) = (
        ns("pwxca"),
        ns("pwxpa"),
        ns("pwxp"),
        ns("pwxpb"),
        ns("pwxcb"),
        ns("pwxcore"),
    );
    for br in ["br1", "br2"] {
        core.exec(&["ip", "link", "add", br, "type", "bridge", "stp_state", "0"])
            .expect("bridge");
    }
    veth(&pa, "up", &core, "x1", 1600).unwrap();
    veth(&p, "w", &core, "y1", 1600).unwrap();
    veth(&p, "e", &core, "x2", 1600).unwrap();
    veth(&pb, "up", &core, "y2", 1600).unwrap();
    for (br, ports) in [("br1", ["x1", "y1"]), ("br2", ["x2", "y2"])] {
        for port in ports {
            core.exec(&["ip", "link", "set", port, "master", br])
                .expect("bridge port");
        }
        core.exec(&["ip", "link", "set", br, "up"]).unwrap();
    }
    let xports = extra_ports();
    for port in AC_PORTS
        .iter()
        .copied()
        .chain(xports.iter().map(String::as_str))
    {
        veth(&pa, port, &ca, port, 9000).unwrap();
        veth(&pb, port, &cb, port, 9000).unwrap();
    }
    let tmp_guard = testkit::TempDir::new("pwldpp");
    let tmp = tmp_guard.path().to_path_buf();
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let sock = |k: u8| tmp.join(format!("pw{k}.sock"));
    let before: [&Pw; 3] = [&KEEP, &VL, &DEL];
    let after: [&Pw; 3] = [&KEEP, &VL, &NEW];

    // The three routers, started in parallel (each: Lanyard, then FRR).
    let start = |k: u8, dut: &Netns| {
        let (yaml, ports, cfg) = if k == 3 {
            (
                p_yaml(),
                vec!["w", "e"],
                frr_config(3, &["ly-w", "ly-e"], false, ""),
            )
        } else {
            let y = pe_yaml(k, &sock(k), &before);
            let st = ldpd_stanzas(&y, &tmp, &format!("pe-{k}"));
            let mut ports = vec!["up", "ac1", "ac2", "ac3"];
            ports.extend(xports.iter().map(String::as_str));
            (y, ports, frr_config(k, &["ly-up"], true, &st))
        };
        let sw = Switch::start(&bin, dut, &yaml, &ports).expect("start lanyard");
        let opts = FrrOptions {
            zebra_args: vec![
                "-M".into(),
                "dplane_fpm_nl".into(),
                "-M".into(),
                format!("{module}:{}", sock(k).display()),
            ],
            ..FrrOptions::default()
        };
        let frr = FrrInstance::start_with(
            dut.name(),
            &format!("pwx{k}"),
            &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd],
            &cfg,
            &opts,
        )
        .expect("FRR");
        (sw, frr)
    };
    let ((a, fa), (sp, fp), (b, fb)) = std::thread::scope(|s| {
        let x = s.spawn(|| start(1, &pa));
        let y = s.spawn(|| start(3, &p));
        let z = s.spawn(|| start(2, &pb));
        (x.join().unwrap(), y.join().unwrap(), z.join().unwrap())
    });
    eprintln!(
        "  routers started {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );
    let dump = |why: &str| -> String {
        let mut s = format!("{why}\n");
        for (name, f) in [("pe-a", &fa), ("p", &fp), ("pe-b", &fb)] {
            s.push_str(&format!(
                "--- {name} FRR:\n{}\n",
                f.vtysh(&[
                    "show ip ospf neighbor",
                    "show mpls ldp neighbor",
                    "show mpls ldp binding",
                    "show l2vpn atom vc",
                    "show mpls pseudowires",
                    "show mpls table",
                ])
            ));
        }
        for (name, sw) in [("pe-a", &a), ("p", &sp), ("pe-b", &b)] {
            s.push_str(&format!(
                "--- {name} Lanyard:\n{}\n{}\n",
                String::from_utf8_lossy(&sw.cli(&["show", "mpls", "table"]).unwrap().stdout),
                String::from_utf8_lossy(&sw.cli(&["show", "mpls", "pseudowires"]).unwrap().stdout),
            ));
        }
        s
    };

    // 1. Signalled across the P.
    if extra_count() > 0 {
        scaled_up(&fa, &fb, &a, &b, t0);
    }
    let mut lab = Vec::new();
    for w in before {
        match wait_for(
            &format!("{} up on both PEs", w.name),
            Duration::from_secs(90),
            || signalled_up(&fa, &fb, &a, &b, w),
        ) {
            Some(l) => lab.push(l),
            None => panic!("{}", dump(&format!("{} not up", w.name))),
        }
    }
    eprintln!(
        "  {} pseudowires UP in ldpd and Lanyard on both PEs {:.1} s after start",
        before.len(),
        t0.elapsed().as_secs_f64()
    );
    // zebra holds the labels Lanyard uses.
    let zpw = fa.vtysh(&["show mpls pseudowires"]);
    for (w, (l, r)) in before.iter().zip(&lab) {
        assert!(
            zpw.lines()
                .any(|x| x.starts_with(&format!("{} ", ifname(w)))
                    && x.contains(&format!("{l}/{r}"))),
            "zebra's labels for {}: {zpw}",
            w.name
        );
    }

    let open = |n: &Netns, i: &str| RawPort::open(n.name(), i).unwrap();
    let ra: Vec<RawPort> = AC_PORTS.iter().map(|i| open(&ca, i)).collect();
    let rb: Vec<RawPort> = AC_PORTS.iter().map(|i| open(&cb, i)).collect();
    // A raw socket sees what a port receives: x1 pe-a→P, y1 P→pe-a, x2
    // P→pe-b, y2 pe-b→P.
    let (x1, y1, x2, y2) = (
        open(&core, "x1"),
        open(&core, "y1"),
        open(&core, "x2"),
        open(&core, "y2"),
    );
    // The PEs resolve the P's MAC on the first frames.
    wait_through(&ra[0], &rb[0], &[], LEN, || dump("KEEP a->b"));
    wait_through(&rb[0], &ra[0], &[], LEN, || dump("KEEP b->a"));
    wait_through(&ra[1], &rb[1], &[Tag::dot1q(100)], LEN, || dump("VL a->b"));
    wait_through(&rb[1], &ra[1], &[Tag::dot1q(200)], LEN, || dump("VL b->a"));
    for port in ra.iter().chain(&rb).chain([&x1, &y1, &x2, &y2]) {
        port.drain();
    }

    // Frames both ways on KEEP (untagged, tagged, Q-in-Q) and VL, seen on
    // both core hops.
    let kinds: Vec<Vec<Tag>> = vec![
        vec![],
        vec![Tag::dot1q(77)],
        vec![Tag::dot1ad(10), Tag::dot1q(20)],
    ];
    let mut failures = Vec::new();
    let mut phase = 20u32;
    let mut tshark_done = false;
    for (w, (la, ra_)) in [(&KEEP, lab[0]), (&VL, lab[1])] {
        for from_a in [true, false] {
            phase += 1;
            let k = if w.port == "ac1" { 0 } else { 1 };
            let (src, dst) = if from_a {
                (&ra[k], &rb[k])
            } else {
                (&rb[k], &ra[k])
            };
            let frames: Vec<(Vec<u8>, Vec<u8>)> = match w.vlans {
                None => kinds
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let f =
                            test_frame(&mac(10 + i as u32), &mac(20), t, phase, i as u64, LEN + i);
                        (f.clone(), f)
                    })
                    .collect(),
                Some((va, vb)) => {
                    let (vs, vd) = if from_a { (va, vb) } else { (vb, va) };
                    let f = |v| test_frame(&mac(40), &mac(41), &[Tag::dot1q(v)], phase, 7, LEN);
                    vec![(f(vs), f(vd))]
                }
            };
            for (f, _) in &frames {
                src.send(f).unwrap();
            }
            let dir = format!("{} {}", w.name, if from_a { "a->b" } else { "b->a" });
            let got = dst.recv_test_frames(Duration::from_millis(300)).unwrap();
            let want: Vec<Vec<u8>> = frames.iter().map(|x| x.1.clone()).collect();
            if got != want {
                failures.push(format!(
                    "{dir}: far port got {} of {} intact",
                    got.len(),
                    want.len()
                ));
            }
            for other in ra.iter().chain(&rb) {
                if !std::ptr::eq(other, dst)
                    && !other
                        .recv_test_frames(Duration::from_millis(20))
                        .unwrap()
                        .is_empty()
                {
                    failures.push(format!("{dir}: frames leaked to {}", other.ifname()));
                }
            }
            // The PW label: the far PE's local label (the sender's remote).
            let pw_label = (if from_a { ra_ } else { la }) as u32;
            let (near, far) = if from_a { (&x1, &x2) } else { (&y2, &y1) };
            let (on_near, on_far) = (pw_frames(near, phase), pw_frames(far, phase));
            if on_near.len() != frames.len() || on_far.len() != frames.len() {
                failures.push(format!(
                    "{dir}: {} frames PE->P, {} P->PE, want {} each",
                    on_near.len(),
                    on_far.len(),
                    frames.len()
                ));
                continue;
            }
            let mut transport = None;
            for (i, ((s1, p1), (s2, p2))) in on_near.iter().zip(&on_far).enumerate() {
                // [transport, PW] PE->P, [explicit null, PW] P->PE.
                let ok_near =
                    s1.len() == 2 && !s1[0].1 && s1[0].0 >= 16 && s1[1].0 == pw_label && s1[1].1;
                let ok_far = s2.len() == 2 && !s2[0].1 && s2[0].0 == 0 && s2[1] == s1[1];
                if !ok_near || !ok_far {
                    failures.push(format!(
                        "{dir}: stacks {s1:?} PE->P, {s2:?} P->PE (PW label {pw_label})"
                    ));
                }
                // TTL: the P decremented the transport label's.
                if s2[0].2 + 1 != s1[0].2 {
                    failures.push(format!("{dir}: transport TTL {} then {}", s1[0].2, s2[0].2));
                }
                transport = Some(s1[0].0);
                // The payload unchanged by the P; control word then the
                // customer frame as sent, byte for byte.
                let sent = &frames[i].0;
                let want_payload = if w.cw {
                    [&[0u8; 4][..], sent].concat()
                } else {
                    sent.clone()
                };
                if p1 != p2 || *p1 != want_payload {
                    failures.push(format!(
                        "{dir}: payload PE->P {} bytes, P->PE {} bytes, not the customer frame{}",
                        p1.len(),
                        p2.len(),
                        if w.cw {
                            " after a zero control word"
                        } else {
                            ""
                        }
                    ));
                }
            }
            let t = transport.unwrap();
            let swaps = swap_to(&sp, 0);
            if !swaps
                .iter()
                .any(|&(l, n)| l == t && n >= frames.len() as u64)
            {
                failures.push(format!(
                    "{dir}: the P's swap {t} -> 0 not counted: {swaps:?}"
                ));
            }
            if !tshark_done {
                tshark_done = true;
                // An independent dissector reads the same stack.
                let mut f = vec![0u8; 12];
                f.extend_from_slice(&[0x88, 0x47]);
                for (l, s, ttl) in &on_near[0].0 {
                    let word = l << 12 | u32::from(*s) << 8 | u32::from(*ttl);
                    f.extend_from_slice(&word.to_be_bytes());
                }
                f.extend_from_slice(&on_near[0].1);
                if let Ok(fs) = testkit::tshark::fields(&f, &["mpls.label", "mpls.bottom"], &[]) {
                    if fs.first().map(String::as_str) != Some(&format!("{t},{pw_label}")) {
                        failures.push(format!("tshark reads {fs:?}, want labels {t},{pw_label}"));
                    }
                }
            }
            eprintln!(
                "  {dir}: {} frames, [{t}, {pw_label}] PE->P, [0, {pw_label}] P->PE, payload intact",
                frames.len()
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{failures:#?}\n{}",
        dump("across the P")
    );
    let del_labels = lab[2];
    if extra_count() > 0 {
        scaled(&ca, &cb);
    }

    // 2. Live change of signalled pseudowires under a stream on KEEP:
    // pe-b's Lanyard first (DEL removed: zebra is told it is down; NEW
    // added, not yet in ldpd), then ldpd on both PEs (NEW signalled; DEL
    // withdrawn), pe-a's Lanyard last: zebra's install of NEW there is
    // refused until the apply, which asks zebra to install again at once
    // (its own retry is every 30 s).
    let stanzas_a = ldpd_stanzas(&pe_yaml(1, &sock(1), &after), &tmp, "pe-1-after");
    let stanzas_b = ldpd_stanzas(&pe_yaml(2, &sock(2), &after), &tmp, "pe-2-after");
    let reconf = |f: &FrrInstance, stanzas: &str| {
        let mut lines = stanza(stanzas, NEW.name);
        let del = format!("no l2vpn {} type vpls", DEL.name);
        lines.push("exit");
        lines.push(&del);
        let lines: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
        f.configure(&lines).expect("ldpd reconfiguration")
    };
    let ya = pe_yaml(1, &sock(1), &after);
    let yb = pe_yaml(2, &sock(2), &after);
    let cap = rb[0].start_capture(0, |i, _| i.phase == 5).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = ra[0].try_clone().unwrap();
    let stop2 = stop.clone();
    // Paced in slices of 0.1 s until told to stop; frames sent.
    let tx = std::thread::spawn(move || {
        let slice = (RATE / 10) as usize;
        let mut sent = 0usize;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            sender
                .send_paced(slice, RATE, |i, buf| {
                    *buf = test_frame(&mac(30), &mac(31), &[], 5, (sent + i) as u64, 64)
                })
                .unwrap();
            sent += slice;
        }
        sent
    });
    std::thread::sleep(Duration::from_millis(300));
    // Side-channel lines Lanyard answered for KEEP so far: the change
    // leaves KEEP alone, so none more may reach Lanyard (zebra 8.4
    // re-installs every pseudowire to the peer when NEW is added; the
    // module answers those unchanged repeats itself).
    let keep_installs = |sw: &Switch| row(&pws(sw), KEEP.name).and_then(|r| r["installs"].as_u64());
    let keep_before = (keep_installs(&a), keep_installs(&b));
    let t_change = Instant::now();
    let out_b = b
        .apply_config("after-b", &yb)
        .unwrap_or_else(|e| panic!("apply pe-b: {e}"));
    let del_down = wait_for("DEL down in ldpd", Duration::from_secs(10), || {
        let i = ifname(&DEL);
        (vc_state(&fa, &i).as_deref() != Some("UP") && vc_state(&fb, &i).as_deref() != Some("UP"))
            .then(|| t_change.elapsed())
    })
    .unwrap_or_else(|| panic!("{}", dump("DEL still UP after pe-b removed it")));
    reconf(&fa, &stanzas_a);
    reconf(&fb, &stanzas_b);
    let refused = |f: &FrrInstance| {
        std::fs::read_to_string(f.dir().join("zebra.log"))
            .unwrap_or_default()
            .matches(&format!("{} install refused", ifname(&NEW)))
            .count()
    };
    wait_for("pe-a refusing NEW", Duration::from_secs(20), || {
        (refused(&fa) > 0).then_some(())
    })
    .unwrap_or_else(|| panic!("{}", dump("pe-a's zebra did not install NEW")));
    assert!(
        signalled_up(&fa, &fb, &a, &b, &NEW).is_none(),
        "NEW up before pe-a has its circuit"
    );
    let t_a = Instant::now();
    let out_a = a
        .apply_config("after-a", &ya)
        .unwrap_or_else(|e| panic!("apply pe-a: {e}"));
    eprintln!(
        "  apply pe-b: {}; DEL down in ldpd (both PEs) {:.2} s later\n  apply pe-a: {}",
        out_b.trim_end(),
        del_down.as_secs_f64(),
        out_a.trim_end()
    );
    // NEW comes up through ldpd on both PEs.
    let new_labels = wait_for("NEW up on both PEs", Duration::from_secs(20), || {
        signalled_up(&fa, &fb, &a, &b, &NEW)
    })
    .unwrap_or_else(|| panic!("{}", dump("NEW not up")));
    let new_up = t_a.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let total = tx.join().unwrap();
    cap.wait_quiet(Duration::from_millis(300), Duration::from_secs(3));
    let got = cap.stop().unwrap().matched;
    eprintln!(
        "  NEW UP in ldpd and Lanyard on both PEs {:.2} s after pe-a's apply ({:.1} s after the change began)",
        new_up.as_secs_f64(),
        t_change.elapsed().as_secs_f64()
    );
    eprintln!("  KEEP under {RATE} frames/s throughout: {got} of {total} delivered");
    assert_eq!(got, total as u64, "KEEP lost frames while the PEs changed");
    assert!(
        new_up < Duration::from_secs(10),
        "NEW took {new_up:?} after pe-a's apply (zebra's own retry: 30 s)"
    );
    let zpw = fb.vtysh(&["show mpls pseudowires"]);
    let (nl, nr) = new_labels;
    assert!(
        zpw.lines()
            .any(|x| x.starts_with(&format!("{} ", ifname(&NEW)))
                && x.contains(&format!("{nr}/{nl}"))),
        "pe-b zebra's labels for NEW: {zpw}"
    );
    wait_through(&ra[1], &rb[1], &[Tag::dot1q(101)], LEN, || dump("NEW a->b"));
    wait_through(&rb[1], &ra[1], &[Tag::dot1q(201)], LEN, || dump("NEW b->a"));
    for (src, dst, vs, vd) in [(&ra[1], &rb[1], 101, 201), (&rb[1], &ra[1], 201, 101)] {
        dst.drain();
        let f = test_frame(&mac(50), &mac(51), &[Tag::dot1q(vs)], 6, 1, LEN);
        src.send(&f).unwrap();
        let got = dst.recv_test_frames(Duration::from_millis(300)).unwrap();
        let want = test_frame(&mac(50), &mac(51), &[Tag::dot1q(vd)], 6, 1, LEN);
        assert_eq!(got, vec![want], "NEW VLAN {vs} -> {vd}");
    }

    assert_eq!(
        (keep_installs(&a), keep_installs(&b)),
        keep_before,
        "KEEP's installs reached Lanyard again while NEW was added (pe-a, pe-b)"
    );

    // DEL is withdrawn: gone from ldpd, zebra and Lanyard, its label out
    // of the LFIB; its old port's frames cross nothing.
    let gone = wait_for("DEL gone on both PEs", Duration::from_secs(15), || {
        let i = ifname(&DEL);
        let z = |f: &FrrInstance| {
            vc_state(f, &i).is_none()
                && !f
                    .vtysh(&["show mpls pseudowires"])
                    .lines()
                    .any(|l| l.starts_with(&format!("{i} ")))
        };
        (z(&fa) && z(&fb) && row(&pws(&a), DEL.name).is_none() && row(&pws(&b), DEL.name).is_none())
            .then_some(())
    });
    if gone.is_none() {
        panic!("{}", dump("DEL not withdrawn"));
    }
    assert!(
        !lfib_has(&a, del_labels.0),
        "pe-a still pops DEL's label {}",
        del_labels.0
    );
    assert!(
        !lfib_has(&b, del_labels.1),
        "pe-b still pops DEL's label {}",
        del_labels.1
    );
    for port in ra.iter().chain(&rb) {
        port.drain();
    }
    ra[2]
        .send(&test_frame(&mac(60), &mac(61), &[], 7, 1, LEN))
        .unwrap();
    rb[2]
        .send(&test_frame(&mac(60), &mac(61), &[], 7, 2, LEN))
        .unwrap();
    for port in ra.iter().chain(&rb) {
        let got = port.recv_test_frames(Duration::from_millis(100)).unwrap();
        assert!(
            got.is_empty(),
            "DEL's old port's frames reached {}",
            port.ifname()
        );
    }
    // KEEP and VL still up in ldpd.
    for w in [&KEEP, &VL] {
        assert!(
            signalled_up(&fa, &fb, &a, &b, w).is_some(),
            "{}",
            dump(&format!("{} after the change", w.name))
        );
    }
    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop((fa, fp, fb));
    drop((a, sp, b));
}

/// Waits for every pseudowire, the extra ones included, UP in ldpd and
/// Lanyard on both PEs (progress every 10 s).
fn scaled_up(fa: &FrrInstance, fb: &FrrInstance, a: &Switch, b: &Switch, t0: Instant) {
    let n = extra_count();
    let want = 3 + n as u64;
    let ldpd_up = |f: &FrrInstance| {
        f.vtysh(&["show l2vpn atom vc"])
            .lines()
            .filter(|l| l.starts_with("mpw") && l.trim_end().ends_with("UP"))
            .count() as u64
    };
    // Side-channel lines each Lanyard answered so far.
    let installs = |sw: &Switch| -> u64 {
        pws(sw)["pseudowires"]
            .as_array()
            .map(|r| r.iter().filter_map(|p| p["installs"].as_u64()).sum())
            .unwrap_or(0)
    };
    // LANYARD_PW_LDP_WAIT: seconds to wait for all up (default 300).
    let wait = std::env::var("LANYARD_PW_LDP_WAIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut last = Instant::now();
    let up = wait_for(
        "the extra pseudowires up",
        Duration::from_secs(wait),
        || {
            let (x, y) = (pws(a)["up"].as_u64()?, pws(b)["up"].as_u64()?);
            if last.elapsed() > Duration::from_secs(10) {
                last = Instant::now();
                eprintln!(
                "  {:.0} s: Lanyard up {x} / {y}, ldpd UP {} / {} of {want}, side-channel installs {} / {}",
                t0.elapsed().as_secs_f64(),
                ldpd_up(fa),
                ldpd_up(fb),
                installs(a),
                installs(b)
            );
            }
            (x == want && y == want).then_some(())?;
            (ldpd_up(fa) == want && ldpd_up(fb) == want).then_some(())
        },
    );
    assert!(
        up.is_some(),
        "not all up: Lanyard {} / {}, ldpd {} / {} of {want}",
        pws(a)["up"],
        pws(b)["up"],
        ldpd_up(fa),
        ldpd_up(fb)
    );
    eprintln!(
        "  {want} pseudowires ({n} extra type 4) UP in ldpd and Lanyard on both PEs {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );
    // The side channel's lines (installs and uninstalls) each Lanyard
    // answered: zebra 8.4 re-installs every pseudowire to a peer whenever
    // one more is added (N^2/2 for N); the module answers the unchanged
    // repeats itself, so Lanyard sees a few per pseudowire (the first
    // install, a refusal and its retry while the transport comes up, a
    // transport label change), whatever N.
    for (name, sw) in [("pe-a", a), ("pe-b", b)] {
        let lines = installs(sw);
        eprintln!(
            "  {name}: {lines} side-channel installs for {want} pseudowires ({:.1} each)",
            lines as f64 / want as f64
        );
        if n >= 32 {
            assert!(
                lines <= 6 * want,
                "{name}: {lines} installs reached Lanyard for {want} pseudowires \
                 (zebra's repeats not answered by the module?)"
            );
        }
    }
}

/// `LANYARD_PW_LDP_VLANS` extra type-4 pseudowires (up, [`scaled_up`]):
/// one frame per VLAN each way across the P, each on its own far VLAN
/// only, none twice.
fn scaled(ca: &Netns, cb: &Netns) {
    let n = extra_count();
    let open = |ns: &Netns| -> Vec<RawPort> {
        extra_ports()
            .iter()
            .map(|p| RawPort::open(ns.name(), p).unwrap())
            .collect()
    };
    let (xa, xb) = (open(ca), open(cb));
    let mut failures = Vec::new();
    for from_a in [true, false] {
        let (src, dst) = if from_a { (&xa, &xb) } else { (&xb, &xa) };
        for p in dst {
            p.drain();
        }
        let sent_at = Instant::now();
        for i in 0..n {
            let (port, va, vb) = extra(i);
            let v = if from_a { va } else { vb };
            let k = port[1..].parse::<usize>().unwrap();
            src[k]
                .send(&test_frame(
                    &mac(70),
                    &mac(71),
                    &[Tag::dot1q(v)],
                    8,
                    i as u64,
                    120,
                ))
                .unwrap();
            if (i + 1).is_multiple_of(64) {
                std::thread::sleep(Duration::from_micros(1500));
            }
        }
        let mut wrong = 0;
        let mut got_n = 0;
        let mut seen = std::collections::HashSet::new();
        for (k, p) in dst.iter().enumerate() {
            for f in p
                .recv_test_frames(Duration::from_millis(if k == 0 { 500 } else { 50 }))
                .unwrap()
            {
                got_n += 1;
                let Some(t) = test_info(&f) else { continue };
                let i = t.seq as usize;
                // (a duplicate is wrong too)
                if !seen.insert(i) {
                    wrong += 1;
                }
                let (port, va, vb) = extra(i);
                let v = if from_a { vb } else { va };
                if t.phase != 8
                    || port != format!("s{k}")
                    || f != test_frame(&mac(70), &mac(71), &[Tag::dot1q(v)], 8, i as u64, 120)
                {
                    wrong += 1;
                }
            }
        }
        eprintln!(
            "  extra {}: {n} frames sent, {got_n} received ({:.2} s), {wrong} wrong",
            if from_a { "a->b" } else { "b->a" },
            sent_at.elapsed().as_secs_f64()
        );
        if got_n != n || wrong != 0 {
            failures.push(format!(
                "extra {}: {got_n} of {n} received, {wrong} wrong",
                if from_a { "a->b" } else { "b->a" }
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
