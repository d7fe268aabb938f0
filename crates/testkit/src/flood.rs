//! Line-rate floods for control-plane tests (CoPP), independent of
//! Lanyard's `io` crate.
//!
//! A [`Flooder`] is a background thread sending pre-built frames, in a
//! loop, on its own raw `AF_PACKET` socket bound to one interface of a
//! namespace: as fast as it can (`rate` 0, "line rate" for a veth is
//! whatever one sending core manages) or at a target rate, for a duration
//! or until stopped. Frames go out with `sendmmsg(2)` batches of up to
//! [`BATCH`] and `PACKET_QDISC_BYPASS` (no qdisc: the frames go straight
//! to the driver, as a packet generator's do). A frame the driver refuses
//! (a veth whose peer's backlog is full: `ENOBUFS`) is counted as
//! `refused` and skipped, not retried: the link is full.
//!
//! An [`RxCounter`] is the other end: a thread that drains a raw socket
//! and counts the frames a filter accepts (e.g. the ICMP errors a TTL=1
//! flood provokes), with the socket's own drops (`PACKET_STATISTICS`).

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::netns::in_netns;

const ETH_P_ALL: u16 = 0x0003;
const SOL_PACKET: libc::c_int = 263;
// <linux/if_packet.h>
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
// <asm-generic/socket.h>
const SO_SNDBUFFORCE: libc::c_int = 32;
const SO_RCVBUFFORCE: libc::c_int = 33;

/// Most frames per `sendmmsg(2)` call.
pub const BATCH: usize = 256;

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

/// A packet socket bound to `ifname` in the calling thread's namespace.
/// `protocol` 0 receives nothing (a send-only socket); `ETH_P_ALL` every
/// frame.
fn packet_socket(ifname: &str, protocol: u16) -> io::Result<OwnedFd> {
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
            i32::from(protocol.to_be()),
        )
    })?;
    // SAFETY: `raw` is a freshly created descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: an all-zero sockaddr_ll is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll and its size is passed.
    cvt(unsafe {
        libc::bind(
            raw,
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// CPU time the calling thread has used.
fn thread_cpu() -> Duration {
    // SAFETY: an all-zero timespec is valid; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Clock ticks per second of `/proc/*/stat` CPU times.
pub fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// How a [`Flooder`] sends.
#[derive(Clone, Debug)]
pub struct FloodSpec {
    /// Frames per second; 0 = as fast as possible.
    pub rate: u64,
    /// Stop after this long (`None`: only when [`Flooder::stop`] is called).
    pub duration: Option<Duration>,
    /// Bypass the qdisc (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
}

impl Default for FloodSpec {
    fn default() -> Self {
        FloodSpec {
            rate: 0,
            duration: None,
            qdisc_bypass: true,
        }
    }
}

/// What a [`Flooder`] did.
#[derive(Clone, Copy, Debug, Default)]
pub struct FloodReport {
    /// Frames the driver accepted.
    pub sent: u64,
    /// Frames it refused (`ENOBUFS`: the link is full), skipped.
    pub refused: u64,
    /// From the first frame to the last.
    pub elapsed: Duration,
    /// CPU time of the sending thread (user + system, which includes the
    /// veth delivery the kernel does on the sender's core).
    pub cpu: Duration,
}

impl FloodReport {
    /// Frames sent per second.
    pub fn pps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.sent as f64 / s
        } else {
            0.0
        }
    }
}

/// A flood running on a background thread. See the module docs.
pub struct Flooder {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    handle: Option<JoinHandle<io::Result<FloodReport>>>,
}

impl Flooder {
    /// Opens a send-only socket on `ifname` in namespace `ns` and starts
    /// sending `frames` (cycled through, in order) as `spec` says.
    pub fn start(
        ns: &str,
        ifname: &str,
        frames: Vec<Vec<u8>>,
        spec: FloodSpec,
    ) -> io::Result<Flooder> {
        if frames.is_empty() {
            return Err(io::Error::other("no frames to flood"));
        }
        let name = ifname.to_string();
        let bypass = spec.qdisc_bypass;
        let fd = in_netns(ns, move || -> io::Result<OwnedFd> {
            let fd = packet_socket(&name, 0)?;
            setsockopt_int(fd.as_raw_fd(), libc::SOL_SOCKET, SO_SNDBUFFORCE, 16 << 20)?;
            if bypass {
                setsockopt_int(fd.as_raw_fd(), SOL_PACKET, PACKET_QDISC_BYPASS, 1)?;
            }
            Ok(fd)
        })??;
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (stop2, sent2) = (stop.clone(), sent.clone());
        let handle = std::thread::Builder::new()
            .name(format!("flood-{ifname}"))
            .spawn(move || flood_loop(fd, frames, spec, stop2, sent2))?;
        Ok(Flooder {
            stop,
            sent,
            handle: Some(handle),
        })
    }

    /// Frames sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// True once the flood has ended (duration over, or an error).
    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_finished())
    }

    /// Waits for the flood to end by itself (its duration).
    pub fn wait(mut self) -> io::Result<FloodReport> {
        self.join()
    }

    /// Stops the flood now and returns what it did.
    pub fn stop(mut self) -> io::Result<FloodReport> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    fn join(&mut self) -> io::Result<FloodReport> {
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| io::Error::other("flood thread panicked"))?,
            None => Err(io::Error::other("already joined")),
        }
    }
}

