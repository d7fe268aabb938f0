//! ACL classifier benchmarks: `cargo bench -p tables --bench acl`.
//!
//! Two rule-set shapes at 100, 1,000, 10,000 and 32,292 rules, IPv4 and
//! IPv6:
//! - `deny`: the acceptance shape, `deny tcp any <host or /24 (/64)> eq
//!   <port>` on distinct non-sequential ports, then `permit any`; keys are
//!   TCP to the denied destinations on ports no rule denies, so every
//!   lookup ends at the final permit (the worst case for early
//!   termination).
//! - `mixed`: ClassBench-like: source and destination prefixes of varied
//!   lengths over a pool of networks (so they nest), protocols
//!   tcp/udp/icmp/any, source ports mostly any, destination ports exact,
//!   any, 0-1023, 1024-65535 or short ranges (rules wild in both
//!   addresses are `tcp/udp any any eq <port>`), then `permit any`; 3/4 of
//!   the keys drawn from random rules' space, 1/4 random.
//!
//! Lookups run over 256-key batches from a 65,536-key array, one
//! `lookup` per key (`<n>`) and one `lookup_batch` per 256 keys
//! (`batch/<n>`). Compile time,
//! memory and table shape are printed when each set is compiled
//! (`ACL_BENCH_TABLES=1` also prints every table), and the tables the
//! first level leaves a key, on average over the keys. A last group times the
//! linear first-match scan on the 1,000-rule acceptance shape, for scale.
//! `ACL_BENCH_PROFILE=<deny|mixed>,<4|6>,<rules>,<lookups>[,batch]` runs
//! one set as a plain loop instead, for `perf` and `valgrind` (docs/acl.md).

use criterion::{black_box, criterion_group, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};
use tables::acl::{AclKey, Classifier, Match};

const SIZES: [usize; 4] = [100, 1_000, 10_000, 32_292];
const BATCH: usize = 256;
const KEYS: usize = 1 << 16;

fn addr(r: &mut StdRng, fam: u8) -> u128 {
    if fam == 6 {
        (0x2001_0db8u128 << 96) | (r.gen::<u128>() >> 32)
    } else {
        r.gen::<u32>() as u128
    }
}

fn width(fam: u8) -> u32 {
    if fam == 6 {
        128
    } else {
        32
    }
}

fn host_bits(r: &mut StdRng, fam: u8, len: u8) -> u128 {
    let w = width(fam);
    let ones = if w == 128 { !0u128 } else { (1u128 << w) - 1 };
    r.gen::<u128>() & ones.checked_shr(len as u32).unwrap_or(0)
}

fn key(fam: u8, src: u128, dst: u128, proto: u8, sport: u16, dport: u16) -> AclKey {
    AclKey {
        ethertype: if fam == 6 { 0x86dd } else { 0x0800 },
        family: fam,
        src_ip: src,
        dst_ip: dst,
        proto,
        src_port: sport,
        dst_port: dport,
        tcp_flags: 0x10,
        ..Default::default()
    }
}

/// Acceptance shape: `n - 1` denies and a final permit; keys that match
/// no deny.
fn deny_set(n: usize, fam: u8) -> (Vec<Match>, Vec<AclKey>) {
    let mut r = StdRng::seed_from_u64(0xac1_0000 + n as u64 + fam as u64);
    let mut ports: Vec<u16> = (1..=u16::MAX).collect();
    for i in (1..ports.len()).rev() {
        ports.swap(i, r.gen_range(0..=i));
    }
    let (host, net) = if fam == 6 { (128, 64) } else { (32, 24) };
    let mut rules = Vec::with_capacity(n);
    let mut dsts = Vec::with_capacity(n);
    for &port in ports.iter().take(n - 1) {
        let len = if r.gen_bool(0.5) { host } else { net };
        let d = addr(&mut r, fam);
        dsts.push((d, len));
        rules.push(Match {
            family: Some(fam),
            dst_ip: Some((d, len)),
            proto: Some(6),
            dst_port: Some((port, port)),
            ..Default::default()
        });
    }
    rules.push(Match::default());
    let free = &ports[n - 1..];
    let keys = (0..KEYS)
        .map(|_| {
            let (d, len) = dsts[r.gen_range(0..dsts.len())];
            let d = d | host_bits(&mut r, fam, len);
            let p = free[r.gen_range(0..free.len())];
            key(fam, addr(&mut r, fam), d, 6, r.gen_range(1024..=65535), p)
        })
        .collect();
    (rules, keys)
}

