//! The configuration model: plain data mirroring docs/config.md.
//!
//! Optional keys whose presence matters to validation (`vlan`,
//! `allowed-vlans`, `native-vlan`, `tpid` on ports) are `Option`s; use the
//! `effective_*` accessors for the value with defaults applied.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::services::{AccessList, ClassMap, FlowExport, PolicyMap};
use super::types::{IpNet, MacAddr, NativeVlan, Tpid, VlanList};

/// Default `switch.name`.
pub const DEFAULT_SWITCH_NAME: &str = "lanyard";
/// Default `switch.workers`.
pub const DEFAULT_WORKERS: u32 = 1;
/// Default `switch.mac-aging` in seconds.
pub const DEFAULT_MAC_AGING: u32 = 300;
/// Default `switch.mac-table-size`.
pub const DEFAULT_MAC_TABLE_SIZE: u32 = 1 << 20;
/// Default `switch.poll-idle-us`.
pub const DEFAULT_POLL_IDLE_US: u32 = 50;
/// Default `switch.af-xdp-busy-poll-budget` (frames per busy poll).
pub const DEFAULT_BUSY_POLL_BUDGET: u32 = 64;
/// Default `switch.af-xdp-busy-poll-us` (`SO_BUSY_POLL`).
pub const DEFAULT_BUSY_POLL_US: u32 = 20;
/// Default `switch.af-xdp-napi-timeout-us` (the device's
/// `gro_flush_timeout` while busy polling; the kernel's AF_XDP
/// documentation uses 200 µs).
pub const DEFAULT_NAPI_TIMEOUT_US: u32 = 200;
/// Default `switch.worker-nice`: forwarding threads win the CPU over
/// ordinary processes, as the kernel's own forwarding (softirq) does.
pub const DEFAULT_WORKER_NICE: i32 = -10;
/// Default `management.socket`.
pub const DEFAULT_SOCKET: &str = "/run/lanyard/lanyard.sock";
/// Default MTU of a layer-2 port (access, trunk, dot1q-tunnel): jumbo.
pub const DEFAULT_MTU: u32 = 9216;
/// Default MTU of a routed port: the conventional Ethernet MTU, so routing
/// protocols that compare MTUs (OSPF's database description) agree with
/// neighbours that kept theirs (issue 13).
pub const DEFAULT_ROUTED_MTU: u32 = 1500;
/// Default IP MTU of an SVI (lower if a port in its VLAN has a smaller MTU).
pub const DEFAULT_SVI_MTU: u32 = 1500;
/// Largest MTU of a routed port or SVI: what its TAP twin can carry (a
/// packet of this size, its Ethernet header and a VLAN tag fill Lanyard's
/// 9,224-byte frame buffers, `io::MAX_FRAME_LEN`). The port and the TAP
/// always have the same MTU.
pub const MAX_L3_MTU: u32 = 9206;
/// The VLAN that always exists and is the default everywhere.
pub const DEFAULT_VLAN: u16 = 1;

/// `sw1-48` or `sw1-sw48` → ("sw", 1, 48); `None` if `item` is not a
/// range of one prefix with a trailing number.
fn split_range(item: &str) -> Option<(&str, u32, u32)> {
    let (a, b) = item.rsplit_once('-')?;
    let digits = a.len() - a.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    let prefix = &a[..a.len() - digits];
    let lo: u32 = a[a.len() - digits..].parse().ok()?;
    let hi: u32 = b.strip_prefix(prefix).unwrap_or(b).parse().ok()?;
    (lo <= hi).then_some((prefix, lo, hi))
}

/// Limits enforced by the validator.
pub mod limits {
    /// Forwarding threads.
    pub const WORKERS: std::ops::RangeInclusive<u32> = 1..=64;
    /// MAC table capacity.
    pub const MAC_TABLE_SIZE: std::ops::RangeInclusive<u32> = 1..=16_777_216;
    /// Port MTU.
    pub const MTU: std::ops::RangeInclusive<u32> = 68..=9216;
    /// Number of ports (the data plane's `tables::MAX_PORTS`; tables are
    /// sized by the ports configured, not by this: docs/scale.md).
    pub const MAX_PORTS: usize = 1024;
    /// Linux interface name length (IFNAMSIZ - 1).
    pub const MAX_PORT_NAME: usize = 15;
    /// Frames per receive ring (`switch.rx-ring`).
    pub const RX_RING: std::ops::RangeInclusive<u32> = 64..=65_536;
    /// Frames per transmit ring (`switch.tx-ring`).
    pub const TX_RING: std::ops::RangeInclusive<u32> = 16..=4096;
    /// `switch.af-xdp-busy-poll-budget`.
    pub const BUSY_POLL_BUDGET: std::ops::RangeInclusive<u32> = 1..=1024;
    /// `switch.af-xdp-busy-poll-us`.
    pub const BUSY_POLL_US: std::ops::RangeInclusive<u32> = 1..=1000;
    /// `switch.af-xdp-napi-timeout-us`.
    pub const NAPI_TIMEOUT_US: std::ops::RangeInclusive<u32> = 10..=10_000;
}

