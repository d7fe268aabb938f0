//! The `lanyard-pair` DUT: two Lanyards configured as one virtual switch
//! (docs/virtual-switch.md), node A and node B each in its own namespace,
//! joined by a peer link `pl` and a keepalive link `ka` (the wiring and
//! `virtual-switch:` section the integration tests use, from
//! `testkit::vswitch`); the peer link is aggregated: port channel `pl`
//! of `pl1` and `pl2`, LACP between the nodes. The LACP partner is a third
//! Lanyard in the DUT namespace standing for the access and core tiers:
//! the access side (VLAN 10: tester port 1 `sw1`, and 3, 5, ... when the
//! plan has more) with port channel `po1` (`a1`..`a4`) and the core side
//! (VLAN 20: tester port 2 `sw2`, and 4, 6, ...) with `po2` (`c1`..`c4`),
//! two members of each on each node, hashed by MAC addresses. The two
//! VLANs keep the partner's sides apart, so every frame between an access
//! and a core port crosses the pair.
//!
//! ```text
//!  t1 ── sw1 [partner] a1,a2 ══ m1,m2 [node A] n1,n2 ══ c1,c2 [partner] sw2 ── t2
//!  t3 ── sw3    po1    a3,a4 ══ m1,m2 [node B] n1,n2 ══ c3,c4    po2    sw4 ── t4
//!                          (A, B: peer link pl = pl1 + pl2, keepalive ka)
//! ```
//!
//! Each node has a control script (`$LAB_NODE_A`, `$LAB_NODE_B` in
//! commands): `kill` (SIGKILL of the switch process: its guardian takes
//! the node's channel members down, docs/virtual-switch.md "Node loss"),
//! `power-off` (SIGKILL and every link of
//! the node down: power loss, the partner sees carrier loss) and `start`
//! (links up, the node started again in the background).

use crate::netns::run;
use crate::LabError;
use std::path::Path;

/// Virtual-switch domain id of the pair.
pub const DOMAIN: u8 = 23;

/// The node namespaces' suffixes and names in reports.
pub const NODES: [&str; 2] = ["a", "b"];

