//! MPLS label stacks (RFC 3032), the pseudowire control word (RFC 4385)
//! and Ethernet over MPLS (RFC 4448).
//!
//! A label stack entry ([`Lse`]) is 4 bytes: label (20 bits), traffic
//! class (3), bottom of stack (1), TTL (8). [`Stack`] walks the entries
//! that follow an MPLS EtherType up to the one with the S bit.
//!
//! The frame operations ([`push`], [`pop`], [`swap`], [`eth_encap`],
//! [`eth_decap`]) work **in place** on a frame that sits somewhere inside
//! a larger buffer ([`Span`]): the bytes before the frame are headroom.
//! A push moves only the link-layer header (12 to 22 bytes) into the
//! headroom and writes the new entries behind it; a pop moves the header
//! the other way. The payload never moves unless there is no headroom, in
//! which case the payload is shifted toward the tail room instead (slower,
//! still no allocation). Encapsulating a whole Ethernet frame writes the
//! outer header, the stack and the control word into the headroom only.
//!
//! **No-panic contract:** every function here checks lengths and returns
//! [`Error`] on a short buffer, a span outside the buffer or bad fields.

use crate::{Error, Result};

/// EtherType of MPLS unicast (RFC 5332).
pub const ETHERTYPE_MPLS: u16 = 0x8847;
/// EtherType of MPLS with upstream-assigned / multicast labels (RFC 5332).
pub const ETHERTYPE_MPLS_MULTICAST: u16 = 0x8848;

/// Length of one label stack entry.
pub const LSE_LEN: usize = 4;
/// Length of the pseudowire control word.
pub const CW_LEN: usize = 4;
/// Largest label value (20 bits).
pub const MAX_LABEL: u32 = 0xF_FFFF;
/// Number of label values (the LFIB's key space).
pub const LABEL_SPACE: usize = 1 << 20;
/// Deepest stack [`Stack::new_checked`] walks before calling it malformed
/// (RFC 3032 sets no limit; real stacks carry at most a handful).
pub const MAX_DEPTH: usize = 16;

/// Reserved label values (RFC 3032, RFC 7274 registry).
pub mod reserved {
    /// IPv4 explicit null: pop; what follows is IPv4 (if bottom).
    pub const IPV4_EXPLICIT_NULL: u32 = 0;
    /// Router alert: deliver to the control plane.
    pub const ROUTER_ALERT: u32 = 1;
    /// IPv6 explicit null: pop; what follows is IPv6 (if bottom).
    pub const IPV6_EXPLICIT_NULL: u32 = 2;
    /// Implicit null: signalled only, never on the wire (means "pop" / PHP).
    pub const IMPLICIT_NULL: u32 = 3;
    /// Entropy label indicator (RFC 6790).
    pub const ENTROPY_LABEL_INDICATOR: u32 = 7;
    /// Generic associated channel label (RFC 5586).
    pub const GAL: u32 = 13;
    /// OAM alert (RFC 3429).
    pub const OAM_ALERT: u32 = 14;
    /// Extension label (RFC 7274).
    pub const EXTENSION: u32 = 15;
    /// First label a label manager may allocate.
    pub const FIRST_UNRESERVED: u32 = 16;
}

/// One label stack entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Lse {
    /// Label, 0..=[`MAX_LABEL`].
    pub label: u32,
    /// Traffic class (formerly EXP), 0..=7.
    pub tc: u8,
    /// Bottom of stack.
    pub bos: bool,
    /// Time to live.
    pub ttl: u8,
}

impl Lse {
    /// Decodes a big-endian 32-bit entry (every value is valid).
    #[inline]
    pub const fn from_u32(v: u32) -> Lse {
        Lse {
            label: v >> 12,
            tc: ((v >> 9) & 7) as u8,
            bos: v & 0x100 != 0,
            ttl: v as u8,
        }
    }

    /// Encodes; `Err(Malformed)` if the label or TC is out of range.
    #[inline]
    pub const fn to_u32(self) -> Result<u32> {
        if self.label > MAX_LABEL {
            return Err(Error::Malformed("label above 1048575"));
        }
        if self.tc > 7 {
            return Err(Error::Malformed("traffic class above 7"));
        }
        Ok(self.label << 12 | (self.tc as u32) << 9 | (self.bos as u32) << 8 | self.ttl as u32)
    }

