//! Fixed-size bit sets of ports and VLANs (no allocation, copyable).

/// Most ports one switch has (port ids are `0..MAX_PORTS`).
pub const MAX_PORTS: usize = 256;

/// A set of port ids `0..MAX_PORTS`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct PortSet([u64; MAX_PORTS / 64]);

impl PortSet {
    pub const EMPTY: PortSet = PortSet([0; MAX_PORTS / 64]);

    #[inline]
    pub fn insert(&mut self, p: u16) {
        let p = p as usize;
        if p < MAX_PORTS {
            self.0[p / 64] |= 1 << (p % 64);
        }
    }

    #[inline]
    pub fn remove(&mut self, p: u16) {
        let p = p as usize;
        if p < MAX_PORTS {
            self.0[p / 64] &= !(1 << (p % 64));
        }
    }

    #[inline]
    pub fn contains(&self, p: u16) -> bool {
        let p = p as usize;
        p < MAX_PORTS && self.0[p / 64] & (1 << (p % 64)) != 0
    }

    /// Ports in either set.
    #[inline]
    pub fn union(&self, o: &PortSet) -> PortSet {
        let mut r = *self;
        for (a, b) in r.0.iter_mut().zip(o.0.iter()) {
            *a |= *b;
        }
        r
    }

    #[inline]
    pub fn and(&self, o: &PortSet) -> PortSet {
        let mut r = *self;
        for (a, b) in r.0.iter_mut().zip(o.0.iter()) {
            *a &= b;
        }
        r
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Ports in ascending order.
    #[inline]
    pub fn iter(&self) -> PortSetIter {
        PortSetIter {
            words: self.0,
            word: 0,
        }
    }
}

pub struct PortSetIter {
    words: [u64; MAX_PORTS / 64],
    word: usize,
}

impl Iterator for PortSetIter {
    type Item = u16;
    #[inline]
    fn next(&mut self) -> Option<u16> {
        while self.word < self.words.len() {
            let w = self.words[self.word];
            if w != 0 {
                let bit = w.trailing_zeros() as usize;
                self.words[self.word] &= w - 1;
                return Some((self.word * 64 + bit) as u16);
            }
            self.word += 1;
        }
        None
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
        for p in [0u16, 5, 63, 64, 200, 255] {
            s.insert(p);
        }
        s.insert(999); // out of range is ignored
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 5, 63, 64, 200, 255]);
        s.remove(63);
        assert!(!s.contains(63) && s.contains(64));
        assert_eq!(s.len(), 5);
        let mut t = PortSet::EMPTY;
        t.insert(5);
        t.insert(7);
        assert_eq!(s.and(&t).iter().collect::<Vec<_>>(), vec![5]);
    }

    #[test]
    fn vlanset_ops() {
        let mut v = VlanSet::default();
        v.insert(1);
        v.insert(4094);
        assert!(v.contains(1) && v.contains(4094) && !v.contains(2));
    }
}
