//! One scrape: ask the API what each `show` command would, and write it
//! as OpenMetrics families with conventional names (`lanyard_` prefix,
//! `_total` on counters, units in the name, labels for ports, VLANs,
//! reasons).

use crate::Query;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use serde_json::{json, Value};
use std::collections::HashMap;

type Labels = Vec<(String, String)>;

/// The families of one scrape, registered as they are first used.
struct Out {
    reg: Registry,
    counters: HashMap<&'static str, Family<Labels, Counter>>,
    gauges: HashMap<&'static str, Family<Labels, Gauge>>,
}

/// Label pairs, values escaped as the text format requires (the crate
/// writes them as given; names from the config may hold `"` or `\\`).
fn labels(l: &[(&str, &str)]) -> Labels {
    l.iter()
        .map(|(k, v)| {
            let mut e = String::with_capacity(v.len());
            for c in v.chars() {
                match c {
                    '\\' => e.push_str("\\\\"),
                    '"' => e.push_str("\\\""),
                    '\n' => e.push_str("\\n"),
                    c => e.push(c),
                }
            }
            (k.to_string(), e)
        })
        .collect()
}

impl Out {
    fn new() -> Out {
        Out {
            reg: Registry::with_prefix("lanyard"),
            counters: HashMap::new(),
            gauges: HashMap::new(),
        }
    }

    /// A counter sample; `name` without `_total` (the encoder adds it) and
    /// without the unit (`bytes` adds `_bytes`).
    fn counter(&mut self, name: &'static str, help: &str, bytes: bool, l: &[(&str, &str)], v: u64) {
        let reg = &mut self.reg;
        let f = self.counters.entry(name).or_insert_with(|| {
            let f = Family::<Labels, Counter>::default();
            if bytes {
                reg.register_with_unit(name, help, Unit::Bytes, f.clone());
            } else {
                reg.register(name, help, f.clone());
            }
            f
        });
        f.get_or_create(&labels(l)).inc_by(v);
    }

