//! Checks of `services` that need the whole configuration.

use crate::services::*;

/// Semantic checks of the services sections and their attachments.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    use std::collections::HashMap;
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    let mut acls: HashMap<&str, AclType> = HashMap::new();
    for (i, l) in cfg.access_lists.iter().enumerate() {
        let p = format!("access-lists[{i}]");
        if l.name.trim().is_empty() {
            err(format!("{p}.name"), "must not be empty".into());
        } else if acls.insert(&l.name, l.kind).is_some() {
            err(
                format!("{p}.name"),
                format!("access list {:?} is defined twice", l.name),
            );
        }
        if l.rules.len() > MAX_ACL_RULES {
            err(
                format!("{p}.rules"),
                format!("{} rules; at most {MAX_ACL_RULES}", l.rules.len()),
            );
        }
        for (k, r) in l.rules.iter().enumerate() {
            let rp = format!("{p}.rules[{k}]");
            if r.action.is_none() {
                err(format!("{rp}.action"), "missing: permit or deny".into());
            }
            if let Err((field, msg)) = parse_match(r, Some(l.kind)) {
                err(format!("{rp}.{field}"), msg);
            }
        }
    }
    let mut classes: HashMap<&str, usize> = HashMap::new();
    for (i, m) in cfg.class_maps.iter().enumerate() {
        let p = format!("class-maps[{i}]");
        if m.name == CLASS_DEFAULT {
            err(
                format!("{p}.name"),
                format!("{CLASS_DEFAULT} is implicit (it takes what no class matches)"),
            );
        } else if m.name.trim().is_empty() {
            err(format!("{p}.name"), "must not be empty".into());
        } else if classes.insert(&m.name, m.lines.len()).is_some() {
            err(
                format!("{p}.name"),
                format!("class map {:?} is defined twice", m.name),
            );
        }
        if m.lines.is_empty() {
            err(format!("{p}.match"), "needs at least one match line".into());
        }
        for (k, l) in m.lines.iter().enumerate() {
            let lp = format!("{p}.match[{k}]");
            if l.action.is_some() || l.log {
                err(lp.clone(), "class-map lines take no action or log".into());
            }
            if let Err((field, msg)) = parse_match(l, None) {
                err(format!("{lp}.{field}"), msg);
            }
        }
    }
    // Per policy: (has a policer, has queues).
    let mut policies: HashMap<&str, (bool, bool)> = HashMap::new();
    for (i, pm) in cfg.policy_maps.iter().enumerate() {
        let p = format!("policy-maps[{i}]");
        let polices = pm.classes.iter().any(|c| c.police.is_some());
        let queues = pm.classes.iter().any(|c| c.queue.is_some());
        if pm.name.trim().is_empty() {
            err(format!("{p}.name"), "must not be empty".into());
        } else if policies.insert(&pm.name, (polices, queues)).is_some() {
            err(
                format!("{p}.name"),
                format!("policy map {:?} is defined twice", pm.name),
            );
        }
        if pm.classes.len() > MAX_CLASSES {
            err(
                format!("{p}.classes"),
                format!("{} classes; at most {MAX_CLASSES}", pm.classes.len()),
            );
        }
        let mut lines = 0usize;
        let mut seen: HashMap<&str, ()> = HashMap::new();
        for (k, c) in pm.classes.iter().enumerate() {
            let cp = format!("{p}.classes[{k}]");
            if c.class == CLASS_DEFAULT {
                if k + 1 != pm.classes.len() {
                    err(
                        format!("{cp}.class"),
                        format!("{CLASS_DEFAULT} must be the last class"),
                    );
                }
            } else if let Some(n) = classes.get(c.class.as_str()) {
                lines += n;
            } else {
                err(
                    format!("{cp}.class"),
                    format!("class map {:?} is not defined (see class-maps)", c.class),
                );
            }
            if seen.insert(&c.class, ()).is_some() {
                err(
                    format!("{cp}.class"),
                    format!("class {:?} is listed twice", c.class),
                );
            }
            if let Some(d) = &c.set_dscp {
                if let Err(e) = parse_dscp(d) {
                    err(format!("{cp}.set-dscp"), e);
                }
            }
            if c.set_pcp.is_some_and(|v| v > 7) {
                err(format!("{cp}.set-pcp"), "must be 0..7".into());
            }
            if let Some(pol) = &c.police {
                check_police(pol, &format!("{cp}.police"), &mut err);
            }
            if let Some(q) = &c.queue {
                if q.priority && q.weight.is_some() {
                    err(
                        format!("{cp}.queue"),
                        "a priority queue takes no weight".into(),
                    );
                }
                if q.weight.is_some_and(|w| !(1..=1000).contains(&w)) {
                    err(format!("{cp}.queue.weight"), "must be 1..1000".into());
                }
                if q.depth.is_some_and(|d| !(16..=8192).contains(&d)) {
                    err(
                        format!("{cp}.queue.depth"),
                        "must be 16..8192 frames".into(),
                    );
                }
            }
        }
        if lines > MAX_CLASS_LINES {
            err(
                format!("{p}.classes"),
                format!("its class maps have {lines} match lines; at most {MAX_CLASS_LINES}"),
            );
        }
    }
    let mut attach = |p: String,
                      acl_in: &[String],
                      acl_out: &[String],
                      pin: Option<&String>,
                      pout: Option<&String>| {
        for (dir, list) in [("acl-in", acl_in), ("acl-out", acl_out)] {
            let mut kinds: Vec<AclType> = Vec::new();
            for (k, name) in list.iter().enumerate() {
                match acls.get(name.as_str()) {
                    None => err(
                        format!("{p}.{dir}[{k}]"),
                        format!("access list {name:?} is not defined (see access-lists)"),
                    ),
                    Some(t) if kinds.contains(t) => err(
                        format!("{p}.{dir}[{k}]"),
                        format!(
                            "a second {} access list; one per type and direction",
                            t.as_str()
                        ),
                    ),
                    Some(t) => kinds.push(*t),
                }
            }
        }
        for (dir, name) in [("policy-in", pin), ("policy-out", pout)] {
            let Some(name) = name else { continue };
            match policies.get(name.as_str()) {
                None => err(
                    format!("{p}.{dir}"),
                    format!("policy map {name:?} is not defined (see policy-maps)"),
                ),
                // Egress queues are the physical port's; a routed
                // subinterface's output policy re-marks only.
                Some((_, true)) if dir == "policy-out" && p.contains(".subinterfaces[") => err(
                    format!("{p}.{dir}"),
                    format!(
                        "policy map {name:?} has queues: queues belong to the physical port, \
                         a subinterface's output policy only re-marks"
                    ),
                ),
                Some((true, _)) if dir == "policy-out" => err(
                    format!("{p}.{dir}"),
                    format!("policy map {name:?} has a policer: policers work on input only"),
                ),
                Some((_, true)) if dir == "policy-in" => err(
                    format!("{p}.{dir}"),
                    format!("policy map {name:?} has queues: queues work on output only"),
                ),
                _ => {}
            }
        }
    };
    for (i, port) in cfg.ports.iter().enumerate() {
        attach(
            format!("ports[{i}]"),
            &port.acl_in,
            &port.acl_out,
            port.policy_in.as_ref(),
            port.policy_out.as_ref(),
        );
    }
    for (i, v) in cfg.vlans.iter().enumerate() {
        attach(format!("vlans[{i}]"), &v.acl_in, &v.acl_out, None, None);
    }
    for s in cfg.subinterfaces() {
        attach(
            s.path(),
            &s.sub.acl_in,
            &s.sub.acl_out,
            s.sub.policy_in.as_ref(),
            s.sub.policy_out.as_ref(),
        );
    }
    if let Some(f) = &cfg.flow_export {
        let p = "flow-export";
        use std::net::ToSocketAddrs;
        match f.collector.to_socket_addrs().map(|mut a| a.next()) {
            Ok(Some(_)) => {}
            _ => err(
                format!("{p}.collector"),
                format!("{:?} is not HOST:PORT (e.g. 127.0.0.1:2055)", f.collector),
            ),
        }
        if f.sampling == 0 {
            err(
                format!("{p}.sampling"),
                "must be at least 1 (1 = every packet)".into(),
            );
        }
        if f.inactive_timeout == 0 || f.active_timeout == 0 {
            err(p.to_string(), "timeouts must be at least 1 second".into());
        }
        if !(1024..=1 << 26).contains(&f.cache_size) {
            err(
                format!("{p}.cache-size"),
                format!("{} is out of range 1024..67108864", f.cache_size),
            );
        }
        if let Some(r) = f.rate_limit {
            if !(100..=100_000_000).contains(&r) {
                err(
                    format!("{p}.rate-limit"),
                    format!("{r} is out of range 100..100000000 records/s"),
                );
            }
        }
        if f.template_refresh == 0 {
            err(
                format!("{p}.template-refresh"),
                "must be at least 1 second".into(),
            );
        }
    }
    out
}

