//! The multicast stage: IGMP/MLD snooping decisions for switched frames,
//! and the route lookup of routed multicast.
//!
//! Reads: the multicast snapshot (`tables::mcast::McastTables`).
//! Sets: for switched frames that layer 2 would flood, a multicast action:
//! `Snoop` (an IGMP/MLD message: to the snooping thread, and forwarded —
//! queries to every port, reports and leaves to router ports only) or
//! `Mcast(entry)` (data of a registered group: the route's ports; or
//! [`UNREGISTERED`]: router ports only). Link-local groups (224.0.0.x,
//! ff01::/ff02::) and non-IP multicast stay flooded.
//!
//! Runs only when a snapshot exists, as one extra pass over the frames the
//! layer-2 stage flooded, so a switch without multicast pays nothing.

use crate::l2::{Action, Verdicts};
use crate::WorkerCounters;
use io::FrameBatch;
use tables::mcast::{McAddr, McastTables};

/// `Action::Mcast` of a group no route matches.
pub const UNREGISTERED: u32 = u32::MAX;

const PROTO_IGMP: u8 = 2;
const PROTO_PIM: u8 = 103;
const PROTO_ICMPV6: u8 = 58;
const PROTO_HOPOPTS: u8 = 0;

/// What a multicast IP packet is, as far as forwarding cares.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum McPacket {
    /// IGMP or MLD (or PIM hello): the snooping thread wants it. `flood`:
    /// a query or a router's hello, forwarded to every port; otherwise a
    /// report/leave, forwarded to router ports only.
    Control { flood: bool },
    /// Data to a routable group.
    Data {
        group: McAddr,
        source: McAddr,
        /// TTL / hop limit.
        ttl: u8,
        /// Offset of the TTL / hop limit byte in the frame.
        ttl_off: usize,
    },
    /// Link-local scope: flooded like broadcast.
    LinkLocal,
    /// Not IP, or malformed: left to layer 2.
    Other,
}

/// Look into a multicast frame whose EtherType sits at `off` (12, or 16
/// after a tag). Never reads past the frame.
pub fn inspect(frame: &[u8], off: usize) -> McPacket {
    let Some(et) = frame.get(off..off + 2) else {
        return McPacket::Other;
    };
    let ip = off + 2;
    match u16::from_be_bytes([et[0], et[1]]) {
        0x0800 => {
            if frame.len() < ip + 20 || frame[ip] >> 4 != 4 {
                return McPacket::Other;
            }
            let ihl = (frame[ip] & 0x0f) as usize * 4;
            if ihl < 20 || frame.len() < ip + ihl {
                return McPacket::Other;
            }
            let proto = frame[ip + 9];
            let dst = u32::from_be_bytes([
                frame[ip + 16],
                frame[ip + 17],
                frame[ip + 18],
                frame[ip + 19],
            ]);
            if dst >> 28 != 0xe {
                return McPacket::Other;
            }
            if proto == PROTO_IGMP {
                let flood = frame.get(ip + ihl).is_some_and(|&t| t == 0x11);
                return McPacket::Control { flood };
            }
            if proto == PROTO_PIM && dst == 0xe000_000d {
                return McPacket::Control { flood: true };
            }
            if dst >> 8 == 0xe0_0000 {
                return McPacket::LinkLocal;
            }
            let src = u32::from_be_bytes([
                frame[ip + 12],
                frame[ip + 13],
                frame[ip + 14],
                frame[ip + 15],
            ]);
            McPacket::Data {
                group: McAddr::V4(dst),
                source: McAddr::V4(src),
                ttl: frame[ip + 8],
                ttl_off: ip + 8,
            }
        }
        0x86dd => {
            if frame.len() < ip + 40 || frame[ip] >> 4 != 6 {
                return McPacket::Other;
            }
            let dst = u128::from_be_bytes(frame[ip + 24..ip + 40].try_into().unwrap_or_default());
            if dst >> 120 != 0xff {
                return McPacket::Other;
            }
            // MLD rides behind a hop-by-hop header (router alert).
            let mut nh = frame[ip + 6];
            let mut at = ip + 40;
            if nh == PROTO_HOPOPTS {
                let Some(h) = frame.get(at..at + 2) else {
                    return McPacket::Other;
                };
                nh = h[0];
                at += (h[1] as usize + 1) * 8;
            }
            if nh == PROTO_ICMPV6 {
                match frame.get(at) {
                    Some(130) => return McPacket::Control { flood: true },
                    Some(131 | 132 | 143) => return McPacket::Control { flood: false },
                    _ => {}
                }
            }
            if nh == PROTO_PIM && dst == 0xff02_0000_0000_0000_0000_0000_0000_000d {
                return McPacket::Control { flood: true };
            }
            // Scope nibble 0–2: reserved, interface- and link-local.
            if (dst >> 112) & 0xf <= 2 {
                return McPacket::LinkLocal;
            }
            let src = u128::from_be_bytes(frame[ip + 8..ip + 24].try_into().unwrap_or_default());
            McPacket::Data {
                group: McAddr::V6(dst),
                source: McAddr::V6(src),
                ttl: frame[ip + 7],
                ttl_off: ip + 7,
            }
        }
        _ => McPacket::Other,
    }
}

