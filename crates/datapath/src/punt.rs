//! The punt queue: frames the layer-3 stage hands to the control plane.
//!
//! Workers must not make a system call per punted frame, and the control
//! plane (the thread that owns the TAP interfaces) must never block a
//! worker. So a punt is a copy into a buffer taken from a fixed pool, pushed
//! on a bounded lock-free queue; the control thread writes it to the TAP and
//! returns the buffer. When the pool is empty the frame is dropped and
//! counted (`punt-queue-full`): the control plane is busy or flooded, and
//! forwarding goes on regardless. All buffers are allocated at start.

use crossbeam_queue::ArrayQueue;
use io::MAX_FRAME_LEN;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

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

/// Fixed pool of buffers and the queue of filled ones, plus the wake-up
/// of the consumer.
pub struct PuntQueue {
    free: ArrayQueue<Box<PuntBuf>>,
    full: ArrayQueue<Box<PuntBuf>>,
    /// Set by the consumer before it sleeps; a producer that sees it writes
    /// the eventfd once (not per frame).
    sleeping: AtomicBool,
    event: OwnedFd,
}

impl PuntQueue {
    /// A queue of `depth` buffers of `MAX_FRAME_LEN` bytes.
    pub fn new(depth: usize) -> std::io::Result<PuntQueue> {
        let depth = depth.max(1);
        let free = ArrayQueue::new(depth);
        for _ in 0..depth {
            let _ = free.push(Box::new(PuntBuf {
                port: 0,
                reason: 0,
                vlan: 0,
                len: 0,
                data: vec![0u8; MAX_FRAME_LEN].into_boxed_slice(),
            }));
        }
        // SAFETY: eventfd has no memory preconditions; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(PuntQueue {
            free,
            full: ArrayQueue::new(depth),
            sleeping: AtomicBool::new(false),
            // SAFETY: `fd` is a fresh descriptor owned by nobody else.
            event: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Producer side: copy `frame` in. False (frame not queued) when every
    /// buffer is in use.
    #[inline]
    pub fn push(&self, port: u16, reason: u8, frame: &[u8]) -> bool {
        self.push_in_vlan(port, 0, reason, frame)
    }

    /// [`push`](Self::push) with the VLAN the frame was switched in.
    #[inline]
    pub fn push_in_vlan(&self, port: u16, vlan: u16, reason: u8, frame: &[u8]) -> bool {
        let Some(mut b) = self.free.pop() else {
            return false;
        };
        let n = frame.len().min(b.data.len());
        b.data[..n].copy_from_slice(&frame[..n]);
        b.len = n;
        b.port = port;
        b.reason = reason;
        b.vlan = vlan;
        // Cannot fail: there are as many queue slots as buffers.
        let _ = self.full.push(b);
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

    /// Consumer side: the next punted frame.
    pub fn pop(&self) -> Option<Box<PuntBuf>> {
        self.full.pop()
    }

    /// Consumer side: give a buffer back.
    pub fn recycle(&self, b: Box<PuntBuf>) {
        let _ = self.free.push(b);
    }

    /// Consumer side: about to sleep in poll(2) on [`PuntQueue::event_fd`].
    /// Returns false if frames arrived meanwhile (do not sleep).
    pub fn prepare_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        if !self.full.is_empty() {
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
        self.full.len()
    }

    pub fn is_empty(&self) -> bool {
        self.full.is_empty()
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
