//! TCP (RFC 9293) headers, options and checksums over IPv4 and IPv6.
//!
//! The view treats the **whole buffer** as the segment (pass it the IP
//! payload), because the checksum and the payload end there.
//!
//! **No-panic contract:** once [`Packet::new_checked`] has succeeded, no
//! accessor or setter of that packet panics; [`TcpOptions`] yields `Err` on
//! a malformed option instead of reading past the header.

use crate::checksum;
use crate::ip::{IpPair, IpProtocol};
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    pub const OFF_FLAGS: Range<usize> = 12..14;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Header length without options.
pub const HEADER_LEN: usize = field::URGENT.end;
/// Largest header (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;

/// The 9 TCP flag bits (NS, CWR, ECE, URG, ACK, PSH, RST, SYN, FIN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u16);

impl Flags {
    /// FIN.
    pub const FIN: u16 = 0x001;
    /// SYN.
    pub const SYN: u16 = 0x002;
    /// RST.
    pub const RST: u16 = 0x004;
    /// PSH.
    pub const PSH: u16 = 0x008;
    /// ACK.
    pub const ACK: u16 = 0x010;
    /// URG.
    pub const URG: u16 = 0x020;
    /// ECE.
    pub const ECE: u16 = 0x040;
    /// CWR.
    pub const CWR: u16 = 0x080;
    /// NS (RFC 3540, historic).
    pub const NS: u16 = 0x100;

    /// True if all bits of `mask` are set.
    pub fn has(self, mask: u16) -> bool {
        self.0 & mask == mask
    }
    /// FIN set.
    pub fn fin(self) -> bool {
        self.has(Self::FIN)
    }
    /// SYN set.
    pub fn syn(self) -> bool {
        self.has(Self::SYN)
    }
    /// RST set.
    pub fn rst(self) -> bool {
        self.has(Self::RST)
    }
    /// PSH set.
    pub fn psh(self) -> bool {
        self.has(Self::PSH)
    }
    /// ACK set.
    pub fn ack(self) -> bool {
        self.has(Self::ACK)
    }
    /// URG set.
    pub fn urg(self) -> bool {
        self.has(Self::URG)
    }
}

/// One TCP option (RFC 9293 section 3.2, RFC 7323, RFC 2018).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Kind 0: end of option list.
    EndOfList,
    /// Kind 1: no-operation (padding).
    NoOp,
    /// Kind 2: maximum segment size.
    MaxSegmentSize(u16),
    /// Kind 3: window scale shift.
    WindowScale(u8),
    /// Kind 4: SACK permitted.
    SackPermitted,
    /// Kind 5: SACK blocks (raw, 8 bytes per block).
    Sack(&'a [u8]),
    /// Kind 8: timestamps (value, echo reply).
    Timestamp(u32, u32),
    /// Any other kind, with its data (length byte excluded).
    Unknown(u8, &'a [u8]),
}

/// Iterator over the options of a header; stops after `EndOfList`.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// Walks raw option bytes.
    pub fn new(options: &'a [u8]) -> TcpOptions<'a> {
        TcpOptions { rest: options }
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let kind = *self.rest.first()?;
        match kind {
            0 => {
                self.rest = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            1 => {
                self.rest = &self.rest[1..];
                return Some(Ok(TcpOption::NoOp));
            }
            _ => {}
        }
        let bad = |me: &mut Self, e| {
            me.rest = &[];
            Some(Err(e))
        };
        let len = match self.rest.get(1) {
            Some(&l) => usize::from(l),
            None => return bad(self, Error::Truncated),
        };
        if len < 2 {
            return bad(self, Error::Malformed("TCP option length below 2"));
        }
        let Some(opt) = self.rest.get(..len) else {
            return bad(self, Error::Truncated);
        };
        let data = &opt[2..];
        let parsed = match (kind, data.len()) {
            (2, 2) => TcpOption::MaxSegmentSize(u16::from_be_bytes([data[0], data[1]])),
            (3, 1) => TcpOption::WindowScale(data[0]),
            (4, 0) => TcpOption::SackPermitted,
            (5, n) if n % 8 == 0 && n > 0 => TcpOption::Sack(data),
            (8, 8) => TcpOption::Timestamp(
                u32::from_be_bytes([data[0], data[1], data[2], data[3]]),
                u32::from_be_bytes([data[4], data[5], data[6], data[7]]),
            ),
            (2..=5 | 8, _) => {
                return bad(self, Error::Malformed("TCP option has the wrong length"))
            }
            (k, _) => TcpOption::Unknown(k, data),
        };
        self.rest = &self.rest[len..];
        Some(Ok(parsed))
    }
}

/// Zero-copy view of a TCP segment.
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

    /// Checks `20 <= header_len <= buffer`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Malformed("TCP data offset below 5"));
        }
        if len < hl {
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

    fn u32_at(&self, r: core::ops::Range<usize>) -> u32 {
        let b = &self.b()[r];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        self.u32_at(field::SEQ_NUM)
    }

    /// Acknowledgment number (meaningful when ACK is set).
    pub fn ack_number(&self) -> u32 {
        self.u32_at(field::ACK_NUM)
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::OFF_FLAGS.start] >> 4) * 4
    }

    /// Flags.
    pub fn flags(&self) -> Flags {
        Flags(self.u16_at(field::OFF_FLAGS) & 0x01ff)
    }

    /// Window.
    pub fn window_len(&self) -> u16 {
        self.u16_at(field::WINDOW)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        self.u16_at(field::URGENT)
    }

    /// Raw option bytes.
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }

    /// Parsed options.
    pub fn option_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// Payload (after the header, to the end of the buffer).
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }

    /// True if the checksum over the whole buffer and the pseudo-header
    /// verifies.
    pub fn verify_checksum(&self, ips: &IpPair) -> bool {
        let len = self.b().len() as u32;
        let acc = checksum::combine(
            ips.pseudo_header_sum(IpProtocol::Tcp, len),
            checksum::sum(self.b()),
        );
        checksum::verifies(acc)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    fn set_u32(&mut self, r: core::ops::Range<usize>, v: u32) {
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

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        self.set_u32(field::SEQ_NUM, v)
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: u32) {
        self.set_u32(field::ACK_NUM, v)
    }

    /// Sets the header length; must be a multiple of 4 in 20..=60.
    pub fn set_header_len(&mut self, len: usize) -> Result<()> {
        if len & 3 != 0 || !(HEADER_LEN..=MAX_HEADER_LEN).contains(&len) {
            return Err(Error::Malformed(
                "TCP header length not a multiple of 4 in 20..=60",
            ));
        }
        let b = &mut self.buffer.as_mut()[field::OFF_FLAGS.start];
        *b = (*b & 0x0f) | (((len / 4) as u8) << 4);
        Ok(())
    }

    /// Sets the flags (low 9 bits used; the 3 reserved bits are cleared).
    pub fn set_flags(&mut self, f: Flags) {
        let off = u16::from(self.buffer.as_ref()[field::OFF_FLAGS.start] & 0xf0) << 8;
        self.set_u16(field::OFF_FLAGS, off | (f.0 & 0x01ff));
    }

    /// Sets the window.
    pub fn set_window_len(&mut self, v: u16) {
        self.set_u16(field::WINDOW, v)
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16(field::CHECKSUM, v)
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, v: u16) {
        self.set_u16(field::URGENT, v)
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..hl]
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[hl..]
    }

    /// Computes and writes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self, ips: &IpPair) {
        self.set_checksum(0);
        let len = self.b().len() as u32;
        let acc = checksum::combine(
            ips.pseudo_header_sum(IpProtocol::Tcp, len),
            checksum::sum(self.b()),
        );
        self.set_checksum(checksum::finish(acc));
    }
}

