//! `service-control:` — the inline service engine (docs/inline.md): port
//! pairs as a bump in the wire, sizes, services and operator signatures,
//! and where subscribers come from. Absent: off.

use serde::{Deserialize, Serialize};

/// One bump-in-the-wire pair: frames from one port leave by the other.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct InlinePair {
    /// Faces the subscribers (their traffic is upstream).
    pub subscriber_port: String,
    /// Faces the network.
    pub network_port: String,
}

/// A service: a name for a group of applications (nDPI's names).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServiceDef {
    pub name: String,
    #[serde(default)]
    pub applications: Vec<String>,
}

/// An operator signature; every given field must match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SignatureDef {
    pub name: String,
    /// The service it puts matching flows in.
    pub service: String,
    /// `tcp`, `udp`, or a protocol number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// A port or range `9000-9100`, either end of the flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<String>,
    /// An address or prefix, either end of the flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<String>,
    /// Payload bytes: text with `\xNN` escapes, or `hex:…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// Where in the transport payload `payload` must start.
    #[serde(default)]
    pub offset: u16,
}

/// A package's priority and optional per-subscriber caps (bits/s, per
/// service and direction).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PackageDef {
    /// `gold`, `silver` or `bronze`.
    pub name: String,
    /// Relative priority inside a controller (default 10, 5, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_up: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_down: Option<String>,
}

/// A bandwidth controller: one service's limit per direction (bits/s,
/// `4M`, `1.5G`), shared by package weight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ControllerDef {
    pub service: String,
    /// From the subscribers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<String>,
    /// To the subscribers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<String>,
}

/// A limit per subscriber and direction (bits/s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DirRates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<String>,
}

/// `service-control.usage-export:` — ended flows as IPFIX usage records
/// (application, service and subscriber as names) to a collector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct UsageExport {
    /// `HOST:PORT` of the collector (UDP).
    pub collector: String,
    /// IPFIX observation domain id (default 0).
    #[serde(default)]
    pub domain_id: u32,
    /// Seconds between template refreshes (default 60).
    #[serde(default = "d_usage_refresh")]
    pub template_refresh: u32,
    /// Records each worker may hold for the exporter (default 65,536);
    /// beyond, records are lost and counted.
    #[serde(default = "d_usage_queue")]
    pub queue: u32,
    /// Seconds after which a live flow leaves an interim record of its
    /// traffic so far (default 1800, as NetFlow/IPFIX exporters).
    #[serde(default = "d_active_timeout")]
    pub active_timeout: u32,
}

fn d_report_interval() -> u32 {
    10
}
fn d_usage_refresh() -> u32 {
    60
}
fn d_active_timeout() -> u32 {
    1800
}
fn d_usage_queue() -> u32 {
    1 << 16
}

/// `service-control:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServiceControl {
    pub inline: Vec<InlinePair>,
    /// Flow table capacity per worker.
    #[serde(default = "d_flows")]
    pub flows: u32,
    /// Flows in classification at once, per worker.
    #[serde(default = "d_slots")]
    pub classify_slots: u32,
    /// Packets after which a flow is decided with what is known.
    #[serde(default = "d_packets")]
    pub classify_packets: u16,
    /// Packets a flow that a payload signature may match waits for.
    #[serde(default = "d_depth")]
    pub signature_depth: u16,
    /// Take nDPI's port/address guess for flows it could not name.
    #[serde(default)]
    pub guess: bool,
    /// Per-subscriber per-service counter entries, per worker.
    #[serde(default = "d_usage")]
    pub usage_entries: u32,
    #[serde(default = "d_subs")]
    pub max_subscribers: u32,
    /// Provisioning file loaded at start and on apply (docs/inline.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribers_file: Option<std::path::PathBuf>,
    /// Where quota accounts are kept across restarts (absent: beside the
    /// management socket, `<socket>.quota`; docs/inline.md, "Quotas").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_file: Option<std::path::PathBuf>,
    #[serde(default)]
    pub services: Vec<ServiceDef>,
    #[serde(default)]
    pub signatures: Vec<SignatureDef>,
    /// Package weights and caps (defaults: gold 10, silver 5, bronze 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<PackageDef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controllers: Vec<ControllerDef>,
    /// Per subscriber and direction: frames of its flows still being
    /// classified share this rate (absent: not limited; the subscriber's
    /// own cap and quota apply either way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classifying: Option<DirRates>,
    /// When a subscriber's quota is used up: `drop` (default) or a rate
    /// (`128k`) its traffic is throttled to, per direction (a
    /// subscriber's `quota-exceeded=` overrides it).
    #[serde(default = "d_quota_exceeded")]
    pub quota_exceeded: String,
    /// How often the control thread re-shares the controllers, ms.
    #[serde(default = "d_interval")]
    pub control_interval_ms: u32,
    /// Length of one interval of `show service-control history`, seconds
    /// (the last 360 are kept).
    #[serde(default = "d_report_interval")]
    pub report_interval_s: u32,
    /// Idle timeouts per flow state, seconds (`established: 600`); states
    /// not given keep their defaults (docs/inline.md, "Flows").
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub timeouts: std::collections::BTreeMap<String, u32>,
    /// Usage records to an IPFIX collector (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_export: Option<UsageExport>,
}

