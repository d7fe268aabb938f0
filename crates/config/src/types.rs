//! Value types used by the configuration model: VLAN lists, native VLAN,
//! TPID and MAC addresses, each with a lenient YAML representation.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Lowest valid VLAN id.
pub const VLAN_MIN: u16 = 1;
/// Highest valid VLAN id.
pub const VLAN_MAX: u16 = 4094;

/// True if `id` is a usable VLAN id (1..=4094).
pub fn vlan_in_range(id: u16) -> bool {
    (VLAN_MIN..=VLAN_MAX).contains(&id)
}

// ---------------------------------------------------------------------------
// VlanList
// ---------------------------------------------------------------------------

/// A sorted set of VLAN ids.
///
/// YAML forms: a string `"10,20,30-40"`, a single integer `10`, or a list
/// whose items are integers or such strings (`[10, 20, "30-40"]`). Ids are
/// only syntax-checked here (0..=65535); the validator checks 1..=4094.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct VlanList {
    ids: Vec<u16>,
}

impl VlanList {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a set from any ids (duplicates are removed).
    pub fn from_ids<I: IntoIterator<Item = u16>>(ids: I) -> Self {
        let mut ids: Vec<u16> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        VlanList { ids }
    }

    /// True if `id` is in the set.
    pub fn contains(&self, id: u16) -> bool {
        self.ids.binary_search(&id).is_ok()
    }

    /// Adds `id`; returns false if it was already present.
    pub fn insert(&mut self, id: u16) -> bool {
        match self.ids.binary_search(&id) {
            Ok(_) => false,
            Err(pos) => {
                self.ids.insert(pos, id);
                true
            }
        }
    }

    /// Ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        self.ids.iter().copied()
    }

    /// Ids in ascending order.
    pub fn as_slice(&self) -> &[u16] {
        &self.ids
    }

    /// Number of ids.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True if no id is in the set.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Ids present in both sets.
    pub fn intersection(&self, other: &VlanList) -> VlanList {
        VlanList {
            ids: self.iter().filter(|id| other.contains(*id)).collect(),
        }
    }

    fn extend_from_str(&mut self, s: &str) -> Result<(), String> {
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                if s.trim().is_empty() {
                    continue;
                }
                return Err(format!("empty item in VLAN list {s:?}"));
            }
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let lo = parse_vlan_number(lo.trim(), s)?;
                    let hi = parse_vlan_number(hi.trim(), s)?;
                    if lo > hi {
                        return Err(format!("VLAN range {part:?} is reversed"));
                    }
                    self.ids.extend(lo..=hi);
                }
                None => {
                    let id = parse_vlan_number(part, s)?;
                    self.ids.push(id);
                }
            }
        }
        self.ids.sort_unstable();
        self.ids.dedup();
        Ok(())
    }
}

fn parse_vlan_number(s: &str, whole: &str) -> Result<u16, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "invalid VLAN list {whole:?}: expected ids or ranges like \"10,20,30-40\""
        ));
    }
    s.parse::<u16>()
        .map_err(|_| format!("VLAN id {s} out of range 1..4094"))
}

impl FromStr for VlanList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut list = VlanList::new();
        list.extend_from_str(s)?;
        Ok(list)
    }
}

/// Compact form, e.g. `1,10,20-30`.
impl fmt::Display for VlanList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.ids.len() {
            let lo = self.ids[i];
            let mut j = i;
            while j + 1 < self.ids.len() && self.ids[j + 1] == self.ids[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j == i {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{}", self.ids[j])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

impl fmt::Debug for VlanList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VlanList({self})")
    }
}

impl Serialize for VlanList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

struct VlanListVisitor;

impl<'de> Visitor<'de> for VlanListVisitor {
    type Value = VlanList;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a VLAN list like \"10,20,30-40\" or a list of VLAN ids")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<VlanList, E> {
        let id =
            u16::try_from(v).map_err(|_| E::custom(format!("VLAN id {v} out of range 1..4094")))?;
        Ok(VlanList::from_ids([id]))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<VlanList, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format!("VLAN id {v} out of range 1..4094"))),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<VlanList, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<VlanList, A::Error> {
        let mut list = VlanList::new();
        while let Some(item) = seq.next_element::<VlanList>()? {
            list.ids.extend(item.ids);
        }
        list.ids.sort_unstable();
        list.ids.dedup();
        Ok(list)
    }
}

