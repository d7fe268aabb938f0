//! Ports: the only layer of Lanyard that touches interfaces.
//!
//! A port moves batches of Ethernet frames between an interface and a
//! [`FrameBatch`] (receive) or a transmit ring (send). It never decides where a
//! frame goes: that is the pipeline's job.
//!
//! # Contract of [`Port`]
//! - **Receive** appends up to `batch.space()` frames to a caller-owned
//!   [`FrameBatch`]; the frame bytes are *copied* into the batch arena, so the
//!   port's ring slots are returned to the kernel before `recv` returns.
//!   Frames arrive exactly as they were on the wire (without FCS): a VLAN tag
//!   the kernel moved into metadata is put back in place. The exception: an
//!   AF_XDP port on its worker's shared UMEM ([`af_xdp::shared`]) leaves a
//!   one-chunk frame where the kernel put it, held by the batch until the
//!   frame is moved to another port ([`Port::tx_umem`]) or the batch is
//!   cleared.
//! - **Transmit** is two-step and copy-once: [`Port::tx_slot`] lends a slot of
//!   the transmit ring, the caller writes the frame into it, [`Port::tx_commit`]
//!   queues it; [`Port::flush`] hands everything queued to the kernel with one
//!   system call. A `None` slot means the ring is full ("would block"): the
//!   caller counts a drop and goes on — ports never block the forwarding loop.
//! - No method allocates or takes a lock per frame.

pub mod af_packet;
pub mod af_xdp;
pub mod batch;
pub mod cable;
pub mod inject;
pub mod link;
pub mod memory;
pub mod tap;

pub use af_packet::{AfPacketOptions, AfPacketPort, RxRing};
pub use af_xdp::{AfXdpOptions, AfXdpPort};
pub use batch::{FrameBatch, ARENA_BYTES, BATCH_MAX, MAX_FRAME_LEN};
pub use inject::InjectSocket;
pub use link::LinkInfo;
pub use memory::{MemoryPeer, MemoryPort};
pub use tap::{TapOptions, TapPort};

use std::fmt;
use std::os::fd::RawFd;

/// Why a port operation failed.
#[derive(Debug)]
pub enum PortError {
    /// The interface does not exist (any more).
    NoSuchInterface(String),
    /// The interface exists but is administratively or operationally down.
    Down(String),
    /// The driver refused a frame handed to it (`ENOBUFS`: no carrier, or
    /// the far end's queue is full). The frame stays queued and goes with
    /// the next flush; the caller may want to look at the link.
    Refused(String),
    /// Any other operating-system error, with the operation that failed.
    Os {
        op: &'static str,
        err: std::io::Error,
    },
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortError::NoSuchInterface(n) => write!(f, "interface {n} does not exist"),
            PortError::Down(n) => write!(f, "interface {n} is down"),
            PortError::Refused(n) => write!(
                f,
                "interface {n} refused a frame (no carrier or queue full)"
            ),
            PortError::Os { op, err } => write!(f, "{op}: {err}"),
        }
    }
}

impl std::error::Error for PortError {}

/// Per-port counters kept by the backend itself (ring-level events the
/// pipeline cannot see).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PortStats {
    /// Frames the kernel dropped because the receive ring was full.
    pub rx_ring_drops: u64,
    /// Frames received but longer than the ring slot (truncated) and dropped.
    pub rx_truncated: u64,
    /// Frames offered for transmit while the transmit ring was full.
    pub tx_ring_full: u64,
    /// Frames the kernel reported as failed to send.
    pub tx_errors: u64,
    /// Received TCP/UDP checksums completed for a sender that left them
    /// to offload (veth ports; see [`complete_checksums`]).
    pub rx_csum_completed: u64,
    /// Frames sent by moving a shared-UMEM descriptor (no copy).
    pub umem_moved: u64,
    /// A gauge, not a count: receive chunks of the port's shared-UMEM
    /// region away from its rings now (see
    /// [`AfXdpPort::umem_chunks_away`]).
    pub umem_away: u64,
}

/// Threads [`in_parallel`] runs at once.
const PARALLEL: usize = 32;

/// `f` over `items` on up to 32 threads, results in item order; for
/// socket set-up and tear-down that waits on the kernel. Closing an
/// AF_XDP socket (`xsk_unbind_dev`) and setting up a packet socket's ring
/// (`packet_set_ring`) each wait for an RCU grace period
/// (`synchronize_net`, ~10 ms here); threads waiting together share grace
/// periods, where one after another 410 ports took 11 s to close and
/// 4.4 s to open (docs/scale.md). Items of a thread that could not be
/// made, or that panicked, are dropped without a result.
pub fn in_parallel<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    if items.len() < 2 {
        return items.into_iter().map(f).collect();
    }
    let per = items.len().div_ceil(PARALLEL);
    let mut items = items;
    let f = &f;
    std::thread::scope(|s| {
        let mut threads = Vec::new();
        while !items.is_empty() {
            let chunk: Vec<T> = items.drain(..per.min(items.len())).collect();
            let t = std::thread::Builder::new()
                .name("port-setup".into())
                .spawn_scoped(s, move || chunk.into_iter().map(f).collect::<Vec<R>>());
            threads.extend(t.ok());
        }
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap_or_default())
            .collect()
    })
}

