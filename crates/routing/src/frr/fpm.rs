//! FPM framing and the TCP server zebra's `dplane_fpm_nl` connects to.
//!
//! Every message on the stream is framed by a 4-byte header: version (1),
//! message type (1 = netlink, 2 = protobuf), and the total length including
//! the header, big-endian. Zebra connects (by default to 127.0.0.1:2620),
//! then replays its whole state (next-hop objects, then routes) and streams
//! changes. There is no explicit resync request in the protocol: zebra
//! replays everything on every (re)connect, so a server that loses framing
//! closes the connection and zebra comes back within about 3 seconds.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::netlink::{self, RouteUpdate};

/// zebra's default FPM port.
pub const FPM_DEFAULT_PORT: u16 = 2620;
/// Size of the FPM header.
pub const FPM_HEADER_LEN: usize = 4;
/// The only FPM version.
pub const FPM_PROTO_VERSION: u8 = 1;
/// Frame carries netlink messages.
pub const FPM_MSG_TYPE_NETLINK: u8 = 1;
/// Frame carries a protobuf message (old `zebra_fpm` module; not decoded).
pub const FPM_MSG_TYPE_PROTOBUF: u8 = 2;

/// The stream can no longer be framed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    BadVersion(u8),
    /// Length field below the header size.
    BadLength(u16),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::BadVersion(v) => write!(f, "FPM version {v}, expected 1"),
            FrameError::BadLength(l) => write!(f, "FPM length {l} below header size"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Push-based frame splitter: feed it bytes as they arrive, take complete
/// frames out. Partial frames stay buffered; after a [`FrameError`] the
/// stream is unusable and the reader must be [`reset`](Self::reset).
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    pos: usize,
}

impl FrameReader {
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// Appends received bytes.
    pub fn extend(&mut self, data: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 64 * 1024 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes buffered but not yet returned as frames.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Drops everything buffered.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.pos = 0;
    }

    /// The next complete frame as `(message type, payload)`, `Ok(None)` if
    /// more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<(u8, &[u8])>, FrameError> {
        let avail = &self.buf[self.pos..];
        if avail.len() < FPM_HEADER_LEN {
            return Ok(None);
        }
        if avail[0] != FPM_PROTO_VERSION {
            return Err(FrameError::BadVersion(avail[0]));
        }
        let msg_type = avail[1];
        let len = u16::from_be_bytes([avail[2], avail[3]]);
        if (len as usize) < FPM_HEADER_LEN {
            return Err(FrameError::BadLength(len));
        }
        if avail.len() < len as usize {
            return Ok(None);
        }
        let start = self.pos + FPM_HEADER_LEN;
        self.pos += len as usize;
        Ok(Some((msg_type, &self.buf[start..self.pos])))
    }
}

/// Wraps a netlink payload in an FPM header (what zebra does).
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(payload.len() + FPM_HEADER_LEN).expect("FPM frame over 64 KiB");
    let mut out = Vec::with_capacity(len as usize);
    out.extend_from_slice(&[FPM_PROTO_VERSION, FPM_MSG_TYPE_NETLINK]);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// What a journal entry is about: the last message for it is what counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum JournalKey {
    Route(u32, netlink::Prefix),
    NextHop(u32),
    Label(u32),
}

/// The last netlink message zebra sent for each route, next-hop object
/// and label entry still installed, so that `lanyard restart` can hand the
/// new image the whole table (docs/ha.md): zebra only notices the restart
/// when its connection closes, reconnects after about 3 s and replays,
/// and until then the new image would route with connected routes only.
/// Entries carry the connection generation they were last refreshed in;
/// a new connection's quiet point ([`FpmEvent::Settled`]) drops the ones
/// its replay did not refresh, as the FIB does.
#[derive(Debug, Default)]
pub struct Journal {
    generation: u64,
    entries: std::collections::HashMap<JournalKey, (u64, Vec<u8>)>,
}

