//! FIB lookup and update benchmarks: `cargo bench -p tables --bench lpm`.
//!
//! Synthetic prefix sets with a realistic length mix (IPv4: mostly /24, then
//! /16–/23, some /25–/32 and /8–/15; IPv6: mostly /48, then /32–/64, some
//! /128), at the report's scale (240,000 IPv4 / 118,000 IPv6) and the
//! sizing targets (1,000,000 / 500,000). Lookups run over 256-address
//! batches of random destinations (drawn from the installed prefixes, so
//! they hit routes, spread over the whole table) and of sequential
//! destinations (consecutive addresses). Update rate: steady-state churn,
//! 10,000 routes removed and re-inserted into the full table; the full
//! load rate and memory are printed when each table is built.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::time::{Duration, Instant};
use tables::{Lpm4, Lpm6, Lpm6Stride, LpmStats};
use testkit::routes::{v4_prefixes, v6_prefixes, Rng};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// What the benches need of a FIB table, so IPv4 and IPv6 share them.
trait Fib {
    type Addr: Copy;
    const NAME: &'static str;
    fn insert(&self, a: Self::Addr, l: u8, nh: u32);
    fn remove(&self, a: Self::Addr, l: u8);
    fn reclaim(&self);
    fn lookup(&self, a: Self::Addr) -> Option<u32>;
    fn lookup_batch(&self, a: &[Self::Addr], out: &mut [Option<u32>]);
    fn stats(&self) -> LpmStats;
}

macro_rules! fib {
    ($t:ty, $a:ty, $name:expr) => {
        impl Fib for $t {
            type Addr = $a;
            const NAME: &'static str = $name;
            fn insert(&self, a: $a, l: u8, nh: u32) {
                <$t>::insert(self, a, l, nh).unwrap();
            }
            fn remove(&self, a: $a, l: u8) {
                <$t>::remove(self, a, l);
            }
            fn reclaim(&self) {
                <$t>::reclaim(self);
            }
            fn lookup(&self, a: $a) -> Option<u32> {
                <$t>::lookup(self, a)
            }
            fn lookup_batch(&self, a: &[$a], out: &mut [Option<u32>]) {
                <$t>::lookup_batch(self, a, out)
            }
            fn stats(&self) -> LpmStats {
                <$t>::stats(self)
            }
        }
    };
}

fib!(Lpm4, u32, "lpm4");
fib!(Lpm6, u128, "lpm6");
fib!(Lpm6Stride, u128, "lpm6_stride");

/// Loads `prefixes` into `t`, printing the load rate and memory.
fn build<T: Fib>(t: T, prefixes: &[(T::Addr, u8)]) -> T {
    let before = rss_kib();
    let start = Instant::now();
    for (i, &(a, l)) in prefixes.iter().enumerate() {
        t.insert(a, l, i as u32 % 4096);
        // No readers here, so every call is past a grace period; `Lpm6`
        // leaves the copied path behind on each insert (the daemon
        // reclaims once a second and when an insert is refused).
        if i % 1024 == 1023 {
            t.reclaim();
        }
    }
    t.reclaim();
    t.reclaim();
    let dt = start.elapsed();
    let s = t.stats();
    eprintln!(
        "{} load {} prefixes: {:.2} s = {:.0} routes/s; nodes {}; lookup {:.1} MiB, control {:.1} MiB; RSS +{:.1} MiB",
        T::NAME,
        prefixes.len(),
        dt.as_secs_f64(),
        prefixes.len() as f64 / dt.as_secs_f64(),
        s.nodes,
        s.lookup_bytes as f64 / 1048576.0,
        s.control_bytes as f64 / 1048576.0,
        (rss_kib() - before) as f64 / 1024.0
    );
    t
}

const BATCH: usize = 256;
const CHURN: usize = 10_000;

