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

/// The VLAN-relevant settings of a port, for "identical settings" checks.
fn vlan_settings(p: &super::PortConfig) -> impl PartialEq + '_ {
    (
        p.mode,
        p.effective_vlan(),
        p.allowed_vlans.as_ref(),
        p.effective_native_vlan(),
        p.effective_tpid(),
        p.effective_mtu(),
    )
}

/// Semantic checks of `backup-pairs` and `port-channels`.
pub(super) fn check(cfg: &super::Config) -> Vec<super::Issue> {
    let mut out = Vec::new();
    let mut err = |path: String, message: String| out.push(super::Issue { path, message });
    // Every port belongs to at most one pair or channel.
    let mut used: Vec<(String, String)> = Vec::new();
    let mut claim = |name: &str, by: String, path: String, err: &mut dyn FnMut(String, String)| {
        if let Some((_, other)) = used.iter().find(|(n, _)| n == name) {
            err(path, format!("port {name:?} already belongs to {other}"));
        } else {
            used.push((name.to_string(), by));
        }
    };
    let monitor = |name: &str| cfg.mirror_sessions.iter().any(|s| s.destination == name);
    let port_ok = |name: &str, path: &str, err: &mut dyn FnMut(String, String)| match cfg.port(name)
    {
        None => {
            err(
                path.to_string(),
                format!("port {name:?} is not configured (see ports)"),
            );
            None
        }
        Some(p) if p.mode == super::PortMode::Routed => {
            err(
                path.to_string(),
                format!("port {name:?} is routed: only switch ports can be paired or bundled"),
            );
            None
        }
        Some(_) if monitor(name) => {
            err(path.to_string(), format!("port {name:?} is a monitor port"));
            None
        }
        Some(p) => Some(p),
    };
    for (i, b) in cfg.backup_pairs.iter().enumerate() {
        let p = format!("backup-pairs[{i}]");
        let by = format!("backup pair {i}");
        let pri = port_ok(&b.primary, &format!("{p}.primary"), &mut err);
        let bak = port_ok(&b.backup, &format!("{p}.backup"), &mut err);
        if b.primary == b.backup {
            err(
                format!("{p}.backup"),
                "backup and primary are the same port".into(),
            );
            continue;
        }
        claim(&b.primary, by.clone(), format!("{p}.primary"), &mut err);
        claim(&b.backup, by, format!("{p}.backup"), &mut err);
        if let (Some(a), Some(c)) = (pri, bak) {
            if vlan_settings(a) != vlan_settings(c) {
                err(
                    p.clone(),
                    format!(
                        "{:?} and {:?} must have the same mode, VLANs, TPID and MTU",
                        b.primary, b.backup
                    ),
                );
            }
        }
        if b.keepalive_ms != 0 && b.keepalive_ms < 3 {
            err(
                format!("{p}.keepalive-ms"),
                "at least 3 ms (or 0 for off)".into(),
            );
        }
    }
    if cfg.port_channels.len() > MAX_CHANNELS {
        err(
            "port-channels".into(),
            format!(
                "{} channels; at most {MAX_CHANNELS}",
                cfg.port_channels.len()
            ),
        );
    }
    for (i, c) in cfg.port_channels.iter().enumerate() {
        let p = format!("port-channels[{i}]");
        if c.name.is_empty() || c.name.len() > super::limits::MAX_PORT_NAME {
            err(format!("{p}.name"), "1 to 15 characters".into());
        }
        if cfg.port_channels[..i].iter().any(|o| o.name == c.name) || cfg.port(&c.name).is_some() {
            err(
                format!("{p}.name"),
                format!("{:?} is already a port or channel name", c.name),
            );
        }
        if c.members.is_empty() || c.members.len() > tables::l2::MAX_CHANNEL_MEMBERS {
            err(
                format!("{p}.members"),
                format!("1 to {} members", tables::l2::MAX_CHANNEL_MEMBERS),
            );
        }
        if c.min_links == 0 || c.min_links as usize > c.members.len().max(1) {
            err(
                format!("{p}.min-links"),
                "between 1 and the number of members".into(),
            );
        }
        let mut first: Option<&super::PortConfig> = None;
        for (k, m) in c.members.iter().enumerate() {
            let path = format!("{p}.members[{k}]");
            let Some(port) = port_ok(m, &path, &mut err) else {
                continue;
            };
            claim(
                m,
                format!("port channel {:?}", c.name),
                path.clone(),
                &mut err,
            );
            match first {
                None => first = Some(port),
                Some(f) if vlan_settings(f) != vlan_settings(port) => err(
                    path,
                    format!(
                        "{m:?} must have the same mode, VLANs, TPID and MTU as {:?}",
                        f.name
                    ),
                ),
                Some(_) => {}
            }
        }
    }
    for (i, s) in cfg.mirror_sessions.iter().enumerate() {
        for (k, sp) in s.source_ports.iter().enumerate() {
            if cfg.port_channels.iter().any(|c| c.name == *sp) {
                err(
                    format!("mirror-sessions[{i}].source-ports[{k}]"),
                    format!("{sp:?} is a port channel: mirror its members"),
                );
            }
        }
    }
    out
}
