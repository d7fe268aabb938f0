//! Services configuration: access lists, QoS class and policy maps, flow
//! export. Rule fields are kept as written (strings) and parsed by
//! [`parse_match`], so the validator can report every bad field of a
//! 10,000-line list with its path instead of stopping at the first.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use tables::acl::Match;

/// Lines one access list may hold.
pub const MAX_ACL_RULES: usize = 65_536;
/// Match lines of all class maps one policy uses.
pub const MAX_CLASS_LINES: usize = 4_096;
/// Classes of one policy map (the implicit `class-default` included).
pub const MAX_CLASSES: usize = 64;

/// Address family of an access list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AclType {
    /// Filters IPv4 packets (others pass untouched).
    #[default]
    Ipv4,
    /// Filters IPv6 packets.
    Ipv6,
    /// Filters every frame on layer-2 fields only.
    Mac,
}

impl AclType {
    pub fn as_str(self) -> &'static str {
        match self {
            AclType::Ipv4 => "ipv4",
            AclType::Ipv6 => "ipv6",
            AclType::Mac => "mac",
        }
    }
}

/// `permit` or `deny`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AclAction {
    Permit,
    Deny,
}

/// One entry of `access-lists:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AccessList {
    pub name: String,
    #[serde(default, rename = "type")]
    pub kind: AclType,
    /// Rules in order: the first that matches decides. A frame of the
    /// list's family that matches none is denied (implicit deny).
    #[serde(default)]
    pub rules: Vec<AclRule>,
}

/// The match fields shared by ACL rules and class-map lines. Every field
/// is optional ("any"); strings are parsed by [`parse_match`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct MatchFields {
    /// ACL rules only: `permit` or `deny` (required there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<AclAction>,
    /// ACL rules only: also log matches (rate-limited).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub log: bool,
    /// Free text, shown by `show access-lists`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remark: Option<String>,
    /// `any`, an address (host), or a prefix `10.0.0.0/8`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Name (`tcp`, `udp`, `icmp`, `icmpv6`, `sctp`, `gre`, `esp`, `ospf`,
    /// `pim`, `igmp`) or number 0..255.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// `80`, `1024-65535` (TCP, UDP, SCTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_port: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<String>,
    /// ICMP / ICMPv6 type and code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icmp_type: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icmp_code: Option<u8>,
    /// Comma-separated flags, `!` for "not set": `syn,!ack`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_flags: Option<String>,
    /// 0..63 or a name (`ef`, `af11`..`af43`, `cs0`..`cs7`, `default`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dscp: Option<String>,
    /// `aa:bb:cc:dd:ee:ff` or `aa:bb:cc:00:00:00/ff:ff:ff:00:00:00`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_mac: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_mac: Option<String>,
    /// `0x0806`, a number, or `ipv4` / `ipv6` / `arp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ethertype: Option<String>,
    /// `10` or `10-20`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<String>,
    /// `true`: only non-initial fragments (IPv4 offset ≠ 0, IPv6
    /// Fragment header offset ≠ 0), like IOS's `fragments` keyword; no
    /// L4 fields with it (such a fragment has none).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fragments: bool,
}

/// One rule of an access list: `action` plus match fields.
pub type AclRule = MatchFields;

/// One entry of `class-maps:`: frames matching any line are in the class.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClassMap {
    pub name: String,
    /// Match lines (same fields as ACL rules); the class matches IPv4 and
    /// IPv6 unless a line names an address of one family.
    #[serde(default, rename = "match")]
    pub lines: Vec<MatchFields>,
}

/// One entry of `policy-maps:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicyMap {
    pub name: String,
    /// Classes in order: a frame belongs to the first whose class map
    /// matches; `class-default` (implicit, may be listed last) takes the
    /// rest.
    #[serde(default)]
    pub classes: Vec<PolicyClass>,
}

/// Name of the class of frames no class map matched.
pub const CLASS_DEFAULT: &str = "class-default";

