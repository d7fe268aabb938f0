//! Acceptance (issue 20): the event manager on real interfaces.
//!
//! Link down → a mail received by a local SMTP sink (Debian's `aiosmtpd`)
//! holding that port's counters, exactly as `show interfaces counters`
//! prints them; a second policy on the same event whose webhook cannot
//! connect fails, is logged and recorded, and the switch keeps
//! forwarding. A counter threshold applies a configuration patch (an ACL
//! on the port) through the atomic apply and reverts it after the
//! configured time.

use std::process::Stdio;
use std::time::{Duration, Instant};

use testkit::frame::{mac, test_frame, BROADCAST};
use testkit::switch::port_counter;
use testkit::{l2, require_root, Switch, TestBed};

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn mails(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for sub in ["new", "cur"] {
        if let Ok(rd) = std::fs::read_dir(dir.join(sub)) {
            for e in rd.flatten() {
                if let Ok(t) = std::fs::read_to_string(e.path()) {
                    out.push(t);
                }
            }
        }
    }
    out
}

#[test]
fn link_down_mails_the_ports_counters_and_a_failing_action_is_contained() {
    require_root!();
    assert!(
        std::path::Path::new("/usr/bin/python3").exists(),
        "python3 with aiosmtpd (Debian python3-aiosmtpd, scripts/setup.sh) is needed"
    );
    let bed = TestBed::new("evm", 2, 1500).expect("test bed");
    let dir = std::env::temp_dir().join(format!("lanyard-smtp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = std::fs::File::create(dir.join("smtp.log")).unwrap();
    bed.dut
        .spawn(
            &[
                "/usr/bin/python3",
                "-m",
                "aiosmtpd",
                "-n",
                "-l",
                "127.0.0.1:2525",
                "-c",
                "aiosmtpd.handlers.Mailbox",
                &dir.join("maildir").display().to_string(),
            ],
            Stdio::null(),
            Stdio::from(log),
        )
        .expect("start the SMTP sink");
    let yaml = r#"
vlans:
  - id: 10
ports:
  - name: sw1
    mode: access
    vlan: 10
  - name: sw2
    mode: access
    vlan: 10
event-manager:
  poll-interval-ms: 200
  smtp-relay: 127.0.0.1:2525
  mail-from: switch@lab.example
  policies:
    - name: uplink-down
      on:
        interface: sw2
        state: down
      actions:
        - show: interfaces counters
        - mail:
            to: noc@lab.example
    - name: broken-hook
      on:
        interface: sw2
        state: down
      actions:
        - webhook: http://127.0.0.1:9/nobody-listens
        - log: "{interface} went down"
"#;
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let sw = Switch::start(&bin, &bed.dut, yaml, &["sw1", "sw2"]).expect("start");
    // The sink listens before the event.
    wait_for("the SMTP sink", Duration::from_secs(10), || {
        bed.dut
            .run(|| std::net::TcpStream::connect("127.0.0.1:2525").is_ok())
            .ok()
            .filter(|ok| *ok)
    });
    let t1 = bed.open(1).expect("t1");
    let frames: Vec<Vec<u8>> = (0..23)
        .map(|i| test_frame(&BROADCAST, &mac(7), &[], 1, i, 120))
        .collect();
    l2::send_settled(&sw, &t1, "sw1", &frames);
    assert_eq!(port_counter(&sw.counters(), "sw2", "tx_frames"), 23);

    // No event yet: no mail.
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        mails(&dir.join("maildir")).is_empty(),
        "mail before the event"
    );

    bed.tester
        .exec(&["ip", "link", "set", "t2", "down"])
        .unwrap();
    sw.wait_port_state("sw2", "down", Duration::from_secs(5))
        .expect("sw2 goes down");
    let mail = wait_for("the mail", Duration::from_secs(20), || {
        mails(&dir.join("maildir")).into_iter().next()
    });
    // The row of sw2 exactly as the CLI prints it: in the second
    // (Out) table, which holds its 23 frames sent.
    let out = sw.cli(&["show", "interfaces", "counters"]).unwrap();
    let cli = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = cli
        .lines()
        .rfind(|l| l.split_whitespace().next() == Some("sw2"))
        .unwrap_or_else(|| panic!("no sw2 row in\n{cli}"));
    assert!(row.contains("23"), "sw2 row without its 23 frames: {row}");
    assert!(
        mail.contains(row.trim_end()),
        "mail lacks the sw2 counters row {row:?}:\n{mail}"
    );
    assert!(mail.contains("To: noc@lab.example"), "{mail}");
    assert!(mail.contains("sw2 down"), "{mail}");

    // The failing webhook: recorded, logged, and the switch forwards on.
    let em = wait_for("both runs recorded", Duration::from_secs(15), || {
        let v = sw.show_json(&["show", "event", "manager"]);
        let ok = v["policies"]
            .as_array()?
            .iter()
            .all(|p| p["runs"].as_u64() == Some(1));
        ok.then_some(v)
    });
    let hook = em["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["policy"] == "broken-hook")
        .expect("broken-hook run");
    assert_eq!(hook["results"][0]["ok"], false, "{hook}");
    assert_eq!(
        hook["results"][1]["ok"], true,
        "the next action still ran: {hook}"
    );
    assert!(
        sw.log().contains("broken-hook: webhook"),
        "failure not logged:\n{}",
        sw.log()
    );
    let mailrun = em["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["policy"] == "uplink-down")
        .unwrap();
    assert!(
        mailrun["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["ok"] == true),
        "{mailrun}"
    );
    let text = String::from_utf8_lossy(&sw.cli(&["show", "event", "manager"]).unwrap().stdout)
        .into_owned();
    assert!(
        text.contains("uplink-down") && text.contains("1 of 2 actions failed"),
        "{text}"
    );
    // Still forwarding: t2 back up, frames from t1 reach it.
    bed.tester.exec(&["ip", "link", "set", "t2", "up"]).unwrap();
    sw.wait_port_state("sw2", "up", Duration::from_secs(5))
        .expect("sw2 up");
    let before = port_counter(&sw.counters(), "sw2", "tx_frames");
    l2::send_settled(&sw, &t1, "sw1", &frames);
    let sent = wait_for(
        "forwarding after the failure",
        Duration::from_secs(5),
        || {
            let n = port_counter(&sw.counters(), "sw2", "tx_frames") - before;
            (n == 23).then_some(n)
        },
    );
    assert_eq!(sent, 23);
    drop(sw);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn counter_threshold_applies_a_patch_and_reverts_it() {
    require_root!();
    let bed = TestBed::new("evp", 2, 1500).expect("test bed");
    // Above 30 frames received on sw1: deny that port's traffic with an
    // ACL for 3 seconds (the patch), then the configuration goes back.
    let yaml = r#"
vlans:
  - id: 10
ports:
  - name: sw1
    mode: access
    vlan: 10
  - name: sw2
    mode: access
    vlan: 10
event-manager:
  poll-interval-ms: 100
  policies:
    - name: quarantine
      on:
        counter: interface sw1 rx_frames
        above: 30
      actions:
        - apply:
            patch:
              access-lists:
                - name: quarantine
                  type: mac
                  rules:
                    - action: deny
              ports:
                - name: "{interface}"
                  acl-in: [quarantine]
            revert-after: 3
"#;
    let bin = l2::bin(env!("CARGO_BIN_EXE_lanyard"));
    let sw = Switch::start(&bin, &bed.dut, yaml, &["sw1", "sw2"]).expect("start");
    let t1 = bed.open(1).expect("t1");
    let send = |n: u64, phase: u32| {
        let f: Vec<Vec<u8>> = (0..n)
            .map(|i| test_frame(&BROADCAST, &mac(9), &[], phase, i, 100))
            .collect();
        l2::send_settled(&sw, &t1, "sw1", &f);
    };
    send(20, 1);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        sw.show_json(&["show", "access-lists"])
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    let t_cross = Instant::now();
    send(20, 2);
    wait_for("the patch", Duration::from_secs(5), || {
        let v = sw.show_json(&["show", "access-lists"]);
        v.as_array()?
            .iter()
            .any(|a| a["name"] == "quarantine")
            .then_some(())
    });
    // The ACL drops sw1's frames now.
    let tx = port_counter(&sw.counters(), "sw2", "tx_frames");
    send(10, 3);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        port_counter(&sw.counters(), "sw2", "tx_frames"),
        tx,
        "frames passed the quarantine ACL"
    );
    // Reverted after 3 s: the ACL is gone and frames pass again.
    wait_for("the revert", Duration::from_secs(10), || {
        let v = sw.show_json(&["show", "access-lists"]);
        (!v.as_array()?.iter().any(|a| a["name"] == "quarantine")).then_some(())
    });
    assert!(
        t_cross.elapsed() >= Duration::from_secs(3),
        "reverted too early"
    );
    send(10, 4);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(port_counter(&sw.counters(), "sw2", "tx_frames"), tx + 10);
    let log = sw.log();
    assert!(log.contains("patch reverted after 3 s"), "{log}");
}
