//! Service reports over time (`show service-control history`): for each
//! interval, every service's concurrent sessions (minimum, average and
//! maximum of the samples taken in it) and the bandwidth it passed and
//! dropped per direction. Sampled by the control thread from the workers'
//! counters (never by a worker); a ring of the last intervals.
//!
//! Per subscriber too: when an interval closes, every subscriber ×
//! service usage entry (and each subscriber's total) that passed or
//! dropped bytes in it gives a row of its bandwidth — at most
//! [`MAX_SUBSCRIBER_ROWS`] per interval (the rest counted), kept for the
//! last [`SUBSCRIBER_KEEP`] intervals (about 10 MB at most).

use crate::service::{Stats, UsageTable};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Subscriber × service rows kept per interval.
pub const MAX_SUBSCRIBER_ROWS: usize = 4096;
/// Intervals that keep their subscriber rows (the newest).
pub const SUBSCRIBER_KEEP: usize = 60;

/// One subscriber's use of one service (or its total, service
/// [`crate::service::TOTAL`]) in one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubscriberInterval {
    pub slot: u32,
    pub gen: u16,
    pub service: u16,
    /// Passed and dropped bits/s [up, down] over the interval.
    pub bps: [u64; 2],
    pub dropped_bps: [u64; 2],
}

/// One service in one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceInterval {
    pub sessions_min: u64,
    pub sessions_max: u64,
    pub sessions_avg: f64,
    /// Passed bits/s [up, down] over the interval.
    pub bps: [u64; 2],
    /// Dropped bits/s [up, down] (bandwidth control, quotas).
    pub dropped_bps: [u64; 2],
}

/// One closed interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// Start, Unix milliseconds, and length in milliseconds.
    pub start_ms: u64,
    pub len_ms: u64,
    /// Samples taken in it.
    pub samples: u32,
    /// Indexed by service id.
    pub services: Vec<ServiceInterval>,
    /// Subscribers with traffic, by key (empty past [`SUBSCRIBER_KEEP`]).
    pub subscribers: Vec<SubscriberInterval>,
    /// Rows beyond [`MAX_SUBSCRIBER_ROWS`], not kept.
    pub subscribers_omitted: u64,
}

/// The running interval's accumulators, per service.
#[derive(Clone, Default)]
struct Acc {
    min: u64,
    max: u64,
    sum: u128,
}

/// The ring of intervals and the one being filled.
pub struct History {
    interval_ms: u64,
    keep: usize,
    rows: VecDeque<Interval>,
    start_ms: Option<u64>,
    samples: u32,
    acc: Vec<Acc>,
    /// Byte counters [passed up, down, dropped up, down] at the start.
    base: Vec<[u64; 4]>,
    now: Vec<(u64, [u64; 4])>,
    /// Per usage key (all workers): the same counters at the start, now.
    sub_base: HashMap<u64, [u64; 4]>,
    sub_now: HashMap<u64, [u64; 4]>,
}

impl History {
    /// Intervals of `interval_ms`, the last `keep` of them kept.
    pub fn new(interval_ms: u64, keep: usize) -> History {
        History {
            interval_ms: interval_ms.max(1),
            keep: keep.max(1),
            rows: VecDeque::new(),
            start_ms: None,
            samples: 0,
            acc: Vec::new(),
            base: Vec::new(),
            now: Vec::new(),
            sub_base: HashMap::new(),
            sub_now: HashMap::new(),
        }
    }

    /// Every usage entry's counters, summed over the workers, into
    /// `sub_now`.
    fn read_subscribers(&mut self, stats: &[Arc<Stats>]) {
        self.sub_now.clear();
        for st in stats {
            let t = &st.usage;
            for i in 0..t.capacity() as u32 {
                let key = t.key_at(i);
                if key == 0 {
                    continue;
                }
                let u = t.at(i);
                let c = self.sub_now.entry(key).or_default();
                c[0] += u.bytes[0].get();
                c[1] += u.bytes[1].get();
                c[2] += u.dropped_bytes[0].get();
                c[3] += u.dropped_bytes[1].get();
            }
        }
    }

