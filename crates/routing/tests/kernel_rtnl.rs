//! `routing::kernel` against a real kernel: each test builds its own pair of
//! network namespaces (`lykrn-<pid>-<n>`, removed on drop, panics included)
//! joined by a veth pair `lyk0` ↔ `lyk1`, opens its sockets inside namespace
//! A from a thread that entered it, and uses them from the test thread.
//!
//! Needs root and iproute2; otherwise prints SKIPPED and passes.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, UdpSocket};
use std::time::{Duration, Instant};

use routing::kernel::neigh::NUD_PERMANENT;
use routing::kernel::{is_exists, is_overrun, NeighborEvent, NeighborMonitor, Rtnl};
use testkit::netns::{ip, veth};
use testkit::{require_root, Netns};

const A_IF: &str = "lyk0";
const B_IF: &str = "lyk1";
const A4: &str = "10.77.0.1";
const B4: &str = "10.77.0.2";
const A6: &str = "2001:db8:77::1";
const B6: &str = "2001:db8:77::2";
/// Our routes' `rtm_protocol`, printed as a number by `ip -N`.
const PROTO: u8 = 77;

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Namespace A (the one under test) and B (the far end of the veth).
struct Pair {
    a: Netns,
    b: Netns,
}

impl Pair {
    /// Both namespaces, the veth pair, IPv6 enabled on it without DAD (so
    /// addresses are usable at once).
    fn new() -> Pair {
        let a = Netns::new("lykrn-").expect("netns A");
        let b = Netns::new("lykrn-").expect("netns B");
        veth(&a, A_IF, &b, B_IF, 1500).expect("veth");
        for (ns, ifname) in [(&a, A_IF), (&b, B_IF)] {
            ns.sysctl(&format!("net.ipv6.conf.{ifname}.accept_dad"), "0")
                .unwrap();
            ns.sysctl(&format!("net.ipv6.conf.{ifname}.disable_ipv6"), "0")
                .unwrap();
        }
        Pair { a, b }
    }

    fn rtnl(ns: &Netns) -> Rtnl {
        ns.run(Rtnl::open).unwrap().expect("Rtnl::open")
    }

    fn monitor(ns: &Netns) -> NeighborMonitor {
        ns.run(NeighborMonitor::open)
            .unwrap()
            .expect("NeighborMonitor::open")
    }

    /// `ip -N -n <ns> args...` stdout.
    fn ip_out(ns: &Netns, args: &[&str]) -> String {
        let mut all = vec!["-N", "-n", ns.name()];
        all.extend_from_slice(args);
        String::from_utf8_lossy(&ip(&all).unwrap().stdout).into_owned()
    }

    /// Addresses on both ends (A through `Rtnl`, B too).
    fn addresses(&self, rt_a: &mut Rtnl) {
        let ia = rt_a.link_index(A_IF).unwrap();
        rt_a.add_address(ia, addr(A4), 24).unwrap();
        rt_a.add_address(ia, addr(A6), 64).unwrap();
        let mut rt_b = Pair::rtnl(&self.b);
        let ib = rt_b.link_index(B_IF).unwrap();
        rt_b.add_address(ib, addr(B4), 24).unwrap();
        rt_b.add_address(ib, addr(B6), 64).unwrap();
        wait_not_tentative(&self.a, A_IF);
        wait_not_tentative(&self.b, B_IF);
    }
}

/// A new IPv6 address is tentative until the kernel's DAD work has run,
/// even with `accept_dad = 0` (it then only skips the probes): until then
/// it cannot be a source (EADDRNOTAVAIL) nor answer solicitations.
fn wait_not_tentative(ns: &Netns, ifname: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = Pair::ip_out(
            ns,
            &["-6", "-o", "addr", "show", "dev", ifname, "tentative"],
        );
        if out.trim().is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "still tentative: {out}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn mac_of(ns: &Netns, ifname: &str) -> [u8; 6] {
    // Without -N: with it the link type prints as a number.
    let out = ip(&["-n", ns.name(), "-o", "link", "show", "dev", ifname]).unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    let hex = out
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap_or_else(|| panic!("no MAC in {out:?}"));
    let mut mac = [0u8; 6];
    for (i, b) in hex.split(':').enumerate() {
        mac[i] = u8::from_str_radix(b, 16).unwrap();
    }
    mac
}

