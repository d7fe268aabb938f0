//! `test cable-diagnostics PORT`: the PHY's per-pair verdict and the
//! distance to a fault, one row per pair; with `--tdr`, the reflection's
//! amplitude per distance, one column per pair.

use super::*;

/// `test cable-diagnostics PORT`.
pub fn cable_diagnostics(v: &Value) -> String {
    if v.get("mode").and_then(Value::as_str) == Some("tdr") {
        return tdr(v);
    }
    let mut o = String::new();
    let pairs = rows_at(v, "pairs");
    let _ = writeln!(
        o,
        "Cable diagnostics on {}: {}",
        s(v, "interface"),
        plural(pairs.len() as u64, "pair", "pairs")
    );
    if pairs.is_empty() {
        let _ = writeln!(o, "The PHY reported no pair results.");
        return o;
    }
    let _ = writeln!(o);
    let mut t = Table::new(&["Pair", "Status", ">Fault distance"]);
    for p in pairs {
        let dist = match p.get("fault_distance_m").and_then(Value::as_f64) {
            Some(m) => format!("{m:.2} m"),
            None => "-".into(),
        };
        let status = p
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("no result")
            .to_string();
        t.row(vec![s(p, "pair"), status, dist]);
    }
    t.render(&mut o);
    o
}

/// `test cable-diagnostics PORT --tdr`: one row per distance, the
/// amplitude (mV) of each pair's reflection in its column (`-`: that
/// pair was not sampled there).
fn tdr(v: &Value) -> String {
    let mut o = String::new();
    let samples = rows_at(v, "samples");
    let _ = write!(o, "Cable TDR on {}", s(v, "interface"));
    if let Some(p) = v.get("pulse_mv").and_then(Value::as_i64) {
        let _ = write!(o, ": pulse {p} mV");
    }
    if let Some(st) = v.get("steps_m").filter(|x| x.is_object()) {
        let f = |k: &str| st.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let _ = write!(o, ", {:.2}-{:.2} m", f("from"), f("to"));
        if f("step") > 0.0 {
            let _ = write!(o, " in {:.2} m steps", f("step"));
        }
    }
    let _ = writeln!(o);
    if samples.is_empty() {
        let _ = writeln!(o, "The PHY reported no samples.");
        return o;
    }
    let _ = writeln!(o);
    let mut pairs: Vec<String> = samples.iter().map(|x| s(x, "pair")).collect();
    pairs.sort();
    pairs.dedup();
    // Distances in cm as keys: exact, and sorted as numbers.
    let mut rows: std::collections::BTreeMap<u64, Vec<Option<i64>>> = Default::default();
    for x in samples {
        let cm = (x.get("distance_m").and_then(Value::as_f64).unwrap_or(0.0) * 100.0).round();
        let col = pairs.iter().position(|p| *p == s(x, "pair")).unwrap_or(0);
        let row = rows
            .entry(cm.max(0.0) as u64)
            .or_insert_with(|| vec![None; pairs.len()]);
        row[col] = x.get("mv").and_then(Value::as_i64);
    }
    let mut cols = vec![">Distance"];
    cols.extend(pairs.iter().map(|p| match p.as_str() {
        "A" => ">Pair A mV",
        "B" => ">Pair B mV",
        "C" => ">Pair C mV",
        "D" => ">Pair D mV",
        _ => ">Other pair mV",
    }));
    let mut t = Table::new(&cols);
    for (cm, mv) in rows {
        let mut cells = vec![format!("{:.2} m", cm as f64 / 100.0)];
        cells.extend(
            mv.iter()
                .map(|m| m.map_or("-".to_string(), |m| m.to_string())),
        );
        t.row(cells);
    }
    t.render(&mut o);
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pairs_with_and_without_faults() {
        let v = json!({"interface": "ge-0/1", "pairs": [
            {"pair": "A", "status": "ok", "fault_distance_m": null},
            {"pair": "B", "status": "open", "fault_distance_m": 12.4},
            {"pair": "C", "status": null, "fault_distance_m": 3.1},
        ]});
        let out = cable_diagnostics(&v);
        assert!(
            out.starts_with("Cable diagnostics on ge-0/1: 3 pairs\n"),
            "{out}"
        );
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines
                .iter()
                .any(|l| l.contains('B') && l.contains("open") && l.ends_with("12.40 m")),
            "{out}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains('C') && l.contains("no result") && l.ends_with("3.10 m")),
            "{out}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains('A') && l.contains("ok") && l.trim_end().ends_with('-')),
            "{out}"
        );
    }

    #[test]
    fn tdr_trace_one_row_per_distance_one_column_per_pair() {
        let v = json!({"interface": "eth3", "mode": "tdr", "pulse_mv": 1000,
        "steps_m": {"from": 1.0, "to": 2.0, "step": 1.0},
        "samples": [
            {"pair": "A", "distance_m": 1.0, "mv": 10},
            {"pair": "B", "distance_m": 1.0, "mv": -5},
            {"pair": "A", "distance_m": 2.0, "mv": 312},
        ]});
        let out = cable_diagnostics(&v);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "Cable TDR on eth3: pulse 1000 mV, 1.00-2.00 m in 1.00 m steps"
        );
        assert!(
            lines[2].contains("Pair A mV") && lines[2].contains("Pair B mV"),
            "{out}"
        );
        let row = |d: &str| {
            lines
                .iter()
                .find(|l| l.trim_start().starts_with(d))
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .unwrap_or_else(|| panic!("no row {d}: {out}"))
        };
        assert_eq!(row("1.00 m"), ["1.00", "m", "10", "-5"]);
        assert_eq!(row("2.00 m"), ["2.00", "m", "312", "-"]);
        let none = cable_diagnostics(&json!({"interface": "e", "mode": "tdr", "samples": []}));
        assert!(none.contains("no samples"), "{none}");
    }
}
