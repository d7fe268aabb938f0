//! A linear reference access list on frames, and fragmented test
//! datagrams, independent of Lanyard's classifier and key extraction.
//!
//! [`decide`] walks the rules in order on what [`dissect`] read from the
//! frame itself, with the fragment policy of docs/acl.md (Cisco IOS's):
//! a non-initial fragment carries no L4 header, so
//! - a rule without L4 fields (ports, ICMP type, TCP flags) matches it on
//!   its addresses and protocol, as any packet;
//! - a `permit` with L4 fields matches it on its other fields (L4
//!   ignored): the later fragments of a permitted datagram pass;
//! - a `deny` with L4 fields never matches it (the next rule decides);
//! - a rule with `fragments` matches only non-initial fragments.
//!
//! QoS class lines follow the `deny` case: a line with L4 fields never
//! matches a non-initial fragment ([`class_line_matches`]).

use crate::frame::Mac;
use std::net::IpAddr;

/// One rule (or class-map line: `permit` is then ignored).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    pub permit: bool,
    pub proto: Option<u8>,
    /// (address, prefix length)
    pub src: Option<(IpAddr, u8)>,
    pub dst: Option<(IpAddr, u8)>,
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
    pub icmp_type: Option<u8>,
    /// Only non-initial fragments (`fragments: true`).
    pub fragments: bool,
}

impl Rule {
    /// Tests fields of the L4 header.
    pub fn tests_l4(&self) -> bool {
        self.sport.is_some() || self.dport.is_some() || self.icmp_type.is_some()
    }

    /// The rule as a YAML flow mapping for Lanyard's configuration
    /// (`with_action` false for a class-map line).
    pub fn yaml(&self, with_action: bool) -> String {
        let mut parts = Vec::new();
        if with_action {
            parts.push(format!(
                "action: {}",
                if self.permit { "permit" } else { "deny" }
            ));
        }
        if let Some(p) = self.proto {
            parts.push(format!("protocol: {p}"));
        }
        if let Some((a, l)) = self.src {
            parts.push(format!("source: \"{a}/{l}\""));
        }
        if let Some((a, l)) = self.dst {
            parts.push(format!("destination: \"{a}/{l}\""));
        }
        let range = |(a, b): (u16, u16)| {
            if a == b {
                format!("\"{a}\"")
            } else {
                format!("\"{a}-{b}\"")
            }
        };
        if let Some(r) = self.sport {
            parts.push(format!("source-port: {}", range(r)));
        }
        if let Some(r) = self.dport {
            parts.push(format!("destination-port: {}", range(r)));
        }
        if let Some(t) = self.icmp_type {
            parts.push(format!("icmp-type: {t}"));
        }
        if self.fragments {
            parts.push("fragments: true".into());
        }
        format!("{{{}}}", parts.join(", "))
    }

    /// Addresses and protocol (what every packet, fragment or not, has).
    fn l3_matches(&self, p: &Packet) -> bool {
        let pfx = |r: Option<(IpAddr, u8)>, a: IpAddr| match (r, a) {
            (None, _) => true,
            (Some((IpAddr::V4(r), l)), IpAddr::V4(a)) => {
                let m = if l == 0 {
                    0
                } else {
                    u32::MAX << (32 - l.min(32))
                };
                u32::from(r) & m == u32::from(a) & m
            }
            (Some((IpAddr::V6(r), l)), IpAddr::V6(a)) => {
                let m = if l == 0 {
                    0
                } else {
                    u128::MAX << (128 - l.min(128))
                };
                u128::from(r) & m == u128::from(a) & m
            }
            _ => false,
        };
        pfx(self.src, p.src) && pfx(self.dst, p.dst) && self.proto.is_none_or(|x| x == p.proto)
    }

    fn l4_matches(&self, p: &Packet) -> bool {
        let within = |r: Option<(u16, u16)>, x: u16| r.is_none_or(|(a, b)| a <= x && x <= b);
        match p.proto {
            1 | 58 => self.icmp_type.is_none_or(|t| t == p.sport as u8),
            _ => within(self.sport, p.sport) && within(self.dport, p.dport),
        }
    }
}

/// What a frame says, read here (not by Lanyard's parser).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    pub family: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Upper-layer protocol (after an IPv6 Fragment header).
    pub proto: u8,
    /// Ports, or ICMP type in `sport` (0 for non-initial fragments).
    pub sport: u16,
    pub dport: u16,
    /// Fragment offset ≠ 0.
    pub later_fragment: bool,
    /// IPv4 identification, or the IPv6 flow label: the test's tag.
    pub tag: u32,
    /// Fragment offset in bytes.
    pub offset: u16,
    /// DSCP.
    pub dscp: u8,
}

