//! AF_PACKET port: one `SOCK_RAW`/`ETH_P_ALL` socket per interface with a
//! receive ring and a transmit ring, both in one `mmap`: receive ring first,
//! then transmit. The socket's TPACKET version ([`RxRing`]) applies to both
//! rings: TPACKET_V3 (block-based receive, the default) or TPACKET_V2
//! (frame-based receive: each frame is handed over on its own, so `poll`
//! wakes per frame). Both transmit rings are frame based; only the slot
//! header layout differs.
//!
//! See `docs/io.md` for ring sizing and the latency/VLAN notes.

mod dual;
mod sys;

pub use dual::{is_dual_state, AfPacketDualPort, FAST_RING_FRAMES};

use crate::link;
use crate::{FrameBatch, Port, PortError, PortStats, MAX_FRAME_LEN};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use sys::*;

/// Which TPACKET version the socket's rings use. `PACKET_VERSION` is per
/// socket, so this selects the transmit ring's slot layout too (handled
/// inside the port; the transmit behaviour is the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxRing {
    /// TPACKET_V3: frames packed into blocks, a block handed to user space
    /// when full or when `rx_retire_blk_tov_ms` expires (≥ 1 ms of latency
    /// at low rates). Sized by `rx_block_size` × `rx_blocks`.
    #[default]
    V3,
    /// TPACKET_V2: fixed frame slots, each handed to user space as soon as
    /// the kernel has written it (per-frame `poll` wake-up). Sized by
    /// `rx_frame_size` × `rx_frames`.
    V2,
}

/// Options for [`AfPacketPort::open`]. `Default` gives a full-duplex,
/// promiscuous TPACKET_V3 port with 8 MiB of receive ring and 8 MiB of
/// transmit ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfPacketOptions {
    /// Set up the receive ring and receive frames (ETH_P_ALL).
    pub rx: bool,
    /// Set up the transmit ring.
    pub tx: bool,
    /// Ring version (both rings): V3 (default) or V2 (per-frame receive).
    pub rx_ring: RxRing,
    /// V3 receive ring block size in bytes: a multiple of the page size and
    /// at least [`AfPacketOptions::MIN_RX_BLOCK_SIZE`] so a jumbo frame fits.
    pub rx_block_size: usize,
    /// Number of V3 receive ring blocks.
    pub rx_blocks: usize,
    /// V2 receive slot size in bytes: a multiple of 16, at least
    /// [`AfPacketOptions::MIN_RX_FRAME_SIZE`]. The kernel puts the frame
    /// 66 bytes into the slot, so a slot holds frames of up to
    /// `rx_frame_size - 66` bytes; longer ones are truncated by the kernel
    /// and counted in `rx_truncated`. The default holds [`MAX_FRAME_LEN`];
    /// [`AfPacketOptions::rx_frame_size_for_mtu`] gives a smaller slot for
    /// a known MTU.
    pub rx_frame_size: usize,
    /// Number of V2 receive slots (rounded up to fill the last ring block).
    pub rx_frames: usize,
    /// V3 only: milliseconds after which the kernel hands a partly filled receive
    /// block to user space (`tp_retire_blk_tov`). 0 lets the kernel choose
    /// (several ms); low values bound the latency of a lightly loaded port.
    pub rx_retire_blk_tov_ms: u32,
    /// Transmit slot size in bytes: a multiple of the page size holding
    /// [`MAX_FRAME_LEN`] plus the 48-byte slot header (32 bytes for V2; the
    /// check uses 48 for both).
    pub tx_frame_size: usize,
    /// Number of transmit slots.
    pub tx_ring_frames: usize,
    /// Join this `PACKET_FANOUT` group (hash mode) after binding.
    pub fanout_group: Option<u16>,
    /// Put the interface in promiscuous mode for the socket's lifetime.
    pub promiscuous: bool,
    /// `PACKET_QDISC_BYPASS`: transmit straight to the driver.
    pub qdisc_bypass: bool,
    /// `PACKET_IGNORE_OUTGOING`: do not receive frames transmitted on this
    /// interface (by us or anyone else).
    pub ignore_outgoing: bool,
    /// Hand every transmitted frame to the kernel as one linear buffer
    /// (`PACKET_VNET_HDR`, header length = frame length) instead of page
    /// references into the ring: a veth peer, a packet tap or the stack
    /// would otherwise copy the pages again (`skb_copy_ubufs`) and pull
    /// headers. Only with a TPACKET_V3 receive ring (or none), whose frames
    /// are found by `tp_mac` whatever the kernel puts before them.
    pub linear_tx: bool,
}

impl AfPacketOptions {
    pub const MIN_RX_BLOCK_SIZE: usize = 16 * 1024;
    /// Smallest V2 receive slot: a 60-byte frame after the 66-byte offset.
    pub const MIN_RX_FRAME_SIZE: usize = 128;
    /// V2 receive slot that holds a [`MAX_FRAME_LEN`] frame (9,296 bytes).
    pub const RX_FRAME_SIZE_MAX_FRAME: usize = tpacket_align(RX2_MAC_OFFSET + MAX_FRAME_LEN);

    /// Smallest V2 receive slot holding every frame an interface with this
    /// MTU can receive: Ethernet header (14) plus MTU plus 8 bytes of slack
    /// for an in-band VLAN tag the kernel did not move into metadata, after
    /// the 66-byte slot offset, 16-byte aligned. MTU 1500 → 1,600 bytes.
    pub const fn rx_frame_size_for_mtu(mtu: u32) -> usize {
        let s = tpacket_align(RX2_MAC_OFFSET + 14 + mtu as usize + 8);
        if s < Self::MIN_RX_FRAME_SIZE {
            Self::MIN_RX_FRAME_SIZE
        } else {
            s
        }
    }