fn pick_len(r: &mut StdRng, fam: u8, table: &[(u32, u8, u8)]) -> u8 {
    let x = r.gen_range(0..100);
    let mut acc = 0;
    for &(pct, lo, hi) in table {
        acc += pct;
        if x < acc {
            let (lo, hi) = if fam == 6 {
                (lo as u32 * 4, hi as u32 * 4)
            } else {
                (lo as u32, hi as u32)
            };
            return r.gen_range(lo..=hi).min(width(fam)) as u8;
        }
    }
    0
}

/// ClassBench-like mixed set: `n - 1` rules and a final permit; keys from
/// the rules' space and random ones.
fn mixed_set(n: usize, fam: u8) -> (Vec<Match>, Vec<AclKey>) {
    let mut r = StdRng::seed_from_u64(0xc1a5_5be7 + n as u64 + fam as u64);
    // Networks the prefixes are cut from, so that they nest and overlap.
    let nets: Vec<u128> = (0..n / 32 + 4).map(|_| addr(&mut r, fam)).collect();
    // (percent, shortest, longest) for IPv4; IPv6 lengths are 4x (capped).
    let src_lens = [
        (30, 0, 0),
        (5, 8, 15),
        (10, 16, 16),
        (10, 17, 23),
        (20, 24, 24),
        (5, 25, 31),
        (20, 32, 32),
    ];
    let dst_lens = [
        (10, 0, 0),
        (10, 16, 16),
        (15, 17, 23),
        (25, 24, 24),
        (5, 25, 31),
        (35, 32, 32),
    ];
    let mut rules = Vec::with_capacity(n);
    for _ in 0..n - 1 {
        let mut m = Match {
            family: Some(fam),
            ..Default::default()
        };
        let sl = pick_len(&mut r, fam, &src_lens);
        if sl > 0 {
            m.src_ip = Some((
                nets[r.gen_range(0..nets.len())]
                    ^ host_bits(&mut r, fam, if fam == 6 { 80 } else { 20 }),
                sl,
            ));
        }
        let dl = pick_len(&mut r, fam, &dst_lens);
        if dl > 0 {
            m.dst_ip = Some((
                nets[r.gen_range(0..nets.len())]
                    ^ host_bits(&mut r, fam, if fam == 6 { 80 } else { 20 }),
                dl,
            ));
        }
        let icmp = if fam == 6 { 58 } else { 1 };
        m.proto = match r.gen_range(0..100) {
            0..=49 => Some(6),
            50..=74 => Some(17),
            75..=84 => Some(icmp),
            _ => None,
        };
        if matches!(m.proto, Some(6) | Some(17)) {
            m.src_port = match r.gen_range(0..100) {
                0..=84 => None,
                85..=91 => Some((1024, 65535)),
                _ => {
                    let p = r.gen_range(1..1024);
                    Some((p, p))
                }
            };
            m.dst_port = match r.gen_range(0..100) {
                0..=49 => {
                    let p = if r.gen_bool(0.5) {
                        [22, 23, 25, 53, 80, 110, 123, 143, 443, 993, 3306, 8080]
                            [r.gen_range(0..12)]
                    } else {
                        r.gen_range(1..=65535)
                    };
                    Some((p, p))
                }
                50..=69 => None,
                70..=77 => Some((0, 1023)),
                78..=85 => Some((1024, 65535)),
                _ => {
                    let lo = r.gen_range(1..60000);
                    Some((lo, lo + r.gen_range(1..500)))
                }
            };
        } else if m.proto == Some(icmp) && r.gen_bool(0.5) {
            let t = [0, 3, 8, 11][r.gen_range(0..4)];
            m.src_port = Some((t, t));
        }
        // No `ip any any` before the end (it would shadow the rest): rules
        // wild in both addresses are `tcp/udp any any eq <port>`.
        if m.src_ip.is_none() && m.dst_ip.is_none() {
            m.proto = Some([6, 17][r.gen_range(0..2)]);
            let p = r.gen_range(1..=65535);
            m.dst_port = Some((p, p));
        }
        rules.push(m);
    }
    rules.push(Match::default());
    let keys = (0..KEYS)
        .map(|i| {
            if i % 4 == 3 {
                let nd = nets[r.gen_range(0..nets.len())]
                    ^ host_bits(&mut r, fam, if fam == 6 { 80 } else { 20 });
                let proto = [6, 17, 1, 58, 47][r.gen_range(0..5)];
                return key(fam, addr(&mut r, fam), nd, proto, r.gen(), r.gen());
            }
            let m = &rules[r.gen_range(0..rules.len() - 1)];
            let ip = |r: &mut StdRng, p: Option<(u128, u8)>| match p {
                Some((a, l)) => a | host_bits(r, fam, l),
                None => addr(r, fam),
            };
            let port = |r: &mut StdRng, p: Option<(u16, u16)>| match p {
                Some((lo, hi)) => r.gen_range(lo..=hi),
                None => r.gen(),
            };
            let src = ip(&mut r, m.src_ip);
            let dst = ip(&mut r, m.dst_ip);
            let proto = m.proto.unwrap_or([6, 17][r.gen_range(0..2)]);
            let sp = port(&mut r, m.src_port);
            let dp = port(&mut r, m.dst_port);
            key(fam, src, dst, proto, sp, dp)
        })
        .collect();
    (rules, keys)
}

