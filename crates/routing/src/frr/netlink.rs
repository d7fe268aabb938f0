//! Decoder for the rtnetlink messages zebra's `dplane_fpm_nl` module sends.
//!
//! One FPM frame carries one or more netlink messages back to back (a route
//! update without `fpm use-route-replace` is an `RTM_DELROUTE` followed by an
//! `RTM_NEWROUTE` in the same frame). [`decode`] walks them all and turns each
//! into an owned, validated [`RouteUpdate`]. Everything is bounds-checked:
//! malformed input yields a [`DecodeError`], never a panic; attributes this
//! module does not know are skipped; message types it does not handle
//! (MPLS LSPs, EVPN MACs, ...) come back as [`RouteUpdate::Ignored`].
//!
//! Netlink integers are in host byte order (zebra and Lanyard run on the
//! same machine), addresses in network byte order.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

// Message types (linux/rtnetlink.h).
pub const NLMSG_NOOP: u16 = 1;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_DELROUTE: u16 = 25;
pub const RTM_NEWNEXTHOP: u16 = 104;
pub const RTM_DELNEXTHOP: u16 = 105;

// nlmsg_flags.
pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_REPLACE: u16 = 0x100;

// Route attributes.
pub const RTA_DST: u16 = 1;
pub const RTA_SRC: u16 = 2;
pub const RTA_OIF: u16 = 4;
pub const RTA_GATEWAY: u16 = 5;
pub const RTA_PRIORITY: u16 = 6;
pub const RTA_PREFSRC: u16 = 7;
pub const RTA_MULTIPATH: u16 = 9;
pub const RTA_TABLE: u16 = 15;
pub const RTA_VIA: u16 = 18;
pub const RTA_NH_ID: u16 = 30;

// Next-hop object attributes (linux/nexthop.h).
pub const NHA_ID: u16 = 1;
pub const NHA_GROUP: u16 = 2;
pub const NHA_GROUP_TYPE: u16 = 3;
pub const NHA_BLACKHOLE: u16 = 4;
pub const NHA_OIF: u16 = 5;
pub const NHA_GATEWAY: u16 = 6;

// Route types.
pub const RTN_UNICAST: u8 = 1;
pub const RTN_LOCAL: u8 = 2;
pub const RTN_BLACKHOLE: u8 = 6;
pub const RTN_UNREACHABLE: u8 = 7;
pub const RTN_PROHIBIT: u8 = 8;

/// Table number carried in `rtm_table` when the real one is in `RTA_TABLE`.
pub const RT_TABLE_UNSPEC: u8 = 0;
/// The main routing table.
pub const RT_TABLE_MAIN: u32 = 254;

pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;
/// `AF_MPLS`: label entries (zebra LSPs).
pub const AF_MPLS: u8 = 28;

/// `sizeof(struct nlmsghdr)`.
pub const NLMSG_HDRLEN: usize = 16;
/// `sizeof(struct rtmsg)`.
pub const RTMSG_LEN: usize = 12;
/// `sizeof(struct nhmsg)`.
pub const NHMSG_LEN: usize = 8;
/// `sizeof(struct rtnexthop)`.
pub const RTNH_LEN: usize = 8;
/// `sizeof(struct nexthop_grp)`.
pub const NEXTHOP_GRP_LEN: usize = 8;

/// Netlink's 4-byte alignment (`NLMSG_ALIGN`, `RTA_ALIGN`, `RTNH_ALIGN`).
#[inline]
pub const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// An IPv4 or IPv6 prefix: network address and length. The address is
/// masked to the length when decoded, so equal prefixes compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Builds a prefix, masking host bits. `None` if `len` is too long for
    /// the address family.
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let addr = match addr {
            IpAddr::V4(a) => {
                if len > 32 {
                    return None;
                }
                let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) => {
                if len > 128 {
                    return None;
                }
                let mask = if len == 0 {
                    0
                } else {
                    u128::MAX << (128 - len)
                };
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        };
        Some(Prefix { addr, len })
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Prefix, String> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| format!("no '/' in {s:?}"))?;
        let addr: IpAddr = a.parse().map_err(|e| format!("{s:?}: {e}"))?;
        let len: u8 = l.parse().map_err(|e| format!("{s:?}: {e}"))?;
        Prefix::new(addr, len).ok_or_else(|| format!("{s:?}: length too long"))
    }
}

/// One way out: a gateway, an interface, or both. The ECMP weight is
/// 1-based (netlink's `rtnh_hops` / `nexthop_grp.weight` plus one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NextHop {
    pub gateway: Option<IpAddr>,
    /// Kernel interface index of the outgoing interface (0: none given).
    pub ifindex: u32,
    pub weight: u16,
}

/// Where a route sends its traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextHops {
    /// Directly listed next hops (one, or several for ECMP).
    List(Vec<NextHop>),
    /// A reference to a next-hop object sent earlier with `RTM_NEWNEXTHOP`
    /// (`fpm use-next-hop-groups`, zebra's default).
    Id(u32),
    /// Drop (`RTN_BLACKHOLE`).
    Blackhole,
    /// Drop with ICMP unreachable (`RTN_UNREACHABLE`).
    Unreachable,
    /// Drop with ICMP administratively prohibited (`RTN_PROHIBIT`).
    Prohibit,
    /// Nothing given (deletes carry no next hops).
    None,
}

/// Content of a next-hop object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextHopObject {
    /// A single next hop (`NHA_GATEWAY` and/or `NHA_OIF`).
    Single(NextHop),
    /// A group of other next-hop objects: (id, weight, 1-based).
    Group(Vec<(u32, u16)>),
    /// Drop.
    Blackhole,
}

