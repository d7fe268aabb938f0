//! IEEE 802.1AX Link Aggregation Control Protocol: the per-port state
//! machines ([`LacpPort`]) and the choice of which ports of a link
//! aggregation group carry traffic ([`Aggregator`]).
//!
//! Pure logic: no I/O, no threads, no clock. Every event takes `now`, so
//! tests run on simulated time; the caller sends the PDUs that
//! [`LacpPort::poll`] / [`Aggregator::poll`] return and sleeps until
//! `next_deadline()`. See `docs/lacp.md` for the operator's view.
//!
//! ## Terms (802.1AX-2014 clause 6)
//!
//! * **Actor** is this end of a link, **partner** the other end.
//! * **Partner information** is what the partner last said about itself
//!   (the actor fields of its LACPDU). It is *current* while fresh,
//!   *expired* when no LACPDU came for the timeout (3 s for a fast actor,
//!   90 s for a slow one), and *defaulted* (forgotten) a further 3 s later.
//! * A port is **selected** when a partner was heard since the link came
//!   up, its information is not yet defaulted, and the aggregator accepts
//!   it (same partner system and key as the other ports in use). A selected port is **in sync** (our SYNCHRONIZATION
//!   flag); once the partner is in sync too it is **collecting** and
//!   **distributing**: frames may be received from and sent to it.
//!
//! ## Machines, as implemented
//!
//! * **Receive** (6.4.12): DISABLED (link down) → link up → EXPIRED →
//!   after 3 s DEFAULTED. A LACPDU makes it CURRENT and restarts the timer
//!   (short or long after *our* TIMEOUT flag); at expiry CURRENT → EXPIRED,
//!   which clears the partner's SYNCHRONIZATION and assumes a short
//!   timeout so that we transmit fast while the partner is missing.
//! * **Periodic transmission** (6.4.13): every 1 s if the partner's
//!   TIMEOUT flag asks for the short timeout, else every 30 s; none while
//!   the link is down or when both ends are passive.
//! * **Selection** (6.4.14): see [`Aggregator`]. A [`LacpPort`] alone is
//!   its own aggregator.
//! * **Mux** (6.4.15, coupled control): DETACHED → (selected) ATTACHED
//!   with SYNCHRONIZATION → (partner in sync) COLLECTING_DISTRIBUTING.
//!   We *distribute* only while the partner also says COLLECTING, so we
//!   stop at once when the partner stops collecting, drops SYNCHRONIZATION,
//!   times out, or the link goes down.
//! * **Transmit** (6.4.16): a LACPDU whenever the actor state or identity
//!   changes, the partner's view of us is wrong, or the periodic timer
//!   fires; at most 3 per second; never when both ends are passive.
//!
//! ## Simplifications
//!
//! * No Aggregate_Wait_Time: a selected port attaches at once (Linux waits
//!   2 s so that ports coming up together attach together; nothing relies
//!   on it).
//! * One aggregator per [`Aggregator`]: ports that reach a different
//!   partner stay out (standby) instead of forming a second group.
//! * Partner "admin" defaults are all zero; a defaulted port is never
//!   selected (no fallback to static aggregation).
//! * No Marker protocol, no churn detection, no version 2 TLVs.

use std::time::{Duration, Instant};

use wire::lacp::{LacpInfo, LacpState, Lacpdu};

/// Periodic transmission interval when the partner asks for the short
/// timeout (802.1AX-2014 6.4.4, Fast_Periodic_Time).
pub const FAST_PERIODIC_TIME: Duration = Duration::from_secs(1);
/// Periodic transmission interval for a long-timeout partner
/// (Slow_Periodic_Time).
pub const SLOW_PERIODIC_TIME: Duration = Duration::from_secs(30);
/// Partner information expires after this long without a LACPDU when our
/// TIMEOUT flag is short (Short_Timeout_Time = 3 × fast period).
pub const SHORT_TIMEOUT_TIME: Duration = Duration::from_secs(3);
/// ... and after this long when it is long (Long_Timeout_Time).
pub const LONG_TIMEOUT_TIME: Duration = Duration::from_secs(90);
/// At most this many LACPDUs per [`FAST_PERIODIC_TIME`] (6.4.16).
pub const TX_LIMIT: usize = 3;

/// Whether a port starts the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LacpMode {
    /// Sends LACPDUs whether or not it has heard a partner.
    Active,
    /// Sends only after hearing an active partner.
    Passive,
}

/// Which timeout we ask of the partner (our TIMEOUT flag): it sets how
/// often the *partner* transmits to us, and how soon we give up on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LacpRate {
    /// Partner sends every 1 s; we expire its information after 3 s.
    Fast,
    /// Partner sends every 30 s; we expire its information after 90 s.
    Slow,
}

/// Our side of one port, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActorConfig {
    /// System priority (lower wins; 32768 is the usual default).
    pub system_priority: u16,
    /// System identifier: a MAC address of the switch, the same on every
    /// port of the system.
    pub system: [u8; 6],
    /// Operational key: equal on every port of one aggregation group.
    pub key: u16,
    /// Port priority (lower is preferred).
    pub port_priority: u16,
    /// Port number, unique within the system (LACP port numbers are
    /// conventionally 1-based).
    pub port: u16,
    /// Active or passive.
    pub mode: LacpMode,
    /// Fast or slow.
    pub rate: LacpRate,
}

/// Receive machine state (802.1AX-2014 6.4.12, without INITIALIZE and
/// LACP_DISABLED, which the caller expresses by not creating the port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxState {
    /// Link down: nothing received, nothing sent.
    Disabled,
    /// Partner information is fresh.
    Current,
    /// No LACPDU for the timeout: partner treated as out of sync, one more
    /// short timeout before it is forgotten.
    Expired,
    /// No partner: default (zero) partner information.
    Defaulted,
}

impl RxState {
    /// Lower-case name for `show`.
    pub fn name(self) -> &'static str {
        match self {
            RxState::Disabled => "disabled",
            RxState::Current => "current",
            RxState::Expired => "expired",
            RxState::Defaulted => "defaulted",
        }
    }
}

/// Mux machine state (802.1AX-2014 6.4.15, coupled control; WAITING is
/// not used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MuxState {
    /// Not selected: not in sync, no traffic.
    Detached,
    /// Selected and in sync; waiting for the partner to be in sync.
    Attached,
    /// Both ends in sync: collecting, and distributing while the partner
    /// is collecting.
    CollectingDistributing,
}

impl MuxState {
    /// Lower-case name for `show`.
    pub fn name(self) -> &'static str {
        match self {
            MuxState::Detached => "detached",
            MuxState::Attached => "attached",
            MuxState::CollectingDistributing => "collecting-distributing",
        }
    }
}

/// Per-port counters (the names of IEEE 802.1AX 7.3.3 in brackets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LacpCounters {
    /// LACPDUs accepted (`aAggPortStatsLACPDUsRx`).
    pub pdus_rx: u64,
    /// LACPDUs returned by `poll` for sending (`aAggPortStatsLACPDUsTx`).
    pub pdus_tx: u64,
    /// Frames given to `receive_frame` that did not parse as a LACPDU
    /// (`aAggPortStatsIllegalRx` + `UnknownRx`).
    pub bad_rx: u64,
    /// Times the partner information expired (current → expired).
    pub timeouts: u64,
}

/// The identity of the far end of an aggregation group: links whose
/// partners have the same `PartnerId` may be aggregated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartnerId {
    /// Partner system priority.
    pub system_priority: u16,
    /// Partner system identifier.
    pub system: [u8; 6],
    /// Partner operational key.
    pub key: u16,
}

impl PartnerId {
    fn of(info: &LacpInfo) -> PartnerId {
        PartnerId {
            system_priority: info.system_priority,
            system: info.system,
            key: info.key,
        }
    }
}

/// The LACP state of one port. Create it with [`LacpPort::new`], report
/// carrier changes with [`link_up`](LacpPort::link_up) /
/// [`link_down`](LacpPort::link_down) (a new port is down), feed it every
/// LACPDU received on the port, and call [`poll`](LacpPort::poll) at
/// [`next_deadline`](LacpPort::next_deadline) and after every event to get
/// the PDUs to send.
#[derive(Debug, Clone)]
pub struct LacpPort {
    cfg: ActorConfig,
    link: bool,
    rx: RxState,
    /// Partner_Oper information: from the last LACPDU, or zero defaults.
    partner: LacpInfo,
    /// `partner` came from a LACPDU (else it is the defaults).
    partner_recorded: bool,
    /// A LACPDU was received since the link came up.
    heard: bool,
    /// When the partner information expires (receive machine timer).
    current_while: Option<Instant>,
    /// When the periodic machine next asks for a transmission.
    periodic_at: Option<Instant>,
    /// Need To Transmit, and since when.
    ntt: Option<Instant>,
    /// Times of the last [`TX_LIMIT`] transmissions (ring, oldest at
    /// `tx_next`).
    tx_times: [Option<Instant>; TX_LIMIT],
    tx_next: usize,
    /// Left out by the aggregator (another partner is in use).
    standby: bool,
    /// Held out of the group by the switch (a virtual-switch secondary in
    /// dual-active): never selected, so it tells the partner it is out
    /// of sync and neither collects nor distributes.
    held: bool,
    mux: MuxState,
    actor_state: LacpState,
    counters: LacpCounters,
}

