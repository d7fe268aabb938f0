//! An AF_PACKET port with two receive rings: a TPACKET_V2 ring that hands
//! each frame over as soon as the kernel wrote it (microseconds), and a
//! TPACKET_V3 ring behind it that takes what the first cannot hold.
//!
//! Neither ring alone does both jobs (docs/io.md, "V2 or V3"): V3 holds a
//! frame until its block is full or its 1 ms timer fires, so a lightly
//! loaded port waits up to a millisecond per frame; V2 holds frames, not
//! bytes, so the memory that lets V3 ride out a stalled worker at 100,000
//! frames/s would be hundreds of MiB of V2 slots.
//!
//! The two sockets form one `PACKET_FANOUT` group in classic-BPF mode with
//! a program that always answers 0, plus `PACKET_FANOUT_FLAG_ROLLOVER`:
//! the kernel gives every frame to the V2 socket (member 0) while its ring
//! has room and rolls it over to the V3 socket when it is full. At low and
//! moderate rates every frame takes the V2 path; only a backlog reaches
//! the V3 ring. The group's `PACKET_FANOUT_FLAG_IGNORE_OUTGOING` keeps the
//! port's own transmissions out of both rings (the per-socket option does
//! not apply to fanout members).
//!
//! Order: frames that rolled over wait for their V3 block (≤ 1 ms) while
//! later frames may already sit in the V2 ring, so a flow can be reordered
//! right after the V2 ring overflowed, never otherwise. `recv` reads the
//! V3 ring first, so a retired block's older frames go before newer V2
//! frames whenever both are ready.
//!
//! Transmit uses the V3 socket's ring (linear transmit: docs/io.md).

use super::*;

/// `PACKET_FANOUT` mode: the group's classic BPF program picks the member.
const PACKET_FANOUT_CBPF: u32 = 6;
/// A member whose ring is full passes the frame to the next.
const PACKET_FANOUT_FLAG_ROLLOVER: u32 = 0x1000;
/// The kernel picks an unused group id (read back with `getsockopt`).
const PACKET_FANOUT_FLAG_UNIQUEID: u32 = 0x2000;
/// The group does not receive frames sent on the interface (Linux 6.10+).
const PACKET_FANOUT_FLAG_IGNORE_OUTGOING: u32 = 0x4000;
/// `setsockopt` that installs the group's BPF program.
const PACKET_FANOUT_DATA: libc::c_int = 22;
/// `getsockopt`: how many frames rolled over (and how many could not).
const PACKET_ROLLOVER_STATS: libc::c_int = 21;

/// Slots of the V2 ring: 4,096 frames of the port's MTU (6.5 MiB at 1,500
/// bytes) hold 40 ms at 100,000 frames/s, far more than a worker's batch
/// turnaround; beyond that the V3 ring (16 MiB) takes over.
pub const FAST_RING_FRAMES: usize = 4096;

/// Kernel `struct tpacket_rollover_stats`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RolloverStats {
    all: u64,
    huge: u64,
    failed: u64,
}

/// See the module documentation.
pub struct AfPacketDualPort {
    /// V2, receive only: member 0 of the fanout group.
    fast: AfPacketPort,
    /// V3, receive (member 1) and transmit.
    bulk: AfPacketPort,
    /// epoll set of both receive sockets: the worker polls one descriptor.
    ep: OwnedFd,
    /// Frames that rolled over to the V3 ring so far.
    rolled: u64,
    /// Frames read from each ring (V2, V3).
    from: (u64, u64),
    /// The V3 ring had frames since its pressure flag was last cleared.
    bulk_used: bool,
}

impl AfPacketDualPort {
    /// Open both sockets on `ifname`. `mtu` sizes the V2 slots (frames
    /// longer than the slot are truncated by the kernel and counted);
    /// `bulk` gives the V3 ring and the transmit ring (its `rx_ring` and
    /// `fanout_group` are ignored).
    pub fn open(
        ifname: &str,
        mtu: u32,
        bulk: &AfPacketOptions,
    ) -> Result<AfPacketDualPort, PortError> {
        Self::open_sized(ifname, mtu, FAST_RING_FRAMES, bulk)
    }

