//! Acceptance (issue 20): a real Prometheus server (Debian `prometheus`)
//! scrapes Lanyard's `/metrics` and its HTTP API returns the counters
//! `show` gives, after known frames: frames and bytes per port, drops by
//! reason, per-VLAN counters, table sizes.
//!
//! Without `management.metrics` nothing listens (checked first).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::frame::{mac, test_frame, Tag, BROADCAST};
use testkit::switch::port_counter;
use testkit::{l2, require_root, Netns, Switch, TestBed};

const YAML: &str = "vlans:\n  - id: 10\nports:\n  - name: sw1\n    mode: access\n    vlan: 10\n  - name: sw2\n    mode: access\n    vlan: 10\n";
const METRICS: &str = "  metrics:\n    listen: 127.0.0.1:9417\n";

/// `GET path` on 127.0.0.1:`port` inside `ns`; the body.
fn http_get(ns: &Netns, port: u16, path: &str) -> Option<String> {
    let path = path.to_string();
    ns.run(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        let (head, body) = out.split_once("\r\n\r\n")?;
        head.starts_with("HTTP/1.1 200").then(|| body.to_string())
    })
    .ok()
    .flatten()
}

fn urlencode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value Prometheus' query API gives for an instant query, if any.
fn prom_value(ns: &Netns, query: &str) -> Option<u64> {
    let body = http_get(
        ns,
        9090,
        &format!("/api/v1/query?query={}", urlencode(query)),
    )?;
    let v: Value = serde_json::from_str(&body).ok()?;
    let r = v["data"]["result"].as_array()?.first()?.clone();
    r["value"][1]
        .as_str()?
        .parse::<f64>()
        .ok()
        .map(|f| f as u64)
}

#[test]
fn prometheus_scrapes_the_counters_show_gives() {
    require_root!();
    let Ok(prom) = which("prometheus") else {
        panic!("Debian `prometheus` is not installed (scripts/setup.sh)");
    };
    let bed = TestBed::new("prm", 2, 1500).expect("test bed");
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    // Off by default: nothing answers on the port.
    {
        let sw = Switch::start(&bin, &bed.dut, YAML, &["sw1", "sw2"]).expect("start");
        assert!(
            http_get(&bed.dut, 9417, "/metrics").is_none(),
            "metrics served though not configured"
        );
        drop(sw);
    }
    let sw = Switch::start_managed(&bin, &bed.dut, YAML, METRICS, &["sw1", "sw2"]).expect("start");
    let t1 = bed.open(1).expect("t1");
    // Known frames: 37 broadcasts of 100 bytes forwarded in VLAN 10, 5
    // tagged frames an access port drops (tagged-on-access).
    let good: Vec<Vec<u8>> = (0..37)
        .map(|i| test_frame(&BROADCAST, &mac(1), &[], 1, i, 100))
        .collect();
    let bad: Vec<Vec<u8>> = (0..5)
        .map(|i| test_frame(&BROADCAST, &mac(1), &[Tag::dot1q(10)], 2, i, 100))
        .collect();
    let before = sw.counters();
    l2::send_settled(&sw, &t1, "sw1", &good);
    l2::send_settled(&sw, &t1, "sw1", &bad);
    let c = sw.counters();
    let rx = port_counter(&c, "sw1", "rx_frames");
    assert_eq!(
        rx - port_counter(&before, "sw1", "rx_frames"),
        42,
        "switch saw the frames"
    );
    let drops = c["ports"][0]["drops"]["tagged-on-access"].as_u64().unwrap();
    assert_eq!(drops, 5);

    // Lanyard's own endpoint first: the same numbers as show.
    let text = http_get(&bed.dut, 9417, "/metrics").expect("GET /metrics");
    assert!(
        text.contains(&format!(
            "lanyard_interface_receive_frames_total{{interface=\"sw1\"}} {rx}"
        )),
        "{text}"
    );

    // A real Prometheus in the switch's namespace, scraping every second.
    let dir = std::env::temp_dir().join(format!("lanyard-prom-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("prometheus.yml");
    std::fs::write(
        &conf,
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lanyard\n    static_configs:\n      - targets: ['127.0.0.1:9417']\n",
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    bed.dut
        .spawn(
            &[
                &prom,
                &format!("--config.file={}", conf.display()),
                &format!("--storage.tsdb.path={}", dir.join("data").display()),
                "--web.listen-address=127.0.0.1:9090",
            ],
            Stdio::null(),
            Stdio::from(log),
        )
        .expect("start prometheus");
    let checks: Vec<(String, u64)> = vec![
        (
            "lanyard_interface_receive_frames_total{interface=\"sw1\"}".into(),
            rx,
        ),
        (
            "lanyard_interface_receive_bytes_total{interface=\"sw1\"}".into(),
            port_counter(&c, "sw1", "rx_bytes"),
        ),
        (
            "lanyard_interface_transmit_frames_total{interface=\"sw2\"}".into(),
            port_counter(&c, "sw2", "tx_frames"),
        ),
        (
            "lanyard_interface_drops_total{interface=\"sw1\",reason=\"tagged-on-access\"}".into(),
            5,
        ),
        (
            "lanyard_vlan_receive_frames_total{vlan=\"10\"}".into(),
            c["vlans"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["vlan"] == 10)
                .unwrap()["rx_frames"]
                .as_u64()
                .unwrap(),
        ),
        (
            "lanyard_mac_table_entries{type=\"dynamic\"}".into(),
            sw.mac_count(None),
        ),
        ("lanyard_interface_up{interface=\"sw2\"}".into(), 1),
        ("up{job=\"lanyard\"}".into(), 1),
    ];
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut last;
    loop {
        last = checks
            .iter()
            .map(|(q, want)| (q.clone(), *want, prom_value(&bed.dut, q)))
            .filter(|(_, want, got)| *got != Some(*want))
            .collect::<Vec<_>>();
        if last.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let plog = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        last.is_empty(),
        "Prometheus disagrees with show (query, show, prometheus): {last:?}\nprometheus log tail:\n{}",
        plog.lines().rev().take(20).collect::<Vec<_>>().join("\n")
    );
}

fn which(name: &str) -> Result<String, ()> {
    for dir in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
        let p = format!("{dir}/{name}");
        if std::path::Path::new(&p).exists() {
            return Ok(p);
        }
    }
    Err(())
}
