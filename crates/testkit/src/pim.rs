//! FRR's pimd (with zebra) in a network namespace, and multicast hosts
//! (an SSM receiver, a sender) for multicast routing tests.
//!
//! [`PimRouter`] starts zebra through [`FrrInstance`] (private dir, vty
//! sockets, logs, teardown, reaping of stale daemons) and then pimd in
//! the same dir, so `vtysh --vty_socket <dir>` reaches both. pimd runs in
//! the namespace's default VRF and programs that namespace's kernel MFC.
//!
//! What FRR 8.4.4 (Debian 12) does, found by running it (details in
//! `docs/pim.md`):
//!
//! * An IGMPv3 `INCLUDE {S}` report for a group in the SSM range (232/8 by
//!   default) makes pimd install the `(S,G)` MFC entry at once, before any
//!   data; the first version has pimreg as iif, replaced within a
//!   millisecond by the interface toward S.
//! * Data for an SSM group nobody joined is left unresolved by pimd (the
//!   kernel drops the queued packets after 10 s).
//! * There is no pim6d in the package, and no IGMPv2-to-SSM mapping.

use std::fmt::Write as _;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::frr::{frr_missing, Daemon, FrrConfig, FrrInstance, FrrOptions, FRR_DIR};
use crate::netns::in_netns;

/// Full path of pimd.
pub fn pimd_binary() -> PathBuf {
    PathBuf::from(FRR_DIR).join("pimd")
}

/// Why pimd tests cannot run here, or `None` if they can.
pub fn pim_missing() -> Option<String> {
    if let Some(why) = frr_missing(&[Daemon::Zebra]) {
        return Some(why);
    }
    if !pimd_binary().exists() {
        return Some(format!(
            "needs {} (apt-get install frr)",
            pimd_binary().display()
        ));
    }
    None
}

/// Returns early from the calling test with "SKIPPED: ..." unless zebra
/// and pimd can run (root, the `frr` user, the binaries, vtysh).
#[macro_export]
macro_rules! require_pim {
    () => {
        if let Some(why) = $crate::pim::pim_missing() {
            eprintln!("SKIPPED: {why}");
            println!("SKIPPED: {why}");
            return;
        }
    };
}

/// pimd's configuration, rendered by [`PimConfig::render`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PimConfig {
    /// Interfaces with `ip pim` and `ip igmp`.
    pub interfaces: Vec<String>,
    /// `ip igmp version` on those interfaces (2 or 3; 3 is FRR's default).
    pub igmp_version: u8,
    /// `ip pim rp ADDRESS RANGE`, for ASM groups (none: SSM only).
    pub rp: Option<(Ipv4Addr, String)>,
    /// `ip pim keep-alive-timer` in seconds (FRR's default: 210).
    pub keep_alive: Option<u32>,
    /// `debug pim events`, `debug mroute`, ... into pimd's log.
    pub debug: bool,
    /// Extra top-level lines, verbatim.
    pub extra: Vec<String>,
}

impl PimConfig {
    /// PIM and IGMPv3 on `interfaces`, SSM only, FRR's timers.
    pub fn new(interfaces: &[&str]) -> PimConfig {
        PimConfig {
            interfaces: interfaces.iter().map(|s| s.to_string()).collect(),
            igmp_version: 3,
            rp: None,
            keep_alive: None,
            debug: false,
            extra: Vec::new(),
        }
    }

    /// The text of `pimd.conf`.
    pub fn render(&self, hostname: &str) -> String {
        let mut s = format!("hostname {hostname}\n");
        if self.debug {
            for d in ["debug pim events", "debug pim zebra", "debug mroute detail"] {
                let _ = writeln!(s, "{d}");
            }
        }
        if let Some((addr, range)) = &self.rp {
            let _ = writeln!(s, "ip pim rp {addr} {range}");
        }
        if let Some(k) = self.keep_alive {
            let _ = writeln!(s, "ip pim keep-alive-timer {k}");
        }
        for l in &self.extra {
            let _ = writeln!(s, "{l}");
        }
        for i in &self.interfaces {
            let _ = writeln!(
                s,
                "interface {i}\n ip pim\n ip igmp\n ip igmp version {}\nexit",
                self.igmp_version
            );
        }
        s
    }
}

/// zebra and pimd running in one namespace. Drop stops pimd, then zebra
/// (and removes the dir; logs are printed first if the thread panics).
pub struct PimRouter {
    pimd: Option<Child>,
    // Declared last: dropped after pimd is gone.
    frr: FrrInstance,
}

