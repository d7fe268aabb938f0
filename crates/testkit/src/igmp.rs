//! IGMP and MLD messages as a host sends them, built here by hand (the
//! tester must not share code with the switch): IGMPv2 reports and
//! leaves, IGMPv3 reports, MLDv1 reports/dones and MLDv2 reports, each a
//! complete untagged Ethernet frame with the router alert option and
//! valid checksums; plus the group → MAC mapping.

use crate::frame::Mac;
use crate::ip::{fold, pseudo, sum};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IGMPv3 / MLDv2 record types (RFC 3376 4.2.12).
pub const MODE_IS_INCLUDE: u8 = 1;
pub const MODE_IS_EXCLUDE: u8 = 2;
pub const CHANGE_TO_INCLUDE: u8 = 3;
pub const CHANGE_TO_EXCLUDE: u8 = 4;
pub const ALLOW_NEW_SOURCES: u8 = 5;
pub const BLOCK_OLD_SOURCES: u8 = 6;

/// The Ethernet address of an IP multicast group (RFC 1112 6.4, RFC 2464 7).
pub fn group_mac(g: IpAddr) -> Mac {
    match g {
        IpAddr::V4(a) => {
            let o = a.octets();
            [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
        }
        IpAddr::V6(a) => {
            let o = a.octets();
            [0x33, 0x33, o[12], o[13], o[14], o[15]]
        }
    }
}

fn ipv4_frame(src_mac: &Mac, src: Ipv4Addr, dst: Ipv4Addr, igmp: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + 24 + igmp.len());
    f.extend_from_slice(&group_mac(IpAddr::V4(dst)));
    f.extend_from_slice(src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut h = [0u8; 24];
    h[0] = 0x46; // IHL 6: router alert
    h[1] = 0xc0;
    h[2..4].copy_from_slice(&((24 + igmp.len()) as u16).to_be_bytes());
    h[8] = 1;
    h[9] = 2;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    h[20..24].copy_from_slice(&[0x94, 0x04, 0, 0]);
    let c = fold(sum(&h, 0));
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(igmp);
    f
}

fn igmp_checksum(m: &mut [u8]) {
    m[2] = 0;
    m[3] = 0;
    let c = fold(sum(m, 0));
    m[2..4].copy_from_slice(&c.to_be_bytes());
}

/// IGMPv2 membership report for `group`, sent to the group.
pub fn igmpv2_report(src_mac: &Mac, src: Ipv4Addr, group: Ipv4Addr) -> Vec<u8> {
    let mut m = [0x16, 0, 0, 0, 0, 0, 0, 0];
    m[4..8].copy_from_slice(&group.octets());
    igmp_checksum(&mut m);
    ipv4_frame(src_mac, src, group, &m)
}

/// IGMPv2 leave group for `group`, sent to all routers.
pub fn igmpv2_leave(src_mac: &Mac, src: Ipv4Addr, group: Ipv4Addr) -> Vec<u8> {
    let mut m = [0x17, 0, 0, 0, 0, 0, 0, 0];
    m[4..8].copy_from_slice(&group.octets());
    igmp_checksum(&mut m);
    ipv4_frame(src_mac, src, Ipv4Addr::new(224, 0, 0, 2), &m)
}

/// IGMPv2 general query from `src` (a querier on the tester side).
pub fn igmpv2_query(src_mac: &Mac, src: Ipv4Addr) -> Vec<u8> {
    let mut m = [0x11, 100, 0, 0, 0, 0, 0, 0];
    igmp_checksum(&mut m);
    ipv4_frame(src_mac, src, Ipv4Addr::new(224, 0, 0, 1), &m)
}

/// The record count and the records of an IGMPv3 / MLDv2 report (the
/// same layout in both, RFC 3376 4.2 / RFC 3810 5.2).
fn push_records<A: Copy>(m: &mut Vec<u8>, records: &[(u8, A, Vec<A>)], octets: fn(A) -> Vec<u8>) {
    m.extend_from_slice(&(records.len() as u16).to_be_bytes());
    for (t, g, srcs) in records {
        m.extend_from_slice(&[*t, 0]);
        m.extend_from_slice(&(srcs.len() as u16).to_be_bytes());
        m.extend_from_slice(&octets(*g));
        for s in srcs {
            m.extend_from_slice(&octets(*s));
        }
    }
}

/// IGMPv3 report with `records` (type, group, sources), to 224.0.0.22.
pub fn igmpv3_report(
    src_mac: &Mac,
    src: Ipv4Addr,
    records: &[(u8, Ipv4Addr, Vec<Ipv4Addr>)],
) -> Vec<u8> {
    let mut m = vec![0x22, 0, 0, 0, 0, 0];
    push_records(&mut m, records, |a| a.octets().to_vec());
    igmp_checksum(&mut m);
    ipv4_frame(src_mac, src, Ipv4Addr::new(224, 0, 0, 22), &m)
}

fn ipv6_frame(src_mac: &Mac, src: Ipv6Addr, dst: Ipv6Addr, icmp: &mut [u8]) -> Vec<u8> {
    icmp[2] = 0;
    icmp[3] = 0;
    let c = fold(sum(
        icmp,
        pseudo(IpAddr::V6(src), IpAddr::V6(dst), 58, icmp.len()),
    ));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = Vec::with_capacity(14 + 48 + icmp.len());
    f.extend_from_slice(&group_mac(IpAddr::V6(dst)));
    f.extend_from_slice(src_mac);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&((8 + icmp.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&[58, 0, 5, 2, 0, 0, 1, 0]);
    f.extend_from_slice(icmp);
    f
}

/// MLDv2 report with `records`, to ff02::16, from link-local `src`.
pub fn mldv2_report(
    src_mac: &Mac,
    src: Ipv6Addr,
    records: &[(u8, Ipv6Addr, Vec<Ipv6Addr>)],
) -> Vec<u8> {
    let mut m = vec![143, 0, 0, 0, 0, 0];
    push_records(&mut m, records, |a| a.octets().to_vec());
    ipv6_frame(
        src_mac,
        src,
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16),
        &mut m,
    )
}

/// MLDv1 done for `group`, to ff02::2.
pub fn mldv1_done(src_mac: &Mac, src: Ipv6Addr, group: Ipv6Addr) -> Vec<u8> {
    let mut m = vec![132, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&group.octets());
    ipv6_frame(
        src_mac,
        src,
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2),
        &mut m,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_verify() {
        let m = [2, 0, 0, 0, 0, 1];
        let f = igmpv3_report(
            &m,
            Ipv4Addr::new(10, 0, 0, 1),
            &[(
                MODE_IS_INCLUDE,
                Ipv4Addr::new(232, 1, 1, 1),
                vec![Ipv4Addr::new(10, 9, 9, 9)],
            )],
        );
        assert_eq!(fold(sum(&f[14..38], 0)), 0, "IP header");
        assert_eq!(fold(sum(&f[38..], 0)), 0, "IGMP");
        assert_eq!(&f[..6], &[0x01, 0x00, 0x5e, 0, 0, 22]);
    }
}
