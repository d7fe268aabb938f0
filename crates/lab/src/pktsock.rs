//! The generator's own AF_PACKET sockets: batched `sendmmsg(2)` /
//! `recvmmsg(2)` with `PACKET_QDISC_BYPASS` and `PACKET_IGNORE_OUTGOING`.
//!
//! Kept small and behind this module so it can be switched to
//! `io::af_packet` once that backend measures at least as fast.
//! Sockets are bound to an interface of the namespace of the thread that
//! opens them (see [`crate::netns::in_netns`]); afterwards any thread may
//! use them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_AUXDATA: libc::c_int = 8;
/// `tpacket_auxdata.tp_status`: the frame had an 802.1Q/802.1ad tag that
/// the kernel took off into `tp_vlan_tci` (it does for every tagged frame
/// it receives, 802.1Q driver or not); and `tp_vlan_tpid` is set.
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// Room for one `cmsghdr` with a `tpacket_auxdata` (20 bytes), aligned.
const CMSG_ROOM: usize = 64;
/// Bytes kept free in front of each receive buffer for a tag put back.
const TAG_ROOM: usize = 4;

/// Largest frame a receive buffer holds.
pub const RX_BUF: usize = 9216 + 64;
/// Frames per `recvmmsg` / `sendmmsg` call at most.
pub const BATCH: usize = 64;

fn os(op: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{op}: {e}"))
}

fn setopt(fd: RawFd, level: libc::c_int, name: libc::c_int, val: libc::c_int) -> io::Result<()> {
    // SAFETY: `val` lives across the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &val as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(os("setsockopt"))
    } else {
        Ok(())
    }
}

/// Interface index of `ifname` in the calling thread's network namespace.
pub fn ifindex(ifname: &str) -> io::Result<i32> {
    let c = std::ffi::CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name"))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {ifname}"),
        ))
    } else {
        Ok(i as i32)
    }
}

/// A bound AF_PACKET socket (either for sending or for receiving).
pub struct PacketSocket {
    fd: OwnedFd,
    /// Interface name.
    pub name: String,
    /// Sends the kernel refused with ENOBUFS / EAGAIN (see
    /// [`PacketSocket::take_refused`]).
    refused: AtomicU64,
}

