//! Inline engine benchmarks: `cargo bench -p dpi --bench engine`
//! (docs/performance.md, "Inline service control").
//!
//! - `new_flow/udp`: the first packet of a new UDP flow — flow table
//!   insert, subscriber lookup among 250,000, classification slot and the
//!   first nDPI call — in steady state: flows idle out after 1 ms of the
//!   benchmark's own clock (1 µs per packet) and the sweep runs every 64
//!   packets, as a worker's loop would;
//! - `new_flow/tcp_syn`, `new_flow/icmp`: the same for a new TCP flow's
//!   SYN (a connection attempt, no payload) and a new ICMP flow's echo
//!   request (a new identifier each) — the lab's `new-flows: tcp | icmp`;
//! - `new_flow/tcp_syn/batch32`, `new_flow/icmp/batch32`: the same in
//!   batches of 32 with the batch prefetch, as `new_flow/udp/batch32`;
//! - `new_flow/ndpi_only/{udp,tcp_syn,icmp}`: nDPI alone on the same
//!   first packets (fresh state, one `ndpi_detection_process_packet`,
//!   state freed): the floor of the `new_flow/…` times above;
//! - `tcp_connection`: a whole short TCP connection (SYN, SYN+ACK, ACK, an
//!   HTTP request and response, FIN both ways: 7 packets) per element, the
//!   report's "new connection" — nDPI names it HTTP on the request;
//! - `established/1M`: a packet of a decided flow among 1,000,000 live
//!   ones (lookup, counters, bandwidth check; no nDPI);
//! - `…/batch32`: the same frames in batches of 32 with the engine's
//!   batch prefetch ([`Engine::prefetch`]) first, as the worker calls it
//!   (criterion's time is per batch: divide by 32).
//!
//! `LANYARD_BENCH_FLOWS=8388608` sizes the table as the report's 8 M.
//!
//! Times are this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall
//! time: on a shared machine a benchmark that waits for a core would
//! otherwise count the wait. Cache and memory contention still show.

use criterion::measurement::WallTime;
use criterion::{
    black_box, criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput,
};
use dpi::engine::{Engine, EngineConfig, Policy, Side};
use dpi::flow::Timeouts;
use dpi::ndpi::{FlowPool, Ndpi};
use dpi::packet::{build, parse_ethernet, ACK, FIN, ICMP, SYN, TCP, UDP};
use dpi::subscriber::{Package, Prefix, Subscriber, SubscriberDb};
use std::sync::Arc;
use std::time::Duration;

const SUBSCRIBERS: u32 = 250_000;
const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/7.88.1\r\n\r\n";
const OK: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 2\r\n\r\nhi";

/// This thread's CPU time.
fn cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `f` `iters` times; returns the CPU time it took.
fn cpu_time(iters: u64, mut f: impl FnMut()) -> Duration {
    let t = cpu_now();
    for _ in 0..iters {
        f();
    }
    cpu_now() - t
}

fn table_size() -> usize {
    std::env::var("LANYARD_BENCH_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 20)
}

/// Subscriber `i`'s address: 10.0.0.0/8 (250,000 fit).
fn sub_addr(i: u32) -> [u8; 4] {
    (0x0a00_0000 + i).to_be_bytes()
}

fn engine(timeouts: Timeouts, classify_packets: u16) -> (Engine, SubscriberDb) {
    let n = Ndpi::new().unwrap();
    let services = vec![
        (
            "web".to_string(),
            vec!["HTTP".to_string(), "TLS".to_string()],
        ),
        ("dns".to_string(), vec!["DNS".to_string()]),
    ];
    let policy = Arc::new(Policy::compile(&n, &services, vec![]).unwrap());
    let mut db = SubscriberDb::new(SUBSCRIBERS as usize);
    for i in 0..SUBSCRIBERS {
        let a = sub_addr(i);
        db.upsert(
            Subscriber {
                id: format!("s{i}").into(),
                package: Package::ALL[(i % 3) as usize],
                quota_bytes: None,
                limits: Default::default(),
                prefixes: vec![
                    Prefix::parse(&format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])).unwrap(),
                ],
            },
            false,
        )
        .unwrap();
    }
    db.publish();
    let e = Engine::new(
        EngineConfig {
            flows: table_size(),
            timeouts,
            classify_slots: 1 << 16,
            classify_packets,
            usage_entries: 1 << 20,
            ..EngineConfig::default()
        },
        policy,
    )
    .unwrap();
    (e, db)
}

