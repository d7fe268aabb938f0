//! The virtual-switch peer protocol (docs/virtual-switch.md): messages
//! two Lanyards of one pair exchange over the peer link (one message per
//! Ethernet frame of EtherType [`ETHERTYPE`]) and, for dual-active
//! detection, as UDP keepalives over a separate path.
//!
//! Every message is length-prefixed and versioned:
//!
//! ```text
//! 0      2        3      4         6         8
//! +------+--------+------+---------+---------+---------- ... ----+
//! | "LV" | version| type | domain  | length  | payload (length)   |
//! +------+--------+------+---------+---------+---------- ... ----+
//! ```
//!
//! Multi-byte fields are big-endian. A receiver decodes only the version
//! it speaks ([`VERSION`]) and drops (and counts) anything else; trailing
//! bytes after `length` (Ethernet padding) are ignored. Decoding borrows
//! the buffer and never allocates.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Local experimental EtherType (IEEE 802 "Local Experimental 1").
pub const ETHERTYPE: u16 = 0x88b5;
/// Protocol version spoken.
pub const VERSION: u8 = 1;
/// Header bytes.
pub const HEADER_LEN: usize = 8;
/// Largest payload: one message fits a 1,500-byte frame.
pub const MAX_PAYLOAD: usize = 1400;
/// Bytes of one MAC entry.
pub const MAC_ENTRY_LEN: usize = 12;
/// Most MAC entries in one update.
pub const MAX_MAC_ENTRIES: usize = (MAX_PAYLOAD - 2) / MAC_ENTRY_LEN;
/// Bytes of one neighbour entry.
pub const NEIGH_ENTRY_LEN: usize = 28;
/// Most neighbour entries in one update.
pub const MAX_NEIGH_ENTRIES: usize = (MAX_PAYLOAD - 2) / NEIGH_ENTRY_LEN;
/// Bytes of one snooping group entry.
pub const GROUP_ENTRY_LEN: usize = 24;
/// Most group entries in one update.
pub const MAX_GROUP_ENTRIES: usize = (MAX_PAYLOAD - 2) / GROUP_ENTRY_LEN;
/// Bytes of a source-filter message before its sources.
pub const FILTER_HEAD_LEN: usize = 24;
/// Bytes of one source address (IPv4 in the first 4, the rest zero).
pub const SOURCE_LEN: usize = 16;
/// Most sources in one source-filter message.
pub const MAX_FILTER_SOURCES: usize = (MAX_PAYLOAD - FILTER_HEAD_LEN) / SOURCE_LEN;
const MAGIC: [u8; 2] = *b"LV";
const HELLO_LEN: usize = 20;
const LACP_LEN: usize = 14;

/// Why a message was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerError {
    /// Shorter than its header or its `length`.
    Truncated,
    /// Not a peer-protocol message.
    BadMagic,
    /// A version this node does not speak.
    Version(u8),
    /// An unknown message type.
    UnknownType(u8),
    /// `length` wrong for the type (or above [`MAX_PAYLOAD`]).
    BadLength,
    /// A field out of range (MAC operation, flags).
    BadField,
    /// The output buffer is too small, or too many entries.
    NoRoom,
}

impl PeerError {
    /// Counter name (`show virtual-switch`).
    pub fn as_str(self) -> &'static str {
        match self {
            PeerError::Truncated => "truncated",
            PeerError::BadMagic => "bad_magic",
            PeerError::Version(_) => "bad_version",
            PeerError::UnknownType(_) => "unknown_type",
            PeerError::BadLength => "bad_length",
            PeerError::BadField => "bad_field",
            PeerError::NoRoom => "no_room",
        }
    }
}

impl std::fmt::Display for PeerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerError::Version(v) => write!(f, "version {v} (this node speaks {VERSION})"),
            PeerError::UnknownType(t) => write!(f, "unknown message type {t}"),
            e => f.write_str(e.as_str()),
        }
    }
}

/// A node's state, sent on the peer link and as keepalive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Role priority (lower: primary).
    pub priority: u16,
    /// The sender's own id (its keepalive address folded, or its MAC).
    pub node: [u8; 6],
    /// The pair's system MAC as the sender has it configured.
    pub system: [u8; 6],
    /// The sender sees the peer link up (keepalive only).
    pub peer_link_up: bool,
    /// The sender holds a complete copy of its peer's state.
    pub synced: bool,
    /// The sender is primary (as it decided).
    pub primary: bool,
    /// Incremented per message.
    pub seq: u32,
}

/// One learned address, bound to a multichassis channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacEntry {
    /// The station address.
    pub mac: [u8; 6],
    /// Its VLAN.
    pub vlan: u16,
    /// Multichassis channel id; 0: a port of the sender that is not in a
    /// multichassis channel (reach it over the peer link).
    pub channel: u16,
    /// Added (or refreshed) / removed.
    pub add: bool,
}

/// LACP view of one multichassis channel on the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LacpState {
    /// Multichassis channel id.
    pub channel: u16,
    /// The partner system the sender's members see (zero: none yet).
    pub partner_system: [u8; 6],
    /// The partner's key on the sender's members.
    pub partner_key: u16,
    /// Members with link up on the sender.
    pub members_up: u8,
    /// Members collecting and distributing on the sender.
    pub members_active: u8,
}

