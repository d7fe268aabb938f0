//! Hand-written Ethernet frame builders and parsers for tests.
//!
//! Independent of Lanyard's `wire` crate on purpose. A *test frame* carries
//! EtherType 0x88b5 (IEEE 802 "local experimental", IEEE Std 802-2014 §9.2.2)
//! followed by [`MAGIC`], a 32-bit *phase* and a 64-bit *sequence number*;
//! the rest of the payload is a pattern derived from the sequence number, so
//! a received frame can be checked byte for byte. Anything else on the wire
//! (kernel chatter) is not a test frame and is never counted.

use std::fmt::Write as _;

/// A MAC address.
pub type Mac = [u8; 6];

/// Broadcast address.
pub const BROADCAST: Mac = [0xff; 6];

/// EtherType of test frames (local experimental 1).
pub const ETHERTYPE_TEST: u16 = 0x88b5;
/// 802.1Q customer tag TPID.
pub const TPID_8021Q: u16 = 0x8100;
/// 802.1ad service tag TPID.
pub const TPID_8021AD: u16 = 0x88a8;
/// Magic bytes that start every test payload.
pub const MAGIC: [u8; 8] = *b"LNYDtst!";
/// Smallest frame the builders produce (Ethernet minimum without FCS).
pub const MIN_FRAME: usize = 60;

/// Length of the test header after the EtherType: magic, phase, seq.
const TEST_HDR: usize = 8 + 4 + 8;

/// A locally administered unicast MAC made from an index:
/// `02:4c:<i as 4 bytes big-endian>`. Distinct for distinct `i`.
pub fn mac(i: u32) -> Mac {
    let b = i.to_be_bytes();
    [0x02, 0x4c, b[0], b[1], b[2], b[3]]
}

/// Like [`mac`] with a different second byte, for a separate address space
/// (e.g. sender or "unknown" addresses that must never collide with
/// [`mac`]-generated ones).
pub fn mac_in(space: u8, i: u32) -> Mac {
    let b = i.to_be_bytes();
    [0x02, space, b[0], b[1], b[2], b[3]]
}

/// Formats a MAC as `02:00:00:00:00:01`.
pub fn mac_str(m: &Mac) -> String {
    let mut s = String::with_capacity(17);
    for (i, b) in m.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Parses `02:00:00:00:00:01` (also accepts `-` separators, any case).
pub fn parse_mac(s: &str) -> Option<Mac> {
    let mut m = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for b in m.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(m)
}

/// A VLAN tag as it appears on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    /// 0x8100 (C-tag) or 0x88a8 (S-tag), or anything for malformed tests.
    pub tpid: u16,
    /// VLAN id, 12 bits.
    pub vid: u16,
    /// Priority code point, 3 bits.
    pub pcp: u8,
}

impl Tag {
    /// An 802.1Q C-tag with priority 0.
    pub fn dot1q(vid: u16) -> Tag {
        Tag {
            tpid: TPID_8021Q,
            vid,
            pcp: 0,
        }
    }
    /// An 802.1ad S-tag with priority 0.
    pub fn dot1ad(vid: u16) -> Tag {
        Tag {
            tpid: TPID_8021AD,
            vid,
            pcp: 0,
        }
    }
    fn tci(&self) -> u16 {
        (u16::from(self.pcp & 7) << 13) | (self.vid & 0x0fff)
    }
}

/// Appends an Ethernet header with `tags` (outermost first) and `ethertype`.
pub fn push_header(buf: &mut Vec<u8>, dst: &Mac, src: &Mac, tags: &[Tag], ethertype: u16) {
    buf.extend_from_slice(dst);
    buf.extend_from_slice(src);
    for t in tags {
        buf.extend_from_slice(&t.tpid.to_be_bytes());
        buf.extend_from_slice(&t.tci().to_be_bytes());
    }
    buf.extend_from_slice(&ethertype.to_be_bytes());
}

