//! The HTML report: one self-contained file per run (inline CSS and SVG,
//! no script, nothing fetched): the plan, the test bed, each test's table
//! as in the text report, throughput and latency plots (latency on a log
//! axis: min, avg, p99, max), ratios, and the raw trials collapsed.

use crate::plan::TestKind;
use crate::report::{ResultRow, Summary};
use crate::tables::{self, Align, Table};
use std::fmt::Write as _;

/// `s` with `&`, `<`, `>` and `"` escaped.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;max-width:1200px;color:#222}\
h1{font-size:1.5em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ccc}\
h3{font-size:1.05em}\
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:2px 8px}\
th{background:#f3f3f3}td.r{text-align:right;font-variant-numeric:tabular-nums}\
pre{background:#f7f7f7;padding:.6em;overflow-x:auto}.note{color:#555;font-size:.9em}\
.plots{display:flex;flex-wrap:wrap;gap:1em}details{margin:.5em 0}summary{cursor:pointer}";

/// Colours of the DUTs, in plan order.
const COLORS: [&str; 8] = [
    "#222", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf",
];

/// `table` as HTML, with `kind` and `test` as data attributes.
fn table_html(t: &Table, kind: &str, test: &str) -> String {
    let mut o = format!(
        "<table data-kind=\"{}\" data-test=\"{}\">\n<tr>",
        esc(kind),
        esc(test)
    );
    for (h, _) in t.head() {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>\n");
    for r in t.rows() {
        o.push_str("<tr>");
        for (i, (_, a)) in t.head().iter().enumerate() {
            let c = r.get(i).map(|s| s.as_str()).unwrap_or("");
            let cls = if *a == Align::Right {
                " class=\"r\""
            } else {
                ""
            };
            let _ = write!(o, "<td{cls}>{}</td>", esc(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    o
}

fn utc(t: u64) -> String {
    // SAFETY: gmtime_r writes only into `tm`, which we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let tt = t as libc::time_t;
    // SAFETY: both pointers are valid for the call.
    unsafe { libc::gmtime_r(&tt, &mut tm) };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// The whole report.
impl Summary {
    /// The self-contained HTML report.
    pub fn html(&self) -> String {
        render(self)
    }
}

pub fn render(s: &Summary) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>lab: {}</title><style>{STYLE}</style></head><body>\n",
        esc(&s.plan)
    );
    let _ = writeln!(
        o,
        "<h1>lanyard lab: plan <code>{}</code></h1>\n<p>started {}, {:.0} s{}</p>",
        esc(&s.plan),
        utc(s.started_unix),
        s.seconds,
        s.out_dir
            .as_ref()
            .map(|d| format!(", results in <code>{}</code>", esc(d)))
            .unwrap_or_default()
    );
    // Test bed: notes, then the DUTs with their versions and configuration.
    o.push_str("<h2 id=\"testbed\">Test bed</h2>\n<ul data-kind=\"testbed\">\n");
    for t in &s.testbed {
        let _ = writeln!(o, "<li>{}</li>", esc(t));
    }
    o.push_str("</ul>\n");
    let mut duts = Table::new(&[
        ("DUT", Align::Left),
        ("driver", Align::Left),
        ("status", Align::Left),
        ("version and configuration", Align::Left),
    ]);
    for d in &s.duts {
        duts.row(vec![
            d.name.clone(),
            d.driver.clone(),
            d.status.clone(),
            match &d.error {
                Some(e) => e.clone(),
                None => d.info.join("; "),
            },
        ]);
    }
    o.push_str(&table_html(&duts, "duts", ""));
    if let Some(p) = &s.plan_text {
        let _ = writeln!(
            o,
            "<h2 id=\"plan\">Plan</h2>\n<pre data-kind=\"plan\">{}</pre>",
            esc(p)
        );
    }
    let mut tests: Vec<(String, TestKind)> = Vec::new();
    for r in &s.results {
        if !tests.iter().any(|(t, _)| *t == r.test) {
            tests.push((r.test.clone(), r.kind));
        }
    }
    for (test, kind) in &tests {
        let rows: Vec<&ResultRow> = s.results.iter().filter(|r| r.test == *test).collect();
        let kname = serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "<h2 id=\"test-{}\">{} <small>({})</small></h2>",
            esc(test),
            esc(test),
            esc(&kname)
        );
        if let Some(r) = s.references.iter().find(|r| r.test == *test) {
            let _ = writeln!(
                o,
                "<p data-kind=\"reference\"><b>Report:</b> {} {}: {}. <b>Scale:</b> {}</p>",
                esc(&r.report),
                esc(&r.table),
                esc(&r.figure),
                esc(&r.scale)
            );
        }
        let p = tables::test_parts(s, &rows, *kind);
        for l in &p.legend {
            let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(l));
        }
        o.push_str(&table_html(&p.table, "results", test));
        if !p.details.is_empty() {
            o.push_str("<ul class=\"note\">\n");
            for (label, line) in &p.details {
                let _ = writeln!(o, "<li><b>{}</b>: {}</li>", esc(label.trim()), esc(line));
            }
            o.push_str("</ul>\n");
        }
        let plots = plots(s, &rows, test, *kind);
        if !plots.is_empty() {
            let _ = writeln!(o, "<div class=\"plots\">{plots}</div>");
        }
        if let Some((t, legend)) = &p.streams {
            let _ = writeln!(
                o,
                "<h3>Outage per stream</h3>\n<p class=\"note\">{}</p>",
                esc(legend)
            );
            o.push_str(&table_html(t, "streams", test));
        }
        if let Some(r) = &p.ratios {
            let _ = writeln!(o, "<h3>{}</h3>", esc(tables::RATIOS));
            o.push_str(&table_html(r, "ratios", test));
        }
        if !p.footnotes.is_empty() {
            o.push_str("<p class=\"note\" data-kind=\"footnotes\">");
            for (m, t) in &p.footnotes {
                let _ = write!(o, "{} {}<br>", esc(m), esc(t));
            }
            o.push_str("</p>\n");
        }
        o.push_str(&trial_log(&rows, test));
    }
    o.push_str(&bandwidth_section(&s.bandwidth));
    o.push_str(&sessions_section(&s.sessions));
    o.push_str("</body></html>\n");
    o
}

/// Every trial of the test, per DUT and frame size, collapsed.
fn trial_log(rows: &[&ResultRow], test: &str) -> String {
    let n: usize = rows.iter().map(|r| r.trials.len()).sum();
    let mut o = format!(
        "<details data-kind=\"trials\" data-test=\"{}\"><summary>raw trial log ({n} trials)</summary>\n",
        esc(test)
    );
    let mut t = Table::new(&[
        ("DUT", Align::Left),
        ("frame", Align::Right),
        ("#", Align::Right),
        ("role", Align::Left),
        ("target", Align::Right),
        ("pass", Align::Left),
        ("intended fps", Align::Right),
        ("offered fps", Align::Right),
        ("sent", Align::Right),
        ("received", Align::Right),
        ("lost", Align::Right),
        ("dup", Align::Right),
        ("flooded", Align::Right),
        ("lat avg µs", Align::Right),
        ("p99 µs", Align::Right),
    ]);
    for r in rows {
        for (i, tr) in r.trials.iter().enumerate() {
            let x = &tr.result;
            t.row(vec![
                r.dut.clone(),
                r.frame_size.clone(),
                (i + 1).to_string(),
                tr.role.clone(),
                tr.target.map(|v| format!("{v:.0}")).unwrap_or_default(),
                if tr.pass { "yes" } else { "no" }.into(),
                format!("{:.0}", x.intended_fps),
                format!("{:.0}", x.offered_fps),
                x.sent.to_string(),
                x.received.to_string(),
                x.lost.to_string(),
                x.duplicated.to_string(),
                x.flooded.to_string(),
                tables::us(x.latency.avg_ns),
                tables::us(x.latency.p99_ns),
            ]);
        }
    }
    o.push_str(&table_html(&t, "trial-log", test));
    o.push_str("</details>\n");
    o
}

/// Throughput and latency plots of a rate or multicast test.
fn plots(s: &Summary, rows: &[&ResultRow], test: &str, kind: TestKind) -> String {
    if kind == TestKind::BandwidthShare {
        return share_plots(rows);
    }
    if !matches!(
        kind,
        TestKind::Throughput | TestKind::FullMesh | TestKind::Latency | TestKind::Multicast
    ) {
        return String::new();
    }
    let ok: Vec<&ResultRow> = rows.iter().copied().filter(|r| r.status == "ok").collect();
    if ok.is_empty() {
        return String::new();
    }
    // Frame sizes in order of their mean size.
    let mut xs: Vec<(f64, String)> = Vec::new();
    for r in &ok {
        if !xs.iter().any(|(_, l)| *l == r.frame_size) {
            xs.push((r.avg_frame_bytes, r.frame_size.clone()));
        }
    }
    xs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let labels: Vec<String> = xs.into_iter().map(|(_, l)| l).collect();
    let mut o = String::new();
    if kind != TestKind::Latency {
        o.push_str(&throughput_plot(s, &ok, &labels, test));
    }
    if ok.iter().any(|r| r.latency.is_some_and(|l| l.samples > 0)) {
        o.push_str(&latency_plot(s, &ok, &labels, test));
    }
    o
}

const PW: f64 = 560.0;
const PH: f64 = 320.0;
const L: f64 = 64.0;
const T: f64 = 28.0;
const W: f64 = PW - L - 150.0;
const H: f64 = PH - T - 48.0;

fn x_of(i: usize, n: usize, dut: usize, nd: usize) -> f64 {
    let step = W / n as f64;
    // DUTs side by side within a frame size's slot, so whiskers do not overlap.
    let off = (dut as f64 + 0.5) / nd.max(1) as f64 - 0.5;
    L + step * (i as f64 + 0.5) + off * step * 0.5
}

fn frame_axis(o: &mut String, labels: &[String]) {
    for (i, l) in labels.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x_of(i, labels.len(), 0, 1),
            T + H + 16.0,
            esc(l)
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">frame size (bytes)</text>\
         <rect x=\"{L}\" y=\"{T}\" width=\"{W}\" height=\"{H}\" fill=\"none\" stroke=\"#999\"/>",
        L + W / 2.0,
        T + H + 36.0
    );
}

fn legend(o: &mut String, s: &Summary, present: &[usize], extra: &[&str]) {
    let mut y = T + 10.0;
    for &di in present {
        let d = &s.duts[di];
        let c = COLORS[di % COLORS.len()];
        let _ = writeln!(
            o,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\" stroke-width=\"2\"{}/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            L + W + 10.0,
            y - 4.0,
            L + W + 30.0,
            y - 4.0,
            if d.driver == "wire" { " stroke-dasharray=\"5,3\"" } else { "" },
            L + W + 34.0,
            y,
            esc(&d.name)
        );
        y += 15.0;
    }
    for e in extra {
        y += 4.0;
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{y:.1}\" fill=\"#555\">{}</text>",
            L + W + 10.0,
            esc(e)
        );
        y += 11.0;
    }
}

fn throughput_plot(s: &Summary, ok: &[&ResultRow], labels: &[String], test: &str) -> String {
    let ymax = ok
        .iter()
        .filter_map(|r| r.throughput_fps)
        .fold(0.0f64, f64::max)
        / 1e3;
    let ymax = nice_ceiling(ymax.max(1e-3));
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" data-plot=\"throughput\" data-test=\"{}\" \
         width=\"{PW}\" height=\"{PH}\" font-family=\"sans-serif\" font-size=\"11\">\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\
         <text x=\"{L}\" y=\"16\" font-weight=\"bold\">{}: throughput (kframes/s)</text>\n",
        esc(test),
        esc(test)
    );
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        let y = T + H - H * k as f64 / 4.0;
        let _ = writeln!(
            o,
            "<line x1=\"{L}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            L + W,
            L - 4.0,
            y + 4.0,
            tables::num(v)
        );
    }
    frame_axis(&mut o, labels);
    let mut present = Vec::new();
    let nd = s.duts.len();
    for (di, d) in s.duts.iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = Vec::new();
        for (i, l) in labels.iter().enumerate() {
            if let Some(f) = ok
                .iter()
                .find(|r| r.dut == d.name && r.frame_size == *l)
                .and_then(|r| r.throughput_fps)
            {
                pts.push((x_of(i, labels.len(), di, nd), T + H - f / 1e3 / ymax * H));
            }
        }
        if pts.is_empty() {
            continue;
        }
        present.push(di);
        let c = COLORS[di % COLORS.len()];
        let dash = if d.driver == "wire" {
            " stroke-dasharray=\"5,3\""
        } else {
            ""
        };
        let p: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            o,
            "<polyline data-dut=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"{dash}/>",
            esc(&d.name),
            p.join(" ")
        );
        for (x, y) in &pts {
            let _ = writeln!(
                o,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{c}\"/>"
            );
        }
    }
    legend(&mut o, s, &present, &["ceiling dashed"]);
    o.push_str("</svg>\n");
    o
}

