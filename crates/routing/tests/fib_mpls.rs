//! The FIB manager's label side, fed real netlink bytes as zebra's FPM
//! module sends them (AF_MPLS label entries, IPv4 routes with an MPLS
//! encap), checked through what the workers read: `Lfib::ilm`,
//! `Lfib::resolve` and the LPM.

use routing::fib::Fib;
use routing::frr::netlink::decode;
use routing::frr::FpmEvent;
use std::net::Ipv4Addr;
use tables::mpls::IlmAction;

const AF_INET: u8 = 2;
const AF_MPLS: u8 = 28;

fn attr(t: u16, v: &[u8]) -> Vec<u8> {
    let mut a = Vec::new();
    a.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
    a.extend_from_slice(&t.to_ne_bytes());
    a.extend_from_slice(v);
    while a.len() % 4 != 0 {
        a.push(0);
    }
    a
}

fn msg(ty: u16, family: u8, dst_len: u8, protocol: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![family, dst_len, 0, 0, 254, protocol, 0, 1, 0, 0, 0, 0];
    for a in attrs {
        body.extend_from_slice(a);
    }
    let mut m = Vec::new();
    m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&0x0501u16.to_ne_bytes());
    m.extend_from_slice(&[0; 8]);
    m.extend_from_slice(&body);
    m
}

/// Label stack entries, S set on the last.
fn lses(labels: &[u32]) -> Vec<u8> {
    let mut v = Vec::new();
    for (i, l) in labels.iter().enumerate() {
        let bos = if i + 1 == labels.len() { 0x100 } else { 0 };
        v.extend_from_slice(&(l << 12 | bos).to_be_bytes());
    }
    v
}

fn via(a: &str) -> Vec<u8> {
    let mut v = (AF_INET as u16).to_ne_bytes().to_vec();
    v.extend_from_slice(&a.parse::<Ipv4Addr>().unwrap().octets());
    v
}

fn label_add(in_label: u32, paths: &[(&str, u32, &[u32])]) -> Vec<u8> {
    let mut attrs = vec![attr(1, &lses(&[in_label]))];
    if let [(gw, oif, out)] = paths {
        attrs.push(attr(18, &via(gw)));
        attrs.push(attr(4, &oif.to_ne_bytes()));
        if !out.is_empty() {
            attrs.push(attr(19, &lses(out)));
        }
    } else {
        let mut mp = Vec::new();
        for (gw, oif, out) in paths {
            let mut inner = attr(18, &via(gw));
            if !out.is_empty() {
                inner.extend(attr(19, &lses(out)));
            }
            let len = 8 + inner.len();
            mp.extend_from_slice(&(len as u16).to_ne_bytes());
            mp.extend_from_slice(&[0, 0]);
            mp.extend_from_slice(&(*oif as i32).to_ne_bytes());
            mp.extend(inner);
        }
        attrs.push(attr(9, &mp));
    }
    msg(24, AF_MPLS, 20, 193, &attrs)
}

fn label_del(in_label: u32) -> Vec<u8> {
    msg(25, AF_MPLS, 20, 193, &[attr(1, &lses(&[in_label]))])
}

fn ftn_add(prefix: &str, len: u8, gw: &str, oif: u32, labels: &[u32]) -> Vec<u8> {
    let dst = prefix.parse::<Ipv4Addr>().unwrap().octets();
    let gw = gw.parse::<Ipv4Addr>().unwrap().octets();
    let mut attrs = vec![attr(1, &dst), attr(5, &gw), attr(4, &oif.to_ne_bytes())];
    if !labels.is_empty() {
        attrs.push(attr(21, &1u16.to_ne_bytes()));
        attrs.push(attr(22, &attr(1, &lses(labels))));
    }
    msg(24, AF_INET, len, 193, &attrs)
}

fn route_del(prefix: &str, len: u8) -> Vec<u8> {
    let dst = prefix.parse::<Ipv4Addr>().unwrap().octets();
    msg(25, AF_INET, len, 188, &[attr(1, &dst)])
}

/// Ports are ifindex − 100 for 101..=108.
fn ports(ifindex: u32) -> Option<u16> {
    (101..=108)
        .contains(&ifindex)
        .then(|| (ifindex - 100) as u16)
}

fn feed(fib: &mut Fib, m: &[u8]) {
    let us = decode(m).expect("decodes");
    fib.apply_frr(&FpmEvent::Updates(us), &ports);
}

