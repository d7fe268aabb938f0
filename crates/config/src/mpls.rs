//! `mpls:` — label-plane settings: fast reroute (docs/mpls.md,
//! "Fast reroute"), where ICMP for expired label TTLs goes
//! (`icmp-tunneling`), TTL propagation and the TC ↔ class maps
//! (docs/mpls.md section 3).
//!
//! `fast-reroute:` lists protected routed ports, each with a precomputed
//! **facility backup** (link protection, RFC 4090 style): a next hop on
//! another routed port that reaches the same neighbour, and the labels of
//! the bypass toward it (none for a parallel link to the same router).
//! On carrier loss of the protected port, everything that left through
//! it — LSPs, labelled routes, pseudowires, plain routes — takes the
//! bypass with the bypass labels pushed on top of its own, by one store.
//! FRR 8.4.4 sends no backup next hops over FPM, so the backup is
//! configured here.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// Most protected ports (the LFIB's protection ids).
pub const MAX_FAST_REROUTE: usize = 4096;
/// Most bypass labels (the LFIB pushes at most 4 per path, the protected
/// path's own included).
pub const MAX_BYPASS_LABELS: usize = 2;

/// `mpls:` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct MplsConfig {
    /// Protected ports and their precomputed backups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fast_reroute: Vec<FastReroute>,
    /// ICMP time exceeded for an expired label TTL: back to the previous
    /// LSR, or down the LSP to the egress (RFC 3032 §2.3.2).
    #[serde(skip_serializing_if = "IcmpTunneling::is_auto")]
    pub icmp_tunneling: IcmpTunneling,
    /// How IP TTLs and label TTLs relate (RFC 3443): `uniform` (pushed
    /// labels copy the IP TTL and popped packets take the label's back:
    /// traceroute sees every LSR) or `pipe` (pushed labels start at 255 and
    /// the IP TTL is left alone: the LSP is one hop).
    #[serde(skip_serializing_if = "TtlPropagation::is_uniform")]
    pub ttl_propagation: TtlPropagation,
    /// QoS class n (0..7) → the TC written on pushed labels (and on
    /// swapped ones with `tc-remark`); 8 values, default class n → TC n.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tc_of_class: Option<Vec<u8>>,
    /// TC of a received top label n → the QoS class the frame gets when no
    /// policy classified it; 8 values, default TC n → class n.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_of_tc: Option<Vec<u8>>,
    /// Swapped labels take the TC of the frame's class (`tc-of-class`)
    /// instead of keeping the TC they arrived with (default false).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tc_remark: bool,
}

impl MplsConfig {
    pub fn is_empty(&self) -> bool {
        self.fast_reroute.is_empty()
            && self.icmp_tunneling.is_auto()
            && self.ttl_propagation.is_uniform()
            && self.tc_of_class.is_none()
            && self.class_of_tc.is_none()
            && !self.tc_remark
    }
}

/// `mpls.ttl-propagation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TtlPropagation {
    #[default]
    Uniform,
    Pipe,
}

impl TtlPropagation {
    pub fn is_uniform(&self) -> bool {
        *self == TtlPropagation::Uniform
    }
}

/// A TC ↔ class map as the data path takes it: `map` (checked: 8 values
/// of 0..7), or identity.
pub fn tc_map(map: &Option<Vec<u8>>) -> [u8; 8] {
    let mut out = [0, 1, 2, 3, 4, 5, 6, 7];
    if let Some(m) = map {
        for (o, v) in out.iter_mut().zip(m) {
            *o = *v & 7;
        }
    }
    out
}

/// `mpls.icmp-tunneling`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IcmpTunneling {
    /// Down the LSP when the expired label has a label below it (a VPN
    /// or other service label) or the source has no route in the default
    /// table; else back to the previous LSR.
    #[default]
    Auto,
    /// Always down the LSP.
    Always,
    /// Always back out of the ingress port.
    Never,
}

impl IcmpTunneling {
    pub fn is_auto(&self) -> bool {
        *self == IcmpTunneling::Auto
    }
}

/// One entry of `mpls.fast-reroute:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FastReroute {
    /// The protected routed port (a point-to-point core link).
    pub protect: String,
    /// Where its traffic goes while it is down.
    pub backup: Bypass,
}

/// `mpls.fast-reroute[].backup`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Bypass {
    /// Routed port of the bypass.
    pub port: String,
    /// The bypass next hop: an address on one of `port`'s subnets.
    pub next_hop: IpAddr,
    /// Labels of the bypass LSP toward the protected neighbour, outermost
    /// first, pushed on top of the protected path's own (none: the next
    /// hop is the protected neighbour itself over a parallel link).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<u32>,
}