/// Closes many ports at once (see [`in_parallel`]): a 410-port switch
/// stops in about a second.
pub fn close_all(ports: Vec<Box<dyn Port>>) {
    in_parallel(ports, drop);
}

/// A switch port backend. See the crate documentation for the contract.
pub trait Port: Send {
    /// Interface name this port is attached to.
    fn name(&self) -> &str;
    /// Append received frames to `batch`, tagging each with `port_id`.
    /// Never blocks; returns how many frames were appended (0 = none ready).
    fn recv(&mut self, batch: &mut FrameBatch, port_id: u16) -> Result<usize, PortError>;
    /// Lend the next free transmit slot (at least [`MAX_FRAME_LEN`] bytes),
    /// or `None` if the transmit ring is full.
    fn tx_slot(&mut self) -> Option<&mut [u8]>;
    /// Queue the frame written into the slot last lent by `tx_slot`.
    fn tx_commit(&mut self, len: usize);
    /// Hand every queued frame to the kernel (at most one system call).
    fn flush(&mut self) -> Result<(), PortError>;
    /// A file descriptor that becomes readable when frames are waiting, for
    /// `poll(2)` when the forwarding loop is idle.
    fn rx_fd(&self) -> Option<RawFd>;
    /// Whether [`Port::rx_fd`] turns readable as soon as a frame waits (not
    /// only when a block of them is handed over): then a worker may stop
    /// polling an idle port's ring and wait for its descriptor instead.
    fn rx_ready_per_frame(&self) -> bool {
        false
    }
    /// A port that busy polls (AF_XDP, docs/io.md "Busy polling"): how long
    /// its worker keeps polling after the last frame before it sleeps.
    fn busy_poll_spin(&self) -> Option<std::time::Duration> {
        None
    }
    /// Ring-level counters (no lookups of the interface: a worker calls
    /// this for each of its ports every 200 ms).
    fn stats(&mut self) -> PortStats;

    /// The interface's MTU changed to `mtu`: frames longer than it are
    /// refused from now on. The supervisor, which watches the interface,
    /// says so; the port reads the MTU itself only when it opens.
    fn set_mtu(&mut self, mtu: u32) {
        let _ = mtu;
    }

    /// Drop frames queued for transmit that the kernel has not taken (the
    /// link went down: they must not leave, stale, when it returns).
    fn discard_tx(&mut self) {}

    /// Like [`Port::discard_tx`], handing each frame to `out` first (a
    /// failover resends them on the port that took over).
    fn take_tx(&mut self, out: &mut dyn FnMut(&[u8])) {
        let _ = out;
        self.discard_tx();
    }

    /// Prepare to hand the port to a successor image (restart in place);
    /// `None` if this backend cannot. After `Some`, the port must be
    /// neither used nor dropped.
    fn handover(&mut self) -> Option<String> {
        None
    }

    /// The worker's shared UMEM this port is bound to (AF_XDP,
    /// [`af_xdp::shared`]), if any.
    fn umem(&self) -> Option<&std::sync::Arc<af_xdp::SharedUmem>> {
        None
    }

    /// Queue the frame at offset `addr` (`len` bytes, one chunk) of the
    /// shared UMEM [`Port::umem`] names as it is, without a copy: the
    /// chunk is the port's until its completion ring returns it. False
    /// (nothing queued) when the ring is full or the frame does not fit.
    fn tx_umem(&mut self, addr: u64, len: usize) -> bool {
        let _ = (addr, len);
        false
    }

    /// Copy `frame` into a transmit slot and queue it. Returns false (and
    /// counts nothing) if the ring is full or the frame does not fit.
    fn send(&mut self, frame: &[u8]) -> bool {
        match self.tx_slot() {
            Some(slot) if slot.len() >= frame.len() => {
                slot[..frame.len()].copy_from_slice(frame);
                self.tx_commit(frame.len());
                true
            }
            _ => false,
        }
    }
}

/// Complete the TCP/UDP checksums that a local sender on a veth left to
/// "hardware" in `batch`'s frames from index `from` on; how many changed.
///
/// A host behind a veth (a container, a namespace) hands its packets over
/// with only the pseudo-header sum in the checksum field and a flag that a
/// raw socket does not see; forwarded as they are, every receiver drops
/// them (`wire::offload`). Run by the AF_XDP and AF_PACKET ports of veth
/// interfaces only: a NIC never delivers such frames. Costs a header parse
/// per frame and a checksum pass over the frames that need it.
pub fn complete_checksums(batch: &mut FrameBatch, from: usize) -> u64 {
    let mut n = 0;
    for i in from..batch.len() {
        n += u64::from(wire::offload::complete_partial(batch.frame_mut(i)));
    }
    n
}

#[cfg(test)]
mod tests {
    #[test]
    fn in_parallel_keeps_every_item_in_order() {
        for n in [0, 1, 2, 31, 33, 410] {
            let out = super::in_parallel((0..n).collect(), |x: u32| x * 2);
            assert_eq!(out, (0..n).map(|x| x * 2).collect::<Vec<_>>(), "{n} items");
        }
    }
}
