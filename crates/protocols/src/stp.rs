//! Rapid Spanning Tree (IEEE 802.1D-2004 clause 17, formerly 802.1w).
//!
//! [`Bridge`] is pure: BPDUs, link changes and the time come in as
//! arguments; BPDUs to send, port states and the ports whose learned
//! addresses must go come out. It holds the state machines of clause 17
//! for every port — port information (PIM), role selection (PRS), role
//! transitions (PRT), port state transition (PST), topology change (TCM),
//! port protocol migration (PPM), bridge detection (BDM) and transmit
//! (PTX) — evaluated together until nothing changes after each event, as
//! the standard's "all machines run until stable" semantics ask.
//!
//! Timers are deadlines (`Instant`s) instead of per-second counters: a
//! timer "is zero" when its deadline has passed. Port state changes are
//! immediate (a software data path has no learning/forwarding latency).
//!
//! Beyond the standard: BPDU guard (a port configured with it stops
//! forwarding on the first BPDU, err-disabled until its recovery time) and
//! root guard (a port that may not become root port: superior information
//! makes it alternate, "root-inconsistent", until that information ages).

use std::time::{Duration, Instant};
use wire::stp::{flags, BpduInfo, BridgeId, Role as WireRole};

pub use wire::stp::Bpdu;

/// Spanning tree times in whole seconds, as configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    pub hello: u16,
    pub max_age: u16,
    pub forward_delay: u16,
    /// BPDUs a port may send per second (TxHoldCount).
    pub tx_hold_count: u16,
}

impl Default for Timers {
    /// 802.1D-2004 Table 17-1 defaults.
    fn default() -> Self {
        Timers {
            hello: 2,
            max_age: 20,
            forward_delay: 15,
            tx_hold_count: 6,
        }
    }
}

/// The bridge's configuration.
#[derive(Clone, Copy, Debug)]
pub struct BridgeConfig {
    /// Bridge priority (multiple of 4096, 0–61440).
    pub priority: u16,
    pub mac: [u8; 6],
    pub timers: Timers,
    /// Send STP (version 0) BPDUs only (force-version 0).
    pub force_stp: bool,
}

/// One port's configuration.
#[derive(Clone, Copy, Debug)]
pub struct PortConfig {
    /// Port number, 1–4095 (the low 12 bits of the port identifier).
    pub number: u16,
    /// Port priority, multiple of 16, 0–240.
    pub priority: u8,
    /// Path cost (802.1D-2004 Table 17-3: 20,000,000 / Gb/s ... ).
    pub path_cost: u32,
    /// Configured as an edge port (forwards at once; a BPDU makes it a
    /// normal port again).
    pub admin_edge: bool,
    /// Become an edge port when no BPDU arrives (detected, 17.19.3).
    pub auto_edge: bool,
    /// Err-disable the port on any BPDU.
    pub bpdu_guard: bool,
    /// Never let this port become root port.
    pub root_guard: bool,
}

impl PortConfig {
    pub fn new(number: u16) -> PortConfig {
        PortConfig {
            number,
            priority: 128,
            path_cost: 20_000,
            admin_edge: false,
            auto_edge: true,
            bpdu_guard: false,
            root_guard: false,
        }
    }

    fn id(&self) -> u16 {
        (u16::from(self.priority & 0xf0) << 8) | (self.number & 0x0fff)
    }
}

/// A port's role (17.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Disabled,
    Root,
    Designated,
    Alternate,
    Backup,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Disabled => "disabled",
            Role::Root => "root",
            Role::Designated => "designated",
            Role::Alternate => "alternate",
            Role::Backup => "backup",
        }
    }
}

/// What the data path does with a port's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// Frames dropped, nothing learned (also: link down, err-disabled).
    Discarding,
    /// Sources learned, frames dropped.
    Learning,
    Forwarding,
}

impl PortState {
    pub fn name(self) -> &'static str {
        match self {
            PortState::Discarding => "discarding",
            PortState::Learning => "learning",
            PortState::Forwarding => "forwarding",
        }
    }
}

/// A priority vector (17.5): lower is better, compared field by field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Priority {
    pub root: BridgeId,
    pub cost: u32,
    pub bridge: BridgeId,
    pub port: u16,
}

impl Priority {
    /// 17.6: `self` (a message) is superior to `port`'s vector: better,
    /// or from the same designated bridge and port (news from the same
    /// sender replaces what it said before).
    fn superior_to(&self, port: &Priority) -> bool {
        self < port
            || (self != port
                && self.bridge.mac == port.bridge.mac
                && self.port & 0x0fff == port.port & 0x0fff)
    }
}

/// Times carried in BPDUs, in 1/256 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Times {
    pub message_age: u16,
    pub max_age: u16,
    pub hello: u16,
    pub forward_delay: u16,
}

