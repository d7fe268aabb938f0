//! VRRPv3 first-hop redundancy (docs/vrrp.md, issues 19 and 23): two
//! Lanyard nodes A (priority 200) and B (100) on one LAN with a host that
//! uses the virtual address as its gateway, and a routed network behind
//! them (a second LAN with a server, whose gateway is the second group's
//! virtual address). Linux bridges join each LAN.
//!
//! ```text
//!   host 192.0.2.10 ── bridge ──┬── A la 192.0.2.2   ra 198.51.100.2 ──┬── bridge ── srv 198.51.100.10
//!   gw 192.0.2.254 (VRID 7)     └── B lb 192.0.2.3   rb 198.51.100.3 ──┘   gw 198.51.100.254 (VRID 8)
//! ```
//!
//! One test, in order: A is elected master of both groups; the host's
//! gateway resolves to the virtual MAC and its traffic is routed; the
//! virtual address answers ping (accept mode); malformed advertisements
//! are counted, not obeyed; A killed (SIGKILL) → B master within about
//! Master_Down_Interval, traffic resumes (outage printed); A back → it
//! preempts; A stopped cleanly → priority 0 → B takes over at once
//! (outage printed).

use std::time::{Duration, Instant};

use testkit::netns::{bridged_segment, Netns};
use testkit::{l2, require_root, Switch};

const INTERVAL_MS: u64 = 300;

fn yaml(name: &str, lan: &str, wan: &str, pa: &str, pw: &str, prio: u16) -> String {
    format!(
        r#"switch:
  name: {name}
ports:
  - name: {lan}
    mode: routed
    addresses: [{pa}/24]
    vrrp:
      - {{vrid: 7, addresses: [192.0.2.254], priority: {prio}, advert-interval-ms: {INTERVAL_MS}, accept-mode: true}}
  - name: {wan}
    mode: routed
    addresses: [{pw}/24]
    vrrp:
      - {{vrid: 8, addresses: [198.51.100.254], priority: {prio}, advert-interval-ms: {INTERVAL_MS}}}
"#
    )
}

/// (state of VRID 7, state of VRID 8).
fn states(sw: &Switch) -> Option<(String, String)> {
    let v = sw.try_show_json(&["show", "vrrp"]).ok()?;
    let st = |vrid: u64| -> Option<String> {
        v["groups"]
            .as_array()?
            .iter()
            .find(|g| g["vrid"].as_u64() == Some(vrid))
            .and_then(|g| g["state"].as_str().map(String::from))
    };
    Some((st(7)?, st(8)?))
}

fn wait_states(sw: &Switch, want: &str, timeout: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if states(sw).is_some_and(|(a, b)| a == want && b == want) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn group(sw: &Switch, vrid: u64) -> serde_json::Value {
    let v = sw.show_json(&["show", "vrrp"]);
    v["groups"]
        .as_array()
        .and_then(|a| a.iter().find(|g| g["vrid"].as_u64() == Some(vrid)).cloned())
        .unwrap_or_default()
}

fn ping_ok(host: &Netns, dst: &str, n: u32) -> bool {
    let out = host.exec(&["ping", "-c", &n.to_string(), "-i", "0.1", "-W", "1", dst]);
    out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(" 0% packet loss"))
}

