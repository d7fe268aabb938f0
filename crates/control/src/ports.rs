//! Port supervision: attach interfaces by name, follow them as they go
//! down, come up, disappear and come back, without restarting the switch.
//!
//! The supervisor asks the kernel about each port (rtnetlink, in the
//! switch's own network namespace) whenever rtnetlink reports a link
//! event, whenever a worker raises a link alarm for it (a transmit the
//! driver refused: `datapath::link_alarm`), every 10 ms for members of
//! backup pairs and port channels, and every 100 ms in any case. Link up
//! means carrier (`IFF_LOWER_UP`), not `IFF_RUNNING`: see `io::link` and
//! docs/ha.md for why. A new interface (or a new ifindex behind the same
//! name) gets fresh sockets, one per worker; a vanished one is detached;
//! link changes update the snapshot's flood sets and flush the port's
//! learned addresses, as a hardware switch does on link down.

use config::Config;
use config::{AfPacketRing, PortBackend};
use datapath::{Mailbox, PortCommand, Shared};
use io::af_packet::AfPacketDualPort;
use io::{link, AfPacketOptions, AfPacketPort, AfXdpOptions, AfXdpPort, Port};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every port's carrier is looked at this often (an ethtool probe; a full
/// look at the ports whose answer changed). Without link events or the
/// probe, every port is queried this often instead.
const POLL_ALL: Duration = Duration::from_millis(100);
/// With link events and the carrier probe, every port is still queried in
/// full this often, in case an event was missed.
const POLL_FULL: Duration = Duration::from_secs(1);
/// Members of backup pairs and port channels are looked at this often:
/// carrier loss raises no event of its own (only the link watch's, up to a
/// second later), and these are the ports whose loss must be acted on at
/// once even when nothing is sent on them (the peer may already send on
/// the other member).
const POLL_HA: Duration = Duration::from_millis(10);
/// A port that keeps refusing transmits (a congested peer, not a lost
/// carrier) is looked at no more often than this.
const ALARM_HOLDOFF: Duration = Duration::from_millis(1);

/// What `show interfaces` reports for a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PortState {
    /// Attached and operationally up.
    Up,
    /// Attached, but the link is down.
    Down,
    /// No such interface right now.
    Missing,
}

#[derive(Clone, Debug)]
pub struct PortStatus {
    pub name: String,
    pub state: PortState,
    pub ifindex: u32,
    pub mtu: u32,
    /// Why the last attach failed, if it did.
    pub error: Option<String>,
    /// Times the interface was (re)attached.
    pub attaches: u64,
    /// Backend of the receiving socket: `af-xdp` or `af-packet` (empty
    /// until attached).
    pub backend: &'static str,
    /// How it runs: `native/copy`, `generic/zero-copy`, … for AF_XDP
    /// (`native/copy 4 queues`: a socket on each of 4 receive queues),
    /// `tpacket-v2+v3` (two rings) or `tpacket-v3` for AF_PACKET.
    pub backend_mode: String,
    /// Frames the receiving socket's receive and transmit rings hold
    /// (`switch.rx-ring`/`tx-ring`, or sized by the port count).
    pub rings: (u32, u32),
    /// What the kernel refused when busy polling was set up (AF_XDP
    /// `busy-poll` ports; empty: nothing).
    pub busy_poll_refused: Vec<String>,
}

pub struct Supervisor {
    shared: Arc<Shared>,
    mailboxes: Vec<Arc<Mailbox>>,
    status: Arc<Mutex<Vec<PortStatus>>>,
    names: Vec<String>,
    mtus: Vec<u32>,
    routed: Vec<bool>,
    backends: Vec<PortBackend>,
    /// Per port: AF_XDP busy polling (`af-xdp-busy-poll`), `None` if off.
    busy_poll: Vec<Option<io::af_xdp::BusyPoll>>,
    /// Receive rings of AF_PACKET ports (`switch.af-packet-ring`).
    af_packet_ring: AfPacketRing,
    /// What the kernel refused of the last attach's busy polling (for
    /// its `PortStatus`).
    last_busy_refused: Vec<String>,
    /// `switch.af-xdp-shared-umem`: the AF_XDP ports of a worker share
    /// one UMEM, made at the first one's attach (`pools[worker]`).
    shared_umem: bool,
    pools: Vec<Option<Arc<io::af_xdp::SharedUmem>>>,
    /// Configured ring sizes in frames (`switch.rx-ring`, `tx-ring`; the
    /// `switch` section changes only with a restart).
    ring_frames: (Option<u32>, Option<u32>),
    attached: Vec<Option<u32>>,
    /// Told when a port goes up or down (the router mirrors it on the
    /// port's TAP, so routing protocols see the link state at once).
    on_link: Option<LinkHook>,
    /// Link state → snapshot (backup pairs, channels, flood sets).
    ha: Arc<protocols::ha::Ha>,
    /// New port lists from `config apply` (ports added or removed at the
    /// end; the others keep their ids).
    changes: Option<std::sync::mpsc::Receiver<Config>>,
    /// Sockets a predecessor image handed over (restart in place):
    /// (worker, port name, rx) → state for `AfPacketPort::adopt`.
    handover: Vec<((usize, String, bool), String)>,
    /// Attach commands waiting for the end of the poll.
    pending: Vec<(usize, PortCommand)>,
    /// Transmit-only sockets opened ahead of a poll's attaches
    /// ([`Supervisor::preopen_tx`]): (worker, port name) → socket.
    preopened: Vec<((usize, String), AfPacketPort)>,
    /// Per port: the state last written to the log (None: not yet), and
    /// when the port was last attached (see [`LINK_SETTLE`]).
    announced: Vec<Option<PortState>>,
    attached_at: Vec<Option<std::time::Instant>>,
    /// Members of backup pairs and port channels, and ports protected by
    /// fast reroute (see [`POLL_HA`]).
    ha_ports: Vec<usize>,
    /// Per port: its fast-reroute protection id (`mpls.fast-reroute`).
    protection: Vec<Option<u32>>,
    /// Per attached port: admin up with carrier, as the last full query
    /// said (what the carrier probe compares against).
    link_seen: Vec<Option<bool>>,
}

