//! Plan files (YAML): which DUTs, which tests. See `docs/lab.md`.

use crate::bwspec::{
    frame_bits, BwShare, Controllers, LIMIT_RANGE, MAX_LIGHT, MAX_PORT_FPS, MAX_SERVICES, SLOTS,
    SUBSCRIBERS,
};
use crate::sig::NewFlows;
use crate::subspec::{Provision, DEFAULT_RATE, DEFAULT_SAMPLE, MAX_RATE, MAX_SAMPLE};
use crate::LabError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A whole plan.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Plan {
    /// Plan name (reports).
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// Values every test inherits unless it sets its own.
    #[serde(default)]
    pub defaults: Defaults,
    /// Run every test and frame size on each DUT in turn, all DUTs up at
    /// once, instead of one DUT after the other (default false): on a
    /// shared machine, load that comes and goes then hits all DUTs alike.
    #[serde(default)]
    pub interleave: bool,
    /// Where the tester and the DUTs run (`split`, the default: tester on
    /// CPU 0, each DUT — processes, its ports' receive work — on the
    /// others; `shared`: nothing pinned). See `docs/lab.md`.
    #[serde(default)]
    pub cpu_plan: crate::cpuplan::CpuPlanSpec,
    /// Devices under test, run back to back in this order.
    pub duts: Vec<DutSpec>,
    /// Tests, run in this order on each DUT.
    pub tests: Vec<TestSpec>,
    /// The YAML text the plan was parsed from (reports show it).
    #[serde(skip)]
    pub source: Option<String>,
}

/// Per-test values inherited from the plan.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Defaults {
    /// Seconds per trial (default 2).
    pub trial_duration: Option<f64>,
    /// Seconds to wait for in-flight frames after a trial (default 1).
    pub drain: Option<f64>,
    /// Seconds to wait after the learning phase (default 1).
    pub learn_wait: Option<f64>,
    /// Frame sizes (default 64, 128, 256, 512, 1024, 1280, 1518).
    pub frame_sizes: Option<Vec<FrameSizeSpec>>,
    /// Search parameters.
    pub search: Option<SearchSpec>,
}

/// DUT drivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Driver {
    /// A plain veth pair between two tester ports: the test-bed ceiling.
    Wire,
    /// A veth pair with a `tbf` rate limit: a deliberately lossy DUT.
    Lossy,
    /// Linux bridge `br0` in the DUT namespace.
    LinuxBridge,
    /// Linux IPv4 forwarding between the DUT ports.
    LinuxRouter,
    /// Open vSwitch, userspace (netdev) datapath, private daemons.
    Ovs,
    /// Lanyard itself.
    Lanyard,
    /// Two Lanyards as one virtual switch (docs/virtual-switch.md), each in
    /// its own namespace, behind a Lanyard LACP partner whose port channels
    /// toward tester ports 1 and 2 have two members on each node.
    LanyardPair,
    /// The classic design beside the pair: two distribution Lanyards with
    /// RSTP (A root, B backup root) and two access Lanyards, each with one
    /// uplink to each (`lanyard_rstp.rs`).
    LanyardRstp,
    /// Two Lanyard provider edges joined by a routed uplink (MPLS between
    /// them: the kernel has none): tester port 1 on PE1, port 2 on PE2,
    /// carried by static pseudowires or, as the baseline on the same bed,
    /// plain layer-2 switching (`lanyard_pe.rs`).
    LanyardPe,
}

/// First VLAN id of a test's `vlans: N` tags (VLANs 100..100+N-1).
pub const FIRST_VLAN: u16 = 100;

/// How a `lanyard-pe` DUT carries the tester's frames between its PEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeMode {
    /// Ethernet pseudowires (RFC 4448) with static labels over the uplink.
    Pseudowire,
    /// Plain layer-2 switching: the tester ports and the uplink in the
    /// same VLANs on both PEs (the uplink a trunk): the baseline.
    L2,
    /// Plain IPv4 / IPv6 routing in the global table over the uplink (no
    /// labels): the tester ports routed, untagged frames; the layer-3
    /// baseline of `l3vpn`.
    L3,
    /// Static L3VPN (docs/vrf.md "Static VPN routes"): one VRF per VLAN of
    /// the test's `vlans: N`, each on a routed 802.1Q subinterface of the
    /// tester port, the same customer subnets in every VRF, static VPN
    /// routes with a VPN label per VRF toward the other PE.
    L3vpn,
}

impl PeMode {
    /// Name as written in plans.
    pub fn as_str(self) -> &'static str {
        match self {
            PeMode::Pseudowire => "pseudowire",
            PeMode::L2 => "l2",
            PeMode::L3 => "l3",
            PeMode::L3vpn => "l3vpn",
        }
    }

    /// The PEs route the tester's frames (two routers on the path).
    pub fn routed(self) -> bool {
        matches!(self, PeMode::L3 | PeMode::L3vpn)
    }
}

/// Attachment circuits of a `lanyard-pe` DUT in pseudowire mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Circuits {
    /// Type 5: the whole tester port, one pseudowire.
    Port,
    /// Type 4: one pseudowire per VLAN of the test's `vlans`.
    Vlan,
}

impl Driver {
    /// Name as written in plans.
    pub fn as_str(&self) -> &'static str {
        match self {
            Driver::Wire => "wire",
            Driver::Lossy => "lossy",
            Driver::LinuxBridge => "linux-bridge",
            Driver::LinuxRouter => "linux-router",
            Driver::Ovs => "ovs",
            Driver::Lanyard => "lanyard",
            Driver::LanyardPair => "lanyard-pair",
            Driver::LanyardRstp => "lanyard-rstp",
            Driver::LanyardPe => "lanyard-pe",
        }
    }
}

/// One DUT of a plan.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DutSpec {
    /// Column name in reports.
    pub name: String,
    /// Driver.
    pub driver: Driver,
    /// MAC learning on the DUT ports (default true).
    #[serde(default)]
    pub learning: Option<bool>,
    /// Learned-address limit (lanyard: per VLAN; ovs: mac-table-size).
    #[serde(default)]
    pub mac_limit: Option<u32>,
    /// MAC aging in seconds (default: the DUT's default).
    #[serde(default)]
    pub mac_aging: Option<u32>,
    /// MAC table size (lanyard `mac-table-size`, ovs `mac-table-size`).
    #[serde(default)]
    pub mac_table_size: Option<u32>,
    /// ovs: `auto` (try afxdp, fall back), `afxdp` or `af-packet`;
    /// lanyard: `auto`, `af-xdp` or `af-packet` (`switch.port-backend`),
    /// `af-packet-block` (AF_PACKET, `af-packet-ring: block`) or
    /// `af-xdp-shared-umem` (AF_XDP, `af-xdp-shared-umem: on`).
    #[serde(default)]
    pub port_type: Option<String>,
    /// lanyard: forwarding threads.
    #[serde(default)]
    pub workers: Option<u32>,
    /// lanyard: access VLAN of the ports (default 10).
    #[serde(default)]
    pub vlan: Option<u16>,
    /// lanyard: binary to run instead of the one from the CLI.
    #[serde(default)]
    pub binary: Option<PathBuf>,
    /// linux-router: static neighbour entries for the tester hosts (default
    /// true); false = the router resolves them by ARP, answered by the
    /// tester's emulated hosts.
    #[serde(default)]
    pub static_neighbours: Option<bool>,
    /// lossy: tbf rate in frames/s of 64-byte frames is not a thing; this
    /// is the tbf `rate` in kbit/s.
    #[serde(default)]
    pub rate_kbit: Option<u64>,
    /// IPv4 routes to install (linux-router, lanyard; see `routes.rs`) and
    /// to send layer-3 test frames to; a test's `routes` overrides it.
    #[serde(default)]
    pub routes: Option<u32>,
    /// IPv6 routes, likewise.
    #[serde(default)]
    pub routes6: Option<u32>,
    /// lanyard: run with the three services on (issue 5): a 10,000-line
    /// ACL in and out on every port, a 500-line QoS policy re-marking
    /// every packet, flow accounting with export. See `dut::services_yaml`.
    #[serde(default)]
    pub services: Option<bool>,
    /// linux-bridge, convergence tests: how `sw3` backs up `sw2` — `script`
    /// (sw3 disabled, a shell script on `ip monitor link` sets it forwarding
    /// when sw2 goes down) or `backup-port` (the kernel's `backup_port`).
    /// Without it sw3 is an ordinary bridge port.
    #[serde(default)]
    pub failover: Option<Failover>,
    /// lanyard, convergence tests: the backup pair's `preempt` (default false).
    #[serde(default)]
    pub preempt: Option<bool>,
    /// lanyard, convergence tests: the backup pair's `mac-move-update`
    /// (default true).
    #[serde(default)]
    pub mac_move_update: Option<bool>,
    /// Multicast tests (linux-bridge, lanyard): the DUT's own IGMP querier
    /// (default true: a snooping Linux bridge forwards only to joined
    /// ports while it knows of a querier, otherwise it floods).
    #[serde(default)]
    pub igmp_querier: Option<bool>,
    /// Multicast tests (linux-bridge, lanyard): leave a group at once on a
    /// leave instead of querying the port first (default false).
    #[serde(default)]
    pub fast_leave: Option<bool>,
    /// lanyard: run as a bump in the wire (docs/inline.md): sw1 and sw2
    /// an inline pair (`service-control.inline`), the engine on
    /// (`engine`) or bypassed (`bypass`: `lanyard bypass on` after start).
    #[serde(default)]
    pub inline: Option<InlineMode>,
    /// lanyard with `inline:`: the engine's flow-table capacity
    /// (`service-control.flows`, default 65,536; 128 bytes each). New-flow
    /// tests need room for every flow of a trial.
    #[serde(default)]
    pub inline_flows: Option<u32>,
    /// linux-router: connection tracking on every forwarded packet (an
    /// nftables forward chain counting `ct state new`), the kernel's
    /// counterpart of a flow-keyed engine for new-flow tests.
    #[serde(default)]
    pub conntrack: Option<bool>,
    /// lanyard-pe: pseudowires (default) or plain layer-2 switching.
    #[serde(default)]
    pub pe_mode: Option<PeMode>,
    /// lanyard-pe with pseudowires: whole-port (type 5, default) or
    /// per-VLAN (type 4) attachment circuits.
    #[serde(default)]
    pub circuits: Option<Circuits>,
    /// lanyard-pe: routed uplinks between the PEs, 1 (default) or 2 (the
    /// second a fast-reroute bypass for the first, `mpls.fast-reroute`).
    #[serde(default)]
    pub uplinks: Option<u32>,
}

/// How a lanyard DUT with an inline pair runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InlineMode {
    /// Flows, classification and accounting on every frame.
    Engine,
    /// `lanyard bypass on`: frames pass between the pair, engine skipped.
    Bypass,
}

impl InlineMode {
    /// Name as written in plans.
    pub fn as_str(&self) -> &'static str {
        match self {
            InlineMode::Engine => "engine",
            InlineMode::Bypass => "bypass",
        }
    }
}

/// A command run in the DUT namespace `at` seconds into a trial
/// (`type: disruption`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TimedCommand {
    /// Seconds after the trial's first frame.
    pub at: f64,
    /// `sh -c` command (environment as for convergence commands).
    pub run: String,
}

/// How a Linux bridge DUT fails over from `sw2` to `sw3` (convergence tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failover {
    /// sw3 `state 0` (disabled); a script in the DUT namespace watching
    /// `ip monitor link` sets it forwarding (`state 3`) when sw2 goes down
    /// and disabled again when sw2 comes back.
    Script,
    /// `bridge link set dev sw2 backup_port sw3`: the kernel redirects known
    /// unicast for sw2 to sw3 while sw2 has no carrier (sw3 forwards
    /// normally otherwise).
    BackupPort,
}

impl Failover {
    /// Name as written in plans.
    pub fn as_str(&self) -> &'static str {
        match self {
            Failover::Script => "script",
            Failover::BackupPort => "backup-port",
        }
    }
}

impl DutSpec {
    /// A DUT with the driver's defaults (no overrides).
    pub fn new(name: &str, driver: Driver) -> DutSpec {
        DutSpec {
            name: name.into(),
            driver,
            learning: None,
            mac_limit: None,
            mac_aging: None,
            mac_table_size: None,
            port_type: None,
            workers: None,
            vlan: None,
            binary: None,
            static_neighbours: None,
            rate_kbit: None,
            routes: None,
            routes6: None,
            services: None,
            failover: None,
            preempt: None,
            mac_move_update: None,
            igmp_querier: None,
            fast_leave: None,
            inline: None,
            inline_flows: None,
            conntrack: None,
            pe_mode: None,
            circuits: None,
            uplinks: None,
        }
    }
}

/// A frame size: bytes with FCS, or `imix` (64/594/1518 at 7:4:1).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum FrameSizeSpec {
    /// Fixed size.
    Bytes(u16),
    /// Named mix.
    Name(String),
}

/// A resolved frame-size entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FrameSize {
    /// Label in reports ("64", "imix").
    pub label: String,
    /// Sizes cycled per frame.
    pub sizes: Vec<u16>,
}

impl FrameSize {
    /// Average size in bytes.
    pub fn average(&self) -> f64 {
        self.sizes.iter().map(|&s| s as f64).sum::<f64>() / self.sizes.len() as f64
    }
}

/// The simple IMIX: 64/594/1518 at 7:4:1, interleaved.
pub fn imix() -> Vec<u16> {
    vec![64, 594, 64, 64, 594, 64, 1518, 64, 594, 64, 64, 594]
}

/// Test types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestKind {
    /// RFC 2544 throughput (bisection) plus latency at that rate.
    Throughput,
    /// Latency at a fixed rate.
    Latency,
    /// RFC 2544 back-to-back: longest burst at full speed without loss.
    BackToBack,
    /// RFC 2544 frame-loss rate at steps of the maximum offered rate.
    FrameLoss,
    /// RFC 2889 fully meshed throughput.
    FullMesh,
    /// RFC 2889 address caching capacity.
    AddressCapacity,
    /// RFC 2889 address learning rate.
    LearningRate,
    /// Learning disabled / MAC limit: exact flood counts.
    LearningCheck,
    /// RFC 2889 congestion control / head-of-line blocking.
    Holb,
    /// Failover convergence: constant-rate traffic, an event (link down,
    /// process kill, command), convergence time = lost frames / offered rate.
    Convergence,
    /// RFC 3918 multicast: IGMP joins from receiver ports, traffic from
    /// source ports to the groups, throughput (bisection), per-receiver
    /// loss / latency / leaks, optionally join and leave delay.
    Multicast,
    /// Control-plane policing: a flood of multicast to 224.0.0.1 toward
    /// the DUT at line rate (or `rate`) while the tester pings the DUT's
    /// address on the same port; what the DUT kept (ping answered, its
    /// policing counters). See `copp.rs`.
    Copp,
    /// Constant-rate traffic from port 1 to port 2 while `commands` run
    /// in the DUT namespace at set times (bypass on / off, a reload):
    /// frames lost and outage = lost / rate. See `disruption.rs`.
    Disruption,
    /// Inline engine bandwidth control: services with controllers, three
    /// subscribers (gold, silver, bronze) each offering more than its
    /// share; each one's rate per service over time, the split by
    /// package weight and each service's total against its limit. See
    /// `bwshare.rs`.
    BandwidthShare,
    /// Inline engine subscriber scale: N subscribers provisioned in one
    /// streamed bulk load (time, rate, per-package counts, the daemon's
    /// memory), then traffic from a sample of them spread over the table
    /// and each sampled subscriber's counters checked against what was
    /// sent. See `subscale.rs`.
    Subscribers,
}

impl TestKind {
    /// A rate, latency or loss test between a pair of ports (the kinds
    /// the two-node DUTs and tagged frames take).
    pub fn is_port_pair_rate(self) -> bool {
        matches!(
            self,
            TestKind::Throughput
                | TestKind::Latency
                | TestKind::BackToBack
                | TestKind::FrameLoss
                | TestKind::Disruption
        )
    }
}

/// A rate in a plan: frames/s, or (convergence) `max` / `"N%"` of the
/// highest rate the DUT forwards without loss.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum RateSpec {
    /// Frames/s.
    Fps(f64),
    /// `max` or `"N%"`.
    Word(String),
}