impl Journal {
    fn key(u: &RouteUpdate) -> Option<(JournalKey, bool)> {
        use labelfeed::LabelMsg;
        Some(match u {
            RouteUpdate::Add { prefix, table, .. } => (JournalKey::Route(*table, *prefix), true),
            RouteUpdate::Del { prefix, table, .. } => (JournalKey::Route(*table, *prefix), false),
            RouteUpdate::NextHopAdd { id, .. } => (JournalKey::NextHop(*id), true),
            RouteUpdate::NextHopDel { id } => (JournalKey::NextHop(*id), false),
            RouteUpdate::Label(LabelMsg::LabelAdd(e)) => (JournalKey::Label(e.in_label), true),
            RouteUpdate::Label(LabelMsg::LabelDel { in_label }) => {
                (JournalKey::Label(*in_label), false)
            }
            RouteUpdate::Label(LabelMsg::RouteAdd(r)) => (
                JournalKey::Route(r.table, netlink::Prefix::new(r.prefix, r.prefix_len)?),
                true,
            ),
            RouteUpdate::Label(LabelMsg::RouteDel {
                prefix,
                prefix_len,
                table,
            }) => (
                JournalKey::Route(*table, netlink::Prefix::new(*prefix, *prefix_len)?),
                false,
            ),
            RouteUpdate::Ignored { .. } => return None,
        })
    }

    /// One decoded message: kept for an add, forgotten for a delete.
    fn record(&mut self, msg: &[u8], u: &RouteUpdate) {
        match Self::key(u) {
            Some((k, true)) => {
                self.entries.insert(k, (self.generation, msg.to_vec()));
            }
            Some((k, false)) => {
                self.entries.remove(&k);
            }
            None => {}
        }
    }

    /// zebra connected: what follows is its replay.
    fn connected(&mut self) {
        self.generation += 1;
    }

    /// The replay is over: what it did not refresh is gone.
    fn settled(&mut self) {
        let g = self.generation;
        self.entries.retain(|_, e| e.0 == g);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry as an FPM frame, next-hop objects first (routes may
    /// refer to them).
    pub fn frames(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for first in [true, false] {
            for (k, (_, msg)) in &self.entries {
                if matches!(k, JournalKey::NextHop(_)) == first {
                    out.extend(frame(msg));
                }
            }
        }
        out
    }
}

/// Counters of one server, shared with its thread.
#[derive(Debug, Default)]
pub struct FpmStats {
    /// The installed state as zebra's last messages (see [`Journal`]).
    pub journal: std::sync::Mutex<Journal>,
    pub connections: AtomicU64,
    /// Connections that ended (zebra is connected while fewer than
    /// `connections`).
    pub disconnections: AtomicU64,
    pub bytes: AtomicU64,
    pub frames: AtomicU64,
    /// Netlink messages decoded (several may share a frame).
    pub messages: AtomicU64,
    pub routes_added: AtomicU64,
    pub routes_removed: AtomicU64,
    pub nexthops_added: AtomicU64,
    pub nexthops_removed: AtomicU64,
    /// Well-formed messages not acted on (MPLS, MAC, ...) and non-netlink
    /// frames.
    pub ignored: AtomicU64,
    /// Frames whose netlink content failed to decode (skipped).
    pub decode_errors: AtomicU64,
    /// Broken framing: the connection was closed to force a resync.
    pub frame_errors: AtomicU64,
}

/// A plain copy of [`FpmStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FpmCounters {
    pub connections: u64,
    pub disconnections: u64,
    pub bytes: u64,
    pub frames: u64,
    pub messages: u64,
    pub routes_added: u64,
    pub routes_removed: u64,
    pub nexthops_added: u64,
    pub nexthops_removed: u64,
    pub ignored: u64,
    pub decode_errors: u64,
    pub frame_errors: u64,
}

impl FpmStats {
    pub fn snapshot(&self) -> FpmCounters {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        FpmCounters {
            connections: g(&self.connections),
            disconnections: g(&self.disconnections),
            bytes: g(&self.bytes),
            frames: g(&self.frames),
            messages: g(&self.messages),
            routes_added: g(&self.routes_added),
            routes_removed: g(&self.routes_removed),
            nexthops_added: g(&self.nexthops_added),
            nexthops_removed: g(&self.nexthops_removed),
            ignored: g(&self.ignored),
            decode_errors: g(&self.decode_errors),
            frame_errors: g(&self.frame_errors),
        }
    }

