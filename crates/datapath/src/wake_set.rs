//! The descriptors an idle worker sleeps on, kept in an epoll set.
//!
//! poll(2) looks at every descriptor on every call: with 205 receive
//! sockets per worker (the 410-port chassis) each sleep ran `xsk_poll` on
//! all of them, and a worker that sleeps between bursts spent about a
//! fifth of its time there (perf, issue 21). An epoll set is registered
//! once, when the receive list changes, and a wait costs what is ready,
//! not what is registered. Level-triggered, so a ring that still holds
//! frames wakes the next wait at once, as with poll(2).
//!
//! A socket replaced behind the worker's back would leave the set (epoll
//! drops a descriptor when its file closes), but sockets are only replaced
//! by commands the worker runs itself, after which the set is rebuilt; the
//! sleep is bounded by `max_sleep` in any case.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Readiness events taken per wait: the worker only needs to know that
/// something is ready.
const EVENTS: usize = 16;

pub(crate) struct WakeSet {
    ep: Option<OwnedFd>,
    /// What is registered, and the fallback when epoll is unavailable.
    pollfds: Vec<libc::pollfd>,
    events: [libc::epoll_event; EVENTS],
}

impl WakeSet {
    pub(crate) fn new() -> WakeSet {
        WakeSet {
            ep: None,
            pollfds: Vec::new(),
            events: [libc::epoll_event { events: 0, u64: 0 }; EVENTS],
        }
    }

    /// Register `fds` (replacing what was registered).
    pub(crate) fn rebuild(&mut self, fds: impl IntoIterator<Item = RawFd>) {
        self.pollfds = fds
            .into_iter()
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        self.ep = None;
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return;
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        for p in &self.pollfds {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: p.fd as u64,
            };
            // SAFETY: plain epoll_ctl on descriptors we hold; `ev` outlives
            // the call.
            if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, p.fd, &mut ev) } != 0 {
                // A descriptor epoll refuses: poll(2) over all of them.
                return;
            }
        }
        self.ep = Some(ep);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pollfds.is_empty()
    }

    /// Sleep until a registered descriptor is readable or `max` passes.
    pub(crate) fn wait(&mut self, max: Duration) {
        let ms = max.as_millis().clamp(1, i32::MAX as u128) as i32;
        match &self.ep {
            // SAFETY: `events` is an exclusively borrowed array of EVENTS
            // entries.
            Some(ep) => unsafe {
                libc::epoll_wait(ep.as_raw_fd(), self.events.as_mut_ptr(), EVENTS as i32, ms);
            },
            // SAFETY: `pollfds` is a valid, exclusively borrowed array of
            // pollfd whose length is passed alongside.
            None => unsafe {
                libc::poll(
                    self.pollfds.as_mut_ptr(),
                    self.pollfds.len() as libc::nfds_t,
                    ms,
                );
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rx_idle::test_fds::{eventfd, signal};
    use std::time::Instant;

    /// A readable descriptor ends the wait at once, and keeps ending it
    /// while it stays readable (level-triggered); an idle set sleeps.
    #[test]
    fn wakes_on_any_registered_descriptor_and_stays_level_triggered() {
        let fds: Vec<OwnedFd> = (0..40).map(|_| eventfd()).collect();
        let mut w = WakeSet::new();
        w.rebuild(fds.iter().map(|f| f.as_raw_fd()));
        assert!(w.ep.is_some() && !w.is_empty());
        let long = Duration::from_secs(5);
        let t = Instant::now();
        w.wait(Duration::from_millis(30));
        assert!(
            t.elapsed() >= Duration::from_millis(25),
            "nothing ready: slept"
        );
        signal(&fds[33]);
        for _ in 0..3 {
            let t = Instant::now();
            w.wait(long);
            assert!(t.elapsed() < Duration::from_secs(2), "ready: no sleep");
        }
    }

    /// After a rebuild only the new descriptors count.
    #[test]
    fn a_rebuild_replaces_the_registrations() {
        let (a, b) = (eventfd(), eventfd());
        let mut w = WakeSet::new();
        w.rebuild([a.as_raw_fd()]);
        signal(&a);
        w.rebuild([b.as_raw_fd()]);
        let t = Instant::now();
        w.wait(Duration::from_millis(30));
        assert!(t.elapsed() >= Duration::from_millis(25), "a left the set");
        w.rebuild(std::iter::empty());
        assert!(w.is_empty());
    }
}
