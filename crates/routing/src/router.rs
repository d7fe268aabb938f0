//! The layer-3 control plane: routed interfaces and their TAP twins, the
//! punt/inject thread, the kernel neighbour mirror and the FIB feed.
//!
//! For every routed port Lanyard creates a TAP interface (`ly-<port>`) with
//! the port's router MAC, MTU and addresses, so the kernel stack and FRR
//! see the interface as if it were the port:
//! - frames the layer-3 stage punts (ARP, ND, routing protocols, traffic to
//!   own addresses, multicast, and packets whose next hop is not resolved
//!   yet) are written to the TAP of the port they arrived on;
//! - frames the kernel sends out of a TAP are injected on the port;
//! - the kernel resolves neighbours on the TAPs (ARP/ND with its pending
//!   queue: it forwards the punted packet itself once resolved), and the
//!   neighbour thread copies its table into Lanyard's (`kernel::neigh`);
//! - routes come from the configuration (connected subnets, static routes,
//!   also installed in the kernel so the slow path agrees) and from FRR's
//!   zebra over FPM.
//!
//! See docs/routing.md.

use crate::fib::{Fib, FibConfig, Hop, QuiesceFn, Source};
use crate::frr::{FpmServer, Prefix};
use crate::kernel::{NeighborMonitor, Rtnl};
use crate::sysctl;
use config::{Config, IpNet, L3Interface, UrpfMode};
use datapath::{Shared, FROM_KERNEL_ROUTE};
use io::tap::TAP_MAX_MTU;
use io::{FrameBatch, InjectSocket, Port, TapOptions, TapPort};
use pipeline::l3::{L3Tables, RouterInterface, Urpf};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tables::{Neighbor, NeighborState, NeighborTable};

/// `SCHED_FIFO` priority of the punt thread (the supervisor has 10).
const PUNT_RT_PRIORITY: i32 = 5;

/// Frames the kernel may queue on a TAP twin for the punt thread
/// (`txqueuelen`; tun's default is 500).
pub const TAP_TX_QUEUE_LEN: u32 = 8192;

/// Neighbours the forwarding table holds.
pub const NEIGHBOR_CAPACITY: usize = 65_536;
/// rtnetlink protocol number of the static routes Lanyard puts in the
/// kernel (RTPROT_STATIC).
const RTPROT_STATIC: u8 = 4;

/// The gateway of a VRF namespace's catch-all routes (docs/vrf.md,
/// "Traffic of a VRF's own kernel"): a link-local address nobody uses,
/// a permanent neighbour on each of the VRF's twins whose MAC is the
/// twin's (the router MAC), so what the VRF's kernel cannot route itself
/// reaches the punt thread addressed to Lanyard, which routes it in the
/// VRF's FIB (VPN routes live only there).
pub const VRF_GATEWAY4: std::net::Ipv4Addr = std::net::Ipv4Addr::new(169, 254, 255, 254);
pub const VRF_GATEWAY6: std::net::Ipv6Addr =
    std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0x169, 0x254, 0x255, 0x254);
/// The catch-all routes' metrics: this plus the twin's port id, below
/// every route FRR installs (zebra's metric is 20), one per twin (the
/// kernel keeps one default route per metric).
pub const VRF_CATCHALL_METRIC: u32 = 0xffff_0000;

/// One layer-3 interface (routed port or VLAN interface) as the control
/// plane knows it.
#[derive(Clone, Debug)]
pub struct RoutedPort {
    pub port: u16,
    /// Port name, or `vlanN` for a VLAN interface.
    pub name: String,
    /// `Some(vlan)` for a VLAN interface (SVI).
    pub vlan: Option<u16>,
    pub tap: String,
    pub tap_ifindex: u32,
    pub mac: [u8; 6],
    pub addresses: Vec<IpNet>,
    pub mtu: u32,
    pub urpf: UrpfMode,
    /// 0: the default VRF; k: `Router::vrfs[k - 1]`.
    pub vrf: usize,
    /// `Some((parent port, VLAN tag))` for a routed 802.1Q subinterface.
    pub subinterface: Option<(u16, u16)>,
}

/// Routes a VRF's FIB holds per family (docs/vrf.md, "Sizes").
pub const VRF_ROUTES: usize = 16_384;
/// Neighbours a VRF's table holds.
pub const VRF_NEIGHBORS: usize = 4096;

/// One VRF as the control plane runs it.
pub struct RouterVrf {
    pub name: String,
    /// FPM table id of its routes (and the NSID of its namespace).
    pub table: u32,
    rd: Mutex<Option<String>>,
    /// Namespace of its TAP twins.
    pub netns: String,
    pub fib: Arc<Mutex<Fib>>,
    pub neighbors: Arc<NeighborTable>,
    /// The namespace (kept open: twins move into it, routes go to it).
    ns: std::fs::File,
    /// Lanyard made the namespace (so it removes it again).
    created: bool,
    /// Its label interface's index.
    label: Option<u32>,
    /// Its neighbour mirror.
    mirror: Mirror,
    /// The configuration's routes it holds (connected, static).
    config_routes: Mutex<Vec<(Prefix, Source)>>,
}

impl RouterVrf {
    /// Its route distinguisher (informational).
    pub fn rd(&self) -> Option<String> {
        self.rd.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// rtnetlink inside its namespace, opened when needed: at 192 VRFs a
    /// socket kept per VRF would cost as many descriptors again.
    fn rtnl(&self) -> Result<Rtnl, String> {
        crate::netns::run_in(&self.ns, Rtnl::open)
            .and_then(|r| r)
            .map_err(|e| format!("VRF {} rtnetlink: {e}", self.name))
    }
}

/// A neighbour mirror thread: its map of twins and its own stop flag (a
/// VRF deleted at run time stops its mirror; the switch's stop ends all).
struct Mirror {
    by_ifindex: Arc<Mutex<HashMap<u32, u16>>>,
    stop: Arc<AtomicBool>,
    /// Joined when the VRF goes (mirrors started with the switch are in
    /// the switch's threads).
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl Mirror {
    fn end(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

/// Counters of the control-plane threads (`show ip traffic`-like output in
/// `show counters`).
#[derive(Default, Debug)]
pub struct RouterStats {
    /// Punted frames written to a TAP.
    pub punted_to_kernel: AtomicU64,
    /// Punted frames the TAP refused (kernel queue full, TAP gone).
    pub punt_errors: AtomicU64,
    /// Frames from a TAP injected on their port.
    pub injected: AtomicU64,
    /// Frames from a TAP that could not be sent on the port (or, from a
    /// VRF's twin to the router MAC, handed to the workers).
    pub inject_errors: AtomicU64,
    /// Frames a VRF's kernel sent to its catch-all gateway, handed to the
    /// workers to route in the VRF (docs/vrf.md).
    pub routed_from_kernel: AtomicU64,
    /// Neighbour changes applied from the kernel.
    pub neighbor_updates: AtomicU64,
    /// Times the kernel's neighbour notifications overran and the table
    /// was dumped again.
    pub neighbor_resyncs: AtomicU64,
    /// Neighbours the table had no room for.
    pub neighbor_table_full: AtomicU64,
    /// Next hops held as managed neighbours (`crate::managed`).
    pub managed: crate::managed::ManagedStats,
    /// ARP requests for a VRRP virtual address answered with its virtual
    /// MAC (this node master), docs/vrrp.md.
    pub vrrp_arp_answered: AtomicU64,
    /// ARP requests for a virtual address this node backs up: not
    /// answered, not given to the kernel.
    pub vrrp_arp_held: AtomicU64,
}

/// `TUNSETCARRIER` (`<linux/if_tun.h>`, Linux ≥ 5.0): a TAP's carrier.
const TUNSETCARRIER: libc::c_ulong = 0x4004_54e2;

/// Sets the carrier of the TAP twins to their ports' link state, so the
/// kernel and FRR see a port going down at once (interface down, routes
/// and neighbours flushed, OSPF adjacency dropped) rather than after a
/// dead interval. Twins come and go with VRFs changed at run time.
#[derive(Clone, Default)]
pub struct CarrierMirror {
    inner: Arc<Mutex<CarrierTaps>>,
}

#[derive(Default)]
struct CarrierTaps {
    /// (port id, a descriptor of its TAP, the twin's own port id).
    taps: Vec<(u16, std::os::fd::OwnedFd, u16)>,
    /// The last state of each port (a new twin starts with it).
    up: HashMap<u16, bool>,
}

fn set_carrier(fd: &std::os::fd::OwnedFd, up: bool) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = up.into();
    // SAFETY: TUNSETCARRIER reads an int through the pointer, which points
    // at a live c_int; the descriptor is ours.
    unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            TUNSETCARRIER as _,
            &on as *const libc::c_int,
        )
    };
}

impl CarrierMirror {
    pub fn set(&self, port: u16, up: bool) {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        c.up.insert(port, up);
        for (p, fd, _) in &c.taps {
            if *p == port {
                set_carrier(fd, up);
            }
        }
    }

    /// A twin (`twin`'s TAP) following port `port`, set to its last state
    /// — or, for a twin adopted from the image before a restart (`keep`),
    /// left as it is until the port's state is next reported, so the
    /// routing daemons on it see no carrier flap.
    fn add(&self, port: u16, twin: u16, dev: &TapPort, keep: bool) {
        let Some(fd) = dev.rx_fd() else { return };
        // SAFETY: a close-on-exec duplicate of a descriptor we own (a plain
        // dup(2) would outlive a restart's exec and hold the TAP, so the
        // new image could not make it again); checked.
        let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if d < 0 {
            return;
        }
        // SAFETY: `d` is a fresh descriptor owned by nobody else.
        let owned: std::os::fd::OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(d) };
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match c.up.get(&port).copied() {
            Some(up) => set_carrier(&owned, up),
            None if !keep => set_carrier(&owned, false),
            None => {}
        }
        c.taps.push((port, owned, twin));
    }

    /// Close twin `twin`'s descriptor (the TAP goes with its last one).
    fn remove(&self, twin: u16) {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        c.taps.retain(|(_, _, t)| *t != twin);
    }
}

/// The TAP twins the punt thread serves; changed when VRFs change.
struct PuntSet {
    taps: Vec<TapPort>,
    /// Per TAP: (port id, port to inject on (`None`: a VLAN interface),
    /// 802.1Q tag of a subinterface or 0, the router MAC of a VRF's twin:
    /// frames its kernel sends to it are routed in the VRF, not injected).
    names: Vec<PuntName>,
    /// Bumped at every change (the thread rebuilds its poll set).
    version: u64,
}

/// The running layer-3 control plane.
pub struct Router {
    /// The default VRF's FIB (the global table).
    pub fib: Arc<Mutex<Fib>>,
    pub neighbors: Arc<NeighborTable>,
    pub stats: Arc<RouterStats>,
    /// FPM listener (zebra connects here), when configured.
    pub fpm: Option<Arc<crate::frr::FpmStats>>,
    /// Port link state → TAP carrier (taken by the supervisor's hook).
    pub carrier: Option<CarrierMirror>,
    /// Ethernet pseudowires (`pseudowires:`): always there with the
    /// router (`Some`), so a live `config apply` can add the first one.
    pub pseudowires: Option<Arc<crate::pseudowire::PseudowireManager>>,
    /// Fast reroute (`mpls.fast-reroute`), when configured.
    pub fast_reroute: Option<Arc<crate::fast_reroute::FastReroute>>,
    /// VRRP masterships and virtual addresses (docs/vrrp.md): written by
    /// the VRRP thread, read by the layer-3 stage and the punt thread.
    pub vrrp: Arc<tables::vrrp::VirtualRouters>,
    /// What `config apply` changes: interfaces, VRFs.
    live: Mutex<Live>,
    shared: Arc<Shared>,
    quiesce: QuiesceFn,
    carrier_ctl: CarrierMirror,
    punt: Arc<Mutex<PuntSet>>,
    feeds: Arc<Mutex<Vec<VrfFeed>>>,
    /// The tables of a deleted VRF's slot (empty: routes nothing).
    empty: Arc<Mutex<Fib>>,
    empty_neighbors: Arc<NeighborTable>,
}

struct Live {
    ports: Vec<RoutedPort>,
    /// VRF k + 1 in slot k; a VRF deleted at run time leaves its slot
    /// empty for the rest of the run (a late label entry popping into it
    /// then routes nothing rather than into another VRF).
    vrfs: Vec<Option<Arc<RouterVrf>>>,
    rtnl: Rtnl,
    default_mirror: Arc<Mutex<HashMap<u32, u16>>>,
    /// The default VRF's routes from the configuration.
    default_routes: Vec<(Prefix, Source)>,
}

