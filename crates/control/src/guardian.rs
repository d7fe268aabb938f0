//! The node guardian of a virtual-switch node (docs/virtual-switch.md,
//! "Node loss"): a small process forked at start that makes a dead
//! Lanyard look like a dead chassis.
//!
//! A hardware switch that dies takes its ports dark with it, and its
//! neighbours drop those links at carrier loss (milliseconds). A Lanyard
//! process that is killed leaves its veths and NICs up, so an LACP partner
//! only notices at its LACP timeout (3 s fast) and the peer node at the
//! keepalive timeout. The guardian closes that gap: it watches the switch
//! process (its task flags every [`POLL_MS`] for `PF_EXITING`, set as the
//! exit begins, and a pidfd as a backstop) and, when the process ends
//! without a hand-over (crash, `kill -9`, a clean stop), it sends the peer a goodbye over the
//! keepalive path (the peer is alone and primary at once, never
//! dual-active) and then takes the configured ports administratively
//! down (`virtual-switch.node-loss-links`). The next start brings them up
//! again (every switch port is set up when it is attached).
//!
//! A planned restart (`lanyard restart`, the same PID `exec`s its binary)
//! tells the guardian first over a pipe ("hand-over"), so nothing drops;
//! the new image forks a guardian of its own.
//!
//! The child is forked from a process that may already run threads, so it
//! only makes system calls on memory prepared before the fork: no
//! allocation, no locks, no logging framework.

use config::vswitch::NodeLossLinks;
use config::Config;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Name of the guardian process (`/proc/PID/comm`), e.g. for a lab
/// script that kills the switch but not its guardian.
pub const COMM: &str = "lanyard-guard";

/// What the guardian does when the switch ends without a hand-over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Ports taken down, in this order.
    pub ports: Vec<String>,
    /// The goodbye: (from, to, message), sent before any port goes down.
    pub goodbye: Option<(SocketAddr, SocketAddr, Vec<u8>)>,
}

impl Plan {
    /// `None` without a `virtual-switch:` section or with
    /// `node-loss-links: none`.
    pub fn of(cfg: &Config) -> Option<Plan> {
        let vs = cfg.virtual_switch.as_ref()?;
        let ports: Vec<String> = match vs.node_loss_links {
            NodeLossLinks::None => return None,
            NodeLossLinks::All => cfg.ports.iter().map(|p| p.name.clone()).collect(),
            NodeLossLinks::ChannelMembers => vs
                .channels
                .iter()
                .filter_map(|c| cfg.port_channels.iter().find(|p| p.name == c.port_channel))
                .flat_map(|p| p.members.iter().cloned())
                .collect(),
        };
        let ka = &vs.keepalive;
        let hello = wire::vswitch::Hello {
            priority: vs.priority,
            node: protocols::vswitch::pair::node_id(ka.source),
            system: vs.system_mac.octets(),
            peer_link_up: false,
            synced: false,
            primary: false,
            seq: 0,
        };
        let mut buf = [0u8; wire::vswitch::HEADER_LEN + wire::vswitch::MAX_PAYLOAD];
        let goodbye = wire::vswitch::encode(
            vs.domain_id as u16,
            &wire::vswitch::Message::Goodbye(hello),
            &mut buf,
        )
        .ok()
        .map(|n| {
            (
                SocketAddr::new(ka.source, 0),
                SocketAddr::new(ka.peer, ka.port),
                buf[..n].to_vec(),
            )
        });
        Some(Plan { ports, goodbye })
    }
}