    /// Full duplex with a TPACKET_V2 (per-frame) receive ring of the default
    /// size.
    pub fn v2() -> Self {
        AfPacketOptions {
            rx_ring: RxRing::V2,
            ..Self::default()
        }
    }

    /// Receive only (no transmit ring).
    pub fn rx_only() -> Self {
        AfPacketOptions {
            tx: false,
            ..Self::default()
        }
    }

    /// Transmit only (no receive ring; the socket receives nothing).
    pub fn tx_only() -> Self {
        AfPacketOptions {
            rx: false,
            ..Self::default()
        }
    }
}

impl Default for AfPacketOptions {
    fn default() -> Self {
        AfPacketOptions {
            rx: true,
            tx: true,
            rx_ring: RxRing::V3,
            rx_block_size: 256 * 1024,
            rx_blocks: 32,
            rx_frame_size: Self::RX_FRAME_SIZE_MAX_FRAME,
            rx_frames: 1024,
            rx_retire_blk_tov_ms: 1,
            tx_frame_size: 16 * 1024,
            tx_ring_frames: 512,
            fanout_group: None,
            promiscuous: true,
            qdisc_bypass: true,
            ignore_outgoing: true,
            linear_tx: true,
        }
    }
}

/// Nominal frame size for the V3 receive ring (the kernel only uses it to
/// validate `tp_frame_nr`; frames are packed back to back in blocks).
const RX_NOMINAL_FRAME: usize = 16 * 1024;

/// Target V2 receive ring block size: as many slots as fit in 64 KiB (at
/// least one), rounded up to a page multiple. Slots never straddle blocks.
const RX2_BLOCK_TARGET: usize = 64 * 1024;

/// A port on an AF_PACKET socket. See the crate docs for the [`Port`] contract.
pub struct AfPacketPort {
    name: String,
    ifindex: u32,
    fd: OwnedFd,
    map: *mut u8,
    map_len: usize,

    version: RxRing,
    /// Receive ring blocks (V3 and V2; 0 = no receive ring).
    rx_block_size: usize,
    rx_blocks: usize,
    /// V3: block being consumed.
    rx_block: usize,
    /// V3: frames of `rx_block` already consumed, and the offset of the next one.
    rx_pkt_idx: u32,
    rx_pkt_off: usize,
    /// V2: slot size, slots per block, total slots, next slot to read.
    rx_frame_size: usize,
    rx_frames_per_block: usize,
    rx_frames: usize,
    rx_frame: usize,

    /// Offset of the transmit ring in the mapping.
    tx_base: usize,
    tx_frame_size: usize,
    tx_frames: usize,
    /// Next slot to lend.
    tx_head: usize,
    /// Oldest committed slot the kernel may not have taken yet (mirror of the
    /// kernel's ring head); `tx_pending` slots from here are committed.
    tx_kick: usize,
    tx_pending: usize,
    tx_lent: bool,
    /// Slot header layout of this socket's version: data offset and the
    /// offsets of `tp_status`, `tp_len`, `tp_snaplen` in a slot.
    tx_data_off: usize,
    /// Bytes of `virtio_net_hdr` before each transmitted frame (0 or 10).
    tx_vnet: usize,
    tx_status_off: usize,
    tx_len_off: usize,
    tx_snaplen_off: usize,
    /// Longest frame the kernel accepts: MTU + Ethernet header (+4 for an
    /// 802.1Q-tagged frame). Refreshed by `stats`.
    tx_max_len: usize,

    stats: PortStats,
    /// A veth: complete TCP/UDP checksums a local sender left to offload
    /// (see [`crate::complete_checksums`]).
    complete_csum: bool,
}

// SAFETY: the mapping is owned by this value alone (no aliases are handed out
// beyond `&mut self` borrows), and the kernel side synchronizes through the
// per-slot status words, so moving the port to another thread is sound.
unsafe impl Send for AfPacketPort {}