/// Convergence event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Event {
    /// `ip link set <primary> down` (DUT side `sw2`, or tester side `t2`).
    LinkDown,
    /// Kill the DUT process (SIGKILL); the lab, as the DUT's supervisor,
    /// starts it again at once.
    Kill,
    /// `sh -c <event-command>` in the DUT namespace.
    Command,
    /// No event: steady-state baseline (should lose nothing).
    None,
}

impl Event {
    /// Name as written in plans.
    pub fn as_str(&self) -> &'static str {
        match self {
            Event::LinkDown => "link-down",
            Event::Kill => "kill",
            Event::Command => "command",
            Event::None => "none",
        }
    }
}

/// Which end of the primary link a `link-down` event takes down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventSide {
    /// The DUT's `sw2` (in the DUT namespace).
    #[default]
    Dut,
    /// The tester's `t2`: the DUT sees its carrier go away.
    Tester,
}

/// Convergence topologies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConvTopology {
    /// T1 - sw1 (source), T2 - sw2 (primary), T3 - sw3 (backup).
    #[default]
    BackupPair,
}

/// A convergence test's resolved parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Convergence {
    /// Topology.
    pub topology: ConvTopology,
    /// The event.
    pub event: Event,
    /// Link-down side.
    pub event_side: EventSide,
    /// Shell command of `event: command`.
    pub event_command: Option<String>,
    /// Shell command run in the DUT namespace after every trial's restore.
    pub restore_command: Option<String>,
    /// Seconds of traffic before the event.
    pub event_at: f64,
    /// Seconds of traffic after the event (counted from its end).
    pub after_event: f64,
    /// Destination-MAC groups (streams) the addresses are split into.
    pub streams: u32,
    /// Goal in milliseconds (report only).
    pub goal_ms: f64,
    /// Seconds to wait for the DUT to be back between trials.
    pub restore_timeout: f64,
    /// `rate: max` / `"N%"`: fraction of the DUT's measured maximum.
    pub max_fraction: Option<f64>,
}

/// IP version of layer-3 test frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// IPv4/UDP (198.18.0.0/15).
    #[default]
    Ipv4,
    /// IPv6/UDP (2001:2::/48); frames of at least 84 bytes.
    Ipv6,
}

/// Where a layer-3 test's routes come from (`routes-from`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutesFrom {
    /// Installed by the lab (lanyard `routing.static-routes`, Linux
    /// `ip -batch`).
    #[default]
    Static,
    /// Learned by OSPF from injector routers on the receiving tester
    /// ports (FRR on both sides, `crate::ospf`).
    Ospf,
}

/// Search parameters (RFC 2544 bisection).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SearchSpec {
    /// Stop when `(hi − lo) / hi` is at most this (default 0.01).
    pub resolution: Option<f64>,
    /// Most trials, the first (unpaced) one included (default 12).
    pub max_trials: Option<u32>,
    /// Loss ratio still counted as a pass (default 0).
    pub loss_tolerance: Option<f64>,
    /// Run a confirmation trial at the result (default false).
    pub confirm: Option<bool>,
    /// A trial whose median latency exceeds this many milliseconds fails
    /// even without loss (queues building up; for short trials). Default none.
    pub latency_limit_ms: Option<f64>,
}

/// One test of a plan.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TestSpec {
    /// Test type.
    #[serde(rename = "type")]
    pub kind: TestKind,
    /// Name in reports (default: the type).
    #[serde(default)]
    pub name: Option<String>,
    /// The published figure this test reproduces (`plans/reports/`):
    /// printed beside the result with the scale difference.
    #[serde(default)]
    pub reference: Option<Reference>,
    /// Frame sizes.
    #[serde(default)]
    pub frame_sizes: Option<Vec<FrameSizeSpec>>,
    /// 2 (Ethernet, EtherType 0x88B5) or 3 (UDP over IP). Default 2, or 3
    /// on linux-router; `family: ipv6` implies 3.
    #[serde(default)]
    pub layer: Option<u8>,
    /// Layer 3: `ipv4` (default) or `ipv6`.
    #[serde(default)]
    pub family: Option<Family>,
    /// IPv4 routes on the DUT for this test (overrides the DUT's `routes`);
    /// layer-3 frames go to addresses sampled across them.
    #[serde(default)]
    pub routes: Option<u32>,
    /// IPv6 routes, likewise.
    #[serde(default)]
    pub routes6: Option<u32>,
    /// `static` (default) or `ospf`: the DUT learns the test's `routes`
    /// from OSPF routers on the receiving tester ports (layer-3
    /// throughput and latency tests; lanyard and linux-router).
    #[serde(default)]
    pub routes_from: Option<RoutesFrom>,
    /// Run on these DUTs only (names from `duts`); the others report `n/a`.
    #[serde(default)]
    pub duts: Option<Vec<String>>,
    /// Both directions of a port pair (default false).
    #[serde(default)]
    pub bidirectional: Option<bool>,
    /// Ports (full-mesh; default 4).
    #[serde(default)]
    pub ports: Option<usize>,
    /// full-mesh pattern: `full` (default), `partial` (backbone: each half
    /// to the other half only) or `groups` (full meshes of `group-size`).
    #[serde(default)]
    pub mesh: Option<String>,
    /// Ports per group with `mesh: groups`.
    #[serde(default)]
    pub group_size: Option<usize>,
    /// Seconds per trial.
    #[serde(default)]
    pub trial_duration: Option<f64>,
    /// Seconds to drain.
    #[serde(default)]
    pub drain: Option<f64>,
    /// Seconds after learning.
    #[serde(default)]
    pub learn_wait: Option<f64>,
    /// Repetitions (latency, learning-check; default 1).
    #[serde(default)]
    pub trials: Option<u32>,
    /// Frames/s per sending port (latency, holb, learning-rate upper bound,
    /// convergence); convergence also takes `max` or `"N%"` (of max).
    #[serde(default)]
    pub rate: Option<RateSpec>,
    /// Search parameters.
    #[serde(default)]
    pub search: Option<SearchSpec>,
    /// Addresses (capacity: the count to check, or search maximum).
    #[serde(default)]
    pub addresses: Option<u32>,
    /// Capacity: binary-search the count up to `addresses` (default false).
    #[serde(default)]
    pub search_addresses: Option<bool>,
    /// Frames/s of the learning phase (capacity, learning-check; default 10000).
    #[serde(default)]
    pub learn_rate: Option<f64>,
    /// Frame-loss: fractions of the maximum offered rate (default 1.0 … 0.1).
    #[serde(default)]
    pub steps: Option<Vec<f64>>,
    /// Frames per pacing deadline.
    #[serde(default)]
    pub burst: Option<usize>,
    /// Emulated hosts (MAC addresses) per port for layer-2 rate tests
    /// (default 1): frames cycle over source and destination hosts.
    #[serde(default)]
    pub hosts: Option<u32>,
    /// Latency: measure in a separate trial at the throughput rate (default false:
    /// taken from the passing trial at that rate).
    #[serde(default)]
    pub latency_trial: Option<bool>,
    /// Convergence: `backup-pair` (default).
    #[serde(default)]
    pub topology: Option<ConvTopology>,
    /// Convergence: `link-down` (default), `kill`, `command` or `none`.
    #[serde(default)]
    pub event: Option<Event>,
    /// Convergence, link-down: `dut` (default) or `tester`.
    #[serde(default)]
    pub event_side: Option<EventSide>,
    /// Convergence, `event: command`: run with `sh -c` in the DUT namespace.
    #[serde(default)]
    pub event_command: Option<String>,
    /// Convergence: command run in the DUT namespace after each restore.
    #[serde(default)]
    pub restore_command: Option<String>,
    /// Convergence: seconds of steady traffic before the event (default 1, at least 1).
    #[serde(default)]
    pub event_at: Option<f64>,
    /// Convergence: seconds of traffic after the event ends (default 2, at least 2).
    #[serde(default)]
    pub after_event: Option<f64>,
    /// Convergence: streams (destination-MAC groups; default 16).
    #[serde(default)]
    pub streams: Option<u32>,
    /// Convergence: goal in ms (default 1; reported, pass = every trial below it).
    #[serde(default)]
    pub goal_ms: Option<f64>,
    /// Convergence: seconds to wait for the DUT to be back between trials (default 10).
    #[serde(default)]
    pub restore_timeout: Option<f64>,
    /// Multicast: source ports (uplinks) t1..tN (default 1).
    #[serde(default)]
    pub sources: Option<usize>,
    /// Multicast: receiver ports after the sources (default 4).
    #[serde(default)]
    pub receivers: Option<usize>,
    /// Multicast: groups in all (default 1); every source sends to every group.
    #[serde(default)]
    pub groups: Option<u32>,
    /// Multicast: `all` (default: every receiver joins every group) or k
    /// (each group joined by k receivers, spread round-robin).
    #[serde(default)]
    pub replication: Option<Replication>,
    /// Multicast: IGMPv3 `include` (INCLUDE {the sources}, default) or
    /// `exclude` (EXCLUDE {}: any source).
    #[serde(default)]
    pub filter_mode: Option<FilterMode>,
    /// Multicast: IGMP version of the reports, 3 (default) or 2 (any source).
    #[serde(default)]
    pub igmp_version: Option<u8>,
    /// Multicast: first group address (default 232.1.0.1 for include,
    /// 239.1.0.1 for exclude / IGMPv2); groups are consecutive.
    #[serde(default)]
    pub first_group: Option<std::net::Ipv4Addr>,
    /// Multicast: also measure group join and leave delay (default false).
    #[serde(default)]
    pub join_leave: Option<bool>,
    /// Multicast: frames/s per source of the join/leave trial (default 10000).
    #[serde(default)]
    pub delay_rate: Option<f64>,
    /// Multicast: seconds of traffic after the leaves in the join/leave
    /// trial (default 3: Linux without fast leave takes about 2 s).
    #[serde(default)]
    pub leave_wait: Option<f64>,
    /// Multicast: nominal link speed of a port in Mbit/s for "% of line
    /// rate" (default 1000, the reports' GbE ports).
    #[serde(default)]
    pub line_rate_mbps: Option<f64>,
    /// Throughput (layer 2): SPAN sessions on the DUT (1..16), session k
    /// copying what port 1 receives to port 2 + k; a trial passes only
    /// when every forwarded frame and every copy arrived. See `mirror.rs`.
    #[serde(default)]
    pub mirror_sessions: Option<u32>,
    /// CoPP: milliseconds between the pings to the DUT (default 10).
    #[serde(default)]
    pub ping_interval_ms: Option<u32>,
    /// Disruption: commands and when they run.
    #[serde(default)]
    pub commands: Option<Vec<TimedCommand>>,
    /// Disruption: shell commands run in the DUT namespace before each
    /// trial's traffic, after the DUT is whole again (e.g. a node of a
    /// lanyard-pair taken away, so the trial measures its return).
    #[serde(default)]
    pub before_trial: Option<Vec<String>>,
    /// Disruption: tester ports per tier (1..8). The odd tester ports
    /// (1, 3, ...) are the access tier, the even ones (2, 4, ...) the
    /// core tier; every access port sends to every core port and back,
    /// each direction a stream with its own outage (lost / its rate).
    #[serde(default)]
    pub tiers: Option<usize>,
    /// Layer-2 rate and disruption tests: frames carry 802.1Q tags of
    /// VLANs 100..100+N-1 (cycled per frame; a disruption test sends one
    /// stream per VLAN, each with its own outage).
    #[serde(default)]
    pub vlans: Option<u16>,
    /// Layer-3 rate tests: every frame a new flow (`true` or `udp`: UDP
    /// source port from the frame's sequence number; `tcp`: a SYN from a
    /// new source port; `icmp`: an echo request with a new identifier;
    /// `mix`: the three in turn; docs/lab.md "New-flow rate"), so the
    /// zero-loss rate through a flow-keyed DUT is its new-flow rate.
    #[serde(default)]
    pub new_flows: Option<NewFlowsSpec>,
    /// Layer-3 rate tests through DUTs that do not route (inline, bridge,
    /// wire): frames cycle over this many bidirectional flows between
    /// subscriber and server addresses (docs/lab.md "Flows and
    /// subscribers at scale"); an inline engine gets them all before the
    /// first trial.
    #[serde(default)]
    pub flows: Option<u32>,
    /// With `flows`: the subscriber addresses the flows are spread over
    /// (default: one per flow, at most 1,000,000); an inline-engine DUT
    /// gets each provisioned as a subscriber.
    #[serde(default)]
    pub subscribers: Option<u32>,
    /// With `flows`: frames per second that create the flows in an
    /// inline engine before the first trial (default 100,000).
    #[serde(default)]
    pub prime_rate: Option<f64>,
    /// Bandwidth-share: the services and their controllers' limits
    /// (bits/s per direction, e.g. `{up: 5M, down: 7M}`), named A, B, …
    #[serde(default)]
    pub services: Option<Vec<crate::bwspec::ServiceSpec>>,
    /// Bandwidth-share: bits/s each subscriber offers per service and
    /// direction (default: 1.25 × the gold share of the largest limit).
    #[serde(default)]
    pub offered: Option<crate::bwspec::Bps>,
    /// Bandwidth-share: package weights of gold, silver, bronze
    /// (default the engine's 10, 5, 1).
    #[serde(default)]
    pub weights: Option<Vec<u32>>,
    /// Bandwidth-share: seconds of each trial left out of the verdict
    /// while the shares settle (default 3).
    #[serde(default)]
    pub settle: Option<f64>,
    /// Bandwidth-share: seconds per measured interval (default 1).
    #[serde(default)]
    pub interval: Option<f64>,
    /// Subscribers test: how many of the provisioned subscribers send
    /// traffic (spread over the table; default 100).
    #[serde(default)]
    pub sample: Option<u32>,
    /// Bandwidth-share: subscribers beside gold, silver and bronze that
    /// offer less than their share (`[{package: gold, offered: 100k}]`).
    #[serde(default)]
    pub light: Option<Vec<crate::bwspec::LightSpec>>,
}

/// Which receivers join a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Replication {
    /// `all` (the only word accepted).
    Word(AllWord),
    /// Each group is joined by this many receivers.
    Count(usize),
}

/// The word `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllWord {
    /// Every receiver.
    All,
}

/// IGMPv3 filter mode of the receivers' membership.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilterMode {
    /// INCLUDE {sources}: source-specific (SSM).
    #[default]
    Include,
    /// EXCLUDE {}: any source (ASM).
    Exclude,
}

/// A multicast test's resolved parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Multicast {
    /// Source ports: tester ports 0..sources.
    pub sources: usize,
    /// Receiver ports: tester ports sources..sources+receivers.
    pub receivers: usize,
    /// Groups in all.
    pub groups: u32,
    /// Receivers per group (None: all).
    pub replication: Option<usize>,
    /// Filter mode of the joins.
    pub filter: FilterMode,
    /// 2 or 3.
    pub igmp_version: u8,
    /// First group address.
    pub first_group: [u8; 4],
    /// Run the join / leave delay trial.
    pub join_leave: bool,
    /// Frames/s per source in that trial.
    pub delay_rate: f64,
    /// Seconds of traffic after the leaves.
    pub leave_wait: f64,
    /// Nominal port speed, Mbit/s.
    pub line_rate_mbps: f64,
}

/// `new-flows:` as written: a boolean (`true` = UDP) or a transport name.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum NewFlowsSpec {
    /// `true` (UDP) or `false` (off).
    On(bool),
    /// `udp`, `tcp`, `icmp` or `mix`.
    Proto(String),
}

