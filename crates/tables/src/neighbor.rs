//! The neighbour table (ARP cache and IPv6 neighbour cache): IP address →
//! link-layer address, port, reachability state and when it was last
//! confirmed. One writer (the control plane's ARP/ND handler, serialized by
//! an internal mutex), any number of lock-free readers (the workers, which
//! turn a next hop's gateway into a destination MAC).
//!
//! States follow RFC 4861 §7.3.2, reduced to what forwarding needs:
//! `Incomplete` (resolution sent, no answer yet: packets wait in the
//! pipeline's pending queue), `Reachable` (confirmed within the reachable
//! time), `Stale` (usable, to be re-confirmed). [`NeighborTable::age`]
//! moves `Reachable` to `Stale` after the reachable time and drops entries
//! not confirmed for longer than the keep time. Times are seconds of the
//! switch's coarse clock, passed in (no clock here).
//!
//! Open addressing with linear probing over a power-of-two array, at least
//! twice the capacity. IPv4 addresses are keyed as IPv4-mapped IPv6
//! (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2), which no ND neighbour uses. Each
//! slot is a seqlock over its words (as in [`crate::nexthop`]), so a reader
//! never pairs one entry's key with another's MAC; a slot being rewritten
//! makes the reader retry it. Removed slots become tombstones that later
//! inserts reuse.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Reachability of a neighbour (RFC 4861 §7.3.2, reduced).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum NeighborState {
    Incomplete,
    Reachable,
    Stale,
}

/// A neighbour as seen by a reader.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Neighbor {
    /// Link-layer address (all zero while `Incomplete`).
    pub mac: [u8; 6],
    pub port: u16,
    pub state: NeighborState,
    /// Second (coarse clock) of the last confirmation (reply, or the
    /// request that made the entry `Incomplete`).
    pub confirmed: u32,
}

const EMPTY: u32 = 0;
const VALID: u32 = 1;
const TOMBSTONE: u32 = 2;

#[derive(Default)]
#[repr(C)]
struct Slot {
    seq: AtomicU32,
    tag: AtomicU32,
    key_hi: AtomicU64,
    key_lo: AtomicU64,
    /// MAC (48 bits) << 16 | port.
    link: AtomicU64,
    /// state << 32 | confirmed.
    info: AtomicU64,
}

// SAFETY: atomics only; all zero is an empty slot (tag EMPTY, seq 0).
unsafe impl crate::huge::Zeroable for Slot {}

#[inline]
fn key_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

#[inline]
fn ip_of(k: u128) -> IpAddr {
    let a = Ipv6Addr::from(k);
    match a.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(a),
    }
}

#[inline]
fn hash(k: u128) -> u64 {
    let h = ((k >> 64) as u64 ^ (k as u64).rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 31)
}

fn encode(n: &Neighbor) -> (u64, u64) {
    let mut m = [0u8; 8];
    m[2..].copy_from_slice(&n.mac);
    let state = match n.state {
        NeighborState::Incomplete => 0u64,
        NeighborState::Reachable => 1,
        NeighborState::Stale => 2,
    };
    (
        u64::from_be_bytes(m) << 16 | n.port as u64,
        state << 32 | n.confirmed as u64,
    )
}

fn decode(link: u64, info: u64) -> Neighbor {
    let m = (link >> 16).to_be_bytes();
    Neighbor {
        mac: [m[2], m[3], m[4], m[5], m[6], m[7]],
        port: link as u16,
        state: match info >> 32 {
            0 => NeighborState::Incomplete,
            1 => NeighborState::Reachable,
            _ => NeighborState::Stale,
        },
        confirmed: info as u32,
    }
}

/// What a reader got from one slot.
struct Seen {
    tag: u32,
    key: u128,
    link: u64,
    info: u64,
}

pub struct NeighborTable {
    /// On 2 MB pages committed as touched when 2 MB or more (the default
    /// VRF's 65,536 neighbours: 5 MiB).
    slots: crate::huge::HugeArray<Slot>,
    mask: usize,
    capacity: usize,
    w: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    live: usize,
    tombstones: usize,
}

