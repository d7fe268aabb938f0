//! `service-control:` timeouts and usage export: defaults, and each error
//! with its line and field.

mod common;
use common::errors;

const BASE: &str = "ports:
  - name: sub0
  - name: net0
service-control:
  inline: [{subscriber-port: sub0, network-port: net0}]
";

#[test]
fn timeouts_and_usage_export_defaults() {
    let cfg = config::parse(BASE, "t.yaml").unwrap();
    let sc = cfg.service_control.as_ref().unwrap();
    assert!(sc.usage_export.is_none());
    assert_eq!(sc.timeouts(), dpi::flow::Timeouts::default());
    let text = format!(
        "{BASE}  timeouts: {{established: 600, udp-replied: 5}}\n  usage-export: {{collector: 127.0.0.1:4739}}\n"
    );
    let cfg = config::parse(&text, "t.yaml").unwrap();
    let sc = cfg.service_control.as_ref().unwrap();
    let t = sc.timeouts();
    assert_eq!(t.of(dpi::flow::State::Established), 600_000);
    assert_eq!(t.of(dpi::flow::State::UdpReplied), 5_000);
    assert_eq!(
        t.of(dpi::flow::State::TimeWait),
        dpi::flow::Timeouts::default().of(dpi::flow::State::TimeWait)
    );
    let u = sc.usage_export.as_ref().unwrap();
    assert_eq!(
        (u.domain_id, u.template_refresh, u.queue, u.active_timeout),
        (0, 60, 65_536, 1800)
    );
}

#[test]
fn bad_timeouts_and_usage_export_name_line_and_field() {
    let text = format!(
        "{BASE}  timeouts:\n    establised: 600\n    icmp: 0\n  usage-export:\n    collector: nowhere\n    queue: 10\n    template-refresh: 0\n    active-timeout: 0\n"
    );
    let e = errors(&text);
    let base = BASE.lines().count();
    let want = [
        (
            2,
            "service-control.timeouts.establised",
            "no flow state 'establised'",
        ),
        (3, "service-control.timeouts.icmp", "out of range"),
        (5, "service-control.usage-export.collector", "not HOST:PORT"),
        (6, "service-control.usage-export.queue", "out of range 1024"),
        (
            7,
            "service-control.usage-export.template-refresh",
            "at least 1 second",
        ),
        (
            8,
            "service-control.usage-export.active-timeout",
            "out of range 1..604800",
        ),
    ];
    for (line, field, msg) in want {
        assert!(
            e.iter()
                .any(|(l, f, m)| *l == Some(base + line) && f == field && m.contains(msg)),
            "missing ({}, {field}, {msg}) in {e:#?}",
            base + line
        );
    }
    assert_eq!(e.len(), want.len(), "{e:#?}");
}