/// A parsed TCP segment; options and payload are borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number (as on the wire, even when ACK is clear).
    pub ack_number: u32,
    /// Flags.
    pub flags: Flags,
    /// Window.
    pub window_len: u16,
    /// Urgent pointer.
    pub urgent_at: u16,
    /// Raw options, padded to a multiple of 4 bytes, at most 40.
    pub options: &'a [u8],
    /// Payload.
    pub payload: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses a checked segment: verifies the checksum against `ips` and
    /// that every option is well-formed.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&'a T>, ips: &IpPair) -> Result<Repr<'a>> {
        p.check_len()?;
        if !p.verify_checksum(ips) {
            return Err(Error::Checksum);
        }
        for o in p.option_iter() {
            o?;
        }
        let b: &'a [u8] = p.buffer.as_ref();
        let hl = p.header_len();
        Ok(Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq_number: p.seq_number(),
            ack_number: p.ack_number(),
            flags: p.flags(),
            window_len: p.window_len(),
            urgent_at: p.urgent_at(),
            options: &b[HEADER_LEN..hl],
            payload: &b[hl..],
        })
    }

    /// Header length: 20 + options.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Header plus payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Writes the segment and its checksum into a buffer of exactly
    /// `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
        ips: &IpPair,
    ) -> Result<()> {
        if p.buffer.as_ref().len() != self.buffer_len() {
            return Err(Error::Truncated);
        }
        p.set_header_len(self.header_len())?;
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq_number);
        p.set_ack_number(self.ack_number);
        p.set_flags(self.flags);
        p.set_window_len(self.window_len);
        p.set_urgent_at(self.urgent_at);
        p.options_mut().copy_from_slice(self.options);
        p.payload_mut().copy_from_slice(self.payload);
        p.fill_checksum(ips);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn syn_with_options() {
        let ips = IpPair::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
        };
        let opts = [
            2, 4, 0x05, 0xb4, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0,
        ];
        let r = Repr {
            src_port: 40000,
            dst_port: 80,
            seq_number: 1000,
            ack_number: 0,
            flags: Flags(Flags::SYN),
            window_len: 65535,
            urgent_at: 0,
            options: &opts,
            payload: &[],
        };
        let mut b = [0u8; 44];
        r.emit(&mut Packet::new_unchecked(&mut b[..]), &ips)
            .unwrap();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.flags().syn() && !p.flags().ack());
        let o: Vec<_> = p.option_iter().map(|o| o.unwrap()).collect();
        assert_eq!(
            o,
            [
                TcpOption::MaxSegmentSize(1460),
                TcpOption::NoOp,
                TcpOption::WindowScale(7),
                TcpOption::SackPermitted,
                TcpOption::Timestamp(1, 0),
                TcpOption::NoOp,
                TcpOption::NoOp,
                TcpOption::EndOfList,
            ]
        );
        assert_eq!(Repr::parse(&p, &ips).unwrap(), r);
        for n in 0..44 {
            assert!(Packet::new_checked(&b[..n]).is_err());
        }
    }

    #[test]
    fn bad_options() {
        for raw in [
            &[2u8][..],
            &[2, 0],
            &[2, 3, 0],
            &[2, 5, 0, 0, 0],
            &[8, 10, 0],
        ] {
            assert!(TcpOptions::new(raw).any(|o| o.is_err()), "{raw:?}");
        }
    }
}
