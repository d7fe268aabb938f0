//! Runs compared: per-cell figures of one or more result directories
//! (`--repeat N` runs: min / median / max over the repeats), and the ratio
//! of two of them (`lab compare RUN_A RUN_B`) with each side's spread, so
//! noise is visible next to the change.

use crate::tables::{num, wrap, Align, Table};
use crate::LabError;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One figure of a cell over the repeats.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Spread {
    /// Values, one per run, in run order.
    pub values: Vec<f64>,
    /// Smallest.
    pub min: f64,
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// From the values (at least one).
    pub fn of(values: Vec<f64>) -> Spread {
        let mut v = values.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            min: v.first().copied().unwrap_or(f64::NAN),
            max: v.last().copied().unwrap_or(f64::NAN),
            median,
            values,
        }
    }

    /// (max − min) / median in %, if there are several values.
    pub fn pct(&self) -> Option<f64> {
        (self.values.len() > 1 && self.median != 0.0)
            .then(|| (self.max - self.min) / self.median.abs() * 100.0)
    }
}

/// One (test, DUT, frame size) over the runs of a directory.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Test name.
    pub test: String,
    /// DUT name.
    pub dut: String,
    /// Frame size label.
    pub frame_size: String,
    /// What the main figure is ("throughput", or the test's unit).
    pub metric: String,
    /// Its unit (kfps, ms, addresses, ...).
    pub unit: String,
    /// The main figure per run.
    pub value: Spread,
    /// Average latency in µs per run, where measured.
    pub latency_avg_us: Option<Spread>,
    /// Runs where this cell was not ok (failed / n/a) are left out; their count.
    pub missing: usize,
}

/// The `report.json` files of a result directory: its own, or those of its
/// `run-*` subdirectories (a `--repeat` run), in order.
pub fn reports_in(dir: &Path) -> Result<Vec<(PathBuf, serde_json::Value)>, LabError> {
    let err = |m: String| LabError::Output(format!("{}: {m}", dir.display()));
    let mut files = Vec::new();
    if dir.is_file() {
        files.push(dir.to_path_buf());
    } else if dir.join("report.json").is_file() {
        files.push(dir.join("report.json"));
    } else {
        let rd = std::fs::read_dir(dir).map_err(|e| err(e.to_string()))?;
        let mut subs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("run-"))
                    && p.join("report.json").is_file()
            })
            .collect();
        // run-2 before run-10.
        subs.sort_by_key(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n[4..].parse::<u64>().ok())
                .unwrap_or(u64::MAX)
        });
        files.extend(subs.into_iter().map(|p| p.join("report.json")));
    }
    if files.is_empty() {
        return Err(err("no report.json (nor run-*/report.json) here".into()));
    }
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f)
                .map_err(|e| LabError::Output(format!("{}: {e}", f.display())))?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| LabError::Output(format!("{}: {e}", f.display())))?;
            crate::report::validate_json(&v)
                .map_err(|e| LabError::Output(format!("{}: {e}", f.display())))?;
            Ok((f, v))
        })
        .collect()
}

/// The main figure of a result row: (metric, unit, value).
fn figure(r: &serde_json::Value) -> Option<(String, String, f64)> {
    let kind = r["kind"].as_str().unwrap_or("");
    if let Some(f) = r["throughput_fps"].as_f64() {
        let metric = if kind == "latency" {
            "offered rate"
        } else {
            "throughput"
        };
        return Some((metric.into(), "kfps".into(), f / 1e3));
    }
    let v = r["value"].as_f64()?;
    let unit = r["unit"].as_str().unwrap_or("").to_string();
    Some((kind.to_string(), unit, v))
}

