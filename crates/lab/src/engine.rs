//! Generator and analyzer: one paced transmit thread for all tester ports,
//! one receive thread for all tester ports, exact end-of-trial counts.
//!
//! A trial sends streams of signed frames (see [`crate::sig`]); each stream
//! leaves one tester port and is expected on at most one other. The
//! analyzer counts, per stream, frames received on the expected port
//! (unique), lost (`sent − received`, after the drain), duplicated,
//! reordered, latency, and frames seen on any other port (flooded). Only
//! frames with the current trial's nonce count.

use crate::hist::{Histogram, LatencyStats};
use crate::netns::{in_netns, interrupted};
use crate::pktsock::{poll_any, PacketSocket, RxBufs, BATCH};
use crate::sig::{
    build_headers, build_l2_tagged, build_l3_tagged, finish, finish_tagged, locate_at, mac_add,
    mono_ns, neighbour_reply, write_transport, Arrival, FlowProto, Mac, NewFlows, Signature, L3,
    MIN_FRAME_V6, SIG_LEN,
};
use crate::LabError;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// One stream of test frames.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Transmitting tester port (0-based index).
    pub tx: usize,
    /// Tester port the frames should arrive on (None: flooded, count everywhere).
    pub expect: Option<usize>,
    /// A second port where frames count as received too (convergence: the
    /// backup uplink). A frame counts once, on whichever port it reaches
    /// first; the other copy is a duplicate. Not counted as flooded.
    pub also: Option<usize>,
    /// First source MAC; frame `seq` uses `src + seq % src_count`.
    pub src: Mac,
    /// Number of distinct source MACs (≥ 1).
    pub src_count: u32,
    /// First destination MAC; frame `seq` uses `dst + seq % dst_count`.
    pub dst: Mac,
    /// Number of distinct destination MACs (≥ 1).
    pub dst_count: u32,
    /// Frame sizes with FCS, cycled per frame (one entry = fixed size; IMIX = several).
    pub sizes: Vec<u16>,
    /// Layer-3 (UDP) addresses, cycled per frame (frame `seq` uses entry
    /// `seq % len`), or None for layer-2 frames.
    pub l3: Option<Arc<[L3]>>,
    /// What frames must look like on the expected port (routed frames:
    /// TTL, destination MAC, IPv4 checksum); others count as malformed.
    pub arrival: Option<Arrival>,
    /// Multicast: every port listed receives its own copy of each frame,
    /// counted per port (unique, duplicates, first and last arrival);
    /// `expect` and `also` must be None. Expected deliveries = sent × len.
    pub receivers: Option<Arc<[usize]>>,
    /// An 802.1Q tag after the MAC addresses, VLAN id `first + seq %
    /// count` (`(first, count)`; the tag is inside the frame size), on
    /// layer-2 and layer-3 frames (L3VPN: one stream per VLAN, count 1);
    /// None: untagged.
    pub vlan: Option<(u16, u16)>,
}

/// How long each port sends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// Seconds of traffic.
    Duration(f64),
    /// Exactly this many frames per transmitting port.
    Frames(u64),
}

/// One trial.
#[derive(Debug, Clone)]
pub struct TrialSpec {
    /// Streams; a port's streams are sent round-robin.
    pub streams: Vec<Stream>,
    /// Frames/s per transmitting port (index = port); None = as fast as possible.
    pub rates: Vec<Option<f64>>,
    /// Trial length.
    pub limit: Limit,
    /// Seconds to keep receiving after the last frame was sent.
    pub drain: f64,
    /// Frames per pacing deadline (None: about 20 µs worth, 1..=32).
    pub burst: Option<usize>,
}

/// Shared with a running trial ([`Tester::run_with`]): when transmission
/// started, when to stop, and the mark (an event's start) that splits
/// frames into "sent before" and "sent after". Times are `CLOCK_MONOTONIC`
/// ns; 0 = not set.
#[derive(Debug, Default)]
pub struct TrialControl {
    /// Set by the transmit thread when it starts (first deadline).
    pub t0: AtomicU64,
    /// Pauses of the transmit thread are measured if they overlap
    /// `[mark, stall_until]` (0 = no end yet).
    pub stall_until: AtomicU64,
    /// Transmission stops at this time (in addition to the trial's limit).
    pub stop_at: AtomicU64,
    /// Frames with a transmit timestamp before it are "before the mark".
    pub mark: AtomicU64,
}

