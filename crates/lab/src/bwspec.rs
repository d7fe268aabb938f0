//! What a bandwidth-share test (`type: bandwidth-share`, `crate::bwshare`)
//! asks of the plan and of the inline-engine DUT: the services' limits,
//! the package weights, the three subscribers and the `service-control`
//! lines that configure them. No dependencies on the rest of the lab, so
//! the plan and the DUT use it without a module cycle.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Most services of a test.
pub const MAX_SERVICES: usize = 8;
/// The subscribers: name and package (gold, silver, bronze).
pub const SUBSCRIBERS: [&str; 3] = ["gold", "silver", "bronze"];
/// Lowest and highest controller limit the lab accepts, bits/s: below
/// 100 kbit/s a bronze share is a few frames per second; above 200
/// Mbit/s the generator cannot offer the load on this bed.
pub const LIMIT_RANGE: (u64, u64) = (100_000, 200_000_000);
/// Highest frame rate per tester port a test may need.
pub const MAX_PORT_FPS: f64 = 100_000.0;
/// Most light subscribers (`light:`, one per package).
pub const MAX_LIGHT: usize = 3;
/// Streams per heavy subscriber × service × direction when the test has
/// light subscribers: the generator sends a port's streams round-robin,
/// all at one rate, so a light subscriber's lower offer is fewer copies
/// of its stream (1..SLOTS − 1 thirty-seconds of `offered`).
pub const SLOTS: u32 = 32;

/// A rate as written: bits/s, a number or `5M` (k/M/G, powers of 1000).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Bps {
    /// Bits/s.
    Num(f64),
    /// `5M`, `800k`, `1.2G`.
    Word(String),
}

impl Bps {
    /// Bits/s, checked.
    pub fn get(&self) -> Result<u64, String> {
        match self {
            Bps::Num(v) if v.is_finite() && *v >= 1.0 => Ok(*v as u64),
            Bps::Num(v) => Err(format!("{v} is not a rate in bits/s")),
            Bps::Word(w) => parse_bps(w),
        }
    }
}

/// `5M`, `800k`, `1.2G` or a plain number (powers of 1000, as Lanyard's
/// `service-control` rates), at least 1 bit/s.
pub fn parse_bps(w: &str) -> Result<u64, String> {
    let w = w.trim();
    let (num, mult) = match w.chars().last() {
        Some('k' | 'K') => (&w[..w.len() - 1], 1e3),
        Some('M') => (&w[..w.len() - 1], 1e6),
        Some('G') => (&w[..w.len() - 1], 1e9),
        _ => (w, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * mult >= 1.0 => Ok((v * mult).round() as u64),
        _ => Err(format!("{w:?} is not a rate in bits/s (e.g. 5M, 800k)")),
    }
}

/// One service of a bandwidth-share test: its controller's limits.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServiceSpec {
    /// Bits/s from the subscribers.
    #[serde(default)]
    pub up: Option<Bps>,
    /// Bits/s to the subscribers.
    #[serde(default)]
    pub down: Option<Bps>,
}

/// A light subscriber as written: `{package: gold, offered: 100k}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LightSpec {
    /// gold, silver or bronze.
    pub package: String,
    /// Bits/s it offers per service and direction.
    pub offered: Bps,
}

/// A bandwidth-share test's resolved parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BwShare {
    /// The DUT's side: services, limits, weights.
    pub controllers: Controllers,
    /// Bits/s each of gold, silver and bronze offers per service and
    /// direction.
    pub offered_bps: u64,
    /// Light subscribers (`Controllers::light`): copies of their streams,
    /// thirty-seconds of `offered_bps` ([`SLOTS`]).
    pub light_slots: Vec<u32>,
    /// Seconds left out of the verdict at the start of a trial.
    pub settle: f64,
    /// Seconds per measured interval.
    pub interval: f64,
}

/// What the DUT is configured with (part of `dut::Setup`: a test with
/// other limits starts a fresh DUT).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Controllers {
    /// Services in use (`up` / `down` entries beyond are unused).
    pub n: usize,
    /// Limit up per service, bits/s (0: no controller).
    pub up: [u64; MAX_SERVICES],
    /// Limit down per service, bits/s (0: no controller).
    pub down: [u64; MAX_SERVICES],
    /// Weights of gold, silver, bronze.
    pub weights: [u32; 3],
    /// Light subscribers: their packages (0 gold, 1 silver, 2 bronze).
    pub light: [u8; MAX_LIGHT],
    /// Light subscribers in use.
    pub n_light: usize,
}

/// Service `k`'s name: A, B, …
pub fn service_name(k: usize) -> String {
    char::from(b'A' + k as u8).to_string()
}

