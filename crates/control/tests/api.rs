//! The management API on a switch whose ports do not exist (no root
//! needed): answers, clear errors for bad requests, and a server that keeps
//! serving after them.

use config::parse;
use control::api::request;
use control::daemon::Switch;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

fn raw(path: &std::path::Path, line: &[u8]) -> Value {
    let mut s = UnixStream::connect(path).unwrap();
    s.write_all(line).unwrap();
    s.write_all(b"\n").unwrap();
    let mut out = String::new();
    BufReader::new(s).read_line(&mut out).unwrap();
    serde_json::from_str(&out).unwrap()
}

#[test]
fn answers_and_rejects_cleanly() {
    let dir = std::env::temp_dir().join(format!("lanyard-api-{}", std::process::id()));
    let sock = dir.join("api.sock");
    let cfg = parse(
        &format!(
            "management:\n  socket: {}\nvlans:\n  - id: 10\n    mac-limit: 7\nports:\n  - name: nosuch0\n    vlan: 10\n  - name: nosuch1\n    mode: trunk\n",
            sock.display()
        ),
        "api.yaml",
    )
    .unwrap();
    let sw = Switch::start(cfg).expect("start without any port present");

    let ifs = request(&sock, &json!({"cmd": "show-interfaces"})).unwrap();
    assert_eq!(ifs[0]["state"], "missing");
    assert_eq!(ifs[1]["mode"], "trunk");
    let count = request(&sock, &json!({"cmd": "show-mac-count", "vlan": 10})).unwrap();
    assert_eq!(count["total"], 0);
    assert_eq!(count["vlans"][0]["limit"], 7);
    let cleared = request(&sock, &json!({"cmd": "clear-mac"})).unwrap();
    assert_eq!(cleared["cleared"], 0);
    let c = request(&sock, &json!({"cmd": "show-counters"})).unwrap();
    assert_eq!(c["ports"][0]["drops"]["malformed"], 0);

    // Bad requests: each a clear error, none fatal.
    for (line, want) in [
        (&b"this is not json"[..], "not JSON"),
        (&br#"{"nocmd": 1}"#[..], "no \"cmd\""),
        (&br#"{"cmd": "reboot"}"#[..], "unknown command"),
        (&br#"{"cmd": "show-mac", "vlan": 4095}"#[..], "bad vlan"),
        (&br#"{"cmd": "show-mac", "vlan": "ten"}"#[..], "bad vlan"),
        (&[0xff, 0xfe, 0x00][..], "not JSON"),
    ] {
        let v = raw(&sock, line);
        assert_eq!(v["ok"], false, "{v}");
        assert!(v["error"].as_str().unwrap().contains(want), "{v}");
    }
    // A client that connects and says nothing does not block others.
    let _idle = UnixStream::connect(&sock).unwrap();
    assert!(request(&sock, &json!({"cmd": "show-version"})).is_ok());

    // A second switch cannot steal a live socket.
    let again = parse(
        &format!(
            "management:\n  socket: {}\nports:\n  - name: nosuch2\n",
            sock.display()
        ),
        "b.yaml",
    )
    .unwrap();
    let err = Switch::start(again).err().expect("socket in use");
    assert!(err.contains("in use"), "{err}");
    // Issue 13: the refused switch leaves the running one's socket alone.
    assert!(sock.exists());
    assert!(request(&sock, &json!({"cmd": "show-version"})).is_ok());

    sw.stop();
    assert!(!sock.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
