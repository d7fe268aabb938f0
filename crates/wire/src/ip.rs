//! Types shared by IPv4 and IPv6: protocol numbers, DSCP/ECN, and the
//! address pair that upper-layer checksums cover (the pseudo-header).

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::{checksum, Error, Result};

/// IP protocol / IPv6 next-header number (IANA "Assigned Internet Protocol
/// Numbers"). Unknown values are kept, not rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    /// 0: IPv6 hop-by-hop options (RFC 8200 section 4.3).
    HopByHop,
    /// 1: ICMP (RFC 792).
    Icmp,
    /// 2: IGMP.
    Igmp,
    /// 6: TCP.
    Tcp,
    /// 17: UDP.
    Udp,
    /// 43: IPv6 routing header (RFC 8200 section 4.4).
    Ipv6Route,
    /// 44: IPv6 fragment header (RFC 8200 section 4.5).
    Ipv6Frag,
    /// 50: ESP (RFC 4303).
    Esp,
    /// 51: AH (RFC 4302).
    Ah,
    /// 58: ICMPv6 (RFC 4443).
    Icmpv6,
    /// 59: no next header (RFC 8200 section 4.7).
    Ipv6NoNxt,
    /// 60: IPv6 destination options (RFC 8200 section 4.6).
    Ipv6Opts,
    /// Any other number.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        match v {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            2 => IpProtocol::Igmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            50 => IpProtocol::Esp,
            51 => IpProtocol::Ah,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNxt,
            60 => IpProtocol::Ipv6Opts,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(p: IpProtocol) -> u8 {
        match p {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Igmp => 2,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Esp => 50,
            IpProtocol::Ah => 51,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNxt => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Unknown(v) => v,
        }
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpProtocol::Unknown(v) => write!(f, "proto-{v}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Differentiated Services Code Point, 0..=63 (RFC 2474).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Dscp(u8);

impl Dscp {
    /// Largest DSCP value.
    pub const MAX: u8 = 63;
    /// Expedited Forwarding (RFC 3246).
    pub const EF: Dscp = Dscp(46);

    /// Checked constructor: `Err` when `v > 63`.
    pub const fn new(v: u8) -> Result<Dscp> {
        if v > Self::MAX {
            Err(Error::Malformed("DSCP above 63"))
        } else {
            Ok(Dscp(v))
        }
    }

    /// Takes the upper 6 bits of a TOS / traffic-class byte.
    pub const fn from_tos(tos: u8) -> Dscp {
        Dscp(tos >> 2)
    }

    /// The 6-bit value.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// Explicit Congestion Notification codepoint (RFC 3168 section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// 00: not ECN-capable transport.
    #[default]
    NotEct,
    /// 01: ECT(1).
    Ect1,
    /// 10: ECT(0).
    Ect0,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    /// From the low 2 bits of a TOS / traffic-class byte.
    pub const fn from_bits(v: u8) -> Ecn {
        match v & 0b11 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The 2-bit value.
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
}

/// Source and destination addresses of the IP header that carries an
/// upper-layer packet: what the TCP/UDP/ICMPv6 checksum pseudo-header covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpPair {
    /// Carried in IPv4 (RFC 768 / RFC 793 pseudo-header).
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
    },
    /// Carried in IPv6 (RFC 8200 section 8.1 pseudo-header).
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address (final destination if a routing header).
        dst: Ipv6Addr,
    },
}

impl IpPair {
    /// Partial checksum of the pseudo-header for `protocol` and an
    /// upper-layer length of `len` bytes.
    pub fn pseudo_header_sum(&self, protocol: IpProtocol, len: u32) -> u32 {
        let proto = u32::from(u8::from(protocol));
        match self {
            IpPair::V4 { src, dst } => {
                let a =
                    checksum::combine(checksum::sum(&src.octets()), checksum::sum(&dst.octets()));
                // The v4 pseudo-header length field is 16 bits.
                checksum::combine(a, proto + (len & 0xffff))
            }
            IpPair::V6 { src, dst } => {
                let a =
                    checksum::combine(checksum::sum(&src.octets()), checksum::sum(&dst.octets()));
                let l = (len >> 16) + (len & 0xffff);
                checksum::combine(a, proto + l)
            }
        }
    }

    /// True for the IPv6 variant (where a zero UDP checksum is not allowed).
    pub fn is_v6(&self) -> bool {
        matches!(self, IpPair::V6 { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_roundtrip() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(v)), v);
        }
    }

    #[test]
    fn dscp_bounds() {
        assert!(Dscp::new(63).is_ok());
        assert!(Dscp::new(64).is_err());
        assert_eq!(Dscp::from_tos(0xb8), Dscp::EF);
    }

    #[test]
    fn ecn_roundtrip() {
        for v in 0..4 {
            assert_eq!(Ecn::from_bits(v).bits(), v);
        }
    }
}