impl Times {
    fn secs(v: u16) -> Duration {
        Duration::from_millis(u64::from(v) * 1000 / 256)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InfoIs {
    Disabled,
    Mine,
    Aged,
    Received,
}

/// Per-port counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx_rst: u64,
    pub rx_config: u64,
    pub rx_tcn: u64,
    pub tx_rst: u64,
    pub tx_config: u64,
    pub tx_tcn: u64,
    /// BPDUs that carried a topology change (or TCNs).
    pub rx_tc: u64,
    pub tx_tc: u64,
    /// BPDUs ignored: own BPDUs looped back, or on an err-disabled port.
    pub rx_ignored: u64,
    /// Times BPDU guard err-disabled the port.
    pub bpdu_guard_trips: u64,
    /// Times the port went to forwarding.
    pub forward_transitions: u64,
}

/// One port's state (the variables of 17.19).
#[derive(Clone, Debug)]
pub struct Port {
    pub cfg: PortConfig,
    enabled: bool,
    pub role: Role,
    selected_role: Role,
    info_is: InfoIs,
    reselect: bool,
    selected: bool,
    updt_info: bool,
    /// What this port knows of the link's designated bridge.
    pub port_priority: Priority,
    port_times: Times,
    designated_priority: Priority,
    designated_times: Times,
    rcvd: Option<Bpdu>,
    rcvd_info_while: Option<Instant>,
    proposing: bool,
    proposed: bool,
    agree: bool,
    agreed: bool,
    sync: bool,
    synced: bool,
    re_root: bool,
    disputed: bool,
    learn: bool,
    forward: bool,
    fd_while: Option<Instant>,
    rr_while: Option<Instant>,
    rb_while: Option<Instant>,
    tc_while: Option<Instant>,
    edge_delay_while: Option<Instant>,
    mdelay_while: Option<Instant>,
    hello_when: Option<Instant>,
    pub oper_edge: bool,
    /// Speaking RSTP (false: migrated to STP for an old neighbour).
    pub send_rstp: bool,
    new_info: bool,
    tx_times: [Option<Instant>; 16],
    rcvd_tc: bool,
    rcvd_tcn: bool,
    rcvd_tc_ack: bool,
    tc_prop: bool,
    tc_ack: bool,
    /// Err-disabled by BPDU guard until this time (`None`: not).
    pub guard_until: Option<Instant>,
    pub counters: PortCounters,
}

/// Bridge-wide counters and state for `show`.
#[derive(Clone, Copy, Debug, Default)]
pub struct BridgeStats {
    /// Topology changes this bridge detected or was told of.
    pub topology_changes: u64,
    pub last_topology_change: Option<Instant>,
}

/// How long an err-disabled port stays so (0: until the configuration
/// is applied again).
pub const DEFAULT_GUARD_RECOVERY: Duration = Duration::from_secs(300);
/// 17.13.9 Migrate Time.
const MIGRATE_TIME: Duration = Duration::from_secs(3);
const FAR_FUTURE: Duration = Duration::from_secs(86400 * 365);

/// A spanning tree bridge (see the module docs).
pub struct Bridge {
    pub cfg: BridgeConfig,
    pub ports: Vec<Port>,
    pub root_priority: Priority,
    pub root_port: Option<usize>,
    root_times: Times,
    pub stats: BridgeStats,
    pub guard_recovery: Duration,
    flush: Vec<usize>,
    out: Vec<(usize, Bpdu)>,
}

fn set(t: &mut Option<Instant>, now: Instant, d: Duration) {
    *t = Some(now + d);
}

/// A timer "is zero" when unset or past.
fn zero(t: Option<Instant>, now: Instant) -> bool {
    t.is_none_or(|t| t <= now)
}

impl Bridge {
    pub fn new(cfg: BridgeConfig, ports: &[PortConfig]) -> Bridge {
        let mut b = Bridge {
            cfg,
            ports: ports
                .iter()
                .map(|c| Port {
                    cfg: *c,
                    enabled: false,
                    role: Role::Disabled,
                    selected_role: Role::Disabled,
                    info_is: InfoIs::Disabled,
                    reselect: false,
                    selected: false,
                    updt_info: false,
                    port_priority: Priority::default(),
                    port_times: Times::default(),
                    designated_priority: Priority::default(),
                    designated_times: Times::default(),
                    rcvd: None,
                    rcvd_info_while: None,
                    proposing: false,
                    proposed: false,
                    agree: false,
                    agreed: false,
                    sync: false,
                    synced: true,
                    re_root: false,
                    disputed: false,
                    learn: false,
                    forward: false,
                    fd_while: None,
                    rr_while: None,
                    rb_while: None,
                    tc_while: None,
                    edge_delay_while: None,
                    mdelay_while: None,
                    hello_when: None,
                    oper_edge: c.admin_edge,
                    send_rstp: !cfg.force_stp,
                    new_info: false,
                    tx_times: [None; 16],
                    rcvd_tc: false,
                    rcvd_tcn: false,
                    rcvd_tc_ack: false,
                    tc_prop: false,
                    tc_ack: false,
                    guard_until: None,
                    counters: PortCounters::default(),
                })
                .collect(),
            root_priority: Priority::default(),
            root_port: None,
            root_times: Times::default(),
            stats: BridgeStats::default(),
            guard_recovery: DEFAULT_GUARD_RECOVERY,
            flush: Vec::new(),
            out: Vec::new(),
        };
        b.root_priority = b.bridge_priority();
        b.root_times = b.bridge_times();
        b
    }