impl NeighborTable {
    /// A table that holds `capacity` neighbours.
    pub fn new(capacity: usize) -> NeighborTable {
        let capacity = capacity.max(1);
        let n = (capacity * 2).next_power_of_two().max(16);
        NeighborTable {
            slots: crate::huge::HugeArray::with_backing(n, crate::huge::Backing::HugeOnTouch),
            mask: n - 1,
            capacity,
            w: Mutex::new(Counts::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes of the slot array, and of it on huge pages now (reads
    /// `/proc/self/smaps`).
    pub fn memory(&self) -> (usize, Option<usize>) {
        (self.slots.bytes(), self.slots.huge_backed_bytes())
    }

    pub fn len(&self) -> usize {
        self.lock().live
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn read(&self, i: usize) -> Seen {
        let s = &self.slots[i];
        loop {
            let s1 = s.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let v = Seen {
                    tag: s.tag.load(Ordering::Relaxed),
                    key: (s.key_hi.load(Ordering::Relaxed) as u128) << 64
                        | s.key_lo.load(Ordering::Relaxed) as u128,
                    link: s.link.load(Ordering::Relaxed),
                    info: s.info.load(Ordering::Relaxed),
                };
                fence(Ordering::Acquire);
                if s.seq.load(Ordering::Relaxed) == s1 {
                    return v;
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Writer side, under the lock.
    fn write(&self, i: usize, tag: u32, key: u128, n: &Neighbor) {
        let s = &self.slots[i];
        let (link, info) = encode(n);
        let q = s.seq.load(Ordering::Relaxed);
        s.seq.store(q.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        s.tag.store(tag, Ordering::Relaxed);
        s.key_hi.store((key >> 64) as u64, Ordering::Relaxed);
        s.key_lo.store(key as u64, Ordering::Relaxed);
        s.link.store(link, Ordering::Relaxed);
        s.info.store(info, Ordering::Relaxed);
        s.seq.store(q.wrapping_add(2), Ordering::Release);
    }

    #[inline]
    fn find(&self, key: u128) -> Option<(usize, Neighbor)> {
        let mut i = hash(key) as usize & self.mask;
        for _ in 0..=self.mask {
            let v = self.read(i);
            if v.tag == EMPTY {
                return None;
            }
            if v.tag == VALID && v.key == key {
                return Some((i, decode(v.link, v.info)));
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// The neighbour at `ip` (reader side, lock-free).
    #[inline]
    pub fn lookup(&self, ip: IpAddr) -> Option<Neighbor> {
        self.find(key_of(ip)).map(|(_, n)| n)
    }

    /// Insert or replace the entry for `ip` (writer side). False if the
    /// table is full and `ip` is new.
    pub fn upsert(&self, ip: IpAddr, n: Neighbor) -> bool {
        let key = key_of(ip);
        let mut c = self.lock();
        if let Some((i, _)) = self.find(key) {
            self.write(i, VALID, key, &n);
            return true;
        }
        if c.live >= self.capacity {
            return false;
        }
        let mut i = hash(key) as usize & self.mask;
        loop {
            let tag = self.slots[i].tag.load(Ordering::Relaxed);
            if tag != VALID {
                self.write(i, VALID, key, &n);
                c.live += 1;
                if tag == TOMBSTONE {
                    c.tombstones -= 1;
                }
                return true;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Record a confirmation (an ARP reply or ND advertisement): the entry
    /// becomes `Reachable` with this MAC and port. False if full.
    pub fn confirm(&self, ip: IpAddr, mac: [u8; 6], port: u16, now: u32) -> bool {
        self.upsert(
            ip,
            Neighbor {
                mac,
                port,
                state: NeighborState::Reachable,
                confirmed: now,
            },
        )
    }

    /// Remove the entry for `ip` (writer side).
    pub fn remove(&self, ip: IpAddr) -> Option<Neighbor> {
        let key = key_of(ip);
        let mut c = self.lock();
        let (i, n) = self.find(key)?;
        self.write(i, TOMBSTONE, 0, &n);
        c.live -= 1;
        c.tombstones += 1;
        Some(n)
    }

    /// Age the table at second `now` (writer side): `Reachable` entries
    /// confirmed more than `reachable_for` seconds ago become `Stale`;
    /// entries confirmed more than `keep_for` seconds ago are removed.
    /// Returns how many were removed.
    pub fn age(&self, now: u32, reachable_for: u32, keep_for: u32) -> usize {
        let mut c = self.lock();
        let mut removed = 0;
        for i in 0..self.slots.len() {
            let v = self.read(i);
            if v.tag != VALID {
                continue;
            }
            let mut n = decode(v.link, v.info);
            let idle = now.wrapping_sub(n.confirmed);
            if idle > keep_for {
                self.write(i, TOMBSTONE, 0, &n);
                c.live -= 1;
                c.tombstones += 1;
                removed += 1;
            } else if n.state == NeighborState::Reachable && idle > reachable_for {
                n.state = NeighborState::Stale;
                self.write(i, VALID, v.key, &n);
            }
        }
        removed
    }

    /// Visit every entry (any thread; may miss concurrent writes), for
    /// `show arp` / `show ipv6 neighbors`.
    pub fn for_each(&self, mut f: impl FnMut(IpAddr, Neighbor)) {
        for i in 0..self.slots.len() {
            let v = self.read(i);
            if v.tag == VALID {
                f(ip_of(v.key), decode(v.link, v.info));
            }
        }
    }
}

impl Neighbor {
    /// The placeholder made when resolution starts (request sent at `now`).
    pub fn incomplete(port: u16, now: u32) -> Neighbor {
        Neighbor {
            mac: [0; 6],
            port,
            state: NeighborState::Incomplete,
            confirmed: now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default VRF's table (5 MiB) is advised for 2 MB pages, a VRF's
    /// (4,096 neighbours, 320 KiB) is not.
    #[test]
    fn big_table_on_huge_pages() {
        let big = NeighborTable::new(65_536);
        assert_eq!(big.memory().0, 131_072 * 40);
        assert!(big.slots.advised());
        assert_eq!(big.slots.as_ptr() as usize % crate::huge::HUGE_PAGE, 0);
        let small = NeighborTable::new(4096);
        assert!(!small.slots.advised());
        assert_eq!(small.memory().1, Some(0));
    }
    use std::collections::HashMap;
    use std::net::Ipv4Addr;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn v4(i: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | i))
    }

    fn v6(i: u32) -> IpAddr {
        IpAddr::V6(Ipv6Addr::new(
            0xfe80,
            0,
            0,
            0,
            0,
            0,
            (i >> 16) as u16,
            i as u16,
        ))
    }

    fn mac(i: u32) -> [u8; 6] {
        let b = i.to_be_bytes();
        [2, 0, b[0], b[1], b[2], b[3]]
    }

    #[test]
    fn states_and_aging() {
        let t = NeighborTable::new(8);
        let a = v4(1);
        let b = v6(1);
        assert!(t.upsert(a, Neighbor::incomplete(3, 10)));
        assert_eq!(t.lookup(a).unwrap().state, NeighborState::Incomplete);
        assert!(t.confirm(a, mac(1), 3, 11));
        assert!(t.confirm(b, mac(2), 4, 11));
        // Same low bits, other family: other entries.
        assert_eq!(t.lookup(a).unwrap().mac, mac(1));
        assert_eq!(t.lookup(b).unwrap().port, 4);
        assert_eq!(t.len(), 2);
        assert_eq!(t.age(40, 30, 100), 0);
        assert_eq!(t.lookup(a).unwrap().state, NeighborState::Reachable);
        assert_eq!(t.age(42, 30, 100), 0);
        assert_eq!(t.lookup(a).unwrap().state, NeighborState::Stale);
        assert!(t.confirm(b, mac(2), 4, 100));
        assert_eq!(t.age(150, 30, 100), 1);
        assert_eq!(t.lookup(a), None);
        assert_eq!(t.lookup(b).unwrap().state, NeighborState::Stale);
        let mut seen = vec![];
        t.for_each(|ip, n| seen.push((ip, n.port)));
        assert_eq!(seen, vec![(b, 4)]);
    }

    #[test]
    fn full_table_refuses_new_entries() {
        let t = NeighborTable::new(2);
        assert!(t.confirm(v4(1), mac(1), 1, 0));
        assert!(t.confirm(v4(2), mac(2), 1, 0));
        assert!(!t.confirm(v4(3), mac(3), 1, 0));
        assert!(t.confirm(v4(2), mac(9), 2, 0));
        assert_eq!(t.remove(v4(1)).unwrap().mac, mac(1));
        assert!(t.confirm(v4(3), mac(3), 1, 0));
    }

    /// Random operations against a HashMap reference model.
    #[test]
    fn matches_reference_model() {
        let t = NeighborTable::new(500);
        let mut model: HashMap<IpAddr, Neighbor> = HashMap::new();
        let mut x: u64 = 0x1234_5678_9abc;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x >> 8) as u32 % 700;
            let ip = if x & 1 == 0 { v4(i) } else { v6(i) };
            match (x >> 4) % 4 {
                0 | 1 => {
                    let n = Neighbor {
                        mac: mac((x >> 20) as u32),
                        port: (x >> 40) as u16,
                        state: NeighborState::Reachable,
                        confirmed: (x >> 30) as u32,
                    };
                    if t.upsert(ip, n) {
                        model.insert(ip, n);
                    } else {
                        assert!(model.len() >= 500 && !model.contains_key(&ip));
                    }
                }
                2 => assert_eq!(t.remove(ip), model.remove(&ip)),
                _ => assert_eq!(t.lookup(ip), model.get(&ip).copied()),
            }
        }
        assert_eq!(t.len(), model.len());
        let mut n = 0;
        t.for_each(|ip, e| {
            assert_eq!(model.get(&ip), Some(&e));
            n += 1;
        });
        assert_eq!(n, model.len());
    }

    /// Readers never see one neighbour's MAC under another's address.
    #[test]
    fn concurrent_readers_never_see_torn_entries() {
        let t = Arc::new(NeighborTable::new(256));
        t.confirm(v4(0xffff), mac(0xffff), 7, 0);
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (t, stop) = (t.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    // At least one full pass, however the threads are scheduled.
                    while n == 0 || !stop.load(Ordering::Relaxed) {
                        assert_eq!(t.lookup(v4(0xffff)).unwrap().port, 7);
                        for i in 0..64 {
                            if let Some(e) = t.lookup(v6(i)) {
                                // MAC, port and time always written together.
                                assert_eq!(e.mac, mac(e.confirmed));
                                assert_eq!(e.port as u32, e.confirmed % 1000);
                            }
                        }
                        n += 1;
                        std::thread::yield_now();
                    }
                    n
                })
            })
            .collect();
        for round in 0..3000u32 {
            for i in 0..64u32 {
                if (i + round) % 3 == 0 {
                    t.remove(v6(i));
                } else {
                    let c = round * 64 + i;
                    t.confirm(v6(i), mac(c), (c % 1000) as u16, c);
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for h in readers {
            assert!(h.join().unwrap() > 0);
        }
    }
}
