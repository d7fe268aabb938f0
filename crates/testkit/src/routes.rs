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

/// splitmix64 of `x`: a stateless hash, so that who owns an address block
/// is a pure function of the block and the seed.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// First octets never used by [`RouterPrefixes`]: the test links use
/// 10/8, and the rest are special-purpose (loopback, shared, link-local,
/// private, documentation) or multicast and above.
fn v4_octet_reserved(o: u32) -> bool {
    matches!(o, 0 | 10 | 100 | 127 | 169 | 172 | 192 | 198 | 203) || o >= 224
}

/// Where the IPv6 sets start: `3fff::/20` (documentation, RFC 9637), which
/// holds 2^28 /48s, so no generated prefix can clash with the test links
/// (`2001:db8::/32`).
pub const V6_BASE: u128 = 0x3fff_u128 << 112;

/// The prefixes one /20 block (16 /24 slots) is cut into, by pattern
/// `h % 100`: mostly sixteen /24s, sometimes one /20 or two /21s, and a few
/// blocks with /22, /23 and /25–/32, so an LPM meets several lengths.
fn v4_block(base: u32, h: u64) -> Vec<(u32, u8)> {
    let slot = |i: u32| base + (i << 8);
    match h % 100 {
        0..=79 => (0..16).map(|i| (slot(i), 24)).collect(),
        80..=87 => vec![(base, 20)],
        88..=91 => vec![(base, 21), (slot(8), 21)],
        92..=95 => {
            let mut v: Vec<(u32, u8)> = (0..8).map(|i| (slot(i), 24)).collect();
            v.push((slot(8), 22));
            v.push((slot(12), 23));
            v.push((slot(14), 25));
            v.push((slot(14) + 128, 25));
            v.extend((0..4).map(|q| (slot(15) + q * 64, 26)));
            v
        }
        _ => {
            let mut v = vec![(base, 22), (slot(4), 23)];
            v.extend((6..14).map(|i| (slot(i), 24)));
            v.push((slot(14), 27));
            v.push((slot(14) + 64, 28));
            v.push((slot(14) + 128, 30));
            v.push((slot(15) + 1, 32));
            v
        }
    }
}

/// The prefixes one /48 block is cut into: mostly the /48 itself, else
/// /52–/64s spread over its subnet-id space.
fn v6_block(base: u128, h: u64) -> Vec<(u128, u8)> {
    let sub = |id: u128| base | id << 64;
    match h % 100 {
        0..=69 => vec![(base, 48)],
        70..=79 => (0..4).map(|i| (sub(i * 0x4000), 56)).collect(),
        80..=89 => (0..8).map(|i| (sub(i * 0x2000), 64)).collect(),
        90..=94 => vec![(base, 52), (sub(0x8000), 60), (sub(0xc010), 60)],
        _ => vec![
            (base, 50),
            (sub(0x4000), 62),
            (sub(0x8000), 63),
            (sub(0xffff), 64),
        ],
    }
}

/// Disjoint, reproducible prefix sets for `routers` routers that each
/// advertise their own part of one table, so a test knows which router
/// (and so which port) owns any generated prefix.
///
/// IPv4: the space from 11.0.0.0 up (skipping special-purpose /8s) is cut
/// into /20 blocks; each block belongs to router `hash(seed, block) %
/// routers` and is cut into mostly /24s plus a few /20–/23 and /25–/32
/// (see `v4_block`). IPv6: `3fff::/20` is cut into /48 blocks the same way,
/// each becoming a /48 or some /49–/64s. Ownership is interleaved at block
/// granularity, so neighbouring prefixes often go to different routers and
/// each router's set spans the whole generated range. Each router's list
/// is in address order and no prefix of one router overlaps another's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterPrefixes {
    /// `v4[k]`: router k's IPv4 prefixes (address, length), 0-based k.
    pub v4: Vec<Vec<(u32, u8)>>,
    /// `v6[k]`: router k's IPv6 prefixes.
    pub v6: Vec<Vec<(u128, u8)>>,
}

impl RouterPrefixes {
    /// `v4_each` IPv4 and `v6_each` IPv6 prefixes for each of `routers`.
    pub fn new(routers: usize, v4_each: usize, v6_each: usize, seed: u64) -> RouterPrefixes {
        assert!(routers > 0);
        let mut v4 = vec![Vec::with_capacity(v4_each); routers];
        let mut full = 0;
        let mut base: u32 = 11 << 24;
        while full < routers {
            if v4_octet_reserved(base >> 24) {
                base = ((base >> 24) + 1) << 24;
                assert!(base >> 24 < 224, "IPv4 space exhausted");
                continue;
            }
            let h = mix(seed ^ u64::from(base) ^ 0x5634);
            let k = (h % routers as u64) as usize;
            let set = &mut v4[k];
            if set.len() < v4_each {
                let need = v4_each - set.len();
                set.extend(v4_block(base, h >> 16).into_iter().take(need));
                if set.len() == v4_each {
                    full += 1;
                }
            }
            base += 1 << 12;
        }
        let mut v6 = vec![Vec::with_capacity(v6_each); routers];
        let mut full = 0;
        let mut block: u128 = 0;
        while full < routers {
            assert!(block < 1 << 28, "IPv6 space exhausted");
            let h = mix(seed ^ (block as u64) << 1 ^ 0x6a09);
            let k = (h % routers as u64) as usize;
            let set = &mut v6[k];
            if set.len() < v6_each {
                let need = v6_each - set.len();
                set.extend(
                    v6_block(V6_BASE | block << 80, h >> 16)
                        .into_iter()
                        .take(need),
                );
                if set.len() == v6_each {
                    full += 1;
                }
            }
            block += 1;
        }
        RouterPrefixes { v4, v6 }
    }

