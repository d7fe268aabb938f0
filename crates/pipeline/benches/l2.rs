//! L2 pipeline cost per packet, from memory batches of 64-byte frames, one
//! core: known unicast and learning-heavy mixes at 96,000 and 1,000,000
//! learned addresses. `cargo bench -p pipeline --bench l2`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use io::{FrameBatch, BATCH_MAX};
use pipeline::{process, Verdicts, WorkerCounters};
use std::sync::Arc;
use tables::l2::{PortMode, TPID_8021Q};
use tables::{L2Tables, LearnGate, LearnQueue, MacEntry, MacKey, MacTable, PortEntry, Tables};

const PORTS: u16 = 4;

fn mac(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, 0x10, b[0], b[1], b[2], b[3]]
}

fn tables(macs: u32) -> Tables {
    let ports = (0..PORTS)
        .map(|_| PortEntry::new(PortMode::Access, 10, &[10], TPID_8021Q))
        .collect();
    let t = Tables {
        l2: L2Tables::new(ports, &[(10, true, 0)]),
        mac: Arc::new(MacTable::new(1 << 20)),
        learn_gate: Arc::new(LearnGate::default()),
    };
    for i in 0..macs {
        t.mac.upsert(
            MacKey::new(10, mac(i)),
            MacEntry {
                port: (i % PORTS as u32) as u16,
                is_static: false,
                seen: 0,
            },
        );
    }
    t
}

/// Batches of frames between random learned addresses on different ports
/// (`known`), or from never-seen sources (`learning`).
fn batches(macs: u32, learning: bool) -> Vec<FrameBatch> {
    let mut x: u64 = 0x9e37_79b9;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..64)
        .map(|b| {
            let mut batch = FrameBatch::new();
            for i in 0..BATCH_MAX {
                let d = (next() % macs as u64) as u32;
                let mut s = (next() % macs as u64) as u32;
                if s % PORTS as u32 == d % PORTS as u32 {
                    s = (s + 1) % macs;
                }
                let src = if learning {
                    mac(macs + (b * BATCH_MAX + i) as u32)
                } else {
                    mac(s)
                };
                let mut f = [0u8; 60];
                f[0..6].copy_from_slice(&mac(d));
                f[6..12].copy_from_slice(&src);
                f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
                batch.push((s % PORTS as u32) as u16, &f);
            }
            batch
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("l2_pipeline");
    for macs in [96_000u32, 1_000_000] {
        let t = tables(macs);
        for (name, learning) in [("known_unicast", false), ("learning", true)] {
            let bs = batches(macs, learning);
            let q = LearnQueue::new(1 << 16);
            let counters = WorkerCounters::default();
            let mut out = Verdicts::default();
            g.throughput(Throughput::Elements(BATCH_MAX as u64));
            g.bench_with_input(BenchmarkId::new(name, macs), &bs, |b, bs| {
                let mut k = 0;
                b.iter(|| {
                    process(&t, &bs[k % bs.len()], 1, &mut out, &q, &counters);
                    k += 1;
                    // Drain learning events as the learner would, so the
                    // queue never fills (applying them is the learner's cost).
                    while q.pop().is_some() {}
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