/// Per port: the LFIB protection id of its fast-reroute entry (the
/// entry's position in `mpls.fast-reroute`).
fn protection_ids(cfg: &Config) -> Vec<Option<u32>> {
    let mut v = vec![None; cfg.ports.len()];
    for (k, f) in cfg.mpls.fast_reroute.iter().enumerate() {
        if let Some(i) = cfg.port_index(&f.protect) {
            v[i] = Some(k as u32);
        }
    }
    v
}

/// Per port: its AF_XDP busy-poll settings, `None` where it is off.
fn busy_poll_settings(cfg: &Config) -> Vec<Option<io::af_xdp::BusyPoll>> {
    let s = &cfg.switch;
    (0..cfg.ports.len())
        .map(|i| {
            (cfg.busy_poll_of(i) == config::BusyPollMode::On).then_some(io::af_xdp::BusyPoll {
                budget: s.af_xdp_busy_poll_budget.min(u16::MAX as u32) as u16,
                usecs: s.af_xdp_busy_poll_us,
                napi_timeout_us: s.af_xdp_napi_timeout_us,
            })
        })
        .collect()
}

/// A port just attached (and set up by us) takes a moment to report its
/// link — a veth's carrier, a NIC's autonegotiation. Its state is not
/// logged as `down` during this time, so a start reads `up` and not a
/// flap (`down` then `up`); the data path sees the real state throughout.
const LINK_SETTLE: Duration = Duration::from_secs(3);

/// A port's AF_PACKET socket: receiving (`rx`) or transmit only.
fn af_packet_options(rx: bool, rings: &RingSizes) -> AfPacketOptions {
    AfPacketOptions {
        rx,
        // The block (TPACKET_V3) ring: with `af-packet-ring: dual` (the
        // default) it sits behind a per-frame V2 ring and takes only what
        // that cannot hold (io::af_packet::dual). Alone, V3 beats V2
        // (docs/io.md, "V2 or V3"): V2 costs 20-25 % of 64-byte throughput
        // in per-frame wake-ups, and a V2 ring holds frames, not bytes:
        // even with 32,768 slots (48 MiB) per port the 1M-address
        // acceptance test lost 2-6 % to rx-ring-full at 100,000 frames/s,
        // where this V3 ring (16 MiB) loses nothing.
        rx_ring: io::af_packet::RxRing::V3,
        // Small blocks, many of them: a block is handed over when full or
        // after 1 ms, so at low rates each millisecond costs a block; 1,024
        // blocks ride out a worker stalled for a second, and 16 KiB keeps
        // per-block latency low under load.
        rx_block_size: 16 * 1024,
        rx_blocks: rings.rx_blocks,
        tx_ring_frames: rings.tx_frames,
        ..AfPacketOptions::default()
    }
}

/// Members of backup pairs and port channels, and ports protected by
/// fast reroute: polled every [`POLL_HA`].
fn ha_ports(cfg: &Config) -> Vec<usize> {
    cfg.ports
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            cfg.channel_of(*i).is_some()
                || cfg.mpls.fast_reroute.iter().any(|f| f.protect == p.name)
                || cfg
                    .backup_pairs
                    .iter()
                    .any(|b| b.primary == p.name || b.backup == p.name)
        })
        .map(|(i, _)| i)
        .collect()
}

/// Ports that get full-size receive and transmit rings. A switch with
/// more shrinks every port's rings so the total stays near what this many
/// full ports take (each port keeps [`RingSizes::FLOOR`]): 410 ports at
/// full size would pin ~15 GiB of ring memory (docs/scale.md).
pub const FULL_RING_PORTS: usize = 16;

/// Ring sizes of one port in a switch of `ports` ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSizes {
    /// AF_XDP receive chunks (2 KiB each, a power of two).
    pub xdp_rx_frames: u32,
    /// AF_XDP transmit slots (10 KiB each, a power of two).
    pub xdp_tx_slots: u32,
    /// AF_PACKET V3 receive blocks (16 KiB each).
    pub rx_blocks: usize,
    /// AF_PACKET V2 receive slots of a dual port (one MTU each).
    pub fast_frames: usize,
    /// AF_PACKET transmit ring slots (16 KiB each).
    pub tx_frames: usize,
}

impl RingSizes {
    /// Full size (up to [`FULL_RING_PORTS`] ports).
    pub const FULL: RingSizes = RingSizes {
        xdp_rx_frames: 16384,
        xdp_tx_slots: 512,
        rx_blocks: 1024,
        fast_frames: io::af_packet::FAST_RING_FRAMES,
        tx_frames: 512,
    };
    /// The least a port gets: ~1 MiB receive and ~1 MiB transmit ring
    /// (about 5 ms at 100,000 frames/s of 64 bytes into one port).
    pub const FLOOR: RingSizes = RingSizes {
        xdp_rx_frames: 512,
        xdp_tx_slots: 64,
        rx_blocks: 64,
        fast_frames: 512,
        tx_frames: 64,
    };

