//! A new flow's first packet without nDPI where nDPI's part is fixed
//! (issue 22, the new-flow rate per core): the engine asks these before
//! it takes an nDPI slot (a 688-byte memset, `ndpi_free_flow_data` later)
//! and calls `ndpi_detection_process_packet` (0.4 µs on a bare SYN or an
//! echo request, docs/performance.md).
//!
//! * **ICMP** ([`icmp_app`]): nDPI 4.2 names an ICMP / ICMPv6 flow from
//!   the IP header alone (`ndpi_search_in_non_tcp_udp`, by `l4_proto`,
//!   on any packet `ndpi_init_packet` accepts) and wants no more packets
//!   (`ndpi_extra_dissection_possible` is 0 for it). The answer is given
//!   here for the packets whose shape nDPI certainly accepts (IPv4 not a
//!   later fragment, lengths consistent; IPv6 with ICMPv6 right after the
//!   fixed header); any other shape still goes to nDPI. Tested against
//!   nDPI's own answer on every type, code and a range of lengths and
//!   shapes (`tests::icmp_matches_ndpi`).
//! * **A bare SYN** ([`syn_deferrable`]): a SYN carries no payload, and
//!   nDPI 4.2 names nothing from one except by two rules on its header
//!   (Targus Getdata by port 5001 or 5201; TeamViewer by IPv4 address
//!   95.211.37.195–203 or 178.77.120.0/25) — those SYNs still go to nDPI
//!   at once. Any other SYN opening a flow is not given to nDPI: the flow
//!   takes its slot at its *second* packet, and nDPI is first fed the SYN
//!   rebuilt from the flow's opener tuple ([`synthetic_syn`]: what nDPI
//!   reads of a SYN is its addresses, ports and flags — connection
//!   tracking takes no sequence number from a packet without ACK), then
//!   that packet: the same packets in the same order as before. A SYN
//!   never answered (a scan, a flood, the lab's `new-flows: tcp`) costs
//!   no nDPI call and holds no slot. The rules are checked against nDPI
//!   on every port (`tests::syn_rules_match_ndpi`).

use crate::ndpi::ids;
use crate::packet::{Tuple, ACK, FIN, ICMP, ICMPV6, RST, SYN, TCP};