    /// This bridge's identifier.
    pub fn bridge_id(&self) -> BridgeId {
        BridgeId {
            priority: self.cfg.priority,
            mac: self.cfg.mac,
        }
    }

    fn bridge_priority(&self) -> Priority {
        Priority {
            root: self.bridge_id(),
            cost: 0,
            bridge: self.bridge_id(),
            port: 0,
        }
    }

    fn bridge_times(&self) -> Times {
        let t = self.cfg.timers;
        Times {
            message_age: 0,
            max_age: t.max_age * 256,
            hello: t.hello * 256,
            forward_delay: t.forward_delay * 256,
        }
    }

    /// This bridge is the root.
    pub fn is_root(&self) -> bool {
        self.root_port.is_none()
    }

    /// The root's times as this bridge uses them (1/256 s).
    pub fn root_times(&self) -> Times {
        self.root_times
    }

    fn fwd_delay(&self) -> Duration {
        Times::secs(self.root_times.forward_delay.max(256))
    }

    fn hello(&self) -> Duration {
        Duration::from_secs(u64::from(self.cfg.timers.hello.max(1)))
    }

    fn max_age(&self) -> Duration {
        Times::secs(self.root_times.max_age.max(256))
    }

    /// Ports' link came up.
    pub fn link_up(&mut self, i: usize, now: Instant) {
        let Some(p) = self.ports.get_mut(i) else {
            return;
        };
        if p.enabled {
            return;
        }
        p.enabled = true;
        p.info_is = InfoIs::Aged;
        p.reselect = true;
        p.selected = false;
        p.oper_edge = p.cfg.admin_edge;
        p.send_rstp = !self.cfg.force_stp;
        set(&mut p.mdelay_while, now, MIGRATE_TIME);
        set(&mut p.edge_delay_while, now, MIGRATE_TIME);
        p.proposing = false;
        p.proposed = false;
        p.agreed = false;
        p.agree = false;
        p.hello_when = Some(now);
        // Without an agreement the port waits two forward delays.
        let fd = self.fwd_delay();
        set(&mut self.ports[i].fd_while, now, fd);
        self.run(now);
    }

    /// A port's link went down.
    pub fn link_down(&mut self, i: usize, now: Instant) {
        let Some(p) = self.ports.get_mut(i) else {
            return;
        };
        if !p.enabled {
            return;
        }
        p.enabled = false;
        p.info_is = InfoIs::Disabled;
        p.reselect = true;
        p.selected = false;
        p.rcvd = None;
        p.learn = false;
        p.forward = false;
        p.proposing = false;
        p.agreed = false;
        p.tc_while = None;
        // The port's addresses go with it (INACTIVE: fdbFlush).
        self.flush.push(i);
        self.run(now);
    }

    /// A BPDU arrived on port `i`.
    pub fn receive(&mut self, i: usize, bpdu: &Bpdu, now: Instant) {
        let own = self.bridge_id();
        let recovery = self.guard_recovery;
        let Some(p) = self.ports.get_mut(i) else {
            return;
        };
        if !p.enabled || p.guard_until.is_some() {
            p.counters.rx_ignored += 1;
            return;
        }
        match bpdu {
            Bpdu::Rst(_) => p.counters.rx_rst += 1,
            Bpdu::Config(_) => p.counters.rx_config += 1,
            Bpdu::Tcn => p.counters.rx_tcn += 1,
        }
        if let Bpdu::Rst(m) | Bpdu::Config(m) = bpdu {
            // Our own BPDU back on the port it left (9.3.4): ignore.
            if m.bridge == own && m.port & 0x0fff == p.cfg.number {
                p.counters.rx_ignored += 1;
                return;
            }
            if m.has(flags::TC) {
                p.counters.rx_tc += 1;
            }
        } else {
            p.counters.rx_tc += 1;
        }
        if p.cfg.bpdu_guard {
            p.counters.bpdu_guard_trips += 1;
            p.guard_until = Some(
                now + if recovery.is_zero() {
                    FAR_FUTURE
                } else {
                    recovery
                },
            );
            p.enabled = false;
            p.info_is = InfoIs::Disabled;
            p.reselect = true;
            p.selected = false;
            p.learn = false;
            p.forward = false;
            self.flush.push(i);
            self.run(now);
            return;
        }
        // PRX RECEIVE: a BPDU means a bridge, not an edge.
        p.oper_edge = false;
        set(&mut p.edge_delay_while, now, MIGRATE_TIME);
        // PPM: follow the neighbour's version once Migrate Time passed.
        let rstp = matches!(bpdu, Bpdu::Rst(_));
        if zero(p.mdelay_while, now) && !self.cfg.force_stp && rstp != p.send_rstp {
            p.send_rstp = rstp;
            set(&mut p.mdelay_while, now, MIGRATE_TIME);
            p.new_info = true;
        }
        p.rcvd = Some(*bpdu);
        self.run(now);
    }

