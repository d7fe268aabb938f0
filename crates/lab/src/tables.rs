//! Terminal tables that fit 100 columns whatever the number of DUTs: one
//! row per frame size and DUT, numbers right-aligned with the unit in the
//! header, every reason (`n/a`, failed) and remark given once as a numbered
//! footnote, wrapped, never cut.

use crate::plan::TestKind;
use crate::report::{ResultRow, Summary};
use std::fmt::Write as _;

/// Width the text output keeps to.
pub const WIDTH: usize = 100;

/// Column alignment.
#[derive(Clone, Copy, PartialEq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A plain table: header, rows, widths from the content (never cut).
pub struct Table {
    head: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub fn new(head: &[(&str, Align)]) -> Table {
        Table {
            head: head.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row (missing cells are empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Column headings and alignments.
    pub fn head(&self) -> &[(String, Align)] {
        &self.head
    }

    /// The rows' cells.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Render with two spaces between columns, trailing blanks trimmed.
    /// A table wider than [`WIDTH`] (very long names) is printed as one
    /// wrapped `column: value` block per row instead: nothing is cut.
    pub fn render(&self) -> String {
        let n = self.head.len();
        let mut w: Vec<usize> = self.head.iter().map(|(h, _)| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        if w.iter().sum::<usize>() + 2 * n.saturating_sub(1) > WIDTH {
            return self.render_stacked();
        }
        let mut o = String::new();
        let line = |cells: Vec<&str>, o: &mut String| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    l.push_str("  ");
                }
                let pad = w[i].saturating_sub(c.chars().count());
                if self.head[i].1 == Align::Right {
                    l.push_str(&" ".repeat(pad));
                    l.push_str(c);
                } else {
                    l.push_str(c);
                    l.push_str(&" ".repeat(pad));
                }
            }
            o.push_str(l.trim_end());
            o.push('\n');
        };
        line(self.head.iter().map(|(h, _)| h.as_str()).collect(), &mut o);
        let rule: Vec<String> = w.iter().map(|x| "-".repeat(*x)).collect();
        line(rule.iter().map(|s| s.as_str()).collect(), &mut o);
        for r in &self.rows {
            let cells: Vec<&str> = (0..n)
                .map(|i| r.get(i).map(|s| s.as_str()).unwrap_or(""))
                .collect();
            line(cells, &mut o);
        }
        o
    }
}

impl Table {
    fn render_stacked(&self) -> String {
        let mut o = String::new();
        for r in &self.rows {
            let parts: Vec<String> = self
                .head
                .iter()
                .zip(r.iter())
                .filter(|(_, c)| !c.is_empty())
                .map(|((h, _), c)| format!("{h}: {c};"))
                .collect();
            o.push_str(&wrap("- ", 2, &parts.join(" ")));
        }
        o
    }
}

/// Word-wrap `text` to [`WIDTH`]: the first line starts with `first`, the
/// others with `indent` spaces. A word longer than a line is split, not cut.
pub fn wrap(first: &str, indent: usize, text: &str) -> String {
    let mut o = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    let pad = " ".repeat(indent);
    for word in text.split_whitespace() {
        let mut word: String = word.to_string();
        loop {
            let len = line.chars().count();
            let wl = word.chars().count();
            let sep = usize::from(!empty);
            if len + sep + wl <= WIDTH {
                if !empty {
                    line.push(' ');
                }
                line.push_str(&word);
                empty = false;
                break;
            }
            if empty {
                // Alone on its line and still too long: split it.
                let room = WIDTH.saturating_sub(len).max(1);
                let head: String = word.chars().take(room).collect();
                line.push_str(&head);
                word = word.chars().skip(room).collect();
                o.push_str(&line);
                o.push('\n');
                line = pad.clone();
                if word.is_empty() {
                    break;
                }
                continue;
            }
            o.push_str(line.trim_end());
            o.push('\n');
            line = pad.clone();
            empty = true;
        }
    }
    if !empty || o.is_empty() {
        o.push_str(line.trim_end());
        o.push('\n');
    }
    o
}

/// Numbered remarks, each text once.
#[derive(Default)]
pub struct Notes {
    items: Vec<String>,
}

impl Notes {
    /// The mark of `text` (`[n]`), adding it if new.
    pub fn mark(&mut self, text: &str) -> String {
        let i = match self.items.iter().position(|t| t == text) {
            Some(i) => i,
            None => {
                self.items.push(text.to_string());
                self.items.len() - 1
            }
        };
        format!("[{}]", i + 1)
    }

    /// The footnotes, wrapped.
    pub fn render(&self) -> String {
        let mut o = String::new();
        for (i, t) in self.items.iter().enumerate() {
            let m = format!("[{}] ", i + 1);
            let ind = m.len();
            o.push_str(&wrap(&m, ind, t));
        }
        o
    }
}

/// `1234.5` → "1,234.5"-style grouping is not used: plain decimals with a
/// precision that suits the magnitude.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Microseconds from nanoseconds, for a latency column.
pub fn us(ns: u64) -> String {
    num(ns as f64 / 1e3)
}

fn kind_name(k: TestKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn verdict(p: Option<bool>) -> String {
    match p {
        Some(true) => "PASS".into(),
        Some(false) => "FAIL".into(),
        None => String::new(),
    }
}

/// Frame sizes of `rows`, in order of first appearance.
pub(crate) fn sizes<'a>(rows: &[&'a ResultRow]) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for r in rows {
        if !v.contains(&r.frame_size.as_str()) {
            v.push(&r.frame_size);
        }
    }
    v
}

