//! The kernel's multicast forwarding cache (MFC), IPv4 (`ipmr`) and IPv6
//! (`ip6mr`): decoding of its rtnetlink messages and a monitor socket that
//! dumps the cache and follows its changes.
//!
//! A multicast routing daemon (FRR's pimd) programs the MFC through its
//! `MRT_*`/`MRT6_*` socket; the kernel reports every change as
//! `RTM_NEWROUTE`/`RTM_DELROUTE` with `rtm_family` `RTNL_FAMILY_IPMR` (128)
//! or `RTNL_FAMILY_IP6MR` (129) to the groups `RTNLGRP_IPV4_MROUTE` (6) and
//! `RTNLGRP_IPV6_MROUTE` (10), and dumps the cache on `RTM_GETROUTE` with
//! those families. Interfaces are reported by ifindex: the kernel turns its
//! vif numbers into the ifindex of each vif's device.
//!
//! Unresolved entries (the kernel queued a packet and asked the daemon,
//! `RTNH_F_UNRESOLVED`) are not reported: they forward nothing, and
//! traffic for them must keep reaching the kernel until the daemon
//! answers, which produces the resolved entry.
//!
//! Entries of every multicast routing table are reported alike (the
//! default table is 253; pimd uses one table per VRF).

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use super::nl::{self, NlMsgs, NlSocket, Recv};
use crate::frr::netlink::build::Msg;
use crate::frr::netlink::{
    align4, Attrs, DecodeError, NLMSG_HDRLEN, RTA_DST, RTA_MULTIPATH, RTA_SRC, RTMSG_LEN,
    RTM_DELROUTE, RTM_NEWROUTE, RTNH_LEN,
};

pub use super::neigh::is_overrun;

/// `rtm_family` of IPv4 multicast routes (linux/rtnetlink.h).
pub const RTNL_FAMILY_IPMR: u8 = 128;
/// `rtm_family` of IPv6 multicast routes.
pub const RTNL_FAMILY_IP6MR: u8 = 129;
/// Multicast group of IPv4 MFC changes (`RTMGRP_IPV4_MROUTE` = 0x20).
pub const RTNLGRP_IPV4_MROUTE: u32 = 6;
/// Multicast group of IPv6 MFC changes (`RTMGRP_IPV6_MROUTE` = 0x200).
pub const RTNLGRP_IPV6_MROUTE: u32 = 10;

pub const RTM_GETROUTE: u16 = 26;
pub const RTA_IIF: u16 = 3;
pub const RTA_MFC_STATS: u16 = 17;
/// `rtm_flags`: the entry waits for the daemon's answer.
pub const RTNH_F_UNRESOLVED: u32 = 32;
/// `sizeof(struct rta_mfc_stats)`: packets, bytes, wrong_if as `u64`.
pub const MFC_STATS_LEN: usize = 24;

/// One resolved MFC entry: `(source, group)`, where packets must come from
/// and where they go. `(*,G)` entries have the unspecified source.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MfcEntry {
    pub source: IpAddr,
    pub group: IpAddr,
    /// ifindex packets must arrive on; 0 if the kernel did not name one
    /// (its vif's device is gone).
    pub iif: u32,
    /// `(ifindex, ttl threshold)` per outgoing interface: a packet leaves
    /// there only if its TTL is above the threshold.
    pub oifs: Vec<(u32, u8)>,
    /// Forwarded through this entry (the counters pimd watches).
    pub packets: u64,
    pub bytes: u64,
    /// Arrived on another interface than `iif`.
    pub wrong_if: u64,
}

impl MfcEntry {
    /// `(source, group)`: an entry's identity within its table.
    pub fn key(&self) -> (IpAddr, IpAddr) {
        (self.source, self.group)
    }
}

/// A change of the MFC (dump replies are all `Add`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MfcEvent {
    /// New entry, or a new version of an existing one (full content).
    Add(MfcEntry),
    Del {
        source: IpAddr,
        group: IpAddr,
    },
}

#[inline]
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    Some(u64::from_ne_bytes(s.try_into().ok()?))
}

