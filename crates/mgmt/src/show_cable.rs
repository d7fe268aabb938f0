//! `test cable-diagnostics PORT`: the PHY's per-pair verdict and the
//! distance to a fault, one row per pair.

use super::*;

/// `test cable-diagnostics PORT`.
pub fn cable_diagnostics(v: &Value) -> String {
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
}