    /// Reads the entry at the start of `b`.
    #[inline]
    pub fn read(b: &[u8]) -> Result<Lse> {
        let w = b.get(..LSE_LEN).ok_or(Error::Truncated)?;
        Ok(Lse::from_u32(u32::from_be_bytes([w[0], w[1], w[2], w[3]])))
    }

    /// Writes the entry at the start of `b`.
    #[inline]
    pub fn write(self, b: &mut [u8]) -> Result<()> {
        let v = self.to_u32()?;
        b.get_mut(..LSE_LEN)
            .ok_or(Error::Truncated)?
            .copy_from_slice(&v.to_be_bytes());
        Ok(())
    }

    /// Whether the label is one of the reserved values 0..=15.
    #[inline]
    pub const fn is_reserved(self) -> bool {
        self.label < reserved::FIRST_UNRESERVED
    }
}

/// Zero-copy view of a label stack: the bytes after an MPLS EtherType,
/// from the top entry to the payload.
///
/// `new_checked` guarantees the stack ends (an entry with the S bit)
/// within the buffer and within [`MAX_DEPTH`] entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack<T: AsRef<[u8]>> {
    buffer: T,
    depth: usize,
}

impl<T: AsRef<[u8]>> Stack<T> {
    /// Walks the stack; `Truncated` if it ends before an S bit,
    /// `Malformed` if deeper than [`MAX_DEPTH`].
    pub fn new_checked(buffer: T) -> Result<Stack<T>> {
        let b = buffer.as_ref();
        let mut depth = 0;
        loop {
            if depth == MAX_DEPTH {
                return Err(Error::Malformed("label stack deeper than 16"));
            }
            let lse = Lse::read(&b[(depth * LSE_LEN).min(b.len())..])?;
            depth += 1;
            if lse.bos {
                return Ok(Stack { buffer, depth });
            }
        }
    }

    /// Number of entries, top to bottom (at least 1).
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Entry `i` (0 = top), `None` past the bottom.
    pub fn get(&self, i: usize) -> Option<Lse> {
        (i < self.depth).then(|| {
            let b = &self.buffer.as_ref()[i * LSE_LEN..];
            Lse::from_u32(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        })
    }

    /// The top entry.
    pub fn top(&self) -> Lse {
        // depth >= 1 by construction.
        self.get(0).unwrap_or_default()
    }

    /// Entries top to bottom.
    pub fn iter(&self) -> impl Iterator<Item = Lse> + '_ {
        (0..self.depth).filter_map(move |i| self.get(i))
    }

    /// Length of the stack in bytes.
    pub fn header_len(&self) -> usize {
        self.depth * LSE_LEN
    }

    /// What follows the bottom entry.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// What a payload below the bottom of stack looks like, from its first
/// nibble (RFC 4928 heuristics: 4 → IPv4, 6 → IPv6, 0 → a pseudowire
/// control word or associated channel, anything else unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadGuess {
    /// First nibble 4.
    Ipv4,
    /// First nibble 6.
    Ipv6,
    /// First nibble 0 (control word) or 1 (associated channel header).
    ControlWord,
    /// Empty or another nibble.
    Unknown,
}

/// Guesses what follows a bottom-of-stack entry.
#[inline]
pub fn guess_payload(payload: &[u8]) -> PayloadGuess {
    match payload.first().map(|b| b >> 4) {
        Some(4) => PayloadGuess::Ipv4,
        Some(6) => PayloadGuess::Ipv6,
        Some(0) | Some(1) => PayloadGuess::ControlWord,
        _ => PayloadGuess::Unknown,
    }
}

/// The pseudowire control word (RFC 4385 "preferred" format; RFC 4448
/// section 4.6 for Ethernet, where flags, FRG and length are sent as 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ControlWord {
    /// Flags (4 bits).
    pub flags: u8,
    /// Fragmentation bits (2 bits).
    pub frg: u8,
    /// Length of a padded short payload (6 bits), 0 otherwise.
    pub length: u8,
    /// Sequence number; 0 = sequencing not used.
    pub seq: u16,
}

impl ControlWord {
    /// Reads a control word; `Malformed` if the first nibble is not 0
    /// (a 1 there is an associated-channel header, RFC 4385 section 3).
    pub fn read(b: &[u8]) -> Result<ControlWord> {
        let w = b.get(..CW_LEN).ok_or(Error::Truncated)?;
        if w[0] >> 4 != 0 {
            return Err(Error::Malformed("control word first nibble not 0"));
        }
        Ok(ControlWord {
            flags: w[0] & 0xf,
            frg: w[1] >> 6,
            length: w[1] & 0x3f,
            seq: u16::from_be_bytes([w[2], w[3]]),
        })
    }

