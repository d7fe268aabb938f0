//! The layer-3 forwarding stage (IPv4 and IPv6 on routed ports).
//!
//! Reads: frame bytes (Ethernet II header, IPv4/IPv6 header, the first
//! 4 bytes of a TCP/UDP/SCTP header), the router interfaces, the FIB
//! (`Lpm4`/`Lpm6`), next hops and ECMP groups, the neighbour table.
//! Writes: forwarded frames in place — destination MAC (the neighbour),
//! source MAC (the egress interface), TTL − 1 with an RFC 1624 incremental
//! checksum update (IPv4) or hop limit − 1 (IPv6).
//! Sets: one [`L3Verdict`] per frame; counters in [`L3Counters`].
//! Decides: drop (named [`L3Drop`]) / punt to the control plane (named
//! [`Punt`]) / ICMP error for the caller to build and rate-limit
//! ([`IcmpKind`], see [`build_icmp4_error`] and [`build_icmp6_error`]) /
//! forward out of a port.
//!
//! Runs in three passes over the batch — parse and classify, uRPF
//! (source lookups), destination lookup and rewrite. The FIB lookups of a
//! pass are done for the whole batch before anything depends on them
//! (IPv6 through `Lpm6::lookup_batch`), so their cache misses overlap:
//! in the benchmark this took IPv6 from ~770 to ~75 ns/packet. No
//! allocation, locks or system calls.
//! Untagged Ethernet II only for now (routed ports, not SVIs).
//!
//! VRFs (docs/vrf.md): every interface names its VRF; the frame is routed
//! in the ingress interface's VRF — its FIB, next hops, own addresses —
//! and the neighbour is looked up in the egress interface's VRF. The VRF
//! is read once per frame from the interface (an array index).

use crate::counter::Counter;
use io::{FrameBatch, BATCH_MAX};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use tables::mpls::{LabelStack, Lfib, VIA_DEFAULT_BIT};
use tables::{
    Lpm4, Lpm6, NeighborState, NeighborTable, NextHop, NextHopTable, BLACKHOLE_PORT, GROUP_BIT,
};
use wire::{
    EtherType, EthernetFrame, EthernetRepr, IcmpMessage, IcmpPacket, IcmpRepr, Icmpv6Message,
    Icmpv6Packet, Icmpv6Repr, IpPair, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
    MacAddress,
};

const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_ARP: u16 = 0x0806;
const PROTO_OSPF: u8 = 89;
const PROTO_ICMPV6: u8 = 58;

/// Reverse-path check of an interface (RFC 3704).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Urpf {
    /// No check.
    #[default]
    Off,
    /// Some route (the default route included) covers the source.
    Loose,
    /// The route to the source leaves by the ingress port (for an ECMP
    /// group: any member does — RFC 3704 "feasible path").
    Strict,
}

/// A routed port and its addresses.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RouterInterface {
    pub port: u16,
    pub mac: [u8; 6],
    /// IPv4 addresses with their prefix lengths.
    pub v4: Vec<(u32, u8)>,
    /// IPv6 addresses with their prefix lengths (link-local included).
    pub v6: Vec<(u128, u8)>,
    /// Largest IP packet (header included) sent out of this interface.
    pub mtu: u16,
    pub urpf: Urpf,
    /// `Some(vlan)` for a VLAN interface (SVI): `port` is then the VLAN's
    /// internal port to the router, with no interface of its own — frames
    /// to it come from and go back to the layer-2 stage.
    pub vlan: Option<u16>,
    /// The interface's VRF: 0 the default (global) table, k the k-th of
    /// [`L3Tables::with_vrfs`].
    pub vrf: u16,
}

/// One VRF's forwarding tables: its own FIB, next hops and neighbours
/// (overlapping addresses across VRFs never meet). The LPM code and its
/// node pools are the default table's, one instance per VRF.
#[derive(Clone)]
pub struct VrfTables {
    pub fib4: Arc<Lpm4>,
    pub fib6: Arc<Lpm6>,
    pub nexthops: Arc<NextHopTable>,
    pub neighbors: Arc<NeighborTable>,
}

const NO_IFACE: u16 = u16::MAX;

/// What the stage reads: the FIB and the router interfaces. Build with
/// [`L3Tables::new`], which indexes the interfaces by port.
pub struct L3Tables {
    pub fib4: Arc<Lpm4>,
    pub fib6: Arc<Lpm6>,
    pub nexthops: Arc<NextHopTable>,
    pub neighbors: Arc<NeighborTable>,
    /// Every VRF's tables, index = `RouterInterface::vrf`; 0 is the
    /// default VRF (the four fields above).
    vrfs: Vec<VrfTables>,
    interfaces: Vec<RouterInterface>,
    /// port → index in `interfaces` (`NO_IFACE`: not a routed port).
    by_port: Vec<u16>,
    /// The router's own addresses with their VRF and the port whose
    /// interface holds them, sorted (binary search on address and VRF;
    /// the port is where a packet popped from a VPN label is delivered).
    own4: Vec<(u32, u16, u16)>,
    own6: Vec<(u128, u16, u16)>,
    /// The label FIB, when MPLS is on: LPM targets may then be labelled
    /// (FTN, docs/mpls.md) and resolve to a next hop plus labels to push.
    lfib: Option<Arc<Lfib>>,
    /// Routed 802.1Q subinterfaces: port id → (parent port, VLAN tag),
    /// `NO_IFACE` parent where none.
    sub_parent: Vec<(u16, u16)>,
    /// (parent port, VLAN tag, subinterface port id), sorted: the ingress
    /// demultiplexer's binary search.
    sub_by_tag: Vec<(u16, u16, u16)>,
    /// VRRP (docs/vrrp.md): the virtual MACs this node is master of, per
    /// interface; `None` without VRRP groups.
    vrrp: Option<Arc<tables::vrrp::VirtualRouters>>,
}

