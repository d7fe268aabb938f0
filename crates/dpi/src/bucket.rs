//! The token bucket each subscriber × service usage entry carries for
//! bandwidth control ([`crate::bandwidth`]), with the control state the
//! control thread writes into it. A subscriber's *total* entry
//! ([`crate::service::TOTAL`]) uses the same structure for its own cap,
//! its quota and the limit on frames of flows being classified.

use crate::counter::Counter;

/// Bucket depth: this long at the bucket's rate…
pub const BURST_US: u64 = 20_000;
/// …but at least two full-size frames.
pub const MIN_BURST_BYTES: u64 = 3_028;

/// Token state of one bucket per direction (written by one worker).
#[derive(Default, Debug)]
#[repr(C)]
pub struct Tokens {
    /// Tokens in byte-microseconds per second (bytes × 10⁶).
    tokens: [Counter; 2],
    last_us: [Counter; 2],
}

impl Tokens {
    /// Takes `bytes` at `rate` (bytes/s) if the bucket holds them; a
    /// bucket never used starts full.
    #[inline]
    pub fn admit(&self, dir: usize, rate: u64, bytes: u32, now_us: u64) -> bool {
        if rate == 0 {
            return false;
        }
        let depth = rate
            .saturating_mul(BURST_US)
            .max(MIN_BURST_BYTES * 1_000_000);
        let last = self.last_us[dir].get();
        let mut t = if last == 0 {
            depth
        } else {
            self.tokens[dir]
                .get()
                .saturating_add(rate.saturating_mul(now_us.saturating_sub(last)))
                .min(depth)
        };
        self.last_us[dir].set(now_us.max(1));
        let cost = u64::from(bytes) * 1_000_000;
        let ok = t >= cost;
        if ok {
            t -= cost;
        }
        self.tokens[dir].set(t);
        ok
    }

    /// Gives back what [`Tokens::admit`] took for a frame a later check
    /// dropped (the next admit caps the bucket at its depth again).
    #[inline]
    pub fn refund(&self, dir: usize, bytes: u32) {
        let t = &self.tokens[dir];
        t.set(t.get().saturating_add(u64::from(bytes) * 1_000_000));
    }
}

/// One usage entry's token buckets and control state. Fields are written
/// by one thread each: `rate`, `quota_out`, `quota_rate` and `passed_rate`
/// by the control thread, the rest by the entry's worker.
#[derive(Default, Debug)]
#[repr(C)]
pub struct Bucket {
    // Fields a packet reads first come first (see `service::Slot`).
    /// 1 while the subscriber's quota is used up.
    pub quota_out: Counter,
    /// Bytes/s assigned per direction (0 = not yet assigned).
    pub rate: [Counter; 2],
    /// The subscriber's package index + 1 (0 = unknown).
    pub package: Counter,
    tokens: Tokens,
    /// Total entries: the subscriber's cap per direction, bytes/s (0 =
    /// none), as its worker last saw it in the subscriber table.
    pub cap: [Counter; 2],
    /// Total entries: bytes/s left while the quota is used up (0 = drop).
    pub quota_rate: Counter,
    /// Total entries: passed bytes/s per direction (smoothed, all
    /// workers), for `show subscriber`.
    pub passed_rate: [Counter; 2],
    /// Total entries: the bucket of frames of flows being classified.
    pub classifying: Tokens,
}

// SAFETY: counters only (atomics), valid as zero.
unsafe impl crate::huge::Zeroable for Bucket {}

impl Bucket {
    /// See [`Tokens::admit`].
    #[inline]
    pub fn admit(&self, dir: usize, rate: u64, bytes: u32, now_us: u64) -> bool {
        self.tokens.admit(dir, rate, bytes, now_us)
    }

    /// See [`Tokens::refund`].
    #[inline]
    pub fn refund(&self, dir: usize, bytes: u32) {
        self.tokens.refund(dir, bytes)
    }
}