/// 1, 2 or 5 times a power of ten, at least `v`.
fn nice_ceiling(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= v {
            return m * p;
        }
    }
    10.0 * p
}

/// Latency on a log axis: per DUT a whisker from min to max, the average
/// (solid line, dot) and p99 (dashed line, square).
fn latency_plot(s: &Summary, ok: &[&ResultRow], labels: &[String], test: &str) -> String {
    let lat: Vec<_> = ok
        .iter()
        .filter_map(|r| r.latency.filter(|l| l.samples > 0).map(|l| (*r, l)))
        .collect();
    let lo = lat
        .iter()
        .map(|(_, l)| l.min_ns.max(1) as f64 / 1e3)
        .fold(f64::INFINITY, f64::min);
    let hi = lat
        .iter()
        .map(|(_, l)| l.max_ns.max(1) as f64 / 1e3)
        .fold(0.0f64, f64::max);
    let d0 = lo.log10().floor() as i32;
    let d1 = (hi.log10().ceil() as i32).max(d0 + 1);
    let y_of = |us: f64| {
        let v = us.max(10f64.powi(d0)).log10();
        T + H - (v - d0 as f64) / (d1 - d0) as f64 * H
    };
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" data-plot=\"latency\" data-test=\"{}\" \
         width=\"{PW}\" height=\"{PH}\" font-family=\"sans-serif\" font-size=\"11\">\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\
         <text x=\"{L}\" y=\"16\" font-weight=\"bold\">{}: latency (log scale)</text>\n",
        esc(test),
        esc(test)
    );
    for k in d0..=d1 {
        let us = 10f64.powi(k);
        let y = y_of(us);
        let label = if us >= 1e6 {
            format!("{} s", us / 1e6)
        } else if us >= 1e3 {
            format!("{} ms", us / 1e3)
        } else {
            format!("{us} µs")
        };
        let _ = writeln!(
            o,
            "<line x1=\"{L}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
            L + W,
            L - 4.0,
            y + 4.0
        );
    }
    frame_axis(&mut o, labels);
    let nd = s.duts.len();
    let mut present = Vec::new();
    for (di, d) in s.duts.iter().enumerate() {
        let c = COLORS[di % COLORS.len()];
        let mut avg = Vec::new();
        let mut p99 = Vec::new();
        for (i, l) in labels.iter().enumerate() {
            let Some((_, st)) = lat
                .iter()
                .find(|(r, _)| r.dut == d.name && r.frame_size == *l)
            else {
                continue;
            };
            let x = x_of(i, labels.len(), di, nd);
            let f = |ns: u64| y_of(ns.max(1) as f64 / 1e3);
            let _ = writeln!(
                o,
                "<line data-dut=\"{}\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{c}\"/>\
                 <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\"/>\
                 <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\"/>",
                esc(&d.name),
                f(st.min_ns),
                f(st.max_ns),
                x - 3.0,
                f(st.min_ns),
                x + 3.0,
                f(st.min_ns),
                x - 3.0,
                f(st.max_ns),
                x + 3.0,
                f(st.max_ns)
            );
            avg.push((x, f(st.avg_ns)));
            p99.push((x, f(st.p99_ns)));
        }
        if avg.is_empty() {
            continue;
        }
        present.push(di);
        let pl = |v: &[(f64, f64)]| {
            v.iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = writeln!(
            o,
            "<polyline data-dut=\"{}\" data-stat=\"avg\" points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"/>\
             <polyline data-dut=\"{}\" data-stat=\"p99\" points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-dasharray=\"4,3\"/>",
            esc(&d.name),
            pl(&avg),
            esc(&d.name),
            pl(&p99)
        );
        for (x, y) in &avg {
            let _ = writeln!(
                o,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{c}\"/>"
            );
        }
        for (x, y) in &p99 {
            let _ = writeln!(
                o,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"5\" height=\"5\" fill=\"{c}\"/>",
                x - 2.5,
                y - 2.5
            );
        }
    }
    legend(
        &mut o,
        s,
        &present,
        &[
            "solid, dot: avg",
            "dashed, square: p99",
            "whisker: min to max",
        ],
    );
    o.push_str("</svg>\n");
    o
}