/// Whether a test type reports a rate per frame size.
pub fn is_rate(k: TestKind) -> bool {
    matches!(
        k,
        TestKind::Throughput | TestKind::FullMesh | TestKind::Latency
    )
}

/// The status cell of a row that is not ok: `n/a [k]` / `failed [k]`.
fn status_cell(r: &ResultRow, notes: &mut Notes) -> String {
    let why = r.error.clone().unwrap_or_else(|| "no reason given".into());
    format!("{} {}", r.status, notes.mark(&why))
}

/// Why a rate row has no throughput: no trial passed; what the lowest
/// rate tried did (the table would otherwise show a bare 0).
fn none_passed(r: &ResultRow) -> Option<String> {
    if r.throughput_fps.is_some_and(|f| f > 0.0) || r.trials.is_empty() {
        return None;
    }
    let t = r
        .trials
        .iter()
        .filter(|t| t.target.is_some())
        .min_by(|a, b| a.target.unwrap_or(0.0).total_cmp(&b.target.unwrap_or(0.0)))
        .or(r.trials.last())?;
    let x = &t.result;
    Some(format!(
        "no trial passed; the lowest rate tried, {} fps per port, lost {} of {} frames, median latency {} µs \
         (a latency limit in the plan fails a trial above it)",
        t.target.map_or("unpaced".into(), |v| format!("{v:.0}")),
        x.lost,
        x.sent,
        us(x.latency.p50_ns)
    ))
}

/// Remarks of a row as marks (`[k]`); the same remark on several rows
/// is one footnote. "No loss at the generator's maximum" is what `*` says.
fn note_marks(r: &ResultRow, notes: &mut Notes) -> String {
    let none = if is_rate(r.kind) || r.kind == TestKind::Multicast {
        none_passed(r)
    } else {
        None
    };
    r.notes
        .iter()
        .filter(|n| !(r.generator_limited && n.starts_with("no loss at the generator's maximum")))
        .chain(none.as_ref())
        .map(|n| notes.mark(n))
        .collect::<Vec<_>>()
        .join("")
}

/// The whole text report (see the module doc).
impl Summary {
    /// Text tables in the reports' form, within 100 columns for any
    /// number of DUTs.
    pub fn tables(&self) -> String {
        render(self)
    }
}

pub fn render(s: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "plan {}  ({:.0} s)", s.plan, s.seconds);
    let nw = s
        .duts
        .iter()
        .map(|d| d.name.chars().count())
        .max()
        .unwrap_or(0);
    let dw = s.duts.iter().map(|d| d.driver.len()).max().unwrap_or(0);
    for d in &s.duts {
        let head = format!("  {:<nw$}  {:<dw$}  {} ", d.name, d.driver, d.status);
        let text = match &d.error {
            Some(e) => format!("- {e}"),
            None => d.info.join("; "),
        };
        o.push_str(&wrap(&head, 6, &text));
    }
    for t in &s.testbed {
        o.push_str(&wrap("  test bed: ", 12, t));
    }
    let mut tests: Vec<(String, TestKind)> = Vec::new();
    for r in &s.results {
        if !tests.iter().any(|(t, _)| *t == r.test) {
            tests.push((r.test.clone(), r.kind));
        }
    }
    for (test, kind) in tests {
        let rows: Vec<&ResultRow> = s.results.iter().filter(|r| r.test == test).collect();
        let _ = writeln!(o, "\n== {test} ({}) ==", kind_name(kind));
        if let Some(r) = s.references.iter().find(|r| r.test == test) {
            o.push_str(&wrap(
                "report: ",
                8,
                &format!("{} {}: {}", r.report, r.table, r.figure),
            ));
            o.push_str(&wrap("scale: ", 8, &r.scale));
        }
        o.push_str(&test_table(s, &rows, kind));
    }
    if !s.sessions.is_empty() {
        // Inline engines: the most concurrent sessions per service over
        // the run (every interval in sessions.csv).
        let _ = writeln!(o, "\n== concurrent sessions per service (inline engine) ==");
        let mut t = Table::new(&[
            ("DUT", Align::Left),
            ("service", Align::Left),
            ("most sessions", Align::Right),
            ("intervals", Align::Right),
        ]);
        for (dut, service, max) in crate::sessions::peaks(&s.sessions) {
            let n = s
                .sessions
                .iter()
                .filter(|r| r.dut == dut && r.service == service)
                .count();
            t.row(vec![dut, service, max.to_string(), n.to_string()]);
        }
        o.push_str(&t.render());
    }
    o
}

