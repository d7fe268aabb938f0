//! A real flow collector for tests: `nfcapd` (nfdump) in a namespace or
//! here, read back with `nfdump -o csv`.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why the nfdump tools cannot be used, if they cannot.
pub fn nfdump_missing() -> Option<String> {
    for bin in ["nfcapd", "nfdump"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
            .unwrap_or(false);
        if !found {
            return Some(format!(
                "{bin} not on PATH (install nfdump: apt-get install nfdump)"
            ));
        }
    }
    None
}

#[macro_export]
macro_rules! require_nfdump {
    () => {
        if let Some(why) = $crate::nfdump::nfdump_missing() {
            eprintln!("SKIPPED: {why}");
            println!("SKIPPED: {why}");
            return;
        }
    };
}

/// A running nfcapd on 127.0.0.1 (of a namespace, or here); killed and its
/// directory removed on drop.
pub struct Collector {
    child: Option<Child>,
    root: PathBuf,
    port: u16,
}

impl Collector {
    /// nfcapd here, on a free port.
    pub fn start(tag: &str) -> Collector {
        Collector::start_in(tag, None)
    }

    /// nfcapd in namespace `netns` (on `port`), or here on a free port.
    pub fn start_in(tag: &str, netns: Option<(&str, u16)>) -> Collector {
        let root = std::env::temp_dir().join(format!(
            "lanyard-flow-{tag}-{}-{}",
            std::process::id(),
            Instant::now().elapsed().as_nanos()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("flows")).unwrap();
        let mut c = Collector {
            child: None,
            root,
            port: 0,
        };
        // A free port: the kernel picks one, nfcapd takes it over (a small
        // race; retried).
        for _ in 0..5 {
            let port = match netns {
                Some((_, p)) => p,
                None => UdpSocket::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port(),
            };
            let log = std::fs::File::create(c.root.join("nfcapd.log")).unwrap();
            let mut cmd = match netns {
                Some((ns, _)) => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns, "nfcapd"]);
                    c
                }
                None => Command::new("nfcapd"),
            };
            let child = cmd
                .arg("-w")
                .arg(c.root.join("flows"))
                .args(["-b", "127.0.0.1", "-p", &port.to_string(), "-t", "3600"])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("spawn nfcapd");
            c.child = Some(child);
            c.port = port;
            if c.wait_ready() {
                return c;
            }
            c.kill();
        }
        panic!("nfcapd did not start: {}", c.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("nfcapd.log")).unwrap_or_default()
    }

    /// nfcapd is listening once it logs its startup.
    pub fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                return false;
            }
            if self.log().contains("Startup") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM (nfcapd writes its file) and wait for it to exit.
    pub fn terminate(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        panic!("nfcapd ignored SIGTERM: {}", self.log());
    }

    /// Stops nfcapd and reads its flows with `nfdump -o csv`.
    pub fn flows(&mut self) -> Vec<HashMap<String, String>> {
        self.terminate();
        let out = Command::new("nfdump")
            .arg("-R")
            .arg(self.root.join("flows"))
            .args(["-N", "-o", "csv"])
            .output()
            .expect("run nfdump");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "nfdump failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        parse_csv(&text)
    }
}

impl Collector {
    /// Stops nfcapd and streams its records through `nfdump -q -o
    /// fmt:FMT` (e.g. `"%sa,%da,%pkt,%byt"`; `-N`: plain numbers), one
    /// line per record to `each`, without holding them all: for millions
    /// of records. Returns the number of lines.
    pub fn for_each_record(&mut self, fmt: &str, mut each: impl FnMut(&str)) -> u64 {
        use std::io::BufRead;
        self.terminate();
        let mut child = Command::new("nfdump")
            .arg("-R")
            .arg(self.root.join("flows"))
            .args(["-N", "-q", "-o", &format!("fmt:{fmt}")])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run nfdump");
        let out = child.stdout.take().expect("nfdump stdout");
        let mut n = 0;
        for line in std::io::BufReader::new(out).lines() {
            let line = line.expect("nfdump output");
            let line = line.trim();
            if !line.is_empty() {
                each(line);
                n += 1;
            }
        }
        let st = child.wait_with_output().expect("nfdump");
        assert!(
            st.status.success(),
            "nfdump failed: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        n
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// nfdump's CSV: a header line starting "ts,te," then one line per flow,
/// until a blank line or "Summary".
pub fn parse_csv(text: &str) -> Vec<HashMap<String, String>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with("ts,te,"));
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cols: Vec<&str> = header.split(',').collect();
    lines
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("Summary"))
        .map(|l| {
            cols.iter()
                .zip(l.split(','))
                .map(|(c, v)| (c.to_string(), v.trim().to_string()))
                .collect()
        })
        .collect()
}
