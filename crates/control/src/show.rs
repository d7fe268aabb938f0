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
    let l3 = &v["l3"];
    if l3.is_object() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Routing: rx {}  forwarded {}  punted {} (queue full {})  injected {}",
            u(l3, "rx_frames"),
            u(l3, "forwarded"),
            u(l3, "punted"),
            u(l3, "punt_queue_full"),
            u(l3, "injected")
        );
        let _ = writeln!(o, "  drops: {}", drop_summary(&l3["drops"]));
        let _ = writeln!(o, "  punts: {}", drop_summary(&l3["punts"]));
        let _ = writeln!(
            o,
            "  icmp errors: {} sent, {} suppressed ({})",
            u(l3, "icmp_sent"),
            u(l3, "icmp_suppressed"),
            drop_summary(&l3["icmp_requested"])
        );
        let _ = writeln!(
            o,
            "  neighbours: {} updates from the kernel, {} resyncs, {} refused (table full)",
            u(l3, "neighbor_updates"),
            u(l3, "neighbor_resyncs"),
            u(l3, "neighbor_table_full")
        );
    }
    o
}

pub fn ip_interfaces(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<15} {:<8} {:<15} {:<17} {:>5} {:<7} Addresses",
        "Interface", "Status", "TAP", "MAC", "MTU", "uRPF"
    );
    for r in rows(v) {
        let addrs: Vec<String> = rows(&r["addresses"])
            .iter()
            .filter_map(|a| a.as_str().map(String::from))
            .chain(std::iter::once(s(r, "link_local")))
            .collect();
        let _ = writeln!(
            o,
            "{:<15} {:<8} {:<15} {:<17} {:>5} {:<7} {}",
            s(r, "name"),
            s(r, "state"),
            s(r, "tap"),
            s(r, "mac"),
            u(r, "mtu"),
            s(r, "urpf"),
            addrs.join(" ")
        );
    }
    o
}

/// Route codes as on other routers: C connected, S static, O OSPF, B BGP.
fn route_code(source: &str) -> &'static str {
    match source {
        "connected" => "C",
        "static" | "frr-static" | "kernel-static" => "S",
        "ospf" => "O",
        "bgp" => "B",
        "isis" => "i",
        "rip" | "ripng" => "R",
        "kernel" => "K",
        _ => "?",
    }
}

pub fn routes(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Codes: C connected, S static, O OSPF, B BGP, K kernel; * installed, ! unresolvable"
    );
    for r in rows(v) {
        let flag = if r["installed"] == Value::Bool(true) {
            "*"
        } else if r["unresolvable"] == Value::Bool(true) {
            "!"
        } else {
            " "
        };
        let code = route_code(r["source"].as_str().unwrap_or(""));
        let prefix = s(r, "prefix");
        if r["blackhole"] == Value::Bool(true) {
            let _ = writeln!(
                o,
                "{code}{flag} {prefix:<43} blackhole ({})",
                s(r, "source")
            );
            continue;
        }
        let hops = rows(&r["nexthops"]);
        for (k, h) in hops.iter().enumerate() {
            let via = match h.get("gateway").and_then(Value::as_str) {
                Some(g) => format!("via {g}, {}", s(h, "interface")),
                None => format!("directly connected, {}", s(h, "interface")),
            };
            let w = u(h, "weight");
            let w = if hops.len() > 1 {
                format!(" weight {w}")
            } else {
                String::new()
            };
            if k == 0 {
                let _ = writeln!(o, "{code}{flag} {prefix:<43} {via}{w} ({})", s(r, "source"));
            } else {
                let _ = writeln!(o, "   {:<43} {via}{w}", "");
            }
        }
    }
    let _ = writeln!(o, "Total: {}", rows(v).len());
    o
}

