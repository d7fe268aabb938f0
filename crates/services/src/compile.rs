//! Compile the services sections of a configuration (access lists, class
//! and policy maps, flow export) into the snapshot the workers read
//! ([`pipeline::services::Services`]).
//!
//! Every list and policy is compiled once and shared by reference by the
//! ports and VLANs it is attached to. Compiling happens off the data path;
//! publishing is one pointer swap, so a new rule set replaces the old one
//! between two batches: no frame sees half of each, none is dropped.

use config::services::{
    default_burst, parse_dscp, parse_match, parse_police_action, parse_quantity, AclAction,
    AclType, PoliceAction, CLASS_DEFAULT, DEFAULT_QUEUE_DEPTH,
};
use config::Config;
use pipeline::qos::QueueSpec;
use pipeline::services::{
    class_counter, AclFamily, AclList, AclSet, AttachPoint, AttachedAcl, AttachedPolicy, ClassSpec,
    ColorAction, Direction, FlowSettings, PoliceSpec, Policy, Services,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tables::acl::{fragment_lines, Classifier, L4OnFragments, Match};
use tables::qos::TrTcmConfig;

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// True if the configuration uses any service.
pub fn configured(cfg: &Config) -> bool {
    cfg.flow_export.is_some()
        || cfg.ports.iter().any(|p| {
            !p.acl_in.is_empty()
                || !p.acl_out.is_empty()
                || p.policy_in.is_some()
                || p.policy_out.is_some()
                || p.subinterfaces.iter().any(|s| {
                    !s.acl_in.is_empty()
                        || !s.acl_out.is_empty()
                        || s.policy_in.is_some()
                        || s.policy_out.is_some()
                })
        })
        || cfg
            .vlans
            .iter()
            .any(|v| !v.acl_in.is_empty() || !v.acl_out.is_empty())
}

/// Compile an access list. The configuration is validated, so rules
/// parse; a rule that does not (never, after validation) is an error.
///
/// Fragment policy (docs/acl.md "Fragments", Cisco IOS's): a non-initial
/// fragment meets a `permit` that tests L4 fields on its other fields,
/// and passes over a `deny` that tests them.
pub fn compile_acl(
    name: &str,
    kind: AclType,
    rules: &[config::services::AclRule],
) -> Result<AclList, String> {
    let mut lines = Vec::with_capacity(rules.len());
    let mut line_rule = Vec::with_capacity(rules.len());
    for (i, r) in rules.iter().enumerate() {
        let m = parse_match(r, Some(kind))
            .map_err(|(f, e)| format!("access list {name} rule {i}: {f}: {e}"))?;
        let policy = if r.action == Some(AclAction::Permit) {
            L4OnFragments::MatchL3
        } else {
            L4OnFragments::NoMatch
        };
        for l in fragment_lines(&m, policy) {
            lines.push(l);
            line_rule.push(i as u32);
        }
    }
    let classifier = Classifier::compile(&lines);
    Ok(AclList {
        name: name.to_string(),
        family: match kind {
            AclType::Ipv4 => AclFamily::Ipv4,
            AclType::Ipv6 => AclFamily::Ipv6,
            AclType::Mac => AclFamily::Mac,
        },
        classifier,
        line_rule: line_rule.into(),
        permit: rules
            .iter()
            .map(|r| r.action == Some(AclAction::Permit))
            .collect(),
        log: rules.iter().map(|r| r.log).collect(),
        log_events: crossbeam_queue::ArrayQueue::new(pipeline::services::ACL_LOG_QUEUE),
    })
}

fn color_action(a: PoliceAction) -> ColorAction {
    match a {
        PoliceAction::Transmit => ColorAction::Transmit,
        PoliceAction::Drop => ColorAction::Drop,
        PoliceAction::SetDscp(d) => ColorAction::SetDscp(d),
    }
}

/// Compile policy map `pm` (its class maps come from `cfg`). A class
/// line that tests L4 fields does not match a non-initial fragment (it
/// falls to a later line or class-default: a class line selects, and
/// selecting on the addresses alone would pull unrelated traffic in).
fn compile_policy(cfg: &Config, pm: &config::services::PolicyMap) -> Result<Policy, String> {
    let mut lines: Vec<Match> = Vec::new();
    let mut line_class: Vec<u16> = Vec::new();
    let mut classes: Vec<ClassSpec> = Vec::new();
    let mut default: Option<ClassSpec> = None;
    let mut queue_of: Vec<Option<config::services::QueueConfig>> = Vec::new();
    let mut default_queue = None;
    for c in &pm.classes {
        let spec = ClassSpec {
            name: c.class.clone(),
            set_dscp: c.set_dscp.as_deref().map(parse_dscp).transpose()?,
            set_pcp: c.set_pcp,
            police: match &c.police {
                None => None,
                Some(p) => {
                    let cir = parse_quantity(&p.cir)?;
                    let pir = p
                        .pir
                        .as_deref()
                        .map(parse_quantity)
                        .transpose()?
                        .unwrap_or(cir);
                    let cbs = match &p.cbs {
                        Some(b) => parse_quantity(b)?,
                        None => default_burst(cir),
                    };
                    let pbs = match &p.pbs {
                        Some(b) => parse_quantity(b)?,
                        None => default_burst(pir).max(cbs),
                    };
                    Some(PoliceSpec {
                        rates: TrTcmConfig {
                            cir_bps: cir,
                            cbs_bytes: cbs,
                            pir_bps: pir,
                            pbs_bytes: pbs,
                        },
                        conform: color_action(parse_police_action(&p.conform)?),
                        exceed: color_action(parse_police_action(&p.exceed)?),
                        violate: color_action(parse_police_action(&p.violate)?),
                    })
                }
            },
        };
        if c.class == CLASS_DEFAULT {
            default = Some(spec);
            default_queue = c.queue;
            continue;
        }
        queue_of.push(c.queue);
        let cm = cfg
            .class_maps
            .iter()
            .find(|m| m.name == c.class)
            .ok_or_else(|| format!("class map {:?} is not defined", c.class))?;
        let k = classes.len() as u16;
        for l in &cm.lines {
            let m = parse_match(l, None)
                .map_err(|(f, e)| format!("class map {}: {f}: {e}", cm.name))?;
            let Some(m) = fragment_lines(&m, L4OnFragments::NoMatch).next() else {
                continue;
            };
            if m.family.is_none() && needs_ip(&m) {
                // No address to tell the family: match IPv4 and IPv6.
                for fam in [4, 6] {
                    lines.push(Match {
                        family: Some(fam),
                        ..m.clone()
                    });
                    line_class.push(k);
                }
            } else {
                lines.push(m);
                line_class.push(k);
            }
        }
        classes.push(spec);
    }
    classes.push(default.unwrap_or(ClassSpec {
        name: CLASS_DEFAULT.into(),
        set_dscp: None,
        set_pcp: None,
        police: None,
    }));
    queue_of.push(default_queue);
    let queues = queue_of.iter().any(Option::is_some).then(|| {
        queue_of
            .iter()
            .map(|q| {
                let q = q.unwrap_or_default();
                QueueSpec {
                    priority: q.priority,
                    weight: q.weight.unwrap_or(1),
                    depth: q.depth.unwrap_or(DEFAULT_QUEUE_DEPTH) as usize,
                }
            })
            .collect()
    });
    Ok(Policy {
        queues,
        name: pm.name.clone(),
        classifier: Classifier::compile(&lines),
        line_class: line_class.into(),
        classes: classes.into(),
    })
}

fn needs_ip(m: &Match) -> bool {
    m.fragment == Some(true)
        || m.proto.is_some()
        || m.dscp.is_some()
        || m.tcp_flags.is_some()
        || m.src_port.is_some()
        || m.dst_port.is_some()
}

/// Compile the services snapshot of `cfg` for `workers` workers.
pub fn compile(cfg: &Config, workers: usize) -> Result<Services, String> {
    let mut s = Services::empty(workers, cfg.port_ids());
    let mut acls: HashMap<&str, Arc<AclList>> = HashMap::new();
    let mut policies: HashMap<&str, Arc<Policy>> = HashMap::new();
    let mut acl = |name: &str| -> Result<Arc<AclList>, String> {
        if let Some(a) = acls.get(name) {
            return Ok(a.clone());
        }
        let l = cfg
            .access_lists
            .iter()
            .find(|l| l.name == name)
            .ok_or_else(|| format!("access list {name:?} is not defined"))?;
        let a = Arc::new(compile_acl(&l.name, l.kind, &l.rules)?);
        acls.insert(&l.name, a.clone());
        Ok(a)
    };
    // Each attachment counts its own hits; the compiled list is shared.
    let mut set = |names: &[String], at: AttachPoint, dir: Direction| -> Result<AclSet, String> {
        let mut set = AclSet::default();
        for n in names {
            let l = acl(n)?;
            let family = l.family;
            let a = Some(Arc::new(AttachedAcl::new(l, at, dir, workers)));
            match family {
                AclFamily::Ipv4 => set.v4 = a,
                AclFamily::Ipv6 => set.v6 = a,
                AclFamily::Mac => set.mac = a,
            }
        }
        Ok(set)
    };
    for (i, p) in cfg.ports.iter().enumerate() {
        let at = AttachPoint::Port(i as u16);
        s.port_in[i] = set(&p.acl_in, at, Direction::In)?;
        s.port_out[i] = set(&p.acl_out, at, Direction::Out)?;
    }
    // A routed subinterface is a port id of its own (docs/vrf.md).
    for sub in cfg.subinterfaces() {
        let (i, at) = (sub.id as usize, AttachPoint::Port(sub.id));
        s.port_in[i] = set(&sub.sub.acl_in, at, Direction::In)?;
        s.port_out[i] = set(&sub.sub.acl_out, at, Direction::Out)?;
    }
    for v in &cfg.vlans {
        let at = AttachPoint::Vlan(v.id);
        s.vlan_in[v.id as usize] = set(&v.acl_in, at, Direction::In)?;
        s.vlan_out[v.id as usize] = set(&v.acl_out, at, Direction::Out)?;
    }
    let mut policy = |name: &str| -> Result<Arc<Policy>, String> {
        if let Some(p) = policies.get(name) {
            return Ok(p.clone());
        }
        let pm = cfg
            .policy_maps
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("policy map {name:?} is not defined"))?;
        let p = Arc::new(compile_policy(cfg, pm)?);
        policies.insert(&pm.name, p.clone());
        Ok(p)
    };
    // Counters per port and direction; the compiled policy is shared.
    for (i, p) in cfg.ports.iter().enumerate() {
        let id = i as u16;
        if let Some(n) = &p.policy_in {
            let a = AttachedPolicy::new(policy(n)?, id, Direction::In, workers);
            s.policy_in[i] = Some(Arc::new(a));
        }
        if let Some(n) = &p.policy_out {
            let a = AttachedPolicy::new(policy(n)?, id, Direction::Out, workers);
            s.policy_out[i] = Some(Arc::new(a));
        }
    }
    for sub in cfg.subinterfaces() {
        let (id, i) = (sub.id, sub.id as usize);
        if let Some(n) = &sub.sub.policy_in {
            let a = AttachedPolicy::new(policy(n)?, id, Direction::In, workers);
            s.policy_in[i] = Some(Arc::new(a));
        }
        if let Some(n) = &sub.sub.policy_out {
            let a = AttachedPolicy::new(policy(n)?, id, Direction::Out, workers);
            s.policy_out[i] = Some(Arc::new(a));
        }
    }
    if let Some(f) = &cfg.flow_export {
        s.flows = Some(FlowSettings {
            sampling: f.sampling.max(1),
            active_ms: f.active_timeout as u64 * 1000,
            inactive_ms: f.inactive_timeout as u64 * 1000,
            cache_size: f.cache_size as usize,
        });
    }
    s.generation = GENERATION.fetch_add(1, Ordering::Relaxed);
    s.finish();
    Ok(s)
}