    pub fn for_ports(ports: usize) -> RingSizes {
        let (f, m) = (Self::FULL, Self::FLOOR);
        let k = ports.max(1).div_ceil(FULL_RING_PORTS);
        // AF_XDP rings are powers of two: the largest one ≤ full / k.
        let pow2 = |full: u32, min: u32| {
            let x = (full / k as u32).max(1);
            (1u32 << (31 - x.leading_zeros())).max(min)
        };
        let lin = |full: usize, min: usize| (full / k).max(min);
        RingSizes {
            xdp_rx_frames: pow2(f.xdp_rx_frames, m.xdp_rx_frames),
            xdp_tx_slots: pow2(f.xdp_tx_slots, m.xdp_tx_slots),
            rx_blocks: lin(f.rx_blocks, m.rx_blocks),
            fast_frames: lin(f.fast_frames, m.fast_frames),
            tx_frames: lin(f.tx_frames, m.tx_frames),
        }
    }

    /// These sizes with the configured ones (`switch.rx-ring` /
    /// `tx-ring`, in frames) in place of the port-count defaults.
    pub fn with_config(self, rx: Option<u32>, tx: Option<u32>) -> RingSizes {
        // AF_XDP rings are powers of two: the largest one <= n.
        let pow2 = |n: u32| 1u32 << (31 - n.max(1).leading_zeros());
        let mut r = self;
        if let Some(n) = rx {
            r.xdp_rx_frames = pow2(n);
            r.fast_frames = n as usize;
            // A 16 KiB block holds at least 7 full-size frames and about
            // a hundred small ones: n / 8 blocks hold n frames of any size.
            r.rx_blocks = (n as usize).div_ceil(8).max(8);
        }
        if let Some(n) = tx {
            r.xdp_tx_slots = pow2(n);
            r.tx_frames = n as usize;
        }
        r
    }
}

/// Called with (port id, up) on every change of a port's state.
pub type LinkHook = Box<dyn Fn(u16, bool) + Send>;

impl Supervisor {
    /// Ring sizes of every port: by the port count, or as configured.
    fn ring_sizes(&self) -> RingSizes {
        RingSizes::for_ports(self.names.len()).with_config(self.ring_frames.0, self.ring_frames.1)
    }

    pub fn new(
        cfg: &Config,
        shared: Arc<Shared>,
        mailboxes: Vec<Arc<Mailbox>>,
        ha: Arc<protocols::ha::Ha>,
    ) -> Supervisor {
        let workers = mailboxes.len();
        let status = cfg
            .ports
            .iter()
            .map(|p| PortStatus {
                name: p.name.clone(),
                state: PortState::Missing,
                ifindex: 0,
                mtu: 0,
                error: None,
                attaches: 0,
                backend: "",
                backend_mode: String::new(),
                rings: (0, 0),
                busy_poll_refused: Vec::new(),
            })
            .collect();
        Supervisor {
            shared,
            mailboxes,
            status: Arc::new(Mutex::new(status)),
            names: cfg.ports.iter().map(|p| p.name.clone()).collect(),
            mtus: cfg.ports.iter().map(|p| p.effective_mtu()).collect(),
            routed: cfg
                .ports
                .iter()
                .map(|p| p.mode == config::PortMode::Routed)
                .collect(),
            backends: (0..cfg.ports.len()).map(|i| cfg.backend_of(i)).collect(),
            busy_poll: busy_poll_settings(cfg),
            af_packet_ring: cfg.switch.af_packet_ring,
            last_busy_refused: Vec::new(),
            shared_umem: !cfg.switch.af_xdp_shared_umem.is_off(),
            pools: vec![None; workers],
            ring_frames: (cfg.switch.rx_ring, cfg.switch.tx_ring),
            attached: vec![None; cfg.ports.len()],
            on_link: None,
            ha,
            changes: None,
            handover: Vec::new(),
            pending: Vec::new(),
            preopened: Vec::new(),
            announced: vec![None; cfg.ports.len()],
            attached_at: vec![None; cfg.ports.len()],
            ha_ports: ha_ports(cfg),
            protection: protection_ids(cfg),
            link_seen: vec![None; cfg.ports.len()],
        }
    }

    /// Sockets from a predecessor (see `daemon::restart`), used by the
    /// first attach of each port; the rest are closed after it.
    pub fn set_handover(&mut self, spec: &str) {
        for e in spec.split(';').filter(|e| !e.is_empty()) {
            let mut it = e.splitn(4, ':');
            let (Some(w), Some(name), Some(rx), Some(state)) =
                (it.next(), it.next(), it.next(), it.next())
            else {
                continue;
            };
            if let Ok(w) = w.parse::<usize>() {
                self.handover
                    .push(((w, name.to_string(), rx == "1"), state.to_string()));
            }
        }
    }

    /// Close handed-over sockets nobody adopted (a port removed, a
    /// different worker count).
    pub fn close_unadopted(&mut self) {
        for (_, state) in self.handover.drain(..) {
            close_state(&state);
        }
    }

    /// Take port lists from `rx` (see [`Supervisor::set_ports`]).
    pub fn set_config_channel(&mut self, rx: std::sync::mpsc::Receiver<Config>) {
        self.changes = Some(rx);
    }

