//! The peer's learned addresses, as received over the peer link: each is
//! bound to a multichassis channel id (or 0, a port of the peer outside
//! any channel), never to a physical member, so a member failing on
//! either node moves nothing.
//!
//! A full copy is bracketed by `SyncStart`/`SyncEnd` with a generation:
//! entries not refreshed during the copy are removed at its end, so a
//! node that joins late (or after a split) ends with exactly the peer's
//! table.

use std::collections::HashMap;
use wire::vswitch::MacEntry;

/// The peer's address table.
#[derive(Debug, Default)]
pub struct PeerMacs {
    /// (MAC, VLAN) → (channel id, generation last seen).
    entries: HashMap<([u8; 6], u16), (u16, u32)>,
    /// The copy in progress, if any.
    syncing: Option<u32>,
    generation: u32,
    /// Completed full copies.
    pub copies: u64,
    /// Copies that ended with a count other than what arrived.
    pub copy_mismatch: u64,
    received_in_copy: u64,
}

impl PeerMacs {
    /// Applies one update.
    pub fn apply(&mut self, e: &MacEntry) {
        let key = (e.mac, e.vlan);
        if e.add {
            self.entries.insert(key, (e.channel, self.generation));
            if self.syncing.is_some() {
                self.received_in_copy += 1;
            }
        } else {
            self.entries.remove(&key);
        }
    }

    /// A full copy is being received.
    pub fn copying(&self) -> bool {
        self.syncing.is_some()
    }

    /// Entries of another kind (neighbours, groups) received in the copy:
    /// the end marker counts every entry.
    pub fn count_in_copy(&mut self, n: usize) {
        if self.syncing.is_some() {
            self.received_in_copy += n as u64;
        }
    }

    /// A full copy starts.
    pub fn sync_start(&mut self, generation: u32) {
        // Generation 0 is "before any copy"; keep a copy's own apart from it.
        self.generation = generation.max(1);
        self.syncing = Some(generation);
        self.received_in_copy = 0;
    }

    /// A full copy ended: stale entries go. Returns whether it was
    /// complete (its start was seen and the count agrees).
    /// `swept` hears of each (MAC, VLAN) removed as stale.
    pub fn sync_end(
        &mut self,
        generation: u32,
        sent: u32,
        mut swept: impl FnMut([u8; 6], u16),
    ) -> bool {
        if self.syncing != Some(generation) {
            self.copy_mismatch += 1;
            return false;
        }
        self.syncing = None;
        let g = self.generation;
        self.entries.retain(|(mac, vlan), (_, seen)| {
            let keep = *seen == g;
            if !keep {
                swept(*mac, *vlan);
            }
            keep
        });
        self.copies += 1;
        let ok = self.received_in_copy == sent as u64;
        if !ok {
            self.copy_mismatch += 1;
        }
        ok
    }

    /// The peer is gone for good (not a split): its addresses reached by
    /// a channel stay valid (our own members reach them); those behind
    /// its other ports go.
    /// Returns the (MAC, VLAN) pairs removed.
    pub fn peer_lost(&mut self) -> Vec<([u8; 6], u16)> {
        let mut gone = Vec::new();
        self.entries.retain(|k, (ch, _)| {
            if *ch == 0 {
                gone.push(*k);
            }
            *ch != 0
        });
        self.syncing = None;
        gone
    }

    /// Channel id of (MAC, VLAN), if the peer learned it.
    pub fn lookup(&self, mac: [u8; 6], vlan: u16) -> Option<u16> {
        self.entries.get(&(mac, vlan)).map(|(c, _)| *c)
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
    use wire::vswitch::{
        decode, encode, encode_macs, Message, HEADER_LEN, MAX_MAC_ENTRIES, MAX_PAYLOAD,
    };

    fn entry(i: u32, channel: u16) -> MacEntry {
        let b = i.to_be_bytes();
        MacEntry {
            mac: [2, 0, b[0], b[1], b[2], b[3]],
            vlan: 10,
            channel,
            add: true,
        }
    }

    /// A full copy of `n` addresses through the wire format, as a late
    /// joiner receives it.
    fn copy(into: &mut PeerMacs, generation: u32, table: &[MacEntry]) {
        let mut buf = [0u8; HEADER_LEN + MAX_PAYLOAD];
        let feed = |buf: &[u8], into: &mut PeerMacs| match decode(buf).unwrap().1 {
            Message::SyncStart { generation } => into.sync_start(generation),
            Message::SyncEnd {
                generation,
                entries,
            } => assert!(into.sync_end(generation, entries, |_, _| {})),
            Message::Macs(m) => m.iter().for_each(|e| into.apply(&e)),
            m => panic!("{m:?}"),
        };
        let n = encode(1, &Message::SyncStart { generation }, &mut buf).unwrap();
        feed(&buf[..n], into);
        for chunk in table.chunks(MAX_MAC_ENTRIES) {
            let n = encode_macs(1, chunk, &mut buf).unwrap();
            feed(&buf[..n], into);
        }
        let end = Message::SyncEnd {
            generation,
            entries: table.len() as u32,
        };
        let n = encode(1, &end, &mut buf).unwrap();
        feed(&buf[..n], into);
    }

    #[test]
    fn late_joiner_gets_exactly_the_peer_table() {
        let mut m = PeerMacs::default();
        // Stale state from before a split.
        for i in 0..50 {
            m.apply(&entry(1_000_000 + i, 1));
        }
        let table: Vec<MacEntry> = (0..100_000).map(|i| entry(i, (i % 3) as u16)).collect();
        copy(&mut m, 1, &table);
        assert_eq!(m.len(), 100_000);
        assert_eq!(m.lookup(entry(1_000_001, 1).mac, 10), None);
        assert_eq!(m.lookup(entry(7, 0).mac, 10), Some(1));
        assert_eq!(m.copies, 1);
        // Incremental updates after the copy.
        m.apply(&MacEntry {
            add: false,
            ..entry(7, 1)
        });
        assert_eq!(m.lookup(entry(7, 0).mac, 10), None);
        // Peer lost: channel-bound entries stay, orphan ones go.
        let gone = m.peer_lost();
        assert_eq!(gone.len(), 33_334);
        assert_eq!(m.len(), 100_000 - 1 - 33_334);
    }

    #[test]
    fn copy_without_start_or_with_a_short_count() {
        let mut m = PeerMacs::default();
        assert!(!m.sync_end(5, 0, |_, _| {}));
        m.sync_start(6);
        m.apply(&entry(1, 1));
        assert!(!m.sync_end(6, 2, |_, _| {}));
        assert_eq!(m.copy_mismatch, 2);
        assert_eq!(m.len(), 1);
    }
}
