//! `show mpls table` / `show mpls forwarding` answers: the FIB manager's
//! label entries and labelled routes, with the workers' counters summed.

use super::*;

impl ApiState {
    fn label_hop(&self, h: &routing::fib::LabelHop) -> Value {
        json!({
            "out_labels": h.out_labels,
            "interface": self.cfg().port_label(h.port),
            "gateway": h.gateway.map(|g| g.to_string()),
            "weight": h.weight,
        })
    }

    /// Every label entry, with packets and bytes received on it.
    pub fn mpls_table(&self) -> Result<Value, String> {
        let r = self.router()?;
        let table = r.fib.lock().unwrap_or_else(|e| e.into_inner()).mpls_table();
        let labels: Vec<Value> = table
            .iter()
            .map(|e| {
                let (packets, bytes) = self.shared.label_counts(e.in_label);
                // A VPN label: the VRF its packets are routed in.
                let vrf = (e.vrf > 0).then(|| r.vrf_name(e.vrf)).flatten();
                json!({
                    "in_label": e.in_label,
                    "protocol": e.protocol,
                    "action": e.action,
                    "vrf": vrf,
                    "installed": e.installed,
                    "hops": e.hops.iter().map(|h| self.label_hop(h)).collect::<Vec<_>>(),
                    "packets": packets,
                    "bytes": bytes,
                })
            })
            .collect();
        Ok(json!({ "count": labels.len(), "labels": labels }))
    }

    /// The label plane in numbers.
    pub fn mpls_forwarding(&self) -> Result<Value, String> {
        let r = self.router()?;
        let s = r
            .fib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .mpls_summary();
        let t = self.shared.mpls_totals();
        let drops: serde_json::Map<String, Value> = datapath::mpls::DROP_NAMES
            .iter()
            .zip(t.drops)
            .map(|(n, c)| (n.to_string(), json!(c)))
            .collect();
        let ftn_json = |ftn: &[routing::fib::FtnInfo]| -> Vec<Value> {
            ftn.iter()
                .map(|f| {
                    json!({
                        "prefix": f.prefix.to_string(),
                        "hops": f.hops.iter().map(|h| self.label_hop(h)).collect::<Vec<_>>(),
                    })
                })
                .collect()
        };
        let ftn = ftn_json(&s.ftn);
        // The VRFs' label-pushing routes (VPN routes from bgpd or static),
        // after the default table's lock is released: a VRF's summary
        // reads the default table's NHLFEs.
        let vpn: Vec<Value> = r
            .vrfs()
            .into_iter()
            .filter_map(|(_, v)| {
                let f = v
                    .fib
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .mpls_summary()
                    .ftn;
                (!f.is_empty())
                    .then(|| json!({ "vrf": v.name, "routes": f.len(), "ftn": ftn_json(&f) }))
            })
            .collect();
        Ok(json!({
            "ilm_entries": s.ilm_entries,
            "ilm_unresolvable": s.ilm_unresolvable,
            "ftn_routes": s.ftn_routes,
            "nhlfes": s.nhlfes,
            "nhlfe_capacity": s.nhlfe_capacity,
            "quarantined_nhlfes": s.quarantined_nhlfes,
            "counters": s.counters,
            "ftn": ftn,
            "vpn": vpn,
            "data_path": {
                "rx": t.rx,
                "forwarded": t.forwarded,
                "popped": t.popped,
                "pushed": t.pushed,
                "ttl_expired": t.ttl_expired,
                "ttl_icmp_down_lsp": t.ttl_icmp_down_lsp,
                "router_alert": t.router_alert,
                "drops": drops,
            },
        }))
    }
}

impl ApiState {
    /// Every configured pseudowire: circuit, neighbour, labels, state and
    /// the data path's counters (`show mpls pseudowires`, `show l2vpn`).
    pub fn mpls_pseudowires(&self) -> Result<Value, String> {
        let r = self.router()?;
        let Some(m) = &r.pseudowires else {
            return Ok(json!({ "count": 0, "pseudowires": [], "unmatched": 0 }));
        };
        let plane = self.shared.pseudowires.load_full();
        let rows: Vec<Value> = m
            .rows()
            .into_iter()
            .map(|row| {
                let (id, w, st) = (row.id, row.cfg, row.status);
                let t = plane.as_ref().map(|p| p.totals(id)).unwrap_or_default();
                let drops: serde_json::Map<String, Value> = datapath::mpls::circuits::PW_DROP_NAMES
                    .iter()
                    .zip(t.drops)
                    .map(|(n, c)| (n.to_string(), json!(c)))
                    .collect();
                json!({
                    "name": w.name,
                    "ifname": w.ifname(),
                    "port": w.port,
                    "vlan": w.vlan,
                    "type": w.pw_type(),
                    "neighbor": w.neighbor.to_string(),
                    "pw_id": w.pw_id,
                    "mtu": w.mtu,
                    "signalling": if w.static_labels.is_some() { "static" } else { "ldp" },
                    "local_label": st.labels.map(|l| l.local),
                    "remote_label": st.labels.map(|l| l.remote),
                    "control_word": st.labels.map(|l| l.control_word).unwrap_or(w.control_word),
                    "up": st.up,
                    "reason": st.reason,
                    "installs": st.installs,
                    "refused": st.refused,
                    "tx_packets": t.tx_packets,
                    "tx_bytes": t.tx_bytes,
                    "rx_packets": t.rx_packets,
                    "rx_bytes": t.rx_bytes,
                    "drops": drops,
                })
            })
            .collect();
        Ok(json!({
            "count": rows.len(),
            "up": rows.iter().filter(|r| r["up"] == true).count(),
            "socket": m.socket().map(|p| p.display().to_string()),
            "unmatched": plane.as_ref().map(|p| p.unmatched()).unwrap_or(0),
            "pseudowires": rows,
        }))
    }
}

impl ApiState {
    /// Protected ports, their bypasses, which path is active, how often
    /// they switched, and the pseudowires on a bypass now (`show mpls
    /// fast-reroute`).
    pub fn mpls_fast_reroute(&self) -> Result<Value, String> {
        let r = self.router()?;
        let Some(f) = &r.fast_reroute else {
            return Ok(json!({ "count": 0, "protected": [], "pseudowires_on_backup": 0 }));
        };
        let (lfib, nexthops) = {
            let fib = r.fib.lock().unwrap_or_else(|e| e.into_inner());
            (fib.lfib(), fib.nexthops())
        };
        // Pseudowires whose transport resolves to a bypass right now.
        let on_backup = r.pseudowires.as_ref().map_or(0, |m| {
            m.transports()
                .into_iter()
                .filter(|&t| lfib.resolve(&nexthops, t, 0).is_some_and(|x| x.on_backup))
                .count()
        });
        let rows: Vec<Value> = f
            .status()
            .into_iter()
            .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
            .collect();
        Ok(json!({
            "count": rows.len(),
            "on_backup": rows.iter().filter(|r| r["active"] == "backup").count(),
            "pseudowires_on_backup": on_backup,
            "protected": rows,
        }))
    }
}