impl LacpPort {
    /// A port whose link is down. Nothing is sent until
    /// [`link_up`](Self::link_up).
    pub fn new(cfg: ActorConfig) -> LacpPort {
        let mut p = LacpPort {
            cfg,
            link: false,
            rx: RxState::Disabled,
            partner: LacpInfo::default(),
            partner_recorded: false,
            heard: false,
            current_while: None,
            periodic_at: None,
            ntt: None,
            tx_times: [None; TX_LIMIT],
            tx_next: 0,
            standby: false,
            held: false,
            mux: MuxState::Detached,
            actor_state: LacpState::empty(),
            counters: LacpCounters::default(),
        };
        p.actor_state = p.compute_actor_state();
        p
    }

    /// The configuration.
    pub fn config(&self) -> &ActorConfig {
        &self.cfg
    }

    /// Carrier came up: the receive machine goes to EXPIRED (partner out
    /// of sync, short timeout), so an active port sends a LACPDU at once
    /// and every second until it hears a partner or defaults 3 s later.
    /// Nothing happens if the link was already up.
    pub fn link_up(&mut self, now: Instant) {
        if self.link {
            return;
        }
        self.link = true;
        self.enter_expired(now);
        self.settle(now);
    }

    /// Carrier is up and the port carries on where a predecessor (the
    /// image before a `lanyard restart`) left it: `partner` is what that
    /// image last recorded (its SYNCHRONIZATION flag about us, since our
    /// identity is unchanged), taken as if its LACPDU had just arrived, so
    /// the port is selected and its mux state follows at once, and the
    /// next LACPDU tells the partner nothing has changed. If the partner
    /// did change meanwhile, its next LACPDU corrects everything as usual.
    /// Ignored if the link is already up.
    pub fn resume(&mut self, partner: LacpInfo, now: Instant) {
        if self.link {
            return;
        }
        self.link = true;
        self.partner = partner;
        self.partner_recorded = true;
        self.heard = true;
        self.rx = RxState::Current;
        self.current_while = Some(now + self.timeout());
        // One LACPDU at once: the partner's timer restarts from now.
        self.periodic_at = Some(now + self.period());
        self.need_to_transmit(now);
        self.settle(now);
    }

    /// Carrier went down: the port stops collecting and distributing at
    /// once, and nothing is sent. The partner information is kept (for
    /// `show`) but no longer current.
    pub fn link_down(&mut self) {
        self.link = false;
        self.heard = false;
        self.rx = RxState::Disabled;
        self.partner.state.remove(LacpState::SYNCHRONIZATION);
        self.current_while = None;
        self.periodic_at = None;
        self.ntt = None;
        self.update();
    }

    /// A LACPDU received on this port. Ignored while the link is down.
    pub fn receive(&mut self, pdu: &Lacpdu, now: Instant) {
        if self.record(pdu, now) {
            self.settle(now);
        }
    }

    /// A frame received on this port with the Slow Protocols EtherType:
    /// parsed with [`wire::lacp::parse_frame`]; a frame that does not parse
    /// counts in [`LacpCounters::bad_rx`] and is returned as the error.
    pub fn receive_frame(&mut self, frame: &[u8], now: Instant) -> Result<(), wire::Error> {
        match wire::lacp::parse_frame(frame) {
            Ok(pdu) => {
                self.receive(&pdu, now);
                Ok(())
            }
            Err(e) => {
                self.counters.bad_rx += 1;
                Err(e)
            }
        }
    }

    /// Advances the timers to `now` and returns the LACPDU to send now, if
    /// any (at most one per call; call again until `None` if several
    /// events piled up). Build the frame with
    /// [`wire::lacp::build_frame`] and the port's own MAC address.
    pub fn poll(&mut self, now: Instant) -> Option<Lacpdu> {
        self.tick(now);
        self.settle(now);
        self.transmit(now)
    }

    /// The next instant at which [`poll`](Self::poll) has something to do
    /// (a timer expires, or a pending transmission is allowed by the rate
    /// limit); `None` when only an external event can change anything. It
    /// may be in the past: poll at once.
    pub fn next_deadline(&self) -> Option<Instant> {
        let ntt = self.ntt.map(|since| match self.tx_free_at() {
            Some(free) => since.max(free),
            None => since,
        });
        let periodic = if self.may_transmit() {
            self.periodic_at
        } else {
            None
        };
        [self.current_while, periodic, ntt]
            .into_iter()
            .flatten()
            .min()
    }

    /// The carrier is up (as last reported).
    pub fn link_is_up(&self) -> bool {
        self.link
    }

    /// Receive machine state.
    pub fn rx_state(&self) -> RxState {
        self.rx
    }

    /// Mux machine state.
    pub fn mux_state(&self) -> MuxState {
        self.mux
    }

    /// The port may be aggregated: link up, a partner heard since the link
    /// came up whose information is current or expired but not yet
    /// defaulted, and the partner is not this system (a loop).
    pub fn selectable(&self) -> bool {
        self.link
            && self.heard
            && matches!(self.rx, RxState::Current | RxState::Expired)
            && self.partner.system != self.cfg.system
    }

    /// Selectable and accepted by the aggregator.
    pub fn selected(&self) -> bool {
        self.selectable() && !self.standby && !self.held
    }

    /// Held out of the group by the switch (see [`Aggregator::hold`]).
    pub fn held(&self) -> bool {
        self.held
    }

    /// Selectable but left out by the [`Aggregator`] because its partner
    /// differs from the one the aggregator uses.
    pub fn standby(&self) -> bool {
        self.selectable() && self.standby
    }

    /// Frames received on the port may be accepted.
    pub fn collecting(&self) -> bool {
        self.mux == MuxState::CollectingDistributing
    }

    /// Frames may be sent on the port: collecting, and the partner says it
    /// is collecting too.
    pub fn distributing(&self) -> bool {
        self.collecting() && self.partner.state.collecting()
    }

    /// The partner's information as last received (its SYNCHRONIZATION
    /// flag is set only if the partner is in sync *with us as we are now*,
    /// 802.1AX-2014 6.4.9 recordPDU); `None` when defaulted or never heard.
    pub fn partner(&self) -> Option<LacpInfo> {
        self.partner_recorded.then_some(self.partner)
    }

    /// Our state flags, as the next LACPDU will carry them.
    pub fn actor_state(&self) -> LacpState {
        self.actor_state
    }

    /// Our information, as the next LACPDU will carry it.
    pub fn actor(&self) -> LacpInfo {
        LacpInfo {
            system_priority: self.cfg.system_priority,
            system: self.cfg.system,
            key: self.cfg.key,
            port_priority: self.cfg.port_priority,
            port: self.cfg.port,
            state: self.actor_state,
        }
    }

    /// Counters.
    pub fn counters(&self) -> LacpCounters {
        self.counters
    }

    // ---- internals -------------------------------------------------------

    fn partner_id(&self) -> PartnerId {
        PartnerId::of(&self.partner)
    }

    fn timeout(&self) -> Duration {
        match self.cfg.rate {
            LacpRate::Fast => SHORT_TIMEOUT_TIME,
            LacpRate::Slow => LONG_TIMEOUT_TIME,
        }
    }

    /// Periodic transmission happens (and NTT is honoured) only with the
    /// link up and at least one end active (6.4.13, 6.4.16).
    fn may_transmit(&self) -> bool {
        self.link && (self.cfg.mode == LacpMode::Active || self.partner.state.activity())
    }

    fn enter_expired(&mut self, now: Instant) {
        let was_short = self.partner.state.short_timeout();
        self.rx = RxState::Expired;
        self.partner.state.remove(LacpState::SYNCHRONIZATION);
        self.partner.state.insert(LacpState::TIMEOUT);
        self.current_while = Some(now + SHORT_TIMEOUT_TIME);
        if !was_short {
            self.hurry_periodic(now);
        }
    }

    /// The partner now asks for the short timeout: if we were on the slow
    /// period, transmit now rather than at its end (SLOW_PERIODIC →
    /// PERIODIC_TX, 6.4.13).
    fn hurry_periodic(&mut self, now: Instant) {
        if let Some(at) = self.periodic_at {
            if at > now + FAST_PERIODIC_TIME {
                self.periodic_at = Some(now);
            }
        }
    }