/// Cells of a set of reports (runs of one plan), in the order first seen.
pub fn cells(reports: &[serde_json::Value]) -> Vec<Cell> {
    type Key = (String, String, String);
    let mut order: Vec<Key> = Vec::new();
    let mut found: std::collections::HashMap<Key, Vec<&serde_json::Value>> = Default::default();
    for rep in reports {
        for r in rep["results"].as_array().into_iter().flatten() {
            let k = (
                r["test"].as_str().unwrap_or("").to_string(),
                r["dut"].as_str().unwrap_or("").to_string(),
                r["frame_size"].as_str().unwrap_or("").to_string(),
            );
            if !found.contains_key(&k) {
                order.push(k.clone());
            }
            found.entry(k).or_default().push(r);
        }
    }
    let mut out = Vec::new();
    for k in order {
        let rows = &found[&k];
        let ok: Vec<(&serde_json::Value, (String, String, f64))> = rows
            .iter()
            .filter(|r| r["status"] == "ok")
            .filter_map(|r| figure(r).map(|f| (*r, f)))
            .collect();
        let Some((_, (metric, unit, _))) = ok.first().cloned() else {
            continue;
        };
        let lat: Vec<f64> = ok
            .iter()
            .filter_map(|(r, _)| {
                let l = &r["latency"];
                (l["samples"].as_u64()? > 0).then(|| l["avg_ns"].as_f64().map(|x| x / 1e3))?
            })
            .collect();
        out.push(Cell {
            test: k.0,
            dut: k.1,
            frame_size: k.2,
            metric,
            unit,
            value: Spread::of(ok.iter().map(|(_, f)| f.2).collect()),
            latency_avg_us: (lat.len() == ok.len()).then(|| Spread::of(lat)),
            missing: rows.len() - ok.len(),
        });
    }
    out
}

fn spread_cell(s: &Spread) -> String {
    s.pct().map(|p| format!("{p:.1}")).unwrap_or_default()
}

/// Text table of the cells of one directory: min / median / max per cell.
pub fn repeat_table(cells: &[Cell], runs: usize) -> String {
    let mut o = wrap(
        "",
        0,
        &format!(
            "{runs} runs: main figure per cell, min / median / max over the runs; spread = (max - min) / median"
        ),
    );
    for test in unique(cells.iter().map(|c| c.test.as_str())) {
        let cs: Vec<&Cell> = cells.iter().filter(|c| c.test == test).collect();
        let _ = std::fmt::Write::write_fmt(
            &mut o,
            format_args!("\n== {test} ({} in {}) ==\n", cs[0].metric, cs[0].unit),
        );
        let mut t = Table::new(&[
            ("frame", Align::Right),
            ("DUT", Align::Left),
            ("min", Align::Right),
            ("median", Align::Right),
            ("max", Align::Right),
            ("spread %", Align::Right),
            ("lat avg µs (median)", Align::Right),
            ("runs", Align::Right),
        ]);
        for c in cs {
            t.row(vec![
                c.frame_size.clone(),
                c.dut.clone(),
                num(c.value.min),
                num(c.value.median),
                num(c.value.max),
                spread_cell(&c.value),
                c.latency_avg_us
                    .as_ref()
                    .map(|l| num(l.median))
                    .unwrap_or_default(),
                format!(
                    "{}/{}",
                    c.value.values.len(),
                    c.value.values.len() + c.missing
                ),
            ]);
        }
        o.push_str(&t.render());
    }
    o
}

fn unique<'a>(it: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// One cell of `lab compare`.
#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    /// Test name.
    pub test: String,
    /// DUT name.
    pub dut: String,
    /// Frame size label.
    pub frame_size: String,
    /// Main figure and unit.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Run A.
    pub a: Spread,
    /// Run B.
    pub b: Spread,
    /// Median of B / median of A.
    pub ratio: Option<f64>,
    /// Average latency medians, B / A.
    pub latency_ratio: Option<f64>,
    /// Average latency of A and B (µs), where both measured.
    pub latency_avg_us: Option<(Spread, Spread)>,
}

/// Result of `lab compare`.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Directory of run A.
    pub a: String,
    /// Directory of run B.
    pub b: String,
    /// Plan names of A and B.
    pub plans: (String, String),
    /// Runs in A and in B.
    pub runs: (usize, usize),
    /// Cells present in both.
    pub pairs: Vec<Pair>,
    /// `test / DUT / frame` with a figure in A only.
    pub only_a: Vec<String>,
    /// ... in B only.
    pub only_b: Vec<String>,
}

