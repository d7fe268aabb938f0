//! DUT drivers: build the topology, start and configure the device under
//! test, tear it all down on drop.

use crate::netns::{run, run_in, Topology, Wiring};
use crate::plan::{Driver, DutSpec};
use crate::sig::Mac;
use crate::LabError;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running DUT with its topology.
pub struct Dut {
    /// Plan entry.
    pub spec: DutSpec,
    /// Notes for the report (version, port type, …).
    pub info: Vec<String>,
    /// MACs of the DUT ports (linux-router: next-hop MACs).
    pub port_macs: Vec<Mac>,
    children: Vec<Child>,
    ovs_dir: Option<PathBuf>,
    lanyard: Option<(PathBuf, PathBuf)>,
    /// Topology (dropped last: namespaces go after the processes).
    pub topo: Topology,
}

impl Drop for Dut {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// MAC of the first emulated host on tester port `p` (0-based):
/// `02:4c:<p+1>:00:00:01`; host `i` is that plus `i`.
pub fn host_mac(p: usize) -> Mac {
    [0x02, 0x4c, (p + 1) as u8, 0, 0, 0x01]
}

/// IPv4 address of the emulated host on port `p`: 198.18.<p+1>.2.
pub fn host_ip(p: usize) -> [u8; 4] {
    [198, 18, (p + 1) as u8, 2]
}

fn parse_mac(s: &str) -> Option<Mac> {
    let v: Vec<u8> = s
        .split(':')
        .filter_map(|x| u8::from_str_radix(x, 16).ok())
        .collect();
    v.try_into().ok()
}

fn link_mac(ns: &str, ifname: &str) -> Result<Mac, LabError> {
    let out = run("ip", &["-n", ns, "-br", "link", "show", ifname])?;
    out.split_whitespace()
        .find_map(parse_mac)
        .ok_or_else(|| LabError::Other(format!("no MAC for {ifname} in {out:?}")))
}

fn wait_for(what: &str, secs: f64, mut ok: impl FnMut() -> bool) -> Result<(), LabError> {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    loop {
        if ok() {
            return Ok(());
        }
        crate::netns::check_interrupt()?;
        if Instant::now() > end {
            return Err(LabError::Dut(format!("timed out waiting for {what}")));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(8)..].join(" | ")
}

impl Dut {
    /// How the tester ports are wired for this driver.
    pub fn wiring(driver: Driver) -> Wiring {
        match driver {
            Driver::Wire => Wiring::Loop,
            _ => Wiring::ToDut,
        }
    }

    /// True for drivers without a device (plain veth pairs).
    pub fn is_wire(&self) -> bool {
        self.spec.driver == Driver::Wire
    }

    /// Create the topology with `ports` ports and start the DUT.
    pub fn start(spec: &DutSpec, ports: usize, lanyard_bin: &Path) -> Result<Dut, LabError> {
        let ports = if spec.driver == Driver::Wire {
            ports.div_ceil(2) * 2
        } else {
            ports
        };
        let topo = Topology::create(
            ports,
            Self::wiring(spec.driver),
            spec.driver == Driver::LinuxRouter,
        )?;
        let mut d = Dut {
            spec: spec.clone(),
            info: Vec::new(),
            port_macs: Vec::new(),
            children: Vec::new(),
            ovs_dir: None,
            lanyard: None,
            topo,
        };
        match spec.driver {
            Driver::Wire => d.info.push("veth pair t(2k-1) <-> t(2k)".into()),
            Driver::LinuxBridge => d.start_bridge(None)?,
            Driver::Lossy => d.start_bridge(spec.rate_kbit)?,
            Driver::LinuxRouter => d.start_router()?,
            Driver::Ovs => d.start_ovs()?,
            Driver::Lanyard => {
                let bin = spec
                    .binary
                    .clone()
                    .unwrap_or_else(|| lanyard_bin.to_path_buf());
                d.start_lanyard(&bin)?
            }
        }
        Ok(d)
    }

    fn sw(&self) -> Vec<String> {
        (1..=self.topo.ports).map(|i| format!("sw{i}")).collect()
    }

    fn start_bridge(&mut self, tbf_kbit: Option<u64>) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        if self.spec.mac_limit.is_some() {
            return Err(LabError::Unsupported(
                "mac-limit (iproute2 here cannot set the bridge's fdb_max_learned)".into(),
            ));
        }
        let mut args = vec!["-n", &ns, "link", "add", "br0", "type", "bridge"];
        let ageing;
        if let Some(a) = self.spec.mac_aging {
            ageing = (a as u64 * 100).to_string();
            args.extend_from_slice(&["ageing_time", &ageing]);
        }
        run("ip", &args)?;
        for p in self.sw() {
            run("ip", &["-n", &ns, "link", "set", &p, "master", "br0"])?;
            if self.spec.learning == Some(false) {
                run(
                    "bridge",
                    &["-n", &ns, "link", "set", "dev", &p, "learning", "off"],
                )?;
            }
            if let Some(k) = tbf_kbit {
                let rate = format!("{k}kbit");
                let limit = tbf_limit_bytes(k).to_string();
                run(
                    "tc",
                    &[
                        "-n", &ns, "qdisc", "add", "dev", &p, "root", "tbf", "rate", &rate,
                        "burst", "6000", "limit", &limit,
                    ],
                )?;
            }
        }
        run("ip", &["-n", &ns, "link", "set", "br0", "up"])?;
        let kv = run("uname", &["-r"]).unwrap_or_default();
        self.info
            .push(format!("Linux bridge, kernel {}", kv.trim()));
        if let Some(k) = tbf_kbit {
            self.info.push(format!(
                "tbf rate {k} kbit/s, burst 6000 B, limit {} B on each sw port",
                tbf_limit_bytes(k)
            ));
        }
        Ok(())
    }

    fn start_router(&mut self) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        run_in(&ns, "sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
        run_in(&ns, "sysctl", &["-qw", "net.ipv4.conf.all.rp_filter=0"])?;
        for (i, p) in self.sw().iter().enumerate() {
            let addr = format!("198.18.{}.1/24", i + 1);
            run("ip", &["-n", &ns, "addr", "add", &addr, "dev", p])?;
            let h = host_ip(i);
            let hip = format!("{}.{}.{}.{}", h[0], h[1], h[2], h[3]);
            let mac = crate::sig::mac_str(&host_mac(i));
            let dynamic = self.spec.static_neighbours == Some(false);
            if !dynamic {
                let args = [
                    "-n",
                    &ns,
                    "neigh",
                    "replace",
                    &hip,
                    "lladdr",
                    &mac,
                    "dev",
                    p,
                    "nud",
                    "permanent",
                ];
                run("ip", &args)?;
            }
            self.port_macs.push(link_mac(&ns, p)?);
        }
        self.info
            .push(if self.spec.static_neighbours == Some(false) {
                "Linux IPv4 forwarding, neighbours by ARP (answered by the emulated hosts)".into()
            } else {
                "Linux IPv4 forwarding, static neighbours".into()
            });
        Ok(())
    }

    fn start_ovs(&mut self) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        let dir = self.topo.tmp.join("ovs");
        std::fs::create_dir_all(&dir).map_err(|e| LabError::Dut(format!("mkdir: {e}")))?;
        let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
        run(
            "ovsdb-tool",
            &[
                "create",
                &p("conf.db"),
                "/usr/share/openvswitch/vswitch.ovsschema",
            ],
        )?;
        let spawn = |args: Vec<String>| -> Result<Child, LabError> {
            Command::new("ip")
                .args(["netns", "exec", &ns])
                .args(&args)
                .env("OVS_RUNDIR", &dir)
                .env("OVS_LOGDIR", &dir)
                .env("OVS_DBDIR", &dir)
                .env("OVS_SYSCONFDIR", &dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| LabError::Dut(format!("spawn {}: {e}", args[0])))
        };
        self.children.push(spawn(vec![
            "ovsdb-server".into(),
            p("conf.db"),
            format!("--remote=punix:{}", p("db.sock")),
            format!("--unixctl={}", p("ovsdb.ctl")),
            format!("--pidfile={}", p("ovsdb.pid")),
            format!("--log-file={}", p("ovsdb.log")),
        ])?);
        let db = format!("--db=unix:{}", p("db.sock"));
        wait_for("ovsdb-server socket", 10.0, || dir.join("db.sock").exists())?;
        run("ovs-vsctl", &[&db, "--no-wait", "init"])?;
        self.children.push(spawn(vec![
            "ovs-vswitchd".into(),
            format!("unix:{}", p("db.sock")),
            format!("--unixctl={}", p("vswitchd.ctl")),
            format!("--pidfile={}", p("vswitchd.pid")),
            format!("--log-file={}", p("vswitchd.log")),
        ])?);
        wait_for("ovs-vswitchd control socket", 10.0, || {
            dir.join("vswitchd.ctl").exists()
        })?;
        if self.spec.learning == Some(false) {
            return Err(LabError::Unsupported(
                "learning: false (OVS NORMAL action always learns)".into(),
            ));
        }
        let mut br = vec![
            db.clone(),
            "--timeout=20".into(),
            "add-br".into(),
            "br0".into(),
            "--".into(),
            "set".into(),
            "bridge".into(),
            "br0".into(),
            "datapath_type=netdev".into(),
        ];
        if let Some(a) = self.spec.mac_aging {
            br.push(format!("other_config:mac-aging-time={a}"));
        }
        if let Some(s) = self.spec.mac_limit.or(self.spec.mac_table_size) {
            br.push(format!("other_config:mac-table-size={s}"));
        }
        let brr: Vec<&str> = br.iter().map(|s| s.as_str()).collect();
        run("ovs-vsctl", &brr)?;
        let want = self.spec.port_type.clone().unwrap_or_else(|| "auto".into());
        let mut used = String::new();
        for t in ["afxdp", "af-packet"] {
            if want != "auto" && want != t {
                continue;
            }
            let mut ok = true;
            for sw in self.sw() {
                let _ = run(
                    "ovs-vsctl",
                    &[&db, "--timeout=20", "--if-exists", "del-port", "br0", &sw],
                );
                let mut a = vec![db.as_str(), "--timeout=20", "add-port", "br0", &sw];
                if t == "afxdp" {
                    a.extend_from_slice(&["--", "set", "interface", &sw, "type=afxdp"]);
                }
                if run("ovs-vsctl", &a).is_err() {
                    ok = false;
                    break;
                }
                let ofport =
                    run("ovs-vsctl", &[&db, "get", "interface", &sw, "ofport"]).unwrap_or_default();
                if ofport.trim() == "-1" || ofport.trim().is_empty() {
                    ok = false;
                    break;
                }
            }
            if ok {
                used = t.to_string();
                break;
            }
        }
        if used.is_empty() {
            return Err(LabError::Dut(format!(
                "ovs: could not add ports ({want}); log: {}",
                tail(&dir.join("vswitchd.log"))
            )));
        }
        let ver = run("ovs-vswitchd", &["--version"]).unwrap_or_default();
        self.info.push(format!(
            "{}, userspace datapath, {used} ports",
            ver.lines().next().unwrap_or("ovs").trim()
        ));
        self.ovs_dir = Some(dir);
        Ok(())
    }

