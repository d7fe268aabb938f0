//! A CE pings the far PE's own address in its VRF across the L3VPN
//! (docs/vrf.md, "Traffic of a VRF's own kernel"): the static-VPN bed of
//! `static_vpn.rs` with one customer, two Lanyard PEs, one uplink
//! through a bridge (a raw socket on the wire), no FRR.
//!
//! ```text
//!  ce1 ─ ca [pe1] up ══ br (core) ══ up [pe2] ca ─ ce2
//! ```
//!
//! The echo crosses pe1 under pe2's VPN label; pe2 pops it into CUSTA,
//! where 10.2.0.1 is its own: punted to ca's twin in the VRF's
//! namespace. That kernel has no route to the CE (VPN routes live only
//! in Lanyard's tables); its catch-all route (installed by Lanyard with
//! the VRF's twins) sends the reply to Lanyard, which routes it in CUSTA:
//! under pe1's VPN label over the uplink, popped by pe1, to ce1.
//!
//! Checked, both ways, IPv4 and IPv6: `ping` gets its replies (TTL / hop
//! limit 62 at the CE: the far PE's kernel, then two routers); on the
//! wire the echo carries exactly [far PE's VPN label] (S, label TTL 63)
//! over IP TTL 63, and the reply [near PE's VPN label] (S, 63) over 63;
//! the catch-all routes are in the VRF namespace's kernel; `show
//! counters` counts the replies routed from the VRF's kernel. Fails
//! without the change (the echo was dropped `unsupported` at the far PE,
//! and a reply would have left the twin unrouted). A few seconds. Needs
//! root, else SKIPPED.

use std::time::{Duration, Instant};

use testkit::frame::mpls_labels;
use testkit::netns::{veth, Netns};
use testkit::{l2, RawPort, Switch};

/// The VPN label PE `k` pops into CUSTA (the far PE pushes it).
fn label(k: u8) -> u32 {
    900_000 + 10 * k as u32 + 1
}

fn pe_yaml(k: u8, vrf_ns: &Netns) -> String {
    let far = 3 - k;
    format!(
        r#"
switch:
  name: pe{k}
ports:
  - {{name: ca, mode: routed, addresses: [10.{k}.0.1/24, "2001:db8:{k}::1/64"]}}
  - {{name: up, mode: routed, addresses: [10.91.0.{k}/30, 10.255.0.{k}/32]}}
vrfs:
  - {{name: CUSTA, interfaces: [ca], namespace: {ns}, vpn-label: {mine}}}
routing:
  static-routes:
    - {{prefix: 10.255.0.{far}/32, next-hop: 10.91.0.{far}}}
    - {{prefix: 10.{far}.0.0/24, vrf: CUSTA, remote-pe: 10.255.0.{far}, vpn-label: {theirs}}}
    - {{prefix: "2001:db8:{far}::/64", vrf: CUSTA, remote-pe: 10.255.0.{far}, vpn-label: {theirs}}}
"#,
        ns = vrf_ns.name(),
        mine = label(k),
        theirs = label(far),
    )
}

fn collect(port: &RawPort, quiet: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Ok(Some(f)) = port.recv_timeout(quiet) {
        out.push(f);
    }
    out
}

/// An ICMP echo on the wire: (label stack, IP TTL / hop limit, is a
/// reply).
type Echo = (Vec<testkit::frame::Lse>, u8, bool);

/// The ICMP echoes among labelled `frames`.
fn echoes(frames: &[Vec<u8>]) -> Vec<Echo> {
    frames
        .iter()
        .filter_map(|f| {
            let (stack, ipp) = mpls_labels(f)?;
            match ipp.first()? >> 4 {
                4 if ipp.len() >= 28 && ipp[9] == 1 => {
                    let ihl = 4 * (ipp[0] & 15) as usize;
                    let ty = *ipp.get(ihl)?;
                    matches!(ty, 0 | 8).then(|| (stack, ipp[8], ty == 0))
                }
                6 if ipp.len() >= 48 && ipp[6] == 58 => {
                    let ty = ipp[40];
                    matches!(ty, 128 | 129).then(|| (stack, ipp[7], ty == 129))
                }
                _ => None,
            }
        })
        .collect()
}

