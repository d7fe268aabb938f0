//! Real FRRouting daemons in network namespaces, for control-plane tests.
//!
//! [`FrrInstance`] is one FRR router: zebra and protocol daemons started
//! with `ip netns exec` in a namespace, every path (config, pid files, the
//! zserv socket, the vty sockets, logs) in a private temp dir, so several
//! instances never share state and nothing under `/etc/frr` or
//! `/var/run/frr` is touched. [`OspfRouter`] renders the configs of the two
//! roles an OSPF test needs (an *injector* that advertises many external
//! routes, and the *DUT router*), and [`RouterBed`] cables a DUT namespace
//! to one tester namespace per port (one tester router per port, as in
//! `tests/frr_ospf_scale.rs`).
//!
//! What FRR 8.4.4 (Debian 12) imposes, found by running it:
//!
//! * The daemons must run as the packaged `frr` user (the default); as root
//!   they stop at "user(root) is not part of vty group specified(frrvty)".
//!   So the temp dir is chowned to `frr`.
//! * staticd reading a large config is unusable: 1,000 `ip route`s took
//!   26 s and 2,000 took 210 s to load with `-f` (libyang/northbound,
//!   worse than quadratic; 30,000 did not finish in 9 CPU minutes).
//!   Injectors therefore put their routes in the kernel (`ip -batch`, 45k
//!   routes in about 1 s) and redistribute `kernel`; zebra learns them
//!   from its initial netlink dump. [`RouteSource::Static`] stays
//!   available for small tables.
//! * A daemon busy loading config ignores SIGTERM: teardown escalates to
//!   SIGKILL.
//! * Timers, at 240k + 118k externals on 2 cores: a 4 s dead interval
//!   makes adjacencies flap for ever (a busy ospfd misses hellos); FRR's
//!   1 s LSA min-arrival drops the second of two router-LSAs sent within
//!   milliseconds when an adjacency comes up, costing a 5 s retransmit;
//!   broadcast links add a dead interval of Waiting before any adjacency.
//!   Hence [`OspfRouter`]'s defaults (point-to-point, hello 1, dead 40,
//!   min-arrival 0, see [`OspfRouter::fast_timers`]).
//! * ospfd sets a type-5 LSA's forwarding address to the redistributed
//!   route's next hop when that is on an OSPF broadcast interface, but
//!   ospf6d never sets one: a single tester router cannot steer IPv6
//!   prefixes to particular links, so tests use one router per port.
//! * OSPF neighbours must agree on the MTU (DD packets carry it): Lanyard's
//!   ports and the tester's veths need the same MTU, or `ip ospf
//!   mtu-ignore`. A 9000-byte MTU halves convergence time at scale (six
//!   times fewer DD and LS Update packets).
//! * A test killed by a signal cannot run destructors: the next run reaps
//!   daemons and namespaces whose owning test process is gone (see
//!   [`reap_stale_namespaces`]; `LANYARD_FRR_NO_REAP=1` turns that off).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::netns::{ip, veth, Netns};
use crate::rawport::RawPort;

/// Where Debian installs the daemons.
pub const FRR_DIR: &str = "/usr/lib/frr";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// One FRR daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Daemon {
    Zebra,
    Staticd,
    Ospfd,
    Ospf6d,
    Ldpd,
    Bgpd,
}

impl Daemon {
    /// Its executable name (also the base name of its files in the dir).
    pub fn name(self) -> &'static str {
        match self {
            Daemon::Zebra => "zebra",
            Daemon::Staticd => "staticd",
            Daemon::Ospfd => "ospfd",
            Daemon::Ospf6d => "ospf6d",
            Daemon::Ldpd => "ldpd",
            Daemon::Bgpd => "bgpd",
        }
    }

    /// Full path of the executable.
    pub fn binary(self) -> PathBuf {
        Path::new(FRR_DIR).join(self.name())
    }
}

/// Why FRR tests cannot run here (not root, no `frr` user, a daemon or
/// vtysh missing), or `None` if they can.
pub fn frr_missing(daemons: &[Daemon]) -> Option<String> {
    if !crate::is_root() {
        return Some("needs root (network namespaces)".into());
    }
    if frr_ids().is_none() {
        return Some("needs the `frr` user (apt-get install frr)".into());
    }
    for d in daemons {
        if !d.binary().exists() {
            return Some(format!(
                "needs {} (apt-get install frr)",
                d.binary().display()
            ));
        }
    }
    if Command::new("vtysh").arg("-h").output().is_err() {
        return Some("needs vtysh (apt-get install frr)".into());
    }
    None
}

/// Returns early from the calling test with "SKIPPED: ..." unless FRR's
/// given daemons can run (root, the `frr` user, the binaries, vtysh).
#[macro_export]
macro_rules! require_frr {
    ($daemons:expr) => {
        if let Some(why) = $crate::frr::frr_missing($daemons) {
            eprintln!("SKIPPED: {why}");
            println!("SKIPPED: {why}");
            return;
        }
    };
}

/// uid and gid of the `frr` user.
fn frr_ids() -> Option<(u32, u32)> {
    let name = std::ffi::CString::new("frr").ok()?;
    // SAFETY: getpwnam with a valid C string; the result is read at once,
    // before any other call that could reuse its static buffer.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return None;
    }
    // SAFETY: non-null pointer returned by getpwnam.
    Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

/// Config text per daemon (each daemon reads only its own, with `-f`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrrConfig {
    pub zebra: String,
    pub staticd: String,
    pub ospfd: String,
    pub ospf6d: String,
    pub ldpd: String,
    pub bgpd: String,
}

impl FrrConfig {
    /// The text for `d`.
    pub fn get(&self, d: Daemon) -> &str {
        match d {
            Daemon::Zebra => &self.zebra,
            Daemon::Staticd => &self.staticd,
            Daemon::Ospfd => &self.ospfd,
            Daemon::Ospf6d => &self.ospf6d,
            Daemon::Ldpd => &self.ldpd,
            Daemon::Bgpd => &self.bgpd,
        }
    }
}

/// How daemons are started.
#[derive(Clone, Debug)]
pub struct FrrOptions {
    /// Extra arguments for zebra, e.g. `["-M", "dplane_fpm_nl"]`.
    pub zebra_args: Vec<String>,
    /// zebra's netlink receive buffer (`-s`); large route bursts overrun
    /// the default one. `None` keeps zebra's default.
    pub nl_bufsize: Option<u32>,
    /// How long each daemon may take to open its vty socket.
    pub start_timeout: Duration,
    /// `--log-level` for every daemon (e.g. "debug"), if set.
    pub log_level: Option<String>,
    /// Netns VRFs (`zebra -n`, docs/vrf.md): `(VRF name, namespace)`.
    /// When not empty, every daemon runs in a private mount namespace
    /// whose `/run/netns` holds only these namespaces, under the VRF
    /// names (zebra takes every namespace there as a VRF).
    pub netns_vrfs: Vec<(String, String)>,
}

impl Default for FrrOptions {
    fn default() -> Self {
        FrrOptions {
            zebra_args: Vec::new(),
            nl_bufsize: Some(90_000_000),
            start_timeout: Duration::from_secs(30),
            log_level: None,
            netns_vrfs: Vec::new(),
        }
    }
}

/// Lanyard's zebra modules, where `scripts/build-zebra-mpls.sh` installs
/// them: the FPM module that tells netns VRFs apart, and the MPLS module
/// (labels over FPM, pseudowires over its side channel).
pub const LANYARD_FPM_MODULE: &str = "/usr/local/lib/lanyard/zebra_lanyard_fpm.so";
/// See [`LANYARD_FPM_MODULE`].
pub const LANYARD_MPLS_MODULE: &str = "/usr/local/lib/lanyard/zebra_lanyard.so";

