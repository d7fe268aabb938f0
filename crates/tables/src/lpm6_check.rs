//! The checks both IPv6 tries pass ([`crate::Lpm6`] and the baseline
//! [`crate::Lpm6Stride`]): the same operations against a linear reference
//! model, and readers racing a writer. Test-only.

use crate::lpm4::{mask128, LpmError, LpmStats, MAX_NEXT_HOP};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// What the checks need of a trie.
pub(crate) trait Trie6: Send + Sync + 'static {
    fn insert(&self, addr: u128, len: u8, nh: u32) -> Result<Option<u32>, LpmError>;
    fn remove(&self, addr: u128, len: u8) -> Option<u32>;
    fn get(&self, addr: u128, len: u8) -> Option<u32>;
    fn lookup(&self, addr: u128) -> Option<u32>;
    fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<u32>]);
    fn len(&self) -> usize;
    fn reclaim(&self) -> usize;
    fn stats(&self) -> LpmStats;
}

macro_rules! trie6 {
    ($t:ty) => {
        impl Trie6 for $t {
            fn insert(&self, addr: u128, len: u8, nh: u32) -> Result<Option<u32>, LpmError> {
                <$t>::insert(self, addr, len, nh)
            }
            fn remove(&self, addr: u128, len: u8) -> Option<u32> {
                <$t>::remove(self, addr, len)
            }
            fn get(&self, addr: u128, len: u8) -> Option<u32> {
                <$t>::get(self, addr, len)
            }
            fn lookup(&self, addr: u128) -> Option<u32> {
                <$t>::lookup(self, addr)
            }
            fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<u32>]) {
                <$t>::lookup_batch(self, addrs, out)
            }
            fn len(&self) -> usize {
                <$t>::len(self)
            }
            fn reclaim(&self) -> usize {
                <$t>::reclaim(self)
            }
            fn stats(&self) -> LpmStats {
                <$t>::stats(self)
            }
        }
    };
}
trie6!(crate::Lpm6);
trie6!(crate::Lpm6Stride);

pub(crate) struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn next128(&mut self) -> u128 {
        (self.next() as u128) << 64 | self.next() as u128
    }
}

/// The reference: a list of prefixes, longest match by linear scan.
#[derive(Default)]
pub(crate) struct Model(pub Vec<(u128, u8, u32)>);
impl Model {
    pub fn insert(&mut self, a: u128, l: u8, nh: u32) -> Option<u32> {
        let a = a & mask128(l as u32);
        for p in &mut self.0 {
            if p.0 == a && p.1 == l {
                return Some(std::mem::replace(&mut p.2, nh));
            }
        }
        self.0.push((a, l, nh));
        None
    }
    pub fn remove(&mut self, a: u128, l: u8) -> Option<u32> {
        let a = a & mask128(l as u32);
        let i = self.0.iter().position(|p| p.0 == a && p.1 == l)?;
        Some(self.0.swap_remove(i).2)
    }
    pub fn lookup(&self, x: u128) -> Option<u32> {
        self.0
            .iter()
            .filter(|p| x & mask128(p.1 as u32) == p.0)
            .max_by_key(|p| p.1)
            .map(|p| p.2)
    }
}

/// The addresses at and just past either end of a prefix.
pub(crate) fn boundaries(a: u128, l: u8) -> [u128; 6] {
    let m = mask128(l as u32);
    let first = a & m;
    let last = first | !m;
    [
        first,
        last,
        first.wrapping_sub(1),
        last.wrapping_add(1),
        first.wrapping_add(1),
        last.wrapping_sub(1),
    ]
}

/// 2001:db8::/32.
pub(crate) const DOC: u128 = 0x2001_0db8 << 96;