fn addr(family: u8, attr_type: u16, p: &[u8]) -> Result<IpAddr, DecodeError> {
    let bad = DecodeError::BadAttributeLength {
        attr_type,
        len: p.len(),
    };
    match family {
        RTNL_FAMILY_IPMR => <[u8; 4]>::try_from(p)
            .map(|a| IpAddr::V4(Ipv4Addr::from(a)))
            .map_err(|_| bad),
        _ => <[u8; 16]>::try_from(p)
            .map(|a| IpAddr::V6(Ipv6Addr::from(a)))
            .map_err(|_| bad),
    }
}

/// `RTA_MULTIPATH` of an MFC entry: back-to-back `struct rtnexthop`
/// (`rtnh_len` u16, `rtnh_flags` u8, `rtnh_hops` u8, `rtnh_ifindex` s32),
/// where `rtnh_hops` carries the vif's TTL threshold.
fn oifs(mut p: &[u8]) -> Result<Vec<(u32, u8)>, DecodeError> {
    let mut v = Vec::new();
    while !p.is_empty() {
        let len = nl::u16_at(p, 0).ok_or(DecodeError::BadMultipath)? as usize;
        if len < RTNH_LEN || len > p.len() {
            return Err(DecodeError::BadMultipath);
        }
        let hops = p[3];
        let ifindex = nl::u32_at(p, 4).ok_or(DecodeError::BadMultipath)?;
        v.push((ifindex, hops));
        p = &p[align4(len).min(p.len())..];
    }
    Ok(v)
}

/// Decodes one netlink message (header included): `Ok(None)` when it is
/// not about a resolved MFC entry (other types or families, unresolved
/// entries), an error when it is malformed.
fn decode(msg: &[u8]) -> Result<Option<MfcEvent>, DecodeError> {
    let len = nl::u32_at(msg, 0).unwrap_or(0) as usize;
    if msg.len() < NLMSG_HDRLEN || len < NLMSG_HDRLEN || len > msg.len() {
        return Err(DecodeError::BadMessageLength {
            offset: 0,
            len: len.min(msg.len()),
        });
    }
    let msg = &msg[..len];
    let msg_type = nl::u16_at(msg, 4).unwrap_or(0);
    if msg_type != RTM_NEWROUTE && msg_type != RTM_DELROUTE {
        return Ok(None);
    }
    let body = &msg[NLMSG_HDRLEN..];
    if body.len() < RTMSG_LEN {
        return Err(DecodeError::ShortBody { msg_type });
    }
    // struct rtmsg { u8 family, dst_len, src_len, tos, table, protocol,
    //                scope, type; u32 flags; }
    let family = body[0];
    if family != RTNL_FAMILY_IPMR && family != RTNL_FAMILY_IP6MR {
        return Ok(None);
    }
    let flags = nl::u32_at(body, 8).unwrap_or(0);
    if flags & RTNH_F_UNRESOLVED != 0 {
        return Ok(None);
    }
    let (mut source, mut group, mut iif) = (None, None, 0);
    let (mut list, mut stats) = (Vec::new(), [0u64; 3]);
    for attr in Attrs::new(&body[RTMSG_LEN..]) {
        let (t, p) = attr?;
        match t {
            RTA_SRC => source = Some(addr(family, t, p)?),
            RTA_DST => group = Some(addr(family, t, p)?),
            RTA_IIF => {
                let b: [u8; 4] = p.try_into().map_err(|_| DecodeError::BadAttributeLength {
                    attr_type: t,
                    len: p.len(),
                })?;
                iif = u32::from_ne_bytes(b);
            }
            RTA_MULTIPATH => list = oifs(p)?,
            RTA_MFC_STATS => {
                // Longer is accepted: a later kernel may append counters.
                if p.len() < MFC_STATS_LEN {
                    return Err(DecodeError::BadAttributeLength {
                        attr_type: t,
                        len: p.len(),
                    });
                }
                for (i, s) in stats.iter_mut().enumerate() {
                    *s = u64_at(p, i * 8).unwrap_or(0);
                }
            }
            _ => {}
        }
    }
    // The kernel always sends both, (*,G) included (source 0).
    let missing = |attr_type| DecodeError::BadAttributeLength { attr_type, len: 0 };
    let source = source.ok_or(missing(RTA_SRC))?;
    let group = group.ok_or(missing(RTA_DST))?;
    if msg_type == RTM_DELROUTE {
        return Ok(Some(MfcEvent::Del { source, group }));
    }
    Ok(Some(MfcEvent::Add(MfcEntry {
        source,
        group,
        iif,
        oifs: list,
        packets: stats[0],
        bytes: stats[1],
        wrong_if: stats[2],
    })))
}