/// Both of Lanyard's zebra modules are built; prints SKIPPED (for a test
/// to return) if not.
pub fn lanyard_modules_built() -> bool {
    for m in [LANYARD_FPM_MODULE, LANYARD_MPLS_MODULE] {
        if !Path::new(m).exists() {
            println!("SKIPPED: needs {m} (scripts/build-zebra-mpls.sh)");
            return false;
        }
    }
    true
}

impl FrrOptions {
    /// zebra as a Lanyard PE runs it (docs/vrf.md): the netns VRF backend
    /// (`-n`) with both modules, the pseudowire side channel at
    /// `pw_socket`; `vrfs`: (VRF name, namespace).
    pub fn lanyard_pe<'a>(
        pw_socket: &Path,
        vrfs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> FrrOptions {
        FrrOptions {
            zebra_args: vec![
                "-n".into(),
                "-M".into(),
                LANYARD_FPM_MODULE.into(),
                "-M".into(),
                format!("{LANYARD_MPLS_MODULE}:{}", pw_socket.display()),
            ],
            netns_vrfs: vrfs
                .into_iter()
                .map(|(v, ns)| (v.to_string(), ns.to_string()))
                .collect(),
            ..FrrOptions::default()
        }
    }

    /// zebra with the MPLS module only (a remote PE whose labels go to its
    /// own side channel at `pw_socket`, no FPM).
    pub fn lanyard_mpls(pw_socket: &Path) -> FrrOptions {
        FrrOptions {
            zebra_args: vec![
                "-M".into(),
                format!("{LANYARD_MPLS_MODULE}:{}", pw_socket.display()),
            ],
            ..FrrOptions::default()
        }
    }
}

/// Starts Lanyard in `bed`'s DUT namespace for the VPN beds: `ports` are
/// routed ports (name, addresses as a YAML list body), `vrfs` one VRF each
/// (name, its interface, its namespace) with RD 65000:k and table 1000+k
/// (k from 1), routes from FRR over FPM at 127.0.0.1:`fpm_port`.
pub fn start_vpn_lanyard(
    bin: &str,
    bed: &RouterBed,
    name: &str,
    ports: &[(&str, &str)],
    vrfs: &[(&str, &str, &str)],
    fpm_port: u16,
) -> io::Result<crate::Switch> {
    let mut yaml = format!("switch:\n  name: {name}\nports:\n");
    for (port, addresses) in ports {
        let _ = writeln!(
            yaml,
            "  - {{name: {port}, mode: routed, addresses: [{addresses}]}}"
        );
    }
    yaml.push_str("vrfs:\n");
    for (k, (vrf, interface, ns)) in vrfs.iter().enumerate() {
        let k = k + 1;
        let _ = writeln!(
            yaml,
            "  - {{name: {vrf}, interfaces: [{interface}], rd: \"65000:{k}\", table: {}, \
             namespace: {ns}}}",
            1000 + k
        );
    }
    let _ = writeln!(yaml, "routing:\n  fpm: 127.0.0.1:{fpm_port}");
    let names: Vec<&str> = ports.iter().map(|p| p.0).collect();
    crate::Switch::start(bin, &bed.dut, &yaml, &names)
}

/// The remote PE's addresses in the VPN beds ([`remote_vpn_pe`]): its
/// loopback 10.255.0.2/32 (the BGP next hop) and 10.0.12.2/24 on its core
/// port `t2`.
pub fn address_remote_pe(ns: &Netns) -> io::Result<()> {
    for args in [
        &["ip", "link", "set", "lo", "up"][..],
        &["ip", "addr", "add", "10.255.0.2/32", "dev", "lo"],
        &["ip", "addr", "add", "10.0.12.2/24", "dev", "t2"],
    ] {
        ns.exec(args)?;
    }
    Ok(())
}

/// A remote provider edge for the VPN tests' two-router bed: FRR in `ns`
/// (its core port `t2`, 10.0.12.2; loopback 10.255.0.2) with OSPF (a
/// point-to-point area 0 link, 1 s hellos), LDP on `t2`, and an iBGP
/// session to Lanyard's PE (10.0.12.1) in `family` (`ipv4` or `ipv6`)
/// VPN, announcing `prefix` with RD and route target 65000:1 and the fixed
/// VPN label `label`. Its zebra has the MPLS module only, its side
/// channel in `tmp`.
pub fn remote_vpn_pe(
    ns: &Netns,
    name: &str,
    tmp: &Path,
    family: &str,
    prefix: &str,
    label: u32,
) -> io::Result<FrrInstance> {
    let cfg = FrrConfig {
        ospfd: format!(
            "interface t2\n{OSPF_CORE_IF}exit\ninterface lo\n ip ospf area 0\nexit\n\
             router ospf\n ospf router-id 10.255.0.2\nexit\n"
        ),
        ldpd: "mpls ldp\n router-id 10.255.0.2\n address-family ipv4\n  \
               discovery transport-address 10.0.12.2\n  discovery targeted-hello accept\n  \
               interface t2\n exit-address-family\n"
            .into(),
        bgpd: format!(
            "route-map RT permit 10\n set extcommunity rt 65000:1\nexit\n\
             router bgp 65000\n bgp router-id 10.255.0.2\n no bgp default ipv4-unicast\n \
             neighbor 10.0.12.1 remote-as 65000\n neighbor 10.0.12.1 update-source 10.255.0.2\n \
             neighbor 10.0.12.1 timers connect 1\n address-family {family} vpn\n  \
             neighbor 10.0.12.1 activate\n  \
             network {prefix} rd 65000:1 label {label} route-map RT\n \
             exit-address-family\nexit\n"
        ),
        ..FrrConfig::default()
    };
    FrrInstance::start_with(
        ns.name(),
        name,
        &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd, Daemon::Bgpd],
        &cfg,
        &FrrOptions::lanyard_mpls(&tmp.join("r-pw.sock")),
    )
}

/// The interface lines of an OSPF core link in the VPN and VRF beds:
/// area 0, point-to-point (no DR election, no Waiting state), hello 1 s,
/// dead 4 s.
pub const OSPF_CORE_IF: &str = " ip ospf area 0\n ip ospf network point-to-point\n \
                                ip ospf hello-interval 1\n ip ospf dead-interval 4\n";

/// Lanyard's PE in the two-PE VPN bed whose other side is
/// [`remote_vpn_pe`]: zebra feeding Lanyard over FPM at
/// 127.0.0.1:`fpm_port`, OSPF and LDP on the core twin `ly-sw2` (10.0.12.1,
/// router id 10.255.0.1; LDP and BGP from the core port's address, since
/// Lanyard punts what is addressed to its ports), iBGP to the remote PE's
/// loopback 10.255.0.2 in `family` (`ipv4` or `ipv6`) VPN. `vrfs` (the
/// `router bgp 65000 vrf …` sections) is appended to bgpd's config.
pub fn lanyard_vpn_pe_config(fpm_port: u16, family: &str, vrfs: &str) -> FrrConfig {
    FrrConfig {
        zebra: format!("fpm address 127.0.0.1 port {fpm_port}\nno fpm use-next-hop-groups\n"),
        ospfd: format!(
            "interface ly-sw2\n{OSPF_CORE_IF}exit\nrouter ospf\n ospf router-id 10.255.0.1\nexit\n"
        ),
        ldpd: "mpls ldp\n router-id 10.255.0.1\n address-family ipv4\n  \
               discovery transport-address 10.0.12.1\n  neighbor 10.0.12.2 targeted\n  \
               interface ly-sw2\n exit-address-family\n"
            .into(),
        bgpd: format!(
            "router bgp 65000\n bgp router-id 10.255.0.1\n no bgp default ipv4-unicast\n \
             neighbor 10.255.0.2 remote-as 65000\n neighbor 10.255.0.2 update-source 10.0.12.1\n \
             neighbor 10.255.0.2 timers connect 1\n address-family {family} vpn\n  \
             neighbor 10.255.0.2 activate\n exit-address-family\nexit\n{vrfs}"
        ),
        ..FrrConfig::default()
    }
}

