//! The pair's role and health (pure: events and the caller's clock in,
//! decisions out).
//!
//! Two liveness signals: hellos over the peer link and keepalives over a
//! separate path. Peer link alive: paired. Peer link dead and keepalive
//! alive: both nodes run (dual-active), so the secondary takes its
//! multichassis members down and the partner keeps seeing one system.
//! Both dead: the peer is gone and this node carries everything. When the
//! peer link returns the secondary waits for a full copy of the peer's
//! state and `delay_restore` before its members come back.

use std::time::{Duration, Instant};
use wire::vswitch::Hello;

/// Which node decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Primary,
    Secondary,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Secondary => "secondary",
        }
    }
}

/// The pair's state as this node sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairStatus {
    /// Started, nothing heard yet (members held down for `delay_restore`).
    Init,
    /// Peer link up: one switch.
    Paired,
    /// Peer link down, keepalive up: both nodes alive.
    DualActive,
    /// Nothing heard from the peer: this node is alone.
    PeerDown,
}

impl PairStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PairStatus::Init => "init",
            PairStatus::Paired => "paired",
            PairStatus::DualActive => "dual-active",
            PairStatus::PeerDown => "peer-down",
        }
    }
}

/// This node's settings.
#[derive(Clone, Debug)]
pub struct PairConfig {
    pub domain: u16,
    pub priority: u16,
    /// This node's id (see [`node_id`]).
    pub node: [u8; 6],
    pub system: [u8; 6],
    /// Hello / keepalive loss timeout.
    pub timeout: Duration,
    pub delay_restore: Duration,
}

/// The node id of a keepalive source address: the low 48 bits, so the
/// lower address wins a priority tie, as configured.
pub fn node_id(ip: std::net::IpAddr) -> [u8; 6] {
    let v: u128 = match ip {
        std::net::IpAddr::V4(a) => u32::from(a) as u128,
        std::net::IpAddr::V6(a) => u128::from(a),
    };
    let b = v.to_be_bytes();
    b[10..16].try_into().unwrap_or_default()
}

/// After a goodbye, the peer's hellos and keepalives are ignored this long:
/// frames it sent before it died may still be queued, and a restarted
/// node takes longer than this to send its first.
pub const GOODBYE_QUIET: Duration = Duration::from_millis(100);

/// What an aggregated peer link gets, beyond `timeout`, to bring a member
/// to distributing while its hellos cross: LACP's short timeout. LACP
/// converges in three exchanges (well under a second, even at its
/// transmit limit of three per second), and a member that flaps comes
/// back within it; a bundle still not distributing after this is refused
/// (same system id on both ends, both passive, a partner mismatch).
pub const BUNDLE_GRACE: Duration = Duration::from_secs(3);

/// What was last heard from the peer.
#[derive(Clone, Copy, Debug)]
struct Heard {
    at: Instant,
    hello: Hello,
}

/// Role and health of the pair.
#[derive(Debug)]
pub struct PairState {
    cfg: PairConfig,
    started: Instant,
    link: Option<Heard>,
    keepalive: Option<Heard>,
    /// When the peer said goodbye: hellos it sent before are ignored for
    /// [`GOODBYE_QUIET`] (a frame still queued must not bring it back).
    gone_at: Option<Instant>,
    /// Goodbyes received.
    pub goodbyes: u64,
    /// Last time the peer link came (back) up (hellos crossing, and an
    /// aggregated link's data path too).
    link_up_since: Option<Instant>,
    /// Since when peer-link hellos arrive without a gap.
    hellos_since: Option<Instant>,
    /// An aggregated peer link: since when none of its members
    /// distributes (`None`: one does, or the link is not aggregated).
    no_data_since: Option<Instant>,
    /// Since when keepalives arrive without a gap.
    keepalive_since: Option<Instant>,
    /// This node's members were carrying traffic when the peer link came
    /// up (it was alone, or the dual-active primary): they stay up
    /// whatever the roles, and the joining node waits instead.
    carrying: bool,
    /// A full copy of the peer's state arrived since the link came up.
    synced: bool,
    /// A new image after `lanyard restart` of a node that was paired with
    /// its members up: it carries on carrying (members up while it waits
    /// for the first hello, and `carrying` when the link comes up) instead
    /// of joining like a starting node. Cleared when the link comes up.
    warm: bool,
    /// Counted refusals.
    pub wrong_domain: u64,
    pub system_mismatch: u64,
    /// Transitions into dual-active.
    pub dual_active_events: u64,
    last_status: PairStatus,
}