pub(crate) fn random_prefix(r: &mut Rng) -> (u128, u8) {
    let x = r.next();
    // Few values in each region so prefixes nest often.
    let a = DOC ^ (r.next128() & 0x0003_0000_0301_0000_0300_0000_0000_0103);
    let len = match x % 32 {
        0 => 1 + (x >> 8) as u8 % 15,
        1..=3 => 16 + (x >> 8) as u8 % 16,
        4..=20 => 32 + (x >> 8) as u8 % 33,
        _ => 65 + (x >> 8) as u8 % 64,
    };
    (a, len)
}

/// A default route, a /32, a host and two more-specifics: lookups fall
/// back as they go, every node folds away, bad input is refused.
pub(crate) fn basics_default_host_and_fallback(t: &impl Trie6) {
    assert_eq!(t.lookup(DOC), None);
    t.insert(0, 0, 1).unwrap();
    t.insert(DOC, 32, 2).unwrap();
    t.insert(DOC | 1, 128, 3).unwrap();
    t.insert(DOC | 0x1_0000 << 64, 48, 4).unwrap();
    t.insert(DOC | 0x1_0001 << 64, 64, 5).unwrap();
    assert_eq!(t.lookup(0x3000 << 112), Some(1));
    assert_eq!(t.lookup(DOC | 2), Some(2));
    assert_eq!(t.lookup(DOC | 1), Some(3));
    assert_eq!(t.lookup(DOC | 0x1_0000 << 64 | 9), Some(4));
    assert_eq!(t.lookup(DOC | 0x1_0001 << 64 | 9), Some(5));
    assert_eq!(t.get(DOC | 0xff, 32), Some(2));
    assert_eq!(t.remove(DOC | 1, 128), Some(3));
    assert_eq!(t.lookup(DOC | 1), Some(2));
    assert_eq!(t.remove(DOC, 32), Some(2));
    assert_eq!(t.lookup(DOC | 1), Some(1));
    assert_eq!(t.lookup(DOC | 0x1_0000 << 64), Some(4));
    t.remove(DOC | 0x1_0000 << 64, 48);
    t.remove(DOC | 0x1_0001 << 64, 64);
    // Every node folded away.
    assert_eq!(t.stats().nodes, 0);
    assert_eq!(t.remove(0, 0), Some(1));
    assert_eq!(t.lookup(DOC), None);
    assert_eq!(t.len(), 0);
    assert_eq!(t.insert(0, 129, 1), Err(LpmError::BadLength));
    assert_eq!(t.insert(0, 1, MAX_NEXT_HOP + 1), Err(LpmError::BadNextHop));
}

/// Random inserts and removes of nested prefixes of every length, checked
/// against the linear model at every prefix's boundaries; `reclaim_every`
/// steps a reclaim (no readers here: every call is past a grace period).
pub(crate) fn matches_reference_model(t: &impl Trie6, reclaim_every: u32) {
    let mut model = Model::default();
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    for step in 0..20_000u32 {
        let (a, l) = if step % 3001 == 1000 {
            (r.next128(), 0)
        } else {
            random_prefix(&mut r)
        };
        let nh = (r.next() % 1000) as u32;
        if r.next() % 5 < 3 {
            assert_eq!(t.insert(a, l, nh).unwrap(), model.insert(a, l, nh));
        } else {
            assert_eq!(t.remove(a, l), model.remove(a, l));
        }
        for x in boundaries(a, l) {
            assert_eq!(t.lookup(x), model.lookup(x), "step {step} addr {x:#x}");
        }
        let x = random_prefix(&mut r).0 ^ r.next() as u128;
        assert_eq!(t.lookup(x), model.lookup(x));
        if step % reclaim_every == 0 {
            t.reclaim();
        }
        if step % 2000 == 0 {
            for p in &model.0 {
                for x in boundaries(p.0, p.1) {
                    assert_eq!(t.lookup(x), model.lookup(x), "full check {x:#x}");
                }
            }
            assert_eq!(t.len(), model.0.len());
            t.reclaim();
        }
    }
    let addrs: Vec<u128> = (0..257).map(|_| random_prefix(&mut r).0).collect();
    let mut out = vec![None; addrs.len()];
    t.lookup_batch(&addrs, &mut out);
    for (a, o) in addrs.iter().zip(&out) {
        assert_eq!(*o, model.lookup(*a));
    }
    let all: Vec<_> = model.0.clone();
    for p in all {
        assert_eq!(t.remove(p.0, p.1), Some(p.2));
    }
    assert_eq!(t.len(), 0);
    assert_eq!(t.stats().nodes, 0);
}