/// One test: its table, ratios (rate tests), detail lines and footnotes.
pub fn test_parts(s: &Summary, rows: &[&ResultRow], kind: TestKind) -> TestParts {
    let mut legend: Vec<String> = Vec::new();
    let mut notes = Notes::default();
    let mut starred = false;
    let sz = sizes(rows);
    // Plan order of the DUTs, then any others found in the rows.
    let mut duts: Vec<&str> = s.duts.iter().map(|d| d.name.as_str()).collect();
    for r in rows {
        if !duts.contains(&r.dut.as_str()) {
            duts.push(&r.dut);
        }
    }
    let ordered = || {
        sz.iter().flat_map(|f| {
            duts.iter().filter_map(move |d| {
                rows.iter()
                    .find(|r| r.frame_size == *f && r.dut == *d)
                    .copied()
            })
        })
    };
    use Align::{Left as L, Right as R};
    let mut first_of_size = String::new();
    // The frame column is printed once per size.
    let mut frame = |r: &ResultRow| {
        if r.frame_size == first_of_size {
            String::new()
        } else {
            first_of_size = r.frame_size.clone();
            r.frame_size.clone()
        }
    };
    let table = match kind {
        k if is_rate(k) => {
            let mut t = Table::new(&[
                ("frame", R),
                ("DUT", L),
                ("kfps", R),
                ("%ceil", R),
                ("Mbit/s", R),
                ("loss %", R),
                ("lat min", R),
                ("avg", R),
                ("p99", R),
                ("max", R),
                ("notes", L),
            ]);
            legend.push(String::from(
                "kfps = zero-loss throughput, thousands of frames/s over all sending ports; \
                 %ceil = of the ceiling (wire) in this run; Mbit/s at layer 2; \
                 latency in µs at that rate",
            ));
            for r in ordered() {
                let f = frame(r);
                if r.status != "ok" {
                    t.row(vec![f, r.dut.clone(), status_cell(r, &mut notes)]);
                    continue;
                }
                let star = if r.generator_limited {
                    starred = true;
                    "*"
                } else {
                    ""
                };
                let lat = r.latency.filter(|l| l.samples > 0);
                t.row(vec![
                    f,
                    r.dut.clone(),
                    r.throughput_fps
                        .map(|x| format!("{}{star}", num(x / 1e3)))
                        .unwrap_or_default(),
                    r.pct_ceiling.map(|p| format!("{p:.0}")).unwrap_or_default(),
                    r.l2_mbps.map(num).unwrap_or_default(),
                    r.loss_ratio
                        .map(|l| format!("{:.3}", l * 100.0))
                        .unwrap_or_default(),
                    lat.map(|l| us(l.min_ns)).unwrap_or_default(),
                    lat.map(|l| us(l.avg_ns)).unwrap_or_default(),
                    lat.map(|l| us(l.p99_ns)).unwrap_or_default(),
                    lat.map(|l| us(l.max_ns)).unwrap_or_default(),
                    note_marks(r, &mut notes),
                ]);
            }
            t
        }
        TestKind::Multicast => {
            if let Some(m) = rows.iter().find_map(|r| r.detail.get("multicast")) {
                legend.push(format!(
                        "{} source(s) -> {} receivers, {} group(s), {} receivers/group, IGMPv{} {}, layer {}",
                        m["sources"], m["receivers"], m["groups"], m["receivers_per_group"],
                        m["igmp_version"], m["filter_mode"].as_str().unwrap_or(""), m["layer"]
                    ));
            }
            legend.push(String::from(
                "kfps offered by the sources; % LR = of the sources' line rate; \
                 PASS = no frame leaked or duplicated",
            ));
            let mut t = Table::new(&[
                ("frame", R),
                ("DUT", L),
                ("result", L),
                ("kfps", R),
                ("% LR", R),
                ("delivered kfps", R),
                ("lat avg µs", R),
                ("p99", R),
                ("notes", L),
            ]);
            for r in ordered() {
                let f = frame(r);
                if r.status != "ok" {
                    t.row(vec![f, r.dut.clone(), status_cell(r, &mut notes)]);
                    continue;
                }
                let star = if r.generator_limited {
                    starred = true;
                    "*"
                } else {
                    ""
                };
                let lat = r.latency.filter(|l| l.samples > 0);
                t.row(vec![
                    f,
                    r.dut.clone(),
                    verdict(r.pass),
                    r.throughput_fps
                        .map(|x| format!("{}{star}", num(x / 1e3)))
                        .unwrap_or_default(),
                    r.detail["pct_line_rate"]
                        .as_f64()
                        .map(|p| format!("{p:.1}"))
                        .unwrap_or_default(),
                    r.detail["replicated_fps"]
                        .as_f64()
                        .map(|x| num(x / 1e3))
                        .unwrap_or_default(),
                    lat.map(|l| us(l.avg_ns)).unwrap_or_default(),
                    lat.map(|l| us(l.p99_ns)).unwrap_or_default(),
                    note_marks(r, &mut notes),
                ]);
            }
            t
        }
        TestKind::BandwidthShare => {
            // One frame size per test: named here, not in a column (the
            // light column needs the room).
            legend.push(format!(
                "{}-byte frames; one row per service and direction (up = from the subscribers): the controller's \
                 limit and the total received (Mbit/s) after the settle time and its error, each subscriber's \
                 share of the total in % (ideal: its weighted max-min share — 10:5:1 = 62.5/31.3/6.3 % \
                 when everyone offers more than its share); light = subscribers offering less than their \
                 share, each one's share in %; PASS = every share within 5 % of its ideal, the total \
                 within 2 % of the limit and each light subscriber's rate within 2 % of its offer",
                sz.join("/")
            ));
            let light = rows.iter().any(|r| {
                r.detail["bandwidth_share"]["subscribers"]
                    .as_array()
                    .is_some_and(|a| a.len() > 3)
            });
            let mut head = vec![
                ("DUT", L),
                ("svc", L),
                ("result", L),
                ("limit", R),
                ("total", R),
                ("err %", R),
                ("gold", R),
                ("silver", R),
                ("bronze", R),
                ("notes", L),
            ];
            if light {
                head.insert(head.len() - 1, ("light", R));
            }
            let mut t = Table::new(&head);
            for r in ordered() {
                if r.status != "ok" {
                    t.row(vec![
                        r.dut.clone(),
                        String::new(),
                        status_cell(r, &mut notes),
                    ]);
                    continue;
                }
                let shares = r.detail["bandwidth_share"]["shares"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let marks = note_marks(r, &mut notes);
                for (k, sh) in shares.iter().enumerate() {
                    let g = |key: &str| sh[key].as_f64().unwrap_or(0.0);
                    let pct =
                        |j: usize| format!("{:.1}", sh["share"][j].as_f64().unwrap_or(0.0) * 100.0);
                    let n = sh["share"].as_array().map_or(3, |a| a.len());
                    let lights = (3..n).map(pct).collect::<Vec<_>>().join("/");
                    let mut cells = vec![
                        r.dut.clone(),
                        format!(
                            "{} {}",
                            sh["service"].as_str().unwrap_or("?"),
                            sh["dir"].as_str().unwrap_or("?")
                        ),
                        verdict(sh["pass"].as_bool()),
                        format!("{:.3}", g("limit_bps") / 1e6),
                        format!("{:.3}", g("total_bps") / 1e6),
                        format!("{:+.2}", g("total_error") * 100.0),
                        pct(0),
                        pct(1),
                        pct(2),
                    ];
                    if light {
                        cells.push(lights);
                    }
                    cells.push(if k == 0 { marks.clone() } else { String::new() });
                    t.row(cells);
                }
            }
            t
        }
        TestKind::Copp => {
            legend.push(String::from(
                "flood kfps = multicast to 224.0.0.1 offered on port 1 (the generator's maximum \
                 unless the plan sets a rate); ping = echo requests to the DUT's address on the same port during the flood, lost / sent; \
                 PASS = every ping answered",
            ));
            let mut t = Table::new(&[
                ("frame", R),
                ("DUT", L),
                ("result", L),
                ("flood kfps", R),
                ("ping lost", R),
                ("rtt avg ms", R),
                ("rtt max ms", R),
                ("notes", L),
            ]);
            for r in ordered() {
                let f = frame(r);
                if r.status != "ok" {
                    t.row(vec![f, r.dut.clone(), status_cell(r, &mut notes)]);
                    continue;
                }
                let star = if r.generator_limited {
                    starred = true;
                    "*"
                } else {
                    ""
                };
                let p = &r.detail["copp"]["ping"];
                let ms = |k: &str| {
                    p["rtt_ms"][k]
                        .as_f64()
                        .map(|x| format!("{x:.2}"))
                        .unwrap_or_default()
                };
                t.row(vec![
                    f,
                    r.dut.clone(),
                    verdict(r.pass),
                    r.throughput_fps
                        .map(|x| format!("{}{star}", num(x / 1e3)))
                        .unwrap_or_default(),
                    match (p["lost"].as_u64(), p["sent"].as_u64()) {
                        (Some(l), Some(s)) => format!("{l} / {s}"),
                        _ => String::new(),
                    },
                    ms("avg"),
                    ms("max"),
                    note_marks(r, &mut notes),
                ]);
            }
            t
        }
        TestKind::Subscribers => {
            legend.push(String::from(
                "subscribers provisioned in one streamed bulk load (lanyard subscribers load): \
                 load s and k/s on the lab's clock; gold/silver/bronze = growth of the DUT's \
                 per-package counts; RSS = the daemon's resident memory after the load (MiB) and \
                 its growth per subscriber (bytes); sampled = subscribers spread over the table \
                 whose counters equal what the tester sent them; PASS = every count exact",
            ));
            let mut t = Table::new(&[
                ("DUT", L),
                ("result", L),
                ("subscr.", R),
                ("load s", R),
                ("k/s", R),
                ("gold", R),
                ("silver", R),
                ("bronze", R),
                ("RSS", R),
                ("B/sub", R),
                ("sampled", R),
                ("notes", L),
            ]);
            for r in ordered() {
                if r.status != "ok" {
                    t.row(vec![r.dut.clone(), status_cell(r, &mut notes)]);
                    continue;
                }
                let v = &r.detail["subscribers"];
                let g = |k: &str| v[k].as_f64().unwrap_or(0.0);
                t.row(vec![
                    r.dut.clone(),
                    verdict(r.pass),
                    format!("{:.0}", g("subscribers")),
                    format!("{:.2}", g("load_s")),
                    format!("{:.0}", g("per_s") / 1e3),
                    v["packages"][0].to_string(),
                    v["packages"][1].to_string(),
                    v["packages"][2].to_string(),
                    format!("{:.0}", g("rss_after_kib") / 1024.0),
                    format!("{:.0}", g("bytes_per_subscriber")),
                    format!("{:.0}/{:.0}", g("matched"), g("sample")),
                    note_marks(r, &mut notes),
                ]);
            }
            t
        }
        TestKind::Convergence => {
            let goal = rows
                .iter()
                .find_map(|r| r.detail["goal_ms"].as_f64())
                .unwrap_or(1.0);
            legend.push(format!(
                "convergence = lost frames / offered rate, over the trials; goal < {goal} ms"
            ));
            let mut t = Table::new(&[
                ("frame", R),
                ("DUT", L),
                ("result", L),
                ("min ms", R),
                ("avg ms", R),
                ("max ms", R),
                ("notes", L),
            ]);
            for r in ordered() {
                let f = frame(r);
                if r.status != "ok" {
                    t.row(vec![f, r.dut.clone(), status_cell(r, &mut notes)]);
                    continue;
                }
                let c = &r.detail["convergence_ms"];
                let g = |k: &str| c[k].as_f64().map(|x| format!("{x:.3}")).unwrap_or_default();
                t.row(vec![
                    f,
                    r.dut.clone(),
                    verdict(r.pass),
                    g("min"),
                    g("avg"),
                    g("max"),
                    note_marks(r, &mut notes),
                ]);
            }
            t
        }
        _ => {
            let mut t = Table::new(&[
                ("frame", R),
                ("DUT", L),
                ("result", L),
                ("value", R),
                ("unit", L),
                ("notes", L),
            ]);
            for r in ordered() {
                let f = frame(r);
                if r.status != "ok" {
                    t.row(vec![f, r.dut.clone(), status_cell(r, &mut notes)]);
                    continue;
                }
                // A disruption test's value is frames lost at a fixed rate,
                // not a rate the generator capped: it says so in a note.
                let star = if r.generator_limited && kind != TestKind::Disruption {
                    starred = true;
                    "*"
                } else {
                    ""
                };
                t.row(vec![
                    f,
                    r.dut.clone(),
                    verdict(r.pass),
                    r.value
                        .or(r.throughput_fps)
                        .map(|v| format!("{}{star}", num(v)))
                        .unwrap_or_default(),
                    r.unit.clone().unwrap_or_else(|| {
                        if r.throughput_fps.is_some() {
                            "frames/s".into()
                        } else {
                            String::new()
                        }
                    }),
                    note_marks(r, &mut notes),
                ]);
            }
            t
        }
    };
    let mut details = Vec::new();
    for r in ordered().filter(|r| r.status == "ok") {
        let line = match kind {
            TestKind::Multicast => super::report::mc_line(r),
            TestKind::Convergence => super::report::conv_line(r),
            TestKind::Copp => crate::copp::line(&r.detail["copp"]),
            TestKind::Subscribers => crate::subscale::line(&r.detail["subscribers"]),
            TestKind::Disruption => crate::disruption::line(&r.detail["disruption"]),
            TestKind::Throughput if r.detail.get("mirror").is_some() => {
                crate::mirror::line(&r.detail["mirror"])
            }
            _ => continue,
        };
        details.push((format!("{:>5} {}", r.frame_size, r.dut), line));
    }
    let streams = if kind == TestKind::Disruption {
        let test = rows.first().map(|r| r.test.as_str()).unwrap_or("");
        let reference = s.references.iter().find(|r| r.test == test);
        // Many streams (one per VLAN / pseudowire): their spread per DUT.
        spread_table(rows, reference).or_else(|| stream_table(rows, reference))
    } else {
        None
    };
    let ratios = if matches!(
        kind,
        TestKind::Throughput | TestKind::FullMesh | TestKind::Multicast
    ) {
        Some(ratio_table(rows, &duts, &sz)).filter(|t| !t.is_empty())
    } else {
        None
    };
    let mut footnotes = Vec::new();
    if starred {
        footnotes.push(("*".to_string(), STAR.to_string()));
    }
    footnotes.extend(
        notes
            .items
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("[{}]", i + 1), t.clone())),
    );
    TestParts {
        legend,
        table,
        details,
        streams,
        ratios,
        footnotes,
    }
}

