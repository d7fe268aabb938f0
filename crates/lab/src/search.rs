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

/// Search upward from `lo` (known to pass) toward `top`: trials at
/// `lo × (1 + step)` with the step growing 4 times per pass (2 %, 8 %,
/// 32 %, 128 %, ...) until one fails or `top` is reached, then bisection
/// between the last pass and the first failure. For a limit just above
/// `lo` this costs one or two trials, not a bisection from `top` down.
/// `trials` counts every trial; `hi` is `top` when none failed.
pub fn gallop<E>(
    lo: f64,
    top: f64,
    resolution: f64,
    max_trials: u32,
    mut trial: impl FnMut(f64) -> Result<bool, E>,
) -> Result<SearchOutcome, E> {
    let mut lo = lo;
    let mut step = 0.02;
    let mut trials = 0;
    let mut hi = None;
    while trials < max_trials && lo < top {
        let rate = (lo * (1.0 + step)).min(top);
        trials += 1;
        if trial(rate)? {
            lo = rate;
            step *= 4.0;
        } else {
            hi = Some(rate);
            break;
        }
    }
    let Some(hi) = hi else {
        return Ok(SearchOutcome {
            lo,
            hi: top,
            trials,
            converged: lo >= top,
        });
    };
    let rest = bisect(lo, hi, resolution, max_trials - trials, trial)?;
    Ok(SearchOutcome {
        trials: trials + rest.trials,
        ..rest
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
    fn gallop_finds_limits_just_above_and_far_above() {
        for &limit in &[1010.0, 1040.0, 1300.0, 2500.0, 7900.0] {
            let mut calls = 0;
            let out = gallop::<()>(1000.0, 8000.0, 0.01, 12, |r| {
                calls += 1;
                Ok(r <= limit)
            })
            .unwrap();
            assert!(out.lo <= limit && out.hi > limit, "{limit}: {out:?}");
            assert!((out.hi - out.lo) / out.hi <= 0.01, "{limit}: {out:?}");
            assert!(out.trials <= 12 && out.trials == calls, "{limit}: {out:?}");
        }
        // Failing at once costs one trial and keeps the start.
        let out = gallop::<()>(1000.0, 8000.0, 0.01, 12, |_| Ok(false)).unwrap();
        assert_eq!((out.lo, out.trials), (1000.0, 1 + out.trials - 1));
        assert!(out.trials <= 2, "{out:?}");
        // Everything passes: stops at the top.
        let out = gallop::<()>(1000.0, 1500.0, 0.01, 12, |_| Ok(true)).unwrap();
        assert_eq!(out.lo, 1500.0);
    }

    #[test]
    fn errors_propagate() {
        let r = bisect(0.0, 10.0, 0.1, 10, |_| Err("boom"));
        assert_eq!(r, Err("boom"));
    }
}
