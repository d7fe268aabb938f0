//! Simulated bridges on a simulated clock; BPDUs pass through the codec.

use super::*;

/// A link: (bridge, port) ↔ (bridge, port), up, and whether BPDUs pass.
type Link = ((usize, usize), (usize, usize), bool, bool);

/// A network of bridges joined by point-to-point links.
struct Net {
    b: Vec<Bridge>,
    links: Vec<Link>,
    now: Instant,
    t0: Instant,
    flushed: Vec<(usize, usize)>,
    /// Bridges that drop RST BPDUs (802.1D-1998 bridges do).
    legacy: Vec<bool>,
    sent: Vec<(usize, usize, Bpdu)>,
}

fn mac(n: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, n]
}

impl Net {
    fn new(prios: &[u16], nports: usize) -> Net {
        let b = prios
            .iter()
            .enumerate()
            .map(|(k, &prio)| {
                let ports: Vec<PortConfig> =
                    (0..nports).map(|i| PortConfig::new(i as u16 + 1)).collect();
                Bridge::new(
                    BridgeConfig {
                        priority: prio,
                        mac: mac(k as u8 + 1),
                        timers: Timers::default(),
                        force_stp: false,
                    },
                    &ports,
                )
            })
            .collect();
        let t0 = Instant::now();
        Net {
            b,
            links: Vec::new(),
            now: t0,
            t0,
            flushed: Vec::new(),
            legacy: vec![false; prios.len()],
            sent: Vec::new(),
        }
    }

    fn link(&mut self, a: (usize, usize), z: (usize, usize)) -> usize {
        self.links.push((a, z, true, true));
        let now = self.now;
        self.b[a.0].link_up(a.1, now);
        self.b[z.0].link_up(z.1, now);
        self.links.len() - 1
    }

    fn cut(&mut self, l: usize) {
        let (a, z, _, _) = self.links[l];
        self.links[l].2 = false;
        let now = self.now;
        self.b[a.0].link_down(a.1, now);
        self.b[z.0].link_down(z.1, now);
    }

    fn peer(&self, at: (usize, usize)) -> Option<(usize, usize)> {
        self.links.iter().find_map(|&(a, z, up, pass)| {
            if !up || !pass {
                None
            } else if a == at {
                Some(z)
            } else if z == at {
                Some(a)
            } else {
                None
            }
        })
    }

    /// Deliver everything due now (through the codec), repeatedly.
    fn settle(&mut self) {
        for _ in 0..1000 {
            let mut any = false;
            for k in 0..self.b.len() {
                let out = self.b[k].poll(self.now);
                for i in self.b[k].take_flushes() {
                    self.flushed.push((k, i));
                }
                for (port, bpdu) in out {
                    any = true;
                    self.sent.push((k, port, bpdu));
                    let mut f = [0u8; 64];
                    let n = wire::stp::build_frame(mac(k as u8 + 1), &bpdu, &mut f).unwrap();
                    let rx = wire::stp::parse_frame(&f[..n]).unwrap();
                    if let Some((b, p)) = self.peer((k, port)) {
                        if self.legacy[b] && matches!(rx, Bpdu::Rst(_)) {
                            continue;
                        }
                        let now = self.now;
                        self.b[b].receive(p, &rx, now);
                    }
                }
            }
            if !any {
                return;
            }
        }
        panic!("BPDUs never settle");
    }

    /// Run for `d` of simulated time, 10 ms at a time.
    fn run(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.settle();
            self.now += Duration::from_millis(10);
        }
        self.settle();
    }

    fn role(&self, b: usize, p: usize) -> Role {
        self.b[b].ports[p].role
    }

    fn state(&self, b: usize, p: usize) -> PortState {
        self.b[b].state(p)
    }

    /// Ports (bridge, port) of up links in the given state.
    fn link_ports(&self) -> Vec<(usize, usize)> {
        self.links
            .iter()
            .filter(|l| l.2)
            .flat_map(|l| [l.0, l.1])
            .collect()
    }
}