    /// Take the ports whose learned addresses must be flushed now
    /// (topology change, or a port leaving forwarding).
    pub fn take_flushes(&mut self) -> Vec<usize> {
        let mut f = std::mem::take(&mut self.flush);
        f.sort_unstable();
        f.dedup();
        f
    }

    /// Timers, then BPDUs to send now: `(port, bpdu)`.
    pub fn poll(&mut self, now: Instant) -> Vec<(usize, Bpdu)> {
        self.run(now);
        std::mem::take(&mut self.out)
    }

    /// The earliest deadline of any timer (poll then).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.ports
            .iter()
            .filter(|p| p.enabled || p.guard_until.is_some())
            .flat_map(|p| {
                [
                    p.rcvd_info_while.filter(|_| p.info_is == InfoIs::Received),
                    p.fd_while,
                    p.rr_while,
                    p.rb_while,
                    p.tc_while,
                    p.edge_delay_while,
                    p.mdelay_while,
                    p.hello_when,
                    p.guard_until,
                ]
            })
            .flatten()
            .min()
    }

    /// Port `i`'s forwarding state.
    pub fn state(&self, i: usize) -> PortState {
        match self.ports.get(i) {
            Some(p) if p.enabled && p.forward => PortState::Forwarding,
            Some(p) if p.enabled && p.learn => PortState::Learning,
            _ => PortState::Discarding,
        }
    }

    /// The designated priority this port sends (for `show`).
    pub fn designated(&self, i: usize) -> Priority {
        let p = &self.ports[i];
        match p.role {
            Role::Designated | Role::Disabled => p.designated_priority,
            _ => p.port_priority,
        }
    }

    /// Run every machine until nothing changes, then transmit.
    fn run(&mut self, now: Instant) {
        for _ in 0..64 {
            let mut changed = self.timers(now);
            for i in 0..self.ports.len() {
                changed |= self.pim(i, now);
            }
            if self.ports.iter().any(|p| p.reselect) {
                self.prs(now);
                changed = true;
            }
            for i in 0..self.ports.len() {
                changed |= self.prt(i, now);
                changed |= self.tcm(i, now);
            }
            if !changed {
                break;
            }
        }
        for i in 0..self.ports.len() {
            self.ptx(i, now);
        }
        // An expired timer reads as zero either way; clearing it keeps
        // `next_deadline` in the future.
        for p in &mut self.ports {
            for t in [
                &mut p.rcvd_info_while,
                &mut p.fd_while,
                &mut p.rr_while,
                &mut p.rb_while,
                &mut p.tc_while,
                &mut p.edge_delay_while,
                &mut p.mdelay_while,
            ] {
                if t.is_some_and(|d| d <= now) {
                    *t = None;
                }
            }
        }
    }

    /// Expired timers that change state by themselves.
    fn timers(&mut self, now: Instant) -> bool {
        let mut changed = false;
        let hello = self.hello();
        for p in &mut self.ports {
            if p.guard_until.is_some_and(|t| t <= now) {
                // BPDU guard recovery: the port starts over.
                p.guard_until = None;
                p.enabled = true;
                p.info_is = InfoIs::Aged;
                p.reselect = true;
                p.selected = false;
                p.oper_edge = p.cfg.admin_edge;
                set(&mut p.edge_delay_while, now, MIGRATE_TIME);
                changed = true;
            }
            if !p.enabled {
                continue;
            }
            if p.info_is == InfoIs::Received && zero(p.rcvd_info_while, now) && p.rcvd.is_none() {
                // AGED: the designated bridge went silent.
                p.info_is = InfoIs::Aged;
                p.reselect = true;
                p.selected = false;
                changed = true;
            }
            // BDM: no BPDU for Migrate Time while proposing: an edge.
            if !p.oper_edge
                && p.cfg.auto_edge
                && p.send_rstp
                && p.proposing
                && zero(p.edge_delay_while, now)
            {
                p.oper_edge = true;
                changed = true;
            }
            if p.hello_when.is_some_and(|t| t <= now) {
                set(&mut p.hello_when, now, hello);
                if p.role == Role::Designated
                    || (p.role == Role::Root && !zero(p.tc_while, now))
                    || (!p.send_rstp && p.role == Role::Root && !zero(p.tc_while, now))
                {
                    p.new_info = true;
                }
            }
        }
        changed
    }

