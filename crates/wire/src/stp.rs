//! IEEE 802.1D-2004 Bridge PDUs: STP Configuration and Topology Change
//! Notification BPDUs, and RSTP's RST BPDU (clause 9).
//!
//! BPDUs travel in IEEE 802.3 frames with an LLC header: destination
//! 01-80-C2-00-00-00 (the bridge group address, never forwarded), a
//! length field instead of an EtherType, then DSAP 0x42, SSAP 0x42,
//! control 0x03 (UI), then the BPDU. Offsets below count from the first
//! octet of the BPDU (the frame's octet 17):
//!
//! | offset | octets | field |
//! |-------:|-------:|-------|
//! | 0 | 2 | protocol identifier = 0 |
//! | 2 | 1 | protocol version: 0 STP, 2 RSTP (3 MSTP, read as RSTP) |
//! | 3 | 1 | type: 0x00 Configuration, 0x80 TCN, 0x02 RST |
//! | 4 | 1 | flags (below) |
//! | 5 | 8 | root identifier (priority 2, MAC 6) |
//! | 13 | 4 | root path cost |
//! | 17 | 8 | bridge identifier |
//! | 25 | 2 | port identifier (priority 4 bits, number 12 bits) |
//! | 27 | 2 | message age (1/256 s) |
//! | 29 | 2 | max age |
//! | 31 | 2 | hello time |
//! | 33 | 2 | forward delay |
//! | 35 | 1 | version 1 length = 0 (RST only) |
//!
//! Flags: bit 0 topology change, 1 proposal, 2–3 port role (0 unknown,
//! 1 alternate/backup, 2 root, 3 designated), 4 learning, 5 forwarding,
//! 6 agreement, 7 topology change acknowledgement. STP Configuration
//! BPDUs use only bits 0 and 7.
//!
//! ## What `parse` accepts (802.1D-2004 9.3.4)
//!
//! * Protocol identifier ≠ 0: [`Error::Malformed`].
//! * Type 0x00 with at least 35 octets: a Configuration BPDU (whatever
//!   the version). Type 0x80 with at least 4: a TCN. Type 0x02 with
//!   version ≥ 2 and at least 36 octets: an RST BPDU (an MSTP BPDU,
//!   version 3, is read as its CIST part). Shorter: [`Error::Truncated`];
//!   other types (or type 2 with version < 2): [`Error::Unsupported`].
//! * Octets after the BPDU (padding, MSTP's MSTI records) are ignored.
//! * Times are carried as received (1/256 s units); judging them is the
//!   state machine's business.
//!
//! **No-panic contract:** [`Bpdu::parse`], [`parse_frame`] and
//! [`is_bpdu_frame`] return an error (or `false`) on any input;
//! [`Bpdu::emit`] and [`build_frame`] return [`Error::Truncated`] on a
//! short buffer.

use core::fmt;

use crate::{Error, Result};

/// The bridge group address BPDUs are sent to.
pub const BRIDGE_GROUP: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x00];
/// LLC header of a BPDU: DSAP, SSAP (the spanning tree SAP) and UI.
pub const LLC: [u8; 3] = [0x42, 0x42, 0x03];
/// Octets of a Configuration BPDU.
pub const CONFIG_LEN: usize = 35;
/// Octets of an RST BPDU.
pub const RST_LEN: usize = 36;
/// Octets of a TCN BPDU.
pub const TCN_LEN: usize = 4;
/// A frame carrying a BPDU: 14 Ethernet + 3 LLC + BPDU, padded to the
/// Ethernet minimum of 60 octets (without FCS).
pub const FRAME_LEN: usize = 60;
/// Offset of the BPDU in a frame.
pub const BPDU_OFFSET: usize = 17;

/// Flag bits (802.1D-2004 9.3.3).
pub mod flags {
    /// Topology change.
    pub const TC: u8 = 0x01;
    /// Proposal (RST only).
    pub const PROPOSAL: u8 = 0x02;
    /// Port role mask (RST only), shifted by 2.
    pub const ROLE_MASK: u8 = 0x0c;
    /// Learning (RST only).
    pub const LEARNING: u8 = 0x10;
    /// Forwarding (RST only).
    pub const FORWARDING: u8 = 0x20;
    /// Agreement (RST only).
    pub const AGREEMENT: u8 = 0x40;
    /// Topology change acknowledgement.
    pub const TCA: u8 = 0x80;
}

/// A bridge identifier: priority (with the system ID extension in its
/// low 12 bits) then MAC address. Ordered as the 8 octets compare:
/// lower is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BridgeId {
    /// Priority (multiple of 4096 in 802.1D-2004) plus system ID extension.
    pub priority: u16,
    /// The bridge's MAC address.
    pub mac: [u8; 6],
}