/// A decoded, validated update from zebra.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteUpdate {
    /// Install or replace the route for `prefix` in `table`.
    Add {
        prefix: Prefix,
        table: u32,
        /// `rtm_protocol`: which FRR daemon owns the route (zebra's
        /// numbering: 196 static, 188 OSPF, 186 BGP, ...).
        protocol: u8,
        /// `RTA_PRIORITY` (0 when absent).
        metric: u32,
        nexthops: NextHops,
        /// `NLM_F_REPLACE` was set (zebra's `fpm use-route-replace`).
        replace: bool,
    },
    /// Remove the route for `prefix` in `table`.
    Del {
        prefix: Prefix,
        table: u32,
        protocol: u8,
        metric: u32,
    },
    /// Create or replace next-hop object `id`.
    NextHopAdd {
        id: u32,
        /// `AF_INET`, `AF_INET6` or 0 (groups, blackholes).
        family: u8,
        protocol: u8,
        nexthop: NextHopObject,
    },
    /// Remove next-hop object `id`.
    NextHopDel { id: u32 },
    /// An MPLS label entry (AF_MPLS) or an IP route with labelled next
    /// hops, decoded by `labelfeed` (docs/mpls.md). Deletes of IP routes
    /// stay [`RouteUpdate::Del`].
    Label(labelfeed::LabelMsg),
    /// A well-formed message this decoder does not act on (MPLS, MAC,
    /// source-specific routes, multicast, NOOP/DONE, ...).
    Ignored { msg_type: u16, reason: &'static str },
}

/// Why a message could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than a netlink header, or `nlmsg_len` says more bytes than
    /// there are / fewer than the header.
    BadMessageLength { offset: usize, len: usize },
    /// The fixed family header (`rtmsg`, `nhmsg`) does not fit.
    ShortBody { msg_type: u16 },
    /// An attribute's length is below 4 or runs past its container.
    BadAttribute { attr_type: u16 },
    /// An attribute has the wrong size for its type.
    BadAttributeLength { attr_type: u16, len: usize },
    /// Address family neither IPv4 nor IPv6 where one is required.
    BadFamily(u8),
    /// Prefix length beyond the family's bits.
    BadPrefixLength(u8),
    /// An `rtnexthop` entry is truncated or has a bad length.
    BadMultipath,
    /// A next-hop message without `NHA_ID`.
    MissingNextHopId,
    /// A group entry is malformed (length not a multiple of 8, id 0).
    BadGroup,
    /// A label entry or labelled route `labelfeed` refused.
    Label(labelfeed::Error),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::BadMessageLength { offset, len } => {
                write!(f, "bad netlink message length {len} at offset {offset}")
            }
            DecodeError::ShortBody { msg_type } => {
                write!(f, "message type {msg_type} too short for its header")
            }
            DecodeError::BadAttribute { attr_type } => {
                write!(f, "attribute {attr_type} overruns its message")
            }
            DecodeError::BadAttributeLength { attr_type, len } => {
                write!(f, "attribute {attr_type} has bad length {len}")
            }
            DecodeError::BadFamily(fam) => write!(f, "unsupported address family {fam}"),
            DecodeError::BadPrefixLength(l) => write!(f, "bad prefix length {l}"),
            DecodeError::BadMultipath => write!(f, "malformed RTA_MULTIPATH"),
            DecodeError::MissingNextHopId => write!(f, "next-hop message without NHA_ID"),
            DecodeError::BadGroup => write!(f, "malformed NHA_GROUP"),
            DecodeError::Label(e) => write!(f, "label message: {e}"),
        }
    }
}

impl std::error::Error for DecodeError {}

#[inline]
fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    b.get(off..off + 2)
        .map(|s| u16::from_ne_bytes([s[0], s[1]]))
}

#[inline]
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4)
        .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// Iterator over the attributes (`struct rtattr`/`nlattr`) in `buf`:
/// yields `(type, payload)`, or one error and then stops.
pub struct Attrs<'a> {
    buf: &'a [u8],
    done: bool,
}

