//! IPv6 (RFC 8200) and its extension-header walk.
//!
//! [`Packet`] views the fixed 40-byte header; [`Packet::ext_headers`] walks
//! hop-by-hop, routing, fragment, destination-options and AH headers and
//! [`Packet::upper_layer`] finds the upper-layer protocol and its offset.
//! [`Repr`] is the fixed header only.
//!
//! Walk rules: hop-by-hop options only directly after the fixed header
//! (RFC 8200 section 4.1); at most [`MAX_EXT_HEADERS`] headers; the walk
//! stops at ESP (encrypted), "no next header", any non-extension protocol,
//! and at a fragment header whose offset is not zero (what follows is
//! fragment data, not headers).
//!
//! **No-panic contract:** once [`Packet::new_checked`] has succeeded, no
//! accessor or setter of that packet panics, and the extension-header walk
//! returns `Err` instead of reading past the payload.

use std::net::Ipv6Addr;

use crate::ip::{Dscp, Ecn, IpProtocol};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// Most extension headers the walk accepts before giving up (`Malformed`).
pub const MAX_EXT_HEADERS: usize = 16;

/// Zero-copy view of an IPv6 packet.
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

    /// Checks version 6 and `40 + payload_len <= buffer`. Trailing bytes
    /// (Ethernet padding) are allowed and ignored. Jumbograms (payload
    /// length 0 with a jumbo option) are not supported: the payload is empty.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed("IPv6 version is not 6"));
        }
        if len < HEADER_LEN + usize::from(self.payload_len()) {
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

    fn first_word(&self) -> u32 {
        let b = &self.b()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Version field (6 after `new_checked`).
    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }

    /// Traffic class byte.
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// DSCP from the traffic class.
    pub fn dscp(&self) -> Dscp {
        Dscp::from_tos(self.traffic_class())
    }

    /// ECN from the traffic class.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }

    /// 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header, ext headers included).
    pub fn payload_len(&self) -> u16 {
        let b = &self.b()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Next header after the fixed header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.b()[field::NXT_HDR])
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::SRC_ADDR]);
        Ipv6Addr::from(a)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[field::DST_ADDR]);
        Ipv6Addr::from(a)
    }

    /// Payload (`payload_len` bytes after the fixed header).
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// Iterator over the extension headers.
    pub fn ext_headers(&self) -> ExtHeaders<'_> {
        ExtHeaders::new(self.next_header(), self.payload())
    }

    /// Walks the extension headers and returns the upper-layer protocol
    /// and its offset from the start of the IPv6 header.
    pub fn upper_layer(&self) -> Result<UpperLayer> {
        self.ext_headers().upper_layer()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    fn set_first_word(&mut self, v: u32) {
        self.bm()[field::VER_TC_FLOW].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the version (low 4 bits used).
    pub fn set_version(&mut self, v: u8) {
        let w = (self.first_word() & 0x0fff_ffff) | (u32::from(v & 0xf) << 28);
        self.set_first_word(w);
    }

    /// Sets the traffic class byte.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = (self.first_word() & 0xf00f_ffff) | (u32::from(tc) << 20);
        self.set_first_word(w);
    }

    /// Sets DSCP (IPv6 has no header checksum to update).
    pub fn set_dscp(&mut self, d: Dscp) {
        let tc = (self.traffic_class() & 0x03) | (d.get() << 2);
        self.set_traffic_class(tc);
    }

    /// Sets ECN.
    pub fn set_ecn(&mut self, e: Ecn) {
        let tc = (self.traffic_class() & 0xfc) | e.bits();
        self.set_traffic_class(tc);
    }

    /// Sets the flow label (low 20 bits used).
    pub fn set_flow_label(&mut self, f: u32) {
        let w = (self.first_word() & 0xfff0_0000) | (f & 0x000f_ffff);
        self.set_first_word(w);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        self.bm()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.bm()[field::NXT_HDR] = p.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.bm()[field::HOP_LIMIT] = v;
    }

    /// Decrements the hop limit; `Err(Malformed)` (unchanged) if it is 0.
    pub fn decrement_hop_limit(&mut self) -> Result<u8> {
        match self.hop_limit().checked_sub(1) {
            Some(h) => {
                self.set_hop_limit(h);
                Ok(h)
            }
            None => Err(Error::Malformed("IPv6 hop limit already 0")),
        }
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.bm()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.bm()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.bm()[HEADER_LEN..end]
    }
}

/// Contents of a fragment header (RFC 8200 section 4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fragment {
    /// Fragment offset in 8-byte units.
    pub offset: u16,
    /// M flag.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl Fragment {
    /// True for the first fragment (offset 0), the only one with the
    /// upper-layer header.
    pub fn is_first(&self) -> bool {
        self.offset == 0
    }
}