impl PairState {
    pub fn new(cfg: PairConfig, now: Instant) -> PairState {
        PairState {
            cfg,
            started: now,
            link: None,
            keepalive: None,
            gone_at: None,
            goodbyes: 0,
            link_up_since: None,
            hellos_since: None,
            no_data_since: None,
            keepalive_since: None,
            carrying: false,
            synced: false,
            warm: false,
            wrong_domain: 0,
            system_mismatch: 0,
            dual_active_events: 0,
            last_status: PairStatus::Init,
        }
    }

    pub fn config(&self) -> &PairConfig {
        &self.cfg
    }

    /// See `warm`: the predecessor image was paired with its members up.
    pub fn warm_start(&mut self) {
        self.warm = true;
    }

    /// Still waiting to hear the peer link after a warm start.
    pub fn is_warm(&self) -> bool {
        self.warm
    }

    /// Our own hello, for the peer link (`peer_link_up` false) or the
    /// keepalive (`peer_link_up`: whether we hear the peer link).
    pub fn hello(&self, now: Instant, seq: u32) -> Hello {
        Hello {
            priority: self.cfg.priority,
            node: self.cfg.node,
            system: self.cfg.system,
            peer_link_up: self.link_alive(now),
            synced: self.synced,
            primary: self.role(now) == Role::Primary,
            seq,
        }
    }

    fn accept(&mut self, domain: u16, h: &Hello) -> bool {
        self.accept_at(None, domain, h)
    }

    fn accept_at(&mut self, now: Option<Instant>, domain: u16, h: &Hello) -> bool {
        if let (Some(now), Some(g)) = (now, self.gone_at) {
            if now.saturating_duration_since(g) < GOODBYE_QUIET {
                return false;
            }
        }
        if domain != self.cfg.domain {
            self.wrong_domain += 1;
            return false;
        }
        if h.system != self.cfg.system {
            // Two different LACP systems must never pair.
            self.system_mismatch += 1;
            return false;
        }
        h.node != self.cfg.node
    }

    /// A hello received on the peer link.
    pub fn peer_link_hello(&mut self, now: Instant, domain: u16, h: Hello) {
        if !self.accept_at(Some(now), domain, &h) {
            return;
        }
        if !self.hellos_alive(now) {
            self.hellos_since = Some(now);
        }
        if !self.link_alive(now) {
            // Decided before the hello changes the status.
            self.link_came_up(now, self.members_enabled(now));
        }
        self.link = Some(Heard { at: now, hello: h });
        self.update(now);
    }

    /// `carrying`: this node's members were up just before.
    fn link_came_up(&mut self, now: Instant, carrying: bool) {
        self.carrying = carrying || self.warm;
        self.warm = false;
        self.link_up_since = Some(now);
        self.synced = false;
    }

    /// An aggregated peer link: whether a member of its bundle distributes
    /// now (called every turn; never for active/standby ports, whose data
    /// follows the link). Hellos cross on any member, distributing or not,
    /// so a bundle LACP refuses (same system id on both nodes, both ends
    /// passive) would leave the pair paired with no data path across: no
    /// member distributing for [`BUNDLE_GRACE`] + `timeout` while hellos
    /// cross is the peer link down for data ([`PairState::data_down`]).
    pub fn peer_link_data(&mut self, now: Instant, distributing: bool) {
        let was = self.link_alive(now);
        let carrying = self.members_enabled(now);
        if distributing {
            self.no_data_since = None;
        } else if self.no_data_since.is_none() {
            self.no_data_since = Some(now);
        }
        if !was && self.link_alive(now) {
            // Data crosses again with hellos crossing all along: a link
            // coming up (the joining node waits for the copy and the delay).
            self.link_came_up(now, carrying);
        }
        self.update(now);
    }

    /// A keepalive received over the separate path.
    pub fn keepalive(&mut self, now: Instant, domain: u16, h: Hello) {
        if !self.accept_at(Some(now), domain, &h) {
            return;
        }
        if !self.keepalive_alive(now) {
            self.keepalive_since = Some(now);
        }
        self.keepalive = Some(Heard { at: now, hello: h });
        self.update(now);
    }