impl<'a> Attrs<'a> {
    pub fn new(buf: &'a [u8]) -> Attrs<'a> {
        Attrs { buf, done: false }
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<(u16, &'a [u8]), DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        // Fewer than 4 bytes left: trailing padding, nothing more to read.
        if self.done || self.buf.len() < 4 {
            return None;
        }
        let len = u16_at(self.buf, 0)? as usize;
        // The top two bits are NLA_F_NESTED / NLA_F_NET_BYTEORDER.
        let attr_type = u16_at(self.buf, 2)? & 0x3fff;
        if len < 4 || len > self.buf.len() {
            self.done = true;
            return Some(Err(DecodeError::BadAttribute { attr_type }));
        }
        let payload = &self.buf[4..len];
        let next = align4(len).min(self.buf.len());
        self.buf = &self.buf[next..];
        Some(Ok((attr_type, payload)))
    }
}

fn attr_u32(attr_type: u16, p: &[u8]) -> Result<u32, DecodeError> {
    if p.len() != 4 {
        return Err(DecodeError::BadAttributeLength {
            attr_type,
            len: p.len(),
        });
    }
    Ok(u32::from_ne_bytes([p[0], p[1], p[2], p[3]]))
}

fn attr_addr(attr_type: u16, family: u8, p: &[u8]) -> Result<IpAddr, DecodeError> {
    let bad = DecodeError::BadAttributeLength {
        attr_type,
        len: p.len(),
    };
    match family {
        AF_INET => {
            let a: [u8; 4] = p.try_into().map_err(|_| bad)?;
            Ok(IpAddr::V4(Ipv4Addr::from(a)))
        }
        AF_INET6 => {
            let a: [u8; 16] = p.try_into().map_err(|_| bad)?;
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        }
        other => Err(DecodeError::BadFamily(other)),
    }
}

/// Address of unknown family, guessed from its length (next-hop objects of
/// family 0 and `RTA_VIA` carry their own).
fn addr_by_len(attr_type: u16, p: &[u8]) -> Result<IpAddr, DecodeError> {
    match p.len() {
        4 => attr_addr(attr_type, AF_INET, p),
        16 => attr_addr(attr_type, AF_INET6, p),
        len => Err(DecodeError::BadAttributeLength { attr_type, len }),
    }
}

/// A route's `RTA_GATEWAY`; an IPv4-mapped IPv6 gateway is an IPv4 next
/// hop (an IPv6 route over an IPv4 core as `zebra_lanyard_fpm.so` encodes
/// it; docs/vrf.md, "VPNv6").
fn attr_gateway(family: u8, p: &[u8]) -> Result<IpAddr, DecodeError> {
    Ok(match attr_addr(RTA_GATEWAY, family, p)? {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4),
        a => a,
    })
}

/// `struct rtvia { __kernel_sa_family_t rtvia_family; __u8 rtvia_addr[]; }`
/// (an IPv4 route via an IPv6 gateway, RFC 5549).
fn attr_via(p: &[u8]) -> Result<IpAddr, DecodeError> {
    let fam = u16_at(p, 0).ok_or(DecodeError::BadAttributeLength {
        attr_type: RTA_VIA,
        len: p.len(),
    })?;
    let fam = u8::try_from(fam).map_err(|_| DecodeError::BadFamily(u8::MAX))?;
    attr_addr(RTA_VIA, fam, &p[2..])
}

/// Decodes every netlink message in `msg` (the payload of one FPM frame).
pub fn decode(msg: &[u8]) -> Result<Vec<RouteUpdate>, DecodeError> {
    split(msg)?.into_iter().map(decode_one).collect()
}

/// The netlink messages of `msg`, each exactly `nlmsg_len` bytes (what
/// [`decode`] decodes one by one).
pub fn split(msg: &[u8]) -> Result<Vec<&[u8]>, DecodeError> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while msg.len() - off >= NLMSG_HDRLEN {
        let rest = &msg[off..];
        let len = u32_at(rest, 0).unwrap_or(0) as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            return Err(DecodeError::BadMessageLength { offset: off, len });
        }
        out.push(&rest[..len]);
        off += align4(len).min(rest.len());
    }
    if off != msg.len() {
        // Fewer bytes than a header left over: a truncated message.
        return Err(DecodeError::BadMessageLength {
            offset: off,
            len: msg.len() - off,
        });
    }
    Ok(out)
}

/// Decodes one netlink message (`msg` spans exactly `nlmsg_len` bytes).
pub fn decode_one(msg: &[u8]) -> Result<RouteUpdate, DecodeError> {
    if msg.len() < NLMSG_HDRLEN {
        return Err(DecodeError::BadMessageLength {
            offset: 0,
            len: msg.len(),
        });
    }
    let msg_type = u16_at(msg, 4).unwrap_or(0);
    let flags = u16_at(msg, 6).unwrap_or(0);
    let body = &msg[NLMSG_HDRLEN..];
    match msg_type {
        RTM_NEWROUTE | RTM_DELROUTE if body.first() == Some(&AF_MPLS) => {
            match labelfeed::decode_route(msg) {
                Ok(Some(m)) => Ok(RouteUpdate::Label(m)),
                Ok(None) => Ok(RouteUpdate::Ignored {
                    msg_type,
                    reason: "label message not handled",
                }),
                Err(e) => Err(DecodeError::Label(e)),
            }
        }
        RTM_NEWROUTE | RTM_DELROUTE => {
            // An IP route; one whose next hops carry an MPLS encap is
            // labelled (FTN). Deletes stay ordinary deletes.
            let u = decode_route(msg_type, flags, body)?;
            if !matches!(u, RouteUpdate::Add { .. }) {
                return Ok(u);
            }
            match labelfeed::decode_route(msg) {
                Ok(Some(m @ labelfeed::LabelMsg::RouteAdd(_))) => Ok(RouteUpdate::Label(m)),
                Ok(_) => Ok(u),
                Err(e) => Err(DecodeError::Label(e)),
            }
        }
        RTM_NEWNEXTHOP | RTM_DELNEXTHOP => decode_nexthop(msg_type, body),
        NLMSG_NOOP | NLMSG_DONE | NLMSG_ERROR => Ok(RouteUpdate::Ignored {
            msg_type,
            reason: "netlink control message",
        }),
        _ => Ok(RouteUpdate::Ignored {
            msg_type,
            reason: "message type not handled",
        }),
    }
}

