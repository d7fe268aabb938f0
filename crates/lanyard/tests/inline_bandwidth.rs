//! Issue 22 acceptance, bandwidth control by package and quotas: Lanyard
//! inline between three subscribers (gold, silver, bronze: one address
//! each in the client namespace) and a server namespace. Four services
//! (operator signatures on UDP ports 5001–5004) each have a controller
//! on the upstream direction. Real UDP sockets offer paced traffic; a
//! receiver in the server namespace measures what arrives per subscriber
//! per service over a window after the warm-up.
//!
//! * Services A–C: everyone offers 0.8 × the limit (more than any share):
//!   the arrivals split 10:5:1 (each within 5 % of its share) and the
//!   total is within 2 % of the limit.
//! * Service D: gold offers 0.4 × the limit, less than its share (10/16):
//!   it gets all of it; silver and bronze share the rest 5:1.
//! * Quota: a subscriber whose quota is used up has its traffic dropped
//!   (counted), `show subscriber` shows used/remaining, and
//!   `subscribers reset-usage` lets it flow again.
//!
//! Rates are Ethernet frame bits (payload + 42 bytes of headers), as the
//! controllers count them. Scaled to a 2-core machine: limits of 2–5
//! Mbit/s (`LANYARD_BW_SCALE=N` multiplies limits and offers).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::netns::stdout_ok as ok;

use testkit::netns::{veth, Netns};
use testkit::{l2, require_root, Switch};

const SERVER: &str = "10.78.0.2";
/// Gold, silver, bronze.
const SUBS: [(&str, &str, u32); 3] = [
    ("gold-1", "10.78.0.11", 10),
    ("silver-1", "10.78.0.12", 5),
    ("bronze-1", "10.78.0.13", 1),
];
const PAYLOAD: usize = 500;

const SENDER: &str = r#"
import socket, sys, time
src, dst, size, t0, dur = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
flows = []
def sock():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 21)
    return s
rotate = []
for x in sys.argv[6:]:
    port, bps, *rot = x.split(":")
    # port:bps:N = a new source port (a new flow) every N datagrams
    rotate.append(int(rot[0]) if rot else 0)
    flows.append((sock(), int(port), float(bps) / 8.0 / (size + 42)))
payload = b"b" * size
sent = [0] * len(flows)
while time.time() < t0:
    time.sleep(0.001)
end = t0 + dur
while True:
    now = time.time()
    if now >= end:
        break
    for i, (s, port, fps) in enumerate(flows):
        due = int((now - t0) * fps)
        while sent[i] < due:
            if rotate[i] and sent[i] % rotate[i] == 0 and sent[i]:
                s.close()
                s = sock()
                flows[i] = (s, port, fps)
            try:
                s.sendto(payload, (dst, port))
            except OSError:
                pass
            sent[i] += 1
    time.sleep(0.0005)
print(" ".join(str(n) for n in sent))
"#;

const RECEIVER: &str = r#"
import json, select, socket, sys, time
addr, w0, w1, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
ports = [int(p) for p in sys.argv[5:]]
socks = {}
for p in ports:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind((addr, p))
    s.setblocking(False)
    socks[s] = p
got = {}
while time.time() < end:
    r, _, _ = select.select(list(socks), [], [], 0.05)
    for s in r:
        while True:
            try:
                data, (a, _) = s.recvfrom(4096)
            except BlockingIOError:
                break
            t = time.time()
            if w0 <= t < w1:
                k = "%s:%d" % (a, socks[s])
                got[k] = got.get(k, 0) + len(data) + 42
