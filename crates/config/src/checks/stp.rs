//! Checks of `spanning-tree` that need the whole configuration.

use crate::stp::*;

/// Semantic checks of `spanning-tree:`.
pub(crate) fn check(cfg: &crate::Config) -> Vec<crate::error::Issue> {
    let mut out = Vec::new();
    let Some(st) = &cfg.spanning_tree else {
        return out;
    };
    let mut err = |path: String, message: String| out.push(crate::error::Issue { path, message });
    let at = "spanning-tree";
    if st.priority > PRIORITY_MAX || st.priority % PRIORITY_STEP != 0 {
        err(
            format!("{at}.priority"),
            format!(
                "{} is not a bridge priority: a multiple of 4096 in 0..61440",
                st.priority
            ),
        );
    }
    let range = |v: u32,
                 r: &std::ops::RangeInclusive<u32>,
                 f: &str,
                 err: &mut dyn FnMut(String, String)| {
        if !r.contains(&v) {
            err(
                format!("{at}.{f}"),
                format!("{v} is out of range {}..{}", r.start(), r.end()),
            );
            false
        } else {
            true
        }
    };
    let ok = range(st.hello_time, &HELLO, "hello-time", &mut err)
        & range(st.max_age, &MAX_AGE, "max-age", &mut err)
        & range(st.forward_delay, &FORWARD_DELAY, "forward-delay", &mut err);
    range(st.tx_hold_count, &TX_HOLD_COUNT, "tx-hold-count", &mut err);
    // 802.1D-2004 17.14: 2 × (Forward Delay − 1) ≥ Max Age ≥ 2 × (Hello Time + 1).
    if ok && 2 * (st.forward_delay - 1) < st.max_age {
        err(
            format!("{at}.max-age"),
            format!(
                "max-age {} needs forward-delay of at least {} (2 × (forward-delay − 1) ≥ max-age)",
                st.max_age,
                st.max_age.div_ceil(2) + 1
            ),
        );
    }
    if ok && st.max_age < 2 * (st.hello_time + 1) {
        err(
            format!("{at}.max-age"),
            format!(
                "max-age {} is less than 2 × (hello-time + 1) = {}",
                st.max_age,
                2 * (st.hello_time + 1)
            ),
        );
    }
    if st.bpdu_guard_recovery > crate::guard::MAX_RECOVERY {
        err(
            format!("{at}.bpdu-guard-recovery"),
            format!(
                "{} s; at most {} (0: manual)",
                st.bpdu_guard_recovery,
                crate::guard::MAX_RECOVERY
            ),
        );
    }
    for (i, p) in st.ports.iter().enumerate() {
        let pa = format!("{at}.ports[{i}]");
        match cfg.port(&p.name) {
            None => err(
                format!("{pa}.name"),
                format!("port {:?} is not configured (see ports)", p.name),
            ),
            Some(c) if c.mode == crate::PortMode::Routed => err(
                format!("{pa}.name"),
                format!(
                    "port {:?} is routed: spanning tree runs on switch ports",
                    p.name
                ),
            ),
            Some(_) => {}
        }
        if st.ports[..i].iter().any(|q| q.name == p.name) {
            err(
                format!("{pa}.name"),
                format!("port {:?} is listed twice", p.name),
            );
        }
        if !COST.contains(&p.cost) {
            err(
                format!("{pa}.cost"),
                format!("{} is out of range 1..200000000", p.cost),
            );
        }
        if p.priority > 240 || p.priority % 16 != 0 {
            err(
                format!("{pa}.priority"),
                format!(
                    "{} is not a port priority: a multiple of 16 in 0..240",
                    p.priority
                ),
            );
        }
        let member = cfg
            .port_channels
            .iter()
            .any(|c| c.members.contains(&p.name))
            || cfg
                .backup_pairs
                .iter()
                .any(|b| b.primary == p.name || b.backup == p.name);
        if member && p.enabled {
            err(
                format!("{pa}.name"),
                format!(
                    "port {:?} is a port-channel or backup-pair member: spanning tree does not run on those (set enabled: false)",
                    p.name
                ),
            );
        }
    }
    out
}
