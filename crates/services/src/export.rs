//! Flow export: the thread that turns the workers' expired flow records
//! into NetFlow v9 or IPFIX datagrams for a collector.
//!
//! Each worker owns a `tables::flow::FlowCache` and pushes what its sweeps
//! expire onto its own [`FlowExportQueue`]. The exporter thread drains all
//! the queues, converts the records ([`to_export_record`]: interface index =
//! port id + 1, times from the workers' millisecond clock to Unix time)
//! and sends them in datagrams of at most `mtu` octets:
//!
//! - a datagram leaves as soon as it is full, and a partly filled one at
//!   most [`FLUSH_DELAY`] after its oldest record arrived (a little more
//!   under load: at most twice that), so collectors see flows promptly;
//! - the template set (IPv4 and IPv6 templates) is sent alone at start,
//!   then again at the front of a data datagram every `template_refresh`
//!   or every `template_refresh_packets` datagrams, whichever comes first;
//! - an idle exporter parks for [`IDLE_SLEEP`] between polls (no spin);
//!   [`FlowExporter::stop`] wakes it, drains the queues, sends and joins.
//!
//! Header fields: v9 `sequence` counts datagrams, IPFIX `sequence` counts
//! data records sent before the message (RFC 3954 §5.1, RFC 7011 §3.1).
//! v9 times are relative to a boot time fixed at start (the `epoch` of
//! the records' clock); the header's `unix_secs` is rounded *up* to the
//! second and `sysUptime` is `unix_secs × 1000 − boot`, so that collectors
//! (which compute boot as `unix_secs × 1000 − sysUptime`) recover record
//! times to the millisecond and no record is later than `sysUptime`.
//!
//! See docs/flows.md.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tables::flow::{FlowEnd, FlowExportQueue, FlowRecord};

use netflow::{end_reason, ExportRecord, Header, MessageBuilder, Version};
pub use wire::netflow;

/// Longest a record waits in a partly filled datagram.
pub const FLUSH_DELAY: Duration = Duration::from_millis(40);
/// Sleep between polls of empty queues.
pub const IDLE_SLEEP: Duration = Duration::from_millis(10);
/// Smallest `mtu` accepted: a template set and an IPv6 record fit.
pub const MIN_MTU: usize = 256;
/// Records taken from one queue before moving to the next (fairness).
const DRAIN_PER_QUEUE: usize = 256;

/// Export protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportVersion {
    /// NetFlow v9 (RFC 3954).
    V9,
    /// IPFIX (RFC 7011).
    Ipfix,
}

/// Where and how to export.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportConfig {
    pub collector: SocketAddr,
    pub version: ExportVersion,
    /// Local address (and port) to send from; `None`: any, chosen by the
    /// kernel.
    pub source: Option<SocketAddr>,
    /// Resend templates at least this often (default 60 s).
    pub template_refresh: Duration,
    /// ... and at least every this many datagrams (default 20; 0 = only by
    /// time).
    pub template_refresh_packets: u32,
    /// v9 source id / IPFIX observation domain id.
    pub domain_id: u32,
    /// Largest datagram payload (default 1400).
    pub mtu: usize,
    /// Most records sent per second (`None`: no limit). The thread waits
    /// before a datagram that would exceed it; the queues fill meanwhile
    /// and the caches keep their flows (a full queue ends a sweep), so
    /// nothing is lost — what a collector that drops bursts needs.
    pub rate_limit: Option<u32>,
}

impl ExportConfig {
    /// Defaults: refresh 60 s / 20 datagrams, domain 0, MTU 1400.
    pub fn new(collector: SocketAddr, version: ExportVersion) -> ExportConfig {
        ExportConfig {
            collector,
            version,
            source: None,
            template_refresh: Duration::from_secs(60),
            template_refresh_packets: 20,
            domain_id: 0,
            mtu: netflow::DEFAULT_MTU,
            rate_limit: None,
        }
    }
}

