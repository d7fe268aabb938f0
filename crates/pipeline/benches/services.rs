//! The services stage per packet, one core, from memory: the lab's
//! `services: true` setup — a 10,000-line IPv4 ACL (TCP denies on
//! non-sequential ports + permit) in and out, a 500-line input policy
//! (8 classes, `class-default` re-marks every packet), flow accounting in
//! a 1,048,576-entry cache — on 64-byte UDP frames from 4,096 flows.
//! Groups: `key` (extract only), `acl_in` (key + ingress list),
//! `all` (key + ingress list + policy + re-mark + flow + egress list).
//!
//! `cargo bench -p pipeline --bench services`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use pipeline::services::{
    extract_key, ip_len, tos, AclFamily, AclList, AclSet, AttachPoint, AttachedAcl, AttachedPolicy,
    ClassSpec, Direction, FlowSettings, Policy, ServiceState, Services,
};
use std::sync::Arc;
use tables::acl::{AclKey, Classifier, Match};

const FRAMES: usize = 256;

fn frames() -> Vec<Vec<u8>> {
    (0..FRAMES)
        .map(|i| {
            let mut f = vec![0u8; 60];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&46u16.to_be_bytes());
            f[22] = 64;
            f[23] = 17;
            f[26..30].copy_from_slice(&[198, 18, (i >> 8) as u8, i as u8]);
            f[30..34].copy_from_slice(&[198, 19, 0, 1]);
            f[34..36].copy_from_slice(&(1000 + (i as u16 * 16)).to_be_bytes());
            f[36..38].copy_from_slice(&0x4c59u16.to_be_bytes());
            f
        })
        .collect()
}

fn services() -> Services {
    let mut rules: Vec<Match> = (0..10_000u32)
        .map(|i| {
            let p = (1024 + (i * 7_919) % 60_000) as u16;
            Match {
                family: Some(4),
                proto: Some(6),
                dst_port: Some((p, p)),
                ..Match::default()
            }
        })
        .collect();
    rules.push(Match {
        family: Some(4),
        ..Match::default()
    });
    let n = rules.len();
    let acl = Arc::new(AclList {
        name: "bench".into(),
        family: AclFamily::Ipv4,
        classifier: Classifier::compile(&rules),
        line_rule: (0..n as u32).collect(),
        permit: (0..n).map(|i| i == n - 1).collect(),
        log: vec![false; n].into(),
        log_events: crossbeam_queue::ArrayQueue::new(16),
    });
    let lines: Vec<Match> = (0..500u32)
        .map(|i| Match {
            family: Some(4),
            proto: Some(if i % 2 == 0 { 6 } else { 17 }),
            dst_port: Some(((2000 + i * 3) as u16, (2000 + i * 3) as u16)),
            ..Match::default()
        })
        .collect();
    let class = |k: usize, dscp: u8| ClassSpec {
        name: format!("c{k}"),
        set_dscp: Some(dscp),
        set_pcp: None,
        police: None,
    };
    let mut classes: Vec<ClassSpec> = (0..8).map(|k| class(k, (k * 8) as u8)).collect();
    classes.push(class(8, 10));
    let policy = Arc::new(Policy {
        name: "bench".into(),
        classifier: Classifier::compile(&lines),
        line_class: (0..500u16).map(|i| (i / 63).min(7)).collect(),
        classes: classes.into(),
        queues: None,
    });
    let mut s = Services::empty(1, 8);
    let attach = |at: u16, dir: Direction| AclSet {
        v4: Some(Arc::new(AttachedAcl::new(
            acl.clone(),
            AttachPoint::Port(at),
            dir,
            1,
        ))),
        ..AclSet::default()
    };
    s.port_in[0] = attach(0, Direction::In);
    s.port_out[1] = attach(1, Direction::Out);
    s.policy_in[0] = Some(Arc::new(AttachedPolicy::new(policy, 0, Direction::In, 1)));
    s.flows = Some(FlowSettings {
        sampling: 1,
        active_ms: 60_000,
        inactive_ms: 15_000,
        cache_size: 1 << 20,
    });
    s.generation = 1;
    s.finish();
    s
}

fn bench(c: &mut Criterion) {
    let s = services();
    let mut st = ServiceState::new(0);
    st.sync(&s, 0);
    let mut fs = frames();
    let mut g = c.benchmark_group("services");
    g.throughput(Throughput::Elements(FRAMES as u64));
    let mut k = AclKey::default();
    g.bench_function("key", |b| {
        b.iter(|| {
            for f in &fs {
                black_box(extract_key(f, 12, 1, &mut k));
            }
        })
    });
    g.bench_function("acl_in", |b| {
        b.iter(|| {
            for f in &fs {
                extract_key(f, 12, 1, &mut k);
                black_box(s.port_in[0].permits(&k, 0, 0));
            }
        })
    });
    let mut now = 0u64;
    g.bench_function("all", |b| {
        b.iter(|| {
            now += 1;
            for f in fs.iter_mut() {
                let l3 = extract_key(f, 12, 1, &mut k);
                let t = tos(f, l3, k.family);
                let len = ip_len(f, l3, k.family);
                let mut pcp = 0;
                let d = st.ingress(&s, &mut k, f, l3, 0, 1, &mut pcp, now * 1000);
                st.account(&s, &k, t, 0, 1, len, 1, now);
                black_box((d, st.egress(&s, &k, f, l3, 1, 1)));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