/// One ARP/ND neighbour of an SVI (a VLAN interface) of the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighEntry {
    /// The neighbour's address (IPv4: ARP, IPv6: ND).
    pub ip: IpAddr,
    /// Its link-layer address.
    pub mac: [u8; 6],
    /// The VLAN of the SVI it was resolved on.
    pub vlan: u16,
    /// Resolved (or refreshed) / gone.
    pub add: bool,
}

/// One IGMP/MLD snooping membership of the sender: a port of `vlan`
/// behind multichassis channel `channel` (0: a port of the sender outside
/// any channel) wants `group`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    /// The group (224.0.0.0/4 or ff00::/8).
    pub group: IpAddr,
    /// The snooping VLAN.
    pub vlan: u16,
    /// Multichassis channel id; 0: a port of the sender outside any channel.
    pub channel: u16,
    /// Joined / left.
    pub add: bool,
}

/// Which sources of a group a membership forwards (IGMPv3/MLDv2 filter
/// mode, as merged over the sender's ports behind one channel id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceMode {
    /// Every source (IGMPv2/MLDv1, or EXCLUDE with an empty list).
    Any = 0,
    /// Only the listed sources.
    Include = 1,
    /// Every source but the listed ones.
    Exclude = 2,
}

/// The source filter of one of the sender's memberships (type 11): the
/// sources of `group` a port of `vlan` behind `channel` wants. Sent after
/// the membership's [`GroupEntry`]; gone with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupFilter<'a> {
    /// The group (224.0.0.0/4 or ff00::/8).
    pub group: IpAddr,
    /// The snooping VLAN.
    pub vlan: u16,
    /// Multichassis channel id; 0: a port of the sender outside any channel.
    pub channel: u16,
    /// Include or exclude the sources listed (or every source).
    pub mode: SourceMode,
    /// The sources, [`SOURCE_LEN`] bytes each, in the buffer.
    sources: &'a [u8],
}

impl<'a> GroupFilter<'a> {
    /// Number of sources.
    pub fn len(&self) -> usize {
        self.sources.len() / SOURCE_LEN
    }
    /// No sources.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }
    /// The sources, decoded (the decoder checked every one).
    pub fn sources(&self) -> impl Iterator<Item = IpAddr> + 'a {
        let family = if self.group.is_ipv4() { 4 } else { 6 };
        self.sources
            .chunks_exact(SOURCE_LEN)
            .map(move |b| read_ip(family, b))
    }
}

/// A decoded message; MAC entries stay in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// Peer-link hello.
    Hello(Hello),
    /// Keepalive over the separate path.
    Keepalive(Hello),
    /// The sender stopped without a hand-over (sent for it by its
    /// guardian over the keepalive path): the receiver is alone at once
    /// instead of waiting for the keepalive timeout.
    Goodbye(Hello),
    /// Learned addresses added or removed.
    Macs(MacEntries<'a>),
    /// A channel's LACP view.
    Lacp(LacpState),
    /// "Send me everything" (a node that joins or rejoins).
    SyncRequest,
    /// A full copy starts; entries not refreshed before the matching
    /// [`Message::SyncEnd`] are stale.
    SyncStart {
        /// Copy number, echoed by the end marker.
        generation: u32,
    },
    /// ARP/ND neighbours added or removed.
    Neighbors(NeighEntries<'a>),
    /// Snooping memberships added or removed.
    Groups(GroupEntries<'a>),
    /// The source filter of one membership (type 11, added within
    /// version 1: a receiver without it forwards every source).
    GroupFilter(GroupFilter<'a>),
    /// The full copy is complete: `entries` MAC entries were sent.
    SyncEnd {
        /// The start's copy number.
        generation: u32,
        /// MAC entries sent in this copy.
        entries: u32,
    },
}

/// The MAC entries of an update, read from the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacEntries<'a>(&'a [u8]);

impl<'a> MacEntries<'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len() / MAC_ENTRY_LEN
    }
    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The entries, decoded.
    pub fn iter(&self) -> impl Iterator<Item = MacEntry> + 'a {
        self.0.chunks_exact(MAC_ENTRY_LEN).map(|e| MacEntry {
            mac: e[0..6].try_into().unwrap_or_default(),
            vlan: be16(&e[6..8]),
            channel: be16(&e[8..10]),
            add: e[10] == 1,
        })
    }
}

/// The neighbour entries of an update, read from the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighEntries<'a>(&'a [u8]);

impl<'a> NeighEntries<'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len() / NEIGH_ENTRY_LEN
    }
    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The entries, decoded (the decoder checked every field).
    pub fn iter(&self) -> impl Iterator<Item = NeighEntry> + 'a {
        self.0.chunks_exact(NEIGH_ENTRY_LEN).map(|e| NeighEntry {
            ip: read_ip(e[1], &e[12..28]),
            mac: e[4..10].try_into().unwrap_or_default(),
            vlan: be16(&e[2..4]),
            add: e[0] == 1,
        })
    }
}

/// The group entries of an update, read from the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupEntries<'a>(&'a [u8]);