    fn start_lanyard(&mut self, bin: &Path) -> Result<(), LabError> {
        let ns = self.topo.dut.clone();
        let dir = self.topo.tmp.join("lanyard");
        std::fs::create_dir_all(&dir).map_err(|e| LabError::Dut(format!("mkdir: {e}")))?;
        let sock = dir.join("lanyard.sock");
        let cfg = dir.join("lanyard.yaml");
        std::fs::write(&cfg, self.lanyard_config(&sock))
            .map_err(|e| LabError::Dut(format!("write config: {e}")))?;
        let log = dir.join("lanyard.log");
        let logf = std::fs::File::create(&log).map_err(|e| LabError::Dut(format!("log: {e}")))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(bin)
            .arg("run")
            .arg("--config")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(logf.try_clone().map_err(|e| LabError::Dut(e.to_string()))?)
            .stderr(logf)
            .spawn()
            .map_err(|e| LabError::Dut(format!("spawn {}: {e}", bin.display())))?;
        self.children.push(child);
        let mut exited = None;
        let res = wait_for("lanyard management socket", 10.0, || {
            if let Some(c) = self.children.last_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    exited = Some(st);
                    return true;
                }
            }
            Command::new(bin)
                .arg("--socket")
                .arg(&sock)
                .args(["show", "interfaces", "--json"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        });
        if let Some(st) = exited {
            return Err(LabError::Dut(format!(
                "lanyard exited ({st}): {}",
                tail(&log)
            )));
        }
        res.map_err(|e| LabError::Dut(format!("{e}; log: {}", tail(&log))))?;
        let ver = Command::new(bin)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        self.info.push(format!("lanyard {ver} ({})", bin.display()));
        self.lanyard = Some((bin.to_path_buf(), sock));
        Ok(())
    }

