//! `spanning-tree:` — Rapid Spanning Tree (IEEE 802.1D-2004 clause 17) on
//! the switch's layer-2 ports (docs/stp.md).
//!
//! Present: spanning tree runs on every switched port (access, trunk,
//! tunnel) that is not a port-channel member, a backup-pair member or a
//! monitor port; `ports:` entries change one port's settings or take it
//! out (`enabled: false`).

use serde::{Deserialize, Serialize};

/// Protocol version spoken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StpMode {
    /// RSTP (802.1w / 802.1D-2004), falling back to STP per port when an
    /// old bridge is heard.
    #[default]
    Rstp,
    /// STP only (force-version 0): Configuration and TCN BPDUs, timers.
    Stp,
}

/// Bridge priority bounds and step (802.1D-2004 Table 17-2).
pub const PRIORITY_MAX: u32 = 61_440;
pub const PRIORITY_STEP: u32 = 4096;
/// Timer bounds, seconds (802.1D-2004 Table 17-1).
pub const HELLO: std::ops::RangeInclusive<u32> = 1..=10;
pub const MAX_AGE: std::ops::RangeInclusive<u32> = 6..=40;
pub const FORWARD_DELAY: std::ops::RangeInclusive<u32> = 4..=30;
pub const TX_HOLD_COUNT: std::ops::RangeInclusive<u32> = 1..=10;
/// Port path cost bounds (Table 17-3).
pub const COST: std::ops::RangeInclusive<u32> = 1..=200_000_000;
/// Default port path cost: 20,000 (a 1 Gb/s link).
pub const DEFAULT_COST: u32 = 20_000;

/// `spanning-tree:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SpanningTree {
    pub mode: StpMode,
    /// Bridge priority, a multiple of 4096 in 0..61440 (lower wins the
    /// root election). Default 32768.
    pub priority: u32,
    /// Seconds between BPDUs (when root). Default 2.
    pub hello_time: u32,
    /// Seconds a root's information lasts without refresh (STP). Default 20.
    pub max_age: u32,
    /// Seconds in listening and learning without an agreement. Default 15.
    pub forward_delay: u32,
    /// BPDUs a port may send per second. Default 6.
    pub tx_hold_count: u32,
    /// Seconds until a port err-disabled by BPDU guard comes back
    /// (0: when the configuration is applied again). Default 300.
    pub bpdu_guard_recovery: u32,
    /// Per-port settings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<StpPort>,
}

impl Default for SpanningTree {
    fn default() -> Self {
        SpanningTree {
            mode: StpMode::Rstp,
            priority: 32_768,
            hello_time: 2,
            max_age: 20,
            forward_delay: 15,
            tx_hold_count: 6,
            bpdu_guard_recovery: crate::guard::DEFAULT_RECOVERY,
            ports: Vec::new(),
        }
    }
}

/// `spanning-tree.ports[]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StpPort {
    /// A port of `ports:`.
    pub name: String,
    /// false: no spanning tree here (the port forwards; BPDUs are dropped).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Path cost, 1..200000000. Default 20000.
    #[serde(default = "default_cost")]
    pub cost: u32,
    /// Port priority, a multiple of 16 in 0..240. Default 128.
    #[serde(default = "default_port_priority")]
    pub priority: u32,
    /// An edge port (host-facing): forwards at once; a BPDU makes it a
    /// bridge port again.
    #[serde(default)]
    pub edge: bool,
    /// Detect edge ports (no BPDU within 3 s). Default true.
    #[serde(default = "yes")]
    pub auto_edge: bool,
    /// Err-disable the port (discarding) on any BPDU.
    #[serde(default)]
    pub bpdu_guard: bool,
    /// Never root port: superior BPDUs make it alternate (root-inconsistent).
    #[serde(default)]
    pub root_guard: bool,
}

fn yes() -> bool {
    true
}
fn default_cost() -> u32 {
    DEFAULT_COST
}
fn default_port_priority() -> u32 {
    128
}

impl StpPort {
    /// Settings of a port not listed.
    pub fn defaults(name: &str) -> StpPort {
        StpPort {
            name: name.to_string(),
            enabled: true,
            cost: DEFAULT_COST,
            priority: 128,
            edge: false,
            auto_edge: true,
            bpdu_guard: false,
            root_guard: false,
        }
    }
}
