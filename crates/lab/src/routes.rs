//! Synthetic route tables for layer-3 scale tests (`routes: N`,
//! `routes6: M`): reproducible, pairwise disjoint prefixes outside the test
//! subnets, spread round-robin over the emulated hosts as gateways, and the
//! destination addresses the generator samples from them.
//!
//! IPv4: every route owns its own /20 "slot" of 1.0.0.0–223.255.255.255
//! (minus 0/8, 10/8, 127/8, 169/8, 172/8, 192/8 and 198/8, which holds the
//! test subnets 198.18.0.0/15); the prefix lies inside its slot, so no two
//! routes overlap and a destination's route is known without a lookup.
//! Lengths: 80 % /24, the rest /20–/23 and /25–/32. Slots are visited in a
//! fixed pseudo-random order, so consecutive routes are far apart.
//!
//! IPv6: every route owns a /32 slot of 2000::/3 (minus 2001::/32, which
//! holds the test subnets 2001:2::/48, and 2001:db8::/32); 70 % /48, the
//! rest /32–/44 and /56–/64.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Most IPv4 routes (one per usable /20 slot).
pub const MAX_V4: u32 = 217 * 4096;
/// Most IPv6 routes the lab generates.
pub const MAX_V6: u32 = 4_000_000;

/// One route: prefix, length, and the tester port whose host is the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<A> {
    /// Network address (host bits zero).
    pub addr: A,
    /// Prefix length.
    pub len: u8,
    /// Gateway: the emulated host of this tester port (0-based).
    pub port: usize,
    /// A destination address inside the prefix (what the generator sends to).
    pub dest: A,
}

/// An IPv4 route.
pub type Route4 = Route<Ipv4Addr>;
/// An IPv6 route.
pub type Route6 = Route<Ipv6Addr>;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn v4_first_octets() -> Vec<u8> {
    (1u8..=223)
        .filter(|o| ![10, 127, 169, 172, 192, 198].contains(o))
        .collect()
}

/// `n` IPv4 routes, gateways round-robin over `ports` tester ports.
pub fn v4(n: u32, ports: usize) -> Vec<Route4> {
    let octets = v4_first_octets();
    let slots = octets.len() as u64 * 4096;
    debug_assert_eq!(slots, MAX_V4 as u64);
    // A multiplier coprime to 2^12 · 7 · 31 (217 first octets) makes
    // k → a·k + c a bijection.
    let (a, c) = (1_000_003u64, 77_777u64);
    (0..n.min(MAX_V4))
        .map(|k| {
            let slot = (a * k as u64 + c) % slots;
            let base = u32::from_be_bytes([octets[(slot / 4096) as usize], 0, 0, 0])
                | ((slot % 4096) as u32) << 12;
            let r = splitmix(0x4c41_4234 ^ k as u64);
            let len: u8 = match r % 100 {
                0..=79 => 24,
                80..=81 => 20,
                82..=83 => 21,
                84..=86 => 22,
                87..=89 => 23,
                x => 25 + (x % 8) as u8,
            };
            // Place the prefix inside the /20 slot, then a host inside it.
            let within = (1u32 << (32 - 20)) - 1;
            let size_mask = if len == 32 {
                0
            } else {
                (1u32 << (32 - len)) - 1
            };
            let net = base | (((r >> 8) as u32) & within & !size_mask);
            let host = if size_mask >= 3 {
                1 + ((r >> 32) as u32) % (size_mask - 1)
            } else {
                ((r >> 32) as u32) & size_mask
            };
            Route {
                addr: Ipv4Addr::from(net),
                len,
                port: k as usize % ports.max(1),
                dest: Ipv4Addr::from(net | host),
            }
        })
        .collect()
}