/// Text of one test.
fn test_table(s: &Summary, rows: &[&ResultRow], kind: TestKind) -> String {
    let p = test_parts(s, rows, kind);
    let mut o = String::new();
    for l in &p.legend {
        o.push_str(&wrap("", 0, l));
    }
    o.push_str(&p.table.render());
    for (label, line) in &p.details {
        o.push_str(&wrap(&format!("  {label}: "), 8, line));
    }
    if let Some((t, legend)) = &p.streams {
        o.push_str(&wrap("", 0, legend));
        o.push_str(&t.render());
    }
    if let Some(r) = &p.ratios {
        o.push_str(RATIOS);
        o.push('\n');
        o.push_str(&r.render());
    }
    for (m, t) in &p.footnotes {
        let first = format!("{m} ");
        o.push_str(&wrap(&first, first.len(), t));
    }
    o
}

/// Heading of the ratio table.
pub const RATIOS: &str = "throughput ratios B / A by frame size (pairs where both have a figure)";

/// What `*` means.
pub const STAR: &str = "generator-limited: no loss at the generator's maximum, so the DUT is at least this fast (the tester, not the DUT, set the figure)";

/// The pieces of one test's report, for the text and the HTML forms.
pub struct TestParts {
    /// Lines saying what the columns mean.
    pub legend: Vec<String>,
    /// One row per frame size and DUT.
    pub table: Table,
    /// (frame DUT, line) details of multicast and convergence rows.
    pub details: Vec<(String, String)>,
    /// Disruption tests with tiers: outage per stream and design over the
    /// trials, and its legend.
    pub streams: Option<(Table, String)>,
    /// Throughput ratios between DUTs, if any exist.
    pub ratios: Option<Table>,
    /// (mark, text): `*` and numbered reasons and remarks.
    pub footnotes: Vec<(String, String)>,
}