    pub fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// Closed intervals, oldest first.
    pub fn rows(&self) -> impl Iterator<Item = &Interval> {
        self.rows.iter()
    }

    /// Takes one sample of `services` services from every worker's
    /// counters at `now_ms` (Unix ms); closes the interval when due.
    pub fn sample(&mut self, now_ms: u64, stats: &[Arc<Stats>], services: usize) {
        self.now.clear();
        for i in 0..services {
            let mut sessions = 0u64;
            let mut b = [0u64; 4];
            for st in stats {
                let Some(u) = st.services.get(i) else {
                    continue;
                };
                sessions += u.active.get();
                b[0] += u.bytes[0].get();
                b[1] += u.bytes[1].get();
                b[2] += u.dropped_bytes[0].get();
                b[3] += u.dropped_bytes[1].get();
            }
            self.now.push((sessions, b));
        }
        let start = match self.start_ms {
            Some(s) if self.acc.len() == services => s,
            _ => {
                self.read_subscribers(stats);
                std::mem::swap(&mut self.sub_base, &mut self.sub_now);
                self.open(now_ms);
                return;
            }
        };
        for (a, (s, _)) in self.acc.iter_mut().zip(&self.now) {
            if self.samples == 0 {
                (a.min, a.max) = (*s, *s);
            } else {
                a.min = a.min.min(*s);
                a.max = a.max.max(*s);
            }
            a.sum += u128::from(*s);
        }
        self.samples += 1;
        let len = now_ms.saturating_sub(start);
        if len >= self.interval_ms {
            let len = len.max(1);
            let n = self.samples.max(1);
            let rate =
                |now: u64, then: u64| (now.saturating_sub(then)).saturating_mul(8000) / len.max(1);
            let services = self
                .acc
                .iter()
                .zip(&self.now)
                .zip(&self.base)
                .map(|((a, (_, b)), base)| ServiceInterval {
                    sessions_min: a.min,
                    sessions_max: a.max,
                    sessions_avg: a.sum as f64 / f64::from(n),
                    bps: [rate(b[0], base[0]), rate(b[1], base[1])],
                    dropped_bps: [rate(b[2], base[2]), rate(b[3], base[3])],
                })
                .collect();
            self.read_subscribers(stats);
            let mut subscribers = Vec::new();
            let mut omitted = 0;
            for (&key, now) in &self.sub_now {
                let base = self.sub_base.get(&key).copied().unwrap_or_default();
                if *now == base {
                    continue;
                }
                if subscribers.len() == MAX_SUBSCRIBER_ROWS {
                    omitted += 1;
                    continue;
                }
                let (slot, gen) = UsageTable::subscriber_of(key);
                subscribers.push(SubscriberInterval {
                    slot,
                    gen,
                    service: UsageTable::service_of(key),
                    bps: [rate(now[0], base[0]), rate(now[1], base[1])],
                    dropped_bps: [rate(now[2], base[2]), rate(now[3], base[3])],
                });
            }
            subscribers.sort_unstable_by_key(|r| (r.slot, r.gen, r.service));
            if self.rows.len() == self.keep {
                self.rows.pop_front();
            }
            if self.rows.len() >= SUBSCRIBER_KEEP {
                let old = self.rows.len() - SUBSCRIBER_KEEP;
                self.rows[old].subscribers = Vec::new();
            }
            self.rows.push_back(Interval {
                start_ms: start,
                len_ms: len,
                samples: self.samples,
                services,
                subscribers,
                subscribers_omitted: omitted,
            });
            std::mem::swap(&mut self.sub_base, &mut self.sub_now);
            self.open(now_ms);
        }
    }