    /// Adopt a new port list: ports past its end are detached, new ones
    /// attach on the next poll.
    pub fn set_ports(&mut self, cfg: &Config) {
        let n = cfg.ports.len();
        for id in n..self.names.len() {
            if self.attached[id].is_some() {
                self.detach(id);
            }
            if self.status.lock().unwrap_or_else(|e| e.into_inner())[id].state == PortState::Up {
                self.set_up_flag(id as u16, false);
            }
            tracing::info!("port {}: removed", self.names[id]);
        }
        // A port whose backend changed is opened anew on the next poll.
        for id in 0..n.min(self.names.len()) {
            let b = cfg.backend_of(id);
            if self.backends.get(id).is_some_and(|&old| old != b) && self.attached[id].is_some() {
                tracing::info!(
                    "port {}: backend now {}: re-attaching",
                    self.names[id],
                    b.as_str()
                );
                self.detach(id);
            }
        }
        self.backends = (0..n).map(|i| cfg.backend_of(i)).collect();
        // Busy polling is set up when the socket opens.
        let busy = busy_poll_settings(cfg);
        for (id, b) in busy.iter().enumerate().take(self.names.len()) {
            if self.busy_poll.get(id).is_some_and(|old| old != b) && self.attached[id].is_some() {
                tracing::info!(
                    "port {}: af-xdp-busy-poll changed: re-attaching",
                    self.names[id]
                );
                self.detach(id);
            }
        }
        self.busy_poll = busy;
        if cfg.switch.af_packet_ring != self.af_packet_ring {
            self.af_packet_ring = cfg.switch.af_packet_ring;
            let st = self
                .status
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            for (id, p) in st.iter().enumerate().take(n) {
                if p.backend == "af-packet" && self.attached[id].is_some() {
                    tracing::info!(
                        "port {}: af-packet-ring now {}: re-attaching",
                        p.name,
                        self.af_packet_ring.as_str()
                    );
                    self.detach(id);
                }
            }
        }
        self.names = cfg.ports.iter().map(|p| p.name.clone()).collect();
        self.mtus = cfg.ports.iter().map(|p| p.effective_mtu()).collect();
        self.routed = cfg
            .ports
            .iter()
            .map(|p| p.mode == config::PortMode::Routed)
            .collect();
        self.attached.resize(n, None);
        self.announced.resize(n, None);
        self.attached_at.resize(n, None);
        self.link_seen.resize(n, None);
        self.ha_ports = ha_ports(cfg);
        self.protection = protection_ids(cfg);
        // Ports attached from now on (a pool made before stays theirs).
        self.shared_umem = !cfg.switch.af_xdp_shared_umem.is_off();
        let mut st = self.status.lock().unwrap_or_else(|e| e.into_inner());
        st.truncate(n);
        for p in cfg.ports.iter().skip(st.len()) {
            st.push(PortStatus {
                name: p.name.clone(),
                state: PortState::Missing,
                ifindex: 0,
                mtu: 0,
                error: None,
                attaches: 0,
                backend: "",
                backend_mode: String::new(),
                rings: (0, 0),
                busy_poll_refused: Vec::new(),
            });
        }
    }

    /// Call `hook` on every port state change (see [`LinkHook`]).
    pub fn set_link_hook(&mut self, hook: LinkHook) {
        self.on_link = Some(hook);
    }

    pub fn status(&self) -> Arc<Mutex<Vec<PortStatus>>> {
        self.status.clone()
    }

    /// Which worker receives on port `id`.
    fn owner(&self, id: usize) -> usize {
        id % self.mailboxes.len()
    }

    /// Marks port `id`'s fast-reroute protection id down (bypass) or up
    /// (primary) in the LFIB: one store, however many LSPs and
    /// pseudowires leave through the port.
    fn protect(&self, id: usize, up: bool) {
        let Some(Some(pid)) = self.protection.get(id) else {
            return;
        };
        if let Some(plane) = self.shared.mpls.load().as_ref() {
            if plane.lfib.protection_down(*pid) == up {
                let _ = plane.lfib.set_protection(*pid, !up);
                tracing::info!(
                    "port {}: fast reroute {}",
                    self.names[id],
                    if up {
                        "back to the primary"
                    } else {
                        "to the backup"
                    }
                );
            }
        }
    }

    fn set_up_flag(&self, id: u16, up: bool) {
        // One snapshot; a plain port's addresses are flushed on link down,
        // a pair's or channel's are redirected (crate::ha).
        self.ha.set_link(id, up);
        if !up {
            // Frames stranded in its transmit ring: a channel's surviving
            // member sends them (a backup pair's failover hook did the
            // same); whatever is left is dropped, never sent stale.
            let to = self.ha.channel_takeover(id);
            for m in &self.mailboxes {
                if let Some(to) = to {
                    m.send(PortCommand::MoveTx { from: id, to });
                }
                m.send(PortCommand::DiscardTx { id });
            }
        }
    }

    /// The receiving socket of port `id` on AF_XDP, if its backend asks for
    /// it and it attaches. `Err` only when the backend is `af-xdp` (no
    /// fallback); with `auto`, a failure is logged and `Ok(None)` says
    /// "use AF_PACKET".
    fn open_xdp(&mut self, id: usize) -> Result<Option<AfXdpPort>, String> {
        let name = &self.names[id].clone();
        let backend = self.backends.get(id).copied().unwrap_or_default();
        if backend == PortBackend::AfPacket {
            return Ok(None);
        }
        // A TUN/TAP interface stays on AF_PACKET under `auto`: its generic
        // XDP buys nothing over a packet socket.
        if backend == PortBackend::Auto
            && std::path::Path::new(&format!("/sys/class/net/{name}/tun_flags")).exists()
        {
            return Ok(None);
        }
        // A predecessor's socket (restart in place): its program stayed
        // attached and its receive ring kept what arrived meanwhile.
        let key = (self.owner(id), name.clone(), true);
        if let Some(i) = self
            .handover
            .iter()
            .position(|(k, st)| *k == key && st.starts_with(io::af_xdp::HANDOVER_TAG))
        {
            let st = self.handover.swap_remove(i).1;
            match AfXdpPort::adopt(name, &st) {
                Ok(p) => return Ok(Some(p)),
                Err(e) => tracing::warn!(
                    "port {name}: handed-over AF_XDP socket refused ({e}): opening anew"
                ),
            }
        }
        let r = self.ring_sizes();
        let opts = AfXdpOptions {
            rx_frames: r.xdp_rx_frames,
            tx_slots: r.xdp_tx_slots,
            busy_poll: self.busy_poll.get(id).copied().flatten(),
            shared_umem: self.pool(self.owner(id)),
            ..AfXdpOptions::default()
        };
        match AfXdpPort::open(name, &opts) {
            Ok(p) => {
                if let Err(why) = p.shared_umem_status() {
                    tracing::info!("port {name}: not on the worker's shared UMEM: {why}");
                }
                Ok(Some(p))
            }
            Err(e) if backend == PortBackend::AfXdp => Err(format!("AF_XDP: {e}")),
            Err(e) => {
                tracing::warn!("port {name}: AF_XDP did not attach ({e}): using AF_PACKET");
                Ok(None)
            }
        }
    }