    /// The Lanyard configuration this driver writes (docs/config.md).
    pub fn lanyard_config(&self, sock: &Path) -> String {
        let s = &self.spec;
        let vlan = s.vlan.unwrap_or(10);
        let mut c = String::new();
        c.push_str("switch:\n  name: lab\n");
        c.push_str(&format!("  workers: {}\n", s.workers.unwrap_or(1)));
        if let Some(a) = s.mac_aging {
            c.push_str(&format!("  mac-aging: {a}\n"));
        }
        if let Some(t) = s.mac_table_size {
            c.push_str(&format!("  mac-table-size: {t}\n"));
        }
        c.push_str(&format!("management:\n  socket: {}\n", sock.display()));
        c.push_str(&format!("vlans:\n  - id: {vlan}\n"));
        if let Some(l) = s.learning {
            c.push_str(&format!("    learning: {l}\n"));
        }
        if let Some(m) = s.mac_limit {
            c.push_str(&format!("    mac-limit: {m}\n"));
        }
        c.push_str("ports:\n");
        for p in self.sw() {
            c.push_str(&format!(
                "  - name: {p}\n    mode: access\n    vlan: {vlan}\n"
            ));
        }
        c
    }

    /// Forget learned addresses, where the DUT can (best effort).
    pub fn flush_macs(&self) {
        match self.spec.driver {
            Driver::LinuxBridge | Driver::Lossy => {
                let _ = run(
                    "bridge",
                    &[
                        "-n",
                        &self.topo.dut,
                        "fdb",
                        "flush",
                        "dev",
                        "br0",
                        "dynamic",
                    ],
                );
            }
            Driver::Ovs => {
                if let Some(d) = &self.ovs_dir {
                    let ctl = d.join("vswitchd.ctl");
                    let _ = run(
                        "ovs-appctl",
                        &["-t", &ctl.to_string_lossy(), "fdb/flush", "br0"],
                    );
                }
            }
            Driver::Lanyard => {
                if let Some((bin, sock)) = &self.lanyard {
                    let _ = Command::new(bin)
                        .arg("--socket")
                        .arg(sock)
                        .args(["clear", "mac", "address-table"])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status();
                }
            }
            _ => {}
        }
    }

    /// Addresses the DUT is configured to learn at most (None: no limit),
    /// `Some(0)` when learning is off.
    pub fn learn_limit(&self) -> Option<u32> {
        if self.spec.learning == Some(false) {
            return Some(0);
        }
        self.spec.mac_limit
    }
}

/// Queue of the `lossy` DUT's shaper: 20 ms at its rate. Pacing jitter of
/// the generator (worse on a loaded machine) is absorbed, while a trial 2 %
/// above the rate for 1 s overflows it and shows loss, so bisection finds
/// the limit rather than the jitter.
fn tbf_limit_bytes(kbit: u64) -> u64 {
    (kbit * 1000 / 8 / 50).max(6000)
}
