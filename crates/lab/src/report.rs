//! Results: text tables, JSON, CSV and an SVG plot.

use crate::engine::TrialResult;
use crate::hist::LatencyStats;
use crate::plan::TestKind;
use serde::Serialize;
use std::fmt::Write as _;

/// Version tag of the JSON report (`docs/lab-schema.json`).
pub const SCHEMA: &str = "lanyard-lab/1";

/// One trial, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct TrialRecord {
    /// Role: max, search, latency, burst, step, holb, learn, test.
    pub role: String,
    /// Intended rate per port (or burst length / address count), if any.
    pub target: Option<f64>,
    /// Pass by the procedure's rule.
    pub pass: bool,
    /// Exact counts.
    pub result: TrialResult,
}

impl TrialRecord {
    /// Record `r`.
    pub fn new(role: &str, target: Option<f64>, r: &TrialResult, pass: bool) -> Self {
        TrialRecord {
            role: role.into(),
            target,
            pass,
            result: r.clone(),
        }
    }
}

/// One (test, DUT, frame size) result.
#[derive(Debug, Clone, Serialize)]
pub struct ResultRow {
    /// Test name.
    pub test: String,
    /// Test type.
    pub kind: TestKind,
    /// DUT name.
    pub dut: String,
    /// Frame size label ("64", "imix", "-").
    pub frame_size: String,
    /// Mean frame size in bytes (with FCS).
    pub avg_frame_bytes: f64,
    /// ok | failed | n/a.
    pub status: String,
    /// Why it failed or does not apply.
    pub error: Option<String>,
    /// Throughput (or offered rate for fixed-rate tests), frames/s over all ports.
    pub throughput_fps: Option<f64>,
    /// Throughput as % of the `wire` DUT's for the same test and size.
    pub pct_ceiling: Option<f64>,
    /// Layer-2 Mbit/s at the throughput (frame bytes without FCS).
    pub l2_mbps: Option<f64>,
    /// Loss ratio of the reported trial.
    pub loss_ratio: Option<f64>,
    /// Latency of the reported trial.
    pub latency: Option<LatencyStats>,
    /// Offered below intended, or no loss at the generator's maximum.
    pub generator_limited: bool,
    /// Pass/fail for tests with a pass rule.
    pub pass: Option<bool>,
    /// Main figure of non-throughput tests.
    pub value: Option<f64>,
    /// Unit of `value`.
    pub unit: Option<String>,
    /// Test-specific detail.
    pub detail: serde_json::Value,
    /// Remarks.
    pub notes: Vec<String>,
    /// Every trial.
    pub trials: Vec<TrialRecord>,
}

impl ResultRow {
    /// An empty row.
    pub fn new(test: &str, kind: TestKind, dut: &str, frame_size: &str, avg: f64) -> Self {
        ResultRow {
            test: test.into(),
            kind,
            dut: dut.into(),
            frame_size: frame_size.into(),
            avg_frame_bytes: avg,
            status: "ok".into(),
            error: None,
            throughput_fps: None,
            pct_ceiling: None,
            l2_mbps: None,
            loss_ratio: None,
            latency: None,
            generator_limited: false,
            pass: None,
            value: None,
            unit: None,
            detail: serde_json::Value::Null,
            notes: Vec::new(),
            trials: Vec::new(),
        }
    }
}

/// One DUT of the run.
#[derive(Debug, Clone, Serialize)]
pub struct DutRecord {
    /// Name.
    pub name: String,
    /// Driver.
    pub driver: String,
    /// ok | failed.
    pub status: String,
    /// Why it failed.
    pub error: Option<String>,
    /// Version and configuration notes.
    pub info: Vec<String>,
}

/// Result of a plan run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// [`SCHEMA`].
    pub schema: String,
    /// Plan name.
    pub plan: String,
    /// Start time, seconds since the Unix epoch.
    pub started_unix: u64,
    /// Run time in seconds.
    pub seconds: f64,
    /// Output directory.
    pub out_dir: Option<String>,
    /// Test-bed notes (clock, generator, cores).
    pub testbed: Vec<String>,
    /// DUTs in plan order.
    pub duts: Vec<DutRecord>,
    /// All results.
    pub results: Vec<ResultRow>,
    /// The plan as given (YAML), for the HTML report.
    pub plan_text: Option<String>,
    /// The published figure each test reproduces (the plan's `reference:`).
    pub references: Vec<Reference>,
    /// Inline-engine DUTs: bandwidth per subscriber per service over time
    /// (`bandwidth.csv`).
    pub bandwidth: Vec<crate::bandwidth::Row>,
    /// Inline-engine DUTs: concurrent sessions per service over time
    /// (`sessions.csv`).
    pub sessions: Vec<crate::sessions::Row>,
}