#[test]
fn root_by_priority_then_mac() {
    let mut n = Net::new(&[32768, 4096, 32768], 2);
    // A triangle: b0.p0–b1.p0, b1.p1–b2.p0, b2.p1–b0.p1.
    n.link((0, 0), (1, 0));
    n.link((1, 1), (2, 0));
    n.link((2, 1), (0, 1));
    n.run(Duration::from_secs(1));
    for b in &n.b {
        assert_eq!(b.root_priority.root, n.b[1].bridge_id());
    }
    assert!(n.b[1].is_root());
    assert_eq!(n.role(0, 0), Role::Root);
    assert_eq!(n.role(2, 0), Role::Root);
    // b0 (02:..:01) beats b2 on the tie of priority: b0 is designated on
    // their link, b2 alternate.
    assert_eq!(n.role(0, 1), Role::Designated);
    assert_eq!(n.role(2, 1), Role::Alternate);
    let blocked: Vec<_> = n
        .link_ports()
        .into_iter()
        .filter(|&(b, p)| n.state(b, p) != PortState::Forwarding)
        .collect();
    assert_eq!(blocked, vec![(2, 1)], "exactly one port discards");
    assert_eq!(n.b[0].root_priority.cost, 20_000);
}

#[test]
fn proposal_agreement_is_rapid() {
    let mut n = Net::new(&[4096, 32768], 1);
    n.link((0, 0), (1, 0));
    // Well under one forward delay (15 s): the handshake, not timers.
    n.run(Duration::from_millis(100));
    assert_eq!(n.role(0, 0), Role::Designated);
    assert_eq!(n.role(1, 0), Role::Root);
    assert_eq!(n.state(0, 0), PortState::Forwarding);
    assert_eq!(n.state(1, 0), PortState::Forwarding);
    let proposal = n
        .sent
        .iter()
        .any(|(b, _, x)| *b == 0 && matches!(x, Bpdu::Rst(m) if m.has(flags::PROPOSAL)));
    let agreement = n.sent.iter().any(|(b, _, x)| {
        *b == 1
            && matches!(x, Bpdu::Rst(m) if m.has(flags::AGREEMENT) && m.role() == WireRole::Root)
    });
    assert!(proposal && agreement);
}

#[test]
fn without_agreement_a_designated_port_waits_two_forward_delays() {
    // A neighbour that speaks old STP: no proposal/agreement; the port
    // migrates to STP and goes through learning on the timers.
    let mut n = Net::new(&[4096, 32768], 1);
    n.b[1].cfg.force_stp = true;
    n.legacy[1] = true;
    for p in &mut n.b[1].ports {
        p.send_rstp = false;
    }
    n.link((0, 0), (1, 0));
    n.run(Duration::from_secs(10));
    assert!(!n.b[0].ports[0].send_rstp, "migrated to STP");
    assert!(matches!(
        n.sent.iter().rev().find(|s| s.0 == 0).map(|s| s.2),
        Some(Bpdu::Config(_))
    ));
    assert_eq!(n.state(0, 0), PortState::Discarding);
    n.run(Duration::from_secs(10));
    assert_eq!(n.state(0, 0), PortState::Learning);
    n.run(Duration::from_secs(12));
    assert_eq!(n.state(0, 0), PortState::Forwarding);
}

#[test]
fn link_failure_moves_root_port_to_alternate_and_flushes() {
    let mut n = Net::new(&[32768, 4096, 32768], 2);
    n.link((0, 0), (1, 0));
    let l12 = n.link((1, 1), (2, 0));
    n.link((2, 1), (0, 1));
    n.run(Duration::from_secs(1));
    assert_eq!(n.role(2, 1), Role::Alternate);
    let tcs = n.b[0].stats.topology_changes;
    n.flushed.clear();
    n.cut(l12);
    n.run(Duration::from_millis(200));
    // b2's alternate became its root port and forwards at once; b0's
    // port to b2 stays designated and forwarding.
    assert_eq!(n.role(2, 1), Role::Root);
    assert_eq!(n.state(2, 1), PortState::Forwarding);
    assert_eq!(n.state(0, 1), PortState::Forwarding);
    assert_eq!(n.b[2].root_priority.cost, 40_000);
    // The change reached b0 as a topology change, which flushed its
    // other ports (the one towards the root).
    assert!(n.b[0].stats.topology_changes > tcs);
    assert!(n.flushed.contains(&(0, 0)), "{:?}", n.flushed);
    assert!(n.flushed.contains(&(2, 0)), "the dead port's addresses go");
}