/// The MAC of a routed interface: the configured one, else a locally
/// administered address from the switch name and port index (distinct
/// from the port's own kernel MAC, so the kernel stack on the port drops
/// routed traffic as "other host" instead of handling it too).
pub fn router_mac(cfg: &Config, ifc: &L3Interface) -> [u8; 6] {
    if let Some(m) = ifc.router_mac {
        return m.octets();
    }
    if pair_gateway(cfg, ifc) {
        if let Some(vs) = &cfg.virtual_switch {
            return vs.system_mac.octets();
        }
    }
    let index = ifc.port as usize;
    // FNV-1a of the switch name: stable across restarts.
    let mut h: u32 = 0x811c_9dc5;
    for b in cfg.switch.name.bytes() {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    [
        0x02,
        0x4c, // 'L'
        (h >> 8) as u8,
        h as u8,
        (index >> 8) as u8,
        index as u8,
    ]
}

/// Whether `ifc` is an SVI both nodes of a virtual-switch pair serve as
/// one gateway (`virtual-switch.gateways`, docs/virtual-switch.md), in
/// the default VRF or a VRF (its twin is then set up in the VRF's
/// namespace, [`make_twin`]).
pub fn pair_gateway(cfg: &Config, ifc: &L3Interface) -> bool {
    match (&cfg.virtual_switch, ifc.vlan) {
        (Some(vs), Some(v)) => vs.gateways.contains(&v),
        _ => false,
    }
}

/// The TAP name of routed port `name` (index `index`).
pub fn tap_name(name: &str, index: usize) -> String {
    let n = format!("ly-{name}");
    if n.len() <= 15 {
        n
    } else {
        format!("ly{index}")
    }
}

/// fe80::/64 with the modified EUI-64 of `mac` (what the kernel gives the
/// TAP by default).
pub fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    let m = mac;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 2,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

fn prefix_of(net: &IpNet) -> Option<Prefix> {
    Prefix::new(net.network(), net.len)
}

/// The VRF namespaces a switch made, for its successor after `lanyard
/// restart` (which removes them when it stops).
pub const NETNS_MADE_ENV: &str = "LANYARD_VRF_NETNS_MADE";

/// Opens (or creates) a VRF's namespace and readies it: its NSID in ours
/// is the VRF's table id (how the patched FPM module names its routes),
/// `lo` up, forwarding on, reverse-path filtering off. Returns the
/// namespace and whether Lanyard created it.
fn open_vrf_ns(
    rtnl: &mut Rtnl,
    name: &str,
    netns: &str,
    table: u32,
) -> Result<(std::fs::File, bool), String> {
    let (ns, made) =
        crate::netns::ensure(netns).map_err(|e| format!("VRF {name} namespace {netns}: {e}"))?;
    // One a predecessor made before `lanyard restart` is Lanyard's too.
    let created =
        made || std::env::var(NETNS_MADE_ENV).is_ok_and(|v| v.split(',').any(|n| n == netns));
    if let Err(e) = rtnl.set_nsid(std::os::fd::AsRawFd::as_raw_fd(&ns), table) {
        if !crate::kernel::is_exists(&e) {
            if made {
                let _ = crate::netns::remove(netns);
            }
            return Err(format!("VRF {name} namespace id {table}: {e}"));
        }
    }
    crate::netns::run_in(&ns, || {
        let _ = io::link::set_up("lo");
        let _ = sysctl::set("ipv4/ip_forward", "1");
        let _ = sysctl::set("ipv6/conf/all/forwarding", "1");
        // ospfd joins its multicast groups on every twin with one socket:
        // the namespace's limit (20 by default) must cover them. Twins
        // may be added live, so room for as many as a switch has ports.
        let _ = sysctl::raise(
            "ipv4/igmp_max_memberships",
            sysctl::igmp_memberships_for(tables::MAX_PORTS),
        );
        // A packet popped from the VRF's VPN label and waiting for its CE
        // comes to a twin from a source only a labelled route (not in
        // this kernel) reaches: reverse-path filtering would drop it. The
        // twins turn it off, but `all` wins when higher, and a new
        // namespace inherits the host's (often strict). Lanyard's own
        // uRPF applies.
        let _ = sysctl::set("ipv4/conf/all/rp_filter", "0");
    })
    .map_err(|e| {
        if made {
            let _ = crate::netns::remove(netns);
        }
        format!("VRF {name} namespace {netns}: {e}")
    })?;
    tracing::info!(
        "VRF {name} table {table} in namespace {netns}{}",
        if made { " (created)" } else { "" }
    );
    Ok((ns, created))
}

/// A VRF of the configuration (`v`, table `table`) in slot `slot`: its
/// namespace, label interface, FIB and neighbour table. Its mirror thread
/// starts once its twins exist ([`start_mirror`]).
fn create_vrf(
    rtnl: &mut Rtnl,
    v: &config::vrf::VrfConfig,
    table: u32,
    slot: usize,
    quiesce: &QuiesceFn,
) -> Result<RouterVrf, String> {
    let (ns, created) = open_vrf_ns(rtnl, &v.name, v.netns(), table)?;
    // Each VRF's label interface (docs/vrf.md, "L3VPN"): bgpd's per-VRF
    // label becomes a zebra LSP popping to the interface named like the
    // VRF, in the VRF (zapi_msg.c zread_vrf_label), which zebra only
    // activates when that ifindex is also an operative interface of its
    // own namespace (zebra_mpls.c nhlfe_nexthop_active). A veth with the
    // same index at both ends gives both; the FPM entry then names the
    // index, which says which VRF to pop into.
    let label = match vrf_label_interface(rtnl, &ns, &v.name, table, slot) {
        Ok(index) => Some(index),
        Err(e) => {
            tracing::warn!(
                "VRF {}: no label interface ({e}); its BGP VPN label will not be installed",
                v.name
            );
            None
        }
    };
    let mut fib = Fib::with_config(FibConfig::for_vrf(table, VRF_ROUTES));
    fib.set_quiesce(quiesce.clone());
    Ok(RouterVrf {
        name: v.name.clone(),
        table,
        rd: Mutex::new(v.rd.clone()),
        netns: v.netns().to_string(),
        fib: Arc::new(Mutex::new(fib)),
        neighbors: Arc::new(NeighborTable::new(VRF_NEIGHBORS)),
        ns,
        created,
        label,
        mirror: Mirror {
            by_ifindex: Arc::default(),
            stop: Arc::default(),
            handle: Mutex::new(None),
        },
        config_routes: Mutex::new(Vec::new()),
    })
}

/// Environment of a restarted switch: the TAP twins its predecessor kept
/// open across the `exec` (`name=fd` separated by `;`), adopted by name.
pub const TAP_HANDOVER_ENV: &str = "LANYARD_TAP_HANDOVER";

/// The twins handed over by the image before a restart, by name; read
/// from [`TAP_HANDOVER_ENV`] once.
fn handed_taps() -> &'static Mutex<HashMap<String, std::os::fd::RawFd>> {
    static HANDED: std::sync::OnceLock<Mutex<HashMap<String, std::os::fd::RawFd>>> =
        std::sync::OnceLock::new();
    HANDED.get_or_init(|| {
        let v = std::env::var(TAP_HANDOVER_ENV).unwrap_or_default();
        std::env::remove_var(TAP_HANDOVER_ENV);
        Mutex::new(
            v.split(';')
                .filter_map(|e| {
                    let (name, fd) = e.split_once('=')?;
                    Some((name.to_string(), fd.parse().ok().filter(|fd| *fd > 2)?))
                })
                .collect(),
        )
    })
}

/// Closes the handed-over twins nobody adopted (their interfaces go).
fn close_unclaimed_taps() {
    let mut h = handed_taps().lock().unwrap_or_else(|e| e.into_inner());
    for (name, fd) in h.drain() {
        tracing::info!("restart: TAP {name} from before the restart is no longer configured");
        // SAFETY: handed to us across exec and claimed by nobody.
        drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    }
}

/// Takes over the predecessor's twin `tap` if it handed one over and it
/// still fits (`mac`); `None` otherwise (a twin that no longer fits is
/// closed, so the interface goes and is made again).
fn adopt_twin(tap: &str, mac: [u8; 6], vrf: Option<&RouterVrf>) -> Option<TapPort> {
    let fd = handed_taps()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(tap)?;
    // SAFETY: the predecessor kept this descriptor open for us; nobody else
    // has it (removed from the table above).
    // A VRF's twin is in the VRF's namespace: its MAC is read there.
    let now_mac = |name: &str| match vrf {
        None => io::link::mac(name),
        Some(v) => {
            let name = name.to_string();
            crate::netns::run_in(&v.ns, move || io::link::mac(&name))
                .ok()
                .flatten()
        }
    };
    match unsafe { TapPort::adopt(fd, tap, 256) } {
        Ok(dev) if now_mac(tap) == Some(mac) => Some(dev),
        Ok(_) => {
            tracing::info!("restart: TAP {tap} has another MAC now: made again");
            None
        }
        Err(e) => {
            tracing::warn!("restart: TAP {tap} handed over but not adopted: {e}");
            None
        }
    }
}

/// The TAP twin of layer-3 interface `p` in VRF slot `slot` (`vrf`, or
/// the default VRF): created here, moved into the VRF's namespace,
/// settled, up, with its addresses. After `lanyard restart` the
/// predecessor's twin is adopted instead (`true` in the result): the
/// same interface, never down, so FRR sees nothing change.
fn make_twin(
    cfg: &Config,
    p: &L3Interface,
    slot: usize,
    rtnl: &mut Rtnl,
    vrf: Option<&RouterVrf>,
) -> Result<(RoutedPort, TapPort, bool), String> {
    let index = p.port as usize;
    let mac = router_mac(cfg, p);
    let tap = tap_name(&p.name, index);
    // Validation keeps routed MTUs within what a TAP carries
    // (config::MAX_L3_MTU): the port and its twin agree.
    let mtu = p.mtu.min(TAP_MAX_MTU);
    let opts = TapOptions {
        mac: Some(mac),
        mtu: Some(mtu),
        up: false,
        persist: false,
        tx_slots: 256,
        // ospfd floods a table to every neighbour in bursts of thousands
        // of packets; the kernel drops what exceeds the TAP's queue before
        // the punt thread reads it.
        tx_queue_len: Some(TAP_TX_QUEUE_LEN),
    };
    // A twin of the same name closed just before (an interface moving to
    // another VRF) is deleted only when the punt thread's poll(2), which
    // holds the file, returns (woken, or within its 100 ms).
    let adopted = adopt_twin(&tap, mac, vrf);
    let was_adopted = adopted.is_some();
    let mut tries = 0;
    let dev = match adopted {
        Some(d) => d,
        None => loop {
            match TapPort::create(&tap, &opts) {
                Ok(d) => break d,
                Err(_) if tries < 50 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(format!("TAP {tap} for {}: {e}", p.name)),
            }
        },
    };
    // Before the link comes up, so the first announcements follow these
    // settings. A VRF's twin is settled inside the VRF's namespace (below):
    // its `/proc/sys/net` is that namespace's, and a twin moved there
    // starts from the namespace's defaults, not what was set here.
    let gateway = pair_gateway(cfg, p);
    let settle = move |tap: String| -> Result<(), String> {
        if gateway {
            // The peer node has the same addresses and MAC: no
            // duplicate-address detection against it. Replies to the
            // shared MAC that answer the peer's ARP/ND land on whichever
            // node the host reaches: taken here unsolicited, they reach
            // the peer by neighbour sync (an untracked NA is taken only
            // on an interface that forwards: the namespace's `all`, set
            // when it is readied). Without these the gateway half works
            // (answers, but misses hosts the peer's kernel reaches), so
            // a refusal is said.
            for (family, key, value) in [
                ("ipv6", "accept_dad", "0"),
                ("ipv6", "dad_transmits", "0"),
                ("ipv4", "arp_accept", "1"),
                ("ipv6", "accept_untracked_na", "1"),
            ] {
                if let Err(e) = sysctl::set_if(&tap, family, key, value) {
                    tracing::warn!("virtual-switch gateway {tap}: {family} {key}={value}: {e}");
                }
            }
        }
        if was_adopted {
            // The configuration may have changed the MTU across the restart.
            let _ = io::link::set_mtu(&tap, mtu);
        }
        // Namespaces may default to IPv6 off; the TAP needs it.
        let _ = sysctl::set_if(&tap, "ipv6", "disable_ipv6", "0");
        let _ = sysctl::set_if(&tap, "ipv4", "rp_filter", "0");
        let _ = sysctl::set_if(&tap, "ipv4", "send_redirects", "0");
        let _ = sysctl::set_if(&tap, "ipv4", "arp_notify", "1");
        let _ = sysctl::set_if(&tap, "ipv6", "accept_ra", "0");
        let _ = sysctl::set_if(&tap, "ipv6", "autoconf", "0");
        io::link::set_up(&tap).map_err(|e| format!("TAP {tap} up: {e}"))
    };
    let mut vrtnl;
    let (ifindex, link_rtnl) = match vrf {
        None => {
            settle(tap.clone())?;
            (dev.ifindex(), rtnl)
        }
        Some(v) => {
            // A VRF's twin lives in the VRF's namespace; the TAP's
            // descriptor keeps working across the move. An adopted twin
            // is there already.
            if !was_adopted {
                rtnl.move_link(dev.ifindex(), std::os::fd::AsRawFd::as_raw_fd(&v.ns))
                    .map_err(|e| format!("TAP {tap} into namespace: {e}"))?;
            }
            let t = tap.clone();
            crate::netns::run_in(&v.ns, move || settle(t))
                .map_err(|e| format!("TAP {tap}: {e}"))??;
            vrtnl = v.rtnl()?;
            let ifindex = vrtnl
                .link_index(&tap)
                .map_err(|e| format!("TAP {tap} in its namespace: {e}"))?;
            (ifindex, &mut vrtnl)
        }
    };
    for a in p.addresses {
        if let Err(e) = link_rtnl.add_address(ifindex, a.addr, a.len) {
            if !crate::kernel::is_exists(&e) {
                return Err(format!("address {a} on {tap}: {e}"));
            }
        }
    }
    if vrf.is_some() {
        install_catchall(link_rtnl, ifindex, p.port, mac).map_err(|e| format!("TAP {tap}: {e}"))?;
    }
    Ok((
        RoutedPort {
            port: p.port,
            name: p.name.clone(),
            vlan: p.vlan,
            tap,
            tap_ifindex: ifindex,
            mac,
            addresses: p.addresses.to_vec(),
            mtu,
            urpf: p.urpf,
            vrf: slot,
            subinterface: p.subinterface,
        },
        dev,
        was_adopted,
    ))
}

/// See [`PuntSet::names`].
type PuntName = (u16, Option<String>, u16, Option<[u8; 6]>);

/// The punt thread's entry of a twin: where its kernel's frames go.
/// VLAN interfaces have no port to inject on: their frames go back to the
/// workers' layer-2 stage (None). A subinterface's go out of its physical
/// port, tagged. A VRF's twin's frames to the router MAC (its kernel's
/// catch-all route) go to the workers to be routed in the VRF.
fn punt_name(cfg: &Config, r: &RoutedPort) -> PuntName {
    let route = (r.vrf != 0).then_some(r.mac);
    match r.subinterface {
        Some((parent, tag)) => (
            r.port,
            cfg.ports.get(parent as usize).map(|p| p.name.clone()),
            tag,
            route,
        ),
        None => (r.port, r.vlan.is_none().then(|| r.name.clone()), 0, route),
    }
}

/// The catch-all routes of a VRF's twin `ifindex` (port `port`, MAC
/// `mac`) in its namespace (`rtnl`): the gateway as a permanent
/// neighbour, then IPv4 and IPv6 default routes via it of the lowest
/// priority. They go with the twin.
fn install_catchall(rtnl: &mut Rtnl, ifindex: u32, port: u16, mac: [u8; 6]) -> Result<(), String> {
    use crate::kernel::neigh::NUD_PERMANENT;
    let metric = VRF_CATCHALL_METRIC + u32::from(port);
    for gw in [IpAddr::V4(VRF_GATEWAY4), IpAddr::V6(VRF_GATEWAY6)] {
        rtnl.replace_neigh(ifindex, gw, mac, NUD_PERMANENT, 0)
            .map_err(|e| format!("gateway neighbour {gw}: {e}"))?;
        rtnl.replace_default_via(gw, ifindex, metric, RTPROT_STATIC)
            .map_err(|e| format!("catch-all route via {gw}: {e}"))?;
    }
    Ok(())
}

/// The data plane's view of a routed interface.
fn router_interface(r: &RoutedPort) -> RouterInterface {
    RouterInterface {
        port: r.port,
        mac: r.mac,
        v4: r
            .addresses
            .iter()
            .filter_map(|a| match a.addr {
                IpAddr::V4(v4) => Some((u32::from(v4), a.len)),
                IpAddr::V6(_) => None,
            })
            .collect(),
        v6: r
            .addresses
            .iter()
            .filter_map(|a| match a.addr {
                IpAddr::V6(v6) => Some((u128::from(v6), a.len)),
                IpAddr::V4(_) => None,
            })
            .chain(std::iter::once((u128::from(link_local(r.mac)), 64)))
            .collect(),
        mtu: r.mtu.min(u16::MAX as u32) as u16,
        urpf: match r.urpf {
            UrpfMode::Off => Urpf::Off,
            UrpfMode::Loose => Urpf::Loose,
            UrpfMode::Strict => Urpf::Strict,
        },
        vlan: r.vlan,
        vrf: r.vrf as u16,
    }
}

/// Starts a neighbour mirror (in namespace `ns`, or ours) feeding `table`
/// and holding `fib`'s next hops as managed neighbours.
fn start_mirror(
    shared: &Arc<Shared>,
    stats: &Arc<RouterStats>,
    ns: Option<&std::fs::File>,
    (table, fib): (Arc<NeighborTable>, Arc<Mutex<Fib>>),
    mirror: &Mirror,
    name: String,
) -> Result<JoinHandle<()>, String> {
    let mon = match ns {
        None => NeighborMonitor::open(),
        Some(ns) => crate::netns::run_in(ns, NeighborMonitor::open).and_then(|m| m),
    }
    .map_err(|e| format!("neighbour monitor: {e}"))?;
    // Its requests go to the same namespace; without one (or on a kernel
    // before 5.16) the mirror only mirrors.
    let managed = crate::managed::supported()
        .then(|| match ns {
            None => Rtnl::open(),
            Some(ns) => crate::netns::run_in(ns, Rtnl::open).and_then(|r| r),
        })
        .and_then(|r| {
            r.map_err(|e| tracing::warn!("{name}: no managed neighbours: {e}"))
                .ok()
        })
        .map(|r| (r, fib));
    stats
        .managed
        .supported
        .store(managed.is_some(), Ordering::Relaxed);
    let (shared, stats) = (shared.clone(), stats.clone());
    let (by_ifindex, stop) = (mirror.by_ifindex.clone(), mirror.stop.clone());
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || neighbor_loop(shared, mon, table, by_ifindex, stop, stats, managed))
        .map_err(|e| format!("spawn {name}: {e}"))
}