/// Waits up to 40 s for Lanyard's route to `prefix` (IPv4 or IPv6) in
/// `vrf` to be installed via `gateway` alone, in the bed of
/// [`lanyard_vpn_pe_config`] and [`remote_vpn_pe`]; returns how long it
/// took. On timeout it panics with what both PEs' FRR hold (OSPF, LDP,
/// BGP, MPLS) and Lanyard's table, label table and log.
pub fn wait_vpn_route(
    sw: &crate::Switch,
    pe: &FrrInstance,
    remote: &FrrInstance,
    vrf: &str,
    prefix: &str,
    gateway: &str,
) -> Duration {
    let deadline = Duration::from_secs(40);
    let start = Instant::now();
    let want = [gateway.to_string()];
    while sw.vrf_route_gateways(vrf, prefix) != want && start.elapsed() < deadline {
        std::thread::sleep(Duration::from_millis(300));
    }
    let gws = sw.vrf_route_gateways(vrf, prefix);
    if gws == want {
        return start.elapsed();
    }
    let (ip, family) = if prefix.contains(':') {
        ("ipv6", "ipv6")
    } else {
        ("ip", "ipv4")
    };
    let dump = pe.vtysh(&[
        "show ip ospf neighbor",
        "show mpls ldp neighbor",
        "show bgp summary",
        &format!("show bgp {family} vpn"),
        &format!("show {ip} route"),
        &format!("show {ip} route vrf {vrf}"),
        "show mpls table",
    ]);
    let rdump = remote.vtysh(&[
        "show bgp summary",
        &format!("show bgp {family} vpn"),
        "show mpls table",
    ]);
    pe.dump_logs();
    remote.dump_logs();
    panic!(
        "VPN route {prefix} not in Lanyard's {vrf} via {gateway} after {deadline:?}: {gws:?}\n\
         {}\n{}\nLanyard's FRR:\n{dump}\nremote PE:\n{rdump}\nlog:\n{}",
        sw.show_json(&["show", ip, "route", "vrf", vrf]),
        sw.show_json(&["show", "mpls", "table"]),
        sw.log()
    );
}

/// Resources one daemon has used (see [`FrrInstance::usage`]).
#[derive(Clone, Copy, Debug)]
pub struct DaemonUsage {
    pub daemon: Daemon,
    /// User + system CPU time since it started.
    pub cpu: Duration,
    pub rss_kb: u64,
    pub peak_rss_kb: u64,
}

/// One FRR router: daemons running in a namespace with a private dir.
///
/// Drop kills the daemons (SIGTERM, SIGKILL after 0.5 s) and removes the
/// dir; if the thread is panicking it first prints the daemons' logs to
/// stderr. Set `LANYARD_FRR_KEEP=1` to keep the dir for a post-mortem.
///
/// Several instances may share a namespace without clashing on files, but
/// two zebras in one namespace both own the kernel's tables: give each
/// router its own namespace unless the extra ones do not install routes.
pub struct FrrInstance {
    ns: String,
    name: String,
    dir: PathBuf,
    daemons: Vec<(Daemon, Child)>,
}

impl FrrInstance {
    /// Starts `daemons` (zebra first, whatever the order given) in
    /// namespace `ns` with `configs` and default options. `name` only
    /// labels the dir and the logs.
    pub fn start(
        ns: &str,
        name: &str,
        daemons: &[Daemon],
        configs: &FrrConfig,
    ) -> io::Result<FrrInstance> {
        Self::start_with(ns, name, daemons, configs, &FrrOptions::default())
    }

    /// [`FrrInstance::start`] with options (zebra arguments, timeouts).
    pub fn start_with(
        ns: &str,
        name: &str,
        daemons: &[Daemon],
        configs: &FrrConfig,
        opts: &FrrOptions,
    ) -> io::Result<FrrInstance> {
        let (uid, gid) = frr_ids().ok_or_else(|| io::Error::other("no `frr` user"))?;
        static REAPED: std::sync::Once = std::sync::Once::new();
        REAPED.call_once(reap_stale_instances);
        let safe: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("lanyard-frr-{safe}-{}-{n}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let mut inst = FrrInstance {
            ns: ns.to_string(),
            name: name.to_string(),
            dir,
            daemons: Vec::new(),
        };
        let mut order: Vec<Daemon> = daemons.to_vec();
        order.sort_by_key(|d| *d != Daemon::Zebra);
        order.dedup();
        for d in &order {
            let p = inst.dir.join(format!("{}.conf", d.name()));
            std::fs::write(&p, configs.get(*d))?;
            std::os::unix::fs::chown(&p, Some(uid), Some(gid))?;
        }
        std::os::unix::fs::chown(&inst.dir, Some(uid), Some(gid))?;
        for d in order {
            inst.spawn(d, opts)?;
        }
        Ok(inst)
    }

