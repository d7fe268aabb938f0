//! Next hops and ECMP groups: what an LPM value means.
//!
//! Terms: a *next hop* is an egress port and, for a route via a router, the
//! gateway address whose link-layer address the neighbour table
//! ([`crate::neighbor`]) supplies (no gateway: a connected route, the
//! destination itself is the neighbour). An *ECMP group* is a list of next
//! hops a flow hash chooses among. A *target id* is what an LPM entry holds:
//! a next-hop id below [`GROUP_BIT`], or [`GROUP_BIT`] | group index.
//!
//! Why the indirection (REQUIREMENTS F-L3): a gateway going away or moving
//! to another port, or a group losing a member, is one update here, however
//! many prefixes point at it — the LPM tables are not touched.
//!
//! One writer (serialized by an internal mutex), lock-free readers. Each
//! slot is a small seqlock: the writer makes the sequence odd, writes the
//! words, makes it even again (`Release`); a reader reads the sequence
//! (`Acquire`), the words, then the sequence again after an `Acquire` fence,
//! and retries if it changed or was odd. So a reader never returns a port
//! of one next hop with the gateway of another, nor a group length with
//! another version's members. Whether a next hop's gateway is resolved is
//! the neighbour table's business only (one source of truth).

use std::net::IpAddr;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Target ids with this bit set name an ECMP group (index in the low bits).
pub const GROUP_BIT: u32 = 1 << 30;

/// The port of a next hop that drops (blackhole, unreachable and
/// prohibit routes): no interface has it.
pub const BLACKHOLE_PORT: u16 = u16::MAX;

/// Most members an ECMP group holds (a common hardware limit).
pub const MAX_GROUP_MEMBERS: usize = 64;

/// An egress port and, unless the route is connected, the gateway.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct NextHop {
    pub port: u16,
    pub gateway: Option<IpAddr>,
}

/// An ECMP group as the writer gives it: member next-hop ids (repeats give
/// a member more weight).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Group {
    pub members: Vec<u32>,
}

/// Why a next-hop table update was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NextHopError {
    /// The id is outside the table's capacity.
    BadId,
    /// The group has no members or more than [`MAX_GROUP_MEMBERS`], or a
    /// member is itself a group.
    BadGroup,
}

/// Choose a member for a flow: `members[hash · len / 2^32]` (a multiply,
/// no division; uniform when the hash is). The same hash always selects the
/// same member of the same list.
#[inline]
pub fn select(members: &[u32], hash: u32) -> Option<u32> {
    let i = ((hash as u64 * members.len() as u64) >> 32) as usize;
    members.get(i).copied()
}

/// Whether a target id names a group.
#[inline]
pub fn is_group(id: u32) -> bool {
    id & GROUP_BIT != 0
}

const K_NONE: u64 = 0;
const K_CONNECTED: u64 = 1;
const K_V4: u64 = 2;
const K_V6: u64 = 3;

#[derive(Default)]
struct HopSlot {
    seq: AtomicU32,
    /// kind (2 bits) << 16 | port; kind 0: no next hop.
    head: AtomicU64,
    gw_hi: AtomicU64,
    gw_lo: AtomicU64,
}

struct GroupSlot {
    seq: AtomicU32,
    len: AtomicU32,
    members: [AtomicU32; MAX_GROUP_MEMBERS],
}

#[inline]
fn write_begin(seq: &AtomicU32) -> u32 {
    let s = seq.load(Ordering::Relaxed);
    seq.store(s.wrapping_add(1), Ordering::Relaxed);
    fence(Ordering::Release);
    s
}

#[inline]
fn write_end(seq: &AtomicU32, s: u32) {
    seq.store(s.wrapping_add(2), Ordering::Release);
}

/// Read consistently through `seq`: `f` runs until it saw no write.
#[inline]
fn read<T>(seq: &AtomicU32, f: impl Fn() -> T) -> T {
    loop {
        let s1 = seq.load(Ordering::Acquire);
        if s1 & 1 == 0 {
            let v = f();
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s1 {
                return v;
            }
        }
        std::hint::spin_loop();
    }
}

/// Next hops by id and ECMP groups by index, fixed capacity.
pub struct NextHopTable {
    hops: Box<[HopSlot]>,
    groups: Box<[GroupSlot]>,
    w: Mutex<()>,
}

