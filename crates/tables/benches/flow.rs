//! Flow cache benchmarks: `cargo bench -p tables --bench flow`.
//!
//! - `update_hit/{1k,1M,8.4M}`: per-packet cost of accounting a packet of
//!   an existing flow, over 256-packet batches of keys drawn at random
//!   from 1,000, 1,000,000 or 8,417,500 live flows (the 1M case misses the
//!   CPU caches on nearly every packet: the worst case, not the typical
//!   traffic mix; 8.4M is one worker's half of the chassis report's
//!   16,835,000 flows, in a 16,777,216-flow cache of 1.5 GiB: ~10 s to
//!   fill);
//! - `update_insert`: a new flow per packet into a 1M-capacity cache,
//!   filled from empty to half (the batch setup clears it as needed);
//! - `sweep`: examining 1M live flows none of which expires (the budget
//!   cost a worker pays per batch), per flow.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::time::{Duration, Instant};
use tables::flow::{FlowCache, FlowKey};

const BATCH: usize = 256;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn key(i: u64) -> FlowKey {
    if i % 4 == 3 {
        FlowKey {
            src_ip: 0x2001_0db8_0000_0000_0000_0000_0000_0000 | u128::from(i),
            dst_ip: 0x2001_0db8_ffff_0000_0000_0000_0000_0001,
            src_port: (i >> 8) as u16,
            dst_port: 443,
            proto: 6,
            tos: 0,
            family: 6,
            in_port: (i % 8) as u16,
            vlan: 0,
        }
    } else {
        FlowKey {
            src_ip: u128::from(0x0a00_0000 + (i as u32 & 0x00ff_ffff)),
            dst_ip: u128::from(0xc0a8_0000 + (i >> 24) as u32),
            src_port: (i * 7) as u16,
            dst_port: 53,
            proto: 17,
            tos: 0,
            family: 4,
            in_port: (i % 8) as u16,
            vlan: 10,
        }
    }
}

fn bench_hits(c: &mut Criterion) {
    let mut g = c.benchmark_group("flow");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, n) in [
        ("update_hit/1k", 1_000u64),
        ("update_hit/1M", 1_000_000),
        ("update_hit/8.4M", 8_417_500),
    ] {
        let mut cache = FlowCache::new(n as usize);
        for i in 0..n {
            assert!(cache.update(&key(i), 100, 0, 1, 0));
        }
        eprintln!(
            "{name}: {} flows, capacity {}, memory {:.1} MiB, max probe {}",
            cache.len(),
            cache.capacity(),
            cache.memory_bytes() as f64 / 1048576.0,
            cache.max_probe()
        );
        let mut r = Rng(0x1234_5678);
        let batches: Vec<Vec<FlowKey>> = (0..64)
            .map(|_| (0..BATCH).map(|_| key(r.next() % n)).collect())
            .collect();
        let mut b_i = 0;
        let mut now = 1;
        g.bench_function(name, |b| {
            b.iter(|| {
                let keys = &batches[b_i % batches.len()];
                b_i += 1;
                now += 1;
                for k in keys {
                    black_box(cache.update(k, 100, 0x10, 2, now));
                }
            })
        });
        assert_eq!(cache.len(), n as usize);
    }

    let mut cache = FlowCache::new(1_000_000);
    let mut next = 0u64;
    let mut keys = Vec::with_capacity(BATCH);
    g.bench_function("update_insert", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                if cache.len() + BATCH > cache.capacity() / 2 {
                    cache.flush(&mut |_| true);
                }
                keys.clear();
                keys.extend((next..next + BATCH as u64).map(key));
                next += BATCH as u64;
                let t = Instant::now();
                for k in &keys {
                    black_box(cache.update(k, 100, 0x02, 2, 5));
                }
                total += t.elapsed();
            }
            total
        })
    });

    let mut cache = FlowCache::new(1_000_000);
    for i in 0..1_000_000 {
        cache.update(&key(i), 100, 0, 1, 0);
    }
    g.throughput(Throughput::Elements(4096));
    g.bench_function("sweep_4096_of_1M", |b| {
        b.iter(|| black_box(cache.sweep(1, 60_000, 15_000, 4096, &mut |_| true)))
    });
    g.finish();
}

criterion_group!(benches, bench_hits);
criterion_main!(benches);