/// Decodes one netlink message (`nlmsghdr` + `rtmsg` + attributes, as in
/// a received datagram; bytes after `nlmsg_len` are ignored) into an MFC
/// event. `None` for anything else: other message types and families,
/// unresolved entries, and malformed input (truncated, bad lengths,
/// addresses of the wrong size, a missing `RTA_SRC`/`RTA_DST`).
pub fn parse_route(msg: &[u8]) -> Option<MfcEvent> {
    decode(msg).ok().flatten()
}

/// At most this many datagrams are read per [`MfcMonitor::poll`], so a
/// flood of changes cannot keep one call from returning.
const MAX_DATAGRAMS_PER_POLL: usize = 256;
/// Dumps retried (table changed under the dump, notifications lost while
/// it ran) before [`MfcMonitor::dump`] gives up.
const MAX_DUMP_ATTEMPTS: usize = 8;
/// A dump that makes no progress for this long has failed.
const DUMP_STALL: Duration = Duration::from_secs(10);

/// A `NETLINK_ROUTE` socket subscribed to the IPv4 and IPv6 MFC groups of
/// the network namespace it was opened in.
///
/// Keeping a mirror exact:
/// 1. [`open`](Self::open), then [`dump`](Self::dump) and replace the
///    mirror with its result (opening first means no change between the
///    dump and the subscription is lost);
/// 2. apply every [`poll`](Self::poll) event in order (`Add` replaces the
///    entry of its key, `Del` removes it);
/// 3. when `poll` fails with an error for which [`is_overrun`] holds
///    (`ENOBUFS`: the kernel dropped notifications, or a datagram did not
///    fit), the mirror may be wrong: dump again and replace it. After any
///    other error, dump again too.
///
/// Notifications that arrive while a dump runs are kept and returned by
/// the next `poll`; applied after the dump they converge to the kernel's
/// state, since each carries a whole entry and they come in order.
#[derive(Debug)]
pub struct MfcMonitor {
    sock: NlSocket,
    buf: Vec<u8>,
    seq: u32,
    /// Notifications received while dumping, for the next `poll`.
    pending: VecDeque<MfcEvent>,
    /// Messages skipped because they did not decode.
    decode_errors: u64,
}

impl MfcMonitor {
    /// Receive buffer asked for by [`open`](Self::open).
    pub const DEFAULT_RCVBUF: usize = 4 << 20;

    /// Opens a monitor in the calling thread's network namespace.
    pub fn open() -> io::Result<MfcMonitor> {
        let sock = NlSocket::open()?;
        sock.set_rcvbuf(Self::DEFAULT_RCVBUF)?;
        sock.join_group(RTNLGRP_IPV4_MROUTE)?;
        sock.join_group(RTNLGRP_IPV6_MROUTE)?;
        Ok(MfcMonitor {
            sock,
            buf: vec![0; nl::RECV_BUF_LEN],
            seq: 0,
            pending: VecDeque::new(),
            decode_errors: 0,
        })
    }

    /// Messages skipped because they did not decode (should stay 0).
    pub fn decode_errors(&self) -> u64 {
        self.decode_errors
    }

    /// Every resolved entry of both families, read synchronously. Retries
    /// by itself when the cache changed under the dump or notifications
    /// were lost while it ran; an error with [`is_overrun`] if that kept
    /// happening, `TimedOut` if the kernel stopped answering.
    pub fn dump(&mut self) -> io::Result<Vec<MfcEntry>> {
        for _ in 0..MAX_DUMP_ATTEMPTS {
            // Whatever was queued before this dump is older than it.
            self.pending.clear();
            let mut entries = Vec::new();
            let mut again = false;
            for family in [RTNL_FAMILY_IPMR, RTNL_FAMILY_IP6MR] {
                again |= self.dump_family(family, &mut entries)?;
            }
            if !again {
                return Ok(entries);
            }
        }
        Err(io::Error::from_raw_os_error(libc::ENOBUFS))
    }