/// Builds an Ethernet frame with arbitrary payload (no padding added).
pub fn build(dst: &Mac, src: &Mac, tags: &[Tag], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(14 + 4 * tags.len() + payload.len());
    push_header(&mut v, dst, src, tags, ethertype);
    v.extend_from_slice(payload);
    v
}

/// Writes a test frame into `buf` (cleared first): header, magic, phase,
/// seq, then the pattern byte `(seq + k) as u8` (k counted from the end of
/// the test header, so adding or removing tags does not change it) up to
/// `len` bytes in total (at least [`MIN_FRAME`] and enough for the header).
pub fn write_test_frame(
    buf: &mut Vec<u8>,
    dst: &Mac,
    src: &Mac,
    tags: &[Tag],
    phase: u32,
    seq: u64,
    len: usize,
) {
    buf.clear();
    push_header(buf, dst, src, tags, ETHERTYPE_TEST);
    buf.extend_from_slice(&MAGIC);
    buf.extend_from_slice(&phase.to_be_bytes());
    buf.extend_from_slice(&seq.to_be_bytes());
    let len = len.max(MIN_FRAME).max(buf.len());
    let start = buf.len();
    buf.extend((0..len - start).map(|off| (seq as usize).wrapping_add(off) as u8));
}

/// A test frame of total length `len` (see [`write_test_frame`]).
pub fn test_frame(dst: &Mac, src: &Mac, tags: &[Tag], phase: u32, seq: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(MIN_FRAME));
    write_test_frame(&mut v, dst, src, tags, phase, seq, len);
    v
}

/// A frame decoded down to the first non-VLAN EtherType.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// Destination MAC.
    pub dst: Mac,
    /// Source MAC.
    pub src: Mac,
    /// VLAN tags (TPID 0x8100, 0x88a8 or 0x9100), outermost first.
    pub tags: Vec<Tag>,
    /// The EtherType after the tags.
    pub ethertype: u16,
    /// Offset of the payload after the EtherType.
    pub payload_offset: usize,
}

/// Decodes the Ethernet header and VLAN tags; `None` if truncated.
pub fn parse(f: &[u8]) -> Option<Parsed> {
    if f.len() < 14 {
        return None;
    }
    let mut dst = [0u8; 6];
    let mut src = [0u8; 6];
    dst.copy_from_slice(&f[0..6]);
    src.copy_from_slice(&f[6..12]);
    let mut off = 12;
    let mut tags = Vec::new();
    loop {
        let et = u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]);
        if matches!(et, TPID_8021Q | TPID_8021AD | 0x9100) {
            let tci = u16::from_be_bytes([*f.get(off + 2)?, *f.get(off + 3)?]);
            tags.push(Tag {
                tpid: et,
                vid: tci & 0x0fff,
                pcp: (tci >> 13) as u8,
            });
            off += 4;
        } else {
            return Some(Parsed {
                dst,
                src,
                tags,
                ethertype: et,
                payload_offset: off + 2,
            });
        }
    }
}

/// What identifies a received test frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestInfo {
    /// Destination MAC.
    pub dst: Mac,
    /// Source MAC.
    pub src: Mac,
    /// Phase number written by the sender.
    pub phase: u32,
    /// Sequence number written by the sender.
    pub seq: u64,
    /// Number of VLAN tags in front of the test EtherType.
    pub tags: usize,
}

/// Recognises a test frame (any number of tags), cheaply, without
/// allocating; `None` for everything else.
pub fn test_info(f: &[u8]) -> Option<TestInfo> {
    let mut off = 12;
    let mut tags = 0;
    loop {
        let et = u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]);
        match et {
            TPID_8021Q | TPID_8021AD | 0x9100 => {
                off += 4;
                tags += 1;
            }
            ETHERTYPE_TEST => break,
            _ => return None,
        }
    }
    let p = f.get(off + 2..off + 2 + TEST_HDR)?;
    if p[0..8] != MAGIC {
        return None;
    }
    let mut dst = [0u8; 6];
    let mut src = [0u8; 6];
    dst.copy_from_slice(&f[0..6]);
    src.copy_from_slice(&f[6..12]);
    Some(TestInfo {
        dst,
        src,
        phase: u32::from_be_bytes(p[8..12].try_into().ok()?),
        seq: u64::from_be_bytes(p[12..20].try_into().ok()?),
        tags,
    })
}

