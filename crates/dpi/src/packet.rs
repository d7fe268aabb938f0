//! What the engine needs from one frame: its IP 5-tuple, TCP flags, where
//! the IP packet and the transport payload start.
//!
//! [`parse_ethernet`] skips up to two VLAN tags (802.1Q / 802.1ad) and
//! hands the rest to [`parse_ip`]. Both read only inside the slice they are
//! given and never panic (fuzzed by `fuzz_dpi_packet`): a frame that is not
//! IPv4/IPv6, or is truncated, gives `None` and the engine passes it
//! unchanged, counted as `not_ip`.
//!
//! Fragments: only the first fragment of a datagram carries ports; later
//! fragments parse with ports 0 and an empty payload (they join the flow of
//! the address pair with ports 0, which is what a stateless box can do).

/// IP protocol numbers the flow table treats specially.
pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const ICMP: u8 = 1;
pub const ICMPV6: u8 = 58;

/// TCP flag bits as on the wire.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// One packet's identity as the flow table sees it. IPv4 addresses sit in
/// the low 32 bits of the `u128`s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuple {
    pub src: u128,
    pub dst: u128,
    /// For ICMP echo request/reply both ports hold the echo identifier, so
    /// request and reply are one flow; other ICMP messages use 0.
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub v6: bool,
}

/// A parsed packet: its tuple plus the parts the engine reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub tuple: Tuple,
    /// TCP flags (0 for other protocols).
    pub tcp_flags: u8,
    /// Offset of the IP header in the slice given to [`parse_ethernet`]
    /// (0 for [`parse_ip`]).
    pub l3: usize,
    /// Offset and length of the transport payload in that slice.
    pub payload: usize,
    pub payload_len: usize,
}

/// Parses an Ethernet frame (optionally VLAN-tagged) carrying IPv4/IPv6.
pub fn parse_ethernet(frame: &[u8]) -> Option<Parsed> {
    let mut off = 12;
    let mut ethertype = be16(frame, off)?;
    off += 2;
    for _ in 0..2 {
        if ethertype == 0x8100 || ethertype == 0x88a8 {
            ethertype = be16(frame, off + 2)?;
            off += 4;
        }
    }
    if ethertype != 0x0800 && ethertype != 0x86dd {
        return None;
    }
    let mut p = parse_ip(frame.get(off..)?)?;
    p.l3 = off;
    p.payload += off;
    Some(p)
}

/// Parses an IP packet (the first byte is the IP header).
pub fn parse_ip(pkt: &[u8]) -> Option<Parsed> {
    let first = *pkt.first()?;
    match first >> 4 {
        4 => parse_v4(pkt),
        6 => parse_v6(pkt),
        _ => None,
    }
}

fn parse_v4(pkt: &[u8]) -> Option<Parsed> {
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    if ihl < 20 || pkt.len() < ihl {
        return None;
    }
    // Trust the total length only as far as the slice goes (padding of
    // short Ethernet frames lies beyond it).
    let total = usize::from(be16(pkt, 2)?).clamp(ihl, pkt.len());
    let frag = be16(pkt, 6)?;
    let proto = pkt[9];
    let src = u128::from(u32::from_be_bytes(pkt[12..16].try_into().ok()?));
    let dst = u128::from(u32::from_be_bytes(pkt[16..20].try_into().ok()?));
    let tuple = Tuple {
        src,
        dst,
        proto,
        v6: false,
        ..Tuple::default()
    };
    if frag & 0x1fff != 0 {
        // Not the first fragment: no transport header here.
        return Some(Parsed {
            tuple,
            payload: total,
            ..Parsed::default()
        });
    }
    transport(tuple, pkt, ihl, total)
}

fn parse_v6(pkt: &[u8]) -> Option<Parsed> {
    if pkt.len() < 40 {
        return None;
    }
    let total = (40 + usize::from(be16(pkt, 4)?)).min(pkt.len());
    let src = u128::from_be_bytes(pkt[8..24].try_into().ok()?);
    let dst = u128::from_be_bytes(pkt[24..40].try_into().ok()?);
    let mut next = pkt[6];
    let mut off = 40;
    // Walk at most 8 extension headers (bounded work per packet).
    for _ in 0..8 {
        match next {
            0 | 43 | 60 => {
                let len = (usize::from(*pkt.get(off + 1)?) + 1) * 8;
                next = *pkt.get(off)?;
                off += len;
            }
            44 => {
                // Fragment header: later fragments have no transport header.
                let fo = be16(pkt, off + 2)?;
                next = *pkt.get(off)?;
                off += 8;
                if fo & 0xfff8 != 0 {
                    let tuple = Tuple {
                        src,
                        dst,
                        proto: next,
                        v6: true,
                        ..Tuple::default()
                    };
                    return Some(Parsed {
                        tuple,
                        payload: total,
                        ..Parsed::default()
                    });
                }
            }
            _ => break,
        }
        if off > total {
            return None;
        }
    }
    let tuple = Tuple {
        src,
        dst,
        proto: next,
        v6: true,
        ..Tuple::default()
    };
    transport(tuple, pkt, off, total)
}