    /// Starts an interval at `now_ms` from the counters just read.
    fn open(&mut self, now_ms: u64) {
        self.start_ms = Some(now_ms);
        self.samples = 0;
        self.acc = vec![Acc::default(); self.now.len()];
        self.base = self.now.iter().map(|(_, b)| *b).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_min_avg_max_and_rates_per_interval() {
        let w0 = Arc::new(Stats::new(4, 16));
        let w1 = Arc::new(Stats::new(4, 16));
        let stats = [w0.clone(), w1.clone()];
        let mut h = History::new(1000, 2);
        h.sample(10_000, &stats, 2); // opens
        assert_eq!(h.rows().count(), 0);
        // Service 0: sessions 3 then 5 then 1 (split over workers);
        // 1,000 bytes up and 4,000 down in the second.
        for (t, a0, a1) in [(10_250, 2, 1), (10_500, 3, 2), (11_000, 1, 0)] {
            w0.services[0].active.set(a0);
            w1.services[0].active.set(a1);
            if t == 11_000 {
                w0.services[0].bytes[0].add(600);
                w1.services[0].bytes[0].add(400);
                w1.services[0].bytes[1].add(4000);
                w0.services[1].dropped_bytes[1].add(125);
            }
            h.sample(t, &stats, 2);
        }
        let r: Vec<&Interval> = h.rows().collect();
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].start_ms, r[0].len_ms, r[0].samples),
            (10_000, 1000, 3)
        );
        let s0 = &r[0].services[0];
        assert_eq!((s0.sessions_min, s0.sessions_max), (1, 5));
        assert!((s0.sessions_avg - 3.0).abs() < 1e-9, "{s0:?}");
        assert_eq!(s0.bps, [8_000, 32_000]);
        assert!(r[0].subscribers.is_empty());
        assert_eq!(r[0].services[1].dropped_bps, [0, 1_000]);
        // The ring keeps the last two.
        for t in [12_000, 13_000, 14_000] {
            h.sample(t, &stats, 2);
        }
        let starts: Vec<u64> = h.rows().map(|r| r.start_ms).collect();
        assert_eq!(starts, vec![12_000, 13_000]);
        // A policy with another number of services starts again.
        h.sample(14_500, &stats, 3);
        h.sample(15_600, &stats, 3);
        assert_eq!(h.rows().last().unwrap().services.len(), 3);
    }

    #[test]
    fn subscriber_bandwidth_per_service_per_interval() {
        let w0 = Arc::new(Stats::new(4, 16));
        let w1 = Arc::new(Stats::new(4, 16));
        let stats = [w0.clone(), w1.clone()];
        let web = UsageTable::key(7, 1, 2);
        let all = UsageTable::key(7, 1, crate::service::TOTAL);
        let other = UsageTable::key(9, 0, 2);
        let (a, b) = (w0.usage.entry(web).unwrap(), w1.usage.entry(web).unwrap());
        let t = w0.usage.entry(all).unwrap();
        let o = w0.usage.entry(other).unwrap();
        w0.usage.at(o).bytes[0].add(999); // before the first interval
        let mut h = History::new(1000, 4);
        h.sample(10_000, &stats, 3);
        // 2,000 bytes up in 1 s, split over two workers; 500 dropped down.
        w0.usage.at(a).bytes[0].add(1500);
        w1.usage.at(b).bytes[0].add(500);
        w1.usage.at(b).dropped_bytes[1].add(500);
        w0.usage.at(t).bytes[0].add(2000);
        h.sample(11_000, &stats, 3);
        let r = h.rows().last().unwrap();
        assert_eq!(r.subscribers.len(), 2, "{:?}", r.subscribers);
        let s = r.subscribers[0];
        assert_eq!((s.slot, s.gen, s.service), (7, 1, 2));
        assert_eq!(s.bps, [16_000, 0]);
        assert_eq!(s.dropped_bps, [0, 4_000]);
        assert_eq!(r.subscribers[1].service, crate::service::TOTAL);
        // An idle interval has no rows; old intervals keep theirs.
        h.sample(12_000, &stats, 3);
        assert!(h.rows().last().unwrap().subscribers.is_empty());
        assert_eq!(h.rows().next().unwrap().subscribers.len(), 2);
    }
}
