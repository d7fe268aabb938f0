//! ICMP for IPv4 (RFC 792).
//!
//! The view treats the **whole buffer** as the ICMP message (pass it the IPv4
//! payload, which ends at the IPv4 total length), because the checksum covers
//! all of it.
//!
//! **No-panic contract:** once [`Packet::new_checked`] has succeeded, no
//! accessor or setter of that packet panics.

use crate::checksum;
use crate::{Error, Result};

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    pub const DATA: RangeFrom<usize> = 8..;
}

/// Length of the ICMP header (type, code, checksum, rest-of-header).
pub const HEADER_LEN: usize = field::DATA.start;

/// ICMP message type. Unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// 0.
    EchoReply,
    /// 3.
    DstUnreachable,
    /// 5.
    Redirect,
    /// 8.
    EchoRequest,
    /// 11.
    TimeExceeded,
    /// 12.
    ParamProblem,
    /// Any other type.
    Unknown(u8),
}

impl From<u8> for Message {
    fn from(v: u8) -> Self {
        match v {
            0 => Message::EchoReply,
            3 => Message::DstUnreachable,
            5 => Message::Redirect,
            8 => Message::EchoRequest,
            11 => Message::TimeExceeded,
            12 => Message::ParamProblem,
            o => Message::Unknown(o),
        }
    }
}

impl From<Message> for u8 {
    fn from(m: Message) -> u8 {
        match m {
            Message::EchoReply => 0,
            Message::DstUnreachable => 3,
            Message::Redirect => 5,
            Message::EchoRequest => 8,
            Message::TimeExceeded => 11,
            Message::ParamProblem => 12,
            Message::Unknown(v) => v,
        }
    }
}

/// Zero-copy view of an ICMP message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps and checks the 8-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` if shorter than 8 bytes.
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

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Message type.
    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// The 4 type-specific bytes after the checksum.
    pub fn rest_of_header(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::REST];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Echo identifier.
    pub fn echo_ident(&self) -> u16 {
        self.u16_at(field::ECHO_IDENT)
    }

    /// Echo sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        self.u16_at(field::ECHO_SEQNO)
    }

    /// Bytes after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// True if the checksum over the whole buffer verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::verifies(checksum::sum(self.buffer.as_ref()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the type.
    pub fn set_msg_type(&mut self, m: Message) {
        self.buffer.as_mut()[field::TYPE] = m.into();
    }

    /// Sets the code.
    pub fn set_code(&mut self, c: u8) {
        self.buffer.as_mut()[field::CODE] = c;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16(field::CHECKSUM, v)
    }

    /// Sets the rest-of-header word.
    pub fn set_rest_of_header(&mut self, v: u32) {
        self.buffer.as_mut()[field::REST].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, v: u16) {
        self.set_u16(field::ECHO_IDENT, v)
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, v: u16) {
        self.set_u16(field::ECHO_SEQNO, v)
    }

    /// Mutable data.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }

    /// Computes and writes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::finish(checksum::sum(self.buffer.as_ref()));
        self.set_checksum(c);
    }
}

/// A parsed ICMP message; data is borrowed, never copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    /// Echo request (type 8, code 0).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo reply (type 0, code 0).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Any other message, kept as type, code, rest-of-header and data.
    Other {
        /// Type.
        msg_type: Message,
        /// Code.
        code: u8,
        /// Rest-of-header word.
        rest: u32,
        /// Data (for errors: the invoking packet).
        data: &'a [u8],
    },
}

impl<'a> Repr<'a> {
    /// Parses a checked message and verifies its checksum.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&'a T>) -> Result<Repr<'a>> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::Checksum);
        }
        let data = &p.buffer.as_ref()[field::DATA];
        Ok(match (p.msg_type(), p.code()) {
            (Message::EchoRequest, 0) => Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            (Message::EchoReply, 0) => Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            (msg_type, code) => Repr::Other {
                msg_type,
                code,
                rest: p.rest_of_header(),
                data,
            },
        })
    }

    fn data(&self) -> &'a [u8] {
        match self {
            Repr::EchoRequest { data, .. }
            | Repr::EchoReply { data, .. }
            | Repr::Other { data, .. } => data,
        }
    }

    /// Header plus data.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data().len()
    }

    /// Writes the message and its checksum into a buffer of exactly
    /// `buffer_len()` bytes (the checksum covers the whole buffer).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) -> Result<()> {
        if p.buffer.as_ref().len() != self.buffer_len() {
            return Err(Error::Truncated);
        }
        match *self {
            Repr::EchoRequest { ident, seq_no, .. } => {
                p.set_msg_type(Message::EchoRequest);
                p.set_code(0);
                p.set_echo_ident(ident);
                p.set_echo_seq_no(seq_no);
            }
            Repr::EchoReply { ident, seq_no, .. } => {
                p.set_msg_type(Message::EchoReply);
                p.set_code(0);
                p.set_echo_ident(ident);
                p.set_echo_seq_no(seq_no);
            }
            Repr::Other {
                msg_type,
                code,
                rest,
                ..
            } => {
                p.set_msg_type(msg_type);
                p.set_code(code);
                p.set_rest_of_header(rest);
            }
        }
        p.data_mut().copy_from_slice(self.data());
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_roundtrip() {
        let r = Repr::EchoRequest {
            ident: 0x1234,
            seq_no: 1,
            data: b"abcd",
        };
        let mut b = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut b[..])).unwrap();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(Repr::parse(&p).unwrap(), r);
        for n in 0..8 {
            assert_eq!(Packet::new_checked(&b[..n]), Err(Error::Truncated));
        }
        b[9] ^= 0xff;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Checksum)
        );
    }
}