    /// recordPDU and update_NTT (6.4.9); selection and the mux follow in
    /// `settle`. Returns whether the PDU was taken (not while down).
    fn record(&mut self, pdu: &Lacpdu, now: Instant) -> bool {
        if !self.link {
            return false;
        }
        self.counters.pdus_rx += 1;
        let actor = self.actor();
        // The partner's view of us matches our identity and aggregation
        // flag: its SYNCHRONIZATION is about us. An Individual partner's
        // SYNCHRONIZATION counts as is.
        let matched = pdu.partner.port == actor.port
            && pdu.partner.port_priority == actor.port_priority
            && pdu.partner.system == actor.system
            && pdu.partner.system_priority == actor.system_priority
            && pdu.partner.key == actor.key
            && pdu.partner.state.aggregation() == actor.state.aggregation();
        let mut partner = pdu.actor;
        let in_sync = partner.state.synchronization() && (matched || !partner.state.aggregation());
        partner.state.set(LacpState::SYNCHRONIZATION, in_sync);

        let was_short = self.partner.state.short_timeout();
        self.partner = partner;
        self.partner_recorded = true;
        self.heard = true;
        self.rx = RxState::Current;
        self.current_while = Some(now + self.timeout());
        if partner.state.short_timeout() && !was_short {
            self.hurry_periodic(now);
        }

        // update_NTT: the partner has stale information about us.
        const TX_FLAGS: u8 = LacpState::ACTIVITY.0
            | LacpState::TIMEOUT.0
            | LacpState::AGGREGATION.0
            | LacpState::SYNCHRONIZATION.0;
        let view_ok = matched && (pdu.partner.state.0 ^ actor.state.0) & TX_FLAGS == 0;
        if !view_ok {
            self.need_to_transmit(now);
        }
        true
    }

    /// Receive-machine and periodic timers.
    fn tick(&mut self, now: Instant) {
        if let Some(at) = self.current_while {
            if now >= at {
                match self.rx {
                    RxState::Current => {
                        self.counters.timeouts += 1;
                        self.enter_expired(now);
                    }
                    RxState::Expired => {
                        self.rx = RxState::Defaulted;
                        self.partner = LacpInfo::default();
                        self.partner_recorded = false;
                        self.heard = false;
                        self.current_while = None;
                    }
                    RxState::Disabled | RxState::Defaulted => self.current_while = None,
                }
            }
        }
        if self.may_transmit() {
            if let Some(at) = self.periodic_at {
                if now >= at {
                    self.need_to_transmit(now);
                    self.periodic_at = Some(now + self.period());
                }
            }
        }
    }

    fn period(&self) -> Duration {
        if self.partner.state.short_timeout() {
            FAST_PERIODIC_TIME
        } else {
            SLOW_PERIODIC_TIME
        }
    }

    fn need_to_transmit(&mut self, now: Instant) {
        if self.may_transmit() && self.ntt.is_none() {
            self.ntt = Some(now);
        }
    }

    /// Selection result → mux → actor flags; a changed actor state needs a
    /// transmission. Also starts or stops the periodic machine.
    fn settle(&mut self, now: Instant) {
        if self.update() {
            self.need_to_transmit(now);
        }
        if self.may_transmit() {
            if self.periodic_at.is_none() {
                // NO_PERIODIC → FAST_PERIODIC (6.4.13).
                self.periodic_at = Some(now + FAST_PERIODIC_TIME);
            }
        } else {
            self.periodic_at = None;
            self.ntt = None;
        }
    }

    /// Recomputes the mux state and actor flags; returns whether the actor
    /// flags changed.
    fn update(&mut self) -> bool {
        self.mux = if !self.selected() {
            MuxState::Detached
        } else if self.partner.state.synchronization() {
            MuxState::CollectingDistributing
        } else {
            MuxState::Attached
        };
        let state = self.compute_actor_state();
        let changed = state != self.actor_state;
        self.actor_state = state;
        changed
    }

    fn compute_actor_state(&self) -> LacpState {
        let mut s = LacpState::AGGREGATION;
        s.set(LacpState::ACTIVITY, self.cfg.mode == LacpMode::Active);
        s.set(LacpState::TIMEOUT, self.cfg.rate == LacpRate::Fast);
        s.set(LacpState::SYNCHRONIZATION, self.mux != MuxState::Detached);
        s.set(LacpState::COLLECTING, self.collecting());
        s.set(LacpState::DISTRIBUTING, self.distributing());
        s.set(LacpState::DEFAULTED, !self.partner_recorded);
        s.set(LacpState::EXPIRED, self.rx == RxState::Expired);
        s
    }

    /// When the rate limit next allows a transmission; `None` if it allows
    /// one at any time.
    fn tx_free_at(&self) -> Option<Instant> {
        self.tx_times[self.tx_next].map(|t| t + FAST_PERIODIC_TIME)
    }

    fn transmit(&mut self, now: Instant) -> Option<Lacpdu> {
        self.ntt?;
        if !self.may_transmit() {
            self.ntt = None;
            return None;
        }
        if self.tx_free_at().is_some_and(|free| now < free) {
            return None;
        }
        self.ntt = None;
        self.tx_times[self.tx_next] = Some(now);
        self.tx_next = (self.tx_next + 1) % TX_LIMIT;
        self.counters.pdus_tx += 1;
        Some(Lacpdu {
            actor: self.actor(),
            partner: self.partner,
            collector_max_delay: 0,
        })
    }
}

/// What a switch about to `exec` a new image (`lanyard restart`) leaves
/// for it per distributing member: its identity as the partner knows it
/// and the partner as last recorded. The new image resumes a member with
/// it ([`Aggregator::resume`]) only if the member's own identity is still
/// the same, so a changed configuration joins afresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedPort {
    pub channel: String,
    pub member: String,
    pub actor: LacpInfo,
    pub partner: LacpInfo,
}

impl SavedPort {
    /// One line: `channel member` then actor and partner as
    /// `system_priority system key port_priority port state` (state only
    /// for the partner; hexadecimal).
    pub fn to_line(&self) -> String {
        let info = |i: &LacpInfo| {
            let m = i.system;
            format!(
                "{:x} {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} {:x} {:x} {:x}",
                i.system_priority,
                m[0],
                m[1],
                m[2],
                m[3],
                m[4],
                m[5],
                i.key,
                i.port_priority,
                i.port
            )
        };
        format!(
            "{} {} {} {} {:x}",
            self.channel,
            self.member,
            info(&self.actor),
            info(&self.partner),
            self.partner.state.0
        )
    }

    /// Parses [`to_line`](Self::to_line); `None` for anything else (the
    /// member then joins afresh).
    pub fn parse_line(line: &str) -> Option<SavedPort> {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() != 13 {
            return None;
        }
        let num = |s: &str| u16::from_str_radix(s, 16).ok();
        let mac = |s: &str| {
            let mut m = [0u8; 6];
            let mut parts = s.split(':');
            for b in &mut m {
                *b = u8::from_str_radix(parts.next()?, 16).ok()?;
            }
            parts.next().is_none().then_some(m)
        };
        let info = |g: &[&str]| {
            Some(LacpInfo {
                system_priority: num(g[0])?,
                system: mac(g[1])?,
                key: num(g[2])?,
                port_priority: num(g[3])?,
                port: num(g[4])?,
                state: LacpState::empty(),
            })
        };
        let mut partner = info(&f[7..12])?;
        partner.state = LacpState(u8::from_str_radix(f[12], 16).ok()?);
        Some(SavedPort {
            channel: f[0].to_string(),
            member: f[1].to_string(),
            actor: info(&f[2..7])?,
            partner,
        })
    }
}

/// Whether `a` and `b` name the same port of the same system (the state
/// flags aside).
pub fn same_identity(a: &LacpInfo, b: &LacpInfo) -> bool {
    (a.system_priority, a.system, a.key, a.port_priority, a.port)
        == (b.system_priority, b.system, b.key, b.port_priority, b.port)
}

/// The ports of one link aggregation group and the choice of which of them
/// carry traffic (Selection Logic, 802.1AX-2014 6.4.14, simplified to one
/// aggregator).
///
/// Every selectable port (partner information current, no loop) whose
/// partner has the aggregator's [`PartnerId`] and whose own key is the key
/// of the aggregator is selected; the others stay in standby. The
/// aggregator's partner is kept as long as one selectable port still
/// reaches it, so a port coming up towards another device does not take
/// the group away from working links; when none does, it becomes the
/// partner of the selectable port with the lowest (port priority, port
/// number). A partner port that says it is Individual (AGGREGATION clear,
/// as Open vSwitch does in a one-member bond) is selected only alone.
///
/// Give each event to the aggregator (not to the port directly), so that
/// the choice is made again before anything is sent.
#[derive(Debug, Clone)]
pub struct Aggregator {
    ports: Vec<LacpPort>,
    partner: Option<PartnerId>,
}

