//! IEEE 802.1Q (C-tag, TPID 0x8100) and 802.1ad (S-tag, TPID 0x88a8) tags.
//!
//! A [`Tag`] views the 4 bytes that follow a TPID: the TCI (PCP, DEI,
//! VLAN ID) and the next EtherType. [`parse_tags`] walks up to two tags after
//! the Ethernet addresses and reports the final EtherType and where the
//! payload starts.
//!
//! **No-panic contract:** once [`Tag::new_checked`] has succeeded, no
//! accessor or setter of that tag panics; [`parse_tags`] never panics.

use crate::ethernet::{self, EtherType, Frame};
use crate::{Error, Result};

/// 802.1Q VLAN identifier, 0..=4095 (0 = priority tag, 4095 reserved).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct VlanId(u16);

impl VlanId {
    /// Largest value a 12-bit VID can hold.
    pub const MAX: u16 = 4095;

    /// Checked constructor: `Err` when `v > 4095`.
    pub const fn new(v: u16) -> Result<VlanId> {
        if v > Self::MAX {
            Err(Error::Malformed("VLAN ID above 4095"))
        } else {
            Ok(VlanId(v))
        }
    }

    /// The 12-bit value.
    pub const fn get(self) -> u16 {
        self.0
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TCI: Range<usize> = 0..2;
    pub const ETHERTYPE: Range<usize> = 2..4;
    pub const PAYLOAD: RangeFrom<usize> = 4..;
}

/// Length of one tag after its TPID.
pub const TAG_LEN: usize = field::PAYLOAD.start;

/// Zero-copy view of the 4 bytes after a TPID (TCI + next EtherType).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Tag<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Tag<T> {
        Tag { buffer }
    }

    /// Wraps and checks the length.
    pub fn new_checked(buffer: T) -> Result<Tag<T>> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// `Err(Truncated)` if shorter than 4 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < TAG_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn tci(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::TCI];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Priority code point, 0..=7 (802.1Q section 6.9.3).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier.
    pub fn vlan_id(&self) -> VlanId {
        VlanId(self.tci() & 0x0fff)
    }

    /// EtherType (or next TPID) after this tag.
    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Bytes after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tag<T> {
    fn set_tci(&mut self, v: u16) {
        self.buffer.as_mut()[field::TCI].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the PCP; only the low 3 bits of `pcp` are used.
    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(pcp & 0x7) << 13);
        self.set_tci(tci);
    }

    /// Sets the DEI bit.
    pub fn set_dei(&mut self, dei: bool) {
        let tci = (self.tci() & !0x1000) | if dei { 0x1000 } else { 0 };
        self.set_tci(tci);
    }

    /// Sets the VLAN ID.
    pub fn set_vlan_id(&mut self, vid: VlanId) {
        let tci = (self.tci() & 0xf000) | vid.get();
        self.set_tci(tci);
    }

    /// Sets the EtherType after the tag.
    pub fn set_ethertype(&mut self, e: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(e).to_be_bytes());
    }

    /// Mutable bytes after the tag.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// Parsed tag (TCI and next EtherType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN ID.
    pub vlan_id: VlanId,
    /// EtherType after the tag.
    pub ethertype: EtherType,
}

impl Repr {
    /// Reads a tag.
    pub fn parse<T: AsRef<[u8]>>(tag: &Tag<T>) -> Result<Repr> {
        tag.check_len()?;
        Ok(Repr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vlan_id: tag.vlan_id(),
            ethertype: tag.ethertype(),
        })
    }

    /// Always 4.
    pub const fn buffer_len(&self) -> usize {
        TAG_LEN
    }

    /// Writes the tag; `Err(Malformed)` if `pcp > 7`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut Tag<T>) -> Result<()> {
        tag.check_len()?;
        if self.pcp > 7 {
            return Err(Error::Malformed("PCP above 7"));
        }
        tag.set_pcp(self.pcp);
        tag.set_dei(self.dei);
        tag.set_vlan_id(self.vlan_id);
        tag.set_ethertype(self.ethertype);
        Ok(())
    }
}

/// One tag found by [`parse_tags`]: its TPID and contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaggedHeader {
    /// The TPID that introduced the tag ([`EtherType::Vlan`] or [`EtherType::QinQ`]).
    pub tpid: EtherType,
    /// The tag.
    pub tag: Repr,
}

