//! Test procedures (RFC 2544, RFC 2889) on one DUT.

use crate::dut::{host_ip, host_mac, Dut};
use crate::engine::{Limit, Stream, Tester, TrialResult, TrialSpec};
use crate::netns::sleep_checked;
use crate::plan::{Driver, Family, FrameSize, Test, TestKind};
use crate::report::{ResultRow, TrialRecord};
use crate::search::{bisect, trials_needed};
use crate::sig::{host_ip6, Arrival, Mac, L3, TTL};
use crate::LabError;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Progress line with ETA on stderr. On a terminal it redraws one line; in
/// a log (CI, a pipe) it prints one plain line each time the label changes,
/// so logs stay readable.
pub struct Progress {
    start: Instant,
    total: f64,
    done: f64,
    quiet: bool,
    label: String,
    tty: bool,
}

impl Progress {
    /// `total` is the estimated run time in seconds.
    pub fn new(total: f64, quiet: bool) -> Progress {
        Progress {
            start: Instant::now(),
            total: total.max(1.0),
            done: 0.0,
            quiet,
            label: String::new(),
            // SAFETY: isatty only inspects the descriptor.
            tty: unsafe { libc::isatty(2) } == 1,
        }
    }

    /// Set what is running now.
    pub fn label(&mut self, l: String) {
        let changed = l != self.label;
        self.label = l;
        if self.tty {
            self.draw();
        } else if changed && !self.quiet {
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
        if self.tty {
            self.draw();
        }
    }

    fn draw(&self) {
        if self.quiet {
            return;
        }
        let el = self.start.elapsed().as_secs_f64();
        let frac = self.done / self.total;
        let eta = if frac > 0.02 {
            el / frac - el
        } else {
            self.total - el
        };
        let bar = (frac * 20.0) as usize;
        eprint!(
            "\r\x1b[K[{}{}] {:3.0}% {:>4.0}s ETA {:>4.0}s  {}",
            "#".repeat(bar),
            ".".repeat(20 - bar.min(20)),
            frac * 100.0,
            el,
            eta.max(0.0),
            self.label
        );
    }

    /// End the progress line.
    pub fn finish(&self) {
        if !self.quiet {
            eprintln!(
                "{}[lab] done in {:.0} s",
                if self.tty { "\r\x1b[K" } else { "" },
                self.start.elapsed().as_secs_f64()
            );
        }
    }
}

/// Estimated seconds a test takes on one DUT.
pub fn estimate(t: &Test) -> f64 {
    let per = t.trial_duration + t.drain + t.learn_wait + 0.1;
    let n = t.frame_sizes.len() as f64;
    let search = 1.0 + (t.max_trials - 1).min(trials_needed(t.resolution)) as f64;
    match t.kind {
        TestKind::Throughput | TestKind::FullMesh => {
            n * per * (search + t.latency_trial as u32 as f64)
        }
        TestKind::Latency => n * per * t.trials as f64,
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
    fn stream(&self, t: &Test, fs: &FrameSize, tx: usize, rx: usize) -> Stream {
        let l3 = self.layer3(t);
        let hosts = if l3 { 1 } else { t.hosts };
        let dst = if l3 && !self.dut.port_macs.is_empty() {
            self.dut.port_macs[tx]
        } else {
            host_mac(rx)
        };
        // A routing DUT delivers to the host's MAC with the TTL decremented.
        let arrival = l3.then(|| Arrival {
            dst_mac: host_mac(rx),
            ttl: if self.dut.routes_packets() {
                TTL - 1
            } else {
                TTL
            },
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
            receivers: None,
        }
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
            TestKind::Throughput => {
                let mut streams = vec![self.stream(t, fs, 0, 1)];
                if t.bidirectional {
                    streams.push(self.stream(t, fs, 1, 0));
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

    /// RFC 2544 throughput: one unpaced trial gives the upper bound, then
    /// bisection; latency from the passing trial at the result.
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
        if p0 {
            generator_limited = true;
            lo = max_port;
            best = Some(r0.clone());
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
                let ok = pass_rate(&r, t);
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
            Some(b) if generator_limited => b.offered_fps,
            Some(b) if b.generator_limited => b.offered_fps.min(lo * senders),
            Some(_) => lo * senders,
            None => 0.0,
        };
        row.throughput_fps = Some(fps);
        row.l2_mbps = Some(fps * (fs_avg(streams) - 4.0) * 8.0 / 1e6);
        row.generator_limited =
            generator_limited || best.as_ref().is_some_and(|b| b.generator_limited);
        if let Some(b) = &best {
            row.loss_ratio = Some(b.loss_ratio);
            row.latency = Some(b.latency);
        }
        if generator_limited {
            row.notes
                .push("no loss at the generator's maximum rate (generator-limited)".into());
        }
        Ok(())
    }

    fn latency(&mut self, t: &Test, fs: &FrameSize, row: &mut ResultRow) -> Result<(), LabError> {
        let streams = vec![self.stream(t, fs, 0, 1)];
        let mut h = Vec::new();
        for _ in 0..t.trials {
            let r = self.trial(
                t,
                &streams,
                vec![t.rate, None],
                Limit::Duration(t.trial_duration),
                2,
            )?;
            row.trials
                .push(TrialRecord::new("latency", t.rate, &r, pass(&r, 0.0)));
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
        let streams = vec![self.stream(t, fs, 0, 1)];
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
        let streams = vec![self.stream(t, fs, 0, 1)];
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

fn fs_avg(streams: &[Stream]) -> f64 {
    let s = &streams[0].sizes;
    s.iter().map(|&x| x as f64).sum::<f64>() / s.len() as f64
}

fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a.as_object_mut(), b) {
        (Some(o), serde_json::Value::Object(m)) => o.extend(m),
        (_, b) => *a = b,
    }
}