impl Aggregator {
    /// An aggregator over `ports` (indices into this list are the port
    /// arguments of the other methods).
    pub fn new(ports: Vec<LacpPort>) -> Aggregator {
        Aggregator {
            ports,
            partner: None,
        }
    }

    /// The ports.
    pub fn ports(&self) -> &[LacpPort] {
        &self.ports
    }

    /// One port; `None` out of range.
    pub fn port(&self, i: usize) -> Option<&LacpPort> {
        self.ports.get(i)
    }

    /// The partner the group is formed with, if any port is selected.
    pub fn partner(&self) -> Option<PartnerId> {
        self.partner
    }

    /// Carrier of port `i` came up (ignored out of range).
    pub fn link_up(&mut self, i: usize, now: Instant) {
        if let Some(p) = self.ports.get_mut(i) {
            p.link_up(now);
            self.settle(now);
        }
    }

    /// Carrier of port `i` is up and it resumes with a predecessor's
    /// partner information (see [`LacpPort::resume`]; ignored out of
    /// range).
    pub fn resume(&mut self, i: usize, partner: LacpInfo, now: Instant) {
        if let Some(p) = self.ports.get_mut(i) {
            p.resume(partner, now);
            self.settle(now);
        }
    }

    /// Carrier of port `i` went down: it stops at once; another port may
    /// take over the group (ignored out of range).
    pub fn link_down(&mut self, i: usize, now: Instant) {
        if let Some(p) = self.ports.get_mut(i) {
            p.link_down();
            self.settle(now);
        }
    }

    /// A LACPDU received on port `i`.
    pub fn receive(&mut self, i: usize, pdu: &Lacpdu, now: Instant) {
        if let Some(p) = self.ports.get_mut(i) {
            if p.record(pdu, now) {
                self.settle(now);
            }
        }
    }

    /// A Slow Protocols frame received on port `i` (see
    /// [`LacpPort::receive_frame`]).
    pub fn receive_frame(
        &mut self,
        i: usize,
        frame: &[u8],
        now: Instant,
    ) -> Result<(), wire::Error> {
        let pdu = match wire::lacp::parse_frame(frame) {
            Ok(pdu) => pdu,
            Err(e) => {
                if let Some(p) = self.ports.get_mut(i) {
                    p.counters.bad_rx += 1;
                }
                return Err(e);
            }
        };
        self.receive(i, &pdu, now);
        Ok(())
    }

    /// Advances every port's timers and returns the LACPDUs to send now, as
    /// (port index, PDU), at most one per port.
    pub fn poll(&mut self, now: Instant) -> Vec<(usize, Lacpdu)> {
        for p in &mut self.ports {
            p.tick(now);
        }
        self.settle(now);
        self.ports
            .iter_mut()
            .enumerate()
            .filter_map(|(i, p)| p.transmit(now).map(|pdu| (i, pdu)))
            .collect()
    }

