//! The punt queue: frames the layer-3 stage hands to the control plane.
//!
//! Workers must not make a system call per punted frame, and the control
//! plane (the thread that owns the TAP interfaces) must never block a
//! worker. So a punt is a copy into a buffer taken from a fixed pool, pushed
//! on a bounded lock-free queue; the control thread writes it to the TAP and
//! returns the buffer. When the pool is empty the frame is dropped and
//! counted (`punt-queue-full`): the control plane is busy or flooded, and
//! forwarding goes on regardless. All buffers are allocated at start.
//!
//! Two lanes: the consumer empties the *priority* lane (routing protocol
//! keepalives, CoPP class `routing-hello`) before it takes anything from
//! the normal one, and the lanes have separate pools, so a hello neither
//! waits behind nor loses its buffer to thousands of queued link-state
//! updates (issue 13). Each lane has buffers of two sizes: small ones for
//! ordinary frames (routing protocol packets are at most the link MTU,
//! usually 1,500) and a few of [`MAX_FRAME_LEN`] for jumbo frames, so a
//! deep queue costs kilobytes per slot, not nine.

use crossbeam_queue::ArrayQueue;
use io::MAX_FRAME_LEN;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Size of a small punt buffer: an Ethernet frame of MTU 1,500 with two
/// VLAN tags fits, with room to spare.
pub const SMALL_BUF: usize = 2048;

/// One punted frame.
pub struct PuntBuf {
    /// Ingress port id.
    pub port: u16,
    /// `pipeline::l3::Punt` as a number (for counters and debugging).
    pub reason: u8,
    /// VLAN of a switched frame (snooping), 0 otherwise.
    pub vlan: u16,
    pub len: usize,
    pub data: Box<[u8]>,
}

impl PuntBuf {
    pub fn frame(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

/// How many buffers of each size a queue holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PuntDepth {
    /// Normal lane: small buffers ([`SMALL_BUF`]).
    pub small: usize,
    /// Normal lane: buffers of [`MAX_FRAME_LEN`].
    pub large: usize,
    /// Priority lane: small buffers (0 = no priority lane; priority
    /// pushes go to the normal lane).
    pub priority: usize,
}

impl PuntDepth {
    /// `n` buffers of [`MAX_FRAME_LEN`] in one lane.
    pub const fn large(n: usize) -> PuntDepth {
        PuntDepth {
            small: 0,
            large: n,
            priority: 0,
        }
    }
}

/// The free buffers of a lane, by size.
struct Pool {
    small: ArrayQueue<Box<PuntBuf>>,
    large: ArrayQueue<Box<PuntBuf>>,
}

fn buffers(q: &ArrayQueue<Box<PuntBuf>>, n: usize, size: usize) {
    for _ in 0..n {
        let _ = q.push(Box::new(PuntBuf {
            port: 0,
            reason: 0,
            vlan: 0,
            len: 0,
            data: vec![0u8; size].into_boxed_slice(),
        }));
    }
}

impl Pool {
    fn new(small: usize, large: usize) -> Pool {
        let p = Pool {
            small: ArrayQueue::new(small.max(1)),
            large: ArrayQueue::new(large.max(1)),
        };
        buffers(&p.small, small, SMALL_BUF);
        buffers(&p.large, large, MAX_FRAME_LEN);
        p
    }

    /// A buffer that holds `len` bytes: small if one is free and big
    /// enough, else large.
    #[inline]
    fn take(&self, len: usize) -> Option<Box<PuntBuf>> {
        if len <= SMALL_BUF {
            if let Some(b) = self.small.pop() {
                return Some(b);
            }
        }
        self.large.pop()
    }

    fn give(&self, b: Box<PuntBuf>) {
        let _ = if b.data.len() == SMALL_BUF {
            self.small.push(b)
        } else {
            self.large.push(b)
        };
    }
}

/// Fixed pools of buffers and the queues of filled ones, in two lanes,
/// plus the wake-up of the consumer.
pub struct PuntQueue {
    /// Lane 0: priority; lane 1: normal.
    pools: [Pool; 2],
    /// Filled buffers, per lane.
    full: [ArrayQueue<Box<PuntBuf>>; 2],
    /// Set by the consumer before it sleeps; a producer that sees it writes
    /// the eventfd once (not per frame).
    sleeping: AtomicBool,
    event: OwnedFd,
    /// Whether there is a priority lane.
    has_priority: bool,
}

impl PuntQueue {
    /// A queue of `depth` buffers of `MAX_FRAME_LEN` bytes, one lane.
    pub fn new(depth: usize) -> std::io::Result<PuntQueue> {
        PuntQueue::with_depth(PuntDepth::large(depth.max(1)))
    }