/// One UDP datagram from inside `ns` to `dst` (discard port): the kernel
/// must resolve `dst` first, which is what creates the neighbour entry.
fn poke(ns: &Netns, dst: IpAddr) {
    ns.run(move || -> io::Result<()> {
        let any: IpAddr = if dst.is_ipv4() {
            addr("0.0.0.0")
        } else {
            addr("::")
        };
        let s = UdpSocket::bind((any, 0))?;
        s.send_to(b"lanyard", (dst, 9))?;
        Ok(())
    })
    .unwrap()
    .unwrap_or_else(|e| {
        panic!(
            "sending to {dst}: {e}\n{}",
            Pair::ip_out(ns, &["addr", "show"])
        )
    });
}

/// Reads events until one satisfies `want` (returned) or `timeout` passes
/// (panics); every event read is appended to `log`.
fn wait_for(
    mon: &mut NeighborMonitor,
    timeout: Duration,
    log: &mut Vec<NeighborEvent>,
    want: impl Fn(&NeighborEvent) -> bool,
) -> NeighborEvent {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        for ev in mon.recv(Duration::from_millis(100)).expect("recv") {
            log.push(ev);
            if want(&ev) {
                return ev;
            }
        }
    }
    panic!("event not seen within {timeout:?}; got {log:#?}");
}

/// Dumps the table as a mirror would: the last event per (ifindex, ip),
/// asking again after an overrun. Returns the table and how many overruns
/// were met on the way.
fn dump(mon: &mut NeighborMonitor) -> (BTreeMap<(u32, IpAddr), NeighborEvent>, usize) {
    mon.request_dump().unwrap();
    assert!(mon.dump_in_progress());
    let mut table = BTreeMap::new();
    let mut overruns = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while mon.dump_in_progress() {
        assert!(Instant::now() < deadline, "dump did not finish");
        match mon.recv(Duration::from_millis(100)) {
            Ok(evs) => {
                for ev in evs {
                    table.insert((ev.ifindex, ev.ip), ev);
                }
            }
            Err(e) if is_overrun(&e) => {
                eprintln!("overrun in dump after {} entries", table.len());
                overruns += 1;
                mon.request_dump().unwrap();
            }
            Err(e) => panic!("recv: {e}"),
        }
    }
    (table, overruns)
}

fn states(log: &[NeighborEvent], ip: IpAddr) -> Vec<String> {
    log.iter()
        .filter(|e| e.ip == ip)
        .map(|e| {
            format!(
                "{}{:#04x}{}",
                if e.deleted { "DEL " } else { "" },
                e.state,
                if e.mac.is_some() { "+mac" } else { "" }
            )
        })
        .collect()
}