/// Subscriber `j`'s address.
pub fn subscriber_ip(j: usize) -> [u8; 4] {
    [100, 127, 0, j as u8 + 1]
}

/// Service `k`'s server address (its signature covers `20.255.K.0/24`).
pub fn server_ip(k: usize) -> [u8; 4] {
    [20, 255, k as u8, 1]
}

impl Controllers {
    /// The `service-control` lines the DUT needs: services, signatures
    /// (before the lab's, which would claim the frames first), packages
    /// and controllers, spliced into `dut::INLINE_YAML`.
    pub fn splice(&self, yaml: &str) -> String {
        let mut svcs = String::new();
        let mut sigs = String::new();
        let mut ctl = String::from("  controllers:\n");
        for k in 0..self.n {
            let n = service_name(k);
            let _ = writeln!(svcs, "    - {{name: svc-{n}}}");
            let _ = writeln!(
                sigs,
                "    - {{name: bw-{n}, service: svc-{n}, protocol: udp, addresses: 20.255.{k}.0/24}}"
            );
            let mut c = format!("    - {{service: svc-{n}");
            if self.up[k] > 0 {
                let _ = write!(c, ", up: {}", self.up[k]);
            }
            if self.down[k] > 0 {
                let _ = write!(c, ", down: {}", self.down[k]);
            }
            ctl.push_str(&c);
            ctl.push_str("}\n");
        }
        let mut pk = String::from("  packages:\n");
        for (name, w) in SUBSCRIBERS.iter().zip(self.weights) {
            let _ = writeln!(pk, "    - {{name: {name}, weight: {w}}}");
        }
        let out = yaml
            .replacen(
                "    - {name: lab}\n",
                &format!("    - {{name: lab}}\n{svcs}"),
                1,
            )
            .replacen("  signatures:\n", &format!("  signatures:\n{sigs}"), 1);
        format!("{out}{pk}{ctl}")
    }

    /// Provisioning records of the subscribers: gold, silver, bronze,
    /// then the light ones.
    pub fn provisioning(&self) -> String {
        self.names()
            .iter()
            .zip(self.packages())
            .enumerate()
            .map(|(j, (n, p))| {
                let a = subscriber_ip(j);
                format!(
                    "add bw-{n} package={} addr={}.{}.{}.{}\n",
                    SUBSCRIBERS[p], a[0], a[1], a[2], a[3]
                )
            })
            .collect()
    }

    /// Every subscriber's package index (gold, silver, bronze, then the
    /// light ones').
    pub fn packages(&self) -> Vec<usize> {
        (0..3)
            .chain(self.light[..self.n_light].iter().map(|&p| p as usize))
            .collect()
    }

    /// Every subscriber's name (`bw-NAME` on the DUT): gold, silver,
    /// bronze, then `gold-light`, ….
    pub fn names(&self) -> Vec<String> {
        SUBSCRIBERS
            .iter()
            .map(|s| s.to_string())
            .chain(
                self.light[..self.n_light]
                    .iter()
                    .map(|&p| format!("{}-light", SUBSCRIBERS[p as usize])),
            )
            .collect()
    }

    /// Every subscriber's weight.
    pub fn all_weights(&self) -> Vec<f64> {
        self.packages()
            .into_iter()
            .map(|p| f64::from(self.weights[p]))
            .collect()
    }

    /// Ideal shares of gold, silver and bronze alone (weight / sum of
    /// weights).
    pub fn ideal(&self) -> [f64; 3] {
        let sum: u32 = self.weights.iter().sum();
        self.weights.map(|w| w as f64 / sum.max(1) as f64)
    }
}

/// Weighted max-min fair rates (the engine's water-filling,
/// docs/inline.md): subscribers in order of demand / weight; one whose
/// demand fits under `weight × level` gets its demand, the level is what
/// is left per remaining weight unit; the others get `weight × level`.
/// When every demand fits, everyone gets its demand.
pub fn max_min(limit: f64, weights: &[f64], demands: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| (demands[a] / weights[a]).total_cmp(&(demands[b] / weights[b])));
    let mut left = limit;
    let mut wsum: f64 = weights.iter().sum();
    let mut out = vec![0.0; weights.len()];
    for (n, &j) in order.iter().enumerate() {
        let level = left / wsum;
        if demands[j] <= weights[j] * level {
            out[j] = demands[j];
            left -= demands[j];
            wsum -= weights[j];
        } else {
            for &k in &order[n..] {
                out[k] = weights[k] * level;
            }
            break;
        }
    }
    out
}

/// Bits the controllers count for one frame of `size` bytes (with FCS):
/// the Ethernet frame without FCS.
pub fn frame_bits(size: u16) -> f64 {
    (size.saturating_sub(4) as f64) * 8.0
}
