//! The next hops the FIB uses, held as *managed* neighbours (issue 21).
//!
//! Lanyard forwards without the kernel, so the kernel never sees the
//! neighbour entries of Lanyard's next hops being used. Its collection is
//! host-wide (`gc_thresh1/2/3`, 128 / 512 / 1,024 by default): above 128
//! entries it deletes entries unused for `gc_stale_time`, and the mirror
//! then drops its copy, the next packet is punted (`needs-resolution`) and
//! the kernel resolves the neighbour again — a slow path that recurs on a
//! router with hundreds of neighbours. A managed entry (`NTF_MANAGED`,
//! Linux ≥ 5.16) is resolved by the kernel without a packet waiting and
//! re-confirmed every `interval_probe_time_ms` (5 s), which keeps it in use
//! in the kernel's eyes, so the ageing collection leaves it alone.
//!
//! One [`ManagedNeighbors`] runs in each neighbour mirror thread (the
//! default VRF's and each VRF's namespace), for its FIB: the gateways of
//! the live next hops ([`Fib::gateways`]) on its twins are *wanted*; a
//! wanted entry is made managed, and one no route uses any more is handed
//! back to the kernel's ordinary ageing (the flag cleared, the resolved
//! state kept; an entry that never resolved is deleted).
//!
//! What it leaves alone: entries that are `PERMANENT` or `NOARP` (static
//! neighbours, the virtual-switch peer's `NOARP | EXT_LEARNED` entries) or
//! `EXT_LEARNED`. A managed update is an admin update: it would clear
//! `EXT_LEARNED` and strip `PERMANENT`. A new entry is created with
//! `NLM_F_EXCL`, so one installed meanwhile by someone else is never
//! overwritten (it is looked at and decided on again).
//!
//! Bounded work: the wanted set is recomputed only when the FIB's next
//! hops changed ([`Fib::next_hop_generation`]) or every
//! [`RECHECK`] (twins may change), never while another thread holds the
//! FIB (`try_lock`); a pass makes at most [`MAX_OPS_PER_PASS`] requests;
//! a refused request is retried after [`RETRY_AFTER`]; at most
//! [`MAX_MANAGED`] entries per namespace. Nothing here runs per packet.
//!
//! Limits of the kernel's side: above `gc_thresh2` (512) entries its
//! *forced* collection may still take a managed entry whose state has not
//! changed for 5 s (as does a flush). Such an entry is made again at once
//! (counted `re-added`), and the data path keeps forwarding to the MAC it
//! had (*bridged*, [`ManagedNeighbors::observe`]) until the kernel has
//! resolved the new entry, given up on it (`FAILED`: the neighbour really
//! went) or [`BRIDGE_FOR`] passed — so no packet takes the slow path.

use crate::fib::Fib;
use crate::kernel::neigh::{
    NeighborEvent, NTF_EXT_LEARNED, NTF_MANAGED, NUD_DELAY, NUD_FAILED, NUD_NOARP, NUD_NONE,
    NUD_PERMANENT, NUD_PROBE, NUD_REACHABLE, NUD_STALE,
};
use crate::kernel::Rtnl;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// (twin ifindex, gateway).
pub type Key = (u32, IpAddr);

/// Requests one pass makes at most (each is one rtnetlink round trip,
/// some 10–30 µs).
pub const MAX_OPS_PER_PASS: usize = 256;
/// Managed entries one namespace holds at most (the kernel refuses new
/// entries above `gc_thresh3` anyway; docs/scale.md).
pub const MAX_MANAGED: usize = 8192;
/// The wanted set is recomputed at least this often.
pub const RECHECK: Duration = Duration::from_secs(2);
/// A refused request is tried again after this long.
pub const RETRY_AFTER: Duration = Duration::from_secs(10);
/// How long the data path keeps a held entry the kernel deleted while
/// the kernel resolves it again (a resolution takes milliseconds; one
/// that fails ends sooner, after its probes: about 3 s by default).
pub const BRIDGE_FOR: Duration = Duration::from_secs(10);