fn check_police(pol: &Police, p: &str, err: &mut impl FnMut(String, String)) {
    let mut q = |field: &str, v: &Option<String>| -> Option<u64> {
        let s = v.as_ref()?;
        match parse_quantity(s) {
            Ok(n) => Some(n),
            Err(e) => {
                err(format!("{p}.{field}"), e);
                None
            }
        }
    };
    let cir = q("cir", &Some(pol.cir.clone()));
    let pir = q("pir", &pol.pir);
    let cbs = q("cbs", &pol.cbs);
    let pbs = q("pbs", &pol.pbs);
    if cir == Some(0) {
        err(format!("{p}.cir"), "must be above 0".into());
    }
    if let (Some(c), Some(pr)) = (cir, pir) {
        if pr < c {
            err(
                format!("{p}.pir"),
                format!("peak rate {pr} is below the committed rate {c}"),
            );
        }
    }
    for (field, b) in [("cbs", cbs), ("pbs", pbs)] {
        if b.is_some_and(|b| b < MIN_BURST) {
            err(
                format!("{p}.{field}"),
                format!("must hold at least one jumbo frame ({MIN_BURST} bytes)"),
            );
        }
    }
    for (field, a) in [
        ("conform", &pol.conform),
        ("exceed", &pol.exceed),
        ("violate", &pol.violate),
    ] {
        if let Err(e) = parse_police_action(a) {
            err(format!("{p}.{field}"), e);
        }
    }
}