    /// Starts one daemon and waits for its vty socket (and zebra's zserv
    /// socket), so the next daemon finds zebra ready.
    fn spawn(&mut self, d: Daemon, opts: &FrrOptions) -> io::Result<()> {
        let dir = self.dir.to_str().ok_or_else(|| io::Error::other("dir"))?;
        let mut args: Vec<String> = vec![
            "netns".into(),
            "exec".into(),
            self.ns.clone(),
            d.binary().to_string_lossy().into_owned(),
            "-f".into(),
            format!("{dir}/{}.conf", d.name()),
            "-i".into(),
            format!("{dir}/{}.pid", d.name()),
            "-z".into(),
            format!("{dir}/zserv.api"),
            "--vty_socket".into(),
            dir.into(),
            // No TCP vty (instances would clash on ports); vtysh uses the
            // unix socket in `dir`.
            "-A".into(),
            "127.0.0.1".into(),
            "-P".into(),
            "0".into(),
            "--log".into(),
            format!("file:{dir}/{}.log", d.name()),
        ];
        if d == Daemon::Ldpd {
            // ldpd's control socket (vtysh's "show mpls ldp" goes through
            // it, `ldpd.sock` in the given dir) defaults to one path per
            // host: keep it per instance.
            args.push("--ctl_socket".into());
            args.push(dir.into());
        }
        if let Some(level) = &opts.log_level {
            args.push("--log-level".into());
            args.push(level.clone());
        }
        if d == Daemon::Zebra {
            if let Some(n) = opts.nl_bufsize {
                args.push("-s".into());
                args.push(n.to_string());
            }
            args.extend(opts.zebra_args.iter().cloned());
        }
        if !opts.netns_vrfs.is_empty() {
            args = self.in_vrf_view(args, &opts.netns_vrfs)?;
        }
        let out = std::fs::File::create(self.dir.join(format!("{}.out", d.name())))?;
        // `ip netns exec` execs the daemon (through `unshare` and `sh`
        // with netns VRFs), so the child's pid is the daemon's (FRR
        // daemons do not fork without -d).
        let child = Command::new("ip")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        self.daemons.push((d, child));
        let mut ready = vec![self.dir.join(format!("{}.vty", d.name()))];
        if d == Daemon::Zebra {
            ready.push(self.dir.join("zserv.api"));
        }
        let deadline = Instant::now() + opts.start_timeout;
        loop {
            if ready.iter().all(|p| p.exists()) {
                return Ok(());
            }
            let (_, child) = self.daemons.last_mut().unwrap();
            if let Some(st) = child.try_wait()? {
                return Err(io::Error::other(format!(
                    "{} of {} exited ({st}): {}",
                    d.name(),
                    self.name,
                    self.read_tail(&format!("{}.out", d.name()), 20)
                        + &self.read_tail(&format!("{}.log", d.name()), 20)
                )));
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} of {} did not open its vty socket", d.name(), self.name),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `ip netns exec NS DAEMON ARGS…` rewritten to run the daemon in a
    /// private mount namespace whose `/run/netns` shows only `vrfs`, each
    /// namespace bind-mounted under its VRF name (as the spike did,
    /// docs/vrf.md; `--rbind` keeps the nsfs mounts under the directory).
    fn in_vrf_view(&self, args: Vec<String>, vrfs: &[(String, String)]) -> io::Result<Vec<String>> {
        let view = self.dir.join("netns");
        std::fs::create_dir_all(&view)?;
        let mut script = String::from("mount --make-rprivate / && ");
        for (vrf, ns) in vrfs {
            let ok = |s: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            };
            if !ok(vrf) || !ok(ns) {
                return Err(io::Error::other(format!("bad netns VRF {vrf:?} {ns:?}")));
            }
            std::fs::File::create(view.join(vrf))?;
            let _ = write!(
                script,
                "mount --bind /run/netns/{ns} {}/{vrf} && ",
                view.display()
            );
        }
        let _ = write!(
            script,
            "mount --rbind {} /run/netns && exec \"$@\"",
            view.display()
        );
        let mut out: Vec<String> = args[..3].to_vec();
        out.extend(["unshare", "-m", "sh", "-c", &script, "sh"].map(String::from));
        out.extend(args[3..].iter().cloned());
        Ok(out)
    }

    /// Kills daemon `d` with SIGKILL (no clean shutdown: zebra withdraws
    /// nothing, as after a crash) and starts it again with the same
    /// config and `opts`.
    pub fn restart(&mut self, d: Daemon, opts: &FrrOptions) -> io::Result<()> {
        if let Some(i) = self.daemons.iter().position(|(x, _)| *x == d) {
            let (_, mut c) = self.daemons.remove(i);
            let _ = c.kill();
            let _ = c.wait();
        }
        // The dead daemon's sockets would look like the new one's.
        let _ = std::fs::remove_file(self.dir.join(format!("{}.vty", d.name())));
        if d == Daemon::Zebra {
            let _ = std::fs::remove_file(self.dir.join("zserv.api"));
        }
        self.spawn(d, opts)
    }

    /// The namespace the daemons run in.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The label given at start.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The private dir (configs, pid files, sockets, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True while daemon `d` of this instance runs.
    pub fn is_running(&mut self, d: Daemon) -> bool {
        self.daemons
            .iter_mut()
            .any(|(x, c)| *x == d && matches!(c.try_wait(), Ok(None)))
    }

    /// Pid of each daemon started.
    pub fn pids(&self) -> Vec<(Daemon, u32)> {
        self.daemons.iter().map(|(d, c)| (*d, c.id())).collect()
    }

    /// CPU time used so far and peak resident memory of each daemon, read
    /// from `/proc` (a daemon that has exited is left out).
    pub fn usage(&self) -> Vec<DaemonUsage> {
        let tick = {
            // SAFETY: sysconf has no preconditions.
            let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
            if t > 0 {
                t as f64
            } else {
                100.0
            }
        };
        let mut v = Vec::new();
        for (d, pid) in self.pids() {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                continue;
            };
            // Fields after the parenthesised command name; utime and
            // stime are fields 14 and 15 of the whole line.
            let rest = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks: f64 = f.get(11).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0)
                + f.get(12).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
            let kb = |key: &str| {
                status
                    .lines()
                    .find(|l| l.starts_with(key))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|x| x.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            v.push(DaemonUsage {
                daemon: d,
                cpu: Duration::from_secs_f64(ticks / tick),
                rss_kb: kb("VmRSS:"),
                peak_rss_kb: kb("VmHWM:"),
            });
        }
        v
    }

    /// Runs vtysh with one `-c` per command against this instance's
    /// daemons; returns stdout and stderr together. Gives up (and says
    /// so in the returned text) after 120 s, e.g. if a daemon is stuck.
    pub fn vtysh(&self, cmds: &[&str]) -> String {
        self.vtysh_timeout(cmds, Duration::from_secs(120))
            .unwrap_or_else(|e| format!("% vtysh: {e}"))
    }