    /// Worker `w`'s shared UMEM (`switch.af-xdp-shared-umem: on`), made
    /// at its first AF_XDP port: a region for each port the worker may
    /// receive on over AF_XDP, and one spare for a re-attach.
    fn pool(&mut self, w: usize) -> Option<Arc<io::af_xdp::SharedUmem>> {
        if !self.shared_umem {
            return None;
        }
        if let Some(p) = self.pools.get(w)?.as_ref() {
            return Some(p.clone());
        }
        let ports = (0..self.names.len())
            .filter(|&id| self.owner(id) == w)
            .filter(|&id| {
                self.backends.get(id).copied().unwrap_or_default() != PortBackend::AfPacket
            })
            .count() as u32;
        let regions = (ports + 1).min(io::af_xdp::shared::MAX_REGIONS);
        let r = self.ring_sizes();
        // A port's receive chunks are a power of two (as `AfXdpPort::open`
        // rounds them for one queue).
        let rx = 1u32 << (31 - r.xdp_rx_frames.max(64).leading_zeros());
        match io::af_xdp::SharedUmem::new(regions, rx, r.xdp_tx_slots) {
            Ok(p) => {
                tracing::info!(
                    "worker {w}: shared UMEM of {} MiB for {regions} AF_XDP ports",
                    p.len() >> 20
                );
                let p = Arc::new(p);
                self.pools[w] = Some(p.clone());
                Some(p)
            }
            Err(e) => {
                tracing::warn!("worker {w}: no shared UMEM ({e}): each port has its own");
                self.shared_umem = false;
                None
            }
        }
    }

    /// Open port `id`'s sockets and queue them for the workers; returns
    /// the receiving socket's backend and mode.
    fn attach(
        &mut self,
        id: usize,
        ifindex: u32,
    ) -> Result<(&'static str, String, (u32, u32)), String> {
        let name = &self.names[id].clone();
        let info = link::query(name).ok_or("interface vanished")?;
        if info.mtu != self.mtus[id] {
            link::set_mtu(name, self.mtus[id]).map_err(|e| format!("set mtu: {e}"))?;
        }
        // A switch port carries no addresses of its own: keep the kernel's
        // IPv6 autoconfiguration from sending on it, its ARP from answering
        // for the addresses of Lanyard's TAPs (arp_ignore 8: never reply),
        // and its IPv4 from forwarding what arrives here (Lanyard does).
        let _ = link::disable_ipv6(name);
        let _ = routing::sysctl::set_if(name, "ipv4", "arp_ignore", "8");
        let _ = routing::sysctl::set_if(name, "ipv4", "forwarding", "0");
        if !info.admin_up {
            link::set_up(name).map_err(|e| format!("set up: {e}"))?;
        }
        // The receiving worker's socket: AF_XDP where it attaches. The
        // other workers only transmit, on AF_PACKET sockets (a queue takes
        // one XSK socket, and sharing it would take a lock).
        let mut xdp = self.open_xdp(id)?;
        let xdp_rings = xdp.as_ref().map(AfXdpPort::rings);
        let (backend, mode) = match &xdp {
            Some(p) => {
                let m = p.mode();
                // A socket per receive queue: say how many.
                let mut base = match p.queues() {
                    1 => m.to_string(),
                    q => format!("{m} {q} queues"),
                };
                if p.shared_umem_status() == Ok(true) {
                    base.push_str(" shared-umem");
                }
                if m.xdp == io::af_xdp::prog::XdpMode::Generic {
                    tracing::info!(
                        "port {name}: AF_XDP in generic (skb) mode: the driver refused native XDP"
                    );
                }
                match p.busy_poll_refused() {
                    None => ("af-xdp", base),
                    Some(refused) => {
                        if !refused.is_empty() {
                            // Never fatal: the port forwards, and the
                            // kernel's NAPI poll does what it refused.
                            tracing::warn!(
                                "port {name}: busy polling not in effect: {}",
                                refused.join("; ")
                            );
                        }
                        self.last_busy_refused = refused.to_vec();
                        if p.queues() > 1 {
                            ("af-xdp", base) // refused outright
                        } else {
                            ("af-xdp", format!("{base} busy-poll"))
                        }
                    }
                }
            }
            None if self.af_packet_ring == AfPacketRing::Dual => {
                ("af-packet", "tpacket-v2+v3".to_string())
            }
            None => ("af-packet", "tpacket-v3".to_string()),
        };
        let rings = self.ring_sizes();
        let mut opened: Vec<(usize, Box<dyn Port>, bool)> =
            Vec::with_capacity(self.mailboxes.len());
        for w in 0..self.mailboxes.len() {
            let rx = w == self.owner(id);
            if rx {
                if let Some(p) = xdp.take() {
                    opened.push((w, Box::new(p), true));
                    continue;
                }
            }
            let opts = af_packet_options(rx, &rings);
            let dual = rx && self.af_packet_ring == AfPacketRing::Dual;
            let mtu = self.mtus[id];
            let key = (w, name.clone(), rx);
            let handed = self
                .handover
                .iter()
                .position(|(k, _)| *k == key)
                .map(|i| self.handover.swap_remove(i).1);
            let adopted: Option<Box<dyn Port>> = match handed {
                // A predecessor's rings of the configured kind (and, for a
                // dual port, V2 slots that hold this MTU) carry on.
                Some(st) if io::af_packet::is_dual_state(&st) == dual => {
                    let r: Result<Box<dyn Port>, _> = if dual {
                        AfPacketDualPort::adopt(name, &st)
                            .and_then(|p| {
                                if p.fits_mtu(mtu) {
                                    Ok(p)
                                } else {
                                    Err(io::PortError::Os {
                                        op: "adopt",
                                        err: std::io::Error::other(
                                            "its V2 slots are smaller than the MTU",
                                        ),
                                    })
                                }
                            })
                            .map(|p| Box::new(p) as Box<dyn Port>)
                    } else {
                        AfPacketPort::adopt(name, &st).map(|p| Box::new(p) as Box<dyn Port>)
                    };
                    match r {
                        Ok(p) => Some(p),
                        Err(e) => {
                            tracing::warn!(
                                "port {name}: handed-over socket refused ({e}): opening anew"
                            );
                            None
                        }
                    }
                }
                Some(st) => {
                    tracing::info!("port {name}: af-packet-ring changed: the handed-over socket is closed and the port opened anew");
                    close_state(&st);
                    None
                }
                None => None,
            };
            let port: Box<dyn Port> = match adopted {
                Some(p) => p,
                None if dual => Box::new(
                    AfPacketDualPort::open_sized(name, mtu, rings.fast_frames, &opts)
                        .map_err(|e| e.to_string())?,
                ),
                None => {
                    let ready = self
                        .preopened
                        .iter()
                        .position(|((pw, pn), _)| !rx && *pw == w && pn == name)
                        .map(|i| self.preopened.swap_remove(i).1);
                    match ready {
                        Some(p) => Box::new(p),
                        None => {
                            Box::new(AfPacketPort::open(name, &opts).map_err(|e| e.to_string())?)
                        }
                    }
                }
            };
            opened.push((w, port, rx));
        }
        // Handed to the workers at the end of the poll, once the port is
        // marked up: a handed-over ring may hold a backlog, and frames
        // forwarded before that would meet a port that is still down.
        for (w, port, rx) in opened {
            self.pending.push((
                w,
                PortCommand::Attach {
                    id: id as u16,
                    port,
                    rx,
                    routed: self.routed[id],
                },
            ));
        }
        self.attached[id] = Some(ifindex);
        let sizes = match (backend, self.af_packet_ring) {
            ("af-xdp", _) => xdp_rings.unwrap_or((rings.xdp_rx_frames, rings.xdp_tx_slots)),
            (_, AfPacketRing::Dual) => (rings.fast_frames as u32, rings.tx_frames as u32),
            // At least 8 full-size frames per 16 KiB block.
            _ => (rings.rx_blocks as u32 * 8, rings.tx_frames as u32),
        };
        Ok((backend, mode, sizes))
    }