/// One rule as the operator wrote it, on one line.
pub fn rule_text(r: &config::services::MatchFields) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(a) = r.action {
        parts.push(match a {
            AclAction::Permit => "permit".into(),
            AclAction::Deny => "deny".into(),
        });
    }
    let mut kv = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{k} {v}"));
        }
    };
    kv("protocol", &r.protocol);
    kv("source", &r.source);
    kv("source-port", &r.source_port);
    kv("destination", &r.destination);
    kv("destination-port", &r.destination_port);
    kv("tcp-flags", &r.tcp_flags);
    kv("dscp", &r.dscp);
    kv("source-mac", &r.source_mac);
    kv("destination-mac", &r.destination_mac);
    kv("ethertype", &r.ethertype);
    kv("vlan", &r.vlan);
    if let Some(t) = r.icmp_type {
        parts.push(format!("icmp-type {t}"));
    }
    if let Some(c) = r.icmp_code {
        parts.push(format!("icmp-code {c}"));
    }
    if r.fragments {
        parts.push("fragments".into());
    }
    if parts.len() <= 1 {
        parts.push("any".into());
    }
    if r.log {
        parts.push("log".into());
    }
    parts.join(" ")
}

/// Where an attachment is, as `show` names it (`veth1 in`, `vlan 10 out`).
fn place(cfg: &Config, a: &AttachedAcl) -> (serde_json::Value, String) {
    use serde_json::json;
    match a.at {
        AttachPoint::Port(p) => {
            let name = cfg
                .ports
                .get(p as usize)
                .map_or_else(|| format!("port{p}"), |x| x.name.clone());
            let text = format!("{name} {}", a.dir.as_str());
            (
                json!({"interface": name, "direction": a.dir.as_str()}),
                text,
            )
        }
        AttachPoint::Vlan(v) => (
            json!({"vlan": v, "direction": a.dir.as_str()}),
            format!("vlan {v} {}", a.dir.as_str()),
        ),
    }
}

