//! `control-plane-policing:` — rates of the punt classes (docs/copp.md).
//! Absent: policing on with the defaults.

use pipeline::copp::{CoppClass, CoppConfig, CoppRate, COPP_CLASSES};
use serde::{Deserialize, Serialize};

/// One class's rate: packets/s for the whole switch, and its burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClassRate {
    pub rate: u32,
    /// Packets let through at once after a quiet spell (default rate/4,
    /// at least 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

/// `control-plane-policing:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct CoppSettings {
    /// false: nothing is policed (every punt reaches the kernel).
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing_hello: Option<ClassRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<ClassRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arp_nd: Option<ClassRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub igmp: Option<ClassRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icmp: Option<ClassRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_expired: Option<ClassRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub glean: Option<ClassRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<ClassRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2_control: Option<ClassRate>,
}

impl Default for CoppSettings {
    fn default() -> Self {
        CoppSettings {
            enabled: true,
            routing_hello: None,
            routing: None,
            arp_nd: None,
            igmp: None,
            icmp: None,
            ttl_expired: None,
            glean: None,
            unknown: None,
            l2_control: None,
        }
    }
}

impl CoppSettings {
    pub(crate) fn classes(&self) -> [(CoppClass, Option<ClassRate>); COPP_CLASSES] {
        [
            (CoppClass::RoutingHello, self.routing_hello),
            (CoppClass::Routing, self.routing),
            (CoppClass::ArpNd, self.arp_nd),
            (CoppClass::Igmp, self.igmp),
            (CoppClass::Icmp, self.icmp),
            (CoppClass::TtlExpired, self.ttl_expired),
            (CoppClass::Glean, self.glean),
            (CoppClass::Unknown, self.unknown),
            (CoppClass::L2Control, self.l2_control),
        ]
    }

    /// The data path's table: defaults where a class is not given.
    pub fn to_config(&self) -> CoppConfig {
        if !self.enabled {
            return CoppConfig::off();
        }
        let mut c = CoppConfig::default();
        for (class, r) in self.classes() {
            if let Some(r) = r {
                c.rates[class as usize] = Some(CoppRate {
                    pps: r.rate,
                    burst: r.burst.unwrap_or((r.rate / 4).max(10)),
                });
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn defaults_overrides_and_off() {
        let cfg = super::super::parse(
            "ports: [{name: a}]\ncontrol-plane-policing:\n  unknown: {rate: 100}\n  routing: {rate: 8000, burst: 2000}\n",
            "t",
        )
        .unwrap();
        let c = cfg.control_plane_policing.to_config();
        let d = pipeline::copp::CoppConfig::default();
        let hello = pipeline::copp::CoppClass::RoutingHello as usize;
        assert_eq!(c.rates[hello], d.rates[hello]);
        let h = super::super::parse(
            "ports: [{name: a}]\ncontrol-plane-policing:\n  routing-hello: {rate: 300}\n",
            "t",
        )
        .unwrap();
        let hc = h.control_plane_policing.to_config();
        assert_eq!(hc.rates[hello].unwrap().pps, 300);
        assert_eq!(c.rates[6].unwrap().pps, 100);
        assert_eq!(c.rates[6].unwrap().burst, 25);
        assert_eq!(c.rates[0].unwrap().burst, 2000);
        assert_eq!(c.rates[1], d.rates[1]);
        let off = super::super::parse(
            "ports: [{name: a}]\ncontrol-plane-policing: {enabled: false}\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            off.control_plane_policing.to_config(),
            pipeline::copp::CoppConfig::off()
        );
        let e = super::super::parse(
            "ports: [{name: a}]\ncontrol-plane-policing:\n  icmp: {rate: 0}\n",
            "t",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("control-plane-policing.icmp.rate"),
            "{e}"
        );
        assert!(super::super::parse(
            "ports: [{name: a}]\ncontrol-plane-policing:\n  bogus: {rate: 1}\n",
            "t"
        )
        .is_err());
    }
}
