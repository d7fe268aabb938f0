//! The fuzz targets' properties on stable, with generated inputs:
//! mutated real frames and random bytes through the whole engine (the
//! nDPI binding's input path), random text through bulk provisioning.

use dpi::engine::{Engine, EngineConfig, Policy, Side};
use dpi::packet::{build, ACK, SYN, TCP, UDP};
use std::sync::Arc;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let c = [10, 0, 0, 1];
    let s = [10, 0, 0, 2];
    vec![
        build::v4(TCP, c, s, 40000, 80, SYN, b""),
        build::v4(
            TCP,
            c,
            s,
            40000,
            80,
            ACK,
            b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
        ),
        build::v4(
            TCP,
            s,
            c,
            80,
            40000,
            ACK,
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        ),
        build::v4(
            UDP,
            c,
            s,
            5353,
            53,
            0,
            b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x00\x00\x01\x00\x01",
        ),
        build::v4(
            TCP,
            c,
            s,
            40001,
            443,
            ACK,
            b"\x16\x03\x01\x00\x40\x01\x00\x00\x3c\x03\x03",
        ),
        build::v4(
            TCP,
            c,
            s,
            40002,
            22,
            ACK,
            b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
        ),
        build::v6(UDP, 1, 2, 1000, 53, 0, b"\x00\x01\x01\x00\x00\x01"),
        build::v6(TCP, 1, 2, 1000, 6881, ACK, b"\x13BitTorrent protocol"),
    ]
}

/// Quotas kept in the test's subscriber table.
struct Book<'a>(&'a mut dpi::subscriber::SubscriberDb);

impl dpi::bandwidth::QuotaBook for Book<'_> {
    fn add_used(&mut self, slot: u32, gen: u16, bytes: u64) -> Option<dpi::bandwidth::QuotaState> {
        let out = self.0.add_used(slot, gen, bytes)?;
        Some(dpi::bandwidth::QuotaState {
            out,
            rate_bps: self.0.by_slot(slot, gen)?.limits.quota_rate_bps,
        })
    }
}

#[test]
fn mutated_and_random_frames_through_the_engine() {
    let n = dpi::ndpi::Ndpi::new().unwrap();
    let services = vec![(
        "web".to_string(),
        vec!["HTTP".to_string(), "TLS".to_string()],
    )];
    let mut policy = Policy::compile(&n, &services, vec![]).unwrap();
    // Bandwidth control on (`web` limited both ways, `unknown` upstream)
    // and one subscriber owning every address: frames meet the buckets.
    policy.bandwidth.limits[2] = [64_000, 128_000];
    policy.bandwidth.limits[0] = [8_000, 0];
    policy.bandwidth.classifying = [16_000, 0];
    let policy = Arc::new(policy);
    let mut db = dpi::subscriber::SubscriberDb::new(1);
    db.upsert(
        dpi::subscriber::Subscriber {
            id: "all".into(),
            package: dpi::subscriber::Package::Silver,
            quota_bytes: Some(1000),
            limits: dpi::subscriber::Limits {
                cap_bps: [100_000, 200_000],
                quota_rate_bps: Some(8_000),
                quota_period_s: None,
            },
            prefixes: vec![
                dpi::subscriber::Prefix::parse("0.0.0.0/0").unwrap(),
                dpi::subscriber::Prefix::parse("::/0").unwrap(),
            ],
        },
        false,
    )
    .unwrap();
    db.publish();
    let view = db.published().load_full();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let seeds = seeds();
    let mut acted = 0;
    for round in 0..20 {
        let mut e = Engine::new(
            EngineConfig {
                flows: 64,
                classify_slots: 8,
                usage_entries: 64,
                guess: round % 2 == 0,
                ..EngineConfig::default()
            },
            policy.clone(),
        )
        .unwrap();
        let levels = Arc::new(dpi::bandwidth::Levels::new(&policy.bandwidth));
        e.set_levels(levels.clone());
        let mut control = dpi::bandwidth::Controller::new(policy.bandwidth.clone(), &[e.stats()]);
        for t in 0..2000u64 {
            let mut f = seeds[rng.below(seeds.len())].clone();
            match rng.below(4) {
                0 => {
                    for _ in 0..1 + rng.below(6) {
                        let i = rng.below(f.len());
                        f[i] = rng.next() as u8;
                    }
                }
                1 => f.truncate(rng.below(f.len() + 1)),
                2 => {
                    let len = rng.below(200);
                    f.truncate(14);
                    f.extend((0..len).map(|_| rng.next() as u8));
                    if rng.below(2) == 0 {
                        if f.len() > 14 {
                            f[14] = 0x45;
                        }
                    } else {
                        f[12] = 0x86;
                        f[13] = 0xdd;
                        if f.len() > 14 {
                            f[14] = 0x60;
                        }
                    }
                }
                _ => {}
            }
            let side = if rng.below(2) == 0 {
                Side::Subscriber
            } else {
                Side::Network
            };
            e.process(&f, side, &view, t);
            if t % 500 == 0 {
                e.sweep(t, 64);
            }
            if t % 20 == 0 {
                control.tick(&[e.stats()], &levels, 20_000, &mut Book(&mut db));
            }
        }
        e.clear(1_000_000);
        let s = e.stats();
        assert_eq!(s.engine.classifying.get(), 0);
        assert_eq!(s.engine.flows_live.get(), 0);
        assert_eq!(e.classify_slots().0, 0);
        let active: u64 = s.services.iter().map(|u| u.active.get()).sum();
        assert_eq!(active, 0);
        assert_eq!(s.engine.packets.get(), 2000);
        acted += s.engine.quota_dropped.get()
            + s.services
                .iter()
                .map(|u| u.dropped_packets[0].get() + u.dropped_packets[1].get())
                .sum::<u64>();
    }
    // The quota (1000 bytes) ran out and bandwidth control acted.
    let (_, link) = db.get("all").unwrap();
    assert!(db.used(link.slot, link.gen) >= 1000);
    assert!(acted > 0);
}

#[test]
fn random_provisioning_text_is_errors_not_panics() {
    let words = [
        "add",
        "set",
        "del",
        "a",
        "b",
        "c",
        "package=gold",
        "package=silver",
        "package=x",
        "addr=10.0.0.1",
        "addr=10.0.0.0/24",
        "addr=2001:db8::/56,10.0.0.2",
        "addr=",
        "quota=5G",
        "quota=-1",
        "#",
        "\n",
        "=",
        "\u{0}",
        "addr=300.1.1.1",
        "package=bronze",
    ];
    let mut rng = Rng(42);
    for _ in 0..300 {
        let mut text = String::new();
        for _ in 0..rng.below(60) {
            text.push_str(words[rng.below(words.len())]);
            text.push(if rng.below(5) == 0 { '\n' } else { ' ' });
        }
        for mode in [
            dpi::provision::Mode::Atomic,
            dpi::provision::Mode::SkipErrors,
        ] {
            let mut db = dpi::subscriber::SubscriberDb::new(8);
            let r = dpi::provision::load(&mut db, std::io::Cursor::new(text.as_bytes()), mode);
            assert_eq!(r.subscribers as usize, db.len());
            let view = db.published().load_full();
            for (s, link) in db.iter() {
                for p in &s.prefixes {
                    let host = p.len == if p.v6 { 128 } else { 32 };
                    let found = view.lookup(p.addr, p.v6).unwrap();
                    assert!(!host || found == link);
                }
            }
        }
    }
}