impl Drop for Flooder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn flood_loop(
    fd: OwnedFd,
    frames: Vec<Vec<u8>>,
    spec: FloodSpec,
    stop: Arc<AtomicBool>,
    sent_live: Arc<AtomicU64>,
) -> io::Result<FloodReport> {
    // One batch worth of iovecs, cycling through `frames` (pointers into
    // `frames`, which outlives the loop; the kernel only reads them).
    let mut iov: Vec<libc::iovec> = (0..BATCH)
        .map(|k| {
            let f = &frames[k % frames.len()];
            libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            }
        })
        .collect();
    // SAFETY: an all-zero mmsghdr is a valid value.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    // Paced: batches small enough for about 1 ms of frames each.
    let batch = if spec.rate > 0 {
        ((spec.rate / 1000) as usize).clamp(1, BATCH)
    } else {
        BATCH
    };
    let cpu0 = thread_cpu();
    let start = Instant::now();
    let end = spec.duration.map(|d| start + d);
    let (mut sent, mut refused) = (0u64, 0u64);
    // `msgs` is a ring over `frames` only when `frames.len()` divides
    // BATCH; otherwise each call restarts at message 0, which is fine for
    // floods of identical or interchangeable frames.
    let mut off = 0usize;
    let mut iter = 0u32;
    loop {
        iter = iter.wrapping_add(1);
        if iter.is_multiple_of(16) || spec.rate > 0 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            if end.is_some_and(|e| now >= e) {
                break;
            }
            if spec.rate > 0 {
                let due =
                    start + Duration::from_secs_f64((sent + refused) as f64 / spec.rate as f64);
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
        }
        let n = batch.min(BATCH - off);
        // SAFETY: msgs[off..off+n] are initialised mmsghdrs whose iovecs
        // point into `frames`, alive for the whole loop.
        let rc = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                msgs.as_mut_ptr().add(off),
                n as libc::c_uint,
                0,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // The first message of the batch was refused: skip it.
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                    refused += 1;
                    off = (off + 1) % BATCH;
                    continue;
                }
                Some(libc::EINTR) => continue,
                _ => return Err(e),
            }
        }
        sent += rc as u64;
        off = (off + rc as usize) % BATCH;
        if iter.is_multiple_of(16) {
            sent_live.store(sent, Ordering::Relaxed);
        }
    }
    sent_live.store(sent, Ordering::Relaxed);
    Ok(FloodReport {
        sent,
        refused,
        elapsed: start.elapsed(),
        cpu: thread_cpu().saturating_sub(cpu0),
    })
}