fn os(op: &'static str) -> impl FnOnce(io::Error) -> PortError {
    move |err| PortError::Os { op, err }
}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` and we pass exactly its size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
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

/// An `int` socket option.
fn getsockopt_int(fd: &OwnedFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

/// `PACKET_STATISTICS`: `T` is `tpacket_stats_v3` on a V3 socket,
/// `tpacket_stats` on a V2 one.
fn packet_statistics<T: Default>(fd: &OwnedFd) -> Option<T> {
    getsockopt_as(fd, PACKET_STATISTICS)
}

/// `getsockopt(SOL_PACKET, name)` into a `T` (a kernel struct or integer
/// of exactly the size the option writes).
fn getsockopt_as<T: Default>(fd: &OwnedFd, name: libc::c_int) -> Option<T> {
    let mut st = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes (the size of `T`, the
    // option's struct) into `st`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_PACKET,
            name,
            &mut st as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some(st)
}

/// Transmit slot header layout of a V2 or V3 socket: offsets of the
/// data, `tp_status`, `tp_len` and `tp_snaplen`.
fn tx_offsets(v2: bool) -> (usize, usize, usize, usize) {
    if v2 {
        (
            TX2_DATA_OFFSET,
            TX2_STATUS_OFFSET,
            TX2_LEN_OFFSET,
            TX2_SNAPLEN_OFFSET,
        )
    } else {
        (
            TX_DATA_OFFSET,
            TX3_STATUS_OFFSET,
            TX3_LEN_OFFSET,
            TX3_SNAPLEN_OFFSET,
        )
    }
}

fn invalid(msg: &'static str) -> PortError {
    PortError::Os {
        op: "AfPacketOptions",
        err: io::Error::new(io::ErrorKind::InvalidInput, msg),
    }
}

impl AfPacketPort {
    /// Open a port on interface `ifname`. The interface may be down (the
    /// port then receives nothing and `flush` reports [`PortError::Down`]).
    pub fn open(ifname: &str, opts: &AfPacketOptions) -> Result<AfPacketPort, PortError> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        if !opts.rx && !opts.tx {
            return Err(invalid("neither rx nor tx"));
        }
        let v2 = opts.rx_ring == RxRing::V2;
        if opts.rx
            && v2
            && (opts.rx_frames == 0
                || opts.rx_frame_size < AfPacketOptions::MIN_RX_FRAME_SIZE
                || !opts.rx_frame_size.is_multiple_of(TPACKET_ALIGNMENT)
                || opts.rx_frame_size > u32::MAX as usize / 4
                || opts.rx_frames > u32::MAX as usize / 2)
        {
            return Err(invalid(
                "rx_frame_size must be a multiple of 16 >= 128, rx_frames > 0",
            ));
        }
        if opts.rx
            && !v2
            && (opts.rx_blocks == 0
                || opts.rx_block_size < AfPacketOptions::MIN_RX_BLOCK_SIZE
                || opts.rx_block_size & (page - 1) != 0
                || opts.rx_block_size > u32::MAX as usize / 2)
        {
            return Err(invalid(
                "rx_block_size must be a page multiple >= 16 KiB, rx_blocks > 0",
            ));
        }
        if opts.tx
            && (opts.tx_ring_frames == 0
                || opts.tx_frame_size & (page - 1) != 0
                || opts.tx_frame_size < TX_DATA_OFFSET + MAX_FRAME_LEN
                || opts.tx_frame_size > u32::MAX as usize / 2)
        {
            return Err(invalid(
                "tx_frame_size must be a page multiple holding MAX_FRAME_LEN + 48",
            ));
        }

        let ifindex = ifindex_of(ifname)?;

        // Protocol 0: receive nothing until bound with ETH_P_ALL below.
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(PortError::Os {
                op: "socket(AF_PACKET)",
                err: io::Error::last_os_error(),
            });
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let version = if v2 { TPACKET_V2 } else { TPACKET_V3 };
        setsockopt(&fd, SOL_PACKET, PACKET_VERSION, &version).map_err(os("PACKET_VERSION"))?;
        // PACKET_LOSS: a frame the kernel refuses (e.g. longer than the MTU)
        // is skipped instead of stopping the ring at TP_STATUS_WRONG_FORMAT;
        // without it the kernel's ring head stays on the bad slot and the
        // ring wedges (and PACKET_LOSS cannot be set once rings exist).
        // `tx_commit` checks lengths against the MTU itself to count them.
        if opts.tx {
            setsockopt(&fd, SOL_PACKET, PACKET_LOSS, &1 as &libc::c_int)
                .map_err(os("PACKET_LOSS"))?;
        }
        if opts.qdisc_bypass {
            setsockopt(&fd, SOL_PACKET, PACKET_QDISC_BYPASS, &1 as &libc::c_int)
                .map_err(os("PACKET_QDISC_BYPASS"))?;
        }
        let tx_vnet = if opts.tx && opts.linear_tx && (!opts.rx || !v2) {
            setsockopt(&fd, SOL_PACKET, PACKET_VNET_HDR, &1 as &libc::c_int)
                .map_err(os("PACKET_VNET_HDR"))?;
            VNET_HDR_LEN
        } else {
            0
        };
        if opts.ignore_outgoing {
            setsockopt(&fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int)
                .map_err(os("PACKET_IGNORE_OUTGOING"))?;
        }

        // V2 ring geometry: whole slots per page-multiple block.
        let (rx_frame_size, rx_frames_per_block) = if opts.rx && v2 {
            let fs = opts.rx_frame_size;
            let block = ((RX2_BLOCK_TARGET / fs).max(1) * fs).next_multiple_of(page);
            (fs, block / fs)
        } else {
            (0, 0)
        };
        let (rx_block_size, rx_blocks) = match (opts.rx, v2) {
            (false, _) => (0, 0),
            (true, false) => (opts.rx_block_size, opts.rx_blocks),
            (true, true) => (
                (rx_frame_size * rx_frames_per_block).next_multiple_of(page),
                opts.rx_frames.div_ceil(rx_frames_per_block),
            ),
        };
        let rx_frames = rx_blocks * rx_frames_per_block;
        if opts.rx && v2 {
            let req = tpacket_req {
                tp_block_size: rx_block_size as u32,
                tp_block_nr: rx_blocks as u32,
                tp_frame_size: rx_frame_size as u32,
                tp_frame_nr: rx_frames as u32,
            };
            setsockopt(&fd, SOL_PACKET, PACKET_RX_RING, &req).map_err(os("PACKET_RX_RING"))?;
        } else if opts.rx {
            let req = tpacket_req3 {
                tp_block_size: rx_block_size as u32,
                tp_block_nr: rx_blocks as u32,
                tp_frame_size: RX_NOMINAL_FRAME as u32,
                tp_frame_nr: ((rx_block_size / RX_NOMINAL_FRAME) * rx_blocks) as u32,
                tp_retire_blk_tov: opts.rx_retire_blk_tov_ms,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            setsockopt(&fd, SOL_PACKET, PACKET_RX_RING, &req).map_err(os("PACKET_RX_RING"))?;
        }
        let (tx_frame_size, tx_frames) = if opts.tx {
            (opts.tx_frame_size, opts.tx_ring_frames)
        } else {
            (0, 0)
        };
        if opts.tx && v2 {
            // One slot per block: slots are then contiguous in the mapping.
            let req = tpacket_req {
                tp_block_size: tx_frame_size as u32,
                tp_block_nr: tx_frames as u32,
                tp_frame_size: tx_frame_size as u32,
                tp_frame_nr: tx_frames as u32,
            };
            setsockopt(&fd, SOL_PACKET, PACKET_TX_RING, &req).map_err(os("PACKET_TX_RING"))?;
        } else if opts.tx {
            // One slot per block: slots are then contiguous in the mapping.
            // The kernel requires the V3-only fields to be zero for TX.
            let req = tpacket_req3 {
                tp_block_size: tx_frame_size as u32,
                tp_block_nr: tx_frames as u32,
                tp_frame_size: tx_frame_size as u32,
                tp_frame_nr: tx_frames as u32,
                ..Default::default()
            };
            setsockopt(&fd, SOL_PACKET, PACKET_TX_RING, &req).map_err(os("PACKET_TX_RING"))?;
        }

        let tx_base = rx_block_size * rx_blocks;
        let map_len = tx_base + tx_frame_size * tx_frames;
        // SAFETY: mapping the socket's rings as documented for PACKET_MMAP;
        // the length is exactly the sum of both rings. The result is checked.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(PortError::Os {
                op: "mmap",
                err: io::Error::last_os_error(),
            });
        }
        let (tx_data_off, tx_status_off, tx_len_off, tx_snaplen_off) = tx_offsets(v2);
        // From here on, Drop unmaps.
        let port = AfPacketPort {
            name: ifname.to_string(),
            ifindex,
            fd,
            map: map as *mut u8,
            map_len,
            version: opts.rx_ring,
            rx_block_size,
            rx_blocks,
            rx_block: 0,
            rx_pkt_idx: 0,
            rx_pkt_off: 0,
            rx_frame_size,
            rx_frames_per_block,
            rx_frames,
            rx_frame: 0,
            tx_base,
            tx_frame_size,
            tx_frames,
            tx_head: 0,
            tx_kick: 0,
            tx_pending: 0,
            tx_lent: false,
            tx_data_off,
            tx_vnet,
            tx_status_off,
            tx_len_off,
            tx_snaplen_off,
            tx_max_len: link::query(ifname).map_or(MAX_FRAME_LEN, |l| l.mtu as usize + 14),
            stats: PortStats::default(),
            complete_csum: link::is_veth(ifname),
        };

        if opts.promiscuous {
            let mreq = packet_mreq {
                mr_ifindex: ifindex as libc::c_int,
                mr_type: PACKET_MR_PROMISC,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            setsockopt(&port.fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(|e| link::map_err(ifname, "PACKET_ADD_MEMBERSHIP", e))?;
        }

        // SAFETY: all-zero is a valid sockaddr_ll; fields are set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = if opts.rx { ETH_P_ALL.to_be() } else { 0 };
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll and we pass its exact size.
        let r = unsafe {
            libc::bind(
                port.fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(link::map_err(ifname, "bind", io::Error::last_os_error()));
        }
        // Binding to a down interface leaves a pending ENETDOWN socket error;
        // clear it (down-ness is reported by `flush`).
        let _ = port.take_socket_error();

        if let Some(group) = opts.fanout_group {
            if !opts.rx {
                return Err(invalid("fanout needs rx"));
            }
            let arg: u32 = group as u32 | (PACKET_FANOUT_HASH << 16);
            setsockopt(&port.fd, SOL_PACKET, PACKET_FANOUT, &arg).map_err(os("PACKET_FANOUT"))?;
        }
        Ok(port)
    }

    /// Interface index the socket is bound to.
    /// Hand the socket to a successor image (restart in place): queued
    /// frames are flushed, the descriptor survives `exec` (close-on-exec
    /// cleared), and the returned line lets [`AfPacketPort::adopt`] map the
    /// same rings and carry on where this port stopped. Frames that arrive
    /// meanwhile wait in the receive ring. The port must not be used or
    /// dropped afterwards (that would close the descriptor).
    pub fn handover_state(&mut self) -> Option<String> {
        let _ = Port::flush(self);
        let fd = self.fd.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own.
        let ok = unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } == 0;
        if !ok || self.tx_lent {
            return None;
        }
        let v = match self.version {
            RxRing::V3 => 3,
            RxRing::V2 => 2,
        };
        Some(format!(
            "{fd},{},{v},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.ifindex,
            self.rx_block_size,
            self.rx_blocks,
            self.rx_block,
            self.rx_pkt_idx,
            self.rx_pkt_off,
            self.rx_frame_size,
            self.rx_frames_per_block,
            self.rx_frames,
            self.rx_frame,
            self.tx_base,
            self.tx_frame_size,
            self.tx_frames,
            self.tx_head,
            self.tx_kick,
            self.tx_pending,
            self.map_len,
        ))
    }

    /// Take over a socket a predecessor image handed over (see
    /// [`AfPacketPort::handover_state`]) on interface `ifname`. Refused if
    /// the interface is not the one the socket is bound to.
    pub fn adopt(ifname: &str, state: &str) -> Result<AfPacketPort, PortError> {
        let bad = || invalid("handover state");
        let f: Vec<usize> = state
            .split(',')
            .map(|x| x.parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        if f.len() != 19 {
            return Err(bad());
        }
        let fd = f[0] as RawFd;
        let ifindex = ifindex_of(ifname)?;
        if ifindex as usize != f[1] {
            return Err(bad());
        }
        // SAFETY: the predecessor left this descriptor open for us; from
        // here on we own it (and restore close-on-exec).
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: fcntl on a descriptor we own.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        let v2 = f[2] == 2;
        let map_len = f[18];
        // SAFETY: the rings exist on this socket with exactly this total
        // length (the predecessor mapped the same); the result is checked.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(PortError::Os {
                op: "mmap (adopt)",
                err: io::Error::last_os_error(),
            });
        }
        let (tx_data_off, tx_status_off, tx_len_off, tx_snaplen_off) = tx_offsets(v2);
        // The socket keeps PACKET_VNET_HDR across the hand-over: ask it.
        let tx_vnet = if getsockopt_int(&fd, SOL_PACKET, PACKET_VNET_HDR).unwrap_or(0) != 0 {
            VNET_HDR_LEN
        } else {
            0
        };
        Ok(AfPacketPort {
            name: ifname.to_string(),
            ifindex,
            fd,
            map: map as *mut u8,
            map_len,
            version: if v2 { RxRing::V2 } else { RxRing::V3 },
            rx_block_size: f[3],
            rx_blocks: f[4],
            rx_block: f[5],
            rx_pkt_idx: f[6] as u32,
            rx_pkt_off: f[7],
            rx_frame_size: f[8],
            rx_frames_per_block: f[9],
            rx_frames: f[10],
            rx_frame: f[11],
            tx_base: f[12],
            tx_frame_size: f[13],
            tx_frames: f[14],
            tx_head: f[15],
            tx_kick: f[16],
            tx_pending: f[17],
            tx_lent: false,
            tx_data_off,
            tx_vnet,
            tx_status_off,
            tx_len_off,
            tx_snaplen_off,
            tx_max_len: link::query(ifname).map_or(MAX_FRAME_LEN, |l| l.mtu as usize + 14),
            stats: PortStats::default(),
            complete_csum: link::is_veth(ifname),
        })
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Bytes of ring memory mapped (receive + transmit).
    pub fn ring_bytes(&self) -> usize {
        self.map_len
    }

    /// The ring version this port was opened with.
    pub fn rx_ring(&self) -> RxRing {
        self.version
    }

    /// Receive ring slots (V2; rounded up to whole blocks), 0 for V3.
    pub fn rx_ring_frames(&self) -> usize {
        self.rx_frames
    }

    /// Receive from a V2 ring: each slot is copied out and handed back to
    /// the kernel at once, so there is no partial-block cursor.
    fn recv_v2(&mut self, batch: &mut FrameBatch, port_id: u16) -> usize {
        let mut n = 0;
        loop {
            let i = self.rx_frame;
            let status = self.rx_frame_status(i).load(Ordering::Acquire);
            if status & TP_STATUS_USER == 0 {
                break;
            }
            let Some(slot) = batch.slot() else {
                break;
            };
            let hdr = self.rx_frame_ptr(i) as *const tpacket2_hdr;
            // SAFETY: the slot is owned by user space (TP_STATUS_USER seen
            // with Acquire) until we store TP_STATUS_KERNEL below; `slot`
            // borrows the batch, not the ring.
            if let Some(len) = unsafe { self.copy_rx2_frame(hdr, status, slot) } {
                batch.commit(len, port_id);
                n += 1;
            }
            self.rx_frame_status(i)
                .store(TP_STATUS_KERNEL, Ordering::Release);
            self.rx_frame = (i + 1) % self.rx_frames;
        }
        n
    }

    fn take_socket_error(&self) -> io::Result<()> {
        let mut err: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: SO_ERROR writes one c_int into `err`; `len` says so.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut err as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if err != 0 {
            return Err(io::Error::from_raw_os_error(err));
        }
        Ok(())
    }

    #[inline]
    fn rx_block_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY (of the arithmetic): i < rx_blocks, so the result stays in the mapping.
        debug_assert!(i < self.rx_blocks);
        self.map.wrapping_add(i * self.rx_block_size)
    }

    #[inline]
    fn tx_frame_ptr(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.tx_frames);
        self.map.wrapping_add(self.tx_base + i * self.tx_frame_size)
    }

    /// The status word of transmit slot `i`, shared with the kernel
    /// (`tp_status` of a `tpacket3_hdr` or `tpacket2_hdr`).
    #[inline]
    fn tx_status(&self, i: usize) -> &AtomicU32 {
        let p = self.tx_frame_ptr(i).wrapping_add(self.tx_status_off);
        // SAFETY: slot `i` lies in the live mapping; its header is 16-byte
        // aligned and `tx_status_off` is the 4-byte aligned offset of
        // `tp_status` for this socket's version; the word is only accessed
        // atomically by us and by the kernel (which uses its own barriers),
        // so viewing it as an AtomicU32 is sound for the lifetime of `&self`.
        unsafe { &*(p as *const AtomicU32) }
    }

    #[inline]
    fn rx_frame_ptr(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.rx_frames);
        let (b, f) = (i / self.rx_frames_per_block, i % self.rx_frames_per_block);
        self.map
            .wrapping_add(b * self.rx_block_size + f * self.rx_frame_size)
    }

    /// The status word of V2 receive slot `i`.
    #[inline]
    fn rx_frame_status(&self, i: usize) -> &AtomicU32 {
        let p = self.rx_frame_ptr(i) as *const tpacket2_hdr;
        // SAFETY: as for `tx_status`: slot `i` is in the mapping, 16-byte
        // aligned, and `tp_status` is the hand-off word.
        unsafe { &*(ptr::addr_of!((*p).tp_status) as *const AtomicU32) }
    }

    #[inline]
    fn rx_block_status(&self, i: usize) -> &AtomicU32 {
        let p = self.rx_block_ptr(i) as *const tpacket_block_desc;
        // SAFETY: as for `tx_status`: block `i` is in the mapping, the
        // descriptor is page aligned and `block_status` is the hand-off word.
        unsafe { &*(ptr::addr_of!((*p).block_status) as *const AtomicU32) }
    }

    /// Walk committed transmit slots the kernel has dealt with; stop at the
    /// first it has not taken. Handles `TP_STATUS_WRONG_FORMAT`.
    fn reconcile_tx(&mut self) {
        while self.tx_pending > 0 {
            let st = self.tx_status(self.tx_kick).load(Ordering::Acquire);
            if st == TP_STATUS_SEND_REQUEST {
                break;
            }
            if st & TP_STATUS_WRONG_FORMAT != 0 {
                // The kernel refused this frame. With PACKET_LOSS set (see
                // `open`) it skips bad frames instead, so this is defensive:
                // count it and give the slot back.
                self.stats.tx_errors += 1;
                self.tx_status(self.tx_kick)
                    .store(TP_STATUS_AVAILABLE, Ordering::Release);
            }
            self.tx_kick = (self.tx_kick + 1) % self.tx_frames;
            self.tx_pending -= 1;
        }
    }

    fn kick(&self) -> io::Result<usize> {
        // SAFETY: sendto with a null buffer and no address is the documented
        // way to make the kernel transmit the ring's SEND_REQUEST slots.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null(),
                0,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }

    /// Give back every committed slot the kernel has not taken (the link is
    /// down or gone): those frames are dropped and counted as `tx_errors`.
    ///
    /// The kernel's own transmit cursor stays on the first slot it did not
    /// take (it only advances past frames it sent), so our cursor is rewound
    /// to that slot: otherwise the next frame would be written where the
    /// kernel never looks, and the port would never transmit again after a
    /// link flap.
    fn discard_pending_tx(&mut self) {
        let mut first_unsent = None;
        while self.tx_pending > 0 {
            let s = self.tx_status(self.tx_kick);
            if s.load(Ordering::Acquire) == TP_STATUS_SEND_REQUEST {
                s.store(TP_STATUS_AVAILABLE, Ordering::Release);
                self.stats.tx_errors += 1;
                first_unsent.get_or_insert(self.tx_kick);
            }
            self.tx_kick = (self.tx_kick + 1) % self.tx_frames;
            self.tx_pending -= 1;
        }
        if let Some(i) = first_unsent {
            self.tx_head = i;
            self.tx_kick = i;
        }
    }

    /// Copy one received frame (V3 header at `hdr`) into `slot`; returns the
    /// frame length, or `None` if it must be dropped.
    ///
    /// # Safety
    /// `hdr` must point to a complete frame of a block owned by user space.
    #[inline]
    unsafe fn copy_rx_frame(&mut self, hdr: *const tpacket3_hdr, slot: &mut [u8]) -> Option<usize> {
        let h = &*hdr;
        let meta = RxMeta {
            data: (hdr as *const u8).add(h.tp_mac as usize),
            snap: h.tp_snaplen as usize,
            len: h.tp_len as usize,
            status: h.tp_status,
            tci: h.tp_vlan_tci as u16,
            tpid: h.tp_vlan_tpid,
        };
        self.copy_rx(&meta, slot)
    }

    /// Copy one received frame (V2 slot header at `hdr`, whose hand-off
    /// word the caller read as `status`) into `slot`.
    ///
    /// # Safety
    /// `hdr` must point to a V2 receive slot owned by user space.
    #[inline]
    unsafe fn copy_rx2_frame(
        &mut self,
        hdr: *const tpacket2_hdr,
        status: u32,
        slot: &mut [u8],
    ) -> Option<usize> {
        let mac = ptr::addr_of!((*hdr).tp_mac).read() as usize;
        let mut snap = ptr::addr_of!((*hdr).tp_snaplen).read() as usize;
        if mac >= self.rx_frame_size {
            snap = 0;
        } else {
            // Never read past the slot, whatever the header says.
            snap = snap.min(self.rx_frame_size - mac);
        }
        let meta = RxMeta {
            data: (hdr as *const u8).add(mac),
            snap,
            len: ptr::addr_of!((*hdr).tp_len).read() as usize,
            status,
            tci: ptr::addr_of!((*hdr).tp_vlan_tci).read(),
            tpid: ptr::addr_of!((*hdr).tp_vlan_tpid).read(),
        };
        self.copy_rx(&meta, slot)
    }

    /// Version-independent part of receive: truncation checks, VLAN tag
    /// re-insertion, copy.
    ///
    /// # Safety
    /// `m.data` must be valid for `m.snap` bytes of ring memory owned by
    /// user space.
    #[inline]
    unsafe fn copy_rx(&mut self, m: &RxMeta, slot: &mut [u8]) -> Option<usize> {
        let (data, snap) = (m.data, m.snap);
        if snap < m.len {
            self.stats.rx_truncated += 1;
            return None;
        }
        if m.status & TP_STATUS_VLAN_VALID != 0 && snap >= 12 {
            if snap + 4 > slot.len() {
                self.stats.rx_truncated += 1;
                return None;
            }
            let tpid = if m.status & TP_STATUS_VLAN_TPID_VALID != 0 {
                m.tpid
            } else {
                0x8100
            };
            let tci = m.tci;
            ptr::copy_nonoverlapping(data, slot.as_mut_ptr(), 12);
            slot[12..14].copy_from_slice(&tpid.to_be_bytes());
            slot[14..16].copy_from_slice(&tci.to_be_bytes());
            ptr::copy_nonoverlapping(data.add(12), slot.as_mut_ptr().add(16), snap - 12);
            Some(snap + 4)
        } else {
            if snap > slot.len() {
                self.stats.rx_truncated += 1;
                return None;
            }
            ptr::copy_nonoverlapping(data, slot.as_mut_ptr(), snap);
            Some(snap)
        }
    }
}

/// Where a received frame is and what the kernel said about it.
struct RxMeta {
    data: *const u8,
    snap: usize,
    len: usize,
    status: u32,
    tci: u16,
    tpid: u16,
}

fn ifindex_of(name: &str) -> Result<u32, PortError> {
    if !link::valid_name(name) {
        return Err(PortError::NoSuchInterface(name.to_string()));
    }
    let c = std::ffi::CString::new(name).map_err(|_| PortError::NoSuchInterface(name.into()))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) | None | Some(0) => {
                PortError::NoSuchInterface(name.to_string())
            }
            _ => PortError::Os {
                op: "if_nametoindex",
                err,
            },
        });
    }
    Ok(idx)
}

impl AfPacketPort {
    /// Frames from the rings into `batch` (see [`Port::recv`]).
    fn recv_rings(&mut self, batch: &mut FrameBatch, port_id: u16) -> Result<usize, PortError> {
        if self.rx_blocks == 0 {
            return Ok(0);
        }
        if self.version == RxRing::V2 {
            return Ok(self.recv_v2(batch, port_id));
        }
        let mut n = 0;
        'blocks: loop {
            let blk = self.rx_block;
            if self.rx_block_status(blk).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                break;
            }
            let bd = self.rx_block_ptr(blk);
            // SAFETY: the block is owned by user space (TP_STATUS_USER seen
            // with Acquire), so its descriptor is stable until we release it.
            let (num, first) = unsafe {
                let d = &*(bd as *const tpacket_block_desc);
                (d.num_pkts, d.offset_to_first_pkt as usize)
            };
            if self.rx_pkt_idx == 0 {
                self.rx_pkt_off = first;
            }
            while self.rx_pkt_idx < num {
                let Some(slot) = batch.slot() else {
                    break 'blocks;
                };
                // SAFETY: the kernel laid out `num` frames in this block,
                // chained by tp_next_offset from offset_to_first_pkt; rx_pkt_off
                // is the offset of frame rx_pkt_idx (< num). `slot` borrows
                // the batch, not the ring, so the copy does not alias.
                let (len, next) = unsafe {
                    let hdr = bd.add(self.rx_pkt_off) as *const tpacket3_hdr;
                    let next = (*hdr).tp_next_offset as usize;
                    (self.copy_rx_frame(hdr, slot), next)
                };
                if let Some(len) = len {
                    batch.commit(len, port_id);
                    n += 1;
                }
                self.rx_pkt_idx += 1;
                self.rx_pkt_off += next;
            }
            // Every frame consumed: hand the block back, move on.
            self.rx_block_status(blk)
                .store(TP_STATUS_KERNEL, Ordering::Release);
            self.rx_block = (blk + 1) % self.rx_blocks;
            self.rx_pkt_idx = 0;
        }
        Ok(n)
    }
}

impl Port for AfPacketPort {
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
        self.tx_lent = false;
        if self.tx_frames == 0 {
            self.stats.tx_ring_full += 1;
            return None;
        }
        let st = self.tx_status(self.tx_head).load(Ordering::Acquire);
        if self.tx_pending >= self.tx_frames || st != TP_STATUS_AVAILABLE {
            self.stats.tx_ring_full += 1;
            return None;
        }
        self.tx_lent = true;
        let p = self.tx_frame_ptr(self.tx_head);
        // SAFETY: the slot is TP_STATUS_AVAILABLE, so the kernel does not
        // touch it until we set SEND_REQUEST; its data area starts at
        // tx_data_off and runs to the end of the slot, inside the mapping.
        // The borrow is tied to `&mut self`, so no second slot is lent meanwhile.
        let off = self.tx_data_off + self.tx_vnet;
        Some(unsafe { std::slice::from_raw_parts_mut(p.add(off), self.tx_frame_size - off) })
    }

    fn tx_commit(&mut self, len: usize) {
        if !std::mem::take(&mut self.tx_lent) {
            debug_assert!(false, "tx_commit without a lent tx_slot");
            return;
        }
        let off = self.tx_data_off + self.tx_vnet;
        let cap = self.tx_frame_size - off;
        let p = self.tx_frame_ptr(self.tx_head);
        // SAFETY: the slot is still ours (AVAILABLE, lent); bytes 12..14 of
        // its data area are inside the slot.
        let ctag = unsafe { *p.add(off + 12) == 0x81 && *p.add(off + 13) == 0 };
        let max = (self.tx_max_len + if ctag { 4 } else { 0 }).min(cap);
        if !(14..=max).contains(&len) {
            // The kernel would refuse it: count and drop here, slot unused.
            self.stats.tx_errors += 1;
            return;
        }
        // SAFETY: the slot was lent (status AVAILABLE), so user space owns
        // its header until the status store below publishes it; the offsets
        // are those of this socket's header version (4-byte aligned u32s).
        unsafe {
            if self.version == RxRing::V3 {
                (*(p as *mut tpacket3_hdr)).tp_next_offset = 0;
            }
            let wire = (len + self.tx_vnet) as u32;
            *(p.add(self.tx_len_off) as *mut u32) = wire;
            *(p.add(self.tx_snaplen_off) as *mut u32) = wire;
            if self.tx_vnet != 0 {
                // virtio_net_hdr: no checksum offload, no GSO, and the whole
                // frame as "header" so the kernel copies it into the skb's
                // linear part (little-endian: a modern virtio header).
                let h = p.add(self.tx_data_off);
                ptr::write_bytes(h, 0, self.tx_vnet);
                ptr::copy_nonoverlapping((len as u16).to_le_bytes().as_ptr(), h.add(2), 2);
            }
        }
        self.tx_status(self.tx_head)
            .store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.tx_head = (self.tx_head + 1) % self.tx_frames;
        self.tx_pending += 1;
        // The next `tx_slot` reads the next slot's status, which the kernel
        // wrote when it sent from it: a cache (and, one slot per 16 KiB,
        // TLB) miss that was ~7 % of a flooding worker's time. Fetch it
        // now, while the worker writes the copies for the other ports.
        prefetch(self.tx_status(self.tx_head));
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if self.tx_pending == 0 {
            return Ok(());
        }
        // tx_pending also covers frames a previous partial send (socket
        // buffer full) left in SEND_REQUEST: they go out with this kick.
        let res = self.kick();
        self.reconcile_tx();
        match res {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(()),
                // The driver dropped the frame at the head of the ring and
                // the kernel put it back (it stays SEND_REQUEST). With
                // PACKET_QDISC_BYPASS this is what a lost carrier looks
                // like, the instant the driver knows (`__dev_direct_xmit`
                // tests `netif_carrier_ok`), long before the link watch
                // reports it: the caller's cue to look at the link.
                Some(libc::ENOBUFS) => Err(PortError::Refused(self.name.clone())),
                // A refused frame (WRONG_FORMAT) was handled by reconcile_tx.
                Some(libc::EMSGSIZE) | Some(libc::EINVAL) if self.tx_pending == 0 => Ok(()),
                // Link down: the frames stay queued, so a failover can
                // move them to the port that takes over (`take_tx`); the
                // supervisor discards them otherwise (`discard_tx`).
                Some(libc::ENETDOWN) => Err(link::map_err(&self.name, "sendto", e)),
                Some(libc::ENXIO) | Some(libc::ENODEV) => {
                    self.discard_pending_tx();
                    Err(link::map_err(&self.name, "sendto", e))
                }
                _ => Err(PortError::Os {
                    op: "sendto",
                    err: e,
                }),
            },
        }
    }

    fn rx_fd(&self) -> Option<RawFd> {
        (self.rx_blocks > 0).then(|| self.fd.as_raw_fd())
    }

    /// TPACKET_V2 wakes per frame; V3 only when a block retires.
    fn rx_ready_per_frame(&self) -> bool {
        self.version == RxRing::V2
    }

    fn handover(&mut self) -> Option<String> {
        self.handover_state()
    }

    fn take_tx(&mut self, out: &mut dyn FnMut(&[u8])) {
        // Frames the kernel has not taken, oldest first; then the slots
        // are given back as discard_pending_tx does.
        let mut i = self.tx_kick;
        for _ in 0..self.tx_pending {
            if self.tx_status(i).load(Ordering::Acquire) == TP_STATUS_SEND_REQUEST {
                let p = self.tx_frame_ptr(i);
                // SAFETY: a SEND_REQUEST slot the kernel is not reading
                // (no sendto in progress: this thread owns the socket); its
                // length word was written by tx_commit and is bounded by
                // the slot.
                let off = self.tx_data_off + self.tx_vnet;
                let f = unsafe {
                    let len = (*(p.add(self.tx_len_off) as *const u32) as usize)
                        .saturating_sub(self.tx_vnet)
                        .min(self.tx_frame_size - off);
                    std::slice::from_raw_parts(p.add(off), len)
                };
                out(f);
            }
            i = (i + 1) % self.tx_frames;
        }
        self.discard_pending_tx();
    }

    fn discard_tx(&mut self) {
        // The kernel keeps a frame it could not send (queue stopped while
        // the carrier is off) in SEND_REQUEST and would send it with the
        // next kick, whenever that is; `tx_pending` covers those slots.
        self.discard_pending_tx();
    }

    fn set_mtu(&mut self, mtu: u32) {
        self.tx_max_len = mtu as usize + 14;
    }

    fn stats(&mut self) -> PortStats {
        if self.rx_blocks > 0 {
            // Reading resets the kernel counters: accumulate.
            let drops = match self.version {
                RxRing::V3 => packet_statistics::<tpacket_stats_v3>(&self.fd).map(|s| s.tp_drops),
                RxRing::V2 => packet_statistics::<tpacket_stats>(&self.fd).map(|s| s.tp_drops),
            };
            if let Some(d) = drops {
                self.stats.rx_ring_drops += d as u64;
            }
        }
        self.stats
    }
}

impl Drop for AfPacketPort {
    fn drop(&mut self) {
        // SAFETY: `map`/`map_len` describe the mapping created in `open`,
        // and no borrow of it can outlive `self`.
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.map_len);
        }
    }
}

/// Hint the cache to fetch the line holding `x` (a no-op off x86-64).
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, and SSE is baseline
    // on x86-64.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(x as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
