//! A background receiver that counts numbered UDP test packets from one
//! source MAC on a port, by sequence number, so duplicates (a loop, a
//! frame sent twice across a pair) show separately from delivery.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::frame::Mac;
use crate::{ip, RawPort};

/// Counts unique and duplicate sequence numbers until dropped.
pub struct SeqReceiver {
    stop: Arc<AtomicBool>,
    unique: Arc<AtomicU64>,
    dups: Arc<AtomicU64>,
    seen: Arc<Mutex<HashSet<u64>>>,
    thread: Option<JoinHandle<()>>,
}

impl SeqReceiver {
    /// Starts counting packets from `src` arriving on `port`.
    pub fn start(port: RawPort, src: Mac) -> SeqReceiver {
        let stop = Arc::new(AtomicBool::new(false));
        let unique = Arc::new(AtomicU64::new(0));
        let dups = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(Mutex::new(HashSet::new()));
        let (s2, u2, d2, seen2) = (stop.clone(), unique.clone(), dups.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                let Ok(Some(f)) = port.recv_timeout(Duration::from_millis(50)) else {
                    continue;
                };
                let Some(seq) = ip::parse(&f)
                    .filter(|i| i.src_mac == src)
                    .and_then(|i| i.seq)
                else {
                    continue;
                };
                let fresh = seen2.lock().unwrap_or_else(|e| e.into_inner()).insert(seq);
                if fresh { &u2 } else { &d2 }.fetch_add(1, Ordering::Relaxed);
            }
        });
        SeqReceiver {
            stop,
            unique,
            dups,
            seen,
            thread: Some(thread),
        }
    }

    /// Distinct sequence numbers received so far.
    pub fn unique(&self) -> u64 {
        self.unique.load(Ordering::Relaxed)
    }

    /// Packets received again after their first copy.
    pub fn dups(&self) -> u64 {
        self.dups.load(Ordering::Relaxed)
    }

    /// The unique count once it has not moved for `interval`.
    pub fn wait_quiet(&self, interval: Duration) -> u64 {
        let mut last = u64::MAX;
        loop {
            std::thread::sleep(interval);
            let n = self.unique();
            if n == last {
                return n;
            }
            last = n;
        }
    }

    /// The distinct sequence numbers received so far (unordered): tests
    /// that number several streams apart count per stream from these.
    pub fn seqs(&self) -> Vec<u64> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect()
    }

    /// Forgets everything counted so far.
    pub fn reset(&self) {
        self.unique.store(0, Ordering::Relaxed);
        self.dups.store(0, Ordering::Relaxed);
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

impl Drop for SeqReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