/// One list's rules with `hits(i)` (the implicit deny is `i == rules`):
/// every rule when `all_rules`, else the first 20 and those with hits.
fn rule_entries(
    l: &config::services::AccessList,
    hits: &dyn Fn(usize) -> u64,
    all_rules: bool,
) -> Vec<serde_json::Value> {
    l.rules
        .iter()
        .enumerate()
        .filter(|(i, _)| all_rules || *i < 20 || hits(*i) > 0)
        .map(|(i, r)| {
            serde_json::json!({"index": i + 1, "rule": rule_text(r), "remark": r.remark, "hits": hits(i)})
        })
        .collect()
}

/// `show access-lists [NAME]`: every list with per-rule hits summed over
/// all of its attachments (ports and VLANs, in and out), and each
/// attachment's own total. `all_rules` false lists only rules with hits
/// (and the first 20).
pub fn access_lists_json(
    cfg: &Config,
    s: Option<&Services>,
    name: Option<&str>,
    all_rules: bool,
) -> Result<serde_json::Value, String> {
    use serde_json::json;
    let mut compiled: HashMap<String, Arc<AclList>> = HashMap::new();
    let mut attached: HashMap<String, Vec<&Arc<AttachedAcl>>> = HashMap::new();
    if let Some(s) = s {
        for a in s.attachments() {
            compiled
                .entry(a.list.name.clone())
                .or_insert_with(|| a.list.clone());
            attached.entry(a.list.name.clone()).or_default().push(a);
        }
    }
    if let Some(n) = name {
        if !cfg.access_lists.iter().any(|l| l.name == n) {
            return Err(format!("no access list {n:?}"));
        }
    }
    let mut out = Vec::new();
    for l in &cfg.access_lists {
        if name.is_some_and(|n| n != l.name) {
            continue;
        }
        let c = compiled.get(&l.name);
        let at: &[&Arc<AttachedAcl>] = attached.get(&l.name).map_or(&[], |v| &v[..]);
        let hits = |i: usize| at.iter().map(|a| a.hits.total(i)).sum::<u64>();
        let rules = rule_entries(l, &hits, all_rules);
        let stats = c.map(|c| {
            let st = c.classifier.stats();
            let mut v = json!({
                "memory-bytes": c.classifier.memory_bytes(),
                "tables": st.tables,
                "buckets": st.buckets,
                "largest-bucket": st.largest_bucket,
                "overflow-rules": st.overflow_rules,
                "unmatchable": st.unmatchable,
                "shadowed": st.shadowed,
            });
            // A classifier of 1 MiB or more is one block on 2 MB pages
            // (docs/acl.md, "One block"): how much of it the kernel backs
            // with them now (smaps; `null` when unreadable).
            if c.classifier.advised_range().is_some() {
                v["huge-bytes"] = json!(c.classifier.huge_backed_bytes());
            }
            v
        });
        let attachments: Vec<serde_json::Value> = at
            .iter()
            .map(|a| {
                let (mut v, _) = place(cfg, a);
                v["matches"] = json!((0..=l.rules.len()).map(|i| a.hits.total(i)).sum::<u64>());
                v
            })
            .collect();
        out.push(json!({
            "name": l.name,
            "type": l.kind.as_str(),
            "rules": l.rules.len(),
            "entries": rules,
            "implicit-deny-hits": hits(l.rules.len()),
            "attached": at.iter().map(|a| place(cfg, a).1).collect::<Vec<_>>(),
            "attachments": attachments,
            "compiled": stats,
        }));
    }
    Ok(serde_json::Value::Array(out))
}

