//! L3 stage cost per packet, one core: batches of 256 64-byte frames to
//! random destinations inside 240,000 synthetic IPv4 routes / 118,000
//! synthetic IPv6 routes (the prefix mixes of `tables/benches/lpm.rs`),
//! over 14 gateways on 7 ports and two 2-way ECMP groups, all neighbours
//! resolved. Each batch is restored from a pristine copy between timed
//! calls (untimed), so every call forwards every frame. The
//! `urpf_off_410_interfaces` case adds 402 idle routed interfaces (the
//! chassis scale, issue 21): the per-packet cost must not grow with them.
//! `cargo bench -p pipeline --bench l3`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use io::{FrameBatch, BATCH_MAX};
use pipeline::l3::{
    process_l3, L3Counters, L3Tables, L3Verdict, L3Verdicts, RouterInterface, Urpf,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::{Group, Lpm4, Lpm6, Neighbor, NeighborState, NeighborTable, NextHop, NextHopTable};
use testkit::routes::{v4_prefixes, v6_prefixes, Rng};

const V4_ROUTES: usize = 240_000;
const V6_ROUTES: usize = 118_000;
const PORTS: u16 = 8;
const BATCHES: usize = 64;

fn mac(port: u16) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, port as u8]
}

/// Port 0: ingress, connected 10.0.0.0/24 and 2001:db8::/64. Ports 1–7:
/// gateways 10.0.p.1/.2 and 2001:db8:p::1/::2. Targets: 14 next hops per
/// family plus two ECMP groups.
type Prefixes = (Vec<(u32, u8)>, Vec<(u128, u8)>);

/// `interfaces` routed interfaces: ports 0–7 as above, the rest idle
/// with an address each (the own-address lookup sees them all).
fn tables(urpf: Urpf, interfaces: u16) -> (L3Tables, Prefixes) {
    let nh = NextHopTable::new(64, 4);
    let nb = NeighborTable::new(256);
    let fib4 = Lpm4::new();
    let fib6 = Lpm6::new();
    let mut ifaces = Vec::new();
    for p in 0..PORTS {
        ifaces.push(RouterInterface {
            port: p,
            mac: mac(p),
            v4: vec![(u32::from(Ipv4Addr::new(10, 0, p as u8, 254)), 24)],
            v6: vec![((0x2001_0db8u128 << 96) | (u128::from(p) << 80) | 0xfe, 64)],
            mtu: 1500,
            urpf: if p == 0 { urpf } else { Urpf::Off },
            vlan: None,
            vrf: 0,
        });
    }
    for p in PORTS..interfaces {
        ifaces.push(RouterInterface {
            port: p,
            mac: [0x02, 1, 0, 0, (p >> 8) as u8, p as u8],
            // Outside the benched prefixes (class E, ULA).
            v4: vec![(0xf000_0000 + u32::from(p), 30)],
            v6: vec![((0xfd00u128 << 112) | (u128::from(p) << 64) | 1, 64)],
            mtu: 1500,
            urpf: Urpf::Off,
            vlan: None,
            vrf: 0,
        });
    }
    nh.set(
        0,
        NextHop {
            port: 0,
            gateway: None,
        },
    )
    .unwrap();
    fib4.insert(u32::from(Ipv4Addr::new(10, 0, 0, 0)), 24, 0)
        .unwrap();
    fib6.insert(0x2001_0db8u128 << 96, 64, 0).unwrap();
    let mut v4_targets = Vec::new();
    let mut v6_targets = Vec::new();
    for p in 1..PORTS {
        for h in 1..=2u8 {
            let id4 = u32::from(p) * 4 + u32::from(h);
            let id6 = id4 + 2;
            let g4 = IpAddr::V4(Ipv4Addr::new(10, 0, p as u8, h));
            let g6 = IpAddr::V6(Ipv6Addr::from(
                (0x2001_0db8u128 << 96) | (u128::from(p) << 80) | u128::from(h),
            ));
            for (id, g) in [(id4, g4), (id6, g6)] {
                nh.set(
                    id,
                    NextHop {
                        port: p,
                        gateway: Some(g),
                    },
                )
                .unwrap();
                let n = Neighbor {
                    mac: [0x02, 0xbb, 0, 0, p as u8, h],
                    port: p,
                    state: NeighborState::Reachable,
                    confirmed: 0,
                };
                assert!(nb.upsert(g, n));
            }
            v4_targets.push(id4);
            v6_targets.push(id6);
        }
    }
    let g4 = nh
        .set_group(
            0,
            &Group {
                members: vec![5, 9],
            },
        )
        .unwrap();
    let g6 = nh
        .set_group(
            1,
            &Group {
                members: vec![7, 11],
            },
        )
        .unwrap();
    v4_targets.push(g4);
    v6_targets.push(g6);
    let p4 = v4_prefixes(V4_ROUTES, 0x1234_5678, 11);
    for (k, &(a, l)) in p4.iter().enumerate() {
        fib4.insert(a, l, v4_targets[k % v4_targets.len()]).unwrap();
    }
    let p6 = v6_prefixes(V6_ROUTES, 0x8765_4321, 0x2400_0000);
    for (k, &(a, l)) in p6.iter().enumerate() {
        fib6.insert(a, l, v6_targets[k % v6_targets.len()]).unwrap();
    }
    let t = L3Tables::new(
        Arc::new(fib4),
        Arc::new(fib6),
        Arc::new(nh),
        Arc::new(nb),
        ifaces,
    );
    (t, (p4, p6))
}

