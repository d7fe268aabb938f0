//! Real hosts behind veths, with the offloads Linux gives them by default:
//! their TCP and UDP packets cross the veth with the checksum left to
//! "hardware" (io::complete_checksums). Through Lanyard — switched,
//! routed, and to its own stack through the punt path — a TCP exchange
//! and a UDP datagram must arrive and be accepted, as they would through
//! a NIC. Each tester is its own namespace (a host); Python's socket
//! module is the application. Runs on the test backend
//! (LANYARD_TEST_BACKEND). Needs root, else passes with a note.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testkit::frr::RouterBed;
use testkit::netns::Netns;
use testkit::{l2, require_root, Switch};

/// Echo server on `port` (TCP and UDP) in `ns`, answering one TCP
/// connection and one UDP datagram, upper-cased.
fn echo_server(ns: &Netns, port: u16) -> std::process::Child {
    let script = format!(
        r#"
import socket, threading
def tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", {port})); s.listen(1)
    c, _ = s.accept(); d = b""
    while not d.endswith(b"\n"):
        x = c.recv(65536)
        if not x: break
        d += x
    c.sendall(d.upper()); c.close()
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("0.0.0.0", {port}))
    d, a = u.recvfrom(65536); u.sendto(d.upper(), a)
t = threading.Thread(target=udp); t.start(); tcp(); t.join()
"#
    );
    Command::new("ip")
        .args([
            "netns",
            "exec",
            ns.name(),
            "timeout",
            "30",
            "python3",
            "-c",
            &script,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3")
}

/// From `ns`: a TCP exchange (several segments: 20,000 bytes) and a UDP
/// datagram with `to`:`port`; the answers, or the error.
fn exchange(ns: &Netns, to: &str, port: u16) -> Result<(usize, String), String> {
    let script = format!(
        r#"
import socket, sys, time
msg = (b"abcdefghij" * 2000) + b"\n"
for attempt in range(50):
    try:
        c = socket.create_connection(("{to}", {port}), timeout=3); break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("tcp connect failed")
c.sendall(msg); d = b""
while not d.endswith(b"\n"):
    x = c.recv(65536)
    if not x: break
    d += x
assert d == msg.upper(), "tcp answer %d bytes" % len(d)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(3)
u.sendto(b"hello udp", ("{to}", {port}))
print(len(d), u.recvfrom(100)[0].decode())
"#
    );
    let out = ns
        .exec(&["timeout", "30", "python3", "-c", &script])
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let (n, said) = s.split_once(' ').ok_or(s.clone())?;
    Ok((n.parse().map_err(|_| s.clone())?, said.to_string()))
}

fn ip(ns: &Netns, args: &[&str]) {
    let mut a = vec!["ip"];
    a.extend_from_slice(args);
    let out = ns.exec(&a).expect("ip");
    assert!(
        out.status.success(),
        "{:?}: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The offload the test is about is on: a host's veth checksums in
/// "hardware" by default.
fn tx_checksum_offload_on(ns: &Netns, dev: &str) -> bool {
    let out = ns.exec(&["ethtool", "-k", dev]).expect("ethtool");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == "tx-checksumming: on")
}

fn completed(sw: &Switch) -> u64 {
    let v = sw.show_json(&["show", "counters"]);
    v["ports"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["rx_csum_completed"].as_u64())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn tcp_and_udp_from_offloading_hosts_cross_lanyard_switched_and_routed() {
    require_root!();
    let _g = l2::heavy();
    let bed = RouterBed::new("lyck", 3, 1500).expect("namespaces");
    let (t1, t2, t3) = (bed.tester(1), bed.tester(2), bed.tester(3));
    assert!(
        tx_checksum_offload_on(t1, "t1"),
        "veth tx checksum offload is on by default"
    );
    if testkit::switch::test_backend() == "af-packet" {
        // AF_PACKET sees a veth peer's segmentation offload as one frame
        // of up to 64 KiB (AF_XDP turns it off on the peer when it
        // attaches): hosts on AF_PACKET ports segment in software
        // (docs/io.md, "Hosts behind veths"). Checksums stay offloaded.
        for (ns, dev) in [(t1, "t1"), (t2, "t2"), (t3, "t3")] {
            let out = ns
                .exec(&["ethtool", "-K", dev, "tso", "off", "gso", "off"])
                .unwrap();
            assert!(out.status.success());
        }
    }
    // t1 and t2 on one VLAN (switched); t3 behind a routed port.
    ip(t1, &["addr", "add", "10.77.0.1/24", "dev", "t1"]);
    ip(t2, &["addr", "add", "10.77.0.2/24", "dev", "t2"]);
    ip(t1, &["route", "add", "10.78.0.0/24", "via", "10.77.0.254"]);
    ip(t3, &["addr", "add", "10.78.0.2/24", "dev", "t3"]);
    ip(t3, &["route", "add", "default", "via", "10.78.0.1"]);
    let yaml = "switch:\n  name: checksums\nvlans:\n  - id: 10\n    router:\n      addresses: [10.77.0.254/24]\n\
                ports:\n  - {name: sw1, vlan: 10}\n  - {name: sw2, vlan: 10}\n\
                \x20 - name: sw3\n    mode: routed\n    addresses: [10.78.0.1/24]\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2", "sw3"],
    )
    .expect("start lanyard");

    // Switched: t1 -> t2.
    let mut srv = echo_server(t2, 7001);
    let r = exchange(t1, "10.77.0.2", 7001);
    let _ = srv.wait();
    assert_eq!(r, Ok((20_001, "HELLO UDP".into())), "switched");

    // Routed: t1 -> VLAN interface -> sw3 -> t3.
    let mut srv = echo_server(t3, 7002);
    let r = exchange(t1, "10.78.0.2", 7002);
    let _ = srv.wait();
    assert_eq!(r, Ok((20_001, "HELLO UDP".into())), "routed");

    // To Lanyard's own stack (punted through its TAP): a TCP connection
    // to the VLAN interface's address, refused by the kernel there (no
    // listener) — a RST comes back only if the SYN's checksum was good.
    let out = t1
        .exec(&[
            "timeout",
            "10",
            "python3",
            "-c",
            "import socket\ntry:\n socket.create_connection(('10.77.0.254', 7999), timeout=3)\n print('open')\nexcept ConnectionRefusedError:\n print('refused')\nexcept OSError as e:\n print('error', e)\n",
        ])
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(said, "refused", "TCP to Lanyard's own address");

    let n = completed(&sw);
    eprintln!("checksums completed by Lanyard's veth ports: {n}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while completed(&sw) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        completed(&sw) > 0,
        "show interfaces counts completed checksums"
    );
}