/// Compare two result directories (each one run or a `--repeat` set).
pub fn compare(a: &Path, b: &Path) -> Result<Comparison, LabError> {
    let ra = reports_in(a)?;
    let rb = reports_in(b)?;
    let va: Vec<serde_json::Value> = ra.into_iter().map(|(_, v)| v).collect();
    let vb: Vec<serde_json::Value> = rb.into_iter().map(|(_, v)| v).collect();
    let (ca, cb) = (cells(&va), cells(&vb));
    let key = |c: &Cell| format!("{} / {} / {}", c.test, c.dut, c.frame_size);
    let mut pairs = Vec::new();
    let mut only_a = Vec::new();
    for x in &ca {
        match cb.iter().find(|y| key(y) == key(x) && y.unit == x.unit) {
            Some(y) => pairs.push(Pair {
                test: x.test.clone(),
                dut: x.dut.clone(),
                frame_size: x.frame_size.clone(),
                metric: x.metric.clone(),
                unit: x.unit.clone(),
                ratio: (x.value.median != 0.0).then(|| y.value.median / x.value.median),
                latency_ratio: match (&x.latency_avg_us, &y.latency_avg_us) {
                    (Some(la), Some(lb)) if la.median > 0.0 => Some(lb.median / la.median),
                    _ => None,
                },
                latency_avg_us: match (&x.latency_avg_us, &y.latency_avg_us) {
                    (Some(la), Some(lb)) => Some((la.clone(), lb.clone())),
                    _ => None,
                },
                a: x.value.clone(),
                b: y.value.clone(),
            }),
            None => only_a.push(key(x)),
        }
    }
    let only_b = cb
        .iter()
        .filter(|y| !ca.iter().any(|x| key(x) == key(y) && x.unit == y.unit))
        .map(key)
        .collect();
    let plan = |v: &[serde_json::Value]| v[0]["plan"].as_str().unwrap_or("").to_string();
    Ok(Comparison {
        a: a.display().to_string(),
        b: b.display().to_string(),
        plans: (plan(&va), plan(&vb)),
        runs: (va.len(), vb.len()),
        pairs,
        only_a,
        only_b,
    })
}

impl Comparison {
    /// The comparison as text tables (100 columns), one per test.
    pub fn text(&self) -> String {
        let mut o = wrap(
            "A: ",
            3,
            &format!("{} (plan {}, {} run(s))", self.a, self.plans.0, self.runs.0),
        );
        o.push_str(&wrap(
            "B: ",
            3,
            &format!("{} (plan {}, {} run(s))", self.b, self.plans.1, self.runs.1),
        ));
        o.push_str(&wrap(
            "",
            0,
            "A and B: median over the runs of each; ±% = spread (max - min) / median over the runs \
             (empty with a single run: use lab run --repeat N); B/A = ratio of the medians",
        ));
        for test in unique(self.pairs.iter().map(|p| p.test.as_str())) {
            let ps: Vec<&Pair> = self.pairs.iter().filter(|p| p.test == test).collect();
            o.push_str(&format!(
                "\n== {test} ({} in {}) ==\n",
                ps[0].metric, ps[0].unit
            ));
            let mut t = Table::new(&[
                ("frame", Align::Right),
                ("DUT", Align::Left),
                ("A", Align::Right),
                ("±%", Align::Right),
                ("B", Align::Right),
                ("±%", Align::Right),
                ("B/A", Align::Right),
                ("lat A µs", Align::Right),
                ("lat B µs", Align::Right),
                ("lat B/A", Align::Right),
            ]);
            for p in ps {
                let (la, lb) = match &p.latency_avg_us {
                    Some((a, b)) => (num(a.median), num(b.median)),
                    None => Default::default(),
                };
                t.row(vec![
                    p.frame_size.clone(),
                    p.dut.clone(),
                    num(p.a.median),
                    spread_cell(&p.a),
                    num(p.b.median),
                    spread_cell(&p.b),
                    p.ratio.map(|r| format!("{r:.2}")).unwrap_or_default(),
                    la,
                    lb,
                    p.latency_ratio
                        .map(|r| format!("{r:.2}"))
                        .unwrap_or_default(),
                ]);
            }
            o.push_str(&t.render());
        }
        if !self.only_a.is_empty() {
            o.push_str(&wrap(
                "\nonly in A (no figure in B): ",
                4,
                &self.only_a.join(", "),
            ));
        }
        if !self.only_b.is_empty() {
            o.push_str(&wrap(
                "\nonly in B (no figure in A): ",
                4,
                &self.only_b.join(", "),
            ));
        }
        if self.pairs.is_empty() {
            o.push_str("no cell has a figure in both runs\n");
        }
        o
    }
}

/// Where `compare` writes by default: `lab-results/compare-<UTC time>/`.
pub fn default_out() -> PathBuf {
    PathBuf::from("lab-results").join(format!("compare-{}", crate::timestamp(crate::now_unix())))
}