    fn detach(&mut self, id: usize) {
        for m in &self.mailboxes {
            m.send(PortCommand::Detach { id: id as u16 });
        }
        self.attached[id] = None;
    }

    /// One pass over all ports; returns whether anything changed.
    pub fn poll(&mut self) -> bool {
        self.poll_ports(0..self.names.len())
    }

    /// The ports to query in full after a carrier probe: those whose
    /// answer differs from the last query's, those not attached (retried),
    /// and those whose driver does not answer the probe.
    fn carrier_changed(&self, probe: &link::CarrierProbe) -> Vec<usize> {
        (0..self.names.len())
            .filter(|&id| match self.link_seen[id] {
                Some(seen) => probe.link_up(&self.names[id]) != Some(seen),
                None => true,
            })
            .collect()
    }

    /// The ports that link events name: by name, or by the index of the
    /// interface they are attached to (a rename, a deletion).
    fn ports_named(&self, changes: &[link::LinkChange]) -> Vec<usize> {
        (0..self.names.len())
            .filter(|&id| {
                changes.iter().any(|c| {
                    c.name.as_deref() == Some(self.names[id].as_str())
                        || self.attached[id] == Some(c.ifindex)
                })
            })
            .collect()
    }

    /// Opens, together ([`io::in_parallel`]), the transmit-only sockets
    /// that the attaches of `ports` are about to open one by one (the ports
    /// not attached yet whose interface exists, on every worker but the
    /// receiving one): a 410-port switch spent 4.4 s of its start setting
    /// up their rings one after another.
    fn preopen_tx(&mut self, ports: &[(usize, Option<link::LinkInfo>)]) {
        const MIN_PORTS: usize = 8;
        let workers = self.mailboxes.len();
        if workers < 2 {
            return;
        }
        let mut want: Vec<(usize, String)> = Vec::new();
        for (id, info) in ports {
            let (id, name) = (*id, &self.names[*id]);
            if self.attached[id].is_some() || info.is_none() {
                continue;
            }
            for w in (0..workers).filter(|&w| w != self.owner(id)) {
                let handed = self
                    .handover
                    .iter()
                    .any(|((hw, hn, rx), _)| *hw == w && hn == name && !rx);
                if !handed {
                    want.push((w, name.clone()));
                }
            }
        }
        if want.len() < MIN_PORTS {
            return;
        }
        let opts = af_packet_options(false, &self.ring_sizes());
        // A failure is met again (and reported) in `attach`.
        self.preopened = io::in_parallel(want, |(w, name)| {
            AfPacketPort::open(&name, &opts)
                .ok()
                .map(|p| ((w, name), p))
        })
        .into_iter()
        .flatten()
        .collect();
    }