    /// Number of routers.
    pub fn routers(&self) -> usize {
        self.v4.len()
    }

    /// About `per_router` sample (address, owning router, prefix) triples
    /// per router, from evenly spaced positions of its list (first and last
    /// included) plus one prefix of each length it has, with a host address
    /// inside the prefix that depends on `seed`.
    pub fn sample_v4(
        &self,
        per_router: usize,
        seed: u64,
    ) -> Vec<(std::net::Ipv4Addr, usize, (u32, u8))> {
        let mut out = Vec::new();
        for (k, set) in self.v4.iter().enumerate() {
            for (i, (p, len)) in spread(set, |x| x.1, per_router) {
                let host = if len == 32 {
                    0
                } else {
                    (mix(seed ^ (k as u64) << 40 ^ i as u64) as u32) & !(!0u32 << (32 - len))
                };
                out.push(((p | host).into(), k, (p, len)));
            }
        }
        out
    }

    /// Like [`RouterPrefixes::sample_v4`], for IPv6.
    pub fn sample_v6(
        &self,
        per_router: usize,
        seed: u64,
    ) -> Vec<(std::net::Ipv6Addr, usize, (u128, u8))> {
        let mut out = Vec::new();
        for (k, set) in self.v6.iter().enumerate() {
            for (i, (p, len)) in spread(set, |x| x.1, per_router) {
                let r = mix(seed ^ (k as u64) << 40 ^ i as u64 ^ 0x77);
                let r = u128::from(r) << 64 | u128::from(mix(r));
                let host = if len == 128 {
                    0
                } else {
                    r & !(!0u128 << (128 - len))
                };
                out.push(((p | host).into(), k, (p, len)));
            }
        }
        out
    }
}

/// Indices and items of `set`: `n` evenly spaced ones (first and last
/// included) plus the first item of each length `len_of` reports that those
/// missed.
fn spread<T: Copy>(set: &[T], len_of: impl Fn(&T) -> u8, n: usize) -> Vec<(usize, T)> {
    if set.is_empty() || n == 0 {
        return Vec::new();
    }
    let mut idx: Vec<usize> = if n == 1 || set.len() == 1 {
        vec![0]
    } else {
        (0..n).map(|j| j * (set.len() - 1) / (n - 1)).collect()
    };
    let mut lens: Vec<u8> = idx.iter().map(|&i| len_of(&set[i])).collect();
    for (i, x) in set.iter().enumerate() {
        let l = len_of(x);
        if !lens.contains(&l) {
            lens.push(l);
            idx.push(i);
        }
    }
    idx.sort_unstable();
    idx.dedup();
    idx.into_iter().map(|i| (i, set[i])).collect()
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

    #[test]
    fn router_prefixes_disjoint_and_reproducible() {
        let a = RouterPrefixes::new(8, 3000, 1500, 42);
        assert_eq!(a, RouterPrefixes::new(8, 3000, 1500, 42));
        assert_ne!(a, RouterPrefixes::new(8, 3000, 1500, 43));
        // Every address range of router k must not contain or be contained
        // in one of another router: sort all ranges and check neighbours.
        let mut r4: Vec<(u64, u64, usize)> = Vec::new();
        for (k, set) in a.v4.iter().enumerate() {
            assert_eq!(set.len(), 3000);
            assert!(set.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
            for &(p, l) in set {
                assert_eq!(p & !(!0u64 << (32 - l)) as u32, 0, "masked");
                assert!(!v4_octet_reserved(p >> 24));
                let end = u64::from(p) + (1u64 << (32 - l)) - 1;
                r4.push((u64::from(p), end, k));
            }
        }
        r4.sort();
        for w in r4.windows(2) {
            assert!(w[0].1 < w[1].0 || w[0].2 == w[1].2, "overlap {w:?}");
        }
        let lens: HashSet<u8> = a.v4.iter().flatten().map(|x| x.1).collect();
        assert!(lens.len() >= 8, "{lens:?}");
        let mut r6: Vec<(u128, u128, usize)> = Vec::new();
        for (k, set) in a.v6.iter().enumerate() {
            assert_eq!(set.len(), 1500);
            for &(p, l) in set {
                assert!((48..=64).contains(&l));
                assert_eq!(p >> 108, V6_BASE >> 108);
                r6.push((p, p | !(!0u128 << (128 - l)), k));
            }
        }
        r6.sort();
        for w in r6.windows(2) {
            assert!(w[0].1 < w[1].0 || w[0].2 == w[1].2, "overlap {w:?}");
        }
        // Samples fall inside their prefix, cover every router and length.
        let s4 = a.sample_v4(10, 1);
        for (addr, k, (p, l)) in &s4 {
            let x = u32::from(*addr);
            assert_eq!(x & (!0u64 << (32 - l)) as u32, *p);
            assert!(a.v4[*k].contains(&(*p, *l)));
        }
        let ks: HashSet<usize> = s4.iter().map(|x| x.1).collect();
        assert_eq!(ks.len(), 8);
        let sl: HashSet<u8> = s4.iter().map(|x| x.2 .1).collect();
        assert_eq!(sl, lens);
        for (addr, k, (p, l)) in a.sample_v6(10, 1) {
            assert_eq!(u128::from(addr) & (!0u128 << (128 - l)), p);
            assert!(a.v6[k].contains(&(p, l)));
        }
    }
}
