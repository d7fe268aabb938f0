//! The 8-byte header ICMP (RFC 792) and ICMPv6 (RFC 4443 section 2.1)
//! share: type, code, checksum and four type-specific bytes (an echo's
//! identifier and sequence number). One view for both; each module names
//! it `Packet` with its own message type and adds what differs (the
//! checksum: ICMPv6's covers the IPv6 pseudo-header; ND fields).
//!
//! **No-panic contract:** once [`Packet::new_checked`] has succeeded, no
//! accessor or setter here panics.

use core::marker::PhantomData;

use crate::{Error, Result};

pub(crate) mod field {
    use core::ops::{Range, RangeFrom};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    pub const DATA: RangeFrom<usize> = 8..;
}

/// Length of the header (type, code, checksum, rest-of-header).
pub const HEADER_LEN: usize = field::DATA.start;

/// Zero-copy view of an ICMP or ICMPv6 message (`M`: its message type);
/// the whole buffer is the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>, M> {
    pub(crate) buffer: T,
    message: PhantomData<fn() -> M>,
}

impl<T: AsRef<[u8]>, M: From<u8>> Packet<T, M> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Packet<T, M> {
        Packet {
            buffer,
            message: PhantomData,
        }
    }

    /// Wraps and checks the 8-byte header is present.
    pub fn new_checked(buffer: T) -> Result<Packet<T, M>> {
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
    pub fn msg_type(&self) -> M {
        M::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// The 4 type-specific bytes after the checksum (ND: flags + reserved).
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
}

impl<T: AsRef<[u8]> + AsMut<[u8]>, M: From<u8> + Into<u8>> Packet<T, M> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the type.
    pub fn set_msg_type(&mut self, m: M) {
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

    /// Mutable data after the 8-byte header.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
}
