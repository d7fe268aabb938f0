//! TAP port: the control-plane path. Lanyard creates one TAP interface per
//! routed interface so the kernel stack (and FRR on top of it) sees that
//! interface with its addresses; frames punted by the pipeline are written to
//! the TAP (the kernel receives them) and frames the kernel sends out of the
//! TAP are read back and injected on the real port.
//!
//! This is a slow path: receive costs one `readv(2)` per frame and `flush`
//! one `write(2)` per queued frame (a tun descriptor has no multi-frame read
//! or write). See `docs/io.md`.

use crate::link;
use crate::{FrameBatch, Port, PortError, PortStats, MAX_FRAME_LEN};
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// `<linux/if_tun.h>`, declared here so the crate does not depend on which of
// these the `libc` version exports.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETPERSIST: libc::c_ulong = 0x4004_54cb;
const TUNGETIFF: libc::c_ulong = 0x8004_54d2;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_TUN_EXCL: libc::c_short = 0x8000_u16 as libc::c_short;

const TUN_PATH: &CStr = c"/dev/net/tun";

/// Largest MTU [`TapOptions::mtu`] accepts: a frame of that MTU plus an
/// Ethernet header and one 802.1Q tag still fits in [`MAX_FRAME_LEN`].
pub const TAP_MAX_MTU: u32 = (MAX_FRAME_LEN - 14 - 4) as u32;

/// Options for [`TapPort::create`]. `Default`: kernel-chosen MAC and MTU,
/// brought up, not persistent, 64 transmit slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapOptions {
    /// MAC address to give the interface (`SIOCSIFHWADDR`); `None` keeps the
    /// random one the kernel picks. For the control-plane path this should be
    /// the routed port's own MAC, so the kernel's frames carry it.
    pub mac: Option<[u8; 6]>,
    /// MTU to set (`SIOCSIFMTU`), at most [`TAP_MAX_MTU`]; `None` keeps the
    /// kernel's default (1500).
    pub mtu: Option<u32>,
    /// Bring the interface up (`IFF_UP`).
    pub up: bool,
    /// Keep the interface after the port is dropped (`TUNSETPERSIST`); it can
    /// then be reopened with [`TapPort::attach`] and must be deleted with
    /// `ip link del`. Off by default: the interface disappears with the port.
    pub persist: bool,
    /// Transmit queue slots of [`MAX_FRAME_LEN`] bytes each, allocated once.
    pub tx_slots: usize,
    /// Frames the kernel may queue for us to read (`txqueuelen`, set with
    /// `SIOCSIFTXQLEN`); `None` keeps tun's default of 500. What the
    /// kernel sends through the interface beyond it is dropped.
    pub tx_queue_len: Option<u32>,
}

impl Default for TapOptions {
    fn default() -> Self {
        TapOptions {
            mac: None,
            mtu: None,
            up: true,
            persist: false,
            tx_slots: 64,
            tx_queue_len: None,
        }
    }
}

/// A port on a TAP interface (`/dev/net/tun`, `IFF_TAP | IFF_NO_PI`, no
/// `IFF_VNET_HDR`), non-blocking. See the crate docs for the [`Port`] contract
/// and `docs/io.md` for where this backend deviates (one system call per frame).
pub struct TapPort {
    name: String,
    ifindex: u32,
    fd: OwnedFd,
    /// Transmit queue: `tx_cap` buffers of `MAX_FRAME_LEN` bytes back to back.
    tx_buf: Box<[u8]>,
    tx_len: Box<[usize]>,
    tx_cap: usize,
    /// First queued slot and number of queued slots.
    tx_first: usize,
    tx_queued: usize,
    tx_lent: bool,
    /// Receives the bytes of a frame longer than a batch slot, so that such a
    /// frame is detected (and dropped) instead of silently truncated.
    rx_spill: [u8; 1],
    stats: PortStats,
}

fn os(op: &'static str) -> impl FnOnce(io::Error) -> PortError {
    move |err| PortError::Os { op, err }
}

