//! Concurrent sessions per service over time, from an inline-engine DUT
//! (docs/inline.md, "Show"): after every trial the lab reads `show
//! service-control history --json` and keeps each interval of each
//! service once, tagged with the test that was running when it was first
//! seen. Written as `sessions.csv` / `sessions.json` in the run's
//! directory and plotted in the HTML report (the inline engine report's
//! concurrent sessions per service).

use crate::bandwidth::field;
use serde::Serialize;
use std::fmt::Write as _;

/// One interval of one service on one DUT.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// DUT name.
    pub dut: String,
    /// The test running when the interval was first read.
    pub test: String,
    /// Service name.
    pub service: String,
    /// Interval start, ms since the Unix epoch.
    pub start_ms: u64,
    /// Interval length, ms.
    pub length_ms: u64,
    /// Concurrent sessions (classified flows until they end), sampled
    /// every control interval: least, mean and most.
    pub sessions_min: u64,
    pub sessions_avg: f64,
    pub sessions_max: u64,
    /// Bits/s passed from / to the subscribers.
    pub up_bps: f64,
    pub down_bps: f64,
}

/// Adds the intervals of `show service-control history --json` (`v`) not
/// already in `rows` for this DUT and service; returns how many. Services
/// without a session or a bit in an interval are left out (the engine
/// lists every configured service in every interval).
pub fn merge(rows: &mut Vec<Row>, dut: &str, test: &str, v: &serde_json::Value) -> usize {
    let mut added = 0;
    for iv in v["intervals"].as_array().into_iter().flatten() {
        let (Some(start_ms), Some(length_ms)) = (iv["start-ms"].as_u64(), iv["length-ms"].as_u64())
        else {
            continue;
        };
        for s in iv["services"].as_array().into_iter().flatten() {
            let Some(service) = s["name"].as_str() else {
                continue;
            };
            let n = |k: &str| s[k].as_u64().unwrap_or(0);
            let f = |k: &str| s[k].as_f64().unwrap_or(0.0);
            if n("sessions-max") == 0 && f("up-bps") == 0.0 && f("down-bps") == 0.0 {
                continue;
            }
            let seen = rows
                .iter()
                .any(|r| r.dut == dut && r.service == service && r.start_ms == start_ms);
            if seen {
                continue;
            }
            rows.push(Row {
                dut: dut.into(),
                test: test.into(),
                service: service.into(),
                start_ms,
                length_ms,
                sessions_min: n("sessions-min"),
                sessions_avg: f("sessions-avg"),
                sessions_max: n("sessions-max"),
                up_bps: f("up-bps"),
                down_bps: f("down-bps"),
            });
            added += 1;
        }
    }
    added
}

/// CSV header: units in the names (ms since the epoch, bits/s).
pub const CSV_HEADER: &str = "dut,test,service,start_unix_ms,length_ms,\
                              sessions_min,sessions_avg,sessions_max,up_bps,down_bps";

/// The rows as CSV (header first), in DUT, service, time order.
pub fn csv(rows: &[Row]) -> String {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| (&a.dut, &a.service, a.start_ms).cmp(&(&b.dut, &b.service, b.start_ms)));
    let mut o = format!("{CSV_HEADER}\n");
    for r in sorted {
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{:.1},{},{:.0},{:.0}",
            field(&r.dut),
            field(&r.test),
            field(&r.service),
            r.start_ms,
            r.length_ms,
            r.sessions_min,
            r.sessions_avg,
            r.sessions_max,
            r.up_bps,
            r.down_bps
        );
    }
    o
}

/// Most concurrent sessions per DUT and service over the run, for the
/// terminal summary: (dut, service, max), in DUT then service order.
pub fn peaks(rows: &[Row]) -> Vec<(String, String, u64)> {
    let mut out: Vec<(String, String, u64)> = Vec::new();
    for r in rows {
        match out
            .iter_mut()
            .find(|(d, s, _)| *d == r.dut && *s == r.service)
        {
            Some(p) => p.2 = p.2.max(r.sessions_max),
            None => out.push((r.dut.clone(), r.service.clone(), r.sessions_max)),
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(start: u64) -> serde_json::Value {
        serde_json::json!({"mode": "inline", "interval-s": 1, "intervals": [
            {"start-ms": start, "length-ms": 1000, "services": [
                {"name": "lab", "sessions-min": 280, "sessions-avg": 290.25,
                 "sessions-max": 300, "up-bps": 1_000_000, "down-bps": 0},
                {"name": "web", "sessions-min": 0, "sessions-avg": 0.0,
                 "sessions-max": 0, "up-bps": 0, "down-bps": 0}]},
            {"start-ms": start + 1000, "length-ms": 1010, "services": [
                {"name": "lab", "sessions-min": 300, "sessions-avg": 300.0,
                 "sessions-max": 300, "up-bps": 7, "down-bps": 3}]}
        ]})
    }

    #[test]
    fn csv_has_header_units_and_one_row_per_busy_interval() {
        let mut rows = Vec::new();
        // The idle `web` service is left out.
        assert_eq!(merge(&mut rows, "inline-engine", "t1", &history(5000)), 2);
        // Read again after the next trial: known intervals are not
        // repeated, the new one carries the new test.
        assert_eq!(merge(&mut rows, "inline-engine", "t2", &history(6000)), 1);
        let c = csv(&rows);
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(
            lines[0],
            "dut,test,service,start_unix_ms,length_ms,sessions_min,sessions_avg,sessions_max,\
             up_bps,down_bps"
        );
        assert_eq!(
            &lines[1..],
            [
                "inline-engine,t1,lab,5000,1000,280,290.2,300,1000000,0",
                "inline-engine,t1,lab,6000,1010,300,300.0,300,7,3",
                "inline-engine,t2,lab,7000,1010,300,300.0,300,7,3",
            ]
        );
        assert_eq!(
            peaks(&rows),
            vec![("inline-engine".to_string(), "lab".to_string(), 300)]
        );
    }

    #[test]
    fn bad_history_is_skipped_and_fields_are_quoted() {
        let mut rows = Vec::new();
        let v = serde_json::json!({"intervals": [{"start-ms": "x"}, {"start-ms": 1, "length-ms": 2,
            "services": [{"sessions-max": 1}, {"name": "a,b", "sessions-max": 2}]}]});
        assert_eq!(merge(&mut rows, "d", "t", &v), 1);
        assert!(csv(&rows).ends_with("d,t,\"a,b\",1,2,0,0.0,2,0,0\n"));
        assert_eq!(merge(&mut rows, "d", "t", &serde_json::json!({})), 0);
        assert_eq!(
            merge(&mut rows, "d", "t", &serde_json::json!({"intervals": 3})),
            0
        );
    }
}