/// Links between the partner (DUT namespace) and a node: (partner port,
/// node port). Node A takes the first two of each channel, node B the
/// last two.
pub fn links(node: usize) -> [(String, &'static str); 4] {
    let k = node * 2;
    [
        (format!("a{}", k + 1), "m1"),
        (format!("a{}", k + 2), "m2"),
        (format!("c{}", k + 1), "n1"),
        (format!("c{}", k + 2), "n2"),
    ]
}

/// The members of the aggregated peer link (port channel `pl`).
pub const PEER_LINK: [&str; 2] = ["pl1", "pl2"];

/// The ports of a node (all of them go down on `power-off`).
pub const NODE_PORTS: [&str; 7] = ["pl1", "pl2", "ka", "m1", "m2", "n1", "n2"];

/// Creates the veths: peer link and keepalive between `a` and `b`, and
/// the channel members between the partner namespace `dut` and each node.
pub fn wire(dut: &str, a: &str, b: &str) -> Result<(), LabError> {
    testkit::vswitch::link_namespaces(a, b, &PEER_LINK, 9216)
        .map_err(|e| LabError::Dut(format!("peer link: {e}")))?;
    for (node, ns) in [a, b].into_iter().enumerate() {
        for (p, n) in links(node) {
            run(
                "ip",
                &[
                    "link", "add", &p, "netns", dut, "mtu", "9216", "type", "veth", "peer", "name",
                    n, "netns", ns, "mtu", "9216",
                ],
            )?;
            run("ip", &["-n", dut, "link", "set", &p, "up"])?;
            run("ip", &["-n", ns, "link", "set", n, "up"])?;
        }
    }
    Ok(())
}

/// `port-channels:` line of a channel (LACP active, fast, hashed by MAC:
/// the lab's layer-2 streams differ only in their addresses).
fn channel(name: &str, members: &[&str]) -> String {
    format!(
        "  - {{name: {name}, members: [{}], lacp: active, lacp-rate: fast, load-balance: l2}}\n",
        members.join(", ")
    )
}

/// Configuration of node `node` (0 = A, the primary; 1 = B). `switch`
/// holds extra `switch:` lines (workers, backend).
pub fn node_config(node: usize, sock: &Path, switch: &str) -> String {
    let mut c = format!(
        "switch:\n  name: node-{}\n{switch}management:\n  socket: {}\nvlans:\n  - id: 10\nports:\n",
        NODES[node],
        sock.display()
    );
    for p in PEER_LINK {
        c.push_str(&format!("  - {{name: {p}, mode: trunk}}\n"));
    }
    for p in ["m1", "m2", "n1", "n2"] {
        c.push_str(&format!("  - {{name: {p}, mode: access, vlan: 10}}\n"));
    }
    c.push_str("port-channels:\n");
    c.push_str(&channel("pl", &PEER_LINK));
    c.push_str(&channel("po1", &["m1", "m2"]));
    c.push_str(&channel("po2", &["n1", "n2"]));
    c.push_str(&testkit::vswitch::section(
        DOMAIN,
        node,
        &["pl"],
        1,
        false,
        "  channels: [{port-channel: po1, id: 1}, {port-channel: po2, id: 2}]\n",
    ));
    c
}

/// VLAN of tester port `sw<k>` (from 1) at the partner: the odd ports
/// are the access tier (VLAN 10, channel `po1`), the even ones the core
/// tier (VLAN 20, `po2`).
pub fn tier_vlan(k: usize) -> u16 {
    if !k.is_multiple_of(2) {
        10
    } else {
        20
    }
}

/// Configuration of the LACP partner in the DUT namespace, with tester
/// ports `sw1`..`sw<tester_ports>` (at least 2).
pub fn partner_config(sock: &Path, switch: &str, tester_ports: usize) -> String {
    let mut c = format!(
        "switch:\n  name: partner\n{switch}management:\n  socket: {}\nvlans:\n  - id: 10\n  - id: 20\nports:\n",
        sock.display()
    );
    for k in 1..=tester_ports.max(2) {
        c.push_str(&format!(
            "  - {{name: sw{k}, mode: access, vlan: {}}}\n",
            tier_vlan(k)
        ));
    }
    for (side, vlan) in [("a", 10), ("c", 20)] {
        for k in 1..=4 {
            c.push_str(&format!(
                "  - {{name: {side}{k}, mode: access, vlan: {vlan}}}\n"
            ));
        }
    }
    c.push_str("port-channels:\n");
    c.push_str(&channel("po1", &["a1", "a2", "a3", "a4"]));
    c.push_str(&channel("po2", &["c1", "c2", "c3", "c4"]));
    c
}

/// The control script of a node (`kill`, `power-off`, `start`); `ports`
/// are the node's links (all go down on `power-off`).
pub fn control_script(ns: &str, bin: &Path, cfg: &Path, log: &Path, ports: &[&str]) -> String {
    let links: Vec<String> = ports
        .iter()
        .map(|p| format!("link set dev {p} {{}}"))
        .collect();
    let batch = |state: &str| links.join("\\n").replace("{}", state);
    format!(
        r#"#!/bin/sh
# Node control for the lab's lanyard-pair and lanyard-rstp DUTs: kill | power-off | start.
# Commands run with the partner's LANYARD_SOCKET, which would override
# the node's own management socket.
unset LANYARD_SOCKET
NS={ns}
# kill: the switch process crashes; its guardian (comm lanyard-guard)
# lives on and takes the node's channel members down, as a dead chassis.
# power-off: everything in the namespace dies and every link goes down.
kill9() {{
  for p in $(ip netns pids $NS); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = lanyard-guard ] || kill -9 $p
  done
}}
killall9() {{ ip netns pids $NS | xargs -r kill -9; }}
case "$1" in
  kill) kill9 ;;
  power-off) killall9; printf '{down}\n' | ip -n $NS -batch - ;;
  start)
    printf '{up}\n' | ip -n $NS -batch -
    ip netns exec $NS setsid {bin} run --config {cfg} >>{log} 2>&1 </dev/null &
    ;;
  *) echo "usage: $0 kill|power-off|start" >&2; exit 2 ;;