    /// Port information machine: received BPDUs and updated information.
    fn pim(&mut self, i: usize, now: Instant) -> bool {
        let mut changed = false;
        let p = &mut self.ports[i];
        if !p.enabled {
            return false;
        }
        if p.updt_info && p.selected {
            // UPDATE: the port's information is now the designated one.
            p.proposing = false;
            p.proposed = false;
            p.agreed = p.agreed && p.designated_priority <= p.port_priority;
            p.synced = p.synced && p.agreed;
            p.port_priority = p.designated_priority;
            p.port_times = p.designated_times;
            p.updt_info = false;
            p.info_is = InfoIs::Mine;
            p.new_info = true;
            changed = true;
        }
        let Some(bpdu) = p.rcvd.take() else {
            return changed;
        };
        if p.updt_info {
            // Wait for the selection in progress (rcvdMsg stays).
            p.rcvd = Some(bpdu);
            return changed;
        }
        let (msg, role, rst) = match bpdu {
            Bpdu::Rst(m) => (m, m.role(), true),
            // An STP Configuration BPDU speaks for a designated port.
            Bpdu::Config(m) => (m, WireRole::Designated, false),
            Bpdu::Tcn => {
                p.rcvd_tcn = true;
                return true;
            }
        };
        let msg_pri = Priority {
            root: msg.root,
            cost: msg.root_path_cost,
            bridge: msg.bridge,
            port: msg.port,
        };
        let msg_times = Times {
            message_age: msg.message_age,
            max_age: msg.max_age,
            hello: msg.hello_time,
            forward_delay: msg.forward_delay,
        };
        // setTcFlags
        let set_tc = |p: &mut Port| {
            if msg.has(flags::TC) {
                p.rcvd_tc = true;
            }
            if msg.has(flags::TCA) {
                p.rcvd_tc_ack = true;
            }
        };
        let update_rcvd_info_while = |p: &mut Port| {
            // 17.21.23: three hellos, or none if the message is too old.
            let age = msg_times.message_age.saturating_add(256);
            p.rcvd_info_while = if age <= msg_times.max_age {
                Some(now + 3 * Times::secs(msg_times.hello.max(256)))
            } else {
                Some(now)
            };
        };
        match role {
            WireRole::Designated => {
                let same = msg_pri == p.port_priority;
                if msg_pri.superior_to(&p.port_priority)
                    || (same && (msg_times != p.port_times || p.info_is != InfoIs::Received))
                {
                    // SUPERIOR_DESIGNATED
                    p.agreed = false;
                    p.proposing = false;
                    p.proposed = rst && msg.has(flags::PROPOSAL);
                    set_tc(p);
                    p.agree = p.agree && msg_pri <= p.port_priority;
                    p.port_priority = msg_pri;
                    p.port_times = msg_times;
                    update_rcvd_info_while(p);
                    p.info_is = InfoIs::Received;
                    p.reselect = true;
                    p.selected = false;
                    p.disputed = false;
                } else if same {
                    // REPEATED_DESIGNATED
                    if rst && msg.has(flags::PROPOSAL) {
                        p.proposed = true;
                    }
                    set_tc(p);
                    update_rcvd_info_while(p);
                } else {
                    // INFERIOR_DESIGNATED: a designated port that thinks
                    // it is, but is not (and is learning): dispute.
                    if rst && msg.has(flags::LEARNING) && p.role == Role::Designated {
                        p.disputed = true;
                        p.agreed = false;
                    }
                    set_tc(p);
                    // A better bridge will hear from us.
                    p.new_info = true;
                }
            }
            WireRole::Root | WireRole::AlternateBackup if msg_pri >= p.port_priority => {
                // NOT_DESIGNATED: recordAgreement, setTcFlags.
                if rst && msg.has(flags::AGREEMENT) && p.send_rstp {
                    p.agreed = true;
                    p.proposing = false;
                } else {
                    p.agreed = false;
                }
                set_tc(p);
            }
            _ => {
                set_tc(p);
            }
        }
        true
    }