/// A test with defaults applied and checked.
#[derive(Debug, Clone, Serialize)]
pub struct Test {
    /// Name.
    pub name: String,
    /// Type.
    pub kind: TestKind,
    /// Resolved frame sizes.
    pub frame_sizes: Vec<FrameSize>,
    /// Layer 2 or 3.
    pub layer: Option<u8>,
    /// IP version of layer-3 frames.
    pub family: Family,
    /// IPv4 routes (None: the DUT's).
    pub routes: Option<u32>,
    /// IPv6 routes (None: the DUT's).
    pub routes6: Option<u32>,
    /// How the DUT gets the routes.
    pub routes_from: RoutesFrom,
    /// DUTs the test runs on (None: all).
    pub duts: Option<Vec<String>>,
    /// Both directions.
    pub bidirectional: bool,
    /// Ports used.
    pub ports: usize,
    /// Traffic pattern of a full-mesh test.
    pub mesh: Mesh,
    /// Seconds per trial.
    pub trial_duration: f64,
    /// Drain seconds.
    pub drain: f64,
    /// Learn wait seconds.
    pub learn_wait: f64,
    /// Repetitions.
    pub trials: u32,
    /// Rate (frames/s per sending port).
    pub rate: Option<f64>,
    /// Latency tests at `rate: "N%"`: the fraction of the line rate of a
    /// `line-rate-mbps` port (default 1000) at each frame size.
    pub load: Option<f64>,
    /// Nominal port speed for `load` (Mbit/s).
    pub line_rate_mbps: f64,
    /// Search resolution.
    pub resolution: f64,
    /// Search max trials.
    pub max_trials: u32,
    /// Loss tolerance.
    pub loss_tolerance: f64,
    /// Confirmation trial.
    pub confirm: bool,
    /// Median-latency pass limit (ms).
    pub latency_limit_ms: Option<f64>,
    /// Addresses.
    pub addresses: u32,
    /// Search the address count.
    pub search_addresses: bool,
    /// Learning-phase rate.
    pub learn_rate: f64,
    /// Frame-loss steps.
    pub steps: Vec<f64>,
    /// Burst.
    pub burst: Option<usize>,
    /// Hosts per port.
    pub hosts: u32,
    /// Separate latency trial.
    pub latency_trial: bool,
    /// Convergence parameters (convergence tests only).
    pub convergence: Option<Convergence>,
    /// Multicast parameters (multicast tests only).
    pub multicast: Option<Multicast>,
    /// Mirror sessions on the DUT (throughput tests; 0: none).
    pub mirror_sessions: u32,
    /// CoPP: milliseconds between pings.
    pub ping_interval_ms: u32,
    /// Disruption: commands in time order.
    pub commands: Vec<TimedCommand>,
    /// Disruption: commands run before each trial's traffic.
    pub before_trial: Vec<String>,
    /// Disruption: tester ports per tier (0: one stream, port 1 to 2).
    pub tiers: usize,
    /// 802.1Q-tagged frames over this many VLANs from [`FIRST_VLAN`]
    /// (0: untagged).
    pub vlans: u16,
    /// Every frame a new flow of this transport (layer 3 only;
    /// `Tester::new_flows`).
    pub new_flows: NewFlows,
    /// Bidirectional flows the frames cycle over (0: the route-sampled
    /// addresses; `crate::flowset`).
    pub flows: u32,
    /// Subscriber addresses of those flows (0 when `flows` is 0).
    pub subscribers: u32,
    /// Frames per second that create the flows before the first trial.
    pub prime_rate: f64,
    /// Bandwidth-share parameters (bandwidth-share tests only).
    pub bw_share: Option<crate::bwspec::BwShare>,
    /// Subscribers-test parameters (subscribers tests only).
    pub provision: Option<crate::subspec::Provision>,
}

/// Most flows a test may cycle over (`flows: N`, `crate::flowset`: the
/// generator keeps one address pair per flow and direction, 10–34 bytes).
pub const MAX_FLOWS: u32 = 1 << 24;
/// Most subscribers of a test (the inline engine report's provisioning
/// figure).
pub const MAX_SUBSCRIBERS: u32 = 1_000_000;

/// Bandwidth-share parameters (`crate::bwspec`) of test `i` (None for other kinds, which
/// must not set them), checked against the plan's DUTs.
fn bw_share(
    plan: &Plan,
    i: usize,
    t: &TestSpec,
    sizes: &[FrameSize],
) -> Result<Option<BwShare>, LabError> {
    let f = |n: &str| format!("tests[{i}].{n}");
    let bad = |field: String, msg: String| LabError::Plan(format!("{field}: {msg}"));
    if t.kind != TestKind::BandwidthShare {
        for (k, set) in [
            ("services", t.services.is_some()),
            ("offered", t.offered.is_some()),
            ("weights", t.weights.is_some()),
            ("settle", t.settle.is_some()),
            ("interval", t.interval.is_some()),
            ("light", t.light.is_some()),
        ] {
            if set {
                return Err(bad(f(k), "only bandwidth-share tests take it".into()));
            }
        }
        return Ok(None);
    }
    for (k, set) in [
        ("layer", t.layer == Some(2)),
        ("family", t.family == Some(crate::plan::Family::Ipv6)),
        ("routes", t.routes.is_some() || t.routes6.is_some()),
        ("flows", t.flows.is_some()),
        ("new-flows", t.new_flows.is_some()),
        ("bidirectional", t.bidirectional.is_some()),
        ("hosts", t.hosts.is_some()),
        ("rate", t.rate.is_some()),
        ("vlans", t.vlans.is_some()),
    ] {
        if set {
            return Err(bad(
                f(k),
                "not a bandwidth-share option (IPv4/UDP both ways between three \
                 subscribers and the services' servers, at `offered` bits/s per stream)"
                    .into(),
            ));
        }
    }
    let specs = t.services.as_deref().unwrap_or_default();
    if specs.is_empty() || specs.len() > MAX_SERVICES {
        return Err(bad(
            f("services"),
            format!(
                "list 1..{MAX_SERVICES} services, each {{up: RATE, down: RATE}} (bits/s, e.g. 5M)"
            ),
        ));
    }
    let mut c = Controllers {
        n: specs.len(),
        weights: [10, 5, 1],
        ..Default::default()
    };
    let (lo, hi) = LIMIT_RANGE;
    for (k, s) in specs.iter().enumerate() {
        if s.up.is_none() && s.down.is_none() {
            return Err(bad(
                format!("{}[{k}]", f("services")),
                "give a limit up, down or both".into(),
            ));
        }
        for (dir, v, out) in [
            ("up", &s.up, &mut c.up[k]),
            ("down", &s.down, &mut c.down[k]),
        ] {
            let Some(v) = v else { continue };
            let at = format!("{}[{k}].{dir}", f("services"));
            let r = v.get().map_err(|e| bad(at.clone(), e))?;
            if !(lo..=hi).contains(&r) {
                return Err(bad(
                    at,
                    format!(
                        "{r} bits/s is outside {lo}..{hi} (scale the report's limits to the bed)"
                    ),
                ));
            }
            *out = r;
        }
    }
    if let Some(w) = &t.weights {
        if w.len() != 3 || w.iter().any(|&x| !(1..=1000).contains(&x)) {
            return Err(bad(
                f("weights"),
                "three weights 1..1000: gold, silver, bronze".into(),
            ));
        }
        c.weights = [w[0], w[1], w[2]];
    }
    let ideal = c.ideal();
    let top = ideal.iter().copied().fold(0.0, f64::max);
    let largest = c.up.iter().chain(&c.down).copied().max().unwrap_or(0);
    let offered_bps = match &t.offered {
        Some(o) => o.get().map_err(|e| bad(f("offered"), e))?,
        None => (1.25 * top * largest as f64).ceil() as u64,
    };
    // Weighted max-min gives the weights' split only when everyone wants
    // more than its share: the largest share of the largest limit.
    let need = top * largest as f64 * 1.05;
    if (offered_bps as f64) < need {
        return Err(bad(
            f("offered"),
            format!(
                "{offered_bps} bits/s is below 1.05 × the largest share ({:.0} % of {largest} bits/s): \
                 every subscriber must offer more than its share, at least {need:.0}",
                top * 100.0
            ),
        ));
    }
    if sizes.len() != 1 || sizes[0].sizes.len() != 1 {
        return Err(bad(
            f("frame-sizes"),
            "one fixed frame size (rates are counted in frames of that size)".into(),
        ));
    }
    let size = sizes[0].sizes[0];
    // Light subscribers: each in every service and direction at a
    // multiple of `offered` / SLOTS, below its max-min share.
    let lights = t.light.as_deref().unwrap_or_default();
    if lights.len() > MAX_LIGHT {
        return Err(bad(
            f("light"),
            format!("at most {MAX_LIGHT} light subscribers, one per package"),
        ));
    }
    let mut light_slots = Vec::new();
    for (k, l) in lights.iter().enumerate() {
        let at = |n: &str| format!("{}[{k}].{n}", f("light"));
        let Some(p) = SUBSCRIBERS.iter().position(|s| *s == l.package) else {
            return Err(bad(
                at("package"),
                format!("{:?}: gold, silver or bronze", l.package),
            ));
        };
        if c.light[..c.n_light].contains(&(p as u8)) {
            return Err(bad(
                at("package"),
                "one light subscriber per package".into(),
            ));
        }
        let o = l.offered.get().map_err(|e| bad(at("offered"), e))?;
        let slots = (o as f64 * f64::from(SLOTS) / offered_bps as f64).round() as u32;
        if !(1..SLOTS).contains(&slots) {
            return Err(bad(
                at("offered"),
                format!(
                    "{o} bits/s: between 1/{SLOTS} and {}/{SLOTS} of offered ({offered_bps}) \
                     (the generator sends a light subscriber's stream in 1/{SLOTS} steps of it)",
                    SLOTS - 1
                ),
            ));
        }
        c.light[c.n_light] = p as u8;
        c.n_light += 1;
        light_slots.push(slots);
    }
    // Each light subscriber must want less than its max-min share in every
    // controller (with 10 % to spare): else it is one more heavy one.
    let unit = offered_bps as f64 / f64::from(SLOTS);
    let demands: Vec<f64> = (0..3)
        .map(|_| offered_bps as f64)
        .chain(light_slots.iter().map(|&n| f64::from(n) * unit))
        .collect();
    let weights = c.all_weights();
    let sum_w: f64 = weights.iter().sum();
    for k in 0..c.n {
        for (dir, limit) in [("up", c.up[k]), ("down", c.down[k])] {
            if limit == 0 {
                continue;
            }
            for (j, &n) in light_slots.iter().enumerate() {
                let fair = weights[3 + j] * limit as f64 / sum_w;
                let d = demands[3 + j];
                if d > 0.9 * fair {
                    return Err(bad(
                        format!("{}[{j}].offered", f("light")),
                        format!(
                            "{d:.0} bits/s ({n}/{SLOTS} of offered) is not below its share of \
                             service {} {dir} ({fair:.0} of {limit} bits/s by weight; at most 0.9 × that)",
                            crate::bwspec::service_name(k)
                        ),
                    ));
                }
            }
        }
    }
    let per_port_bps = 3.0 * offered_bps as f64 + demands[3..].iter().sum::<f64>();
    let streams_up = (0..c.n).filter(|&k| c.up[k] > 0).count();
    let streams_down = (0..c.n).filter(|&k| c.down[k] > 0).count();
    let fps = streams_up.max(streams_down) as f64 * per_port_bps / frame_bits(size);
    if fps > MAX_PORT_FPS {
        return Err(bad(
            f("offered"),
            format!(
                "needs {fps:.0} frames/s per port at {size} bytes (at most {MAX_PORT_FPS:.0}): \
                 lower the limits or use larger frames"
            ),
        ));
    }
    let dur = t
        .trial_duration
        .or(plan.defaults.trial_duration)
        .unwrap_or(2.0);
    let interval = t.interval.unwrap_or(1.0);
    if !(0.1..=10.0).contains(&interval) {
        return Err(bad(f("interval"), "must be 0.1..10 seconds".into()));
    }
    let settle = t.settle.unwrap_or(3.0);
    if !(settle >= 0.0 && settle + 2.0 * interval <= dur) {
        return Err(bad(
            f("settle"),
            format!(
                "{settle} s of settling leaves fewer than two {interval} s intervals of the {dur} s trial"
            ),
        ));
    }
    for d in &plan.duts {
        if t.duts.as_ref().is_some_and(|ds| !ds.contains(&d.name)) {
            continue;
        }
        if !(d.driver == Driver::Lanyard && d.inline == Some(InlineMode::Engine)) {
            return Err(bad(
                f("duts"),
                format!(
                    "DUT {:?} ({}) has no inline engine: bandwidth-share needs `driver: lanyard, \
                     inline: engine`; list the DUTs it runs on in duts:",
                    d.name,
                    d.driver.as_str()
                ),
            ));
        }
    }
    Ok(Some(BwShare {
        controllers: c,
        offered_bps,
        light_slots,
        settle,
        interval,
    }))
}

fn bad(field: String, msg: impl std::fmt::Display) -> LabError {
    LabError::Plan(format!("{field}: {msg}"))
}

fn resolve_sizes(field: &str, v: &[FrameSizeSpec]) -> Result<Vec<FrameSize>, LabError> {
    if v.is_empty() {
        return Err(bad(field.into(), "must list at least one frame size"));
    }
    v.iter()
        .enumerate()
        .map(|(i, s)| match s {
            FrameSizeSpec::Bytes(b) if (64..=9216).contains(b) => Ok(FrameSize {
                label: b.to_string(),
                sizes: vec![*b],
            }),
            FrameSizeSpec::Bytes(b) => Err(bad(
                format!("{field}[{i}]"),
                format!("{b} is outside 64..9216"),
            )),
            FrameSizeSpec::Name(n) if n == "imix" => Ok(FrameSize {
                label: "imix".into(),
                sizes: imix(),
            }),
            FrameSizeSpec::Name(n) => Err(bad(
                format!("{field}[{i}]"),
                format!("unknown frame size {n:?} (a number 64..9216 or \"imix\")"),
            )),
        })
        .collect()
}

fn check_routes(at: &str, v4: Option<u32>, v6: Option<u32>) -> Result<(), LabError> {
    if v4.is_some_and(|n| n > crate::routes::MAX_V4) {
        return Err(bad(
            format!("{at}.routes"),
            format!("at most {}", crate::routes::MAX_V4),
        ));
    }
    if v6.is_some_and(|n| n > crate::routes::MAX_V6) {
        return Err(bad(
            format!("{at}.routes6"),
            format!("at most {}", crate::routes::MAX_V6),
        ));
    }
    Ok(())
}

/// `max` → 1.0, `"N%"` → N / 100 (0 < N ≤ 100).
pub fn parse_max_rate(w: &str) -> Result<f64, String> {
    let w = w.trim();
    if w == "max" {
        return Ok(1.0);
    }
    if let Some(p) = w.strip_suffix('%') {
        if let Ok(p) = p.trim().parse::<f64>() {
            if p > 0.0 && p <= 100.0 {
                return Ok(p / 100.0);
            }
        }
    }
    Err(format!(
        "{w:?}: frames/s, max, or \"N%\" of max with 0 < N <= 100"
    ))
}

fn positive(field: String, v: f64) -> Result<f64, LabError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(bad(field, format!("must be a positive number, got {v}")))
    }
}

