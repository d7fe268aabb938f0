//! AF_XDP port: one XSK socket per receive queue of an interface (queue 0
//! receives and transmits, the others only receive), each with its own
//! UMEM, and the steering XDP program ([`prog`]) that sends each queue's
//! frames to its socket. With several queues the receive chunks are split
//! between them, so a port's memory does not grow with its queue count;
//! receive reads every queue in turn (a different one first each call).
//!
//! - **UMEM**: `rx_frames` 2 KiB chunks for receive (all of them in the
//!   fill ring or the kernel's hands at any time), then `tx_slots` transmit
//!   slots of five consecutive chunks each (10 KiB: a [`MAX_FRAME_LEN`]
//!   frame fits, so `tx_slot` lends a contiguous buffer as the [`Port`]
//!   contract asks). The transmit ring holds four descriptors per slot, so
//!   it is never the limit; the slots are.
//! - **Receive** copies each frame (one descriptor, or a chain of them with
//!   `XDP_PKT_CONTD` for a multi-buffer jumbo frame) into the caller's
//!   batch and returns its chunks to the fill ring at once: one consumer
//!   and one producer update per call, no system call unless the fill ring
//!   says `XDP_RING_NEED_WAKEUP`.
//! - **Transmit** writes descriptors (a jumbo frame: one per 4 KiB, chained)
//!   and publishes them at `flush`; the kernel is kicked with `sendto` only
//!   when the transmit ring says it needs a wake-up (copy mode always does:
//!   it sends in the caller's `sendto`, 32 frames per call, or a whole
//!   batch where the kernel takes `XDP_MAX_TX_SKB_BUDGET`, 6.17+; a flush
//!   kicks until the ring is empty or the device pushes back). Finished slots come back through the
//!   completion ring.
//! - **Mode**: driver (native) XDP first, generic (skb) XDP if the driver
//!   refuses; zero-copy bind first, copy mode if the driver has none.
//!   [`AfXdpPort::mode`] says which; the caller logs it.
//! - **Multi-buffer**: the program is loaded "frags-aware" and the socket
//!   bound with `XDP_USE_SG`, so frames up to [`MAX_FRAME_LEN`] pass in
//!   either direction; where the kernel refuses that, frames are limited to
//!   one chunk and [`AfXdpPort::open`] fails for an MTU above it (the
//!   caller falls back to AF_PACKET and says why).
//!
//! - **Busy polling** (optional, [`busy_poll`]): the worker runs the
//!   device's NAPI poll itself, a `recvfrom` per receive call, and the
//!   kernel leaves the device's NAPI to it.
//!
//! - **Shared UMEM** (optional, [`shared`]): the one-queue ports of a
//!   worker bind to one UMEM (`XDP_SHARED_UMEM`), each in its own region;
//!   receive then holds one-chunk frames in the batch instead of copying
//!   them, and [`Port::tx_umem`] puts a chunk on another port's transmit
//!   ring as it is (the worker's unicast between two such ports). Without
//!   it each socket has its own UMEM and the data path copies frames
//!   through its batch as with AF_PACKET.
//!
//! Not done: a UMEM shared by a port's queues (a multi-queue port keeps
//! one per queue and never joins the shared one); busy polling on a port
//! with several queues (refused, saying so); handing a shared-UMEM port
//! over on restart (it is opened anew).
//!
//! - **Restart hand-over** ([`Port::handover`], [`AfXdpPort::adopt`]): the
//!   UMEM lives in a memfd, not in private memory, so a successor image
//!   can map it. The socket, the memfd, the program's link, the program
//!   and the map stay open across `exec` (close-on-exec cleared); the
//!   steering program stays attached throughout, so frames that arrive
//!   during the restart wait in the receive ring. The successor maps the
//!   memfd and the four rings again (descriptors hold UMEM offsets, not
//!   addresses) and carries on from the ring indices the kernel keeps.

pub mod busy_poll;
pub mod prog;
pub mod shared;

use crate::link;
use crate::{FrameBatch, Port, PortError, PortStats, MAX_FRAME_LEN};
pub use busy_poll::BusyPoll;
use prog::XdpMode;
pub use shared::SharedUmem;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
const XDP_SHARED_UMEM: u16 = 1;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_USE_SG: u16 = 1 << 4;
const XDP_RING_NEED_WAKEUP: u32 = 1;
const XDP_PKT_CONTD: u32 = 1;
const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

/// UMEM chunk size: the smallest the kernel takes (2 KiB), so a deep
/// receive ring costs little memory; a longer frame spans several chunks
/// (multi-buffer).
pub const CHUNK: usize = 2048;
/// Chunks per transmit slot: enough for a [`MAX_FRAME_LEN`] frame.
const TX_SLOT_CHUNKS: usize = MAX_FRAME_LEN.div_ceil(CHUNK);
pub(crate) const TX_SLOT: usize = TX_SLOT_CHUNKS * CHUNK;
/// Longest frame in one receive chunk: the kernel puts
/// `XDP_PACKET_HEADROOM` (256) bytes in front of it.
pub const SINGLE_CHUNK_FRAME: usize = CHUNK - 256;
/// Transmit ring entries per slot: one per chunk, rounded up to a power
/// of two so the ring (slots × this) is one, and never fills.
const TX_DESCS_PER_SLOT: u32 = (TX_SLOT_CHUNKS as u32).next_power_of_two();

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct XdpStatistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct XdpDesc {
    addr: u64,
    len: u32,
    options: u32,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// Options for [`AfXdpPort::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfXdpOptions {
    /// `None`: driver mode, else generic. `Some(m)`: only `m`.
    pub mode: Option<XdpMode>,
    /// Receive chunks (a power of two): the fill and receive ring size.
    pub rx_frames: u32,
    /// Transmit slots (a power of two).
    pub tx_slots: u32,
    /// Busy polling ([`busy_poll`]); `None`: off.
    pub busy_poll: Option<BusyPoll>,
    /// The worker's shared UMEM ([`shared`]) to bind to; its ring sizes
    /// replace `rx_frames` and `tx_slots`. A port it cannot take (no
    /// region left, several queues, a bind the kernel refuses) opens with
    /// its own UMEM, and [`AfXdpPort::shared_umem`] says why.
    pub shared_umem: Option<Arc<SharedUmem>>,
}

impl Default for AfXdpOptions {
    fn default() -> Self {
        AfXdpOptions {
            mode: None,
            // 16,384 chunks (32 MiB): rides out a worker descheduled for
            // ~10 ms at 1.5 Mfps, like the AF_PACKET ring's 16 MiB.
            rx_frames: 16384,
            tx_slots: 512,
            busy_poll: None,
            shared_umem: None,
        }
    }
}

/// One mapped ring: producer/consumer words, flags and the descriptor array.
struct Ring<T> {
    map: *mut u8,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    mask: u32,
    /// Our copy of the index we advance (producer of fill/tx, consumer of
    /// rx/completion).
    local: u32,
}

impl<T> Ring<T> {
    /// # Safety
    /// `fd` must be an XSK socket with the ring `opt` sized `n` set up, and
    /// `off` its offsets from `XDP_MMAP_OFFSETS`.
    unsafe fn map(
        fd: RawFd,
        pgoff: libc::off_t,
        off: &RingOffset,
        n: u32,
        producer: bool,
    ) -> io::Result<Ring<T>> {
        let len = off.desc as usize + n as usize * size_of::<T>();
        let p = libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff,
        );
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let p = p as *mut u8;
        let mut r = Ring {
            map: p,
            map_len: len,
            producer: p.add(off.producer as usize) as *const AtomicU32,
            consumer: p.add(off.consumer as usize) as *const AtomicU32,
            flags: p.add(off.flags as usize) as *const AtomicU32,
            desc: p.add(off.desc as usize) as *mut T,
            mask: n - 1,
            local: 0,
        };
        r.local = if producer {
            (*r.producer).load(Ordering::Relaxed)
        } else {
            (*r.consumer).load(Ordering::Relaxed)
        };
        Ok(r)
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping (see `map`).
        unsafe { &*self.producer }
    }
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { (*self.flags).load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0 }
    }
    /// Entry `i` (any index; masked).
    fn at(&self, i: u32) -> *mut T {
        // SAFETY: masked index inside the descriptor array of the mapping.
        unsafe { self.desc.add((i & self.mask) as usize) }
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`; nothing borrows it past `self`.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// The socket and its four rings (recreated by [`AfXdpPort::reset`]).
struct Xsk {
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<XdpDesc>,
    tx: Ring<XdpDesc>,
    // Declared last: the rings are unmapped before the socket closes.
    fd: OwnedFd,
}

/// A receive-only socket on queue `queue` (1..) of a multi-queue port, with
/// its own UMEM of `rx_frames` receive chunks (its completion and transmit
/// rings exist because the kernel asks for them, and stay unused: the port
/// sends on queue 0's socket).
struct RxQueue {
    xsk: Xsk,
    umem: *mut u8,
    umem_len: usize,
    _umem_fd: OwnedFd,
}

impl Drop for RxQueue {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open_queue`; nothing borrows it.
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}

