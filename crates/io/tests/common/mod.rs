//! Throwaway network namespaces for the io integration tests (shared by
//! `af_packet.rs` and `tap.rs`).
#![allow(dead_code)] // each test file uses its own subset

use io::link;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static SEQ: AtomicU32 = AtomicU32::new(0);

pub fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespace named `<prefix>-<pid>-<n>`, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// An empty namespace with IPv6 off before any interface exists (so
    /// none inherits it: no ND/MLD noise). `None` (after printing why)
    /// when not root.
    pub fn new(prefix: &str) -> Option<Netns> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: namespace tests need root");
            return None;
        }
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        run("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        let _ = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sysctl", "-qw"])
            .args([
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .output();
        Some(ns)
    }

    pub fn ip(&self, args: &[&str]) {
        let mut v = vec!["-n", &self.name];
        v.extend_from_slice(args);
        run("ip", &v);
    }

    /// A veth pair `x`/`y`, both up with `mtu`.
    pub fn veth(&self, x: &str, y: &str, mtu: u32) {
        let mtu = mtu.to_string();
        self.ip(&["link", "add", "name", x, "type", "veth", "peer", "name", y]);
        self.ip(&["link", "set", "dev", x, "mtu", &mtu, "up"]);
        self.ip(&["link", "set", "dev", y, "mtu", &mtu, "up"]);
    }

    /// Run `f` on a fresh thread that has entered the namespace (so the
    /// sockets and devices it opens belong to it).
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|s| {
            let h = s.spawn(move || {
                let file = std::fs::File::open(&path).expect("open netns");
                // SAFETY: setns on a namespace fd; affects only this thread.
                let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            });
            match h.join() {
                Ok(v) => v,
                Err(p) => std::panic::resume_unwind(p),
            }
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Wait (≤ 3 s) until `name` in the calling thread's namespace is up.
pub fn wait_oper_up(name: &str) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        if link::query(name).is_some_and(|l| l.oper_up) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{name} never came up");
}
