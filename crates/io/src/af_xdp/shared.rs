//! One UMEM per worker, shared by the AF_XDP ports it receives on
//! (`XDP_SHARED_UMEM`), so a frame from one of them to another moves as
//! a descriptor: the chunk the kernel received it into goes on the other
//! port's transmit ring as it is (after in-place header edits).
//!
//! - **Layout**: one memfd with `regions` port regions: every region's
//!   `rx_frames` receive chunks first (region after region, so a chunk's
//!   region and index are shifts of its address: `rx_frames` is a power of
//!   two), then every region's `tx_slots` transmit slots. A port takes a
//!   region when it opens and keeps it;
//!   regions are not reused (the pool is sized for the ports its worker
//!   owns plus one spare: a port beyond that opens with its own UMEM).
//! - **Sockets**: the first port registers the UMEM (`XDP_UMEM_REG`); the
//!   others bind with `XDP_SHARED_UMEM` to a live member's socket, each
//!   with its own fill and completion ring (the kernel asks for one pair
//!   per device and queue). A shared socket takes the registering one's
//!   mode (copy or zero-copy, multi-buffer): where the kernel refuses that
//!   bind, the port falls back to its own UMEM.
//! - **Chunk ownership** is exact: a receive chunk belongs to its region's
//!   port and is, at any time, in that port's fill or receive ring (the
//!   kernel's), held by a frame of the worker's batch, on another port's
//!   transmit ring (`out[chunk]` names which), or in the region's return
//!   stack. A chunk sent by port B comes back through B's completion ring
//!   only; B pushes it onto its owner's return stack, and the owner puts
//!   it in its fill ring at its next receive. Floods and mirrors copy (into
//!   the other ports' own transmit slots): only unicast moves.
//! - **Threads**: the return stacks and `out` are touched by the worker
//!   thread only (receive, transmit, batch clear, completions, a port's
//!   reset or drop; a port that never sent a moved frame recalls nothing,
//!   so one the supervisor drops after a failed open touches neither, and
//!   the ports a stopping worker closes on several threads at once recall
//!   one at a time); the supervisor, which opens ports, touches only the
//!   region counter and the member list (a mutex, never per frame).

use super::{os, CHUNK, TX_SLOT};
use crate::PortError;
use std::cell::UnsafeCell;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// The UMEM chunk size, for the batch that holds chunks (`crate::batch`
/// names it here, not in `af_xdp`, which itself uses the batch).
pub const CHUNK_BYTES: usize = CHUNK;

/// Chunk accounting, touched by the worker thread only (module docs).
struct State {
    /// Per region: its chunks to hand back to its fill ring.
    back: Vec<Vec<u64>>,
    /// Per receive chunk (region-major): 0, or 1 + the region of the port
    /// whose transmit ring it is on.
    out: Vec<u8>,
}

/// A worker's shared UMEM (see the module docs).
pub struct SharedUmem {
    /// The memfd behind the mapping.
    _fd: OwnedFd,
    base: *mut u8,
    len: usize,
    rx_frames: u32,
    tx_slots: u32,
    /// Bytes of every region's receive chunks (the transmit slots follow).
    rx_area: usize,
    /// log2(`rx_frames`).
    rx_shift: u32,
    regions: u32,
    next_region: AtomicU32,
    /// Bind flags of the socket that registered the UMEM (0: none yet):
    /// the mode every shared socket takes.
    flags: AtomicU32,
    /// Sockets bound on this UMEM now (one is named in `XDP_SHARED_UMEM`).
    members: Mutex<Vec<RawFd>>,
    /// Taken by `recall` alone: a worker that stops closes its ports on
    /// several threads at once (`crate::close_all`), each recalling.
    recalling: Mutex<()>,
    st: UnsafeCell<State>,
}

// SAFETY: the mapping is owned by this value; `st` is used by one thread
// at a time (the worker's, module docs), the rest is atomic or locked.
unsafe impl Send for SharedUmem {}
// SAFETY: as above.
unsafe impl Sync for SharedUmem {}