/// A published report's figure (defined with the plan that names it).
pub use crate::plan::Reference;

impl Summary {
    /// Fill `pct_ceiling` from the first `wire` DUT's rows.
    pub fn compute_ceiling(&mut self) {
        let Some(wire) = self
            .duts
            .iter()
            .find(|d| d.driver == "wire")
            .map(|d| d.name.clone())
        else {
            return;
        };
        let refs: Vec<(String, String, f64)> = self
            .results
            .iter()
            .filter(|r| r.dut == wire && r.status == "ok")
            .filter_map(|r| {
                r.throughput_fps
                    .map(|f| (r.test.clone(), r.frame_size.clone(), f))
            })
            .collect();
        for r in &mut self.results {
            if let (Some(f), Some((_, _, c))) = (
                r.throughput_fps,
                refs.iter()
                    .find(|(t, s, _)| *t == r.test && *s == r.frame_size),
            ) {
                if *c > 0.0 && matches!(r.kind, TestKind::Throughput | TestKind::FullMesh) {
                    r.pct_ceiling = Some(f / c * 100.0);
                }
            }
        }
    }

    fn tests(&self) -> Vec<(String, TestKind)> {
        let mut v: Vec<(String, TestKind)> = Vec::new();
        for r in &self.results {
            if !v.iter().any(|(t, _)| *t == r.test) {
                v.push((r.test.clone(), r.kind));
            }
        }
        v
    }

    /// Flat CSV, one line per result row.
    pub fn csv(&self) -> String {
        let mut o = String::from(
            "test,kind,dut,frame_size,status,throughput_fps,pct_ceiling,l2_mbps,loss_ratio,lat_min_ns,lat_avg_ns,lat_p50_ns,lat_p99_ns,lat_p999_ns,lat_max_ns,generator_limited,pass,value,unit,trials,error\n",
        );
        let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        let n = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
        for r in &self.results {
            let l = r.latency.unwrap_or_default();
            let lat = |x: u64| {
                if r.latency.is_some() {
                    x.to_string()
                } else {
                    String::new()
                }
            };
            let _ = writeln!(
                o,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                q(&r.test),
                serde_json::to_value(r.kind)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or(""),
                q(&r.dut),
                r.frame_size,
                r.status,
                n(r.throughput_fps),
                n(r.pct_ceiling),
                n(r.l2_mbps),
                r.loss_ratio.map(|x| format!("{x:.6}")).unwrap_or_default(),
                lat(l.min_ns),
                lat(l.avg_ns),
                lat(l.p50_ns),
                lat(l.p99_ns),
                lat(l.p999_ns),
                lat(l.max_ns),
                r.generator_limited,
                r.pass.map(|p| p.to_string()).unwrap_or_default(),
                n(r.value),
                q(r.unit.as_deref().unwrap_or("")),
                r.trials.len(),
                q(r.error.as_deref().unwrap_or("")),
            );
        }
        o
    }