    /// A queue with the buffers `d` describes.
    pub fn with_depth(d: PuntDepth) -> std::io::Result<PuntQueue> {
        // SAFETY: eventfd has no memory preconditions; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(PuntQueue {
            pools: [Pool::new(d.priority, 0), Pool::new(d.small, d.large)],
            full: [
                ArrayQueue::new(d.priority.max(1)),
                ArrayQueue::new((d.small + d.large).max(1)),
            ],
            sleeping: AtomicBool::new(false),
            // SAFETY: `fd` is a fresh descriptor owned by nobody else.
            event: unsafe { OwnedFd::from_raw_fd(fd) },
            has_priority: d.priority > 0,
        })
    }

    /// Producer side: copy `frame` in. False (frame not queued) when every
    /// buffer is in use.
    #[inline]
    pub fn push(&self, port: u16, reason: u8, frame: &[u8]) -> bool {
        self.push_lane(1, port, 0, reason, frame)
    }

    /// [`push`](Self::push) on the priority lane (the normal lane if the
    /// queue has none, or the frame is too long for its buffers).
    #[inline]
    pub fn push_priority(&self, port: u16, reason: u8, frame: &[u8]) -> bool {
        let lane = usize::from(!(self.has_priority && frame.len() <= SMALL_BUF));
        self.push_lane(lane, port, 0, reason, frame)
    }

    /// [`push`](Self::push) with the VLAN the frame was switched in.
    #[inline]
    pub fn push_in_vlan(&self, port: u16, vlan: u16, reason: u8, frame: &[u8]) -> bool {
        self.push_lane(1, port, vlan, reason, frame)
    }

    #[inline]
    fn push_lane(&self, lane: usize, port: u16, vlan: u16, reason: u8, frame: &[u8]) -> bool {
        let Some(mut b) = self.pools[lane].take(frame.len()) else {
            return false;
        };
        let n = frame.len().min(b.data.len());
        b.data[..n].copy_from_slice(&frame[..n]);
        b.len = n;
        b.port = port;
        b.reason = reason;
        b.vlan = vlan;
        // Cannot fail: a lane has as many queue slots as buffers.
        let _ = self.full[lane].push(b);
        true
    }

    /// Producer side, once per batch that pushed something: wake the
    /// consumer if it is asleep.
    #[inline]
    pub fn wake(&self) {
        if self.sleeping.load(Ordering::Acquire) && self.sleeping.swap(false, Ordering::AcqRel) {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
            unsafe {
                libc::write(
                    self.event.as_raw_fd(),
                    &one as *const u64 as *const libc::c_void,
                    8,
                )
            };
        }
    }

    /// Producer side: signal the eventfd unconditionally (for consumers
    /// that poll it among other descriptors, several of them at once).
    pub fn kick(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        unsafe {
            libc::write(
                self.event.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    /// Consumer side: the next punted frame, priority lane first.
    pub fn pop(&self) -> Option<Box<PuntBuf>> {
        self.full[0].pop().or_else(|| self.full[1].pop())
    }

    /// Consumer side: give a buffer back. Small buffers of both lanes are
    /// alike: the priority pool is refilled first, up to its size, so the
    /// count of each pool is kept whichever lane a buffer served.
    pub fn recycle(&self, b: Box<PuntBuf>) {
        let p = &self.pools[0];
        if self.has_priority && b.data.len() == SMALL_BUF && p.small.len() < self.priority_depth() {
            if let Err(b) = p.small.push(b) {
                self.pools[1].give(b);
            }
            return;
        }
        self.pools[1].give(b);
    }

    fn priority_depth(&self) -> usize {
        self.full[0].capacity()
    }

    /// Consumer side: about to sleep in poll(2) on [`PuntQueue::event_fd`].
    /// Returns false if frames arrived meanwhile (do not sleep).
    pub fn prepare_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        if !self.is_empty() {
            self.sleeping.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Consumer side: after waking, reset the eventfd.
    pub fn clear_wake(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a valid u64; non-blocking fd.
        unsafe {
            libc::read(
                self.event.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
    }

    /// Consumer side: reset the eventfd only (for [`PuntQueue::kick`]).
    pub fn drain_event(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a valid u64; non-blocking fd.
        unsafe {
            libc::read(
                self.event.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
    }

    /// Readable when a producer woke the consumer.
    pub fn event_fd(&self) -> RawFd {
        self.event.as_raw_fd()
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.full[0].len() + self.full[1].len()
    }

    pub fn is_empty(&self) -> bool {
        self.full[0].is_empty() && self.full[1].is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_then_refuses_then_recycles() {
        let q = PuntQueue::new(2).unwrap();
        assert!(q.push(1, 0, &[1, 2, 3]));
        assert!(q.push(2, 1, &[4; 100]));
        assert!(!q.push(3, 0, &[5]), "pool exhausted: refused, not blocked");
        let a = q.pop().unwrap();
        assert_eq!((a.port, a.reason, a.frame()), (1, 0, &[1u8, 2, 3][..]));
        q.recycle(a);
        assert!(q.push(3, 0, &[5]));
        let b = q.pop().unwrap();
        assert_eq!((b.port, b.frame().len()), (2, 100));
        assert_eq!(q.pop().unwrap().frame(), &[5]);
        assert!(q.pop().is_none());
    }

    #[test]
    fn priority_lane_first_and_with_its_own_buffers() {
        let q = PuntQueue::with_depth(PuntDepth {
            small: 3,
            large: 1,
            priority: 2,
        })
        .unwrap();
        // The normal lane fills: three small frames and one jumbo.
        for k in 0..3 {
            assert!(q.push(k, 4, &[k as u8; 1500]));
        }
        assert!(q.push(3, 4, &[3; 9000]));
        assert!(!q.push(4, 4, &[4; 64]), "normal lane full");
        // Hellos still get in, and come out first.
        assert!(q.push_priority(10, 0, &[10; 80]));
        assert!(q.push_priority(11, 0, &[11; 80]));
        assert!(!q.push_priority(12, 0, &[12; 80]), "priority lane full");
        let order: Vec<u16> = std::iter::from_fn(|| {
            q.pop().map(|b| {
                let p = b.port;
                assert_eq!(b.frame()[0], p as u8);
                q.recycle(b);
                p
            })
        })
        .collect();
        assert_eq!(order, vec![10, 11, 0, 1, 2, 3]);
        // Every buffer came back to its pool: the same counts fit again.
        for k in 0..3 {
            assert!(q.push(k, 4, &[0; 100]));
        }
        assert!(q.push(3, 4, &[0; 5000]));
        assert!(!q.push(4, 4, &[0; 100]));
        assert!(q.push_priority(10, 0, &[0; 80]) && q.push_priority(11, 0, &[0; 80]));
        assert!(!q.push_priority(12, 0, &[0; 80]));
        // A queue without a priority lane takes priority pushes normally;
        // a frame too long for small buffers goes to the normal lane.
        let plain = PuntQueue::new(2).unwrap();
        assert!(plain.push_priority(1, 0, &[0; 60]));
        assert_eq!(plain.len(), 1);
        let q = PuntQueue::with_depth(PuntDepth {
            small: 0,
            large: 1,
            priority: 1,
        })
        .unwrap();
        assert!(q.push_priority(1, 0, &[0; 3000]));
        assert_eq!(q.pop().unwrap().frame().len(), 3000);
    }

    #[test]
    fn wake_signals_a_sleeping_consumer_once() {
        let q = PuntQueue::new(4).unwrap();
        assert!(q.prepare_sleep());
        q.push(0, 0, &[1]);
        q.wake();
        q.wake(); // second wake: flag already cleared, no second write
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes into a u64 from our eventfd.
        let n = unsafe { libc::read(q.event_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
        assert_eq!((n, v), (8, 1));
        assert!(!q.prepare_sleep(), "frames pending: must not sleep");
    }
}
