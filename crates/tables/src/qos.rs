//! Policers: the two-rate three-colour marker of RFC 2698 ([`TrTcm`]) and
//! the single-rate three-colour marker of RFC 2697 ([`SrTcm`]).
//!
//! Token buckets in exact integer fixed point: a bucket holds
//! `bytes × 8·10⁹` units, so `elapsed_ns × rate_bps` units arrive per
//! refill with no division and no rounding — over any interval a policer
//! passes exactly what the RFC's continuous model passes, to the byte. No
//! floats, allocation, locks or system calls; time (ns from a monotonic
//! clock, read once per batch by the worker) is an argument. A clock that
//! goes backwards is clamped: the bucket is not refilled until the clock
//! passes the latest time seen again.
//!
//! A policer's state belongs to one worker and its rate is that worker's:
//! with `n` workers sharing a class, up to `n ×` the rate passes. Divide
//! the configuration among workers with [`TrTcmConfig::per_worker`] (see
//! `docs/qos.md` for the trade-off).

/// Frame size the bursts must hold at least: a 9,216-byte jumbo payload
/// plus Ethernet header, one tag and FCS (9,216 + 18 bytes).
pub const MAX_FRAME_BYTES: u64 = 9216 + 18;
/// Largest burst size accepted (1 GiB): keeps the fixed-point arithmetic
/// within 64 bits.
pub const MAX_BURST_BYTES: u64 = 1 << 30;
/// Largest rate accepted: 10 Tbit/s.
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;

/// Fixed-point units per byte: 8 bits × 10⁹ ns/s, so a rate in bit/s is
/// also the number of units it adds per nanosecond.
const UNITS_PER_BYTE: u64 = 8_000_000_000;

/// The colour of a frame (RFC 2697/2698).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Color {
    Green = 0,
    Yellow,
    Red,
}

impl Color {
    pub const ALL: [Color; 3] = [Color::Green, Color::Yellow, Color::Red];

    pub fn name(self) -> &'static str {
        match self {
            Color::Green => "green",
            Color::Yellow => "yellow",
            Color::Red => "red",
        }
    }
}

/// RFC 2698 parameters: committed and peak information rates in bit/s,
/// committed and peak burst sizes in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrTcmConfig {
    pub cir_bps: u64,
    pub cbs_bytes: u64,
    pub pir_bps: u64,
    pub pbs_bytes: u64,
}

impl TrTcmConfig {
    /// This configuration divided among `workers` workers that each police
    /// their share of the traffic: rates divided by `workers`, bursts too
    /// but never below one maximum frame (nor above the original). `0`
    /// counts as 1. Exact for the aggregate only when the traffic spreads
    /// evenly across the workers (see `docs/qos.md`).
    pub fn per_worker(&self, workers: u32) -> TrTcmConfig {
        let n = u64::from(workers.max(1));
        let burst = |b: u64| (b / n).max(MAX_FRAME_BYTES.min(b));
        TrTcmConfig {
            cir_bps: (self.cir_bps / n).max(1),
            cbs_bytes: burst(self.cbs_bytes),
            pir_bps: (self.pir_bps / n).max(1),
            pbs_bytes: burst(self.pbs_bytes),
        }
    }
}

/// RFC 2697 parameters: committed information rate in bit/s, committed and
/// excess burst sizes in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrTcmConfig {
    pub cir_bps: u64,
    pub cbs_bytes: u64,
    pub ebs_bytes: u64,
}

fn check_rate(name: &str, v: u64) -> Result<(), String> {
    if v == 0 {
        return Err(format!("{name} must be greater than 0 bit/s"));
    }
    if v > MAX_RATE_BPS {
        return Err(format!(
            "{name} {v} bit/s is above the maximum of {MAX_RATE_BPS} bit/s"
        ));
    }
    Ok(())
}

fn check_burst(name: &str, v: u64) -> Result<(), String> {
    if v < MAX_FRAME_BYTES {
        return Err(format!(
            "{name} {v} bytes is smaller than one maximum frame ({MAX_FRAME_BYTES} bytes): \
             such frames could never conform"
        ));
    }
    if v > MAX_BURST_BYTES {
        return Err(format!(
            "{name} {v} bytes is above the maximum of {MAX_BURST_BYTES} bytes"
        ));
    }
    Ok(())
}

