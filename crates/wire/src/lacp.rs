//! IEEE 802.1AX LACPDU: the Link Aggregation Control Protocol data unit.
//!
//! LACPDUs are Slow Protocols frames (IEEE 802.3 Annex 57A): EtherType
//! 0x8809, subtype 1, sent untagged to the Slow Protocols group address
//! 01-80-C2-00-00-02, which bridges never forward. The PDU is a fixed
//! sequence of TLVs (802.1AX-2014 6.4.2.3, Figure 6-7; earlier 802.3-2005
//! 43.4.2.2). Offsets below count from the subtype octet, the first octet
//! after the Ethernet header:
//!
//! | offset | octets | field                                          |
//! |-------:|-------:|------------------------------------------------|
//! |      0 |      1 | subtype = 1 (LACP)                             |
//! |      1 |      1 | version number = 1                             |
//! |      2 |      2 | TLV type 1 (Actor Information), length 20      |
//! |      4 |     18 | actor: system priority 2, system 6, key 2, port priority 2, port 2, state 1, reserved 3 |
//! |     22 |      2 | TLV type 2 (Partner Information), length 20    |
//! |     24 |     18 | partner: same layout as the actor              |
//! |     42 |      2 | TLV type 3 (Collector Information), length 16  |
//! |     44 |      2 | CollectorMaxDelay (tens of microseconds)       |
//! |     46 |     12 | reserved                                       |
//! |     58 |      2 | TLV type 0 (Terminator), length 0              |
//! |     60 |     50 | reserved                                       |
//!
//! That is [`LACPDU_LEN`] = 110 octets, and with the 14-octet Ethernet
//! header a [`FRAME_LEN`] = 124-octet frame (128 with the FCS): the
//! reserved tail is what pads the frame, no further padding is needed.
//! TLV lengths count the two octets of type and length.
//!
//! ## What `parse` accepts
//!
//! * Fewer than 110 octets: [`Error::Truncated`] (Linux bonding and Open
//!   vSwitch also require the full 110). Octets after the PDU are ignored.
//! * Subtype other than 1 (2 is the Marker protocol): [`Error::Unsupported`].
//! * Version 0: [`Error::Malformed`]. Version 1: the TLV types and lengths
//!   above must be exactly right, terminator included.
//! * Version 2 or later is accepted, as the standard's compatibility
//!   rules ask of a version 1 implementation: the version 1 fields are
//!   read and the rest ignored. The Actor, Partner and Collector TLVs
//!   must still come first, in that order, each at least as long as in
//!   version 1; they are walked by their length fields, so a longer TLV
//!   from a later version does not shift what follows. TLVs after the
//!   Collector TLV (802.1AX-2014 version 2 adds Port Algorithm,
//!   Conversation ID Digest and Mask TLVs there) are not read.
//! * Reserved octets are ignored on receipt and written as zero.
//!
//! There is no zero-copy view: LACPDUs never stay on the data path (it
//! recognises them by EtherType, see [`is_lacp_frame`], and hands them to
//! the control plane), and later versions are read by walking TLVs rather
//! than at fixed offsets. [`Lacpdu`] plays the part of the `Repr`.
//!
//! **No-panic contract:** [`Lacpdu::parse`], [`parse_frame`] and
//! [`is_lacp_frame`] return an [`Error`] (or `false`) on any input;
//! [`Lacpdu::emit`] and [`build_frame`] return [`Error::Truncated`] on a
//! short buffer.

use core::fmt;

use crate::ethernet::{self, MacAddress};
use crate::{Error, Result};