impl TrialControl {
    /// Wait (up to 5 s) until the transmit thread has started; its t0.
    pub fn wait_t0(&self) -> Option<u64> {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let t = self.t0.load(Ordering::Acquire);
            if t != 0 {
                return Some(t);
            }
            if std::time::Instant::now() > end || interrupted() {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

/// Counts split at a trial's mark (see [`TrialControl`]), per stream.
#[derive(Debug, Clone, Serialize)]
pub struct MarkSplit {
    /// Frames sent before the mark.
    pub sent_before: u64,
    /// Of those, received (unique, on the expected or `also` port).
    pub received_before: u64,
    /// Per tester port: transmit time (ns after the trial's first
    /// transmission) of the earliest-sent unique frame received there.
    pub first_tx_ns: Vec<Option<u64>>,
    /// Per tester port: transmit time of the latest-sent one.
    pub last_tx_ns: Vec<Option<u64>>,
}

/// Per-stream result.
#[derive(Debug, Clone, Serialize)]
pub struct StreamResult {
    /// Stream index.
    pub id: usize,
    /// Transmitting port index.
    pub tx: usize,
    /// Expected port index.
    pub expect: Option<usize>,
    /// Frames sent.
    pub sent: u64,
    /// Unique frames received on the expected port.
    pub received: u64,
    /// `sent − received` (negative would be a test-bed error).
    pub lost: i64,
    /// Duplicates on the expected port.
    pub duplicated: u64,
    /// Frames that arrived after a higher sequence number.
    pub reordered: u64,
    /// Frames of this stream seen on each tester port.
    pub per_port: Vec<u64>,
    /// Frames seen on ports other than the expected (and transmitting) one.
    pub flooded: u64,
    /// Frames on the expected port that failed the arrival check (wrong
    /// TTL / hop limit, destination MAC or IPv4 checksum); not received.
    pub malformed: u64,
    /// Latency on the expected port.
    pub latency: LatencyStats,
    /// Unique frames received on the `also` port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received_also: Option<u64>,
    /// Bytes received (unique, frame without FCS) per `Tester::bin_ns`
    /// of transmit time, when the tester counted them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bins: Option<Vec<u64>>,
    /// Counts split at the mark, when the trial had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mark: Option<MarkSplit>,
    /// Multicast streams: counts per receiving port, in `receivers` order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receivers: Option<Vec<ReceiverCount>>,
}

/// What one receiving port got of a multicast stream.
#[derive(Debug, Clone, Serialize)]
pub struct ReceiverCount {
    /// Tester port index.
    pub port: usize,
    /// Unique frames received.
    pub received: u64,
    /// Second and later copies of a frame.
    pub duplicated: u64,
    /// Frames that failed the arrival check (not received).
    pub malformed: u64,
    /// Receive time (`CLOCK_MONOTONIC` ns) of the first unique frame, 0 if none.
    #[serde(skip)]
    pub first_rx: u64,
    /// Receive time of the last unique frame, 0 if none.
    #[serde(skip)]
    pub last_rx: u64,
}

/// Result of one trial.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TrialResult {
    /// Nonce used.
    pub nonce: u16,
    /// Sum of intended port rates (frames/s); 0 when unpaced.
    pub intended_fps: f64,
    /// Frames actually sent per second (all ports).
    pub offered_fps: f64,
    /// Seconds from first to last transmission.
    pub tx_seconds: f64,
    /// Frames sent.
    pub sent: u64,
    /// Unique frames received on their expected ports.
    pub received: u64,
    /// `sent − received` over streams with an expected port.
    pub lost: i64,
    /// Loss ratio `lost / sent`.
    pub loss_ratio: f64,
    /// Duplicates.
    pub duplicated: u64,
    /// Reordered frames.
    pub reordered: u64,
    /// Frames seen on unexpected ports.
    pub flooded: u64,
    /// Frames on their expected port that failed the arrival check.
    pub malformed: u64,
    /// Our frames (this nonce) received per tester port.
    pub per_port_rx: Vec<u64>,
    /// Frames sent per tester port.
    pub per_port_tx: Vec<u64>,
    /// Frames the tester's own receive sockets dropped (test-bed error if > 0).
    pub tester_rx_drops: u64,
    /// True when offered < 98 % of intended.
    pub generator_limited: bool,
    /// Sends the kernel refused (ENOBUFS / EAGAIN) on the tester's
    /// transmit ports: the DUT pushed back (see
    /// `PacketSocket::take_refused`). Retried, so no frame is lost to it.
    #[serde(default)]
    pub tx_refused: u64,
    /// The transmit thread's CPU time and context switches.
    #[serde(default)]
    pub tx_usage: ThreadUsage,
    /// With `Tester::bin_ns`: per interval, how far (ns) the paced
    /// transmit thread fell behind its schedule at most (held off the
    /// CPU; it then sends the frames due at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_late_ns: Option<Vec<u64>>,
    /// Latency over all streams.
    pub latency: LatencyStats,
    /// Per-stream detail.
    pub streams: Vec<StreamResult>,
    /// The mark (ns after the first transmission), when the trial had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mark_ns: Option<u64>,
    /// With a mark: the longest pause of the transmit thread (between two
    /// sends) overlapping `[mark, stall_until]`, and when it began (ns
    /// after the first transmission). A paced generator sends every ~20 µs; a long
    /// pause means it was held off the CPU, and caught up afterwards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_stall: Option<(u64, u64)>,
    /// Multicast trials: latency per tester port over the frames it
    /// received of the streams it is a receiver of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_port_latency: Option<Vec<LatencyStats>>,
}

/// Sends frames on the tester's ports while a trial runs
/// ([`Tester::run_with_raw`]): IGMP joins and leaves at chosen moments.
pub struct RawTx<'a> {
    socks: &'a [PacketSocket],
}

impl RawTx<'_> {
    /// Send `frames` on tester port `port`; returns when the kernel took them.
    pub fn send(&self, port: usize, frames: &[&[u8]]) -> Result<(), LabError> {
        send_all(self.socks, port, frames)
    }
}

