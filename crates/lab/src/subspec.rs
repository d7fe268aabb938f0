//! The parameters of a subscribers test (`type: subscribers`): what the
//! plan resolves (`plan::check_subscribers`) and the runner (`subscale`)
//! uses, as `bwspec` is for bandwidth-share tests.

use serde::Serialize;

/// Most sampled subscribers (each is one `show subscriber` afterwards).
pub const MAX_SAMPLE: u32 = 10_000;
/// Sampled subscribers unless the plan says.
pub const DEFAULT_SAMPLE: u32 = 100;
/// Frames/s per port unless the plan sets `rate`.
pub const DEFAULT_RATE: f64 = 10_000.0;
/// Highest frame rate per port a plan may ask for.
pub const MAX_RATE: f64 = 100_000.0;
/// The packages, in the order subscribers are given them.
pub const PACKAGES: [&str; 3] = ["gold", "silver", "bronze"];

/// A subscribers test's resolved parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Provision {
    /// Subscribers provisioned.
    pub subscribers: u32,
    /// Of them, this many send and receive traffic.
    pub sample: u32,
    /// Frames each sampled subscriber sends (and receives).
    pub frames: u64,
    /// Frames/s per port.
    pub rate: f64,
}

impl Provision {
    /// Index of the `i`-th sampled subscriber: spread evenly over the
    /// table, the first and the last included.
    pub fn sampled(&self, i: u32) -> u32 {
        if self.sample <= 1 {
            return 0;
        }
        (u64::from(i) * u64::from(self.subscribers - 1) / u64::from(self.sample - 1)) as u32
    }

    /// Subscribers of each package (gold, silver, bronze in turn).
    pub fn per_package(&self) -> [u64; 3] {
        let n = u64::from(self.subscribers);
        [0, 1, 2].map(|p| n / 3 + u64::from(n % 3 > p))
    }
}