/// Slow Protocols EtherType (IEEE 802.3 Annex 57A).
pub const SLOW_PROTOCOLS_ETHERTYPE: u16 = 0x8809;
/// Slow Protocols subtype of LACP.
pub const LACP_SUBTYPE: u8 = 1;
/// Slow Protocols subtype of the Marker protocol (802.1AX 6.5).
pub const MARKER_SUBTYPE: u8 = 2;
/// Slow Protocols multicast address, the destination of every LACPDU.
pub const SLOW_PROTOCOLS_MAC: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x02];
/// The version this module writes.
pub const LACP_VERSION: u8 = 1;
/// Octets of a version 1 LACPDU, from the subtype to the end of the
/// reserved tail.
pub const LACPDU_LEN: usize = 110;
/// Octets of a complete LACPDU frame without FCS: Ethernet header + PDU.
pub const FRAME_LEN: usize = ethernet::HEADER_LEN + LACPDU_LEN;

const _: () = assert!(FRAME_LEN == 124);

/// TLV types and version 1 lengths (802.1AX-2014 6.4.2.3).
mod tlv {
    pub const TERMINATOR: u8 = 0;
    pub const ACTOR: u8 = 1;
    pub const PARTNER: u8 = 2;
    pub const COLLECTOR: u8 = 3;
    /// Actor and Partner Information: 2 + 15 octets of info + 3 reserved.
    pub const INFO_LEN: u8 = 20;
    /// Collector Information: 2 + 2 (max delay) + 12 reserved.
    pub const COLLECTOR_LEN: u8 = 16;
}

/// Offsets of a version 1 LACPDU (see the module table).
mod field {
    pub const SUBTYPE: usize = 0;
    pub const VERSION: usize = 1;
    pub const ACTOR_TLV: usize = 2;
    pub const PARTNER_TLV: usize = 22;
    pub const COLLECTOR_TLV: usize = 42;
    pub const TERMINATOR_TLV: usize = 58;
    /// Octets of information inside an Actor/Partner TLV, after its
    /// two-octet header: priority 2, system 6, key 2, port priority 2,
    /// port 2, state 1.
    pub const INFO_LEN: usize = 15;
}

/// The eight flags of an Actor_State / Partner_State octet (802.1AX-2014
/// 6.4.2.3). Bit 0 is the least significant.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LacpState(pub u8);

impl LacpState {
    /// LACP_Activity: 1 = Active LACP, 0 = Passive.
    pub const ACTIVITY: LacpState = LacpState(0x01);
    /// LACP_Timeout: 1 = short timeout (the sender asks for a PDU every
    /// second), 0 = long timeout (every 30 seconds).
    pub const TIMEOUT: LacpState = LacpState(0x02);
    /// Aggregation: 1 = the link may be aggregated, 0 = Individual.
    pub const AGGREGATION: LacpState = LacpState(0x04);
    /// Synchronization: the link is attached to the right aggregator.
    pub const SYNCHRONIZATION: LacpState = LacpState(0x08);
    /// Collecting: frames received on the link are accepted.
    pub const COLLECTING: LacpState = LacpState(0x10);
    /// Distributing: frames are sent on the link.
    pub const DISTRIBUTING: LacpState = LacpState(0x20);
    /// Defaulted: the sender uses default (administrative) partner
    /// information, not information received from a partner.
    pub const DEFAULTED: LacpState = LacpState(0x40);
    /// Expired: the sender's receive machine is in the EXPIRED state.
    pub const EXPIRED: LacpState = LacpState(0x80);

