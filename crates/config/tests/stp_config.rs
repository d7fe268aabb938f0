//! `spanning-tree:`: defaults, which ports take part, and every error
//! with its line and field.

use config::stp::StpMode;

mod common;
use common::errors;

const PORTS: &str = "ports:
  - name: a
    mode: access
  - name: b
    mode: access
  - name: c
    mode: access
  - name: r
    mode: routed
    addresses: [10.0.0.1/24]
  - name: m1
    mode: access
  - name: m2
    mode: access
port-channels:
  - name: pc1
    members: [m1, m2]
";

#[test]
fn defaults_and_ports() {
    let cfg = config::parse(&format!("{PORTS}spanning-tree: {{}}\n"), "t.yaml").unwrap();
    let st = cfg.spanning_tree.as_ref().unwrap();
    assert_eq!(st.mode, StpMode::Rstp);
    assert_eq!(
        (
            st.priority,
            st.hello_time,
            st.max_age,
            st.forward_delay,
            st.tx_hold_count
        ),
        (32768, 2, 20, 15, 6)
    );
    // Routed ports and channel members are not in the tree.
    let names: Vec<_> = cfg
        .stp_ports()
        .iter()
        .map(|(_, p)| p.name.clone())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    let cfg = config::parse(
        &format!(
            "{PORTS}spanning-tree:
  mode: stp
  priority: 4096
  ports:
    - name: b
      enabled: false
    - name: c
      cost: 2000
      priority: 64
      edge: true
      bpdu-guard: true
"
        ),
        "t.yaml",
    )
    .unwrap();
    let p = cfg.stp_ports();
    assert_eq!(p.len(), 2);
    assert_eq!((p[1].0, p[1].1.cost, p[1].1.priority), (2, 2000, 64));
    assert!(p[1].1.edge && p[1].1.bpdu_guard && p[1].1.auto_edge);
    assert_eq!(cfg.spanning_tree.unwrap().mode, StpMode::Stp);
    assert!(config::parse(PORTS, "t.yaml")
        .unwrap()
        .stp_ports()
        .is_empty());
}

#[test]
fn errors_name_line_and_field() {
    let e = errors(&format!(
        "{PORTS}spanning-tree:
  priority: 1000
  hello-time: 0
  tx-hold-count: 11
  ports:
    - name: zz
    - name: a
      cost: 0
      priority: 100
    - name: r
    - name: m1
"
    ));
    let want = [
        (19, "spanning-tree.priority", "multiple of 4096"),
        (20, "spanning-tree.hello-time", "out of range 1..10"),
        (21, "spanning-tree.tx-hold-count", "out of range 1..10"),
        (23, "spanning-tree.ports[0].name", "not configured"),
        (25, "spanning-tree.ports[1].cost", "out of range"),
        (26, "spanning-tree.ports[1].priority", "multiple of 16"),
        (27, "spanning-tree.ports[2].name", "routed"),
        (28, "spanning-tree.ports[3].name", "port-channel"),
    ];
    assert_eq!(e.len(), want.len(), "{e:#?}");
    for (line, field, msg) in want {
        assert!(
            e.iter()
                .any(|(l, f, m)| *l == Some(line) && f == field && m.contains(msg)),
            "{line} {field} {msg}: {e:#?}"
        );
    }
    // 802.1D-2004 17.14 timer relations.
    let e = errors(&format!(
        "{PORTS}spanning-tree:\n  max-age: 40\n  forward-delay: 10\n"
    ));
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].1, "spanning-tree.max-age");
    assert!(e[0].2.contains("forward-delay"));
    let e = errors(&format!(
        "{PORTS}spanning-tree:\n  hello-time: 10\n  max-age: 20\n"
    ));
    assert!(e[0].2.contains("2 × (hello-time + 1)"), "{e:#?}");
    let e = errors(&format!("{PORTS}spanning-tree:\n  bogus: 1\n"));
    assert!(e[0].2.contains("bogus"), "{e:#?}");
}