impl PimRouter {
    /// Starts zebra, then pimd with `cfg`, in namespace `ns`; returns once
    /// pimd's vty socket is open. `name` labels the dir and the logs.
    pub fn start(ns: &str, name: &str, cfg: &PimConfig) -> io::Result<PimRouter> {
        let zebra = FrrConfig {
            zebra: format!("hostname {name}\n"),
            ..FrrConfig::default()
        };
        let opts = FrrOptions::default();
        let frr = FrrInstance::start_with(ns, name, &[Daemon::Zebra], &zebra, &opts)?;
        let dir = frr.dir().to_path_buf();
        let conf = dir.join("pimd.conf");
        std::fs::write(&conf, cfg.render(name))?;
        // The dir belongs to the `frr` user; so must pimd's config.
        let meta = std::fs::metadata(&dir)?;
        std::os::unix::fs::chown(&conf, Some(meta.uid()), Some(meta.gid()))?;
        let d = dir.to_string_lossy().into_owned();
        let out = std::fs::File::create(dir.join("pimd.out"))?;
        // Same arguments as FrrInstance gives its daemons: every path in
        // the dir, no TCP vty.
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(pimd_binary())
            .args(["-f", &format!("{d}/pimd.conf")])
            .args(["-i", &format!("{d}/pimd.pid")])
            .args(["-z", &format!("{d}/zserv.api")])
            .args(["--vty_socket", &d, "-A", "127.0.0.1", "-P", "0"])
            .args(["--log", &format!("file:{d}/pimd.log")])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        let mut r = PimRouter {
            pimd: Some(child),
            frr,
        };
        let vty = dir.join("pimd.vty");
        let deadline = Instant::now() + opts.start_timeout;
        while !vty.exists() {
            if let Some(c) = r.pimd.as_mut() {
                if let Some(st) = c.try_wait()? {
                    return Err(io::Error::other(format!(
                        "pimd of {name} exited ({st}): {}",
                        r.logs()
                    )));
                }
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("pimd of {name} did not open its vty socket"),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(r)
    }

    /// The zebra instance (namespace, dir, `vtysh`, `configure`, ...);
    /// its vtysh also reaches pimd.
    pub fn frr(&self) -> &FrrInstance {
        &self.frr
    }

    /// See [`FrrInstance::vtysh`].
    pub fn vtysh(&self, cmds: &[&str]) -> String {
        self.frr.vtysh(cmds)
    }

    /// See [`FrrInstance::vtysh_json`].
    pub fn vtysh_json(&self, cmd: &str) -> serde_json::Value {
        self.frr.vtysh_json(cmd)
    }

    /// True while pimd runs.
    pub fn pimd_running(&mut self) -> bool {
        self.pimd
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits until pimd reports PIM up on every interface in `ifaces`
    /// (it learns them and their addresses from zebra).
    pub fn wait_interfaces(&self, ifaces: &[&str], timeout: Duration) -> io::Result<Duration> {
        self.frr.wait_for(
            |f| {
                let j = f.vtysh_json("show ip pim interface json");
                ifaces.iter().all(|i| {
                    j.get(*i)
                        .and_then(|x| x.get("state"))
                        .and_then(|s| s.as_str())
                        == Some("up")
                })
            },
            timeout,
        )
    }

    /// `show ip mroute json`: group → source → entry (`iif`, `oil`, ...).
    pub fn mroutes(&self) -> serde_json::Value {
        self.frr.vtysh_json("show ip mroute json")
    }

    /// zebra's and pimd's log tails.
    pub fn logs(&self) -> String {
        let mut s = self.frr.logs();
        for f in ["pimd.log", "pimd.out"] {
            let text = std::fs::read_to_string(self.frr.dir().join(f)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let _ = writeln!(s, "===== {} {f} =====", self.frr.name());
            for l in &lines[lines.len().saturating_sub(80)..] {
                let _ = writeln!(s, "{l}");
            }
        }
        s
    }

    /// Stops pimd (SIGTERM, SIGKILL after 0.5 s): the MFC entries it
    /// installed go with its mroute socket.
    pub fn stop_pimd(&mut self) {
        let Some(mut c) = self.pimd.take() else {
            return;
        };
        if let Ok(None) = c.try_wait() {
            // SAFETY: kill(2) on our own child, not reaped yet.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_millis(500);
            while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl Drop for PimRouter {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // FrrInstance prints zebra's; pimd's are ours.
            let text = std::fs::read_to_string(self.frr.dir().join("pimd.log")).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            eprintln!("===== {} pimd.log =====", self.frr.name());
            for l in &lines[lines.len().saturating_sub(80)..] {
                eprintln!("{l}");
            }
        }
        self.stop_pimd();
    }
}

/// `IP_ADD_SOURCE_MEMBERSHIP` (linux/in.h; not in the libc crate).
const IP_ADD_SOURCE_MEMBERSHIP: libc::c_int = 39;

/// A UDP socket in namespace `ns` bound to `port` that joined the SSM
/// channel `(source, group)` on the interface with address `ifaddr`: the
/// kernel sends an IGMPv3 `ALLOW`/`INCLUDE {source}` report at once (and
/// repeats it), and answers queries while the socket is open. Dropping
/// the socket leaves the channel.
pub fn join_ssm(
    ns: &str,
    ifaddr: Ipv4Addr,
    source: Ipv4Addr,
    group: Ipv4Addr,
    port: u16,
) -> io::Result<UdpSocket> {
    in_netns(ns, move || -> io::Result<UdpSocket> {
        let sock = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))?;
        // struct ip_mreq_source { imr_multiaddr; imr_interface;
        // imr_sourceaddr; }, each in network order.
        let mut mreq = [0u8; 12];
        mreq[0..4].copy_from_slice(&group.octets());
        mreq[4..8].copy_from_slice(&ifaddr.octets());
        mreq[8..12].copy_from_slice(&source.octets());
        // SAFETY: mreq is 12 valid bytes, the size passed.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IP,
                IP_ADD_SOURCE_MEMBERSHIP,
                mreq.as_ptr() as *const libc::c_void,
                mreq.len() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sock)
    })?
}

/// A UDP socket in namespace `ns` that sends multicast from `src` (an
/// address of one of the namespace's interfaces, which is also the
/// outgoing one) with TTL `ttl`.
pub fn multicast_sender(ns: &str, src: Ipv4Addr, ttl: u32) -> io::Result<UdpSocket> {
    in_netns(ns, move || -> io::Result<UdpSocket> {
        let sock = UdpSocket::bind(SocketAddrV4::new(src, 0))?;
        sock.set_multicast_ttl_v4(ttl)?;
        sock.set_multicast_loop_v4(false)?;
        let addr = src.octets();
        // SAFETY: IP_MULTICAST_IF with a 4-byte in_addr.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_MULTICAST_IF,
                addr.as_ptr() as *const libc::c_void,
                4,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sock)
    })?
}
