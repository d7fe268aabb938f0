//! Synthetic route sets with a realistic prefix-length mix, for FIB
//! benchmarks. Deterministic: the same seed gives the same set.

use std::collections::HashSet;

/// xorshift64: cheap, deterministic, good enough to spread test keys.
pub struct Rng(pub u64);

impl Rng {
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `n` distinct IPv4 prefixes: mostly /24, then /16–/23, some /25–/32 and
/// /8–/15, with first octets from `first_octet` to 223 (unicast).
pub fn v4_prefixes(n: usize, seed: u64, first_octet: u8) -> Vec<(u32, u8)> {
    let lo = first_octet.clamp(1, 223) as u32;
    let mut r = Rng(seed);
    let mut seen = HashSet::new();
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let x = r.next();
        let len = match x % 100 {
            0..=57 => 24,
            58..=89 => 16 + (x >> 8) as u8 % 8,
            90..=97 => 25 + (x >> 8) as u8 % 8,
            _ => 8 + (x >> 8) as u8 % 8,
        };
        let a = (lo + ((x >> 16) as u32 % (224 - lo))) << 24 | (x >> 40) as u32 & 0x00ff_ffff;
        let a = a & (!0u32 << (32 - len));
        if seen.insert((a, len)) {
            v.push((a, len));
        }
    }
    v
}

/// `n` distinct IPv6 prefixes under provider /32s (about 20 prefixes each)
/// whose first 32 bits are `base` OR 28 random bits (e.g. base 0x2000_0000
/// for 2000::/4): mostly /48, then /32, /40–/47, /49–/64, some /128 and
/// /20–/31.
pub fn v6_prefixes(n: usize, seed: u64, base: u32) -> Vec<(u128, u8)> {
    let mut r = Rng(seed);
    let base = base as u128;
    let providers: Vec<u128> = (0..n / 20 + 1)
        .map(|_| (base | (r.next() as u128 & 0x0fff_ffff)) << 96)
        .collect();
    let mut seen = HashSet::new();
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let x = r.next();
        let p = providers[(x % providers.len() as u64) as usize];
        let len = match (x >> 20) % 100 {
            0..=54 => 48,
            55..=69 => 32,
            70..=79 => 40 + (x >> 28) as u8 % 8,
            80..=94 => 49 + (x >> 28) as u8 % 16,
            95..=97 => 128,
            _ => 20 + (x >> 28) as u8 % 12,
        };
        let a = p | (r.next() as u128) << 32 | r.next() as u128;
        let a = a & (!0u128 << (128 - len));
        if seen.insert((a, len)) {
            v.push((a, len));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_masked_and_deterministic() {
        let a = v4_prefixes(5000, 7, 11);
        assert_eq!(a, v4_prefixes(5000, 7, 11));
        assert!(a
            .iter()
            .all(|&(p, l)| l <= 32 && p >> 24 >= 11 && p & !(!0u32 << (32 - l)) == 0));
        let b = v6_prefixes(5000, 7, 0x2000_0000);
        assert!(b
            .iter()
            .all(|&(p, l)| p >> 124 == 2 && (l == 128 || p & !(!0u128 << (128 - l)) == 0)));
        assert_eq!(b.iter().collect::<HashSet<_>>().len(), 5000);
    }
}
