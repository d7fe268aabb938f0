//! The MPLS stage on real frame bytes: inputs built by scapy (an
//! independent encoder), outputs read back by tshark (an independent
//! dissector): labels, TC, bottom-of-stack, TTLs, IPv4 checksums and the
//! customer frame inside a pseudowire. Skips (saying so) without python3
//! with scapy or tshark (`scripts/setup.sh` installs both).

use pipeline::mpls::{
    encap_pseudowire, process_labelled, push_ftn, resolve_pseudowire, MplsConfig, MplsDrop,
    MplsPunt, MplsTables, MplsVerdict, TtlMode,
};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use tables::mpls::{
    IlmAction, LabelCounters, LabelStack, Lfib, LfibSize, Nhlfe, Path, PopAf, Pseudowire, PwType,
};
use tables::{NextHop, NextHopTable};
use wire::mpls::{OuterHeader, Span};

const HEADROOM: usize = 64;

/// Frames built by scapy, by name.
fn scapy_frames() -> Option<HashMap<String, Vec<u8>>> {
    let script = r#"
from scapy.all import Ether, IP, IPv6, UDP, Raw, Dot1Q
from scapy.contrib.mpls import MPLS
E = dict(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")
udp = UDP(sport=1234, dport=5678)/Raw(b"lanyard-mpls-test")
ip4 = IP(src="192.0.2.1", dst="198.51.100.7", ttl=64)/udp
ip6 = IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=30)/udp
cust = Ether(dst="00:00:5e:00:53:01", src="00:00:5e:00:53:02")/Dot1Q(vlan=42, prio=3)/IP(src="10.9.9.1", dst="10.9.9.2", ttl=7)/udp
# A first nibble of 0 cannot be told from a control word (RFC 4385): the
# frame sent without one starts with a MAC whose first nibble is 1.
cust2 = Ether(dst="12:00:5e:00:53:01", src="00:00:5e:00:53:02")/IP(src="10.9.9.1", dst="10.9.9.2")/udp
f = {
  "swap": Ether(**E)/MPLS(label=100, cos=5, s=1, ttl=64)/ip4,
  "swap_push": Ether(**E)/MPLS(label=101, cos=2, s=1, ttl=64)/ip4,
  "php": Ether(**E)/MPLS(label=102, cos=0, s=1, ttl=10)/ip4,
  "php_stack": Ether(**E)/MPLS(label=102, cos=0, s=0, ttl=10)/MPLS(label=555, s=1, ttl=255)/ip4,
  "exp_null6": Ether(**E)/MPLS(label=2, s=1, ttl=5)/ip6,
  "ttl1": Ether(**E)/MPLS(label=100, s=1, ttl=1)/ip4,
  "unknown": Ether(**E)/MPLS(label=999, s=1, ttl=64)/ip4,
  "alert": Ether(**E)/MPLS(label=1, s=0, ttl=64)/MPLS(label=100, s=1, ttl=64)/ip4,
  "vpn": Ether(**E)/MPLS(label=103, s=0, ttl=20)/MPLS(label=104, s=1, ttl=50)/ip4,
  "pw_cw": Ether(bytes(Ether(**E)/MPLS(label=500, s=1, ttl=255)) + b"\x00\x00\x00\x00" + bytes(cust)),
  "pw_nocw_bad": Ether(bytes(Ether(**E)/MPLS(label=500, s=1, ttl=255)) + bytes(cust2)),
  "ip4": Ether(**E)/ip4,
  "cust": cust,
}
for k, v in f.items():
    print(k, bytes(v).hex())
"#;
    let out = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let mut m = HashMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let (k, h) = l.split_once(' ')?;
        let b = (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect();
        m.insert(k.to_string(), b);
    }
    Some(m)
}

/// tshark's view of one frame: each field's values (comma-joined).
fn tshark(frame: &[u8], fields: &[&str], decode_as: &[&str]) -> Vec<String> {
    testkit::tshark::fields(frame, fields, decode_as).expect("tshark")
}

fn tools_missing() -> Option<&'static str> {
    if Command::new("tshark").arg("-v").output().is_err() {
        return Some("tshark");
    }
    None
}

struct Bed {
    lfib: Lfib,
    nh: NextHopTable,
    counters: LabelCounters,
    cfg: MplsConfig,
}

