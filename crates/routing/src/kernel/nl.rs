//! Netlink plumbing shared by [`super::neigh::NeighborMonitor`] and
//! [`super::rtnl::Rtnl`]: a `NETLINK_ROUTE` socket and a walk over the
//! messages of one received datagram.
//!
//! The socket is non-blocking; waiting is done with `poll(2)` so every
//! caller can bound how long it waits.

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::frr::netlink::{align4, DecodeError, NLMSG_HDRLEN};

pub use crate::frr::netlink::{NLMSG_DONE, NLMSG_ERROR, NLM_F_REPLACE, NLM_F_REQUEST};

// nlmsg_flags (linux/netlink.h) not already defined by the FPM decoder.
pub const NLM_F_ACK: u16 = 0x4;
/// A dump was interrupted by a change: its content may be inconsistent.
pub const NLM_F_DUMP_INTR: u16 = 0x10;
pub const NLM_F_DUMP: u16 = 0x300;
pub const NLM_F_EXCL: u16 = 0x200;
pub const NLM_F_CREATE: u16 = 0x400;

/// Large enough for any datagram the kernel sends: dump replies are at
/// most 32 KiB, notifications a few hundred bytes.
pub const RECV_BUF_LEN: usize = 64 * 1024;

#[inline]
pub fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off.checked_add(4)?)
        .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

#[inline]
pub fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    b.get(off..off.checked_add(2)?)
        .map(|s| u16::from_ne_bytes([s[0], s[1]]))
}

/// One netlink message inside a datagram.
#[derive(Clone, Copy, Debug)]
pub struct NlMsg<'a> {
    pub msg_type: u16,
    pub flags: u16,
    pub seq: u32,
    /// The whole message, header included (`nlmsg_len` bytes).
    pub bytes: &'a [u8],
}

impl<'a> NlMsg<'a> {
    /// The payload after `struct nlmsghdr`.
    pub fn body(&self) -> &'a [u8] {
        self.bytes.get(NLMSG_HDRLEN..).unwrap_or(&[])
    }

    /// For `NLMSG_ERROR`: the error code (0 for an ack, `-errno` otherwise).
    pub fn error_code(&self) -> Option<i32> {
        u32_at(self.body(), 0).map(|v| v as i32)
    }
}

/// Iterator over back-to-back netlink messages: yields each message, or one
/// framing error and then stops (after a bad `nlmsg_len` nothing later in
/// the buffer can be located).
pub struct NlMsgs<'a> {
    buf: &'a [u8],
    off: usize,
    done: bool,
}

impl<'a> NlMsgs<'a> {
    pub fn new(buf: &'a [u8]) -> NlMsgs<'a> {
        NlMsgs {
            buf,
            off: 0,
            done: false,
        }
    }
}

impl<'a> Iterator for NlMsgs<'a> {
    type Item = Result<NlMsg<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = self.buf.get(self.off..).unwrap_or(&[]);
        if rest.is_empty() {
            return None;
        }
        let len = u32_at(rest, 0).unwrap_or(0) as usize;
        if rest.len() < NLMSG_HDRLEN || len < NLMSG_HDRLEN || len > rest.len() {
            self.done = true;
            return Some(Err(DecodeError::BadMessageLength {
                offset: self.off,
                len: if rest.len() < NLMSG_HDRLEN {
                    rest.len()
                } else {
                    len
                },
            }));
        }
        let bytes = &rest[..len];
        self.off += align4(len).min(rest.len());
        Some(Ok(NlMsg {
            msg_type: u16_at(bytes, 4).unwrap_or(0),
            flags: u16_at(bytes, 6).unwrap_or(0),
            seq: u32_at(bytes, 8).unwrap_or(0),
            bytes,
        }))
    }
}

/// Writes `nlmsg_seq` into a message built with `frr::netlink::build::Msg`
/// (which leaves it zero).
pub fn set_seq(msg: &mut [u8], seq: u32) {
    if let Some(s) = msg.get_mut(8..12) {
        s.copy_from_slice(&seq.to_ne_bytes());
    }
}

/// What one `recv` produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Recv {
    /// Nothing queued.
    Empty,
    /// A datagram of this many bytes from the kernel is in the buffer.
    Data(usize),
    /// A datagram did not fit in the buffer; its content is lost.
    Truncated,
}

/// A bound, non-blocking `NETLINK_ROUTE` socket. It belongs to the network
/// namespace of the thread that opened it, whichever thread uses it later.
#[derive(Debug)]
pub struct NlSocket {
    fd: OwnedFd,
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn kernel_addr() -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain data; all-zero is a valid value
    // (nl_pid 0 = the kernel, no groups).
    let mut sa: libc::sockaddr_nl = unsafe { mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    sa
}

impl NlSocket {
    /// Opens and binds a socket (the kernel picks the port id).
    pub fn open() -> io::Result<NlSocket> {
        // SAFETY: plain socket(2) call; the result is checked.
        let fd = cvt(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_ROUTE,
            )
        })?;
        // SAFETY: fd is a freshly opened descriptor owned by nobody else.
        let sock = NlSocket {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        };
        let sa = kernel_addr();
        // SAFETY: sa is a valid sockaddr_nl of the size passed.
        cvt(unsafe {
            libc::bind(
                sock.fd.as_raw_fd(),
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        })?;
        Ok(sock)
    }

