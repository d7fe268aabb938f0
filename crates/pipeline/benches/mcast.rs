//! Multicast forwarding cost, one core: `cargo bench -p pipeline --bench mcast`.
//!
//! * `snoop-pass/20000`: the multicast stage over full batches (`io::BATCH_MAX` frames) of
//!   IGMPv3-snooped (S,G) traffic in a VLAN with 20,000 (S,G) routes —
//!   parse, (S,G) lookup, action — per frame.
//! * `replicate/<bytes>/<ports>`: one frame written to `ports` transmit
//!   slots with each port's encapsulation (half the ports tagged), which
//!   is the data path's per-copy work besides the ring's own bookkeeping;
//!   the slope over the port count is the cost per output port.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use io::{FrameBatch, BATCH_MAX};
use pipeline::l2::{Action, Verdict, Verdicts};
use pipeline::WorkerCounters;
use tables::mcast::{McAddr, McKey, McRoute, McVlan, McastTables, MrouteTable, ANY_IIF};
use tables::{Encap, PortSet};

const VLAN: u16 = 10;

fn group(g: u32) -> u32 {
    0xe801_0000 + g
}

fn source(s: u32) -> u32 {
    0x0a00_0000 + s
}

fn frame(src: u32, grp: u32, len: usize) -> Vec<u8> {
    let g = grp.to_be_bytes();
    let mut f = vec![
        0x01,
        0x00,
        0x5e,
        g[1] & 0x7f,
        g[2],
        g[3],
        2,
        0,
        0,
        0,
        0,
        1,
        8,
        0,
    ];
    f.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src.to_be_bytes());
    f.extend_from_slice(&g);
    f.resize(len, 0);
    let tot = (len - 14) as u16;
    f[16..18].copy_from_slice(&tot.to_be_bytes());
    f
}

/// 100 groups × 200 sources, 24 receiver ports, like the acceptance test.
fn snapshot() -> McastTables {
    let mut entries = Vec::new();
    let mut oifs = PortSet::EMPTY;
    for p in 1..=24 {
        oifs.insert(p);
    }
    for g in 0..100 {
        for s in 0..200 {
            let index = entries.len() as u32;
            entries.push((
                McKey {
                    vlan: VLAN,
                    group: McAddr::V4(group(g)),
                    source: Some(McAddr::V4(source(s))),
                },
                McRoute {
                    accept: PortSet::EMPTY,
                    iif: ANY_IIF,
                    oifs,
                    ttl_threshold: 0,
                    index,
                },
            ));
        }
    }
    let mut vlans = vec![McVlan::default(); VLAN as usize + 1];
    vlans[VLAN as usize].snooping = true;
    McastTables {
        routes: MrouteTable::build(entries).expect("routes"),
        vlans: vlans.into_boxed_slice(),
        routing: false,
    }
}

fn bench(c: &mut Criterion) {
    let mc = snapshot();
    let counters = WorkerCounters::default();
    let batches: Vec<FrameBatch> = (0..64u32)
        .map(|b| {
            let mut batch = FrameBatch::new();
            for i in 0..BATCH_MAX as u32 {
                let k = (b * 7919 + i * 104_729) % 20_000;
                batch.push(0, &frame(source(k % 200), group(k / 200), 128));
            }
            batch
        })
        .collect();
    let mut out = Verdicts::default();
    let flood = Verdict {
        action: Action::Flood,
        vlan: VLAN,
        inner_off: 12,
        pcp: 0,
    };
    let mut g = c.benchmark_group("snoop-pass");
    g.throughput(Throughput::Elements(BATCH_MAX as u64));
    g.bench_function(BenchmarkId::from_parameter(20_000), |bch| {
        let mut k = 0;
        bch.iter(|| {
            let b = &batches[k % batches.len()];
            k += 1;
            out.len = b.len();
            for v in out.v.iter_mut().take(b.len()) {
                *v = flood;
            }
            pipeline::mcast::snoop(&mc, b, &mut out, &counters);
            black_box(out.v[0].action);
        })
    });
    g.finish();

    let mut g = c.benchmark_group("replicate");
    let mut slots = vec![vec![0u8; 9300]; 24];
    for len in [64usize, 512, 1500] {
        let f = frame(source(1), group(1), len);
        for ports in [1usize, 4, 8, 24] {
            g.throughput(Throughput::Elements(ports as u64));
            g.bench_function(BenchmarkId::new(len.to_string(), ports), |bch| {
                bch.iter(|| {
                    let mut n = 0;
                    for (p, slot) in slots.iter_mut().take(ports).enumerate() {
                        let encap = if p % 2 == 0 {
                            Encap::Untagged
                        } else {
                            Encap::Tagged {
                                tpid: 0x8100,
                                vid: VLAN,
                            }
                        };
                        n += pipeline::egress::write(&f, &flood, encap, slot);
                    }
                    black_box(n)
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