/// What a policy does to one class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicyClass {
    /// A class map name, or `class-default`.
    pub class: String,
    /// Re-mark DSCP (IPv4 and IPv6; ECN bits kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_dscp: Option<String>,
    /// Re-mark 802.1p priority of tagged egress copies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_pcp: Option<u8>,
    /// Two-rate three-colour policer (input policies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub police: Option<Police>,
    /// The class's egress queue (output policies): strict priority or a
    /// weighted share. Classes without one share weight 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueConfig>,
}

/// `queue:` of a policy class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct QueueConfig {
    /// Served before every weighted queue (several: in class order).
    pub priority: bool,
    /// Share of what priority queues leave, relative to the other weights
    /// (deficit round robin by bytes); default 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Frames the queue holds before tail drop (default 256).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
}

/// Default depth of an egress class queue, frames.
pub const DEFAULT_QUEUE_DEPTH: u32 = 256;

/// `police:` of a policy class (RFC 2698).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Police {
    /// Committed rate in bits/s: `10M`, `1.5G`, `64000`.
    pub cir: String,
    /// Committed burst in bytes (`64k`); default 25 ms of `cir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbs: Option<String>,
    /// Peak rate, default = CIR (a single-rate two-colour policer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pbs: Option<String>,
    /// Actions per colour: `transmit`, `drop`, or `set-dscp <dscp>`.
    #[serde(default = "transmit")]
    pub conform: String,
    #[serde(default = "drop_action")]
    pub exceed: String,
    #[serde(default = "drop_action")]
    pub violate: String,
}

fn transmit() -> String {
    "transmit".into()
}
fn drop_action() -> String {
    "drop".into()
}

/// Attachments on a port or VLAN.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServiceAttach {
    /// Access lists on frames entering (at most one per type).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acl_in: Vec<String>,
    /// Access lists on frames leaving.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acl_out: Vec<String>,
    /// QoS policy on frames entering.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_in: Option<String>,
    /// QoS policy on frames leaving (re-marking; no policers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_out: Option<String>,
}

impl ServiceAttach {
    pub fn is_empty(&self) -> bool {
        self == &ServiceAttach::default()
    }
}

/// Export format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowVersion {
    /// NetFlow version 9 (RFC 3954).
    #[default]
    #[serde(rename = "netflow-v9", alias = "v9", alias = "9")]
    NetflowV9,
    /// IPFIX (RFC 7011).
    #[serde(alias = "10")]
    Ipfix,
}

/// `flow-export:` — flow accounting on every port, exported to a collector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FlowExport {
    /// `HOST:PORT` of the collector (UDP).
    pub collector: String,
    #[serde(default)]
    pub version: FlowVersion,
    /// Seconds a long-lived flow is reported at (default 60).
    #[serde(default = "default_active")]
    pub active_timeout: u32,
    /// Seconds without packets after which a flow ends (default 15).
    #[serde(default = "default_inactive")]
    pub inactive_timeout: u32,
    /// Account 1 packet in N (1 = every packet, the default).
    #[serde(default = "one")]
    pub sampling: u32,
    /// Flows each worker's cache holds (default 1,048,576).
    #[serde(default = "default_cache")]
    pub cache_size: u32,
    /// Seconds between template refreshes (default 60).
    #[serde(default = "default_refresh")]
    pub template_refresh: u32,
    /// Observation domain / source id (default 0).
    #[serde(default)]
    pub domain_id: u32,
    /// Most records sent per second (absent: as fast as the collector's
    /// socket takes them). Records wait in the caches meanwhile, none is
    /// lost: for collectors that cannot take a burst of millions.
    #[serde(default)]
    pub rate_limit: Option<u32>,
}

fn default_active() -> u32 {
    60
}
fn default_inactive() -> u32 {
    15
}
fn one() -> u32 {
    1
}
fn default_cache() -> u32 {
    1 << 20
}
fn default_refresh() -> u32 {
    60
}