    /// `setsockopt` with an `int` value.
    pub fn set_opt(
        &self,
        level: libc::c_int,
        name: libc::c_int,
        val: libc::c_int,
    ) -> io::Result<()> {
        // SAFETY: val lives across the call and its size is passed.
        cvt(unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                &val as *const libc::c_int as *const libc::c_void,
                mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        })
        .map(|_| ())
    }

    /// `getsockopt` of an `int` value.
    pub fn get_opt(&self, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
        let mut val: libc::c_int = 0;
        let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: val and len are valid for writes of the sizes given.
        cvt(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                &mut val as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        })?;
        Ok(val)
    }

    /// Subscribes to a multicast group (`RTNLGRP_*`).
    pub fn join_group(&self, group: u32) -> io::Result<()> {
        self.set_opt(
            libc::SOL_NETLINK,
            libc::NETLINK_ADD_MEMBERSHIP,
            group as libc::c_int,
        )
    }

    /// Sets the receive buffer. `SO_RCVBUFFORCE` (needs `CAP_NET_ADMIN`)
    /// ignores `net.core.rmem_max`, which is far below what a burst of
    /// neighbour changes needs; without the capability fall back to the
    /// capped `SO_RCVBUF`.
    pub fn set_rcvbuf(&self, bytes: usize) -> io::Result<()> {
        let v = bytes.min(i32::MAX as usize / 2) as libc::c_int;
        self.set_opt(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v)
            .or_else(|_| self.set_opt(libc::SOL_SOCKET, libc::SO_RCVBUF, v))
    }

    /// Sends one request to the kernel.
    pub fn send(&self, msg: &[u8]) -> io::Result<()> {
        let sa = kernel_addr();
        loop {
            // SAFETY: msg and sa are valid for the lengths passed.
            let n = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    msg.as_ptr() as *const libc::c_void,
                    msg.len(),
                    0,
                    &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                    mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n as usize != msg.len() {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "short netlink send",
                ));
            }
            return Ok(());
        }
    }

    /// Waits until a datagram (or a pending socket error) is queued, for at
    /// most `timeout`. Returns false on timeout.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Round up so a sub-millisecond wait is not a busy spin.
            let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            return Ok(rc > 0);
        }
    }

    /// Reads one datagram without blocking. Datagrams not sent by the
    /// kernel (port id 0) are dropped: only the kernel speaks for itself.
    /// A pending `ENOBUFS` (messages were dropped) comes back as an error.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Recv> {
        loop {
            let mut sa = kernel_addr();
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            };
            // SAFETY: msghdr is plain data; zero is valid before filling it.
            let mut mh: libc::msghdr = unsafe { mem::zeroed() };
            mh.msg_name = &mut sa as *mut libc::sockaddr_nl as *mut libc::c_void;
            mh.msg_namelen = mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            mh.msg_iov = &mut iov;
            mh.msg_iovlen = 1;
            // SAFETY: mh points at sa and iov, which point at live buffers
            // of the lengths given.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut mh, libc::MSG_DONTWAIT) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => return Ok(Recv::Empty),
                    _ => return Err(e),
                }
            }
            if mh.msg_flags & libc::MSG_TRUNC != 0 {
                return Ok(Recv::Truncated);
            }
            if sa.nl_pid != 0 {
                continue;
            }
            return Ok(Recv::Data(n as usize));
        }
    }
}

impl AsRawFd for NlSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for NlSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frr::netlink::build::Msg;

    const NLM_F_MULTI: u16 = 0x2;

    #[test]
    fn walks_messages_and_stops_at_bad_length() {
        let mut buf = Msg::new(NLMSG_DONE, NLM_F_MULTI, &[0; 4]).finish();
        set_seq(&mut buf, 7);
        buf.extend(Msg::new(NLMSG_ERROR, 0, &(-17i32).to_ne_bytes()).finish());
        let msgs: Vec<_> = NlMsgs::new(&buf).collect();
        assert_eq!(msgs.len(), 2);
        let a = msgs[0].as_ref().unwrap();
        assert_eq!((a.msg_type, a.flags, a.seq), (NLMSG_DONE, NLM_F_MULTI, 7));
        assert_eq!(msgs[1].as_ref().unwrap().error_code(), Some(-17));

        // A trailing fragment shorter than a header is an error, once.
        buf.extend_from_slice(&[1, 2, 3]);
        let msgs: Vec<_> = NlMsgs::new(&buf).collect();
        assert_eq!(msgs.len(), 3);
        assert!(msgs[2].is_err());
        // nlmsg_len past the end.
        let mut bad = buf.clone();
        bad[0..4].copy_from_slice(&9999u32.to_ne_bytes());
        let msgs: Vec<_> = NlMsgs::new(&bad).collect();
        assert_eq!(msgs.len(), 1);
        assert!(msgs[0].is_err());
        for n in 0..buf.len() {
            let _ = NlMsgs::new(&buf[..n]).count();
        }
    }
}