impl<'de> Deserialize<'de> for VlanList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(VlanListVisitor)
    }
}

// ---------------------------------------------------------------------------
// NativeVlan
// ---------------------------------------------------------------------------

/// A trunk's native VLAN: untagged frames belong to it, or are dropped
/// (`none`). YAML: an integer VLAN id or the string `none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NativeVlan {
    /// Untagged frames belong to this VLAN; it egresses untagged.
    Vlan(u16),
    /// Untagged frames are dropped.
    None,
}

impl NativeVlan {
    /// The VLAN id, if any.
    pub fn id(self) -> Option<u16> {
        match self {
            NativeVlan::Vlan(id) => Some(id),
            NativeVlan::None => None,
        }
    }
}

impl Default for NativeVlan {
    fn default() -> Self {
        NativeVlan::Vlan(1)
    }
}

impl fmt::Display for NativeVlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NativeVlan::Vlan(id) => write!(f, "{id}"),
            NativeVlan::None => f.write_str("none"),
        }
    }
}

impl Serialize for NativeVlan {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            NativeVlan::Vlan(id) => s.serialize_u16(*id),
            NativeVlan::None => s.serialize_str("none"),
        }
    }
}

struct NativeVlanVisitor;

impl<'de> Visitor<'de> for NativeVlanVisitor {
    type Value = NativeVlan;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a VLAN id or \"none\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<NativeVlan, E> {
        u16::try_from(v)
            .map(NativeVlan::Vlan)
            .map_err(|_| E::custom(format!("VLAN id {v} out of range 1..4094")))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<NativeVlan, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format!("VLAN id {v} out of range 1..4094"))),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<NativeVlan, E> {
        let t = v.trim();
        if t.eq_ignore_ascii_case("none") {
            return Ok(NativeVlan::None);
        }
        match t.parse::<u64>() {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::custom(format!(
                "invalid native-vlan {v:?}: expected a VLAN id or \"none\""
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for NativeVlan {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NativeVlanVisitor)
    }
}

// ---------------------------------------------------------------------------
// Tpid
// ---------------------------------------------------------------------------

/// Outer tag protocol identifier of a trunk.
///
/// YAML: `0x8100` / `0x88a8` (integer, hex or decimal), the strings
/// `"0x8100"` / `"0x88a8"`, or `802.1q` / `802.1ad`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Tpid {
    /// 0x8100, IEEE 802.1Q C-tag.
    #[default]
    Dot1Q,
    /// 0x88a8, IEEE 802.1ad S-tag.
    Dot1Ad,
}

impl Tpid {
    /// The ethertype value.
    pub fn value(self) -> u16 {
        match self {
            Tpid::Dot1Q => 0x8100,
            Tpid::Dot1Ad => 0x88a8,
        }
    }

    /// The TPID for an ethertype value, if supported.
    pub fn from_value(v: u64) -> Option<Tpid> {
        match v {
            0x8100 => Some(Tpid::Dot1Q),
            0x88a8 => Some(Tpid::Dot1Ad),
            _ => None,
        }
    }
}

impl fmt::Display for Tpid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x}", self.value())
    }
}

impl FromStr for Tpid {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let parsed = match t.as_str() {
            "802.1q" | "dot1q" => Some(Tpid::Dot1Q),
            "802.1ad" | "dot1ad" => Some(Tpid::Dot1Ad),
            _ => t
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .or_else(|| t.parse::<u64>().ok())
                .and_then(Tpid::from_value),
        };
        parsed.ok_or_else(|| {
            format!("unsupported tpid {s:?}: expected 0x8100 (802.1q) or 0x88a8 (802.1ad)")
        })
    }
}

impl Serialize for Tpid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

struct TpidVisitor;