esac
"#,
        down = batch("down"),
        up = batch("up"),
        bin = bin.display(),
        cfg = cfg.display(),
        log = log.display(),
    )
}

/// Members distributing per channel in a partner's `show port-channel`
/// (po1, po2).
pub fn distributing(v: &serde_json::Value) -> Vec<usize> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|ch| {
            ch["members"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["distributing"] == true)
                .count()
        })
        .collect()
}

/// Members distributing in channel `name` of a `show port-channel` answer
/// (0 when it is not there).
pub fn channel_distributing(v: &serde_json::Value, name: &str) -> usize {
    v.as_array()
        .and_then(|chs| chs.iter().find(|c| c["name"] == name))
        .and_then(|c| c["members"].as_array())
        .map_or(0, |ms| {
            ms.iter().filter(|m| m["distributing"] == true).count()
        })
}

/// A trial's pair state from `Dut::pair_state` before and after it:
/// per node the frames its members received during the trial and its
/// state at the end; the partner's distributing members at the end.
pub fn trial_state(before: &serde_json::Value, after: &serde_json::Value) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    for n in NODES {
        let (b, a) = (&before[n], &after[n]);
        // A node restarted during the trial counts from zero again.
        let delta = |k: &str| {
            let (x, y) = (b[k].as_u64().unwrap_or(0), a[k].as_u64().unwrap_or(0));
            if y >= x {
                y - x
            } else {
                y
            }
        };
        let mut e = serde_json::json!({
            "rx": delta("rx"),
            "status": a["status"],
            "members": a["members"],
        });
        for k in ["flooded", "pl_tx"] {
            if !a[k].is_null() {
                e[k] = delta(k).into();
            }
        }
        o.insert(n.into(), e);
    }
    o.insert(
        "partner_distributing".into(),
        after["partner_distributing"].clone(),
    );
    o.insert(
        "partner_distributing_before".into(),
        before["partner_distributing"].clone(),
    );
    serde_json::Value::Object(o)
}