/// Parse one rule's or class line's fields for a list of type `kind`
/// (`None` for class maps: family from the addresses, else both).
/// Errors name the field, e.g. `("destination-port", "...")`.
pub fn parse_match(
    f: &MatchFields,
    kind: Option<AclType>,
) -> Result<Match, (&'static str, String)> {
    let mut m = Match::default();
    let mut family: Option<u8> = match kind {
        Some(AclType::Ipv4) => Some(4),
        Some(AclType::Ipv6) => Some(6),
        _ => None,
    };
    let l3 = |name: &'static str| -> Result<(), (&'static str, String)> {
        if kind == Some(AclType::Mac) {
            Err((name, "not allowed in a mac access list".to_string()))
        } else {
            Ok(())
        }
    };
    for (name, val, slot) in [
        ("source", &f.source, &mut m.src_ip),
        ("destination", &f.destination, &mut m.dst_ip),
    ] {
        let Some(s) = val else { continue };
        l3(name)?;
        if let Some((fam, pfx)) = parse_prefix(s).map_err(|e| (name, e))? {
            if let Some(want) = family {
                if want != fam {
                    return Err((
                        name,
                        format!("{s:?} is an IPv{fam} address in an IPv{want} match"),
                    ));
                }
            }
            family = Some(fam);
            *slot = Some(pfx);
        }
    }
    if let Some(p) = &f.protocol {
        l3("protocol")?;
        m.proto = parse_protocol(p).map_err(|e| ("protocol", e))?;
    }
    let ports_ok = matches!(m.proto, Some(6) | Some(17) | Some(132));
    for (name, val, slot) in [
        ("source-port", &f.source_port, &mut m.src_port),
        ("destination-port", &f.destination_port, &mut m.dst_port),
    ] {
        let Some(s) = val else { continue };
        if !ports_ok {
            return Err((name, "needs protocol tcp, udp or sctp".to_string()));
        }
        *slot = parse_range(s, 65535).map_err(|e| (name, e))?;
    }
    let icmp = matches!(m.proto, Some(1) | Some(58));
    if let Some(t) = f.icmp_type {
        if !icmp {
            return Err(("icmp-type", "needs protocol icmp or icmpv6".to_string()));
        }
        m.src_port = Some((t as u16, t as u16));
    }
    if let Some(c) = f.icmp_code {
        if f.icmp_type.is_none() {
            return Err(("icmp-code", "needs icmp-type".to_string()));
        }
        m.dst_port = Some((c as u16, c as u16));
    }
    if let Some(s) = &f.tcp_flags {
        if m.proto != Some(6) {
            return Err(("tcp-flags", "needs protocol tcp".to_string()));
        }
        m.tcp_flags = Some(parse_tcp_flags(s).map_err(|e| ("tcp-flags", e))?);
    }
    if f.fragments {
        l3("fragments")?;
        if f.source_port.is_some()
            || f.destination_port.is_some()
            || f.icmp_type.is_some()
            || f.tcp_flags.is_some()
        {
            return Err((
                "fragments",
                "a non-initial fragment has no ports, ICMP type or TCP flags: \
                 drop them from this rule"
                    .to_string(),
            ));
        }
        m.fragment = Some(true);
    }
    if let Some(s) = &f.dscp {
        l3("dscp")?;
        m.dscp = Some(parse_dscp(s).map_err(|e| ("dscp", e))?);
    }
    for (name, val, slot) in [
        ("source-mac", &f.source_mac, &mut m.src_mac),
        ("destination-mac", &f.destination_mac, &mut m.dst_mac),
    ] {
        let Some(s) = val else { continue };
        *slot = Some(parse_mac_mask(s).map_err(|e| (name, e))?);
    }
    if let Some(s) = &f.ethertype {
        let t = parse_ethertype(s).map_err(|e| ("ethertype", e))?;
        if kind.is_some_and(|k| k != AclType::Mac) {
            return Err((
                "ethertype",
                "only in mac access lists (an ipv4/ipv6 list matches its own EtherType)"
                    .to_string(),
            ));
        }
        m.ethertype = Some(t);
    }
    if let Some(s) = &f.vlan {
        let (a, b) = parse_range(s, 4094)
            .map_err(|e| ("vlan", e))?
            .unwrap_or((0, 4095));
        m.vlan = Some((a, b));
    }
    // A class-map line without addresses keeps family `None`: the
    // compiler expands it into an IPv4 and an IPv6 line.
    m.family = family;
    if let (Some(fam), Some(p)) = (family, m.proto) {
        if (fam == 4 && p == 58) || (fam == 6 && p == 1) {
            return Err((
                "protocol",
                format!(
                    "{} in an IPv{fam} match",
                    if p == 1 { "icmp" } else { "icmpv6" }
                ),
            ));
        }
    }
    Ok(m)
}