/// The whole switch configuration (one YAML file).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Global settings.
    #[serde(default)]
    pub switch: SwitchSettings,
    /// Management API.
    #[serde(default)]
    pub management: Management,
    /// Configured VLANs besides the implicit VLAN 1 (VLAN 1 may be listed
    /// to change its settings).
    #[serde(default)]
    pub vlans: Vec<VlanConfig>,
    /// Switch ports, in order; a port's index is its position here.
    #[serde(default)]
    pub ports: Vec<PortConfig>,
    /// Static MAC table entries.
    #[serde(default)]
    pub static_macs: Vec<StaticMac>,
    /// Layer 3: static routes and the FRR connection.
    #[serde(default)]
    pub routing: Routing,
    /// Access lists, referenced by name from ports and VLANs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_lists: Vec<AccessList>,
    /// QoS class maps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub class_maps: Vec<ClassMap>,
    /// QoS policy maps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_maps: Vec<PolicyMap>,
    /// Flow accounting and export (absent: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_export: Option<FlowExport>,
    /// Port mirroring (SPAN) sessions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirror_sessions: Vec<super::mirror::MirrorSession>,
    /// Control-plane policing (on by default).
    #[serde(default)]
    pub control_plane_policing: super::copp::CoppSettings,
    /// Flexlink-style backup port pairs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backup_pairs: Vec<super::ha::BackupPair>,
    /// Port channels (link aggregation, LACP).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_channels: Vec<super::ha::PortChannel>,
    /// IGMP/MLD snooping and multicast routing.
    #[serde(default, skip_serializing_if = "is_default_multicast")]
    pub multicast: super::multicast::MulticastConfig,
    /// Loop detection by probes (absent: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_detect: Option<super::guard::LoopDetect>,
    /// Event-manager policies (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_manager: Option<super::events::EventManager>,
    /// Rapid Spanning Tree (absent: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spanning_tree: Option<super::stp::SpanningTree>,
    /// VRFs (docs/vrf.md); interfaces in none are in the default VRF.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vrfs: Vec<super::vrf::VrfConfig>,
    /// The inline service engine (absent: off; docs/inline.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_control: Option<super::service_control::ServiceControl>,
    /// Multichassis pairing with a peer node (absent: standalone;
    /// docs/virtual-switch.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_switch: Option<super::vswitch::VirtualSwitch>,
    /// Ethernet pseudowires and their attachment circuits (docs/mpls.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pseudowires: Vec<super::l2vpn::PseudowireConfig>,
    /// Label-plane settings: fast reroute (docs/mpls.md).
    #[serde(default, skip_serializing_if = "super::mpls::MplsConfig::is_empty")]
    pub mpls: super::mpls::MplsConfig,
}

fn is_default_multicast(m: &super::multicast::MulticastConfig) -> bool {
    *m == super::multicast::MulticastConfig::default()
}

/// `routing:` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Routing {
    /// Where Lanyard listens for zebra's Forwarding Plane Manager
    /// (`dplane_fpm_nl`), e.g. `127.0.0.1:2620`. Absent: no FRR routes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fpm: Option<String>,
    /// Where Lanyard answers the zebra module's pseudowire installs
    /// (`zebra_lanyard.so:PATH`); absent: the default path when a
    /// pseudowire is signalled by LDP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pseudowire_socket: Option<std::path::PathBuf>,
    /// Static routes (installed in Lanyard's FIB and in the kernel).
    pub static_routes: Vec<StaticRoute>,
}

/// One entry of `routing.static-routes:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StaticRoute {
    /// Destination prefix (host bits zero).
    pub prefix: IpNet,
    /// Gateway address (same family as the prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_hop: Option<std::net::IpAddr>,
    /// Egress routed port; required for a link-local gateway or a route
    /// without a gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// Drop traffic to the prefix.
    #[serde(default)]
    pub blackhole: bool,
    /// The VRF whose table holds the route (absent: the default VRF);
    /// `interface` and `next-hop` are in that VRF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrf: Option<String>,
    /// Static L3VPN route (with `vrf` and `vpn-label`, instead of
    /// `next-hop`/`interface`): the remote PE the prefix is behind. Frames
    /// get `vpn-label` pushed, then the transport toward this address as
    /// the default VRF routes it (docs/vrf.md, "Static VPN routes").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_pe: Option<std::net::Ipv4Addr>,
    /// The remote PE's VPN label of the VRF (its `vrfs[].vpn-label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpn_label: Option<u32>,
}

impl StaticRoute {
    /// A static L3VPN route: remote PE and its VPN label.
    pub fn vpn(&self) -> Option<(std::net::Ipv4Addr, u32)> {
        Some((self.remote_pe?, self.vpn_label?))
    }
}

/// How Lanyard moves a port's frames (docs/io.md, "Port backends").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortBackend {
    /// AF_XDP where the steering program and socket attach, AF_PACKET
    /// otherwise (the reason is logged). A TUN/TAP interface stays on
    /// AF_PACKET.
    #[default]
    Auto,
    /// AF_XDP only: the port stays down (with the reason in `show
    /// interfaces`) if it does not attach.
    AfXdp,
    /// AF_PACKET (TPACKET rings) only.
    AfPacket,
}

impl PortBackend {
    pub fn is_auto(&self) -> bool {
        *self == PortBackend::Auto
    }
    pub fn as_str(&self) -> &'static str {
        match self {
            PortBackend::Auto => "auto",
            PortBackend::AfXdp => "af-xdp",
            PortBackend::AfPacket => "af-packet",
        }
    }
}

/// Receive rings of AF_PACKET ports (docs/io.md, "Two rings").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AfPacketRing {
    /// A per-frame (TPACKET_V2) ring for microsecond hand-over, with a
    /// block (TPACKET_V3) ring behind it for bursts and stalls.
    #[default]
    Dual,
    /// The block ring alone: a lightly loaded port waits for the 1 ms
    /// block timer.
    Block,
}

impl AfPacketRing {
    pub fn is_dual(&self) -> bool {
        *self == AfPacketRing::Dual
    }
    pub fn as_str(&self) -> &'static str {
        match self {
            AfPacketRing::Dual => "dual",
            AfPacketRing::Block => "block",
        }
    }
}