/// Headless Chromium for tests and `lab` checks: `chromium` (Debian) or
/// `chromium-browser`.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        std::process::Command::new(c)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Script added to a copy of a report before rendering it: after layout it
/// writes what the browser laid out (tables, plots, collapsed sections,
/// visible text) as JSON into `<pre id="render-check">`.
const PROBE: &str = r#"<script>
addEventListener('load', () => {
  const box = e => { if (!e) return [0, 0]; const r = e.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; };
  const out = {
    tables: [...document.querySelectorAll('table')].map(t => ({kind: t.dataset.kind, test: t.dataset.test, rows: t.rows.length, box: box(t), visible: t.checkVisibility()})),
    plots: [...document.querySelectorAll('svg')].map(s => ({plot: s.dataset.plot, test: s.dataset.test, box: box(s),
      lines: [...s.querySelectorAll('polyline')].filter(p => { const b = p.getBBox(); return b.width > 0 || b.height > 0; }).length,
      marks: [...s.querySelectorAll('circle')].filter(c => { const b = c.getBBox(); return b.width > 0 && b.height > 0; }).length,
      labels: [...s.querySelectorAll('text')].map(t => t.textContent)})),
    details: [...document.querySelectorAll('details')].map(d => ({test: d.dataset.test, open: d.open, summary: box(d.querySelector('summary')), inner_visible: d.querySelector('table').checkVisibility()})),
    external: document.querySelectorAll('[src], link[href]').length,
    text: document.body.innerText,
  };
  const pre = document.createElement('pre');
  pre.id = 'render-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"#;

/// Render `html` in headless Chromium and return what it laid out (see
/// [`PROBE`]): `{tables, plots, details, external, text}`.
pub fn render_in_chromium(
    html: &str,
    scratch: &std::path::Path,
) -> Result<serde_json::Value, String> {
    let bin = chromium()
        .ok_or("headless Chromium not found (Debian package chromium; scripts/setup.sh)")?;
    std::fs::create_dir_all(scratch).map_err(|e| e.to_string())?;
    let page = scratch.join("probe.html");
    let body = html.replacen("</body>", &format!("{PROBE}</body>"), 1);
    std::fs::write(&page, body).map_err(|e| e.to_string())?;
    let out = std::process::Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=5000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("profile").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .map_err(|e| format!("{bin}: {e}"))?;
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom.find("<pre id=\"render-check\">").ok_or_else(|| {
        format!(
            "no render check in the DOM ({bin} said: {})",
            String::from_utf8_lossy(&out.stderr)
        )
    })? + "<pre id=\"render-check\">".len();
    let end = dom[start..]
        .find("</pre>")
        .ok_or("unterminated render check")?
        + start;
    let json = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    serde_json::from_str(&json).map_err(|e| format!("render check: {e}"))
}

/// Inline-engine DUTs: bandwidth per subscriber per service over time
/// (`bandwidth.csv`), one plot per DUT and subscriber: bits/s passed (up +
/// down) per service, solid; dropped, dashed (the inline engine report's
/// figures 7–10).
fn bandwidth_section(rows: &[crate::bandwidth::Row]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut o = String::from(
        "<h2 id=\"bandwidth\">Bandwidth per subscriber per service</h2>\n<p class=\"note\">\
         From the inline engine's history (<code>show subscriber ID --json</code>) after every \
         trial; every interval in <code>bandwidth.csv</code> / <code>bandwidth.json</code>. \
         Passed up + down, solid; dropped, dashed.</p>\n<div class=\"plots\">",
    );
    let mut keys: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.dut.as_str(), r.subscriber.as_str()))
        .collect();
    keys.sort();
    keys.dedup();
    for (dut, sub) in keys {
        let mine: Vec<&crate::bandwidth::Row> = rows
            .iter()
            .filter(|r| r.dut == dut && r.subscriber == sub)
            .collect();
        o.push_str(&bandwidth_plot(dut, sub, &mine));
    }
    o.push_str("</div>\n");
    o
}