impl Plan {
    /// Parse and check a plan from YAML text.
    pub fn parse(text: &str) -> Result<Plan, LabError> {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let plan: Plan = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            LabError::Plan(if path.is_empty() || path == "." {
                inner.to_string()
            } else {
                format!("{path}: {inner}")
            })
        })?;
        plan.check()?;
        Ok(Plan {
            source: Some(text.to_string()),
            ..plan
        })
    }

    /// Read and parse a plan file.
    pub fn load(path: &Path) -> Result<Plan, LabError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LabError::Plan(format!("{}: {e}", path.display())))?;
        Plan::parse(&text).map_err(|e| match e {
            LabError::Plan(m) => LabError::Plan(format!("{}: {m}", path.display())),
            o => o,
        })
    }

    fn check(&self) -> Result<(), LabError> {
        if self.duts.is_empty() {
            return Err(bad("duts".into(), "must list at least one DUT"));
        }
        if self.tests.is_empty() {
            return Err(bad("tests".into(), "must list at least one test"));
        }
        let mut names = std::collections::HashSet::new();
        for (i, d) in self.duts.iter().enumerate() {
            if d.name.is_empty() || !names.insert(d.name.clone()) {
                return Err(bad(
                    format!("duts[{i}].name"),
                    "must be non-empty and unique",
                ));
            }
            if let Some(pt) = &d.port_type {
                // OVS spells its type `afxdp`, Lanyard's backend is `af-xdp`.
                let lanyard = matches!(
                    d.driver,
                    Driver::Lanyard | Driver::LanyardPair | Driver::LanyardRstp | Driver::LanyardPe
                );
                let xdp = if lanyard { "af-xdp" } else { "afxdp" };
                let block =
                    lanyard && ["af-packet-block", "af-xdp-shared-umem"].contains(&pt.as_str());
                if !["auto", xdp, "af-packet"].contains(&pt.as_str()) && !block {
                    let more = if lanyard {
                        ", af-packet, af-packet-block or af-xdp-shared-umem"
                    } else {
                        " or af-packet"
                    };
                    return Err(bad(
                        format!("duts[{i}].port-type"),
                        format!("{pt:?} is not auto, {xdp}{more}"),
                    ));
                }
            }
            if let Some(v) = d.vlan {
                if !(1..=4094).contains(&v) {
                    return Err(bad(format!("duts[{i}].vlan"), "must be 1..4094"));
                }
            }
            check_routes(&format!("duts[{i}]"), d.routes, d.routes6)?;
            if d.services == Some(true) && !matches!(d.driver, Driver::Lanyard | Driver::LanyardPe)
            {
                return Err(bad(
                    format!("duts[{i}].services"),
                    "only the lanyard and lanyard-pe drivers run services",
                ));
            }
            for (k, set) in [
                ("pe-mode", d.pe_mode.is_some()),
                ("circuits", d.circuits.is_some()),
                ("uplinks", d.uplinks.is_some()),
            ] {
                if set && d.driver != Driver::LanyardPe {
                    return Err(bad(
                        format!("duts[{i}].{k}"),
                        "only the lanyard-pe driver takes it",
                    ));
                }
            }
            if let Some(m) = d.pe_mode.filter(|&m| m != PeMode::Pseudowire) {
                if d.circuits.is_some() {
                    return Err(bad(
                        format!("duts[{i}].circuits"),
                        format!("pe-mode: {} has no attachment circuits", m.as_str()),
                    ));
                }
                if m.routed() && d.uplinks.is_some_and(|u| u > 1) {
                    return Err(bad(
                        format!("duts[{i}].uplinks"),
                        format!(
                            "pe-mode: {} runs on one uplink (the fast-reroute bypass is built for pseudowires)",
                            m.as_str()
                        ),
                    ));
                }
            }
            if let Some(u) = d.uplinks {
                if !(1..=2).contains(&u) {
                    return Err(bad(format!("duts[{i}].uplinks"), "must be 1 or 2"));
                }
            }
            if d.failover.is_some() && d.driver != Driver::LinuxBridge {
                return Err(bad(
                    format!("duts[{i}].failover"),
                    "only the linux-bridge driver takes a failover mode",
                ));
            }
            for (k, v) in [
                ("preempt", d.preempt),
                ("mac-move-update", d.mac_move_update),
            ] {
                if v.is_some() && d.driver != Driver::Lanyard {
                    return Err(bad(
                        format!("duts[{i}].{k}"),
                        "only the lanyard driver has backup pairs",
                    ));
                }
            }
            for (k, v) in [
                ("igmp-querier", d.igmp_querier),
                ("fast-leave", d.fast_leave),
            ] {
                if v.is_some() && !matches!(d.driver, Driver::LinuxBridge | Driver::Lanyard) {
                    return Err(bad(
                        format!("duts[{i}].{k}"),
                        "only the linux-bridge and lanyard drivers snoop IGMP with these knobs",
                    ));
                }
            }
            if d.inline.is_some() && d.driver != Driver::Lanyard {
                return Err(bad(
                    format!("duts[{i}].inline"),
                    "only the lanyard driver runs inline",
                ));
            }
            if d.conntrack.is_some() && d.driver != Driver::LinuxRouter {
                return Err(bad(
                    format!("duts[{i}].conntrack"),
                    "only the linux-router driver tracks connections",
                ));
            }
            match d.inline_flows {
                Some(_) if d.inline.is_none() => {
                    return Err(bad(
                        format!("duts[{i}].inline-flows"),
                        "only for an inline DUT (inline: engine | bypass)",
                    ))
                }
                Some(n) if !(1024..=1 << 25).contains(&n) => {
                    return Err(bad(
                        format!("duts[{i}].inline-flows"),
                        "must be 1024..33554432 (128 bytes per flow)",
                    ))
                }
                _ => {}
            }
            if d.driver == Driver::Lossy && d.rate_kbit.is_none() {
                return Err(bad(
                    format!("duts[{i}].rate-kbit"),
                    "required by the lossy driver",
                ));
            }
        }
        for i in 0..self.tests.len() {
            self.test(i)?;
        }
        Ok(())
    }

    /// Test `i` with defaults applied.
    pub fn test(&self, i: usize) -> Result<Test, LabError> {
        let t = &self.tests[i];
        let f = |n: &str| format!("tests[{i}].{n}");
        let d = &self.defaults;
        let sizes_spec = t
            .frame_sizes
            .clone()
            .or(d.frame_sizes.clone())
            .unwrap_or_else(|| {
                let all: &[u16] = if t.kind == TestKind::Convergence {
                    &[64]
                } else if t.kind == TestKind::BandwidthShare {
                    &[512]
                } else if t.kind == TestKind::Subscribers {
                    &[128]
                } else {
                    &[64, 128, 256, 512, 1024, 1280, 1518]
                };
                all.iter().map(|&b| FrameSizeSpec::Bytes(b)).collect()
            });
        let frame_sizes = resolve_sizes(&f("frame-sizes"), &sizes_spec)?;
        let search = t.search.or(d.search).unwrap_or_default();
        let resolution = search.resolution.unwrap_or(0.01);
        if !(resolution > 0.0 && resolution < 1.0) {
            return Err(bad(f("search.resolution"), "must be between 0 and 1"));
        }
        let loss_tolerance = search.loss_tolerance.unwrap_or(0.0);
        if !(0.0..1.0).contains(&loss_tolerance) {
            return Err(bad(f("search.loss-tolerance"), "must be in [0, 1)"));
        }
        let max_trials = search.max_trials.unwrap_or(12);
        if max_trials < 2 {
            return Err(bad(f("search.max-trials"), "must be at least 2"));
        }
        if let Some(l) = t.layer {
            if l != 2 && l != 3 {
                return Err(bad(f("layer"), "must be 2 or 3"));
            }
        }
        let family = t.family.unwrap_or_default();
        let layer = match (t.layer, t.family) {
            (Some(2), Some(_)) => return Err(bad(f("family"), "only for layer 3")),
            (None, Some(_)) => Some(3),
            (l, _) => l,
        };
        if family == Family::Ipv6 {
            for fs in &frame_sizes {
                if let Some(z) = fs.sizes.iter().find(|&&z| z < crate::sig::MIN_FRAME_V6) {
                    return Err(bad(
                        f("frame-sizes"),
                        format!(
                            "{}: IPv6 test frames (UDP, TCP or ICMP with the signature) need at least {} bytes, not {z}",
                            fs.label,
                            crate::sig::MIN_FRAME_V6
                        ),
                    ));
                }
            }
        }
        check_routes(&format!("tests[{i}]"), t.routes, t.routes6)?;
        self.check_routes_from(i, t, layer, family)?;
        if let Some(ds) = &t.duts {
            if ds.is_empty() {
                return Err(bad(f("duts"), "must list at least one DUT"));
            }
            for (k, n) in ds.iter().enumerate() {
                if !self.duts.iter().any(|d| d.name == *n) {
                    return Err(bad(
                        format!("{}[{k}]", f("duts")),
                        format!("no DUT named {n:?}"),
                    ));
                }
            }
        }
        if let Some(r) = &t.reference {
            if let Some(n) = r
                .duts
                .keys()
                .find(|n| !self.duts.iter().any(|d| d.name == **n))
            {
                return Err(bad(f("reference.duts"), format!("no DUT named {n:?}")));
            }
        }
        let multicast = self.multicast(i, t)?;
        let mirror_sessions = t.mirror_sessions.unwrap_or(0);
        if t.mirror_sessions.is_some() {
            if t.kind != TestKind::Throughput {
                return Err(bad(f("mirror-sessions"), "only throughput tests take it"));
            }
            if !(1..=crate::mirror_setup::MAX_SESSIONS).contains(&mirror_sessions) {
                return Err(bad(
                    f("mirror-sessions"),
                    format!("must be 1..{}", crate::mirror_setup::MAX_SESSIONS),
                ));
            }
            if layer == Some(3) {
                return Err(bad(f("layer"), "mirror tests are layer 2"));
            }
            if t.bidirectional == Some(true) {
                return Err(bad(
                    f("bidirectional"),
                    "mirror tests send one way (port 1 to port 2)",
                ));
            }
        }
        if t.ping_interval_ms.is_some() && t.kind != TestKind::Copp {
            return Err(bad(f("ping-interval-ms"), "only copp tests take it"));
        }
        let ping_interval_ms = t.ping_interval_ms.unwrap_or(10);
        if !(2..=1000).contains(&ping_interval_ms) {
            return Err(bad(f("ping-interval-ms"), "must be 2..1000"));
        }
        if t.kind == TestKind::Copp {
            if t.layer == Some(2) || t.family == Some(Family::Ipv6) {
                return Err(bad(
                    f("layer"),
                    "copp floods IPv4 multicast to 224.0.0.1 (layer 3, IPv4)",
                ));
            }
            for (k, set) in [
                ("bidirectional", t.bidirectional.is_some()),
                ("hosts", t.hosts.is_some()),
                ("routes", t.routes.is_some() || t.routes6.is_some()),
            ] {
                if set {
                    return Err(bad(f(k), "not a copp option"));
                }
            }
        }
        if t.commands.is_some() && t.kind != TestKind::Disruption {
            return Err(bad(f("commands"), "only disruption tests take it"));
        }
        if let Some(b) = &t.before_trial {
            if t.kind != TestKind::Disruption {
                return Err(bad(f("before-trial"), "only disruption tests take it"));
            }
            if let Some(k) = b.iter().position(|c| c.trim().is_empty()) {
                return Err(bad(
                    format!("{}[{k}]", f("before-trial")),
                    "must not be empty",
                ));
            }
        }
        let mut commands = t.commands.clone().unwrap_or_default();
        if t.kind == TestKind::Disruption {
            if commands.is_empty() {
                return Err(bad(
                    f("commands"),
                    "required by disruption tests: [{at: SECONDS, run: COMMAND}, ...]",
                ));
            }
            if t.rate.is_none() {
                return Err(bad(f("rate"), "required by disruption tests (frames/s)"));
            }
            let dur = t.trial_duration.or(d.trial_duration).unwrap_or(2.0);
            for (k, c) in commands.iter().enumerate() {
                if !(c.at.is_finite() && c.at >= 0.0 && c.at < dur) {
                    return Err(bad(
                        format!("{}[{k}].at", f("commands")),
                        format!("must be within the trial (0..{dur} s)"),
                    ));
                }
                if c.run.trim().is_empty() {
                    return Err(bad(
                        format!("{}[{k}].run", f("commands")),
                        "must not be empty",
                    ));
                }
            }
            if t.bidirectional == Some(true) {
                return Err(bad(f("bidirectional"), "disruption tests send one way"));
            }
        }
        commands.sort_by(|a, b| a.at.total_cmp(&b.at));
        let layer = if matches!(
            t.kind,
            TestKind::Copp | TestKind::BandwidthShare | TestKind::Subscribers
        ) {
            Some(3)
        } else {
            layer
        };
        let tiers = match t.tiers {
            Some(_) if t.kind != TestKind::Disruption => {
                return Err(bad(f("tiers"), "only disruption tests take it"))
            }
            Some(n) if !(1..=8).contains(&n) => {
                return Err(bad(f("tiers"), "must be 1..8 tester ports per tier"))
            }
            Some(n) => n,
            None => 0,
        };
        let vlans = match t.vlans {
            None => 0,
            Some(_) if !t.kind.is_port_pair_rate() => return Err(bad(
                f("vlans"),
                "only throughput, latency, back-to-back, frame-loss and disruption tests take it",
            )),
            Some(n) if n == 0 || n > 4094 - FIRST_VLAN + 1 => {
                return Err(bad(
                    f("vlans"),
                    format!(
                        "must be 1..{} (VLANs {FIRST_VLAN}..4094)",
                        4094 - FIRST_VLAN + 1
                    ),
                ))
            }
            Some(_) if layer == Some(3) || t.family.is_some() => {
                // Tagged layer-3 frames (L3VPN): the tag is inside the
                // frame size, so the smallest frame grows by 4 bytes.
                let min = match family {
                    Family::Ipv4 => crate::sig::MIN_FRAME + 4,
                    Family::Ipv6 => crate::sig::MIN_FRAME_V6 + 4,
                };
                if let Some((fs, z)) = frame_sizes
                    .iter()
                    .find_map(|fs| fs.sizes.iter().find(|&&z| z < min).map(|&z| (fs, z)))
                {
                    return Err(bad(
                        f("frame-sizes"),
                        format!(
                            "{}: tagged {} frames (vlans: N, layer 3) need at least {min} bytes, not {z}",
                            fs.label,
                            match family {
                                Family::Ipv4 => "IPv4/UDP",
                                Family::Ipv6 => "IPv6/UDP",
                            }
                        ),
                    ));
                }
                if tiers > 0 || mirror_sessions > 0 {
                    return Err(bad(f("vlans"), "not with tiers or mirror sessions"));
                }
                t.vlans.unwrap_or(0)
            }
            Some(_) if tiers > 0 || mirror_sessions > 0 => {
                return Err(bad(f("vlans"), "not with tiers or mirror sessions"))
            }
            Some(n) => n,
        };
        let new_flows = match &t.new_flows {
            None | Some(NewFlowsSpec::On(false)) => NewFlows::Off,
            Some(NewFlowsSpec::On(true)) => NewFlows::Udp,
            Some(NewFlowsSpec::Proto(p)) => NewFlows::parse(p).ok_or_else(|| {
                bad(
                    f("new-flows"),
                    format!("'{p}' is not true, false, udp, tcp, icmp or mix"),
                )
            })?,
        };
        if new_flows.on() {
            if !t.kind.is_port_pair_rate() || t.kind == TestKind::Disruption {
                return Err(bad(
                    f("new-flows"),
                    "only throughput, latency, back-to-back and frame-loss tests take it",
                ));
            }
            let l3 = layer == Some(3) || t.routes.is_some() || t.routes6.is_some();
            if !l3 {
                return Err(bad(
                    f("new-flows"),
                    "needs layer-3 frames (layer: 3, family: ipv6 or routes: N)",
                ));
            }
        }
        let (flows, subscribers, prime_rate) = self.flow_set(i, t, layer, new_flows.on())?;
        let bw_share = bw_share(self, i, t, &frame_sizes)?;
        let ports = match t.kind {
            TestKind::Throughput => 2 + mirror_sessions as usize,
            TestKind::Disruption if tiers > 0 => 2 * tiers,
            TestKind::FullMesh => t.ports.unwrap_or(4),
            TestKind::Multicast => multicast.as_ref().map_or(2, |m| m.sources + m.receivers),
            TestKind::Holb => 4,
            TestKind::AddressCapacity
            | TestKind::LearningRate
            | TestKind::LearningCheck
            | TestKind::Convergence => 3,
            _ => 2,
        };
        if !(2..=64).contains(&ports) {
            return Err(bad(f("ports"), "must be 2..64"));
        }
        if t.ports.is_some() && t.kind != TestKind::FullMesh {
            return Err(bad(f("ports"), "only full-mesh takes a port count"));
        }
        if (t.mesh.is_some() || t.group_size.is_some()) && t.kind != TestKind::FullMesh {
            return Err(bad(f("mesh"), "only full-mesh takes a mesh pattern"));
        }
        let mesh = match (t.mesh.as_deref().unwrap_or("full"), t.group_size) {
            ("full", None) => Mesh::Full,
            ("partial", None) if ports % 2 == 0 => Mesh::Partial,
            ("partial", None) => {
                return Err(bad(f("ports"), "partial mesh needs an even port count"))
            }
            ("groups", Some(g)) if g >= 2 && ports % g == 0 => Mesh::Groups(g),
            ("groups", Some(_)) => {
                return Err(bad(
                    f("group-size"),
                    "must be at least 2 and divide the port count",
                ))
            }
            ("groups", None) => return Err(bad(f("group-size"), "required with mesh: groups")),
            (_, Some(_)) => return Err(bad(f("group-size"), "only valid with mesh: groups")),
            (other, None) => {
                return Err(bad(
                    f("mesh"),
                    format!("unknown pattern {other:?}: full, partial or groups"),
                ))
            }
        };
        let addresses = t.addresses.unwrap_or(1000);
        if addresses == 0 || addresses > 16_000_000 {
            return Err(bad(f("addresses"), "must be 1..16000000"));
        }
        let steps = t
            .steps
            .clone()
            .unwrap_or_else(|| (1..=10).rev().map(|k| k as f64 / 10.0).collect());
        for (k, s) in steps.iter().enumerate() {
            if !(*s > 0.0 && *s <= 1.0) {
                return Err(bad(format!("{}[{k}]", f("steps")), "must be in (0, 1]"));
            }
        }
        if let Some(b) = t.burst {
            if !(1..=64).contains(&b) {
                return Err(bad(f("burst"), "must be 1..64"));
            }
        }
        let hosts = t.hosts.unwrap_or(1);
        if !(1..=1_000_000).contains(&hosts) {
            return Err(bad(f("hosts"), "must be 1..1000000"));
        }
        let (rate, max_fraction) = match &t.rate {
            None => (None, None),
            Some(RateSpec::Fps(r)) => (Some(positive(f("rate"), *r)?), None),
            Some(RateSpec::Word(w)) if t.kind == TestKind::Convergence => (
                None,
                Some(parse_max_rate(w).map_err(|m| bad(f("rate"), m))?),
            ),
            Some(RateSpec::Word(w)) if t.kind == TestKind::Latency && w.trim().ends_with('%') => {
                (None, Some(parse_max_rate(w).map_err(|m| bad(f("rate"), m))?))
            }
            Some(RateSpec::Word(w)) => {
                return Err(bad(
                    f("rate"),
                    format!("{w:?}: frames/s expected (only convergence tests take max or \"N%\", latency tests \"N%\" of line rate)"),
                ))
            }
        };
        if matches!(t.kind, TestKind::Latency) && rate.is_none() && max_fraction.is_none() {
            return Err(bad(
                f("rate"),
                "required by latency tests (frames/s per port, or \"N%\" of a line-rate-mbps port)",
            ));
        }
        // Latency at "N%": a fraction of a nominal port's line rate at each
        // frame size, the reports' "10 % load".
        let load = (t.kind == TestKind::Latency)
            .then_some(max_fraction)
            .flatten();
        let max_fraction = if load.is_some() { None } else { max_fraction };
        let convergence = self.convergence(
            i,
            t,
            rate.is_some() || max_fraction.is_some(),
            max_fraction,
            addresses,
        )?;
        let trial_duration = match &convergence {
            Some(c) => c.event_at + c.after_event,
            None => positive(
                f("trial-duration"),
                t.trial_duration.or(d.trial_duration).unwrap_or(2.0),
            )?,
        };
        let learn_rate_default = if convergence.is_some() {
            50_000.0
        } else {
            10_000.0
        };
        let provision = check_subscribers(self, i, t, &frame_sizes, rate, trial_duration)?;
        Ok(Test {
            name: t.name.clone().unwrap_or_else(|| {
                serde_json::to_value(t.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            }),
            kind: t.kind,
            frame_sizes,
            layer,
            family,
            routes: t.routes,
            routes6: t.routes6,
            routes_from: t.routes_from.unwrap_or_default(),
            duts: t.duts.clone(),
            bidirectional: t.bidirectional.unwrap_or(false),
            ports,
            mesh,
            trial_duration,
            drain: positive(f("drain"), t.drain.or(d.drain).unwrap_or(1.0))?,
            learn_wait: t.learn_wait.or(d.learn_wait).unwrap_or(1.0).max(0.0),
            trials: t
                .trials
                .unwrap_or(if convergence.is_some() { 5 } else { 1 })
                .max(1),
            rate,
            load,
            line_rate_mbps: positive(f("line-rate-mbps"), t.line_rate_mbps.unwrap_or(1000.0))?,
            resolution,
            max_trials,
            loss_tolerance,
            confirm: search.confirm.unwrap_or(false),
            latency_limit_ms: match search.latency_limit_ms {
                Some(l) => Some(positive(f("search.latency-limit-ms"), l)?),
                None => None,
            },
            addresses,
            search_addresses: t.search_addresses.unwrap_or(false),
            learn_rate: positive(f("learn-rate"), t.learn_rate.unwrap_or(learn_rate_default))?,
            steps,
            burst: t.burst,
            hosts,
            latency_trial: t.latency_trial.unwrap_or(false),
            convergence,
            multicast,
            mirror_sessions,
            ping_interval_ms,
            commands,
            before_trial: t.before_trial.clone().unwrap_or_default(),
            tiers,
            vlans,
            new_flows,
            flows,
            subscribers,
            prime_rate,
            bw_share,
            provision,
        })
    }

    /// `routes-from` of test `i`: `ospf` only on layer-3 IPv4 throughput
    /// and latency tests with `routes: N`, and only on DUTs the lab runs
    /// FRR on (lanyard with routed ports, linux-router; the `wire`
    /// ceiling routes nothing and runs as it is).
    fn check_routes_from(
        &self,
        i: usize,
        t: &TestSpec,
        layer: Option<u8>,
        family: Family,
    ) -> Result<(), LabError> {
        if t.routes_from != Some(RoutesFrom::Ospf) {
            return Ok(());
        }
        let f = format!("tests[{i}].routes-from");
        if !matches!(t.kind, TestKind::Throughput | TestKind::Latency) {
            return Err(bad(f, "ospf: only throughput and latency tests take it"));
        }
        if layer != Some(3) || family != Family::Ipv4 {
            return Err(bad(
                f,
                "ospf: needs layer: 3 (IPv4; the injectors run OSPFv2 only)",
            ));
        }
        if t.routes.unwrap_or(0) == 0 {
            return Err(bad(
                f,
                "ospf: needs routes: N (the prefixes the injectors advertise)",
            ));
        }
        if t.routes6.unwrap_or(0) > 0 {
            return Err(bad(f, "ospf: IPv4 only, not with routes6"));
        }
        if t.mirror_sessions.is_some() {
            return Err(bad(f, "ospf: not with mirror sessions"));
        }
        for d in &self.duts {
            if t.duts.as_ref().is_some_and(|l| !l.contains(&d.name)) {
                continue;
            }
            let ok = match d.driver {
                Driver::Wire | Driver::LinuxRouter => true,
                Driver::Lanyard => d.inline.is_none(),
                _ => false,
            };
            if !ok {
                return Err(bad(
                    f,
                    format!(
                        "ospf: DUT {:?} ({}{}) cannot learn routes by OSPF: the lab runs FRR on lanyard \
                         (routed ports, zebra to Lanyard over FPM) and linux-router (zebra to the kernel); \
                         leave the others out with duts:",
                        d.name,
                        d.driver.as_str(),
                        if d.inline.is_some() { ", inline" } else { "" }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `flows`, `subscribers` and `prime-rate` of test `i`, checked:
    /// layer-3 rate tests on DUTs that do not route (the flows' addresses
    /// are in no route).
    fn flow_set(
        &self,
        i: usize,
        t: &TestSpec,
        layer: Option<u8>,
        new_flows: bool,
    ) -> Result<(u32, u32, f64), LabError> {
        let f = |n: &str| format!("tests[{i}].{n}");
        let Some(flows) = t.flows else {
            for (k, set) in [
                (
                    "subscribers",
                    t.subscribers.is_some() && t.kind != TestKind::Subscribers,
                ),
                ("prime-rate", t.prime_rate.is_some()),
            ] {
                if set {
                    return Err(bad(f(k), "only with flows: N"));
                }
            }
            return Ok((0, 0, 0.0));
        };
        if !t.kind.is_port_pair_rate() || t.kind == TestKind::Disruption {
            return Err(bad(
                f("flows"),
                "only throughput, latency, back-to-back and frame-loss tests take it",
            ));
        }
        if layer != Some(3) {
            return Err(bad(
                f("flows"),
                "needs layer-3 frames (layer: 3 or family: ipv6): flows are UDP",
            ));
        }
        if new_flows {
            return Err(bad(
                f("flows"),
                "not with new-flows (every frame its own flow)",
            ));
        }
        if t.routes.is_some() || t.routes6.is_some() {
            return Err(bad(
                f("flows"),
                "not with routes: the flows' addresses replace the route-sampled ones",
            ));
        }
        if !(1..=MAX_FLOWS).contains(&flows) {
            return Err(bad(f("flows"), format!("must be 1..{}", MAX_FLOWS)));
        }
        let subscribers = t.subscribers.unwrap_or(flows.min(MAX_SUBSCRIBERS));
        if !(1..=flows.min(MAX_SUBSCRIBERS)).contains(&subscribers) {
            return Err(bad(
                f("subscribers"),
                format!(
                    "must be 1..{} (at most one per flow)",
                    flows.min(MAX_SUBSCRIBERS)
                ),
            ));
        }
        let prime_rate = t.prime_rate.unwrap_or(100_000.0);
        if !(1000.0..=10_000_000.0).contains(&prime_rate) {
            return Err(bad(f("prime-rate"), "must be 1000..10000000 frames/s"));
        }
        // A router drops them: no route covers the flows' addresses.
        for d in &self.duts {
            if t.duts.as_ref().is_some_and(|ds| !ds.contains(&d.name)) {
                continue;
            }
            let passes = match d.driver {
                Driver::Wire | Driver::LinuxBridge | Driver::Lossy | Driver::Ovs => true,
                Driver::Lanyard => d.inline.is_some(),
                _ => false,
            };
            if d.inline == Some(InlineMode::Engine) && d.inline_flows.unwrap_or(65_536) < flows {
                return Err(bad(
                    f("flows"),
                    format!(
                        "DUT {:?} holds {} flows (inline-flows); set inline-flows to at least {flows}",
                        d.name,
                        d.inline_flows.unwrap_or(65_536)
                    ),
                ));
            }
            if !passes {
                return Err(bad(
                    f("flows"),
                    format!(
                        "DUT {:?} ({}) routes or tunnels the frames; flows: N needs DUTs that pass them as they are (inline lanyard, linux-bridge, ovs, wire); list the others in duts:",
                        d.name,
                        d.driver.as_str()
                    ),
                ));
            }
        }
        Ok((flows, subscribers, prime_rate))
    }

    /// The multicast parameters of test `i` (None for other types, whose
    /// multicast-only keys are errors).
    fn multicast(&self, i: usize, t: &TestSpec) -> Result<Option<Multicast>, LabError> {
        let f = |n: &str| format!("tests[{i}].{n}");
        let only: [(&str, bool); 11] = [
            ("sources", t.sources.is_some()),
            ("receivers", t.receivers.is_some()),
            ("groups", t.groups.is_some()),
            ("replication", t.replication.is_some()),
            ("filter-mode", t.filter_mode.is_some()),
            ("igmp-version", t.igmp_version.is_some()),
            ("first-group", t.first_group.is_some()),
            ("join-leave", t.join_leave.is_some()),
            ("delay-rate", t.delay_rate.is_some()),
            ("leave-wait", t.leave_wait.is_some()),
            ("line-rate-mbps", t.line_rate_mbps.is_some()),
        ];
        if t.kind != TestKind::Multicast {
            let latency_takes = |k: &str| t.kind == TestKind::Latency && k == "line-rate-mbps";
            if let Some((k, _)) = only.iter().find(|(k, set)| *set && !latency_takes(k)) {
                return Err(bad(f(k), "only multicast tests take it"));
            }
            return Ok(None);
        }
        if t.family == Some(Family::Ipv6) {
            return Err(bad(
                f("family"),
                "multicast tests are IPv4 (IGMP); MLD is not implemented",
            ));
        }
        for (k, set) in [
            ("bidirectional", t.bidirectional.is_some()),
            ("hosts", t.hosts.is_some()),
            ("routes", t.routes.is_some() || t.routes6.is_some()),
            ("ports", t.ports.is_some()),
        ] {
            if set {
                return Err(bad(f(k), "not a multicast option"));
            }
        }
        let sources = t.sources.unwrap_or(1);
        if !(1..=32).contains(&sources) {
            return Err(bad(f("sources"), "must be 1..32"));
        }
        let receivers = t.receivers.unwrap_or(4);
        if receivers == 0 || sources + receivers > 64 {
            return Err(bad(
                f("receivers"),
                format!("must be at least 1, with sources + receivers <= 64 (sources = {sources})"),
            ));
        }
        let groups = t.groups.unwrap_or(1);
        if !(1..=1024).contains(&groups) {
            return Err(bad(f("groups"), "must be 1..1024"));
        }
        if (sources as u64) * (groups as u64) > 8192 {
            return Err(bad(
                f("groups"),
                format!(
                    "sources x groups must be at most 8192 (one stream each), got {}",
                    sources as u32 * groups
                ),
            ));
        }
        let replication = match t.replication {
            None | Some(Replication::Word(AllWord::All)) => None,
            Some(Replication::Count(k)) if (1..=receivers).contains(&k) => Some(k),
            Some(Replication::Count(k)) => {
                return Err(bad(
                    f("replication"),
                    format!("{k}: receivers per group must be 1..{receivers} (or all)"),
                ))
            }
        };
        let igmp_version = t.igmp_version.unwrap_or(3);
        if igmp_version != 2 && igmp_version != 3 {
            return Err(bad(f("igmp-version"), "must be 2 or 3"));
        }
        let filter = match (t.filter_mode, igmp_version) {
            (Some(FilterMode::Include), 2) => {
                return Err(bad(
                    f("filter-mode"),
                    "IGMPv2 has no source filter: use exclude (any source) or igmp-version: 3",
                ))
            }
            (None, 2) => FilterMode::Exclude,
            (m, _) => m.unwrap_or_default(),
        };
        let first = t.first_group.unwrap_or(match filter {
            FilterMode::Include => std::net::Ipv4Addr::new(232, 1, 0, 1),
            FilterMode::Exclude => std::net::Ipv4Addr::new(239, 1, 0, 1),
        });
        let lo = u32::from(first);
        let hi = lo as u64 + groups as u64 - 1;
        // Link-local groups (224.0.0.x) are flooded by every snooping switch.
        if !first.is_multicast() || lo < 0xE000_0100 || hi > 0xEFFF_FFFF {
            return Err(bad(
                f("first-group"),
                format!("{first} + {groups} groups must stay within 224.0.1.0..239.255.255.255"),
            ));
        }
        let delay_rate = positive(f("delay-rate"), t.delay_rate.unwrap_or(10_000.0))?;
        let leave_wait = t.leave_wait.unwrap_or(3.0);
        if !(leave_wait.is_finite() && leave_wait >= 0.5) {
            return Err(bad(f("leave-wait"), "at least 0.5 s"));
        }
        Ok(Some(Multicast {
            sources,
            receivers,
            groups,
            replication,
            filter,
            igmp_version,
            first_group: first.octets(),
            join_leave: t.join_leave.unwrap_or(false),
            delay_rate,
            leave_wait,
            line_rate_mbps: positive(f("line-rate-mbps"), t.line_rate_mbps.unwrap_or(1000.0))?,
        }))
    }

    /// The convergence parameters of test `i` (None for other types, whose
    /// convergence-only keys are errors).
    fn convergence(
        &self,
        i: usize,
        t: &TestSpec,
        has_rate: bool,
        max_fraction: Option<f64>,
        addresses: u32,
    ) -> Result<Option<Convergence>, LabError> {
        let f = |n: &str| format!("tests[{i}].{n}");
        let only: [(&str, bool); 10] = [
            ("topology", t.topology.is_some()),
            ("event", t.event.is_some()),
            ("event-side", t.event_side.is_some()),
            ("event-command", t.event_command.is_some()),
            ("restore-command", t.restore_command.is_some()),
            ("event-at", t.event_at.is_some()),
            ("after-event", t.after_event.is_some()),
            ("streams", t.streams.is_some()),
            ("goal-ms", t.goal_ms.is_some()),
            ("restore-timeout", t.restore_timeout.is_some()),
        ];
        if t.kind != TestKind::Convergence {
            if let Some((k, _)) = only.iter().find(|(_, set)| *set) {
                return Err(bad(f(k), "only convergence tests take it"));
            }
            return Ok(None);
        }
        if !has_rate {
            return Err(bad(
                f("rate"),
                "required by convergence tests: frames/s from the source port, max, or \"N%\" of max",
            ));
        }
        if t.trial_duration.is_some() {
            return Err(bad(
                f("trial-duration"),
                "convergence trials last event-at + after-event seconds",
            ));
        }
        if t.layer.is_some_and(|l| l != 2) || t.family.is_some() {
            return Err(bad(f("layer"), "convergence tests are layer 2"));
        }
        for (k, set) in [
            ("bidirectional", t.bidirectional.is_some()),
            ("hosts", t.hosts.is_some()),
            ("routes", t.routes.is_some() || t.routes6.is_some()),
        ] {
            if set {
                return Err(bad(f(k), "not a convergence option"));
            }
        }
        let event = t.event.unwrap_or(Event::LinkDown);
        if t.event_side.is_some() && event != Event::LinkDown {
            return Err(bad(f("event-side"), "only with event: link-down"));
        }
        match (&t.event_command, event) {
            (None, Event::Command) => {
                return Err(bad(
                    f("event-command"),
                    "required with event: command (a shell command run in the DUT namespace)",
                ))
            }
            (Some(c), Event::Command) if c.trim().is_empty() => {
                return Err(bad(f("event-command"), "must not be empty"))
            }
            (Some(_), e) if e != Event::Command => {
                return Err(bad(f("event-command"), "only with event: command"))
            }
            _ => {}
        }
        let event_at = t.event_at.unwrap_or(1.0);
        if !(event_at.is_finite() && event_at >= 1.0) {
            return Err(bad(
                f("event-at"),
                format!("at least 1 s of steady traffic before the event, got {event_at}"),
            ));
        }
        let after_event = t.after_event.unwrap_or(2.0);
        if !(after_event.is_finite() && after_event >= 2.0) {
            return Err(bad(
                f("after-event"),
                format!("at least 2 s of traffic after the event, got {after_event}"),
            ));
        }
        let streams = t.streams.unwrap_or(16.min(addresses));
        if streams == 0 || streams > 1024 || streams > addresses {
            return Err(bad(
                f("streams"),
                format!("must be 1..1024 and at most addresses ({addresses})"),
            ));
        }
        if t.trials == Some(0) {
            return Err(bad(f("trials"), "must be at least 1"));
        }
        Ok(Some(Convergence {
            topology: t.topology.unwrap_or_default(),
            event,
            event_side: t.event_side.unwrap_or_default(),
            event_command: t.event_command.clone(),
            restore_command: t.restore_command.clone(),
            event_at,
            after_event,
            streams,
            goal_ms: positive(f("goal-ms"), t.goal_ms.unwrap_or(1.0))?,
            restore_timeout: positive(f("restore-timeout"), t.restore_timeout.unwrap_or(10.0))?,
            max_fraction,
        }))
    }

    /// Ports the topology of `dut` needs (the most any test uses).
    pub fn ports_needed(&self) -> usize {
        (0..self.tests.len())
            .filter_map(|i| self.test(i).ok())
            .map(|t| t.ports)
            .max()
            .unwrap_or(2)
    }
}

/// A published report's figure a test reproduces, printed beside the result.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// Test name (filled in from the plan).
    #[serde(default)]
    pub test: String,
    /// Which report ("top-of-rack switch").
    pub report: String,
    /// Which table or figure ("table 1").
    pub table: String,
    /// The report's own figure, as published.
    pub figure: String,
    /// How the test bed's scale differs (ports, rates, table sizes).
    pub scale: String,
    /// The report's figure for each design, by the name of the DUT that
    /// stands for it (`{vs-pair: 322 ms, rstp: 6.883 s (RSTP + HSRP)}`):
    /// printed in the row of that DUT (disruption tests with tiers).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub duts: BTreeMap<String, String>,
}

/// The subscribers test's parameters of test `i` (None for other kinds,
/// which must not set `sample`), checked against the plan's DUTs.
fn check_subscribers(
    plan: &Plan,
    i: usize,
    t: &TestSpec,
    sizes: &[FrameSize],
    rate: Option<f64>,
    duration: f64,
) -> Result<Option<Provision>, LabError> {
    let f = |n: &str| format!("tests[{i}].{n}");
    let bad = |field: String, msg: String| LabError::Plan(format!("{field}: {msg}"));
    if t.kind != TestKind::Subscribers {
        if t.sample.is_some() {
            return Err(bad(f("sample"), "only subscribers tests take it".into()));
        }
        return Ok(None);
    }
    for (k, set) in [
        ("layer", t.layer == Some(2)),
        ("family", t.family == Some(crate::plan::Family::Ipv6)),
        ("routes", t.routes.is_some() || t.routes6.is_some()),
        ("flows", t.flows.is_some()),
        ("new-flows", t.new_flows.is_some()),
        ("bidirectional", t.bidirectional.is_some()),
        ("hosts", t.hosts.is_some()),
        ("vlans", t.vlans.is_some()),
        ("trials", t.trials.is_some_and(|n| n != 1)),
    ] {
        if set {
            return Err(bad(
                f(k),
                "not a subscribers option (one bulk load, then IPv4/UDP both ways between \
                 the sampled subscribers and a server, once)"
                    .into(),
            ));
        }
    }
    let n = t.subscribers.unwrap_or(0);
    if !(1..=MAX_SUBSCRIBERS).contains(&n) {
        return Err(bad(
            f("subscribers"),
            format!("required: 1..{MAX_SUBSCRIBERS} subscribers to provision"),
        ));
    }
    if sizes.len() != 1 || sizes[0].sizes.len() != 1 {
        return Err(bad(
            f("frame-sizes"),
            "one fixed frame size (the counters are checked in bytes)".into(),
        ));
    }
    let sample = t.sample.unwrap_or(DEFAULT_SAMPLE.min(n));
    if !(1..=n.min(MAX_SAMPLE)).contains(&sample) {
        return Err(bad(
            f("sample"),
            format!("must be 1..{} (at most the subscribers)", n.min(MAX_SAMPLE)),
        ));
    }
    let rate = rate.unwrap_or(DEFAULT_RATE);
    if !(1.0..=MAX_RATE).contains(&rate) {
        return Err(bad(
            f("rate"),
            format!("must be 1..{MAX_RATE} frames/s per port"),
        ));
    }
    let frames = (rate * duration / f64::from(sample)).floor() as u64;
    if frames == 0 {
        return Err(bad(
            f("trial-duration"),
            format!(
                "{duration} s at {rate} frames/s is less than one frame per sampled subscriber \
                 ({sample})"
            ),
        ));
    }
    for d in &plan.duts {
        if t.duts.as_ref().is_some_and(|ds| !ds.contains(&d.name)) {
            continue;
        }
        if !(d.driver == Driver::Lanyard && d.inline == Some(InlineMode::Engine)) {
            return Err(bad(
                f("duts"),
                format!(
                    "DUT {:?} ({}) has no inline engine: subscribers needs `driver: lanyard, \
                     inline: engine`; list the DUTs it runs on in duts:",
                    d.name,
                    d.driver.as_str()
                ),
            ));
        }
    }
    Ok(Some(Provision {
        subscribers: n,
        sample,
        frames,
        rate,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "
name: t
duts: [{name: c, driver: wire}]
tests:
  - type: throughput
    frame-sizes: [64, imix]
    search: {resolution: 0.05, max-trials: 6}
";

    #[test]
    fn parses_and_resolves() {
        let p = Plan::parse(OK).unwrap();
        let t = p.test(0).unwrap();
        assert_eq!(t.frame_sizes.len(), 2);
        assert_eq!(t.frame_sizes[1].label, "imix");
        assert!((t.frame_sizes[1].average() - 362.0).abs() < 30.0);
        assert_eq!(t.max_trials, 6);
        assert_eq!(p.ports_needed(), 2);
    }

    fn err(text: &str) -> String {
        match Plan::parse(text) {
            Err(LabError::Plan(m)) => m,
            other => panic!("expected plan error, got {other:?}"),
        }
    }

    #[test]
    fn errors_name_the_field() {
        let e = err(
            "name: t\nduts: [{name: c, driver: wire, colour: red}]\ntests: [{type: throughput}]",
        );
        assert!(e.contains("duts[0]") && e.contains("colour"), "{e}");
        let e = err("name: t\nduts: [{name: c, driver: toaster}]\ntests: [{type: throughput}]");
        assert!(e.contains("duts[0].driver"), "{e}");
        let e = err("name: t\nduts: [{name: c, driver: wire}]\ntests: [{type: throughput, frame-sizes: [32]}]");
        assert!(e.contains("tests[0].frame-sizes[0]"), "{e}");
        let e = err("name: t\nduts: [{name: c, driver: wire}]\ntests: [{type: throughput, search: {resolution: 2}}]");
        assert!(e.contains("tests[0].search.resolution"), "{e}");
        let e = err("name: t\nduts: [{name: c, driver: wire}]\ntests: [{type: latency}]");
        assert!(e.contains("tests[0].rate"), "{e}");
        let e = err("name: t\nduts: [{name: c, driver: wire}, {name: c, driver: ovs}]\ntests: [{type: holb}]");
        assert!(e.contains("duts[1].name"), "{e}");
        let e = err("name: t\nduts: []\ntests: [{type: holb}]");
        assert!(e.contains("duts"), "{e}");
        let e = err("name: t\nduts: [{name: l, driver: lossy}]\ntests: [{type: holb}]");
        assert!(e.contains("rate-kbit"), "{e}");
        let e = err("- just a list");
        assert!(!e.is_empty());
    }

    #[test]
    fn new_flows_option() {
        let p = Plan::parse(
            "
name: t
duts: [{name: l, driver: lanyard, inline: engine}]
tests:
  - {type: throughput, layer: 3, routes: 100, new-flows: true, frame-sizes: [64]}
  - {type: latency, rate: 10, family: ipv6, frame-sizes: [128], new-flows: true}
  - {type: throughput, layer: 3}
  - {type: throughput, layer: 3, new-flows: tcp, frame-sizes: [64]}
  - {type: frame-loss, family: ipv6, new-flows: icmp, frame-sizes: [84]}
  - {type: back-to-back, layer: 3, new-flows: mix}
  - {type: throughput, layer: 3, new-flows: udp}
  - {type: throughput, layer: 3, new-flows: false}
",
        )
        .unwrap();
        let nf = |i| p.test(i).unwrap().new_flows;
        assert_eq!(nf(0), NewFlows::Udp);
        assert_eq!(nf(1), NewFlows::Udp);
        assert_eq!(nf(2), NewFlows::Off);
        assert_eq!(nf(3), NewFlows::Tcp);
        assert_eq!(nf(4), NewFlows::Icmp);
        assert_eq!(nf(5), NewFlows::Mix);
        assert_eq!(nf(6), NewFlows::Udp);
        assert_eq!(nf(7), NewFlows::Off);
        let head = "name: t\nduts: [{name: l, driver: lanyard}]\ntests: ";
        for test in [
            "[{type: throughput, new-flows: true}]",
            "[{type: throughput, new-flows: tcp}]",
            "[{type: throughput, layer: 2, new-flows: true}]",
            "[{type: throughput, layer: 2, new-flows: icmp}]",
            "[{type: multicast, new-flows: true}]",
            "[{type: disruption, layer: 3, rate: 10, new-flows: true, commands: [{at: 1, run: x}]}]",
            "[{type: throughput, layer: 3, new-flows: sctp}]",
            "[{type: throughput, layer: 3, new-flows: TCP}]",
        ] {
            let e = err(&format!("{head}{test}"));
            assert!(e.contains("tests[0].new-flows"), "{test}: {e}");
        }
        let e = err(&format!(
            "{head}[{{type: throughput, layer: 3, new-flows: sctp}}]"
        ));
        assert!(
            e.contains("'sctp' is not true, false, udp, tcp, icmp or mix"),
            "{e}"
        );
        // TCP and ICMP fit wherever UDP does (the same 26 bytes after the
        // IP header), and not below.
        let e = err(&format!(
            "{head}[{{type: throughput, family: ipv6, new-flows: tcp, frame-sizes: [64]}}]"
        ));
        assert!(
            e.contains("tests[0].frame-sizes: 64: IPv6 test frames (UDP, TCP or ICMP"),
            "{e}"
        );
        let e = err(&format!(
            "{head}[{{type: throughput, layer: 3, new-flows: tcp, flows: 10}}]"
        ));
        assert!(e.contains("tests[0].flows: not with new-flows"), "{e}");
    }

    #[test]
    fn flows_and_subscribers_option() {
        let p = Plan::parse(
            "
name: t
duts:
  - {name: w, driver: wire}
  - {name: e, driver: lanyard, inline: engine, inline-flows: 2097152}
  - {name: b, driver: lanyard, inline: bypass}
  - {name: r, driver: linux-router}
tests:
  - {type: throughput, layer: 3, flows: 1000000, subscribers: 250000, duts: [w, e, b]}
  - {type: latency, rate: 10, family: ipv6, flows: 5000, prime-rate: 50000, frame-sizes: [128], duts: [e]}
  - {type: throughput, layer: 3}
",
        )
        .unwrap();
        let t = p.test(0).unwrap();
        assert_eq!(
            (t.flows, t.subscribers, t.prime_rate),
            (1_000_000, 250_000, 100_000.0)
        );
        let t = p.test(1).unwrap();
        assert_eq!(
            (t.flows, t.subscribers, t.prime_rate),
            (5000, 5000, 50_000.0)
        );
        let t = p.test(2).unwrap();
        assert_eq!((t.flows, t.subscribers), (0, 0));
        // Only the inline engine provisions the test's subscribers.
        let t0 = p.test(0).unwrap();
        let sub = |d: usize| crate::dut::Setup::for_test(&p.duts[d], &t0).subscribers;
        assert_eq!((sub(0), sub(1), sub(2)), (0, 250_000, 0));
        let head = "name: t\nduts: [{name: l, driver: lanyard, inline: engine, inline-flows: 1048576}, {name: r, driver: linux-router}]\ntests: ";
        for (test, key, why) in [
            (
                "[{type: throughput, layer: 3, flows: 10}]",
                "flows",
                "\"r\" (linux-router)",
            ),
            (
                "[{type: throughput, flows: 10, duts: [l]}]",
                "flows",
                "layer-3",
            ),
            (
                "[{type: throughput, layer: 3, flows: 0, duts: [l]}]",
                "flows",
                "must be",
            ),
            (
                "[{type: throughput, layer: 3, flows: 20000000, duts: [l]}]",
                "flows",
                "must be",
            ),
            (
                "[{type: throughput, layer: 3, flows: 2000000, duts: [l]}]",
                "flows",
                "inline-flows",
            ),
            (
                "[{type: throughput, layer: 3, flows: 10, new-flows: true, duts: [l]}]",
                "flows",
                "new-flows",
            ),
            (
                "[{type: throughput, layer: 3, flows: 10, routes: 5, duts: [l]}]",
                "flows",
                "routes",
            ),
            ("[{type: multicast, flows: 10, duts: [l]}]", "flows", "only"),
            (
                "[{type: throughput, layer: 3, flows: 10, subscribers: 11, duts: [l]}]",
                "subscribers",
                "one per flow",
            ),
            (
                "[{type: throughput, layer: 3, subscribers: 11, duts: [l]}]",
                "subscribers",
                "only with",
            ),
            (
                "[{type: throughput, layer: 3, flows: 10, prime-rate: 5, duts: [l]}]",
                "prime-rate",
                "frames/s",
            ),
        ] {
            let e = err(&format!("{head}{test}"));
            assert!(
                e.contains(&format!("tests[0].{key}")) && e.contains(why),
                "{test}: {e}"
            );
        }
    }

    #[test]
    fn mirror_and_copp_options() {
        let p = Plan::parse(
            "
name: t
duts: [{name: l, driver: lanyard}]
tests:
  - {type: throughput, mirror-sessions: 8, frame-sizes: [64]}
  - {type: copp, frame-sizes: [64], ping-interval-ms: 5, trial-duration: 3}
  - {type: copp}
",
        )
        .unwrap();
        let t = p.test(0).unwrap();
        assert_eq!((t.mirror_sessions, t.ports), (8, 10));
        assert_eq!(p.ports_needed(), 10);
        let c = p.test(1).unwrap();
        assert_eq!((c.kind, c.layer, c.ports), (TestKind::Copp, Some(3), 2));
        assert_eq!((c.ping_interval_ms, c.trial_duration), (5, 3.0));
        assert_eq!(p.test(2).unwrap().ping_interval_ms, 10);
        let head = "name: t\nduts: [{name: l, driver: lanyard}]\ntests: ";
        for (test, field) in [
            (
                "[{type: latency, rate: 10, mirror-sessions: 2}]",
                "tests[0].mirror-sessions",
            ),
            (
                "[{type: throughput, mirror-sessions: 17}]",
                "tests[0].mirror-sessions",
            ),
            (
                "[{type: throughput, mirror-sessions: 0}]",
                "tests[0].mirror-sessions",
            ),
            (
                "[{type: throughput, mirror-sessions: 2, layer: 3}]",
                "tests[0].layer",
            ),
            (
                "[{type: throughput, mirror-sessions: 2, bidirectional: true}]",
                "tests[0].bidirectional",
            ),
            ("[{type: copp, layer: 2}]", "tests[0].layer"),
            (
                "[{type: copp, family: ipv6, frame-sizes: [84]}]",
                "tests[0].layer",
            ),
            ("[{type: copp, routes: 10}]", "tests[0].routes"),
            (
                "[{type: copp, ping-interval-ms: 1}]",
                "tests[0].ping-interval-ms",
            ),
            (
                "[{type: throughput, ping-interval-ms: 10}]",
                "tests[0].ping-interval-ms",
            ),
        ] {
            let e = err(&format!("{head}{test}"));
            assert!(e.contains(field), "{test}: {e}");
        }
    }

    #[test]
    fn routes_from_ospf_is_checked() {
        let head = "name: t\nduts:\n  - {name: w, driver: wire}\n  - {name: r, driver: linux-router}\n  - {name: l, driver: lanyard}\n  - {name: b, driver: linux-bridge}\ntests:\n";
        let p = Plan::parse(&format!(
            "{head}  - {{type: throughput, layer: 3, routes: 200, routes-from: ospf, duts: [w, r, l]}}\n  - {{type: latency, layer: 3, routes: 5, rate: 1000, duts: [l]}}\n"
        ))
        .unwrap();
        assert_eq!(p.test(0).unwrap().routes_from, RoutesFrom::Ospf);
        assert_eq!(p.test(1).unwrap().routes_from, RoutesFrom::Static);
        for (test, want) in [
            // linux-bridge is in the test (no duts: list).
            (
                "{type: throughput, layer: 3, routes: 10, routes-from: ospf}",
                "DUT \"b\" (linux-bridge) cannot learn routes by OSPF",
            ),
            (
                "{type: throughput, routes: 10, routes-from: ospf, duts: [l]}",
                "needs layer: 3",
            ),
            (
                "{type: throughput, layer: 3, routes-from: ospf, duts: [l]}",
                "needs routes: N",
            ),
            (
                "{type: throughput, family: ipv6, routes6: 10, routes-from: ospf, frame-sizes: [84], duts: [l]}",
                "needs layer: 3 (IPv4",
            ),
            (
                "{type: throughput, layer: 3, routes: 10, routes6: 5, routes-from: ospf, duts: [l]}",
                "IPv4 only",
            ),
            (
                "{type: back-to-back, layer: 3, routes: 10, routes-from: ospf, duts: [l]}",
                "only throughput and latency",
            ),
            (
                "{type: throughput, layer: 3, routes: 10, routes-from: rip, duts: [l]}",
                "routes-from",
            ),
        ] {
            let e = err(&format!("{head}  - {test}\n"));
            assert!(e.contains(want), "{test}: {e}");
            if !test.contains("rip") {
                assert!(e.contains("tests[0].routes-from"), "{test}: {e}");
            }
        }
        let e = err("name: t\nduts: [{name: i, driver: lanyard, inline: engine}]\ntests: [{type: throughput, layer: 3, routes: 10, routes-from: ospf}]");
        assert!(e.contains("(lanyard, inline)"), "{e}");
    }

    #[test]
    fn layer3_options() {
        let p = Plan::parse(
            "
name: t
duts:
  - {name: r, driver: linux-router, routes: 240000, routes6: 118000}
  - {name: l, driver: lanyard}
tests:
  - {type: throughput, layer: 3, frame-sizes: [64]}
  - {type: throughput, family: ipv6, routes6: 10, frame-sizes: [84, 9216], duts: [l]}
  - {type: throughput, layer: 3, family: ipv4, routes: 500}
",
        )
        .unwrap();
        assert!(!p.interleave);
        assert_eq!(p.duts[0].routes, Some(240_000));
        assert_eq!(p.duts[0].routes6, Some(118_000));
        let t0 = p.test(0).unwrap();
        assert_eq!(
            (t0.layer, t0.family, t0.routes),
            (Some(3), Family::Ipv4, None)
        );
        let t1 = p.test(1).unwrap();
        // family implies layer 3
        assert_eq!((t1.layer, t1.family), (Some(3), Family::Ipv6));
        assert_eq!((t1.routes, t1.routes6), (None, Some(10)));
        assert_eq!(t1.duts.as_deref(), Some(&["l".to_string()][..]));
        let t2 = p.test(2).unwrap();
        assert_eq!((t2.routes, t2.family), (Some(500), Family::Ipv4));
        // Test values override the DUT's; only lanyard switches layer.
        let s = crate::dut::Setup::for_test(&p.duts[0], &t2);
        assert_eq!((s.layer3, s.routes, s.routes6), (true, 500, 118_000));
        let s = crate::dut::Setup::for_test(&p.duts[1], &t1);
        assert_eq!((s.layer3, s.routes, s.routes6), (true, 0, 10));
        let l2 = Plan::parse(
            "name: t\ninterleave: true\nduts: [{name: l, driver: lanyard}]\ntests: [{type: throughput}]",
        )
        .unwrap();
        assert!(l2.interleave);
        let s = crate::dut::Setup::for_test(&l2.duts[0], &l2.test(0).unwrap());
        assert!(!s.layer3);
    }

    #[test]
    fn layer3_errors_name_the_field() {
        let base = "name: t\nduts: [{name: c, driver: lanyard}]\ntests: ";
        let e = err(&format!("{base}[{{type: throughput, family: ipv6}}]"));
        assert!(
            e.contains("tests[0].frame-sizes") && e.contains("84"),
            "{e}"
        );
        let e = err(&format!(
            "{base}[{{type: throughput, family: ipv6, frame-sizes: [imix]}}]"
        ));
        assert!(
            e.contains("tests[0].frame-sizes") && e.contains("imix"),
            "{e}"
        );
        let e = err(&format!(
            "{base}[{{type: throughput, layer: 2, family: ipv6}}]"
        ));
        assert!(e.contains("tests[0].family"), "{e}");
        let e = err(&format!("{base}[{{type: throughput, family: ipv5}}]"));
        assert!(e.contains("tests[0].family"), "{e}");
        let e = err(&format!("{base}[{{type: throughput, routes: 99000000}}]"));
        assert!(e.contains("tests[0].routes"), "{e}");
        let e = err(&format!("{base}[{{type: throughput, routes6: 99000000}}]"));
        assert!(e.contains("tests[0].routes6"), "{e}");
        let e = err(&format!("{base}[{{type: throughput, duts: [nope]}}]"));
        assert!(e.contains("tests[0].duts[0]") && e.contains("nope"), "{e}");
        let e = err(&format!("{base}[{{type: throughput, duts: []}}]"));
        assert!(e.contains("tests[0].duts"), "{e}");
        let e = err(
            "name: t\nduts: [{name: c, driver: lanyard, routes: -1}]\ntests: [{type: throughput}]",
        );
        assert!(e.contains("duts[0].routes"), "{e}");
        let e = err(
            "name: t\nduts: [{name: c, driver: lanyard, routes: 5000000}]\ntests: [{type: throughput}]",
        );
        assert!(e.contains("duts[0].routes"), "{e}");
    }

    #[test]
    fn lanyard_pair_and_before_trial() {
        let p = Plan::parse(
            "
name: vs
duts:
  - {name: pair, driver: lanyard-pair, workers: 1, port-type: af-xdp}
tests:
  - {name: back, type: disruption, rate: 1000, trial-duration: 4,
     before-trial: ['\"$LAB_NODE_A\" power-off', 'sleep 1'],
     commands: [{at: 1, run: '\"$LAB_NODE_A\" start'}]}
",
        )
        .unwrap();
        assert_eq!(p.duts[0].driver, Driver::LanyardPair);
        assert_eq!(p.duts[0].driver.as_str(), "lanyard-pair");
        let t = p.test(0).unwrap();
        assert_eq!(t.before_trial, ["\"$LAB_NODE_A\" power-off", "sleep 1"]);
        assert_eq!((t.tiers, t.ports), (0, 2));
        // Tiers: two tester ports per tier, four in all.
        let p = Plan::parse(
            "name: vs\nduts: [{name: p, driver: lanyard-pair}]\ntests:\n  \
             - {type: disruption, rate: 1000, tiers: 2, commands: [{at: 1, run: 'true'}]}\n",
        )
        .unwrap();
        let t = p.test(0).unwrap();
        assert_eq!((t.tiers, t.ports, p.ports_needed()), (2, 4, 4));
        for (bad_test, want) in [
            (
                "{type: throughput, reference: {report: r, table: t, figure: f, scale: s, duts: {nope: 1 s}}}",
                "reference.duts: no DUT named \"nope\"",
            ),
            (
                "{type: throughput, tiers: 2}",
                "tiers: only disruption tests take it",
            ),
            (
                "{type: disruption, rate: 1000, tiers: 9, commands: [{at: 1, run: 'true'}]}",
                "tiers: must be 1..8",
            ),
            (
                "{type: throughput, before-trial: ['true']}",
                "before-trial: only disruption tests take it",
            ),
            (
                "{type: disruption, rate: 1000, before-trial: [' '], commands: [{at: 1, run: 'true'}]}",
                "before-trial[0]: must not be empty",
            ),
        ] {
            let e = Plan::parse(&format!(
                "name: x\nduts: [{{name: p, driver: lanyard-pair}}]\ntests:\n  - {bad_test}\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(want), "{e}");
        }
        let e = Plan::parse(
            "name: x\nduts: [{name: p, driver: lanyard-pair, port-type: afxdp}]\ntests: [{type: throughput}]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("is not auto, af-xdp"), "{e}");
    }

    #[test]
    fn lanyard_pe_and_vlans() {
        let p = Plan::parse(
            "
name: pw
duts:
  - {name: pw, driver: lanyard-pe, circuits: vlan, uplinks: 2, services: true, port-type: af-packet}
  - {name: l2, driver: lanyard-pe, pe-mode: l2}
tests:
  - {type: throughput, vlans: 128, frame-sizes: [68]}
  - {type: disruption, vlans: 100, rate: 20000, commands: [{at: 1, run: '\"$LAB_PE\" cut'}]}
",
        )
        .unwrap();
        assert_eq!(p.duts[0].driver.as_str(), "lanyard-pe");
        assert_eq!(
            (p.duts[0].circuits, p.duts[0].uplinks, p.duts[1].pe_mode),
            (Some(Circuits::Vlan), Some(2), Some(PeMode::L2))
        );
        let (t0, t1) = (p.test(0).unwrap(), p.test(1).unwrap());
        assert_eq!((t0.vlans, t0.ports, t1.vlans, t1.ports), (128, 2, 100, 2));
        // L3VPN: tagged layer-3 frames, IPv4 from 68 bytes, IPv6 from 88.
        let p = Plan::parse(
            "
name: vpn
duts:
  - {name: vpn, driver: lanyard-pe, pe-mode: l3vpn, services: true}
  - {name: l3, driver: lanyard-pe, pe-mode: l3}
tests:
  - {type: throughput, layer: 3, vlans: 192, bidirectional: true, frame-sizes: [68, 1518]}
  - {type: latency, rate: 100, family: ipv6, vlans: 4, frame-sizes: [88]}
",
        )
        .unwrap();
        assert_eq!(
            (p.duts[0].pe_mode, p.duts[1].pe_mode),
            (Some(PeMode::L3vpn), Some(PeMode::L3))
        );
        let (t0, t1) = (p.test(0).unwrap(), p.test(1).unwrap());
        assert_eq!(
            (t0.vlans, t0.layer, t1.vlans, t1.layer),
            (192, Some(3), 4, Some(3))
        );
        for (bad_test, want) in [
            (
                "{type: throughput, vlans: 0}",
                "tests[0].vlans: must be 1..3995",
            ),
            (
                "{type: throughput, vlans: 3996}",
                "tests[0].vlans: must be 1..3995",
            ),
            (
                "{type: throughput, vlans: 2, layer: 3}",
                "tests[0].frame-sizes: 64: tagged IPv4/UDP frames (vlans: N, layer 3) need at least 68 bytes",
            ),
            (
                "{type: latency, rate: 10, vlans: 2, family: ipv6, frame-sizes: [84]}",
                "tests[0].frame-sizes: 84: tagged IPv6/UDP frames (vlans: N, layer 3) need at least 88 bytes",
            ),
            (
                "{type: throughput, vlans: 2, layer: 3, frame-sizes: [imix]}",
                "tests[0].frame-sizes: imix: tagged IPv4/UDP",
            ),
            (
                "{type: full-mesh, vlans: 2}",
                "tests[0].vlans: only throughput, latency",
            ),
            (
                "{type: disruption, rate: 1000, tiers: 2, vlans: 2, commands: [{at: 1, run: 'true'}]}",
                "tests[0].vlans: not with tiers",
            ),
        ] {
            let e = Plan::parse(&format!(
                "name: x\nduts: [{{name: p, driver: lanyard-pe}}]\ntests:\n  - {bad_test}\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(want), "{e}");
        }
        for (bad_dut, want) in [
            (
                "{name: p, driver: lanyard, circuits: port}",
                "duts[0].circuits: only the lanyard-pe",
            ),
            (
                "{name: p, driver: lanyard-pair, uplinks: 2}",
                "duts[0].uplinks: only the lanyard-pe",
            ),
            (
                "{name: p, driver: linux-bridge, pe-mode: l2}",
                "duts[0].pe-mode: only the lanyard-pe",
            ),
            (
                "{name: p, driver: lanyard-pe, uplinks: 3}",
                "duts[0].uplinks: must be 1 or 2",
            ),
            (
                "{name: p, driver: lanyard-pe, pe-mode: l2, circuits: vlan}",
                "pe-mode: l2 has no",
            ),
            (
                "{name: p, driver: lanyard-pe, pe-mode: l3vpn, circuits: vlan}",
                "duts[0].circuits: pe-mode: l3vpn has no attachment circuits",
            ),
            (
                "{name: p, driver: lanyard-pe, pe-mode: l3, uplinks: 2}",
                "duts[0].uplinks: pe-mode: l3 runs on one uplink",
            ),
            (
                "{name: p, driver: lanyard-pe, pe-mode: l3-vpn}",
                "duts[0].pe-mode",
            ),
            (
                "{name: p, driver: lanyard-pe, circuits: both}",
                "unknown variant",
            ),
            (
                "{name: p, driver: linux-bridge, services: true}",
                "only the lanyard and lanyard-pe",
            ),
        ] {
            let e = Plan::parse(&format!(
                "name: x\nduts: [{bad_dut}]\ntests: [{{type: throughput}}]\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn convergence_options() {
        let p = Plan::parse(
            "
name: c
duts:
  - {name: s, driver: linux-bridge, failover: script}
  - {name: b, driver: linux-bridge, failover: backup-port}
  - {name: l, driver: lanyard, preempt: false, mac-move-update: true}
  - {name: w, driver: wire}
tests:
  - {type: convergence, addresses: 90000, rate: 100000}
  - {type: convergence, addresses: 1000, rate: max, event: kill, trials: 2, streams: 4,
     event-at: 1.5, after-event: 3, goal-ms: 2, restore-timeout: 5}
  - {type: convergence, rate: '90%', event: link-down, event-side: tester}
  - {type: convergence, rate: 1000, event: command, event-command: 'true', restore-command: 'true'}
  - {type: convergence, rate: 1000, event: none, frame-sizes: [64, 1518]}
",
        )
        .unwrap();
        assert_eq!(p.duts[0].failover, Some(Failover::Script));
        assert_eq!(p.duts[1].failover, Some(Failover::BackupPort));
        assert_eq!(p.ports_needed(), 3);
        let t = p.test(0).unwrap();
        let c = t.convergence.clone().unwrap();
        assert_eq!(t.rate, Some(100_000.0));
        assert_eq!((t.trials, t.addresses, t.learn_rate), (5, 90_000, 50_000.0));
        assert_eq!(t.frame_sizes.len(), 1);
        assert_eq!(t.frame_sizes[0].label, "64");
        assert_eq!(
            (c.event, c.event_side, c.topology),
            (Event::LinkDown, EventSide::Dut, ConvTopology::BackupPair)
        );
        assert_eq!(
            (c.event_at, c.after_event, c.streams, c.goal_ms),
            (1.0, 2.0, 16, 1.0)
        );
        assert_eq!(c.max_fraction, None);
        assert_eq!(t.trial_duration, 3.0);
        let t = p.test(1).unwrap();
        let c = t.convergence.clone().unwrap();
        assert_eq!((t.rate, c.max_fraction), (None, Some(1.0)));
        assert_eq!((c.event, t.trials, c.streams), (Event::Kill, 2, 4));
        assert_eq!(
            (c.event_at, c.after_event, c.goal_ms, c.restore_timeout),
            (1.5, 3.0, 2.0, 5.0)
        );
        assert_eq!(t.trial_duration, 4.5);
        let c = p.test(2).unwrap().convergence.unwrap();
        assert_eq!(
            (c.max_fraction, c.event_side),
            (Some(0.9), EventSide::Tester)
        );
        let c = p.test(3).unwrap().convergence.unwrap();
        assert_eq!(c.event_command.as_deref(), Some("true"));
        assert_eq!(p.test(4).unwrap().frame_sizes.len(), 2);
        // Only convergence tests run the backup-pair setup, and only where
        // the DUT has one.
        let conv = p.test(0).unwrap();
        for (i, want) in [(0, true), (1, true), (2, true), (3, false)] {
            assert_eq!(
                crate::dut::Setup::for_test(&p.duts[i], &conv).backup_pair,
                want
            );
        }
        let thr =
            Plan::parse("name: t\nduts: [{name: l, driver: lanyard}]\ntests: [{type: throughput}]")
                .unwrap();
        assert!(!crate::dut::Setup::for_test(&thr.duts[0], &thr.test(0).unwrap()).backup_pair);
        assert_eq!(parse_max_rate("max"), Ok(1.0));
        assert_eq!(parse_max_rate("50%"), Ok(0.5));
        assert!(parse_max_rate("150%").is_err() && parse_max_rate("fast").is_err());
    }

    #[test]
    fn convergence_errors_name_the_field() {
        let base = "name: t\nduts: [{name: c, driver: linux-bridge}]\ntests: ";
        for (test, field, words) in [
            ("{type: convergence}", "tests[0].rate", "required"),
            ("{type: convergence, rate: fast}", "tests[0].rate", "max"),
            ("{type: convergence, rate: 0}", "tests[0].rate", "positive"),
            (
                "{type: latency, rate: max}",
                "tests[0].rate",
                "only convergence",
            ),
            (
                "{type: throughput, event: kill}",
                "tests[0].event",
                "only convergence",
            ),
            (
                "{type: throughput, streams: 4}",
                "tests[0].streams",
                "only convergence",
            ),
            (
                "{type: convergence, rate: 1000, event: explode}",
                "tests[0].event",
                "unknown variant",
            ),
            (
                "{type: convergence, rate: 1000, event: command}",
                "tests[0].event-command",
                "required",
            ),
            (
                "{type: convergence, rate: 1000, event-command: ls}",
                "tests[0].event-command",
                "only with event: command",
            ),
            (
                "{type: convergence, rate: 1000, event: kill, event-side: tester}",
                "tests[0].event-side",
                "link-down",
            ),
            (
                "{type: convergence, rate: 1000, event-at: 0.5}",
                "tests[0].event-at",
                "at least 1",
            ),
            (
                "{type: convergence, rate: 1000, after-event: 1}",
                "tests[0].after-event",
                "at least 2",
            ),
            (
                "{type: convergence, rate: 1000, addresses: 8, streams: 9}",
                "tests[0].streams",
                "at most addresses",
            ),
            (
                "{type: convergence, rate: 1000, streams: 2000}",
                "tests[0].streams",
                "1..1024",
            ),
            (
                "{type: convergence, rate: 1000, trial-duration: 5}",
                "tests[0].trial-duration",
                "event-at",
            ),
            (
                "{type: convergence, rate: 1000, layer: 3}",
                "tests[0].layer",
                "layer 2",
            ),
            (
                "{type: convergence, rate: 1000, hosts: 4}",
                "tests[0].hosts",
                "not a convergence",
            ),
            (
                "{type: convergence, rate: 1000, trials: 0}",
                "tests[0].trials",
                "at least 1",
            ),
            (
                "{type: convergence, rate: 1000, goal-ms: -1}",
                "tests[0].goal-ms",
                "positive",
            ),
            (
                "{type: convergence, rate: 1000, topology: ring}",
                "tests[0].topology",
                "unknown variant",
            ),
        ] {
            let e = err(&format!("{base}[{test}]"));
            assert!(e.contains(field) && e.contains(words), "{test}: {e}");
        }
        let e = err(
            "name: t\nduts: [{name: c, driver: lanyard, failover: script}]\ntests: [{type: holb}]",
        );
        assert!(e.contains("duts[0].failover"), "{e}");
        let e = err("name: t\nduts: [{name: c, driver: linux-bridge, failover: magic}]\ntests: [{type: holb}]");
        assert!(e.contains("duts[0].failover"), "{e}");
        let e =
            err("name: t\nduts: [{name: c, driver: ovs, preempt: true}]\ntests: [{type: holb}]");
        assert!(e.contains("duts[0].preempt"), "{e}");
        let e = err("name: t\nduts: [{name: c, driver: wire, mac-move-update: true}]\ntests: [{type: holb}]");
        assert!(e.contains("duts[0].mac-move-update"), "{e}");
    }

    #[test]
    fn multicast_options() {
        let p = Plan::parse(
            "
name: m
duts:
  - {name: b, driver: linux-bridge, igmp-querier: true, fast-leave: true}
  - {name: l, driver: lanyard, fast-leave: false}
  - {name: r, driver: linux-router}
tests:
  - {type: multicast}
  - {type: multicast, sources: 8, receivers: 24, groups: 48, replication: 3, layer: 3,
     filter-mode: exclude, first-group: 239.2.0.1, join-leave: true, delay-rate: 2000,
     leave-wait: 1, line-rate-mbps: 10000, rate: 1000}
  - {type: multicast, igmp-version: 2, replication: all}
",
        )
        .unwrap();
        assert_eq!(p.duts[0].fast_leave, Some(true));
        assert_eq!(p.ports_needed(), 32);
        let t = p.test(0).unwrap();
        let m = t.multicast.clone().unwrap();
        assert_eq!(t.ports, 5);
        assert_eq!((m.sources, m.receivers, m.groups), (1, 4, 1));
        assert_eq!(
            (m.replication, m.filter, m.igmp_version),
            (None, FilterMode::Include, 3)
        );
        assert_eq!(m.first_group, [232, 1, 0, 1]);
        assert!(!m.join_leave);
        let t = p.test(1).unwrap();
        let m = t.multicast.clone().unwrap();
        assert_eq!((t.ports, t.layer, t.rate), (32, Some(3), Some(1000.0)));
        assert_eq!((m.replication, m.filter), (Some(3), FilterMode::Exclude));
        assert_eq!(m.first_group, [239, 2, 0, 1]);
        assert_eq!(
            (m.delay_rate, m.leave_wait, m.line_rate_mbps),
            (2000.0, 1.0, 10000.0)
        );
        // Layer 3: the routers get static routes, bridges only snooping.
        use crate::dut::{McSetup, Setup};
        assert!(matches!(
            Setup::for_test(&p.duts[1], &t).multicast,
            Some(McSetup::Routes(_))
        ));
        assert!(matches!(
            Setup::for_test(&p.duts[0], &p.test(0).unwrap()).multicast,
            Some(McSetup::Snooping(_))
        ));
        // Another pattern is another setup (a fresh DUT, no stale joins).
        assert_ne!(
            Setup::for_test(&p.duts[0], &p.test(0).unwrap()),
            Setup::for_test(&p.duts[0], &p.test(2).unwrap())
        );
        assert!(Setup::for_test(&p.duts[2], &p.test(0).unwrap()).multicast_static());
        let m = p.test(2).unwrap().multicast.unwrap();
        assert_eq!((m.igmp_version, m.filter), (2, FilterMode::Exclude));
        assert_eq!(m.first_group, [239, 1, 0, 1]);
        assert!(p.test(0).unwrap().multicast.is_some());
        let thr =
            Plan::parse("name: t\nduts: [{name: l, driver: lanyard}]\ntests: [{type: throughput}]")
                .unwrap();
        assert!(thr.test(0).unwrap().multicast.is_none());
    }

    #[test]
    fn multicast_errors_name_the_field() {
        let base = "name: t\nduts: [{name: c, driver: linux-bridge}]\ntests: ";
        for (test, field, words) in [
            (
                "{type: throughput, groups: 4}",
                "tests[0].groups",
                "only multicast",
            ),
            (
                "{type: holb, sources: 2}",
                "tests[0].sources",
                "only multicast",
            ),
            ("{type: multicast, sources: 0}", "tests[0].sources", "1..32"),
            (
                "{type: multicast, sources: 8, receivers: 57}",
                "tests[0].receivers",
                "<= 64",
            ),
            (
                "{type: multicast, receivers: 0}",
                "tests[0].receivers",
                "at least 1",
            ),
            ("{type: multicast, groups: 0}", "tests[0].groups", "1..1024"),
            (
                "{type: multicast, sources: 9, groups: 1000}",
                "tests[0].groups",
                "8192",
            ),
            (
                "{type: multicast, replication: 5}",
                "tests[0].replication",
                "1..4",
            ),
            (
                "{type: multicast, replication: some}",
                "tests[0].replication",
                "",
            ),
            (
                "{type: multicast, filter-mode: maybe}",
                "tests[0].filter-mode",
                "unknown variant",
            ),
            (
                "{type: multicast, igmp-version: 1}",
                "tests[0].igmp-version",
                "2 or 3",
            ),
            (
                "{type: multicast, igmp-version: 2, filter-mode: include}",
                "tests[0].filter-mode",
                "IGMPv2",
            ),
            (
                "{type: multicast, first-group: 10.0.0.1}",
                "tests[0].first-group",
                "224.0.1.0",
            ),
            (
                "{type: multicast, first-group: 224.0.0.5}",
                "tests[0].first-group",
                "224.0.1.0",
            ),
            (
                "{type: multicast, first-group: 239.255.255.255, groups: 2}",
                "tests[0].first-group",
                "239.255.255.255",
            ),
            (
                "{type: multicast, first-group: 300.1.1.1}",
                "tests[0].first-group",
                "",
            ),
            (
                "{type: multicast, delay-rate: 0}",
                "tests[0].delay-rate",
                "positive",
            ),
            (
                "{type: multicast, leave-wait: 0.1}",
                "tests[0].leave-wait",
                "0.5",
            ),
            (
                "{type: multicast, line-rate-mbps: -1}",
                "tests[0].line-rate-mbps",
                "positive",
            ),
            (
                "{type: multicast, family: ipv6, frame-sizes: [128]}",
                "tests[0].family",
                "MLD",
            ),
            (
                "{type: multicast, hosts: 4}",
                "tests[0].hosts",
                "not a multicast",
            ),
            (
                "{type: multicast, bidirectional: true}",
                "tests[0].bidirectional",
                "not a multicast",
            ),
            (
                "{type: multicast, routes: 10}",
                "tests[0].routes",
                "not a multicast",
            ),
            (
                "{type: multicast, ports: 4}",
                "tests[0].ports",
                "not a multicast",
            ),
        ] {
            let e = err(&format!("{base}[{test}]"));
            assert!(e.contains(field) && e.contains(words), "{test}: {e}");
        }
        let e =
            err("name: t\nduts: [{name: c, driver: ovs, fast-leave: true}]\ntests: [{type: holb}]");
        assert!(e.contains("duts[0].fast-leave"), "{e}");
        let e = err(
            "name: t\nduts: [{name: c, driver: wire, igmp-querier: true}]\ntests: [{type: holb}]",
        );
        assert!(e.contains("duts[0].igmp-querier"), "{e}");
    }

    #[test]
    fn shipped_plans_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                Plan::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 1);
    }
}

/// Traffic pattern of a meshed throughput test (RFC 2889 section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mesh {
    /// Every port sends to every other port.
    Full,
    /// Backbone: ports split in two halves; each port sends to every port
    /// of the other half only.
    Partial,
    /// Consecutive groups of this many ports, full mesh inside each group
    /// and no traffic between groups (the chassis reports' line cards).
    Groups(usize),
}

impl Mesh {
    /// The (sender, receiver) port pairs of the pattern over `ports` ports.
    pub fn pairs(self, ports: usize) -> Vec<(usize, usize)> {
        let linked = |a: usize, b: usize| match self {
            Mesh::Full => true,
            Mesh::Partial => (a < ports / 2) != (b < ports / 2),
            Mesh::Groups(g) => a / g == b / g,
        };
        let mut v = Vec::new();
        for a in 0..ports {
            for b in 0..ports {
                if a != b && linked(a, b) {
                    v.push((a, b));
                }
            }
        }
        v
    }
}

#[cfg(test)]
mod mesh_tests {
    use super::*;

    #[test]
    fn mesh_patterns() {
        assert_eq!(Mesh::Full.pairs(3).len(), 6);
        let p = Mesh::Partial.pairs(4);
        assert_eq!(
            p,
            vec![
                (0, 2),
                (0, 3),
                (1, 2),
                (1, 3),
                (2, 0),
                (2, 1),
                (3, 0),
                (3, 1)
            ]
        );
        let g = Mesh::Groups(2).pairs(6);
        assert_eq!(g, vec![(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4)]);
    }

    #[test]
    fn cpu_plan_defaults_to_split_and_refuses_unknown_plans() {
        use crate::cpuplan::CpuPlanSpec;
        let base = "duts: [{name: l, driver: lanyard}]\ntests: [{type: throughput}]";
        let p = Plan::parse(&format!("name: t\n{base}")).unwrap();
        assert_eq!(p.cpu_plan, CpuPlanSpec::Split);
        let p = Plan::parse(&format!("name: t\ncpu-plan: shared\n{base}")).unwrap();
        assert_eq!(p.cpu_plan, CpuPlanSpec::Shared);
        let e = Plan::parse(&format!("name: t\ncpu-plan: half\n{base}")).unwrap_err();
        assert!(e.to_string().contains("half"), "{e}");
    }

    #[test]
    fn latency_at_a_share_of_line_rate() {
        let p = Plan::parse(
            "name: t\nduts: [{name: b, driver: linux-bridge}]\ntests:\n  - {type: latency, rate: \"10%\", frame-sizes: [64, 1518]}\n  - {type: latency, rate: \"10%\", line-rate-mbps: 10000}",
        )
        .unwrap();
        let t = p.test(0).unwrap();
        assert_eq!(
            (t.rate, t.load, t.line_rate_mbps),
            (None, Some(0.1), 1000.0)
        );
        assert_eq!(p.test(1).unwrap().line_rate_mbps, 10000.0);
        let e = Plan::parse(
            "name: t\nduts: [{name: b, driver: linux-bridge}]\ntests: [{type: latency, rate: max}]",
        )
        .and_then(|p| p.test(0).map(|_| ()))
        .unwrap_err();
        assert!(e.to_string().contains("rate"), "{e}");
        let e = Plan::parse("name: t\nduts: [{name: b, driver: linux-bridge}]\ntests: [{type: throughput, line-rate-mbps: 100}]")
            .and_then(|p| p.test(0).map(|_| ()))
            .unwrap_err();
        assert!(e.to_string().contains("line-rate-mbps"), "{e}");
    }
}