/// `any` → None; an address → host prefix; `a/len` → prefix (host bits
/// must be zero). Returns (family, (value, len)).
/// (family, (prefix, length)).
type FamilyPrefix = (u8, (u128, u8));

fn parse_prefix(s: &str) -> Result<Option<FamilyPrefix>, String> {
    let t = s.trim();
    if t == "any" {
        return Ok(None);
    }
    let (a, l) = match t.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (t, None),
    };
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("{a:?} is not an IPv4 or IPv6 address (or `any`)"))?;
    let (fam, bits, v) = match addr {
        IpAddr::V4(x) => (4u8, 32u8, u32::from(x) as u128),
        IpAddr::V6(x) => (6u8, 128u8, u128::from(x)),
    };
    let len = match l {
        None => bits,
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|n| *n <= bits)
            .ok_or_else(|| format!("prefix length {l:?} is not 0..{bits}"))?,
    };
    let host = if len == bits {
        0
    } else {
        (u128::MAX >> (128 - bits as u32)) >> len
    };
    if v & host != 0 {
        return Err(format!(
            "{t} has host bits set (did you mean {}/{len}?)",
            match addr {
                IpAddr::V4(_) => IpAddr::V4(((v & !host) as u32).into()),
                IpAddr::V6(_) => IpAddr::V6((v & !host).into()),
            }
        ));
    }
    Ok(Some((fam, (v, len))))
}

/// `tcp` / `17` / `any`.
pub fn parse_protocol(s: &str) -> Result<Option<u8>, String> {
    let t = s.trim().to_ascii_lowercase();
    Ok(Some(match t.as_str() {
        "any" | "ip" | "ipv6" => return Ok(None),
        "icmp" => 1,
        "igmp" => 2,
        "tcp" => 6,
        "udp" => 17,
        "gre" => 47,
        "esp" => 50,
        "ah" => 51,
        "icmpv6" => 58,
        "ospf" => 89,
        "pim" => 103,
        "vrrp" => 112,
        "sctp" => 132,
        n => n
            .parse::<u8>()
            .map_err(|_| format!("{s:?} is not a protocol name or number 0..255"))?,
    }))
}

/// `80`, `1024-65535`, `any` → inclusive range, None for `any`.
fn parse_range(s: &str, max: u16) -> Result<Option<(u16, u16)>, String> {
    let t = s.trim();
    if t == "any" {
        return Ok(None);
    }
    let num = |x: &str| -> Result<u16, String> {
        x.trim()
            .parse::<u16>()
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| format!("{x:?} is not a number 0..{max}"))
    };
    let (a, b) = match t.split_once('-') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => {
            let n = num(t)?;
            (n, n)
        }
    };
    if a > b {
        return Err(format!("range {t} runs backwards (write {b}-{a})"));
    }
    Ok(Some((a, b)))
}

const TCP_FLAGS: [(&str, u8); 8] = [
    ("fin", 0x01),
    ("syn", 0x02),
    ("rst", 0x04),
    ("psh", 0x08),
    ("ack", 0x10),
    ("urg", 0x20),
    ("ece", 0x40),
    ("cwr", 0x80),
];

