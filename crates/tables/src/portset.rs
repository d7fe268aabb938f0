//! Fixed-size bit sets of ports and VLANs (no allocation, copyable).

/// Most ports one switch has (port ids are `0..MAX_PORTS`). Raising it
/// widens every [`PortSet`] (128 bytes at 1,024) but not the per-frame
/// work: operations stop at the highest word in use (docs/scale.md).
pub const MAX_PORTS: usize = 1024;

const WORDS: usize = MAX_PORTS / 64;

/// A set of port ids `0..MAX_PORTS`. Operations touch only the words up
/// to the highest port ever inserted (`used`), so a switch with 48 ports
/// pays for one word, not sixteen, on every flood or mirror decision.
#[derive(Clone, Copy, Default, Debug)]
pub struct PortSet {
    bits: [u64; WORDS],
    /// Words `0..used` may hold bits; the rest are zero.
    used: u8,
}

impl PartialEq for PortSet {
    fn eq(&self, o: &PortSet) -> bool {
        let n = self.used.max(o.used) as usize;
        self.bits[..n] == o.bits[..n]
    }
}

impl Eq for PortSet {}

impl std::hash::Hash for PortSet {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // Trailing zero words do not count, as in `eq`.
        let n = self.bits[..self.used as usize]
            .iter()
            .rposition(|w| *w != 0)
            .map_or(0, |i| i + 1);
        self.bits[..n].hash(h);
    }
}

impl PortSet {
    pub const EMPTY: PortSet = PortSet {
        bits: [0; WORDS],
        used: 0,
    };

    #[inline]
    pub fn insert(&mut self, p: u16) {
        let p = p as usize;
        if p < MAX_PORTS {
            self.bits[p / 64] |= 1 << (p % 64);
            self.used = self.used.max((p / 64 + 1) as u8);
        }
    }

    #[inline]
    pub fn remove(&mut self, p: u16) {
        let p = p as usize;
        if p < MAX_PORTS {
            self.bits[p / 64] &= !(1 << (p % 64));
        }
    }

    #[inline]
    pub fn contains(&self, p: u16) -> bool {
        let p = p as usize;
        p < MAX_PORTS && self.bits[p / 64] & (1 << (p % 64)) != 0
    }

    /// Ports in either set.
    #[inline]
    pub fn union(&self, o: &PortSet) -> PortSet {
        let mut r = *self;
        let n = o.used as usize;
        for (a, b) in r.bits[..n].iter_mut().zip(o.bits[..n].iter()) {
            *a |= *b;
        }
        r.used = r.used.max(o.used);
        r
    }

    /// Ports in both sets.
    #[inline]
    pub fn and(&self, o: &PortSet) -> PortSet {
        let mut r = *self;
        let n = self.used as usize;
        for (a, b) in r.bits[..n].iter_mut().zip(o.bits[..n].iter()) {
            *a &= b;
        }
        r
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bits[..self.used as usize].iter().all(|w| *w == 0)
    }

    pub fn len(&self) -> usize {
        self.bits[..self.used as usize]
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum()
    }

    /// Words that may hold bits (for tests and `show`: what a frame pays).
    pub fn words_used(&self) -> usize {
        self.used as usize
    }

    /// Ports in ascending order.
    #[inline]
    pub fn iter(&self) -> PortSetIter<'_> {
        PortSetIter {
            words: &self.bits[..self.used as usize],
            cur: 0,
            word: 0,
        }
    }
}

/// Walks a [`PortSet`] word by word over the words in use (borrowed, not
/// copied: a flood decision does not copy 128 bytes).
pub struct PortSetIter<'a> {
    words: &'a [u64],
    /// The bits of `words[word - 1]` not yet returned.
    cur: u64,
    word: usize,
}

impl Iterator for PortSetIter<'_> {
    type Item = u16;
    #[inline]
    fn next(&mut self) -> Option<u16> {
        while self.cur == 0 {
            self.cur = *self.words.get(self.word)?;
            self.word += 1;
        }
        let bit = self.cur.trailing_zeros() as usize;
        self.cur &= self.cur - 1;
        Some(((self.word - 1) * 64 + bit) as u16)
    }
}

/// A set of VLAN ids 0..4096.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VlanSet(Box<[u64; 64]>);

impl Default for VlanSet {
    fn default() -> Self {
        VlanSet(Box::new([0; 64]))
    }
}

impl VlanSet {
    #[inline]
    pub fn insert(&mut self, v: u16) {
        let v = (v & 0xfff) as usize;
        self.0[v / 64] |= 1 << (v % 64);
    }

    #[inline]
    pub fn contains(&self, v: u16) -> bool {
        let v = (v & 0xfff) as usize;
        self.0[v / 64] & (1 << (v % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portset_ops() {
        let mut s = PortSet::EMPTY;
        for p in [0u16, 5, 63, 64, 200, 255, 1023] {
            s.insert(p);
        }
        s.insert(1024); // out of range is ignored
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![0, 5, 63, 64, 200, 255, 1023]
        );
        s.remove(63);
        s.remove(1023);
        assert!(!s.contains(63) && s.contains(64) && !s.contains(1023));
        assert_eq!(s.len(), 5);
        let mut t = PortSet::EMPTY;
        t.insert(5);
        t.insert(7);
        assert_eq!(s.and(&t).iter().collect::<Vec<_>>(), vec![5]);
    }

    /// A set of low ports touches one word whatever MAX_PORTS is; sets
    /// that differ only in words in use compare (and hash) equal.
    #[test]
    fn portset_touches_only_words_in_use() {
        let mut a = PortSet::EMPTY;
        for p in 0..48 {
            a.insert(p);
        }
        assert_eq!(a.words_used(), 1);
        let mut b = a;
        b.insert(700);
        assert_eq!(b.words_used(), 11);
        b.remove(700);
        assert_eq!(a, b);
        let h = |s: &PortSet| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            s.hash(&mut h);
            h.finish()
        };
        assert_eq!(h(&a), h(&b));
        let mut c = PortSet::EMPTY;
        c.insert(900);
        let u = a.union(&c);
        assert_eq!(u.len(), 49);
        assert_eq!(u.iter().last(), Some(900));
        assert!(a.and(&c).is_empty() && c.and(&a).is_empty());
        assert_eq!(u.and(&c), c);
        assert!(!PortSet::EMPTY.contains(1023) && PortSet::EMPTY.iter().next().is_none());
    }

    #[test]
    fn vlanset_ops() {
        let mut v = VlanSet::default();
        v.insert(1);
        v.insert(4094);
        assert!(v.contains(1) && v.contains(4094) && !v.contains(2));
    }
}