    /// Port role selection: updtRolesTree and setSelectedTree (17.21.25).
    fn prs(&mut self, now: Instant) {
        for p in &mut self.ports {
            p.reselect = false;
        }
        let own = self.bridge_id();
        // The best root path priority vector (with the receiving port's
        // identifier as the last tie-breaker), if better than this
        // bridge's own: that port is the root port.
        let mut best = self.bridge_priority();
        let mut best_port: Option<(usize, u16)> = None;
        for (i, p) in self.ports.iter().enumerate() {
            // Our own information heard back (a loop to another of our
            // ports) never leads to the root; root guard ports never do.
            if p.info_is != InfoIs::Received
                || p.port_priority.bridge.mac == own.mac
                || p.cfg.root_guard
            {
                continue;
            }
            let rp = Priority {
                cost: p.port_priority.cost.saturating_add(p.cfg.path_cost),
                ..p.port_priority
            };
            let better = match best_port {
                None => rp < best,
                Some((_, id)) => (rp, p.cfg.id()) < (best, id),
            };
            if better {
                best = rp;
                best_port = Some((i, p.cfg.id()));
            }
        }
        let old_root = self.root_priority.root;
        self.root_priority = best;
        self.root_port = best_port.map(|(i, _)| i);
        self.root_times = match best_port {
            None => self.bridge_times(),
            Some((i, _)) => {
                let t = self.ports[i].port_times;
                Times {
                    message_age: t.message_age.saturating_add(256),
                    ..t
                }
            }
        };
        if old_root != best.root {
            tracing::debug!("spanning tree: root is now {}", best.root);
        }
        let hello = self.cfg.timers.hello * 256;
        for (i, p) in self.ports.iter_mut().enumerate() {
            p.designated_priority = Priority {
                root: best.root,
                cost: best.cost,
                bridge: own,
                port: p.cfg.id(),
            };
            p.designated_times = Times {
                hello,
                ..self.root_times
            };
            let role = match p.info_is {
                InfoIs::Disabled => Role::Disabled,
                InfoIs::Aged => {
                    p.updt_info = true;
                    Role::Designated
                }
                InfoIs::Mine => {
                    if p.port_priority != p.designated_priority
                        || p.port_times != p.designated_times
                    {
                        p.updt_info = true;
                    }
                    Role::Designated
                }
                InfoIs::Received => {
                    if Some(i) == self.root_port {
                        p.updt_info = false;
                        Role::Root
                    } else if p.designated_priority >= p.port_priority
                        || (p.cfg.root_guard && p.port_priority.root < own)
                    {
                        p.updt_info = false;
                        if p.port_priority.bridge.mac == own.mac {
                            Role::Backup
                        } else {
                            Role::Alternate
                        }
                    } else {
                        p.updt_info = true;
                        Role::Designated
                    }
                }
            };
            p.selected_role = role;
        }
        let _ = now;
        for p in &mut self.ports {
            p.selected = true;
        }
    }

    fn all_synced(&self, except: usize) -> bool {
        self.ports.iter().enumerate().all(|(k, p)| {
            k == except
                || !p.enabled
                || (p.selected
                    && p.role == p.selected_role
                    && !p.updt_info
                    && (p.synced || p.role == Role::Root))
        })
    }

    fn re_rooted(&self, except: usize, now: Instant) -> bool {
        self.ports
            .iter()
            .enumerate()
            .all(|(k, p)| k == except || zero(p.rr_while, now))
    }

    fn set_sync_tree(&mut self) {
        for p in &mut self.ports {
            p.sync = true;
        }
    }

    fn set_re_root_tree(&mut self) {
        for p in &mut self.ports {
            p.re_root = true;
        }
    }