/// Sends `count` distinct frames once each, in order, at `rate` frames/s
/// (0: as fast as the link takes them), on the calling thread: frame `i`
/// is written by `build(i, buf)` into one of [`BATCH`] reused buffers, so
/// millions of frames (e.g. one per flow) need no memory of their own —
/// unlike [`Flooder`], which cycles through a fixed set. A frame the driver
/// refuses (`ENOBUFS`) is tried again after a short pause, up to 100
/// times, then counted as `refused`: every frame is meant to arrive.
pub fn send_each(
    ns: &str,
    ifname: &str,
    count: u64,
    rate: u64,
    mut build: impl FnMut(u64, &mut Vec<u8>),
) -> io::Result<FloodReport> {
    let name = ifname.to_string();
    let fd = in_netns(ns, move || -> io::Result<OwnedFd> {
        let fd = packet_socket(&name, 0)?;
        setsockopt_int(fd.as_raw_fd(), libc::SOL_SOCKET, SO_SNDBUFFORCE, 16 << 20)?;
        setsockopt_int(fd.as_raw_fd(), SOL_PACKET, PACKET_QDISC_BYPASS, 1)?;
        Ok(fd)
    })??;
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(128)).collect();
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(BATCH);
    // SAFETY: an all-zero mmsghdr is a valid value.
    let mut msgs: Vec<libc::mmsghdr> = (0..BATCH).map(|_| unsafe { zeroed() }).collect();
    // About 1 ms of frames per call when paced.
    let per_call = if rate > 0 {
        ((rate / 1000) as usize).clamp(1, BATCH)
    } else {
        BATCH
    };
    let cpu0 = thread_cpu();
    let start = Instant::now();
    let (mut next, mut refused) = (0u64, 0u64);
    let mut retries = 0u32;
    while next < count {
        if rate > 0 {
            let due = start + Duration::from_secs_f64(next as f64 / rate as f64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        let n = per_call.min((count - next) as usize);
        iov.clear();
        for (k, b) in bufs.iter_mut().take(n).enumerate() {
            b.clear();
            build(next + k as u64, b);
            iov.push(libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            });
        }
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: msgs[..n] point at iovecs over `bufs`, alive across the call.
        let rc = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), n as libc::c_uint, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                    retries += 1;
                    if retries > 100 {
                        refused += 1;
                        next += 1;
                        retries = 0;
                    } else {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    continue;
                }
                Some(libc::EINTR) => continue,
                _ => return Err(e),
            }
        }
        // Frames after the ones sent are built again next time.
        next += rc as u64;
        retries = 0;
    }
    Ok(FloodReport {
        sent: count - refused,
        refused,
        elapsed: start.elapsed(),
        cpu: thread_cpu().saturating_sub(cpu0),
    })
}

/// What an [`RxCounter`] counted.
#[derive(Clone, Copy, Debug, Default)]
pub struct RxReport {
    /// Frames the filter accepted.
    pub matched: u64,
    /// Other frames received.
    pub other: u64,
    /// Frames the kernel dropped because the socket's buffer was full
    /// (`PACKET_STATISTICS`, since the counter started).
    pub socket_drops: u64,
    /// From start to stop.
    pub elapsed: Duration,
}

/// Counts received frames on a background thread. See the module docs.
pub struct RxCounter {
    stop: Arc<AtomicBool>,
    matched: Arc<AtomicU64>,
    handle: Option<JoinHandle<io::Result<RxReport>>>,
}

impl RxCounter {
    /// Opens a socket on `ifname` in namespace `ns` (frames it sends
    /// itself are not seen) and counts every received frame for which
    /// `filter` returns true.
    pub fn start(
        ns: &str,
        ifname: &str,
        filter: impl Fn(&[u8]) -> bool + Send + 'static,
    ) -> io::Result<RxCounter> {
        let name = ifname.to_string();
        let fd = in_netns(ns, move || -> io::Result<OwnedFd> {
            let fd = packet_socket(&name, ETH_P_ALL)?;
            let raw = fd.as_raw_fd();
            setsockopt_int(raw, libc::SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)?;
            setsockopt_int(raw, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
            Ok(fd)
        })??;
        // Frames queued before bind may belong to any interface, and the
        // statistics count from the first read: reset both.
        let mut buf = [0u8; 2048];
        // SAFETY: reads into a valid buffer; non-blocking.
        while unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        } >= 0
        {}
        let _ = socket_drops(fd.as_raw_fd());
        let stop = Arc::new(AtomicBool::new(false));
        let matched = Arc::new(AtomicU64::new(0));
        let (stop2, matched2) = (stop.clone(), matched.clone());
        let handle = std::thread::Builder::new()
            .name(format!("rxcount-{ifname}"))
            .spawn(move || rx_loop(fd, Box::new(filter), stop2, matched2))?;
        Ok(RxCounter {
            stop,
            matched,
            handle: Some(handle),
        })
    }

