//! Which TAP twins have frames, for the punt thread.
//!
//! The punt thread used to read every twin on every pass and to sleep in
//! poll(2) over all of them: with 410 routed ports, 410 reads and a
//! 411-entry poll for each hello it relayed (issue 21, docs/scale.md).
//! A level-triggered epoll set, registered once, reports only the twins
//! that have frames, and a wait costs what is ready, not what is
//! registered; a twin left with frames (a full batch) is reported again.
//! Without epoll (never seen) every twin is read every pass and the sleep
//! is poll(2), as before.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The punt queue's token in the epoll set (TAPs use their index).
const QUEUE: u64 = u64::MAX;
/// Readiness events taken per wait; more ready twins are reported by the
/// next wait (level-triggered).
const EVENTS: usize = 64;

pub(crate) struct TapReadiness {
    ep: Option<OwnedFd>,
    /// The punt queue's eventfd, then every twin (the fallback's set).
    pollfds: Vec<libc::pollfd>,
    taps: usize,
    events: [libc::epoll_event; EVENTS],
}

impl TapReadiness {
    /// `queue`: the punt queue's eventfd; `taps[k]`: twin `k`'s descriptor.
    pub(crate) fn new(queue: RawFd, taps: &[RawFd]) -> TapReadiness {
        let pollfds: Vec<libc::pollfd> = std::iter::once(queue)
            .chain(taps.iter().copied())
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut r = TapReadiness {
            ep: None,
            pollfds,
            taps: taps.len(),
            events: [libc::epoll_event { events: 0, u64: 0 }; EVENTS],
        };
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            let e = std::io::Error::last_os_error();
            tracing::warn!("punt: no epoll ({e}); every twin is read every pass");
            return r;
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        for (k, p) in r.pollfds.iter().enumerate() {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: if k == 0 { QUEUE } else { (k - 1) as u64 },
            };
            // SAFETY: epoll_ctl on descriptors the caller holds open; `ev`
            // outlives the call.
            if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, p.fd, &mut ev) } != 0 {
                let e = std::io::Error::last_os_error();
                tracing::warn!("punt: epoll refused a twin ({e}); every twin is read every pass");
                return r;
            }
        }
        r.ep = Some(ep);
        r
    }

    /// Waits up to `timeout_ms` (0: only looks) for a twin with frames or
    /// the punt queue's wake-up, and puts the indexes of the twins to read
    /// in `ready` (cleared first).
    pub(crate) fn wait(&mut self, timeout_ms: i32, ready: &mut Vec<usize>) {
        ready.clear();
        match &self.ep {
            Some(ep) => {
                // SAFETY: `events` is an exclusively borrowed array of
                // EVENTS entries.
                let n = unsafe {
                    libc::epoll_wait(
                        ep.as_raw_fd(),
                        self.events.as_mut_ptr(),
                        EVENTS as i32,
                        timeout_ms,
                    )
                };
                for ev in &self.events[..n.max(0) as usize] {
                    // A copy: the field of the packed struct is unaligned.
                    let token = ev.u64;
                    if token != QUEUE {
                        ready.push(token as usize);
                    }
                }
            }
            None => {
                // SAFETY: pollfds is a valid array of pollfd of this length.
                unsafe {
                    libc::poll(
                        self.pollfds.as_mut_ptr(),
                        self.pollfds.len() as libc::nfds_t,
                        timeout_ms,
                    )
                };
                ready.extend(0..self.taps);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: fresh descriptors owned by nobody else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    fn put(w: &OwnedFd) {
        // SAFETY: writes one byte from a live buffer.
        assert_eq!(
            unsafe { libc::write(w.as_raw_fd(), [1u8].as_ptr().cast(), 1) },
            1
        );
    }

    #[test]
    fn only_twins_with_frames_are_reported_until_read() {
        let queue = pipe();
        let twins: Vec<(OwnedFd, OwnedFd)> = (0..300).map(|_| pipe()).collect();
        let fds: Vec<RawFd> = twins.iter().map(|(r, _)| r.as_raw_fd()).collect();
        let mut r = TapReadiness::new(queue.0.as_raw_fd(), &fds);
        assert!(r.ep.is_some());
        let mut ready = vec![7];
        r.wait(0, &mut ready);
        assert!(ready.is_empty(), "nothing readable: {ready:?}");
        put(&twins[3].1);
        put(&twins[299].1);
        r.wait(0, &mut ready);
        ready.sort();
        assert_eq!(ready, [3, 299]);
        // Level-triggered: still there until read.
        r.wait(0, &mut ready);
        assert_eq!(ready.len(), 2);
        let mut b = [0u8; 1];
        // SAFETY: reads one byte into a live buffer.
        unsafe { libc::read(twins[3].0.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        r.wait(0, &mut ready);
        assert_eq!(ready, [299]);
    }

    #[test]
    fn the_queue_wakes_a_sleep_without_naming_a_twin() {
        let queue = pipe();
        let twin = pipe();
        let mut r = TapReadiness::new(queue.0.as_raw_fd(), &[twin.0.as_raw_fd()]);
        let mut ready = Vec::new();
        let t = Instant::now();
        r.wait(50, &mut ready);
        assert!(ready.is_empty() && t.elapsed() >= Duration::from_millis(40));
        put(&queue.1);
        let t = Instant::now();
        r.wait(5_000, &mut ready);
        assert!(ready.is_empty() && t.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn more_ready_twins_than_events_are_all_reported_over_waits() {
        let queue = pipe();
        let twins: Vec<(OwnedFd, OwnedFd)> = (0..EVENTS * 2 + 5).map(|_| pipe()).collect();
        let fds: Vec<RawFd> = twins.iter().map(|(r, _)| r.as_raw_fd()).collect();
        let mut r = TapReadiness::new(queue.0.as_raw_fd(), &fds);
        for (_, w) in &twins {
            put(w);
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut ready = Vec::new();
        for _ in 0..3 {
            r.wait(0, &mut ready);
            assert!(ready.len() <= EVENTS);
            for &k in &ready {
                let mut b = [0u8; 1];
                // SAFETY: reads one byte into a live buffer.
                unsafe { libc::read(twins[k].0.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
                seen.insert(k);
            }
        }
        assert_eq!(seen.len(), twins.len());
    }
}
