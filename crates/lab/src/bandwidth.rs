//! Bandwidth per subscriber per service over time, from an inline-engine
//! DUT (docs/inline.md, "Show"): after every trial the lab reads
//! `show subscriber ID --json` for each lab subscriber and keeps each
//! interval of its `history` once, tagged with the test that was running
//! when it was first seen. Written as `bandwidth.csv` / `bandwidth.json`
//! in the run's directory and plotted in the HTML report (the inline
//! engine report's figures 7–10: rate over time per service).

use serde::Serialize;
use std::fmt::Write as _;

/// The lab's subscribers on an inline-engine DUT: every IPv4 address
/// split in two halves, so each frame belongs to one of them (frames from
/// the subscriber port by source, frames to it by destination).
pub const SUBSCRIBERS: [(&str, &str); 2] = [("lab-a", "0.0.0.0/1"), ("lab-b", "128.0.0.0/1")];

/// History interval the lab configures (`report-interval-s`), seconds:
/// trials last a few seconds.
pub const INTERVAL_S: u32 = 1;

/// Provisioning records for [`SUBSCRIBERS`] (`lanyard subscribers load`).
pub fn provisioning() -> String {
    SUBSCRIBERS
        .iter()
        .map(|(id, addr)| format!("add {id} package=gold addr={addr}\n"))
        .collect()
}

/// One interval of one subscriber × service on one DUT.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// DUT name.
    pub dut: String,
    /// The test running when the interval was first read.
    pub test: String,
    /// Subscriber ID.
    pub subscriber: String,
    /// Service name; `(all)` is every frame of the subscriber.
    pub service: String,
    /// Interval start, ms since the Unix epoch.
    pub start_ms: u64,
    /// Interval length, ms.
    pub length_ms: u64,
    /// Bits/s passed from the subscriber.
    pub up_bps: f64,
    /// Bits/s passed to the subscriber.
    pub down_bps: f64,
    /// Bits/s dropped from the subscriber.
    pub dropped_up_bps: f64,
    /// Bits/s dropped to the subscriber.
    pub dropped_down_bps: f64,
}

/// Adds the intervals of `show subscriber ID --json` (`v`) not already in
/// `rows` for this DUT, subscriber and service; returns how many.
pub fn merge(
    rows: &mut Vec<Row>,
    dut: &str,
    test: &str,
    subscriber: &str,
    v: &serde_json::Value,
) -> usize {
    let mut added = 0;
    for iv in v["history"].as_array().into_iter().flatten() {
        let (Some(start_ms), Some(length_ms)) = (iv["start-ms"].as_u64(), iv["length-ms"].as_u64())
        else {
            continue;
        };
        for s in iv["services"].as_array().into_iter().flatten() {
            let Some(service) = s["name"].as_str() else {
                continue;
            };
            let seen = rows.iter().any(|r| {
                r.dut == dut
                    && r.subscriber == subscriber
                    && r.service == service
                    && r.start_ms == start_ms
            });
            if seen {
                continue;
            }
            let f = |k: &str| s[k].as_f64().unwrap_or(0.0);
            rows.push(Row {
                dut: dut.into(),
                test: test.into(),
                subscriber: subscriber.into(),
                service: service.into(),
                start_ms,
                length_ms,
                up_bps: f("up-bps"),
                down_bps: f("down-bps"),
                dropped_up_bps: f("dropped-up-bps"),
                dropped_down_bps: f("dropped-down-bps"),
            });
            added += 1;
        }
    }
    added
}

/// CSV header: units in the names (ms since the epoch, bits/s).
pub const CSV_HEADER: &str = "dut,test,subscriber,service,start_unix_ms,length_ms,\
                              up_bps,down_bps,dropped_up_bps,dropped_down_bps";

/// The rows as CSV (header first), in DUT, subscriber, service, time order.
pub fn csv(rows: &[Row]) -> String {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.dut, &a.subscriber, &a.service, a.start_ms).cmp(&(
            &b.dut,
            &b.subscriber,
            &b.service,
            b.start_ms,
        ))
    });
    let mut o = format!("{CSV_HEADER}\n");
    for r in sorted {
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{:.0},{:.0},{:.0},{:.0}",
            field(&r.dut),
            field(&r.test),
            field(&r.subscriber),
            field(&r.service),
            r.start_ms,
            r.length_ms,
            r.up_bps,
            r.down_bps,
            r.dropped_up_bps,
            r.dropped_down_bps
        );
    }
    o
}

/// A CSV field, quoted when it holds a comma, quote or line break.
pub(crate) fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(start: u64) -> serde_json::Value {
        serde_json::json!({"id": "lab-a", "history": [
            {"start-ms": start, "length-ms": 1000, "services": [
                {"name": "lab", "up-bps": 1_000_000, "down-bps": 2000,
                 "dropped-up-bps": 0, "dropped-down-bps": 5},
                {"name": "(all)", "up-bps": 1_000_500, "down-bps": 2000,
                 "dropped-up-bps": 0, "dropped-down-bps": 5}]},
            {"start-ms": start + 1000, "length-ms": 1020, "services": [
                {"name": "lab", "up-bps": 7, "down-bps": 0,
                 "dropped-up-bps": 0, "dropped-down-bps": 0}]}
        ]})
    }

    #[test]
    fn csv_has_header_units_and_one_row_per_interval() {
        let mut rows = Vec::new();
        assert_eq!(
            merge(&mut rows, "inline-engine", "t1", "lab-a", &show(5000)),
            3
        );
        // Read again after the next trial: known intervals are not repeated,
        // new ones carry the new test.
        assert_eq!(
            merge(&mut rows, "inline-engine", "t2", "lab-a", &show(6000)),
            2
        );
        let c = csv(&rows);
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(
            lines[0],
            "dut,test,subscriber,service,start_unix_ms,length_ms,up_bps,down_bps,\
             dropped_up_bps,dropped_down_bps"
        );
        assert_eq!(
            &lines[1..],
            [
                "inline-engine,t1,lab-a,(all),5000,1000,1000500,2000,0,5",
                "inline-engine,t2,lab-a,(all),6000,1000,1000500,2000,0,5",
                "inline-engine,t1,lab-a,lab,5000,1000,1000000,2000,0,5",
                "inline-engine,t1,lab-a,lab,6000,1020,7,0,0,0",
                "inline-engine,t2,lab-a,lab,7000,1020,7,0,0,0",
            ]
        );
    }

    #[test]
    fn bad_history_is_skipped_and_fields_are_quoted() {
        let mut rows = Vec::new();
        let v = serde_json::json!({"history": [{"start-ms": "x"}, {"start-ms": 1, "length-ms": 2,
            "services": [{"up-bps": 1}, {"name": "a,b"}]}]});
        assert_eq!(merge(&mut rows, "d", "t", "s", &v), 1);
        assert!(csv(&rows).ends_with("d,t,s,\"a,b\",1,2,0,0,0,0\n"));
        assert_eq!(merge(&mut rows, "d", "t", "s", &serde_json::json!({})), 0);
    }

    #[test]
    fn provisioning_covers_every_address() {
        assert_eq!(
            provisioning(),
            "add lab-a package=gold addr=0.0.0.0/1\nadd lab-b package=gold addr=128.0.0.0/1\n"
        );
    }
}
