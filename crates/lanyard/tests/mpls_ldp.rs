//! MPLS end to end with real FRR (issue 17): Lanyard's FRR (zebra with
//! `dplane_fpm_nl` and the `zebra_lanyard.so` module, ospfd, ldpd) runs on
//! Lanyard's TAP twins and peers over Lanyard's routed port sw1 with a
//! tester FRR (ospfd + ldpd) in its own namespace. Checks:
//!
//! * the LDP session comes up through Lanyard's punt path;
//! * the tester's labels reach Lanyard's LFIB over FPM (`show mpls table`:
//!   a swap to the tester's label for a prefix it routes onward, a PHP
//!   pop for its loopback; `show mpls forwarding`: the labelled route);
//! * IP traffic entering sw2 for that prefix leaves sw1 with the tester's
//!   label (S set, label TTL = IP TTL − 1, IP checksum good — read by
//!   tshark, an independent dissector);
//! * labelled frames from the tester are switched by Lanyard's data path:
//!   its PHP label is popped and the IP packet forwarded with TTL and
//!   checksum fixed; an explicit-null frame is popped and routed out of
//!   sw2;
//! * withdrawing the route on the tester removes the swap and the FTN.
//!
//! The tester's LDP packets cross its veth with the UDP/TCP checksum left
//! to offload; Lanyard completes it on receive (docs/io.md, "Hosts behind
//! veths"), else ldpd's kernel drops every hello and SYN.
//!
//! The kernel has no MPLS: the tester injects and captures labelled frames
//! on its raw socket instead of forwarding them. Needs root, FRR, tshark
//! and the module (`scripts/build-zebra-mpls.sh`), else SKIPPED.

use serde_json::Value;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use testkit::frame::Mac;
use testkit::frr::{link_addrs, Daemon, FrrConfig, FrrInstance, FrrOptions, RouterBed};
use testkit::netns::mac_of;
use testkit::{ip, l2, Switch};

const FPM_PORT: u16 = 2620;
const MODULE_DEFAULT: &str = "/usr/local/lib/lanyard/zebra_lanyard.so";