    /// Writes it; `Malformed` if a field is wider than its bits.
    pub fn write(self, b: &mut [u8]) -> Result<()> {
        if self.flags > 0xf || self.frg > 3 || self.length > 0x3f {
            return Err(Error::Malformed("control word field out of range"));
        }
        let w = b.get_mut(..CW_LEN).ok_or(Error::Truncated)?;
        w[0] = self.flags;
        w[1] = self.frg << 6 | self.length;
        w[2..4].copy_from_slice(&self.seq.to_be_bytes());
        Ok(())
    }
}

/// Where a frame sits in its buffer: `buf[start..start + len]`. The bytes
/// before `start` are headroom, those after the end tail room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// Offset of the first byte of the frame (the destination MAC).
    pub start: usize,
    /// Length of the frame.
    pub len: usize,
}

impl Span {
    /// The frame's bytes, or `Truncated` if the span leaves the buffer.
    pub fn of<'a>(&self, buf: &'a [u8]) -> Result<&'a [u8]> {
        buf.get(self.start..self.end()?).ok_or(Error::Truncated)
    }

    /// The frame's bytes, mutable.
    pub fn of_mut<'a>(&self, buf: &'a mut [u8]) -> Result<&'a mut [u8]> {
        let end = self.end()?;
        buf.get_mut(self.start..end).ok_or(Error::Truncated)
    }

    fn end(&self) -> Result<usize> {
        self.start.checked_add(self.len).ok_or(Error::Truncated)
    }
}

/// Length of the link-layer header of an Ethernet frame with `tags` VLAN
/// tags, up to and including the EtherType that introduces the stack.
pub const fn l2_header_len(tags: usize) -> usize {
    14 + 4 * tags
}

/// Makes room for `n` bytes right after the first `hdr` bytes of the
/// frame: the header moves into the headroom if there is enough, else the
/// rest of the frame moves into the tail room.
fn open_gap(buf: &mut [u8], f: Span, hdr: usize, n: usize) -> Result<Span> {
    if hdr > f.len {
        return Err(Error::Truncated);
    }
    let end = f.end()?;
    if end > buf.len() {
        return Err(Error::Truncated);
    }
    if f.start >= n {
        buf.copy_within(f.start..f.start + hdr, f.start - n);
        Ok(Span {
            start: f.start - n,
            len: f.len + n,
        })
    } else if buf.len() - end >= n {
        buf.copy_within(f.start + hdr..end, f.start + hdr + n);
        Ok(Span {
            start: f.start,
            len: f.len + n,
        })
    } else {
        Err(Error::Truncated)
    }
}

/// Pushes `lses` (outermost first, as on the wire) onto the frame whose
/// link-layer header is `hdr` bytes long (see [`l2_header_len`]).
///
/// If the frame is not MPLS yet, the EtherType becomes [`ETHERTYPE_MPLS`]
/// and the last pushed entry gets the S bit; otherwise the pushed entries
/// sit on top of the existing stack with S clear. The `bos` fields of
/// `lses` are ignored. Returns the frame's new span.
pub fn push(buf: &mut [u8], f: Span, hdr: usize, lses: &[Lse]) -> Result<Span> {
    if hdr < 14 || lses.is_empty() {
        return Err(Error::Malformed(
            "push needs a header and at least one entry",
        ));
    }
    for l in lses {
        l.to_u32()?;
    }
    let frame = f.of(buf)?;
    if frame.len() < hdr {
        return Err(Error::Truncated);
    }
    let was_mpls = u16::from_be_bytes([frame[hdr - 2], frame[hdr - 1]]) == ETHERTYPE_MPLS;
    let n = lses.len() * LSE_LEN;
    let g = open_gap(buf, f, hdr, n)?;
    let out = g.of_mut(buf)?;
    out[hdr - 2..hdr].copy_from_slice(&ETHERTYPE_MPLS.to_be_bytes());
    let last = lses.len() - 1;
    for (i, l) in lses.iter().enumerate() {
        let e = Lse {
            bos: i == last && !was_mpls,
            ..*l
        };
        e.write(&mut out[hdr + i * LSE_LEN..])?;
    }
    Ok(g)
}