    /// SVG plot: throughput (kfps) and average latency (µs) versus frame
    /// size for each throughput test, one line per DUT (the ceiling dashed).
    pub fn svg(&self) -> String {
        let tests: Vec<String> = self
            .tests()
            .into_iter()
            .filter(|(_, k)| {
                matches!(
                    k,
                    TestKind::Throughput | TestKind::FullMesh | TestKind::Multicast
                )
            })
            .map(|(t, _)| t)
            .collect();
        let (pw, ph) = (520.0, 300.0);
        let width = 2.0 * pw + 40.0;
        let height = (tests.len().max(1) as f64) * (ph + 40.0) + 20.0;
        let colors = [
            "#222", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
        ];
        let mut o = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        );
        for (ti, test) in tests.iter().enumerate() {
            let rows: Vec<&ResultRow> = self
                .results
                .iter()
                .filter(|r| r.test == *test && r.status == "ok")
                .collect();
            let mut xs: Vec<f64> = rows.iter().map(|r| r.avg_frame_bytes).collect();
            xs.sort_by(f64::total_cmp);
            xs.dedup();
            let y0 = 20.0 + ti as f64 * (ph + 40.0);
            for (pi, (title, get)) in [
                (
                    "throughput (kframes/s)",
                    Box::new(|r: &ResultRow| r.throughput_fps.map(|f| f / 1e3))
                        as Box<dyn Fn(&ResultRow) -> Option<f64>>,
                ),
                (
                    "latency avg (µs)",
                    Box::new(|r: &ResultRow| r.latency.map(|l| l.avg_ns as f64 / 1e3)),
                ),
            ]
            .into_iter()
            .enumerate()
            {
                let x0 = 20.0 + pi as f64 * (pw + 20.0);
                let (l, t, w, h) = (x0 + 50.0, y0 + 20.0, pw - 70.0, ph - 60.0);
                let ymax = rows
                    .iter()
                    .filter_map(|r| get(r))
                    .fold(0.0f64, f64::max)
                    .max(1e-9)
                    * 1.1;
                let _ = writeln!(
                    o,
                    "<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{test}: {title}</text>",
                    x0 + 50.0,
                    y0 + 12.0
                );
                let _ = writeln!(o, "<rect x=\"{l}\" y=\"{t}\" width=\"{w}\" height=\"{h}\" fill=\"none\" stroke=\"#999\"/>");
                let xi = |x: f64| {
                    let i = xs.iter().position(|v| *v == x).unwrap_or(0) as f64;
                    l + if xs.len() > 1 {
                        i / (xs.len() - 1) as f64 * w
                    } else {
                        w / 2.0
                    }
                };
                for &x in &xs {
                    let _ = writeln!(
                        o,
                        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{x:.0}</text>",
                        xi(x),
                        t + h + 14.0
                    );
                }
                let _ = writeln!(
                    o,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">frame size (bytes)</text>",
                    l + w / 2.0,
                    t + h + 30.0
                );
                for k in 0..=4 {
                    let v = ymax * k as f64 / 4.0;
                    let y = t + h - h * k as f64 / 4.0;
                    let _ = writeln!(
                        o,
                        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{v:.0}</text>",
                        l - 4.0,
                        y + 4.0
                    );
                    let _ = writeln!(
                        o,
                        "<line x1=\"{l}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#eee\"/>",
                        l + w
                    );
                }
                for (di, d) in self.duts.iter().enumerate() {
                    let mut pts: Vec<(f64, f64)> = rows
                        .iter()
                        .filter(|r| r.dut == d.name)
                        .filter_map(|r| {
                            get(r).map(|v| (xi(r.avg_frame_bytes), t + h - v / ymax * h))
                        })
                        .collect();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    if pts.is_empty() {
                        continue;
                    }
                    let c = colors[di % colors.len()];
                    let dash = if d.driver == "wire" {
                        " stroke-dasharray=\"5,3\""
                    } else {
                        ""
                    };
                    let p: Vec<String> =
                        pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                    let _ = writeln!(o, "<polyline points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"{dash}/>", p.join(" "));
                    for (x, y) in &pts {
                        let _ = writeln!(
                            o,
                            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{c}\"/>"
                        );
                    }
                    let _ = writeln!(
                        o,
                        "<text x=\"{}\" y=\"{}\" fill=\"{c}\">{}</text>",
                        l + w - 110.0,
                        t + 14.0 + 13.0 * di as f64,
                        d.name
                    );
                }
            }
        }
        o.push_str("</svg>\n");
        o
    }
}

/// `a/b/c` of a `{min, avg, max}` JSON object.
fn mam(v: &serde_json::Value, d: usize) -> Option<String> {
    Some(format!(
        "{:.d$}/{:.d$}/{:.d$}",
        v["min"].as_f64()?,
        v["avg"].as_f64()?,
        v["max"].as_f64()?
    ))
}