impl L3Tables {
    pub fn new(
        fib4: Arc<Lpm4>,
        fib6: Arc<Lpm6>,
        nexthops: Arc<NextHopTable>,
        neighbors: Arc<NeighborTable>,
        interfaces: Vec<RouterInterface>,
    ) -> L3Tables {
        let max = interfaces.iter().map(|i| i.port as usize + 1).max();
        let mut by_port = vec![NO_IFACE; max.unwrap_or(0)];
        for (k, i) in interfaces.iter().enumerate() {
            by_port[i.port as usize] = k as u16;
        }
        // Sorted: every routed packet looks its destination up here, and
        // a linear scan grows with the routed ports (410 at chassis scale).
        let mut own4: Vec<(u32, u16, u16)> = interfaces
            .iter()
            .flat_map(|i| i.v4.iter().map(|a| (a.0, i.vrf, i.port)))
            .collect();
        own4.sort_unstable();
        own4.dedup_by_key(|e| (e.0, e.1));
        let mut own6: Vec<(u128, u16, u16)> = interfaces
            .iter()
            .flat_map(|i| i.v6.iter().map(|a| (a.0, i.vrf, i.port)))
            .collect();
        own6.sort_unstable();
        own6.dedup_by_key(|e| (e.0, e.1));
        let default = VrfTables {
            fib4: fib4.clone(),
            fib6: fib6.clone(),
            nexthops: nexthops.clone(),
            neighbors: neighbors.clone(),
        };
        L3Tables {
            fib4,
            fib6,
            nexthops,
            neighbors,
            vrfs: vec![default],
            interfaces,
            by_port,
            own4,
            own6,
            lfib: None,
            sub_parent: Vec::new(),
            sub_by_tag: Vec::new(),
            vrrp: None,
        }
    }

    /// The same tables accepting, on an interface, frames to the virtual
    /// MAC of each VRRP group this node is master of there (as if to the
    /// router MAC).
    pub fn with_virtual_routers(
        mut self,
        v: Option<Arc<tables::vrrp::VirtualRouters>>,
    ) -> L3Tables {
        self.vrrp = v;
        self
    }

    /// True if `dst` is the virtual MAC of a VRRP group this node is
    /// master of on `port`.
    #[inline]
    pub fn virtual_mac_active(&self, port: u16, dst: &[u8]) -> bool {
        match (&self.vrrp, wire::vrrp::vrid_of_mac(dst)) {
            (Some(v), Some(vrid)) => v.is_master(port, vrid),
            _ => false,
        }
    }

    /// The same tables with routed 802.1Q subinterfaces: (subinterface
    /// port id, parent port, VLAN tag). Each subinterface is a router
    /// interface of its own (in `interfaces`); frames tagged `tag` on
    /// `parent` are its frames.
    pub fn with_subinterfaces(mut self, subs: &[(u16, u16, u16)]) -> L3Tables {
        let max = subs.iter().map(|s| s.0 as usize + 1).max().unwrap_or(0);
        self.sub_parent = vec![(NO_IFACE, 0); max];
        self.sub_by_tag.clear();
        for &(id, parent, tag) in subs {
            self.sub_parent[id as usize] = (parent, tag);
            self.sub_by_tag.push((parent, tag, id));
        }
        self.sub_by_tag.sort_unstable();
        self
    }

    /// True if any routed subinterface exists.
    #[inline]
    pub fn has_subinterfaces(&self) -> bool {
        !self.sub_by_tag.is_empty()
    }

    /// `Some((parent port, VLAN tag))` if `port` is a routed subinterface.
    #[inline]
    pub fn subinterface(&self, port: u16) -> Option<(u16, u16)> {
        self.sub_parent
            .get(port as usize)
            .copied()
            .filter(|p| p.0 != NO_IFACE)
    }

    /// The subinterface for frames tagged `tag` on `parent`.
    #[inline]
    pub fn subinterface_of(&self, parent: u16, tag: u16) -> Option<u16> {
        self.sub_by_tag
            .binary_search_by(|e| (e.0, e.1).cmp(&(parent, tag)))
            .ok()
            .map(|k| self.sub_by_tag[k].2)
    }

    /// The same tables resolving labelled targets through `lfib`.
    pub fn with_lfib(mut self, lfib: Arc<Lfib>) -> L3Tables {
        self.lfib = Some(lfib);
        self
    }

    /// The label FIB, if MPLS is on.
    pub fn lfib(&self) -> Option<&Arc<Lfib>> {
        self.lfib.as_ref()
    }

    /// The same tables with VRFs 1, 2, … (`RouterInterface::vrf`).
    /// An interface naming a VRF that is not given routes nothing: its
    /// frames are dropped as `not-routed-port` (never routed in another
    /// VRF's table).
    pub fn with_vrfs(mut self, vrfs: Vec<VrfTables>) -> L3Tables {
        self.vrfs.truncate(1);
        self.vrfs.extend(vrfs);
        self
    }

    /// VRF `k`'s tables (0: the default VRF).
    #[inline]
    pub fn vrf(&self, k: u16) -> Option<&VrfTables> {
        self.vrfs.get(k as usize)
    }

    /// Number of VRFs, the default one included.
    pub fn vrf_count(&self) -> usize {
        self.vrfs.len()
    }

    #[inline]
    fn urpf_on(&self, iface: u16) -> bool {
        self.interfaces[iface as usize].urpf != Urpf::Off
    }

    pub fn interfaces(&self) -> &[RouterInterface] {
        &self.interfaces
    }

    /// True if `port` is the internal port of a VLAN interface.
    #[inline]
    pub fn is_svi(&self, port: u16) -> bool {
        self.interface(port).is_some_and(|i| i.vlan.is_some())
    }

    /// The router interface on `port`, if the port is routed.
    #[inline]
    pub fn interface(&self, port: u16) -> Option<&RouterInterface> {
        let k = *self.by_port.get(port as usize)?;
        self.interfaces.get(k as usize)
    }
}

