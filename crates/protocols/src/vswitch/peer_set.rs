//! What the peer announced over the peer link, by key, with the full-copy
//! generation that last refreshed it: a full copy (`SyncStart` ..
//! `SyncEnd`) sweeps what it did not refresh, so a node that joins late
//! ends with exactly the peer's state. Used for neighbours and snooping
//! groups (`PeerMacs` is the same idea for the MAC table).

use std::collections::HashMap;
use std::hash::Hash;

#[derive(Debug)]
pub struct PeerSet<K, V> {
    entries: HashMap<K, (V, u32)>,
    generation: u32,
    syncing: Option<u32>,
}

impl<K, V> Default for PeerSet<K, V> {
    fn default() -> Self {
        PeerSet {
            entries: HashMap::new(),
            generation: 0,
            syncing: None,
        }
    }
}

impl<K: Eq + Hash + Copy, V: Copy> PeerSet<K, V> {
    /// Adds or refreshes `k`; returns the value it had.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        self.entries
            .insert(k, (v, self.generation))
            .map(|(old, _)| old)
    }

    /// Removes `k`; returns its value.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        self.entries.remove(k).map(|(v, _)| v)
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.entries.get(k).map(|(v, _)| v)
    }

    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.entries.get_mut(k).map(|(v, _)| v)
    }

    /// A full copy starts.
    pub fn sync_start(&mut self, generation: u32) {
        self.generation = generation.max(1);
        self.syncing = Some(generation);
    }

    /// A full copy ended: what it did not refresh goes (`swept` hears of
    /// each). False if its start was not seen (nothing is swept then).
    pub fn sync_end(&mut self, generation: u32, mut swept: impl FnMut(K, V)) -> bool {
        if self.syncing != Some(generation) {
            return false;
        }
        self.syncing = None;
        let g = self.generation;
        self.entries.retain(|k, (v, seen)| {
            let keep = *seen == g;
            if !keep {
                swept(*k, *v);
            }
            keep
        });
        true
    }

    /// Keeps the entries `keep` accepts; `gone` hears of the others.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool, mut gone: impl FnMut(K, V)) {
        self.entries.retain(|k, (v, _)| {
            let kept = keep(k, v);
            if !kept {
                gone(*k, *v);
            }
            kept
        });
        self.syncing = None;
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, (v, _))| (k, v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_copy_sweeps_what_it_did_not_refresh() {
        let mut s: PeerSet<u32, u8> = PeerSet::default();
        for k in 0..10 {
            s.insert(k, 1);
        }
        s.sync_start(4);
        for k in 5..15 {
            s.insert(k, 2);
        }
        let mut swept = Vec::new();
        assert!(s.sync_end(4, |k, _| swept.push(k)));
        swept.sort();
        assert_eq!(swept, (0..5).collect::<Vec<_>>());
        assert_eq!(s.len(), 10);
        assert_eq!(s.get(&7), Some(&2));
        // An end without its start sweeps nothing.
        assert!(!s.sync_end(5, |_, _| panic!()));
        assert_eq!(s.len(), 10);
    }
}
