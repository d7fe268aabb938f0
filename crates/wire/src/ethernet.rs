//! Ethernet II frames (IEEE 802.3 clause 3.2 with an EtherType).
//!
//! [`Frame`] is a zero-copy view; [`Repr`] is the parsed header.
//!
//! **No-panic contract:** once [`Frame::new_checked`] (or
//! [`Frame::check_len`]) has succeeded, no accessor or setter of that frame
//! panics. 802.1Q/802.1ad tags are read by [`crate::vlan`].

use core::fmt;
use core::str::FromStr;

use crate::{Error, Result};

/// A 48-bit IEEE MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddress(pub [u8; 6]);

impl MacAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddress = MacAddress([0xff; 6]);

    /// Reads an address from the first 6 bytes of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Result<MacAddress> {
        match bytes.get(..6) {
            Some(b) => {
                let mut a = [0u8; 6];
                a.copy_from_slice(b);
                Ok(MacAddress(a))
            }
            None => Err(Error::Truncated),
        }
    }

    /// The six octets.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Group bit (I/G, least significant bit of the first octet) set;
    /// broadcast is also multicast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Not multicast (individual address).
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Locally administered bit (U/L) set.
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for MacAddress {
    type Err = Error;

    /// Parses `aa:bb:cc:dd:ee:ff` (hex digits, either case, `:` or `-`).
    fn from_str(s: &str) -> Result<MacAddress> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in &mut out {
            let part = parts
                .next()
                .ok_or(Error::Malformed("MAC address: too few octets"))?;
            if part.is_empty() || part.len() > 2 {
                return Err(Error::Malformed("MAC address: octet is not 1-2 hex digits"));
            }
            *byte = u8::from_str_radix(part, 16)
                .map_err(|_| Error::Malformed("MAC address: octet is not hex"))?;
        }
        if parts.next().is_some() {
            return Err(Error::Malformed("MAC address: too many octets"));
        }
        Ok(MacAddress(out))
    }
}

/// EtherType (IEEE 802 numbers). Unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// 0x0800.
    Ipv4,
    /// 0x0806.
    Arp,
    /// 0x8100: 802.1Q customer VLAN tag (C-tag).
    Vlan,
    /// 0x88a8: 802.1ad service VLAN tag (S-tag).
    QinQ,
    /// 0x86dd.
    Ipv6,
    /// Any other value (including 802.3 length fields below 0x0600).
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x8100 => EtherType::Vlan,
            0x88a8 => EtherType::QinQ,
            0x86dd => EtherType::Ipv6,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(e: EtherType) -> u16 {
        match e {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Vlan => 0x8100,
            EtherType::QinQ => 0x88a8,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Unknown(v) => v,
        }
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x}", u16::from(*self))
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of the Ethernet II header (no tags, no FCS).
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// Zero-copy view of an Ethernet II frame (without FCS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a buffer and checks it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// `Err(Truncated)` if shorter than 14 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole buffer.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Header length: always 14.
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    /// Destination address.
    pub fn dst_addr(&self) -> MacAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        MacAddress(a)
    }

    /// Source address.
    pub fn src_addr(&self) -> MacAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        MacAddress(a)
    }

    /// EtherType (or TPID, if the frame is tagged).
    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Everything after the 14-byte header (tags included).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: MacAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: MacAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&a.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, e: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(e).to_be_bytes());
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// Parsed Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: MacAddress,
    /// Destination address.
    pub dst_addr: MacAddress,
    /// EtherType (TPID when tagged).
    pub ethertype: EtherType,
}

impl Repr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Header length: 14.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the payload is left alone.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) -> Result<()> {
        frame.check_len()?;
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ARP request from 00:11:22:33:44:55, broadcast.
    static FRAME: [u8; 16] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x08, 0x06, 0xaa,
        0xbb,
    ];

    #[test]
    fn parse_and_emit() {
        let f = Frame::new_checked(&FRAME[..]).unwrap();
        assert!(f.dst_addr().is_broadcast());
        assert_eq!(f.src_addr().to_string(), "00:11:22:33:44:55");
        assert_eq!(f.ethertype(), EtherType::Arp);
        assert_eq!(f.payload(), &[0xaa, 0xbb]);
        let repr = Repr::parse(&f).unwrap();
        let mut buf = [0u8; 16];
        let mut out = Frame::new_unchecked(&mut buf[..]);
        repr.emit(&mut out).unwrap();
        out.payload_mut().copy_from_slice(&[0xaa, 0xbb]);
        assert_eq!(buf, FRAME);
    }

    #[test]
    fn truncations() {
        for n in 0..HEADER_LEN {
            assert_eq!(Frame::new_checked(&FRAME[..n]), Err(Error::Truncated));
        }
        let mut short = [0u8; 4];
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&FRAME[..]))
                .unwrap()
                .emit(&mut Frame::new_unchecked(&mut short[..])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn mac_text() {
        let m: MacAddress = "AA:bb:cc:dd:ee:0f".parse().unwrap();
        assert_eq!(m.to_string(), "aa:bb:cc:dd:ee:0f");
        assert!(m.is_unicast() && m.is_local());
        assert!("01:00:5e:00:00:01"
            .parse::<MacAddress>()
            .unwrap()
            .is_multicast());
        for bad in [
            "",
            "aa:bb",
            "aa:bb:cc:dd:ee:ff:00",
            "aa:bb:cc:dd:ee:fg",
            "aaa:bb:cc:dd:ee:ff",
            "aa::cc:dd:ee:ff",
        ] {
            assert!(bad.parse::<MacAddress>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ethertype_roundtrip() {
        for v in [0x0800u16, 0x0806, 0x8100, 0x88a8, 0x86dd, 0x1234] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
    }
}