    fn send_dump(&mut self, family: u8) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1).max(1);
        let mut body = [0u8; RTMSG_LEN];
        body[0] = family;
        let mut msg = Msg::new(RTM_GETROUTE, nl::NLM_F_REQUEST | nl::NLM_F_DUMP, &body).finish();
        nl::set_seq(&mut msg, self.seq);
        self.sock.send(&msg)?;
        Ok(self.seq)
    }

    /// Runs one dump to its end; true if it must be taken again.
    fn dump_family(&mut self, family: u8, out: &mut Vec<MfcEntry>) -> io::Result<bool> {
        let mut seq = self.send_dump(family)?;
        let mut again = false;
        // Our request was refused because an earlier dump (abandoned by a
        // failed call) still runs: resend once that one ends.
        let mut busy = false;
        let mut last = Instant::now();
        loop {
            if !self.sock.wait(Duration::from_millis(100))? {
                if last.elapsed() > DUMP_STALL {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "MFC dump: no answer from the kernel",
                    ));
                }
                continue;
            }
            let n = match self.sock.recv(&mut self.buf) {
                Ok(Recv::Empty) => continue,
                Ok(Recv::Data(n)) => n,
                // Dump replies are never dropped, only notifications: keep
                // reading to the end, then dump again.
                Ok(Recv::Truncated) => {
                    again = true;
                    continue;
                }
                Err(e) if is_overrun(&e) => {
                    again = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            last = Instant::now();
            let mut done = false;
            let mut resend = false;
            for m in NlMsgs::new(&self.buf[..n.min(self.buf.len())]) {
                let Ok(m) = m else {
                    self.decode_errors += 1;
                    break;
                };
                if m.seq == 0 {
                    // A notification.
                    match decode(m.bytes) {
                        Ok(Some(ev)) => self.pending.push_back(ev),
                        Ok(None) => {}
                        Err(_) => self.decode_errors += 1,
                    }
                    continue;
                }
                if m.seq != seq {
                    // The end of the dump that made ours busy.
                    if busy && m.msg_type == nl::NLMSG_DONE {
                        resend = true;
                    }
                    continue;
                }
                match m.msg_type {
                    nl::NLMSG_DONE => done = true,
                    nl::NLMSG_ERROR => match m.error_code().map(|c| c.saturating_neg()) {
                        Some(0) => {}
                        // Asked while the queue was full: the dump goes on.
                        Some(libc::ENOBUFS) => again = true,
                        Some(libc::EBUSY) => busy = true,
                        // No multicast routing for this family in the kernel.
                        Some(libc::EAFNOSUPPORT) | Some(libc::EOPNOTSUPP) => done = true,
                        Some(code) => return Err(io::Error::from_raw_os_error(code)),
                        None => self.decode_errors += 1,
                    },
                    _ => {
                        if m.flags & nl::NLM_F_DUMP_INTR != 0 {
                            again = true;
                        }
                        match decode(m.bytes) {
                            Ok(Some(MfcEvent::Add(e))) => out.push(e),
                            Ok(_) => {}
                            Err(_) => self.decode_errors += 1,
                        }
                    }
                }
            }
            if done {
                return Ok(again);
            }
            if resend {
                busy = false;
                seq = self.send_dump(family)?;
            }
        }
    }

    /// Waits up to `timeout` for notifications, then returns every event
    /// queued, in order (empty on timeout; without waiting when a dump left
    /// some behind). `Err` with [`is_overrun`] when the kernel dropped
    /// notifications (`ENOBUFS`) or one did not fit the buffer: the events
    /// of this call are dropped with it, and the caller must
    /// [`dump`](Self::dump) again.
    pub fn poll(&mut self, timeout: Duration) -> io::Result<Vec<MfcEvent>> {
        let mut out: Vec<MfcEvent> = self.pending.drain(..).collect();
        if out.is_empty() && !self.sock.wait(timeout)? {
            return Ok(out);
        }
        for _ in 0..MAX_DATAGRAMS_PER_POLL {
            let n = match self.sock.recv(&mut self.buf) {
                Ok(Recv::Empty) => break,
                Ok(Recv::Data(n)) => n,
                Ok(Recv::Truncated) => return Err(io::Error::from_raw_os_error(libc::ENOBUFS)),
                Err(e) => return Err(e),
            };
            for m in NlMsgs::new(&self.buf[..n.min(self.buf.len())]) {
                let Ok(m) = m else {
                    self.decode_errors += 1;
                    break;
                };
                // Non-zero sequence numbers are leftovers of a dump that
                // was abandoned.
                if m.seq != 0 {
                    continue;
                }
                match decode(m.bytes) {
                    Ok(Some(ev)) => out.push(ev),
                    Ok(None) => {}
                    Err(_) => self.decode_errors += 1,
                }
            }
        }
        Ok(out)
    }
}

