//! ICMPv6 (RFC 4443) with neighbor discovery solicit/advert (RFC 4861).
//!
//! The view treats the **whole buffer** as the message (pass it the bytes
//! at the upper-layer offset of the IPv6 packet, to the end of its payload).
//! The checksum covers the IPv6 pseudo-header (RFC 8200 section 8.1).
//!
//! **No-panic contract:** once [`Packet::new_checked`] has succeeded, no
//! accessor or setter of that packet panics; accessors of neighbor-discovery
//! fields return `Err(Truncated)` when the message is too short for them.

use std::net::Ipv6Addr;

use crate::checksum;
use crate::ethernet::MacAddress;
use crate::ip::{IpPair, IpProtocol};
use crate::{Error, Result};

mod field {
    pub use crate::icmp_header::field::*;
    use core::ops::{Range, RangeFrom};
    /// Neighbor solicitation/advertisement target (RFC 4861 sections 4.3, 4.4).
    pub const ND_TARGET: Range<usize> = 8..24;
    pub const ND_OPTIONS: RangeFrom<usize> = 24..;
}

/// Length of the ICMPv6 header.
pub const HEADER_LEN: usize = field::DATA.start;
/// Length of a neighbor solicitation/advertisement without options.
pub const ND_LEN: usize = field::ND_OPTIONS.start;

/// NDP option: source link-layer address (RFC 4861 section 4.6.1).
pub const OPT_SOURCE_LLADDR: u8 = 1;
/// NDP option: target link-layer address.
pub const OPT_TARGET_LLADDR: u8 = 2;

/// ICMPv6 message type. Unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// 1.
    DstUnreachable,
    /// 2.
    PktTooBig,
    /// 3.
    TimeExceeded,
    /// 4.
    ParamProblem,
    /// 128.
    EchoRequest,
    /// 129.
    EchoReply,
    /// 133.
    RouterSolicit,
    /// 134.
    RouterAdvert,
    /// 135.
    NeighborSolicit,
    /// 136.
    NeighborAdvert,
    /// 137.
    Redirect,
    /// Any other type.
    Unknown(u8),
}

impl From<u8> for Message {
    fn from(v: u8) -> Self {
        match v {
            1 => Message::DstUnreachable,
            2 => Message::PktTooBig,
            3 => Message::TimeExceeded,
            4 => Message::ParamProblem,
            128 => Message::EchoRequest,
            129 => Message::EchoReply,
            133 => Message::RouterSolicit,
            134 => Message::RouterAdvert,
            135 => Message::NeighborSolicit,
            136 => Message::NeighborAdvert,
            137 => Message::Redirect,
            o => Message::Unknown(o),
        }
    }
}

impl From<Message> for u8 {
    fn from(m: Message) -> u8 {
        match m {
            Message::DstUnreachable => 1,
            Message::PktTooBig => 2,
            Message::TimeExceeded => 3,
            Message::ParamProblem => 4,
            Message::EchoRequest => 128,
            Message::EchoReply => 129,
            Message::RouterSolicit => 133,
            Message::RouterAdvert => 134,
            Message::NeighborSolicit => 135,
            Message::NeighborAdvert => 136,
            Message::Redirect => 137,
            Message::Unknown(v) => v,
        }
    }
}

/// Zero-copy view of an ICMPv6 message (the header view ICMP shares,
/// [`crate::icmp_header`]).
pub type Packet<T> = crate::icmp_header::Packet<T, Message>;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Neighbor solicitation/advertisement target address.
    pub fn nd_target_addr(&self) -> Result<Ipv6Addr> {
        let b = self
            .buffer
            .as_ref()
            .get(field::ND_TARGET)
            .ok_or(Error::Truncated)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Ok(Ipv6Addr::from(a))
    }

    /// Neighbor advertisement flags: (router, solicited, override).
    pub fn na_flags(&self) -> (bool, bool, bool) {
        let f = self.buffer.as_ref()[field::REST.start];
        (f & 0x80 != 0, f & 0x40 != 0, f & 0x20 != 0)
    }

    /// Neighbor-discovery options after the target address.
    pub fn nd_options(&self) -> Result<NdOptions<'_>> {
        let b = self
            .buffer
            .as_ref()
            .get(field::ND_OPTIONS)
            .ok_or(Error::Truncated)?;
        Ok(NdOptions { rest: b })
    }

    /// True if the checksum (with the pseudo-header of `ips`) verifies.
    pub fn verify_checksum(&self, ips: &IpPair) -> bool {
        let b = self.buffer.as_ref();
        let acc = checksum::combine(
            ips.pseudo_header_sum(IpProtocol::Icmpv6, b.len() as u32),
            checksum::sum(b),
        );
        checksum::verifies(acc)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the ND target address.
    pub fn set_nd_target_addr(&mut self, a: Ipv6Addr) -> Result<()> {
        let b = self
            .buffer
            .as_mut()
            .get_mut(field::ND_TARGET)
            .ok_or(Error::Truncated)?;
        b.copy_from_slice(&a.octets());
        Ok(())
    }

    /// Computes and writes the checksum.
    pub fn fill_checksum(&mut self, ips: &IpPair) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let acc = checksum::combine(
            ips.pseudo_header_sum(IpProtocol::Icmpv6, b.len() as u32),
            checksum::sum(b),
        );
        self.set_checksum(checksum::finish(acc));
    }
}

