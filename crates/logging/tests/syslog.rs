//! The syslog output against listening sockets: a UDP collector on the
//! loopback and a local datagram socket standing in for `/dev/log`.

use logging::{Facility, SyslogLayer, SyslogSettings};
use std::net::UdpSocket;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer};

fn recv_udp(sock: &UdpSocket) -> String {
    let mut buf = [0u8; 2048];
    let n = sock.recv(&mut buf).expect("a syslog datagram");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn events_reach_a_udp_collector_as_rfc5424() {
    let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
    collector
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let layer = SyslogLayer::new(&SyslogSettings {
        server: Some(collector.local_addr().unwrap()),
        facility: Facility::Local3,
        ..SyslogSettings::default()
    })
    .unwrap();
    let dropped = layer.dropped.clone();
    let filter = EnvFilter::builder().parse("info,routing=warn").unwrap();
    let sub = tracing_subscriber::registry().with(layer.with_filter(filter));
    tracing::subscriber::with_default(sub, || {
        tracing::info!(target: "control::ports", "port {}: up", "a");
        tracing::info!(target: "routing::fib", "filtered out");
        tracing::warn!(target: "routing::fib", routes = 3, "FIB full");
        tracing::error!(target: "control::daemon", "stop");
    });
    let pid = std::process::id();
    let a = recv_udp(&collector);
    // local3 = 19: info 19*8+6, warning 19*8+4, error 19*8+3.
    assert!(a.starts_with("<158>1 "), "{a}");
    let f: Vec<&str> = a.splitn(8, ' ').collect();
    assert_eq!(f.len(), 8, "{a}");
    assert!(f[1].ends_with('Z') && f[1].len() == 27, "timestamp {a}");
    assert_eq!(f[3], "lanyard");
    assert_eq!(f[4], pid.to_string());
    assert_eq!(f[5], "control::ports");
    assert_eq!(f[6], "-");
    assert_eq!(f[7], "port a: up");
    let b = recv_udp(&collector);
    assert!(
        b.starts_with("<156>1 "),
        "the filtered info is not sent: {b}"
    );
    assert!(b.ends_with(" routing::fib - FIB full routes=3"), "{b}");
    let c = recv_udp(&collector);
    assert!(
        c.starts_with("<155>1 ") && c.ends_with("control::daemon - stop"),
        "{c}"
    );
    assert_eq!(dropped.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn events_reach_the_local_socket_and_a_missing_one_is_an_error() {
    let dir = std::env::temp_dir().join(format!("lanyard-syslog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("log");
    let _ = std::fs::remove_file(&path);
    let listener = UnixDatagram::bind(&path).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let layer = SyslogLayer::new(&SyslogSettings {
        local: Some(path.clone()),
        facility: Facility::Daemon,
        ..SyslogSettings::default()
    })
    .unwrap();
    let sub = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(sub, || {
        tracing::info!(target: "protocols::ha", "backup pair p/b: failover to b");
    });
    let mut buf = [0u8; 2048];
    let n = listener.recv(&mut buf).unwrap();
    let line = String::from_utf8_lossy(&buf[..n]);
    assert!(line.starts_with("<30>1 "), "{line}");
    assert!(
        line.ends_with("protocols::ha - backup pair p/b: failover to b"),
        "{line}"
    );
    drop(listener);
    let _ = std::fs::remove_dir_all(&dir);
    let e = SyslogLayer::new(&SyslogSettings {
        local: Some(dir.join("none")),
        ..SyslogSettings::default()
    })
    .err()
    .expect("no socket there");
    assert!(e.contains("none"), "{e}");
    assert!(SyslogLayer::new(&SyslogSettings::default()).is_err());
}

#[test]
fn filters_are_checked() {
    assert!(logging::check_filter("info,routing::fib=debug").is_ok());
    assert!(logging::check_filter("warn").is_ok());
    assert!(logging::check_filter("routing=loud").is_err());
}

/// TCP collector: every message arrives once, octet-counted (RFC 6587
/// `LEN SP MSG`), in RFC 5424 form; the logging thread never waits for
/// the connection.
#[test]
fn events_reach_a_tcp_collector_octet_counted() {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let layer = SyslogLayer::new(&SyslogSettings {
        tcp: Some(listener.local_addr().unwrap()),
        facility: Facility::Daemon,
        ..SyslogSettings::default()
    })
    .unwrap();
    let sub = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(sub, || {
        tracing::warn!(target: "protocols::ha", "backup pair sw1: failover to sw2");
        tracing::info!(target: "control::apply", "configuration applied");
    });
    let (mut c, _) = listener.accept().unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Two frames: read until both are complete.
    let mut frames: Vec<String> = Vec::new();
    while frames.len() < 2 {
        let n = c.read(&mut buf).expect("read");
        assert!(n > 0, "connection closed early");
        got.extend_from_slice(&buf[..n]);
        frames.clear();
        let mut rest: &[u8] = &got;
        while let Some(sp) = rest.iter().position(|b| *b == b' ') {
            let len: usize = std::str::from_utf8(&rest[..sp]).unwrap().parse().unwrap();
            if rest.len() < sp + 1 + len {
                break;
            }
            frames.push(String::from_utf8(rest[sp + 1..sp + 1 + len].to_vec()).unwrap());
            rest = &rest[sp + 1 + len..];
        }
    }
    // daemon = 3: warning 3*8+4, info 3*8+6.
    assert!(frames[0].starts_with("<28>1 "), "{}", frames[0]);
    assert!(
        frames[0].ends_with(" protocols::ha - backup pair sw1: failover to sw2"),
        "{}",
        frames[0]
    );
    assert!(
        frames[1].starts_with("<30>1 ") && frames[1].ends_with("configuration applied"),
        "{}",
        frames[1]
    );
}
