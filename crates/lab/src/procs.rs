//! Test procedures (RFC 2544, RFC 2889) on one DUT.

use crate::dut::{host_ip, host_mac, Dut};
use crate::engine::{Limit, Stream, Tester, TrialResult, TrialSpec};
use crate::netns::sleep_checked;
use crate::plan::{Driver, Family, FrameSize, Test, TestKind};
use crate::report::{ResultRow, TrialRecord};
use crate::search::{bisect, gallop, trials_needed};
use crate::sig::{host_ip6, vlan_host_mac, Arrival, Mac, L3, TTL};
use crate::LabError;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Progress on stderr. On a terminal, two `indicatif` bars redraw in
/// place: the plan (elapsed, ETA from the estimated run time) and the
/// test running now (its own elapsed time and ETA). In a log (CI, a pipe)
/// nothing is drawn; one plain line is printed each time the label
/// changes, so logs stay readable.
pub struct Progress {
    start: Instant,
    total: f64,
    done: f64,
    quiet: bool,
    label: String,
    tty: bool,
    plan: Option<indicatif::ProgressBar>,
    test: Option<(String, indicatif::ProgressBar)>,
    multi: Option<indicatif::MultiProgress>,
    /// A test with an estimate is running (see [`Progress::begin_test`]):
    /// its bar stays until the next one begins.
    test_bar: bool,
}

/// Estimated seconds are counted in milliseconds on the bars.
const MS: f64 = 1000.0;

fn bar_style(tmpl: &str) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(tmpl)
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("#>.")
}

impl Progress {
    /// `total` is the estimated run time in seconds.
    pub fn new(total: f64, quiet: bool) -> Progress {
        let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let total = total.max(1.0);
        let (multi, plan) = if tty && !quiet {
            let m = indicatif::MultiProgress::new();
            let p = m.add(indicatif::ProgressBar::new((total * MS) as u64));
            p.set_style(bar_style(
                "plan [{bar:24}] {percent:>3}% {elapsed_precise} ETA {eta_precise}",
            ));
            p.enable_steady_tick(std::time::Duration::from_millis(250));
            (Some(m), Some(p))
        } else {
            (None, None)
        };
        Progress {
            start: Instant::now(),
            total,
            done: 0.0,
            quiet,
            label: String::new(),
            tty,
            plan,
            test: None,
            multi,
            test_bar: false,
        }
    }

    /// A test begins, estimated to take `est` seconds: on a terminal its
    /// own bar (elapsed, ETA) replaces the previous test's; in a log one
    /// line with the estimate.
    pub fn begin_test(&mut self, name: &str, est: f64) {
        if let Some(m) = &self.multi {
            if let Some((_, b)) = self.test.take() {
                b.finish_and_clear();
            }
            let b = m.add(indicatif::ProgressBar::new((est.max(0.1) * MS) as u64));
            b.set_style(bar_style(
                "test [{bar:24}] {percent:>3}% {elapsed_precise} ETA {eta_precise} {msg}",
            ));
            b.enable_steady_tick(std::time::Duration::from_millis(250));
            b.set_message(name.to_string());
            self.test = Some((name.to_string(), b));
            self.test_bar = true;
        } else if !self.quiet && !self.tty {
            eprintln!(
                "[lab] {:>4.0}s  test {name} (about {est:.0} s)",
                self.start.elapsed().as_secs_f64()
            );
        }
    }

    /// Set what is running now (`test: detail`; the part before the first
    /// space names the test for its bar).
    pub fn label(&mut self, l: String) {
        let changed = l != self.label;
        self.label = l;
        if let Some(m) = &self.multi {
            let name = self.label.split(' ').next().unwrap_or("").to_string();
            let same = self.test_bar || self.test.as_ref().is_some_and(|(n, _)| *n == name);
            if !same {
                if let Some((_, b)) = self.test.take() {
                    b.finish_and_clear();
                }
                let b = m.add(indicatif::ProgressBar::new_spinner());
                b.set_style(bar_style("test {elapsed_precise} {spinner} {msg}"));
                b.enable_steady_tick(std::time::Duration::from_millis(250));
                self.test = Some((name, b));
            }
            if let Some((_, b)) = &self.test {
                b.set_message(self.label.clone());
            }
        } else if changed && !self.quiet && !self.tty {
            eprintln!(
                "[lab] {:>4.0}s  {}",
                self.start.elapsed().as_secs_f64(),
                self.label
            );
        }
    }

    /// Account `secs` of estimated work as done.
    pub fn advance(&mut self, secs: f64) {
        self.done = (self.done + secs).min(self.total * 0.99);
        if let Some(p) = &self.plan {
            p.set_position((self.done * MS) as u64);
        }
        if let (true, Some((_, b))) = (self.test_bar, &self.test) {
            // Never past 99 % of an estimate: the bar ends when the test does.
            let cap = b.length().unwrap_or(0) * 99 / 100;
            b.set_position((b.position() + (secs * MS) as u64).min(cap));
        }
    }

    /// End the progress display.
    pub fn finish(&self) {
        if let Some((_, b)) = &self.test {
            b.finish_and_clear();
        }
        if let Some(p) = &self.plan {
            p.finish_and_clear();
        }
        if !self.quiet {
            eprintln!("[lab] done in {:.0} s", self.start.elapsed().as_secs_f64());
        }
    }
}

/// Estimated seconds a test takes on one DUT.
pub fn estimate(t: &Test) -> f64 {
    // `flows: N`: an inline engine's flows are created first.
    let prime = if t.flows > 0 {
        f64::from(t.flows) / t.prime_rate + t.drain
    } else {
        0.0
    };
    prime + estimate_trials(t)
}