/// One extension header found by the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtHeader<'a> {
    /// Which header this is (HopByHop, Ipv6Route, Ipv6Frag, Ipv6Opts, Ah).
    pub kind: IpProtocol,
    /// Offset of this header from the start of the IPv6 header.
    pub offset: usize,
    /// Its next-header field.
    pub next_header: IpProtocol,
    /// The whole header, next-header byte included.
    pub data: &'a [u8],
}

impl ExtHeader<'_> {
    /// Fragment fields, when this is a fragment header.
    pub fn fragment(&self) -> Option<Fragment> {
        if self.kind != IpProtocol::Ipv6Frag || self.data.len() < 8 {
            return None;
        }
        let d = self.data;
        let off = u16::from_be_bytes([d[2], d[3]]);
        Some(Fragment {
            offset: off >> 3,
            more_frags: off & 1 != 0,
            ident: u32::from_be_bytes([d[4], d[5], d[6], d[7]]),
        })
    }

    /// Option bytes (after next-header and length) of hop-by-hop and
    /// destination-options headers; the type-specific data otherwise.
    pub fn body(&self) -> &[u8] {
        self.data.get(2..).unwrap_or(&[])
    }
}

/// Where the upper-layer header starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpperLayer {
    /// Upper-layer protocol (also ESP or "no next header" when the walk
    /// stopped there).
    pub protocol: IpProtocol,
    /// Offset from the start of the IPv6 header.
    pub offset: usize,
    /// Number of extension headers walked.
    pub ext_count: usize,
    /// The fragment header, if one was seen. When `!is_first()`, `offset`
    /// points at fragment data, not at a header of `protocol`.
    pub fragment: Option<Fragment>,
}

/// Iterator over extension headers; yields `Err` once and then stops if a
/// header is truncated or misplaced.
#[derive(Debug, Clone)]
pub struct ExtHeaders<'a> {
    payload: &'a [u8],
    next: IpProtocol,
    pos: usize,
    count: usize,
    fragment: Option<Fragment>,
    done: bool,
}

fn is_ext(p: IpProtocol) -> bool {
    matches!(
        p,
        IpProtocol::HopByHop
            | IpProtocol::Ipv6Route
            | IpProtocol::Ipv6Frag
            | IpProtocol::Ipv6Opts
            | IpProtocol::Ah
    )
}

impl<'a> ExtHeaders<'a> {
    /// Walks `payload` (bytes after the fixed header) starting with `first`.
    pub fn new(first: IpProtocol, payload: &'a [u8]) -> ExtHeaders<'a> {
        ExtHeaders {
            payload,
            next: first,
            pos: 0,
            count: 0,
            fragment: None,
            done: false,
        }
    }

    fn step(&mut self) -> Result<Option<ExtHeader<'a>>> {
        if self.done || !is_ext(self.next) {
            return Ok(None);
        }
        if let Some(f) = self.fragment {
            if !f.is_first() {
                return Ok(None);
            }
        }
        if self.next == IpProtocol::HopByHop && self.pos != 0 {
            return Err(Error::Malformed("IPv6 hop-by-hop header not first"));
        }
        if self.count >= MAX_EXT_HEADERS {
            return Err(Error::Malformed("too many IPv6 extension headers"));
        }
        let rest = self.payload.get(self.pos..).ok_or(Error::Truncated)?;
        if rest.len() < 2 {
            return Err(Error::Truncated);
        }
        let len = match self.next {
            // RFC 8200 section 4.5: fixed 8 bytes (the length byte is reserved).
            IpProtocol::Ipv6Frag => 8,
            // RFC 4302 section 2.2: length in 4-octet units minus 2.
            IpProtocol::Ah => (usize::from(rest[1]) + 2) * 4,
            // RFC 8200 sections 4.3, 4.4, 4.6: 8-octet units, not counting the first 8.
            _ => (usize::from(rest[1]) + 1) * 8,
        };
        let data = rest.get(..len).ok_or(Error::Truncated)?;
        let h = ExtHeader {
            kind: self.next,
            offset: HEADER_LEN + self.pos,
            next_header: IpProtocol::from(data[0]),
            data,
        };
        if let Some(f) = h.fragment() {
            if self.fragment.is_some() {
                return Err(Error::Malformed("two IPv6 fragment headers"));
            }
            self.fragment = Some(f);
        }
        self.pos += len;
        self.count += 1;
        self.next = h.next_header;
        Ok(Some(h))
    }

    /// Finishes the walk and reports the upper layer.
    pub fn upper_layer(mut self) -> Result<UpperLayer> {
        for h in &mut self {
            h?;
        }
        Ok(UpperLayer {
            protocol: self.next,
            offset: HEADER_LEN + self.pos,
            ext_count: self.count,
            fragment: self.fragment,
        })
    }
}