fn bandwidth_plot(dut: &str, sub: &str, rows: &[&crate::bandwidth::Row]) -> String {
    let t0 = rows.iter().map(|r| r.start_ms).min().unwrap_or(0);
    let mut services: Vec<&str> = rows.iter().map(|r| r.service.as_str()).collect();
    services.sort();
    services.dedup();
    let mut lines = Vec::new();
    for (si, svc) in services.iter().enumerate() {
        let mut pts: Vec<&&crate::bandwidth::Row> =
            rows.iter().filter(|r| r.service == *svc).collect();
        pts.sort_by_key(|r| r.start_ms);
        let series = |f: &dyn Fn(&crate::bandwidth::Row) -> f64| -> Vec<(f64, f64)> {
            pts.iter()
                .map(|r| (mid_s(t0, r.start_ms, r.length_ms), f(r) / 1e6))
                .collect()
        };
        lines.push(TimeLine {
            service: svc,
            color: si,
            dashed: None,
            pts: series(&|r| r.up_bps + r.down_bps),
        });
        if pts
            .iter()
            .any(|r| r.dropped_up_bps + r.dropped_down_bps > 0.0)
        {
            lines.push(TimeLine {
                service: svc,
                color: si,
                dashed: Some("data-dropped"),
                pts: series(&|r| r.dropped_up_bps + r.dropped_down_bps),
            });
        }
    }
    let head = format!(
        "data-plot=\"bandwidth\" data-dut=\"{}\" data-subscriber=\"{}\"",
        esc(dut),
        esc(sub)
    );
    time_plot(&head, &format!("{dut} {sub}: Mbit/s per service"), &lines)
}

