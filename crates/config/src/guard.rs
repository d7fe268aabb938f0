//! `ports[].storm-control` and `loop-detect:` — the switch's brakes
//! against broadcast storms and forwarding loops (docs/storm-control.md).

use serde::{Deserialize, Serialize};

/// Default err-disable recovery, seconds (Cisco's `errdisable recovery
/// interval`).
pub const DEFAULT_RECOVERY: u32 = 300;
/// Longest err-disable recovery, seconds (a day).
pub const MAX_RECOVERY: u32 = 86_400;
/// Loop-detect probe interval bounds, seconds.
pub const LOOP_INTERVAL: std::ops::RangeInclusive<u32> = 1..=60;

/// What storm control does when a class goes over its limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StormAction {
    /// Drop what exceeds the limit (counted as `storm-control`).
    #[default]
    Drop,
    /// Err-disable the port (administratively down, logged) until
    /// `recovery` seconds pass or `lanyard clear errdisable PORT`.
    Shutdown,
}

/// `ports[].storm-control`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct StormControl {
    /// Limit on broadcast frames: `1000pps`, `2kpps`, `10M` / `10Mbps`
    /// (bits/s), or `5%` of the port's link speed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broadcast: Option<String>,
    /// Limit on other multicast frames (same forms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multicast: Option<String>,
    /// Limit on unicast frames to unknown addresses, which are flooded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_unicast: Option<String>,
    pub action: StormAction,
    /// `shutdown`: seconds until the port comes back by itself (0: only
    /// `lanyard clear errdisable PORT`). Default 300.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<u32>,
}

impl StormControl {
    /// The three limits in `StormClass` order.
    pub fn levels(&self) -> [(&'static str, &Option<String>); 3] {
        [
            ("broadcast", &self.broadcast),
            ("multicast", &self.multicast),
            ("unknown-unicast", &self.unknown_unicast),
        ]
    }

    pub fn recovery(&self) -> u32 {
        self.recovery.unwrap_or(DEFAULT_RECOVERY)
    }
}

/// What loop detection does when a probe comes back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoopAction {
    /// Err-disable the port the probe came back on (the higher-numbered
    /// of the two ports of the loop), log it.
    #[default]
    Shutdown,
    /// Only log (once per loop).
    Log,
}

/// `loop-detect:` — present: on for every switched port (a port opts out
/// with `loop-detect: false`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LoopDetect {
    /// Seconds between probes on each port and VLAN, 1..60. Default 1.
    pub interval: u32,
    pub action: LoopAction,
    /// Seconds until an err-disabled port comes back (0: only `lanyard
    /// clear errdisable PORT`). Default 300.
    pub recovery: u32,
}

impl Default for LoopDetect {
    fn default() -> Self {
        LoopDetect {
            interval: 1,
            action: LoopAction::Shutdown,
            recovery: DEFAULT_RECOVERY,
        }
    }
}

/// A parsed storm-control level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Level {
    /// Frames per second.
    Pps(u64),
    /// Bits per second.
    Bps(u64),
    /// Percent of the port's link speed (0..=100).
    Percent(f64),
}

/// Parse `1000pps`, `2.5kpps`, `10M`, `10Mbps`, `64000bps`, `5%`, `0.5%`
/// (a bare number is refused: frames or bits?).
pub fn parse_level(s: &str) -> Result<Level, String> {
    let t = s.trim();
    let bad = || {
        format!(
            "{s:?} is not a level: frames/s (`1000pps`, `2kpps`), bits/s (`10M`, `10Mbps`) \
             or percent of the link speed (`5%`)"
        )
    };
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p.trim().parse().map_err(|_| bad())?;
        if !(0.0..=100.0).contains(&v) {
            return Err(format!("{s:?}: a percentage is 0..100"));
        }
        return Ok(Level::Percent(v));
    }
    let (num, pps, unit) = match (t.strip_suffix("pps"), t.strip_suffix("bps")) {
        (Some(n), _) => (n, true, true),
        (None, Some(n)) => (n, false, true),
        (None, None) => (t, false, false),
    };
    let (num, mult) = match num.trim().chars().last() {
        Some('k') | Some('K') => (&num[..num.len() - 1], 1e3),
        Some('M') => (&num[..num.len() - 1], 1e6),
        Some('G') => (&num[..num.len() - 1], 1e9),
        _ if !unit => return Err(bad()), // a bare number: frames or bits?
        _ => (num, 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| bad())?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(bad());
    }
    let v = (v * mult).round();
    if v > 1e12 {
        return Err(format!("{s:?} is more than any link carries"));
    }
    Ok(if pps {
        Level::Pps(v as u64)
    } else {
        Level::Bps(v as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels() {
        assert_eq!(parse_level("1000pps"), Ok(Level::Pps(1000)));
        assert_eq!(parse_level("2.5kpps"), Ok(Level::Pps(2500)));
        assert_eq!(parse_level(" 10M "), Ok(Level::Bps(10_000_000)));
        assert_eq!(parse_level("10Mbps"), Ok(Level::Bps(10_000_000)));
        assert_eq!(parse_level("64000bps"), Ok(Level::Bps(64_000)));
        assert_eq!(parse_level("64k"), Ok(Level::Bps(64_000)));
        assert_eq!(parse_level("5%"), Ok(Level::Percent(5.0)));
        assert_eq!(parse_level("0%"), Ok(Level::Percent(0.0)));
        for bad in [
            "", "pps", "x%", "101%", "-1pps", "10Tbps", "1e20", "5 %%", "64000",
        ] {
            assert!(parse_level(bad).is_err(), "{bad}");
        }
    }
}