fn send_all(socks: &[PacketSocket], port: usize, frames: &[&[u8]]) -> Result<(), LabError> {
    let s = socks
        .get(port)
        .ok_or_else(|| LabError::Other(format!("no tester port {port}")))?;
    let mut done = 0;
    let mut tries = 0;
    while done < frames.len() {
        let n = s
            .send_batch(&frames[done..])
            .map_err(|e| LabError::Other(format!("send on t{}: {e}", port + 1)))?;
        done += n;
        if n == 0 {
            tries += 1;
            if tries > 1000 {
                return Err(LabError::Other(format!("t{}: send queue stuck", port + 1)));
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
    Ok(())
}

/// The tester side of a topology: one TX and one RX socket per port.
pub struct Tester {
    /// Leave CPU to the DUT: the paced transmit thread sleeps (timer slack
    /// 1 µs) whenever it is more than 30 µs ahead instead of yielding and
    /// spinning, and the receive thread naps 100 µs after a pass that found
    /// fewer than 16 frames. Convergence trials use it: on a small machine
    /// a DUT process that has to act (a failover script, `ip`, a control
    /// thread) otherwise takes its CPU from the generator exactly while the
    /// DUT converges, and the frames due then go out late, after it
    /// converged, hiding the loss. Costs latency accuracy (≤ 100 µs).
    pub gentle: bool,
    /// Every layer-3 frame a new flow of this transport (UDP, a TCP SYN,
    /// an ICMP echo request, or the three in turn): its source port or
    /// echo identifier is derived from the frame's sequence number and the
    /// trial's nonce (a UDP / TCP destination port, which the analyzer and
    /// the inline engine's `lab` signature key on, stays
    /// [`crate::sig::UDP_PORT`]; layouts: [`crate::sig::write_transport`]).
    /// Distinct within a trial for `addresses × 64,512` frames, and
    /// shifted per trial. For new-flow rates through a flow-keyed DUT
    /// (`new-flows:`, docs/lab.md).
    pub new_flows: NewFlows,
    /// Where in its layer-3 address list each stream starts (frame `seq`
    /// uses entry `(l3_offset + seq) % len`); advanced by every trial
    /// while set, so that trials shorter than the list (`flows: N`,
    /// `crate::flowset`) still visit every flow in turn. None: from the
    /// start each trial.
    pub l3_offset: Option<u64>,
    /// CPUs the transmit and receive threads run on (the CPU plan's tester
    /// share); `None`: `LAB_PIN_CPUS` or the scheduler.
    pub pin: Option<crate::cpuplan::CpuSet>,
    tx: Vec<PacketSocket>,
    rx: Vec<PacketSocket>,
    nonce: u16,
    /// Emulated host per port (MAC, IPv4, IPv6) answering ARP and
    /// neighbour solicitations while a trial runs.
    pub hosts: Vec<Host>,
    /// Count each stream's received bytes per interval of this many ns
    /// of transmit time (from the trial's first transmission):
    /// [`StreamResult::bins`], a rate over time per stream
    /// (`type: bandwidth-share`). None: totals only.
    pub bin_ns: Option<u64>,
}

/// An emulated host on a tester port.
#[derive(Debug, Clone, Copy)]
pub struct Host {
    /// MAC address.
    pub mac: Mac,
    /// IPv4 address.
    pub ip: [u8; 4],
    /// IPv6 address.
    pub ip6: [u8; 16],
}

struct StreamRx {
    per_port: Vec<u64>,
    received: u64,
    received_also: u64,
    received_before: u64,
    first_ts: Vec<u64>,
    last_ts: Vec<u64>,
    dup: u64,
    reordered: u64,
    malformed: u64,
    max_seq: Option<u32>,
    bitmap: Vec<u64>,
    hist: Histogram,
    /// Bytes received per `Tester::bin_ns` of transmit time (empty: off).
    bins: Vec<u64>,
    /// Multicast: slot in `mc` per tester port (`NO_SLOT` = not a receiver).
    mc_slot: Vec<u16>,
    mc: Vec<McRx>,
}

const NO_SLOT: u16 = u16::MAX;

/// One receiving port of a multicast stream.
struct McRx {
    received: u64,
    dup: u64,
    malformed: u64,
    max_seq: Option<u32>,
    first_rx: u64,
    last_rx: u64,
    bitmap: Vec<u64>,
}

impl Tester {
    /// Open sockets on `ports` inside namespace `ns`.
    pub fn open(ns: &str, ports: &[String]) -> Result<Tester, LabError> {
        Self::open_opts(ns, ports, true)
    }

    /// Like [`Tester::open`]; `with_rx = false` opens transmit sockets only
    /// (generator-speed measurements: nothing is counted on receive).
    pub fn open_opts(ns: &str, ports: &[String], with_rx: bool) -> Result<Tester, LabError> {
        let ports = ports.to_vec();
        let socks = in_netns(ns, move || -> std::io::Result<_> {
            let mut tx = Vec::new();
            let mut rx = Vec::new();
            for p in &ports {
                tx.push(PacketSocket::open(p, false)?);
                if with_rx {
                    rx.push(PacketSocket::open(p, true)?);
                }
            }
            Ok((tx, rx))
        })?
        .map_err(|e| LabError::Other(format!("tester sockets: {e}")))?;
        let hosts = (0..socks.0.len())
            .map(|p| Host {
                mac: crate::dut::host_mac(p),
                ip: crate::dut::host_ip(p),
                ip6: crate::sig::host_ip6(p),
            })
            .collect();
        Ok(Tester {
            gentle: false,
            new_flows: NewFlows::Off,
            l3_offset: None,
            pin: None,
            hosts,
            bin_ns: None,
            tx: socks.0,
            rx: socks.1,
            nonce: (std::process::id() as u16).wrapping_mul(7919),
        })
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.tx.len()
    }

    /// Send `frames` on tester port `port` outside a trial (IGMP reports).
    pub fn send_raw(&self, port: usize, frames: &[&[u8]]) -> Result<(), LabError> {
        send_all(&self.tx, port, frames)
    }

    /// Make the DUT learn where hosts live: for each `(port, first MAC,
    /// count)`, one broadcast frame from each of `count` consecutive source
    /// MACs (two rounds, paced at about 50,000 frames/s). The frames carry
    /// no signature.
    pub fn learn(&self, hosts: &[(usize, Mac, u32)]) -> Result<(), LabError> {
        let mut bufs = vec![[0u8; 60]; BATCH];
        for _round in 0..2 {
            for &(p, mac, count) in hosts {
                let mut i = 0u32;
                while i < count.max(1) {
                    let n = ((count.max(1) - i) as usize).min(32);
                    for (k, b) in bufs.iter_mut().enumerate().take(n) {
                        build_headers(b, 64, [0xff; 6], mac_add(mac, i + k as u32), None);
                    }
                    let frames: Vec<&[u8]> = bufs[..n].iter().map(|b| &b[..]).collect();
                    self.tx[p]
                        .send_batch(&frames)
                        .map_err(|e| LabError::Other(format!("learn on t{}: {e}", p + 1)))?;
                    i += n as u32;
                    if count > 32 {
                        std::thread::sleep(std::time::Duration::from_micros(640));
                    }
                }
            }
        }
        Ok(())
    }

    /// Run one trial and return exact end-of-trial counts.
    pub fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, LabError> {
        self.run_with(spec, |_| ()).map(|(r, ())| r)
    }

    /// Like [`Tester::run`], and calls `during` on this thread while the
    /// trial runs (right after the transmit and receive threads start),
    /// with the trial's [`TrialControl`]: it may wait for `t0`, set the mark
    /// and `stop_at`. The drain starts when transmission ends.
    pub fn run_with<R>(
        &mut self,
        spec: &TrialSpec,
        during: impl FnOnce(&TrialControl) -> R,
    ) -> Result<(TrialResult, R), LabError> {
        self.run_with_raw(spec, |ctl, _| during(ctl))
    }

    /// Like [`Tester::run_with`]; `during` can also send frames of its own
    /// on the tester ports (multicast joins and leaves mid-trial).
    pub fn run_with_raw<R>(
        &mut self,
        spec: &TrialSpec,
        during: impl FnOnce(&TrialControl, &RawTx) -> R,
    ) -> Result<(TrialResult, R), LabError> {
        let nports = self.tx.len();
        if spec.streams.len() > u16::MAX as usize {
            return Err(LabError::Other("too many streams (max 65535)".into()));
        }
        for (i, s) in spec.streams.iter().enumerate() {
            let v6 =
                s.l3.as_ref()
                    .is_some_and(|v| v.iter().any(|a| matches!(a, L3::V6 { .. })));
            if s.tx >= nports
                || s.expect.is_some_and(|e| e >= nports)
                || s.also.is_some_and(|e| e >= nports || s.expect.is_none())
                || s.receivers.as_ref().is_some_and(|r| {
                    s.expect.is_some() || r.iter().any(|&p| p >= nports || p == s.tx)
                })
                || s.sizes.is_empty()
                || s.l3.as_ref().is_some_and(|v| v.is_empty())
                || (v6 && s.sizes.iter().any(|&z| z < MIN_FRAME_V6))
            {
                return Err(LabError::Other(format!(
                    "bad stream {i}: tx {} expect {:?} sizes {:?} (IPv6 needs >= {MIN_FRAME_V6} bytes)",
                    s.tx, s.expect, s.sizes
                )));
            }
        }
        self.nonce = self.nonce.wrapping_add(1).max(1);
        let nonce = self.nonce;
        // Streams of each port and the bitmap size per stream.
        let mut port_streams: Vec<Vec<usize>> = vec![Vec::new(); nports];
        for (i, s) in spec.streams.iter().enumerate() {
            port_streams[s.tx].push(i);
        }
        let bits_for = |s: &Stream| -> usize {
            let per_port = match spec.limit {
                Limit::Frames(n) => n as f64,
                Limit::Duration(d) => {
                    spec.rates.get(s.tx).copied().flatten().unwrap_or(4e6) * d * 1.2
                }
            };
            let n = per_port / port_streams[s.tx].len().max(1) as f64 + 1024.0;
            (n as usize).min(1 << 26)
        };
        let mut rxs: Vec<StreamRx> = spec
            .streams
            .iter()
            .map(|s| StreamRx {
                per_port: vec![0; nports],
                received: 0,
                received_also: 0,
                received_before: 0,
                first_ts: vec![u64::MAX; nports],
                last_ts: vec![0; nports],
                dup: 0,
                reordered: 0,
                malformed: 0,
                max_seq: None,
                bitmap: vec![0u64; bits_for(s).div_ceil(64)],
                hist: Histogram::new(),
                bins: match (self.bin_ns, spec.limit) {
                    // Preallocated: the receive loop only indexes.
                    (Some(b), Limit::Duration(d)) if b > 0 => {
                        vec![0; (d * 1e9 / b as f64).ceil() as usize + 1]
                    }
                    _ => Vec::new(),
                },
                mc_slot: {
                    let mut v = vec![NO_SLOT; nports];
                    for (k, &p) in s.receivers.iter().flat_map(|r| r.iter()).enumerate() {
                        v[p] = k as u16;
                    }
                    v
                },
                mc: s
                    .receivers
                    .iter()
                    .flat_map(|r| r.iter())
                    .map(|_| McRx {
                        received: 0,
                        dup: 0,
                        malformed: 0,
                        max_seq: None,
                        first_rx: 0,
                        last_rx: 0,
                        bitmap: vec![0u64; bits_for(s).div_ceil(64)],
                    })
                    .collect(),
            })
            .collect();
        let multicast = spec.streams.iter().any(|s| s.receivers.is_some());
        let mut port_hist: Vec<Histogram> = if multicast {
            (0..nports).map(|_| Histogram::new()).collect()
        } else {
            Vec::new()
        };
        for r in &self.rx {
            r.drain();
            r.take_drops();
        }
        let stop = AtomicBool::new(false);
        let ctl = TrialControl::default();
        let rx_socks = &self.rx;
        let tx_socks = &self.tx;
        let streams = &spec.streams;
        let hosts = &self.hosts;
        let gentle = self.gentle;
        let bin_ns = self.bin_ns;
        let new_flows = self.new_flows;
        let l3_offset = self.l3_offset.unwrap_or(0);
        let pin = self.pin;
        let pin_thread = move |which: usize| match pin {
            Some(set) => {
                let _ = set.pin(0);
            }
            None => pin_from_env(which),
        };
        let (tx_out, rx_res, during_out) = std::thread::scope(|sc| {
            let rxh = sc.spawn(|| {
                pin_thread(1);
                rx_loop(
                    rx_socks,
                    tx_socks,
                    hosts,
                    streams,
                    &mut rxs,
                    &mut port_hist,
                    nonce,
                    &stop,
                    &ctl,
                    gentle,
                    bin_ns,
                )
            });
            let txh = sc.spawn(|| {
                pin_thread(0);
                if gentle {
                    // SAFETY: prctl on the calling thread only.
                    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
                }
                tx_loop(
                    tx_socks,
                    spec,
                    &port_streams,
                    nonce,
                    &ctl,
                    gentle,
                    new_flows,
                    l3_offset,
                    bin_ns,
                )
            });
            let during_out = during(&ctl, &RawTx { socks: tx_socks });
            let tx_out = txh.join();
            // Drain: keep receiving for a while after the last frame.
            let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(spec.drain);
            while std::time::Instant::now() < end && !interrupted() {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            stop.store(true, Ordering::Relaxed);
            let rx_res = rxh.join();
            (tx_out, rx_res, during_out)
        });
        let tx_out = tx_out.map_err(|_| LabError::Other("tx thread panicked".into()))??;
        if let Some(o) = self.l3_offset.as_mut() {
            *o = o.wrapping_add(tx_out.stream_sent.iter().copied().max().unwrap_or(0));
        }
        rx_res.map_err(|_| LabError::Other("rx thread panicked".into()))??;
        crate::netns::check_interrupt()?;
        let tester_rx_drops: u64 = self.rx.iter().map(|r| r.take_drops()).sum();

        let mut res = TrialResult {
            nonce,
            intended_fps: 0.0,
            offered_fps: 0.0,
            tx_seconds: tx_out.seconds,
            sent: 0,
            received: 0,
            lost: 0,
            loss_ratio: 0.0,
            duplicated: 0,
            reordered: 0,
            flooded: 0,
            malformed: 0,
            per_port_rx: vec![0; nports],
            per_port_tx: tx_out.port_sent.clone(),
            tester_rx_drops,
            generator_limited: false,
            tx_refused: tx_out.refused,
            tx_usage: tx_out.usage,
            tx_late_ns: (!tx_out.late.is_empty()).then(|| tx_out.late.clone()),
            latency: LatencyStats::default(),
            streams: Vec::new(),
            mark_ns: None,
            tx_stall: None,
            per_port_latency: multicast.then(|| port_hist.iter().map(|h| h.stats()).collect()),
        };
        let t0 = tx_out.t0;
        let mark = ctl.mark.load(Ordering::Acquire);
        if mark != 0 {
            res.mark_ns = Some(mark.saturating_sub(t0));
            res.tx_stall = Some((tx_out.stall.0, tx_out.stall.1.saturating_sub(t0)));
        }
        let mut all = Histogram::new();
        let mut paced = true;
        for (p, ss) in port_streams.iter().enumerate() {
            if ss.is_empty() {
                continue;
            }
            match spec.rates.get(p).copied().flatten() {
                Some(r) => res.intended_fps += r,
                None => paced = false,
            }
        }
        if !paced {
            res.intended_fps = 0.0;
        }
        for (i, (s, r)) in spec.streams.iter().zip(rxs.iter()).enumerate() {
            let sent = tx_out.stream_sent[i];
            let flooded: u64 = r
                .per_port
                .iter()
                .enumerate()
                .filter(|(p, _)| {
                    Some(*p) != s.expect
                        && Some(*p) != s.also
                        && *p != s.tx
                        && r.mc_slot[*p] == NO_SLOT
                })
                .map(|(_, c)| *c)
                .sum();
            for (p, c) in r.per_port.iter().enumerate() {
                res.per_port_rx[p] += c;
            }
            // A multicast frame is due once on every receiving port.
            let (received, lost) = if s.expect.is_some() || !r.mc.is_empty() {
                let due = sent * r.mc.len().max(1) as u64;
                (r.received, due as i64 - r.received as i64)
            } else {
                (0, 0)
            };
            res.sent += sent;
            res.received += received;
            res.lost += lost;
            res.duplicated += r.dup;
            res.reordered += r.reordered;
            res.flooded += flooded;
            res.malformed += r.malformed;
            all.merge(&r.hist);
            res.streams.push(StreamResult {
                id: i,
                tx: s.tx,
                expect: s.expect,
                sent,
                received,
                lost,
                duplicated: r.dup,
                reordered: r.reordered,
                per_port: r.per_port.clone(),
                flooded,
                malformed: r.malformed,
                latency: r.hist.stats(),
                received_also: s.also.map(|_| r.received_also),
                bins: (!r.bins.is_empty()).then(|| r.bins.clone()),
                mark: (mark != 0).then(|| {
                    let rel = |v: u64| v.saturating_sub(t0);
                    MarkSplit {
                        sent_before: tx_out.stream_sent_before[i],
                        received_before: r.received_before,
                        first_tx_ns: r
                            .first_ts
                            .iter()
                            .map(|&v| (v != u64::MAX).then(|| rel(v)))
                            .collect(),
                        last_tx_ns: r
                            .last_ts
                            .iter()
                            .map(|&v| (v != 0).then(|| rel(v)))
                            .collect(),
                    }
                }),
                receivers: s.receivers.as_ref().map(|ports| {
                    ports
                        .iter()
                        .zip(r.mc.iter())
                        .map(|(&port, m)| ReceiverCount {
                            port,
                            received: m.received,
                            duplicated: m.dup,
                            malformed: m.malformed,
                            first_rx: m.first_rx,
                            last_rx: m.last_rx,
                        })
                        .collect()
                }),
            });
        }
        let expected_sent: u64 = res
            .streams
            .iter()
            .filter(|s| s.expect.is_some() || s.receivers.is_some())
            .map(|s| s.sent * s.receivers.as_ref().map_or(1, |r| r.len() as u64))
            .sum();
        res.loss_ratio = if expected_sent > 0 {
            res.lost.max(0) as f64 / expected_sent as f64
        } else {
            0.0
        };
        res.offered_fps = if tx_out.seconds > 0.0 {
            res.sent as f64 / tx_out.seconds
        } else {
            0.0
        };
        res.generator_limited = paced && res.offered_fps < 0.98 * res.intended_fps;
        res.latency = all.stats();
        Ok((res, during_out))
    }
}

/// Pin the calling thread to the CPU named at position `which` (0 = TX,
/// 1 = RX) of `LAB_PIN_CPUS=tx,rx`, if set. Off by default (see docs/lab.md).
fn pin_from_env(which: usize) {
    let Ok(v) = std::env::var("LAB_PIN_CPUS") else {
        return;
    };
    let Some(cpu) = v
        .split(',')
        .nth(which)
        .and_then(|c| c.trim().parse::<usize>().ok())
    else {
        return;
    };
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it; the call
    // affects only this thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

struct TxOut {
    seconds: f64,
    t0: u64,
    port_sent: Vec<u64>,
    stream_sent: Vec<u64>,
    stream_sent_before: Vec<u64>,
    /// Longest gap between sends ending after the mark: (length, start), ns.
    stall: (u64, u64),
    /// Sends the kernel refused (all ports).
    refused: u64,
    /// The transmit thread's own resource use over the trial.
    usage: ThreadUsage,
    /// Per `Tester::bin_ns` of the trial: how late the paced transmit
    /// thread sent, at most, behind its schedule (ns).
    late: Vec<u64>,
}

/// What the transmit thread spent: CPU time and how often it slept
/// (`getrusage(RUSAGE_THREAD)` differences).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct ThreadUsage {
    /// CPU seconds (user + system; the system part includes the DUT's
    /// work when a kernel DUT forwards inside the sender's system call).
    pub cpu_s: f64,
    /// Voluntary context switches: the thread blocked (socket buffer
    /// full, or a paced sleep).
    pub voluntary: u64,
    /// Involuntary ones: it was preempted.
    pub involuntary: u64,
}

impl ThreadUsage {
    fn now() -> ThreadUsage {
        // SAFETY: rusage is plain data; getrusage fills it for this thread.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) };
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        ThreadUsage {
            cpu_s: t(r.ru_utime) + t(r.ru_stime),
            voluntary: r.ru_nvcsw as u64,
            involuntary: r.ru_nivcsw as u64,
        }
    }

    fn since(self, start: ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            cpu_s: self.cpu_s - start.cpu_s,
            voluntary: self.voluntary.saturating_sub(start.voluntary),
            involuntary: self.involuntary.saturating_sub(start.involuntary),
        }
    }
}

struct PortTx {
    port: usize,
    gap_ns: f64,
    next: f64,
    rr: usize,
    sent: u64,
    done: bool,
}

#[allow(clippy::too_many_arguments)]
fn tx_loop(
    socks: &[PacketSocket],
    spec: &TrialSpec,
    port_streams: &[Vec<usize>],
    nonce: u16,
    ctl: &TrialControl,
    gentle: bool,
    new_flows: NewFlows,
    l3_offset: u64,
    bin_ns: Option<u64>,
) -> Result<TxOut, LabError> {
    let mut late = match (bin_ns, spec.limit) {
        (Some(b), Limit::Duration(d)) if b > 0 => {
            vec![0u64; (d * 1e9 / b as f64).ceil() as usize + 1]
        }
        _ => Vec::new(),
    };
    let (sleep_over, sleep_margin) = if gentle {
        (30_000.0, 8_000.0)
    } else {
        (300_000.0, 150_000.0)
    };
    let maxlen = spec
        .streams
        .iter()
        .flat_map(|s| s.sizes.iter())
        .copied()
        .max()
        .unwrap_or(64)
        .max(128) as usize;
    let mut bufs = vec![vec![0u8; maxlen]; BATCH];
    let mut slot_stream = [0usize; BATCH];
    let mut lens = [0usize; BATCH];
    let mut seq = vec![0u32; spec.streams.len()];
    let mut stream_sent = vec![0u64; spec.streams.len()];
    let mut stream_sent_before = vec![0u64; spec.streams.len()];
    for s in socks {
        s.take_refused();
    }
    let usage0 = ThreadUsage::now();
    let t0_ns = mono_ns();
    ctl.t0.store(t0_ns, Ordering::Release);
    let t0 = t0_ns as f64;
    let mut ports: Vec<PortTx> = port_streams
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .map(|(p, _)| PortTx {
            port: p,
            gap_ns: spec
                .rates
                .get(p)
                .copied()
                .flatten()
                .map(|r| 1e9 / r.max(1e-3))
                .unwrap_or(0.0),
            next: t0,
            rr: 0,
            sent: 0,
            done: false,
        })
        .collect();
    let end_ns = match spec.limit {
        Limit::Duration(d) => t0 + d * 1e9,
        Limit::Frames(_) => f64::INFINITY,
    };
    let mut last = t0;
    let mut last_send = 0u64;
    let mut stall = (0u64, 0u64);
    let mut iter = 0u32;
    // Earliest deadline among active ports.
    while let Some(pi) = ports
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.done)
        .min_by(|a, b| a.1.next.total_cmp(&b.1.next))
        .map(|(i, _)| i)
    {
        iter = iter.wrapping_add(1);
        if iter & 1023 == 0 && interrupted() {
            break;
        }
        let pt = &mut ports[pi];
        let paced = pt.gap_ns > 0.0;
        let mut now = mono_ns() as f64;
        let stop_at = ctl.stop_at.load(Ordering::Relaxed);
        if now >= end_ns || (stop_at != 0 && now >= stop_at as f64) {
            pt.done = true;
            continue;
        }
        if paced {
            if pt.next >= end_ns {
                pt.done = true;
                continue;
            }
            while now < pt.next {
                let wait = pt.next - now;
                if wait > sleep_over {
                    std::thread::sleep(std::time::Duration::from_nanos(
                        (wait - sleep_margin) as u64,
                    ));
                } else if wait > 20_000.0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                now = mono_ns() as f64;
            }
            if let (Some(b), true) = (bin_ns, now > pt.next) {
                // Behind schedule: the catch-up burst that follows is
                // not the load the plan asked for.
                if let Some(l) = late.get_mut(((now - t0) as u64 / b) as usize) {
                    *l = (*l).max((now - pt.next) as u64);
                }
            }
        }
        let mut burst = if paced {
            spec.burst
                .unwrap_or_else(|| (20_000.0 / pt.gap_ns).round() as usize)
                .clamp(1, BATCH)
        } else {
            BATCH
        };
        if let Limit::Frames(n) = spec.limit {
            burst = burst.min((n - pt.sent) as usize);
        }
        let ts = now as u64;
        let strs = &port_streams[pt.port];
        for (k, buf) in bufs.iter_mut().enumerate().take(burst) {
            let si = strs[pt.rr];
            pt.rr = (pt.rr + 1) % strs.len();
            let s = &spec.streams[si];
            let q = seq[si];
            seq[si] = q.wrapping_add(1);
            slot_stream[k] = si;
            let size = s.sizes[q as usize % s.sizes.len()];
            let dst = mac_add(s.dst, q % s.dst_count.max(1));
            let src = mac_add(s.src, q % s.src_count.max(1));
            let l3 =
                s.l3.as_ref()
                    .map(|v| &v[((l3_offset + u64::from(q)) % v.len() as u64) as usize]);
            let vid = s
                .vlan
                .map(|(first, n)| first + (q % n.max(1) as u32) as u16);
            let new_flow = match (new_flows.proto(q), &s.l3) {
                (Some(proto), Some(v)) => Some((proto, new_flow_id(q / v.len() as u32, nonce))),
                _ => None,
            };
            let sg = Signature {
                nonce,
                stream: si as u16,
                seq: q,
                ts,
            };
            lens[k] = build_frame(buf, size, dst, src, l3, vid, new_flow, &sg);
        }
        let mut frames: [&[u8]; BATCH] = [&[]; BATCH];
        for k in 0..burst {
            frames[k] = &bufs[k][..lens[k]];
        }
        let n = socks[pt.port]
            .send_batch(&frames[..burst])
            .map_err(|e| LabError::Other(format!("send on t{}: {e}", pt.port + 1)))?;
        // Roll back sequence numbers of frames the kernel did not take.
        for k in (n..burst).rev() {
            let si = slot_stream[k];
            seq[si] = seq[si].wrapping_sub(1);
        }
        let mark = ctl.mark.load(Ordering::Relaxed);
        let before = mark == 0 || ts < mark;
        if n > 0 {
            let until = ctl.stall_until.load(Ordering::Relaxed);
            if !before
                && last_send != 0
                && (until == 0 || last_send <= until)
                && ts - last_send > stall.0
            {
                stall = (ts - last_send, last_send);
            }
            last_send = ts;
        }
        for &si in slot_stream.iter().take(n) {
            stream_sent[si] += 1;
            if before {
                stream_sent_before[si] += 1;
            }
        }
        pt.sent += n as u64;
        if paced {
            pt.next += burst as f64 * pt.gap_ns;
        } else {
            // Unpaced ports take turns (the earliest "deadline" is the one
            // that sent longest ago); left at t0, the first would starve the rest.
            pt.next = mono_ns() as f64;
        }
        if let Limit::Frames(lim) = spec.limit {
            if pt.sent >= lim {
                pt.done = true;
            }
        }
        last = mono_ns() as f64;
    }
    let mut port_sent = vec![0u64; socks.len()];
    for p in &ports {
        port_sent[p.port] = p.sent;
    }
    Ok(TxOut {
        seconds: ((last - t0) / 1e9).max(1e-9),
        t0: t0_ns,
        port_sent,
        stream_sent,
        stream_sent_before,
        stall,
        refused: socks.iter().map(|s| s.take_refused()).sum(),
        usage: ThreadUsage::now().since(usage0),
        late,
    })
}

/// Write one test frame of `size` bytes carrying `sg` into `buf` and
/// return its length: layer 2 without `l3`, tagged with `vid`; a layer-3
/// frame is UDP unless `new_flow` gives its transport and flow id
/// ([`write_transport`]).
#[inline]
#[allow(clippy::too_many_arguments)]
fn build_frame(
    buf: &mut [u8],
    size: u16,
    dst: Mac,
    src: Mac,
    l3: Option<&L3>,
    vid: Option<u16>,
    new_flow: Option<(FlowProto, u16)>,
    sg: &Signature,
) -> usize {
    let (len, off) = match (vid, l3) {
        (Some(v), None) => build_l2_tagged(buf, size, dst, src, v),
        (Some(v), Some(a)) => build_l3_tagged(buf, size, dst, src, a, v),
        (None, _) => build_headers(buf, size, dst, src, l3),
    };
    match (new_flow, l3) {
        (Some((proto, flow)), Some(a)) => write_transport(buf, len, off, a, proto, flow, sg),
        _ => {
            sg.encode(&mut buf[off..off + SIG_LEN]);
            if vid.is_some() {
                finish_tagged(buf, l3);
            } else {
                finish(buf, l3);
            }
        }
    }
    len
}

/// The UDP / TCP source port or ICMP echo identifier of a new-flow frame
/// (`Tester::new_flows`): `round` counts the passes over the stream's
/// addresses, so (address, port) is new for 64,512 passes; the nonce
/// shifts each trial's sequence.
#[inline]
fn new_flow_id(round: u32, nonce: u16) -> u16 {
    1024 + (round.wrapping_add(u32::from(nonce).wrapping_mul(7919)) % 64_512) as u16
}

#[allow(clippy::too_many_arguments)]
fn rx_loop(
    socks: &[PacketSocket],
    tx: &[PacketSocket],
    hosts: &[Host],
    streams: &[Stream],
    rxs: &mut [StreamRx],
    port_hist: &mut [Histogram],
    nonce: u16,
    stop: &AtomicBool,
    ctl: &TrialControl,
    gentle: bool,
    bin_ns: Option<u64>,
) -> Result<(), LabError> {
    let mut bufs = RxBufs::new();
    let mut reply = [0u8; 128];
    let fds: Vec<i32> = socks.iter().map(|s| s.raw()).collect();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let mut got = 0;
        for (p, s) in socks.iter().enumerate() {
            let n = bufs
                .recv(s)
                .map_err(|e| LabError::Other(format!("receive on t{}: {e}", p + 1)))?;
            got += n;
            if n == 0 {
                continue;
            }
            let now = mono_ns();
            for i in 0..n {
                let frame = bufs.frame(i);
                let Some((sg, ip)) = locate_at(frame, now) else {
                    if let Some(h) = hosts.get(p) {
                        if let Some(n) = neighbour_reply(frame, h.mac, h.ip, h.ip6, &mut reply) {
                            let _ = tx[p].send_batch(&[&reply[..n]]);
                        }
                    }
                    continue;
                };
                if sg.nonce != nonce || sg.stream as usize >= rxs.len() {
                    continue;
                }
                let st = &streams[sg.stream as usize];
                let r = &mut rxs[sg.stream as usize];
                r.per_port[p] += 1;
                let slot = r.mc_slot[p];
                if slot != NO_SLOT {
                    // Multicast: each receiving port is counted on its own.
                    let m = &mut r.mc[slot as usize];
                    if st.arrival.is_some_and(|a| !a.check(frame, ip)) {
                        m.malformed += 1;
                        r.malformed += 1;
                        continue;
                    }
                    let q = sg.seq as usize;
                    if q / 64 < m.bitmap.len() {
                        let w = &mut m.bitmap[q / 64];
                        let b = 1u64 << (q % 64);
                        if *w & b != 0 {
                            m.dup += 1;
                            r.dup += 1;
                            continue;
                        }
                        *w |= b;
                    }
                    m.received += 1;
                    r.received += 1;
                    if m.first_rx == 0 {
                        m.first_rx = now;
                    }
                    m.last_rx = now;
                    match m.max_seq {
                        Some(x) if sg.seq < x => r.reordered += 1,
                        _ => m.max_seq = Some(sg.seq),
                    }
                    let lat = now.saturating_sub(sg.ts);
                    r.hist.record(lat);
                    port_hist[p].record(lat);
                    continue;
                }
                if st.expect != Some(p) && st.also != Some(p) {
                    continue;
                }
                if st.arrival.is_some_and(|a| !a.check(frame, ip)) {
                    r.malformed += 1;
                    continue;
                }
                let q = sg.seq as usize;
                if q / 64 < r.bitmap.len() {
                    let w = &mut r.bitmap[q / 64];
                    let b = 1u64 << (q % 64);
                    if *w & b != 0 {
                        r.dup += 1;
                        continue;
                    }
                    *w |= b;
                }
                r.received += 1;
                if st.also == Some(p) {
                    r.received_also += 1;
                }
                let mark = ctl.mark.load(Ordering::Relaxed);
                if mark == 0 || sg.ts < mark {
                    r.received_before += 1;
                }
                if let Some(b) = bin_ns {
                    let t0 = ctl.t0.load(Ordering::Relaxed);
                    let k = (sg.ts.saturating_sub(t0) / b) as usize;
                    if let Some(c) = r.bins.get_mut(k) {
                        *c += frame.len() as u64;
                    }
                }
                r.first_ts[p] = r.first_ts[p].min(sg.ts);
                r.last_ts[p] = r.last_ts[p].max(sg.ts);
                match r.max_seq {
                    Some(m) if sg.seq < m => r.reordered += 1,
                    _ => r.max_seq = Some(sg.seq),
                }
                r.hist.record(now.saturating_sub(sg.ts));
            }
        }
        if got == 0 {
            if stopping {
                break;
            }
            poll_any(&fds, 2);
        } else if gentle && got < 16 {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sig::{host_ip, host_ip6};

    /// The generator's new-flow frames through the inline engine, in
    /// memory, with the lab DUT's own service-control section: every TCP
    /// SYN, ICMP echo request and UDP frame is a new flow of the `lab`
    /// service, decided by its signature at the first packet.
    #[test]
    fn each_new_flow_frame_is_one_lab_flow_in_the_engine() {
        use dpi::engine::{Engine, EngineConfig, Side};
        use dpi::subscriber::{Package, Prefix, Subscriber, SubscriberDb};
        let text = format!(
            "switch:\n  name: lab\nports:\n  - name: sw1\n  - name: sw2\n{}",
            crate::dut::INLINE_YAML
        );
        let cfg = config::parse(&text, "inline.yaml").unwrap_or_else(|e| panic!("{e}"));
        let sc = cfg.service_control.expect("service-control");
        let ndpi = dpi::ndpi::Ndpi::new().unwrap();
        let policy = Arc::new(sc.policy(&ndpi).unwrap());
        drop(ndpi);
        let lab = usize::from(policy.services.id("lab").unwrap());
        let mut e = Engine::new(
            EngineConfig {
                flows: 8192,
                timeouts: sc.timeouts(),
                ..EngineConfig::default()
            },
            policy,
        )
        .unwrap();
        let mut db = SubscriberDb::new(4);
        for (id, p) in [("lab-4", "0.0.0.0/0"), ("lab-6", "::/0")] {
            db.upsert(
                Subscriber {
                    id: id.into(),
                    package: Package::Gold,
                    quota_bytes: None,
                    prefixes: vec![Prefix::parse(p).unwrap()],
                    limits: Default::default(),
                },
                false,
            )
            .unwrap();
        }
        db.publish();
        let view = db.published().load_full();
        // Two addresses per stream, as a stream cycles over its routes:
        // frame q goes to address q % 2 from port (or echo id) q / 2, so
        // every frame is a new flow. Each round its own addresses.
        let addr = |v6: bool, round: u8, k: u8| {
            if v6 {
                let mut d = host_ip6(1);
                d[14] = round;
                d[15] = k;
                L3::V6 {
                    src: host_ip6(0),
                    dst: d,
                }
            } else {
                L3::V4 {
                    src: host_ip(0),
                    dst: [198, 19, round, k],
                }
            }
        };
        let n = 600u32;
        let mut buf = vec![0u8; 2048];
        let mut now_us = 1_000_000;
        let mut want = 0;
        let mut round = 0;
        for (v6, size) in [(false, 64u16), (true, 84), (false, 512)] {
            for mode in [NewFlows::Tcp, NewFlows::Icmp, NewFlows::Mix, NewFlows::Udp] {
                round += 1;
                let addrs = [addr(v6, round, 1), addr(v6, round, 2)];
                let before = e.stats().services[lab].flows.get();
                for q in 0..n {
                    let flow = mode
                        .proto(q)
                        .map(|p| (p, new_flow_id(q / addrs.len() as u32, 77)));
                    let sg = Signature {
                        nonce: 77,
                        stream: 0,
                        seq: q,
                        ts: 5,
                    };
                    let a = Some(&addrs[q as usize % 2]);
                    let len = build_frame(&mut buf, size, [2; 6], [4; 6], a, None, flow, &sg);
                    now_us += 1;
                    e.process_us(&buf[..len], Side::Subscriber, &view, now_us);
                }
                let created = e.stats().services[lab].flows.get() - before;
                assert_eq!(created, u64::from(n), "v6 {v6} {size} {mode:?}");
                want += u64::from(n);
            }
        }
        let s = e.stats();
        assert_eq!(s.engine.flows_created.get(), want);
        assert_eq!(s.engine.by_signature.get(), want);
        assert_eq!(s.engine.refused_full.get(), 0);
        assert_eq!(s.engine.no_subscriber.get(), 0);
    }
}