/// `B/A` for every pair of DUTs (plan order) where both have a throughput:
/// one row per pair, one column per frame size; pairs without any ratio
/// are left out.
fn ratio_table(rows: &[&ResultRow], duts: &[&str], sizes: &[&str]) -> Table {
    use Align::{Left as L, Right as R};
    let mut head: Vec<(&str, Align)> = vec![("B / A", L)];
    head.extend(sizes.iter().map(|s| (*s, R)));
    let mut t = Table::new(&head);
    let f = |d: &str, s: &str| {
        rows.iter()
            .find(|r| r.dut == d && r.frame_size == s && r.status == "ok")
            .and_then(|r| r.throughput_fps)
            .filter(|x| *x > 0.0)
    };
    for (i, a) in duts.iter().enumerate() {
        for b in &duts[i + 1..] {
            let cells: Vec<String> = sizes
                .iter()
                .map(|s| match (f(a, s), f(b, s)) {
                    (Some(x), Some(y)) => format!("{:.2}", y / x),
                    _ => String::new(),
                })
                .collect();
            if cells.iter().any(|c| !c.is_empty()) {
                let mut row = vec![format!("{b} / {a}")];
                row.extend(cells);
                t.row(row);
            }
        }
    }
    t
}

/// The per-DUT spread of a disruption test with one stream per VLAN
/// (`vlans: N`; on a VLAN-circuit PE one stream per pseudowire): one row
/// per DUT (and frame size when there are several), outage min/avg/max
/// over every stream of every trial, the worst stream and its trial,
/// frames duplicated, and the report's figure for that DUT
/// (`reference.duts`). None when no row has one. Plus the legend line.
pub fn spread_table(
    rows: &[&ResultRow],
    reference: Option<&crate::plan::Reference>,
) -> Option<(Table, String)> {
    let with: Vec<(&ResultRow, &serde_json::Value)> = rows
        .iter()
        .map(|r| (*r, &r.detail["disruption"]["per_stream"]))
        .filter(|(_, p)| p.is_object())
        .collect();
    if with.is_empty() {
        return None;
    }
    use Align::{Left as L, Right as R};
    let mut t = Table::new(&[
        ("design", L),
        ("streams", R),
        ("trials", R),
        ("min ms", R),
        ("avg ms", R),
        ("max ms", R),
        ("worst", L),
        ("dup", R),
        ("report", L),
    ]);
    let multi_size = with
        .iter()
        .any(|(r, _)| r.frame_size != with[0].0.frame_size);
    for (r, p) in with {
        let ms = |k: &str| {
            p["outage_ms"][k]
                .as_f64()
                .map(|x| format!("{x:.1}"))
                .unwrap_or_default()
        };
        let design = if multi_size {
            format!("{} {}", r.dut, r.frame_size)
        } else {
            r.dut.clone()
        };
        t.row(vec![
            design,
            p["streams"].to_string(),
            p["trials"].to_string(),
            ms("min"),
            ms("avg"),
            ms("max"),
            format!(
                "{} t{}",
                p["worst"][0].as_str().unwrap_or("?"),
                p["worst"][1]
            ),
            p["duplicated"].to_string(),
            reference
                .and_then(|x| x.duts.get(&r.dut))
                .cloned()
                .unwrap_or_default(),
        ]);
    }
    let legend = "one stream per VLAN (a pseudowire each on VLAN circuits): outage = its lost \
                  frames / its offered rate; min/avg/max over every stream of every trial; worst \
                  = that stream and its trial; dup = frames delivered twice; report = the \
                  report's figure"
        .to_string();
    Some((t, legend))
}