print(json.dumps(got))
"#;

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn scale() -> f64 {
    std::env::var("LANYARD_BW_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

/// Client and server namespaces, Lanyard inline between them: one
/// client and one server namespace per inline pair.
struct Bed {
    clis: Vec<Netns>,
    srvs: Vec<Netns>,
    /// The pair (client namespace) of each of `SUBS`.
    pair_of: [usize; 3],
    _dut: Netns,
    sw: Switch,
    dir: std::path::PathBuf,
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The bed's own directory (removed with it).
fn bed_dir(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("lanyard-bw{tag}-{}", std::process::id()))
}

fn bed(tag: &str, extra_yaml: &str, subscribers: &str) -> Bed {
    bed_pairs(tag, extra_yaml, subscribers, 1)
}

/// With `pairs` inline pairs and as many workers: pair p is ports
/// sw(2p+1) (subscriber side) and sw(2p+2) (network side), listed
/// subscriber ports first so that port id % workers puts both ports of
/// pair p on worker p. Gold is behind pair 0, silver and bronze behind
/// the last pair.
fn bed_pairs(tag: &str, extra_yaml: &str, subscribers: &str, pairs: usize) -> Bed {
    let dut = Netns::new(&format!("bw{tag}d")).unwrap();
    let _ = std::fs::create_dir_all(bed_dir(tag));
    let pair_of = [0, pairs - 1, pairs - 1];
    let mut clis = Vec::new();
    let mut srvs = Vec::new();
    for p in 0..pairs {
        let cli = Netns::new(&format!("bw{tag}c{p}")).unwrap();
        let srv = Netns::new(&format!("bw{tag}s{p}")).unwrap();
        veth(&cli, "c0", &dut, &format!("sw{}", 2 * p + 1), 1500).unwrap();
        veth(&dut, &format!("sw{}", 2 * p + 2), &srv, "s0", 1500).unwrap();
        for (i, (_, a, _)) in SUBS.iter().enumerate() {
            if pair_of[i] == p {
                cli.exec(&["ip", "addr", "add", &format!("{a}/24"), "dev", "c0"])
                    .unwrap();
            }
        }
        srv.exec(&["ip", "addr", "add", &format!("{SERVER}/24"), "dev", "s0"])
            .unwrap();
        clis.push(cli);
        srvs.push(srv);
    }
    let names: Vec<String> = (0..pairs)
        .map(|p| format!("sw{}", 2 * p + 1))
        .chain((0..pairs).map(|p| format!("sw{}", 2 * p + 2)))
        .collect();
    let ports: String = names
        .iter()
        .map(|n| format!("  - {{name: {n}}}\n"))
        .collect();
    let inline: Vec<String> = (0..pairs)
        .map(|p| {
            format!(
                "{{subscriber-port: sw{}, network-port: sw{}}}",
                2 * p + 1,
                2 * p + 2
            )
        })
        .collect();
    let yaml = format!(
        "switch:\n  name: bw\n  workers: {pairs}\nports:\n{ports}\
         service-control:\n  inline: [{}]\n\
         \x20 flows: 4096\n  classify-slots: 256\n  usage-entries: 4096\n\
         \x20 services:\n\
         \x20   - {{name: svc-a}}\n    - {{name: svc-b}}\n    - {{name: svc-c}}\n    - {{name: svc-d}}\n\
         \x20 signatures:\n\
         \x20   - {{name: sig-a, service: svc-a, protocol: udp, ports: \"5001\"}}\n\
         \x20   - {{name: sig-b, service: svc-b, protocol: udp, ports: \"5002\"}}\n\
         \x20   - {{name: sig-c, service: svc-c, protocol: udp, ports: \"5003\"}}\n\
         \x20   - {{name: sig-d, service: svc-d, protocol: udp, ports: \"5004\"}}\n{extra_yaml}",
        inline.join(", ")
    );
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let sw = Switch::start(&l2::bin(env!("CARGO_BIN_EXE_lanyard")), &dut, &yaml, &names)
        .expect("start lanyard");
    let dir = bed_dir(tag);
    std::fs::create_dir_all(&dir).unwrap();
    // None: the configuration's `subscribers-file:` provisions them.
    if !subscribers.is_empty() {
        let file = dir.join("subs.txt");
        std::fs::write(&file, subscribers).unwrap();
        let out = ok(
            sw.cli(&["subscribers", "load", file.to_str().unwrap()]),
            "subscribers load",
        );
        assert!(out.contains("3 added"), "{out}");
    }
    // Neighbours resolved before the clock starts (ARP passes inline).
    for (i, (_, a, _)) in SUBS.iter().enumerate() {
        ok(
            clis[pair_of[i]]
                .command(&["ping", "-c", "1", "-W", "2", "-I", a, SERVER])
                .output(),
            "ping",
        );
    }
    Bed {
        clis,
        srvs,
        pair_of,
        _dut: dut,
        sw,
        dir,
    }
}

/// Runs the senders (per subscriber: (port, offered bits/s)…) for `dur`
/// seconds; returns frame bits/s received per "address:port" in the
/// window [1/4, 15/16] of the run.
fn run(b: &Bed, offers: &[Vec<(u16, f64)>], dur: f64, ports: &[u16]) -> HashMap<String, f64> {
    run_show(b, offers, dur, ports).0
}

/// [`run`], and `show service-control` taken in the middle of the run.
fn run_show(
    b: &Bed,
    offers: &[Vec<(u16, f64)>],
    dur: f64,
    ports: &[u16],
) -> (HashMap<String, f64>, serde_json::Value) {
    let t0 = now() + 1.5;
    let (w0, w1) = (t0 + dur / 4.0, t0 + dur * 15.0 / 16.0);
    let mut rargs = vec![
        "python3".to_string(),
        "-c".into(),
        RECEIVER.into(),
        SERVER.into(),
        format!("{w0}"),
        format!("{w1}"),
        format!("{}", t0 + dur + 0.5),
    ];
    rargs.extend(ports.iter().map(|p| p.to_string()));
    let rargs: Vec<&str> = rargs.iter().map(String::as_str).collect();
    let receivers: Vec<_> = b
        .srvs
        .iter()
        .map(|srv| {
            srv.command(&rargs)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut senders = Vec::new();
    for (i, flows) in offers.iter().enumerate() {
        let mut args = vec![
            "python3".to_string(),
            "-c".into(),
            SENDER.into(),
            SUBS[i].1.into(),
            SERVER.into(),
            PAYLOAD.to_string(),
            format!("{t0}"),
            format!("{dur}"),
        ];
        args.extend(flows.iter().map(|(p, r)| {
            // Ports 6000 and up: a new flow every 8 datagrams, so that
            // every frame belongs to a flow still being classified.
            if *p >= 6000 {
                format!("{p}:{r}:8")
            } else {
                format!("{p}:{r}")
            }
        }));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        senders.push(
            b.clis[b.pair_of[i]]
                .command(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
    }
    let mid = t0 + dur * 0.6 - now();
    if mid > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(mid));
    }
    let show = b.sw.show_json(&["show", "service-control"]);
    for s in senders {
        ok(s.wait_with_output(), "sender");
    }
    // One receiver per server namespace; a subscriber arrives at one.
    let mut got: HashMap<String, u64> = HashMap::new();
    for r in receivers {
        let out = ok(r.wait_with_output(), "receiver");
        let part: HashMap<String, u64> = serde_json::from_str(out.trim()).expect("receiver JSON");
        for (k, v) in part {
            *got.entry(k).or_default() += v;
        }
    }
    let rates = got
        .into_iter()
        .map(|(k, bytes)| (k, bytes as f64 * 8.0 / (w1 - w0)))
        .collect();
    (rates, show)
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want
}

#[test]
fn bandwidth_is_shared_by_package_inside_each_controller() {
    shared_by_package("s", 1);
}

/// The same with two workers, gold's traffic on one and silver's and
/// bronze's on the other (two inline pairs, one per worker): each
/// controller's one limit is shared 10:5:1 across the workers, not
/// applied per worker. (The cross-worker split was before covered by
/// unit-level logic only.)
#[test]
fn bandwidth_is_shared_by_package_across_workers() {
    shared_by_package("w", 2);
}

/// Services A–C offered 0.8 × the limit by each subscriber; D: gold 0.4.
/// `pairs` inline pairs and workers ([`bed_pairs`]).
fn shared_by_package(tag: &str, pairs: usize) {
    require_root!();
    let _g = l2::heavy();
    let k = scale();
    let limits = [2e6 * k, 3e6 * k, 4e6 * k, 5e6 * k];
    let ports = [5001u16, 5002, 5003, 5004];
    let controllers: String = limits
        .iter()
        .enumerate()
        .map(|(i, l)| {
            format!(
                "    - {{service: svc-{}, up: \"{}\"}}\n",
                (b'a' + i as u8) as char,
                *l as u64
            )
        })
        .collect();
    let b = bed_pairs(
        tag,
        &format!("  controllers:\n{controllers}"),
        &SUBS
            .iter()
            .zip(["gold", "silver", "bronze"])
            .map(|((id, a, _), p)| format!("add {id} package={p} addr={a}\n"))
            .collect::<String>(),
        pairs,
    );
    // Offers: A–C 0.8 × limit each; D: gold 0.4, silver and bronze 0.8.
    let offers: Vec<Vec<(u16, f64)>> = (0..3)
        .map(|s| {
            (0..4)
                .map(|svc| {
                    let f = if svc == 3 && s == 0 { 0.4 } else { 0.8 };
                    (ports[svc], limits[svc] * f)
                })
                .collect()
        })
        .collect();
    let (got, mid) = run_show(&b, &offers, 8.0, &ports);
    let rate = |sub: usize, svc: usize| -> f64 {
        got.get(&format!("{}:{}", SUBS[sub].1, ports[svc]))
            .copied()
            .unwrap_or(0.0)
    };
    let v = b.sw.show_json(&["show", "service-control"]);
    let mut report = String::new();
    for (svc, limit) in limits.iter().enumerate() {
        let r: Vec<f64> = (0..3).map(|s| rate(s, svc)).collect();
        report.push_str(&format!(
            "svc-{}: limit {:.0} got {:.0} {:.0} {:.0} (total {:.0}, ratios {:.2}:{:.2}:1)\n",
            (b'a' + svc as u8) as char,
            limit,
            r[0],
            r[1],
            r[2],
            r.iter().sum::<f64>(),
            r[0] / r[2],
            r[1] / r[2]
        ));
    }
    let mut failures = Vec::new();
    for (svc, &limit) in limits.iter().enumerate() {
        let r: Vec<f64> = (0..3).map(|s| rate(s, svc)).collect();
        let total: f64 = r.iter().sum();
        if !within(total, limit, 0.02) {
            failures.push(format!(
                "svc {svc}: total {total:.0} not within 2 % of {limit}"
            ));
        }
        let want: [f64; 3] = if svc < 3 {
            [limit * 10.0 / 16.0, limit * 5.0 / 16.0, limit / 16.0]
        } else {
            // Gold gets what it offers; silver and bronze split the rest 5:1.
            let rest = limit * 0.6;
            [limit * 0.4, rest * 5.0 / 6.0, rest / 6.0]
        };
        for s in 0..3 {
            if !within(r[s], want[s], 0.05) {
                failures.push(format!(
                    "svc {svc} {}: {:.0} not within 5 % of {:.0}",
                    SUBS[s].0, r[s], want[s]
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n{report}\nmid-run: {mid:#}",
        failures.join("\n")
    );
    eprintln!("{report}");
    // The controllers as `show` reported them mid-run: each one at its
    // limit, offered more, dropping the excess, one active subscriber
    // per package.
    let ctl = mid["controllers"].as_array().expect("controllers");
    assert_eq!(ctl.len(), 4, "{mid:#}");
    for (i, c) in ctl.iter().enumerate() {
        let limit = limits[i] as u64;
        assert_eq!(c["direction"], "up");
        assert_eq!(c["limit-bps"].as_u64().unwrap(), limit);
        assert!(c["dropped-packets"].as_u64().unwrap() > 0, "{c}");
        assert!(c["offered-bps"].as_u64().unwrap() > limit * 3 / 2, "{c}");
        let rate = c["rate-bps"].as_u64().unwrap() as f64;
        assert!(within(rate, limit as f64, 0.1), "{c}");
        assert_eq!(c["active"]["gold"], 1, "{c}");
        assert_eq!(c["active"]["silver"], 1, "{c}");
        assert_eq!(c["active"]["bronze"], 1, "{c}");
    }
    let svc = |name: &str| {
        v["services"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap()
    };
    assert!(svc("svc-a")["dropped-up"].as_u64().unwrap() > 0);
    // Per subscriber per service drops: bronze lost the most of svc-a.
    let bronze = b.sw.show_json(&["show", "subscriber", "bronze-1"]);
    let a = bronze["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "svc-a")
        .cloned()
        .unwrap();
    assert!(
        a["dropped-up"].as_u64().unwrap() > a["packets-up"].as_u64().unwrap(),
        "{a}"
    );
    let text = ok(
        b.sw.cli(&["show", "service-control"]),
        "show service-control",
    );
    assert!(
        text.contains(
            "Bandwidth control: 4 controllers; package weights: gold 10, silver 5, bronze 1"
        ) && text.contains("svc-d"),
        "{text}"
    );
    // While idle the controllers' active counts fall back to zero.
    std::thread::sleep(Duration::from_millis(1500));
    let v = b.sw.show_json(&["show", "service-control"]);
    assert!(
        v["controllers"][0]["rate-bps"].as_u64().unwrap() < limits[0] as u64 / 10,
        "{v:#}"
    );
}

#[test]
fn a_used_up_quota_drops_traffic_until_reset() {
    require_root!();
    let _g = l2::heavy();
    // 100 kB of quota; 2 Mbit/s offered for 3 s (750 kB): used up after 0.4 s.
    let subs = "add gold-1 package=gold addr=10.78.0.11 quota=100k\n\
                add silver-1 package=silver addr=10.78.0.12\n\
                add bronze-1 package=bronze addr=10.78.0.13\n";
    let b = bed("q", "", subs);
    let v = b.sw.show_json(&["show", "subscriber", "gold-1"]);
    assert_eq!(v["quota-bytes"], 100_000);
    // Only the set-up pings so far.
    let used = v["used-bytes"].as_u64().unwrap();
    assert!(used < 1000, "{v:#}");
    assert_eq!(v["remaining-bytes"].as_u64().unwrap(), 100_000 - used);
    let offers = vec![vec![(5001u16, 2e6)], vec![(5001u16, 1e6)]];
    let got = run(&b, &offers, 3.0, &[5001]);
    // Gold's quota ran out within the first half of the run: nothing in
    // the measurement window; silver got all it offered.
    assert_eq!(got.get(&format!("{}:5001", SUBS[0].1)), None, "{got:?}");
    assert!(
        within(got[&format!("{}:5001", SUBS[1].1)], 1e6, 0.1),
        "{got:?}"
    );
    let v = b.sw.show_json(&["show", "subscriber", "gold-1"]);
    let used = v["used-bytes"].as_u64().unwrap();
    // Counted every control interval: at most ~one interval over.
    assert!(
        (100_000..=100_000 + 20_000).contains(&used),
        "used {used}: {v:#}"
    );
    assert_eq!(v["remaining-bytes"], 0, "{v:#}");
    assert_eq!(v["quota-exceeded"], true, "{v:#}");
    let a = v["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "svc-a")
        .unwrap();
    assert!(a["dropped-up"].as_u64().unwrap() > 500, "{v:#}");
    let sc = b.sw.show_json(&["show", "service-control"]);
    assert!(
        sc["quota-dropped-packets"].as_u64().unwrap() > 500,
        "{sc:#}"
    );
    // Silver had no quota: all of it passed.
    let s = b.sw.show_json(&["show", "subscriber", "silver-1"]);
    let a = s["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "svc-a")
        .unwrap();
    assert_eq!(a["dropped-up"], 0, "{s:#}");
    assert!(a["packets-up"].as_u64().unwrap() > 500, "{s:#}");
    let text = ok(
        b.sw.cli(&["show", "subscriber", "gold-1"]),
        "show subscriber",
    );
    assert!(
        text.contains("Quota: 100.0 kB, used") && text.contains("remaining 0 B (exceeded)"),
        "{text}"
    );
    // Still blocked (a new flow too, once classified)…
    let gold = format!("{}:5002", SUBS[0].1);
    let got = run(&b, &[vec![(5002u16, 1e6)]], 2.0, &[5002]);
    assert_eq!(got.get(&gold).copied().unwrap_or(0.0), 0.0, "{got:?}");
    // …until a new billing period.
    ok(
        b.sw.cli(&["subscribers", "reset-usage", "gold-1"]),
        "reset-usage",
    );
    // (0.2 Mbit/s for 2 s: 50 kB, inside the renewed 100 kB.)
    let got = run(&b, &[vec![(5002u16, 2e5)]], 2.0, &[5002]);
    assert!(
        within(got.get(&gold).copied().unwrap_or(0.0), 2e5, 0.1),
        "{got:?}"
    );
    let v = b.sw.show_json(&["show", "subscriber", "gold-1"]);
    assert_eq!(v["quota-exceeded"], false, "{v:#}");
    let used = v["used-bytes"].as_u64().unwrap();
    assert!((40_000..100_000).contains(&used), "{v:#}");
}

/// Used bytes, period start and whether the quota is exceeded.
fn quota_of(b: &Bed, id: &str) -> (u64, u64, bool) {
    let v = b.sw.show_json(&["show", "subscriber", id]);
    (
        v["used-bytes"].as_u64().unwrap(),
        v["quota-period-start-s"].as_u64().unwrap_or(0),
        v["quota-exceeded"].as_bool().unwrap(),
    )
}

#[test]
fn quota_accounts_survive_restart_and_stop_start() {
    require_root!();
    let _g = l2::heavy();
    // Provisioned from a file, as a switch that restarts must be; the
    // state file is configured explicitly (the default is beside the
    // socket, which the restart keeps too).
    let dir = bed_dir("r");
    std::fs::create_dir_all(&dir).unwrap();
    let subs = dir.join("subs.txt");
    let state = dir.join("quota.state");
    std::fs::write(
        &subs,
        "add gold-1 package=gold addr=10.78.0.11 quota=100k\n\
         add silver-1 package=silver addr=10.78.0.12 quota=10M quota-period=30d\n\
         add bronze-1 package=bronze addr=10.78.0.13\n",
    )
    .unwrap();
    let extra = format!(
        "  subscribers-file: {}\n  state-file: {}\n",
        subs.display(),
        state.display()
    );
    let mut b = bed("r", &extra, "");
    // Gold uses up its 100 kB (2 Mbit/s for 1 s: 250 kB offered); silver
    // uses part of its 10 MB.
    run(
        &b,
        &[vec![(5001u16, 2e6)], vec![(5001u16, 1e6)]],
        1.0,
        &[5001],
    );
    let gold = quota_of(&b, "gold-1");
    let silver = quota_of(&b, "silver-1");
    assert!(gold.2 && gold.0 >= 100_000, "{gold:?}");
    assert!(
        !silver.2 && silver.0 > 100_000 && silver.1 > 0,
        "{silver:?}"
    );

    // Hitless restart: the old image writes the accounts, the new reads them.
    ok(b.sw.cli(&["restart"]), "restart");
    let log = b.sw.log();
    assert!(log.contains("quota state: 2 accounts saved"), "{log}");
    assert!(log.contains("2 accounts restored"), "{log}");
    for l in log
        .lines()
        .filter(|l| l.contains("forwarding resumed") || l.contains("saved in"))
    {
        eprintln!("{l}");
    }
    let g = quota_of(&b, "gold-1");
    let s = quota_of(&b, "silver-1");
    // Idle since: the same bytes (the last interval is counted before
    // the hand-over), the same period.
    assert!(
        g.0.abs_diff(gold.0) <= 20_000 && g.1 == gold.1 && g.2,
        "{gold:?} -> {g:?}"
    );
    assert!(
        s.0.abs_diff(silver.0) <= 20_000 && s.1 == silver.1 && !s.2,
        "{silver:?} -> {s:?}"
    );
    // Gold stays over its quota (a new flow, once classified): nothing
    // in the window; silver passes.
    let got = run(
        &b,
        &[vec![(5002u16, 1e6)], vec![(5002u16, 4e5)]],
        1.0,
        &[5002],
    );
    assert_eq!(got.get(&format!("{}:5002", SUBS[0].1)), None, "{got:?}");
    assert!(
        within(got[&format!("{}:5002", SUBS[1].1)], 4e5, 0.15),
        "{got:?}"
    );
    let gold = quota_of(&b, "gold-1");
    let silver = quota_of(&b, "silver-1");
    assert!(gold.2 && gold.0 <= g.0 + 20_000, "{g:?} -> {gold:?}");
    assert!(
        silver.0 > s.0 + 40_000 && silver.1 == s.1,
        "{s:?} -> {silver:?}"
    );

    // A plain stop and start with the same configuration.
    b.sw.stop().unwrap();
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(text.starts_with("lanyard-quota-state 1\n"), "{text}");
    b.sw.start_again(&b._dut, &["sw1", "sw2"]).unwrap();
    let g = quota_of(&b, "gold-1");
    let s = quota_of(&b, "silver-1");
    assert_eq!((g.0, g.1, g.2), gold, "gold across stop/start");
    assert_eq!((s.0, s.1, s.2), silver, "silver across stop/start");

    // A corrupt file: logged, a clean start, no panic.
    b.sw.stop().unwrap();
    std::fs::write(&state, "lanyard-quota-state 1\ngold-1 12").unwrap();
    b.sw.start_again(&b._dut, &["sw1", "sw2"]).unwrap();
    assert!(
        b.sw.log()
            .contains("line 2: expected 'ID USED-BYTES PERIOD-START'"),
        "{}",
        b.sw.log()
    );
    assert_eq!(quota_of(&b, "silver-1"), (0, 0, false));
}

#[test]
fn subscriber_caps_and_the_classifying_limit_hold_unclassified_flows() {
    require_root!();
    let _g = l2::heavy();
    let k = scale();
    // Gold: its own 400 kbit/s cap, offering 2 Mbit/s in flows that never
    // classify (a new flow every 8 datagrams, payload nDPI cannot name).
    // Silver: no cap, the same kind of traffic at 1.2 Mbit/s against the
    // 600 kbit/s `classifying` limit (every subscriber's; gold's cap is
    // lower). Bronze: an 800 kbit/s cap on a
    // classified service without a controller (svc-a), offering 1.6.
    let subs = format!(
        "add gold-1 package=gold addr=10.78.0.11 cap-up={}\n\
         add silver-1 package=silver addr=10.78.0.12\n\
         add bronze-1 package=bronze addr=10.78.0.13 cap-up={} cap-down=5M\n",
        (4e5 * k) as u64,
        (8e5 * k) as u64
    );
    let b = bed(
        "c",
        &format!(
            "  classifying: {{up: \"{}\"}}\n  report-interval-s: 1\n",
            (6e5 * k) as u64
        ),
        &subs,
    );
    let offers = vec![
        vec![(6001u16, 2e6 * k)],
        vec![(6002u16, 1.2e6 * k)],
        vec![(5001u16, 1.6e6 * k)],
    ];
    let ports = [6001u16, 6002, 5001];
    let (got, mid) = run_show(&b, &offers, 6.0, &ports);
    let rate = |sub: usize, port: u16| {
        got.get(&format!("{}:{port}", SUBS[sub].1))
            .copied()
            .unwrap_or(0.0)
    };
    let report = format!(
        "gold cap 400k: {:.0}; silver classifying 600k: {:.0}; bronze cap 800k: {:.0}",
        rate(0, 6001) / k,
        rate(1, 6002) / k,
        rate(2, 5001) / k
    );
    eprintln!("{report}");
    assert!(within(rate(0, 6001), 4e5 * k, 0.03), "{report}\n{mid:#}");
    assert!(within(rate(1, 6002), 6e5 * k, 0.03), "{report}\n{mid:#}");
    assert!(within(rate(2, 5001), 8e5 * k, 0.03), "{report}\n{mid:#}");
    assert!(
        mid["cap-dropped-packets"].as_u64().unwrap() > 100,
        "{mid:#}"
    );
    assert!(
        mid["classifying-dropped-packets"].as_u64().unwrap() > 100,
        "{mid:#}"
    );
    // Gold's flows were still being classified (never decided).
    let v = b.sw.show_json(&["show", "subscriber", "gold-1"]);
    assert_eq!(v["cap-up-bps"].as_u64(), Some((4e5 * k) as u64), "{v:#}");
    let all = &v["total"];
    assert!(all["dropped-up"].as_u64().unwrap() > 100, "{v:#}");
    assert!(all["flows"].as_u64().unwrap() > 100, "{v:#}");
    let text = ok(
        b.sw.cli(&["show", "subscriber", "bronze-1"]),
        "show subscriber",
    );
    assert!(
        text.contains(&format!(
            "Cap: up {}, down 5.00 Mbit/s",
            if k == 1.0 { "800.00 kbit/s" } else { "" }
        )) || k != 1.0,
        "{text}"
    );
    assert!(text.contains("(all)"), "{text}");
    // Bandwidth per service over time (1 s intervals): gold's total at its
    // cap in the intervals inside the run.
    let hist = v["history"].as_array().expect("history");
    let at_cap = hist
        .iter()
        .filter_map(|r| {
            r["services"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "(all)")
                .and_then(|s| s["up-bps"].as_u64())
        })
        .filter(|&bps| within(bps as f64, 4e5 * k, 0.05))
        .count();
    assert!(at_cap >= 3, "{v:#}");
    let bronze = b.sw.show_json(&["show", "subscriber", "bronze-1"]);
    let svc_a = bronze["history"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["services"].as_array().unwrap())
        .filter(|s| {
            s["name"] == "svc-a" && within(s["up-bps"].as_u64().unwrap() as f64, 8e5 * k, 0.05)
        })
        .count();
    assert!(svc_a >= 3, "{bronze:#}");
    assert!(text.contains("Bandwidth per interval"), "{text}");
}

/// One subscriber spread over two workers: `split-1` owns the first two
/// lab addresses, which sit behind different inline pairs and so are
/// served by different workers ([`bed_pairs`]). Its 800 kbit/s cap holds
/// for the two together — each worker sees 1.2 Mbit/s offered, and a
/// per-worker cap would pass 1.6 — while an uncapped subscriber on the
/// second worker passes everything it offers. (Before, the cross-worker
/// share of a cap was covered by unit-level logic only.)
#[test]
fn one_subscriber_over_two_workers_keeps_one_cap() {
    require_root!();
    let _g = l2::heavy();
    let k = scale();
    let cap = 8e5 * k;
    let subs = format!(
        "add split-1 package=gold addr={},{} cap-up={}\n\
         add bronze-1 package=bronze addr={}\n\
         add idle-1 package=silver addr=10.78.0.99\n",
        SUBS[0].1, SUBS[1].1, cap as u64, SUBS[2].1
    );
    let b = bed_pairs("2", "", &subs, 2);
    // Lab addresses 0 (pair 0, worker 0) and 1 (pair 1, worker 1) are
    // split-1's; address 2 (pair 1) is bronze-1's. svc-a classifies at
    // the first datagram (its signature), so only the cap limits.
    let offers = vec![
        vec![(5001u16, 1.2e6 * k)],
        vec![(5001u16, 1.2e6 * k)],
        vec![(5001u16, 1.0e6 * k)],
    ];
    let (got, mid) = run_show(&b, &offers, 6.0, &[5001]);
    let rate = |sub: usize| {
        got.get(&format!("{}:5001", SUBS[sub].1))
            .copied()
            .unwrap_or(0.0)
    };
    let (w0, w1, other) = (rate(0), rate(1), rate(2));
    let report = format!(
        "split-1 cap {cap:.0}: worker 0 {w0:.0} + worker 1 {w1:.0} = {:.0}; bronze-1 {other:.0} of {:.0}",
        w0 + w1,
        1.0e6 * k
    );
    eprintln!("{report}");
    assert!(within(w0 + w1, cap, 0.03), "{report}\n{mid:#}");
    // Both workers carried part of it (neither was starved to zero).
    assert!(w0 > cap / 4.0 && w1 > cap / 4.0, "{report}");
    assert!(within(other, 1.0e6 * k, 0.03), "{report}");
    assert!(
        mid["cap-dropped-packets"].as_u64().unwrap() > 100,
        "{mid:#}"
    );
    let v = b.sw.show_json(&["show", "subscriber", "split-1"]);
    assert_eq!(v["cap-up-bps"].as_u64(), Some(cap as u64), "{v:#}");
    assert!(v["total"]["dropped-up"].as_u64().unwrap() > 100, "{v:#}");
}
