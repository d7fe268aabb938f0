//! The kernel's neighbour table (ARP and IPv6 ND): decoding of
//! `RTM_NEWNEIGH`/`RTM_DELNEIGH` and a monitor socket that dumps the table
//! and follows its changes.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use super::nl::{self, NlMsgs, NlSocket, Recv};
use crate::frr::netlink::build::Msg;
use crate::frr::netlink::{Attrs, NLMSG_HDRLEN};

pub use crate::frr::netlink::{DecodeError, AF_INET, AF_INET6};

// Message types (linux/rtnetlink.h).
pub const RTM_NEWNEIGH: u16 = 28;
pub const RTM_DELNEIGH: u16 = 29;
pub const RTM_GETNEIGH: u16 = 30;

/// Multicast group of neighbour changes.
pub const RTNLGRP_NEIGH: u32 = 3;

// Neighbour attributes (linux/neighbour.h).
pub const NDA_DST: u16 = 1;
pub const NDA_LLADDR: u16 = 2;
/// `u32` of extended flags (`NTF_EXT_*`, Linux >= 5.16).
pub const NDA_FLAGS_EXT: u16 = 15;

/// `ndm_flags` in a request: treat the entry as used (resolve it if it
/// is not; with no `NTF_MANAGED`, an admin update clears that flag and
/// leaves state and address as they are).
pub const NTF_USE: u8 = 0x01;

/// `ndm_flags`: a proxy-ARP/ND entry (answers for others, resolves nothing).
pub const NTF_PROXY: u8 = 0x08;
/// Entry installed by an external control plane (not aged, not probed).
pub const NTF_EXT_LEARNED: u8 = 0x10;
/// `NDA_FLAGS_EXT`: a managed entry. The kernel resolves it without
/// traffic, keeps re-confirming it (every `interval_probe_time_ms`, 5 s by
/// default) and so keeps it out of the ageing collection (Linux >= 5.16).
pub const NTF_EXT_MANAGED: u32 = 0x1;
/// Extended flags sit above the 8 bits of `ndm_flags` in
/// [`NeighborEvent::flags`] (the kernel's own `NTF_EXT_SHIFT`).
pub const NTF_EXT_SHIFT: u32 = 8;
/// [`NeighborEvent::flags`] bit of a managed entry.
pub const NTF_MANAGED: u32 = NTF_EXT_MANAGED << NTF_EXT_SHIFT;

/// `sizeof(struct ndmsg)`.
pub const NDMSG_LEN: usize = 12;

// NUD states (`ndm_state`, one bit each).
pub const NUD_NONE: u16 = 0x00;
pub const NUD_INCOMPLETE: u16 = 0x01;
pub const NUD_REACHABLE: u16 = 0x02;
pub const NUD_STALE: u16 = 0x04;
pub const NUD_DELAY: u16 = 0x08;
pub const NUD_PROBE: u16 = 0x10;
pub const NUD_FAILED: u16 = 0x20;
pub const NUD_NOARP: u16 = 0x40;
pub const NUD_PERMANENT: u16 = 0x80;

/// States in which the entry holds a link-layer address worth forwarding
/// to (the kernel's own `NUD_VALID`). STALE/DELAY/PROBE are included: the
/// kernel itself keeps sending to such an address while it re-confirms it.
pub const NUD_USABLE: u16 =
    NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;

/// One neighbour entry as the kernel reported it (from a dump or a change
/// notification: both carry the full entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NeighborEvent {
    /// Interface the entry belongs to.
    pub ifindex: u32,
    pub ip: IpAddr,
    /// Link-layer address; `None` while unresolved (INCOMPLETE, FAILED) or
    /// when the device's addresses are not 6 bytes long.
    pub mac: Option<[u8; 6]>,
    /// `NUD_*` bits.
    pub state: u16,
    /// `ndm_flags` (`NTF_*`) and, shifted by [`NTF_EXT_SHIFT`], the
    /// extended flags of `NDA_FLAGS_EXT` ([`NTF_MANAGED`]).
    pub flags: u32,
    /// `RTM_DELNEIGH`: the entry is gone.
    pub deleted: bool,
}

impl NeighborEvent {
    /// True when traffic to `ip` may be sent to `mac`: not deleted, resolved,
    /// and in one of the [`NUD_USABLE`] states. Anything else means the
    /// mirror should forget the entry (and punt traffic to the kernel,
    /// which will resolve it).
    pub fn usable(&self) -> bool {
        !self.deleted && self.mac.is_some() && self.state & NUD_USABLE != 0
    }