pub fn route_summary(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{:<16} {:>10} {:>10}", "Source", "Routes", "Installed");
    for r in rows(&v["sources"]) {
        let _ = writeln!(
            o,
            "{:<16} {:>10} {:>10}",
            s(r, "source"),
            u(r, "routes"),
            u(r, "installed")
        );
    }
    let _ = writeln!(
        o,
        "{:<16} {:>10} {:>10}",
        "Totals",
        u(v, "prefixes"),
        u(v, "installed")
    );
    let _ = writeln!(
        o,
        "Unresolvable: {}  Next hops: {} of {}  ECMP groups: {} of {}  FIB nodes: {} ({} KiB)",
        u(v, "unresolvable"),
        u(v, "next_hops"),
        u(v, "next_hop_capacity"),
        u(v, "groups"),
        u(v, "group_capacity"),
        u(&v["lpm"], "nodes"),
        (u(&v["lpm"], "lookup_bytes") + u(&v["lpm"], "control_bytes")) / 1024
    );
    if v["fpm"].is_object() {
        let _ = writeln!(o, "FPM: {}", v["fpm"]);
    }
    o
}

pub fn neighbors(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<40} {:<15} {:<10} {:>6}  Interface",
        "Address", "MAC", "State", "Age"
    );
    for r in rows(v) {
        let _ = writeln!(
            o,
            "{:<40} {:<15} {:<10} {:>6}  {}",
            s(r, "address"),
            dotted(&s(r, "mac")),
            s(r, "state"),
            u(r, "age"),
            s(r, "interface")
        );
    }
    let _ = writeln!(o, "Total: {}", rows(v).len());
    o
}

pub fn access_lists(v: &Value) -> String {
    let mut o = String::new();
    for l in rows(v) {
        let attached: Vec<String> = rows(l.get("attached").unwrap_or(&Value::Null))
            .iter()
            .filter_map(|a| a.as_str().map(String::from))
            .collect();
        let _ = writeln!(
            o,
            "{} access list {} ({} rules){}",
            s(l, "type"),
            s(l, "name"),
            u(l, "rules"),
            if attached.is_empty() {
                " — not attached".to_string()
            } else {
                format!(", on {}", attached.join(", "))
            }
        );
        if let Some(c) = l.get("compiled").filter(|c| !c.is_null()) {
            let _ = writeln!(
                o,
                "    compiled: {} KiB, {}",
                u(c, "memory-bytes") / 1024,
                s(c, "shape")
            );
        }
        let entries = rows(l.get("entries").unwrap_or(&Value::Null));
        for e in entries {
            let _ = writeln!(
                o,
                "    {:>6} {} ({} matches){}",
                u(e, "seq"),
                s(e, "rule"),
                u(e, "hits"),
                match e.get("remark").and_then(Value::as_str) {
                    Some(r) => format!("  ! {r}"),
                    None => String::new(),
                }
            );
        }
        if (entries.len() as u64) < u(l, "rules") {
            let _ = writeln!(
                o,
                "    ... {} more rules without matches (show access-lists {} all)",
                u(l, "rules") - entries.len() as u64,
                s(l, "name")
            );
        }
        let _ = writeln!(
            o,
            "           implicit deny ({} matches)",
            u(l, "implicit-deny-hits")
        );
    }
    if o.is_empty() {
        o.push_str("no access lists\n");
    }
    o
}

/// `show access-lists interface PORT` / `vlan N`: per attachment.
pub fn access_lists_attached(v: &Value) -> String {
    let mut o = String::new();
    for l in rows(v) {
        let place = match l.get("interface").and_then(Value::as_str) {
            Some(p) => p.to_string(),
            None => format!("vlan {}", u(l, "vlan")),
        };
        let _ = writeln!(
            o,
            "{place} {}: {} access list {} ({} matches here)",
            s(l, "direction"),
            s(l, "type"),
            s(l, "name"),
            u(l, "matches")
        );
        let entries = rows(l.get("entries").unwrap_or(&Value::Null));
        for e in entries {
            let _ = writeln!(
                o,
                "    {:>6} {} ({} matches)",
                u(e, "seq"),
                s(e, "rule"),
                u(e, "hits")
            );
        }
        if (entries.len() as u64) < u(l, "rules") {
            let _ = writeln!(
                o,
                "    ... {} more rules without matches here (add `all`)",
                u(l, "rules") - entries.len() as u64
            );
        }
        let _ = writeln!(
            o,
            "           implicit deny ({} matches)",
            u(l, "implicit-deny-hits")
        );
    }
    if o.is_empty() {
        o.push_str("no access lists attached\n");
    }
    o
}

