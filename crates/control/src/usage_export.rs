//! The usage exporter (docs/inline.md, "Usage records"): drains the
//! workers' queues of ended flows and sends each as two IPFIX records, one
//! per direction, with the application, service and subscriber as
//! applicationName, applicationCategoryName and userName. One thread; the
//! workers never wait for it (a full queue loses records, counted by the
//! engine as `export-lost`).

use crate::inline::InlineControl;
use dpi::inline::InlinePlan;
use dpi::usage_record::{UsageExportCounters, UsageRecord};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use wire::netflow::{ExportRecord, Header, MessageBuilder, UsageNames, Version, DEFAULT_MTU};

/// How often the queues are drained.
const PERIOD: Duration = Duration::from_millis(50);
/// Records looked up (one subscriber-table lock) and encoded at a time.
const CHUNK: usize = 512;

struct Target {
    collector: String,
    domain_id: u32,
    refresh: Duration,
    sock: UdpSocket,
    last_templates: Option<Instant>,
}

/// The exporter thread's body: runs until `stop`.
pub fn run(inline: &InlineControl, epoch: Instant, stop: &dyn Fn() -> bool) {
    let c = inline.usage_export_counters();
    let mut target: Option<Target> = None;
    let mut drained: Option<Arc<InlinePlan>> = None;
    let mut batch: Vec<UsageRecord> = Vec::with_capacity(CHUNK);
    let mut buf = vec![0u8; DEFAULT_MTU];
    let mut sequence: u32 = 0;
    let mut warned = false;
    loop {
        let last = stop();
        let (plan, cfg) = inline.usage_export_view();
        // Connect (again) when the collector changes.
        match &cfg {
            Some(u) if target.as_ref().map(|t| &t.collector) != Some(&u.collector) => {
                target = match connect(&u.collector) {
                    Ok(sock) => Some(Target {
                        collector: u.collector.clone(),
                        domain_id: u.domain_id,
                        refresh: Duration::from_secs(u.template_refresh.max(1).into()),
                        sock,
                        last_templates: None,
                    }),
                    Err(e) => {
                        if !warned {
                            tracing::warn!("usage export to {}: {e}", u.collector);
                            warned = true;
                        }
                        None
                    }
                };
            }
            Some(u) => {
                if let Some(t) = target.as_mut() {
                    t.domain_id = u.domain_id;
                    t.refresh = Duration::from_secs(u.template_refresh.max(1).into());
                }
            }
            None => target = None,
        }
        // A replaced plan's queues are drained once more, then let go.
        let mut plans: Vec<Arc<InlinePlan>> = Vec::with_capacity(2);
        if let Some(old) = drained.take() {
            if plan.as_ref().map(|p| p.generation) != Some(old.generation) {
                plans.push(old);
            }
        }
        if let Some(p) = &plan {
            plans.push(p.clone());
        }
        let wall_at_epoch_ms = wall_ms_at(epoch);
        for p in &plans {
            for q in &p.usage_queues {
                loop {
                    batch.clear();
                    while batch.len() < CHUNK {
                        match q.pop() {
                            Some(r) => batch.push(r),
                            None => break,
                        }
                    }
                    if batch.is_empty() {
                        break;
                    }
                    c.flows.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    if let Some(t) = target.as_mut() {
                        send(
                            inline,
                            p,
                            &batch,
                            t,
                            &mut buf,
                            &mut sequence,
                            wall_at_epoch_ms,
                            &c,
                        );
                    }
                }
            }
        }
        drained = plan;
        if last {
            return;
        }
        std::thread::sleep(PERIOD);
    }
}

fn connect(collector: &str) -> std::io::Result<UdpSocket> {
    let to: SocketAddr = collector
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))?;
    let any = match to {
        SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let s = UdpSocket::bind(SocketAddr::new(any, 0))?;
    s.connect(to)?;
    Ok(s)
}

/// Unix time (ms) of the switch's epoch.
fn wall_ms_at(epoch: Instant) -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .saturating_sub(epoch.elapsed())
        .as_millis() as u64
}

/// The two directions of `r` as flow records (up: from the subscriber).
fn directions(r: &UsageRecord, wall_at_epoch_ms: u64) -> [ExportRecord; 2] {
    let base = ExportRecord {
        family: if r.v6 { 6 } else { 4 },
        proto: r.proto,
        first_ms: wall_at_epoch_ms + r.first_ms,
        last_ms: wall_at_epoch_ms + r.last_ms,
        end_reason: r.end as u8,
        ..ExportRecord::default()
    };
    let up = ExportRecord {
        src_ip: r.subscriber_addr,
        dst_ip: r.network_addr,
        src_port: r.subscriber_port,
        dst_port: r.network_port,
        packets: r.packets[0],
        bytes: r.bytes[0],
        ..base
    };
    let down = ExportRecord {
        src_ip: r.network_addr,
        dst_ip: r.subscriber_addr,
        src_port: r.network_port,
        dst_port: r.subscriber_port,
        packets: r.packets[1],
        bytes: r.bytes[1],
        ..base
    };
    [up, down]
}

#[allow(clippy::too_many_arguments)]
fn send(
    inline: &InlineControl,
    plan: &InlinePlan,
    batch: &[UsageRecord],
    t: &mut Target,
    buf: &mut [u8],
    sequence: &mut u32,
    wall_at_epoch_ms: u64,
    c: &UsageExportCounters,
) {
    let ids = inline.subscriber_ids(batch.iter().map(|r| (r.sub, r.sub_gen)));
    let policy = &plan.policy;
    let header = |seq: u32| Header {
        unix_secs: (SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()) as u32,
        sys_uptime_ms: 0,
        sequence: seq,
        domain_id: t.domain_id,
    };
    let mut pending: Vec<(ExportRecord, usize)> = Vec::with_capacity(batch.len() * 2);
    for (i, r) in batch.iter().enumerate() {
        for d in directions(r, wall_at_epoch_ms) {
            if d.packets > 0 {
                pending.push((d, i));
            }
        }
    }
    let mut k = 0;
    while k < pending.len() {
        // One message: templates when due, then as many records as fit.
        let due = t.last_templates.is_none_or(|at| at.elapsed() >= t.refresh);
        let Ok(mut m) = MessageBuilder::new(Version::Ipfix, buf, &header(*sequence)) else {
            return;
        };
        if due && m.add_usage_templates().is_ok() {
            t.last_templates = Some(Instant::now());
        }
        let mut n = 0u32;
        while k < pending.len() {
            let (rec, i) = &pending[k];
            let r = &batch[*i];
            let names = UsageNames {
                application: policy.app_name(r.app),
                service: policy.services.name(r.service),
                subscriber: ids[*i].as_deref().unwrap_or(""),
            };
            if !m.add_usage_record(rec, &names) {
                break;
            }
            n += 1;
            k += 1;
        }
        if n == 0 && !due {
            // A record that fits no message cannot be (names are capped).
            k += 1;
            continue;
        }
        let len = m.finish();
        match t.sock.send(&buf[..len]) {
            Ok(_) => {
                c.messages.fetch_add(1, Ordering::Relaxed);
                c.records.fetch_add(n.into(), Ordering::Relaxed);
            }
            Err(_) => {
                c.send_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        *sequence = sequence.wrapping_add(n);
    }
}
