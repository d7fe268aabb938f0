//! The `lanyard-rstp` DUT: the classic design the virtual-switch report
//! measured its pair against (there rapid spanning tree with a first-hop
//! redundancy protocol: 6.883 s when a chassis lost power, against 322 ms
//! for the pair). Two distribution Lanyards with RSTP (docs/stp.md), A the
//! root bridge (priority 4096) and B the backup root (8192), joined by
//! `ab`, each in its own namespace; two access Lanyards in the DUT
//! namespace, each with its tester port (an edge port) and one uplink to
//! each of A and B. Spanning tree blocks each access switch's uplink to B
//! (alternate port), so every test frame crosses acc1 → A → acc2; when A
//! goes, the alternates become root ports through B.
//!
//! ```text
//!  t1 ── sw1 [acc1] u1 ══ m1 [A] n1 ══ v1 [acc2] sw2 ── t2
//!                   u2 ══ m1 [B] n1 ══ v2
//!                          (A, B: ab)
//! ```
//!
//! Layer 2 only: the report's gateway protocol has no counterpart here.
//! The nodes have the pair's control scripts (`$LAB_NODE_A`, `$LAB_NODE_B`):
//! `kill` (the switch process dies, its links stay up: the neighbours
//! notice when A's information ages out, 3 × hello-time), `power-off` (and
//! every link of the node down: carrier loss), `start`.

use crate::netns::run;
use crate::LabError;
use serde_json::{json, Value};
use std::path::Path;

/// The node namespaces' suffixes and names in reports (A root, B
/// backup), as the pair's.
pub use crate::lanyard_pair::NODES;

/// Bridge priorities of A and B (the access switches keep 32768).
const PRIORITY: [u32; 2] = [4096, 8192];

/// The ports of a node (all go down on `power-off`): the link to the other
/// node, to acc1, to acc2.
pub const NODE_PORTS: [&str; 3] = ["ab", "m1", "n1"];

/// Per access switch: its tester port and its uplinks to A and to B.
pub const ACCESS: [(&str, [&str; 2]); 2] = [("sw1", ["u1", "u2"]), ("sw2", ["v1", "v2"])];

/// Creates the veths: `ab` between the nodes `a` and `b`, and each access
/// uplink in `dut` to its node (`m1` toward acc1, `n1` toward acc2).
pub fn wire(dut: &str, a: &str, b: &str) -> Result<(), LabError> {
    let veth = |ns1: &str, p1: &str, ns2: &str, p2: &str| -> Result<(), LabError> {
        run(
            "ip",
            &[
                "link", "add", p1, "netns", ns1, "mtu", "9216", "type", "veth", "peer", "name", p2,
                "netns", ns2, "mtu", "9216",
            ],
        )?;
        run("ip", &["-n", ns1, "link", "set", p1, "up"])?;
        run("ip", &["-n", ns2, "link", "set", p2, "up"])?;
        Ok(())
    };
    veth(a, "ab", b, "ab")?;
    for (node, ns) in [a, b].into_iter().enumerate() {
        veth(dut, ACCESS[0].1[node], ns, "m1")?;
        veth(dut, ACCESS[1].1[node], ns, "n1")?;
    }
    Ok(())
}

/// Configuration of distribution node `node` (0 = A, 1 = B). `switch`
/// holds extra `switch:` lines (workers, backend).
pub fn node_config(node: usize, sock: &Path, switch: &str) -> String {
    let mut c = format!(
        "switch:\n  name: dist-{}\n{switch}management:\n  socket: {}\nvlans:\n  - id: 10\nports:\n",
        NODES[node],
        sock.display()
    );
    for p in NODE_PORTS {
        c.push_str(&format!("  - {{name: {p}, mode: access, vlan: 10}}\n"));
    }
    c.push_str(&format!("spanning-tree:\n  priority: {}\n", PRIORITY[node]));
    c
}

/// The tester ports of access switch `k` out of `tester_ports`: acc1
/// (the access tier) the odd ones `sw1`, `sw3`, ...; acc2 (the core tier)
/// the even ones, as the pair's partner has them (`lanyard_pair::tier_vlan`).
pub fn tester_ports(k: usize, tester_ports: usize) -> Vec<String> {
    (1..=tester_ports.max(2))
        .filter(|p| (p - 1) % 2 == k)
        .map(|p| format!("sw{p}"))
        .collect()
}