    /// The peer's guardian says its node stopped without a hand-over:
    /// forget both signals now (alone, primary, members up) instead of
    /// waiting for the timeout. Only from the node we last heard, so a
    /// stray or replayed goodbye of a third node changes nothing.
    pub fn goodbye(&mut self, now: Instant, domain: u16, h: Hello) {
        if !self.accept(domain, &h) {
            return;
        }
        // Nothing heard (or already forgotten: the guardian sends three),
        // or another node: nothing to end.
        if self.peer().is_none_or(|(_, p)| p.node != h.node) {
            return;
        }
        self.goodbyes += 1;
        self.gone_at = Some(now);
        self.link = None;
        self.keepalive = None;
        self.keepalive_since = None;
        self.synced = false;
        self.update(now);
    }

    /// A full copy of the peer's state arrived since the link came up.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The full copy of the peer's state is in.
    pub fn synced(&mut self, now: Instant) {
        self.synced = true;
        self.update(now);
    }

    /// Re-evaluates timers; returns the status.
    pub fn update(&mut self, now: Instant) -> PairStatus {
        let s = self.status(now);
        if s == PairStatus::DualActive && self.last_status != PairStatus::DualActive {
            self.dual_active_events += 1;
        }
        if s != PairStatus::Paired {
            self.synced = self.synced && s == PairStatus::Paired;
        }
        self.last_status = s;
        s
    }

    fn alive(&self, h: &Option<Heard>, now: Instant) -> bool {
        h.is_some_and(|h| now.saturating_duration_since(h.at) < self.cfg.timeout)
    }

    /// The peer link is up: hellos cross and (aggregated) data can too.
    pub fn link_alive(&self, now: Instant) -> bool {
        self.hellos_alive(now) && !self.data_down(now)
    }

    /// Peer-link hellos arrive (whether or not data can cross).
    pub fn hellos_alive(&self, now: Instant) -> bool {
        self.alive(&self.link, now)
    }

    /// Hellos cross the peer link but its bundle has had no member
    /// distributing for [`BUNDLE_GRACE`] + `timeout` (counted from when
    /// the hellos came, at the earliest): the link is down for data. Both
    /// nodes are plainly alive, so it is a split (`dual-active`), found by
    /// the hellos themselves, keepalive or not.
    pub fn data_down(&self, now: Instant) -> bool {
        let (Some(t), Some(h)) = (self.no_data_since, self.hellos_since) else {
            return false;
        };
        self.alive(&self.link, now)
            && now.saturating_duration_since(t.max(h)) >= BUNDLE_GRACE + self.cfg.timeout
    }

    pub fn keepalive_alive(&self, now: Instant) -> bool {
        self.alive(&self.keepalive, now)
    }

    /// The peer's last hello (peer link first, then keepalive).
    pub fn peer(&self) -> Option<(Instant, Hello)> {
        match (self.link, self.keepalive) {
            (Some(a), Some(b)) if b.at > a.at => Some((b.at, b.hello)),
            (Some(a), _) => Some((a.at, a.hello)),
            (None, Some(b)) => Some((b.at, b.hello)),
            (None, None) => None,
        }
    }

    pub fn status(&self, now: Instant) -> PairStatus {
        if self.link_alive(now) {
            PairStatus::Paired
        } else if self.data_down(now) || (self.keepalive_alive(now) && self.split(now)) {
            PairStatus::DualActive
        } else if self.link.is_none()
            && self.gone_at.is_none()
            && (now.saturating_duration_since(self.started) < self.cfg.delay_restore
                || (self.keepalive_alive(now) && self.last_status == PairStatus::Init))
        {
            // A starting node that hears the peer's keepalives waits for
            // the peer link (or a split) with its members down: alone
            // (`peer-down`) it would bring them up with an empty table.
            // (A node already alone and carrying stays so.)
            PairStatus::Init
        } else {
            PairStatus::PeerDown
        }
    }