    /// Frames matched so far.
    pub fn matched(&self) -> u64 {
        self.matched.load(Ordering::Relaxed)
    }

    /// Stops counting (after draining what is queued) and reports.
    pub fn stop(mut self) -> io::Result<RxReport> {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| io::Error::other("counter thread panicked"))?,
            None => Err(io::Error::other("already stopped")),
        }
    }
}

impl Drop for RxCounter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// `tp_drops` of a packet socket since the last call (reading resets it).
fn socket_drops(fd: RawFd) -> u64 {
    // struct tpacket_stats { unsigned int tp_packets, tp_drops; }
    let mut st = [0u32; 2];
    let mut len = size_of::<[u32; 2]>() as libc::socklen_t;
    // SAFETY: st is a valid buffer of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            SOL_PACKET,
            PACKET_STATISTICS,
            st.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc < 0 {
        0
    } else {
        u64::from(st[1])
    }
}

/// What an [`RxCounter`] counts.
type RxFilter = Box<dyn Fn(&[u8]) -> bool + Send>;

fn rx_loop(
    fd: OwnedFd,
    filter: RxFilter,
    stop: Arc<AtomicBool>,
    matched_live: Arc<AtomicU64>,
) -> io::Result<RxReport> {
    const N: usize = 64;
    const SNAP: usize = 2048;
    let start = Instant::now();
    let mut bufs = vec![0u8; N * SNAP];
    let mut iov: Vec<libc::iovec> = (0..N)
        .map(|k| libc::iovec {
            // SAFETY: k * SNAP is within `bufs`.
            iov_base: unsafe { bufs.as_mut_ptr().add(k * SNAP) }.cast(),
            iov_len: SNAP,
        })
        .collect();
    // SAFETY: an all-zero mmsghdr is a valid value.
    let mut msgs: Vec<libc::mmsghdr> = (0..N).map(|_| unsafe { zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let (mut matched, mut other, mut drops) = (0u64, 0u64, 0u64);
    let mut stopping = false;
    loop {
        // SAFETY: msgs are initialised mmsghdrs pointing into `bufs`.
        let rc = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                N as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if rc > 0 {
            for (k, m) in msgs.iter().take(rc as usize).enumerate() {
                let len = (m.msg_len as usize).min(SNAP);
                if filter(&bufs[k * SNAP..k * SNAP + len]) {
                    matched += 1;
                } else {
                    other += 1;
                }
            }
            matched_live.store(matched, Ordering::Relaxed);
            continue;
        }
        if rc < 0 {
            let e = io::Error::last_os_error();
            if !matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                return Err(e);
            }
        }
        drops += socket_drops(fd.as_raw_fd());
        if stopping {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            // One more pass for what is still queued.
            stopping = true;
            continue;
        }
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: pfd is a valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut pfd, 1, 50) };
    }
    Ok(RxReport {
        matched,
        other,
        socket_drops: drops,
        elapsed: start.elapsed(),
    })
}

/// True for an Ethernet II frame carrying an IPv4 ICMP message of `ty`
/// (11 = time exceeded, 3 = unreachable).
pub fn is_icmp4(frame: &[u8], ty: u8) -> bool {
    if frame.len() < 14 + 20 + 1 || frame[12..14] != [0x08, 0x00] || frame[14] >> 4 != 4 {
        return false;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    frame[14 + 9] == 1 && frame.get(14 + ihl) == Some(&ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_rate() {
        let r = FloodReport {
            sent: 1000,
            elapsed: Duration::from_millis(500),
            ..FloodReport::default()
        };
        assert_eq!(r.pps(), 2000.0);
        assert_eq!(FloodReport::default().pps(), 0.0);
    }

    #[test]
    fn icmp_filter() {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12] = 0x08;
        f[14] = 0x45;
        f[14 + 9] = 1;
        f[34] = 11;
        assert!(is_icmp4(&f, 11));
        assert!(!is_icmp4(&f, 3));
        f[14 + 9] = 17;
        assert!(!is_icmp4(&f, 11));
    }
}