    /// The kernel holds the entry as managed ([`NTF_MANAGED`]).
    pub fn managed(&self) -> bool {
        self.flags & NTF_MANAGED != 0
    }
}

/// Decodes one netlink message (`nlmsghdr` + `ndmsg` + attributes).
///
/// `msg` must hold at least `nlmsg_len` bytes; anything after that (padding)
/// is ignored. `Ok(None)` for message types other than `RTM_NEWNEIGH`/
/// `RTM_DELNEIGH`, for families other than IPv4/IPv6 (bridge FDB entries
/// share the neighbour group) and for proxy entries. A missing `NDA_DST` is
/// reported as `BadAttributeLength { attr_type: NDA_DST, len: 0 }`.
pub fn decode_neigh(msg: &[u8]) -> Result<Option<NeighborEvent>, DecodeError> {
    let len = nl::u32_at(msg, 0).unwrap_or(0) as usize;
    if msg.len() < NLMSG_HDRLEN || len < NLMSG_HDRLEN || len > msg.len() {
        return Err(DecodeError::BadMessageLength {
            offset: 0,
            len: if msg.len() < NLMSG_HDRLEN {
                msg.len()
            } else {
                len
            },
        });
    }
    let msg = &msg[..len];
    let msg_type = nl::u16_at(msg, 4).unwrap_or(0);
    if msg_type != RTM_NEWNEIGH && msg_type != RTM_DELNEIGH {
        return Ok(None);
    }
    let body = &msg[NLMSG_HDRLEN..];
    if body.len() < NDMSG_LEN {
        return Err(DecodeError::ShortBody { msg_type });
    }
    // struct ndmsg { u8 family, pad1; u16 pad2; s32 ifindex; u16 state;
    //                u8 flags, type; }
    let family = body[0];
    if family != AF_INET && family != AF_INET6 {
        return Ok(None);
    }
    let ifindex = nl::u32_at(body, 4).unwrap_or(0);
    let state = nl::u16_at(body, 8).unwrap_or(0);
    let flags = body[10];
    if flags & NTF_PROXY != 0 {
        return Ok(None);
    }

    let mut ip = None;
    let mut mac = None;
    let mut ext = 0u32;
    for attr in Attrs::new(&body[NDMSG_LEN..]) {
        let (t, p) = attr?;
        match t {
            NDA_DST => {
                ip = Some(match (family, p.len()) {
                    (AF_INET, 4) => IpAddr::V4(Ipv4Addr::new(p[0], p[1], p[2], p[3])),
                    (AF_INET6, 16) => {
                        let mut a = [0u8; 16];
                        a.copy_from_slice(p);
                        IpAddr::V6(Ipv6Addr::from(a))
                    }
                    _ => {
                        return Err(DecodeError::BadAttributeLength {
                            attr_type: t,
                            len: p.len(),
                        })
                    }
                })
            }
            // Other lengths are legal (tunnels, InfiniBand) but not Ethernet.
            NDA_LLADDR => mac = <[u8; 6]>::try_from(p).ok(),
            // Only the bits that fit above ndm_flags; a bad length is
            // ignored like an unknown attribute (nothing depends on it to
            // forward).
            NDA_FLAGS_EXT => {
                if let Ok(b) = <[u8; 4]>::try_from(p) {
                    ext = u32::from_ne_bytes(b) & (u32::MAX >> NTF_EXT_SHIFT);
                }
            }
            _ => {}
        }
    }
    let ip = ip.ok_or(DecodeError::BadAttributeLength {
        attr_type: NDA_DST,
        len: 0,
    })?;
    Ok(Some(NeighborEvent {
        ifindex,
        ip,
        mac,
        state,
        flags: u32::from(flags) | (ext << NTF_EXT_SHIFT),
        deleted: msg_type == RTM_DELNEIGH,
    }))
}

/// Decodes every neighbour message in `buf` (several messages back to
/// back, as in one datagram). Other message types are skipped; a message
/// that fails to decode yields an error and the walk goes on; a bad
/// `nlmsg_len` yields an error and ends it.
pub fn decode_all(buf: &[u8]) -> Vec<Result<NeighborEvent, DecodeError>> {
    NlMsgs::new(buf)
        .filter_map(|m| match m {
            Ok(m) => decode_neigh(m.bytes).transpose(),
            Err(e) => Some(Err(e)),
        })
        .collect()
}

