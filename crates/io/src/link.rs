//! Interface state: rtnetlink `RTM_GETLINK` (ioctl as a fallback), and
//! link events.
//!
//! Unlike `/sys/class/net`, which shows the network namespace `/sys` was
//! mounted in, these calls see the namespace of the *calling thread*.
//!
//! # Link up means carrier
//! A link is up when the interface is administratively up and has carrier
//! (`IFF_LOWER_UP`, the driver's `netif_carrier_ok`). `IFF_RUNNING` and
//! `operstate` are derived from carrier by the kernel's link watch, a work
//! item that runs non-urgent events at most once a second host-wide: after
//! any other link event on the host, `IFF_RUNNING` may stay set 0.2–1 s
//! after the carrier went (a veth whose peer is set down; measured in
//! docs/ha.md), and the `RTM_NEWLINK` event comes from that same work, just
//! as late. `IFF_LOWER_UP` changes the instant the driver calls
//! `netif_carrier_off`, so it is what [`query`] reports as up or down.
//! `operstate` still vetoes up when it says `dormant`, `testing` or
//! `notpresent` (802.1X, self-test): states the carrier cannot show.

use crate::PortError;
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What the kernel says about one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkInfo {
    pub ifindex: u32,
    /// `IFF_UP`: administratively up.
    pub admin_up: bool,
    /// The link is up: administratively up, with carrier (`IFF_LOWER_UP`)
    /// and an operational state that allows traffic (see the module
    /// documentation). Not `IFF_RUNNING`, which lags carrier.
    pub oper_up: bool,
    /// `IFF_LOWER_UP`: the driver reports carrier.
    pub carrier: bool,
    /// `IFF_RUNNING` as the kernel's link watch last set it.
    pub running: bool,
    /// RFC 2863 operational state (`IF_OPER_*`), if the kernel said.
    pub operstate: Option<u8>,
    pub mtu: u32,
}

/// `IFF_LOWER_UP` (`<linux/if.h>`): does not fit the 16-bit flags of
/// `SIOCGIFFLAGS`, only rtnetlink carries it.
const IFF_LOWER_UP: u32 = 1 << 16;
/// `IF_OPER_NOTPRESENT`, `IF_OPER_TESTING`, `IF_OPER_DORMANT`.
const OPER_BLOCKING: [u8; 3] = [1, 4, 5];

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const NLMSG_ERROR: u16 = 2;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_EXT_MASK: u16 = 29;
/// `RTEXT_FILTER_SKIP_STATS`: leave the statistics out of the answer.
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

thread_local! {
    /// One rtnetlink socket per thread (created in the thread's namespace
    /// at first use), so a query costs a send and a receive.
    /// Keyed by the namespace's inode: a thread that moves to another
    /// namespace (setns) gets a socket there.
    static QUERY_SOCK: RefCell<Option<(OwnedFd, u32, u64)>> = const { RefCell::new(None) };
}

/// The calling thread's network namespace (inode of its `ns/net`).
fn netns_id() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap_or(0)
}

/// Look an interface up; `None` if it does not exist (or the name is invalid).
pub fn query(name: &str) -> Option<LinkInfo> {
    if !valid_name(name) {
        return None;
    }
    match query_netlink(name) {
        Ok(info) => info,
        // No rtnetlink (a sandbox): the ioctls, with IFF_RUNNING for carrier.
        Err(_) => query_ioctl(name),
    }
}

fn query_netlink(name: &str) -> io::Result<Option<LinkInfo>> {
    QUERY_SOCK.with(|cell| {
        let mut slot = cell.borrow_mut();
        let ns = netns_id();
        if slot.as_ref().is_none_or(|s| s.2 != ns) {
            *slot = Some((rtnl_socket(0)?, 0, ns));
        }
        let (fd, seq, _) = slot.as_mut().expect("socket just created");
        *seq = seq.wrapping_add(1);
        let r = getlink(fd, *seq, name);
        if r.is_err() {
            // A broken socket is not reused.
            *slot = None;
        }
        r
    })
}

