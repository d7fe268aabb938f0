//! `show service-control [applications]` and `show subscriber ID`
//! (docs/inline.md): the inline engine's flows, classification and
//! subscribers, and usage per service.

use super::*;

/// Bytes as an operator reads them (1000-based, one decimal).
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1000.0 && i < UNITS.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// The per-service (or per-application) usage table.
fn usage_table(first: &'static str, rows: &[Value], extra: Option<&'static str>) -> Table {
    let mut cols = vec![first];
    if let Some(e) = extra {
        cols.push(e);
    }
    cols.extend([
        ">Flows",
        ">Active",
        ">Pkts up",
        ">Pkts down",
        ">Bytes up",
        ">Bytes down",
    ]);
    let mut t = Table::new(&cols);
    for r in rows {
        let mut cells = vec![s(r, "name")];
        if let Some(e) = extra {
            cells.push(s(r, e.trim_start_matches('>').to_lowercase().as_str()));
        }
        cells.extend([
            u(r, "flows").to_string(),
            u(r, "active").to_string(),
            u(r, "packets-up").to_string(),
            u(r, "packets-down").to_string(),
            bytes(u(r, "bytes-up")),
            bytes(u(r, "bytes-down")),
        ]);
        t.row(cells);
    }
    t
}

/// `show service-control`: mode, flows, classification, subscribers,
/// then one row per service.
pub fn service_control(v: &Value) -> String {
    let mut o = String::new();
    if s(v, "mode") == "off" {
        let _ = writeln!(o, "Service control: not configured");
        return o;
    }
    let _ = writeln!(
        o,
        "Service control: {} ({}, nDPI {})",
        s(v, "mode"),
        plural(u(v, "workers"), "worker", "workers"),
        s(v, "ndpi")
    );
    for p in rows_at(v, "pairs") {
        let _ = writeln!(
            o,
            "  Pair: {} (subscribers) <-> {} (network)",
            s(p, "subscriber-port"),
            s(p, "network-port")
        );
    }
    let f = &v["flows"];
    let _ = writeln!(
        o,
        "Flows: {} live of {} ({} bytes each, {} reserved)",
        u(f, "live"),
        u(f, "capacity"),
        u(f, "bytes-per-flow"),
        bytes(u(f, "memory-bytes"))
    );
    let _ = writeln!(
        o,
        "  {} created, {} ended: {} expired, {} evicted idle; {} refused (table full), {} frames unclassified",
        u(f, "created"),
        u(f, "ended"),
        u(f, "expired"),
        u(f, "evicted-idle"),
        u(f, "refused-full"),
        u(f, "unclassified-packets")
    );
    let c = &v["classification"];
    let _ = writeln!(
        o,
        "Classification: {} by signature, {} by nDPI, {} guessed, {} unknown",
        u(c, "by-signature"),
        u(c, "by-ndpi"),
        u(c, "by-guess"),
        u(c, "unknown")
    );
    let _ = writeln!(
        o,
        "  {} in progress ({} slots of {} bytes), {} found no slot, {} frames to nDPI",
        u(c, "classifying"),
        u(c, "slots"),
        u(c, "slot-bytes"),
        u(c, "busy"),
        u(c, "ndpi-packets")
    );
    let sb = &v["subscribers"];
    let _ = writeln!(
        o,
        "Subscribers: {} of {} (gold {}, silver {}, bronze {}); {} flows of no subscriber",
        u(sb, "total"),
        u(sb, "max"),
        u(sb, "gold"),
        u(sb, "silver"),
        u(sb, "bronze"),
        u(sb, "no-subscriber-flows")
    );
    let _ = writeln!(o, "Frames: {} ({} not IP)", u(v, "packets"), u(v, "not-ip"));
    let _ = writeln!(o);
    usage_table("Service", rows_at(v, "services"), None).render(&mut o);
    o
}

/// `show service-control applications`: applications seen, with the
/// service each belongs to.
pub fn service_control_applications(v: &Value) -> String {
    let mut o = String::new();
    let rows = rows_at(v, "applications");
    if s(v, "mode") == "off" {
        let _ = writeln!(o, "Service control: not configured");
        return o;
    }
    let _ = writeln!(
        o,
        "{}",
        plural(rows.len() as u64, "application", "applications")
    );
    let _ = writeln!(o);
    usage_table("Application", rows, Some("Service")).render(&mut o);
    o
}

/// `show subscriber ID`: the subscriber and its usage per service.
pub fn subscriber(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Subscriber {}: package {} (weight {})",
        s(v, "id"),
        s(v, "package"),
        u(v, "weight")
    );
    let _ = writeln!(o, "  Addresses: {}", strings(v, "addresses").join(", "));
    match opt_u(v, "quota-bytes") {
        Some(q) => {
            let _ = writeln!(o, "  Quota: {}", bytes(q));
        }
        None => {
            let _ = writeln!(o, "  Quota: none");
        }
    }
    let _ = writeln!(o);
    let rows = rows_at(v, "services");
    if rows.is_empty() {
        let _ = writeln!(o, "No traffic yet");
    } else {
        usage_table("Service", rows, None).render(&mut o);
    }
    o
}