fn estimate_trials(t: &Test) -> f64 {
    let per = t.trial_duration + t.drain + t.learn_wait + 0.1;
    let n = t.frame_sizes.len() as f64;
    let search = 1.0 + (t.max_trials - 1).min(trials_needed(t.resolution)) as f64;
    match t.kind {
        TestKind::Throughput | TestKind::FullMesh => {
            n * per * (search + t.latency_trial as u32 as f64)
        }
        TestKind::Latency => n * per * t.trials as f64,
        TestKind::Copp => n * (per + 1.0) * t.trials as f64,
        TestKind::BandwidthShare => n * per * t.trials as f64,
        // Writing and loading the records (~1 µs each on this bed, 1.5 s
        // for a million), the traffic, one `show subscriber` per sample.
        TestKind::Subscribers => {
            let p = t.provision.map_or((0.0, 0.0), |p| {
                (f64::from(p.subscribers), f64::from(p.sample))
            });
            n * (per + p.0 * 3e-6 + p.1 * 0.02)
        }
        TestKind::Disruption => n * per * t.trials as f64,
        TestKind::BackToBack => n * (t.drain + t.learn_wait + 0.3) * search,
        TestKind::FrameLoss => n * per * (1 + t.steps.len()) as f64,
        TestKind::Holb => n * per,
        TestKind::AddressCapacity | TestKind::LearningRate | TestKind::LearningCheck => {
            let one = 2.0 * t.addresses as f64 / t.learn_rate + 2.0 * t.learn_wait + t.drain + 0.3;
            let k = if t.kind == TestKind::LearningCheck {
                t.trials as f64
            } else if t.search_addresses || t.kind == TestKind::LearningRate {
                search
            } else {
                1.0
            };
            one * k
        }
        TestKind::Multicast => {
            let delay = t
                .multicast
                .as_ref()
                .filter(|m| m.join_leave)
                .map_or(0.0, |m| {
                    1.5 + 2.0 * m.leave_wait.max(t.learn_wait) + t.drain
                });
            let trials = if t.rate.is_some() {
                t.trials as f64
            } else {
                search + t.latency_trial as u32 as f64
            };
            n * (per * trials + delay)
        }
        TestKind::Convergence => {
            let c = t.convergence.as_ref();
            let restore = c.map_or(0.0, |_| 1.0);
            let one = t.trial_duration
                + t.drain
                + t.addresses as f64 / t.learn_rate
                + t.learn_wait
                + 0.6
                + restore;
            let search = if t.rate.is_none() {
                (1.0 + search) * (1.0 + t.drain) + t.addresses as f64 / t.learn_rate
            } else {
                0.0
            };
            n * (one * t.trials as f64 + search)
        }
    }
}

/// Everything a procedure needs.
pub struct Ctx<'a> {
    /// The DUT.
    pub dut: &'a Dut,
    /// The tester.
    pub tester: &'a mut Tester,
    /// Progress line.
    pub progress: &'a mut Progress,
    /// Counter making address ranges unique per trial.
    pub salt: u8,
}

/// Throughput pass rule: loss within tolerance and, when the test sets a
/// latency limit, median latency within it (a DUT that buffers a growing
/// backlog loses nothing in a short trial, but its latency gives it away).
pub(crate) fn pass_rate(r: &TrialResult, t: &Test) -> bool {
    pass(r, t.loss_tolerance)
        && t.latency_limit_ms
            .is_none_or(|l| (r.latency.p50_ns as f64) <= l * 1e6)
}

fn pass(r: &TrialResult, tol: f64) -> bool {
    r.lost >= 0 && r.loss_ratio <= tol && r.tester_rx_drops == 0 && r.sent > 0
}