    /// Every flag with its `Display` name, lowest bit first.
    pub const NAMES: [(LacpState, &'static str); 8] = [
        (Self::ACTIVITY, "activity"),
        (Self::TIMEOUT, "timeout"),
        (Self::AGGREGATION, "aggregation"),
        (Self::SYNCHRONIZATION, "synchronization"),
        (Self::COLLECTING, "collecting"),
        (Self::DISTRIBUTING, "distributing"),
        (Self::DEFAULTED, "defaulted"),
        (Self::EXPIRED, "expired"),
    ];

    /// No flag set.
    pub const fn empty() -> LacpState {
        LacpState(0)
    }

    /// The octet.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// All flags of `other` are set.
    pub const fn contains(self, other: LacpState) -> bool {
        self.0 & other.0 == other.0
    }

    /// Sets the flags of `other`.
    pub fn insert(&mut self, other: LacpState) {
        self.0 |= other.0;
    }

    /// Clears the flags of `other`.
    pub fn remove(&mut self, other: LacpState) {
        self.0 &= !other.0;
    }

    /// Sets (`on`) or clears the flags of `other`.
    pub fn set(&mut self, other: LacpState, on: bool) {
        if on {
            self.insert(other)
        } else {
            self.remove(other)
        }
    }

    /// LACP_Activity set (Active).
    pub const fn activity(self) -> bool {
        self.contains(Self::ACTIVITY)
    }

    /// LACP_Timeout set (short timeout, fast rate asked of the partner).
    pub const fn short_timeout(self) -> bool {
        self.contains(Self::TIMEOUT)
    }

    /// Aggregation set (aggregatable; clear means Individual).
    pub const fn aggregation(self) -> bool {
        self.contains(Self::AGGREGATION)
    }

    /// Synchronization set.
    pub const fn synchronization(self) -> bool {
        self.contains(Self::SYNCHRONIZATION)
    }

    /// Collecting set.
    pub const fn collecting(self) -> bool {
        self.contains(Self::COLLECTING)
    }

    /// Distributing set.
    pub const fn distributing(self) -> bool {
        self.contains(Self::DISTRIBUTING)
    }

    /// Defaulted set.
    pub const fn defaulted(self) -> bool {
        self.contains(Self::DEFAULTED)
    }

    /// Expired set.
    pub const fn expired(self) -> bool {
        self.contains(Self::EXPIRED)
    }
}

impl From<u8> for LacpState {
    fn from(v: u8) -> Self {
        LacpState(v)
    }
}

impl From<LacpState> for u8 {
    fn from(s: LacpState) -> u8 {
        s.0
    }
}

impl core::ops::BitOr for LacpState {
    type Output = LacpState;
    fn bitor(self, rhs: LacpState) -> LacpState {
        LacpState(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for LacpState {
    fn bitor_assign(&mut self, rhs: LacpState) {
        self.0 |= rhs.0;
    }
}

impl core::ops::BitAnd for LacpState {
    type Output = LacpState;
    fn bitand(self, rhs: LacpState) -> LacpState {
        LacpState(self.0 & rhs.0)
    }
}

/// The names of the set flags, lowest bit first, separated by spaces
/// (`activity timeout aggregation synchronization`); `none` when no flag
/// is set.
impl fmt::Display for LacpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("none");
        }
        let mut first = true;
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str(" ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// `LacpState(0x3d: activity aggregation ...)`.
impl fmt::Debug for LacpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LacpState({:#04x}: {})", self.0, self)
    }
}

/// The information one end sends about a port: who it is (system, key,
/// port) and its state. Carried twice in every LACPDU: about the sender
/// (actor) and about what the sender knows of the other end (partner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LacpInfo {
    /// System priority (lower is more important).
    pub system_priority: u16,
    /// System identifier, a MAC address of the system.
    pub system: [u8; 6],
    /// Operational key: links with equal keys may be aggregated.
    pub key: u16,
    /// Port priority (lower is more important).
    pub port_priority: u16,
    /// Port number, unique within the system.
    pub port: u16,
    /// State flags.
    pub state: LacpState,
}

impl LacpInfo {
    /// Reads the 15 information octets of an Actor/Partner TLV.
    fn read(b: &[u8; field::INFO_LEN]) -> LacpInfo {
        let mut system = [0u8; 6];
        system.copy_from_slice(&b[2..8]);
        LacpInfo {
            system_priority: u16::from_be_bytes([b[0], b[1]]),
            system,
            key: u16::from_be_bytes([b[8], b[9]]),
            port_priority: u16::from_be_bytes([b[10], b[11]]),
            port: u16::from_be_bytes([b[12], b[13]]),
            state: LacpState(b[14]),
        }
    }

    /// Writes the 15 information octets of an Actor/Partner TLV.
    fn write(&self, b: &mut [u8; field::INFO_LEN]) {
        b[0..2].copy_from_slice(&self.system_priority.to_be_bytes());
        b[2..8].copy_from_slice(&self.system);
        b[8..10].copy_from_slice(&self.key.to_be_bytes());
        b[10..12].copy_from_slice(&self.port_priority.to_be_bytes());
        b[12..14].copy_from_slice(&self.port.to_be_bytes());
        b[14] = self.state.0;
    }
}

/// `system 32768/00:11:22:33:44:55 key 13 port 255/1 state activity ...`
/// (priorities before the slash).
impl fmt::Display for LacpInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "system {}/{} key {} port {}/{} state {}",
            self.system_priority,
            MacAddress(self.system),
            self.key,
            self.port_priority,
            self.port,
            self.state
        )
    }
}