    /// Keepalives without the peer link mean a split only when the link
    /// died while they kept coming, or when it has not come up within a
    /// timeout of their return. A node that (re)starts sends keepalives a
    /// little before its first hello: taken for a split, that made the
    /// survivor (secondary) take its members down, and the returning
    /// primary bring its own up with an empty table.
    fn split(&self, now: Instant) -> bool {
        let Some(since) = self.keepalive_since else {
            return false;
        };
        // A node that has not heard its peer link since it started counts
        // from the end of the restore delay at the earliest: its own
        // ports may take longer than the timeout to attach (819 ms
        // measured under load), and the peer's keepalives arrive from
        // the first moment. Taken for a split, that made the returning
        // node dual-active primary with its members up and an empty
        // table, and every frame it flooded then was delivered twice.
        // Keepalives that came back after the link had gone are a peer
        // (re)starting: the same delay, on the survivor's side (taken for
        // a split, it made the survivor, secondary, take its members
        // down: 1.1 s lost in a lab return trial).
        // A starting node whose peer says it hears our hellos (they go
        // out before this node's own receive path is attached: up to
        // 1.9 s measured under load) is not split, however long that takes.
        let since = match self.link {
            Some(l) if l.at >= since => return true,
            Some(_) => since + self.cfg.delay_restore,
            None if self.keepalive.is_some_and(|k| k.hello.peer_link_up) => return false,
            None => since.max(self.started + self.cfg.delay_restore),
        };
        now.saturating_duration_since(since) >= self.cfg.timeout
    }

    /// Primary unless a live peer has the better (priority, node).
    pub fn role(&self, now: Instant) -> Role {
        let live = [&self.link, &self.keepalive]
            .into_iter()
            .filter(|h| self.alive(h, now))
            .filter_map(|h| h.as_ref())
            .max_by_key(|h| h.at);
        match live {
            Some(p) if (p.hello.priority, p.hello.node) < (self.cfg.priority, self.cfg.node) => {
                Role::Secondary
            }
            _ => Role::Primary,
        }
    }

    /// Whether this node's multichassis members may carry traffic.
    pub fn members_enabled(&self, now: Instant) -> bool {
        match self.status(now) {
            PairStatus::Init => self.warm,
            PairStatus::PeerDown => true,
            PairStatus::DualActive => self.role(now) == Role::Primary,
            PairStatus::Paired => {
                // The node that carried the traffic when the link came up
                // keeps its members, whatever its role: a survivor that
                // took them down for a returning primary would send every
                // stream to a node with an empty table (the rejoin loss
                // the lab measured). The node that joins (after its start,
                // or the dual-active secondary) waits for the peer's full
                // copy and the restore delay, so the partner never sees a
                // member that would forward with an empty table.
                self.carrying
                    || (self.synced
                        && self.link_up_since.is_none_or(|t| {
                            now.saturating_duration_since(t) >= self.cfg.delay_restore
                        }))
            }
        }
    }