fn module() -> PathBuf {
    std::env::var_os("LANYARD_ZEBRA_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(MODULE_DEFAULT))
}

/// The zebra module, or None (SKIPPED printed) when it is not built.
fn module_or_skip() -> Option<PathBuf> {
    let m = module();
    if m.exists() {
        return Some(m);
    }
    eprintln!("SKIPPED: needs {}", m.display());
    println!("SKIPPED: needs the zebra module");
    None
}

/// zebra with the FPM module and the MPLS module, its pseudowire side
/// channel at `dir/sock`.
fn frr_opts(module: &Path, dir: &Path, sock: &str) -> FrrOptions {
    FrrOptions {
        zebra_args: vec![
            "-M".into(),
            "dplane_fpm_nl".into(),
            "-M".into(),
            format!("{}:{}", module.display(), dir.join(sock).display()),
        ],
        ..FrrOptions::default()
    }
}

/// A point-to-point OSPF interface with fast hellos.
fn ospf_p2p(ifname: &str) -> String {
    format!(
        "interface {ifname}\n ip ospf network point-to-point\n ip ospf hello-interval 1\n \
         ip ospf dead-interval 4\n"
    )
}

/// A tester LSR's loopback `lo` (/32) and `prefix` routed onward through
/// an LDP interface `b` (a veth), so it advertises a real label for it.
fn tester_lsr_setup(t: &testkit::netns::Netns, lo: &str, b: &str, prefix: &str) {
    let bp = format!("{b}p");
    for args in [
        &["ip", "link", "set", "lo", "up"][..],
        &["ip", "addr", "add", &format!("{lo}/32"), "dev", "lo"],
        &["ip", "link", "add", b, "type", "veth", "peer", "name", &bp],
        &["ip", "link", "set", b, "up"],
        &["ip", "link", "set", &bp, "up"],
        &["ip", "addr", "add", "10.0.23.1/30", "dev", b],
        &["ip", "route", "add", prefix, "via", "10.0.23.2"],
    ] {
        t.exec(args).expect("tester setup");
    }
}

fn config() -> String {
    let mut y = String::from("switch:\n  name: mpls-dut\nports:\n");
    for i in 1..=2 {
        let (v4, _) = link_addrs(i, true);
        y.push_str(&format!(
            "  - name: sw{i}\n    mode: routed\n    mtu: 1500\n    addresses: [{v4}]\n"
        ));
    }
    y.push_str(&format!("routing:\n  fpm: 127.0.0.1:{FPM_PORT}\n"));
    y
}

fn addr(i: usize, dut: bool) -> String {
    link_addrs(i, dut).0.split('/').next().unwrap().to_string()
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(x) = f() {
            return x;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// tshark's view of one frame: each field's values (comma-joined).
fn tshark(frame: &[u8], fields: &[&str]) -> Vec<String> {
    testkit::tshark::fields(frame, fields, &[]).expect("tshark")
}

/// A labelled frame: `labels` (label, TTL), S on the last, over `ip`
/// (an Ethernet + IPv4 frame whose header is replaced).
fn labelled(dst: &Mac, src: &Mac, labels: &[(u32, u8)], ip_frame: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(src);
    f.extend_from_slice(&[0x88, 0x47]);
    for (k, (l, ttl)) in labels.iter().enumerate() {
        let s = u32::from(k + 1 == labels.len());
        f.extend_from_slice(&(l << 12 | s << 8 | *ttl as u32).to_be_bytes());
    }
    f.extend_from_slice(&ip_frame[14..]);
    f
}

fn entries(sw: &Switch) -> Vec<Value> {
    sw.show_json(&["show", "mpls", "table"])["labels"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn ftn_labels(sw: &Switch, prefix: &str) -> Option<Vec<u64>> {
    let v = sw.show_json(&["show", "mpls", "forwarding"]);
    let r = v["ftn"]
        .as_array()?
        .iter()
        .find(|r| r["prefix"] == prefix)?;
    Some(
        r["hops"][0]["out_labels"]
            .as_array()?
            .iter()
            .filter_map(Value::as_u64)
            .collect(),
    )
}

/// tshark's `ip.checksum.status` for a verified, correct checksum
/// (Wireshark's PROTO_CHECKSUM_E_GOOD; 2 would be "unverified").
const CSUM_GOOD: &str = "1";

#[test]
fn ldp_labels_switch_through_lanyard() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd]);
    let Some(module) = module_or_skip() else {
        return;
    };
    if Command::new("tshark").arg("-v").output().is_err() {
        println!("SKIPPED: needs tshark");
        return;
    }
    let bed = RouterBed::new("lymp", 2, 1500).expect("namespaces");
    bed.address_testers().expect("tester addresses");
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &config(),
        &["sw1", "sw2"],
    )
    .expect("start lanyard");

    // The tester (t1): loopback 10.255.0.1, and 192.0.2.0/24 routed
    // onward through an LDP interface (so it advertises a real label).
    let t1 = bed.tester(1);
    tester_lsr_setup(t1, "10.255.0.1", "b1", "192.0.2.0/24");
    let tmp_guard = testkit::TempDir::new("mpls-e2e");
    let opts = |sock: &str| frr_opts(&module, tmp_guard.path(), sock);
    let ospf_if = ospf_p2p;
    // Lanyard's FRR: transport address on the TAP twin (Lanyard punts
    // what is addressed to its ports' addresses); link hellos (UDP to
    // 224.0.0.2) and targeted hellos both reach it.
    let dut_cfg = FrrConfig {
        zebra: format!("fpm address 127.0.0.1 port {FPM_PORT}\nno fpm use-next-hop-groups\n"),
        ospfd: format!(
            "router ospf\n ospf router-id 10.255.255.1\n network 10.100.0.0/16 area 0\n!\n{}",
            ospf_if("ly-sw1")
        ),
        ldpd: format!(
            "mpls ldp\n router-id 10.255.255.1\n address-family ipv4\n  \
             discovery transport-address {}\n  neighbor {} targeted\n  interface ly-sw1\n \
             exit-address-family\n",
            addr(1, true),
            addr(1, false)
        ),
        ..FrrConfig::default()
    };
    let dut = FrrInstance::start_with(
        bed.dut.name(),
        "mpls-dut",
        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd],
        &dut_cfg,
        &opts("dut-pw.sock"),
    )
    .expect("Lanyard's FRR");
    let t_cfg = FrrConfig {
        ospfd: format!(
            "router ospf\n ospf router-id 10.255.0.1\n network 10.100.1.0/24 area 0\n \
             network 10.255.0.1/32 area 0\n redistribute kernel\n!\n{}",
            ospf_if("t1")
        ),
        ldpd: format!(
            "mpls ldp\n router-id 10.255.0.1\n address-family ipv4\n  \
             discovery transport-address {}\n  discovery targeted-hello accept\n  \
             interface t1\n  interface b1\n \
             exit-address-family\n",
            addr(1, false)
        ),
        ..FrrConfig::default()
    };
    let tester = FrrInstance::start_with(
        t1.name(),
        "mpls-tester",
        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd],
        &t_cfg,
        &opts("t-pw.sock"),
    )
    .expect("tester FRR");

    wait_for("LDP session", Duration::from_secs(90), || {
        let out = dut.vtysh(&["show mpls ldp neighbor"]);
        (out.contains("OPERATIONAL") && out.contains("10.255.0.1")).then_some(())
    });
    // The tester's binding for 192.0.2.0/24, and Lanyard's entries.
    let t_label: u64 = wait_for("tester binding", Duration::from_secs(30), || {
        let b = tester.vtysh(&["show mpls ldp binding 192.0.2.0/24"]);
        b.lines()
            .filter(|l| l.contains("192.0.2.0/24"))
            .flat_map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .filter_map(|w| w.parse::<u64>().ok())
            .find(|&n| n >= 16)
    });
    let ftn = wait_for(
        "FTN for 192.0.2.0/24 in Lanyard",
        Duration::from_secs(60),
        || ftn_labels(&sw, "192.0.2.0/24").filter(|l| !l.is_empty()),
    );
    assert_eq!(ftn, vec![t_label], "Lanyard pushes the tester's label");
    let (swap_in, php_in) = wait_for("swap and PHP entries", Duration::from_secs(60), || {
        let e = entries(&sw);
        let swap = e.iter().find(|x| {
            x["action"] == "swap" && x["hops"][0]["out_labels"][0].as_u64() == Some(t_label)
        })?;
        let php = e.iter().find(|x| x["action"] == "php")?;
        Some((swap["in_label"].as_u64()?, php["in_label"].as_u64()?))
    });
    // Cross-check with zebra's own table.
    let zt = dut.vtysh(&["show mpls table"]);
    assert!(zt.contains(&format!(" {swap_in} ")), "{zt}");
    eprintln!("  LDP up; Lanyard: swap {swap_in} -> {t_label}, PHP {php_in}, FTN push {t_label}");
    let text =
        String::from_utf8_lossy(&sw.cli(&["show", "mpls", "table"]).unwrap().stdout).into_owned();
    assert!(
        text.contains("swap") && text.contains(&t_label.to_string()),
        "{text}"
    );

    // Frames.
    let p1 = bed.open(1).expect("raw t1");
    let p2 = bed.open(2).expect("raw t2");
    let (r1, r2) = (sw.router_mac("sw1"), sw.router_mac("sw2"));
    let (m1, m2) = (mac_of(t1.name(), "t1"), mac_of(bed.tester(2).name(), "t2"));
    let t2_ip: IpAddr = addr(2, false).parse().unwrap();
    let t1_ip: IpAddr = addr(1, false).parse().unwrap();
    // t2 must be known to Lanyard as a neighbour: one ARP-resolving ping.
    let _ = bed
        .tester(2)
        .exec(&["ping", "-c", "1", "-W", "1", &addr(2, true)]);
    let recv = |p: &testkit::RawPort, want: &dyn Fn(&[u8]) -> bool| -> Option<Vec<u8>> {
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end {
            if let Some(f) = p.recv_timeout(Duration::from_millis(200)).unwrap() {
                if want(&f) {
                    return Some(f);
                }
            }
        }
        None
    };

    // 1. FTN: IP from t2 to 192.0.2.9 leaves sw1 labelled.
    p1.drain();
    let f = ip::udp(&r2, &m2, t2_ip, "192.0.2.9".parse().unwrap(), 64, 7, 128);
    // The first may be a neighbour miss (resolved by the kernel); retry.
    let out = (0..3)
        .find_map(|_| {
            p2.send(&f).unwrap();
            recv(&p1, &|g| g[12..14] == [0x88, 0x47])
        })
        .expect("labelled frame out of sw1");
    assert_eq!((&out[0..6], &out[6..12]), (&m1[..], &r1[..]));
    let v = tshark(
        &out,
        &[
            "mpls.label",
            "mpls.bottom",
            "mpls.ttl",
            "ip.ttl",
            "ip.checksum.status",
            "ip.dst",
        ],
    );
    assert_eq!(
        v,
        vec![
            t_label.to_string(),
            "1".into(),
            "63".into(),
            "63".into(),
            CSUM_GOOD.into(),
            "192.0.2.9".into()
        ],
        "tshark: label, S, label TTL, IP TTL, checksum good, dst"
    );

    // 2. PHP: a frame from the tester with Lanyard's PHP label (toward the
    // tester's loopback) comes back popped, TTL min(IP, label − 1).
    p1.drain();
    let ipf = ip::udp(&r1, &m1, t1_ip, "10.255.0.1".parse().unwrap(), 64, 8, 128);
    p1.send(&labelled(&r1, &m1, &[(php_in as u32, 20)], &ipf))
        .unwrap();
    let back = recv(&p1, &|g| {
        g[12..14] == [0x08, 0x00] && g.get(14 + 16..14 + 20) == Some(&[10, 255, 0, 1])
    })
    .expect("PHP'd packet back out of sw1");
    let v = tshark(&back, &["ip.ttl", "ip.checksum.status", "ip.dst"]);
    assert_eq!(
        v,
        vec!["19".to_string(), CSUM_GOOD.into(), "10.255.0.1".into()]
    );

    // 3. Explicit null from the tester, IP to t2: popped and routed.
    p2.drain();
    let ipf = ip::udp(&r1, &m1, t1_ip, t2_ip, 30, 9, 128);
    p1.send(&labelled(&r1, &m1, &[(0, 64)], &ipf)).unwrap();
    let routed = recv(&p2, &|g| {
        g[12..14] == [0x08, 0x00] && ip::parse(g).is_some_and(|i| i.seq == Some(9))
    })
    .expect("explicit-null packet routed out of sw2");
    assert_eq!((&routed[0..6], &routed[6..12]), (&m2[..], &r2[..]));
    let v = tshark(&routed, &["ip.ttl", "ip.checksum.status"]);
    assert_eq!(v, vec!["29".to_string(), CSUM_GOOD.into()]);

    let fwd = sw.show_json(&["show", "mpls", "forwarding"]);
    let d = &fwd["data_path"];
    assert!(d["pushed"].as_u64().unwrap() >= 1, "{fwd}");
    assert!(d["forwarded"].as_u64().unwrap() >= 1, "{fwd}");
    assert!(d["popped"].as_u64().unwrap() >= 1, "{fwd}");
    let php_count = entries(&sw)
        .iter()
        .find(|x| x["in_label"].as_u64() == Some(php_in))
        .map(|x| x["packets"].as_u64().unwrap_or(0));
    assert_eq!(php_count, Some(1), "per-label counter");

    // 4. Withdrawal: the tester stops routing 192.0.2.0/24.
    t1.exec(&["ip", "route", "del", "192.0.2.0/24"]).unwrap();
    wait_for("FTN and swap withdrawn", Duration::from_secs(60), || {
        let gone_ftn = ftn_labels(&sw, "192.0.2.0/24").is_none();
        let gone_swap = !entries(&sw)
            .iter()
            .any(|x| x["in_label"].as_u64() == Some(swap_in));
        (gone_ftn && gone_swap).then_some(())
    });
    drop(tester);
    drop(dut);
}

