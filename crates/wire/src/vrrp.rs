//! VRRP version 3 advertisements for IPv4 (RFC 5798).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version| Type  | Virtual Rtr ID|   Priority    |Count IPvX Addr|
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |(rsvd) |     Max Adver Int     |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                   IPv4 address(es) ...                        |
//! ```
//!
//! Carried in IPv4 protocol 112 to 224.0.0.18 with TTL 255, from the
//! virtual router MAC `00:00:5e:00:01:VRID`. The checksum covers the VRRP
//! message and the IPv4 pseudo-header (source, destination, zero, 112,
//! VRRP length), as RFC 5798 section 5.2.8 asks and FRR, keepalived and
//! scapy compute it.
//!
//! [`parse_ipv4`] validates everything the receiver must check before the
//! state machine sees the advertisement (RFC 5798 section 7.1: TTL 255,
//! version 3, type 1, length and address count, checksum) and names the
//! failure ([`AdvertError`]) so the caller can count it. It never panics.

use crate::checksum;
use std::net::Ipv4Addr;

/// IP protocol number of VRRP.
pub const PROTOCOL: u8 = 112;
/// The all-VRRP-routers group, 224.0.0.18.
pub const GROUP_V4: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 18);
/// Its multicast MAC, 01:00:5e:00:00:12.
pub const GROUP_V4_MAC: [u8; 6] = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x12];
/// Version 3, type 1 (advertisement).
const VERSION_TYPE: u8 = 0x31;
/// VRRP header without addresses.
pub const HEADER_LEN: usize = 8;
/// Most addresses one advertisement carries here (the format allows 255).
pub const MAX_ADDRESSES: usize = 32;
/// Ethernet + IPv4 (no options) + VRRP header.
const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;

/// The virtual router MAC of `vrid` for IPv4: 00:00:5e:00:01:VRID.
pub fn virtual_mac(vrid: u8) -> [u8; 6] {
    [0x00, 0x00, 0x5e, 0x00, 0x01, vrid]
}

/// The VRID if `mac` is an IPv4 virtual router MAC.
#[inline]
pub fn vrid_of_mac(mac: &[u8]) -> Option<u8> {
    match mac {
        [0x00, 0x00, 0x5e, 0x00, 0x01, v, ..] => Some(*v),
        _ => None,
    }
}

/// Why an advertisement was refused (the names of `show vrrp` counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdvertError {
    /// Shorter than its headers say, a bad IPv4 header, or addresses not
    /// matching the count.
    Length,
    /// IP protocol is not 112.
    NotVrrp,
    /// TTL is not 255 (sent from off the link).
    Ttl,
    /// Version is not 3.
    Version,
    /// Type is not 1 (advertisement).
    Type,
    /// VRRP checksum wrong.
    Checksum,
    /// Advertisement interval 0.
    Interval,
}

impl AdvertError {
    /// The counter name.
    pub fn name(self) -> &'static str {
        match self {
            AdvertError::Length => "bad-length",
            AdvertError::NotVrrp => "not-vrrp",
            AdvertError::Ttl => "bad-ttl",
            AdvertError::Version => "bad-version",
            AdvertError::Type => "bad-type",
            AdvertError::Checksum => "bad-checksum",
            AdvertError::Interval => "bad-interval",
        }
    }
}

/// A validated IPv4 advertisement (borrows the packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Advert<'a> {
    /// IPv4 source (the sender's primary address).
    pub src: Ipv4Addr,
    /// IPv4 destination (224.0.0.18 normally).
    pub dst: Ipv4Addr,
    /// Virtual router id.
    pub vrid: u8,
    /// Sender's priority (0: the master stops).
    pub priority: u8,
    /// Advertisement interval, centiseconds (12 bits).
    pub interval_cs: u16,
    addrs: &'a [u8],
}

impl<'a> Advert<'a> {
    /// Number of addresses.
    pub fn count(&self) -> usize {
        self.addrs.len() / 4
    }

