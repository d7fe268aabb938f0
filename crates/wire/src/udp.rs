//! UDP (RFC 768; checksum rules for IPv6 in RFC 8200 section 8.1).
//!
//! **No-panic contract:** once [`Packet::new_checked`] has succeeded, no
//! accessor or setter of that packet panics. `new_checked` guarantees
//! `8 <= length field <= buffer length`; bytes after the length are ignored.

use crate::checksum;
use crate::ip::{IpPair, IpProtocol};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// UDP header length.
pub const HEADER_LEN: usize = field::CHECKSUM.end;

/// Zero-copy view of a UDP datagram.
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

    /// Checks `8 <= length <= buffer`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = usize::from(self.len());
        if l < HEADER_LEN {
            return Err(Error::Malformed("UDP length below 8"));
        }
        if len < l {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// Length field (header + payload).
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// True if the length field says there is no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    /// Checksum field (0 = none, IPv4 only).
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Payload (up to the length field).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// True if the checksum verifies. A zero checksum means "none" over
    /// IPv4 (verifies) and is invalid over IPv6 (does not).
    pub fn verify_checksum(&self, ips: &IpPair) -> bool {
        if self.checksum() == 0 {
            return !ips.is_v6();
        }
        let l = usize::from(self.len());
        let data = &self.buffer.as_ref()[..l];
        let acc = checksum::combine(
            ips.pseudo_header_sum(IpProtocol::Udp, l as u32),
            checksum::sum(data),
        );
        checksum::verifies(acc)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.set_u16(field::SRC_PORT, v)
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        self.set_u16(field::DST_PORT, v)
    }

    /// Sets the length field (re-check the length afterwards).
    pub fn set_len(&mut self, v: u16) {
        self.set_u16(field::LENGTH, v)
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16(field::CHECKSUM, v)
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..l]
    }

    /// Computes and writes the checksum (a computed 0 is sent as 0xffff,
    /// RFC 768). Does nothing if the length field exceeds the buffer.
    pub fn fill_checksum(&mut self, ips: &IpPair) {
        let l = usize::from(self.len());
        if l > self.buffer.as_ref().len() {
            return;
        }
        self.set_checksum(0);
        let acc = checksum::combine(
            ips.pseudo_header_sum(IpProtocol::Udp, l as u32),
            checksum::sum(&self.buffer.as_ref()[..l]),
        );
        let c = match checksum::finish(acc) {
            0 => 0xffff,
            c => c,
        };
        self.set_checksum(c);
    }
}

/// A parsed UDP datagram; the payload is borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload.
    pub payload: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses a checked datagram and verifies its checksum against `ips`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&'a T>, ips: &IpPair) -> Result<Repr<'a>> {
        p.check_len()?;
        if !p.verify_checksum(ips) {
            return Err(Error::Checksum);
        }
        let payload = &p.buffer.as_ref()[HEADER_LEN..usize::from(p.len())];
        Ok(Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload,
        })
    }

    /// Header plus payload.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    /// Writes header, payload and checksum.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
        ips: &IpPair,
    ) -> Result<()> {
        let len = self.buffer_len();
        if p.buffer.as_ref().len() < len {
            return Err(Error::Truncated);
        }
        let l16 =
            u16::try_from(len).map_err(|_| Error::Malformed("UDP payload longer than 65527"))?;
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(l16);
        p.payload_mut().copy_from_slice(self.payload);
        p.fill_checksum(ips);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn roundtrip_v4_v6() {
        let pairs = [
            IpPair::V4 {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
            },
            IpPair::V6 {
                src: Ipv6Addr::LOCALHOST,
                dst: "2001:db8::1".parse().unwrap(),
            },
        ];
        for ips in pairs {
            let r = Repr {
                src_port: 1234,
                dst_port: 53,
                payload: b"hello",
            };
            let mut b = [0u8; 13];
            r.emit(&mut Packet::new_unchecked(&mut b[..]), &ips)
                .unwrap();
            let p = Packet::new_checked(&b[..]).unwrap();
            assert!(p.verify_checksum(&ips));
            assert_eq!(Repr::parse(&p, &ips).unwrap(), r);
            for n in 0..b.len() {
                assert!(Packet::new_checked(&b[..n]).is_err());
            }
            let mut z = b;
            z[6] = 0;
            z[7] = 0;
            assert_eq!(
                Packet::new_checked(&z[..]).unwrap().verify_checksum(&ips),
                !ips.is_v6()
            );
        }
    }
}
