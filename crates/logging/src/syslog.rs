//! RFC 5424 syslog output: one datagram per event,
//!
//! ```text
//! <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID - MSG
//! <134>1 2026-11-25T19:02:03.123456Z sw1 lanyard 4242 control::ports - port a: up
//! ```
//!
//! PRI is facility × 8 + severity (error 3, warning 4, info 6, debug and
//! trace 7); MSGID is the event's target (its subsystem), cut to the 32
//! printable characters RFC 5424 allows; there is no structured data;
//! MSG is the message and its fields as plain UTF-8. Sent over UDP to a
//! collector (RFC 5426) and/or the local syslog socket (`/dev/log`),
//! never blocking: a datagram the socket refuses is counted in
//! [`SyslogLayer::dropped`].

use std::fmt::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// The local syslog socket.
pub const DEV_LOG: &str = "/dev/log";

/// Syslog facilities (RFC 5424 table 1) a switch uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Facility {
    Kern = 0,
    User = 1,
    Daemon = 3,
    Local0 = 16,
    Local1 = 17,
    Local2 = 18,
    Local3 = 19,
    Local4 = 20,
    Local5 = 21,
    Local6 = 22,
    Local7 = 23,
}

const FACILITIES: [(&str, Facility); 11] = [
    ("kern", Facility::Kern),
    ("user", Facility::User),
    ("daemon", Facility::Daemon),
    ("local0", Facility::Local0),
    ("local1", Facility::Local1),
    ("local2", Facility::Local2),
    ("local3", Facility::Local3),
    ("local4", Facility::Local4),
    ("local5", Facility::Local5),
    ("local6", Facility::Local6),
    ("local7", Facility::Local7),
];

impl Facility {
    pub fn parse(s: &str) -> Result<Facility, String> {
        FACILITIES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|&(_, f)| f)
            .ok_or_else(|| {
                let names: Vec<&str> = FACILITIES.iter().map(|(n, _)| *n).collect();
                format!(
                    "unknown syslog facility {s:?} (one of {})",
                    names.join(", ")
                )
            })
    }

    pub fn name(self) -> &'static str {
        FACILITIES
            .iter()
            .find(|(_, f)| *f == self)
            .map(|(n, _)| *n)
            .unwrap_or("daemon")
    }
}

/// Where syslog goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyslogSettings {
    /// A collector, over UDP.
    pub server: Option<SocketAddr>,
    /// A collector, over TCP (RFC 6587 octet counting).
    pub tcp: Option<SocketAddr>,
    /// The local syslog socket (usually [`DEV_LOG`]).
    pub local: Option<PathBuf>,
    pub facility: Facility,
    /// APP-NAME (`lanyard`).
    pub app_name: String,
}

impl Default for SyslogSettings {
    fn default() -> Self {
        SyslogSettings {
            server: None,
            tcp: None,
            local: None,
            facility: Facility::Local0,
            app_name: "lanyard".into(),
        }
    }
}