/// Every state idles out after 1 ms of the benchmark's clock.
fn short() -> Timeouts {
    Timeouts {
        ms: [1; 10],
        evict_min_idle_ms: 1,
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("dpi");
    let srv = [192, 0, 2, 10];

    // New UDP flows: 65,536 prebuilt first packets from rotating
    // subscribers and ports.
    let (mut e, db) = engine(short(), 24);
    let view = db.published().load_full();
    let frames: Vec<Vec<u8>> = (0..65_536u32)
        .map(|i| {
            build::v4(
                UDP,
                sub_addr(i % SUBSCRIBERS),
                srv,
                1024 + (i % 60_000) as u16,
                53,
                0,
                b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01",
            )
        })
        .collect();
    let mut now_us = 10_000u64;
    let mut k = 0usize;
    g.throughput(Throughput::Elements(1));
    g.bench_function("new_flow/udp", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                now_us += 1;
                let f = &frames[k % frames.len()];
                k += 1;
                black_box(e.process_us(f, Side::Subscriber, &view, now_us));
                if k.is_multiple_of(64) {
                    e.sweep(now_us / 1000, 256);
                }
            })
        })
    });
    // The same in batches of 32, as a worker gets them, with the
    // engine's batch prefetch first (time per batch; per frame ÷ 32).
    g.throughput(Throughput::Elements(32));
    g.bench_function("new_flow/udp/batch32", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                let start = (k & !31) % frames.len();
                let batch = &frames[start..(start + 32).min(frames.len())];
                e.prefetch(
                    batch.iter().map(|f| (f.as_slice(), Side::Subscriber)),
                    &view,
                );
                for f in batch {
                    now_us += 1;
                    k += 1;
                    black_box(e.process_us(f, Side::Subscriber, &view, now_us));
                    if k.is_multiple_of(64) {
                        e.sweep(now_us / 1000, 256);
                    }
                }
            })
        })
    });
    g.throughput(Throughput::Elements(1));
    eprintln!(
        "new_flow/udp: table {} of {}, {} created, {} expired, {} evicted, {} refused",
        e.flows().len(),
        e.flows().capacity(),
        e.stats().engine.flows_created.get(),
        e.stats().engine.expired.get(),
        e.stats().engine.evicted_idle.get(),
        e.stats().engine.refused_full.get()
    );
    drop(e);

    // New TCP flows (a SYN each) and new ICMP flows (an echo request with
    // a new identifier each), from rotating subscribers.
    let syns: Vec<Vec<u8>> = (0..65_536u32)
        .map(|i| {
            let sp = 1024 + (i % 60_000) as u16;
            build::v4(TCP, sub_addr(i % SUBSCRIBERS), srv, sp, 80, SYN, b"")
        })
        .collect();
    new_flows(&mut g, "new_flow/tcp_syn", &syns);
    let echoes: Vec<Vec<u8>> = (0..65_536u32)
        .map(|i| {
            // Type 8, code 0 where `build::v4` puts the ports; the
            // identifier and sequence after them (checksum not verified).
            let mut f = build::v4(ICMP, sub_addr(i % SUBSCRIBERS), srv, 0x0800, 0, 0, &[0; 32]);
            f[38..40].copy_from_slice(&(i as u16).to_be_bytes());
            f[40..42].copy_from_slice(&1u16.to_be_bytes());
            f
        })
        .collect();
    new_flows(&mut g, "new_flow/icmp", &echoes);
    // nDPI's own share of each: a fresh state, the first packet, freed.
    ndpi_only(&mut g, "new_flow/ndpi_only/udp", &frames);
    ndpi_only(&mut g, "new_flow/ndpi_only/tcp_syn", &syns);
    ndpi_only(&mut g, "new_flow/ndpi_only/icmp", &echoes);

    // Whole TCP connections.
    let (mut e, db) = engine(short(), 24);
    let view = db.published().load_full();
    let conns: Vec<[Vec<u8>; 7]> = (0..16_384u32)
        .map(|i| {
            let s = sub_addr(i % SUBSCRIBERS);
            let sp = 1024 + (i % 60_000) as u16;
            let up = |fl, pl: &[u8]| build::v4(TCP, s, srv, sp, 80, fl, pl);
            let down = |fl, pl: &[u8]| build::v4(TCP, srv, s, 80, sp, fl, pl);
            [
                up(SYN, b""),
                down(SYN | ACK, b""),
                up(ACK, b""),
                up(ACK, GET),
                down(ACK, OK),
                up(FIN | ACK, b""),
                down(FIN | ACK, b""),
            ]
        })
        .collect();
    let sides = [
        Side::Subscriber,
        Side::Network,
        Side::Subscriber,
        Side::Subscriber,
        Side::Network,
        Side::Subscriber,
        Side::Network,
    ];
    let mut k = 0usize;
    g.bench_function("tcp_connection", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                let c = &conns[k % conns.len()];
                k += 1;
                for (f, s) in c.iter().zip(sides) {
                    now_us += 1;
                    black_box(e.process_us(f, s, &view, now_us));
                }
                if k.is_multiple_of(16) {
                    e.sweep(now_us / 1000, 256);
                }
            })
        })
    });
    let st = e.stats();
    eprintln!(
        "tcp_connection: {} created, by nDPI {}, unknown {}, refused {}",
        st.engine.flows_created.get(),
        st.engine.by_ndpi.get(),
        st.engine.unknown.get(),
        st.engine.refused_full.get()
    );
    drop(e);

    // Established flows: 1,000,000 live, decided (on their first packet:
    // `classify-packets` 1), hit at random.
    let (mut e, db) = engine(Timeouts::default(), 1);
    let view = db.published().load_full();
    let n = 1_000_000u32.min(table_size() as u32 / 2);
    let key = |i: u32| {
        (
            sub_addr(i % SUBSCRIBERS),
            1024 + (i / SUBSCRIBERS) as u16 * 7 + (i % 7) as u16,
        )
    };
    for i in 0..n {
        let (s, sp) = key(i);
        let f = build::v4(UDP, s, srv, sp, 5000, 0, b"x");
        e.process_us(&f, Side::Subscriber, &view, 1000);
    }
    let mut r = 0x9e37_79b9u32;
    let hits: Vec<Vec<u8>> = (0..65_536)
        .map(|_| {
            r ^= r << 13;
            r ^= r >> 17;
            r ^= r << 5;
            let (s, sp) = key(r % n);
            build::v4(UDP, s, srv, sp, 5000, 0, b"payload")
        })
        .collect();
    let mut k = 0usize;
    g.bench_function("established/1M", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                let f = &hits[k % hits.len()];
                k += 1;
                black_box(e.process_us(f, Side::Subscriber, &view, 2000));
            })
        })
    });
    g.throughput(Throughput::Elements(32));
    g.bench_function("established/1M/batch32", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                let start = (k & !31) % hits.len();
                let batch = &hits[start..(start + 32).min(hits.len())];
                k += batch.len();
                e.prefetch(
                    batch.iter().map(|f| (f.as_slice(), Side::Subscriber)),
                    &view,
                );
                for f in batch {
                    black_box(e.process_us(f, Side::Subscriber, &view, 2000));
                }
            })
        })
    });
    eprintln!(
        "established/1M: {} live flows, memory {} MiB",
        e.flows().len(),
        e.memory_bytes() >> 20
    );
    g.finish();
}