/// `syn,!ack` → (value, mask).
fn parse_tcp_flags(s: &str) -> Result<(u8, u8), String> {
    let (mut value, mut mask) = (0u8, 0u8);
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (neg, name) = match part.strip_prefix('!') {
            Some(n) => (true, n),
            None => (false, part),
        };
        let bit = TCP_FLAGS
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, b)| *b)
            .ok_or_else(|| {
                format!("{name:?} is not a TCP flag (fin, syn, rst, psh, ack, urg, ece, cwr)")
            })?;
        if mask & bit != 0 {
            return Err(format!("{name} given twice"));
        }
        mask |= bit;
        if !neg {
            value |= bit;
        }
    }
    if mask == 0 {
        return Err("no flags given".to_string());
    }
    Ok((value, mask))
}

/// DSCP number or name.
pub fn parse_dscp(s: &str) -> Result<u8, String> {
    let t = s.trim().to_ascii_lowercase();
    let v = match t.as_str() {
        "default" | "be" => 0,
        "ef" => 46,
        "va" => 44,
        _ => if let Some(n) = t.strip_prefix("cs") {
            n.parse::<u8>().ok().filter(|n| *n <= 7).map(|n| n * 8)
        } else if let Some(n) = t.strip_prefix("af") {
            let b = n.as_bytes();
            if b.len() == 2 && (b'1'..=b'4').contains(&b[0]) && (b'1'..=b'3').contains(&b[1]) {
                Some((b[0] - b'0') * 8 + (b[1] - b'0') * 2)
            } else {
                None
            }
        } else {
            t.parse::<u8>().ok().filter(|n| *n <= 63)
        }
        .ok_or_else(|| {
            format!("{s:?} is not a DSCP value 0..63 or name (ef, af11..af43, cs0..cs7)")
        })?,
    };
    Ok(v)
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    s.parse::<super::MacAddr>().map(|m| m.0)
}

fn parse_mac_mask(s: &str) -> Result<([u8; 6], [u8; 6]), String> {
    let (a, m) = match s.split_once('/') {
        Some((a, m)) => (parse_mac(a)?, parse_mac(m)?),
        None => (parse_mac(s)?, [0xff; 6]),
    };
    let mut v = a;
    for i in 0..6 {
        if v[i] & !m[i] != 0 {
            return Err(format!("{s}: address has bits outside the mask"));
        }
        v[i] &= m[i];
    }
    Ok((v, m))
}

fn parse_ethertype(s: &str) -> Result<u16, String> {
    let t = s.trim().to_ascii_lowercase();
    match t.as_str() {
        "ipv4" | "ip" => Ok(0x0800),
        "ipv6" => Ok(0x86dd),
        "arp" => Ok(0x0806),
        "lldp" => Ok(0x88cc),
        "mpls" => Ok(0x8847),
        _ => {
            let n = if let Some(h) = t.strip_prefix("0x") {
                u16::from_str_radix(h, 16).ok()
            } else {
                t.parse::<u16>().ok()
            };
            n.filter(|n| *n >= 0x0600).ok_or_else(|| {
                format!("{s:?} is not an EtherType (0x0600..0xffff, ipv4, ipv6, arp)")
            })
        }
    }
}

/// `10M`, `1.5G`, `64000`, `64k` (decimal multiples) → integer.
pub fn parse_quantity(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1e3),
        Some('m') | Some('M') => (&t[..t.len() - 1], 1e6),
        Some('g') | Some('G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number with an optional k/M/G suffix"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("{s:?} must be a positive number"));
    }
    Ok((v * mult).round() as u64)
}

/// What a policer does with a frame of one colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoliceAction {
    Transmit,
    Drop,
    SetDscp(u8),
}