/// Lookups (single and batched, random and sequential destinations) and
/// churn on a loaded table; `random` and `seq` have a power-of-two length.
fn bench_table<T: Fib>(
    c: &mut Criterion,
    t: &T,
    prefixes: &[(T::Addr, u8)],
    random: &[T::Addr],
    seq: &[T::Addr],
) {
    let n = prefixes.len();
    let mut g = c.benchmark_group(format!("{}_{}k", T::NAME, n / 1000));
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, addrs) in [("random", random), ("sequential", seq)] {
        let mut pos = 0usize;
        g.bench_function(format!("lookup_{name}"), |b| {
            b.iter(|| {
                pos = (pos + BATCH) & (addrs.len() - 1);
                let mut acc = 0u32;
                for &a in &addrs[pos..pos + BATCH] {
                    acc = acc.wrapping_add(t.lookup(black_box(a)).unwrap_or(0));
                }
                acc
            })
        });
        let mut out = [None; BATCH];
        g.bench_function(format!("lookup_batch_{name}"), |b| {
            b.iter(|| {
                pos = (pos + BATCH) & (addrs.len() - 1);
                t.lookup_batch(black_box(&addrs[pos..pos + BATCH]), &mut out);
                out[BATCH - 1]
            })
        });
    }
    g.throughput(Throughput::Elements(CHURN as u64));
    let mut round = 0usize;
    g.bench_function("insert_churn", |b| {
        b.iter_batched(
            || {
                round = (round + CHURN) % (n - CHURN);
                let chunk = &prefixes[round..round + CHURN];
                for &(a, l) in chunk {
                    t.remove(a, l);
                }
                t.reclaim();
                t.reclaim();
                chunk
            },
            |chunk| {
                for &(a, l) in chunk {
                    t.insert(a, l, 7);
                }
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn bench_v4(c: &mut Criterion) {
    for n in [240_000usize, 1_000_000] {
        let prefixes = v4_prefixes(n, 0x1234_5678 + n as u64, 1);
        let t = build(Lpm4::new(), &prefixes);
        let mut r = Rng(99);
        // Random destinations inside random installed prefixes.
        let random: Vec<u32> = (0..1 << 22)
            .map(|_| {
                let (a, l) = prefixes[(r.next() % n as u64) as usize];
                a | (r.next() as u32 & !(!0u32 << (32 - l as u32)))
            })
            .collect();
        let base = prefixes[0].0;
        let seq: Vec<u32> = (0..1u32 << 22).map(|i| base.wrapping_add(i)).collect();
        bench_table(c, &t, &prefixes, &random, &seq);
    }
}

fn bench_v6(c: &mut Criterion) {
    for n in [118_000usize, 500_000] {
        let prefixes = v6_prefixes(n, 0xabcd_0000 + n as u64, 0x2000_0000);
        let mut r = Rng(77);
        let random: Vec<u128> = (0..1 << 20)
            .map(|_| {
                let (a, l) = prefixes[(r.next() % n as u64) as usize];
                let host = ((r.next() as u128) << 64 | r.next() as u128)
                    & if l == 128 { 0 } else { !0u128 >> l };
                a | host
            })
            .collect();
        let base = prefixes[0].0;
        let seq: Vec<u128> = (0..1u128 << 20).map(|i| base.wrapping_add(i)).collect();
        // The compressed trie, then the uncompressed 8-bit trie it
        // replaced, on the same prefixes and destinations; the two must
        // agree on every destination.
        let old = build(Lpm6Stride::with_nodes(1 << 21), &prefixes);
        let t = build(Lpm6::with_nodes(1 << 21), &prefixes);
        for &a in random.iter().step_by(16) {
            assert_eq!(t.lookup(a), old.lookup(a));
        }
        bench_table(c, &t, &prefixes, &random, &seq);
        drop(t);
        bench_table(c, &old, &prefixes, &random, &seq);
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = lpm;
    config = config();
    targets = bench_v4, bench_v6
}
criterion_main!(lpm);
