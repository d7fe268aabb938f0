//! Arbitrary frames through the L2 stage on every port mode: a verdict for
//! every frame, never a panic. Input: [port, len_hi, len_lo, bytes...]*.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};
use tables::l2::{PortMode, TPID_8021AD, TPID_8021Q};
use tables::{L2Tables, LearnGate, LearnQueue, MacTable, PortEntry, Tables, VlanSet};

fn port(mode: PortMode, pvid: u16, vlans: &[u16], tpid: u16) -> PortEntry {
    PortEntry::new(mode, pvid, vlans, tpid)
}

struct Rig {
    t: Tables,
    q: LearnQueue,
    c: pipeline::WorkerCounters,
}

fn rig() -> &'static Rig {
    static R: OnceLock<Rig> = OnceLock::new();
    R.get_or_init(|| Rig {
        t: Tables {
            l2: L2Tables::new(
                vec![
                    port(PortMode::Access, 10, &[10], TPID_8021Q),
                    port(PortMode::Trunk, 1, &[1, 10, 20], TPID_8021Q),
                    port(PortMode::Tunnel, 500, &[500], TPID_8021Q),
                    port(PortMode::Trunk, 0, &[500], TPID_8021AD),
                ],
                &[(1, true, 0), (10, true, 0), (20, true, 0), (500, true, 0)],
            ),
            mac: Arc::new(MacTable::new(4096)),
            learn_gate: Arc::new(LearnGate::default()),
        },
        q: LearnQueue::new(4096),
        c: pipeline::WorkerCounters::default(),
    })
}

fuzz_target!(|data: &[u8]| {
    let r = rig();
    let mut batch = io::FrameBatch::new();
    let mut rest = data;
    while rest.len() >= 3 {
        let p = (rest[0] % 5) as u16;
        let len = (u16::from_be_bytes([rest[1], rest[2]]) as usize).min(rest.len() - 3);
        if !batch.push(p, &rest[3..3 + len]) {
            break;
        }
        rest = &rest[3 + len..];
    }
    let mut out = pipeline::Verdicts::default();
    pipeline::process(&r.t, &batch, 1, &mut out, &r.q, &r.c);
    assert_eq!(out.len, batch.len());
    while let Some(ev) = r.q.pop() {
        r.t.mac.upsert(ev.key, tables::MacEntry { port: ev.port, is_static: false, seen: 1 });
    }
});