impl<'de> Visitor<'de> for TpidVisitor {
    type Value = Tpid;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x8100 (802.1q) or 0x88a8 (802.1ad)")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Tpid, E> {
        Tpid::from_value(v).ok_or_else(|| {
            E::custom(format!(
                "unsupported tpid {v:#x}: expected 0x8100 (802.1q) or 0x88a8 (802.1ad)"
            ))
        })
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Tpid, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format!(
                "unsupported tpid {v}: expected 0x8100 (802.1q) or 0x88a8 (802.1ad)"
            ))),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Tpid, E> {
        v.parse().map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Tpid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TpidVisitor)
    }
}

// ---------------------------------------------------------------------------
// MacAddr
// ---------------------------------------------------------------------------

/// A 48-bit MAC address.
///
/// Parsed from `aa:bb:cc:dd:ee:ff`, `aa-bb-cc-dd-ee-ff` or Cisco
/// `aabb.ccdd.eeff` (hex digits in any case). Displays as lowercase
/// colon-separated.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// The six octets.
    pub const fn octets(self) -> [u8; 6] {
        self.0
    }

    /// Group bit set (includes broadcast).
    pub fn is_multicast(self) -> bool {
        self.0[0] & 1 == 1
    }

    /// ff:ff:ff:ff:ff:ff
    pub fn is_broadcast(self) -> bool {
        self == Self::BROADCAST
    }

    /// 00:00:00:00:00:00
    pub fn is_zero(self) -> bool {
        self.0 == [0; 6]
    }

    /// A usable unicast station address: not group, not all-zero.
    pub fn is_unicast(self) -> bool {
        !self.is_multicast() && !self.is_zero()
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(o: [u8; 6]) -> Self {
        MacAddr(o)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(m: MacAddr) -> Self {
        m.0
    }
}

impl FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "invalid MAC address {s:?}: expected aa:bb:cc:dd:ee:ff, aa-bb-cc-dd-ee-ff or aabb.ccdd.eeff"
            )
        };
        let t = s.trim();
        let groups: Vec<&str> = if t.contains(':') {
            t.split(':').collect()
        } else if t.contains('-') {
            t.split('-').collect()
        } else {
            t.split('.').collect()
        };
        let width = match groups.len() {
            6 => 2,
            3 if !t.contains(':') && !t.contains('-') => 4,
            _ => return Err(bad()),
        };
        let mut out = [0u8; 6];
        let mut n = 0;
        for g in groups {
            if g.len() != width || !g.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            for k in (0..width).step_by(2) {
                out[n] = u8::from_str_radix(&g[k..k + 2], 16).map_err(|_| bad())?;
                n += 1;
            }
        }
        Ok(MacAddr(out))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            o[0], o[1], o[2], o[3], o[4], o[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

impl Serialize for MacAddr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

struct MacVisitor;

impl<'de> Visitor<'de> for MacVisitor {
    type Value = MacAddr;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a MAC address string like \"02:00:00:00:00:01\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<MacAddr, E> {
        v.parse().map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(MacVisitor)
    }
}

/// An IP address with a prefix length, `10.0.0.1/24` or `2001:db8::1/64`:
/// an interface address (host bits are the address) or, through
/// [`IpPrefix`], a route prefix.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpNet {
    pub addr: std::net::IpAddr,
    pub len: u8,
}

impl IpNet {
    /// Longest prefix of the family (32 or 128).
    pub fn max_len(&self) -> u8 {
        if self.addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    /// The address with the host bits cleared.
    pub fn network(&self) -> std::net::IpAddr {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        match self.addr {
            IpAddr::V4(a) => {
                let m = u32::MAX.checked_shl(32 - self.len as u32).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
            }
            IpAddr::V6(a) => {
                let m = u128::MAX.checked_shl(128 - self.len as u32).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
            }
        }
    }

    /// True if `ip` is inside this network.
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4()
            && IpNet {
                addr: ip,
                len: self.len,
            }
            .network()
                == self.network()
    }
}