/// Counters of every namespace's managed neighbours (`show counters`).
#[derive(Debug, Default)]
pub struct ManagedStats {
    /// The kernel supports managed neighbours (Linux ≥ 5.16).
    pub supported: AtomicBool,
    /// Entries held managed now.
    pub held: AtomicU64,
    /// Wanted entries left alone now: static or externally learned.
    pub left_alone: AtomicU64,
    /// Gateways over [`MAX_MANAGED`] not held, now.
    pub over_limit: AtomicU64,
    /// Entries made managed.
    pub added: AtomicU64,
    /// Entries handed back (no route uses them any more).
    pub released: AtomicU64,
    /// Held entries the kernel deleted anyway (forced collection, flush),
    /// made again.
    pub readded: AtomicU64,
    /// Of those, entries the data path kept forwarding to while the
    /// kernel resolved them again (none took the slow path).
    pub bridged: AtomicU64,
    /// Requests the kernel refused.
    pub errors: AtomicU64,
}

/// What a pass asks of the kernel: an rtnetlink socket in the mirror's
/// namespace ([`Rtnl`]), or a fake in tests.
pub trait NeighOps {
    /// Make `key` managed; `exclusive`: it must not exist yet.
    fn manage(&mut self, key: Key, exclusive: bool) -> io::Result<()>;
    /// Clear the managed flag, keeping state and address.
    fn unmanage(&mut self, key: Key) -> io::Result<()>;
    /// Delete the entry.
    fn delete(&mut self, key: Key) -> io::Result<()>;
    /// The kernel's entry now.
    fn get(&mut self, key: Key) -> io::Result<Option<NeighborEvent>>;
}

impl NeighOps for Rtnl {
    fn manage(&mut self, key: Key, exclusive: bool) -> io::Result<()> {
        self.manage_neigh(key.0, key.1, exclusive)
    }
    fn unmanage(&mut self, key: Key) -> io::Result<()> {
        self.unmanage_neigh(key.0, key.1)
    }
    fn delete(&mut self, key: Key) -> io::Result<()> {
        self.del_neigh(key.0, key.1)
    }
    fn get(&mut self, key: Key) -> io::Result<Option<NeighborEvent>> {
        self.get_neigh(key.0, key.1)
    }
}

/// Turns managed neighbours off when set to `off` (an escape hatch, and
/// how a test shows what happens without them).
pub const OFF_ENV: &str = "LANYARD_MANAGED_NEIGHBORS";

/// Whether this kernel has managed neighbours (Linux ≥ 5.16) and they are
/// not turned off ([`OFF_ENV`]). An older kernel would ignore the flag
/// and, for an existing entry, take the request's empty state: never
/// asked there.
pub fn supported() -> bool {
    if std::env::var(OFF_ENV).is_ok_and(|v| v == "off") {
        return false;
    }
    // SAFETY: utsname is plain data; all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid utsname for the call to write.
    if unsafe { libc::uname(&mut u) } != 0 {
        return false;
    }
    let release: String = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8 as char)
        .collect();
    release_at_least(&release, 5, 16)
}

/// `release` (`uname -r`, e.g. `6.1.0-18-amd64`) is at least
/// `major.minor`.
pub fn release_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|s| s.parse::<u32>().ok());
    match (it.next().flatten(), it.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

/// The kernel's entry as last seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    state: u16,
    flags: u32,
}

impl Seen {
    fn of(ev: &NeighborEvent) -> Seen {
        Seen {
            state: ev.state,
            flags: ev.flags,
        }
    }

    /// Static or someone else's: never touched.
    fn foreign(&self) -> bool {
        self.state & (NUD_PERMANENT | NUD_NOARP) != 0
            || self.flags & u32::from(NTF_EXT_LEARNED) != 0
    }

    fn managed(&self) -> bool {
        self.flags & NTF_MANAGED != 0
    }

    /// Resolved (worth keeping when handed back).
    fn resolved(&self) -> bool {
        self.state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE) != 0
    }
}

/// One namespace's managed next hops; owned by its neighbour mirror.
#[derive(Debug)]
pub struct ManagedNeighbors {
    /// Gateways the FIB uses on this namespace's twins.
    want: HashSet<Key>,
    /// Entries held managed.
    held: HashSet<Key>,
    /// The kernel's entries of wanted or held keys, as last seen.
    kernel: HashMap<Key, Seen>,
    /// Held entries the kernel deleted (made again: counted `readded`).
    lost: HashSet<Key>,
    /// Held entries the kernel deleted whose copy in the data path is
    /// kept until the kernel has them resolved again, failed, or this
    /// instant passed.
    bridging: HashMap<Key, Instant>,
    /// Keys whose last request was refused: not again before then.
    backoff: HashMap<Key, Instant>,
    /// Something to do (want changed, an entry went, budget ran out).
    dirty: bool,
    fib_gen: Option<u64>,
    computed: Option<Instant>,
    /// Gateways over [`MAX_MANAGED`] at the last refresh.
    over: u64,
    /// Gauges as this namespace last added them to the shared counters.
    published: [u64; 3],
    scratch: Vec<(u16, IpAddr)>,
}