impl Bed {
    fn new(ttl: TtlMode) -> Bed {
        let nh = NextHopTable::new(16, 4);
        let gw = |x| Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, x)));
        nh.set(
            1,
            NextHop {
                port: 3,
                gateway: gw(1),
            },
        )
        .unwrap();
        nh.set(
            2,
            NextHop {
                port: 4,
                gateway: gw(2),
            },
        )
        .unwrap();
        let lfib = Lfib::new(LfibSize {
            nhlfes: 64,
            pseudowires: 16,
            acs: 16,
            protections: 8,
        });
        let path = |nh, l: &[u32]| Path {
            next_hop: nh,
            labels: LabelStack::new(l).unwrap(),
        };
        let swap = lfib
            .set_nhlfe(
                0,
                &Nhlfe {
                    primary: path(1, &[200]),
                    backup: Some(path(2, &[16000, 210])),
                    protection: Some(5),
                },
            )
            .unwrap();
        let swap_push = lfib
            .set_nhlfe(
                1,
                &Nhlfe {
                    primary: path(1, &[300, 201]),
                    ..Nhlfe::default()
                },
            )
            .unwrap();
        let php = lfib
            .set_nhlfe(
                2,
                &Nhlfe {
                    primary: path(2, &[]),
                    ..Nhlfe::default()
                },
            )
            .unwrap();
        let transport = lfib
            .set_nhlfe(
                3,
                &Nhlfe {
                    primary: path(1, &[16001]),
                    ..Nhlfe::default()
                },
            )
            .unwrap();
        lfib.set_ilm(100, IlmAction::Forward { target: swap })
            .unwrap();
        lfib.set_ilm(101, IlmAction::Forward { target: swap_push })
            .unwrap();
        lfib.set_ilm(102, IlmAction::Forward { target: php })
            .unwrap();
        lfib.set_ilm(
            103,
            IlmAction::PopLookup {
                af: PopAf::Any,
                table: 0,
            },
        )
        .unwrap();
        lfib.set_ilm(
            104,
            IlmAction::PopLookup {
                af: PopAf::Ipv4,
                table: 7,
            },
        )
        .unwrap();
        lfib.set_ilm(500, IlmAction::PopToPseudowire { pw: 9 })
            .unwrap();
        lfib.set_pseudowire(
            9,
            &Pseudowire {
                ac: 4,
                pw_type: PwType::EthernetTagged,
                control_word: true,
                remote_label: 777,
                transport,
            },
        )
        .unwrap();
        Bed {
            lfib,
            nh,
            counters: LabelCounters::default(),
            cfg: MplsConfig {
                ttl,
                ..MplsConfig::default()
            },
        }
    }

    fn tables(&self) -> MplsTables<'_> {
        MplsTables {
            lfib: &self.lfib,
            next_hops: &self.nh,
            counters: &self.counters,
            cfg: &self.cfg,
        }
    }

    /// Runs the stage on `frame` placed after the headroom.
    fn run(&self, frame: &[u8]) -> (MplsVerdict, Vec<u8>) {
        let mut buf = vec![0u8; HEADROOM + frame.len() + 64];
        buf[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
        let f = Span {
            start: HEADROOM,
            len: frame.len(),
        };
        let v = process_labelled(&self.tables(), &mut buf, f, 14, None);
        let span = match v {
            MplsVerdict::Forward { span, .. } | MplsVerdict::Route { span, .. } => span,
            MplsVerdict::Pseudowire { inner, .. } => inner,
            _ => f,
        };
        (v, span.of(&buf).unwrap().to_vec())
    }
}