/// Every FIB the FPM feed writes: the default VRF's, then each VRF's, with
/// its table id and its namespace's interface indexes (they repeat
/// across namespaces); each VRF's labelled (imported VPN) routes resolve
/// through the default VRF's ports, next hops and NHLFEs (docs/vrf.md).
fn build_feeds(
    fib: &Arc<Mutex<Fib>>,
    ports: &[RoutedPort],
    vrfs: &[Option<Arc<RouterVrf>>],
) -> Vec<VrfFeed> {
    let map = |slot: usize| -> HashMap<u32, u16> {
        ports
            .iter()
            .filter(|r| r.vrf == slot)
            .map(|r| (r.tap_ifindex, r.port))
            .collect()
    };
    let mut feeds: Vec<VrfFeed> = std::iter::once(VrfFeed {
        table: RT_TABLE_MAIN_U32,
        fib: fib.clone(),
        by_ifindex: map(0),
        leaked: HashMap::new(),
    })
    .chain(vrfs.iter().enumerate().filter_map(|(k, v)| {
        let v = v.as_ref()?;
        Some(VrfFeed {
            table: v.table,
            fib: v.fib.clone(),
            by_ifindex: map(k + 1),
            leaked: HashMap::new(),
        })
    }))
    .collect();
    set_leak_maps(&mut feeds);
    for f in &feeds[1..] {
        f.fib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_core(feeds[0].fib.clone(), feeds[0].by_ifindex.clone());
    }
    feeds
}

/// Label interface index → VRF (1-based) for the default VRF's FIB.
fn label_map(vrfs: &[Option<Arc<RouterVrf>>]) -> HashMap<u32, u16> {
    vrfs.iter()
        .enumerate()
        .filter_map(|(k, v)| Some((v.as_ref()?.label?, k as u16 + 1)))
        .collect()
}

/// The VRFs' static VPN labels (`vrfs[].vpn-label`) into the default
/// VRF's LFIB, each popping into its VRF's slot (docs/vrf.md).
fn program_vpn_labels(
    cfg: &Config,
    vrfs: &[Option<Arc<RouterVrf>>],
    fib: &Mutex<Fib>,
) -> Vec<String> {
    let slot_of = |name: &str| {
        vrfs.iter()
            .position(|v| v.as_ref().is_some_and(|v| v.name == name))
            .map(|k| k + 1)
    };
    let want = crate::static_vpn::labels(cfg, &slot_of);
    fib.lock()
        .unwrap_or_else(|e| e.into_inner())
        .set_static_vpn_labels(&want)
}

/// The configuration's index (k + 1) of the VRF in `slot`, 0 for the
/// default VRF.
fn cfg_vrf_of_slot(cfg: &Config, vrfs: &[Option<Arc<RouterVrf>>], slot: usize) -> Option<usize> {
    if slot == 0 {
        return Some(0);
    }
    let v = vrfs.get(slot - 1)?.as_ref()?;
    cfg.vrf_index(Some(&v.name))
}

/// Program the configuration's routes of one VRF and take away the ones
/// it held before and no longer has (`old`): a route kept is replaced in
/// place, never withdrawn in between. Returns what it holds now.
fn reprogram_routes(
    cfg: &Config,
    ports: &[RoutedPort],
    slot: usize,
    cfg_vrf: usize,
    fib: &Mutex<Fib>,
    rtnl: &mut Rtnl,
    old: &[(Prefix, Source)],
) -> Result<Vec<(Prefix, Source)>, String> {
    let now = program_config_routes(cfg, ports, slot, cfg_vrf, fib, rtnl)?;
    let mut f = fib.lock().unwrap_or_else(|e| e.into_inner());
    for (p, s) in old {
        if !now.contains(&(*p, *s)) {
            f.remove(*p, *s);
            if *s == Source::Static {
                let _ = rtnl.del_route(p.addr, p.len);
            }
        }
    }
    Ok(now)
}

impl Router {
    /// Set up every routed port of `cfg` (TAPs, addresses, kernel
    /// settings), program connected and static routes, publish the layer-3
    /// tables to the workers and start the threads. `None` when the
    /// configuration has no routed ports.
    pub fn start(
        cfg: &Config,
        shared: &Arc<Shared>,
        threads: &mut Vec<JoinHandle<()>>,
    ) -> Result<Option<Router>, String> {
        let routed = cfg.l3_interfaces();
        if routed.is_empty() {
            return Ok(None);
        }
        // The kernel forwards the packets punted while their next hop is
        // being resolved (it then resolves it); the ports themselves are set
        // not to forward when attached.
        sysctl::set("ipv4/ip_forward", "1").map_err(|e| format!("ip_forward: {e}"))?;
        let _ = sysctl::set("ipv6/conf/all/forwarding", "1");
        let groups = sysctl::igmp_memberships_for(routed.len());
        if let Err(e) = sysctl::raise("ipv4/igmp_max_memberships", groups) {
            tracing::warn!("igmp_max_memberships (OSPF on more than 20 twins needs {groups}): {e}");
        }
        let mut rtnl = Rtnl::open().map_err(|e| format!("rtnetlink: {e}"))?;
        // An update that finds the LPM pool used up reclaims at once, after
        // the workers have passed a quiescent point.
        let quiesce: QuiesceFn = {
            let shared = shared.clone();
            Arc::new(move || shared.quiesce(Duration::from_secs(1)))
        };
        // Each VRF's namespace, label interface and tables (docs/vrf.md).
        let mut vrfs: Vec<Option<Arc<RouterVrf>>> = Vec::new();
        for (k, v) in cfg.vrfs.iter().enumerate() {
            vrfs.push(Some(Arc::new(create_vrf(
                &mut rtnl,
                v,
                v.table_id(k),
                k,
                &quiesce,
            )?)));
        }
        let carrier = CarrierMirror::default();
        let mut set = PuntSet {
            taps: Vec::new(),
            names: Vec::new(),
            version: 0,
        };
        let mut ports = Vec::new();
        for p in &routed {
            let vrf = match p.vrf {
                0 => None,
                k => vrfs.get(k - 1).cloned().flatten(),
            };
            let (r, dev, adopted) = make_twin(cfg, p, p.vrf, &mut rtnl, vrf.as_deref())?;
            if r.vlan.is_none() {
                // Down until the port is attached and up (a subinterface
                // follows its physical port).
                carrier.add(
                    r.subinterface.map_or(r.port, |s| s.0),
                    r.port,
                    &dev,
                    adopted,
                );
            }
            set.names.push(punt_name(cfg, &r));
            set.taps.push(dev);
            ports.push(r);
        }
        // Twins of interfaces no longer configured go now.
        close_unclaimed_taps();

        let mut fib = Fib::new();
        fib.set_quiesce(quiesce.clone());
        fib.set_vrf_label_interfaces(label_map(&vrfs));
        let neighbors = Arc::new(NeighborTable::new(NEIGHBOR_CAPACITY));
        // Labels from zebra switch on routed ports (docs/mpls.md).
        shared.mpls.store(Some(Arc::new(datapath::mpls::MplsPlane {
            lfib: fib.lfib(),
            cfg: mpls_plane_config(&cfg.mpls),
        })));
        let (lfib, fib4, nexthops) = (fib.lfib(), fib.fib4(), fib.nexthops());
        let fib = Arc::new(Mutex::new(fib));
        let empty = Arc::new(Mutex::new(Fib::with_config(FibConfig::for_vrf(
            u32::MAX,
            16,
        ))));
        let empty_neighbors = Arc::new(NeighborTable::new(16));
        let vrrp = Arc::new(tables::vrrp::VirtualRouters::default());
        publish_tables(
            shared,
            &fib,
            &neighbors,
            &ports,
            &vrfs,
            (&empty, &empty_neighbors),
            &vrrp,
        );
        let default_routes = program_config_routes(cfg, &ports, 0, 0, &fib, &mut rtnl)?;
        for (k, v) in vrfs.iter().enumerate() {
            let Some(v) = v else { continue };
            let mut vr = v.rtnl()?;
            *v.config_routes.lock().unwrap_or_else(|e| e.into_inner()) =
                program_config_routes(cfg, &ports, k + 1, k + 1, &v.fib, &mut vr)?;
        }
        program_vpn_labels(cfg, &vrfs, &fib);

        // Bypasses are in the LFIB before any failure (docs/mpls.md).
        let routed: Vec<(String, u16)> = ports
            .iter()
            .filter(|r| r.vlan.is_none() && r.vrf == 0)
            .map(|r| (r.name.clone(), r.port))
            .collect();
        let fast_reroute =
            crate::fast_reroute::FastReroute::start(cfg, &routed, &fib, shared, threads)?;

        let stats = Arc::new(RouterStats::default());
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| format!("spawn {name}: {e}"))
        };
        let punt = Arc::new(Mutex::new(set));
        {
            let (shared, stats, punt) = (shared.clone(), stats.clone(), punt.clone());
            let vrrp = vrrp.clone();
            threads.push(spawn(
                "punt",
                Box::new(move || punt_loop(shared, punt, stats, vrrp)),
            )?);
        }
        // One neighbour mirror per namespace: the default VRF's, then each
        // VRF's (its TAP twins resolve in their own kernel stack).
        let default_mirror = Mirror {
            by_ifindex: Arc::new(Mutex::new(
                ports
                    .iter()
                    .filter(|r| r.vrf == 0)
                    .map(|r| (r.tap_ifindex, r.port))
                    .collect(),
            )),
            stop: Arc::default(),
            handle: Mutex::new(None),
        };
        threads.push(start_mirror(
            shared,
            &stats,
            None,
            (neighbors.clone(), fib.clone()),
            &default_mirror,
            "neighbors".into(),
        )?);
        for (k, v) in vrfs.iter().enumerate() {
            let Some(v) = v else { continue };
            *v.mirror
                .by_ifindex
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = ports
                .iter()
                .filter(|r| r.vrf == k + 1)
                .map(|r| (r.tap_ifindex, r.port))
                .collect();
            threads.push(start_mirror(
                shared,
                &stats,
                Some(&v.ns),
                (v.neighbors.clone(), v.fib.clone()),
                &v.mirror,
                format!("neighbors-v{}", k + 1),
            )?);
        }
        let mut fpm_stats = None;
        let feeds = Arc::new(Mutex::new(build_feeds(&fib, &ports, &vrfs)));
        {
            let server = match &cfg.routing.fpm {
                Some(addr) => {
                    let s = FpmServer::bind(addr.as_str())
                        .map_err(|e| format!("FPM listener {addr}: {e}"))?;
                    fpm_stats = Some(s.stats());
                    // Here, not in the FIB thread: the resumed pseudowires
                    // (next) and the first frames from the handed-over rings
                    // need these routes. Restored in the FIB thread, they
                    // came a few ms after the pseudowires' first pass, which
                    // found no transport, and the rings' backlog was dropped
                    // until the next pass (384 frames each way in one CI run).
                    restore_fpm_journal(
                        &s.stats(),
                        &feeds.lock().unwrap_or_else(|e| e.into_inner()),
                    );
                    Some(s)
                }
                None => None,
            };
            let (shared, feeds) = (shared.clone(), feeds.clone());
            threads.push(spawn(
                "fib",
                Box::new(move || fib_loop(shared, server, feeds)),
            )?);
        }
        for r in &ports {
            log_port(r);
        }
        let pseudowires = crate::pseudowire::PseudowireManager::start(
            cfg, shared, lfib, fib4, nexthops, threads,
        )?;
        Ok(Some(Router {
            pseudowires,
            fast_reroute,
            vrrp,
            fib,
            neighbors,
            stats,
            fpm: fpm_stats,
            carrier: Some(carrier.clone()),
            live: Mutex::new(Live {
                ports,
                vrfs,
                rtnl,
                default_mirror: default_mirror.by_ifindex,
                default_routes,
            }),
            shared: shared.clone(),
            quiesce,
            carrier_ctl: carrier,
            punt,
            feeds,
            empty,
            empty_neighbors,
        }))
    }

    /// The routed interfaces now.
    pub fn ports(&self) -> Vec<RoutedPort> {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ports
            .clone()
    }

    /// The VRFs now, with their data-plane index (k + 1).
    pub fn vrfs(&self) -> Vec<(usize, Arc<RouterVrf>)> {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .vrfs
            .iter()
            .enumerate()
            .filter_map(|(k, v)| Some((k + 1, v.clone()?)))
            .collect()
    }

    /// The name of VRF `k` (data-plane index, 1-based).
    pub fn vrf_name(&self, k: u16) -> Option<String> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let v = live.vrfs.get((k as usize).checked_sub(1)?)?.as_ref()?;
        Some(v.name.clone())
    }

    /// Bring VRFs and layer-3 interfaces to what `cfg` says, at run time
    /// (`config apply`, docs/vrf.md "VRFs at run time"): VRFs deleted
    /// (their twins, routes, label interface, neighbour mirror, FPM table
    /// and the namespace Lanyard made), VRFs added (the same, created),
    /// interfaces that left, came or moved to another VRF (their twins
    /// re-made), and every VRF's configured routes. The other VRFs' tables
    /// stay the same objects: their traffic does not notice. Returns one
    /// line per change.
    pub fn reconfigure(&self, cfg: &Config) -> Result<Vec<String>, String> {
        let mut guard = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let live = &mut *guard;
        let mut said = Vec::new();
        // VRFs kept (same name, table and namespace) or made anew.
        let mut kept: Vec<Option<usize>> = Vec::new();
        for (k, v) in cfg.vrfs.iter().enumerate() {
            let t = v.table_id(k);
            let s = live.vrfs.iter().position(|x| {
                x.as_ref()
                    .is_some_and(|x| x.name == v.name && x.table == t && x.netns == v.netns())
            });
            if let Some(x) = s.and_then(|s| live.vrfs[s].as_ref()) {
                *x.rd.lock().unwrap_or_else(|e| e.into_inner()) = v.rd.clone();
            }
            kept.push(s.map(|s| s + 1));
        }
        let gone: Vec<usize> = (1..=live.vrfs.len())
            .filter(|s| live.vrfs[s - 1].is_some() && !kept.contains(&Some(*s)))
            .collect();
        // New VRFs take new slots: a slot is never reused in a run.
        let mut next = live.vrfs.len();
        let slots: Vec<usize> = kept
            .iter()
            .map(|s| {
                s.unwrap_or_else(|| {
                    next += 1;
                    next
                })
            })
            .collect();
        let want: Vec<(L3Interface, usize)> = cfg
            .l3_interfaces()
            .into_iter()
            .map(|p| {
                let s = if p.vrf == 0 { 0 } else { slots[p.vrf - 1] };
                (p, s)
            })
            .collect();
        let same = |r: &RoutedPort, p: &L3Interface, s: usize| {
            r.name == p.name
                && r.port == p.port
                && r.vlan == p.vlan
                && r.subinterface == p.subinterface
                && r.addresses == p.addresses
                && r.mtu == p.mtu.min(TAP_MAX_MTU)
                && r.mac == router_mac(cfg, p)
                && r.urpf == p.urpf
                && r.vrf == s
        };
        // 1. Twins that go: removed, changed or moved to another VRF.
        let (keep, leave): (Vec<RoutedPort>, Vec<RoutedPort>) = std::mem::take(&mut live.ports)
            .into_iter()
            .partition(|r| want.iter().any(|(p, s)| same(r, p, *s)));
        live.ports = keep;
        for r in &leave {
            self.remove_twin(live, r);
            said.push(format!("- interface {}", r.name));
        }
        if !leave.is_empty() {
            // Out of poll(2), which holds the closed twins' files.
            self.shared.punts.wake();
        }
        // 2. VRFs that go.
        for s in gone {
            if let Some(v) = live.vrfs[s - 1].take() {
                self.remove_vrf(&mut live.rtnl, &v);
                said.push(format!("- vrf {}", v.name));
            }
        }
        // 3. New VRFs.
        let mut new_slots = Vec::new();
        for (k, v) in cfg.vrfs.iter().enumerate() {
            if kept[k].is_some() {
                continue;
            }
            let s = slots[k];
            while live.vrfs.len() < s {
                live.vrfs.push(None);
            }
            let vrf = create_vrf(&mut live.rtnl, v, v.table_id(k), s - 1, &self.quiesce)?;
            said.push(format!(
                "+ vrf {} table {} namespace {}",
                vrf.name, vrf.table, vrf.netns
            ));
            live.vrfs[s - 1] = Some(Arc::new(vrf));
            new_slots.push(s);
        }
        // 4. New twins.
        for (p, s) in &want {
            if live.ports.iter().any(|r| r.name == p.name) {
                continue;
            }
            let vrf = match *s {
                0 => None,
                s => live.vrfs.get(s - 1).cloned().flatten(),
            };
            let (r, dev, adopted) = make_twin(cfg, p, *s, &mut live.rtnl, vrf.as_deref())?;
            if r.vlan.is_none() {
                self.carrier_ctl.add(
                    r.subinterface.map_or(r.port, |x| x.0),
                    r.port,
                    &dev,
                    adopted,
                );
            }
            {
                let mut set = self.punt.lock().unwrap_or_else(|e| e.into_inner());
                set.names.push(punt_name(cfg, &r));
                set.taps.push(dev);
                set.version += 1;
            }
            log_port(&r);
            said.push(format!("+ interface {}", r.name));
            live.ports.push(r);
        }
        live.ports.sort_by_key(|r| r.port);
        // 5. Neighbour mirrors see their namespace's twins; a new VRF's
        // starts.
        let map = |slot: usize| -> HashMap<u32, u16> {
            live.ports
                .iter()
                .filter(|r| r.vrf == slot)
                .map(|r| (r.tap_ifindex, r.port))
                .collect()
        };
        *live
            .default_mirror
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = map(0);
        for (k, v) in live.vrfs.iter().enumerate() {
            let Some(v) = v else { continue };
            *v.mirror
                .by_ifindex
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = map(k + 1);
            if new_slots.contains(&(k + 1)) {
                let h = start_mirror(
                    &self.shared,
                    &self.stats,
                    Some(&v.ns),
                    (v.neighbors.clone(), v.fib.clone()),
                    &v.mirror,
                    format!("neighbors-v{}", k + 1),
                )?;
                *v.mirror.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
            }
        }
        // 6. The FPM feed: a new VRF's table id joins, a deleted one's has
        // left (its late routes are counted as `other_table` by the
        // default FIB); FIBs whose interfaces changed re-map their routes.
        {
            let mut feeds = self.feeds.lock().unwrap_or_else(|e| e.into_inner());
            let new = build_feeds(&self.fib, &live.ports, &live.vrfs);
            for f in &new {
                let Some(before) = feeds.iter().find(|o| Arc::ptr_eq(&o.fib, &f.fib)) else {
                    continue;
                };
                let port_of = |i: u32| f.by_ifindex.get(&i).copied();
                let mut fib = f.fib.lock().unwrap_or_else(|e| e.into_inner());
                if before.by_ifindex != f.by_ifindex {
                    fib.refresh_ports(&port_of);
                } else if before.leaked != f.leaked {
                    // Another VRF came, went or changed interfaces: only
                    // the routes through those twins (leaked ones).
                    fib.refresh_leaked(&changed_keys(&before.leaked, &f.leaked), &port_of);
                }
            }
            *feeds = new;
        }
        self.fib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_vrf_label_interfaces(label_map(&live.vrfs));
        // 7. The configuration's routes of every VRF.
        live.default_routes = reprogram_routes(
            cfg,
            &live.ports,
            0,
            0,
            &self.fib,
            &mut live.rtnl,
            &live.default_routes,
        )?;
        for (k, v) in live.vrfs.iter().enumerate() {
            let Some(v) = v else { continue };
            let Some(c) = cfg_vrf_of_slot(cfg, &live.vrfs, k + 1) else {
                continue;
            };
            let mut vr = v.rtnl()?;
            let mut held = v.config_routes.lock().unwrap_or_else(|e| e.into_inner());
            *held = reprogram_routes(cfg, &live.ports, k + 1, c, &v.fib, &mut vr, &held)?;
            // Kept static VPN routes follow default routes changed above.
            v.fib
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .refresh_vpn();
        }
        said.extend(program_vpn_labels(cfg, &live.vrfs, &self.fib));
        // 8. The workers' tables.
        publish_tables(
            &self.shared,
            &self.fib,
            &self.neighbors,
            &live.ports,
            &live.vrfs,
            (&self.empty, &self.empty_neighbors),
            &self.vrrp,
        );
        Ok(said)
    }

    /// Takes twin `r` away: the punt thread's TAP (closing it deletes the
    /// interface), its carrier descriptor and its neighbours.
    fn remove_twin(&self, live: &Live, r: &RoutedPort) {
        {
            let mut set = self.punt.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = set.names.iter().position(|n| n.0 == r.port) {
                set.names.remove(i);
                set.taps.remove(i);
                set.version += 1;
            }
        }
        self.carrier_ctl.remove(r.port);
        let table = match r.vrf {
            0 => Some(self.neighbors.clone()),
            k => live
                .vrfs
                .get(k - 1)
                .and_then(|v| v.as_ref())
                .map(|v| v.neighbors.clone()),
        };
        if let Some(t) = table {
            let mut ips = Vec::new();
            t.for_each(|ip, n| {
                if n.port == r.port {
                    ips.push(ip);
                }
            });
            for ip in ips {
                t.remove(ip);
            }
        }
    }

    /// Takes VRF `v` away (its twins are gone already): its mirror stops,
    /// its table id leaves the FPM feed, its FIB gives what its imported
    /// VPN routes held back to the default VRF's pool, its label
    /// interface goes, and the namespace if Lanyard made it.
    fn remove_vrf(&self, rtnl: &mut Rtnl, v: &RouterVrf) {
        v.mirror.end();
        self.feeds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|f| !Arc::ptr_eq(&f.fib, &v.fib));
        {
            // A sweep with nothing replayed withdraws every FRR route
            // (NHLFEs and next hops back to the default pool).
            let mut f = v.fib.lock().unwrap_or_else(|e| e.into_inner());
            let none = |_: u32| -> Option<u16> { None };
            f.apply_frr(
                &crate::frr::FpmEvent::Connected {
                    peer: std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
                },
                &none,
            );
            f.apply_frr(&crate::frr::FpmEvent::Settled, &none);
        }
        remove_vrf_kernel(rtnl, v, true);
    }

    /// Writes zebra's installed state (the FPM journal) for the image after
    /// a restart; returns how many entries (0 without FPM).
    pub fn save_fpm_journal(&self, path: &std::path::Path) -> std::io::Result<usize> {
        let Some(stats) = &self.fpm else {
            return Ok(0);
        };
        let j = stats.journal();
        std::fs::write(path, j.frames())?;
        Ok(j.len())
    }

    /// Keeps every twin open across the `exec` of `lanyard restart`, for
    /// the new image to adopt ([`TAP_HANDOVER_ENV`]): `name=fd;...`. What
    /// the kernel sends meanwhile waits in each TAP's queue.
    pub fn hand_over_taps(&self) -> String {
        let set = self.punt.lock().unwrap_or_else(|e| e.into_inner());
        set.taps
            .iter()
            .filter_map(|t| Some(format!("{}={}", t.name(), t.keep_across_exec().ok()?)))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// The VRF namespaces Lanyard made (for [`NETNS_MADE_ENV`]).
    pub fn namespaces_made(&self) -> Vec<String> {
        self.vrfs()
            .into_iter()
            .filter(|(_, v)| v.created)
            .map(|(_, v)| v.netns.clone())
            .collect()
    }

    /// When the switch stops (after its threads): the namespaces Lanyard
    /// made go, then the twins are closed. Returns the namespaces removed.
    ///
    /// Each interface the kernel deletes one at a time costs it an RCU
    /// barrier (`netdev_run_todo`), tens of milliseconds on a busy host:
    /// closed one after the other, 192 VRFs' twins kept a stopping switch
    /// for seconds. A namespace that goes takes its interfaces (twin,
    /// label interface's peer) in one batch with the others, and the
    /// twins left (the default VRF's, those in namespaces Lanyard did not
    /// make) are closed from many threads at once, so their barriers
    /// overlap.
    pub fn remove_namespaces(&self) -> Vec<String> {
        self.carrier_ctl
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .taps
            .clear();
        let mut out = Vec::new();
        {
            let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
            let live = &mut *live;
            for v in live.vrfs.iter_mut() {
                if let Some(v) = v.take() {
                    // Its label interface goes with the namespace's end;
                    // one in a namespace Lanyard did not make stays, as
                    // before (made again at the next start).
                    if remove_vrf_kernel(&mut live.rtnl, &v, false) {
                        out.push(v.netns.clone());
                    }
                }
            }
        }
        let taps = std::mem::take(&mut self.punt.lock().unwrap_or_else(|e| e.into_inner()).taps);
        close_in_parallel(taps);
        out
    }
}

