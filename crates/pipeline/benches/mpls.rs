//! MPLS stage benchmark: `cargo bench -p pipeline --bench mpls`.
//!
//! Per-frame cost of the label operations on a 64-byte labelled IPv4 frame
//! in a buffer with headroom, with 3,072 and 100,000 labels installed
//! (random values; each frame carries a random installed label):
//! **swap** (label → label), **swap+push** (label → two labels),
//! **pop** (PHP: label → IPv4 with uniform TTL copy and checksum update),
//! and **push** (FTN: IPv4 → two labels). Each measured frame is a fresh
//! copy (the copy is set-up, not timed: criterion `iter_batched`), and the
//! result is the whole stage: stack walk, LFIB lookup, NHLFE resolution,
//! counter update and the rewrite.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pipeline::mpls::{process_labelled, push_ftn, MplsConfig, MplsTables, MplsVerdict};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use tables::mpls::{IlmAction, LabelCounters, LabelStack, Lfib, LfibSize, Nhlfe, Path};
use tables::{NextHop, NextHopTable};
use testkit::routes::Rng;
use wire::mpls::Span;

const HEADROOM: usize = 64;
const BATCH: usize = 256;

fn frame(label: u32) -> [u8; 128] {
    let mut b = [0u8; 128];
    let f = &mut b[HEADROOM..];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x88, 0x47]);
    f[14..18].copy_from_slice(&(label << 12 | 0x100 | 64).to_be_bytes());
    let ip = &mut f[18..];
    ip[..20].copy_from_slice(&[
        0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 192, 0, 2, 1, 198, 51, 100, 7,
    ]);
    let s = wire::checksum::finish(wire::checksum::sum(&ip[..20]));
    ip[10..12].copy_from_slice(&s.to_be_bytes());
    b
}

struct Bed {
    lfib: Lfib,
    nh: NextHopTable,
    counters: LabelCounters,
    cfg: MplsConfig,
    labels: Vec<u32>,
}

/// `n` labels; label i uses NHLFE i % 3: swap, swap+push, PHP (chosen per
/// benchmark by picking labels with the right residue).
fn bed(n: usize) -> Bed {
    let nh = NextHopTable::new(4, 1);
    nh.set(
        0,
        NextHop {
            port: 1,
            gateway: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
        },
    )
    .unwrap();
    let lfib = Lfib::new(LfibSize::default());
    for (i, l) in [&[100u32][..], &[300, 200], &[]].iter().enumerate() {
        lfib.set_nhlfe(
            i as u32,
            &Nhlfe {
                primary: Path {
                    next_hop: 0,
                    labels: LabelStack::new(l).unwrap(),
                },
                backup: None,
                protection: None,
            },
        )
        .unwrap();
    }
    let mut r = Rng(n as u64 + 1);
    let mut seen = std::collections::HashSet::new();
    let mut labels = Vec::new();
    while labels.len() < n {
        let l = 16 + (r.next() as u32 % ((1 << 20) - 16));
        if seen.insert(l) {
            let target = tables::NHLFE_BIT | (labels.len() as u32 % 3);
            lfib.set_ilm(l, IlmAction::Forward { target }).unwrap();
            labels.push(l);
        }
    }
    Bed {
        lfib,
        nh,
        counters: LabelCounters::default(),
        cfg: MplsConfig::default(),
        labels,
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("mpls");
    g.throughput(Throughput::Elements(BATCH as u64));
    for n in [3_072usize, 100_000] {
        let b = bed(n);
        let t = MplsTables {
            lfib: &b.lfib,
            next_hops: &b.nh,
            counters: &b.counters,
            cfg: &b.cfg,
        };
        for (name, residue) in [("swap", 0usize), ("swap+push", 1), ("pop-php", 2)] {
            let mut r = Rng(99);
            let frames: Vec<[u8; 128]> = (0..BATCH)
                .map(|_| {
                    let i = 3 * (r.next() as usize % (n / 3)) + residue;
                    frame(b.labels[i])
                })
                .collect();
            g.bench_function(format!("{name}/{n}"), |bch| {
                bch.iter_batched_ref(
                    || frames.clone(),
                    |fs| {
                        let mut ok = 0;
                        for f in fs.iter_mut() {
                            let v = process_labelled(
                                &t,
                                f,
                                Span {
                                    start: HEADROOM,
                                    len: 64,
                                },
                                14,
                                None,
                            );
                            ok += matches!(v, MplsVerdict::Forward { .. }) as usize;
                        }
                        assert_eq!(ok, BATCH);
                        black_box(ok)
                    },
                    BatchSize::SmallInput,
                )
            });
        }
        // FTN push of two labels on IPv4.
        let r = b.lfib.resolve(&b.nh, tables::NHLFE_BIT | 1, 0).unwrap();
        let mut ip = frame(0);
        ip[HEADROOM + 12..HEADROOM + 14].copy_from_slice(&[0x08, 0x00]);
        ip.copy_within(HEADROOM + 18..128, HEADROOM + 14);
        let frames = vec![ip; BATCH];
        g.bench_function(format!("push-ftn/{n}"), |bch| {
            bch.iter_batched_ref(
                || frames.clone(),
                |fs| {
                    for f in fs.iter_mut() {
                        let s = push_ftn(
                            &b.cfg,
                            f,
                            Span {
                                start: HEADROOM,
                                len: 60,
                            },
                            14,
                            &r,
                            0,
                        );
                        black_box(s.unwrap());
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group! {
    name = mpls;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(mpls);