/// Configuration of access switch `k` (0 = acc1 with `sw1`, 1 = acc2 with
/// `sw2`; more tester ports by [`tester_ports`], all edge ports).
pub fn access_config(k: usize, sock: &Path, switch: &str, ports: usize) -> String {
    let up = ACCESS[k].1;
    let hosts = tester_ports(k, ports);
    let mut c = format!(
        "switch:\n  name: access-{}\n{switch}management:\n  socket: {}\nvlans:\n  - id: 10\nports:\n",
        k + 1,
        sock.display()
    );
    for p in hosts.iter().map(String::as_str).chain(up) {
        c.push_str(&format!("  - {{name: {p}, mode: access, vlan: 10}}\n"));
    }
    c.push_str("spanning-tree:\n  ports:\n");
    for h in &hosts {
        c.push_str(&format!("    - {{name: {h}, edge: true}}\n"));
    }
    c
}

/// A port's row in a `show spanning-tree` answer.
fn port<'a>(st: &'a Value, name: &str) -> Option<&'a Value> {
    st["ports"].as_array()?.iter().find(|p| p["name"] == name)
}

/// Whether the tree is the intended one with every port settled: A the
/// root, B's root port `ab`, each access switch's root port its uplink to
/// A (forwarding) and its uplink to B alternate. `access` and `nodes` are
/// `show spanning-tree --json` answers (Null when a switch did not answer).
pub fn converged(access: &[Value; 2], nodes: &[Value; 2]) -> bool {
    let settled = |st: &Value| {
        st["ports"].as_array().is_some_and(|ps| {
            ps.iter().all(|p| match p["role"].as_str() {
                Some("root") | Some("designated") => p["state"] == "forwarding",
                Some("alternate") | Some("backup") => p["state"] == "discarding",
                _ => false,
            })
        })
    };
    nodes[0]["is_root"] == true
        && nodes[1]["root_port"] == "ab"
        && (0..2).all(|k| {
            let up = ACCESS[k].1;
            access[k]["root_port"] == up[0]
                && port(&access[k], up[1]).is_some_and(|p| p["role"] == "alternate")
        })
        && access.iter().chain(nodes).all(settled)
}

/// One line for the lab's logs and reports: each access switch's root port
/// and each node's role (`acc1 u1, acc2 v1; A root, B ab`).
pub fn tree_line(access: &[Value; 2], nodes: &[Value; 2]) -> String {
    let rp = |st: &Value| match (&st["is_root"], st["root_port"].as_str()) {
        (Value::Null, _) => "down".to_string(),
        (Value::Bool(true), _) => "root".to_string(),
        (_, Some(p)) => p.to_string(),
        _ => "-".to_string(),
    };
    format!(
        "acc1 {}, acc2 {}; A {}, B {}",
        rp(&access[0]),
        rp(&access[1]),
        rp(&nodes[0]),
        rp(&nodes[1])
    )
}

/// The state a trial records, from the DUT's states before and after it
/// (`{"tree", "rx": [a, b]}`, `Dut::pair_state`): the tree before and
/// after and the frames each node's access-facing ports received
/// meanwhile.
pub fn trial_state(before: &Value, after: &Value) -> Value {
    let rx = |v: &Value, k: usize| v["rx"][k].as_u64().unwrap_or(0);
    json!({
        "design": "rstp",
        "tree_before": before["tree"].as_str().unwrap_or("?"),
        "tree_after": after["tree"].as_str().unwrap_or("?"),
        "a": {"rx": since(rx(before, 0), rx(after, 0))},
        "b": {"rx": since(rx(before, 1), rx(after, 1))},
    })
}

/// Frames counted between two readings; a node restarted meanwhile counts
/// from zero again.
fn since(before: u64, after: u64) -> u64 {
    if after >= before {
        after - before
    } else {
        after
    }
}

