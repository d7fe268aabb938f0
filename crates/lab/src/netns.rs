//! Network namespaces, veth links, commands, signals and cleanup.
//!
//! Namespaces are named `lab-<pid>-<n>-t` (tester) and `lab-<pid>-<n>-d`
//! (device under test); the creating process id in the name lets a later
//! run remove namespaces left by a process that died ([`sweep_stale`]).
//! [`Topology`] removes its namespaces (and everything in them) on drop.

use crate::LabError;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Install SIGINT/SIGTERM handlers that set a flag (idempotent). Long loops
/// check [`interrupted`] and unwind, so drop guards clean up.
pub fn install_signal_handlers() {
    INTERRUPTED.get_or_init(|| {
        let f = Arc::new(AtomicBool::new(false));
        let _ = signal_hook::flag::register(signal_hook::consts::SIGINT, f.clone());
        let _ = signal_hook::flag::register(signal_hook::consts::SIGTERM, f.clone());
        f
    });
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED
        .get()
        .map(|f| f.load(Ordering::Relaxed))
        .unwrap_or(false)
}

/// Error out if interrupted.
pub fn check_interrupt() -> Result<(), LabError> {
    if interrupted() {
        Err(LabError::Interrupted)
    } else {
        Ok(())
    }
}

/// Sleep `secs`, waking early (with an error) on interrupt.
pub fn sleep_checked(secs: f64) -> Result<(), LabError> {
    let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs.max(0.0));
    loop {
        check_interrupt()?;
        let now = std::time::Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(std::time::Duration::from_millis(50)));
    }
}