/// AF_XDP busy polling (docs/io.md "Busy polling").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BusyPollMode {
    /// The kernel's NAPI poll (softirq or NAPI thread) fills the socket's
    /// ring and wakes the worker.
    #[default]
    Off,
    /// The worker runs the device's NAPI poll itself (`recvfrom` per
    /// receive call), and the kernel leaves the device to it.
    On,
}

impl BusyPollMode {
    pub fn is_off(&self) -> bool {
        *self == BusyPollMode::Off
    }
    pub fn as_str(&self) -> &'static str {
        match self {
            BusyPollMode::Off => "off",
            BusyPollMode::On => "on",
        }
    }
}

/// One UMEM per worker shared by its AF_XDP ports (docs/io.md "Shared
/// UMEM").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SharedUmemMode {
    /// Each AF_XDP port has its own UMEM; forwarding copies every frame.
    #[default]
    Off,
    /// The AF_XDP ports a worker receives on share one UMEM: a unicast
    /// frame between two of them moves as a descriptor.
    On,
}

impl SharedUmemMode {
    pub fn is_off(&self) -> bool {
        *self == SharedUmemMode::Off
    }
    pub fn as_str(&self) -> &'static str {
        match self {
            SharedUmemMode::Off => "off",
            SharedUmemMode::On => "on",
        }
    }
}

fn is_default_budget(v: &u32) -> bool {
    *v == DEFAULT_BUSY_POLL_BUDGET
}
fn is_default_busy_poll_us(v: &u32) -> bool {
    *v == DEFAULT_BUSY_POLL_US
}
fn is_default_napi_timeout(v: &u32) -> bool {
    *v == DEFAULT_NAPI_TIMEOUT_US
}

/// Reverse-path check of a routed port (RFC 3704).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UrpfMode {
    /// No check.
    #[default]
    Off,
    /// Some route covers the source.
    Loose,
    /// The route back to the source leaves by the ingress port.
    Strict,
}

/// `switch:` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SwitchSettings {
    /// Switch name, default "lanyard".
    pub name: String,
    /// Forwarding threads, 1..=64, default 1.
    pub workers: u32,
    /// MAC aging time in seconds; 0 disables aging. Default 300.
    pub mac_aging: u32,
    /// Learned + static entries the MAC table holds, 1..=16,777,216.
    pub mac_table_size: u32,
    /// Busy-poll this long (µs) before sleeping in poll(2). Default 50.
    pub poll_idle_us: u32,
    /// Nice value (-20..19) of the forwarding threads (workers and the
    /// learner). Default -10.
    pub worker_nice: i32,
    /// Backend of ports that do not name one. Default auto.
    #[serde(skip_serializing_if = "PortBackend::is_auto")]
    pub port_backend: PortBackend,
    /// Receive rings of AF_PACKET ports. Default dual.
    #[serde(skip_serializing_if = "AfPacketRing::is_dual")]
    pub af_packet_ring: AfPacketRing,
    /// Frames each port's receive ring holds (`ethtool -G rx`), 64..=65536;
    /// `None`: sized by the port count (full up to 16 ports, smaller above;
    /// docs/scale.md). A power of two on AF_XDP (rounded down).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_ring: Option<u32>,
    /// Frames each port's transmit ring holds, 16..=4096; `None`: by the
    /// port count, as `rx-ring`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_ring: Option<u32>,
    /// AF_XDP ports busy poll (ports that name none). Default off.
    #[serde(skip_serializing_if = "BusyPollMode::is_off")]
    pub af_xdp_busy_poll: BusyPollMode,
    /// Frames one busy poll takes from the driver (`SO_BUSY_POLL_BUDGET`).
    #[serde(skip_serializing_if = "is_default_budget")]
    pub af_xdp_busy_poll_budget: u32,
    /// `SO_BUSY_POLL` in µs.
    #[serde(skip_serializing_if = "is_default_busy_poll_us")]
    pub af_xdp_busy_poll_us: u32,
    /// The device's NAPI watchdog while busy polling (`gro_flush_timeout`),
    /// µs; the worker keeps polling twice this long after its last frame.
    #[serde(skip_serializing_if = "is_default_napi_timeout")]
    pub af_xdp_napi_timeout_us: u32,
    /// The AF_XDP ports of a worker share one UMEM (docs/io.md "Shared
    /// UMEM"). Default off.
    #[serde(skip_serializing_if = "SharedUmemMode::is_off")]
    pub af_xdp_shared_umem: SharedUmemMode,
}

impl Default for SwitchSettings {
    fn default() -> Self {
        SwitchSettings {
            name: DEFAULT_SWITCH_NAME.to_string(),
            workers: DEFAULT_WORKERS,
            mac_aging: DEFAULT_MAC_AGING,
            mac_table_size: DEFAULT_MAC_TABLE_SIZE,
            poll_idle_us: DEFAULT_POLL_IDLE_US,
            worker_nice: DEFAULT_WORKER_NICE,
            port_backend: PortBackend::Auto,
            af_packet_ring: AfPacketRing::Dual,
            rx_ring: None,
            tx_ring: None,
            af_xdp_busy_poll: BusyPollMode::Off,
            af_xdp_busy_poll_budget: DEFAULT_BUSY_POLL_BUDGET,
            af_xdp_busy_poll_us: DEFAULT_BUSY_POLL_US,
            af_xdp_napi_timeout_us: DEFAULT_NAPI_TIMEOUT_US,
            af_xdp_shared_umem: SharedUmemMode::Off,
        }
    }
}