    /// [`open`](Self::open) with `fast_frames` V2 slots instead of
    /// [`FAST_RING_FRAMES`] (a switch with many ports shrinks its rings:
    /// docs/scale.md).
    pub fn open_sized(
        ifname: &str,
        mtu: u32,
        fast_frames: usize,
        bulk: &AfPacketOptions,
    ) -> Result<AfPacketDualPort, PortError> {
        let fast = AfPacketPort::open(
            ifname,
            &AfPacketOptions {
                rx: true,
                tx: false,
                rx_ring: RxRing::V2,
                rx_frame_size: AfPacketOptions::rx_frame_size_for_mtu(mtu),
                rx_frames: fast_frames,
                fanout_group: None,
                promiscuous: bulk.promiscuous,
                ignore_outgoing: true,
                linear_tx: false,
                ..AfPacketOptions::default()
            },
        )?;
        let bulk = AfPacketPort::open(
            ifname,
            &AfPacketOptions {
                rx: true,
                rx_ring: RxRing::V3,
                fanout_group: None,
                ..bulk.clone()
            },
        )?;
        let flags = PACKET_FANOUT_FLAG_ROLLOVER | PACKET_FANOUT_FLAG_IGNORE_OUTGOING;
        let first: u32 = (PACKET_FANOUT_CBPF | flags | PACKET_FANOUT_FLAG_UNIQUEID) << 16;
        setsockopt(&fast.fd, SOL_PACKET, PACKET_FANOUT, &first)
            .map_err(os("PACKET_FANOUT (V2 ring)"))?;
        // "Return 0": every frame to member 0 (the V2 socket) while it has
        // room. Also the kernel's answer with no program; set so that the
        // intent does not rest on a default.
        let prog = [libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        }];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        setsockopt(&fast.fd, SOL_PACKET, PACKET_FANOUT_DATA, &fprog)
            .map_err(os("PACKET_FANOUT_DATA"))?;
        let id = getsockopt_as::<u32>(&fast.fd, PACKET_FANOUT)
            .ok_or_else(|| os("getsockopt PACKET_FANOUT")(io::Error::last_os_error()))?
            & 0xffff;
        let second: u32 = id | ((PACKET_FANOUT_CBPF | flags) << 16);
        setsockopt(&bulk.fd, SOL_PACKET, PACKET_FANOUT, &second)
            .map_err(os("PACKET_FANOUT (V3 ring)"))?;
        let ep = epoll_of(&[fast.fd.as_raw_fd(), bulk.fd.as_raw_fd()])?;
        Ok(AfPacketDualPort {
            fast,
            bulk,
            ep,
            rolled: 0,
            from: (0, 0),
            bulk_used: false,
        })
    }

    /// Frames read so far from the V2 ring and from the V3 ring.
    pub fn received_by_ring(&self) -> (u64, u64) {
        self.from
    }

    /// Frames that rolled over from the V2 ring to the V3 ring.
    pub fn rolled_over(&mut self) -> u64 {
        self.read_rollover();
        self.rolled
    }

    fn read_rollover(&mut self) {
        // Cumulative in the kernel (not reset by reading).
        if let Some(s) = getsockopt_as::<RolloverStats>(&self.fast.fd, PACKET_ROLLOVER_STATS) {
            self.rolled = s.all;
        }
    }

    /// Hand both sockets to a successor image (see
    /// [`AfPacketPort::handover_state`]); the fanout group survives.
    pub fn handover_state(&mut self) -> Option<String> {
        let f = self.fast.handover_state()?;
        let b = self.bulk.handover_state()?;
        Some(format!("dual|{f}|{b}"))
    }

    /// Take over the sockets named by a [`AfPacketDualPort::handover_state`] line.
    pub fn adopt(ifname: &str, state: &str) -> Result<AfPacketDualPort, PortError> {
        let mut parts = state.split('|');
        let (Some("dual"), Some(f), Some(b), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid("handover state"));
        };
        let fast = AfPacketPort::adopt(ifname, f)?;
        let bulk = AfPacketPort::adopt(ifname, b)?;
        let ep = epoll_of(&[fast.fd.as_raw_fd(), bulk.fd.as_raw_fd()])?;
        Ok(AfPacketDualPort {
            fast,
            bulk,
            ep,
            rolled: 0,
            from: (0, 0),
            bulk_used: false,
        })
    }

    /// Whether the V2 slots hold every frame of an interface with `mtu`.
    pub fn fits_mtu(&self, mtu: u32) -> bool {
        self.fast.rx_frame_size >= AfPacketOptions::rx_frame_size_for_mtu(mtu)
    }

    /// Bytes of ring memory (both sockets).
    pub fn ring_bytes(&self) -> usize {
        self.fast.ring_bytes() + self.bulk.ring_bytes()
    }
}

