//! A raw `AF_PACKET` tester socket, independent of Lanyard's `io` crate.
//!
//! A [`RawPort`] is bound to one interface (usually a tester end `t<i>` of a
//! veth pair). It does not see its own transmissions
//! (`PACKET_IGNORE_OUTGOING`), and [`RawPort::recv_timeout`] returns frames
//! exactly as they were on the wire: the kernel moves the outer VLAN tag of
//! a received frame into metadata (`skb_vlan_untag`), so the tag is read
//! back from `PACKET_AUXDATA` and re-inserted after the source MAC.
//!
//! For large tests, [`RawPort::start_capture`] drains the socket on a
//! background thread into counters so the receive buffer never overflows.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::frame::{test_info, Mac, TestInfo};
use crate::netns::in_netns;

const ETH_P_ALL: u16 = 0x0003;
const SOL_PACKET: libc::c_int = 263;
// <linux/if_packet.h>
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
// <asm-generic/socket.h>
const SO_SNDBUFFORCE: libc::c_int = 32;
const SO_RCVBUFFORCE: libc::c_int = 33;

/// Receive buffer requested for every tester socket.
pub const RCVBUF: usize = 64 << 20;
/// Send buffer requested for every tester socket.
pub const SNDBUF: usize = 16 << 20;
/// Largest frame a [`RawPort`] receives (jumbo frames plus tags).
pub const MAX_FRAME: usize = 16 * 1024;
/// [`Capture::wait_for`] stops waiting after this long without progress.
pub const STALL: Duration = Duration::from_secs(2);
/// Frames per `sendmmsg`/`recvmmsg` call.
const BATCH: usize = 64;

/// `struct tpacket_auxdata` from `<linux/if_packet.h>`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct AuxData {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// Space for one control message carrying `AuxData` (u64 for alignment).
type CmsgBuf = [u64; 8];