/// Readers see only the stable answer for a stable /48 and its /128 while
/// the writer churns prefixes around and inside it, and recycles nodes
/// after a grace period every `every` rounds. With `wait` the writer waits
/// for it, as `Fib::maintain` does (a copy-on-write trie leaves the
/// replaced path behind on every update and would fill its pool);
/// without, it reclaims only when the readers happen to have passed.
pub(crate) fn concurrent_readers_see_old_or_new<T: Trie6>(t: T, every: u32, wait: bool) {
    let t = Arc::new(t);
    let stable = DOC | 0x0001_0002 << 64;
    t.insert(stable, 48, 7).unwrap();
    t.insert(stable | 0x77, 128, 8).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let passes: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let readers: Vec<_> = (0..2)
        .map(|id| {
            let (t, stop, passes) = (t.clone(), stop.clone(), passes.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                // At least one full pass, however the threads are scheduled.
                while n == 0 || !stop.load(Ordering::Relaxed) {
                    for k in 0..256u128 {
                        let x = stable | k | ((k >> 7) << 70);
                        let want = if x == stable | 0x77 { 8 } else { 7 };
                        assert_eq!(t.lookup(x), Some(want));
                    }
                    for k in 0..64u128 {
                        let x = DOC | 0x9_0000 << 64 | (k * 0x1234_5678_9abc_def1) << 8;
                        let v = t.lookup(x);
                        assert!(matches!(v, None | Some(1) | Some(100..=103)), "{v:?}");
                    }
                    n += 1;
                    passes[id].store(n, Ordering::Release);
                    // Two cores, three threads: let the writer run.
                    std::thread::yield_now();
                }
                n
            })
        })
        .collect();
    let mut r = Rng(7);
    let mut grace = [0u64; 2];
    for round in 0..6_000u32 {
        let x = r.next();
        let len = [44u8, 48, 52, 56, 64, 100, 128][(x >> 32) as usize % 7];
        let len = if len == 44 && round % 10 != 0 {
            48
        } else {
            len
        };
        let a = if len == 44 {
            DOC | 0x9_0000 << 64
        } else {
            DOC | 0x9_0000 << 64 | (r.next128() & (0xf0_ff00 << 64 | 0xff))
        };
        let nh = if len == 32 {
            1
        } else {
            100 + (x >> 40) as u32 % 4
        };
        if round % 3 == 0 {
            t.remove(a, len);
        } else {
            t.insert(a, len, nh).unwrap();
        }
        if round % 7 == 0 {
            t.insert(stable, 40, 100).unwrap();
            t.insert(stable | 0x80, 121, 7).unwrap();
            t.remove(stable | 0x80, 121);
            t.remove(stable, 40);
        }
        let passed =
            |grace: &[u64; 2]| (0..2).all(|i| passes[i].load(Ordering::Acquire) > grace[i]);
        if round % every == 0 && (wait || passed(&grace)) {
            while !passed(&grace) {
                // A reader that failed an assertion never passes again:
                // stop and let the join below report it.
                if readers.iter().any(|h| h.is_finished()) {
                    break;
                }
                std::thread::yield_now();
            }
            if readers.iter().any(|h| h.is_finished()) {
                break;
            }
            t.reclaim();
            for (i, g) in grace.iter_mut().enumerate() {
                *g = passes[i].load(Ordering::Acquire);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in readers {
        assert!(h.join().unwrap() > 0);
    }
}