#[test]
fn kernel_rtnl_links_addresses_and_routes() {
    require_root!();
    let pair = Pair::new();
    let a = &pair.a;
    let mut rt = Pair::rtnl(a);

    // Interface indexes come from the socket's namespace, not the caller's
    // (this test thread is in the root namespace, where lyk0 is unknown).
    let idx = rt.link_index(A_IF).unwrap();
    let shown = Pair::ip_out(a, &["-o", "link", "show", "dev", A_IF]);
    assert!(shown.starts_with(&format!("{idx}: {A_IF}@")), "{shown}");
    assert_eq!(rt.link_index("lo").unwrap(), 1);
    let e = rt.link_index("nosuch0").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
    let mut root = Rtnl::open().unwrap();
    assert_eq!(
        root.link_index(A_IF).unwrap_err().raw_os_error(),
        Some(libc::ENODEV)
    );
    for bad in ["", "a-name-far-too-long", "a/b"] {
        assert_eq!(
            rt.link_index(bad).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    // Addresses: added, visible, a second add is EEXIST.
    rt.add_address(idx, addr(A4), 24).unwrap();
    rt.add_address(idx, addr(A6), 64).unwrap();
    let shown = Pair::ip_out(a, &["-o", "addr", "show", "dev", A_IF]);
    assert!(shown.contains(&format!("inet {A4}/24")), "{shown}");
    assert!(shown.contains(&format!("inet6 {A6}/64")), "{shown}");
    for (x, len) in [(A4, 24), (A6, 64)] {
        let e = rt.add_address(idx, addr(x), len).unwrap_err();
        assert!(is_exists(&e), "{x}: {e}");
    }
    let e = rt.add_address(9999, addr("10.1.1.1"), 24).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
    // The kernel added the connected route.
    let shown = Pair::ip_out(a, &["route", "show", "10.77.0.0/24"]);
    assert!(shown.contains("dev lyk0"), "{shown}");

    // Routes: via a gateway, replaced, on-link, default, IPv6.
    rt.replace_route(addr("10.99.0.0"), 16, Some(addr(B4)), None, PROTO)
        .unwrap();
    let shown = Pair::ip_out(a, &["route", "show", "10.99.0.0/16"]);
    assert_eq!(
        shown.trim(),
        format!("10.99.0.0/16 via {B4} dev lyk0 proto {PROTO}")
    );
    rt.replace_route(
        addr("10.99.0.0"),
        16,
        Some(addr("10.77.0.3")),
        Some(idx),
        PROTO,
    )
    .unwrap();
    let shown = Pair::ip_out(a, &["route", "show", "10.99.0.0/16"]);
    assert_eq!(
        shown.trim(),
        format!("10.99.0.0/16 via 10.77.0.3 dev lyk0 proto {PROTO}"),
        "replace must leave one route"
    );
    // Host bits are cleared; no gateway means scope link.
    rt.replace_route(addr("10.98.1.2"), 24, None, Some(idx), PROTO)
        .unwrap();
    let shown = Pair::ip_out(a, &["route", "show", "10.98.1.0/24"]);
    assert_eq!(
        shown.trim(),
        format!("10.98.1.0/24 dev lyk0 proto {PROTO} scope 253")
    );
    rt.replace_route(addr("0.0.0.0"), 0, Some(addr(B4)), None, PROTO)
        .unwrap();
    let shown = Pair::ip_out(a, &["route", "show", "default"]);
    assert_eq!(
        shown.trim(),
        format!("default via {B4} dev lyk0 proto {PROTO}")
    );
    rt.replace_route(addr("2001:db8:99::"), 48, Some(addr(B6)), None, PROTO)
        .unwrap();
    let shown = Pair::ip_out(a, &["-6", "route", "show", "2001:db8:99::/48"]);
    assert!(
        shown.contains(&format!("via {B6} dev lyk0 proto {PROTO}")),
        "{shown}"
    );

    // Refused before the kernel sees them.
    for (p, len, gw, oif) in [
        ("10.0.0.0", 8, Some(addr(B6)), None),
        ("10.0.0.0", 8, None, None),
        ("10.0.0.0", 33, Some(addr(B4)), None),
    ] {
        let e = rt.replace_route(addr(p), len, gw, oif, PROTO).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{p}/{len}: {e}");
    }
    // Refused by the kernel: a gateway that is not on any link.
    let e = rt
        .replace_route(addr("10.97.0.0"), 16, Some(addr("10.200.0.1")), None, PROTO)
        .unwrap_err();
    assert!(e.raw_os_error().is_some(), "{e}");

    // Deletes, then deleting again is ESRCH.
    for (p, len) in [
        ("10.99.0.0", 16),
        ("10.98.1.0", 24),
        ("0.0.0.0", 0),
        ("2001:db8:99::", 48),
    ] {
        rt.del_route(addr(p), len).unwrap();
        let e = rt.del_route(addr(p), len).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{p}/{len}: {e}");
    }
    let shown = Pair::ip_out(a, &["route", "show", "proto", &PROTO.to_string()]);
    assert_eq!(shown.trim(), "", "routes left behind");
    let shown = Pair::ip_out(a, &["-6", "route", "show", "proto", &PROTO.to_string()]);
    assert_eq!(shown.trim(), "", "routes left behind");

    // Addresses removed; a second removal fails.
    rt.del_address(idx, addr(A4), 24).unwrap();
    rt.del_address(idx, addr(A6), 64).unwrap();
    let shown = Pair::ip_out(a, &["-o", "addr", "show", "dev", A_IF]);
    assert!(!shown.contains(A4) && !shown.contains(A6), "{shown}");
    let e = rt.del_address(idx, addr(A4), 24).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL), "{e}");
    let e = rt.del_address(idx, addr(A6), 64).unwrap_err();
    assert!(e.raw_os_error().is_some(), "{e}");
    eprintln!("IPv6 address removed twice: {e}");
}