fn frame4(src: u32, dst: u32, sport: u16) -> [u8; 64] {
    let mut f = [0u8; 64];
    f[0..6].copy_from_slice(&mac(0));
    f[6..12].copy_from_slice(&[0x02, 0xaa, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&50u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.to_be_bytes());
    ip[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = wire::checksum::finish(wire::checksum::sum(&ip[..20]));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip[20..22].copy_from_slice(&sport.to_be_bytes());
    ip[22..24].copy_from_slice(&53u16.to_be_bytes());
    ip[24..26].copy_from_slice(&30u16.to_be_bytes());
    f
}

fn frame6(src: u128, dst: u128, sport: u16) -> [u8; 64] {
    let mut f = [0u8; 64];
    f[0..6].copy_from_slice(&mac(0));
    f[6..12].copy_from_slice(&[0x02, 0xaa, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    let ip = &mut f[14..];
    ip[0] = 0x60;
    ip[4..6].copy_from_slice(&10u16.to_be_bytes());
    ip[6] = 17;
    ip[7] = 64;
    ip[8..24].copy_from_slice(&src.to_be_bytes());
    ip[24..40].copy_from_slice(&dst.to_be_bytes());
    ip[40..42].copy_from_slice(&sport.to_be_bytes());
    ip[42..44].copy_from_slice(&53u16.to_be_bytes());
    ip[44..46].copy_from_slice(&10u16.to_be_bytes());
    f
}

/// Random destinations, each inside a randomly chosen installed prefix.
fn batches(v6: bool, p4: &[(u32, u8)], p6: &[(u128, u8)]) -> Vec<(FrameBatch, Vec<[u8; 64]>)> {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    (0..BATCHES)
        .map(|_| {
            let mut b = FrameBatch::new();
            let mut pristine = Vec::new();
            for _ in 0..BATCH_MAX {
                let x = r.next();
                let f = if v6 {
                    let (a, l) = p6[(x % p6.len() as u64) as usize];
                    let host = if l == 128 {
                        0
                    } else {
                        (u128::from(r.next()) | u128::from(r.next()) << 64) & (u128::MAX >> l)
                    };
                    let src = (0x2001_0db8u128 << 96) | 0x100 | u128::from(x as u8);
                    frame6(src, a | host, (x >> 16) as u16)
                } else {
                    let (a, l) = p4[(x % p4.len() as u64) as usize];
                    let host = if l == 32 {
                        0
                    } else {
                        (r.next() as u32) & (u32::MAX >> l)
                    };
                    let src = u32::from(Ipv4Addr::new(10, 0, 0, 1 + (x as u8 % 200)));
                    frame4(src, a | host, (x >> 16) as u16)
                };
                assert!(b.push(0, &f));
                pristine.push(f);
            }
            (b, pristine)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("l3_pipeline");
    g.throughput(Throughput::Elements(BATCH_MAX as u64));
    for (urpf, interfaces, uname) in [
        (Urpf::Off, PORTS, "urpf_off"),
        (Urpf::Strict, PORTS, "urpf_strict"),
        (Urpf::Off, 410, "urpf_off_410_interfaces"),
    ] {
        let (t, (p4, p6)) = tables(urpf, interfaces);
        for (v6, name) in [(false, "ipv4_240k"), (true, "ipv6_118k")] {
            let mut bs = batches(v6, &p4, &p6);
            let counters = L3Counters::default();
            let mut out = L3Verdicts::default();
            // Sanity: everything is forwarded.
            for (b, _) in bs.iter_mut() {
                process_l3(&t, b, &mut out, &counters);
                assert!(out.v[..out.len]
                    .iter()
                    .all(|v| matches!(v, L3Verdict::Forward { .. })));
            }
            g.bench_function(BenchmarkId::new(name, uname), |bn| {
                let mut k = 0;
                bn.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (b, pristine) = &mut bs[k % BATCHES];
                        for (i, f) in pristine.iter().enumerate() {
                            b.frame_mut(i).copy_from_slice(f);
                        }
                        let t0 = Instant::now();
                        process_l3(&t, b, &mut out, &counters);
                        total += t0.elapsed();
                        k += 1;
                    }
                    total
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