    /// The virtual addresses carried.
    pub fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + 'a {
        self.addrs
            .chunks_exact(4)
            .map(|c| Ipv4Addr::new(c[0], c[1], c[2], c[3]))
    }
}

/// Parses and validates an IPv4 packet (from its IP header) carrying a
/// VRRPv3 advertisement.
pub fn parse_ipv4(ip: &[u8]) -> Result<Advert<'_>, AdvertError> {
    if ip.len() < IP_LEN || ip[0] >> 4 != 4 {
        return Err(AdvertError::Length);
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ihl < IP_LEN || total < ihl || total > ip.len() {
        return Err(AdvertError::Length);
    }
    if !checksum::verifies(checksum::sum(&ip[..ihl])) {
        return Err(AdvertError::Length);
    }
    if ip[9] != PROTOCOL {
        return Err(AdvertError::NotVrrp);
    }
    if ip[8] != 255 {
        return Err(AdvertError::Ttl);
    }
    let v = &ip[ihl..total];
    if v.len() < HEADER_LEN {
        return Err(AdvertError::Length);
    }
    if v[0] >> 4 != 3 {
        return Err(AdvertError::Version);
    }
    if v[0] & 0x0f != 1 {
        return Err(AdvertError::Type);
    }
    let count = usize::from(v[3]);
    if v.len() < HEADER_LEN + 4 * count {
        return Err(AdvertError::Length);
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    if !checksum::verifies(checksum::combine(
        pseudo_sum(src, dst, v.len()),
        checksum::sum(v),
    )) {
        return Err(AdvertError::Checksum);
    }
    let interval_cs = u16::from_be_bytes([v[4], v[5]]) & 0x0fff;
    if interval_cs == 0 {
        return Err(AdvertError::Interval);
    }
    Ok(Advert {
        src,
        dst,
        vrid: v[1],
        priority: v[2],
        interval_cs,
        addrs: &v[HEADER_LEN..HEADER_LEN + 4 * count],
    })
}

/// Parses an Ethernet II frame (untagged) carrying an IPv4 advertisement.
pub fn parse_frame(frame: &[u8]) -> Result<Advert<'_>, AdvertError> {
    if frame.len() < ETH_LEN || frame[12..14] != [0x08, 0x00] {
        return Err(AdvertError::NotVrrp);
    }
    parse_ipv4(&frame[ETH_LEN..])
}

fn pseudo_sum(src: Ipv4Addr, dst: Ipv4Addr, len: usize) -> u32 {
    let mut p = [0u8; 12];
    p[0..4].copy_from_slice(&src.octets());
    p[4..8].copy_from_slice(&dst.octets());
    p[9] = PROTOCOL;
    p[10..12].copy_from_slice(&(len as u16).to_be_bytes());
    checksum::sum(&p)
}

/// What to send: one advertisement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdvertRepr<'a> {
    /// The sender's primary address on the interface.
    pub src: Ipv4Addr,
    /// Virtual router id (1..=255).
    pub vrid: u8,
    /// Priority (0 on shutdown, 255 for the address owner).
    pub priority: u8,
    /// Advertisement interval, centiseconds (at most 4095).
    pub interval_cs: u16,
    /// The virtual addresses.
    pub addresses: &'a [Ipv4Addr],
}