/// Bandwidth-share rows: one plot per DUT × service × direction, a line
/// per subscriber (Mbit/s received per interval of the last trial) — the
/// inline engine report's figures 7–10.
fn share_plots(rows: &[&ResultRow]) -> String {
    let mut o = String::new();
    for r in rows.iter().filter(|r| r.status == "ok") {
        let v = &r.detail["bandwidth_share"];
        let iv = v["interval_s"].as_f64().unwrap_or(1.0);
        let names: Vec<&str> = match v["subscribers"].as_array() {
            Some(a) => a.iter().map(|n| n.as_str().unwrap_or("?")).collect(),
            None => crate::bwspec::SUBSCRIBERS.to_vec(),
        };
        for sh in v["shares"].as_array().into_iter().flatten() {
            let svc = sh["service"].as_str().unwrap_or("?");
            let dir = sh["dir"].as_str().unwrap_or("?");
            let lines: Vec<TimeLine> = names
                .iter()
                .enumerate()
                .map(|(j, sub)| TimeLine {
                    service: sub,
                    color: j,
                    dashed: None,
                    pts: sh["series_bps"][j]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .enumerate()
                        .map(|(n, x)| ((n as f64 + 0.5) * iv, x.as_f64().unwrap_or(0.0) / 1e6))
                        .collect(),
                })
                .collect();
            let head = format!(
                "data-plot=\"bandwidth-share\" data-dut=\"{}\" data-service=\"{}\" data-dir=\"{dir}\"",
                esc(&r.dut),
                esc(svc)
            );
            let title = format!(
                "{} service {svc} {dir}: Mbit/s per subscriber (limit {:.3})",
                r.dut,
                sh["limit_bps"].as_f64().unwrap_or(0.0) / 1e6
            );
            o.push_str(&time_plot(&head, &title, &lines));
        }
    }
    if o.is_empty() {
        o
    } else {
        format!("<div class=\"plots\">{o}</div>\n")
    }
}

