//! Access lists swapped under traffic (issue 5): a worker forwards while
//! the control side publishes new services snapshots back and forth
//! between a 10,000-rule and a 32,292-rule list. Every frame both lists
//! permit arrives, no frame both lists deny leaks, and the snapshot
//! generation seen by the worker changes on every swap.

use datapath::{Mailbox, PortCommand, Shared, Worker, WorkerOptions};
use io::MemoryPort;
use pipeline::services::{
    AclFamily, AclList, AclSet, AttachPoint, AttachedAcl, AttachedPolicy, Direction, Services,
};
use pipeline::{DropReason, WorkerCounters};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::acl::{Classifier, Match};
use tables::l2::{PortMode, TPID_8021Q};
use tables::{L2Tables, LearnGate, MacEntry, MacKey, MacTable, PortEntry, Tables};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

/// UDP/IPv4 frame from A to B with destination port `dport`.
fn udp(dport: u16, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&B);
    f[6..12].copy_from_slice(&A);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

fn dport(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[36], f[37]])
}

/// `n` UDP denies on ports `first + k * step` (non-sequential), always
/// including port 7 (denied by both lists), then permit any.
fn acl(name: &str, n: usize, first: u32, step: u32) -> Arc<AclList> {
    let mut rules: Vec<Match> = (0..n - 2)
        .map(|k| Match {
            family: Some(4),
            proto: Some(17),
            dst_port: Some({
                let p = (1024 + (first + k as u32 * step) % 60_000) as u16;
                (p, p)
            }),
            ..Match::default()
        })
        .collect();
    rules.push(Match {
        family: Some(4),
        proto: Some(17),
        dst_port: Some((7, 7)),
        ..Match::default()
    });
    rules.push(Match {
        family: Some(4),
        ..Match::default()
    });
    let permit: Vec<bool> = (0..rules.len()).map(|i| i == rules.len() - 1).collect();
    let t0 = Instant::now();
    let classifier = Classifier::compile(&rules);
    eprintln!(
        "{name}: {} rules compiled in {:?}",
        rules.len(),
        t0.elapsed()
    );
    Arc::new(AclList {
        name: name.into(),
        family: AclFamily::Ipv4,
        classifier,
        log: vec![false; rules.len()].into(),
        log_events: crossbeam_queue::ArrayQueue::new(16),
        line_rule: (0..rules.len() as u32).collect(),
        permit: permit.into(),
    })
}

fn services(list: &Arc<AclList>, generation: u64) -> Services {
    let mut s = Services::empty(1, 8);
    let attach = |p: u16, dir: Direction| AclSet {
        v4: Some(Arc::new(AttachedAcl::new(
            list.clone(),
            AttachPoint::Port(p),
            dir,
            1,
        ))),
        ..AclSet::default()
    };
    s.port_in[0] = attach(0, Direction::In);
    s.port_out[1] = attach(1, Direction::Out);
    s.generation = generation;
    s.finish();
    s
}

/// A worker on two memory ports (access, VLAN 10; B lives on port 1)
/// with services `s`; `tx_cap`: port 1's ring capacity.
struct Rig {
    shared: Arc<Shared>,
    peers: Vec<io::MemoryPeer>,
    counters: Arc<WorkerCounters>,
    thread: std::thread::JoinHandle<()>,
}

fn rig(s: Services, tx_cap: Option<usize>) -> Rig {
    let l2 = L2Tables::new(
        vec![
            PortEntry::new(PortMode::Access, 10, &[10], TPID_8021Q),
            PortEntry::new(PortMode::Access, 10, &[10], TPID_8021Q),
        ],
        &[(1, true, 0), (10, true, 0)],
    );
    let mac = Arc::new(MacTable::new(1024));
    mac.upsert(
        MacKey::new(10, B),
        MacEntry {
            port: 1,
            is_static: true,
            seen: 0,
        },
    );
    let shared = Arc::new(Shared::new(
        Tables {
            l2,
            mac,
            learn_gate: Arc::new(LearnGate::default()),
        },
        1024,
    ));
    shared.services.store(Some(Arc::new(s)));
    let mb = Arc::new(Mailbox::default());
    let mut peers = Vec::new();
    for id in 0..2u16 {
        let (port, peer) = MemoryPort::new(&format!("m{id}"));
        mb.send(PortCommand::Attach {
            id,
            port: Box::new(port),
            rx: true,
            routed: false,
        });
        peers.push(peer);
    }
    peers[1].set_tx_capacity(tx_cap);
    let counters = Arc::new(WorkerCounters::default());
    let w = Worker::new(
        shared.clone(),
        mb,
        counters.clone(),
        WorkerOptions {
            idle_spin: Duration::from_micros(10),
            max_sleep: Duration::from_millis(1),
        },
    );
    let thread = std::thread::spawn(move || w.run());
    Rig {
        shared,
        peers,
        counters,
        thread,
    }
}