/// nDPI's answer for an ICMP/ICMPv6 packet `ip` (its IP header first) of
/// tuple `t`, when the packet's shape is one nDPI certainly accepts;
/// `None`: ask nDPI.
#[inline]
pub fn icmp_app(ip: &[u8], t: &Tuple) -> Option<u16> {
    if !t.v6 {
        if t.proto != ICMP || ip.len() < 20 || ip[0] >> 4 != 4 {
            return None;
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let tot = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
        // `ndpi_iph_is_valid_and_not_fragmented`, and at least the
        // 8-byte ICMP header inside the total length.
        (ihl >= 20 && frag == 0 && tot >= ihl + 8 && tot <= ip.len() && ip[9] == ICMP)
            .then_some(ids::ICMP)
    } else {
        if t.proto != ICMPV6 || ip.len() < 48 || ip[0] >> 4 != 6 {
            return None;
        }
        let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
        // ICMPv6 right after the fixed header (no extension headers).
        (ip[6] == ICMPV6 && plen >= 8 && ip.len() - 40 >= plen).then_some(ids::ICMPV6)
    }
}

/// Targus Getdata's ports in nDPI 4.2 (`targus_getdata.c`).
const TARGUS_PORTS: [u16; 2] = [5001, 5201];

/// True when a flow opened by this packet (`flags`, `payload_len`) may
/// keep its nDPI call for its second packet: a bare SYN that nDPI would
/// name nothing from. See the module docs.
#[inline]
pub fn syn_deferrable(t: &Tuple, flags: u8, payload_len: usize) -> bool {
    if t.proto != TCP || payload_len != 0 || flags & (SYN | ACK | RST | FIN) != SYN {
        return false;
    }
    if TARGUS_PORTS.contains(&t.sport) || TARGUS_PORTS.contains(&t.dport) {
        return false;
    }
    t.v6 || !(teamviewer(t.src as u32) || teamviewer(t.dst as u32))
}

/// nDPI 4.2's TeamViewer address rule (`teamviewer.c`, on any TCP/UDP
/// packet with or without payload).
fn teamviewer(a: u32) -> bool {
    (1_607_673_283..=1_607_673_291).contains(&a) || a & 0xffff_ff80 == 0xb24d_7800
}

/// A bare SYN of `t` (IPv4 or IPv6 header, 20-byte TCP header, no
/// options) written into `buf`; returns the packet. What nDPI reads of it
/// is the same as of the real one (see the module docs).
pub fn synthetic_syn<'a>(t: &Tuple, buf: &'a mut [u8; 60]) -> &'a [u8] {
    *buf = [0; 60];
    let l4 = if t.v6 {
        buf[0] = 0x60;
        buf[4..6].copy_from_slice(&20u16.to_be_bytes());
        buf[6] = TCP;
        buf[7] = 64;
        buf[8..24].copy_from_slice(&t.src.to_be_bytes());
        buf[24..40].copy_from_slice(&t.dst.to_be_bytes());
        40
    } else {
        buf[0] = 0x45;
        buf[2..4].copy_from_slice(&40u16.to_be_bytes());
        buf[8] = 64;
        buf[9] = TCP;
        buf[12..16].copy_from_slice(&(t.src as u32).to_be_bytes());
        buf[16..20].copy_from_slice(&(t.dst as u32).to_be_bytes());
        20
    };
    buf[l4..l4 + 2].copy_from_slice(&t.sport.to_be_bytes());
    buf[l4 + 2..l4 + 4].copy_from_slice(&t.dport.to_be_bytes());
    buf[l4 + 12] = 5 << 4;
    buf[l4 + 13] = SYN;
    buf[l4 + 14..l4 + 16].copy_from_slice(&64240u16.to_be_bytes());
    &buf[..l4 + 20]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ndpi::{FlowPool, Ndpi, Protocol};
    use crate::packet::{build, parse_ethernet, parse_ip};

    /// nDPI's answer for one packet on a fresh flow, and whether it
    /// wants more of the flow.
    fn ndpi_first(n: &mut Ndpi, pool: &mut FlowPool, ip: &[u8]) -> (Protocol, bool) {
        let s = pool.alloc().unwrap();
        let p = n.process(pool, s, ip, 1000);
        let more = n.wants_more(pool, s);
        pool.release(s);
        (p, more)
    }

    fn icmp4(ty: u8, code: u8, data: usize, dst: [u8; 4]) -> Vec<u8> {
        let mut f = build::v4(ICMP, [10, 0, 0, 1], dst, 0, 0, 0, &vec![0x5a; data]);
        // `build::v4` writes a UDP-sized (8-byte) header for non-TCP.
        f[34] = ty;
        f[35] = code;
        f
    }

    fn icmp6(ty: u8, code: u8, data: usize) -> Vec<u8> {
        let mut f = build::v6(
            ICMPV6,
            0x2001_0db8 << 96 | 1,
            0x2001_0db8 << 96 | 2,
            0,
            0,
            0,
            &vec![0xa5; data],
        );
        f[54] = ty;
        f[55] = code;
        f
    }

    #[test]
    fn icmp_matches_ndpi() {
        let mut n = Ndpi::new().unwrap();
        let mut pool = FlowPool::new(1);
        let mut checked = 0;
        let mut shortcut = 0;
        let mut check = |ip: &[u8], what: &str| {
            let Some(p) = parse_ip(ip) else { return };
            let (np, more) = ndpi_first(&mut n, &mut pool, ip);
            checked += 1;
            if let Some(app) = icmp_app(ip, &p.tuple) {
                shortcut += 1;
                assert_eq!(np.id(), app, "{what}: nDPI said {np:?}");
                assert!(!more, "{what}: nDPI wants more");
            }
        };
        for ty in 0..=255u8 {
            for code in [0u8, 1, 3, 15, 16, 255] {
                for data in [0usize, 4, 32, 56] {
                    for dst in [[192, 0, 2, 10], [8, 8, 8, 8], [178, 77, 120, 1]] {
                        let f = icmp4(ty, code, data, dst);
                        let l3 = parse_ethernet(&f).unwrap().l3;
                        check(&f[l3..], &format!("icmp {ty}/{code} +{data} to {dst:?}"));
                    }
                    let f = icmp6(ty, code, data);
                    check(&f[14..], &format!("icmpv6 {ty}/{code} +{data}"));
                }
            }
        }
        // Odd shapes: a later fragment, a truncated packet, a total length
        // short of the ICMP header, a zero total length, IP options, an
        // IPv6 hop-by-hop header: the shortcut must say "ask nDPI" or
        // agree with it.
        let base = icmp4(8, 0, 32, [192, 0, 2, 10]);
        let ip = &base[14..];
        let mut frag = ip.to_vec();
        frag[6] = 0x00;
        frag[7] = 0x10;
        check(&frag, "later fragment");
        let mut mf = ip.to_vec();
        mf[6] = 0x20;
        check(&mf, "first fragment");
        check(&ip[..30], "truncated");
        let mut short = ip.to_vec();
        short[2..4].copy_from_slice(&24u16.to_be_bytes());
        check(&short, "total 24");
        let mut zero = ip.to_vec();
        zero[2..4].copy_from_slice(&0u16.to_be_bytes());
        check(&zero, "total 0");
        let mut opts = vec![0u8; ip.len() + 4];
        opts[..20].copy_from_slice(&ip[..20]);
        opts[0] = 0x46;
        opts[2..4].copy_from_slice(&((ip.len() + 4) as u16).to_be_bytes());
        opts[20] = 1;
        opts[21] = 1;
        opts[22] = 1;
        opts[23] = 1;
        opts[24..].copy_from_slice(&ip[20..]);
        check(&opts, "ip options");
        let v6 = icmp6(128, 0, 16);
        let v6 = &v6[14..];
        let mut hbh = v6[..40].to_vec();
        hbh[6] = 0;
        let plen = v6.len() - 40 + 8;
        hbh[4..6].copy_from_slice(&(plen as u16).to_be_bytes());
        hbh.extend_from_slice(&[ICMPV6, 0, 1, 4, 0, 0, 0, 0]);
        hbh.extend_from_slice(&v6[40..]);
        check(&hbh, "ipv6 hop-by-hop");
        check(&v6[..44], "ipv6 truncated");
        assert!(checked > 10_000, "{checked}");
        assert!(
            shortcut > 9_000,
            "{shortcut} of {checked} answered without nDPI"
        );
        // The echo requests the benchmark and the lab send are answered.
        let p = parse_ip(ip).unwrap();
        assert_eq!(icmp_app(ip, &p.tuple), Some(ids::ICMP));
        let p6 = parse_ip(v6).unwrap();
        assert_eq!(icmp_app(v6, &p6.tuple), Some(ids::ICMPV6));
    }

    #[test]
    fn syn_rules_match_ndpi() {
        let mut n = Ndpi::new().unwrap();
        let mut pool = FlowPool::new(1);
        let c = [10, 0, 0, 1];
        let s = [192, 0, 2, 10];
        // Every destination and source port: nDPI names nothing from a
        // bare SYN exactly where the rules say it may be deferred.
        for port in 0..=u16::MAX {
            for (sp, dp) in [(40000, port), (port, 443)] {
                let f = build::v4(TCP, c, s, sp, dp, SYN, b"");
                let p = parse_ethernet(&f).unwrap();
                let ip = &f[p.l3..];
                let (np, _) = ndpi_first(&mut n, &mut pool, ip);
                let deferrable = syn_deferrable(&p.tuple, p.tcp_flags, p.payload_len);
                assert_eq!(
                    deferrable,
                    np.id() == crate::ndpi::UNKNOWN,
                    "SYN {sp} -> {dp}: nDPI {np:?}"
                );
            }
        }
        // The address rule, and addresses around it.
        for a in [
            [95, 211, 37, 194],
            [95, 211, 37, 195],
            [95, 211, 37, 203],
            [95, 211, 37, 204],
            [178, 77, 120, 0],
            [178, 77, 120, 127],
            [178, 77, 120, 128],
            [8, 8, 8, 8],
            [31, 13, 64, 35],
            [17, 253, 144, 10],
        ] {
            for (src, dst) in [(c, a), (a, c)] {
                let f = build::v4(TCP, src, dst, 40000, 443, SYN, b"");
                let p = parse_ethernet(&f).unwrap();
                let (np, _) = ndpi_first(&mut n, &mut pool, &f[p.l3..]);
                assert_eq!(
                    syn_deferrable(&p.tuple, p.tcp_flags, p.payload_len),
                    np.id() == crate::ndpi::UNKNOWN,
                    "SYN {src:?} -> {dst:?}: nDPI {np:?}"
                );
            }
        }
        // Not a bare SYN: never deferred.
        for (flags, pl) in [
            (SYN | ACK, &b""[..]),
            (ACK, b""),
            (SYN, b"x"),
            (SYN | RST, b""),
        ] {
            let f = build::v4(TCP, c, s, 40000, 80, flags, pl);
            let p = parse_ethernet(&f).unwrap();
            assert!(!syn_deferrable(&p.tuple, p.tcp_flags, p.payload_len));
        }
    }

    #[test]
    fn synthetic_syn_is_the_real_one_for_ndpi() {
        // Same parse, same nDPI answer and state as the real SYN with
        // options (fed then the same payload packets).
        let c = [10, 0, 0, 1];
        let s = [192, 0, 2, 10];
        let real = build::v4(TCP, c, s, 40000, 80, SYN, b"");
        let p = parse_ethernet(&real).unwrap();
        let mut buf = [0; 60];
        let syn = synthetic_syn(&p.tuple, &mut buf);
        let q = parse_ip(syn).unwrap();
        assert_eq!(q.tuple, p.tuple);
        assert_eq!(q.tcp_flags, SYN);
        assert_eq!(q.payload_len, 0);
        let t6 = Tuple {
            src: 0x2001_0db8 << 96 | 1,
            dst: 0x2001_0db8 << 96 | 2,
            sport: 1234,
            dport: 22,
            proto: TCP,
            v6: true,
        };
        let q6 = parse_ip(synthetic_syn(&t6, &mut buf)).unwrap();
        assert_eq!(q6.tuple, t6);
        assert_eq!(q6.tcp_flags, SYN);
    }
}