/// A NETLINK_ROUTE socket bound to `groups`, with a receive timeout.
fn rtnl_socket(groups: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_nl is plain data; zeroed is a valid value.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    sa.nl_groups = groups;
    // SAFETY: sa is a valid sockaddr_nl and its size is passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let tv = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: SO_RCVTIMEO reads a timeval of the given size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as u32,
        )
    };
    Ok(fd)
}

fn push_attr(buf: &mut Vec<u8>, kind: u16, data: &[u8]) {
    let len = 4 + data.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(data);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// One `RTM_GETLINK` by name on `fd`; `Ok(None)` when there is no such
/// interface.
fn getlink(fd: &OwnedFd, seq: u32, name: &str) -> io::Result<Option<LinkInfo>> {
    let mut req = Vec::with_capacity(64);
    req.extend_from_slice(&[0u8; 16]); // nlmsghdr, filled below
    req.extend_from_slice(&[0u8; 16]); // ifinfomsg: AF_UNSPEC, any index
    let mut n = name.as_bytes().to_vec();
    n.push(0);
    push_attr(&mut req, IFLA_IFNAME, &n);
    push_attr(
        &mut req,
        IFLA_EXT_MASK,
        &RTEXT_FILTER_SKIP_STATS.to_ne_bytes(),
    );
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETLINK.to_ne_bytes());
    req[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req[8..12].copy_from_slice(&seq.to_ne_bytes());
    // SAFETY: sends `req.len()` bytes from a live buffer to the kernel
    // (the socket is unconnected: the kernel is the default peer).
    let r = unsafe {
        libc::send(
            fd.as_raw_fd(),
            req.as_ptr() as *const libc::c_void,
            req.len(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 16 * 1024];
    loop {
        // SAFETY: receives into a live buffer of its length.
        let r = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(answer) = parse_getlink(&buf[..r as usize], seq) {
            return Ok(answer);
        }
        // A reply to an earlier, timed-out request: read on.
    }
}

fn ne16(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}

fn ne32(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// The answer to request `seq` in one datagram: `Some(None)` for "no such
/// interface", `None` if the datagram answers something else. Any bytes
/// are safe (fuzzed: `fuzz_link`).
pub fn parse_getlink(msg: &[u8], seq: u32) -> Option<Option<LinkInfo>> {
    let mut off = 0;
    while off + 16 <= msg.len() {
        let len = ne32(msg, off) as usize;
        if len < 16 || off + len > msg.len() {
            return None;
        }
        let m = &msg[off..off + len];
        off += len.next_multiple_of(4);
        if ne32(m, 8) != seq {
            continue;
        }
        match ne16(m, 4) {
            NLMSG_ERROR => return Some(None),
            RTM_NEWLINK if m.len() >= 32 => {
                let ifindex = ne32(m, 20);
                let flags = ne32(m, 24);
                let (mut mtu, mut operstate) = (0, None);
                let mut a = 32;
                while a + 4 <= m.len() {
                    let alen = ne16(m, a) as usize;
                    if alen < 4 || a + alen > m.len() {
                        break;
                    }
                    let data = &m[a + 4..a + alen];
                    match ne16(m, a + 2) & 0x3fff {
                        IFLA_MTU if data.len() >= 4 => mtu = ne32(data, 0),
                        IFLA_OPERSTATE if !data.is_empty() => operstate = Some(data[0]),
                        _ => {}
                    }
                    a += alen.next_multiple_of(4);
                }
                let admin_up = flags & libc::IFF_UP as u32 != 0;
                let carrier = flags & IFF_LOWER_UP != 0;
                return Some(Some(LinkInfo {
                    ifindex,
                    admin_up,
                    oper_up: admin_up
                        && carrier
                        && !operstate.is_some_and(|o| OPER_BLOCKING.contains(&o)),
                    carrier,
                    running: flags & libc::IFF_RUNNING as u32 != 0,
                    operstate,
                    mtu,
                }));
            }
            _ => continue,
        }
    }
    None
}

/// [`query`] by ioctl: no carrier flag there, so `IFF_RUNNING` stands in.
fn query_ioctl(name: &str) -> Option<LinkInfo> {
    let sock = ctl_socket().ok()?;
    let mut req = ifreq(name).ok()?;
    ioctl(&sock, libc::SIOCGIFINDEX, &mut req).ok()?;
    // SAFETY: SIOCGIFINDEX filled the `ifru_ifindex` member of the union.
    let ifindex = unsafe { req.ifr_ifru.ifru_ifindex } as u32;
    ioctl(&sock, libc::SIOCGIFFLAGS, &mut req).ok()?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member.
    let flags = unsafe { req.ifr_ifru.ifru_flags } as libc::c_int;
    ioctl(&sock, libc::SIOCGIFMTU, &mut req).ok()?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;
    let running = flags & libc::IFF_RUNNING != 0;
    Some(LinkInfo {
        ifindex,
        admin_up: flags & libc::IFF_UP != 0,
        oper_up: running,
        carrier: running,
        running,
        operstate: None,
        mtu,
    })
}

/// The interface's MAC address (`SIOCGIFHWADDR`); `None` if it does not
/// exist.
pub fn mac(name: &str) -> Option<[u8; 6]> {
    let sock = ctl_socket().ok()?;
    let mut req = ifreq(name).ok()?;
    ioctl(&sock, libc::SIOCGIFHWADDR, &mut req).ok()?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member.
    let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(data) {
        *d = s as u8;
    }
    Some(mac)
}

/// Set `IFF_UP` on the interface (no-op if already up).
pub fn set_up(name: &str) -> Result<(), PortError> {
    let sock = ctl_socket().map_err(|err| PortError::Os { op: "socket", err })?;
    let mut req = ifreq(name)?;
    ioctl(&sock, libc::SIOCGIFFLAGS, &mut req).map_err(|e| map_err(name, "SIOCGIFFLAGS", e))?;
    // SAFETY: SIOCGIFFLAGS filled `ifru_flags`; we write the same member back.
    unsafe {
        if req.ifr_ifru.ifru_flags as libc::c_int & libc::IFF_UP != 0 {
            return Ok(());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    ioctl(&sock, libc::SIOCSIFFLAGS, &mut req).map_err(|e| map_err(name, "SIOCSIFFLAGS", e))
}

/// Set the interface MTU.
pub fn set_mtu(name: &str, mtu: u32) -> Result<(), PortError> {
    let sock = ctl_socket().map_err(|err| PortError::Os { op: "socket", err })?;
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_mtu = mtu as libc::c_int;
    ioctl(&sock, libc::SIOCSIFMTU, &mut req).map_err(|e| map_err(name, "SIOCSIFMTU", e))
}

/// Disable IPv6 on the interface so the kernel sends no neighbour discovery
/// or MLD frames of its own on a switch port. A kernel without IPv6 (no
/// `/proc/sys/net/ipv6`) is fine.
pub fn disable_ipv6(name: &str) -> Result<(), PortError> {
    if !valid_name(name) {
        return Err(PortError::NoSuchInterface(name.to_string()));
    }
    let path = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
    match std::fs::write(&path, b"1") {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if std::path::Path::new("/proc/sys/net/ipv6/conf").exists() && query(name).is_none() {
                Err(PortError::NoSuchInterface(name.to_string()))
            } else {
                Ok(())
            }
        }
        Err(err) => Err(PortError::Os {
            op: "disable_ipv6",
            err,
        }),
    }
}

pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() < libc::IFNAMSIZ && !name.bytes().any(|b| b == 0 || b == b'/')
}

pub(crate) fn map_err(name: &str, op: &'static str, err: io::Error) -> PortError {
    match err.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::NoSuchInterface(name.to_string()),
        Some(libc::ENETDOWN) => PortError::Down(name.to_string()),
        _ => PortError::Os { op, err },
    }
}

fn ctl_socket() -> io::Result<OwnedFd> {
    for family in [libc::AF_INET, libc::AF_PACKET, libc::AF_UNIX] {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd >= 0 {
            // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    Err(io::Error::last_os_error())
}

fn ifreq(name: &str) -> Result<libc::ifreq, PortError> {
    if !valid_name(name) {
        return Err(PortError::NoSuchInterface(name.to_string()));
    }
    // SAFETY: `ifreq` is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn ioctl(sock: &OwnedFd, request: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: every request used here reads/writes a `struct ifreq`, and `req`
    // is a valid, exclusively borrowed one for the duration of the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), request as _, req as *mut libc::ifreq) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Link events from the kernel (rtnetlink `RTMGRP_LINK`), so a carrier
/// change is seen microseconds after it happens instead of at the next
/// poll. The messages are not parsed: any event means "look again".
pub struct LinkMonitor {
    fd: OwnedFd,
}

impl LinkMonitor {
    /// Subscribe in the calling thread's network namespace.
    pub fn open() -> io::Result<LinkMonitor> {
        let fd = rtnl_socket(libc::RTMGRP_LINK as u32)?;
        // SAFETY: F_SETFL on our descriptor.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        Ok(LinkMonitor { fd })
    }

    /// The descriptor to poll(2) for events (readable: call [`LinkMonitor::drain`]).
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Wait up to `timeout` for events; true if any arrived (all pending
    /// messages are consumed). An overrun (ENOBUFS) counts as an event.
    pub fn wait(&self, timeout: std::time::Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe {
            libc::poll(
                &mut pfd,
                1,
                timeout.as_millis().min(i32::MAX as u128) as i32,
            )
        };
        n > 0 && self.drain()
    }

    /// Consume every pending message without waiting; true if there was
    /// any (or an overrun, ENOBUFS).
    pub fn drain(&self) -> bool {
        !matches!(self.drain_changes(&mut Vec::new()), LinkEvents::None)
    }

    /// Consume every pending message without waiting and collect the
    /// interfaces they name into `changed`, so the caller looks at those
    /// alone instead of at every port.
    pub fn drain_changes(&self, changed: &mut Vec<LinkChange>) -> LinkEvents {
        let mut buf = [0u8; 16384];
        let mut seen = LinkEvents::None;
        loop {
            // SAFETY: buf is valid for its length.
            let r = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                if !parse_link_events(&buf[..r as usize], changed) {
                    // Not understood: the caller cannot trust the list.
                    seen = LinkEvents::Overrun;
                } else if seen == LinkEvents::None {
                    seen = LinkEvents::Named;
                }
                continue;
            }
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) {
                // Events were lost: nobody knows which interfaces changed.
                seen = LinkEvents::Overrun;
                continue;
            }
            return seen;
        }
    }
}

/// What [`LinkMonitor::drain_changes`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvents {
    /// No message.
    None,
    /// Messages, each naming its interface.
    Named,
    /// Messages were lost or not understood: look at every interface.
    Overrun,
}

/// One interface a link event names: its index, and its name when the
/// message carried one (a rename names the new one; the index finds the
/// port that had the old).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkChange {
    pub ifindex: u32,
    pub name: Option<String>,
}

/// The interfaces named by the `RTM_NEWLINK`/`RTM_DELLINK` messages of one
/// datagram, appended to `out`. False if the datagram is not a well-formed
/// sequence of netlink messages. Any bytes are safe (fuzzed: `fuzz_link`).
pub fn parse_link_events(msg: &[u8], out: &mut Vec<LinkChange>) -> bool {
    const RTM_DELLINK: u16 = 17;
    let mut off = 0;
    while off < msg.len() {
        if off + 16 > msg.len() {
            return false;
        }
        let len = ne32(msg, off) as usize;
        if len < 16 || off + len > msg.len() {
            return false;
        }
        let m = &msg[off..off + len];
        off += len.next_multiple_of(4);
        let kind = ne16(m, 4);
        if !(kind == RTM_NEWLINK || kind == RTM_DELLINK) {
            continue;
        }
        if m.len() < 32 {
            return false;
        }
        let ifindex = ne32(m, 20);
        let mut name = None;
        let mut a = 32;
        while a + 4 <= m.len() {
            let alen = ne16(m, a) as usize;
            if alen < 4 || a + alen > m.len() {
                break;
            }
            if ne16(m, a + 2) & 0x3fff == IFLA_IFNAME {
                let data = &m[a + 4..a + alen];
                let data = data.split(|&b| b == 0).next().unwrap_or(&[]);
                name = std::str::from_utf8(data).ok().map(str::to_owned);
            }
            a += alen.next_multiple_of(4);
        }
        out.push(LinkChange { ifindex, name });
    }
    true
}

/// Clear `IFF_UP` (administratively down; the peer loses carrier): how
/// the switch err-disables a port.
pub fn set_down(name: &str) -> Result<(), PortError> {
    let sock = ctl_socket().map_err(|err| PortError::Os { op: "socket", err })?;
    let mut req = ifreq(name)?;
    ioctl(&sock, libc::SIOCGIFFLAGS, &mut req).map_err(|e| map_err(name, "SIOCGIFFLAGS", e))?;
    // SAFETY: SIOCGIFFLAGS filled `ifru_flags`; we write the same member back.
    unsafe {
        if req.ifr_ifru.ifru_flags as libc::c_int & libc::IFF_UP == 0 {
            return Ok(());
        }
        req.ifr_ifru.ifru_flags &= !(libc::IFF_UP as libc::c_short);
    }
    ioctl(&sock, libc::SIOCSIFFLAGS, &mut req).map_err(|e| map_err(name, "SIOCSIFFLAGS", e))
}

/// The interface's driver name (ethtool `ETHTOOL_GDRVINFO`: "veth",
/// "tun", "ixgbe", …), `None` if it does not answer.
pub fn driver(name: &str) -> Option<String> {
    /// `struct ethtool_drvinfo` (<linux/ethtool.h>).
    #[repr(C)]
    struct DrvInfo {
        cmd: u32,
        driver: [u8; 32],
        version: [u8; 32],
        fw_version: [u8; 32],
        bus_info: [u8; 32],
        erom_version: [u8; 32],
        reserved2: [u8; 12],
        n_priv_flags: u32,
        n_stats: u32,
        testinfo_len: u32,
        eedump_len: u32,
        regdump_len: u32,
    }
    const ETHTOOL_GDRVINFO: u32 = 3;
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    let sock = ctl_socket().ok()?;
    let mut req = ifreq(name).ok()?;
    // SAFETY: all-zero bytes are a valid DrvInfo (integers and arrays).
    let mut info: DrvInfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    // The kernel writes the answer through `ifr_data` into `info`, which
    // outlives the call and is laid out as `struct ethtool_drvinfo`.
    req.ifr_ifru.ifru_data = (&mut info as *mut DrvInfo).cast();
    ioctl(&sock, SIOCETHTOOL, &mut req).ok()?;
    let end = info.driver.iter().position(|&b| b == 0).unwrap_or(32);
    Some(String::from_utf8_lossy(&info.driver[..end]).into_owned())
}

/// Reads interfaces' link (carrier) through ethtool's `ETHTOOL_GLINK`: an
/// ioctl that looks the device up and asks its driver, where an rtnetlink
/// query renders every attribute of the interface. At 410 ports, looking
/// at every port's carrier every 100 ms by rtnetlink cost a tenth of a
/// core; the supervisor now probes carrier so and queries the interfaces
/// whose answer changed.
pub struct CarrierProbe {
    sock: OwnedFd,
}

impl CarrierProbe {
    /// A probe in the calling thread's network namespace.
    pub fn open() -> io::Result<CarrierProbe> {
        Ok(CarrierProbe {
            sock: ctl_socket()?,
        })
    }

    /// Administratively up with carrier (the kernel answers
    /// `netif_running && get_link`); `None` if the interface is gone or its
    /// driver has no `get_link`.
    pub fn link_up(&self, name: &str) -> Option<bool> {
        /// `struct ethtool_value` (<linux/ethtool.h>).
        #[repr(C)]
        struct Value {
            cmd: u32,
            data: u32,
        }
        const ETHTOOL_GLINK: u32 = 0x0a;
        const SIOCETHTOOL: libc::c_ulong = 0x8946;
        let mut req = ifreq(name).ok()?;
        let mut v = Value {
            cmd: ETHTOOL_GLINK,
            data: 0,
        };
        // The kernel writes the answer through `ifr_data` into `v`, which
        // outlives the call and is laid out as `struct ethtool_value`.
        req.ifr_ifru.ifru_data = (&mut v as *mut Value).cast();
        ioctl(&self.sock, SIOCETHTOOL, &mut req).ok()?;
        Some(v.data != 0)
    }
}

/// A veth: its peer may be a local stack that leaves TCP/UDP checksums
/// to offload (see [`crate::complete_checksums`]).
pub fn is_veth(name: &str) -> bool {
    driver(name).as_deref() == Some("veth")
}

/// The link speed in Mbit/s the driver reports (ethtool `ETHTOOL_GSET`;
/// a veth says 10,000), `None` if it reports none (down, unknown).
pub fn speed_mbps(name: &str) -> Option<u32> {
    /// `struct ethtool_cmd` (<linux/ethtool.h>), the legacy query every
    /// driver with link settings answers.
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolCmd {
        cmd: u32,
        supported: u32,
        advertising: u32,
        speed: u16,
        duplex: u8,
        port: u8,
        phy_address: u8,
        transceiver: u8,
        autoneg: u8,
        mdio_support: u8,
        maxtxpkt: u32,
        maxrxpkt: u32,
        speed_hi: u16,
        eth_tp_mdix: u8,
        eth_tp_mdix_ctrl: u8,
        lp_advertising: u32,
        reserved: [u32; 2],
    }
    const ETHTOOL_GSET: u32 = 1;
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    let sock = ctl_socket().ok()?;
    let mut req = ifreq(name).ok()?;
    let mut cmd = EthtoolCmd {
        cmd: ETHTOOL_GSET,
        ..EthtoolCmd::default()
    };
    // The kernel writes the answer through `ifr_data` into `cmd`, which
    // outlives the call and is laid out as `struct ethtool_cmd`.
    req.ifr_ifru.ifru_data = (&mut cmd as *mut EthtoolCmd).cast();
    ioctl(&sock, SIOCETHTOOL, &mut req).ok()?;
    let speed = u32::from(cmd.speed_hi) << 16 | u32::from(cmd.speed);
    // SPEED_UNKNOWN is -1 (all ones); 0 means nothing useful either.
    (speed != 0 && speed != u32::MAX).then_some(speed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn newlink(seq: u32, flags: u32, operstate: u8) -> Vec<u8> {
        let mut m = vec![0u8; 32];
        m[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
        m[8..12].copy_from_slice(&seq.to_ne_bytes());
        m[20..24].copy_from_slice(&5i32.to_ne_bytes());
        m[24..28].copy_from_slice(&flags.to_ne_bytes());
        push_attr(&mut m, IFLA_MTU, &1500u32.to_ne_bytes());
        push_attr(&mut m, IFLA_OPERSTATE, &[operstate]);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    #[test]
    fn getlink_answer_is_read_by_carrier() {
        let up = libc::IFF_UP as u32;
        let running = libc::IFF_RUNNING as u32;
        // Carrier and admin up: up, whatever IFF_RUNNING and operstate
        // (still "down" while the link watch lags) say.
        let l = parse_getlink(&newlink(7, up | IFF_LOWER_UP, 2), 7)
            .unwrap()
            .unwrap();
        assert!(l.oper_up && l.carrier && !l.running && l.mtu == 1500 && l.ifindex == 5);
        // Carrier gone, IFF_RUNNING not yet cleared: down.
        let l = parse_getlink(&newlink(7, up | running, 6), 7)
            .unwrap()
            .unwrap();
        assert!(!l.oper_up && !l.carrier && l.running);
        // Dormant (802.1X) vetoes up; admin down is down.
        let l = parse_getlink(&newlink(7, up | IFF_LOWER_UP, 5), 7)
            .unwrap()
            .unwrap();
        assert!(!l.oper_up);
        let l = parse_getlink(&newlink(7, IFF_LOWER_UP, 6), 7)
            .unwrap()
            .unwrap();
        assert!(!l.oper_up);
        // Another request's answer is skipped; an error means no such link.
        assert!(parse_getlink(&newlink(6, up, 6), 7).is_none());
        let mut err = newlink(7, 0, 0);
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        assert_eq!(parse_getlink(&err, 7), Some(None));
        // Truncated or garbled answers never panic.
        let m = newlink(7, up | IFF_LOWER_UP, 6);
        for n in 0..m.len() {
            let _ = parse_getlink(&m[..n], 7);
            let mut g = m.clone();
            g[n] ^= 0xff;
            let _ = parse_getlink(&g, 7);
        }
    }

    /// Link events name their interfaces (by index, and by name when
    /// carried); other messages are skipped; garbage is reported, never a
    /// panic.
    #[test]
    fn link_events_name_their_interfaces() {
        let mut a = newlink(0, 0, 6);
        push_attr(&mut a, IFLA_IFNAME, b"sw7\0");
        let len = a.len() as u32;
        a[0..4].copy_from_slice(&len.to_ne_bytes());
        let mut del = newlink(0, 0, 2);
        del[4..6].copy_from_slice(&17u16.to_ne_bytes());
        del[20..24].copy_from_slice(&9u32.to_ne_bytes());
        let mut other = newlink(0, 0, 2);
        other[4..6].copy_from_slice(&20u16.to_ne_bytes()); // RTM_NEWADDR
        let dgram = [a.clone(), other, del].concat();
        let mut out = Vec::new();
        assert!(parse_link_events(&dgram, &mut out));
        assert_eq!(
            out,
            vec![
                LinkChange {
                    ifindex: 5,
                    name: Some("sw7".into())
                },
                LinkChange {
                    ifindex: 9,
                    name: None
                },
            ]
        );
        for n in 1..a.len() {
            let mut out = Vec::new();
            assert!(!parse_link_events(&a[..n], &mut out) || out.is_empty());
            let mut g = a.clone();
            g[n] ^= 0xff;
            let _ = parse_link_events(&g, &mut out);
        }
    }

    /// Loopback is up with carrier; a missing interface has no answer.
    #[test]
    fn carrier_probe_reads_loopback() {
        let p = CarrierProbe::open().expect("socket");
        assert_eq!(p.link_up("lo"), Some(true));
        assert_eq!(p.link_up("lyio-nonexistent0"), None);
    }

    #[test]
    fn loopback_exists_and_bogus_does_not() {
        let lo = query("lo").expect("lo exists in every namespace");
        assert!(lo.ifindex >= 1 && lo.mtu > 0);
        assert!(query("lyio-nonexistent0").is_none());
        assert!(query("").is_none());
        assert!(query("a-name-that-is-way-too-long").is_none());
        assert!(matches!(
            set_mtu("lyio-nonexistent0", 1500),
            Err(PortError::NoSuchInterface(_))
        ));
    }
}
