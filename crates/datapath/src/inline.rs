//! Inline service control: frames received on a bump-in-the-wire port go
//! through this worker's `dpi::engine::Engine` and leave, unchanged, by the
//! pair's other port, before (and instead of) the layer-2 stage, unless
//! bandwidth control drops them (over a share or a used-up quota). In bypass
//! they still pass, without the engine. No allocation, lock or system call
//! per frame: the engine is taken from the plan once per configuration
//! change, transmit is the worker's ordinary ring write and flush.

use crate::worker::*;
use dpi::engine::Verdict;
use io::FrameBatch;
use tables::PortSet;

/// Flows the idle sweep looks at per pass (the loop passes at least every
/// 10 ms when idle, every batch when busy).
const SWEEP_BUDGET: usize = 256;

impl Worker {
    /// Takes the inline ports' frames out of `batch` (see the module
    /// docs). Returns true if there were any.
    pub(crate) fn inline_pass(&mut self, batch: &mut FrameBatch) -> bool {
        let Some(plan) = self.shared.inline.load_full() else {
            if self.inline.engine.is_some() {
                // Configuration removed: free the engine (not per frame).
                self.inline.engine = None;
                self.inline.generation = 0;
            }
            return false;
        };
        // The switch's epoch, shared by every worker: usage records' times
        // are converted to wall-clock time with it.
        let now_us = self.shared.epoch.elapsed().as_micros() as u64;
        if plan.generation != self.inline.generation {
            if let Some(mut old) = self.inline.engine.take() {
                // Its flows end here (once per configuration change):
                // exported as usage records when the old plan exported.
                if old.exports() {
                    old.clear(now_us / 1000);
                }
            }
            self.inline.engine = plan.take_engine(self.index);
            self.inline.generation = plan.generation;
        }
        let now = now_us / 1000;
        let mut any = false;
        if !batch.is_empty() {
            let bypass = plan.bypassed();
            let view = plan.subscribers.load();
            let mut keep = [true; io::BATCH_MAX];
            let mut dirty = PortSet::EMPTY;
            if !bypass {
                if let Some(e) = self.inline.engine.as_ref() {
                    // Start every inline frame's flow lookup before the
                    // first: their cache misses overlap (docs/performance.md).
                    e.prefetch(
                        (0..batch.len()).filter_map(|i| {
                            plan.pair(batch.port(i))
                                .map(|(_, side)| (batch.frame(i), side))
                        }),
                        &view,
                    );
                }
            }
            for (i, k) in keep.iter_mut().enumerate().take(batch.len()) {
                let Some((peer, side)) = plan.pair(batch.port(i)) else {
                    continue;
                };
                *k = false;
                any = true;
                let frame = batch.frame(i);
                if let Some(pc) = self.counters.ports.get(batch.port(i) as usize) {
                    pc.count_rx(frame);
                }
                if !bypass {
                    if let Some(e) = self.inline.engine.as_mut() {
                        // Over its bandwidth share or quota: counted by
                        // the engine, not forwarded.
                        if e.process_us(frame, side, &view, now_us) == Verdict::Drop {
                            continue;
                        }
                    }
                }
                self.transmit_raw(peer, frame, &mut dirty, None);
            }
            if any {
                self.flush(dirty);
                batch.retain(|i| keep[i]);
            }
        }
        if now.saturating_sub(self.inline.last_sweep_ms) >= 10 {
            self.inline.last_sweep_ms = now;
            if let Some(e) = self.inline.engine.as_mut() {
                e.sweep(now, SWEEP_BUDGET);
            }
        }
        any
    }
}