    /// One pass over the ports `ids`; returns whether anything changed.
    fn poll_ports(&mut self, ids: impl IntoIterator<Item = usize>) -> bool {
        // Each interface looked up once per poll, for both steps.
        let ports: Vec<(usize, Option<link::LinkInfo>)> = ids
            .into_iter()
            .filter(|&id| id < self.names.len())
            .map(|id| (id, link::query(&self.names[id])))
            .collect();
        self.preopen_tx(&ports);
        let changed = self.poll_each(ports);
        // Sockets an attach did not take (it failed first) are closed.
        io::close_all(
            self.preopened
                .drain(..)
                .map(|(_, p)| Box::new(p) as Box<dyn Port>)
                .collect(),
        );
        changed
    }

    fn poll_each(&mut self, ports: Vec<(usize, Option<link::LinkInfo>)>) -> bool {
        let mut changed = false;
        for (id, info) in ports {
            let prev = self.status.lock().unwrap_or_else(|e| e.into_inner())[id].clone();
            let mut next = prev.clone();
            match info {
                None => {
                    if self.attached[id].is_some() {
                        self.detach(id);
                    }
                    next.state = PortState::Missing;
                    next.ifindex = 0;
                    self.link_seen[id] = None;
                }
                Some(mut i) => {
                    if self.attached[id] != Some(i.ifindex) {
                        if self.attached[id].is_some() {
                            self.detach(id);
                        }
                        self.last_busy_refused.clear();
                        match self.attach(id, i.ifindex) {
                            Ok((backend, mode, rings)) => {
                                next.backend = backend;
                                next.backend_mode = mode;
                                next.busy_poll_refused =
                                    std::mem::take(&mut self.last_busy_refused);
                                next.rings = rings;
                                next.error = None;
                                next.attaches += 1;
                                self.attached_at[id] = Some(std::time::Instant::now());
                            }
                            Err(e) => {
                                if prev.error.as_deref() != Some(e.as_str()) {
                                    tracing::warn!("port {}: attach failed: {e}", self.names[id]);
                                }
                                next.error = Some(e);
                            }
                        }
                        // The attach may have set the MTU and brought
                        // the link up: look again (only then; at 410
                        // ports a second query per poll cost the
                        // supervisor half its time).
                        i = link::query(&self.names[id]).unwrap_or(i);
                    } else if i.mtu != prev.mtu {
                        // Sockets opened by the attach read the MTU
                        // themselves; a later change reaches them here.
                        for m in &self.mailboxes {
                            m.send(PortCommand::Mtu {
                                id: id as u16,
                                mtu: i.mtu,
                            });
                        }
                    }
                    next.ifindex = i.ifindex;
                    next.mtu = i.mtu;
                    self.link_seen[id] = self.attached[id].map(|_| i.admin_up && i.carrier);
                    next.state = if self.attached[id].is_none() {
                        PortState::Missing
                    } else if i.oper_up {
                        PortState::Up
                    } else {
                        PortState::Down
                    };
                }
            }
            self.announce(id, &next);
            if next.state != prev.state {
                changed = true;
                let was_up = prev.state == PortState::Up;
                let is_up = next.state == PortState::Up;
                // Fast reroute first: one store moves everything leaving
                // through the port to its precomputed bypass.
                self.protect(id, is_up);
                if was_up != is_up {
                    self.set_up_flag(id as u16, is_up);
                    if let Some(h) = &self.on_link {
                        h(id as u16, is_up);
                    }
                }
            }
            self.status.lock().unwrap_or_else(|e| e.into_inner())[id] = next;
        }
        for (w, cmd) in self.pending.drain(..) {
            self.mailboxes[w].send(cmd);
        }
        changed
    }

    /// Log port `id`'s state when it differs from what was logged last:
    /// every configured port gets a first line (`up`, `down`, or
    /// `missing`), a fresh attach's `down` waits [`LINK_SETTLE`].
    fn announce(&mut self, id: usize, st: &PortStatus) {
        if self.announced[id] == Some(st.state) {
            return;
        }
        let settling = self.attached_at[id].is_some_and(|t| t.elapsed() < LINK_SETTLE);
        let first = self.announced[id].is_none();
        let msg = match st.state {
            PortState::Down if settling => return,
            // The attach failure was logged as a warning, with its reason.
            PortState::Missing if st.error.is_some() => {
                self.announced[id] = Some(st.state);
                return;
            }
            PortState::Up if first || self.announced[id] == Some(PortState::Missing) => {
                format!("up (ifindex {}, mtu {})", st.ifindex, st.mtu)
            }
            PortState::Up => "up".into(),
            PortState::Down => "down (link)".into(),
            PortState::Missing if first => {
                "missing: no such interface (attached when it appears)".into()
            }
            PortState::Missing => "missing: the interface went away".into(),
        };
        tracing::info!("port {}: {msg}", self.names[id]);
        self.announced[id] = Some(st.state);
    }

