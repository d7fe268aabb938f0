//! IPv4 (RFC 791).
//!
//! [`Packet`] is the zero-copy view the data path uses: it reads every
//! field, verifies and fills the header checksum, re-marks DSCP/ECN and
//! decrements the TTL with an incremental checksum update (RFC 1624), so a
//! forwarded packet never has its header re-summed. [`Repr`] is the parsed
//! header for builders and tests; it does not carry IP options (a packet with
//! options parses, and re-emits without them).
//!
//! **No-panic contract:** once [`Packet::new_checked`] has succeeded, no
//! accessor or setter of that packet panics. `new_checked` guarantees
//! version 4, `20 <= header_len <= total_len <= buffer length`.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::ip::{Dscp, Ecn, IpProtocol};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// Zero-copy view of an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps and checks (see [`Packet::check_len`]).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks version 4 and `20 <= header_len <= total_len <= buffer`.
    /// Bytes after `total_len` (Ethernet padding) are allowed and ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::Malformed("IPv4 version is not 4"));
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Malformed("IPv4 IHL below 5"));
        }
        let total = usize::from(self.total_len());
        if total < hl {
            return Err(Error::Malformed("IPv4 total length below header length"));
        }
        if len < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.b()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Version field (4 after `new_checked`).
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0f) * 4
    }

    /// DSCP (upper 6 bits of the TOS byte).
    pub fn dscp(&self) -> Dscp {
        Dscp::from_tos(self.b()[field::TOS])
    }

    /// ECN (lower 2 bits of the TOS byte).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.b()[field::TOS])
    }

    /// Total length (header + payload).
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    /// DF flag.
    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x4000 != 0
    }

    /// MF flag.
    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x2000 != 0
    }

    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        self.u16_at(field::FLG_OFF) & 0x1fff
    }

    /// True if MF is set or the offset is non-zero.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.b()[field::PROTOCOL])
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.b()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Options (header bytes after the first 20).
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }

    /// True if the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::verifies(checksum::sum(&self.b()[..self.header_len()]))
    }

    /// Payload: bytes from the end of the header to `total_len`.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.bm()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the version (only the low 4 bits are used).
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.bm()[field::VER_IHL];
        *b = (*b & 0x0f) | (v << 4);
    }

    /// Sets the header length in bytes; must be a multiple of 4 in 20..=60.
    pub fn set_header_len(&mut self, len: usize) -> Result<()> {
        if len & 3 != 0 || !(HEADER_LEN..=60).contains(&len) {
            return Err(Error::Malformed(
                "IPv4 header length not a multiple of 4 in 20..=60",
            ));
        }
        let b = &mut self.bm()[field::VER_IHL];
        *b = (*b & 0xf0) | (len / 4) as u8;
        Ok(())
    }

    /// Sets DSCP without touching the checksum.
    pub fn set_dscp(&mut self, dscp: Dscp) {
        let b = &mut self.bm()[field::TOS];
        *b = (*b & 0x03) | (dscp.get() << 2);
    }

    /// Sets ECN without touching the checksum.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let b = &mut self.bm()[field::TOS];
        *b = (*b & 0xfc) | ecn.bits();
    }

    /// Re-marks DSCP and updates the checksum incrementally (RFC 1624).
    pub fn remark_dscp(&mut self, dscp: Dscp) {
        let old = self.u16_at(0..2);
        self.set_dscp(dscp);
        self.patch_checksum(old, self.u16_at(0..2));
    }

    /// Sets ECN and updates the checksum incrementally (RFC 1624).
    pub fn remark_ecn(&mut self, ecn: Ecn) {
        let old = self.u16_at(0..2);
        self.set_ecn(ecn);
        self.patch_checksum(old, self.u16_at(0..2));
    }

    /// Decrements the TTL and updates the checksum incrementally (RFC 1624).
    /// Returns the new TTL; `Err(Malformed)` (packet unchanged) if the TTL
    /// is already 0.
    pub fn decrement_ttl(&mut self) -> Result<u8> {
        let ttl = self.ttl();
        if ttl == 0 {
            return Err(Error::Malformed("IPv4 TTL already 0"));
        }
        let old = self.u16_at(8..10);
        self.set_ttl(ttl - 1);
        self.patch_checksum(old, self.u16_at(8..10));
        Ok(ttl - 1)
    }

    fn patch_checksum(&mut self, old: u16, new: u16) {
        let c = checksum::update(self.checksum(), old, new);
        self.set_checksum(c);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        self.set_u16(field::LENGTH, v)
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, v: u16) {
        self.set_u16(field::IDENT, v)
    }

    /// Sets DF, MF and the fragment offset (8-byte units, low 13 bits used).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let v = (u16::from(dont_frag) << 14) | (u16::from(more_frags) << 13) | (offset & 0x1fff);
        self.set_u16(field::FLG_OFF, v)
    }

    /// Sets the TTL without touching the checksum.
    pub fn set_ttl(&mut self, v: u8) {
        self.bm()[field::TTL] = v;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.bm()[field::PROTOCOL] = p.into();
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16(field::CHECKSUM, v)
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.bm()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// Computes and writes the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len().min(self.b().len());
        let c = checksum::finish(checksum::sum(&self.b()[..hl]));
        self.set_checksum(c);
    }

    /// Mutable payload (header end to `total_len`).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (s, e) = (self.header_len(), usize::from(self.total_len()));
        &mut self.bm()[s..e]
    }
}