#[test]
fn silent_root_ages_out() {
    let mut n = Net::new(&[4096, 32768], 1);
    let l = n.link((0, 0), (1, 0));
    n.run(Duration::from_secs(1));
    assert!(!n.b[1].is_root());
    // The link stays up but BPDUs stop (a unidirectional failure).
    n.links[l].3 = false;
    n.run(Duration::from_secs(3));
    assert!(!n.b[1].is_root(), "3 hellos (6 s) not over yet");
    n.run(Duration::from_secs(4));
    assert!(n.b[1].is_root(), "information aged out");
}

#[test]
fn edge_ports_admin_and_auto() {
    let mut b = Bridge::new(
        BridgeConfig {
            priority: 32768,
            mac: mac(1),
            timers: Timers::default(),
            force_stp: false,
        },
        &[
            PortConfig {
                admin_edge: true,
                ..PortConfig::new(1)
            },
            PortConfig::new(2),
            PortConfig {
                auto_edge: false,
                ..PortConfig::new(3)
            },
        ],
    );
    let t = Instant::now();
    for i in 0..3 {
        b.link_up(i, t);
    }
    b.poll(t);
    assert_eq!(b.state(0), PortState::Forwarding, "admin edge at once");
    assert_eq!(b.state(1), PortState::Discarding);
    let t1 = t + Duration::from_millis(3100);
    b.poll(t1);
    assert!(b.ports[1].oper_edge, "no BPDU for 3 s: an edge");
    assert_eq!(b.state(1), PortState::Forwarding);
    assert_eq!(b.state(2), PortState::Discarding, "auto-edge off");
    // Polled at its deadlines, as the runner does.
    while let Some(d) = b
        .next_deadline()
        .filter(|d| *d <= t + Duration::from_secs(31))
    {
        b.poll(d);
    }
    assert_eq!(b.state(2), PortState::Forwarding, "two forward delays");
    // A BPDU on the admin edge port: a bridge after all.
    let other = Bpdu::Rst(BpduInfo {
        root: BridgeId {
            priority: 40960,
            mac: mac(9),
        },
        bridge: BridgeId {
            priority: 40960,
            mac: mac(9),
        },
        port: 0x8001,
        max_age: 20 * 256,
        hello_time: 2 * 256,
        forward_delay: 15 * 256,
        flags: 0x0c,
        ..Default::default()
    });
    b.receive(0, &other, t + Duration::from_secs(32));
    assert!(!b.ports[0].oper_edge);
    assert_eq!(
        b.ports[0].role,
        Role::Designated,
        "we are the better bridge"
    );
}

fn root_bpdu(prio: u16) -> Bpdu {
    let id = BridgeId {
        priority: prio,
        mac: mac(9),
    };
    Bpdu::Rst(BpduInfo {
        root: id,
        bridge: id,
        port: 0x8001,
        max_age: 20 * 256,
        hello_time: 2 * 256,
        forward_delay: 15 * 256,
        flags: 0x0c | flags::PROPOSAL,
        ..Default::default()
    })
}

