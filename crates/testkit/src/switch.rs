//! Runs the `lanyard` binary under test and reads its management API
//! through its own CLI (`lanyard --socket PATH show ... --json`).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::netns::Netns;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// How long [`Switch::start`] waits for every port to be up.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `lanyard run` inside a DUT namespace.
///
/// Drop sends SIGTERM, waits up to 5 s, then SIGKILL; if the thread is
/// panicking (a failed assertion) the switch's log is printed first.
pub struct Switch {
    bin: PathBuf,
    child: Option<Child>,
    dir: PathBuf,
    socket: PathBuf,
    log: PathBuf,
}

/// The port backend the integration tests run on: `LANYARD_TEST_BACKEND`
/// (`auto`, `af-xdp`, `af-packet`), default `auto`.
pub fn test_backend() -> String {
    std::env::var("LANYARD_TEST_BACKEND").unwrap_or_else(|_| "auto".into())
}

/// `yaml` with `switch.port-backend` set to [`test_backend`] (unless it
/// names one already, or the backend is `auto`, the default). Textual, so
/// the test's YAML is otherwise byte for byte what it wrote; a block
/// `switch:` section gets the key as its first line, a config without one
/// gets a section.
pub fn with_test_backend(yaml: &str) -> String {
    let b = test_backend();
    if b == "auto" || yaml.contains("port-backend:") {
        return yaml.to_string();
    }
    let mut out = String::with_capacity(yaml.len() + 32);
    let mut done = false;
    let mut lines = yaml.lines().peekable();
    while let Some(l) = lines.next() {
        out.push_str(l);
        out.push('\n');
        if !done && l.trim_end() == "switch:" {
            let indent: String = lines
                .peek()
                .map(|n| n.chars().take_while(|c| *c == ' ').collect())
                .filter(|i: &String| !i.is_empty())
                .unwrap_or_else(|| "  ".into());
            out.push_str(&format!("{indent}port-backend: {b}\n"));
            done = true;
        }
    }
    if !done {
        out = format!("switch:\n  port-backend: {b}\n{out}");
    }
    out
}

impl Switch {
    /// Writes `yaml` (a config per docs/config.md *without* a `management`
    /// section; one is appended with a socket in a private temp dir) and
    /// starts `bin run --config FILE` inside `dut`. Returns once the log
    /// says `ready` and `show interfaces` reports each of `ports` up.
    pub fn start(bin: &str, dut: &Netns, yaml: &str, ports: &[&str]) -> io::Result<Switch> {
        Switch::start_managed(bin, dut, yaml, "", ports)
    }