/// `management:` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Management {
    /// Unix socket of the JSON API (absolute path).
    pub socket: PathBuf,
    /// What is logged, and where besides stderr.
    pub logging: Logging,
    /// Prometheus `/metrics` endpoint (absent: off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    /// IF-MIB through the host's snmpd as an AgentX subagent (absent: off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snmp: Option<Snmp>,
}

impl Default for Management {
    fn default() -> Self {
        Management {
            socket: PathBuf::from(DEFAULT_SOCKET),
            logging: Logging::default(),
            metrics: None,
            snmp: None,
        }
    }
}

/// `management.metrics:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Metrics {
    /// Where `GET /metrics` is served, `address:port` (e.g.
    /// `127.0.0.1:9417`, `[::]:9417`).
    pub listen: String,
}

impl Metrics {
    /// The listening address.
    pub fn listen_addr(&self) -> Result<std::net::SocketAddr, String> {
        self.listen.parse().map_err(|_| {
            format!(
                "{:?} is not address:port (e.g. 127.0.0.1:9417 or [::]:9417)",
                self.listen
            )
        })
    }
}

/// net-snmp's default AgentX master socket.
pub const DEFAULT_AGENTX_SOCKET: &str = "/var/agentx/master";

/// `management.snmp:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Snmp {
    /// The master agent's AgentX socket (snmpd's `agentXSocket`, an
    /// absolute path).
    pub agentx_socket: PathBuf,
}

impl Default for Snmp {
    fn default() -> Self {
        Snmp {
            agentx_socket: PathBuf::from(DEFAULT_AGENTX_SOCKET),
        }
    }
}

/// Default `management.logging.filter`.
pub const DEFAULT_LOG_FILTER: &str = "info";

/// `management.logging:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Logging {
    /// `RUST_LOG`-style directives: a level (`info`), or levels per
    /// subsystem (`info,routing=debug,control::ports=warn`). The
    /// `RUST_LOG` environment variable, when set, wins.
    pub filter: String,
    /// RFC 5424 syslog output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syslog: Option<Syslog>,
}

impl Default for Logging {
    fn default() -> Self {
        Logging {
            filter: DEFAULT_LOG_FILTER.to_string(),
            syslog: None,
        }
    }
}

/// `management.logging.syslog:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Syslog {
    /// A collector, `address:port` (port 514 when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// How `server` is reached: `udp` (RFC 5426, default) or `tcp`
    /// (RFC 6587 octet counting).
    #[serde(skip_serializing_if = "is_udp")]
    pub transport: SyslogTransport,
    /// Also (or only) to the local syslog socket, `/dev/log`.
    pub local: bool,
    /// Facility name (`local0`..`local7`, `daemon`, `user`, `kern`).
    pub facility: String,
}

/// `management.logging.syslog.transport`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyslogTransport {
    #[default]
    Udp,
    Tcp,
}

fn is_udp(t: &SyslogTransport) -> bool {
    *t == SyslogTransport::Udp
}

impl Default for Syslog {
    fn default() -> Self {
        Syslog {
            server: None,
            transport: SyslogTransport::Udp,
            local: false,
            facility: "local0".to_string(),
        }
    }
}

impl Syslog {
    /// The collector's address (`server`, with port 514 by default).
    pub fn server_addr(&self) -> Result<Option<std::net::SocketAddr>, String> {
        let Some(s) = &self.server else {
            return Ok(None);
        };
        if let Ok(a) = s.parse::<std::net::SocketAddr>() {
            return Ok(Some(a));
        }
        match s.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(Some(std::net::SocketAddr::new(ip, 514))),
            Err(_) => Err(format!(
                "{s:?} is not an address or address:port (e.g. 192.0.2.9 or [2001:db8::9]:514)"
            )),
        }
    }

    /// The logging crate's settings for this section.
    pub fn settings(&self) -> Result<logging::SyslogSettings, String> {
        let addr = self.server_addr()?;
        let tcp = self.transport == SyslogTransport::Tcp;
        Ok(logging::SyslogSettings {
            server: if tcp { None } else { addr },
            tcp: if tcp { addr } else { None },
            local: self
                .local
                .then(|| std::path::PathBuf::from(logging::syslog::DEV_LOG)),
            facility: logging::Facility::parse(&self.facility)?,
            ..logging::SyslogSettings::default()
        })
    }
}

fn default_true() -> bool {
    true
}

fn default_vlan() -> u16 {
    DEFAULT_VLAN
}

/// One entry of `vlans:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VlanConfig {
    /// VLAN id, 1..=4094.
    pub id: u16,
    /// Optional name.
    #[serde(default)]
    pub name: Option<String>,
    /// False floods everything in the VLAN (no learning). Default true.
    #[serde(default = "default_true")]
    pub learning: bool,
    /// Learned addresses beyond this are flooded, never learned.
    #[serde(default)]
    pub mac_limit: Option<u32>,
    /// A routed VLAN interface (SVI) in this VLAN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<VlanRouter>,
    /// Access lists on frames entering (at most one per type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl_in: Vec<String>,
    /// Access lists on frames leaving (at most one per type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl_out: Vec<String>,
}

/// `vlans[].router:` — the VLAN's routed interface (SVI).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VlanRouter {
    /// Interface addresses (IPv4 and IPv6).
    #[serde(default)]
    pub addresses: Vec<IpNet>,
    /// Reverse-path check, default off.
    #[serde(default)]
    pub urpf: UrpfMode,
    /// The interface's MAC (default derived, see docs/routing.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_mac: Option<MacAddr>,
    /// IP MTU; default the smallest MTU of the VLAN's ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// VRRPv3 groups (docs/vrrp.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vrrp: Vec<crate::vrrp::VrrpGroup>,
}