/// `show access-lists interface PORT` / `vlan N`: the lists attached
/// there, per direction, with the hits counted at that attachment only.
pub fn access_lists_attached_json(
    cfg: &Config,
    s: Option<&Services>,
    port: Option<&str>,
    vlan: Option<u16>,
    all_rules: bool,
) -> Result<serde_json::Value, String> {
    use serde_json::json;
    let at = match (port, vlan) {
        (Some(p), None) => AttachPoint::Port(
            cfg.ports
                .iter()
                .position(|x| x.name == p)
                .ok_or_else(|| format!("no port {p:?}"))? as u16,
        ),
        (None, Some(v)) => {
            if !cfg.vlans.iter().any(|x| x.id == v) {
                return Err(format!("no vlan {v}"));
            }
            AttachPoint::Vlan(v)
        }
        _ => return Err("name an interface or a vlan".into()),
    };
    let mut out = Vec::new();
    for a in s.into_iter().flat_map(Services::attachments) {
        if a.at != at {
            continue;
        }
        let Some(l) = cfg.access_lists.iter().find(|l| l.name == a.list.name) else {
            continue;
        };
        let hits = |i: usize| a.hits.total(i);
        let (mut v, _) = place(cfg, a);
        v["name"] = json!(l.name);
        v["type"] = json!(l.kind.as_str());
        v["rules"] = json!(l.rules.len());
        v["entries"] = json!(rule_entries(l, &hits, all_rules));
        v["implicit-deny-hits"] = json!(hits(l.rules.len()));
        v["matches"] = json!((0..=l.rules.len()).map(hits).sum::<u64>());
        out.push(v);
    }
    Ok(serde_json::Value::Array(out))
}

