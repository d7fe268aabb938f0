//! Sampling: each poll asks the API (once per request per poll) and
//! decides which policies fire, with hysteresis for thresholds and edge
//! detection for link state.

use crate::cpu::Cpu;
use crate::{Query, Trigger};
use config::event_refs::parse_counter;
use config::events::{CounterRef, Cron, EventManager};
use config::Config;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Instant;

#[derive(Default)]
struct PState {
    armed: bool,
    /// For rates: the previous value and when.
    last: Option<(u64, Instant)>,
    /// Link state per port, as last seen.
    links: HashMap<String, String>,
    timer_last: Option<Instant>,
    cron_minute: u64,
    log_seq: u64,
    regex: Option<regex::Regex>,
    cron: Option<Cron>,
}

pub(crate) struct Detector {
    states: Vec<PState>,
    pub(crate) cpu: Cpu,
    started: Instant,
}

/// Answers of one poll, each request asked at most once.
struct Cache<'a> {
    q: &'a Query,
    answers: HashMap<String, Option<Value>>,
}

impl Cache<'_> {
    fn get(&mut self, req: Value) -> Option<&Value> {
        let key = req.to_string();
        let q = self.q;
        self.answers
            .entry(key)
            .or_insert_with(|| {
                let r = q(&req);
                (r.get("ok") == Some(&Value::Bool(true))).then(|| r["data"].clone())
            })
            .as_ref()
    }
}

fn field(v: &Value, f: &str) -> Option<u64> {
    match f.split_once('.') {
        Some((a, b)) => v.get(a)?.get(b)?.as_u64(),
        None => v.get(f)?.as_u64(),
    }
}

/// The current value of a counter, from the answer `show` renders.
fn counter_value(c: &mut Cache, r: &CounterRef) -> Option<u64> {
    match r {
        CounterRef::Port { port, field: f } => {
            let v = c.get(json!({"cmd": "show-counters"}))?;
            let p = v["ports"]
                .as_array()?
                .iter()
                .find(|p| p["name"] == json!(port))?;
            field(p, f)
        }
        CounterRef::Vlan { vlan, field: f } => {
            let v = c.get(json!({"cmd": "show-counters"}))?;
            let p = v["vlans"]
                .as_array()?
                .iter()
                .find(|p| p["vlan"] == json!(vlan))?;
            field(p, f)
        }
        CounterRef::L3 { field: f } => {
            let v = c.get(json!({"cmd": "show-counters"}))?;
            field(&v["l3"], f)
        }
        CounterRef::Acl { name, rule } => {
            let v = c.get(json!({"cmd": "show-access-lists", "name": name, "all": true}))?;
            let a = v.as_array()?.iter().find(|a| a["name"] == json!(name))?;
            match rule {
                Some(n) => a["entries"]
                    .as_array()?
                    .iter()
                    .find(|e| e["index"] == json!(n))?["hits"]
                    .as_u64(),
                None => a["implicit-deny-hits"].as_u64(),
            }
        }
        CounterRef::Copp { class, field: f } => {
            let v = c.get(json!({"cmd": "show-copp"}))?;
            let k = v["classes"]
                .as_array()?
                .iter()
                .find(|k| k["class"] == json!(class))?;
            k[f.as_str()].as_u64()
        }
        CounterRef::Class {
            port,
            direction,
            class,
            field: f,
        } => {
            let v = c.get(json!({"cmd": "show-policy-map-interface", "port": port}))?;
            v.as_array()?
                .iter()
                .filter(|p| p["port"] == json!(port) && p["direction"] == json!(direction))
                .flat_map(|p| p["classes"].as_array().into_iter().flatten())
                .find(|k| k["class"] == json!(class))?[f.as_str()]
            .as_u64()
        }
    }
}

