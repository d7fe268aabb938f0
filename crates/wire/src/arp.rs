//! ARP (RFC 826).
//!
//! The [`Packet`] view reads any hardware/protocol address sizes; [`Repr`]
//! represents only Ethernet + IPv4 (htype 1, ptype 0x0800, hlen 6, plen 4),
//! which is all a switch needs.
//!
//! **No-panic contract:** once [`Packet::new_checked`] has succeeded, no
//! accessor or setter of that packet panics (address accessors use the
//! lengths the header declares, which `check_len` has checked).

use std::net::Ipv4Addr;

use crate::ethernet::{EtherType, MacAddress};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const ADDRS: usize = 8;
}

/// Hardware type of Ethernet (RFC 826, IANA "Hardware Types").
pub const HTYPE_ETHERNET: u16 = 1;

/// Length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = 28;

/// ARP opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// 1.
    Request,
    /// 2.
    Reply,
    /// Anything else (RARP etc.).
    Unknown(u16),
}

impl From<u16> for Operation {
    fn from(v: u16) -> Self {
        match v {
            1 => Operation::Request,
            2 => Operation::Reply,
            o => Operation::Unknown(o),
        }
    }
}

impl From<Operation> for u16 {
    fn from(o: Operation) -> u16 {
        match o {
            Operation::Request => 1,
            Operation::Reply => 2,
            Operation::Unknown(v) => v,
        }
    }
}

/// Zero-copy view of an ARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps and checks the fixed header and the declared addresses fit.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` unless the buffer holds 8 bytes plus two
    /// (hardware, protocol) address pairs of the declared sizes.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::ADDRS || len < self.total_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Hardware type (1 = Ethernet).
    pub fn hardware_type(&self) -> u16 {
        self.u16_at(field::HTYPE)
    }

    /// Protocol type (an EtherType).
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(self.u16_at(field::PTYPE))
    }

    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Opcode.
    pub fn operation(&self) -> Operation {
        Operation::from(self.u16_at(field::OPER))
    }

    /// Length the header declares: 8 + 2 * (hlen + plen).
    pub fn total_len(&self) -> usize {
        let b = self.buffer.as_ref();
        match (b.get(field::HLEN), b.get(field::PLEN)) {
            (Some(&h), Some(&p)) => field::ADDRS + 2 * (usize::from(h) + usize::from(p)),
            _ => field::ADDRS,
        }
    }

    fn offsets(&self) -> (usize, usize) {
        (
            usize::from(self.hardware_len()),
            usize::from(self.protocol_len()),
        )
    }

    /// Sender hardware address.
    pub fn source_hardware_addr(&self) -> &[u8] {
        let (h, _) = self.offsets();
        &self.buffer.as_ref()[field::ADDRS..field::ADDRS + h]
    }

    /// Sender protocol address.
    pub fn source_protocol_addr(&self) -> &[u8] {
        let (h, p) = self.offsets();
        let s = field::ADDRS + h;
        &self.buffer.as_ref()[s..s + p]
    }

    /// Target hardware address.
    pub fn target_hardware_addr(&self) -> &[u8] {
        let (h, p) = self.offsets();
        let s = field::ADDRS + h + p;
        &self.buffer.as_ref()[s..s + h]
    }

    /// Target protocol address.
    pub fn target_protocol_addr(&self) -> &[u8] {
        let (h, p) = self.offsets();
        let s = field::ADDRS + 2 * h + p;
        &self.buffer.as_ref()[s..s + p]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, v: u16) {
        self.set_u16(field::HTYPE, v)
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, v: EtherType) {
        self.set_u16(field::PTYPE, v.into())
    }

    /// Sets the hardware address length (re-check the length afterwards).
    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }

    /// Sets the protocol address length (re-check the length afterwards).
    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }

    /// Sets the opcode.
    pub fn set_operation(&mut self, v: Operation) {
        self.set_u16(field::OPER, v.into())
    }

    /// Copies into the sender hardware address (`addr` must have hlen bytes).
    pub fn set_source_hardware_addr(&mut self, addr: &[u8]) -> Result<()> {
        let (h, _) = self.offsets();
        self.set_span(field::ADDRS, h, addr)
    }

    /// Copies into the sender protocol address.
    pub fn set_source_protocol_addr(&mut self, addr: &[u8]) -> Result<()> {
        let (h, p) = self.offsets();
        self.set_span(field::ADDRS + h, p, addr)
    }

    /// Copies into the target hardware address.
    pub fn set_target_hardware_addr(&mut self, addr: &[u8]) -> Result<()> {
        let (h, p) = self.offsets();
        self.set_span(field::ADDRS + h + p, h, addr)
    }

    /// Copies into the target protocol address.
    pub fn set_target_protocol_addr(&mut self, addr: &[u8]) -> Result<()> {
        let (h, p) = self.offsets();
        self.set_span(field::ADDRS + 2 * h + p, p, addr)
    }

    fn set_span(&mut self, start: usize, len: usize, addr: &[u8]) -> Result<()> {
        if addr.len() != len {
            return Err(Error::Malformed("ARP address length differs from header"));
        }
        let dst = self
            .buffer
            .as_mut()
            .get_mut(start..start + len)
            .ok_or(Error::Truncated)?;
        dst.copy_from_slice(addr);
        Ok(())
    }
}