impl Ctx<'_> {
    fn layer3(&self, t: &Test) -> bool {
        t.layer == Some(3) || (t.layer.is_none() && self.dut.spec.driver == Driver::LinuxRouter)
    }

    /// Layer-3 addresses of a stream from port `tx` to port `rx`: with
    /// synthetic routes, one destination in each route whose gateway is
    /// the host on `rx` (in the routes' scattered order, so consecutive
    /// frames hit different prefixes all over the table); without, the
    /// host on `rx` itself.
    fn l3_addrs(&self, t: &Test, tx: usize, rx: usize) -> Arc<[L3]> {
        if t.flows > 0 {
            // Port 1 is the subscriber side (an inline pair's sw1).
            let _ = rx;
            return crate::flowset::addrs(t.family, t.flows, t.subscribers, tx == 0);
        }
        let v: Vec<L3> = match t.family {
            Family::Ipv4 => {
                let src = host_ip(tx);
                self.dut
                    .routes4
                    .iter()
                    .filter(|r| r.port == rx)
                    .map(|r| L3::V4 {
                        src,
                        dst: r.dest.octets(),
                    })
                    .collect()
            }
            Family::Ipv6 => {
                let src = host_ip6(tx);
                self.dut
                    .routes6
                    .iter()
                    .filter(|r| r.port == rx)
                    .map(|r| L3::V6 {
                        src,
                        dst: r.dest.octets(),
                    })
                    .collect()
            }
        };
        if !v.is_empty() {
            return v.into();
        }
        Arc::new([match t.family {
            Family::Ipv4 => L3::V4 {
                src: host_ip(tx),
                dst: host_ip(rx),
            },
            Family::Ipv6 => L3::V6 {
                src: host_ip6(tx),
                dst: host_ip6(rx),
            },
        }])
    }

    /// A stream from port `tx` to port `rx`.
    pub(crate) fn stream(&self, t: &Test, fs: &FrameSize, tx: usize, rx: usize) -> Stream {
        let l3 = self.layer3(t);
        let hosts = if l3 { 1 } else { t.hosts };
        let dst = if l3 && !self.dut.port_macs.is_empty() {
            self.dut.port_macs[tx]
        } else {
            host_mac(rx)
        };
        // A routing DUT delivers to the host's MAC with the TTL decremented
        // once per router.
        let arrival = l3.then(|| Arrival {
            dst_mac: host_mac(rx),
            ttl: TTL - self.dut.routers(),
            vlan: None,
        });
        Stream {
            tx,
            expect: Some(rx),
            also: None,
            src: host_mac(tx),
            src_count: hosts,
            dst,
            dst_count: hosts,
            sizes: fs.sizes.clone(),
            l3: l3.then(|| self.l3_addrs(t, tx, rx)),
            arrival,
            // `vlans: N`: 802.1Q tags FIRST_VLAN.. cycled per frame (layer 2).
            vlan: (t.vlans > 0 && !l3).then_some((crate::plan::FIRST_VLAN, t.vlans)),
            receivers: None,
        }
    }

    /// `flows: N` through an inline engine, before the test's first
    /// trial: every flow's first frame both ways at `prime-rate`, so the
    /// trials measure the engine holding N established flows (the inline
    /// report's concurrent flows), not creating them. Losses here only
    /// leave a flow to be created by a trial. Returns a note for the row.
    pub(crate) fn prime_flows(&mut self, t: &Test, fs: &FrameSize) -> Result<String, LabError> {
        let streams = vec![self.stream(t, fs, 0, 1), self.stream(t, fs, 1, 0)];
        let spec = TrialSpec {
            streams,
            rates: vec![Some(t.prime_rate), Some(t.prime_rate)],
            limit: Limit::Frames(u64::from(t.flows)),
            drain: t.drain,
            burst: None,
        };
        self.tester.l3_offset = Some(0);
        let t0 = Instant::now();
        let r = self.tester.run(&spec);
        // The trials start again from the first flow.
        self.tester.l3_offset = Some(0);
        let r = r?;
        self.progress
            .advance(f64::from(t.flows) / t.prime_rate + t.drain);
        Ok(format!(
            "{} flows of {} subscribers created first ({} frames each way at {:.0} frames/s, {:.1} s; {} lost)",
            t.flows,
            t.subscribers,
            t.flows,
            t.prime_rate,
            t0.elapsed().as_secs_f64(),
            r.lost.max(0)
        ))
    }

    /// The streams of a test from port `tx` to port `rx`: one
    /// ([`Ctx::stream`]), or with tagged layer-3 frames (`vlans: N`, the
    /// L3VPN customers) one per VLAN ([`Ctx::vlan_stream`]).
    pub(crate) fn streams(&self, t: &Test, fs: &FrameSize, tx: usize, rx: usize) -> Vec<Stream> {
        if t.vlans > 0 && self.layer3(t) {
            (0..t.vlans)
                .map(|i| self.vlan_stream(t, fs, tx, rx, i))
                .collect()
        } else {
            vec![self.stream(t, fs, tx, rx)]
        }
    }

    /// A stream from port `tx` to port `rx` in VLAN `FIRST_VLAN + i`: on
    /// layer 3, from and to that VLAN's customer hosts (one per VRF, the
    /// same addresses in every VRF, their own MACs), through the gateway
    /// MAC of that VLAN's subinterface on an L3VPN PE, expected to arrive
    /// in the same VLAN (a frame in another VLAN leaked into another VRF:
    /// malformed, so lost).
    pub(crate) fn vlan_stream(
        &self,
        t: &Test,
        fs: &FrameSize,
        tx: usize,
        rx: usize,
        i: u16,
    ) -> Stream {
        let vid = crate::plan::FIRST_VLAN + i;
        let mut s = self.stream(t, fs, tx, rx);
        s.vlan = Some((vid, 1));
        if !self.layer3(t) {
            return s;
        }
        s.src = vlan_host_mac(tx, vid);
        s.dst = self
            .dut
            .vlan_macs
            .get(tx)
            .and_then(|m| m.get(i as usize))
            .copied()
            .unwrap_or_else(|| vlan_host_mac(rx, vid));
        s.arrival = s.arrival.map(|a| Arrival {
            dst_mac: vlan_host_mac(rx, vid),
            vlan: Some(vid),
            ..a
        });
        s
    }

    /// The learning phase and `learn-wait` pause of a trial (procedures
    /// that run their trials themselves).
    pub(crate) fn learn_for(&mut self, t: &Test, ports: usize) -> Result<(), LabError> {
        self.learn(t, ports)
    }

    fn learn(&mut self, t: &Test, ports: usize) -> Result<(), LabError> {
        // A router learns nothing from broadcast frames (Lanyard drops them
        // on routed ports as malformed): only the pause between trials.
        if !(self.layer3(t) && self.dut.routes_packets()) {
            let v: Vec<(usize, Mac, u32)> = (0..ports).map(|p| (p, host_mac(p), t.hosts)).collect();
            self.tester.learn(&v)?;
        }
        // Multicast: the receivers' membership reports; learn-wait lets
        // the joins take before traffic (RFC 3918 section 4).
        if let Some(m) = &t.multicast {
            self.mc_membership(m, false)?;
        }
        sleep_checked(t.learn_wait)
    }

    pub(crate) fn trial(
        &mut self,
        t: &Test,
        streams: &[Stream],
        rates: Vec<Option<f64>>,
        limit: Limit,
        learn_ports: usize,
    ) -> Result<TrialResult, LabError> {
        if learn_ports > 0 {
            self.learn(t, learn_ports)?;
            if self.layer3(t) && self.dut.spec.static_neighbours == Some(false) {
                // Warm-up: a few frames per stream so the router resolves the
                // tester hosts by ARP / ND (answered by the analyzer) before
                // counting; again while frames are lost (IPv6 resolution can
                // wait for the router's link-local address to finish DAD).
                let warm = TrialSpec {
                    streams: streams.to_vec(),
                    rates: rates
                        .iter()
                        .map(|r| r.map(|_| 1000.0).or(Some(1000.0)))
                        .collect(),
                    limit: Limit::Frames(20),
                    drain: 0.2,
                    burst: Some(1),
                };
                for _ in 0..5 {
                    if self.tester.run(&warm)?.lost == 0 {
                        break;
                    }
                }
            }
        }
        let spec = TrialSpec {
            streams: streams.to_vec(),
            rates,
            limit,
            drain: t.drain,
            burst: t.burst,
        };
        let r = self.tester.run(&spec)?;
        self.progress
            .advance(t.trial_duration + t.drain + t.learn_wait);
        Ok(r)
    }

    /// Run `test` at frame size `fs`, filling in `row`.
    pub fn run_test(
        &mut self,
        t: &Test,
        fs: &FrameSize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        match t.kind {
            TestKind::Throughput if t.mirror_sessions > 0 => self.mirror_throughput(t, fs, row),
            TestKind::Throughput => {
                let mut streams = self.streams(t, fs, 0, 1);
                if t.bidirectional {
                    streams.extend(self.streams(t, fs, 1, 0));
                }
                self.throughput(t, &streams, 2, row)
            }
            TestKind::FullMesh => {
                let streams: Vec<_> = t
                    .mesh
                    .pairs(t.ports)
                    .into_iter()
                    .map(|(a, b)| self.stream(t, fs, a, b))
                    .collect();
                self.throughput(t, &streams, t.ports, row)
            }
            TestKind::Latency => self.latency(t, fs, row),
            TestKind::BackToBack => self.back_to_back(t, fs, row),
            TestKind::FrameLoss => self.frame_loss(t, fs, row),
            TestKind::Holb => self.holb(t, fs, row),
            TestKind::AddressCapacity => self.capacity(t, row),
            TestKind::LearningRate => self.learning_rate(t, row),
            TestKind::LearningCheck => self.learning_check(t, row),
            TestKind::Convergence => self.convergence(t, fs, row),
            TestKind::Multicast => self.multicast(t, fs, row),
            TestKind::Copp => self.copp(t, fs, row),
            TestKind::BandwidthShare => self.bandwidth_share(t, fs, row),
            TestKind::Subscribers => self.subscribers(t, fs, row),
            TestKind::Disruption => self.disruption(t, fs, row),
        }
    }

    fn senders(streams: &[Stream], ports: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..ports)
            .filter(|p| streams.iter().any(|s| s.tx == *p))
            .collect();
        v.dedup();
        v
    }

    fn rates_for(streams: &[Stream], ports: usize, rate: Option<f64>) -> Vec<Option<f64>> {
        let senders = Self::senders(streams, ports);
        (0..ports)
            .map(|p| if senders.contains(&p) { rate } else { None })
            .collect()
    }

    /// The generator's own cost per frame and rate on a plain veth pair
    /// in the tester's namespace (no DUT), for frames of `sizes`; measured
    /// once per size and run (see [`held_back`]).
    fn generator_baseline(&mut self, sizes: &[u16]) -> Option<Baseline> {
        static CACHE: std::sync::Mutex<Vec<(Vec<u16>, Baseline)>> =
            std::sync::Mutex::new(Vec::new());
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, b)) = cache.iter().find(|(s, _)| s == sizes) {
            return Some(*b);
        }
        let b = measure_baseline(&self.dut.topo.tester, sizes).ok()?;
        cache.push((sizes.to_vec(), b));
        Some(b)
    }

    /// RFC 2544 throughput: one unpaced trial, then a search of paced
    /// rates; latency from the passing trial at the result.
    ///
    /// - The unpaced trial lost frames: bisection below its rate, where a
    ///   paced trial the DUT held short of its rate (refused sends) fails.
    /// - It lost none, and the generator was the limit (it ran at its own
    ///   speed, nothing pushed back): that rate, marked generator-limited.
    /// - It lost none because the DUT held the sender back (see
    ///   [`held_back`]: a kernel DUT forwarding inside the sender's system
    ///   call, a full socket buffer, refused sends): the unpaced rate is
    ///   only a lower bound that moves with the machine's load, so paced
    ///   rates above it are searched. A paced trial passes only when it
    ///   lost nothing *and* offered its rate (≥ 98 %).
    pub(crate) fn throughput(
        &mut self,
        t: &Test,
        streams: &[Stream],
        ports: usize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        let dur = Limit::Duration(t.trial_duration);
        let senders = Self::senders(streams, ports).len() as f64;
        let r0 = self.trial(
            t,
            streams,
            Self::rates_for(streams, ports, None),
            dur,
            ports,
        )?;
        let max_port = r0.offered_fps / senders;
        let p0 = pass_rate(&r0, t);
        row.trials.push(TrialRecord::new("max", None, &r0, p0));
        let mut best: Option<TrialResult> = None;
        let mut generator_limited = false;
        let mut lo = 0.0;
        let mut paced_search = false;
        if p0 {
            let base = self.generator_baseline(&streams[0].sizes);
            match held_back(&r0, base.as_ref(), true) {
                None => {
                    generator_limited = true;
                    lo = max_port;
                    best = Some(r0.clone());
                    row.detail = json!({"unpaced": "generator-limited",
                        "generator_baseline": base});
                }
                Some(why) => {
                    // Search paced rates from the unpaced rate up to the
                    // generator's own (a quarter above the unpaced rate at
                    // least). When the sender blocked, the unpaced rate
                    // counts frames the DUT only queued (sent / time with a
                    // deep queue behind): search below it instead.
                    paced_search = true;
                    let blocked = r0.tx_refused == 0 && r0.tx_usage.voluntary > 20;
                    let (from, top) = if blocked {
                        (0.0, max_port * 1.02)
                    } else {
                        (
                            max_port,
                            base.map(|b| b.fps / senders)
                                .unwrap_or(0.0)
                                .max(max_port * 1.25),
                        )
                    };
                    let mut passed: Vec<(f64, TrialResult)> = Vec::new();
                    let mut failed: Vec<(f64, TrialResult)> = Vec::new();
                    let mut recs = Vec::new();
                    let search = |lo, hi, res, n, f| {
                        if blocked {
                            bisect(lo, hi, res, n, f)
                        } else {
                            gallop(lo, hi, res, n, f)
                        }
                    };
                    let out = search(from, top, t.resolution, t.max_trials - 1, |rate| {
                        self.progress.label(format!(
                            "{} {} {} @ {:.0} fps/port (paced, above the unpaced rate)",
                            self.dut.spec.name, row.test, row.frame_size, rate
                        ));
                        let r = self.trial(
                            t,
                            streams,
                            Self::rates_for(streams, ports, Some(rate)),
                            dur,
                            ports,
                        )?;
                        let ok = pass_rate(&r, t) && !r.generator_limited;
                        recs.push(TrialRecord::new("search", Some(rate), &r, ok));
                        if ok {
                            passed.push((rate, r));
                        } else {
                            failed.push((rate, r));
                        }
                        Ok::<bool, LabError>(ok)
                    })?;
                    row.trials.extend(recs);
                    lo = out.lo;
                    best = passed
                        .into_iter()
                        .find(|(r, _)| *r == out.lo)
                        .map(|(_, r)| r)
                        .or((!blocked).then(|| r0.clone()));
                    // Who stopped the search: the DUT (loss, or it held
                    // the sender back again) or the generator (nothing lost
                    // and nothing pushed back: it could not send faster).
                    let stop = failed.iter().find(|(r, _)| *r == out.hi).map(|(_, r)| r);
                    let dut_limit = stop.and_then(|r| {
                        if !pass_rate(r, t) {
                            Some("frames lost".to_string())
                        } else {
                            held_back(r, base.as_ref(), false)
                        }
                    });
                    generator_limited = dut_limit.is_none();
                    row.detail = json!({
                        "unpaced": "held back by the DUT",
                        "unpaced_fps_per_port": max_port,
                        "held_back": why,
                        "search": out,
                        "stopped_by": dut_limit.unwrap_or_else(|| "the generator".into()),
                        "generator_baseline": base,
                    });
                    row.notes.push(format!(
                        "the unpaced trial lost nothing at {:.0} fps but the DUT held the sender back ({why}): paced rates searched above it",
                        r0.offered_fps
                    ));
                }
            }
        } else {
            let mut passed: Vec<(f64, TrialResult)> = Vec::new();
            let mut recs = Vec::new();
            let out = bisect(0.0, max_port, t.resolution, t.max_trials - 1, |rate| {
                self.progress.label(format!(
                    "{} {} {} @ {:.0} fps/port",
                    self.dut.spec.name, row.test, row.frame_size, rate
                ));
                let r = self.trial(
                    t,
                    streams,
                    Self::rates_for(streams, ports, Some(rate)),
                    dur,
                    ports,
                )?;
                // Short of its rate because the DUT refused frames: the
                // DUT did not take this rate, whatever it lost (a tbf that
                // drops a burst when unpaced pushes back when paced).
                let ok = pass_rate(&r, t) && !(r.generator_limited && r.tx_refused > 0);
                recs.push(TrialRecord::new("search", Some(rate), &r, ok));
                if ok {
                    passed.push((rate, r));
                }
                Ok::<bool, LabError>(ok)
            })?;
            row.trials.extend(recs);
            lo = out.lo.max(lo);
            row.detail = json!({"search": out, "max_offered_fps_per_port": max_port});
            best = passed
                .into_iter()
                .find(|(r, _)| *r == out.lo)
                .map(|(_, r)| r)
                .or(best);
        }
        if lo > 0.0 && (t.latency_trial || t.confirm) {
            let r = self.trial(
                t,
                streams,
                Self::rates_for(streams, ports, Some(lo)),
                dur,
                ports,
            )?;
            let ok = pass_rate(&r, t);
            row.trials
                .push(TrialRecord::new("latency", Some(lo), &r, ok));
            if t.confirm && !ok {
                row.notes
                    .push("confirmation trial at the result lost frames".into());
            }
            best = Some(r);
        }
        let fps = match &best {
            Some(b) if generator_limited && !paced_search => b.offered_fps,
            Some(b) if paced_search && lo <= max_port && b.intended_fps == 0.0 => {
                // Nothing paced passed above the unpaced rate: that rate.
                b.offered_fps
            }
            Some(b) if b.generator_limited => b.offered_fps.min(lo * senders),
            Some(_) => lo * senders,
            None => 0.0,
        };
        row.throughput_fps = Some(fps);
        row.l2_mbps = Some(fps * (fs_avg(streams) - 4.0) * 8.0 / 1e6);
        row.generator_limited = generator_limited
            || (!paced_search && best.as_ref().is_some_and(|b| b.generator_limited));
        if let Some(b) = &best {
            row.loss_ratio = Some(b.loss_ratio);
            row.latency = Some(b.latency);
        }
        if generator_limited && !paced_search {
            row.notes
                .push("no loss at the generator's maximum rate (generator-limited)".into());
        } else if generator_limited {
            row.notes.push(
                "the generator could not send faster than the result (generator-limited)".into(),
            );
        }
        Ok(())
    }

    fn latency(&mut self, t: &Test, fs: &FrameSize, row: &mut ResultRow) -> Result<(), LabError> {
        let mut streams = self.streams(t, fs, 0, 1);
        if t.bidirectional {
            streams.extend(self.streams(t, fs, 1, 0));
        }
        let rate = match t.load {
            // Line rate: 20 B of preamble and gap per frame on the wire.
            Some(f) => Some(f * t.line_rate_mbps * 1e6 / ((fs.average() + 20.0) * 8.0)),
            None => t.rate,
        };
        if let Some(f) = t.load {
            row.notes.push(format!(
                "{:.0} % load = {:.0} fps per port ({} Mbit/s line rate at this size)",
                f * 100.0,
                rate.unwrap_or(0.0),
                t.line_rate_mbps
            ));
        }
        let mut h = Vec::new();
        for _ in 0..t.trials {
            let r = self.trial(
                t,
                &streams,
                vec![rate, if t.bidirectional { rate } else { None }],
                Limit::Duration(t.trial_duration),
                2,
            )?;
            row.trials
                .push(TrialRecord::new("latency", rate, &r, pass(&r, 0.0)));
            h.push(r);
        }
        let last = h.last().cloned();
        if let Some(r) = last {
            row.throughput_fps = Some(r.offered_fps);
            row.loss_ratio = Some(r.loss_ratio);
            row.latency = Some(r.latency);
            row.generator_limited = r.generator_limited;
        }
        Ok(())
    }

    fn back_to_back(
        &mut self,
        t: &Test,
        fs: &FrameSize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        let streams = self.streams(t, fs, 0, 1);
        let probe = self.trial(
            t,
            &streams,
            vec![None, None],
            Limit::Duration(t.trial_duration.min(0.5)),
            2,
        )?;
        let kmax = (probe.offered_fps * t.trial_duration).max(1.0);
        let mut offered = probe.offered_fps;
        let r0 = self.trial(t, &streams, vec![None, None], Limit::Frames(kmax as u64), 2)?;
        let ok0 = pass(&r0, 0.0);
        row.trials
            .push(TrialRecord::new("burst", Some(kmax), &r0, ok0));
        let k = if ok0 {
            row.notes
                .push("no loss in the longest burst tried (generator-limited)".into());
            kmax
        } else {
            let mut recs = Vec::new();
            let out = bisect(0.0, kmax, t.resolution, t.max_trials - 1, |k| {
                let r = self.trial(
                    t,
                    &streams,
                    vec![None, None],
                    Limit::Frames(k.max(1.0) as u64),
                    2,
                )?;
                let ok = pass(&r, 0.0);
                offered = r.offered_fps;
                recs.push(TrialRecord::new("burst", Some(k), &r, ok));
                Ok::<bool, LabError>(ok)
            })?;
            row.trials.extend(recs);
            out.lo
        };
        row.value = Some(k.floor());
        row.unit = Some("frames".into());
        row.detail = json!({"burst_seconds": k / offered.max(1.0), "offered_fps": offered});
        row.throughput_fps = Some(offered);
        Ok(())
    }

    fn frame_loss(
        &mut self,
        t: &Test,
        fs: &FrameSize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        let streams = self.streams(t, fs, 0, 1);
        let dur = Limit::Duration(t.trial_duration);
        let r0 = self.trial(t, &streams, vec![None, None], dur, 2)?;
        let max = r0.offered_fps;
        row.trials
            .push(TrialRecord::new("max", None, &r0, pass(&r0, 0.0)));
        let mut curve =
            vec![json!({"step": "max", "offered_fps": max, "loss_ratio": r0.loss_ratio})];
        for &s in &t.steps {
            let r = self.trial(t, &streams, vec![Some(s * max), None], dur, 2)?;
            curve
                .push(json!({"step": s, "offered_fps": r.offered_fps, "loss_ratio": r.loss_ratio}));
            row.trials
                .push(TrialRecord::new("step", Some(s * max), &r, pass(&r, 0.0)));
        }
        row.throughput_fps = Some(max);
        row.loss_ratio = Some(r0.loss_ratio);
        row.value = Some(r0.loss_ratio * 100.0);
        row.unit = Some("% loss at max".into());
        row.detail = json!({ "curve": curve });
        Ok(())
    }

    fn holb(&mut self, t: &Test, fs: &FrameSize, row: &mut ResultRow) -> Result<(), LabError> {
        // A=0 sends half to U=2 and half to C=3; B=1 sends all to C.
        let r = t.rate.unwrap_or(50_000.0);
        let streams = vec![
            self.stream(t, fs, 0, 2),
            self.stream(t, fs, 0, 3),
            self.stream(t, fs, 1, 3),
        ];
        let res = self.trial(
            t,
            &streams,
            vec![Some(r), Some(r), None, None],
            Limit::Duration(t.trial_duration),
            4,
        )?;
        let u = &res.streams[0];
        let c_sent = res.streams[1].sent + res.streams[2].sent;
        let c_lost = res.streams[1].lost + res.streams[2].lost;
        row.trials
            .push(TrialRecord::new("holb", Some(r), &res, u.lost == 0));
        row.pass = Some(u.lost == 0);
        row.value = Some(if u.sent > 0 {
            u.lost as f64 / u.sent as f64 * 100.0
        } else {
            0.0
        });
        row.unit = Some("% loss on uncongested port".into());
        row.loss_ratio = Some(res.loss_ratio);
        row.latency = Some(u.latency);
        row.throughput_fps = Some(res.offered_fps);
        row.generator_limited = res.generator_limited;
        row.detail = json!({
            "rate_per_port_fps": r,
            "uncongested": {"sent": u.sent, "lost": u.lost},
            "congested": {"sent": c_sent, "lost": c_lost,
                          "loss_percent": if c_sent > 0 { c_lost as f64 / c_sent as f64 * 100.0 } else { 0.0 }},
        });
        Ok(())
    }

    /// One address-caching trial with `n` addresses learned at `rate`
    /// (None = as fast as possible). Ports: learning 0, test 1, monitor 2.
    /// Returns (frames received on the learning port, frames on the monitor
    /// port, frames sent by the test port, learning-phase offered rate).
    fn cache_trial(
        &mut self,
        t: &Test,
        n: u32,
        rate: Option<f64>,
        row: &mut ResultRow,
    ) -> Result<(u64, u64, u64, f64), LabError> {
        self.dut.flush_macs();
        self.salt = self.salt.wrapping_add(1);
        let base: Mac = [0x02, 0x4d, self.salt, 0, 0, 0];
        let sizes = vec![64u16];
        // Test and monitor ports make themselves known.
        self.tester
            .learn(&[(1, host_mac(1), 1), (2, host_mac(2), 1)])?;
        sleep_checked(0.1)?;
        let learn = Stream {
            tx: 0,
            expect: Some(1),
            also: None,
            src: base,
            src_count: n,
            dst: host_mac(1),
            dst_count: 1,
            sizes: sizes.clone(),
            l3: None,
            arrival: None,
            vlan: None,
            receivers: None,
        };
        let spec = TrialSpec {
            streams: vec![learn],
            rates: vec![rate, None, None],
            limit: Limit::Frames(n as u64),
            drain: 0.1,
            burst: t.burst,
        };
        let r1 = self.tester.run(&spec)?;
        row.trials.push(TrialRecord::new(
            "learn",
            rate.map(|r| r.min(f64::MAX)),
            &r1,
            true,
        ));
        sleep_checked(t.learn_wait)?;
        let test = Stream {
            tx: 1,
            expect: Some(0),
            also: None,
            src: host_mac(1),
            src_count: 1,
            dst: base,
            dst_count: n,
            sizes,
            l3: None,
            arrival: None,
            vlan: None,
            receivers: None,
        };
        let spec = TrialSpec {
            streams: vec![test],
            rates: vec![None, Some(t.rate.unwrap_or(t.learn_rate)), None],
            limit: Limit::Frames(n as u64),
            drain: t.drain,
            burst: t.burst,
        };
        let r2 = self.tester.run(&spec)?;
        let mon = r2.per_port_rx[2];
        let ok = r2.received == n as u64 && mon == 0 && r2.tester_rx_drops == 0;
        row.trials
            .push(TrialRecord::new("test", Some(n as f64), &r2, ok));
        self.progress
            .advance(2.0 * n as f64 / t.learn_rate + 2.0 * t.learn_wait + t.drain + 0.3);
        Ok((r2.received, mon, r2.sent, r1.offered_fps))
    }

    fn capacity(&mut self, t: &Test, row: &mut ResultRow) -> Result<(), LabError> {
        let n = t.addresses;
        self.progress.label(format!(
            "{} {} {} addresses",
            self.dut.spec.name, row.test, n
        ));
        let (rx, mon, sent, _) = self.cache_trial(t, n, Some(t.learn_rate), row)?;
        let ok = rx == n as u64 && mon == 0;
        let mut cap = if ok { n as f64 } else { 0.0 };
        if !ok && t.search_addresses {
            let out = bisect(0.0, n as f64, t.resolution, t.max_trials - 1, |k| {
                let k = (k as u32).max(1);
                let (rx, mon, _, _) = self.cache_trial(t, k, Some(t.learn_rate), row)?;
                Ok::<bool, LabError>(rx == k as u64 && mon == 0)
            })?;
            cap = out.lo.floor();
            row.detail = json!({"search": out});
        }
        row.pass = Some(ok);
        row.value = Some(cap);
        row.unit = Some("addresses".into());
        let d = json!({"addresses": n, "delivered_to_learning_port": rx, "flooded_to_monitor": mon,
                       "sent": sent, "learn_rate_fps": t.learn_rate});
        merge(&mut row.detail, d);
        if !ok && !t.search_addresses {
            row.notes.push(format!(
                "{n} addresses: {rx} delivered, {mon} flooded to the monitor port"
            ));
        }
        Ok(())
    }

    fn learning_rate(&mut self, t: &Test, row: &mut ResultRow) -> Result<(), LabError> {
        let n = t.addresses;
        let (rx, mon, _, max) = self.cache_trial(t, n, None, row)?;
        let ok0 = rx == n as u64 && mon == 0;
        let rate = if ok0 {
            row.notes.push(
                "learned every address at the generator's maximum rate (generator-limited)".into(),
            );
            max
        } else {
            let out = bisect(0.0, max, t.resolution, t.max_trials - 1, |r| {
                let (rx, mon, _, _) = self.cache_trial(t, n, Some(r.max(1.0)), row)?;
                Ok::<bool, LabError>(rx == n as u64 && mon == 0)
            })?;
            row.detail = json!({"search": out});
            out.lo
        };
        row.value = Some(rate);
        row.unit = Some("addresses/s".into());
        row.pass = Some(rate > 0.0);
        Ok(())
    }

    fn learning_check(&mut self, t: &Test, row: &mut ResultRow) -> Result<(), LabError> {
        let n = t.addresses;
        // The test and monitor ports announce their own MACs first: under a
        // limit they take two of the L entries (learning off: none).
        let learned = match self.dut.learn_limit() {
            Some(0) => 0,
            Some(l) => l.saturating_sub(2).min(n),
            None => n,
        };
        let expect_flood = (n - learned) as u64;
        let mut all_ok = true;
        let mut runs = Vec::new();
        for _ in 0..t.trials {
            let (rx, mon, sent, _) = self.cache_trial(t, n, Some(t.learn_rate), row)?;
            let ok = mon == expect_flood && rx == n as u64;
            all_ok &= ok;
            runs.push(
                json!({"sent": sent, "delivered_to_learning_port": rx, "flooded_to_monitor": mon}),
            );
            row.value = Some(mon as f64);
        }
        row.pass = Some(all_ok);
        row.unit = Some(format!("flooded (expected {expect_flood})"));
        row.detail = json!({"addresses": n, "expected_learned": learned, "expected_flooded": expect_flood, "runs": runs});
        Ok(())
    }
}

