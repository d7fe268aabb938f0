//! Text form of `show` commands, rendered from the API's JSON so the CLI
//! and scripts read the same source.

use serde_json::Value;
use std::fmt::Write;

fn s(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(x) => x.to_string(),
    }
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn rows(v: &Value) -> &[Value] {
    v.as_array().map(|a| a.as_slice()).unwrap_or(&[])
}

/// Cisco-style dotted MAC (aabb.ccdd.eeff) from "aa:bb:cc:dd:ee:ff".
fn dotted(mac: &str) -> String {
    let h: String = mac.chars().filter(|c| *c != ':').collect();
    if h.len() != 12 {
        return mac.to_string();
    }
    format!("{}.{}.{}", &h[0..4], &h[4..8], &h[8..12])
}

pub fn interfaces(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<15} {:<12} {:<6} {:<8} {:>7} {:>5} {:>12} {:>12} {:>10}",
        "Port", "Mode", "VLAN", "Status", "Ifindex", "MTU", "RX frames", "TX frames", "Drops"
    );
    for r in rows(v) {
        let vlan = match s(r, "mode").as_str() {
            "trunk" => "trunk".to_string(),
            _ => s(r, "vlan"),
        };
        let _ = writeln!(
            o,
            "{:<15} {:<12} {:<6} {:<8} {:>7} {:>5} {:>12} {:>12} {:>10}",
            s(r, "name"),
            s(r, "mode"),
            vlan,
            s(r, "state"),
            u(r, "ifindex"),
            u(r, "mtu"),
            u(r, "rx_frames"),
            u(r, "tx_frames"),
            u(r, "drops")
        );
        if r.get("mode").and_then(Value::as_str) == Some("trunk") {
            let _ = writeln!(
                o,
                "{:<15}   allowed {}  native {}  tpid {}",
                "",
                s(r, "vlans"),
                s(r, "vlan"),
                s(r, "tpid")
            );
        }
        if let Some(e) = r.get("error").and_then(Value::as_str) {
            let _ = writeln!(o, "{:<15}   last error: {e}", "");
        }
    }
    o
}

pub fn vlans(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<5} {:<16} {:<8} {:>8} {:>8}  Ports",
        "VLAN", "Name", "Learning", "Limit", "MACs"
    );
    let _ = writeln!(o, "{}", "-".repeat(60));
    for r in rows(v) {
        let ports: Vec<String> = rows(&r["ports"])
            .iter()
            .map(|p| {
                let mut n = s(p, "name");
                if p["tagged"] == Value::Bool(true) {
                    n.push_str("(T)");
                }
                if p["up"] != Value::Bool(true) {
                    n.push_str("(down)");
                }
                n
            })
            .collect();
        let name = match r.get("name") {
            Some(Value::String(n)) => n.clone(),
            _ => format!("VLAN{:04}", u(r, "vlan")),
        };
        let _ = writeln!(
            o,
            "{:<5} {:<16} {:<8} {:>8} {:>8}  {}",
            u(r, "vlan"),
            name,
            if r["learning"] == Value::Bool(true) {
                "on"
            } else {
                "off"
            },
            s(r, "limit"),
            u(r, "macs"),
            ports.join(", ")
        );
    }
    o
}

pub fn mac_table(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "          Mac Address Table");
    let _ = writeln!(o, "-------------------------------------------");
    let _ = writeln!(o);
    let _ = writeln!(o, "Vlan    Mac Address       Type        Ports     Age");
    let _ = writeln!(o, "----    -----------       --------    -----     ---");
    for r in rows(v) {
        let _ = writeln!(
            o,
            "{:>4}    {:<17} {:<11} {:<9} {}",
            u(r, "vlan"),
            dotted(&s(r, "mac")),
            s(r, "type").to_uppercase(),
            s(r, "port"),
            s(r, "age")
        );
    }
    let _ = writeln!(
        o,
        "Total Mac Addresses for this criterion: {}",
        rows(v).len()
    );
    o
}

pub fn mac_count(v: &Value) -> String {
    let mut o = String::new();
    for r in rows(&v["vlans"]) {
        let _ = writeln!(o, "Mac Entries for Vlan {}:", u(r, "vlan"));
        let _ = writeln!(o, "---------------------------");
        let _ = writeln!(o, "Dynamic Address Count  : {}", u(r, "dynamic"));
        let _ = writeln!(o, "Static  Address Count  : {}", u(r, "static"));
        let _ = writeln!(o, "Total Mac Addresses    : {}", u(r, "count"));
        let _ = writeln!(o, "Learning Limit         : {}", s(r, "limit"));
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "Total Mac Address Space Available: {}",
        u(v, "capacity").saturating_sub(u(v, "total"))
    );
    let _ = writeln!(
        o,
        "Learned {}  moves {}  aged {}  refused by limit {}  refused table full {}  learn queue overflows {}",
        u(v, "learned"),
        u(v, "moves"),
        u(v, "aged"),
        u(v, "limit_refused"),
        u(v, "table_full"),
        u(v, "learn_queue_full")
    );
    o
}

fn drop_summary(d: &Value) -> String {
    let parts: Vec<String> = d
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect()
        })
        .unwrap_or_default();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

pub fn counters(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<15} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10}  Drops",
        "Port", "RX frames", "RX bytes", "TX frames", "TX bytes", "RX flood", "TX flood"
    );
    for r in rows(&v["ports"]) {
        let _ = writeln!(
            o,
            "{:<15} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10}  {}",
            s(r, "name"),
            u(r, "rx_frames"),
            u(r, "rx_bytes"),
            u(r, "tx_frames"),
            u(r, "tx_bytes"),
            u(r, "rx_flooded"),
            u(r, "tx_flooded"),
            drop_summary(&r["drops"])
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<6} {:>12} {:>14} {:>12} {:>14} {:>10}  Drops",
        "VLAN", "RX frames", "RX bytes", "TX frames", "TX bytes", "Flooded"
    );
    for r in rows(&v["vlans"]) {
        let _ = writeln!(
            o,
            "{:<6} {:>12} {:>14} {:>12} {:>14} {:>10}  {}",
            u(r, "vlan"),
            u(r, "rx_frames"),
            u(r, "rx_bytes"),
            u(r, "tx_frames"),
            u(r, "tx_bytes"),
            u(r, "flooded"),
            drop_summary(&r["drops"])
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mac_table_uses_dotted_macs_and_totals() {
        let t = mac_table(&json!([
            {"vlan": 10, "mac": "02:00:00:00:00:01", "type": "dynamic", "port": "sw1", "age": 3},
            {"vlan": 10, "mac": "02:00:00:00:00:02", "type": "static", "port": "sw2", "age": null}
        ]));
        assert!(t.contains("0200.0000.0001"), "{t}");
        assert!(t.contains("DYNAMIC") && t.contains("STATIC"));
        assert!(t.contains("Total Mac Addresses for this criterion: 2"));
    }

    #[test]
    fn counters_list_only_nonzero_drops() {
        let t = counters(&json!({"ports": [{"name": "sw1", "rx_frames": 5,
            "drops": {"malformed": 2, "oversize": 0}}], "vlans": []}));
        assert!(t.contains("malformed 2") && !t.contains("oversize"), "{t}");
    }
}
