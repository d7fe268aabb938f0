//! Frames whose TCP/UDP checksum a local stack left to "hardware".
//!
//! A Linux host that sends over a veth (a container, a namespace) offloads
//! the TCP and UDP checksum: the packet crosses the veth with only the
//! pseudo-header sum in the checksum field (`CHECKSUM_PARTIAL`), and a
//! kernel receiver trusts the flag that travels with it. A switch that
//! reads such a frame from a raw socket (AF_XDP or AF_PACKET) sees no
//! flag, and whoever receives the frame from it — another host, the
//! switch's own control plane through its TAP — finds a bad checksum and
//! drops the packet. A NIC would have filled the field in on the wire;
//! [`complete_partial`] does it instead.
//!
//! Recognised by its signature: the field holds exactly the folded
//! pseudo-header sum, and the checksum does not verify. A correct
//! checksum that happens to equal the pseudo-header sum verifies and is
//! left alone, so a frame with a valid checksum is never changed; a
//! corrupt frame is left corrupt unless its field is, by a 1-in-65,536
//! chance, the pseudo-header sum.

use crate::checksum::{combine, fold, sum, verifies};

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// Fill in the TCP/UDP checksum of `frame` (Ethernet, up to two VLAN tags,
/// IPv4 without fragmentation or IPv6 with TCP/UDP as its next header) if
/// its sender left it to offload. Returns true when the frame changed.
/// Any other frame, truncated or malformed included, is left as it is.
pub fn complete_partial(frame: &mut [u8]) -> bool {
    let Some((l3, ethertype)) = l3_offset(frame) else {
        return false;
    };
    let (pseudo, l4, proto) = match ethertype {
        0x0800 => {
            let ip = &frame[l3..];
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return false;
            }
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            // More fragments, or an offset: not the whole datagram.
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
            if ihl < 20 || total < ihl || total > ip.len() || frag != 0 {
                return false;
            }
            let len = (total - ihl) as u32;
            let proto = ip[9];
            let p = combine(sum(&ip[12..20]), u32::from(proto) + len);
            (p, l3 + ihl..l3 + total, proto)
        }
        0x86dd => {
            let ip = &frame[l3..];
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return false;
            }
            let len = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if 40 + len > ip.len() {
                return false;
            }
            let proto = ip[6];
            let p = combine(sum(&ip[8..40]), u32::from(proto) + len as u32);
            (p, l3 + 40..l3 + 40 + len, proto)
        }
        _ => return false,
    };
    let at = match proto {
        PROTO_TCP => 16,
        PROTO_UDP => 6,
        _ => return false,
    };
    if l4.len() < at + 2
        || (proto == PROTO_TCP && l4.len() < 20)
        || (proto == PROTO_UDP && l4.len() < 8)
    {
        return false;
    }
    let field = u16::from_be_bytes([frame[l4.start + at], frame[l4.start + at + 1]]);
    // IPv4 UDP without a checksum.
    if proto == PROTO_UDP && field == 0 && ethertype == 0x0800 {
        return false;
    }
    if !same(field, fold(pseudo)) {
        return false;
    }
    let s = sum(&frame[l4.clone()]);
    if verifies(combine(s, pseudo)) {
        return false;
    }
    // The field already carries the pseudo-header sum, so the sum over the
    // segment as it is equals pseudo-header + segment (field as zero).
    let mut c = !fold(s);
    if c == 0 && proto == PROTO_UDP {
        c = 0xffff;
    }
    frame[l4.start + at..l4.start + at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Equal as one's-complement numbers (0x0000 and 0xffff are both zero).
fn same(a: u16, b: u16) -> bool {
    a == b || (a | b == 0xffff && (a == 0 || b == 0))
}

/// Offset of the IP header and its EtherType, past up to two VLAN tags.
fn l3_offset(f: &[u8]) -> Option<(usize, u16)> {
    let mut off = 12;
    for _ in 0..3 {
        let t = u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]);
        match t {
            0x8100 | 0x88a8 => off += 4,
            _ => return Some((off + 2, t)),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::finish;

    /// An Ethernet + IPv4 + UDP/TCP frame with a correct checksum.
    fn v4(proto: u8, payload: &[u8]) -> Vec<u8> {
        let l4len = if proto == PROTO_TCP { 20 } else { 8 } + payload.len();
        let mut f = vec![0u8; 14 + 20 + l4len];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + l4len) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let l4 = &mut f[34..];
        l4[0..4].copy_from_slice(&[0x30, 0x39, 0x00, 0x50]);
        if proto == PROTO_TCP {
            l4[12] = 0x50;
            l4[20..].copy_from_slice(payload);
        } else {
            l4[4..6].copy_from_slice(&(l4len as u16).to_be_bytes());
            l4[8..].copy_from_slice(payload);
        }
        let at = if proto == PROTO_TCP { 16 } else { 6 };
        let pseudo = combine(sum(&f[26..34]), u32::from(proto) + l4len as u32);
        let c = finish(combine(pseudo, sum(&f[34..])));
        f[34 + at..36 + at].copy_from_slice(&c.to_be_bytes());
        f
    }

    /// `f` as an offloading sender hands it over: the field holds the
    /// folded pseudo-header sum.
    fn partial(f: &[u8], proto: u8) -> Vec<u8> {
        let mut g = f.to_vec();
        let at = 34 + if proto == PROTO_TCP { 16 } else { 6 };
        let l4len = (g.len() - 34) as u32;
        let pseudo = combine(sum(&g[26..34]), u32::from(proto) + l4len);
        g[at..at + 2].copy_from_slice(&fold(pseudo).to_be_bytes());
        g
    }

    #[test]
    fn partial_tcp_and_udp_are_completed_to_the_correct_checksum() {
        for proto in [PROTO_TCP, PROTO_UDP] {
            for n in [0usize, 1, 7, 100, 1001] {
                let payload: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
                let good = v4(proto, &payload);
                let mut p = partial(&good, proto);
                assert_ne!(p, good);
                assert!(complete_partial(&mut p), "proto {proto} len {n}");
                assert_eq!(p, good, "proto {proto} len {n}");
                // Done once: a second pass changes nothing.
                assert!(!complete_partial(&mut p));
            }
        }
    }

    #[test]
    fn valid_corrupt_fragmented_and_other_frames_are_left_alone() {
        let good = v4(PROTO_TCP, b"hello");
        let mut g = good.clone();
        assert!(!complete_partial(&mut g));
        // Corrupt (field is not the pseudo-header sum): left corrupt.
        let mut bad = good.clone();
        bad[50] ^= 0x55;
        bad[40] ^= 1;
        let copy = bad.clone();
        assert!(!complete_partial(&mut bad));
        assert_eq!(bad, copy);
        // A later fragment: the segment is not all here.
        let mut frag = partial(&good, PROTO_TCP);
        frag[14 + 6] = 0x20; // more fragments
        assert!(!complete_partial(&mut frag));
        // ICMP, ARP, truncated.
        let mut icmp = partial(&good, PROTO_TCP);
        icmp[14 + 9] = 1;
        assert!(!complete_partial(&mut icmp));
        let mut arp = good.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!complete_partial(&mut arp));
        for cut in 0..good.len() {
            let mut t = partial(&good, PROTO_TCP)[..cut].to_vec();
            let before = t.clone();
            assert!(!complete_partial(&mut t), "cut at {cut}");
            assert_eq!(t, before);
        }
        // IPv4 UDP without a checksum (0) stays without one.
        let mut nocsum = v4(PROTO_UDP, b"x");
        nocsum[40..42].copy_from_slice(&[0, 0]);
        assert!(!complete_partial(&mut nocsum));
    }

    #[test]
    fn vlan_tagged_and_ipv6_frames_are_completed() {
        // One 802.1Q tag in front of the IPv4 frame.
        let good = v4(PROTO_UDP, b"tagged");
        let tag = |f: &[u8]| {
            let mut t = f[..12].to_vec();
            t.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
            t.extend_from_slice(&f[12..]);
            t
        };
        let mut p = tag(&partial(&good, PROTO_UDP));
        assert!(complete_partial(&mut p));
        assert_eq!(p, tag(&good));

        // IPv6 + TCP.
        let payload = b"six";
        let l4len = 20 + payload.len();
        let mut f = vec![0u8; 14 + 40 + l4len];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&(l4len as u16).to_be_bytes());
        f[20] = PROTO_TCP;
        f[21] = 64;
        f[22..38].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f[38..54].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f[54 + 12] = 0x50;
        f[54 + 20..].copy_from_slice(payload);
        let pseudo = combine(sum(&f[22..54]), u32::from(PROTO_TCP) + l4len as u32);
        let mut good6 = f.clone();
        let c = finish(combine(pseudo, sum(&good6[54..])));
        good6[70..72].copy_from_slice(&c.to_be_bytes());
        f[70..72].copy_from_slice(&fold(pseudo).to_be_bytes());
        assert!(complete_partial(&mut f));
        assert_eq!(f, good6);
    }
}
