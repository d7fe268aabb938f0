//! Checks of `guard` that need the whole configuration.

use crate::guard::*;

/// Semantic checks of storm control and loop detection.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    for (i, p) in cfg.ports.iter().enumerate() {
        let Some(sc) = &p.storm_control else { continue };
        let at = format!("ports[{i}].storm-control");
        if p.mode == crate::PortMode::Routed {
            err(
                at.clone(),
                "not on a routed port (control-plane policing limits what reaches the router)"
                    .into(),
            );
        }
        let mut any = false;
        for (name, level) in sc.levels() {
            if let Some(l) = level {
                any = true;
                if let Err(e) = parse_level(l) {
                    err(format!("{at}.{name}"), e);
                }
            }
        }
        if !any {
            err(
                at.clone(),
                "set a limit: broadcast, multicast or unknown-unicast".into(),
            );
        }
        if sc.recovery() > MAX_RECOVERY {
            err(
                format!("{at}.recovery"),
                format!("{} s; at most {MAX_RECOVERY} (0: manual)", sc.recovery()),
            );
        }
    }
    if let Some(ld) = &cfg.loop_detect {
        if !LOOP_INTERVAL.contains(&ld.interval) {
            err(
                "loop-detect.interval".into(),
                format!("{} s is out of range 1..60", ld.interval),
            );
        }
        if ld.recovery > MAX_RECOVERY {
            err(
                "loop-detect.recovery".into(),
                format!("{} s; at most {MAX_RECOVERY} (0: manual)", ld.recovery),
            );
        }
    }
    out
}
