//! `routing::kernel::mfc` against a real kernel multicast forwarding cache.
//!
//! The first tests become a multicast router themselves: in a namespace of
//! their own (`lymfc-<pid>-<n>`, removed on drop, panics included) they
//! open the kernel's mroute socket (`MRT_INIT`/`MRT6_INIT`), add vifs on two
//! veths and MFC entries, and check what [`MfcMonitor`] dumps and reports.
//! The last one runs FRR's zebra and pimd in a router namespace between a
//! source host and a receiver host and checks the `(S,G)` pimd installs.
//!
//! Needs root and iproute2 (and FRR for the pimd test); otherwise prints
//! SKIPPED and passes.

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use routing::kernel::mfc::{is_overrun, MfcEntry, MfcEvent, MfcMonitor};
use testkit::netns::{ip, veth};
use testkit::pim::{join_ssm, multicast_sender, PimConfig, PimRouter};
use testkit::{require_pim, require_root, Netns};

// linux/mroute.h and linux/mroute6.h (not in the libc crate).
const MRT_INIT: libc::c_int = 200;
const MRT_ADD_VIF: libc::c_int = 202;
const MRT_ADD_MFC: libc::c_int = 204;
const MRT_DEL_MFC: libc::c_int = 205;
const VIFF_USE_IFINDEX: u8 = 0x8;
const MRT6_INIT: libc::c_int = 200;
const MRT6_ADD_MIF: libc::c_int = 202;
const MRT6_ADD_MFC: libc::c_int = 204;
const MRT6_DEL_MFC: libc::c_int = 205;
const MAXVIFS: usize = 32;

