//! An in-memory port for tests: frames injected by a [`MemoryPeer`] are
//! received, frames sent are collected for the peer to take.
//!
//! This backend allocates and locks freely; it is not for the data path.

use crate::{FrameBatch, Port, PortError, PortStats, MAX_FRAME_LEN};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
struct Shared {
    rx: VecDeque<Vec<u8>>,
    /// Committed but not yet flushed.
    queued: Vec<Vec<u8>>,
    /// Flushed: "on the wire".
    sent: Vec<Vec<u8>>,
    tx_capacity: Option<usize>,
    stats: PortStats,
}

/// The port side; implements [`Port`].
pub struct MemoryPort {
    name: String,
    shared: Arc<Mutex<Shared>>,
    slot: Box<[u8]>,
    lent: bool,
}

/// The test side of a [`MemoryPort`].
#[derive(Clone)]
pub struct MemoryPeer {
    shared: Arc<Mutex<Shared>>,
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl MemoryPort {
    pub fn new(name: &str) -> (MemoryPort, MemoryPeer) {
        let shared = Arc::new(Mutex::new(Shared::default()));
        (
            MemoryPort {
                name: name.to_string(),
                shared: shared.clone(),
                slot: vec![0u8; MAX_FRAME_LEN].into_boxed_slice(),
                lent: false,
            },
            MemoryPeer { shared },
        )
    }
}

impl MemoryPeer {
    /// Queue a frame for the port to receive.
    pub fn inject(&self, frame: &[u8]) {
        lock(&self.shared).rx.push_back(frame.to_vec());
    }

    /// Frames flushed by the port since the last call, in order.
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut lock(&self.shared).sent)
    }

    /// Frames injected but not yet received by the port.
    pub fn pending_rx(&self) -> usize {
        lock(&self.shared).rx.len()
    }

    /// Limit how many frames may wait in the "transmit ring" (committed and
    /// not yet taken by the peer); `None` = unlimited. Simulates a full ring.
    pub fn set_tx_capacity(&self, cap: Option<usize>) {
        lock(&self.shared).tx_capacity = cap;
    }

    /// Add to the ring-drop counter (as if the kernel dropped frames).
    pub fn add_rx_ring_drops(&self, n: u64) {
        lock(&self.shared).stats.rx_ring_drops += n;
    }
}

impl Port for MemoryPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut FrameBatch, port_id: u16) -> Result<usize, PortError> {
        let mut s = lock(&self.shared);
        let mut n = 0;
        while let Some(f) = s.rx.front() {
            if f.len() > MAX_FRAME_LEN {
                s.rx.pop_front();
                s.stats.rx_truncated += 1;
                continue;
            }
            if !batch.push(port_id, f) {
                break;
            }
            s.rx.pop_front();
            n += 1;
        }
        Ok(n)
    }

    fn tx_slot(&mut self) -> Option<&mut [u8]> {
        {
            let mut s = lock(&self.shared);
            if let Some(cap) = s.tx_capacity {
                if s.queued.len() + s.sent.len() >= cap {
                    s.stats.tx_ring_full += 1;
                    self.lent = false;
                    return None;
                }
            }
        }
        self.lent = true;
        Some(&mut self.slot[..])
    }

    fn tx_commit(&mut self, len: usize) {
        if !std::mem::take(&mut self.lent) {
            debug_assert!(false, "tx_commit without tx_slot");
            return;
        }
        let len = len.min(MAX_FRAME_LEN);
        lock(&self.shared).queued.push(self.slot[..len].to_vec());
    }

    fn flush(&mut self) -> Result<(), PortError> {
        let mut s = lock(&self.shared);
        let q = std::mem::take(&mut s.queued);
        s.sent.extend(q);
        Ok(())
    }

    fn rx_fd(&self) -> Option<RawFd> {
        None
    }

    fn stats(&mut self) -> PortStats {
        lock(&self.shared).stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_and_receive_in_order() {
        let (mut p, peer) = MemoryPort::new("m0");
        assert_eq!(p.name(), "m0");
        peer.inject(&[1u8; 60]);
        peer.inject(&[2u8; 9000]);
        let mut b = FrameBatch::new();
        assert_eq!(p.recv(&mut b, 7).unwrap(), 2);
        assert_eq!(b.frame(0), &[1u8; 60][..]);
        assert_eq!(b.frame(1), &[2u8; 9000][..]);
        assert_eq!(b.port(1), 7);
        assert_eq!(p.recv(&mut b, 7).unwrap(), 0);
        assert_eq!(peer.pending_rx(), 0);
    }

    #[test]
    fn recv_stops_when_batch_full_and_resumes() {
        let (mut p, peer) = MemoryPort::new("m0");
        for i in 0..300u32 {
            peer.inject(&i.to_be_bytes().repeat(16));
        }
        let mut b = FrameBatch::new();
        assert_eq!(p.recv(&mut b, 0).unwrap(), BATCH_MAX_T);
        assert_eq!(peer.pending_rx(), 300 - BATCH_MAX_T);
        b.clear();
        assert_eq!(p.recv(&mut b, 0).unwrap(), 300 - BATCH_MAX_T);
        assert_eq!(&b.frame(0)[..4], &(BATCH_MAX_T as u32).to_be_bytes());
    }
    const BATCH_MAX_T: usize = crate::BATCH_MAX;

    #[test]
    fn oversized_injected_frame_counts_truncated() {
        let (mut p, peer) = MemoryPort::new("m0");
        peer.inject(&vec![0u8; MAX_FRAME_LEN + 1]);
        peer.inject(&[9u8; 64]);
        let mut b = FrameBatch::new();
        assert_eq!(p.recv(&mut b, 0).unwrap(), 1);
        assert_eq!(p.stats().rx_truncated, 1);
    }

    #[test]
    fn send_is_visible_only_after_flush() {
        let (mut p, peer) = MemoryPort::new("m0");
        let slot = p.tx_slot().unwrap();
        assert!(slot.len() >= MAX_FRAME_LEN);
        slot[..3].copy_from_slice(&[1, 2, 3]);
        p.tx_commit(3);
        assert!(p.send(&[4u8; 100]));
        assert!(peer.take_sent().is_empty());
        p.flush().unwrap();
        assert_eq!(peer.take_sent(), vec![vec![1, 2, 3], vec![4u8; 100]]);
        assert!(peer.take_sent().is_empty());
        assert!(!p.send(&vec![0u8; MAX_FRAME_LEN + 1]), "too long");
    }

    #[test]
    fn tx_capacity_simulates_full_ring() {
        let (mut p, peer) = MemoryPort::new("m0");
        peer.set_tx_capacity(Some(2));
        assert!(p.send(&[1u8; 60]));
        assert!(p.send(&[2u8; 60]));
        assert!(p.tx_slot().is_none());
        assert!(!p.send(&[3u8; 60]));
        assert_eq!(p.stats().tx_ring_full, 2);
        p.flush().unwrap();
        assert!(p.tx_slot().is_none(), "still full until the peer takes");
        assert_eq!(peer.take_sent().len(), 2);
        assert!(p.send(&[4u8; 60]));
        p.flush().unwrap();
        assert_eq!(peer.take_sent(), vec![vec![4u8; 60]]);
    }
}