    /// Port role transitions and the port state (17.23, 17.24).
    fn prt(&mut self, i: usize, now: Instant) -> bool {
        let fwd_delay = self.fwd_delay();
        let max_age = self.max_age();
        let hello = self.hello();
        let all_synced = self.all_synced(i);
        let re_rooted = self.re_rooted(i, now);
        let p = &self.ports[i];
        if !p.selected || p.updt_info {
            return false;
        }
        let mut changed = false;
        if p.role != p.selected_role {
            let p = &mut self.ports[i];
            let was_forwarding = p.forward;
            p.role = p.selected_role;
            match p.role {
                Role::Root => set(&mut p.rr_while, now, fwd_delay),
                Role::Designated => {}
                Role::Alternate | Role::Backup | Role::Disabled => {
                    p.learn = false;
                    p.forward = false;
                    p.synced = true;
                    p.sync = false;
                    p.re_root = false;
                    p.rr_while = None;
                    p.proposing = false;
                    set(
                        &mut p.fd_while,
                        now,
                        if p.role == Role::Disabled {
                            max_age
                        } else {
                            fwd_delay
                        },
                    );
                    if was_forwarding {
                        // TCM INACTIVE: a port leaving forwarding takes
                        // its addresses with it.
                        self.flush.push(i);
                    }
                }
            }
            return true;
        }
        match p.role {
            Role::Disabled => {}
            Role::Root => {
                if p.proposed && !p.agree {
                    self.set_sync_tree();
                    self.ports[i].proposed = false;
                    changed = true;
                }
                let p = &mut self.ports[i];
                if (all_synced && !p.agree) || (p.proposed && p.agree) {
                    p.proposed = false;
                    p.sync = false;
                    p.agree = true;
                    p.new_info = true;
                    changed = true;
                }
                if p.sync {
                    p.sync = false;
                    changed = true;
                }
                if !p.forward && !p.re_root {
                    self.set_re_root_tree();
                    changed = true;
                }
                let p = &mut self.ports[i];
                if p.rr_while.is_none_or(|t| t < now + fwd_delay / 2) {
                    set(&mut p.rr_while, now, fwd_delay);
                }
                let rb_ok = zero(p.rb_while, now);
                let go = zero(p.fd_while, now) || (re_rooted && rb_ok && p.send_rstp);
                if go && !p.learn {
                    p.learn = true;
                    set(&mut p.fd_while, now, fwd_delay);
                    changed = true;
                }
                if go && p.learn && !p.forward && (zero(p.fd_while, now) || p.send_rstp) {
                    self.forwarding(i, now);
                    changed = true;
                }
                let p = &mut self.ports[i];
                if p.re_root && p.forward {
                    p.re_root = false;
                    changed = true;
                }
            }
            Role::Designated => {
                let p = &mut self.ports[i];
                if !p.forward && !p.agreed && !p.proposing && !p.oper_edge {
                    p.proposing = true;
                    set(&mut p.edge_delay_while, now, MIGRATE_TIME);
                    p.new_info = true;
                    changed = true;
                }
                if (!p.learn && !p.forward && !p.synced)
                    || (p.agreed && !p.synced)
                    || (p.oper_edge && !p.synced)
                    || (p.sync && p.synced)
                {
                    p.rr_while = None;
                    p.synced = true;
                    p.sync = false;
                    changed = true;
                }
                if zero(p.rr_while, now) && p.re_root {
                    p.re_root = false;
                    changed = true;
                }
                if ((p.sync && !p.synced) || (p.re_root && !zero(p.rr_while, now)) || p.disputed)
                    && !p.oper_edge
                    && (p.learn || p.forward)
                {
                    let was = p.forward;
                    p.learn = false;
                    p.forward = false;
                    p.disputed = false;
                    p.synced = !p.agreed || p.synced;
                    set(&mut p.fd_while, now, fwd_delay);
                    if was {
                        self.flush.push(i);
                    }
                    return true;
                }
                let p = &mut self.ports[i];
                let may = (zero(p.fd_while, now) || p.agreed || p.oper_edge)
                    && (zero(p.rr_while, now) || !p.re_root)
                    && !p.sync;
                if may && !p.learn {
                    p.learn = true;
                    set(&mut p.fd_while, now, fwd_delay);
                    changed = true;
                }
                let p = &self.ports[i];
                let may = (zero(p.fd_while, now) || p.agreed || p.oper_edge)
                    && (zero(p.rr_while, now) || !p.re_root)
                    && !p.sync;
                if may && p.learn && !p.forward {
                    self.forwarding(i, now);
                    self.ports[i].agreed = self.ports[i].send_rstp;
                    changed = true;
                }
            }
            Role::Alternate | Role::Backup => {
                if p.proposed && !p.agree {
                    self.set_sync_tree();
                    self.ports[i].proposed = false;
                    changed = true;
                }
                let p = &mut self.ports[i];
                if (all_synced && !p.agree) || (p.proposed && p.agree) {
                    p.proposed = false;
                    p.agree = true;
                    p.new_info = true;
                    changed = true;
                }
                if p.sync || p.re_root || !p.synced {
                    p.sync = false;
                    p.re_root = false;
                    p.synced = true;
                    p.rr_while = None;
                    changed = true;
                }
                if p.role == Role::Backup && p.rb_while.is_none_or(|t| t < now + hello) {
                    set(&mut p.rb_while, now, 2 * hello);
                }
            }
        }
        changed
    }

    /// The port starts forwarding; a non-edge port's doing so is a
    /// topology change (TCM DETECTED).
    fn forwarding(&mut self, i: usize, now: Instant) {
        let p = &mut self.ports[i];
        p.forward = true;
        p.fd_while = None;
        p.counters.forward_transitions += 1;
        if !p.oper_edge {
            self.detected_tc(i, now);
        }
    }

    fn new_tc_while(&mut self, i: usize, now: Instant) {
        let hello = self.hello();
        let stp_tc = self.max_age() + self.fwd_delay();
        let p = &mut self.ports[i];
        if zero(p.tc_while, now) {
            let d = if p.send_rstp {
                p.new_info = true;
                hello + Duration::from_secs(1)
            } else {
                stp_tc
            };
            set(&mut p.tc_while, now, d);
        }
    }

    fn detected_tc(&mut self, i: usize, now: Instant) {
        self.stats.topology_changes += 1;
        self.stats.last_topology_change = Some(now);
        self.new_tc_while(i, now);
        for (k, p) in self.ports.iter_mut().enumerate() {
            if k != i {
                p.tc_prop = true;
            }
        }
    }

