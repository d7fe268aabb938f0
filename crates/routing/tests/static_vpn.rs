//! Static VPN routes and labels in the FIB manager (docs/vrf.md, "Static
//! VPN routes"): a VRF's route to a remote PE pushes the PE's VPN label
//! under whatever the default VRF pushes toward the PE, follows the
//! default VRF's route when it changes, is kept inactive while the PE is
//! unreachable, and gives its NHLFE back when it goes; a VRF's static VPN
//! label pops into that VRF and wins over zebra's entries for it.

use labelfeed::{LabelEntry, LabelMsg, LabelPath, LabelledRoute};
use routing::fib::{Fib, FibConfig, Hop, Source};
use routing::frr::{Prefix, RouteUpdate};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use tables::mpls::{IlmAction, PopAf, VIA_DEFAULT_BIT};

fn a(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn p(s: &str) -> Prefix {
    let (addr, len) = s.split_once('/').unwrap();
    Prefix::new(a(addr), len.parse().unwrap()).unwrap()
}

const PE: &str = "10.255.0.2";

fn pe() -> Ipv4Addr {
    PE.parse().unwrap()
}

/// (port, gateway, pushed labels) the VRF's installed route to `addr`
/// uses, through the default VRF's tables as the workers read them.
fn pushed(vrf: &Mutex<Fib>, core: &Mutex<Fib>, addr: &str) -> Option<(u16, IpAddr, Vec<u32>)> {
    let r = vrf.lock().unwrap().lookup(a(addr))?;
    let t = r.target?;
    assert_ne!(t & VIA_DEFAULT_BIT, 0, "resolved in the default VRF");
    let core = core.lock().unwrap();
    let lfib = core.lfib();
    let res = lfib.resolve(&core.nexthops(), t & !VIA_DEFAULT_BIT, 0)?;
    Some((
        res.next_hop.port,
        res.next_hop.gateway?,
        res.labels.as_slice().to_vec(),
    ))
}

fn nhlfes(core: &Mutex<Fib>) -> usize {
    core.lock().unwrap().mpls_summary().nhlfes
}

#[test]
fn static_vpn_routes_push_the_vpn_label_over_the_transport_to_the_remote_pe() {
    let core = Arc::new(Mutex::new(Fib::new()));
    let vrfs: Vec<Arc<Mutex<Fib>>> = [1001, 1002]
        .into_iter()
        .map(|t| Arc::new(Mutex::new(Fib::with_config(FibConfig::for_vrf(t, 64)))))
        .collect();
    // The same customer prefix in both VRFs, each to its own VPN label of
    // the same PE; an IPv6 prefix too. Set before the VRF is linked to the
    // default VRF (as at start): kept, not installed.
    for (k, v) in vrfs.iter().enumerate() {
        let mut f = v.lock().unwrap();
        f.set_vpn(p("10.2.0.0/24"), pe(), 900_011 + k as u32)
            .unwrap();
        f.set_vpn(p("2001:db8:2::/64"), pe(), 900_011 + k as u32)
            .unwrap();
        let r = f.route(&p("10.2.0.0/24"));
        assert_eq!(r.len(), 1);
        assert!(r[0].unresolvable && !r[0].installed);
        assert_eq!(
            r[0].vpn.map(|v| (v.remote_pe, v.label)),
            Some((pe(), 900_011 + k as u32))
        );
        f.set_core(core.clone(), HashMap::new());
    }
    // The default VRF does not reach the PE yet: still inactive.
    for v in &vrfs {
        assert_eq!(v.lock().unwrap().refresh_vpn(), 2);
        assert!(v.lock().unwrap().lookup(a("10.2.0.9")).is_none());
        assert!(v.lock().unwrap().route(&p("10.2.0.0/24"))[0].unresolvable);
    }
    assert!(pushed(&vrfs[0], &core, "10.2.0.9").is_none());

    // A static route to the PE's loopback: the VPN label alone, to the
    // route's gateway.
    core.lock()
        .unwrap()
        .set(
            p("10.255.0.2/32"),
            Source::Static,
            vec![Hop::via(0, a("10.91.0.2"))],
        )
        .unwrap();
    for (k, v) in vrfs.iter().enumerate() {
        assert_eq!(v.lock().unwrap().refresh_vpn(), 2);
        assert_eq!(v.lock().unwrap().refresh_vpn(), 0, "nothing changed");
        let l = 900_011 + k as u32;
        assert_eq!(
            pushed(v, &core, "10.2.0.9"),
            Some((0, a("10.91.0.2"), vec![l]))
        );
        assert_eq!(
            pushed(v, &core, "2001:db8:2::9"),
            Some((0, a("10.91.0.2"), vec![l]))
        );
        let r = v.lock().unwrap().lookup(a("10.2.0.9")).unwrap();
        assert_eq!(r.source, Source::Static);
        assert_eq!(r.labels, vec![vec![l]]);
        assert_eq!(r.hops[0].gateway, Some(a("10.91.0.2")));
    }
    // One NHLFE per (next hop, stack): the two prefixes of a VRF share.
    assert_eq!(nhlfes(&core), 2);

    // The static route goes; an LDP LSP to the PE (label 16 toward
    // 10.91.0.6 on port 1) takes over: [16, VPN].
    {
        let mut c = core.lock().unwrap();
        c.remove(p("10.255.0.2/32"), Source::Static);
        let lsp = RouteUpdate::Label(LabelMsg::RouteAdd(LabelledRoute {
            prefix: a(PE),
            prefix_len: 32,
            table: 254,
            protocol: 193,
            paths: vec![LabelPath {
                via: Some(a("10.91.0.6")),
                oif: Some(5),
                labels: vec![16],
            }],
        }));
        c.apply_update(&lsp, &|i| (i == 5).then_some(1)).unwrap();
    }
    for (k, v) in vrfs.iter().enumerate() {
        assert_eq!(v.lock().unwrap().refresh_vpn(), 2);
        assert_eq!(
            pushed(v, &core, "10.2.0.9"),
            Some((1, a("10.91.0.6"), vec![16, 900_011 + k as u32]))
        );
    }
    // The LSP's own NHLFE and one per VRF; the old ones were released.
    core.lock().unwrap().maintain(&|| true);
    assert_eq!(nhlfes(&core), 3);

    // The LSP goes and nothing reaches the PE: inactive, kept, shown.
    core.lock()
        .unwrap()
        .remove(p("10.255.0.2/32"), Source::Frr { protocol: 0 });
    for v in &vrfs {
        assert_eq!(v.lock().unwrap().refresh_vpn(), 2);
        assert!(v.lock().unwrap().lookup(a("10.2.0.9")).is_none());
        let r = v.lock().unwrap().route(&p("10.2.0.0/24"));
        assert!(r[0].unresolvable && r[0].vpn.is_some());
    }
    assert_eq!(nhlfes(&core), 0, "every NHLFE back in the pool");

    // A directly connected PE: the PE itself is the neighbour.
    core.lock()
        .unwrap()
        .set(
            p("10.255.0.0/30"),
            Source::Connected,
            vec![Hop::connected(2)],
        )
        .unwrap();
    assert_eq!(vrfs[0].lock().unwrap().refresh_vpn(), 2);
    assert_eq!(
        pushed(&vrfs[0], &core, "10.2.0.9"),
        Some((2, a(PE), vec![900_011]))
    );
    // A route's label changes in place; a route that goes releases its
    // NHLFE at once.
    vrfs[0]
        .lock()
        .unwrap()
        .set_vpn(p("10.2.0.0/24"), pe(), 900_021)
        .unwrap();
    assert_eq!(
        pushed(&vrfs[0], &core, "10.2.0.9"),
        Some((2, a(PE), vec![900_021]))
    );
    assert_eq!(nhlfes(&core), 2, "[900011] for the IPv6 route, [900021]");
    vrfs[0]
        .lock()
        .unwrap()
        .remove(p("10.2.0.0/24"), Source::Static);
    vrfs[0]
        .lock()
        .unwrap()
        .remove(p("2001:db8:2::/64"), Source::Static);
    assert_eq!(nhlfes(&core), 0);
    assert!(vrfs[0].lock().unwrap().vpn_transports().is_empty());
}

#[test]
fn static_vpn_labels_pop_into_their_vrf_and_win_over_zebra() {
    let mut f = Fib::new();
    let lfib = f.lfib();
    // zebra had installed 900002 first (say, a bgpd label).
    let add = |l: u32| {
        RouteUpdate::Label(LabelMsg::LabelAdd(LabelEntry {
            in_label: l,
            protocol: 186,
            paths: vec![LabelPath {
                via: Some(a("10.91.0.2")),
                oif: Some(5),
                labels: vec![77],
            }],
        }))
    };
    let map = |i: u32| (i == 5).then_some(0u16);
    f.apply_update(&add(900_002), &map).unwrap();
    assert!(matches!(lfib.ilm(900_002), Some(IlmAction::Forward { .. })));
    let want: BTreeMap<u32, u16> = [(900_001, 1), (900_002, 2)].into_iter().collect();
    let said = f.set_static_vpn_labels(&want);
    assert_eq!(said.len(), 2, "{said:?}");
    for (l, k) in [(900_001, 1), (900_002, 2)] {
        assert_eq!(
            lfib.ilm(l),
            Some(IlmAction::PopLookup {
                af: PopAf::Any,
                table: k
            })
        );
    }
    // zebra's later entries for a static label are counted, not taken.
    f.apply_update(&add(900_001), &map).unwrap();
    assert_eq!(
        lfib.ilm(900_001),
        Some(IlmAction::PopLookup {
            af: PopAf::Any,
            table: 1
        })
    );
    assert_eq!(f.mpls_summary().counters.static_held, 2);
    let table = f.mpls_table();
    let statics: Vec<(u32, &str, u16)> = table
        .iter()
        .filter(|e| e.protocol == "static")
        .map(|e| (e.in_label, e.action.as_str(), e.vrf))
        .collect();
    assert_eq!(
        statics,
        vec![(900_001, "pop-lookup", 1), (900_002, "pop-lookup", 2)]
    );
    // Unchanged: nothing to do. One goes, one moves to another VRF.
    assert!(f.set_static_vpn_labels(&want).is_empty());
    let want: BTreeMap<u32, u16> = [(900_002, 3)].into_iter().collect();
    f.set_static_vpn_labels(&want);
    assert_eq!(lfib.ilm(900_001), None);
    assert_eq!(
        lfib.ilm(900_002),
        Some(IlmAction::PopLookup {
            af: PopAf::Any,
            table: 3
        })
    );
}