/// A parsed LACPDU (the version 1 fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Lacpdu {
    /// The sender's own information.
    pub actor: LacpInfo,
    /// What the sender knows of the receiver.
    pub partner: LacpInfo,
    /// CollectorMaxDelay, in tens of microseconds (Linux and Open vSwitch
    /// send 0).
    pub collector_max_delay: u16,
}

/// Checks the TLV header at `off`: type `ty`, length `v1_len` exactly
/// (`exact`) or at least. Returns the offset of the next TLV.
fn check_tlv(
    pdu: &[u8],
    off: usize,
    ty: u8,
    v1_len: u8,
    exact: bool,
    what: &'static str,
) -> Result<usize> {
    let hdr = pdu.get(off..off + 2).ok_or(Error::Truncated)?;
    if hdr[0] != ty {
        return Err(Error::Malformed(what));
    }
    let len = hdr[1];
    if (exact && len != v1_len) || len < v1_len {
        return Err(Error::Malformed(what));
    }
    let next = off + usize::from(len);
    if next > pdu.len() {
        return Err(Error::Truncated);
    }
    Ok(next)
}

fn read_info(pdu: &[u8], tlv_off: usize) -> Result<LacpInfo> {
    let b = pdu
        .get(tlv_off + 2..tlv_off + 2 + field::INFO_LEN)
        .ok_or(Error::Truncated)?;
    let b: &[u8; field::INFO_LEN] = b.try_into().map_err(|_| Error::Truncated)?;
    Ok(LacpInfo::read(b))
}

impl Lacpdu {
    /// Parses a LACPDU starting at the subtype octet (the bytes after the
    /// Ethernet header). See the module doc for what is accepted.
    pub fn parse(pdu: &[u8]) -> Result<Lacpdu> {
        let (&subtype, rest) = pdu.split_first().ok_or(Error::Truncated)?;
        match subtype {
            LACP_SUBTYPE => {}
            MARKER_SUBTYPE => return Err(Error::Unsupported("slow protocols: Marker PDU")),
            _ => return Err(Error::Unsupported("slow protocols subtype other than LACP")),
        }
        let version = *rest.first().ok_or(Error::Truncated)?;
        if version == 0 {
            return Err(Error::Malformed("LACP version 0"));
        }
        if pdu.len() < LACPDU_LEN {
            return Err(Error::Truncated);
        }
        // Version 1: fixed layout. Later versions: walk the TLVs by length.
        let exact = version == LACP_VERSION;
        let actor_off = field::ACTOR_TLV;
        let partner_off = check_tlv(
            pdu,
            actor_off,
            tlv::ACTOR,
            tlv::INFO_LEN,
            exact,
            "LACP Actor Information TLV type or length",
        )?;
        let collector_off = check_tlv(
            pdu,
            partner_off,
            tlv::PARTNER,
            tlv::INFO_LEN,
            exact,
            "LACP Partner Information TLV type or length",
        )?;
        let terminator_off = check_tlv(
            pdu,
            collector_off,
            tlv::COLLECTOR,
            tlv::COLLECTOR_LEN,
            exact,
            "LACP Collector Information TLV type or length",
        )?;
        if exact {
            check_tlv(
                pdu,
                terminator_off,
                tlv::TERMINATOR,
                0,
                true,
                "LACP Terminator TLV type or length",
            )?;
        }
        let delay = pdu
            .get(collector_off + 2..collector_off + 4)
            .ok_or(Error::Truncated)?;
        Ok(Lacpdu {
            actor: read_info(pdu, actor_off)?,
            partner: read_info(pdu, partner_off)?,
            collector_max_delay: u16::from_be_bytes([delay[0], delay[1]]),
        })
    }

