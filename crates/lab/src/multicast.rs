//! RFC 3918 multicast procedure (`type: multicast`). See
//! `docs/methodology-multicast.md` and `docs/lab.md`.
//!
//! Ports: sources (uplinks) are tester ports `0..sources`, receivers the
//! `receivers` ports after them. Every source sends to every group (one
//! stream per (source, group), IPv4/UDP to the group, destination MAC
//! `01:00:5e` + the group's low 23 bits). Before every trial each receiver
//! sends IGMP membership reports for its groups (built here as raw
//! frames); the engine counts every receiver's copy of every frame on its
//! own (unique, duplicates, latency, first and last arrival) and frames of
//! a group on a port that did not join it ("leaked"). Throughput is the
//! RFC 2544 bisection of `procs`; the join / leave delay trial sends the
//! reports and leaves while the traffic runs.

use crate::engine::{Limit, Stream, TrialResult, TrialSpec};
use crate::hist::LatencyStats;
pub use crate::mcsetup::{KernelMroutes, McPattern};
use crate::netns::{interrupted, sleep_checked};
use crate::plan::{FilterMode, FrameSize, Multicast, Test};
use crate::procs::Ctx;
use crate::report::{ResultRow, TrialRecord};
use crate::sig::{host_ip, host_mac};
use crate::sig::{ip_checksum, mono_ns, Arrival, Mac, L3, TTL};
use crate::LabError;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;

/// IGMPv3 reports go to all IGMPv3-capable routers (RFC 3376 section 4.2.14).
pub const IGMPV3_ROUTERS: [u8; 4] = [224, 0, 0, 22];
/// IGMPv2 leaves go to all routers (RFC 2236 section 3).
pub const ALL_ROUTERS: [u8; 4] = [224, 0, 0, 2];

/// IGMPv3 group record types (RFC 3376 section 4.2.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Record {
    /// MODE_IS_INCLUDE.
    IsInclude = 1,
    /// MODE_IS_EXCLUDE.
    IsExclude = 2,
    /// CHANGE_TO_INCLUDE_MODE.
    ToInclude = 3,
    /// CHANGE_TO_EXCLUDE_MODE.
    ToExclude = 4,
    /// ALLOW_NEW_SOURCES.
    Allow = 5,
    /// BLOCK_OLD_SOURCES.
    Block = 6,
}

/// One IGMPv3 group record: type, group, sources.
pub type GroupRecord = (Record, [u8; 4], Vec<[u8; 4]>);

/// Ethernet multicast address of an IPv4 group: 01:00:5e + low 23 bits.
pub fn group_mac(g: [u8; 4]) -> Mac {
    [0x01, 0x00, 0x5e, g[1] & 0x7f, g[2], g[3]]
}

