//! The no-panic contract on stable Rust: the same drivers the cargo-fuzz
//! targets run (`support/exercise.rs`), fed ~100k pseudo-random byte strings
//! and random truncations/mutations of the scapy fixtures. A simple xorshift
//! PRNG with fixed seeds keeps runs reproducible and dependency-free.

#[path = "support/exercise.rs"]
mod exercise;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        // xorshift64 (Marsaglia 2003).
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next() as u8;
        }
    }
}

type Driver = (&'static str, fn(&[u8]));

const DRIVERS: [Driver; 9] = [
    ("ethernet", exercise::ethernet),
    ("arp", exercise::arp),
    ("ipv4", exercise::ipv4),
    ("ipv6", exercise::ipv6),
    ("icmp", exercise::icmp),
    ("icmpv6", exercise::icmpv6),
    ("udp", exercise::udp),
    ("tcp", exercise::tcp),
    ("mpls", exercise::mpls),
];

/// Makes random bytes look a little like `driver`'s format half the time, so
/// the checks get past the first length/version test.
fn shape(driver: &str, rng: &mut XorShift, buf: &mut [u8]) {
    if rng.below(2) == 0 || buf.is_empty() {
        return;
    }
    match driver {
        "ethernet" if buf.len() >= 14 => {
            let et: [u8; 2] = match rng.below(5) {
                0 => [0x08, 0x00],
                1 => [0x08, 0x06],
                2 => [0x81, 0x00],
                3 => [0x88, 0xa8],
                _ => [0x86, 0xdd],
            };
            buf[12..14].copy_from_slice(&et);
            if buf.len() >= 18 && rng.below(2) == 0 {
                buf[16..18].copy_from_slice(&[0x08, 0x00]);
            }
            if buf.len() >= 15 && et == [0x08, 0x00] {
                buf[14] = 0x45;
            }
        }
        "mpls" if buf.len() >= 21 => {
            // An Ethernet header with 0x8847 after the 3 parameter bytes,
            // then a short stack.
            buf[15..17].copy_from_slice(&[0x88, 0x47]);
            let depth = 1 + rng.below(3);
            for i in 0..depth.min((buf.len() - 17) / 4) {
                buf[17 + 4 * i + 2] &= !1;
                if i + 1 == depth {
                    buf[17 + 4 * i + 2] |= 1;
                }
            }
        }
        "arp" if buf.len() >= 6 => buf[..6].copy_from_slice(&[0, 1, 8, 0, 6, 4]),
        "ipv4" if buf.len() >= 4 => {
            buf[0] = 0x45 + (rng.below(3) as u8);
            let total = rng.below(buf.len() + 1) as u16;
            buf[2..4].copy_from_slice(&total.to_be_bytes());
        }
        "ipv6" if buf.len() >= 8 => {
            buf[0] = 0x60;
            let len = rng.below(buf.len().saturating_sub(39).max(1)) as u16;
            buf[4..6].copy_from_slice(&len.to_be_bytes());
            buf[6] = [0u8, 43, 44, 60, 51, 17, 6, 58][rng.below(8)];
        }
        _ => {}
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut buf = [0u8; 160];
    for _ in 0..100_000 {
        let len = rng.below(buf.len() + 1);
        for (name, driver) in DRIVERS {
            rng.fill(&mut buf[..len]);
            shape(name, &mut rng, &mut buf[..len]);
            driver(&buf[..len]);
        }
    }
}

fn fixtures() -> Vec<Vec<u8>> {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "hex") {
            let text = std::fs::read_to_string(&path).unwrap();
            let hex: String = text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
                .collect();
            out.push(
                (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect(),
            );
        }
    }
    assert!(out.len() >= 14, "fixtures missing");
    out
}

#[test]
fn mutated_fixtures_never_panic() {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    for frame in fixtures() {
        for _ in 0..3_000 {
            let mut m = frame.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(m.len());
                m[i] = match rng.below(4) {
                    0 => m[i] ^ (1 << rng.below(8)),
                    1 => 0,
                    2 => 0xff,
                    _ => rng.next() as u8,
                };
            }
            let cut = if rng.below(3) == 0 {
                rng.below(m.len() + 1)
            } else {
                m.len()
            };
            let m = &m[..cut];
            exercise::ethernet(m);
            // Also every layer parser directly at every plausible start.
            let start = rng.below(m.len() + 1);
            for (_, driver) in DRIVERS {
                driver(&m[start..]);
            }
        }
    }
}