fn transport(mut tuple: Tuple, pkt: &[u8], off: usize, total: usize) -> Option<Parsed> {
    let mut tcp_flags = 0;
    let payload = match tuple.proto {
        TCP => {
            tuple.sport = be16(pkt, off)?;
            tuple.dport = be16(pkt, off + 2)?;
            let doff = usize::from(*pkt.get(off + 12)? >> 4) * 4;
            tcp_flags = *pkt.get(off + 13)?;
            if doff < 20 {
                return None;
            }
            off + doff
        }
        UDP => {
            tuple.sport = be16(pkt, off)?;
            tuple.dport = be16(pkt, off + 2)?;
            off + 8
        }
        ICMP | ICMPV6 => {
            let ty = *pkt.get(off)?;
            let echo = if tuple.proto == ICMP {
                ty == 8 || ty == 0
            } else {
                ty == 128 || ty == 129
            };
            if echo {
                let id = be16(pkt, off + 4)?;
                tuple.sport = id;
                tuple.dport = id;
            }
            off + 8
        }
        _ => off,
    };
    let payload = payload.min(total);
    Some(Parsed {
        tuple,
        tcp_flags,
        l3: 0,
        payload,
        payload_len: total - payload,
    })
}

#[inline]
fn be16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

/// Test and bench helpers: minimal valid frames.
pub mod build {
    /// An Ethernet + IPv4 + TCP/UDP frame with `payload` (checksums zero:
    /// the engine does not verify them).
    pub fn v4(
        proto: u8,
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        flags: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        let l4 = if proto == super::TCP { 20 } else { 8 };
        let total = 20 + l4 + payload.len();
        let mut f = vec![0u8; 14 + total];
        f[12] = 0x08;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&(total as u16).to_be_bytes());
        f[22] = 64;
        f[23] = proto;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        if proto == super::TCP {
            f[46] = 5 << 4;
            f[47] = flags;
        } else if proto == super::UDP {
            f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        }
        f[14 + 20 + l4..].copy_from_slice(payload);
        f
    }

    /// An Ethernet + IPv6 + TCP/UDP frame with `payload`.
    pub fn v6(
        proto: u8,
        src: u128,
        dst: u128,
        sport: u16,
        dport: u16,
        flags: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        let l4 = if proto == super::TCP { 20 } else { 8 };
        let plen = l4 + payload.len();
        let mut f = vec![0u8; 14 + 40 + plen];
        f[12] = 0x86;
        f[13] = 0xdd;
        f[14] = 0x60;
        f[18..20].copy_from_slice(&(plen as u16).to_be_bytes());
        f[20] = proto;
        f[21] = 64;
        f[22..38].copy_from_slice(&src.to_be_bytes());
        f[38..54].copy_from_slice(&dst.to_be_bytes());
        f[54..56].copy_from_slice(&sport.to_be_bytes());
        f[56..58].copy_from_slice(&dport.to_be_bytes());
        if proto == super::TCP {
            f[66] = 5 << 4;
            f[67] = flags;
        }
        f[54 + l4..].copy_from_slice(payload);
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_tcp_tuple_flags_and_payload() {
        let f = build::v4(TCP, [10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, SYN, b"GET /");
        let p = parse_ethernet(&f).unwrap();
        assert_eq!(p.tuple.src, 0x0a00_0001);
        assert_eq!(p.tuple.dst, 0x0a00_0002);
        assert_eq!(
            (p.tuple.sport, p.tuple.dport, p.tuple.proto),
            (1234, 80, TCP)
        );
        assert_eq!(p.tcp_flags, SYN);
        assert_eq!(p.l3, 14);
        assert_eq!(&f[p.payload..p.payload + p.payload_len], b"GET /");
    }

    #[test]
    fn vlan_tagged_v6_udp() {
        let inner = build::v6(UDP, 1, 2, 53, 5353, 0, b"abc");
        let mut f = inner[..12].to_vec();
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
        f.extend_from_slice(&inner[12..]);
        let p = parse_ethernet(&f).unwrap();
        assert!(p.tuple.v6);
        assert_eq!((p.tuple.sport, p.tuple.dport), (53, 5353));
        assert_eq!(p.l3, 18);
        assert_eq!(&f[p.payload..p.payload + p.payload_len], b"abc");
    }

    #[test]
    fn truncations_never_panic_and_non_ip_is_none() {
        let f = build::v4(TCP, [1, 2, 3, 4], [5, 6, 7, 8], 1, 2, ACK, b"xyz");
        for n in 0..f.len() {
            let _ = parse_ethernet(&f[..n]);
        }
        let mut arp = f.clone();
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(parse_ethernet(&arp).is_none());
    }
}