/// The generator alone on a plain veth pair: CPU time per frame of its
/// transmit thread, and its unpaced rate (frames/s).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Baseline {
    pub cost_us: f64,
    pub fps: f64,
}

/// Send unpaced for 0.3 s on a veth pair created for the purpose in the
/// tester's namespace `ns`, the analyzer receiving on the far end: the
/// cost of a frame with no DUT in its way (the `wire` DUT's path).
fn measure_baseline(ns: &str, sizes: &[u16]) -> Result<Baseline, LabError> {
    let (a, b) = ("lybase0", "lybase1");
    let _ = crate::netns::run("ip", &["-n", ns, "link", "del", a]);
    crate::netns::run(
        "ip",
        &[
            "-n", ns, "link", "add", a, "mtu", "9216", "type", "veth", "peer", "name", b, "mtu",
            "9216",
        ],
    )?;
    let result = (|| {
        for i in [a, b] {
            crate::netns::run("ip", &["-n", ns, "link", "set", i, "up"])?;
        }
        let mut tx = Tester::open(ns, &[a.to_string(), b.to_string()])?;
        let spec = TrialSpec {
            streams: vec![Stream {
                tx: 0,
                expect: Some(1),
                also: None,
                src: host_mac(0),
                src_count: 1,
                dst: host_mac(1),
                dst_count: 1,
                sizes: sizes.to_vec(),
                l3: None,
                arrival: None,
                vlan: None,
                receivers: None,
            }],
            rates: vec![None, None],
            limit: Limit::Duration(0.3),
            drain: 0.05,
            burst: None,
        };
        let r = tx.run(&spec)?;
        match tx_cost_us(&r) {
            Some(c) => Ok(Baseline {
                cost_us: c,
                fps: r.offered_fps,
            }),
            None => Err(LabError::Other("baseline: nothing sent".into())),
        }
    })();
    let _ = crate::netns::run("ip", &["-n", ns, "link", "del", a]);
    result
}