    /// Topology change machine (17.25).
    fn tcm(&mut self, i: usize, now: Instant) -> bool {
        let p = &mut self.ports[i];
        let active = p.enabled
            && p.forward
            && !p.oper_edge
            && matches!(p.role, Role::Root | Role::Designated);
        if !active {
            let c = p.rcvd_tc || p.rcvd_tcn || p.rcvd_tc_ack || p.tc_prop;
            p.rcvd_tc = false;
            p.rcvd_tcn = false;
            p.rcvd_tc_ack = false;
            p.tc_prop = false;
            if !p.forward && !p.learn {
                p.tc_while = None;
            }
            return c;
        }
        let mut changed = false;
        if p.rcvd_tcn {
            // NOTIFIED_TCN (an STP bridge told us)
            p.rcvd_tcn = false;
            p.rcvd_tc = true;
            self.new_tc_while(i, now);
            changed = true;
        }
        let p = &mut self.ports[i];
        if p.rcvd_tc {
            // NOTIFIED_TC
            p.rcvd_tc = false;
            if p.role == Role::Designated {
                p.tc_ack = true;
            }
            self.stats.topology_changes += 1;
            self.stats.last_topology_change = Some(now);
            for (k, q) in self.ports.iter_mut().enumerate() {
                if k != i {
                    q.tc_prop = true;
                }
            }
            changed = true;
        }
        let p = &mut self.ports[i];
        if p.rcvd_tc_ack {
            p.rcvd_tc_ack = false;
            p.tc_while = None;
            changed = true;
        }
        if p.tc_prop {
            // PROPAGATING: flush this port, tell its neighbour.
            p.tc_prop = false;
            self.new_tc_while(i, now);
            self.flush.push(i);
            changed = true;
        }
        changed
    }

    /// Transmit machine (17.26): at most TxHoldCount BPDUs a second.
    fn ptx(&mut self, i: usize, now: Instant) {
        let hold = usize::from(self.cfg.timers.tx_hold_count.clamp(1, 16));
        let pkt = {
            let p = &self.ports[i];
            if !p.enabled || !p.new_info || !p.selected || p.updt_info {
                return;
            }
            if p.role == Role::Disabled {
                return;
            }
            let recent = p
                .tx_times
                .iter()
                .flatten()
                .filter(|t| now.duration_since(**t) < Duration::from_secs(1))
                .count();
            if recent >= hold {
                return;
            }
            let tc = !zero(p.tc_while, now);
            let pri = p.designated_priority;
            let t = p.designated_times;
            let mut m = BpduInfo {
                flags: 0,
                root: pri.root,
                root_path_cost: pri.cost,
                bridge: pri.bridge,
                port: pri.port,
                message_age: t.message_age,
                max_age: t.max_age,
                hello_time: t.hello,
                forward_delay: t.forward_delay,
            };
            if tc {
                m.flags |= flags::TC;
            }
            if p.send_rstp {
                m.set_role(match p.role {
                    Role::Root => WireRole::Root,
                    Role::Designated => WireRole::Designated,
                    _ => WireRole::AlternateBackup,
                });
                if p.proposing && p.role == Role::Designated {
                    m.flags |= flags::PROPOSAL;
                }
                if p.agree {
                    m.flags |= flags::AGREEMENT;
                }
                if p.learn {
                    m.flags |= flags::LEARNING;
                }
                if p.forward {
                    m.flags |= flags::FORWARDING;
                }
                Some(Bpdu::Rst(m))
            } else if p.role == Role::Designated {
                if p.tc_ack {
                    m.flags |= flags::TCA;
                }
                Some(Bpdu::Config(m))
            } else if p.role == Role::Root && tc {
                Some(Bpdu::Tcn)
            } else {
                None
            }
        };
        let p = &mut self.ports[i];
        p.new_info = false;
        let Some(b) = pkt else { return };
        let oldest = (0..p.tx_times.len())
            .max_by_key(|&k| {
                p.tx_times[k]
                    .map(|t| now.saturating_duration_since(t))
                    .unwrap_or(Duration::MAX)
            })
            .unwrap_or(0);
        p.tx_times[oldest] = Some(now);
        match b {
            Bpdu::Rst(m) => {
                p.counters.tx_rst += 1;
                if m.has(flags::TC) {
                    p.counters.tx_tc += 1;
                }
            }
            Bpdu::Config(m) => {
                p.counters.tx_config += 1;
                p.tc_ack = false;
                if m.has(flags::TC) {
                    p.counters.tx_tc += 1;
                }
            }
            Bpdu::Tcn => {
                p.counters.tx_tcn += 1;
                p.counters.tx_tc += 1;
            }
        }
        self.out.push((i, b));
    }
}

#[cfg(test)]
mod tests;