/// The detail line of a convergence row.
pub(crate) fn conv_line(r: &ResultRow) -> String {
    let d = &r.detail;
    let mut v = Vec::new();
    let n = d["trials"].as_array().map_or(0, |a| a.len());
    let src = d["rate"]["source"].as_str().unwrap_or("fixed");
    v.push(format!(
        "{n} trials at {:.0} fps offered ({}), {} MACs in {} streams, event {}{}",
        d["offered_fps"]["avg"].as_f64().unwrap_or(0.0),
        if src == "max" {
            format!(
                "{:.0}% of max {:.0} fps",
                d["rate"]["fraction"].as_f64().unwrap_or(1.0) * 100.0,
                d["rate"]["max_fps"].as_f64().unwrap_or(0.0)
            )
        } else {
            "fixed".into()
        },
        d["addresses"],
        d["streams"],
        d["event"].as_str().unwrap_or("?"),
        match d["event_side"].as_str() {
            Some("tester") => " (tester side)",
            _ => "",
        }
    ));
    if let Some(x) = mam(&d["lost"], 0) {
        v.push(format!("lost {x} frames"));
    }
    if let Some(w) = d["worst_stream_ms"].as_f64() {
        v.push(format!(
            "worst stream {w:.3} ms (trial {}, stream {})",
            d["worst_stream"]["trial"], d["worst_stream"]["stream"]
        ));
    }
    if let Some(x) = mam(&d["outage_ms"], 3) {
        v.push(format!("outage by timestamps {x} ms"));
    }
    if let Some(x) = mam(&d["event_ms"], 1) {
        v.push(format!("event took {x} ms"));
    }
    if let Some(x) = mam(&d["script_ms"], 1) {
        v.push(format!("script switched {x} ms after the event started"));
    }
    if let Some(x) = mam(&d["tx_stall_ms"], 2) {
        v.push(format!("generator pause {x} ms"));
    }
    v.push(format!(
        "dup {} reordered {} lost-before-event {}",
        d["duplicated"], d["reordered"], d["lost_before_event"]
    ));
    v.join("; ")
}

/// One line per multicast row: the receivers' spread, leaks, delays.
pub(crate) fn mc_line(r: &ResultRow) -> String {
    let d = &r.detail;
    let s = &d["summary"];
    let mut v = vec![format!(
        "{} receivers, loss max {}, lost {}, leaked {} (+{} to sources), dup {}",
        s["receivers"],
        s["loss_ratio"]["max"]
            .as_f64()
            .map_or("-".into(), |x| format!("{x:.6}")),
        s["lost"],
        s["leaked"],
        s["leaked_to_sources"],
        s["duplicated"]
    )];
    if let Some(x) = mam(&s["latency_avg_us"], 0) {
        v.push(format!("latency avg across receivers {x} µs"));
    }
    if let Some(x) = mam(&s["latency_p99_us"], 0) {
        v.push(format!("p99 {x} µs"));
    }
    if let Some(x) = d["replicated_fps"].as_f64() {
        v.push(format!("{:.1} kfps delivered", x / 1e3));
    }
    if let Some(x) = mam(&d["join_delay_ms"], 2) {
        v.push(format!("join delay {x} ms"));
    }
    if let Some(x) = mam(&d["leave_delay_ms"], 2) {
        v.push(format!("leave delay {x} ms"));
    }
    v.join("; ")
}