/// Drops `taps` from up to 64 threads at once (see
/// [`Router::remove_namespaces`]).
fn close_in_parallel(mut taps: Vec<TapPort>) {
    let per = taps.len().div_ceil(64).max(1);
    let mut handles = Vec::new();
    while !taps.is_empty() {
        let chunk: Vec<TapPort> = taps.drain(..per.min(taps.len())).collect();
        // A failed spawn drops its chunk here, one at a time.
        if let Ok(h) = std::thread::Builder::new()
            .name("close-twins".into())
            .spawn(move || drop(chunk))
        {
            handles.push(h);
        }
    }
    for h in handles {
        let _ = h.join();
    }
}

/// A VRF's namespace when Lanyard made it, and with `label` its label
/// interface (a VRF deleted at run time; at stop the
/// namespace's end takes it, or it stays for the next start). Returns
/// whether the namespace was removed.
fn remove_vrf_kernel(rtnl: &mut Rtnl, v: &RouterVrf, label: bool) -> bool {
    if label && v.label.is_some() {
        if let Ok(i) = rtnl.link_index(&format!("lyvrf{}", v.table)) {
            let _ = rtnl.del_link(i);
        }
    }
    if !v.created {
        return false;
    }
    match crate::netns::remove(&v.netns) {
        Ok(()) => {
            tracing::info!("VRF {}: namespace {} removed", v.name, v.netns);
            true
        }
        Err(e) => {
            tracing::warn!("VRF {}: namespace {} not removed: {e}", v.name, v.netns);
            false
        }
    }
}