impl AdvertRepr<'_> {
    /// Length of the Ethernet frame [`AdvertRepr::emit_frame`] writes.
    pub fn frame_len(&self) -> usize {
        ETH_LEN + IP_LEN + HEADER_LEN + 4 * self.addresses.len()
    }

    /// Writes the whole frame (virtual MAC → 01:00:5e:00:00:12, IPv4 TTL
    /// 255, DSCP CS6 as routing protocols use, both checksums) into `buf`;
    /// its length, or `None` if `buf` is short or there are too many
    /// addresses.
    pub fn emit_frame(&self, buf: &mut [u8]) -> Option<usize> {
        let n = self.addresses.len();
        if n > MAX_ADDRESSES || buf.len() < self.frame_len() {
            return None;
        }
        let len = self.frame_len();
        let buf = &mut buf[..len];
        buf[0..6].copy_from_slice(&GROUP_V4_MAC);
        buf[6..12].copy_from_slice(&virtual_mac(self.vrid));
        buf[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut buf[ETH_LEN..];
        let total = (IP_LEN + HEADER_LEN + 4 * n) as u16;
        ip[..IP_LEN].copy_from_slice(&[
            0x45, 0xc0, 0, 0, 0, 0, 0, 0, 255, PROTOCOL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ]);
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[12..16].copy_from_slice(&self.src.octets());
        ip[16..20].copy_from_slice(&GROUP_V4.octets());
        let c = checksum::finish(checksum::sum(&ip[..IP_LEN]));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let v = &mut ip[IP_LEN..];
        v[0] = VERSION_TYPE;
        v[1] = self.vrid;
        v[2] = self.priority;
        v[3] = n as u8;
        v[4..6].copy_from_slice(&(self.interval_cs & 0x0fff).to_be_bytes());
        v[6..8].copy_from_slice(&[0, 0]);
        for (k, a) in self.addresses.iter().enumerate() {
            v[HEADER_LEN + 4 * k..HEADER_LEN + 4 * k + 4].copy_from_slice(&a.octets());
        }
        let c = checksum::finish(checksum::combine(
            pseudo_sum(self.src, GROUP_V4, v.len()),
            checksum::sum(v),
        ));
        v[6..8].copy_from_slice(&c.to_be_bytes());
        Some(len)
    }
}

/// Writes a gratuitous ARP (a request for `addr` from `addr`, broadcast,
/// RFC 5798 section 6.4.2) from `mac` into `buf`: 42 bytes, or `None` if
/// `buf` is short.
pub fn gratuitous_arp(mac: [u8; 6], addr: Ipv4Addr, buf: &mut [u8]) -> Option<usize> {
    arp_frame(1, mac, addr, [0xff; 6], addr, [0xff; 6], buf)
}

/// Writes an ARP reply "`addr` is at `mac`" to the requester (`to_mac`,
/// `to_ip`) into `buf`: 42 bytes, or `None` if `buf` is short.
pub fn arp_reply(
    mac: [u8; 6],
    addr: Ipv4Addr,
    to_mac: [u8; 6],
    to_ip: Ipv4Addr,
    buf: &mut [u8],
) -> Option<usize> {
    arp_frame(2, mac, addr, to_mac, to_ip, to_mac, buf)
}

fn arp_frame(
    op: u8,
    mac: [u8; 6],
    addr: Ipv4Addr,
    target_mac: [u8; 6],
    target_ip: Ipv4Addr,
    dst: [u8; 6],
    buf: &mut [u8],
) -> Option<usize> {
    let buf = buf.get_mut(..42)?;
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&mac);
    buf[12..14].copy_from_slice(&[0x08, 0x06]);
    buf[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, op]);
    buf[22..28].copy_from_slice(&mac);
    buf[28..32].copy_from_slice(&addr.octets());
    buf[32..38].copy_from_slice(if op == 1 { &[0; 6] } else { &target_mac });
    buf[38..42].copy_from_slice(&target_ip.octets());
    Some(42)
}

