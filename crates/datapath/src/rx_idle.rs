//! Idle receive rings parked on their descriptors.
//!
//! A worker with hundreds of receive ports (the chassis case) would read
//! every ring's producer index on every pass, although most of them stay
//! empty: at 410 ports that cost 12 % of the forwarding rate. A ring that
//! stayed empty for [`PARK_AFTER`] turns is parked instead: its descriptor
//! is armed once in the worker's epoll set (`EPOLLONESHOT`), the receive
//! pass walks only the rings not parked ([`IdleRings::live`]), and one
//! `epoll_wait(0)` every [`LOOK_EVERY`] passes (only while some ring is
//! parked) brings back the rings that became readable. Arming re-checks
//! readiness, so a frame that arrived between the last empty read and the
//! arming still wakes the ring. A ring whose socket was replaced (a reset
//! after the descriptor was armed) cannot be lost: every [`SWEEP_EVERY`]
//! passes the parked rings are read directly as well.
//!
//! Only ports whose descriptor turns readable per frame are parked (not
//! TPACKET_V3, which wakes per retired block), and only on workers with at
//! least [`PARK_MIN_RINGS`] rings: below that, reading the rings costs less
//! than the system call.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Rings per worker below which nothing is parked.
pub(crate) const PARK_MIN_RINGS: usize = 32;
/// Consecutive empty turns before a ring is parked.
pub(crate) const PARK_AFTER: u16 = 256;
/// Passes between direct reads of the parked rings (the safety net).
pub(crate) const SWEEP_EVERY: u32 = 1024;
/// Passes between looks at the parked rings' readiness. A look is a
/// system call; made every pass it cost a busy 410-port worker a fifth of
/// its time. A frame on a parked ring waits at most this many passes (a
/// few microseconds each under load; an idle worker sleeps on every ring's
/// descriptor and wakes at once).
pub(crate) const LOOK_EVERY: u32 = 8;
/// Readiness events taken per `epoll_wait`.
const EVENTS: usize = 64;

pub(crate) struct IdleRings {
    /// The epoll set, made when the first ring is parked.
    ep: Option<OwnedFd>,
    /// Per receive index: consecutive empty turns.
    streak: Vec<u16>,
    /// Per receive index: skipped by the receive pass.
    parked: Vec<bool>,
    nparked: usize,
    /// The receive indices not parked, ascending, rebuilt when `parked`
    /// changed: the receive pass walks these instead of every ring (with
    /// 205 rings per worker, the walk itself cost a quarter of a busy
    /// worker's time).
    live: Vec<u16>,
    live_dirty: bool,
    pass: u32,
    events: Box<[libc::epoll_event; EVENTS]>,
    /// Times a ring was parked, and woken (by readiness, frames on a
    /// sweep, or a reset), and what [`IdleRings::publish`] last charged.
    parks: u64,
    wakes: u64,
    published: (u64, u64),
}

impl IdleRings {
    pub(crate) fn new() -> IdleRings {
        IdleRings {
            ep: None,
            streak: Vec::new(),
            parked: Vec::new(),
            nparked: 0,
            live: Vec::new(),
            live_dirty: true,
            pass: 0,
            events: Box::new([libc::epoll_event { events: 0, u64: 0 }; EVENTS]),
            parks: 0,
            wakes: 0,
            published: (0, 0),
        }
    }

    /// The receive list changed: every ring is polled again. The epoll set
    /// is dropped with its registrations (its indices named the old list).
    pub(crate) fn reset(&mut self, rings: usize) {
        self.ep = None;
        self.wakes += self.nparked as u64;
        self.streak.clear();
        self.streak.resize(rings, 0);
        self.parked.clear();
        self.parked.resize(rings, false);
        self.nparked = 0;
        self.live_dirty = true;
    }

    /// Whether any ring is parked now.
    #[inline]
    pub(crate) fn any_parked(&self) -> bool {
        self.nparked > 0
    }

    /// The rings not parked, ascending (valid until the next park or
    /// unpark; a ring parked during the walk just gets one more turn).
    #[inline]
    pub(crate) fn live(&mut self) -> &[u16] {
        if self.live_dirty {
            self.live.clear();
            self.live.extend(
                self.parked
                    .iter()
                    .enumerate()
                    .filter(|(_, &p)| !p)
                    .map(|(i, _)| i as u16),
            );
            self.live_dirty = false;
        }
        &self.live
    }

