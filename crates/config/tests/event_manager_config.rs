//! `event-manager:` validation (issue 20): every bad policy is refused with
//! the line and field of the mistake, as `lanyard config check` prints.

mod common;
use common::errors;

#[track_caller]
fn one_error(text: &str, line: usize, field: &str, msg: &str) {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    let (l, f, m) = &errs[0];
    assert_eq!(*l, Some(line), "line of {f}: {m}");
    assert_eq!(f, field, "field for: {m}");
    assert!(m.contains(msg), "message {m:?} should contain {msg:?}");
}

const HEAD: &str = "ports:
  - name: sw1
  - name: sw2
event-manager:
  smtp-relay: 127.0.0.1:25
  policies:
    - name: p
";

/// HEAD plus a policy body (`on:` and `actions:` at 6 spaces).
fn with(body: &str) -> String {
    format!("{HEAD}{body}")
}

#[test]
fn a_good_policy_set_parses() {
    let c = config::parse(
        &with(
            "      on: {counter: interface sw1 drops acl-deny, above: 100, rearm-below: 50, rate: true}
      actions:
        - show: interfaces counters
        - mail: {to: noc@example.net}
        - apply:
            patch:
              ports:
                - name: \"{interface}\"
                  mtu: 1500
            revert-after: 60
    - name: nightly
      on: {cron: \"0 3 * * 1-5\"}
      actions: [{script: {path: /usr/local/bin/backup, timeout: 30}}]
    - name: logs
      on: {log: \"storm (detected|over)\"}
      actions: [{syslog: {message: \"{message}\", severity: critical}}]
",
        ),
        "t.yaml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.event_manager.unwrap().policies.len(), 3);
}

#[test]
fn unknown_counter_is_refused_at_its_line() {
    one_error(
        &with("      on: {counter: interface sw1 rx_frobs, above: 1}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on.counter",
        "unknown interface counter \"rx_frobs\"",
    );
    one_error(
        &with(
            "      on: {counter: interface sw9 rx_frames, above: 1}\n      actions: [{log: x}]\n",
        ),
        8,
        "event-manager.policies[0].on.counter",
        "no port \"sw9\"",
    );
    one_error(
        &with("      on: {counter: bogus thing, above: 1}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on.counter",
        "unknown counter",
    );
}

#[test]
fn bad_cron_and_regex_are_refused() {
    one_error(
        &with("      on: {cron: \"61 * * * *\"}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on.cron",
        "outside 0..59",
    );
    one_error(
        &with("      on: {log: \"(unclosed\"}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on.log",
        "bad regular expression",
    );
}

#[test]
fn an_action_that_would_not_apply_is_refused() {
    // The patch names an access list that does not exist.
    one_error(
        &with(
            "      on: {interface: sw1, state: down}
      actions:
        - apply:
            patch:
              ports:
                - name: sw2
                  acl-in: [nosuch]
",
        ),
        11,
        "event-manager.policies[0].actions[0].apply.patch",
        "would not apply",
    );
    one_error(
        &with(
            "      on: {timer: 5}\n      actions:\n        - show: interfaces bogus words here\n",
        ),
        10,
        "event-manager.policies[0].actions[0].show",
        "",
    );
    one_error(
        &with("      on: {timer: 5}\n      actions:\n        - webhook: https://x.example/\n"),
        10,
        "event-manager.policies[0].actions[0].webhook",
        "http://",
    );
}

#[test]
fn events_need_exactly_one_kind_and_a_threshold() {
    one_error(
        &with("      on: {timer: 5, cron: \"* * * * *\"}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on",
        "exactly one",
    );
    one_error(
        &with("      on: {cpu: host}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on.above",
        "needs a threshold",
    );
    one_error(
        &with("      on: {cpu: host, above: 50, rearm-below: 80}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on.rearm-below",
        "above the threshold",
    );
    one_error(
        &with("      on: {cpu: punt, above: 50}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on.cpu",
        "thread NAME",
    );
    one_error(
        &with("      on: {cpu: \"thread \", above: 50}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on.cpu",
        "expected lanyard",
    );
    for ok in ["workers", "control-plane", "thread punt", "lanyard", "host"] {
        let y = with(&format!(
            "      on: {{cpu: {ok}, above: 50}}\n      actions: [{{log: x}}]\n"
        ));
        config::parse(&y, "t.yaml").unwrap_or_else(|e| panic!("cpu: {ok}: {e}"));
    }
    one_error(
        &with("      on: {flows: per-source, above: 50}\n      actions: [{log: x}]\n"),
        8,
        "event-manager.policies[0].on.flows",
        "flow-export",
    );
}

#[test]
fn metrics_listen_is_checked() {
    one_error(
        "ports:\n  - name: sw1\nmanagement:\n  metrics:\n    listen: localhost\n",
        5,
        "management.metrics.listen",
        "not address:port",
    );
    let c = config::parse(
        "ports:\n  - name: sw1\nmanagement:\n  metrics:\n    listen: \"[::]:9417\"\n",
        "t.yaml",
    )
    .unwrap();
    assert_eq!(
        c.management.metrics.unwrap().listen_addr().unwrap().port(),
        9417
    );
}

#[test]
fn snmp_agentx_socket_is_checked() {
    one_error(
        "ports:\n  - name: sw1\nmanagement:\n  snmp:\n    agentx-socket: agentx.sock\n",
        5,
        "management.snmp.agentx-socket",
        "absolute path",
    );
    one_error(
        "ports:\n  - name: sw1\nmanagement:\n  snmp:\n    socket: /x\n",
        5,
        "management.snmp.socket",
        "unknown field",
    );
    let c = config::parse("ports:\n  - name: sw1\nmanagement:\n  snmp: {}\n", "t.yaml").unwrap();
    assert_eq!(
        c.management.snmp.unwrap().agentx_socket,
        std::path::PathBuf::from(config::DEFAULT_AGENTX_SOCKET)
    );
    let off = config::parse("ports:\n  - name: sw1\n", "t.yaml").unwrap();
    assert!(off.management.snmp.is_none(), "SNMP is off by default");
}