impl BridgeId {
    fn read(b: &[u8]) -> BridgeId {
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&b[2..8]);
        BridgeId {
            priority: u16::from_be_bytes([b[0], b[1]]),
            mac,
        }
    }

    fn write(&self, b: &mut [u8]) {
        b[0..2].copy_from_slice(&self.priority.to_be_bytes());
        b[2..8].copy_from_slice(&self.mac);
    }
}

impl fmt::Display for BridgeId {
    /// `32768.02:00:00:00:00:0a`, as switches print it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.mac;
        write!(
            f,
            "{}.{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            self.priority, m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// A port's role as an RST BPDU encodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// 0: unknown (also what STP Configuration BPDUs imply).
    Unknown,
    /// 1: alternate or backup.
    AlternateBackup,
    /// 2: root.
    Root,
    /// 3: designated.
    Designated,
}

impl Role {
    fn from_bits(f: u8) -> Role {
        match (f & flags::ROLE_MASK) >> 2 {
            1 => Role::AlternateBackup,
            2 => Role::Root,
            3 => Role::Designated,
            _ => Role::Unknown,
        }
    }

    fn bits(self) -> u8 {
        (match self {
            Role::Unknown => 0,
            Role::AlternateBackup => 1,
            Role::Root => 2,
            Role::Designated => 3,
        }) << 2
    }
}

/// The body of a Configuration or RST BPDU (times in 1/256 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BpduInfo {
    /// The flags octet as received (see [`flags`]).
    pub flags: u8,
    /// The root bridge as the sender believes it.
    pub root: BridgeId,
    /// The sender's cost to the root.
    pub root_path_cost: u32,
    /// The sender (designated bridge of the link).
    pub bridge: BridgeId,
    /// The sender's port (designated port of the link).
    pub port: u16,
    /// Message age, 1/256 s.
    pub message_age: u16,
    /// Max age, 1/256 s.
    pub max_age: u16,
    /// Hello time, 1/256 s.
    pub hello_time: u16,
    /// Forward delay, 1/256 s.
    pub forward_delay: u16,
}

impl BpduInfo {
    /// The port role encoded in the flags.
    pub fn role(&self) -> Role {
        Role::from_bits(self.flags)
    }

    /// Set the port role bits.
    pub fn set_role(&mut self, r: Role) {
        self.flags = (self.flags & !flags::ROLE_MASK) | r.bits();
    }

    /// Whether flag bit(s) `f` are set.
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    fn read(b: &[u8]) -> BpduInfo {
        let u16at = |o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
        BpduInfo {
            flags: b[4],
            root: BridgeId::read(&b[5..13]),
            root_path_cost: u32::from_be_bytes([b[13], b[14], b[15], b[16]]),
            bridge: BridgeId::read(&b[17..25]),
            port: u16at(25),
            message_age: u16at(27),
            max_age: u16at(29),
            hello_time: u16at(31),
            forward_delay: u16at(33),
        }
    }

    fn write(&self, b: &mut [u8]) {
        b[4] = self.flags;
        self.root.write(&mut b[5..13]);
        b[13..17].copy_from_slice(&self.root_path_cost.to_be_bytes());
        self.bridge.write(&mut b[17..25]);
        b[25..27].copy_from_slice(&self.port.to_be_bytes());
        b[27..29].copy_from_slice(&self.message_age.to_be_bytes());
        b[29..31].copy_from_slice(&self.max_age.to_be_bytes());
        b[31..33].copy_from_slice(&self.hello_time.to_be_bytes());
        b[33..35].copy_from_slice(&self.forward_delay.to_be_bytes());
    }
}

/// One BPDU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bpdu {
    /// An STP (802.1D-1998) Configuration BPDU; only the TC and TCA flags
    /// mean anything.
    Config(BpduInfo),
    /// An STP Topology Change Notification.
    Tcn,
    /// A Rapid Spanning Tree BPDU (version ≥ 2).
    Rst(BpduInfo),
}

impl Bpdu {
    /// Read a BPDU starting at its protocol identifier.
    pub fn parse(b: &[u8]) -> Result<Bpdu> {
        if b.len() < TCN_LEN {
            return Err(Error::Truncated);
        }
        if b[0] != 0 || b[1] != 0 {
            return Err(Error::Malformed("BPDU protocol identifier"));
        }
        let version = b[2];
        match b[3] {
            0x00 if b.len() < CONFIG_LEN => Err(Error::Truncated),
            0x00 => {
                // Only TC and TCA mean something in an STP BPDU; the rest
                // is cleared so a round trip compares equal.
                let mut i = BpduInfo::read(b);
                i.flags &= flags::TC | flags::TCA;
                Ok(Bpdu::Config(i))
            }
            0x80 => Ok(Bpdu::Tcn),
            0x02 if version < 2 => Err(Error::Unsupported("RST BPDU with version below 2")),
            0x02 if b.len() < RST_LEN => Err(Error::Truncated),
            0x02 => Ok(Bpdu::Rst(BpduInfo::read(b))),
            _ => Err(Error::Unsupported("BPDU type")),
        }
    }