    /// Start of a receive call: take the readiness of parked rings. Returns
    /// whether this call is a sweep (parked rings are read directly too).
    #[inline]
    pub(crate) fn begin(&mut self) -> bool {
        self.pass = self.pass.wrapping_add(1);
        if self.nparked == 0 {
            return false;
        }
        if !self.pass.is_multiple_of(LOOK_EVERY) {
            return false;
        }
        if let Some(ep) = &self.ep {
            // SAFETY: `events` is an exclusively borrowed array of EVENTS
            // entries; a zero timeout never blocks.
            let n = unsafe {
                libc::epoll_wait(ep.as_raw_fd(), self.events.as_mut_ptr(), EVENTS as i32, 0)
            };
            for k in 0..n.max(0) as usize {
                let i = self.events[k].u64 as usize;
                self.unpark(i);
            }
        }
        self.pass.is_multiple_of(SWEEP_EVERY)
    }

    /// Whether ring `i` sits this pass out (the receive pass walks
    /// [`IdleRings::live`], which leaves these out).
    #[cfg(test)]
    fn skip(&self, i: usize, sweep: bool) -> bool {
        !sweep && self.parked.get(i).copied().unwrap_or(false)
    }

    /// Ring `i` gave frames.
    #[inline]
    pub(crate) fn busy(&mut self, i: usize) {
        if let Some(s) = self.streak.get_mut(i) {
            *s = 0;
        }
        self.unpark(i);
    }

    /// Ring `i` was empty; returns true when it has been empty long enough
    /// to be parked (the caller then calls [`IdleRings::park`]).
    #[inline]
    pub(crate) fn empty(&mut self, i: usize, rings: usize) -> bool {
        if rings < PARK_MIN_RINGS || self.parked.get(i).copied().unwrap_or(true) {
            return false;
        }
        let s = &mut self.streak[i];
        *s = s.saturating_add(1);
        *s >= PARK_AFTER
    }

    /// Park ring `i` on descriptor `fd`. A ring that cannot be armed keeps
    /// being polled (and is tried again after another streak).
    pub(crate) fn park(&mut self, i: usize, fd: RawFd) {
        self.streak[i] = 0;
        let Some(ep) = self.epoll() else {
            return;
        };
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
            u64: i as u64,
        };
        // SAFETY: plain epoll_ctl calls on descriptors we hold; `ev` lives
        // across them. MOD re-arms a descriptor registered before; ENOENT
        // means it is new (or a reset replaced it) and ADD registers it.
        let ok = unsafe {
            libc::epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, &mut ev) == 0
                || libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) == 0
        };
        if ok {
            self.parked[i] = true;
            self.nparked += 1;
            self.parks += 1;
            self.live_dirty = true;
        }
    }

    fn unpark(&mut self, i: usize) {
        if let Some(p) = self.parked.get_mut(i) {
            if *p {
                *p = false;
                self.nparked -= 1;
                self.wakes += 1;
                self.live_dirty = true;
            }
        }
    }

    fn epoll(&mut self) -> Option<RawFd> {
        if self.ep.is_none() {
            // SAFETY: epoll_create1 returns a new descriptor or -1.
            let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if fd < 0 {
                return None;
            }
            // SAFETY: `fd` is a fresh descriptor owned by nobody else.
            self.ep = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        self.ep.as_ref().map(|e| e.as_raw_fd())
    }

    /// Charge parks and wakes since the last call to the worker's counters.
    pub(crate) fn publish(&mut self, c: &pipeline::WorkerCounters) {
        c.ring_parks.add(self.parks - self.published.0);
        c.ring_wakes.add(self.wakes - self.published.1);
        self.published = (self.parks, self.wakes);
    }

    #[cfg(test)]
    fn parked_count(&self) -> usize {
        self.nparked
    }
}

/// Eventfds standing in for rings' descriptors (also `wake_set`'s tests).
#[cfg(test)]
pub(crate) mod test_fds {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    pub(crate) fn eventfd() -> OwnedFd {
        // SAFETY: eventfd returns a new descriptor or -1 (checked).
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: fresh descriptor.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    /// Makes the eventfd readable.
    pub(crate) fn signal(fd: &OwnedFd) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a valid u64.
        let n = unsafe { libc::write(fd.as_raw_fd(), &one as *const u64 as *const _, 8) };
        assert_eq!(n, 8);
    }
}

