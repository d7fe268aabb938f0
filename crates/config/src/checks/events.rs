//! Checks of `event-manager:`: one trigger and one action kind each,
//! counters that exist, cron and regex syntax, show/clear commands the CLI
//! knows, and configuration patches that would apply.

use crate::error::Issue;
use crate::event_refs::{parse_counter, patched};
use crate::events::{Cron, SEVERITIES};

pub(crate) fn check(cfg: &crate::Config) -> Vec<Issue> {
    let mut out = Vec::new();
    let Some(em) = &cfg.event_manager else {
        return out;
    };
    let mut err = |path: String, message: String| out.push(Issue { path, message });
    if !(100..=60_000).contains(&em.poll_interval_ms) {
        err(
            "event-manager.poll-interval-ms".into(),
            format!("{} is out of range 100..60000", em.poll_interval_ms),
        );
    }
    if let Some(r) = &em.smtp_relay {
        use std::net::ToSocketAddrs;
        if r.to_socket_addrs()
            .map(|mut a| a.next().is_none())
            .unwrap_or(true)
        {
            err(
                "event-manager.smtp-relay".into(),
                format!("{r:?} is not host:port"),
            );
        }
    }
    let mut names = std::collections::HashSet::new();
    for (i, p) in em.policies.iter().enumerate() {
        let at = format!("event-manager.policies[{i}]");
        if p.name.trim().is_empty() {
            err(format!("{at}.name"), "must not be empty".into());
        } else if !names.insert(p.name.clone()) {
            err(
                format!("{at}.name"),
                format!("policy {:?} is defined twice", p.name),
            );
        }
        let ev = &p.on;
        let kinds = ev.kinds();
        if kinds.len() != 1 {
            err(
                format!("{at}.on"),
                format!(
                    "needs exactly one of interface, counter, cpu, flows, table, timer, cron, log (found: {})",
                    if kinds.is_empty() { "none".to_string() } else { kinds.join(", ") }
                ),
            );
        }
        let threshold = matches!(
            kinds.first(),
            Some(&("counter" | "cpu" | "flows" | "table"))
        );
        if threshold && kinds.len() == 1 && ev.above.is_none() {
            err(
                format!("{at}.on.above"),
                format!("{} needs a threshold (above: N)", kinds[0]),
            );
        }
        if let (Some(a), Some(r)) = (ev.above, ev.rearm_below) {
            if r > a {
                err(
                    format!("{at}.on.rearm-below"),
                    format!("{r} is above the threshold {a}"),
                );
            }
        }
        if let Some(ifc) = &ev.interface {
            if ifc != "any" && cfg.port_index(ifc).is_none() {
                err(format!("{at}.on.interface"), format!("no port {ifc:?}"));
            }
        }
        if let Some(st) = &ev.state {
            if !["up", "down", "change"].contains(&st.as_str()) {
                err(
                    format!("{at}.on.state"),
                    format!("{st:?}: expected up, down or change"),
                );
            }
        }
        if let Some(c) = &ev.counter {
            if let Err(e) = parse_counter(c, cfg) {
                err(format!("{at}.on.counter"), e);
            }
        }
        if let Some(c) = &ev.cpu {
            let thread = c
                .strip_prefix("thread ")
                .is_some_and(|n| !n.trim().is_empty() && !n.contains(char::is_whitespace));
            if !thread && !["lanyard", "workers", "control-plane", "host"].contains(&c.as_str()) {
                err(
                    format!("{at}.on.cpu"),
                    format!("{c:?}: expected lanyard, workers, control-plane, host or thread NAME"),
                );
            }
        }
        if let Some(f) = &ev.flows {
            if !["per-interface", "per-source"].contains(&f.as_str()) {
                err(
                    format!("{at}.on.flows"),
                    format!("{f:?}: expected per-interface or per-source"),
                );
            } else if cfg.flow_export.is_none() {
                err(
                    format!("{at}.on.flows"),
                    "needs the flow cache (flow-export:)".into(),
                );
            }
        }
        if let Some(t) = &ev.table {
            let ok = ["mac", "flow-cache", "fib-ipv4", "fib-ipv6", "next-hops"];
            if !ok.contains(&t.as_str()) {
                err(
                    format!("{at}.on.table"),
                    format!("{t:?}: expected one of {}", ok.join(", ")),
                );
            } else if let Some(a) = ev.above {
                if a > 100 {
                    err(
                        format!("{at}.on.above"),
                        format!("{a}: a table fill is 0..100 percent"),
                    );
                }
            }
        }
        if ev.timer == Some(0) {
            err(format!("{at}.on.timer"), "must be at least 1 second".into());
        }
        if let Some(c) = &ev.cron {
            if let Err(e) = Cron::parse(c) {
                err(format!("{at}.on.cron"), e);
            }
        }
        if let Some(l) = &ev.log {
            if let Err(e) = regex::Regex::new(l) {
                err(
                    format!("{at}.on.log"),
                    format!("bad regular expression: {e}"),
                );
            }
        }
        if p.actions.is_empty() {
            err(
                format!("{at}.actions"),
                "a policy needs at least one action".into(),
            );
        }
        for (j, a) in p.actions.iter().enumerate() {
            let ap = format!("{at}.actions[{j}]");
            let k = a.kinds();
            if k.len() != 1 {
                err(
                    ap.clone(),
                    "needs exactly one of log, show, clear, mail, webhook, syslog, script, apply"
                        .into(),
                );
                continue;
            }
            let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
            if let Some(s) = &a.show {
                if let Err(e) = mgmt::cli::parse_show(&words(s)) {
                    err(format!("{ap}.show"), e);
                }
            }
            if let Some(s) = &a.clear {
                if let Err(e) = mgmt::cli::parse_clear(&words(s)) {
                    err(format!("{ap}.clear"), e);
                }
            }
            if a.mail.is_some() && em.smtp_relay.is_none() {
                err(
                    format!("{ap}.mail"),
                    "needs event-manager.smtp-relay".into(),
                );
            }
            if let Some(u) = &a.webhook {
                if !u.starts_with("http://") {
                    err(
                        format!("{ap}.webhook"),
                        format!("{u:?}: expected an http:// URL"),
                    );
                }
            }
            if let Some(s) = &a.syslog {
                if let Some(sev) = &s.severity {
                    if !SEVERITIES.contains(&sev.as_str()) {
                        err(
                            format!("{ap}.syslog.severity"),
                            format!("{sev:?}: expected one of {}", SEVERITIES.join(", ")),
                        );
                    }
                }
            }
            if let Some(s) = &a.script {
                if !s.path.starts_with('/') {
                    err(
                        format!("{ap}.script.path"),
                        format!("{:?} must be an absolute path", s.path),
                    );
                }
                if !(1..=3600).contains(&s.timeout) {
                    err(
                        format!("{ap}.script.timeout"),
                        format!("{} is out of range 1..3600", s.timeout),
                    );
                }
            }
            if let Some(pa) = &a.apply {
                if !pa.patch.is_mapping() {
                    err(
                        format!("{ap}.apply.patch"),
                        "must be a map of configuration keys".into(),
                    );
                } else if pa.patch.get("event-manager").is_some() {
                    err(
                        format!("{ap}.apply.patch"),
                        "a patch cannot change the event manager".into(),
                    );
                } else {
                    // The patch must apply to this configuration, with
                    // placeholders filled with something plausible.
                    let probe = crate::events::substitute(
                        &pa.patch,
                        &[
                            ("source", "192.0.2.1"),
                            (
                                "interface",
                                cfg.ports.first().map(|p| p.name.as_str()).unwrap_or("none"),
                            ),
                        ],
                    );
                    let mut base = cfg.clone();
                    base.event_manager = None;
                    if let Err(e) = patched(&base, &probe) {
                        err(format!("{ap}.apply.patch"), format!("would not apply: {e}"));
                    }
                }
                if pa.revert_after == Some(0) {
                    err(
                        format!("{ap}.apply.revert-after"),
                        "must be at least 1 second".into(),
                    );
                }
            }
        }
    }
    out
}