/// Inline-engine DUTs: concurrent sessions per service over time
/// (`sessions.csv`), one plot per DUT: the mean of each interval, solid;
/// its most, dashed.
fn sessions_section(rows: &[crate::sessions::Row]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut o = String::from(
        "<h2 id=\"sessions\">Concurrent sessions per service</h2>\n<p class=\"note\">\
         From the inline engine's service history (<code>show service-control history \
         --json</code>) after every trial; every interval in <code>sessions.csv</code> / \
         <code>sessions.json</code>. Mean over each interval, solid; most, dashed.</p>\n\
         <div class=\"plots\">",
    );
    let mut duts: Vec<&str> = rows.iter().map(|r| r.dut.as_str()).collect();
    duts.sort();
    duts.dedup();
    for dut in duts {
        let mine: Vec<&crate::sessions::Row> = rows.iter().filter(|r| r.dut == dut).collect();
        let t0 = mine.iter().map(|r| r.start_ms).min().unwrap_or(0);
        let mut services: Vec<&str> = mine.iter().map(|r| r.service.as_str()).collect();
        services.sort();
        services.dedup();
        let mut lines = Vec::new();
        for (si, svc) in services.iter().enumerate() {
            let mut pts: Vec<&&crate::sessions::Row> =
                mine.iter().filter(|r| r.service == *svc).collect();
            pts.sort_by_key(|r| r.start_ms);
            let at = |r: &crate::sessions::Row| mid_s(t0, r.start_ms, r.length_ms);
            lines.push(TimeLine {
                service: svc,
                color: si,
                dashed: None,
                pts: pts.iter().map(|r| (at(r), r.sessions_avg)).collect(),
            });
            lines.push(TimeLine {
                service: svc,
                color: si,
                dashed: Some("data-max"),
                pts: pts.iter().map(|r| (at(r), r.sessions_max as f64)).collect(),
            });
        }
        let head = format!("data-plot=\"sessions\" data-dut=\"{}\"", esc(dut));
        o.push_str(&time_plot(
            &head,
            &format!("{dut}: concurrent sessions per service"),
            &lines,
        ));
    }
    o.push_str("</div>\n");
    o
}

/// An interval's middle, seconds after `t0_ms`.
fn mid_s(t0_ms: u64, start_ms: u64, length_ms: u64) -> f64 {
    (start_ms.saturating_sub(t0_ms) as f64 + length_ms as f64 / 2.0) / 1e3
}

/// One line of a [`time_plot`].
struct TimeLine<'a> {
    /// The service it belongs to (`data-service`; solid lines are in the
    /// legend).
    service: &'a str,
    /// Index into [`COLORS`].
    color: usize,
    /// Dashed, marked with this attribute (`="1"`); None: solid.
    dashed: Option<&'static str>,
    /// (seconds, value in the plot's unit).
    pts: Vec<(f64, f64)>,
}