/// Exporter counters (a snapshot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Flow records sent.
    pub records: u64,
    /// Datagrams sent.
    pub packets: u64,
    /// UDP payload octets sent.
    pub bytes: u64,
    /// Datagrams the socket refused (their records are lost).
    pub send_errors: u64,
    /// Records lost: in datagrams that failed, or too large for the MTU.
    pub records_lost: u64,
    /// Template sets sent.
    pub templates: u64,
}

#[derive(Default)]
struct Counters {
    records: AtomicU64,
    packets: AtomicU64,
    bytes: AtomicU64,
    send_errors: AtomicU64,
    records_lost: AtomicU64,
    templates: AtomicU64,
}

/// The running exporter. Dropping it stops it like [`FlowExporter::stop`].
pub struct FlowExporter {
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
    local: SocketAddr,
}

/// Exported interface index of a port: id + 1; 0 for "none"
/// (`u16::MAX`, e.g. dropped or punted traffic).
pub fn if_index(port: u16) -> u32 {
    if port == u16::MAX {
        0
    } else {
        u32::from(port) + 1
    }
}

/// A flow record as exported; `wall_at_epoch_ms` is the Unix time (ms)
/// of the records' clock zero.
pub fn to_export_record(r: &FlowRecord, wall_at_epoch_ms: u64) -> ExportRecord {
    let k = &r.key;
    ExportRecord {
        src_ip: k.src_ip,
        dst_ip: k.dst_ip,
        family: k.family,
        src_port: k.src_port,
        dst_port: k.dst_port,
        proto: k.proto,
        tos: k.tos,
        tcp_flags: r.tcp_flags,
        in_if: if_index(k.in_port),
        out_if: if_index(r.out_port),
        vlan: k.vlan,
        packets: r.packets,
        bytes: r.bytes,
        first_ms: wall_at_epoch_ms + r.first_ms,
        last_ms: wall_at_epoch_ms + r.last_ms,
        end_reason: match r.end {
            FlowEnd::Inactive => end_reason::IDLE_TIMEOUT,
            FlowEnd::Active => end_reason::ACTIVE_TIMEOUT,
            FlowEnd::Forced => end_reason::FORCED_END,
        },
    }
}

impl FlowExporter {
    /// Opens the socket and starts the exporter thread on `queues` (one
    /// per worker). `epoch` is the zero of the records' millisecond clock.
    pub fn start(
        cfg: ExportConfig,
        queues: Vec<Arc<FlowExportQueue>>,
        epoch: Instant,
    ) -> std::io::Result<FlowExporter> {
        let bind = cfg.source.unwrap_or_else(|| match cfg.collector {
            SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
        });
        let sock = UdpSocket::bind(bind)?;
        sock.connect(cfg.collector)?;
        let local = sock.local_addr()?;
        if !(MIN_MTU..=usize::from(u16::MAX)).contains(&cfg.mtu) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("flow export MTU {} not in {MIN_MTU}..=65535", cfg.mtu),
            ));
        }
        // The records' clock in Unix time.
        let since_epoch = epoch.elapsed();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(since_epoch);
        let wall_at_epoch_ms = wall.as_millis() as u64;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let mut ex = Exporter {
            version: match cfg.version {
                ExportVersion::V9 => Version::V9,
                ExportVersion::Ipfix => Version::Ipfix,
            },
            buf: vec![0; cfg.mtu],
            cfg,
            sock,
            queues,
            epoch,
            wall_at_epoch_ms,
            pending: Vec::new(),
            oldest: None,
            sequence: 0,
            last_templates: None,
            since_templates: 0,
            counters: counters.clone(),
            error_logged: false,
            next_send: None,
        };
        let st = stop.clone();
        let thread = std::thread::Builder::new()
            .name("flow-export".into())
            .spawn(move || ex.run(&st))?;
        Ok(FlowExporter {
            stop,
            counters,
            thread: Some(thread),
            local,
        })
    }

    /// Counters so far.
    pub fn stats(&self) -> ExportStats {
        let c = &self.counters;
        ExportStats {
            records: c.records.load(Ordering::Relaxed),
            packets: c.packets.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            send_errors: c.send_errors.load(Ordering::Relaxed),
            records_lost: c.records_lost.load(Ordering::Relaxed),
            templates: c.templates.load(Ordering::Relaxed),
        }
    }

    /// The address datagrams are sent from.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Drains the queues, sends what is left and joins the thread; returns
    /// the final counters. Stop the workers (or their sweeps) first:
    /// records queued after this returns are not exported.
    pub fn stop(mut self) -> ExportStats {
        self.shutdown();
        self.stats()
    }

    fn shutdown(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Release);
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for FlowExporter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Exporter {
    cfg: ExportConfig,
    version: Version,
    sock: UdpSocket,
    queues: Vec<Arc<FlowExportQueue>>,
    epoch: Instant,
    wall_at_epoch_ms: u64,
    buf: Vec<u8>,
    /// Records not sent yet, and when the oldest of them arrived.
    pending: Vec<ExportRecord>,
    oldest: Option<Instant>,
    /// v9: datagrams sent; IPFIX: data records sent.
    sequence: u32,
    last_templates: Option<Instant>,
    /// Datagrams since the last template set.
    since_templates: u32,
    counters: Arc<Counters>,
    error_logged: bool,
    /// `rate_limit`: when the next datagram may go.
    next_send: Option<Instant>,
}