/// The report's uplink side: eight uplinks, each to its own LSR.
const UPLINKS: usize = 8;
/// `sw9`: the customer side, and the DUT's LSR id (a /32 beside its
/// link address, so no uplink's flap takes the transport address away).
const CUSTOMER: usize = UPLINKS + 1;
const DUT_LSR: &str = "10.255.255.1";
const FPM_PORT_UPLINKS: u16 = 2621;

fn uplinks_config() -> String {
    let mut y = String::from("switch:\n  name: mpls-uplinks\nports:\n");
    for i in 1..=CUSTOMER {
        let (v4, _) = link_addrs(i, true);
        let lsr = if i == CUSTOMER {
            format!(", {DUT_LSR}/32")
        } else {
            String::new()
        };
        y.push_str(&format!(
            "  - name: sw{i}\n    mode: routed\n    mtu: 1500\n    addresses: [{v4}{lsr}]\n"
        ));
    }
    y.push_str(&format!("routing:\n  fpm: 127.0.0.1:{FPM_PORT_UPLINKS}\n"));
    y
}

/// An LDP binding's label from `show mpls ldp binding PREFIX`: the local
/// one (the label this LSR advertises) or the one learned from `peer`.
fn ldp_label(frr: &FrrInstance, prefix: &str, peer: Option<&str>) -> Option<u64> {
    let v = frr.vtysh_json(&format!("show mpls ldp binding {prefix} json"));
    let rows = v["bindings"].as_array()?;
    let row = rows
        .iter()
        .find(|r| r["prefix"] == prefix && peer.is_none_or(|p| r["neighborId"] == p))?;
    let key = if peer.is_some() {
        "remoteLabel"
    } else {
        "localLabel"
    };
    row[key].as_str()?.parse().ok().filter(|&l| l >= 16)
}

