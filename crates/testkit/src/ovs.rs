//! Private Open vSwitch daemons (ovsdb-server + ovs-vswitchd, userspace
//! datapath) inside a test namespace, with their own database, sockets and
//! logs in a test directory, killed on drop. Used as a real peer: LACP
//! bonds, RSTP bridges.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Netns;

/// One OVS instance; its daemons die with it.
pub struct Ovs {
    dir: PathBuf,
    children: Vec<Child>,
    db: String,
}

/// True when the OVS tools are installed (tests skip otherwise).
pub fn available() -> bool {
    ["ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovsdb-tool"]
        .iter()
        .all(|b| {
            Command::new("sh")
                .args(["-c", &format!("command -v {b}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// Polls `ok` every 50 ms for up to `timeout`.
fn poll(timeout: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

impl Ovs {
    /// Creates a database in `dir` and starts both daemons in `ns`.
    pub fn start(ns: &Netns, dir: &Path) -> Result<Ovs, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
        let o = Command::new("ovsdb-tool")
            .args([
                "create",
                &p("conf.db"),
                "/usr/share/openvswitch/vswitch.ovsschema",
            ])
            .output()
            .map_err(|e| format!("ovsdb-tool: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "ovsdb-tool create: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        let spawn = |args: Vec<String>| -> Result<Child, String> {
            Command::new("ip")
                .args(["netns", "exec", ns.name()])
                .args(&args)
                .env("OVS_RUNDIR", dir)
                .env("OVS_LOGDIR", dir)
                .env("OVS_DBDIR", dir)
                .env("OVS_SYSCONFDIR", dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("spawn {}: {e}", args[0]))
        };
        let mut ovs = Ovs {
            dir: dir.to_path_buf(),
            children: Vec::new(),
            db: format!("--db=unix:{}", p("db.sock")),
        };
        ovs.children.push(spawn(vec![
            "ovsdb-server".into(),
            p("conf.db"),
            format!("--remote=punix:{}", p("db.sock")),
            format!("--unixctl={}", p("ovsdb.ctl")),
            format!("--log-file={}", p("ovsdb.log")),
        ])?);
        if !poll(Duration::from_secs(10), || dir.join("db.sock").exists()) {
            return Err("ovsdb-server: no socket after 10 s".into());
        }
        ovs.vsctl(&["--no-wait", "init"])?;
        ovs.children.push(spawn(vec![
            "ovs-vswitchd".into(),
            format!("unix:{}", p("db.sock")),
            format!("--unixctl={}", p("vswitchd.ctl")),
            format!("--log-file={}", p("vswitchd.log")),
        ])?);
        if !poll(Duration::from_secs(10), || {
            dir.join("vswitchd.ctl").exists()
        }) {
            return Err("ovs-vswitchd: no control socket after 10 s".into());
        }
        Ok(ovs)
    }

    /// `ovs-vsctl` against this instance's database; stdout, or stderr as
    /// the error.
    pub fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let o = Command::new("ovs-vsctl")
            .arg(&self.db)
            .arg("--timeout=20")
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if !o.status.success() {
            return Err(format!(
                "ovs-vsctl {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// A bridge on the userspace datapath (the kernel module is not
    /// available here), with `extra` bridge settings (`key=value`).
    pub fn add_userspace_bridge(&self, name: &str, extra: &[&str]) -> Result<String, String> {
        let mut args = vec![
            "add-br",
            name,
            "--",
            "set",
            "bridge",
            name,
            "datapath_type=netdev",
        ];
        args.extend_from_slice(extra);
        self.vsctl(&args)
    }

    /// `ovs-appctl` to this instance's vswitchd; stdout (empty on error).
    pub fn appctl(&self, args: &[&str]) -> String {
        let ctl = self.dir.join("vswitchd.ctl");
        Command::new("ovs-appctl")
            .arg(format!("--target={}", ctl.display()))
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// The directory holding the database, sockets and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