/// Checks an RFC 2698 configuration: rates > 0 (≤ [`MAX_RATE_BPS`]),
/// PIR ≥ CIR, both bursts ≥ one maximum frame ([`MAX_FRAME_BYTES`]) and
/// ≤ [`MAX_BURST_BYTES`].
pub fn validate(cfg: &TrTcmConfig) -> Result<(), String> {
    check_rate("CIR", cfg.cir_bps)?;
    check_rate("PIR", cfg.pir_bps)?;
    if cfg.pir_bps < cfg.cir_bps {
        return Err(format!(
            "PIR ({} bit/s) must be greater than or equal to CIR ({} bit/s)",
            cfg.pir_bps, cfg.cir_bps
        ));
    }
    check_burst("CBS", cfg.cbs_bytes)?;
    check_burst("PBS", cfg.pbs_bytes)
}

/// Checks an RFC 2697 configuration: CIR > 0 (≤ [`MAX_RATE_BPS`]),
/// CBS ≥ one maximum frame, EBS 0 (no excess burst: green or red only) or
/// ≥ one maximum frame, both ≤ [`MAX_BURST_BYTES`].
pub fn validate_sr(cfg: &SrTcmConfig) -> Result<(), String> {
    check_rate("CIR", cfg.cir_bps)?;
    check_burst("CBS", cfg.cbs_bytes)?;
    if cfg.ebs_bytes != 0 {
        check_burst("EBS", cfg.ebs_bytes)?;
    }
    Ok(())
}

/// One token bucket in fixed point (see the module documentation).
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: u64,
    max: u64,
    rate: u64,
    /// Time after which an empty bucket is full: longer gaps are clamped to
    /// it, so `gap × rate` cannot overflow.
    fill_ns: u64,
}

impl Bucket {
    fn new(rate_bps: u64, burst_bytes: u64) -> Bucket {
        let max = burst_bytes.saturating_mul(UNITS_PER_BYTE);
        Bucket {
            tokens: max,
            max,
            rate: rate_bps,
            fill_ns: fill_ns(max, rate_bps),
        }
    }

    #[inline]
    fn refill(&mut self, dt: u64) {
        let add = dt.min(self.fill_ns).saturating_mul(self.rate);
        self.tokens = self.tokens.saturating_add(add).min(self.max);
    }

    #[inline]
    fn has(&self, need: u64) -> bool {
        self.tokens >= need
    }

    #[inline]
    fn take(&mut self, need: u64) {
        self.tokens -= need;
    }

    /// New rate and size, keeping the tokens (clamped to the new size).
    fn reconfigure(&mut self, rate_bps: u64, burst_bytes: u64) {
        let b = Bucket::new(rate_bps, burst_bytes);
        *self = Bucket {
            tokens: self.tokens.min(b.max),
            ..b
        };
    }
}

fn fill_ns(max: u64, rate: u64) -> u64 {
    if rate == 0 {
        0
    } else {
        max.div_ceil(rate)
    }
}

#[inline]
fn units(bytes: u32) -> u64 {
    u64::from(bytes).saturating_mul(UNITS_PER_BYTE)
}

/// An RFC 2698 two-rate three-colour marker: bucket P (PIR, PBS) and
/// bucket C (CIR, CBS), both full at creation. Build with a configuration
/// that passed [`validate`]; others do not panic but may police oddly
/// (a rate of 0 never refills).
#[derive(Clone, Debug)]
pub struct TrTcm {
    cfg: TrTcmConfig,
    c: Bucket,
    p: Bucket,
    last_ns: u64,
}

impl TrTcm {
    pub fn new(cfg: TrTcmConfig, now_ns: u64) -> TrTcm {
        TrTcm {
            cfg,
            c: Bucket::new(cfg.cir_bps, cfg.cbs_bytes),
            p: Bucket::new(cfg.pir_bps, cfg.pbs_bytes),
            last_ns: now_ns,
        }
    }

