//! Mirror (SPAN) sessions on the lab's DUTs (see `mirror.rs` for the
//! procedure): session k (0-based) copies every frame `sw1` receives to
//! `sw(3 + k)`.
//! - lanyard: `mirror-sessions` (docs/mirroring.md), `direction: rx`;
//! - ovs: one `Mirror` row per session (`select-src-port`, `output-port`);
//! - linux-bridge: `tc` on `sw1`'s ingress, one match-all `u32` filter
//!   (this kernel has no `matchall` classifier) with N
//!   `mirred egress mirror` actions; the destinations are not bridge
//!   ports (a bridge port would also get flooded frames).

use crate::netns::run;
use crate::LabError;

/// Most sessions a plan may ask for (Lanyard's limit, docs/mirroring.md).
pub const MAX_SESSIONS: u32 = 16;

/// DUT port name (`swK`) of session `k`'s destination, k = 0..N.
pub fn destination(k: u32) -> String {
    format!("sw{}", k + 3)
}

/// True when `sw` (a DUT port name) is one of `n` sessions' destinations.
pub fn is_destination(sw: &str, n: u32) -> bool {
    (0..n).any(|k| destination(k) == sw)
}

/// Lanyard's `mirror-sessions` section for `n` sessions.
pub fn lanyard_yaml(n: u32) -> String {
    if n == 0 {
        return String::new();
    }
    let mut c = String::from("mirror-sessions:\n");
    for k in 0..n {
        c.push_str(&format!(
            "  - {{name: lab{}, source-ports: [sw1], direction: rx, destination: {}}}\n",
            k + 1,
            destination(k)
        ));
    }
    c
}

/// The `tc` filter on `sw1`'s ingress that copies every frame to the `n`
/// destinations (arguments after `tc -n NS`).
pub fn tc_filter_args(n: u32) -> Vec<String> {
    let mut a: Vec<String> = "filter add dev sw1 ingress protocol all u32 match u32 0 0"
        .split(' ')
        .map(String::from)
        .collect();
    for k in 0..n {
        for w in ["action", "mirred", "egress", "mirror", "dev"] {
            a.push(w.into());
        }
        a.push(destination(k));
    }
    a
}

/// linux-bridge: `n` sessions with tc (the destinations were left out of
/// the bridge by `start_bridge`).
pub fn bridge_setup(ns: &str, n: u32) -> Result<String, LabError> {
    run("tc", &["-n", ns, "qdisc", "add", "dev", "sw1", "clsact"])?;
    let mut args = vec!["-n".to_string(), ns.to_string()];
    args.extend(tc_filter_args(n));
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    run("tc", &refs)?;
    Ok(format!(
        "{n} mirror sessions: tc u32 match-all on sw1 ingress, mirred egress mirror to sw3..sw{} (not bridge ports)",
        n + 2
    ))
}

/// ovs: `n` Mirror rows on `br0` (arguments for `ovs-vsctl DB ...`).
pub fn ovs_args(n: u32) -> Vec<String> {
    let mut a = vec!["--timeout=20".to_string()];
    let mut ids = Vec::new();
    a.extend(
        ["--", "--id=@src", "get", "port", "sw1"]
            .iter()
            .map(|s| s.to_string()),
    );
    for k in 0..n {
        let d = destination(k);
        a.extend([
            "--".into(),
            format!("--id=@o{k}"),
            "get".into(),
            "port".into(),
            d,
            "--".into(),
            format!("--id=@m{k}"),
            "create".into(),
            "mirror".into(),
            format!("name=lab{}", k + 1),
            "select-src-port=@src".into(),
            format!("output-port=@o{k}"),
        ]);
        ids.push(format!("@m{k}"));
    }
    a.extend([
        "--".into(),
        "set".into(),
        "bridge".into(),
        "br0".into(),
        format!("mirrors=[{}]", ids.join(",")),
    ]);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanyard_sessions_copy_sw1_to_one_destination_each() {
        let y = lanyard_yaml(8);
        assert_eq!(y.lines().count(), 9);
        assert!(y.contains("{name: lab1, source-ports: [sw1], direction: rx, destination: sw3}"));
        assert!(y.contains("{name: lab8, source-ports: [sw1], direction: rx, destination: sw10}"));
        assert_eq!(lanyard_yaml(0), "");
        assert!(is_destination("sw10", 8) && !is_destination("sw11", 8));
        assert!(!is_destination("sw1", 8) && !is_destination("sw2", 8));
    }

    #[test]
    fn lanyard_accepts_sixteen_sessions_and_the_inline_pair() {
        // The shape the lanyard driver writes: access ports in VLAN 10.
        let ports = |n: usize| -> String {
            (1..=n)
                .map(|i| format!("  - name: sw{i}\n    mode: access\n    vlan: 10\n"))
                .collect()
        };
        let base = "switch:\n  name: lab\nvlans:\n  - id: 10\nports:\n";
        let y = format!("{base}{}{}", ports(18), lanyard_yaml(MAX_SESSIONS));
        let cfg = config::parse(&y, "mirror.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"));
        assert_eq!(cfg.mirror_sessions.len(), 16);
        // One session more than Lanyard takes is refused by Lanyard too.
        let mut y17 = format!("{base}{}{}", ports(19), lanyard_yaml(MAX_SESSIONS));
        y17.push_str("  - {name: lab17, source-ports: [sw1], direction: rx, destination: sw19}\n");
        assert!(config::parse(&y17, "mirror.yaml").is_err());
    }

    #[test]
    fn tc_and_ovs_name_every_destination_once() {
        let tc = tc_filter_args(3).join(" ");
        assert_eq!(
            tc,
            "filter add dev sw1 ingress protocol all u32 match u32 0 0 action mirred egress mirror dev sw3 \
             action mirred egress mirror dev sw4 action mirred egress mirror dev sw5"
        );
        let ovs = ovs_args(2).join(" ");
        assert!(
            ovs.contains("--id=@m0 create mirror name=lab1 select-src-port=@src output-port=@o0")
        );
        assert!(ovs.contains("--id=@o1 get port sw4"));
        assert!(ovs.ends_with("set bridge br0 mirrors=[@m0,@m1]"));
    }
}