pub fn policy_maps(v: &Value) -> String {
    let mut o = String::new();
    for p in rows(v) {
        let _ = writeln!(
            o,
            "{}  service-policy {}: {}",
            s(p, "port"),
            if s(p, "direction") == "in" {
                "input"
            } else {
                "output"
            },
            s(p, "policy")
        );
        for c in rows(p.get("classes").unwrap_or(&Value::Null)) {
            let _ = writeln!(
                o,
                "    class {}: {} packets, {} bytes",
                s(c, "class"),
                u(c, "packets"),
                u(c, "bytes")
            );
            if c.get("set-dscp").is_some_and(|x| !x.is_null()) {
                let _ = writeln!(o, "      set dscp {}", s(c, "set-dscp"));
            }
            if c.get("set-pcp").is_some_and(|x| !x.is_null()) {
                let _ = writeln!(o, "      set pcp {}", s(c, "set-pcp"));
            }
            if let Some(q) = c.get("queue").filter(|x| !x.is_null()) {
                let kind = if q.get("priority").and_then(Value::as_bool) == Some(true) {
                    "priority".to_string()
                } else {
                    format!("weight {}", u(q, "weight"))
                };
                let _ = writeln!(
                    o,
                    "      queue {kind}, depth {}: {} tail drops",
                    u(q, "depth"),
                    u(q, "drops")
                );
            }
            if let Some(pol) = c.get("police").filter(|x| !x.is_null()) {
                let _ = writeln!(
                    o,
                    "      police cir {} bps bc {} B pir {} bps be {} B",
                    u(pol, "cir"),
                    u(pol, "cbs"),
                    u(pol, "pir"),
                    u(pol, "pbs")
                );
                let _ = writeln!(
                    o,
                    "        conformed {} exceeded {} violated {} dropped {}",
                    u(pol, "conform"),
                    u(pol, "exceed"),
                    u(pol, "violate"),
                    u(pol, "dropped")
                );
            }
        }
    }
    if o.is_empty() {
        o.push_str("no service policies attached\n");
    }
    o
}

pub fn flow_cache(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Flow export to {} ({}), active timeout {} s, inactive {} s, sampling 1:{}",
        s(v, "collector"),
        s(v, "version"),
        u(v, "active-timeout"),
        u(v, "inactive-timeout"),
        u(v, "sampling")
    );
    for w in rows(v.get("workers").unwrap_or(&Value::Null)) {
        let _ = writeln!(
            o,
            "  worker {}: {} flows of {} ({} MiB), {} packets found the cache full, {} records queued",
            u(w, "worker"),
            u(w, "flows"),
            u(w, "capacity"),
            u(w, "memory-bytes") >> 20,
            u(w, "cache-full"),
            u(w, "queued")
        );
    }
    if let Some(e) = v.get("export").filter(|e| !e.is_null()) {
        let _ = writeln!(o, "  export: {e}");
    }
    let _ = writeln!(
        o,
        "{:<39} {:<39} {:>5} {:>5} {:>5} {:>3} {:<10} {:<10} {:>10} {:>12}",
        "Source", "Destination", "Proto", "Sport", "Dport", "ToS", "In", "Out", "Packets", "Bytes"
    );
    for f in rows(v.get("top").unwrap_or(&Value::Null)) {
        let _ = writeln!(
            o,
            "{:<39} {:<39} {:>5} {:>5} {:>5} {:>3} {:<10} {:<10} {:>10} {:>12}",
            s(f, "src"),
            s(f, "dst"),
            u(f, "proto"),
            u(f, "sport"),
            u(f, "dport"),
            u(f, "tos"),
            s(f, "in"),
            s(f, "out"),
            u(f, "packets"),
            u(f, "bytes")
        );
    }
    o
}