impl Exporter {
    fn run(&mut self, stop: &AtomicBool) {
        // Templates first, alone.
        self.send_message(0, false);
        loop {
            // Read the flag before draining: once set, a drain that finds
            // the queues empty is the last.
            let stopping = stop.load(Ordering::Acquire);
            let mut got = 0;
            for q in &self.queues {
                for _ in 0..DRAIN_PER_QUEUE {
                    let Some(r) = q.pop() else { break };
                    self.pending
                        .push(to_export_record(&r, self.wall_at_epoch_ms));
                    got += 1;
                }
            }
            if got > 0 && self.oldest.is_none() {
                self.oldest = Some(Instant::now());
            }
            if got == 0 && stopping {
                self.pump(true);
                return;
            }
            if self.pending.len() >= self.fill_threshold() {
                self.pump(false);
            }
            if self.oldest.is_some_and(|t| t.elapsed() >= FLUSH_DELAY) {
                self.pump(true);
            }
            if got == 0 {
                std::thread::park_timeout(IDLE_SLEEP);
            }
        }
    }

    fn templates_due(&self) -> bool {
        match self.last_templates {
            None => true,
            Some(t) => {
                t.elapsed() >= self.cfg.template_refresh
                    || (self.cfg.template_refresh_packets > 0
                        && self.since_templates >= self.cfg.template_refresh_packets)
            }
        }
    }

    /// Sends full datagrams from `pending`; with `force`, everything.
    fn pump(&mut self, force: bool) {
        let mut start = 0;
        while start < self.pending.len() {
            let n = self.send_message(start, !force);
            if n == 0 {
                break;
            }
            start += n;
        }
        self.pending.drain(..start);
        if self.pending.is_empty() {
            self.oldest = None;
        } else if start > 0 {
            // Leftovers wait at most FLUSH_DELAY more.
            self.oldest = Some(Instant::now());
        }
    }

    /// `rate_limit`: waits until `records` more are within the rate.
    /// Datagrams are spaced evenly (an idle spell earns no burst: a burst
    /// is what overflows a collector's socket buffer).
    fn pace(&mut self, records: u32) {
        let Some(rate) = self.cfg.rate_limit.filter(|r| *r > 0) else {
            return;
        };
        let now = Instant::now();
        let at = self.next_send.filter(|t| *t > now).unwrap_or(now);
        if at > now {
            std::thread::sleep(at - now);
        }
        self.next_send = Some(at + Duration::from_secs_f64(f64::from(records) / f64::from(rate)));
    }

    /// Fewest records that can fill a datagram (all IPv6, after the
    /// template set): below it, `pump(false)` is pointless.
    fn fill_threshold(&self) -> usize {
        netflow::records_per_message(self.version, 6, self.cfg.mtu, true).max(1)
    }