    /// [`FrrInstance::vtysh`] with an explicit timeout; an error if vtysh
    /// cannot run or does not finish in time (it is then killed).
    pub fn vtysh_timeout(&self, cmds: &[&str], timeout: Duration) -> io::Result<String> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, "vtysh", "--vty_socket"])
            .arg(&self.dir);
        for cmd in cmds {
            c.arg("-c").arg(cmd);
        }
        let child = c
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = child.id();
        // Read on a helper thread so a large output cannot block vtysh
        // while this thread keeps the deadline.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(timeout) {
            Ok(out) => {
                let out = out?;
                Ok(format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
            Err(_) => {
                // SAFETY: kill(2) on our own child's pid; it has not been
                // reaped (the helper thread still waits on it).
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("vtysh {cmds:?} took over {timeout:?}"),
                ))
            }
        }
    }

    /// Output of one `show ... json` command, parsed; `Value::Null` if the
    /// output is not JSON (daemon missing, busy past the timeout, error).
    pub fn vtysh_json(&self, cmd: &str) -> serde_json::Value {
        serde_json::from_str(&self.vtysh(&[cmd])).unwrap_or(serde_json::Value::Null)
    }

    /// Applies `lines` in `configure terminal`; an error with vtysh's
    /// output if any line was refused (vtysh prints `% ...`).
    pub fn configure(&self, lines: &[&str]) -> io::Result<String> {
        let mut cmds = vec!["configure terminal"];
        cmds.extend_from_slice(lines);
        let out = self.vtysh_timeout(&cmds, Duration::from_secs(120))?;
        if out.lines().any(|l| l.trim_start().starts_with('%')) {
            return Err(io::Error::other(format!(
                "{}: configure {lines:?}: {out}",
                self.name
            )));
        }
        Ok(out)
    }

    /// Polls `cond` every 200 ms until it holds (returns the time it took)
    /// or `timeout` passes (a `TimedOut` error).
    pub fn wait_for(
        &self,
        mut cond: impl FnMut(&FrrInstance) -> bool,
        timeout: Duration,
    ) -> io::Result<Duration> {
        let t0 = Instant::now();
        loop {
            if cond(self) {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() >= timeout {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{}: condition not met in {timeout:?}", self.name),
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `show ip route summary json` (or ipv6): route type ("ospf",
    /// "ospf6", "kernel", "connected", ...) → (in RIB, in FIB). `None` if
    /// zebra did not answer.
    pub fn route_summary(&self, v6: bool) -> Option<BTreeMap<String, (u64, u64)>> {
        let cmd = if v6 {
            "show ipv6 route summary json"
        } else {
            "show ip route summary json"
        };
        let j = self.vtysh_json(cmd);
        let routes = j.get("routes")?.as_array()?;
        let mut m = BTreeMap::new();
        for r in routes {
            let t = r.get("type")?.as_str()?.to_string();
            let rib = r.get("rib").and_then(|x| x.as_u64()).unwrap_or(0);
            let fib = r.get("fib").and_then(|x| x.as_u64()).unwrap_or(0);
            let e = m.entry(t).or_insert((0, 0));
            e.0 += rib;
            e.1 += fib;
        }
        Some(m)
    }

    /// Routes of `kind` ("ospf", "ospf6", ...) that zebra has installed
    /// in the FIB (0 if none or no answer).
    pub fn fib_routes(&self, v6: bool, kind: &str) -> u64 {
        self.route_summary(v6)
            .and_then(|m| m.get(kind).map(|x| x.1))
            .unwrap_or(0)
    }

    /// OSPFv2 neighbours in state Full.
    pub fn ospf_full_neighbors(&self) -> usize {
        let j = self.vtysh_json("show ip ospf neighbor json");
        j.get("neighbors")
            .and_then(|n| n.as_object())
            .map(|m| {
                m.values()
                    .filter_map(|v| v.as_array())
                    .flatten()
                    .filter(|n| {
                        let s = n
                            .get("nbrState")
                            .or_else(|| n.get("state"))
                            .and_then(|s| s.as_str());
                        s.is_some_and(|s| s.starts_with("Full"))
                    })
                    .count()
            })
            .unwrap_or(0)
    }

    /// OSPFv2 neighbours in state Full over every VRF of this instance
    /// (`show ip ospf vrf all neighbor json`; netns VRFs, one OSPF
    /// instance each).
    pub fn ospf_full_neighbors_all_vrfs(&self) -> usize {
        count_full(&self.vtysh_json("show ip ospf vrf all neighbor json"))
    }

    /// OSPFv3 neighbours in state Full.
    pub fn ospf6_full_neighbors(&self) -> usize {
        let j = self.vtysh_json("show ipv6 ospf6 neighbor json");
        j.get("neighbors")
            .and_then(|n| n.as_array())
            .map(|a| {
                a.iter()
                    .filter(|n| n.get("state").and_then(|s| s.as_str()) == Some("Full"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// The last `lines` lines of file `file` in the dir (empty if none).
    fn read_tail(&self, file: &str, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let mut s = String::new();
        for l in &all[all.len().saturating_sub(lines)..] {
            s.push_str(l);
            s.push('\n');
        }
        s
    }

    /// The tails (last 80 lines) of every daemon's log and stdout/stderr.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        for (d, _) in &self.daemons {
            for ext in ["log", "out"] {
                let f = format!("{}.{ext}", d.name());
                let t = self.read_tail(&f, 80);
                if !t.is_empty() {
                    let _ = writeln!(s, "===== {} {} =====\n{t}", self.name, f);
                }
            }
        }
        s
    }

    /// Prints [`FrrInstance::logs`] to stderr.
    pub fn dump_logs(&self) {
        eprintln!("{}", self.logs());
    }

    /// Kills the daemons: SIGTERM, then SIGKILL for those still alive
    /// after 0.5 s (a daemon busy loading config ignores SIGTERM, and
    /// zebra withdrawing 100k routes on exit is time nobody needs).
    pub fn stop(&mut self) {
        stop_all([self]);
    }
}

/// [`FrrInstance::stop`] for several instances at once: one SIGTERM
/// round, one 0.5 s grace shared by all, one SIGKILL round, then the
/// reaping. Dropping them one by one paid the grace and the exit of
/// every loaded daemon in turn: 6.8 s for the eight routers of
/// `frr_ospf_scale` on a loaded 2-core machine. The instances stay
/// valid (without daemons); their drop then only removes their dirs.
pub fn stop_all<'a>(instances: impl IntoIterator<Item = &'a mut FrrInstance>) {
    let mut all: Vec<&mut FrrInstance> = instances.into_iter().collect();
    for i in &mut all {
        for (_, c) in &mut i.daemons {
            if let Ok(None) = c.try_wait() {
                // SAFETY: kill(2) on a child we have not reaped yet.
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            }
        }
    }
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline
        && all.iter_mut().any(|i| {
            i.daemons
                .iter_mut()
                .any(|(_, c)| matches!(c.try_wait(), Ok(None)))
        })
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in &mut all {
        for (_, c) in &mut i.daemons {
            let _ = c.kill();
        }
    }
    for i in &mut all {
        for (_, mut c) in i.daemons.drain(..) {
            let _ = c.wait();
        }
        // Belt and braces: anything else whose command line names our
        // dir (nothing should, FRR daemons do not fork without -d).
        kill_matching(&i.dir.to_string_lossy());
    }
}

impl Drop for FrrInstance {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_logs();
        }
        self.stop();
        if std::env::var_os("LANYARD_FRR_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("kept {}", self.dir.display());
        }
    }
}

/// Neighbour objects in `v` (any nesting: per VRF, per router id) whose
/// `nbrState` (or, in later FRR, `state`) is Full.
pub fn count_full(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(m) => {
            let state = m
                .get("nbrState")
                .or_else(|| m.get("state"))
                .and_then(|s| s.as_str());
            match state {
                Some(s) => usize::from(s.starts_with("Full")),
                None => m.values().map(count_full).sum(),
            }
        }
        serde_json::Value::Array(a) => a.iter().map(count_full).sum(),
        _ => 0,
    }
}

/// True if a process with this pid exists.
fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The pid embedded in a name `...<pid>-<n>` (as [`FrrInstance`] dirs and
/// [`Netns`] names are built), if any.
fn embedded_pid(name: &str) -> Option<u32> {
    let (head, n) = name.rsplit_once('-')?;
    n.parse::<u32>().ok()?;
    let digits: String = head
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// Cleans up after test processes that died without running their
/// destructors (SIGKILL, SIGTERM, Ctrl-C): kills FRR daemons whose
/// instance dir names a test pid that no longer exists and removes those
/// dirs. Runs once per process, on the first [`FrrInstance`] start;
/// `LANYARD_FRR_NO_REAP=1` turns it off (e.g. while someone inspects a
/// killed run's daemons).
fn reap_stale_instances() {
    if std::env::var_os("LANYARD_FRR_NO_REAP").is_some() {
        return;
    }
    let tmp = std::env::temp_dir();
    let Ok(rd) = std::fs::read_dir(&tmp) else {
        return;
    };
    let me = std::process::id();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("lanyard-frr-") {
            continue;
        }
        match embedded_pid(&name) {
            Some(pid) if pid != me && !pid_alive(pid) => {
                kill_matching(&format!("{}/", e.path().display()));
                let _ = std::fs::remove_dir_all(e.path());
            }
            _ => {}
        }
    }
}

/// SIGKILLs every process (other than this one) whose command line
/// contains `needle`.
fn kill_matching(needle: &str) {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    let me = std::process::id();
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                // SAFETY: kill(2); at worst ESRCH.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// Where an injector's external routes come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteSource {
    /// Blackhole routes put in the namespace's kernel table with
    /// `ip -batch` before zebra starts; ospfd/ospf6d `redistribute kernel`.
    /// Fast at any scale.
    Kernel,
    /// `ip route P blackhole` lines in staticd's config; ospfd/ospf6d
    /// `redistribute static`. Only for small tables (see the module doc).
    Static,
}

/// OSPF network type of the test links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OspfNetwork {
    /// DR/BDR election; an interface coming up first waits a whole dead
    /// interval (the Waiting state) before it forms any adjacency.
    Broadcast,
    /// No DR, no Waiting: adjacencies start as soon as hellos are seen.
    PointToPoint,
}

impl OspfNetwork {
    fn keyword(self) -> &'static str {
        match self {
            OspfNetwork::Broadcast => "broadcast",
            OspfNetwork::PointToPoint => "point-to-point",
        }
    }
}

/// An OSPFv2/OSPFv3 router's configuration, rendered to [`FrrConfig`].
///
/// Every OSPF interface is in area 0. The defaults (see
/// [`OspfRouter::dut`]) are what converged reliably with 240k + 118k
/// externals on 2 cores: point-to-point links, hello 1 s, dead 40 s. A
/// 4 s dead interval does *not* survive that scale: ospfd/ospf6d stall for
/// seconds while they process a flood, miss hellos, reset adjacencies, and
/// the re-synchronisation stalls them again (observed as endless
/// ExStart/Exchange → Init/Deleted).
#[derive(Clone, Debug)]
pub struct OspfRouter {
    pub router_id: Ipv4Addr,
    /// Interfaces running OSPF (both versions).
    pub interfaces: Vec<String>,
    pub network: OspfNetwork,
    pub hello: u16,
    pub dead: u16,
    /// `retransmit-interval` in seconds (FRR's default is 5).
    pub retransmit: u16,
    /// Run ospfd.
    pub v2: bool,
    /// Run ospf6d.
    pub v3: bool,
    /// External routes advertised (redistributed) by this router.
    pub v4_routes: Vec<(u32, u8)>,
    pub v6_routes: Vec<(u128, u8)>,
    pub source: RouteSource,
    /// Redistribute from the start. When false the routes are installed
    /// (kernel or staticd) but only advertised once
    /// [`OspfRouter::advertise_cmds`] is applied, e.g. after the
    /// adjacencies are up, so they arrive by flooding instead of the
    /// database exchange.
    pub advertise: bool,
    /// Keep zebra from installing what OSPF learns into the kernel
    /// (`ip protocol ospf route-map` denying all): a tester does not need
    /// other routers' routes and stays lighter without them.
    pub suppress_learned: bool,
    /// `fpm address A port P` for zebra (needs `-M dplane_fpm_nl`).
    pub fpm: Option<(String, u16)>,
    /// Shorter throttles than FRR's defaults, so a test does not sit out
    /// back-offs: SPF `0 50 1000` ms (default max hold 5 s), ospfd LSA
    /// origination interval 100 ms (default 5 s; ospf6d has no knob) and
    /// LSA min-arrival 0 (default 1 s). Why min-arrival: a router that
    /// becomes Full re-originates its router-LSA twice within
    /// milliseconds (DR/BDR change, then Full); the peer drops the second
    /// copy as arriving too soon and only gets it on retransmission 5 s
    /// later, holding every route behind that router back by 5 s.
    pub fast_timers: bool,
    /// Raw lines appended to each daemon's config.
    pub extra: FrrConfig,
}

impl OspfRouter {
    /// A tester router advertising `v4`/`v6` as externals (type-5 LSAs,
    /// E2 metric 20) from the kernel table, not installing learned routes.
    pub fn injector(
        router_id: Ipv4Addr,
        interfaces: &[&str],
        v4: Vec<(u32, u8)>,
        v6: Vec<(u128, u8)>,
    ) -> OspfRouter {
        OspfRouter {
            v4_routes: v4,
            v6_routes: v6,
            suppress_learned: true,
            ..OspfRouter::dut(router_id, interfaces)
        }
    }

    /// A plain OSPF router (the device under test's FRR): learns and
    /// installs everything, advertises nothing external.
    pub fn dut(router_id: Ipv4Addr, interfaces: &[&str]) -> OspfRouter {
        OspfRouter {
            router_id,
            interfaces: interfaces.iter().map(|s| s.to_string()).collect(),
            network: OspfNetwork::PointToPoint,
            hello: 1,
            dead: 40,
            retransmit: 5,
            v2: true,
            v3: true,
            v4_routes: Vec::new(),
            v6_routes: Vec::new(),
            source: RouteSource::Kernel,
            advertise: true,
            suppress_learned: false,
            fpm: None,
            fast_timers: true,
            extra: FrrConfig::default(),
        }
    }

    /// Sends zebra's routes to an FPM listener at 127.0.0.1:`port` (start
    /// with `FrrOptions::zebra_args = ["-M", "dplane_fpm_nl"]`).
    pub fn with_fpm(mut self, port: u16) -> OspfRouter {
        self.fpm = Some(("127.0.0.1".into(), port));
        self
    }

    /// The daemons this config needs.
    pub fn daemons(&self) -> Vec<Daemon> {
        let mut v = vec![Daemon::Zebra];
        if self.source == RouteSource::Static
            && !(self.v4_routes.is_empty() && self.v6_routes.is_empty())
        {
            v.push(Daemon::Staticd);
        }
        if self.v2 {
            v.push(Daemon::Ospfd);
        }
        if self.v3 {
            v.push(Daemon::Ospf6d);
        }
        v
    }

    fn redistributes(&self, v6: bool) -> bool {
        self.advertise
            && if v6 {
                !self.v6_routes.is_empty()
            } else {
                !self.v4_routes.is_empty()
            }
    }

    /// `configure terminal` lines that start (`on`) or stop advertising
    /// this router's routes in both OSPF versions; stopping flushes its
    /// external LSAs (premature aging).
    pub fn advertise_cmds(&self, on: bool) -> Vec<String> {
        let no = if on { "" } else { "no " };
        let kind = self.redistribute_kind();
        let mut v = Vec::new();
        if self.v2 && !self.v4_routes.is_empty() {
            v.extend([
                "router ospf".to_string(),
                format!("{no}redistribute {kind}"),
            ]);
            v.push("exit".into());
        }
        if self.v3 && !self.v6_routes.is_empty() {
            v.extend([
                "router ospf6".to_string(),
                format!("{no}redistribute {kind}"),
            ]);
            v.push("exit".into());
        }
        v
    }

    /// The word after `redistribute` for this router's source.
    pub fn redistribute_kind(&self) -> &'static str {
        match self.source {
            RouteSource::Kernel => "kernel",
            RouteSource::Static => "static",
        }
    }

    /// Renders every daemon's config.
    pub fn config(&self) -> FrrConfig {
        let mut c = FrrConfig::default();
        let z = &mut c.zebra;
        if self.suppress_learned {
            z.push_str("route-map LANYARD-NO-INSTALL deny 10\n!\n");
            z.push_str("ip protocol ospf route-map LANYARD-NO-INSTALL\n");
            z.push_str("ipv6 protocol ospf6 route-map LANYARD-NO-INSTALL\n!\n");
        }
        if let Some((addr, port)) = &self.fpm {
            let _ = writeln!(z, "fpm address {addr} port {port}\n!");
        }
        z.push_str(&self.extra.zebra);

        if self.source == RouteSource::Static {
            let s = &mut c.staticd;
            for &(p, l) in &self.v4_routes {
                let _ = writeln!(s, "ip route {}/{l} blackhole", Ipv4Addr::from(p));
            }
            for &(p, l) in &self.v6_routes {
                let _ = writeln!(s, "ipv6 route {}/{l} blackhole", Ipv6Addr::from(p));
            }
            s.push_str(&self.extra.staticd);
        }

        let o = &mut c.ospfd;
        for ifname in &self.interfaces {
            let _ = writeln!(
                o,
                "interface {ifname}\n ip ospf area 0\n ip ospf network {}\n \
                 ip ospf hello-interval {}\n ip ospf dead-interval {}\n \
                 ip ospf retransmit-interval {}\n!",
                self.network.keyword(),
                self.hello,
                self.dead,
                self.retransmit
            );
        }
        let _ = writeln!(
            o,
            "router ospf\n ospf router-id {}\n log-adjacency-changes",
            self.router_id
        );
        if self.fast_timers {
            o.push_str(
                " timers throttle spf 0 50 1000\n timers throttle lsa all 100\n \
                 timers lsa min-arrival 0\n",
            );
        }
        if self.redistributes(false) {
            let _ = writeln!(o, " redistribute {}", self.redistribute_kind());
        }
        o.push_str("!\n");
        o.push_str(&self.extra.ospfd);

        let o = &mut c.ospf6d;
        for ifname in &self.interfaces {
            let _ = writeln!(
                o,
                "interface {ifname}\n ipv6 ospf6 area 0\n ipv6 ospf6 network {}\n \
                 ipv6 ospf6 hello-interval {}\n ipv6 ospf6 dead-interval {}\n \
                 ipv6 ospf6 retransmit-interval {}\n!",
                self.network.keyword(),
                self.hello,
                self.dead,
                self.retransmit
            );
        }
        let _ = writeln!(
            o,
            "router ospf6\n ospf6 router-id {}\n log-adjacency-changes",
            self.router_id
        );
        if self.fast_timers {
            o.push_str(" timers throttle spf 0 50 1000\n timers lsa min-arrival 0\n");
        }
        if self.redistributes(true) {
            let _ = writeln!(o, " redistribute {}", self.redistribute_kind());
        }
        o.push_str("!\n");
        o.push_str(&self.extra.ospf6d);
        c
    }

    /// The `ip -batch` lines that put this router's routes in the kernel
    /// as blackholes (empty unless the source is [`RouteSource::Kernel`]).
    pub fn kernel_batch(&self, add: bool) -> String {
        let mut s = String::new();
        if self.source != RouteSource::Kernel {
            return s;
        }
        let verb = if add { "add" } else { "del" };
        for &(p, l) in &self.v4_routes {
            let _ = writeln!(s, "route {verb} blackhole {}/{l}", Ipv4Addr::from(p));
        }
        for &(p, l) in &self.v6_routes {
            let _ = writeln!(s, "route {verb} blackhole {}/{l}", Ipv6Addr::from(p));
        }
        s
    }

    /// Installs the kernel routes (if any) in `ns`, then starts the
    /// daemons there. zebra reads the kernel table when it starts, so the
    /// routes are advertised as soon as OSPF is up.
    pub fn start(&self, ns: &str, name: &str, opts: &FrrOptions) -> io::Result<FrrInstance> {
        let batch = self.kernel_batch(true);
        if !batch.is_empty() {
            ip_batch(ns, &batch)?;
        }
        FrrInstance::start_with(ns, name, &self.daemons(), &self.config(), opts)
    }
}

/// Runs `ip -n NS -batch -` with `lines` on stdin; an error with ip's
/// stderr if any line failed.
pub fn ip_batch(ns: &str, lines: &str) -> io::Result<String> {
    let mut child = Command::new("ip")
        .args(["-n", ns, "-force", "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    let text = lines.to_string();
    // Feed stdin from another thread: ip writes output while reading.
    let feeder = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output()?;
    feeder
        .join()
        .map_err(|_| io::Error::other("feeder panicked"))??;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ip -n {ns} -batch failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .take(10)
                .collect::<Vec<_>>()
                .join("\n")
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The outgoing interface of `ip route get ADDR` for each address in
/// `addrs` (v4 or v6 text), in namespace `ns`, with one `ip -batch`:
/// `None` where the lookup failed (no route, unreachable, blackhole).
pub fn route_get_dev(ns: &str, addrs: &[String]) -> io::Result<Vec<Option<String>>> {
    let mut out = Vec::with_capacity(addrs.len());
    // One batch per address keeps the output attributable even when some
    // lookups fail (those print only to stderr); chunks amortise forks.
    for chunk in addrs.chunks(256) {
        let mut lines = String::new();
        for a in chunk {
            let _ = writeln!(lines, "route get {a}");
        }
        let child = Command::new("ip")
            .args(["-n", ns, "-o", "-force", "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut child = child;
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || stdin.write_all(lines.as_bytes()));
        let o = child.wait_with_output()?;
        let _ = feeder.join();
        let text = String::from_utf8_lossy(&o.stdout);
        // Each successful lookup prints one line starting with the
        // address; match them back by address.
        let mut by_addr: BTreeMap<String, String> = BTreeMap::new();
        for l in text.lines() {
            let mut w = l.split_whitespace();
            let (Some(first), rest) = (w.next(), w) else {
                continue;
            };
            let words: Vec<&str> = rest.collect();
            if let Some(i) = words.iter().position(|x| *x == "dev") {
                if let Some(dev) = words.get(i + 1) {
                    by_addr.insert(first.to_string(), dev.to_string());
                }
            }
        }
        for a in chunk {
            let key = a
                .parse::<std::net::IpAddr>()
                .map(|x| x.to_string())
                .unwrap_or(a.clone());
            out.push(by_addr.get(&key).cloned());
        }
    }
    Ok(out)
}

/// The addressing [`RouterBed`] uses on link `i` (1-based): the DUT end
/// `sw<i>` has `10.100.<i>.1/24` and `2001:db8:100:<i>::1/64`, the tester
/// end `t<i>` has `.2` and `::2`.
pub fn link_addrs(i: usize, dut: bool) -> (String, String) {
    let host = if dut { 1 } else { 2 };
    (
        format!("10.100.{i}.{host}/24"),
        format!("2001:db8:100:{i:x}::{host}/64"),
    )
}

/// A DUT namespace with ports `sw1..swN`, each cabled (veth) to `t<i>` in
/// its own tester namespace: one namespace per tester router, so each runs
/// its own zebra and kernel table, as separate routers do.
///
/// Dropping it kills whatever still runs in the namespaces and deletes
/// them (drop [`FrrInstance`]s first to keep their logs tidy).
pub struct RouterBed {
    /// Where the device under test runs; holds `sw1..swN`.
    pub dut: Netns,
    /// `testers[i-1]` holds `t<i>`.
    pub testers: Vec<Netns>,
}

impl RouterBed {
    /// Creates the namespaces (names start with `prefix`, ≤ 6 characters)
    /// and the cables with MTU `mtu`. IPv6 is enabled (without DAD, so
    /// link-locals are usable at once) on every `t<i>` and `sw<i>`, since
    /// OSPFv3 runs over link-local addresses.
    pub fn new(prefix: &str, ports: usize, mtu: u32) -> io::Result<RouterBed> {
        reap_stale_namespaces(prefix);
        let dut = Netns::new(&format!("{prefix}-d"))?;
        let mut testers = Vec::with_capacity(ports);
        for i in 1..=ports {
            let t = Netns::new(&format!("{prefix}-t{i}-"))?;
            veth(&t, &format!("t{i}"), &dut, &format!("sw{i}"), mtu)?;
            testers.push(t);
        }
        let bed = RouterBed { dut, testers };
        for i in 1..=ports {
            enable_ipv6(&bed.testers[i - 1], &format!("t{i}"))?;
            enable_ipv6(&bed.dut, &format!("sw{i}"))?;
        }
        Ok(bed)
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.testers.len()
    }

    /// The namespace of tester `i` (1-based).
    pub fn tester(&self, i: usize) -> &Netns {
        &self.testers[i - 1]
    }

    /// Gives every `t<i>` its [`link_addrs`] addresses.
    pub fn address_testers(&self) -> io::Result<()> {
        for i in 1..=self.ports() {
            let (v4, v6) = link_addrs(i, false);
            let ns = self.tester(i).name();
            let dev = format!("t{i}");
            ip(&["-n", ns, "addr", "add", &v4, "dev", &dev])?;
            ip(&["-n", ns, "addr", "add", &v6, "dev", &dev, "nodad"])?;
        }
        Ok(())
    }

    /// Gives every `sw<i>` its [`link_addrs`] addresses and turns on IPv4
    /// and IPv6 forwarding in the DUT namespace (Linux as the DUT).
    pub fn address_dut(&self) -> io::Result<()> {
        let ns = self.dut.name();
        for i in 1..=self.ports() {
            let (v4, v6) = link_addrs(i, true);
            let dev = format!("sw{i}");
            ip(&["-n", ns, "addr", "add", &v4, "dev", &dev])?;
            ip(&["-n", ns, "addr", "add", &v6, "dev", &dev, "nodad"])?;
        }
        self.dut.sysctl("net.ipv4.ip_forward", "1")?;
        self.dut.sysctl("net.ipv6.conf.all.forwarding", "1")?;
        Ok(())
    }

    /// Starts `routers[k]` in tester namespace `k + 1` (named `r<k+1>`),
    /// all in parallel: each start loads its kernel routes and waits for
    /// its daemons. Panics if one fails to start.
    pub fn start_routers(&self, routers: &[OspfRouter], opts: &FrrOptions) -> Vec<FrrInstance> {
        std::thread::scope(|s| {
            let handles: Vec<_> = routers
                .iter()
                .enumerate()
                .map(|(k, r)| {
                    let ns = self.tester(k + 1).name();
                    s.spawn(move || r.start(ns, &format!("r{}", k + 1), opts))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap().expect("tester FRR"))
                .collect()
        })
    }

    /// Opens a raw tester socket on `t<i>` (1-based).
    pub fn open(&self, i: usize) -> io::Result<RawPort> {
        RawPort::open(self.tester(i).name(), &format!("t{i}"))
    }

    /// Takes `t<i>` down (the veth peer `sw<i>` loses carrier at once) or
    /// brings it back up.
    pub fn set_tester_link(&self, i: usize, up: bool) -> io::Result<()> {
        let state = if up { "up" } else { "down" };
        ip(&[
            "-n",
            self.tester(i).name(),
            "link",
            "set",
            "dev",
            &format!("t{i}"),
            state,
        ])?;
        Ok(())
    }
}

/// Deletes namespaces `<prefix>-...<pid>-<n>` left by test processes that
/// no longer exist (killed before their destructors ran), after killing
/// whatever still runs in them. Off with `LANYARD_FRR_NO_REAP=1`.
pub fn reap_stale_namespaces(prefix: &str) {
    if std::env::var_os("LANYARD_FRR_NO_REAP").is_some() {
        return;
    }
    let Ok(out) = ip(&["netns", "list"]) else {
        return;
    };
    let me = std::process::id();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in text.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if !name.starts_with(&format!("{prefix}-")) {
            continue;
        }
        match embedded_pid(name) {
            Some(pid) if pid != me && !pid_alive(pid) => {
                if let Ok(p) = ip(&["netns", "pids", name]) {
                    for pid in String::from_utf8_lossy(&p.stdout).split_whitespace() {
                        if let Ok(pid) = pid.parse::<i32>() {
                            // SAFETY: kill(2) on a pid inside a stale
                            // namespace; at worst ESRCH.
                            unsafe { libc::kill(pid, libc::SIGKILL) };
                        }
                    }
                }
                let _ = ip(&["netns", "del", name]);
            }
            _ => {}
        }
    }
}

/// Enables IPv6 on `ifname` in `ns` with DAD off first, so its link-local
/// address is usable immediately.
pub fn enable_ipv6(ns: &Netns, ifname: &str) -> io::Result<()> {
    ns.sysctl(&format!("net.ipv6.conf.{ifname}.accept_dad"), "0")?;
    ns.sysctl(&format!("net.ipv6.conf.{ifname}.disable_ipv6"), "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_neighbours_counted_in_any_nesting() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"v1": {"vrfName": "v1", "neighbors": {"10.254.0.1": [{"nbrState": "Full/-"}]}},
                "v2": {"neighbors": {"10.254.0.2": [{"nbrState": "ExStart/-"}]}},
                "v3": {"neighbors": {"10.254.0.3": [{"state": "Full"}, {"nbrState": "Init/-"}]}}}"#,
        )
        .unwrap();
        assert_eq!(count_full(&v), 2);
        assert_eq!(count_full(&serde_json::Value::Null), 0);
    }

    #[test]
    fn pid_in_names() {
        assert_eq!(embedded_pid("ospfsc-d9187-0"), Some(9187));
        assert_eq!(embedded_pid("ospfsc-t1-9187-12"), Some(9187));
        assert_eq!(embedded_pid("lanyard-frr-r1-5112-1"), Some(5112));
        assert_eq!(embedded_pid("lanyard-frr-dut"), None);
        assert_eq!(embedded_pid("lanyard-frr-x-1"), None);
    }

    #[test]
    fn injector_config_renders() {
        let r = OspfRouter::injector(
            Ipv4Addr::new(10, 255, 0, 1),
            &["t1"],
            vec![(0x0b00_0000, 24)],
            vec![(0x3fff_u128 << 112, 48)],
        );
        assert_eq!(
            r.daemons(),
            vec![Daemon::Zebra, Daemon::Ospfd, Daemon::Ospf6d]
        );
        let c = r.config();
        assert!(c
            .zebra
            .contains("ip protocol ospf route-map LANYARD-NO-INSTALL"));
        assert!(c.ospfd.contains("interface t1\n ip ospf area 0\n"));
        assert!(c.ospfd.contains("ip ospf network point-to-point\n"));
        assert!(c.ospfd.contains("ip ospf dead-interval 40\n"));
        assert!(c.ospfd.contains(" redistribute kernel\n"));
        assert!(c.ospf6d.contains(" ipv6 ospf6 area 0\n"));
        assert!(c.ospf6d.contains(" ospf6 router-id 10.255.0.1\n"));
        assert_eq!(
            r.kernel_batch(true),
            "route add blackhole 11.0.0.0/24\nroute add blackhole 3fff::/48\n"
        );
        let d = OspfRouter::dut(Ipv4Addr::new(10, 255, 255, 1), &["sw1", "sw2"]).with_fpm(2620);
        let c = d.config();
        assert!(c.zebra.contains("fpm address 127.0.0.1 port 2620"));
        assert!(!c.zebra.contains("route-map"));
        assert!(!c.ospfd.contains("redistribute"));
        assert!(c.ospf6d.contains("interface sw2\n"));
        let mut s = r.clone();
        s.source = RouteSource::Static;
        assert!(s.daemons().contains(&Daemon::Staticd));
        assert_eq!(
            s.config().staticd,
            "ip route 11.0.0.0/24 blackhole\nipv6 route 3fff::/48 blackhole\n"
        );
        assert!(s.kernel_batch(true).is_empty());
        let mut q = r.clone();
        q.advertise = false;
        assert!(!q.config().ospfd.contains("redistribute"));
        assert_eq!(
            q.advertise_cmds(false),
            [
                "router ospf",
                "no redistribute kernel",
                "exit",
                "router ospf6",
                "no redistribute kernel",
                "exit"
            ]
        );
    }
}