/// Run a command; error with its stderr if it fails.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, LabError> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| LabError::Command(format!("{cmd} {}: {e}", args.join(" "))))?;
    if !out.status.success() {
        return Err(LabError::Command(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run a command inside namespace `ns` (`ip netns exec`).
pub fn run_in(ns: &str, cmd: &str, args: &[&str]) -> Result<String, LabError> {
    let mut a = vec!["netns", "exec", ns, cmd];
    a.extend_from_slice(args);
    run("ip", &a)
}

/// Run `f` on a fresh thread that has entered network namespace `ns`.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, LabError> {
    let path = format!("/run/netns/{ns}");
    let h = std::thread::spawn(move || -> Result<T, LabError> {
        enter_netns(&path)?;
        Ok(f())
    });
    h.join()
        .map_err(|_| LabError::Other("namespace thread panicked".into()))?
}

/// Move the calling thread into the network namespace at `path`
/// (`/run/netns/<name>`). Affects only this thread.
pub fn enter_netns(path: &str) -> Result<(), LabError> {
    let f = std::fs::File::open(path).map_err(|e| LabError::Other(format!("open {path}: {e}")))?;
    // SAFETY: f is an open namespace file; setns only changes this thread.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r < 0 {
        return Err(LabError::Other(format!(
            "setns {path}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

fn pid_alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Remove `lab-<pid>-*` namespaces (and their processes and temp dirs)
/// whose creating process is gone. Returns the names removed.
pub fn sweep_stale() -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir("/run/netns") else {
        return removed;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("lab-") else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if pid_alive(pid) {
            continue;
        }
        kill_ns_pids(&name);
        let _ = run("ip", &["netns", "del", &name]);
        if let Some(base) = name.strip_suffix("-t").or_else(|| name.strip_suffix("-d")) {
            let _ = std::fs::remove_dir_all(std::env::temp_dir().join(base));
        }
        removed.push(name);
    }
    removed
}

fn kill_ns_pids(ns: &str) {
    if let Ok(out) = run("ip", &["netns", "pids", ns]) {
        for p in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
            // SAFETY: plain kill(2) of a process living in our namespace.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
}

/// How the tester ports are wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wiring {
    /// `t<i>` ↔ `sw<i>` in the DUT namespace.
    ToDut,
    /// `t<2k-1>` ↔ `t<2k>`, both in the tester namespace (the `wire` DUT).
    Loop,
}

/// A tester namespace, a DUT namespace and the veth links between them.
/// Dropping it deletes both namespaces (which deletes the links) and the
/// run's temporary directory.
pub struct Topology {
    /// Run id `lab-<pid>-<n>`.
    pub id: String,
    /// Tester namespace name.
    pub tester: String,
    /// DUT namespace name.
    pub dut: String,
    /// Number of tester ports `t1..tN`.
    pub ports: usize,
    /// Temporary directory of this run.
    pub tmp: PathBuf,
    created: Vec<String>,
    /// Namespaces made by [`Topology::add_plain_namespaces`], deleted in
    /// one batch after the others.
    plain: Vec<String>,
}

impl Topology {
    /// Create the namespaces and `ports` veth links. MTU 9216, IPv6 off on
    /// the tester side (and on the DUT side unless `dut_ipv6`), all up.
    pub fn create(ports: usize, wiring: Wiring, dut_ipv6: bool) -> Result<Topology, LabError> {
        install_signal_handlers();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let id = format!("lab-{}-{}", std::process::id(), n);
        let tmp = std::env::temp_dir().join(&id);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)
            .map_err(|e| LabError::Other(format!("mkdir {}: {e}", tmp.display())))?;
        let mut t = Topology {
            tester: format!("{id}-t"),
            dut: format!("{id}-d"),
            id,
            ports,
            tmp,
            created: Vec::new(),
            plain: Vec::new(),
        };
        for ns in [t.tester.clone(), t.dut.clone()] {
            run("ip", &["netns", "add", &ns])?;
            t.created.push(ns.clone());
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
            let v6 = if ns == t.dut && dut_ipv6 { "0" } else { "1" };
            for k in ["all", "default"] {
                run_in(
                    &ns,
                    "sysctl",
                    &["-qw", &format!("net.ipv6.conf.{k}.disable_ipv6={v6}")],
                )?;
            }
        }
        let (tn, dn) = (t.tester.clone(), t.dut.clone());
        match wiring {
            Wiring::ToDut => {
                for i in 1..=ports {
                    let (a, b) = (format!("t{i}"), format!("sw{i}"));
                    run(
                        "ip",
                        &[
                            "link", "add", &a, "netns", &tn, "mtu", "9216", "type", "veth", "peer",
                            "name", &b, "netns", &dn, "mtu", "9216",
                        ],
                    )?;
                    run("ip", &["-n", &tn, "link", "set", &a, "up"])?;
                    run("ip", &["-n", &dn, "link", "set", &b, "up"])?;
                }
            }
            Wiring::Loop => {
                let mut i = 1;
                while i <= ports {
                    let (a, b) = (format!("t{i}"), format!("t{}", i + 1));
                    run(
                        "ip",
                        &[
                            "link", "add", &a, "netns", &tn, "mtu", "9216", "type", "veth", "peer",
                            "name", &b, "netns", &tn, "mtu", "9216",
                        ],
                    )?;
                    run("ip", &["-n", &tn, "link", "set", &a, "up"])?;
                    run("ip", &["-n", &tn, "link", "set", &b, "up"])?;
                    i += 2;
                }
            }
        }
        Ok(t)
    }

    /// Create one more namespace `<id>-<suffix>` (IPv6 off, `lo` up),
    /// removed with the others on drop; returns its name.
    pub fn add_namespace(&mut self, suffix: &str) -> Result<String, LabError> {
        let ns = format!("{}-{suffix}", self.id);
        run("ip", &["netns", "add", &ns])?;
        self.created.push(ns.clone());
        run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        for k in ["all", "default"] {
            run_in(
                &ns,
                "sysctl",
                &["-qw", &format!("net.ipv6.conf.{k}.disable_ipv6=1")],
            )?;
        }
        Ok(ns)
    }

    /// Create namespaces `<id>-<suffix>` as they are (IPv6 on, nothing
    /// set: for a DUT to ready, e.g. the VRF namespaces of an L3VPN PE),
    /// with one `ip -batch`; removed on drop. Returns their names.
    pub fn add_plain_namespaces(&mut self, suffixes: &[String]) -> Result<Vec<String>, LabError> {
        let names: Vec<String> = suffixes
            .iter()
            .map(|s| format!("{}-{s}", self.id))
            .collect();
        let mut b = String::new();
        for n in &names {
            b.push_str(&format!("netns add {n}\n"));
        }
        let f = self.tmp.join("netns-add.batch");
        std::fs::write(&f, b)
            .map_err(|e| LabError::Other(format!("write {}: {e}", f.display())))?;
        // Listed before the batch runs: a partial batch is cleaned up too.
        self.plain.extend(names.iter().cloned());
        run("ip", &["-batch", &f.to_string_lossy()])?;
        Ok(names)
    }

    /// Tester interface names `t1..tN`.
    pub fn tester_ports(&self) -> Vec<String> {
        (1..=self.ports).map(|i| format!("t{i}")).collect()
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in self.created.iter().rev() {
            kill_ns_pids(ns);
            let _ = run("ip", &["netns", "del", ns]);
        }
        if !self.plain.is_empty() {
            let b: String = self
                .plain
                .iter()
                .map(|n| format!("netns del {n}\n"))
                .collect();
            let f = self.tmp.join("netns-del.batch");
            if std::fs::write(&f, b).is_ok() {
                let _ = run("ip", &["-force", "-batch", &f.to_string_lossy()]);
            }
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}