    fn header(&self) -> Header {
        let now_ms = self.wall_at_epoch_ms + self.epoch.elapsed().as_millis() as u64;
        match self.version {
            Version::V9 => {
                let unix_secs = now_ms.div_ceil(1000);
                Header {
                    unix_secs: unix_secs as u32,
                    sys_uptime_ms: (unix_secs * 1000 - self.wall_at_epoch_ms) as u32,
                    sequence: self.sequence,
                    domain_id: self.cfg.domain_id,
                }
            }
            Version::Ipfix => Header {
                unix_secs: (now_ms / 1000) as u32,
                sys_uptime_ms: 0,
                sequence: self.sequence,
                domain_id: self.cfg.domain_id,
            },
        }
    }

    /// Builds one datagram from `pending[start..]`, with the template set
    /// first when due, and sends it, unless `only_if_full` and the records
    /// left all fit (then nothing is sent). Returns the records consumed.
    fn send_message(&mut self, start: usize, only_if_full: bool) -> usize {
        let templates = self.templates_due();
        let header = self.header();
        let Ok(mut b) = MessageBuilder::new(self.version, &mut self.buf, &header) else {
            return 0; // MTU below the header: refused by start()
        };
        let with_templates = templates && b.add_templates().is_ok();
        let mut n = 0;
        while start + n < self.pending.len() && b.add_record(&self.pending[start + n]) {
            n += 1;
        }
        let full = start + n < self.pending.len();
        if !full && only_if_full {
            return 0;
        }
        if n == 0 && full && !with_templates {
            // A record larger than the MTU (not with MTU >= MIN_MTU).
            self.counters.records_lost.fetch_add(1, Ordering::Relaxed);
            return 1;
        }
        let len = b.finish();
        self.transmit(len, n as u32, with_templates);
        n
    }

    fn transmit(&mut self, len: usize, records: u32, templates: bool) {
        self.pace(records);
        let c = &self.counters;
        match self.sock.send(&self.buf[..len]) {
            Ok(_) => {
                c.packets.fetch_add(1, Ordering::Relaxed);
                c.bytes.fetch_add(len as u64, Ordering::Relaxed);
                c.records.fetch_add(records.into(), Ordering::Relaxed);
                if templates {
                    c.templates.fetch_add(1, Ordering::Relaxed);
                }
                self.error_logged = false;
            }
            Err(e) => {
                c.send_errors.fetch_add(1, Ordering::Relaxed);
                c.records_lost.fetch_add(records.into(), Ordering::Relaxed);
                if !self.error_logged {
                    tracing::warn!(
                        "flow export to {}: {e} (logged once until a send succeeds)",
                        self.cfg.collector
                    );
                    self.error_logged = true;
                }
            }
        }
        // Sequence numbers count what was exported, sent or not
        // (RFC 7011 §10.3.2: loss shows as a gap at the collector).
        self.sequence = match self.version {
            Version::V9 => self.sequence.wrapping_add(1),
            Version::Ipfix => self.sequence.wrapping_add(records),
        };
        if templates {
            self.last_templates = Some(Instant::now());
            self.since_templates = 0;
        } else {
            self.since_templates = self.since_templates.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tables::flow::FlowKey;

    #[test]
    fn record_conversion() {
        let r = FlowRecord {
            key: FlowKey {
                src_ip: 0x0a00_0001,
                dst_ip: 0x0a00_0002,
                src_port: 1,
                dst_port: 2,
                proto: 6,
                tos: 0x20,
                family: 4,
                in_port: 0,
                vlan: 7,
            },
            packets: 3,
            bytes: 1 << 40,
            first_ms: 1_000,
            last_ms: 2_500,
            tcp_flags: 0x12,
            out_port: u16::MAX,
            end: FlowEnd::Active,
        };
        let e = to_export_record(&r, 1_700_000_000_000);
        assert_eq!((e.in_if, e.out_if), (1, 0));
        assert_eq!(
            (e.first_ms, e.last_ms),
            (1_700_000_001_000, 1_700_000_002_500)
        );
        assert_eq!(e.end_reason, end_reason::ACTIVE_TIMEOUT);
        assert_eq!((e.bytes, e.packets, e.vlan, e.tos), (1 << 40, 3, 7, 0x20));
        assert_eq!(if_index(41), 42);
    }
}
