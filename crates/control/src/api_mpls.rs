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
                json!({
                    "in_label": e.in_label,
                    "protocol": e.protocol,
                    "action": e.action,
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
        let ftn: Vec<Value> = s
            .ftn
            .iter()
            .map(|f| {
                json!({
                    "prefix": f.prefix.to_string(),
                    "hops": f.hops.iter().map(|h| self.label_hop(h)).collect::<Vec<_>>(),
                })
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
            "data_path": {
                "rx": t.rx,
                "forwarded": t.forwarded,
                "popped": t.popped,
                "pushed": t.pushed,
                "ttl_expired": t.ttl_expired,
                "router_alert": t.router_alert,
                "drops": drops,
            },
        }))
    }
}