    /// Always [`LACPDU_LEN`] (this module writes version 1).
    pub const fn buffer_len(&self) -> usize {
        LACPDU_LEN
    }

    /// Writes the 110-octet version 1 PDU (subtype to reserved tail) at the
    /// start of `buf`; reserved octets are zeroed.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf.get_mut(..LACPDU_LEN).ok_or(Error::Truncated)?;
        b.fill(0);
        b[field::SUBTYPE] = LACP_SUBTYPE;
        b[field::VERSION] = LACP_VERSION;
        for (off, ty, info) in [
            (field::ACTOR_TLV, tlv::ACTOR, &self.actor),
            (field::PARTNER_TLV, tlv::PARTNER, &self.partner),
        ] {
            b[off] = ty;
            b[off + 1] = tlv::INFO_LEN;
            let dst: &mut [u8; field::INFO_LEN] = (&mut b[off + 2..off + 2 + field::INFO_LEN])
                .try_into()
                .map_err(|_| Error::Truncated)?;
            info.write(dst);
        }
        let c = field::COLLECTOR_TLV;
        b[c] = tlv::COLLECTOR;
        b[c + 1] = tlv::COLLECTOR_LEN;
        b[c + 2..c + 4].copy_from_slice(&self.collector_max_delay.to_be_bytes());
        b[field::TERMINATOR_TLV] = tlv::TERMINATOR;
        b[field::TERMINATOR_TLV + 1] = 0;
        Ok(())
    }
}

/// Writes a complete LACPDU frame into `out`: destination
/// [`SLOW_PROTOCOLS_MAC`], source `src_mac` (the port's own address),
/// EtherType 0x8809, then the PDU. Returns [`FRAME_LEN`], the octets
/// written (the reserved tail already makes the frame longer than the
/// 60-octet minimum).
pub fn build_frame(src_mac: [u8; 6], pdu: &Lacpdu, out: &mut [u8]) -> Result<usize> {
    let frame = out.get_mut(..FRAME_LEN).ok_or(Error::Truncated)?;
    frame[0..6].copy_from_slice(&SLOW_PROTOCOLS_MAC);
    frame[6..12].copy_from_slice(&src_mac);
    frame[12..14].copy_from_slice(&SLOW_PROTOCOLS_ETHERTYPE.to_be_bytes());
    pdu.emit(&mut frame[ethernet::HEADER_LEN..])?;
    Ok(FRAME_LEN)
}

/// Parses an untagged Ethernet frame carrying a LACPDU: the destination
/// must be [`SLOW_PROTOCOLS_MAC`] and the EtherType 0x8809
/// ([`Error::Unsupported`] otherwise), then [`Lacpdu::parse`] on the rest.
pub fn parse_frame(frame: &[u8]) -> Result<Lacpdu> {
    let eth = ethernet::Frame::new_checked(frame)?;
    if u16::from(eth.ethertype()) != SLOW_PROTOCOLS_ETHERTYPE {
        return Err(Error::Unsupported("EtherType other than Slow Protocols"));
    }
    if eth.dst_addr().0 != SLOW_PROTOCOLS_MAC {
        return Err(Error::Unsupported(
            "LACPDU not sent to the Slow Protocols address",
        ));
    }
    Lacpdu::parse(eth.payload())
}

