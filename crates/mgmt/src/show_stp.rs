//! `show spanning-tree` (docs/stp.md): the root, this bridge, and each
//! port's role, state and designated bridge, then BPDU counters.

use super::*;

fn seconds(v: &Value, k: &str) -> String {
    match v.get(k).and_then(Value::as_f64) {
        Some(x) if x.fract() == 0.0 => format!("{x:.0} s"),
        Some(x) => format!("{x:.1} s"),
        None => "-".into(),
    }
}

/// `show spanning-tree`.
pub fn spanning_tree(v: &Value) -> String {
    let mut o = String::new();
    if v.get("enabled") == Some(&Value::Bool(false)) {
        let _ = writeln!(
            o,
            "Spanning tree is not running (no spanning-tree section in the configuration)"
        );
        return o;
    }
    let _ = writeln!(o, "Spanning tree mode {}", s(v, "mode"));
    let root = if flag(v, "is_root") {
        "this bridge is the root".to_string()
    } else {
        format!(
            "cost {}, root port {}",
            u(v, "root_cost"),
            text(v.get("root_port"))
        )
    };
    let _ = writeln!(o, "  Root ID    {}  ({root})", s(v, "root_id"));
    let _ = writeln!(
        o,
        "             hello {}, max age {}, forward delay {}",
        seconds(v, "hello_time"),
        seconds(v, "max_age"),
        seconds(v, "forward_delay")
    );
    let _ = writeln!(o, "  Bridge ID  {}", s(v, "bridge_id"));
    let _ = writeln!(
        o,
        "             hello {} s, max age {} s, forward delay {} s",
        u(v, "bridge_hello_time"),
        u(v, "bridge_max_age"),
        u(v, "bridge_forward_delay")
    );
    let tc = u(v, "topology_changes");
    let last = match v.get("last_topology_change_s").and_then(Value::as_f64) {
        Some(x) => format!(", last {x:.1} s ago"),
        None => String::new(),
    };
    let _ = writeln!(o, "  Topology changes {tc}{last}");
    let ports = rows_at(v, "ports");
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Interface",
        "Role",
        "State",
        ">Cost",
        "Prio.Nbr",
        "Designated bridge",
        "Port",
        "Type",
    ]);
    for p in ports {
        let mut ty = vec![if flag(p, "edge") { "edge" } else { "p2p" }];
        if s(p, "version") == "stp" {
            ty.push("stp");
        }
        if flag(p, "err_disabled") {
            ty.push("bpdu-guard-err-disabled");
        } else if flag(p, "bpdu_guard") {
            ty.push("bpdu-guard");
        }
        if flag(p, "root_guard") {
            ty.push("root-guard");
        }
        t.row(vec![
            s(p, "name"),
            s(p, "role"),
            s(p, "state"),
            u(p, "cost").to_string(),
            s(p, "port_id"),
            s(p, "designated_bridge"),
            s(p, "designated_port"),
            ty.join(" "),
        ]);
    }
    t.render(&mut o);
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Interface",
        ">BPDUs in",
        ">BPDUs out",
        ">TC in",
        ">TC out",
        ">Bad",
        ">To forwarding",
    ]);
    for p in ports {
        t.row(vec![
            s(p, "name"),
            u(p, "bpdus_rx").to_string(),
            u(p, "bpdus_tx").to_string(),
            u(p, "tc_rx").to_string(),
            u(p, "tc_tx").to_string(),
            u(p, "bad_rx").to_string(),
            u(p, "forward_transitions").to_string(),
        ]);
    }
    t.render(&mut o);
    o
}