/// Decrement the TTL / hop limit at `ttl_off` (from [`inspect`]); for
/// IPv4 the header checksum is updated incrementally (RFC 1624).
#[inline]
pub fn decrement_ttl(frame: &mut [u8], ttl_off: usize) {
    let Some(&ttl) = frame.get(ttl_off) else {
        return;
    };
    if ttl == 0 {
        return;
    }
    let ip = ttl_off.wrapping_sub(8);
    if frame.get(ip).is_some_and(|b| b >> 4 == 4) && frame.len() >= ip + 20 {
        let _ = wire::Ipv4Packet::new_unchecked(&mut frame[ip..]).decrement_ttl();
    } else {
        frame[ttl_off] = ttl - 1;
    }
}

/// The snooping pass over a switched batch already decided by
/// `l2::process`: multicast frames flooded in a snooping VLAN get their
/// multicast action.
pub fn snoop(mc: &McastTables, batch: &FrameBatch, out: &mut Verdicts, c: &WorkerCounters) {
    for i in 0..batch.len() {
        let v = &mut out.v[i];
        if v.action != Action::Flood {
            continue;
        }
        let frame = batch.frame(i);
        if frame[0] & 1 == 0 || frame[..6] == [0xff; 6] {
            continue; // unknown unicast or broadcast: flooded
        }
        let Some(vl) = mc.snooping(v.vlan) else {
            continue;
        };
        let off = v.inner_off as usize;
        match inspect(frame, off) {
            McPacket::Control { flood } => v.action = Action::Snoop { flood },
            McPacket::Data { group, source, .. } => {
                match mc.routes.lookup_index(v.vlan, group, source) {
                    Some(e) => {
                        c.mcast.registered.add(1);
                        v.action = Action::Mcast(e);
                    }
                    None => {
                        c.mcast.unregistered.add(1);
                        if !vl.flood_unregistered {
                            v.action = Action::Mcast(UNREGISTERED);
                        }
                    }
                }
            }
            McPacket::LinkLocal | McPacket::Other => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(proto: u8, dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0x01, 0x00, 0x5e, dst[1] & 0x7f, dst[2], dst[3]];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x00]);
        f.extend_from_slice(&[
            0x45,
            0,
            0,
            20 + payload.len() as u8,
            0,
            0,
            0,
            0,
            7,
            proto,
            0,
            0,
        ]);
        f.extend_from_slice(&[10, 0, 0, 1]);
        f.extend_from_slice(&dst);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn ipv4_kinds() {
        assert_eq!(
            inspect(&v4(2, [224, 0, 0, 1], &[0x11, 0]), 12),
            McPacket::Control { flood: true }
        );
        assert_eq!(
            inspect(&v4(2, [239, 1, 1, 1], &[0x16, 0]), 12),
            McPacket::Control { flood: false }
        );
        assert_eq!(
            inspect(&v4(103, [224, 0, 0, 13], &[0x20]), 12),
            McPacket::Control { flood: true }
        );
        assert_eq!(
            inspect(&v4(17, [224, 0, 0, 251], &[]), 12),
            McPacket::LinkLocal
        );
        assert_eq!(
            inspect(&v4(17, [232, 1, 2, 3], &[]), 12),
            McPacket::Data {
                group: McAddr::V4(0xe801_0203),
                source: McAddr::V4(0x0a00_0001),
                ttl: 7,
                ttl_off: 22
            }
        );
        assert_eq!(inspect(&v4(17, [10, 1, 2, 3], &[]), 12), McPacket::Other);
    }

    #[test]
    fn ipv6_mld_behind_hop_by_hop() {
        let mut f = vec![0x33, 0x33, 0, 0, 0, 0x16, 2, 0, 0, 0, 0, 1, 0x86, 0xdd];
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 36, 0, 1]);
        f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16]);
        f.extend_from_slice(&[58, 0, 5, 2, 0, 0, 1, 0]); // hop-by-hop: router alert
        f.extend_from_slice(&[143, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(inspect(&f, 12), McPacket::Control { flood: false });
        // The same cut short never panics.
        for n in 0..f.len() {
            let _ = inspect(&f[..n], 12);
        }
        // Site-local data.
        let mut d = f.clone();
        d[14 + 6] = 17;
        d[14 + 24 + 1] = 0x05;
        assert!(matches!(inspect(&d, 12), McPacket::Data { ttl: 1, .. }));
        d[14 + 24 + 1] = 0x02;
        assert_eq!(inspect(&d, 12), McPacket::LinkLocal);
    }

    #[test]
    fn ttl_decrement_keeps_the_ipv4_checksum_valid() {
        let mut f = v4(17, [232, 1, 2, 3], &[]);
        let sum = |f: &[u8]| wire::checksum::fold(wire::checksum::sum(&f[14..34]));
        let c = !sum(&f);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        assert_eq!(sum(&f), 0xffff);
        let McPacket::Data { ttl_off, .. } = inspect(&f, 12) else {
            panic!("data");
        };
        decrement_ttl(&mut f, ttl_off);
        assert_eq!(f[22], 6);
        assert_eq!(sum(&f), 0xffff, "checksum still verifies");
    }

    #[test]
    fn garbage_never_panics() {
        let mut r = testkit::routes::Rng(0x1234_5678);
        for len in 0..120 {
            for _ in 0..50 {
                let f: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
                let _ = inspect(&f, 12);
                let _ = inspect(&f, 16);
                let _ = inspect(&f, 200);
            }
        }
    }
}