pub fn parse_police_action(s: &str) -> Result<PoliceAction, String> {
    let t = s.trim();
    match t {
        "transmit" => Ok(PoliceAction::Transmit),
        "drop" => Ok(PoliceAction::Drop),
        _ => match t.strip_prefix("set-dscp") {
            Some(d) => Ok(PoliceAction::SetDscp(parse_dscp(d)?)),
            None => Err(format!(
                "{s:?} is not an action (transmit, drop, set-dscp <dscp>)"
            )),
        },
    }
}

/// Smallest burst: one 9,216-byte frame with its tags.
pub const MIN_BURST: u64 = 9_234;

/// Default burst for a rate: 25 ms worth, at least [`MIN_BURST`]. Bursts
/// must cover the bursts senders really make (a batch of frames arriving
/// together); 25 ms is Juniper-like and well under Cisco's 250 ms.
pub fn default_burst(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 40).max(MIN_BURST)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(y: &str) -> MatchFields {
        serde_yaml_ng::from_str(y).unwrap()
    }

    #[test]
    fn parses_l3_l4_fields() {
        let m = parse_match(
            &fields("{source: 10.1.0.0/16, destination: 192.0.2.1, protocol: tcp, destination-port: 1024-65535, tcp-flags: 'syn,!ack', dscp: af41}"),
            Some(AclType::Ipv4),
        )
        .unwrap();
        assert_eq!(m.family, Some(4));
        assert_eq!(m.src_ip, Some((0x0a01_0000, 16)));
        assert_eq!(m.dst_ip, Some((0xc000_0201, 32)));
        assert_eq!(m.proto, Some(6));
        assert_eq!(m.dst_port, Some((1024, 65535)));
        assert_eq!(m.tcp_flags, Some((0x02, 0x12)));
        assert_eq!(m.dscp, Some(34));
    }

    #[test]
    fn clear_errors() {
        let cases = [
            (
                "{destination-port: 80}",
                Some(AclType::Ipv4),
                "destination-port",
            ),
            (
                "{protocol: tcp, source-port: 90-80}",
                Some(AclType::Ipv4),
                "source-port",
            ),
            ("{source: 10.0.0.1/8}", Some(AclType::Ipv4), "source"),
            ("{source: '2001:db8::/32'}", Some(AclType::Ipv4), "source"),
            ("{protocol: tcpp}", Some(AclType::Ipv4), "protocol"),
            ("{dscp: af51}", Some(AclType::Ipv4), "dscp"),
            (
                "{protocol: udp, tcp-flags: syn}",
                Some(AclType::Ipv4),
                "tcp-flags",
            ),
            ("{ethertype: arp}", Some(AclType::Ipv4), "ethertype"),
            ("{source: any, protocol: 6}", Some(AclType::Mac), "source"),
            ("{protocol: icmp}", Some(AclType::Ipv6), "protocol"),
            ("{vlan: 10-5000}", Some(AclType::Mac), "vlan"),
        ];
        for (y, kind, field) in cases {
            let e = parse_match(&fields(y), kind).unwrap_err();
            assert_eq!(e.0, field, "{y}: {e:?}");
        }
        assert!(
            parse_match(&fields("{source: 10.0.0.1/8}"), Some(AclType::Ipv4))
                .unwrap_err()
                .1
                .contains("10.0.0.0/8")
        );
    }

    const GOOD: &str = "access-lists:
  - name: edge4
    type: ipv4
    rules:
      - {action: deny, protocol: tcp, destination-port: 23, log: true}
      - {action: permit, remark: rest}
  - name: l2
    type: mac
    rules:
      - {action: deny, ethertype: 0x88cc}
      - {action: permit}
class-maps:
  - name: voice
    match:
      - {protocol: udp, destination-port: 16384-32767}
policy-maps:
  - name: in
    classes:
      - class: voice
        set-dscp: ef
        police: {cir: 10M, pir: 20M, exceed: set-dscp af11}
  - name: out
    classes:
      - {class: voice, queue: {priority: true}}
      - {class: class-default, set-dscp: af11, queue: {weight: 3, depth: 512}}
flow-export:
  collector: 127.0.0.1:2055
  version: ipfix