fn d_quota_exceeded() -> String {
    "drop".into()
}
fn d_interval() -> u32 {
    20
}

/// A rate in bits/s (`4M`), above 0.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    match crate::services::parse_quantity(s)? {
        0 => Err(format!("{s:?} must be above 0")),
        v => Ok(v),
    }
}

impl ServiceControl {
    /// Bits/s a used-up quota leaves (0 = drop).
    pub fn quota_rate(&self) -> Result<u64, String> {
        match self.quota_exceeded.trim() {
            "drop" => Ok(0),
            r => parse_rate(r).map_err(|e| format!("{e} (give `drop` or a rate such as 128k)")),
        }
    }

    /// Controllers, packages and the quota action against compiled
    /// services (errors name the field).
    pub fn bandwidth(
        &self,
        services: &dpi::service::ServiceMap,
    ) -> Result<dpi::bandwidth::BandwidthPolicy, (String, String)> {
        let mut bw = dpi::bandwidth::BandwidthPolicy::default();
        for (i, p) in self.packages.iter().enumerate() {
            let at = |f: &str| format!("packages[{i}].{f}");
            let pkg = dpi::subscriber::Package::parse(&p.name).ok_or_else(|| {
                (
                    at("name"),
                    format!("'{}' is not a package (gold, silver, bronze)", p.name),
                )
            })? as usize;
            if let Some(w) = p.weight {
                if !(1..=1000).contains(&w) {
                    return Err((at("weight"), format!("{w} is out of range 1..1000")));
                }
                bw.weights[pkg] = w;
            }
            for (d, (f, v)) in [("cap-up", &p.cap_up), ("cap-down", &p.cap_down)]
                .into_iter()
                .enumerate()
            {
                if let Some(v) = v {
                    bw.caps[pkg][d] = parse_rate(v).map_err(|e| (at(f), e))?;
                }
            }
        }
        for (i, c) in self.controllers.iter().enumerate() {
            let at = |f: &str| format!("controllers[{i}].{f}");
            let id = services.id(&c.service).ok_or_else(|| {
                (
                    at("service"),
                    format!(
                        "no service '{}' (define it under service-control.services)",
                        c.service
                    ),
                )
            })?;
            let slot = &mut bw.limits[usize::from(id)];
            if *slot != [0, 0] {
                return Err((
                    at("service"),
                    format!("service '{}' has two controllers", c.service),
                ));
            }
            if c.up.is_none() && c.down.is_none() {
                return Err((at("up"), "give up, down or both".into()));
            }
            for (d, (f, v)) in [("up", &c.up), ("down", &c.down)].into_iter().enumerate() {
                if let Some(v) = v {
                    slot[d] = parse_rate(v).map_err(|e| (at(f), e))?;
                }
            }
        }
        bw.quota_rate = self
            .quota_rate()
            .map_err(|e| ("quota-exceeded".to_string(), e))?;
        if let Some(c) = &self.classifying {
            if c.up.is_none() && c.down.is_none() {
                return Err(("classifying.up".into(), "give up, down or both".into()));
            }
            for (d, (f, v)) in [("up", &c.up), ("down", &c.down)].into_iter().enumerate() {
                if let Some(v) = v {
                    bw.classifying[d] =
                        parse_rate(v).map_err(|e| (format!("classifying.{f}"), e))?;
                }
            }
        }
        if !(5..=10_000).contains(&self.control_interval_ms) {
            return Err((
                "control-interval-ms".into(),
                format!("{} is out of range 5..10000", self.control_interval_ms),
            ));
        }
        bw.interval_ms = u64::from(self.control_interval_ms);
        Ok(bw)
    }
}

fn d_flows() -> u32 {
    1 << 20
}
fn d_slots() -> u32 {
    1 << 16
}
fn d_packets() -> u16 {
    24
}
fn d_depth() -> u16 {
    6
}
fn d_usage() -> u32 {
    1 << 18
}
fn d_subs() -> u32 {
    1_000_000
}