/// One neighbor-discovery option (type, whole option bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdOption<'a> {
    /// Option type.
    pub kind: u8,
    /// Option data after type and length.
    pub data: &'a [u8],
}

impl NdOption<'_> {
    /// The link-layer address of a source/target link-layer option.
    pub fn lladdr(&self) -> Option<MacAddress> {
        match self.kind {
            OPT_SOURCE_LLADDR | OPT_TARGET_LLADDR => MacAddress::from_bytes(self.data).ok(),
            _ => None,
        }
    }
}

/// Iterator over neighbor-discovery options (RFC 4861 section 4.6).
#[derive(Debug, Clone)]
pub struct NdOptions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for NdOptions<'a> {
    type Item = Result<NdOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = self.rest;
        let fail = |me: &mut Self, e| {
            me.rest = &[];
            Some(Err(e))
        };
        let Some(&units) = r.get(1) else {
            return fail(self, Error::Truncated);
        };
        // Length is in 8-octet units; 0 is invalid (RFC 4861 section 4.6).
        if units == 0 {
            return fail(self, Error::Malformed("ND option length 0"));
        }
        let len = usize::from(units) * 8;
        let Some(opt) = r.get(..len) else {
            return fail(self, Error::Truncated);
        };
        self.rest = &r[len..];
        Some(Ok(NdOption {
            kind: opt[0],
            data: &opt[2..],
        }))
    }
}

/// A parsed ICMPv6 message; data is borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    /// Echo request (128, code 0).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Echo reply (129, code 0).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Neighbor solicitation (135, code 0). Options other than the source
    /// link-layer address are not represented.
    NeighborSolicit {
        /// Target address.
        target_addr: Ipv6Addr,
        /// Source link-layer address option.
        source_lladdr: Option<MacAddress>,
    },
    /// Neighbor advertisement (136, code 0). Options other than the target
    /// link-layer address are not represented.
    NeighborAdvert {
        /// R flag.
        router: bool,
        /// S flag.
        solicited: bool,
        /// O flag.
        override_: bool,
        /// Target address.
        target_addr: Ipv6Addr,
        /// Target link-layer address option.
        target_lladdr: Option<MacAddress>,
    },
    /// Any other message.
    Other {
        /// Type.
        msg_type: Message,
        /// Code.
        code: u8,
        /// Rest-of-header word.
        rest: u32,
        /// Data after the 8-byte header.
        data: &'a [u8],
    },
}

fn find_lladdr(p: &Packet<impl AsRef<[u8]>>, kind: u8) -> Result<Option<MacAddress>> {
    let mut found = None;
    for o in p.nd_options()? {
        let o = o?;
        if o.kind == kind {
            found = Some(
                o.lladdr()
                    .ok_or(Error::Malformed("ND link-layer option too short"))?,
            );
        }
    }
    Ok(found)
}