/// Most regions of one shared UMEM (`out` holds 1 + a region in a byte).
pub const MAX_REGIONS: u32 = 254;

impl SharedUmem {
    /// A UMEM of `regions` port regions of `rx_frames` receive chunks and
    /// `tx_slots` transmit slots each (powers of two, as for a port).
    pub fn new(regions: u32, rx_frames: u32, tx_slots: u32) -> Result<SharedUmem, PortError> {
        if regions == 0
            || regions > MAX_REGIONS
            || !rx_frames.is_power_of_two()
            || !tx_slots.is_power_of_two()
            || rx_frames < 64
            || tx_slots < 16
        {
            return Err(PortError::Os {
                op: "shared UMEM",
                err: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "bad region count or ring sizes",
                ),
            });
        }
        let rx_area = regions as usize * rx_frames as usize * CHUNK;
        let len = rx_area + regions as usize * tx_slots as usize * TX_SLOT;
        let fd = super::umem_memfd(len).map_err(os("memfd(shared UMEM)"))?;
        let base = super::map_umem(&fd, len).map_err(os("mmap(shared UMEM)"))?;
        let chunks = regions as usize * rx_frames as usize;
        Ok(SharedUmem {
            _fd: fd,
            base,
            len,
            rx_frames,
            tx_slots,
            rx_area,
            rx_shift: rx_frames.trailing_zeros(),
            regions,
            next_region: AtomicU32::new(0),
            flags: AtomicU32::new(0),
            members: Mutex::new(Vec::new()),
            recalling: Mutex::new(()),
            st: UnsafeCell::new(State {
                back: (0..regions)
                    .map(|_| Vec::with_capacity(rx_frames as usize))
                    .collect(),
                out: vec![0; chunks],
            }),
        })
    }

    /// The mapping's first byte.
    #[inline]
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Length of the mapping (every region).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a UMEM has at least one region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Receive chunks and transmit slots per region.
    pub fn rings(&self) -> (u32, u32) {
        (self.rx_frames, self.tx_slots)
    }

    /// Regions in all, and regions taken so far.
    pub fn regions(&self) -> (u32, u32) {
        (
            self.regions,
            self.next_region.load(Ordering::Relaxed).min(self.regions),
        )
    }

    /// Offset of region `r`'s receive chunks in the UMEM.
    #[inline]
    pub(super) fn region_base(&self, r: u32) -> u64 {
        (r as usize * self.rx_frames as usize * CHUNK) as u64
    }

    /// Offset of region `r`'s transmit slots in the UMEM.
    pub(super) fn region_tx_base(&self, r: u32) -> u64 {
        (self.rx_area + r as usize * self.tx_slots as usize * TX_SLOT) as u64
    }

    pub(super) fn flags(&self) -> u16 {
        self.flags.load(Ordering::Relaxed) as u16
    }

    pub(super) fn set_flags(&self, f: u16) {
        self.flags.store(f as u32, Ordering::Relaxed);
    }

    /// A region for a new port, or `None` when all are taken.
    pub(super) fn take_region(&self) -> Option<u32> {
        let r = self.next_region.fetch_add(1, Ordering::Relaxed);
        (r < self.regions).then_some(r)
    }

    /// A live socket on this UMEM to share it through, if any.
    pub(super) fn anchor(&self, except: Option<RawFd>) -> Option<RawFd> {
        let m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        m.iter().copied().find(|&fd| Some(fd) != except)
    }

    pub(super) fn join(&self, fd: &OwnedFd) {
        let mut m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        m.push(fd.as_raw_fd());
    }

    /// The socket `fd` is about to close.
    pub(super) fn leave(&self, fd: RawFd) {
        let mut m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|&f| f != fd);
    }

    /// The region and index of receive chunk `addr`, if it is one.
    #[inline]
    fn chunk_at(&self, addr: u64) -> Option<(usize, usize)> {
        let a = addr as usize;
        if a >= self.rx_area {
            return None;
        }
        let c = a / CHUNK;
        Some((c >> self.rx_shift, c & (self.rx_frames as usize - 1)))
    }

    /// Whether `addr` is a receive chunk of this UMEM (any region).
    #[inline]
    pub(super) fn is_rx_chunk(&self, addr: u64) -> bool {
        self.chunk_at(addr).is_some()
    }

    /// # Safety (all the methods below)
    /// Worker thread only (module docs).
    #[allow(clippy::mut_from_ref)]
    #[inline]
    fn st(&self) -> &mut State {
        // SAFETY: one thread at a time (the worker's), and no method
        // keeps the borrow past its return.
        unsafe { &mut *self.st.get() }
    }

    /// A frame's chunk was not sent anywhere: back to its owner.
    #[inline]
    pub fn give_back(&self, chunk: u64) {
        let Some((r, _)) = self.chunk_at(chunk) else {
            return;
        };
        let b = &mut self.st().back[r];
        if b.len() < b.capacity() {
            b.push(chunk);
        }
    }

    /// `chunk` went on the transmit ring of the port of region `to`.
    #[inline]
    pub(super) fn lend(&self, chunk: u64, to: u32) {
        if let Some((r, i)) = self.chunk_at(chunk) {
            self.st().out[r * self.rx_frames as usize + i] = to as u8 + 1;
        }
    }

    /// A lent chunk completed on the port of region `by` (or that port
    /// lost its socket): back to its owner. False if it was not lent there.
    #[inline]
    pub(super) fn complete(&self, chunk: u64, by: u32) -> bool {
        let Some((r, i)) = self.chunk_at(chunk) else {
            return false;
        };
        let st = self.st();
        let o = &mut st.out[r * self.rx_frames as usize + i];
        if *o != by as u8 + 1 {
            return false;
        }
        *o = 0;
        let b = &mut st.back[r];
        if b.len() < b.capacity() {
            b.push(chunk & !(CHUNK as u64 - 1));
        }
        true
    }

    /// Every chunk lent to region `by`'s port back to its owner (that
    /// port's socket closed with them on its rings); how many.
    pub(super) fn recall(&self, by: u32) -> u32 {
        let _one = self.recalling.lock().unwrap_or_else(|e| e.into_inner());
        let n = self.rx_frames as usize;
        let mut k = 0;
        for r in 0..self.regions as usize {
            for i in 0..n {
                if self.st().out[r * n + i] == by as u8 + 1 {
                    let c = self.region_base(r as u32) + (i * CHUNK) as u64;
                    self.complete(c, by);
                    k += 1;
                }
            }
        }
        k
    }

    /// Region `r`'s return stack, emptied into `f` (its fill ring).
    #[inline]
    pub(super) fn take_back(&self, r: u32, mut f: impl FnMut(u64)) -> u32 {
        let b = &mut self.st().back[r as usize];
        let n = b.len() as u32;
        for c in b.drain(..) {
            f(c);
        }
        n
    }

    /// Chunks in region `r`'s return stack.
    pub(crate) fn back_len(&self, r: u32) -> u32 {
        self.st().back[r as usize].len() as u32
    }

    /// Region `r`'s chunks that are not lent to another port: what a fresh
    /// socket of its port starts with in its fill ring (`f` each). The
    /// return stack is emptied (those chunks are among them).
    pub(super) fn home_chunks(&self, r: u32, mut f: impl FnMut(u64)) -> u32 {
        let n = self.rx_frames as usize;
        self.st().back[r as usize].clear();
        let base = self.region_base(r);
        let mut k = 0;
        for i in 0..n {
            if self.st().out[r as usize * n + i] == 0 {
                f(base + (i * CHUNK) as u64);
                k += 1;
            }
        }
        k
    }
}

impl std::fmt::Debug for SharedUmem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, taken) = self.regions();
        write!(
            f,
            "SharedUmem({} bytes, {taken}/{n} regions of {}+{})",
            self.len, self.rx_frames, self.tx_slots
        )
    }
}

/// The same UMEM (identity, not contents).
impl PartialEq for SharedUmem {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for SharedUmem {}

impl Drop for SharedUmem {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; every port and batch that
        // used it holds an `Arc` of this value, so none is left.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