    /// The journal, locked (the FPM thread and a restart take it).
    pub fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count(&self, u: &RouteUpdate) {
        let c = match u {
            RouteUpdate::Add { .. } => &self.routes_added,
            RouteUpdate::Del { .. } => &self.routes_removed,
            RouteUpdate::NextHopAdd { .. } => &self.nexthops_added,
            RouteUpdate::NextHopDel { .. } => &self.nexthops_removed,
            RouteUpdate::Ignored { .. } => &self.ignored,
            RouteUpdate::Label(labelfeed::LabelMsg::LabelDel { .. }) => &self.routes_removed,
            RouteUpdate::Label(_) => &self.routes_added,
        };
        c.fetch_add(1, Ordering::Relaxed);
        self.messages.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the server reports to its consumer, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FpmEvent {
    /// zebra connected; it now replays its whole state. A consumer that
    /// kept state from an earlier connection should mark it stale here.
    Connected { peer: SocketAddr },
    /// Decoded updates, in stream order (`Ignored` ones left out).
    Updates(Vec<RouteUpdate>),
    /// No data for [`FpmConfig::settle`] after connecting or after the
    /// last data: the replay is (very likely) complete, stale state that
    /// was not refreshed can be swept. Sent once per quiet period.
    Settled,
    /// The connection ended (zebra went away, or we closed it because the
    /// framing broke; zebra reconnects and replays).
    Disconnected { reason: String },
}

/// Server tuning.
#[derive(Clone, Debug)]
pub struct FpmConfig {
    /// Most updates in one [`FpmEvent::Updates`] batch.
    pub max_batch: usize,
    /// Quiet time after which [`FpmEvent::Settled`] is sent.
    pub settle: Duration,
    /// How often the thread checks for shutdown while idle.
    pub poll: Duration,
}

impl Default for FpmConfig {
    fn default() -> FpmConfig {
        FpmConfig {
            max_batch: 4096,
            settle: Duration::from_secs(2),
            poll: Duration::from_millis(100),
        }
    }
}

/// A bound FPM listener, not yet serving.
pub struct FpmServer {
    listener: TcpListener,
    config: FpmConfig,
    stats: Arc<FpmStats>,
}

/// A running FPM server; stops (and joins its thread) on drop.
pub struct FpmHandle {
    local_addr: SocketAddr,
    stats: Arc<FpmStats>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FpmServer {
    /// Binds the listening socket (e.g. `"127.0.0.1:2620"`).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<FpmServer> {
        let listener = TcpListener::bind(addr)?;
        Ok(FpmServer {
            listener,
            config: FpmConfig::default(),
            stats: Arc::new(FpmStats::default()),
        })
    }

    /// Replaces the tuning.
    pub fn with_config(mut self, config: FpmConfig) -> FpmServer {
        self.config = config;
        self
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn stats(&self) -> Arc<FpmStats> {
        self.stats.clone()
    }

    /// Serves in a new thread, calling `handler` for every event. One
    /// connection at a time (zebra opens one).
    pub fn spawn<F>(self, handler: F) -> io::Result<FpmHandle>
    where
        F: FnMut(FpmEvent) + Send + 'static,
    {
        let local_addr = self.listener.local_addr()?;
        self.listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = self.stats.clone();
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("fpm-server".into())
            .spawn(move || serve(self, stop2, handler))?;
        Ok(FpmHandle {
            local_addr,
            stats,
            stop,
            thread: Some(thread),
        })
    }

    /// Serves in a new thread, sending events to the returned channel.
    pub fn spawn_channel(self) -> io::Result<(FpmHandle, mpsc::Receiver<FpmEvent>)> {
        let (tx, rx) = mpsc::channel();
        let h = self.spawn(move |ev| {
            let _ = tx.send(ev);
        })?;
        Ok((h, rx))
    }
}

impl FpmHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn stats(&self) -> Arc<FpmStats> {
        self.stats.clone()
    }

    /// Stops the server and waits for its thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FpmHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn serve<F: FnMut(FpmEvent)>(server: FpmServer, stop: Arc<AtomicBool>, mut handler: F) {
    let FpmServer {
        listener,
        config,
        stats,
    } = server;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                stats.connections.fetch_add(1, Ordering::Relaxed);
                stats.journal().connected();
                handler(FpmEvent::Connected { peer });
                let reason = serve_conn(stream, &config, &stats, &stop, &mut handler);
                stats.disconnections.fetch_add(1, Ordering::Relaxed);
                handler(FpmEvent::Disconnected { reason });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(config.poll),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => std::thread::sleep(config.poll),
        }
    }
}

/// Reads one connection until it ends; returns why it ended.
fn serve_conn<F: FnMut(FpmEvent)>(
    mut stream: TcpStream,
    config: &FpmConfig,
    stats: &FpmStats,
    stop: &AtomicBool,
    handler: &mut F,
) -> String {
    if let Err(e) = stream
        .set_nonblocking(false)
        .and_then(|_| stream.set_read_timeout(Some(config.poll)))
    {
        return format!("socket setup: {e}");
    }
    let _ = stream.set_nodelay(true);
    let mut reader = FrameReader::new();
    let mut decoder = StreamDecoder::default();
    let mut buf = vec![0u8; 256 * 1024];
    let mut last_data = Instant::now();
    let mut settled = false;
    loop {
        if stop.load(Ordering::Relaxed) {
            return "server shut down".into();
        }
        match stream.read(&mut buf) {
            Ok(0) => return "connection closed by peer".into(),
            Ok(n) => {
                stats.bytes.fetch_add(n as u64, Ordering::Relaxed);
                reader.extend(&buf[..n]);
                last_data = Instant::now();
                settled = false;
                let mut batch = Vec::new();
                let res = decoder.drain(&mut reader, stats, &mut batch);
                // Deliver what was decoded in max_batch pieces, in order.
                while !batch.is_empty() {
                    let rest = batch.split_off(batch.len().min(config.max_batch));
                    handler(FpmEvent::Updates(batch));
                    batch = rest;
                }
                if let Err(e) = res {
                    stats.frame_errors.fetch_add(1, Ordering::Relaxed);
                    // Closing makes zebra reconnect and replay everything.
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    return format!("framing lost ({e}); closed to force a resync");
                }
            }
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::TimedOut
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                if !settled && last_data.elapsed() >= config.settle {
                    settled = true;
                    stats.journal().settled();
                    handler(FpmEvent::Settled);
                }
            }
            Err(e) => return format!("read error: {e}"),
        }
    }
}