/// Compare and write `compare.txt` and `compare.json` to `out`.
pub fn compare_and_write(a: &Path, b: &Path, out: &Path) -> Result<Comparison, LabError> {
    let c = compare(a, b)?;
    std::fs::create_dir_all(out)
        .map_err(|e| LabError::Output(format!("{}: {e}", out.display())))?;
    std::fs::write(out.join("compare.txt"), c.text())
        .map_err(|e| LabError::Output(format!("compare.txt: {e}")))?;
    let json = serde_json::to_string_pretty(&c).map_err(|e| LabError::Output(e.to_string()))?;
    std::fs::write(out.join("compare.json"), json)
        .map_err(|e| LabError::Output(format!("compare.json: {e}")))?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, s: &crate::Summary) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("report.json"), serde_json::to_string(s).unwrap()).unwrap();
    }

    #[test]
    fn spread_and_median() {
        let s = Spread::of(vec![3.0, 1.0, 2.0]);
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        assert_eq!(s.pct(), Some(100.0));
        assert_eq!(Spread::of(vec![1.0, 4.0]).median, 2.5);
        assert_eq!(Spread::of(vec![5.0]).pct(), None);
    }

    #[test]
    fn compare_two_result_directories() {
        let base = std::env::temp_dir().join(format!("lab-compare-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        // A: three repeats whose throughput varies by 10 %; B: one run at 2x.
        let mut a_runs = Vec::new();
        for k in 0..3 {
            let mut s = crate::tables::tests::five_duts();
            for r in &mut s.results {
                r.throughput_fps = r.throughput_fps.map(|f| f * (1.0 + 0.05 * k as f64));
            }
            write(&base.join("a").join(format!("run-{}", k + 1)), &s);
            a_runs.push(s);
        }
        let mut b = crate::tables::tests::five_duts();
        for r in &mut b.results {
            r.throughput_fps = r.throughput_fps.map(|f| f * 2.0);
        }
        // A cell that exists only in B.
        let mut extra = b.results[0].clone();
        extra.frame_size = "9216".into();
        b.results.push(extra);
        write(&base.join("b"), &b);
        let out = base.join("out");
        let c = compare_and_write(&base.join("a"), &base.join("b"), &out).unwrap();
        assert_eq!(c.runs, (3, 1));
        // Every cell with a figure in both runs has a ratio.
        let both = a_runs[0]
            .results
            .iter()
            .filter(|r| r.status == "ok" && (r.throughput_fps.is_some() || r.value.is_some()))
            .count();
        assert_eq!(c.pairs.len(), both);
        assert!(c.pairs.iter().all(|p| p.ratio.is_some()));
        let p = c
            .pairs
            .iter()
            .find(|p| p.test == "l2-throughput" && p.dut == "lanyard" && p.frame_size == "512")
            .unwrap();
        // A's median is its 1.05x run: B/A = 2 / 1.05.
        assert!((p.ratio.unwrap() - 2.0 / 1.05).abs() < 1e-9, "{p:?}");
        assert!((p.a.pct().unwrap() - 0.1 / 1.05 * 100.0).abs() < 1e-9);
        assert_eq!(p.b.pct(), None);
        assert_eq!(c.only_b, vec!["l2-throughput / ceiling / 9216".to_string()]);
        let text = std::fs::read_to_string(out.join("compare.txt")).unwrap();
        assert!(
            text.lines()
                .all(|l| l.chars().count() <= crate::tables::WIDTH),
            "{text}"
        );
        assert!(text.contains("1.90") && text.contains("9.5"), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap())
                .unwrap();
        assert_eq!(json["pairs"].as_array().unwrap().len(), both);
        // min / median / max per cell over A's repeats.
        let reps: Vec<serde_json::Value> = reports_in(&base.join("a"))
            .unwrap()
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        let cs = cells(&reps);
        let t = repeat_table(&cs, 3);
        assert!(
            t.lines().all(|l| l.chars().count() <= crate::tables::WIDTH),
            "{t}"
        );
        let c0 = cs
            .iter()
            .find(|c| c.dut == "ceiling" && c.frame_size == "64")
            .unwrap();
        assert_eq!(c0.value.values.len(), 3);
        assert!(c0.value.min < c0.value.median && c0.value.median < c0.value.max);
        // A directory without results is an error naming it.
        let e = compare(&base.join("nope"), &base.join("b"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
