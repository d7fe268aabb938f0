//! Multicast route lookup benchmark: `cargo bench -p tables --bench mroute`.
//!
//! Tables of 20,000 and 425,000 random IPv4 (S,G) routes (plus one (*,G)
//! per 16 groups). Lookups run over 256-key batches of random installed
//! (S,G) keys (hits, spread over the whole table) and of random keys that
//! are not installed (misses: both the (S,G) and the (*,G) probe fail).
//! The table's memory is printed when it is built. `lookup_*` looks keys
//! up one by one, `batch_*` through `lookup_index_batch` (staged, with
//! prefetch).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::time::{Duration, Instant};
use tables::mcast::{McAddr, McKey, McRoute, MrouteTable, ANY_IIF};
use tables::PortSet;
use testkit::routes::Rng;

const BATCH: usize = 256;

fn routes(n: usize, seed: u64) -> Vec<(McKey, McRoute)> {
    let mut r = Rng(seed);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n + n / 16);
    while out.len() < n {
        let g = McAddr::V4(0xe800_0000 | (r.next() as u32 & 0x00ff_ffff));
        let s = McAddr::V4(0x0a00_0000 | (r.next() as u32 & 0x00ff_ffff));
        let key = McKey {
            vlan: 0,
            group: g,
            source: Some(s),
        };
        if !seen.insert(key) {
            continue;
        }
        let mut oifs = PortSet::EMPTY;
        oifs.insert((r.next() % 256) as u16);
        oifs.insert((r.next() % 256) as u16);
        let index = out.len() as u32;
        out.push((
            key,
            McRoute {
                accept: PortSet::EMPTY,
                iif: (r.next() % 256) as u16,
                oifs,
                ttl_threshold: 1,
                index,
            },
        ));
        if index.is_multiple_of(16) {
            let star = McKey {
                source: None,
                ..key
            };
            if seen.insert(star) {
                out.push((
                    star,
                    McRoute {
                        accept: PortSet::EMPTY,
                        iif: ANY_IIF,
                        oifs,
                        ttl_threshold: 1,
                        index: out.len() as u32,
                    },
                ));
            }
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    for n in [20_000usize, 425_000] {
        let entries = routes(n, 0x6d72_6f75 + n as u64);
        let hits: Vec<(McAddr, McAddr)> = {
            let mut r = Rng(42);
            (0..1 << 20)
                .map(|_| {
                    let (k, _) = entries[(r.next() % entries.len() as u64) as usize];
                    (k.group, k.source.unwrap_or(McAddr::V4(0x0a00_0001)))
                })
                .collect()
        };
        let misses: Vec<(McAddr, McAddr)> = {
            let mut r = Rng(43);
            // Groups in 233/8 are never installed.
            (0..1 << 20)
                .map(|_| {
                    (
                        McAddr::V4(0xe900_0000 | (r.next() as u32 & 0x00ff_ffff)),
                        McAddr::V4(0x0a00_0000 | (r.next() as u32 & 0x00ff_ffff)),
                    )
                })
                .collect()
        };
        let start = Instant::now();
        let t = MrouteTable::build(entries).unwrap();
        eprintln!(
            "mroute build {} entries: {:.1} ms; {:.1} MiB",
            t.len(),
            start.elapsed().as_secs_f64() * 1e3,
            t.memory_bytes() as f64 / 1048576.0
        );
        let mut g = c.benchmark_group(format!("mroute_{}k", n / 1000));
        g.throughput(Throughput::Elements(BATCH as u64));
        for (name, keys) in [("hit", &hits), ("miss", &misses)] {
            let mut pos = 0usize;
            g.bench_function(format!("lookup_{name}"), |b| {
                b.iter(|| {
                    pos = (pos + BATCH) & (keys.len() - 1);
                    let mut acc = 0u32;
                    for &(grp, src) in &keys[pos..pos + BATCH] {
                        acc = acc.wrapping_add(
                            t.lookup(0, black_box(grp), black_box(src))
                                .map_or(0, |r| r.index),
                        );
                    }
                    acc
                })
            });
            let mut pos = 0usize;
            let mut out = vec![None; BATCH];
            g.bench_function(format!("batch_{name}"), |b| {
                b.iter(|| {
                    pos = (pos + BATCH) & (keys.len() - 1);
                    t.lookup_index_batch(0, black_box(&keys[pos..pos + BATCH]), &mut out);
                    out.iter().fold(0u32, |a, r| a.wrapping_add(r.unwrap_or(0)))
                })
            });
        }
        g.finish();
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = mroute;
    config = config();
    targets = bench
}
criterion_main!(mroute);