/// CPU microseconds the transmit thread spent per frame sent.
fn tx_cost_us(r: &TrialResult) -> Option<f64> {
    (r.sent > 0 && r.tx_usage.cpu_s > 0.0).then(|| r.tx_usage.cpu_s * 1e6 / r.sent as f64)
}

/// Per frame, the sender spending this many times the generator's own
/// CPU is the DUT's work done in the sender's system call (a kernel DUT on
/// veth forwards the frame there: bridge, router, tbf). Measured on the
/// development machine against the baseline with a receiver: the wire
/// about 1, the Linux bridge about 1.8, a tbf DUT 4-5 times.
pub const HELD_BACK_COST_RATIO: f64 = 2.5;

/// Why a trial's sender was held back by the DUT rather than limited by
/// its own speed, if it was: sends refused (the egress queue toward the
/// DUT full), blocking for socket-buffer space in an unpaced trial (frames
/// still queued in the DUT hold the sender's memory), or a per-frame CPU
/// cost [`HELD_BACK_COST_RATIO`] times the generator's own (`base`).
pub fn held_back(r: &TrialResult, base: Option<&Baseline>, unpaced: bool) -> Option<String> {
    if r.tx_refused > 0 {
        return Some(format!(
            "the kernel refused {} sends: the DUT's queue was full",
            r.tx_refused
        ));
    }
    if unpaced && r.tx_usage.voluntary > 20 {
        return Some(format!(
            "the sender blocked {} times waiting for buffer space the DUT still held",
            r.tx_usage.voluntary
        ));
    }
    let (cost, base) = (tx_cost_us(r)?, base?);
    (base.cost_us > 0.0 && cost > HELD_BACK_COST_RATIO * base.cost_us).then(|| {
        format!(
            "each frame cost the sender {cost:.1} us of CPU, {:.1} times the generator's own {:.1} us: the DUT forwards inside the sender's system call",
            cost / base.cost_us,
            base.cost_us
        )
    })
}

