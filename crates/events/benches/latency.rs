//! Event latency: from the moment a counter crosses its threshold (or a
//! link goes down) to the moment the policy's action runs, through the
//! real engine thread (`EventManager::start`) with a management API that
//! answers from memory. The action is an `apply` of a one-line patch: the
//! bench's apply function stamps the time it is called, so the figure
//! includes merging and validating the patch, as a real run does.
//!
//! Two parts: detection waits for the next poll (at most
//! `poll-interval-ms`, 100 here, the smallest allowed), and the run
//! starts a thread; both are in the total, and the history's
//! `detect_to_action_us` (sample → first action) is shown apart.
//!
//! `cargo bench -p events --bench latency` (`EVENTS_BENCH_N` events of
//! each kind, default 60).

use events::{Env, EventManager};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const YAML: &str = r#"
ports:
  - name: sw1
  - name: sw2
event-manager:
  poll-interval-ms: 100
  policies:
    - name: count
      on: {counter: interface sw1 rx_frames, above: 1000, rearm-below: 10}
      min-interval: 0
      actions:
        - apply: {patch: {control-plane-policing: {icmp: {rate: 100}}}}
    - name: link
      on: {interface: sw2, state: down}
      min-interval: 0
      actions:
        - apply: {patch: {control-plane-policing: {icmp: {rate: 200}}}}
"#;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let n: usize = std::env::var("EVENTS_BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let cfg = Arc::new(config::parse(YAML, "bench.yaml").expect("config"));
    let rx = Arc::new(AtomicU64::new(0));
    let up = Arc::new(AtomicBool::new(true));
    let applied: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let (r, u) = (rx.clone(), up.clone());
    let query = Arc::new(move |req: &Value| {
        let d = match req["cmd"].as_str().unwrap_or("") {
            "show-counters" => json!({"ports": [
                {"name": "sw1", "rx_frames": r.load(Ordering::SeqCst)},
                {"name": "sw2", "rx_frames": 0}], "vlans": [], "l3": null}),
            "show-interfaces" => json!([
                {"name": "sw1", "state": "up"},
                {"name": "sw2", "state": if u.load(Ordering::SeqCst) {"up"} else {"down"}}]),
            _ => return json!({"ok": false, "error": "not in the bench"}),
        };
        json!({"ok": true, "data": d})
    });
    let (c, a, s) = (cfg.clone(), applied.clone(), stop.clone());
    let env = Env {
        query,
        running: Arc::new(move || c.clone()),
        apply: Arc::new(move |_cfg| {
            a.lock().unwrap().push(Instant::now());
            Ok(json!({}))
        }),
        stop: Arc::new(move || s.load(Ordering::SeqCst)),
    };
    let (em, h) = EventManager::start(env).expect("start");
    // Let the first samples (link state baseline) happen.
    std::thread::sleep(Duration::from_millis(350));
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let wait_runs = |k: usize| {
        let d = Instant::now() + Duration::from_secs(5);
        while applied.lock().unwrap().len() < k {
            assert!(Instant::now() < d, "no run");
            std::thread::sleep(Duration::from_micros(200));
        }
        *applied.lock().unwrap().last().unwrap()
    };
    let mut results = Vec::new();
    for kind in ["counter", "link"] {
        let mut total = Vec::new();
        for _ in 0..n {
            // A random phase against the poll.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            std::thread::sleep(Duration::from_micros(rng % 100_000));
            let k = applied.lock().unwrap().len() + 1;
            let t0 = Instant::now();
            if kind == "counter" {
                rx.store(5000, Ordering::SeqCst);
            } else {
                up.store(false, Ordering::SeqCst);
            }
            let t1 = wait_runs(k);
            total.push(t1.duration_since(t0).as_secs_f64() * 1e3);
            // Back under the re-arm mark / link up, seen by a poll.
            rx.store(0, Ordering::SeqCst);
            up.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(250));
        }
        let v = em.json();
        let mut d2a: Vec<f64> = v["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["policy"] == if kind == "counter" { "count" } else { "link" })
            .filter_map(|r| r["detect_to_action_us"].as_u64())
            .map(|x| x as f64 / 1e3)
            .collect();
        results.push(format!(
            "{kind:<8} {n} events: event -> action p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; \
             sample -> action p50 {:.2} ms, p99 {:.2} ms",
            pct(&mut total, 0.5),
            pct(&mut total, 0.99),
            pct(&mut total, 1.0),
            pct(&mut d2a, 0.5),
            pct(&mut d2a, 0.99),
        ));
    }
    stop.store(true, Ordering::SeqCst);
    let _ = h.join();
    println!("event latency, poll-interval-ms 100:");
    for r in results {
        println!("  {r}");
    }
}