    /// Octets [`Bpdu::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Bpdu::Config(_) => CONFIG_LEN,
            Bpdu::Tcn => TCN_LEN,
            Bpdu::Rst(_) => RST_LEN,
        }
    }

    /// Write the BPDU (protocol identifier first) into `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<usize> {
        let n = self.buffer_len();
        if b.len() < n {
            return Err(Error::Truncated);
        }
        b[..n].fill(0);
        match self {
            Bpdu::Config(i) => {
                b[2] = 0;
                b[3] = 0x00;
                i.write(b);
                b[4] &= flags::TC | flags::TCA;
            }
            Bpdu::Tcn => {
                b[2] = 0;
                b[3] = 0x80;
            }
            Bpdu::Rst(i) => {
                b[2] = 2;
                b[3] = 0x02;
                i.write(b);
                b[35] = 0; // version 1 length
            }
        }
        Ok(n)
    }
}

/// Whether `frame` is addressed to the bridge group address and carries
/// the spanning tree LLC header (a cheap test for the data path).
pub fn is_bpdu_frame(frame: &[u8]) -> bool {
    frame.len() >= BPDU_OFFSET
        && frame[..6] == BRIDGE_GROUP
        && u16::from_be_bytes([frame[12], frame[13]]) <= 1500
        && frame[14..17] == LLC
}

/// Read the BPDU of a whole frame (destination, source, length, LLC).
/// The length field must cover the BPDU it announces and not exceed the
/// frame; an Ethernet II frame (EtherType ≥ 0x0600) is not a BPDU.
pub fn parse_frame(frame: &[u8]) -> Result<Bpdu> {
    if frame.len() < BPDU_OFFSET {
        return Err(Error::Truncated);
    }
    if frame[..6] != BRIDGE_GROUP {
        return Err(Error::Malformed("BPDU destination"));
    }
    let len = u16::from_be_bytes([frame[12], frame[13]]) as usize;
    if len > 1500 {
        return Err(Error::Unsupported("Ethernet II frame, not 802.3/LLC"));
    }
    if frame[14..17] != LLC {
        return Err(Error::Malformed("LLC header of a BPDU"));
    }
    if len < 3 || 14 + len > frame.len() {
        return Err(Error::Truncated);
    }
    Bpdu::parse(&frame[BPDU_OFFSET..14 + len])
}