/// `show policy-map interface [PORT]`: per port and direction, the
/// policy's classes with the counters of that attachment (a policy on
/// several ports counts each port apart). Bytes are whole frames as
/// received (ingress) or sent (egress, with the egress tag): layer 2.
pub fn policy_maps_json(
    cfg: &Config,
    s: Option<&Services>,
    port: Option<&str>,
) -> Result<serde_json::Value, String> {
    use serde_json::json;
    if let Some(p) = port {
        if cfg.port(p).is_none() {
            return Err(format!("no port {p:?}"));
        }
    }
    let mut out = Vec::new();
    let Some(s) = s else {
        return Ok(serde_json::Value::Array(out));
    };
    for (i, p) in cfg.ports.iter().enumerate() {
        if port.is_some_and(|n| n != p.name) {
            continue;
        }
        // `s` may predate a port added live: no entry, no policy.
        for (dir, pol) in [("in", s.policy_in.get(i)), ("out", s.policy_out.get(i))] {
            let Some(Some(pol)) = pol else { continue };
            let classes: Vec<serde_json::Value> = pol
                .classes
                .iter()
                .enumerate()
                .map(|(k, c)| {
                    json!({
                        "class": c.name,
                        "packets": pol.counter(k, class_counter::PACKETS),
                        "bytes": pol.counter(k, class_counter::BYTES),
                        "set-dscp": c.set_dscp,
                        "set-pcp": c.set_pcp,
                        "queue": pol.queues.as_ref().and_then(|q| q.get(k)).map(|q| json!({
                            "priority": q.priority, "weight": q.weight, "depth": q.depth,
                            "drops": pol.counter(k, class_counter::QUEUE_DROPS),
                        })),
                        "police": c.police.map(|p| json!({
                            "cir": p.rates.cir_bps, "cbs": p.rates.cbs_bytes,
                            "pir": p.rates.pir_bps, "pbs": p.rates.pbs_bytes,
                            "conform": pol.counter(k, class_counter::GREEN),
                            "exceed": pol.counter(k, class_counter::YELLOW),
                            "violate": pol.counter(k, class_counter::RED),
                            "dropped": pol.counter(k, class_counter::DROPPED),
                        })),
                    })
                })
                .collect();
            out.push(
                json!({"port": p.name, "direction": dir, "policy": pol.name, "classes": classes}),
            );
        }
    }
    Ok(serde_json::Value::Array(out))
}

