//! The nDPI binding's input path: arbitrary bytes cut into frames of one
//! or more flows and fed through the whole engine (parse, flow table,
//! signatures, nDPI, counters) from both sides. Never a panic or a
//! crash inside nDPI; counters stay consistent.
#![no_main]
use dpi::engine::{Engine, EngineConfig, Policy, Side};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

fn policy() -> Arc<Policy> {
    static P: OnceLock<Arc<Policy>> = OnceLock::new();
    P.get_or_init(|| {
        let n = dpi::ndpi::Ndpi::new().expect("nDPI");
        let services = vec![
            ("web".to_string(), vec!["HTTP".to_string(), "TLS".to_string()]),
            ("dns".to_string(), vec!["DNS".to_string()]),
        ];
        let mut p = Policy::compile(&n, &services, vec![]).expect("policy");
        // Bandwidth control on: `web` limited both ways, so the token
        // buckets and drop counters see the fuzzed frames too.
        p.bandwidth.limits[2] = [64_000, 128_000];
        Arc::new(p)
    })
    .clone()
}

fuzz_target!(|data: &[u8]| {
    let mut e = Engine::new(
        EngineConfig {
            flows: 64,
            classify_slots: 8,
            usage_entries: 64,
            guess: data.first().is_some_and(|b| b & 1 == 1),
            ..EngineConfig::default()
        },
        policy(),
    )
    .expect("engine");
    // One subscriber owns every address: flows get usage entries, so
    // bandwidth control acts on them.
    let mut db = dpi::subscriber::SubscriberDb::new(1);
    let all = dpi::subscriber::Subscriber {
        id: "all".into(),
        package: dpi::subscriber::Package::Bronze,
        quota_bytes: None,
        limits: Default::default(),
        prefixes: vec![
            dpi::subscriber::Prefix::parse("0.0.0.0/0").expect("v4"),
            dpi::subscriber::Prefix::parse("::/0").expect("v6"),
        ],
    };
    db.upsert(all, false).expect("subscriber");
    db.publish();
    let view = db.published().load_full();
    // Frames: a length byte, then that many bytes; byte 0x80 of the
    // length picks the side.
    let mut rest = data.get(1..).unwrap_or(&[]);
    let mut t = 0;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len & 0x7f).min(tail.len());
        // Prefix an Ethernet header for IPv4 or IPv6 by the first nibble.
        let mut frame = vec![0u8; 14];
        frame[12] = 0x08;
        if tail.first().is_some_and(|b| b >> 4 == 6) {
            frame[12] = 0x86;
            frame[13] = 0xdd;
        }
        frame.extend_from_slice(&tail[..n]);
        let side = if len & 0x80 != 0 { Side::Network } else { Side::Subscriber };
        // The batch prefetch reads the same bytes first (a hint).
        e.prefetch(std::iter::once((frame.as_slice(), side)), &view);
        e.process(&frame, side, &view, t);
        t += 1;
        rest = &tail[n..];
    }
    e.clear(t);
    let s = e.stats();
    assert_eq!(s.engine.classifying.get(), 0);
    assert_eq!(s.engine.flows_live.get(), 0);
    assert_eq!(e.classify_slots().0, 0);
});