impl Default for ManagedNeighbors {
    fn default() -> Self {
        ManagedNeighbors::new()
    }
}

fn is(e: &io::Error, errno: i32) -> bool {
    e.raw_os_error() == Some(errno)
}

impl ManagedNeighbors {
    pub fn new() -> ManagedNeighbors {
        ManagedNeighbors {
            want: HashSet::new(),
            held: HashSet::new(),
            kernel: HashMap::new(),
            lost: HashSet::new(),
            bridging: HashMap::new(),
            backoff: HashMap::new(),
            dirty: false,
            fib_gen: None,
            computed: None,
            over: 0,
            published: [0; 3],
            scratch: Vec::new(),
        }
    }

    /// Entries held managed now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// One kernel event of this namespace's twins (every event the mirror
    /// sees, in order). Returns true when the mirror must not apply it: a
    /// held entry the kernel deleted (forced collection, flush), or its
    /// new entry not resolved yet — the data path keeps the MAC it had
    /// rather than punting every packet while the kernel resolves it
    /// again (milliseconds). A `FAILED` entry (the neighbour did not
    /// answer), a resolved one, or [`BRIDGE_FOR`] end that.
    pub fn observe(&mut self, ev: &NeighborEvent, now: Instant) -> bool {
        let key = (ev.ifindex, ev.ip);
        if !self.want.contains(&key) && !self.held.contains(&key) {
            return false;
        }
        // `ip neigh del` and flushes first mark the entry FAILED with the
        // managed flag cleared (an admin update), then delete it; the
        // forced collection deletes at once. Both are a held entry lost.
        let admin_delete = ev.state & NUD_FAILED != 0 && !ev.managed() && self.held.contains(&key);
        if ev.deleted || admin_delete {
            self.kernel.remove(&key);
            if self.held.remove(&key) {
                self.lost.insert(key);
                self.bridging.insert(key, now + BRIDGE_FOR);
            }
            self.dirty = true;
            return self.bridging.contains_key(&key);
        }
        let keep = if ev.usable() || ev.state & NUD_FAILED != 0 {
            self.bridging.remove(&key);
            false
        } else {
            self.bridging.contains_key(&key)
        };
        self.observe_present(ev);
        keep
    }

    /// Entries whose bridging ended without an event (the deadline passed,
    /// or no route uses them any more): the mirror removes its copy if the
    /// kernel has not resolved them since. Returns how many it put in
    /// `out`.
    pub fn bridges_ended(&mut self, now: Instant, out: &mut Vec<Key>) -> usize {
        let before = out.len();
        let want = &self.want;
        self.bridging.retain(|k, until| {
            let keep = *until > now && want.contains(k);
            if !keep {
                out.push(*k);
            }
            keep
        });
        out.len() - before
    }

    /// Entries bridged now.
    pub fn bridging(&self) -> usize {
        self.bridging.len()
    }

    fn observe_present(&mut self, ev: &NeighborEvent) {
        let key = (ev.ifindex, ev.ip);
        let seen = Seen::of(ev);
        // A managed entry changes state every reachable time or so; only
        // a change of what a pass decides on calls for one.
        let class = |s: Seen| (s.foreign(), s.managed());
        if self.kernel.insert(key, seen).map(class) != Some(class(seen)) {
            self.dirty = true;
        }
        // Replaced by a static or the peer's entry, or the flag was taken
        // away: no longer ours.
        if !seen.managed() {
            self.held.remove(&key);
        }
    }

