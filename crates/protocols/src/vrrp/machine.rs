//! One virtual router's state machine (RFC 5798 section 6.4), pure:
//! driven by its caller's clock (milliseconds) and events, it returns
//! what to send. Tested without sockets.

use std::net::Ipv4Addr;

/// Initialize / Backup / Master (RFC 5798 section 6.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Initialize,
    Backup,
    Master,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Initialize => "Init",
            State::Backup => "Backup",
            State::Master => "Master",
        }
    }
}

/// A group's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    pub vrid: u8,
    /// 1..=255 (255: the address owner).
    pub priority: u8,
    /// Advertisement interval, centiseconds.
    pub interval_cs: u16,
    pub preempt: bool,
    pub accept: bool,
    pub addresses: Vec<Ipv4Addr>,
    /// This router's primary address on the interface (the source of its
    /// advertisements, and the tie-breaker between equal priorities).
    pub primary: Ipv4Addr,
}

/// What the caller must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send an advertisement with this priority (0 on shutdown).
    Advertise { priority: u8 },
    /// This router became master: answer ARP for the virtual addresses,
    /// accept the virtual MAC, send gratuitous ARPs.
    BecomeMaster,
    /// It stopped being master: stop all of that.
    LeaveMaster,
}

/// Why the state changed (the transition log line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Startup,
    /// No advertisement for Master_Down_Interval.
    MasterDown,
    /// The master advertised priority 0 (it is stopping).
    MasterStopped,
    /// A higher priority (or equal priority, higher address) advertised.
    Preempted,
    Shutdown,
}

impl Reason {
    pub fn text(self) -> &'static str {
        match self {
            Reason::Startup => "startup",
            Reason::MasterDown => "master down interval expired",
            Reason::MasterStopped => "master sent priority 0",
            Reason::Preempted => "higher priority advertisement",
            Reason::Shutdown => "shutdown",
        }
    }
}

/// One virtual router.
#[derive(Clone, Debug)]
pub struct Group {
    pub cfg: GroupConfig,
    pub state: State,
    /// The master's advertisement interval as last heard (centiseconds).
    pub master_adver_cs: u16,
    /// The current master's address (this router's primary when master).
    pub master: Option<Ipv4Addr>,
    /// Deadlines, milliseconds on the caller's clock.
    adver_at: Option<u64>,
    master_down_at: Option<u64>,
    pub transitions: u64,
    pub became_master: u64,
    pub last_reason: Option<Reason>,
    /// When the state last changed (caller's clock, ms).
    pub since_ms: u64,
    /// The master said priority 0 (its timer now runs for Skew_Time).
    master_stopped: bool,
}

/// Skew_Time in milliseconds: ((256 − priority) × Master_Adver_Interval) / 256.
pub fn skew_ms(priority: u8, adver_cs: u16) -> u64 {
    (256 - u64::from(priority)) * u64::from(adver_cs) * 10 / 256
}

/// Master_Down_Interval in milliseconds: 3 × Master_Adver_Interval + Skew_Time.
pub fn master_down_ms(priority: u8, adver_cs: u16) -> u64 {
    3 * u64::from(adver_cs) * 10 + skew_ms(priority, adver_cs)
}

impl Group {
    pub fn new(cfg: GroupConfig) -> Group {
        Group {
            master_adver_cs: cfg.interval_cs,
            cfg,
            state: State::Initialize,
            master: None,
            adver_at: None,
            master_down_at: None,
            transitions: 0,
            became_master: 0,
            last_reason: None,
            since_ms: 0,
            master_stopped: false,
        }
    }

    pub fn master_down_interval_ms(&self) -> u64 {
        master_down_ms(self.cfg.priority, self.master_adver_cs)
    }

    fn interval_ms(&self) -> u64 {
        u64::from(self.cfg.interval_cs) * 10
    }

    fn enter_master(&mut self, now: u64, reason: Reason, out: &mut Vec<Action>) {
        out.push(Action::Advertise {
            priority: self.cfg.priority,
        });
        out.push(Action::BecomeMaster);
        self.adver_at = Some(now + self.interval_ms());
        self.master_down_at = None;
        self.master = Some(self.cfg.primary);
        self.set(State::Master, now, reason);
        self.became_master += 1;
    }