/// Read an untagged IPv4/IPv6 frame (one IPv6 Fragment header directly
/// after the fixed header is understood).
pub fn dissect(f: &[u8]) -> Option<Packet> {
    let et = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    let ip = f.get(14..)?;
    let be = |b: &[u8], o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
    match et {
        0x0800 if ip.len() >= 20 => {
            let ihl = usize::from(ip[0] & 0xf) * 4;
            let off = (be(ip, 6) & 0x1fff) * 8;
            let proto = ip[9];
            let (mut sport, mut dport) = (0, 0);
            if off == 0 && ip.len() >= ihl + 4 {
                sport = be(ip, ihl);
                dport = be(ip, ihl + 2);
                if proto == 1 {
                    sport = u16::from(ip[ihl]);
                    dport = u16::from(ip[ihl + 1]);
                }
            }
            Some(Packet {
                family: 4,
                src: IpAddr::from(<[u8; 4]>::try_from(&ip[12..16]).ok()?),
                dst: IpAddr::from(<[u8; 4]>::try_from(&ip[16..20]).ok()?),
                proto,
                sport,
                dport,
                later_fragment: off != 0,
                tag: u32::from(be(ip, 4)),
                offset: off,
                dscp: ip[1] >> 2,
            })
        }
        0x86dd if ip.len() >= 40 => {
            let tag = u32::from_be_bytes([0, ip[1] & 0xf, ip[2], ip[3]]);
            let mut proto = ip[6];
            let mut l4 = 40;
            let mut off = 0;
            if proto == 44 && ip.len() >= 48 {
                proto = ip[40];
                off = be(ip, 42) & 0xfff8;
                l4 = 48;
            }
            let (mut sport, mut dport) = (0, 0);
            if off == 0 && ip.len() >= l4 + 4 {
                sport = be(ip, l4);
                dport = be(ip, l4 + 2);
                if proto == 58 {
                    sport = u16::from(ip[l4]);
                    dport = u16::from(ip[l4 + 1]);
                }
            }
            Some(Packet {
                family: 6,
                src: IpAddr::from(<[u8; 16]>::try_from(&ip[8..24]).ok()?),
                dst: IpAddr::from(<[u8; 16]>::try_from(&ip[24..40]).ok()?),
                proto,
                sport,
                dport,
                later_fragment: off != 0,
                tag,
                offset: off,
                dscp: ((be(ip, 0) >> 6) & 0x3f) as u8,
            })
        }
        _ => None,
    }
}

/// Whether `rule` matches `p` under the fragment policy.
pub fn rule_matches(rule: &Rule, p: &Packet) -> bool {
    if !rule.l3_matches(p) {
        return false;
    }
    if rule.fragments {
        return p.later_fragment;
    }
    if p.later_fragment && rule.tests_l4() {
        // No L4 header: a permit decides on the rest, a deny passes it on.
        return rule.permit;
    }
    rule.l4_matches(p)
}

/// A class-map line: L4 lines never match non-initial fragments.
pub fn class_line_matches(line: &Rule, p: &Packet) -> bool {
    let deny_like = Rule {
        permit: false,
        ..line.clone()
    };
    rule_matches(&deny_like, p)
}

/// The verdict of a list of family `family` (4 or 6) on `p`: frames of
/// the other family pass; otherwise the first matching rule decides, and
/// none matching is the implicit deny.
pub fn decide(rules: &[Rule], family: u8, p: &Packet) -> bool {
    if p.family != family {
        return true;
    }
    rules
        .iter()
        .find(|r| rule_matches(r, p))
        .is_some_and(|r| r.permit)
}

/// One datagram's L4 header + payload (UDP or TCP or ICMP echo), before
/// fragmentation. Checksums are left zero: a switch does not check them.
pub fn l4_payload(proto: u8, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(20)];
    match proto {
        1 | 58 => {
            p[0] = sport as u8;
            p[1] = dport as u8;
        }
        _ => {
            p[0..2].copy_from_slice(&sport.to_be_bytes());
            p[2..4].copy_from_slice(&dport.to_be_bytes());
            if proto == 17 {
                let n = p.len() as u16;
                p[4..6].copy_from_slice(&n.to_be_bytes());
            } else if proto == 6 {
                p[12] = 0x50;
                p[13] = 0x18; // PSH, ACK
            }
        }
    }
    for (i, b) in p.iter_mut().enumerate().skip(20) {
        *b = i as u8;
    }
    p
}