/// Pings `dst` every 20 ms for `secs` seconds in the background; the
/// answer is the sequence numbers that came back.
fn ping_series(host: &Netns, dst: &str, secs: u32) -> std::thread::JoinHandle<Vec<u64>> {
    let mut cmd = host.command(&[
        "ping",
        "-i",
        "0.02",
        "-W",
        "1",
        "-w",
        &secs.to_string(),
        dst,
    ]);
    std::thread::spawn(move || {
        let out = cmd.output().expect("ping");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                l.split("icmp_seq=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .collect()
    })
}

/// The longest run of lost answers, in ms (20 ms per echo), and whether
/// the last 20 echoes all came back.
fn outage(seqs: &[u64]) -> (u64, bool) {
    let mut s = seqs.to_vec();
    s.sort_unstable();
    s.dedup();
    let gap = s
        .windows(2)
        .map(|w| w[1] - w[0] - 1)
        .max()
        .unwrap_or(u64::MAX);
    let last = *s.last().unwrap_or(&0);
    let tail_ok = s.len() >= 20 && s[s.len() - 20] == last - 19;
    (gap * 20, tail_ok)
}

/// A well-formed advertisement for `vrid` from `src` (TTL 255).
fn advert(vrid: u8, priority: u8, src: [u8; 4], vip: [u8; 4]) -> Vec<u8> {
    let addrs = [std::net::Ipv4Addr::from(vip)];
    let r = wire::vrrp::AdvertRepr {
        src: src.into(),
        vrid,
        priority,
        interval_cs: 100,
        addresses: &addrs,
    };
    let mut b = vec![0u8; 64];
    let n = r.emit_frame(&mut b).unwrap();
    b.truncate(n);
    b
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn vrrp_elects_routes_fails_over_preempts_and_resigns() {
    require_root!();
    let host = Netns::new("vrh").unwrap();
    let lan = Netns::new("vrl").unwrap();
    let a_ns = Netns::new("vra").unwrap();
    let b_ns = Netns::new("vrb").unwrap();
    let wan = Netns::new("vrw").unwrap();
    let srv = Netns::new("vrs").unwrap();
    bridged_segment(
        &lan,
        &[
            (&host, "h0", "ch"),
            (&a_ns, "la", "ca"),
            (&b_ns, "lb", "cb"),
        ],
        1500,
    )
    .unwrap();
    bridged_segment(
        &wan,
        &[(&srv, "s0", "cs"), (&a_ns, "ra", "wa"), (&b_ns, "rb", "wb")],
        1500,
    )
    .unwrap();
    host.exec(&["ip", "addr", "add", "192.0.2.10/24", "dev", "h0"])
        .unwrap();
    host.exec(&["ip", "route", "add", "default", "via", "192.0.2.254"])
        .unwrap();
    srv.exec(&["ip", "addr", "add", "198.51.100.10/24", "dev", "s0"])
        .unwrap();
    srv.exec(&["ip", "route", "add", "default", "via", "198.51.100.254"])
        .unwrap();

    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let ya = yaml("vrrp-a", "la", "ra", "192.0.2.2", "198.51.100.2", 200);
    let yb = yaml("vrrp-b", "lb", "rb", "192.0.2.3", "198.51.100.3", 100);
    let mut a = Switch::start(&bin, &a_ns, &ya, &["la", "ra"]).expect("start A");
    let b = Switch::start(&bin, &b_ns, &yb, &["lb", "rb"]).expect("start B");

    // 1. Election: A (200) master of both groups, B (100) backup.
    assert!(
        wait_states(&a, "Master", Duration::from_secs(10)),
        "A: {:?}",
        states(&a)
    );
    assert!(
        wait_states(&b, "Backup", Duration::from_secs(5)),
        "B: {:?}",
        states(&b)
    );
    let t0 = Instant::now();
    while group(&b, 7)["master"] != "192.0.2.2" && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let g = group(&b, 7);
    assert_eq!(g["master"], "192.0.2.2", "B's view of the master: {g}");
    assert_eq!(states(&b).map(|s| s.0).as_deref(), Some("Backup"));

    // 2. The host's gateway is the virtual MAC; its traffic is routed.
    if !ping_ok(&host, "198.51.100.10", 5) {
        let n = host.exec(&["ip", "neigh"]).unwrap();
        let sn = srv.exec(&["ip", "neigh"]).unwrap();
        panic!(
            "host → server via the virtual router failed; host neigh {} server neigh {}; A l3 {}; A vrrp {}",
            String::from_utf8_lossy(&n.stdout),
            String::from_utf8_lossy(&sn.stdout),
            a.counters()["l3"],
            a.show_json(&["show", "vrrp"])
        );
    }
    let neigh = host.exec(&["ip", "neigh", "show", "192.0.2.254"]).unwrap();
    let neigh = String::from_utf8_lossy(&neigh.stdout).to_string();
    assert!(neigh.contains("00:00:5e:00:01:07"), "gateway MAC: {neigh}");
    let srv_neigh = srv
        .exec(&["ip", "neigh", "show", "198.51.100.254"])
        .unwrap();
    assert!(
        String::from_utf8_lossy(&srv_neigh.stdout).contains("00:00:5e:00:01:08"),
        "server's gateway MAC"
    );
    // Accept mode: the master answers for the virtual address itself.
    assert!(ping_ok(&host, "192.0.2.254", 3), "ping the virtual address");
    let text = String::from_utf8_lossy(&a.cli(&["show", "vrrp"]).unwrap().stdout).to_string();
    println!("show vrrp on A:\n{text}");
    assert!(text.contains("la - Group 7 (VRRPv3, IPv4)") && text.contains("State is Master"));

    // 3. Bad advertisements (from the host) are counted, never obeyed: a
    // priority-250 claim with TTL 64, one with a broken checksum, one
    // of version 2.
    let good = advert(7, 250, [192, 0, 2, 10], [192, 0, 2, 254]);
    let mut ttl = good.clone();
    ttl[22] = 64;
    ttl[24..26].copy_from_slice(&[0, 0]);
    let c = wire::checksum::finish(wire::checksum::sum(&ttl[14..34]));
    ttl[24..26].copy_from_slice(&c.to_be_bytes());
    let mut csum = good.clone();
    csum[40] ^= 0xff;
    let mut ver = good.clone();
    ver[34] = 0x21;
    let py = "import socket,sys\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('h0',0))\nfor h in sys.argv[1:]:\n  s.send(bytes.fromhex(h))";
    for _ in 0..3 {
        host.exec(&["python3", "-c", py, &hex(&ttl), &hex(&csum), &hex(&ver)])
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    let v = a.show_json(&["show", "vrrp"]);
    let la = v["interfaces"]
        .as_array()
        .and_then(|i| i.iter().find(|i| i["interface"] == "la").cloned())
        .unwrap_or_default();
    let dropped = &la["dropped"];
    assert!(dropped["bad-ttl"].as_u64() >= Some(3), "{la}");
    assert!(dropped["bad-checksum"].as_u64() >= Some(3), "{la}");
    assert!(dropped["bad-version"].as_u64() >= Some(3), "{la}");
    assert_eq!(
        states(&a).map(|s| s.0).as_deref(),
        Some("Master"),
        "A obeyed a bad advert"
    );

    // 4. A killed: B takes over after Master_Down_Interval (3 × 300 ms +
    // skew 182 ms = 1,082 ms) and traffic resumes.
    let mdi = group(&b, 7)["master-down-interval-ms"]
        .as_u64()
        .unwrap_or(0);
    let series = ping_series(&host, "198.51.100.10", 8);
    std::thread::sleep(Duration::from_secs(2));
    let t_kill = Instant::now();
    a.kill9().unwrap();
    let took = wait_states(&b, "Master", Duration::from_secs(10));
    let elected = t_kill.elapsed();
    assert!(took, "B never became master: {:?}", states(&b));
    let (kill_outage, resumed) = outage(&series.join().unwrap());
    println!(
        "VRRP failover on SIGKILL: B master {} ms after the kill (Master_Down_Interval {mdi} ms, \
         less the time since A's last advertisement), \
         host→server outage {kill_outage} ms",
        elected.as_millis()
    );
    assert!(resumed, "traffic did not resume through B");
    assert!(ping_ok(&host, "198.51.100.10", 3));
    assert!(group(&b, 7)["became-master"].as_u64() >= Some(1));

    // 5. A returns with the higher priority: it preempts B.
    a.start_again(&a_ns, &["la", "ra"]).expect("restart A");
    assert!(
        wait_states(&a, "Master", Duration::from_secs(10)),
        "A: {:?}",
        states(&a)
    );
    assert!(
        wait_states(&b, "Backup", Duration::from_secs(5)),
        "B: {:?}",
        states(&b)
    );
    assert!(
        ping_ok(&host, "198.51.100.10", 5),
        "traffic through A again"
    );

    // 6. A stopped cleanly: priority 0, B takes over after skew time.
    let zero_before = group(&b, 7)["counters"]["priority-zero-received"]
        .as_u64()
        .unwrap_or(0);
    let series = ping_series(&host, "198.51.100.10", 6);
    std::thread::sleep(Duration::from_secs(2));
    let t_stop = Instant::now();
    a.stop().unwrap();
    let took = wait_states(&b, "Master", Duration::from_secs(10));
    let elected = t_stop.elapsed();
    assert!(took, "B never became master after A's clean stop");
    let (stop_outage, resumed) = outage(&series.join().unwrap());
    let zero = group(&b, 7)["counters"]["priority-zero-received"]
        .as_u64()
        .unwrap_or(0);
    println!(
        "VRRP takeover on clean stop: B master {} ms after SIGTERM (stop included), \
         host→server outage {stop_outage} ms; on SIGKILL {kill_outage} ms",
        elected.as_millis()
    );
    assert!(zero > zero_before, "B saw no priority-0 advertisement");
    assert!(
        resumed,
        "traffic did not resume through B after the clean stop"
    );
    let lb = b.show_json(&["show", "vrrp"]);
    println!("B: {lb}");
}