/// `ping` from `ce` to `dst` until `count` replies come back in one run
/// (the first ones resolve neighbours), within 10 s. The output of the
/// last run.
fn ping_until(ce: &Netns, dst: &str, count: u32) -> Result<String, String> {
    let t = Instant::now();
    loop {
        let n = count.to_string();
        let out = ce
            .command(&["ping", "-n", "-c", &n, "-i", "0.2", "-W", "1", dst])
            .output()
            .map_err(|e| format!("ping: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains(&format!("{count} received")) {
            return Ok(text);
        }
        if t.elapsed() > Duration::from_secs(10) {
            return Err(text);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_ce_pings_the_far_pe_in_its_vrf() {
    testkit::require_root!();
    let t0 = Instant::now();
    let ns = |p: &str| Netns::new(p).expect("namespace");
    let (pe1, pe2, core) = (ns("vppe1"), ns("vppe2"), ns("vpcore"));
    let (ce1, ce2) = (ns("vpce1"), ns("vpce2"));
    let (vrf1, vrf2) = (ns("vpvrf1"), ns("vpvrf2"));
    testkit::netns::bridged_segment(&core, &[(&pe1, "up", "x"), (&pe2, "up", "y")], 1600)
        .expect("core segment");
    for (pe, ce, k) in [(&pe1, &ce1, 1u8), (&pe2, &ce2, 2u8)] {
        veth(pe, "ca", ce, "c", 1500).unwrap();
        ce.sysctl("net.ipv6.conf.c.disable_ipv6", "0").unwrap();
        for args in [
            vec!["ip", "addr", "add", &format!("10.{k}.0.2/24"), "dev", "c"],
            vec![
                "ip",
                "addr",
                "add",
                &format!("2001:db8:{k}::2/64"),
                "dev",
                "c",
                "nodad",
            ],
            vec![
                "ip",
                "route",
                "add",
                "default",
                "via",
                &format!("10.{k}.0.1"),
            ],
            vec![
                "ip",
                "-6",
                "route",
                "add",
                "default",
                "via",
                &format!("2001:db8:{k}::1"),
            ],
        ] {
            let args: Vec<&str> = args.iter().map(|s| s.as_ref()).collect();
            ce.exec(&args).unwrap();
        }
    }
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let ports = ["ca", "up"];
    let (sw1, sw2) = std::thread::scope(|s| {
        let a = s.spawn(|| Switch::start(&bin, &pe1, &pe_yaml(1, &vrf1), &ports));
        let b = s.spawn(|| Switch::start(&bin, &pe2, &pe_yaml(2, &vrf2), &ports));
        (
            a.join().unwrap().expect("start pe1"),
            b.join().unwrap().expect("start pe2"),
        )
    });
    eprintln!(
        "  PEs started {:.1} s after start",
        t0.elapsed().as_secs_f64()
    );
    let dump = |why: &str| -> String {
        let mut s = format!("{why}\n");
        for (name, sw, vrf) in [("pe1", &sw1, &vrf1), ("pe2", &sw2, &vrf2)] {
            let text =
                |args: &[&str]| String::from_utf8_lossy(&sw.cli(args).unwrap().stdout).to_string();
            s.push_str(&format!(
                "--- {name}:\n{}{}{}{}",
                text(&["show", "ip", "route", "vrf", "CUSTA"]),
                text(&["show", "mpls", "forwarding"]),
                text(&["show", "counters"]),
                String::from_utf8_lossy(&vrf.command(&["ip", "route"]).output().unwrap().stdout),
            ));
        }
        s
    };

    // The catch-all routes are in each VRF namespace's kernel, of the
    // lowest priority, via Lanyard's gateway.
    for vrf in [&vrf1, &vrf2] {
        for (fam, gw) in [("-4", "169.254.255.254"), ("-6", "fe80::169:254:255:254")] {
            let out = vrf
                .command(&["ip", fam, "route", "show", "default"])
                .output();
            let text = String::from_utf8_lossy(&out.unwrap().stdout).to_string();
            assert!(
                text.contains(&format!("via {gw}")) && text.contains("metric 42949"),
                "{}: {text}",
                vrf.name()
            );
        }
    }

    let wire = [
        RawPort::open(core.name(), "x").unwrap(),
        RawPort::open(core.name(), "y").unwrap(),
    ];
    for (ce, k, v6) in [
        (&ce1, 1u8, false),
        (&ce2, 2u8, false),
        (&ce1, 1u8, true),
        (&ce2, 2u8, true),
    ] {
        let far = 3 - k;
        let dst = if v6 {
            format!("2001:db8:{far}::1")
        } else {
            format!("10.{far}.0.1")
        };
        let what = format!("ce{k} → pe{far} {dst}");
        // Neighbours first (the far CE's PE's uplink, the CE's gateway).
        if let Err(out) = ping_until(ce, &dst, 1) {
            panic!("{}", dump(&format!("{what}: no reply\n{out}")));
        }
        for w in &wire {
            w.drain();
        }
        let out = ping_until(ce, &dst, 5)
            .unwrap_or_else(|out| panic!("{}", dump(&format!("{what}: lost replies\n{out}"))));
        // Two routers after the far PE's kernel (64); ping says `ttl=`
        // for the IPv6 hop limit too.
        assert!(out.contains("ttl=62"), "{what}: {out}");
        // The near PE's uplink sends the echoes, the far PE's the replies.
        let near = &wire[(k - 1) as usize];
        let farw = &wire[(far - 1) as usize];
        let sent = echoes(&collect(near, Duration::from_millis(100)));
        let back = echoes(&collect(farw, Duration::from_millis(100)));
        let requests: Vec<_> = sent.iter().filter(|e| !e.2).collect();
        let replies: Vec<_> = back.iter().filter(|e| e.2).collect();
        assert!(requests.len() >= 5, "{what}: echoes on the wire {sent:?}");
        assert!(replies.len() >= 5, "{what}: replies on the wire {back:?}");
        for (stack, ip_ttl, _) in &requests {
            assert_eq!(
                (stack.as_slice(), *ip_ttl),
                (&[(label(far), true, 63)][..], 63),
                "{what}: echo request"
            );
        }
        for (stack, ip_ttl, _) in &replies {
            assert_eq!(
                (stack.as_slice(), *ip_ttl),
                (&[(label(k), true, 63)][..], 63),
                "{what}: echo reply"
            );
        }
        eprintln!(
            "  {what}: 5 replies; echo [{}] over TTL 63, reply [{}] over TTL 63",
            label(far),
            label(k)
        );
    }

    // Counted: the replies routed from each far PE's VRF kernel.
    for (name, sw) in [("pe1", &sw1), ("pe2", &sw2)] {
        let c = sw.show_json(&["show", "counters"]);
        let k = &c["l3"]["vrf_kernel"];
        let routed = k["routed"].as_u64().unwrap_or(0);
        assert!(
            routed >= 12 && k["received"].as_u64() >= Some(routed),
            "{name}: {k}"
        );
        let text =
            String::from_utf8_lossy(&sw.cli(&["show", "counters"]).unwrap().stdout).to_string();
        assert!(text.contains("From VRF kernels:"), "{text}");
    }
    drop(sw1);
    drop(sw2);
    eprintln!("  whole test {:.1} s", t0.elapsed().as_secs_f64());
}