/// A layer-3 interface: a routed port or a VLAN's SVI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L3Interface<'a> {
    /// Port name, or `vlan<ID>` for an SVI.
    pub name: String,
    /// Port id: the port's index, or for an SVI an internal id after the
    /// configured ports (the SVI is the VLAN's port to the router).
    pub port: u16,
    /// `Some(vlan)` for an SVI.
    pub vlan: Option<u16>,
    /// `Some((parent port index, VLAN tag))` for a routed subinterface.
    pub subinterface: Option<(u16, u16)>,
    pub addresses: &'a [IpNet],
    pub urpf: UrpfMode,
    pub router_mac: Option<MacAddr>,
    pub mtu: u32,
    /// 0: the default VRF; k + 1: `vrfs[k]`.
    pub vrf: usize,
    /// VRRP groups (none on subinterfaces).
    pub vrrp: &'a [crate::vrrp::VrrpGroup],
}

impl VlanConfig {
    /// Settings of a VLAN that is not listed (VLAN 1 by default).
    pub fn implicit(id: u16) -> Self {
        VlanConfig {
            id,
            name: None,
            learning: true,
            mac_limit: None,
            router: None,
            acl_in: Vec::new(),
            acl_out: Vec::new(),
        }
    }
}

/// Port mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortMode {
    /// Untagged port in one VLAN.
    #[default]
    Access,
    /// Tagged port carrying several VLANs.
    Trunk,
    /// 802.1ad customer port: everything goes into S-VLAN `vlan`.
    Dot1qTunnel,
    /// Layer-3 port: no VLANs, its own addresses, frames are routed.
    Routed,
}

impl PortMode {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PortMode::Access => "access",
            PortMode::Trunk => "trunk",
            PortMode::Dot1qTunnel => "dot1q-tunnel",
            PortMode::Routed => "routed",
        }
    }
}

impl std::fmt::Display for PortMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `ports:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PortConfig {
    /// Linux interface name (≤ 15 bytes).
    pub name: String,
    /// Port mode, default access.
    #[serde(default)]
    pub mode: PortMode,
    /// Access VLAN / dot1q-tunnel S-VLAN; `None` means 1. Not for trunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// Learn source addresses on this port. Default true.
    #[serde(default = "default_true")]
    pub learning: bool,
    /// Optional per-port learned-address limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_limit: Option<u32>,
    /// Interface MTU set on attach, 68..=9216; default 9216 on layer-2
    /// ports, 1500 on routed ports (see [`PortConfig::effective_mtu`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Trunk only: VLANs carried tagged; `None` = all configured VLANs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_vlans: Option<VlanList>,
    /// Trunk only: VLAN of untagged frames; `None` = VLAN 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_vlan: Option<NativeVlan>,
    /// Trunk only: outer tag TPID; `None` = 0x8100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpid: Option<Tpid>,
    /// Routed only: interface addresses (IPv4 and IPv6, address/length).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<IpNet>,
    /// Routed only: reverse-path check, default off.
    #[serde(default)]
    pub urpf: UrpfMode,
    /// Routed only: the interface's MAC (default derived from the switch
    /// name and port index, see docs/routing.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_mac: Option<MacAddr>,
    /// Access lists on frames entering (at most one per type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl_in: Vec<String>,
    /// Access lists on frames leaving (at most one per type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl_out: Vec<String>,
    /// QoS policy on frames entering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_in: Option<String>,
    /// QoS policy on frames leaving (re-marking only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_out: Option<String>,
    /// Broadcast / multicast / unknown-unicast limits (switched ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storm_control: Option<super::guard::StormControl>,
    /// Take part in loop detection when `loop-detect:` is on. Default true.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub loop_detect: bool,
    /// Port backend; `None`: the switch's `port-backend` (auto).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<PortBackend>,
    /// AF_XDP busy polling; `None`: the switch's `af-xdp-busy-poll`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub af_xdp_busy_poll: Option<BusyPollMode>,
    /// Routed only: routed 802.1Q subinterfaces, one per VLAN tag
    /// (`NAME.VLAN`, docs/vrf.md "Subinterfaces").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subinterfaces: Vec<SubinterfaceConfig>,
    /// Routed only: VRRPv3 groups (docs/vrrp.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vrrp: Vec<crate::vrrp::VrrpGroup>,
}

/// `ports[].subinterfaces[]`: a routed interface for the frames tagged
/// with `vlan` on a routed port. Named `PORT.VLAN`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SubinterfaceConfig {
    /// The 802.1Q VLAN id (1..4094) of its frames on the port.
    pub vlan: u16,
    /// Interface addresses (IPv4 and IPv6).
    #[serde(default)]
    pub addresses: Vec<IpNet>,
    /// Reverse-path check, default off.
    #[serde(default)]
    pub urpf: UrpfMode,
    /// The interface's MAC (default: the port's router MAC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_mac: Option<MacAddr>,
    /// IP MTU; default the port's MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Access lists on packets entering (at most one per type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl_in: Vec<String>,
    /// Access lists on packets leaving (at most one per type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl_out: Vec<String>,
    /// QoS policy on packets entering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_in: Option<String>,
    /// QoS policy on packets leaving (re-marking only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_out: Option<String>,
}

/// One routed subinterface with where it sits: `ports[port]`,
/// `subinterfaces[index]`, port id `id`.
#[derive(Clone, Copy, Debug)]
pub struct Subinterface<'a> {
    pub port: usize,
    pub index: usize,
    pub id: u16,
    pub parent: &'a PortConfig,
    pub sub: &'a SubinterfaceConfig,
}

impl Subinterface<'_> {
    /// `PORT.VLAN`, as `vrfs[].interfaces` and `show` name it.
    pub fn name(&self) -> String {
        format!("{}.{}", self.parent.name, self.sub.vlan)
    }

    /// Field path of its `subinterfaces:` entry.
    pub fn path(&self) -> String {
        format!("ports[{}].subinterfaces[{}]", self.port, self.index)
    }
}

fn is_true(b: &bool) -> bool {
    *b
}

impl PortConfig {
    /// A port with all defaults (access in VLAN 1).
    pub fn new(name: impl Into<String>) -> Self {
        PortConfig {
            name: name.into(),
            mode: PortMode::Access,
            vlan: None,
            learning: true,
            mac_limit: None,
            mtu: None,
            allowed_vlans: None,
            native_vlan: None,
            tpid: None,
            addresses: Vec::new(),
            urpf: UrpfMode::Off,
            router_mac: None,
            acl_in: Vec::new(),
            acl_out: Vec::new(),
            policy_in: None,
            policy_out: None,
            storm_control: None,
            loop_detect: true,
            backend: None,
            af_xdp_busy_poll: None,
            subinterfaces: Vec::new(),
            vrrp: Vec::new(),
        }
    }

    /// The MTU Lanyard sets on the interface: `mtu`, else 1500 on a routed
    /// port and 9216 on a layer-2 port.
    pub fn effective_mtu(&self) -> u32 {
        self.mtu.unwrap_or(match self.mode {
            PortMode::Routed => DEFAULT_ROUTED_MTU,
            _ => DEFAULT_MTU,
        })
    }

    /// Access VLAN or dot1q-tunnel S-VLAN (default 1); `None` on trunks.
    pub fn effective_vlan(&self) -> Option<u16> {
        match self.mode {
            PortMode::Trunk | PortMode::Routed => None,
            PortMode::Access | PortMode::Dot1qTunnel => Some(self.vlan.unwrap_or(DEFAULT_VLAN)),
        }
    }

    /// Trunk native VLAN (default VLAN 1); `None` on other modes.
    pub fn effective_native_vlan(&self) -> Option<NativeVlan> {
        match self.mode {
            PortMode::Trunk => Some(self.native_vlan.unwrap_or_default()),
            _ => None,
        }
    }

    /// Trunk TPID (default 0x8100); `None` on other modes.
    pub fn effective_tpid(&self) -> Option<Tpid> {
        match self.mode {
            PortMode::Trunk => Some(self.tpid.unwrap_or_default()),
            _ => None,
        }
    }
}

/// One entry of `static-macs:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StaticMac {
    /// Unicast MAC address.
    pub mac: MacAddr,
    /// VLAN, default 1.
    #[serde(default = "default_vlan")]
    pub vlan: u16,
    /// Port name (must be in `ports`).
    pub port: String,
}