#[test]
fn label_operations_checked_by_tshark() {
    if let Some(t) = tools_missing() {
        println!("SKIPPED: needs {t}");
        return;
    }
    let Some(fr) = scapy_frames() else {
        println!("SKIPPED: needs python3 with scapy");
        return;
    };
    let mpls_fields = [
        "mpls.label",
        "mpls.exp",
        "mpls.bottom",
        "mpls.ttl",
        "ip.ttl",
        "ip.checksum.status",
    ];
    let bed = Bed::new(TtlMode::Uniform);

    // Swap: label 100 → 200, TTL 64 → 63, TC kept, IP untouched.
    let (v, out) = bed.run(&fr["swap"]);
    assert!(
        matches!(
            v,
            MplsVerdict::Forward {
                port: 3,
                next_hop_id: 1,
                on_backup: false,
                class: 5,
                ..
            }
        ),
        "{v:?}"
    );
    assert_eq!(
        tshark(&out, &mpls_fields, &[]),
        ["200", "5", "1", "63", "64", "1"]
    );
    assert_eq!(out.len(), fr["swap"].len());
    assert_eq!(bed.counters.get(100), (1, fr["swap"].len() as u64));

    // Swap and push: 101 → [300, 201]; both TTL 63 (uniform).
    let (v, out) = bed.run(&fr["swap_push"]);
    assert!(matches!(v, MplsVerdict::Forward { port: 3, .. }), "{v:?}");
    assert_eq!(
        tshark(&out, &mpls_fields, &[]),
        ["300,201", "2,2", "0,1", "63,63", "64", "1"]
    );

    // PHP, uniform: the IP TTL becomes min(64, 10 - 1) = 9, checksum fixed.
    let (v, out) = bed.run(&fr["php"]);
    assert!(matches!(v, MplsVerdict::Forward { port: 4, .. }), "{v:?}");
    assert_eq!(&out[12..14], &[0x08, 0x00]);
    assert_eq!(
        tshark(
            &out,
            &["mpls.label", "ip.ttl", "ip.checksum.status", "udp.srcport"],
            &[]
        ),
        ["", "9", "1", "1234"]
    );
    // PHP exposing another label: it inherits TTL 9.
    let (_, out) = bed.run(&fr["php_stack"]);
    assert_eq!(
        tshark(&out, &mpls_fields, &[]),
        ["555", "0", "1", "9", "64", "1"]
    );

    // IPv6 explicit null at the egress: hop limit min(30, 5).
    let (v, out) = bed.run(&fr["exp_null6"]);
    assert!(
        matches!(
            v,
            MplsVerdict::Route {
                ipv6: true,
                table: 0,
                ..
            }
        ),
        "{v:?}"
    );
    assert_eq!(
        tshark(&out, &["ipv6.hlim", "udp.dstport"], &[]),
        ["5", "5678"]
    );

    // Pop and look up the next label (103), then pop to IP table 7 (104):
    // IP TTL min(64, 20, 50) = 20.
    let (v, out) = bed.run(&fr["vpn"]);
    assert!(
        matches!(
            v,
            MplsVerdict::Route {
                ipv6: false,
                table: 7,
                ..
            }
        ),
        "{v:?}"
    );
    assert_eq!(
        tshark(&out, &["ip.ttl", "ip.checksum.status"], &[]),
        ["20", "1"]
    );

    // TTL 1 on a label to forward: punted; unknown label and router alert.
    assert_eq!(
        bed.run(&fr["ttl1"]).0,
        MplsVerdict::Punt(MplsPunt::TtlExpired)
    );
    assert_eq!(
        bed.run(&fr["unknown"]).0,
        MplsVerdict::Drop(MplsDrop::UnknownLabel)
    );
    assert_eq!(
        bed.run(&fr["alert"]).0,
        MplsVerdict::Punt(MplsPunt::RouterAlert)
    );

    // Pseudowire with control word: the customer frame comes out intact.
    let (v, inner) = bed.run(&fr["pw_cw"]);
    assert!(
        matches!(v, MplsVerdict::Pseudowire { pw: 9, ac: 4, .. }),
        "{v:?}"
    );
    assert_eq!(inner, fr["cust"]);
    // Without the control word the pseudowire expects, it is refused.
    assert_eq!(
        bed.run(&fr["pw_nocw_bad"]).0,
        MplsVerdict::Drop(MplsDrop::ControlWord)
    );

    // Fast reroute: protection id 5 down → label 100 takes the backup.
    bed.lfib.set_protection(5, true).unwrap();
    let (v, out) = bed.run(&fr["swap"]);
    assert!(
        matches!(
            v,
            MplsVerdict::Forward {
                port: 4,
                on_backup: true,
                ..
            }
        ),
        "{v:?}"
    );
    assert_eq!(
        tshark(&out, &mpls_fields, &[]),
        ["16000,210", "5,5", "0,1", "63,63", "64", "1"]
    );
    bed.lfib.set_protection(5, false).unwrap();
}

#[test]
fn pipe_mode_leaves_ip_ttl() {
    if tools_missing().is_some() {
        println!("SKIPPED: needs tshark");
        return;
    }
    let Some(fr) = scapy_frames() else {
        println!("SKIPPED: needs python3 with scapy");
        return;
    };
    let bed = Bed::new(TtlMode::Pipe);
    let (_, out) = bed.run(&fr["php"]);
    assert_eq!(
        tshark(&out, &["ip.ttl", "ip.checksum.status"], &[]),
        ["64", "1"]
    );
    let (_, out) = bed.run(&fr["swap_push"]);
    assert_eq!(
        tshark(&out, &["mpls.label", "mpls.ttl"], &[]),
        ["300,201", "255,63"]
    );
}