#[test]
fn acl_swaps_under_traffic_lose_nothing_and_leak_nothing() {
    let ten_k = acl("10k", 10_000, 0, 7_919);
    let big = acl("32k", 32_292, 13, 104_729);
    // Ports both lists leave alone: none of their denies.
    let denied = |l: &AclList, p: u16| {
        let k = tables::acl::AclKey {
            family: 4,
            proto: 17,
            dst_port: p,
            ..Default::default()
        };
        !l.permit[l.classifier.lookup(&k).map(|r| r as usize).unwrap_or(0)]
    };
    let clean: Vec<u16> = (1024u16..65000)
        .filter(|p| !denied(&ten_k, *p) && !denied(&big, *p))
        .step_by(37)
        .take(500)
        .collect();
    assert!(denied(&ten_k, 7) && denied(&big, 7));
    assert!(clean.len() == 500);

    let Rig {
        shared,
        peers,
        counters,
        thread,
    } = rig(services(&ten_k, 1), None);

    // Traffic in rounds; between rounds (and while a round is queued) the
    // snapshot flips.
    let (mut sent_clean, mut sent_denied) = (0usize, 0usize);
    let mut got = Vec::new();
    let mut generation = 1;
    let mut seq = 0u32;
    for round in 0..40 {
        for k in 0..500 {
            let p = if k % 10 == 9 {
                sent_denied += 1;
                7
            } else {
                sent_clean += 1;
                clean[(k + round * 7) % clean.len()]
            };
            peers[0].inject(&udp(p, seq));
            seq += 1;
        }
        generation += 1;
        let list = if round % 2 == 0 { &big } else { &ten_k };
        shared
            .services
            .store(Some(Arc::new(services(list, generation))));
        got.extend(peers[1].take_sent());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while peers[0].pending_rx() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    got.extend(peers[1].take_sent());
    shared.stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();

    let leaked = got.iter().filter(|f| dport(f) == 7).count();
    let passed = got.len() - leaked;
    let acl_drops = counters.ports[0].drops[DropReason::AclDeny as usize].get();
    assert_eq!(leaked, 0, "frames to the port both lists deny leaked");
    assert_eq!(
        passed,
        sent_clean,
        "permitted frames lost across {} swaps",
        generation - 1
    );
    assert_eq!(acl_drops as usize, sent_denied);
    // In order, too: one port, one worker.
    let seqs: Vec<u32> = got
        .iter()
        .map(|f| u32::from_be_bytes([f[42], f[43], f[44], f[45]]))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "reordered");
}

/// Egress class queues under congestion: port 1's ring is full while a
/// mix arrives; then the link drains 8 frames at a time. Strict priority
/// leaves first, then weights 3:1 share by bytes; tail drops are counted.
#[test]
fn egress_queues_priority_then_weighted_shares() {
    use pipeline::qos::QueueSpec;
    use pipeline::services::{class_counter, ClassSpec, Policy};
    let line = |port: u16| Match {
        family: Some(4),
        proto: Some(17),
        dst_port: Some((port, port)),
        ..Match::default()
    };
    let class = |name: &str| ClassSpec {
        name: name.into(),
        set_dscp: None,
        set_pcp: None,
        police: None,
    };
    let policy = Arc::new(Policy {
        name: "sched".into(),
        classifier: Classifier::compile(&[line(1), line(2)]),
        line_class: vec![0, 1].into(),
        classes: vec![class("prio"), class("heavy"), class("class-default")].into(),
        queues: Some(
            vec![
                QueueSpec {
                    priority: true,
                    weight: 1,
                    depth: 256,
                },
                QueueSpec {
                    priority: false,
                    weight: 3,
                    depth: 256,
                },
                QueueSpec {
                    priority: false,
                    weight: 1,
                    depth: 256,
                },
            ]
            .into(),
        ),
    });
    let mut s = Services::empty(1, 8);
    let policy = Arc::new(AttachedPolicy::new(policy, 1, Direction::Out, 1));
    s.policy_out[1] = Some(policy.clone());
    s.generation = 7;
    s.finish();
    // Port 1's ring starts full.

    let Rig {
        shared,
        peers,
        counters,
        thread,
    } = rig(s, Some(0));
    // 300 of each class, interleaved: 44 of each overflow a 256 queue.
    let mut seq = 0;
    for _ in 0..300 {
        for p in [3u16, 2, 1] {
            peers[0].inject(&udp(p, seq));
            seq += 1;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while peers[0].pending_rx() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(20));
    // The link comes back: 8 frames per millisecond.
    let mut got: Vec<u16> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    peers[1].set_tx_capacity(Some(8));
    while got.len() < 768 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
        got.extend(peers[1].take_sent().iter().map(|f| dport(f)));
    }
    shared.stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();

    assert_eq!(
        got.len(),
        768,
        "every queued frame leaves once the link drains"
    );
    assert!(
        got[..256].iter().all(|p| *p == 1),
        "strict priority first: {:?}",
        &got[..40]
    );
    // Both weighted queues backlogged: 3:1 until `heavy` (256) runs out,
    // i.e. over the next ~340 frames; check the first 200.
    let heavy = got[256..456].iter().filter(|p| **p == 2).count();
    let rest = got[256..456].iter().filter(|p| **p == 3).count();
    let ratio = heavy as f64 / rest as f64;
    assert!(
        (2.6..=3.4).contains(&ratio),
        "weights 3:1 gave {heavy}:{rest}"
    );
    let drops = counters.ports[1].drops[DropReason::QueueFull as usize].get();
    assert_eq!(drops, 3 * 44, "tail drops counted");
    for c in 0..3 {
        assert_eq!(policy.counter(c, class_counter::QUEUE_DROPS), 44);
        assert_eq!(policy.counter(c, class_counter::PACKETS), 300);
    }
}