/// A raw packet socket bound to one interface. See the module docs.
pub struct RawPort {
    fd: OwnedFd,
    ifname: String,
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` lives across the call and its size is passed correctly.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

impl RawPort {
    /// Opens a socket on `ifname` inside namespace `ns` (on a helper thread,
    /// see [`in_netns`]); the socket can then be used from any thread.
    pub fn open(ns: &str, ifname: &str) -> io::Result<RawPort> {
        let name = ifname.to_string();
        in_netns(ns, move || RawPort::open_here(&name))?
    }

    /// Opens a socket on `ifname` in the calling thread's namespace.
    pub fn open_here(ifname: &str) -> io::Result<RawPort> {
        let cname = CString::new(ifname).map_err(io::Error::other)?;
        // SAFETY: cname is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = cvt(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(ETH_P_ALL.to_be()),
            )
        })?;
        // SAFETY: `raw` is a freshly created descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt_int(raw, libc::SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF as libc::c_int)?;
        setsockopt_int(raw, libc::SOL_SOCKET, SO_SNDBUFFORCE, SNDBUF as libc::c_int)?;
        setsockopt_int(raw, SOL_PACKET, PACKET_AUXDATA, 1)?;
        setsockopt_int(raw, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
        // SAFETY: an all-zero sockaddr_ll is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: sll is a valid sockaddr_ll and its size is passed.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        let port = RawPort {
            fd,
            ifname: ifname.to_string(),
        };
        // Frames that arrived between socket() and bind() may belong to any
        // interface: throw them away.
        port.drain();
        Ok(port)
    }

    /// The interface this socket is bound to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// A second handle on the same socket (`dup(2)`).
    pub fn try_clone(&self) -> io::Result<RawPort> {
        Ok(RawPort {
            fd: self.fd.try_clone()?,
            ifname: self.ifname.clone(),
        })
    }

    /// Sends one frame as is.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        self.send_batch(&[frame])
    }

    /// Sends every frame of `frames`, in order, with `sendmmsg(2)` batches;
    /// retries while the kernel reports a full queue (`ENOBUFS`/`EAGAIN`).
    pub fn send_batch<B: AsRef<[u8]>>(&self, frames: &[B]) -> io::Result<()> {
        for chunk in frames.chunks(BATCH) {
            let mut iov: Vec<libc::iovec> = chunk
                .iter()
                .map(|f| libc::iovec {
                    iov_base: f.as_ref().as_ptr() as *mut libc::c_void,
                    iov_len: f.as_ref().len(),
                })
                .collect();
            // SAFETY: an all-zero mmsghdr is a valid value.
            let mut msgs: Vec<libc::mmsghdr> =
                (0..chunk.len()).map(|_| unsafe { zeroed() }).collect();
            for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
                m.msg_hdr.msg_iov = v;
                m.msg_hdr.msg_iovlen = 1;
            }
            let mut done = 0;
            let mut stalls = 0u32;
            while done < msgs.len() {
                // SAFETY: msgs[done..] are initialised mmsghdrs whose iovecs
                // point into `chunk`, which outlives the call.
                let rc = unsafe {
                    libc::sendmmsg(
                        self.fd.as_raw_fd(),
                        msgs.as_mut_ptr().add(done),
                        (msgs.len() - done) as libc::c_uint,
                        0,
                    )
                };
                if rc < 0 {
                    let e = io::Error::last_os_error();
                    match e.raw_os_error() {
                        Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                            stalls += 1;
                            if stalls > 200_000 {
                                return Err(e);
                            }
                            std::thread::sleep(Duration::from_micros(20));
                            continue;
                        }
                        _ => return Err(e),
                    }
                }
                done += rc as usize;
            }
        }
        Ok(())
    }

    /// Sends `count` frames produced by `gen(index, buffer)` at about `rate`
    /// frames per second (0 = as fast as possible). Pacing uses absolute
    /// deadlines per batch of 32, so short oversleeps do not accumulate.
    /// Returns the time it took.
    pub fn send_paced(
        &self,
        count: usize,
        rate: u64,
        mut gen: impl FnMut(usize, &mut Vec<u8>),
    ) -> io::Result<Duration> {
        const PACE_BATCH: usize = 32;
        let mut bufs: Vec<Vec<u8>> = (0..PACE_BATCH).map(|_| Vec::with_capacity(128)).collect();
        let start = Instant::now();
        let mut sent = 0usize;
        while sent < count {
            if rate > 0 {
                let due = start + Duration::from_secs_f64(sent as f64 / rate as f64);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            let n = PACE_BATCH.min(count - sent);
            for (k, b) in bufs.iter_mut().take(n).enumerate() {
                gen(sent + k, b);
            }
            self.send_batch(&bufs[..n])?;
            sent += n;
        }
        Ok(start.elapsed())
    }

    /// Waits up to `timeout` for one frame; returns it as it was on the wire
    /// (outer VLAN tag re-inserted), or `None` on timeout.
    pub fn recv_timeout(&self, timeout: Duration) -> io::Result<Option<Vec<u8>>> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; MAX_FRAME + 4];
        loop {
            if let Some((s, e)) = recv_one(self.fd.as_raw_fd(), &mut buf, libc::MSG_DONTWAIT)? {
                return Ok(Some(buf[s..e].to_vec()));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let ms = (deadline - now).as_millis().clamp(1, 1000) as libc::c_int;
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: pfd is a valid pollfd for the duration of the call.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(e);
                }
            }
        }
    }

    /// Collects every *test frame* (see [`crate::frame`]) arriving until
    /// none has arrived for `quiet`; other frames are ignored.
    pub fn recv_test_frames(&self, quiet: Duration) -> io::Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        while let Some(f) = self.recv_timeout(quiet)? {
            if test_info(&f).is_some() {
                out.push(f);
            }
        }
        Ok(out)
    }

    /// Collects every IPv4/IPv6 frame (parsed, checksums verified by
    /// [`crate::ip::parse`]) arriving until none has arrived for `quiet`,
    /// or for `max` in all; other frames are ignored.
    pub fn recv_ip(&self, quiet: Duration, max: Duration) -> io::Result<Vec<crate::ip::IpInfo>> {
        let start = Instant::now();
        let mut out = Vec::new();
        while start.elapsed() < max {
            match self.recv_timeout(quiet)? {
                Some(f) => out.extend(crate::ip::parse(&f)),
                None => break,
            }
        }
        Ok(out)
    }

    /// Discards every frame already queued on the socket; returns how many.
    pub fn drain(&self) -> usize {
        let mut buf = vec![0u8; MAX_FRAME + 4];
        let mut n = 0;
        while let Ok(Some(_)) = recv_one(self.fd.as_raw_fd(), &mut buf, libc::MSG_DONTWAIT) {
            n += 1;
        }
        n
    }

    /// Starts a background thread that drains this socket (through a
    /// duplicate descriptor) and counts every test frame for which
    /// `filter` returns true; see [`Capture`].
    pub fn start_capture(
        &self,
        keep: usize,
        filter: impl Fn(&TestInfo, &[u8]) -> bool + Send + 'static,
    ) -> io::Result<Capture> {
        let port = self.try_clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let matched = Arc::new(AtomicU64::new(0));
        let (stop2, matched2) = (stop.clone(), matched.clone());
        let handle = std::thread::Builder::new()
            .name(format!("capture-{}", self.ifname))
            .spawn(move || capture_loop(port, stop2, matched2, keep, Box::new(filter)))?;
        Ok(Capture {
            stop,
            matched,
            handle: Some(handle),
        })
    }
}

/// Reads one frame into `buf[4..]`; re-inserts the outer VLAN tag from the
/// auxiliary data into the 4 spare bytes; returns the frame's range in
/// `buf`, or `None` if nothing is queued (with `MSG_DONTWAIT`).
fn recv_one(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<Option<(usize, usize)>> {
    let mut iov = libc::iovec {
        iov_base: buf[4..].as_mut_ptr().cast(),
        iov_len: buf.len() - 4,
    };
    let mut cmsg: CmsgBuf = [0; 8];
    // SAFETY: an all-zero msghdr is a valid value.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<CmsgBuf>();
    // SAFETY: msg points to valid iovec/control buffers that outlive the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(reinsert_tag(buf, n as usize, &msg)))
}

/// Extracts `AuxData` from a received message's control data.
fn aux_of(msg: &libc::msghdr) -> Option<AuxData> {
    // SAFETY: msg was filled by recvmsg/recvmmsg; the CMSG_* macros walk its
    // control buffer within msg_controllen, and the payload is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == SOL_PACKET
                && (*c).cmsg_type == PACKET_AUXDATA
                && (*c).cmsg_len as usize >= libc::CMSG_LEN(size_of::<AuxData>() as u32) as usize
            {
                return Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(c).cast::<AuxData>(),
                ));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// `buf[4..4+n]` holds a received frame; if the kernel stripped its outer
/// tag, rebuild it in front. Returns the range of the wire frame in `buf`.
fn reinsert_tag(buf: &mut [u8], n: usize, msg: &libc::msghdr) -> (usize, usize) {
    let n = n.min(buf.len() - 4);
    match aux_of(msg) {
        Some(a) if a.tp_status & TP_STATUS_VLAN_VALID != 0 && n >= 12 => {
            let tpid = if a.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                a.tp_vlan_tpid
            } else {
                0x8100
            };
            buf.copy_within(4..16, 0);
            buf[12..14].copy_from_slice(&tpid.to_be_bytes());
            buf[14..16].copy_from_slice(&a.tp_vlan_tci.to_be_bytes());
            (0, n + 4)
        }
        _ => (4, 4 + n),
    }
}

/// What a [`Capture`] saw.
#[derive(Debug, Default)]
pub struct CaptureResult {
    /// Test frames that passed the filter.
    pub matched: u64,
    /// Frames that were not test frames, or failed the filter.
    pub ignored: u64,
    /// Matched frames by (phase, destination MAC).
    pub by_dst: HashMap<(u32, Mac), u32>,
    /// The first `keep` matched frames, as on the wire.
    pub kept: Vec<Vec<u8>>,
}

impl CaptureResult {
    /// Matched frames of one phase.
    pub fn phase_count(&self, phase: u32) -> u64 {
        self.by_dst
            .iter()
            .filter(|((p, _), _)| *p == phase)
            .map(|(_, n)| u64::from(*n))
            .sum()
    }

    /// Per-destination counts of one phase.
    pub fn dsts(&self, phase: u32) -> HashMap<Mac, u32> {
        self.by_dst
            .iter()
            .filter(|((p, _), _)| *p == phase)
            .map(|((_, d), n)| (*d, *n))
            .collect()
    }
}

/// A running background capture; [`Capture::stop`] returns the result.
pub struct Capture {
    stop: Arc<AtomicBool>,
    matched: Arc<AtomicU64>,
    handle: Option<JoinHandle<io::Result<CaptureResult>>>,
}

impl Capture {
    /// Frames matched so far.
    pub fn matched(&self) -> u64 {
        self.matched.load(Ordering::Relaxed)
    }

    /// Waits until at least `n` frames matched, then until no new frame
    /// matched for `quiet` (so that extra frames are seen too). Gives up
    /// early when nothing new arrives for [`STALL`], and at `timeout`.
    /// Returns the count at that point.
    pub fn wait_for(&self, n: u64, timeout: Duration, quiet: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let mut last = self.matched();
        let mut since = Instant::now();
        while last < n && Instant::now() < deadline && since.elapsed() < STALL {
            std::thread::sleep(Duration::from_millis(10));
            let now = self.matched();
            if now != last {
                last = now;
                since = Instant::now();
            }
        }
        self.wait_quiet(quiet, timeout)
    }

    /// Waits until no frame has matched for `quiet` (at most `max`).
    pub fn wait_quiet(&self, quiet: Duration, max: Duration) -> u64 {
        let end = Instant::now() + max;
        let mut last = self.matched();
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let now = self.matched();
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet || Instant::now() >= end {
                return now;
            }
        }
    }

    /// Stops the thread (after it has drained what is queued) and returns
    /// the counts.
    pub fn stop(mut self) -> io::Result<CaptureResult> {
        self.stop.store(true, Ordering::Relaxed);
        let h = self.handle.take().expect("capture already stopped");
        match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

type Filter = Box<dyn Fn(&TestInfo, &[u8]) -> bool + Send>;

fn capture_loop(
    port: RawPort,
    stop: Arc<AtomicBool>,
    matched: Arc<AtomicU64>,
    keep: usize,
    filter: Filter,
) -> io::Result<CaptureResult> {
    let fd = port.fd.as_raw_fd();
    let mut res = CaptureResult::default();
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; MAX_FRAME + 4]).collect();
    let mut cmsgs: Vec<CmsgBuf> = vec![[0; 8]; BATCH];
    let mut iovs: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b[4..].as_mut_ptr().cast(),
            iov_len: b.len() - 4,
        })
        .collect();
    // SAFETY: an all-zero mmsghdr is a valid value.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { zeroed() }).collect();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        for i in 0..BATCH {
            let h = &mut msgs[i].msg_hdr;
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = cmsgs[i].as_mut_ptr().cast();
            h.msg_controllen = size_of::<CmsgBuf>();
            h.msg_flags = 0;
            msgs[i].msg_len = 0;
        }
        // SAFETY: every mmsghdr points to its own iovec (into `bufs`) and
        // control buffer, all alive and unaliased during the call.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                msgs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // ENETDOWN: the link went down under the capture (a
                // failover test); keep listening, it may come back.
                Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ENETDOWN) => {
                    if stopping {
                        return Ok(res);
                    }
                    let mut pfd = libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: pfd is valid for the duration of the call.
                    unsafe { libc::poll(&mut pfd, 1, 20) };
                    continue;
                }
                _ => return Err(e),
            }
        }
        for i in 0..n as usize {
            let len = msgs[i].msg_len as usize;
            let hdr = msgs[i].msg_hdr;
            let (s, e) = reinsert_tag(&mut bufs[i], len, &hdr);
            let f = &bufs[i][s..e];
            match test_info(f) {
                Some(info) if filter(&info, f) => {
                    res.matched += 1;
                    *res.by_dst.entry((info.phase, info.dst)).or_insert(0) += 1;
                    if res.kept.len() < keep {
                        res.kept.push(f.to_vec());
                    }
                    matched.fetch_add(1, Ordering::Relaxed);
                }
                _ => res.ignored += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{mac, test_frame, Tag, BROADCAST};
    use crate::netns::{veth, Netns};

    fn pair(prefix: &str) -> (Netns, Netns, RawPort, RawPort) {
        let a = Netns::new(&format!("{prefix}a")).unwrap();
        let b = Netns::new(&format!("{prefix}b")).unwrap();
        veth(&a, "x", &b, "y", 9500).unwrap();
        let pa = RawPort::open(a.name(), "x").unwrap();
        let pb = RawPort::open(b.name(), "y").unwrap();
        (a, b, pa, pb)
    }

    #[test]
    fn send_recv_with_tags_intact() {
        if !crate::is_root() {
            eprintln!("SKIPPED: needs root");
            return;
        }
        let (_a, _b, pa, pb) = pair("tkr");
        let frames = vec![
            test_frame(&BROADCAST, &mac(1), &[], 1, 1, 64),
            test_frame(&mac(2), &mac(1), &[Tag::dot1q(10)], 1, 2, 64),
            test_frame(
                &mac(2),
                &mac(1),
                &[Tag {
                    tpid: 0x8100,
                    vid: 0,
                    pcp: 5,
                }],
                1,
                3,
                64,
            ),
            test_frame(
                &mac(2),
                &mac(1),
                &[Tag::dot1ad(500), Tag::dot1q(100)],
                1,
                4,
                100,
            ),
            test_frame(&mac(2), &mac(1), &[Tag::dot1ad(7)], 1, 5, 64),
            test_frame(&mac(2), &mac(1), &[], 1, 6, 9216),
        ];
        pa.send_batch(&frames).unwrap();
        let got = pb.recv_test_frames(Duration::from_millis(300)).unwrap();
        assert_eq!(got.len(), frames.len());
        for (g, f) in got.iter().zip(&frames) {
            assert_eq!(g, f, "frame changed on the wire");
        }
        // The sender does not see its own frames.
        assert!(pa
            .recv_test_frames(Duration::from_millis(100))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn kernel_drops_cut_short_tags() {
        if !crate::is_root() {
            eprintln!("SKIPPED: needs root");
            return;
        }
        let ns = Netns::new("tkk").unwrap();
        let ok = test_frame(&BROADCAST, &mac(1), &[Tag::dot1q(10)], 0, 0, 64);
        assert!(crate::testbed::kernel_delivers(&ns, &ok).unwrap());
        // 14 + 2 bytes: TPID 0x8100 and half a tag. Linux frees it in
        // skb_vlan_untag before packet taps: no AF_PACKET switch can see it.
        let cut = crate::frame::build(&BROADCAST, &mac(1), &[], 0x8100, &[0, 10]);
        assert!(!crate::testbed::kernel_delivers(&ns, &cut).unwrap());
    }

    #[test]
    fn paced_capture_counts_exactly() {
        if !crate::is_root() {
            eprintln!("SKIPPED: needs root");
            return;
        }
        let (_a, _b, pa, pb) = pair("tkc");
        let cap = pb.start_capture(2, |i, _| i.phase == 7).unwrap();
        let n = 50_000usize;
        let t = pa
            .send_paced(n, 200_000, |i, b| {
                let phase = if i % 10 == 0 { 8 } else { 7 };
                crate::frame::write_test_frame(
                    b,
                    &mac(i as u32),
                    &mac(0),
                    &[Tag::dot1q(10)],
                    phase,
                    i as u64,
                    64,
                )
            })
            .unwrap();
        assert!(t >= Duration::from_millis(200), "pacing too fast: {t:?}");
        cap.wait_for(45_000, Duration::from_secs(10), Duration::from_millis(200));
        let r = cap.stop().unwrap();
        assert_eq!(r.matched, 45_000);
        assert_eq!(r.phase_count(7), 45_000);
        assert_eq!(r.dsts(7).len(), 45_000);
        assert!(r.dsts(7).values().all(|&c| c == 1));
        assert_eq!(r.kept.len(), 2);
        assert_eq!(&r.kept[0][12..16], &[0x81, 0x00, 0x00, 0x0a]);
    }
}
