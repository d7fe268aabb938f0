//! IPv4/IPv6 test packets (UDP inside Ethernet II), built and checked here
//! independently of Lanyard's `wire` crate: header and UDP checksums are
//! computed and verified with this module's own one's-complement sum.

use crate::frame::Mac;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Marks the UDP payload of a routed test packet.
pub const IP_SIGNATURE: [u8; 8] = *b"LYROUTE1";
/// UDP ports of test packets.
pub const TEST_SPORT: u16 = 40000;
pub const TEST_DPORT: u16 = 50000;

pub(crate) fn sum(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        acc += u32::from(*b) << 8;
    }
    acc
}

pub(crate) fn fold(mut acc: u32) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The Internet checksum (RFC 1071) of `data`: what a header's checksum
/// field holds, or 0 when `data` includes a correct one.
pub fn checksum(data: &[u8]) -> u16 {
    fold(sum(data, 0))
}

pub(crate) fn pseudo(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> u32 {
    let mut acc = 0;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            acc = sum(&s.octets(), acc);
            acc = sum(&d.octets(), acc);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            acc = sum(&s.octets(), acc);
            acc = sum(&d.octets(), acc);
        }
        _ => {}
    }
    acc + u32::from(proto) + len as u32
}

/// A UDP test packet: Ethernet + IPv4/IPv6 + UDP + signature + `seq`,
/// padded to `frame_len` bytes of frame (at least the headers).
/// `ttl` is the TTL or hop limit.
pub fn udp(
    dst_mac: &Mac,
    src_mac: &Mac,
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    seq: u64,
    frame_len: usize,
) -> Vec<u8> {
    let v6 = src.is_ipv6();
    let iph = if v6 { 40 } else { 20 };
    let min = 14 + iph + 8 + 16;
    let len = frame_len.max(min);
    let udp_len = len - 14 - iph;
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(dst_mac);
    f.extend_from_slice(src_mac);
    f.extend_from_slice(&(if v6 { 0x86ddu16 } else { 0x0800 }).to_be_bytes());
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (iph + udp_len) as u16;
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
            h[6] = 0x40; // DF
            h[8] = ttl;
            h[9] = 17;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let c = fold(sum(&h, 0));
            h[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&h);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&(udp_len as u16).to_be_bytes());
            f.push(17);
            f.push(ttl);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => panic!("mixed address families"),
    }
    let u0 = f.len();
    f.extend_from_slice(&TEST_SPORT.to_be_bytes());
    f.extend_from_slice(&TEST_DPORT.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&IP_SIGNATURE);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(len, 0);
    let c = fold(sum(&f[u0..], pseudo(src, dst, 17, udp_len)));
    let c = if c == 0 { 0xffff } else { c };
    f[u0 + 6..u0 + 8].copy_from_slice(&c.to_be_bytes());
    f
}

/// What a received IP frame says, with independently verified checksums.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpInfo {
    pub dst_mac: Mac,
    pub src_mac: Mac,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// TTL / hop limit.
    pub ttl: u8,
    pub proto: u8,
    /// IPv4 header checksum valid (always true for IPv6: it has none).
    pub header_ok: bool,
    /// UDP/ICMP/ICMPv6 checksum valid (false for other protocols).
    pub l4_ok: bool,
    /// Sequence number of a test packet (UDP with [`IP_SIGNATURE`]).
    pub seq: Option<u64>,
    /// The IP packet (header onwards).
    pub packet: Vec<u8>,
}

/// Parse an untagged Ethernet II frame carrying IPv4 or IPv6.
pub fn parse(f: &[u8]) -> Option<IpInfo> {
    if f.len() < 14 {
        return None;
    }
    let mut dst_mac = [0u8; 6];
    let mut src_mac = [0u8; 6];
    dst_mac.copy_from_slice(&f[0..6]);
    src_mac.copy_from_slice(&f[6..12]);
    let et = u16::from_be_bytes([f[12], f[13]]);
    let ip = &f[14..];
    let (src, dst, ttl, proto, header_ok, l4) = match et {
        0x0800 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return None;
            }
            let ihl = usize::from(ip[0] & 0xf) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            if ihl < 20 || total < ihl || total > ip.len() {
                return None;
            }
            let s = IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]));
            let d = IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
            let ok = fold(sum(&ip[..ihl], 0)) == 0;
            (s, d, ip[8], ip[9], ok, &ip[ihl..total])
        }
        0x86dd => {
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return None;
            }
            let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if 40 + plen > ip.len() {
                return None;
            }
            let s = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).ok()?));
            let d = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).ok()?));
            (s, d, ip[7], ip[6], true, &ip[40..40 + plen])
        }
        _ => return None,
    };
    let l4_ok = match proto {
        17 | 58 => fold(sum(l4, pseudo(src, dst, proto, l4.len()))) == 0,
        1 => fold(sum(l4, 0)) == 0,
        _ => false,
    };
    let seq = (proto == 17 && l4.len() >= 32 && l4[8..16] == IP_SIGNATURE)
        .then(|| u64::from_be_bytes(l4[16..24].try_into().unwrap_or_default()));
    Some(IpInfo {
        dst_mac,
        src_mac,
        src,
        dst,
        ttl,
        proto,
        header_ok,
        l4_ok,
        seq,
        packet: ip.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_packets_parse_with_valid_checksums() {
        let a = [2, 0, 0, 0, 0, 1];
        let b = [2, 0, 0, 0, 0, 2];
        for (s, d) in [
            ("10.0.0.1", "192.0.2.9"),
            ("2001:db8::1", "2001:db8:ffff::9"),
        ] {
            let f = udp(&a, &b, s.parse().unwrap(), d.parse().unwrap(), 9, 77, 128);
            assert_eq!(f.len(), 128);
            let p = parse(&f).unwrap();
            assert!(p.header_ok && p.l4_ok, "{p:?}");
            assert_eq!((p.ttl, p.proto, p.seq), (9, 17, Some(77)));
            let mut bad = f.clone();
            let n = bad.len();
            bad[n - 1] ^= 1;
            assert!(!parse(&bad).unwrap().l4_ok);
        }
    }
}