/// Most sockets (receive queues) one port opens; an interface with more
/// is refused (its other queues' frames would bypass Lanyard).
pub const MAX_QUEUES: usize = 16;

/// Where the port's program runs and how its socket moves frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpPortMode {
    pub xdp: XdpMode,
    pub zero_copy: bool,
    /// Frames longer than one chunk pass (multi-buffer XDP).
    pub multi_buffer: bool,
}

impl std::fmt::Display for XdpPortMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}",
            self.xdp.as_str(),
            if self.zero_copy { "zero-copy" } else { "copy" }
        )
    }
}

/// A port on an AF_XDP socket. See the crate docs for the [`Port`] contract.
pub struct AfXdpPort {
    name: String,
    ifindex: u32,
    /// `None` only if a [`AfXdpPort::reset`] failed: the port is dead.
    xsk: Option<Xsk>,
    umem: *mut u8,
    umem_len: usize,
    rx_frames: u32,
    tx_slots: u32,
    /// Free transmit slots (indices), a stack.
    tx_free: Vec<u32>,
    tx_lent: Option<u32>,
    /// Descriptors written but not yet published (flush publishes).
    tx_unpublished: u32,
    /// Slots in the kernel's hands (published, not completed).
    tx_in_flight: u32,
    tx_max_len: usize,
    mode: XdpPortMode,
    bind_flags: u16,
    /// Statistics of sockets replaced by `reset`, plus our own counts.
    base: PortStats,
    stats: PortStats,
    /// A veth: complete TCP/UDP checksums a local sender left to offload
    /// (see [`crate::complete_checksums`]).
    complete_csum: bool,
    /// Busy polling: its settings and what the kernel refused.
    busy: Option<Box<busy_poll::BusyState>>,
    /// Busy poll the socket in every `recv` (busy polling is on and the
    /// socket has a NAPI id).
    kick: bool,
    /// The memfd behind the UMEM mapping (handed over on restart);
    /// `None` on a shared UMEM (whose pool holds it).
    umem_fd: Option<OwnedFd>,
    /// The worker's shared UMEM and this port's region of it; `None`: the
    /// port's own UMEM (then `shared_why` says why, if one was offered).
    shared: Option<Arc<SharedUmem>>,
    region: u32,
    shared_why: Option<String>,
    /// Offsets of the port's receive chunks and of its transmit slots in
    /// the UMEM (its region's; 0 and after the chunks for its own UMEM).
    rx_base: u64,
    tx_base: u64,
    /// Transmit ring descriptors written and not yet completed (its own
    /// slots' chunks and chunks moved to it).
    ring_used: u32,
    /// Chunks of other ports moved onto the transmit ring, not completed.
    lent_in: u32,
    /// Frames sent by moving a descriptor (no copy).
    moved: u64,
    /// Receive-only sockets on queues 1.. of a multi-queue interface.
    extra: Vec<RxQueue>,
    /// Frames received per queue (queue 0 first).
    queue_rx: Vec<u64>,
    /// The queue whose socket is read first in the next `recv` (fairness).
    next_q: usize,
    /// With several queues: an epoll set of every queue's socket (`rx_fd`).
    epoll: Option<OwnedFd>,
    // Dropped in this order: the link detaches the program, then the
    // program and map go.
    _link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
}

// SAFETY: the UMEM and ring mappings are owned by this value alone; the
// kernel synchronises through the ring indices.
unsafe impl Send for AfXdpPort {}

fn os(op: &'static str) -> impl FnOnce(io::Error) -> PortError {
    move |err| PortError::Os { op, err }
}