impl<'a> GroupEntries<'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len() / GROUP_ENTRY_LEN
    }
    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The entries, decoded (the decoder checked every field).
    pub fn iter(&self) -> impl Iterator<Item = GroupEntry> + 'a {
        self.0.chunks_exact(GROUP_ENTRY_LEN).map(|e| GroupEntry {
            group: read_ip(e[1], &e[8..24]),
            vlan: be16(&e[2..4]),
            channel: be16(&e[4..6]),
            add: e[0] == 1,
        })
    }
}

/// An address field of 16 bytes: IPv4 in the first 4 (the rest zero).
fn read_ip(family: u8, b: &[u8]) -> IpAddr {
    let mut o = [0u8; 16];
    o.copy_from_slice(&b[..16]);
    if family == 4 {
        IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], o[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(o))
    }
}

fn write_ip(ip: IpAddr, family: &mut u8, b: &mut [u8]) {
    b.fill(0);
    match ip {
        IpAddr::V4(a) => {
            *family = 4;
            b[..4].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            *family = 6;
            b.copy_from_slice(&a.octets());
        }
    }
}

/// Family byte and address field valid (IPv4: the 12 bytes after it zero).
fn ip_ok(family: u8, b: &[u8]) -> bool {
    match family {
        4 => b[4..].iter().all(|x| *x == 0),
        6 => true,
        _ => false,
    }
}

/// Checks the `count` + entries payload of an entry list.
fn entries_body(p: &[u8], len: usize, size: usize, max: usize) -> Result<&[u8], PeerError> {
    if len < 2 {
        return Err(PeerError::BadLength);
    }
    let n = be16(&p[0..2]) as usize;
    if n > max || len != 2 + n * size {
        return Err(PeerError::BadLength);
    }
    Ok(&p[2..])
}

const T_HELLO: u8 = 1;
const T_KEEPALIVE: u8 = 2;
const T_MACS: u8 = 3;
const T_LACP: u8 = 4;
const T_SYNC_REQUEST: u8 = 5;
const T_SYNC_START: u8 = 6;
const T_SYNC_END: u8 = 7;
const T_NEIGHBORS: u8 = 8;
const T_GROUPS: u8 = 9;
const T_GOODBYE: u8 = 10;
const T_GROUP_FILTER: u8 = 11;

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Decodes one message: its domain id and contents.
pub fn decode(buf: &[u8]) -> Result<(u16, Message<'_>), PeerError> {
    if buf.len() < HEADER_LEN {
        return Err(PeerError::Truncated);
    }
    if buf[0..2] != MAGIC {
        return Err(PeerError::BadMagic);
    }
    if buf[2] != VERSION {
        return Err(PeerError::Version(buf[2]));
    }
    let ty = buf[3];
    let domain = be16(&buf[4..6]);
    let len = be16(&buf[6..8]) as usize;
    if len > MAX_PAYLOAD {
        return Err(PeerError::BadLength);
    }
    let p = buf
        .get(HEADER_LEN..HEADER_LEN + len)
        .ok_or(PeerError::Truncated)?;
    let need = |n: usize| {
        if len == n {
            Ok(())
        } else {
            Err(PeerError::BadLength)
        }
    };
    let msg = match ty {
        T_HELLO | T_KEEPALIVE | T_GOODBYE => {
            need(HELLO_LEN)?;
            let flags = p[14];
            if flags & !0b111 != 0 || p[15] != 0 {
                return Err(PeerError::BadField);
            }
            let h = Hello {
                priority: be16(&p[0..2]),
                node: p[2..8].try_into().map_err(|_| PeerError::Truncated)?,
                system: p[8..14].try_into().map_err(|_| PeerError::Truncated)?,
                peer_link_up: flags & 1 != 0,
                synced: flags & 2 != 0,
                primary: flags & 4 != 0,
                seq: be32(&p[16..20]),
            };
            match ty {
                T_HELLO => Message::Hello(h),
                T_KEEPALIVE => Message::Keepalive(h),
                _ => Message::Goodbye(h),
            }
        }
        T_MACS => {
            if len < 2 {
                return Err(PeerError::BadLength);
            }
            let n = be16(&p[0..2]) as usize;
            if n > MAX_MAC_ENTRIES {
                return Err(PeerError::BadLength);
            }
            need(2 + n * MAC_ENTRY_LEN)?;
            let body = &p[2..];
            for e in body.chunks_exact(MAC_ENTRY_LEN) {
                if !matches!(e[10], 1 | 2) || e[11] != 0 || be16(&e[6..8]) > 4095 {
                    return Err(PeerError::BadField);
                }
            }
            Message::Macs(MacEntries(body))
        }
        T_LACP => {
            need(LACP_LEN)?;
            Message::Lacp(LacpState {
                channel: be16(&p[0..2]),
                partner_system: p[2..8].try_into().map_err(|_| PeerError::Truncated)?,
                partner_key: be16(&p[8..10]),
                members_up: p[10],
                members_active: p[11],
            })
        }
        T_SYNC_REQUEST => {
            need(0)?;
            Message::SyncRequest
        }
        T_SYNC_START => {
            need(4)?;
            Message::SyncStart {
                generation: be32(&p[0..4]),
            }
        }
        T_SYNC_END => {
            need(8)?;
            Message::SyncEnd {
                generation: be32(&p[0..4]),
                entries: be32(&p[4..8]),
            }
        }
        T_NEIGHBORS => {
            let body = entries_body(p, len, NEIGH_ENTRY_LEN, MAX_NEIGH_ENTRIES)?;
            for e in body.chunks_exact(NEIGH_ENTRY_LEN) {
                let mac_ok = e[4] & 1 == 0 && e[4..10] != [0; 6];
                if !matches!(e[0], 1 | 2)
                    || !ip_ok(e[1], &e[12..28])
                    || be16(&e[2..4]) > 4095
                    || !mac_ok
                    || e[10..12] != [0, 0]
                {
                    return Err(PeerError::BadField);
                }
            }
            Message::Neighbors(NeighEntries(body))
        }
        T_GROUPS => {
            let body = entries_body(p, len, GROUP_ENTRY_LEN, MAX_GROUP_ENTRIES)?;
            for e in body.chunks_exact(GROUP_ENTRY_LEN) {
                if !matches!(e[0], 1 | 2)
                    || !ip_ok(e[1], &e[8..24])
                    || !read_ip(e[1], &e[8..24]).is_multicast()
                    || be16(&e[2..4]) > 4095
                    || e[6..8] != [0, 0]
                {
                    return Err(PeerError::BadField);
                }
            }
            Message::Groups(GroupEntries(body))
        }
        T_GROUP_FILTER => {
            if len < FILTER_HEAD_LEN {
                return Err(PeerError::BadLength);
            }
            let n = be16(&p[6..8]) as usize;
            if n > MAX_FILTER_SOURCES {
                return Err(PeerError::BadLength);
            }
            need(FILTER_HEAD_LEN + n * SOURCE_LEN)?;
            let mode = match p[0] {
                0 if n == 0 => SourceMode::Any,
                1 => SourceMode::Include,
                2 => SourceMode::Exclude,
                _ => return Err(PeerError::BadField),
            };
            let family = p[1];
            if !ip_ok(family, &p[8..24])
                || !read_ip(family, &p[8..24]).is_multicast()
                || be16(&p[2..4]) > 4095
            {
                return Err(PeerError::BadField);
            }
            let sources = &p[FILTER_HEAD_LEN..];
            for b in sources.chunks_exact(SOURCE_LEN) {
                let a = read_ip(family, b);
                if !ip_ok(family, b) || a.is_multicast() || a.is_unspecified() {
                    return Err(PeerError::BadField);
                }
            }
            Message::GroupFilter(GroupFilter {
                group: read_ip(family, &p[8..24]),
                vlan: be16(&p[2..4]),
                channel: be16(&p[4..6]),
                mode,
                sources,
            })
        }
        t => return Err(PeerError::UnknownType(t)),
    };
    Ok((domain, msg))
}