impl Config {
    /// Index of the port named `name` in `ports`.
    pub fn port_index(&self, name: &str) -> Option<usize> {
        self.ports.iter().position(|p| p.name == name)
    }

    /// The ports a selection names, in port order: comma-separated items,
    /// each a port name or a range of names that differ in a trailing
    /// number (`sw1-48`, `sw1-sw48`, `eth0/1-24`), as a switch's
    /// `interface range` takes them. An item that names no port is an
    /// error.
    pub fn select_ports(&self, spec: &str) -> Result<Vec<usize>, String> {
        let mut chosen = vec![false; self.ports.len()];
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if let Some(i) = self.port_index(item) {
                chosen[i] = true;
                continue;
            }
            let range = split_range(item)
                .ok_or_else(|| format!("no port {item:?} (a name, or a range like sw1-48)"))?;
            let mut any = false;
            for (i, p) in self.ports.iter().enumerate() {
                if let Some(n) = p
                    .name
                    .strip_prefix(range.0)
                    .and_then(|n| n.parse::<u32>().ok())
                {
                    if (range.1..=range.2).contains(&n) && p.name.len() > range.0.len() {
                        chosen[i] = true;
                        any = true;
                    }
                }
            }
            if !any {
                return Err(format!("no port in {item:?}"));
            }
        }
        Ok((0..chosen.len()).filter(|i| chosen[*i]).collect())
    }

    /// Every layer-3 interface: routed ports (in port order), then SVIs
    /// (in `vlans` order), whose port ids follow the configured ports.
    pub fn l3_interfaces(&self) -> Vec<L3Interface<'_>> {
        let mut out: Vec<L3Interface> = self
            .routed_ports()
            .map(|(i, p)| L3Interface {
                name: p.name.clone(),
                port: i as u16,
                vlan: None,
                subinterface: None,
                addresses: &p.addresses,
                urpf: p.urpf,
                router_mac: p.router_mac,
                mtu: p.effective_mtu(),
                vrf: self.vrf_of_interface(&p.name),
                vrrp: &p.vrrp,
            })
            .collect();
        for (k, (v, r)) in self.svis().enumerate() {
            let members = self
                .ports
                .iter()
                .enumerate()
                .filter(|(i, _)| self.port_vlans(*i).contains(v.id));
            let mtu = members
                .map(|(_, p)| p.effective_mtu())
                .chain(std::iter::once(DEFAULT_SVI_MTU))
                .min()
                .unwrap_or(DEFAULT_SVI_MTU);
            out.push(L3Interface {
                name: format!("vlan{}", v.id),
                port: (self.ports.len() + k) as u16,
                vlan: Some(v.id),
                subinterface: None,
                addresses: &r.addresses,
                urpf: r.urpf,
                router_mac: r.router_mac,
                mtu: r.mtu.unwrap_or(mtu),
                vrf: self.vrf_of_interface(&format!("vlan{}", v.id)),
                vrrp: &r.vrrp,
            });
        }
        for s in self.subinterfaces() {
            let name = s.name();
            out.push(L3Interface {
                vrf: self.vrf_of_interface(&name),
                name,
                port: s.id,
                vlan: None,
                subinterface: Some((s.port as u16, s.sub.vlan)),
                addresses: &s.sub.addresses,
                urpf: s.sub.urpf,
                router_mac: s.sub.router_mac.or(s.parent.router_mac),
                mtu: s
                    .sub
                    .mtu
                    .unwrap_or(s.parent.effective_mtu().min(MAX_L3_MTU)),
                vrrp: &[],
            });
        }
        out
    }

    /// Names of the layer-3 interfaces (routed ports, then `vlanN`, then
    /// subinterfaces `PORT.VLAN`).
    pub fn l3_interface_names(&self) -> Vec<String> {
        self.routed_ports()
            .map(|(_, p)| p.name.clone())
            .chain(self.svis().map(|(v, _)| format!("vlan{}", v.id)))
            .chain(self.subinterfaces().map(|s| s.name()))
            .collect()
    }

    /// Every routed subinterface, in port order then list order. Their
    /// port ids follow the port channels' (docs/vrf.md).
    pub fn subinterfaces(&self) -> impl Iterator<Item = Subinterface<'_>> {
        let first = self.ports.len() + self.svis().count() + self.port_channels.len();
        self.ports
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                p.subinterfaces
                    .iter()
                    .enumerate()
                    .map(move |(j, s)| (i, p, j, s))
            })
            .enumerate()
            .map(move |(k, (port, parent, index, sub))| Subinterface {
                port,
                index,
                id: (first + k) as u16,
                parent,
                sub,
            })
    }

    /// The VRF of layer-3 interface `name`: 0 (default) or k + 1 for
    /// `vrfs[k]` (the first VRF listing it; validation refuses a second).
    pub fn vrf_of_interface(&self, name: &str) -> usize {
        self.vrfs
            .iter()
            .position(|v| v.interfaces.iter().any(|i| i == name))
            .map_or(0, |k| k + 1)
    }

    /// The VRF index of a `vrf:` reference: 0 for none, k + 1 for
    /// `vrfs[k]`, `None` for an unknown name.
    pub fn vrf_index(&self, name: Option<&str>) -> Option<usize> {
        match name {
            None => Some(0),
            Some(n) => self.vrfs.iter().position(|v| v.name == n).map(|k| k + 1),
        }
    }

    /// VLANs with an SVI, in `vlans` order.
    pub fn svis(&self) -> impl Iterator<Item = (&VlanConfig, &VlanRouter)> {
        self.vlans
            .iter()
            .filter_map(|v| v.router.as_ref().map(|r| (v, r)))
    }

    /// Port ids in use: the ports, then one per VLAN interface, then one
    /// per port channel. Per-port tables are this long (docs/scale.md).
    pub fn port_ids(&self) -> usize {
        self.ports.len()
            + self.svis().count()
            + self.port_channels.len()
            + self
                .ports
                .iter()
                .map(|p| p.subinterfaces.len())
                .sum::<usize>()
    }

    /// Port id of port channel `k`: after the ports and the SVIs.
    pub fn channel_port_id(&self, k: usize) -> u16 {
        (self.ports.len() + self.svis().count() + k) as u16
    }

    /// The port channel the virtual-switch peer link is (an aggregated
    /// peer link: `peer-link` names one port channel), if any.
    pub fn peer_link_channel(&self) -> Option<usize> {
        let vs = self.virtual_switch.as_ref()?;
        match vs.peer_link.as_slice() {
            [one] => self.port_channels.iter().position(|c| &c.name == one),
            _ => None,
        }
    }

    /// The physical ports of the virtual-switch peer link, in order: the
    /// ports `peer-link` lists, or the members of the port channel it
    /// names.
    pub fn peer_link_ports(&self) -> Vec<String> {
        match (self.peer_link_channel(), &self.virtual_switch) {
            (Some(k), _) => self.port_channels[k].members.clone(),
            (None, Some(vs)) => vs.peer_link.clone(),
            (None, None) => Vec::new(),
        }
    }

    /// What `show` calls port id `id`: a port's name, `vlanN` for a VLAN
    /// interface (the router's port in its VLAN), a port channel's name,
    /// `port N` for anything else.
    pub fn port_label(&self, id: u16) -> String {
        let i = id as usize;
        if let Some(p) = self.ports.get(i) {
            return p.name.clone();
        }
        let k = i - self.ports.len();
        if let Some((v, _)) = self.svis().nth(k) {
            return format!("vlan{}", v.id);
        }
        let k = k - self.svis().count();
        if let Some(c) = self.port_channels.get(k) {
            return c.name.clone();
        }
        match self.subinterfaces().find(|s| s.id == id) {
            Some(s) => s.name(),
            None => format!("port {id}"),
        }
    }

    /// The backend port `index` asks for: its own `backend`, else the
    /// switch's `port-backend`.
    pub fn backend_of(&self, index: usize) -> PortBackend {
        self.ports
            .get(index)
            .and_then(|p| p.backend)
            .unwrap_or(self.switch.port_backend)
    }

    /// Whether port `index` busy polls on AF_XDP: its own
    /// `af-xdp-busy-poll`, else the switch's.
    pub fn busy_poll_of(&self, index: usize) -> BusyPollMode {
        self.ports
            .get(index)
            .and_then(|p| p.af_xdp_busy_poll)
            .unwrap_or(self.switch.af_xdp_busy_poll)
    }

    /// The port channel port `index` is a member of, if any.
    pub fn channel_of(&self, index: usize) -> Option<usize> {
        let name = &self.ports.get(index)?.name;
        self.port_channels
            .iter()
            .position(|c| c.members.contains(name))
    }

    /// Indices of the routed ports.
    pub fn routed_ports(&self) -> impl Iterator<Item = (usize, &PortConfig)> {
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.mode == PortMode::Routed)
    }

    /// The port named `name`.
    pub fn port(&self, name: &str) -> Option<&PortConfig> {
        self.ports.iter().find(|p| p.name == name)
    }

    /// The `vlans:` entry for `id` (first one if duplicated).
    pub fn vlan_config(&self, id: u16) -> Option<&VlanConfig> {
        self.vlans.iter().find(|v| v.id == id)
    }

    /// True if VLAN `id` exists: listed in `vlans`, or VLAN 1.
    pub fn vlan_exists(&self, id: u16) -> bool {
        id == DEFAULT_VLAN || self.vlan_config(id).is_some()
    }

    /// Settings of VLAN `id` with defaults applied (VLAN 1 need not be
    /// listed); `None` if the VLAN does not exist.
    pub fn vlan_settings(&self, id: u16) -> Option<VlanConfig> {
        match self.vlan_config(id) {
            Some(v) => Some(v.clone()),
            None if id == DEFAULT_VLAN => Some(VlanConfig::implicit(id)),
            None => None,
        }
    }

    /// All existing VLAN ids (VLAN 1 plus the listed ones), sorted.
    pub fn vlan_ids(&self) -> VlanList {
        VlanList::from_ids(std::iter::once(DEFAULT_VLAN).chain(self.vlans.iter().map(|v| v.id)))
    }

    /// The VLANs port `index` carries:
    /// - access / dot1q-tunnel: its `vlan` (default 1);
    /// - trunk: `allowed-vlans` (default: every existing VLAN) plus the
    ///   native VLAN, restricted to existing VLANs.
    ///
    /// Empty if `index` is out of range.
    pub fn port_vlans(&self, index: usize) -> VlanList {
        let Some(port) = self.ports.get(index) else {
            return VlanList::new();
        };
        let existing = self.vlan_ids();
        match port.mode {
            PortMode::Routed => VlanList::new(),
            PortMode::Access | PortMode::Dot1qTunnel => {
                let id = port.vlan.unwrap_or(DEFAULT_VLAN);
                VlanList::from_ids([id]).intersection(&existing)
            }
            PortMode::Trunk => {
                let mut set = match &port.allowed_vlans {
                    Some(list) => list.intersection(&existing),
                    None => existing.clone(),
                };
                if let Some(NativeVlan::Vlan(id)) = port.effective_native_vlan() {
                    if existing.contains(id) {
                        set.insert(id);
                    }
                }
                set
            }
        }
    }

    /// For every port (same order as `ports`) the VLANs it carries; see
    /// [`Config::port_vlans`].
    pub fn effective_port_vlans(&self) -> Vec<VlanList> {
        (0..self.ports.len()).map(|i| self.port_vlans(i)).collect()
    }
}