    fn enter_backup(&mut self, now: u64, reason: Reason, out: &mut Vec<Action>) {
        if self.state == State::Master {
            out.push(Action::LeaveMaster);
        }
        self.adver_at = None;
        self.master_down_at = Some(now + self.master_down_interval_ms());
        self.set(State::Backup, now, reason);
    }

    fn set(&mut self, s: State, now: u64, reason: Reason) {
        if self.state != s {
            self.transitions += 1;
            self.since_ms = now;
            self.last_reason = Some(reason);
        }
        self.state = s;
    }

    /// The Startup event.
    pub fn startup(&mut self, now: u64) -> Vec<Action> {
        let mut out = Vec::new();
        if self.state != State::Initialize {
            return out;
        }
        self.master_adver_cs = self.cfg.interval_cs;
        if self.cfg.priority == 255 {
            self.enter_master(now, Reason::Startup, &mut out);
        } else {
            self.master = None;
            self.enter_backup(now, Reason::Startup, &mut out);
        }
        out
    }

    /// The Shutdown event: a master says priority 0 so a backup takes
    /// over after Skew_Time instead of Master_Down_Interval.
    pub fn shutdown(&mut self, now: u64) -> Vec<Action> {
        let mut out = Vec::new();
        if self.state == State::Master {
            out.push(Action::Advertise { priority: 0 });
            out.push(Action::LeaveMaster);
        }
        self.adver_at = None;
        self.master_down_at = None;
        self.set(State::Initialize, now, Reason::Shutdown);
        out
    }

    /// The earliest deadline, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        match (self.adver_at, self.master_down_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Timers that expired by `now`.
    pub fn on_timer(&mut self, now: u64) -> Vec<Action> {
        let mut out = Vec::new();
        match self.state {
            State::Backup if self.master_down_at.is_some_and(|t| now >= t) => {
                let why = if std::mem::take(&mut self.master_stopped) {
                    Reason::MasterStopped
                } else {
                    Reason::MasterDown
                };
                self.enter_master(now, why, &mut out);
            }
            State::Master if self.adver_at.is_some_and(|t| now >= t) => {
                out.push(Action::Advertise {
                    priority: self.cfg.priority,
                });
                self.adver_at = Some(now + self.interval_ms());
            }
            _ => {}
        }
        out
    }