fn resolve(fib: &Fib, target: u32, hash: u32) -> (u16, Option<std::net::IpAddr>, Vec<u32>) {
    let r = fib
        .lfib()
        .resolve(&fib.nexthops(), target, hash)
        .expect("resolves");
    (
        r.next_hop.port,
        r.next_hop.gateway,
        r.labels.as_slice().to_vec(),
    )
}

fn forward_target(fib: &Fib, label: u32) -> u32 {
    match fib.lfib().ilm(label) {
        Some(IlmAction::Forward { target }) => target,
        other => panic!("label {label}: {other:?}"),
    }
}

#[test]
fn label_entries_program_swap_php_and_ecmp_and_withdraw() {
    let mut fib = Fib::new();
    // Swap 100 → 200 toward 10.0.0.2 on port 1.
    feed(&mut fib, &label_add(100, &[("10.0.0.2", 101, &[200])]));
    let t = forward_target(&fib, 100);
    assert_eq!(
        resolve(&fib, t, 0),
        (1, Some("10.0.0.2".parse().unwrap()), vec![200])
    );
    // PHP: the neighbour advertised implicit null (no RTA_NEWDST).
    feed(&mut fib, &label_add(101, &[("10.0.0.2", 101, &[])]));
    let t = forward_target(&fib, 101);
    assert_eq!(
        resolve(&fib, t, 0),
        (1, Some("10.0.0.2".parse().unwrap()), vec![])
    );
    // ECMP: each member its own stack.
    feed(
        &mut fib,
        &label_add(102, &[("10.0.0.2", 101, &[300]), ("10.0.1.2", 102, &[400])]),
    );
    let t = forward_target(&fib, 102);
    let mut seen: Vec<_> = (0..64).map(|h| resolve(&fib, t, h * 0x0404_0404)).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        vec![
            (1, Some("10.0.0.2".parse().unwrap()), vec![300]),
            (2, Some("10.0.1.2".parse().unwrap()), vec![400]),
        ]
    );
    let table = fib.mpls_table();
    let acts: Vec<(u32, &str)> = table
        .iter()
        .map(|e| (e.in_label, e.action.as_str()))
        .collect();
    assert_eq!(acts, vec![(100, "swap"), (101, "php"), (102, "ecmp")]);
    // Replace: the swap now goes out of port 3 with label 201.
    feed(&mut fib, &label_add(100, &[("10.0.2.2", 103, &[201])]));
    let t = forward_target(&fib, 100);
    assert_eq!(
        resolve(&fib, t, 0),
        (3, Some("10.0.2.2".parse().unwrap()), vec![201])
    );
    // Withdraw.
    feed(&mut fib, &label_del(100));
    feed(&mut fib, &label_del(102));
    assert_eq!(fib.lfib().ilm(100), None);
    assert_eq!(fib.lfib().ilm(102), None);
    assert!(fib.lfib().ilm(101).is_some());
    let s = fib.mpls_summary();
    assert_eq!(s.ilm_entries, 1);
    assert_eq!(s.counters.label_dels, 2);
    // Freed NHLFEs wait in quarantine until maintenance.
    assert!(s.quarantined_nhlfes > 0);
    fib.maintain(&|| true);
    assert_eq!(fib.mpls_summary().quarantined_nhlfes, 0);
    assert_eq!(fib.mpls_summary().nhlfes, 0);
}

#[test]
fn bad_labels_and_foreign_interfaces_are_refused_and_counted() {
    let mut fib = Fib::new();
    // Reserved in-label.
    feed(&mut fib, &label_add(3, &[("10.0.0.2", 101, &[200])]));
    assert_eq!(fib.lfib().ilm(3), None);
    // Five labels: more than one push takes.
    feed(
        &mut fib,
        &label_add(500, &[("10.0.0.2", 101, &[16, 17, 18, 19, 20])]),
    );
    assert_eq!(fib.lfib().ilm(500), None);
    // Out of an interface that is not a port: not installed, kept.
    feed(&mut fib, &label_add(600, &[("10.9.0.2", 99, &[200])]));
    assert_eq!(fib.lfib().ilm(600), None);
    let s = fib.mpls_summary();
    assert_eq!(s.counters.bad_label, 2);
    assert_eq!(s.counters.unresolvable, 1);
    assert_eq!(s.ilm_unresolvable, 1);
    assert_eq!(s.nhlfes, 0, "refused entries hold nothing");
    // A garbage AF_MPLS message is a decode error, not a panic.
    let mut m = label_add(700, &[("10.0.0.2", 101, &[200])]);
    m.truncate(m.len() - 3);
    let n = m.len() as u32;
    m[0..4].copy_from_slice(&n.to_ne_bytes());
    assert!(decode(&m).is_err());
}