/// The running guardian, held by the switch process.
#[derive(Debug)]
pub struct Guardian {
    /// Write end of the pipe to the guardian (close-on-exec).
    tx: OwnedFd,
    pid: libc::pid_t,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large enough and aligned for sockaddr_in.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// Everything the child touches, prepared before the fork.
struct Prepared {
    pidfd: OwnedFd,
    /// `/proc/PID/stat` of the switch, read every [`POLL_MS`].
    stat: OwnedFd,
    ctl: OwnedFd,
    udp: Option<OwnedFd>,
    to: (libc::sockaddr_storage, libc::socklen_t),
    msg: Vec<u8>,
    ifreqs: Vec<libc::ifreq>,
    note: Vec<u8>,
}

impl Prepared {
    fn new(plan: &Plan) -> io::Result<Prepared> {
        // SAFETY: plain system calls; every returned fd is checked and owned.
        let pidfd = check(unsafe {
            libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as libc::c_int
        })?;
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        let path = std::ffi::CString::new(format!("/proc/{}/stat", std::process::id()))
            .map_err(io::Error::other)?;
        let stat = check(unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
        let stat = unsafe { OwnedFd::from_raw_fd(stat) };
        let ctl = check(unsafe {
            libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
        })?;
        let ctl = unsafe { OwnedFd::from_raw_fd(ctl) };
        let (mut udp, mut to, mut msg) = (None, sockaddr(&SocketAddr::from(([0; 4], 0))), vec![]);
        if let Some((from, dst, m)) = &plan.goodbye {
            let fam = if from.is_ipv4() {
                libc::AF_INET
            } else {
                libc::AF_INET6
            };
            let s = check(unsafe { libc::socket(fam, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
            let s = unsafe { OwnedFd::from_raw_fd(s) };
            // From the keepalive source: the peer takes keepalive-path
            // messages from that address only.
            let (sa, len) = sockaddr(from);
            check(unsafe {
                libc::bind(s.as_raw_fd(), &sa as *const _ as *const libc::sockaddr, len)
            })?;
            udp = Some(s);
            to = sockaddr(dst);
            msg = m.clone();
        }
        let mut ifreqs = Vec::with_capacity(plan.ports.len());
        for p in &plan.ports {
            // SAFETY: all-zero is a valid ifreq.
            let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
            if p.len() >= r.ifr_name.len() {
                continue;
            }
            for (d, s) in r.ifr_name.iter_mut().zip(p.bytes()) {
                *d = s as libc::c_char;
            }
            ifreqs.push(r);
        }
        let note = format!(
            "{COMM}: lanyard (pid {}) ended without a hand-over: {}ports down: {}\n",
            std::process::id(),
            if udp.is_some() {
                "goodbye sent to the peer, "
            } else {
                ""
            },
            plan.ports.join(" ")
        )
        .into_bytes();
        Ok(Prepared {
            pidfd,
            stat,
            ctl,
            udp,
            to,
            msg,
            ifreqs,
            note,
        })
    }
}

/// How often the guardian reads the switch's task flags (ms). The pidfd
/// only reports the end of the exit, after the kernel has freed the
/// process's memory and closed its sockets (measured 70–170 ms for a
/// switch of 150–260 MB on 2 loaded cores); `PF_EXITING` is set as the
/// exit begins.
pub const POLL_MS: libc::c_int = 2;

/// `PF_EXITING` in `task->flags`.
const PF_EXITING: u64 = 0x4;

/// Whether a `/proc/PID/stat` line says the task is exiting: field 9
/// (flags), counted after the `)` that closes the command name.
fn exiting(stat: &[u8]) -> bool {
    let Some(close) = stat.iter().rposition(|b| *b == b')') else {
        return false;
    };
    // ") S ppid pgrp session tty tpgid flags": flags is the 7th field.
    let mut field = 0;
    let mut flags: u64 = 0;
    let mut in_flags = false;
    for &b in &stat[close + 1..] {
        if b == b' ' {
            if in_flags {
                return flags & PF_EXITING != 0;
            }
            field += 1;
            in_flags = field == 7;
            continue;
        }
        if in_flags {
            if !b.is_ascii_digit() {
                return false;
            }
            flags = flags.wrapping_mul(10).wrapping_add((b - b'0') as u64);
        }
    }
    false
}

/// Closes every fd of the child but stdio and `keep`.
fn close_others(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut from: libc::c_uint = 3;
    for &k in keep.iter() {
        let k = k as libc::c_uint;
        if k > from {
            // SAFETY: close_range on fds this (child) process owns.
            unsafe { libc::syscall(libc::SYS_close_range, from, k - 1, 0) };
        }
        from = from.max(k + 1);
    }
    unsafe { libc::syscall(libc::SYS_close_range, from, libc::c_uint::MAX, 0) };
}

/// The child: wait for the switch to end, then act. Never returns.
fn child(p: &Prepared, rx: RawFd) -> ! {
    // SAFETY: async-signal-safe system calls on memory prepared before
    // the fork; `_exit` ends the child without running the parent's
    // destructors or atexit handlers.
    unsafe {
        let name = b"lanyard-guard\0";
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
        // A Ctrl-C or SIGTERM to the process group stops the switch
        // cleanly; the guardian must outlive it to act.
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(s, libc::SIG_IGN);
        }
        let mut keep = [
            p.pidfd.as_raw_fd(),
            p.ctl.as_raw_fd(),
            rx,
            p.stat.as_raw_fd(),
            -1,
        ];
        if let Some(u) = &p.udp {
            keep[4] = u.as_raw_fd();
        }
        let n = if p.udp.is_some() { 5 } else { 4 };
        close_others(&mut keep[..n]);
        let mut fds = [
            libc::pollfd {
                fd: p.pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: rx,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let mut buf = [0u8; 1024];
        loop {
            let r = libc::poll(fds.as_mut_ptr(), 2, POLL_MS);
            if r < 0 {
                continue; // EINTR
            }
            if r == 0 {
                let n = libc::pread(
                    p.stat.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                );
                // Unreadable: the process is gone (the pidfd says so too).
                if n <= 0 || exiting(&buf[..n as usize]) {
                    break;
                }
                continue;
            }
            if fds[1].revents != 0 {
                let mut b = 0u8;
                let r = libc::read(rx, &mut b as *mut u8 as *mut libc::c_void, 1);
                if r == 1 && b == b'H' {
                    // Planned restart: the new image has its own guardian.
                    libc::_exit(0);
                }
                if r == 0 || (r < 0 && *libc::__errno_location() != libc::EINTR) {
                    // The switch closed the pipe (exec without telling):
                    // keep watching the process itself.
                    fds[1].fd = -1;
                }
            }
            if fds[0].revents != 0 {
                break;
            }
        }
        // The switch is gone. Tell the peer first, so that its peer link
        // going dark (`all`) never looks like a split.
        if let Some(u) = &p.udp {
            for _ in 0..3 {
                libc::sendto(
                    u.as_raw_fd(),
                    p.msg.as_ptr() as *const libc::c_void,
                    p.msg.len(),
                    0,
                    &p.to.0 as *const _ as *const libc::sockaddr,
                    p.to.1,
                );
            }
        }
        for r in &p.ifreqs {
            let mut r = *r;
            if libc::ioctl(p.ctl.as_raw_fd(), libc::SIOCGIFFLAGS, &mut r) == 0 {
                r.ifr_ifru.ifru_flags &= !(libc::IFF_UP as libc::c_short);
                libc::ioctl(p.ctl.as_raw_fd(), libc::SIOCSIFFLAGS, &mut r);
            }
        }
        libc::write(2, p.note.as_ptr() as *const libc::c_void, p.note.len());
        libc::_exit(0)
    }
}

impl Guardian {
    /// Forks the guardian of this process.
    pub fn spawn(plan: &Plan) -> io::Result<Guardian> {
        let prep = Prepared::new(plan)?;
        let mut pipe = [0 as RawFd; 2];
        // SAFETY: pipe2 fills two fds, owned below.
        check(unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) })?;
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(pipe[0]), OwnedFd::from_raw_fd(pipe[1])) };
        // SAFETY: the child only runs `child`, which makes system calls on
        // memory prepared above and ends with `_exit`.
        let pid = check(unsafe { libc::fork() })?;
        if pid == 0 {
            child(&prep, rx.as_raw_fd());
        }
        drop(rx);
        drop(prep);
        Ok(Guardian { tx, pid })
    }

    /// The guardian's process id.
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// A planned restart: the guardian leaves without touching anything.
    /// Waits (briefly) for it, so no zombie goes through the exec.
    pub fn handover(self) {
        // SAFETY: a one-byte write to our pipe, then reaping our own child.
        unsafe {
            libc::write(self.tx.as_raw_fd(), b"H".as_ptr() as *const libc::c_void, 1);
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
            while libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) == 0
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "vlans:
  - id: 10
ports:
  - {name: pl, mode: trunk}
  - {name: m1, vlan: 10}
  - {name: m2, vlan: 10}
  - {name: h, vlan: 10}
  - {name: ka, mode: routed, addresses: [192.0.2.1/30]}
port-channels:
  - {name: po1, members: [m1, m2]}
virtual-switch:
  domain-id: 7
  priority: 100
  system-mac: 02:00:00:00:07:00
  peer-link: [pl]
  keepalive: {source: 192.0.2.1, peer: 192.0.2.2}
  channels: [{port-channel: po1, id: 1}]
";

    fn plan(extra: &str) -> Option<Plan> {
        Plan::of(&config::parse(&format!("{YAML}{extra}"), "t.yaml").unwrap())
    }

    #[test]
    fn reads_pf_exiting_from_proc_stat() {
        let line =
            |flags: u32| format!("4242 (lanyard (x) y) R 1 4242 4242 0 -1 {flags} 100 0 0 0 5 6\n");
        assert!(!exiting(line(4194560).as_bytes())); // PF_RANDOMIZE | PF_FORKNOEXEC-ish
        assert!(exiting(line(4194564).as_bytes()));
        assert!(!exiting(b"garbage"));
        assert!(!exiting(b"1 (x) R 1 2"));
        // Our own task is not exiting.
        let own = std::fs::read("/proc/self/stat").unwrap();
        assert!(!exiting(&own));
    }

    #[test]
    fn plans_follow_node_loss_links() {
        let p = plan("").unwrap();
        assert_eq!(p.ports, ["m1", "m2"]);
        let (from, to, msg) = p.goodbye.unwrap();
        assert_eq!(from, "192.0.2.1:0".parse().unwrap());
        assert_eq!(to, "192.0.2.2:3784".parse().unwrap());
        match wire::vswitch::decode(&msg) {
            Ok((7, wire::vswitch::Message::Goodbye(h))) => {
                assert_eq!(h.node, [0, 0, 192, 0, 2, 1]);
                assert_eq!(h.system, [2, 0, 0, 0, 7, 0]);
                assert_eq!(h.priority, 100);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            plan("  node-loss-links: all\n").unwrap().ports,
            ["pl", "m1", "m2", "h", "ka"]
        );
        assert!(plan("  node-loss-links: none\n").is_none());
        let alone = YAML.split("virtual-switch:").next().unwrap();
        assert!(Plan::of(&config::parse(alone, "t.yaml").unwrap()).is_none());
    }
}