    /// Why the members are down, for `show`.
    pub fn members_reason(&self, now: Instant) -> &'static str {
        if self.members_enabled(now) {
            return "up";
        }
        match self.status(now) {
            PairStatus::Init => "down: restore delay after start",
            PairStatus::DualActive => "down: dual-active, secondary",
            _ if !self.synced => "down: waiting for the peer's state",
            _ => "down: restore delay",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn node(prio: u16, id: u8) -> PairConfig {
        PairConfig {
            domain: 7,
            priority: prio,
            node: [0, 0, 0, 0, 0, id],
            system: [2, 0, 0, 0, 7, 0],
            timeout: 1000 * MS,
            delay_restore: 2000 * MS,
        }
    }

    fn hello_of(c: &PairConfig) -> Hello {
        Hello {
            priority: c.priority,
            node: c.node,
            system: c.system,
            peer_link_up: true,
            synced: true,
            primary: false,
            seq: 1,
        }
    }

    /// A warm start (the new image of a planned restart of a paired node
    /// whose members were up) keeps its members up from the first moment
    /// and once paired, without waiting for the peer's copy or the restore
    /// delay; a cold start of the same node waits for both. A warm node
    /// that finds itself secondary in a split still takes its members
    /// down.
    #[test]
    fn a_warm_start_keeps_carrying_and_a_cold_one_waits() {
        let t0 = Instant::now();
        let (a, b) = (node(200, 1), node(100, 2));
        for warm in [true, false] {
            let mut sa = PairState::new(a.clone(), t0);
            if warm {
                sa.warm_start();
            }
            assert_eq!(sa.update(t0), PairStatus::Init);
            assert_eq!(
                sa.members_enabled(t0),
                warm,
                "warm {warm}: before any hello"
            );
            let mut now = t0 + 50 * MS;
            sa.keepalive(now, 7, hello_of(&b));
            sa.peer_link_hello(now, 7, hello_of(&b));
            assert_eq!(sa.update(now), PairStatus::Paired);
            assert_eq!(sa.role(now), Role::Secondary);
            assert_eq!(
                sa.members_enabled(now),
                warm,
                "warm {warm}: paired, no copy yet"
            );
            assert!(!sa.is_warm(), "cleared once the link is up");
            now += 100 * MS;
            sa.synced(now);
            sa.peer_link_hello(now, 7, hello_of(&b));
            assert_eq!(
                sa.members_enabled(now),
                warm,
                "warm {warm}: within the delay"
            );
            now += 2000 * MS;
            sa.peer_link_hello(now, 7, hello_of(&b));
            sa.keepalive(now, 7, hello_of(&b));
            assert!(sa.members_enabled(now));
        }
        // Warm, secondary, and the peer link never comes: keepalives only.
        let mut sw = PairState::new(a, t0);
        sw.warm_start();
        let mut unheard = hello_of(&b);
        unheard.peer_link_up = false;
        let mut now = t0 + 100 * MS;
        while now < t0 + 3500 * MS {
            sw.keepalive(now, 7, unheard);
            sw.update(now);
            now += 100 * MS;
        }
        assert_eq!(sw.status(now), PairStatus::DualActive);
        assert!(!sw.members_enabled(now), "secondary in a split");
    }

    /// A node starting while its peer is alive hears keepalives before
    /// its own ports are attached; its peer link may take longer than
    /// the timeout. It must neither be dual-active nor alone meanwhile
    /// (either brought its members up with an empty table: the lab's
    /// rejoin duplicates), and it waits for the copy once paired.
    #[test]
    fn a_slow_start_hearing_keepalives_waits_for_the_link() {
        let t0 = Instant::now();
        let a = node(100, 1);
        let b = node(200, 2);
        let mut sa = PairState::new(a, t0);
        let mut now = t0 + 100 * MS;
        // Keepalives only (the peer does not hear us either), for longer
        // than the timeout and the delay.
        let mut unheard = hello_of(&b);
        unheard.peer_link_up = false;
        while now < t0 + 2900 * MS {
            sa.keepalive(now, 7, unheard);
            assert_eq!(sa.update(now), PairStatus::Init, "at {:?}", now - t0);
            assert!(!sa.members_enabled(now));
            now += 100 * MS;
        }
        // The peer hears our hellos before we hear its own (our receive
        // path attaches last): never a split, however long it takes.
        let says_heard = hello_of(&b);
        let mut not_heard = hello_of(&b);
        not_heard.peer_link_up = false;
        let mut sx = PairState::new(node(100, 1), t0);
        let mut t = t0 + 100 * MS;
        while t < t0 + 6000 * MS {
            sx.keepalive(
                t,
                7,
                if t < t0 + 500 * MS {
                    not_heard
                } else {
                    says_heard
                },
            );
            assert_eq!(sx.update(t), PairStatus::Init, "at {:?}", t - t0);
            t += 100 * MS;
        }
        // The peer link comes up: paired, members wait for the copy.
        sa.peer_link_hello(now, 7, hello_of(&b));
        assert_eq!(sa.update(now), PairStatus::Paired);
        assert!(!sa.members_enabled(now));
        sa.synced(now);
        now += 2100 * MS;
        sa.peer_link_hello(now, 7, hello_of(&b));
        sa.keepalive(now, 7, hello_of(&b));
        assert!(sa.members_enabled(now));

        // A genuine split at start (link never up) is still found: after
        // the restore delay and the timeout.
        let mut sc = PairState::new(node(100, 1), t0);
        let mut now = t0 + 100 * MS;
        while now < t0 + 3100 * MS {
            sc.keepalive(now, 7, unheard);
            sc.update(now);
            now += 100 * MS;
        }
        assert_eq!(sc.status(now), PairStatus::DualActive);
        assert!(sc.members_enabled(now), "primary");
    }

    /// The survivor hears the returning node's keepalives well before
    /// its first hello (the returning node's ports attach slowly): not a
    /// split, the survivor keeps its members throughout.
    #[test]
    fn a_slow_return_is_not_a_split_for_the_survivor() {
        let t0 = Instant::now();
        let (a, b) = (node(100, 1), node(200, 2));
        let mut sb = PairState::new(b, t0);
        let mut now = t0;
        while now < t0 + 3000 * MS {
            now += 100 * MS;
            sb.peer_link_hello(now, 7, hello_of(&a));
            sb.keepalive(now, 7, hello_of(&a));
            if now == t0 + 400 * MS {
                sb.synced(now);
            }
        }
        sb.update(now);
        // a dies: hellos and keepalives stop.
        now += 1500 * MS;
        assert_eq!(sb.update(now), PairStatus::PeerDown);
        // a starts: keepalives for 2.9 s (restore delay 2 s + timeout
        // 1 s not reached) before its first hello.
        let back = now;
        while now < back + 2900 * MS {
            now += 100 * MS;
            sb.keepalive(now, 7, hello_of(&a));
            assert_eq!(sb.update(now), PairStatus::PeerDown, "at {:?}", now - back);
            assert!(sb.members_enabled(now));
        }
        sb.peer_link_hello(now, 7, hello_of(&a));
        assert_eq!(sb.update(now), PairStatus::Paired);
        assert!(sb.members_enabled(now), "the survivor keeps carrying");
        assert_eq!(sb.dual_active_events, 0);
    }

    #[test]
    fn roles_and_dual_active() {
        let t0 = Instant::now();
        let a = node(100, 1);
        let b = node(200, 2);
        let mut sb = PairState::new(b.clone(), t0);
        assert_eq!(sb.status(t0), PairStatus::Init);
        assert!(!sb.members_enabled(t0));
        // Alone after the restore delay: carries everything.
        assert_eq!(sb.update(t0 + 2500 * MS), PairStatus::PeerDown);
        assert!(sb.members_enabled(t0 + 2500 * MS));
        assert_eq!(sb.role(t0 + 2500 * MS), Role::Primary);

        // The peer link comes up: b is secondary but was carrying the
        // traffic alone, so its members stay up.
        let t = t0 + 3000 * MS;
        sb.peer_link_hello(t, 7, hello_of(&a));
        sb.keepalive(t, 7, hello_of(&a));
        assert_eq!(sb.status(t), PairStatus::Paired);
        assert_eq!(sb.role(t), Role::Secondary);
        assert!(sb.members_enabled(t));
        sb.synced(t + 100 * MS);
        assert!(sb.members_enabled(t + 100 * MS));
        let mut now = t;
        while now < t + 2500 * MS {
            now += 200 * MS;
            sb.peer_link_hello(now, 7, hello_of(&a));
            sb.keepalive(now, 7, hello_of(&a));
        }
        assert!(sb.members_enabled(now));

        // Peer link cut, keepalive alive: dual-active, secondary down.
        let cut = now;
        while now < cut + 1500 * MS {
            now += 200 * MS;
            sb.keepalive(now, 7, hello_of(&a));
        }
        assert_eq!(sb.update(now), PairStatus::DualActive);
        assert_eq!(sb.dual_active_events, 1);
        assert!(!sb.members_enabled(now));
        assert_eq!(sb.members_reason(now), "down: dual-active, secondary");

        // The primary in the same situation keeps its members (keepalives
        // alone for a timeout: a split, not a peer starting).
        // (The split peer does not hear our hellos either.)
        let mut sa = PairState::new(a.clone(), t0);
        let ka = now - 1200 * MS;
        let mut split_b = hello_of(&b);
        split_b.peer_link_up = false;
        sa.keepalive(ka, 7, split_b);
        assert_ne!(sa.status(ka), PairStatus::DualActive);
        for k in 1..=6 {
            sa.keepalive(ka + k * 200 * MS, 7, split_b);
        }
        assert_eq!(sa.status(now), PairStatus::DualActive);
        assert!(sa.members_enabled(now));

        // Link back: paired, secondary waits again for copy + delay.
        now += 200 * MS;
        sb.peer_link_hello(now, 7, hello_of(&a));
        assert_eq!(sb.update(now), PairStatus::Paired);
        assert!(!sb.members_enabled(now));
        let back = now;
        while now < back + 2100 * MS {
            now += 200 * MS;
            sb.peer_link_hello(now, 7, hello_of(&a));
            sb.keepalive(now, 7, hello_of(&a));
            if now == back + 400 * MS {
                sb.synced(now);
            }
        }
        assert!(sb.members_enabled(now));

        // Primary dies (both signals stop): b carries everything.
        now += 1500 * MS;
        assert_eq!(sb.update(now), PairStatus::PeerDown);
        assert_eq!(sb.role(now), Role::Primary);
        assert!(sb.members_enabled(now));
    }

    #[test]
    fn a_returning_primary_waits_and_the_survivor_keeps_its_members() {
        let t0 = Instant::now();
        let (a, b) = (node(100, 1), node(200, 2));
        // b alone (a died) carries everything.
        let mut sb = PairState::new(b.clone(), t0);
        let mut now = t0 + 2500 * MS;
        assert_eq!(sb.update(now), PairStatus::PeerDown);
        assert!(sb.members_enabled(now));
        // a starts again: its keepalives reach b before its first hello
        // (no split: b keeps its members; a stays in its start-up hold).
        let mut sa = PairState::new(a.clone(), now);
        now += 50 * MS;
        sb.keepalive(now, 7, hello_of(&a));
        sa.keepalive(now, 7, hello_of(&b));
        assert_eq!(sb.update(now), PairStatus::PeerDown);
        assert!(sb.members_enabled(now));
        assert_eq!(sa.update(now), PairStatus::Init);
        assert!(!sa.members_enabled(now));
        assert_eq!(sb.dual_active_events + sa.dual_active_events, 0);
        now += 50 * MS;
        sa.peer_link_hello(now, 7, hello_of(&b));
        sb.peer_link_hello(now, 7, hello_of(&a));
        assert_eq!(
            (sa.status(now), sb.status(now)),
            (PairStatus::Paired, PairStatus::Paired)
        );
        assert_eq!(
            (sa.role(now), sb.role(now)),
            (Role::Primary, Role::Secondary)
        );
        // The primary waits for b's copy and the delay; b never drops.
        assert!(!sa.members_enabled(now));
        assert_eq!(sa.members_reason(now), "down: waiting for the peer's state");
        assert!(sb.members_enabled(now));
        let back = now;
        while now < back + 2100 * MS {
            now += 100 * MS;
            sa.peer_link_hello(now, 7, hello_of(&b));
            sb.peer_link_hello(now, 7, hello_of(&a));
            if now == back + 200 * MS {
                sa.synced(now);
            }
            assert!(sb.members_enabled(now));
            assert_eq!(
                sa.members_enabled(now),
                now >= back + 2000 * MS,
                "{:?}",
                now - back
            );
        }
        // Both started together: both wait for the copy and the delay.
        let mut sc = PairState::new(a.clone(), now);
        let mut sd = PairState::new(b.clone(), now);
        sc.peer_link_hello(now + 50 * MS, 7, hello_of(&b));
        sd.peer_link_hello(now + 50 * MS, 7, hello_of(&a));
        assert!(!sc.members_enabled(now + 50 * MS));
        assert!(!sd.members_enabled(now + 50 * MS));
    }

    #[test]
    fn goodbye_ends_the_pair_at_once() {
        let t0 = Instant::now();
        let a = node(100, 1);
        let mut sb = PairState::new(node(200, 2), t0);
        let mut now = t0;
        while now < t0 + 3000 * MS {
            now += 200 * MS;
            sb.peer_link_hello(now, 7, hello_of(&a));
            sb.keepalive(now, 7, hello_of(&a));
            if now == t0 + 400 * MS {
                sb.synced(now);
            }
        }
        assert_eq!(sb.update(now), PairStatus::Paired);
        assert_eq!(sb.role(now), Role::Secondary);
        // A third node's goodbye changes nothing.
        sb.goodbye(now, 7, hello_of(&node(100, 9)));
        assert_eq!(sb.update(now), PairStatus::Paired);
        // The peer's guardian says it died: alone and primary at once,
        // not a timeout later (nor dual-active, which would take this
        // secondary's members down).
        now += MS;
        sb.goodbye(now, 7, hello_of(&a));
        sb.goodbye(now, 7, hello_of(&a));
        assert_eq!(sb.goodbyes, 1);
        assert_eq!(sb.update(now), PairStatus::PeerDown);
        assert_eq!(sb.role(now), Role::Primary);
        assert!(sb.members_enabled(now));
        // A hello still queued from before its death is ignored ...
        sb.peer_link_hello(now + 10 * MS, 7, hello_of(&a));
        assert_eq!(sb.update(now + 10 * MS), PairStatus::PeerDown);
        // ... a restarted peer's is not.
        now += GOODBYE_QUIET + MS;
        sb.peer_link_hello(now, 7, hello_of(&a));
        assert_eq!(sb.update(now), PairStatus::Paired);
        // Early in this node's own start a goodbye means alone, not init.
        let mut sc = PairState::new(node(200, 2), now);
        sc.keepalive(now, 7, hello_of(&a));
        sc.goodbye(now + MS, 7, hello_of(&a));
        assert_eq!(sc.update(now + MS), PairStatus::PeerDown);
    }

    /// An aggregated peer link whose bundle never distributes (LACP
    /// refused: the same switch name on both nodes, both ends passive):
    /// hellos cross, data cannot. Before, both nodes stayed `paired` with
    /// no data path across; now it is a split found by the hellos
    /// themselves (no keepalive here): the secondary holds its members,
    /// the primary carries; when a member distributes it is a link
    /// coming up (the joining node waits for the copy and the delay).
    /// LACP converging within the grace, or a member flapping, is not a
    /// split.
    #[test]
    fn a_bundle_that_never_distributes_is_a_split() {
        let t0 = Instant::now();
        let (a, b) = (node(100, 1), node(200, 2));
        let mut sa = PairState::new(a.clone(), t0);
        let mut sb = PairState::new(b.clone(), t0);
        let grace = BUNDLE_GRACE + 1000 * MS;
        let mut now = t0;
        let step = |sa: &mut PairState, sb: &mut PairState, now: Instant, data: bool| {
            sa.peer_link_hello(now, 7, hello_of(&b));
            sb.peer_link_hello(now, 7, hello_of(&a));
            sa.peer_link_data(now, data);
            sb.peer_link_data(now, data);
        };
        // Hellos from 100 ms on, no member ever distributing.
        while now < t0 + 100 * MS + grace - 100 * MS {
            now += 100 * MS;
            step(&mut sa, &mut sb, now, false);
            assert_eq!(sb.update(now), PairStatus::Paired, "at {:?}", now - t0);
            assert!(!sb.data_down(now));
        }
        now += 200 * MS;
        step(&mut sa, &mut sb, now, false);
        assert!(sb.data_down(now) && sb.hellos_alive(now) && !sb.link_alive(now));
        assert_eq!(sb.update(now), PairStatus::DualActive);
        assert_eq!(sa.update(now), PairStatus::DualActive);
        assert_eq!(
            (sa.role(now), sb.role(now)),
            (Role::Primary, Role::Secondary)
        );
        assert!(sa.members_enabled(now));
        assert!(!sb.members_enabled(now));
        assert_eq!(sb.members_reason(now), "down: dual-active, secondary");
        assert!(
            !sb.hello(now, 1).peer_link_up,
            "we tell the peer we lack the link"
        );
        // It stays so while hellos cross (never `peer-down`: the peer is alive).
        for _ in 0..30 {
            now += 100 * MS;
            step(&mut sa, &mut sb, now, false);
            assert_eq!(sb.update(now), PairStatus::DualActive);
        }
        assert_eq!(sb.dual_active_events, 1);
        // A member distributes: paired; the primary, which carried, keeps
        // its members; the secondary waits for the copy and the delay.
        now += 100 * MS;
        step(&mut sa, &mut sb, now, true);
        assert_eq!(sb.update(now), PairStatus::Paired);
        assert!(sa.members_enabled(now));
        assert!(!sb.members_enabled(now));
        let back = now;
        sb.synced(now + 100 * MS);
        while now < back + 2100 * MS {
            now += 100 * MS;
            step(&mut sa, &mut sb, now, true);
        }
        assert!(sb.members_enabled(now));

        // LACP converging within the grace, then a member flapping for
        // two seconds: never a split.
        let mut sc = PairState::new(b.clone(), now);
        let start = now;
        while now < start + 10_000 * MS {
            now += 100 * MS;
            let t = now - start;
            let data = (t >= 2500 * MS && t < 6000 * MS) || t >= 8000 * MS;
            sc.peer_link_hello(now, 7, hello_of(&a));
            sc.peer_link_data(now, data);
            assert_eq!(sc.update(now), PairStatus::Paired, "at {t:?}");
        }
        assert_eq!(sc.dual_active_events, 0);
    }

    #[test]
    fn refusals_and_ties() {
        let t0 = Instant::now();
        let a = node(100, 1);
        let mut sb = PairState::new(node(100, 2), t0);
        let mut other = hello_of(&a);
        sb.keepalive(t0, 8, other);
        assert_eq!(sb.wrong_domain, 1);
        other.system = [2, 0, 0, 0, 8, 0];
        sb.peer_link_hello(t0, 7, other);
        assert_eq!(sb.system_mismatch, 1);
        assert!(sb.peer().is_none());
        // Equal priority: the lower node id is primary.
        sb.peer_link_hello(t0, 7, hello_of(&a));
        assert_eq!(sb.role(t0), Role::Secondary);
        assert_eq!(node_id("192.0.2.1".parse().unwrap()), [0, 0, 192, 0, 2, 1]);
    }
}