fn compile(name: &str, rules: &[Match]) -> Classifier {
    let t = Instant::now();
    let c = Classifier::compile(rules);
    let dt = t.elapsed();
    let s = c.stats();
    eprintln!(
        "acl {name}: {} rules compiled in {:.1} ms; {} tables (default rule {:?}), {} buckets, largest bucket {}, overflow {}; {:.2} MiB, {:.1} MiB on 2 MB pages",
        rules.len(),
        dt.as_secs_f64() * 1e3,
        s.tables,
        s.default_rule,
        s.buckets,
        s.largest_bucket,
        s.overflow_rules,
        c.memory_bytes() as f64 / 1048576.0,
        c.huge_backed_bytes().unwrap_or(0) as f64 / 1048576.0
    );
    if std::env::var_os("ACL_BENCH_TABLES").is_some() {
        for t in &s.per_table {
            eprintln!("  {t:?}");
        }
    }
    c
}

fn bench(c: &mut Criterion) {
    type Gen = fn(usize, u8) -> (Vec<Match>, Vec<AclKey>);
    let shapes: [(&str, Gen); 2] = [("deny", deny_set), ("mixed", mixed_set)];
    for (shape, gen) in shapes {
        for fam in [4u8, 6] {
            let mut g = c.benchmark_group(format!("acl_{shape}_v{fam}"));
            g.throughput(Throughput::Elements(BATCH as u64));
            for n in SIZES {
                let (rules, keys) = gen(n, fam);
                let cl = compile(&format!("{shape} v{fam}"), &rules);
                // The answers of the first batch, checked against the scan
                // once so a broken build cannot post a figure.
                for k in &keys[..BATCH] {
                    assert_eq!(
                        cl.lookup(k),
                        rules.iter().position(|m| m.matches(k)).map(|i| i as u32)
                    );
                }
                let probed: usize = keys.iter().map(|k| cl.tables_for(k)).sum();
                eprintln!(
                    "acl {shape} v{fam} {n}: {:.2} tables a key after the first level {:?}",
                    probed as f64 / keys.len() as f64,
                    cl.stats().cuts
                );
                let mut out = vec![None; BATCH];
                cl.lookup_batch(&keys[..BATCH], &mut out);
                for (k, o) in keys[..BATCH].iter().zip(&out) {
                    assert_eq!(*o, cl.lookup(k));
                }
                let mut pos = 0usize;
                g.bench_function(format!("{n}"), |b| {
                    b.iter(|| {
                        pos = (pos + BATCH) & (KEYS - 1);
                        let mut acc = 0u32;
                        for k in &keys[pos..pos + BATCH] {
                            acc = acc.wrapping_add(cl.lookup(black_box(k)).unwrap_or(0));
                        }
                        acc
                    })
                });
                g.bench_function(format!("batch/{n}"), |b| {
                    b.iter(|| {
                        pos = (pos + BATCH) & (KEYS - 1);
                        cl.lookup_batch(black_box(&keys[pos..pos + BATCH]), &mut out);
                        out.iter().fold(0u32, |a, o| a.wrapping_add(o.unwrap_or(0)))
                    })
                });
            }
            g.finish();
        }
    }
    // Baseline: the linear first-match scan the classifier replaces, on
    // the acceptance shape at 1,000 rules (keys end at the final permit).
    let (rules, keys) = deny_set(1_000, 4);
    let mut g = c.benchmark_group("acl_linear_scan_deny_v4");
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut pos = 0usize;
    g.bench_function("1000", |b| {
        b.iter(|| {
            pos = (pos + BATCH) & (KEYS - 1);
            let mut acc = 0usize;
            for k in &keys[pos..pos + BATCH] {
                acc += rules
                    .iter()
                    .position(|m| m.matches(black_box(k)))
                    .unwrap_or(0);
            }
            acc
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
    name = acl;
    config = config();
    targets = bench
}

/// `ACL_BENCH_PROFILE=<deny|mixed>,<4|6>,<rules>,<lookups>[,batch]`:
/// instead of criterion, compile that set and run `lookups` lookups over
/// the keys (per key, or in 256-key `lookup_batch` calls), for `perf
/// stat` / `perf record`: run it with 0 and with N lookups and subtract
/// to get counts per lookup (docs/acl.md, "Profile").
fn profile(spec: &str) {
    let f: Vec<&str> = spec.split(',').collect();
    fn bad<T>() -> T {
        panic!("ACL_BENCH_PROFILE=<deny|mixed>,<4|6>,<rules>,<lookups>[,batch]")
    }
    if f.len() < 4 {
        bad::<()>();
    }
    let fam: u8 = f[1].parse().unwrap_or_else(|_| bad());
    let n: usize = f[2].parse().unwrap_or_else(|_| bad());
    let lookups: usize = f[3].parse().unwrap_or_else(|_| bad());
    let batch = f.get(4) == Some(&"batch");
    let (rules, keys) = match f[0] {
        "deny" => deny_set(n, fam),
        "mixed" => mixed_set(n, fam),
        _ => bad(),
    };
    let cl = compile(spec, &rules);
    let t = Instant::now();
    let mut acc = 0u32;
    let mut pos = 0usize;
    let mut out = vec![None; BATCH];
    let mut done = 0;
    while done < lookups {
        let ks = &keys[pos..pos + BATCH];
        if batch {
            cl.lookup_batch(black_box(ks), &mut out);
            acc = out.iter().fold(acc, |a, o| a.wrapping_add(o.unwrap_or(0)));
        } else {
            for k in ks {
                acc = acc.wrapping_add(cl.lookup(black_box(k)).unwrap_or(0));
            }
        }
        pos = (pos + BATCH) & (KEYS - 1);
        done += BATCH;
    }
    let dt = t.elapsed();
    eprintln!(
        "acl profile {spec}: {done} lookups in {:.3} s, {:.1} ns/lookup (acc {acc})",
        dt.as_secs_f64(),
        dt.as_secs_f64() * 1e9 / done.max(1) as f64
    );
}

fn main() {
    if let Ok(spec) = std::env::var("ACL_BENCH_PROFILE") {
        profile(&spec);
        return;
    }
    acl();
    Criterion::default().configure_from_args().final_summary();
}