impl<'a> Iterator for ExtHeaders<'a> {
    type Item = Result<ExtHeader<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step() {
            Ok(Some(h)) => Some(Ok(h)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Parsed fixed IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header after the fixed header.
    pub next_header: IpProtocol,
    /// Payload length (ext headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// DSCP.
    pub dscp: Dscp,
    /// ECN.
    pub ecn: Ecn,
    /// Flow label (0..=0xfffff).
    pub flow_label: u32,
}

impl Repr {
    /// Parses the fixed header of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: usize::from(p.payload_len()),
            hop_limit: p.hop_limit(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            flow_label: p.flow_label(),
        })
    }

    /// Always 40.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header; the payload is left alone.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        if p.b().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = u16::try_from(self.payload_len)
            .map_err(|_| Error::Malformed("IPv6 payload longer than 65535"))?;
        if self.flow_label > 0xfffff {
            return Err(Error::Malformed("IPv6 flow label above 20 bits"));
        }
        p.set_first_word(0x6000_0000);
        p.set_traffic_class((self.dscp.get() << 2) | self.ecn.bits());
        p.set_flow_label(self.flow_label);
        p.set_payload_len(len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_exts(exts: &[u8], first: u8) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_LEN];
        b[0] = 0x60;
        b[4..6].copy_from_slice(&(exts.len() as u16).to_be_bytes());
        b[6] = first;
        b[7] = 64;
        b.extend_from_slice(exts);
        b
    }

    #[test]
    fn walk_all_kinds() {
        let mut e = Vec::new();
        e.extend_from_slice(&[43, 0, 1, 0, 0, 0, 0, 0]); // hop-by-hop, 8 bytes, next routing
        e.extend_from_slice(&[44, 0, 0, 0, 0, 0, 0, 0]); // routing, next fragment
        e.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 42]); // fragment first, next dst opts
        e.extend_from_slice(&[51, 1, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 0, 0]); // dst opts 16
        e.extend_from_slice(&[17, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // AH, 12 bytes, next UDP
        e.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]); // UDP
        let b = with_exts(&e, 0);
        let p = Packet::new_checked(&b[..]).unwrap();
        let kinds: Vec<_> = p.ext_headers().map(|h| h.unwrap().kind).collect();
        assert_eq!(
            kinds,
            [
                IpProtocol::HopByHop,
                IpProtocol::Ipv6Route,
                IpProtocol::Ipv6Frag,
                IpProtocol::Ipv6Opts,
                IpProtocol::Ah
            ]
        );
        let u = p.upper_layer().unwrap();
        assert_eq!(u.protocol, IpProtocol::Udp);
        assert_eq!(u.offset, 40 + 8 + 8 + 8 + 16 + 12);
        assert_eq!(u.ext_count, 5);
        assert_eq!(
            u.fragment,
            Some(Fragment {
                offset: 0,
                more_frags: false,
                ident: 42
            })
        );
        // Every truncation of the ext-header chain is rejected.
        for cut in 0..e.len() - 8 {
            let b = with_exts(&e[..cut], 0);
            let p = Packet::new_checked(&b[..]).unwrap();
            assert_eq!(p.upper_layer(), Err(Error::Truncated), "cut {cut}");
        }
    }

    #[test]
    fn hop_by_hop_must_be_first() {
        let e = [0u8, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0];
        let b = with_exts(&e, 60);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(matches!(p.upper_layer(), Err(Error::Malformed(_))));
    }

    #[test]
    fn later_fragment_stops_walk() {
        let e = [60u8, 0, 0x00, 0x09, 0, 0, 0, 7, 17, 0, 0, 0, 0, 0, 0, 0];
        let b = with_exts(&e, 44);
        let u = Packet::new_checked(&b[..]).unwrap().upper_layer().unwrap();
        assert_eq!(u.protocol, IpProtocol::Ipv6Opts);
        assert_eq!(u.offset, 48);
        let f = u.fragment.unwrap();
        assert!(!f.is_first() && f.more_frags && f.offset == 1 && f.ident == 7);
    }

    #[test]
    fn long_chain_is_bounded() {
        let mut e = Vec::new();
        for _ in 0..40 {
            e.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]);
        }
        let b = with_exts(&e, 60);
        assert!(matches!(
            Packet::new_checked(&b[..]).unwrap().upper_layer(),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn fixed_header_roundtrip() {
        let b = with_exts(&[59, 0, 0, 0, 0, 0, 0, 0], 60);
        let p = Packet::new_checked(&b[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        let mut out = vec![0u8; 40];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b[..40]);
        assert_eq!(p.upper_layer().unwrap().protocol, IpProtocol::Ipv6NoNxt);
        for n in 0..b.len() {
            assert!(Packet::new_checked(&b[..n]).is_err());
        }
    }
}
