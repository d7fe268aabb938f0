//! Fixed-size log-bucket latency histogram (nanoseconds). Recording never
//! allocates: 64 exponents × 16 linear sub-buckets (≈ 6 % resolution).

use serde::Serialize;

const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = 64 * SUB;

/// A latency histogram with exact min/max/mean and bucketed percentiles.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

/// Summary statistics of a histogram, all in nanoseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LatencyStats {
    /// Samples recorded.
    pub samples: u64,
    /// Smallest sample.
    pub min_ns: u64,
    /// Mean.
    pub avg_ns: u64,
    /// Largest sample.
    pub max_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
}

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = msb - SUB_BITS;
    let sub = ((v >> shift) as usize) & (SUB - 1);
    ((shift as usize + 1) << SUB_BITS) | sub
}

/// Lowest and highest value that fall in bucket `b`.
fn bucket_range(b: usize) -> (u64, u64) {
    if b < SUB {
        return (b as u64, b as u64);
    }
    let shift = (b >> SUB_BITS) as u32 - 1;
    let sub = (b & (SUB - 1)) as u64;
    let lo = (SUB as u64 | sub) << shift;
    let hi = lo + (1u64 << shift) - 1;
    (lo, hi)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            n: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Record one sample.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Add all samples of `o`.
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += *b;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Value at quantile `q` (0..=1): the midpoint of the bucket holding it,
    /// clamped to the exact min and max.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_range(b);
                return (lo + (hi - lo) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Summary statistics.
    pub fn stats(&self) -> LatencyStats {
        if self.n == 0 {
            return LatencyStats::default();
        }
        LatencyStats {
            samples: self.n,
            min_ns: self.min,
            avg_ns: (self.sum / self.n as u128) as u64,
            max_ns: self.max,
            p50_ns: self.quantile(0.5),
            p99_ns: self.quantile(0.99),
            p999_ns: self.quantile(0.999),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values() {
        for v in [0u64, 1, 15, 16, 17, 31, 32, 1000, 123_456, u64::MAX / 2] {
            let (lo, hi) = bucket_range(bucket_of(v));
            assert!(lo <= v && v <= hi, "{v} not in [{lo},{hi}]");
        }
    }

    #[test]
    fn percentiles_within_resolution() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        let s = h.stats();
        assert_eq!(s.samples, 100_000);
        assert_eq!(s.min_ns, 10);
        assert_eq!(s.max_ns, 1_000_000);
        assert_eq!(s.avg_ns, 500_005);
        let close = |got: u64, want: f64| ((got as f64 - want).abs() / want) < 0.07;
        assert!(close(s.p50_ns, 500_000.0), "p50 {}", s.p50_ns);
        assert!(close(s.p99_ns, 990_000.0), "p99 {}", s.p99_ns);
        assert!(close(s.p999_ns, 999_000.0), "p999 {}", s.p999_ns);
    }

    #[test]
    fn single_value_and_merge() {
        let mut a = Histogram::new();
        a.record(5000);
        assert_eq!(a.quantile(0.5), 5000);
        let mut b = Histogram::new();
        b.record(7000);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.stats().max_ns, 7000);
        assert_eq!(Histogram::new().stats(), LatencyStats::default());
    }
}
