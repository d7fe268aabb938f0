//! Network namespaces for tests: created with unique names, removed on drop.
//!
//! Terms: the *DUT namespace* holds the switch's ports (`sw1`, `sw2`, ...);
//! the *tester namespace* holds the other end of each veth pair (`t1`, `t2`,
//! ...) where the test sends and captures frames. Every interface created
//! here has IPv6 disabled so the kernel does not emit stray frames (router
//! solicitations, MLD reports) onto the wires under test.

use std::ffi::CString;
use std::io;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A network namespace that exists for the lifetime of this value.
///
/// Drop kills every process started through [`Netns::spawn`] and every
/// process still inside the namespace, then deletes it.
pub struct Netns {
    name: String,
    children: Mutex<Vec<Child>>,
}

impl Netns {
    /// Creates a namespace named `<prefix><pid>-<counter>` (unique across
    /// concurrently running tests and test binaries), with IPv6 disabled by
    /// default for every interface created in it.
    pub fn new(prefix: &str) -> io::Result<Netns> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}{}-{n}", std::process::id());
        // A stale namespace of the same name can only come from an earlier
        // process with the same pid that crashed; remove it.
        if std::path::Path::new(&format!("/run/netns/{name}")).exists() {
            let _ = ip(&["netns", "del", &name]);
        }
        ip(&["netns", "add", &name])?;
        let ns = Netns {
            name,
            children: Mutex::new(Vec::new()),
        };
        for key in ["default", "all"] {
            ns.sysctl(&format!("net.ipv6.conf.{key}.disable_ipv6"), "1")?;
        }
        ns.exec(&["ip", "link", "set", "dev", "lo", "up"])?;
        Ok(ns)
    }

    /// `n` namespaces made as [`Netns::new`] does, by up to `threads`
    /// threads at once (each costs a few process starts; hundreds of
    /// tester routers one after another take seconds). In order: element
    /// `k` is the `k`-th made. On error the ones made are removed.
    pub fn new_many(prefix: &str, n: usize, threads: usize) -> io::Result<Vec<Netns>> {
        let threads = threads.clamp(1, n.max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let slots: Vec<Mutex<Option<io::Result<Netns>>>> =
            (0..n).map(|_| Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= n {
                        break;
                    }
                    *slots[k].lock().unwrap() = Some(Netns::new(prefix));
                });
            }
        });
        // Dropping the vector on the first error removes those made.
        slots
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .unwrap()
                    .unwrap_or_else(|| Err(io::Error::other("namespace not made")))
            })
            .collect()
    }

    /// The namespace's name (as in `ip netns list`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `args` inside the namespace and returns its output; an error if
    /// it cannot start or exits with a failure status (stderr included).
    pub fn exec(&self, args: &[&str]) -> io::Result<Output> {
        let mut all = vec!["netns", "exec", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// The MAC address of interface `ifname` inside the namespace.
    pub fn mac(&self, ifname: &str) -> crate::frame::Mac {
        mac_of(&self.name, ifname)
    }

    /// Sets a sysctl inside the namespace (only `net.*` keys are per namespace).
    pub fn sysctl(&self, key: &str, value: &str) -> io::Result<()> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let value = value.to_string();
        in_netns(&self.name, move || std::fs::write(&path, value))?
    }

    /// Starts `args` inside the namespace in the background, with the given
    /// stdout/stderr; the process is killed when the namespace is dropped.
    /// Returns its pid.
    pub fn spawn(&self, args: &[&str], stdout: Stdio, stderr: Stdio) -> io::Result<u32> {
        let child = self.command(args).stdout(stdout).stderr(stderr).spawn()?;
        let pid = child.id();
        self.children.lock().unwrap().push(child);
        Ok(pid)
    }

    /// Waits up to `timeout` for a process started with [`Netns::spawn`]
    /// to exit; returns its status, or `None` if it is still running.
    pub fn wait_child(
        &self,
        pid: u32,
        timeout: std::time::Duration,
    ) -> io::Result<Option<std::process::ExitStatus>> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            {
                let mut children = self.children.lock().unwrap();
                if let Some(c) = children.iter_mut().find(|c| c.id() == pid) {
                    if let Some(st) = c.try_wait()? {
                        return Ok(Some(st));
                    }
                } else {
                    return Err(io::Error::new(io::ErrorKind::NotFound, "no such child"));
                }
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// A `Command` that runs `args` inside the namespace (not tracked).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).args(args);
        c
    }

    /// Sets an interface of this namespace up (and its MTU, if given).
    pub fn link_up(&self, ifname: &str, mtu: Option<u32>) -> io::Result<()> {
        if let Some(mtu) = mtu {
            ip(&[
                "-n",
                &self.name,
                "link",
                "set",
                "dev",
                ifname,
                "mtu",
                &mtu.to_string(),
            ])?;
        }
        ip(&["-n", &self.name, "link", "set", "dev", ifname, "up"])?;
        Ok(())
    }

    /// Runs `f` on a new thread inside this namespace; see [`in_netns`].
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
        in_netns(&self.name, f)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for mut c in self.children.lock().unwrap().drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Ok(out) = ip(&["netns", "pids", &self.name]) {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    // SAFETY: kill(2) with a pid read from `ip netns pids`;
                    // at worst it fails with ESRCH.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// Runs `ip` with `args`; an error (with its stderr) if it fails.
pub fn ip(args: &[&str]) -> io::Result<Output> {
    run_cmd("ip", args)
}

/// Runs `prog args...`; an error (with its stderr) if it fails.
/// The stdout of a command that must have run and succeeded; otherwise
/// panics with `what`, its stdout and stderr.
pub fn stdout_ok(o: io::Result<Output>, what: &str) -> String {
    let o = o.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn run_cmd(prog: &str, args: &[&str]) -> io::Result<Output> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "`{prog} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out)
}

/// A shared segment: bridge `core0` (no STP) in namespace `core`, and for
/// each `(ns, if_ns, if_core)` a veth `if_ns` in `ns` to `if_core` on the
/// bridge, all with MTU `mtu` and up (a raw socket on a bridge port sees
/// every frame on the wire, whatever the switches' port backends).
pub fn bridged_segment(core: &Netns, links: &[(&Netns, &str, &str)], mtu: u32) -> io::Result<()> {
    core.exec(&[
        "ip",
        "link",
        "add",
        "core0",
        "type",
        "bridge",
        "stp_state",
        "0",
    ])?;
    for (ns, ifname, port) in links {
        veth(ns, ifname, core, port, mtu)?;
        core.exec(&["ip", "link", "set", port, "master", "core0"])?;
    }
    core.exec(&["ip", "link", "set", "core0", "up"])?;
    Ok(())
}

/// Creates a veth pair: `if_a` in namespace `ns_a`, `if_b` in `ns_b`, both
/// with MTU `mtu` and up. IPv6 is off on both (inherited from the
/// namespaces' `default` setting, and set explicitly again here).
pub fn veth(ns_a: &Netns, if_a: &str, ns_b: &Netns, if_b: &str, mtu: u32) -> io::Result<()> {
    let mtu_s = mtu.to_string();
    ip(&[
        "-n",
        ns_a.name(),
        "link",
        "add",
        "name",
        if_a,
        "mtu",
        &mtu_s,
        "type",
        "veth",
        "peer",
        "name",
        if_b,
        "mtu",
        &mtu_s,
        "netns",
        ns_b.name(),
    ])?;
    for (ns, ifname) in [(ns_a, if_a), (ns_b, if_b)] {
        ns.sysctl(&format!("net.ipv6.conf.{ifname}.disable_ipv6"), "1")?;
        ns.link_up(ifname, None)?;
    }
    Ok(())
}

/// Runs `ip -n NS -batch` over `lines` (one `ip` command each, without
/// the `ip`): hundreds of links in one process instead of one each.
pub fn ip_batch(ns: &Netns, lines: &[String]) -> io::Result<()> {
    static N: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "lanyard-ip-{}-{}-{}.batch",
        std::process::id(),
        ns.name(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, lines.join("\n") + "\n")?;
    let out = ip(&["-n", ns.name(), "-batch", &path.to_string_lossy()]);
    let _ = std::fs::remove_file(&path);
    out.map(|_| ())
}

/// `n` veth pairs `<a>1..<a>n` in `ns_a` ↔ `<b>1..<b>n` in `ns_b`, MTU
/// `mtu`, up, made with [`ip_batch`] (410 pairs take well under a
/// second; [`veth`] one at a time takes minutes). IPv6 stays off as the
/// namespaces' default says.
pub fn veth_batch(
    ns_a: &Netns,
    a: &str,
    ns_b: &Netns,
    b: &str,
    n: usize,
    mtu: u32,
) -> io::Result<()> {
    let adds: Vec<String> = (1..=n)
        .map(|i| {
            format!(
                "link add {a}{i} mtu {mtu} type veth peer name {b}{i} mtu {mtu} netns {}",
                ns_b.name()
            )
        })
        .collect();
    ip_batch(ns_a, &adds)?;
    let ups = |p: &str| -> Vec<String> { (1..=n).map(|i| format!("link set {p}{i} up")).collect() };
    ip_batch(ns_a, &ups(a))?;
    ip_batch(ns_b, &ups(b))
}

/// Runs `f` on a fresh thread whose network namespace is `/run/netns/<name>`
/// (`setns(2)` changes only the calling thread), and returns its result.
///
/// Sockets opened inside `f` stay in that namespace and can be used from
/// any thread afterwards.
pub fn in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let path = CString::new(format!("/run/netns/{name}")).map_err(io::Error::other)?;
    let handle = std::thread::spawn(move || -> io::Result<T> {
        // SAFETY: path is a valid NUL-terminated string; the result is checked.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is an open namespace file; setns affects only this thread.
        let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
        let err = io::Error::last_os_error();
        // SAFETY: fd was opened above and is closed exactly once.
        unsafe { libc::close(fd) };
        if rc != 0 {
            return Err(err);
        }
        Ok(f())
    });
    match handle.join() {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// The MAC address of interface `ifname` in namespace `ns` (by name: for
/// namespaces this process did not create). Panics if it cannot be read.
pub fn mac_of(ns: &str, ifname: &str) -> crate::frame::Mac {
    let out = ip(&[
        "netns",
        "exec",
        ns,
        "cat",
        &format!("/sys/class/net/{ifname}/address"),
    ])
    .unwrap_or_else(|e| panic!("read the MAC of {ifname} in {ns}: {e}"));
    crate::frame::parse_mac(String::from_utf8_lossy(&out.stdout).trim())
        .unwrap_or_else(|| panic!("no MAC for {ifname} in {ns}"))
}