impl SignatureDef {
    /// The protocol number.
    pub fn protocol_number(&self) -> Result<Option<u8>, String> {
        match self.protocol.as_deref() {
            None => Ok(None),
            Some("tcp") => Ok(Some(6)),
            Some("udp") => Ok(Some(17)),
            Some(p) => p
                .parse::<u8>()
                .map(Some)
                .map_err(|_| format!("'{p}' is not tcp, udp or a protocol number")),
        }
    }

    /// The port range.
    pub fn port_range(&self) -> Result<Option<(u16, u16)>, String> {
        let Some(p) = self.ports.as_deref() else {
            return Ok(None);
        };
        let bad = || format!("'{p}' is not a port or range (e.g. 8080 or 9000-9100)");
        let (lo, hi) = match p.split_once('-') {
            Some((a, b)) => (
                a.trim().parse::<u16>().map_err(|_| bad())?,
                b.trim().parse::<u16>().map_err(|_| bad())?,
            ),
            None => {
                let v = p.trim().parse::<u16>().map_err(|_| bad())?;
                (v, v)
            }
        };
        if lo > hi {
            return Err(bad());
        }
        Ok(Some((lo, hi)))
    }

    /// The compiled signature (service id left 0: resolved by the engine).
    pub fn compile(&self) -> Result<dpi::signature::Signature, (String, String)> {
        let protocol = self
            .protocol_number()
            .map_err(|e| ("protocol".to_string(), e))?;
        let ports = self.port_range().map_err(|e| ("ports".to_string(), e))?;
        let addresses = match &self.addresses {
            None => None,
            Some(a) => {
                Some(dpi::subscriber::Prefix::parse(a).map_err(|e| ("addresses".to_string(), e))?)
            }
        };
        let payload = match &self.payload {
            None => None,
            Some(p) => Some(dpi::signature::Pattern {
                offset: self.offset,
                bytes: dpi::signature::Pattern::parse_bytes(p)
                    .map_err(|e| ("payload".to_string(), e))?,
            }),
        };
        if protocol.is_none() && ports.is_none() && addresses.is_none() && payload.is_none() {
            return Err((
                "name".into(),
                "a signature needs at least one of protocol, ports, addresses, payload".into(),
            ));
        }
        Ok(dpi::signature::Signature {
            name: self.name.clone(),
            service: 0,
            protocol,
            ports,
            addresses,
            payload,
        })
    }
}

impl ServiceControl {
    /// The engine's sizes.
    pub fn engine_config(&self) -> dpi::engine::EngineConfig {
        dpi::engine::EngineConfig {
            flows: self.flows as usize,
            classify_slots: self.classify_slots,
            classify_packets: self.classify_packets,
            signature_depth: self.signature_depth,
            guess: self.guess,
            usage_entries: self.usage_entries as usize,
            timeouts: self.timeouts(),
        }
    }

    /// The flow table's timeouts: the defaults with `timeouts:` applied
    /// (unknown state names are refused by the checks).
    pub fn timeouts(&self) -> dpi::flow::Timeouts {
        let mut t = dpi::flow::Timeouts::default();
        for (name, secs) in &self.timeouts {
            if let Some(s) = dpi::flow::State::ALL.iter().find(|s| s.name() == name) {
                t.ms[*s as usize] = u64::from(*secs) * 1000;
            }
        }
        t
    }