/// An ARP request in an Ethernet frame: (sender MAC, sender IP, target
/// IP), or `None` if the frame is not an Ethernet/IPv4 ARP request.
pub fn arp_request(frame: &[u8]) -> Option<([u8; 6], Ipv4Addr, Ipv4Addr)> {
    let f = frame.get(..42)?;
    if f[12..14] != [0x08, 0x06] || f[14..22] != [0, 1, 8, 0, 6, 4, 0, 1] {
        return None;
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&f[22..28]);
    Some((
        mac,
        Ipv4Addr::new(f[28], f[29], f[30], f[31]),
        Ipv4Addr::new(f[38], f[39], f[40], f[41]),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VRID 7, priority 200, interval 100 cs, one address 192.0.2.254,
    /// from 192.0.2.2. The VRRP checksum was computed by hand (and with
    /// an independent Python one's-complement sum):
    /// the pseudo-header words 0xc000 0x0202 0xe000 0x0012 0x0070 0x000c
    /// plus the VRRP words 0x3107 0xc801 0x0064 0x0000 0xc000 0x02fe,
    /// folded 0x5efd, complement 0xa102. IPv4 header checksum 0x1899.
    const FRAME: [u8; 54] = [
        0x01, 0x00, 0x5e, 0x00, 0x00, 0x12, 0x00, 0x00, 0x5e, 0x00, 0x01, 0x07, 0x08, 0x00, //
        0x45, 0xc0, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0xff, 0x70, 0x18, 0x99, //
        0xc0, 0x00, 0x02, 0x02, 0xe0, 0x00, 0x00, 0x12, //
        0x31, 0x07, 0xc8, 0x01, 0x00, 0x64, 0xa1, 0x02, 0xc0, 0x00, 0x02, 0xfe, //
        0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn emit_matches_the_hand_checked_frame_and_parses_back() {
        let addrs = [Ipv4Addr::new(192, 0, 2, 254)];
        let r = AdvertRepr {
            src: Ipv4Addr::new(192, 0, 2, 2),
            vrid: 7,
            priority: 200,
            interval_cs: 100,
            addresses: &addrs,
        };
        let mut buf = [0u8; 64];
        let n = r.emit_frame(&mut buf).unwrap();
        assert_eq!(n, 46);
        assert_eq!(&buf[..n], &FRAME[..46]);
        // Ethernet padding after the IP packet is ignored.
        let a = parse_frame(&FRAME).unwrap();
        assert_eq!((a.vrid, a.priority, a.interval_cs), (7, 200, 100));
        assert_eq!(a.src, Ipv4Addr::new(192, 0, 2, 2));
        assert_eq!(a.addresses().collect::<Vec<_>>(), addrs);
    }

    #[test]
    fn every_bad_field_is_named() {
        let bad = |at: usize, v: u8| {
            let mut f = FRAME;
            f[at] = v;
            parse_frame(&f).unwrap_err()
        };
        // TTL 64: the IP header checksum is refreshed so only TTL is wrong.
        let mut f = FRAME;
        f[22] = 64;
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum::finish(checksum::sum(&f[14..34]));
        f[24..26].copy_from_slice(&c.to_be_bytes());
        assert_eq!(parse_frame(&f).unwrap_err(), AdvertError::Ttl);
        assert_eq!(bad(34, 0x21), AdvertError::Version);
        assert_eq!(bad(34, 0x32), AdvertError::Type);
        assert_eq!(bad(36, 0xc9), AdvertError::Checksum);
        assert_eq!(bad(37, 2), AdvertError::Length);
        assert_eq!(bad(22, 0), AdvertError::Length); // IP header checksum
        for n in 0..FRAME.len() {
            let _ = parse_frame(&FRAME[..n]);
        }
        assert!(parse_frame(&FRAME[..45]).is_err());
    }

    #[test]
    fn arp_frames() {
        let mut b = [0u8; 42];
        let vip = Ipv4Addr::new(192, 0, 2, 254);
        gratuitous_arp(virtual_mac(7), vip, &mut b).unwrap();
        let (mac, s, t) = arp_request(&b).unwrap();
        assert_eq!((mac, s, t), (virtual_mac(7), vip, vip));
        arp_reply(
            virtual_mac(7),
            vip,
            [2; 6],
            Ipv4Addr::new(192, 0, 2, 9),
            &mut b,
        )
        .unwrap();
        assert!(arp_request(&b).is_none());
        assert_eq!(&b[0..6], &[2; 6]);
        assert_eq!(b[21], 2);
        assert_eq!(vrid_of_mac(&virtual_mac(9)), Some(9));
        assert_eq!(vrid_of_mac(&[0, 0, 0x5e, 0, 2, 9]), None);
    }
}