impl AsRawFd for MfcMonitor {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for MfcMonitor {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

/// Builds MFC messages as the kernel sends them (tests, fuzz seeds).
pub mod build {
    use super::*;

    /// `struct rtmsg` of an MFC entry in table 253 (the default one).
    pub fn rtmsg(family: u8, flags: u32) -> [u8; RTMSG_LEN] {
        let bits = if family == RTNL_FAMILY_IPMR { 32 } else { 128 };
        let mut b = [0u8; RTMSG_LEN];
        // family, dst_len, src_len, tos, table, protocol (RTPROT_MROUTED),
        // scope (universe), type (RTN_MULTICAST).
        b[..8].copy_from_slice(&[family, bits, bits, 0, 253, 17, 0, 5]);
        b[8..].copy_from_slice(&flags.to_ne_bytes());
        b
    }

    /// `RTM_NEWROUTE` for `e`, attributes in the kernel's order (table,
    /// source, group, iif, oifs, stats, expires).
    pub fn add(e: &MfcEntry) -> Vec<u8> {
        let family = if e.group.is_ipv4() {
            RTNL_FAMILY_IPMR
        } else {
            RTNL_FAMILY_IP6MR
        };
        let mut mp = Vec::new();
        for &(ifindex, ttl) in &e.oifs {
            mp.extend_from_slice(&(RTNH_LEN as u16).to_ne_bytes());
            mp.extend_from_slice(&[0, ttl]);
            mp.extend_from_slice(&ifindex.to_ne_bytes());
        }
        let mut stats = Vec::with_capacity(MFC_STATS_LEN);
        for v in [e.packets, e.bytes, e.wrong_if] {
            stats.extend_from_slice(&v.to_ne_bytes());
        }
        Msg::new(RTM_NEWROUTE, 0, &rtmsg(family, 0))
            .attr_u32(15, 253) // RTA_TABLE
            .attr_addr(RTA_SRC, e.source)
            .attr_addr(RTA_DST, e.group)
            .attr_u32(RTA_IIF, e.iif)
            .attr(RTA_MULTIPATH, &mp)
            .attr(RTA_MFC_STATS, &stats)
            .attr(23, &0u64.to_ne_bytes()) // RTA_EXPIRES
            .finish()
    }