/// `name`: the first packet of a new flow from `frames` in turn, in steady
/// state (flows idle out after 1 ms of the benchmark's clock), as
/// `new_flow/udp`.
fn new_flows(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, frames: &[Vec<u8>]) {
    let (mut e, db) = engine(short(), 24);
    let view = db.published().load_full();
    let mut now_us = 10_000u64;
    let mut k = 0usize;
    g.throughput(Throughput::Elements(1));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                now_us += 1;
                let f = &frames[k % frames.len()];
                k += 1;
                black_box(e.process_us(f, Side::Subscriber, &view, now_us));
                if k.is_multiple_of(64) {
                    e.sweep(now_us / 1000, 256);
                }
            })
        })
    });
    // The same in batches of 32 with the batch prefetch (time per batch).
    g.throughput(Throughput::Elements(32));
    g.bench_function(format!("{name}/batch32"), |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                let start = (k & !31) % frames.len();
                let batch = &frames[start..(start + 32).min(frames.len())];
                e.prefetch(
                    batch.iter().map(|f| (f.as_slice(), Side::Subscriber)),
                    &view,
                );
                for f in batch {
                    now_us += 1;
                    k += 1;
                    black_box(e.process_us(f, Side::Subscriber, &view, now_us));
                    if k.is_multiple_of(64) {
                        e.sweep(now_us / 1000, 256);
                    }
                }
            })
        })
    });
    g.throughput(Throughput::Elements(1));
    let st = e.stats();
    eprintln!(
        "{name}: {} created, by nDPI {}, by guess {}, unknown {}, refused {}",
        st.engine.flows_created.get(),
        st.engine.by_ndpi.get(),
        st.engine.by_guess.get(),
        st.engine.unknown.get(),
        st.engine.refused_full.get()
    );
}

/// `name`: nDPI alone on the first packet of a new flow from `frames` in
/// turn — a zeroed state from the pool, `ndpi_detection_process_packet`,
/// the state freed — the part of `new_flow/…` the engine cannot cut.
fn ndpi_only(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, frames: &[Vec<u8>]) {
    let mut n = Ndpi::new().unwrap();
    let mut pool = FlowPool::new(1 << 16);
    let l3: Vec<&[u8]> = frames
        .iter()
        .map(|f| &f[parse_ethernet(f).unwrap().l3..])
        .collect();
    let mut now_ms = 10u64;
    let mut k = 0usize;
    let mut named = 0u64;
    g.throughput(Throughput::Elements(1));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                let ip = l3[k % l3.len()];
                k += 1;
                now_ms += u64::from(k.is_multiple_of(1000));
                let slot = pool.alloc().unwrap();
                let p = n.process(&mut pool, slot, ip, now_ms);
                named += u64::from(p.id() != dpi::ndpi::UNKNOWN);
                pool.release(slot);
            })
        })
    });
    eprintln!("{name}: {k} first packets, {named} named");
}

criterion_group!(benches, bench);
criterion_main!(benches);