/// Ethernet + IPv4 header with the Router Alert option (RFC 2113), TTL 1,
/// protocol 2 (IGMP), around an IGMP message; padded to 60 bytes.
fn igmp_frame(src_mac: Mac, src_ip: [u8; 4], dst_ip: [u8; 4], igmp: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(38 + igmp.len());
    f.extend_from_slice(&group_mac(dst_ip));
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let total = (24 + igmp.len()) as u16;
    let mut ip = [0u8; 24];
    ip[0] = 0x46; // version 4, 6 words: 20 bytes + 4 of Router Alert
    ip[1] = 0xc0; // internetwork control, as hosts send IGMP
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 1; // TTL 1: IGMP never leaves the link
    ip[9] = 2;
    ip[12..16].copy_from_slice(&src_ip);
    ip[16..20].copy_from_slice(&dst_ip);
    ip[20..24].copy_from_slice(&[0x94, 0x04, 0x00, 0x00]); // Router Alert
    let c = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(igmp);
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

fn set_checksum(igmp: &mut [u8]) {
    igmp[2..4].copy_from_slice(&[0, 0]);
    let c = ip_checksum(igmp);
    igmp[2..4].copy_from_slice(&c.to_be_bytes());
}

/// Largest IGMP message in one 1500-byte IP packet (24-byte header).
const MAX_IGMP: usize = 1500 - 24;

/// IGMPv3 membership reports (type 0x22, to 224.0.0.22) from `src_mac` /
/// `src_ip` carrying `records` (type, group, sources); as many frames as
/// needed to keep each within a 1500-byte packet.
pub fn igmpv3_reports(src_mac: Mac, src_ip: [u8; 4], records: &[GroupRecord]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut msg: Vec<u8> = Vec::new();
    let mut n = 0u16;
    let flush = |msg: &mut Vec<u8>, n: &mut u16, frames: &mut Vec<Vec<u8>>| {
        if *n == 0 {
            return;
        }
        msg[6..8].copy_from_slice(&n.to_be_bytes());
        set_checksum(msg);
        frames.push(igmp_frame(src_mac, src_ip, IGMPV3_ROUTERS, msg));
        msg.clear();
        *n = 0;
    };
    for (kind, group, sources) in records {
        let rec_len = 8 + 4 * sources.len();
        if msg.len() + rec_len > MAX_IGMP {
            flush(&mut msg, &mut n, &mut frames);
        }
        if msg.is_empty() {
            msg.extend_from_slice(&[0x22, 0, 0, 0, 0, 0, 0, 0]);
        }
        msg.push(*kind as u8);
        msg.push(0); // aux data length
        msg.extend_from_slice(&(sources.len() as u16).to_be_bytes());
        msg.extend_from_slice(group);
        for s in sources {
            msg.extend_from_slice(s);
        }
        n += 1;
    }
    flush(&mut msg, &mut n, &mut frames);
    frames
}

/// IGMPv2 membership report (type 0x16, sent to the group) or leave
/// (type 0x17, sent to 224.0.0.2).
pub fn igmpv2(src_mac: Mac, src_ip: [u8; 4], group: [u8; 4], leave: bool) -> Vec<u8> {
    let mut m = [0u8; 8];
    m[0] = if leave { 0x17 } else { 0x16 };
    m[4..8].copy_from_slice(&group);
    set_checksum(&mut m);
    let dst = if leave { ALL_ROUTERS } else { group };
    igmp_frame(src_mac, src_ip, dst, &m)
}

/// The frames receiver `r` sends to join (`leave = false`) or leave all
/// its groups: IGMPv3 ALLOW(sources) / BLOCK(sources) in include mode,
/// TO_EX({}) / TO_IN({}) in exclude mode (RFC 3376 section 5.1's
/// state-change records), or one IGMPv2 report / leave per group.
pub fn membership_frames(m: &Multicast, r: usize, leave: bool) -> Vec<Vec<u8>> {
    let p = McPattern::of(m);
    let port = p.receiver_port(r);
    let (mac, ip) = (host_mac(port), host_ip(port));
    let groups = p.groups_of(r);
    if m.igmp_version == 2 {
        return groups
            .iter()
            .map(|&g| igmpv2(mac, ip, p.group(g), leave))
            .collect();
    }
    let srcs = p.source_ips();
    let records: Vec<GroupRecord> = groups
        .iter()
        .map(|&g| {
            let ga = p.group(g);
            match (m.filter, leave) {
                (FilterMode::Include, false) => (Record::Allow, ga, srcs.clone()),
                (FilterMode::Include, true) => (Record::Block, ga, srcs.clone()),
                (FilterMode::Exclude, false) => (Record::ToExclude, ga, Vec::new()),
                (FilterMode::Exclude, true) => (Record::ToInclude, ga, Vec::new()),
            }
        })
        .collect();
    igmpv3_reports(mac, ip, &records)
}

/// One receiver's share of a trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReceiverSummary {
    /// Tester port name (`t5`).
    pub port: String,
    /// Streams ((source, group) pairs) it joined.
    pub streams: usize,
    /// Frames of its groups sent.
    pub expected: u64,
    /// Unique frames of its groups received.
    pub received: u64,
    /// `expected − received`.
    pub lost: i64,
    /// `lost / expected`.
    pub loss_ratio: f64,
    /// Second copies of frames of its groups.
    pub duplicated: u64,
    /// Frames of groups it did not join (must be 0).
    pub leaked: u64,
    /// Frames of its groups that failed the arrival check.
    pub malformed: u64,
    /// Latency over the frames it received of its groups.
    pub latency: LatencyStats,
}

/// Per receiver port (in `ports` order): what it should have received
/// (frames sent to the streams listing it), what it did, duplicates, and
/// frames of streams it is not a receiver of (leaked).
pub fn per_receiver(r: &TrialResult, ports: &[usize]) -> Vec<ReceiverSummary> {
    ports
        .iter()
        .map(|&p| {
            let mut s = ReceiverSummary {
                port: format!("t{}", p + 1),
                ..Default::default()
            };
            for st in &r.streams {
                let mine = st
                    .receivers
                    .as_ref()
                    .and_then(|v| v.iter().find(|c| c.port == p));
                match mine {
                    Some(c) => {
                        s.streams += 1;
                        s.expected += st.sent;
                        s.received += c.received;
                        s.duplicated += c.duplicated;
                        s.malformed += c.malformed;
                    }
                    None if st.tx != p => s.leaked += st.per_port.get(p).copied().unwrap_or(0),
                    None => {}
                }
            }
            s.lost = s.expected as i64 - s.received as i64;
            s.loss_ratio = if s.expected > 0 {
                s.lost.max(0) as f64 / s.expected as f64
            } else {
                0.0
            };
            s.latency = r
                .per_port_latency
                .as_ref()
                .and_then(|v| v.get(p).copied())
                .unwrap_or_default();
            s
        })
        .collect()
}

