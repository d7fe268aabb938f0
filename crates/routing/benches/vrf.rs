//! Per-VRF FIB memory, programming rate and lookups at the report's L3VPN
//! scale (issue 18, docs/vrf.md "Scale"): `cargo bench -p routing --bench vrf`.
//!
//! 192 VRF FIBs as Lanyard builds them (`FibConfig::for_vrf`, 16,384 routes
//! per family), each given the same 1,200 /24s (172.16.0.0/24 up), against
//! one global FIB (`Fib::new`) given 230,400 distinct /24s. Printed once:
//! RSS of the empty VRF FIBs, RSS and the FIB's own memory figures after
//! the routes, and the programming rate (routes/s through `Fib::set`, the
//! path FPM routes take after decoding). Criterion then times lookups of
//! random destinations: in a random VRF of the 192, and in the global
//! table (batches of 256, so ns per lookup = median / 256).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use routing::fib::{Fib, FibConfig, Hop, Source};
use routing::frr::netlink::Prefix;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::Lpm4;
use testkit::routes::Rng;

const VRFS: usize = 192;
const ROUTES: usize = 1_200;

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

/// The `i`-th /24 from `base`.
fn p24(base: u32, i: usize) -> Prefix {
    Prefix::new(IpAddr::V4(Ipv4Addr::from(base + ((i as u32) << 8))), 24).unwrap()
}

fn hop(i: usize) -> Vec<Hop> {
    // A few neighbours, as behind a PE's uplinks.
    vec![Hop::via(
        1 + (i % 8) as u16,
        IpAddr::V4(Ipv4Addr::new(10, 0, 12, 2 + (i % 8) as u8)),
    )]
}

fn mib(k: u64) -> f64 {
    k as f64 / 1024.0
}

fn bench_vrfs(c: &mut Criterion) {
    let r0 = rss_kib();
    let mut vrfs: Vec<Fib> = (0..VRFS)
        .map(|k| {
            Fib::with_config(FibConfig::for_vrf(
                1001 + k as u32,
                routing::router::VRF_ROUTES,
            ))
        })
        .collect();
    let r1 = rss_kib();
    let t = Instant::now();
    for (k, f) in vrfs.iter_mut().enumerate() {
        for i in 0..ROUTES {
            f.set(p24(0xac10_0000, i), Source::Static, hop(i + k))
                .unwrap();
        }
    }
    let dt = t.elapsed();
    let r2 = rss_kib();
    let (mut lookup_b, mut control_b) = (0usize, 0usize);
    for f in &vrfs {
        let s = f.summary();
        assert_eq!(s.v4.installed, ROUTES);
        lookup_b += s.v4.lpm.lookup_bytes;
        control_b += s.v4.lpm.control_bytes;
    }
    eprintln!(
        "{VRFS} VRF FIBs: RSS {:.1} MiB empty ({:.0} KiB per VRF); {} routes in {:.0} ms \
         ({:.0} k routes/s); RSS +{:.1} MiB with the routes ({:.1} KiB per VRF); FIB figures per VRF: \
         lookup {:.1} MiB (address space, touched only as used), control {:.0} KiB",
        mib(r1 - r0),
        (r1 - r0) as f64 / VRFS as f64,
        VRFS * ROUTES,
        dt.as_secs_f64() * 1e3,
        (VRFS * ROUTES) as f64 / dt.as_secs_f64() / 1e3,
        mib(r2 - r1),
        (r2 - r1) as f64 / VRFS as f64,
        lookup_b as f64 / VRFS as f64 / 1048576.0,
        control_b as f64 / VRFS as f64 / 1024.0,
    );
    let g0 = rss_kib();
    let mut global = Fib::new();
    let g1 = rss_kib();
    let t = Instant::now();
    for i in 0..VRFS * ROUTES {
        // 230,400 distinct /24s from 20.0.0.0.
        global
            .set(p24(0x1400_0000, i), Source::Static, hop(i))
            .unwrap();
    }
    let gdt = t.elapsed();
    let g2 = rss_kib();
    let s = global.summary();
    eprintln!(
        "global FIB: RSS {:.1} MiB empty; {} routes in {:.0} ms ({:.0} k routes/s); RSS +{:.1} MiB \
         with the routes; FIB figures: lookup {:.1} MiB, control {:.1} MiB",
        mib(g1 - g0),
        s.v4.installed,
        gdt.as_secs_f64() * 1e3,
        (VRFS * ROUTES) as f64 / gdt.as_secs_f64() / 1e3,
        mib(g2 - g1),
        s.v4.lpm.lookup_bytes as f64 / 1048576.0,
        s.v4.lpm.control_bytes as f64 / 1048576.0,
    );

    let tables: Vec<Arc<Lpm4>> = vrfs.iter().map(|f| f.fib4()).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pairs: Vec<(usize, u32)> = (0..256)
        .map(|_| {
            let v = (rng.next() % VRFS as u64) as usize;
            let i = (rng.next() % ROUTES as u64) as u32;
            (v, 0xac10_0000 + (i << 8) + (rng.next() % 256) as u32)
        })
        .collect();
    let gaddrs: Vec<u32> = (0..256)
        .map(|_| 0x1400_0000 + (((rng.next() % (VRFS * ROUTES) as u64) as u32) << 8) + 7)
        .collect();
    let mut g = c.benchmark_group("vrf_lookup");
    g.throughput(Throughput::Elements(256));
    g.bench_function("192x1200_random_vrf", |b| {
        b.iter(|| {
            let mut hits = 0u32;
            for &(v, a) in &pairs {
                hits += tables[v].lookup(black_box(a)).is_some() as u32;
            }
            hits
        })
    });
    let gt = global.fib4();
    g.bench_function("global_230400", |b| {
        b.iter(|| {
            let mut hits = 0u32;
            for &a in &gaddrs {
                hits += gt.lookup(black_box(a)).is_some() as u32;
            }
            hits
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = vrf;
    config = config();
    targets = bench_vrfs
}
criterion_main!(vrf);
