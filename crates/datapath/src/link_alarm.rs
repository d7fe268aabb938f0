//! Link alarms: a worker whose transmit to a port was refused by the
//! driver (`io::PortError::Refused`, e.g. carrier lost) tells the
//! supervisor to look at that port's link now, not at its next poll or
//! when the kernel's link watch gets round to an event (up to a second).
//!
//! One bit per port and an eventfd: a worker sets the bit and writes the
//! eventfd only when the bit was clear, so a port that keeps refusing
//! costs one system call per supervisor pass, not one per batch.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use tables::MAX_PORTS;

const WORDS: usize = MAX_PORTS.div_ceil(64);

pub struct LinkAlarm {
    bits: [AtomicU64; WORDS],
    event: OwnedFd,
}

impl LinkAlarm {
    pub fn new() -> std::io::Result<LinkAlarm> {
        // SAFETY: eventfd has no memory preconditions; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(LinkAlarm {
            bits: std::array::from_fn(|_| AtomicU64::new(0)),
            // SAFETY: `fd` is a fresh descriptor owned by nobody else.
            event: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Worker side: port `id` refused a transmit.
    #[inline]
    pub fn raise(&self, id: u16) {
        let (w, b) = (id as usize / 64, 1u64 << (id % 64));
        let Some(word) = self.bits.get(w) else {
            return;
        };
        if word.load(Ordering::Relaxed) & b != 0 {
            return;
        }
        if word.fetch_or(b, Ordering::AcqRel) & b == 0 {
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

    /// Supervisor side: readable when an alarm was raised.
    pub fn event_fd(&self) -> RawFd {
        self.event.as_raw_fd()
    }

    /// Supervisor side: the ports raised since the last call (their bits
    /// cleared, the eventfd reset).
    pub fn take(&self, out: &mut Vec<u16>) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64 from our eventfd.
        unsafe {
            libc::read(
                self.event.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
        for (w, word) in self.bits.iter().enumerate() {
            let mut x = word.swap(0, Ordering::AcqRel);
            while x != 0 {
                let b = x.trailing_zeros();
                out.push((w * 64) as u16 + b as u16);
                x &= x - 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raised_ports_are_taken_once() {
        let a = LinkAlarm::new().unwrap();
        let mut out = Vec::new();
        a.take(&mut out);
        assert!(out.is_empty());
        a.raise(3);
        a.raise(3);
        a.raise(200);
        a.raise(u16::MAX); // out of range: ignored
        let mut pfd = libc::pollfd {
            fd: a.event_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1, "eventfd readable");
        a.take(&mut out);
        assert_eq!(out, vec![3, 200]);
        out.clear();
        a.take(&mut out);
        assert!(out.is_empty());
        // SAFETY: as above.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 0, "eventfd reset");
    }
}