#[cfg(test)]
mod tests {
    use super::test_fds::{eventfd, signal};
    use super::*;

    /// Passes until the parked rings' readiness has been looked at.
    fn look(r: &mut IdleRings) {
        for _ in 0..LOOK_EVERY {
            r.begin();
        }
    }

    fn idle_until_parked(r: &mut IdleRings, i: usize, fd: &OwnedFd, rings: usize) {
        for _ in 0..PARK_AFTER - 1 {
            assert!(!r.empty(i, rings));
        }
        assert!(r.empty(i, rings));
        r.park(i, fd.as_raw_fd());
    }

    #[test]
    fn a_parked_ring_wakes_on_readiness_and_only_then() {
        let rings = PARK_MIN_RINGS;
        let mut r = IdleRings::new();
        r.reset(rings);
        let fds: Vec<OwnedFd> = (0..3).map(|_| eventfd()).collect();
        for (i, fd) in fds.iter().enumerate() {
            idle_until_parked(&mut r, i, fd, rings);
        }
        assert_eq!(r.parked_count(), 3);
        assert!(!r.begin());
        assert!(r.skip(0, false) && r.skip(1, false) && r.skip(2, false));
        assert!(!r.skip(3, false), "never parked");
        signal(&fds[1]);
        look(&mut r);
        assert!(r.skip(0, false) && !r.skip(1, false) && r.skip(2, false));
        assert_eq!(r.parked_count(), 2);
        // Parked again while still readable: arming re-checks readiness,
        // so the frame that is already waiting wakes it at once.
        idle_until_parked(&mut r, 1, &fds[1], rings);
        look(&mut r);
        assert!(!r.skip(1, false));
        assert_eq!((r.parks, r.wakes), (4, 2));
    }

    #[test]
    fn few_rings_are_never_parked_and_busy_rings_restart_their_streak() {
        let mut r = IdleRings::new();
        r.reset(4);
        for _ in 0..PARK_AFTER as usize * 2 {
            assert!(!r.empty(0, 4));
        }
        r.reset(PARK_MIN_RINGS);
        for _ in 0..PARK_AFTER - 1 {
            assert!(!r.empty(0, PARK_MIN_RINGS));
        }
        r.busy(0);
        assert!(!r.empty(0, PARK_MIN_RINGS), "the streak started over");
    }

    #[test]
    fn the_sweep_reads_parked_rings_whose_descriptor_went_away() {
        let rings = PARK_MIN_RINGS;
        let mut r = IdleRings::new();
        r.reset(rings);
        let fd = eventfd();
        idle_until_parked(&mut r, 5, &fd, rings);
        drop(fd); // a reset replaced the socket: no readiness will come
        let mut swept = false;
        for _ in 0..SWEEP_EVERY {
            let sweep = r.begin();
            assert!(r.skip(5, false));
            if sweep {
                assert!(!r.skip(5, sweep));
                swept = true;
            }
        }
        assert!(swept, "a sweep within SWEEP_EVERY passes");
        // A parked ring that gave frames on the sweep is polled again.
        r.busy(5);
        assert!(!r.skip(5, false));
        assert_eq!(r.parked_count(), 0);
    }

    /// The live list is every ring but the parked ones, in order, and
    /// follows parks and wakes.
    #[test]
    fn the_live_list_leaves_out_parked_rings() {
        let rings = PARK_MIN_RINGS;
        let mut r = IdleRings::new();
        r.reset(rings);
        assert_eq!(r.live().len(), rings);
        assert!(!r.any_parked());
        let fds: Vec<OwnedFd> = (0..rings).map(|_| eventfd()).collect();
        for (i, fd) in fds.iter().enumerate().filter(|(i, _)| *i != 3 && *i != 17) {
            idle_until_parked(&mut r, i, fd, rings);
        }
        assert!(r.any_parked());
        assert_eq!(r.live(), &[3, 17]);
        signal(&fds[9]);
        look(&mut r);
        assert_eq!(r.live(), &[3, 9, 17]);
        r.reset(rings);
        assert_eq!(r.live().len(), rings);
    }

    #[test]
    fn out_of_range_indices_are_harmless() {
        let mut r = IdleRings::new();
        r.reset(2);
        r.busy(9);
        assert!(!r.skip(9, false));
        assert!(!r.empty(9, 2));
    }
}