impl FromStr for IpNet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let (a, l) = t.split_once('/').ok_or_else(|| {
            format!("{s:?} has no prefix length: expected ADDRESS/LENGTH, e.g. 10.0.0.1/24")
        })?;
        let addr: std::net::IpAddr = a
            .parse()
            .map_err(|_| format!("{a:?} is not an IPv4 or IPv6 address"))?;
        let len: u8 = l
            .parse()
            .map_err(|_| format!("prefix length {l:?} is not a number"))?;
        let net = IpNet { addr, len };
        if len > net.max_len() {
            return Err(format!(
                "prefix length {len} is longer than {} for {addr}",
                net.max_len()
            ));
        }
        Ok(net)
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl fmt::Debug for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IpNet({self})")
    }
}

impl Serialize for IpNet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

struct IpNetVisitor;

impl<'de> Visitor<'de> for IpNetVisitor {
    type Value = IpNet;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an address with prefix length like \"10.0.0.1/24\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<IpNet, E> {
        v.parse().map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for IpNet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(IpNetVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_net_parse_network_contains() {
        let n: IpNet = "10.1.2.3/24".parse().unwrap();
        assert_eq!(n.network().to_string(), "10.1.2.0");
        assert!(n.contains("10.1.2.200".parse().unwrap()));
        assert!(!n.contains("10.1.3.1".parse().unwrap()));
        assert!(!n.contains("::1".parse().unwrap()));
        let v6: IpNet = "2001:db8::1/64".parse().unwrap();
        assert_eq!(v6.network().to_string(), "2001:db8::");
        assert_eq!(
            "0.0.0.0/0".parse::<IpNet>().unwrap().network().to_string(),
            "0.0.0.0"
        );
        for bad in ["10.0.0.1", "10.0.0.1/33", "::/129", "x/8", "10.0.0.1/a"] {
            assert!(bad.parse::<IpNet>().is_err(), "{bad}");
        }
    }

    #[test]
    fn vlan_list_parse_and_display() {
        let l: VlanList = "30-33, 10,20,10".parse().unwrap();
        assert_eq!(l.as_slice(), &[10, 20, 30, 31, 32, 33]);
        assert!(l.contains(31) && !l.contains(34));
        assert_eq!(l.to_string(), "10,20,30-33");
        assert!("".parse::<VlanList>().unwrap().is_empty());
        assert!("10,,20".parse::<VlanList>().is_err());
        assert!("20-10".parse::<VlanList>().is_err());
        assert!("x".parse::<VlanList>().is_err());
        assert!("70000".parse::<VlanList>().is_err());
        assert!("-5".parse::<VlanList>().is_err());
    }

    #[test]
    fn mac_forms() {
        let want = MacAddr([0xaa, 0xbb, 0xcc, 0x0d, 0xee, 0xff]);
        assert_eq!("aa:bb:cc:0d:ee:ff".parse::<MacAddr>().unwrap(), want);
        assert_eq!("AA-BB-CC-0D-EE-FF".parse::<MacAddr>().unwrap(), want);
        assert_eq!("aabb.cc0d.eeff".parse::<MacAddr>().unwrap(), want);
        assert_eq!(want.to_string(), "aa:bb:cc:0d:ee:ff");
        for bad in [
            "",
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:f",
            "aabb.ccdd",
            "aa:bb-cc:dd:ee:ff",
            "gg:bb:cc:dd:ee:ff",
            "aabbccddeeff",
            "aa:bb:cc:dd:ee:+f",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(!"01:00:5e:00:00:01".parse::<MacAddr>().unwrap().is_unicast());
        assert!("02:00:00:00:00:01".parse::<MacAddr>().unwrap().is_unicast());
    }

    #[test]
    fn tpid_forms() {
        assert_eq!("0x88A8".parse::<Tpid>().unwrap(), Tpid::Dot1Ad);
        assert_eq!("802.1Q".parse::<Tpid>().unwrap(), Tpid::Dot1Q);
        assert_eq!("33024".parse::<Tpid>().unwrap(), Tpid::Dot1Q);
        assert!("0x9100".parse::<Tpid>().is_err());
        assert_eq!(Tpid::Dot1Ad.to_string(), "0x88a8");
    }
}