impl Config {
    /// True if port `index` is a mirror session's destination (a monitor
    /// port: in no VLAN, forwards only copies).
    pub fn is_monitor_port(&self, index: usize) -> bool {
        self.ports
            .get(index)
            .is_some_and(|p| self.mirror_sessions.iter().any(|s| s.destination == p.name))
    }

    /// True if port `index` is an attachment circuit's port (in no VLAN:
    /// the worker takes its frames before the layer-2 stage).
    pub fn is_pseudowire_port(&self, index: usize) -> bool {
        self.ports
            .get(index)
            .is_some_and(|p| self.pseudowires.iter().any(|w| w.port == p.name))
    }

    /// True if port `index` is in a `service-control` inline pair (in no
    /// VLAN: its frames go to its pair's other port, nowhere else).
    pub fn is_inline_port(&self, index: usize) -> bool {
        let (Some(p), Some(sc)) = (self.ports.get(index), &self.service_control) else {
            return false;
        };
        sc.inline
            .iter()
            .any(|i| i.subscriber_port == p.name || i.network_port == p.name)
    }
}

impl Config {
    /// The ports spanning tree runs on: (port index, settings), in port
    /// order. Empty without a `spanning-tree:` section.
    pub fn stp_ports(&self) -> Vec<(usize, super::stp::StpPort)> {
        let Some(st) = &self.spanning_tree else {
            return Vec::new();
        };
        let excluded = |name: &str| {
            self.port_channels
                .iter()
                .any(|c| c.members.iter().any(|m| m == name))
                || self
                    .backup_pairs
                    .iter()
                    .any(|b| b.primary == name || b.backup == name)
                || self.mirror_sessions.iter().any(|s| s.destination == name)
                // An attachment circuit carries the customer's BPDUs
                // through its pseudowire; it sends none of its own.
                || self.pseudowires.iter().any(|w| w.port == name)
        };
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.mode != PortMode::Routed && !excluded(&p.name))
            .filter_map(|(i, p)| {
                let s = st
                    .ports
                    .iter()
                    .find(|s| s.name == p.name)
                    .cloned()
                    .unwrap_or_else(|| super::stp::StpPort::defaults(&p.name));
                s.enabled.then_some((i, s))
            })
            .collect()
    }
}
