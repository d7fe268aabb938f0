//! QoS building blocks, ns per call, one core:
//! - `policer/trtcm_color_blind` (and `srtcm_color_blind`): a stream of
//!   64- to 1,500-byte frames offered at about twice the PIR, the clock
//!   advancing once per batch of 32 frames (as the worker reads it), so
//!   all three colours and the refill are exercised;
//! - `remark/set_dscp_v4` and `_v6`: re-mark one frame in place, cycling
//!   through the 64 DSCP values (so the IPv4 checksum update always runs);
//! - `queues/enqueue_drain_64B_4q`: 64-byte frames enqueued round-robin
//!   into 4 classes (1 strict priority + 3 weighted 4:2:1) and drained
//!   into a ring that copies each into a TX slot; per frame, both halves.
//!
//! `cargo bench -p pipeline --bench qos`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use pipeline::qos::{set_dscp, EgressQueues, QueueSpec, TxSink};
use std::time::Duration;
use tables::qos::{SrTcm, SrTcmConfig, TrTcm, TrTcmConfig};

const CALLS: usize = 1024;

fn v4_frame() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&50u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 1, 1]);
    let c = wire::checksum::finish(wire::checksum::sum(&ip[..20]));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f
}

fn v6_frame() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    let ip = &mut f[14..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&10u16.to_be_bytes());
    ip[6] = 17;
    ip[7] = 64;
    f
}

fn policers(c: &mut Criterion) {
    let mut g = c.benchmark_group("policer");
    g.throughput(Throughput::Elements(CALLS as u64));
    // 1 and 2 Gbit/s; 4 Gbit/s offered.
    let cfg = TrTcmConfig {
        cir_bps: 1_000_000_000,
        cbs_bytes: 256_000,
        pir_bps: 2_000_000_000,
        pbs_bytes: 512_000,
    };
    tables::qos::validate(&cfg).unwrap();
    let sizes: Vec<u32> = (0..CALLS).map(|i| [64, 512, 1500, 128][i % 4]).collect();
    // Time between batches of 32 at 4 Gbit/s (mean size 551 bytes).
    let step = 32 * 551 * 8 / 4;
    let mut m = TrTcm::new(cfg, 0);
    let mut now = 0u64;
    g.bench_function("trtcm_color_blind", |b| {
        b.iter(|| {
            for (i, &s) in sizes.iter().enumerate() {
                if i % 32 == 0 {
                    now += step;
                }
                black_box(m.color_blind(black_box(s), now));
            }
        })
    });
    let mut m = SrTcm::new(
        SrTcmConfig {
            cir_bps: 2_000_000_000,
            cbs_bytes: 256_000,
            ebs_bytes: 256_000,
        },
        0,
    );
    let mut now = 0u64;
    g.bench_function("srtcm_color_blind", |b| {
        b.iter(|| {
            for (i, &s) in sizes.iter().enumerate() {
                if i % 32 == 0 {
                    now += step;
                }
                black_box(m.color_blind(black_box(s), now));
            }
        })
    });
    g.finish();
}

fn remark(c: &mut Criterion) {
    let mut g = c.benchmark_group("remark");
    g.throughput(Throughput::Elements(CALLS as u64));
    for (name, mut f) in [("set_dscp_v4", v4_frame()), ("set_dscp_v6", v6_frame())] {
        g.bench_function(name, |b| {
            b.iter(|| {
                for i in 0..CALLS {
                    black_box(set_dscp(black_box(&mut f), 14, (i & 63) as u8));
                }
            })
        });
        assert!(set_dscp(&mut f, 14, 46));
    }
    g.finish();
}

/// A TX ring with room for everything: copies each frame into one slot.
struct Sink {
    slot: Vec<u8>,
    sent: u64,
}

impl TxSink for Sink {
    #[inline]
    fn slot(&mut self) -> Option<&mut [u8]> {
        Some(&mut self.slot[..])
    }

    #[inline]
    fn commit(&mut self, class: usize, len: usize, _: pipeline::counters::Dest) {
        self.sent += (class + len) as u64;
    }
}

fn queues(c: &mut Criterion) {
    let mut g = c.benchmark_group("queues");
    const FRAMES: usize = 256;
    g.throughput(Throughput::Elements(FRAMES as u64));
    let spec = |priority, weight| QueueSpec {
        priority,
        weight,
        depth: FRAMES,
    };
    let mut q = EgressQueues::new(
        &[
            spec(true, 1),
            spec(false, 4),
            spec(false, 2),
            spec(false, 1),
        ],
        io::MAX_FRAME_LEN,
    );
    let frame = v4_frame();
    let mut sink = Sink {
        slot: vec![0; io::MAX_FRAME_LEN],
        sent: 0,
    };
    g.bench_function("enqueue_drain_64B_4q", |b| {
        b.iter(|| {
            for i in 0..FRAMES {
                assert!(q.enqueue(i & 3, black_box(&frame)));
            }
            assert_eq!(q.drain(&mut sink), FRAMES);
        })
    });
    black_box(sink.sent);
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = policers, remark, queues
}
criterion_main!(benches);
