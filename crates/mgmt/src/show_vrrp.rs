//! `show vrrp` (docs/vrrp.md): one line per virtual router, then each
//! group's detail and the receive counters of each interface.

use super::*;

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// `show vrrp`.
pub fn vrrp(v: &Value) -> String {
    let mut o = String::new();
    if v.get("enabled") == Some(&Value::Bool(false)) {
        let _ = writeln!(
            o,
            "VRRP is not configured (no vrrp groups on any interface)"
        );
        return o;
    }
    let groups = rows(v.get("groups").unwrap_or(&Value::Null));
    let _ = writeln!(
        o,
        "{:<12} {:>4} {:<7} {:>4} {:<3} {:<16} {:<16} {:>7} {:>5}",
        "Interface", "VRID", "State", "Pri", "Pre", "Virtual IP", "Master", "Adv ms", "Trans"
    );
    for g in groups {
        let addrs = rows(g.get("addresses").unwrap_or(&Value::Null));
        let first = addrs.first().map(|a| text(Some(a))).unwrap_or_default();
        let master = match g.get("master").and_then(Value::as_str) {
            Some(m) if m == s(g, "primary") => "local".to_string(),
            Some(m) => m.to_string(),
            None => "-".to_string(),
        };
        let _ = writeln!(
            o,
            "{:<12} {:>4} {:<7} {:>4} {:<3} {:<16} {:<16} {:>7} {:>5}",
            s(g, "interface"),
            u(g, "vrid"),
            s(g, "state"),
            u(g, "priority"),
            if flag(g, "preempt") { "Y" } else { "N" },
            first,
            master,
            u(g, "advert-interval-ms"),
            u(g, "transitions"),
        );
    }
    for g in groups {
        let addrs: Vec<String> = rows(g.get("addresses").unwrap_or(&Value::Null))
            .iter()
            .map(|a| text(Some(a)))
            .collect();
        let c = g.get("counters").unwrap_or(&Value::Null);
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{} - Group {} (VRRPv3, IPv4)",
            s(g, "interface"),
            u(g, "vrid")
        );
        let _ = writeln!(
            o,
            "  State is {} for {:.1} s ({}), {} transitions, {} times master",
            s(g, "state"),
            u(g, "in-state-ms") as f64 / 1000.0,
            g.get("last-change")
                .and_then(Value::as_str)
                .unwrap_or("no change yet"),
            u(g, "transitions"),
            u(g, "became-master"),
        );
        let _ = writeln!(
            o,
            "  Virtual IP address {}, virtual MAC {}",
            addrs.join(", "),
            s(g, "virtual-mac")
        );
        let _ = writeln!(
            o,
            "  Priority {}{}, preempt {}, accept mode {}",
            u(g, "priority"),
            if flag(g, "owner") {
                " (address owner)"
            } else {
                ""
            },
            onoff(flag(g, "preempt")),
            onoff(flag(g, "accept-mode")),
        );
        let _ = writeln!(
            o,
            "  Advertisement interval {} ms, master's {} ms, master down interval {} ms",
            u(g, "advert-interval-ms"),
            u(g, "master-advert-interval-ms"),
            u(g, "master-down-interval-ms"),
        );
        let master = match g.get("master").and_then(Value::as_str) {
            Some(m) if m == s(g, "primary") => format!("{m} (local)"),
            Some(m) => m.to_string(),
            None => "unknown".to_string(),
        };
        let _ = writeln!(
            o,
            "  Master router {master}, local address {}",
            s(g, "primary")
        );
        let _ = writeln!(
            o,
            "  Advertisements sent {}, received {}; priority 0 sent {}, received {}",
            u(c, "adverts-sent"),
            u(c, "adverts-received"),
            u(c, "priority-zero-sent"),
            u(c, "priority-zero-received"),
        );
        let _ = writeln!(
            o,
            "  Gratuitous ARPs {}, address-list mismatches {}, send errors {}",
            u(c, "gratuitous-arps"),
            u(c, "address-mismatch"),
            u(c, "send-errors"),
        );
    }
    for i in rows(v.get("interfaces").unwrap_or(&Value::Null)) {
        let dropped: Vec<String> = i
            .get("dropped")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, n)| format!("{k} {}", n.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{} (twin {}): {} VRRP packets received, dropped: {}; unknown VRID {}",
            s(i, "interface"),
            s(i, "tap"),
            u(i, "received"),
            if dropped.is_empty() {
                "none".to_string()
            } else {
                dropped.join(", ")
            },
            u(i, "unknown-vrid"),
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_groups_and_drops() {
        let v = serde_json::json!({
            "groups": [{
                "interface": "sw1", "vrid": 7, "state": "Master", "priority": 200,
                "owner": false, "preempt": true, "accept-mode": false,
                "virtual-mac": "00:00:5e:00:01:07", "addresses": ["192.0.2.254"],
                "primary": "192.0.2.2", "master": "192.0.2.2",
                "advert-interval-ms": 1000, "master-advert-interval-ms": 1000,
                "master-down-interval-ms": 3218, "transitions": 2, "became-master": 1,
                "last-change": "master down interval expired", "in-state-ms": 12300,
                "counters": {"adverts-sent": 12, "adverts-received": 3}
            }],
            "interfaces": [{"interface": "sw1", "tap": "ly-sw1", "received": 5,
                "unknown-vrid": 1, "dropped": {"bad-checksum": 2}}]
        });
        let t = vrrp(&v);
        assert!(
            t.contains("sw1             7 Master   200 Y   192.0.2.254      local"),
            "{t}"
        );
        assert!(t.contains("sw1 - Group 7 (VRRPv3, IPv4)"), "{t}");
        assert!(t.contains("State is Master for 12.3 s"), "{t}");
        assert!(t.contains("Master router 192.0.2.2 (local)"), "{t}");
        assert!(t.contains("dropped: bad-checksum 2; unknown VRID 1"), "{t}");
        assert!(vrrp(&serde_json::json!({"enabled": false})).contains("not configured"));
    }
}