    /// Poll until `shared.stop`: at once on a link event or a link alarm,
    /// the pair and channel members every 10 ms, every port every 100 ms.
    pub fn run(mut self) {
        // Link events are the clock of failover: this thread must run the
        // moment one arrives, not after a busy worker's time slice.
        // SCHED_FIFO needs CAP_SYS_NICE; without it, carry on as is.
        let prio = libc::sched_param { sched_priority: 10 };
        // SAFETY: plain syscall on the calling thread (pid 0).
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &prio) } != 0 {
            tracing::info!(
                "supervisor: real-time priority unavailable; link events at normal priority"
            );
        }
        let monitor = link::LinkMonitor::open()
            .map_err(|e| tracing::warn!("link events unavailable ({e}): polling only"))
            .ok();
        let probe = link::CarrierProbe::open()
            .map_err(|e| tracing::warn!("carrier probe unavailable ({e}): polling only"))
            .ok();
        // Events say what changed, except carrier (only the link watch's
        // event, up to a second later): the probe covers that.
        let full_every = if monitor.is_some() && probe.is_some() {
            POLL_FULL
        } else {
            POLL_ALL
        };
        let alarm_fd = self.shared.link_alarm.event_fd();
        let mut alarmed = Vec::new();
        let mut changes = Vec::new();
        let mut next_all = Instant::now();
        let mut next_probe = Instant::now() + POLL_ALL;
        let mut next_ha = Instant::now() + POLL_HA;
        let mut last_alarms = Instant::now() - ALARM_HOLDOFF;
        while !self.shared.stop.load(Ordering::Relaxed) {
            let next = self.changes.as_ref().and_then(|rx| rx.try_iter().last());
            if let Some(cfg) = next {
                self.set_ports(&cfg);
            }
            let now = Instant::now();
            if now >= next_all {
                self.poll();
                next_all = now + full_every;
                next_probe = now + POLL_ALL;
                next_ha = now + POLL_HA;
            } else {
                if now >= next_probe {
                    if let Some(p) = &probe {
                        let ids = self.carrier_changed(p);
                        if !ids.is_empty() {
                            self.poll_ports(ids);
                        }
                    }
                    next_probe = now + POLL_ALL;
                }
                if now >= next_ha {
                    let ids = self.ha_ports.clone();
                    self.poll_ports(ids);
                    next_ha = now + POLL_HA;
                }
            }
            // Wait for a link event, an alarm (unless in hold-off) or the
            // next scheduled pass.
            let holdoff = ALARM_HOLDOFF.saturating_sub(last_alarms.elapsed());
            let mut due = next_all.min(next_probe);
            if !self.ha_ports.is_empty() {
                due = due.min(next_ha);
            }
            let mut fds = Vec::with_capacity(2);
            if let Some(m) = &monitor {
                fds.push(libc::pollfd {
                    fd: m.fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            if holdoff.is_zero() {
                fds.push(libc::pollfd {
                    fd: alarm_fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            } else {
                due = due.min(Instant::now() + holdoff);
            }
            let wait = due.saturating_duration_since(Instant::now());
            // Round up: a 0 ms timeout just before `due` would spin.
            let ms = (wait.as_micros().div_ceil(1000)).min(i32::MAX as u128) as i32;
            // SAFETY: `fds` is a valid array of pollfd of the given length.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            if let Some(m) = &monitor {
                changes.clear();
                match m.drain_changes(&mut changes) {
                    link::LinkEvents::None => {}
                    link::LinkEvents::Named => {
                        let ids = self.ports_named(&changes);
                        if !ids.is_empty() {
                            self.poll_ports(ids);
                        }
                    }
                    // Events were lost: look at every port now.
                    link::LinkEvents::Overrun => next_all = Instant::now(),
                }
            }
            if holdoff.is_zero() {
                alarmed.clear();
                self.shared.link_alarm.take(&mut alarmed);
                if !alarmed.is_empty() {
                    last_alarms = Instant::now();
                    let ids: Vec<usize> = alarmed.iter().map(|&p| p as usize).collect();
                    self.poll_ports(ids);
                }
            }
        }
    }
}

/// Close the descriptors of a handed-over socket nobody adopted: the
/// first field of each AF_PACKET state (`fd,…`, or `dual|fd,…|fd,…`).
fn close_state(state: &str) {
    if io::af_xdp::close_handover_state(state) {
        return;
    }
    for part in state.split('|').filter(|p| *p != "dual") {
        if let Some(fd) = part.split(',').next().and_then(|f| f.parse::<i32>().ok()) {
            // SAFETY: the predecessor left this descriptor open for us and
            // nothing adopted it.
            unsafe { libc::close(fd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up to 16 ports keep today's rings; 410 ports shrink to about a
    /// 26th, never below the floor, AF_XDP sizes stay powers of two.
    #[test]
    fn rings_shrink_with_port_count() {
        assert_eq!(RingSizes::for_ports(1), RingSizes::FULL);
        assert_eq!(RingSizes::for_ports(16), RingSizes::FULL);
        assert_eq!(RingSizes::for_ports(410), RingSizes::FLOOR);
        assert_eq!(RingSizes::for_ports(1024), RingSizes::FLOOR);
        let r = RingSizes::for_ports(40);
        assert_eq!(
            (r.xdp_rx_frames, r.rx_blocks, r.tx_frames),
            (4096, 341, 170)
        );
        let r = RingSizes::for_ports(100);
        assert!(r.xdp_rx_frames.is_power_of_two() && r.xdp_tx_slots.is_power_of_two());
        assert_eq!((r.xdp_rx_frames, r.xdp_tx_slots), (2048, 64));
    }

    /// Configured sizes replace the port-count ones, AF_XDP rounded down
    /// to a power of two; an unset size keeps the default.
    #[test]
    fn configured_rings_replace_the_defaults() {
        let r = RingSizes::for_ports(410).with_config(Some(6000), None);
        assert_eq!(
            (r.xdp_rx_frames, r.fast_frames, r.rx_blocks),
            (4096, 6000, 750)
        );
        assert_eq!(
            (r.xdp_tx_slots, r.tx_frames),
            (RingSizes::FLOOR.xdp_tx_slots, RingSizes::FLOOR.tx_frames)
        );
        let r = RingSizes::for_ports(1).with_config(Some(64), Some(1000));
        assert_eq!((r.xdp_rx_frames, r.rx_blocks), (64, 8));
        assert_eq!((r.xdp_tx_slots, r.tx_frames), (512, 1000));
        assert_eq!(
            RingSizes::for_ports(8).with_config(None, None),
            RingSizes::FULL
        );
    }
}