/// True when `err` (from [`NeighborMonitor::recv`]) means notifications
/// were lost: the caller's mirror may be wrong and must be rebuilt from a
/// fresh dump.
pub fn is_overrun(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::ENOBUFS)
}

/// At most this many datagrams are read per [`NeighborMonitor::recv`], so a
/// flood of changes cannot keep one call from returning.
const MAX_DATAGRAMS_PER_RECV: usize = 256;

/// A `NETLINK_ROUTE` socket subscribed to `RTNLGRP_NEIGH`: dump replies and
/// live change notifications of the kernel's ARP/ND tables, for every
/// interface of the network namespace it was opened in (filter by ifindex).
///
/// Keeping a mirror exact:
/// 1. open the monitor, then [`request_dump`](Self::request_dump) (opening
///    first means no change between the dump and the subscription is lost);
/// 2. apply every event in order: `usable()` → install/update, otherwise
///    remove;
/// 3. on an error for which [`is_overrun`] holds, notifications were
///    dropped (even 8 MiB can overflow on a burst): request a dump, and when
///    [`dump_in_progress`](Self::dump_in_progress) turns false remove every
///    entry not reported since the dump was requested. After any other
///    error, request a dump again too.
///
/// Dump replies are produced while the socket is read, after the
/// notifications already queued, so applying everything in arrival order
/// converges to the kernel's current state.
#[derive(Debug)]
pub struct NeighborMonitor {
    sock: NlSocket,
    buf: Vec<u8>,
    seq: u32,
    /// Sequence number of the dump whose replies are being read.
    dump_seq: Option<u32>,
    /// Another dump is wanted once the current one ends.
    redump: bool,
    /// Messages (or datagrams) skipped because they did not decode.
    decode_errors: u64,
}

impl NeighborMonitor {
    /// Receive buffer asked for by [`open`](Self::open).
    pub const DEFAULT_RCVBUF: usize = 8 << 20;

    /// Opens a monitor in the calling thread's network namespace with an
    /// 8 MiB receive buffer.
    pub fn open() -> io::Result<NeighborMonitor> {
        Self::with_rcvbuf(Self::DEFAULT_RCVBUF)
    }

    /// Same, with a chosen receive buffer size (the kernel doubles it for
    /// bookkeeping and enforces a small minimum).
    pub fn with_rcvbuf(bytes: usize) -> io::Result<NeighborMonitor> {
        let sock = NlSocket::open()?;
        sock.set_rcvbuf(bytes)?;
        sock.join_group(RTNLGRP_NEIGH)?;
        Ok(NeighborMonitor {
            sock,
            buf: vec![0; nl::RECV_BUF_LEN],
            seq: 0,
            dump_seq: None,
            redump: false,
            decode_errors: 0,
        })
    }

    /// The receive buffer the kernel granted (`SO_RCVBUF`, doubled).
    pub fn rcvbuf(&self) -> io::Result<usize> {
        self.sock
            .get_opt(libc::SOL_SOCKET, libc::SO_RCVBUF)
            .map(|v| v.max(0) as usize)
    }

    /// Asks for the whole table (IPv4 and IPv6, every interface); the
    /// replies come through [`recv`](Self::recv) like any other event. If a
    /// dump is already running (the kernel allows one per socket) a new one
    /// is sent as soon as it ends, since it may predate what the caller
    /// wants to catch up on.
    pub fn request_dump(&mut self) -> io::Result<()> {
        if self.dump_seq.is_some() {
            self.redump = true;
            return Ok(());
        }
        self.send_dump()
    }

