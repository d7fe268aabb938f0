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

/// Pseudowires (RFC 4448, type 4 as in issue 17): 3,072 pseudowires over
/// one LDP LSP (one transport label), control word on. **pw-encap**: a
/// 68-byte tagged customer frame → outer Ethernet + transport label +
/// pseudowire label + control word (resolution included); **pw-decap**:
/// the labelled frame → its pseudowire's customer frame (ILM lookup,
/// control-word check, counter).
fn bench_pw(c: &mut Criterion) {
    const PWS: usize = 3_072;
    let mut g = c.benchmark_group("mpls");
    g.throughput(Throughput::Elements(BATCH as u64));
    let b = bed(3);
    let t = MplsTables {
        lfib: &b.lfib,
        next_hops: &b.nh,
        counters: &b.counters,
        cfg: &b.cfg,
    };
    // NHLFE 0 pushes label 100 toward next hop 0: the transport LSP.
    for i in 0..PWS as u32 {
        b.lfib
            .set_pseudowire(
                i,
                &tables::mpls::Pseudowire {
                    ac: i,
                    pw_type: tables::mpls::PwType::EthernetTagged,
                    control_word: true,
                    remote_label: 50_000 + i,
                    transport: tables::NHLFE_BIT,
                },
            )
            .unwrap();
        b.lfib
            .set_ilm(60_000 + i, IlmAction::PopToPseudowire { pw: i })
            .unwrap();
    }
    const BUF: usize = 256;
    let mut r = Rng(7);
    let customer: Vec<(u32, [u8; BUF])> = (0..BATCH)
        .map(|_| {
            let pw = r.next() as u32 % PWS as u32;
            let mut f = [0u8; BUF];
            let c = &mut f[HEADROOM..HEADROOM + 68];
            c[..12].copy_from_slice(&[2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8]);
            c[12..16].copy_from_slice(&[0x81, 0, (pw >> 8) as u8 & 0xf, pw as u8]);
            c[16..18].copy_from_slice(&[0x08, 0x00]);
            (pw, f)
        })
        .collect();
    let outer = wire::mpls::OuterHeader {
        dst: [2, 0, 0, 0, 0, 1],
        src: [2, 0, 0, 0, 0, 2],
        vlan_tci: None,
    };
    let span = Span {
        start: HEADROOM,
        len: 68,
    };
    g.bench_function(format!("pw-encap/{PWS}"), |bch| {
        bch.iter_batched_ref(
            || customer.clone(),
            |fs| {
                for (pw, f) in fs.iter_mut() {
                    let (p, res) = pipeline::mpls::resolve_pseudowire(&t, *pw, 0).unwrap();
                    let s = pipeline::mpls::encap_pseudowire(&b.cfg, f, span, &outer, &p, &res, 0)
                        .unwrap();
                    assert_eq!(s.len, 68 + 14 + 8 + 4);
                    black_box(s);
                }
            },
            BatchSize::SmallInput,
        )
    });
    // The same frames as they arrive at the far PE: our pseudowire label
    // under an explicit-null-free stack (the P popped the transport).
    let labelled: Vec<[u8; BUF]> = customer
        .iter()
        .map(|(pw, f)| {
            let mut x = [0u8; BUF];
            let start = HEADROOM - 22;
            let h = &mut x[start..];
            h[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
            h[12..14].copy_from_slice(&[0x88, 0x47]);
            h[14..18].copy_from_slice(&((60_000 + pw) << 12 | 0x100 | 255).to_be_bytes());
            h[18..22].fill(0);
            h[22..22 + 68].copy_from_slice(&f[HEADROOM..HEADROOM + 68]);
            x
        })
        .collect();
    g.bench_function(format!("pw-decap/{PWS}"), |bch| {
        bch.iter_batched_ref(
            || labelled.clone(),
            |fs| {
                let mut ok = 0;
                for f in fs.iter_mut() {
                    let v = process_labelled(
                        &t,
                        f,
                        Span {
                            start: HEADROOM - 22,
                            len: 22 + 68,
                        },
                        14,
                        None,
                    );
                    ok += matches!(v, MplsVerdict::Pseudowire { .. }) as usize;
                }
                assert_eq!(ok, BATCH);
                black_box(ok)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = mpls;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench, bench_pw
}
criterion_main!(mpls);