fn invalid(msg: &'static str) -> PortError {
    PortError::Os {
        op: "TapOptions",
        err: io::Error::new(io::ErrorKind::InvalidInput, msg),
    }
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: `ifreq` is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    req
}

fn name_of(req: &libc::ifreq) -> String {
    let bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `ioctl` taking a `struct ifreq`.
fn ioctl_ifreq(fd: RawFd, request: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: every request used here reads/writes a `struct ifreq`, and `req`
    // is a valid, exclusively borrowed one for the duration of the call.
    let r = unsafe { libc::ioctl(fd, request as _, req as *mut libc::ifreq) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn ctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open `/dev/net/tun` non-blocking, mapping the usual failures to errors
/// that say what is missing.
fn open_tun() -> Result<OwnedFd, PortError> {
    // SAFETY: `TUN_PATH` is a NUL-terminated string; the result is checked.
    let raw = unsafe {
        libc::open(
            TUN_PATH.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        let err = io::Error::last_os_error();
        let op = match err.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => {
                "open /dev/net/tun (no TUN/TAP support: device node missing or tun module not loaded)"
            }
            Some(libc::EACCES) | Some(libc::EPERM) => {
                "open /dev/net/tun (permission denied: needs root or CAP_NET_ADMIN)"
            }
            _ => "open /dev/net/tun",
        };
        return Err(PortError::Os { op, err });
    }
    // SAFETY: `raw` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn tunsetiff_err(err: io::Error) -> PortError {
    let op = match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => "TUNSETIFF (needs CAP_NET_ADMIN)",
        Some(libc::EBUSY) => "TUNSETIFF (interface exists or is in use)",
        Some(libc::EINVAL) => "TUNSETIFF (name taken by an interface that is not a TAP)",
        _ => "TUNSETIFF",
    };
    PortError::Os { op, err }
}

impl TapPort {
    /// Create TAP interface `name` (in the network namespace of the calling
    /// thread) and open a port on it. Fails if an interface of that name
    /// exists. `name` may be a kernel template such as `"lytap%d"`;
    /// [`Port::name`] then gives the name the kernel chose.
    pub fn create(name: &str, opts: &TapOptions) -> Result<TapPort, PortError> {
        if opts.tx_slots == 0 {
            return Err(invalid("tx_slots must be > 0"));
        }
        if opts.mtu.is_some_and(|m| m > TAP_MAX_MTU) {
            return Err(invalid("mtu larger than TAP_MAX_MTU"));
        }
        if opts.mac.is_some_and(|m| m[0] & 1 != 0 || m == [0; 6]) {
            return Err(invalid("mac must be a non-zero unicast address"));
        }
        if !link::valid_name(name) {
            return Err(PortError::Os {
                op: "TapPort::create",
                err: io::Error::new(io::ErrorKind::InvalidInput, "invalid interface name"),
            });
        }
        let mut port = Self::open(name, IFF_TUN_EXCL, opts.tx_slots)?;
        // Until `persist` is set below, any failure drops the descriptor and
        // with it the interface.
        let sock = ctl_socket().map_err(os("socket"))?;
        if let Some(mac) = opts.mac {
            let mut req = ifreq(&port.name);
            // SAFETY: writing the `ifru_hwaddr` member of a zeroed ifreq.
            unsafe {
                req.ifr_ifru.ifru_hwaddr.sa_family = libc::ARPHRD_ETHER;
                for (d, s) in req.ifr_ifru.ifru_hwaddr.sa_data.iter_mut().zip(mac) {
                    *d = s as libc::c_char;
                }
            }
            ioctl_ifreq(sock.as_raw_fd(), libc::SIOCSIFHWADDR, &mut req)
                .map_err(|e| link::map_err(&port.name, "SIOCSIFHWADDR", e))?;
        }
        if let Some(mtu) = opts.mtu {
            link::set_mtu(&port.name, mtu)?;
        }
        if let Some(qlen) = opts.tx_queue_len {
            let mut req = ifreq(&port.name);
            req.ifr_ifru.ifru_metric = qlen.min(i32::MAX as u32) as libc::c_int;
            ioctl_ifreq(sock.as_raw_fd(), libc::SIOCSIFTXQLEN, &mut req)
                .map_err(|e| link::map_err(&port.name, "SIOCSIFTXQLEN", e))?;
        }
        if opts.up {
            link::set_up(&port.name)?;
        }
        if opts.persist {
            // SAFETY: TUNSETPERSIST takes an integer argument by value.
            let r =
                unsafe { libc::ioctl(port.fd.as_raw_fd(), TUNSETPERSIST as _, 1 as libc::c_ulong) };
            if r < 0 {
                return Err(PortError::Os {
                    op: "TUNSETPERSIST",
                    err: io::Error::last_os_error(),
                });
            }
        }
        port.ifindex = link::query(&port.name).map_or(0, |l| l.ifindex);
        Ok(port)
    }

    /// Open a port on an existing persistent TAP interface (one created with
    /// [`TapOptions::persist`] or `ip tuntap add mode tap`). Its MAC, MTU and
    /// state are left as they are; dropping the port leaves it in place.
    pub fn attach(name: &str) -> Result<TapPort, PortError> {
        if !link::valid_name(name) || link::query(name).is_none() {
            return Err(PortError::NoSuchInterface(name.to_string()));
        }
        let mut port = Self::open(name, 0, TapOptions::default().tx_slots)?;
        port.ifindex = link::query(&port.name).map_or(0, |l| l.ifindex);
        Ok(port)
    }

    /// Keep this port's descriptor open across `exec` (restart in place)
    /// and return its number for [`TapPort::adopt`] in the new image: the
    /// interface, its addresses and its carrier then stay as they are, so
    /// the routing daemons on it see no change. After this the port must
    /// not be used.
    pub fn keep_across_exec(&self) -> Result<RawFd, PortError> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: F_GETFD/F_SETFD on a descriptor we own.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
            return Err(PortError::Os {
                op: "fcntl(F_SETFD)",
                err: io::Error::last_os_error(),
            });
        }
        Ok(fd)
    }

    /// Take over descriptor `fd`, inherited across `exec` from a
    /// predecessor's [`keep_across_exec`](Self::keep_across_exec): it must
    /// be a TAP (`TUNGETIFF`, no packet information) named `name`, else it
    /// is closed and an error says what it was. The descriptor is made
    /// close-on-exec and non-blocking again. The interface's settings are
    /// left as they are; [`Port::name`] and [`TapPort::ifindex`] are read
    /// in the calling thread's namespace (0 if the TAP lives in another).
    ///
    /// # Safety
    /// `fd` must be an open descriptor this process owns and nothing else
    /// uses or closes.
    pub unsafe fn adopt(fd: RawFd, name: &str, tx_slots: usize) -> Result<TapPort, PortError> {
        if tx_slots == 0 {
            return Err(invalid("tx_slots must be > 0"));
        }
        // SAFETY: the caller hands over ownership of an open descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut req = ifreq("");
        ioctl_ifreq(fd.as_raw_fd(), TUNGETIFF, &mut req).map_err(os("TUNGETIFF"))?;
        // SAFETY: TUNGETIFF filled the flags member.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        let got = name_of(&req);
        if flags & (IFF_TAP | IFF_NO_PI) != IFF_TAP | IFF_NO_PI || got != name {
            return Err(invalid("handed-over descriptor is not the expected TAP"));
        }
        // SAFETY: plain fcntl calls on a descriptor we now own.
        unsafe {
            let fdf = libc::fcntl(fd.as_raw_fd(), libc::F_GETFD);
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, fdf | libc::FD_CLOEXEC);
            let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        let mut port = Self::with_fd(fd, got, tx_slots);
        port.ifindex = link::query(&port.name).map_or(0, |l| l.ifindex);
        Ok(port)
    }

    fn open(name: &str, extra_flags: libc::c_short, tx_slots: usize) -> Result<TapPort, PortError> {
        let fd = open_tun()?;
        let mut req = ifreq(name);
        req.ifr_ifru.ifru_flags = IFF_TAP | IFF_NO_PI | extra_flags;
        ioctl_ifreq(fd.as_raw_fd(), TUNSETIFF, &mut req).map_err(tunsetiff_err)?;
        Ok(Self::with_fd(fd, name_of(&req), tx_slots))
    }

    fn with_fd(fd: OwnedFd, name: String, tx_slots: usize) -> TapPort {
        TapPort {
            name,
            ifindex: 0,
            fd,
            tx_buf: vec![0u8; tx_slots * MAX_FRAME_LEN].into_boxed_slice(),
            tx_len: vec![0usize; tx_slots].into_boxed_slice(),
            tx_cap: tx_slots,
            tx_first: 0,
            tx_queued: 0,
            tx_lent: false,
            rx_spill: [0],
            stats: PortStats::default(),
        }
    }

    /// Interface index of the TAP (0 if it could not be read at open).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface's current MAC address (`SIOCGIFHWADDR`).
    pub fn mac(&self) -> Result<[u8; 6], PortError> {
        let sock = ctl_socket().map_err(os("socket"))?;
        let mut req = ifreq(&self.name);
        ioctl_ifreq(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req)
            .map_err(|e| link::map_err(&self.name, "SIOCGIFHWADDR", e))?;
        let mut mac = [0u8; 6];
        // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member.
        let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
        for (d, s) in mac.iter_mut().zip(data) {
            *d = s as u8;
        }
        Ok(mac)
    }

    /// Frames committed and not yet flushed.
    pub fn tx_queued(&self) -> usize {
        self.tx_queued
    }

    #[inline]
    fn tx_slot_range(&self, i: usize) -> std::ops::Range<usize> {
        i * MAX_FRAME_LEN..(i + 1) * MAX_FRAME_LEN
    }

    /// Drop every queued frame, counting each in `tx_errors`.
    fn discard_tx(&mut self) {
        self.stats.tx_errors += self.tx_queued as u64;
        self.tx_first = 0;
        self.tx_queued = 0;
    }
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut FrameBatch, port_id: u16) -> Result<usize, PortError> {
        let mut n = 0;
        let fd = self.fd.as_raw_fd();
        let spill = self.rx_spill.as_mut_ptr();
        while let Some(slot) = batch.slot() {
            let cap = slot.len();
            let iov = [
                libc::iovec {
                    iov_base: slot.as_mut_ptr() as *mut libc::c_void,
                    iov_len: cap,
                },
                libc::iovec {
                    iov_base: spill as *mut libc::c_void,
                    iov_len: 1,
                },
            ];
            // SAFETY: both iovecs describe live, exclusively borrowed buffers
            // (the batch slot and `rx_spill`) of the given lengths; readv
            // writes at most that many bytes into them.
            let r = unsafe { libc::readv(fd, iov.as_ptr(), iov.len() as libc::c_int) };
            if r < 0 {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    Some(libc::EINTR) => continue,
                    // The interface is down (the kernel sends nothing then).
                    Some(libc::EIO) | Some(libc::ENETDOWN) => break,
                    _ => return Err(link::map_err(&self.name, "read(tap)", err)),
                }
            }
            let len = r as usize;
            if len == 0 {
                break;
            }
            // The tun driver truncates a frame to the buffer; one byte in the
            // spill buffer means it was longer than a batch slot.
            if len > cap {
                self.stats.rx_truncated += 1;
                continue;
            }
            batch.commit(len, port_id);
            n += 1;
        }
        Ok(n)
    }

    fn tx_slot(&mut self) -> Option<&mut [u8]> {
        self.tx_lent = false;
        if self.tx_queued >= self.tx_cap {
            self.stats.tx_ring_full += 1;
            return None;
        }
        self.tx_lent = true;
        let i = (self.tx_first + self.tx_queued) % self.tx_cap;
        let r = self.tx_slot_range(i);
        Some(&mut self.tx_buf[r])
    }

    fn tx_commit(&mut self, len: usize) {
        if !std::mem::take(&mut self.tx_lent) {
            debug_assert!(false, "tx_commit without a lent tx_slot");
            return;
        }
        if !(14..=MAX_FRAME_LEN).contains(&len) {
            // The kernel would refuse it (EINVAL): count and drop here.
            self.stats.tx_errors += 1;
            return;
        }
        let i = (self.tx_first + self.tx_queued) % self.tx_cap;
        self.tx_len[i] = len;
        self.tx_queued += 1;
    }

    /// Writes each queued frame with its own `write(2)` (a tun descriptor
    /// takes one frame per call). Frames the kernel refuses, including
    /// `EAGAIN`, are dropped and counted in `tx_errors`; the queue is always
    /// empty afterwards.
    fn flush(&mut self) -> Result<(), PortError> {
        self.tx_lent = false;
        while self.tx_queued > 0 {
            let i = self.tx_first;
            let len = self.tx_len[i];
            let start = i * MAX_FRAME_LEN;
            let frame = &self.tx_buf[start..start + len];
            // SAFETY: `frame` is a live buffer of `len` bytes.
            let r = unsafe {
                libc::write(
                    self.fd.as_raw_fd(),
                    frame.as_ptr() as *const libc::c_void,
                    len,
                )
            };
            if r < 0 {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // Kernel backlog full, frame malformed or refused: drop
                    // this frame, go on with the next.
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::ENOMEM)
                    | Some(libc::EINVAL) | Some(libc::EMSGSIZE) | Some(libc::EFAULT) => {
                        self.stats.tx_errors += 1
                    }
                    // The interface is down or gone: drop everything queued.
                    Some(libc::EIO) | Some(libc::ENETDOWN) => {
                        self.discard_tx();
                        return Err(PortError::Down(self.name.clone()));
                    }
                    _ => {
                        self.discard_tx();
                        return Err(link::map_err(&self.name, "write(tap)", err));
                    }
                }
            }
            self.tx_first = (self.tx_first + 1) % self.tx_cap;
            self.tx_queued -= 1;
        }
        self.tx_first = 0;
        Ok(())
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn rx_ready_per_frame(&self) -> bool {
        true
    }

    fn stats(&mut self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated_before_any_system_call() {
        let bad = [
            TapOptions {
                tx_slots: 0,
                ..TapOptions::default()
            },
            TapOptions {
                mtu: Some(TAP_MAX_MTU + 1),
                ..TapOptions::default()
            },
            TapOptions {
                mac: Some([1, 0, 0, 0, 0, 1]),
                ..TapOptions::default()
            },
        ];
        for o in &bad {
            match TapPort::create("lytap-bad", o) {
                Err(PortError::Os {
                    op: "TapOptions",
                    err,
                }) => {
                    assert_eq!(err.kind(), io::ErrorKind::InvalidInput)
                }
                Err(e) => panic!("{o:?}: wrong error {e}"),
                Ok(_) => panic!("{o:?}: created"),
            }
        }
        for name in ["", "a/b", "waytoolonginterfacename"] {
            assert!(matches!(
                TapPort::create(name, &TapOptions::default()),
                Err(PortError::Os { .. })
            ));
            assert!(matches!(
                TapPort::attach(name),
                Err(PortError::NoSuchInterface(_))
            ));
        }
        assert!(TAP_MAX_MTU as usize + 18 <= MAX_FRAME_LEN);
    }

    #[test]
    fn tun_constants_match_the_kernel_abi() {
        // _IOW('T', 202, int) and _IOW('T', 203, int).
        let iow = |nr: libc::c_ulong| (1 << 30) | (4 << 16) | ((b'T' as libc::c_ulong) << 8) | nr;
        assert_eq!(TUNSETIFF, iow(202));
        assert_eq!(TUNSETPERSIST, iow(203));
    }
}