/// The largest flow count per interface or per source, its key, and (per
/// source) the interface most of that source's flows came in on.
fn flows(c: &mut Cache, per: &str) -> Option<(String, u64, Option<String>)> {
    let v = c.get(json!({"cmd": "show-flow-cache", "top": 10000}))?;
    let key = if per == "per-source" { "src" } else { "in" };
    let mut m: HashMap<String, u64> = HashMap::new();
    for f in v["top"].as_array()? {
        if let Some(k) = f[key].as_str() {
            *m.entry(k.to_string()).or_default() += 1;
        }
    }
    let (k, n) = m
        .into_iter()
        .max_by_key(|(k, n)| (*n, std::cmp::Reverse(k.clone())))?;
    let ingress = (per == "per-source")
        .then(|| {
            let mut by: HashMap<&str, u64> = HashMap::new();
            for f in v["top"].as_array().into_iter().flatten() {
                if f["src"].as_str() == Some(k.as_str()) {
                    if let Some(i) = f["in"].as_str() {
                        *by.entry(i).or_default() += 1;
                    }
                }
            }
            by.into_iter()
                .max_by_key(|(i, n)| (*n, std::cmp::Reverse(*i)))
                .map(|(i, _)| i.to_string())
        })
        .flatten();
    Some((k, n, ingress))
}

fn pct(n: u64, of: u64) -> Option<u64> {
    (of > 0).then(|| n * 100 / of)
}

fn table_fill(c: &mut Cache, t: &str) -> Option<u64> {
    match t {
        "mac" => {
            let v = c.get(json!({"cmd": "show-mac-count"}))?;
            pct(v["total"].as_u64()?, v["capacity"].as_u64()?)
        }
        "flow-cache" => {
            let v = c.get(json!({"cmd": "show-flow-cache", "top": 10000}))?;
            let cap: u64 = v["workers"]
                .as_array()?
                .iter()
                .filter_map(|w| w["capacity"].as_u64())
                .sum();
            pct(v["flows"].as_u64()?, cap)
        }
        "fib-ipv4" | "fib-ipv6" => {
            let fam = if t == "fib-ipv4" { 4 } else { 6 };
            let v = c.get(json!({"cmd": "show-ip-route", "family": fam, "summary": true}))?;
            pct(v["installed"].as_u64()?, v["max_routes"].as_u64()?)
        }
        "next-hops" => {
            let v = c.get(json!({"cmd": "show-ip-route", "family": 4, "summary": true}))?;
            pct(v["next_hops"].as_u64()?, v["next_hop_capacity"].as_u64()?)
        }
        _ => None,
    }
}

/// A threshold with hysteresis: fires on the rise above `above`, re-arms
/// at or under `rearm-below` (default `above`).
fn threshold(
    st: &mut PState,
    e: &config::events::Event,
    v: u64,
    what: String,
    vars: Vec<(String, String)>,
    now: Instant,
) -> Option<Trigger> {
    let above = e.above.unwrap_or(u64::MAX);
    let rearm = e.rearm_below.unwrap_or(above);
    if st.armed && v > above {
        st.armed = false;
        return Some(Trigger {
            detail: format!("{what} = {v} > {above}"),
            value: Some(v),
            vars,
            at: now,
        });
    }
    if !st.armed && v <= rearm {
        st.armed = true;
    }
    None
}

impl Detector {
    pub(crate) fn new() -> Detector {
        Detector {
            states: Vec::new(),
            cpu: Cpu::default(),
            started: Instant::now(),
        }
    }

    pub(crate) fn reconfigure(&mut self, em: Option<&EventManager>) {
        let seq = logging::tap::next_seq();
        self.states = em
            .map(|e| {
                e.policies
                    .iter()
                    .map(|p| PState {
                        armed: true,
                        log_seq: seq,
                        regex: p.on.log.as_deref().and_then(|r| regex::Regex::new(r).ok()),
                        cron: p.on.cron.as_deref().and_then(|c| Cron::parse(c).ok()),
                        ..PState::default()
                    })
                    .collect()
            })
            .unwrap_or_default();
    }

