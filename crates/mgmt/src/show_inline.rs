//! `show service-control [applications | history]` and `show subscriber ID`
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

/// A rate in bits/s as an operator reads it (`4.00 Mbit/s`).
fn bps(n: u64) -> String {
    const UNITS: [&str; 4] = ["kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"];
    if n < 1000 {
        return format!("{n} bit/s");
    }
    let mut v = n as f64 / 1000.0;
    let mut i = 0;
    while v >= 1000.0 && i < UNITS.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    format!("{v:.2} {}", UNITS[i])
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
        ">Drops up",
        ">Drops down",
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
            u(r, "dropped-up").to_string(),
            u(r, "dropped-down").to_string(),
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
        "Flows: {} live of {} ({} bytes each, {} reserved{})",
        u(f, "live"),
        u(f, "capacity"),
        u(f, "bytes-per-flow"),
        bytes(u(f, "memory-bytes")),
        match f.get("huge-bytes").and_then(Value::as_u64) {
            Some(h) => format!(", {} on 2 MB pages", bytes(h)),
            None => String::new(),
        }
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
    let ux = &v["usage-export"];
    if ux.is_object() {
        let _ = writeln!(
            o,
            "Usage export: IPFIX to {} (domain {}): {} flows as {} records in {} messages; {} lost (queue full), {} send errors",
            s(ux, "collector"),
            u(ux, "domain-id"),
            u(ux, "flows"),
            u(ux, "records"),
            u(ux, "messages"),
            u(ux, "lost"),
            u(ux, "send-errors")
        );
        if let Some(t) = opt_u(ux, "active-timeout-s") {
            let _ = writeln!(
                o,
                "  Active timeout {t} s: {} interim records of live flows",
                u(ux, "interim-records")
            );
        }
    }
    let _ = writeln!(o);
    usage_table("Service", rows_at(v, "services"), None).render(&mut o);
    let ctl = rows_at(v, "controllers");
    let _ = writeln!(o);
    let pk: Vec<String> = rows_at(v, "packages")
        .iter()
        .map(|p| {
            let mut t = format!("{} {}", s(p, "name"), u(p, "weight"));
            let (cu, cd) = (u(p, "cap-up-bps"), u(p, "cap-down-bps"));
            if cu != 0 || cd != 0 {
                let cap = |c: u64| if c == 0 { "-".to_string() } else { bps(c) };
                t.push_str(&format!(" (cap {} up, {} down)", cap(cu), cap(cd)));
            }
            t
        })
        .collect();
    if ctl.is_empty() {
        let _ = writeln!(o, "Bandwidth control: no controllers");
    } else {
        let _ = writeln!(
            o,
            "Bandwidth control: {}; package weights: {}",
            plural(ctl.len() as u64, "controller", "controllers"),
            pk.join(", ")
        );
        let _ = writeln!(o);
        let mut t = Table::new(&[
            "Service",
            "Dir",
            ">Limit",
            ">Rate",
            ">Offered",
            ">Per weight",
            ">Drops",
            ">Dropped",
            ">Gold",
            ">Silver",
            ">Bronze",
        ]);
        for c in ctl {
            let a = &c["active"];
            t.row(vec![
                s(c, "service"),
                s(c, "direction"),
                bps(u(c, "limit-bps")),
                bps(u(c, "rate-bps")),
                bps(u(c, "offered-bps")),
                bps(u(c, "share-per-weight-bps")),
                u(c, "dropped-packets").to_string(),
                bytes(u(c, "dropped-bytes")),
                u(a, "gold").to_string(),
                u(a, "silver").to_string(),
                u(a, "bronze").to_string(),
            ]);
        }
        t.render(&mut o);
        let _ = writeln!(
            o,
            "Gold/Silver/Bronze: subscribers active in the last interval"
        );
    }
    let _ = writeln!(
        o,
        "Quota drops: {} frames; frames of controlled services without a subscriber entry: {}",
        u(v, "quota-dropped-packets"),
        u(v, "uncontrolled-packets")
    );
    let cl = v.get("classifying-limit-bps").cloned().unwrap_or_default();
    let lim = |d: &str| match u(&cl, d) {
        0 => "none".to_string(),
        r => bps(r),
    };
    let _ = writeln!(
        o,
        "Subscriber cap drops: {} frames; classifying (limit up {}, down {} per subscriber) drops: {} frames",
        u(v, "cap-dropped-packets"),
        lim("up"),
        lim("down"),
        u(v, "classifying-dropped-packets")
    );
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
            let _ = writeln!(
                o,
                "  Quota: {}, used {}, remaining {}{}",
                bytes(q),
                bytes(u(v, "used-bytes")),
                bytes(u(v, "remaining-bytes")),
                if flag(v, "quota-exceeded") {
                    " (exceeded)"
                } else {
                    ""
                }
            );
        }
        None => {
            let _ = writeln!(o, "  Quota: none (used {})", bytes(u(v, "used-bytes")));
        }
    }
    if let Some(p) = opt_u(v, "quota-period-s") {
        let next = match opt_u(v, "quota-next-period-in-s") {
            Some(n) => format!("; the next starts in {}", span(n)),
            None => String::new(),
        };
        let _ = writeln!(o, "  Quota period: {}{next}", span(p));
    }
    if opt_u(v, "quota-bytes").is_some() {
        match opt_u(v, "quota-exceeded-rate-bps") {
            Some(0) => {
                let _ = writeln!(o, "  When used up: drop");
            }
            Some(r) => {
                let _ = writeln!(o, "  When used up: throttle to {}", bps(r));
            }
            None => {}
        }
    }
    let cap = |k: &str| match u(v, k) {
        0 => "none".to_string(),
        c => bps(c),
    };
    let _ = writeln!(
        o,
        "  Cap: up {}, down {}; passing now: up {}, down {}",
        cap("cap-up-bps"),
        cap("cap-down-bps"),
        bps(u(v, "rate-up-bps")),
        bps(u(v, "rate-down-bps"))
    );
    let _ = writeln!(o);
    let mut rows = rows_at(v, "services").to_vec();
    if rows.is_empty() {
        let _ = writeln!(o, "No traffic yet");
    } else {
        // All frames, those of flows still being classified included.
        if let Some(t) = v.get("total").filter(|t| t.is_object()) {
            rows.push(t.clone());
        }
        usage_table("Service", &rows, None).render(&mut o);
    }
    // Bandwidth per service over the service history's intervals.
    let hist = rows_at(v, "history");
    if !hist.is_empty() {
        let shown = &hist[hist.len().saturating_sub(SUBSCRIBER_HISTORY_SHOWN)..];
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Bandwidth per interval ({} of {} with traffic shown, newest last; times UTC)",
            shown.len(),
            hist.len()
        );
        let mut t = Table::new(&[
            "Start",
            ">Length",
            "Service",
            ">Up",
            ">Down",
            ">Dropped up",
            ">Dropped down",
        ]);
        for r in shown {
            let secs = u(r, "start-ms") / 1000 % 86_400;
            let at = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
            for sv in rows_at(r, "services") {
                t.row(vec![
                    at.clone(),
                    format!("{:.1} s", u(r, "length-ms") as f64 / 1000.0),
                    s(sv, "name"),
                    bps(u(sv, "up-bps")),
                    bps(u(sv, "down-bps")),
                    bps(u(sv, "dropped-up-bps")),
                    bps(u(sv, "dropped-down-bps")),
                ]);
            }
        }
        t.render(&mut o);
    }
    o
}