/// RFC 5424 severity of a tracing level.
pub fn severity(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// `YYYY-MM-DDThh:mm:ss.uuuuuuZ` (RFC 3339, UTC, microseconds).
pub fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// A header field: printable US-ASCII (33..=126), at most `max` long, `-`
/// when empty.
fn header_field(s: &str, max: usize) -> String {
    let f: String = s
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(max)
        .collect();
    if f.is_empty() {
        "-".into()
    } else {
        f
    }
}

/// One RFC 5424 message (the arguments are the header fields, in order).
#[allow(clippy::too_many_arguments)]
pub fn format(
    facility: Facility,
    severity: u8,
    time: SystemTime,
    hostname: &str,
    app_name: &str,
    procid: u32,
    msgid: &str,
    msg: &str,
) -> String {
    format!(
        "<{}>1 {} {} {} {} {} - {}",
        facility as u8 * 8 + severity.min(7),
        timestamp(time),
        header_field(hostname, 255),
        header_field(app_name, 48),
        procid,
        header_field(msgid, 32),
        msg
    )
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for its length; gethostname NUL-terminates
    // within it or truncates.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if r != 0 {
        return String::new();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A tracing layer that sends every event it sees to syslog.
pub struct SyslogLayer {
    tcp: Option<TcpSender>,
    udp: Option<(UdpSocket, SocketAddr)>,
    local: Option<UnixDatagram>,
    facility: Facility,
    hostname: String,
    app_name: String,
    pid: u32,
    /// Datagrams a socket refused (full buffer, no listener).
    pub dropped: Arc<AtomicU64>,
}

impl SyslogLayer {
    pub fn new(s: &SyslogSettings) -> Result<SyslogLayer, String> {
        if s.server.is_none() && s.local.is_none() && s.tcp.is_none() {
            return Err("syslog: neither a server nor the local socket".into());
        }
        let udp = match s.server {
            Some(addr) => {
                let bind: SocketAddr = if addr.is_ipv4() {
                    "0.0.0.0:0".parse().unwrap_or(addr)
                } else {
                    "[::]:0".parse().unwrap_or(addr)
                };
                let sock = UdpSocket::bind(bind).map_err(|e| format!("syslog: UDP socket: {e}"))?;
                sock.set_nonblocking(true)
                    .map_err(|e| format!("syslog: UDP socket: {e}"))?;
                Some((sock, addr))
            }
            None => None,
        };
        let local = match &s.local {
            Some(path) => {
                let sock = UnixDatagram::unbound().map_err(|e| format!("syslog: {e}"))?;
                sock.connect(path)
                    .map_err(|e| format!("syslog: {}: {e}", path.display()))?;
                sock.set_nonblocking(true)
                    .map_err(|e| format!("syslog: {e}"))?;
                Some(sock)
            }
            None => None,
        };
        let tcp = match s.tcp {
            Some(addr) => {
                Some(TcpSender::start(addr).map_err(|e| format!("syslog: TCP sender: {e}"))?)
            }
            None => None,
        };
        Ok(SyslogLayer {
            tcp,
            udp,
            local,
            facility: s.facility,
            hostname: hostname(),
            app_name: s.app_name.clone(),
            pid: std::process::id(),
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    fn send(&self, line: &str) {
        if let Some(t) = &self.tcp {
            if t.tx.try_send(line.to_string()).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some((sock, addr)) = &self.udp {
            if sock.send_to(line.as_bytes(), addr).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(sock) = &self.local {
            if sock.send(line.as_bytes()).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Lines queued for the TCP collector before new ones are dropped.
const TCP_QUEUE: usize = 4096;

/// The TCP collector's sender: a thread of its own owns the connection,
/// so a slow or absent collector never blocks a logging thread (lines
/// beyond the queue are dropped and counted). Each message is framed by
/// octet counting (RFC 6587 3.4.1: `LEN SP MSG`). A lost connection is
/// retried at most once a second; lines meanwhile are dropped.
struct TcpSender {
    tx: std::sync::mpsc::SyncSender<String>,
}

impl TcpSender {
    fn start(addr: SocketAddr) -> std::io::Result<TcpSender> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<String>(TCP_QUEUE);
        std::thread::Builder::new()
            .name("syslog-tcp".into())
            .spawn(move || {
                use std::io::Write;
                let mut conn: Option<std::net::TcpStream> = None;
                let mut last_try: Option<std::time::Instant> = None;
                while let Ok(line) = rx.recv() {
                    if conn.is_none()
                        && last_try.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1))
                    {
                        last_try = Some(std::time::Instant::now());
                        conn = std::net::TcpStream::connect_timeout(
                            &addr,
                            std::time::Duration::from_secs(2),
                        )
                        .ok();
                        if let Some(c) = &conn {
                            let _ = c.set_write_timeout(Some(std::time::Duration::from_secs(2)));
                            let _ = c.set_nodelay(true);
                        }
                    }
                    if let Some(c) = conn.as_mut() {
                        let framed = format!("{} {line}", line.len());
                        if c.write_all(framed.as_bytes()).is_err() {
                            conn = None;
                        }
                    }
                }
            })?;
        Ok(TcpSender { tx })
    }
}

/// The message, then the other fields as `name=value`.
#[derive(Default)]
pub(crate) struct Text {
    pub(crate) message: String,
    pub(crate) fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for SyslogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut text = Text::default();
        event.record(&mut text);
        text.message.push_str(&text.fields);
        let line = format(
            self.facility,
            severity(meta.level()),
            SystemTime::now(),
            &self.hostname,
            &self.app_name,
            self.pid,
            meta.target(),
            &text.message,
        );
        self.send(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = UNIX_EPOCH + Duration::from_micros(1_764_097_323_123_456);
        assert_eq!(timestamp(t), "2025-11-25T19:02:03.123456Z");
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(timestamp(t), "2000-02-29T00:00:00.000000Z");
    }

    #[test]
    fn header_of_rfc5424() {
        let l = format(
            Facility::Local0,
            6,
            UNIX_EPOCH,
            "sw 1",
            "lanyard",
            42,
            "control::ports",
            "port a: up",
        );
        assert_eq!(
            l,
            "<134>1 1970-01-01T00:00:00.000000Z sw1 lanyard 42 control::ports - port a: up"
        );
        let l = format(
            Facility::Daemon,
            3,
            UNIX_EPOCH,
            "",
            "",
            1,
            &"x".repeat(40),
            "m",
        );
        assert!(
            l.starts_with(
                "<27>1 1970-01-01T00:00:00.000000Z - - 1 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx - m"
            ),
            "{l}"
        );
    }

    #[test]
    fn facilities_parse_by_name() {
        assert_eq!(Facility::parse("local7"), Ok(Facility::Local7));
        assert_eq!(Facility::parse("daemon").map(Facility::name), Ok("daemon"));
        assert!(Facility::parse("local8").unwrap_err().contains("local0"));
    }
}