    /// `RTM_DELROUTE` for `(source, group)` as the kernel sends it (the
    /// whole entry; only the key matters).
    pub fn del(source: IpAddr, group: IpAddr) -> Vec<u8> {
        let family = if group.is_ipv4() {
            RTNL_FAMILY_IPMR
        } else {
            RTNL_FAMILY_IP6MR
        };
        Msg::new(RTM_DELROUTE, 0, &rtmsg(family, 0))
            .attr_u32(15, 253)
            .attr_addr(RTA_SRC, source)
            .attr_addr(RTA_DST, group)
            .attr(RTA_MULTIPATH, &[])
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn v4() -> MfcEntry {
        MfcEntry {
            source: ip("10.1.0.2"),
            group: ip("232.1.1.1"),
            iif: 3,
            oifs: vec![(4, 1), (7, 64)],
            packets: 10,
            bytes: 1_000,
            wrong_if: 2,
        }
    }

    fn v6() -> MfcEntry {
        MfcEntry {
            source: ip("::"),
            group: ip("ff3e::4321"),
            iif: 9,
            oifs: vec![(11, 1)],
            packets: u64::MAX,
            bytes: 1 << 40,
            wrong_if: 0,
        }
    }

    #[test]
    fn parses_v4_and_v6_entries() {
        for e in [v4(), v6()] {
            assert_eq!(parse_route(&add(&e)), Some(MfcEvent::Add(e.clone())));
            assert_eq!(
                parse_route(&del(e.source, e.group)),
                Some(MfcEvent::Del {
                    source: e.source,
                    group: e.group
                })
            );
        }
    }

    #[test]
    fn star_g_without_oifs_and_no_iif() {
        // (*,G) with an empty oif list and no RTA_IIF (vif device gone).
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(RTNL_FAMILY_IPMR, 0))
            .attr_addr(RTA_SRC, ip("0.0.0.0"))
            .attr_addr(RTA_DST, ip("239.1.2.3"))
            .attr(RTA_MULTIPATH, &[])
            .finish();
        assert_eq!(
            parse_route(&m),
            Some(MfcEvent::Add(MfcEntry {
                source: ip("0.0.0.0"),
                group: ip("239.1.2.3"),
                iif: 0,
                oifs: vec![],
                packets: 0,
                bytes: 0,
                wrong_if: 0,
            }))
        );
    }

    #[test]
    fn padding_before_stats_and_longer_stats_are_accepted() {
        // nla_put_64bit may insert RTA_PAD (24) to align the counters.
        let mut stats = Vec::new();
        for v in [5u64, 6, 7, 8] {
            stats.extend_from_slice(&v.to_ne_bytes());
        }
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(RTNL_FAMILY_IPMR, 0))
            .attr_addr(RTA_SRC, ip("10.0.0.1"))
            .attr_addr(RTA_DST, ip("232.0.0.1"))
            .attr(24, &[])
            .attr(RTA_MFC_STATS, &stats)
            .finish();
        let Some(MfcEvent::Add(e)) = parse_route(&m) else {
            panic!("not parsed");
        };
        assert_eq!((e.packets, e.bytes, e.wrong_if), (5, 6, 7));
    }

    #[test]
    fn ignores_other_families_types_and_unresolved() {
        // A unicast IPv4 route.
        let m = Msg::new(RTM_NEWROUTE, 0, &[2, 24, 0, 0, 254, 3, 0, 1, 0, 0, 0, 0])
            .attr_addr(RTA_DST, ip("10.0.0.0"))
            .finish();
        assert_eq!(parse_route(&m), None);
        // RTM_NEWNEIGH.
        let mut m = add(&v4());
        m[4..6].copy_from_slice(&28u16.to_ne_bytes());
        assert_eq!(parse_route(&m), None);
        // Unresolved: no iif, no oifs, flag set; its expiry delete too.
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(RTNL_FAMILY_IPMR, RTNH_F_UNRESOLVED))
            .attr_addr(RTA_SRC, ip("10.0.0.1"))
            .attr_addr(RTA_DST, ip("232.0.0.1"))
            .finish();
        assert_eq!(parse_route(&m), None);
        let mut m = m;
        m[4..6].copy_from_slice(&RTM_DELROUTE.to_ne_bytes());
        assert_eq!(parse_route(&m), None);
    }