/// `n` IPv6 routes, gateways round-robin over `ports` tester ports.
pub fn v6(n: u32, ports: usize) -> Vec<Route6> {
    let slots = 1u64 << 29; // /32s in 2000::/3
    let (a, c) = (2_654_435_761u64, 12_345u64); // odd: a bijection mod 2^29
    let mut out = Vec::with_capacity(n as usize);
    let mut k = 0u64;
    while out.len() < n.min(MAX_V6) as usize {
        let slot = (a.wrapping_mul(k).wrapping_add(c)) % slots;
        let top = 0x2000_0000u32 | slot as u32;
        let r = splitmix(0x4c41_4236 ^ k);
        k += 1;
        if top == 0x2001_0000 || top == 0x2001_0db8 {
            continue;
        }
        let len: u8 = match r % 100 {
            0..=69 => 48,
            70..=74 => 32,
            75..=79 => 36,
            80..=84 => 40,
            85..=89 => 44,
            90..=94 => 56,
            _ => 64,
        };
        let base = (top as u128) << 96;
        let size_mask: u128 = (1u128 << (128 - len)) - 1;
        let within: u128 = (1u128 << 96) - 1;
        let net = base | ((r as u128) << 64 & within & !size_mask);
        let host = (splitmix(r) as u128 & size_mask & u64::MAX as u128) | 1;
        out.push(Route {
            addr: Ipv6Addr::from(net),
            len,
            port: out.len() % ports.max(1),
            dest: Ipv6Addr::from(net | host),
        });
    }
    out
}

/// `ip -batch` lines adding `routes` with the emulated hosts as gateways.
pub fn ip_batch<A: std::fmt::Display + Copy>(
    routes: &[Route<A>],
    gateway: impl Fn(usize) -> String,
) -> String {
    let mut s = String::with_capacity(routes.len() * 48);
    for r in routes {
        s.push_str(&format!(
            "route add {}/{} via {}\n",
            r.addr,
            r.len,
            gateway(r.port)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_prefix4(a: Ipv4Addr, net: Ipv4Addr, len: u8) -> bool {
        let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        u32::from(a) & m == u32::from(net)
    }

    #[test]
    fn v4_routes_are_disjoint_reproducible_and_outside_test_subnets() {
        let r = v4(50_000, 4);
        assert_eq!(r, v4(50_000, 4));
        assert_eq!(r.len(), 50_000);
        let mut spans: Vec<(u32, u32)> = r
            .iter()
            .map(|x| {
                let lo = u32::from(x.addr);
                (lo, lo + ((1u64 << (32 - x.len)) - 1) as u32)
            })
            .collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            assert!(w[0].1 < w[1].0, "overlap {w:?}");
        }
        let n24 = r.iter().filter(|x| x.len == 24).count();
        assert!(n24 > 35_000 && n24 < 45_000, "{n24} /24s");
        assert!(r.iter().any(|x| x.len == 32) && r.iter().any(|x| x.len == 20));
        for x in &r {
            let o = x.addr.octets()[0];
            assert!((1..=223).contains(&o) && o != 198 && o != 10 && o != 127);
            let m = if x.len == 32 { 0 } else { u32::MAX >> x.len };
            assert_eq!(u32::from(x.addr) & m, 0, "host bits in {x:?}");
            assert!(in_prefix4(x.dest, x.addr, x.len), "{x:?}");
        }
        assert_eq!(r[5].port, 1);
        assert_eq!(v4(MAX_V4, 2).len(), MAX_V4 as usize);
    }

    #[test]
    fn v6_routes_are_disjoint_and_outside_test_subnets() {
        let r = v6(20_000, 2);
        assert_eq!(r, v6(20_000, 2));
        let mut tops: Vec<u32> = r
            .iter()
            .map(|x| (u128::from(x.addr) >> 96) as u32)
            .collect();
        tops.sort_unstable();
        tops.dedup();
        assert_eq!(tops.len(), r.len(), "one /32 slot per route");
        for x in &r {
            let a = u128::from(x.addr);
            assert_eq!(a >> 125, 1, "2000::/3");
            assert_ne!((a >> 96) as u32, 0x2001_0000);
            let m = u128::MAX >> x.len;
            assert_eq!(a & m, 0);
            assert_eq!(u128::from(x.dest) & !m, a, "{x:?}");
        }
        let n48 = r.iter().filter(|x| x.len == 48).count();
        assert!(n48 > 12_000 && n48 < 16_000);
    }

    #[test]
    fn batch_lines() {
        let r = v4(2, 2);
        let b = ip_batch(&r, |p| format!("198.18.{}.2", p + 1));
        assert_eq!(b.lines().count(), 2);
        assert!(b.lines().nth(1).unwrap().ends_with("via 198.18.2.2"));
    }
}