/// Pops the top `n` entries of the frame's stack (header `hdr` bytes).
///
/// If the bottom entry goes, the EtherType becomes `next_ethertype`
/// (choose it with [`guess_payload`] or from the LFIB action). Popping
/// more entries than the stack has is `Malformed`. The header moves into
/// the freed bytes, so the headroom grows by `4 n`.
pub fn pop(buf: &mut [u8], f: Span, hdr: usize, n: usize, next_ethertype: u16) -> Result<Span> {
    let frame = f.of(buf)?;
    if hdr < 14 || frame.len() < hdr || n == 0 {
        return Err(Error::Malformed(
            "pop needs a header and at least one entry",
        ));
    }
    if u16::from_be_bytes([frame[hdr - 2], frame[hdr - 1]]) != ETHERTYPE_MPLS {
        return Err(Error::Malformed("pop on a frame that is not MPLS"));
    }
    let st = Stack::new_checked(&frame[hdr..])?;
    if n > st.depth() {
        return Err(Error::Malformed("pop below the bottom of stack"));
    }
    let bottom_gone = n == st.depth();
    let cut = n * LSE_LEN;
    buf.copy_within(f.start..f.start + hdr, f.start + cut);
    let g = Span {
        start: f.start + cut,
        len: f.len - cut,
    };
    if bottom_gone {
        let out = g.of_mut(buf)?;
        out[hdr - 2..hdr].copy_from_slice(&next_ethertype.to_be_bytes());
    }
    Ok(g)
}

/// Rewrites the top entry's label, TC and TTL in place (S bit kept).
pub fn swap(frame: &mut [u8], hdr: usize, label: u32, tc: u8, ttl: u8) -> Result<()> {
    let b = frame.get_mut(hdr..).ok_or(Error::Truncated)?;
    let old = Lse::read(b)?;
    Lse {
        label,
        tc,
        bos: old.bos,
        ttl,
    }
    .write(b)
}

/// The outer Ethernet header of an Ethernet-over-MPLS packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OuterHeader {
    /// Next hop's MAC.
    pub dst: [u8; 6],
    /// Our egress port's MAC.
    pub src: [u8; 6],
    /// An 802.1Q tag on the uplink (TCI: PCP, DEI, VID), if any.
    pub vlan_tci: Option<u16>,
}

impl OuterHeader {
    /// Header length including the MPLS EtherType.
    pub const fn len(&self) -> usize {
        if self.vlan_tci.is_some() {
            18
        } else {
            14
        }
    }

    /// Never empty (kept for clippy's `len_without_is_empty`).
    pub const fn is_empty(&self) -> bool {
        false
    }
}

/// Encapsulates the whole Ethernet frame at `f` (customer MACs first, no
/// FCS) as an RFC 4448 pseudowire packet: `outer`, the label stack `lses`
/// (outermost first; the last — the pseudowire label — gets the S bit),
/// then the control word if `cw` is given. Everything is written into the
/// headroom, which must hold `outer.len() + 4·lses + (4 if cw)` bytes.
pub fn eth_encap(
    buf: &mut [u8],
    f: Span,
    outer: &OuterHeader,
    lses: &[Lse],
    cw: Option<ControlWord>,
) -> Result<Span> {
    f.of(buf)?;
    if lses.is_empty() {
        return Err(Error::Malformed("pseudowire needs at least its own label"));
    }
    let add = outer.len() + lses.len() * LSE_LEN + if cw.is_some() { CW_LEN } else { 0 };
    if f.start < add {
        return Err(Error::Truncated);
    }
    let start = f.start - add;
    let h = &mut buf[start..f.start];
    h[0..6].copy_from_slice(&outer.dst);
    h[6..12].copy_from_slice(&outer.src);
    let mut o = 12;
    if let Some(tci) = outer.vlan_tci {
        h[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        h[14..16].copy_from_slice(&tci.to_be_bytes());
        o = 16;
    }
    h[o..o + 2].copy_from_slice(&ETHERTYPE_MPLS.to_be_bytes());
    o += 2;
    let last = lses.len() - 1;
    for (i, l) in lses.iter().enumerate() {
        Lse {
            bos: i == last,
            ..*l
        }
        .write(&mut h[o..])?;
        o += LSE_LEN;
    }
    if let Some(c) = cw {
        c.write(&mut h[o..])?;
    }
    Ok(Span {
        start,
        len: f.len + add,
    })
}

/// A decapsulated Ethernet pseudowire payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthDecap {
    /// The customer frame inside the buffer.
    pub inner: Span,
    /// The control word, when the pseudowire uses one.
    pub cw: Option<ControlWord>,
}

