//! RFC 2544 bisection between a passing lower bound and a failing upper bound.

use serde::Serialize;

/// Outcome of a bisection.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SearchOutcome {
    /// Highest value that passed (the result), 0 if none did.
    pub lo: f64,
    /// Lowest value that failed (or the starting upper bound).
    pub hi: f64,
    /// Trials run by the search.
    pub trials: u32,
    /// True when `(hi − lo) / hi` reached the resolution.
    pub converged: bool,
}

/// Bisect between `lo` (assumed to pass) and `hi` (known to fail): trial at
/// the midpoint, a pass raises `lo`, a failure lowers `hi`; stop when
/// `(hi − lo) / hi ≤ resolution` or after `max_trials` trials. `trial`
/// returns `Ok(true)` for a pass. Errors abort the search.
pub fn bisect<E>(
    mut lo: f64,
    mut hi: f64,
    resolution: f64,
    max_trials: u32,
    mut trial: impl FnMut(f64) -> Result<bool, E>,
) -> Result<SearchOutcome, E> {
    let mut trials = 0;
    let done = |lo: f64, hi: f64| hi <= 0.0 || (hi - lo) / hi <= resolution;
    while !done(lo, hi) && trials < max_trials {
        let mid = (lo + hi) / 2.0;
        trials += 1;
        if trial(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(SearchOutcome {
        lo,
        hi,
        trials,
        converged: done(lo, hi),
    })
}

/// Trials bisection needs from a gap of `(hi − lo)/hi = 1` to `resolution`.
pub fn trials_needed(resolution: f64) -> u32 {
    (1.0 / resolution).log2().ceil().max(0.0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_on_threshold() {
        for &threshold in &[1234.5, 99_999.0, 400_000.0, 7.0] {
            for &res in &[0.05, 0.01, 0.001] {
                let ceiling = 500_000.0;
                let mut calls = Vec::new();
                let out = bisect::<()>(0.0, ceiling, res, 40, |r| {
                    calls.push(r);
                    Ok(r <= threshold)
                })
                .unwrap();
                assert!(out.converged);
                assert!(
                    out.lo <= threshold,
                    "lo {} above threshold {threshold}",
                    out.lo
                );
                assert!(out.hi > threshold);
                assert!((out.hi - out.lo) / out.hi <= res);
                // Bounded: never more than log2(ceiling / (res * threshold)) + 1 trials.
                let bound = (ceiling / (res * threshold)).log2().ceil() as u32 + 1;
                assert!(out.trials <= bound, "{} trials > {bound}", out.trials);
                assert_eq!(out.trials as usize, calls.len());
            }
        }
    }

    #[test]
    fn max_trials_bounds_the_search() {
        let out = bisect::<()>(0.0, 1e6, 1e-9, 5, |r| Ok(r < 3.0)).unwrap();
        assert_eq!(out.trials, 5);
        assert!(!out.converged);
        assert_eq!(out.lo, 0.0);
    }

    #[test]
    fn noisy_dut_keeps_invariant() {
        // A DUT that passes only below 1000, starting from a good lower bound.
        let out = bisect::<()>(800.0, 2000.0, 0.01, 20, |r| Ok(r < 1000.0)).unwrap();
        assert!(out.lo >= 990.0 && out.lo < 1000.0, "{}", out.lo);
        assert_eq!(trials_needed(0.01), 7);
    }

    #[test]
    fn errors_propagate() {
        let r = bisect(0.0, 10.0, 0.1, 10, |_| Err("boom"));
        assert_eq!(r, Err("boom"));
    }
}