/// A handover line written by [`AfPacketDualPort::handover_state`]?
pub fn is_dual_state(state: &str) -> bool {
    state.starts_with("dual|")
}

fn epoll_of(fds: &[RawFd]) -> Result<OwnedFd, PortError> {
    // SAFETY: epoll_create1 has no preconditions; the result is checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(os("epoll_create1")(io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor we own.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for &fd in fds {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: both descriptors are open; `ev` is a live epoll_event.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(os("epoll_ctl")(io::Error::last_os_error()));
        }
    }
    Ok(ep)
}

impl Port for AfPacketDualPort {
    fn name(&self) -> &str {
        self.bulk.name()
    }

    fn recv(&mut self, batch: &mut FrameBatch, port_id: u16) -> Result<usize, PortError> {
        // Rolled-over frames are older than anything the V2 ring got
        // after it had room again: them first.
        let b = self.bulk.recv(batch, port_id)?;
        if b > 0 {
            self.bulk_used = true;
        } else if self.bulk_used {
            // Drained after a burst: let the kernel clear the V3 socket's
            // "pressure" flag, which it sets when that ring is three
            // quarters full and otherwise clears only in poll(2) or
            // recvmsg; while set, the fanout rolls nothing over to it and
            // a full V2 ring drops. One system call per burst.
            self.bulk_used = false;
            let mut pfd = libc::pollfd {
                fd: self.bulk.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; timeout 0 never blocks.
            unsafe { libc::poll(&mut pfd, 1, 0) };
        }
        let f = self.fast.recv(batch, port_id)?;
        self.from.0 += f as u64;
        self.from.1 += b as u64;
        Ok(b + f)
    }

    fn tx_slot(&mut self) -> Option<&mut [u8]> {
        self.bulk.tx_slot()
    }

    fn tx_commit(&mut self, len: usize) {
        self.bulk.tx_commit(len)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.bulk.flush()
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.ep.as_raw_fd())
    }

    /// The epoll set holds the V2 ring, which wakes per frame.
    fn rx_ready_per_frame(&self) -> bool {
        true
    }

    fn set_mtu(&mut self, mtu: u32) {
        self.fast.set_mtu(mtu);
        self.bulk.set_mtu(mtu);
    }

    fn stats(&mut self) -> PortStats {
        let f = self.fast.stats();
        let b = self.bulk.stats();
        PortStats {
            rx_ring_drops: f.rx_ring_drops + b.rx_ring_drops,
            rx_truncated: f.rx_truncated + b.rx_truncated,
            tx_ring_full: b.tx_ring_full,
            tx_errors: b.tx_errors,
            rx_csum_completed: f.rx_csum_completed + b.rx_csum_completed,
            ..PortStats::default()
        }
    }

    fn discard_tx(&mut self) {
        self.bulk.discard_tx()
    }

    fn take_tx(&mut self, out: &mut dyn FnMut(&[u8])) {
        self.bulk.take_tx(out)
    }

    fn handover(&mut self) -> Option<String> {
        self.handover_state()
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        self.bulk.send(frame)
    }
}
