//! `show virtual-switch` (docs/virtual-switch.md): the domain, this node's
//! role and the peer's, the peer link and keepalive, and who serves each
//! multichassis channel.

use super::*;

/// `show virtual-switch`.
pub fn virtual_switch(v: &Value) -> String {
    let mut o = String::new();
    if v.get("enabled") == Some(&Value::Bool(false)) {
        let _ = writeln!(
            o,
            "Virtual switch is not configured (no virtual-switch section in the configuration)"
        );
        return o;
    }
    let _ = writeln!(
        o,
        "Virtual-switch domain {}, status {}",
        u(v, "domain_id"),
        s(v, "status")
    );
    let _ = writeln!(
        o,
        "  System MAC {}, LACP system priority {}",
        s(v, "system_mac"),
        u(v, "system_priority")
    );
    let _ = writeln!(
        o,
        "  This node  {}: {}, priority {}, multichassis members {}",
        s(v, "node"),
        s(v, "role"),
        u(v, "priority"),
        s(v, "multichassis_members")
    );
    match v.get("peer") {
        Some(p) if p.is_object() => {
            let _ = writeln!(
                o,
                "  Peer       {}, priority {}, {} state copy, last heard {} ms ago",
                s(p, "role"),
                u(p, "priority"),
                if flag(p, "synced") {
                    "has our"
                } else {
                    "lacks our"
                },
                u(p, "last_heard_ms")
            );
        }
        _ => {
            let _ = writeln!(o, "  Peer       never heard");
        }
    }
    let _ = writeln!(
        o,
        "  Dual-active events {}, peer goodbyes {}",
        u(v, "dual_active_events"),
        u(v, "goodbyes")
    );
    let pl = v.get("peer_link").cloned().unwrap_or(Value::Null);
    let members: Vec<String> = pl
        .get("members")
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .map(|m| format!("{} {}", s(m, "name"), s(m, "state")))
                .collect()
        })
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "  Peer link  {} ({}){}{}",
        s(&pl, "state"),
        text(pl.get("ports")),
        match pl.get("mode").and_then(Value::as_str) {
            Some("aggregate") => ", aggregated",
            Some(_) => ", active/standby",
            None => "",
        },
        if members.is_empty() {
            String::new()
        } else {
            format!(": {}", members.join(", "))
        }
    );
    if let Some(why) = pl.get("no_data_reason").and_then(Value::as_str) {
        let _ = writeln!(o, "             no data across: {why}");
    }
    if let Some(m) = pl.get("messages").filter(|m| m.is_object()) {
        let bad: u64 = m
            .get("rx_bad")
            .and_then(Value::as_object)
            .map(|b| b.values().filter_map(Value::as_u64).sum())
            .unwrap_or(0);
        let _ = writeln!(
            o,
            "             messages sent {} ({} not sent), received {}, dropped: {} malformed, {} wrong domain, {} unexpected",
            u(m, "tx"),
            u(m, "tx_errors"),
            u(m, "rx"),
            bad,
            u(m, "rx_wrong_domain"),
            u(m, "rx_unexpected")
        );
        let _ = writeln!(
            o,
            "             synced MACs {} from peer ({}), updates sent {} / received {}, full copies sent {} / received {} ({} incomplete)",
            u(m, "synced_macs"),
            if flag(m, "synced") {
                "copy complete"
            } else {
                "no complete copy"
            },
            u(m, "macs_tx"),
            u(m, "macs_rx"),
            u(m, "copies_tx"),
            u(m, "copies_rx"),
            u(m, "copy_mismatch")
        );
        let nb = m.get("neighbors").cloned().unwrap_or(Value::Null);
        let groups = match m.get("groups") {
            Some(g) if !g.is_null() => format!("groups {} from peer", u(g, "from_peer")),
            _ => "groups: no multicast".to_string(),
        };
        let _ = writeln!(
            o,
            "             neighbours {} local, {} from peer ({} installed, {} errors), {groups}",
            u(&nb, "local"),
            u(&nb, "from_peer"),
            u(&nb, "installed"),
            u(&nb, "install_errors"),
        );
    }
    let ka = v.get("keepalive").cloned().unwrap_or(Value::Null);
    let _ = writeln!(
        o,
        "  Keepalive  {}: {} -> {} udp/{}, every {} ms, timeout {} ms",
        s(&ka, "state"),
        s(&ka, "source"),
        s(&ka, "peer"),
        u(&ka, "port"),
        u(&ka, "interval_ms"),
        u(&ka, "timeout_ms")
    );
    if let Some(e) = ka.get("error").and_then(Value::as_str) {
        let _ = writeln!(o, "             error: {e}");
    }
    let bad: u64 = ka
        .get("rx_bad")
        .and_then(Value::as_object)
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    let _ = writeln!(
        o,
        "             sent {}, received {}, dropped: {} malformed, {} wrong source, {} wrong domain, {} system MAC mismatch",
        u(&ka, "tx"),
        u(&ka, "rx"),
        bad,
        u(&ka, "rx_wrong_source"),
        u(&ka, "rx_wrong_domain"),
        u(&ka, "rx_system_mac_mismatch")
    );
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Channel",
        ">Id",
        "Local members",
        "Local",
        "Served by",
        "LACP partner (here)",
        "LACP partner (peer)",
    ]);
    let partner = |p: Option<&Value>| match p {
        Some(p) if !p.is_null() => format!("{} key {}", s(p, "system"), u(p, "key")),
        _ => "-".to_string(),
    };
    for c in rows_at(v, "channels") {
        t.row(vec![
            s(c, "name"),
            u(c, "id").to_string(),
            text(c.get("local_members")),
            if flag(c, "local_members_enabled") {
                "up"
            } else {
                "down"
            }
            .into(),
            s(c, "served_by"),
            partner(c.get("partner")),
            if c["partner_match"] == Value::Bool(false) {
                format!("{} (differs)", partner(c.get("peer_partner")))
            } else {
                partner(c.get("peer_partner"))
            },
        ]);
    }
    t.render(&mut o);
    o
}