/// A plot over time (seconds from 0) in the page's SVG style: `head` is
/// the `<svg>` element's data attributes, the y axis from 0 to a round
/// ceiling above every point.
fn time_plot(head: &str, title: &str, lines: &[TimeLine]) -> String {
    let xmax = lines
        .iter()
        .flat_map(|l| l.pts.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let ymax = lines
        .iter()
        .flat_map(|l| l.pts.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let ymax = nice_ceiling(ymax.max(1e-3));
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" {head} width=\"{PW}\" height=\"{PH}\" \
         font-family=\"sans-serif\" font-size=\"11\"><rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/><text x=\"{L}\" y=\"16\" font-weight=\"bold\">{}</text>\n",
        esc(title)
    );
    for k in 0..=4 {
        let y = T + H - H * k as f64 / 4.0;
        let _ = writeln!(
            o,
            "<line x1=\"{L}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            L + W,
            L - 4.0,
            y + 4.0,
            tables::num(ymax * k as f64 / 4.0)
        );
    }
    for k in 0..=4 {
        let x = L + W * k as f64 / 4.0;
        let _ = writeln!(
            o,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            T + H + 14.0,
            tables::num(xmax * k as f64 / 4.0)
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">seconds</text>",
        L + W / 2.0,
        T + H + 30.0
    );
    let mut ly = T + 10.0;
    for l in lines {
        let c = COLORS[l.color % COLORS.len()];
        let points: Vec<String> = l
            .pts
            .iter()
            .map(|(x, v)| format!("{:.1},{:.1}", L + W * x / xmax, T + H - H * v / ymax))
            .collect();
        let (mark, style) = match l.dashed {
            Some(a) => (
                format!(" {a}=\"1\""),
                "stroke-width=\"1.5\" stroke-dasharray=\"5,3\"",
            ),
            None => (String::new(), "stroke-width=\"2\""),
        };
        let _ = writeln!(
            o,
            "<polyline data-service=\"{}\"{mark} points=\"{}\" fill=\"none\" stroke=\"{c}\" {style}/>",
            esc(l.service),
            points.join(" ")
        );
        if l.dashed.is_none() {
            let _ = writeln!(
                o,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\" stroke-width=\"2\"/>\
                 <text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
                L + W + 10.0,
                ly - 4.0,
                L + W + 30.0,
                ly - 4.0,
                L + W + 34.0,
                esc(l.service)
            );
            ly += 15.0;
        }
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Reference;

    #[test]
    fn escapes() {
        assert_eq!(
            esc("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn bandwidth_plot_per_dut_and_subscriber() {
        let mut s = crate::tables::tests::five_duts();
        assert!(!render(&s).contains("data-plot=\"bandwidth\""));
        let row = |sub: &str, svc: &str, start: u64, up: f64, drop: f64| crate::bandwidth::Row {
            dut: "inline-engine".into(),
            test: "t".into(),
            subscriber: sub.into(),
            service: svc.into(),
            start_ms: start,
            length_ms: 1000,
            up_bps: up,
            down_bps: 0.0,
            dropped_up_bps: drop,
            dropped_down_bps: 0.0,
        };
        s.bandwidth = vec![
            row("lab-a", "lab", 1000, 2e6, 0.0),
            row("lab-a", "lab", 2000, 4e6, 1e6),
            row("lab-a", "(all)", 1000, 2e6, 0.0),
            row("lab-b", "lab", 1000, 1e6, 0.0),
        ];
        let h = render(&s);
        assert_eq!(h.matches("data-plot=\"bandwidth\"").count(), 2);
        assert!(h.contains("data-subscriber=\"lab-a\""));
        // lab-a's `lab`: passed (two points) and dropped (dashed).
        assert_eq!(h.matches("data-service=\"lab\"").count(), 3);
        assert_eq!(h.matches("data-dropped=\"1\"").count(), 1);
    }

    #[test]
    fn sessions_plot_per_dut() {
        let mut s = crate::tables::tests::five_duts();
        assert!(!render(&s).contains("data-plot=\"sessions\""));
        let row = |dut: &str, svc: &str, start: u64, avg: f64, max: u64| crate::sessions::Row {
            dut: dut.into(),
            test: "t".into(),
            service: svc.into(),
            start_ms: start,
            length_ms: 1000,
            sessions_min: 0,
            sessions_avg: avg,
            sessions_max: max,
            up_bps: 0.0,
            down_bps: 0.0,
        };
        s.sessions = vec![
            row("engine-a", "lab", 1000, 250.0, 300),
            row("engine-a", "lab", 2000, 300.0, 300),
            row("engine-a", "web", 1000, 2.0, 3),
            row("engine-b", "lab", 5000, 10.0, 12),
        ];
        let h = render(&s);
        assert_eq!(h.matches("data-plot=\"sessions\"").count(), 2);
        assert!(h.contains("data-dut=\"engine-b\""));
        // Each service: the mean (solid) and the most (dashed).
        assert_eq!(h.matches("data-service=\"lab\"").count(), 4);
        assert_eq!(h.matches("data-max=\"1\"").count(), 3);
        assert!(h.contains("engine-a: concurrent sessions per service"));
    }

    #[test]
    fn html_report_renders_in_chromium_with_every_table_and_plot() {
        let mut s = crate::tables::tests::five_duts();
        s.compute_ceiling();
        s.references.push(Reference {
            test: "l2-throughput".into(),
            report: "top-of-rack switch".into(),
            table: "table 2".into(),
            figure: "64 B: 100% of line rate".into(),
            scale: "veth, 2 shared cores".into(),
            ..Default::default()
        });
        let html = s.html();
        if let Ok(p) = std::env::var("LAB_HTML_SAMPLE") {
            std::fs::write(p, &html).unwrap();
        }
        // Self-contained: nothing fetched.
        assert!(
            !html.contains("http://") || !html.contains("src="),
            "external reference"
        );
        assert!(!html.contains("<script"), "the report runs no script");
        let dir = std::env::temp_dir().join(format!("lab-html-test-{}", std::process::id()));
        let v = render_in_chromium(&html, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        let v = v.unwrap();
        assert_eq!(v["external"], 0);
        let tables = v["tables"].as_array().unwrap();
        let plots = v["plots"].as_array().unwrap();
        let shown =
            |b: &serde_json::Value| b[0].as_u64().unwrap() > 0 && b[1].as_u64().unwrap() > 0;
        // The DUT table and each test's results table, laid out, every row.
        let duts = tables.iter().find(|t| t["kind"] == "duts").unwrap();
        assert_eq!(duts["rows"], 6);
        assert!(shown(&duts["box"]));
        for (test, rows) in [
            ("l2-throughput", 15),
            ("mac-capacity-8192", 5),
            ("multicast-l2", 5),
            ("failover", 5),
        ] {
            let t = tables
                .iter()
                .find(|t| t["kind"] == "results" && t["test"] == test)
                .unwrap_or_else(|| panic!("no results table for {test}"));
            assert_eq!(t["rows"], rows + 1, "{test}");
            assert!(shown(&t["box"]), "{test} table not laid out: {t}");
            assert_eq!(t["visible"], true, "{test}");
            // The raw trials: present, collapsed (their table takes no space).
            let d = v["details"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["test"] == test)
                .unwrap();
            assert_eq!(d["open"], false);
            assert!(shown(&d["summary"]), "{test}: no trial-log summary line");
            assert_eq!(d["inner_visible"], false, "{test}: trial log not collapsed");
        }
        for (test, points) in [("l2-throughput", 15), ("multicast-l2", 3)] {
            assert!(
                tables
                    .iter()
                    .any(|t| t["kind"] == "ratios" && t["test"] == test),
                "ratios of {test}"
            );
            for plot in ["throughput", "latency"] {
                let p = plots
                    .iter()
                    .find(|p| p["plot"] == plot && p["test"] == test)
                    .unwrap_or_else(|| panic!("no {plot} plot for {test}"));
                assert!(shown(&p["box"]), "{test} {plot} not laid out");
                // A point per DUT and frame size with a figure.
                assert_eq!(p["marks"], points, "{test} {plot}: {p}");
            }
        }
        // Latency on a log axis: decade ticks from µs to beyond 10 ms (the
        // max is 98.8 ms), each a power of ten.
        let lat = plots
            .iter()
            .find(|p| p["plot"] == "latency" && p["test"] == "l2-throughput")
            .unwrap();
        let labels: Vec<&str> = lat["labels"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l.as_str())
            .collect();
        for tick in ["1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms"] {
            assert!(labels.contains(&tick), "{tick} in {labels:?}");
        }
        // 5 DUT lines (avg and p99) per latency plot of the 5-DUT test.
        assert_eq!(lat["lines"], 10);
        let text = v["text"].as_str().unwrap();
        for want in [
            "Test bed",
            "cores: 2",
            "version 1.2.3",
            "Plan",
            "name: quick",
            "64 B: 100% of line rate",
            "veth, 2 shared cores",
            "generator-limited",
            "raw trial log",
            "lanyard / ceiling",
        ] {
            assert!(text.contains(want), "{want:?} not on the rendered page");
        }
    }
}
