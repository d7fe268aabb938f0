//! Checks of `service-control:` that need the whole configuration.

use crate::error::Issue;

fn issue(out: &mut Vec<Issue>, path: String, message: impl Into<String>) {
    out.push(Issue {
        path,
        message: message.into(),
    });
}

pub(crate) fn check(cfg: &crate::Config) -> Vec<Issue> {
    let mut out = Vec::new();
    let Some(sc) = &cfg.service_control else {
        return out;
    };
    let p = "service-control";
    if sc.inline.is_empty() {
        issue(
            &mut out,
            format!("{p}.inline"),
            "list at least one port pair",
        );
    }
    let mut used: Vec<&str> = Vec::new();
    for (i, pair) in sc.inline.iter().enumerate() {
        for (field, name) in [
            ("subscriber-port", &pair.subscriber_port),
            ("network-port", &pair.network_port),
        ] {
            let path = format!("{p}.inline[{i}].{field}");
            match cfg.port_index(name) {
                None => issue(
                    &mut out,
                    path,
                    format!("no port '{name}' (add it under ports)"),
                ),
                Some(ix) => {
                    if cfg.ports[ix].mode == crate::PortMode::Routed {
                        issue(&mut out, path, format!("port '{name}' is routed; an inline port is switched by nobody (leave its mode at the default)"));
                    } else if cfg.is_monitor_port(ix) {
                        issue(
                            &mut out,
                            path,
                            format!("port '{name}' is a mirror destination"),
                        );
                    } else if used.contains(&name.as_str()) {
                        issue(
                            &mut out,
                            path,
                            format!("port '{name}' is already in an inline pair"),
                        );
                    }
                }
            }
            used.push(name);
        }
    }
    let ranges: [(&str, u64, std::ops::RangeInclusive<u64>); 7] = [
        ("report-interval-s", sc.report_interval_s.into(), 1..=3600),
        ("flows", sc.flows.into(), 16..=(1 << 27)),
        ("classify-slots", sc.classify_slots.into(), 1..=(1 << 22)),
        ("classify-packets", sc.classify_packets.into(), 1..=255),
        ("signature-depth", sc.signature_depth.into(), 0..=255),
        ("usage-entries", sc.usage_entries.into(), 16..=(1 << 28)),
        ("max-subscribers", sc.max_subscribers.into(), 1..=16_777_216),
    ];
    for (field, v, r) in ranges {
        if !r.contains(&v) {
            issue(
                &mut out,
                format!("{p}.{field}"),
                format!("{v} is out of range {}..{}", r.start(), r.end()),
            );
        }
    }
    for (name, secs) in &sc.timeouts {
        let path = format!("{p}.timeouts.{name}");
        if !dpi::flow::State::ALL.iter().any(|s| s.name() == name) {
            let known: Vec<&str> = dpi::flow::State::ALL.iter().map(|s| s.name()).collect();
            issue(
                &mut out,
                path,
                format!("no flow state '{name}' (one of {})", known.join(", ")),
            );
        } else if !(1..=86_400 * 30).contains(secs) {
            issue(
                &mut out,
                path,
                format!("{secs} s is out of range 1..2592000"),
            );
        }
    }
    if let Some(u) = &sc.usage_export {
        use std::net::ToSocketAddrs;
        if !matches!(
            u.collector.to_socket_addrs().map(|mut a| a.next()),
            Ok(Some(_))
        ) {
            issue(
                &mut out,
                format!("{p}.usage-export.collector"),
                format!("{:?} is not HOST:PORT (e.g. 127.0.0.1:4739)", u.collector),
            );
        }
        if !(1024..=(1 << 24)).contains(&u.queue) {
            issue(
                &mut out,
                format!("{p}.usage-export.queue"),
                format!("{} is out of range 1024..16777216", u.queue),
            );
        }
        if u.template_refresh == 0 {
            issue(
                &mut out,
                format!("{p}.usage-export.template-refresh"),
                "must be at least 1 second",
            );
        }
        if !(1..=604_800).contains(&u.active_timeout) {
            issue(
                &mut out,
                format!("{p}.usage-export.active-timeout"),
                format!("{} is out of range 1..604800 seconds", u.active_timeout),
            );
        }
    }
    let mut names: Vec<&str> = vec!["unknown", "other"];
    for (i, s) in sc.services.iter().enumerate() {
        if s.name.is_empty() || names.contains(&s.name.as_str()) {
            issue(
                &mut out,
                format!("{p}.services[{i}].name"),
                format!("'{}' is empty, reserved or used twice", s.name),
            );
        }
        names.push(&s.name);
    }
    if sc.services.len() + 2 > dpi::service::MAX_SERVICES {
        issue(
            &mut out,
            format!("{p}.services"),
            format!("at most {} services", dpi::service::MAX_SERVICES - 2),
        );
    }
    if sc.services.iter().any(|s| !s.applications.is_empty()) {
        match dpi::ndpi::Ndpi::new() {
            Err(e) => issue(
                &mut out,
                format!("{p}.services"),
                format!("cannot load nDPI to check application names: {e}"),
            ),
            Ok(n) => {
                let mut seen: Vec<(u16, &str)> = Vec::new();
                for (i, s) in sc.services.iter().enumerate() {
                    for (j, a) in s.applications.iter().enumerate() {
                        let path = format!("{p}.services[{i}].applications[{j}]");
                        match n.id(a) {
                            None => issue(&mut out, path, format!("'{a}' is not an nDPI application (`lanyard show service-control applications` lists them)")),
                            Some(id) => {
                                if let Some((_, other)) = seen.iter().find(|(x, _)| *x == id) {
                                    issue(&mut out, path, format!("'{a}' is already in service '{other}'"));
                                }
                                seen.push((id, &s.name));
                            }
                        }
                    }
                }
            }
        }
    }
    let mut sig_names: Vec<&str> = Vec::new();
    for (i, s) in sc.signatures.iter().enumerate() {
        let path = format!("{p}.signatures[{i}]");
        if s.name.is_empty() || sig_names.contains(&s.name.as_str()) {
            issue(
                &mut out,
                format!("{path}.name"),
                format!("'{}' is empty or used twice", s.name),
            );
        }
        sig_names.push(&s.name);
        if !sc.services.iter().any(|d| d.name == s.service) {
            issue(
                &mut out,
                format!("{path}.service"),
                format!(
                    "no service '{}' (define it under service-control.services)",
                    s.service
                ),
            );
        }
        if let Err((field, e)) = s.compile() {
            issue(&mut out, format!("{path}.{field}"), e);
        }
    }
    if sc.signatures.len() > dpi::signature::MAX_SIGNATURES {
        issue(
            &mut out,
            format!("{p}.signatures"),
            format!("at most {} signatures", dpi::signature::MAX_SIGNATURES),
        );
    }
    // Bandwidth control: controllers name services, rates parse.
    let names: Vec<(String, Vec<u16>)> = sc
        .services
        .iter()
        .map(|s| (s.name.clone(), Vec::new()))
        .collect();
    if let Ok(map) = dpi::service::ServiceMap::new(&names) {
        if let Err((field, e)) = sc.bandwidth(&map) {
            issue(&mut out, format!("{p}.{field}"), e);
        }
    }
    out
}
