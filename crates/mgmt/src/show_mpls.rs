//! `show mpls table` and `show mpls forwarding` (docs/mpls.md): the
//! label entries zebra gave Lanyard with their counters, and the label
//! plane in numbers.

use super::*;

/// Out-labels as an operator reads them: `pop` for none (PHP), labels
/// joined with `/` (outermost first).
fn out_labels(h: &Value) -> String {
    let l = rows_at(h, "out_labels");
    if l.is_empty() {
        "pop".into()
    } else {
        l.iter()
            .map(|x| text(Some(x)))
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// `show mpls table`: one row per way out of each in-label.
pub fn mpls_table(v: &Value) -> String {
    let mut o = String::new();
    let labels = rows_at(v, "labels");
    let mut t = Table::new(&[
        ">In-label",
        "Action",
        "Out-label",
        "Next hop",
        "Interface",
        ">Packets",
        ">Bytes",
        "Owner",
    ]);
    let (mut installed, mut packets) = (0, 0);
    for e in labels {
        if flag(e, "installed") {
            installed += 1;
        }
        packets += u(e, "packets");
        let hops = rows_at(e, "hops");
        let head = |first: bool| -> [String; 2] {
            if first {
                [s(e, "in_label"), s(e, "action")]
            } else {
                [String::new(), String::new()]
            }
        };
        let tail = |first: bool| -> [String; 3] {
            if first {
                [
                    u(e, "packets").to_string(),
                    u(e, "bytes").to_string(),
                    s(e, "protocol"),
                ]
            } else {
                [String::new(), String::new(), String::new()]
            }
        };
        if hops.is_empty() {
            let [a, b] = head(true);
            let [p, by, w] = tail(true);
            let (out, nh) = if s(e, "action") == "pop-lookup" {
                match e.get("vrf").and_then(Value::as_str) {
                    Some(v) => ("pop".to_string(), format!("(IP lookup, VRF {v})")),
                    None => ("pop".to_string(), "(IP lookup)".to_string()),
                }
            } else {
                ("-".to_string(), "(no usable path)".to_string())
            };
            t.row(vec![a, b, out, nh, "-".into(), p, by, w]);
        }
        for (k, h) in hops.iter().enumerate() {
            let [a, b] = head(k == 0);
            let [p, by, w] = tail(k == 0);
            t.row(vec![
                a,
                b,
                out_labels(h),
                s(h, "gateway"),
                s(h, "interface"),
                p,
                by,
                w,
            ]);
        }
    }
    let _ = writeln!(
        o,
        "MPLS label table: {}, {installed} installed, {packets} packets",
        plural(labels.len() as u64, "entry", "entries")
    );
    let _ = writeln!(o);
    if !labels.is_empty() {
        t.render(&mut o);
    }
    o
}

/// Labelled routes with their stacks: one row per path.
fn ftn_table(o: &mut String, ftn: &[Value]) {
    if ftn.is_empty() {
        return;
    }
    let _ = writeln!(o);
    let mut t = Table::new(&["Prefix", "Out-label", "Next hop", "Interface"]);
    for r in ftn {
        for (k, h) in rows_at(r, "hops").iter().enumerate() {
            let p = if k == 0 {
                s(r, "prefix")
            } else {
                String::new()
            };
            // An unlabelled member of a labelled route pushes nothing.
            let l = match out_labels(h).as_str() {
                "pop" => "-".to_string(),
                x => x.to_string(),
            };
            t.row(vec![p, l, s(h, "gateway"), s(h, "interface")]);
        }
    }
    t.render(o);
}

/// `show mpls forwarding`: the label plane in numbers, the labelled
/// routes (FTN), what the data path did and what was refused.
pub fn mpls_forwarding(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Label entries: {} ({} without a usable path)",
        u(v, "ilm_entries"),
        u(v, "ilm_unresolvable")
    );
    let _ = writeln!(o, "Labelled routes (FTN): {}", u(v, "ftn_routes"));
    let _ = writeln!(
        o,
        "NHLFEs: {} of {} ({} awaiting reclaim)",
        u(v, "nhlfes"),
        u(v, "nhlfe_capacity"),
        u(v, "quarantined_nhlfes")
    );
    ftn_table(&mut o, rows_at(v, "ftn"));
    for x in rows_at(v, "vpn") {
        let _ = writeln!(
            o,
            "\nVRF {}: {} label-pushing routes (VPN label under the transport's)",
            s(x, "vrf"),
            u(x, "routes")
        );
        ftn_table(&mut o, rows_at(x, "ftn"));
    }
    let d = v.get("data_path").unwrap_or(&Value::Null);
    let _ = writeln!(o);
    let _ = writeln!(o, "Data path:");
    let _ = writeln!(
        o,
        "  received {}, label-switched {}, popped and routed {}, labels pushed {}",
        u(d, "rx"),
        u(d, "forwarded"),
        u(d, "popped"),
        u(d, "pushed")
    );
    let _ = writeln!(
        o,
        "  TTL expired {} ({} answered down the LSP), router alert {}",
        u(d, "ttl_expired"),
        u(d, "ttl_icmp_down_lsp"),
        u(d, "router_alert")
    );
    let drops: Vec<String> = d
        .get("drops")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
                .map(|(k, n)| format!("{k} {}", n.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    let dl = if drops.is_empty() {
        "none".to_string()
    } else {
        drops.join(", ")
    };
    para(&mut o, &format!("  drops: {dl}"), 4);
    let c = v.get("counters").unwrap_or(&Value::Null);
    let _ = writeln!(o);
    let _ = writeln!(o, "From FRR:");
    let _ = writeln!(
        o,
        "  label entries added {}, withdrawn {}, swept {}; labelled route updates {}",
        u(c, "label_adds"),
        u(c, "label_dels"),
        u(c, "swept"),
        u(c, "ftn_updates")
    );
    let _ = writeln!(
        o,
        "  refused: bad label {}, NHLFE table full {}; no usable path {}",
        u(c, "bad_label"),
        u(c, "nhlfe_full"),
        u(c, "unresolvable")
    );
    o
}

/// `show mpls pseudowires` (alias `show l2vpn`): one row per pseudowire,
/// like a PE's `show l2vpn atom vc` / `show mpls l2transport vc`, then
/// the drops of those that have any.
pub fn mpls_pseudowires(v: &Value) -> String {
    let mut o = String::new();
    let pws = rows_at(v, "pseudowires");
    let _ = writeln!(
        o,
        "Pseudowires: {} configured, {} up; {} frames on circuit ports matched no circuit",
        pws.len(),
        u(v, "up"),
        u(v, "unmatched")
    );
    if let Some(sock) = v.get("socket").and_then(Value::as_str) {
        let _ = writeln!(o, "LDP signalling through zebra: {sock}");
    }
    if pws.is_empty() {
        return o;
    }
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Name", "Circuit", "Type", "Neighbor", ">PW-id", ">Local", ">Remote", "CW", "State",
        ">Tx pkts", ">Rx pkts",
    ]);
    let (mut dropped, mut down) = (Vec::new(), Vec::new());
    for w in pws {
        let circuit = match w.get("vlan").and_then(Value::as_u64) {
            Some(vl) => format!("{}.{vl}", s(w, "port")),
            None => s(w, "port"),
        };
        let ty = if u(w, "type") == 4 { "eth-vlan" } else { "eth" };
        let label = |k: &str| match w.get(k).and_then(Value::as_u64) {
            Some(l) => l.to_string(),
            None => "-".into(),
        };
        let state = if flag(w, "up") {
            "up".to_string()
        } else {
            down.push(format!("  {}: {}", s(w, "name"), s(w, "reason")));
            "down".to_string()
        };
        t.row(vec![
            s(w, "name"),
            circuit,
            ty.into(),
            s(w, "neighbor"),
            s(w, "pw_id"),
            label("local_label"),
            label("remote_label"),
            if flag(w, "control_word") { "on" } else { "off" }.into(),
            state,
            u(w, "tx_packets").to_string(),
            u(w, "rx_packets").to_string(),
        ]);
        let d: Vec<String> = w
            .get("drops")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(_, c)| c.as_u64().unwrap_or(0) > 0)
                    .map(|(k, c)| format!("{k} {}", c.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        if !d.is_empty() {
            dropped.push(format!("  {}: {}", s(w, "name"), d.join(", ")));
        }
    }
    t.render(&mut o);
    if !down.is_empty() {
        let _ = writeln!(o, "\nDown:");
        for d in down {
            let _ = writeln!(o, "{d}");
        }
    }
    if !dropped.is_empty() {
        let _ = writeln!(o, "\nDrops:");
        for d in dropped {
            let _ = writeln!(o, "{d}");
        }
    }
    o
}

/// `show mpls fast-reroute`: protected ports and their bypasses.
pub fn mpls_fast_reroute(v: &Value) -> String {
    let mut o = String::new();
    let rows = rows_at(v, "protected");
    let _ = writeln!(
        o,
        "Fast reroute: {} protected ports, {} on backup; {} pseudowires on a bypass",
        rows.len(),
        u(v, "on_backup"),
        u(v, "pseudowires_on_backup")
    );
    if rows.is_empty() {
        return o;
    }
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Protected",
        "Backup",
        "Next hop",
        "Labels",
        "Installed",
        "Resolved",
        "Active",
        ">Switches",
    ]);
    for r in rows {
        let labels: Vec<String> = r
            .get("labels")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|l| l.to_string()).collect())
            .unwrap_or_default();
        let yn = |k: &str| if flag(r, k) { "yes" } else { "no" }.to_string();
        t.row(vec![
            s(r, "protect"),
            s(r, "backup_port"),
            s(r, "next_hop"),
            if labels.is_empty() {
                "-".into()
            } else {
                labels.join("/")
            },
            yn("installed"),
            yn("backup_resolved"),
            s(r, "active"),
            u(r, "switches").to_string(),
        ]);
    }
    t.render(&mut o);
    o
}