/// Structural check of a JSON report against `docs/lab-schema.json`
/// (required keys and types); returns the first problem found.
pub fn validate_json(v: &serde_json::Value) -> Result<(), String> {
    let obj = |v: &serde_json::Value,
               at: &str|
     -> Result<serde_json::Map<String, serde_json::Value>, String> {
        v.as_object()
            .cloned()
            .ok_or_else(|| format!("{at}: not an object"))
    };
    let top = obj(v, "$")?;
    if top.get("schema").and_then(|s| s.as_str()) != Some(SCHEMA) {
        return Err(format!("$.schema: must be {SCHEMA:?}"));
    }
    top.get("plan")
        .and_then(|s| s.as_str())
        .ok_or("$.plan: string required")?;
    for k in ["started_unix", "seconds"] {
        top.get(k)
            .and_then(|s| s.as_f64())
            .ok_or(format!("$.{k}: number required"))?;
    }
    let duts = top
        .get("duts")
        .and_then(|d| d.as_array())
        .ok_or("$.duts: array required")?;
    for (i, d) in duts.iter().enumerate() {
        let d = obj(d, &format!("$.duts[{i}]"))?;
        for k in ["name", "driver", "status"] {
            d.get(k)
                .and_then(|s| s.as_str())
                .ok_or(format!("$.duts[{i}].{k}: string required"))?;
        }
    }
    let rows = top
        .get("results")
        .and_then(|d| d.as_array())
        .ok_or("$.results: array required")?;
    for (i, r) in rows.iter().enumerate() {
        let at = format!("$.results[{i}]");
        let r = obj(r, &at)?;
        for k in ["test", "kind", "dut", "frame_size", "status"] {
            r.get(k)
                .and_then(|s| s.as_str())
                .ok_or(format!("{at}.{k}: string required"))?;
        }
        let st = r["status"].as_str().unwrap_or("");
        if !["ok", "failed", "n/a"].contains(&st) {
            return Err(format!("{at}.status: {st:?} not ok/failed/n/a"));
        }
        for k in ["throughput_fps", "pct_ceiling", "loss_ratio", "value"] {
            if let Some(x) = r.get(k) {
                if !(x.is_null() || x.is_number()) {
                    return Err(format!("{at}.{k}: number or null required"));
                }
            }
        }
        if let Some(l) = r.get("latency").filter(|l| !l.is_null()) {
            let l = obj(l, &format!("{at}.latency"))?;
            for k in [
                "samples", "min_ns", "avg_ns", "max_ns", "p50_ns", "p99_ns", "p999_ns",
            ] {
                l.get(k)
                    .and_then(|x| x.as_u64())
                    .ok_or(format!("{at}.latency.{k}: integer required"))?;
            }
        }
        let trials = r
            .get("trials")
            .and_then(|t| t.as_array())
            .ok_or(format!("{at}.trials: array required"))?;
        for (j, t) in trials.iter().enumerate() {
            let t = obj(t, &format!("{at}.trials[{j}]"))?;
            t.get("pass")
                .and_then(|p| p.as_bool())
                .ok_or(format!("{at}.trials[{j}].pass: bool required"))?;
            let res = obj(
                t.get("result").unwrap_or(&serde_json::Value::Null),
                &format!("{at}.trials[{j}].result"),
            )?;
            for k in ["sent", "received", "duplicated", "reordered", "flooded"] {
                res.get(k)
                    .and_then(|x| x.as_u64())
                    .ok_or(format!("{at}.trials[{j}].result.{k}: integer required"))?;
            }
            res.get("lost")
                .and_then(|x| x.as_i64())
                .ok_or(format!("{at}.trials[{j}].result.lost: integer required"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Summary {
        let mut row = ResultRow::new("l2", TestKind::Throughput, "br", "64", 64.0);
        row.throughput_fps = Some(1000.0);
        row.latency = Some(LatencyStats::default());
        let mut wire = row.clone();
        wire.dut = "c".into();
        wire.throughput_fps = Some(2000.0);
        let mut failed = ResultRow::new("l2", TestKind::Throughput, "x", "64", 64.0);
        failed.status = "failed".into();
        failed.error = Some("no binary".into());
        Summary {
            schema: SCHEMA.into(),
            plan: "p".into(),
            started_unix: 1,
            seconds: 2.0,
            out_dir: None,
            testbed: vec![],
            duts: vec![
                DutRecord {
                    name: "c".into(),
                    driver: "wire".into(),
                    status: "ok".into(),
                    error: None,
                    info: vec![],
                },
                DutRecord {
                    name: "br".into(),
                    driver: "linux-bridge".into(),
                    status: "ok".into(),
                    error: None,
                    info: vec![],
                },
                DutRecord {
                    name: "x".into(),
                    driver: "lanyard".into(),
                    status: "failed".into(),
                    error: Some("no binary".into()),
                    info: vec![],
                },
            ],
            results: vec![wire, row, failed],
            plan_text: None,
            references: vec![],
            bandwidth: vec![],
            sessions: vec![],
        }
    }

    #[test]
    fn report_validates_and_renders() {
        let mut s = sample();
        s.compute_ceiling();
        assert_eq!(s.results[1].pct_ceiling, Some(50.0));
        let v = serde_json::to_value(&s).unwrap();
        validate_json(&v).unwrap();
        let t = s.tables();
        assert!(t.contains("br / c") && t.contains("0.50"), "{t}");
        assert!(s.csv().lines().count() == 4);
        assert!(s.svg().contains("<polyline"));
        let mut bad = v.clone();
        bad["results"][0]["status"] = "great".into();
        assert!(validate_json(&bad).is_err());
        let mut bad = v;
        bad["duts"] = serde_json::Value::Null;
        assert!(validate_json(&bad).unwrap_err().contains("duts"));
    }

    #[test]
    fn schema_document_matches_the_code() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/lab-schema.json");
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        assert_eq!(schema["$id"], SCHEMA);
        // Every key the code emits at the top level and per row is documented.
        let v = serde_json::to_value(sample()).unwrap();
        for k in v.as_object().unwrap().keys() {
            assert!(
                schema["properties"].get(k).is_some(),
                "undocumented key {k}"
            );
        }
        for k in v["results"][0].as_object().unwrap().keys() {
            assert!(
                schema["properties"]["results"]["items"]["properties"]
                    .get(k)
                    .is_some(),
                "undocumented row key {k}"
            );
        }
    }
}