vlans:
  - id: 10
    acl-in: [l2]
ports:
  - name: p1
    vlan: 10
    acl-in: [edge4, l2]
    acl-out: [edge4]
    policy-in: in
    policy-out: out
";

    #[test]
    fn full_services_config_parses() {
        let cfg = super::super::parse(GOOD, "t.yaml").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.access_lists.len(), 2);
        assert_eq!(cfg.access_lists[0].rules[0].action, Some(AclAction::Deny));
        assert!(cfg.access_lists[0].rules[0].log);
        assert_eq!(cfg.ports[0].policy_out.as_deref(), Some("out"));
        assert_eq!(
            cfg.policy_maps[1].classes[1].queue,
            Some(QueueConfig {
                priority: false,
                weight: Some(3),
                depth: Some(512)
            })
        );
        assert_eq!(
            cfg.flow_export.as_ref().unwrap().version,
            FlowVersion::Ipfix
        );
        assert_eq!(cfg.flow_export.as_ref().unwrap().inactive_timeout, 15);
    }

    #[test]
    fn services_errors_name_the_field() {
        let cases: [(&str, &str, &str); 11] = [
            (
                "destination-port: 23,",
                "destination-port: 90-80,",
                "access-lists[0].rules[0].destination-port",
            ),
            (
                "destination-port: 23,",
                "destination-port: 23, fragments: true,",
                "access-lists[0].rules[0].fragments",
            ),
            ("acl-out: [edge4]", "acl-out: [nope]", "ports[0].acl-out[0]"),
            (
                "acl-in: [edge4, l2]",
                "acl-in: [edge4, edge4]",
                "ports[0].acl-in[1]",
            ),
            ("policy-out: out", "policy-out: in", "ports[0].policy-out"),
            ("policy-in: in", "policy-in: out", "ports[0].policy-in"),
            (
                "  - name: l2\n",
                "  - name: edge4\n",
                "access-lists[1].name",
            ),
            (
                "pir: 20M",
                "pir: 5M",
                "policy-maps[0].classes[0].police.pir",
            ),
            (
                "collector: 127.0.0.1:2055",
                "collector: nowhere",
                "flow-export.collector",
            ),
            (
                "collector: 127.0.0.1:2055",
                "collector: 127.0.0.1:2055\n  rate-limit: 50",
                "flow-export.rate-limit",
            ),
            (
                "queue: {priority: true}",
                "queue: {priority: true, weight: 2}",
                "policy-maps[1].classes[0].queue",
            ),
        ];
        for (from, to, field) in cases {
            assert!(GOOD.contains(from), "{from}");
            let text = GOOD.replacen(from, to, 1);
            let e = super::super::parse(&text, "t.yaml").expect_err(to);
            assert!(
                e.errors
                    .iter()
                    .any(|x| x.field == field && x.line.is_some()),
                "{to}: want {field}, got {e}"
            );
        }
        let e = super::super::parse(&GOOD.replace("log: true", "logg: true"), "t.yaml")
            .expect_err("unknown field");
        assert!(e.to_string().contains("logg"), "{e}");
    }

    #[test]
    fn quantities_and_dscp_names() {
        assert_eq!(parse_quantity("10M").unwrap(), 10_000_000);
        assert_eq!(parse_quantity("1.5G").unwrap(), 1_500_000_000);
        assert_eq!(parse_quantity("64k").unwrap(), 64_000);
        assert!(parse_quantity("fast").is_err());
        assert_eq!(parse_dscp("ef").unwrap(), 46);
        assert_eq!(parse_dscp("cs6").unwrap(), 48);
        assert_eq!(parse_dscp("af11").unwrap(), 10);
        assert_eq!(parse_dscp("63").unwrap(), 63);
        assert!(parse_dscp("64").is_err());
        assert_eq!(
            parse_police_action("set-dscp af11").unwrap(),
            PoliceAction::SetDscp(10)
        );
    }
}
