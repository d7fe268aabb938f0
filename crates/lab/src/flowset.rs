//! Flows and subscribers at scale (`flows: N`, `subscribers: M` on a
//! layer-3 rate test; docs/lab.md): the inline engine report's concurrent
//! flows from many subscribers, at the lab's scale.
//!
//! Flow `i` joins subscriber address `i % M` and server address `i / M`,
//! UDP port 19545 at both ends ([`crate::sig::UDP_PORT`]): the frames
//! from the subscriber side (tester port 1, the inline pair's subscriber
//! port sw1) go subscriber → server, those from the network side server →
//! subscriber, in the same order, so both directions are one flow in a
//! bidirectional flow table and each flow is replied. Addresses are in
//! no route: only DUTs that pass frames as they are carry them.
//!
//! Subscribers: IPv4 100.64.0.0 + k (RFC 6598 shared address space, room
//! for 4,194,304), IPv6 fd00:64::k; servers IPv4 20.0.0.0 + j, IPv6
//! fd00:20::j.

use crate::plan::Family;
use crate::sig::L3;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

/// Subscriber `k`'s IPv4 address.
pub fn subscriber4(k: u32) -> [u8; 4] {
    (u32::from_be_bytes([100, 64, 0, 0]) + k).to_be_bytes()
}

/// Subscriber `k`'s IPv6 address.
pub fn subscriber6(k: u32) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0xfd, 0x00, 0x00, 0x64]);
    a[12..].copy_from_slice(&k.to_be_bytes());
    a
}

fn server4(j: u32) -> [u8; 4] {
    (u32::from_be_bytes([20, 0, 0, 0]) + j).to_be_bytes()
}

fn server6(j: u32) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0xfd, 0x00, 0x00, 0x20]);
    a[12..].copy_from_slice(&j.to_be_bytes());
    a
}

type Key = (Family, u32, u32, bool);

/// The lists of the running test (both directions): every trial builds
/// its streams again, and a list of millions of flows takes a while.
static LAST: Mutex<Vec<(Key, Arc<[L3]>)>> = Mutex::new(Vec::new());

/// The address pairs of `flows` flows over `subscribers` subscribers, as
/// sent from the subscriber side (`upstream`) or the network side.
pub fn addrs(family: Family, flows: u32, subscribers: u32, upstream: bool) -> Arc<[L3]> {
    let key = (family, flows, subscribers, upstream);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, v)) = last.iter().find(|(k, _)| *k == key) {
        return v.clone();
    }
    let v = build(family, flows, subscribers, upstream);
    if last.len() >= 2 {
        last.remove(0);
    }
    last.push((key, v.clone()));
    v
}

fn build(family: Family, flows: u32, subscribers: u32, upstream: bool) -> Arc<[L3]> {
    let m = subscribers.max(1);
    (0..flows)
        .map(|i| {
            let (k, j) = (i % m, i / m);
            match family {
                Family::Ipv4 => {
                    let (s, d) = (subscriber4(k), server4(j));
                    if upstream {
                        L3::V4 { src: s, dst: d }
                    } else {
                        L3::V4 { src: d, dst: s }
                    }
                }
                Family::Ipv6 => {
                    let (s, d) = (subscriber6(k), server6(j));
                    if upstream {
                        L3::V6 { src: s, dst: d }
                    } else {
                        L3::V6 { src: d, dst: s }
                    }
                }
            }
        })
        .collect()
}

/// `lanyard subscribers load` records for `subscribers` subscribers
/// (`sub-K`, each with its IPv4 and IPv6 address; packages gold, silver,
/// bronze in turn).
pub fn provisioning(subscribers: u32) -> String {
    const PACKAGES: [&str; 3] = ["gold", "silver", "bronze"];
    let mut o = String::with_capacity(subscribers as usize * 64);
    for k in 0..subscribers {
        let a = subscriber4(k);
        let b = std::net::Ipv6Addr::from(subscriber6(k));
        let _ = writeln!(
            o,
            "add sub-{k} package={} addr={}.{}.{}.{},{b}",
            PACKAGES[k as usize % 3],
            a[0],
            a[1],
            a[2],
            a[3]
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn both_directions_are_the_same_flows() {
        let up = addrs(Family::Ipv4, 1000, 300, true);
        let down = addrs(Family::Ipv4, 1000, 300, false);
        assert_eq!(up.len(), 1000);
        let mut seen = HashSet::new();
        for (u, d) in up.iter().zip(down.iter()) {
            let (L3::V4 { src: us, dst: ud }, L3::V4 { src: ds, dst: dd }) = (u, d) else {
                panic!("not IPv4");
            };
            assert_eq!((us, ud), (dd, ds), "the reply reverses the addresses");
            assert!(seen.insert((*us, *ud)), "flows are distinct");
        }
        let subs: HashSet<[u8; 4]> = up
            .iter()
            .map(|l| match l {
                L3::V4 { src, .. } => *src,
                L3::V6 { .. } => unreachable!(),
            })
            .collect();
        assert_eq!(subs.len(), 300);
        assert!(subs.contains(&[100, 64, 1, 43]), "subscriber 299");
    }

    #[test]
    fn ipv6_flows() {
        let up = addrs(Family::Ipv6, 10, 10, true);
        let L3::V6 { src, dst } = up[9] else {
            panic!("not IPv6")
        };
        assert_eq!(std::net::Ipv6Addr::from(src).to_string(), "fd00:64::9");
        assert_eq!(std::net::Ipv6Addr::from(dst).to_string(), "fd00:20::");
    }

    #[test]
    fn provisioning_records() {
        let p = provisioning(4);
        let lines: Vec<&str> = p.lines().collect();
        assert_eq!(
            lines,
            [
                "add sub-0 package=gold addr=100.64.0.0,fd00:64::",
                "add sub-1 package=silver addr=100.64.0.1,fd00:64::1",
                "add sub-2 package=bronze addr=100.64.0.2,fd00:64::2",
                "add sub-3 package=gold addr=100.64.0.3,fd00:64::3",
            ]
        );
        for l in lines {
            dpi::provision::parse_line(l).unwrap_or_else(|e| panic!("{l}: {e:?}"));
        }
    }
}