impl PacketSocket {
    /// Open a socket on `ifname`: `rx = true` receives every frame arriving
    /// on the interface (not our own transmissions); `rx = false` only sends.
    pub fn open(ifname: &str, rx: bool) -> io::Result<PacketSocket> {
        let idx = ifindex(ifname)?;
        let proto: u16 = if rx { libc::ETH_P_ALL as u16 } else { 0 };
        // SAFETY: plain socket(2) call; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                proto.to_be() as libc::c_int,
            )
        };
        if fd < 0 {
            return Err(os("socket(AF_PACKET)"));
        }
        // SAFETY: fd is a fresh descriptor we exclusively own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        if rx {
            let _ = setopt(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
            // The VLAN tag the kernel takes off every tagged frame comes
            // back in a control message: `RxBufs::recv` puts it back.
            setopt(raw, libc::SOL_PACKET, PACKET_AUXDATA, 1)?;
            if setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 64 << 20).is_err() {
                setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, 64 << 20)?;
            }
        } else {
            setopt(raw, libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1)?;
            if setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 16 << 20).is_err() {
                setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, 16 << 20)?;
            }
        }
        // SAFETY: sockaddr_ll is plain data; zero is a valid initial value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto.to_be();
        sll.sll_ifindex = idx;
        // SAFETY: sll is a valid sockaddr_ll and its size is passed.
        let r = unsafe {
            libc::bind(
                raw,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(os("bind(AF_PACKET)"));
        }
        let s = PacketSocket {
            fd,
            name: ifname.to_string(),
            refused: AtomicU64::new(0),
        };
        if rx {
            s.drain();
            s.take_drops();
        }
        Ok(s)
    }

    /// Times the kernel refused a send with ENOBUFS or EAGAIN since the
    /// last call (resets the count). With `PACKET_QDISC_BYPASS` that is
    /// the egress device saying "busy": the DUT behind it is pushing
    /// back (a veth whose peer's ring is full stops its queue), not the
    /// generator running out of CPU.
    pub fn take_refused(&self) -> u64 {
        self.refused.swap(0, Ordering::Relaxed)
    }

    /// Raw descriptor (for poll).
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Kernel receive-queue drops since the last call (resets the counter).
    pub fn take_drops(&self) -> u64 {
        let mut st = [0u32; 2];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: st is a tpacket_stats-sized buffer; len holds its size.
        let r = unsafe {
            libc::getsockopt(
                self.raw(),
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            0
        } else {
            st[1] as u64
        }
    }

    /// Discard everything queued on a receive socket.
    pub fn drain(&self) {
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: buf is valid for its length; MSG_DONTWAIT never blocks.
            let r = unsafe {
                libc::recv(
                    self.raw(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                )
            };
            if r < 0 {
                break;
            }
        }
    }

    /// Send `frames` (each a slice) with as few `sendmmsg` calls as needed.
    /// Returns how many frames the kernel accepted (stops at the first error
    /// other than EINTR / ENOBUFS / EAGAIN, which are retried a few times).
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let n = frames.len().min(BATCH);
        let mut iov: [libc::iovec; BATCH] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH];
        // SAFETY: mmsghdr is plain data; zeroed is valid (null pointers).
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            iov[i].iov_base = frames[i].as_ptr() as *mut libc::c_void;
            iov[i].iov_len = frames[i].len();
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        let mut done = 0usize;
        let mut retries = 0;
        while done < n {
            // SAFETY: msgs[done..n] point at iovecs over live frame slices.
            let r = unsafe {
                libc::sendmmsg(self.raw(), msgs[done..].as_mut_ptr(), (n - done) as u32, 0)
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) if retries < 100 => {
                        retries += 1;
                        self.refused.fetch_add(1, Ordering::Relaxed);
                        std::thread::yield_now();
                        continue;
                    }
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                        self.refused.fetch_add(1, Ordering::Relaxed);
                        return Ok(done);
                    }
                    _ => return Err(os("sendmmsg")),
                }
            }
            done += r as usize;
        }
        Ok(done)
    }
}

/// Receive buffers for `recvmmsg`, allocated once. Frames come back as
/// they were on the wire: a VLAN tag the kernel took off (into the
/// packet's metadata, `PACKET_AUXDATA`) is put back after the MAC
/// addresses, so a tagged test frame is seen with its tag.
pub struct RxBufs {
    bufs: Vec<u8>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    ctl: Vec<u8>,
    lens: [usize; BATCH],
    starts: [usize; BATCH],
}

// SAFETY: the raw pointers inside iov/msgs point only into `bufs`, owned by
// the same struct; nothing is shared between threads.
unsafe impl Send for RxBufs {}

impl Default for RxBufs {
    fn default() -> Self {
        Self::new()
    }
}