#[test]
fn bpdu_guard_err_disables_then_recovers() {
    let mut b = Bridge::new(
        BridgeConfig {
            priority: 32768,
            mac: mac(1),
            timers: Timers::default(),
            force_stp: false,
        },
        &[PortConfig {
            admin_edge: true,
            bpdu_guard: true,
            ..PortConfig::new(1)
        }],
    );
    b.guard_recovery = Duration::from_secs(30);
    let t = Instant::now();
    b.link_up(0, t);
    assert_eq!(b.state(0), PortState::Forwarding);
    b.receive(0, &root_bpdu(4096), t);
    assert_eq!(b.state(0), PortState::Discarding);
    assert!(b.ports[0].guard_until.is_some());
    assert_eq!(b.ports[0].counters.bpdu_guard_trips, 1);
    assert!(b.is_root(), "the guarded BPDU was not used");
    assert_eq!(b.take_flushes(), vec![0]);
    b.poll(t + Duration::from_secs(29));
    assert_eq!(b.state(0), PortState::Discarding);
    b.poll(t + Duration::from_secs(30));
    assert!(b.ports[0].guard_until.is_none());
    assert_eq!(b.state(0), PortState::Forwarding, "recovered");
}

#[test]
fn root_guard_keeps_a_superior_bridge_out() {
    let mut b = Bridge::new(
        BridgeConfig {
            priority: 32768,
            mac: mac(1),
            timers: Timers::default(),
            force_stp: false,
        },
        &[PortConfig {
            root_guard: true,
            ..PortConfig::new(1)
        }],
    );
    let t = Instant::now();
    b.link_up(0, t);
    b.receive(0, &root_bpdu(4096), t);
    b.poll(t);
    assert!(b.is_root());
    assert_eq!(b.ports[0].role, Role::Alternate);
    assert_eq!(b.state(0), PortState::Discarding);
    // The superior information ages out (6 s): designated again.
    b.poll(t + Duration::from_secs(7));
    assert_eq!(b.ports[0].role, Role::Designated);
}

#[test]
fn two_ports_on_one_segment_make_a_backup() {
    // A cable between two ports of the same bridge.
    let mut n = Net::new(&[32768], 2);
    n.link((0, 0), (0, 1));
    n.run(Duration::from_secs(1));
    assert_eq!(n.role(0, 0), Role::Designated);
    assert_eq!(n.role(0, 1), Role::Backup);
    assert_eq!(n.state(0, 1), PortState::Discarding);
}

#[test]
fn ring_of_five_blocks_one_port_and_heals() {
    let mut n = Net::new(&[32768, 32768, 32768, 8192, 32768], 2);
    let mut links = Vec::new();
    for k in 0..5 {
        links.push(n.link((k, 1), ((k + 1) % 5, 0)));
    }
    n.run(Duration::from_secs(2));
    let blocked = |n: &Net| {
        n.link_ports()
            .into_iter()
            .filter(|&(b, p)| n.state(b, p) != PortState::Forwarding)
            .collect::<Vec<_>>()
    };
    let b = blocked(&n);
    assert_eq!(b.len(), 1, "{b:?}");
    let (bb, bp) = b[0];
    assert_eq!(n.role(bb, bp), Role::Alternate);
    // Cut a forwarding link not touching the blocked port: all forward.
    let l = links
        .iter()
        .copied()
        .find(|&l| {
            let (a, z, _, _) = n.links[l];
            a != (bb, bp) && z != (bb, bp)
        })
        .unwrap();
    n.cut(l);
    n.run(Duration::from_millis(500));
    assert!(blocked(&n).is_empty(), "{:?}", blocked(&n));
    for k in 0..5 {
        assert_eq!(n.b[k].root_priority.root, n.b[3].bridge_id());
    }
}

#[test]
fn tx_hold_count_limits_bursts() {
    let mut n = Net::new(&[4096, 32768], 1);
    n.link((0, 0), (1, 0));
    n.run(Duration::from_secs(10));
    let per_second = n.b[0].ports[0].counters.tx_rst;
    // ~1 per hello (2 s) plus the handshake: far below 6 a second.
    assert!(per_second < 20, "{per_second}");
    assert!(n.b[1].ports[0].counters.rx_rst >= 5);
    assert!(n.now >= n.t0 + Duration::from_secs(10));
}
