//! LFIB lookup benchmark: `cargo bench -p tables --bench lfib`.
//!
//! 3,072 and 100,000 installed labels (random values over the whole
//! 20-bit space), each swapping toward one of 1,024 protected NHLFEs
//! (primary + backup) over 8 next hops, one in four through a 4-way ECMP
//! group. A lookup is what the MPLS stage does per frame: the ILM word,
//! then the NHLFE (seqlock), its protection id, and the next hop.
//! 256-label batches of random installed labels; ns per label.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use tables::mpls::{IlmAction, LabelStack, Lfib, LfibSize, Nhlfe, Path};
use tables::nexthop::Group;
use tables::{NextHop, NextHopTable};
use testkit::routes::Rng;

const BATCH: usize = 256;

fn build(n: usize) -> (Lfib, NextHopTable, Vec<u32>) {
    let nh = NextHopTable::new(16, 64);
    for i in 0..8u32 {
        nh.set(
            i,
            NextHop {
                port: i as u16,
                gateway: Some(IpAddr::V4(Ipv4Addr::new(10, 0, i as u8, 1))),
            },
        )
        .unwrap();
    }
    let lfib = Lfib::new(LfibSize::default());
    for i in 0..1024u32 {
        lfib.set_nhlfe(
            i,
            &Nhlfe {
                primary: Path {
                    next_hop: i % 8,
                    labels: LabelStack::new(&[20_000 + i]).unwrap(),
                },
                backup: Some(Path {
                    next_hop: (i + 1) % 8,
                    labels: LabelStack::new(&[16, 30_000 + i]).unwrap(),
                }),
                protection: Some(i % 8),
            },
        )
        .unwrap();
    }
    for g in 0..64u32 {
        let members = (0..4)
            .map(|k| tables::NHLFE_BIT | ((g * 4 + k) % 1024))
            .collect();
        nh.set_group(g, &Group { members }).unwrap();
    }
    let mut r = Rng(n as u64);
    let mut labels = Vec::with_capacity(n);
    let mut seen = std::collections::HashSet::new();
    while labels.len() < n {
        let l = 16 + (r.next() as u32 % ((1 << 20) - 16));
        if !seen.insert(l) {
            continue;
        }
        let i = labels.len() as u32;
        let target = if i.is_multiple_of(4) {
            tables::nexthop::GROUP_BIT | (i % 64)
        } else {
            tables::NHLFE_BIT | (i % 1024)
        };
        lfib.set_ilm(l, IlmAction::Forward { target }).unwrap();
        labels.push(l);
    }
    (lfib, nh, labels)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("lfib");
    g.throughput(Throughput::Elements(BATCH as u64));
    for n in [3_072usize, 100_000] {
        let (lfib, nh, labels) = build(n);
        let mut r = Rng(7);
        let batch: Vec<u32> = (0..BATCH * 64)
            .map(|_| labels[r.next() as usize % labels.len()])
            .collect();
        let mut k = 0;
        g.bench_function(format!("lookup+resolve/{n}"), |b| {
            b.iter(|| {
                let s = &batch[k..k + BATCH];
                k = (k + BATCH) % batch.len();
                let mut acc = 0u32;
                for (i, &l) in s.iter().enumerate() {
                    if let Some(IlmAction::Forward { target }) = lfib.ilm(l) {
                        if let Some(x) =
                            lfib.resolve(&nh, target, (i as u32).wrapping_mul(0x9e37_79b9))
                        {
                            acc = acc.wrapping_add(x.next_hop_id ^ x.labels.as_slice()[0]);
                        }
                    }
                }
                black_box(acc)
            })
        });
        g.bench_function(format!("ilm-only/{n}"), |b| {
            b.iter(|| {
                let s = &batch[k..k + BATCH];
                k = (k + BATCH) % batch.len();
                let mut acc = 0usize;
                for &l in s {
                    acc += lfib.ilm(l).is_some() as usize;
                }
                black_box(acc)
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = lfib;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(lfib);