/// Why the stage dropped a frame. The names are those of `show counters`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum L3Drop {
    /// Arrived on a port without a router interface.
    NotRoutedPort = 0,
    /// Unicast destination MAC that is not the interface's.
    NotForRouter,
    /// Short frame, not IPv4/IPv6/ARP, bad version, IHL, length or checksum.
    Malformed,
    /// IP unicast destination in a link-layer broadcast/multicast frame
    /// (not forwarded, RFC 1812 §5.3.4).
    LinkBroadcast,
    /// IPv6 link-local source or destination (never forwarded, RFC 4291).
    LinkLocal,
    /// Reverse-path check failed.
    Urpf,
    /// The route's next hop or its egress interface is missing (tables
    /// mid-update).
    NoNextHop,
    /// IPv4 without DF longer than the egress MTU (no fragmentation in
    /// the data path).
    Mtu,
    /// The route is a blackhole (or unreachable/prohibit).
    Blackhole,
}

pub const L3_DROP_REASONS: usize = 9;

impl L3Drop {
    pub const ALL: [L3Drop; L3_DROP_REASONS] = [
        L3Drop::NotRoutedPort,
        L3Drop::NotForRouter,
        L3Drop::Malformed,
        L3Drop::LinkBroadcast,
        L3Drop::LinkLocal,
        L3Drop::Urpf,
        L3Drop::NoNextHop,
        L3Drop::Mtu,
        L3Drop::Blackhole,
    ];

    pub fn name(self) -> &'static str {
        match self {
            L3Drop::NotRoutedPort => "not-routed-port",
            L3Drop::NotForRouter => "not-for-router",
            L3Drop::Malformed => "malformed",
            L3Drop::LinkBroadcast => "link-broadcast",
            L3Drop::LinkLocal => "link-local",
            L3Drop::Urpf => "urpf",
            L3Drop::NoNextHop => "no-next-hop",
            L3Drop::Mtu => "mtu",
            L3Drop::Blackhole => "blackhole",
        }
    }
}

/// Why a frame goes to the control plane (the interface's TAP).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Punt {
    Arp = 0,
    /// ICMPv6 router/neighbour solicitation/advertisement or redirect.
    Nd,
    /// IP packet to one of the router's own addresses.
    OwnAddress,
    /// OSPF / OSPFv3 (IP protocol 89).
    RoutingProtocol,
    /// IPv4 broadcast or multicast, IPv6 multicast.
    Multicast,
    /// Routed, but the neighbour is unknown or incomplete: the control
    /// plane resolves it (ARP/ND).
    NeedsResolution,
}

pub const PUNT_REASONS: usize = 6;

impl Punt {
    pub const ALL: [Punt; PUNT_REASONS] = [
        Punt::Arp,
        Punt::Nd,
        Punt::OwnAddress,
        Punt::RoutingProtocol,
        Punt::Multicast,
        Punt::NeedsResolution,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Punt::Arp => "arp",
            Punt::Nd => "nd",
            Punt::OwnAddress => "own-address",
            Punt::RoutingProtocol => "routing-protocol",
            Punt::Multicast => "multicast",
            Punt::NeedsResolution => "needs-resolution",
        }
    }
}

/// The ICMP/ICMPv6 error a frame calls for; the caller builds it (with
/// [`build_icmp4_error`] / [`build_icmp6_error`]) and rate-limits it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IcmpKind {
    /// TTL / hop limit exhausted (ICMP 11/0, ICMPv6 3/0).
    TimeExceeded,
    /// No route (ICMP 3/0 net unreachable, ICMPv6 1/0 no route).
    Unreachable,
    /// IPv4 with DF over the egress MTU (ICMP 3/4, RFC 1191).
    FragNeeded { mtu: u16 },
    /// IPv6 over the egress MTU (ICMPv6 2/0).
    PacketTooBig { mtu: u16 },
}

impl IcmpKind {
    fn index(self) -> usize {
        match self {
            IcmpKind::TimeExceeded => 0,
            IcmpKind::Unreachable => 1,
            IcmpKind::FragNeeded { .. } => 2,
            IcmpKind::PacketTooBig { .. } => 3,
        }
    }