/// The report's per-stream table of a tiers test (None when no row has
/// streams): one row per stream and design (DUT), outage min/avg/max in
/// ms over the trials, frames duplicated, and the report's figure for
/// the design (`reference.duts`). Plus the legend line.
pub fn stream_table(
    rows: &[&ResultRow],
    reference: Option<&crate::plan::Reference>,
) -> Option<(Table, String)> {
    let with: Vec<(&ResultRow, &Vec<serde_json::Value>)> = rows
        .iter()
        .filter_map(|r| Some((*r, r.detail["disruption"]["streams"].as_array()?)))
        .filter(|(_, s)| !s.is_empty())
        .collect();
    if with.is_empty() {
        return None;
    }
    use Align::{Left as L, Right as R};
    let mut t = Table::new(&[
        ("stream", L),
        ("design", L),
        ("trials", R),
        ("min ms", R),
        ("avg ms", R),
        ("max ms", R),
        ("dup", R),
        ("report", L),
    ]);
    let mut names: Vec<&str> = Vec::new();
    for (_, ss) in &with {
        for s in ss.iter() {
            if let Some(n) = s["stream"].as_str().filter(|n| !names.contains(n)) {
                names.push(n);
            }
        }
    }
    let multi_size = with
        .iter()
        .any(|(r, _)| r.frame_size != with[0].0.frame_size);
    for n in names {
        for (r, ss) in &with {
            let Some(s) = ss.iter().find(|s| s["stream"] == n) else {
                continue;
            };
            let ms = |k: &str| {
                s["outage_ms"][k]
                    .as_f64()
                    .map(|x| format!("{x:.1}"))
                    .unwrap_or_default()
            };
            let design = if multi_size {
                format!("{} {}", r.dut, r.frame_size)
            } else {
                r.dut.clone()
            };
            t.row(vec![
                n.to_string(),
                design,
                s["trials"].to_string(),
                ms("min"),
                ms("avg"),
                ms("max"),
                s["duplicated"].to_string(),
                reference
                    .and_then(|x| x.duts.get(&r.dut))
                    .cloned()
                    .unwrap_or_default(),
            ]);
        }
    }
    let legend = "per stream: outage = its lost frames / its offered rate, min/avg/max over the \
                  trials; dup = its frames delivered twice, all trials; acc = access-tier tester \
                  port, core = core-tier; report = the report's figure for that design"
        .to_string();
    Some((t, legend))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hist::LatencyStats;
    use crate::report::{DutRecord, ResultRow, Summary, TrialRecord, SCHEMA};

    const LONG: &str = "n/a: not run on this DUT (the test's duts list names other DUTs, so this one reports nothing for this test at all)";

    /// A run of the quick plan's shape with 5 DUTs, long names and notes.
    pub(crate) fn five_duts() -> Summary {
        let names = [
            ("ceiling", "wire"),
            ("linux-bridge", "linux-bridge"),
            ("ovs", "ovs"),
            ("lanyard", "lanyard"),
            ("lanyard-services", "lanyard"),
        ];
        let mut results = Vec::new();
        for (ti, (test, kind)) in [
            ("l2-throughput", TestKind::Throughput),
            ("mac-capacity-8192", TestKind::AddressCapacity),
            ("multicast-l2", TestKind::Multicast),
            ("failover", TestKind::Convergence),
        ]
        .into_iter()
        .enumerate()
        {
            let sizes: &[&str] = match kind {
                TestKind::Throughput => &["64", "512", "1518"],
                TestKind::AddressCapacity => &["-"],
                _ => &["64"],
            };
            for s in sizes {
                for (di, (d, _)) in names.iter().enumerate() {
                    let avg = s.parse().unwrap_or(64.0);
                    let mut r = ResultRow::new(test, kind, d, s, avg);
                    if di == 4 && ti > 0 {
                        r.status = "n/a".into();
                        r.error = Some(LONG.into());
                    } else if di == 2 && ti == 2 {
                        r.status = "failed".into();
                        r.error = Some(format!("DUT: {} {}", "x".repeat(130), "the end"));
                    } else {
                        r.throughput_fps = Some(654_321.0 / (di as f64 + 1.0) * 10.0);
                        r.l2_mbps = Some(9876.5);
                        r.loss_ratio = Some(0.0);
                        r.generator_limited = di == 1;
                        r.latency = Some(LatencyStats {
                            samples: 10,
                            min_ns: 4_000,
                            avg_ns: 12_345 * (di as u64 + 1),
                            max_ns: 98_765_432,
                            p50_ns: 10_000,
                            p99_ns: 1_234_567,
                            p999_ns: 2_000_000,
                        });
                        r.pass = Some(di != 3);
                        r.value = Some(8192.0);
                        r.unit = Some("addresses".into());
                        r.detail = serde_json::json!({
                            "convergence_ms": {"min": 0.5, "avg": 12.25, "max": 336.125},
                            "pct_line_rate": 42.5, "replicated_fps": 1_234_567.0,
                            "multicast": {"sources": 1, "receivers": 4, "groups": 4,
                                "receivers_per_group": 2, "igmp_version": 3,
                                "filter_mode": "include", "layer": 2},
                        });
                        r.notes.push(format!(
                            "lanyard punted {} frames; drops: sw1 {{\"rx-ring-full\": 12345}}, a long remark that goes on well past one line of the terminal",
                            di * 1000
                        ));
                        r.notes.push("the same remark on every row".into());
                        r.trials.push(TrialRecord::new(
                            "search",
                            Some(1000.0),
                            &Default::default(),
                            true,
                        ));
                    }
                    results.push(r);
                }
            }
        }
        Summary {
            schema: SCHEMA.into(),
            plan: "quick".into(),
            started_unix: 1,
            seconds: 123.0,
            out_dir: None,
            testbed: vec!["cores: 2; a long test-bed remark that names the CPU plan, the kernel and the generator and goes past the edge".into()],
            duts: names
                .iter()
                .map(|(n, d)| DutRecord {
                    name: n.to_string(),
                    driver: d.to_string(),
                    status: "ok".into(),
                    error: None,
                    info: vec!["version 1.2.3 with a configuration note long enough to need wrapping on a terminal of one hundred columns".into()],
                })
                .collect(),
            results,
            plan_text: Some("name: quick\nduts: [{name: ceiling, driver: wire}]\n".into()),
            references: vec![],
            bandwidth: vec![],
            sessions: vec![],
        }
    }

    fn squash(s: &str) -> String {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn five_duts_fit_100_columns_and_nothing_is_cut() {
        let mut s = five_duts();
        s.compute_ceiling();
        let t = s.tables();
        for l in t.lines() {
            assert!(
                l.chars().count() <= WIDTH,
                "{} columns: {l}\n{t}",
                l.chars().count()
            );
        }
        // Every reason, note and figure is there in full (wrapping only
        // moves words to the next line; a word longer than a line is split
        // across lines, so compare without line breaks too).
        let flat = squash(&t);
        let joined: String = t.lines().map(str::trim).collect();
        assert!(flat.contains(&squash(LONG)), "{t}");
        // Given once per test (3 tests have the n/a DUT), never per cell.
        assert_eq!(
            flat.matches(&squash(LONG)).count(),
            3,
            "reason once per test: {t}"
        );
        assert!(
            t.lines().any(|l| l.contains("lanyard-services")
                && l.trim_end().ends_with(']')
                && l.contains(" n/a [")),
            "{t}"
        );
        assert!(joined.contains(&"x".repeat(130)), "{t}");
        assert!(flat.contains("a long remark that goes on well past one line of the terminal"));
        // The same remark on several rows is one footnote.
        assert_eq!(
            t.matches("the same remark on every row").count(),
            t.matches("\n== ").count(),
            "{t}"
        );
        assert!(flat.contains("version 1.2.3 with a configuration note long enough"));
        // Rows per frame size and DUT: every DUT's 64-byte throughput.
        for (d, v) in [("ceiling", "6543"), ("lanyard", "1636")] {
            assert!(
                t.lines().any(|l| l.contains(d) && l.contains(v)),
                "{d} {v}\n{t}"
            );
        }
        // `*` explained once, in a footnote.
        let tests = t.matches("\n== ").count();
        assert!(t.matches("* generator-limited").count() <= tests, "{t}");
        assert!(t.contains("3272*"), "{t}");
        // Only ratios that exist: 4 DUTs with a throughput = 6 pairs per size.
        assert!(t.contains("lanyard / ceiling"), "{t}");
        let mc = &t[t.find("== multicast-l2").unwrap()..t.find("== failover").unwrap()];
        assert!(mc.contains("lanyard / linux-bridge"), "{mc}");
        assert!(!mc.contains("ovs /") && !mc.contains("/ ovs"), "{mc}");
        assert!(!mc.contains("lanyard-services /"), "{mc}");
        // Latency max in µs, right-aligned under its header.
        assert!(t.contains("98765"), "{t}");
        assert!(t.contains("goal < 1 ms") && t.contains("% LR"), "{t}");
    }

    #[test]
    fn inline_sessions_peak_per_dut_and_service() {
        let mut s = five_duts();
        assert!(!s.tables().contains("concurrent sessions"));
        let v = serde_json::json!({"intervals": [
            {"start-ms": 1000, "length-ms": 1000, "services": [
                {"name": "lab", "sessions-min": 1, "sessions-avg": 200.0, "sessions-max": 300}]},
            {"start-ms": 2000, "length-ms": 1000, "services": [
                {"name": "lab", "sessions-min": 290, "sessions-avg": 295.0, "sessions-max": 299}]}]});
        crate::sessions::merge(&mut s.sessions, "inline-engine", "t", &v);
        let t = s.tables();
        let tail = t
            .split("== concurrent sessions per service")
            .nth(1)
            .unwrap();
        let line = tail.lines().find(|l| l.contains("inline-engine")).unwrap();
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells, ["inline-engine", "lab", "300", "2"], "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= 100));
    }

    #[test]
    fn zero_throughput_is_explained() {
        let mut s = five_duts();
        let r = &mut s.results[2];
        r.throughput_fps = Some(0.0);
        r.trials[0].result.sent = 7624;
        r.trials[0].result.latency.p50_ns = 20_447_000;
        let t = s.tables();
        assert!(
            squash(&t).contains("no trial passed; the lowest rate tried, 1000 fps per port, lost 0 of 7624 frames, median latency 20447 µs"),
            "{t}"
        );
    }

    #[test]
    fn wrap_never_cuts() {
        let w = wrap("[1] ", 4, &format!("a {} b", "y".repeat(250)));
        assert!(w.lines().all(|l| l.chars().count() <= WIDTH), "{w}");
        assert_eq!(w.matches('y').count(), 250);
        let mut t = Table::new(&[("a", Align::Left), ("b", Align::Right)]);
        t.row(vec!["z".repeat(120), "1".into()]);
        let r = t.render();
        assert!(r.lines().all(|l| l.chars().count() <= WIDTH), "{r}");
        assert_eq!(r.matches('z').count(), 120);
    }
}