/// Frame reader + netlink decoder + counters, independent of any socket
/// (the server and the fuzz target both use it).
#[derive(Debug, Default)]
pub struct StreamDecoder {
    /// Last decode error seen (frames that failed are skipped).
    pub last_error: Option<netlink::DecodeError>,
}

impl StreamDecoder {
    /// Takes every complete frame out of `reader`, appending the decoded
    /// updates (minus `Ignored`) to `out`. A frame whose netlink content
    /// does not decode is counted and skipped: its framing was intact, and
    /// zebra would only resend the same bytes. A framing error is returned:
    /// the stream is lost and must be closed.
    pub fn drain(
        &mut self,
        reader: &mut FrameReader,
        stats: &FpmStats,
        out: &mut Vec<RouteUpdate>,
    ) -> Result<(), FrameError> {
        while let Some((msg_type, payload)) = reader.next_frame()? {
            stats.frames.fetch_add(1, Ordering::Relaxed);
            if msg_type != FPM_MSG_TYPE_NETLINK {
                stats.ignored.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // Message by message (as `netlink::decode`), so the journal
            // keeps each message on its own; all or nothing per frame.
            match netlink::split(payload).and_then(|msgs| {
                msgs.into_iter()
                    .map(|m| netlink::decode_one(m).map(|u| (m, u)))
                    .collect::<Result<Vec<_>, _>>()
            }) {
                Ok(updates) => {
                    let mut journal = stats.journal();
                    for (msg, u) in updates {
                        stats.count(&u);
                        journal.record(msg, &u);
                        if !matches!(u, RouteUpdate::Ignored { .. }) {
                            out.push(u);
                        }
                    }
                }
                Err(e) => {
                    stats.decode_errors.fetch_add(1, Ordering::Relaxed);
                    self.last_error = Some(e);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::netlink::build;
    use super::super::netlink::*;
    use super::*;
    use std::io::Write;

    fn add(pfx: &str, gw: &str) -> Vec<u8> {
        build::route(
            RTM_NEWROUTE,
            pfx.parse().unwrap(),
            254,
            196,
            20,
            &NextHops::List(vec![NextHop {
                gateway: Some(gw.parse().unwrap()),
                ifindex: 2,
                weight: 1,
            }]),
        )
    }

    #[test]
    fn frame_reader_splits_and_reassembles() {
        let mut stream = frame(&add("10.0.0.0/24", "192.0.2.1"));
        stream.extend(frame(&add("10.0.1.0/24", "192.0.2.1")));
        stream.extend([1, 2, 0, 4]); // empty protobuf frame
        let mut r = FrameReader::new();
        let mut frames = Vec::new();
        // Byte by byte.
        for b in &stream {
            r.extend(std::slice::from_ref(b));
            while let Some((t, p)) = r.next_frame().unwrap() {
                frames.push((t, p.to_vec()));
            }
        }
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0].1, add("10.0.0.0/24", "192.0.2.1"));
        assert_eq!(frames[2], (2, vec![]));
        assert_eq!(r.pending(), 0);
    }

    /// The journal keeps the last message per route, forgets deletes,
    /// and after a new connection's quiet point only what its replay
    /// refreshed; its frames decode back to the same routes.
    #[test]
    fn journal_keeps_installed_state_and_sweeps_after_a_replay() {
        let stats = FpmStats::default();
        let feed = |stats: &FpmStats, msgs: &[Vec<u8>]| {
            let mut r = FrameReader::new();
            for m in msgs {
                r.extend(&frame(m));
            }
            let mut out = Vec::new();
            StreamDecoder::default()
                .drain(&mut r, stats, &mut out)
                .unwrap();
            out
        };
        let del = |pfx: &str| {
            build::route(
                RTM_DELROUTE,
                pfx.parse().unwrap(),
                254,
                196,
                20,
                &NextHops::List(Vec::new()),
            )
        };
        stats.journal().connected();
        feed(
            &stats,
            &[
                add("10.0.0.0/24", "192.0.2.1"),
                add("10.0.1.0/24", "192.0.2.1"),
                add("10.0.0.0/24", "192.0.2.9"),
                add("10.0.2.0/24", "192.0.2.1"),
                del("10.0.2.0/24"),
            ],
        );
        assert_eq!(stats.journal().len(), 2);
        // Its frames replay the installed state: the newer next hop wins.
        let mut r = FrameReader::new();
        r.extend(&stats.journal().frames());
        let mut out = Vec::new();
        StreamDecoder::default()
            .drain(&mut r, &FpmStats::default(), &mut out)
            .unwrap();
        let mut rib = super::super::Rib::new();
        out.iter().for_each(|u| rib.apply(u));
        assert_eq!(rib.len(), 2);
        let r0 = rib.get(254, &"10.0.0.0/24".parse().unwrap()).unwrap();
        assert_eq!(
            r0.nexthops,
            NextHops::List(vec![NextHop {
                gateway: Some("192.0.2.9".parse().unwrap()),
                ifindex: 2,
                weight: 1,
            }])
        );
        // A new connection replays one of the two; its quiet point sweeps
        // the other.
        stats.journal().connected();
        feed(&stats, &[add("10.0.1.0/24", "192.0.2.1")]);
        assert_eq!(
            stats.journal().len(),
            2,
            "nothing swept before the quiet point"
        );
        stats.journal().settled();
        assert_eq!(stats.journal().len(), 1);
    }

    #[test]
    fn frame_reader_rejects_broken_headers() {
        let mut r = FrameReader::new();
        r.extend(&[2, 1, 0, 8, 0, 0, 0, 0]);
        assert_eq!(r.next_frame(), Err(FrameError::BadVersion(2)));
        let mut r = FrameReader::new();
        r.extend(&[1, 1, 0, 3]);
        assert_eq!(r.next_frame(), Err(FrameError::BadLength(3)));
    }

    #[test]
    fn decoder_skips_bad_payload_but_keeps_going() {
        let stats = FpmStats::default();
        let mut r = FrameReader::new();
        r.extend(&frame(&[0xff; 20]));
        r.extend(&frame(&add("10.0.0.0/24", "192.0.2.1")));
        let mut out = Vec::new();
        let mut d = StreamDecoder::default();
        d.drain(&mut r, &stats, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        let c = stats.snapshot();
        assert_eq!((c.frames, c.decode_errors, c.routes_added), (2, 1, 1));
    }

    fn recv_until<F: Fn(&FpmEvent) -> bool>(rx: &mpsc::Receiver<FpmEvent>, f: F) -> Vec<FpmEvent> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            if let Ok(ev) = rx.recv_timeout(Duration::from_millis(100)) {
                let done = f(&ev);
                seen.push(ev);
                if done {
                    return seen;
                }
            }
        }
        panic!("timed out; saw {seen:?}");
    }

    #[test]
    fn server_delivers_updates_and_resyncs_on_garbage() {
        let server = FpmServer::bind("127.0.0.1:0")
            .unwrap()
            .with_config(FpmConfig {
                settle: Duration::from_millis(300),
                poll: Duration::from_millis(20),
                ..FpmConfig::default()
            });
        let addr = server.local_addr().unwrap();
        let (h, rx) = server.spawn_channel().unwrap();

        let mut c = TcpStream::connect(addr).unwrap();
        let mut bytes = frame(&add("10.0.0.0/24", "192.0.2.1"));
        // A frame split across writes.
        let second = frame(&add("2001:db8::/32", "2001:db8::1"));
        bytes.extend_from_slice(&second[..10]);
        c.write_all(&bytes).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        c.write_all(&second[10..]).unwrap();
        let evs = recv_until(&rx, |e| matches!(e, FpmEvent::Settled));
        assert!(matches!(evs[0], FpmEvent::Connected { .. }));
        let updates: Vec<_> = evs
            .iter()
            .filter_map(|e| match e {
                FpmEvent::Updates(u) => Some(u.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(updates.len(), 2);

        // Garbage header: the server closes, we see EOF.
        c.write_all(&[9, 9, 9, 9]).unwrap();
        recv_until(&rx, |e| matches!(e, FpmEvent::Disconnected { .. }));
        let mut sink = [0u8; 8];
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(c.read(&mut sink).unwrap_or(0), 0);

        // Reconnect works.
        let mut c2 = TcpStream::connect(addr).unwrap();
        c2.write_all(&frame(&add("10.0.2.0/24", "192.0.2.1")))
            .unwrap();
        recv_until(&rx, |e| matches!(e, FpmEvent::Updates(_)));
        let s = h.stats().snapshot();
        assert_eq!(s.connections, 2);
        assert_eq!(s.frame_errors, 1);
        assert_eq!(s.routes_added, 3);
        h.shutdown();
    }
}
