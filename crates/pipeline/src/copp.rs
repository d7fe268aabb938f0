//! Control-plane policing: every frame punted to the control plane (and
//! every ICMP error the switch would generate) is put in a class and
//! policed per class before it reaches the TAP / kernel, so a flood of one
//! kind (multicast to 224.0.0.1, TTL-1 packets, ARP) cannot starve the
//! others (OSPF hellos).
//!
//! Protocol keepalives (OSPF/OSPFv3 and PIM hellos, BFD, VRRP, LDP hellos)
//! are a class of their own, `routing-hello`, apart from the rest of the
//! routing protocols' traffic: a routing table being flooded (OSPF link
//! state updates by the hundred thousand) cannot take the tokens the
//! hellos need, and the punt queue gives the class a lane of its own, so
//! hellos never wait behind updates either (issue 13).
//!
//! [`classify`] is pure; the rates live in [`CoppConfig`] (published by the
//! control plane) and each worker keeps its own token buckets.

use crate::counter::Counter;
use crate::l3::Punt;

/// Policing classes. The names are those of the configuration and `show`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CoppClass {
    /// OSPF, PIM, BGP, RIP, LDP: everything of the routing protocols
    /// except their keepalives.
    Routing = 0,
    /// ARP and IPv6 neighbour discovery.
    ArpNd,
    /// IGMP and MLD.
    Igmp,
    /// ICMP / ICMPv6 to the switch (ping).
    Icmp,
    /// ICMP errors the switch generates (TTL expired, unreachable, too big).
    TtlExpired,
    /// Routed packets waiting for a neighbour to be resolved.
    Glean,
    /// Everything else: other multicast, other traffic to the switch.
    Unknown,
    /// Link-layer control: LACP (slow protocols) and Lanyard's keepalives.
    L2Control,
    /// Routing protocol keepalives: OSPF and OSPFv3 hellos, PIM hellos,
    /// BFD, VRRP, LDP hellos. (Last in number so the others keep theirs.)
    RoutingHello,
}

pub const COPP_CLASSES: usize = 9;

impl CoppClass {
    /// In the order `show control-plane` lists them.
    pub const ALL: [CoppClass; COPP_CLASSES] = [
        CoppClass::RoutingHello,
        CoppClass::Routing,
        CoppClass::ArpNd,
        CoppClass::Igmp,
        CoppClass::Icmp,
        CoppClass::TtlExpired,
        CoppClass::Glean,
        CoppClass::Unknown,
        CoppClass::L2Control,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CoppClass::Routing => "routing",
            CoppClass::RoutingHello => "routing-hello",
            CoppClass::ArpNd => "arp-nd",
            CoppClass::Igmp => "igmp",
            CoppClass::Icmp => "icmp",
            CoppClass::TtlExpired => "ttl-expired",
            CoppClass::Glean => "glean",
            CoppClass::Unknown => "unknown",
            CoppClass::L2Control => "l2-control",
        }
    }

    pub fn from_name(s: &str) -> Option<CoppClass> {
        CoppClass::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// Rate and burst of one class, packets per second for the whole switch
/// (each of `n` workers polices `rate / n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoppRate {
    pub pps: u32,
    pub burst: u32,
}

/// The policing table; `None` rate = not policed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoppConfig {
    pub rates: [Option<CoppRate>; COPP_CLASSES],
}

impl Default for CoppConfig {
    /// Policing on, with rates a routing control plane of this size
    /// handles comfortably (docs/copp.md).
    fn default() -> Self {
        let r = |pps, burst| Some(CoppRate { pps, burst });
        CoppConfig {
            rates: [
                // Routing: FRR floods a full table (hundreds of thousands of
                // LSAs from eight neighbours) as fast as the kernel path
                // takes it; the burst holds a whole flood's first second.
                // Measured in docs/copp.md ("Full tables").
                r(ROUTING_PPS, ROUTING_BURST), // routing
                r(2000, 500),                  // arp-nd
                r(1000, 250),                  // igmp
                r(500, 100),                   // icmp
                r(1000, 200),                  // ttl-expired
                // Glean: generous, the kernel queues these while it
                // resolves; a burst of a new flow must fit.
                r(5000, 1000), // glean
                r(200, 50),    // unknown
                // LACP: one PDU per second per member at the fast rate.
                r(500, 100), // l2-control
                // Keepalives: 1/s per OSPF adjacency, 20/s per BFD session
                // at 50 ms.
                r(4000, 1000), // routing-hello
            ],
        }
    }
}

impl CoppConfig {
    /// No policing at all.
    pub fn off() -> CoppConfig {
        CoppConfig {
            rates: [None; COPP_CLASSES],
        }
    }
}