impl<'a> Repr<'a> {
    /// Parses a checked message and verifies its checksum against `ips`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&'a T>, ips: &IpPair) -> Result<Repr<'a>> {
        p.check_len()?;
        if !p.verify_checksum(ips) {
            return Err(Error::Checksum);
        }
        let data: &'a [u8] = &p.buffer.as_ref()[field::DATA];
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
            (Message::NeighborSolicit, 0) => Repr::NeighborSolicit {
                target_addr: p.nd_target_addr()?,
                source_lladdr: find_lladdr(p, OPT_SOURCE_LLADDR)?,
            },
            (Message::NeighborAdvert, 0) => {
                let (router, solicited, override_) = p.na_flags();
                Repr::NeighborAdvert {
                    router,
                    solicited,
                    override_,
                    target_addr: p.nd_target_addr()?,
                    target_lladdr: find_lladdr(p, OPT_TARGET_LLADDR)?,
                }
            }
            (msg_type, code) => Repr::Other {
                msg_type,
                code,
                rest: p.rest_of_header(),
                data,
            },
        })
    }

    /// Length of the emitted message.
    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::EchoRequest { data, .. }
            | Repr::EchoReply { data, .. }
            | Repr::Other { data, .. } => HEADER_LEN + data.len(),
            Repr::NeighborSolicit {
                source_lladdr: ll, ..
            }
            | Repr::NeighborAdvert {
                target_lladdr: ll, ..
            } => ND_LEN + if ll.is_some() { 8 } else { 0 },
        }
    }

    /// Writes the message and checksum into a buffer of exactly
    /// `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
        ips: &IpPair,
    ) -> Result<()> {
        if p.buffer.as_ref().len() != self.buffer_len() {
            return Err(Error::Truncated);
        }
        let write_ll = |p: &mut Packet<T>, kind: u8, ll: Option<MacAddress>| {
            if let Some(mac) = ll {
                let o = &mut p.buffer.as_mut()[ND_LEN..ND_LEN + 8];
                o[0] = kind;
                o[1] = 1;
                o[2..].copy_from_slice(&mac.0);
            }
        };
        match *self {
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                let t = if matches!(self, Repr::EchoRequest { .. }) {
                    Message::EchoRequest
                } else {
                    Message::EchoReply
                };
                p.set_msg_type(t);
                p.set_code(0);
                p.set_echo_ident(ident);
                p.set_echo_seq_no(seq_no);
                p.data_mut().copy_from_slice(data);
            }
            Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                p.set_msg_type(Message::NeighborSolicit);
                p.set_code(0);
                p.set_rest_of_header(0);
                p.set_nd_target_addr(target_addr)?;
                write_ll(p, OPT_SOURCE_LLADDR, source_lladdr);
            }
            Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                target_lladdr,
            } => {
                p.set_msg_type(Message::NeighborAdvert);
                p.set_code(0);
                let flags = (u32::from(router) << 31)
                    | (u32::from(solicited) << 30)
                    | (u32::from(override_) << 29);
                p.set_rest_of_header(flags);
                p.set_nd_target_addr(target_addr)?;
                write_ll(p, OPT_TARGET_LLADDR, target_lladdr);
            }
            Repr::Other {
                msg_type,
                code,
                rest,
                data,
            } => {
                p.set_msg_type(msg_type);
                p.set_code(code);
                p.set_rest_of_header(rest);
                p.data_mut().copy_from_slice(data);
            }
        }
        p.fill_checksum(ips);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips() -> IpPair {
        IpPair::V6 {
            src: "fe80::1".parse().unwrap(),
            dst: "ff02::1:ff00:2".parse().unwrap(),
        }
    }

    #[test]
    fn ns_roundtrip() {
        let r = Repr::NeighborSolicit {
            target_addr: "fe80::2".parse().unwrap(),
            source_lladdr: Some(MacAddress([2, 0, 0, 0, 0, 1])),
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut b[..]), &ips())
            .unwrap();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p, &ips()).unwrap(), r);
        // Truncated NS: checksum is refilled so the length check is what fails.
        for n in 8..b.len() {
            let mut t = b[..n].to_vec();
            Packet::new_unchecked(&mut t[..]).fill_checksum(&ips());
            let res = Repr::parse(&Packet::new_checked(&t[..]).unwrap(), &ips());
            // 24 bytes is a valid NS without options; every other cut fails.
            assert_eq!(res.is_ok(), n == ND_LEN, "len {n}");
        }
    }

    #[test]
    fn na_roundtrip() {
        let r = Repr::NeighborAdvert {
            router: true,
            solicited: true,
            override_: false,
            target_addr: "2001:db8::5".parse().unwrap(),
            target_lladdr: None,
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut b[..]), &ips())
            .unwrap();
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap(), &ips()).unwrap(),
            r
        );
    }

    #[test]
    fn zero_length_option_rejected() {
        let mut b = [0u8; 32];
        b[0] = 135;
        b[24] = 1;
        Packet::new_unchecked(&mut b[..]).fill_checksum(&ips());
        assert!(matches!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap(), &ips()),
            Err(Error::Malformed(_))
        ));
    }
}