    pub fn config(&self) -> TrTcmConfig {
        self.cfg
    }

    /// Change the rates and bursts in place (e.g. a new per-worker share),
    /// keeping the tokens already earned, clamped to the new burst sizes.
    pub fn reconfigure(&mut self, cfg: TrTcmConfig, now_ns: u64) {
        self.refill(now_ns);
        self.cfg = cfg;
        self.c.reconfigure(cfg.cir_bps, cfg.cbs_bytes);
        self.p.reconfigure(cfg.pir_bps, cfg.pbs_bytes);
    }

    #[inline]
    fn refill(&mut self, now_ns: u64) {
        // A clock going backwards gives dt = 0 and leaves `last_ns` at the
        // latest time seen.
        let dt = now_ns.saturating_sub(self.last_ns);
        if dt != 0 {
            self.last_ns = now_ns;
            self.c.refill(dt);
            self.p.refill(dt);
        }
    }

    /// Colour-blind mode (RFC 2698 §3): red if bucket P lacks `bytes`
    /// tokens; else yellow if bucket C does (P debited); else green (both
    /// debited).
    #[inline]
    pub fn color_blind(&mut self, bytes: u32, now_ns: u64) -> Color {
        self.refill(now_ns);
        let need = units(bytes);
        if !self.p.has(need) {
            Color::Red
        } else if !self.c.has(need) {
            self.p.take(need);
            Color::Yellow
        } else {
            self.p.take(need);
            self.c.take(need);
            Color::Green
        }
    }

    /// Colour-aware mode (RFC 2698 §3) with the frame's pre-colour: red if
    /// pre-coloured red or bucket P lacks the tokens; else yellow if
    /// pre-coloured yellow or bucket C lacks them (P debited); else green.
    #[inline]
    pub fn color_aware(&mut self, bytes: u32, pre: Color, now_ns: u64) -> Color {
        self.refill(now_ns);
        let need = units(bytes);
        if pre == Color::Red || !self.p.has(need) {
            Color::Red
        } else if pre == Color::Yellow || !self.c.has(need) {
            self.p.take(need);
            Color::Yellow
        } else {
            self.p.take(need);
            self.c.take(need);
            Color::Green
        }
    }
}

/// An RFC 2697 single-rate three-colour marker: bucket C (CBS) filled at
/// CIR, its overflow going to bucket E (EBS); both full at creation. Build
/// with a configuration that passed [`validate_sr`].
#[derive(Clone, Debug)]
pub struct SrTcm {
    cfg: SrTcmConfig,
    c: Bucket,
    e: Bucket,
    /// Time after which both buckets are full, whatever they held.
    fill_ns: u64,
    last_ns: u64,
}

impl SrTcm {
    pub fn new(cfg: SrTcmConfig, now_ns: u64) -> SrTcm {
        let c = Bucket::new(cfg.cir_bps, cfg.cbs_bytes);
        let e = Bucket::new(0, cfg.ebs_bytes);
        SrTcm {
            cfg,
            c,
            e,
            fill_ns: fill_ns(c.max.saturating_add(e.max), cfg.cir_bps),
            last_ns: now_ns,
        }
    }

    pub fn config(&self) -> SrTcmConfig {
        self.cfg
    }

    #[inline]
    fn refill(&mut self, now_ns: u64) {
        let dt = now_ns.saturating_sub(self.last_ns);
        if dt == 0 {
            return;
        }
        self.last_ns = now_ns;
        let add = dt.min(self.fill_ns).saturating_mul(self.c.rate);
        let room = self.c.max - self.c.tokens;
        if add <= room {
            self.c.tokens += add;
        } else {
            self.c.tokens = self.c.max;
            self.e.tokens = self.e.tokens.saturating_add(add - room).min(self.e.max);
        }
    }

    /// Colour-blind mode (RFC 2697 §3): green if bucket C holds `bytes`
    /// tokens (C debited), else yellow if bucket E does (E debited), else
    /// red.
    #[inline]
    pub fn color_blind(&mut self, bytes: u32, now_ns: u64) -> Color {
        self.color_aware(bytes, Color::Green, now_ns)
    }