impl RxBufs {
    /// Allocate `BATCH` buffers of `RX_BUF` bytes.
    pub fn new() -> Self {
        let mut bufs = vec![0u8; BATCH * RX_BUF];
        let mut iov = Vec::with_capacity(BATCH);
        for i in 0..BATCH {
            iov.push(libc::iovec {
                // SAFETY: offset stays inside `bufs`.
                iov_base: unsafe { bufs.as_mut_ptr().add(i * RX_BUF + TAG_ROOM) }
                    as *mut libc::c_void,
                iov_len: RX_BUF - TAG_ROOM,
            });
        }
        // SAFETY: mmsghdr is plain data; zeroed is valid.
        let mut msgs: Vec<libc::mmsghdr> =
            (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        for i in 0..BATCH {
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        RxBufs {
            bufs,
            iov,
            msgs,
            ctl: vec![0u8; BATCH * CMSG_ROOM],
            lens: [0; BATCH],
            starts: [TAG_ROOM; BATCH],
        }
    }

    /// Receive up to `BATCH` frames without blocking. Returns the count.
    pub fn recv(&mut self, s: &PacketSocket) -> io::Result<usize> {
        for i in 0..BATCH {
            self.msgs[i].msg_hdr.msg_iov = &mut self.iov[i];
            self.msgs[i].msg_hdr.msg_iovlen = 1;
            self.msgs[i].msg_len = 0;
            // SAFETY: offset stays inside `ctl`.
            self.msgs[i].msg_hdr.msg_control =
                unsafe { self.ctl.as_mut_ptr().add(i * CMSG_ROOM) } as *mut libc::c_void;
            self.msgs[i].msg_hdr.msg_controllen = CMSG_ROOM as _;
        }
        // SAFETY: msgs point at iovecs over `bufs`, all owned by self.
        let r = unsafe {
            libc::recvmmsg(
                s.raw(),
                self.msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                // ENETDOWN: the port was taken down (a convergence test's
                // tester-side link-down); the socket works again once it is up.
                Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ENETDOWN) => Ok(0),
                _ => Err(os("recvmmsg")),
            };
        }
        let n = r as usize;
        for i in 0..n {
            let len = (self.msgs[i].msg_len as usize).min(RX_BUF - TAG_ROOM);
            self.lens[i] = len;
            self.starts[i] = TAG_ROOM;
            let Some((tpid, tci)) = vlan_of(&self.msgs[i].msg_hdr) else {
                continue;
            };
            if len < 12 {
                continue;
            }
            // Put the tag back: the MAC addresses move 4 bytes forward
            // into the room left for it.
            let b = &mut self.bufs[i * RX_BUF..i * RX_BUF + TAG_ROOM + len];
            b.copy_within(TAG_ROOM..TAG_ROOM + 12, 0);
            b[12..14].copy_from_slice(&tpid.to_be_bytes());
            b[14..16].copy_from_slice(&tci.to_be_bytes());
            self.starts[i] = 0;
            self.lens[i] = len + TAG_ROOM;
        }
        Ok(n)
    }

    /// Frame `i` of the last `recv` (with its VLAN tag, if it had one).
    #[inline]
    pub fn frame(&self, i: usize) -> &[u8] {
        let at = i * RX_BUF + self.starts[i];
        &self.bufs[at..at + self.lens[i]]
    }
}

/// The VLAN tag (TPID, TCI) the kernel took off a received frame, from
/// its `PACKET_AUXDATA` control message.
fn vlan_of(h: &libc::msghdr) -> Option<(u16, u16)> {
    // SAFETY: `h` was filled by recvmmsg with a control buffer we own;
    // CMSG_FIRSTHDR / CMSG_NXTHDR stay within msg_controllen.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(h) };
    while !c.is_null() {
        // SAFETY: `c` points at a complete cmsghdr inside the buffer.
        let ch = unsafe { &*c };
        if ch.cmsg_level == libc::SOL_PACKET
            && ch.cmsg_type == PACKET_AUXDATA
            && ch.cmsg_len as usize >= unsafe { libc::CMSG_LEN(20) } as usize
        {
            // tpacket_auxdata: tp_status u32, tp_len u32, tp_snaplen u32,
            // tp_mac u16, tp_net u16, tp_vlan_tci u16, tp_vlan_tpid u16.
            let mut a = [0u8; 20];
            // SAFETY: the data holds at least 20 bytes (checked above).
            unsafe { std::ptr::copy_nonoverlapping(libc::CMSG_DATA(c), a.as_mut_ptr(), 20) };
            let status = u32::from_ne_bytes([a[0], a[1], a[2], a[3]]);
            if status & TP_STATUS_VLAN_VALID == 0 {
                return None;
            }
            let tci = u16::from_ne_bytes([a[16], a[17]]);
            let tpid = match u16::from_ne_bytes([a[18], a[19]]) {
                t if status & TP_STATUS_VLAN_TPID_VALID != 0 && t != 0 => t,
                _ => 0x8100,
            };
            return Some((tpid, tci));
        }
        // SAFETY: as above.
        c = unsafe { libc::CMSG_NXTHDR(h, c) };
    }
    None
}

/// Wait until one of `fds` is readable or `timeout_ms` passes.
pub fn poll_any(fds: &[RawFd], timeout_ms: i32) {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: p is a valid array of pollfd of the given length.
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
}