    /// One poll: the policies that fire now.
    pub(crate) fn sample(
        &mut self,
        em: &EventManager,
        cfg: &Config,
        q: &Query,
    ) -> Vec<(usize, Trigger)> {
        let mut c = Cache {
            q,
            answers: HashMap::new(),
        };
        // Always: `show event manager` prints the figures too.
        self.cpu.sample();
        let now = Instant::now();
        let mut out = Vec::new();
        for (i, p) in em.policies.iter().enumerate() {
            let Some(st) = self.states.get_mut(i) else {
                continue;
            };
            if !p.enabled {
                continue;
            }
            let e = &p.on;
            let trig = |detail: String, value: Option<u64>, vars: Vec<(String, String)>| Trigger {
                detail,
                value,
                vars,
                at: now,
            };
            let mut threshold =
                |st: &mut PState, v: u64, what: String, vars: Vec<(String, String)>| {
                    if let Some(t) = threshold(st, e, v, what, vars, now) {
                        out.push((i, t));
                    }
                };
            if let Some(ifc) = &e.interface {
                let Some(v) = c.get(json!({"cmd": "show-interfaces"})) else {
                    continue;
                };
                let want = e.state.as_deref().unwrap_or("change");
                let mut links = Vec::new();
                for port in v.as_array().into_iter().flatten() {
                    let name = port["name"].as_str().unwrap_or("").to_string();
                    if ifc != "any" && *ifc != name {
                        continue;
                    }
                    let state = port["state"].as_str().unwrap_or("").to_string();
                    let prev = st.links.insert(name.clone(), state.clone());
                    let Some(prev) = prev else { continue };
                    let up = |s: &str| s == "up";
                    if up(&prev) == up(&state) {
                        continue;
                    }
                    let now_up = up(&state);
                    if want == "change" || (want == "up") == now_up {
                        links.push(trig(
                            format!("{name} {}", if now_up { "up" } else { "down" }),
                            None,
                            vec![("interface".into(), name.clone())],
                        ));
                    }
                }
                out.extend(links.into_iter().map(|t| (i, t)));
            } else if let Some(cn) = &e.counter {
                let Ok(r) = parse_counter(cn, cfg) else {
                    continue;
                };
                let Some(v) = counter_value(&mut c, &r) else {
                    continue;
                };
                let v = if e.rate {
                    let prev = st.last.replace((v, now));
                    match prev {
                        Some((p, at)) if now > at => {
                            let dt = now.duration_since(at).as_secs_f64();
                            (v.saturating_sub(p) as f64 / dt) as u64
                        }
                        _ => continue,
                    }
                } else {
                    v
                };
                let what = if e.rate {
                    format!("{cn} per second")
                } else {
                    cn.clone()
                };
                let vars = match &r {
                    CounterRef::Port { port, .. } | CounterRef::Class { port, .. } => {
                        vec![("interface".to_string(), port.clone())]
                    }
                    _ => Vec::new(),
                };
                threshold(st, v, what, vars);
            } else if let Some(which) = &e.cpu {
                if let Some(v) = self.cpu.get(which) {
                    threshold(st, v, format!("cpu {which} %"), Vec::new());
                }
            } else if let Some(per) = &e.flows {
                if let Some((k, n, ingress)) = flows(&mut c, per) {
                    let mut vars = Vec::new();
                    if per == "per-source" {
                        vars.push(("source".to_string(), k.clone()));
                        if let Some(i) = ingress {
                            vars.push(("interface".to_string(), i));
                        }
                    } else {
                        vars.push(("interface".to_string(), k.clone()));
                    }
                    threshold(st, n, format!("flows from {k}"), vars);
                }
            } else if let Some(t) = &e.table {
                if let Some(v) = table_fill(&mut c, t) {
                    threshold(st, v, format!("table {t} %"), Vec::new());
                }
            } else if let Some(secs) = e.timer {
                let last = *st.timer_last.get_or_insert(self.started);
                if now.duration_since(last).as_secs() >= secs as u64 {
                    st.timer_last = Some(now);
                    out.push((i, trig(format!("timer {secs} s"), None, Vec::new())));
                }
            } else if let Some(cron) = &st.cron {
                let t = crate::unix_time();
                let minute = t / 60;
                if minute != st.cron_minute && cron.matches(t) {
                    st.cron_minute = minute;
                    out.push((
                        i,
                        trig(
                            format!("cron {}", e.cron.as_deref().unwrap_or("")),
                            None,
                            Vec::new(),
                        ),
                    ));
                }
            } else if let Some(re) = &st.regex {
                let (lines, next) = logging::tap::since(st.log_seq);
                st.log_seq = next;
                // The event manager's own lines never trigger it.
                if let Some(l) = lines
                    .iter()
                    .find(|l| !l.target.starts_with("events") && re.is_match(&l.message))
                {
                    out.push((
                        i,
                        trig(
                            format!("log: {}", l.message),
                            None,
                            vec![("message".into(), l.message.clone())],
                        ),
                    ));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    fn cfg(policies: &str) -> Config {
        config::parse(
            &format!(
                "ports:\n  - name: sw1\n  - name: sw2\nflow-export:\n  collector: 127.0.0.1:2055\n\
                 event-manager:\n  policies:\n{policies}"
            ),
            "t.yaml",
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A fake API whose numbers the test sets.
    struct Fake {
        rx: AtomicU64,
        flows: std::sync::Mutex<Vec<(&'static str, &'static str)>>,
        macs: AtomicU64,
    }

    impl Fake {
        /// A switch with every counter at zero and no flows.
        fn zero() -> Arc<Fake> {
            Arc::new(Fake {
                rx: AtomicU64::new(0),
                flows: Default::default(),
                macs: AtomicU64::new(0),
            })
        }

        fn query(self: &Arc<Self>) -> impl Fn(&Value) -> Value {
            let f = self.clone();
            move |req: &Value| {
                let d = match req["cmd"].as_str().unwrap_or("") {
                    "show-counters" => json!({"ports": [
                        {"name": "sw1", "rx_frames": f.rx.load(Ordering::SeqCst), "drops": {"acl-deny": 0}}],
                        "vlans": [], "l3": null}),
                    "show-flow-cache" => {
                        let fl = f.flows.lock().unwrap();
                        json!({"flows": fl.len(), "workers": [{"worker": 0, "flows": fl.len(), "capacity": 100}],
                               "top": fl.iter().map(|(s, i)| json!({"src": s, "in": i})).collect::<Vec<_>>()})
                    }
                    "show-mac-count" => {
                        json!({"total": f.macs.load(Ordering::SeqCst), "capacity": 1000})
                    }
                    _ => return json!({"ok": false, "error": "no"}),
                };
                json!({"ok": true, "data": d})
            }
        }
    }

    type Fired = (usize, String, Vec<(String, String)>);

    fn fired(d: &mut Detector, c: &Config, q: &Query) -> Vec<Fired> {
        d.sample(c.event_manager.as_ref().unwrap(), c, q)
            .into_iter()
            .map(|(i, t)| (i, t.detail, t.vars))
            .collect()
    }

    #[test]
    fn thresholds_fire_once_and_rearm_with_hysteresis() {
        let c = cfg("    - name: t\n      on: {counter: interface sw1 rx_frames, above: 100, rearm-below: 50}\n      actions: [{log: x}]\n");
        let f = Arc::new(Fake {
            rx: AtomicU64::new(10),
            flows: Default::default(),
            macs: AtomicU64::new(0),
        });
        let q = f.query();
        let mut d = Detector::new();
        d.reconfigure(c.event_manager.as_ref());
        assert!(fired(&mut d, &c, &q).is_empty());
        f.rx.store(101, Ordering::SeqCst);
        let x = fired(&mut d, &c, &q);
        assert_eq!(x.len(), 1);
        assert_eq!(x[0].2, vec![("interface".to_string(), "sw1".to_string())]);
        // Still above, or between the marks: no second fire.
        f.rx.store(200, Ordering::SeqCst);
        assert!(fired(&mut d, &c, &q).is_empty());
        f.rx.store(60, Ordering::SeqCst);
        assert!(fired(&mut d, &c, &q).is_empty());
        f.rx.store(150, Ordering::SeqCst);
        assert!(
            fired(&mut d, &c, &q).is_empty(),
            "fired again without falling to the re-arm mark"
        );
        f.rx.store(50, Ordering::SeqCst);
        assert!(fired(&mut d, &c, &q).is_empty());
        f.rx.store(101, Ordering::SeqCst);
        assert_eq!(fired(&mut d, &c, &q).len(), 1);
    }

    #[test]
    fn rates_are_per_second() {
        let c = cfg("    - name: r\n      on: {counter: interface sw1 rx_frames, rate: true, above: 1000}\n      actions: [{log: x}]\n");
        let f = Fake::zero();
        let q = f.query();
        let mut d = Detector::new();
        d.reconfigure(c.event_manager.as_ref());
        assert!(fired(&mut d, &c, &q).is_empty());
        std::thread::sleep(Duration::from_millis(100));
        // 50 in 0.1 s = 500/s: under.
        f.rx.store(50, Ordering::SeqCst);
        assert!(fired(&mut d, &c, &q).is_empty());
        std::thread::sleep(Duration::from_millis(100));
        // 5000 more in ~0.1 s: over (unless the machine stalls for 5 s).
        f.rx.store(5050, Ordering::SeqCst);
        assert_eq!(fired(&mut d, &c, &q).len(), 1);
    }

    #[test]
    fn flows_per_source_name_the_source() {
        let c = cfg("    - name: worm\n      on: {flows: per-source, above: 3}\n      actions: [{log: x}]\n");
        let f = Fake::zero();
        let q = f.query();
        let mut d = Detector::new();
        d.reconfigure(c.event_manager.as_ref());
        *f.flows.lock().unwrap() = vec![
            ("10.0.0.1", "sw1"),
            ("10.0.0.2", "sw1"),
            ("10.0.0.1", "sw1"),
        ];
        assert!(fired(&mut d, &c, &q).is_empty());
        f.flows.lock().unwrap().extend([("10.0.0.9", "sw2"); 4]);
        let x = fired(&mut d, &c, &q);
        assert_eq!(x.len(), 1, "{x:?}");
        assert!(
            x[0].2
                .contains(&("source".to_string(), "10.0.0.9".to_string())),
            "{x:?}"
        );
        // The interface the source's flows came in on, for patches.
        assert!(
            x[0].2
                .contains(&("interface".to_string(), "sw2".to_string())),
            "{x:?}"
        );
    }

    #[test]
    fn table_fill_is_a_percentage() {
        let c =
            cfg("    - name: full\n      on: {table: mac, above: 80}\n      actions: [{log: x}]\n");
        let f = Arc::new(Fake {
            rx: AtomicU64::new(0),
            flows: Default::default(),
            macs: AtomicU64::new(800),
        });
        let q = f.query();
        let mut d = Detector::new();
        d.reconfigure(c.event_manager.as_ref());
        assert!(fired(&mut d, &c, &q).is_empty());
        f.macs.store(810, Ordering::SeqCst);
        assert_eq!(fired(&mut d, &c, &q).len(), 1);
    }

    #[test]
    fn log_lines_trigger_but_not_the_event_managers_own() {
        let c = cfg(
            "    - name: l\n      on: {log: \"storm on (sw[0-9]+)\"}\n      actions: [{log: x}]\n",
        );
        let f = Fake::zero();
        let q = f.query();
        let mut d = Detector::new();
        d.reconfigure(c.event_manager.as_ref());
        logging::tap::push(tracing::Level::WARN, "events", "storm on sw1".into());
        assert!(fired(&mut d, &c, &q).is_empty());
        logging::tap::push(
            tracing::Level::WARN,
            "control::guard",
            "broadcast storm on sw2".into(),
        );
        let x = fired(&mut d, &c, &q);
        assert_eq!(x.len(), 1);
        assert!(x[0].1.contains("storm on sw2"));
        assert!(fired(&mut d, &c, &q).is_empty(), "the same line twice");
    }
}
