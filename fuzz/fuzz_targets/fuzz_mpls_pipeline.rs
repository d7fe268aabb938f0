//! Fuzz the MPLS stage: arbitrary frames (byte 0 picks the headroom and
//! whether an 802.1Q tag precedes 0x8847) through `process_labelled`
//! against a small LFIB with every action kind (swap, swap+push, PHP,
//! pop-and-lookup, pop to a pseudowire with a control word, a backup path
//! behind a protection id that byte 1 may take down). Nothing may panic
//! and every span returned must lie in the buffer.
#![no_main]

use pipeline::mpls::{process_labelled, MplsConfig, MplsTables, MplsVerdict, TtlMode};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;
use tables::mpls::{
    IlmAction, LabelCounters, LabelStack, Lfib, LfibSize, Nhlfe, Path, PopAf, Pseudowire, PwType,
};
use tables::{NextHop, NextHopTable};
use wire::mpls::Span;

struct Bed {
    lfib: Lfib,
    nh: NextHopTable,
    counters: LabelCounters,
}

fn bed() -> &'static Bed {
    static B: OnceLock<Bed> = OnceLock::new();
    B.get_or_init(|| {
        let nh = NextHopTable::new(4, 1);
        nh.set(1, NextHop { port: 1, gateway: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)) })
            .unwrap();
        let lfib = Lfib::new(LfibSize { nhlfes: 8, pseudowires: 4, acs: 4, protections: 4 });
        let p = |l: &[u32]| Path { next_hop: 1, labels: LabelStack::new(l).unwrap() };
        for (i, (pri, bak)) in [
            (&[100u32][..], None),
            (&[300, 200][..], None),
            (&[][..], None),
            (&[50][..], Some(&[60u32, 70, 80, 90][..])),
        ]
        .into_iter()
        .enumerate()
        {
            lfib.set_nhlfe(
                i as u32,
                &Nhlfe { primary: p(pri), backup: bak.map(p), protection: Some(1) },
            )
            .unwrap();
        }
        for (l, a) in [
            (16, IlmAction::Forward { target: tables::NHLFE_BIT }),
            (17, IlmAction::Forward { target: tables::NHLFE_BIT | 1 }),
            (18, IlmAction::Forward { target: tables::NHLFE_BIT | 2 }),
            (19, IlmAction::Forward { target: tables::NHLFE_BIT | 3 }),
            (20, IlmAction::PopLookup { af: PopAf::Any, table: 1 }),
            (21, IlmAction::PopToPseudowire { pw: 0 }),
            (22, IlmAction::PopToPseudowire { pw: 1 }),
        ] {
            lfib.set_ilm(l, a).unwrap();
        }
        let pw = Pseudowire {
            ac: 0,
            pw_type: PwType::Ethernet,
            control_word: true,
            remote_label: 500,
            transport: tables::NHLFE_BIT,
        };
        lfib.set_pseudowire(0, &pw).unwrap();
        lfib.set_pseudowire(1, &Pseudowire { ac: 1, control_word: false, ..pw }).unwrap();
        Bed { lfib, nh, counters: LabelCounters::default() }
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&[sel, prot], frame)) = data.split_first_chunk::<2>() else {
        return;
    };
    let b = bed();
    let _ = b.lfib.set_protection(1, prot & 1 == 1);
    let cfg = MplsConfig {
        ttl: if sel & 0x80 != 0 { TtlMode::Pipe } else { TtlMode::Uniform },
        remark: sel & 0x40 != 0,
        ..MplsConfig::default()
    };
    let t = MplsTables { lfib: &b.lfib, next_hops: &b.nh, counters: &b.counters, cfg: &cfg };
    let headroom = (sel & 0x1f) as usize;
    let hdr = if sel & 0x20 != 0 { 18 } else { 14 };
    let mut buf = vec![0u8; headroom + frame.len()];
    buf[headroom..].copy_from_slice(frame);
    let f = Span { start: headroom, len: frame.len() };
    match process_labelled(&t, &mut buf, f, hdr, None) {
        MplsVerdict::Forward { span, .. } | MplsVerdict::Route { span, .. } => {
            assert!(span.of(&buf).is_ok())
        }
        MplsVerdict::Pseudowire { inner, .. } => assert!(inner.of(&buf).is_ok()),
        _ => {}
    }
});