/// The router's two interfaces (toward the source, toward receivers) and
/// their far ends in a second namespace.
const UP_IF: &str = "lym0";
const DOWN_IF: &str = "lym1";
const UP_PEER: &str = "lyp0";
const DOWN_PEER: &str = "lyp1";

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: val is a live, initialised value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            val as *const T as *const libc::c_void,
            mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn raw_socket(family: libc::c_int, proto: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked.
    let fd = unsafe { libc::socket(family, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `struct vifctl`.
#[repr(C)]
struct VifCtl {
    vifi: u16,
    flags: u8,
    threshold: u8,
    rate_limit: u32,
    lcl_ifindex: i32,
    rmt_addr: u32,
}

/// `struct mfcctl`.
#[repr(C)]
struct MfcCtl {
    origin: [u8; 4],
    group: [u8; 4],
    parent: u16,
    ttls: [u8; MAXVIFS],
    pkt_cnt: u32,
    byte_cnt: u32,
    wrong_if: u32,
    expire: i32,
}

/// `struct mif6ctl`.
#[repr(C)]
struct Mif6Ctl {
    mifi: u16,
    flags: u8,
    threshold: u8,
    pifi: u16,
    rate_limit: u32,
}

/// `struct mf6cctl`: two `sockaddr_in6`, the parent mif and an `if_set`
/// of 256 bits.
#[repr(C)]
struct Mf6cCtl {
    origin: libc::sockaddr_in6,
    group: libc::sockaddr_in6,
    parent: u16,
    ifset: [u32; 8],
}

fn sin6(a: Ipv6Addr) -> libc::sockaddr_in6 {
    // SAFETY: sockaddr_in6 is plain data; all-zero is valid.
    let mut s: libc::sockaddr_in6 = unsafe { mem::zeroed() };
    s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    s.sin6_addr.s6_addr = a.octets();
    s
}

/// This process as the namespace's multicast router: the kernel's mroute
/// socket for one family. Closing it flushes the vifs and the MFC.
struct Mrouter {
    fd: OwnedFd,
    v6: bool,
}

impl Mrouter {
    /// Must run inside the namespace (see `Netns::run`).
    fn open(v6: bool) -> io::Result<Mrouter> {
        let fd = if v6 {
            let fd = raw_socket(libc::AF_INET6, libc::IPPROTO_ICMPV6)?;
            setsockopt(&fd, libc::IPPROTO_IPV6, MRT6_INIT, &1i32)?;
            fd
        } else {
            let fd = raw_socket(libc::AF_INET, libc::IPPROTO_IGMP)?;
            setsockopt(&fd, libc::IPPROTO_IP, MRT_INIT, &1i32)?;
            fd
        };
        Ok(Mrouter { fd, v6 })
    }

    fn add_vif(&self, vifi: u16, ifindex: u32) -> io::Result<()> {
        if self.v6 {
            let m = Mif6Ctl {
                mifi: vifi,
                flags: 0,
                threshold: 1,
                pifi: ifindex as u16,
                rate_limit: 0,
            };
            setsockopt(&self.fd, libc::IPPROTO_IPV6, MRT6_ADD_MIF, &m)
        } else {
            let v = VifCtl {
                vifi,
                flags: VIFF_USE_IFINDEX,
                threshold: 1,
                rate_limit: 0,
                lcl_ifindex: ifindex as i32,
                rmt_addr: 0,
            };
            setsockopt(&self.fd, libc::IPPROTO_IP, MRT_ADD_VIF, &v)
        }
    }

    /// Adds (or replaces) `(source, group)` arriving on vif `parent`, out
    /// of `oifs` as `(vif, ttl threshold)`; IPv6 has no thresholds (the
    /// kernel reports 1).
    fn set_mfc(
        &self,
        source: IpAddr,
        group: IpAddr,
        parent: u16,
        oifs: &[(u16, u8)],
    ) -> io::Result<()> {
        self.mfc(true, source, group, parent, oifs)
    }

    fn del_mfc(&self, source: IpAddr, group: IpAddr, parent: u16) -> io::Result<()> {
        self.mfc(false, source, group, parent, &[])
    }

    fn mfc(
        &self,
        add: bool,
        source: IpAddr,
        group: IpAddr,
        parent: u16,
        oifs: &[(u16, u8)],
    ) -> io::Result<()> {
        match (source, group) {
            (IpAddr::V4(s), IpAddr::V4(g)) if !self.v6 => {
                let mut ttls = [0u8; MAXVIFS];
                for &(vif, ttl) in oifs {
                    ttls[vif as usize] = ttl;
                }
                let m = MfcCtl {
                    origin: s.octets(),
                    group: g.octets(),
                    parent,
                    ttls,
                    pkt_cnt: 0,
                    byte_cnt: 0,
                    wrong_if: 0,
                    expire: 0,
                };
                let op = if add { MRT_ADD_MFC } else { MRT_DEL_MFC };
                setsockopt(&self.fd, libc::IPPROTO_IP, op, &m)
            }
            (IpAddr::V6(s), IpAddr::V6(g)) if self.v6 => {
                let mut ifset = [0u32; 8];
                for &(vif, _) in oifs {
                    ifset[vif as usize / 32] |= 1 << (vif % 32);
                }
                let m = Mf6cCtl {
                    origin: sin6(s),
                    group: sin6(g),
                    parent,
                    ifset,
                };
                let op = if add { MRT6_ADD_MFC } else { MRT6_DEL_MFC };
                setsockopt(&self.fd, libc::IPPROTO_IPV6, op, &m)
            }
            _ => Err(io::Error::from(io::ErrorKind::InvalidInput)),
        }
    }
}

fn ifindex(ns: &Netns, name: &str) -> u32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: c is a valid NUL-terminated string.
    let i = ns
        .run(move || unsafe { libc::if_nametoindex(c.as_ptr()) })
        .unwrap();
    assert_ne!(i, 0, "no interface {name} in {}", ns.name());
    i
}

/// Router namespace R with `UP_IF`/`DOWN_IF`, their peers in namespace P.
/// With `v6`, IPv6 is enabled on R's ends.
struct Bed {
    r: Netns,
    p: Netns,
    up: u32,
    down: u32,
}

impl Bed {
    fn new(v6: bool) -> Bed {
        let r = Netns::new("lymfc-").expect("netns R");
        let p = Netns::new("lymfc-").expect("netns P");
        veth(&r, UP_IF, &p, UP_PEER, 1500).expect("veth up");
        veth(&r, DOWN_IF, &p, DOWN_PEER, 1500).expect("veth down");
        if v6 {
            for i in ["all", "default", UP_IF, DOWN_IF] {
                r.sysctl(&format!("net.ipv6.conf.{i}.disable_ipv6"), "0")
                    .unwrap();
            }
        }
        let up = ifindex(&r, UP_IF);
        let down = ifindex(&r, DOWN_IF);
        Bed { r, p, up, down }
    }

    fn mrouter(&self, v6: bool) -> Mrouter {
        let m = self
            .r
            .run(move || Mrouter::open(v6))
            .unwrap()
            .expect("MRT_INIT");
        m.add_vif(0, self.up).expect("vif 0");
        m.add_vif(1, self.down).expect("vif 1");
        m
    }

    fn monitor(&self) -> MfcMonitor {
        self.r
            .run(MfcMonitor::open)
            .unwrap()
            .expect("MfcMonitor::open")
    }
}

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn find(entries: &[MfcEntry], source: IpAddr, group: IpAddr) -> Option<&MfcEntry> {
    entries.iter().find(|e| e.key() == (source, group))
}

/// Polls until an event satisfies `pred` (returned), failing after
/// `timeout` with everything seen.
fn wait_event(
    mon: &mut MfcMonitor,
    timeout: Duration,
    pred: impl Fn(&MfcEvent) -> bool,
) -> MfcEvent {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        for ev in mon.poll(Duration::from_millis(200)).expect("poll") {
            if pred(&ev) {
                return ev;
            }
            seen.push(ev);
        }
    }
    panic!("no matching MFC event in {timeout:?}; saw {seen:?}");
}

/// Dump, add, change, delete: the same sequence for both families.
fn dump_and_events(v6: bool) {
    let bed = Bed::new(v6);
    let mr = bed.mrouter(v6);
    let (s1, g1, star, g2, s3, g3) = if v6 {
        (
            addr("2001:db8:1::2"),
            addr("ff3e::1:1"),
            addr("::"),
            addr("ff3e::2:2"),
            addr("2001:db8:2::2"),
            addr("ff3e::3:3"),
        )
    } else {
        (
            addr("10.1.0.2"),
            addr("232.1.1.1"),
            addr("0.0.0.0"),
            addr("239.2.2.2"),
            addr("10.2.0.2"),
            addr("232.3.3.3"),
        )
    };
    // IPv6 has no TTL thresholds: the kernel reports 1 for every oif.
    let ttl = |t: u8| if v6 { 1 } else { t };
    mr.set_mfc(s1, g1, 0, &[(1, 1)]).expect("add (S,G)");
    mr.set_mfc(star, g2, 1, &[(0, 4)]).expect("add (*,G)");

    let mut mon = bed.monitor();
    let dump = mon.dump().expect("dump");
    assert_eq!(dump.len(), 2, "{dump:?}");
    let e = find(&dump, s1, g1).expect("(S,G) in dump");
    assert_eq!(
        (e.iif, e.oifs.clone()),
        (bed.up, vec![(bed.down, 1)]),
        "{e:?}"
    );
    assert_eq!((e.packets, e.bytes, e.wrong_if), (0, 0, 0));
    let e = find(&dump, star, g2).expect("(*,G) in dump");
    assert_eq!(
        (e.iif, e.oifs.clone()),
        (bed.down, vec![(bed.up, ttl(4))]),
        "{e:?}"
    );

    // A new entry, then a new version of it, then its removal.
    mr.set_mfc(s3, g3, 1, &[(0, 1)]).unwrap();
    let ev = wait_event(
        &mut mon,
        Duration::from_secs(5),
        |e| matches!(e, MfcEvent::Add(x) if x.key() == (s3, g3)),
    );
    let MfcEvent::Add(e) = ev else { unreachable!() };
    assert_eq!((e.iif, e.oifs), (bed.down, vec![(bed.up, 1)]));
    mr.set_mfc(s3, g3, 0, &[(1, 8)]).unwrap();
    let ev = wait_event(
        &mut mon,
        Duration::from_secs(5),
        |e| matches!(e, MfcEvent::Add(x) if x.key() == (s3, g3)),
    );
    let MfcEvent::Add(e) = ev else { unreachable!() };
    assert_eq!((e.iif, e.oifs), (bed.up, vec![(bed.down, ttl(8))]));
    mr.del_mfc(s3, g3, 0).unwrap();
    wait_event(&mut mon, Duration::from_secs(5), |e| {
        *e == MfcEvent::Del {
            source: s3,
            group: g3,
        }
    });
    let dump = mon.dump().expect("dump");
    assert_eq!(dump.len(), 2, "{dump:?}");
    assert!(find(&dump, s3, g3).is_none());

    // Closing the mroute socket flushes the cache, entry by entry.
    drop(mr);
    let mut gone = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while gone.len() < 2 && Instant::now() < deadline {
        for ev in mon.poll(Duration::from_millis(200)).unwrap() {
            if let MfcEvent::Del { source, group } = ev {
                gone.push((source, group));
            }
        }
    }
    gone.sort();
    let mut want = vec![(s1, g1), (star, g2)];
    want.sort();
    assert_eq!(gone, want);
    assert!(mon.dump().unwrap().is_empty());
    assert_eq!(mon.decode_errors(), 0);
}

#[test]
fn mfc_v4_dump_and_events() {
    require_root!();
    dump_and_events(false);
}

#[test]
fn mfc_v6_dump_and_events() {
    require_root!();
    dump_and_events(true);
}

/// Packets forwarded through an entry show up in its counters (what pimd
/// reads to keep data-driven entries alive).
#[test]
fn mfc_v4_counters_follow_traffic() {
    require_root!();
    let bed = Bed::new(false);
    ip(&[
        "-n",
        bed.r.name(),
        "addr",
        "add",
        "10.1.0.1/24",
        "dev",
        UP_IF,
    ])
    .unwrap();
    ip(&[
        "-n",
        bed.r.name(),
        "addr",
        "add",
        "10.2.0.1/24",
        "dev",
        DOWN_IF,
    ])
    .unwrap();
    ip(&[
        "-n",
        bed.p.name(),
        "addr",
        "add",
        "10.1.0.2/24",
        "dev",
        UP_PEER,
    ])
    .unwrap();
    let mr = bed.mrouter(false);
    let (s, g) = (addr("10.1.0.2"), addr("232.1.1.1"));
    mr.set_mfc(s, g, 0, &[(1, 1)]).unwrap();
    let mut mon = bed.monitor();
    let tx = multicast_sender(bed.p.name(), Ipv4Addr::new(10, 1, 0, 2), 8).unwrap();
    for _ in 0..5 {
        tx.send_to(&[0u8; 100], "232.1.1.1:5000").unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let dump = mon.dump().unwrap();
        let e = find(&dump, s, g).expect("entry").clone();
        if e.packets == 5 {
            // 100 bytes of payload + UDP + IPv4 headers.
            assert_eq!(e.bytes, 5 * 128);
            assert_eq!(e.wrong_if, 0);
            break;
        }
        assert!(Instant::now() < deadline, "counters: {e:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(mr);
}

/// A burst larger than the receive buffer: `poll` reports the overrun
/// and a new dump has everything.
#[test]
fn mfc_overrun_is_reported_and_dump_recovers() {
    require_root!();
    let bed = Bed::new(false);
    let mr = bed.mrouter(false);
    let mut mon = bed.monitor();
    // Small enough that the burst cannot be queued (the kernel doubles it
    // and enforces a minimum of a few KiB).
    set_rcvbuf(&mon, 4096);
    const N: u32 = 3000;
    for i in 0..N {
        let s = IpAddr::V4(Ipv4Addr::from(0x0a01_0000 + i));
        mr.set_mfc(s, addr("232.1.1.1"), 0, &[(1, 1)]).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let err = loop {
        match mon.poll(Duration::from_millis(100)) {
            Ok(_) => assert!(Instant::now() < deadline, "no overrun reported"),
            Err(e) => break e,
        }
    };
    assert!(is_overrun(&err), "{err}");
    // Back to a buffer that holds a dump chunk (32 KiB) next to what is
    // still queued.
    set_rcvbuf(&mon, 4 << 20);
    let dump = mon.dump().expect("dump after overrun");
    assert_eq!(dump.len(), N as usize);
    drop(mr);
}

fn set_rcvbuf(mon: &MfcMonitor, bytes: libc::c_int) {
    // SAFETY: setsockopt with an int on the monitor's own socket.
    let rc = unsafe {
        libc::setsockopt(
            mon.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &bytes as *const libc::c_int as *const libc::c_void,
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "{}", io::Error::last_os_error());
}

/// Real pimd: S (source host) — R (zebra + pimd, PIM and IGMPv3 on both
/// interfaces) — H (receiver host). H joins (S, 232.1.1.1) with IGMPv3;
/// pimd installs the SSM entry in R's MFC and the monitor sees it with
/// iif = R's interface toward S and oif = R's interface toward H. Data
/// then flows and shows in the counters; H leaving removes the entry.
#[test]
fn pimd_ssm_join_installs_mfc_entry() {
    require_root!();
    require_pim!();
    let s = Netns::new("lymfc-").expect("netns S");
    let r = Netns::new("lymfc-").expect("netns R");
    let h = Netns::new("lymfc-").expect("netns H");
    veth(&r, "rs", &s, "sr", 1500).unwrap();
    veth(&r, "rh", &h, "hr", 1500).unwrap();
    let src = Ipv4Addr::new(10, 91, 1, 2);
    let rcv = Ipv4Addr::new(10, 91, 2, 2);
    let group = Ipv4Addr::new(232, 1, 1, 1);
    for (ns, dev, a) in [
        (&r, "rs", "10.91.1.1/24"),
        (&r, "rh", "10.91.2.1/24"),
        (&s, "sr", "10.91.1.2/24"),
        (&h, "hr", "10.91.2.2/24"),
    ] {
        ip(&["-n", ns.name(), "addr", "add", a, "dev", dev]).unwrap();
    }
    ip(&[
        "-n",
        s.name(),
        "route",
        "add",
        "default",
        "via",
        "10.91.1.1",
    ])
    .unwrap();
    ip(&[
        "-n",
        h.name(),
        "route",
        "add",
        "default",
        "via",
        "10.91.2.1",
    ])
    .unwrap();
    let (rs, rh) = (ifindex(&r, "rs"), ifindex(&r, "rh"));

    let mut mon = r.run(MfcMonitor::open).unwrap().unwrap();
    assert!(mon.dump().unwrap().is_empty());
    let router = PimRouter::start(r.name(), "mfc-r", &PimConfig::new(&["rs", "rh"])).expect("pimd");
    router
        .wait_interfaces(&["rs", "rh"], Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\n{}", router.logs()));

    // The join alone (no data yet) makes pimd install the entry.
    let t0 = Instant::now();
    let receiver = join_ssm(h.name(), rcv, src, group, 5000).unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (s_ip, g_ip) = (IpAddr::V4(src), IpAddr::V4(group));
    let ev = wait_event(
        &mut mon,
        Duration::from_secs(20),
        |e| matches!(e, MfcEvent::Add(x) if x.key() == (s_ip, g_ip) && x.iif == rs),
    );
    eprintln!(
        "pimd installed the (S,G) {:?} after the join: {ev:?}",
        t0.elapsed()
    );
    let MfcEvent::Add(e) = ev else { unreachable!() };
    assert_eq!(e.oifs, vec![(rh, 1)], "{e:?}");
    let dump = mon.dump().unwrap();
    let d = find(&dump, s_ip, g_ip).expect("(S,G) in dump");
    assert_eq!((d.iif, d.oifs.clone()), (rs, vec![(rh, 1)]));
    assert_eq!(d.packets, 0, "no data sent yet");

    // Data flows through the entry pimd installed.
    let tx = multicast_sender(s.name(), src, 8).unwrap();
    let mut got = [0u8; 256];
    let mut received = 0;
    for _ in 0..3 {
        tx.send_to(&[7u8; 64], (group, 5000)).unwrap();
        if let Ok((n, from)) = receiver.recv_from(&mut got) {
            assert_eq!((n, from.ip()), (64, IpAddr::V4(src)));
            received += 1;
        }
    }
    assert_eq!(received, 3);
    let dump = mon.dump().unwrap();
    let d = find(&dump, s_ip, g_ip).expect("(S,G) in dump");
    assert_eq!(d.packets, 3, "{d:?}");

    // Leaving: IGMPv3 BLOCK, pimd's source-specific queries go
    // unanswered, the entry goes.
    drop(receiver);
    let t0 = Instant::now();
    wait_event(&mut mon, Duration::from_secs(30), |e| {
        *e == MfcEvent::Del {
            source: s_ip,
            group: g_ip,
        }
    });
    eprintln!("pimd removed the (S,G) {:?} after the leave", t0.elapsed());
    assert_eq!(mon.decode_errors(), 0);
}