    /// The earliest deadline of any port.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.ports.iter().filter_map(|p| p.next_deadline()).min()
    }

    /// Hold every port out of the group (`on`) or let them back: a held
    /// port is not selected, so its LACPDUs say out of sync and the
    /// partner stops using it (a virtual-switch secondary in dual-active).
    pub fn hold(&mut self, on: bool, now: Instant) {
        if self.ports.iter().all(|p| p.held == on) {
            return;
        }
        for p in &mut self.ports {
            p.held = on;
        }
        self.settle(now);
    }

    /// Indices of the ports frames may be sent on.
    pub fn distributing_ports(&self) -> Vec<usize> {
        self.indices(LacpPort::distributing)
    }

    /// Indices of the ports frames may be received from.
    pub fn collecting_ports(&self) -> Vec<usize> {
        self.indices(LacpPort::collecting)
    }

    /// Indices of the selected ports.
    pub fn selected_ports(&self) -> Vec<usize> {
        self.indices(LacpPort::selected)
    }

    fn indices(&self, f: fn(&LacpPort) -> bool) -> Vec<usize> {
        (0..self.ports.len())
            .filter(|&i| f(&self.ports[i]))
            .collect()
    }

    /// Selection, then every port's mux and transmit needs.
    fn settle(&mut self, now: Instant) {
        self.select();
        for p in &mut self.ports {
            p.settle(now);
        }
    }

    fn select(&mut self) {
        let candidates: Vec<usize> = (0..self.ports.len())
            .filter(|&i| self.ports[i].selectable())
            .collect();
        let rank = |i: usize| (self.ports[i].cfg.port_priority, self.ports[i].cfg.port, i);
        // Keep the current partner while some port still reaches it.
        let keep = self.partner.filter(|id| {
            candidates
                .iter()
                .any(|&i| self.ports[i].partner_id() == *id)
        });
        let lead = match keep {
            Some(id) => candidates
                .iter()
                .copied()
                .filter(|&i| self.ports[i].partner_id() == id)
                .min_by_key(|&i| rank(i)),
            None => candidates.iter().copied().min_by_key(|&i| rank(i)),
        };
        let Some(lead) = lead else {
            self.partner = None;
            for p in &mut self.ports {
                p.standby = false;
            }
            return;
        };
        let id = self.ports[lead].partner_id();
        let key = self.ports[lead].cfg.key;
        let lead_individual = !self.ports[lead].partner.state.aggregation();
        self.partner = Some(id);
        for (i, p) in self.ports.iter_mut().enumerate() {
            let joins = i == lead
                || (!lead_individual
                    && p.partner_id() == id
                    && p.cfg.key == key
                    && p.partner.state.aggregation());
            p.standby = !joins;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::lacp::{build_frame, FRAME_LEN};

    const SYS_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
    const SYS_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
    const SYS_C: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0c];

    fn cfg(system: [u8; 6], port: u16, mode: LacpMode, rate: LacpRate) -> ActorConfig {
        ActorConfig {
            system_priority: 32768,
            system,
            key: 1,
            port_priority: 32768,
            port,
            mode,
            rate,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Sends `pdu` from a port with MAC `src` through the wire codec and
    /// back, as the integration will.
    fn over_the_wire(pdu: &Lacpdu) -> Lacpdu {
        let mut f = [0u8; FRAME_LEN];
        let n = build_frame([0x02, 0x99, 0, 0, 0, 1], pdu, &mut f).unwrap();
        wire::lacp::parse_frame(&f[..n]).unwrap()
    }

    /// Two aggregators joined by links `links[k] = (port on A, port on B)`,
    /// on simulated time, driven by `next_deadline` (so a wrong deadline
    /// shows as wrong timing or as a stall).
    struct Net {
        a: Aggregator,
        b: Aggregator,
        links: Vec<(usize, usize)>,
        /// Link k delivers A → B / B → A.
        deliver_ab: Vec<bool>,
        deliver_ba: Vec<bool>,
        now: Instant,
        /// PDUs sent by A and B on each link, with their send times.
        sent_a: Vec<Vec<Instant>>,
        sent_b: Vec<Vec<Instant>>,
    }

    impl Net {
        fn new(a: Vec<LacpPort>, b: Vec<LacpPort>, links: Vec<(usize, usize)>) -> Net {
            let n = links.len();
            Net {
                a: Aggregator::new(a),
                b: Aggregator::new(b),
                links,
                deliver_ab: vec![true; n],
                deliver_ba: vec![true; n],
                now: Instant::now(),
                sent_a: vec![Vec::new(); n],
                sent_b: vec![Vec::new(); n],
            }
        }

        fn pair(a: ActorConfig, b: ActorConfig) -> Net {
            Net::new(vec![LacpPort::new(a)], vec![LacpPort::new(b)], vec![(0, 0)])
        }

        fn all_links_up(&mut self) {
            for k in 0..self.links.len() {
                let (pa, pb) = self.links[k];
                self.a.link_up(pa, self.now);
                self.b.link_up(pb, self.now);
            }
            self.exchange();
        }

        /// Polls both ends at `now` and delivers until quiet.
        fn exchange(&mut self) {
            for _ in 0..100 {
                let from_a = self.a.poll(self.now);
                let from_b = self.b.poll(self.now);
                if from_a.is_empty() && from_b.is_empty() {
                    return;
                }
                for (pa, pdu) in from_a {
                    if let Some(k) = self.links.iter().position(|l| l.0 == pa) {
                        self.sent_a[k].push(self.now);
                        if self.deliver_ab[k] {
                            self.b
                                .receive(self.links[k].1, &over_the_wire(&pdu), self.now);
                        }
                    }
                }
                for (pb, pdu) in from_b {
                    if let Some(k) = self.links.iter().position(|l| l.1 == pb) {
                        self.sent_b[k].push(self.now);
                        if self.deliver_ba[k] {
                            self.a
                                .receive(self.links[k].0, &over_the_wire(&pdu), self.now);
                        }
                    }
                }
            }
            panic!("no quiet point at {:?}", self.now);
        }

        /// Runs until `d` from now, waking at every deadline.
        fn run_for(&mut self, d: Duration) {
            let end = self.now + d;
            let mut wakeups = 0;
            loop {
                let next = [self.a.next_deadline(), self.b.next_deadline()]
                    .into_iter()
                    .flatten()
                    .min();
                match next {
                    Some(t) if t <= end => {
                        // A deadline in the past must be served by the poll
                        // that follows; never move time backwards.
                        self.now = self.now.max(t);
                    }
                    _ => {
                        self.now = end;
                        self.exchange();
                        return;
                    }
                }
                self.exchange();
                wakeups += 1;
                assert!(wakeups < 100_000, "deadline never served at {:?}", self.now);
            }
        }

        fn count_a(&self, k: usize, from: Instant, to: Instant) -> usize {
            self.sent_a[k]
                .iter()
                .filter(|&&t| t > from && t <= to)
                .count()
        }

        fn count_b(&self, k: usize, from: Instant, to: Instant) -> usize {
            self.sent_b[k]
                .iter()
                .filter(|&&t| t > from && t <= to)
                .count()
        }
    }

    fn up(p: &LacpPort) -> bool {
        p.selected() && p.collecting() && p.distributing()
    }

    #[test]
    fn lacp_both_active_come_up_at_once() {
        let mut n = Net::pair(
            cfg(SYS_A, 1, LacpMode::Active, LacpRate::Fast),
            cfg(SYS_B, 7, LacpMode::Active, LacpRate::Fast),
        );
        n.all_links_up();
        // Up at once, in three PDUs each way: hello, in sync, collecting.
        let (a, b) = (&n.a.ports()[0], &n.b.ports()[0]);
        assert!(
            up(a) && up(b),
            "a {:?} b {:?}",
            a.actor_state(),
            b.actor_state()
        );
        assert_eq!((n.sent_a[0].len(), n.sent_b[0].len()), (TX_LIMIT, TX_LIMIT));
        // The fourth, announcing DISTRIBUTING, waits for the transmit limit.
        n.run_for(ms(1_000));
        let (a, b) = (&n.a.ports()[0], &n.b.ports()[0]);
        assert_eq!(a.rx_state(), RxState::Current);
        assert_eq!(a.mux_state(), MuxState::CollectingDistributing);
        let want = LacpState::ACTIVITY
            | LacpState::TIMEOUT
            | LacpState::AGGREGATION
            | LacpState::SYNCHRONIZATION
            | LacpState::COLLECTING
            | LacpState::DISTRIBUTING;
        assert_eq!(a.actor_state(), want);
        assert_eq!(b.actor_state(), want);
        let pa = a.partner().unwrap();
        assert_eq!((pa.system, pa.port, pa.key), (SYS_B, 7, 1));
        assert_eq!(pa.state, want);
        assert_eq!(n.a.distributing_ports(), vec![0]);
        assert_eq!(
            n.a.partner(),
            Some(PartnerId {
                system_priority: 32768,
                system: SYS_B,
                key: 1
            })
        );
        // Stays up on fast periodic PDUs: each side sends about once a second.
        let t0 = n.now;
        n.run_for(Duration::from_secs(60));
        assert!(up(&n.a.ports()[0]) && up(&n.b.ports()[0]));
        let sent = n.count_a(0, t0, n.now);
        assert!((59..=62).contains(&sent), "A sent {sent} in 60 s");
        assert_eq!(n.a.ports()[0].counters().timeouts, 0);
        assert_eq!(n.a.ports()[0].counters().bad_rx, 0);
        assert_eq!(n.a.ports()[0].counters().pdus_rx, n.sent_b[0].len() as u64);
    }

    #[test]
    fn lacp_active_passive_comes_up() {
        for (ma, mb) in [
            (LacpMode::Active, LacpMode::Passive),
            (LacpMode::Passive, LacpMode::Active),
        ] {
            let mut n = Net::pair(
                cfg(SYS_A, 1, ma, LacpRate::Fast),
                cfg(SYS_B, 2, mb, LacpRate::Fast),
            );
            n.all_links_up();
            n.run_for(ms(10));
            assert!(up(&n.a.ports()[0]) && up(&n.b.ports()[0]), "{ma:?}/{mb:?}");
            assert_eq!(
                n.a.ports()[0].actor_state().activity(),
                ma == LacpMode::Active
            );
            // The passive end keeps answering: still up after a minute.
            n.run_for(Duration::from_secs(60));
            assert!(up(&n.a.ports()[0]) && up(&n.b.ports()[0]), "{ma:?}/{mb:?}");
        }
    }

    #[test]
    fn lacp_passive_port_is_silent_until_it_hears_an_active_partner() {
        let mut p = LacpPort::new(cfg(SYS_A, 1, LacpMode::Passive, LacpRate::Fast));
        let t0 = Instant::now();
        p.link_up(t0);
        for s in 0..120 {
            assert_eq!(p.poll(t0 + Duration::from_secs(s)), None);
        }
        assert_eq!(p.rx_state(), RxState::Defaulted);
        assert_eq!(p.next_deadline(), None);
        // A PDU from an active partner: answered at once.
        let t1 = t0 + Duration::from_secs(121);
        let partner = LacpInfo {
            system_priority: 1,
            system: SYS_B,
            key: 9,
            port_priority: 1,
            port: 3,
            state: LacpState::ACTIVITY | LacpState::AGGREGATION,
        };
        p.receive(
            &Lacpdu {
                actor: partner,
                partner: LacpInfo::default(),
                collector_max_delay: 0,
            },
            t1,
        );
        let reply = p.poll(t1).expect("answers an active partner");
        assert_eq!(reply.partner, partner);
        assert!(reply.actor.state.synchronization());
        assert!(!reply.actor.state.activity());
    }

    #[test]
    fn lacp_passive_passive_never_comes_up() {
        let mut n = Net::pair(
            cfg(SYS_A, 1, LacpMode::Passive, LacpRate::Fast),
            cfg(SYS_B, 2, LacpMode::Passive, LacpRate::Fast),
        );
        n.all_links_up();
        n.run_for(Duration::from_secs(300));
        assert!(n.sent_a[0].is_empty() && n.sent_b[0].is_empty());
        for p in [&n.a.ports()[0], &n.b.ports()[0]] {
            assert!(!p.selected() && !p.collecting() && !p.distributing());
            assert_eq!(p.rx_state(), RxState::Defaulted);
            assert!(p.actor_state().defaulted());
            assert_eq!(p.partner(), None);
        }
    }

    /// Our TIMEOUT flag sets how fast the *partner* sends; the partner's
    /// sets how fast we send.
    #[test]
    fn lacp_fast_and_slow_rates_set_the_partners_period() {
        let mut n = Net::pair(
            cfg(SYS_A, 1, LacpMode::Active, LacpRate::Fast),
            cfg(SYS_B, 2, LacpMode::Active, LacpRate::Slow),
        );
        n.all_links_up();
        n.run_for(Duration::from_secs(5));
        assert!(up(&n.a.ports()[0]) && up(&n.b.ports()[0]));
        assert!(n.a.ports()[0].actor_state().short_timeout());
        assert!(!n.b.ports()[0].actor_state().short_timeout());
        let t0 = n.now;
        n.run_for(Duration::from_secs(300));
        let (from_a, from_b) = (n.count_a(0, t0, n.now), n.count_b(0, t0, n.now));
        // A (partner slow) every 30 s, B (partner fast) every second.
        assert!((9..=11).contains(&from_a), "A sent {from_a} in 300 s");
        assert!((299..=301).contains(&from_b), "B sent {from_b} in 300 s");
        assert!(up(&n.a.ports()[0]) && up(&n.b.ports()[0]));
        assert_eq!(n.a.ports()[0].counters().timeouts, 0);
        assert_eq!(n.b.ports()[0].counters().timeouts, 0);

        // Both slow: 30 s each way, and still up after 10 minutes (90 s
        // timeout, PDUs every 30 s).
        let mut n = Net::pair(
            cfg(SYS_A, 1, LacpMode::Active, LacpRate::Slow),
            cfg(SYS_B, 2, LacpMode::Active, LacpRate::Slow),
        );
        n.all_links_up();
        let t0 = n.now + Duration::from_secs(5);
        n.run_for(Duration::from_secs(605));
        assert!(up(&n.a.ports()[0]) && up(&n.b.ports()[0]));
        let from_a = n.count_a(0, t0, n.now);
        assert!((19..=21).contains(&from_a), "A sent {from_a} in 600 s");
    }

    /// A partner switching to the short timeout gets a PDU at once, not at
    /// the end of our 30 s period.
    #[test]
    fn lacp_partner_switching_to_fast_is_answered_at_once() {
        let mut n = Net::pair(
            cfg(SYS_A, 1, LacpMode::Active, LacpRate::Fast),
            cfg(SYS_B, 2, LacpMode::Active, LacpRate::Slow),
        );
        n.all_links_up();
        n.run_for(Duration::from_secs(10));
        let t0 = n.now;
        assert_eq!(n.count_a(0, t0 - Duration::from_secs(8), t0), 0);
        n.b.ports[0].cfg.rate = LacpRate::Fast;
        n.run_for(ms(1));
        assert_eq!(
            n.count_a(0, t0, n.now),
            1,
            "answered within the millisecond"
        );
        let t1 = n.now;
        n.run_for(Duration::from_secs(10));
        assert_eq!(n.count_a(0, t1, n.now), 10, "then every second");
        assert!(up(&n.a.ports()[0]) && up(&n.b.ports()[0]));
    }

    #[test]
    fn lacp_fast_partner_times_out_after_3_s() {
        let mut n = Net::pair(
            cfg(SYS_A, 1, LacpMode::Active, LacpRate::Fast),
            cfg(SYS_B, 2, LacpMode::Active, LacpRate::Fast),
        );
        n.all_links_up();
        n.run_for(Duration::from_secs(10));
        assert!(up(&n.a.ports()[0]));
        // B's PDUs stop reaching A (a unidirectional failure).
        n.deliver_ba[0] = false;
        let last_rx = *n.sent_b[0].last().unwrap();
        n.run_for(ms(2_900) - (n.now - last_rx).min(ms(2_900)));
        assert!(up(&n.a.ports()[0]), "still current just before 3 s");
        n.run_for(ms(200));
        let a = &n.a.ports()[0];
        assert_eq!(a.rx_state(), RxState::Expired);
        assert!(
            !a.collecting() && !a.distributing(),
            "{:?}",
            a.actor_state()
        );
        assert!(a.selected(), "selected until defaulted");
        assert!(a.actor_state().expired());
        assert_eq!(a.counters().timeouts, 1);
        // 3 s later the partner is forgotten.
        n.run_for(Duration::from_secs(3));
        let a = &n.a.ports()[0];
        assert_eq!(a.rx_state(), RxState::Defaulted);
        assert!(!a.selected());
        assert_eq!(a.mux_state(), MuxState::Detached);
        assert_eq!(a.partner(), None);
        assert!(a.actor_state().defaulted() && !a.actor_state().expired());
        assert!(n.a.distributing_ports().is_empty());
        assert_eq!(n.a.partner(), None);
        // B hears that A is out of sync and stops distributing too.
        assert!(!n.b.ports()[0].distributing());
        // Repair: back up within a second.
        n.deliver_ba[0] = true;
        n.run_for(Duration::from_secs(2));
        assert!(up(&n.a.ports()[0]) && up(&n.b.ports()[0]));
    }

    #[test]
    fn lacp_slow_partner_times_out_after_90_s() {
        let mut n = Net::pair(
            cfg(SYS_A, 1, LacpMode::Active, LacpRate::Slow),
            cfg(SYS_B, 2, LacpMode::Active, LacpRate::Slow),
        );
        n.all_links_up();
        n.run_for(Duration::from_secs(40));
        n.deliver_ba[0] = false;
        let last_rx = *n.sent_b[0].last().unwrap();
        n.run_for(Duration::from_secs(89) - (n.now - last_rx));
        assert_eq!(n.a.ports()[0].rx_state(), RxState::Current);
        n.run_for(Duration::from_secs(2));
        assert_eq!(n.a.ports()[0].rx_state(), RxState::Expired);
        // While expired, A asks itself for the short timeout: it transmits
        // every second to the silent partner.
        let t0 = n.now;
        n.run_for(ms(2_500));
        assert!(n.count_a(0, t0, n.now) >= 2);
    }

    #[test]
    fn lacp_partner_out_of_sync_stops_distributing() {
        let mut n = Net::pair(
            cfg(SYS_A, 1, LacpMode::Active, LacpRate::Fast),
            cfg(SYS_B, 2, LacpMode::Active, LacpRate::Fast),
        );
        n.all_links_up();
        // Past the first second, so that the transmit limit allows a PDU.
        let t = n.now + ms(1_500);
        let a = &mut n.a;
        let b = n.b.ports()[0].actor();
        let echo = a.ports()[0].actor();
        // The partner drops SYNCHRONIZATION (e.g. its aggregator changed).
        let mut out = b;
        out.state
            .remove(LacpState::SYNCHRONIZATION | LacpState::COLLECTING | LacpState::DISTRIBUTING);
        a.receive(
            0,
            &Lacpdu {
                actor: out,
                partner: echo,
                collector_max_delay: 0,
            },
            t,
        );
        let p = &a.ports()[0];
        assert!(p.selected() && !p.collecting() && !p.distributing());
        assert_eq!(p.mux_state(), MuxState::Attached);
        assert!(p.actor_state().synchronization(), "we stay in sync");
        // Our change is announced at once.
        let sent = a.poll(t);
        assert_eq!(sent.len(), 1);
        assert!(!sent[0].1.actor.state.collecting());

        // Partner in sync but not collecting: we collect, not distribute.
        let mut half = b;
        half.state
            .remove(LacpState::COLLECTING | LacpState::DISTRIBUTING);
        a.receive(
            0,
            &Lacpdu {
                actor: half,
                partner: a.ports()[0].actor(),
                collector_max_delay: 0,
            },
            t + ms(10),
        );
        let p = &a.ports()[0];
        assert!(p.collecting() && !p.distributing());
        assert!(p.actor_state().collecting() && !p.actor_state().distributing());

        // Partner in sync about someone else (its PDU does not echo us):
        // not in sync.
        let mut wrong = a.ports()[0].actor();
        wrong.port = 99;
        a.receive(
            0,
            &Lacpdu {
                actor: b,
                partner: wrong,
                collector_max_delay: 0,
            },
            t + ms(20),
        );
        let p = &a.ports()[0];
        assert!(!p.partner().unwrap().state.synchronization());
        assert!(!p.collecting());
        // And asks to be corrected.
        assert_eq!(a.poll(t + ms(20)).len(), 1);

        // Back in sync.
        a.receive(
            0,
            &Lacpdu {
                actor: b,
                partner: a.ports()[0].actor(),
                collector_max_delay: 0,
            },
            t + ms(30),
        );
        assert!(up(&a.ports()[0]));
    }

    #[test]
    fn lacp_link_down_stops_distributing_at_once() {
        let mut n = Net::new(
            vec![
                LacpPort::new(cfg(SYS_A, 1, LacpMode::Active, LacpRate::Fast)),
                LacpPort::new(cfg(SYS_A, 2, LacpMode::Active, LacpRate::Fast)),
            ],
            vec![
                LacpPort::new(cfg(SYS_B, 1, LacpMode::Active, LacpRate::Fast)),
                LacpPort::new(cfg(SYS_B, 2, LacpMode::Active, LacpRate::Fast)),
            ],
            vec![(0, 0), (1, 1)],
        );
        n.all_links_up();
        n.run_for(Duration::from_secs(2));
        assert_eq!(n.a.distributing_ports(), vec![0, 1]);
        assert_eq!(n.b.distributing_ports(), vec![0, 1]);

        n.a.link_down(0, n.now);
        n.b.link_down(0, n.now);
        let p = &n.a.ports()[0];
        assert!(!p.selected() && !p.collecting() && !p.distributing());
        assert_eq!(p.rx_state(), RxState::Disabled);
        assert!(!p.actor_state().synchronization());
        assert_eq!(n.a.distributing_ports(), vec![1]);
        assert_eq!(p.next_deadline(), None, "a down port has no timers");
        // Nothing is sent on the down port, the other one carries on.
        let before = n.sent_a[0].len();
        n.run_for(Duration::from_secs(10));
        assert_eq!(n.sent_a[0].len(), before);
        assert_eq!(n.a.distributing_ports(), vec![1]);
        assert_eq!(n.a.ports()[0].counters().timeouts, 0);

        // Back up: in the group again right away.
        n.a.link_up(0, n.now);
        n.b.link_up(0, n.now);
        n.exchange();
        assert_eq!(n.a.distributing_ports(), vec![0, 1]);
        assert_eq!(n.b.distributing_ports(), vec![0, 1]);
    }

    #[test]
    fn lacp_saved_ports_round_trip_and_garbage_is_none() {
        let info = |sys, port, state| LacpInfo {
            system_priority: 32768,
            system: sys,
            key: 3,
            port_priority: 255,
            port,
            state: LacpState(state),
        };
        let s = SavedPort {
            channel: "po1".into(),
            member: "sw2".into(),
            actor: info(SYS_A, 7, 0),
            partner: info(SYS_B, 0x1234, 0x3d),
        };
        let line = s.to_line();
        assert_eq!(SavedPort::parse_line(&line), Some(s.clone()), "{line}");
        for bad in [
            "",
            "po1 sw2",
            &line.replace("02:00", "02:zz"),
            &format!("{line} extra"),
            &line.replace(" 3d", " 1ff"),
            &line.replace(":0a", ":0a:01"),
            "\u{0}\u{0} \u{ff}",
        ] {
            assert_eq!(SavedPort::parse_line(bad), None, "{bad:?}");
        }
        assert!(same_identity(&s.actor, &info(SYS_A, 7, 0x3f)));
        assert!(!same_identity(&s.actor, &info(SYS_A, 8, 0)));
    }

    /// A restarts (a new image, new state machines): resuming each port
    /// with the partner information the old image had recorded keeps both
    /// ends distributing through every exchange, and A's first LACPDU
    /// says in sync; joining afresh instead (link up with no partner)
    /// makes B stop distributing until the group has formed again.
    #[test]
    fn lacp_resume_after_restart_keeps_both_ends_distributing() {
        let ports = |sys| {
            (1..=2)
                .map(|k| LacpPort::new(cfg(sys, k, LacpMode::Active, LacpRate::Fast)))
                .collect::<Vec<_>>()
        };
        for resume in [true, false] {
            let mut n = Net::new(ports(SYS_A), ports(SYS_B), vec![(0, 0), (1, 1)]);
            n.all_links_up();
            n.run_for(Duration::from_secs(2));
            assert_eq!(n.b.distributing_ports(), vec![0, 1]);
            let saved: Vec<LacpInfo> = n.a.ports().iter().map(|p| p.partner().unwrap()).collect();

            n.a = Aggregator::new(ports(SYS_A));
            for (k, partner) in saved.iter().enumerate() {
                if resume {
                    n.a.resume(k, *partner, n.now);
                } else {
                    n.a.link_up(k, n.now);
                }
            }
            if resume {
                assert_eq!(n.a.distributing_ports(), vec![0, 1], "at once");
                assert!(n.a.ports()[0].actor_state().synchronization());
            }
            // A's first LACPDUs reach B before anything else happens.
            for (k, pdu) in n.a.poll(n.now) {
                n.b.receive(k, &over_the_wire(&pdu), n.now);
            }
            let b_kept = n.b.distributing_ports() == vec![0, 1];
            assert_eq!(
                b_kept,
                resume,
                "resume {resume}: B {:?}",
                n.b.distributing_ports()
            );
            for _ in 0..40 {
                n.run_for(ms(50));
                if resume {
                    assert_eq!(n.a.distributing_ports(), vec![0, 1]);
                    assert_eq!(n.b.distributing_ports(), vec![0, 1]);
                }
            }
            assert_eq!(n.a.distributing_ports(), vec![0, 1]);
            assert_eq!(n.b.distributing_ports(), vec![0, 1]);
            if resume {
                // Sent at once, so the partner's timer starts again.
                assert!(n.a.ports()[0].counters().pdus_tx >= 1);
            }
        }
    }

    /// A and B joined by two links, plus a third link from A to another
    /// system C: only the links to one partner are aggregated.
    #[test]
    fn lacp_mismatched_partner_is_not_aggregated() {
        let a_ports = (1..=3)
            .map(|port| LacpPort::new(cfg(SYS_A, port, LacpMode::Active, LacpRate::Fast)))
            .collect();
        // "B" holds B's two ports and C's port; C is a different system
        // (wired as B's index 2 for the test harness).
        let b_ports = vec![
            LacpPort::new(cfg(SYS_B, 1, LacpMode::Active, LacpRate::Fast)),
            LacpPort::new(cfg(SYS_B, 2, LacpMode::Active, LacpRate::Fast)),
            LacpPort::new(cfg(SYS_C, 1, LacpMode::Active, LacpRate::Fast)),
        ];
        let mut n = Net::new(a_ports, b_ports, vec![(0, 0), (1, 1), (2, 2)]);
        // The link to C comes up first and gets the group ...
        n.a.link_up(2, n.now);
        n.b.link_up(2, n.now);
        n.exchange();
        n.run_for(Duration::from_secs(1));
        assert_eq!(n.a.distributing_ports(), vec![2]);
        assert_eq!(n.a.partner().unwrap().system, SYS_C);
        // ... then the links to B: they wait in standby, the working link
        // keeps the group (no flap).
        for i in 0..2 {
            n.a.link_up(i, n.now);
            n.b.link_up(i, n.now);
        }
        n.exchange();
        n.run_for(Duration::from_secs(5));
        assert_eq!(n.a.distributing_ports(), vec![2]);
        assert_eq!(n.a.selected_ports(), vec![2]);
        for i in 0..2 {
            let p = &n.a.ports()[i];
            assert!(p.standby() && !p.selected() && !p.actor_state().synchronization());
            // B sees A out of sync on those links and does not use them.
            assert!(!n.b.ports()[i].collecting());
        }
        // The link to C fails: the group moves to B's two links.
        n.a.link_down(2, n.now);
        n.b.link_down(2, n.now);
        n.run_for(Duration::from_secs(1));
        assert_eq!(n.a.distributing_ports(), vec![0, 1]);
        assert_eq!(n.a.partner().unwrap().system, SYS_B);
        assert_eq!(n.b.distributing_ports(), vec![0, 1]);
        // C returns: it is the one left out now.
        n.a.link_up(2, n.now);
        n.b.link_up(2, n.now);
        n.run_for(Duration::from_secs(5));
        assert_eq!(n.a.distributing_ports(), vec![0, 1]);
        assert!(n.a.ports()[2].standby());
    }

    #[test]
    fn lacp_lowest_port_picks_the_partner_and_keys_must_match() {
        let t = Instant::now();
        let mut ports: Vec<LacpPort> = (1..=3)
            .map(|port| LacpPort::new(cfg(SYS_A, port, LacpMode::Active, LacpRate::Fast)))
            .collect();
        // Port 3 has another key: never aggregated with ports 1 and 2.
        ports[2].cfg.key = 2;
        let mut agg = Aggregator::new(ports);
        for i in 0..3 {
            agg.link_up(i, t);
        }
        // Partner B on ports 2 and 3 (indices 1, 2), partner C on port 1.
        let from = |sys: [u8; 6], port: u16| Lacpdu {
            actor: LacpInfo {
                system_priority: 100,
                system: sys,
                key: 5,
                port_priority: 1,
                port,
                state: LacpState::ACTIVITY | LacpState::AGGREGATION,
            },
            ..Lacpdu::default()
        };
        agg.receive(1, &from(SYS_B, 1), t);
        agg.receive(2, &from(SYS_B, 2), t);
        agg.receive(0, &from(SYS_C, 1), t);
        // Nobody had the group before the first PDU: B (first heard) keeps it.
        assert_eq!(agg.partner().unwrap().system, SYS_B);
        assert_eq!(agg.selected_ports(), vec![1]);
        assert!(agg.ports()[2].standby(), "other key");
        assert!(agg.ports()[0].standby(), "other partner");

        // Same PDUs in another order, all at once, on a fresh aggregator:
        // the lowest port number decides.
        let mut ports: Vec<LacpPort> = (1..=2)
            .map(|port| LacpPort::new(cfg(SYS_A, port, LacpMode::Active, LacpRate::Fast)))
            .collect();
        for p in &mut ports {
            p.link_up(t);
            p.standby = true;
        }
        ports[1].record(&from(SYS_B, 1), t);
        ports[0].record(&from(SYS_C, 1), t);
        let mut agg = Aggregator::new(ports);
        agg.poll(t);
        assert_eq!(agg.partner().unwrap().system, SYS_C);
        assert_eq!(agg.selected_ports(), vec![0]);
    }

    #[test]
    fn lacp_individual_partner_is_selected_alone() {
        let t = Instant::now();
        let mut agg = Aggregator::new(
            (1..=2)
                .map(|port| LacpPort::new(cfg(SYS_A, port, LacpMode::Active, LacpRate::Fast)))
                .collect(),
        );
        agg.link_up(0, t);
        agg.link_up(1, t);
        for (i, port) in [(0, 1), (1, 2)] {
            let pdu = Lacpdu {
                actor: LacpInfo {
                    system_priority: 65535,
                    system: SYS_B,
                    key: 1,
                    port_priority: 65535,
                    port,
                    // Open vSwitch sends AGGREGATION clear in a one-member bond.
                    state: LacpState::ACTIVITY | LacpState::SYNCHRONIZATION,
                },
                partner: agg.ports()[i].actor(),
                collector_max_delay: 0,
            };
            agg.receive(i, &pdu, t);
        }
        assert_eq!(agg.selected_ports(), vec![0]);
        // Individual partner: its SYNCHRONIZATION counts without the echo
        // check, so we go to collecting at once.
        assert!(agg.ports()[0].collecting());
    }

    #[test]
    fn lacp_loop_to_own_system_is_not_selected() {
        let t = Instant::now();
        let mut n = Net::new(
            vec![LacpPort::new(cfg(
                SYS_A,
                1,
                LacpMode::Active,
                LacpRate::Fast,
            ))],
            vec![LacpPort::new(cfg(
                SYS_A,
                2,
                LacpMode::Active,
                LacpRate::Fast,
            ))],
            vec![(0, 0)],
        );
        n.now = t;
        n.all_links_up();
        n.run_for(Duration::from_secs(5));
        assert_eq!(n.a.ports()[0].rx_state(), RxState::Current);
        assert!(!n.a.ports()[0].selected());
        assert!(n.a.distributing_ports().is_empty());
    }

    #[test]
    fn lacp_transmit_limit_is_three_per_second() {
        let t = Instant::now();
        let mut p = LacpPort::new(cfg(SYS_A, 1, LacpMode::Active, LacpRate::Fast));
        p.link_up(t);
        let mut sent = Vec::new();
        // A partner that flaps its key every 10 ms: each PDU needs an answer.
        for k in 0..200u64 {
            let now = t + ms(10 * k);
            let pdu = Lacpdu {
                actor: LacpInfo {
                    system_priority: 1,
                    system: SYS_B,
                    key: (k % 2) as u16,
                    port_priority: 1,
                    port: 1,
                    state: LacpState::ACTIVITY | LacpState::TIMEOUT | LacpState::AGGREGATION,
                },
                ..Lacpdu::default()
            };
            p.receive(&pdu, now);
            while p.poll(now).is_some() {
                sent.push(now);
            }
        }
        assert!(!sent.is_empty());
        for w in sent.windows(TX_LIMIT + 1) {
            assert!(w[TX_LIMIT] - w[0] >= FAST_PERIODIC_TIME, "{w:?}");
        }
        assert_eq!(p.counters().pdus_tx, sent.len() as u64);
        // A pending answer is due when the limit allows it, not before.
        let last = t + ms(1_990);
        assert!(p.next_deadline().unwrap() > last);
    }

    #[test]
    fn lacp_link_up_sends_at_once_then_defaults() {
        let t = Instant::now();
        let mut p = LacpPort::new(cfg(SYS_A, 1, LacpMode::Active, LacpRate::Slow));
        assert_eq!(p.poll(t), None, "link down: silent");
        assert_eq!(p.rx_state(), RxState::Disabled);
        p.link_up(t);
        assert_eq!(p.rx_state(), RxState::Expired);
        let first = p.poll(t).expect("first PDU at link up");
        assert!(first.actor.state.expired() && first.actor.state.defaulted());
        assert!(!first.actor.state.short_timeout(), "slow rate configured");
        // No partner yet: zero information, with the short timeout that the
        // EXPIRED state assumes.
        assert_eq!(
            first.partner,
            LacpInfo {
                state: LacpState::TIMEOUT,
                ..LacpInfo::default()
            }
        );
        assert_eq!(p.poll(t), None);
        // While expired we transmit fast, then default at 3 s.
        assert_eq!(p.next_deadline(), Some(t + FAST_PERIODIC_TIME));
        let mut times = Vec::new();
        let mut now = t;
        while now < t + Duration::from_secs(100) {
            now = p.next_deadline().unwrap().max(now);
            if p.poll(now).is_some() {
                times.push(now - t);
            }
        }
        assert_eq!(p.rx_state(), RxState::Defaulted);
        assert_eq!(
            times[..4],
            [
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(3),
                Duration::from_secs(33)
            ],
            "fast while expired (the last one, at 3 s, says defaulted), \
             then slow: the defaulted partner asks for the long timeout"
        );
        assert_eq!(p.counters().timeouts, 0, "never had a partner to lose");
    }

    #[test]
    fn lacp_bad_frames_are_counted() {
        let t = Instant::now();
        let mut agg = Aggregator::new(vec![LacpPort::new(cfg(
            SYS_A,
            1,
            LacpMode::Active,
            LacpRate::Fast,
        ))]);
        agg.link_up(0, t);
        assert!(agg.receive_frame(0, &[0u8; 20], t).is_err());
        assert!(agg.receive_frame(5, &[0u8; 20], t).is_err());
        let mut f = [0u8; FRAME_LEN];
        let pdu = Lacpdu {
            actor: LacpInfo {
                system: SYS_B,
                state: LacpState::ACTIVITY | LacpState::AGGREGATION,
                ..LacpInfo::default()
            },
            ..Lacpdu::default()
        };
        build_frame(SYS_B, &pdu, &mut f).unwrap();
        assert!(agg.receive_frame(0, &f, t).is_ok());
        let c = agg.ports()[0].counters();
        assert_eq!((c.bad_rx, c.pdus_rx), (1, 1));
        assert!(agg.ports()[0].selected());
    }

    /// A LACPDU frame as Open vSwitch sends it (lib/lacp.c
    /// compose_lacp_pdu) for a two-member bond with `lacp=active` and
    /// `other_config:lacp-time=fast`, once negotiated: version 1,
    /// CollectorMaxDelay 0, all reserved octets zero; system priority,
    /// port priority and key as in OVS's own tests (65535, 65535, the key
    /// member's port id). Our switch is the partner it echoes.
    #[test]
    fn lacp_decodes_an_open_vswitch_pdu_and_comes_up() {
        let t = Instant::now();
        let us = cfg(SYS_A, 3, LacpMode::Active, LacpRate::Fast);
        let mut port = LacpPort::new(us);
        port.link_up(t);
        let _ = port.poll(t);

        #[rustfmt::skip]
        let mut frame: Vec<u8> = vec![
            0x01, 0x80, 0xc2, 0x00, 0x00, 0x02,  // Slow Protocols address
            0xaa, 0x55, 0xaa, 0x55, 0x00, 0x02,  // OVS interface MAC
            0x88, 0x09,                          // Slow Protocols
            0x01, 0x01,                          // LACP, version 1
            0x01, 0x14,                          // actor TLV, 20
            0xff, 0xff,                          //   sys_priority 65535
            0xaa, 0x55, 0xaa, 0x55, 0x00, 0x00,  //   sys_id (bridge MAC)
            0x00, 0x01,                          //   key 1
            0xff, 0xff,                          //   port_priority 65535
            0x00, 0x02,                          //   port_id 2
            0x3f,                                //   ACT TIME AGG SYNC COL DIST
            0x00, 0x00, 0x00,
            0x02, 0x14,                          // partner TLV, 20: us
            0x80, 0x00,                          //   32768
            0x02, 0x00, 0x00, 0x00, 0x00, 0x0a,  //   SYS_A
            0x00, 0x01,                          //   key 1
            0x80, 0x00,                          //   port priority 32768
            0x00, 0x03,                          //   port 3
            0xc7,                                //   our first PDU's state, echoed
            0x00, 0x00, 0x00,
            0x03, 0x10,                          // collector TLV, 16
            0x00, 0x00,                          //   collector_delay 0
        ];
        // z3[64] in OVS's struct: collector reserved, terminator, tail.
        frame.resize(124, 0);

        port.receive_frame(&frame, t + ms(5)).unwrap();
        let partner = port.partner().unwrap();
        assert_eq!(partner.system, [0xaa, 0x55, 0xaa, 0x55, 0x00, 0x00]);
        assert_eq!((partner.system_priority, partner.key), (65535, 1));
        assert_eq!((partner.port_priority, partner.port), (65535, 2));
        assert!(partner.state.synchronization(), "it echoes us correctly");
        assert!(up(&port), "{:?}", port.actor_state());
        // Our answer echoes OVS and shows us collecting and distributing.
        let reply = port.poll(t + ms(5)).expect("state changed");
        assert_eq!(reply.partner, partner);
        assert_eq!(reply.actor.state.bits(), 0x3f);
        // OVS asked for the short timeout: we send every second.
        assert_eq!(port.next_deadline(), Some(t + FAST_PERIODIC_TIME));
    }
}