/// A datagram of `payload` (L4 header included) from `src` to `dst`,
/// cut into fragments of at most `frag` payload bytes (a multiple of 8;
/// `frag >= payload.len()`: one unfragmented frame). `tag` goes into the
/// IPv4 identification / the IPv6 flow label and Fragment
/// identification; `dscp` into the traffic class.
#[allow(clippy::too_many_arguments)]
pub fn datagram(
    dst_mac: &Mac,
    src_mac: &Mac,
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    payload: &[u8],
    frag: usize,
    tag: u32,
    dscp: u8,
) -> Vec<Vec<u8>> {
    let frag = (frag / 8 * 8).max(8);
    let whole = payload.len() <= frag;
    let mut out = Vec::new();
    let mut off = 0;
    while off < payload.len() || (off == 0 && payload.is_empty()) {
        let end = (off + frag).min(payload.len());
        let more = end < payload.len();
        let chunk = &payload[off..end];
        let mut f = Vec::with_capacity(14 + 48 + chunk.len());
        f.extend_from_slice(dst_mac);
        f.extend_from_slice(src_mac);
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend_from_slice(&0x0800u16.to_be_bytes());
                let mut h = [0u8; 20];
                h[0] = 0x45;
                h[1] = dscp << 2;
                h[2..4].copy_from_slice(&((20 + chunk.len()) as u16).to_be_bytes());
                h[4..6].copy_from_slice(&(tag as u16).to_be_bytes());
                let fo = (off / 8) as u16 | if more { 0x2000 } else { 0 };
                h[6..8].copy_from_slice(&fo.to_be_bytes());
                h[8] = 64;
                h[9] = proto;
                h[12..16].copy_from_slice(&s.octets());
                h[16..20].copy_from_slice(&d.octets());
                let c = crate::ip::fold(crate::ip::sum(&h, 0));
                h[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend_from_slice(&h);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&0x86ddu16.to_be_bytes());
                let vtc = 0x6000_0000u32 | u32::from(dscp) << 22 | (tag & 0xf_ffff);
                f.extend_from_slice(&vtc.to_be_bytes());
                let fh = if whole { 0 } else { 8 };
                f.extend_from_slice(&((fh + chunk.len()) as u16).to_be_bytes());
                f.push(if whole { proto } else { 44 });
                f.push(64);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
                if !whole {
                    f.push(proto);
                    f.push(0);
                    let fo = off as u16 | u16::from(more);
                    f.extend_from_slice(&fo.to_be_bytes());
                    f.extend_from_slice(&tag.to_be_bytes());
                }
            }
            _ => panic!("mixed address families"),
        }
        f.extend_from_slice(chunk);
        out.push(f);
        if payload.is_empty() {
            break;
        }
        off = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn fragments_dissect_and_follow_the_policy() {
        let m = [2, 0, 0, 0, 0, 1];
        for (src, dst) in [("203.0.113.5", "10.0.0.1"), ("2001:db8::5", "2001:db8::1")] {
            let pl = l4_payload(17, 4000, 5000, 300);
            let frames = datagram(&m, &m, a(src), a(dst), 17, &pl, 128, 77, 10);
            assert_eq!(frames.len(), 3);
            let ps: Vec<Packet> = frames.iter().map(|f| dissect(f).unwrap()).collect();
            assert_eq!(
                (ps[0].sport, ps[0].dport, ps[0].later_fragment),
                (4000, 5000, false)
            );
            assert!(ps[1].later_fragment && ps[1].dport == 0 && ps[1].offset == 128);
            assert!(ps
                .iter()
                .all(|p| p.tag == 77 && p.proto == 17 && p.dscp == 10));
            let net = if src.contains(':') {
                ("2001:db8::", 64)
            } else {
                ("203.0.113.0", 24)
            };
            let deny_low = Rule {
                permit: false,
                proto: Some(17),
                src: Some((a(net.0), net.1)),
                dport: Some((0, 1023)),
                ..Rule::default()
            };
            let fam = ps[0].family;
            let rules = [
                deny_low,
                Rule {
                    permit: true,
                    ..Rule::default()
                },
            ];
            assert!(ps.iter().all(|p| decide(&rules, fam, p)));
            let permit_5000 = [Rule {
                permit: true,
                proto: Some(17),
                dport: Some((5000, 5000)),
                ..Rule::default()
            }];
            assert!(ps.iter().all(|p| decide(&permit_5000, fam, p)));
            let frag_deny = [
                Rule {
                    fragments: true,
                    ..Rule::default()
                },
                Rule {
                    permit: true,
                    ..Rule::default()
                },
            ];
            assert!(decide(&frag_deny, fam, &ps[0]));
            assert!(!decide(&frag_deny, fam, &ps[1]));
            assert!(decide(&frag_deny, 10, &ps[1]), "other family passes");
        }
        let one = datagram(
            &m,
            &m,
            a("::1"),
            a("::2"),
            17,
            &l4_payload(17, 1, 2, 40),
            1000,
            5,
            0,
        );
        assert_eq!(one.len(), 1);
        assert_eq!(dissect(&one[0]).unwrap().dport, 2);
    }
}