/// The report's eight uplinks (issue 17's acceptance): Lanyard's FRR holds
/// an OSPF adjacency and an LDP session with a separate tester LSR on each
/// of eight routed uplinks. Checks, for every uplink: the session is
/// OPERATIONAL; the LSR's label for the prefix it routes onward is
/// Lanyard's FTN push out of that uplink, and IP from the customer port
/// leaves it with that label; Lanyard's own label for it, received on
/// the *next* uplink, is swapped to the LSR's label and sent out of the
/// right one (Lanyard as a transit LSR between uplinks); its label for
/// the LSR's loopback is popped (PHP) there. Then one uplink flaps: its
/// session and entries go, the other seven keep theirs, and it
/// reconverges.
#[test]
fn ldp_on_eight_uplinks() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd]);
    let Some(module) = module_or_skip() else {
        return;
    };
    let bed = RouterBed::new("lyup", CUSTOMER, 1500).expect("namespaces");
    bed.address_testers().expect("tester addresses");
    let names: Vec<String> = (1..=CUSTOMER).map(|i| format!("sw{i}")).collect();
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        &uplinks_config(),
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .expect("start lanyard");
    let tmp_guard = testkit::TempDir::new("mpls-uplinks");
    let opts = |sock: &str| frr_opts(&module, tmp_guard.path(), sock);
    let ospf_if = ospf_p2p;
    let lsr = |i: usize| format!("10.255.0.{i}");
    let onward = |i: usize| format!("192.168.{i}.0/24");

    for i in 1..=UPLINKS {
        tester_lsr_setup(bed.tester(i), &lsr(i), &format!("b{i}"), &onward(i));
    }
    let mut dut_ospf = format!(
        "router ospf\n ospf router-id {DUT_LSR}\n network 10.100.0.0/16 area 0\n \
         redistribute connected\n!\n"
    );
    let mut dut_ldp = format!(
        "mpls ldp\n router-id {DUT_LSR}\n address-family ipv4\n  \
         discovery transport-address {DUT_LSR}\n"
    );
    for i in 1..=UPLINKS {
        dut_ospf.push_str(&ospf_if(&format!("ly-sw{i}")));
        dut_ldp.push_str(&format!("  interface ly-sw{i}\n"));
    }
    dut_ldp.push_str(" exit-address-family\n");
    let dut_cfg = FrrConfig {
        zebra: format!(
            "fpm address 127.0.0.1 port {FPM_PORT_UPLINKS}\nno fpm use-next-hop-groups\n"
        ),
        ospfd: dut_ospf,
        ldpd: dut_ldp,
        ..FrrConfig::default()
    };
    let dut = FrrInstance::start_with(
        bed.dut.name(),
        "up-dut",
        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd],
        &dut_cfg,
        &opts("dut-pw.sock"),
    )
    .expect("Lanyard's FRR");
    // The eight LSRs start together (each start waits for its daemons).
    let testers: Vec<FrrInstance> = std::thread::scope(|s| {
        let hs: Vec<_> = (1..=UPLINKS)
            .map(|i| {
                let cfg = FrrConfig {
                    ospfd: format!(
                        "router ospf\n ospf router-id {lo}\n network 10.100.{i}.0/24 area 0\n \
                         network {lo}/32 area 0\n redistribute kernel\n!\n{}",
                        ospf_if(&format!("t{i}")),
                        lo = lsr(i)
                    ),
                    ldpd: format!(
                        "mpls ldp\n router-id {lo}\n address-family ipv4\n  \
                         discovery transport-address {lo}\n  interface t{i}\n  interface b{i}\n \
                         exit-address-family\n",
                        lo = lsr(i)
                    ),
                    ..FrrConfig::default()
                };
                let (ns, opts) = (
                    bed.tester(i).name().to_string(),
                    opts(&format!("t{i}.sock")),
                );
                s.spawn(move || {
                    FrrInstance::start_with(
                        &ns,
                        &format!("up-t{i}"),
                        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd],
                        &cfg,
                        &opts,
                    )
                    .expect("tester LSR")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let operational = |frr: &FrrInstance| -> Vec<String> {
        frr.vtysh(&["show mpls ldp neighbor"])
            .lines()
            .filter(|l| l.contains("OPERATIONAL"))
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
            .collect()
    };
    let t0 = Instant::now();
    wait_for("eight LDP sessions", Duration::from_secs(120), || {
        (operational(&dut).len() == UPLINKS).then_some(())
    });
    eprintln!(
        "  {UPLINKS} LDP sessions OPERATIONAL {:.1} s after FRR started",
        t0.elapsed().as_secs_f64()
    );

    // Labels per uplink: the LSR's for its onward prefix (Lanyard pushes
    // it), Lanyard's own for that prefix (swapped to it) and for the
    // LSR's loopback (PHP).
    struct Uplink {
        their: u64,
        ours: u64,
        ours_lo: u64,
    }
    let learn = |i: usize| -> Uplink {
        let (their, ours, ours_lo) = wait_for(
            &format!("labels for uplink {i}"),
            Duration::from_secs(60),
            || {
                let their = ldp_label(&testers[i - 1], &onward(i), None)?;
                let ftn = ftn_labels(&sw, &onward(i))?;
                (ftn == vec![their]).then_some(())?;
                let ours = ldp_label(&dut, &onward(i), None)?;
                let ours_lo = ldp_label(&dut, &format!("{}/32", lsr(i)), None)?;
                let e = entries(&sw);
                let has = |l: u64, action: &str, out: Option<u64>| {
                    e.iter().any(|x| {
                        x["in_label"].as_u64() == Some(l)
                            && x["action"] == action
                            && x["hops"][0]["interface"] == format!("sw{i}").as_str()
                            && out.is_none_or(|o| x["hops"][0]["out_labels"][0].as_u64() == Some(o))
                    })
                };
                (has(ours, "swap", Some(their)) && has(ours_lo, "php", None))
                    .then_some((their, ours, ours_lo))
            },
        );
        Uplink {
            their,
            ours,
            ours_lo,
        }
    };
    let ups: Vec<Uplink> = (1..=UPLINKS).map(learn).collect();
    eprintln!(
        "  labels: {}",
        ups.iter()
            .enumerate()
            .map(|(k, u)| format!(
                "sw{}: push {} swap {}->{} php {}",
                k + 1,
                u.their,
                u.ours,
                u.their,
                u.ours_lo
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );

    // Frames. Router MACs and tester MACs.
    let rmacs: Vec<Mac> = (1..=CUSTOMER)
        .map(|i| sw.router_mac(&format!("sw{i}")))
        .collect();
    let rmac = |i: usize| rmacs[i - 1];
    let tmac = |i: usize| mac_of(bed.tester(i).name(), &format!("t{i}"));
    let ports: Vec<testkit::RawPort> = (1..=CUSTOMER).map(|i| bed.open(i).expect("raw")).collect();
    let port = |i: usize| &ports[i - 1];
    let recv = |p: &testkit::RawPort, want: &dyn Fn(&[u8]) -> bool| -> Option<Vec<u8>> {
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end {
            if let Some(f) = p.recv_timeout(Duration::from_millis(200)).unwrap() {
                if want(&f) {
                    return Some(f);
                }
            }
        }
        None
    };
    // The top label of a labelled frame and whether it is the only one.
    let top = |f: &[u8]| -> Option<(u64, bool)> {
        (f.len() >= 18 && f[12..14] == [0x88, 0x47]).then(|| {
            let w = u32::from_be_bytes([f[14], f[15], f[16], f[17]]);
            (u64::from(w >> 12), w & 0x100 != 0)
        })
    };
    let cust_ip: IpAddr = addr(CUSTOMER, false).parse().unwrap();
    let _ = bed
        .tester(CUSTOMER)
        .exec(&["ping", "-c", "1", "-W", "1", &addr(CUSTOMER, true)]);
    // Every LSR numbers its labels from 16, so the same label is right on
    // one uplink and wrong on the others: after each frame, no labelled
    // frame may have left any other uplink.
    let drain_uplinks = || {
        for k in 1..=UPLINKS {
            port(k).drain();
        }
    };
    let strays = |except: usize| -> Vec<usize> {
        std::thread::sleep(Duration::from_millis(30));
        (1..=UPLINKS)
            .filter(|&k| k != except)
            .filter(|&k| {
                let mut labelled = false;
                while let Ok(Some(g)) = port(k).recv_timeout(Duration::from_millis(1)) {
                    labelled |= top(&g).is_some();
                }
                labelled
            })
            .collect()
    };
    let check_uplink = |i: usize, u: &Uplink, seq: u64| {
        let (ri, mi) = (rmac(i), tmac(i));
        // Push: customer IP to the onward prefix leaves sw<i> labelled.
        let dst: IpAddr = format!("192.168.{i}.9").parse().unwrap();
        let f = ip::udp(&rmac(CUSTOMER), &tmac(CUSTOMER), cust_ip, dst, 64, seq, 128);
        drain_uplinks();
        let out = (0..3)
            .find_map(|_| {
                port(CUSTOMER).send(&f).unwrap();
                recv(port(i), &|g| top(g).is_some())
            })
            .unwrap_or_else(|| panic!("no labelled frame out of sw{i}"));
        assert_eq!((&out[0..6], &out[6..12]), (&mi[..], &ri[..]), "sw{i} MACs");
        assert_eq!(top(&out), Some((u.their, true)), "sw{i}: pushed label");
        assert_eq!(
            strays(i),
            Vec::<usize>::new(),
            "pushed frames out of other uplinks"
        );
        // Swap: Lanyard's label for it, arriving on the next uplink.
        let j = i % UPLINKS + 1;
        let (rj, mj) = (rmac(j), tmac(j));
        let inner = ip::udp(&rj, &mj, cust_ip, dst, 64, seq + 1, 128);
        drain_uplinks();
        port(j)
            .send(&labelled(&rj, &mj, &[(u.ours as u32, 40)], &inner))
            .unwrap();
        let out = recv(port(i), &|g| top(g).is_some())
            .unwrap_or_else(|| panic!("swapped frame from sw{j} not out of sw{i}"));
        assert_eq!(&out[0..6], &mi[..]);
        assert_eq!(
            top(&out),
            Some((u.their, true)),
            "sw{j} -> sw{i}: swapped label"
        );
        assert_eq!(out[17], 39, "label TTL decremented");
        assert_eq!(
            strays(i),
            Vec::<usize>::new(),
            "swapped frames out of other uplinks"
        );
        // PHP: Lanyard's label for the LSR's loopback, popped.
        let lo_ip: IpAddr = lsr(i).parse().unwrap();
        let inner = ip::udp(&rj, &mj, cust_ip, lo_ip, 64, seq + 2, 128);
        drain_uplinks();
        port(j)
            .send(&labelled(&rj, &mj, &[(u.ours_lo as u32, 40)], &inner))
            .unwrap();
        let out = recv(port(i), &|g| {
            g[12..14] == [0x08, 0x00] && ip::parse(g).is_some_and(|p| p.seq == Some(seq + 2))
        })
        .unwrap_or_else(|| panic!("PHP'd frame from sw{j} not out of sw{i}"));
        assert_eq!((&out[0..6], &out[6..12]), (&mi[..], &ri[..]));
        assert_eq!(out[14 + 8], 39, "IP TTL from the popped label");
        assert_eq!(
            strays(i),
            Vec::<usize>::new(),
            "labelled frames out of other uplinks"
        );
    };
    for (k, u) in ups.iter().enumerate() {
        check_uplink(k + 1, u, 100 * (k as u64 + 1));
    }

    // One uplink flaps: its session and entries go, the others stay.
    const FLAP: usize = 3;
    bed.set_tester_link(FLAP, false).unwrap();
    wait_for(
        "uplink 3's session and FTN gone",
        Duration::from_secs(60),
        || {
            let ops = operational(&dut);
            (!ops.contains(&lsr(FLAP))
                && ops.len() == UPLINKS - 1
                && ftn_labels(&sw, &onward(FLAP)).is_none())
            .then_some(())
        },
    );
    for (k, u) in ups.iter().enumerate().filter(|(k, _)| k + 1 != FLAP) {
        assert_eq!(ftn_labels(&sw, &onward(k + 1)), Some(vec![u.their]));
    }
    let t_up = Instant::now();
    bed.set_tester_link(FLAP, true).unwrap();
    wait_for("eight LDP sessions again", Duration::from_secs(120), || {
        (operational(&dut).len() == UPLINKS).then_some(())
    });
    let again = learn(FLAP);
    eprintln!(
        "  uplink {FLAP} flapped: LDP OPERATIONAL again and its labels in Lanyard {:.1} s after link up",
        t_up.elapsed().as_secs_f64()
    );
    check_uplink(FLAP, &again, 10_000);
    drop(testers);
    drop(dut);
}