pub fn copp(v: &Value) -> String {
    let mut o = String::new();
    let on = v.get("enabled").and_then(Value::as_bool) == Some(true);
    let _ = writeln!(
        o,
        "Control-plane policing: {}",
        if on { "on" } else { "off" }
    );
    let _ = writeln!(
        o,
        "{:<12} {:>10} {:>8} {:>12} {:>12}",
        "Class", "Rate pps", "Burst", "Passed", "Dropped"
    );
    for r in rows(v.get("classes").unwrap_or(&Value::Null)) {
        let rate = r.get("rate").and_then(Value::as_u64);
        let _ = writeln!(
            o,
            "{:<12} {:>10} {:>8} {:>12} {:>12}",
            s(r, "class"),
            rate.map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
            s(r, "burst"),
            u(r, "passed"),
            u(r, "dropped")
        );
    }
    o
}

pub fn monitor(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<12} {:<9} {:<24} {:<12} {:>12} {:>8}",
        "Session", "Direction", "Sources", "Destination", "Copies", "Drops"
    );
    for r in rows(v) {
        let list = |k: &str| -> Vec<String> {
            rows(r.get(k).unwrap_or(&Value::Null))
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| format!("vlan {x}"))
                })
                .collect()
        };
        let mut src = list("sources");
        src.extend(list("vlans"));
        let _ = writeln!(
            o,
            "{:<12} {:<9} {:<24} {:<12} {:>12} {:>8}",
            s(r, "name"),
            s(r, "direction"),
            src.join(","),
            s(r, "destination"),
            u(r, "tx_frames"),
            u(r, "drops")
        );
    }
    o
}

pub fn backup_pairs(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<16} {:<14} {:<16} {:<14} {:<8} {:>9} {:>14}",
        "Primary", "State", "Backup", "State", "Preempt", "Failovers", "Last (ms ago)"
    );
    for r in rows(v) {
        let last = r
            .get("last_failover_ms_ago")
            .and_then(Value::as_u64)
            .map_or("-".to_string(), |x| x.to_string());
        let _ = writeln!(
            o,
            "{:<16} {:<14} {:<16} {:<14} {:<8} {:>9} {:>14}",
            s(r, "primary"),
            s(r, "primary_state"),
            s(r, "backup"),
            s(r, "backup_state"),
            if r.get("preempt").and_then(Value::as_bool) == Some(true) {
                "yes"
            } else {
                "no"
            },
            u(r, "failovers"),
            last
        );
    }
    o
}

pub fn port_channels(v: &Value) -> String {
    let mut o = String::new();
    for r in rows(v) {
        let up = r.get("up").and_then(Value::as_bool) == Some(true);
        let _ = writeln!(
            o,
            "{} ({}): lacp {}, rate {}, load-balance {}, min-links {}",
            s(r, "name"),
            if up { "up" } else { "down" },
            s(r, "lacp"),
            s(r, "rate"),
            s(r, "load_balance"),
            u(r, "min_links")
        );
        let _ = writeln!(
            o,
            "  {:<16} {:<6} {:<13} {:<28} {:<28}",
            "Member", "Link", "Distributing", "Actor state", "Partner"
        );
        for m in rows(r.get("members").unwrap_or(&Value::Null)) {
            let d = m.get("distributing").and_then(Value::as_bool) == Some(true);
            let _ = writeln!(
                o,
                "  {:<16} {:<6} {:<13} {:<28} {:<28}",
                s(m, "port"),
                s(m, "link"),
                if d { "yes" } else { "no" },
                s(m, "actor_state"),
                s(m, "partner")
            );
        }
    }
    o
}

/// Snooping summary lines per VLAN (both renderers start with them).
fn snooping_vlans(v: &Value, o: &mut String) {
    for r in rows(v.get("vlans").unwrap_or(&Value::Null)) {
        let routers: Vec<String> = rows(r.get("router-ports").unwrap_or(&Value::Null))
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect();
        let _ = writeln!(
            o,
            "VLAN {}: {} groups, querier {}, router ports {}",
            u(r, "vlan"),
            u(r, "groups"),
            r.get("querier")
                .and_then(Value::as_str)
                .unwrap_or("none heard"),
            if routers.is_empty() {
                "none".to_string()
            } else {
                routers.join(",")
            }
        );
    }
}

