//! ICMP for IPv4 (RFC 792).
//!
//! The view treats the **whole buffer** as the ICMP message (pass it the IPv4
//! payload, which ends at the IPv4 total length), because the checksum covers
//! all of it.
//!
//! **No-panic contract:** once [`Packet::new_checked`] has succeeded, no
//! accessor or setter of that packet panics.

use crate::checksum;
use crate::icmp_header::field;
use crate::{Error, Result};

/// Length of the ICMP header (type, code, checksum, rest-of-header).
pub const HEADER_LEN: usize = crate::icmp_header::HEADER_LEN;

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

/// Zero-copy view of an ICMP message (the header view ICMPv6 shares,
/// [`crate::icmp_header`]).
pub type Packet<T> = crate::icmp_header::Packet<T, Message>;

impl<T: AsRef<[u8]>> Packet<T> {
    /// True if the checksum over the whole buffer verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::verifies(checksum::sum(self.buffer.as_ref()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
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