fn header(out: &mut [u8], ty: u8, domain: u16, len: usize) -> Result<&mut [u8], PeerError> {
    let total = HEADER_LEN + len;
    if out.len() < total || len > MAX_PAYLOAD {
        return Err(PeerError::NoRoom);
    }
    out[0..2].copy_from_slice(&MAGIC);
    out[2] = VERSION;
    out[3] = ty;
    out[4..6].copy_from_slice(&domain.to_be_bytes());
    out[6..8].copy_from_slice(&(len as u16).to_be_bytes());
    Ok(&mut out[HEADER_LEN..total])
}

/// Encodes a message other than a MAC update (see [`encode_macs`]);
/// returns its length.
pub fn encode(domain: u16, msg: &Message<'_>, out: &mut [u8]) -> Result<usize, PeerError> {
    match *msg {
        Message::Hello(h) | Message::Keepalive(h) | Message::Goodbye(h) => {
            let ty = match msg {
                Message::Hello(_) => T_HELLO,
                Message::Keepalive(_) => T_KEEPALIVE,
                _ => T_GOODBYE,
            };
            let p = header(out, ty, domain, HELLO_LEN)?;
            p[0..2].copy_from_slice(&h.priority.to_be_bytes());
            p[2..8].copy_from_slice(&h.node);
            p[8..14].copy_from_slice(&h.system);
            p[14] = h.peer_link_up as u8 | (h.synced as u8) << 1 | (h.primary as u8) << 2;
            p[15] = 0;
            p[16..20].copy_from_slice(&h.seq.to_be_bytes());
            Ok(HEADER_LEN + HELLO_LEN)
        }
        Message::Macs(m) => {
            let p = header(out, T_MACS, domain, 2 + m.0.len())?;
            p[0..2].copy_from_slice(&(m.len() as u16).to_be_bytes());
            p[2..].copy_from_slice(m.0);
            Ok(HEADER_LEN + 2 + m.0.len())
        }
        Message::Neighbors(m) => {
            let p = header(out, T_NEIGHBORS, domain, 2 + m.0.len())?;
            p[0..2].copy_from_slice(&(m.len() as u16).to_be_bytes());
            p[2..].copy_from_slice(m.0);
            Ok(HEADER_LEN + 2 + m.0.len())
        }
        Message::Groups(m) => {
            let p = header(out, T_GROUPS, domain, 2 + m.0.len())?;
            p[0..2].copy_from_slice(&(m.len() as u16).to_be_bytes());
            p[2..].copy_from_slice(m.0);
            Ok(HEADER_LEN + 2 + m.0.len())
        }
        Message::GroupFilter(f) => {
            let len = FILTER_HEAD_LEN + f.sources.len();
            let p = header(out, T_GROUP_FILTER, domain, len)?;
            filter_head(&f.group, f.vlan, f.channel, f.mode, f.len(), p)?;
            p[FILTER_HEAD_LEN..].copy_from_slice(f.sources);
            Ok(HEADER_LEN + len)
        }
        Message::Lacp(l) => {
            let p = header(out, T_LACP, domain, LACP_LEN)?;
            p[0..2].copy_from_slice(&l.channel.to_be_bytes());
            p[2..8].copy_from_slice(&l.partner_system);
            p[8..10].copy_from_slice(&l.partner_key.to_be_bytes());
            p[10] = l.members_up;
            p[11] = l.members_active;
            p[12..14].fill(0);
            Ok(HEADER_LEN + LACP_LEN)
        }
        Message::SyncRequest => {
            header(out, T_SYNC_REQUEST, domain, 0)?;
            Ok(HEADER_LEN)
        }
        Message::SyncStart { generation } => {
            let p = header(out, T_SYNC_START, domain, 4)?;
            p.copy_from_slice(&generation.to_be_bytes());
            Ok(HEADER_LEN + 4)
        }
        Message::SyncEnd {
            generation,
            entries,
        } => {
            let p = header(out, T_SYNC_END, domain, 8)?;
            p[0..4].copy_from_slice(&generation.to_be_bytes());
            p[4..8].copy_from_slice(&entries.to_be_bytes());
            Ok(HEADER_LEN + 8)
        }
    }
}