/// Finds the customer frame of an RFC 4448 packet whose stack ends `off`
/// bytes into the frame (after the bottom entry). With `cw`, a control
/// word must come first. The inner frame must hold at least an Ethernet
/// header. Nothing is copied: the inner span points into the buffer.
pub fn eth_decap(buf: &[u8], f: Span, off: usize, cw: bool) -> Result<EthDecap> {
    let frame = f.of(buf)?;
    let rest = frame.get(off..).ok_or(Error::Truncated)?;
    let (cw, skip) = if cw {
        (Some(ControlWord::read(rest)?), CW_LEN)
    } else {
        (None, 0)
    };
    let inner_len = rest.len() - skip.min(rest.len());
    if inner_len < 14 {
        return Err(Error::Truncated);
    }
    Ok(EthDecap {
        inner: Span {
            start: f.start + off + skip,
            len: inner_len,
        },
        cw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_frame(buf: &mut [u8], start: usize) -> Span {
        let f = &mut buf[start..start + 34];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[22] = 64;
        Span { start, len: 34 }
    }

    #[test]
    fn lse_round_trip() {
        let e = Lse {
            label: 0xABCDE,
            tc: 5,
            bos: true,
            ttl: 63,
        };
        assert_eq!(e.to_u32().unwrap(), 0xABCD_EB3F);
        assert_eq!(Lse::from_u32(0xABCD_EB3F), e);
        assert!(Lse {
            label: 1 << 20,
            ..e
        }
        .to_u32()
        .is_err());
        assert!(Lse { tc: 8, ..e }.to_u32().is_err());
        assert_eq!(Lse::read(&[1, 2, 3]), Err(Error::Truncated));
    }

    #[test]
    fn stack_walk() {
        let b = [0, 1, 0x0a, 64, 0, 2, 0x0b, 63, 0x45];
        let s = Stack::new_checked(&b[..]).unwrap();
        assert_eq!(s.depth(), 2);
        assert_eq!(s.top().label, 16);
        assert_eq!(s.get(1).unwrap().label, 32);
        assert!(s.get(1).unwrap().bos && !s.top().bos);
        assert_eq!(s.payload(), &[0x45]);
        assert_eq!(guess_payload(s.payload()), PayloadGuess::Ipv4);
        assert_eq!(
            Stack::new_checked(&b[..7]).map(|s| s.depth()),
            Err(Error::Truncated)
        );
        let deep = [0u8; 4 * 17];
        assert!(matches!(
            Stack::new_checked(&deep[..]),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn push_pop_with_headroom_moves_only_the_header() {
        let mut buf = [0u8; 128];
        let f = ipv4_frame(&mut buf, 64);
        let payload: Vec<u8> = buf[78..98].to_vec();
        let l = |label| Lse {
            label,
            tc: 1,
            bos: false,
            ttl: 9,
        };
        let g = push(&mut buf, f, 14, &[l(100), l(200)]).unwrap();
        assert_eq!(g, Span { start: 56, len: 42 });
        let fr = g.of(&buf).unwrap();
        assert_eq!(&fr[12..14], &[0x88, 0x47]);
        let st = Stack::new_checked(&fr[14..]).unwrap();
        assert_eq!(st.iter().map(|e| e.label).collect::<Vec<_>>(), [100, 200]);
        assert!(st.get(1).unwrap().bos && !st.top().bos);
        assert_eq!(&buf[78..98], &payload[..], "payload untouched");
        // A third on top keeps S clear.
        let g = push(&mut buf, g, 14, &[l(300)]).unwrap();
        let st = Stack::new_checked(&g.of(&buf).unwrap()[14..]).unwrap();
        assert_eq!(st.depth(), 3);
        assert!(!st.top().bos);
        swap(g.of_mut(&mut buf).unwrap(), 14, 301, 7, 1).unwrap();
        let g = pop(&mut buf, g, 14, 1, 0).unwrap();
        let st = Stack::new_checked(&g.of(&buf).unwrap()[14..]).unwrap();
        assert_eq!(st.top().label, 100);
        let g = pop(&mut buf, g, 14, 2, 0x0800).unwrap();
        assert_eq!(g, f);
        assert_eq!(&g.of(&buf).unwrap()[12..14], &[0x08, 0x00]);
        assert_eq!(&buf[78..98], &payload[..]);
        assert!(pop(&mut buf, g, 14, 1, 0).is_err(), "not MPLS");
    }

    #[test]
    fn push_without_headroom_uses_tail_room() {
        let mut buf = [0u8; 40];
        let f = ipv4_frame(&mut buf, 0);
        let g = push(
            &mut buf,
            f,
            14,
            &[Lse {
                label: 17,
                ..Lse::default()
            }],
        )
        .unwrap();
        assert_eq!(g, Span { start: 0, len: 38 });
        assert_eq!(buf[18], 0x45);
        assert_eq!(
            push(&mut buf, g, 14, &[Lse::default(), Lse::default()]),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn vlan_tagged_header() {
        let mut buf = [0u8; 96];
        let f = ipv4_frame(&mut buf, 40);
        // Make it tagged: header 18 bytes.
        let g = open_gap(&mut buf, f, 12, 4).unwrap();
        buf[g.start + 12..g.start + 16].copy_from_slice(&[0x81, 0, 0, 10]);
        let h = push(
            &mut buf,
            g,
            l2_header_len(1),
            &[Lse {
                label: 99,
                ..Lse::default()
            }],
        )
        .unwrap();
        let fr = h.of(&buf).unwrap();
        assert_eq!(&fr[12..18], &[0x81, 0, 0, 10, 0x88, 0x47]);
        assert_eq!(Lse::read(&fr[18..]).unwrap().label, 99);
        assert_eq!(fr[22], 0x45);
    }

    #[test]
    fn ethernet_pseudowire_round_trip() {
        let mut buf = [0u8; 160];
        let f = ipv4_frame(&mut buf, 64);
        let inner: Vec<u8> = f.of(&buf).unwrap().to_vec();
        let outer = OuterHeader {
            dst: [0xaa; 6],
            src: [0xbb; 6],
            vlan_tci: None,
        };
        let lses = [
            Lse {
                label: 1000,
                tc: 0,
                bos: false,
                ttl: 255,
            },
            Lse {
                label: 2000,
                tc: 0,
                bos: false,
                ttl: 255,
            },
        ];
        let cw = ControlWord {
            seq: 7,
            ..ControlWord::default()
        };
        let g = eth_encap(&mut buf, f, &outer, &lses, Some(cw)).unwrap();
        assert_eq!(g.len, 34 + 14 + 8 + 4);
        let fr = g.of(&buf).unwrap();
        let st = Stack::new_checked(&fr[14..]).unwrap();
        assert_eq!(st.depth(), 2);
        assert_eq!(guess_payload(st.payload()), PayloadGuess::ControlWord);
        let d = eth_decap(&buf, g, 14 + st.header_len(), true).unwrap();
        assert_eq!(d.cw, Some(cw));
        assert_eq!(d.inner, f);
        assert_eq!(d.inner.of(&buf).unwrap(), &inner[..]);
        // Without control word, and too little headroom.
        let g2 = eth_encap(&mut buf, f, &outer, &lses[1..], None).unwrap();
        assert_eq!(
            eth_decap(&buf, g2, 18, false)
                .unwrap()
                .inner
                .of(&buf)
                .unwrap(),
            &inner[..]
        );
        assert_eq!(
            eth_encap(&mut buf, Span { start: 10, len: 34 }, &outer, &lses, None),
            Err(Error::Truncated)
        );
        // An associated channel (first nibble 1) is not a control word.
        buf[g.start + 22] = 0x10;
        assert!(eth_decap(&buf, g, 22, true).is_err());
    }

    #[test]
    fn bad_spans_are_errors() {
        let mut buf = [0u8; 20];
        let far = Span { start: 10, len: 30 };
        assert!(push(&mut buf, far, 14, &[Lse::default()]).is_err());
        assert!(pop(&mut buf, far, 14, 1, 0).is_err());
        let huge = Span {
            start: usize::MAX,
            len: 2,
        };
        assert!(huge.of(&buf).is_err());
        assert!(eth_decap(&buf, huge, 0, false).is_err());
    }
}