    #[test]
    fn malformed_is_none() {
        let good = add(&v4());
        // Short header, nlmsg_len past the end, rtmsg cut.
        assert_eq!(parse_route(&good[..10]), None);
        let mut big = good.clone();
        big[0..4].copy_from_slice(&9_999u32.to_ne_bytes());
        assert_eq!(parse_route(&big), None);
        let m = Msg::new(RTM_NEWROUTE, 0, &[RTNL_FAMILY_IPMR, 0, 0, 0]).finish();
        assert_eq!(parse_route(&m), None);
        // IPv6 family with IPv4 addresses.
        let m = Msg::new(RTM_NEWROUTE, 0, &rtmsg(RTNL_FAMILY_IP6MR, 0))
            .attr_addr(RTA_SRC, ip("10.0.0.1"))
            .attr_addr(RTA_DST, ip("232.0.0.1"))
            .finish();
        assert_eq!(parse_route(&m), None);
        // No group; no source.
        let base = || Msg::new(RTM_NEWROUTE, 0, &rtmsg(RTNL_FAMILY_IPMR, 0));
        let m = base().attr_addr(RTA_SRC, ip("10.0.0.1")).finish();
        assert_eq!(parse_route(&m), None);
        let m = base().attr_addr(RTA_DST, ip("232.0.0.1")).finish();
        assert_eq!(parse_route(&m), None);
        // A short iif, short stats, an rtnexthop shorter than 8 or running
        // past its attribute.
        let ok = || {
            base()
                .attr_addr(RTA_SRC, ip("10.0.0.1"))
                .attr_addr(RTA_DST, ip("232.0.0.1"))
        };
        assert!(parse_route(&ok().finish()).is_some());
        assert_eq!(parse_route(&ok().attr(RTA_IIF, &[1, 0]).finish()), None);
        assert_eq!(
            parse_route(&ok().attr(RTA_MFC_STATS, &[0; 16]).finish()),
            None
        );
        let mut nh = [0u8; 8];
        nh[0..2].copy_from_slice(&4u16.to_ne_bytes());
        assert_eq!(parse_route(&ok().attr(RTA_MULTIPATH, &nh).finish()), None);
        nh[0..2].copy_from_slice(&16u16.to_ne_bytes());
        assert_eq!(parse_route(&ok().attr(RTA_MULTIPATH, &nh).finish()), None);
        assert_eq!(
            parse_route(&ok().attr(RTA_MULTIPATH, &nh[..5]).finish()),
            None
        );
        // An attribute header claiming more than there is.
        let mut m = ok().finish();
        m.extend_from_slice(&[40, 0, 9, 0]);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(parse_route(&m), None);
    }

    #[test]
    fn trailing_bytes_after_nlmsg_len_are_ignored() {
        let mut m = add(&v6());
        m.extend_from_slice(&[0xff; 9]);
        assert_eq!(parse_route(&m), Some(MfcEvent::Add(v6())));
    }

    /// A decoded entry must match the shape of its family.
    fn check(m: &[u8]) {
        if let Some(MfcEvent::Add(e)) = parse_route(m) {
            assert_eq!(e.source.is_ipv4(), e.group.is_ipv4());
        }
    }

    #[test]
    fn every_truncation_and_mutation_is_safe() {
        for m in [add(&v4()), add(&v6()), del(ip("::1"), ip("ff02::16"))] {
            for n in 0..=m.len() {
                let mut t = m[..n].to_vec();
                check(&t);
                if n >= 4 {
                    // nlmsg_len fixed to the cut, so the attribute walk
                    // itself meets the truncation.
                    t[0..4].copy_from_slice(&(n as u32).to_ne_bytes());
                    check(&t);
                }
            }
            for i in 0..m.len() {
                for v in [0u8, 1, 3, 4, 7, 8, 9, 0x7f, 0x80, 0xfe, 0xff] {
                    let mut t = m.clone();
                    t[i] = v;
                    check(&t);
                }
            }
        }
    }

    #[test]
    fn random_garbage_never_panics() {
        // xorshift64*: deterministic, no dependency.
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            s.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        for _ in 0..20_000 {
            let n = (next() % 160) as usize;
            let mut m: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            // Often a plausible header, family and flags so attribute
            // parsing runs.
            if n >= NLMSG_HDRLEN + RTMSG_LEN && next() % 2 == 0 {
                m[0..4].copy_from_slice(&(n as u32).to_ne_bytes());
                let t = [RTM_NEWROUTE, RTM_DELROUTE][(next() % 2) as usize];
                m[4..6].copy_from_slice(&t.to_ne_bytes());
                m[16] = [RTNL_FAMILY_IPMR, RTNL_FAMILY_IP6MR][(next() % 2) as usize];
                m[24..28].copy_from_slice(&0u32.to_ne_bytes());
            }
            check(&m);
        }
    }
}