/// Default rate of the `routing` class, packets/s.
pub const ROUTING_PPS: u32 = 50_000;
/// Default burst of the `routing` class, packets.
pub const ROUTING_BURST: u32 = 50_000;

/// Per class: frames passed to the control plane and frames dropped.
#[derive(Default, Debug)]
pub struct CoppCounters {
    pub passed: [Counter; COPP_CLASSES],
    pub dropped: [Counter; COPP_CLASSES],
}

#[inline]
fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

/// The class of a punted frame (untagged Ethernet, as the layer-3 stage
/// sees it).
pub fn classify(frame: &[u8], reason: Punt) -> CoppClass {
    match reason {
        Punt::Arp | Punt::Nd => return CoppClass::ArpNd,
        Punt::NeedsResolution => return CoppClass::Glean,
        Punt::RoutingProtocol | Punt::OwnAddress | Punt::Multicast => {}
    }
    if frame.len() < 14 {
        return CoppClass::Unknown;
    }
    let ip = &frame[14..];
    let (proto, l4) = match be16(frame, 12) {
        0x0800 if ip.len() >= 20 => {
            let ihl = (ip[0] & 0x0f) as usize * 4;
            (ip[9], ip.get(ihl..).unwrap_or(&[]))
        }
        0x86dd if ip.len() >= 40 => {
            let mut nh = ip[6];
            let mut o = 40usize;
            // Hop-by-hop options come first on MLD reports.
            if nh == 0 && ip.len() >= o + 8 {
                nh = ip[o];
                o += (ip[o + 1] as usize + 1) * 8;
            }
            (nh, ip.get(o..).unwrap_or(&[]))
        }
        _ => return CoppClass::Unknown,
    };
    let port = |o: usize| if l4.len() >= o + 2 { be16(l4, o) } else { 0 };
    match proto {
        2 => CoppClass::Igmp,
        // OSPFv2/v3 header: version, type (1 = Hello; RFC 2328 A.3.1,
        // RFC 5340 A.3.1).
        89 if l4.get(1) == Some(&1) => CoppClass::RoutingHello,
        // PIM: type in the low nibble (0 = Hello; RFC 7761 4.9).
        103 if l4.first().is_some_and(|b| b & 0x0f == 0) => CoppClass::RoutingHello,
        // VRRP: every message is an advertisement, i.e. a keepalive.
        112 => CoppClass::RoutingHello,
        89 | 103 => CoppClass::Routing,
        1 => CoppClass::Icmp,
        58 => match l4.first() {
            Some(130..=132) | Some(143) => CoppClass::Igmp,
            Some(133..=137) => CoppClass::ArpNd,
            _ => CoppClass::Icmp,
        },
        6 if port(0) == 179 || port(2) == 179 || port(2) == 646 || port(0) == 646 => {
            CoppClass::Routing
        }
        // BFD control / echo / multihop (RFC 5881, 5883), LDP hello
        // (RFC 5036 2.4).
        17 if matches!(port(2), 646 | 3784 | 3785 | 4784) => CoppClass::RoutingHello,
        17 if matches!(port(2), 520 | 521) => CoppClass::Routing,
        _ => CoppClass::Unknown,
    }
}

/// A worker's buckets, one per class, on the worker's clock (ns).
pub struct CoppPolicer {
    /// Tokens in thousandths of a packet (integer refill at low rates).
    milli: [u64; COPP_CLASSES],
    rate: [Option<(u64, u64)>; COPP_CLASSES],
    last_ns: u64,
}

impl CoppPolicer {
    /// Buckets for `cfg` shared by `workers` workers (full at start).
    pub fn new(cfg: &CoppConfig, workers: usize) -> CoppPolicer {
        let w = workers.max(1) as u64;
        let mut rate = [None; COPP_CLASSES];
        let mut milli = [0; COPP_CLASSES];
        for (k, r) in cfg.rates.iter().enumerate() {
            if let Some(r) = r {
                let pps = (r.pps as u64).div_ceil(w).max(1);
                let burst = (r.burst as u64).div_ceil(w).max(1);
                rate[k] = Some((pps, burst * 1000));
                milli[k] = burst * 1000;
            }
        }
        CoppPolicer {
            milli,
            rate,
            last_ns: 0,
        }
    }