/// Cheap classification for the data path: destination
/// [`SLOW_PROTOCOLS_MAC`], EtherType 0x8809 and subtype 1. Does not
/// validate the PDU.
pub fn is_lacp_frame(frame: &[u8]) -> bool {
    frame.len() > ethernet::HEADER_LEN
        && frame[0..6] == SLOW_PROTOCOLS_MAC
        && frame[12..14] == SLOW_PROTOCOLS_ETHERTYPE.to_be_bytes()
        && frame[ethernet::HEADER_LEN] == LACP_SUBTYPE
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A LACPDU frame built by hand from the layout of 802.1AX-2014
    /// 6.4.2.3, with the values Linux bonding fills in (mode 802.3ad,
    /// lacp_rate fast, defaults otherwise) once the bond is up:
    /// system priority 65535 (`ad_actor_sys_prio`), port priority 255,
    /// port numbers from 1, key 13 = speed code 6 (10 Gb/s) << 1 |
    /// full duplex, CollectorMaxDelay 0. The partner is a switch with
    /// system priority 32768.
    #[rustfmt::skip]
    const LINUX_BOND_FRAME: [u8; 124] = [
        // Ethernet: Slow Protocols group address, bond MAC, EtherType 0x8809.
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x02,
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56,
        0x88, 0x09,
        // Subtype 1 (LACP), version 1.
        0x01, 0x01,
        // TLV 1 Actor Information, length 20.
        0x01, 0x14,
        0xff, 0xff,                         // system priority 65535
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // system = bond MAC
        0x00, 0x0d,                         // key 13
        0x00, 0xff,                         // port priority 255
        0x00, 0x01,                         // port 1
        0x3f,                               // activity timeout aggregation sync collecting distributing
        0x00, 0x00, 0x00,                   // reserved
        // TLV 2 Partner Information, length 20.
        0x02, 0x14,
        0x80, 0x00,                         // system priority 32768
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // partner system
        0x00, 0x07,                         // key 7
        0x80, 0x00,                         // port priority 32768
        0x00, 0x05,                         // port 5
        0x3d,                               // activity aggregation sync collecting distributing
        0x00, 0x00, 0x00,                   // reserved
        // TLV 3 Collector Information, length 16.
        0x03, 0x10,
        0x00, 0x00,                         // CollectorMaxDelay 0
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
        // TLV 0 Terminator, length 0.
        0x00, 0x00,
        // 50 reserved octets.
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn sample() -> Lacpdu {
        Lacpdu {
            actor: LacpInfo {
                system_priority: 32768,
                system: [0x02, 0, 0, 0, 0, 1],
                key: 7,
                port_priority: 32768,
                port: 5,
                state: LacpState::ACTIVITY | LacpState::TIMEOUT | LacpState::AGGREGATION,
            },
            partner: LacpInfo {
                system_priority: 1,
                system: [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff],
                key: 0xffff,
                port_priority: 0,
                port: 0xfffe,
                state: LacpState(0xff),
            },
            collector_max_delay: 0x1234,
        }
    }

    #[test]
    fn lacp_linux_bond_frame_parses_field_by_field() {
        let pdu = parse_frame(&LINUX_BOND_FRAME).unwrap();
        assert_eq!(pdu.actor.system_priority, 65535);
        assert_eq!(pdu.actor.system, [0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(pdu.actor.key, 13);
        assert_eq!(pdu.actor.port_priority, 255);
        assert_eq!(pdu.actor.port, 1);
        assert_eq!(pdu.actor.state.bits(), 0x3f);
        assert!(pdu.actor.state.activity() && pdu.actor.state.short_timeout());
        assert!(!pdu.actor.state.defaulted() && !pdu.actor.state.expired());
        assert_eq!(pdu.partner.system_priority, 32768);
        assert_eq!(pdu.partner.system, [0x02, 0, 0, 0, 0, 1]);
        assert_eq!(pdu.partner.key, 7);
        assert_eq!(pdu.partner.port_priority, 32768);
        assert_eq!(pdu.partner.port, 5);
        assert!(!pdu.partner.state.short_timeout());
        assert!(pdu.partner.state.distributing());
        assert_eq!(pdu.collector_max_delay, 0);
        assert!(is_lacp_frame(&LINUX_BOND_FRAME));

        // Rebuilding gives the same bytes.
        let mut out = [0xa5u8; 130];
        let n = build_frame([0x52, 0x54, 0x00, 0x12, 0x34, 0x56], &pdu, &mut out).unwrap();
        assert_eq!(n, FRAME_LEN);
        assert_eq!(out[..n], LINUX_BOND_FRAME[..]);
        assert_eq!(out[n..], [0xa5; 6], "nothing written past the frame");
    }

    #[test]
    fn lacp_round_trip() {
        let pdu = sample();
        let mut b = [0x55u8; LACPDU_LEN];
        pdu.emit(&mut b).unwrap();
        assert_eq!(pdu.buffer_len(), LACPDU_LEN);
        assert_eq!(&b[..4], &[1, 1, 1, 20]);
        assert_eq!(&b[22..24], &[2, 20]);
        assert_eq!(&b[42..46], &[3, 16, 0x12, 0x34]);
        assert_eq!(&b[58..60], &[0, 0]);
        assert!(b[60..].iter().all(|&x| x == 0), "reserved tail zeroed");
        assert_eq!(Lacpdu::parse(&b), Ok(pdu));

        let mut f = [0u8; FRAME_LEN];
        let src = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
        assert_eq!(build_frame(src, &pdu, &mut f), Ok(FRAME_LEN));
        assert_eq!(&f[6..12], &src);
        assert_eq!(parse_frame(&f), Ok(pdu));
        // Trailing octets (an FCS, padding) are ignored.
        let mut long = f.to_vec();
        long.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(parse_frame(&long), Ok(pdu));
    }

    #[test]
    fn lacp_truncations_are_errors() {
        for n in 0..LINUX_BOND_FRAME.len() {
            assert!(
                parse_frame(&LINUX_BOND_FRAME[..n]).is_err(),
                "frame prefix {n}"
            );
        }
        let pdu = &LINUX_BOND_FRAME[ethernet::HEADER_LEN..];
        for n in 0..pdu.len() {
            assert!(Lacpdu::parse(&pdu[..n]).is_err(), "PDU prefix {n}");
        }
        let mut small = [0u8; LACPDU_LEN - 1];
        assert_eq!(sample().emit(&mut small), Err(Error::Truncated));
        let mut small = [0u8; FRAME_LEN - 1];
        assert_eq!(
            build_frame([2; 6], &sample(), &mut small),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn lacp_wrong_header_fields_are_rejected() {
        let good = LINUX_BOND_FRAME;
        // (offset in the frame, value, expected error kind)
        let cases: [(usize, u8, &str); 12] = [
            (0, 0x01, "ok"),           // control: same value
            (5, 0x03, "unsupported"),  // another destination
            (13, 0x00, "unsupported"), // EtherType 0x8800
            (14, MARKER_SUBTYPE, "unsupported"),
            (14, 0x03, "unsupported"), // OAM subtype
            (15, 0x00, "malformed"),   // version 0
            (16, 0x02, "malformed"),   // actor TLV type
            (17, 0x13, "malformed"),   // actor TLV length 19
            (36, 0x01, "malformed"),   // partner TLV type
            (57, 0x11, "malformed"),   // collector TLV length 17
            (72, 0x01, "malformed"),   // terminator type
            (73, 0x02, "malformed"),   // terminator length
        ];
        for (off, v, want) in cases {
            let mut f = good;
            f[off] = v;
            let got = parse_frame(&f);
            let kind = match got {
                Ok(_) => "ok",
                Err(Error::Unsupported(_)) => "unsupported",
                Err(Error::Malformed(_)) => "malformed",
                Err(_) => "other",
            };
            assert_eq!(kind, want, "offset {off} = {v:#x}: {got:?}");
        }
        // A Marker PDU is not "LACP", whatever follows.
        assert!(!is_lacp_frame(&{
            let mut f = good;
            f[14] = MARKER_SUBTYPE;
            f
        }));
        // Reserved octets are ignored.
        let mut f = good;
        f[33] = 0xff;
        f[60] = 0xff;
        f[123] = 0xff;
        assert_eq!(parse_frame(&f), parse_frame(&good));
    }

    /// Version 2 (802.1AX-2014) and later: the version 1 fields are read,
    /// longer TLVs are walked by length, what follows the Collector TLV is
    /// ignored.
    #[test]
    fn lacp_later_versions_read_version_1_fields() {
        let want = sample();
        let mut v1 = [0u8; LACPDU_LEN];
        want.emit(&mut v1).unwrap();

        // Version 2 with a Port Algorithm TLV (type 4, length 6) where the
        // version 1 terminator was.
        let mut v2 = v1;
        v2[1] = 2;
        v2[58..64].copy_from_slice(&[4, 6, 0, 0x80, 0xc2, 1]);
        assert_eq!(Lacpdu::parse(&v2), Ok(want));
        // The same bytes claiming version 1 are rejected (bad terminator).
        let mut bad = v2;
        bad[1] = 1;
        assert!(matches!(Lacpdu::parse(&bad), Err(Error::Malformed(_))));

        // A future version whose Actor TLV grew by 4 octets.
        let mut v3 = vec![1u8, 3, 1, 24];
        v3.extend_from_slice(&v1[4..22]);
        v3.extend_from_slice(&[0xee; 4]);
        v3.extend_from_slice(&v1[22..]);
        assert_eq!(Lacpdu::parse(&v3), Ok(want));
        // But shorter than version 1 is not allowed in any version.
        let mut short = v2;
        short[3] = 19;
        assert!(matches!(Lacpdu::parse(&short), Err(Error::Malformed(_))));
        // A TLV length running past the end is truncation.
        let mut over = v2;
        over[43] = 0xff;
        assert_eq!(Lacpdu::parse(&over), Err(Error::Truncated));
    }

    #[test]
    fn lacp_garbage_never_panics() {
        // A small deterministic generator (xorshift) over lengths around the
        // interesting sizes, with the first bytes often made plausible.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = [0u8; 160];
        for i in 0..20_000 {
            let len = (next() % 160) as usize;
            for b in buf.iter_mut() {
                *b = next() as u8;
            }
            if i % 2 == 0 {
                buf[..FRAME_LEN].copy_from_slice(&LINUX_BOND_FRAME);
                let pos = (next() % 124) as usize;
                buf[pos] = next() as u8;
                if i % 4 == 0 {
                    buf[15] = (next() % 4) as u8; // versions 0..=3
                }
            }
            let data = &buf[..len];
            if let Ok(pdu) = parse_frame(data) {
                let mut out = [0u8; FRAME_LEN];
                build_frame([2; 6], &pdu, &mut out).unwrap();
                assert_eq!(parse_frame(&out), Ok(pdu));
            }
            if let Ok(pdu) = Lacpdu::parse(data) {
                let mut out = [0u8; LACPDU_LEN];
                pdu.emit(&mut out).unwrap();
                assert_eq!(Lacpdu::parse(&out), Ok(pdu));
            }
            let _ = is_lacp_frame(data);
        }
    }

    #[test]
    fn lacp_state_flags_and_display() {
        let mut s = LacpState::empty();
        assert_eq!(s.to_string(), "none");
        s.insert(LacpState::ACTIVITY | LacpState::SYNCHRONIZATION);
        s.set(LacpState::EXPIRED, true);
        assert!(s.activity() && s.synchronization() && s.expired());
        assert!(!s.collecting());
        assert_eq!(s.to_string(), "activity synchronization expired");
        s.set(LacpState::EXPIRED, false);
        s.remove(LacpState::ACTIVITY);
        assert_eq!(s, LacpState::SYNCHRONIZATION);
        assert_eq!(
            LacpState(0xff).to_string(),
            "activity timeout aggregation synchronization collecting distributing defaulted expired"
        );
        assert_eq!(
            format!("{:?}", LacpState(0x05)),
            "LacpState(0x05: activity aggregation)"
        );
        assert_eq!(
            sample().actor.to_string(),
            "system 32768/02:00:00:00:00:01 key 7 port 32768/5 state activity timeout aggregation"
        );
    }
}