pub fn snooping_count(v: &Value) -> String {
    let mut o = String::new();
    snooping_vlans(v, &mut o);
    o
}

pub fn snooping_groups(v: &Value) -> String {
    let mut o = String::new();
    snooping_vlans(v, &mut o);
    let _ = writeln!(
        o,
        "{:<6} {:<40} {:<16} {:<8} Sources",
        "VLAN", "Group", "Port", "Mode"
    );
    for g in rows(v.get("groups").unwrap_or(&Value::Null)) {
        for p in rows(g.get("ports").unwrap_or(&Value::Null)) {
            let srcs: Vec<String> = rows(p.get("sources").unwrap_or(&Value::Null))
                .iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect();
            let _ = writeln!(
                o,
                "{:<6} {:<40} {:<16} {:<8} {}",
                u(g, "vlan"),
                s(g, "group"),
                s(p, "port"),
                s(p, "mode"),
                srcs.join(",")
            );
        }
    }
    o
}

pub fn mroutes(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} routes: {} (S,G), {} (*,G); {} snooped, {} routed; {} bytes",
        u(v, "count"),
        u(v, "s-g"),
        u(v, "star-g"),
        u(v, "snooped"),
        u(v, "routed"),
        u(v, "memory-bytes")
    );
    let Some(routes) = v.get("routes") else {
        return o;
    };
    let _ = writeln!(
        o,
        "{:<6} {:<28} {:<28} {:<10} {:<28} {:>12} {:>14}",
        "VLAN", "Source", "Group", "In", "Out", "Packets", "Bytes"
    );
    for r in rows(routes) {
        let oifs: Vec<String> = rows(r.get("oifs").unwrap_or(&Value::Null))
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect();
        let _ = writeln!(
            o,
            "{:<6} {:<28} {:<28} {:<10} {:<28} {:>12} {:>14}",
            r.get("vlan")
                .and_then(Value::as_u64)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into()),
            s(r, "source"),
            s(r, "group"),
            s(r, "iif"),
            oifs.join(","),
            u(r, "packets"),
            u(r, "bytes")
        );
    }
    o
}

/// "err-disabled (cause), recovery in N s" or "forwarding".
fn errdisable_state(e: &Value) -> String {
    if e.is_null() {
        return "forwarding".into();
    }
    match e.get("recovery-in-s").and_then(Value::as_u64) {
        Some(n) => format!("err-disabled ({}), recovery in {n} s", s(e, "cause")),
        None => format!("err-disabled ({}), until cleared", s(e, "cause")),
    }
}

/// `show storm-control`: one line per port and class with a limit.
pub fn storm_control(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<15} {:<16} {:>10} {:>12} {:<6} {:<9} State",
        "Port", "Class", "Level", "Dropped", "Storm", "Action"
    );
    for r in rows(v) {
        for class in ["broadcast", "multicast", "unknown-unicast"] {
            let c = &r[class];
            if c.get("level").is_none_or(Value::is_null) {
                continue;
            }
            let _ = writeln!(
                o,
                "{:<15} {:<16} {:>10} {:>12} {:<6} {:<9} {}",
                s(r, "port"),
                class,
                s(c, "level"),
                u(c, "drops"),
                if c["storm"] == true { "yes" } else { "no" },
                s(r, "action"),
                errdisable_state(&r["errdisabled"])
            );
        }
    }
    if rows(v).is_empty() {
        o = "no port has storm control\n".into();
    }
    o
}