    pub fn name(self) -> &'static str {
        [
            "time-exceeded",
            "unreachable",
            "frag-needed",
            "packet-too-big",
        ][self.index()]
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum L3Verdict {
    Drop(L3Drop),
    Punt(Punt),
    /// Send an ICMP error back out of the ingress port (the frame itself
    /// is not forwarded).
    IcmpError(IcmpKind),
    /// The frame was rewritten in place; send it out of `port`.
    Forward {
        port: u16,
    },
}

/// Per-frame key gathered by the first pass.
#[derive(Clone, Copy, Default)]
struct Key {
    v6: bool,
    /// IPv4 addresses in the low 32 bits.
    src: u128,
    dst: u128,
    hash: u32,
    /// Ingress interface index.
    iface: u16,
    /// Ingress interface's VRF (index into `L3Tables::vrfs`, checked),
    /// or the one a VPN label named.
    vrf: u16,
    /// Routed in the VRF a VPN label named (`L3Verdicts::route_in_vrf`),
    /// not the ingress interface's: no uRPF (the interface's check is
    /// about its own VRF).
    by_label: bool,
    /// IP packet length (header included).
    l3len: u16,
    df: bool,
}

/// One verdict per frame of a batch, same indices, plus the stage's
/// scratch space (so `process_l3` allocates nothing).
pub struct L3Verdicts {
    pub v: [L3Verdict; BATCH_MAX],
    /// For a `Forward`: labels to push (FTN), outermost first; empty for
    /// a plain IP route. The caller pushes them (`mpls::push_ftn`).
    pub labels: [LabelStack; BATCH_MAX],
    pub len: usize,
    keys: [Key; BATCH_MAX],
    /// Frames still undecided after a pass.
    live: [bool; BATCH_MAX],
    /// FIB answer for the source (pass 2), then the destination (pass 3).
    target: [Option<u32>; BATCH_MAX],
    /// IPv6 lookups gathered for `Lpm6::lookup_batch`.
    addr6: [u128; BATCH_MAX],
    idx6: [u16; BATCH_MAX],
    res6: [Option<u32>; BATCH_MAX],
    /// IPv6 frames still to look up (per-VRF runs).
    pend6: [bool; BATCH_MAX],
    /// Per frame: 0, or 1 + the VRF a VPN label named (see
    /// [`L3Verdicts::route_in_vrf`]); cleared by [`process_l3`].
    vrf_in: [u16; BATCH_MAX],
    /// For a `Punt(NeedsResolution)`: the egress interface whose
    /// neighbour is missing ([`L3Verdicts::resolution_port`]); for a
    /// `Punt(OwnAddress)`: the interface holding the address
    /// ([`L3Verdicts::own_address_port`]).
    resolve_on: [u16; BATCH_MAX],
}

impl Default for L3Verdicts {
    fn default() -> Self {
        L3Verdicts {
            v: [L3Verdict::Drop(L3Drop::Malformed); BATCH_MAX],
            labels: [LabelStack::EMPTY; BATCH_MAX],
            len: 0,
            keys: [Key::default(); BATCH_MAX],
            live: [false; BATCH_MAX],
            target: [None; BATCH_MAX],
            addr6: [0; BATCH_MAX],
            idx6: [0; BATCH_MAX],
            res6: [None; BATCH_MAX],
            pend6: [false; BATCH_MAX],
            vrf_in: [0; BATCH_MAX],
            resolve_on: [0; BATCH_MAX],
        }
    }
}

impl L3Verdicts {
    /// Routes frame `i` of the next [`process_l3`] in VRF `vrf` (index into
    /// the tables' VRFs) instead of its ingress interface's: a packet whose
    /// VPN label was popped (`IlmAction::PopLookup { table }`, docs/vrf.md).
    /// A VRF the tables do not have routes nothing (`not-routed-port`).
    #[inline]
    pub fn route_in_vrf(&mut self, i: usize, vrf: u16) {
        if let Some(v) = self.vrf_in.get_mut(i) {
            *v = vrf.saturating_add(1);
        }
    }

    /// Whether frame `i` of the last [`process_l3`] was routed in a VRF a
    /// label named. Its punts and ICMP errors must not go to the ingress
    /// interface's kernel (another VRF's): the caller drops them.
    #[inline]
    pub fn routed_by_label(&self, i: usize) -> bool {
        i < self.len && self.keys[i].by_label
    }

    /// For frame `i` of the last [`process_l3`] punted as
    /// `NeedsResolution`: the egress interface whose neighbour is
    /// unknown. A packet routed by a VPN label resolves there (its
    /// twin is in the label's VRF), not at the ingress interface. A
    /// labelled next hop gives a port no interface has (the caller drops
    /// or punts to the ingress port as before).
    #[inline]
    pub fn resolution_port(&self, i: usize) -> Option<u16> {
        (i < self.len && self.v[i] == L3Verdict::Punt(Punt::NeedsResolution))
            .then(|| self.resolve_on[i])
    }

    /// For frame `i` of the last [`process_l3`] punted as `OwnAddress`:
    /// the interface holding the address in the VRF it was routed in. A
    /// packet popped from a VPN label is delivered to that interface's
    /// twin (in the label's VRF), not the ingress interface's.
    #[inline]
    pub fn own_address_port(&self, i: usize) -> Option<u16> {
        (i < self.len
            && self.v[i] == L3Verdict::Punt(Punt::OwnAddress)
            && self.resolve_on[i] != NO_RESOLUTION)
            .then(|| self.resolve_on[i])
    }