    /// A valid advertisement for this VRID from `src` (RFC 5798 6.4.2,
    /// 6.4.3).
    pub fn on_advert(
        &mut self,
        now: u64,
        src: Ipv4Addr,
        priority: u8,
        interval_cs: u16,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        match self.state {
            State::Initialize => {}
            State::Backup => {
                if priority == 0 {
                    self.master_down_at =
                        Some(now + skew_ms(self.cfg.priority, self.master_adver_cs));
                    self.master_stopped = true;
                } else if !self.cfg.preempt || priority >= self.cfg.priority {
                    self.master_adver_cs = interval_cs;
                    self.master = Some(src);
                    self.master_down_at = Some(now + self.master_down_interval_ms());
                    self.master_stopped = false;
                }
                // Else a lower-priority master while preempting: ignored,
                // the master-down timer makes this router master.
            }
            State::Master => {
                if priority == 0 {
                    out.push(Action::Advertise {
                        priority: self.cfg.priority,
                    });
                    self.adver_at = Some(now + self.interval_ms());
                } else if priority > self.cfg.priority
                    || (priority == self.cfg.priority
                        && u32::from(src) > u32::from(self.cfg.primary))
                {
                    self.master_adver_cs = interval_cs;
                    self.master = Some(src);
                    self.enter_backup(now, Reason::Preempted, &mut out);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(priority: u8, preempt: bool) -> Group {
        Group::new(GroupConfig {
            vrid: 7,
            priority,
            interval_cs: 100,
            preempt,
            accept: false,
            addresses: vec![Ipv4Addr::new(192, 0, 2, 254)],
            primary: Ipv4Addr::new(192, 0, 2, 2),
        })
    }

    const PEER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 3);

    #[test]
    fn intervals_follow_the_rfc() {
        // Priority 100, 1 s: skew (156 × 100 / 256) cs = 60.9 cs = 609 ms.
        assert_eq!(skew_ms(100, 100), 609);
        assert_eq!(master_down_ms(100, 100), 3609);
        assert_eq!(master_down_ms(255, 100), 3003);
    }

    #[test]
    fn a_lone_backup_becomes_master_after_master_down_interval() {
        let mut g = group(100, true);
        assert_eq!(g.startup(0), vec![]);
        assert_eq!(g.state, State::Backup);
        assert_eq!(g.next_deadline(), Some(3609));
        assert!(g.on_timer(3608).is_empty());
        assert_eq!(
            g.on_timer(3609),
            vec![Action::Advertise { priority: 100 }, Action::BecomeMaster]
        );
        assert_eq!(g.state, State::Master);
        assert_eq!(g.last_reason, Some(Reason::MasterDown));
        assert_eq!(g.next_deadline(), Some(4609));
        assert_eq!(g.on_timer(4609), vec![Action::Advertise { priority: 100 }]);
        assert_eq!((g.transitions, g.became_master), (2, 1));
    }

    #[test]
    fn adverts_hold_the_backup_and_priority_zero_cuts_the_wait_to_skew() {
        let mut g = group(100, true);
        g.startup(0);
        for t in (1000..20_000).step_by(1000) {
            assert!(g.on_advert(t, PEER, 200, 100).is_empty());
            assert!(g.on_timer(t + 999).is_empty(), "still backup at {t}");
        }
        assert_eq!(g.master, Some(PEER));
        // The master stops cleanly: takeover after Skew_Time (609 ms).
        g.on_advert(20_000, PEER, 0, 100);
        assert!(g.on_timer(20_608).is_empty());
        assert_eq!(g.on_timer(20_609)[1], Action::BecomeMaster);
        assert_eq!(
            (g.state, g.last_reason),
            (State::Master, Some(Reason::MasterStopped))
        );
    }

    #[test]
    fn the_owner_starts_as_master_and_preemption_follows_priority() {
        let mut o = group(255, true);
        assert_eq!(o.startup(0)[1], Action::BecomeMaster);
        // Master meets a higher priority: backup; a lower one is ignored.
        let mut m = group(100, true);
        m.startup(0);
        m.on_timer(3609);
        assert!(m.on_advert(4000, PEER, 50, 100).is_empty());
        assert_eq!(m.state, State::Master);
        assert_eq!(m.on_advert(4100, PEER, 150, 100), vec![Action::LeaveMaster]);
        assert_eq!(
            (m.state, m.last_reason),
            (State::Backup, Some(Reason::Preempted))
        );
        // Equal priority: the higher address wins.
        let mut e = group(100, true);
        e.startup(0);
        e.on_timer(3609);
        assert!(e
            .on_advert(4000, Ipv4Addr::new(192, 0, 2, 1), 100, 100)
            .is_empty());
        assert_eq!(e.on_advert(4000, PEER, 100, 100), vec![Action::LeaveMaster]);
        // A preempting backup ignores a lower master and takes over; a
        // non-preempting one stays backup.
        let mut p = group(200, true);
        p.startup(0);
        for t in (500..10_000).step_by(500) {
            p.on_advert(t, PEER, 100, 100);
            p.on_timer(t);
        }
        assert_eq!(
            (p.state, p.last_reason),
            (State::Master, Some(Reason::MasterDown))
        );
        let mut n = group(200, false);
        n.startup(0);
        for t in (500..10_000).step_by(500) {
            n.on_advert(t, PEER, 100, 100);
            n.on_timer(t);
        }
        assert_eq!(n.state, State::Backup);
    }

    #[test]
    fn shutdown_sends_priority_zero_and_a_master_answers_priority_zero() {
        let mut g = group(100, true);
        g.startup(0);
        g.on_timer(3609);
        assert_eq!(
            g.on_advert(4000, PEER, 0, 100),
            vec![Action::Advertise { priority: 100 }]
        );
        assert_eq!(
            g.shutdown(5000),
            vec![Action::Advertise { priority: 0 }, Action::LeaveMaster]
        );
        assert_eq!(g.state, State::Initialize);
        assert_eq!(g.next_deadline(), None);
        // The backup adopts the master's interval.
        let mut b = group(100, true);
        b.startup(0);
        b.on_advert(100, PEER, 200, 20);
        assert_eq!(b.master_adver_cs, 20);
        assert_eq!(b.next_deadline(), Some(100 + 600 + 121));
    }
}