/// Encodes a MAC update of at most [`MAX_MAC_ENTRIES`] entries.
pub fn encode_macs(domain: u16, entries: &[MacEntry], out: &mut [u8]) -> Result<usize, PeerError> {
    if entries.len() > MAX_MAC_ENTRIES {
        return Err(PeerError::NoRoom);
    }
    let len = 2 + entries.len() * MAC_ENTRY_LEN;
    let p = header(out, T_MACS, domain, len)?;
    p[0..2].copy_from_slice(&(entries.len() as u16).to_be_bytes());
    for (e, b) in entries.iter().zip(p[2..].chunks_exact_mut(MAC_ENTRY_LEN)) {
        if e.vlan > 4095 {
            return Err(PeerError::BadField);
        }
        b[0..6].copy_from_slice(&e.mac);
        b[6..8].copy_from_slice(&e.vlan.to_be_bytes());
        b[8..10].copy_from_slice(&e.channel.to_be_bytes());
        b[10] = if e.add { 1 } else { 2 };
        b[11] = 0;
    }
    Ok(HEADER_LEN + len)
}

/// Encodes a neighbour update of at most [`MAX_NEIGH_ENTRIES`] entries.
pub fn encode_neighbors(
    domain: u16,
    entries: &[NeighEntry],
    out: &mut [u8],
) -> Result<usize, PeerError> {
    if entries.len() > MAX_NEIGH_ENTRIES {
        return Err(PeerError::NoRoom);
    }
    let len = 2 + entries.len() * NEIGH_ENTRY_LEN;
    let p = header(out, T_NEIGHBORS, domain, len)?;
    p[0..2].copy_from_slice(&(entries.len() as u16).to_be_bytes());
    for (e, b) in entries.iter().zip(p[2..].chunks_exact_mut(NEIGH_ENTRY_LEN)) {
        if e.vlan > 4095 || e.mac[0] & 1 != 0 || e.mac == [0; 6] {
            return Err(PeerError::BadField);
        }
        b[0] = if e.add { 1 } else { 2 };
        b[2..4].copy_from_slice(&e.vlan.to_be_bytes());
        b[4..10].copy_from_slice(&e.mac);
        b[10..12].fill(0);
        let (head, addr) = b.split_at_mut(12);
        write_ip(e.ip, &mut head[1], addr);
    }
    Ok(HEADER_LEN + len)
}

/// Encodes a group update of at most [`MAX_GROUP_ENTRIES`] entries.
pub fn encode_groups(
    domain: u16,
    entries: &[GroupEntry],
    out: &mut [u8],
) -> Result<usize, PeerError> {
    if entries.len() > MAX_GROUP_ENTRIES {
        return Err(PeerError::NoRoom);
    }
    let len = 2 + entries.len() * GROUP_ENTRY_LEN;
    let p = header(out, T_GROUPS, domain, len)?;
    p[0..2].copy_from_slice(&(entries.len() as u16).to_be_bytes());
    for (e, b) in entries.iter().zip(p[2..].chunks_exact_mut(GROUP_ENTRY_LEN)) {
        if e.vlan > 4095 || !e.group.is_multicast() {
            return Err(PeerError::BadField);
        }
        b[0] = if e.add { 1 } else { 2 };
        b[2..4].copy_from_slice(&e.vlan.to_be_bytes());
        b[4..6].copy_from_slice(&e.channel.to_be_bytes());
        b[6..8].fill(0);
        let (head, addr) = b.split_at_mut(8);
        write_ip(e.group, &mut head[1], addr);
    }
    Ok(HEADER_LEN + len)
}