    /// Colour-aware mode (RFC 2697 §3): green only if pre-coloured green
    /// and bucket C holds the tokens; yellow if pre-coloured green or
    /// yellow and bucket E holds them; else red.
    #[inline]
    pub fn color_aware(&mut self, bytes: u32, pre: Color, now_ns: u64) -> Color {
        self.refill(now_ns);
        let need = units(bytes);
        if pre == Color::Green && self.c.has(need) {
            self.c.take(need);
            Color::Green
        } else if pre != Color::Red && self.e.has(need) {
            self.e.take(need);
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn cfg(cir: u64, cbs: u64, pir: u64, pbs: u64) -> TrTcmConfig {
        TrTcmConfig {
            cir_bps: cir,
            cbs_bytes: cbs,
            pir_bps: pir,
            pbs_bytes: pbs,
        }
    }

    /// Bytes per colour for a constant stream of `size`-byte frames at
    /// `offered_bps` for `secs` simulated seconds, the clock read once per
    /// batch of `batch` frames (as the worker does).
    fn stream(
        mut mark: impl FnMut(u32, u64) -> Color,
        size: u32,
        offered_bps: u64,
        secs: u64,
        batch: u64,
    ) -> [u64; 3] {
        let mut out = [0u64; 3];
        // Frame k arrives at k × size × 8e9 / offered ns (exact integers).
        let frames = u128::from(secs) * u128::from(offered_bps) / (u128::from(size) * 8);
        let mut k: u128 = 0;
        while k < frames {
            let t = (k * u128::from(size) * 8 * u128::from(SEC) / u128::from(offered_bps)) as u64;
            for _ in 0..batch.min((frames - k) as u64) {
                out[mark(size, t) as usize] += u64::from(size);
                k += 1;
            }
        }
        out
    }

    fn within(got: u64, want: u64, tol: f64) -> bool {
        (got as f64 - want as f64).abs() <= want as f64 * tol
    }

    #[test]
    fn trtcm_constant_overload_green_cir_green_yellow_pir() {
        let secs = 10;
        // (Small frames at high rates are millions of frames: kept to the
        // low-rate row so the debug-build test stays quick.)
        // Bursts must cover the credit of one clock step (a batch of 32
        // jumbo frames at 4 Gbit/s spans 576 µs = 72 kB of CIR) or the
        // bucket overflows and under-polices: see docs/qos.md.
        let rows: [(u64, u64, u64, u64, &[u32]); 2] = [
            (
                10_000_000,
                30_000_000,
                50_000_000,
                20_000,
                &[64, 128, 512, 1500, 9000],
            ),
            (
                1_000_000_000,
                2_500_000_000,
                4_000_000_000,
                500_000,
                &[512, 1500, 9000],
            ),
        ];
        for (cir, pir, offered, cbs, sizes) in rows {
            for &size in sizes {
                let c = cfg(cir, cbs, pir, 2 * cbs);
                validate(&c).unwrap();
                let mut m = TrTcm::new(c, 0);
                let batch = if cir > 100_000_000 { 32 } else { 1 };
                let [g, y, r] = stream(|b, t| m.color_blind(b, t), size, offered, secs, batch);
                let want_g = cir * secs / 8 + c.cbs_bytes;
                let want_gy = pir * secs / 8 + c.pbs_bytes;
                assert!(
                    within(g, want_g, 0.01),
                    "size {size} green {g} want {want_g}"
                );
                assert!(
                    within(g + y, want_gy, 0.01),
                    "size {size} green+yellow {} want {want_gy}",
                    g + y
                );
                // No drift (exact fixed point): short only by what the
                // buckets hold at the end (< a frame or two) and the credit
                // after the last clock reading (< a batch).
                let slack = (batch + 2) * u64::from(size);
                assert!(g <= want_g && want_g - g < slack, "{g} vs {want_g}");
                assert!(g + y <= want_gy && want_gy - g - y < slack);
                assert!(r > 0);
            }
        }
    }

    #[test]
    fn trtcm_under_cir_all_green() {
        let c = cfg(100_000_000, 20_000, 200_000_000, 40_000);
        let mut m = TrTcm::new(c, 0);
        let [g, y, r] = stream(|b, t| m.color_blind(b, t), 1000, 90_000_000, 2, 1);
        assert_eq!((y, r), (0, 0));
        assert!(g > 0);
    }

    #[test]
    fn trtcm_burst_exact() {
        // Back-to-back at one instant: floor(CBS/size) green, then yellow
        // until P is spent, then red.
        let c = cfg(1_000_000, 10_000, 2_000_000, 25_000);
        let mut m = TrTcm::new(c, 5);
        let colors: Vec<Color> = (0..40).map(|_| m.color_blind(1000, 5)).collect();
        assert!(colors[..10].iter().all(|&c| c == Color::Green));
        assert!(colors[10..25].iter().all(|&c| c == Color::Yellow));
        assert!(colors[25..].iter().all(|&c| c == Color::Red));
        // 1 ms later: CIR gave 125 bytes, PIR 250 — not enough for 1000.
        assert_eq!(m.color_blind(1000, 5 + 1_000_000), Color::Red);
        // After 4 ms in total, P has 1000 bytes (C only 500): yellow.
        assert_eq!(m.color_blind(1000, 5 + 4_000_000), Color::Yellow);
        // Another 4 ms: C has 1000, P has 1000 again: green.
        assert_eq!(m.color_blind(1000, 5 + 8_000_000), Color::Green);
        // Small frames fit in what is left.
        assert_eq!(m.color_blind(0, 5 + 8_000_000), Color::Green);
    }

    #[test]
    fn trtcm_refills_to_burst_after_idle() {
        let c = cfg(8_000, 10_000, 16_000, 20_000); // 1 and 2 kB/s
        let mut m = TrTcm::new(c, 0);
        while m.color_blind(500, 0) != Color::Red {}
        // A long idle period refills to the burst sizes exactly, no more.
        for idle in [10 * SEC, 1_000_000 * SEC, u64::MAX / 2, u64::MAX] {
            let mut n = m.clone();
            let mut g = 0;
            let mut y = 0;
            loop {
                match n.color_blind(100, idle) {
                    Color::Green => g += 1,
                    Color::Yellow => y += 1,
                    Color::Red => break,
                }
            }
            assert_eq!((g, y), (100, 100), "idle {idle}");
        }
    }

    #[test]
    fn trtcm_large_rates_and_bursts_no_overflow() {
        let c = cfg(MAX_RATE_BPS, MAX_BURST_BYTES, MAX_RATE_BPS, MAX_BURST_BYTES);
        validate(&c).unwrap();
        let mut m = TrTcm::new(c, u64::MAX - 10);
        assert_eq!(m.color_blind(u32::MAX, u64::MAX), Color::Red);
        assert_eq!(m.color_blind(9000, u64::MAX), Color::Green);
        let mut m = TrTcm::new(c, 0);
        for t in [1, SEC, u64::MAX / 3, u64::MAX] {
            assert_eq!(m.color_blind(1 << 29, t), Color::Green);
        }
        // Frames larger than any bucket are red, never a panic.
        assert_eq!(m.color_blind(u32::MAX, u64::MAX), Color::Red);
    }

    #[test]
    fn trtcm_clock_backwards_clamped() {
        let c = cfg(8_000_000, 10_000, 16_000_000, 20_000); // 1 and 2 MB/s
        let mut m = TrTcm::new(c, 10 * SEC);
        while m.color_blind(1000, 10 * SEC) != Color::Red {}
        // Going back gives nothing, and neither does coming back to the
        // latest time seen.
        for t in [0, 5 * SEC, 10 * SEC - 1, 10 * SEC, 3] {
            assert_eq!(m.color_blind(1000, t), Color::Red, "t {t}");
        }
        // 1 ms past the latest time: exactly 1000 bytes of C and 2000 of P.
        let t = 10 * SEC + 1_000_000;
        assert_eq!(m.color_blind(1000, t), Color::Green);
        assert_eq!(m.color_blind(1000, t), Color::Yellow);
        assert_eq!(m.color_blind(1000, t), Color::Red);
        // A new policer with a time before the first call.
        let mut m = TrTcm::new(c, u64::MAX);
        assert_eq!(m.color_blind(1000, 0), Color::Green);
    }

    #[test]
    fn trtcm_color_aware() {
        let c = cfg(10_000_000, 10_000, 20_000_000, 20_000);
        let mut m = TrTcm::new(c, 0);
        assert_eq!(m.color_aware(1000, Color::Red, 0), Color::Red);
        assert_eq!(m.color_aware(1000, Color::Yellow, 0), Color::Yellow);
        assert_eq!(m.color_aware(1000, Color::Green, 0), Color::Green);
        // Red took nothing, yellow took P only: P 18000, C 9000 left.
        for _ in 0..9 {
            assert_eq!(m.color_aware(1000, Color::Green, 0), Color::Green);
        }
        assert_eq!(m.color_aware(1000, Color::Green, 0), Color::Yellow);
        for _ in 0..8 {
            assert_eq!(m.color_aware(1000, Color::Green, 0), Color::Yellow);
        }
        assert_eq!(m.color_aware(1000, Color::Yellow, 0), Color::Red);

        // Under overload, pre-yellow traffic is never promoted to green
        // and gets at most PIR; green-pre traffic gets CIR.
        let mut m = TrTcm::new(c, 0);
        let [g, y, _] = stream(
            |b, t| m.color_aware(b, Color::Yellow, t),
            500,
            100_000_000,
            10,
            1,
        );
        assert_eq!(g, 0);
        assert!(within(y, 20_000_000 * 10 / 8 + 20_000, 0.01));
    }

    #[test]
    fn trtcm_reconfigure_keeps_tokens_clamped() {
        let c = cfg(8_000_000, 100_000, 16_000_000, 200_000);
        let mut m = TrTcm::new(c, 0);
        m.reconfigure(c.per_worker(4), 0);
        assert_eq!(m.config(), c.per_worker(4));
        let mut g = 0;
        while m.color_blind(1000, 0) == Color::Green {
            g += 1;
        }
        assert_eq!(g, 25);
    }

    #[test]
    fn per_worker_split() {
        let c = cfg(1_000_000_000, 1_000_000, 3_000_000_000, 2_000_000);
        let w = c.per_worker(4);
        assert_eq!(w, cfg(250_000_000, 250_000, 750_000_000, 500_000));
        validate(&w).unwrap();
        assert_eq!(c.per_worker(0), c);
        assert_eq!(c.per_worker(1), c);
        // Bursts never go below one frame.
        let w = c.per_worker(1000);
        assert_eq!(w.cbs_bytes, MAX_FRAME_BYTES);
        validate(&w).unwrap();
        assert!(c.per_worker(u32::MAX).cir_bps >= 1);
    }

    #[test]
    fn validate_messages() {
        let ok = cfg(1_000_000, 10_000, 2_000_000, 20_000);
        assert_eq!(validate(&ok), Ok(()));
        let e = validate(&cfg(2_000_000, 10_000, 1_000_000, 20_000)).unwrap_err();
        assert!(e.contains("PIR") && e.contains("CIR"), "{e}");
        let e = validate(&cfg(0, 10_000, 1_000_000, 20_000)).unwrap_err();
        assert!(e.contains("CIR must be greater than 0"), "{e}");
        let e = validate(&cfg(1, 10_000, 0, 20_000)).unwrap_err();
        assert!(e.contains("PIR must be greater than 0"), "{e}");
        let e = validate(&cfg(1_000_000, 9233, 2_000_000, 20_000)).unwrap_err();
        assert!(e.contains("CBS 9233 bytes") && e.contains("9234"), "{e}");
        let e = validate(&cfg(1_000_000, 9234, 2_000_000, 1500)).unwrap_err();
        assert!(e.contains("PBS"), "{e}");
        let e = validate(&cfg(1, 10_000, MAX_RATE_BPS + 1, 20_000)).unwrap_err();
        assert!(e.contains("maximum"), "{e}");
        let e = validate(&cfg(1, MAX_BURST_BYTES + 1, 2, 20_000)).unwrap_err();
        assert!(e.contains("maximum"), "{e}");

        let sr = |cir, cbs, ebs| SrTcmConfig {
            cir_bps: cir,
            cbs_bytes: cbs,
            ebs_bytes: ebs,
        };
        assert_eq!(validate_sr(&sr(1, 10_000, 0)), Ok(()));
        assert_eq!(validate_sr(&sr(1, 10_000, 10_000)), Ok(()));
        assert!(validate_sr(&sr(0, 10_000, 0)).is_err());
        assert!(validate_sr(&sr(1, 100, 0)).is_err());
        assert!(validate_sr(&sr(1, 10_000, 100))
            .unwrap_err()
            .contains("EBS"));
    }

    #[test]
    fn invalid_config_never_panics() {
        for c in [
            cfg(0, 0, 0, 0),
            cfg(u64::MAX, u64::MAX, u64::MAX, u64::MAX),
            cfg(5, 0, 1, u64::MAX),
        ] {
            let mut m = TrTcm::new(c, 7);
            for t in [0, 7, 8, SEC, u64::MAX] {
                for b in [0, 1, 64, u32::MAX] {
                    m.color_blind(b, t);
                    m.color_aware(b, Color::Green, t);
                }
            }
        }
        let mut m = SrTcm::new(
            SrTcmConfig {
                cir_bps: 0,
                cbs_bytes: u64::MAX,
                ebs_bytes: u64::MAX,
            },
            0,
        );
        for t in [0, 1, u64::MAX] {
            m.color_blind(u32::MAX, t);
        }
    }

    #[test]
    fn srtcm_overload_green_cir_yellow_only_ebs() {
        for size in [64u32, 1500, 9000] {
            let c = SrTcmConfig {
                cir_bps: 10_000_000,
                cbs_bytes: 20_000,
                ebs_bytes: 50_000,
            };
            validate_sr(&c).unwrap();
            let mut m = SrTcm::new(c, 0);
            let [g, y, r] = stream(|b, t| m.color_blind(b, t), size, 40_000_000, 10, 1);
            // C never fills under overload, so E gets no overflow: yellow
            // is the initial excess burst only.
            assert!(within(g, 10_000_000 * 10 / 8 + 20_000, 0.01), "{size}: {g}");
            assert!(y <= 50_000 && y + u64::from(size) > 50_000, "{size}: {y}");
            assert!(r > 0);
        }
    }

    #[test]
    fn srtcm_overflow_goes_to_e() {
        let c = SrTcmConfig {
            cir_bps: 8_000_000, // 1 MB/s
            cbs_bytes: 10_000,
            ebs_bytes: 20_000,
        };
        let mut m = SrTcm::new(c, 0);
        // Empty both buckets.
        while m.color_blind(1000, 0) != Color::Red {}
        // 10 ms: 10,000 bytes, all to C (not full before).
        assert_eq!(m.color_blind(0, 10_000_000), Color::Green);
        for _ in 0..10 {
            assert_eq!(m.color_blind(1000, 10_000_000), Color::Green);
        }
        assert_eq!(m.color_blind(1000, 10_000_000), Color::Red);
        // 35 ms more: C fills (10,000) and E gets the other 25,000 capped at 20,000.
        let t = 45_000_000;
        let colors: Vec<Color> = (0..31).map(|_| m.color_blind(1000, t)).collect();
        assert!(colors[..10].iter().all(|&c| c == Color::Green));
        assert!(colors[10..30].iter().all(|&c| c == Color::Yellow));
        assert_eq!(colors[30], Color::Red);
        // Colour-aware: yellow pre-colour never green, red stays red.
        let mut m = SrTcm::new(c, 0);
        assert_eq!(m.color_aware(1000, Color::Yellow, 0), Color::Yellow);
        assert_eq!(m.color_aware(1000, Color::Red, 0), Color::Red);
        assert_eq!(m.color_aware(1000, Color::Green, 0), Color::Green);
        // Clock backwards: nothing gained.
        let mut m = SrTcm::new(c, SEC);
        while m.color_blind(1000, SEC) != Color::Red {}
        assert_eq!(m.color_blind(1000, 0), Color::Red);
        assert_eq!(m.color_blind(1000, SEC), Color::Red);
    }
}
