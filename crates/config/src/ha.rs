//! `backup-pairs:` and `port-channels:` — link protection (docs/ha.md).
//!
//! A backup pair is two ports of identical VLAN settings of which one
//! forwards at a time (Flexlink-style); a port channel bundles up to 16
//! ports of identical VLAN settings into one layer-2 port, with or without
//! LACP (IEEE 802.1AX).

use serde::{Deserialize, Serialize};

/// Most port channels.
pub const MAX_CHANNELS: usize = 64;

/// One entry of `backup-pairs:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BackupPair {
    /// The port that forwards while its link is up.
    pub primary: String,
    /// The standby port: forwards only while the primary is down.
    pub backup: String,
    /// Go back to the primary when it returns (after `preempt-delay-ms`).
    #[serde(default)]
    pub preempt: bool,
    #[serde(default)]
    pub preempt_delay_ms: u32,
    /// Declare the active port down when nothing was received on it for
    /// this long (0: link state only). Lanyard sends a keepalive frame
    /// every third of it, so a peer Lanyard always has something to see.
    #[serde(default)]
    pub keepalive_ms: u32,
    /// After a failover, send one frame per address learned behind the
    /// pair out of the newly active port, so upstream switches move their
    /// entries at once instead of waiting for traffic. Default true.
    #[serde(default = "default_true")]
    pub mac_move_update: bool,
}

fn default_true() -> bool {
    true
}

/// LACP mode of a port channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LacpMode {
    /// Sends LACPDUs and negotiates.
    #[default]
    Active,
    /// Negotiates only with an active partner.
    Passive,
    /// No LACP: every member with link up distributes.
    Static,
}

/// LACPDU rate asked of the partner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LacpRate {
    /// Every second, 3 s timeout.
    #[default]
    Fast,
    /// Every 30 s, 90 s timeout.
    Slow,
}

/// Header fields that choose a member.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadBalanceCfg {
    L2,
    L3,
    #[default]
    L3l4,
}

impl LoadBalanceCfg {
    pub fn table(self) -> tables::l2::LoadBalance {
        match self {
            LoadBalanceCfg::L2 => tables::l2::LoadBalance::L2,
            LoadBalanceCfg::L3 => tables::l2::LoadBalance::L3,
            LoadBalanceCfg::L3l4 => tables::l2::LoadBalance::L3L4,
        }
    }
}

/// One entry of `port-channels:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PortChannel {
    /// Name shown and used by `show`, e.g. `po1`.
    pub name: String,
    /// Member ports (configured under `ports:` with identical VLAN
    /// settings), 1..=16.
    pub members: Vec<String>,
    #[serde(default)]
    pub lacp: LacpMode,
    #[serde(default)]
    pub lacp_rate: LacpRate,
    #[serde(default)]
    pub load_balance: LoadBalanceCfg,
    /// The channel is down while fewer members distribute. Default 1.
    #[serde(default = "default_min_links")]
    pub min_links: u32,
    /// LACP system priority (lower wins the selection of aggregates).
    #[serde(default = "default_priority")]
    pub system_priority: u16,
}

fn default_min_links() -> u32 {
    1
}

fn default_priority() -> u16 {
    32768
}