fn decode_route(msg_type: u16, flags: u16, body: &[u8]) -> Result<RouteUpdate, DecodeError> {
    if body.len() < RTMSG_LEN {
        return Err(DecodeError::ShortBody { msg_type });
    }
    let family = body[0];
    let dst_len = body[1];
    let src_len = body[2];
    let rtm_table = body[4];
    let protocol = body[5];
    let rtm_type = body[7];
    let ignored = |reason| Ok(RouteUpdate::Ignored { msg_type, reason });
    let max_len = match family {
        AF_INET => 32,
        AF_INET6 => 128,
        // AF_MPLS LSPs and anything else: not routes for the IP FIB.
        _ => return ignored("address family not IPv4/IPv6"),
    };
    if dst_len > max_len {
        return Err(DecodeError::BadPrefixLength(dst_len));
    }

    let mut dst: Option<IpAddr> = None;
    let mut table: Option<u32> = None;
    let mut metric = 0u32;
    let mut oif = 0u32;
    let mut gateway: Option<IpAddr> = None;
    let mut nh_id: Option<u32> = None;
    let mut multipath: Option<Vec<NextHop>> = None;
    for attr in Attrs::new(&body[RTMSG_LEN..]) {
        let (t, p) = attr?;
        match t {
            RTA_DST => dst = Some(attr_addr(t, family, p)?),
            RTA_TABLE => table = Some(attr_u32(t, p)?),
            RTA_PRIORITY => metric = attr_u32(t, p)?,
            RTA_OIF => oif = attr_u32(t, p)?,
            RTA_GATEWAY => gateway = Some(attr_gateway(family, p)?),
            RTA_VIA => gateway = Some(attr_via(p)?),
            RTA_NH_ID => nh_id = Some(attr_u32(t, p)?),
            RTA_MULTIPATH => multipath = Some(decode_multipath(family, p)?),
            _ => {}
        }
    }
    if src_len != 0 {
        return ignored("source-specific route");
    }
    let table = table.unwrap_or(rtm_table as u32);
    let addr = match dst {
        Some(a) => a,
        None if family == AF_INET => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        None => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let prefix = Prefix::new(addr, dst_len).ok_or(DecodeError::BadPrefixLength(dst_len))?;

    if msg_type == RTM_DELROUTE {
        return Ok(RouteUpdate::Del {
            prefix,
            table,
            protocol,
            metric,
        });
    }
    let nexthops = match rtm_type {
        RTN_BLACKHOLE => NextHops::Blackhole,
        RTN_UNREACHABLE => NextHops::Unreachable,
        RTN_PROHIBIT => NextHops::Prohibit,
        RTN_UNICAST => {
            if let Some(id) = nh_id {
                NextHops::Id(id)
            } else if let Some(list) = multipath.filter(|l| !l.is_empty()) {
                NextHops::List(list)
            } else if gateway.is_some() || oif != 0 {
                NextHops::List(vec![NextHop {
                    gateway,
                    ifindex: oif,
                    weight: 1,
                }])
            } else {
                NextHops::None
            }
        }
        _ => return ignored("route type not unicast/blackhole/unreachable/prohibit"),
    };
    Ok(RouteUpdate::Add {
        prefix,
        table,
        protocol,
        metric,
        nexthops,
        replace: flags & NLM_F_REPLACE != 0,
    })
}

/// Walks the `struct rtnexthop` list of an `RTA_MULTIPATH` attribute.
fn decode_multipath(family: u8, mut p: &[u8]) -> Result<Vec<NextHop>, DecodeError> {
    let mut out = Vec::new();
    while p.len() >= RTNH_LEN {
        let len = u16_at(p, 0).unwrap_or(0) as usize;
        if len < RTNH_LEN || len > p.len() {
            return Err(DecodeError::BadMultipath);
        }
        let hops = p[3];
        let ifindex = u32_at(p, 4).unwrap_or(0);
        let mut gateway = None;
        for attr in Attrs::new(&p[RTNH_LEN..len]) {
            let (t, a) = attr.map_err(|_| DecodeError::BadMultipath)?;
            match t {
                RTA_GATEWAY => gateway = Some(attr_gateway(family, a)?),
                RTA_VIA => gateway = Some(attr_via(a)?),
                _ => {}
            }
        }
        out.push(NextHop {
            gateway,
            ifindex,
            weight: hops as u16 + 1,
        });
        p = &p[align4(len).min(p.len())..];
    }
    if !p.is_empty() {
        return Err(DecodeError::BadMultipath);
    }
    Ok(out)
}

fn decode_nexthop(msg_type: u16, body: &[u8]) -> Result<RouteUpdate, DecodeError> {
    if body.len() < NHMSG_LEN {
        return Err(DecodeError::ShortBody { msg_type });
    }
    let family = body[0];
    let protocol = body[2];
    let mut id: Option<u32> = None;
    let mut oif = 0u32;
    let mut gateway = None;
    let mut group: Option<Vec<(u32, u16)>> = None;
    let mut blackhole = false;
    for attr in Attrs::new(&body[NHMSG_LEN..]) {
        let (t, p) = attr?;
        match t {
            NHA_ID => id = Some(attr_u32(t, p)?),
            NHA_OIF => oif = attr_u32(t, p)?,
            NHA_GATEWAY => {
                gateway = Some(match family {
                    AF_INET | AF_INET6 => attr_addr(t, family, p)?,
                    _ => addr_by_len(t, p)?,
                })
            }
            NHA_BLACKHOLE => blackhole = true,
            NHA_GROUP => group = Some(decode_group(p)?),
            _ => {}
        }
    }
    let id = match id {
        Some(id) if id != 0 => id,
        _ => return Err(DecodeError::MissingNextHopId),
    };
    if msg_type == RTM_DELNEXTHOP {
        return Ok(RouteUpdate::NextHopDel { id });
    }
    let nexthop = if blackhole {
        NextHopObject::Blackhole
    } else if let Some(g) = group {
        NextHopObject::Group(g)
    } else {
        NextHopObject::Single(NextHop {
            gateway,
            ifindex: oif,
            weight: 1,
        })
    };
    Ok(RouteUpdate::NextHopAdd {
        id,
        family,
        protocol,
        nexthop,
    })
}

/// `NHA_GROUP`: an array of `struct nexthop_grp { u32 id; u8 weight; u8
/// resvd1; u16 resvd2; }`.
fn decode_group(p: &[u8]) -> Result<Vec<(u32, u16)>, DecodeError> {
    if p.is_empty() || !p.len().is_multiple_of(NEXTHOP_GRP_LEN) {
        return Err(DecodeError::BadGroup);
    }
    p.chunks_exact(NEXTHOP_GRP_LEN)
        .map(|c| {
            let id = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
            if id == 0 {
                return Err(DecodeError::BadGroup);
            }
            Ok((id, c[4] as u16 + 1))
        })
        .collect()
}

/// Builders for netlink messages in the format zebra emits. Used by the
/// tests and the fuzz target; also handy to feed a consumer by hand.
pub mod build {
    use super::*;

    /// A message under construction: header, fixed body, attributes.
    #[derive(Clone, Debug)]
    pub struct Msg {
        buf: Vec<u8>,
    }

    impl Msg {
        /// Starts a message of `msg_type` with `flags` and a fixed body.
        pub fn new(msg_type: u16, flags: u16, body: &[u8]) -> Msg {
            let mut buf = vec![0u8; NLMSG_HDRLEN];
            buf[4..6].copy_from_slice(&msg_type.to_ne_bytes());
            buf[6..8].copy_from_slice(&flags.to_ne_bytes());
            buf.extend_from_slice(body);
            buf.resize(align4(buf.len()), 0);
            Msg { buf }
        }

        /// Appends an attribute (padded to 4 bytes).
        pub fn attr(mut self, t: u16, payload: &[u8]) -> Msg {
            self.buf
                .extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
            self.buf.extend_from_slice(&t.to_ne_bytes());
            self.buf.extend_from_slice(payload);
            self.buf.resize(align4(self.buf.len()), 0);
            self
        }

        pub fn attr_u32(self, t: u16, v: u32) -> Msg {
            self.attr(t, &v.to_ne_bytes())
        }

        pub fn attr_addr(self, t: u16, a: IpAddr) -> Msg {
            match a {
                IpAddr::V4(a) => self.attr(t, &a.octets()),
                IpAddr::V6(a) => self.attr(t, &a.octets()),
            }
        }

        /// Finishes: writes `nlmsg_len`.
        pub fn finish(mut self) -> Vec<u8> {
            let len = self.buf.len() as u32;
            self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
            self.buf
        }
    }

    fn family_of(p: &Prefix) -> u8 {
        if p.is_ipv4() {
            AF_INET
        } else {
            AF_INET6
        }
    }

    /// `struct rtmsg`.
    pub fn rtmsg(family: u8, dst_len: u8, table: u8, protocol: u8, rtm_type: u8) -> [u8; 12] {
        [
            family, dst_len, 0, 0, table, protocol, 0, rtm_type, 0, 0, 0, 0,
        ]
    }

    /// A route message as zebra encodes it: table in `rtm_table` when it
    /// fits in a byte, else `RT_TABLE_UNSPEC` plus `RTA_TABLE`.
    pub fn route(
        msg_type: u16,
        prefix: Prefix,
        table: u32,
        protocol: u8,
        metric: u32,
        nexthops: &NextHops,
    ) -> Vec<u8> {
        let family = family_of(&prefix);
        let rtm_type = match nexthops {
            NextHops::Blackhole => RTN_BLACKHOLE,
            NextHops::Unreachable => RTN_UNREACHABLE,
            NextHops::Prohibit => RTN_PROHIBIT,
            _ => RTN_UNICAST,
        };
        let rtm_table = if table < 256 {
            table as u8
        } else {
            RT_TABLE_UNSPEC
        };
        let flags = if msg_type == RTM_NEWROUTE {
            NLM_F_REQUEST | NLM_F_REPLACE | 0x400 /* NLM_F_CREATE */
        } else {
            NLM_F_REQUEST
        };
        let mut m = Msg::new(
            msg_type,
            flags,
            &rtmsg(family, prefix.len, rtm_table, protocol, rtm_type),
        )
        .attr_addr(RTA_DST, prefix.addr);
        if table >= 256 {
            m = m.attr_u32(RTA_TABLE, table);
        }
        m = m.attr_u32(RTA_PRIORITY, metric);
        match nexthops {
            NextHops::Id(id) => m = m.attr_u32(RTA_NH_ID, *id),
            NextHops::List(list) if list.len() == 1 => {
                if let Some(gw) = list[0].gateway {
                    m = m.attr_addr(RTA_GATEWAY, gw);
                }
                if list[0].ifindex != 0 {
                    m = m.attr_u32(RTA_OIF, list[0].ifindex);
                }
            }
            NextHops::List(list) => {
                let mut mp = Vec::new();
                for nh in list {
                    let start = mp.len();
                    mp.extend_from_slice(&[0, 0]);
                    mp.push(0);
                    mp.push(nh.weight.saturating_sub(1).min(255) as u8);
                    mp.extend_from_slice(&nh.ifindex.to_ne_bytes());
                    if let Some(gw) = nh.gateway {
                        let a: Vec<u8> = match gw {
                            IpAddr::V4(a) => a.octets().to_vec(),
                            IpAddr::V6(a) => a.octets().to_vec(),
                        };
                        mp.extend_from_slice(&((4 + a.len()) as u16).to_ne_bytes());
                        mp.extend_from_slice(&RTA_GATEWAY.to_ne_bytes());
                        mp.extend_from_slice(&a);
                    }
                    let len = (mp.len() - start) as u16;
                    mp[start..start + 2].copy_from_slice(&len.to_ne_bytes());
                    mp.resize(align4(mp.len()), 0);
                }
                m = m.attr(RTA_MULTIPATH, &mp);
            }
            _ => {}
        }
        m.finish()
    }

    /// An `RTM_NEWNEXTHOP`/`RTM_DELNEXTHOP` message.
    pub fn nexthop(msg_type: u16, id: u32, family: u8, nh: &NextHopObject) -> Vec<u8> {
        let mut m =
            Msg::new(msg_type, NLM_F_REQUEST, &[family, 0, 11, 0, 0, 0, 0, 0]).attr_u32(NHA_ID, id);
        if msg_type == RTM_NEWNEXTHOP {
            match nh {
                NextHopObject::Single(n) => {
                    if let Some(gw) = n.gateway {
                        m = m.attr_addr(NHA_GATEWAY, gw);
                    }
                    if n.ifindex != 0 {
                        m = m.attr_u32(NHA_OIF, n.ifindex);
                    }
                }
                NextHopObject::Group(g) => {
                    let mut p = Vec::new();
                    for (id, w) in g {
                        p.extend_from_slice(&id.to_ne_bytes());
                        p.push(w.saturating_sub(1).min(255) as u8);
                        p.extend_from_slice(&[0, 0, 0]);
                    }
                    m = m.attr(NHA_GROUP, &p);
                }
                NextHopObject::Blackhole => m = m.attr(NHA_BLACKHOLE, &[]),
            }
        }
        m.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    fn nh(gw: &str, ifindex: u32, weight: u16) -> NextHop {
        NextHop {
            gateway: Some(ip(gw)),
            ifindex,
            weight,
        }
    }

    #[test]
    fn prefix_masks_host_bits() {
        assert_eq!(p("10.1.2.3/8").to_string(), "10.0.0.0/8");
        assert_eq!(p("2001:db8::1/32").to_string(), "2001:db8::/32");
        assert_eq!(p("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("::/129".parse::<Prefix>().is_err());
    }

    #[test]
    fn ipv4_add_single() {
        let nhs = NextHops::List(vec![nh("192.0.2.1", 3, 1)]);
        let m = route(RTM_NEWROUTE, p("10.0.0.0/24"), 254, 196, 20, &nhs);
        assert_eq!(
            decode(&m).unwrap(),
            vec![RouteUpdate::Add {
                prefix: p("10.0.0.0/24"),
                table: 254,
                protocol: 196,
                metric: 20,
                nexthops: nhs,
                replace: true,
            }]
        );
    }

    #[test]
    fn ipv6_add_and_del_in_one_frame() {
        let nhs = NextHops::List(vec![nh("fe80::1", 7, 1)]);
        let mut m = route(
            RTM_DELROUTE,
            p("2001:db8:1::/48"),
            254,
            196,
            20,
            &NextHops::None,
        );
        m.extend(route(
            RTM_NEWROUTE,
            p("2001:db8:1::/48"),
            254,
            196,
            20,
            &nhs,
        ));
        let u = decode(&m).unwrap();
        assert_eq!(
            u[0],
            RouteUpdate::Del {
                prefix: p("2001:db8:1::/48"),
                table: 254,
                protocol: 196,
                metric: 20
            }
        );
        assert!(matches!(&u[1], RouteUpdate::Add { nexthops, .. } if *nexthops == nhs));
    }

    #[test]
    fn multipath_v4_and_v6_with_weights() {
        for (pfx, a, b) in [
            ("198.51.100.0/24", "192.0.2.1", "192.0.2.2"),
            ("2001:db8:5::/64", "2001:db8::1", "2001:db8::2"),
        ] {
            let nhs = NextHops::List(vec![nh(a, 3, 1), nh(b, 4, 5)]);
            let m = route(RTM_NEWROUTE, p(pfx), 254, 188, 110, &nhs);
            match &decode(&m).unwrap()[0] {
                RouteUpdate::Add { nexthops, .. } => assert_eq!(*nexthops, nhs),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn ipv4_mapped_gateway_of_an_ipv6_route_is_ipv4() {
        // zebra_lanyard_fpm.so's encoding of an IPv4 next hop (a BGP next
        // hop ::ffff:a.b.c.d resolved over an IPv4 core), single and ECMP.
        let single = NextHops::List(vec![nh("::ffff:10.0.12.2", 2, 1)]);
        let multi = NextHops::List(vec![nh("::ffff:10.0.12.2", 2, 1), nh("2001:db8::2", 3, 1)]);
        for (nhs, want) in [
            (single, vec![nh("10.0.12.2", 2, 1)]),
            (multi, vec![nh("10.0.12.2", 2, 1), nh("2001:db8::2", 3, 1)]),
        ] {
            let m = route(RTM_NEWROUTE, p("2001:db8:b::/48"), 1001, 186, 20, &nhs);
            match &decode(&m).unwrap()[0] {
                RouteUpdate::Add { nexthops, .. } => {
                    assert_eq!(*nexthops, NextHops::List(want))
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn large_table_goes_in_rta_table() {
        let m = route(
            RTM_NEWROUTE,
            p("10.9.0.0/16"),
            1000,
            196,
            0,
            &NextHops::Id(42),
        );
        match &decode(&m).unwrap()[0] {
            RouteUpdate::Add {
                table, nexthops, ..
            } => {
                assert_eq!(*table, 1000);
                assert_eq!(*nexthops, NextHops::Id(42));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn blackhole_and_default_route() {
        let m = route(
            RTM_NEWROUTE,
            p("0.0.0.0/0"),
            254,
            196,
            0,
            &NextHops::Blackhole,
        );
        match &decode(&m).unwrap()[0] {
            RouteUpdate::Add {
                prefix, nexthops, ..
            } => {
                assert_eq!(*prefix, p("0.0.0.0/0"));
                assert_eq!(*nexthops, NextHops::Blackhole);
            }
            other => panic!("{other:?}"),
        }
        // A default route without RTA_DST at all.
        let m = Msg::new(
            RTM_NEWROUTE,
            0,
            &rtmsg(AF_INET6, 0, 254, 196, RTN_UNREACHABLE),
        )
        .finish();
        match &decode(&m).unwrap()[0] {
            RouteUpdate::Add {
                prefix, nexthops, ..
            } => {
                assert_eq!(*prefix, p("::/0"));
                assert_eq!(*nexthops, NextHops::Unreachable);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn v4_route_via_v6_gateway() {
        let mut via = (AF_INET6 as u16).to_ne_bytes().to_vec();
        via.extend_from_slice(
            &ip("fe80::9")
                .to_string()
                .parse::<Ipv6Addr>()
                .unwrap()
                .octets(),
        );
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(AF_INET, 32, 254, 186, RTN_UNICAST))
            .attr_addr(RTA_DST, ip("203.0.113.7"))
            .attr(RTA_VIA, &via)
            .attr_u32(RTA_OIF, 2)
            .finish();
        match &decode(&m).unwrap()[0] {
            RouteUpdate::Add { nexthops, .. } => {
                assert_eq!(*nexthops, NextHops::List(vec![nh("fe80::9", 2, 1)]))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nexthop_objects() {
        let single = NextHopObject::Single(nh("192.0.2.1", 3, 1));
        let m = nexthop(RTM_NEWNEXTHOP, 10, AF_INET, &single);
        assert_eq!(
            decode(&m).unwrap(),
            vec![RouteUpdate::NextHopAdd {
                id: 10,
                family: AF_INET,
                protocol: 11,
                nexthop: single
            }]
        );
        let v6 = NextHopObject::Single(nh("2001:db8::1", 4, 1));
        let m = nexthop(RTM_NEWNEXTHOP, 11, AF_INET6, &v6);
        assert!(
            matches!(&decode(&m).unwrap()[0], RouteUpdate::NextHopAdd { nexthop, .. } if *nexthop == v6)
        );
        let group = NextHopObject::Group(vec![(10, 1), (11, 3)]);
        let m = nexthop(RTM_NEWNEXTHOP, 12, 0, &group);
        assert!(
            matches!(&decode(&m).unwrap()[0], RouteUpdate::NextHopAdd { id: 12, nexthop, .. } if *nexthop == group)
        );
        let m = nexthop(RTM_NEWNEXTHOP, 13, 0, &NextHopObject::Blackhole);
        assert!(matches!(
            &decode(&m).unwrap()[0],
            RouteUpdate::NextHopAdd {
                nexthop: NextHopObject::Blackhole,
                ..
            }
        ));
        let m = nexthop(RTM_DELNEXTHOP, 12, 0, &group);
        assert_eq!(
            decode(&m).unwrap(),
            vec![RouteUpdate::NextHopDel { id: 12 }]
        );
        // No NHA_ID.
        let m = Msg::new(RTM_NEWNEXTHOP, 0, &[AF_INET, 0, 0, 0, 0, 0, 0, 0]).finish();
        assert_eq!(decode(&m), Err(DecodeError::MissingNextHopId));
    }

    #[test]
    fn unknown_attributes_and_types_are_skipped() {
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(AF_INET, 24, 254, 196, RTN_UNICAST))
            .attr(999, &[1, 2, 3])
            .attr_addr(RTA_DST, ip("10.1.1.0"))
            .attr(RTA_PREFSRC, &[10, 1, 1, 1])
            .attr_u32(RTA_OIF, 5)
            .finish();
        match &decode(&m).unwrap()[0] {
            RouteUpdate::Add {
                prefix, nexthops, ..
            } => {
                assert_eq!(*prefix, p("10.1.1.0/24"));
                assert_eq!(
                    *nexthops,
                    NextHops::List(vec![NextHop {
                        gateway: None,
                        ifindex: 5,
                        weight: 1
                    }])
                );
            }
            other => panic!("{other:?}"),
        }
        // RTM_NEWNEIGH (EVPN MAC): ignored.
        let m = Msg::new(28, 0, &[0u8; 12]).finish();
        assert!(matches!(
            decode(&m).unwrap()[0],
            RouteUpdate::Ignored { msg_type: 28, .. }
        ));
        // A label entry without its in-label is malformed (labelfeed).
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(28, 20, 254, 0, RTN_UNICAST)).finish();
        assert!(matches!(decode(&m), Err(DecodeError::Label(_))));
        assert_eq!(decode(&[]).unwrap(), vec![]);
    }

    #[test]
    fn malformed_input_is_an_error() {
        let good = route(
            RTM_NEWROUTE,
            p("10.0.0.0/24"),
            254,
            196,
            20,
            &NextHops::List(vec![nh("192.0.2.1", 3, 1), nh("192.0.2.2", 4, 1)]),
        );
        // Every truncation is either an error or (cut on an attribute
        // boundary) still decodes; none panics.
        for n in 0..good.len() {
            let mut t = good[..n].to_vec();
            let _ = decode(&t);
            // Fix nlmsg_len to the truncated size: attribute walk must cope.
            if n >= 4 {
                t[0..4].copy_from_slice(&(n as u32).to_ne_bytes());
                let _ = decode(&t);
            }
        }
        assert!(matches!(
            decode(&good[..10]),
            Err(DecodeError::BadMessageLength { .. })
        ));
        // nlmsg_len larger than the buffer.
        let mut big = good.clone();
        big[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(decode(&big).is_err());
        // Attribute length 2 (< 4).
        let mut bad =
            Msg::new(RTM_NEWROUTE, 0, &rtmsg(AF_INET, 24, 254, 196, RTN_UNICAST)).finish();
        bad.extend_from_slice(&[2, 0, 1, 0]);
        let len = bad.len() as u32;
        bad[0..4].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(
            decode(&bad),
            Err(DecodeError::BadAttribute { attr_type: 1 })
        );
        // Wrong address size.
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(AF_INET, 24, 254, 196, RTN_UNICAST))
            .attr(RTA_DST, &[10, 0, 0])
            .finish();
        assert!(matches!(
            decode(&m),
            Err(DecodeError::BadAttributeLength { .. })
        ));
        // Prefix too long.
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(AF_INET, 33, 254, 196, RTN_UNICAST)).finish();
        assert_eq!(decode(&m), Err(DecodeError::BadPrefixLength(33)));
        // Short rtmsg.
        let m = Msg::new(RTM_NEWROUTE, 0, &[2, 24, 0, 0]).finish();
        assert_eq!(
            decode(&m),
            Err(DecodeError::ShortBody {
                msg_type: RTM_NEWROUTE
            })
        );
        // Bad group.
        let m = Msg::new(RTM_NEWNEXTHOP, 0, &[0u8; 8])
            .attr_u32(NHA_ID, 1)
            .attr(NHA_GROUP, &[1, 0, 0, 0, 0])
            .finish();
        assert_eq!(decode(&m), Err(DecodeError::BadGroup));
        // Bad multipath entry length.
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(AF_INET, 24, 254, 196, RTN_UNICAST))
            .attr(RTA_MULTIPATH, &[100, 0, 0, 0, 1, 0, 0, 0])
            .finish();
        assert_eq!(decode(&m), Err(DecodeError::BadMultipath));
    }

    /// xorshift64*: deterministic, no dependency.
    pub(crate) struct Rng(u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn corpus() -> Vec<Vec<u8>> {
        let mp4 = NextHops::List(vec![nh("192.0.2.1", 3, 1), nh("192.0.2.2", 4, 2)]);
        let mp6 = NextHops::List(vec![nh("2001:db8::1", 3, 1), nh("fe80::2", 4, 1)]);
        let mut both = route(
            RTM_DELROUTE,
            p("10.2.0.0/16"),
            254,
            196,
            20,
            &NextHops::None,
        );
        both.extend(route(RTM_NEWROUTE, p("10.2.0.0/16"), 254, 196, 20, &mp4));
        vec![
            route(RTM_NEWROUTE, p("10.0.0.0/24"), 254, 196, 20, &mp4),
            route(RTM_NEWROUTE, p("2001:db8::/32"), 1000, 188, 20, &mp6),
            route(
                RTM_NEWROUTE,
                p("10.3.0.0/24"),
                254,
                196,
                20,
                &NextHops::Id(7),
            ),
            route(
                RTM_DELROUTE,
                p("2001:db8::/32"),
                254,
                196,
                20,
                &NextHops::None,
            ),
            nexthop(
                RTM_NEWNEXTHOP,
                7,
                0,
                &NextHopObject::Group(vec![(1, 1), (2, 1)]),
            ),
            nexthop(
                RTM_NEWNEXTHOP,
                1,
                AF_INET6,
                &NextHopObject::Single(nh("2001:db8::1", 2, 1)),
            ),
            both,
        ]
    }

    #[test]
    fn random_mutations_never_panic() {
        let corpus = corpus();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut ok, mut err) = (0u32, 0u32);
        for i in 0..20_000 {
            let mut m = corpus[i % corpus.len()].clone();
            for _ in 0..1 + rng.below(4) {
                match rng.below(5) {
                    0 | 1 => {
                        let at = rng.below(m.len());
                        m[at] = rng.next() as u8;
                    }
                    2 => {
                        let at = rng.below(m.len());
                        m[at] ^= 1 << rng.below(8);
                    }
                    3 => {
                        let n = rng.below(m.len() + 1);
                        m.truncate(n);
                    }
                    _ => {
                        let at = rng.below(m.len() + 1);
                        m.insert(at, rng.next() as u8);
                    }
                }
                if m.is_empty() {
                    break;
                }
            }
            match decode(&m) {
                Ok(updates) => {
                    ok += 1;
                    for u in updates {
                        if let RouteUpdate::Add { prefix, .. } = u {
                            assert!(prefix.len <= if prefix.is_ipv4() { 32 } else { 128 });
                        }
                    }
                }
                Err(_) => err += 1,
            }
        }
        // Both outcomes occur: the mutations are neither all fatal nor all
        // harmless.
        assert!(ok > 100 && err > 100, "ok {ok} err {err}");
    }

    #[test]
    fn pure_garbage_never_panics() {
        let mut rng = Rng(12345);
        for _ in 0..20_000 {
            let n = rng.below(200);
            let mut m: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            // Often give it a plausible header so the body parsers run.
            if n >= 16 && rng.below(2) == 0 {
                m[0..4].copy_from_slice(&(n as u32).to_ne_bytes());
                let t = [RTM_NEWROUTE, RTM_DELROUTE, RTM_NEWNEXTHOP, RTM_DELNEXTHOP][rng.below(4)];
                m[4..6].copy_from_slice(&t.to_ne_bytes());
                if n > 16 {
                    m[16] = [AF_INET, AF_INET6][rng.below(2)];
                }
            }
            let _ = decode(&m);
        }
    }
}