/// Hex dump of the first `max` bytes, for assertion messages.
pub fn hex(f: &[u8], max: usize) -> String {
    let mut s = String::new();
    for (i, b) in f.iter().take(max).enumerate() {
        if i > 0 && i % 2 == 0 {
            s.push(' ');
        }
        let _ = write!(s, "{b:02x}");
    }
    if f.len() > max {
        let _ = write!(s, " ... ({} bytes)", f.len());
    }
    s
}

/// One MPLS label stack entry: label, bottom of stack, TTL.
pub type Lse = (u32, bool, u8);

/// The label stack of an untagged MPLS unicast frame and what follows it
/// (`None`: not MPLS unicast, or the stack runs past the frame).
pub fn mpls_labels(f: &[u8]) -> Option<(Vec<Lse>, &[u8])> {
    if f.len() < 18 || f[12..14] != [0x88, 0x47] {
        return None;
    }
    let mut out = Vec::new();
    let mut at = 14;
    loop {
        let w = u32::from_be_bytes(f.get(at..at + 4)?.try_into().ok()?);
        let s = w >> 8 & 1 == 1;
        out.push((w >> 12, s, (w & 0xff) as u8));
        at += 4;
        if s {
            return Some((out, &f[at..]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_roundtrip() {
        let m = mac(0x01020304);
        assert_eq!(mac_str(&m), "02:4c:01:02:03:04");
        assert_eq!(parse_mac("02:4C:01:02:03:04"), Some(m));
        assert_eq!(parse_mac("02:4c:01:02:03"), None);
        assert_eq!(parse_mac("02:4c:01:02:03:04:05"), None);
        assert_ne!(mac(1), mac_in(0x4d, 1));
    }

    #[test]
    fn test_frame_layout() {
        let f = test_frame(
            &BROADCAST,
            &mac(7),
            &[Tag::dot1ad(500), Tag::dot1q(100)],
            3,
            42,
            64,
        );
        assert_eq!(f.len(), 64);
        assert_eq!(&f[12..14], &[0x88, 0xa8]);
        assert_eq!(&f[14..16], &[0x01, 0xf4]);
        assert_eq!(&f[16..18], &[0x81, 0x00]);
        assert_eq!(&f[18..20], &[0x00, 0x64]);
        assert_eq!(&f[20..22], &[0x88, 0xb5]);
        let p = parse(&f).unwrap();
        assert_eq!(p.tags, vec![Tag::dot1ad(500), Tag::dot1q(100)]);
        assert_eq!(p.ethertype, ETHERTYPE_TEST);
        let i = test_info(&f).unwrap();
        assert_eq!((i.phase, i.seq, i.tags, i.src), (3, 42, 2, mac(7)));
        // The payload does not depend on the tags in front of it.
        let big = test_frame(
            &BROADCAST,
            &mac(7),
            &[Tag::dot1ad(500), Tag::dot1q(100)],
            3,
            42,
            100,
        );
        let g = test_frame(&BROADCAST, &mac(7), &[], 3, 42, 92);
        assert_eq!(g[12..], big[20..]);
        // Short requests are padded to the minimum.
        assert_eq!(
            test_frame(&BROADCAST, &mac(1), &[], 0, 0, 10).len(),
            MIN_FRAME
        );
    }

    #[test]
    fn rejects_non_test_and_truncated() {
        let f = build(&BROADCAST, &mac(1), &[], 0x86dd, &[0; 50]);
        assert!(test_info(&f).is_none());
        let t = test_frame(&BROADCAST, &mac(1), &[Tag::dot1q(5)], 0, 0, 64);
        for n in 0..38 {
            assert!(test_info(&t[..n]).is_none(), "len {n}");
        }
        assert!(parse(&t[..16]).is_none());
        assert!(parse(&t[..13]).is_none());
    }
}