/// Frames of any stream seen on the source ports other than its own
/// (a source that is not a receiver must get nothing).
pub fn leaked_to_sources(r: &TrialResult, sources: usize) -> u64 {
    r.streams
        .iter()
        .map(|st| {
            (0..sources)
                .filter(|&p| p != st.tx)
                .map(|p| st.per_port.get(p).copied().unwrap_or(0))
                .sum::<u64>()
        })
        .sum()
}

/// min / avg / max of a list.
fn mam(v: &[f64]) -> serde_json::Value {
    if v.is_empty() {
        return serde_json::Value::Null;
    }
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let avg = v.iter().sum::<f64>() / v.len() as f64;
    json!({"min": min, "avg": avg, "max": max})
}

/// The receivers summed up: loss and latency spread across receivers.
pub fn receivers_summary(rs: &[ReceiverSummary]) -> serde_json::Value {
    let with = |f: &dyn Fn(&ReceiverSummary) -> f64| -> Vec<f64> { rs.iter().map(f).collect() };
    let lat: Vec<&ReceiverSummary> = rs.iter().filter(|r| r.latency.samples > 0).collect();
    json!({
        "receivers": rs.len(),
        "loss_ratio": mam(&with(&|r| r.loss_ratio)),
        "lost": rs.iter().map(|r| r.lost).sum::<i64>(),
        "leaked": rs.iter().map(|r| r.leaked).sum::<u64>(),
        "duplicated": rs.iter().map(|r| r.duplicated).sum::<u64>(),
        "malformed": rs.iter().map(|r| r.malformed).sum::<u64>(),
        "latency_avg_us": mam(&lat.iter().map(|r| r.latency.avg_ns as f64 / 1e3).collect::<Vec<_>>()),
        "latency_p99_us": mam(&lat.iter().map(|r| r.latency.p99_ns as f64 / 1e3).collect::<Vec<_>>()),
        "latency_max_us": mam(&lat.iter().map(|r| r.latency.max_ns as f64 / 1e3).collect::<Vec<_>>()),
    })
}

/// Frames/s of `sources` ports at `mbps` each with frames of `avg` bytes
/// (FCS included, 20 bytes of preamble and gap on the wire).
pub fn line_rate_fps(mbps: f64, avg: f64, sources: usize) -> f64 {
    mbps * 1e6 / ((avg + 20.0) * 8.0) * sources as f64
}

/// Join and leave delays of one (receiver, stream) pair, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Delay {
    /// First frame after the join report; None if none arrived.
    pub join_ms: Option<f64>,
    /// Last frame after the leave; None if none arrived.
    pub leave_ms: Option<f64>,
}

/// Delays of a join/leave trial: for every stream and each of its
/// receivers, first arrival − that receiver's join time and last arrival
/// − its leave time (CLOCK_MONOTONIC ns, indexed by tester port).
pub fn delays(r: &TrialResult, join_at: &[u64], leave_at: &[u64]) -> Vec<Delay> {
    let ms = |a: u64, b: u64| (a as f64 - b as f64) / 1e6;
    let mut v = Vec::new();
    for st in &r.streams {
        for c in st.receivers.iter().flatten() {
            let (Some(&j), Some(&l)) = (join_at.get(c.port), leave_at.get(c.port)) else {
                continue;
            };
            let got = c.received > 0 && c.first_rx != 0;
            v.push(Delay {
                join_ms: got.then(|| ms(c.first_rx, j)),
                leave_ms: got.then(|| ms(c.last_rx, l)),
            });
        }
    }
    v
}