    /// Take one packet's token from `class`; false = over the rate.
    #[inline]
    pub fn admit(&mut self, class: CoppClass, now_ns: u64) -> bool {
        let dt = now_ns.saturating_sub(self.last_ns);
        if dt > 0 {
            self.last_ns = now_ns;
            for k in 0..COPP_CLASSES {
                if let Some((pps, cap)) = self.rate[k] {
                    // pps × ns / 1e6 = thousandths of a packet.
                    let add = (pps as u128 * dt as u128 / 1_000_000) as u64;
                    self.milli[k] = (self.milli[k].saturating_add(add)).min(cap);
                }
            }
        }
        let k = class as usize;
        match self.rate[k] {
            None => true,
            Some(_) if self.milli[k] >= 1000 => {
                self.milli[k] -= 1000;
                true
            }
            Some(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip4(proto: u8, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = proto;
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn classes_by_reason_and_protocol() {
        assert_eq!(classify(&[], Punt::Arp), CoppClass::ArpNd);
        assert_eq!(classify(&[], Punt::NeedsResolution), CoppClass::Glean);
        assert_eq!(
            classify(&ip4(89, 0), Punt::RoutingProtocol),
            CoppClass::Routing
        );
        // OSPF hello (type 1) vs link-state update (type 4), v2 and v3.
        let mut hello = ip4(89, 0);
        hello[34..36].copy_from_slice(&[2, 1]);
        assert_eq!(
            classify(&hello, Punt::RoutingProtocol),
            CoppClass::RoutingHello
        );
        hello[35] = 4;
        assert_eq!(classify(&hello, Punt::RoutingProtocol), CoppClass::Routing);
        let mut v3 = vec![0u8; 14 + 40 + 16];
        v3[12..14].copy_from_slice(&[0x86, 0xdd]);
        v3[14] = 0x60;
        v3[20] = 89;
        v3[54..56].copy_from_slice(&[3, 1]);
        assert_eq!(
            classify(&v3, Punt::RoutingProtocol),
            CoppClass::RoutingHello
        );
        v3[55] = 5; // link-state ack
        assert_eq!(classify(&v3, Punt::RoutingProtocol), CoppClass::Routing);
        let mut pim = ip4(103, 0);
        pim[34] = 0x20; // version 2, hello
        assert_eq!(classify(&pim, Punt::Multicast), CoppClass::RoutingHello);
        pim[34] = 0x23; // join/prune
        assert_eq!(classify(&pim, Punt::Multicast), CoppClass::Routing);
        assert_eq!(
            classify(&ip4(112, 0), Punt::Multicast),
            CoppClass::RoutingHello
        );
        assert_eq!(
            classify(&ip4(17, 646), Punt::Multicast),
            CoppClass::RoutingHello
        );
        assert_eq!(classify(&ip4(17, 520), Punt::Multicast), CoppClass::Routing);
        assert_eq!(classify(&ip4(2, 0), Punt::Multicast), CoppClass::Igmp);
        assert_eq!(classify(&ip4(1, 0), Punt::OwnAddress), CoppClass::Icmp);
        assert_eq!(
            classify(&ip4(17, 3784), Punt::OwnAddress),
            CoppClass::RoutingHello
        );
        assert_eq!(classify(&ip4(6, 179), Punt::OwnAddress), CoppClass::Routing);
        assert_eq!(classify(&ip4(17, 9), Punt::Multicast), CoppClass::Unknown);
        // MLD report behind a hop-by-hop header.
        let mut f = vec![0u8; 14 + 40 + 8 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[20] = 0; // hop-by-hop
        f[54] = 58; // next: ICMPv6
        f[55] = 0;
        f[62] = 143;
        assert_eq!(classify(&f, Punt::Multicast), CoppClass::Igmp);
        for len in 0..60 {
            let _ = classify(&ip4(17, 9)[..len], Punt::OwnAddress);
        }
        for c in CoppClass::ALL {
            assert_eq!(CoppClass::from_name(c.name()), Some(c));
        }
    }

    #[test]
    fn polices_each_class_to_its_rate_per_worker() {
        let cfg = CoppConfig::default();
        let mut p = CoppPolicer::new(&cfg, 2);
        // 10 s of a 50,000 pps flood of "unknown" (200 pps over 2 workers:
        // 100 pps here, burst 25).
        let mut passed = 0;
        for i in 0..500_000u64 {
            if p.admit(CoppClass::Unknown, 1 + i * 20_000) {
                passed += 1;
            }
        }
        assert!((1000..=1030).contains(&passed), "{passed}");
        // Other classes untouched by the flood.
        assert!(p.admit(CoppClass::Routing, 10_000_000_001));
        let mut off = CoppPolicer::new(&CoppConfig::off(), 1);
        assert!((0..10_000).all(|i| off.admit(CoppClass::Unknown, i)));
    }
}