fn setsockopt<T>(fd: &OwnedFd, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` is a live `T` of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            name,
            val as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getsockopt<T: Default>(fd: &OwnedFd, name: libc::c_int) -> io::Result<T> {
    let mut v = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            name,
            &mut v as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

/// Receive queues in use on an interface: its channels (`ETHTOOL_GCHANNELS`,
/// asked in this thread's namespace: receive-only plus combined), else the
/// `rx-*` entries of `/sys/class/net/NAME/queues` (`real_num_rx_queues`;
/// netlink only has the allocated count). 1 when neither answers (this
/// thread's `/sys` shows another namespace: the ifindex differs).
pub fn rx_queues(name: &str, ifindex: u32) -> usize {
    if let Some(n) = ethtool_rx_channels(name) {
        return n;
    }
    let dir = format!("/sys/class/net/{name}");
    let same = std::fs::read_to_string(format!("{dir}/ifindex"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        == Some(ifindex);
    if !same {
        return 1;
    }
    std::fs::read_dir(format!("{dir}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
                .max(1)
        })
        .unwrap_or(1)
}

/// `rx_count + combined_count` of `ETHTOOL_GCHANNELS`; `None` if the
/// driver does not say (or says 0).
fn ethtool_rx_channels(name: &str) -> Option<usize> {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    // struct ethtool_channels: cmd, max_rx, max_tx, max_other,
    // max_combined, rx_count, tx_count, other_count, combined_count.
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    #[repr(C)]
    struct Ifreq {
        name: [u8; 16],
        data: *mut u32,
        _pad: [u8; 16],
    }
    if name.len() >= 16 {
        return None;
    }
    let mut ifr = Ifreq {
        name: [0; 16],
        data: ch.as_mut_ptr(),
        _pad: [0; 16],
    };
    ifr.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: plain socket(2); checked and owned below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor we own.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: an ifreq whose data points at a live ethtool_channels.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), SIOCETHTOOL as _, &mut ifr as *mut Ifreq) };
    let n = (ch[5] + ch[8]) as usize;
    (r == 0 && n > 0).then_some(n)
}

/// Receive chunks per queue when `queues` share `rx_frames`: the total
/// split evenly (rounded down to a power of two), at least 64.
fn per_queue_frames(rx_frames: u32, queues: usize) -> u32 {
    let share = (rx_frames / queues.max(1) as u32).max(64);
    1 << (31 - share.leading_zeros())
}

impl AfXdpPort {
    /// Open a port on `ifname`: load and attach the steering program
    /// (replacing a stale one of ours), create the socket and its UMEM.
    pub fn open(ifname: &str, opts: &AfXdpOptions) -> Result<AfXdpPort, PortError> {
        let mut p = Self::open_port(ifname, opts)?;
        if let Some(bp) = opts.busy_poll {
            p.start_busy_poll(bp);
        }
        Ok(p)
    }

    /// Busy polling on: the socket options, and where the socket has a
    /// NAPI id (see [`busy_poll`]) the device's NAPI settings.
    fn start_busy_poll(&mut self, bp: BusyPoll) {
        if !self.extra.is_empty() {
            self.busy = Some(Box::new(busy_poll::BusyState {
                opts: bp,
                sockopts: false,
                saved: busy_poll::Saved { napi: None },
                refused: vec![format!(
                    "{} receive queues: busy polling is built for one-queue ports \
                     (the kernel's NAPI poll does the receive work)",
                    self.queues()
                )],
            }));
            return;
        }
        let Some(x) = self.xsk.as_ref() else { return };
        let mut refused = busy_poll::set_sockopts(&x.fd, &bp);
        let sockopts = refused.is_empty();
        let napi = if busy_poll::napi_id(&x.fd) != 0 {
            busy_poll::set_device(&self.name, self.ifindex, &bp, &mut refused)
        } else {
            refused.push(format!(
                "no NAPI id for the socket ({}): the kernel takes it at bind from the NAPI the driver \
                 registered for the queue, and veth registers none (some kernels: zero-copy only); \
                 the kernel's NAPI poll does the receive work, as without busy polling",
                self.mode
            ));
            None
        };
        self.kick = sockopts && napi.is_some();
        self.busy = Some(Box::new(busy_poll::BusyState {
            opts: bp,
            sockopts,
            saved: busy_poll::Saved { napi },
            refused,
        }));
    }

    fn open_port(ifname: &str, opts: &AfXdpOptions) -> Result<AfXdpPort, PortError> {
        if !opts.rx_frames.is_power_of_two()
            || !opts.tx_slots.is_power_of_two()
            || opts.rx_frames < 64
            || opts.tx_slots < 16
        {
            return Err(PortError::Os {
                op: "AfXdpOptions",
                err: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "rx_frames and tx_slots must be powers of two (>= 64, >= 16)",
                ),
            });
        }
        let info = link::query(ifname).ok_or_else(|| PortError::NoSuchInterface(ifname.into()))?;
        let ifindex = info.ifindex;
        let queues = rx_queues(ifname, ifindex);
        if queues > MAX_QUEUES {
            return Err(PortError::Os {
                op: "AF_XDP",
                err: io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("{queues} receive queues (at most {MAX_QUEUES}: one socket each)"),
                ),
            });
        }
        // The receive chunks are split between the queues, so a port's
        // memory does not grow with its queue count.
        let mut opts = opts.clone();
        opts.rx_frames = per_queue_frames(opts.rx_frames, queues);
        let mut shared_why = None;
        let mut pool = match opts.shared_umem.take() {
            Some(_) if queues > 1 => {
                shared_why = Some(format!(
                    "{queues} receive queues: the shared UMEM is built for one-queue ports"
                ));
                None
            }
            Some(u) => match u.take_region() {
                Some(r) => Some((u, r)),
                None => {
                    shared_why = Some("no region left in the worker's shared UMEM".to_string());
                    None
                }
            },
            None => None,
        };
        let opts = &opts;
        let map = prog::create_xskmap(queues as u32).map_err(os("BPF_MAP_CREATE(XSKMAP)"))?;
        let (link_fd, prog_fd, xdp) = attach_program(&map, ifindex, opts.mode)?;

        // On the worker's shared UMEM: this port's region of it. Where the
        // kernel refuses the bind, the port's own UMEM below.
        let mut on_pool = None;
        if let Some((u, r)) = pool.take() {
            let (rx_frames, tx_slots) = u.rings();
            let anchor = u.anchor(None);
            let flags = anchor.map(|_| u.flags());
            match new_xsk(
                u.base(),
                u.len(),
                rx_frames,
                tx_slots,
                ifindex,
                0,
                &map,
                flags,
                anchor,
            ) {
                Ok((xsk, f, zc, mb)) => {
                    if anchor.is_none() {
                        u.set_flags(f);
                    }
                    u.join(&xsk.fd);
                    on_pool = Some((u, r, xsk, f, zc, mb));
                }
                Err(e) => shared_why = Some(format!("shared UMEM bind refused ({e})")),
            }
        }
        let mut port = match on_pool {
            Some((u, r, xsk, bind_flags, zero_copy, multi_buffer)) => {
                let (rx_frames, tx_slots) = u.rings();
                let rx_base = u.region_base(r);
                let tx_base = u.region_tx_base(r);
                AfXdpPort {
                    name: ifname.to_string(),
                    ifindex,
                    xsk: Some(xsk),
                    umem: u.base(),
                    umem_len: u.len(),
                    rx_frames,
                    tx_slots,
                    tx_free: (0..tx_slots).rev().collect(),
                    tx_lent: None,
                    tx_unpublished: 0,
                    tx_in_flight: 0,
                    tx_max_len: info.mtu as usize + 14,
                    mode: XdpPortMode {
                        xdp,
                        zero_copy,
                        multi_buffer,
                    },
                    bind_flags,
                    base: PortStats::default(),
                    stats: PortStats::default(),
                    complete_csum: link::is_veth(ifname),
                    busy: None,
                    kick: false,
                    umem_fd: None,
                    shared: Some(u),
                    region: r,
                    shared_why: None,
                    rx_base,
                    tx_base,
                    ring_used: 0,
                    lent_in: 0,
                    moved: 0,
                    extra: Vec::new(),
                    queue_rx: vec![0],
                    next_q: 0,
                    epoll: None,
                    _link: link_fd,
                    _prog: prog_fd,
                    map,
                }
            }
            None => {
                // UMEM: receive chunks, then transmit slots, in a memfd so
                // that a successor image can map it (restart hand-over).
                let umem_len = opts.rx_frames as usize * CHUNK + opts.tx_slots as usize * TX_SLOT;
                let umem_fd = umem_memfd(umem_len).map_err(os("memfd(UMEM)"))?;
                let umem = map_umem(&umem_fd, umem_len).map_err(os("mmap(UMEM)"))?;
                let (xsk, bind_flags, zero_copy, multi_buffer) = match new_xsk(
                    umem,
                    umem_len,
                    opts.rx_frames,
                    opts.tx_slots,
                    ifindex,
                    0,
                    &map,
                    None,
                    None,
                ) {
                    Ok(x) => x,
                    Err(e) => {
                        // SAFETY: the UMEM mapped above, used by nothing else.
                        unsafe { libc::munmap(umem as *mut libc::c_void, umem_len) };
                        return Err(e);
                    }
                };
                AfXdpPort {
                    name: ifname.to_string(),
                    ifindex,
                    xsk: Some(xsk),
                    umem,
                    umem_len,
                    rx_frames: opts.rx_frames,
                    tx_slots: opts.tx_slots,
                    tx_free: (0..opts.tx_slots).rev().collect(),
                    tx_lent: None,
                    tx_unpublished: 0,
                    tx_in_flight: 0,
                    tx_max_len: info.mtu as usize + 14,
                    mode: XdpPortMode {
                        xdp,
                        zero_copy,
                        multi_buffer,
                    },
                    bind_flags,
                    base: PortStats::default(),
                    stats: PortStats::default(),
                    complete_csum: link::is_veth(ifname),
                    busy: None,
                    kick: false,
                    umem_fd: Some(umem_fd),
                    shared: None,
                    region: 0,
                    shared_why,
                    rx_base: 0,
                    tx_base: (opts.rx_frames as usize * CHUNK) as u64,
                    ring_used: 0,
                    lent_in: 0,
                    moved: 0,
                    extra: Vec::new(),
                    queue_rx: vec![0],
                    next_q: 0,
                    epoll: None,
                    _link: link_fd,
                    _prog: prog_fd,
                    map,
                }
            }
        };
        let multi_buffer = port.mode.multi_buffer;
        let mtu_frame = info.mtu as usize + 14 + 8;
        if !multi_buffer && mtu_frame > SINGLE_CHUNK_FRAME {
            return Err(PortError::Os {
                op: "AF_XDP",
                err: io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "MTU {} needs multi-buffer XDP, which this kernel/driver refused",
                        info.mtu
                    ),
                ),
            });
        }
        port.fill_all();
        for q in 1..queues {
            let rq = port.open_queue(q as u32)?;
            port.extra.push(rq);
            port.queue_rx.push(0);
        }
        if queues > 1 {
            port.epoll = Some(port.epoll_set().map_err(os("epoll(AF_XDP queues)"))?);
        }
        Ok(port)
    }

    /// A receive-only socket on `queue`, its UMEM full of receive chunks
    /// in its fill ring, bound with queue 0's flags and in the map.
    fn open_queue(&self, queue: u32) -> Result<RxQueue, PortError> {
        let umem_len = self.rx_frames as usize * CHUNK;
        let umem_fd = umem_memfd(umem_len).map_err(os("memfd(UMEM)"))?;
        let umem = map_umem(&umem_fd, umem_len).map_err(os("mmap(UMEM)"))?;
        let xsk = match new_xsk(
            umem,
            umem_len,
            self.rx_frames,
            2,
            self.ifindex,
            queue,
            &self.map,
            Some(self.bind_flags),
            None,
        ) {
            Ok((x, ..)) => x,
            Err(e) => {
                // SAFETY: the UMEM mapped above, used by nothing else.
                unsafe { libc::munmap(umem as *mut libc::c_void, umem_len) };
                return Err(e);
            }
        };
        let mut rq = RxQueue {
            xsk,
            umem,
            umem_len,
            _umem_fd: umem_fd,
        };
        let f = &mut rq.xsk.fill;
        for i in 0..self.rx_frames {
            // SAFETY: the fill ring has rx_frames entries, all ours now.
            unsafe { *f.at(f.local.wrapping_add(i)) = i as u64 * CHUNK as u64 };
        }
        f.local = f.local.wrapping_add(self.rx_frames);
        f.producer().store(f.local, Ordering::Release);
        Ok(rq)
    }

    /// An epoll descriptor readable when any queue's socket has frames: the
    /// one descriptor a worker waits on (`rx_fd`).
    fn epoll_set(&self) -> io::Result<OwnedFd> {
        // SAFETY: plain epoll_create1; checked.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        let fds = self
            .xsk
            .iter()
            .map(|x| x.fd.as_raw_fd())
            .chain(self.extra.iter().map(|q| q.xsk.fd.as_raw_fd()));
        for fd in fds {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: epoll_ctl with a live event and descriptors we hold.
            if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(ep)
    }

    /// Take over a port a predecessor image handed over ([`Port::handover`]
    /// gave `state`): its socket, UMEM, rings and attached program, with
    /// the frames that arrived meanwhile waiting in the receive ring.
    pub fn adopt(ifname: &str, state: &str) -> Result<AfXdpPort, PortError> {
        let bad = || PortError::Os {
            op: "adopt",
            err: io::Error::new(io::ErrorKind::InvalidData, "AF_XDP hand-over state"),
        };
        let mut parts = state.split('+');
        let head = parts.next().unwrap_or_default();
        // Queues 1.. (`+SOCKET/UMEM` each), taken over below with the rest.
        let queue_fds: Vec<[RawFd; 2]> = parts
            .map(|p| {
                let (x, u) = p.split_once('/')?;
                Some([x.parse().ok()?, u.parse().ok()?])
            })
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        if queue_fds.iter().flatten().any(|&fd| fd < 0) || queue_fds.len() >= MAX_QUEUES {
            return Err(bad());
        }
        // SAFETY: the predecessor left these descriptors open for us; from
        // here on we own them (they are closed if adopting fails).
        let queue_fds: Vec<[OwnedFd; 2]> = queue_fds
            .into_iter()
            .map(|q| q.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }))
            .collect();
        for fd in queue_fds.iter().flatten() {
            set_cloexec(fd.as_raw_fd(), true);
        }
        let f: Vec<u64> = head
            .strip_prefix(HANDOVER_TAG)
            .ok_or_else(bad)?
            .split(',')
            .map(|x| x.parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        // 13 fields, and 7 more when the port busy polls.
        if (f.len() != 13 && f.len() != 20) || f[..5].iter().any(|&fd| fd > i32::MAX as u64) {
            return Err(bad());
        }
        // SAFETY: the predecessor left these descriptors open for us; from
        // here on we own them (they are closed if adopting fails).
        let [xsk_fd, umem_fd, link_fd, prog_fd, map] =
            [f[0], f[1], f[2], f[3], f[4]].map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        for fd in [&xsk_fd, &umem_fd, &link_fd, &prog_fd, &map] {
            set_cloexec(fd.as_raw_fd(), true);
        }
        let (ifindex, rx_frames, tx_slots) = (f[5] as u32, f[6] as u32, f[7] as u32);
        let (bind_flags, umem_len) = (f[8] as u16, f[12] as usize);
        if !rx_frames.is_power_of_two()
            || !tx_slots.is_power_of_two()
            || umem_len != rx_frames as usize * CHUNK + tx_slots as usize * TX_SLOT
        {
            return Err(bad());
        }
        let info = link::query(ifname).ok_or_else(|| PortError::NoSuchInterface(ifname.into()))?;
        if info.ifindex != ifindex {
            return Err(bad());
        }
        let (fill, comp, rx, tx) = map_rings(&xsk_fd, rx_frames, tx_slots * TX_DESCS_PER_SLOT)?;
        let umem = map_umem(&umem_fd, umem_len).map_err(os("mmap(UMEM)"))?;
        let mode = XdpPortMode {
            xdp: if f[9] == 1 {
                XdpMode::Generic
            } else {
                XdpMode::Native
            },
            zero_copy: f[10] != 0,
            multi_buffer: f[11] != 0,
        };
        let mut port = AfXdpPort {
            name: ifname.to_string(),
            ifindex,
            xsk: Some(Xsk {
                fill,
                comp,
                rx,
                tx,
                fd: xsk_fd,
            }),
            umem,
            umem_len,
            rx_frames,
            tx_slots,
            tx_free: (0..tx_slots).rev().collect(),
            tx_lent: None,
            tx_unpublished: 0,
            tx_in_flight: 0,
            tx_max_len: info.mtu as usize + 14,
            mode,
            bind_flags,
            base: PortStats::default(),
            stats: PortStats::default(),
            complete_csum: link::is_veth(ifname),
            busy: None,
            kick: false,
            umem_fd: Some(umem_fd),
            shared: None,
            region: 0,
            shared_why: None,
            rx_base: 0,
            tx_base: (rx_frames as usize * CHUNK) as u64,
            ring_used: 0,
            lent_in: 0,
            moved: 0,
            extra: Vec::new(),
            queue_rx: vec![0],
            next_q: 0,
            epoll: None,
            _link: link_fd,
            _prog: prog_fd,
            map,
        };
        // Busy polling carries on: the socket keeps its options, the
        // device its settings, and we put back what the predecessor found.
        if let Some(b) = f.get(13..20) {
            port.busy = Some(Box::new(busy_poll::BusyState {
                opts: BusyPoll {
                    budget: b[0].min(u16::MAX as u64) as u16,
                    usecs: b[1] as u32,
                    napi_timeout_us: b[2] as u32,
                },
                sockopts: b[3] != 0,
                saved: busy_poll::Saved {
                    napi: (b[4] != 0).then_some((b[5] as u32, b[6])),
                },
                refused: Vec::new(),
            }));
            port.kick = b[3] != 0 && b[4] != 0;
        }
        // The other queues' sockets, unless the interface's queues changed
        // meanwhile (then the port opens anew: a queue would go unread).
        if rx_queues(ifname, ifindex) != 1 + queue_fds.len() {
            return Err(PortError::Os {
                op: "adopt",
                err: io::Error::other("the interface's receive queues changed"),
            });
        }
        for [xfd, ufd] in queue_fds {
            let (fill, comp, rx, tx) = map_rings(&xfd, rx_frames, 2 * TX_DESCS_PER_SLOT)?;
            let len = rx_frames as usize * CHUNK;
            let umem = map_umem(&ufd, len).map_err(os("mmap(UMEM)"))?;
            port.extra.push(RxQueue {
                xsk: Xsk {
                    fill,
                    comp,
                    rx,
                    tx,
                    fd: xfd,
                },
                umem,
                umem_len: len,
                _umem_fd: ufd,
            });
            port.queue_rx.push(0);
        }
        if !port.extra.is_empty() {
            port.epoll = Some(port.epoll_set().map_err(os("epoll(AF_XDP queues)"))?);
        }
        // Completions of the predecessor's last frames (none are in flight:
        // it waited for them) must not free slots twice.
        if let Some(x) = port.xsk.as_mut() {
            let c = &mut x.comp;
            c.local = c.producer().load(Ordering::Acquire);
            c.consumer().store(c.local, Ordering::Release);
        }
        Ok(port)
    }

    /// The state a successor needs to adopt this port, after waiting (up
    /// to 50 ms) for every frame sent to complete; `None` if some did not
    /// or a descriptor cannot be kept open across `exec`.
    fn handover_state(&mut self) -> Option<String> {
        // A port on the worker's shared UMEM is not handed over (its
        // successor opens it anew; docs/io.md "Shared UMEM").
        let umem_fd = self.umem_fd.as_ref()?.as_raw_fd();
        self.tx_lent = None;
        let _ = Port::flush(self);
        let t = std::time::Instant::now();
        while (self.tx_in_flight > 0 || self.tx_unpublished > 0)
            && t.elapsed() < std::time::Duration::from_millis(50)
        {
            let _ = self.kick();
            self.reclaim();
            std::thread::yield_now();
        }
        if self.tx_in_flight > 0 || self.tx_unpublished > 0 {
            return None;
        }
        let x = self.xsk.as_ref()?;
        let fds = [
            x.fd.as_raw_fd(),
            umem_fd,
            self._link.as_raw_fd(),
            self._prog.as_raw_fd(),
            self.map.as_raw_fd(),
        ];
        let queue_fds: Vec<[RawFd; 2]> = self
            .extra
            .iter()
            .map(|q| [q.xsk.fd.as_raw_fd(), q._umem_fd.as_raw_fd()])
            .collect();
        let all = || fds.iter().chain(queue_fds.iter().flatten()).copied();
        if !all().all(|fd| set_cloexec(fd, false)) {
            for fd in all() {
                set_cloexec(fd, true);
            }
            return None;
        }
        // Queues 1..: `+SOCKET/UMEM` each (their rings are as queue 0's
        // receive side; the successor maps them again).
        let queues: String = queue_fds.iter().map(|[x, u]| format!("+{x}/{u}")).collect();
        let m = self.mode;
        let busy = match &self.busy {
            Some(b) => {
                let (has, (defer, timeout)) = match b.saved.napi {
                    Some(n) => (1, n),
                    None => (0, (0, 0)),
                };
                format!(
                    ",{},{},{},{},{has},{defer},{timeout}",
                    b.opts.budget, b.opts.usecs, b.opts.napi_timeout_us, b.sockopts as u8,
                )
            }
            None => String::new(),
        };
        Some(format!(
            "{HANDOVER_TAG}{},{},{},{},{},{},{},{},{},{},{},{},{}{busy}{queues}",
            fds[0],
            fds[1],
            fds[2],
            fds[3],
            fds[4],
            self.ifindex,
            self.rx_frames,
            self.tx_slots,
            self.bind_flags,
            (m.xdp == XdpMode::Generic) as u8,
            m.zero_copy as u8,
            m.multi_buffer as u8,
            self.umem_len
        ))
    }

    /// Busy polling: `None` if off, else what the kernel refused (empty:
    /// everything took).
    pub fn busy_poll_refused(&self) -> Option<&[String]> {
        self.busy.as_ref().map(|b| b.refused.as_slice())
    }

    /// The socket's NAPI id (0 until a frame came through a NAPI poll
    /// that has one; see [`busy_poll`]).
    pub fn napi_id(&self) -> u32 {
        self.xsk.as_ref().map_or(0, |x| busy_poll::napi_id(&x.fd))
    }

    /// Whether `recv` busy polls now (on, and the socket has a NAPI id).
    pub fn busy_polling(&self) -> bool {
        self.kick
    }

    /// Receive queues the port has a socket on.
    pub fn queues(&self) -> usize {
        1 + self.extra.len()
    }

    /// Frames received on each queue (queue 0 first) since the port opened.
    pub fn queue_rx_frames(&self) -> &[u64] {
        &self.queue_rx
    }

    /// Receive chunks (per queue) and transmit slots of the rings.
    pub fn rings(&self) -> (u32, u32) {
        (self.rx_frames, self.tx_slots)
    }

    /// Interface index the socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Where the program runs and how the socket moves frames.
    pub fn mode(&self) -> XdpPortMode {
        self.mode
    }

    /// Hand every receive chunk to the kernel (a fresh socket).
    fn fill_all(&mut self) {
        let Some(x) = self.xsk.as_mut() else { return };
        let f = &mut x.fill;
        for i in 0..self.rx_frames {
            // SAFETY: the fill ring has rx_frames entries, all ours now.
            unsafe { *f.at(f.local.wrapping_add(i)) = self.rx_base + i as u64 * CHUNK as u64 };
        }
        f.local = f.local.wrapping_add(self.rx_frames);
        f.producer().store(f.local, Ordering::Release);
    }

    /// A fresh socket on the shared UMEM: its region's chunks that are not
    /// on another port's transmit ring into the fill ring (worker thread).
    fn fill_home(&mut self) {
        let (Some(x), Some(u)) = (self.xsk.as_mut(), self.shared.as_ref()) else {
            return;
        };
        let f = &mut x.fill;
        let mut k = f.local;
        u.home_chunks(self.region, |c| {
            // SAFETY: at most rx_frames chunks, the fill ring's size.
            unsafe { *f.at(k) = c };
            k = k.wrapping_add(1);
        });
        f.local = k;
        f.producer().store(f.local, Ordering::Release);
    }

    /// Chunks that came back from other ports' transmit rings (or from the
    /// worker's batch) into the fill ring: one producer update.
    #[inline]
    fn refill_shared(&mut self) {
        let (Some(x), Some(u)) = (self.xsk.as_mut(), self.shared.as_ref()) else {
            return;
        };
        let f = &mut x.fill;
        let mut k = f.local;
        let n = u.take_back(self.region, |c| {
            // SAFETY: the region has rx_frames chunks, the fill ring's
            // size, and these are not in it (module docs of `shared`).
            unsafe { *f.at(k) = c };
            k = k.wrapping_add(1);
        });
        if n > 0 {
            f.local = k;
            f.producer().store(k, Ordering::Release);
            if f.needs_wakeup() {
                // SAFETY: the documented fill-ring wake-up (see `drain`).
                unsafe {
                    libc::recvfrom(
                        x.fd.as_raw_fd(),
                        ptr::null_mut(),
                        0,
                        libc::MSG_DONTWAIT,
                        ptr::null_mut(),
                        ptr::null_mut(),
                    )
                };
            }
        }
    }

    /// Whether the port is on its worker's shared UMEM; `Err` with the
    /// reason when one was offered and it could not take it.
    pub fn shared_umem_status(&self) -> Result<bool, &str> {
        match (&self.shared, &self.shared_why) {
            (Some(_), _) => Ok(true),
            (None, Some(w)) => Err(w),
            (None, None) => Ok(false),
        }
    }

    /// Receive chunks of the port's region not with its socket (in its
    /// fill or receive ring) nor waiting to go back to it: held by the
    /// worker's batch or on another port's transmit ring. 0 once traffic
    /// stops (a leak would stay); 0 on its own UMEM.
    pub fn umem_chunks_away(&self) -> u32 {
        let (Some(x), Some(u)) = (self.xsk.as_ref(), self.shared.as_ref()) else {
            return 0;
        };
        let in_fill = x
            .fill
            .local
            .wrapping_sub(x.fill.consumer().load(Ordering::Acquire));
        let in_rx =
            x.rx.producer()
                .load(Ordering::Acquire)
                .wrapping_sub(x.rx.local);
        self.rx_frames
            .saturating_sub(in_fill + in_rx + u.back_len(self.region))
    }

    /// Frames sent by moving a descriptor (shared UMEM), since it opened.
    pub fn umem_moved(&self) -> u64 {
        self.moved
    }

    /// Address in the UMEM of transmit slot `s`.
    fn tx_addr(&self, s: u32) -> u64 {
        self.tx_base + (s as usize * TX_SLOT) as u64
    }

    /// Descriptors the transmit ring (and completion ring) holds.
    fn tx_ring_len(&self) -> u32 {
        self.tx_slots * TX_DESCS_PER_SLOT
    }

    /// Take finished transmit slots back from the completion ring.
    fn reclaim(&mut self) {
        let Some(x) = self.xsk.as_mut() else { return };
        let c = &mut x.comp;
        let prod = c.producer().load(Ordering::Acquire);
        let base = self.tx_base;
        while c.local != prod {
            // SAFETY: entries between our consumer and the producer are
            // written by the kernel and ours to read.
            let addr = unsafe { *c.at(c.local) };
            c.local = c.local.wrapping_add(1);
            self.ring_used = self.ring_used.saturating_sub(1);
            if let Some(u) = self.shared.as_ref() {
                // A chunk another port received, moved here: to its owner.
                if u.is_rx_chunk(addr) {
                    if u.complete(addr, self.region) {
                        self.lent_in = self.lent_in.saturating_sub(1);
                    }
                    continue;
                }
            }
            // Each chunk of a slot completes; the slot is free with its
            // first (all of one frame's descriptors complete together).
            if addr >= base && (addr - base).is_multiple_of(TX_SLOT as u64) {
                let s = ((addr - base) / TX_SLOT as u64) as u32;
                if s < self.tx_slots {
                    self.tx_free.push(s);
                    self.tx_in_flight = self.tx_in_flight.saturating_sub(1);
                }
            }
        }
        c.consumer().store(c.local, Ordering::Release);
    }

    /// `sendto` until the kernel has taken every published descriptor, it
    /// stops making progress, or it does not ask for a wake-up.
    fn kick(&mut self) -> io::Result<()> {
        // Copy mode sends at most 32 frames per call.
        let Some(x) = self.xsk.as_ref() else {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        };
        for _ in 0..64 {
            let t = &x.tx;
            if t.consumer().load(Ordering::Acquire) == t.local || !t.needs_wakeup() {
                return Ok(());
            }
            let before = t.consumer().load(Ordering::Relaxed);
            // SAFETY: sendto with no buffer is how an XSK is told to send.
            let r = unsafe {
                libc::sendto(
                    x.fd.as_raw_fd(),
                    ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    ptr::null(),
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => {
                        if x.tx.consumer().load(Ordering::Acquire) == before {
                            return Ok(()); // the device is busy: next flush
                        }
                    }
                    _ => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Replace the socket by a fresh one on the same UMEM: every transmit
    /// slot free, every receive chunk in the fill ring. How frames the
    /// kernel has not taken are withdrawn (published descriptors cannot be).
    fn reset(&mut self) -> Result<(), PortError> {
        let st = self.xsk.as_ref().map(xsk_stats).unwrap_or_default();
        self.base.rx_ring_drops += st.rx_ring_drops;
        self.base.tx_errors += st.tx_errors;
        let opts_rx = self.rx_frames;
        // The old socket goes first: a queue takes one socket (and its
        // ring mappings hold it open).
        if let (Some(u), Some(x)) = (self.shared.as_ref(), self.xsk.as_ref()) {
            u.leave(x.fd.as_raw_fd());
        }
        self.xsk = None;
        // Chunks of other ports that were on its transmit ring go home.
        if let Some(u) = self.shared.as_ref().filter(|_| self.moved > 0) {
            u.recall(self.region);
        }
        let anchor = self.shared.as_ref().and_then(|u| u.anchor(None));
        let flags = match (&self.shared, anchor) {
            (Some(u), Some(_)) => u.flags(),
            _ => self.bind_flags,
        };
        let (xsk, flags, _, _) = new_xsk(
            self.umem,
            self.umem_len,
            opts_rx,
            self.tx_slots,
            self.ifindex,
            0,
            &self.map,
            Some(flags),
            anchor,
        )?;
        if let Some(u) = self.shared.as_ref() {
            if anchor.is_none() {
                u.set_flags(flags);
            }
            u.join(&xsk.fd);
        }
        if let Some(ep) = &self.epoll {
            let fd = xsk.fd.as_raw_fd();
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: epoll_ctl with a live event and descriptors we hold
            // (the old socket left the set when it closed).
            unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        }
        // A fresh socket: busy-poll options again, and a NAPI id to learn.
        if let Some(b) = self.busy.as_mut() {
            b.sockopts = busy_poll::set_sockopts(&xsk.fd, &b.opts).is_empty();
        }
        self.kick = false;
        self.xsk = Some(xsk);
        self.bind_flags = flags;
        self.tx_free = (0..self.tx_slots).rev().collect();
        self.tx_lent = None;
        self.tx_unpublished = 0;
        self.tx_in_flight = 0;
        self.ring_used = 0;
        self.lent_in = 0;
        if self.shared.is_some() {
            self.fill_home();
        } else {
            self.fill_all();
        }
        Ok(())
    }

    /// Frames written to the transmit ring the kernel has not taken.
    fn tx_untaken(&self) -> u32 {
        match &self.xsk {
            Some(x) => {
                x.tx.local
                    .wrapping_sub(x.tx.consumer().load(Ordering::Acquire))
            }
            None => 0,
        }
    }

    fn sock_stats(&self) -> PortStats {
        let mut s = match &self.xsk {
            Some(x) => xsk_stats(x),
            None => PortStats::default(),
        };
        for q in &self.extra {
            let e = xsk_stats(&q.xsk);
            s.rx_ring_drops += e.rx_ring_drops;
            s.tx_errors += e.tx_errors;
        }
        s
    }
}

/// The kernel's counters of one socket.
fn xsk_stats(x: &Xsk) -> PortStats {
    match getsockopt::<XdpStatistics>(&x.fd, XDP_STATISTICS) {
        Ok(s) => PortStats {
            rx_ring_drops: s.rx_dropped + s.rx_ring_full,
            rx_truncated: 0,
            tx_ring_full: 0,
            tx_errors: s.tx_invalid_descs,
            ..PortStats::default()
        },
        Err(_) => PortStats::default(),
    }
}

/// Load the steering program and attach it to `ifindex`: driver mode, then
/// generic (unless `want` names one); a stale program of ours attached by
/// netlink is replaced, anyone else's is left alone (error).
fn attach_program(
    map: &OwnedFd,
    ifindex: u32,
    want: Option<XdpMode>,
) -> Result<(OwnedFd, OwnedFd, XdpMode), PortError> {
    let modes: &[XdpMode] = match want {
        Some(XdpMode::Native) => &[XdpMode::Native],
        Some(XdpMode::Generic) => &[XdpMode::Generic],
        None => &[XdpMode::Native, XdpMode::Generic],
    };
    let mut last = None;
    let mut replaced = false;
    for &mode in modes {
        for frags in [true, false] {
            let prog = match prog::load_program(map, frags) {
                Ok(p) => p,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            match prog::link_attach(&prog, ifindex, mode) {
                Ok(l) => return Ok((l, prog, mode)),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST)) => {
                    // Something is attached already. Ours, the netlink
                    // way (a crashed older run)? Replace it and retry once.
                    if !replaced {
                        if let Some(a) = prog::attached(ifindex).ok().flatten() {
                            if a.name == prog::PROG_NAME {
                                let flags = match a.how {
                                    2 => prog::XDP_FLAGS_SKB_MODE,
                                    _ => prog::XDP_FLAGS_DRV_MODE,
                                };
                                if prog::netlink_set(ifindex, None, flags).is_ok() {
                                    replaced = true;
                                    if let Ok(l) = prog::link_attach(&prog, ifindex, mode) {
                                        return Ok((l, prog, mode));
                                    }
                                }
                            } else {
                                return Err(PortError::Os {
                                    op: "BPF_LINK_CREATE",
                                    err: io::Error::new(
                                        io::ErrorKind::AddrInUse,
                                        format!(
                                            "interface has another XDP program ({} id {})",
                                            if a.name.is_empty() { "?" } else { &a.name },
                                            a.prog_id
                                        ),
                                    ),
                                });
                            }
                        }
                    }
                    last = Some(e);
                }
                Err(e) => last = Some(e),
            }
        }
    }
    Err(PortError::Os {
        op: "attach XDP program",
        err: last.unwrap_or_else(|| io::Error::other("no mode")),
    })
}

/// A socket on `umem` bound to `queue` of `ifindex`, in `map`. `flags`:
/// the bind flags to use (a reset), else zero-copy is tried before copy,
/// multi-buffer before single.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn new_xsk(
    umem: *mut u8,
    umem_len: usize,
    rx_frames: u32,
    tx_slots: u32,
    ifindex: u32,
    queue: u32,
    map: &OwnedFd,
    flags: Option<u16>,
    share: Option<RawFd>,
) -> Result<(Xsk, u16, bool, bool), PortError> {
    let tries: Vec<u16> = match flags {
        // Sharing a UMEM: the mode is the registering socket's (`flags`).
        _ if share.is_some() => vec![flags.unwrap_or(0)],
        Some(f) => vec![f],
        None => vec![
            XDP_ZEROCOPY | XDP_USE_SG,
            XDP_COPY | XDP_USE_SG,
            XDP_ZEROCOPY,
            XDP_COPY,
        ],
    };
    let tx_ring = tx_slots * TX_DESCS_PER_SLOT;
    let mut last = None;
    let mut busy_waits = 0;
    'modes: for f in tries {
        'retry: loop {
            // SAFETY: plain socket(2); the result is checked.
            let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
            if raw < 0 {
                return Err(PortError::Os {
                    op: "socket(AF_XDP)",
                    err: io::Error::last_os_error(),
                });
            }
            // SAFETY: a fresh descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let reg = UmemReg {
                addr: umem as u64,
                len: umem_len as u64,
                chunk_size: CHUNK as u32,
                headroom: 0,
                flags: 0,
                tx_metadata_len: 0,
            };
            if share.is_none() {
                setsockopt(&fd, XDP_UMEM_REG, &reg).map_err(os("XDP_UMEM_REG"))?;
            }
            setsockopt(&fd, XDP_UMEM_FILL_RING, &rx_frames).map_err(os("XDP_UMEM_FILL_RING"))?;
            setsockopt(&fd, XDP_UMEM_COMPLETION_RING, &tx_ring)
                .map_err(os("XDP_UMEM_COMPLETION_RING"))?;
            setsockopt(&fd, XDP_RX_RING, &rx_frames).map_err(os("XDP_RX_RING"))?;
            setsockopt(&fd, XDP_TX_RING, &tx_ring).map_err(os("XDP_TX_RING"))?;
            // Copy mode sends at most this many frames per `sendto` (32 by
            // default): a whole batch per kick where the kernel (6.17+) lets
            // us; older kernels refuse the option and `kick` loops instead.
            let _ = setsockopt(&fd, XDP_MAX_TX_SKB_BUDGET, &(crate::BATCH_MAX as u32));
            let (fill, comp, rx, tx) = map_rings(&fd, rx_frames, tx_ring)?;
            // A shared socket names no mode (the kernel refuses any): it
            // takes the registering socket's.
            let sa = SockaddrXdp {
                family: AF_XDP as u16,
                flags: match share {
                    Some(_) => XDP_SHARED_UMEM,
                    None => f | XDP_USE_NEED_WAKEUP,
                },
                ifindex,
                queue_id: queue,
                shared_umem_fd: share.unwrap_or(0) as u32,
            };
            // SAFETY: a valid sockaddr_xdp of the size passed.
            let r = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    &sa as *const SockaddrXdp as *const libc::sockaddr,
                    size_of::<SockaddrXdp>() as libc::socklen_t,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                // After a reset the old socket's hold on the queue is released
                // by deferred kernel work: wait for it (a link event, rare).
                if (flags.is_some() || share.is_some())
                    && e.raw_os_error() == Some(libc::EBUSY)
                    && busy_waits < 200
                {
                    busy_waits += 1;
                    drop((fill, comp, rx, tx, fd));
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue 'retry;
                }
                last = Some(e);
                continue 'modes;
            }
            prog::map_set(map, queue, fd.as_raw_fd()).map_err(os("XSKMAP update"))?;
            let x = Xsk {
                fill,
                comp,
                rx,
                tx,
                fd,
            };
            return Ok((x, f, f & XDP_ZEROCOPY != 0, f & XDP_USE_SG != 0));
        }
    }
    Err(PortError::Os {
        op: "bind(AF_XDP)",
        err: last.unwrap_or_else(|| io::Error::other("no bind mode")),
    })
}

/// The four rings of XSK socket `fd`, already sized (`rx_frames` fill and
/// receive entries, `tx_ring` completion and transmit entries).
#[allow(clippy::type_complexity)]
fn map_rings(
    fd: &OwnedFd,
    rx_frames: u32,
    tx_ring: u32,
) -> Result<(Ring<u64>, Ring<u64>, Ring<XdpDesc>, Ring<XdpDesc>), PortError> {
    let off: MmapOffsets = getsockopt(fd, XDP_MMAP_OFFSETS).map_err(os("XDP_MMAP_OFFSETS"))?;
    let raw = fd.as_raw_fd();
    // SAFETY: the rings were sized on this socket; offsets from the kernel.
    let rings = unsafe {
        (
            Ring::<u64>::map(raw, XDP_UMEM_PGOFF_FILL_RING, &off.fr, rx_frames, true),
            Ring::<u64>::map(raw, XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr, tx_ring, false),
            Ring::<XdpDesc>::map(raw, XDP_PGOFF_RX_RING, &off.rx, rx_frames, false),
            Ring::<XdpDesc>::map(raw, XDP_PGOFF_TX_RING, &off.tx, tx_ring, true),
        )
    };
    match rings {
        (Ok(a), Ok(b), Ok(c), Ok(d)) => Ok((a, b, c, d)),
        _ => Err(PortError::Os {
            op: "mmap(XSK rings)",
            err: io::Error::last_os_error(),
        }),
    }
}

/// A memfd of `len` bytes for a UMEM.
fn umem_memfd(len: usize) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"lanyard-umem".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on a descriptor we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Map a UMEM memfd (shared: the kernel pins these pages at registration,
/// and a successor maps the same ones).
fn map_umem(fd: &OwnedFd, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a shared mapping of a memfd at least `len` long; checked.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as *mut u8)
}

/// Set or clear close-on-exec on `fd`.
fn set_cloexec(fd: RawFd, on: bool) -> bool {
    let flags = if on { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: fcntl on a descriptor the caller holds.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags) == 0 }
}

/// Close the descriptors of a hand-over state nobody adopted; false if
/// `state` is not an AF_XDP state.
pub fn close_handover_state(state: &str) -> bool {
    let Some(rest) = state.strip_prefix(HANDOVER_TAG) else {
        return false;
    };
    let mut parts = rest.split('+');
    let head = parts.next().unwrap_or_default().split(',').take(5);
    let queues = parts.flat_map(|p| p.split('/'));
    for fd in head.chain(queues).filter_map(|f| f.parse::<RawFd>().ok()) {
        // SAFETY: the predecessor left these open for us; nobody adopted them.
        unsafe { libc::close(fd) };
    }
    true
}

/// How a hand-over state of an AF_XDP port starts.
pub const HANDOVER_TAG: &str = "xdp,";

impl AfXdpPort {
    /// Queue 0 on the shared UMEM: chunks back from elsewhere into the
    /// fill ring, completions home, then one-chunk frames into `batch` as
    /// held chunks (no copy); a multi-buffer frame is copied as before.
    fn recv_shared(&mut self, batch: &mut FrameBatch, port_id: u16) -> usize {
        self.refill_shared();
        if self.ring_used > 0 {
            self.reclaim();
        }
        let (Some(x), Some(u)) = (self.xsk.as_mut(), self.shared.as_ref()) else {
            return 0;
        };
        let prod = x.rx.producer().load(Ordering::Acquire);
        let mut cons = x.rx.local;
        let mut n = 0;
        let mut bad = 0;
        let fill0 = x.fill.local;
        while cons != prod && batch.space() > 0 {
            // SAFETY: entries between our consumer and the producer are
            // the kernel's writes, ours to read.
            let d = unsafe { *x.rx.at(cons) };
            if d.options & XDP_PKT_CONTD != 0 {
                break; // a multi-buffer frame: the copy path below
            }
            cons = cons.wrapping_add(1);
            let chunk = d.addr & !(CHUNK as u64 - 1);
            if !u.is_rx_chunk(d.addr) || (d.addr - chunk) as usize + d.len as usize > CHUNK {
                // Not a chunk of ours: back to the fill ring, counted.
                // SAFETY: the fill ring has room for every chunk we hold.
                unsafe { *x.fill.at(x.fill.local) = chunk };
                x.fill.local = x.fill.local.wrapping_add(1);
                bad += 1;
                continue;
            }
            batch.commit_umem(u, d.addr, d.len as usize, port_id);
            n += 1;
        }
        if cons != x.rx.local {
            x.rx.local = cons;
            x.rx.consumer().store(cons, Ordering::Release);
        }
        if x.fill.local != fill0 {
            x.fill.producer().store(x.fill.local, Ordering::Release);
        }
        self.stats.rx_truncated += bad;
        if cons != prod && !batch.is_full() {
            n += drain(
                x,
                self.umem,
                self.umem_len,
                batch,
                port_id,
                &mut self.stats.rx_truncated,
            );
        }
        n
    }

    /// Frames from the rings into `batch` (see [`Port::recv`]).
    fn recv_rings(&mut self, batch: &mut FrameBatch, port_id: u16) -> Result<usize, PortError> {
        let Some(x) = self.xsk.as_mut() else {
            return Err(PortError::Os {
                op: "AF_XDP",
                err: io::Error::other("socket lost (a reset failed)"),
            });
        };
        if self.kick {
            // Busy polling: this thread runs the device's NAPI poll, which
            // fills the receive ring (one system call per receive call).
            busy_poll::kick(x.fd.as_raw_fd());
        }
        if self.shared.is_some() {
            // One queue (a port with more is never on the shared UMEM).
            let got = self.recv_shared(batch, port_id);
            self.queue_rx[0] += got as u64;
            return Ok(got);
        }
        // Every queue's socket in turn, a different one first each call,
        // so that a busy queue does not keep the others' frames waiting.
        let nq = 1 + self.extra.len();
        let first = self.next_q;
        self.next_q = if first + 1 >= nq { 0 } else { first + 1 };
        let mut n = 0;
        for k in 0..nq {
            if batch.is_full() {
                break;
            }
            let q = if first + k >= nq {
                first + k - nq
            } else {
                first + k
            };
            let got = if q == 0 {
                drain(
                    x,
                    self.umem,
                    self.umem_len,
                    batch,
                    port_id,
                    &mut self.stats.rx_truncated,
                )
            } else {
                let e = &mut self.extra[q - 1];
                drain(
                    &mut e.xsk,
                    e.umem,
                    e.umem_len,
                    batch,
                    port_id,
                    &mut self.stats.rx_truncated,
                )
            };
            self.queue_rx[q] += got as u64;
            n += got;
        }
        Ok(n)
    }
}

/// Frames of one socket's receive ring into `batch` (until it is full),
/// their chunks straight back to the fill ring: one consumer and one
/// producer update, no system call unless the fill ring asks for a wake-up.
fn drain(
    x: &mut Xsk,
    umem: *mut u8,
    umem_len: usize,
    batch: &mut FrameBatch,
    port_id: u16,
    truncated: &mut u64,
) -> usize {
    let prod = x.rx.producer().load(Ordering::Acquire);
    let mut n = 0;
    let mut cons = x.rx.local;
    let mut fill = x.fill.local;
    while cons != prod {
        let Some(slot) = batch.slot() else { break };
        // One frame: a descriptor, or a chain ending without CONTD.
        let mut len = 0usize;
        let mut i = cons;
        let mut ok = true;
        let complete = loop {
            if i == prod {
                break false; // chain not complete yet (never seen in practice)
            }
            // SAFETY: entries between our consumer and the producer are
            // the kernel's writes, ours to read.
            let d = unsafe { *x.rx.at(i) };
            i = i.wrapping_add(1);
            let a = d.addr as usize;
            let l = d.len as usize;
            if a + l > umem_len || len + l > slot.len() {
                ok = false;
            } else if ok {
                // SAFETY: [a, a + l) lies inside the UMEM (checked), a
                // chunk the kernel handed us; the slot has room (checked).
                unsafe { ptr::copy_nonoverlapping(umem.add(a), slot.as_mut_ptr().add(len), l) };
                len += l;
            }
            // The chunk goes straight back to the kernel.
            // SAFETY: the fill ring has room for every chunk we hold.
            unsafe { *x.fill.at(fill) = d.addr & !(CHUNK as u64 - 1) };
            fill = fill.wrapping_add(1);
            if d.options & XDP_PKT_CONTD == 0 {
                break true;
            }
        };
        if !complete {
            // Leave the partial chain (and undo its fill entries) for next time.
            fill = fill.wrapping_sub(i.wrapping_sub(cons));
            break;
        }
        cons = i;
        if ok {
            batch.commit(len, port_id);
            n += 1;
        } else {
            *truncated += 1;
        }
    }
    if cons != x.rx.local {
        x.rx.local = cons;
        x.rx.consumer().store(cons, Ordering::Release);
        x.fill.local = fill;
        x.fill.producer().store(fill, Ordering::Release);
        if x.fill.needs_wakeup() {
            // SAFETY: a non-blocking zero-length receive: the documented
            // wake-up for the fill ring.
            unsafe {
                libc::recvfrom(
                    x.fd.as_raw_fd(),
                    ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            };
        }
    }
    n
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut FrameBatch, port_id: u16) -> Result<usize, PortError> {
        let from = batch.len();
        let r = self.recv_rings(batch, port_id);
        if self.complete_csum {
            self.stats.rx_csum_completed += crate::complete_checksums(batch, from);
        }
        r
    }

    fn tx_slot(&mut self) -> Option<&mut [u8]> {
        self.tx_lent = None;
        self.xsk.as_ref()?;
        if self.tx_free.is_empty() || self.ring_used + TX_SLOT_CHUNKS as u32 > self.tx_ring_len() {
            self.reclaim();
        }
        let Some(&s) = self.tx_free.last() else {
            self.stats.tx_ring_full += 1;
            return None;
        };
        if self.ring_used + TX_SLOT_CHUNKS as u32 > self.tx_ring_len() {
            // Moved chunks fill the ring (shared UMEM).
            self.stats.tx_ring_full += 1;
            return None;
        }
        self.tx_lent = Some(s);
        let a = self.tx_addr(s) as usize;
        // SAFETY: slot `s` is free (not in the kernel's hands), TX_SLOT
        // bytes inside the UMEM; the borrow is tied to `&mut self`.
        Some(unsafe { std::slice::from_raw_parts_mut(self.umem.add(a), TX_SLOT) })
    }

    fn tx_commit(&mut self, len: usize) {
        let Some(s) = self.tx_lent.take() else {
            debug_assert!(false, "tx_commit without a lent tx_slot");
            return;
        };
        let a = self.tx_addr(s);
        // SAFETY: bytes 12..14 of the lent slot, inside the UMEM.
        let ctag = unsafe {
            let p = self.umem.add(a as usize);
            *p.add(12) == 0x81 && *p.add(13) == 0
        };
        let chunk_max = if self.mode.multi_buffer {
            TX_SLOT
        } else {
            CHUNK
        };
        let max = (self.tx_max_len + if ctag { 4 } else { 0 }).min(chunk_max);
        if !(14..=max).contains(&len) {
            self.stats.tx_errors += 1;
            return;
        }
        let Some(x) = self.xsk.as_mut() else { return };
        self.tx_free.pop();
        let t = &mut x.tx;
        let mut off = 0;
        while off < len {
            let l = (len - off).min(CHUNK);
            let last = off + l == len;
            // SAFETY: the transmit ring holds TX_DESCS_PER_SLOT descriptors
            // per slot, at least the chunks of one, so entry `local` is free.
            unsafe {
                *t.at(t.local) = XdpDesc {
                    addr: a + off as u64,
                    len: l as u32,
                    options: if last { 0 } else { XDP_PKT_CONTD },
                }
            };
            t.local = t.local.wrapping_add(1);
            off += l;
            self.ring_used += 1;
        }
        self.tx_unpublished += 1;
        self.tx_in_flight += 1;
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if self.tx_unpublished == 0 && self.tx_untaken() == 0 {
            if self.ring_used > 0 {
                self.reclaim();
            }
            return Ok(());
        }
        if let Some(x) = &self.xsk {
            x.tx.producer().store(x.tx.local, Ordering::Release);
        }
        self.tx_unpublished = 0;
        let res = self.kick();
        self.reclaim();
        match res {
            Ok(()) => Ok(()),
            Err(e) => match e.raw_os_error() {
                // Copy mode: the driver dropped a frame (no carrier, queue
                // stopped). It is gone, not queued; the caller looks at
                // the link.
                Some(libc::EBUSY) | Some(libc::ENOBUFS) => {
                    Err(PortError::Refused(self.name.clone()))
                }
                Some(libc::ENETDOWN) | Some(libc::ENXIO) | Some(libc::ENODEV) => {
                    Err(link::map_err(&self.name, "sendto(AF_XDP)", e))
                }
                _ => Err(PortError::Os {
                    op: "sendto(AF_XDP)",
                    err: e,
                }),
            },
        }
    }

    fn umem(&self) -> Option<&Arc<SharedUmem>> {
        self.shared.as_ref()
    }

    fn tx_umem(&mut self, addr: u64, len: usize) -> bool {
        let Some(u) = self.shared.clone() else {
            return false;
        };
        let chunk = addr & !(CHUNK as u64 - 1);
        if !u.is_rx_chunk(addr) || len < 14 || (addr - chunk) as usize + len > CHUNK {
            return false;
        }
        if self.ring_used >= self.tx_ring_len() {
            self.reclaim();
            if self.ring_used >= self.tx_ring_len() {
                self.stats.tx_ring_full += 1;
                return false;
            }
        }
        // As `tx_commit`: no longer than the MTU allows (plus a C-tag).
        // SAFETY: bytes 12..14 of the frame, inside its chunk (checked).
        let ctag = unsafe {
            let p = self.umem.add(addr as usize);
            *p.add(12) == 0x81 && *p.add(13) == 0
        };
        if len > self.tx_max_len + if ctag { 4 } else { 0 } {
            self.stats.tx_errors += 1;
            return false;
        }
        let Some(x) = self.xsk.as_mut() else {
            return false;
        };
        let t = &mut x.tx;
        // SAFETY: `ring_used` < the ring's size, so entry `local` is free.
        unsafe {
            *t.at(t.local) = XdpDesc {
                addr,
                len: len as u32,
                options: 0,
            }
        };
        t.local = t.local.wrapping_add(1);
        u.lend(chunk, self.region);
        self.ring_used += 1;
        self.lent_in += 1;
        self.tx_unpublished += 1;
        self.moved += 1;
        true
    }

    fn rx_fd(&self) -> Option<RawFd> {
        if let Some(ep) = &self.epoll {
            return self.xsk.as_ref().map(|_| ep.as_raw_fd());
        }
        self.xsk.as_ref().map(|x| x.fd.as_raw_fd())
    }

    /// The kernel wakes the socket at every flush of its receive ring
    /// (once per driver poll, not per block).
    fn rx_ready_per_frame(&self) -> bool {
        true
    }

    fn busy_poll_spin(&self) -> Option<std::time::Duration> {
        // Only a masked device makes a sleeping worker's frames wait.
        let b = self.busy.as_ref()?;
        b.saved.napi.map(|_| b.opts.idle_spin())
    }

    fn handover(&mut self) -> Option<String> {
        self.handover_state()
    }

    fn discard_tx(&mut self) {
        self.tx_lent = None;
        if self.tx_unpublished > 0 || self.tx_untaken() > 0 {
            // Published descriptors cannot be withdrawn: a fresh socket.
            if self.reset().is_err() {
                self.stats.tx_errors += 1;
            }
        }
    }

    fn take_tx(&mut self, out: &mut dyn FnMut(&[u8])) {
        let Some(x) = self.xsk.as_ref() else { return };
        let t = &x.tx;
        let mut i = t.consumer().load(Ordering::Acquire);
        let mut start: Option<(u64, usize)> = None;
        while i != t.local {
            // SAFETY: entries between the kernel's consumer and our
            // producer were written by us and not taken.
            let d = unsafe { *t.at(i) };
            i = i.wrapping_add(1);
            let (a, l) = match start {
                Some((a, l)) => (a, l + d.len as usize),
                None => (d.addr, d.len as usize),
            };
            if d.options & XDP_PKT_CONTD != 0 {
                start = Some((a, l));
                continue;
            }
            start = None;
            if a as usize + l <= self.umem_len {
                // SAFETY: inside the UMEM (checked), a slot we wrote.
                out(unsafe { std::slice::from_raw_parts(self.umem.add(a as usize), l) });
            }
        }
        self.discard_tx();
    }

    fn set_mtu(&mut self, mtu: u32) {
        self.tx_max_len = mtu as usize + 14;
    }

    fn stats(&mut self) -> PortStats {
        // Completions of moved chunks go home, and home chunks into the
        // fill ring, even while the port is idle (its ring parked).
        if self.ring_used > 0 {
            self.reclaim();
        }
        self.refill_shared();
        // A socket that had no NAPI id at bind and gets one later (a kernel
        // that marks copy-mode sockets on receive) busy polls from then on.
        if !self.kick && self.busy.as_ref().is_some_and(|b| b.sockopts) && self.napi_id() != 0 {
            self.kick = true;
        }
        let s = self.sock_stats();
        PortStats {
            rx_ring_drops: self.base.rx_ring_drops + s.rx_ring_drops,
            rx_truncated: self.stats.rx_truncated,
            tx_ring_full: self.stats.tx_ring_full,
            tx_errors: self.base.tx_errors + self.stats.tx_errors + s.tx_errors,
            rx_csum_completed: self.stats.rx_csum_completed,
            umem_moved: self.moved,
            umem_away: self.umem_chunks_away() as u64,
        }
    }
}

impl Drop for AfXdpPort {
    fn drop(&mut self) {
        // The socket and its rings are dropped with `xsk` (fields drop
        // after this); the UMEM must outlive the socket's registration,
        // which the kernel holds by page references, so unmapping here is
        // safe either way.
        if let Some(u) = self.shared.take() {
            // The pool keeps the mapping; chunks of other ports on this
            // socket's transmit ring go home once it is closed.
            if let Some(x) = self.xsk.take() {
                u.leave(x.fd.as_raw_fd());
            }
            if self.moved > 0 {
                u.recall(self.region);
            }
        } else {
            // SAFETY: the mapping made in `open`; nothing borrows it past `self`.
            unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
        }
        if let Some(b) = &self.busy {
            busy_poll::restore(&self.name, self.ifindex, &b.saved);
        }
    }
}