#[test]
fn kernel_neighbor_monitor_live_dump_and_delete() {
    require_root!();
    let pair = Pair::new();
    let a = &pair.a;
    let mut rt = Pair::rtnl(a);
    pair.addresses(&mut rt);
    let idx = rt.link_index(A_IF).unwrap();
    let peer_mac = mac_of(&pair.b, B_IF);

    let mut live = Pair::monitor(a);
    let granted = live.rcvbuf().unwrap();
    assert!(
        granted >= NeighborMonitor::DEFAULT_RCVBUF,
        "receive buffer {granted}"
    );

    // Live: traffic to the peer makes the kernel resolve it.
    let mut log = Vec::new();
    for peer in [B4, B6] {
        let peer = addr(peer);
        poke(a, peer);
        let ev = wait_for(&mut live, Duration::from_secs(5), &mut log, |e| {
            e.ip == peer && e.usable()
        });
        assert_eq!(ev.ifindex, idx);
        assert_eq!(ev.mac, Some(peer_mac));
        assert!(!ev.deleted);
        eprintln!("live states for {peer}: {:?}", states(&log, peer));
    }
    let shown = Pair::ip_out(a, &["neigh", "show", "dev", A_IF]);
    eprintln!("ip neigh:\n{shown}");
    assert!(shown.contains(B4) && shown.contains(B6), "{shown}");

    // Dump, on a monitor opened after the fact: it only learns by dumping.
    // A second request while the first runs is folded into a re-dump.
    let mut fresh = Pair::monitor(a);
    fresh.request_dump().unwrap();
    let (table, overruns) = dump(&mut fresh);
    assert_eq!(overruns, 0);
    for peer in [B4, B6] {
        let ev = table
            .get(&(idx, addr(peer)))
            .unwrap_or_else(|| panic!("{peer} not in dump {table:#?}"));
        assert!(ev.usable(), "{ev:?}");
        assert_eq!(ev.mac, Some(peer_mac));
        eprintln!("dumped {peer}: state {:#04x}", ev.state);
    }
    assert_eq!(fresh.decode_errors(), 0);

    // `ip neigh del` produces a deleted event.
    for peer in [B4, B6] {
        Pair::ip_out(a, &["neigh", "del", peer, "dev", A_IF]);
        let peer = addr(peer);
        let before = log.len();
        let ev = wait_for(&mut live, Duration::from_secs(5), &mut log, |e| {
            e.ip == peer && e.deleted
        });
        assert_eq!(ev.ifindex, idx);
        assert!(!ev.usable());
        eprintln!(
            "events for {peer} after `ip neigh del`: {:?}",
            states(&log[before..], peer)
        );
    }
    let (table, _) = dump(&mut fresh);
    for peer in [B4, B6] {
        assert!(
            table.get(&(idx, addr(peer))).is_none_or(|e| !e.usable()),
            "{peer} still usable after delete: {table:#?}"
        );
    }
    assert_eq!(live.decode_errors(), 0);
}