/// An Ethernet/IPv4 ARP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Opcode.
    pub operation: Operation,
    /// Sender MAC.
    pub source_hardware_addr: MacAddress,
    /// Sender IPv4 address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target MAC (zero in requests).
    pub target_hardware_addr: MacAddress,
    /// Target IPv4 address.
    pub target_protocol_addr: Ipv4Addr,
}

fn ipv4(b: &[u8]) -> Ipv4Addr {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    Ipv4Addr::from(a)
}

impl Repr {
    /// Parses an Ethernet/IPv4 ARP packet; other address families are
    /// `Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        if p.hardware_type() != HTYPE_ETHERNET || p.hardware_len() != 6 {
            return Err(Error::Unsupported("ARP hardware type other than Ethernet"));
        }
        if p.protocol_type() != EtherType::Ipv4 || p.protocol_len() != 4 {
            return Err(Error::Unsupported("ARP protocol type other than IPv4"));
        }
        Ok(Repr {
            operation: p.operation(),
            source_hardware_addr: MacAddress::from_bytes(p.source_hardware_addr())?,
            source_protocol_addr: ipv4(p.source_protocol_addr()),
            target_hardware_addr: MacAddress::from_bytes(p.target_hardware_addr())?,
            target_protocol_addr: ipv4(p.target_protocol_addr()),
        })
    }

    /// Always 28.
    pub const fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Writes the 28-byte packet.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        if p.buffer.as_ref().len() < ETHERNET_IPV4_LEN {
            return Err(Error::Truncated);
        }
        p.set_hardware_type(HTYPE_ETHERNET);
        p.set_protocol_type(EtherType::Ipv4);
        p.set_hardware_len(6);
        p.set_protocol_len(4);
        p.set_operation(self.operation);
        p.set_source_hardware_addr(&self.source_hardware_addr.0)?;
        p.set_source_protocol_addr(&self.source_protocol_addr.octets())?;
        p.set_target_hardware_addr(&self.target_hardware_addr.0)?;
        p.set_target_protocol_addr(&self.target_protocol_addr.octets())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 10, 0,
        0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ];

    #[test]
    fn parse_emit_truncate() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.operation, Operation::Request);
        assert_eq!(r.source_protocol_addr, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(r.target_protocol_addr, Ipv4Addr::new(10, 0, 0, 2));
        let mut b = [0u8; 28];
        r.emit(&mut Packet::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(b, REQUEST);
        for n in 0..28 {
            assert_eq!(Packet::new_checked(&REQUEST[..n]), Err(Error::Truncated));
        }
    }

    #[test]
    fn huge_declared_lengths() {
        let mut b = REQUEST;
        b[4] = 255;
        b[5] = 255;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::Truncated));
    }
}