fn filter_head(
    group: &IpAddr,
    vlan: u16,
    channel: u16,
    mode: SourceMode,
    n: usize,
    p: &mut [u8],
) -> Result<(), PeerError> {
    if vlan > 4095 || !group.is_multicast() || (mode == SourceMode::Any && n != 0) {
        return Err(PeerError::BadField);
    }
    p[0] = mode as u8;
    p[2..4].copy_from_slice(&vlan.to_be_bytes());
    p[4..6].copy_from_slice(&channel.to_be_bytes());
    p[6..8].copy_from_slice(&(n as u16).to_be_bytes());
    let (head, addr) = p[..FILTER_HEAD_LEN].split_at_mut(8);
    write_ip(*group, &mut head[1], addr);
    Ok(())
}

/// Encodes the source filter of one membership (type 11): at most
/// [`MAX_FILTER_SOURCES`] unicast sources of the group's family, none
/// with [`SourceMode::Any`].
pub fn encode_group_filter(
    domain: u16,
    group: IpAddr,
    vlan: u16,
    channel: u16,
    mode: SourceMode,
    sources: &[IpAddr],
    out: &mut [u8],
) -> Result<usize, PeerError> {
    if sources.len() > MAX_FILTER_SOURCES {
        return Err(PeerError::NoRoom);
    }
    let len = FILTER_HEAD_LEN + sources.len() * SOURCE_LEN;
    let p = header(out, T_GROUP_FILTER, domain, len)?;
    filter_head(&group, vlan, channel, mode, sources.len(), p)?;
    for (s, b) in sources
        .iter()
        .zip(p[FILTER_HEAD_LEN..].chunks_exact_mut(SOURCE_LEN))
    {
        if s.is_ipv4() != group.is_ipv4() || s.is_multicast() || s.is_unspecified() {
            return Err(PeerError::BadField);
        }
        let mut family = 0;
        write_ip(*s, &mut family, b);
    }
    Ok(HEADER_LEN + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            priority: 100,
            node: [2, 0, 0, 0, 0, 1],
            system: [2, 0, 0, 0, 7, 0],
            peer_link_up: true,
            synced: false,
            primary: true,
            seq: 0xdead_beef,
        }
    }

    #[test]
    fn round_trips() {
        let mut b = [0u8; HEADER_LEN + MAX_PAYLOAD];
        for m in [
            Message::Hello(hello()),
            Message::Keepalive(hello()),
            Message::Goodbye(hello()),
            Message::Lacp(LacpState {
                channel: 3,
                partner_system: [2, 1, 2, 3, 4, 5],
                partner_key: 17,
                members_up: 2,
                members_active: 1,
            }),
            Message::SyncRequest,
            Message::SyncStart { generation: 9 },
            Message::SyncEnd {
                generation: 9,
                entries: 100_000,
            },
        ] {
            let n = encode(7, &m, &mut b).unwrap();
            assert_eq!(decode(&b[..n]), Ok((7, m)));
            // Ethernet padding after the message is ignored.
            assert_eq!(decode(&b[..n + 10]), Ok((7, m)));
            // Every truncation is refused.
            for k in 0..n {
                assert_eq!(decode(&b[..k]), Err(PeerError::Truncated), "{m:?} at {k}");
            }
        }
    }

    #[test]
    fn mac_updates() {
        let entries: Vec<MacEntry> = (0..MAX_MAC_ENTRIES as u16)
            .map(|i| MacEntry {
                mac: [2, 0, 0, 0, (i >> 8) as u8, i as u8],
                vlan: i % 4095,
                channel: i % 3,
                add: i % 5 != 0,
            })
            .collect();
        let mut b = [0u8; HEADER_LEN + MAX_PAYLOAD];
        let n = encode_macs(1, &entries, &mut b).unwrap();
        let (d, Message::Macs(m)) = decode(&b[..n]).unwrap() else {
            panic!()
        };
        assert_eq!(d, 1);
        assert_eq!(m.iter().collect::<Vec<_>>(), entries);
        // Re-encoding the view gives the same bytes.
        let mut c = [0u8; HEADER_LEN + MAX_PAYLOAD];
        assert_eq!(encode(1, &Message::Macs(m), &mut c), Ok(n));
        assert_eq!(b[..n], c[..n]);
        let too_many = vec![entries[0]; MAX_MAC_ENTRIES + 1];
        assert_eq!(
            encode_macs(1, &too_many, &mut [0u8; 4096]),
            Err(PeerError::NoRoom)
        );
        // A bad operation byte.
        b[HEADER_LEN + 2 + 10] = 9;
        assert_eq!(decode(&b[..n]), Err(PeerError::BadField));
        // Count and length disagree.
        b[HEADER_LEN + 2 + 10] = 1;
        b[HEADER_LEN + 1] = b[HEADER_LEN + 1].wrapping_sub(1);
        assert_eq!(decode(&b[..n]), Err(PeerError::BadLength));
    }

    fn neighbors() -> Vec<NeighEntry> {
        (0..MAX_NEIGH_ENTRIES as u16)
            .map(|i| NeighEntry {
                ip: if i % 2 == 0 {
                    IpAddr::V4(Ipv4Addr::new(10, 0, (i >> 8) as u8, i as u8))
                } else {
                    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i))
                },
                mac: [2, 0, 0, 0, (i >> 8) as u8, i as u8],
                vlan: i % 4095,
                add: i % 5 != 0,
            })
            .collect()
    }

    fn groups() -> Vec<GroupEntry> {
        (0..MAX_GROUP_ENTRIES as u16)
            .map(|i| GroupEntry {
                group: if i % 2 == 0 {
                    IpAddr::V4(Ipv4Addr::new(239, 1, (i >> 8) as u8, i as u8))
                } else {
                    IpAddr::V6(Ipv6Addr::new(0xff3e, 0, 0, 0, 0, 0, 0, i))
                },
                vlan: i % 4095,
                channel: i % 3,
                add: i % 4 != 0,
            })
            .collect()
    }

    fn filters() -> Vec<(IpAddr, Vec<IpAddr>)> {
        vec![
            (
                "232.1.1.1".parse().unwrap(),
                vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()],
            ),
            (
                "ff3e::8000:1".parse().unwrap(),
                vec!["2001:db8::1".parse().unwrap()],
            ),
            ("239.1.1.1".parse().unwrap(), vec![]),
        ]
    }

    #[test]
    fn group_filters() {
        let mut b = [0u8; HEADER_LEN + MAX_PAYLOAD];
        for (g, srcs) in filters() {
            for mode in [SourceMode::Include, SourceMode::Exclude] {
                let n = encode_group_filter(3, g, 10, 2, mode, &srcs, &mut b).unwrap();
                assert_eq!(n, HEADER_LEN + FILTER_HEAD_LEN + srcs.len() * SOURCE_LEN);
                let (3, Message::GroupFilter(f)) = decode(&b[..n]).unwrap() else {
                    panic!("not a filter");
                };
                assert_eq!((f.group, f.vlan, f.channel, f.mode), (g, 10, 2, mode));
                assert_eq!(f.sources().collect::<Vec<_>>(), srcs);
                let mut c = [0u8; HEADER_LEN + MAX_PAYLOAD];
                assert_eq!(encode(3, &Message::GroupFilter(f), &mut c), Ok(n));
                assert_eq!(b[..n], c[..n]);
                for k in 0..n {
                    assert!(decode(&b[..k]).is_err(), "truncated at {k}");
                }
            }
        }
        let g: IpAddr = "232.1.1.1".parse().unwrap();
        let n = encode_group_filter(3, g, 10, 0, SourceMode::Any, &[], &mut b).unwrap();
        assert!(matches!(
            decode(&b[..n]),
            Ok((3, Message::GroupFilter(f))) if f.mode == SourceMode::Any && f.is_empty()
        ));
        // Refused: sources with Any, a source of the other family or a
        // multicast one, a unicast group, too many sources.
        let s4: IpAddr = "10.0.0.1".parse().unwrap();
        let s6: IpAddr = "2001:db8::1".parse().unwrap();
        let bad = |g: IpAddr, m, s: &[IpAddr]| {
            let mut b = [0u8; HEADER_LEN + MAX_PAYLOAD];
            encode_group_filter(3, g, 10, 0, m, s, &mut b)
        };
        assert_eq!(bad(g, SourceMode::Any, &[s4]), Err(PeerError::BadField));
        assert_eq!(bad(g, SourceMode::Include, &[s6]), Err(PeerError::BadField));
        assert_eq!(bad(g, SourceMode::Include, &[g]), Err(PeerError::BadField));
        assert_eq!(bad(s4, SourceMode::Include, &[]), Err(PeerError::BadField));
        let many = vec![s4; MAX_FILTER_SOURCES + 1];
        assert_eq!(bad(g, SourceMode::Include, &many), Err(PeerError::NoRoom));
        // On the wire: a bad mode, Any with sources, a multicast source,
        // a count that disagrees with the length.
        let n = encode_group_filter(3, g, 10, 0, SourceMode::Include, &[s4], &mut b).unwrap();
        let p = HEADER_LEN;
        for (at, v, e) in [
            (p, 3u8, PeerError::BadField),
            (p, 0, PeerError::BadField),
            (p + FILTER_HEAD_LEN, 224, PeerError::BadField),
            (p + 7, 2, PeerError::BadLength),
            (p + 1, 5, PeerError::BadField),
        ] {
            let mut x = b;
            x[at] = v;
            assert_eq!(decode(&x[..n]).map(|_| ()), Err(e), "byte {at} = {v}");
        }
    }

    #[test]
    fn neighbor_and_group_updates() {
        let mut b = [0u8; HEADER_LEN + MAX_PAYLOAD];
        let mut c = [0u8; HEADER_LEN + MAX_PAYLOAD];
        let ns = neighbors();
        let n = encode_neighbors(3, &ns, &mut b).unwrap();
        let (3, Message::Neighbors(m)) = decode(&b[..n]).unwrap() else {
            panic!()
        };
        assert_eq!(m.iter().collect::<Vec<_>>(), ns);
        assert_eq!(encode(3, &Message::Neighbors(m), &mut c), Ok(n));
        assert_eq!(b[..n], c[..n]);
        for k in 0..n {
            assert_eq!(decode(&b[..k]), Err(PeerError::Truncated), "at {k}");
        }
        let gs = groups();
        let n = encode_groups(3, &gs, &mut b).unwrap();
        let (3, Message::Groups(m)) = decode(&b[..n]).unwrap() else {
            panic!()
        };
        assert_eq!(m.iter().collect::<Vec<_>>(), gs);
        assert_eq!(encode(3, &Message::Groups(m), &mut c), Ok(n));
        assert_eq!(b[..n], c[..n]);
        // Too many, a multicast or zero MAC, a unicast group: refused.
        assert_eq!(
            encode_neighbors(3, &vec![ns[0]; MAX_NEIGH_ENTRIES + 1], &mut [0u8; 4096]),
            Err(PeerError::NoRoom)
        );
        let bad = NeighEntry {
            mac: [1, 0, 0x5e, 0, 0, 1],
            ..ns[0]
        };
        assert_eq!(
            encode_neighbors(3, &[bad], &mut b),
            Err(PeerError::BadField)
        );
        let bad = GroupEntry {
            group: "10.0.0.1".parse().unwrap(),
            ..gs[0]
        };
        assert_eq!(encode_groups(3, &[bad], &mut b), Err(PeerError::BadField));
        // On the wire: a bad family, stray bytes after an IPv4 address,
        // a unicast group.
        let n = encode_groups(3, &gs[..1], &mut b).unwrap();
        let e = HEADER_LEN + 2;
        let mut x = b;
        x[e + 1] = 5;
        assert_eq!(decode(&x[..n]), Err(PeerError::BadField));
        let mut x = b;
        x[e + 8 + 5] = 1;
        assert_eq!(decode(&x[..n]), Err(PeerError::BadField));
        let mut x = b;
        x[e + 8] = 10;
        assert_eq!(decode(&x[..n]), Err(PeerError::BadField));
        let n = encode_neighbors(3, &ns[..1], &mut b).unwrap();
        let mut x = b;
        x[e + 4] = 1; // group bit in the MAC
        assert_eq!(decode(&x[..n]), Err(PeerError::BadField));
        let mut x = b;
        x[HEADER_LEN + 1] = 2; // count says 2, one entry follows
        assert_eq!(decode(&x[..n]), Err(PeerError::BadLength));
    }

    #[test]
    fn refusals() {
        let mut b = [0u8; 64];
        let n = encode(7, &Message::Hello(hello()), &mut b).unwrap();
        let mut x = b;
        x[0] = b'X';
        assert_eq!(decode(&x[..n]), Err(PeerError::BadMagic));
        let mut x = b;
        x[2] = 2;
        assert_eq!(decode(&x[..n]), Err(PeerError::Version(2)));
        let mut x = b;
        x[3] = 99;
        assert_eq!(decode(&x[..n]), Err(PeerError::UnknownType(99)));
        let mut x = b;
        x[7] = 21;
        assert!(decode(&x[..n + 1]).is_err());
        let mut x = b;
        x[HEADER_LEN + 14] = 0x80;
        assert_eq!(decode(&x[..n]), Err(PeerError::BadField));
        assert_eq!(
            encode(7, &Message::Hello(hello()), &mut [0u8; 10]),
            Err(PeerError::NoRoom)
        );
    }

    #[test]
    fn mutations_never_panic_and_round_trip() {
        // Every single-byte change and truncation of valid messages: the
        // same property as the fuzz target, on stable.
        let mut b = [0u8; HEADER_LEN + MAX_PAYLOAD];
        let mut msgs = Vec::new();
        let n = encode(7, &Message::Hello(hello()), &mut b).unwrap();
        msgs.push(b[..n].to_vec());
        let e = MacEntry {
            mac: [2, 0, 0, 0, 0, 9],
            vlan: 10,
            channel: 1,
            add: true,
        };
        let n = encode_macs(7, &[e, e], &mut b).unwrap();
        msgs.push(b[..n].to_vec());
        let n = encode(
            7,
            &Message::SyncEnd {
                generation: 1,
                entries: 2,
            },
            &mut b,
        )
        .unwrap();
        msgs.push(b[..n].to_vec());
        let n = encode_neighbors(7, &neighbors()[..3], &mut b).unwrap();
        msgs.push(b[..n].to_vec());
        let n = encode_groups(7, &groups()[..3], &mut b).unwrap();
        msgs.push(b[..n].to_vec());
        for (g, srcs) in filters() {
            let n = encode_group_filter(7, g, 10, 1, SourceMode::Include, &srcs, &mut b).unwrap();
            msgs.push(b[..n].to_vec());
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for m in &msgs {
            for i in 0..m.len() {
                for _ in 0..16 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let mut x = m.clone();
                    x[i] = seed as u8;
                    if let Ok((d, msg)) = decode(&x) {
                        let mut o = [0u8; HEADER_LEN + MAX_PAYLOAD];
                        let k = encode(d, &msg, &mut o).unwrap();
                        assert_eq!(o[..k], x[..k]);
                        let k = match msg {
                            Message::Neighbors(m) => {
                                encode_neighbors(d, &m.iter().collect::<Vec<_>>(), &mut o)
                            }
                            Message::Groups(m) => {
                                encode_groups(d, &m.iter().collect::<Vec<_>>(), &mut o)
                            }
                            Message::GroupFilter(f) => encode_group_filter(
                                d,
                                f.group,
                                f.vlan,
                                f.channel,
                                f.mode,
                                &f.sources().collect::<Vec<_>>(),
                                &mut o,
                            ),
                            _ => Ok(0),
                        }
                        .unwrap();
                        assert_eq!(o[..k], x[..k]);
                    }
                }
            }
        }
    }
}