/// Lines one pass of the ACL log writer prints at most (the rest are
/// summed in one "suppressed" line).
pub const ACL_LOG_LINES: usize = 20;

/// One pass of the ACL log writer: drain every list's log events and
/// format them, one line per rule and flow with its packet count
/// (`%ACL-LOG`-style).
pub fn acl_log_pass(cfg: &Config, s: &Services) -> Vec<String> {
    let mut lines = Vec::new();
    for l in s.lists() {
        let mut flows: Vec<(pipeline::services::AclLogEvent, u64)> = Vec::new();
        while let Some(e) = l.log_events.pop() {
            let same = |o: &pipeline::services::AclLogEvent| {
                o.rule == e.rule
                    && o.port == e.port
                    && o.key.src_ip == e.key.src_ip
                    && o.key.dst_ip == e.key.dst_ip
                    && o.key.proto == e.key.proto
                    && o.key.src_port == e.key.src_port
                    && o.key.dst_port == e.key.dst_port
                    && o.key.src_mac == e.key.src_mac
            };
            match flows.iter_mut().find(|(o, _)| same(o)) {
                Some((_, n)) => *n += 1,
                None => flows.push((e, 1)),
            }
        }
        for (e, n) in flows {
            let port = cfg
                .ports
                .get(e.port as usize)
                .map(|p| p.name.as_str())
                .unwrap_or("?");
            let k = &e.key;
            let ip = |a: u128| -> String {
                match k.family {
                    4 => std::net::Ipv4Addr::from(a as u32).to_string(),
                    6 => std::net::Ipv6Addr::from(a).to_string(),
                    _ => String::new(),
                }
            };
            let what = if k.family == 0 {
                format!(
                    "ethertype {:#06x} {} -> {}",
                    k.ethertype,
                    config::show_mac(k.src_mac),
                    config::show_mac(k.dst_mac)
                )
            } else {
                format!(
                    "proto {} {}({}) -> {}({})",
                    k.proto,
                    ip(k.src_ip),
                    k.src_port,
                    ip(k.dst_ip),
                    k.dst_port
                )
            };
            // Rules are named by position (the configuration has no
            // sequence numbers), as `show access-lists` lists them.
            lines.push(format!(
                "acl: list {} rule {} {} {what} on {port}, {n} packet{}",
                l.name,
                e.rule as usize + 1,
                if e.permitted { "permitted" } else { "denied" },
                if n == 1 { "" } else { "s" }
            ));
        }
    }
    if lines.len() > ACL_LOG_LINES {
        let more = lines.len() - ACL_LOG_LINES;
        lines.truncate(ACL_LOG_LINES);
        lines.push(format!("acl: {more} more log lines suppressed"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: &str = "switch:\n  workers: 2\naccess-lists:\n  - name: a4\n    rules:\n      - {action: deny, protocol: tcp, destination-port: 23, log: true}\n      - {action: permit}\n  - name: m\n    type: mac\n    rules:\n      - {action: permit, ethertype: arp}\nclass-maps:\n  - name: web\n    match: [{protocol: tcp, destination-port: 80}]\npolicy-maps:\n  - name: p\n    classes:\n      - {class: web, set-dscp: af21, police: {cir: 1M}}\n  - name: q\n    classes:\n      - {class: web, queue: {priority: true}}\nvlans:\n  - id: 10\n    acl-out: [m]\nports:\n  - name: a\n    vlan: 10\n    acl-in: [a4, m]\n    policy-in: p\n  - name: b\n    vlan: 10\n    acl-in: [a4]\n    policy-out: q\n";

    #[test]
    fn compiles_shared_lists_policies_and_queues() {
        let cfg = config::parse(CFG, "t").unwrap_or_else(|e| panic!("{e}"));
        assert!(configured(&cfg));
        let s = compile(&cfg, 2).unwrap();
        // One compiled list shared by both ports, counted apart.
        let a = s.port_in[0].v4.as_ref().unwrap();
        let b = s.port_in[1].v4.as_ref().unwrap();
        assert!(Arc::ptr_eq(&a.list, &b.list));
        assert!(!Arc::ptr_eq(a, b));
        assert!(s.port_in[0].mac.is_some() && s.vlan_out[10].mac.is_some());
        assert_eq!(&a.permit[..], &[false, true]);
        assert_eq!(&a.log[..], &[true, false]);
        assert_eq!(s.lists().len(), 2);
        let p = s.policy_in[0].as_ref().unwrap();
        // web: one line without addresses → an IPv4 and an IPv6 line.
        assert_eq!(p.classifier.len(), 2);
        assert_eq!(&p.line_class[..], &[0, 0]);
        assert_eq!(p.classes.len(), 2);
        assert_eq!(p.classes[0].set_dscp, Some(18));
        let pol = p.classes[0].police.unwrap();
        assert_eq!(pol.rates.cir_bps, 1_000_000);
        assert_eq!(pol.rates.pir_bps, 1_000_000);
        assert!(p.queues.is_none());
        let q = s.policy_out[1].as_ref().unwrap();
        let qs = q.queues.as_ref().unwrap();
        assert!(qs[0].priority && !qs[1].priority && qs[1].weight == 1);
        assert!(s.any_egress);
        assert!(s.ingress_on(0) && s.ingress_on(1) && !s.ingress_on(2));
        // Keys classify as configured.
        let k = tables::acl::AclKey {
            family: 4,
            proto: 6,
            dst_port: 80,
            ..Default::default()
        };
        assert_eq!(p.classify(&k), 0);
        assert_eq!(p.classify(&tables::acl::AclKey { dst_port: 81, ..k }), 1);
        assert!(rule_text(&cfg.access_lists[0].rules[0]).starts_with("deny protocol tcp"));
    }

    /// Issue 13: a list or policy attached to several ports counts per
    /// port and direction; `show access-lists` sums the attachments.
    #[test]
    fn issue13_counters_per_attachment() {
        let cfg = config::parse(CFG, "t").unwrap_or_else(|e| panic!("{e}"));
        let s = compile(&cfg, 2).unwrap();
        let telnet = tables::acl::AclKey {
            family: 4,
            proto: 6,
            dst_port: 23,
            ..Default::default()
        };
        // Port a checks its mac list first (permit arp only): denied
        // there, a4 never sees it. Port b has a4 alone.
        assert!(!s.port_in[0].permits(&telnet, 1, 0));
        for _ in 0..10 {
            assert!(!s.port_in[1].permits(&telnet, 0, 1));
        }
        let v = access_lists_json(&cfg, Some(&s), Some("a4"), true).unwrap();
        assert_eq!(v[0]["entries"][0]["hits"], 10);
        assert_eq!(v[0]["attachments"][0]["interface"], "a");
        assert_eq!(v[0]["attachments"][0]["matches"], 0);
        assert_eq!(v[0]["attachments"][1]["interface"], "b");
        assert_eq!(v[0]["attachments"][1]["matches"], 10);
        let m = access_lists_json(&cfg, Some(&s), Some("m"), true).unwrap();
        assert_eq!(m[0]["implicit-deny-hits"], 1);
        let a = access_lists_attached_json(&cfg, Some(&s), Some("a"), None, false).unwrap();
        let a4 = a
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "a4")
            .unwrap();
        assert_eq!(a4["direction"], "in");
        assert_eq!(a4["entries"][0]["hits"], 0);
        let am = a
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "m")
            .unwrap();
        assert_eq!(am["implicit-deny-hits"], 1);
        let b = access_lists_attached_json(&cfg, Some(&s), Some("b"), None, false).unwrap();
        assert_eq!(b[0]["entries"][0]["hits"], 10);
        let vl = access_lists_attached_json(&cfg, Some(&s), None, Some(10), false).unwrap();
        assert_eq!(vl[0]["name"], "m");
        assert_eq!(vl[0]["direction"], "out");
        assert_eq!(vl[0]["matches"], 0);
        assert!(access_lists_attached_json(&cfg, Some(&s), Some("zz"), None, false).is_err());
        // Policy `p` on port a only; its counters are a's.
        let pol = s.policy_in[0].as_ref().unwrap();
        pol.counters.add(1, class_counter::PACKETS, 3);
        let v = policy_maps_json(&cfg, Some(&s), None).unwrap();
        assert_eq!(v[0]["port"], "a");
        assert_eq!(v[0]["classes"][0]["packets"], 3);
    }

    #[test]
    fn log_pass_aggregates_per_flow() {
        let cfg = config::parse(CFG, "t").unwrap_or_else(|e| panic!("{e}"));
        let s = compile(&cfg, 1).unwrap();
        let l = s.port_in[0].v4.as_ref().unwrap();
        let k = tables::acl::AclKey {
            family: 4,
            proto: 6,
            src_ip: 0x0a00_0001,
            dst_ip: 0x0a00_0002,
            src_port: 999,
            dst_port: 23,
            ..Default::default()
        };
        for _ in 0..3 {
            let ev = pipeline::services::AclLogEvent {
                rule: 0,
                permitted: false,
                port: 1,
                key: k,
            };
            l.log_events.push(ev).unwrap();
        }
        let lines = acl_log_pass(&cfg, &s);
        assert_eq!(
            lines,
            vec![
                "acl: list a4 rule 1 denied proto 6 10.0.0.1(999) -> 10.0.0.2(23) on b, 3 packets"
            ]
        );
        assert!(acl_log_pass(&cfg, &s).is_empty());
    }
}