fn fs_avg(streams: &[Stream]) -> f64 {
    let s = &streams[0].sizes;
    s.iter().map(|&x| x as f64).sum::<f64>() / s.len() as f64
}

/// Add `b`'s keys to the object `a` (or replace a non-object `a`).
pub(crate) fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a.as_object_mut(), b) {
        (Some(o), serde_json::Value::Object(m)) => o.extend(m),
        (_, b) => *a = b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ThreadUsage;
    use crate::hist::LatencyStats;

    fn result(sent: u64, cpu_s: f64, voluntary: u64, refused: u64) -> TrialResult {
        TrialResult {
            nonce: 1,
            intended_fps: 0.0,
            offered_fps: sent as f64,
            tx_seconds: 1.0,
            sent,
            received: sent,
            lost: 0,
            loss_ratio: 0.0,
            duplicated: 0,
            reordered: 0,
            flooded: 0,
            malformed: 0,
            per_port_rx: vec![0, sent],
            per_port_tx: vec![sent, 0],
            tester_rx_drops: 0,
            generator_limited: false,
            tx_refused: refused,
            tx_usage: ThreadUsage {
                cpu_s,
                voluntary,
                involuntary: 0,
            },
            tx_late_ns: None,
            latency: LatencyStats::default(),
            streams: Vec::new(),
            mark_ns: None,
            tx_stall: None,
            per_port_latency: None,
        }
    }

    #[test]
    fn tells_a_dut_that_pushes_back_from_a_slow_generator() {
        let base = Baseline {
            cost_us: 2.5,
            fps: 300_000.0,
        };
        // The generator at its own cost per frame: its own limit.
        assert_eq!(
            held_back(&result(140_000, 0.36, 0, 0), Some(&base), true),
            None
        );
        // A bridge: some of the DUT's work in the sender, still the generator.
        assert_eq!(
            held_back(&result(107_000, 0.36, 0, 0), Some(&base), true),
            None
        );
        // A tbf DUT: 13 us per frame in the sender's system call.
        let why = held_back(&result(32_000, 0.42, 0, 0), Some(&base), true).unwrap();
        assert!(why.contains("inside the sender's system call"), "{why}");
        // Refused sends or blocking for buffer space: the DUT, whatever the cost.
        assert!(held_back(&result(50_000, 0.1, 0, 3), None, true).is_some());
        assert!(held_back(&result(50_000, 0.1, 500, 0), None, true).is_some());
        // A paced trial sleeps by design: sleeping says nothing there.
        assert_eq!(held_back(&result(50_000, 0.1, 500, 0), None, false), None);
        // No baseline, no CPU signal.
        assert_eq!(held_back(&result(32_000, 0.42, 0, 0), None, true), None);
    }
}