/// `2 d 3 h`, `5 h 10 m`, `42 s`: the two largest units.
fn span(secs: u64) -> String {
    let units = [(86_400, "d"), (3600, "h"), (60, "m"), (1, "s")];
    let mut parts = Vec::new();
    let mut rest = secs;
    for (n, name) in units {
        if rest >= n || (parts.is_empty() && n == 1) {
            parts.push(format!("{} {name}", rest / n));
            rest %= n;
        }
        if parts.len() == 2 || (!parts.is_empty() && rest == 0) {
            break;
        }
    }
    parts.join(" ")
}

/// Intervals `show subscriber` shows (newest; `--json` has them all).
const SUBSCRIBER_HISTORY_SHOWN: usize = 10;

/// Most intervals the text shows (newest; `--json` has them all).
const HISTORY_SHOWN: usize = 30;

/// `show service-control history`: per interval and active service,
/// concurrent sessions (min/avg/max) and bandwidth per direction.
pub fn service_control_history(v: &Value) -> String {
    let mut o = String::new();
    if s(v, "mode") == "off" {
        let _ = writeln!(o, "Service control: not configured");
        return o;
    }
    let rows = rows_at(v, "intervals");
    let shown = &rows[rows.len().saturating_sub(HISTORY_SHOWN)..];
    let _ = writeln!(
        o,
        "Service history: {} s intervals, {} of {} kept shown (newest last; times UTC)",
        u(v, "interval-s"),
        shown.len(),
        rows.len()
    );
    if shown.is_empty() {
        let _ = writeln!(o, "  (no interval closed yet)");
        return o;
    }
    // Only services that had sessions or traffic in the window.
    let busy = |sv: &Value| {
        [
            "sessions-max",
            "up-bps",
            "down-bps",
            "dropped-up-bps",
            "dropped-down-bps",
        ]
        .iter()
        .any(|k| u(sv, k) != 0)
    };
    let mut names: Vec<String> = Vec::new();
    for r in shown {
        for sv in rows_at(r, "services") {
            let n = s(sv, "name");
            if busy(sv) && !names.contains(&n) {
                names.push(n);
            }
        }
    }
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Start",
        "Service",
        ">Sessions min",
        ">avg",
        ">max",
        ">Up",
        ">Down",
        ">Dropped up",
        ">Dropped down",
    ]);
    for r in shown {
        let secs = u(r, "start-ms") / 1000 % 86_400;
        let at = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
        for sv in rows_at(r, "services") {
            if !names.contains(&s(sv, "name")) {
                continue;
            }
            t.row(vec![
                at.clone(),
                s(sv, "name"),
                u(sv, "sessions-min").to_string(),
                format!("{:.1}", sv["sessions-avg"].as_f64().unwrap_or(0.0)),
                u(sv, "sessions-max").to_string(),
                bps(u(sv, "up-bps")),
                bps(u(sv, "down-bps")),
                bps(u(sv, "dropped-up-bps")),
                bps(u(sv, "dropped-down-bps")),
            ]);
        }
    }
    t.render(&mut o);
    if names.is_empty() {
        let _ = writeln!(o, "  (no service had sessions or traffic)");
    }
    o
}