    /// [`Switch::start`] with more keys for the appended `management:`
    /// section (`management`: YAML lines indented by two spaces, e.g.
    /// `"  metrics:\n    listen: 127.0.0.1:9417\n"`).
    pub fn start_managed(
        bin: &str,
        dut: &Netns,
        yaml: &str,
        management: &str,
        ports: &[&str],
    ) -> io::Result<Switch> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("lanyard-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("mgmt.sock");
        let config = dir.join("config.yaml");
        let log = dir.join("lanyard.log");
        let yaml = with_test_backend(yaml);
        std::fs::write(
            &config,
            format!(
                "{}\nmanagement:\n  socket: {}\n{management}",
                yaml.trim_end(),
                socket.display()
            ),
        )?;
        let logf = File::create(&log)?;
        let child = Command::new("ip")
            .args(["netns", "exec", dut.name(), bin, "run", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf)
            .spawn()?;
        let mut sw = Switch {
            bin: PathBuf::from(bin),
            child: Some(child),
            dir,
            socket,
            log,
        };
        sw.wait_ready(ports)?;
        Ok(sw)
    }

    fn wait_ready(&mut self, ports: &[&str]) -> io::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last;
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait()? {
                return Err(io::Error::other(format!(
                    "lanyard exited during startup ({st}); log:\n{}",
                    self.log()
                )));
            }
            let ready_logged = self.log().contains("ready");
            match self.try_show_json(&["show", "interfaces"]) {
                Ok(v) => {
                    let down: Vec<String> = ports
                        .iter()
                        .filter(|p| interface_state(&v, p).as_deref() != Some("up"))
                        .map(|p| format!("{p}={:?}", interface_state(&v, p)))
                        .collect();
                    if down.is_empty() && ready_logged {
                        return Ok(());
                    }
                    last = format!("ports not up: {down:?}; `ready` logged: {ready_logged}; show interfaces: {v}");
                }
                Err(e) => last = e,
            }
            if Instant::now() >= deadline {
                return Err(io::Error::other(format!(
                    "lanyard not ready after {READY_TIMEOUT:?}: {last}; log:\n{}",
                    self.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The switch's process id (`ip netns exec` execs it in place), while
    /// it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The management socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The switch's stderr/stdout so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `lanyard config apply` of `yaml`, written as `NAME.yaml` beside the
    /// switch's socket with the same port backend and socket (else the
    /// diff has `switch` / `management` changes that need a restart).
    /// Ok or Err with the command's stdout and stderr.
    pub fn apply_config(&self, name: &str, yaml: &str) -> Result<String, String> {
        let path = self.socket.with_file_name(format!("{name}.yaml"));
        std::fs::write(
            &path,
            with_test_backend(&format!(
                "{}\nmanagement:\n  socket: {}\n",
                yaml.trim_end(),
                self.socket.display()
            )),
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
        let o = self
            .cli(&["config", "apply", &path.to_string_lossy()])
            .map_err(|e| format!("run lanyard config apply: {e}"))?;
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if o.status.success() {
            Ok(out)
        } else {
            Err(out)
        }
    }

    /// Runs `lanyard --socket PATH <args>` (from the root namespace).
    pub fn cli(&self, args: &[&str]) -> io::Result<Output> {
        Command::new(&self.bin)
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
    }

    /// Runs a CLI command, appending `--json`, and parses its output.
    /// Routes of `source` (e.g. `ospf`) installed in the FIB of `family`
    /// (`ip` or `ipv6`), from `show … route summary`; 0 while the API is
    /// not answering.
    pub fn fib_routes(&self, family: &str, source: &str) -> u64 {
        self.try_show_json(&["show", family, "route", "summary"])
            .ok()
            .and_then(|v| {
                v["sources"].as_array().map(|a| {
                    a.iter()
                        .filter(|s| s["source"] == source)
                        .map(|s| s["installed"].as_u64().unwrap_or(0))
                        .sum::<u64>()
                })
            })
            .unwrap_or(0)
    }

    pub fn try_show_json(&self, args: &[&str]) -> Result<Value, String> {
        let mut all = args.to_vec();
        if !all.contains(&"--json") {
            all.push("--json");
        }
        let out = self
            .cli(&all)
            .map_err(|e| format!("cannot run lanyard CLI: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`lanyard {}` failed ({}): {}",
                all.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| {
            format!(
                "`lanyard {}` printed invalid JSON ({e}): {}",
                all.join(" "),
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Like [`Switch::try_show_json`], panicking on failure.
    pub fn show_json(&self, args: &[&str]) -> Value {
        self.try_show_json(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Per member of the first port channel, whether it distributes (from
    /// `show port-channel`; empty if the switch does not answer).
    pub fn channel_distributing(&self) -> Vec<bool> {
        self.try_show_json(&["show", "port-channel"])
            .ok()
            .and_then(|v| {
                v[0]["members"]
                    .as_array()
                    .map(|ms| ms.iter().map(|m| m["distributing"] == true).collect())
            })
            .unwrap_or_default()
    }

    /// The router MAC of routed port (or `vlanN` interface) `port`, from
    /// `show ip interface`.
    pub fn router_mac(&self, port: &str) -> crate::frame::Mac {
        let v = self.show_json(&["show", "ip", "interface"]);
        let m = v
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == port))
            .and_then(|r| r["mac"].as_str())
            .unwrap_or_else(|| panic!("no router MAC for {port} in show ip interface: {v}"));
        crate::frame::parse_mac(m).unwrap_or_else(|| panic!("bad MAC {m:?}"))
    }

    /// Runs a CLI command that must succeed (e.g. `clear mac address-table`).
    pub fn run_cli(&self, args: &[&str]) {
        let out = self.cli(args).expect("run lanyard CLI");
        assert!(
            out.status.success(),
            "`lanyard {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `total` of `show mac address-table [vlan N] count`.
    pub fn mac_count(&self, vlan: Option<u16>) -> u64 {
        let v = match vlan {
            Some(id) => self.show_json(&[
                "show",
                "mac",
                "address-table",
                "vlan",
                &id.to_string(),
                "count",
            ]),
            None => self.show_json(&["show", "mac", "address-table", "count"]),
        };
        v["total"]
            .as_u64()
            .unwrap_or_else(|| panic!("no numeric `total` in count output: {v}"))
    }

    /// Polls [`Switch::mac_count`] until it equals `want`, or `timeout`
    /// passes, or it has not changed for 3 s; returns the last value seen.
    pub fn wait_mac_count(&self, vlan: Option<u16>, want: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let mut last = u64::MAX;
        let mut since = Instant::now();
        loop {
            let n = self.mac_count(vlan);
            if n != last {
                last = n;
                since = Instant::now();
            }
            if n == want || Instant::now() >= deadline || since.elapsed() >= Duration::from_secs(3)
            {
                return n;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Rows of `show mac address-table [vlan N]`.
    pub fn mac_table(&self, vlan: Option<u16>) -> Vec<Value> {
        let v = match vlan {
            Some(id) => self.show_json(&["show", "mac", "address-table", "vlan", &id.to_string()]),
            None => self.show_json(&["show", "mac", "address-table"]),
        };
        v.as_array()
            .unwrap_or_else(|| panic!("mac address-table is not an array: {v}"))
            .clone()
    }

    /// Gateways of `vrf`'s installed route to `prefix` (`show ip route vrf
    /// VRF`, or `show ipv6 …` when the prefix has a colon).
    pub fn vrf_route_gateways(&self, vrf: &str, prefix: &str) -> Vec<String> {
        let ip = if prefix.contains(':') { "ipv6" } else { "ip" };
        let v = self.show_json(&["show", ip, "route", "vrf", vrf]);
        v["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["prefix"] == prefix && r["installed"] == true)
            .flat_map(|r| r["nexthops"].as_array().into_iter().flatten())
            .filter_map(|h| h["gateway"].as_str().map(str::to_string))
            .collect()
    }

    /// `show counters`.
    pub fn counters(&self) -> Value {
        self.show_json(&["show", "counters"])
    }

    /// The backend port `name` runs on (`af-xdp`, `af-packet`; `show
    /// interfaces`), `None` before it is attached.
    pub fn port_backend(&self, name: &str) -> Option<String> {
        let v = self.try_show_json(&["show", "interfaces"]).ok()?;
        v.as_array()?
            .iter()
            .find(|r| r["name"] == name)?
            .get("backend")?
            .as_str()
            .filter(|b| !b.is_empty())
            .map(str::to_string)
    }

    /// The `state` of interface `name` in `show interfaces`.
    pub fn port_state(&self, name: &str) -> Option<String> {
        interface_state(&self.show_json(&["show", "interfaces"]), name)
    }

    /// Polls until `name` is in `state`; returns the last state seen.
    pub fn wait_port_state(&self, name: &str, state: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.port_state(name);
            if s.as_deref() == Some(state) || Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM and waits up to 5 s for a clean exit, then SIGKILL.
    /// Returns the exit status (of the first stop).
    /// Kills the switch with SIGKILL (a node lost without warning) and
    /// reaps it.
    pub fn kill9(&mut self) -> io::Result<ExitStatus> {
        let Some(mut child) = self.child.take() else {
            return Err(io::Error::other("already stopped"));
        };
        child.kill()?;
        child.wait()
    }

    /// Starts the switch again after [`Switch::stop`] or [`Switch::kill9`]:
    /// the same binary, configuration and directory (so files the last
    /// run left beside its socket are there), in `dut`.
    pub fn start_again(&mut self, dut: &Netns, ports: &[&str]) -> io::Result<()> {
        if self.child.is_some() {
            return Err(io::Error::other("still running"));
        }
        let logf = std::fs::OpenOptions::new().append(true).open(&self.log)?;
        let child = Command::new("ip")
            .args(["netns", "exec", dut.name()])
            .arg(&self.bin)
            .args(["run", "--config"])
            .arg(self.dir.join("config.yaml"))
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf)
            .spawn()?;
        self.child = Some(child);
        self.wait_ready(ports)
    }

    pub fn stop(&mut self) -> io::Result<ExitStatus> {
        let Some(mut child) = self.child.take() else {
            return Err(io::Error::other("already stopped"));
        };
        // SAFETY: kill(2) on our own child's pid (`ip netns exec` execs the
        // switch in place, so this is the switch process itself).
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(st) = child.try_wait()? {
                return Ok(st);
            }
            if Instant::now() >= deadline {
                eprintln!("lanyard did not exit within 5 s of SIGTERM; killing it");
                let _ = child.kill();
                return child.wait();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        if panicking {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(200).collect();
            eprintln!(
                "---- lanyard log (last {} lines, {}) ----",
                tail.len(),
                self.log.display()
            );
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
            eprintln!("---- end of lanyard log ----");
        }
        if self.child.is_some() {
            let _ = self.stop();
        }
        if !panicking {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The `state` of `name` in a `show interfaces --json` array.
pub fn interface_state(v: &Value, name: &str) -> Option<String> {
    v.as_array()?
        .iter()
        .find(|i| i["name"] == name)
        .and_then(|i| i["state"].as_str().map(str::to_string))
}

/// A counter of port `port` in `show counters --json` (`key` like
/// `tx_frames`, or `drops.same-port`). Panics with the JSON if absent.
pub fn port_counter(c: &Value, port: &str, key: &str) -> u64 {
    counter_in(c, "ports", "name", &Value::from(port), key)
}

/// A counter of VLAN `vlan` in `show counters --json`.
pub fn vlan_counter(c: &Value, vlan: u16, key: &str) -> u64 {
    counter_in(c, "vlans", "vlan", &Value::from(vlan), key)
}

fn counter_in(c: &Value, list: &str, field: &str, id: &Value, key: &str) -> u64 {
    let row = c[list]
        .as_array()
        .and_then(|a| a.iter().find(|r| &r[field] == id))
        .unwrap_or_else(|| panic!("no {list} entry with {field}={id} in counters: {c}"));
    let mut v = row;
    for part in key.splitn(2, '.') {
        v = &v[part];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("no numeric {key} for {field}={id} in counters: {row}"))
}

#[cfg(test)]
mod backend_tests {
    use super::*;

    #[test]
    fn test_backend_goes_into_the_switch_section() {
        // SAFETY (env): this module's only test touching the variable.
        std::env::set_var("LANYARD_TEST_BACKEND", "af-xdp");
        assert_eq!(
            with_test_backend("switch:\n    name: x\nports: []\n"),
            "switch:\n    port-backend: af-xdp\n    name: x\nports: []\n"
        );
        assert_eq!(
            with_test_backend("ports: []\n"),
            "switch:\n  port-backend: af-xdp\nports: []\n"
        );
        let own = "switch:\n  port-backend: af-packet\n";
        assert_eq!(with_test_backend(own), own);
        std::env::set_var("LANYARD_TEST_BACKEND", "auto");
        assert_eq!(with_test_backend("ports: []\n"), "ports: []\n");
        std::env::remove_var("LANYARD_TEST_BACKEND");
    }
}