fn log_port(r: &RoutedPort) {
    tracing::info!(
        "routed port {} via {} (mac {}, {})",
        r.name,
        r.tap,
        config::MacAddr(r.mac),
        r.addresses
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// Publish the layer-3 tables: interfaces, every VRF slot's tables (an
/// empty slot's route nothing), subinterfaces, the label FIB.
fn publish_tables(
    shared: &Shared,
    fib: &Mutex<Fib>,
    neighbors: &Arc<NeighborTable>,
    ports: &[RoutedPort],
    vrfs: &[Option<Arc<RouterVrf>>],
    (empty, empty_neighbors): (&Mutex<Fib>, &Arc<NeighborTable>),
    vrrp: &Arc<tables::vrrp::VirtualRouters>,
) {
    let vrf_tables = vrfs
        .iter()
        .map(|v| {
            let (f, n) = match v {
                Some(v) => (&*v.fib, &v.neighbors),
                None => (empty, empty_neighbors),
            };
            let f = f.lock().unwrap_or_else(|e| e.into_inner());
            pipeline::l3::VrfTables {
                fib4: f.fib4(),
                fib6: f.fib6(),
                nexthops: f.nexthops(),
                neighbors: n.clone(),
            }
        })
        .collect();
    let subinterfaces: Vec<(u16, u16, u16)> = ports
        .iter()
        .filter_map(|r| r.subinterface.map(|(parent, tag)| (r.port, parent, tag)))
        .collect();
    let f = fib.lock().unwrap_or_else(|e| e.into_inner());
    shared.l3.store(Some(Arc::new(
        L3Tables::new(
            f.fib4(),
            f.fib6(),
            f.nexthops(),
            neighbors.clone(),
            ports.iter().map(router_interface).collect(),
        )
        .with_vrfs(vrf_tables)
        .with_subinterfaces(&subinterfaces)
        .with_lfib(f.lfib())
        .with_virtual_routers(Some(vrrp.clone())),
    )));
}

/// Connected subnets and static routes of the configuration, into the FIB
/// (and the static ones into the kernel, for the punted slow path).
/// The label plane's settings from `mpls:` (TTL mode, ICMP tunnelling,
/// the TC ↔ class maps, re-marking of swapped labels).
pub fn mpls_plane_config(m: &config::mpls::MplsConfig) -> pipeline::mpls::MplsConfig {
    use config::mpls::{IcmpTunneling as C, TtlPropagation as T};
    use pipeline::mpls::{IcmpTunneling, TtlMode};
    pipeline::mpls::MplsConfig {
        ttl: match m.ttl_propagation {
            T::Uniform => TtlMode::Uniform,
            T::Pipe => TtlMode::Pipe,
        },
        icmp_tunneling: match m.icmp_tunneling {
            C::Auto => IcmpTunneling::Auto,
            C::Always => IcmpTunneling::Always,
            C::Never => IcmpTunneling::Never,
        },
        tc_of_class: config::mpls::tc_map(&m.tc_of_class),
        class_of_tc: config::mpls::tc_map(&m.class_of_tc),
        remark: m.tc_remark,
    }
}

/// `vrf` is the VRF's slot (`RoutedPort::vrf`), `cfg_vrf` its index in
/// the configuration (static routes name it). Returns the routes set.
fn program_config_routes(
    cfg: &Config,
    all_ports: &[RoutedPort],
    vrf: usize,
    cfg_vrf: usize,
    fib: &Mutex<Fib>,
    rtnl: &mut Rtnl,
) -> Result<Vec<(Prefix, Source)>, String> {
    let mut fib = fib.lock().unwrap_or_else(|e| e.into_inner());
    let mut set = Vec::new();
    let ports: Vec<&RoutedPort> = all_ports.iter().filter(|r| r.vrf == vrf).collect();
    for r in &ports {
        for a in &r.addresses {
            if a.len == a.max_len() {
                continue;
            }
            let Some(p) = prefix_of(a) else { continue };
            fib.set(
                p,
                Source::Connected,
                vec![Hop {
                    port: r.port,
                    gateway: None,
                    weight: 1,
                }],
            )
            .map_err(|e| format!("connected route {a}: {e:?}"))?;
            set.push((p, Source::Connected));
        }
    }
    let port_of = |name: &str| ports.iter().find(|r| r.name == name).copied();
    for s in &cfg.routing.static_routes {
        if cfg.vrf_index(s.vrf.as_deref()) != Some(cfg_vrf) {
            continue;
        }
        let Some(p) = prefix_of(&s.prefix) else {
            continue;
        };
        if let Some((pe, label)) = s.vpn() {
            // Resolved through the default VRF (docs/vrf.md, "Static VPN
            // routes"); the VRF's kernel has no way to the remote PE.
            fib.set_vpn(p, pe, label)
                .map_err(|e| format!("static VPN route {}: {e:?}", s.prefix))?;
            set.push((p, Source::Static));
            continue;
        }
        if s.blackhole {
            fib.set_blackhole(p, Source::Static)
                .map_err(|e| format!("static route {}: {e:?}", s.prefix))?;
            set.push((p, Source::Static));
            continue;
        }
        let egress = match (&s.interface, s.next_hop) {
            (Some(name), _) => port_of(name),
            (None, Some(gw)) => ports
                .iter()
                .find(|r| {
                    r.addresses
                        .iter()
                        .any(|a| a.len < a.max_len() && a.contains(gw))
                })
                .copied(),
            (None, None) => None,
        };
        let Some(egress) = egress else {
            return Err(format!("static route {}: no egress port", s.prefix));
        };
        fib.set(
            p,
            Source::Static,
            vec![Hop {
                port: egress.port,
                gateway: s.next_hop,
                weight: 1,
            }],
        )
        .map_err(|e| format!("static route {}: {e:?}", s.prefix))?;
        set.push((p, Source::Static));
        if let Err(e) = rtnl.replace_route(
            p.addr,
            p.len,
            s.next_hop,
            Some(egress.tap_ifindex),
            RTPROT_STATIC,
        ) {
            tracing::warn!("static route {} not installed in the kernel: {e}", s.prefix);
        }
    }
    Ok(set)
}

/// The punt/inject thread: punted frames to the TAPs, TAP frames to the
/// ports.
fn punt_loop(
    shared: Arc<Shared>,
    set: Arc<Mutex<PuntSet>>,
    stats: Arc<RouterStats>,
    vrrp: Arc<tables::vrrp::VirtualRouters>,
) {
    // The kernel's own receive path runs in softirq context, ahead of
    // every user thread; this thread *is* Lanyard's receive path to the
    // kernel, and a table flooded by eight neighbours at once must not pile
    // up in the punt queue while routing daemons and workers hold both
    // cores (issue 13: 51,000 punts lost to a full queue at normal
    // priority). Its work is bounded by control-plane policing. Below the
    // supervisor (10), which decides failovers. Without CAP_SYS_NICE:
    // normal priority.
    let prio = libc::sched_param {
        sched_priority: PUNT_RT_PRIORITY,
    };
    // SAFETY: plain syscall on the calling thread (pid 0).
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &prio) } != 0 {
        tracing::info!("punt: real-time priority unavailable; punts at normal priority");
    }
    let mut tap_of: HashMap<u16, usize> = HashMap::new();
    // One inject socket per port, shared by its subinterfaces' twins:
    // closing an AF_PACKET socket waits for an RCU grace period, and one
    // per twin (192 VRFs on one port) held the stop for seconds.
    let mut sockets: Vec<(String, Option<InjectSocket>)> = Vec::new();
    // Per twin: its port's entry in `sockets` (usize::MAX: none).
    let mut socket_of: Vec<usize> = Vec::new();
    let mut batch = FrameBatch::new();
    // A subinterface's frames, tagged (the slow path's one buffer).
    let mut tagged = vec![0u8; io::MAX_FRAME_LEN + 4];
    // An ARP reply for a VRRP virtual address (docs/vrrp.md).
    let mut arp = [0u8; 42];
    let q = &shared.punts;
    let mut pollfds: Vec<libc::pollfd> = Vec::new();
    let mut version = u64::MAX;
    // A pass reads the twins that have frames, not all of them (410 twins
    // cost 410 reads a pass and a 411-entry poll per sleep): see
    // tap_ready. Rebuilt, with every twin read once, whenever the set of
    // twins changes (`config apply`).
    let mut readiness: Option<crate::tap_ready::TapReadiness> = None;
    let mut ready: Vec<usize> = Vec::new();
    let mut dirty: Vec<bool> = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let mut busy = false;
        // Held for one turn (not while sleeping): a `config apply` adding
        // or removing twins waits at most that long.
        let mut guard = set.lock().unwrap_or_else(|e| e.into_inner());
        let PuntSet {
            taps,
            names,
            version: v,
        } = &mut *guard;
        if *v != version {
            version = *v;
            tap_of = names
                .iter()
                .enumerate()
                .map(|(k, (port, _, _, _))| (*port, k))
                .collect();
            let mut kept: Vec<(String, Option<InjectSocket>)> = Vec::new();
            for port in names.iter().filter_map(|n| n.1.as_ref()) {
                if kept.iter().any(|(p, _)| p == port) {
                    continue;
                }
                let open = sockets
                    .iter_mut()
                    .find(|(p, _)| p == port)
                    .and_then(|(_, s)| s.take());
                kept.push((port.clone(), open));
            }
            // Those of ports that left, closed together (see the end).
            let left = std::mem::replace(&mut sockets, kept);
            io::in_parallel(left.into_iter().filter_map(|(_, s)| s).collect(), drop);
            socket_of = names
                .iter()
                .map(|n| {
                    n.1.as_ref()
                        .and_then(|port| sockets.iter().position(|(p, _)| p == port))
                        .unwrap_or(usize::MAX)
                })
                .collect();
            let fds: Vec<std::os::fd::RawFd> = taps.iter().filter_map(|t| t.rx_fd()).collect();
            readiness = (fds.len() == taps.len())
                .then(|| crate::tap_ready::TapReadiness::new(q.event_fd(), &fds));
            pollfds = std::iter::once(q.event_fd())
                .chain(fds.iter().copied())
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            ready = (0..taps.len()).collect();
            dirty = vec![false; taps.len()];
        }
        // Punts → TAPs.
        while let Some(b) = q.pop() {
            busy = true;
            // ARP requests for a VRRP virtual address never reach the
            // kernel: the master answers with the virtual MAC, a backup
            // stays silent (RFC 5798 6.4.2, 6.4.3).
            if let (true, Some(&k)) = (vrrp.any(), tap_of.get(&b.port)) {
                match virtual_arp(&vrrp, b.port, b.frame(), &mut arp) {
                    VirtualArp::Kernel => {}
                    VirtualArp::Held => {
                        stats.vrrp_arp_held.fetch_add(1, Ordering::Relaxed);
                        q.recycle(b);
                        continue;
                    }
                    VirtualArp::Reply => {
                        let ok = match &names[k].1 {
                            Some(port) if socket_of[k] != usize::MAX => {
                                send_inject(&mut sockets[socket_of[k]].1, port, &arp)
                            }
                            Some(_) => false,
                            None => {
                                let ok = shared.to_vlan.push(names[k].0, 0, &arp);
                                shared.to_vlan.kick();
                                ok
                            }
                        };
                        let c = if ok {
                            &stats.vrrp_arp_answered
                        } else {
                            &stats.inject_errors
                        };
                        c.fetch_add(1, Ordering::Relaxed);
                        q.recycle(b);
                        continue;
                    }
                }
            }
            if let Some(&k) = tap_of.get(&b.port) {
                let t = &mut taps[k];
                if t.tx_slot().is_none() {
                    let _ = t.flush();
                }
                match t.tx_slot() {
                    Some(slot) => {
                        let f = b.frame();
                        let n = f.len().min(slot.len());
                        slot[..n].copy_from_slice(&f[..n]);
                        // To a VRRP virtual MAC: to the twin's own MAC.
                        vrrp.readdress_punt(b.port, &mut slot[..n]);
                        t.tx_commit(n);
                        dirty[k] = true;
                        stats.punted_to_kernel.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        stats.punt_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            q.recycle(b);
        }
        for (k, d) in dirty.iter_mut().enumerate() {
            if std::mem::take(d) && taps[k].flush().is_err() {
                stats.punt_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        // TAPs → ports.
        for &k in &ready {
            let Some(t) = taps.get_mut(k) else {
                continue;
            };
            batch.clear();
            if t.recv(&mut batch, names[k].0).is_err() || batch.is_empty() {
                continue;
            }
            busy = true;
            let mut routed = false;
            for i in 0..batch.len() {
                if let Some(mac) = names[k].3 {
                    // A VRF's kernel's catch-all route: routed by the
                    // workers in the VRF (docs/vrf.md).
                    let f = batch.frame(i);
                    if f.len() >= 14 && f[0..6] == mac {
                        let c = if shared.to_vlan.push(names[k].0, FROM_KERNEL_ROUTE, f) {
                            routed = true;
                            &stats.routed_from_kernel
                        } else {
                            &stats.inject_errors
                        };
                        c.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
                let ok = match &names[k].1 {
                    Some(port) if names[k].2 != 0 => {
                        let n = push_vlan_tag(batch.frame(i), names[k].2, &mut tagged);
                        n > 0 && send_inject(&mut sockets[socket_of[k]].1, port, &tagged[..n])
                    }
                    Some(port) => send_inject(&mut sockets[socket_of[k]].1, port, batch.frame(i)),
                    None => shared.to_vlan.push(names[k].0, 0, batch.frame(i)),
                };
                let c = if ok {
                    &stats.injected
                } else {
                    &stats.inject_errors
                };
                c.fetch_add(1, Ordering::Relaxed);
            }
            if names[k].1.is_none() || routed {
                shared.to_vlan.kick();
            }
        }
        drop(guard);
        let sleep = !busy && q.prepare_sleep();
        match &mut readiness {
            Some(r) => r.wait(if sleep { 100 } else { 0 }, &mut ready),
            // Without epoll every twin is read every pass (`ready` stays
            // all of them).
            None => {
                if sleep {
                    // SAFETY: pollfds is a valid array of pollfd of the given length.
                    unsafe {
                        libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, 100);
                    }
                }
            }
        }
        if sleep {
            q.clear_wake();
        }
    }
    // Each inject socket's close waits for an RCU grace period
    // (`packet_release`): one after another, 410 ports' sockets held the
    // stop for seconds. Closed together, their waits overlap.
    io::in_parallel(sockets.into_iter().filter_map(|(_, s)| s).collect(), drop);
    // The twins stay open until `Router::remove_namespaces` closes them
    // (in parallel), or the router is dropped.
}

/// What the punt thread does with a punted frame for VRRP.
#[derive(Debug, PartialEq, Eq)]
enum VirtualArp {
    /// Not an ARP request for a virtual address: to the kernel as usual.
    Kernel,
    /// For a virtual address this node backs up: dropped.
    Held,
    /// Answered: the reply is in the buffer.
    Reply,
}

/// An ARP request (not a gratuitous one) for a virtual address on `port`:
/// the master's reply into `out`.
fn virtual_arp(
    v: &tables::vrrp::VirtualRouters,
    port: u16,
    frame: &[u8],
    out: &mut [u8; 42],
) -> VirtualArp {
    let Some((mac, sender, target)) = wire::vrrp::arp_request(frame) else {
        return VirtualArp::Kernel;
    };
    if sender == target {
        return VirtualArp::Kernel;
    }
    match v.arp(port, target) {
        tables::vrrp::ArpAnswer::NotVirtual => VirtualArp::Kernel,
        tables::vrrp::ArpAnswer::Backup => VirtualArp::Held,
        tables::vrrp::ArpAnswer::Master(vrid) => {
            let vmac = wire::vrrp::virtual_mac(vrid);
            match wire::vrrp::arp_reply(vmac, target, mac, sender, out) {
                Some(_) => VirtualArp::Reply,
                None => VirtualArp::Kernel,
            }
        }
    }
}

/// `frame` with an 802.1Q tag (`tag`, priority 0) after its MAC
/// addresses, into `out`; its length, 0 if it does not fit.
pub fn push_vlan_tag(frame: &[u8], tag: u16, out: &mut [u8]) -> usize {
    let n = frame.len() + 4;
    if frame.len() < 14 || out.len() < n {
        return 0;
    }
    out[..12].copy_from_slice(&frame[..12]);
    out[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
    out[14..16].copy_from_slice(&(tag & 0x0fff).to_be_bytes());
    out[16..n].copy_from_slice(&frame[12..]);
    n
}

/// Inject one frame on a port, (re)opening the socket as needed: the port
/// may have been deleted and re-created since.
fn send_inject(sock: &mut Option<InjectSocket>, name: &str, frame: &[u8]) -> bool {
    if sock.is_none() {
        *sock = InjectSocket::open(name).ok();
    }
    let Some(s) = sock.as_ref() else {
        return false;
    };
    match s.send(frame) {
        Ok(()) => true,
        Err(e) => {
            if matches!(
                e.raw_os_error(),
                Some(libc::ENXIO) | Some(libc::ENODEV) | Some(libc::ENETDOWN)
            ) {
                *sock = None;
            }
            false
        }
    }
}

/// Mirror the kernel's neighbours on the TAPs into the forwarding table,
/// and hold the FIB's next hops as managed neighbours (`managed`: a
/// request socket in the same namespace and the FIB).
fn neighbor_loop(
    shared: Arc<Shared>,
    mut mon: NeighborMonitor,
    table: Arc<NeighborTable>,
    by_ifindex: Arc<Mutex<HashMap<u32, u16>>>,
    stop: Arc<AtomicBool>,
    stats: Arc<RouterStats>,
    mut managed: Option<(Rtnl, Arc<Mutex<Fib>>)>,
) {
    let mut held = crate::managed::ManagedNeighbors::new();
    let mut ended = Vec::new();
    if let Err(e) = mon.request_dump() {
        tracing::warn!("neighbour dump: {e}");
    }
    while !shared.stop.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        let events = match mon.recv(Duration::from_millis(200)) {
            Ok(ev) => ev,
            Err(e) => {
                if crate::kernel::is_overrun(&e) {
                    stats.neighbor_resyncs.fetch_add(1, Ordering::Relaxed);
                } else {
                    tracing::warn!("neighbour monitor: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
                let _ = mon.request_dump();
                continue;
            }
        };
        let now = shared.now();
        let t_now = Instant::now();
        let map = by_ifindex.lock().unwrap_or_else(|e| e.into_inner());
        for ev in events {
            let Some(&port) = map.get(&ev.ifindex) else {
                continue;
            };
            // The VRF's catch-all gateway is Lanyard itself, no neighbour.
            if ev.ip == IpAddr::V4(VRF_GATEWAY4) || ev.ip == IpAddr::V6(VRF_GATEWAY6) {
                continue;
            }
            // A held next hop the kernel deleted (forced collection,
            // flush) keeps its MAC here while the kernel makes it again.
            let keep = held.observe(&ev, t_now);
            stats.neighbor_updates.fetch_add(1, Ordering::Relaxed);
            if keep {
                continue;
            }
            match (ev.usable(), ev.mac) {
                (true, Some(mac)) => {
                    let state = if ev.state & crate::kernel::neigh::NUD_REACHABLE != 0 {
                        NeighborState::Reachable
                    } else {
                        NeighborState::Stale
                    };
                    let n = Neighbor {
                        mac,
                        port,
                        state,
                        confirmed: now,
                    };
                    if !table.upsert(ev.ip, n) {
                        stats.neighbor_table_full.fetch_add(1, Ordering::Relaxed);
                    }
                }
                _ => {
                    if table.lookup(ev.ip).is_some_and(|n| n.port == port) {
                        table.remove(ev.ip);
                    }
                }
            }
        }
        // Bounded, and only when the next hops or the kernel's entries
        // changed (crate::managed).
        if let Some((rtnl, fib)) = managed.as_mut() {
            let t = Instant::now();
            held.refresh(fib, &map, t);
            // Bridged entries the kernel neither resolved nor failed in
            // time, or that no route uses any more: the copy goes.
            ended.clear();
            if held.bridges_ended(t, &mut ended) > 0 {
                for &(ifindex, ip) in &ended {
                    if let Some(&port) = map.get(&ifindex) {
                        if table.lookup(ip).is_some_and(|n| n.port == port) {
                            table.remove(ip);
                        }
                    }
                }
            }
            drop(map);
            held.reconcile(rtnl, &stats.managed, t);
        }
    }
    held.retire(&stats.managed);
}

/// First interface index of the VRF label interfaces (one per VRF, by
/// position): far above what the kernel hands out, the same in Lanyard's
/// namespace and the VRF's.
const LABEL_IFINDEX_BASE: u32 = 1 << 30;

/// Creates (again, after a restart) VRF `name`'s label interface: a veth
/// `lyvrf<table>` in our namespace and `name` in the VRF's, both with
/// index [`LABEL_IFINDEX_BASE`] + `k`, both up. Returns the index.
fn vrf_label_interface(
    rtnl: &mut Rtnl,
    ns: &std::fs::File,
    name: &str,
    table: u32,
    k: usize,
) -> Result<u32, String> {
    use std::os::fd::AsRawFd;
    let index = LABEL_IFINDEX_BASE + k as u32;
    let here = format!("lyvrf{table}");
    if let Ok(old) = rtnl.link_index(&here) {
        rtnl.del_link(old)
            .map_err(|e| format!("remove the old {here}: {e}"))?;
    }
    rtnl.add_veth(&here, index, name, index, ns.as_raw_fd())
        .map_err(|e| format!("veth {here} / {name} index {index}: {e}"))?;
    io::link::set_up(&here).map_err(|e| format!("{here} up: {e}"))?;
    let peer = name.to_string();
    crate::netns::run_in(ns, move || {
        io::link::set_up(&peer).map_err(|e| e.to_string())
    })
    .map_err(|e| e.to_string())
    .and_then(|r| r)
    .map_err(|e| format!("{name} up: {e}"))?;
    Ok(index)
}

const RT_TABLE_MAIN_U32: u32 = crate::frr::netlink::RT_TABLE_MAIN;

/// One FIB the FPM feed writes: the default VRF's or a VRF's.
struct VrfFeed {
    /// FPM table id of its routes.
    table: u32,
    fib: Arc<Mutex<Fib>>,
    /// TAP twin ifindex (in its namespace) → port.
    by_ifindex: HashMap<u32, u16>,
    /// The other VRFs' twin ifindexes → port (the default VRF's ports
    /// among them), for routes bgpd leaked from another VRF (`import
    /// vrf`): zebra resolved their next hop in the source VRF, so the
    /// interface is one of its twins. Handed to the FIB
    /// ([`Fib::set_leaked_ports`]), which uses it for unlabelled routes
    /// only: the default VRF's label entries resolve with `by_ifindex`.
    leaked: HashMap<u32, u16>,
}

/// Give every feed, the default VRF's included, the twins of the other
/// VRFs (the default VRF's ports among them), and its FIB the same map
/// ([`Fib::set_leaked_ports`]: unlabelled routes only, never label
/// entries). An index the VRF has itself stays its own; one that two
/// other VRFs share is left out (it cannot say which VRF the next hop is
/// in). Twins are made in Lanyard's namespace and keep their index when
/// moved, so indexes repeat only if something else took one in a
/// namespace.
fn set_leak_maps(feeds: &mut [VrfFeed]) {
    for k in 0..feeds.len() {
        let mut leaked: HashMap<u32, Option<u16>> = HashMap::new();
        for (j, f) in feeds.iter().enumerate() {
            if j == k {
                continue;
            }
            for (&ifindex, &port) in &f.by_ifindex {
                if feeds[k].by_ifindex.contains_key(&ifindex) {
                    continue;
                }
                leaked
                    .entry(ifindex)
                    .and_modify(|p| *p = None)
                    .or_insert(Some(port));
            }
        }
        feeds[k].leaked = leaked
            .into_iter()
            .filter_map(|(i, p)| Some((i, p?)))
            .collect();
        feeds[k]
            .fib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_leaked_ports(feeds[k].leaked.clone());
    }
}

/// The indexes `a` and `b` map differently (in one only, or to another
/// port).
fn changed_keys(a: &HashMap<u32, u16>, b: &HashMap<u32, u16>) -> HashSet<u32> {
    a.iter()
        .filter(|(i, p)| b.get(i) != Some(p))
        .map(|(i, _)| *i)
        .chain(
            b.iter()
                .filter(|(i, p)| a.get(i) != Some(p))
                .map(|(i, _)| *i),
        )
        .collect()
}

/// A VRF namespace's own catch-all route (`install_catchall`), which
/// zebra hands on as a kernel route (with its own metric, not the
/// kernel's): never a route of the VRF's FIB (it would send the VRF's
/// unknown destinations to Lanyard itself). Known by its gateway. Its
/// withdrawal carries no next hop and passes: the FIB has no such route.
fn is_catchall(u: &crate::frr::RouteUpdate) -> bool {
    use crate::frr::{NextHops, RouteUpdate};
    let gw4 = Some(IpAddr::V4(VRF_GATEWAY4));
    let gw6 = Some(IpAddr::V6(VRF_GATEWAY6));
    match u {
        RouteUpdate::Add {
            prefix,
            nexthops: NextHops::List(hops),
            ..
        } => {
            prefix.len == 0
                && !hops.is_empty()
                && hops.iter().all(|h| h.gateway == gw4 || h.gateway == gw6)
        }
        _ => false,
    }
}

/// The table id of an update (`None`: not a route; every FIB gets it).
fn update_table(u: &crate::frr::RouteUpdate) -> Option<u32> {
    use crate::frr::RouteUpdate;
    match u {
        RouteUpdate::Add { table, .. } | RouteUpdate::Del { table, .. } => Some(*table),
        RouteUpdate::Label(labelfeed::LabelMsg::RouteAdd(r)) => Some(r.table),
        _ => None,
    }
}

/// Hands one FPM event to the FIBs: connection events to all (each keeps
/// its own resync generation), routes to the FIB of their table id; routes
/// of a table no VRF has go to the default VRF's FIB, which counts them
/// (`other_table`). Label entries and next-hop objects go to the default
/// VRF's FIB (labels are global; next-hop objects are not used with netns
/// VRFs, docs/vrf.md).
fn dispatch(feeds: &[VrfFeed], ev: &crate::frr::FpmEvent) {
    use crate::frr::FpmEvent;
    let apply = |f: &VrfFeed, ev: &FpmEvent| {
        // Other VRFs' twins (`leaked`) are the FIB's own business: they
        // resolve leaked routes, never label entries.
        let port_of = |ifindex: u32| f.by_ifindex.get(&ifindex).copied();
        f.fib
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .apply_frr(ev, &port_of);
    };
    match ev {
        FpmEvent::Updates(us) if feeds.len() > 1 => {
            let mut per: Vec<Vec<crate::frr::RouteUpdate>> = vec![Vec::new(); feeds.len()];
            for u in us {
                let k = update_table(u)
                    .and_then(|t| feeds.iter().position(|f| f.table == t))
                    .unwrap_or(0);
                if is_catchall(u) {
                    continue;
                }
                per[k].push(u.clone());
            }
            for (k, us) in per.into_iter().enumerate() {
                if !us.is_empty() {
                    apply(&feeds[k], &FpmEvent::Updates(us));
                }
            }
        }
        FpmEvent::Updates(_) => apply(&feeds[0], ev),
        _ => feeds.iter().for_each(|f| apply(f, ev)),
    }
}

/// Environment of a restarted switch: where its predecessor left zebra's
/// installed state ([`crate::frr::fpm::Journal`]).
pub const FPM_JOURNAL_ENV: &str = "LANYARD_FPM_JOURNAL";

/// After `lanyard restart`: the routes, next-hop objects and labels zebra
/// had installed in the image before, applied as a connection of their
/// own before zebra's comes (about 3 s later: its reconnect timer), so
/// routed traffic keeps its routes across the restart. zebra's replay then
/// refreshes them and its quiet point sweeps what it did not (the FIB's
/// stale marking). They enter the journal too, for a restart before that.
fn restore_fpm_journal(stats: &crate::frr::FpmStats, feeds: &[VrfFeed]) {
    let Some(path) = std::env::var_os(FPM_JOURNAL_ENV) else {
        return;
    };
    std::env::remove_var(FPM_JOURNAL_ENV);
    let Ok(bytes) = std::fs::read(&path) else {
        return;
    };
    let _ = std::fs::remove_file(&path);
    let mut reader = crate::frr::fpm::FrameReader::new();
    reader.extend(&bytes);
    let mut decoder = crate::frr::fpm::StreamDecoder::default();
    let mut updates = Vec::new();
    if let Err(e) = decoder.drain(&mut reader, stats, &mut updates) {
        tracing::warn!("restart: zebra's routes from before the restart: {e}; the rest skipped");
    }
    let n = updates.len();
    dispatch(
        feeds,
        &crate::frr::FpmEvent::Connected {
            peer: std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
        },
    );
    dispatch(feeds, &crate::frr::FpmEvent::Updates(updates));
    tracing::info!(
        "restart: {n} routes, next hops and labels from zebra restored until it reconnects"
    );
}

/// Feed the FIBs from zebra, and reclaim LPM memory after grace periods.
fn fib_loop(shared: Arc<Shared>, server: Option<FpmServer>, feeds: Arc<Mutex<Vec<VrfFeed>>>) {
    let (handle, rx) = match server.map(|s| s.spawn_channel()) {
        Some(Ok((h, rx))) => (Some(h), Some(rx)),
        Some(Err(e)) => {
            tracing::warn!("FPM listener: {e}");
            (None, None)
        }
        None => (None, None),
    };
    let mut last_maintain = Instant::now();
    let mut vpn = crate::static_vpn::Upkeep::default();
    while !shared.stop.load(Ordering::Relaxed) {
        match &rx {
            Some(rx) => {
                if let Ok(ev) = rx.recv_timeout(Duration::from_millis(200)) {
                    // VRFs added or deleted at run time change the feeds.
                    let feeds = feeds.lock().unwrap_or_else(|e| e.into_inner());
                    dispatch(&feeds, &ev);
                    while let Ok(ev) = rx.try_recv() {
                        dispatch(&feeds, &ev);
                    }
                }
            }
            None => std::thread::sleep(Duration::from_millis(200)),
        }
        // Static VPN routes follow the default VRF's way to their PEs.
        {
            let feeds = feeds.lock().unwrap_or_else(|e| e.into_inner());
            vpn.pass(feeds.iter().skip(1).map(|f| &*f.fib), &shared);
        }
        if last_maintain.elapsed() >= Duration::from_secs(1) {
            last_maintain = Instant::now();
            for feed in feeds.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                let mut f = feed.fib.lock().unwrap_or_else(|e| e.into_inner());
                if f.needs_maintenance() {
                    f.maintain(&|| shared.quiesce(Duration::from_secs(1)));
                }
            }
        }
    }
    if let Some(h) = handle {
        h.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpls_section_reaches_the_label_plane() {
        let d = mpls_plane_config(&config::mpls::MplsConfig::default());
        assert_eq!(d, pipeline::mpls::MplsConfig::default());
        let m = config::mpls::MplsConfig {
            ttl_propagation: config::mpls::TtlPropagation::Pipe,
            icmp_tunneling: config::mpls::IcmpTunneling::Never,
            tc_of_class: Some(vec![1, 1, 2, 2, 3, 5, 6, 7]),
            class_of_tc: Some(vec![0, 0, 0, 0, 4, 5, 6, 7]),
            tc_remark: true,
            ..Default::default()
        };
        let c = mpls_plane_config(&m);
        assert_eq!(c.ttl, pipeline::mpls::TtlMode::Pipe);
        assert_eq!(c.icmp_tunneling, pipeline::mpls::IcmpTunneling::Never);
        assert_eq!(c.tc_of_class, [1, 1, 2, 2, 3, 5, 6, 7]);
        assert_eq!(c.class_of_tc, [0, 0, 0, 0, 4, 5, 6, 7]);
        assert!(c.remark);
    }

    /// zebra's bytes for `prefix` via `gw` out of `ifindex`, in `table`.
    fn frr_route(msg: u16, prefix: &str, table: u32, gw: &str, ifindex: u32) -> Vec<u8> {
        use crate::frr::netlink::{build, NextHop};
        let (a, l) = prefix.split_once('/').unwrap();
        let p = Prefix::new(a.parse().unwrap(), l.parse().unwrap()).unwrap();
        build::route(
            msg,
            p,
            table,
            186,
            20,
            &crate::frr::NextHops::List(vec![NextHop {
                gateway: Some(gw.parse().unwrap()),
                ifindex,
                weight: 1,
            }]),
        )
    }

    #[test]
    fn leaked_routes_leave_by_the_source_vrfs_interface() {
        use crate::frr::netlink::decode;
        use crate::frr::netlink::RTM_NEWROUTE;
        use crate::frr::FpmEvent;
        let vrf = |table| Arc::new(Mutex::new(Fib::with_config(FibConfig::for_vrf(table, 64))));
        // Twins: default VRF ifindex 2 (port 0) and 8 (port 4); CUSTA 5
        // (port 1); CUSTB 6 (port 2), 7 (port 3) and 8 (port 5, an index
        // the default namespace has too).
        let maps: [(u32, &[(u32, u16)]); 3] = [
            (254, &[(2, 0), (8, 4)]),
            (1001, &[(5, 1)]),
            (1002, &[(6, 2), (7, 3), (8, 5)]),
        ];
        let mut feeds: Vec<VrfFeed> = maps
            .iter()
            .map(|&(table, m)| VrfFeed {
                table,
                fib: if table == 254 {
                    Arc::new(Mutex::new(Fib::new()))
                } else {
                    vrf(table)
                },
                by_ifindex: m.iter().copied().collect(),
                leaked: HashMap::new(),
            })
            .collect();
        set_leak_maps(&mut feeds);
        assert_eq!(feeds[0].leaked.get(&5), Some(&1), "CUSTA's twin");
        assert_eq!(feeds[0].leaked.get(&8), None, "its own index stays its own");
        assert_eq!(feeds[1].leaked.get(&6), Some(&2));
        assert_eq!(feeds[1].leaked.get(&2), Some(&0));
        assert_eq!(feeds[1].leaked.get(&8), None, "ambiguous: left out");
        assert_eq!(feeds[2].leaked.get(&5), Some(&1));
        assert_eq!(feeds[2].leaked.get(&8), None, "its own index stays its own");
        let mut us = Vec::new();
        for b in [
            // CUSTB's route leaked into CUSTA (import vrf CUSTB): zebra
            // resolved 10.2.0.2 in CUSTB, out of CUSTB's twin 6.
            frr_route(RTM_NEWROUTE, "198.51.100.0/24", 1001, "10.2.0.2", 6),
            // CUSTB's own copy.
            frr_route(RTM_NEWROUTE, "198.51.100.0/24", 1002, "10.2.0.2", 6),
            // CUSTA's connected subnet leaked into CUSTB.
            frr_route(RTM_NEWROUTE, "10.1.0.0/24", 1002, "10.1.0.2", 5),
            // Through an ambiguous index: not installed.
            frr_route(RTM_NEWROUTE, "203.0.113.0/24", 1001, "10.9.0.2", 8),
        ] {
            us.extend(decode(&b).unwrap());
        }
        dispatch(&feeds, &FpmEvent::Updates(us));
        let route_of = |k: usize, addr: &str| {
            feeds[k]
                .fib
                .lock()
                .unwrap()
                .lookup(addr.parse().unwrap())
                .map(|r| (r.hops[0].port, r.hops[0].gateway.unwrap().to_string()))
        };
        assert_eq!(route_of(1, "198.51.100.7"), Some((2, "10.2.0.2".into())));
        assert_eq!(route_of(2, "198.51.100.7"), Some((2, "10.2.0.2".into())));
        assert_eq!(route_of(2, "10.1.0.9"), Some((1, "10.1.0.2".into())));
        assert_eq!(route_of(1, "203.0.113.1"), None);
        assert_eq!(route_of(0, "198.51.100.7"), None);
    }

    /// Leaking into the default VRF (`import vrf CUSTA` in the default
    /// bgpd instance) and out of it (`import vrf default` in CUSTA's): the
    /// routes leave by the source VRF's interface, while the default
    /// VRF's label entries and labelled routes still resolve with its own
    /// ports only (a label path naming a VRF's twin index stays
    /// unresolved).
    #[test]
    fn routes_leaked_into_the_default_vrf_leave_by_the_source_vrf_not_labels() {
        use crate::frr::netlink::{decode, RTM_NEWROUTE};
        use crate::frr::{FpmEvent, RouteUpdate};
        use labelfeed::{LabelEntry, LabelMsg, LabelPath, LabelledRoute};
        // Twins: default VRF 2 (port 0); CUSTA 5 (port 1); CUSTB 6 (port 2).
        let mut feeds: Vec<VrfFeed> = [(254u32, 2u32, 0u16), (1001, 5, 1), (1002, 6, 2)]
            .into_iter()
            .map(|(table, ifindex, port)| VrfFeed {
                table,
                fib: Arc::new(Mutex::new(if table == 254 {
                    Fib::new()
                } else {
                    Fib::with_config(FibConfig::for_vrf(table, 64))
                })),
                by_ifindex: [(ifindex, port)].into_iter().collect(),
                leaked: HashMap::new(),
            })
            .collect();
        set_leak_maps(&mut feeds);
        let mut us = Vec::new();
        for b in [
            // CUSTA's static route leaked into the default table: zebra
            // resolved 10.1.0.2 in CUSTA, out of CUSTA's twin 5.
            frr_route(RTM_NEWROUTE, "192.0.2.0/24", 254, "10.1.0.2", 5),
            // The same from CUSTB, IPv6.
            frr_route(RTM_NEWROUTE, "2001:db8:99::/48", 254, "2001:db8:2::2", 6),
            // The default VRF's connected subnet leaked into CUSTA.
            frr_route(RTM_NEWROUTE, "10.3.0.0/24", 1001, "10.3.0.2", 2),
        ] {
            us.extend(decode(&b).unwrap());
        }
        let path = |oif: u32, labels: Vec<u32>| LabelPath {
            via: Some("10.1.0.2".parse().unwrap()),
            oif: Some(oif),
            labels,
        };
        // Label entries and an LDP-labelled route naming CUSTA's twin
        // index (no default-namespace port has it), and one label entry
        // through the default VRF's own port.
        us.push(RouteUpdate::Label(LabelMsg::LabelAdd(LabelEntry {
            in_label: 100,
            protocol: 193,
            paths: vec![path(5, vec![200])],
        })));
        us.push(RouteUpdate::Label(LabelMsg::LabelAdd(LabelEntry {
            in_label: 101,
            protocol: 193,
            paths: vec![path(2, vec![201])],
        })));
        us.push(RouteUpdate::Label(LabelMsg::RouteAdd(LabelledRoute {
            prefix: "198.18.0.0".parse().unwrap(),
            prefix_len: 15,
            table: 254,
            protocol: 193,
            paths: vec![path(5, vec![300])],
        })));
        dispatch(&feeds, &FpmEvent::Updates(us));
        let route_of = |k: usize, addr: &str| {
            feeds[k]
                .fib
                .lock()
                .unwrap()
                .lookup(addr.parse().unwrap())
                .map(|r| (r.hops[0].port, r.hops[0].gateway.unwrap().to_string()))
        };
        assert_eq!(route_of(0, "192.0.2.9"), Some((1, "10.1.0.2".into())));
        assert_eq!(
            route_of(0, "2001:db8:99::7"),
            Some((2, "2001:db8:2::2".into()))
        );
        assert_eq!(route_of(1, "10.3.0.9"), Some((0, "10.3.0.2".into())));
        assert_eq!(route_of(1, "192.0.2.9"), None, "CUSTA has only its leak");
        assert_eq!(
            route_of(0, "198.18.0.1"),
            None,
            "a labelled path: not leaked"
        );
        let labels = feeds[0].fib.lock().unwrap().mpls_table();
        let installed = |l: u32| labels.iter().any(|e| e.in_label == l && e.installed);
        assert!(
            !installed(100),
            "a label path by another VRF's twin: {labels:?}"
        );
        assert!(installed(101), "by the default VRF's own port: {labels:?}");
    }

    /// A VRF added or deleted at run time changes the other FIBs' leaked
    /// ports: only the routes through the changed twins are re-mapped
    /// (a big default table is not re-programmed for each VRF change).
    #[test]
    fn a_vrf_change_re_maps_only_the_routes_through_its_twins() {
        use crate::frr::netlink::{decode, RTM_NEWROUTE};
        use crate::frr::FpmEvent;
        let feed = |table: u32, fib: &Arc<Mutex<Fib>>, m: &[(u32, u16)]| VrfFeed {
            table,
            fib: fib.clone(),
            by_ifindex: m.iter().copied().collect(),
            leaked: HashMap::new(),
        };
        let d = Arc::new(Mutex::new(Fib::new()));
        let a = Arc::new(Mutex::new(Fib::with_config(FibConfig::for_vrf(1001, 64))));
        let b = Arc::new(Mutex::new(Fib::with_config(FibConfig::for_vrf(1002, 64))));
        let mut feeds = vec![feed(254, &d, &[(2, 0)]), feed(1001, &a, &[(5, 1)])];
        set_leak_maps(&mut feeds);
        let mut us = Vec::new();
        for b in [
            frr_route(RTM_NEWROUTE, "10.9.0.0/24", 254, "10.0.0.9", 2),
            frr_route(RTM_NEWROUTE, "192.0.2.0/24", 254, "10.1.0.2", 5),
            // Leaked from CUSTB before CUSTB is Lanyard's: unresolvable.
            frr_route(RTM_NEWROUTE, "198.51.100.0/24", 254, "10.2.0.2", 6),
        ] {
            us.extend(decode(&b).unwrap());
        }
        dispatch(&feeds, &FpmEvent::Updates(us));
        let port_of = |addr: &str| {
            d.lock()
                .unwrap()
                .lookup(addr.parse().unwrap())
                .map(|r| r.hops[0].port)
        };
        assert_eq!(port_of("198.51.100.7"), None);
        // CUSTB (twin 6, port 2) comes.
        let refresh = |old: &[VrfFeed], new: &[VrfFeed]| -> usize {
            let (o, n) = (&old[0], &new[0]);
            assert_eq!(o.by_ifindex, n.by_ifindex);
            let port_of = |i: u32| n.by_ifindex.get(&i).copied();
            d.lock()
                .unwrap()
                .refresh_leaked(&changed_keys(&o.leaked, &n.leaked), &port_of)
        };
        let mut with_b = vec![
            feed(254, &d, &[(2, 0)]),
            feed(1001, &a, &[(5, 1)]),
            feed(1002, &b, &[(6, 2)]),
        ];
        set_leak_maps(&mut with_b);
        assert_eq!(refresh(&feeds, &with_b), 1, "only the route via twin 6");
        assert_eq!(port_of("198.51.100.7"), Some(2));
        assert_eq!(port_of("192.0.2.7"), Some(1));
        assert_eq!(port_of("10.9.0.7"), Some(0));
        // CUSTB goes again.
        let mut without_b = vec![feed(254, &d, &[(2, 0)]), feed(1001, &a, &[(5, 1)])];
        set_leak_maps(&mut without_b);
        assert_eq!(refresh(&with_b, &without_b), 1);
        assert_eq!(port_of("198.51.100.7"), None);
        assert_eq!(port_of("192.0.2.7"), Some(1));
    }

    #[test]
    fn a_vrf_namespaces_catch_all_route_never_reaches_its_fib() {
        use crate::frr::netlink::{decode, RTM_NEWROUTE};
        use crate::frr::FpmEvent;
        let feeds: Vec<VrfFeed> = [(254, 0u16), (1001, 1)]
            .into_iter()
            .map(|(table, port)| VrfFeed {
                table,
                fib: Arc::new(Mutex::new(if table == 254 {
                    Fib::new()
                } else {
                    Fib::with_config(FibConfig::for_vrf(table, 64))
                })),
                by_ifindex: [(3u32, port)].into_iter().collect(),
                leaked: HashMap::new(),
            })
            .collect();
        let mut us = Vec::new();
        for b in [
            // zebra hands the kernel's catch-all on (metric 20, not ours).
            frr_route(RTM_NEWROUTE, "0.0.0.0/0", 1001, "169.254.255.254", 3),
            frr_route(RTM_NEWROUTE, "::/0", 1001, "fe80::169:254:255:254", 3),
            // A real default route of the VRF still gets in.
            frr_route(RTM_NEWROUTE, "::/0", 254, "fe80::1", 3),
            frr_route(RTM_NEWROUTE, "192.0.2.0/24", 1001, "10.1.0.2", 3),
        ] {
            us.extend(decode(&b).unwrap());
        }
        assert!(is_catchall(&us[0]) && is_catchall(&us[1]) && !is_catchall(&us[2]));
        let peer = "127.0.0.1:1".parse().unwrap();
        dispatch(&feeds, &FpmEvent::Connected { peer });
        dispatch(&feeds, &FpmEvent::Updates(us));
        let vrf = feeds[1].fib.lock().unwrap();
        assert!(vrf.lookup("192.0.2.1".parse().unwrap()).is_some());
        assert!(vrf.lookup("198.51.100.1".parse().unwrap()).is_none());
        assert!(vrf.lookup("2001:db8::1".parse().unwrap()).is_none());
        let default = feeds[0].fib.lock().unwrap();
        assert!(default.lookup("2001:db8::1".parse().unwrap()).is_some());
    }

    #[test]
    fn fpm_routes_reach_the_fib_of_their_vrf_table() {
        use crate::frr::netlink::{decode, RTM_DELROUTE, RTM_NEWROUTE};
        use crate::frr::FpmEvent;
        let vrf = |table| Arc::new(Mutex::new(Fib::with_config(FibConfig::for_vrf(table, 64))));
        // The same ifindex (3) in every namespace maps to a different port.
        let feeds: Vec<VrfFeed> = [(254, 0u16), (1001, 1), (1002, 2)]
            .into_iter()
            .map(|(table, port)| VrfFeed {
                table,
                fib: if table == 254 {
                    Arc::new(Mutex::new(Fib::new()))
                } else {
                    vrf(table)
                },
                by_ifindex: [(3u32, port)].into_iter().collect(),
                leaked: HashMap::new(),
            })
            .collect();
        let ev = |bytes: Vec<Vec<u8>>| {
            let mut us = Vec::new();
            for b in bytes {
                us.extend(decode(&b).unwrap());
            }
            FpmEvent::Updates(us)
        };
        let route_of = |k: usize, addr: &str| {
            feeds[k]
                .fib
                .lock()
                .unwrap()
                .lookup(addr.parse().unwrap())
                .map(|r| (r.hops[0].port, r.hops[0].gateway.unwrap().to_string()))
        };
        dispatch(
            &feeds,
            &FpmEvent::Connected {
                peer: "127.0.0.1:1".parse().unwrap(),
            },
        );
        // One frame: the same prefix in three tables, plus a table no VRF
        // has (counted by the default FIB, installed nowhere).
        dispatch(
            &feeds,
            &ev(vec![
                frr_route(RTM_NEWROUTE, "192.0.2.0/24", 254, "10.9.0.2", 3),
                frr_route(RTM_NEWROUTE, "192.0.2.0/24", 1001, "10.1.0.2", 3),
                frr_route(RTM_NEWROUTE, "192.0.2.0/24", 1002, "10.1.0.3", 3),
                frr_route(RTM_NEWROUTE, "198.51.100.0/24", 1003, "10.1.0.4", 3),
                frr_route(RTM_NEWROUTE, "2001:db8:99::/48", 1002, "2001:db8:1::3", 3),
            ]),
        );
        assert_eq!(route_of(0, "192.0.2.1"), Some((0, "10.9.0.2".into())));
        assert_eq!(route_of(1, "192.0.2.1"), Some((1, "10.1.0.2".into())));
        assert_eq!(route_of(2, "192.0.2.1"), Some((2, "10.1.0.3".into())));
        assert_eq!(
            route_of(2, "2001:db8:99::1"),
            Some((2, "2001:db8:1::3".into()))
        );
        assert_eq!(route_of(1, "2001:db8:99::1"), None);
        for k in 0..3 {
            assert_eq!(route_of(k, "198.51.100.1"), None, "table 1003 is no VRF's");
        }
        assert_eq!(feeds[0].fib.lock().unwrap().counters().other_table, 1);
        // A withdrawal in one VRF leaves the others alone.
        dispatch(
            &feeds,
            &ev(vec![frr_route(
                RTM_DELROUTE,
                "192.0.2.0/24",
                1001,
                "10.1.0.2",
                3,
            )]),
        );
        assert_eq!(route_of(1, "192.0.2.1"), None);
        assert!(route_of(0, "192.0.2.1").is_some() && route_of(2, "192.0.2.1").is_some());
        // A reconnect whose replay lacks VRF 1002's IPv6 route sweeps only it.
        dispatch(
            &feeds,
            &FpmEvent::Connected {
                peer: "127.0.0.1:1".parse().unwrap(),
            },
        );
        dispatch(
            &feeds,
            &ev(vec![
                frr_route(RTM_NEWROUTE, "192.0.2.0/24", 254, "10.9.0.2", 3),
                frr_route(RTM_NEWROUTE, "192.0.2.0/24", 1002, "10.1.0.3", 3),
            ]),
        );
        dispatch(&feeds, &FpmEvent::Settled);
        assert_eq!(route_of(2, "2001:db8:99::1"), None);
        assert_eq!(route_of(2, "192.0.2.1"), Some((2, "10.1.0.3".into())));
        assert_eq!(route_of(0, "192.0.2.1"), Some((0, "10.9.0.2".into())));
    }

    /// An imported VPN route as zebra 8.4 sends it over FPM (the spike's
    /// dump, docs/vrf.md): the VRF's table in `RTA_TABLE`, gateway and
    /// `RTA_OIF` of the default namespace, the stack in `RTA_ENCAP`.
    fn vpn_route(
        prefix: [u8; 4],
        len: u8,
        table: u32,
        gw: [u8; 4],
        oif: u32,
        push: &[u32],
    ) -> Vec<u8> {
        use crate::frr::netlink::build::{rtmsg, Msg};
        use crate::frr::netlink::*;
        let lse: Vec<u8> = push
            .iter()
            .enumerate()
            .flat_map(|(i, l)| {
                let bos = if i + 1 == push.len() { 0x100 } else { 0 };
                (l << 12 | bos).to_be_bytes()
            })
            .collect();
        let mut encap = Vec::new();
        encap.extend_from_slice(&((4 + lse.len()) as u16).to_ne_bytes());
        encap.extend_from_slice(&1u16.to_ne_bytes()); // MPLS_IPTUNNEL_DST
        encap.extend_from_slice(&lse);
        Msg::new(
            RTM_NEWROUTE,
            NLM_F_REQUEST | NLM_F_REPLACE | 0x400,
            &rtmsg(AF_INET, len, RT_TABLE_UNSPEC, 186, RTN_UNICAST),
        )
        .attr(RTA_DST, &prefix)
        .attr_u32(RTA_PRIORITY, 20)
        .attr_u32(RTA_TABLE, table)
        .attr(21, &1u16.to_ne_bytes()) // RTA_ENCAP_TYPE = LWTUNNEL_ENCAP_MPLS
        .attr(22, &encap) // RTA_ENCAP
        .attr(RTA_GATEWAY, &gw)
        .attr_u32(RTA_OIF, oif)
        .finish()
    }

    #[test]
    fn imported_vpnv6_routes_resolve_through_their_ipv4_gateway() {
        use crate::frr::netlink::build::{rtmsg, Msg};
        use crate::frr::netlink::*;
        use crate::frr::FpmEvent;
        use tables::mpls::{NHLFE_BIT, VIA_DEFAULT_BIT};
        let core = Arc::new(Mutex::new(Fib::new()));
        let vrf = Arc::new(Mutex::new(Fib::with_config(FibConfig::for_vrf(1001, 64))));
        let feeds = vec![
            VrfFeed {
                table: 254,
                fib: core.clone(),
                by_ifindex: [(2u32, 0u16)].into_iter().collect(),
                leaked: HashMap::new(),
            },
            VrfFeed {
                table: 1001,
                fib: vrf.clone(),
                by_ifindex: [(5u32, 1u16)].into_iter().collect(),
                leaked: HashMap::new(),
            },
        ];
        vrf.lock()
            .unwrap()
            .set_core(core.clone(), feeds[0].by_ifindex.clone());
        // zebra's VPNv6 route: table 1001, out of the core (oif 2), [81];
        // the gateway ::ffff:10.0.12.2 from zebra_lanyard_fpm.so, or none
        // (stock FRR).
        let v6 = |prefix: &str, gw: Option<&str>| {
            let a: Ipv6Addr = prefix.parse().unwrap();
            let mut encap = Vec::new();
            encap.extend_from_slice(&8u16.to_ne_bytes());
            encap.extend_from_slice(&1u16.to_ne_bytes()); // MPLS_IPTUNNEL_DST
            encap.extend_from_slice(&(81u32 << 12 | 0x100).to_be_bytes());
            let mut m = Msg::new(
                RTM_NEWROUTE,
                NLM_F_REQUEST | NLM_F_REPLACE | 0x400,
                &rtmsg(AF_INET6, 48, RT_TABLE_UNSPEC, 186, RTN_UNICAST),
            )
            .attr(RTA_DST, &a.octets())
            .attr_u32(RTA_TABLE, 1001)
            .attr(21, &1u16.to_ne_bytes())
            .attr(22, &encap)
            .attr_u32(RTA_OIF, 2);
            if let Some(g) = gw {
                m = m.attr(RTA_GATEWAY, &g.parse::<Ipv6Addr>().unwrap().octets());
            }
            decode(&m.finish()).unwrap()
        };
        let mut us = v6("2001:db8:b::", Some("::ffff:10.0.12.2"));
        us.extend(v6("2001:db8:c::", None));
        dispatch(&feeds, &FpmEvent::Updates(us));
        let r = vrf
            .lock()
            .unwrap()
            .lookup("2001:db8:b::7".parse().unwrap())
            .expect("the VPNv6 route");
        assert_eq!(
            (r.hops[0].port, r.hops[0].gateway),
            (0, Some("10.0.12.2".parse().unwrap())),
            "via the IPv4 core neighbour"
        );
        let t = r.target.unwrap();
        assert_ne!(t & VIA_DEFAULT_BIT, 0, "resolved in the default VRF");
        let n = core
            .lock()
            .unwrap()
            .lfib()
            .nhlfe(t & !VIA_DEFAULT_BIT & !NHLFE_BIT)
            .unwrap();
        assert_eq!(n.primary.labels.as_slice(), &[81]);
        // Without a gateway nothing could take the stack: not installed.
        assert!(vrf
            .lock()
            .unwrap()
            .lookup("2001:db8:c::7".parse().unwrap())
            .is_none());
    }

    #[test]
    fn imported_vpn_routes_resolve_through_the_default_vrf() {
        use crate::frr::netlink::{decode, RTM_DELROUTE, RTM_NEWROUTE};
        use crate::frr::FpmEvent;
        use tables::mpls::{NHLFE_BIT, VIA_DEFAULT_BIT};
        // ifindex 2 is `core` (port 0) in Lanyard's namespace and each
        // VRF's CE twin (ports 1, 2) in the VRF's: a VPN route's oif 2 is
        // the core's.
        let core = Arc::new(Mutex::new(Fib::new()));
        let feeds: Vec<VrfFeed> = [(254, 0u16), (1001, 1), (1002, 2)]
            .into_iter()
            .map(|(table, port)| VrfFeed {
                table,
                fib: if table == 254 {
                    core.clone()
                } else {
                    Arc::new(Mutex::new(Fib::with_config(FibConfig::for_vrf(table, 64))))
                },
                by_ifindex: [(2u32, port)].into_iter().collect(),
                leaked: HashMap::new(),
            })
            .collect();
        for f in &feeds[1..] {
            f.fib
                .lock()
                .unwrap()
                .set_core(core.clone(), feeds[0].by_ifindex.clone());
        }
        let ev = |bytes: Vec<Vec<u8>>| {
            let mut us = Vec::new();
            for b in bytes {
                us.extend(decode(&b).unwrap());
            }
            FpmEvent::Updates(us)
        };
        // (port, gateway, pushed stack) of a VRF's route to `addr`.
        let vpn_of = |k: usize, addr: &str| {
            let r = feeds[k].fib.lock().unwrap().lookup(addr.parse().unwrap())?;
            let t = r.target?;
            let stack = if t & VIA_DEFAULT_BIT != 0 {
                let n = core
                    .lock()
                    .unwrap()
                    .lfib()
                    .nhlfe(t & !VIA_DEFAULT_BIT & !NHLFE_BIT)?;
                n.primary.labels.as_slice().to_vec()
            } else {
                Vec::new()
            };
            Some((r.hops[0].port, r.hops[0].gateway?.to_string(), stack))
        };
        let live = || {
            let s = core.lock().unwrap().mpls_summary();
            (s.nhlfes, s.quarantined_nhlfes)
        };
        let core_hops = || core.lock().unwrap().summary().next_hops;
        let hops0 = core_hops();
        let connect = || {
            dispatch(
                &feeds,
                &FpmEvent::Connected {
                    peer: "127.0.0.1:1".parse().unwrap(),
                },
            )
        };
        connect();
        dispatch(
            &feeds,
            &ev(vec![
                // VRF A's own CE route (oif 2 in its namespace: port 1).
                frr_route(RTM_NEWROUTE, "192.0.2.0/24", 1001, "10.1.0.2", 2),
                // The same remote prefix in both VRFs, each with its VPN label.
                vpn_route([198, 51, 100, 0], 24, 1001, [10, 0, 12, 2], 2, &[16, 80]),
                vpn_route([198, 51, 100, 0], 24, 1002, [10, 0, 12, 2], 2, &[16, 81]),
                // A directly connected remote PE: the VPN label only.
                vpn_route([203, 0, 113, 0], 24, 1002, [10, 0, 12, 2], 2, &[82]),
                // Through an interface that is no port of the core's.
                vpn_route([192, 0, 2, 128], 25, 1002, [10, 0, 13, 2], 9, &[83]),
            ]),
        );
        let via = |stack: &[u32]| Some((0u16, "10.0.12.2".to_string(), stack.to_vec()));
        assert_eq!(vpn_of(1, "198.51.100.1"), via(&[16, 80]));
        assert_eq!(vpn_of(2, "198.51.100.1"), via(&[16, 81]));
        assert_eq!(vpn_of(2, "203.0.113.1"), via(&[82]));
        assert_eq!(vpn_of(1, "192.0.2.1"), Some((1, "10.1.0.2".into(), vec![])));
        // Not mis-sent: unresolvable, counted, not in the LPM.
        let vrf_b = feeds[2]
            .fib
            .lock()
            .unwrap()
            .route(&"192.0.2.128/25".parse().unwrap());
        assert!(vrf_b[0].unresolvable && !vrf_b[0].installed);
        assert_eq!(
            feeds[2]
                .fib
                .lock()
                .unwrap()
                .lookup("192.0.2.129".parse().unwrap()),
            None
        );
        // Nothing of it in the default VRF's own FIB; one shared uplink hop.
        assert_eq!(
            core.lock().unwrap().lookup("198.51.100.1".parse().unwrap()),
            None
        );
        assert_eq!(core_hops(), hops0 + 1);
        assert_eq!(live(), (3, 0));
        // `show ip route vrf` / `show mpls forwarding` see the core's stack.
        let ftn = feeds[1].fib.lock().unwrap().mpls_summary().ftn;
        assert_eq!(ftn.len(), 1);
        assert_eq!(ftn[0].hops[0].out_labels, [16, 80]);

        // A new VPN label (FRR 8: delete and add in one frame) replaces
        // the NHLFE; the old one waits in quarantine.
        let del = frr_route(RTM_DELROUTE, "198.51.100.0/24", 1001, "10.0.12.2", 2);
        dispatch(
            &feeds,
            &ev(vec![
                del,
                vpn_route([198, 51, 100, 0], 24, 1001, [10, 0, 12, 2], 2, &[16, 90]),
            ]),
        );
        assert_eq!(vpn_of(1, "198.51.100.1"), via(&[16, 90]));
        assert_eq!(vpn_of(2, "198.51.100.1"), via(&[16, 81]));
        assert_eq!(live(), (3, 1));
        // Withdrawal: gone from VRF A only.
        dispatch(
            &feeds,
            &ev(vec![frr_route(
                RTM_DELROUTE,
                "198.51.100.0/24",
                1001,
                "10.0.12.2",
                2,
            )]),
        );
        assert_eq!(vpn_of(1, "198.51.100.1"), None);
        assert_eq!(vpn_of(2, "198.51.100.1"), via(&[16, 81]));
        assert_eq!(live(), (2, 2));
        core.lock().unwrap().maintain(&|| true);
        assert_eq!(live(), (2, 0));
        // A reconnect whose replay lacks VRF B's VPN routes sweeps them and
        // gives everything back to the core.
        connect();
        dispatch(
            &feeds,
            &ev(vec![frr_route(
                RTM_NEWROUTE,
                "192.0.2.0/24",
                1001,
                "10.1.0.2",
                2,
            )]),
        );
        dispatch(&feeds, &FpmEvent::Settled);
        assert_eq!(vpn_of(2, "198.51.100.1"), None);
        assert_eq!(vpn_of(2, "203.0.113.1"), None);
        core.lock().unwrap().maintain(&|| true);
        assert_eq!(live(), (0, 0));
        assert_eq!(core_hops(), hops0);
        assert_eq!(vpn_of(1, "192.0.2.1"), Some((1, "10.1.0.2".into(), vec![])));
    }

    #[test]
    fn link_local_is_modified_eui64() {
        let ll = link_local([0x02, 0x4c, 0x12, 0x34, 0x00, 0x01]);
        assert_eq!(ll.to_string(), "fe80::4c:12ff:fe34:1");
    }

    #[test]
    fn pair_gateways_take_the_system_mac() {
        let cfg = config::parse(
            "vlans:
  - {id: 10, router: {addresses: [10.0.10.1/24]}}
  - {id: 20, router: {addresses: [10.0.20.1/24]}}
  - {id: 30, router: {addresses: [10.0.30.1/24], router-mac: 02:00:00:00:00:33}}
  - {id: 40, router: {addresses: [10.0.40.1/24, 2001:db8:40::1/64]}}
ports:
  - {name: pl, mode: trunk}
  - {name: ka, mode: routed, addresses: [192.0.2.1/30]}
vrfs:
  - {name: red, interfaces: [vlan40]}
virtual-switch:
  domain-id: 7
  system-mac: 02:00:00:00:07:00
  peer-link: [pl]
  keepalive: {source: 192.0.2.1, peer: 192.0.2.2}
  gateways: [10, 30, 40]
",
            "t.yaml",
        )
        .unwrap();
        let ifs = cfg.l3_interfaces();
        let get = |n: &str| ifs.iter().find(|i| i.name == n).unwrap();
        assert!(pair_gateway(&cfg, get("vlan10")));
        assert_eq!(router_mac(&cfg, get("vlan10")), [2, 0, 0, 0, 7, 0]);
        // Not a gateway: its own MAC.
        assert!(!pair_gateway(&cfg, get("vlan20")));
        assert_ne!(router_mac(&cfg, get("vlan20")), [2, 0, 0, 0, 7, 0]);
        // A configured router MAC wins.
        assert_eq!(router_mac(&cfg, get("vlan30")), [2, 0, 0, 0, 0, 0x33]);
        assert!(!pair_gateway(&cfg, get("ka")));
        // A VRF's SVI serves as gateway too, with the system MAC.
        assert_eq!(get("vlan40").vrf, 1);
        assert!(pair_gateway(&cfg, get("vlan40")));
        assert_eq!(router_mac(&cfg, get("vlan40")), [2, 0, 0, 0, 7, 0]);
    }

    /// A VRF deleted at run time leaves the FPM feed: zebra's late routes
    /// for its table reach the default FIB, which counts them and installs
    /// nothing (no panic, nothing in another VRF).
    #[test]
    fn late_routes_of_a_deleted_vrf_are_counted_not_installed() {
        use crate::frr::netlink::{decode, RTM_NEWROUTE};
        use crate::frr::FpmEvent;
        let mut feeds: Vec<VrfFeed> = [(254u32, 0u16), (1001, 1), (1002, 2)]
            .into_iter()
            .map(|(table, port)| VrfFeed {
                table,
                fib: Arc::new(Mutex::new(match table {
                    254 => Fib::new(),
                    t => Fib::with_config(FibConfig::for_vrf(t, 64)),
                })),
                by_ifindex: [(3u32, port)].into_iter().collect(),
                leaked: HashMap::new(),
            })
            .collect();
        set_leak_maps(&mut feeds);
        let gone = feeds.remove(2);
        set_leak_maps(&mut feeds);
        let mut us = Vec::new();
        for t in [1002u32, 1001] {
            us.extend(decode(&frr_route(RTM_NEWROUTE, "192.0.2.0/24", t, "10.1.0.2", 3)).unwrap());
        }
        dispatch(&feeds, &FpmEvent::Updates(us));
        let lookup = |f: &Arc<Mutex<Fib>>| f.lock().unwrap().lookup("192.0.2.1".parse().unwrap());
        assert_eq!(feeds[0].fib.lock().unwrap().counters().other_table, 1);
        assert!(lookup(&feeds[0].fib).is_none());
        assert!(lookup(&gone.fib).is_none());
        assert_eq!(lookup(&feeds[1].fib).map(|r| r.hops[0].port), Some(1));
    }

    #[test]
    fn tap_names_fit_ifnamsiz() {
        assert_eq!(tap_name("vlan4094", 300), "ly-vlan4094");
        assert_eq!(tap_name("sw1", 0), "ly-sw1");
        assert_eq!(tap_name("averyverylongname", 7), "ly7");
        assert!(tap_name("123456789012", 3).len() <= 15);
    }

    #[test]
    fn router_macs_are_unicast_local_and_distinct() {
        let cfg = Config {
            ports: (0..3)
                .map(|i| config::PortConfig::new(format!("p{i}")))
                .collect(),
            ..Config::default()
        };
        let ifs: Vec<L3Interface> = (0..2)
            .map(|k| L3Interface {
                name: format!("p{k}"),
                port: k,
                vlan: None,
                subinterface: None,
                addresses: &[],
                urpf: UrpfMode::Off,
                router_mac: None,
                mtu: 1500,
                vrf: 0,
                vrrp: &[],
            })
            .collect();
        let a = router_mac(&cfg, &ifs[0]);
        let b = router_mac(&cfg, &ifs[1]);
        assert_ne!(a, b);
        assert_eq!(a[0] & 3, 2, "locally administered unicast");
    }
}