    /// For frame `i` of the last [`process_l3`] punted as
    /// `NeedsResolution` out of an interface of **another VRF** than the
    /// one it was routed in (a route leaked between VRFs, `import vrf`):
    /// that interface. The ingress interface's kernel (its own VRF's
    /// namespace) cannot resolve the neighbour; the egress twin's can.
    #[inline]
    pub fn resolution_in_other_vrf(&self, i: usize, t: &L3Tables) -> Option<u16> {
        let port = self.resolution_port(i)?;
        (t.interface(port)?.vrf != self.keys[i].vrf).then_some(port)
    }
}

/// One worker's layer-3 counters (single writer, see [`Counter`]).
#[derive(Default, Debug)]
pub struct L3Counters {
    pub rx_frames: Counter,
    pub forwarded: Counter,
    pub drops: [Counter; L3_DROP_REASONS],
    pub punts: [Counter; PUNT_REASONS],
    /// ICMP errors asked for, by [`IcmpKind`] (time-exceeded, unreachable,
    /// frag-needed, packet-too-big).
    pub icmp: [Counter; 4],
    /// ICMP errors actually sent (the worker rate-limits them).
    pub icmp_sent: Counter,
    /// ICMP errors not sent: over the rate limit, or not allowed (e.g. about
    /// an ICMP error or a non-unicast source).
    pub icmp_suppressed: Counter,
    /// Punted frames handed to the control plane.
    pub punted: Counter,
    /// Punted frames dropped: the punt queue was full (control plane busy).
    pub punt_queue_full: Counter,
    /// Frames the control plane injected on ports (from the TAPs).
    pub injected: Counter,
    /// Frames a VRF namespace's kernel sent to Lanyard's gateway (its
    /// catch-all route) that were routed in the VRF (docs/vrf.md).
    pub kernel_routed: Counter,
    /// Such frames dropped: no route in the VRF, or one the data path
    /// cannot take (the stage's verdict is counted too).
    pub kernel_unrouted: Counter,
}

impl L3Counters {
    #[inline]
    fn count(&self, v: L3Verdict) {
        match v {
            L3Verdict::Drop(r) => self.drops[r as usize].add(1),
            L3Verdict::Punt(p) => self.punts[p as usize].add(1),
            L3Verdict::IcmpError(k) => self.icmp[k.index()].add(1),
            L3Verdict::Forward { .. } => self.forwarded.add(1),
        }
    }
}

#[inline]
fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

/// murmur3's 64-bit finalizer: every input bit moves the high 32 bits,
/// which is what [`tables::nexthop::select`] uses.
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The ECMP flow hash: source and destination addresses, protocol and,
/// when the L4 header follows the IP header directly (and, for IPv4, the
/// packet is not a fragment), the TCP/UDP/SCTP port pair. Stable per flow.
#[inline]
pub fn flow_hash(src: u128, dst: u128, proto: u8, ports: u32) -> u32 {
    let a = (src as u64) ^ ((src >> 64) as u64).rotate_left(17);
    let b = (dst as u64) ^ ((dst >> 64) as u64).rotate_left(29);
    let h = mix(a ^ mix(b ^ ((u64::from(proto) << 32) | u64::from(ports))));
    (h >> 32) as u32
}

#[inline]
fn l4_ports(proto: u8, l4: &[u8]) -> u32 {
    // TCP, UDP, SCTP, UDP-Lite: source and destination ports first.
    if matches!(proto, 6 | 17 | 132 | 136) && l4.len() >= 4 {
        u32::from_be_bytes([l4[0], l4[1], l4[2], l4[3]])
    } else {
        0
    }
}

#[inline]
fn is_v6_link_local(a: u128) -> bool {
    a >> 118 == 0x3fa // fe80::/10
}

/// Pass 1 for one frame: a verdict now, or `None` and the key to route.
#[inline]
fn classify(
    t: &L3Tables,
    frame: &[u8],
    port: u16,
    vrf_in: u16,
    key: &mut Key,
    own_port: &mut u16,
) -> Option<L3Verdict> {
    let Some(&k) = t.by_port.get(port as usize) else {
        return Some(L3Verdict::Drop(L3Drop::NotRoutedPort));
    };
    let Some(ifc) = t.interfaces.get(k as usize) else {
        return Some(L3Verdict::Drop(L3Drop::NotRoutedPort));
    };
    let by_label = vrf_in != 0;
    let vrf = if by_label { vrf_in - 1 } else { ifc.vrf };
    if vrf as usize >= t.vrfs.len() {
        return Some(L3Verdict::Drop(L3Drop::NotRoutedPort));
    }
    if frame.len() < ETH_LEN {
        return Some(L3Verdict::Drop(L3Drop::Malformed));
    }
    // Broadcast or multicast.
    let group = frame[0] & 1 != 0;
    // A VRRP master also takes frames to its groups' virtual MACs (a test
    // made only when the MAC is not the interface's own).
    if !group && frame[0..6] != ifc.mac && !t.virtual_mac_active(port, &frame[0..6]) {
        return Some(L3Verdict::Drop(L3Drop::NotForRouter));
    }
    key.iface = k;
    let ip = &frame[ETH_LEN..];
    match be16(frame, 12) {
        ETHERTYPE_ARP => Some(L3Verdict::Punt(Punt::Arp)),
        ETHERTYPE_IPV4 => {
            let Ok(p) = Ipv4Packet::new_checked(ip) else {
                return Some(L3Verdict::Drop(L3Drop::Malformed));
            };
            if !p.verify_checksum() {
                return Some(L3Verdict::Drop(L3Drop::Malformed));
            }
            let proto = ip[9];
            let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
            let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
            if proto == PROTO_OSPF {
                return Some(L3Verdict::Punt(Punt::RoutingProtocol));
            }
            if let Ok(at) = t.own4.binary_search_by(|e| (e.0, e.1).cmp(&(dst, vrf))) {
                *own_port = t.own4[at].2;
                return Some(L3Verdict::Punt(Punt::OwnAddress));
            }
            if dst >> 28 == 0xe || dst == u32::MAX {
                return Some(L3Verdict::Punt(Punt::Multicast));
            }
            if group {
                return Some(L3Verdict::Drop(L3Drop::LinkBroadcast));
            }
            let hl = p.header_len();
            let total = p.total_len() as usize;
            let ports = if p.is_fragment() {
                0
            } else {
                l4_ports(proto, &ip[hl..total])
            };
            *key = Key {
                v6: false,
                src: src.into(),
                dst: dst.into(),
                hash: flow_hash(src.into(), dst.into(), proto, ports),
                iface: k,
                vrf,
                by_label,
                l3len: total as u16,
                df: p.dont_frag(),
            };
            None
        }
        ETHERTYPE_IPV6 => {
            let Ok(p) = Ipv6Packet::new_checked(ip) else {
                return Some(L3Verdict::Drop(L3Drop::Malformed));
            };
            let nh = ip[6];
            let src = u128::from_be_bytes(ip[8..24].try_into().unwrap_or_default());
            let dst = u128::from_be_bytes(ip[24..40].try_into().unwrap_or_default());
            let payload = p.payload();
            if nh == PROTO_OSPF {
                return Some(L3Verdict::Punt(Punt::RoutingProtocol));
            }
            if nh == PROTO_ICMPV6 && payload.first().is_some_and(|&ty| (133..=137).contains(&ty)) {
                return Some(L3Verdict::Punt(Punt::Nd));
            }
            if let Ok(at) = t.own6.binary_search_by(|e| (e.0, e.1).cmp(&(dst, vrf))) {
                *own_port = t.own6[at].2;
                return Some(L3Verdict::Punt(Punt::OwnAddress));
            }
            if dst >> 120 == 0xff {
                return Some(L3Verdict::Punt(Punt::Multicast));
            }
            if group {
                return Some(L3Verdict::Drop(L3Drop::LinkBroadcast));
            }
            if is_v6_link_local(dst) || is_v6_link_local(src) {
                return Some(L3Verdict::Drop(L3Drop::LinkLocal));
            }
            let l3len = 40 + p.payload_len() as usize;
            *key = Key {
                v6: true,
                src,
                dst,
                hash: flow_hash(src, dst, nh, l4_ports(nh, payload)),
                iface: k,
                vrf,
                by_label,
                l3len: l3len.min(u16::MAX as usize) as u16,
                df: true,
            };
            None
        }
        _ => Some(L3Verdict::Drop(L3Drop::Malformed)),
    }
}

/// Whether the FIB target `target` leaves by `port` (any member of a group).
#[inline]
fn target_uses_port(nh: &NextHopTable, target: u32, port: u16) -> bool {
    if target & GROUP_BIT == 0 {
        return nh.get(target).is_some_and(|h| h.port == port);
    }
    let g = target & !GROUP_BIT;
    // Hashes k · 2^32 / 64 select every member of a group of ≤ 64 (the
    // selection is `hash · n >> 32`), without reading the group out.
    let mut last = u32::MAX;
    for k in 0..tables::MAX_GROUP_MEMBERS as u64 {
        let hash = ((k << 32) / tables::MAX_GROUP_MEMBERS as u64) as u32;
        match nh.select(g, hash) {
            Some(id) if id != last => {
                if nh.get(id).is_some_and(|h| h.port == port) {
                    return true;
                }
                last = id;
            }
            Some(_) => {}
            None => return false,
        }
    }
    false
}

/// Decide every frame of `batch` (ingress port: `batch.port(i)`), rewriting
/// forwarded frames in place.
pub fn process_l3(t: &L3Tables, batch: &mut FrameBatch, out: &mut L3Verdicts, c: &L3Counters) {
    let n = batch.len();
    out.len = n;

    // Pass 1: parse, punt, validate; gather keys.
    for i in 0..n {
        c.rx_frames.add(1);
        let mut key = Key::default();
        let vrf_in = std::mem::take(&mut out.vrf_in[i]);
        let mut own_port = NO_RESOLUTION;
        match classify(
            t,
            batch.frame(i),
            batch.port(i),
            vrf_in,
            &mut key,
            &mut own_port,
        ) {
            Some(v) => {
                out.v[i] = v;
                out.live[i] = false;
                out.keys[i].by_label = vrf_in != 0;
                out.resolve_on[i] = own_port;
                c.count(v);
            }
            None => {
                out.keys[i] = key;
                out.live[i] = true;
            }
        }
    }

    // Pass 2: uRPF (source lookups, for the whole batch first), then the
    // TTL check — after uRPF, so spoofed sources get no ICMP.
    let urpf = |k: &Key| !k.by_label && t.urpf_on(k.iface);
    let any_urpf = (0..n).any(|i| out.live[i] && urpf(&out.keys[i]));
    if any_urpf {
        lookup_all(t, out, n, |k| k.src, urpf);
    }
    for i in 0..n {
        if !out.live[i] {
            continue;
        }
        let k = out.keys[i];
        let ifc = &t.interfaces[k.iface as usize];
        if ifc.urpf != Urpf::Off && !k.by_label {
            let ok = match (out.target[i], ifc.urpf) {
                (None, _) => false,
                (Some(_), Urpf::Loose) => true,
                (Some(target), _) => {
                    let (nh, target) = target_table(t, k.vrf, target);
                    target_uses_port(nh, target, ifc.port)
                }
            };
            if !ok {
                decide(out, c, i, L3Verdict::Drop(L3Drop::Urpf));
                continue;
            }
        }
        let f = batch.frame(i);
        let ttl = if k.v6 { f[ETH_LEN + 7] } else { f[ETH_LEN + 8] };
        if ttl <= 1 {
            decide(out, c, i, L3Verdict::IcmpError(IcmpKind::TimeExceeded));
        }
    }

    // Pass 3: destination lookups for the whole batch (independent loads,
    // so their cache misses overlap), then next hop, MTU, neighbour and
    // rewrite per frame.
    lookup_all(t, out, n, |k| k.dst, |_| true);
    for i in 0..n {
        if !out.live[i] {
            continue;
        }
        let k = out.keys[i];
        out.labels[i] = LabelStack::EMPTY;
        let v = match out.target[i] {
            None => L3Verdict::IcmpError(IcmpKind::Unreachable),
            Some(target) => route(
                t,
                &k,
                target,
                batch.frame_mut(i),
                &mut out.labels[i],
                &mut out.resolve_on[i],
            ),
        };
        decide(out, c, i, v);
    }
}

/// `out.target[i]` = FIB answer for `addr(key)` of every live frame for
/// which `want(key)`. IPv6 addresses are gathered and looked up with
/// `Lpm6::lookup_batch`, which overlaps the trie levels of 16 lookups.
#[inline]
fn lookup_all(
    t: &L3Tables,
    out: &mut L3Verdicts,
    n: usize,
    addr: impl Fn(&Key) -> u128,
    want: impl Fn(&Key) -> bool,
) {
    // IPv6 frames are looked up in runs, one per distinct VRF in the
    // batch (one run in the common case), each through `lookup_batch`.
    let mut any6 = false;
    for i in 0..n {
        let k = &out.keys[i];
        out.pend6[i] = false;
        if !out.live[i] || !want(k) {
            continue;
        }
        if k.v6 {
            out.pend6[i] = true;
            any6 = true;
        } else {
            out.target[i] = t.vrfs[k.vrf as usize].fib4.lookup(addr(k) as u32);
        }
    }
    while any6 {
        any6 = false;
        let mut run: Option<u16> = None;
        let mut m = 0;
        for i in 0..n {
            if !out.pend6[i] {
                continue;
            }
            let k = &out.keys[i];
            match run {
                None => run = Some(k.vrf),
                Some(v) if v != k.vrf => {
                    any6 = true; // a later run
                    continue;
                }
                Some(_) => {}
            }
            out.addr6[m] = addr(k);
            out.idx6[m] = i as u16;
            out.pend6[i] = false;
            m += 1;
        }
        if let Some(vrf) = run {
            t.vrfs[vrf as usize]
                .fib6
                .lookup_batch(&out.addr6[..m], &mut out.res6[..m]);
            for j in 0..m {
                out.target[out.idx6[j] as usize] = out.res6[j];
            }
        }
    }
}

#[inline]
fn decide(out: &mut L3Verdicts, c: &L3Counters, i: usize, v: L3Verdict) {
    out.v[i] = v;
    out.live[i] = false;
    c.count(v);
}

/// `L3Verdicts::resolve_on` of a punt that no egress twin may resolve.
const NO_RESOLUTION: u16 = u16::MAX;

/// The next-hop table a FIB answer of VRF `vrf` resolves in, and the
/// target without [`VIA_DEFAULT_BIT`]: a VRF's VPN routes leave through
/// the default VRF's next hops (its uplinks).
#[inline]
fn target_table(t: &L3Tables, vrf: u16, target: u32) -> (&NextHopTable, u32) {
    if target & VIA_DEFAULT_BIT != 0 {
        (&t.vrfs[0].nexthops, target & !VIA_DEFAULT_BIT)
    } else {
        (&t.vrfs[vrf as usize].nexthops, target)
    }
}

#[inline]
fn route(
    t: &L3Tables,
    k: &Key,
    target: u32,
    frame: &mut [u8],
    labels: &mut LabelStack,
    resolve_on: &mut u16,
) -> L3Verdict {
    let (nexthops, target) = target_table(t, k.vrf, target);
    let resolved = match &t.lfib {
        // Plain, group and labelled targets alike.
        Some(lfib) => lfib
            .resolve(nexthops, target, k.hash)
            .map(|r| (r.next_hop, r.labels)),
        None => nexthops
            .resolve(target, k.hash)
            .map(|(_, nh)| (nh, LabelStack::EMPTY)),
    };
    let Some((NextHop { port, gateway }, stack)) = resolved else {
        return L3Verdict::Drop(L3Drop::NoNextHop);
    };
    if port == BLACKHOLE_PORT {
        return L3Verdict::Drop(L3Drop::Blackhole);
    }
    let Some(egress) = t.interface(port) else {
        return L3Verdict::Drop(L3Drop::NoNextHop);
    };
    // The pushed stack counts against the egress MTU (RFC 3032 §3).
    let stack_len = 4 * stack.len() as u16;
    if k.l3len.saturating_add(stack_len) > egress.mtu {
        let mtu = egress.mtu.saturating_sub(stack_len);
        return match (k.v6, k.df) {
            (true, _) => L3Verdict::IcmpError(IcmpKind::PacketTooBig { mtu }),
            (false, true) => L3Verdict::IcmpError(IcmpKind::FragNeeded { mtu }),
            (false, false) => L3Verdict::Drop(L3Drop::Mtu),
        };
    }
    let hop = gateway.unwrap_or(if k.v6 {
        IpAddr::V6(Ipv6Addr::from(k.dst))
    } else {
        IpAddr::V4(Ipv4Addr::from(k.dst as u32))
    });
    // The neighbour belongs to the egress interface's VRF.
    let Some(out_vrf) = t.vrfs.get(egress.vrf as usize) else {
        return L3Verdict::Drop(L3Drop::NoNextHop);
    };
    let neigh = match out_vrf.neighbors.lookup(hop) {
        Some(nb) if nb.state != NeighborState::Incomplete => nb,
        _ => {
            // A labelled next hop (a VPN route's push into the core) is
            // resolved by no other VRF's kernel: that kernel would route
            // the customer's packet by its own table, unlabelled.
            *resolve_on = if stack.is_empty() {
                port
            } else {
                NO_RESOLUTION
            };
            return L3Verdict::Punt(Punt::NeedsResolution);
        }
    };
    frame[0..6].copy_from_slice(&neigh.mac);
    frame[6..12].copy_from_slice(&egress.mac);
    if k.v6 {
        frame[ETH_LEN + 7] -= 1; // > 1: checked in pass 2
    } else {
        // TTL > 1 (pass 2), so this cannot fail.
        let _ = Ipv4Packet::new_unchecked(&mut frame[ETH_LEN..]).decrement_ttl();
    }
    *labels = stack;
    L3Verdict::Forward { port }
}

// ---------------------------------------------------------------------
// ICMP errors (for the caller: the stage itself only decides).

/// Time-to-live for the errors the router originates.
pub const ICMP_TTL: u8 = 64;
/// RFC 4443 §2.4 (c): an ICMPv6 error is at most the minimum IPv6 MTU.
pub const IPV6_MIN_MTU: usize = 1280;

fn is_icmp4_error(ty: u8) -> bool {
    matches!(ty, 3 | 4 | 5 | 11 | 12)
}

/// Write into `out` a complete Ethernet + IPv4 + ICMP error frame for the
/// IPv4 `frame` received on `iface`, addressed back to its sender (MACs
/// swapped: source = the interface), quoting the original IP header and
/// the first 8 bytes of its payload (RFC 792), from the interface's first
/// IPv4 address. Returns the length written, or 0 when no error may or can
/// be sent: not valid IPv4, the interface has no IPv4 address, the source
/// is not a unicast host address, the packet is a non-first fragment or
/// itself an ICMP error (RFC 1812 §4.3.2.7), or `out` is too small.
pub fn build_icmp4_error(
    frame: &[u8],
    iface: &RouterInterface,
    kind: IcmpKind,
    out: &mut [u8],
) -> usize {
    let (ty, code, rest) = match kind {
        IcmpKind::TimeExceeded => (IcmpMessage::TimeExceeded, 0, 0),
        IcmpKind::Unreachable => (IcmpMessage::DstUnreachable, 0, 0),
        IcmpKind::FragNeeded { mtu } => (IcmpMessage::DstUnreachable, 4, u32::from(mtu)),
        IcmpKind::PacketTooBig { .. } => return 0,
    };
    if frame.len() < ETH_LEN || be16(frame, 12) != ETHERTYPE_IPV4 {
        return 0;
    }
    let Some(&(me, _)) = iface.v4.first() else {
        return 0;
    };
    let Ok(p) = Ipv4Packet::new_checked(&frame[ETH_LEN..]) else {
        return 0;
    };
    let src = p.src_addr();
    if src.is_unspecified() || src.is_multicast() || src.is_broadcast() || p.frag_offset() != 0 {
        return 0;
    }
    let hl = p.header_len();
    let total = p.total_len() as usize;
    if p.protocol() == IpProtocol::Icmp && total > hl && is_icmp4_error(p.payload()[0]) {
        return 0;
    }
    let quote = &frame[ETH_LEN..ETH_LEN + total.min(hl + 8)];
    let icmp = IcmpRepr::Other {
        msg_type: ty,
        code,
        rest,
        data: quote,
    };
    let ip = Ipv4Repr {
        src_addr: Ipv4Addr::from(me),
        dst_addr: src,
        protocol: IpProtocol::Icmp,
        payload_len: icmp.buffer_len(),
        ttl: ICMP_TTL,
        dscp: wire::Dscp::from_tos(0xc0), // CS6, network control
        ecn: wire::Ecn::from_bits(0),
        ident: 0,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
    };
    let len = ETH_LEN + ip.buffer_len() + icmp.buffer_len();
    if out.len() < len {
        return 0;
    }
    let eth = EthernetRepr {
        src_addr: MacAddress(iface.mac),
        dst_addr: MacAddress(frame[6..12].try_into().unwrap_or_default()),
        ethertype: EtherType::Ipv4,
    };
    let out = &mut out[..len];
    if eth
        .emit(&mut EthernetFrame::new_unchecked(&mut *out))
        .is_err()
        || ip
            .emit(&mut Ipv4Packet::new_unchecked(&mut out[ETH_LEN..]))
            .is_err()
        || icmp
            .emit(&mut IcmpPacket::new_unchecked(&mut out[ETH_LEN + 20..]))
            .is_err()
    {
        return 0;
    }
    len
}

/// [`build_icmp4_error`] for [`IcmpKind::TimeExceeded`].
pub fn build_icmp4_time_exceeded(frame: &[u8], iface: &RouterInterface, out: &mut [u8]) -> usize {
    build_icmp4_error(frame, iface, IcmpKind::TimeExceeded, out)
}

/// The ICMPv6 counterpart of [`build_icmp4_error`] (RFC 4443): quotes as
/// much of the original packet as keeps the error within 1,280 bytes;
/// source address: the interface's first global IPv6 address, else its
/// first. Returns 0 when not valid IPv6, no IPv6 address, the source is
/// unspecified or multicast, the packet is itself an ICMPv6 error
/// (next header 58, type < 128), or `out` is too small.
pub fn build_icmp6_error(
    frame: &[u8],
    iface: &RouterInterface,
    kind: IcmpKind,
    out: &mut [u8],
) -> usize {
    let (ty, code, rest) = match kind {
        IcmpKind::TimeExceeded => (Icmpv6Message::TimeExceeded, 0, 0),
        IcmpKind::Unreachable => (Icmpv6Message::DstUnreachable, 0, 0),
        IcmpKind::PacketTooBig { mtu } => (Icmpv6Message::PktTooBig, 0, u32::from(mtu)),
        IcmpKind::FragNeeded { .. } => return 0,
    };
    if frame.len() < ETH_LEN || be16(frame, 12) != ETHERTYPE_IPV6 {
        return 0;
    }
    let me = iface
        .v6
        .iter()
        .find(|a| !is_v6_link_local(a.0))
        .or(iface.v6.first());
    let Some(&(me, _)) = me else {
        return 0;
    };
    let Ok(p) = Ipv6Packet::new_checked(&frame[ETH_LEN..]) else {
        return 0;
    };
    let src = p.src_addr();
    if src.is_unspecified() || src.is_multicast() {
        return 0;
    }
    if p.next_header() == IpProtocol::Icmpv6 && p.payload().first().is_some_and(|&t| t < 128) {
        return 0;
    }
    let pkt_len = 40 + p.payload_len() as usize;
    let quote_len = pkt_len.min(IPV6_MIN_MTU - 40 - 8);
    let quote = &frame[ETH_LEN..ETH_LEN + quote_len];
    let icmp = Icmpv6Repr::Other {
        msg_type: ty,
        code,
        rest,
        data: quote,
    };
    let ip = Ipv6Repr {
        src_addr: Ipv6Addr::from(me),
        dst_addr: src,
        next_header: IpProtocol::Icmpv6,
        payload_len: icmp.buffer_len(),
        hop_limit: ICMP_TTL,
        dscp: wire::Dscp::from_tos(0xc0),
        ecn: wire::Ecn::from_bits(0),
        flow_label: 0,
    };
    let len = ETH_LEN + ip.buffer_len() + icmp.buffer_len();
    if out.len() < len {
        return 0;
    }
    let eth = EthernetRepr {
        src_addr: MacAddress(iface.mac),
        dst_addr: MacAddress(frame[6..12].try_into().unwrap_or_default()),
        ethertype: EtherType::Ipv6,
    };
    let ips = IpPair::V6 {
        src: ip.src_addr,
        dst: ip.dst_addr,
    };
    let out = &mut out[..len];
    if eth
        .emit(&mut EthernetFrame::new_unchecked(&mut *out))
        .is_err()
        || ip
            .emit(&mut Ipv6Packet::new_unchecked(&mut out[ETH_LEN..]))
            .is_err()
        || icmp
            .emit(
                &mut Icmpv6Packet::new_unchecked(&mut out[ETH_LEN + 40..]),
                &ips,
            )
            .is_err()
    {
        return 0;
    }
    len
}

/// [`build_icmp6_error`] for [`IcmpKind::TimeExceeded`].
pub fn build_icmp6_time_exceeded(frame: &[u8], iface: &RouterInterface, out: &mut [u8]) -> usize {
    build_icmp6_error(frame, iface, IcmpKind::TimeExceeded, out)
}