#[test]
fn labelled_routes_get_labelled_targets_and_go_back_to_plain() {
    let mut fib = Fib::new();
    feed(
        &mut fib,
        &ftn_add("10.255.0.2", 32, "10.0.0.2", 101, &[300]),
    );
    let t = fib
        .fib4()
        .lookup(u32::from(Ipv4Addr::new(10, 255, 0, 2)))
        .unwrap();
    assert_eq!(
        resolve(&fib, t, 0),
        (1, Some("10.0.0.2".parse().unwrap()), vec![300])
    );
    // Code that does not know labels finds no plain next hop there.
    assert!(fib.nexthops().resolve(t, 0).is_none());
    let s = fib.mpls_summary();
    assert_eq!(s.ftn_routes, 1);
    assert_eq!(s.ftn[0].hops[0].out_labels, vec![300]);
    // zebra changes it (delete + add in one frame): never unrouted.
    let mut frame = route_del("10.255.0.2", 32);
    frame.extend(ftn_add("10.255.0.2", 32, "10.0.0.2", 101, &[301]));
    feed(&mut fib, &frame);
    let t = fib
        .fib4()
        .lookup(u32::from(Ipv4Addr::new(10, 255, 0, 2)))
        .unwrap();
    assert_eq!(resolve(&fib, t, 0).2, vec![301]);
    // Unlabelled again (LDP gone): a plain next hop.
    feed(&mut fib, &ftn_add("10.255.0.2", 32, "10.0.0.2", 101, &[]));
    let t = fib
        .fib4()
        .lookup(u32::from(Ipv4Addr::new(10, 255, 0, 2)))
        .unwrap();
    assert_eq!(fib.nexthops().resolve(t, 0).map(|x| x.1.port), Some(1));
    assert_eq!(fib.mpls_summary().ftn_routes, 0);
    // Withdrawn.
    feed(&mut fib, &route_del("10.255.0.2", 32));
    assert_eq!(
        fib.fib4().lookup(u32::from(Ipv4Addr::new(10, 255, 0, 2))),
        None
    );
    fib.maintain(&|| true);
    assert_eq!(fib.mpls_summary().nhlfes, 0);
}

#[test]
fn resync_sweeps_label_entries_zebra_did_not_replay() {
    let mut fib = Fib::new();
    feed(&mut fib, &label_add(100, &[("10.0.0.2", 101, &[200])]));
    feed(&mut fib, &label_add(101, &[("10.0.0.2", 101, &[201])]));
    fib.apply_frr(
        &FpmEvent::Connected {
            peer: "127.0.0.1:2620".parse().unwrap(),
        },
        &ports,
    );
    feed(&mut fib, &label_add(101, &[("10.0.0.2", 101, &[201])]));
    fib.apply_frr(&FpmEvent::Settled, &ports);
    assert_eq!(fib.lfib().ilm(100), None);
    assert!(fib.lfib().ilm(101).is_some());
    assert_eq!(fib.mpls_summary().counters.swept, 1);
}

/// bgpd's per-VRF VPN label as zebra sends it over FPM (seen in the
/// VPNv4 spike, docs/vrf.md): AF_MPLS, protocol BGP (186), no via, no
/// out-label, `RTA_OIF` = the VRF's label interface.
fn vrf_label_add(in_label: u32, oif: u32) -> Vec<u8> {
    msg(
        24,
        AF_MPLS,
        20,
        186,
        &[attr(1, &lses(&[in_label])), attr(4, &oif.to_ne_bytes())],
    )
}