impl NextHopTable {
    /// Room for `hops` next hops (ids `0..hops`) and `groups` groups.
    pub fn new(hops: usize, groups: usize) -> NextHopTable {
        assert!(groups <= GROUP_BIT as usize && hops <= GROUP_BIT as usize);
        NextHopTable {
            hops: (0..hops).map(|_| HopSlot::default()).collect(),
            groups: (0..groups)
                .map(|_| GroupSlot {
                    seq: AtomicU32::new(0),
                    len: AtomicU32::new(0),
                    members: std::array::from_fn(|_| AtomicU32::new(0)),
                })
                .collect(),
            w: Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Install or change next hop `id` (writer side). Every prefix and
    /// group pointing at `id` follows at once.
    pub fn set(&self, id: u32, nh: NextHop) -> Result<(), NextHopError> {
        let slot = self.hops.get(id as usize).ok_or(NextHopError::BadId)?;
        let (kind, hi, lo) = match nh.gateway {
            None => (K_CONNECTED, 0, 0),
            Some(IpAddr::V4(a)) => (K_V4, 0, u32::from(a) as u64),
            Some(IpAddr::V6(a)) => {
                let x = u128::from(a);
                (K_V6, (x >> 64) as u64, x as u64)
            }
        };
        let _g = self.lock();
        let s = write_begin(&slot.seq);
        slot.head
            .store(kind << 16 | nh.port as u64, Ordering::Relaxed);
        slot.gw_hi.store(hi, Ordering::Relaxed);
        slot.gw_lo.store(lo, Ordering::Relaxed);
        write_end(&slot.seq, s);
        Ok(())
    }

    /// Remove next hop `id` (writer side); lookups of it then miss.
    pub fn clear(&self, id: u32) {
        if let Some(slot) = self.hops.get(id as usize) {
            let _g = self.lock();
            let s = write_begin(&slot.seq);
            slot.head.store(K_NONE, Ordering::Relaxed);
            write_end(&slot.seq, s);
        }
    }

    /// Next hop `id` (reader side, lock-free).
    #[inline]
    pub fn get(&self, id: u32) -> Option<NextHop> {
        let slot = self.hops.get(id as usize)?;
        let (head, hi, lo) = read(&slot.seq, || {
            (
                slot.head.load(Ordering::Relaxed),
                slot.gw_hi.load(Ordering::Relaxed),
                slot.gw_lo.load(Ordering::Relaxed),
            )
        });
        let gateway = match head >> 16 {
            K_CONNECTED => None,
            K_V4 => Some(IpAddr::from((lo as u32).to_be_bytes())),
            K_V6 => Some(IpAddr::from(
                ((hi as u128) << 64 | lo as u128).to_be_bytes(),
            )),
            _ => return None,
        };
        Some(NextHop {
            port: head as u16,
            gateway,
        })
    }

    /// Install or replace ECMP group `index` (writer side); its target id
    /// is `GROUP_BIT | index`. An empty list is refused: clear the group
    /// with [`NextHopTable::clear_group`].
    pub fn set_group(&self, index: u32, group: &Group) -> Result<u32, NextHopError> {
        let slot = self.groups.get(index as usize).ok_or(NextHopError::BadId)?;
        let m = &group.members;
        if m.is_empty() || m.len() > MAX_GROUP_MEMBERS || m.iter().any(|&x| is_group(x)) {
            return Err(NextHopError::BadGroup);
        }
        let _g = self.lock();
        let s = write_begin(&slot.seq);
        for (a, &x) in slot.members.iter().zip(m) {
            a.store(x, Ordering::Relaxed);
        }
        slot.len.store(m.len() as u32, Ordering::Relaxed);
        write_end(&slot.seq, s);
        Ok(GROUP_BIT | index)
    }

    /// Remove group `index` (writer side).
    pub fn clear_group(&self, index: u32) {
        if let Some(slot) = self.groups.get(index as usize) {
            let _g = self.lock();
            let s = write_begin(&slot.seq);
            slot.len.store(0, Ordering::Relaxed);
            write_end(&slot.seq, s);
        }
    }

    /// Group `index` as stored (any thread).
    pub fn group(&self, index: u32) -> Option<Group> {
        let slot = self.groups.get(index as usize)?;
        let members = read(&slot.seq, || {
            let n = slot.len.load(Ordering::Relaxed) as usize;
            slot.members[..n.min(MAX_GROUP_MEMBERS)]
                .iter()
                .map(|a| a.load(Ordering::Relaxed))
                .collect::<Vec<_>>()
        });
        (!members.is_empty()).then_some(Group { members })
    }

    /// The member of group `index` a flow with `hash` uses, as
    /// [`select`] would choose it (reader side, lock-free, no allocation).
    #[inline]
    pub fn select(&self, index: u32, hash: u32) -> Option<u32> {
        let slot = self.groups.get(index as usize)?;
        read(&slot.seq, || {
            let n = (slot.len.load(Ordering::Relaxed) as usize).min(MAX_GROUP_MEMBERS);
            let i = ((hash as u64 * n as u64) >> 32) as usize;
            (n > 0).then(|| slot.members[i].load(Ordering::Relaxed))
        })
    }

    /// What an LPM value `target` means for a flow with `hash`: the chosen
    /// next-hop id and the next hop (reader side).
    #[inline]
    pub fn resolve(&self, target: u32, hash: u32) -> Option<(u32, NextHop)> {
        let id = if is_group(target) {
            self.select(target & !GROUP_BIT, hash)?
        } else {
            target
        };
        Some((id, self.get(id)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpm4::Lpm4;
    use std::collections::HashMap;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn via(port: u16, gw: [u8; 4]) -> NextHop {
        NextHop {
            port,
            gateway: Some(IpAddr::V4(Ipv4Addr::from(gw))),
        }
    }

    #[test]
    fn set_get_clear_round_trip() {
        let t = NextHopTable::new(8, 2);
        let v6 = NextHop {
            port: 3,
            gateway: Some(IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 1, 2, 3, 4))),
        };
        let conn = NextHop {
            port: 65535,
            gateway: None,
        };
        t.set(0, via(1, [192, 0, 2, 1])).unwrap();
        t.set(1, v6).unwrap();
        t.set(7, conn).unwrap();
        assert_eq!(t.set(8, conn), Err(NextHopError::BadId));
        assert_eq!(t.get(0), Some(via(1, [192, 0, 2, 1])));
        assert_eq!(t.get(1), Some(v6));
        assert_eq!(t.get(7), Some(conn));
        assert_eq!(t.get(2), None);
        assert_eq!(t.get(100), None);
        t.clear(1);
        assert_eq!(t.get(1), None);
        assert_eq!(
            t.set_group(0, &Group::default()),
            Err(NextHopError::BadGroup)
        );
        let g = Group {
            members: vec![0, GROUP_BIT],
        };
        assert_eq!(t.set_group(0, &g), Err(NextHopError::BadGroup));
        let g = Group {
            members: vec![0, 7],
        };
        assert_eq!(t.set_group(1, &g), Ok(GROUP_BIT | 1));
        assert_eq!(t.group(1), Some(g));
        t.clear_group(1);
        assert_eq!(t.group(1), None);
        assert_eq!(t.select(1, 0), None);
    }

    #[test]
    fn select_is_stable_and_spreads() {
        assert_eq!(select(&[], 5), None);
        let m = [10, 11, 12];
        let mut count = HashMap::new();
        for h in 0..30_000u32 {
            let x = h.wrapping_mul(0x9e37_79b9);
            let s = select(&m, x).unwrap();
            assert_eq!(select(&m, x), Some(s));
            *count.entry(s).or_insert(0) += 1;
        }
        assert_eq!(count.len(), 3);
        for (_, n) in count {
            assert!((9_000..11_000).contains(&n), "{n}");
        }
        // The table's select agrees with the free function.
        let t = NextHopTable::new(1, 1);
        t.set_group(
            0,
            &Group {
                members: m.to_vec(),
            },
        )
        .unwrap();
        for h in [0, 1, u32::MAX / 3, u32::MAX / 2, u32::MAX] {
            assert_eq!(t.select(0, h), select(&m, h));
        }
    }

    /// F-L3: prefixes point at a group; moving a gateway to another port,
    /// or dropping a member from the group, is one update that every
    /// prefix follows, with the LPM table untouched.
    #[test]
    fn one_update_moves_every_prefix() {
        let nh = NextHopTable::new(16, 4);
        nh.set(1, via(1, [10, 0, 0, 1])).unwrap();
        nh.set(2, via(2, [10, 0, 1, 1])).unwrap();
        let g = nh
            .set_group(
                0,
                &Group {
                    members: vec![1, 2],
                },
            )
            .unwrap();
        let fib = Lpm4::with_nodes(16);
        for i in 0..1000u32 {
            fib.insert(0x1400_0000 | i << 8, 24, g).unwrap();
        }
        let route_port = |i: u32, hash: u32| {
            let target = fib.lookup(0x1400_0000 | i << 8 | 9).unwrap();
            nh.resolve(target, hash).unwrap().1.port
        };
        // Low hashes use member 1, high hashes member 2.
        assert!((0..1000).all(|i| route_port(i, 0) == 1 && route_port(i, u32::MAX) == 2));
        // Gateway 1 moves to port 5: one update.
        nh.set(1, via(5, [10, 0, 0, 1])).unwrap();
        assert!((0..1000).all(|i| route_port(i, 0) == 5));
        // Member 2 leaves the group: one update, all flows on member 1.
        nh.set_group(0, &Group { members: vec![1] }).unwrap();
        assert!((0..1000).all(|i| route_port(i, u32::MAX) == 5));
        assert_eq!(fib.len(), 1000);
    }

    /// Random writes against a HashMap model.
    #[test]
    fn matches_reference_model() {
        let t = NextHopTable::new(64, 8);
        let mut hops: HashMap<u32, NextHop> = HashMap::new();
        let mut groups: HashMap<u32, Vec<u32>> = HashMap::new();
        let mut x: u64 = 0xdead_beef;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = (x >> 8) as u32 % 64;
            match x % 6 {
                0 => {
                    let n = via((x >> 20) as u16, (x as u32).to_be_bytes());
                    t.set(id, n).unwrap();
                    hops.insert(id, n);
                }
                1 => {
                    t.clear(id);
                    hops.remove(&id);
                }
                2 => {
                    let g = id % 8;
                    let m: Vec<u32> = (0..1 + (x >> 30) % 5)
                        .map(|k| (k as u32 * 7 + id) % 64)
                        .collect();
                    t.set_group(g, &Group { members: m.clone() }).unwrap();
                    groups.insert(g, m);
                }
                3 => {
                    t.clear_group(id % 8);
                    groups.remove(&(id % 8));
                }
                _ => {
                    let h = (x >> 32) as u32;
                    assert_eq!(t.get(id), hops.get(&id).copied());
                    let g = id % 8;
                    let want = groups.get(&g).and_then(|m| select(m, h));
                    assert_eq!(t.select(g, h), want);
                    let want = want.and_then(|m| hops.get(&m).map(|n| (m, *n)));
                    assert_eq!(t.resolve(GROUP_BIT | g, h), want);
                }
            }
        }
    }

    /// Readers never see a port of one version with the gateway of another,
    /// or a group's length with another version's members.
    #[test]
    fn concurrent_readers_never_see_torn_entries() {
        let t = Arc::new(NextHopTable::new(4, 1));
        t.set(0, via(0, [0, 0, 0, 0])).unwrap();
        t.set_group(0, &Group { members: vec![1] }).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (t, stop) = (t.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    // At least one full pass, however the threads are scheduled.
                    while n == 0 || !stop.load(Ordering::Relaxed) {
                        let h = t.get(0).unwrap();
                        let Some(IpAddr::V4(gw)) = h.gateway else {
                            panic!("{h:?}")
                        };
                        assert_eq!(u32::from(gw), h.port as u32 * 0x0101_0101);
                        let g = t.group(0).unwrap();
                        // Version k has k members, all equal to k.
                        assert!(g.members.iter().all(|&m| m as usize == g.members.len()));
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        for i in 0..50_000u32 {
            let p = (i % 200) as u16;
            t.set(0, via(p, (p as u32 * 0x0101_0101).to_be_bytes()))
                .unwrap();
            let k = 1 + i as usize % MAX_GROUP_MEMBERS;
            t.set_group(
                0,
                &Group {
                    members: vec![k as u32; k],
                },
            )
            .unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for h in readers {
            assert!(h.join().unwrap() > 0);
        }
    }
}