/// Managed neighbours (Linux >= 5.16), as `routing::managed` relies on
/// them: a managed entry is resolved with no traffic; making a resolved
/// entry managed keeps its state and address (no unresolved moment the
/// mirror would punt for); handing it back keeps them too; a new entry is
/// never made over an existing one; `get_neigh` reads one entry.
#[test]
fn kernel_managed_neighbors_resolve_keep_state_and_hand_back() {
    require_root!();
    if !routing::managed::supported() {
        eprintln!("SKIPPED: the kernel has no managed neighbours (before 5.16)");
        return;
    }
    let pair = Pair::new();
    let a = &pair.a;
    let mut rt = Pair::rtnl(a);
    pair.addresses(&mut rt);
    let b3 = "10.77.0.3";
    Pair::ip_out(&pair.b, &["addr", "add", &format!("{b3}/24"), "dev", B_IF]);
    let idx = rt.link_index(A_IF).unwrap();
    let peer_mac = mac_of(&pair.b, B_IF);
    let mut mon = Pair::monitor(a);
    let mut log = Vec::new();

    // Nothing sent: the kernel resolves a managed entry by itself.
    for peer in [B4, B6] {
        rt.manage_neigh(idx, addr(peer), true).unwrap();
        let ev = wait_for(&mut mon, Duration::from_secs(5), &mut log, |e| {
            e.ip == addr(peer) && e.usable()
        });
        assert!(ev.managed(), "{ev:?}");
        assert_eq!(ev.mac, Some(peer_mac));
        // Exclusive: never over an existing entry.
        let e = rt.manage_neigh(idx, addr(peer), true).unwrap_err();
        assert!(is_exists(&e), "{e}");
    }
    let shown = Pair::ip_out(a, &["-d", "neigh", "show", "dev", A_IF]);
    eprintln!("ip -d neigh:\n{shown}");
    for peer in [B4, B6] {
        let line = shown
            .lines()
            .find(|l| l.starts_with(&format!("{peer} ")))
            .unwrap_or("");
        assert!(line.contains("managed"), "{peer}: {shown}");
    }

    // A neighbour the kernel resolved itself gains the flag, nothing else.
    poke(a, addr(b3));
    wait_for(&mut mon, Duration::from_secs(5), &mut log, |e| {
        e.ip == addr(b3) && e.usable()
    });
    let before = log.len();
    rt.manage_neigh(idx, addr(b3), false).unwrap();
    let ev = wait_for(&mut mon, Duration::from_secs(5), &mut log, |e| {
        e.ip == addr(b3) && e.managed()
    });
    assert!(ev.usable() && ev.mac == Some(peer_mac), "{ev:?}");
    assert!(
        log[before..]
            .iter()
            .filter(|e| e.ip == addr(b3))
            .all(|e| e.usable()),
        "{b3} went unresolved on the way: {:?}",
        states(&log[before..], addr(b3))
    );

    // Handed back: the flag goes, the state and address stay.
    let before = log.len();
    rt.unmanage_neigh(idx, addr(B4)).unwrap();
    let ev = wait_for(&mut mon, Duration::from_secs(5), &mut log, |e| {
        e.ip == addr(B4) && !e.managed()
    });
    assert!(ev.usable() && ev.mac == Some(peer_mac), "{ev:?}");
    assert!(log[before..]
        .iter()
        .filter(|e| e.ip == addr(B4))
        .all(|e| e.usable()));
    let got = rt.get_neigh(idx, addr(B4)).unwrap().expect("B4 entry");
    assert!(got.usable() && !got.managed(), "{got:?}");
    assert!(rt
        .get_neigh(idx, addr(B6))
        .unwrap()
        .is_some_and(|e| e.managed()));
    assert_eq!(rt.get_neigh(idx, addr("10.77.0.99")).unwrap(), None);
    let e = rt.unmanage_neigh(idx, addr("10.77.0.99")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    assert_eq!(mon.decode_errors(), 0);
}

#[test]
fn kernel_neighbor_monitor_overrun_then_redump() {
    require_root!();
    const N: usize = 600;
    let pair = Pair::new();
    let a = &pair.a;
    let mut rt = Pair::rtnl(a);
    pair.addresses(&mut rt);
    let idx = rt.link_index(A_IF).unwrap();

    // A tiny buffer and no reading while N entries are added: the kernel
    // must drop notifications and say so.
    let mut mon = a
        .run(|| NeighborMonitor::with_rcvbuf(4096))
        .unwrap()
        .unwrap();
    let mut batch = String::new();
    for i in 0..N {
        batch += &format!(
            "neigh add 10.78.{}.{} lladdr 02:00:00:00:{:02x}:{:02x} dev {A_IF} nud permanent\n",
            i / 200,
            i % 200 + 1,
            i / 256,
            i % 256
        );
    }
    let path = std::env::temp_dir().join(format!("lykrn-{}-batch", std::process::id()));
    std::fs::write(&path, batch).unwrap();
    let added = ip(&["-n", a.name(), "-batch", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    added.unwrap();

    let mut overrun = false;
    let mut before = 0usize;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !overrun && Instant::now() < deadline {
        match mon.recv(Duration::from_millis(100)) {
            Ok(evs) => before += evs.len(),
            Err(e) if is_overrun(&e) => overrun = true,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(overrun, "no overrun reported ({before} events read)");

    // Re-dump: every entry is there, permanent and usable.
    let (table, overruns) = dump(&mut mon);
    let ours: Vec<_> = table
        .values()
        .filter(|e| e.ifindex == idx && e.state & NUD_PERMANENT != 0)
        .collect();
    assert_eq!(ours.len(), N);
    assert!(ours.iter().all(|e| e.usable() && e.mac.is_some()));
    eprintln!(
        "overrun after {before} events; dump returned {} entries after {overruns} more overrun(s)",
        table.len()
    );
}