#[test]
fn ingress_push_and_pseudowire_encap_checked_by_tshark() {
    if tools_missing().is_some() {
        println!("SKIPPED: needs tshark");
        return;
    }
    let Some(fr) = scapy_frames() else {
        println!("SKIPPED: needs python3 with scapy");
        return;
    };
    let bed = Bed::new(TtlMode::Uniform);
    // FTN: an IPv4 packet routed to a labelled next hop.
    let r = bed.lfib.resolve(&bed.nh, tables::NHLFE_BIT | 1, 0).unwrap();
    let ip4 = &fr["ip4"];
    let mut buf = vec![0u8; HEADROOM + ip4.len()];
    buf[HEADROOM..].copy_from_slice(ip4);
    let g = push_ftn(
        &bed.cfg,
        &mut buf,
        Span {
            start: HEADROOM,
            len: ip4.len(),
        },
        14,
        &r,
        6,
    )
    .unwrap();
    assert_eq!(
        tshark(
            g.of(&buf).unwrap(),
            &[
                "mpls.label",
                "mpls.exp",
                "mpls.bottom",
                "mpls.ttl",
                "ip.ttl"
            ],
            &[]
        ),
        ["300,201", "6,6", "0,1", "64,64", "64"]
    );

    // Pseudowire encapsulation of the tagged customer frame with CW.
    let (p, r) = resolve_pseudowire(&bed.tables(), 9, 0).unwrap();
    let cust = &fr["cust"];
    let mut buf = vec![0u8; HEADROOM + cust.len()];
    buf[HEADROOM..].copy_from_slice(cust);
    let outer = OuterHeader {
        dst: [0x02, 0, 0, 0, 0, 0x0a],
        src: [0x02, 0, 0, 0, 0, 0x0b],
        vlan_tci: None,
    };
    let g = encap_pseudowire(
        &bed.cfg,
        &mut buf,
        Span {
            start: HEADROOM,
            len: cust.len(),
        },
        &outer,
        &p,
        &r,
        3,
    )
    .unwrap();
    let out = g.of(&buf).unwrap();
    let t = tshark(
        out,
        &[
            "mpls.label",
            "mpls.bottom",
            "mpls.ttl",
            "eth.src",
            "vlan.id",
            "ip.ttl",
            "udp.dstport",
        ],
        &["mpls.label==777,pwethcw"],
    );
    assert_eq!(t[0], "16001,777");
    assert_eq!(t[1], "0,1");
    assert_eq!(t[2], "255,255");
    assert_eq!(t[3], "02:00:00:00:00:0b,00:00:5e:00:53:02");
    assert_eq!(&t[4..], ["42", "7", "5678"]);
    assert_eq!(&out[out.len() - cust.len()..], &cust[..]);
}

/// Random and mutated labelled frames through the stage, both TTL modes,
/// protection up and down: no panic, every returned span inside the
/// buffer (the stable twin of fuzz/fuzz_targets/fuzz_mpls_pipeline.rs).
#[test]
fn random_frames_never_panic() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for ttl in [TtlMode::Uniform, TtlMode::Pipe] {
        let bed = Bed::new(ttl);
        for i in 0..100_000u32 {
            bed.lfib.set_protection(5, i % 7 == 0).unwrap();
            let len = next() as usize % 120;
            let mut frame = vec![0u8; len];
            for b in frame.iter_mut() {
                *b = next() as u8;
            }
            if len >= 18 {
                frame[12..14].copy_from_slice(&[0x88, 0x47]);
                // Mostly installed labels, S set half the time.
                let label = [100u32, 101, 102, 103, 104, 500, 0, 1, 2, 3, 7][next() as usize % 11];
                let bos = if next() % 2 == 0 { 0x100 } else { 0 };
                let ttl = next() as u32 & 0xff;
                frame[14..18].copy_from_slice(&(label << 12 | bos | ttl).to_be_bytes());
            }
            let headroom = next() as usize % 40;
            let mut buf = vec![0u8; headroom + len];
            buf[headroom..].copy_from_slice(&frame);
            let f = Span {
                start: headroom,
                len,
            };
            let hdr = if next() % 4 == 0 { 18 } else { 14 };
            match process_labelled(&bed.tables(), &mut buf, f, hdr, None) {
                MplsVerdict::Forward { span, .. } | MplsVerdict::Route { span, .. } => {
                    assert!(span.of(&buf).is_ok())
                }
                MplsVerdict::Pseudowire { inner, .. } => assert!(inner.of(&buf).is_ok()),
                _ => {}
            }
        }
    }
}