/// Build a whole frame from `src` carrying `bpdu`, padded to 60 octets.
/// Returns the frame length.
pub fn build_frame(src: [u8; 6], bpdu: &Bpdu, buf: &mut [u8]) -> Result<usize> {
    if buf.len() < FRAME_LEN {
        return Err(Error::Truncated);
    }
    buf[..FRAME_LEN].fill(0);
    buf[..6].copy_from_slice(&BRIDGE_GROUP);
    buf[6..12].copy_from_slice(&src);
    let n = bpdu.emit(&mut buf[BPDU_OFFSET..FRAME_LEN])?;
    buf[12..14].copy_from_slice(&((3 + n) as u16).to_be_bytes());
    buf[14..17].copy_from_slice(&LLC);
    Ok(FRAME_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> BpduInfo {
        BpduInfo {
            flags: flags::PROPOSAL | flags::LEARNING | flags::AGREEMENT,
            root: BridgeId {
                priority: 4096,
                mac: [0x02, 0, 0, 0, 0, 1],
            },
            root_path_cost: 20000,
            bridge: BridgeId {
                priority: 32768,
                mac: [0x02, 0, 0, 0, 0, 2],
            },
            port: 0x8003,
            message_age: 256,
            max_age: 20 * 256,
            hello_time: 2 * 256,
            forward_delay: 15 * 256,
        }
    }

    #[test]
    fn rst_round_trip_and_layout() {
        let mut i = info();
        i.set_role(Role::Designated);
        assert_eq!(i.role(), Role::Designated);
        let b = Bpdu::Rst(i);
        let mut f = [0u8; 64];
        let n = build_frame([0x02, 0, 0, 0, 0, 9], &b, &mut f).unwrap();
        assert_eq!(n, 60);
        assert_eq!(&f[..6], &BRIDGE_GROUP);
        assert_eq!(&f[12..17], &[0, 39, 0x42, 0x42, 0x03]);
        assert_eq!(&f[17..21], &[0, 0, 2, 2]);
        assert_eq!(f[21], 0x5e); // agreement, learning, designated, proposal
        assert_eq!(&f[22..24], &[0x10, 0x00]);
        assert_eq!(&f[42..44], &[0x80, 0x03]);
        assert!(is_bpdu_frame(&f[..n]));
        assert_eq!(parse_frame(&f[..n]), Ok(b));
    }

    #[test]
    fn root_bridge_rst_bpdu() {
        // A hand-written RST BPDU of a root bridge (32768.aa:bb:cc:00:00:01,
        // port 0x8001, designated, learning, forwarding, agreement).
        let hex = "0180c2000000aabbcc0000010027424203000002027c8000aabbcc000001\
                   000000008000aabbcc00000180010000140002000f0000000000000000";
        let f: Vec<u8> = (0..hex.len() / 2)
            .map(|k| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).unwrap())
            .collect();
        let Ok(Bpdu::Rst(i)) = parse_frame(&f) else {
            panic!("not an RST BPDU")
        };
        assert_eq!(i.role(), Role::Designated);
        assert!(i.has(flags::FORWARDING) && i.has(flags::LEARNING));
        assert_eq!(i.root.priority, 32768);
        assert_eq!(i.bridge.mac, [0xaa, 0xbb, 0xcc, 0, 0, 1]);
        assert_eq!(i.port, 0x8001);
        assert_eq!(i.max_age, 20 * 256);
        assert_eq!(i.hello_time, 2 * 256);
        assert_eq!(i.forward_delay, 15 * 256);
    }

    #[test]
    fn config_and_tcn() {
        let mut i = info();
        i.flags = flags::TC | flags::TCA | flags::PROPOSAL;
        let mut f = [0u8; 60];
        build_frame([2, 0, 0, 0, 0, 1], &Bpdu::Config(i), &mut f).unwrap();
        assert_eq!(f[19], 0, "version 0");
        assert_eq!(f[21], 0x81, "only TC and TCA");
        let Ok(Bpdu::Config(r)) = parse_frame(&f) else {
            panic!()
        };
        assert_eq!(r.flags, flags::TC | flags::TCA);
        build_frame([2, 0, 0, 0, 0, 1], &Bpdu::Tcn, &mut f).unwrap();
        assert_eq!(&f[12..14], &[0, 7]);
        assert_eq!(parse_frame(&f), Ok(Bpdu::Tcn));
    }

    #[test]
    fn rejects() {
        let mut f = [0u8; 60];
        build_frame([2, 0, 0, 0, 0, 1], &Bpdu::Rst(info()), &mut f).unwrap();
        for n in 0..f.len() {
            // Every truncation of the announced length is an error.
            let mut g = f;
            g[12..14].copy_from_slice(&(n as u16).to_be_bytes());
            if n < 3 + RST_LEN {
                assert!(parse_frame(&g).is_err(), "length {n}");
            }
        }
        assert_eq!(parse_frame(&f[..40]), Err(Error::Truncated));
        let mut g = f;
        g[17] = 1;
        assert!(matches!(parse_frame(&g), Err(Error::Malformed(_))));
        let mut g = f;
        g[19] = 0; // RST type with version 0
        assert!(matches!(parse_frame(&g), Err(Error::Unsupported(_))));
        let mut g = f;
        g[20] = 0x33;
        assert!(matches!(parse_frame(&g), Err(Error::Unsupported(_))));
        let mut g = f;
        g[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        assert!(parse_frame(&g).is_err());
        assert!(!is_bpdu_frame(&g));
        let mut g = f;
        g[14] = 0xaa;
        assert!(parse_frame(&g).is_err());
        // MSTP (version 3) reads as its CIST part.
        let mut g = f;
        g[19] = 3;
        g[12..14].copy_from_slice(&43u16.to_be_bytes());
        assert!(matches!(parse_frame(&g), Ok(Bpdu::Rst(_))));
        assert_eq!(
            Bpdu::Rst(info()).emit(&mut [0u8; 35]),
            Err(Error::Truncated)
        );
        assert_eq!(
            build_frame([0; 6], &Bpdu::Tcn, &mut [0u8; 59]),
            Err(Error::Truncated)
        );
        for n in 0..64 {
            let junk: Vec<u8> = (0..n).map(|k| (k * 37 + 11) as u8).collect();
            let _ = Bpdu::parse(&junk);
            let _ = parse_frame(&junk);
        }
    }
}
