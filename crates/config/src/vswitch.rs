//! `virtual-switch:` — two Lanyards acting as one switch (multichassis
//! link aggregation, docs/virtual-switch.md).
//!
//! Both nodes carry the same domain id, system MAC (the LACP system id the
//! partners see) and multichassis channel ids; they differ in their role
//! priority and keepalive addresses. The peer link is one or more of this
//! node's ports, bundled; the keepalive runs over UDP on a separate path
//! (a routed port or management network), so that a cut peer link can be
//! told from a dead peer.

use serde::{Deserialize, Serialize};

use crate::types::MacAddr;

/// Domain id bounds (the same on both nodes).
pub const DOMAIN_ID: std::ops::RangeInclusive<u32> = 1..=1000;
/// Multichassis channel id bounds.
pub const CHANNEL_ID: std::ops::RangeInclusive<u32> = 1..=4096;
/// Most peer-link ports.
pub const MAX_PEER_LINK_PORTS: usize = 8;
/// Keepalive interval bounds, milliseconds.
pub const KEEPALIVE_INTERVAL_MS: std::ops::RangeInclusive<u32> = 50..=10_000;
/// Longest keepalive timeout, milliseconds.
pub const MAX_KEEPALIVE_TIMEOUT_MS: u32 = 60_000;
/// Longest restore delay, seconds.
pub const MAX_DELAY_RESTORE_S: u32 = 3600;
/// Default UDP port of the keepalive.
pub const DEFAULT_KEEPALIVE_PORT: u16 = 3784;

/// `virtual-switch:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VirtualSwitch {
    /// Domain id, 1..1000, the same on both nodes; a peer of another
    /// domain is refused.
    pub domain_id: u32,
    /// Role priority: the node with the lower value is primary (ties: the
    /// lower keepalive source address). Default 32768.
    #[serde(default = "default_priority")]
    pub priority: u16,
    /// The pair's system MAC, the same on both nodes: the LACP system id
    /// of every multichassis channel. A unicast address, best a locally
    /// administered one (02:…).
    pub system_mac: MacAddr,
    /// LACP system priority of the multichassis channels. Default 32768.
    #[serde(default = "default_priority")]
    pub system_priority: u16,
    /// Ports to the peer node, bundled into one peer link.
    pub peer_link: Vec<String>,
    /// Dual-active detection over a separate path.
    pub keepalive: Keepalive,
    /// Seconds multichassis members stay down after the process starts or
    /// the peer link returns, until the peer's state is copied. Default 2.
    #[serde(default = "default_delay_restore")]
    pub delay_restore_s: u32,
    /// Port channels whose members sit on both nodes.
    #[serde(default)]
    pub channels: Vec<McChannel>,
    /// VLANs whose SVI both nodes serve as one gateway: the same
    /// addresses on both nodes, the pair's system MAC as router MAC
    /// (unless the SVI sets `router-mac`, then the same on both); each
    /// node answers ARP/ND for it and routes what reaches it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<u16>,
    /// Which of this node's ports its guardian takes down when the
    /// process ends without a hand-over (crash, `kill -9`, clean stop),
    /// so neighbours see carrier loss at once, as from a dead chassis.
    /// Default `channel-members`.
    #[serde(default, skip_serializing_if = "NodeLossLinks::is_default")]
    pub node_loss_links: NodeLossLinks,
}

/// `virtual-switch.node-loss-links`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeLossLinks {
    /// Members of the multichassis channels: the partner drops them at
    /// carrier loss and rehashes onto the peer's members.
    #[default]
    ChannelMembers,
    /// Every switch port, the peer link included (the peer learns of the
    /// loss by the guardian's goodbye first).
    All,
    /// None: the partner notices at its LACP timeout.
    None,
}

impl NodeLossLinks {
    fn is_default(&self) -> bool {
        *self == NodeLossLinks::ChannelMembers
    }
}

/// `virtual-switch.keepalive`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Keepalive {
    /// This node's address (must be on this host, not on the peer link).
    pub source: std::net::IpAddr,
    /// The peer's keepalive source address.
    pub peer: std::net::IpAddr,
    /// UDP port, the same on both nodes. Default 3784.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Milliseconds between keepalives. Default 200.
    #[serde(default = "default_interval")]
    pub interval_ms: u32,
    /// The peer is gone after this long without one. Default 1000; at
    /// least three intervals.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u32,
}

/// `virtual-switch.channels[]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct McChannel {
    /// A port channel of `port-channels:`.
    pub port_channel: String,
    /// Its id within the domain, 1..4096, the same on both nodes.
    pub id: u32,
}

fn default_priority() -> u16 {
    32_768
}
fn default_delay_restore() -> u32 {
    2
}
fn default_port() -> u16 {
    DEFAULT_KEEPALIVE_PORT
}
fn default_interval() -> u32 {
    200
}
fn default_timeout() -> u32 {
    1000
}

impl VirtualSwitch {
    /// The multichassis id of port channel `name`, if it is one.
    pub fn channel_id(&self, name: &str) -> Option<u32> {
        self.channels
            .iter()
            .find(|c| c.port_channel == name)
            .map(|c| c.id)
    }
}
