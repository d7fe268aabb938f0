//! A minimal HTTP/1.1 server for scrapes: `GET /metrics` (and `HEAD`),
//! one short-lived thread per connection, one request per connection.
//! Anything else gets 404/405/400; a client that sends a huge or slow
//! request head is cut off (8 KiB, 5 s).

use crate::{collect, Query, CONTENT_TYPE};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// Connections served at once; more are refused with 503.
const MAX_CONNS: u64 = 16;

/// A running metrics endpoint.
pub struct MetricsServer {
    /// The bound address (the real port when the config asked for 0).
    pub local: SocketAddr,
    pub thread: std::thread::JoinHandle<()>,
}

/// Bind `listen` and serve until `stop()` says so.
pub fn serve(
    listen: SocketAddr,
    query: Arc<Query>,
    stop: impl Fn() -> bool + Send + 'static,
) -> std::io::Result<MetricsServer> {
    let l = TcpListener::bind(listen)?;
    let local = l.local_addr()?;
    l.set_nonblocking(true)?;
    let busy = Arc::new(AtomicU64::new(0));
    let thread = std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            while !stop() {
                match l.accept() {
                    Ok((s, _)) => {
                        let _ = s.set_nonblocking(false);
                        if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CONNS {
                            busy.fetch_sub(1, Ordering::SeqCst);
                            let _ = reply(
                                &s,
                                "503 Service Unavailable",
                                "text/plain",
                                b"busy\n",
                                false,
                            );
                            continue;
                        }
                        let (q, b) = (query.clone(), busy.clone());
                        let spawned = std::thread::Builder::new()
                            .name("metrics-conn".into())
                            .spawn(move || {
                                serve_one(s, &*q);
                                b.fetch_sub(1, Ordering::SeqCst);
                            });
                        if spawned.is_err() {
                            busy.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })?;
    Ok(MetricsServer { local, thread })
}

fn reply(
    mut s: &TcpStream,
    status: &str,
    ctype: &str,
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    if !head_only {
        s.write_all(body)?;
    }
    s.flush()
}

/// Read what the client still sends (bounded) before closing, so the
/// answer is not lost to a reset.
fn drain(s: &TcpStream) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 4096];
    let mut r = s;
    for _ in 0..64 {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The request line of a head, or an error status.
fn request_line(head: &[u8]) -> Result<(&str, &str), &'static str> {
    let end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or("400 Bad Request")?;
    let line = std::str::from_utf8(&head[..end]).map_err(|_| "400 Bad Request")?;
    let mut w = line.split(' ');
    match (w.next(), w.next(), w.next(), w.next()) {
        (Some(m), Some(p), Some(v), None) if v.starts_with("HTTP/1.") => Ok((m, p)),
        _ => Err("400 Bad Request"),
    }
}

fn serve_one(s: TcpStream, q: &Query) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let mut r = &s;
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        if head.len() > MAX_HEAD {
            let _ = reply(
                &s,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"",
                false,
            );
            drain(&s);
            return;
        }
    }
    let (method, path) = match request_line(&head) {
        Ok(x) => x,
        Err(st) => {
            let _ = reply(&s, st, "text/plain", b"bad request\n", false);
            return;
        }
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        let _ = reply(
            &s,
            "405 Method Not Allowed",
            "text/plain",
            b"GET /metrics\n",
            false,
        );
        return;
    }
    match path.split('?').next() {
        Some("/metrics") => {
            let body = collect(q);
            let _ = reply(&s, "200 OK", CONTENT_TYPE, body.as_bytes(), head_only);
        }
        Some("/") => {
            let _ = reply(
                &s,
                "200 OK",
                "text/html",
                b"<html><body><a href=\"/metrics\">/metrics</a></body></html>\n",
                head_only,
            );
        }
        _ => {
            let _ = reply(
                &s,
                "404 Not Found",
                "text/plain",
                b"try /metrics\n",
                head_only,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn get(addr: SocketAddr, req: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(req).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_metrics_and_refuses_the_rest() {
        let q: Arc<Query> = Arc::new(|req: &Value| match req["cmd"].as_str() {
            Some("show-interfaces") => json!({"ok": true, "data": [{"name": "p1", "state": "up"}]}),
            _ => json!({"ok": false, "error": "no"}),
        });
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let srv = serve("127.0.0.1:0".parse().unwrap(), q, move || {
            st.load(Ordering::Relaxed)
        })
        .unwrap();
        let a = srv.local;
        let ok = get(a, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(CONTENT_TYPE));
        assert!(
            ok.contains("lanyard_interface_up{interface=\"p1\"} 1"),
            "{ok}"
        );
        assert!(get(a, b"GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(a, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(get(a, b"garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(get(a, &[b'x'; 20_000]).starts_with("HTTP/1.1 431"));
        let h = get(a, b"HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(
            h.starts_with("HTTP/1.1 200") && h.ends_with("\r\n\r\n"),
            "{h}"
        );
        stop.store(true, Ordering::Relaxed);
        srv.thread.join().unwrap();
    }
}