    /// Recomputes the wanted set from `fib` when its next hops changed or
    /// [`RECHECK`] passed; `ports` maps this namespace's twin ifindexes
    /// to their ports. Skipped (until the next call) while another thread
    /// holds the FIB.
    pub fn refresh(&mut self, fib: &Mutex<Fib>, ports: &HashMap<u32, u16>, now: Instant) {
        let due = self
            .computed
            .is_none_or(|t| now.saturating_duration_since(t) >= RECHECK);
        let f = match fib.try_lock() {
            Ok(f) => f,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        let gen = f.next_hop_generation();
        if !due && self.fib_gen == Some(gen) {
            return;
        }
        f.gateways(&mut self.scratch);
        drop(f);
        self.fib_gen = Some(gen);
        self.computed = Some(now);
        let by_port: HashMap<u16, u32> = ports.iter().map(|(&i, &p)| (p, i)).collect();
        let mut over = 0u64;
        let mut want = HashSet::with_capacity(self.scratch.len().min(MAX_MANAGED));
        for (port, gw) in &self.scratch {
            let Some(&ifindex) = by_port.get(port) else {
                continue;
            };
            if want.len() >= MAX_MANAGED {
                over += 1;
                continue;
            }
            want.insert((ifindex, *gw));
        }
        self.over = over;
        self.set_wanted(want, ports);
    }

    /// Sets the wanted set directly (what [`refresh`](Self::refresh)
    /// computes); entries of twins not in `ports` are forgotten (a twin
    /// that went took its neighbours with it).
    pub fn set_wanted(&mut self, want: HashSet<Key>, ports: &HashMap<u32, u16>) {
        self.held.retain(|k| ports.contains_key(&k.0));
        self.lost.retain(|k| want.contains(k));
        if want != self.want {
            self.want = want;
            self.dirty = true;
        }
        let (want, held) = (&self.want, &self.held);
        self.kernel
            .retain(|k, _| want.contains(k) || held.contains(k));
        self.backoff
            .retain(|k, _| want.contains(k) || held.contains(k));
        if self.held.iter().any(|k| !self.want.contains(k))
            || self.want.iter().any(|k| !self.held.contains(k))
        {
            self.dirty = true;
        }
    }

    /// One pass: hands back what no route uses, makes managed what routes
    /// use, at most [`MAX_OPS_PER_PASS`] requests; updates `stats`.
    pub fn reconcile(&mut self, ops: &mut dyn NeighOps, stats: &ManagedStats, now: Instant) {
        let before = self.backoff.len();
        self.backoff.retain(|_, t| *t > now);
        let retry_due = self.backoff.len() != before;
        if !self.dirty && !retry_due {
            return;
        }
        self.dirty = false;
        let mut budget = MAX_OPS_PER_PASS;
        let waiting = |b: &HashMap<Key, Instant>, k: &Key| b.get(k).is_some_and(|t| *t > now);

        // 1. What no route uses any more goes back to the kernel.
        let gone: Vec<Key> = self
            .held
            .iter()
            .filter(|k| !self.want.contains(k))
            .copied()
            .collect();
        for key in gone {
            if waiting(&self.backoff, &key) {
                continue;
            }
            let r = match self.kernel.get(&key).copied() {
                // Gone, or no longer ours: nothing to hand back.
                None => Ok(()),
                Some(s) if !s.managed() || s.foreign() => Ok(()),
                Some(s) => {
                    if budget == 0 {
                        self.dirty = true;
                        break;
                    }
                    budget -= 1;
                    if s.resolved() {
                        ops.unmanage(key)
                    } else {
                        ops.delete(key)
                    }
                }
            };
            match r {
                Ok(()) => {
                    self.held.remove(&key);
                    self.kernel.remove(&key);
                    self.backoff.remove(&key);
                    stats.released.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if is(&e, libc::ENOENT) => {
                    self.held.remove(&key);
                    self.kernel.remove(&key);
                    self.backoff.remove(&key);
                }
                Err(_) => {
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                    self.backoff.insert(key, now + RETRY_AFTER);
                }
            }
        }

        // 2. What routes use is held.
        let todo: Vec<Key> = self
            .want
            .iter()
            .filter(|k| !self.held.contains(k))
            .copied()
            .collect();
        let mut left_alone = 0u64;
        for key in todo {
            let seen = self.kernel.get(&key).copied();
            match seen {
                Some(s) if s.foreign() => {
                    left_alone += 1;
                    continue;
                }
                // Managed already (ours from before a resync).
                Some(s) if s.managed() => {
                    self.held.insert(key);
                    continue;
                }
                _ => {}
            }
            if waiting(&self.backoff, &key) {
                continue;
            }
            if budget == 0 {
                self.dirty = true;
                break;
            }
            budget -= 1;
            match ops.manage(key, seen.is_none()) {
                Ok(()) => {
                    self.held.insert(key);
                    self.backoff.remove(&key);
                    let s = self.kernel.entry(key).or_insert(Seen {
                        state: NUD_NONE,
                        flags: 0,
                    });
                    s.flags |= NTF_MANAGED;
                    let c = if self.lost.remove(&key) {
                        if self.bridging.contains_key(&key) {
                            stats.bridged.fetch_add(1, Ordering::Relaxed);
                        }
                        &stats.readded
                    } else {
                        &stats.added
                    };
                    c.fetch_add(1, Ordering::Relaxed);
                }
                // Someone installed it meanwhile: look at it, decide on
                // the next pass.
                Err(e) if is(&e, libc::EEXIST) => {
                    self.dirty = true;
                    budget = budget.saturating_sub(1);
                    match ops.get(key) {
                        Ok(Some(ev)) => {
                            self.observe(&ev, now);
                        }
                        Ok(None) => {}
                        Err(_) => {
                            stats.errors.fetch_add(1, Ordering::Relaxed);
                            self.backoff.insert(key, now + RETRY_AFTER);
                        }
                    }
                }
                Err(_) => {
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                    self.backoff.insert(key, now + RETRY_AFTER);
                }
            }
        }
        self.publish(stats, left_alone);
    }

    /// Adds this namespace's change of the gauges to the shared counters.
    fn publish(&mut self, stats: &ManagedStats, left_alone: u64) {
        let now = [self.held.len() as u64, left_alone, self.over];
        for (k, g) in [&stats.held, &stats.left_alone, &stats.over_limit]
            .into_iter()
            .enumerate()
        {
            let (old, new) = (self.published[k], now[k]);
            if new > old {
                g.fetch_add(new - old, Ordering::Relaxed);
            } else if old > new {
                g.fetch_sub(old - new, Ordering::Relaxed);
            }
        }
        self.published = now;
    }

    /// The mirror stops (its VRF went, or the switch): take this
    /// namespace's share out of the gauges.
    pub fn retire(&mut self, stats: &ManagedStats) {
        self.held.clear();
        self.over = 0;
        self.publish(stats, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::neigh::{NUD_FAILED, NUD_INCOMPLETE};

    /// The kernel as the requests leave it, with a log of the requests.
    #[derive(Default)]
    struct Fake {
        table: HashMap<Key, (u16, u32)>,
        log: Vec<String>,
        refuse: bool,
    }

    impl NeighOps for Fake {
        fn manage(&mut self, key: Key, exclusive: bool) -> io::Result<()> {
            self.log.push(format!("manage {} {exclusive}", key.1));
            if self.refuse {
                return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
            }
            match self.table.get_mut(&key) {
                Some(_) if exclusive => Err(io::Error::from_raw_os_error(libc::EEXIST)),
                Some(e) => {
                    e.1 |= NTF_MANAGED;
                    Ok(())
                }
                None => {
                    self.table.insert(key, (NUD_INCOMPLETE, NTF_MANAGED));
                    Ok(())
                }
            }
        }
        fn unmanage(&mut self, key: Key) -> io::Result<()> {
            self.log.push(format!("unmanage {}", key.1));
            match self.table.get_mut(&key) {
                Some(e) => {
                    e.1 &= !NTF_MANAGED;
                    Ok(())
                }
                None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
            }
        }
        fn delete(&mut self, key: Key) -> io::Result<()> {
            self.log.push(format!("delete {}", key.1));
            self.table
                .remove(&key)
                .map(|_| ())
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
        }
        fn get(&mut self, key: Key) -> io::Result<Option<NeighborEvent>> {
            self.log.push(format!("get {}", key.1));
            Ok(self
                .table
                .get(&key)
                .map(|&(state, flags)| ev(key, state, flags, false)))
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn ev(key: Key, state: u16, flags: u32, deleted: bool) -> NeighborEvent {
        NeighborEvent {
            ifindex: key.0,
            ip: key.1,
            mac: Some([2, 0, 0, 0, 0, 1]),
            state,
            flags,
            deleted,
        }
    }

    fn ports() -> HashMap<u32, u16> {
        HashMap::from([(7, 1), (8, 2)])
    }

    fn want(keys: &[Key]) -> HashSet<Key> {
        keys.iter().copied().collect()
    }

    fn pass(m: &mut ManagedNeighbors, k: &mut Fake, st: &ManagedStats) -> Vec<String> {
        k.log.clear();
        m.reconcile(k, st, Instant::now());
        std::mem::take(&mut k.log)
    }

    #[test]
    fn new_gateways_are_made_managed_resolved_ones_kept_as_they_are() {
        let (a, b) = ((7, ip("10.2.0.2")), (8, ip("2001:db8::2")));
        let mut k = Fake::default();
        // b was resolved by the kernel already, and the mirror saw it.
        k.table.insert(b, (NUD_REACHABLE, 0));
        let st = ManagedStats::default();
        let mut m = ManagedNeighbors::new();
        m.set_wanted(want(&[a, b]), &ports());
        m.observe(&ev(b, NUD_REACHABLE, 0, false), Instant::now());
        let mut log = pass(&mut m, &mut k, &st);
        log.sort();
        // A new entry may not overwrite one made meanwhile; the resolved
        // one only gains the flag (its state is kept by the kernel).
        assert_eq!(log, ["manage 10.2.0.2 true", "manage 2001:db8::2 false"]);
        assert_eq!(m.held(), 2);
        assert_eq!(st.held.load(Ordering::Relaxed), 2);
        assert_eq!(st.added.load(Ordering::Relaxed), 2);
        assert_eq!(k.table[&b], (NUD_REACHABLE, NTF_MANAGED));
        // Nothing changed: no request.
        assert!(pass(&mut m, &mut k, &st).is_empty());
    }

    #[test]
    fn static_and_peer_entries_are_left_alone() {
        let keys = [
            (7, ip("10.2.0.2")),
            (7, ip("10.2.0.3")),
            (7, ip("10.2.0.4")),
        ];
        let mut k = Fake::default();
        let st = ManagedStats::default();
        let mut m = ManagedNeighbors::new();
        m.set_wanted(want(&keys), &ports());
        m.observe(&ev(keys[0], NUD_PERMANENT, 0, false), Instant::now());
        m.observe(
            &ev(keys[1], NUD_NOARP, u32::from(NTF_EXT_LEARNED), false),
            Instant::now(),
        );
        m.observe(
            &ev(keys[2], NUD_STALE, u32::from(NTF_EXT_LEARNED), false),
            Instant::now(),
        );
        assert!(pass(&mut m, &mut k, &st).is_empty());
        assert_eq!(m.held(), 0);
        assert_eq!(st.left_alone.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn an_entry_someone_installed_meanwhile_is_looked_at_not_overwritten() {
        let a = (7, ip("10.2.0.2"));
        let mut k = Fake::default();
        // The peer installed it; the mirror has not seen the event yet.
        k.table.insert(a, (NUD_NOARP, u32::from(NTF_EXT_LEARNED)));
        let st = ManagedStats::default();
        let mut m = ManagedNeighbors::new();
        m.set_wanted(want(&[a]), &ports());
        assert_eq!(
            pass(&mut m, &mut k, &st),
            ["manage 10.2.0.2 true", "get 10.2.0.2"]
        );
        assert!(pass(&mut m, &mut k, &st).is_empty());
        assert_eq!(k.table[&a], (NUD_NOARP, u32::from(NTF_EXT_LEARNED)));
        assert_eq!(st.left_alone.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn unused_next_hops_are_handed_back_or_deleted_if_never_resolved() {
        let (a, b, c) = (
            (7, ip("10.2.0.2")),
            (7, ip("10.2.0.3")),
            (7, ip("10.2.0.4")),
        );
        let mut k = Fake::default();
        let st = ManagedStats::default();
        let mut m = ManagedNeighbors::new();
        m.set_wanted(want(&[a, b, c]), &ports());
        assert_eq!(pass(&mut m, &mut k, &st).len(), 3);
        // a resolved, b failed, c was replaced by a static entry.
        for (key, state, flags) in [
            (a, NUD_REACHABLE, NTF_MANAGED),
            (b, NUD_FAILED, NTF_MANAGED),
            (c, NUD_PERMANENT, 0),
        ] {
            k.table.insert(key, (state, flags));
            m.observe(&ev(key, state, flags, false), Instant::now());
        }
        assert_eq!(m.held(), 2);
        m.set_wanted(HashSet::new(), &ports());
        let mut log = pass(&mut m, &mut k, &st);
        log.sort();
        assert_eq!(log, ["delete 10.2.0.3", "unmanage 10.2.0.2"]);
        assert_eq!(k.table[&a], (NUD_REACHABLE, 0));
        assert_eq!(k.table[&c], (NUD_PERMANENT, 0));
        assert_eq!(m.held(), 0);
        assert_eq!(st.held.load(Ordering::Relaxed), 0);
        assert_eq!(st.released.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_held_entry_the_kernel_deletes_is_made_again() {
        let a = (7, ip("10.2.0.2"));
        let mut k = Fake::default();
        let st = ManagedStats::default();
        let mut m = ManagedNeighbors::new();
        m.set_wanted(want(&[a]), &ports());
        pass(&mut m, &mut k, &st);
        k.table.remove(&a);
        m.observe(&ev(a, NUD_STALE, NTF_MANAGED, true), Instant::now());
        assert_eq!(pass(&mut m, &mut k, &st), ["manage 10.2.0.2 true"]);
        assert_eq!(st.readded.load(Ordering::Relaxed), 1);
        assert_eq!(st.added.load(Ordering::Relaxed), 1);
        assert_eq!(m.held(), 1);
    }

    /// A held entry the kernel deletes (forced collection, flush) keeps its
    /// copy in the data path through the deletion and the new entry's
    /// resolution; its resolution, its failure (the neighbour went), the
    /// deadline or no route using it any more end that.
    #[test]
    fn a_deleted_held_entry_is_bridged_until_the_kernel_resolves_it_again() {
        let (a, b, c) = (
            (7, ip("10.2.0.2")),
            (7, ip("10.2.0.3")),
            (7, ip("10.2.0.4")),
        );
        let mut k = Fake::default();
        let st = ManagedStats::default();
        let mut m = ManagedNeighbors::new();
        m.set_wanted(want(&[a, b, c]), &ports());
        pass(&mut m, &mut k, &st);
        let t = Instant::now();
        for x in [a, b, c] {
            k.table.remove(&x);
            assert!(m.observe(&ev(x, NUD_STALE, NTF_MANAGED, true), t));
        }
        assert_eq!(m.bridging(), 3);
        assert_eq!(pass(&mut m, &mut k, &st).len(), 3);
        assert_eq!(st.readded.load(Ordering::Relaxed), 3);
        assert_eq!(st.bridged.load(Ordering::Relaxed), 3);
        // The new entries while the kernel resolves them: still kept.
        for x in [a, b, c] {
            assert!(m.observe(&ev(x, NUD_INCOMPLETE, NTF_MANAGED, false), t));
        }
        // Resolved: applied, and the bridge ends.
        assert!(!m.observe(&ev(a, NUD_REACHABLE, NTF_MANAGED, false), t));
        // Failed: the neighbour really went; applied (the copy goes).
        assert!(!m.observe(&ev(b, NUD_FAILED, NTF_MANAGED, false), t));
        assert_eq!(m.bridging(), 1);
        // Neither, by the deadline.
        let mut out = Vec::new();
        assert_eq!(m.bridges_ended(t + BRIDGE_FOR / 2, &mut out), 0);
        assert_eq!(m.bridges_ended(t + BRIDGE_FOR, &mut out), 1);
        assert_eq!(out, [c]);
        assert!(!m.observe(&ev(c, NUD_INCOMPLETE, NTF_MANAGED, false), t));
        // `ip neigh del`: FAILED with the managed flag cleared, then the
        // deletion; both kept.
        assert!(!m.observe(&ev(c, NUD_REACHABLE, NTF_MANAGED, false), t));
        k.table.remove(&c);
        assert!(m.observe(&ev(c, NUD_FAILED, 0, false), t));
        assert!(m.observe(&ev(c, NUD_FAILED, 0, true), t));
        assert_eq!(m.bridging(), 1);
        pass(&mut m, &mut k, &st);
        assert_eq!(st.readded.load(Ordering::Relaxed), 4);
        assert!(!m.observe(&ev(c, NUD_REACHABLE, NTF_MANAGED, false), t));
        // An entry not held is never kept.
        let d = (7, ip("10.2.0.9"));
        assert!(!m.observe(&ev(d, NUD_STALE, 0, true), t));
        // Deleted again, then no route uses it: the bridge ends at once.
        assert!(m.observe(&ev(a, NUD_REACHABLE, NTF_MANAGED, true), t));
        m.set_wanted(want(&[b, c]), &ports());
        out.clear();
        assert_eq!(m.bridges_ended(t, &mut out), 1);
        assert_eq!(out, [a]);
    }

    #[test]
    fn work_per_pass_is_bounded_and_refusals_wait() {
        let keys: Vec<Key> = (0..600u32)
            .map(|i| (7, IpAddr::from([10, 2, (i >> 8) as u8, i as u8])))
            .collect();
        let mut k = Fake::default();
        let st = ManagedStats::default();
        let mut m = ManagedNeighbors::new();
        m.set_wanted(want(&keys), &ports());
        assert_eq!(pass(&mut m, &mut k, &st).len(), MAX_OPS_PER_PASS);
        assert_eq!(pass(&mut m, &mut k, &st).len(), MAX_OPS_PER_PASS);
        assert_eq!(pass(&mut m, &mut k, &st).len(), 600 - 2 * MAX_OPS_PER_PASS);
        assert!(pass(&mut m, &mut k, &st).is_empty());
        assert_eq!(m.held(), 600);
        // Refused: counted, not asked again at once.
        let b = (8, ip("10.3.0.2"));
        let mut w = want(&keys);
        w.insert(b);
        m.set_wanted(w, &ports());
        k.refuse = true;
        assert_eq!(pass(&mut m, &mut k, &st).len(), 1);
        assert!(pass(&mut m, &mut k, &st).is_empty());
        assert_eq!(st.errors.load(Ordering::Relaxed), 1);
        // After the wait it is tried again.
        k.refuse = false;
        k.log.clear();
        m.reconcile(&mut k, &st, Instant::now() + RETRY_AFTER);
        assert_eq!(k.log, ["manage 10.3.0.2 true"]);
    }

    #[test]
    fn twins_that_go_take_their_entries_and_retire_clears_the_gauges() {
        let (a, b) = ((7, ip("10.2.0.2")), (8, ip("10.3.0.2")));
        let mut k = Fake::default();
        let st = ManagedStats::default();
        let mut m = ManagedNeighbors::new();
        m.set_wanted(want(&[a, b]), &ports());
        pass(&mut m, &mut k, &st);
        assert_eq!(st.held.load(Ordering::Relaxed), 2);
        // Port 2's twin went: its entry is forgotten, no request.
        m.set_wanted(want(&[a]), &HashMap::from([(7, 1)]));
        assert!(pass(&mut m, &mut k, &st).is_empty());
        assert_eq!(st.held.load(Ordering::Relaxed), 1);
        m.retire(&st);
        assert_eq!(st.held.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn refresh_maps_the_fibs_gateways_to_twins() {
        use crate::fib::{FibConfig, Hop, Source};
        use crate::frr::Prefix;
        let mut f = Fib::with_config(FibConfig::for_vrf(254, 64));
        let p = |a: &str, l| Prefix::new(ip(a), l).unwrap();
        f.set(
            p("198.51.100.0", 24),
            Source::Static,
            vec![Hop::via(1, ip("10.2.0.2"))],
        )
        .unwrap();
        // Port 9 has no twin here (another VRF's).
        f.set(
            p("198.51.101.0", 24),
            Source::Static,
            vec![Hop::via(9, ip("10.9.0.2"))],
        )
        .unwrap();
        let fib = Mutex::new(f);
        let mut m = ManagedNeighbors::new();
        let mut k = Fake::default();
        let st = ManagedStats::default();
        let t = Instant::now();
        m.refresh(&fib, &ports(), t);
        assert_eq!(pass(&mut m, &mut k, &st), ["manage 10.2.0.2 true"]);
        // The route goes: handed back at the next refresh, without waiting
        // for the periodic recheck.
        fib.lock()
            .unwrap()
            .remove(p("198.51.100.0", 24), Source::Static);
        k.table
            .insert((7, ip("10.2.0.2")), (NUD_STALE, NTF_MANAGED));
        m.observe(
            &ev((7, ip("10.2.0.2")), NUD_STALE, NTF_MANAGED, false),
            Instant::now(),
        );
        m.refresh(&fib, &ports(), t);
        assert_eq!(pass(&mut m, &mut k, &st), ["unmanage 10.2.0.2"]);
    }

    #[test]
    fn kernel_releases_compare() {
        assert!(release_at_least("6.18.44-fc-v657", 5, 16));
        assert!(release_at_least("5.16.0", 5, 16));
        assert!(!release_at_least("5.15.0-91-generic", 5, 16));
        assert!(!release_at_least("4.19.0", 5, 16));
        assert!(!release_at_least("garbage", 5, 16));
        assert!(!release_at_least("", 5, 16));
    }
}