impl Ctx<'_> {
    /// Every receiver's membership reports, twice (hosts repeat
    /// state-change reports: RFC 3376's robustness variable); `leave`
    /// sends the leaves instead.
    pub(crate) fn mc_membership(&mut self, m: &Multicast, leave: bool) -> Result<(), LabError> {
        for _ in 0..2 {
            for r in 0..m.receivers {
                let frames = membership_frames(m, r, leave);
                let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
                self.tester
                    .send_raw(McPattern::of(m).receiver_port(r), &refs)?;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        Ok(())
    }

    /// One stream per (source, group), to that group's receivers.
    fn mc_streams(&self, m: &Multicast, fs: &FrameSize) -> Vec<Stream> {
        let p = McPattern::of(m);
        // Routed multicast keeps the group MAC and decrements the TTL.
        let ttl = if self.dut.routes_packets() {
            TTL - 1
        } else {
            TTL
        };
        let mut v = Vec::new();
        for s in 0..p.sources {
            for g in 0..p.groups {
                let ga = p.group(g);
                let rx: Vec<usize> = p
                    .members(g)
                    .into_iter()
                    .map(|r| p.receiver_port(r))
                    .collect();
                v.push(Stream {
                    tx: s,
                    expect: None,
                    also: None,
                    src: host_mac(s),
                    src_count: 1,
                    dst: group_mac(ga),
                    dst_count: 1,
                    sizes: fs.sizes.clone(),
                    l3: Some(Arc::new([L3::V4 {
                        src: host_ip(s),
                        dst: ga,
                    }])),
                    arrival: Some(Arrival {
                        dst_mac: group_mac(ga),
                        ttl,
                        vlan: None,
                    }),
                    vlan: None,
                    receivers: Some(rx.into()),
                });
            }
        }
        v
    }

    /// Run a multicast test at frame size `fs`: throughput (bisection, or
    /// `rate` fixed), per-receiver accounting of the reported trial, and
    /// the join / leave delay trial when asked for.
    pub(crate) fn multicast(
        &mut self,
        t: &Test,
        fs: &FrameSize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        let m = t
            .multicast
            .as_ref()
            .ok_or_else(|| LabError::Other("multicast test without parameters".into()))?;
        let streams = self.mc_streams(m, fs);
        let ports = m.sources + m.receivers;
        match t.rate {
            None => self.throughput(t, &streams, ports, row)?,
            Some(rate) => {
                let rates: Vec<Option<f64>> = (0..ports)
                    .map(|p| (p < m.sources).then_some(rate))
                    .collect();
                for _ in 0..t.trials {
                    let r = self.trial(
                        t,
                        &streams,
                        rates.clone(),
                        Limit::Duration(t.trial_duration),
                        ports,
                    )?;
                    let ok = crate::procs::pass_rate(&r, t);
                    row.trials
                        .push(TrialRecord::new("multicast", Some(rate), &r, ok));
                    row.throughput_fps = Some(r.offered_fps);
                    row.loss_ratio = Some(r.loss_ratio);
                    row.latency = Some(r.latency);
                    row.generator_limited = r.generator_limited;
                    if !ok {
                        row.notes.push(format!(
                            "frames lost at {rate} frames/s per source (loss ratio {:.6})",
                            r.loss_ratio
                        ));
                    }
                }
                row.l2_mbps = Some(r_l2(row.throughput_fps, fs));
            }
        }
        self.mc_summary(t, m, fs, row);
        if m.join_leave {
            if self.dut.setup.multicast_static() {
                row.notes.push(
                    "join/leave delay not measured: this DUT forwards by static multicast routes, not by IGMP"
                        .into(),
                );
            } else {
                self.mc_delays(t, m, &streams, row)?;
            }
        }
        Ok(())
    }

    /// Per-receiver figures from the reported trial (the passing one at
    /// the result; the first trial when nothing passed).
    fn mc_summary(&self, t: &Test, m: &Multicast, fs: &FrameSize, row: &mut ResultRow) {
        let p = McPattern::of(m);
        let ports: Vec<usize> = (0..m.receivers).map(|r| p.receiver_port(r)).collect();
        let reported = row
            .trials
            .iter()
            .rev()
            .find(|r| r.pass)
            .or(row.trials.first());
        let Some(rec) = reported else { return };
        let rs = per_receiver(&rec.result, &ports);
        let to_sources = leaked_to_sources(&rec.result, m.sources);
        let mut summary = receivers_summary(&rs);
        summary["leaked_to_sources"] = to_sources.into();
        let leaked: u64 = rs.iter().map(|r| r.leaked).sum::<u64>() + to_sources;
        let dups: u64 = rs.iter().map(|r| r.duplicated).sum();
        let any_leak = row.trials.iter().any(|r| r.result.flooded > 0);
        let fps = row.throughput_fps.unwrap_or(0.0);
        if t.rate.is_none() && fps == 0.0 {
            let lowest = row
                .trials
                .iter()
                .filter_map(|r| r.target)
                .fold(f64::INFINITY, f64::min);
            if lowest.is_finite() {
                row.notes.push(format!(
                    "no trial passed: throughput below {lowest:.0} frames/s per source, the lowest rate tried (more search.max-trials go lower)"
                ));
            }
        }
        let lr = line_rate_fps(m.line_rate_mbps, fs.average(), m.sources);
        let memberships: usize = (0..m.groups).map(|g| p.members(g).len()).sum();
        let fanout = memberships as f64 / m.groups as f64;
        // Correctness, apart from the rate: nothing leaked, nothing doubled.
        row.pass = Some(leaked == 0 && dups == 0 && !any_leak);
        if leaked > 0 || any_leak {
            row.notes.push(format!(
                "frames leaked to ports that did not join their group ({leaked} in the reported trial)"
            ));
        }
        let analyzer = row
            .trials
            .iter()
            .filter(|r| r.result.tester_rx_drops > 0)
            .count();
        if analyzer > 0 {
            // Every offered frame arrives receivers-per-group times: the
            // analyzer's receive thread, not the DUT, may be the limit.
            row.notes.push(format!(
                "the analyzer's sockets dropped frames in {analyzer} trial(s) (test-bed limit: it receives {fanout:.1} copies of every frame); such trials count as failed"
            ));
        }
        if dups > 0 {
            row.notes
                .push(format!("{dups} duplicated frames at the receivers"));
        }
        let extra = json!({
            "multicast": {
                "sources": m.sources,
                "receivers": m.receivers,
                "groups": m.groups,
                "replication": m.replication.map_or(json!("all"), |k| json!(k)),
                "filter_mode": m.filter,
                "igmp_version": m.igmp_version,
                "first_group": std::net::Ipv4Addr::from(m.first_group).to_string(),
                "receivers_per_group": fanout,
                "layer": if t.layer == Some(3) || self.dut.routes_packets() { 3 } else { 2 },
            },
            "line_rate_mbps": m.line_rate_mbps,
            "line_rate_fps": lr,
            "pct_line_rate": if lr > 0.0 { fps / lr * 100.0 } else { 0.0 },
            "replicated_fps": fps * fanout,
            "reported_trial": rec.role,
            "summary": summary,
            "receivers": rs,
        });
        merge(&mut row.detail, extra);
    }

    /// RFC 3918 section 6: group join delay and leave delay. All receivers
    /// leave first; constant traffic at `delay-rate` per source; after
    /// 0.5 s every receiver sends its reports (time taken per receiver),
    /// 1 s later its leaves; traffic goes on for `leave-wait`. Join delay =
    /// first frame of a (source, group) at a receiver − its report; leave
    /// delay = last frame − its leave. Resolution: one frame interval of
    /// a stream (groups / delay-rate).
    fn mc_delays(
        &mut self,
        t: &Test,
        m: &Multicast,
        streams: &[Stream],
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        const JOIN_AT: f64 = 0.5;
        const HOLD: f64 = 1.0;
        let p = McPattern::of(m);
        let nports = m.sources + m.receivers;
        self.mc_membership(m, true)?;
        sleep_checked(t.learn_wait.max(m.leave_wait))?;
        let spec = TrialSpec {
            streams: streams.to_vec(),
            rates: (0..nports)
                .map(|q| (q < m.sources).then_some(m.delay_rate))
                .collect(),
            limit: Limit::Duration(JOIN_AT + HOLD + m.leave_wait),
            drain: t.drain,
            burst: t.burst,
        };
        let joins: Vec<Vec<Vec<u8>>> = (0..m.receivers)
            .map(|r| membership_frames(m, r, false))
            .collect();
        let leaves: Vec<Vec<Vec<u8>>> = (0..m.receivers)
            .map(|r| membership_frames(m, r, true))
            .collect();
        self.progress.label(format!(
            "{} {} join/leave delay",
            self.dut.spec.name, row.test
        ));
        let (res, times) = self.tester.run_with_raw(&spec, |ctl, raw| {
            let t0 = ctl
                .wait_t0()
                .ok_or_else(|| LabError::Other("transmit thread did not start".into()))?;
            // Each receiver's frames at `when` s after the first frame;
            // the time taken just before its send, per tester port.
            let send_at = |frames: &[Vec<Vec<u8>>], when: f64| -> Result<Vec<u64>, LabError> {
                let due = t0 + (when * 1e9) as u64;
                while mono_ns() < due && !interrupted() {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                let mut at = vec![0u64; nports];
                for (r, f) in frames.iter().enumerate() {
                    let port = p.receiver_port(r);
                    let refs: Vec<&[u8]> = f.iter().map(|x| &x[..]).collect();
                    at[port] = mono_ns();
                    raw.send(port, &refs)?;
                }
                Ok(at)
            };
            let join_at = send_at(&joins, JOIN_AT)?;
            let leave_at = send_at(&leaves, JOIN_AT + HOLD)?;
            Ok::<_, LabError>((join_at, leave_at))
        })?;
        let (join_at, leave_at) = times?;
        self.progress
            .advance(JOIN_AT + HOLD + m.leave_wait + t.drain + t.learn_wait);
        let ds = delays(&res, &join_at, &leave_at);
        let joined: Vec<f64> = ds.iter().filter_map(|d| d.join_ms).collect();
        let left: Vec<f64> = ds.iter().filter_map(|d| d.leave_ms).collect();
        let never = ds.iter().filter(|d| d.join_ms.is_none()).count();
        let early = joined.iter().filter(|&&x| x < 0.0).count();
        // Traffic lasted leave-wait after the leaves: a last frame within
        // the final 10 % of it means the group was never left.
        let not_left = left
            .iter()
            .filter(|&&x| x > m.leave_wait * 1e3 * 0.9)
            .count();
        let resolution_ms = m.groups as f64 / m.delay_rate * 1e3;
        if never > 0 {
            row.notes.push(format!(
                "join delay: {never} (receiver, stream) pairs got no frame after joining"
            ));
        }
        if early > 0 {
            row.notes.push(format!(
                "join delay: {early} pairs received frames before their join (flooded or stale membership)"
            ));
        }
        if not_left > 0 {
            row.notes.push(format!(
                "leave delay: {not_left} pairs still received frames at the end of the trial (never left)"
            ));
        }
        row.trials.push(TrialRecord::new(
            "join-leave",
            Some(m.delay_rate),
            &res,
            never == 0 && early == 0 && not_left == 0,
        ));
        merge(
            &mut row.detail,
            json!({
                "join_delay_ms": mam(&joined),
                "leave_delay_ms": mam(&left),
                "delay_resolution_ms": resolution_ms,
                "delay_rate_fps": m.delay_rate,
                "delay_pairs": ds.len(),
                "never_joined": never,
                "joined_early": early,
                "never_left": not_left,
            }),
        );
        // Rejoin so the DUT's state matches the next test's expectations.
        self.mc_membership(m, false)?;
        Ok(())
    }
}

fn r_l2(fps: Option<f64>, fs: &FrameSize) -> f64 {
    fps.unwrap_or(0.0) * (fs.average() - 4.0) * 8.0 / 1e6
}

fn merge(detail: &mut serde_json::Value, extra: serde_json::Value) {
    if !detail.is_object() {
        *detail = json!({});
    }
    if let (Some(d), Some(e)) = (detail.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            d.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{ReceiverCount, StreamResult};

    fn ones_complement_ok(b: &[u8]) -> bool {
        ip_checksum(b) == 0
    }

    fn mc(sources: usize, receivers: usize, groups: u32, rep: Option<usize>) -> Multicast {
        Multicast {
            sources,
            receivers,
            groups,
            replication: rep,
            filter: FilterMode::Include,
            igmp_version: 3,
            first_group: [232, 1, 0, 1],
            join_leave: false,
            delay_rate: 10_000.0,
            leave_wait: 3.0,
            line_rate_mbps: 1000.0,
        }
    }

    #[test]
    fn igmpv3_report_is_well_formed() {
        let srcs = vec![[198, 18, 1, 2], [198, 18, 2, 2]];
        let f = igmpv3_reports(
            host_mac(4),
            host_ip(4),
            &[
                (Record::Allow, [232, 1, 0, 1], srcs.clone()),
                (Record::ToExclude, [239, 129, 2, 3], vec![]),
            ],
        );
        assert_eq!(f.len(), 1);
        let f = &f[0];
        // Ethernet: to 01:00:5e:00:00:16 (224.0.0.22), IPv4.
        assert_eq!(&f[0..6], &[0x01, 0, 0x5e, 0, 0, 0x16]);
        assert_eq!(&f[6..12], &host_mac(4));
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = &f[14..38];
        assert_eq!(ip[0], 0x46, "IHL 6: Router Alert option");
        assert_eq!(ip[8], 1, "TTL 1");
        assert_eq!(ip[9], 2, "protocol IGMP");
        assert_eq!(&ip[16..20], &IGMPV3_ROUTERS);
        assert_eq!(&ip[20..24], &[0x94, 0x04, 0, 0], "Router Alert");
        assert!(ones_complement_ok(ip), "IPv4 header checksum");
        let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        let igmp = &f[38..14 + total];
        assert_eq!(igmp[0], 0x22);
        assert!(ones_complement_ok(igmp), "IGMP checksum");
        assert_eq!(u16::from_be_bytes([igmp[6], igmp[7]]), 2, "records");
        // Record 1: ALLOW, 2 sources, group, sources.
        assert_eq!(igmp[8], 5);
        assert_eq!(u16::from_be_bytes([igmp[10], igmp[11]]), 2);
        assert_eq!(&igmp[12..16], &[232, 1, 0, 1]);
        assert_eq!(&igmp[16..20], &[198, 18, 1, 2]);
        assert_eq!(&igmp[20..24], &[198, 18, 2, 2]);
        // Record 2: TO_EX {}.
        assert_eq!(igmp[24], 4);
        assert_eq!(u16::from_be_bytes([igmp[26], igmp[27]]), 0);
        assert_eq!(&igmp[28..32], &[239, 129, 2, 3]);
        assert_eq!(igmp.len(), 32);
    }

    #[test]
    fn igmpv3_reports_split_at_the_mtu() {
        let srcs: Vec<[u8; 4]> = (0..32).map(|i| [198, 18, i, 2]).collect();
        let recs: Vec<_> = (0..100u8)
            .map(|g| (Record::IsInclude, [232, 1, 0, g], srcs.clone()))
            .collect();
        let frames = igmpv3_reports(host_mac(1), host_ip(1), &recs);
        assert!(frames.len() > 1);
        let mut n = 0;
        for f in &frames {
            assert!(f.len() <= 1514, "{}", f.len());
            assert!(ones_complement_ok(&f[14..38]));
            let total = u16::from_be_bytes([f[16], f[17]]) as usize;
            assert!(ones_complement_ok(&f[38..14 + total]));
            n += u16::from_be_bytes([f[44], f[45]]) as usize;
        }
        assert_eq!(n, 100);
    }

    #[test]
    fn igmpv2_report_and_leave() {
        let g = [239, 1, 0, 7];
        let r = igmpv2(host_mac(2), host_ip(2), g, false);
        assert_eq!(&r[0..6], &group_mac(g));
        assert_eq!(r[14], 0x46);
        assert_eq!(&r[30..34], &g, "report goes to the group");
        assert_eq!(r[38], 0x16);
        assert!(ones_complement_ok(&r[14..38]));
        assert!(ones_complement_ok(&r[38..46]));
        assert_eq!(r.len(), 60, "padded to the minimum frame");
        let l = igmpv2(host_mac(2), host_ip(2), g, true);
        assert_eq!(&l[30..34], &ALL_ROUTERS);
        assert_eq!(l[38], 0x17);
        assert_eq!(&l[42..46], &g);
        assert!(ones_complement_ok(&l[38..46]));
    }

    #[test]
    fn group_mac_keeps_low_23_bits() {
        assert_eq!(group_mac([239, 129, 2, 3]), [1, 0, 0x5e, 1, 2, 3]);
        assert_eq!(group_mac([232, 1, 0, 1]), [1, 0, 0x5e, 1, 0, 1]);
    }

    #[test]
    fn membership_patterns() {
        let all = McPattern::of(&mc(1, 4, 3, None));
        assert_eq!(all.members(2), vec![0, 1, 2, 3]);
        assert_eq!(all.groups_of(1), vec![0, 1, 2]);
        assert_eq!(all.group(2), [232, 1, 0, 3]);
        let rr = McPattern::of(&mc(8, 24, 12, Some(2)));
        // Each group 2 receivers, round robin: every receiver exactly once.
        let mut count = [0usize; 24];
        for g in 0..12 {
            let m = rr.members(g);
            assert_eq!(m.len(), 2);
            for r in m {
                count[r] += 1;
            }
        }
        assert!(count.iter().all(|&c| c == 1), "{count:?}");
        assert_eq!(rr.receiver_port(0), 8);
        let routes = rr.routes();
        assert_eq!(routes.len(), 8 * 12);
        assert_eq!(routes[0].2, vec![8, 9]);
        // Membership frames: include = ALLOW with every source.
        let m = mc(2, 2, 2, None);
        let f = membership_frames(&m, 1, false);
        assert_eq!(f.len(), 1);
        assert_eq!(&f[0][6..12], &host_mac(3));
        assert_eq!(f[0][46], Record::Allow as u8);
        assert_eq!(u16::from_be_bytes([f[0][48], f[0][49]]), 2);
        let f = membership_frames(&m, 1, true);
        assert_eq!(f[0][46], Record::Block as u8);
        let mut v2 = m.clone();
        v2.igmp_version = 2;
        assert_eq!(membership_frames(&v2, 0, false).len(), 2);
    }

    fn sr(
        id: usize,
        tx: usize,
        sent: u64,
        per_port: Vec<u64>,
        rx: &[(usize, u64, u64)],
    ) -> StreamResult {
        StreamResult {
            id,
            tx,
            expect: None,
            sent,
            received: rx.iter().map(|r| r.1).sum(),
            lost: 0,
            duplicated: rx.iter().map(|r| r.2).sum(),
            reordered: 0,
            per_port,
            flooded: 0,
            malformed: 0,
            latency: LatencyStats::default(),
            received_also: None,
            bins: None,
            mark: None,
            receivers: Some(
                rx.iter()
                    .map(|&(port, received, duplicated)| ReceiverCount {
                        port,
                        received,
                        duplicated,
                        malformed: 0,
                        first_rx: 1_000_000 + port as u64,
                        last_rx: 5_000_000,
                    })
                    .collect(),
            ),
        }
    }

    fn trial(streams: Vec<StreamResult>) -> TrialResult {
        TrialResult {
            nonce: 1,
            intended_fps: 0.0,
            offered_fps: 0.0,
            tx_seconds: 1.0,
            sent: 0,
            received: 0,
            lost: 0,
            loss_ratio: 0.0,
            duplicated: 0,
            reordered: 0,
            flooded: 0,
            malformed: 0,
            per_port_rx: vec![],
            per_port_tx: vec![],
            tester_rx_drops: 0,
            generator_limited: false,
            tx_refused: 0,
            tx_usage: Default::default(),
            tx_late_ns: None,
            latency: LatencyStats::default(),
            streams,
            mark_ns: None,
            tx_stall: None,
            per_port_latency: None,
        }
    }

    #[test]
    fn per_receiver_accounting() {
        // Ports: 0 source; 1, 2, 3 receivers. Group A (stream 0) joined by
        // 1 and 2; group B (stream 1) by 3. Port 3 also got 5 frames of A
        // (leaked), port 2 lost 10 of A and got 4 twice.
        let r = trial(vec![
            sr(0, 0, 100, vec![0, 100, 94, 5], &[(1, 100, 0), (2, 90, 4)]),
            sr(1, 0, 50, vec![0, 0, 0, 50], &[(3, 50, 0)]),
        ]);
        let rs = per_receiver(&r, &[1, 2, 3]);
        assert_eq!(rs[0].port, "t2");
        assert_eq!(
            (rs[0].expected, rs[0].received, rs[0].lost, rs[0].leaked),
            (100, 100, 0, 0)
        );
        assert_eq!(
            (rs[1].expected, rs[1].received, rs[1].lost, rs[1].duplicated),
            (100, 90, 10, 4)
        );
        assert!((rs[1].loss_ratio - 0.1).abs() < 1e-9);
        assert_eq!((rs[2].expected, rs[2].received, rs[2].leaked), (50, 50, 5));
        assert_eq!(rs[2].streams, 1);
        let s = receivers_summary(&rs);
        assert_eq!(s["leaked"], 5);
        assert_eq!(s["lost"], 10);
        assert_eq!(s["duplicated"], 4);
        assert_eq!(s["loss_ratio"]["max"], 0.1);
        assert_eq!(leaked_to_sources(&r, 1), 0);
        // Delays: join at 0.5 ms, leave at 2 ms (ns clock).
        let mut join = vec![0u64; 4];
        let mut leave = vec![0u64; 4];
        for p in 1..4 {
            join[p] = 500_000;
            leave[p] = 2_000_000;
        }
        let d = delays(&r, &join, &leave);
        assert_eq!(d.len(), 3);
        assert!((d[0].join_ms.unwrap() - 0.500001).abs() < 1e-9);
        assert!((d[0].leave_ms.unwrap() - 3.0).abs() < 1e-9);
    }

    #[test]
    fn line_rate() {
        // 64-byte frames at 1 GbE: 1,488,095 frames/s per port.
        let f = line_rate_fps(1000.0, 64.0, 1);
        assert!((f - 1_488_095.2).abs() < 1.0, "{f}");
        assert!((line_rate_fps(1000.0, 64.0, 8) - 8.0 * f).abs() < 1e-3);
    }
}