/// Layer-2 header summary: addresses, up to two tags, final EtherType.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L2Headers {
    /// Destination MAC.
    pub dst_addr: ethernet::MacAddress,
    /// Source MAC.
    pub src_addr: ethernet::MacAddress,
    /// First tag (S-tag in 802.1ad, or the only C-tag).
    pub outer: Option<TaggedHeader>,
    /// Second tag (C-tag inside an S-tag, or 0x8100 stacked in 0x8100).
    pub inner: Option<TaggedHeader>,
    /// EtherType of the payload after all tags.
    pub ethertype: EtherType,
    /// Offset of the payload from the start of the frame.
    pub payload_offset: usize,
}

fn is_tpid(e: EtherType) -> bool {
    matches!(e, EtherType::Vlan | EtherType::QinQ)
}

/// Walks the tags of `frame`.
///
/// Accepts no tag, one tag (0x8100 or 0x88a8), or two tags whose inner TPID
/// is 0x8100. An S-tag (0x88a8) inside another tag, or a third tag, is
/// `Malformed`; a tag cut short is `Truncated`.
pub fn parse_tags<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<L2Headers> {
    frame.check_len()?;
    let bytes = frame.as_bytes();
    let mut headers = L2Headers {
        dst_addr: frame.dst_addr(),
        src_addr: frame.src_addr(),
        outer: None,
        inner: None,
        ethertype: frame.ethertype(),
        payload_offset: ethernet::HEADER_LEN,
    };
    let mut depth = 0;
    while is_tpid(headers.ethertype) {
        let tpid = headers.ethertype;
        if depth == 1 && tpid == EtherType::QinQ {
            return Err(Error::Malformed("802.1ad S-tag inside another tag"));
        }
        if depth == 2 {
            return Err(Error::Malformed("more than two VLAN tags"));
        }
        let rest = bytes
            .get(headers.payload_offset..)
            .ok_or(Error::Truncated)?;
        let tag = Repr::parse(&Tag::new_checked(rest)?)?;
        let th = TaggedHeader { tpid, tag };
        if depth == 0 {
            headers.outer = Some(th);
        } else {
            headers.inner = Some(th);
        }
        headers.ethertype = tag.ethertype;
        headers.payload_offset += TAG_LEN;
        depth += 1;
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    // dst 02:00:00:00:00:02 src 02:00:00:00:00:01, S-tag pcp 5 vid 100,
    // C-tag pcp 3 dei vid 200, IPv4.
    static QINQ: [u8; 24] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xa8, 0xa0, 0x64, 0x81, 0x00, 0x70,
        0xc8, 0x08, 0x00, 0x45, 0x00,
    ];

    #[test]
    fn double_tag() {
        let f = Frame::new_checked(&QINQ[..]).unwrap();
        let h = parse_tags(&f).unwrap();
        let outer = h.outer.unwrap();
        assert_eq!(outer.tpid, EtherType::QinQ);
        assert_eq!(
            (outer.tag.pcp, outer.tag.dei, outer.tag.vlan_id.get()),
            (5, false, 100)
        );
        let inner = h.inner.unwrap();
        assert_eq!(inner.tpid, EtherType::Vlan);
        assert_eq!(
            (inner.tag.pcp, inner.tag.dei, inner.tag.vlan_id.get()),
            (3, true, 200)
        );
        assert_eq!(h.ethertype, EtherType::Ipv4);
        assert_eq!(h.payload_offset, 22);
    }

    #[test]
    fn truncated_tags() {
        for n in 14..22 {
            let f = Frame::new_checked(&QINQ[..n]).unwrap();
            assert_eq!(parse_tags(&f), Err(Error::Truncated), "len {n}");
        }
    }

    #[test]
    fn rejects_third_tag_and_inner_stag() {
        let mut b = QINQ;
        b[20] = 0x81;
        b[21] = 0x00;
        assert!(matches!(
            parse_tags(&Frame::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed(_)) | Err(Error::Truncated)
        ));
        let mut b = QINQ;
        b[16] = 0x88;
        b[17] = 0xa8;
        assert!(matches!(
            parse_tags(&Frame::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn tag_roundtrip() {
        let r = Repr {
            pcp: 7,
            dei: true,
            vlan_id: VlanId::new(4095).unwrap(),
            ethertype: EtherType::Ipv6,
        };
        let mut b = [0u8; 4];
        r.emit(&mut Tag::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(b, [0xff, 0xff, 0x86, 0xdd]);
        assert_eq!(Repr::parse(&Tag::new_checked(&b[..]).unwrap()).unwrap(), r);
        assert!(VlanId::new(4096).is_err());
        let bad = Repr { pcp: 8, ..r };
        assert!(bad.emit(&mut Tag::new_unchecked(&mut b[..])).is_err());
    }
}