/// One line for the reports from [`trial_state`].
pub fn state_line(p: &serde_json::Value) -> String {
    let nodes: Vec<String> = NODES
        .iter()
        .map(|n| {
            format!(
                "{} rx {} ({}{}){}",
                n.to_uppercase(),
                p[n]["rx"],
                p[n]["status"].as_str().unwrap_or("?"),
                p[n]["members"]
                    .as_str()
                    .map(|m| format!(", members {m}"))
                    .unwrap_or_default(),
                match (p[n]["flooded"].as_u64(), p[n]["pl_tx"].as_u64()) {
                    (Some(f), Some(t)) => format!(" flooded {f}, peer link tx {t}"),
                    _ => String::new(),
                }
            )
        })
        .collect();
    format!(
        "{{{}; partner members distributing {} -> {}}}",
        nodes.join(", "),
        p["partner_distributing_before"],
        p["partner_distributing"]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_and_partner_configs_parse() {
        let sock = Path::new("/tmp/x.sock");
        for (node, name) in NODES.into_iter().enumerate() {
            let c = node_config(node, sock, "  workers: 1\n");
            config::parse(&c, "node.yaml").unwrap_or_else(|e| panic!("{e}\n{c}"));
            assert!(c.contains(&format!("name: node-{name}")), "{c}");
            assert!(c.contains("port-channel: po2, id: 2"), "{c}");
        }
        let c = partner_config(sock, "  workers: 1\n", 2);
        config::parse(&c, "partner.yaml").unwrap_or_else(|e| panic!("{e}\n{c}"));
        assert!(c.contains("members: [c1, c2, c3, c4]"), "{c}");
        assert!(!c.contains("sw3"), "{c}");
        // Tiers: access ports 1 and 3 in VLAN 10, core ports 2 and 4 in 20.
        let c = partner_config(sock, "  workers: 1\n", 4);
        config::parse(&c, "partner.yaml").unwrap_or_else(|e| panic!("{e}\n{c}"));
        assert!(c.contains("{name: sw3, mode: access, vlan: 10}"), "{c}");
        assert!(c.contains("{name: sw4, mode: access, vlan: 20}"), "{c}");
        // The aggregated peer link: a port channel named in peer-link.
        let c = node_config(0, sock, "");
        assert!(
            c.contains("{name: pl, members: [pl1, pl2], lacp: active"),
            "{c}"
        );
        assert!(c.contains("peer-link: [pl]"), "{c}");
    }

    #[test]
    fn trial_state_counts_each_nodes_share() {
        use serde_json::json;
        let before = json!({"a": {"rx": 100, "status": "paired", "members": "up"},
                            "b": {"rx": 50, "status": "paired", "members": "up"},
                            "partner_distributing": [4, 4]});
        // A killed and restarted: its counters start again from zero.
        let after = json!({"a": {"rx": 30, "status": "paired", "members": "up"},
                           "b": {"rx": 5050, "status": "paired", "members": "up"},
                           "partner_distributing": [4, 4]});
        let s = trial_state(&before, &after);
        assert_eq!(s["a"]["rx"], 30);
        assert_eq!(s["b"]["rx"], 5000);
        assert_eq!(
            state_line(&s),
            "{A rx 30 (paired, members up), B rx 5000 (paired, members up); partner members distributing [4,4] -> [4,4]}"
        );
        let down = json!({"a": {"rx": 0, "status": "down", "members": null},
                          "b": {"rx": 60, "status": "peer-down", "members": "up"},
                          "partner_distributing": [2, 2]});
        assert_eq!(
            state_line(&trial_state(&before, &down)),
            "{A rx 0 (down), B rx 10 (peer-down, members up); partner members distributing [4,4] -> [2,2]}"
        );
        // Floods and peer-link frames per node, when the nodes report them.
        let before = json!({"a": {"rx": 1, "flooded": 5, "pl_tx": 7}, "b": {"rx": 1}});
        let after = json!({"a": {"rx": 2, "status": "paired", "flooded": 73, "pl_tx": 75},
                           "b": {"rx": 2, "status": "paired"}});
        let s = trial_state(&before, &after);
        assert_eq!(
            (&s["a"]["flooded"], &s["a"]["pl_tx"]),
            (&json!(68), &json!(68))
        );
        assert!(state_line(&s)
            .contains("A rx 1 (paired) flooded 68, peer link tx 68, B rx 1 (paired);"));
    }

    #[test]
    fn node_links_split_each_channel() {
        let a: Vec<String> = links(0).into_iter().map(|(p, _)| p).collect();
        let b: Vec<String> = links(1).into_iter().map(|(p, _)| p).collect();
        assert_eq!(a, ["a1", "a2", "c1", "c2"]);
        assert_eq!(b, ["a3", "a4", "c3", "c4"]);
    }

    #[test]
    fn control_script_takes_every_node_link_down() {
        let s = control_script(
            "ns-a",
            Path::new("/bin/lanyard"),
            Path::new("/t/a.yaml"),
            Path::new("/t/a.log"),
            &NODE_PORTS,
        );
        assert!(
            s.contains("link set dev pl2 down\\nlink set dev ka down\\nlink set dev m1 down"),
            "{s}"
        );
        assert!(s.contains("link set dev n2 up"), "{s}");
        assert!(s.contains("unset LANYARD_SOCKET"), "{s}");
        assert!(
            s.contains("ip netns exec $NS setsid /bin/lanyard run --config /t/a.yaml"),
            "{s}"
        );
        let v = serde_json::json!([
            {"members": [{"distributing": true}, {"distributing": false}]},
            {"members": [{"distributing": true}, {"distributing": true}]}
        ]);
        assert_eq!(distributing(&v), [1, 2]);
        let v = serde_json::json!([
            {"name": "po1", "members": [{"distributing": true}]},
            {"name": "pl", "members": [{"distributing": true}, {"distributing": true}]}
        ]);
        assert_eq!(channel_distributing(&v, "pl"), 2);
        assert_eq!(channel_distributing(&v, "po9"), 0);
    }
}