/// The report's text for a trial's [`trial_state`].
pub fn state_line(p: &Value) -> String {
    format!(
        "{{A rx {}, B rx {}; tree {} -> {}}}",
        p["a"]["rx"],
        p["b"]["rx"],
        p["tree_before"].as_str().unwrap_or("?"),
        p["tree_after"].as_str().unwrap_or("?")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_with_the_intended_priorities_and_edges() {
        let sock = Path::new("/tmp/x.sock");
        for (node, prio) in PRIORITY.into_iter().enumerate() {
            let y = node_config(node, sock, "  workers: 1\n");
            let c = config::parse(&y, "node.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"));
            assert_eq!(c.ports.len(), 3);
            assert!(y.contains(&format!("priority: {prio}")));
        }
        for (k, (host, _)) in ACCESS.into_iter().enumerate() {
            let y = access_config(k, sock, "", 2);
            let c = config::parse(&y, "node.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"));
            assert_eq!(c.ports[0].name, host);
            assert!(y.contains(&format!("name: {host}, edge: true")));
        }
        // Tiers: acc1 holds the access ports 1 and 3, acc2 the core 2 and 4.
        assert_eq!(tester_ports(0, 4), ["sw1", "sw3"]);
        assert_eq!(tester_ports(1, 4), ["sw2", "sw4"]);
        let y = access_config(1, sock, "", 4);
        let c = config::parse(&y, "node.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"));
        assert_eq!(c.ports.len(), 4);
        assert!(y.contains("name: sw4, edge: true"), "{y}");
    }

    fn st(root: bool, root_port: &str, ports: &[(&str, &str, &str)]) -> Value {
        json!({
            "is_root": root,
            "root_port": if root { Value::Null } else { root_port.into() },
            "ports": ports.iter().map(|(n, r, s)| json!({"name": n, "role": r, "state": s})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn converged_only_when_every_port_settled_on_the_intended_tree() {
        let nodes = [
            st(
                true,
                "",
                &[
                    ("ab", "designated", "forwarding"),
                    ("m1", "designated", "forwarding"),
                    ("n1", "designated", "forwarding"),
                ],
            ),
            st(
                false,
                "ab",
                &[
                    ("ab", "root", "forwarding"),
                    ("m1", "designated", "forwarding"),
                    ("n1", "designated", "forwarding"),
                ],
            ),
        ];
        let acc = |learning: &str| {
            [
                st(
                    false,
                    "u1",
                    &[
                        ("sw1", "designated", "forwarding"),
                        ("u1", "root", learning),
                        ("u2", "alternate", "discarding"),
                    ],
                ),
                st(
                    false,
                    "v1",
                    &[
                        ("sw2", "designated", "forwarding"),
                        ("v1", "root", "forwarding"),
                        ("v2", "alternate", "discarding"),
                    ],
                ),
            ]
        };
        assert!(converged(&acc("forwarding"), &nodes));
        assert_eq!(
            tree_line(&acc("forwarding"), &nodes),
            "acc1 u1, acc2 v1; A root, B ab"
        );
        // A root port still learning: not yet.
        assert!(!converged(&acc("learning"), &nodes));
        // A gone: B is root, the access switches go through it.
        let after = [
            st(
                false,
                "u2",
                &[
                    ("sw1", "designated", "forwarding"),
                    ("u1", "disabled", "discarding"),
                    ("u2", "root", "forwarding"),
                ],
            ),
            st(
                false,
                "v2",
                &[
                    ("sw2", "designated", "forwarding"),
                    ("v1", "disabled", "discarding"),
                    ("v2", "root", "forwarding"),
                ],
            ),
        ];
        let b_root = [
            Value::Null,
            st(true, "", &[("m1", "designated", "forwarding")]),
        ];
        assert!(!converged(&after, &b_root));
        assert_eq!(
            tree_line(&after, &b_root),
            "acc1 u2, acc2 v2; A down, B root"
        );
        let p = trial_state(
            &json!({"tree": "acc1 u1, acc2 v1; A root, B ab", "rx": [10, 0]}),
            &json!({"tree": "acc1 u2, acc2 v2; A down, B root", "rx": [510, 300]}),
        );
        assert_eq!(
            state_line(&p),
            "{A rx 500, B rx 300; tree acc1 u1, acc2 v1; A root, B ab -> acc1 u2, acc2 v2; A down, B root}"
        );
    }
}