/// `show loop-detect`.
pub fn loop_detect(v: &Value) -> String {
    if v["enabled"] != true {
        return "loop detection is off (no loop-detect: section)\n".into();
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Loop detection: probes every {} s on every switched port and VLAN, action {}, recovery {} s; {} probes sent",
        u(v, "interval-s"),
        s(v, "action"),
        u(v, "recovery-s"),
        u(v, "probes-sent")
    );
    let _ = writeln!(
        o,
        "{:<15} {:<7} {:>8} {:>6}  {:<28} State",
        "Port", "Probing", "Returned", "Loops", "Last loop"
    );
    for r in rows(&v["ports"]) {
        let last = match r.get("last-loop").filter(|x| !x.is_null()) {
            Some(l) => format!(
                "from {} vlan {}, {} s ago",
                s(l, "sent-on"),
                u(l, "vlan"),
                u(l, "ago-s")
            ),
            None => "-".into(),
        };
        let _ = writeln!(
            o,
            "{:<15} {:<7} {:>8} {:>6}  {:<28} {}",
            s(r, "port"),
            if r["probing"] == true { "yes" } else { "no" },
            u(r, "own-probes-received"),
            u(r, "loops"),
            last,
            errdisable_state(&r["errdisabled"])
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
    fn multicast_tables() {
        let t = mroutes(
            &json!({"count": 2, "s-g": 1, "star-g": 1, "snooped": 2, "routed": 0,
            "memory-bytes": 64, "routes": [
            {"vlan": 10, "source": "10.0.0.1", "group": "232.1.1.1", "iif": "any",
             "oifs": ["sw2", "sw3"], "packets": 7, "bytes": 896}]}),
        );
        assert!(t.contains("2 routes: 1 (S,G), 1 (*,G)"), "{t}");
        assert!(
            t.contains("232.1.1.1") && t.contains("sw2,sw3") && t.contains("896"),
            "{t}"
        );
        let g = snooping_groups(&json!({"vlans": [{"vlan": 10, "groups": 1,
            "router-ports": ["sw4"], "querier": "10.0.0.1"}],
            "groups": [{"vlan": 10, "group": "239.1.1.1",
            "ports": [{"port": "sw2", "mode": "include", "sources": ["10.9.9.9"]}]}]}));
        assert!(
            g.contains("VLAN 10: 1 groups, querier 10.0.0.1, router ports sw4"),
            "{g}"
        );
        assert!(
            g.contains("239.1.1.1") && g.contains("include") && g.contains("10.9.9.9"),
            "{g}"
        );
    }

    #[test]
    fn counters_list_only_nonzero_drops() {
        let t = counters(&json!({"ports": [{"name": "sw1", "rx_frames": 5,
            "drops": {"malformed": 2, "oversize": 0}}], "vlans": []}));
        assert!(t.contains("malformed 2") && !t.contains("oversize"), "{t}");
    }

    #[test]
    fn routes_show_codes_ecmp_and_blackholes() {
        let t = routes(&json!([
            {"prefix": "10.0.0.0/24", "source": "connected", "installed": true,
             "blackhole": false, "unresolvable": false,
             "nexthops": [{"interface": "sw1", "gateway": null, "weight": 1}]},
            {"prefix": "198.51.100.0/24", "source": "ospf", "installed": true,
             "blackhole": false, "unresolvable": false,
             "nexthops": [{"interface": "sw1", "gateway": "10.0.0.2", "weight": 1},
                          {"interface": "sw2", "gateway": "10.0.1.2", "weight": 1}]},
            {"prefix": "203.0.113.0/24", "source": "static", "installed": true,
             "blackhole": true, "unresolvable": false, "nexthops": []}
        ]));
        assert!(
            t.contains("C* 10.0.0.0/24") && t.contains("directly connected, sw1"),
            "{t}"
        );
        assert!(
            t.contains("O* 198.51.100.0/24") && t.contains("via 10.0.1.2, sw2"),
            "{t}"
        );
        assert!(
            t.contains("S* 203.0.113.0/24") && t.contains("blackhole"),
            "{t}"
        );
        assert!(t.contains("Total: 3"), "{t}");
        let s = route_summary(&json!({"prefixes": 3, "installed": 3,
            "sources": [{"source": "ospf", "routes": 240000, "installed": 240000}],
            "lpm": {"nodes": 10}, "next_hops": 4, "next_hop_capacity": 65536}));
        assert!(s.contains("ospf") && s.contains("240000"), "{s}");
    }
}