/// Parsed IPv4 header (without options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: IpProtocol,
    /// Payload length (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP.
    pub dscp: Dscp,
    /// ECN.
    pub ecn: Ecn,
    /// Identification.
    pub ident: u16,
    /// DF flag.
    pub dont_frag: bool,
    /// MF flag.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units (0..=8191).
    pub frag_offset: u16,
}

impl Repr {
    /// Parses a checked packet and verifies its header checksum.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: p.payload().len(),
            ttl: p.ttl(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
        })
    }

    /// Header length: 20 (options are not represented).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (with checksum); the payload is left alone.
    /// `Err(Malformed)` if `payload_len` does not fit the total-length field.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        if p.b().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let total = u16::try_from(HEADER_LEN + self.payload_len)
            .map_err(|_| Error::Malformed("IPv4 payload longer than 65515"))?;
        if self.frag_offset > 0x1fff {
            return Err(Error::Malformed("IPv4 fragment offset above 8191"));
        }
        p.set_version(4);
        p.set_header_len(HEADER_LEN)?;
        p.bm()[field::TOS] = (self.dscp.get() << 2) | self.ecn.bits();
        p.set_total_len(total);
        p.set_ident(self.ident);
        p.set_frag(self.dont_frag, self.more_frags, self.frag_offset);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ICMP echo 192.168.1.1 -> 192.168.1.2, ttl 64, DF, ident 0x1234.
    fn sample() -> [u8; 28] {
        let r = Repr {
            src_addr: Ipv4Addr::new(192, 168, 1, 1),
            dst_addr: Ipv4Addr::new(192, 168, 1, 2),
            protocol: IpProtocol::Icmp,
            payload_len: 8,
            ttl: 64,
            dscp: Dscp::default(),
            ecn: Ecn::NotEct,
            ident: 0x1234,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        let mut b = [0u8; 28];
        r.emit(&mut Packet::new_unchecked(&mut b[..])).unwrap();
        b
    }

    #[test]
    fn known_checksum() {
        let b = sample();
        // Header checksum computed by hand: 45 00 00 1c 12 34 40 00 40 01 ....
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.payload().len(), 8);
    }

    #[test]
    fn ttl_and_dscp_incremental() {
        let mut b = sample();
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        for expect in (0..64).rev() {
            assert_eq!(p.decrement_ttl().unwrap(), expect);
            assert!(p.verify_checksum());
        }
        assert!(p.decrement_ttl().is_err());
        for d in 0..=63 {
            p.remark_dscp(Dscp::new(d).unwrap());
            p.remark_ecn(Ecn::from_bits(d));
            assert!(p.verify_checksum(), "dscp {d}");
            assert_eq!(p.dscp().get(), d);
        }
    }

    #[test]
    fn rejects() {
        let b = sample();
        for n in 0..b.len() {
            assert!(Packet::new_checked(&b[..n]).is_err());
        }
        let mut bad = b;
        bad[0] = 0x44;
        assert!(matches!(
            Packet::new_checked(&bad[..]),
            Err(Error::Malformed(_))
        ));
        let mut bad = b;
        bad[0] = 0x65;
        assert!(matches!(
            Packet::new_checked(&bad[..]),
            Err(Error::Malformed(_))
        ));
        let mut bad = b;
        bad[15] ^= 1;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&bad[..]).unwrap()),
            Err(Error::Checksum)
        );
    }
}