    /// Services and signatures compiled against `ndpi`.
    pub fn policy(&self, ndpi: &dpi::ndpi::Ndpi) -> Result<dpi::engine::Policy, String> {
        let services: Vec<(String, Vec<String>)> = self
            .services
            .iter()
            .map(|s| (s.name.clone(), s.applications.clone()))
            .collect();
        let mut sigs = Vec::with_capacity(self.signatures.len());
        for s in &self.signatures {
            let sig = s
                .compile()
                .map_err(|(f, e)| format!("signature '{}' {f}: {e}", s.name))?;
            sigs.push(dpi::engine::SignatureSpec {
                signature: sig,
                service: s.service.clone(),
            });
        }
        let mut p = dpi::engine::Policy::compile(ndpi, &services, sigs)?;
        p.bandwidth = self
            .bandwidth(&p.services)
            .map_err(|(f, e)| format!("{f}: {e}"))?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    const BASE: &str = "ports: [{name: s0}, {name: n0}, {name: x0}]\n";

    #[test]
    fn a_valid_section_compiles() {
        let text = format!(
            "{BASE}service-control:\n  inline: [{{subscriber-port: s0, network-port: n0}}]\n  flows: 1024\n  state-file: /var/lib/lanyard/quota.state\n  services:\n    - {{name: web, applications: [HTTP]}}\n    - {{name: custom}}\n  signatures:\n    - {{name: probe, service: custom, protocol: tcp, ports: 9000-9100, payload: 'LY\\x01'}}\n"
        );
        let cfg = crate::parse(&text, "t.yaml").unwrap();
        let sc = cfg.service_control.as_ref().unwrap();
        assert!(cfg.is_inline_port(0) && cfg.is_inline_port(1) && !cfg.is_inline_port(2));
        let n = dpi::ndpi::Ndpi::new().unwrap();
        let p = sc.policy(&n).unwrap();
        assert_eq!(p.services.id("custom"), Some(3));
        assert_eq!(p.signatures.get(0).unwrap().ports, Some((9000, 9100)));
        assert_eq!(sc.engine_config().flows, 1024);
        assert_eq!(
            sc.state_file.as_deref(),
            Some(std::path::Path::new("/var/lib/lanyard/quota.state"))
        );
        // Inline ports are in no VLAN (never flooded to).
        let l2 = crate::build::l2_tables(&cfg);
        assert!(!l2.vlans[1].flood.contains(0));
        assert!(l2.vlans[1].flood.contains(2) || !l2.ports[2].up);
    }

    #[test]
    fn controllers_and_packages_compile_and_bad_ones_are_named() {
        let text = format!(
            "{BASE}service-control:\n  inline: [{{subscriber-port: s0, network-port: n0}}]\n  services:\n    - {{name: web, applications: [HTTP]}}\n  packages:\n    - {{name: bronze, weight: 2, cap-down: 1M}}\n  controllers:\n    - {{service: web, up: 4M, down: 1.5G}}\n  quota-exceeded: 128k\n  classifying: {{up: 256k}}\n"
        );
        let cfg = crate::parse(&text, "t.yaml").unwrap();
        let sc = cfg.service_control.as_ref().unwrap();
        let p = sc.policy(&dpi::ndpi::Ndpi::new().unwrap()).unwrap();
        let bw = &p.bandwidth;
        assert_eq!(bw.limits[2], [4_000_000, 1_500_000_000]);
        assert_eq!(bw.weights, [10, 5, 2]);
        assert_eq!(bw.caps[2], [0, 1_000_000]);
        assert_eq!(bw.quota_rate, 128_000);
        assert_eq!(bw.classifying, [256_000, 0]);
        for (bad, want) in [
            (
                "  controllers:\n    - {service: nope, up: 4M}\n",
                "service-control.controllers[0].service: no service 'nope'",
            ),
            (
                "  controllers:\n    - {service: web, up: fast}\n",
                "service-control.controllers[0].up: \"fast\" is not a number",
            ),
            (
                "  controllers:\n    - {service: web}\n",
                "service-control.controllers[0].up: give up, down or both",
            ),
            (
                "  packages:\n    - {name: tin, weight: 3}\n",
                "service-control.packages[0].name: 'tin' is not a package",
            ),
            (
                "  packages:\n    - {name: gold, weight: 0}\n",
                "service-control.packages[0].weight: 0 is out of range",
            ),
            (
                "  quota-exceeded: slow\n",
                "service-control.quota-exceeded: \"slow\" is not a number",
            ),
            (
                "  classifying: {down: lots}\n",
                "service-control.classifying.down: \"lots\" is not a number",
            ),
            (
                "  classifying: {}\n",
                "service-control.classifying.up: give up, down or both",
            ),
        ] {
            let text = format!(
                "{BASE}service-control:\n  inline: [{{subscriber-port: s0, network-port: n0}}]\n  services:\n    - {{name: web}}\n{bad}"
            );
            let e = crate::parse(&text, "t.yaml").unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let text = format!(
            "{BASE}service-control:\n  inline:\n    - {{subscriber-port: s0, network-port: nope}}\n  services:\n    - {{name: web, applications: [HTTP, NotAnApp]}}\n  signatures:\n    - {{name: p, service: missing, ports: 9-1}}\n"
        );
        let e = crate::parse(&text, "t.yaml").unwrap_err().to_string();
        assert!(
            e.contains("t.yaml:6:")
                && e.contains("service-control.inline[0].network-port: no port 'nope'"),
            "{e}"
        );
        assert!(e.contains("service-control.services[0].applications[1]: 'NotAnApp' is not an nDPI application"), "{e}");
        assert!(
            e.contains("service-control.signatures[0].service: no service 'missing'"),
            "{e}"
        );
        assert!(
            e.contains("service-control.signatures[0].ports: '9-1' is not a port or range"),
            "{e}"
        );
        let dup = format!("{BASE}service-control:\n  inline: [{{subscriber-port: s0, network-port: s0}}]\n  flows: 3\n");
        let e = crate::parse(&dup, "t.yaml").unwrap_err().to_string();
        assert!(e.contains("already in an inline pair"), "{e}");
        assert!(
            e.contains("service-control.flows: 3 is out of range"),
            "{e}"
        );
    }
}