    fn gauge(&mut self, name: &'static str, help: &str, l: &[(&str, &str)], v: i64) {
        let reg = &mut self.reg;
        let f = self.gauges.entry(name).or_insert_with(|| {
            let f = Family::<Labels, Gauge>::default();
            reg.register(name, help, f.clone());
            f
        });
        f.get_or_create(&labels(l)).set(v);
    }
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn arr(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// The `data` of an API answer; `None` for an error (a feature that is
/// not configured, such as flow export or routing).
fn ask(q: &Query, req: Value) -> Option<Value> {
    let r = q(&req);
    if r.get("ok") == Some(&Value::Bool(true)) {
        r.get("data").cloned()
    } else {
        None
    }
}

/// One scrape in the OpenMetrics text format.
pub fn collect(q: &Query) -> String {
    let mut o = Out::new();
    if let Some(v) = ask(q, json!({"cmd": "show-version"})) {
        let name = s(&v, "name").to_string();
        let ver = s(&v, "version").to_string();
        o.gauge(
            "info",
            "the switch: software version and name (always 1)",
            &[("version", &ver), ("name", &name)],
            1,
        );
        o.gauge(
            "uptime_seconds",
            "seconds since the switch started",
            &[],
            u(&v, "uptime") as i64,
        );
        o.gauge(
            "bypass",
            "1 while the switch is in bypass",
            &[],
            (v.get("bypass") == Some(&Value::Bool(true))) as i64,
        );
    }
    interfaces(q, &mut o);
    counters(q, &mut o);
    mac(q, &mut o);
    acl(q, &mut o);
    qos(q, &mut o);
    flows(q, &mut o);
    routes(q, &mut o);
    mroutes(q, &mut o);
    copp(q, &mut o);
    ha(q, &mut o);
    storm(q, &mut o);
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut text, &o.reg);
    text
}

fn interfaces(q: &Query, o: &mut Out) {
    let Some(v) = ask(q, json!({"cmd": "show-interfaces"})) else {
        return;
    };
    for p in arr(&v) {
        let name = s(p, "name");
        let state = s(p, "state");
        for st in ["up", "down", "missing", "admin-down", "err-disabled"] {
            o.gauge(
                "interface_state",
                "1 for the port's state in show interfaces (up, down, missing, ...)",
                &[("interface", name), ("state", st)],
                (state == st) as i64,
            );
        }
        o.gauge(
            "interface_up",
            "1 while the port forwards (link up)",
            &[("interface", name)],
            (state == "up") as i64,
        );
        o.gauge(
            "interface_mtu_bytes",
            "the port's MTU",
            &[("interface", name)],
            u(p, "mtu") as i64,
        );
        o.counter(
            "interface_errors",
            "receive/transmit errors the port's socket reported",
            false,
            &[("interface", name)],
            u(p, "port_errors"),
        );
        o.counter(
            "interface_attaches",
            "times the port was attached (re-attached after it vanished)",
            false,
            &[("interface", name)],
            u(p, "attaches"),
        );
    }
}

fn drops(o: &mut Out, name: &'static str, help: &str, key: (&str, &str), d: &Value) {
    if let Some(m) = d.as_object() {
        for (reason, n) in m {
            o.counter(
                name,
                help,
                false,
                &[key, ("reason", reason)],
                n.as_u64().unwrap_or(0),
            );
        }
    }
}

fn counters(q: &Query, o: &mut Out) {
    let Some(v) = ask(q, json!({"cmd": "show-counters"})) else {
        return;
    };
    for p in arr(&v["ports"]) {
        let n = s(p, "name");
        let l = [("interface", n)];
        o.counter(
            "interface_receive_frames",
            "frames received",
            false,
            &l,
            u(p, "rx_frames"),
        );
        o.counter(
            "interface_receive",
            "bytes received",
            true,
            &l,
            u(p, "rx_bytes"),
        );
        o.counter(
            "interface_transmit_frames",
            "frames sent",
            false,
            &l,
            u(p, "tx_frames"),
        );
        o.counter(
            "interface_transmit",
            "bytes sent",
            true,
            &l,
            u(p, "tx_bytes"),
        );
        o.counter(
            "interface_receive_flooded_frames",
            "frames received that were flooded",
            false,
            &l,
            u(p, "rx_flooded"),
        );
        o.counter(
            "interface_transmit_flooded_frames",
            "flooded frames sent",
            false,
            &l,
            u(p, "tx_flooded"),
        );
        // IF-MIB's split: the unicast frames are the rest of the total.
        const KINDS: [(&str, &str, &str); 4] = [
            (
                "interface_receive_multicast_frames",
                "frames received to a multicast (not broadcast) address",
                "rx_multicast",
            ),
            (
                "interface_receive_broadcast_frames",
                "frames received to the broadcast address",
                "rx_broadcast",
            ),
            (
                "interface_transmit_multicast_frames",
                "frames sent to a multicast (not broadcast) address",
                "tx_multicast",
            ),
            (
                "interface_transmit_broadcast_frames",
                "frames sent to the broadcast address",
                "tx_broadcast",
            ),
        ];
        for (name, help, key) in KINDS {
            o.counter(name, help, false, &l, u(p, key));
        }
        drops(
            o,
            "interface_drops",
            "frames dropped, by reason (show interfaces counters errors)",
            ("interface", n),
            &p["drops"],
        );
    }
    for vl in arr(&v["vlans"]) {
        let id = u(vl, "vlan").to_string();
        let l = [("vlan", id.as_str())];
        o.counter(
            "vlan_receive_frames",
            "frames received in the VLAN",
            false,
            &l,
            u(vl, "rx_frames"),
        );
        o.counter(
            "vlan_receive",
            "bytes received in the VLAN",
            true,
            &l,
            u(vl, "rx_bytes"),
        );
        o.counter(
            "vlan_transmit_frames",
            "frames sent in the VLAN",
            false,
            &l,
            u(vl, "tx_frames"),
        );
        o.counter(
            "vlan_transmit",
            "bytes sent in the VLAN",
            true,
            &l,
            u(vl, "tx_bytes"),
        );
        o.counter(
            "vlan_flooded_frames",
            "frames flooded in the VLAN",
            false,
            &l,
            u(vl, "flooded"),
        );
        drops(
            o,
            "vlan_drops",
            "frames dropped in the VLAN, by reason",
            ("vlan", &id),
            &vl["drops"],
        );
    }
    o.counter(
        "batches",
        "receive batches the workers processed",
        false,
        &[],
        u(&v, "batches"),
    );
    o.counter(
        "learn_queue_full",
        "learning events lost to a full learning queue",
        false,
        &[],
        u(&v, "learn_queue_full"),
    );
    let l3 = &v["l3"];
    if l3.is_object() {
        o.counter(
            "l3_receive_frames",
            "frames the layer-3 stage received",
            false,
            &[],
            u(l3, "rx_frames"),
        );
        o.counter(
            "l3_forwarded_packets",
            "packets routed",
            false,
            &[],
            u(l3, "forwarded"),
        );
        drops(
            o,
            "l3_drops",
            "routed packets dropped, by reason",
            ("family", "any"),
            &l3["drops"],
        );
        if let Some(m) = l3["punts"].as_object() {
            for (reason, n) in m {
                o.counter(
                    "l3_punts",
                    "packets sent to the control plane, by reason",
                    false,
                    &[("reason", reason)],
                    n.as_u64().unwrap_or(0),
                );
            }
        }
        if let Some(m) = l3["icmp_requested"].as_object() {
            for (t, n) in m {
                o.counter(
                    "l3_icmp_requested",
                    "ICMP errors the data path asked for, by type",
                    false,
                    &[("type", t)],
                    n.as_u64().unwrap_or(0),
                );
            }
        }
        for (k, name, help) in [
            ("icmp_sent", "l3_icmp_sent", "ICMP errors sent"),
            (
                "icmp_suppressed",
                "l3_icmp_suppressed",
                "ICMP errors rate-limited",
            ),
            ("punted", "l3_punted", "packets punted"),
            (
                "punt_queue_full",
                "l3_punt_queue_full",
                "punts lost to a full punt queue",
            ),
            (
                "punted_to_kernel",
                "l3_punted_to_kernel",
                "punted packets written to the kernel",
            ),
            ("punt_errors", "l3_punt_errors", "punts the kernel refused"),
            (
                "injected",
                "l3_injected",
                "packets the kernel sent out through Lanyard",
            ),
            (
                "inject_errors",
                "l3_inject_errors",
                "injections that failed",
            ),
            (
                "neighbor_updates",
                "l3_neighbor_updates",
                "neighbour table updates",
            ),
            (
                "neighbor_table_full",
                "l3_neighbor_table_full",
                "neighbours refused by a full table",
            ),
        ] {
            o.counter(name, help, false, &[], u(l3, k));
        }
        // Traffic a VRF namespace's kernel hands Lanyard to route
        // (docs/vrf.md, "Traffic of a VRF's own kernel").
        if let Some(v) = l3.get("vrf_kernel") {
            for (k, name, help) in [
                (
                    "received",
                    "l3_vrf_kernel_received",
                    "packets VRF kernels sent to Lanyard's gateway",
                ),
                (
                    "routed",
                    "l3_vrf_kernel_routed",
                    "packets of VRF kernels routed in their VRF",
                ),
                (
                    "no_route",
                    "l3_vrf_kernel_no_route",
                    "packets of VRF kernels dropped for want of a route",
                ),
            ] {
                o.counter(name, help, false, &[], u(v, k));
            }
        }
        if let Some(m) = l3.get("managed_neighbors") {
            o.gauge(
                "l3_managed_neighbors",
                "next hops held as managed neighbours",
                &[],
                u(m, "held") as i64,
            );
            for (k, name, help) in [
                (
                    "readded",
                    "l3_managed_neighbors_readded",
                    "managed next hops the kernel removed, made again",
                ),
                (
                    "bridged",
                    "l3_managed_neighbors_bridged",
                    "managed next hops the data path kept forwarding to while the kernel made them again",
                ),
                (
                    "errors",
                    "l3_managed_neighbors_errors",
                    "managed-neighbour requests the kernel refused",
                ),
            ] {
                o.counter(name, help, false, &[], u(m, k));
            }
        }
    }
}

fn mac(q: &Query, o: &mut Out) {
    let Some(v) = ask(q, json!({"cmd": "show-mac-count"})) else {
        return;
    };
    for t in ["dynamic", "static"] {
        o.gauge(
            "mac_table_entries",
            "MAC table entries by type",
            &[("type", t)],
            u(&v, t) as i64,
        );
    }
    o.gauge(
        "mac_table_capacity",
        "MAC table size",
        &[],
        u(&v, "capacity") as i64,
    );
    for vl in arr(&v["vlans"]) {
        let id = u(vl, "vlan").to_string();
        o.gauge(
            "vlan_mac_entries",
            "MAC addresses in the VLAN",
            &[("vlan", &id)],
            u(vl, "count") as i64,
        );
        if let Some(l) = vl["limit"].as_u64() {
            o.gauge(
                "vlan_mac_limit",
                "the VLAN's MAC limit",
                &[("vlan", &id)],
                l as i64,
            );
        }
    }
    for (k, name, help) in [
        ("learned", "mac_learned", "addresses learned"),
        ("moves", "mac_moves", "addresses that moved to another port"),
        ("aged", "mac_aged", "addresses aged out"),
        (
            "limit_refused",
            "mac_limit_refused",
            "addresses not learned because of a limit",
        ),
        (
            "table_full",
            "mac_table_full",
            "addresses not learned because the table was full",
        ),
    ] {
        o.counter(name, help, false, &[], u(&v, k));
    }
}

fn acl(q: &Query, o: &mut Out) {
    let Some(v) = ask(q, json!({"cmd": "show-access-lists", "all": true})) else {
        return;
    };
    for a in arr(&v) {
        let name = s(a, "name");
        let ty = s(a, "type");
        o.gauge(
            "acl_rules",
            "rules in the access list",
            &[("acl", name), ("type", ty)],
            u(a, "rules") as i64,
        );
        for e in arr(&a["entries"]) {
            let idx = u(e, "index").to_string();
            o.counter(
                "acl_rule_hits",
                "frames an access-list rule matched",
                false,
                &[("acl", name), ("type", ty), ("rule", &idx)],
                u(e, "hits"),
            );
        }
        o.counter(
            "acl_implicit_deny_hits",
            "frames denied by the access list's implicit deny",
            false,
            &[("acl", name), ("type", ty)],
            u(a, "implicit-deny-hits"),
        );
        if let Some(c) = a.get("compiled") {
            o.gauge(
                "acl_memory_bytes",
                "memory of the compiled access list",
                &[("acl", name), ("type", ty)],
                u(c, "memory-bytes") as i64,
            );
        }
    }
}

fn qos(q: &Query, o: &mut Out) {
    let Some(v) = ask(q, json!({"cmd": "show-policy-map-interface"})) else {
        return;
    };
    for pm in arr(&v) {
        let (port, dir, pol) = (s(pm, "port"), s(pm, "direction"), s(pm, "policy"));
        for c in arr(&pm["classes"]) {
            let l = [
                ("interface", port),
                ("direction", dir),
                ("policy", pol),
                ("class", s(c, "class")),
            ];
            o.counter(
                "qos_class_packets",
                "packets the class matched",
                false,
                &l,
                u(c, "packets"),
            );
            o.counter(
                "qos_class",
                "bytes the class matched",
                true,
                &l,
                u(c, "bytes"),
            );
            if let Some(p) = c.get("police").filter(|p| p.is_object()) {
                for k in ["conform", "exceed", "violate", "dropped"] {
                    let [a, b, cc, d] = l;
                    o.counter(
                        "qos_policer_packets",
                        "packets a policer saw, by result (conform, exceed, violate, dropped)",
                        false,
                        &[a, b, cc, d, ("result", k)],
                        u(p, k),
                    );
                }
                o.gauge(
                    "qos_policer_cir_bits_per_second",
                    "committed rate",
                    &l,
                    u(p, "cir") as i64,
                );
            }
            if let Some(qq) = c.get("queue").filter(|p| p.is_object()) {
                o.counter(
                    "qos_queue_drops",
                    "packets the class's queue dropped",
                    false,
                    &l,
                    u(qq, "drops"),
                );
            }
        }
    }
}

fn flows(q: &Query, o: &mut Out) {
    let Some(v) = ask(q, json!({"cmd": "show-flow-cache", "top": 1})) else {
        return;
    };
    o.gauge(
        "flow_cache_flows",
        "flows in the flow cache, all workers",
        &[],
        u(&v, "flows") as i64,
    );
    for w in arr(&v["workers"]) {
        let id = u(w, "worker").to_string();
        let l = [("worker", id.as_str())];
        o.gauge(
            "flow_cache_worker_flows",
            "flows in the worker's cache",
            &l,
            u(w, "flows") as i64,
        );
        o.gauge(
            "flow_cache_capacity",
            "the worker's flow cache size",
            &l,
            u(w, "capacity") as i64,
        );
        o.counter(
            "flow_cache_full",
            "new flows not cached because the cache was full",
            false,
            &l,
            u(w, "cache-full"),
        );
    }
    let x = &v["export"];
    if x.is_object() {
        o.counter(
            "flow_export_records",
            "flow records exported",
            false,
            &[],
            u(x, "records"),
        );
        o.counter(
            "flow_export_datagrams",
            "export datagrams sent",
            false,
            &[],
            u(x, "datagrams"),
        );
        o.counter("flow_export", "export bytes sent", true, &[], u(x, "bytes"));
        o.counter(
            "flow_export_send_errors",
            "export datagrams the kernel refused",
            false,
            &[],
            u(x, "send-errors"),
        );
        o.counter(
            "flow_export_records_lost",
            "flow records lost before export",
            false,
            &[],
            u(x, "records-lost"),
        );
    }
}

fn routes(q: &Query, o: &mut Out) {
    for fam in [4u64, 6] {
        let Some(v) = ask(
            q,
            json!({"cmd": "show-ip-route", "family": fam, "summary": true}),
        ) else {
            return;
        };
        let f = if fam == 4 { "ipv4" } else { "ipv6" };
        for src in arr(&v["sources"]) {
            o.gauge(
                "fib_routes",
                "routes by source",
                &[("family", f), ("source", s(src, "source"))],
                u(src, "routes") as i64,
            );
        }
        o.gauge(
            "fib_installed_routes",
            "routes installed in the FIB",
            &[("family", f)],
            u(&v, "installed") as i64,
        );
        o.gauge(
            "fib_max_routes",
            "FIB route limit",
            &[("family", f)],
            u(&v, "max_routes") as i64,
        );
        o.gauge(
            "fib_unresolvable_routes",
            "routes without a usable next hop",
            &[("family", f)],
            u(&v, "unresolvable") as i64,
        );
        if fam == 4 {
            o.gauge(
                "fib_next_hops",
                "next hops in use",
                &[],
                u(&v, "next_hops") as i64,
            );
            o.gauge(
                "fib_next_hop_capacity",
                "next-hop table size",
                &[],
                u(&v, "next_hop_capacity") as i64,
            );
            o.gauge(
                "fib_groups",
                "ECMP groups in use",
                &[],
                u(&v, "groups") as i64,
            );
        }
    }
}

fn mroutes(q: &Query, o: &mut Out) {
    for fam in [4u64, 6] {
        let Some(v) = ask(
            q,
            json!({"cmd": "show-mroute", "family": fam, "summary": true}),
        ) else {
            return;
        };
        let f = if fam == 4 { "ipv4" } else { "ipv6" };
        for (k, kind) in [("s-g", "s-g"), ("star-g", "star-g")] {
            o.gauge(
                "mroute_routes",
                "multicast routes by kind",
                &[("family", f), ("kind", kind)],
                u(&v, k) as i64,
            );
        }
        if let Some(m) = v["data-path"].as_object() {
            for (k, n) in m {
                o.counter(
                    "mroute_packets",
                    "multicast data-path events, by kind (replicated, rpf-fail, ...)",
                    false,
                    &[("family", f), ("event", k)],
                    n.as_u64().unwrap_or(0),
                );
            }
        }
    }
}

fn copp(q: &Query, o: &mut Out) {
    let Some(v) = ask(q, json!({"cmd": "show-copp"})) else {
        return;
    };
    for c in arr(&v["classes"]) {
        let l = [("class", s(c, "class"))];
        o.counter(
            "copp_passed_packets",
            "punted packets control-plane policing passed",
            false,
            &l,
            u(c, "passed"),
        );
        o.counter(
            "copp_dropped_packets",
            "punted packets control-plane policing dropped",
            false,
            &l,
            u(c, "dropped"),
        );
        if let Some(r) = c["rate"].as_u64() {
            o.gauge(
                "copp_rate_packets_per_second",
                "the class's policing rate",
                &l,
                r as i64,
            );
        }
    }
}

fn ha(q: &Query, o: &mut Out) {
    if let Some(v) = ask(q, json!({"cmd": "show-backup-pairs"})) {
        for p in arr(&v) {
            let pair = s(p, "primary");
            o.counter(
                "backup_pair_failovers",
                "failovers of the pair",
                false,
                &[("pair", pair)],
                u(p, "failovers"),
            );
            for (role, port) in [("primary", s(p, "primary")), ("backup", s(p, "backup"))] {
                o.gauge(
                    "backup_pair_active",
                    "1 for the member that forwards",
                    &[("pair", pair), ("role", role), ("interface", port)],
                    (s(p, "active") == port) as i64,
                );
            }
        }
    }
    if let Some(v) = ask(q, json!({"cmd": "show-port-channel"})) {
        for c in arr(&v) {
            let name = s(c, "name");
            o.gauge(
                "port_channel_up",
                "1 while the channel is up",
                &[("channel", name)],
                (c["up"] == json!(true)) as i64,
            );
            for m in arr(&c["members"]) {
                let l = [("channel", name), ("interface", s(m, "port"))];
                o.gauge(
                    "port_channel_member_distributing",
                    "1 while the member carries traffic",
                    &l,
                    (m["distributing"] == json!(true)) as i64,
                );
                o.counter(
                    "lacp_pdus_received",
                    "LACPDUs received",
                    false,
                    &l,
                    u(m, "pdus_rx"),
                );
                o.counter("lacp_pdus_sent", "LACPDUs sent", false, &l, u(m, "pdus_tx"));
                o.counter(
                    "lacp_bad_pdus",
                    "malformed LACPDUs",
                    false,
                    &l,
                    u(m, "bad_rx"),
                );
                o.counter(
                    "lacp_timeouts",
                    "partner timeouts",
                    false,
                    &l,
                    u(m, "timeouts"),
                );
            }
        }
    }
}

fn storm(q: &Query, o: &mut Out) {
    let Some(v) = ask(q, json!({"cmd": "show-storm-control"})) else {
        return;
    };
    for p in arr(&v) {
        let port = s(p, "port");
        for t in ["broadcast", "multicast", "unknown-unicast"] {
            if let Some(x) = p.get(t).filter(|x| x.is_object()) {
                o.counter(
                    "storm_control_drops",
                    "frames storm control dropped, by traffic type",
                    false,
                    &[("interface", port), ("type", t)],
                    u(x, "drops"),
                );
            }
        }
        o.counter(
            "storm_control_storms",
            "storms detected",
            false,
            &[("interface", port)],
            u(p, "storms"),
        );
        o.gauge(
            "interface_err_disabled",
            "1 while the port is err-disabled",
            &[("interface", port)],
            p.get("errdisabled").is_some_and(|e| !e.is_null()) as i64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake API: answers from the golden files' shapes.
    fn api(req: &Value) -> Value {
        let data = match req["cmd"].as_str().unwrap_or("") {
            "show-version" => {
                json!({"version": "0.1.0", "name": "sw", "uptime": 5, "bypass": false})
            }
            "show-interfaces" => json!([
                {"name": "sw1", "state": "up", "mtu": 9216, "port_errors": 2, "attaches": 1},
                {"name": "sw2", "state": "down", "mtu": 1500, "port_errors": 0, "attaches": 1}
            ]),
            "show-counters" => json!({
                "ports": [{"name": "sw1", "rx_frames": 20, "rx_bytes": 2560, "tx_frames": 3,
                           "tx_bytes": 204, "rx_flooded": 0, "tx_flooded": 3,
                           "rx_multicast": 6, "rx_broadcast": 4, "tx_multicast": 2,
                           "tx_broadcast": 1, "drops": {"acl-deny": 7, "policed": 0}}],
                "vlans": [{"vlan": 10, "rx_frames": 1, "rx_bytes": 64, "tx_frames": 2,
                           "tx_bytes": 128, "flooded": 1, "drops": {"unknown-vlan": 4}}],
                "batches": 9, "learn_queue_full": 0, "l3": null}),
            "show-access-lists" => json!([{"name": "edge4", "type": "ipv4", "rules": 1,
                "implicit-deny-hits": 3, "entries": [{"index": 1, "hits": 11}]}]),
            "show-copp" => json!({"classes": [{"class": "ttl-expired", "rate": 1000, "burst": 200,
                                              "passed": 5, "dropped": 6}]}),
            _ => return json!({"ok": false, "error": "not configured"}),
        };
        json!({"ok": true, "data": data})
    }

    #[test]
    fn counters_carry_the_apis_values_with_conventional_names() {
        let t = collect(&api);
        for line in [
            "lanyard_interface_receive_frames_total{interface=\"sw1\"} 20",
            "lanyard_interface_receive_bytes_total{interface=\"sw1\"} 2560",
            "lanyard_interface_transmit_bytes_total{interface=\"sw1\"} 204",
            "lanyard_interface_receive_multicast_frames_total{interface=\"sw1\"} 6",
            "lanyard_interface_receive_broadcast_frames_total{interface=\"sw1\"} 4",
            "lanyard_interface_transmit_multicast_frames_total{interface=\"sw1\"} 2",
            "lanyard_interface_transmit_broadcast_frames_total{interface=\"sw1\"} 1",
            "lanyard_interface_drops_total{interface=\"sw1\",reason=\"acl-deny\"} 7",
            "lanyard_interface_up{interface=\"sw1\"} 1",
            "lanyard_interface_up{interface=\"sw2\"} 0",
            "lanyard_interface_errors_total{interface=\"sw1\"} 2",
            "lanyard_vlan_drops_total{vlan=\"10\",reason=\"unknown-vlan\"} 4",
            "lanyard_acl_rule_hits_total{acl=\"edge4\",type=\"ipv4\",rule=\"1\"} 11",
            "lanyard_acl_implicit_deny_hits_total{acl=\"edge4\",type=\"ipv4\"} 3",
            "lanyard_copp_dropped_packets_total{class=\"ttl-expired\"} 6",
            "lanyard_info{version=\"0.1.0\",name=\"sw\"} 1",
            "# TYPE lanyard_interface_receive_bytes counter",
            "# UNIT lanyard_interface_receive_bytes bytes",
            "# EOF",
        ] {
            assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
        }
        // Features that answer with an error (not configured) add nothing.
        assert!(!t.contains("lanyard_flow_cache"));
    }

    #[test]
    fn vrf_kernel_counters_are_exported() {
        let q = |req: &Value| match req["cmd"].as_str() {
            Some("show-counters") => json!({"ok": true, "data": {"ports": [], "vlans": [],
                "l3": {"vrf_kernel": {"received": 12, "routed": 10, "no_route": 2}}}}),
            _ => json!({"ok": false}),
        };
        let t = collect(&q);
        for line in [
            "lanyard_l3_vrf_kernel_received_total{} 12",
            "lanyard_l3_vrf_kernel_routed_total{} 10",
            "lanyard_l3_vrf_kernel_no_route_total{} 2",
        ] {
            assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let q = |req: &Value| match req["cmd"].as_str() {
            Some("show-interfaces") => {
                json!({"ok": true, "data": [{"name": "a\"b\\c\nd", "state": "up"}]})
            }
            _ => json!({"ok": false}),
        };
        let t = collect(&q);
        assert!(t.contains("interface=\"a\\\"b\\\\c\\nd\""), "{t}");
    }
}