#[test]
fn vpn_labels_pop_into_the_vrf_of_their_label_interface() {
    use std::collections::HashMap;
    use tables::mpls::PopAf;
    let mut fib = Fib::new();
    let (ia, ib) = (1 << 30, (1 << 30) + 1);
    fib.set_vrf_label_interfaces(HashMap::from([(ia, 1), (ib, 2)]));
    feed(&mut fib, &vrf_label_add(80, ia));
    feed(&mut fib, &vrf_label_add(81, ib));
    // Toward an ordinary interface (`lo` for the default VRF's label):
    // the global table.
    feed(&mut fib, &vrf_label_add(82, 101));
    let pop = |table| {
        Some(IlmAction::PopLookup {
            af: PopAf::Any,
            table,
        })
    };
    assert_eq!(fib.lfib().ilm(80), pop(1));
    assert_eq!(fib.lfib().ilm(81), pop(2));
    assert_eq!(fib.lfib().ilm(82), pop(0));
    // Withdrawn with the VRF's label.
    feed(
        &mut fib,
        &msg(25, AF_MPLS, 20, 186, &[attr(1, &lses(&[80]))]),
    );
    assert_eq!(fib.lfib().ilm(80), None);
    assert_eq!(fib.lfib().ilm(81), pop(2));
}

/// Routes pushing the same stack toward the same neighbour share one
/// NHLFE (imported VPN routes: 1,200 per VRF with the same [transport,
/// VPN]): 600 routes fit in a table of 8 NHLFEs. Before, each route took
/// one and the 131,072-NHLFE table stopped 192 VRFs × 1,200 routes at
/// 131,072 routes.
#[test]
fn labelled_routes_with_the_same_push_share_one_nhlfe() {
    let mut fib = Fib::with_config(routing::fib::FibConfig {
        lfib: tables::mpls::LfibSize {
            nhlfes: 8,
            ..Default::default()
        },
        ..Default::default()
    });
    let pfx = |i: u32| Ipv4Addr::from(0xac10_0000 + (i << 8));
    let mut frame = Vec::new();
    for i in 0..300 {
        frame.extend(ftn_add(
            &pfx(i).to_string(),
            24,
            "10.0.0.2",
            101,
            &[16, 500],
        ));
        frame.extend(ftn_add(
            &pfx(i + 300).to_string(),
            24,
            "10.0.0.2",
            101,
            &[16, 501],
        ));
    }
    feed(&mut fib, &frame);
    let s = fib.mpls_summary();
    assert_eq!((s.ftn_routes, s.nhlfes, s.counters.nhlfe_full), (600, 2, 0));
    for (i, labels) in [
        (0, vec![16, 500]),
        (299, vec![16, 500]),
        (300, vec![16, 501]),
    ] {
        let t = fib.fib4().lookup(u32::from(pfx(i)) + 7).unwrap();
        assert_eq!(
            resolve(&fib, t, 0),
            (1, Some("10.0.0.2".parse().unwrap()), labels)
        );
    }
    // One route's label changes: a third NHLFE, the others keep theirs.
    feed(
        &mut fib,
        &ftn_add(&pfx(0).to_string(), 24, "10.0.0.2", 101, &[16, 502]),
    );
    let t = fib.fib4().lookup(u32::from(pfx(0))).unwrap();
    assert_eq!(resolve(&fib, t, 0).2, vec![16, 502]);
    let t = fib.fib4().lookup(u32::from(pfx(1))).unwrap();
    assert_eq!(resolve(&fib, t, 0).2, vec![16, 500]);
    assert_eq!(fib.mpls_summary().nhlfes, 3);
    // Withdrawn: each NHLFE goes when its last route does.
    let mut frame = Vec::new();
    for i in 1..600 {
        frame.extend(route_del(&pfx(i).to_string(), 24));
    }
    feed(&mut fib, &frame);
    fib.maintain(&|| true);
    assert_eq!(fib.mpls_summary().nhlfes, 1, "route 0's [16, 502] stays");
    feed(&mut fib, &route_del(&pfx(0).to_string(), 24));
    fib.maintain(&|| true);
    let s = fib.mpls_summary();
    assert_eq!((s.nhlfes, s.quarantined_nhlfes), (0, 0));
    assert_eq!(fib.refused(), 0);
    // Nine distinct stacks in eight NHLFEs: the ninth route is refused,
    // and counted where `show vrf` finds it.
    let mut frame = Vec::new();
    for i in 0..9 {
        frame.extend(ftn_add(
            &pfx(i).to_string(),
            24,
            "10.0.0.2",
            101,
            &[16, 600 + i],
        ));
    }
    feed(&mut fib, &frame);
    assert_eq!((fib.mpls_summary().ftn_routes, fib.refused()), (8, 1));
}