    fn send_dump(&mut self) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1).max(1);
        // A full ndmsg with AF_UNSPEC: both ARP and ND tables, no filter.
        let mut msg = Msg::new(
            RTM_GETNEIGH,
            nl::NLM_F_REQUEST | nl::NLM_F_DUMP,
            &[0u8; NDMSG_LEN],
        )
        .finish();
        nl::set_seq(&mut msg, self.seq);
        // If the send fails no dump is pending: the caller sees the error
        // and asks again.
        self.redump = false;
        self.sock.send(&msg)?;
        self.dump_seq = Some(self.seq);
        Ok(())
    }

    /// True from [`request_dump`](Self::request_dump) until the last reply
    /// of the (last) dump has been received.
    pub fn dump_in_progress(&self) -> bool {
        self.dump_seq.is_some() || self.redump
    }

    /// Messages skipped because they did not decode (should stay 0; kernel
    /// data is not trusted to be well-formed, only to be rare when not).
    pub fn decode_errors(&self) -> u64 {
        self.decode_errors
    }

    /// Waits up to `timeout` for something to arrive, then returns every
    /// event queued (dump replies and notifications alike, in order); empty
    /// on timeout. `Err` with [`is_overrun`] when the kernel dropped
    /// notifications (`ENOBUFS`) or a datagram did not fit: re-dump (events
    /// read earlier in the same call are dropped with it; the dump
    /// supersedes them). The error of a failed dump request is returned as
    /// is.
    ///
    /// With a receive buffer smaller than one dump chunk (32 KiB) the
    /// kernel also reports `ENOBUFS` when it cannot queue the next chunk
    /// behind pending notifications, although nothing was lost; re-dumping
    /// on it is harmless and converges once the queue is drained.
    pub fn recv(&mut self, timeout: Duration) -> io::Result<Vec<NeighborEvent>> {
        let mut out = Vec::new();
        if !self.sock.wait(timeout)? {
            return Ok(out);
        }
        for _ in 0..MAX_DATAGRAMS_PER_RECV {
            match self.sock.recv(&mut self.buf) {
                Ok(Recv::Empty) => break,
                Ok(Recv::Data(n)) => self.handle(n, &mut out)?,
                Ok(Recv::Truncated) => return Err(self.overrun()),
                Err(e) if is_overrun(&e) => return Err(self.overrun()),
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    fn overrun(&mut self) -> io::Error {
        // A dump being read may already have passed entries whose later
        // changes were just lost.
        if self.dump_seq.is_some() {
            self.redump = true;
        }
        io::Error::from_raw_os_error(libc::ENOBUFS)
    }

    fn handle(&mut self, n: usize, out: &mut Vec<NeighborEvent>) -> io::Result<()> {
        let mut dump_ended = false;
        let mut dump_error = None;
        for m in NlMsgs::new(&self.buf[..n.min(self.buf.len())]) {
            let m = match m {
                Ok(m) => m,
                Err(_) => {
                    self.decode_errors += 1;
                    break;
                }
            };
            let ours = self.dump_seq == Some(m.seq);
            match m.msg_type {
                nl::NLMSG_DONE if ours => dump_ended = true,
                nl::NLMSG_ERROR if ours => match m.error_code() {
                    Some(0) => {}
                    // The dump was requested while the receive queue was
                    // full: the kernel reports ENOBUFS but keeps the dump
                    // running, and resumes it as the queue is read.
                    Some(code) if code == -libc::ENOBUFS => {}
                    Some(code) => {
                        dump_ended = true;
                        dump_error = Some(io::Error::from_raw_os_error(code.saturating_neg()));
                    }
                    None => self.decode_errors += 1,
                },
                _ => {
                    if ours && m.flags & nl::NLM_F_DUMP_INTR != 0 {
                        // The table changed under the dump: take another.
                        self.redump = true;
                    }
                    match decode_neigh(m.bytes) {
                        Ok(Some(ev)) => out.push(ev),
                        Ok(None) => {}
                        Err(_) => self.decode_errors += 1,
                    }
                }
            }
        }
        if dump_ended {
            self.dump_seq = None;
            if let Some(e) = dump_error {
                self.redump = false;
                return Err(e);
            }
            if self.redump {
                self.send_dump()?;
            }
        }
        Ok(())
    }
}

impl AsRawFd for NeighborMonitor {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for NeighborMonitor {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

/// Builds neighbour messages as the kernel sends them (tests, fuzz seeds).
pub mod build {
    use super::*;

    /// `struct ndmsg`.
    pub fn ndmsg(family: u8, ifindex: u32, state: u16, flags: u8) -> [u8; NDMSG_LEN] {
        let mut b = [0u8; NDMSG_LEN];
        b[0] = family;
        b[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        b[8..10].copy_from_slice(&state.to_ne_bytes());
        b[10] = flags;
        b
    }

    /// An `RTM_NEWNEIGH` (or `RTM_DELNEIGH` when `deleted`) for `ev`.
    pub fn neigh(ev: &NeighborEvent) -> Vec<u8> {
        let family = if ev.ip.is_ipv4() { AF_INET } else { AF_INET6 };
        let t = if ev.deleted {
            RTM_DELNEIGH
        } else {
            RTM_NEWNEIGH
        };
        let mut m = Msg::new(t, 0, &ndmsg(family, ev.ifindex, ev.state, ev.flags as u8))
            .attr_addr(NDA_DST, ev.ip);
        if let Some(mac) = ev.mac {
            m = m.attr(NDA_LLADDR, &mac);
        }
        if ev.flags >> NTF_EXT_SHIFT != 0 {
            m = m.attr_u32(NDA_FLAGS_EXT, ev.flags >> NTF_EXT_SHIFT);
        }
        // NDA_CACHEINFO and NDA_PROBES, as the kernel appends them.
        m.attr(3, &[0u8; 16]).attr_u32(4, 1).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    const MAC: [u8; 6] = [0x02, 0x00, 0x5e, 0x10, 0x20, 0x30];

    fn ev(ip: &str, mac: Option<[u8; 6]>, state: u16, deleted: bool) -> NeighborEvent {
        NeighborEvent {
            ifindex: 7,
            ip: ip.parse().unwrap(),
            mac,
            state,
            flags: 0,
            deleted,
        }
    }

    #[test]
    fn decodes_v4_and_v6() {
        for e in [
            ev("192.0.2.10", Some(MAC), NUD_REACHABLE, false),
            ev("2001:db8::10", Some(MAC), NUD_STALE, false),
            ev("fe80::1", Some(MAC), NUD_PERMANENT, false),
        ] {
            assert_eq!(decode_neigh(&neigh(&e)), Ok(Some(e)));
            assert!(e.usable());
        }
    }

    #[test]
    fn incomplete_failed_and_deleted_are_not_usable() {
        let inc = ev("192.0.2.11", None, NUD_INCOMPLETE, false);
        assert_eq!(decode_neigh(&neigh(&inc)), Ok(Some(inc)));
        assert!(!inc.usable());
        let failed = ev("192.0.2.11", None, NUD_FAILED, false);
        assert!(!failed.usable());
        // FAILED with a left-over address: still not usable.
        assert!(!ev("192.0.2.11", Some(MAC), NUD_FAILED, false).usable());
        let del = ev("2001:db8::11", Some(MAC), NUD_STALE, true);
        let got = decode_neigh(&neigh(&del)).unwrap().unwrap();
        assert!(got.deleted);
        assert!(!got.usable());
        // Each usable state on its own.
        for s in [
            NUD_REACHABLE,
            NUD_STALE,
            NUD_DELAY,
            NUD_PROBE,
            NUD_PERMANENT,
            NUD_NOARP,
        ] {
            assert!(ev("192.0.2.12", Some(MAC), s, false).usable(), "{s:#x}");
        }
        assert!(!ev("192.0.2.12", Some(MAC), NUD_NONE, false).usable());
    }

    #[test]
    fn flags_and_the_managed_flag_are_decoded() {
        let mut e = ev("192.0.2.10", Some(MAC), NUD_REACHABLE, false);
        e.flags = u32::from(NTF_EXT_LEARNED) | NTF_MANAGED;
        assert_eq!(decode_neigh(&neigh(&e)), Ok(Some(e)));
        assert!(e.managed());
        // The kernel's own bytes: ndm_flags in the header, NDA_FLAGS_EXT.
        let m = Msg::new(RTM_NEWNEIGH, 0, &ndmsg(AF_INET, 3, NUD_STALE, 0x80))
            .attr(NDA_DST, &[192, 0, 2, 1])
            .attr(NDA_LLADDR, &MAC)
            .attr_u32(NDA_FLAGS_EXT, NTF_EXT_MANAGED)
            .finish();
        let got = decode_neigh(&m).unwrap().unwrap();
        assert_eq!(got.flags, 0x80 | NTF_MANAGED);
        assert!(got.managed() && got.usable());
        // No NDA_FLAGS_EXT, or one of the wrong length: not managed.
        assert!(
            !decode_neigh(&neigh(&ev("192.0.2.10", Some(MAC), NUD_STALE, false)))
                .unwrap()
                .unwrap()
                .managed()
        );
        let m = Msg::new(RTM_NEWNEIGH, 0, &ndmsg(AF_INET, 3, NUD_STALE, 0))
            .attr(NDA_DST, &[192, 0, 2, 1])
            .attr(NDA_FLAGS_EXT, &[1, 0])
            .finish();
        assert!(!decode_neigh(&m).unwrap().unwrap().managed());
    }

    #[test]
    fn other_types_families_and_proxies_are_ignored() {
        // RTM_NEWROUTE.
        let m = Msg::new(24, 0, &[0u8; 12]).finish();
        assert_eq!(decode_neigh(&m), Ok(None));
        // AF_BRIDGE (7): an FDB entry on the same multicast group.
        let m = Msg::new(RTM_NEWNEIGH, 0, &ndmsg(7, 3, NUD_REACHABLE, 0))
            .attr(NDA_LLADDR, &MAC)
            .finish();
        assert_eq!(decode_neigh(&m), Ok(None));
        let m = Msg::new(RTM_NEWNEIGH, 0, &ndmsg(AF_INET, 3, NUD_NONE, NTF_PROXY))
            .attr(NDA_DST, &[192, 0, 2, 1])
            .finish();
        assert_eq!(decode_neigh(&m), Ok(None));
    }

    #[test]
    fn odd_lladdr_lengths_mean_no_mac() {
        for len in [0usize, 4, 8, 16, 20] {
            let m = Msg::new(RTM_NEWNEIGH, 0, &ndmsg(AF_INET, 3, NUD_REACHABLE, 0))
                .attr(NDA_DST, &[192, 0, 2, 1])
                .attr(NDA_LLADDR, &vec![0xaa; len])
                .finish();
            let e = decode_neigh(&m).unwrap().unwrap();
            assert_eq!(e.mac, None);
            assert!(!e.usable());
        }
    }

    #[test]
    fn malformed_messages_are_errors() {
        let good = neigh(&ev("192.0.2.10", Some(MAC), NUD_REACHABLE, false));
        assert!(matches!(
            decode_neigh(&good[..10]),
            Err(DecodeError::BadMessageLength { .. })
        ));
        let mut big = good.clone();
        big[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        assert!(matches!(
            decode_neigh(&big),
            Err(DecodeError::BadMessageLength { len: 1000, .. })
        ));
        let m = Msg::new(RTM_NEWNEIGH, 0, &[AF_INET, 0, 0, 0]).finish();
        assert_eq!(
            decode_neigh(&m),
            Err(DecodeError::ShortBody {
                msg_type: RTM_NEWNEIGH
            })
        );
        // IPv6 family with a 4-byte destination.
        let m = Msg::new(RTM_NEWNEIGH, 0, &ndmsg(AF_INET6, 3, NUD_REACHABLE, 0))
            .attr(NDA_DST, &[192, 0, 2, 1])
            .finish();
        assert_eq!(
            decode_neigh(&m),
            Err(DecodeError::BadAttributeLength {
                attr_type: NDA_DST,
                len: 4
            })
        );
        // No destination at all.
        let m = Msg::new(RTM_NEWNEIGH, 0, &ndmsg(AF_INET, 3, NUD_REACHABLE, 0))
            .attr(NDA_LLADDR, &MAC)
            .finish();
        assert_eq!(
            decode_neigh(&m),
            Err(DecodeError::BadAttributeLength {
                attr_type: NDA_DST,
                len: 0
            })
        );
        // Attribute length below 4.
        let mut m = Msg::new(RTM_NEWNEIGH, 0, &ndmsg(AF_INET, 3, NUD_REACHABLE, 0)).finish();
        m.extend_from_slice(&[2, 0, 1, 0]);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(
            decode_neigh(&m),
            Err(DecodeError::BadAttribute { attr_type: 1 })
        );
    }

    #[test]
    fn trailing_bytes_after_nlmsg_len_are_ignored() {
        let e = ev("192.0.2.10", Some(MAC), NUD_REACHABLE, false);
        let mut m = neigh(&e);
        m.extend_from_slice(&[0xff; 7]);
        assert_eq!(decode_neigh(&m), Ok(Some(e)));
    }

    #[test]
    fn decode_all_walks_a_datagram() {
        let a = ev("192.0.2.10", Some(MAC), NUD_REACHABLE, false);
        let b = ev("2001:db8::10", None, NUD_INCOMPLETE, false);
        let c = ev("192.0.2.10", Some(MAC), NUD_STALE, true);
        let mut buf = neigh(&a);
        buf.extend(Msg::new(24, 0, &[0u8; 12]).finish()); // skipped
        buf.extend(neigh(&b));
        // A bad message in the middle: an error, the walk goes on.
        buf.extend(
            Msg::new(RTM_NEWNEIGH, 0, &ndmsg(AF_INET, 3, 2, 0))
                .attr(NDA_DST, &[1, 2])
                .finish(),
        );
        buf.extend(neigh(&c));
        buf.extend(Msg::new(nl::NLMSG_DONE, 0x2 /* NLM_F_MULTI */, &[0; 4]).finish());
        let got = decode_all(&buf);
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], Ok(a));
        assert_eq!(got[1], Ok(b));
        assert!(got[2].is_err());
        assert_eq!(got[3], Ok(c));
        // A broken length ends the walk with one error.
        let mut bad = buf.clone();
        let first = u32::from_ne_bytes([bad[0], bad[1], bad[2], bad[3]]) as usize;
        bad[first..first + 4].copy_from_slice(&3u32.to_ne_bytes());
        let got = decode_all(&bad);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], Ok(a));
        assert!(got[1].is_err());
        assert!(decode_all(&[]).is_empty());
    }

    fn corpus() -> Vec<Vec<u8>> {
        let mut multi = neigh(&ev("192.0.2.10", Some(MAC), NUD_REACHABLE, false));
        multi.extend(neigh(&ev("2001:db8::10", Some(MAC), NUD_DELAY, true)));
        vec![
            neigh(&ev("192.0.2.10", Some(MAC), NUD_REACHABLE, false)),
            neigh(&ev("2001:db8::10", Some(MAC), NUD_STALE, false)),
            neigh(&ev("192.0.2.11", None, NUD_INCOMPLETE, false)),
            neigh(&ev("fe80::2", Some(MAC), NUD_PROBE, true)),
            multi,
        ]
    }

    /// Every decoded event must be internally consistent.
    fn check(r: &Result<Option<NeighborEvent>, DecodeError>) {
        if let Ok(Some(e)) = r {
            assert!(!e.usable() || e.mac.is_some());
        }
    }

    #[test]
    fn every_truncation_and_single_byte_mutation_is_safe() {
        for m in corpus() {
            for n in 0..=m.len() {
                let mut t = m[..n].to_vec();
                check(&decode_neigh(&t));
                let _ = decode_all(&t);
                // Also with nlmsg_len fixed to the cut, so the attribute
                // walk itself meets the truncation.
                if n >= 4 {
                    t[0..4].copy_from_slice(&(n as u32).to_ne_bytes());
                    check(&decode_neigh(&t));
                    let _ = decode_all(&t);
                }
            }
            for i in 0..m.len() {
                for v in [0u8, 1, 3, 4, 5, 0x7f, 0x80, 0xfe, 0xff] {
                    let mut t = m.clone();
                    t[i] = v;
                    check(&decode_neigh(&t));
                    let _ = decode_all(&t);
                }
                for bit in 0..8 {
                    let mut t = m.clone();
                    t[i] ^= 1 << bit;
                    check(&decode_neigh(&t));
                    let _ = decode_all(&t);
                }
            }
        }
    }

    #[test]
    fn random_garbage_never_panics() {
        // xorshift64*: deterministic, no dependency.
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            s.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let (mut ok, mut err) = (0u32, 0u32);
        for _ in 0..20_000 {
            let n = (next() % 120) as usize;
            let mut m: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            // Often a plausible header and family so the body parser runs.
            if n >= 16 + NDMSG_LEN && next() % 2 == 0 {
                m[0..4].copy_from_slice(&(n as u32).to_ne_bytes());
                let t = [RTM_NEWNEIGH, RTM_DELNEIGH][(next() % 2) as usize];
                m[4..6].copy_from_slice(&t.to_ne_bytes());
                m[16] = [AF_INET, AF_INET6][(next() % 2) as usize];
            }
            let r = decode_neigh(&m);
            check(&r);
            match r {
                Ok(_) => ok += 1,
                Err(_) => err += 1,
            }
            let _ = decode_all(&m);
        }
        assert!(ok > 100 && err > 100, "ok {ok} err {err}");
    }
}
